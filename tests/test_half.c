/* test_half.c - bf16 and fp16 conversions (common/half.c) against their definitions, not
 * against the code: (1) hand-worked values of IEEE 754 binary16 and of bfloat16 (PyTorch's
 * rounding: ties to even, NaN 0x7fc0 / 0x7e00, overflow to infinity from 65520, fp16
 * subnormals); (2) for random and swept fp32 inputs the result is the representable value
 * nearest in exact (double) arithmetic, the even one on a tie; (3) every one of the 65536
 * bf16 and fp16 patterns widens exactly and narrows back to itself; (4) the AVX2/F16C path
 * gives the portable path's bits over a sweep of the fp32 patterns (every 4099th; all of
 * them with ZT_HALF_EXHAUSTIVE=1, `make test-long`), skipped (77 when alone) on CPUs
 * without AVX2 and F16C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/half.h"

static float f_of(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint32_t b_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

/* value of a binary16 pattern, from the format's definition (double: exact) */
static double f16_def(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_known_values(void **state)
{
    (void)state;
    struct { float f; uint16_t bf, h; } k[] = {
        {1.0f, 0x3f80, 0x3c00},
        {-2.0f, 0xc000, 0xc000},
        {0.0f, 0x0000, 0x0000},
        {-0.0f, 0x8000, 0x8000},
        {1.0f + 0x1p-8f, 0x3f80, 0x3c04},       /* bf16 tie: to the even 1.0 */
        {1.0f + 3 * 0x1p-8f, 0x3f82, 0x3c0c},   /* bf16 tie: to the even 0x3f82 */
        {1.0f + 0x1p-11f, 0x3f80, 0x3c00},      /* fp16 tie: to the even 1.0 */
        {1.0f + 3 * 0x1p-11f, 0x3f80, 0x3c02},  /* fp16 tie: up to the even 0x3c02 */
        {65504.0f, 0x4780, 0x7bff},             /* fp16's largest */
        {65519.996f, 0x4780, 0x7bff},
        {65520.0f, 0x4780, 0x7c00},             /* half-way past it: infinity */
        {0x1p-14f, 0x3880, 0x0400},             /* fp16's smallest normal */
        {0x1p-24f, 0x3380, 0x0001},             /* its smallest subnormal */
        {0x1p-25f, 0x3300, 0x0000},             /* a tie between 0 and 2^-24: 0 */
        {0x1.8p-25f, 0x3340, 0x0001},
        {3 * 0x1p-25f, 0x33c0, 0x0002},         /* 1.5 x 2^-24: to the even 2 */
        {1e-40f, 0x0001, 0x0000},               /* an fp32 subnormal */
        {3.0e38f, 0x7f62, 0x7c00},
        {3.4028235e38f, 0x7f80, 0x7c00},        /* FLT_MAX rounds up to bf16 infinity */
        {INFINITY, 0x7f80, 0x7c00},
        {-INFINITY, 0xff80, 0xfc00},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        uint16_t bf, h;
        zt_half_path(0, 0, &bf, &k[i].f, 1);
        zt_half_path(0, 2, &h, &k[i].f, 1);
        if (bf != k[i].bf || h != k[i].h)
            fail_msg("%a: bf16 %04x (want %04x), fp16 %04x (want %04x)", (double)k[i].f, bf,
                     k[i].bf, h, k[i].h);
    }
    float nans[2] = {f_of(0x7fc00000u), f_of(0xffc00000u)};
    uint16_t bf[2], h[2];
    zt_half_path(0, 0, bf, nans, 2);
    zt_half_path(0, 2, h, nans, 2);
    assert_int_equal(bf[0], 0x7fc0);
    assert_int_equal(bf[1], 0x7fc0);
    assert_int_equal(h[0], 0x7e00);
    assert_int_equal(h[1], 0xfe00);
}

/* the nearest representable value of the format (exact in double), ties to the even */
static void check_nearest(float f, uint16_t got, int fp16)
{
    double x = f, v = fp16 ? f16_def(got) : (double)zt_bf16_value(got);
    if (isnan(x)) {
        if (!isnan(v))
            fail_msg("NaN %08x became %04x", b_of(f), got);
        return;
    }
    double big = fp16 ? 65504.0 : (double)f_of(0x7f7f0000u);
    double ulp_big = fp16 ? 32.0 : ldexp(1.0, 127 - 7);
    if (fabs(x) >= big + ulp_big / 2) { /* past the largest's half-ulp: infinity */
        if (!(isinf(v) && (v > 0) == (x > 0)))
            fail_msg("%a: %04x, want infinity", x, got);
        return;
    }
    if (isinf(v))
        fail_msg("%a: %04x is infinite", x, got);
    /* the neighbours: got - 1 and got + 1 in the ordering of the magnitudes */
    uint16_t mag = got & 0x7fff, sgn = got & 0x8000;
    double d = fabs(v - x);
    for (int dir = -1; dir <= 1; dir += 2) {
        if ((dir < 0 && mag == 0) || (dir > 0 && mag >= (fp16 ? 0x7bff : 0x7f7f)))
            continue;
        uint16_t o = (uint16_t)(sgn | (mag + dir));
        double w = fp16 ? f16_def(o) : (double)zt_bf16_value(o);
        double e = fabs(w - x);
        if (e < d || (e == d && (o & 1) == 0 && (got & 1)))
            fail_msg("%a (%08x): %04x = %a, but %04x = %a is %s", x, b_of(f), got, v, o, w,
                     e < d ? "nearer" : "as near and even");
    }
    if (mag == 0 && x != 0 && ((x < 0) != (sgn != 0)))
        fail_msg("%a: zero of the wrong sign", x);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void test_nearest(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    float *f = malloc(sizeof *f * N);
    uint16_t *bf = malloc(2 * N), *h = malloc(2 * N);
    assert_non_null(f);
    assert_non_null(bf);
    assert_non_null(h);
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t x = next32();
            if (round & 1) /* near fp16's range: exponents 100 .. 143 */
                x = (x & 0x807fffffu) | ((100u + next32() % 44) << 23);
            if (round == 2) /* halves and ties: few low bits set */
                x &= 0xffff8000u | (next32() & 0xffff0000u);
            f[i] = f_of(x);
        }
        zt_bf16_from_f32(bf, f, N);
        zt_f16_from_f32(h, f, N);
        for (int i = 0; i < N; i++) {
            check_nearest(f[i], bf[i], 0);
            check_nearest(f[i], h[i], 1);
        }
    }
    free(f);
    free(bf);
    free(h);
}

