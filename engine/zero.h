/* zero.h - the ZeRO stages (zero.c): the gradients' lending, reduction and offload,
 * stage 3's gather schedule and pool, parameter offload, the optimizer offload's sub-groups and
 * the update in progress. */
#ifndef ZT_ENGINE_ZERO_H
#define ZT_ENGINE_ZERO_H

#include "zerotrain.h"
#include "comm.h"
#include "footprint.h"
#include "geom.h"
#include "ostate.h"
#include "units.h"
#include "../optimizer/adamw.h"
#include "../optimizer/adafactor.h"

struct zt_store;

#define ZT_POOL_MAX 32      /* stage 3: most whole-unit parameter buffers */

/* Gradients: whole per unit below stage 2; stages 2-3 lend scratch buffers during the
 * backward pass and keep this rank's reduced shards. With a 16-bit accumulation dtype
 * (gdt >= 0: data_types.grad_accum_dtype, fp16's default) every stage lends fp32 buffers
 * to the backward, and what is summed over micro-batches is 16-bit: stages 0-1's whole
 * gradients (Gh) and the reduced shards (Hs, or the offloaded blobs). */
typedef struct zt_grads {
    float **G;               /* per unit: the gradient the backward adds into (stages 2-3,
                              * and any stage with gdt: lent while the unit's backward runs) */
    float **Gs;              /* N > 1 or stage 2: this rank's shard of the reduced gradient */
    int gdt;                 /* -1: gradients accumulated in fp32; else ZT_HALF_* */
    int cdt;                 /* -1: reduced in fp32; else ZT_HALF_* (communication_data_type:
                              * zt_comm_start_reduce_scatter16, half the bytes) */
    size_t ges;              /* bytes per accumulated gradient element: 4 or 2 */
    uint16_t **Gh;           /* gdt, stages 0-1: the whole gradients summed over the step */
    uint16_t **Hs;           /* gdt, N > 1 or stage >= 2: this rank's reduced shards */
    uint16_t *hstage[2];     /* gdt with gradient offload: a shard rounded for its put */
    int whole_grad;          /* stages 2-3: the unit whose gradient stays whole through the
                              * backward pass (a tied unit adds into it), or -1 */
    int overlap;             /* stages 2-3: reduce a unit while the next one computes */
    float *scratch[2];       /* stages 2-3: lent to one unit at a time */
    int scratch_unit[2];     /* the unit whose reduction still reads scratch[i], or -1 */
    float *rs_tmp[2];        /* a later micro-batch's shard before it is added */
    int64_t *rpend_lo, *rpend_hi; /* per unit: the open reduce-scatters (sequence numbers) */
    int *rpend_tmp;          /* per unit: rs_tmp buffer to add from on completion, or -1 */
    int accum_first;         /* stage 2: the next micro-batch is the step's first */
    int micro;               /* micro-batches since the last step */
    int last_micro;          /* the pass running is the step's last micro-batch */
    int skip_unit;           /* tests (zt_fault_hooks): this unit's reductions are skipped */
    int gs_stale;            /* zero_grad was called and no backward pass ran since */
    /* gradient offload (stages 2-3 with optimizer offload, cfg.offload_gradients > 0): blob
     * u of store is unit u's reduced gradient shard; it passes through rs_tmp[u & 1]: buf[i]
     * is the blob rs_tmp[i] holds (a put may still read it) or -1, buf_loading[i] a read
     * into it under way */
    struct zt_store *store;
    int buf[2], buf_loading[2];
    void *acc[2];            /* a later micro-batch: the shard so far, read ahead (ges bytes
                              * an element) */
    double *sumsq;           /* per unit: the final shard's sum of squares, or -1 */
} zt_grads;

