/* lscale.c - dynamic loss scaling (lscale.h), DeepSpeed's update_scale step for step. */
#include "lscale.h"
#include "../common/err.h"

#include "zerotrain.h"

#include <math.h>

void zt_lscale_init(zt_lscale *s, double static_scale, int init_power, int window,
                    int hysteresis, int consecutive, double min_scale)
{
    s->dynamic = !(static_scale > 0);
    s->scale = s->dynamic ? ldexp(1.0, init_power) : static_scale;
    s->factor = 2.0;
    s->min_scale = min_scale;
    s->window = window > 0 ? window : 1;
    s->delayed_shift = s->hysteresis = hysteresis > 0 ? hysteresis : 1;
    s->consecutive = consecutive;
    s->iter = 0;
    s->last_overflow = -1;
}

int zt_lscale_update(zt_lscale *s, int overflow)
{
    if (!s->dynamic) {
        s->iter++;
        return 0;
    }
    if (overflow) {
        if (s->delayed_shift == 1 || s->hysteresis == 1) {
            if (s->scale == s->min_scale)
                return zt_fail(ZT_E_RANGE, "fp16: the gradients overflowed at the minimum loss "
                               "scale %g (fp16.min_loss_scale): the scale cannot go lower",
                               s->scale);
            double next = s->scale / s->factor;
            s->scale = next > s->min_scale ? next : s->min_scale;
        } else {
            s->hysteresis--;
        }
        s->last_overflow = s->iter;
    } else {
        if (s->consecutive)
            s->hysteresis = s->delayed_shift;
        if ((s->iter - s->last_overflow) % s->window == 0) {
            if (!s->consecutive)
                s->hysteresis = s->delayed_shift;
            s->scale *= s->factor;
        }
    }
    s->iter++;
    return 0;
}
