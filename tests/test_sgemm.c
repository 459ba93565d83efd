/* test_sgemm.c - fp32 matrix products (zt_sgemm, models/hgemm.c) against the exact product of
 * the same fp32 values, computed in double: a product of two fp32 values is exact in double
 * (24 + 24 significand bits), and the double sum adds at most K 2^-53 sum |a b|. Each path may
 * differ from the exact value only by fp32's rounding of the sums:
 * |C - exact| <= gamma_K sum_k |a b| (+ alpha's and the final add's rounding), gamma_K =
 * K u / (1 - K u), u = 2^-24, for any order of summation (Higham, Accuracy and Stability,
 * 3.1). For the four transpositions, shapes cut into several blocks by rows and by columns
 * (and odd last blocks), leading dimensions wider than the rows, alpha 1 and 0.5, beta 0 and 1.
 * The default path is the one hgemm.h names for this CPU's flags.
 * `test_sgemm --onednn`: the oneDNN path, against the same bound; and its bits do not depend
 * on the thread count (1 to 8 threads) nor on being called inside a parallel region (the
 * attention's pairs call it so). Status 77 where the CPU lacks AVX-512 (that path is not
 * used there). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../models/hgemm.h"
#include "cpuflag.h"

static uint64_t rng;
static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24) * 4.0f - 2.0f;
}

typedef struct { int ta, tb, M, N, K, pad; float alpha, beta; } scase;

static const scase cases[] = {
    {0, 0, 37, 53, 129, 0, 1.0f, 0.0f},   /* one block */
    {0, 1, 37, 53, 129, 3, 1.0f, 1.0f},
    {1, 0, 64, 40, 96, 5, 0.5f, 0.0f},
    {1, 1, 17, 33, 65, 0, 1.0f, 1.0f},
    {0, 1, 517, 131, 300, 7, 1.0f, 0.0f}, /* rows in blocks, the last one short */
    {1, 0, 515, 96, 301, 0, 0.5f, 1.0f},
    {0, 0, 130, 700, 250, 2, 1.0f, 1.0f}, /* columns in blocks */
    {1, 1, 96, 1030, 200, 0, 1.0f, 0.0f},
    {1, 0, 8, 256, 4096, 0, 1.0f, 1.0f},  /* oneDNN's own threads would cut K at 8 */
    {0, 0, 1, 7, 3, 0, 1.0f, 0.0f},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

typedef struct { float *A, *B, *C0; int lda, ldb, ldc; } operands;

static operands make(const scase *c)
{
    int ra = c->ta ? c->K : c->M, ca = c->ta ? c->M : c->K;
    int rb = c->tb ? c->N : c->K, cb = c->tb ? c->K : c->N;
    operands o = {NULL, NULL, NULL, ca + c->pad, cb + c->pad, c->N + c->pad};
    o.A = malloc(4 * (size_t)ra * o.lda);
    o.B = malloc(4 * (size_t)rb * o.ldb);
    o.C0 = malloc(4 * (size_t)c->M * o.ldc);
    assert_non_null(o.A);
    assert_non_null(o.B);
    assert_non_null(o.C0);
    rng = 0x2545f4914f6cdd1dull + (uint64_t)(c->M * 7 + c->N * 13 + c->K);
    for (size_t i = 0; i < (size_t)ra * o.lda; i++)
        o.A[i] = uniform();
    for (size_t i = 0; i < (size_t)rb * o.ldb; i++)
        o.B[i] = uniform();
    for (size_t i = 0; i < (size_t)c->M * o.ldc; i++)
        o.C0[i] = uniform();
    return o;
}

static void drop(operands *o)
{
    free(o->A);
    free(o->B);
    free(o->C0);
}

/* C of one path (a fresh copy of C0 multiplied into) */
static float *product(int path, const scase *c, const operands *o)
{
    float *C = malloc(4 * (size_t)c->M * o->ldc);
    assert_non_null(C);
    memcpy(C, o->C0, 4 * (size_t)c->M * o->ldc);
    zt_sgemm_path(path, c->ta, c->tb, c->M, c->N, c->K, c->alpha, o->A, o->lda, o->B, o->ldb,
                  c->beta, C, o->ldc);
    return C;
}

