/* limits.c - the machine's limits the benchmark report divides by, measured in the same run
 * as the training points: zerotrain's fp32 product FLOP/s (zt_sgemm: oneDNN's sgemm where the
 * CPU has AVX-512, else OpenBLAS's) at given GEMM shapes (the model's, as zerotrain calls
 * them: A[M,K] x B[N,K]^T), and memory bandwidth as a copy (a = b) and a
 * triad (a = b + s c), STREAM's convention (bytes read + written), on the given threads.
 * Prints one JSON object.
 * Usage: bench_limits [--threads N] [--shape M,K,N]... [--mem-mib S] [--iters N] */
#include "sgemm_time.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* best of reps, bytes per second */
static void bandwidth(size_t n, int reps, double *copy, double *triad)
{
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)),
          *c = malloc(n * sizeof(float));
    double best_c = 1e30, best_t = 1e30;
    *copy = *triad = 0.0;
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) { /* first touch by the threads that use the pages */
        a[i] = 0.0f;
        b[i] = 1.0f;
        c[i] = 2.0f;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i];
        double t1 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0f * c[i];
        double t2 = now();
        best_c = t1 - t0 < best_c ? t1 - t0 : best_c;
        best_t = t2 - t1 < best_t ? t2 - t1 : best_t;
    }
    if (a[n / 2] != 7.0f) /* keeps the loops from being optimised away */
        fprintf(stderr, "bench_limits: unexpected triad result %g\n", (double)a[n / 2]);
    *copy = 2.0 * (double)n * sizeof(float) / best_c;
    *triad = 3.0 * (double)n * sizeof(float) / best_t;
    free(a), free(b), free(c);
}

int main(int argc, char **argv)
{
    int threads = 0, iters = 7, nshape = 0, shapes[32][3];
    long mem_mib = 256;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mem-mib"))
            mem_mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--shape") && nshape < 32 &&
                 sscanf(argv[i + 1], "%d,%d,%d", &shapes[nshape][0], &shapes[nshape][1],
                        &shapes[nshape][2]) == 3 && shapes[nshape][0] > 0 &&
                 shapes[nshape][1] > 0 && shapes[nshape][2] > 0)
            nshape++;
        else {
            fprintf(stderr, "bench_limits: bad option %s %s\n", argv[i], argv[i + 1]);
            return 2;
        }
    }
    if (iters < 1 || iters > 63 || mem_mib < 16) {
        fprintf(stderr, "bench_limits: --iters 1..63, --mem-mib >= 16\n");
        return 2;
    }
    if (nshape == 0) { /* bert-base, batch 8 x 128: the attention and FFN projections */
        int d[2][3] = {{1024, 768, 768}, {1024, 768, 3072}};
        memcpy(shapes, d, sizeof d);
        nshape = 2;
    }
    if (threads > 0) {
        openblas_set_num_threads(threads);
        omp_set_num_threads(threads);
    }
    double total_flops = 0.0, total_s = 0.0, copy, triad;
    printf("{\n  \"threads\": %d,\n  \"sgemm\": [", threads > 0 ? threads : omp_get_max_threads());
    for (int s = 0; s < nshape; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        double sec = sgemm_seconds(M, K, N, iters), fl = 2.0 * M * (double)K * N;
        if (sec <= 0) {
            fprintf(stderr, "bench_limits: out of memory for shape %d,%d,%d\n", M, K, N);
            return 1;
        }
        total_flops += fl;
        total_s += sec;
        printf("%s\n    {\"m\": %d, \"k\": %d, \"n\": %d, \"seconds\": %.6g, \"flops_per_s\": %.6g}",
               s ? "," : "", M, K, N, sec, fl / sec);
    }
    bandwidth((size_t)mem_mib * 1048576 / sizeof(float), 5, &copy, &triad);
    /* the shapes' FLOPs over their time: what a model with these GEMMs in equal count
     * could reach */
    printf("\n  ],\n  \"sgemm_flops_per_s\": %.6g,\n  \"copy_bytes_per_s\": %.6g,\n"
           "  \"triad_bytes_per_s\": %.6g,\n  \"array_mib\": %ld\n}\n",
           total_flops / total_s, copy, triad, mem_mib);
    return 0;
}
