/* adam8bit.c - block-wise 8-bit AdamW and its fp32-state twin (adam8bit.h), by one of three
 * kernels chosen at run time (the library builds without -march): scalar (the reference),
 * AVX2, or AVX-512 (F, BW, VL, DQ and VBMI: codes dequantized by byte permutes; per block
 * the update, then each moment's quantization with only its zone tables live). All give the
 * same bytes: the same float operations in the same order, IEEE sqrt and division, never a
 * fused multiply-add in the update (the SIMD functions are compiled with fp-contract=off; the
 * build's -std=c11 implies it too), and zt_quantize_fast's codes with the first moment's sign
 * correction (the SIMD quantizers compute them from quant.c's zone tables, the AVX-512 one
 * with an explicit fused multiply-add that the tables are checked for, and leave the
 * undecided lanes to it). Not here: the maps and tables. */
#include "adam8bit.h"
#include "../common/prof.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ZT_X86 1
#include <immintrin.h>
#define T_AVX2 __attribute__((target("avx2"), optimize("fp-contract=off")))
#define T_AVX512                                                                             \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi"),                  \
                   optimize("fp-contract=off")))
#endif

static inline uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void zt_adam8_maps_init(zt_adam8_maps *q)
{
    zt_qmap_dynamic(q->m, 1);
    zt_qmap_dynamic(q->v, 0);
    zt_qmap_index(q->m, 1, q->m_idx);
    zt_qmap_index(q->v, 0, q->v_idx);
    q->zones_ok = zt_qmap_zones(q->m, q->m_idx, 1, &q->m_zones) == 0 &&
                  zt_qmap_zones(q->v, q->v_idx, 0, &q->v_zones) == 0;
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 256; c++) {
            q->m_bytes[k][c] = (uint8_t)(fbits(q->m[c]) >> (8 * k));
            q->v_bytes[k][c] = (uint8_t)(fbits(q->v[c]) >> (8 * k));
        }
}

void zt_adam8bit_init(uint8_t *cm, uint8_t *cv, float *am, float *av, size_t n)
{
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    memset(cm, 0, n);
    memset(cv, 0, n);
    memset(am, 0, nb * sizeof(float));
    memset(av, 0, nb * sizeof(float));
}

/* the step's constants, in float32 as bitsandbytes' kernel computes them */
typedef struct consts {
    float b1, b2, one_b1, one_b2, eps_c2, step_size, keep, gs;
} consts;

static consts make_consts(const zt_adamw_hparams *hp, int decay)
{
    consts k;
    float t = (float)hp->step;
    float c1 = 1.0f - powf(hp->beta1, t), c2 = sqrtf(1.0f - powf(hp->beta2, t));
    k.b1 = hp->beta1;
    k.b2 = hp->beta2;
    k.one_b1 = 1.0f - hp->beta1;
    k.one_b2 = 1.0f - hp->beta2;
    k.eps_c2 = hp->eps * c2;
    k.step_size = -hp->lr * c2 / c1;
    k.keep = decay && hp->weight_decay > 0.0f ? 1.0f - hp->lr * hp->weight_decay : 1.0f;
    k.gs = hp->grad_scale;
    return k;
}

/* p + t with p the first operand: where both are NaN the result is p's (x86), whichever
 * order the compiler would pick for a plain sum (the SIMD kernels do the same) */
static inline float add_p_first(float p, float t)
{
#ifdef ZT_X86
    __asm__("addss %1, %0" : "+x"(p) : "x"(t));
    return p;
#else
    return p + t;
#endif
}

/* One block: p, g, cm, cv: [len] (len <= ZT_QBLOCK; len < ZT_QBLOCK only for a tensor's last
 * block), am, av: the block's absmax. The reference every other kernel matches byte for
 * byte; bitsandbytes' kOptimizerStatic8bit2StateBlockwise (adam8bit.h) element for element. */
static void block_scalar(const zt_adam8_maps *q, const consts *k, float *p, const float *g,
                         uint8_t *cm, uint8_t *cv, float *am, float *av, size_t len)
{
    float m[ZT_QBLOCK], v[ZT_QBLOCK], am1 = -FLT_MAX, av1 = -FLT_MAX;
    float a_m = *am, a_v = *av;
    for (size_t j = 0; j < len; j++) { /* the moments, their block maxima */
        if (isfinite(g[j])) {
            float gj = g[j] * k->gs;
            float vj = q->v[cv[j]] * a_v, mj = q->m[cm[j]] * a_m;
            v[j] = vj * k->b2 + k->one_b2 * gj * gj;
            m[j] = mj * k->b1 + k->one_b1 * gj;
        } else { /* a non-finite gradient: the element starts again */
            m[j] = 0.0f;
            v[j] = 0.0f;
        }
        float am_j = fabsf(m[j]), av_j = fabsf(v[j]); /* fmaxf: a NaN is passed over */
        am1 = am_j > am1 ? am_j : am1;
        av1 = av_j > av1 ? av_j : av1;
    }
    if (len < ZT_QBLOCK) { /* the padding of a partial block (adam8bit.h) */
        float g0 = 0.0f * k->gs, mj = q->m[128] * a_m, vj = q->v[0] * a_v;
        float pm = fabsf(mj * k->b1 + k->one_b1 * g0), pv = fabsf(vj * k->b2 + k->one_b2 * g0 * g0);
        am1 = pm > am1 ? pm : am1;
        av1 = pv > av1 ? pv : av1;
    }
    for (size_t j = 0; j < len; j++) /* the parameters (unchanged where g is not finite) */
        if (isfinite(g[j]))
            p[j] = add_p_first(p[j], k->step_size * (m[j] / (sqrtf(v[j]) + k->eps_c2))) *
                   k->keep;
    for (size_t j = 0; j < len; j++) {
        cm[j] = zt_qsign_fix(zt_quantize_fast(q->m, q->m_idx, m[j] / am1), m[j]);
        cv[j] = zt_quantize_fast(q->v, q->v_idx, v[j] / av1);
    }
    *am = am1;
    *av = av1;
}

