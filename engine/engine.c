/* engine.c - the engine: owns every unit's flat fp32 buffers (params, grads, AdamW
 * moments), runs a model unit by unit, clips and steps. One rank in this version: the
 * buffers are already padded and split for N shards, but no collective runs yet. */

#include "zerotrain.h"
#include "engine_impl.h"
#include "load.h"
#include "rng.h"
#include "../common/err.h"
#include "../format/fileio.h"
#include "../format/hfweights.h"
#include "../memory/mem.h"
#include "../models/bert.h"
#include "../optimizer/adamw.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int zt_engine_fail(const zt_engine *e, int rc)
{
    if (e)
        snprintf(((zt_engine *)e)->err, sizeof e->err, "%s", zt_last_error());
    return rc;
}

void zt_config_init(zt_config *c)
{
    memset(c, 0, sizeof *c);
    c->seed = 42;
    c->dropout = 1;
    c->lr = 1e-4f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->weight_decay = 0.01f;
    c->n_no_decay = -1;
    c->collective_timeout = 300.0;
}

static int check_config(const zt_config *c)
{
    if (!c->model_dir == !c->model_preset)
        return zt_fail(ZT_E_CONFIG, "config: give exactly one of model_dir and model_preset");
    if (!(c->lr >= 0.0f) || !(c->beta1 >= 0.0f && c->beta1 < 1.0f) ||
        !(c->beta2 >= 0.0f && c->beta2 < 1.0f) || !(c->eps > 0.0f) || !(c->weight_decay >= 0.0f))
        return zt_fail(ZT_E_CONFIG, "config: optimizer needs lr >= 0, betas in [0, 1), eps > 0, "
                                    "weight_decay >= 0");
    if (!(c->grad_clip >= 0.0f) || c->threads < 0 || c->vocab_size < 0)
        return zt_fail(ZT_E_CONFIG, "config: grad_clip, threads and vocab_size must be >= 0");
    return 0;
}

/* floats of unit u in a buffer that holds the whole unit (shard = 0) or this rank's shard */
static size_t unit_len(const zt_engine *e, int u, int shard)
{
    return shard ? e->padded[u] / (size_t)e->comm.size : e->padded[u];
}

static float **alloc_units(const zt_engine *e, int category, int shard)
{
    int n = e->layout.n_units;
    float **b = calloc((size_t)n, sizeof *b);
    if (!b) {
        zt_fail(ZT_E_NOMEM, "out of memory");
        return NULL;
    }
    for (int u = 0; u < n; u++)
        if (!(b[u] = zt_mem_alloc(unit_len(e, u, shard) * sizeof(float), ZT_ALIGN_PAGE,
                                  category))) {
            for (int v = 0; v < u; v++)
                zt_mem_free(b[v], unit_len(e, v, shard) * sizeof(float), category);
            free(b);
            return NULL;
        }
    return b;
}

static void free_units(const zt_engine *e, float **b, int category, int shard)
{
    if (!b)
        return;
    for (int u = 0; u < e->layout.n_units; u++)
        zt_mem_free(b[u], unit_len(e, u, shard) * sizeof(float), category);
    free(b);
}

/* Stage 2 keeps no whole-unit gradient between units: G[0] (the embeddings, which the tied
 * MLM head also adds into) is whole for the length of the backward pass, every other unit
 * borrows one of two scratch buffers while its backward runs, and is then reduce-scattered
 * into its shard (Gs). */
static size_t max_padded(const zt_engine *e)
{
    size_t m = 0;
    for (int u = 0; u < e->layout.n_units; u++)
        m = e->padded[u] > m ? e->padded[u] : m;
    return m;
}

/* the largest unit other than unit 0 (which stage 2-3 keep in a buffer of its own) */
static size_t max_padded_rest(const zt_engine *e)
{
    size_t m = 0;
    for (int u = 1; u < e->layout.n_units; u++)
        m = e->padded[u] > m ? e->padded[u] : m;
    return m;
}

