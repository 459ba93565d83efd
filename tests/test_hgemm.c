/* test_hgemm.c - 16-bit x 16-bit -> fp32 products (models/hgemm.c) against the exact product
 * of the same 16-bit values, computed in double (every bf16 or fp16 product and the sums of
 * these sizes are exact or nearly so there: products of 8- or 11-bit significands, K <= 1100,
 * double's 53 bits). Each path may differ from it only by fp32's rounding of the sums:
 * |C - exact| <= gamma_K sum_k |a b| (+ |beta C0| u for the added C), gamma_K = K u / (1 - K u),
 * u = 2^-24, which holds for any order of summation (Higham, Accuracy and Stability, 3.1).
 * For the four transpositions, odd and blocked shapes (K above ZT_HGEMM_KB), leading
 * dimensions wider than the rows, alpha 1 and 0.5, beta 0 and 1, in bf16 and fp16 (the
 * widened path). And the default path is the one hgemm.h names for this CPU's flags.
 * `test_hgemm --onednn`: the oneDNN path (bf16), cross-checked against the same bound and
 * against the widened path; status 77 where this CPU's oneDNN has no bf16 matmul on bf16
 * instructions (AVX2-only machines). */
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
#include "../models/hgemm.h"
#include "cpuflag.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24) * 4.0f - 2.0f;
}

typedef struct { int ta, tb, M, N, K, pad; float alpha, beta; } hcase;

/* 1 when path ran; fails on an element beyond the bound. *out (may be NULL) gets C. */
static int run(int path, int dt, const hcase *c, float **out)
{
    int M = c->M, N = c->N, K = c->K;
    int ra = c->ta ? K : M, ca = c->ta ? M : K, rb = c->tb ? N : K, cb = c->tb ? K : N;
    int lda = ca + c->pad, ldb = cb + c->pad, ldc = N + c->pad;
    uint16_t *A = malloc(2 * (size_t)ra * lda), *B = malloc(2 * (size_t)rb * ldb);
    float *C = malloc(4 * (size_t)M * ldc), *C0 = malloc(4 * (size_t)M * ldc);
    assert_non_null(A);
    assert_non_null(B);
    assert_non_null(C);
    assert_non_null(C0);
    rng = 0x2545f4914f6cdd1dull + (uint64_t)(c->M * 7 + c->N * 13 + c->K);
    for (size_t i = 0; i < (size_t)ra * lda; i++)
        A[i] = zt_half_of(dt, uniform());
    for (size_t i = 0; i < (size_t)rb * ldb; i++)
        B[i] = zt_half_of(dt, uniform());
    for (size_t i = 0; i < (size_t)M * ldc; i++)
        C[i] = C0[i] = uniform();
    int rc = zt_hgemm_path(path, dt, c->ta, c->tb, M, N, K, c->alpha, A, lda, B, ldb, c->beta,
                           C, ldc);
    if (rc == -1) {
        free(A); free(B); free(C); free(C0);
        return 0;
    }
    assert_int_equal(rc, 0);
    double u = 0x1p-24, g = K * u / (1 - K * u);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0.0, s_abs = 0.0;
            for (int k = 0; k < K; k++) {
                double a = zt_half_value(dt, c->ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k]);
                double b = zt_half_value(dt, c->tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n]);
                s += a * b;
                s_abs += fabs(a * b);
            }
            double c0 = C0[(size_t)m * ldc + n];
            double want = c->alpha * s + c->beta * c0;
            /* the sums' rounding, alpha's and the final add's (one u each) */
            double bound = (g + 2 * u) * (fabs(c->alpha) * s_abs + fabs(c->beta * c0)) + 1e-30;
            double err = fabs(C[(size_t)m * ldc + n] - want);
            if (err > bound)
                fail_msg("path %d %s ta %d tb %d %dx%dx%d alpha %g beta %g: C[%d][%d] = %.9g, "
                         "exact %.9g, error %.3g > bound %.3g", path, dt ? "fp16" : "bf16",
                         c->ta, c->tb, M, N, K, (double)c->alpha, (double)c->beta, m, n,
                         C[(size_t)m * ldc + n], want, err, bound);
        }
    /* the padding of C is not written */
    for (int m = 0; m < M; m++)
        for (int n = N; n < ldc; n++)
            if (C[(size_t)m * ldc + n] != C0[(size_t)m * ldc + n])
                fail_msg("path %d wrote C[%d][%d] past N", path, m, n);
    free(A); free(B); free(C0);
    if (out)
        *out = C;
    else
        free(C);
    return 1;
}

