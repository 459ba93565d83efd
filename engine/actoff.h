/* actoff.h - activation checkpoint offload (actoff.c). */
#ifndef ZT_ENGINE_ACTOFF_H
#define ZT_ENGINE_ACTOFF_H

#include <stddef.h>
#include "zerotrain.h"
#include "recompute.h"
#include "../models/model.h"

struct zt_store;

/* a buffer offloaded layer outputs share */
typedef struct zt_cslot {
    void *p;
    int holder;              /* the unit whose output it holds, or -1 */
    int putting, loading;    /* a write of holder from it / a read of holder into it under way */
} zt_cslot;

/* blob u of store is unit u's output (-1: not offloaded), bytes each; the buffers they pass
 * through */
typedef struct zt_actoff {
    /* what it works with (zt_act_init) */
    const zt_config *cfg;     /* the aio settings */
    const char *dir;          /* nvme_path ("": a RAM pool) */
    int rank, n_units;
    const zt_model_ops *ops;
    void *model;
    const zt_rplan *rc;       /* the backward pass's steps */
    zt_mem_account *acct;     /* the engine's */
    struct zt_store *store;
    int *blob;
    size_t bytes;
    zt_cslot slot[4];
    int n_slot;
    int train;                /* the pass has a backward: outputs are written out */
} zt_actoff;

/* The model's context, once it exists (no store yet). */
void zt_act_init(zt_actoff *ao, const zt_config *cfg, const char *dir, int rank, int n_units,
                 const zt_model_ops *ops, void *model, const zt_rplan *rc, zt_mem_account *acct);
/* After the model carved a batch (prepare): opens or resizes the store when the model
 * offloads outputs. train: a backward pass follows (outputs are written out). */
int zt_act_begin(zt_actoff *ao, int train);
/* Around each forward (op 0), recompute or backward step of unit u; k: the step's index in
 * the backward steps or -1. before: the unit's input is in its buffer, its output buffer
 * free to write; after: the output written out (forward), the next input needed read ahead
 * (backward). */
int zt_act_before(zt_actoff *ao, int op, int u);
int zt_act_after(zt_actoff *ao, int op, int u, int k);
void zt_act_close(zt_actoff *ao);

#endif
