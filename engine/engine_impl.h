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
#define ZT_POOL 3
    float **Ps;              /* stage 3: this rank's shard of every unit's parameters */
    float *pool[ZT_POOL];    /* stage 3: whole-unit parameter buffers lent to gathered units */
    int pool_unit[ZT_POOL];  /* the unit holding each pool buffer, -1 = free */
    int *gathered;           /* stage 3: per unit, how many users hold it gathered */
    unsigned char *persist;  /* stage 3: kept gathered (smaller than persist_threshold) */
    unsigned char *alias_seen; /* per parameter: the checkpoint stored the tied alias */
    int64_t step;
    int have_logits;
};

/* Allocates the AdamW moments (zero) if they do not exist yet. */
int zt_engine_ensure_moments(zt_engine *e);
/* Writes whole-unit parameters P as a Hugging Face folder (not collective). */
int zt_engine_write_model(zt_engine *e, const char *dir, float *const *P,
                          size_t max_shard_bytes);
/* *whole = whole-unit parameters: e->P, or in stage 3 gathered copies (collective) that
 * zt_engine_free_gathered releases. */
int zt_engine_gather_params(zt_engine *e, float ***whole);
void zt_engine_free_gathered(zt_engine *e, float **whole);
/* Loads Hugging Face weights from dir into the parameters (stage 3: into the shards). */
int zt_engine_load_params(zt_engine *e, const char *dir);
/* Copies the thread's last error into the engine and returns rc. */
int zt_engine_fail(const zt_engine *e, int rc);

#endif
