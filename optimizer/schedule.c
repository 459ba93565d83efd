/* schedule.c - the lr of DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR at a step,
 * transcribed expression by expression so results match Python floats bit for bit.
 * Stateless: nothing here validates parameters, logs, or knows about JSON. */

/* Source followed: deepspeed/runtime/lr_schedules.py of deepspeedai/DeepSpeed at commit
 * 22779f2c6e335b494c90c05917206d3b14510d2d (master): warmup_num_steps is max(2, value); log
 * warmup gamma = log(it + 1) / log(warmup_num_steps), linear = it / warmup; WarmupDecayLR
 * decays linearly to warmup_min_lr at total_num_steps; WarmupCosineLR clamps its cosine
 * progress at 1, so the lr stays at cos_min_ratio past total_num_steps (earlier versions of
 * the file, without that clamp, let the cosine rise again). Before the first
 * scheduler.step() (it = -1) WarmupLR and WarmupDecayLR hold warmup_min_lr and WarmupCosineLR
 * holds 0. The engine (deepspeed/runtime/engine.py, _take_model_step) calls
 * lr_scheduler.step() right after optimizer.step(), so optimizer update k uses it = k - 1. */
#include "schedule.h"

#include <math.h>

/* WarmupLR._get_gamma / the warmup branch shared by all three (it < warmup). */
static double warmup_gamma(int64_t it, int64_t warmup, int warmup_log)
{
    if (warmup_log) {
        double inverse_log_warm_up = 1.0 / log((double)warmup);
        return inverse_log_warm_up * log((double)(it + 1));
    }
    return (double)it / (double)warmup;
}

double zt_sched_lr_at_iteration(const zt_sched_params *p, int64_t it)
{
    int64_t warmup = p->warmup_num_steps < 2 ? 2 : p->warmup_num_steps;
    double gamma, ratio;

    switch (p->type) {
    case ZT_SCHED_WARMUP_LR:
    case ZT_SCHED_WARMUP_DECAY_LR:
        if (it < 0)
            return p->min_lr;
        if (it < warmup)
            gamma = warmup_gamma(it, warmup, p->warmup_log);
        else if (p->type == ZT_SCHED_WARMUP_LR)
            gamma = 1.0;
        else {
            int64_t span = p->total_num_steps - warmup;
            gamma = (double)(p->total_num_steps - it) / (span < 1 ? 1.0 : (double)span);
            if (gamma < 0.0)
                gamma = 0.0;
        }
        return p->min_lr + (p->max_lr - p->min_lr) * gamma;
    case ZT_SCHED_WARMUP_COSINE_LR:
        if (it < 0)
            return 0.0;
        if (it < warmup) {
            ratio = warmup_gamma(it, warmup, p->warmup_log);
            ratio = p->warmup_min_ratio + ratio * (1. - p->warmup_min_ratio);
        } else {
            int64_t real_last_step = it - warmup + 1;
            int64_t real_total_steps = p->total_num_steps - warmup;
            double progress;
            if (real_total_steps < 1)
                real_total_steps = 1;
            progress = (double)real_last_step / (double)real_total_steps;
            if (progress > 1.0)
                progress = 1.0;
            ratio = (1 + cos(M_PI * progress)) / 2;
            ratio = p->cos_min_ratio + (1. - p->cos_min_ratio) * ratio;
            if (ratio < 0.0)
                ratio = 0.0;
        }
        return p->base_lr * ratio;
    case ZT_SCHED_CONSTANT:
    default:
        return p->base_lr;
    }
}

double zt_sched_lr(const zt_sched_params *p, int64_t step)
{
    return zt_sched_lr_at_iteration(p, step - 1);
}
