/* lscale.h - fp16's dynamic loss scaling, as DeepSpeed's DynamicLossScaler
 * (deepspeed/runtime/fp16/loss_scaler.py, update_scale) with its config keys' defaults:
 * fp16.loss_scale 0 = dynamic (else that static scale), initial_scale_power 16 (the first
 * scale 2^16), loss_scale_window 1000, hysteresis 2 (overflows tolerated before the scale
 * drops: DeepSpeed's delayed_shift), consecutive_hysteresis false, min_loss_scale 1; the
 * factor is 2. After each step: an overflow (a non-finite gradient) skips the step and, once
 * the hysteresis is used up, halves the scale, never below min_loss_scale; window steps
 * after the last overflow the scale doubles (and the hysteresis refills). An overflow at the
 * minimum scale with no hysteresis left is an error, as DeepSpeed raises one. Pure state:
 * the engine keeps one, checkpoints it and logs the scale. */
#ifndef ZT_ENGINE_LSCALE_H
#define ZT_ENGINE_LSCALE_H

#include <stdint.h>

typedef struct zt_lscale {
    int dynamic;
    double scale, factor, min_scale;
    int window, delayed_shift, hysteresis, consecutive;
    int64_t iter, last_overflow;
} zt_lscale;

/* static_scale > 0: a fixed scale (dynamic 0); else dynamic from 2^init_power */
void zt_lscale_init(zt_lscale *s, double static_scale, int init_power, int window,
                    int hysteresis, int consecutive, double min_scale);
/* after a step (overflow: it was skipped). 0, or ZT_E_RANGE with a message when the scale
 * would have to go below min_loss_scale (the state is left as it was). */
int zt_lscale_update(zt_lscale *s, int overflow);

#endif