/* Stage 3's gather schedule over the uses of a pass. */
typedef struct zt_sched {
    const zt_use *uses;      /* the uses it walks (the pass's, or a replay's) */
    int n_uses;
    int *refs;               /* per unit: acquired uses that need it */
    int acquired;            /* uses [.., acquired] are acquired */
    int dry;                 /* count only: no buffers, no MPI */
    size_t live, live_peak;  /* floats gathered now / at most */
    int units_live;          /* units gathered now (each takes a pool buffer) */
    double moved;            /* floats all-gathered */
} zt_sched;

typedef struct zt_pool_buf {
    void *p;      /* in the parameters' dtype */
    size_t cap;   /* elements */
    int unit;     /* -1 = free */
} zt_pool_buf;

/* stage 3: the shards, the gather pool and schedule */
typedef struct zt_gather {
    void **Ps;               /* this rank's shard of every unit's parameters */
    zt_pool_buf pool[ZT_POOL_MAX];
    int n_pool;
    zt_sched sched;
    int64_t *gpend_lo, *gpend_hi; /* per unit: its open all-gathers */
    unsigned char *persist;  /* kept gathered (smaller than persist_threshold) */
    int any_persist;         /* some unit stays gathered (no deferred update then) */
} zt_gather;

typedef struct zt_pslot {
    void *p;                 /* the largest shard's elements, in the parameters' dtype (the
                              * store holds the same bytes) */
    int unit;                /* the shard it holds, -1 = none */
    int pinned, loading;     /* in use; a read into it may be in flight */
    int ahead;               /* read ahead and not used yet (evicted last) */
    uint64_t used;           /* last use (least recently used goes first) */
} zt_pslot;

/* parameter offload (stage 3): blob u = unit u's shard; slots cache shards in RAM */
typedef struct zt_pshards {
    struct zt_store *store;
    zt_pslot slot[ZT_OFF_MAXBUF];
    int n_slot;
    uint64_t clock;
} zt_pshards;

typedef struct zt_ogroup {
    int unit, blob;
    size_t c0, c1;           /* positions [c0, c1) of the unit's shard */
    size_t f0, nc;           /* its compact positions [f0, f0 + nc) (ostate.h) */
    size_t bytes;            /* its state's bytes (the blob) */
} zt_ogroup;

/* optimizer offload: the state of each sub-group of each unit's shard is one blob */
typedef struct zt_optoff {
    struct zt_store *store;
    zt_ogroup *group;        /* the sub-groups in step order */
    int n_group;
    uint8_t *work[ZT_OFF_MAXBUF]; /* working buffers: the largest sub-group's state each */
    size_t work_bytes;
    int n_work;
    int cached;              /* the sub-group work[0] holds for a checkpoint, or -1 */
} zt_optoff;

/* the update in progress (zt_zero_update): hyperparameters, next sub-group, an error from
 * the read-ahead; stage 3 with offload defers each unit's update to its next use */
typedef struct zt_update {
    zt_ost_hparams hp;       /* the step's, as zt_zero_update was given them */
    int g, err;
    int lz_pending, lz_next;  /* deferred updates pending from unit lz_next on */
} zt_update;

/* The stage logic's state and what it works with (zt_zero_setup; the arguments must outlive
 * it): the parameters each unit has whole now, the gradients, stage 3's gathers, the
 * offloads and the update in progress. */
typedef struct zt_zero {
    zt_config *cfg;          /* (setup settles cfg->offload_gradients to 1 or -1) */
    zt_comm *comm;
    const zt_layout *L;
    const zt_geometry *geo;
    zt_ostate *os;
    const zt_units *un;      /* the pass's uses, which stage 3 gathers along */
    const char *nvme;        /* nvme_path */
    zt_mem_account *acct;    /* the engine's: every buffer here is counted there too */
    void **P;                /* per unit: its parameters, whole (stage 3: while gathered), in
                              * the parameters' dtype: fp32, or bf16/fp16 with half precision
                              * (the compute copies; the fp32 master is optimizer state) */
    int hdt;                 /* -1: fp32 parameters; else their ZT_HALF_* (common/half.h) */
    size_t pes;              /* bytes per parameter element: 4 or 2 */
    zt_grads gr;
    zt_gather ga;
    zt_pshards ps;
    zt_optoff oo;
    zt_update up;
} zt_zero;

