/* ostate.h - the optimizer state of a unit's shard, for each optimizer (AdamW, AdamW8bit,
 * Adafactor, Lamb): which parameters keep a compact fp32 state, the runs of a shard that belong to
 * one parameter, the byte layout of the state of a stretch of positions, and the update of
 * such a stretch. Where the state lives (RAM, the offload store) and the order of units is
 * zero.c's; the checkpoint sections are checkpoint.c's. Sees no engine.
 *
 * Positions: the state of rank r's shard of unit u has one entry per shard position j
 * (floats [0, padded / N) of zt_zero_seg's shard order). A run is a stretch [j0, j1) of it
 * inside one parameter (unit positions [a, a + j1 - j0)); the runs of a shard come in
 * position order. Parameters start on 256-float boundaries in their unit and shards are
 * cut at multiples of 1024 floats, so every run starts on a 256-element block of its
 * tensor: an 8-bit block never straddles a tensor or a shard.
 *
 * Layout of the state of positions [c0, c0 + n), nc of them compact (n a multiple of 256):
 *   AdamW, Lamb m[n] v[n]                                           (floats)
 *   AdamW8bit   cm[n] cv[n] (bytes), am[n/256] av[n/256] fm[nc] fv[nc] (floats): codes and
 *               block maxima of every position, fp32 moments of the compact positions (the
 *               tensors below min_8bit_size or named by fp32_state; their codes are unused)
 *   Adafactor   m[n] (floats, only with beta1), v[nc]: the compact positions are the
 *               vectors' (their full second moment); tensors of two or more dimensions keep
 *               factored row / column moments (per matrix of the last two dimensions)
 *               replicated on every rank (zt_ostate.af_rc), outside this layout. */
#ifndef ZT_ENGINE_OSTATE_H
#define ZT_ENGINE_OSTATE_H

#include <stddef.h>
#include <stdint.h>
#include "zerotrain.h"
#include "comm.h"
#include "geom.h"
#include "../models/model.h"
#include "../optimizer/adafactor.h"
#include "../optimizer/adamw.h"
#include "../optimizer/lamb.h"

struct zt_store;
struct zt_layout;

typedef struct zt_srun {
    size_t j0, j1;   /* shard positions */
    size_t a;        /* the unit position of j0 */
    size_t f0;       /* compact: the compact index of j0 */
    int param;
    int compact;
} zt_srun;

/* One rank's shard of a unit's state: its runs, its compact count, and without offload its
 * bytes (the layout of positions [0, len)). */
typedef struct zt_spart {
    int rank;
    zt_srun *run;
    int n_run;
    size_t len, n_compact;
    uint8_t *state;
} zt_spart;

/* The runs of rank r's shard of unit u under geometry g (compact[i]: parameter i keeps a
 * compact state). *out is malloc'ed. */
int zt_ost_runs(const struct zt_layout *L, const unsigned char *compact, int u, const zt_geom *g,
                int r, zt_srun **out, int *n, size_t *n_compact);
/* The compact index of shard position c (compact positions before it). */
size_t zt_ost_compact_before(const zt_spart *p, size_t c);

/* Layout flags (the `lay` argument): Adafactor keeps a first moment; half precision keeps
 * the fp32 master weights, as a last per-position section "master" of every optimizer. */
#define ZT_OST_BETA1 1
#define ZT_OST_MASTER 2
int zt_ost_layout(const zt_config *c);

/* Bytes to allocate for a state of b bytes (a part may have none). */
#define ZT_OST_ALLOC(b) ((b) ? (b) : (size_t)64)
/* Bytes of the state of n positions with nc compact. */
size_t zt_ost_bytes(int opt, int lay, size_t n, size_t nc);

/* Pointers into the state block base of positions [c0, c0 + n), compact [f0, f0 + nc). */
typedef struct zt_ost_view {
    size_t c0, f0;
    float *m, *v;          /* AdamW; Adafactor's m (beta1) */
    uint8_t *cm, *cv;      /* AdamW8bit codes */
    float *am, *av;        /* AdamW8bit block maxima */
    float *fm, *fv;        /* compact: AdamW8bit's fp32 moments; Adafactor's fv */
    float *w;              /* half precision: the fp32 master weights (NULL in fp32) */
} zt_ost_view;
void zt_ost_view_of(int opt, int lay, uint8_t *base, size_t c0, size_t n, size_t f0,
                    size_t nc, zt_ost_view *v);

/* Checkpoint sections: tensor "<name>.<unit>" of a rank file holds one section of its
 * shard of the unit. kind: per position, per 256-position block, per compact position. */
enum { ZT_SEC_POS = 0, ZT_SEC_BLOCK, ZT_SEC_COMPACT };
typedef struct zt_ost_sec {
    const char *name;
    int kind;
    zt_dtype dtype;
} zt_ost_sec;
/* The sections of an optimizer (returns the count, at most 7). */
int zt_ost_sections(int opt, int lay, const zt_ost_sec **out);
/* Elements of a section for n positions with nc compact, and its byte offset in the block. */
size_t zt_ost_sec_elems(const zt_ost_sec *s, size_t n, size_t nc);
size_t zt_ost_sec_offset(int opt, int lay, int sec, size_t n, size_t nc);

/* The optimizer's name as optimizer.type spells it. */
const char *zt_ost_name(int opt);

/* The engine's optimizer state: per unit n_parts parts (stage 0: every rank's shard, which
 * together are the whole unit; otherwise this rank's), each with its runs and, without
 * offload, its bytes; Adafactor's replicated factored moments and working arrays. */
#define ZT_MAX_PARTS 1024   /* stage 0: most ranks (it keeps every rank's state shard) */

