/* sgemm_time.h - what the benchmark programs share: a monotonic clock and the median time
 * of zerotrain's fp32 product (zt_sgemm, models/hgemm.h: oneDNN's sgemm where the CPU has
 * AVX-512, else OpenBLAS's) at one shape, called the way zerotrain's linear layers call it
 * (A[M,K] x B[N,K]^T). Header-only: each benchmark is one file, linked with libzerotrain.a. */
#ifndef ZT_BENCH_SGEMM_TIME_H
#define ZT_BENCH_SGEMM_TIME_H

#include "../models/hgemm.h"

#include <cblas.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median seconds of iters calls */
static inline double sgemm_seconds(int M, int K, int N, int iters)
{
    float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K),
          *c = malloc(sizeof(float) * (size_t)M * N);
    double t[64], med;
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return -1.0;
    }
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++)
        b[i] = (float)(i % 5) * 0.1f;
    zt_sgemm(0, 1, M, N, K, 1, a, K, b, K, 0, c, N);
    for (int i = 0; i < iters; i++) {
        double t0 = now();
        zt_sgemm(0, 1, M, N, K, 1, a, K, b, K, 0, c, N);
        t[i] = now() - t0;
    }
    qsort(t, (size_t)iters, sizeof t[0], cmp);
    med = t[iters / 2];
    free(a), free(b), free(c);
    return med;
}

#endif
