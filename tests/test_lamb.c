/* test_lamb.c - LAMB over tensor pieces (optimizer/lamb.c) against a torch transcription of
 * DeepSpeed's FusedLamb on whole tensors (tests/ref/lamb_ref.py, its output in
 * tests/fixtures/lamb/case.bin): three configurations (FusedLamb's defaults; bing_bert's lr
 * 11e-3, weight decay 0.01, no bias correction, max_coeff 0.3; eps inside the square root
 * with min_coeff 0.5 and a gradient multiplier 0.5), five steps, a 72 x 64 matrix (two of
 * the C's 4096-element chunks), vectors with and without weight decay, a [4, 6, 20] tensor
 * and a vector that starts at zero (||p|| = 0: the coefficient is 1). Each tensor is updated
 * as one piece and cut into three pieces that follow neither its rows nor the chunks (as a
 * ZeRO shard cuts it), the pieces' sums added in order as the engine adds the ranks'.
 *
 * Tolerance. The moments are the same fp32 operations in the same order on both sides (the
 * kernel's float scalars: (1 - b1) is a float difference; no fused multiply-add): equal bits.
 * The norms: both sum in double (the reference in torch's order, the C in 4096-element
 * chunks and pieces), then round to float before sqrtf as the kernel's float T does: the
 * sums differ in the last bits of a double, which may flip the float rounding of a sum, so
 * the coefficient ||p|| / ||u|| may differ by that rounding carried through the two square
 * roots and the division: within 4 float ulps (2^-21 relative). (When written, every
 * coefficient and parameter came out equal.) The step (step_size coeff)
 * u then differs by at most 6 ulps of the step, and the subtraction rounds p on each side
 * (an ulp of p between them); p's error feeds the next step only through wd p (wd <= 0.1)
 * and ||p|| (relative 1e-7): so per step |p - ref| grows by at most 2^-20 |step| +
 * 2^-23 |p|, summed over the steps. A wrong coefficient (clamp, norm of the wrong
 * quantity, bias correction inside the update) moves p by a sizeable part of the step,
 * 2^20 times this bound. The worst ratio is printed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../optimizer/lamb.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture_path(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(d, sizeof d, "%s/lamb/case.bin", f ? f : "tests/fixtures");
    return d;
}

static void rd(void *dst, size_t n, FILE *f)
{
    if (fread(dst, 1, n, f) != n)
        fail_msg("%s: truncated", fixture_path());
}

enum { MAXT = 8 };

typedef struct tens {
    size_t n;
    int decay;
    float *p, *m, *v, *g, *ref, *prev, *bound;
} tens;

/* one step of tensor t cut at cut[0..k] (cut[0] = 0, cut[k] = n): phase 1 per piece with
 * its own sums, added in piece order; phase 2 per piece; returns the coefficient */
static float step_pieces(tens *t, const size_t *cut, int k, const zt_lamb_hparams *hp)
{
    double w2 = 0.0, u2 = 0.0;
    for (int i = 0; i < k; i++) {
        double pw = 0.0, pu = 0.0;
        size_t a = cut[i], n = cut[i + 1] - cut[i];
        zt_lamb_moments(t->p + a, t->g + a, t->m + a, t->v + a, n, hp, t->decay, &pw, &pu);
        w2 += pw;
        u2 += pu;
    }
    float c = zt_lamb_coeff(w2, u2, hp);
    for (int i = 0; i < k; i++) {
        size_t a = cut[i], n = cut[i + 1] - cut[i];
        zt_lamb_apply(t->p + a, t->m + a, t->v + a, n, hp, t->decay, c);
    }
    return c;
}

static float ulps(float a, float b)
{
    return fabsf(a - b) / (nextafterf(fabsf(b), INFINITY) - fabsf(b));
}

/* every configuration of the fixture, the tensors as one piece (pieces = 0) or three;
 * returns the worst |p - ref| / bound; counts the clamped coefficients */
