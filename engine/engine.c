/* engine.c - the engine's public face, and the only file that sees struct zt_engine: creates
 * the engine and wires its modules, registers a built-in model's units through the unit API
 * (units.c) and commits the ZeRO buffers (zero.c), runs the built-in models' forward and
 * backward passes unit by unit through that same API, clips and steps, reports, reads and
 * writes parameters, saves and loads checkpoints around checkpoint.c. What each ZeRO stage
 * does around a unit lives in zero.c. */

#define ZT_EXPERIMENTAL
#include "zerotrain.h"
#include "actoff.h"
#include "checkpoint.h"
#include "comm.h"
#include "config.h"
#include "footprint.h"
#include "gen.h"
#include "geom.h"
#include "load.h"
#include "ostate.h"
#include "plan.h"
#include "recompute.h"
#include "units.h"
#include "zero.h"
#include "../common/err.h"
#include "../common/half.h"
#include "lscale.h"
#include "../common/prof.h"
#include "../common/rng.h"
#include "../format/fileio.h"
#include "../format/hfweights.h"
#include "../memory/mem.h"
#include "../models/hgemm.h"
#include "../models/zoo.h"
#include "../offload/store.h"
#include "../optimizer/adam8bit.h"
#include "../optimizer/adamw.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The engine: the sub-structs each module owns and declares in its own header (zstd's
 * context of sub-structs), wired here; no other file sees these members. Each module is
 * given what it works with when it is set up (the pointers below live as long as the engine).
 *
 *   module        header        sub-struct   what it owns
 *   geom.c        geom.h        geo          where each float of a unit lies over N ranks
 *   units.c       units.h       un           passes, orders of acquires, held units
 *   zero.c        zero.h        z (P, gr,    gradients; stage 3's gathers; parameter and
 *                               ga, ps, oo,  optimizer offload; the update in progress
 *                               up)
 *   ostate.c      ostate.h      os           the optimizer state's parts and layout
 *   recompute.c   recompute.h   rc           the recomputation plan
 *   actoff.c      actoff.h      ao           activation checkpoint offload
 *   checkpoint.c  checkpoint.h  ck           the run's lineage and the trainer's record
 *   footprint.c   footprint.h   -            bytes per category (pure)
 *   plan.c        plan.h        pn           memory_limit's placement
 *   stores.c      stores.h      -            an offload store with the aio settings */
struct zt_engine {
    zt_config cfg;
    char err[ZT_ERRMSG_MAX];
    zt_comm comm;
    zt_model_cfg mc;
    zt_layout layout;
    const zt_model_ops *ops;
    void *model;
    char source[640];        /* where the model comes from, for messages ("" for a
                              * trainer's own) */
    char **patterns;         /* copies of cfg.no_decay, then cfg.fp32_state */
    int n_patterns;
    char nvme_path[3000];
    char plan[2048];         /* zerotrain.memory_limit: the plan, "" without a limit */
    int64_t step;
    /* the divergence guard: a non-finite loss since the last step (this rank), steps
     * skipped so far, whether the unguarded warning was given */
    int loss_bad, warned_nonfinite;
    int64_t skipped_steps;
    int have_logits;
    int save_dtype;          /* ZT_PREC_* of the weights written (the run's precision) */
    zt_lscale ls;            /* fp16: the loss scale (lscale.c); scale 1 otherwise */
    zt_mem_account mem;      /* the bytes this engine's modules and model hold, per category */
    int whole_grad;          /* stages 2-3: the unit whose gradient stays whole, or -1 */
    zt_geometry geo;
    zt_units un;
    zt_zero z;               /* the stage logic: P, gr, ga, ps, oo, up */
    zt_ostate os;
    zt_rplan rc;
    zt_actoff ao;
    zt_ckpt ck;
    zt_planner pn;
};

/* engine.c's own helpers, used before their definitions */
static int zt_engine_ensure_moments(zt_engine *e);
static int zt_engine_save_weights(zt_engine *e, const char *dir, size_t max_shard_bytes);
static int zt_engine_check_finite(zt_engine *e, const char *what, const char *path);
static int zt_engine_load_params(zt_engine *e, const char *dir);
static int zt_engine_agree(zt_engine *e, int rc, const char *what);
static int zt_engine_fail(const zt_engine *e, int rc);

static int zt_engine_ensure_moments(zt_engine *e)
{
    int rc = zt_zero_ensure_moments(&e->z);
    return rc < 0 ? zt_engine_fail(e, rc) : 0;
}

static int zt_engine_fail(const zt_engine *e, int rc)
{
    if (e)
        snprintf(((zt_engine *)e)->err, sizeof e->err, "%s", zt_last_error());
    return rc;
}

int zt_config_check(const zt_config *c, int estimate)
{
    if ((unsigned)c->precision > ZT_PREC_FP16 || (unsigned)c->grad_accum_dtype > ZT_GRAD_FP16 ||
        (unsigned)c->comm_dtype > ZT_GRAD_FP16)
        return zt_fail(ZT_E_CONFIG, "config: precision %d, grad_accum_dtype %d, comm_dtype %d: "
                       "one of ZT_PREC_* and ZT_GRAD_*", c->precision, c->grad_accum_dtype,
                       c->comm_dtype);
    (void)estimate; /* (every precision and accumulation dtype trains) */
    if (!(c->loss_scale >= 0.0) || !isfinite(c->loss_scale) || !(c->min_loss_scale > 0.0) ||
        !isfinite(c->min_loss_scale) || c->initial_scale_power < 0 ||
        c->initial_scale_power > 100 || c->loss_scale_window < 1 || c->hysteresis < 1 ||
        (unsigned)c->consecutive_hysteresis > 1)
        return zt_fail(ZT_E_CONFIG, "config: fp16 loss scaling needs loss_scale >= 0 (0 = "
                       "dynamic), min_loss_scale > 0, initial_scale_power in [0, 100], "
                       "loss_scale_window >= 1, hysteresis >= 1 and consecutive_hysteresis 0 or "
                       "1");
    const struct { const char *name; double v; } hp[] = {
        {"lr", c->lr}, {"beta1", c->beta1}, {"beta2", c->beta2}, {"eps", c->eps},
        {"weight_decay", c->weight_decay}, {"grad_clip", c->grad_clip},
        {"adafactor_eps1", c->adafactor_eps1}, {"adafactor_eps2", c->adafactor_eps2},
        {"clip_threshold", c->clip_threshold}, {"decay_rate", c->decay_rate},
        {"adafactor_beta1", c->adafactor_beta1}, {"max_coeff", c->max_coeff},
        {"min_coeff", c->min_coeff}, {"collective_timeout", c->collective_timeout}};
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++)
        if (!isfinite(hp[i].v))
            return zt_fail(ZT_E_CONFIG, "config: %s is %g: hyperparameters must be finite",
                           hp[i].name, hp[i].v);
    if ((unsigned)c->bias_correction > 1 ||
        (!c->bias_correction && c->optimizer == ZT_OPT_ADAMW8BIT))
        return zt_fail(ZT_E_CONFIG, "config: bias_correction %d: 1, or 0 with AdamW or Lamb "
                       "(AdamW8bit always corrects, as bitsandbytes does)", c->bias_correction);
    if (c->skip_nonfinite < 0 || c->skip_nonfinite > 1)
        return zt_fail(ZT_E_CONFIG, "config: skip_nonfinite %d: 0 or 1", c->skip_nonfinite);
    if (c->recompute < ZT_RECOMPUTE_NONE || c->recompute > ZT_RECOMPUTE_AUTO)
        return zt_fail(ZT_E_CONFIG, "config: recompute %d: one of ZT_RECOMPUTE_NONE, _FULL, "
                       "_SELECTIVE, _EVERY_K and _AUTO", c->recompute);
    if (c->recompute == ZT_RECOMPUTE_EVERY_K && c->recompute_k < 1)
        return zt_fail(ZT_E_CONFIG, "config: recompute every-k needs recompute_k >= 1 (got %d)",
                       c->recompute_k);
    if (c->number_checkpoints < 0 ||
        (c->number_checkpoints > 0 && c->recompute != ZT_RECOMPUTE_FULL))
        return zt_fail(ZT_E_CONFIG, "config: number_checkpoints %d: it sets how many layer "
                       "inputs full recomputation keeps, so it needs recompute \"full\"",
                       c->number_checkpoints);
    if (c->offload_checkpoints &&
        (c->recompute == ZT_RECOMPUTE_NONE || c->recompute == ZT_RECOMPUTE_SELECTIVE))
        return zt_fail(ZT_E_CONFIG, "config: offload_checkpoints (cpu_checkpointing) moves the "
                       "layer inputs that full or every-k recomputation keeps: with recompute "
                       "\"%s\" there are none", c->recompute ? "selective" : "none");
    if (c->recompute == ZT_RECOMPUTE_AUTO &&
        (!c->memory_limit || c->plan_micro_batch < 1 || c->plan_seq_len < 1))
        return zt_fail(ZT_E_CONFIG, "config: recompute \"auto\" plans recomputation to fit "
                       "memory_limit: it needs memory_limit and the batch shape "
                       "(plan_micro_batch, plan_seq_len)");
    if (c->offload_optimizer != ZT_OFFLOAD_NONE &&
        (c->zero_stage < 1 || c->zero_stage > 3 || (c->offload_optimizer != ZT_OFFLOAD_CPU &&
                                                    c->offload_optimizer != ZT_OFFLOAD_NVME)))
        return zt_fail(ZT_E_CONFIG, "config: offload_optimizer %d with ZeRO stage %d: the "
                       "optimizer state is offloaded (ZT_OFFLOAD_CPU or ZT_OFFLOAD_NVME) with "
                       "stages 1 to 3", c->offload_optimizer, c->zero_stage);
    if (c->offload_param != ZT_OFFLOAD_NONE &&
        (c->zero_stage != 3 || (c->offload_param != ZT_OFFLOAD_CPU &&
                                c->offload_param != ZT_OFFLOAD_NVME)))
        return zt_fail(ZT_E_CONFIG, "config: offload_param %d with ZeRO stage %d: parameters "
                       "are offloaded (ZT_OFFLOAD_CPU or ZT_OFFLOAD_NVME) with stage 3 only",
                       c->offload_param, c->zero_stage);
    if (!estimate &&
        (c->offload_optimizer == ZT_OFFLOAD_NVME || c->offload_param == ZT_OFFLOAD_NVME) &&
        (!c->nvme_path || !*c->nvme_path || strlen(c->nvme_path) >= 3000))
        return zt_fail(ZT_E_CONFIG, "config: offload_%s nvme needs nvme_path (a folder on the "
                       "NVMe drive, shorter than 3000 bytes)",
                       c->offload_optimizer == ZT_OFFLOAD_NVME ? "optimizer" : "param");
    if ((c->offload_optimizer != ZT_OFFLOAD_NONE || c->offload_param != ZT_OFFLOAD_NONE ||
         c->memory_limit) &&
        (c->aio_block_size < 4096 || c->aio_block_size % 4096 || c->aio_block_size > (1u << 30) ||
         c->aio_queue_depth < 1 || c->aio_queue_depth > 4096 || c->offload_buffers < 0 ||
         c->aio_threads < 0 || c->aio_threads > 16 || c->direct_io < -1 || c->direct_io > 1))
        return zt_fail(ZT_E_CONFIG, "config: aio_block_size must be a multiple of 4096 up to "
                       "1 GiB, aio_queue_depth 1 to 4096, offload_buffers >= 0, aio_threads "
                       "0 to 16, direct_io -1 to 1");
    if (!!c->model_dir + !!c->model_preset + !!c->model_config > 1)
        return zt_fail(ZT_E_CONFIG, "config: give exactly one of model_dir, model_preset and "
                                    "model_config (or none: a model of your own, registered "
                                    "with zt_engine_add_unit)");
    if (!c->model_dir && !c->model_preset && !c->model_config &&
        (c->recompute != ZT_RECOMPUTE_NONE || c->offload_checkpoints))
        return zt_fail(ZT_E_CONFIG, "config: recompute and offload_checkpoints apply to the "
                       "built-in models; a model of your own recomputes its units itself "
                       "(ZT_FOR_RECOMPUTE)");
    if (!(c->lr >= 0.0f) || !(c->weight_decay >= 0.0f) ||
        (c->optimizer != ZT_OPT_ADAFACTOR &&
         (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f) ||
          !(c->eps > 0.0f))))
        return zt_fail(ZT_E_CONFIG, "config: optimizer needs lr >= 0, weight_decay >= 0 and "
                                    "(AdamW, AdamW8bit, Lamb) betas in [0, 1), eps > 0");
    if (c->optimizer < ZT_OPT_ADAMW || c->optimizer > ZT_OPT_LAMB)
        return zt_fail(ZT_E_CONFIG, "config: optimizer %d: one of ZT_OPT_ADAMW, "
                       "ZT_OPT_ADAMW8BIT, ZT_OPT_ADAFACTOR and ZT_OPT_LAMB", c->optimizer);
    if (c->optimizer == ZT_OPT_LAMB &&
        (!(c->min_coeff >= 0.0f) || !(c->max_coeff >= c->min_coeff) ||
         (unsigned)c->eps_inside_sqrt > 1))
        return zt_fail(ZT_E_CONFIG, "config: Lamb needs 0 <= min_coeff <= max_coeff (%g, %g) "
                       "and eps_inside_sqrt 0 or 1 (%d)", (double)c->min_coeff,
                       (double)c->max_coeff, c->eps_inside_sqrt);
    if (c->n_fp32_state < -1 || (c->n_fp32_state > 0 && !c->fp32_state))
        return zt_fail(ZT_E_CONFIG, "config: fp32_state: n_fp32_state %d: -1 (the embedding "
                       "tables), 0, or that many patterns in the array", c->n_fp32_state);
    if (c->optimizer == ZT_OPT_ADAFACTOR &&
        (!(c->adafactor_eps1 >= 0.0f) || !(c->adafactor_eps2 >= 0.0f) ||
         !(c->clip_threshold > 0.0f) || !(c->decay_rate < 0.0f) ||
         !(c->adafactor_beta1 < 1.0f) || (c->warmup_init && !c->relative_step)))
        return zt_fail(ZT_E_CONFIG, "config: Adafactor needs eps >= 0, clip_threshold > 0, "
                       "decay_rate < 0, beta1 < 1 (< 0: none) and relative_step with "
                       "warmup_init");
    if (c->optimizer == ZT_OPT_ADAFACTOR && c->relative_step && c->lr != 0.0f)
        return zt_fail(ZT_E_CONFIG, "config: Adafactor with relative_step 1 computes its own "
                       "step size, so it cannot be combined with a manual lr (lr %g; Hugging "
                       "Face: \"Cannot combine manual `lr` and `relative_step=True` options\"): "
                       "set lr 0 (no lr; None in Python; zt_config_init's 1e-4 is AdamW's), or "
                       "relative_step 0",
                       (double)c->lr);
    if (!(c->grad_clip >= 0.0f) || c->threads < 0 || c->vocab_size < 0)
        return zt_fail(ZT_E_CONFIG, "config: grad_clip, threads and vocab_size must be >= 0");
    return 0;
}

