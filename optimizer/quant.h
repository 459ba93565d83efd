/* quant.h - block-wise dynamic 8-bit quantization (Dettmers et al. 2021, as bitsandbytes):
 * a value is stored as the index of one of 256 codes, by bitsandbytes' rule, scaled by its
 * block's absolute maximum. Pure functions over memory; the moments' update is adam8bit.c's. */
#ifndef ZT_OPTIMIZER_QUANT_H
#define ZT_OPTIMIZER_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define ZT_QBLOCK 256 /* elements per block: one fp32 absmax each */

/* The dynamic map of bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7,
 * total_bits=8), bit for bit: for each exponent i = 0..6, b = torch.linspace(0.1, 1, k) in
 * float32 with k = 2^i + 1 boundaries (signed) or 2^(i+1) + 1 (unsigned); the means
 * (b[j] + b[j+1]) / 2 in float32; each times (float)10^(i-6) in float32 (exactly 1 for i = 6),
 * and negated too when signed; then 0 and 1.0; sorted ascending.
 * torch's linspace (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, 1.13 to 2.x) is not
 * one formula: step = (1 - 0.1f) / (k - 1) in float32, halfway = k / 2, and element j is
 * start + step j (j < halfway) or end - step (k - 1 - j); but its vectorized loop takes 2W
 * elements at a time (W = 8 lanes, 16 with AVX-512), each vector from a base computed that
 * way at its first index idx (the half chosen by idx) plus k step (k = 0..W-1, a product then
 * a sum), and only the remaining tail per element; and the AVX2 and AVX-512 builds of that
 * file fuse the base's and the tail's product and sum (one rounding) where the default build
 * does not. So the map depends on the CPU torch ran on: 12 to 45 entries differ, by 1 or 2
 * ulp, between the flavours (tests/ref/qmap_ref.py, run under ATEN_CPU_CAPABILITY=default, avx2,
 * avx512, writes each; the unit test compares all 256 entries of each). zt_qmap_dynamic is
 * the AVX2 flavour: torch on an AVX2 CPU (and the one the check compared against);
 * zt_qmap_dynamic_torch gives any. */
enum { ZT_QMAP_TORCH_DEFAULT = 0, ZT_QMAP_TORCH_AVX2 = 1, ZT_QMAP_TORCH_AVX512 = 2 };
void zt_qmap_dynamic_torch(float map[256], int is_signed, int flavour);
void zt_qmap_dynamic(float map[256], int is_signed);

/* bitsandbytes' quantize_2D (csrc/kernels.cu, the 8-bit blockwise optimizers' quantizer),
 * step for step: a binary search from pivot 127 with steps 64, 32, ..., 1 (x > map[pivot]
 * goes up), which ends on an even pivot p with map[p - 1] < x <= map[p + 1] (map[-1] taken as
 * -1.0 signed, 0 unsigned); then if x > map[p], p + 1 when x > (map[p + 1] + map[p]) * 0.5f,
 * else if x < (map[p - 1] + map[p]) * 0.5f, p - 1; else p. As a rule: with the float
 * midpoints t[k] = (map[k] + map[k + 1]) * 0.5f, x gets the code k + 1 over t[k] and k under
 * it, and x == t[k] exactly the even one of k, k + 1; below t[0] 0, above t[254] 255; NaN
 * fails every comparison: code 0. No sign correction here (zt_qsign_fix). */
uint8_t zt_quantize_bnb(const float map[256], int is_signed, float x);

/* bitsandbytes' sign correction of the first moment's code c of m / absmax (after
 * quantize_2D): when signbit(map[c]) != signbit(m), c + 1 if m > 0 else c - 1 (as a byte:
 * 0 - 1 = 255). On the signed map (codes 0..126 negative, 127 +0): a negative m or -0 that
 * rounds to 127 gets 126; where m / absmax is NaN (code 0) the result is 0 for a negative m
 * and -0, 1 for m = +inf (inf / inf), 255 for +0 (0 / 0: an all-zero block) and NaN. A NaN m
 * counts as positive: the CUDA kernel's NaNs are canonical (0x7fffffff), x86's are not. */
