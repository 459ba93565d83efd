/* actoff.h - activation checkpoint offload (actoff.c). */
#ifndef ZT_ENGINE_ACTOFF_H
#define ZT_ENGINE_ACTOFF_H

#include <stddef.h>

typedef struct zt_engine zt_engine;
struct zt_store;

/* a buffer offloaded layer outputs share */
typedef struct zt_cslot {
    float *p;
    int holder;              /* the unit whose output it holds, or -1 */
    int putting, loading;    /* a write of holder from it / a read of holder into it under way */
} zt_cslot;

/* blob u of store is unit u's output (-1: not offloaded), bytes each; the buffers they pass
 * through */
typedef struct zt_actoff {
    struct zt_store *store;
    int *blob;
    size_t bytes;
    zt_cslot slot[4];
    int n_slot;
    int train;                /* the pass has a backward: outputs are written out */
} zt_actoff;

/* ---- actoff.c: activation checkpoint offload ------------------------------------------
 * After the model carved a batch (prepare): opens or resizes the store when the model
 * offloads outputs. train: a backward pass follows (outputs are written out). */
int zt_act_begin(zt_engine *e, int train);
/* Around each forward (op 0), recompute or backward step of unit u; k: the step's index in
 * e->bsteps (backward pass) or -1. before: the unit's input is in its buffer, its output
 * buffer free to write; after: the output written out (forward), the next input needed
 * read ahead (backward). */
int zt_act_before(zt_engine *e, int op, int u);
int zt_act_after(zt_engine *e, int op, int u, int k);
void zt_act_close(zt_engine *e);


#endif
