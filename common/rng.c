/* rng.c - Philox 4x32-10 (Salmon et al., SC'11) and helpers to draw streams from it.
 * Counter layout: {element/4 low, element/4 high, stream, sample low}; key: {seed low,
 * seed high ^ sample high}. Not a cryptographic generator. */
#include "rng.h"

#include <immintrin.h>
#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void zt_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Eight consecutive blocks blk..blk+7 of one (stream, sample) at once with AVX2: the same
 * rounds as zt_philox4x32 (integer arithmetic, so the same bits), lanes = blocks. The 32x32
 * -> 64-bit products come from _mm256_mul_epu32 on the even lanes and on the odd lanes
 * shifted down. out: 32 values in element order. */
__attribute__((target("avx2")))
static void philox8_avx2(uint64_t blk, uint32_t stream, uint32_t sample, uint32_t k0,
                         uint32_t k1, uint32_t *out)
{
    uint32_t lo[8], hi[8];
    for (int l = 0; l < 8; l++) {
        lo[l] = (uint32_t)(blk + (uint64_t)l);
        hi[l] = (uint32_t)((blk + (uint64_t)l) >> 32);
    }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo), c1 = _mm256_loadu_si256((const __m256i *)hi);
    __m256i c2 = _mm256_set1_epi32((int)stream), c3 = _mm256_set1_epi32((int)sample);
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    for (int round = 0; round < 10; round++) {
        __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
        __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
        __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
        __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
        __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
        __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
        c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        c1 = lo1;
        c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    /* 4 x 8 -> 8 x 4: block l's four words together */
    __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    _mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 8), _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 16), _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256((__m256i *)(out + 24), _mm256_permute2x128_si256(u2, u3, 0x31));
}

static int have_avx2(void)
{
    static int v = -1;
    if (v < 0)
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
    return v;
}

void zt_rng_u32(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t first, uint32_t *out,
                uint64_t n)
{
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(sample >> 32)};
    uint64_t i = 0;
    while (i < n) {
        uint64_t e = first + i;
        if ((e & 3) == 0 && n - i >= 32 && have_avx2()) { /* whole blocks, eight at a time */
            philox8_avx2(e >> 2, stream, (uint32_t)sample, key[0], key[1], out + i);
            i += 32;
            continue;
        }
        uint64_t blk = e >> 2;
        uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), stream, (uint32_t)sample};
        uint32_t r[4];
        zt_philox4x32(ctr, key, r);
        for (unsigned j = (unsigned)(e & 3); j < 4 && i < n; j++, i++)
            out[i] = r[j];
    }
}

void zt_rng_normal(uint64_t seed, uint64_t sample, uint32_t stream, float *out, uint64_t n)
{
    uint32_t u[4];
    for (uint64_t i = 0; i < n; i += 2) {
        zt_rng_u32(seed, sample, stream, i, u, 2);
        double u1 = ((double)u[0] + 0.5) * 0x1p-32, u2 = ((double)u[1] + 0.5) * 0x1p-32;
        double r = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
        out[i] = (float)(r * cos(th));
        if (i + 1 < n)
            out[i + 1] = (float)(r * sin(th));
    }
}