/* Whole blocks [0, nb) by one kernel (p, g, cm, cv: [nb * ZT_QBLOCK]; am, av: [nb]). */
typedef void range_fn(const zt_adam8_maps *q, const consts *k, float *p, const float *g,
                      uint8_t *cm, uint8_t *cv, float *am, float *av, size_t nb);

static void range_scalar(const zt_adam8_maps *q, const consts *k, float *p, const float *g,
                         uint8_t *cm, uint8_t *cv, float *am, float *av, size_t nb)
{
    for (size_t b = 0; b < nb; b++)
        block_scalar(q, k, p + b * ZT_QBLOCK, g + b * ZT_QBLOCK, cm + b * ZT_QBLOCK,
                     cv + b * ZT_QBLOCK, am + b, av + b, ZT_QBLOCK);
}

#ifdef ZT_X86
/* The first moment's codes of a block whose absmax a1 is not positive: 0 (all m are +-0, or
 * all NaN and a1 = -FLT_MAX), so every m / a1 is NaN, code 0 before the sign correction. */
static void codes_m_unscaled(const float *m, uint8_t *cm, size_t len)
{
    for (size_t j = 0; j < len; j++)
        cm[j] = zt_qsign_fix(0, m[j]);
}

/* The SIMD quantizers leave some lanes to the scalar code: the codes of x / *scale (of x where
 * scale is NULL) as block_scalar gives them, with the sign correction by x (the moment) on
 * the signed map. x, codes: [16]. */
static void requantize(const zt_adam8_maps *q, int is_signed, const float *x,
                       const float *scale, uint8_t *codes, unsigned lanes)
{
    for (; lanes; lanes &= lanes - 1) {
        int i = __builtin_ctz(lanes);
        float xi = scale ? x[i] / *scale : x[i];
        codes[i] = is_signed ? zt_qsign_fix(zt_quantize_fast(q->m, q->m_idx, xi), x[i])
                             : zt_quantize_fast(q->v, q->v_idx, xi);
    }
}

/* The SIMD kernels quantize m / am1 and v / av1 for am1, av1 > 0: in [-1, 1] or NaN by
 * construction (each block's absmax is its largest magnitude), NaN left over by the zone
 * tables themselves (quant.h); negative v exist only for a negative absmax read back, and are
 * left over. On the signed map the sign correction is, for x not NaN (whose sign is m's),
 * min(code, 126) for negative x (a negative x or -0 at most 127 before it). zt_adam8_quantize_path
 * takes any x (the moment, absmax 1): check = 1 leaves |x| > 1 over as well. */

/* ---- AVX2: 8 lanes; dequantization by gathers, quantization by the zone tables ---------- */

typedef struct zq256 {
    __m256 a[2], c[2], top[2], zlo[2], zhi[2]; /* top, zlo: int32 bit patterns */
} zq256;

static inline T_AVX2 zq256 zq256_load(const zt_qzones *z)
{
    zq256 t;
    for (int h = 0; h < 2; h++) {
        t.a[h] = _mm256_loadu_ps(z->a + 8 * h);
        t.c[h] = _mm256_loadu_ps(z->c + 8 * h);
        t.top[h] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(z->top + 8 * h)));
        t.zlo[h] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(z->zlo + 8 * h)));
        t.zhi[h] = _mm256_loadu_ps(z->zhi + 8 * h);
    }
    return t;
}

/* t[i] for i in 0..15 (the low 4 bits of each lane) */
static inline T_AVX2 __m256 look16_256(const __m256 t[2], __m256i i)
{
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t[0], i),
                            _mm256_permutevar8x32_ps(t[1], i),
                            _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)));
}

/* The codes of 8 values by the zone tables (by zone); *lanes: those to take from
 * zt_quantize_fast instead. */