static double run_fixture(int pieces, int *clamped)
{
    FILE *f = fopen(fixture_path(), "rb");
    assert_non_null(f);
    char magic[4];
    uint32_t hd[3];
    rd(magic, 4, f);
    assert_memory_equal(magic, "ZTL1", 4);
    rd(hd, sizeof hd, f);
    uint32_t ncfg = hd[0], steps = hd[1], nt = hd[2];
    assert_true(nt <= MAXT);
    tens t[MAXT];
    memset(t, 0, sizeof t);
    for (uint32_t j = 0; j < nt; j++) {
        uint32_t x[2];
        rd(x, sizeof x, f);
        t[j].n = x[0];
        t[j].decay = (int)x[1];
        float **bufs[] = {&t[j].p, &t[j].m, &t[j].v, &t[j].g, &t[j].ref, &t[j].prev,
                          &t[j].bound};
        for (size_t b = 0; b < sizeof bufs / sizeof *bufs; b++)
            assert_non_null(*bufs[b] = malloc(t[j].n * sizeof(float)));
    }
    double worst = 0.0;
    for (uint32_t c = 0; c < ncfg; c++) {
        float fl[8];
        uint32_t fl2[2];
        rd(fl, sizeof fl, f);
        rd(fl2, sizeof fl2, f);
        zt_lamb_hparams hp = {fl[0], fl[1], fl[2], fl[3], fl[4], fl[5], fl[6], 0, fl[7],
                              !fl2[0], (int)fl2[1]};
        for (uint32_t j = 0; j < nt; j++) {
            rd(t[j].p, t[j].n * sizeof(float), f);
            memcpy(t[j].prev, t[j].p, t[j].n * sizeof(float));
            memset(t[j].m, 0, t[j].n * sizeof(float));
            memset(t[j].v, 0, t[j].n * sizeof(float));
            memset(t[j].bound, 0, t[j].n * sizeof(float));
        }
        for (uint32_t s = 0; s < steps; s++) {
            hp.step = (int64_t)s + 1;
            for (uint32_t j = 0; j < nt; j++)
                rd(t[j].g, t[j].n * sizeof(float), f);
            for (uint32_t j = 0; j < nt; j++) {
                size_t n = t[j].n, cut[4] = {0, n, n, n};
                int k = 1;
                if (pieces) { /* cuts that follow neither rows nor 4096-element chunks */
                    cut[1] = n * 2 / 7 + 1;
                    cut[2] = n * 8 / 9 - 3;
                    k = 3;
                }
                float want_c;
                rd(&want_c, sizeof want_c, f);
                rd(t[j].ref, n * sizeof(float), f);
                float got_c = step_pieces(&t[j], cut, k, &hp);
                if (ulps(got_c, want_c) > 4.0f)
                    fail_msg("config %u step %u tensor %u: coefficient %.9g, FusedLamb's %.9g",
                             c, s + 1, j, (double)got_c, (double)want_c);
                *clamped += want_c == hp.max_coeff || want_c == hp.min_coeff;
                for (size_t i = 0; i < n; i++) {
                    float r = t[j].ref[i];
                    t[j].bound[i] += 0x1p-20f * fabsf(r - t[j].prev[i]) + 0x1p-23f * fabsf(r);
                    t[j].prev[i] = r;
                    double e = fabs((double)t[j].p[i] - r) / t[j].bound[i];
                    if (!(e <= 1.0))
                        fail_msg("config %u step %u tensor %u [%zu]: %.9g, FusedLamb's %.9g "
                                 "(bound %.3g)", c, s + 1, j, i, (double)t[j].p[i], (double)r,
                                 (double)t[j].bound[i]);
                    worst = e > worst ? e : worst;
                }
            }
        }
        for (uint32_t j = 0; j < nt; j++) { /* the moments after the last step: equal bits */
            rd(t[j].ref, t[j].n * sizeof(float), f);
            rd(t[j].prev, t[j].n * sizeof(float), f);
            if (memcmp(t[j].ref, t[j].m, t[j].n * sizeof(float)) != 0 ||
                memcmp(t[j].prev, t[j].v, t[j].n * sizeof(float)) != 0)
                fail_msg("config %u tensor %u: the moments differ from FusedLamb's", c, j);
        }
    }
    char tail;
    assert_int_equal(fread(&tail, 1, 1, f), 0);
    fclose(f);
    for (uint32_t j = 0; j < nt; j++) {
        free(t[j].p); free(t[j].m); free(t[j].v); free(t[j].g); free(t[j].ref);
        free(t[j].prev); free(t[j].bound);
    }
    return worst;
}

static void test_against_reference(void **state)
{
    (void)state;
    int clamped = 0;
    double whole = run_fixture(0, &clamped);
    double cut = run_fixture(1, &clamped);
    printf("LAMB against FusedLamb: worst |p - ref| / bound %.3g (whole), %.3g (3 pieces); "
           "%d clamped coefficients\n", whole, cut, clamped);
    assert_true(clamped > 0); /* the cases reach the clamp */
}

/* the coefficient's rules: the clamp to [min, max] and 1 when a norm is 0 */
static void test_coeff(void **state)
{
    (void)state;
    zt_lamb_hparams hp = {.max_coeff = 0.3f, .min_coeff = 0.01f};
    assert_true(zt_lamb_coeff(0.0, 4.0, &hp) == 1.0f);
    assert_true(zt_lamb_coeff(4.0, 0.0, &hp) == 1.0f);
    assert_true(zt_lamb_coeff(4.0, 1.0, &hp) == 0.3f);
    assert_true(zt_lamb_coeff(1e-6, 1.0, &hp) == 0.01f);
    assert_true(zt_lamb_coeff(0.04, 1.0, &hp) == 0.2f);
    zt_lamb_hparams bc = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .step = 1};
    /* step 1: lr sqrt(1 - 0.999) / (1 - 0.9), in float */
    float want = 1e-3f * sqrtf((float)(1.0 - 0.999f)) / (float)(1.0 - 0.9f);
    assert_true(fabsf(zt_lamb_step_size(&bc) - want) <= 1e-9f);
    bc.no_bias_correction = 1;
    assert_true(zt_lamb_step_size(&bc) == 1e-3f);
}

/* the sums and the update do not depend on the thread count */
static void step_threads(int threads, float *p, float *m, float *v, double *s)
{
    enum { N = 50000 };
    static float g[N];
    for (int i = 0; i < N; i++) {
        p[i] = sinf(0.37f * (float)i) * 0.05f;
        g[i] = cosf(0.11f * (float)i) * 0.01f;
        m[i] = v[i] = 0.0f;
    }
    zt_lamb_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 10.0f, 0.01f, 1, 1.0f, 0, 0};
    omp_set_num_threads(threads);
    s[0] = s[1] = 0.0;
    zt_lamb_moments(p, g, m, v, N, &hp, 1, &s[0], &s[1]);
    zt_lamb_apply(p, m, v, N, &hp, 1, zt_lamb_coeff(s[0], s[1], &hp));
}

static void test_threads(void **state)
{
    static float p1[50000], p2[50000], m1[50000], m2[50000], v1[50000], v2[50000];
    double s1[2], s2[2];
    (void)state;
    step_threads(1, p1, m1, v1, s1);
    step_threads(2, p2, m2, v2, s2);
    omp_set_num_threads(omp_get_num_procs());
    assert_memory_equal(s1, s2, sizeof s1);
    assert_memory_equal(p1, p2, sizeof p1);
    assert_memory_equal(m1, m2, sizeof m1);
    assert_memory_equal(v1, v2, sizeof v1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_coeff),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
