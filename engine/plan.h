/* plan.h - the memory planner behind zerotrain.memory_limit (plan.c). */
#ifndef ZT_ENGINE_PLAN_H
#define ZT_ENGINE_PLAN_H

#include <stddef.h>
#include "footprint.h"

typedef struct zt_engine zt_engine;

/* ---- plan.c: zerotrain.memory_limit ---------------------------------------------------
 * Sets cfg.offload_optimizer / offload_param so the predicted peak fits the limit (keeping
 * what the config asked for); report gets the plan. 0 without a limit. Before zt_zero_setup. */
int zt_plan_memory(zt_engine *e, char *report, size_t n);
/* The planner's footprint of this engine's placement, stage and world size (footprint.h). */
void zt_plan_footprint(const zt_engine *e, zt_footprint *fp);
/* ZT_E_NOMEM when the predicted bytes (the planner's prediction, per rank, times this
 * engine's ranks on this machine) exceed the machine's RAM and swap (zt_fault_hooks.memory_total,
 * pretends a smaller machine: tests only), or what offload puts on NVMe exceeds nvme_path's
 * free space; the message gives the bytes and what would fit. what: the model's source.
 * After zt_plan_memory, before anything large is allocated. Every rank decides alike from
 * the same prediction (ranks on machines of different sizes may not). */
int zt_plan_check_fit(zt_engine *e, const char *what);


#endif