/* fails on an element beyond the bound or a write into C's padding */
static void check(int path, const scase *c, const operands *o, const float *C)
{
    int M = c->M, N = c->N, K = c->K;
    double u = 0x1p-24, g = K * u / (1 - K * u);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0.0, s_abs = 0.0;
            for (int k = 0; k < K; k++) {
                double a = c->ta ? o->A[(size_t)k * o->lda + m] : o->A[(size_t)m * o->lda + k];
                double b = c->tb ? o->B[(size_t)n * o->ldb + k] : o->B[(size_t)k * o->ldb + n];
                s += a * b;
                s_abs += fabs(a * b);
            }
            double c0 = o->C0[(size_t)m * o->ldc + n];
            double want = c->alpha * s + c->beta * c0;
            /* the sums' rounding, alpha's and the final add's (one u each), the double sum's */
            double bound = (g + 2 * u) * (fabs(c->alpha) * s_abs + fabs(c->beta * c0)) +
                           K * 0x1p-53 * s_abs + 1e-30;
            double err = fabs(C[(size_t)m * o->ldc + n] - want);
            if (err > bound)
                fail_msg("path %d ta %d tb %d %dx%dx%d alpha %g beta %g: C[%d][%d] = %.9g, "
                         "exact %.9g, error %.3g > bound %.3g", path, c->ta, c->tb, M, N, K,
                         (double)c->alpha, (double)c->beta, m, n, C[(size_t)m * o->ldc + n],
                         want, err, bound);
        }
    for (int m = 0; m < M; m++)
        for (int n = N; n < o->ldc; n++)
            if (C[(size_t)m * o->ldc + n] != o->C0[(size_t)m * o->ldc + n])
                fail_msg("path %d wrote C[%d][%d] past N", path, m, n);
}

static void test_openblas(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES; i++) {
        operands o = make(&cases[i]);
        float *C = product(0, &cases[i], &o);
        check(0, &cases[i], &o, C);
        free(C);
        drop(&o);
    }
}

static int avx512(void)
{
    return cpu_flag("avx512f") && cpu_flag("avx512bw") && cpu_flag("avx512vl") &&
           cpu_flag("avx512dq");
}

/* oneDNN where /proc/cpuinfo lists AVX-512 (libdnnl2 is one of the project's packages), else
 * OpenBLAS; zt_sgemm gives that path's bits */
static void test_default(void **state)
{
    (void)state;
    assert_int_equal(zt_sgemm_default(), avx512());
    printf("fp32 products: %s\n", zt_sgemm_describe());
    const scase *c = &cases[4];
    operands o = make(c);
    float *C = product(zt_sgemm_default(), c, &o);
    float *D = malloc(4 * (size_t)c->M * o.ldc);
    assert_non_null(D);
    memcpy(D, o.C0, 4 * (size_t)c->M * o.ldc);
    zt_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, o.A, o.lda, o.B, o.ldb, c->beta, D,
             o.ldc);
    assert_memory_equal(C, D, 4 * (size_t)c->M * o.ldc);
    free(C);
    free(D);
    drop(&o);
}

/* the oneDNN path: within the bound; the same bits on 1-8 threads and from inside a parallel
 * region */
static int onednn(void)
{
    if (!avx512() || !zt_sgemm_default()) {
        printf("fp32 products take OpenBLAS here (%s): skipped\n", zt_sgemm_describe());
        return 77;
    }
    int saved = omp_get_max_threads();
    for (int i = 0; i < NCASES; i++) {
        const scase *c = &cases[i];
        operands o = make(c);
        omp_set_num_threads(1);
        float *C1 = product(1, c, &o);
        check(1, c, &o, C1);
        size_t bytes = 4 * (size_t)c->M * o.ldc;
        for (int t = 2; t <= 8; t++) {
            omp_set_num_threads(t);
            float *Ct = product(1, c, &o);
            if (memcmp(C1, Ct, bytes)) {
                fprintf(stderr, "case %d: %d threads give other bits than one\n", i, t);
                return 1;
            }
            free(Ct);
        }
        float *Cp = NULL;
        omp_set_num_threads(2);
#pragma omp parallel num_threads(2)
        if (omp_get_thread_num() == 1)
            Cp = product(1, c, &o);
        if (!Cp || memcmp(C1, Cp, bytes)) {
            fprintf(stderr, "case %d: inside a parallel region, other bits than alone\n", i);
            return 1;
        }
        float *C0 = product(0, c, &o);
        size_t differ = 0;
        for (size_t j = 0; j < bytes / 4; j++)
            differ += C0[j] != C1[j];
        printf("case %d (%dx%dx%d): oneDNN within the bound, the same bits on 1-8 threads and "
               "in a parallel region; %zu of %zu elements differ from OpenBLAS's bits\n", i,
               c->M, c->N, c->K, differ, bytes / 4);
        free(C0);
        free(Cp);
        free(C1);
        drop(&o);
    }
    omp_set_num_threads(saved);
    printf("oneDNN sgemm path: %d cases\n", NCASES);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--onednn"))
        return onednn();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openblas),
        cmocka_unit_test(test_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