static inline T_AVX2 __m256i quant256(const zq256 *t, __m256 x, int is_signed, int check,
                                      int *lanes)
{
    const __m256i zero = _mm256_setzero_si256();
    __m256i bits = _mm256_castps_si256(x), abits = bits, bad = zero;
    if (is_signed)
        abits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    if (check && is_signed) /* |x| > 1 */
        bad = _mm256_cmpgt_epi32(abits, _mm256_set1_epi32(0x3F800000));
    else if (check) /* x > 1 or negative: an unsigned comparison */
        bad = _mm256_cmpgt_epi32(_mm256_xor_si256(bits, _mm256_set1_epi32(INT32_MIN)),
                                 _mm256_set1_epi32((int32_t)(0x3F800000u ^ 0x80000000u)));
    else if (!is_signed) /* negative x */
        bad = _mm256_srai_epi32(bits, 31);
    __m256 a = _mm256_castsi256_ps(abits);
    __m256i pair = _mm256_subs_epu16(_mm256_srli_epi32(abits, 24), _mm256_set1_epi32(48));
    __m256 up = _mm256_cmp_ps(a, look16_256(t->zhi, pair), _CMP_GE_OQ);
    __m256i zone = _mm256_sub_epi32(_mm256_castps_si256(look16_256(t->zlo, pair)),
                                    _mm256_castps_si256(up));
    __m256i p = _mm256_cvttps_epi32(
        _mm256_add_ps(_mm256_mul_ps(a, look16_256(t->a, zone)), look16_256(t->c, zone)));
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(p, _mm256_set1_epi32(4094)),
                                                  zero));
    __m256i code = _mm256_min_epi32(_mm256_srli_epi32(p, 12),
                                    _mm256_castps_si256(look16_256(t->top, zone)));
    if (is_signed) { /* negative x: 254 - code, at most 126 (the sign correction), at least 0 */
        __m256i mirror = _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), code),
                                          _mm256_set1_epi32(126));
        code = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(code),
                                                    _mm256_castsi256_ps(mirror), x));
        code = _mm256_max_epi32(code, zero);
    }
    *lanes = _mm256_movemask_ps(_mm256_castsi256_ps(bad));
    return code;
}

/* p + t with p the first operand, as the scalar code has it: where both are NaN the result is
 * the first one's (x86), and the compiler may swap an intrinsic's operands */
static inline T_AVX2 __m256 add_p_first_256(__m256 p, __m256 t)
{
    __m256 u;
    __asm__("vaddps %2, %1, %0" : "=x"(u) : "x"(p), "x"(t));
    return u;
}

static inline T_AVX2 void store8_codes(uint8_t *out, __m256i c)
{
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64((__m128i *)out, _mm_packus_epi16(w, w));
}

/* the largest lane (every lane >= -FLT_MAX and not NaN: the order does not matter) */
static inline T_AVX2 float hmax256(__m256 x)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

/* x, codes: [ZT_QBLOCK]: the codes of x / scale (scale > 0) */
static inline T_AVX2 void quant_block256(const zt_adam8_maps *q, int is_signed, const float *x,
                                         float scale, uint8_t *codes)
{
    zq256 t = zq256_load(is_signed ? &q->m_zones : &q->v_zones);
    __m256 d = _mm256_set1_ps(scale);
    for (int j = 0; j < ZT_QBLOCK; j += 8) {
        __m256 xj = _mm256_div_ps(_mm256_loadu_ps(x + j), d);
        int lanes;
        store8_codes(codes + j, quant256(&t, xj, is_signed, 0, &lanes));
        if (lanes)
            requantize(q, is_signed, x + j, &scale, codes + j, (unsigned)lanes);
    }
}

static inline T_AVX2 __attribute__((always_inline)) void
block_avx2_body(const zt_adam8_maps *q, const consts *k, float *p, const float *g, uint8_t *cm,
                uint8_t *cv, float *am, float *av, int unit_gs, int unit_keep)
{
    float m[ZT_QBLOCK], v[ZT_QBLOCK];
    const __m256 b1 = _mm256_set1_ps(k->b1), b2 = _mm256_set1_ps(k->b2),
                 one_b1 = _mm256_set1_ps(k->one_b1), one_b2 = _mm256_set1_ps(k->one_b2),
                 eps_c2 = _mm256_set1_ps(k->eps_c2), step = _mm256_set1_ps(k->step_size),
                 keep = _mm256_set1_ps(k->keep), gs = _mm256_set1_ps(k->gs),
                 a_m = _mm256_set1_ps(*am), a_v = _mm256_set1_ps(*av),
                 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)),
                 inf = _mm256_set1_ps(INFINITY);
    __m256 mx_m = _mm256_set1_ps(-FLT_MAX), mx_v = _mm256_set1_ps(-FLT_MAX);
    for (int j = 0; j < ZT_QBLOCK; j += 8) {
        __m256i ic = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(cm + j)));
        __m256i iv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(cv + j)));
        __m256 mj = _mm256_mul_ps(_mm256_i32gather_ps(q->m, ic, 4), a_m);
        __m256 vj = _mm256_mul_ps(_mm256_i32gather_ps(q->v, iv, 4), a_v);
        __m256 gj = _mm256_loadu_ps(g + j);
        __m256 fin = _mm256_cmp_ps(_mm256_and_ps(gj, absmask), inf, _CMP_LT_OQ); /* g's own */
        if (!unit_gs) /* g * 1 is g (where it matters: g finite) */
            gj = _mm256_mul_ps(gj, gs);
        mj = _mm256_and_ps(fin, _mm256_add_ps(_mm256_mul_ps(mj, b1), _mm256_mul_ps(one_b1, gj)));
        vj = _mm256_and_ps(fin, _mm256_add_ps(_mm256_mul_ps(vj, b2),
                                              _mm256_mul_ps(_mm256_mul_ps(one_b2, gj), gj)));
        mx_m = _mm256_max_ps(_mm256_and_ps(mj, absmask), mx_m);
        mx_v = _mm256_max_ps(_mm256_and_ps(vj, absmask), mx_v);
        __m256 pj = _mm256_loadu_ps(p + j);
        __m256 den = _mm256_add_ps(_mm256_sqrt_ps(vj), eps_c2);
        __m256 u = add_p_first_256(pj, _mm256_mul_ps(step, _mm256_div_ps(mj, den)));
        if (!unit_keep) /* u * 1 is u */
            u = _mm256_mul_ps(u, keep);
        _mm256_storeu_ps(p + j, _mm256_blendv_ps(pj, u, fin));
        _mm256_storeu_ps(m + j, mj);
        _mm256_storeu_ps(v + j, vj);
    }
    float am1 = hmax256(mx_m), av1 = hmax256(mx_v);
    if (am1 > 0.0f)
        quant_block256(q, 1, m, am1, cm);
    else
        codes_m_unscaled(m, cm, ZT_QBLOCK);
    if (av1 > 0.0f)
        quant_block256(q, 0, v, av1, cv);
    else /* every v / av1 NaN: code 0 */
        memset(cv, 0, ZT_QBLOCK);
    *am = am1;
    *av = av1;
}

