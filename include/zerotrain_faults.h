/* zerotrain_faults.h - fault injection, for tests only (not installed).
 *
 * The library reads no environment variable to misbehave: a test, or a test driver such as
 * the zerotrain command (which fills this struct from ZT_FAULT_* and ZT_MEMORY_TOTAL), sets
 * the hooks once, before it creates an engine, and they apply process-wide until set again.
 * Without a call nothing is injected. */
#ifndef ZEROTRAIN_FAULTS_H
#define ZEROTRAIN_FAULTS_H

#include "zerotrain.h"

typedef struct zt_fault_hooks {
    /* checkpoint writing: "before:NAME" or "after:NAME", optionally "@K" (the K-th time it
     * is reached), NAME a file of the checkpoint, "rename" or "export": the process kills
     * itself with SIGKILL there ("" = never) */
    char point[128];
    /* offload stores: the filesystem refuses O_DIRECT; io_uring is unavailable (ENOSYS) */
    int io_no_odirect, io_no_uring;
    /* rank stall_rank stalls forever before collective stall_seq (-1: none) */
    int stall_rank;
    long long stall_seq;
    /* rank skip_rank skips the gradient reductions of unit skip_unit (-1: none) */
    int skip_rank, skip_unit;
    /* the memory planner's machine: this many bytes of RAM and no swap (0: /proc/meminfo) */
    double memory_total;
} zt_fault_hooks;

/* No fault anywhere (ranks and units -1). */
ZT_API void zt_fault_hooks_init(zt_fault_hooks *h);
/* Copies h (NULL: no faults). Not thread-safe: call before creating engines. */
ZT_API void zt_fault_hooks_set(const zt_fault_hooks *h);

#endif