typedef struct zt_ostate {
    /* what it works with (zt_ost_setup) */
    const zt_config *cfg;
    const zt_layout *L;
    const zt_geometry *geo;
    zt_comm *comm;           /* Adafactor's sums across ranks */
    zt_mem_account *acct;    /* the engine's: the state is counted there too */
    int opt, lay;            /* ZT_OPT_*; ZT_OST_* layout flags */
    int master_fresh;        /* half precision: the master holds nothing yet; the first
                              * update takes it from the parameters (already rounded) */
    unsigned char *pcompact; /* per parameter: compact state */
    zt_spart *parts;
    int n_parts;
    int state_ready;         /* the parts' state exists (RAM; offload: the store's blobs) */
    struct zt_adam8_maps *maps;
    float *af_rc;            /* Adafactor: the factored row and column moments, replicated */
    size_t *af_off;          /* per parameter: its rows and columns in af_rc */
    size_t af_floats;
    size_t *af_soff;         /* per parameter: its sums within its unit's */
    size_t af_len, af_buf_n; /* doubles of one unit's sums at most; of af_buf */
    double *af_buf;
    float *af_lr;            /* the step sizes of the unit being updated */
    float *af_cfac;          /* the column factors and row means of the tensor being updated */
    double *lb_buf;          /* Lamb: a part's sums (p^2, u^2 per parameter of a unit), their
                              * total, every rank's: (2 + N) x 2 x lb_np doubles */
    int lb_np;               /* the most parameters of a unit */
} zt_ostate;

/* ---- the optimizer state (ostate.c) -------------------------------------------------------
 * Setup once the geometry exists: which parameters are compact, the parts this rank holds
 * (every rank's shard at stage 0, which keeps whole units; its own otherwise) and their runs,
 * the 8-bit maps, Adafactor's shapes. No state memory yet. The arguments must outlive os. */
int zt_ost_setup(zt_ostate *os, const zt_config *cfg, const zt_layout *L,
                 const zt_geometry *geo, zt_comm *comm, zt_mem_account *acct);
void zt_ost_teardown(zt_ostate *os);
/* The part of unit u for rank r (stage 0: any rank; otherwise this rank's). */
zt_spart *zt_ost_part(const zt_ostate *os, int u, int r);
/* Fresh state (zero moments) of positions [c0, c0 + n) with nc compact at base. */
void zt_ost_init(const zt_ostate *os, uint8_t *base, size_t n, size_t nc);
/* Every part's state in RAM, zero (without offload; zt_ost_teardown frees it). */
int zt_ost_alloc_parts(zt_ostate *os);
/* Adafactor's replicated factored moments: allocated zero (once). */
int zt_ost_alloc_replicated(zt_ostate *os);

/* Where the parameters and gradients of unit u are during its update: p (and g) indexed by
 * shard position (stage 3's shard; the reduced gradient shard) or by unit position (a whole
 * unit buffer). */
typedef struct zt_ost_io {
    void *p;                 /* fp32, or half-precision parameters (hdt >= 0) */
    const float *g;
    int p_shard, g_shard;
    struct zt_store *poll;   /* a store the update streams through (polled while it runs) */
    int hdt;                 /* -1: fp32 parameters, else their ZT_HALF_* (the update runs on
                              * the fp32 master and writes its rounding into p) */
} zt_ost_io;

/* A step's hyperparameters: the elementwise optimizers' (whose grad_scale, the clipping
 * coefficient, applies to Adafactor too) and Adafactor's. */
typedef struct zt_ost_hparams {
    zt_adamw_hparams adamw;
    zt_adafactor_hparams af;
    zt_lamb_hparams lamb;
} zt_ost_hparams;

/* The elementwise optimizers (AdamW, AdamW8bit): part p's positions [c0, c1) with state
 * view v. */
int zt_ost_update_range(zt_ostate *os, const zt_ost_hparams *hp, const zt_spart *p,
                        size_t c0, size_t c1, const zt_ost_view *v, const zt_ost_io *io);
/* The optimizers whose update of a unit runs as a whole, with collectives of its own
 * (zt_ost_unitwise: Adafactor, Lamb; their sums span the shards), rather than elementwise by
 * sub-group; and that update, on every part this rank holds of unit u (views[k]: part k's
 * whole state), partial sums per part added in rank order across ranks (collective when the
 * parts are sharded):
 *   Adafactor  the replicated row/column moments and step sizes, the preconditioned
 *              update's RMS the same way, then the update;
 *   Lamb       the moments and each tensor's sums of p^2 and u^2, the trust ratios, then
 *              the update. */
int zt_ost_unitwise(int opt);
int zt_ost_update_unit(zt_ostate *os, const zt_ost_hparams *hp, int u, zt_spart *const *parts,
                       int n_parts, const zt_ost_view *views, const zt_ost_io *io);

/* Bytes of optimizer state the engine holds (parts, replicated moments), and its prediction
 * before setup for world size N: the state of a rank's shards (whole: every rank's, stage 0)
 * returned, Adafactor's replicated factored moments in *replicated. */
size_t zt_ost_state_bytes(const zt_ostate *os);
/* The bytes of the largest offload sub-group (an optimizer offload working buffer) over every
 * rank's shards, each cut into groups of gf floats as the engine cuts them (a group of an
 * fp32-state tensor of AdamW8bit takes 8 bytes a float, not 2) */
double zt_ost_predict_group_max(const zt_config *c, const zt_layout *L, int N, size_t gf,
                                int *groups);
double zt_ost_predict_bytes(const zt_config *c, const zt_layout *L, int N, int whole,
                            double *replicated);

#endif