/* Stage 3: unit u's parameters whole in buf (collective: every rank gathers the same units
 * in the same order). Persistent units are whole already. */
/* every rank's slices of unit u into buf (es bytes an element: fp32, or the parameters'
 * half precision), which holds this rank's in place; all the all-gathers run even after one
 * failed (the ranks stay in step); the first error */
static int allgather_unit(zt_engine *e, int u, void *buf, size_t es)
{
    zt_seg s;
    int rc = 0;
    char *b = buf;
    size_t N = (size_t)e->comm.size;
    for (int k = 0; zt_geometry_seg(&e->geo, u, e->comm.rank, k, &s); k++) {
        int grc = es == sizeof(float)
                      ? zt_comm_allgather(&e->comm, (float *)(b + s.off * es),
                                          (float *)(b + s.soff * N * es), s.len * N)
                      : zt_comm_allgather16(&e->comm, (uint16_t *)(b + s.off * es),
                                            (uint16_t *)(b + s.soff * N * es), s.len * N);
        rc = rc < 0 ? rc : grc;
    }
    return rc;
}

/* unit u's parameters whole (their dtype) */
static int gather_into(zt_engine *e, int u, void *buf, const void **whole)
{
    if (e->z.ga.persist[u]) {
        *whole = e->z.P[u];
        return 0;
    }
    ZT_TRY(zt_zero_shard_to_whole(&e->z, u, buf));
    *whole = buf;
    return allgather_unit(e, u, buf, e->z.pes);
}

/* Random initialisation, one unit at a time (stage 3 keeps only this rank's shard). */
typedef struct init_arg {
    zt_engine *e;
    float **one;
    uint64_t seed;
} init_arg;

static int init_unit(int u, float *buf, void *p)
{
    init_arg *a = p;
    const zt_unit_def *ud = &a->e->layout.units[u];
    a->one[u] = buf;
    for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++) {
        const zt_param_def *d = &a->e->layout.params[i];
        if (a->e->un.init_vals && a->e->un.init_vals[i]) /* ZT_INIT_VALUES */
            memcpy(buf + d->offset, a->e->un.init_vals[i], d->numel * sizeof(float));
        else
            zt_param_init(&a->e->layout, i, a->one, a->seed);
    }
    a->one[u] = NULL;
    return 0;
}

static int init_params(zt_engine *e, uint64_t seed)
{
    init_arg a = {e, calloc((size_t)e->layout.n_units, sizeof(float *)), seed};
    int rc;
    if (!a.one)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    rc = zt_zero_fill_params(&e->z, init_unit, &a);
    free(a.one);
    return rc;
}

/* between kernels: let collectives advance, and keep the offload queues full (a store's
 * transfers beyond its queue depth start only when it is called; errors stay with their
 * transfers and surface at the wait) */
static void poll_engine(void *arg)
{
    zt_engine *e = arg;
    zt_comm_poll(&e->comm);
    zt_zero_poll(&e->z);
}

int zt_engine_recompute_info(const zt_engine *e, int u, zt_recompute_info *o)
{
    if (!e || !o)
        return zt_fail(ZT_E_INVAL, "zt_engine_recompute_info: NULL argument");
    if (u < 0 || u >= e->rc.n)
        return zt_engine_fail(e, zt_fail(ZT_E_RANGE, "zt_engine_recompute_info: step %d is "
                                         "outside [0, %d)", u, e->rc.n));
    memset(o, 0, sizeof *o);
    o->name = e->layout.units[e->rc.unit[u]].name;
    o->mode = e->rc.k && e->rc.mode[u] != ZT_KEEP_ALL ? "segment" : zt_keep_name(e->rc.mode[u]);
    o->segment_k = e->rc.mode[u] != ZT_KEEP_ALL ? e->rc.k : 0;
    o->calls = e->rc.calls[u];
    o->bytes = e->rc.bytes[u];
    o->seconds = e->rc.sec[u];
    return 0;
}

size_t zt_engine_activation_prediction(const zt_engine *e) { return e ? e->rc.act_predicted : 0; }

const char *zt_engine_recompute_plan(const zt_engine *e) { return e ? e->rc.plan : ""; }

/* The config's name patterns (borrowed by the call), copied: a model of your own commits
 * later. */
