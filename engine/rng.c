/* rng.c - Philox 4x32-10 (Salmon et al., SC'11) and helpers to draw streams from it.
 * Counter layout: {element/4 low, element/4 high, stream, sample low}; key: {seed low,
 * seed high ^ sample high}. Not a cryptographic generator. */
#include "rng.h"

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

/* Eight consecutive blocks blk..blk+7 of one (stream, sample): the same rounds as
 * zt_philox4x32, lane by lane, written so the compiler vectorizes them (AVX2 where the CPU has
 * it: integer arithmetic, so every clone gives the same bits). out: 32 values in element
 * order. */
__attribute__((target_clones("avx2", "default"), optimize("O3")))
static void philox8(uint64_t blk, uint32_t stream, uint32_t sample, uint32_t k0, uint32_t k1,
                    uint32_t *out)
{
    uint32_t c0[8], c1[8], c2[8], c3[8];
    for (int l = 0; l < 8; l++) {
        c0[l] = (uint32_t)(blk + (uint64_t)l);
        c1[l] = (uint32_t)((blk + (uint64_t)l) >> 32);
        c2[l] = stream;
        c3[l] = sample;
    }
    for (int round = 0; round < 10; round++) {
        for (int l = 0; l < 8; l++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * c0[l], p1 = (uint64_t)PHILOX_M1 * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c1[l] = (uint32_t)p1;
            c3[l] = (uint32_t)p0;
            c0[l] = n0;
            c2[l] = n2;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    for (int l = 0; l < 8; l++) {
        out[4 * l] = c0[l];
        out[4 * l + 1] = c1[l];
        out[4 * l + 2] = c2[l];
        out[4 * l + 3] = c3[l];
    }
}

void zt_rng_u32(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t first, uint32_t *out,
                uint64_t n)
{
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(sample >> 32)};
    uint64_t i = 0;
    while (i < n) {
        uint64_t e = first + i;
        if ((e & 3) == 0 && n - i >= 32) { /* whole blocks, eight at a time */
            philox8(e >> 2, stream, (uint32_t)sample, key[0], key[1], out + i);
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
