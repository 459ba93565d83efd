/* recompute.h - the recomputation plan of a built-in model (recompute.c). */
#ifndef ZT_ENGINE_RECOMPUTE_H
#define ZT_ENGINE_RECOMPUTE_H

#include <stddef.h>
#include <stdint.h>
#include "../models/model.h"

typedef struct zt_engine zt_engine;

/* per unit ZT_KEEP_*, the segment length (0: none) and the backward pass as steps
 * (models/model.h); the activation bytes the plan predicts for the planned batch shape (0:
 * not known); recompute_profile's counts per unit */
typedef struct zt_rplan {
    unsigned char *mode;
    int k;
    zt_step *bsteps;
    int n_bsteps;
    size_t act_predicted;
    char plan[1024];          /* "auto": the plan, for the log */
    uint64_t *calls, *bytes;
    double *sec;
} zt_rplan;

/* ---- recompute.c ----------------------------------------------------------------------
 * zt_recompute_setup: the plan of the config (per unit ZT_KEEP_*, the segment length);
 * zt_recompute_apply hands e->rmode / e->rk to the model, and the backward steps and the
 * predicted activation bytes follow. */
int zt_recompute_setup(zt_engine *e);
int zt_recompute_apply(zt_engine *e);
/* "keep", "selective", "full", "full+offload" (ZT_KEEP_*) */
const char *zt_keep_name(int mode);


#endif
