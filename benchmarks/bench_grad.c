/* bench_grad.c - forward+backward throughput of a random BERT (default bert-base, batch 8,
 * seq 128) as model FLOP/s, against zt_sgemm FLOP/s (zerotrain's fp32 product) measured in
 * the same process on the same threads. Model FLOPs count matrix products only (3x the forward's, as usual), the
 * MLM decoder over the labelled rows only, as training computes it.
 * Usage: bench_grad [--preset NAME] [--batch B] [--seq T] [--iters N] [--threads N] */
#include "zerotrain.h"
#include "sgemm_time.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* sgemm GFLOP/s at shape (M, K) x (K, N) */
static double sgemm_gflops(int M, int K, int N, int iters)
{
    return 2.0 * M * K * N / sgemm_seconds(M, K, N, iters) * 1e-9;
}

int main(int argc, char **argv)
{
    const char *preset = "bert-base";
    int B = 8, T = 128, iters = 5, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--preset")) preset = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (iters < 1 || iters > 63 || B < 1 || T < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    zt_config cfg;
    zt_engine *e;
    zt_model_info mi;
    zt_config_init(&cfg);
    cfg.model_preset = preset;
    cfg.threads = threads;
    if (zt_engine_create(&cfg, MPI_COMM_NULL, &e) < 0) {
        fprintf(stderr, "%s\n", zt_last_error());
        return 1;
    }
    zt_engine_model_info(e, &mi);
    int64_t *ids = malloc(sizeof *ids * (size_t)B * T), *lab = malloc(sizeof *lab * (size_t)B * T);
    for (int i = 0; i < B * T; i++) {
        ids[i] = 5 + (i * 7919) % (mi.vocab_size - 5);
        lab[i] = i % 7 == 0 ? ids[i] : -100;
    }
    zt_batch b = {B, T, ids, NULL, NULL, lab, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    zt_fb_result r;
    double t[64];
    zt_engine_forward_backward(e, &b, 0, &r); /* warm-up: activations allocated here */
    for (int i = 0; i < iters; i++) {
        double t0 = now();
        zt_engine_zero_grad(e);
        if (zt_engine_forward_backward(e, &b, 0, &r) < 0) {
            fprintf(stderr, "%s\n", zt_engine_last_error(e));
            return 1;
        }
        t[i] = now() - t0;
    }
    qsort(t, (size_t)iters, sizeof t[0], cmp);
    double M = (double)B * T, C = mi.hidden_size, F = mi.intermediate_size, V = mi.vocab_size;
    /* the MLM decoder runs on the labelled rows only (r.n_labels of them) in training */
    double fwd = mi.num_layers * (2 * M * C * C * 4 + 2 * M * C * F * 2 + 4.0 * B * T * T * C) +
                 2 * M * C * C + 2 * (double)r.n_labels * C * V;
    double model = 3 * fwd / t[iters / 2] * 1e-9;
    /* sgemm reference: the feed-forward shape, the largest product of the step */
    double ref = sgemm_gflops((int)M, (int)C, (int)F, 9);
    const char *ct = getenv("OPENBLAS_CORETYPE"), *l2 = getenv("OPENBLAS_L2_SIZE");
    printf("%s B=%d T=%d threads=%d (OpenBLAS %d) OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n", preset,
           B, T, threads, openblas_get_num_threads(), ct ? ct : "(unset)", l2 ? l2 : "(unset)");
    printf("forward+backward median %.3f s (min %.3f, max %.3f) over %d runs, %.0f tokens/s\n",
           t[iters / 2], t[0], t[iters - 1], iters, M / t[iters / 2]);
    printf("model %.1f GFLOP/s, sgemm [%dx%dx%d] %.1f GFLOP/s, ratio %.3f\n", model, (int)M,
           (int)C, (int)F, ref, model / ref);
    zt_engine_destroy(e);
    free(ids);
    free(lab);
    return 0;
}
