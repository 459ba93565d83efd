/* half.c - bf16 and fp16 conversions (half.h): a portable loop per direction, and an AVX2
 * one (F16C for fp16) that computes the same bits: bf16's rounding is the same integer
 * arithmetic eight lanes wide; fp16's is the hardware's round-to-nearest-even, which the
 * portable bit arithmetic below reproduces (normal, subnormal, overflow and NaN cases). */
#include "half.h"

#include <immintrin.h>

/* ---- portable ----------------------------------------------------------------------- */

static inline uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static inline float float_of(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f16_round(float f)
{
    uint32_t x = bits_of(f), sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) /* NaN: quiet, the top ten payload bits */
        return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) /* from 65520 (half-way past 65504) on, and infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) { /* below 2^-14: a subnormal result, in steps of 2^-24 */
        uint32_t e = x >> 23;
        if (e < 102) /* below 2^-25: +-0 (2^-25 itself ties to the even 0 below) */
            return (uint16_t)sign;
        uint32_t m = (x & 0x7fffffu) | 0x800000u, sh = 126 - e; /* 14 .. 24 */
        uint32_t r = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        r += rem > half || (rem == half && (r & 1u));
        return (uint16_t)(sign | r);
    }
    /* normal: rebias the exponent (127 -> 15), round the 13 dropped bits to even (a carry
     * moves into the exponent, as it should) */
    uint32_t r = x + 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | ((r - (112u << 23)) >> 13));
}

static float f16_value(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) /* infinity; NaN quiet, the payload kept (as vcvtph2ps) */
        return float_of(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e == 0) { /* zero and subnormals: m 2^-24, exact in fp32 */
        float v = (float)m * 0x1p-24f;
        return float_of(sign | bits_of(v));
    }
    return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

static void bf16_from_f32_1(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = zt_bf16_round(src[i]);
}

static void f32_from_bf16_1(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = zt_bf16_value(src[i]);
}

static void f16_from_f32_1(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = f16_round(src[i]);
}

static void f32_from_f16_1(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = f16_value(src[i]);
}

/* ---- AVX2 (+F16C) --------------------------------------------------------------------- */

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

static void bf16_from_f32_8(uint16_t *dst, const float *src, size_t n)
{
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i qnan = _mm256_set1_epi32(0x7fc0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(src + i);
        __m256i x = _mm256_castps_si256(f);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, qnan, nan);
        /* 8 x 32 -> 8 x 16 (every value fits: packus saturates nothing) */
        __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
        _mm_storeu_si128((__m128i *)(dst + i), _mm_packus_epi32(lo, hi));
    }
    bf16_from_f32_1(dst + i, src + i, n - i);
}

static void f32_from_bf16_8(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
    }
    f32_from_bf16_1(dst + i, src + i, n - i);
}

static void f16_from_f32_8(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    f16_from_f32_1(dst + i, src + i, n - i);
}

static void f32_from_f16_8(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    f32_from_f16_1(dst + i, src + i, n - i);
}

#pragma GCC pop_options

/* ---- dispatch ------------------------------------------------------------------------- */

static int can_wide(void)
{
    static int v = -1;
    if (v < 0)
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    return v;
}

int zt_half_wide(void) { return can_wide(); }

void zt_bf16_from_f32(uint16_t *dst, const float *src, size_t n)
{
    (can_wide() ? bf16_from_f32_8 : bf16_from_f32_1)(dst, src, n);
}

void zt_f32_from_bf16(float *dst, const uint16_t *src, size_t n)
{
    (can_wide() ? f32_from_bf16_8 : f32_from_bf16_1)(dst, src, n);
}

void zt_f16_from_f32(uint16_t *dst, const float *src, size_t n)
{
    (can_wide() ? f16_from_f32_8 : f16_from_f32_1)(dst, src, n);
}

void zt_f32_from_f16(float *dst, const uint16_t *src, size_t n)
{
    (can_wide() ? f32_from_f16_8 : f32_from_f16_1)(dst, src, n);
}

void zt_half_narrow(int dt, uint16_t *dst, const float *src, size_t n)
{
    (dt == ZT_HALF_F16 ? zt_f16_from_f32 : zt_bf16_from_f32)(dst, src, n);
}

void zt_half_widen(int dt, float *dst, const uint16_t *src, size_t n)
{
    (dt == ZT_HALF_F16 ? zt_f32_from_f16 : zt_f32_from_bf16)(dst, src, n);
}

uint16_t zt_f16_round(float f) { return f16_round(f); }
float zt_f16_value(uint16_t h) { return f16_value(h); }

void zt_half_round(int to_fp16, float *dst, const float *src, size_t n)
{
    uint16_t h[512];
    for (size_t i = 0; i < n; i += 512) {
        size_t k = n - i < 512 ? n - i : 512;
        if (to_fp16) {
            zt_f16_from_f32(h, src + i, k);
            zt_f32_from_f16(dst + i, h, k);
        } else {
            zt_bf16_from_f32(h, src + i, k);
            zt_f32_from_bf16(dst + i, h, k);
        }
    }
}

int zt_half_path(int path, int kind, void *dst, const void *src, size_t n)
{
    if (path == 1 && !can_wide())
        return -1;
    if (path != 0 && path != 1)
        return -1;
    switch (kind) {
    case 0: (path ? bf16_from_f32_8 : bf16_from_f32_1)(dst, src, n); return 0;
    case 1: (path ? f32_from_bf16_8 : f32_from_bf16_1)(dst, src, n); return 0;
    case 2: (path ? f16_from_f32_8 : f16_from_f32_1)(dst, src, n); return 0;
    case 3: (path ? f32_from_f16_8 : f32_from_f16_1)(dst, src, n); return 0;
    default: return -1;
    }
}
