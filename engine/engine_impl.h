/* engine_impl.h - the engine's private state, shared by the files of engine/ (engine.c,
 * zero.c, checkpoint.c). Nothing outside engine/ includes it. */
#ifndef ZT_ENGINE_IMPL_H
#define ZT_ENGINE_IMPL_H

#include "zerotrain.h"
#include "comm.h"
#include "../common/err.h"
#include "../models/zoo.h"
#include "../optimizer/adamw.h"
#include "../optimizer/adafactor.h"
#include "footprint.h"
#include "geom.h"
#include "ostate.h"

#define ZT_POOL_MAX 32      /* stage 3: most whole-unit parameter buffers */
#define ZT_MAX_PARTS 1024   /* stage 0: most ranks (it keeps every rank's state shard) */
#define ZT_TRAINER_INFO_MAX 4096 /* bytes of a trainer's record, its NUL included */

/* A use: one acquire of one unit (zt_engine_unit_acquire), as a pass's order has it; until:
 * the trainer released it before the acquire `until` uses later (1: the next one; tied units
 * used together: later; 0: not known, at the end). Stage 3 walks the uses of a pass in
 * order, gathering ahead. */
typedef struct zt_use {
    int unit, until;
    int purpose;             /* ZT_FOR_* */
} zt_use;

/* the pass in progress (units.c) */
enum { ZT_PASS_NONE = 0, ZT_PASS_FORWARD, ZT_PASS_EVAL, ZT_PASS_BACKWARD };

/* a pass's order of acquires (units.c): recorded from the first pass of its kind, or
 * declared (zt_engine_set_order) */
typedef struct zt_order {
    zt_use *use;
    int n, cap, known;
} zt_order;

/* Stage 3's gather schedule over the uses of a pass (see zero.c). */
typedef struct zt_sched {
    int *refs;               /* per unit: acquired uses that need it */
    int acquired;            /* uses [.., acquired] are acquired */
    int dry;                 /* count only: no buffers, no MPI */
    size_t live, live_peak;  /* floats gathered now / at most */
    int units_live;          /* units gathered now (each takes a pool buffer) */
    double moved;            /* floats all-gathered */
} zt_sched;

typedef struct zt_pool_buf {
    float *p;
    size_t cap;   /* floats */
    int unit;     /* -1 = free */
} zt_pool_buf;


typedef struct zt_pslot {
    float *p;                /* the largest shard's floats */
    int unit;                /* the shard it holds, -1 = none */
    int pinned, loading;     /* in use; a read into it may be in flight */
    int ahead;               /* read ahead and not used yet (evicted last) */
    uint64_t used;           /* last use (least recently used goes first) */
} zt_pslot;

/* a buffer offloaded layer outputs share (activation checkpoint offload) */
typedef struct zt_cslot {
    float *p;
    int holder;              /* the unit whose output it holds, or -1 */
    int putting, loading;    /* a write of holder from it / a read of holder into it under way */
} zt_cslot;

typedef struct zt_ogroup {
    int unit, blob;
    size_t c0, c1;           /* positions [c0, c1) of the unit's shard */
    size_t f0, nc;           /* its compact positions [f0, f0 + nc) (ostate.h) */
    size_t bytes;            /* its state's bytes (the blob) */
} zt_ogroup;