static int copy_patterns(zt_engine *e, const zt_config *cfg)
{
    int nd = cfg->n_no_decay > 0 ? cfg->n_no_decay : 0;
    int nf = cfg->n_fp32_state > 0 ? cfg->n_fp32_state : 0;
    if (nd + nf == 0)
        return 0;
    if (!(e->patterns = calloc((size_t)(nd + nf), sizeof *e->patterns)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    e->n_patterns = nd + nf;
    for (int k = 0; k < nd + nf; k++) {
        const char *src = k < nd ? cfg->no_decay[k] : cfg->fp32_state[k - nd];
        if (src && !(e->patterns[k] = strdup(src)))
            return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    e->cfg.no_decay = nd ? (const char *const *)e->patterns : NULL;
    e->cfg.fp32_state = nf ? (const char *const *)e->patterns + nd : NULL;
    return 0;
}

/* A tensor of the built-in model's layout within the unit API's limit (2^40 elements), or
 * an error naming the model's config and the shape its sizes give. */
static int check_shape(const zt_engine *e, const zt_param_def *d)
{
    char dims[128] = "";
    double numel = 1.0;
    for (int k = 0; k < d->ndim; k++) {
        numel *= (double)d->shape[k];
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", k ? ", " : "",
                 (long long)d->shape[k]);
    }
    if (numel <= (double)((size_t)1 << 40))
        return 0;
    return zt_fail(ZT_E_SHAPE, "%s: the sizes make tensor \"%s\" [%s], %.3g elements: more "
                   "than the 2^40 (1.1e+12) a tensor may have", e->source, d->name, dims,
                   numel);
}

/* A built-in model registers its layout through the unit API, as any trainer does. */
static int register_layout(zt_engine *e, const zt_layout *l)
{
    for (int u = 0; u < l->n_units; u++) {
        const zt_unit_def *ud = &l->units[u];
        int id;
        ZT_TRY(zt_engine_add_unit(e, ud->name, ud->n_params, &id));
        for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++) {
            const zt_param_def *d = &l->params[i];
            ZT_TRY(check_shape(e, d));
            zt_param_spec p = {d->name, d->ndim, d->shape, d->init,
                               d->std > 0.0f ? d->std : l->init_std, NULL, !d->decay,
                               d->alias[0] ? d->alias : NULL};
            int k;
            ZT_TRY(zt_engine_add_param(e, id, &p, &k));
            e->layout.params[k].embedding = d->embedding;
            e->layout.params[k].head = d->head;
            e->layout.params[k].pad_row = d->pad_row;
        }
    }
    for (int k = 0; k < l->n_aliases; k++)
        ZT_TRY(zt_engine_add_param_alias(e, l->aliases[k].param, l->aliases[k].name));
    e->layout.init_std = l->init_std;
    snprintf(e->layout.arch, sizeof e->layout.arch, "%s", l->arch);
    snprintf(e->layout.head_desc, sizeof e->layout.head_desc, "%s", l->head_desc);
    return 0;
}

/* A built-in model's orders of acquires: each step's unit with the unit it is tied to (held
 * together), forward in order, backward as its steps. A unit several steps use is acquired
 * once per use (stage 3 keeps it gathered over uses in a row). */
static int declare_orders(zt_engine *e)
{
    int nu = e->rc.n, n = 0, rc = 0;
    int cap = 2 * (nu > e->rc.n_bsteps ? nu : e->rc.n_bsteps);
    int *units = malloc(sizeof *units * (size_t)cap), *purp = malloc(sizeof *purp * (size_t)cap);
    unsigned char *hold = malloc((size_t)cap);
    if (!units || !purp || !hold)
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    for (int pass = 0; rc == 0 && pass < (e->cfg.inference ? 1 : 2); pass++) {
        n = 0;
        for (int k = 0; k < (pass ? e->rc.n_bsteps : nu); k++) {
            int u = e->rc.unit[pass ? e->rc.bsteps[k].unit : k];
            int t = e->ops->tied_unit(e->model, u);
            int p = !pass ? ZT_FOR_FORWARD
                    : e->rc.bsteps[k].op == ZT_STEP_RECOMPUTE ? ZT_FOR_RECOMPUTE : ZT_FOR_BACKWARD;
            units[n] = u, purp[n] = p, hold[n++] = t >= 0;
            if (t >= 0)
                units[n] = t, purp[n] = p, hold[n++] = 0;
        }
        rc = zt_engine_set_order(e, pass ? ZT_FOR_BACKWARD : ZT_FOR_FORWARD, units, purp, hold,
                                 n);
    }
    free(units);
    free(purp);
    free(hold);
    return rc;
}

/* Registration is over: the stage's buffers, the optimizer state, the parameters
 * (model_dir: loaded from that folder; otherwise initialised from the seed). */
/* Every rank's configuration and model shape against rank 0's, before the first collective
 * that depends on them (different shapes would mismatch gathers). */
static int agree_shapes(zt_engine *e, int rc)
{
    int nu = e->layout.n_units;
    size_t n = 8192 + (size_t)nu * 200, at;
    char *t;
    if (e->comm.size == 1)
        return rc;
    if (rc < 0 || !(t = malloc(n)))
        return zt_comm_agree(&e->comm, rc < 0 ? rc : zt_fail(ZT_E_NOMEM, "out of memory"), NULL);
    rc = zt_config_describe(&e->cfg, t, n);
    at = rc > 0 ? (size_t)rc : 0;
    if (rc >= 0)
        at += (size_t)snprintf(t + at, n - at, "model=%s\nunits=%d\nparameters=%d\n",
                               e->layout.arch, nu, e->layout.n_params);
    for (int u = 0; rc >= 0 && u < nu; u++)
        at += (size_t)snprintf(t + at, n - at, "unit %d=%.120s, %zu floats\n", u,
                               e->layout.units[u].name, e->layout.units[u].numel);
    rc = zt_comm_agree(&e->comm, rc < 0 ? rc : 0, rc < 0 ? NULL : t);
    free(t);
    return rc;
}

/* Stages 2-3: the unit whose gradient stays whole through the backward pass, because
 * another unit's backward adds into it (the built-in models' tied_unit: the embeddings
 * under a tied head; none when nothing is tied, e.g. T5 with tie_word_embeddings false).
 * A trainer's own model ties to unit 0, as zerotrain.h documents. */
static int whole_grad_unit(zt_engine *e)
{
    e->whole_grad = e->un.custom ? 0 : -1;
    for (int u = 0; !e->un.custom && u < e->layout.n_units; u++) {
        int t = e->ops->tied_unit(e->model, u);
        if (t >= 0 && e->whole_grad >= 0 && t != e->whole_grad)
            return zt_fail(ZT_E_UNSUPPORTED, "the model ties units %d and %d to two different "
                           "units: one unit may be tied to", e->whole_grad, t);
        if (t >= 0)
            e->whole_grad = t;
    }
    return 0;
}

static int commit(zt_engine *e, const char *model_dir)
{
    const zt_config *cfg = &e->cfg;
    int nu = e->layout.n_units;
    if (e->un.committed)
        return e->un.committed > 0 ? 0 : zt_fail(ZT_E_INVAL, "the engine failed to commit "
                                              "earlier: destroy it");
    e->un.committed = -1; /* until it succeeds */
    /* Between collectives every rank's own failures (checks, memory, files) are agreed on,
     * so that no rank is left waiting in a collective the failed one never reaches. */
    int rc = 0;
    if (nu == 0)
        rc = zt_fail(ZT_E_INVAL, "zt_engine_commit: no units registered (zt_engine_add_unit)");
    else if (e->layout.units[nu - 1].n_params != e->un.unit_nparams[nu - 1])
        rc = zt_fail(ZT_E_INVAL, "zt_engine_commit: unit %d \"%s\" was declared with %d "
                     "parameters and has %d", nu - 1, e->layout.units[nu - 1].name,
                     e->un.unit_nparams[nu - 1], e->layout.units[nu - 1].n_params);
    ZT_TRY(agree_shapes(e, rc));
    if (!(e->ck.alias_seen = calloc((size_t)e->layout.n_params, 1)) ||
        !(e->un.held = calloc((size_t)nu, sizeof *e->un.held)) ||
        !(e->un.gstate = calloc((size_t)nu, 1)) ||
        !(e->un.drvP = calloc((size_t)nu, sizeof *e->un.drvP)) ||
        !(e->un.drvG = calloc((size_t)nu, sizeof *e->un.drvG)))
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    if (rc == 0 && !e->un.custom)
        rc = zt_model_create(&e->mc, &e->layout, cfg->dropout, cfg->seed, zt_fp_half(cfg),
                             &e->mem, &e->ops, &e->model);
    if (rc == 0)
        rc = whole_grad_unit(e);
    if (rc == 0)
        rc = zt_rplan_setup(&e->rc, &e->cfg, e->layout.n_units, e->ops, e->model);
    if (rc == 0 && e->ops)
        zt_act_init(&e->ao, &e->cfg, e->nvme_path, e->comm.rank, e->rc.n, e->ops,
                    e->model, &e->rc, &e->mem);
    ZT_TRY(zt_engine_agree(e, rc, "setting up the model"));
    /* the products may open oneDNN (hgemm.c: fp32 on AVX-512, bf16): opened now, it is in
     * the process the planner measures */
    if (e->ops)
        (void)zt_sgemm_default();
    if (zt_fp_half(cfg) == ZT_HALF_BF16)
        (void)zt_hgemm_default(ZT_HALF_BF16);
    zt_plan_init(&e->pn, &e->cfg, &e->layout, &e->comm, &e->rc, e->ops, e->model, e->nvme_path,
                 e->whole_grad);
    ZT_TRY(zt_plan_memory(&e->pn, e->plan, sizeof e->plan));
    rc = zt_plan_check_fit(&e->pn, e->source[0] ? e->source : "the model registered with "
                                                        "zt_engine_add_unit");
    /* reduce_bucket_size / allgather_bucket_size cap one collective: a larger unit is cut
     * into pieces of a multiple of N x 1024 floats, the same for every stage */
    if (rc == 0)
        rc = zt_geometry_init(&e->geo, &e->layout, (size_t)e->comm.size, e->cfg.bucket_size);
    if (rc == 0)
        rc = zt_zero_setup(&e->z, &e->cfg, &e->comm, &e->layout, &e->geo, &e->os, &e->un,
                           e->nvme_path, e->whole_grad, &e->mem);
    if (rc == 0)
        rc = zt_ost_setup(&e->os, &e->cfg, &e->layout, &e->geo, &e->comm, &e->mem);
    if (e->plan[0])
        zt_log(ZT_LOG_INFO, "%s", e->plan);
    if (e->rc.plan[0])
        zt_log(ZT_LOG_INFO, "%s", e->rc.plan);
    /* offloaded moments: the swap file and its space now, not at the first step */
    if (rc == 0 && cfg->offload_optimizer != ZT_OFFLOAD_NONE)
        rc = zt_engine_ensure_moments(e);
    ZT_TRY(zt_engine_agree(e, rc, "allocating the model state"));
    if (e->ops)
        e->ops->set_poll(e->model, poll_engine, e);
    ZT_TRY(zt_engine_agree(e, model_dir ? zt_engine_load_params(e, model_dir)
                                        : init_params(e, cfg->seed), "loading the weights"));
    for (int i = 0; i < e->layout.n_params; i++) { /* the weight-decay rule, decided once */
        zt_param_def *d = &e->layout.params[i];
        if (cfg->decay_all)
            d->decay = 1;
        else if (cfg->n_no_decay >= 0) {
            d->decay = 1;
            for (int k = 0; k < cfg->n_no_decay; k++)
                if (cfg->no_decay[k] && strstr(d->name, cfg->no_decay[k]))
                    d->decay = 0;
        }
    }
    for (int i = 0; e->un.init_vals && i < e->layout.n_params; i++) {
        free(e->un.init_vals[i]);
        e->un.init_vals[i] = NULL;
    }
    if (e->ops)
        ZT_TRY(declare_orders(e));
    {
        zt_model_info mi;
        char desc[160];
        zt_engine_model_info(e, &mi);
        if (e->un.custom)
            snprintf(desc, sizeof desc, "registered by the trainer");
        else
            zt_model_describe(&e->mc, desc, sizeof desc);
        zt_log(ZT_LOG_INFO, "model: %s, %d units, %zu parameters", desc, mi.num_units,
               mi.num_parameters);
    }
    e->un.committed = 1;
    return 0;
}

int zt_engine_commit(zt_engine *e)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_commit: NULL engine");
    if (e->un.committed > 0)
        return 0;
    int rc = commit(e, NULL);
    return rc < 0 ? zt_engine_fail(e, rc) : 0;
}

