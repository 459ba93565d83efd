/* bench_hgemm.c - the bf16 products and the fp32 products' oneDNN path (models/hgemm.c)
 * against OpenBLAS's fp32 sgemm at the
 * linear layers' shapes, in one run: the forward out[M,N] = in[M,K] W[N,K]^T ("nt"), the
 * input's gradient din[M,K] = dout[M,N] W[N,K] ("nn") and the weight's dW[N,K] = dout^T in
 * ("tn"); per shape the paths interleaved (sgemm, bf16 path 0, bf16 path 1, zt_sgemm's oneDNN
 * path, sgemm, ...), the median of RUNS rounds, and each path's time as a ratio to sgemm's.
 * Prints the CPU, its bf16/AMX flags, the BLAS environment and the default paths: the figures
 * behind hgemm.h's choices.
 * Usage: build/bench_hgemm [THREADS] [RUNS]   (make bench-hgemm) */
#include "sgemm_time.h"
#include "../common/half.h"
#include "../models/hgemm.h"

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
        return fprintf(stderr, "usage: bench_hgemm [THREADS] [RUNS <= 64]\n"), 2;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    cpu_line();
    printf("threads %d, %d rounds; default bf16 path: %s; fp32: %s\n", threads, runs,
           zt_hgemm_describe(ZT_HALF_BF16), zt_sgemm_describe());
    /* bert-mini (4096 tokens, hidden 256, FF 1024) and bert-base (2048 tokens, 768, 3072):
     * (tokens, out features, in features) of a linear layer */
    const int shapes[][3] = {{4096, 256, 256}, {4096, 1024, 256}, {4096, 256, 1024},
                             {2048, 768, 768}, {2048, 3072, 768}, {2048, 768, 3072}};
    const char *kind[3] = {"nt", "nn", "tn"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int q = 0; q < 3; q++) {
            int T = shapes[s][0], O = shapes[s][1], In = shapes[s][2];
            /* the product C[M,N] = op(A) op(B): nt (T,O,I), nn (T,I,O), tn (O,I,T) */
            int M = q == 2 ? O : T, N = q == 0 ? O : In, K = q == 0 ? In : q == 1 ? O : T;
            int ta = q == 2, tb = q == 0;
            int lda = ta ? M : K, ldb = tb ? K : N;
            size_t na = (size_t)M * K, nb = (size_t)N * K;
            float *a = malloc(4 * na), *b = malloc(4 * nb), *c = malloc(4 * (size_t)M * N);
            uint16_t *ah = malloc(2 * na), *bh = malloc(2 * nb);
            if (!a || !b || !c || !ah || !bh)
                return fprintf(stderr, "out of memory\n"), 1;
            for (size_t i = 0; i < na; i++)
                a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
            for (size_t i = 0; i < nb; i++)
                b[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
            zt_bf16_from_f32(ah, a, na);
            zt_bf16_from_f32(bh, b, nb);
            double t[4][64];
            int have1 = zt_hgemm_path(1, ZT_HALF_BF16, ta, tb, M, N, K, 1.0f, ah, lda, bh, ldb,
                                      0.0f, c, N) == 0;
            zt_hgemm_path(0, ZT_HALF_BF16, ta, tb, M, N, K, 1.0f, ah, lda, bh, ldb, 0.0f, c, N);
            for (int r = 0; r < runs; r++) {
                double t0 = now();
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, lda, b, ldb, 0.0f,
                            c, N);
                t[0][r] = now() - t0;
                t0 = now();
                zt_hgemm_path(0, ZT_HALF_BF16, ta, tb, M, N, K, 1.0f, ah, lda, bh, ldb, 0.0f, c, N);
                t[1][r] = now() - t0;
                t0 = now();
                if (have1)
                    zt_hgemm_path(1, ZT_HALF_BF16, ta, tb, M, N, K, 1.0f, ah, lda, bh, ldb, 0.0f,
                                  c, N);
                t[2][r] = now() - t0;
                t0 = now();
                zt_sgemm_path(1, ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
                t[3][r] = now() - t0;
            }
            for (int p = 0; p < 4; p++)
                qsort(t[p], (size_t)runs, sizeof(double), cmp);
            double fl = 2.0 * M * N * K, s0 = t[0][runs / 2], s1 = t[1][runs / 2],
                   s2 = t[2][runs / 2], s3 = t[3][runs / 2];
            printf("%s %5d x %5d x %5d  sgemm %6.1f GFLOP/s | fp32 oneDNN %6.1f (%.2fx) | bf16: "
                   "widened %6.1f (%.2fx sgemm's time), oneDNN ", kind[q], M, N, K,
                   fl / s0 / 1e9, fl / s3 / 1e9, s3 / s0, fl / s1 / 1e9, s1 / s0);
            if (have1)
                printf("%6.1f (%.2fx)\n", fl / s2 / 1e9, s2 / s0);
            else
                printf("none on this CPU\n");
            free(a); free(b); free(c); free(ah); free(bh);
        }
    zt_hgemm_release();
    return 0;
}
