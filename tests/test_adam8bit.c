/* test_adam8bit.c - block-wise 8-bit AdamW (optimizer/adam8bit.c, quant.c):
 *  - the dynamic maps: 256 sorted codes, their ends, zero present, the construction's values;
 *  - nearest-code quantization: codes map to themselves, ties go to the lower code, clamping;
 *  - the step against an independent numpy implementation (tests/ref/adam8bit_ref.py, its
 *    output in tests/fixtures/adam8bit/case.bin): codes exact, absmax and parameters within
 *    1e-6, after every step, including values that round to zero, signs near zero, NaN and
 *    Inf gradients, an all-zero block, a partial last block and fp32 state below
 *    min_8bit_size;
 *  - bitsandbytes' acceptance test against fp32 Adam (torch.optim.Adam's formula, which
 *    places the bias corrections differently): 50 steps, p = randn * 0.1, g = randn * 0.01;
 *    after each step mean |dp| < 6e-5 and mean relative error < 6e-4, then, as their test
 *    does, the fp32 parameters and the dequantized 8-bit state are copied across, so each
 *    step is compared on its own. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../optimizer/adam8bit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture_path(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(d, sizeof d, "%s/adam8bit/case.bin", f ? f : "tests/fixtures");
    return d;
}

static void test_maps(void **state)
{
    (void)state;
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    for (int s = 0; s < 2; s++) {
        const float *m = s ? q.m : q.v;
        int zeros = 0;
        for (int i = 0; i < 256; i++) {
            zeros += m[i] == 0.0f;
            if (i > 0 && !(m[i] > m[i - 1]))
                fail_msg("map %d not increasing at %d: %g, %g", s, i, m[i - 1], m[i]);
        }
        assert_int_equal(zeros, 1);
        assert_true(m[255] == 1.0f);
    }
    /* signed: 127 values of each sign; the ends are +1 and minus the largest midpoint of
     * exponent 6 (64 intervals on [0.1, 1]: (1 - 0.9/128)); the smallest magnitude is the
     * one midpoint of exponent 0: 0.55e-6 */
    assert_true(q.m[127] == 0.0f);
    assert_true(q.m[0] == (float)-(1.0 - 0.9 / 128.0));
    assert_true(q.m[128] == (float)0.55e-6 && q.m[126] == (float)-0.55e-6);
    /* unsigned: 0, then exponent 0's two midpoints 0.325e-6 and 0.775e-6, ..., 1 */
    assert_true(q.v[0] == 0.0f);
    assert_true(q.v[1] == (float)0.325e-6 && q.v[2] == (float)0.775e-6);
    assert_true(q.v[254] == (float)(1.0 - 0.9 / 256.0));
    assert_int_equal(q.m_zero, 127);
    assert_int_equal(q.v_zero, 0);
}

static void test_quantize_nearest(void **state)
{
    (void)state;
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    for (int i = 0; i < 256; i++) {
        assert_int_equal(zt_quantize_nearest(q.m, q.m[i]), i);
        assert_int_equal(zt_quantize_nearest(q.v, q.v[i]), i);
    }
    int ties = 0;
    for (int i = 0; i < 255; i++) { /* a quarter and three quarters in; an exact midpoint */
        for (int s = 0; s < 2; s++) {
            const float *m = s ? q.v : q.m;
            float lo = m[i], hi = m[i + 1], mid = lo + (hi - lo) / 2.0f;
            assert_int_equal(zt_quantize_nearest(m, lo + (hi - lo) * 0.25f), i);
            assert_int_equal(zt_quantize_nearest(m, lo + (hi - lo) * 0.75f), i + 1);
            if (mid - lo == hi - mid) {
                assert_int_equal(zt_quantize_nearest(m, mid), i);
                ties++;
            }
        }
    }
    assert_true(ties > 0);
    /* the lookup gives the binary search's code: every 61st float of [-1.5, 1.5] */
    for (uint32_t sgn = 0; sgn < 2; sgn++)
        for (uint32_t u = 0; u <= 0x3FC00000u; u += 61) {
            union { uint32_t u; float f; } x = {u | (sgn << 31)};
            if (zt_quantize_fast(q.m, q.m_idx, x.f) != zt_quantize_nearest(q.m, x.f) ||
                zt_quantize_fast(q.v, q.v_idx, x.f) != zt_quantize_nearest(q.v, x.f))
                fail_msg("lookup and search differ at %.9g", x.f);
        }
    assert_int_equal(zt_quantize_nearest(q.m, -2.0f), 0);
    assert_int_equal(zt_quantize_nearest(q.m, 2.0f), 255);
    assert_int_equal(zt_quantize_nearest(q.v, -1e-9f), 0);
    assert_int_equal(zt_quantize_nearest(q.m, 1e-12f), 127); /* rounds to zero */
    assert_int_equal(zt_quantize_nearest(q.m, -1e-12f), 127);
}

