/* schedule.h - DeepSpeed's learning-rate schedules (WarmupLR, WarmupDecayLR, WarmupCosineLR)
 * as pure functions of the step, in double precision with DeepSpeed's operation order.
 * No JSON, no state, no validation: engine/config.c checks the parameters first. */
#ifndef ZT_OPTIMIZER_SCHEDULE_H
#define ZT_OPTIMIZER_SCHEDULE_H

#include <stdint.h>

#include "zerotrain.h"

typedef struct zt_sched_params {
    zt_sched_type type;
    double base_lr;                /* optimizer lr: the constant lr, WarmupCosineLR's scale */
    double min_lr, max_lr;         /* warmup_min_lr, warmup_max_lr (WarmupLR, WarmupDecayLR) */
    double warmup_min_ratio, cos_min_ratio; /* WarmupCosineLR */
    int64_t warmup_num_steps;      /* as configured (>= 1); DeepSpeed uses max(2, value) */
    int64_t total_num_steps;       /* WarmupDecayLR, WarmupCosineLR */
    int warmup_log;                /* 1 = "log", 0 = "linear" */
} zt_sched_params;

/* The lr DeepSpeed's scheduler object holds when its last_batch_iteration is `it`
 * (it = -1: the value set by the constructor, before the first scheduler.step()). */
double zt_sched_lr_at_iteration(const zt_sched_params *p, int64_t it);

/* The lr used by optimizer update `step` (0 = the first update). DeepSpeed's engine steps
 * the scheduler after each optimizer step, so update k runs with last_batch_iteration k-1. */
double zt_sched_lr(const zt_sched_params *p, int64_t step);

#endif
