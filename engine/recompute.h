/* recompute.h - the recomputation plan of a built-in model (recompute.c). */
#ifndef ZT_ENGINE_RECOMPUTE_H
#define ZT_ENGINE_RECOMPUTE_H

#include <stddef.h>
#include <stdint.h>
#include "zerotrain.h"
#include "../models/model.h"

/* per step ZT_KEEP_*, the segment length (0: none) and the backward pass as steps
 * (models/model.h); the activation bytes the plan predicts for the planned batch shape (0:
 * not known); recompute_profile's counts per step */
typedef struct zt_rplan {
    int n;                    /* the model's steps (models/model.h; its units when it has
                               * no steps of its own, or no model) */
    int *unit;                /* [n]: each step's unit */
    unsigned char *mode;      /* [n] */
    int k;
    zt_step *bsteps;
    int n_bsteps;
    size_t act_predicted;
    char plan[1024];          /* "auto": the plan, for the log */
    uint64_t *calls, *bytes;
    double *sec;
} zt_rplan;

/* zt_rplan_setup: the plan of the config for a model of nu units (per step ZT_KEEP_*, the
 * segment length; a model of your own, ops NULL: nothing); zt_rplan_apply hands rc->mode /
 * rc->k to the model, and the backward steps and the predicted activation bytes follow. */
int zt_rplan_setup(zt_rplan *rc, const zt_config *c, int nu, const zt_model_ops *ops,
                   void *model);
int zt_rplan_apply(zt_rplan *rc, const zt_config *c, const zt_model_ops *ops, void *model);
void zt_rplan_free(zt_rplan *rc);
/* Whether backward step k is the last backward use of its unit (its gradient is then
 * complete). */
int zt_rplan_last_use(const zt_rplan *rc, int k);
/* "keep", "selective", "full", "full+offload" (ZT_KEEP_*) */
const char *zt_keep_name(int mode);

#endif