static void test_round_trips(void **state)
{
    (void)state;
    uint16_t *p = malloc(2 << 16), *q = malloc(2 << 16);
    float *f = malloc(4 << 16);
    assert_non_null(p);
    assert_non_null(q);
    assert_non_null(f);
    for (int kind = 0; kind < 2; kind++) {
        for (uint32_t i = 0; i < 65536; i++)
            p[i] = (uint16_t)i;
        (kind ? zt_f32_from_f16 : zt_f32_from_bf16)(f, p, 65536);
        (kind ? zt_f16_from_f32 : zt_bf16_from_f32)(q, f, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            double want = kind ? f16_def((uint16_t)i) : 0.0;
            int nan = kind ? isnan(want) : ((i & 0x7fff) > 0x7f80);
            if (kind && !nan && (double)f[i] != want)
                fail_msg("fp16 %04x widened to %a, want %a", i, (double)f[i], want);
            if (!kind && b_of(f[i]) != i << 16)
                fail_msg("bf16 %04x widened to %08x", i, b_of(f[i]));
            if (nan ? !isnan(f[i]) : q[i] != i)
                fail_msg("%s %04x came back as %04x", kind ? "fp16" : "bf16", i, q[i]);
        }
    }
    free(p);
    free(q);
    free(f);
}

static void test_wide_path(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    float *f = malloc(4 * N), *g1 = malloc(4 * N), *g2 = malloc(4 * N);
    uint16_t *a = malloc(2 * N), *b = malloc(2 * N);
    assert_non_null(f);
    assert_non_null(g1);
    assert_non_null(g2);
    assert_non_null(a);
    assert_non_null(b);
    if (zt_half_path(1, 0, a, f, 0) < 0) {
        free(f); free(g1); free(g2); free(a); free(b);
        skip();
    }
    const char *ex = getenv("ZT_HALF_EXHAUSTIVE");
    uint64_t step = ex && *ex == '1' ? 1 : 4099, done = 0;
    for (uint64_t x0 = 0; x0 < (1ull << 32);) {
        int n = 0;
        for (; n < N - 5 && x0 < (1ull << 32); x0 += step)
            f[n++] = f_of((uint32_t)x0);
        for (int kind = 0; kind <= 2; kind += 2) {
            zt_half_path(0, kind, a, f, (size_t)n);
            zt_half_path(1, kind, b, f, (size_t)n);
            for (int i = 0; i < n; i++)
                if (a[i] != b[i])
                    fail_msg("%s of %08x: portable %04x, AVX2 %04x", kind ? "fp16" : "bf16",
                             b_of(f[i]), a[i], b[i]);
        }
        done += (uint64_t)n;
    }
    /* widening: all 65536 patterns */
    for (uint32_t i = 0; i < 65536; i++)
        a[i] = (uint16_t)i;
    for (int kind = 1; kind <= 3; kind += 2) {
        zt_half_path(0, kind, g1, a, 65536);
        zt_half_path(1, kind, g2, a, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            if (b_of(g1[i]) != b_of(g2[i]))
                fail_msg("%s widening of %04x: portable %08x, AVX2 %08x",
                         kind == 1 ? "bf16" : "fp16", i, b_of(g1[i]), b_of(g2[i]));
    }
    printf("AVX2/F16C path: the portable bits for %llu fp32 patterns and all 65536 of each "
           "half format\n", (unsigned long long)done);
    free(f); free(g1); free(g2); free(a); free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_nearest),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_wide_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
