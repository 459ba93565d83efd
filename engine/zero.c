/* zero.c - the ZeRO partitioner: pads every unit for the world size, cuts it into pieces
 * (one collective each) and N shards, and runs what each stage does around the model:
 *
 *   stage | params      | grads                        | optimizer | after the step
 *   0     | whole       | whole, reduced once per step | whole     | grads all-gathered
 *   1     | whole       | whole, reduced once per step | shard     | params all-gathered
 *   2     | whole       | reduced unit by unit         | shard     | params all-gathered
 *   3     | shard       | reduced unit by unit         | shard     | (gathered before use)
 *
 * Every stage reduces a unit's gradient with the same reduce-scatters over the same pieces,
 * and every optimizer computes each element (AdamW, AdamW8bit's blocks) or each tensor's
 * sums (Adafactor: per shard, added across ranks in rank order) the same way whatever the
 * cut, so stages 0-3 at one world size give the same bits. */

#include "zero.h"
#include "../common/half.h"
#include "stores.h"
#include "../common/err.h"
#include "../common/faults.h"
#include "../memory/mem.h"
#include "../optimizer/adamw.h"
#include "../offload/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* ---- collectives over a unit's pieces ------------------------------------------------- */

/* One collective per piece of unit u, started back to back; *lo..*hi = their sequence
 * numbers. Reduce-scatter: full -> shard (fp32 buffers; with a 16-bit communication dtype
 * full is narrowed in place until the wait widens it back, comm.h). All-gather: shard ->
 * full, es bytes an element (4, or 2 for half-precision parameters; shard NULL: in place,
 * this rank's slices are already in full). */
static int start_pieces(zt_zero *z, int u, int gather, size_t es, const void *full_or_shard,
                        void *dst, int64_t *lo, int64_t *hi)
{
    zt_seg s;
    size_t N = (size_t)z->comm->size;
    const char *src = full_or_shard;
    char *d = dst;
    *lo = *hi = -1;
    for (int k = 0; zt_geometry_seg(z->geo, u, z->comm->rank, k, &s); k++) {
        int64_t h;
        size_t off0 = s.soff * N;
        const void *from = src ? src + s.soff * es : d + s.off * es;
        if (gather && es == sizeof(float))
            ZT_TRY(zt_comm_start_allgather(z->comm, from, (float *)(d + off0 * es), s.len * N,
                                           &h));
        else if (gather)
            ZT_TRY(zt_comm_start_allgather16(z->comm, from, (uint16_t *)(d + off0 * es),
                                             s.len * N, &h));
        else if (z->gr.cdt >= 0) /* (full is the caller's gradient buffer: writable) */
            ZT_TRY(zt_comm_start_reduce_scatter16(z->comm, z->gr.cdt,
                                                  (float *)(uintptr_t)src + off0,
                                                  (float *)dst + s.soff, s.len * N, &h));
        else
            ZT_TRY(zt_comm_start_reduce_scatter(z->comm, (const float *)src + off0,
                                                (float *)dst + s.soff, s.len * N, &h));
        *lo = *lo < 0 ? h : *lo;
        *hi = h;
    }
    return 0;
}

static int start_rs(zt_zero *z, int u, const float *full, float *shard, int64_t *lo,
                    int64_t *hi)
{
    return start_pieces(z, u, 0, sizeof(float), full, shard, lo, hi);
}

/* the gradients' all-gather (stage 0) */
static int start_ag(zt_zero *z, int u, const float *shard, float *full, int64_t *lo,
                    int64_t *hi)
{
    return start_pieces(z, u, 1, sizeof(float), shard, full, lo, hi);
}

/* the parameters' (their dtype) */
static int start_pag(zt_zero *z, int u, const void *shard, void *full, int64_t *lo,
                     int64_t *hi)
{
    return start_pieces(z, u, 1, z->pes, shard, full, lo, hi);
}

void zt_zero_pwiden(const zt_zero *z, float *dst, const void *src, size_t n)
{
    if (z->hdt < 0)
        memcpy(dst, src, n * sizeof(float));
    else
        zt_half_widen(z->hdt, dst, src, n);
}

void zt_zero_pnarrow(const zt_zero *z, void *dst, const float *src, size_t n)
{
    if (z->hdt < 0)
        memcpy(dst, src, n * sizeof(float));
    else
        zt_half_narrow(z->hdt, dst, src, n);
}

void *zt_zero_pat(const zt_zero *z, void *p, size_t off)
{
    return p ? (char *)p + off * z->pes : NULL;
}

/* ---- buffers ------------------------------------------------------------------------------ */

/* n floats, page-aligned (O_DIRECT), counted in the engine's account */
static float *floats_alloc(const zt_zero *z, size_t n, int category)
{
    return zt_mem_alloc_in(z->acct, n * sizeof(float), ZT_ALIGN_PAGE, category);
}

static void floats_free(const zt_zero *z, float *p, size_t n, int category)
{
    zt_mem_free_in(z->acct, p, n * sizeof(float), category);
}

/* n parameter elements (their dtype), page-aligned, counted as params */
static void *pbuf_alloc(const zt_zero *z, size_t n)
{
    return zt_mem_alloc_in(z->acct, n * z->pes, ZT_ALIGN_PAGE, ZT_MEM_PARAMS);
}

static void pbuf_free(const zt_zero *z, void *p, size_t n)
{
    zt_mem_free_in(z->acct, p, n * z->pes, ZT_MEM_PARAMS);
}

/* the backward gets lent fp32 buffers: stages 2-3, and every stage with 16-bit accumulation */
static int lends(const zt_zero *z)
{
    return z->cfg->zero_stage >= 2 || z->gr.gdt >= 0;
}

/* the two fp32 shard buffers: stages 2-3 (a later micro-batch's reduced shard); with 16-bit
 * accumulation also stage 1 (a shard widened for the update) and stage 0 with several ranks
 * (a reduced shard before it is rounded) */
static int rs_needed(const zt_zero *z)
{
    int st = z->cfg->zero_stage;
    return st >= 2 || (z->gr.gdt >= 0 && (st == 1 || z->comm->size > 1));
}

/* 16-bit accumulation: h = round(h + x) over n elements (x fp32) */
static void hacc(const zt_zero *z, uint16_t *h, const float *x, size_t n)
{
    float t[1024];
    for (size_t i = 0; i < n; i += 1024) {
        size_t k = n - i < 1024 ? n - i : 1024;
        zt_half_widen(z->gr.gdt, t, h + i, k);
        for (size_t j = 0; j < k; j++)
            t[j] = t[j] + x[i + j];
        zt_half_narrow(z->gr.gdt, h + i, t, k);
    }
}

/* a buffer per unit (whole or this rank's shard) of es-byte elements */
static void **alloc_units(const zt_zero *z, int category, int shard, size_t es)
{
    int n = z->L->n_units;
    void **b = calloc((size_t)n, sizeof *b);
    if (!b) {
        zt_fail(ZT_E_NOMEM, "out of memory");
        return NULL;
    }
    for (int u = 0; u < n; u++)
        if (!(b[u] = zt_mem_alloc_in(z->acct, zt_geometry_len(z->geo, u, shard) * es,
                                     ZT_ALIGN_PAGE, category))) {
            for (int v = 0; v < u; v++)
                zt_mem_free_in(z->acct, b[v], zt_geometry_len(z->geo, v, shard) * es, category);
            free(b);
            return NULL;
        }
    return b;
}

static void free_units(const zt_zero *z, void **b, int category, int shard, size_t es)
{
    if (!b)
        return;
    for (int u = 0; u < z->L->n_units; u++)
        zt_mem_free_in(z->acct, b[u], zt_geometry_len(z->geo, u, shard) * es, category);
    free(b);
}

static float **alloc_funits(const zt_zero *z, int category, int shard)
{
    return (float **)alloc_units(z, category, shard, sizeof(float));
}

static void free_funits(const zt_zero *z, float **b, int category, int shard)
{
    free_units(z, (void **)b, category, shard, sizeof(float));
}

static void offload_close(zt_zero *z);
static int gstore_open(zt_zero *z);
static void gstore_close(zt_zero *z);
static int lazy_upto(zt_zero *z, int u);
static int unit_groups(const zt_zero *z, int u, int *first);

/* ---- parameter offload (stage 3) ---------------------------------------------------------
 * Each unit's parameter shard is one blob of a store (RAM pool or swap file). A few shard
 * slots cache shards in RAM: the schedule reads the next units' shards ahead into free
 * slots, a gather copies its shard into the gather buffer and all-gathers in place, and the
 * update reads a shard, updates it and writes it back. Without parameter offload the shard
 * is simply z->ga.Ps[u]. */

/* floats of the largest shard */
static size_t shard_max(const zt_zero *z)
{
    return zt_geometry_max_shard(z->geo);
}

static int pslots_for(const zt_zero *z)
{
    return zt_fp_param_slots(z->cfg, shard_max(z));
}

static void pstore_close(zt_zero *z)
{
    zt_store_close(z->ps.store);
    z->ps.store = NULL;
    for (int i = 0; i < z->ps.n_slot; i++)
        pbuf_free(z, z->ps.slot[i].p, shard_max(z));
    z->ps.n_slot = 0;
}

static int pstore_open(zt_zero *z)
{
    size_t sm = shard_max(z), bs = z->cfg->offload_param_buffer_size;
    size_t mic = z->cfg->offload_param_max_in_cpu;
    if (bs && bs < sm)
        return zt_fail(ZT_E_CONFIG, "offload_param.buffer_size %zu elements is smaller than "
                       "the largest unit shard, %zu elements: each buffer holds one; give at "
                       "least %zu", bs, sm, sm);
    if (mic && mic < 3 * sm)
        return zt_fail(ZT_E_CONFIG, "offload_param.max_in_cpu %zu elements holds fewer than "
                       "the 3 shard buffers parameter offload needs (3 x %zu elements)", mic,
                       sm);
    ZT_TRY(zt_offload_store_open(z->cfg, z->nvme, z->comm->rank, z->cfg->offload_param,
                                 "params", z->acct, &z->ps.store));
    for (int u = 0; u < z->L->n_units; u++)
        if (zt_store_add(z->ps.store, zt_geometry_len(z->geo, u, 1) * z->pes, ZT_MEM_PARAMS) != u)
            return zt_fail(ZT_E_NOMEM, "parameter offload: cannot declare unit %d", u);
    ZT_TRY(zt_store_reserve(z->ps.store));
    for (; z->ps.n_slot < pslots_for(z); z->ps.n_slot++) {
        zt_pslot *sl = &z->ps.slot[z->ps.n_slot];
        sl->unit = -1;
        sl->pinned = sl->loading = 0;
        if (!(sl->p = pbuf_alloc(z, shard_max(z))))
            return zt_fail(ZT_E_NOMEM, "parameter offload: shard buffers: out of memory");
    }
    return 0;
}