static void read_or_fail(void *dst, size_t n, FILE *f)
{
    if (fread(dst, 1, n, f) != n)
        fail_msg("%s: truncated", fixture_path());
}

static void test_reference_fixture(void **state)
{
    (void)state;
    FILE *f = fopen(fixture_path(), "rb");
    char magic[4];
    uint32_t nt, steps;
    float hpf[5];
    if (!f)
        fail_msg("cannot open %s", fixture_path());
    read_or_fail(magic, 4, f);
    assert_memory_equal(magic, "ZTA8", 4);
    read_or_fail(&nt, 4, f);
    read_or_fail(&steps, 4, f);
    read_or_fail(hpf, sizeof hpf, f);
    assert_true(nt >= 1 && nt <= 8 && steps >= 1 && steps <= 100);
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    uint32_t n[8], is8[8];
    float *p[8], *m[8], *v[8], *am[8], *av[8];
    uint8_t *cm[8], *cv[8];
    for (uint32_t t = 0; t < nt; t++) {
        read_or_fail(&n[t], 4, f);
        read_or_fail(&is8[t], 4, f);
        assert_true(n[t] > 0 && n[t] < (1u << 24));
        size_t nb = (n[t] + ZT_QBLOCK - 1) / ZT_QBLOCK;
        p[t] = malloc(n[t] * 4);
        m[t] = calloc(n[t], 4);
        v[t] = calloc(n[t], 4);
        cm[t] = malloc(n[t]);
        cv[t] = malloc(n[t]);
        am[t] = malloc(nb * 4);
        av[t] = malloc(nb * 4);
        read_or_fail(p[t], n[t] * 4, f);
        zt_adam8bit_init(&q, cm[t], cv[t], am[t], av[t], n[t]);
    }
    size_t nmax = 0;
    for (uint32_t t = 0; t < nt; t++)
        nmax = n[t] > nmax ? n[t] : nmax;
    float *g = malloc(nmax * 4), *ep = malloc(nmax * 4), *ex = malloc(nmax * 4);
    uint8_t *ec = malloc(nmax);
    int special = 0;
    for (uint32_t s = 1; s <= steps; s++) {
        zt_adamw_hparams hp = {hpf[0], hpf[1], hpf[2], hpf[3], hpf[4], (int64_t)s, 1.0f};
        for (uint32_t t = 0; t < nt; t++) {
            size_t nn = n[t], nb = (nn + ZT_QBLOCK - 1) / ZT_QBLOCK;
            read_or_fail(g, nn * 4, f);
            for (size_t i = 0; i < nn; i++)
                special += !isfinite(g[i]) || g[i] == 0.0f;
            if (is8[t])
                zt_adam8bit_update(&q, p[t], g, cm[t], cv[t], am[t], av[t], nn, &hp, 1);
            else
                zt_adam32_update(p[t], g, m[t], v[t], nn, &hp, 1);
            read_or_fail(ep, nn * 4, f);
            for (size_t i = 0; i < nn; i++)
                if (!(fabsf(p[t][i] - ep[i]) <= 1e-6f))
                    fail_msg("step %u tensor %u: p[%zu] = %.9g, reference %.9g", s, t, i,
                             p[t][i], ep[i]);
            if (is8[t]) {
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ec, nn, f);
                    const uint8_t *c = k ? cv[t] : cm[t];
                    for (size_t i = 0; i < nn; i++)
                        if (c[i] != ec[i])
                            fail_msg("step %u tensor %u: %s code[%zu] = %d, reference %d", s,
                                     t, k ? "v" : "m", i, c[i], ec[i]);
                }
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ex, nb * 4, f);
                    const float *a = k ? av[t] : am[t];
                    for (size_t b = 0; b < nb; b++)
                        if (!(fabsf(a[b] - ex[b]) <= 1e-6f * fabsf(ex[b])))
                            fail_msg("step %u tensor %u: %s absmax[%zu] = %.9g, reference %.9g",
                                     s, t, k ? "v" : "m", b, a[b], ex[b]);
                }
            } else {
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ex, nn * 4, f);
                    const float *a = k ? v[t] : m[t];
                    for (size_t i = 0; i < nn; i++)
                        if (!(fabsf(a[i] - ex[i]) <= 1e-6f * fabsf(ex[i])))
                            fail_msg("step %u tensor %u: %s[%zu] = %.9g, reference %.9g", s, t,
                                     k ? "v" : "m", i, a[i], ex[i]);
                }
            }
        }
    }
    assert_true(special > 0); /* the fixture does exercise the special values */
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    for (uint32_t t = 0; t < nt; t++) {
        free(p[t]); free(m[t]); free(v[t]); free(cm[t]); free(cv[t]); free(am[t]); free(av[t]);
    }
    free(g);
    free(ep);
    free(ex);
    free(ec);
}

