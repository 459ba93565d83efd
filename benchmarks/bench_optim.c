/* bench_optim.c - the optimizer kernels over one large shard, in one run with the machine's
 * copy bandwidth: fp32 AdamW (zt_adamw_update: reads p, g, m, v and writes p, m, v: 28
 * bytes per parameter) as a fraction of copy bandwidth, and block-wise 8-bit AdamW
 * (zt_adam8bit_update: 16 bytes per parameter plus the absmax) as a ratio of fp32 AdamW's
 * time, with the kernel the run-time dispatch picked (scalar, avx2, avx512). State bytes per
 * parameter of each. Prints one JSON object.
 * Usage: bench_optim [--threads N] [--mib S] [--iters N] */
#include "../optimizer/adam8bit.h"
#include "sgemm_time.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double copy_bw(float *a, const float *b, size_t n, int iters)
{
    double best = 1e30;
    for (int r = 0; r < iters; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i];
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return 2.0 * (double)n * sizeof(float) / best;
}

int main(int argc, char **argv)
{
    int threads = 0, iters = 5;
    long mib = 128; /* parameters' fp32 bytes */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mib"))
            mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
    }
    if (threads > 0)
        omp_set_num_threads(threads);
    size_t n = (size_t)mib * 1048576 / sizeof(float);
    n -= n % ZT_QBLOCK;
    size_t nb = n / ZT_QBLOCK;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4),
          *am = malloc(nb * 4), *av = malloc(nb * 4);
    uint8_t *cm = malloc(n), *cv = malloc(n);
    if (!p || !g || !m || !v || !am || !av || !cm || !cv) {
        fprintf(stderr, "bench_optim: out of memory\n");
        return 1;
    }
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) { /* first touch by the threads that use the pages */
        p[i] = (float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
        g[i] = (float)((i * 40503u) % 1000) * 1e-5f - 0.005f;
        m[i] = v[i] = 0.0f;
        cm[i] = q.m_zero;
        cv[i] = q.v_zero;
    }
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        am[b] = av[b] = 0.0f;
    double bw = copy_bw(m, g, n, iters);
    double t32 = 1e30, t8 = 1e30;
    for (int r = 1; r <= iters; r++) {
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, r, 1.0f};
        double t0 = now();
        zt_adamw_update(p, g, m, v, n, &hp, 1);
        double t1 = now();
        zt_adam8bit_update(&q, p, g, cm, cv, am, av, n, &hp, 1);
        double t2 = now();
        t32 = t1 - t0 < t32 ? t1 - t0 : t32;
        t8 = t2 - t1 < t8 ? t2 - t1 : t8;
    }
    printf("{\"threads\": %d, \"parameters\": %zu, \"adam8bit_path\": \"%s\", "
           "\"copy_bytes_per_s\": %.4g, "
           "\"adamw_seconds\": %.6f, \"adamw_bytes_per_s\": %.4g, \"adamw_vs_copy\": %.3f, "
           "\"adam8bit_seconds\": %.6f, \"adam8bit_vs_adamw\": %.3f, "
           "\"state_bytes_per_param_fp32\": 8, \"state_bytes_per_param_8bit\": %.4f}\n",
           omp_get_max_threads(), n, zt_adam8bit_path_name(zt_adam8bit_path(&q)), bw, t32,
           28.0 * (double)n / t32, 28.0 * (double)n / t32 / bw, t8, t8 / t32,
           2.0 + 8.0 / ZT_QBLOCK);
    free(p), free(g), free(m), free(v), free(am), free(av), free(cm), free(cv);
    return 0;
}