int zt_engine_create(const zt_config *cfg, MPI_Comm comm, zt_engine **out)
{
    zt_engine *e;
    zt_layout l = {0};
    char path[4096];
    int rc;
    zt_clear_error();
    if (!cfg || !out)
        return zt_fail(ZT_E_INVAL, "zt_engine_create: cfg and out must not be NULL");
    *out = NULL;
    if (!(e = calloc(1, sizeof *e)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    /* the communicator first: a rank that fails on its own below still reaches the agreement
     * the others wait in */
    e->comm.comm = MPI_COMM_NULL;
    if ((rc = zt_comm_open(&e->comm, comm)) < 0) {
        free(e);
        return rc;
    }
    if ((rc = zt_config_check(cfg, 0)) < 0 ||
        (rc = zt_comm_watch(&e->comm, cfg->collective_timeout, cfg->check_collectives,
                            cfg->progress)) < 0) {
        zt_comm_agree(&e->comm, rc, NULL);
        snprintf(path, sizeof path, "%s", zt_last_error());
        zt_comm_close(&e->comm);
        free(e);
        return zt_fail(rc, "%s", path);
    }
    e->cfg = *cfg;
    e->save_dtype = cfg->precision;
    e->cfg.model_dir = e->cfg.model_preset = e->cfg.model_config = NULL; /* borrowed */
    if (cfg->inference) { /* forward only: no optimizer state to place, nothing recomputed */
        e->cfg.offload_optimizer = ZT_OFFLOAD_NONE;
        e->cfg.offload_gradients = -1;
        e->cfg.recompute = ZT_RECOMPUTE_NONE;
    }
    e->cfg.no_decay = e->cfg.fp32_state = e->cfg.label_names = NULL;
    if (cfg->nvme_path)
        snprintf(e->nvme_path, sizeof e->nvme_path, "%s", cfg->nvme_path);
    e->cfg.nvme_path = e->nvme_path;
    zt_units_init(&e->un, &e->layout, &e->comm, &e->z,
                  !cfg->model_dir && !cfg->model_config && !cfg->model_preset);
    zt_ckpt_init(&e->ck, &e->cfg, &e->layout, &e->mc, &e->comm, &e->geo, &e->os, &e->z,
                 &e->step, cfg->precision == ZT_PREC_FP16 ? &e->ls : NULL);
    if (cfg->precision == ZT_PREC_FP16)
        zt_lscale_init(&e->ls, cfg->loss_scale, cfg->initial_scale_power,
                       cfg->loss_scale_window, cfg->hysteresis, cfg->consecutive_hysteresis,
                       cfg->min_loss_scale);
    else
        e->ls.scale = 1.0;
    if (cfg->model_dir) {
        snprintf(path, sizeof path, "%s/config.json", cfg->model_dir);
        rc = zt_model_config_load(path, &e->mc);
    } else if (cfg->model_config) {
        snprintf(path, sizeof path, "%s", cfg->model_config);
        rc = zt_model_config_load(cfg->model_config, &e->mc);
    } else if (cfg->model_preset) {
        snprintf(path, sizeof path, "model preset %s", cfg->model_preset);
        rc = zt_model_config_preset(cfg->model_preset, cfg->vocab_size, &e->mc);
    } else {
        path[0] = '\0';
        rc = 0;
    }
    snprintf(e->source, sizeof e->source, "%s", path);
    e->mc.ej.gen_size = cfg->electra_generator_size;
    if (rc == 0 && !e->un.custom)
        rc = zt_model_head_apply(&e->mc, path, cfg->head, cfg->num_labels, cfg->problem_type,
                                 cfg->label_names);
    if (rc == 0 && !e->un.custom && cfg->inference && e->mc.ej.on && !e->mc.ej.have_gen)
        rc = zt_fail(ZT_E_CONFIG, "%s: an ElectraForPreTraining (a discriminator: replaced-token "
                     "detection) has no masked-LM head to predict with; its generator is a "
                     "joint folder's (generator_config.json beside config.json), or an "
                     "ElectraForMaskedLM", path);
    if (rc == 0 && !e->un.custom)
        rc = zt_model_layout(&e->mc, &l);
    if (rc == 0)
        rc = copy_patterns(e, cfg);
    if (rc == 0 && (cfg->zero_stage < 0 || cfg->zero_stage > 3))
        rc = zt_fail(ZT_E_CONFIG, "ZeRO stage %d: stages are 0 to 3", cfg->zero_stage);
    if ((rc = zt_comm_agree(&e->comm, rc, NULL)) < 0)
        goto fail;
    if (cfg->threads > 0) {
        openblas_set_num_threads(cfg->threads);
        omp_set_num_threads(cfg->threads);
    }
    if (e->un.custom) { /* the trainer registers the units next */
        snprintf(e->layout.arch, sizeof e->layout.arch, "ZerotrainModel");
        *out = e;
        return 0;
    }
    if ((rc = register_layout(e, &l)) < 0 || (rc = commit(e, cfg->model_dir)) < 0)
        goto fail;
    zt_layout_free(&l);
    *out = e;
    return 0;
fail:
    snprintf(path, sizeof path, "%s", zt_last_error());
    zt_layout_free(&l);
    zt_engine_destroy(e);
    zt_fail(rc, "%s", path);
    return rc;
}

void zt_engine_destroy(zt_engine *e)
{
    if (!e)
        return;
    zt_act_close(&e->ao); /* (its transfers use the model's buffers) */
    if (e->ops && e->model)
        e->ops->destroy(e->model);
    zt_zero_teardown(&e->z);
    zt_ost_teardown(&e->os);
    zt_geometry_free(&e->geo);
    zt_rplan_free(&e->rc);
    zt_comm_close(&e->comm);
    zt_units_free(&e->un);
    zt_layout_free(&e->layout);
    free(e->ck.alias_seen);
    for (int k = 0; k < e->n_patterns; k++)
        free(e->patterns[k]);
    free(e->patterns);
    free(e);
}

/* ---- the unit API (units.c keeps its state; here the errors are recorded) ---------- */

static int recorded(const zt_engine *e, int rc) { return rc < 0 ? zt_engine_fail(e, rc) : rc; }

/* (NULL for a NULL engine: the unit API names the function that got it) */
static zt_units *units_of(zt_engine *e) { return e ? &e->un : NULL; }

int zt_engine_add_unit(zt_engine *e, const char *name, int n_params, int *unit)
{
    return recorded(e, zt_units_add_unit(units_of(e), name, n_params, unit));
}

int zt_engine_add_param(zt_engine *e, int unit, const zt_param_spec *p, int *index)
{
    return recorded(e, zt_units_add_param(units_of(e), unit, p, index));
}

int zt_engine_add_param_alias(zt_engine *e, int index, const char *name)
{
    return recorded(e, zt_units_add_param_alias(units_of(e), index, name));
}

/* ZT_E_INVAL naming fn when the engine is forward only (zt_config.inference) */
static int training_only(zt_engine *e, const char *fn)
{
    if (!e->cfg.inference)
        return 0;
    return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "%s: the engine is forward only "
                                     "(zt_config.inference): it has no gradients or optimizer "
                                     "state", fn));
}

static int unit_acquire(zt_engine *e, int u, int purpose, void **params, float **grads)
{
    if (params)
        *params = NULL;
    if (grads)
        *grads = NULL;
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_unit_acquire: NULL engine");
    zt_clear_error();
    if (purpose & (ZT_FOR_BACKWARD | ZT_FOR_RECOMPUTE))
        ZT_TRY(training_only(e, "zt_engine_unit_acquire for a backward pass"));
    if (e->cfg.inference) /* (no backward pass follows any forward) */
        purpose |= ZT_FOR_EVAL;
    ZT_TRY(zt_engine_commit(e));
    return recorded(e, zt_units_acquire(&e->un, u, purpose, params, grads));
}

int zt_engine_unit_acquire(zt_engine *e, int u, int purpose, float **params, float **grads)
{
    void *p = NULL;
    int rc = unit_acquire(e, u, purpose, params ? &p : NULL, grads);
    if (params)
        *params = p;
    return rc;
}

int zt_engine_unit_release(zt_engine *e, int u)
{
    return recorded(e, zt_units_release(units_of(e), u));
}

int zt_engine_unit_grads_ready(zt_engine *e, int u)
{
    return recorded(e, zt_units_grads_ready(units_of(e), u));
}

int zt_engine_set_order(zt_engine *e, int kind, const int *units, const int *purposes,
                        const unsigned char *hold, int n)
{
    return recorded(e, zt_units_set_order(units_of(e), kind, units, purposes, hold, n));
}

int zt_engine_rank(const zt_engine *e) { return e ? e->comm.rank : ZT_E_INVAL; }

int zt_engine_world_size(const zt_engine *e) { return e ? e->comm.size : ZT_E_INVAL; }

int zt_engine_unit_count(const zt_engine *e) { return e ? e->layout.n_units : ZT_E_INVAL; }

int zt_engine_step_count(const zt_engine *e)
{
    return !e ? ZT_E_INVAL : e->ops && e->un.committed > 0 ? e->rc.n : 0;
}

int zt_engine_step_unit(const zt_engine *e, int step)
{
    if (step < 0 || step >= zt_engine_step_count(e))
        return zt_fail(ZT_E_RANGE, "zt_engine_step_unit: step %d is outside [0, %d)", step,
                       e ? zt_engine_step_count(e) : 0);
    return e->rc.unit[step];
}

const char *zt_engine_unit_name(const zt_engine *e, int unit)
{
    return e && unit >= 0 && unit < e->layout.n_units ? e->layout.units[unit].name : NULL;
}

int zt_engine_pass_abort(zt_engine *e)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_pass_abort: NULL engine");
    zt_clear_error();
    zt_units_abort(&e->un, 0);
    return 0;
}

/* ---- checkpoints (checkpoint.c writes and reads them; here the engine settles first) ---- */

/* Every rank calls this: rank 0 makes the hidden folder, every rank writes its own
 * optimizer shards into it, rank 0 adds the model (streamed unit by unit in stage 3), the
 * state and the manifest and renames it into place. The folder must be on storage every
 * rank sees. */
int zt_checkpoint_save(zt_engine *e, const char *root, const zt_train_state *st,
                       const char *train_config, int keep)
{
    char tmp[4096], tmpn[48], final[4096];
    int rc = 0, r;
    if (!e || !root || !st)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_save: NULL argument");
    ZT_TRY(training_only(e, "zt_checkpoint_save"));
    if (st->step < 0) /* (step-N is the only name a checkpoint has, and is found by) */
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_checkpoint_save: step %" PRId64 " is "
                                         "negative (a checkpoint is named step-N, N >= 0)",
                                         st->step));
    ZT_TRY(zt_engine_commit(e));
    if ((rc = zt_units_pass_close(&e->un, "zt_checkpoint_save")) < 0)
        return zt_engine_fail(e, rc);
    ZT_TRY(zt_engine_ensure_moments(e));
    ZT_TRY(zt_zero_flush(&e->z)); /* the checkpoint holds the step's result */
    r = e->comm.rank;
    snprintf(tmpn, sizeof tmpn, ".tmp-step-%" PRId64, st->step);
    snprintf(tmp, sizeof tmp, "%s/%s", root, tmpn);
    snprintf(final, sizeof final, "%s/step-%" PRId64, root, st->step);
    if ((rc = zt_engine_check_finite(e, "saving checkpoint", final)) < 0) /* nothing written */
        return zt_engine_fail(e, rc);
    if (r == 0)
        rc = zt_ckpt_make_tmp(root, tmpn, tmp);
    if ((rc = zt_engine_agree(e, rc, "creating the checkpoint folder")) == 0)
        rc = zt_engine_agree(e, zt_ckpt_write_rank_file(&e->ck, tmp), "writing optimizer shards");
    if (rc == 0) { /* collective; rank 0 writes; stage 3 gathers one unit at a time */
        if (r == 0)
            zt_ckpt_fault_point("before", "model.safetensors");
        rc = zt_engine_save_weights(e, tmp, (size_t)5000000000u);
        if (r == 0)
            zt_ckpt_fault_point("after", "model.safetensors");
    }
    if (rc == 0)
        rc = zt_engine_agree(e, r == 0 ? zt_ckpt_commit_rank0(&e->ck, root, st, train_config,
                                                              keep)
                                       : 0,
                             "committing the checkpoint");
    if (rc < 0) {
        zt_fail_wrap(rc, "saving checkpoint %s", final);
        if (r == 0)
            zt_ckpt_remove_tmp(root, tmpn);
        return zt_engine_fail(e, rc);
    }
    return 0;
}