static int alloc_stage2(zt_engine *e)
{
    size_t m = max_padded_rest(e), mr = max_padded(e);
    if (!(e->G = calloc((size_t)e->layout.n_units, sizeof *e->G)) ||
        !(e->G[0] = zt_mem_alloc(e->padded[0] * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_GRADS)))
        return ZT_E_NOMEM;
    for (int i = 0; i < 2; i++)
        if (!(e->scratch[i] = zt_mem_alloc(m * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_GRADS)))
            return ZT_E_NOMEM;
    if (!(e->rs_tmp = zt_mem_alloc(mr / (size_t)e->comm.size * sizeof(float), ZT_ALIGN_PAGE,
                                   ZT_MEM_COMM)))
        return ZT_E_NOMEM;
    return 0;
}

static void free_stage2(zt_engine *e)
{
    size_t m = max_padded_rest(e), mr = max_padded(e);
    if (e->G)
        zt_mem_free(e->G[0], e->padded[0] * sizeof(float), ZT_MEM_GRADS);
    free(e->G);
    for (int i = 0; i < 2; i++)
        zt_mem_free(e->scratch[i], m * sizeof(float), ZT_MEM_GRADS);
    zt_mem_free(e->rs_tmp, mr / (size_t)e->comm.size * sizeof(float), ZT_MEM_COMM);
}

/* Stage 2: unit u's gradient of this micro-batch into its shard (first micro-batch of the
 * step: straight in; later ones: added), exactly the reduction stages 0-1 do once per step. */
static int reduce_unit(zt_engine *e, int u)
{
    size_t s = e->padded[u] / (size_t)e->comm.size;
    const char *skip = getenv("ZT_FAULT_SKIP_UNIT"); /* tests: "rank:unit" skips a reduction */
    int fr = -1, fu = -1;
    if (skip && sscanf(skip, "%d:%d", &fr, &fu) == 2 && fr == e->comm.rank && fu == u)
        return 0;
    float *dst = e->accum_first ? e->Gs[u] : e->rs_tmp;
    ZT_TRY(zt_comm_reduce_scatter(&e->comm, e->G[u], dst, e->padded[u]));
    if (!e->accum_first)
        for (size_t i = 0; i < s; i++)
            e->Gs[u][i] += e->rs_tmp[i];
    return 0;
}

/* ---- stage 3: parameters live as shards (Ps); a unit is gathered into a pool buffer
 * while a forward or backward pass uses it, and released after. Units smaller than
 * persist_threshold floats stay gathered. Below stage 3 gather/release do nothing. */

/* floats of pool buffer i: slot 0 holds unit 0, the others any other unit */
static size_t pool_len(const zt_engine *e, int i)
{
    return i == 0 ? e->padded[0] : max_padded_rest(e);
}

static int gather_unit(zt_engine *e, int u)
{
    int slot = -1, rc;
    if (e->cfg.zero_stage < 3 || e->persist[u] || e->gathered[u]++ > 0)
        return 0;
    /* slot 0 is sized for unit 0 (the embeddings, often the largest and tied to the head),
     * the others for the largest of the rest */
    for (int i = u == 0 ? 0 : 1; i < (u == 0 ? 1 : ZT_POOL) && slot < 0; i++)
        if (e->pool_unit[i] < 0)
            slot = i;
    if (slot < 0) /* a programming error: more units in use at once than the pool holds */
        return zt_fail(ZT_E_INVAL, "stage 3: no free buffer to gather unit %d", u);
    e->pool_unit[slot] = u;
    e->P[u] = e->pool[slot];
    if ((rc = zt_comm_allgather(&e->comm, e->Ps[u], e->P[u], e->padded[u])) < 0)
        return rc;
    return 0;
}

static void release_unit(zt_engine *e, int u)
{
    if (e->cfg.zero_stage < 3 || e->persist[u] || --e->gathered[u] > 0)
        return;
    for (int i = 0; i < ZT_POOL; i++)
        if (e->pool_unit[i] == u)
            e->pool_unit[i] = -1;
    e->P[u] = NULL;
}