static inline T_AVX2 __attribute__((always_inline)) void
range_avx2_body(const zt_adam8_maps *q, const consts *k, float *p, const float *g, uint8_t *cm,
                uint8_t *cv, float *am, float *av, size_t nb, int unit_gs, int unit_keep)
{
    for (size_t b = 0; b < nb; b++)
        block_avx2_body(q, k, p + b * ZT_QBLOCK, g + b * ZT_QBLOCK, cm + b * ZT_QBLOCK,
                        cv + b * ZT_QBLOCK, am + b, av + b, unit_gs, unit_keep);
}

static T_AVX2 void quant_avx2(const zt_adam8_maps *q, int is_signed, const float *x,
                              uint8_t *codes, size_t n)
{
    zq256 t = zq256_load(is_signed ? &q->m_zones : &q->v_zones);
    for (size_t j = 0; j + 8 <= n; j += 8) {
        int lanes;
        store8_codes(codes + j, quant256(&t, _mm256_loadu_ps(x + j), is_signed, 1, &lanes));
        requantize(q, is_signed, x + j, NULL, codes + j, (unsigned)lanes);
    }
}

/* ---- AVX-512: 16 lanes; dequantization by byte permutes (VBMI), 64 codes at a time ------ */

typedef struct zq512 {
    __m512i zhi, top_lo, top_hi; /* zhi: the floats' bits */
    __m512 a_lo, a_hi, c_lo, c_hi;
} zq512;

static inline T_AVX512 zq512 zq512_load(const zt_qzones *z)
{
    zq512 t = {_mm512_loadu_si512(z->zhi),     _mm512_loadu_si512(z->top2),
               _mm512_loadu_si512(z->top2 + 16), _mm512_loadu_ps(z->a2),
               _mm512_loadu_ps(z->a2 + 16),    _mm512_loadu_ps(z->c2),
               _mm512_loadu_ps(z->c2 + 16)};
    return t;
}

/* The codes of 16 values by the zone tables (by pair of binades and side of its boundary), as
 * int32 lanes in -1..255 to be packed with unsigned saturation (a negative x on the signed
 * map: min(254 - code, 126), -1 saturating to 0); *lanes: those to take from zt_quantize_fast instead.
 * P by one fused multiply-add (zt_qmap_zones checks the tables for it as for AVX2's product
 * and sum). */
static inline T_AVX512 __m512i quant512(const zq512 *t, __m512 x, int is_signed, int check,
                                        __mmask16 *lanes)
{
    __m512i bits = _mm512_castps_si512(x);
    __m512i abits = is_signed ? _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)) : bits;
    __mmask16 bad = 0;
    if (check) /* |x| > 1; on the unsigned map negative x too */
        bad = _mm512_cmpgt_epu32_mask(abits, _mm512_set1_epi32(0x3F800000));
    else if (!is_signed) /* negative x */
        bad = _mm512_movepi32_mask(bits);
    __m512i pair = _mm512_subs_epu16(_mm512_srli_epi32(abits, 24), _mm512_set1_epi32(48));
    /* |x| >= zhi: compared as integers (both positive floats) */
    __mmask16 up = _mm512_cmpge_epu32_mask(abits, _mm512_permutexvar_epi32(pair, t->zhi));
    __m512i key = _mm512_mask_or_epi32(pair, up, pair, _mm512_set1_epi32(16));
    __m512 za = _mm512_permutex2var_ps(t->a_lo, key, t->a_hi);
    __m512 zc = _mm512_permutex2var_ps(t->c_lo, key, t->c_hi);
    __m512i p = _mm512_cvttps_epi32(_mm512_fmadd_ps(_mm512_castsi512_ps(abits), za, zc));
    bad |= _mm512_testn_epi32_mask(p, _mm512_set1_epi32(4094));
    __m512i code = _mm512_min_epi32(_mm512_srli_epi32(p, 12),
                                    _mm512_permutex2var_epi32(t->top_lo, key, t->top_hi));
    if (is_signed) { /* negative x: 254 - code, at most 126 (the sign correction) */
        __mmask16 neg = _mm512_movepi32_mask(bits);
        code = _mm512_mask_sub_epi32(code, neg, _mm512_set1_epi32(254), code);
        code = _mm512_mask_min_epi32(code, neg, code, _mm512_set1_epi32(126));
    }
    *lanes = bad;
    return code;
}

