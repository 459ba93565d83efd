/* prof.h - the per-kernel profile behind `zerotrain train --profile`: time, FLOPs and bytes
 * moved per kernel kind. Off by default; when off a kernel pays one branch on a global
 * flag. Counters are process-wide and updated from the thread that calls the kernel (the
 * engine's); OpenMP work inside a kernel is timed as a whole. */
#ifndef ZT_COMMON_PROF_H
#define ZT_COMMON_PROF_H

#include "zerotrain.h"

extern int zt_prof_on;

double zt_prof_now(void);
/* Adds one call of `kind` that started at t0 (zt_prof_now) with its FLOPs and bytes. */
void zt_prof_add(int kind, double t0, double flops, double bytes);

#define ZT_PROF_T0() (zt_prof_on ? zt_prof_now() : 0.0)
#define ZT_PROF(kind, t0, flops, bytes)                                                      \
    do {                                                                                     \
        if (zt_prof_on)                                                                      \
            zt_prof_add((kind), (t0), (double)(flops), (double)(bytes));                     \
    } while (0)

#endif