int zt_checkpoint_load(zt_engine *e, const char *dir, zt_train_state *st)
{
    char path[4096], diff[4300], info[ZT_TRAINER_INFO_MAX];
    zt_model_cfg mc;
    char run_id[33];
    int rc;
    if (!e || !dir || !st)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_load: NULL argument");
    if ((rc = zt_engine_commit(e)) < 0)
        return rc;
    if ((rc = zt_units_pass_close(&e->un, "zt_checkpoint_load")) < 0 ||
        (rc = zt_zero_flush(&e->z)) < 0)
        return zt_engine_fail(e, rc);
    if ((rc = zt_ckpt_verify_read(dir, run_id, info)) < 0)
        return zt_engine_fail(e, rc);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (e->un.custom) {
        if ((rc = zt_units_config_check(&e->un, path)) < 0)
            return zt_engine_fail(e, rc);
    } else if ((rc = zt_model_config_load(path, &mc)) < 0) {
        return zt_engine_fail(e, rc);
    } else if (zt_model_shape_diff(&mc, path, &e->mc, "this engine", diff, sizeof diff))
        return zt_engine_fail(e, zt_fail(ZT_E_SHAPE, "%s: the checkpoint's model shape differs "
                                         "from this engine's: %s", path, diff));
    int world0 = 1;
    size_t bucket0 = 0;
    /* (the state is read before anything changes) */
    if ((rc = zt_ckpt_read_state(&e->ck, dir, st, &world0, &bucket0)) < 0 ||
        (rc = zt_engine_load_params(e, dir)) < 0 ||
        (rc = zt_engine_ensure_moments(e)) < 0 ||
        (rc = zt_ckpt_read_optimizer(&e->ck, dir, world0, bucket0)) < 0)
        return zt_engine_fail(e, rc);
    e->step = st->step;
    /* the run goes on in the checkpoint's lineage (an older version's has none: the next
     * save starts one) */
    snprintf(e->ck.run_id, sizeof e->ck.run_id, "%s", run_id);
    memcpy(e->ck.loaded_info, info, sizeof info);
    return 0;
}

int zt_checkpoint_remove_other_runs(zt_engine *e, const char *root)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_remove_other_runs: NULL argument");
    return recorded(e, zt_ckpt_remove_other_runs(&e->ck, root));
}

int zt_checkpoint_set_trainer_info(zt_engine *e, const char *json)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_set_trainer_info: NULL engine");
    return recorded(e, zt_ckpt_set_trainer_info(&e->ck, json));
}

const char *zt_checkpoint_trainer_info(const zt_engine *e)
{
    return e ? zt_ckpt_trainer_info(&e->ck) : NULL;
}

void zt_engine_footprints(const zt_engine *e, zt_footprint *now, zt_footprint *plan)
{
    zt_zero_footprint(&e->z, now);
    zt_plan_footprint(&e->pn, plan);
}

const char *zt_engine_last_error(const zt_engine *e) { return e ? e->err : zt_last_error(); }

int zt_engine_model_info(const zt_engine *e, zt_model_info *o)
{
    if (!e || !o)
        return zt_fail(ZT_E_INVAL, "zt_engine_model_info: NULL argument");
    memset(o, 0, sizeof *o);
    if (e->un.custom) {
        snprintf(o->model_type, sizeof o->model_type, "zerotrain");
        o->pad_token_id = o->bos_token_id = o->eos_token_id = -1;
    } else
        zt_model_info_fill(&e->mc, o);
    o->num_tensors = e->layout.n_params;
    o->num_units = e->layout.n_units;
    for (int i = 0; i < e->layout.n_params; i++)
        o->num_parameters += e->layout.params[i].numel;
    snprintf(o->architecture, sizeof o->architecture, "%s", e->layout.arch);
    return 0;
}

const char *zt_engine_label_name(const zt_engine *e, int id)
{
    static _Thread_local char buf[32];
    if (!e || e->un.custom || e->mc.type != ZT_MODEL_BERT)
        return NULL;
    return bert_label_name(&e->mc.bert, id, buf, sizeof buf);
}

int zt_engine_param_count(const zt_engine *e) { return e ? e->layout.n_params : ZT_E_INVAL; }

int zt_engine_param_get(const zt_engine *e, int i, zt_param_info *o)
{
    const zt_param_def *d;
    if (!e || !o || i < 0 || i >= e->layout.n_params)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_param_get: index %d out of range", i));
    d = &e->layout.params[i];
    memset(o, 0, sizeof *o);
    o->name = d->name;
    o->alias = e->ck.alias_seen && e->ck.alias_seen[i] && d->alias[0] ? d->alias : NULL;
    o->ndim = d->ndim;
    memcpy(o->shape, d->shape, sizeof o->shape);
    o->numel = d->numel;
    o->unit = d->unit;
    o->decay = d->decay;
    o->offset = d->offset;
    return 0;
}

/* *out = where parameter `name` lives in the unit buffers `bufs` (P or G, es bytes an
 * element); n must be its element count. Failures are recorded in the engine. */
static int locate(const zt_engine *e, void *const *bufs, size_t es, const char *name, size_t n,
                  void **out)
{
    int i;
    if (!e || !name)
        return zt_fail(ZT_E_INVAL, "NULL engine or name");
    if (e->un.committed <= 0)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "\"%s\": the engine has no buffers yet "
                                         "(zt_engine_commit)", name));
    if ((i = zt_layout_find(&e->layout, name)) < 0)
        return zt_engine_fail(e, zt_fail(ZT_E_NOTFOUND, "no parameter named \"%s\"", name));
    const zt_param_def *d = &e->layout.params[i];
    if (!bufs[d->unit])
        return zt_engine_fail(e, zt_fail(ZT_E_UNSUPPORTED, "\"%s\": ZeRO stage %d does not keep "
                                                           "this unit whole", name,
                                         e->cfg.zero_stage));
    if (n != d->numel)
        return zt_engine_fail(e, zt_fail(ZT_E_SHAPE, "parameter \"%s\" has %zu elements, buffer has %zu",
                               name, d->numel, n));
    *out = (char *)bufs[d->unit] + d->offset * es;
    return 0;
}

int zt_engine_read_param(const zt_engine *e, const char *name, float *dst, size_t n)
{
    void *p = NULL;
    ZT_TRY(locate(e, e ? e->z.P : NULL, e ? e->z.pes : 4, name, n, &p));
    zt_zero_pwiden(&e->z, dst, p, n);
    return 0;
}

int zt_engine_read_grad(const zt_engine *e, const char *name, float *dst, size_t n)
{
    int i;
    if (!e || !name)
        return zt_fail(ZT_E_INVAL, "zt_engine_read_grad: NULL engine or name");
    if (e->cfg.inference)
        return zt_fail(ZT_E_INVAL, "zt_engine_read_grad: the engine is forward only "
                       "(zt_config.inference): it has no gradients");
    if (e->un.committed <= 0)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "\"%s\": the engine has no buffers yet "
                                         "(zt_engine_commit)", name));
    if ((i = zt_layout_find(&e->layout, name)) < 0)
        return zt_engine_fail(e, zt_fail(ZT_E_NOTFOUND, "no parameter named \"%s\"", name));
    const zt_param_def *d = &e->layout.params[i];
    if (n != d->numel)
        return zt_engine_fail(e, zt_fail(ZT_E_SHAPE, "parameter \"%s\" has %zu elements, "
                                         "buffer has %zu", name, d->numel, n));
    int rc = zt_zero_grad_read(&e->z, d->unit, d->offset, dst, n);
    return rc < 0 ? zt_engine_fail(e, zt_fail_wrap(rc, "\"%s\"", name)) : 0;
}

int zt_engine_write_param(zt_engine *e, const char *name, const float *src, size_t n)
{
    void *p = NULL;
    ZT_TRY(locate(e, e ? e->z.P : NULL, e ? e->z.pes : 4, name, n, &p));
    const zt_param_def *d = &e->layout.params[zt_layout_find(&e->layout, name)];
    int rc = zt_zero_master_write(&e->z, d->unit, d->offset, src, n);
    if (rc < 0)
        return zt_engine_fail(e, rc);
    zt_zero_pnarrow(&e->z, p, src, n); /* (the compute copy; the master holds src) */
    return 0;
}

int zt_engine_param_dtype(const zt_engine *e)
{
    return !e ? ZT_E_INVAL : e->z.hdt == ZT_HALF_BF16 ? ZT_PREC_BF16
                           : e->z.hdt == ZT_HALF_F16 ? ZT_PREC_FP16 : ZT_PREC_FP32;
}

int zt_engine_zero_grad(zt_engine *e)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_zero_grad: NULL engine");
    int rc;
    ZT_TRY(training_only(e, "zt_engine_zero_grad"));
    if ((rc = zt_engine_commit(e)) < 0 ||
        (rc = zt_units_pass_close(&e->un, "zt_engine_zero_grad")) < 0)
        return zt_engine_fail(e, rc);
    return zt_zero_grads_clear(&e->z);
}

/* A built-in model's step s's unit (and the unit it is tied to) for `purpose`, through the
 * unit API; the pointers go into the model's views drvP / drvG. */
static int acquire_pair(zt_engine *e, int s, int purpose)
{
    int u = e->rc.unit[s], t = e->ops->tied_unit(e->model, u);
    for (int i = 0; i < (t >= 0 ? 2 : 1); i++) {
        int w = i ? t : u;
        ZT_TRY(unit_acquire(e, w, purpose, &e->un.drvP[w],
                            purpose == ZT_FOR_BACKWARD ? &e->un.drvG[w] : NULL));
    }
    return 0;
}

static int release_pair(zt_engine *e, int s)
{
    int u = e->rc.unit[s], t = e->ops->tied_unit(e->model, u);
    ZT_TRY(zt_engine_unit_release(e, u));
    return t >= 0 ? zt_engine_unit_release(e, t) : 0;
}

/* Forward over every step (stage 3 gathers ahead); eval: no backward pass follows. */
static int run_forward(zt_engine *e, int eval)
{
    for (int u = 0; u < e->rc.n; u++) {
        ZT_TRY(acquire_pair(e, u, ZT_FOR_FORWARD | (eval ? ZT_FOR_EVAL : 0)));
        ZT_TRY(zt_act_before(&e->ao, 0, u));
        e->ops->forward_unit(e->model, u, e->un.drvP);
        ZT_TRY(zt_act_after(&e->ao, 0, u, -1));
        ZT_TRY(release_pair(e, u));
    }
    return 0;
}