struct zt_engine {
    zt_config cfg;
    char err[ZT_ERRMSG_MAX];
    zt_comm comm;
    zt_model_cfg mc;
    zt_layout layout;
    const zt_model_ops *ops;
    void *model;
    zt_geometry geo;         /* the units over the world size, cut into pieces (geom.h) */
    int whole_grad;          /* stages 2-3: the unit whose gradient stays whole through the
                              * backward pass (a tied unit adds into it), or -1 */
    float **P, **G;
    /* the optimizer state (ostate.c): per unit n_parts parts (stage 0: every rank's shard,
     * which together are the whole unit; otherwise this rank's), each with its runs and,
     * without offload, its bytes */
    int opt, beta1;          /* ZT_OPT_*; Adafactor keeps a first moment */
    unsigned char *pcompact; /* per parameter: compact state (ostate.h) */
    zt_spart *parts;
    int n_parts;
    int state_ready;         /* the parts' state exists (RAM; offload: the store's blobs) */
    struct zt_adam8_maps *maps;
    float *af_rc;            /* Adafactor: the factored row and column moments, replicated */
    size_t *af_off;          /* per parameter: its rows and columns in af_rc */
    size_t af_floats;
    size_t *af_soff;         /* per parameter: its sums within its unit's (ostate.c) */
    size_t af_len, af_buf_n; /* doubles of one unit's sums at most; of af_buf */
    double *af_buf;
    float *af_lr;            /* the step sizes of the unit being updated */
    float *af_cfac;          /* the column factors and row means of the tensor being updated */
    zt_adafactor_hparams up_af; /* the update in progress (Adafactor) */
    float **Gs;              /* N > 1 or stage 2: this rank's shard of the reduced gradient */
    int overlap;             /* stages 2-3: reduce a unit while the next one computes */
    /* stages 2-3: gradient buffers lent to one unit at a time during the backward pass */
    float *scratch[2];
    int scratch_unit[2];     /* the unit whose reduction still reads scratch[i], or -1 */
    float *rs_tmp[2];        /* a later micro-batch's shard before it is added */
    int64_t *rpend_lo, *rpend_hi; /* per unit: the open reduce-scatters (sequence numbers) */
    int *rpend_tmp;          /* per unit: rs_tmp buffer to add from on completion, or -1 */
    int accum_first;         /* stage 2: the next micro-batch is the step's first */
    int micro;               /* micro-batches since the last step */
    int last_micro;          /* the pass running is the step's last micro-batch */
    int skip_unit;           /* tests (zt_fault_hooks): this unit's reductions are skipped */
    /* stage 3 */
    float **Ps;              /* this rank's shard of every unit's parameters */
    zt_pool_buf pool[ZT_POOL_MAX];
    int n_pool;
    zt_sched sched;
    int64_t *gpend_lo, *gpend_hi; /* per unit: its open all-gathers */
    unsigned char *persist;  /* kept gathered (smaller than persist_threshold) */
    /* the unit API (units.c): the schedule of the pass in progress (a training forward
     * pass: the forward order, then the backward's), each use's state (USE_*), the uses
     * the trainer released since the last acquire */
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
    int custom;              /* no built-in model: the trainer registered the units */
    int committed;           /* registration is over: the buffers exist */
    int *unit_nparams;       /* per unit: the parameters it was declared with */
    float **init_vals;       /* per parameter: ZT_INIT_VALUES' copy until commit, or NULL */
    float **drvP, **drvG;    /* the built-in models' view of the units they acquired */
    char **patterns;         /* copies of cfg.no_decay, then cfg.fp32_state */
    int n_patterns;
    unsigned char *alias_seen; /* per parameter: the checkpoint stored the tied alias */
    int64_t step;
    /* the divergence guard: a non-finite loss since the last step (this rank), steps
     * skipped so far, whether the unguarded warning was given */
    int loss_bad, warned_nonfinite;
    int64_t skipped_steps;
    int have_logits;
    /* optimizer offload: the moments of each sub-group of each unit's shard are one blob
     * [M | V] of the store */
    char nvme_path[3000];
    char plan[2048];         /* zerotrain.memory_limit: the plan, "" without a limit */
    double plan_base;        /* the planner's process bytes (measured once, with headroom;
                              * the largest over the ranks, so all plan alike) */
    struct zt_store *ostore;
    zt_ogroup *ogroup;       /* the sub-groups in step order */
    int n_ogroup;
    uint8_t *owork[ZT_OFF_MAXBUF]; /* working buffers: the largest sub-group's state each */
    size_t owork_bytes;
    int n_owork;
    int ocached;              /* the sub-group owork[0] holds for a checkpoint, or -1 */
    /* parameter offload (stage 3): blob u = unit u's shard; slots cache shards in RAM */
    struct zt_store *pstore;
    zt_pslot pslot[ZT_OFF_MAXBUF];
    int n_pslot;
    uint64_t pslot_clock;
    /* the update in progress (zt_zero_update): hyperparameters, next sub-group, an error
     * from the read-ahead; stage 3 with offload defers each unit's update to its next use */
    zt_adamw_hparams up_hp;
    int up_g, up_err;
    int lz_pending, lz_next;  /* deferred updates pending from unit lz_next on */
    int any_persist;          /* stage 3: some unit stays gathered (no deferral then) */
    int gs_stale;             /* zero_grad was called and no backward pass ran since */
    /* gradient offload (stages 2-3 with optimizer offload, cfg.offload_gradients > 0): blob
     * u of gstore is unit u's reduced gradient shard; it passes through rs_tmp[u & 1]:
     * gbuf[i] is the blob rs_tmp[i] holds (a put may still read it) or -1, gbuf_loading[i]
     * a read into it under way */
    struct zt_store *gstore;
    int gbuf[2], gbuf_loading[2];
    float *gacc[2];           /* a later micro-batch: the shard so far, read ahead */
    double *gsq;              /* per unit: the final shard's sum of squares, or -1 */
    /* recomputation: per unit ZT_KEEP_*, the segment length (0: none) and the backward pass
     * as steps (models/model.h); the activation bytes the plan predicts for the planned
     * batch shape (0: not known) */
    unsigned char *rmode;
    int rk;
    zt_step *bsteps;
    int n_bsteps;
    size_t act_predicted;
    char rplan[1024];         /* "auto": the plan, for the log */
    /* activation checkpoint offload (actoff.c): blob u of cstore is unit u's output (-1:
     * not offloaded), cbytes each; the buffers they pass through */
    struct zt_store *cstore;
    int *cblob;
    size_t cbytes;
    zt_cslot cslot[4];
    int n_cslot;
    int ctrain;               /* the pass has a backward: outputs are written out */
    /* recompute_profile: per unit */
    uint64_t *rc_calls, *rc_bytes;
    double *rc_sec;
    char source[640];         /* where the model comes from, for messages ("" for a
                               * trainer's own) */
    /* checkpoints (checkpoint.c): the run's lineage, 32 hex digits ("" until rank 0's first
     * save of a fresh engine, or a load adopts the checkpoint's); the trainer's record saved
     * with every checkpoint, and the one the last load read */
    char run_id[33];
    char trainer_info[ZT_TRAINER_INFO_MAX], loaded_info[ZT_TRAINER_INFO_MAX];
};