/* 64 bytes of four vectors of 16 int32 codes (saturated to 0..255), in order: the packs work
 * within 128-bit lanes (lane l of the result holds lanes 4l..4l+3 of c[0], c[1], c[2], c[3]
 * in turn), the dword permute puts the groups of 4 in place */
static inline T_AVX512 void store64_codes(uint8_t *out, const __m512i c[4])
{
    __m512i w = _mm512_packus_epi16(_mm512_packus_epi32(c[0], c[1]),
                                    _mm512_packus_epi32(c[2], c[3]));
    _mm512_storeu_si512(out, _mm512_permutexvar_epi32(
                                 _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3,
                                                   7, 11, 15),
                                 w));
}

/* 64 codes of x (x: [64]), or of x / *scale where scale is given: four vectors quantized,
 * packed and stored at once. The loops are unrolled and the requantization (a call, rarely needed) is
 * behind one unlikely test: rolled, the compiler kept the vectors on the stack and saved the
 * zone tables around the calls on every group. */
static inline T_AVX512 __attribute__((always_inline)) void
quant64_512(const zt_adam8_maps *q, const zq512 *t, int is_signed, int check, const float *x,
            const float *scale, uint8_t *codes)
{
    __m512 xr[4];
    __m512i c[4];
    __mmask16 lanes[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        xr[r] = _mm512_loadu_ps(x + 16 * r);
        if (scale)
            xr[r] = _mm512_div_ps(xr[r], _mm512_set1_ps(*scale));
        c[r] = quant512(t, xr[r], is_signed, check, &lanes[r]);
    }
    store64_codes(codes, c);
    if (__builtin_expect((lanes[0] | lanes[1] | lanes[2] | lanes[3]) == 0, 1))
        return;
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        if (lanes[r])
            requantize(q, is_signed, x + 16 * r, scale, codes + 16 * r, lanes[r]);
}

/* The floats of 64 codes (a table of 256 as 4 byte planes, bytes[k][code] = byte k):
 * out[r] = elements 16r..16r+15. The codes are first transposed in 4 x 4 groups of 4 so
 * that the byte interleaving (within 128-bit lanes) lands in order. */
static inline T_AVX512 __m512i plane64(const uint8_t *t, __m512i c, __mmask64 high)
{
    __m512i lo = _mm512_permutex2var_epi8(_mm512_loadu_si512(t), c,
                                          _mm512_loadu_si512(t + 64));
    __m512i hi = _mm512_permutex2var_epi8(_mm512_loadu_si512(t + 128), c,
                                          _mm512_loadu_si512(t + 192));
    return _mm512_mask_blend_epi8(high, lo, hi);
}

static inline T_AVX512 void dequant64(const uint8_t bytes[4][256], const uint8_t *codes,
                                      __m512 out[4])
{
    static const uint8_t order[64] = {
        0,  1,  2,  3,  16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51,
        4,  5,  6,  7,  20, 21, 22, 23, 36, 37, 38, 39, 52, 53, 54, 55,
        8,  9,  10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59,
        12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63};
    __m512i c = _mm512_permutexvar_epi8(_mm512_loadu_si512(order), _mm512_loadu_si512(codes));
    __mmask64 high = _mm512_movepi8_mask(c); /* codes 128..255 */
    __m512i b0 = plane64(bytes[0], c, high), b1 = plane64(bytes[1], c, high);
    __m512i b2 = plane64(bytes[2], c, high), b3 = plane64(bytes[3], c, high);
    __m512i l01 = _mm512_unpacklo_epi8(b0, b1), h01 = _mm512_unpackhi_epi8(b0, b1);
    __m512i l23 = _mm512_unpacklo_epi8(b2, b3), h23 = _mm512_unpackhi_epi8(b2, b3);
    out[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(l01, l23));
    out[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(l01, l23));
    out[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(h01, h23));
    out[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(h01, h23));
}

/* p + t, p first (add_p_first_256) */
static inline T_AVX512 __m512 add_p_first_512(__m512 p, __m512 t)
{
    __m512 u;
    __asm__("vaddps %2, %1, %0" : "=v"(u) : "v"(p), "v"(t));
    return u;
}

/* the block's constants */
typedef struct k512 {
    __m512 b1, b2, one_b1, one_b2, eps_c2, step, keep, gs, a_m, a_v;
} k512;

