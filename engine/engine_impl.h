/* engine_impl.h - the engine's private state, shared by the files of engine/ (engine.c,
 * checkpoint.c). Nothing outside engine/ includes it. */
#ifndef ZT_ENGINE_IMPL_H
#define ZT_ENGINE_IMPL_H

#include "zerotrain.h"
#include "comm.h"
#include "../common/err.h"
#include "../models/bert.h"

#define ZT_SHARD_ALIGN 1024 /* floats: 4 KiB, O_DIRECT-aligned, whole 8-bit Adam blocks */

struct zt_engine {
    zt_config cfg;
    char err[ZT_ERRMSG_MAX];
    zt_comm comm;
    bert_config bc;
    zt_layout layout;
    const zt_model_ops *ops;
    void *model;
    size_t *padded;          /* per unit: floats incl. padding to N * ZT_SHARD_ALIGN */
    float **P, **G, **M, **V; /* M, V: whole units (stage 0) or this rank's shards */
    float **Gs;              /* N > 1 or stage 2: this rank's shard of the reduced gradient */
    float *scratch[2];       /* stage 2: whole-unit gradient buffers lent to one unit at a time */
    float *rs_tmp;           /* stage 2: one micro-batch's shard before it is added */
    int accum_first;         /* stage 2: the next micro-batch is the step's first */
    unsigned char *alias_seen; /* per parameter: the checkpoint stored the tied alias */
    int64_t step;
    int have_logits;
};

/* Allocates the AdamW moments (zero) if they do not exist yet. */
int zt_engine_ensure_moments(zt_engine *e);
/* Copies the thread's last error into the engine and returns rc. */
int zt_engine_fail(const zt_engine *e, int rc);

#endif