static inline uint8_t zt_qsign_fix(uint8_t c, float m)
{
    union { float f; uint32_t u; } b = {m};
    int neg_m = (b.u >> 31) && m == m, neg_c = c < 127;
    return neg_c == neg_m ? c : (uint8_t)(m > 0.0f ? c + 1 : c - 1);
}

/* The index of 0.0 in a map. */
uint8_t zt_qmap_zero(const float map[256]);

/* A lookup that makes zt_quantize_bnb one table read and at most one comparison: for the
 * floats whose top 16 bits are b, idx[b] is their code when all of them have the same one;
 * else the code c of the least of them with ZT_QIDX_PAIR set when each of them is c or c + 1;
 * else the code of the least with ZT_QIDX_SCAN set (NaN: 0 with ZT_QIDX_SCAN). */
#define ZT_QIDX_PAIR 0x100
#define ZT_QIDX_SCAN 0x200
void zt_qmap_index(const float map[256], int is_signed, uint16_t idx[65536]);

/* x is past the threshold between codes c and c + 1 (zt_quantize_bnb's rule) */
static inline int zt_qpast(const float map[256], unsigned c, float x)
{
    float t = (map[c] + map[c + 1]) * 0.5f;
    return x > t || (x == t && (c & 1));
}

/* zt_quantize_bnb with the lookup: the same code for every x, NaN included. */
static inline uint8_t zt_quantize_fast(const float map[256], const uint16_t idx[65536], float x)
{
    union { float f; uint32_t u; } b = {x};
    unsigned e = idx[b.u >> 16], c = e & 0xFF;
    if (!(e & (ZT_QIDX_PAIR | ZT_QIDX_SCAN)))
        return (uint8_t)c;
    while ((e & ZT_QIDX_SCAN) && c < 255 && zt_qpast(map, c, x))
        c++;
    return (uint8_t)(c < 255 && zt_qpast(map, c, x) ? c + 1 : c);
}

/* The tables of the SIMD quantizer (adam8bit.c): zt_quantize_fast's code of x in [-1, 1]
 * without a table read per element. The map's codes above zero are the midpoints of 7 decades, evenly
 * spaced in each to within float rounding, then 1.0 (zt_qmap_dynamic), so |x| falls in one of 9 zones (zero, the 7
 * decades, one); in zone z, P = (int32)(|x| a[z] + c[z]) (on AVX2 a float product, then a
 * sum; on AVX-512 one fused multiply-add; then truncation) is 4096 times the position among
 * the zone's codes plus 1, and the code is min(P >> 12, top[z]) (a signed map mirrors
 * negative x: max(254 - that, 0)). The zone of |x| is zlo[b] + (|x| >= zhi[b]) in its pair
 * of binades b = max(exponent / 2 - 48, 0) (a pair holds at most one zone boundary); a2, c2,
 * top2 are the same per b + 16 (|x| >= zhi[b]). That is exact wherever P % 4096 is neither 0
 * nor 1 (elsewhere P is within 1/4096 of a code boundary: about 1 element in 2000, and NaN
 * gives INT32_MIN); those lanes, |x| > 1 and negative x on the unsigned map go to
 * zt_quantize_fast. zt_qmap_zones builds the tables from zt_quantize_fast itself (each code's
 * least x found by bisection over the floats) and checks that claim at every code boundary
 * of both signs (P computed both ways, as the SIMD code does, on both sides of it); where a
 * tie makes a zone start at different |x| for the two signs, every |x| in between must be
 * left over. Returns 0, or -1 when the map does not have that shape (then the tables must not
 * be used). */
typedef struct zt_qzones {
    float a[16], c[16];     /* per zone (9 of 16 used) */
    int32_t top[16];
    int32_t zlo[16];        /* per pair of binades: the zone of its least value */
    float zhi[16];          /* the zone boundary in the pair (+inf: none) */
    float a2[32], c2[32];   /* per pair b and b + 16 (|x| >= zhi[b]): that zone's a, c, top */
    int32_t top2[32];
} zt_qzones;
int zt_qmap_zones(const float map[256], const uint16_t idx[65536], int is_signed, zt_qzones *z);

#endif