/* 16 elements: the moments (into m, v), their magnitudes' running maxima, the parameters */
static inline T_AVX512 __attribute__((always_inline)) void
step16_512(const k512 *c, __m512 mf, __m512 vf, float *p, const float *g, float *m, float *v,
           __m512 *mx_m, __m512 *mx_v, int unit_gs, int unit_keep)
{
    __m512 gj = _mm512_loadu_ps(g);
    /* g's own finiteness: not NaN (quiet 0x01, signalling 0x80) nor infinite (0x08, 0x10) */
    __mmask16 fin = (__mmask16)~_mm512_fpclass_ps_mask(gj, 0x99);
    if (!unit_gs) /* g * 1 is g (where it matters: g finite) */
        gj = _mm512_mul_ps(gj, c->gs);
    __m512 mj = _mm512_maskz_add_ps(fin, _mm512_mul_ps(_mm512_mul_ps(mf, c->a_m), c->b1),
                                    _mm512_mul_ps(c->one_b1, gj));
    __m512 vj = _mm512_maskz_add_ps(fin, _mm512_mul_ps(_mm512_mul_ps(vf, c->a_v), c->b2),
                                    _mm512_mul_ps(_mm512_mul_ps(c->one_b2, gj), gj));
    *mx_m = _mm512_max_ps(_mm512_abs_ps(mj), *mx_m);
    *mx_v = _mm512_max_ps(_mm512_abs_ps(vj), *mx_v);
    __m512 den = _mm512_add_ps(_mm512_sqrt_ps(vj), c->eps_c2);
    __m512 u = add_p_first_512(_mm512_loadu_ps(p),
                               _mm512_mul_ps(c->step, _mm512_div_ps(mj, den)));
    if (!unit_keep) /* u * 1 is u */
        u = _mm512_mul_ps(u, c->keep);
    _mm512_mask_storeu_ps(p, fin, u);
    _mm512_storeu_ps(m, mj);
    _mm512_storeu_ps(v, vj);
}

/* a block's codes of x / amax (x: [ZT_QBLOCK], amax > 0) */
static inline T_AVX512 __attribute__((always_inline)) void
quant_block512(const zt_adam8_maps *q, const zq512 *t, int is_signed, const float *x,
               float amax, uint8_t *codes)
{
    for (int j = 0; j < ZT_QBLOCK; j += 64)
        quant64_512(q, t, is_signed, 0, x + j, &amax, codes + j);
}

/* Blocks [0, nb) (p, g, cm, cv: [nb * ZT_QBLOCK]; am, av: [nb]): per block the moments and
 * parameters, then the first moment's codes, then the second's. (Interleaving one block's
 * quantization with the next block's update, software-pipelined, was 3.6% slower here: the
 * two zone tables and the constants did not fit in the registers together; so were, by 13-18%,
 * one moment's codes of block b - 1 in each half of block b's update, 64 or 16 elements at a
 * time: the shared divider and the extra loads left nothing to gain.) */
static inline T_AVX512 __attribute__((always_inline)) void
range_avx512_body(const zt_adam8_maps *q, const consts *k, float *p, const float *g,
                  uint8_t *cm, uint8_t *cv, float *am, float *av, size_t nb, int unit_gs,
                  int unit_keep)
{
    float mbuf[ZT_QBLOCK], vbuf[ZT_QBLOCK];
    k512 c = {_mm512_set1_ps(k->b1),     _mm512_set1_ps(k->b2),
              _mm512_set1_ps(k->one_b1), _mm512_set1_ps(k->one_b2),
              _mm512_set1_ps(k->eps_c2), _mm512_set1_ps(k->step_size),
              _mm512_set1_ps(k->keep),   _mm512_set1_ps(k->gs),
              _mm512_setzero_ps(),       _mm512_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * ZT_QBLOCK;
        __m512 mx_m = _mm512_set1_ps(-FLT_MAX), mx_v = _mm512_set1_ps(-FLT_MAX);
        c.a_m = _mm512_set1_ps(am[b]);
        c.a_v = _mm512_set1_ps(av[b]);
        for (int o = 0; o < ZT_QBLOCK; o += 64) {
            __m512 mf[4], vf[4];
            dequant64(q->m_bytes, cm + lo + o, mf);
            dequant64(q->v_bytes, cv + lo + o, vf);
#pragma GCC unroll 4 /* rolled, the dequantized floats went through the stack */
            for (int r = 0; r < 4; r++) {
                int j = o + 16 * r;
                step16_512(&c, mf[r], vf[r], p + lo + j, g + lo + j, mbuf + j, vbuf + j, &mx_m,
                           &mx_v, unit_gs, unit_keep);
            }
        }
        float am1 = _mm512_reduce_max_ps(mx_m), av1 = _mm512_reduce_max_ps(mx_v);
        am[b] = am1;
        av[b] = av1;
        if (am1 > 0.0f) {
            zq512 tm = zq512_load(&q->m_zones);
            quant_block512(q, &tm, 1, mbuf, am1, cm + lo);
        } else
            codes_m_unscaled(mbuf, cm + lo, ZT_QBLOCK);
        if (av1 > 0.0f) {
            zq512 tv = zq512_load(&q->v_zones);
            quant_block512(q, &tv, 0, vbuf, av1, cv + lo);
        } else /* every v / av1 NaN: code 0 */
            memset(cv + lo, 0, ZT_QBLOCK);
    }
}