static int pslot_find(const zt_zero *z, int u)
{
    for (int i = 0; i < z->ps.n_slot; i++)
        if (z->ps.slot[i].unit == u)
            return i;
    return -1;
}

/* A slot to load into: a free one, else the least recently used unpinned one that was
 * used since it was loaded (read ahead and not yet used only when take_ahead: a read-ahead
 * is what the next uses need). Its unit's transfers finish first. -1: none; an error from
 * those transfers is returned as is. */
static int pslot_take(zt_zero *z, int take_ahead)
{
    int best = -1;
    for (int i = 0; i < z->ps.n_slot; i++) {
        zt_pslot *sl = &z->ps.slot[i];
        if (sl->pinned || (sl->ahead && !take_ahead))
            continue;
        if (sl->unit < 0)
            return i;
        if (best < 0 || sl->used < z->ps.slot[best].used)
            best = i;
    }
    if (best >= 0) {
        int rc = zt_store_wait(z->ps.store, z->ps.slot[best].unit);
        if (rc < 0)
            return rc;
        z->ps.slot[best].unit = -1;
        z->ps.slot[best].loading = z->ps.slot[best].ahead = 0;
    }
    return best;
}

/* read unit u's shard ahead (no-op when cached or when every slot is pinned) */
static int pshard_prefetch(zt_zero *z, int u)
{
    if (!z->ps.store || pslot_find(z, u) >= 0)
        return 0;
    int k = pslot_take(z, 0); /* never at the cost of another read-ahead */
    if (k < -1)
        return k;
    if (k < 0)
        return 0;
    ZT_TRY(zt_store_prefetch(z->ps.store, u, z->ps.slot[k].p));
    z->ps.slot[k].unit = u;
    z->ps.slot[k].loading = z->ps.slot[k].ahead = 1;
    z->ps.slot[k].used = ++z->ps.clock;
    return 0;
}

/* unit u's shard in RAM, pinned until pshard_done */
static int pshard_get(zt_zero *z, int u, void **out)
{
    if (!z->ps.store) {
        *out = z->ga.Ps[u];
        return 0;
    }
    int k = pslot_find(z, u);
    if (k < 0) {
        if ((k = pslot_take(z, 1)) < 0)
            return k < -1 ? k : zt_fail(ZT_E_NOMEM, "parameter offload: every shard buffer "
                                        "is in use (raise offload_param.buffer_count)");
        z->ps.slot[k].unit = u;
        z->ps.slot[k].loading = 1;
    }
    zt_pslot *sl = &z->ps.slot[k];
    if (sl->loading) {
        ZT_TRY(zt_store_get(z->ps.store, u, sl->p));
        sl->loading = 0;
    }
    sl->ahead = 0;
    sl->pinned = 1;
    sl->used = ++z->ps.clock;
    *out = sl->p;
    return 0;
}

/* unpin; dirty: the shard changed, write it back (asynchronously) */
static int pshard_done(zt_zero *z, int u, int dirty)
{
    if (!z->ps.store)
        return 0;
    int k = pslot_find(z, u);
    if (k < 0)
        return zt_fail(ZT_E_INVAL, "parameter offload: unit %d is not loaded", u);
    zt_pslot *sl = &z->ps.slot[k];
    sl->pinned = 0;
    if (!dirty)
        return 0;
    return zt_store_put(z->ps.store, u, sl->p);
}

/* a new shard for unit u (initialisation, loading; whole in the parameters' dtype): written
 * to the store */
static int pshard_set(zt_zero *z, int u, const void *whole)
{
    void *p;
    if (!z->ps.store) {
        zt_geometry_take(z->geo, u, z->comm->rank, whole, z->ga.Ps[u], z->pes);
        return 0;
    }
    int k = pslot_find(z, u);
    if (k < 0) {
        if ((k = pslot_take(z, 1)) < 0)
            return k < -1 ? k : zt_fail(ZT_E_NOMEM, "parameter offload: no buffer");
        z->ps.slot[k].unit = u;
    }
    ZT_TRY(zt_store_wait(z->ps.store, u)); /* a read into the slot lands first */
    z->ps.slot[k].loading = z->ps.slot[k].ahead = 0; /* the old contents are replaced */
    p = z->ps.slot[k].p;
    zt_geometry_take(z->geo, u, z->comm->rank, whole, p, z->pes);
    z->ps.slot[k].pinned = 1;
    return pshard_done(z, u, 1);
}

int zt_zero_shard_to_whole(zt_zero *z, int u, void *whole)
{
    void *p;
    ZT_TRY(pshard_get(z, u, &p));
    zt_geometry_put(z->geo, u, z->comm->rank, p, whole, z->pes);
    return pshard_done(z, u, 0);
}

int zt_zero_master_to_whole(zt_zero *z, int u, float *whole)
{
    int st = z->cfg->zero_stage, first, ng;
    if (!(z->os->lay & ZT_OST_MASTER) || z->os->master_fresh || !z->os->state_ready) {
        /* (the master is the parameters, widened) */
        if (st < 3) {
            zt_zero_pwiden(z, whole, z->P[u], z->geo->padded[u]);
            return 0;
        }
        size_t len = zt_geometry_len(z->geo, u, 1);
        float *sh = floats_alloc(z, len ? len : 1, ZT_MEM_OTHER);
        void *p = NULL;
        int rc = sh ? pshard_get(z, u, &p) : zt_fail(ZT_E_NOMEM, "out of memory");
        if (rc == 0) {
            zt_zero_pwiden(z, sh, p, len);
            zt_geometry_put(z->geo, u, z->comm->rank, sh, whole, sizeof(float));
            rc = pshard_done(z, u, 0);
        }
        if (sh)
            floats_free(z, sh, len ? len : 1, ZT_MEM_OTHER);
        return rc < 0 ? rc : 1;
    }
    if (!z->oo.store) {
        for (int k = 0; k < z->os->n_parts; k++) {
            zt_spart *p = &z->os->parts[u * z->os->n_parts + k];
            zt_ost_view v;
            zt_ost_view_of(z->os->opt, z->os->lay, p->state, 0, p->len, 0, p->n_compact, &v);
            zt_geometry_put(z->geo, u, p->rank, v.w, whole, sizeof(float));
        }
        return z->os->n_parts == 1 && z->comm->size > 1; /* (stage 0: every rank's part) */
    }
    /* offloaded: this rank's sub-groups of the unit, one after another */
    zt_spart *p = zt_ost_part(z->os, u, z->comm->rank);
    float *sh = floats_alloc(z, p->len ? p->len : 1, ZT_MEM_OTHER);
    int rc = sh ? zt_zero_state_stream_begin(z) : zt_fail(ZT_E_NOMEM, "out of memory");
    ng = unit_groups(z, u, &first);
    for (int k = 0; k < ng && rc == 0; k++) {
        const zt_ogroup *g = &z->oo.group[first + k];
        zt_ost_view v;
        if ((rc = zt_store_get(z->oo.store, g->blob, z->oo.work[0])) < 0)
            break;
        zt_ost_view_of(z->os->opt, z->os->lay, z->oo.work[0], g->c0, g->c1 - g->c0, g->f0, g->nc,
                       &v);
        memcpy(sh + g->c0, v.w, (g->c1 - g->c0) * sizeof(float));
    }
    z->oo.cached = -1; /* (work[0] holds another group now) */
    if (rc == 0)
        zt_geometry_put(z->geo, u, z->comm->rank, sh, whole, sizeof(float));
    if (sh)
        floats_free(z, sh, p->len ? p->len : 1, ZT_MEM_OTHER);
    return rc < 0 ? rc : 1;
}

static int64_t *pending(int n)
{
    int64_t *p = malloc(sizeof *p * (size_t)n);
    for (int i = 0; p && i < n; i++)
        p[i] = -1;
    return p;
}