/* Whole-unit parameters: the engine's own buffers, or (stage 3) gathered copies in tmp. */
static int gather_all(zt_engine *e, float ***tmp)
{
    int rc;
    *tmp = NULL;
    if (e->cfg.zero_stage < 3)
        return 0;
    if (!(*tmp = calloc((size_t)e->layout.n_units, sizeof **tmp)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < e->layout.n_units; u++) {
        if (!((*tmp)[u] = zt_mem_alloc(e->padded[u] * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_COMM)))
            return ZT_E_NOMEM;
        if ((rc = zt_comm_allgather(&e->comm, e->Ps[u], (*tmp)[u], e->padded[u])) < 0)
            return rc;
    }
    return 0;
}

static void free_gathered(zt_engine *e, float **tmp)
{
    for (int u = 0; tmp && u < e->layout.n_units; u++)
        zt_mem_free(tmp[u], e->padded[u] * sizeof(float), ZT_MEM_COMM);
    free(tmp);
}

/* Stage 3 storage: this rank's shards, own buffers for the persistent units, the pool. */
static int stage3_setup(zt_engine *e)
{
    int nu = e->layout.n_units;
    if (!(e->Ps = alloc_units(e, ZT_MEM_PARAMS, 1)) ||
        !(e->gathered = calloc((size_t)nu, sizeof *e->gathered)) ||
        !(e->persist = calloc((size_t)nu, 1)))
        return ZT_E_NOMEM;
    for (int u = 0; u < nu; u++) {
        e->persist[u] = e->padded[u] < e->cfg.persist_threshold;
        if (e->persist[u] && !(e->P[u] = zt_mem_alloc(e->padded[u] * sizeof(float),
                                                       ZT_ALIGN_PAGE, ZT_MEM_PARAMS)))
            return ZT_E_NOMEM;
    }
    for (int i = 0; i < ZT_POOL; i++) {
        e->pool_unit[i] = -1;
        if (!(e->pool[i] = zt_mem_alloc(pool_len(e, i) * sizeof(float), ZT_ALIGN_PAGE,
                                        ZT_MEM_PARAMS)))
            return ZT_E_NOMEM;
    }
    return 0;
}

/* Random initialisation. In stage 3 one unit at a time in a scratch buffer, keeping only
 * this rank's shard: the whole model never exists on one rank. */
static int init_params(zt_engine *e, uint64_t seed)
{
    int nu = e->layout.n_units;
    float *tmp, **one;
    if (e->cfg.zero_stage < 3) {
        for (int i = 0; i < e->layout.n_params; i++)
            zt_param_init(&e->layout, i, e->P, seed);
        return 0;
    }
    if (!(one = calloc((size_t)nu, sizeof *one)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    if (!(tmp = zt_mem_alloc(max_padded(e) * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_OTHER))) {
        free(one);
        return ZT_E_NOMEM;
    }
    for (int u = 0; u < nu; u++) {
        const zt_unit_def *ud = &e->layout.units[u];
        size_t s = e->padded[u] / (size_t)e->comm.size;
        memset(tmp, 0, e->padded[u] * sizeof(float));
        one[u] = tmp;
        for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++)
            zt_param_init(&e->layout, i, one, seed);
        one[u] = NULL;
        memcpy(e->Ps[u], tmp + (size_t)e->comm.rank * s, s * sizeof(float));
        if (e->persist[u])
            memcpy(e->P[u], tmp, e->padded[u] * sizeof(float));
    }
    zt_mem_free(tmp, max_padded(e) * sizeof(float), ZT_MEM_OTHER);
    free(one);
    return 0;
}

int zt_engine_create(const zt_config *cfg, MPI_Comm comm, zt_engine **out)
{
    zt_engine *e;
    char path[4096];
    int rc;
    zt_clear_error();
    if (!cfg || !out)
        return zt_fail(ZT_E_INVAL, "zt_engine_create: cfg and out must not be NULL");
    *out = NULL;
    ZT_TRY(check_config(cfg));
    if (!(e = calloc(1, sizeof *e)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    e->cfg = *cfg;
    e->cfg.model_dir = e->cfg.model_preset = NULL; /* borrowed strings are not kept */
    e->cfg.no_decay = NULL;
    e->accum_first = 1;
    e->comm.comm = MPI_COMM_NULL;
    if (cfg->model_dir) {
        snprintf(path, sizeof path, "%s/config.json", cfg->model_dir);
        rc = bert_config_load(path, &e->bc);
    } else {
        rc = bert_config_preset(cfg->model_preset, cfg->vocab_size, &e->bc);
    }
    if (rc < 0 || (rc = bert_layout(&e->bc, &e->layout)) < 0)
        goto fail;
    if ((rc = zt_comm_open(&e->comm, comm)) < 0 ||
        (rc = zt_comm_watch(&e->comm, cfg->collective_timeout, cfg->check_collectives)) < 0)
        goto fail;
    if (cfg->zero_stage < 0 || cfg->zero_stage > 3) {
        rc = zt_fail(ZT_E_CONFIG, "ZeRO stage %d: stages are 0 to 3", cfg->zero_stage);
        goto fail;
    }
    if (cfg->threads > 0) {
        openblas_set_num_threads(cfg->threads);
        omp_set_num_threads(cfg->threads);
    }
    e->padded = calloc((size_t)e->layout.n_units, sizeof *e->padded);
    e->alias_seen = calloc((size_t)e->layout.n_params, 1);
    if (!e->padded || !e->alias_seen) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int u = 0; u < e->layout.n_units; u++) {
        size_t q = (size_t)ZT_SHARD_ALIGN * (size_t)e->comm.size;
        e->padded[u] = (e->layout.units[u].numel + q - 1) / q * q;
    }
    if ((cfg->zero_stage >= 3 && (!(e->P = calloc((size_t)e->layout.n_units, sizeof *e->P)) ||
                                  stage3_setup(e) < 0)) ||
        (cfg->zero_stage < 3 && !(e->P = alloc_units(e, ZT_MEM_PARAMS, 0))) ||
        (cfg->zero_stage < 2 && !(e->G = alloc_units(e, ZT_MEM_GRADS, 0))) ||
        (cfg->zero_stage >= 2 && alloc_stage2(e) < 0) ||
        ((e->comm.size > 1 || cfg->zero_stage >= 2) && !(e->Gs = alloc_units(e, ZT_MEM_GRADS, 1)))) {
        rc = ZT_E_NOMEM;
        goto fail;
    }
    if (cfg->model_dir)
        rc = zt_engine_load_params(e, cfg->model_dir);
    else
        rc = init_params(e, cfg->seed);
    if (rc < 0)
        goto fail;
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
    e->ops = &bert_ops;
    if ((rc = bert_create(&e->bc, &e->layout, cfg->dropout, cfg->seed, &e->model)) < 0)
        goto fail;
    {
        zt_model_info mi;
        zt_engine_model_info(e, &mi);
        zt_log(ZT_LOG_INFO, "model: BERT L%d H%d A%d I%d V%d, %d units, %zu parameters",
               mi.num_layers, mi.hidden_size, mi.num_heads, mi.intermediate_size, mi.vocab_size,
               mi.num_units, mi.num_parameters);
    }
    *out = e;
    return 0;
fail:
    snprintf(path, sizeof path, "%s", zt_last_error());
    zt_engine_destroy(e);
    zt_fail(rc, "%s", path);
    return rc;
}

void zt_engine_destroy(zt_engine *e)
{
    if (!e)
        return;
    if (e->ops && e->model)
        e->ops->destroy(e->model);
    if (e->P && e->cfg.zero_stage >= 3) { /* only persistent units hold their own buffer */
        for (int u = 0; u < e->layout.n_units; u++)
            if (e->persist && e->persist[u])
                zt_mem_free(e->P[u], e->padded[u] * sizeof(float), ZT_MEM_PARAMS);
        free(e->P);
        for (int i = 0; i < ZT_POOL; i++)
            zt_mem_free(e->pool[i], pool_len(e, i) * sizeof(float), ZT_MEM_PARAMS);
        free_units(e, e->Ps, ZT_MEM_PARAMS, 1);
        free(e->gathered);
        free(e->persist);
    } else {
        free_units(e, e->P, ZT_MEM_PARAMS, 0);
    }
    if (e->cfg.zero_stage >= 2)
        free_stage2(e);
    else
        free_units(e, e->G, ZT_MEM_GRADS, 0);
    free_units(e, e->Gs, ZT_MEM_GRADS, 1);
    free_units(e, e->M, ZT_MEM_OPTIMIZER, e->cfg.zero_stage >= 1);
    free_units(e, e->V, ZT_MEM_OPTIMIZER, e->cfg.zero_stage >= 1);
    zt_comm_close(&e->comm);
    zt_layout_free(&e->layout);
    free(e->padded);
    free(e->alias_seen);
    free(e);
}

const char *zt_engine_last_error(const zt_engine *e) { return e ? e->err : zt_last_error(); }

int zt_engine_model_info(const zt_engine *e, zt_model_info *o)
{
    if (!e || !o)
        return zt_fail(ZT_E_INVAL, "zt_engine_model_info: NULL argument");
    memset(o, 0, sizeof *o);
    snprintf(o->model_type, sizeof o->model_type, "bert");
    o->vocab_size = e->bc.vocab;
    o->hidden_size = e->bc.hidden;
    o->num_layers = e->bc.layers;
    o->num_heads = e->bc.heads;
    o->intermediate_size = e->bc.inter;
    o->max_positions = e->bc.max_pos;
    o->type_vocab_size = e->bc.type_vocab;
    o->num_tensors = e->layout.n_params;
    o->num_units = e->layout.n_units;
    for (int i = 0; i < e->layout.n_params; i++)
        o->num_parameters += e->layout.params[i].numel;
    return 0;
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
    o->alias = e->alias_seen[i] ? d->alias : NULL;
    o->ndim = d->ndim;
    memcpy(o->shape, d->shape, sizeof o->shape);
    o->numel = d->numel;
    o->unit = d->unit;
    o->decay = d->decay;
    return 0;
}

/* *out = where parameter `name` lives in the unit buffers `bufs` (P or G); n must be its
 * element count. Failures are recorded in the engine. */
static int locate(const zt_engine *e, float *const *bufs, const char *name, size_t n,
                  float **out)
{
    int i;
    if (!e || !name)
        return zt_fail(ZT_E_INVAL, "NULL engine or name");
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
    *out = bufs[d->unit] + d->offset;
    return 0;
}

int zt_engine_read_param(const zt_engine *e, const char *name, float *dst, size_t n)
{
    float *p;
    ZT_TRY(locate(e, e ? e->P : NULL, name, n, &p));
    memcpy(dst, p, n * sizeof(float));
    return 0;
}

int zt_engine_read_grad(const zt_engine *e, const char *name, float *dst, size_t n)
{
    float *p;
    ZT_TRY(locate(e, e ? e->G : NULL, name, n, &p));
    memcpy(dst, p, n * sizeof(float));
    return 0;
}

int zt_engine_write_param(zt_engine *e, const char *name, const float *src, size_t n)
{
    float *p;
    ZT_TRY(locate(e, e ? e->P : NULL, name, n, &p));
    memcpy(p, src, n * sizeof(float));
    return 0;
}

int zt_engine_zero_grad(zt_engine *e)
{
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_zero_grad: NULL engine");
    if (e->cfg.zero_stage >= 2) {
        memset(e->G[0], 0, e->padded[0] * sizeof(float));
        for (int u = 0; u < e->layout.n_units; u++)
            memset(e->Gs[u], 0, e->padded[u] / (size_t)e->comm.size * sizeof(float));
        e->accum_first = 1;
        return 0;
    }
    for (int u = 0; u < e->layout.n_units; u++)
        memset(e->G[u], 0, e->padded[u] * sizeof(float));
    return 0;
}

/* Forward over every unit; stage 3 gathers each unit (and the unit it is tied to) first. */
static int run_forward(zt_engine *e)
{
    int rc;
    for (int u = 0; u < e->layout.n_units; u++) {
        int tied = e->ops->tied_unit(e->model, u);
        if ((rc = gather_unit(e, u)) < 0 || (tied >= 0 && (rc = gather_unit(e, tied)) < 0))
            return rc;
        e->ops->forward_unit(e->model, u, e->P);
        if (tied >= 0)
            release_unit(e, tied);
        release_unit(e, u);
    }
    return 0;
}

int zt_engine_forward_backward(zt_engine *e, const zt_batch *b, int keep_logits,
                               zt_fb_result *out)
{
    int64_t n = 0;
    int rc, nu, st2;
    double sum;
    if (!e || !b)
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_forward_backward: NULL argument"));
    zt_clear_error();
    e->have_logits = 0;
    if ((rc = e->ops->prepare(e->model, b, keep_logits, &n)) < 0 || (rc = run_forward(e)) < 0)
        return zt_engine_fail(e, rc);
    nu = e->layout.n_units;
    st2 = e->cfg.zero_stage >= 2;
    {
        int64_t denom = b->label_count > 0 ? b->label_count : n;
        sum = e->ops->loss(e->model, denom > 0 ? (float)(1.0 / (double)denom) : 0.0f);
    }
    for (int u = nu - 1; u >= 0; u--) {
        int tied = e->ops->tied_unit(e->model, u);
        if ((rc = gather_unit(e, u)) < 0 || (tied >= 0 && (rc = gather_unit(e, tied)) < 0))
            return zt_engine_fail(e, rc);
        if (st2 && u != 0) {
            e->G[u] = e->scratch[u & 1];
            memset(e->G[u], 0, e->padded[u] * sizeof(float));
        }
        e->ops->backward_unit(e->model, u, e->P, e->G);
        if (tied >= 0)
            release_unit(e, tied);
        release_unit(e, u);
        if (st2) {
            if ((rc = reduce_unit(e, u)) < 0)
                return zt_engine_fail(e, rc);
            if (u != 0)
                e->G[u] = NULL;
            else
                memset(e->G[0], 0, e->padded[0] * sizeof(float));
        }
    }
    e->accum_first = 0;
    e->have_logits = keep_logits;
    if (out) {
        out->loss_sum = sum;
        out->n_labels = n;
        out->loss = n > 0 ? (float)(sum / (double)n) : 0.0f;
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
    e->have_logits = 0;
    if ((rc = e->ops->prepare(e->model, b, 0, &n)) < 0)
        return zt_engine_fail(e, rc);
    e->ops->set_train(e->model, 0);
    rc = run_forward(e);
    e->ops->set_train(e->model, 1);
    if (rc < 0)
        return zt_engine_fail(e, rc);
    sum = e->ops->loss(e->model, 0.0f);
    if (out) {
        out->loss_sum = sum;
        out->n_labels = n;
        out->loss = n > 0 ? (float)(sum / (double)n) : 0.0f;
    }
    return 0;
}

int zt_engine_logits(const zt_engine *e, const float **logits, int64_t shape[3])
{
    if (!e || !logits || !shape)
        return zt_fail(ZT_E_INVAL, "zt_engine_logits: NULL argument");
    if (!e->have_logits || !(*logits = e->ops->logits(e->model, shape)))
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "no logits: call zt_engine_forward_backward with "
                                           "keep_logits first"));
    return 0;
}

int zt_engine_ensure_moments(zt_engine *e)
{
    if (e->M)
        return 0;
    int shard = e->cfg.zero_stage >= 1;
    if (!(e->M = alloc_units(e, ZT_MEM_OPTIMIZER, shard)))
        return zt_engine_fail(e, ZT_E_NOMEM);
    if (!(e->V = alloc_units(e, ZT_MEM_OPTIMIZER, shard))) {
        free_units(e, e->M, ZT_MEM_OPTIMIZER, shard);
        e->M = NULL;
        return zt_engine_fail(e, ZT_E_NOMEM);
    }
    return 0;
}

/* The step (DESIGN: one reduction for every stage):
 *   every unit's summed gradient is reduce-scattered into this rank's shard (Gs);
 *   the global norm is each rank's sum of squares over its shards, added in rank order;
 *   stage 0: shards all-gathered back, AdamW on whole units with whole moments;
 *   stage 1: AdamW on this rank's shard only (sharded moments), parameters all-gathered.
 * AdamW is elementwise, so both stages give bit-identical parameters. One rank: Gs = G. */
int zt_engine_step(zt_engine *e, float lr, zt_step_info *out)
{
    double local = 0.0, sumsq, norm;
    float coef = 1.0f, **gs;
    zt_adamw_hparams hp;
    int N, r, rc;
    if (!e)
        return zt_fail(ZT_E_INVAL, "zt_engine_step: NULL engine");
    if (!(lr >= 0.0f))
        return zt_engine_fail(e, zt_fail(ZT_E_INVAL, "zt_engine_step: learning rate %g is not >= 0", lr));
    ZT_TRY(zt_engine_ensure_moments(e));
    N = e->comm.size;
    r = e->comm.rank;
    gs = e->Gs ? e->Gs : e->G;
    for (int u = 0; u < e->layout.n_units; u++) {
        /* stage 2 reduced every unit during the backward pass already */
        if (e->cfg.zero_stage < 2 &&
            (rc = zt_comm_reduce_scatter(&e->comm, e->G[u], gs[u], e->padded[u])) < 0)
            return zt_engine_fail(e, rc);
        local += zt_sumsq(gs[u], unit_len(e, u, 1));
    }
    if ((rc = zt_comm_sum_ordered(&e->comm, local, &sumsq)) < 0)
        return zt_engine_fail(e, rc);
    norm = sqrt(sumsq);
    if (e->cfg.grad_clip > 0.0f && norm > e->cfg.grad_clip)
        coef = (float)(e->cfg.grad_clip / (norm + 1e-6));
    e->step++;
    hp = (zt_adamw_hparams){lr, e->cfg.beta1, e->cfg.beta2, e->cfg.eps, e->cfg.weight_decay,
                            e->step, coef};
    if (e->cfg.zero_stage == 0) {
        for (int u = 0; N > 1 && u < e->layout.n_units; u++)
            if ((rc = zt_comm_allgather(&e->comm, gs[u], e->G[u], e->padded[u])) < 0)
                return zt_engine_fail(e, rc);
        for (int i = 0; i < e->layout.n_params; i++) {
            const zt_param_def *d = &e->layout.params[i];
            size_t o = d->offset;
            zt_adamw_update(e->P[d->unit] + o, e->G[d->unit] + o, e->M[d->unit] + o,
                            e->V[d->unit] + o, d->numel, &hp, d->decay);
        }
    } else {
        /* each parameter's intersection with this rank's shard [lo, hi) of its unit */
        for (int i = 0; i < e->layout.n_params; i++) {
            const zt_param_def *d = &e->layout.params[i];
            size_t s = unit_len(e, d->unit, 1), lo = (size_t)r * s, hi = lo + s;
            size_t a = d->offset > lo ? d->offset : lo;
            size_t b = d->offset + d->numel < hi ? d->offset + d->numel : hi;
            if (a >= b)
                continue;
            float *p = e->cfg.zero_stage >= 3 ? e->Ps[d->unit] + (a - lo) : e->P[d->unit] + a;
            zt_adamw_update(p, gs[d->unit] + (a - lo), e->M[d->unit] + (a - lo),
                            e->V[d->unit] + (a - lo), b - a, &hp, d->decay);
        }
        for (int u = 0; u < e->layout.n_units; u++) {
            size_t s = unit_len(e, u, 1);
            if (e->cfg.zero_stage >= 3) { /* parameters stay sharded, but persistent units */
                if (e->persist[u] &&
                    (rc = zt_comm_allgather(&e->comm, e->Ps[u], e->P[u], e->padded[u])) < 0)
                    return zt_engine_fail(e, rc);
            } else if (N > 1 && (rc = zt_comm_allgather(&e->comm, e->P[u] + (size_t)r * s,
                                                         e->P[u], e->padded[u])) < 0) {
                return zt_engine_fail(e, rc);
            }
        }
    }
    if (out) {
        out->grad_norm = norm;
        out->clip_coef = coef;
        out->step = e->step;
    }
    return 0;
}

int zt_engine_report_get(const zt_engine *e, zt_engine_report *o)
{
    zt_mem_report m;
    size_t P = 0, N, F = sizeof(float);
    if (!e || !o)
        return zt_fail(ZT_E_INVAL, "zt_engine_report_get: NULL argument");
    memset(o, 0, sizeof *o);
    N = (size_t)e->comm.size;
    for (int u = 0; u < e->layout.n_units; u++)
        P += e->padded[u];
    o->world_size = (int)N;
    o->rank = e->comm.rank;
    o->zero_stage = e->cfg.zero_stage;
    o->params = P;
    switch (e->cfg.zero_stage) {
    case 0: o->predicted_state_bytes = 16 * P; break;
    case 1: o->predicted_state_bytes = 8 * P + 8 * P / N; break;
    case 2: o->predicted_state_bytes = 4 * P + 12 * P / N; break;
    default: o->predicted_state_bytes = 16 * P / N; break;
    }
    if (e->cfg.zero_stage >= 2)
        o->buffer_bytes = (e->padded[0] + 2 * max_padded_rest(e)) * F;
    else if (e->Gs)
        o->buffer_bytes = P / N * F;
    o->traffic_theory = N > 1 ? 2.0 : 0.0;
    if (e->cfg.zero_stage >= 3) {
        for (int i = 0; i < ZT_POOL; i++)
            o->buffer_bytes += pool_len(e, i) * F;
        for (int u = 0; u < e->layout.n_units; u++) {
            int t = e->ops->tied_unit(e->model, u);
            if (e->persist[u])
                o->buffer_bytes += e->padded[u] * F;
            if (N > 1 && t >= 0 && !e->persist[t])
                o->traffic_theory += 2.0 * (double)e->padded[t] / (double)P;
        }
        if (N > 1)
            o->traffic_theory += 1.0;
    }
    zt_memory_report(&m);
    o->measured_state_bytes = m.current[ZT_MEM_PARAMS] + m.current[ZT_MEM_GRADS] +
                              m.current[ZT_MEM_OPTIMIZER];
    o->collectives = e->comm.seq;
    for (int k = 0; k < 3; k++) {
        o->coll_calls[k] = e->comm.calls[k];
        o->coll_bytes[k] = e->comm.bytes[k];
        o->coll_seconds[k] = e->comm.seconds[k];
    }
    return 0;
}

int zt_engine_write_model(zt_engine *e, const char *dir, float *const *P,
                          size_t max_shard_bytes)
{
    char path[4096];
    int n = e->layout.n_params, rc;
    zt_tensor_view *v;
    if ((rc = zt_mkdirs(dir)) < 0)
        return rc;
    if (!(v = calloc((size_t)n, sizeof *v)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const zt_param_def *d = &e->layout.params[i];
        v[i] = (zt_tensor_view){d->name, ZT_F32, d->ndim, {0}, P[d->unit] + d->offset};
        for (int k = 0; k < d->ndim; k++)
            v[i].shape[k] = d->shape[k];
    }
    rc = zt_hf_write_weights(dir, v, n, max_shard_bytes);
    free(v);
    if (rc >= 0) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        rc = bert_config_save(&e->bc, path);
    }
    return rc;
}

int zt_engine_gather_params(zt_engine *e, float ***whole)
{
    float **tmp;
    int rc = gather_all(e, &tmp);
    if (rc < 0) {
        free_gathered(e, tmp);
        return rc;
    }
    *whole = tmp ? tmp : e->P;
    return 0;
}

void zt_engine_free_gathered(zt_engine *e, float **whole)
{
    if (whole != e->P)
        free_gathered(e, whole);
}

int zt_engine_save_model_ex(zt_engine *e, const char *dir, size_t max_shard_bytes)
{
    float **P = NULL;
    int64_t failed;
    int rc;
    if (!e || !dir)
        return zt_fail(ZT_E_INVAL, "zt_engine_save_model: NULL argument");
    rc = zt_engine_gather_params(e, &P);
    if (rc == 0 && e->comm.rank == 0)
        rc = zt_engine_write_model(e, dir, P, max_shard_bytes);
    if (P)
        zt_engine_free_gathered(e, P);
    failed = rc < 0;
    if (e->comm.size > 1 && zt_comm_sum_i64(&e->comm, &failed) < 0)
        return zt_engine_fail(e, ZT_E_MPI);
    if (failed && rc == 0)
        rc = zt_fail(ZT_E_MPI, "saving %s failed on rank 0", dir);
    return rc < 0 ? zt_engine_fail(e, rc) : 0;
}

int zt_engine_load_params(zt_engine *e, const char *dir)
{
    float **tmp = NULL;
    int rc, nu = e->layout.n_units;
    if (e->cfg.zero_stage < 3)
        return zt_load_hf_weights(dir, &e->layout, e->P, e->alias_seen, e->cfg.seed);
    if (!(tmp = calloc((size_t)nu, sizeof *tmp)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    rc = 0;
    for (int u = 0; u < nu && rc == 0; u++)
        if (!(tmp[u] = zt_mem_alloc(e->padded[u] * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_COMM)))
            rc = ZT_E_NOMEM;
    if (rc == 0)
        rc = zt_load_hf_weights(dir, &e->layout, tmp, e->alias_seen, e->cfg.seed);
    for (int u = 0; u < nu && rc == 0; u++) {
        size_t s = e->padded[u] / (size_t)e->comm.size;
        memcpy(e->Ps[u], tmp[u] + (size_t)e->comm.rank * s, s * sizeof(float));
        if (e->persist[u])
            memcpy(e->P[u], tmp[u], e->padded[u] * sizeof(float));
    }
    free_gathered(e, tmp);
    return rc;
}

int zt_engine_save_model(zt_engine *e, const char *dir)
{
    return zt_engine_save_model_ex(e, dir, (size_t)5000000000u);
}