/* what unit u did not keep, again (timed for the profile) */
static void recompute(zt_engine *e, int u)
{
    double t0 = e->cfg.recompute_profile ? zt_prof_now() : 0.0;
    e->ops->recompute_unit(e->model, u, e->un.drvP);
    if (e->cfg.recompute_profile) {
        e->rc.sec[u] += zt_prof_now() - t0;
        e->rc.calls[u]++;
        e->rc.bytes[u] += e->ops->recompute_bytes(e->model, u);
    }
}

/* The model's backward steps: a step's recomputation, then its backward; each unit's
 * gradients are made ready as soon as its last backward use is done (stages 2-3 reduce
 * them while the next steps run). */
static int run_backward(zt_engine *e)
{
    for (int k = 0; k < e->rc.n_bsteps; k++) {
        int u = e->rc.bsteps[k].unit, op = e->rc.bsteps[k].op;
        ZT_TRY(acquire_pair(e, u, op == ZT_STEP_RECOMPUTE ? ZT_FOR_RECOMPUTE : ZT_FOR_BACKWARD));
        ZT_TRY(zt_act_before(&e->ao, op, u));
        if (op == ZT_STEP_RECOMPUTE) {
            recompute(e, u);
        } else {
            e->ops->backward_unit(e->model, u, e->un.drvP, e->un.drvG);
            if (zt_rplan_last_use(&e->rc, k))
                ZT_TRY(zt_engine_unit_grads_ready(e, e->rc.unit[u]));
        }
        ZT_TRY(zt_act_after(&e->ao, op, u, k));
        ZT_TRY(release_pair(e, u));
    }
    return 0;
}

int zt_engine_forward_backward(zt_engine *e, const zt_batch *b, int keep_logits,
                               zt_fb_result *out)
{
    int64_t n = 0;
    int rc;
    double sum;
    if (!e || !b)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_forward_backward: NULL argument"));
    zt_clear_error();
    ZT_TRY(training_only(e, "zt_engine_forward_backward"));
    if (!e->ops)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_forward_backward: the engine "
                                         "has no built-in model: run your units' passes with "
                                         "zt_engine_unit_acquire"));
    e->have_logits = 0;
    if ((rc = e->ops->prepare(e->model, b, keep_logits, &n)) < 0 ||
        (rc = zt_act_begin(&e->ao, 1)) < 0 || (rc = run_forward(e, 0)) < 0)
        return zt_engine_fail(e, zt_units_abort(&e->un, rc));
    { /* the gradient of the mean, times fp16's loss scale */
        int64_t denom = b->label_count > 0 ? b->label_count : n;
        sum = e->ops->loss(e->model, denom > 0 ? (float)(e->ls.scale / (double)denom) : 0.0f);
    }
    if ((rc = run_backward(e)) < 0)
        return zt_engine_fail(e, zt_units_abort(&e->un, rc));
    e->have_logits = keep_logits;
    e->loss_bad |= !isfinite(sum);
    if (out) {
        out->loss_sum = sum;
        out->n_labels = n;
        out->loss = n > 0 ? (float)(sum / (double)n) : 0.0f;
        out->flops = e->ops->flops(e->model);
    }
    return 0;
}

int zt_engine_evaluate(zt_engine *e, const zt_batch *b, zt_fb_result *out)
{
    int64_t n = 0;
    int rc;
    double sum;
    if (!e || !b)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_evaluate: NULL argument"));
    if (!e->ops)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_evaluate: the engine has no "
                                         "built-in model"));
    e->have_logits = 0;
    if ((rc = e->ops->prepare(e->model, b, 0, &n)) < 0 || (rc = zt_act_begin(&e->ao, 0)) < 0)
        return zt_engine_fail(e, rc);
    e->ops->set_train(e->model, 0);
    rc = run_forward(e, 1);
    sum = rc < 0 ? 0.0 : e->ops->loss(e->model, 0.0f); /* (evaluating: the logits stay) */
    e->ops->set_train(e->model, 1);
    if (rc < 0)
        return zt_engine_fail(e, zt_units_abort(&e->un, rc));
    {
        int64_t shape[3]; /* a head whose logits are always kept (a classifier's) */
        e->have_logits = e->ops->logits(e->model, shape) != NULL;
    }
    if (out) {
        out->loss_sum = sum;
        out->n_labels = n;
        out->loss = n > 0 ? (float)(sum / (double)n) : 0.0f;
        out->flops = e->ops->flops(e->model) / 3.0; /* the forward alone */
    }
    return 0;
}

int zt_engine_gen_begin(zt_engine *e, const zt_batch *b, int per, int steps, int *eos,
                        int *pad, int *start)
{
    if (!e->ops || !e->ops->gen_begin || e->mc.type != ZT_MODEL_T5)
        return zt_fail(ZT_E_UNSUPPORTED, "zt_generate: the model is a %s: generation needs an "
                       "encoder-decoder (T5ForConditionalGeneration)", e->layout.arch);
    *eos = e->mc.t5.eos;
    *pad = e->mc.t5.pad;
    *start = e->mc.t5.dec_start;
    e->have_logits = 0;
    return e->ops->gen_begin(e->model, b, per, steps);
}

int zt_engine_gen_pass(zt_engine *e, const int64_t *tokens, const float **logits, int *rows,
                       int *V)
{
    int rc;
    if ((tokens && (rc = e->ops->gen_next(e->model, tokens)) < 0) ||
        (rc = zt_act_begin(&e->ao, 0)) < 0)
        return rc;
    e->ops->set_train(e->model, 0);
    rc = run_forward(e, 1);
    e->ops->set_train(e->model, 1);
    if (rc < 0)
        return zt_units_abort(&e->un, rc);
    *logits = e->ops->gen_logits(e->model, rows, V);
    return 0;
}

void zt_engine_gen_reorder(zt_engine *e, const int *src) { e->ops->gen_reorder(e->model, src); }

int zt_engine_record_error(zt_engine *e, int rc) { return zt_engine_fail(e, rc); }

void zt_engine_gen_end(zt_engine *e)
{
    if (e && e->ops && e->ops->gen_end)
        e->ops->gen_end(e->model);
}

int zt_engine_logits(const zt_engine *e, const float **logits, int64_t shape[3])
{
    if (!e || !logits || !shape)
        return zt_fail(ZT_E_INVAL, "zt_engine_logits: NULL argument");
    if (!e->have_logits || !e->ops || !(*logits = e->ops->logits(e->model, shape)))
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "no logits: call zt_engine_forward_backward with "
                                           "keep_logits first"));
    return 0;
}

int zt_engine_electra_outputs(const zt_engine *e, zt_electra_outputs *out)
{
    if (!e || !out)
        return zt_fail(ZT_E_INVAL, "zt_engine_electra_outputs: NULL argument");
    if (!e->ops || e->un.custom || !e->mc.ej.on)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_electra_outputs: the model is "
                                         "not ELECTRA's joint pretraining"));
    electra_joint_outputs(e->model, out);
    if (!e->have_logits)
        out->generator_logits = NULL;
    return 0;
}

/* The step (one reduction for every stage, docs/architecture.md):
 *   every unit's summed gradient is reduce-scattered into this rank's shard (Gs);
 *   the global norm is each rank's sum of squares over its shards, added in rank order;
 *   stage 0: shards all-gathered back, the optimizer on whole units with whole state;
 *   stages 1-3: the optimizer on this rank's shard only (sharded state), parameters
 *   all-gathered (stage 3: gathered when next used).
 * Each update gives the same bits on a shard as on the whole (zero.c), so every stage gives
 * bit-identical parameters. One rank: Gs = G. */
int zt_engine_step(zt_engine *e, float lr, zt_step_info *out)
{
    double sumsq, norm;
    float coef = 1.0f;
    zt_ost_hparams hp = {0};
    int rc;
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_step: NULL engine");
    ZT_TRY(training_only(e, "zt_engine_step"));
    if (!(lr >= 0.0f) || !isfinite(lr))
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_step: learning rate %g is not "
                                         "a finite number >= 0", lr));
    if ((rc = zt_engine_commit(e)) < 0)
        return rc;
    if (e->un.pass == ZT_PASS_FORWARD)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_step: the forward pass "
                                         "(acquired for training) has no backward pass: the "
                                         "gradients are not ready"));
    if ((rc = zt_units_pass_close(&e->un, "zt_engine_step")) < 0)
        return zt_engine_fail(e, rc);
    ZT_TRY(zt_engine_ensure_moments(e));
    /* a deferred update no forward pass applied (a step without one) goes first, on the
     * gradients it was computed from; then the shards zero_grad left are zeroed */
    if ((rc = zt_zero_flush(&e->z)) < 0 || (rc = zt_zero_clear_stale(&e->z)) < 0)
        return zt_engine_fail(e, rc);
    int bad_unit = -1, fp16 = e->cfg.precision == ZT_PREC_FP16;
    double S = e->ls.scale; /* what this step's backward passes scaled the loss by */
    if ((rc = zt_zero_reduce(&e->z, &sumsq, &bad_unit)) < 0)
        return zt_engine_fail(e, rc);
    if ((e->cfg.skip_nonfinite || fp16) && e->loss_bad) /* (the reduced sum tells every rank) */
        sumsq = NAN;
    e->loss_bad = 0;
    if ((rc = zt_comm_sum_ordered(&e->comm, sumsq, &sumsq)) < 0)
        return zt_engine_fail(e, rc);
    norm = sqrt(sumsq) / S; /* (fp16: the unscaled gradients' norm) */
    /* fp16: an overflow (a non-finite gradient on any rank) skips the step and lowers the
     * scale (DeepSpeed's dynamic loss scaling), without counting as a divergence */
    if (!isfinite(norm) && (e->cfg.skip_nonfinite || fp16)) {
        /* the divergence guard: nothing changes; every rank decided alike from the reduced
         * sum. The first non-finite unit of any rank (one more gather, on this path only). */
        double mine = bad_unit, *all = malloc(sizeof *all * (size_t)e->comm.size);
        int first = -1;
        if (!all)
            return zt_engine_fail(e, zt_fail(ZT_E_NOMEM, "out of memory"));
        if ((rc = zt_comm_gather_d(&e->comm, &mine, all, 1)) < 0) {
            free(all);
            return zt_engine_fail(e, rc);
        }
        for (int r = 0; r < e->comm.size; r++)
            if (all[r] >= 0 && (first < 0 || all[r] < first))
                first = (int)all[r];
        free(all);
        zt_zero_step_done(&e->z);
        if (fp16 && (rc = zt_lscale_update(&e->ls, 1)) < 0) /* (every rank alike) */
            return zt_engine_fail(e, zt_fail_wrap(rc, "step %" PRId64, e->step + 1));
        if (!fp16)
            e->skipped_steps++;
        if (out) {
            out->grad_norm = norm;
            out->clip_coef = 1.0f;
            out->step = e->step;
            out->lr = lr;
            out->skipped = 1;
            out->nonfinite_unit = first;
            out->overflow = fp16;
            out->loss_scale = S;
        }
        return 0;
    }
    if (!isfinite(norm) && !e->warned_nonfinite) {
        e->warned_nonfinite = 1;
        zt_log(ZT_LOG_WARN, "step %" PRId64 ": the gradient norm is %g and skip_nonfinite is "
               "off: the update goes on (each optimizer's per-element rule)", e->step + 1, norm);
    }
    if (e->cfg.grad_clip > 0.0f && norm > e->cfg.grad_clip)
        coef = (float)(e->cfg.grad_clip / (norm + 1e-6));
    e->step++;
    zt_zero_step_done(&e->z);
    /* the gradients' multiplier: the clipping coefficient, and fp16's unscaling (as
     * DeepSpeed's combined scale) */
    hp.adamw = (zt_adamw_hparams){lr, e->cfg.beta1, e->cfg.beta2, e->cfg.eps,
                                  e->cfg.weight_decay, e->step,
                                  fp16 ? (float)((double)coef / S) : coef,
                                  !e->cfg.bias_correction};
    if (e->os.opt == ZT_OPT_ADAFACTOR) {
        const zt_config *c = &e->cfg;
        hp.af = (zt_adafactor_hparams){lr, c->adafactor_eps1, c->adafactor_eps2,
                                       c->clip_threshold, c->decay_rate, c->adafactor_beta1,
                                       c->weight_decay, c->relative_step, c->scale_parameter,
                                       c->warmup_init, e->step};
    }
    if (e->os.opt == ZT_OPT_LAMB) {
        const zt_config *c = &e->cfg;
        hp.lamb = (zt_lamb_hparams){lr, c->beta1, c->beta2, c->eps, c->weight_decay,
                                    c->max_coeff, c->min_coeff, e->step, hp.adamw.grad_scale,
                                    !c->bias_correction, c->eps_inside_sqrt};
    }
    if ((rc = zt_zero_update(&e->z, &hp)) < 0)
        return zt_engine_fail(e, rc);
    if (fp16)
        (void)zt_lscale_update(&e->ls, 0); /* (no error without an overflow) */
    if (out) {
        out->grad_norm = norm;
        out->clip_coef = coef;
        out->step = e->step;
        out->lr = e->os.opt == ZT_OPT_ADAFACTOR ? (float)zt_adafactor_step_size(&hp.af) : lr;
        out->skipped = 0;
        out->nonfinite_unit = -1;
        out->overflow = 0;
        out->loss_scale = S;
    }
    return 0;
}

