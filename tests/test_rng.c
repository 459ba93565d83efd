/* test_rng.c - Philox 4x32-10 against the known-answer vectors published with Random123
 * (kat_vectors), and the properties the engine relies on: streams addressed by element
 * index (any split gives the same numbers), distinct streams, a sane normal generator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "../common/rng.h"

static void test_philox_kat(void **state)
{
    static const struct { uint32_t ctr[4], key[2], out[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    (void)state;
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        zt_philox4x32(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            if (out[j] != kat[i].out[j])
                fail_msg("vector %zu word %d: got %08x expected %08x", i, j, out[j],
                         kat[i].out[j]);
    }
}

static void test_stream_addressing(void **state)
{
    uint32_t whole[40], part[13];
    (void)state;
    zt_rng_u32(7, 123456789012ull, zt_rng_stream(3, ZT_RNG_DROP_ATT), 0, whole, 40);
    /* elements [5, 18) drawn on their own equal the slice of the whole draw */
    zt_rng_u32(7, 123456789012ull, zt_rng_stream(3, ZT_RNG_DROP_ATT), 5, part, 13);
    assert_memory_equal(part, whole + 5, sizeof part);
    /* another sample, stream, unit or seed gives other numbers */
    uint32_t other[40];
    zt_rng_u32(7, 123456789013ull, zt_rng_stream(3, ZT_RNG_DROP_ATT), 0, other, 40);
    assert_memory_not_equal(other, whole, sizeof other);
    zt_rng_u32(7, 123456789012ull, zt_rng_stream(4, ZT_RNG_DROP_ATT), 0, other, 40);
    assert_memory_not_equal(other, whole, sizeof other);
    zt_rng_u32(7, 123456789012ull, zt_rng_stream(3, ZT_RNG_DROP_FFOUT), 0, other, 40);
    assert_memory_not_equal(other, whole, sizeof other);
    zt_rng_u32(8, 123456789012ull, zt_rng_stream(3, ZT_RNG_DROP_ATT), 0, other, 40);
    assert_memory_not_equal(other, whole, sizeof other);
    /* samples that differ only in the high 32 bits differ too */
    zt_rng_u32(7, 123456789012ull + (1ull << 32), zt_rng_stream(3, ZT_RNG_DROP_ATT), 0, other,
               40);
    assert_memory_not_equal(other, whole, sizeof other);
}

/* zt_rng_u32 (eight blocks at a time with AVX2 where the CPU has it) against the one-block
 * function, element by element, for offsets and lengths around the block boundaries */
static void test_u32_matches_blocks(void **state)
{
    (void)state;
    static uint32_t got[1000];
    const uint64_t seed = 0x123456789abcdefull, sample = 0x0000000500000007ull;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(sample >> 32)};
    for (uint64_t first = 0; first < 9; first++)
        for (uint64_t n = 1; n <= 1000; n += 37) {
            zt_rng_u32(seed, sample, 77, first, got, n);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t e = first + i, blk = e >> 2;
                uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 77, (uint32_t)sample};
                uint32_t r[4];
                zt_philox4x32(ctr, key, r);
                if (got[i] != r[e & 3])
                    fail_msg("first %llu n %llu: element %llu is %08x, the block says %08x",
                             (unsigned long long)first, (unsigned long long)n,
                             (unsigned long long)i, got[i], r[e & 3]);
            }
        }
}

static void test_normal(void **state)
{
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x);
    double s = 0, ss = 0;
    (void)state;
    assert_non_null(x);
    zt_rng_normal(1, 2, 3, x, N);
    for (int i = 0; i < N; i++) {
        s += x[i];
        ss += (double)x[i] * x[i];
    }
    /* mean: sd 1/sqrt(N) = 0.0022; variance: sd sqrt(2/N) = 0.0032; bounds at 6 sd */
    assert_true(fabs(s / N) < 0.014);
    assert_true(fabs(ss / N - 1.0) < 0.02);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_philox_kat),
                                       cmocka_unit_test(test_stream_addressing),
                                       cmocka_unit_test(test_u32_matches_blocks),
                                       cmocka_unit_test(test_normal)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
