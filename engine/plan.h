/* plan.h - the memory planner behind zerotrain.memory_limit (plan.c): from the model, the
 * world size, the stage and the batch it predicts each rank's bytes (footprint.h), places
 * the optimizer state and stage 3's parameter shards, plans recomputation ("auto"), and
 * refuses a model the machine cannot hold before anything large is allocated. */
#ifndef ZT_ENGINE_PLAN_H
#define ZT_ENGINE_PLAN_H

#include <stddef.h>
#include "zerotrain.h"
#include "comm.h"
#include "footprint.h"
#include "recompute.h"
#include "../models/model.h"

/* What the planner works with (zt_plan_init; the pointers must outlive it). */
typedef struct zt_planner {
    zt_config *cfg;          /* the placement it decides is written here */
    const zt_layout *L;
    zt_comm *comm;
    zt_rplan *rc;            /* recompute "auto": the plan it decides is written here */
    const zt_model_ops *ops; /* NULL: a model of the trainer's own */
    void *model;
    const char *nvme;        /* nvme_path ("" none) */
    int whole_grad;          /* the whole-gradient unit (footprint.h) */
    double base;             /* the process's bytes before the engine allocates (measured
                              * once, with headroom; the largest over the ranks) */
} zt_planner;

void zt_plan_init(zt_planner *pn, zt_config *cfg, const zt_layout *L, zt_comm *comm,
                  zt_rplan *rc, const zt_model_ops *ops, void *model, const char *nvme,
                  int whole_grad);
/* Sets cfg->offload_optimizer / offload_param so the predicted peak fits the limit (keeping
 * what the config asked for); report gets the plan. 0 without a limit. Before the stage
 * logic's setup. Collective (the base is agreed on). */
int zt_plan_memory(zt_planner *pn, char *report, size_t n);
/* The planner's footprint of the config's placement, stage and world size. */
void zt_plan_footprint(const zt_planner *pn, zt_footprint *fp);
/* The planner's footprint, activation and I/O-buffer bytes for the config's placement and
 * stage at world size N (no collective: pn->comm is not used; zt_estimate_memory). */
void zt_plan_predict(const zt_planner *pn, int N, zt_footprint *fp, double *activations,
                     double *io);
/* ZT_E_NOMEM when the predicted bytes (per rank, times the ranks on this machine) exceed
 * the machine's RAM and swap (zt_fault_hooks.memory_total pretends a smaller machine: tests
 * only), or what offload puts on NVMe exceeds nvme_path's free space; the message gives the
 * bytes and what would fit. what: the model's source. After zt_plan_memory, before anything
 * large is allocated. Every rank decides alike from the same prediction (ranks on machines
 * of different sizes may not). */
int zt_plan_check_fit(zt_planner *pn, const char *what);

#endif