double zt_engine_loss_scale(const zt_engine *e)
{
    return e ? e->ls.scale : 1.0;
}

int zt_engine_report_get(const zt_engine *e, zt_engine_report *o)
{
    size_t P = 0, N, F = sizeof(float);
    if (!e || !o)
        return zt_fail(ZT_E_INVAL, "zt_engine_report_get: NULL argument");
    memset(o, 0, sizeof *o);
    if (e->un.committed <= 0)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_report_get: the engine has no "
                                         "buffers yet (zt_engine_commit)"));
    N = (size_t)e->comm.size;
    for (int u = 0; u < e->layout.n_units; u++)
        P += e->geo.padded[u];
    o->world_size = (int)N;
    o->rank = e->comm.rank;
    o->zero_stage = e->cfg.zero_stage;
    o->params = P;
    /* parameters and gradients (4 bytes per float each, whole or sharded by the stage),
     * and the optimizer's state of what the rank updates (AdamW: 8 bytes per float): the
     * formula, and the engine's buffers beyond it (footprint.h) */
    size_t ost = zt_ost_state_bytes(&e->os), own = e->cfg.zero_stage == 0 ? P : P / N;
    zt_footprint fp;
    zt_zero_footprint(&e->z, &fp);
    o->predicted_state_bytes = (size_t)fp.formula;
    o->buffer_bytes = (size_t)(fp.params + fp.grads + fp.optimizer - fp.formula);
    o->optimizer_state_bytes = ost;
    o->optimizer_bytes_per_param = own ? (double)ost / (double)own : 0.0;
    {
        zt_use *train = NULL;
        int n = zt_units_train_schedule(&e->un, &train);
        o->traffic_schedule = zt_zero_traffic_theory((zt_zero *)&e->z, train, n,
                                                     &o->traffic_theory);
        free(train);
    }
    o->gathered_peak = e->cfg.zero_stage >= 3 ? e->z.ga.sched.live_peak * F : 0;
    o->progress = e->comm.mode;
    /* this engine's own bytes (other engines of the process hold their own) */
    o->measured_state_bytes = atomic_load(&e->mem.current[ZT_MEM_PARAMS]) +
                              atomic_load(&e->mem.current[ZT_MEM_GRADS]) +
                              atomic_load(&e->mem.current[ZT_MEM_OPTIMIZER]);
    o->collectives = e->comm.seq;
    o->offload_optimizer = e->cfg.offload_optimizer;
    o->offload_param = e->cfg.offload_param;
    o->offload_gradients = e->cfg.offload_gradients > 0;
    zt_store *stores[4] = {e->z.oo.store, e->z.ps.store, e->z.gr.store, e->ao.store};
    for (int i = 0; i < 4; i++) {
        zt_store_stats ss;
        if (!stores[i])
            continue;
        zt_store_get_stats(stores[i], &ss);
        for (int c = 0; c < 8; c++) {
            uint64_t rd = ss.read_bytes[c], wr = ss.written_bytes[c];
            o->io_wait_seconds += ss.wait_seconds[c];
            if (ss.device == ZT_STORE_NVME) {
                o->nvme_read_bytes += rd;
                o->nvme_written_bytes += wr;
            } else {
                o->pool_read_bytes += rd;
                o->pool_written_bytes += wr;
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        o->coll_calls[k] = e->comm.calls[k];
        o->coll_bytes[k] = e->comm.bytes[k];
        o->coll_seconds[k] = e->comm.seconds[k];
        o->coll_flight[k] = e->comm.flight[k];
    }
    return 0;
}

/* Stage 3 saves stream: the writer asks for each tensor in layout order, which gathers the
 * next unit when the tensor belongs to it; one unit is whole at a time. The weights are
 * written in the parameters' dtype as they are (fp32, bf16 or fp16), or from the fp32
 * master. */
typedef struct save_arg {
    zt_engine *e;
    void *buf;
    const void *whole;
    int cur;             /* the unit in whole, -1 = none yet */
    int master;          /* a half-precision run saved in fp32: from the master, unit by unit */
} save_arg;

/* a half-precision run's weights saved in fp32: unit u's fp32 master, whole (every rank
 * calls it for every unit in order: the all-gather of stages 1-3) */
static int master_gather_into(zt_engine *e, int u, float *buf, const void **whole)
{
    memset(buf, 0, e->geo.padded[u] * sizeof(float));
    int rc = zt_zero_master_to_whole(&e->z, u, buf);
    *whole = buf;
    if (rc == 0 || e->comm.size == 1)
        return rc < 0 ? rc : 0;
    int grc = allgather_unit(e, u, buf, sizeof(float)); /* (also after a local failure) */
    return rc < 0 ? rc : grc;
}

static int next_unit(save_arg *a)
{
    ++a->cur;
    return a->master ? master_gather_into(a->e, a->cur, a->buf, &a->whole)
                     : gather_into(a->e, a->cur, a->buf, &a->whole);
}

static int fetch_param(int i, void *p, const void **data)
{
    save_arg *a = p;
    const zt_param_def *d = &a->e->layout.params[i];
    while (a->cur < d->unit)
        ZT_TRY(next_unit(a));
    *data = (const char *)a->whole + d->offset * (a->master ? sizeof(float) : a->e->z.pes);
    return 0;
}

static int zt_engine_save_weights(zt_engine *e, const char *dir, size_t max_shard_bytes)
{
    char path[4096];
    int n = e->layout.n_params, rc = 0, st3 = e->cfg.zero_stage >= 3, r = e->comm.rank;
    save_arg a = {e, NULL, NULL, -1, e->z.hdt >= 0 && e->save_dtype == ZT_PREC_FP32};
    zt_tensor_view *v = NULL;
    zt_dtype dt = a.master || e->z.hdt < 0 ? ZT_F32 : e->z.hdt == ZT_HALF_F16 ? ZT_F16 : ZT_BF16;
    st3 = st3 || a.master; /* (streamed unit by unit, every rank gathering) */
    ZT_TRY(zt_zero_flush(&e->z));
    size_t bytes = zt_geometry_max(&e->geo, -1) * (a.master ? sizeof(float) : e->z.pes);
    if (st3 && !(a.buf = zt_mem_alloc_in(&e->mem, bytes, ZT_ALIGN_PAGE, ZT_MEM_COMM)))
        rc = ZT_E_NOMEM;
    if (rc == 0 && r == 0 && (rc = zt_mkdirs(dir, 0755, NULL)) == 0 &&
        !(v = calloc((size_t)n, sizeof *v)))
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    if (rc == 0 && r == 0) {
        for (int i = 0; i < n; i++) {
            const zt_param_def *d = &e->layout.params[i];
            v[i] = (zt_tensor_view){d->name, dt, d->ndim, {0},
                                    st3 ? NULL : zt_zero_pat(&e->z, e->z.P[d->unit], d->offset)};
            for (int k = 0; k < d->ndim; k++)
                v[i].shape[k] = d->shape[k];
        }
        rc = zt_hf_write_weights_cb(dir, v, n, max_shard_bytes, st3 ? fetch_param : NULL, &a);
        if (rc >= 0) {
            snprintf(path, sizeof path, "%s/config.json", dir);
            rc = e->un.custom ? zt_units_config_save(&e->un, path)
                              : zt_model_config_save(&e->mc, path, dt == ZT_BF16 ? "bfloat16"
                                                     : dt == ZT_F16 ? "float16" : NULL);
        }
    }
    /* every rank gathers every unit, whatever rank 0's writer did, to stay in step */
    while (st3 && a.buf && a.cur + 1 < e->layout.n_units) {
        int grc = next_unit(&a);
        if (grc < 0) {
            rc = rc < 0 ? rc : grc;
            break;
        }
    }
    free(v);
    if (a.buf)
        zt_mem_free_in(&e->mem, a.buf, bytes, ZT_MEM_COMM);
    return zt_engine_agree(e, rc, "saving the weights");
}

static int zt_engine_agree(zt_engine *e, int rc, const char *what)
{
    int res;
    if (e->comm.size == 1)
        return rc;
    if ((res = zt_comm_agree(&e->comm, rc, NULL)) < 0 && rc == 0)
        zt_fail_wrap(res, "%s", what);
    return res;
}

int zt_engine_sum_i64(zt_engine *e, int64_t *x, int n)
{
    if (!e || (!x && n > 0) || n < 0)
        return zt_fail(ZT_E_INVAL, "zt_engine_sum_i64: bad argument");
    int rc = zt_comm_sum_i64_n(&e->comm, x, (size_t)n);
    return rc < 0 ? zt_engine_fail(e, rc) : 0;
}

int zt_engine_gather_f64(zt_engine *e, const double *x, int n, double *all)
{
    if (!e || ((!x || !all) && n > 0) || n < 0)
        return zt_fail(ZT_E_INVAL, "zt_engine_gather_f64: bad argument");
    int rc = n ? zt_comm_gather_d(&e->comm, x, all, (size_t)n) : 0;
    return rc < 0 ? zt_engine_fail(e, rc) : 0;
}

/* this rank's first non-finite parameter value: *param, *elem and its value, or *param -1.
 * Stage 3 scans this rank's shards (each unit laid out in a scratch buffer, the other
 * ranks' floats zero), the other stages the whole parameters. */
static int first_nonfinite_here(zt_engine *e, int *param, size_t *elem, float *value)
{
    int st3 = e->cfg.zero_stage >= 3, rc = 0;
    size_t es = e->z.pes, cap = zt_geometry_max(&e->geo, -1) * es;
    zt_dtype dt = e->z.hdt < 0 ? ZT_F32 : e->z.hdt == ZT_HALF_F16 ? ZT_F16 : ZT_BF16;
    void *buf = NULL;
    *param = -1;
    if (st3 && !(buf = zt_mem_alloc_in(&e->mem, cap, ZT_ALIGN_PAGE, ZT_MEM_OTHER)))
        return ZT_E_NOMEM;
    for (int u = 0; u < e->layout.n_units && *param < 0; u++) {
        const zt_unit_def *ud = &e->layout.units[u];
        void *p = e->z.P[u];
        if (st3 && !e->z.ga.persist[u]) {
            memset(buf, 0, e->geo.padded[u] * es);
            if ((rc = zt_zero_shard_to_whole(&e->z, u, buf)) < 0)
                break;
            p = buf;
        }
        for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++) {
            const zt_param_def *d = &e->layout.params[i];
            int64_t at = zt_first_nonfinite(dt, zt_zero_pat(&e->z, p, d->offset), d->numel);
            if (at >= 0) {
                *param = i;
                *elem = (size_t)at;
                zt_zero_pwiden(&e->z, value, zt_zero_pat(&e->z, p, d->offset + (size_t)at), 1);
                break;
            }
        }
    }
    if (buf)
        zt_mem_free_in(&e->mem, buf, cap, ZT_MEM_OTHER);
    return rc;
}