/* n a multiple of 16: by 64, the last 16..48 through a zero-padded copy */
static T_AVX512 void quant_avx512(const zt_adam8_maps *q, int is_signed, const float *x,
                                  uint8_t *codes, size_t n)
{
    zq512 t = zq512_load(is_signed ? &q->m_zones : &q->v_zones);
    size_t j = 0;
    for (; j + 64 <= n; j += 64)
        quant64_512(q, &t, is_signed, 1, x + j, NULL, codes + j);
    if (j < n) {
        float tail[64] = {0};
        uint8_t tc[64];
        memcpy(tail, x + j, (n - j) * sizeof(float));
        quant64_512(q, &t, is_signed, 1, tail, NULL, tc);
        memcpy(codes + j, tc, n - j);
    }
}

/* the kernels over nb whole blocks, by whether grad_scale and keep are 1 (a multiplication by
 * 1 left out) */
#define RANGE_VARIANT(isa, attr, gs1, keep1)                                                   \
    static attr void range_##isa##_##gs1##keep1(const zt_adam8_maps *q, const consts *k,      \
                                                float *p, const float *g, uint8_t *cm,        \
                                                uint8_t *cv, float *am, float *av, size_t nb) \
    {                                                                                         \
        range_##isa##_body(q, k, p, g, cm, cv, am, av, nb, gs1, keep1);                       \
    }
RANGE_VARIANT(avx2, T_AVX2, 0, 0)
RANGE_VARIANT(avx2, T_AVX2, 0, 1)
RANGE_VARIANT(avx2, T_AVX2, 1, 0)
RANGE_VARIANT(avx2, T_AVX2, 1, 1)
RANGE_VARIANT(avx512, T_AVX512, 0, 0)
RANGE_VARIANT(avx512, T_AVX512, 0, 1)
RANGE_VARIANT(avx512, T_AVX512, 1, 0)
RANGE_VARIANT(avx512, T_AVX512, 1, 1)
#undef RANGE_VARIANT
#endif /* ZT_X86 */

/* ---- dispatch ----------------------------------------------------------------------------- */

static int cpu_runs(int path)
{
    if (path == ZT_ADAM8_SCALAR)
        return 1;
#ifdef ZT_X86
    __builtin_cpu_init();
    if (path == ZT_ADAM8_AVX2)
        return __builtin_cpu_supports("avx2");
    if (path == ZT_ADAM8_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vbmi");
#endif
    return 0;
}

int zt_adam8bit_path_available(const zt_adam8_maps *q, int path)
{
    if (path == ZT_ADAM8_SCALAR)
        return 1;
    return (path == ZT_ADAM8_AVX2 || path == ZT_ADAM8_AVX512) && q->zones_ok && cpu_runs(path);
}

int zt_adam8bit_path(const zt_adam8_maps *q)
{
    if (zt_adam8bit_path_available(q, ZT_ADAM8_AVX512))
        return ZT_ADAM8_AVX512;
    if (zt_adam8bit_path_available(q, ZT_ADAM8_AVX2))
        return ZT_ADAM8_AVX2;
    return ZT_ADAM8_SCALAR;
}

const char *zt_adam8bit_path_name(int path)
{
    switch (path) {
    case ZT_ADAM8_SCALAR: return "scalar";
    case ZT_ADAM8_AVX2: return "avx2";
    case ZT_ADAM8_AVX512: return "avx512";
    default: return "unknown";
    }
}

static range_fn *path_range(int path, const consts *k)
{
#ifdef ZT_X86
    int v = 2 * (k->gs == 1.0f) + (k->keep == 1.0f);
    static range_fn *const avx512[4] = {range_avx512_00, range_avx512_01, range_avx512_10,
                                        range_avx512_11};
    static range_fn *const avx2[4] = {range_avx2_00, range_avx2_01, range_avx2_10,
                                      range_avx2_11};
    if (path == ZT_ADAM8_AVX512)
        return avx512[v];
    if (path == ZT_ADAM8_AVX2)
        return avx2[v];
#endif
    (void)path;
    (void)k;
    return range_scalar;
}

int zt_adam8bit_update_path(int path, const zt_adam8_maps *q, float *p, const float *g,
                            uint8_t *cm, uint8_t *cv, float *am, float *av, size_t n,
                            const zt_adamw_hparams *hp, int decay)
{
    if (path == ZT_ADAM8_AUTO)
        path = zt_adam8bit_path(q);
    if (!zt_adam8bit_path_available(q, path))
        return -ENOTSUP;
    double t0 = ZT_PROF_T0();
    consts k = make_consts(hp, decay);
    range_fn *run = path_range(path, &k);
    enum { CHUNK = 32 }; /* blocks per task */
    size_t nfull = n / ZT_QBLOCK, nc = (nfull + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c <= nc; c++) {
        size_t b0 = c * CHUNK, lo = b0 * ZT_QBLOCK;
        if (c < nc)
            run(q, &k, p + lo, g + lo, cm + lo, cv + lo, am + b0, av + b0,
                nfull - b0 < CHUNK ? nfull - b0 : CHUNK);
        else if (n > nfull * ZT_QBLOCK) /* the partial last block */
            block_scalar(q, &k, p + nfull * ZT_QBLOCK, g + nfull * ZT_QBLOCK,
                         cm + nfull * ZT_QBLOCK, cv + nfull * ZT_QBLOCK, am + nfull, av + nfull,
                         n - nfull * ZT_QBLOCK);
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 30.0 * (double)n, 14.0 * (double)n);
    return 0;
}

void zt_adam8bit_update(const zt_adam8_maps *q, float *p, const float *g, uint8_t *cm,
                        uint8_t *cv, float *am, float *av, size_t n, const zt_adamw_hparams *hp,
                        int decay)
{
    zt_adam8bit_update_path(ZT_ADAM8_AUTO, q, p, g, cm, cv, am, av, n, hp, decay);
}

int zt_adam8_quantize_path(int path, const zt_adam8_maps *q, int is_signed, const float *x,
                           uint8_t *codes, size_t n)
{
    if (path == ZT_ADAM8_AUTO)
        path = zt_adam8bit_path(q);
    if (!zt_adam8bit_path_available(q, path))
        return -ENOTSUP;
    size_t done = 0;
#ifdef ZT_X86
    if (path == ZT_ADAM8_AVX512) {
        done = n - n % 16;
        quant_avx512(q, is_signed, x, codes, done);
    } else if (path == ZT_ADAM8_AVX2) {
        done = n - n % 8;
        quant_avx2(q, is_signed, x, codes, done);
    }
#endif
    for (size_t j = done; j < n; j++)
        codes[j] = is_signed ? zt_qsign_fix(zt_quantize_fast(q->m, q->m_idx, x[j]), x[j])
                             : zt_quantize_fast(q->v, q->v_idx, x[j]);
    return 0;
}

/* ---- fp32 moments ------------------------------------------------------------------------ */

/* The element loop without a branch: computed everywhere, then kept by a bit mask where g is
 * finite (else p as it was, m = v = +0), so that the compiler vectorizes it at each kernel's
 * width (a ?: would leave the division under a branch, which it does not if-convert without
 * masked stores): the scalar reference's operations lane by lane. */
static inline __attribute__((always_inline)) void adam32_range(const consts *k, float *p,
                                                              const float *g, float *m,
                                                              float *v, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i] * k->gs, p0 = p[i];
        uint32_t fin = 0u - (uint32_t)(fabsf(gi) <= FLT_MAX); /* isfinite: all ones */
        /* (1 - b2) (g g): the 32-bit kernel's order (the 8-bit one's is ((1 - b2) g) g) */
        float mi = m[i] * k->b1 + k->one_b1 * gi, vi = v[i] * k->b2 + k->one_b2 * (gi * gi);
        float pi = (p0 + k->step_size * (mi / (sqrtf(vi) + k->eps_c2))) * k->keep;
        p[i] = bitsf((fbits(pi) & fin) | (fbits(p0) & ~fin));
        m[i] = bitsf(fbits(mi) & fin);
        v[i] = bitsf(fbits(vi) & fin);
    }
}