int zt_zero_setup(zt_zero *z, zt_config *cfg, zt_comm *comm, const zt_layout *L,
                  const zt_geometry *geo, zt_ostate *os, const zt_units *un, const char *nvme,
                  int whole_grad, zt_mem_account *acct)
{
    z->acct = acct;
    z->gr.whole_grad = whole_grad;
    z->cfg = cfg;
    z->comm = comm;
    z->L = L;
    z->geo = geo;
    z->os = os;
    z->un = un;
    z->nvme = nvme;
    z->hdt = zt_fp_half(cfg);
    z->pes = z->hdt < 0 ? sizeof(float) : sizeof(uint16_t);
    int nu = L->n_units, st = cfg->zero_stage;
    size_t N = (size_t)comm->size;
    if (!(z->gr.rpend_lo = pending(nu)) || !(z->gr.rpend_hi = pending(nu)) ||
        !(z->gr.rpend_tmp = calloc((size_t)nu, sizeof *z->gr.rpend_tmp)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++)
        z->gr.rpend_tmp[u] = -1;
    z->gr.scratch_unit[0] = z->gr.scratch_unit[1] = -1;
    z->ga.sched.acquired = -1;
    /* tests only: this rank skips that unit's reductions */
    z->gr.skip_unit = zt_faults()->skip_rank == z->comm->rank ? zt_faults()->skip_unit : -1;
    /* on unless asked off: unlike DeepSpeed's default (stage 3 only), since overlapping
     * never changes a result here */
    z->gr.overlap = z->cfg->overlap_comm != 0;
    z->gr.accum_first = 1;
    if (st >= 3) {
        if (!(z->P = calloc((size_t)nu, sizeof *z->P)) ||
            (!z->cfg->offload_param && !(z->ga.Ps = alloc_units(z, ZT_MEM_PARAMS, 1, z->pes))) ||
            !(z->ga.sched.refs = calloc((size_t)nu, sizeof *z->ga.sched.refs)) ||
            !(z->ga.gpend_lo = pending(nu)) || !(z->ga.gpend_hi = pending(nu)) ||
            !(z->ga.persist = calloc((size_t)nu, 1)))
            return zt_fail(ZT_E_NOMEM, "out of memory");
        if (z->cfg->offload_param)
            ZT_TRY(pstore_open(z));
        for (int u = 0; u < nu; u++) {
            z->ga.persist[u] = z->geo->padded[u] < z->cfg->persist_threshold;
            z->ga.any_persist |= z->ga.persist[u];
            if (z->ga.persist[u] && !(z->P[u] = pbuf_alloc(z, z->geo->padded[u])))
                return ZT_E_NOMEM;
        }
    } else if (!(z->P = alloc_units(z, ZT_MEM_PARAMS, 0, z->pes))) {
        return ZT_E_NOMEM;
    }
    z->gr.gdt = zt_fp_grad_half(cfg);
    z->gr.cdt = zt_fp_comm_half(cfg);
    z->gr.ges = z->gr.gdt < 0 ? sizeof(float) : sizeof(uint16_t);
    if (z->cfg->inference) { /* forward only: no gradient buffer of any kind */
        z->cfg->offload_gradients = -1;
        z->gr.gdt = z->gr.cdt = -1;
        return (z->gr.G = calloc((size_t)nu, sizeof *z->gr.G)) ? 0
               : zt_fail(ZT_E_NOMEM, "out of memory");
    }
    if (!lends(z) && !(z->gr.G = alloc_funits(z, ZT_MEM_GRADS, 0)))
        return ZT_E_NOMEM;
    if (st < 2 && z->gr.gdt >= 0 &&
        !(z->gr.Gh = (uint16_t **)alloc_units(z, ZT_MEM_GRADS, 0, sizeof(uint16_t))))
        return ZT_E_NOMEM;
    if (lends(z)) {
        /* the unit a tied unit's backward adds into (z->gr.whole_grad) keeps a whole gradient
         * through the backward pass; every other unit borrows one of two scratch buffers
         * (none when the whole one is the only unit: m = 0) */
        int w = z->gr.whole_grad;
        size_t m = zt_geometry_max(z->geo, w), ms = zt_geometry_max(z->geo, -1) / N;
        if (!(z->gr.G = calloc((size_t)nu, sizeof *z->gr.G)) ||
            (w >= 0 && !(z->gr.G[w] = floats_alloc(z, z->geo->padded[w], ZT_MEM_GRADS))))
            return ZT_E_NOMEM;
        for (int i = 0; i < 2; i++)
            if ((m && !(z->gr.scratch[i] = floats_alloc(z, m, ZT_MEM_GRADS))) ||
                (rs_needed(z) && !(z->gr.rs_tmp[i] = floats_alloc(z, ms, ZT_MEM_COMM))))
                return ZT_E_NOMEM;
    }
    if (z->cfg->offload_gradients > 0 && (st < 2 || !z->cfg->offload_optimizer))
        return zt_fail(ZT_E_CONFIG, "zerotrain.offload_gradients: the gradient shards go where "
                       "the optimizer state goes, which needs offload_optimizer and ZeRO stage "
                       "2 or 3 (here stage %d, optimizer %s)", st,
                       z->cfg->offload_optimizer ? "offloaded" : "in RAM");
    z->cfg->offload_gradients = st >= 2 && z->cfg->offload_optimizer &&
                               z->cfg->offload_gradients >= 0 ? 1 : -1;
    if (z->cfg->offload_gradients > 0)
        return gstore_open(z);
    if ((N > 1 || st >= 2) && z->gr.gdt >= 0)
        return (z->gr.Hs = (uint16_t **)alloc_units(z, ZT_MEM_GRADS, 1, sizeof(uint16_t)))
                   ? 0 : ZT_E_NOMEM;
    if ((N > 1 || st >= 2) && !(z->gr.Gs = alloc_funits(z, ZT_MEM_GRADS, 1)))
        return ZT_E_NOMEM;
    return 0;
}

void zt_zero_teardown(zt_zero *z)
{
    if (!z->geo) /* (setup did not run) */
        return;
    int st = z->cfg->zero_stage;
    if (z->comm->open > 0)
        zt_comm_wait_all(z->comm);
    gstore_close(z); /* (its transfers read and fill rs_tmp: closed first) */
    if (st >= 3) {
        for (int u = 0; z->P && u < z->L->n_units; u++)
            if (z->ga.persist && z->ga.persist[u])
                pbuf_free(z, z->P[u], z->geo->padded[u]);
        free(z->P);
        for (int i = 0; i < z->ga.n_pool; i++)
            pbuf_free(z, z->ga.pool[i].p, z->ga.pool[i].cap);
        free_units(z, z->ga.Ps, ZT_MEM_PARAMS, 1, z->pes);
        z->ga.Ps = NULL;
        pstore_close(z);
        free(z->ga.sched.refs);
        free(z->ga.gpend_lo);
        free(z->ga.gpend_hi);
        free(z->ga.persist);
    } else {
        free_units(z, z->P, ZT_MEM_PARAMS, 0, z->pes);
    }
    if (lends(z) && z->gr.G) {
        int w = z->gr.whole_grad;
        size_t m = zt_geometry_max(z->geo, w), ms = zt_geometry_max(z->geo, -1) /
                                                      (size_t)z->comm->size;
        if (z->gr.G && w >= 0)
            floats_free(z, z->gr.G[w], z->geo->padded[w], ZT_MEM_GRADS);
        free(z->gr.G);
        for (int i = 0; i < 2; i++) {
            floats_free(z, z->gr.scratch[i], m, ZT_MEM_GRADS);
            floats_free(z, z->gr.rs_tmp[i], ms, ZT_MEM_COMM);
        }
    } else {
        free_funits(z, z->gr.G, ZT_MEM_GRADS, 0);
    }
    free_funits(z, z->gr.Gs, ZT_MEM_GRADS, 1);
    free_units(z, (void **)z->gr.Gh, ZT_MEM_GRADS, 0, sizeof(uint16_t));
    free_units(z, (void **)z->gr.Hs, ZT_MEM_GRADS, 1, sizeof(uint16_t));
    offload_close(z);
    free(z->gr.rpend_lo);
    free(z->gr.rpend_hi);
    free(z->gr.rpend_tmp);
    z->geo = NULL;
}

/* ---- optimizer offload ------------------------------------------------------------------
 * This rank's shard of each unit is cut into sub-groups of at most sub_group_size positions
 * (a multiple of 1024, so the 8-bit blocks stay whole; Adafactor: whole shards, since its
 * update reads a tensor's state twice); each sub-group's state (ostate.h's layout) is one
 * blob of a store in a RAM pool or a swap file. The step walks the sub-groups in order with
 * n_owork working buffers: sub-group g is updated in buffer g % n while the next n - 1 are
 * read ahead and the previous ones are written back. AdamW and AdamW8bit update each element
 * (each 8-bit block) on its own and Adafactor takes whole shards, so the cut changes no
 * result. */

static size_t group_floats(const zt_zero *z)
{
    return zt_fp_group_floats(z->cfg, shard_max(z));
}

static int count_groups(const zt_zero *z)
{
    size_t g = group_floats(z);
    int n = 0;
    for (int u = 0; u < z->L->n_units; u++)
        n += (int)((zt_geometry_len(z->geo, u, 1) + g - 1) / g);
    return n;
}

static int offload_nbuf(const zt_zero *z)
{
    return zt_fp_offload_buffers(z->cfg, count_groups(z));
}

/* bytes of the largest sub-group's state (before setup: the layout's bound) */
static size_t group_bytes_max(const zt_zero *z)
{
    size_t m = 0;
    for (int k = 0; k < z->oo.n_group; k++)
        m = z->oo.group[k].bytes > m ? z->oo.group[k].bytes : m;
    if (!z->oo.n_group) {
        size_t g = group_floats(z);
        m = zt_ost_bytes(z->cfg->optimizer, zt_ost_layout(z->cfg), g, z->cfg->optimizer ? g : 0);
    }
    return m;
}

size_t zt_zero_offload_bytes(const zt_zero *z)
{
    return z->cfg->offload_optimizer ? (size_t)offload_nbuf(z) * group_bytes_max(z) : 0;
}

static void offload_close(zt_zero *z)
{
    zt_store_close(z->oo.store);
    z->oo.store = NULL;
    for (int i = 0; i < z->oo.n_work; i++)
        zt_mem_free_in(z->acct, z->oo.work[i], z->oo.work_bytes, ZT_MEM_OPTIMIZER);
    z->oo.n_work = 0;
    free(z->oo.group);
    z->oo.group = NULL;
    z->oo.n_group = 0;
    z->oo.cached = -1;
}

static int offload_open(zt_zero *z)
{
    int nu = z->L->n_units;
    ZT_TRY(zt_offload_store_open(z->cfg, z->nvme, z->comm->rank, z->cfg->offload_optimizer,
                                 "optimizer", z->acct, &z->oo.store));
    size_t gf = group_floats(z);
    int ng = count_groups(z), n = offload_nbuf(z);
    z->oo.cached = -1;
    if (!(z->oo.group = calloc((size_t)ng, sizeof *z->oo.group)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++) {
        const zt_spart *p = zt_ost_part(z->os, u, z->comm->rank);
        for (size_t c0 = 0; c0 < p->len; c0 += gf) {
            zt_ogroup *g = &z->oo.group[z->oo.n_group++];
            g->unit = u;
            g->c0 = c0;
            g->c1 = c0 + gf < p->len ? c0 + gf : p->len;
            g->f0 = zt_ost_compact_before(p, c0);
            g->nc = zt_ost_compact_before(p, g->c1) - g->f0;
            g->bytes = zt_ost_bytes(z->os->opt, z->os->lay, g->c1 - c0, g->nc);
            if ((g->blob = zt_store_add(z->oo.store, g->bytes, ZT_MEM_OPTIMIZER)) < 0)
                return g->blob;
        }
    }
    ZT_TRY(zt_store_reserve(z->oo.store));
    z->oo.work_bytes = group_bytes_max(z);
    for (; z->oo.n_work < n; z->oo.n_work++)
        if (!(z->oo.work[z->oo.n_work] = zt_mem_alloc_in(z->acct, z->oo.work_bytes, ZT_ALIGN_PAGE,
                                                  ZT_MEM_OPTIMIZER)))
            return zt_fail(ZT_E_NOMEM, "optimizer offload: %zu bytes of working buffers: out "
                           "of memory", z->oo.work_bytes * (size_t)n);
    for (int k = 0; k < z->oo.n_group; k++) { /* the fresh state, written in one pass */
        const zt_ogroup *g = &z->oo.group[k];
        uint8_t *w = z->oo.work[k % n];
        if (k >= n)
            ZT_TRY(zt_store_wait(z->oo.store, z->oo.group[k - n].blob));
        zt_ost_init(z->os, w, g->c1 - g->c0, g->nc);
        ZT_TRY(zt_store_put(z->oo.store, g->blob, w));
    }
    return zt_store_sync(z->oo.store);
}

/* the sub-groups of unit u: [first, first + count) of z->oo.group (in unit order) */
static int unit_groups(const zt_zero *z, int u, int *first)
{
    int g = 0;
    while (g < z->oo.n_group && z->oo.group[g].unit < u)
        g++;
    *first = g;
    while (g < z->oo.n_group && z->oo.group[g].unit == u)
        g++;
    return g - *first;
}

int zt_zero_state_pieces(const zt_zero *z, int u)
{
    int first;
    return z->oo.store ? unit_groups(z, u, &first) : 1;
}

int zt_zero_state_piece(zt_zero *z, int u, int r, int sec, int k, const void **data,
                        size_t *bytes)
{
    const zt_ost_sec *sd;
    int ns = zt_ost_sections(z->os->opt, z->os->lay, &sd), first;
    if (sec < 0 || sec >= ns)
        return zt_fail(ZT_E_INVAL, "optimizer state: no section %d", sec);
    if (!z->oo.store) {
        const zt_spart *p = zt_ost_part(z->os, u, r);
        if (k != 0 || !p->state)
            return zt_fail(ZT_E_INVAL, "optimizer state: no piece %d of unit %d", k, u);
        *data = p->state + zt_ost_sec_offset(z->os->opt, z->os->lay, sec, p->len, p->n_compact);
        *bytes = zt_ost_sec_elems(&sd[sec], p->len, p->n_compact) * zt_dtype_size(sd[sec].dtype);
        return 0;
    }
    if (k < 0 || k >= unit_groups(z, u, &first))
        return zt_fail(ZT_E_INVAL, "optimizer offload: no piece %d of unit %d", k, u);
    const zt_ogroup *g = &z->oo.group[first + k];
    size_t n = g->c1 - g->c0;
    if (z->oo.cached != first + k) { /* the sections of one sub-group come one after another */
        z->oo.cached = -1;
        ZT_TRY(zt_store_get(z->oo.store, g->blob, z->oo.work[0]));
        z->oo.cached = first + k;
    }
    *data = z->oo.work[0] + zt_ost_sec_offset(z->os->opt, z->os->lay, sec, n, g->nc);
    *bytes = zt_ost_sec_elems(&sd[sec], n, g->nc) * zt_dtype_size(sd[sec].dtype);
    return 0;
}

int zt_zero_state_stream_begin(zt_zero *z)
{
    /* the read-ahead into the working buffers lands first; the next update starts its own */
    z->oo.cached = -1;
    return z->oo.store ? zt_store_sync(z->oo.store) : 0;
}

int zt_zero_state_fill(zt_zero *z, zt_state_fill_fn fill, void *arg)
{
    z->oo.cached = -1;
    if (!z->oo.store) {
        for (int u = 0; u < z->L->n_units; u++)
            for (int k = 0; k < z->os->n_parts; k++) {
                const zt_spart *p = &z->os->parts[u * z->os->n_parts + k];
                ZT_TRY(fill(u, p, 0, p->len, 0, p->n_compact, p->state, arg));
            }
        return 0;
    }
    ZT_TRY(zt_store_sync(z->oo.store));
    for (int k = 0; k < z->oo.n_group; k++) { /* one working buffer: fill, write, wait */
        const zt_ogroup *g = &z->oo.group[k];
        ZT_TRY(fill(g->unit, zt_ost_part(z->os, g->unit, z->comm->rank), g->c0, g->c1, g->f0, g->nc,
                    z->oo.work[0], arg));
        ZT_TRY(zt_store_put(z->oo.store, g->blob, z->oo.work[0]));
        ZT_TRY(zt_store_wait(z->oo.store, g->blob));
    }
    return 0;
}

int zt_zero_ensure_moments(zt_zero *z)
{
    int rc = zt_ost_alloc_replicated(z->os);
    if (rc < 0)
        return rc;
    if (z->cfg->offload_optimizer != ZT_OFFLOAD_NONE) {
        if (z->oo.store)
            return 0;
        if ((rc = offload_open(z)) < 0) {
            offload_close(z);
            return rc;
        }
        z->os->state_ready = 1;
        return 0;
    }
    if (z->os->state_ready)
        return 0;
    ZT_TRY(zt_ost_alloc_parts(z->os));
    z->os->state_ready = 1;
    return 0;
}

/* ---- stage 3: gathering ------------------------------------------------------------------
 * A gathered unit lives in a pool buffer (the smallest free one that fits; a new one while
 * fewer than ZT_POOL_MAX exist). refs[u] counts the acquired uses that need unit u: a unit
 * shared by consecutive uses (the MLM head and the embeddings between the forward and the
 * backward pass) is gathered once for both. */

static void *pool_get(zt_zero *z, int u)
{
    int best = -1;
    for (int i = 0; i < z->ga.n_pool; i++)
        if (z->ga.pool[i].unit < 0 && z->ga.pool[i].cap >= z->geo->padded[u] &&
            (best < 0 || z->ga.pool[i].cap < z->ga.pool[best].cap))
            best = i;
    if (best < 0) {
        if (z->ga.n_pool == ZT_POOL_MAX) {
            zt_fail(ZT_E_NOMEM, "stage 3: more than %d units gathered at once", ZT_POOL_MAX);
            return NULL;
        }
        best = z->ga.n_pool;
        if (!(z->ga.pool[best].p = pbuf_alloc(z, z->geo->padded[u])))
            return NULL;
        z->ga.pool[best].cap = z->geo->padded[u];
        z->ga.n_pool++;
    }
    z->ga.pool[best].unit = u;
    return z->ga.pool[best].p;
}

static void pool_put(zt_zero *z, int u)
{
    for (int i = 0; i < z->ga.n_pool; i++)
        if (z->ga.pool[i].unit == u)
            z->ga.pool[i].unit = -1;
}

/* The schedule's state: z->ga.sched for the real pass; a private copy with dry = 1 replays
 * the same decisions without buffers or MPI to predict the traffic. A use is one acquire
 * of one unit (units.c). */
static size_t use_need(const zt_zero *z, const zt_sched *S, int k)
{
    int u = S->uses[k].unit;
    return !z->ga.persist[u] && S->refs[u] == 0 ? z->geo->padded[u] : 0;
}

static int acquire(zt_zero *z, zt_sched *S, int k)
{
    int u = S->uses[k].unit;
    S->acquired = k;
    if (z->ga.persist[u] || S->refs[u]++ > 0)
        return 0;
    S->live += z->geo->padded[u];
    S->units_live++;
    S->live_peak = S->live > S->live_peak ? S->live : S->live_peak;
    S->moved += (double)z->geo->padded[u];
    if (S->dry)
        return 0;
    ZT_TRY(lazy_upto(z, u)); /* the previous step's update of u, deferred to here */
    if (!(z->P[u] = pool_get(z, u)))
        return ZT_E_NOMEM;
    if (z->ps.store) { /* this rank's slices into the gather buffer, then in place */
        ZT_TRY(zt_zero_shard_to_whole(z, u, z->P[u]));
        return start_pag(z, u, NULL, z->P[u], &z->ga.gpend_lo[u], &z->ga.gpend_hi[u]);
    }
    return start_pag(z, u, z->ga.Ps[u], z->P[u], &z->ga.gpend_lo[u], &z->ga.gpend_hi[u]);
}

static void release(zt_zero *z, zt_sched *S, int k)
{
    int u = S->uses[k].unit;
    if (z->ga.persist[u] || --S->refs[u] > 0)
        return;
    S->live -= z->geo->padded[u];
    S->units_live--;
    if (S->dry)
        return;
    /* (a gather still in flight, e.g. prefetched for a use an error skipped, ends first) */
    if (z->ga.gpend_lo[u] >= 0 &&
        zt_comm_wait_range(z->comm, z->ga.gpend_lo[u], z->ga.gpend_hi[u]) < 0)
        zt_log(ZT_LOG_WARN, "stage 3: the gather of unit %d failed: %s", u, zt_last_error());
    z->ga.gpend_lo[u] = z->ga.gpend_hi[u] = -1;
    pool_put(z, u);
    z->P[u] = NULL;
}

/* Use k: acquire it (and everything before it) and the uses after it whose units are
 * gathered already, let go of the uses in rel (released by the trainer since the last
 * acquire: a unit the next use needs again stays), then prefetch: acquire the next uses
 * while the floats fetched ahead fit the prefetch budget, the floats gathered at once fit
 * max_live and a pool buffer is left besides two for the trainer's own acquires. */
static int sched_enter(zt_zero *z, zt_sched *S, int k, const int *rel, int nrel)
{
    size_t ahead = 0, budget = z->cfg->prefetch_size, cap = z->cfg->max_live;
    while (S->acquired < k)
        ZT_TRY(acquire(z, S, S->acquired + 1));
    while (S->acquired + 1 < S->n_uses && use_need(z, S, S->acquired + 1) == 0)
        ZT_TRY(acquire(z, S, S->acquired + 1));
    for (int i = 0; i < nrel; i++)
        release(z, S, rel[i]);
    for (int j = k + 1; j <= S->acquired; j++)
        ahead += z->ga.persist[S->uses[j].unit] ? 0 : z->geo->padded[S->uses[j].unit];
    while (S->acquired + 1 < S->n_uses) {
        size_t need = use_need(z, S, S->acquired + 1);
        if (need > 0 && (ahead + need > budget || (cap && S->live + need > cap) ||
                         S->units_live + 2 >= ZT_POOL_MAX))
            break;
        ZT_TRY(acquire(z, S, S->acquired + 1));
        ahead += need;
    }
    /* parameter offload: the shards of the uses after the acquired ones, read ahead */
    for (int j = S->acquired + 1, n = 0; !S->dry && z->ps.store && j < S->n_uses &&
                                         n < z->ps.n_slot - 1; j++, n++)
        if (!z->ga.persist[S->uses[j].unit] && S->refs[S->uses[j].unit] == 0)
            ZT_TRY(pshard_prefetch(z, S->uses[j].unit));
    return 0;
}

void zt_zero_pass_begin(zt_zero *z)
{
    if (z->cfg->zero_stage < 3)
        return;
    zt_comm_wait_all(z->comm);
    for (int u = 0; u < z->L->n_units; u++) { /* anything left gathered */
        z->ga.gpend_lo[u] = z->ga.gpend_hi[u] = -1;
        if (z->ga.persist[u] || z->ga.sched.refs[u] == 0)
            continue;
        z->ga.sched.refs[u] = 0;
        pool_put(z, u);
        z->P[u] = NULL;
    }
    z->ga.sched.live = 0;
    z->ga.sched.units_live = 0;
    z->ga.sched.acquired = -1;
}

int zt_zero_enter(zt_zero *z, int k, const int *rel, int nrel)
{
    if (z->cfg->zero_stage < 3)
        return 0;
    z->ga.sched.uses = z->un->uses; /* (the pass's schedule may have grown) */
    z->ga.sched.n_uses = z->un->n_uses;
    ZT_TRY(sched_enter(z, &z->ga.sched, k, rel, nrel));
    int u = z->un->uses[k].unit;
    if (!z->ga.persist[u]) {
        ZT_TRY(zt_comm_wait_range(z->comm, z->ga.gpend_lo[u], z->ga.gpend_hi[u]));
        z->ga.gpend_lo[u] = z->ga.gpend_hi[u] = -1;
    }
    return 0;
}

/* ---- gradient offload ------------------------------------------------------------------
 * Stages 2-3 with the optimizer state offloaded: this rank's reduced gradient shard of unit
 * u is blob u of a store on the optimizer's device. Unit u's reduce-scatter lands in
 * rs_tmp[u & 1]; when it completes (a later micro-batch: plus the shard so far, read ahead
 * into gacc while the unit's backward ran) the buffer is written back and, in the step's
 * last micro-batch, its sum of squares kept for the norm. The update reads shard u into
 * rs_tmp[u & 1] again and the next one ahead; the last units reduced are still there.
 * Same sums in the same order: bit-identical to shards in RAM. */

static void gstore_close(zt_zero *z)
{
    size_t ms = shard_max(z) * z->gr.ges;
    zt_store_close(z->gr.store);
    z->gr.store = NULL;
    for (int i = 0; i < 2; i++) {
        zt_mem_free_in(z->acct, z->gr.acc[i], ms, ZT_MEM_GRADS);
        zt_mem_free_in(z->acct, z->gr.hstage[i], shard_max(z) * 2, ZT_MEM_GRADS);
        z->gr.acc[i] = NULL;
        z->gr.hstage[i] = NULL;
    }
    free(z->gr.sumsq);
    z->gr.sumsq = NULL;
}

static int gstore_open(zt_zero *z)
{
    int nu = z->L->n_units;
    ZT_TRY(zt_offload_store_open(z->cfg, z->nvme, z->comm->rank, z->cfg->offload_optimizer,
                                 "grads", z->acct, &z->gr.store));
    for (int u = 0; u < nu; u++)
        if (zt_store_add(z->gr.store, zt_geometry_len(z->geo, u, 1) * z->gr.ges,
                         ZT_MEM_GRADS) != u)
            return zt_fail(ZT_E_NOMEM, "gradient offload: cannot declare unit %d", u);
    ZT_TRY(zt_store_reserve(z->gr.store));
    if (!(z->gr.sumsq = malloc((size_t)nu * sizeof *z->gr.sumsq)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++)
        z->gr.sumsq[u] = -1.0;
    z->gr.buf[0] = z->gr.buf[1] = -1;
    for (int i = 0; z->gr.gdt >= 0 && i < 2; i++)
        if (!(z->gr.hstage[i] = zt_mem_alloc_in(z->acct, shard_max(z) * 2, ZT_ALIGN_PAGE,
                                                ZT_MEM_GRADS)))
            return zt_fail(ZT_E_NOMEM, "gradient offload: staging buffers: out of memory");
    return 0;
}

/* rs_tmp[i] gets new contents: the put reading it finishes first */
static int gbuf_take(zt_zero *z, int i)
{
    int u = z->gr.buf[i];
    z->gr.buf[i] = -1;
    z->gr.buf_loading[i] = 0;
    return u >= 0 ? zt_store_wait(z->gr.store, u) : 0;
}

/* shard u into rs_tmp[u & 1] (16-bit: read into hstage[u & 1], widened into rs_tmp when
 * waited for): started (wait = 0) or there on return */
static int gbuf_read(zt_zero *z, int u, int wait)
{
    int i = u & 1, h = z->gr.gdt >= 0;
    void *dst = h ? (void *)z->gr.hstage[i] : (void *)z->gr.rs_tmp[i];
    if (z->gr.buf[i] != u) {
        ZT_TRY(gbuf_take(z, i));
        ZT_TRY(zt_store_prefetch(z->gr.store, u, dst));
        z->gr.buf[i] = u;
        z->gr.buf_loading[i] = 1;
    }
    if (wait && z->gr.buf_loading[i]) {
        ZT_TRY(zt_store_get(z->gr.store, u, dst));
        if (h)
            zt_half_widen(z->gr.gdt, z->gr.rs_tmp[i], z->gr.hstage[i],
                          zt_geometry_len(z->geo, u, 1));
        z->gr.buf_loading[i] = 0;
    }
    return 0;
}

/* a later micro-batch adds to the shards so far: their buffers, allocated on first use */
static int gacc_alloc(zt_zero *z)
{
    for (int i = 0; i < 2; i++)
        if (!z->gr.acc[i] && !(z->gr.acc[i] = zt_mem_alloc_in(z->acct, shard_max(z) * z->gr.ges,
                                                              ZT_ALIGN_PAGE, ZT_MEM_GRADS)))
            return zt_fail(ZT_E_NOMEM, "gradient offload: accumulation buffers: out of memory");
    return 0;
}

/* unit u's reduced shard in rs_tmp[t]: added to the shard so far, written back (16-bit
 * accumulation: rounded into hstage[t], whose values rs_tmp then holds) */
static int gshard_finish(zt_zero *z, int u, int t)
{
    size_t s = zt_geometry_len(z->geo, u, 1);
    float *x = z->gr.rs_tmp[t];
    int h = z->gr.gdt;
    if (!z->gr.accum_first) { /* (read ahead when the unit's backward began; whole_grad: now) */
        ZT_TRY(gacc_alloc(z));
        ZT_TRY(zt_store_get(z->gr.store, u, z->gr.acc[t]));
        if (h >= 0) {
            memcpy(z->gr.hstage[t], z->gr.acc[t], s * 2);
            hacc(z, z->gr.hstage[t], x, s); /* the in-RAM sum's order and rounding */
        } else {
            const float *g = z->gr.acc[t];
            for (size_t i = 0; i < s; i++) /* g + x: the in-RAM sum's order */
                x[i] = g[i] + x[i];
        }
    } else if (h >= 0) {
        zt_half_narrow(h, z->gr.hstage[t], x, s);
    }
    if (h >= 0)
        zt_half_widen(h, x, z->gr.hstage[t], s);
    z->gr.sumsq[u] = z->gr.last_micro ? zt_sumsq(x, s) : -1.0;
    ZT_TRY(zt_store_put(z->gr.store, u, h >= 0 ? (void *)z->gr.hstage[t] : (void *)x));
    z->gr.buf[t] = u;
    z->gr.buf_loading[t] = 0;
    return 0;
}

static int clear_shards(zt_zero *z)
{
    int nu = z->L->n_units;
    size_t N = (size_t)z->comm->size;
    if (!z->gr.store) {
        for (int u = 0; u < nu; u++)
            memset(z->gr.Hs ? (void *)z->gr.Hs[u] : (void *)z->gr.Gs[u], 0,
                   z->geo->padded[u] / N * z->gr.ges);
        return 0;
    }
    ZT_TRY(gbuf_take(z, 0));
    void *zeros = z->gr.gdt >= 0 ? (void *)z->gr.hstage[0] : (void *)z->gr.rs_tmp[0];
    memset(zeros, 0, shard_max(z) * z->gr.ges);
    for (int u = 0; u < nu; u++) {
        ZT_TRY(zt_store_put(z->gr.store, u, zeros));
        z->gr.sumsq[u] = 0.0;
    }
    ZT_TRY(zt_store_sync(z->gr.store));
    if (z->gr.gdt >= 0)
        memset(z->gr.rs_tmp[0], 0, shard_max(z) * sizeof(float));
    return 0;
}

int zt_zero_clear_stale(zt_zero *z)
{
    if (!z->gr.gs_stale)
        return 0;
    ZT_TRY(clear_shards(z));
    z->gr.gs_stale = 0;
    return 0;
}

int zt_zero_grads_clear(zt_zero *z)
{
    z->gr.micro = 0;
    ZT_TRY(zt_zero_pass_grads_begin(z)); /* reductions still reading G finish first */
    if (z->gr.Gh) { /* stages 0-1, 16-bit: the sums and the whole-gradient unit's buffer */
        int w = z->gr.whole_grad;
        for (int u = 0; u < z->L->n_units; u++)
            memset(z->gr.Gh[u], 0, z->geo->padded[u] * sizeof(uint16_t));
        if (w >= 0)
            memset(z->gr.G[w], 0, z->geo->padded[w] * sizeof(float));
        return 0;
    }
    if (z->cfg->zero_stage >= 2) {
        int w = z->gr.whole_grad;
        if (w >= 0)
            memset(z->gr.G[w], 0, z->geo->padded[w] * sizeof(float));
        /* the shards are left (a deferred update may still read them): the next backward
         * pass overwrites them (its first reduction is not added), and a step without one
         * zeroes them first (zt_zero_clear_stale) */
        z->gr.gs_stale = 1;
        z->gr.accum_first = 1;
        return 0;
    }
    for (int u = 0; u < z->L->n_units; u++)
        memset(z->gr.G[u], 0, z->geo->padded[u] * sizeof(float));
    return 0;
}

void zt_zero_step_done(zt_zero *z) { z->gr.micro = 0; }

void zt_zero_poll(zt_zero *z)
{
    if (z->ps.store)
        (void)zt_store_poll(z->ps.store);
    if (z->oo.store)
        (void)zt_store_poll(z->oo.store);
}

/* ---- stages 2-3: gradients reduced during the backward pass ---------------------------- */

static int finish_reduce(zt_zero *z, int u)
{
    int t = z->gr.rpend_tmp[u];
    ZT_TRY(zt_comm_wait_range(z->comm, z->gr.rpend_lo[u], z->gr.rpend_hi[u]));
    z->gr.rpend_lo[u] = z->gr.rpend_hi[u] = -1;
    if (z->gr.store) {
        ZT_TRY(gshard_finish(z, u, t));
        z->gr.rpend_tmp[u] = -1;
    } else if (z->gr.Hs) { /* 16-bit: the shard rounded, or added to the shard so far */
        size_t s = zt_geometry_len(z->geo, u, 1);
        if (z->gr.accum_first)
            zt_half_narrow(z->gr.gdt, z->gr.Hs[u], z->gr.rs_tmp[t], s);
        else
            hacc(z, z->gr.Hs[u], z->gr.rs_tmp[t], s);
        z->gr.rpend_tmp[u] = -1;
    } else if (t >= 0) { /* a later micro-batch: add its shard */
        size_t s = zt_geometry_len(z->geo, u, 1);
        float *g = z->gr.Gs[u], *x = z->gr.rs_tmp[t];
        for (size_t i = 0; i < s; i++)
            g[i] += x[i];
        z->gr.rpend_tmp[u] = -1;
    }
    for (int i = 0; i < 2; i++)
        if (z->gr.scratch_unit[i] == u)
            z->gr.scratch_unit[i] = -1;
    return 0;
}

/* Stages 0-1 with overlap: in the step's last micro-batch a unit's summed gradient is
 * final as soon as its backward is done (the whole-gradient unit: at the end of the pass), so its
 * reduce-scatter starts then instead of in the step; the step waits for it. */
static int early_reduce(const zt_zero *z)
{
    return z->cfg->zero_stage < 2 && z->gr.Gs && z->gr.overlap && z->gr.last_micro;
}

int zt_zero_pass_grads_begin(zt_zero *z)
{
    /* a micro-batch after reductions that started early (more micro-batches than the
     * configured accumulation): those sums are stale; the step reduces everything again */
    if (z->cfg->zero_stage >= 2 || !z->gr.Gs)
        return 0;
    for (int u = 0; u < z->L->n_units; u++) {
        ZT_TRY(zt_comm_wait_range(z->comm, z->gr.rpend_lo[u], z->gr.rpend_hi[u]));
        z->gr.rpend_lo[u] = z->gr.rpend_hi[u] = -1;
    }
    return 0;
}

/* the scratch buffer unit u holds, or -1 */
static int slot_of(const zt_zero *z, int u)
{
    return z->gr.scratch_unit[0] == u ? 0 : z->gr.scratch_unit[1] == u ? 1 : -1;
}

/* the scratch buffer unit u gets: u & 1, unless a unit whose gradients are still open (lent
 * and not reduced: G set) holds it; -1 when both are so held */
static int lend_slot(const zt_zero *z, int u)
{
    int i = u & 1;
    if (z->gr.scratch_unit[i] >= 0 && z->gr.G[z->gr.scratch_unit[i]])
        i ^= 1;
    return z->gr.scratch_unit[i] >= 0 && z->gr.G[z->gr.scratch_unit[i]] ? -1 : i;
}

int zt_zero_grads_can_lend(const zt_zero *z, int u)
{
    if (!lends(z) || u == z->gr.whole_grad || lend_slot(z, u) >= 0)
        return 0;
    return zt_fail(ZT_E_INVAL, "stage %d%s lends gradient buffers to two units at a time "
                   "(besides unit %d): units %d and %d still have theirs; make one's gradients "
                   "ready (zt_engine_unit_grads_ready) before acquiring unit %d for backward",
                   z->cfg->zero_stage, z->gr.gdt >= 0 ? " with 16-bit gradients" : "",
                   z->gr.whole_grad, z->gr.scratch_unit[0], z->gr.scratch_unit[1], u);
}

int zt_zero_grads_lend(zt_zero *z, int u)
{
    if (!lends(z) || u == z->gr.whole_grad)
        return 0;
    ZT_TRY(zt_zero_grads_can_lend(z, u));
    int i = lend_slot(z, u); /* the reduction of a unit that holds it finishes first */
    if (z->gr.scratch_unit[i] >= 0)
        ZT_TRY(finish_reduce(z, z->gr.scratch_unit[i]));
    z->gr.G[u] = z->gr.scratch[i];
    z->gr.scratch_unit[i] = u;
    memset(z->gr.G[u], 0, z->geo->padded[u] * sizeof(float));
    if (z->gr.store && !z->gr.accum_first) { /* the shard so far, for gshard_finish */
        ZT_TRY(gacc_alloc(z));
        ZT_TRY(zt_store_prefetch(z->gr.store, u, z->gr.acc[i]));
    }
    return 0;
}

static int reduce_into_shard(zt_zero *z, int u, int tmp)
{
    /* 16-bit accumulation: the micro-batch's gradient is a 16-bit value before it is reduced
     * (a 16-bit module's grad; stages 0-1 round it into their sum), so stages agree */
    if (z->gr.gdt >= 0)
        zt_half_round(z->gr.gdt == ZT_HALF_F16, z->gr.G[u], z->gr.G[u], z->geo->padded[u]);
    if (z->gr.store) { /* into rs_tmp, written back when complete */
        ZT_TRY(gbuf_take(z, tmp));
        z->gr.rpend_tmp[u] = tmp;
        return start_rs(z, u, z->gr.G[u], z->gr.rs_tmp[tmp], &z->gr.rpend_lo[u],
                        &z->gr.rpend_hi[u]);
    }
    int into = z->gr.accum_first && !z->gr.Hs; /* (16-bit: through rs_tmp, then rounded) */
    float *dst = into ? z->gr.Gs[u] : z->gr.rs_tmp[tmp];
    z->gr.rpend_tmp[u] = into ? -1 : tmp;
    return start_rs(z, u, z->gr.G[u], dst, &z->gr.rpend_lo[u], &z->gr.rpend_hi[u]);
}

int zt_zero_grads_reduce(zt_zero *z, int u)
{
    if (early_reduce(z) && u != z->gr.whole_grad)
        return start_rs(z, u, z->gr.G[u], z->gr.Gs[u], &z->gr.rpend_lo[u], &z->gr.rpend_hi[u]);
    if (!lends(z) || u == z->gr.whole_grad)
        return 0;
    if (u == z->gr.skip_unit) {
        z->gr.scratch_unit[slot_of(z, u)] = -1;
        z->gr.G[u] = NULL;
        return 0;
    }
    if (z->cfg->zero_stage < 2) { /* 16-bit: added into the step's sum, reduced at the step */
        hacc(z, z->gr.Gh[u], z->gr.G[u], z->geo->padded[u]);
        z->gr.scratch_unit[slot_of(z, u)] = -1;
        z->gr.G[u] = NULL;
        return 0;
    }
    ZT_TRY(reduce_into_shard(z, u, slot_of(z, u)));
    z->gr.G[u] = NULL; /* the scratch buffer stays lent until the reduction completes */
    return z->gr.overlap ? 0 : finish_reduce(z, u);
}

int zt_zero_grads_end(zt_zero *z)
{
    int w = z->gr.whole_grad;
    if (early_reduce(z))
        return w >= 0 ? start_rs(z, w, z->gr.G[w], z->gr.Gs[w], &z->gr.rpend_lo[w],
                                 &z->gr.rpend_hi[w])
                      : 0;
    if (!lends(z))
        return 0;
    if (z->cfg->zero_stage < 2) { /* 16-bit: the whole-gradient unit's too */
        if (w >= 0) {
            hacc(z, z->gr.Gh[w], z->gr.G[w], z->geo->padded[w]);
            memset(z->gr.G[w], 0, z->geo->padded[w] * sizeof(float));
        }
        return 0;
    }
    for (int i = 0; i < 2; i++)
        if (z->gr.scratch_unit[i] >= 0)
            ZT_TRY(finish_reduce(z, z->gr.scratch_unit[i]));
    if (w >= 0) {
        ZT_TRY(reduce_into_shard(z, w, 0));
        ZT_TRY(finish_reduce(z, w));
        memset(z->gr.G[w], 0, z->geo->padded[w] * sizeof(float));
    }
    z->gr.accum_first = 0;
    z->gr.gs_stale = 0; /* every shard was overwritten by its first reduction */
    return 0;
}

void zt_zero_take_back(zt_zero *z)
{
    zt_comm_wait_all(z->comm);
    for (int u = 0; lends(z) && u < z->L->n_units; u++) {
        if (u == z->gr.whole_grad || !z->gr.G[u]) /* (lent, never reduced) */
            continue;
        z->gr.G[u] = NULL;
        for (int i = 0; i < 2; i++)
            if (z->gr.scratch_unit[i] == u)
                z->gr.scratch_unit[i] = -1;
    }
}

void zt_zero_micro_begin(zt_zero *z)
{
    int accum = z->cfg->grad_accum_steps > 1 ? z->cfg->grad_accum_steps : 1;
    z->gr.last_micro = z->gr.micro + 1 >= accum;
    z->gr.micro++;
}

void *zt_zero_params(const zt_zero *z, int u) { return z->P[u]; }

float *zt_zero_grads(const zt_zero *z, int u) { return z->gr.G[u]; }

int zt_zero_whole_grad(const zt_zero *z) { return z->gr.whole_grad; }

/* ---- the step ------------------------------------------------------------------------------ */

/* 16-bit accumulation: this rank's reduced shard of unit u (the whole unit's sum at stages
 * 0-1 on one rank) */
static uint16_t *hshard(const zt_zero *z, int u)
{
    return z->gr.Hs ? z->gr.Hs[u] : z->gr.Gh[u];
}

/* Stages 0-1 with 16-bit accumulation and several ranks: each unit's sum widened into a
 * lent buffer (the whole-gradient unit's own, else scratch[0]), reduce-scattered into
 * rs_tmp[0] and rounded into its shard. */
static int reduce_h01(zt_zero *z)
{
    int w = z->gr.whole_grad;
    for (int u = 0; u < z->L->n_units; u++) {
        float *x = u == w ? z->gr.G[w] : z->gr.scratch[0];
        size_t n = z->geo->padded[u];
        int64_t lo, hi;
        zt_half_widen(z->gr.gdt, x, z->gr.Gh[u], n);
        ZT_TRY(start_rs(z, u, x, z->gr.rs_tmp[0], &lo, &hi));
        ZT_TRY(zt_comm_wait_range(z->comm, lo, hi));
        zt_half_narrow(z->gr.gdt, z->gr.Hs[u], z->gr.rs_tmp[0], zt_geometry_len(z->geo, u, 1));
        if (u == w)
            memset(x, 0, n * sizeof(float));
    }
    return 0;
}

int zt_zero_reduce(zt_zero *z, double *sumsq, int *bad_unit)
{
    int nu = z->L->n_units;
    float **gs = z->gr.Gs ? z->gr.Gs : z->gr.G;
    double local = 0.0;
    if (z->cfg->zero_stage < 2 && z->gr.Gh && z->gr.Hs)
        ZT_TRY(reduce_h01(z));
    if (z->cfg->zero_stage < 2 && z->gr.Gs) /* stages 0-1: every unit's summed gradient, unless */
        for (int u = 0; u < nu; u++)   /* its reduction started in the last backward pass */
            if (z->gr.rpend_lo[u] < 0)
                ZT_TRY(start_rs(z, u, z->gr.G[u], z->gr.Gs[u], &z->gr.rpend_lo[u],
                                &z->gr.rpend_hi[u]));
    for (int u = 0; u < nu; u++) {
        ZT_TRY(zt_comm_wait_range(z->comm, z->gr.rpend_lo[u], z->gr.rpend_hi[u]));
        z->gr.rpend_lo[u] = z->gr.rpend_hi[u] = -1;
        if (z->gr.store && z->gr.sumsq[u] < 0.0) {
            /* not summed in a last micro-batch (fewer than configured): read it */
            ZT_TRY(gbuf_read(z, u, 1));
            z->gr.sumsq[u] = zt_sumsq(z->gr.rs_tmp[u & 1], zt_geometry_len(z->geo, u, 1));
        }
        size_t len = zt_geometry_len(z->geo, u, 1);
        double x = z->gr.store ? z->gr.sumsq[u]
                   : z->gr.gdt >= 0 ? zt_sumsq_half(z->gr.gdt, hshard(z, u), len)
                                    : zt_sumsq(gs[u], len);
        if (!isfinite(x) && *bad_unit < 0)
            *bad_unit = u;
        local += x;
    }
    *sumsq = local;
    return 0;
}

/* ---- the update, unit by unit ----------------------------------------------------------
 * update_begin reads the first sub-groups and shards ahead; update_unit(u) updates unit u
 * (units in order) and starts what comes next; update_end waits for the write-backs and the
 * all-gathers. Between them the state lives in z->up. */

static void update_begin(zt_zero *z)
{
    int nu = z->L->n_units, nw = z->oo.store ? z->oo.n_work : 0;
    z->up.g = 0;
    z->oo.cached = -1;
    z->up.err = 0;
    for (int u = 0; z->ps.store && u < nu && u < z->ps.n_slot - 1 && !z->up.err; u++)
        z->up.err = pshard_prefetch(z, u);
    for (int k = 0; k < z->oo.n_group && k < nw - 1 && !z->up.err; k++) /* read ahead */
        z->up.err = zt_store_prefetch(z->oo.store, z->oo.group[k].blob, z->oo.work[k % nw]);
    for (int u = 0; z->gr.store && u < 2 && u < nu && !z->up.err; u++)
        z->up.err = gbuf_read(z, u, 0);
}

static int update_unit(zt_zero *z, int u)
{
    int nu = z->L->n_units, r = z->comm->rank, st = z->cfg->zero_stage;
    int nw = z->oo.store ? z->oo.n_work : 0, ng = z->oo.n_group;
    float **gs = z->gr.Gs ? z->gr.Gs : z->gr.G;
    ZT_TRY(z->up.err);
    zt_spart *part = zt_ost_part(z->os, u, r);
    size_t len = part->len;
    void *ps = NULL;
    float *gu = z->gr.store || z->gr.gdt >= 0 ? z->gr.rs_tmp[u & 1] : gs[u];
    if (st >= 3)
        ZT_TRY(pshard_get(z, u, &ps));
    if (!z->gr.store && z->gr.gdt >= 0) /* the 16-bit shard widened */
        zt_half_widen(z->gr.gdt, gu, hshard(z, u), len);
    if (z->gr.store) { /* this unit's gradient shard in; the next one's read starts */
        ZT_TRY(gbuf_read(z, u, 1));
        if (u + 1 < nu)
            ZT_TRY(gbuf_read(z, u + 1, 0));
    }
    /* parameters: stage 3's shard, else the whole unit; gradients: the reduced shard (one
     * rank: the whole unit, which is its shard) */
    zt_ost_io io = {st >= 3 ? ps : z->P[u], gu, st >= 3, 1, z->oo.store, z->hdt};
    /* this unit's sub-groups [c0, c1) of the shard (one, [0, len), without offload) */
    for (size_t c0 = 0, c1 = len; c0 < len; c0 = c1) {
        zt_ost_view v;
        if (nw) {
            const zt_ogroup *og = &z->oo.group[z->up.g];
            c1 = og->c1;
            ZT_TRY(zt_store_get(z->oo.store, og->blob, z->oo.work[z->up.g % nw]));
            zt_ost_view_of(z->os->opt, z->os->lay, z->oo.work[z->up.g % nw], c0, c1 - c0, og->f0,
                           og->nc, &v);
        } else {
            zt_ost_view_of(z->os->opt, z->os->lay, part->state, 0, len, 0, part->n_compact, &v);
        }
        if (zt_ost_unitwise(z->os->opt)) /* (one sub-group per unit: group_floats) */
            ZT_TRY(zt_ost_update_unit(z->os, &z->up.hp, u, &part, 1, &v, &io));
        else
            ZT_TRY(zt_ost_update_range(z->os, &z->up.hp, part, c0, c1, &v, &io));
        if (nw) { /* write back; the buffer of group g - 1 then reads group g + nw - 1 */
            ZT_TRY(zt_store_put(z->oo.store, z->oo.group[z->up.g].blob, z->oo.work[z->up.g % nw]));
            if (z->up.g >= 1)
                ZT_TRY(zt_store_wait(z->oo.store, z->oo.group[z->up.g - 1].blob));
            if (z->up.g + nw - 1 < ng)
                ZT_TRY(zt_store_prefetch(z->oo.store, z->oo.group[z->up.g + nw - 1].blob,
                                         z->oo.work[(z->up.g + nw - 1) % nw]));
            z->up.g++;
        }
    }
    if (st >= 3 && z->ga.persist[u] && z->ps.store) { /* in place: the shard copy may go */
        zt_geometry_put(z->geo, u, r, ps, z->P[u], z->pes);
        ZT_TRY(start_pag(z, u, NULL, z->P[u], &z->gr.rpend_lo[u], &z->gr.rpend_hi[u]));
    } else if (st >= 3 && z->ga.persist[u]) {
        ZT_TRY(start_pag(z, u, z->ga.Ps[u], z->P[u], &z->gr.rpend_lo[u], &z->gr.rpend_hi[u]));
    } else if (st < 3 && z->comm->size > 1) { /* in place: this rank's slices of P[u] */
        ZT_TRY(start_pag(z, u, NULL, z->P[u], &z->gr.rpend_lo[u], &z->gr.rpend_hi[u]));
    }
    if (st >= 3) { /* write the updated shard back; read a later one ahead */
        ZT_TRY(pshard_done(z, u, 1));
        if (u + z->ps.n_slot - 1 < nu)
            ZT_TRY(pshard_prefetch(z, u + z->ps.n_slot - 1));
    }
    zt_comm_poll(z->comm);
    return 0;
}

static int update_end(zt_zero *z)
{
    int nu = z->L->n_units, nw = z->oo.store ? z->oo.n_work : 0;
    if (z->oo.store)
        ZT_TRY(zt_store_sync(z->oo.store));
    if (z->ps.store)
        ZT_TRY(zt_store_sync(z->ps.store));
    for (int u = 0; u < nu; u++) {
        ZT_TRY(zt_comm_wait_range(z->comm, z->gr.rpend_lo[u], z->gr.rpend_hi[u]));
        z->gr.rpend_lo[u] = z->gr.rpend_hi[u] = -1;
    }
    /* the next update's first sub-groups, read now (they are final): they stream in during
     * the passes before it instead of at its start; update_begin finds them under way */
    for (int k = 0; k < z->oo.n_group && k < nw - 1; k++)
        ZT_TRY(zt_store_prefetch(z->oo.store, z->oo.group[k].blob, z->oo.work[k % nw]));
    z->os->master_fresh = 0; /* (every position has been updated) */
    return 0;
}

/* the deferred updates of units up to u (all: u = n_units - 1) */
static int lazy_upto(zt_zero *z, int u)
{
    while (z->up.lz_pending && z->up.lz_next <= u) {
        int rc = update_unit(z, z->up.lz_next++);
        if (rc == 0 && z->up.lz_next == z->L->n_units) {
            z->up.lz_pending = 0;
            rc = update_end(z);
        }
        if (rc < 0) {
            z->up.lz_pending = 0;
            return rc;
        }
    }
    return 0;
}

int zt_zero_flush(zt_zero *z)
{
    return z && z->up.lz_pending ? lazy_upto(z, z->L->n_units - 1) : 0;
}

/* Stage 0: whole units, every rank's shard of the state (the parts), updated on every
 * rank; the reduced shards are all-gathered back into the whole gradients first. */
static int update_whole(zt_zero *z)
{
    int nu = z->L->n_units, np = z->os->n_parts, w = z->gr.whole_grad, h = z->gr.gdt >= 0;
    for (int u = 0; z->comm->size > 1 && u < nu; u++)
        ZT_TRY(h ? start_pieces(z, u, 1, sizeof(uint16_t), z->gr.Hs[u], z->gr.Gh[u],
                                &z->gr.rpend_lo[u], &z->gr.rpend_hi[u])
                 : start_ag(z, u, z->gr.Gs[u], z->gr.G[u], &z->gr.rpend_lo[u],
                            &z->gr.rpend_hi[u]));
    zt_spart *parts[ZT_MAX_PARTS];
    zt_ost_view views[ZT_MAX_PARTS];
    for (int u = 0; u < nu; u++) {
        /* 16-bit: the whole gradient widened into a lent buffer */
        float *g = !h ? z->gr.G[u] : u == w ? z->gr.G[w] : z->gr.scratch[0];
        zt_ost_io io = {z->P[u], g, 0, 0, z->oo.store, z->hdt};
        ZT_TRY(zt_comm_wait_range(z->comm, z->gr.rpend_lo[u], z->gr.rpend_hi[u]));
        z->gr.rpend_lo[u] = z->gr.rpend_hi[u] = -1;
        if (h)
            zt_half_widen(z->gr.gdt, g, z->gr.Gh[u], z->geo->padded[u]);
        for (int k = 0; k < np; k++) {
            zt_spart *p = &z->os->parts[u * np + k];
            parts[k] = p;
            zt_ost_view_of(z->os->opt, z->os->lay, p->state, 0, p->len, 0, p->n_compact,
                           &views[k]);
            if (!zt_ost_unitwise(z->os->opt))
                ZT_TRY(zt_ost_update_range(z->os, &z->up.hp, p, 0, p->len, &views[k], &io));
        }
        if (zt_ost_unitwise(z->os->opt))
            ZT_TRY(zt_ost_update_unit(z->os, &z->up.hp, u, parts, np, views, &io));
        if (h && u == w) /* (the backward adds into it) */
            memset(g, 0, z->geo->padded[u] * sizeof(float));
    }
    z->os->master_fresh = 0;
    return 0;
}

int zt_zero_grad_read(const zt_zero *z, int u, size_t off, float *dst, size_t n)
{
    if (z->gr.Gh) {
        zt_half_widen(z->gr.gdt, dst, z->gr.Gh[u] + off, n);
        return 0;
    }
    if (!z->gr.G || !z->gr.G[u])
        return zt_fail(ZT_E_UNSUPPORTED, "ZeRO stage %d does not keep unit %d's gradient whole",
                       z->cfg->zero_stage, u);
    memcpy(dst, z->gr.G[u] + off, n * sizeof(float));
    return 0;
}

int zt_zero_update(zt_zero *z, const zt_ost_hparams *hp)
{
    z->up.hp = *hp; /* (a deferred update of stage 3 applies it at the unit's next use) */
    int nu = z->L->n_units, st = z->cfg->zero_stage;
    if (st == 0)
        return update_whole(z);
    update_begin(z);
    /* Stage 3 with offload and no persistent unit: each unit's update waits for its first
     * use in the next forward pass (acquire), so its offloaded state and shard stream in
     * and out while the units before it compute. Same arithmetic, same order: the result is
     * bit-identical; zt_zero_flush applies what is left wherever the state is read.
     * (Adafactor's and Lamb's update of a unit has collectives of its own: not deferred.) */
    if (st >= 3 && (z->oo.store || z->ps.store) && !z->ga.any_persist &&
        !zt_ost_unitwise(z->os->opt)) {
        z->up.lz_pending = 1;
        z->up.lz_next = 0;
        return 0;
    }
    for (int u = 0; u < nu; u++)
        ZT_TRY(update_unit(z, u));
    return update_end(z);
}

/* ---- whole-model data in and out -------------------------------------------------------- */

int zt_zero_master_write(zt_zero *z, int u, size_t off, const float *src, size_t n)
{
    if (!(z->os->lay & ZT_OST_MASTER) || z->os->master_fresh || !z->os->state_ready)
        return 0; /* (a fresh master takes the parameters at the next update) */
    if (z->oo.store)
        return zt_fail(ZT_E_UNSUPPORTED, "writing a parameter after the first bf16 step with "
                       "the optimizer state offloaded: its fp32 master is not in RAM");
    for (int k = 0; k < z->os->n_parts; k++) {
        zt_spart *p = &z->os->parts[u * z->os->n_parts + k];
        zt_ost_view v;
        zt_ost_view_of(z->os->opt, z->os->lay, p->state, 0, p->len, 0, p->n_compact, &v);
        for (int q = 0; q < p->n_run; q++) {
            const zt_srun *x = &p->run[q];
            size_t a0 = x->a, a1 = x->a + (x->j1 - x->j0);
            size_t lo = a0 > off ? a0 : off, hi = a1 < off + n ? a1 : off + n;
            if (lo < hi)
                memcpy(v.w + x->j0 + (lo - a0), src + (lo - off), (hi - lo) * sizeof(float));
        }
    }
    return 0;
}

int zt_zero_fill_params(zt_zero *z, int (*fill)(int u, float *buf, void *arg), void *arg)
{
    int nu = z->L->n_units, st3 = z->cfg->zero_stage >= 3, rc = 0;
    size_t most = zt_geometry_max(z->geo, -1);
    float *tmp = NULL;
    void *h = NULL;
    if (!st3 && z->hdt < 0) { /* fp32 below stage 3: in place */
        for (int u = 0; u < nu; u++) {
            memset(z->P[u], 0, z->geo->padded[u] * sizeof(float));
            ZT_TRY(fill(u, z->P[u], arg));
        }
        return 0;
    }
    /* one unit at a time in a scratch buffer (stage 3: the whole model never exists here),
     * rounded into the parameters' dtype */
    if (!(tmp = floats_alloc(z, most, ZT_MEM_OTHER)) ||
        (st3 && z->hdt >= 0 && !(h = zt_mem_alloc_in(z->acct, most * z->pes, ZT_ALIGN_PAGE,
                                                     ZT_MEM_OTHER))))
        rc = ZT_E_NOMEM;
    for (int u = 0; u < nu && rc == 0; u++) {
        size_t n = z->geo->padded[u];
        void *dst = !st3 ? z->P[u] : h ? h : tmp;
        memset(tmp, 0, n * sizeof(float));
        if ((rc = fill(u, tmp, arg)) < 0)
            break;
        if (dst != tmp)
            zt_zero_pnarrow(z, dst, tmp, n);
        if (st3 && (rc = pshard_set(z, u, dst)) < 0)
            break;
        if (st3 && z->ga.persist[u])
            memcpy(z->P[u], dst, n * z->pes);
    }
    if (h)
        zt_mem_free_in(z->acct, h, most * z->pes, ZT_MEM_OTHER);
    if (tmp)
        floats_free(z, tmp, most, ZT_MEM_OTHER);
    return rc;
}

/* ---- the report -------------------------------------------------------------------------- */

void zt_zero_footprint(const zt_zero *z, zt_footprint *o)
{
    double pool = 0.0;
    for (int i = 0; z->cfg->zero_stage >= 3 && i < z->ga.n_pool; i++)
        pool += (double)z->ga.pool[i].cap;
    zt_fp_in in = {
        .L = z->L, .N = z->comm->size, .stage = z->cfg->zero_stage, .bucket = z->geo->bucket,
        .whole_grad = z->gr.whole_grad, .opt_off = z->cfg->offload_optimizer,
        .par_off = z->cfg->zero_stage >= 3 ? z->cfg->offload_param : ZT_OFFLOAD_NONE,
        .grads_off = z->gr.store != NULL, .grad_acc_buffers = z->gr.acc[0] != NULL,
        .param_slots = z->ps.n_slot, .persist_threshold = z->cfg->persist_threshold,
        .gathered = pool, .opt_work = (double)zt_zero_offload_bytes(z),
        .inference = z->cfg->inference, .pbytes = (double)z->pes,
        .gbytes = z->cfg->inference ? 0.0 : (double)z->gr.ges};
    size_t rep = z->os->opt == ZT_OPT_ADAFACTOR ? z->os->af_floats * sizeof(float) : 0;
    in.opt_replicated = (double)rep;
    in.opt_state = (double)(zt_ost_state_bytes(z->os) - rep);
    zt_footprint_of(&in, o);
}

/* reduce-scatter + all-gather floats per step over the parameter floats P, with the step's
 * A micro-batches (grad_accum_steps): stages 0-1 reduce-scatter the summed gradient once and
 * all-gather once (2); stage 2 reduce-scatters each micro-batch's gradient and all-gathers
 * once (A + 1). Stage 3 reduce-scatters each micro-batch's and, in each micro-batch's passes,
 * all-gathers each unit whenever a use needs it and no acquired use holds it: 3 per
 * micro-batch when every unit is gathered for its forward and its backward, less when
 * prefetching or consecutive uses keep a unit; plus the persistent units gathered after the
 * step. The figure replays the pass's schedule without buffers or MPI. *plain stays the
 * textbook figure of one micro-batch. */
double zt_zero_traffic_theory(zt_zero *z, const zt_use *train, int n, double *plain)
{
    int nu = z->L->n_units;
    double P = 0.0, pers = 0.0, A = z->cfg->grad_accum_steps > 1 ? z->cfg->grad_accum_steps : 1;
    zt_sched S = {0};
    *plain = 0.0;
    if (z->comm->size == 1)
        return 0.0;
    for (int u = 0; u < nu; u++)
        P += (double)z->geo->padded[u];
    *plain = 2.0;
    if (z->cfg->zero_stage < 2)
        return 2.0;
    if (z->cfg->zero_stage == 2)
        return A + 1.0;
    *plain = 3.0;
    for (int u = 0; u < nu; u++)
        pers += z->ga.persist[u] ? (double)z->geo->padded[u] : 0.0;
    int *until = NULL, *rel = NULL;
    if (n <= 0 || !(S.refs = calloc((size_t)nu, sizeof *S.refs)) ||
        !(until = malloc(sizeof *until * (size_t)n)) || !(rel = malloc(sizeof *rel * (size_t)n))) {
        free(S.refs);
        free(until);
        return 0.0; /* no order known yet */
    }
    S.dry = 1;
    S.acquired = -1;
    S.uses = train;
    S.n_uses = n;
    /* use j is released before acquire until[j] (the order's own record; not known: never) */
    for (int j = 0; j < n; j++)
        until[j] = train[j].until > 0 ? j + train[j].until : n;
    for (int k = 0; k < n; k++) {
        int nrel = 0;
        for (int j = 0; j < k; j++)
            if (until[j] == k)
                rel[nrel++] = j;
        sched_enter(z, &S, k, rel, nrel);
    }
    free(until);
    free(rel);
    free(S.refs);
    return (A * (P + S.moved) + pers) / P;
}
