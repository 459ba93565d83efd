/* bench_store.c - the offload store's write and read bandwidth on a path, to set against fio
 * with the same block size and queue depth (benchmarks/run.py runs both). Writes `--mib` MiB
 * as blobs of `--blob-mib` MiB, all in flight at once, then reads them back with every read
 * prefetched; checks the bytes; prints one JSON object.
 * Usage: bench_store --dir PATH [--mib 512] [--blob-mib 16] [--block-kib 1024] [--depth 8]
 *                    [--threads-only] */
#include "../offload/store.h"
#include "zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    long mib = 512, blob_mib = 16, block_kib = 1024, depth = 8;
    int threads_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads-only")) { threads_only = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--dir")) dir = argv[++i];
        else if (!strcmp(argv[i], "--mib")) mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--blob-mib")) blob_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--block-kib")) block_kib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--depth")) depth = atol(argv[++i]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (!dir || mib < 1 || blob_mib < 1 || blob_mib > mib || block_kib < 4 || depth < 1) {
        fprintf(stderr, "usage: bench_store --dir PATH [--mib N] [--blob-mib N] "
                        "[--block-kib N] [--depth N] [--threads-only]\n");
        return 2;
    }
    zt_store_opts o;
    zt_store_opts_init(&o);
    o.device = ZT_STORE_NVME;
    o.dir = dir;
    o.tag = "bench";
    o.io.block_size = (size_t)block_kib << 10;
    o.io.queue_depth = (int)depth;
    o.io.threads_only = threads_only;
    zt_store *s;
    if (zt_store_open(&s, &o) < 0) {
        fprintf(stderr, "bench_store: %s\n", zt_last_error());
        return 1;
    }
    int n = (int)(mib / blob_mib);
    size_t bytes = (size_t)blob_mib << 20;
    unsigned char *src = malloc(bytes * (size_t)n), *dst = malloc(bytes * (size_t)n);
    if (!src || !dst) {
        fprintf(stderr, "bench_store: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < bytes * (size_t)n; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(dst, 0xee, bytes * (size_t)n); /* touched: page faults are not I/O */
    for (int i = 0; i < n; i++)
        zt_store_add(s, bytes, ZT_MEM_OPTIMIZER);
    int rc = zt_store_reserve(s);
    double t0 = now();
    for (int i = 0; rc == 0 && i < n; i++)
        rc = zt_store_put(s, i, src + (size_t)i * bytes);
    if (rc == 0)
        rc = zt_store_sync(s);
    double t1 = now();
    for (int i = 0; rc == 0 && i < n; i++)
        rc = zt_store_prefetch(s, i, dst + (size_t)i * bytes);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = zt_store_get(s, i, dst + (size_t)i * bytes);
    double t2 = now();
    if (rc < 0) {
        fprintf(stderr, "bench_store: %s\n", zt_last_error());
        return 1;
    }
    if (memcmp(src, dst, bytes * (size_t)n) != 0) {
        fprintf(stderr, "bench_store: the bytes read back differ from the bytes written\n");
        return 1;
    }
    zt_store_stats st;
    zt_store_get_stats(s, &st);
    double total = (double)bytes * n;
    printf("{\"path\": \"%s\", \"bytes\": %.0f, \"block_size\": %zu, \"queue_depth\": %ld, "
           "\"backend\": \"%s\", \"direct\": %d, \"registered\": %d, "
           "\"write_bytes_per_s\": %.0f, \"read_bytes_per_s\": %.0f}\n",
           dir, total, o.io.block_size, depth, st.io.backend == ZT_IO_URING ? "io_uring"
                                   : st.io.backend == ZT_IO_URING_THREADS ? "io_uring threads"
                                                                           : "threads",
           st.io.direct, st.io.registered, total / (t1 - t0), total / (t2 - t1));
    zt_store_close(s);
    free(src);
    free(dst);
    return 0;
}
