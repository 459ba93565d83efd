/* units.h - the unit API's state machine (units.c): the passes, the orders of
 * acquires, which unit is held and whose gradients are ready. Stage logic is zero.c's. */
#ifndef ZT_ENGINE_UNITS_H
#define ZT_ENGINE_UNITS_H

#include "zerotrain.h"
#include "comm.h"
#include "../models/model.h"

struct zt_zero;

/* A use: one acquire of one unit (zt_engine_unit_acquire), as a pass's order has it; until:
 * the trainer released it before the acquire `until` uses later (1: the next one; tied units
 * used together: later; 0: not known, at the end). Stage 3 walks the uses of a pass in
 * order, gathering ahead. */
typedef struct zt_use {
    int unit, until;
    int purpose;             /* ZT_FOR_* */
} zt_use;

/* the pass in progress */
enum { ZT_PASS_NONE = 0, ZT_PASS_FORWARD, ZT_PASS_EVAL, ZT_PASS_BACKWARD };

/* a pass's order of acquires: recorded from the first pass of its kind, or declared
 * (zt_engine_set_order) */
typedef struct zt_order {
    zt_use *use;
    int n, cap, known;
} zt_order;

/* The schedule of the pass in progress (a training forward pass: the forward order, then
 * the backward's), each use's state (USE_*), the uses the trainer released since the last
 * acquire; per unit what is held and the gradients' state. */
typedef struct zt_units {
    /* what it works with (zt_units_init) */
    zt_layout *L;            /* the units and parameters, registered here for a model of
                              * the trainer's own */
    zt_comm *comm;           /* (ranks compared while an order is recorded) */
    struct zt_zero *z;       /* the stage logic each acquire and release drives */
    int custom;              /* no built-in model: the trainer registers the units */
    int committed;           /* registration is over: the buffers exist (-1: commit failed) */
    zt_use *uses;
    int n_uses, uses_cap;
    unsigned char *use_state;
    int *rel;
    int n_rel;
    zt_order ord[2];         /* forward, backward */
    int pass;                /* ZT_PASS_* in progress */
    int pass_pos, pass_base; /* acquires so far in it; its first use's index in uses */
    int recording;           /* the pass records its kind's order */
    int *held;               /* per unit: acquires not released */
    unsigned char *gstate;   /* per unit: G_* in the backward pass in progress */
    int n_ready;             /* units whose gradients are ready in it */
    int *unit_nparams;       /* per unit: the parameters it was declared with */
    float **init_vals;       /* per parameter: ZT_INIT_VALUES' copy until commit, or NULL */
    void **drvP;             /* the built-in models' view of the units they acquired: the
                              * parameters (their dtype) and gradients */
    float **drvG;
} zt_units;

/* ---- units.c: the unit API's bookkeeping ------------------------------------------------ */
/* The schedule of a training micro-batch (forward order, then backward order) as a new
 * array in *out: its length, 0 while an order is unknown, < 0 on error. */
/* What the unit API works with; custom: the trainer registers the units (no built-in
 * model). The arguments must outlive un. */
void zt_units_init(zt_units *un, zt_layout *L, zt_comm *comm, struct zt_zero *z, int custom);
int zt_units_train_schedule(const zt_units *un, zt_use **out);
/* Ends the pass in progress (a step, zero_grad, save or load): checks nothing is held. */
int zt_units_pass_close(zt_units *un, const char *what);
/* After an error inside a pass: every acquire let go of, the pass ended without checks
 * (stages 2-3: lent gradient buffers taken back). Returns rc. */
int zt_units_abort(zt_units *un, int rc);
/* the unit API's state, freed */
void zt_units_free(zt_units *un);
/* The unit API (zerotrain.h's zt_engine_add_unit ... zt_engine_set_order, which record the
 * error in the engine and commit before an acquire): the thread's error set on failure. */
int zt_units_add_unit(zt_units *un, const char *name, int n_params, int *unit);
int zt_units_add_param(zt_units *un, int unit, const zt_param_spec *p, int *index);
int zt_units_add_param_alias(zt_units *un, int index, const char *name);
int zt_units_acquire(zt_units *un, int u, int purpose, void **params, float **grads);
int zt_units_release(zt_units *un, int u);
int zt_units_grads_ready(zt_units *un, int u);
int zt_units_set_order(zt_units *un, int kind, const int *units, const int *purposes,
                       const unsigned char *hold, int n);
/* checkpoints of a trainer's own model: config.json lists the units and parameters;
 * a checkpoint fits when its list is this engine's */
int zt_units_config_save(const zt_units *un, const char *path);
int zt_units_config_check(const zt_units *un, const char *path);

#endif