typedef void span32_fn(const consts *k, float *p, const float *g, float *m, float *v, size_t lo,
                      size_t hi);

static void adam32_scalar(const consts *k, float *p, const float *g, float *m, float *v,
                          size_t lo, size_t hi)
{
    adam32_range(k, p, g, m, v, lo, hi);
}

#ifdef ZT_X86
static T_AVX2 void adam32_avx2(const consts *k, float *p, const float *g, float *m, float *v,
                               size_t lo, size_t hi)
{
    adam32_range(k, p, g, m, v, lo, hi);
}

static T_AVX512 void adam32_avx512(const consts *k, float *p, const float *g, float *m,
                                   float *v, size_t lo, size_t hi)
{
    adam32_range(k, p, g, m, v, lo, hi);
}
#endif

int zt_adam32_update_path(int path, float *p, const float *g, float *m, float *v, size_t n,
                          const zt_adamw_hparams *hp, int decay)
{
    span32_fn *fn = adam32_scalar;
    if (path == ZT_ADAM8_AUTO)
        path = cpu_runs(ZT_ADAM8_AVX512) ? ZT_ADAM8_AVX512
               : cpu_runs(ZT_ADAM8_AVX2) ? ZT_ADAM8_AVX2 : ZT_ADAM8_SCALAR;
    if (!cpu_runs(path))
        return -ENOTSUP;
#ifdef ZT_X86
    fn = path == ZT_ADAM8_AVX512 ? adam32_avx512 : path == ZT_ADAM8_AVX2 ? adam32_avx2 : fn;
#endif
    double t0 = ZT_PROF_T0();
    consts k = make_consts(hp, decay);
    enum { CHUNK = 4096 };
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (nc > 1)
    for (size_t c = 0; c < nc; c++)
        fn(&k, p, g, m, v, c * CHUNK, c * CHUNK + CHUNK < n ? c * CHUNK + CHUNK : n);
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 14.0 * (double)n, 28.0 * (double)n);
    return 0;
}

void zt_adam32_update(float *p, const float *g, float *m, float *v, size_t n,
                      const zt_adamw_hparams *hp, int decay)
{
    zt_adam32_update_path(ZT_ADAM8_AUTO, p, g, m, v, n, hp, decay);
}