/* ---- recompute.c ----------------------------------------------------------------------
 * zt_recompute_setup: the plan of the config (per unit ZT_KEEP_*, the segment length);
 * zt_recompute_apply hands e->rmode / e->rk to the model, and the backward steps and the
 * predicted activation bytes follow. */
int zt_recompute_setup(zt_engine *e);
int zt_recompute_apply(zt_engine *e);
/* "keep", "selective", "full", "full+offload" (ZT_KEEP_*) */
const char *zt_keep_name(int mode);

/* ---- plan.c: zerotrain.memory_limit ---------------------------------------------------
 * Sets cfg.offload_optimizer / offload_param so the predicted peak fits the limit (keeping
 * what the config asked for); report gets the plan. 0 without a limit. Before zt_zero_setup. */
int zt_plan_memory(zt_engine *e, char *report, size_t n);
/* The planner's footprint of this engine's placement, stage and world size (footprint.h). */
void zt_plan_footprint(const zt_engine *e, zt_footprint *fp);
/* ZT_E_NOMEM when the predicted bytes (the planner's prediction, per rank, times this
 * engine's ranks on this machine) exceed the machine's RAM and swap (zt_fault_hooks.memory_total,
 * pretends a smaller machine: tests only), or what offload puts on NVMe exceeds nvme_path's
 * free space; the message gives the bytes and what would fit. what: the model's source.
 * After zt_plan_memory, before anything large is allocated. Every rank decides alike from
 * the same prediction (ranks on machines of different sizes may not). */
