/* bench_bgemm.c - the bf16 products (models/bgemm.c) against OpenBLAS's fp32 sgemm at the
 * linear layers' shapes (out[M,N] = in[M,K] x W[N,K]^T), in one run: per shape the paths
 * interleaved (sgemm, path 0, path 1, sgemm, ...), the median of RUNS rounds, and each
 * path's time as a ratio to sgemm's. Prints the CPU, its bf16/AMX flags, the BLAS
 * environment and the default path: the figures behind bgemm.h's choice.
 * Usage: build/bench_bgemm [THREADS] [RUNS]   (make bench-bgemm) */
#include "sgemm_time.h"
#include "../common/half.h"
#include "../models/bgemm.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void cpu_line(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192], model[256] = "?";
    int bf = 0, amx = 0, avx512 = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) && model[0] == '?')
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
        if (!strncmp(line, "flags", 5)) {
            bf = strstr(line, " avx512_bf16") != NULL;
            amx = strstr(line, " amx_bf16") != NULL;
            avx512 = strstr(line, " avx512f") != NULL;
            break;
        }
    }
    if (f)
        fclose(f);
    model[strcspn(model, "\n")] = '\0';
    const char *ct = getenv("OPENBLAS_CORETYPE"), *l2 = getenv("OPENBLAS_L2_SIZE");
    printf("cpu %s; avx512f %s, avx512_bf16 %s, amx_bf16 %s; OPENBLAS_CORETYPE=%s "
           "OPENBLAS_L2_SIZE=%s\n", model, avx512 ? "yes" : "no", bf ? "yes" : "no",
           amx ? "yes" : "no", ct ? ct : "(unset)", l2 ? l2 : "(unset)");
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1, runs = argc > 2 ? atoi(argv[2]) : 9;
    if (threads < 1 || runs < 1 || runs > 64)
        return fprintf(stderr, "usage: bench_bgemm [THREADS] [RUNS <= 64]\n"), 2;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    cpu_line();
    printf("threads %d, %d rounds; default path: %s\n", threads, runs, zt_bgemm_describe());
    /* bert-mini (4096 tokens, hidden 256, FF 1024) and bert-base (2048 tokens, 768, 3072) */
    const int shapes[][3] = {{4096, 256, 256}, {4096, 1024, 256}, {4096, 256, 1024},
                             {2048, 768, 768}, {2048, 3072, 768}, {2048, 768, 3072}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = malloc(4 * (size_t)M * K), *b = malloc(4 * (size_t)N * K),
              *c = malloc(4 * (size_t)M * N);
        uint16_t *ah = malloc(2 * (size_t)M * K), *bh = malloc(2 * (size_t)N * K);
        if (!a || !b || !c || !ah || !bh)
            return fprintf(stderr, "out of memory\n"), 1;
        for (size_t i = 0; i < (size_t)M * K; i++)
            a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (size_t i = 0; i < (size_t)N * K; i++)
            b[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
        zt_bf16_from_f32(ah, a, (size_t)M * K);
        zt_bf16_from_f32(bh, b, (size_t)N * K);
        double t[3][64];
        int have1 = zt_bgemm_path(1, 0, 1, M, N, K, 1.0f, ah, K, bh, K, 0.0f, c, N) == 0;
        zt_bgemm_path(0, 0, 1, M, N, K, 1.0f, ah, K, bh, K, 0.0f, c, N); /* warm */
        for (int r = 0; r < runs; r++) {
            double t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K,
                        0.0f, c, N);
            t[0][r] = now() - t0;
            t0 = now();
            zt_bgemm_path(0, 0, 1, M, N, K, 1.0f, ah, K, bh, K, 0.0f, c, N);
            t[1][r] = now() - t0;
            t0 = now();
            if (have1)
                zt_bgemm_path(1, 0, 1, M, N, K, 1.0f, ah, K, bh, K, 0.0f, c, N);
            t[2][r] = now() - t0;
        }
        for (int p = 0; p < 3; p++)
            qsort(t[p], (size_t)runs, sizeof(double), cmp);
        double fl = 2.0 * M * N * K, s0 = t[0][runs / 2], s1 = t[1][runs / 2],
               s2 = t[2][runs / 2];
        printf("%5d x %5d x %5d  sgemm %6.1f GFLOP/s | fp32 path %6.1f (%.2fx sgemm's time) "
               "| oneDNN ", M, N, K, fl / s0 / 1e9, fl / s1 / 1e9, s1 / s0);
        if (have1)
            printf("%6.1f (%.2fx)\n", fl / s2 / 1e9, s2 / s0);
        else
            printf("none on this CPU\n");
        free(a); free(b); free(c); free(ah); free(bh);
    }
    zt_bgemm_release();
    return 0;
}
