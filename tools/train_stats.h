/* train_stats.h - step statistics, summary JSON and profile table of `zerotrain train`. */
#ifndef ZT_TOOLS_TRAIN_STATS_H
#define ZT_TOOLS_TRAIN_STATS_H

#include "zerotrain.h"

#include <stdint.h>
#include <stdio.h>

typedef struct train_stats {
    int warmup, done, n;     /* warm-up steps, steps seen, steps measured */
    double *seconds;         /* measured step times (rank 0's clock) */
    double flops;            /* this rank's model FLOPs over the measured steps */
    uint64_t comm0[3];       /* collective bytes when the warm-up ended */
    double wait0;
    uint64_t nvme0[2];       /* NVMe bytes read, written when the warm-up ended */
    double io0;
} train_stats;

typedef struct stats_context {
    const char *model;
    size_t parameters;
    int threads, micro, gas, batch, seq;
    const char *offload;     /* "none", "optimizer:nvme", "optimizer:nvme+params:nvme", ... */
    const char *recompute;   /* zerotrain.recompute as configured ("none", "full", ...) */
    const char *optimizer;   /* "adamw", "adamw8bit", "adafactor" */
} stats_context;

int stats_init(train_stats *s, int64_t steps, int warmup);
void stats_free(train_stats *s);
/* One step done. Returns 1 when it ended the warm-up (then the profile, if asked for, is
 * reset and turned on, and the caller marks the communication counters). */
int stats_step(train_stats *s, double seconds, double flops, int profile);
void stats_comm_mark(train_stats *s, const zt_engine_report *er);
void stats_print_profile(FILE *f, const train_stats *s);
/* Collective (every rank calls it); rank 0 writes path. Returns 0 or -1 (rank 0: write
 * failed). */
int stats_write_summary(const char *path, const train_stats *s, const stats_context *x,
                        zt_engine *e, int rank, int world);

#endif
