/* prof.c - counters for the per-kernel profile (see prof.h). */
#include "prof.h"

#include <string.h>
#include <time.h>

int zt_prof_on;

static struct {
    uint64_t calls;
    double seconds, flops, bytes;
} rows[ZT_PROF_KINDS];

static const char *const names[ZT_PROF_KINDS] = {
    [ZT_PROF_GEMM] = "GEMM",
    [ZT_PROF_SOFTMAX] = "attention softmax",
    [ZT_PROF_LAYERNORM] = "layernorm",
    [ZT_PROF_GELU] = "GELU",
    [ZT_PROF_DROPOUT] = "dropout",
    [ZT_PROF_EMBEDDING] = "embedding",
    [ZT_PROF_LOSS] = "loss",
    [ZT_PROF_ELEMENTWISE] = "bias, residual, copies",
    [ZT_PROF_OPTIMIZER] = "optimizer",
    [ZT_PROF_COMM_WAIT] = "communication wait",
    [ZT_PROF_IO_WAIT] = "I/O wait",
};

double zt_prof_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void zt_prof_add(int kind, double t0, double flops, double bytes)
{
    rows[kind].calls++;
    rows[kind].seconds += zt_prof_now() - t0;
    rows[kind].flops += flops;
    rows[kind].bytes += bytes;
}

void zt_profile_enable(int on) { zt_prof_on = on != 0; }

void zt_profile_reset(void) { memset(rows, 0, sizeof rows); }

int zt_profile_get(zt_profile_row *out, int max)
{
    int n = 0;
    for (int k = 0; k < ZT_PROF_KINDS && n < max; k++, n++) {
        out[n].kind = names[k];
        out[n].calls = rows[k].calls;
        out[n].seconds = rows[k].seconds;
        out[n].flops = rows[k].flops;
        out[n].bytes = rows[k].bytes;
    }
    return n;
}