/* ---- zero.c: sharding and the stage logic ----------------------------------------------- */
/* Pads and cuts units for the world size and allocates every buffer the stage keeps. */
int zt_zero_setup(zt_zero *z, zt_config *cfg, zt_comm *comm, const zt_layout *L,
                  const zt_geometry *geo, zt_ostate *os, const zt_units *un, const char *nvme,
                  int whole_grad, zt_mem_account *acct);
void zt_zero_teardown(zt_zero *z);
/* Stage 3: a pass walks the uses e->uses[0..n_uses) (units.c sets them). zt_zero_pass_begin
 * lets go of anything gathered (a pass's end, or after an error); zt_zero_enter(k) makes use
 * k's unit present (gathering ahead within the prefetch budget) after letting go of the uses
 * rel[0..nrel) (a unit the next uses need again stays gathered). Below stage 3 these do
 * nothing. */
void zt_zero_pass_begin(zt_zero *z);
int zt_zero_enter(zt_zero *z, int k, const int *rel, int nrel);

/* Backward pass. zt_zero_pass_grads_begin first (stages 0-1: settles reductions that
 * started early). Stages 2-3: lends unit u a gradient buffer before its backward, starts its
 * reduce-scatter after; zt_zero_grads_end reduces unit 0 and waits for every reduction.
 * Stages 0-1 in the step's last micro-batch (overlap on): start each unit's reduction after
 * its backward; the step waits for them. */
int zt_zero_pass_grads_begin(zt_zero *z);
int zt_zero_grads_lend(zt_zero *z, int u);
/* 0 when zt_zero_grads_lend(u) would find a buffer, else the error it would give */
int zt_zero_grads_can_lend(const zt_zero *z, int u);
int zt_zero_grads_reduce(zt_zero *z, int u);
int zt_zero_grads_end(zt_zero *z);
/* After an error inside a pass (collectives settled): stages 2-3 take back the gradient
 * buffers lent to units whose reductions never started. */
void zt_zero_take_back(zt_zero *z);
/* A backward pass begins: one more micro-batch (the step's last when grad_accum_steps are
 * done). */
void zt_zero_micro_begin(zt_zero *z);
/* What an acquire hands the trainer: unit u's parameters (whole) and gradient buffer; the
 * whole-gradient unit (-1: none). */
void *zt_zero_params(const zt_zero *z, int u);
float *zt_zero_grads(const zt_zero *z, int u);
int zt_zero_whole_grad(const zt_zero *z);
/* The step after the micro-batches: reductions of stages 0-1, this rank's sum of squares. */
int zt_zero_reduce(zt_zero *z, double *sumsq, int *bad_unit); /* first non-finite unit here */
/* zero_grad: every gradient buffer zero (stages 2-3: the whole-gradient unit's; the shards
 * marked stale). zt_zero_clear_stale, at a step: stale shards become zero (a step after
 * zero_grad with no backward). zt_zero_step_done: the micro-batch count starts again. */
int zt_zero_grads_clear(zt_zero *z);
int zt_zero_clear_stale(zt_zero *z);
void zt_zero_step_done(zt_zero *z);
/* Between kernels: the offload stores' queues kept full. */
void zt_zero_poll(zt_zero *z);
/* The optimizer (e->up_hp, e->up_af) on what this rank owns, then the all-gathers the stage
 * needs. */
/* Creates the optimizer state (zero moments; with offload, its store and working buffers)
 * if it does not exist yet. */
int zt_zero_ensure_moments(zt_zero *z);
int zt_zero_update(zt_zero *z, const zt_ost_hparams *hp);
/* Applies the updates a stage 3 step with offload deferred to the next forward pass; call
 * before anything reads or replaces parameters or optimizer state outside a pass. */
