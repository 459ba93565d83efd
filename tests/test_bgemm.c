/* test_bgemm.c - bf16 x bf16 -> fp32 products (models/bgemm.c) against the exact product of
 * the same bf16 values, computed in double (every bf16 x bf16 product and the sums of these
 * sizes are exact or nearly so there: 16-bit products, K <= 1100, double's 53 bits). Each
 * path may differ from it only by fp32's rounding of the sums: |C - exact| <= gamma_K sum_k
 * |a b| (+ |beta C0| u for the added C), gamma_K = K u / (1 - K u), u = 2^-24, which holds
 * for any order of summation (Higham, Accuracy and Stability, 3.1). For the four
 * transpositions, odd and blocked shapes (K above ZT_BGEMM_KB), leading dimensions wider
 * than the rows, alpha 1 and 0.5, beta 0 and 1; the oneDNN path is skipped where this CPU's
 * oneDNN has no bf16 matmul (AVX2-only machines). And the default path is the one bgemm.h
 * names for this CPU. */
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
#include "../models/bgemm.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24) * 4.0f - 2.0f;
}

typedef struct { int ta, tb, M, N, K, pad; float alpha, beta; } bcase;

/* 1 when path ran; fails on an element beyond the bound */
static int run(int path, const bcase *c)
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
    for (size_t i = 0; i < (size_t)ra * lda; i++)
        A[i] = zt_bf16_round(uniform());
    for (size_t i = 0; i < (size_t)rb * ldb; i++)
        B[i] = zt_bf16_round(uniform());
    for (size_t i = 0; i < (size_t)M * ldc; i++)
        C[i] = C0[i] = uniform();
    int rc = zt_bgemm_path(path, c->ta, c->tb, M, N, K, c->alpha, A, lda, B, ldb, c->beta, C, ldc);
    if (rc == -1) {
        free(A); free(B); free(C); free(C0);
        return 0;
    }
    assert_int_equal(rc, 0);
    double u = 0x1p-24, g = K * u / (1 - K * u), worst = 0.0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0.0, s_abs = 0.0;
            for (int k = 0; k < K; k++) {
                double a = zt_bf16_value(c->ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k]);
                double b = zt_bf16_value(c->tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n]);
                s += a * b;
                s_abs += fabs(a * b);
            }
            double c0 = C0[(size_t)m * ldc + n];
            double want = c->alpha * s + c->beta * c0;
            /* the sums' rounding, alpha's and the final add's (one u each) */
            double bound = (g + 2 * u) * (fabs(c->alpha) * s_abs + fabs(c->beta * c0)) + 1e-30;
            double err = fabs(C[(size_t)m * ldc + n] - want);
            if (err > bound)
                fail_msg("path %d ta %d tb %d %dx%dx%d alpha %g beta %g: C[%d][%d] = %.9g, exact "
                         "%.9g, error %.3g > bound %.3g", path, c->ta, c->tb, M, N, K,
                         (double)c->alpha, (double)c->beta, m, n, C[(size_t)m * ldc + n], want,
                         err, bound);
            worst = err / bound > worst ? err / bound : worst;
        }
    /* the padding of C is not written */
    for (int m = 0; m < M; m++)
        for (int n = N; n < ldc; n++)
            if (C[(size_t)m * ldc + n] != C0[(size_t)m * ldc + n])
                fail_msg("path %d wrote C[%d][%d] past N", path, m, n);
    free(A); free(B); free(C); free(C0);
    (void)worst;
    return 1;
}

static const bcase cases[] = {
    {0, 0, 37, 53, 129, 0, 1.0f, 0.0f},
    {0, 1, 37, 53, 129, 3, 1.0f, 1.0f},
    {1, 0, 64, 40, 96, 5, 0.5f, 0.0f},
    {1, 1, 17, 33, 65, 0, 1.0f, 1.0f},
    {0, 1, 96, 80, 1100, 7, 1.0f, 0.0f},  /* three k-blocks for the fp32 path */
    {1, 0, 80, 96, 1100, 0, 1.0f, 1.0f},
    {0, 0, 1, 7, 3, 0, 1.0f, 0.0f},
};

static void test_paths(void **state)
{
    (void)state;
    int ran[2] = {0, 0};
    for (int path = 0; path < 2; path++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            ran[path] += run(path, &cases[i]);
    assert_int_equal(ran[0], (int)(sizeof cases / sizeof cases[0]));
    printf("fp32 path: %d cases; oneDNN path: %d cases (%s); default: %s\n", ran[0], ran[1],
           ran[1] ? "ran" : "no bf16 matmul here", zt_bgemm_describe());
    zt_bgemm_release();
}

/* the default follows the CPU: oneDNN with AMX-BF16, else the fp32 path */
static void test_default(void **state)
{
    (void)state;
    __builtin_cpu_init();
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int amx = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            amx = strstr(line, " amx_bf16") != NULL;
            break;
        }
    if (f)
        fclose(f);
    assert_int_equal(zt_bgemm_default(), amx);
    bcase c = {0, 1, 48, 64, 200, 0, 1.0f, 0.0f};
    /* zt_bgemm itself within the bound */
    int M = c.M, N = c.N, K = c.K;
    uint16_t *A = malloc(2 * (size_t)M * K), *B = malloc(2 * (size_t)N * K);
    float *C = malloc(4 * (size_t)M * N), *D = malloc(4 * (size_t)M * N);
    assert_non_null(A); assert_non_null(B); assert_non_null(C); assert_non_null(D);
    for (size_t i = 0; i < (size_t)M * K; i++)
        A[i] = zt_bf16_round(uniform());
    for (size_t i = 0; i < (size_t)N * K; i++)
        B[i] = zt_bf16_round(uniform());
    assert_int_equal(zt_bgemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N), 0);
    assert_int_equal(zt_bgemm_path(amx, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, D, N), 0);
    assert_memory_equal(C, D, 4 * (size_t)M * N); /* the same path: the same bits */
    free(A); free(B); free(C); free(D);
    zt_bgemm_release();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