static const hcase cases[] = {
    {0, 0, 37, 53, 129, 0, 1.0f, 0.0f},
    {0, 1, 37, 53, 129, 3, 1.0f, 1.0f},
    {1, 0, 64, 40, 96, 5, 0.5f, 0.0f},
    {1, 1, 17, 33, 65, 0, 1.0f, 1.0f},
    {0, 1, 96, 80, 1100, 7, 1.0f, 0.0f},  /* three k-blocks for the widened path */
    {1, 0, 80, 96, 1100, 0, 1.0f, 1.0f},
    {0, 0, 1, 7, 3, 0, 1.0f, 0.0f},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void test_widened(void **state)
{
    (void)state;
    for (int dt = 0; dt < 2; dt++)
        for (int i = 0; i < NCASES; i++)
            assert_int_equal(run(0, dt, &cases[i], NULL), 1);
    zt_hgemm_release();
}

/* the default follows the CPU: oneDNN for bf16 where it has AVX512_BF16 or AMX-BF16 (as
 * /proc/cpuinfo says, not as oneDNN says), the widened path otherwise and for fp16; and
 * zt_hgemm gives the bits of that path */
static void test_default(void **state)
{
    (void)state;
    int fast = cpu_flag("avx512_bf16") || cpu_flag("amx_bf16");
    assert_int_equal(zt_hgemm_default(ZT_HALF_BF16), fast);
    assert_int_equal(zt_hgemm_default(ZT_HALF_F16), 0);
    printf("bf16: %s; fp16: %s\n", zt_hgemm_describe(ZT_HALF_BF16),
           zt_hgemm_describe(ZT_HALF_F16));
    for (int dt = 0; dt < 2; dt++) {
        int M = 48, N = 64, K = 200;
        uint16_t *A = malloc(2 * (size_t)M * K), *B = malloc(2 * (size_t)N * K);
        float *C = malloc(4 * (size_t)M * N), *D = malloc(4 * (size_t)M * N);
        assert_non_null(A); assert_non_null(B); assert_non_null(C); assert_non_null(D);
        for (size_t i = 0; i < (size_t)M * K; i++)
            A[i] = zt_half_of(dt, uniform());
        for (size_t i = 0; i < (size_t)N * K; i++)
            B[i] = zt_half_of(dt, uniform());
        assert_int_equal(zt_hgemm(dt, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N), 0);
        assert_int_equal(zt_hgemm_path(zt_hgemm_default(dt), dt, 0, 1, M, N, K, 1.0f, A, K, B,
                                       K, 0.0f, D, N), 0);
        assert_memory_equal(C, D, 4 * (size_t)M * N); /* the same path: the same bits */
        free(A); free(B); free(C); free(D);
    }
    zt_hgemm_release();
}

/* the oneDNN path: within the bound, and within twice the bound of the widened path's result
 * (each is within one bound of the exact product) */
static int onednn(void)
{
    if (!zt_hgemm_default(ZT_HALF_BF16)) {
        printf("oneDNN has no bf16 matmul on bf16 instructions here (%s): skipped\n",
               *zt_hgemm_onednn() ? zt_hgemm_onednn() : "none");
        return 77;
    }
    for (int i = 0; i < NCASES; i++) {
        float *c1 = NULL, *c0 = NULL;
        if (run(1, ZT_HALF_BF16, &cases[i], &c1) != 1 || run(0, ZT_HALF_BF16, &cases[i], &c0) != 1) {
            fprintf(stderr, "case %d: a path did not run\n", i);
            return 1;
        }
        size_t differ = 0, n = (size_t)cases[i].M * (cases[i].N + cases[i].pad);
        for (size_t j = 0; j < n; j++)
            differ += c0[j] != c1[j];
        printf("case %d: oneDNN within the bound; %zu of %zu elements differ from the widened "
               "path's bits\n", i, differ, n);
        free(c0);
        free(c1);
    }
    printf("oneDNN path: %d cases (%s)\n", NCASES, zt_hgemm_onednn());
    zt_hgemm_release();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--onednn"))
        return onednn();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widened),
        cmocka_unit_test(test_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