int zt_plan_check_fit(zt_engine *e, const char *what);

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

/* ---- zero.c: sharding and the stage logic ----------------------------------------------- */
/* Pads and cuts units for the world size and allocates every buffer the stage keeps. */
int zt_zero_setup(zt_engine *e);
void zt_zero_teardown(zt_engine *e);
/* Stage 3: a pass walks the uses e->uses[0..n_uses) (units.c sets them). zt_zero_pass_begin
 * lets go of anything gathered (a pass's end, or after an error); zt_zero_enter(k) makes use
 * k's unit present (gathering ahead within the prefetch budget) after letting go of the uses
 * rel[0..nrel) (a unit the next uses need again stays gathered). Below stage 3 these do
 * nothing. */
void zt_zero_pass_begin(zt_engine *e);
int zt_zero_enter(zt_engine *e, int k, const int *rel, int nrel);

/* ---- units.c: the unit API's bookkeeping ------------------------------------------------ */
/* The schedule of a training micro-batch (forward order, then backward order) as a new
 * array in *out: its length, 0 while an order is unknown, < 0 on error. */
int zt_units_train_schedule(const zt_engine *e, zt_use **out);
/* Ends the pass in progress (a step, zero_grad, save or load): checks nothing is held. */
int zt_units_pass_close(zt_engine *e, const char *what);
/* After an error inside a pass: every acquire let go of, the pass ended without checks
 * (stages 2-3: lent gradient buffers taken back). Returns rc. */
int zt_units_abort(zt_engine *e, int rc);
/* the unit API's state, freed */
void zt_units_free(zt_engine *e);
/* The unit API (zerotrain.h's zt_engine_add_unit ... zt_engine_set_order, which record the
 * error in the engine and commit before an acquire): the thread's error set on failure. */
int zt_units_add_unit(zt_engine *e, const char *name, int n_params, int *unit);
int zt_units_add_param(zt_engine *e, int unit, const zt_param_spec *p, int *index);
int zt_units_add_param_alias(zt_engine *e, int index, const char *name);
int zt_units_acquire(zt_engine *e, int u, int purpose, float **params, float **grads);
int zt_units_release(zt_engine *e, int u);
int zt_units_grads_ready(zt_engine *e, int u);
int zt_units_set_order(zt_engine *e, int kind, const int *units, const int *purposes,
                       const unsigned char *hold, int n);
/* checkpoints of a trainer's own model: config.json lists the units and parameters;
 * a checkpoint fits when its list is this engine's */
int zt_units_config_save(const zt_engine *e, const char *path);
int zt_units_config_check(const zt_engine *e, const char *path);
/* Backward pass. zt_zero_pass_grads_begin first (stages 0-1: settles reductions that
 * started early). Stages 2-3: lends unit u a gradient buffer before its backward, starts its
 * reduce-scatter after; zt_zero_grads_end reduces unit 0 and waits for every reduction.
 * Stages 0-1 in the step's last micro-batch (overlap on): start each unit's reduction after
 * its backward; the step waits for them. */
int zt_zero_pass_grads_begin(zt_engine *e);
int zt_zero_grads_lend(zt_engine *e, int u);
/* 0 when zt_zero_grads_lend(u) would find a buffer, else the error it would give */
int zt_zero_grads_can_lend(const zt_engine *e, int u);
int zt_zero_grads_reduce(zt_engine *e, int u);
int zt_zero_grads_end(zt_engine *e);
/* The step after the micro-batches: reductions of stages 0-1, this rank's sum of squares. */
int zt_zero_reduce(zt_engine *e, double *sumsq, int *bad_unit); /* first non-finite unit here */
/* Stages 2-3: every gradient shard becomes zero (a step after zero_grad with no backward). */
int zt_zero_clear_shards(zt_engine *e);
/* The optimizer (e->up_hp, e->up_af) on what this rank owns, then the all-gathers the stage
 * needs. */