static int zt_engine_check_finite(zt_engine *e, const char *what, const char *path)
{
    int param = -1, owner = e->comm.rank, N = e->comm.size, rc;
    size_t elem = 0;
    float value = 0.0f;
    ZT_TRY(zt_zero_flush(&e->z)); /* the step's result is what is checked */
    rc = first_nonfinite_here(e, &param, &elem, &value);
    if (N > 1) { /* every rank learns the first over all ranks (lowest parameter, element) */
        double mine[4] = {rc < 0, param, (double)elem, value}, *all = malloc(sizeof mine * N);
        if (!all)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        int grc = zt_comm_gather_d(&e->comm, mine, all, 4);
        int failed = 0;
        param = -1;
        for (int r = 0; grc == 0 && r < N; r++) {
            const double *x = all + 4 * r;
            failed |= x[0] != 0.0;
            if (x[1] >= 0 && (param < 0 || x[1] < param || (x[1] == param && x[2] < elem))) {
                param = (int)x[1];
                elem = (size_t)x[2];
                value = (float)x[3];
                owner = r;
            }
        }
        free(all);
        if (grc < 0)
            return grc;
        if (rc == 0 && failed)
            return zt_fail(ZT_E_MPI, "checking the parameters failed on another rank");
    }
    if (rc < 0 || param < 0)
        return rc;
    const zt_param_def *d = &e->layout.params[param];
    char at[160], where[48] = "";
    zt_nonfinite_text(at, sizeof at, ZT_F32, &value, d->ndim, d->shape, elem);
    if (e->cfg.zero_stage >= 3 && N > 1 && !e->z.ga.persist[d->unit])
        snprintf(where, sizeof where, ", in rank %d's shard", owner);
    return zt_fail(ZT_E_RANGE, "not %s %s: parameter \"%s\" %s (its first non-finite "
                   "value%s): nothing was written", what, path, d->name, at, where);
}

/* The model folder dir written whole and swapped in (hfweights.h), so that no file of an
 * older one survives; collective, rank 0 writes. */
static int save_folder(zt_engine *e, const char *dir, size_t max_shard_bytes)
{
    char tmp[4200] = "";
    int r = e->comm.rank, rc = r == 0 ? zt_hf_dir_begin(dir, tmp, sizeof tmp) : 0;
    ZT_TRY(zt_engine_agree(e, rc, "preparing the model folder"));
    rc = zt_engine_save_weights(e, r == 0 ? tmp : dir, max_shard_bytes); /* agreed */
    if (r == 0 && rc < 0)
        zt_dir_discard(tmp);
    else if (r == 0)
        rc = zt_dir_commit(tmp, dir);
    return zt_engine_agree(e, rc, "saving the model");
}

int zt_engine_save_model_ex(zt_engine *e, const char *dir, size_t max_shard_bytes)
{
    int rc;
    if (!e || !dir)
        return zt_fail(ZT_E_INVAL, "zt_engine_save_model: NULL argument");
    if ((rc = zt_engine_commit(e)) < 0)
        return rc;
    if ((rc = zt_units_pass_close(&e->un, "zt_engine_save_model")) < 0 ||
        (rc = zt_engine_check_finite(e, "saving the model to", dir)) < 0 ||
        (rc = save_folder(e, dir, max_shard_bytes)) < 0)
        return zt_engine_fail(e, rc);
    return 0;
}

/* Stage 3 loads one unit at a time: the loader fills only the units whose buffer is given. */
typedef struct load_arg {
    zt_engine *e;
    const char *dir;
    float **one;
} load_arg;

static int load_unit(int u, float *buf, void *p)
{
    load_arg *a = p;
    int rc;
    a->one[u] = buf;
    rc = zt_load_hf_weights(a->dir, &a->e->layout, a->one, a->e->ck.alias_seen, a->e->cfg.seed,
                            u == a->e->layout.n_units - 1);
    a->one[u] = NULL;
    return rc;
}

static int zt_engine_load_params(zt_engine *e, const char *dir)
{
    load_arg a = {e, dir, NULL};
    int rc;
    ZT_TRY(zt_zero_flush(&e->z)); /* nothing deferred may land on what is loaded */
    if (e->cfg.zero_stage < 3 && e->z.hdt < 0) /* in place */
        return zt_load_hf_weights(dir, &e->layout, (float **)e->z.P, e->ck.alias_seen,
                                  e->cfg.seed, 1);
    /* one unit at a time, rounded into half precision / kept as this rank's shard */
    if (!(a.one = calloc((size_t)e->layout.n_units, sizeof *a.one)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    rc = zt_zero_fill_params(&e->z, load_unit, &a);
    free(a.one);
    return rc;
}

int zt_engine_set_save_dtype(zt_engine *e, int precision)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_set_save_dtype: NULL engine");
    if (precision < 0) /* the run's own */
        precision = e->cfg.precision;
    if (precision != ZT_PREC_FP32 && precision != ZT_PREC_BF16 && precision != ZT_PREC_FP16)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_set_save_dtype: %d is not "
                                         "ZT_PREC_FP32, ZT_PREC_BF16 or ZT_PREC_FP16",
                                         precision));
    if (precision != ZT_PREC_FP32 && precision != e->cfg.precision) {
        const char *want = precision == ZT_PREC_BF16 ? "bf16" : "fp16";
        if (e->cfg.precision == ZT_PREC_FP32)
            return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_set_save_dtype: %s weights "
                                             "of an fp32 run would lose their low bits: save "
                                             "them from a %s run (\"%s\": {\"enabled\": "
                                             "true})", want, want, want));
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_set_save_dtype: %s weights of "
                                         "a %s run: save its own dtype or fp32 (its master)",
                                         want, precision == ZT_PREC_BF16 ? "fp16" : "bf16"));
    }
    e->save_dtype = precision;
    return 0;
}

int zt_engine_save_model(zt_engine *e, const char *dir)
{
    return zt_engine_save_model_ex(e, dir, (size_t)5000000000u);
}

const char *zt_engine_memory_plan(const zt_engine *e)
{
    return e ? e->plan : "";
}

/* ---- the report as JSON -------------------------------------------------------------------- */

int zt_engine_report_json(const zt_engine *e, char *buf, size_t n)
{
    zt_engine_report r;
    zt_mem_report m;
    static const char *const coll[3] = {"reduce_scatter", "all_gather", "other"};
    int rc = zt_engine_report_get(e, &r);
    if (rc < 0)
        return rc;
    if (!buf && n)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_report_json: NULL buffer"));
    zt_memory_report(&m);
    size_t len = 0;
#define PUT(...)                                                                              \
    do {                                                                                      \
        int k_ = snprintf(buf ? buf + (len < n ? len : n) : NULL, len < n ? n - len : 0,     \
                          __VA_ARGS__);                                                       \
        len += k_ > 0 ? (size_t)k_ : 0;                                                       \
    } while (0)
    PUT("{\"world_size\": %d, \"rank\": %d, \"zero_stage\": %d, \"params\": %zu, "
        "\"predicted_state_bytes\": %zu, \"measured_state_bytes\": %zu, \"buffer_bytes\": %zu, "
        "\"optimizer_state_bytes\": %zu, \"optimizer_bytes_per_param\": %.6g, "
        "\"traffic_theory\": %.6g, \"traffic_schedule\": %.6g, \"gathered_peak\": %zu, "
        "\"collectives\": %llu, \"nvme_read_bytes\": %llu, \"nvme_written_bytes\": %llu, "
        "\"pool_read_bytes\": %llu, \"pool_written_bytes\": %llu, \"io_wait_seconds\": %.6g",
        r.world_size, r.rank, r.zero_stage, r.params, r.predicted_state_bytes,
        r.measured_state_bytes, r.buffer_bytes, r.optimizer_state_bytes,
        r.optimizer_bytes_per_param, r.traffic_theory, r.traffic_schedule, r.gathered_peak,
        (unsigned long long)r.collectives, (unsigned long long)r.nvme_read_bytes,
        (unsigned long long)r.nvme_written_bytes, (unsigned long long)r.pool_read_bytes,
        (unsigned long long)r.pool_written_bytes, r.io_wait_seconds);
    for (int k = 0; k < 3; k++)
        PUT(", \"%s\": {\"calls\": %llu, \"bytes\": %llu, \"seconds\": %.6g, \"flight\": %.6g}",
            coll[k], (unsigned long long)r.coll_calls[k], (unsigned long long)r.coll_bytes[k],
            r.coll_seconds[k], r.coll_flight[k]);
    PUT(", \"memory\": {");
    for (int c = 0; c < ZT_MEM_NCAT; c++)
        PUT("%s\"%s\": {\"current\": %zu, \"peak\": %zu}", c ? ", " : "",
            zt_memory_category_name(c), atomic_load(&e->mem.current[c]),
            atomic_load(&e->mem.peak[c]));
    PUT(", \"peak_rss\": %zu, \"heap\": {\"source\": \"%s\", \"allocated\": %zu, "
        "\"resident\": %zu}}}", m.peak_rss, zt_memory_heap_source(), m.jemalloc_allocated,
        m.jemalloc_resident);
#undef PUT
    return len > (size_t)INT32_MAX ? ZT_E_RANGE : (int)len;
}