int zt_zero_flush(zt_zero *z);
/* Checkpoints stream the optimizer state. Saving: after zt_zero_state_stream_begin, section
 * `sec` (ostate.h) of unit u's part for rank r comes in zt_zero_state_pieces(e, u) pieces
 * (one without offload; with offload its sub-groups): piece k is read into a working buffer,
 * valid until the next call. Loading: zt_zero_state_fill asks fill for the state of part
 * (u, r) positions [c0, c1) with compact [f0, f0 + nc) into the block at base (ostate.h's
 * layout): every part this engine holds (stage 0: every rank's), whole without offload,
 * sub-group by sub-group with it, each written back at once. */
int zt_zero_state_pieces(const zt_zero *z, int u);
int zt_zero_state_piece(zt_zero *z, int u, int r, int sec, int k, const void **data,
                        size_t *bytes);
int zt_zero_state_stream_begin(zt_zero *z);
typedef int (*zt_state_fill_fn)(int u, const zt_spart *p, size_t c0, size_t c1, size_t f0,
                                size_t nc, uint8_t *base, void *arg);
int zt_zero_state_fill(zt_zero *z, zt_state_fill_fn fill, void *arg);
/* the optimizer offload's working buffers (bytes; 0 without offload) */
size_t zt_zero_offload_bytes(const zt_zero *z);
/* stage 3: this rank's slices of unit u's parameters into a whole-unit buffer (the
 * parameters' dtype) */
int zt_zero_shard_to_whole(zt_zero *z, int u, void *whole);
/* n parameter values at src (the parameters' dtype) widened into dst, or narrowed (rounded
 * to nearest even) from src into dst; plain copies in fp32 */
void zt_zero_pwiden(const zt_zero *z, float *dst, const void *src, size_t n);
void zt_zero_pnarrow(const zt_zero *z, void *dst, const float *src, size_t n);
/* the start of element off of a parameter buffer */
void *zt_zero_pat(const zt_zero *z, void *p, size_t off);
/* Unit u's fp32 master into whole: every part this rank holds (stage 0: the whole unit;
 * otherwise this rank's shard positions; a fresh master: the parameters). Returns 1 when
 * whole holds only this rank's positions and must be all-gathered, 0 when it is whole; an
 * error (< 0) comes only from a shard case: the caller all-gathers still, to stay in step. */
int zt_zero_master_to_whole(zt_zero *z, int u, float *whole);
/* unit u's gradient elements [off, off + n) as fp32 (stages 0-1: the whole gradient so far);
 * ZT_E_UNSUPPORTED when the stage does not keep it whole */
int zt_zero_grad_read(const zt_zero *z, int u, size_t off, float *dst, size_t n);
/* Half precision: parameter floats [off, off + n) of unit u written by the trainer also set
 * the fp32 master (RAM state; refused with the state offloaded, once the master is filled). */
int zt_zero_master_write(zt_zero *z, int u, size_t off, const float *src, size_t n);
/* Sets every unit's parameters from whole-unit data: fill(u, buf, arg) writes unit u into
 * buf (padded[u] fp32 floats, zeroed); stage 3 keeps only this rank's shard; half
 * precision keeps their rounding. */
int zt_zero_fill_params(zt_zero *z, int (*fill)(int u, float *buf, void *arg), void *arg);
/* this engine's bytes per category now (footprint.h) */
void zt_zero_footprint(const zt_zero *z, zt_footprint *o);
/* *plain: the stage's textbook figure (2 for stages 0-2, 3 for stage 3, one micro-batch);
 * returns what this engine's schedule moves per step of grad_accum_steps micro-batches
 * (stage 3: replayed without MPI) */
double zt_zero_traffic_theory(zt_zero *z, const zt_use *train, int n, double *plain);

#endif