/* a normal deviate (Box-Muller over a 64-bit LCG): the test's own, reproducible */
static double randn(uint64_t *s)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static void test_acceptance_vs_fp32(void **state)
{
    (void)state;
    enum { N = 64 * 1024 };
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    float *p1 = malloc(N * 4), *p2 = malloc(N * 4), *g = malloc(N * 4), *m = calloc(N, 4),
          *v = calloc(N, 4), *am = malloc(N / ZT_QBLOCK * 4), *av = malloc(N / ZT_QBLOCK * 4);
    uint8_t *cm = malloc(N), *cv = malloc(N);
    uint64_t s = 42;
    for (int i = 0; i < N; i++)
        p1[i] = p2[i] = (float)(randn(&s) * 0.1);
    zt_adam8bit_init(&q, cm, cv, am, av, N);
    double worst_err = 0.0, worst_rel = 0.0;
    for (int step = 1; step <= 50; step++) {
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, step, 1.0f};
        for (int i = 0; i < N; i++)
            g[i] = (float)(randn(&s) * 0.01);
        zt_adamw_update(p1, g, m, v, N, &hp, 1); /* torch.optim.Adam(W)'s formula */
        zt_adam8bit_update(&q, p2, g, cm, cv, am, av, N, &hp, 1);
        double err = 0.0, rel = 0.0;
        for (int i = 0; i < N; i++) {
            double d = fabs((double)p1[i] - p2[i]);
            err += d;
            rel += d / (fabs((double)p1[i]) + 1e-9);
        }
        err /= N;
        rel /= N;
        worst_err = err > worst_err ? err : worst_err;
        worst_rel = rel > worst_rel ? rel : worst_rel;
        if (!(err < 6e-5 && rel < 6e-4))
            fail_msg("step %d: mean |dp| %.3g (< 6e-5), mean relative %.3g (< 6e-4)", step, err,
                     rel);
        /* as bitsandbytes' test: brought together again after each step (fp32 Adam's
         * parameters, the 8-bit state dequantized into fp32 Adam's moments) */
        memcpy(p2, p1, N * sizeof(float));
        for (int i = 0; i < N; i++) {
            m[i] = q.m[cm[i]] * am[i / ZT_QBLOCK];
            v[i] = q.v[cv[i]] * av[i / ZT_QBLOCK];
        }
    }
    printf("8-bit vs fp32 Adam, 50 steps: worst mean |dp| %.3g (< 6e-5), worst mean relative "
           "%.3g (< 6e-4)\n", worst_err, worst_rel);
    free(p1); free(p2); free(g); free(m); free(v); free(am); free(av); free(cm); free(cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps),
        cmocka_unit_test(test_quantize_nearest),
        cmocka_unit_test(test_reference_fixture),
        cmocka_unit_test(test_acceptance_vs_fp32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