int zt_zero_update(zt_engine *e);
/* Applies the updates a stage 3 step with offload deferred to the next forward pass; call
 * before anything reads or replaces parameters or optimizer state outside a pass. */
int zt_zero_flush(zt_engine *e);
/* Checkpoints stream the optimizer state. Saving: after zt_zero_state_stream_begin, section
 * `sec` (ostate.h) of unit u's part for rank r comes in zt_zero_state_pieces(e, u) pieces
 * (one without offload; with offload its sub-groups): piece k is read into a working buffer,
 * valid until the next call. Loading: zt_zero_state_fill asks fill for the state of part
 * (u, r) positions [c0, c1) with compact [f0, f0 + nc) into the block at base (ostate.h's
 * layout): every part this engine holds (stage 0: every rank's), whole without offload,
 * sub-group by sub-group with it, each written back at once. */
int zt_zero_state_pieces(const zt_engine *e, int u);
int zt_zero_state_piece(zt_engine *e, int u, int r, int sec, int k, const void **data,
                        size_t *bytes);
int zt_zero_state_stream_begin(zt_engine *e);
typedef int (*zt_state_fill_fn)(int u, const zt_spart *p, size_t c0, size_t c1, size_t f0,
                                size_t nc, uint8_t *base, void *arg);
int zt_zero_state_fill(zt_engine *e, zt_state_fill_fn fill, void *arg);
/* the optimizer offload's working buffers (bytes; 0 without offload) */
size_t zt_zero_offload_bytes(const zt_engine *e);
/* stage 3: this rank's slices of unit u's parameters into a whole-unit buffer */
int zt_zero_shard_to_whole(zt_engine *e, int u, float *whole);
/* Sets every unit's parameters from whole-unit data: fill(u, buf, arg) writes unit u into
 * buf (padded[u] floats, zeroed); stage 3 keeps only this rank's shard. */
int zt_zero_fill_params(zt_engine *e, int (*fill)(int u, float *buf, void *arg), void *arg);
/* this engine's bytes per category now (footprint.h) */
void zt_zero_footprint(const zt_engine *e, zt_footprint *o);
/* *plain: the stage's textbook figure (2 for stages 0-2, 3 for stage 3, one micro-batch);
 * returns what this engine's schedule moves per step of grad_accum_steps micro-batches
 * (stage 3: replayed without MPI) */
double zt_zero_traffic_theory(zt_engine *e, const zt_use *train, int n, double *plain);

/* Creates the optimizer state (zero moments) if it does not exist yet (zt_engine_: the
 * error also recorded in the engine). */
int zt_zero_ensure_moments(zt_engine *e);
int zt_engine_ensure_moments(zt_engine *e);
/* Writes the parameters as a Hugging Face folder (weights + config.json). Collective: rank
 * 0 writes; stage 3 streams, one gathered unit at a time. Every rank returns the same
 * verdict. */
int zt_engine_save_weights(zt_engine *e, const char *dir, size_t max_shard_bytes);
/* Collective: ZT_E_RANGE when a parameter holds a NaN or an infinity, naming the first (the
 * lowest parameter and element over every rank; stage 3: each rank scans its shards), in
 * "not <what> <path>: parameter ... : nothing was written". Applies deferred updates first.
 * Every rank returns the same verdict. */
int zt_engine_check_finite(zt_engine *e, const char *what, const char *path);
/* Loads Hugging Face weights from dir into the parameters (stage 3: into the shards). */
int zt_engine_load_params(zt_engine *e, const char *dir);
/* Every rank's rc agreed on: this rank's failure, or ZT_E_MPI naming `what` when another
 * rank failed (collective). */
int zt_engine_agree(zt_engine *e, int rc, const char *what);
/* cfgset.c: "name=value" lines of the fields every rank must share; bytes written or < 0 */
int zt_config_describe(const zt_config *c, char *buf, size_t n);
/* Copies the thread's last error into the engine and returns rc. */
int zt_engine_fail(const zt_engine *e, int rc);

#endif
