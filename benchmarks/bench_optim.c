/* bench_optim.c - the optimizer kernels over one large shard, in one run with the machine's
 * copy bandwidth: fp32 AdamW (zt_adamw_update: reads p, g, m, v and writes p, m, v: 28
 * bytes per parameter) as a fraction of copy bandwidth, and block-wise 8-bit AdamW
 * (zt_adam8bit_update: 16 bytes per parameter plus the absmax) as a ratio of fp32 AdamW's
 * time, with the kernel the run-time dispatch picked (scalar, avx2, avx512). State bytes per
 * parameter of each. And the 8-bit kernel's own speed with no memory traffic: every thread
 * updating a shard of its own that stays in its L2 cache (adam8bit_in_cache_vs_adamw, per
 * parameter against fp32 AdamW over the large shard): the least adam8bit_vs_adamw this
 * kernel's arithmetic allows on this machine, whatever the memory does. Prints one JSON
 * object.
 * Usage: bench_optim [--threads N] [--mib S] [--iters N] [--path scalar|avx2|avx512] */
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

/* The 8-bit kernel with all threads busy, each on a shard of its own of `per` parameters
 * that stays in its cache (the nested call runs on the calling thread). */
static int path = ZT_ADAM8_AUTO; /* --path: the kernel timed */

typedef struct cached {
    size_t per;
    float *p, *g, *am, *av; /* thread t's shard at t * per (t * per / ZT_QBLOCK) */
    uint8_t *cm, *cv;
} cached;

static int cached_init(cached *c, size_t per, int threads)
{
    size_t n = per * (size_t)threads, nb = n / ZT_QBLOCK;
    c->per = per;
    c->p = malloc(n * 4), c->g = malloc(n * 4), c->am = malloc(nb * 4), c->av = malloc(nb * 4);
    c->cm = malloc(n), c->cv = malloc(n);
    if (!c->p || !c->g || !c->am || !c->av || !c->cm || !c->cv)
        return -1;
#pragma omp parallel
    { /* each thread touches its own shard first */
        size_t lo = (size_t)omp_get_thread_num() * per;
        for (size_t i = lo; i < lo + per; i++) {
            c->p[i] = (float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
            c->g[i] = (float)((i * 40503u) % 1000) * 1e-5f - 0.005f;
        }
        zt_adam8bit_init(c->cm + lo, c->cv + lo, c->am + lo / ZT_QBLOCK,
                         c->av + lo / ZT_QBLOCK, per);
    }
    return 0;
}

/* Seconds per parameter of `reps` steps on every thread's shard, by the slowest thread. */
static double cached_run(cached *c, const zt_adam8_maps *q, int reps)
{
    double slowest = 0.0;
#pragma omp parallel
    {
        size_t lo = (size_t)omp_get_thread_num() * c->per;
#pragma omp barrier
        double t0 = now();
        for (int k = 1; k <= reps; k++) {
            zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, k, 1.0f, 0};
            zt_adam8bit_update_path(path, q, c->p + lo, c->g + lo, c->cm + lo, c->cv + lo,
                                    c->am + lo / ZT_QBLOCK, c->av + lo / ZT_QBLOCK, c->per, &hp,
                                    1);
        }
        double t = now() - t0;
#pragma omp critical
        slowest = t > slowest ? t : slowest;
    }
    return slowest / ((double)c->per * reps);
}

static void cached_free(cached *c)
{
    free(c->p), free(c->g), free(c->am), free(c->av), free(c->cm), free(c->cv);
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
        else if (!strcmp(argv[i], "--path"))
            path = !strcmp(argv[i + 1], "scalar") ? ZT_ADAM8_SCALAR
                   : !strcmp(argv[i + 1], "avx2") ? ZT_ADAM8_AVX2
                   : !strcmp(argv[i + 1], "avx512") ? ZT_ADAM8_AVX512 : ZT_ADAM8_AUTO;
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
    }
    if (threads > 0)
        omp_set_num_threads(threads);
    omp_set_max_active_levels(1); /* cached_run's nested kernels run on their own threads */
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
        cm[i] = cv[i] = 0;
    }
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++)
        am[b] = av[b] = 0.0f;
    /* 131072 parameters a thread: 1.3 MB of p, g and codes, inside a 2 MiB L2 */
    cached c;
    if (cached_init(&c, 131072, omp_get_max_threads())) {
        fprintf(stderr, "bench_optim: out of memory\n");
        return 1;
    }
    double bw = copy_bw(m, g, n, iters);
    double t32 = 1e30, t8 = 1e30, s8 = 1e30;
    for (int r = 1; r <= iters; r++) {
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, r, 1.0f, 0};
        double t0 = now();
        zt_adamw_update(p, g, m, v, n, &hp, 1);
        double t1 = now();
        zt_adam8bit_update_path(path, &q, p, g, cm, cv, am, av, n, &hp, 1);
        double t2 = now();
        t32 = t1 - t0 < t32 ? t1 - t0 : t32;
        t8 = t2 - t1 < t8 ? t2 - t1 : t8;
        double s = cached_run(&c, &q, 20); /* in the same round: the same machine state */
        s8 = s < s8 ? s : s8;
    }
    cached_free(&c);
    printf("{\"threads\": %d, \"parameters\": %zu, \"adam8bit_path\": \"%s\", "
           "\"copy_bytes_per_s\": %.4g, "
           "\"adamw_seconds\": %.6f, \"adamw_bytes_per_s\": %.4g, \"adamw_vs_copy\": %.3f, "
           "\"adam8bit_seconds\": %.6f, \"adam8bit_vs_adamw\": %.3f, "
           "\"adam8bit_in_cache_ns_per_param\": %.4f, \"adam8bit_in_cache_vs_adamw\": %.3f, "
           "\"state_bytes_per_param_fp32\": 8, \"state_bytes_per_param_8bit\": %.4f}\n",
           omp_get_max_threads(), n, zt_adam8bit_path_name(path == ZT_ADAM8_AUTO ? zt_adam8bit_path(&q) : path), bw, t32,
           28.0 * (double)n / t32, 28.0 * (double)n / t32 / bw, t8, t8 / t32,
           s8 / omp_get_max_threads() * 1e9, s8 / omp_get_max_threads() / (t32 / (double)n),
           2.0 + 8.0 / ZT_QBLOCK);
    free(p), free(g), free(m), free(v), free(am), free(av), free(cm), free(cv);
    return 0;
}
