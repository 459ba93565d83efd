/* quant.h - block-wise dynamic 8-bit quantization (Dettmers et al. 2021, as bitsandbytes):
 * a value is stored as the index of the nearest of 256 codes, scaled by its block's absolute
 * maximum. Pure functions over memory. */
#ifndef ZT_OPTIMIZER_QUANT_H
#define ZT_OPTIMIZER_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define ZT_QBLOCK 256 /* elements per block: one fp32 absmax each */

/* The dynamic map of bitsandbytes' create_dynamic_map (8 bits, 7 exponent bits): for each
 * exponent i = 0..6 the midpoints of evenly spaced boundaries on [0.1, 1] (2^i + 1
 * boundaries signed, 2^(i+1) + 1 unsigned) scaled by 10^(i-6), negated too when signed,
 * plus 0 and 1.0; sorted ascending. Computed in double, rounded to float once. */
void zt_qmap_dynamic(float map[256], int is_signed);

/* The index of the code nearest x in a sorted map (binary search; a tie goes to the lower
 * index; below the first code 0, above the last 255). x must not be NaN. */
uint8_t zt_quantize_nearest(const float map[256], float x);

/* The index of 0.0 in a map (the code of an all-zero block). */
uint8_t zt_qmap_zero(const float map[256]);

/* A lookup that makes zt_quantize_nearest one table read and at most one comparison: for
 * the floats whose top 16 bits are b, idx[b] is their code when all of them have the same
 * one; else the code c of the least of them with ZT_QIDX_PAIR set when each of them is c
 * or c + 1; else the code of the least with ZT_QIDX_SCAN set. */
#define ZT_QIDX_PAIR 0x100
#define ZT_QIDX_SCAN 0x200
void zt_qmap_index(const float map[256], uint16_t idx[65536]);

/* zt_quantize_nearest with the lookup: the same result for every x that is not NaN. */
static inline uint8_t zt_quantize_fast(const float map[256], const uint16_t idx[65536], float x)
{
    union { float f; uint32_t u; } b = {x};
    unsigned e = idx[b.u >> 16], c = e & 0xFF;
    if (!(e & (ZT_QIDX_PAIR | ZT_QIDX_SCAN)))
        return (uint8_t)c;
    while ((e & ZT_QIDX_SCAN) && c < 255 && map[c + 1] <= x)
        c++;
    return (uint8_t)(c < 255 && map[c + 1] - x < x - map[c] ? c + 1 : c);
}

/* The tables of the SIMD quantizer (adam8bit.c): the nearest code of x in [-1, 1] without a
 * table read per element. The map's codes above zero are the midpoints of 7 decades, evenly
 * spaced in each, then 1.0 (zt_qmap_dynamic), so |x| falls in one of 9 zones (zero, the 7
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
