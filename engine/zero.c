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

#include "engine_impl.h"
#include "stores.h"
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
 * numbers. Reduce-scatter: full -> shard. All-gather: shard -> full (shard NULL: in place,
 * this rank's slices are already in full). */
static int start_pieces(zt_engine *e, int u, int gather, const float *full_or_shard, float *dst,
                        int64_t *lo, int64_t *hi)
{
    zt_seg s;
    size_t N = (size_t)e->comm.size;
    *lo = *hi = -1;
    for (int k = 0; zt_geometry_seg(&e->geo, u, e->comm.rank, k, &s); k++) {
        int64_t h;
        size_t off0 = s.soff * N;
        if (gather)
            ZT_TRY(zt_comm_start_allgather(&e->comm, full_or_shard ? full_or_shard + s.soff
                                                                   : dst + s.off,
                                           dst + off0, s.len * N, &h));
        else
            ZT_TRY(zt_comm_start_reduce_scatter(&e->comm, full_or_shard + off0, dst + s.soff,
                                                s.len * N, &h));
        *lo = *lo < 0 ? h : *lo;
        *hi = h;
    }
    return 0;
}

static int start_rs(zt_engine *e, int u, const float *full, float *shard, int64_t *lo,
                    int64_t *hi)
{
    return start_pieces(e, u, 0, full, shard, lo, hi);
}

static int start_ag(zt_engine *e, int u, const float *shard, float *full, int64_t *lo,
                    int64_t *hi)
{
    return start_pieces(e, u, 1, shard, full, lo, hi);
}

/* ---- buffers ------------------------------------------------------------------------------ */

static float **alloc_units(const zt_engine *e, int category, int shard)
{
    int n = e->layout.n_units;
    float **b = calloc((size_t)n, sizeof *b);
    if (!b) {
        zt_fail(ZT_E_NOMEM, "out of memory");
        return NULL;
    }
    for (int u = 0; u < n; u++)
        if (!(b[u] = zt_mem_alloc(zt_geometry_len(&e->geo, u, shard) * sizeof(float), ZT_ALIGN_PAGE,
                                  category))) {
            for (int v = 0; v < u; v++)
                zt_mem_free(b[v], zt_geometry_len(&e->geo, v, shard) * sizeof(float), category);
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
        zt_mem_free(b[u], zt_geometry_len(&e->geo, u, shard) * sizeof(float), category);
    free(b);
}

static void offload_close(zt_engine *e);
static int gstore_open(zt_engine *e);
static void gstore_close(zt_engine *e);
static int lazy_upto(zt_engine *e, int u);

/* ---- parameter offload (stage 3) ---------------------------------------------------------
 * Each unit's parameter shard is one blob of a store (RAM pool or swap file). A few shard
 * slots cache shards in RAM: the schedule reads the next units' shards ahead into free
 * slots, a gather copies its shard into the gather buffer and all-gathers in place, and the
 * update reads a shard, updates it and writes it back. Without parameter offload the shard
 * is simply e->ga.Ps[u]. */

/* floats of the largest shard */
static size_t shard_max(const zt_engine *e)
{
    return zt_geometry_max_shard(&e->geo);
}

static int pslots_for(const zt_engine *e)
{
    return zt_fp_param_slots(&e->cfg, shard_max(e));
}

static void pstore_close(zt_engine *e)
{
    zt_store_close(e->ps.store);
    e->ps.store = NULL;
    for (int i = 0; i < e->ps.n_slot; i++)
        zt_mem_free(e->ps.slot[i].p, shard_max(e) * sizeof(float), ZT_MEM_PARAMS);
    e->ps.n_slot = 0;
}

static int pstore_open(zt_engine *e)
{
    size_t sm = shard_max(e), bs = e->cfg.offload_param_buffer_size;
    size_t mic = e->cfg.offload_param_max_in_cpu;
    if (bs && bs < sm)
        return zt_fail(ZT_E_CONFIG, "offload_param.buffer_size %zu elements is smaller than "
                       "the largest unit shard, %zu elements: each buffer holds one; give at "
                       "least %zu", bs, sm, sm);
    if (mic && mic < 3 * sm)
        return zt_fail(ZT_E_CONFIG, "offload_param.max_in_cpu %zu elements holds fewer than "
                       "the 3 shard buffers parameter offload needs (3 x %zu elements)", mic,
                       sm);
    ZT_TRY(zt_offload_store_open(&e->cfg, e->nvme_path, e->comm.rank, e->cfg.offload_param,
                                 "params", &e->ps.store));
    for (int u = 0; u < e->layout.n_units; u++)
        if (zt_store_add(e->ps.store, zt_geometry_len(&e->geo, u, 1) * sizeof(float),
                         ZT_MEM_PARAMS) != u)
            return zt_fail(ZT_E_NOMEM, "parameter offload: cannot declare unit %d", u);
    ZT_TRY(zt_store_reserve(e->ps.store));
    for (; e->ps.n_slot < pslots_for(e); e->ps.n_slot++) {
        zt_pslot *sl = &e->ps.slot[e->ps.n_slot];
        sl->unit = -1;
        sl->pinned = sl->loading = 0;
        if (!(sl->p = zt_mem_alloc(shard_max(e) * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_PARAMS)))
            return zt_fail(ZT_E_NOMEM, "parameter offload: shard buffers: out of memory");
    }
    return 0;
}

static int pslot_find(const zt_engine *e, int u)
{
    for (int i = 0; i < e->ps.n_slot; i++)
        if (e->ps.slot[i].unit == u)
            return i;
    return -1;
}

/* A slot to load into: a free one, else the least recently used unpinned one that was
 * used since it was loaded (read ahead and not yet used only when take_ahead: a read-ahead
 * is what the next uses need). Its unit's transfers finish first. -1: none; an error from
 * those transfers is returned as is. */
static int pslot_take(zt_engine *e, int take_ahead)
{
    int best = -1;
    for (int i = 0; i < e->ps.n_slot; i++) {
        zt_pslot *sl = &e->ps.slot[i];
        if (sl->pinned || (sl->ahead && !take_ahead))
            continue;
        if (sl->unit < 0)
            return i;
        if (best < 0 || sl->used < e->ps.slot[best].used)
            best = i;
    }
    if (best >= 0) {
        int rc = zt_store_wait(e->ps.store, e->ps.slot[best].unit);
        if (rc < 0)
            return rc;
        e->ps.slot[best].unit = -1;
        e->ps.slot[best].loading = e->ps.slot[best].ahead = 0;
    }
    return best;
}

/* read unit u's shard ahead (no-op when cached or when every slot is pinned) */
static int pshard_prefetch(zt_engine *e, int u)
{
    if (!e->ps.store || pslot_find(e, u) >= 0)
        return 0;
    int k = pslot_take(e, 0); /* never at the cost of another read-ahead */
    if (k < -1)
        return k;
    if (k < 0)
        return 0;
    ZT_TRY(zt_store_prefetch(e->ps.store, u, e->ps.slot[k].p));
    e->ps.slot[k].unit = u;
    e->ps.slot[k].loading = e->ps.slot[k].ahead = 1;
    e->ps.slot[k].used = ++e->ps.clock;
    return 0;
}

/* unit u's shard in RAM, pinned until pshard_done */
static int pshard_get(zt_engine *e, int u, float **out)
{
    if (!e->ps.store) {
        *out = e->ga.Ps[u];
        return 0;
    }
    int k = pslot_find(e, u);
    if (k < 0) {
        if ((k = pslot_take(e, 1)) < 0)
            return k < -1 ? k : zt_fail(ZT_E_NOMEM, "parameter offload: every shard buffer "
                                        "is in use (raise offload_param.buffer_count)");
        e->ps.slot[k].unit = u;
        e->ps.slot[k].loading = 1;
    }
    zt_pslot *sl = &e->ps.slot[k];
    if (sl->loading) {
        ZT_TRY(zt_store_get(e->ps.store, u, sl->p));
        sl->loading = 0;
    }
    sl->ahead = 0;
    sl->pinned = 1;
    sl->used = ++e->ps.clock;
    *out = sl->p;
    return 0;
}

/* unpin; dirty: the shard changed, write it back (asynchronously) */
static int pshard_done(zt_engine *e, int u, int dirty)
{
    if (!e->ps.store)
        return 0;
    int k = pslot_find(e, u);
    if (k < 0)
        return zt_fail(ZT_E_INVAL, "parameter offload: unit %d is not loaded", u);
    e->ps.slot[k].pinned = 0;
    return dirty ? zt_store_put(e->ps.store, u, e->ps.slot[k].p) : 0;
}

/* a new shard for unit u (initialisation, loading): written to the store */
static int pshard_set(zt_engine *e, int u, const float *whole)
{
    float *p;
    if (!e->ps.store) {
        zt_geometry_take(&e->geo, u, e->comm.rank, whole, e->ga.Ps[u]);
        return 0;
    }
    int k = pslot_find(e, u);
    if (k < 0) {
        if ((k = pslot_take(e, 1)) < 0)
            return k < -1 ? k : zt_fail(ZT_E_NOMEM, "parameter offload: no buffer");
        e->ps.slot[k].unit = u;
    }
    ZT_TRY(zt_store_wait(e->ps.store, u)); /* a read into the slot lands first */
    e->ps.slot[k].loading = e->ps.slot[k].ahead = 0; /* the old contents are replaced */
    p = e->ps.slot[k].p;
    zt_geometry_take(&e->geo, u, e->comm.rank, whole, p);
    e->ps.slot[k].pinned = 1;
    return pshard_done(e, u, 1);
}

int zt_zero_shard_to_whole(zt_engine *e, int u, float *whole)
{
    float *p;
    ZT_TRY(pshard_get(e, u, &p));
    zt_geometry_put(&e->geo, u, e->comm.rank, p, whole);
    return pshard_done(e, u, 0);
}

static int64_t *pending(int n)
{
    int64_t *p = malloc(sizeof *p * (size_t)n);
    for (int i = 0; p && i < n; i++)
        p[i] = -1;
    return p;
}

int zt_zero_setup(zt_engine *e)
{
    int nu = e->layout.n_units, st = e->cfg.zero_stage;
    size_t N = (size_t)e->comm.size;
    /* reduce_bucket_size / allgather_bucket_size cap one collective: a larger unit is cut
     * into pieces of a multiple of N x 1024 floats, the same for every stage */
    ZT_TRY(zt_geometry_init(&e->geo, &e->layout, N, e->cfg.bucket_size));
    if (!(e->gr.rpend_lo = pending(nu)) || !(e->gr.rpend_hi = pending(nu)) ||
        !(e->gr.rpend_tmp = calloc((size_t)nu, sizeof *e->gr.rpend_tmp)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++)
        e->gr.rpend_tmp[u] = -1;
    e->gr.scratch_unit[0] = e->gr.scratch_unit[1] = -1;
    e->ga.sched.acquired = -1;
    /* tests only: this rank skips that unit's reductions */
    e->gr.skip_unit = zt_faults()->skip_rank == e->comm.rank ? zt_faults()->skip_unit : -1;
    /* on unless asked off: unlike DeepSpeed's default (stage 3 only), since overlapping
     * never changes a result here */
    e->gr.overlap = e->cfg.overlap_comm != 0;
    e->gr.accum_first = 1;
    if (st >= 3) {
        if (!(e->P = calloc((size_t)nu, sizeof *e->P)) ||
            (!e->cfg.offload_param && !(e->ga.Ps = alloc_units(e, ZT_MEM_PARAMS, 1))) ||
            !(e->ga.sched.refs = calloc((size_t)nu, sizeof *e->ga.sched.refs)) ||
            !(e->ga.gpend_lo = pending(nu)) || !(e->ga.gpend_hi = pending(nu)) ||
            !(e->ga.persist = calloc((size_t)nu, 1)))
            return zt_fail(ZT_E_NOMEM, "out of memory");
        if (e->cfg.offload_param)
            ZT_TRY(pstore_open(e));
        for (int u = 0; u < nu; u++) {
            e->ga.persist[u] = e->geo.padded[u] < e->cfg.persist_threshold;
            e->ga.any_persist |= e->ga.persist[u];
            if (e->ga.persist[u] && !(e->P[u] = zt_mem_alloc(e->geo.padded[u] * sizeof(float),
                                                           ZT_ALIGN_PAGE, ZT_MEM_PARAMS)))
                return ZT_E_NOMEM;
        }
    } else if (!(e->P = alloc_units(e, ZT_MEM_PARAMS, 0))) {
        return ZT_E_NOMEM;
    }
    if (st < 2 && !(e->gr.G = alloc_units(e, ZT_MEM_GRADS, 0)))
        return ZT_E_NOMEM;
    if (st >= 2) {
        /* the unit a tied unit's backward adds into (e->gr.whole_grad) keeps a whole gradient
         * through the backward pass; every other unit borrows one of two scratch buffers
         * (none when the whole one is the only unit: m = 0) */
        int w = e->gr.whole_grad;
        size_t m = zt_geometry_max(&e->geo, w), ms = zt_geometry_max(&e->geo, -1) / N;
        if (!(e->gr.G = calloc((size_t)nu, sizeof *e->gr.G)) ||
            (w >= 0 && !(e->gr.G[w] = zt_mem_alloc(e->geo.padded[w] * sizeof(float),
                                                ZT_ALIGN_PAGE, ZT_MEM_GRADS))))
            return ZT_E_NOMEM;
        for (int i = 0; i < 2; i++)
            if ((m && !(e->gr.scratch[i] = zt_mem_alloc(m * sizeof(float), ZT_ALIGN_PAGE,
                                                     ZT_MEM_GRADS))) ||
                !(e->gr.rs_tmp[i] = zt_mem_alloc(ms * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_COMM)))
                return ZT_E_NOMEM;
    }
    if (e->cfg.offload_gradients > 0 && (st < 2 || !e->cfg.offload_optimizer))
        return zt_fail(ZT_E_CONFIG, "zerotrain.offload_gradients: the gradient shards go where "
                       "the optimizer state goes, which needs offload_optimizer and ZeRO stage "
                       "2 or 3 (here stage %d, optimizer %s)", st,
                       e->cfg.offload_optimizer ? "offloaded" : "in RAM");
    e->cfg.offload_gradients = st >= 2 && e->cfg.offload_optimizer &&
                               e->cfg.offload_gradients >= 0 ? 1 : -1;
    if (e->cfg.offload_gradients > 0)
        return gstore_open(e);
    if ((N > 1 || st >= 2) && !(e->gr.Gs = alloc_units(e, ZT_MEM_GRADS, 1)))
        return ZT_E_NOMEM;
    return 0;
}

void zt_zero_teardown(zt_engine *e)
{
    int st = e->cfg.zero_stage;
    if (!e->geo.padded)
        return;
    if (e->comm.open > 0)
        zt_comm_wait_all(&e->comm);
    gstore_close(e); /* (its transfers read and fill rs_tmp: closed first) */
    if (st >= 3) {
        for (int u = 0; e->P && u < e->layout.n_units; u++)
            if (e->ga.persist && e->ga.persist[u])
                zt_mem_free(e->P[u], e->geo.padded[u] * sizeof(float), ZT_MEM_PARAMS);
        free(e->P);
        for (int i = 0; i < e->ga.n_pool; i++)
            zt_mem_free(e->ga.pool[i].p, e->ga.pool[i].cap * sizeof(float), ZT_MEM_PARAMS);
        free_units(e, e->ga.Ps, ZT_MEM_PARAMS, 1);
        e->ga.Ps = NULL;
        pstore_close(e);
        free(e->ga.sched.refs);
        free(e->ga.gpend_lo);
        free(e->ga.gpend_hi);
        free(e->ga.persist);
    } else {
        free_units(e, e->P, ZT_MEM_PARAMS, 0);
    }
    if (st >= 2) {
        int w = e->gr.whole_grad;
        size_t m = zt_geometry_max(&e->geo, w), ms = zt_geometry_max(&e->geo, -1) /
                                                      (size_t)e->comm.size;
        if (e->gr.G && w >= 0)
            zt_mem_free(e->gr.G[w], e->geo.padded[w] * sizeof(float), ZT_MEM_GRADS);
        free(e->gr.G);
        for (int i = 0; i < 2; i++) {
            zt_mem_free(e->gr.scratch[i], m * sizeof(float), ZT_MEM_GRADS);
            zt_mem_free(e->gr.rs_tmp[i], ms * sizeof(float), ZT_MEM_COMM);
        }
    } else {
        free_units(e, e->gr.G, ZT_MEM_GRADS, 0);
    }
    free_units(e, e->gr.Gs, ZT_MEM_GRADS, 1);
    offload_close(e);
    zt_ost_teardown(&e->os);
    free(e->gr.rpend_lo);
    free(e->gr.rpend_hi);
    free(e->gr.rpend_tmp);
    zt_geometry_free(&e->geo);
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

static size_t group_floats(const zt_engine *e)
{
    return zt_fp_group_floats(&e->cfg, shard_max(e));
}

static int count_groups(const zt_engine *e)
{
    size_t g = group_floats(e);
    int n = 0;
    for (int u = 0; u < e->layout.n_units; u++)
        n += (int)((zt_geometry_len(&e->geo, u, 1) + g - 1) / g);
    return n;
}

static int offload_nbuf(const zt_engine *e)
{
    return zt_fp_offload_buffers(&e->cfg, count_groups(e));
}

/* bytes of the largest sub-group's state (before setup: the layout's bound) */
static size_t group_bytes_max(const zt_engine *e)
{
    size_t m = 0;
    for (int k = 0; k < e->oo.n_group; k++)
        m = e->oo.group[k].bytes > m ? e->oo.group[k].bytes : m;
    if (!e->oo.n_group) {
        size_t g = group_floats(e);
        m = zt_ost_bytes(e->cfg.optimizer, e->cfg.optimizer == ZT_OPT_ADAFACTOR &&
                         e->cfg.adafactor_beta1 >= 0.0f, g, e->cfg.optimizer ? g : 0);
    }
    return m;
}

size_t zt_zero_offload_bytes(const zt_engine *e)
{
    return e->cfg.offload_optimizer ? (size_t)offload_nbuf(e) * group_bytes_max(e) : 0;
}

static void offload_close(zt_engine *e)
{
    zt_store_close(e->oo.store);
    e->oo.store = NULL;
    for (int i = 0; i < e->oo.n_work; i++)
        zt_mem_free(e->oo.work[i], e->oo.work_bytes, ZT_MEM_OPTIMIZER);
    e->oo.n_work = 0;
    free(e->oo.group);
    e->oo.group = NULL;
    e->oo.n_group = 0;
    e->oo.cached = -1;
}

static int offload_open(zt_engine *e)
{
    int nu = e->layout.n_units;
    ZT_TRY(zt_offload_store_open(&e->cfg, e->nvme_path, e->comm.rank, e->cfg.offload_optimizer,
                                 "optimizer", &e->oo.store));
    size_t gf = group_floats(e);
    int ng = count_groups(e), n = offload_nbuf(e);
    e->oo.cached = -1;
    if (!(e->oo.group = calloc((size_t)ng, sizeof *e->oo.group)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++) {
        const zt_spart *p = zt_ost_part(&e->os, u, e->comm.rank);
        for (size_t c0 = 0; c0 < p->len; c0 += gf) {
            zt_ogroup *g = &e->oo.group[e->oo.n_group++];
            g->unit = u;
            g->c0 = c0;
            g->c1 = c0 + gf < p->len ? c0 + gf : p->len;
            g->f0 = zt_ost_compact_before(p, c0);
            g->nc = zt_ost_compact_before(p, g->c1) - g->f0;
            g->bytes = zt_ost_bytes(e->os.opt, e->os.beta1, g->c1 - c0, g->nc);
            if ((g->blob = zt_store_add(e->oo.store, g->bytes, ZT_MEM_OPTIMIZER)) < 0)
                return g->blob;
        }
    }
    ZT_TRY(zt_store_reserve(e->oo.store));
    e->oo.work_bytes = group_bytes_max(e);
    for (; e->oo.n_work < n; e->oo.n_work++)
        if (!(e->oo.work[e->oo.n_work] = zt_mem_alloc(e->oo.work_bytes, ZT_ALIGN_PAGE,
                                                  ZT_MEM_OPTIMIZER)))
            return zt_fail(ZT_E_NOMEM, "optimizer offload: %zu bytes of working buffers: out "
                           "of memory", e->oo.work_bytes * (size_t)n);
    for (int k = 0; k < e->oo.n_group; k++) { /* the fresh state, written in one pass */
        const zt_ogroup *g = &e->oo.group[k];
        uint8_t *w = e->oo.work[k % n];
        if (k >= n)
            ZT_TRY(zt_store_wait(e->oo.store, e->oo.group[k - n].blob));
        zt_ost_init(&e->os, w, g->c1 - g->c0, g->nc);
        ZT_TRY(zt_store_put(e->oo.store, g->blob, w));
    }
    return zt_store_sync(e->oo.store);
}

/* the sub-groups of unit u: [first, first + count) of e->oo.group (in unit order) */
static int unit_groups(const zt_engine *e, int u, int *first)
{
    int g = 0;
    while (g < e->oo.n_group && e->oo.group[g].unit < u)
        g++;
    *first = g;
    while (g < e->oo.n_group && e->oo.group[g].unit == u)
        g++;
    return g - *first;
}

int zt_zero_state_pieces(const zt_engine *e, int u)
{
    int first;
    return e->oo.store ? unit_groups(e, u, &first) : 1;
}

int zt_zero_state_piece(zt_engine *e, int u, int r, int sec, int k, const void **data,
                        size_t *bytes)
{
    const zt_ost_sec *sd;
    int ns = zt_ost_sections(e->os.opt, e->os.beta1, &sd), first;
    if (sec < 0 || sec >= ns)
        return zt_fail(ZT_E_INVAL, "optimizer state: no section %d", sec);
    if (!e->oo.store) {
        const zt_spart *p = zt_ost_part(&e->os, u, r);
        if (k != 0 || !p->state)
            return zt_fail(ZT_E_INVAL, "optimizer state: no piece %d of unit %d", k, u);
        *data = p->state + zt_ost_sec_offset(e->os.opt, e->os.beta1, sec, p->len, p->n_compact);
        *bytes = zt_ost_sec_elems(&sd[sec], p->len, p->n_compact) * zt_dtype_size(sd[sec].dtype);
        return 0;
    }
    if (k < 0 || k >= unit_groups(e, u, &first))
        return zt_fail(ZT_E_INVAL, "optimizer offload: no piece %d of unit %d", k, u);
    const zt_ogroup *g = &e->oo.group[first + k];
    size_t n = g->c1 - g->c0;
    if (e->oo.cached != first + k) { /* the sections of one sub-group come one after another */
        e->oo.cached = -1;
        ZT_TRY(zt_store_get(e->oo.store, g->blob, e->oo.work[0]));
        e->oo.cached = first + k;
    }
    *data = e->oo.work[0] + zt_ost_sec_offset(e->os.opt, e->os.beta1, sec, n, g->nc);
    *bytes = zt_ost_sec_elems(&sd[sec], n, g->nc) * zt_dtype_size(sd[sec].dtype);
    return 0;
}

int zt_zero_state_stream_begin(zt_engine *e)
{
    /* the read-ahead into the working buffers lands first; the next update starts its own */
    e->oo.cached = -1;
    return e->oo.store ? zt_store_sync(e->oo.store) : 0;
}

int zt_zero_state_fill(zt_engine *e, zt_state_fill_fn fill, void *arg)
{
    e->oo.cached = -1;
    if (!e->oo.store) {
        for (int u = 0; u < e->layout.n_units; u++)
            for (int k = 0; k < e->os.n_parts; k++) {
                const zt_spart *p = &e->os.parts[u * e->os.n_parts + k];
                ZT_TRY(fill(u, p, 0, p->len, 0, p->n_compact, p->state, arg));
            }
        return 0;
    }
    ZT_TRY(zt_store_sync(e->oo.store));
    for (int k = 0; k < e->oo.n_group; k++) { /* one working buffer: fill, write, wait */
        const zt_ogroup *g = &e->oo.group[k];
        ZT_TRY(fill(g->unit, zt_ost_part(&e->os, g->unit, e->comm.rank), g->c0, g->c1, g->f0, g->nc,
                    e->oo.work[0], arg));
        ZT_TRY(zt_store_put(e->oo.store, g->blob, e->oo.work[0]));
        ZT_TRY(zt_store_wait(e->oo.store, g->blob));
    }
    return 0;
}

int zt_zero_ensure_moments(zt_engine *e)
{
    int rc = zt_ost_alloc_replicated(&e->os);
    if (rc < 0)
        return rc;
    if (e->cfg.offload_optimizer != ZT_OFFLOAD_NONE) {
        if (e->oo.store)
            return 0;
        if ((rc = offload_open(e)) < 0) {
            offload_close(e);
            return rc;
        }
        e->os.state_ready = 1;
        return 0;
    }
    if (e->os.state_ready)
        return 0;
    ZT_TRY(zt_ost_alloc_parts(&e->os));
    e->os.state_ready = 1;
    return 0;
}

/* ---- stage 3: gathering ------------------------------------------------------------------
 * A gathered unit lives in a pool buffer (the smallest free one that fits; a new one while
 * fewer than ZT_POOL_MAX exist). refs[u] counts the acquired uses that need unit u: a unit
 * shared by consecutive uses (the MLM head and the embeddings between the forward and the
 * backward pass) is gathered once for both. */

static float *pool_get(zt_engine *e, int u)
{
    int best = -1;
    for (int i = 0; i < e->ga.n_pool; i++)
        if (e->ga.pool[i].unit < 0 && e->ga.pool[i].cap >= e->geo.padded[u] &&
            (best < 0 || e->ga.pool[i].cap < e->ga.pool[best].cap))
            best = i;
    if (best < 0) {
        if (e->ga.n_pool == ZT_POOL_MAX) {
            zt_fail(ZT_E_NOMEM, "stage 3: more than %d units gathered at once", ZT_POOL_MAX);
            return NULL;
        }
        best = e->ga.n_pool;
        if (!(e->ga.pool[best].p = zt_mem_alloc(e->geo.padded[u] * sizeof(float), ZT_ALIGN_PAGE,
                                             ZT_MEM_PARAMS)))
            return NULL;
        e->ga.pool[best].cap = e->geo.padded[u];
        e->ga.n_pool++;
    }
    e->ga.pool[best].unit = u;
    return e->ga.pool[best].p;
}

static void pool_put(zt_engine *e, int u)
{
    for (int i = 0; i < e->ga.n_pool; i++)
        if (e->ga.pool[i].unit == u)
            e->ga.pool[i].unit = -1;
}

/* The schedule's state: e->ga.sched for the real pass; a private copy with dry = 1 replays
 * the same decisions without buffers or MPI to predict the traffic. A use is one acquire
 * of one unit (units.c). */
static size_t use_need(const zt_engine *e, const zt_sched *S, int k)
{
    int u = e->un.uses[k].unit;
    return !e->ga.persist[u] && S->refs[u] == 0 ? e->geo.padded[u] : 0;
}

static int acquire(zt_engine *e, zt_sched *S, int k)
{
    int u = e->un.uses[k].unit;
    S->acquired = k;
    if (e->ga.persist[u] || S->refs[u]++ > 0)
        return 0;
    S->live += e->geo.padded[u];
    S->units_live++;
    S->live_peak = S->live > S->live_peak ? S->live : S->live_peak;
    S->moved += (double)e->geo.padded[u];
    if (S->dry)
        return 0;
    ZT_TRY(lazy_upto(e, u)); /* the previous step's update of u, deferred to here */
    if (!(e->P[u] = pool_get(e, u)))
        return ZT_E_NOMEM;
    if (e->ps.store) { /* this rank's slices into the gather buffer, then in place */
        ZT_TRY(zt_zero_shard_to_whole(e, u, e->P[u]));
        return start_ag(e, u, NULL, e->P[u], &e->ga.gpend_lo[u], &e->ga.gpend_hi[u]);
    }
    return start_ag(e, u, e->ga.Ps[u], e->P[u], &e->ga.gpend_lo[u], &e->ga.gpend_hi[u]);
}

static void release(zt_engine *e, zt_sched *S, int k)
{
    int u = e->un.uses[k].unit;
    if (e->ga.persist[u] || --S->refs[u] > 0)
        return;
    S->live -= e->geo.padded[u];
    S->units_live--;
    if (S->dry)
        return;
    /* (a gather still in flight, e.g. prefetched for a use an error skipped, ends first) */
    if (e->ga.gpend_lo[u] >= 0 &&
        zt_comm_wait_range(&e->comm, e->ga.gpend_lo[u], e->ga.gpend_hi[u]) < 0)
        zt_log(ZT_LOG_WARN, "stage 3: the gather of unit %d failed: %s", u, zt_last_error());
    e->ga.gpend_lo[u] = e->ga.gpend_hi[u] = -1;
    pool_put(e, u);
    e->P[u] = NULL;
}

/* Use k: acquire it (and everything before it) and the uses after it whose units are
 * gathered already, let go of the uses in rel (released by the trainer since the last
 * acquire: a unit the next use needs again stays), then prefetch: acquire the next uses
 * while the floats fetched ahead fit the prefetch budget, the floats gathered at once fit
 * max_live and a pool buffer is left besides two for the trainer's own acquires. */
static int sched_enter(zt_engine *e, zt_sched *S, int k, const int *rel, int nrel)
{
    size_t ahead = 0, budget = e->cfg.prefetch_size, cap = e->cfg.max_live;
    while (S->acquired < k)
        ZT_TRY(acquire(e, S, S->acquired + 1));
    while (S->acquired + 1 < e->un.n_uses && use_need(e, S, S->acquired + 1) == 0)
        ZT_TRY(acquire(e, S, S->acquired + 1));
    for (int i = 0; i < nrel; i++)
        release(e, S, rel[i]);
    for (int j = k + 1; j <= S->acquired; j++)
        ahead += e->ga.persist[e->un.uses[j].unit] ? 0 : e->geo.padded[e->un.uses[j].unit];
    while (S->acquired + 1 < e->un.n_uses) {
        size_t need = use_need(e, S, S->acquired + 1);
        if (need > 0 && (ahead + need > budget || (cap && S->live + need > cap) ||
                         S->units_live + 2 >= ZT_POOL_MAX))
            break;
        ZT_TRY(acquire(e, S, S->acquired + 1));
        ahead += need;
    }
    /* parameter offload: the shards of the uses after the acquired ones, read ahead */
    for (int j = S->acquired + 1, n = 0; !S->dry && e->ps.store && j < e->un.n_uses &&
                                         n < e->ps.n_slot - 1; j++, n++)
        if (!e->ga.persist[e->un.uses[j].unit] && S->refs[e->un.uses[j].unit] == 0)
            ZT_TRY(pshard_prefetch(e, e->un.uses[j].unit));
    return 0;
}

void zt_zero_pass_begin(zt_engine *e)
{
    if (e->cfg.zero_stage < 3)
        return;
    zt_comm_wait_all(&e->comm);
    for (int u = 0; u < e->layout.n_units; u++) { /* anything left gathered */
        e->ga.gpend_lo[u] = e->ga.gpend_hi[u] = -1;
        if (e->ga.persist[u] || e->ga.sched.refs[u] == 0)
            continue;
        e->ga.sched.refs[u] = 0;
        pool_put(e, u);
        e->P[u] = NULL;
    }
    e->ga.sched.live = 0;
    e->ga.sched.units_live = 0;
    e->ga.sched.acquired = -1;
}

int zt_zero_enter(zt_engine *e, int k, const int *rel, int nrel)
{
    if (e->cfg.zero_stage < 3)
        return 0;
    ZT_TRY(sched_enter(e, &e->ga.sched, k, rel, nrel));
    int u = e->un.uses[k].unit;
    if (!e->ga.persist[u]) {
        ZT_TRY(zt_comm_wait_range(&e->comm, e->ga.gpend_lo[u], e->ga.gpend_hi[u]));
        e->ga.gpend_lo[u] = e->ga.gpend_hi[u] = -1;
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

static void gstore_close(zt_engine *e)
{
    size_t ms = shard_max(e) * sizeof(float);
    zt_store_close(e->gr.store);
    e->gr.store = NULL;
    for (int i = 0; i < 2; i++) {
        zt_mem_free(e->gr.acc[i], ms, ZT_MEM_GRADS);
        e->gr.acc[i] = NULL;
    }
    free(e->gr.sumsq);
    e->gr.sumsq = NULL;
}

static int gstore_open(zt_engine *e)
{
    int nu = e->layout.n_units;
    ZT_TRY(zt_offload_store_open(&e->cfg, e->nvme_path, e->comm.rank, e->cfg.offload_optimizer,
                                 "grads", &e->gr.store));
    for (int u = 0; u < nu; u++)
        if (zt_store_add(e->gr.store, zt_geometry_len(&e->geo, u, 1) * sizeof(float),
                         ZT_MEM_GRADS) != u)
            return zt_fail(ZT_E_NOMEM, "gradient offload: cannot declare unit %d", u);
    ZT_TRY(zt_store_reserve(e->gr.store));
    if (!(e->gr.sumsq = malloc((size_t)nu * sizeof *e->gr.sumsq)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++)
        e->gr.sumsq[u] = -1.0;
    e->gr.buf[0] = e->gr.buf[1] = -1;
    return 0;
}

/* rs_tmp[i] gets new contents: the put reading it finishes first */
static int gbuf_take(zt_engine *e, int i)
{
    int u = e->gr.buf[i];
    e->gr.buf[i] = -1;
    e->gr.buf_loading[i] = 0;
    return u >= 0 ? zt_store_wait(e->gr.store, u) : 0;
}

/* shard u into rs_tmp[u & 1]: started (wait = 0) or there on return */
static int gbuf_read(zt_engine *e, int u, int wait)
{
    int i = u & 1;
    if (e->gr.buf[i] != u) {
        ZT_TRY(gbuf_take(e, i));
        ZT_TRY(zt_store_prefetch(e->gr.store, u, e->gr.rs_tmp[i]));
        e->gr.buf[i] = u;
        e->gr.buf_loading[i] = 1;
    }
    if (wait && e->gr.buf_loading[i]) {
        ZT_TRY(zt_store_get(e->gr.store, u, e->gr.rs_tmp[i]));
        e->gr.buf_loading[i] = 0;
    }
    return 0;
}

/* a later micro-batch adds to the shards so far: their buffers, allocated on first use */
static int gacc_alloc(zt_engine *e)
{
    for (int i = 0; i < 2; i++)
        if (!e->gr.acc[i] && !(e->gr.acc[i] = zt_mem_alloc(shard_max(e) * sizeof(float),
                                                       ZT_ALIGN_PAGE, ZT_MEM_GRADS)))
            return zt_fail(ZT_E_NOMEM, "gradient offload: accumulation buffers: out of memory");
    return 0;
}

/* unit u's reduced shard in rs_tmp[t]: added to the shard so far, written back */
static int gshard_finish(zt_engine *e, int u, int t)
{
    size_t s = zt_geometry_len(&e->geo, u, 1);
    float *x = e->gr.rs_tmp[t];
    if (!e->gr.accum_first) { /* (read ahead when the unit's backward began; whole_grad: now) */
        ZT_TRY(gacc_alloc(e));
        const float *g = e->gr.acc[t];
        ZT_TRY(zt_store_get(e->gr.store, u, e->gr.acc[t]));
        for (size_t i = 0; i < s; i++) /* g + x: the in-RAM sum's order */
            x[i] = g[i] + x[i];
    }
    e->gr.sumsq[u] = e->gr.last_micro ? zt_sumsq(x, s) : -1.0;
    ZT_TRY(zt_store_put(e->gr.store, u, x));
    e->gr.buf[t] = u;
    e->gr.buf_loading[t] = 0;
    return 0;
}

int zt_zero_clear_shards(zt_engine *e)
{
    int nu = e->layout.n_units;
    size_t N = (size_t)e->comm.size;
    if (!e->gr.store) {
        for (int u = 0; u < nu; u++)
            memset(e->gr.Gs[u], 0, e->geo.padded[u] / N * sizeof(float));
        return 0;
    }
    ZT_TRY(gbuf_take(e, 0));
    memset(e->gr.rs_tmp[0], 0, shard_max(e) * sizeof(float));
    for (int u = 0; u < nu; u++) {
        ZT_TRY(zt_store_put(e->gr.store, u, e->gr.rs_tmp[0]));
        e->gr.sumsq[u] = 0.0;
    }
    return zt_store_sync(e->gr.store);
}

/* ---- stages 2-3: gradients reduced during the backward pass ---------------------------- */

static int finish_reduce(zt_engine *e, int u)
{
    int t = e->gr.rpend_tmp[u];
    ZT_TRY(zt_comm_wait_range(&e->comm, e->gr.rpend_lo[u], e->gr.rpend_hi[u]));
    e->gr.rpend_lo[u] = e->gr.rpend_hi[u] = -1;
    if (e->gr.store) {
        ZT_TRY(gshard_finish(e, u, t));
        e->gr.rpend_tmp[u] = -1;
    } else if (t >= 0) { /* a later micro-batch: add its shard */
        size_t s = zt_geometry_len(&e->geo, u, 1);
        float *g = e->gr.Gs[u], *x = e->gr.rs_tmp[t];
        for (size_t i = 0; i < s; i++)
            g[i] += x[i];
        e->gr.rpend_tmp[u] = -1;
    }
    for (int i = 0; i < 2; i++)
        if (e->gr.scratch_unit[i] == u)
            e->gr.scratch_unit[i] = -1;
    return 0;
}

/* Stages 0-1 with overlap: in the step's last micro-batch a unit's summed gradient is
 * final as soon as its backward is done (the whole-gradient unit: at the end of the pass), so its
 * reduce-scatter starts then instead of in the step; the step waits for it. */
static int early_reduce(const zt_engine *e)
{
    return e->cfg.zero_stage < 2 && e->gr.Gs && e->gr.overlap && e->gr.last_micro;
}

int zt_zero_pass_grads_begin(zt_engine *e)
{
    /* a micro-batch after reductions that started early (more micro-batches than the
     * configured accumulation): those sums are stale; the step reduces everything again */
    if (e->cfg.zero_stage >= 2 || !e->gr.Gs)
        return 0;
    for (int u = 0; u < e->layout.n_units; u++) {
        ZT_TRY(zt_comm_wait_range(&e->comm, e->gr.rpend_lo[u], e->gr.rpend_hi[u]));
        e->gr.rpend_lo[u] = e->gr.rpend_hi[u] = -1;
    }
    return 0;
}

/* the scratch buffer unit u holds, or -1 */
static int slot_of(const zt_engine *e, int u)
{
    return e->gr.scratch_unit[0] == u ? 0 : e->gr.scratch_unit[1] == u ? 1 : -1;
}

/* the scratch buffer unit u gets: u & 1, unless a unit whose gradients are still open (lent
 * and not reduced: G set) holds it; -1 when both are so held */
static int lend_slot(const zt_engine *e, int u)
{
    int i = u & 1;
    if (e->gr.scratch_unit[i] >= 0 && e->gr.G[e->gr.scratch_unit[i]])
        i ^= 1;
    return e->gr.scratch_unit[i] >= 0 && e->gr.G[e->gr.scratch_unit[i]] ? -1 : i;
}

int zt_zero_grads_can_lend(const zt_engine *e, int u)
{
    if (e->cfg.zero_stage < 2 || u == e->gr.whole_grad || lend_slot(e, u) >= 0)
        return 0;
    return zt_fail(ZT_E_INVAL, "stage %d lends gradient buffers to two units at a time "
                   "(besides unit %d): units %d and %d still have theirs; make one's gradients "
                   "ready (zt_engine_unit_grads_ready) before acquiring unit %d for backward",
                   e->cfg.zero_stage, e->gr.whole_grad, e->gr.scratch_unit[0],
                   e->gr.scratch_unit[1], u);
}

int zt_zero_grads_lend(zt_engine *e, int u)
{
    if (e->cfg.zero_stage < 2 || u == e->gr.whole_grad)
        return 0;
    ZT_TRY(zt_zero_grads_can_lend(e, u));
    int i = lend_slot(e, u); /* the reduction of a unit that holds it finishes first */
    if (e->gr.scratch_unit[i] >= 0)
        ZT_TRY(finish_reduce(e, e->gr.scratch_unit[i]));
    e->gr.G[u] = e->gr.scratch[i];
    e->gr.scratch_unit[i] = u;
    memset(e->gr.G[u], 0, e->geo.padded[u] * sizeof(float));
    if (e->gr.store && !e->gr.accum_first) { /* the shard so far, for gshard_finish */
        ZT_TRY(gacc_alloc(e));
        ZT_TRY(zt_store_prefetch(e->gr.store, u, e->gr.acc[i]));
    }
    return 0;
}

static int reduce_into_shard(zt_engine *e, int u, int tmp)
{
    if (e->gr.store) { /* into rs_tmp, written back when complete */
        ZT_TRY(gbuf_take(e, tmp));
        e->gr.rpend_tmp[u] = tmp;
        return start_rs(e, u, e->gr.G[u], e->gr.rs_tmp[tmp], &e->gr.rpend_lo[u],
                        &e->gr.rpend_hi[u]);
    }
    float *dst = e->gr.accum_first ? e->gr.Gs[u] : e->gr.rs_tmp[tmp];
    e->gr.rpend_tmp[u] = e->gr.accum_first ? -1 : tmp;
    return start_rs(e, u, e->gr.G[u], dst, &e->gr.rpend_lo[u], &e->gr.rpend_hi[u]);
}

int zt_zero_grads_reduce(zt_engine *e, int u)
{
    if (early_reduce(e) && u != e->gr.whole_grad)
        return start_rs(e, u, e->gr.G[u], e->gr.Gs[u], &e->gr.rpend_lo[u], &e->gr.rpend_hi[u]);
    if (e->cfg.zero_stage < 2 || u == e->gr.whole_grad)
        return 0;
    if (u == e->gr.skip_unit) {
        e->gr.scratch_unit[slot_of(e, u)] = -1;
        e->gr.G[u] = NULL;
        return 0;
    }
    ZT_TRY(reduce_into_shard(e, u, slot_of(e, u)));
    e->gr.G[u] = NULL; /* the scratch buffer stays lent until the reduction completes */
    return e->gr.overlap ? 0 : finish_reduce(e, u);
}

int zt_zero_grads_end(zt_engine *e)
{
    int w = e->gr.whole_grad;
    if (early_reduce(e))
        return w >= 0 ? start_rs(e, w, e->gr.G[w], e->gr.Gs[w], &e->gr.rpend_lo[w],
                                 &e->gr.rpend_hi[w])
                      : 0;
    if (e->cfg.zero_stage < 2)
        return 0;
    for (int i = 0; i < 2; i++)
        if (e->gr.scratch_unit[i] >= 0)
            ZT_TRY(finish_reduce(e, e->gr.scratch_unit[i]));
    if (w >= 0) {
        ZT_TRY(reduce_into_shard(e, w, 0));
        ZT_TRY(finish_reduce(e, w));
        memset(e->gr.G[w], 0, e->geo.padded[w] * sizeof(float));
    }
    e->gr.accum_first = 0;
    return 0;
}

/* ---- the step ------------------------------------------------------------------------------ */

int zt_zero_reduce(zt_engine *e, double *sumsq, int *bad_unit)
{
    int nu = e->layout.n_units;
    float **gs = e->gr.Gs ? e->gr.Gs : e->gr.G;
    double local = 0.0;
    if (e->cfg.zero_stage < 2 && e->gr.Gs) /* stages 0-1: every unit's summed gradient, unless */
        for (int u = 0; u < nu; u++)   /* its reduction started in the last backward pass */
            if (e->gr.rpend_lo[u] < 0)
                ZT_TRY(start_rs(e, u, e->gr.G[u], e->gr.Gs[u], &e->gr.rpend_lo[u],
                                &e->gr.rpend_hi[u]));
    for (int u = 0; u < nu; u++) {
        ZT_TRY(zt_comm_wait_range(&e->comm, e->gr.rpend_lo[u], e->gr.rpend_hi[u]));
        e->gr.rpend_lo[u] = e->gr.rpend_hi[u] = -1;
        if (e->gr.store && e->gr.sumsq[u] < 0.0) {
            /* not summed in a last micro-batch (fewer than configured): read it */
            ZT_TRY(gbuf_read(e, u, 1));
            e->gr.sumsq[u] = zt_sumsq(e->gr.rs_tmp[u & 1], zt_geometry_len(&e->geo, u, 1));
        }
        double x = e->gr.store ? e->gr.sumsq[u] : zt_sumsq(gs[u], zt_geometry_len(&e->geo, u, 1));
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
 * all-gathers. Between them the state lives in e->up_*. */

static void update_begin(zt_engine *e)
{
    int nu = e->layout.n_units, nw = e->oo.store ? e->oo.n_work : 0;
    e->up.g = 0;
    e->oo.cached = -1;
    e->up.err = 0;
    for (int u = 0; e->ps.store && u < nu && u < e->ps.n_slot - 1 && !e->up.err; u++)
        e->up.err = pshard_prefetch(e, u);
    for (int k = 0; k < e->oo.n_group && k < nw - 1 && !e->up.err; k++) /* read ahead */
        e->up.err = zt_store_prefetch(e->oo.store, e->oo.group[k].blob, e->oo.work[k % nw]);
    for (int u = 0; e->gr.store && u < 2 && u < nu && !e->up.err; u++)
        e->up.err = gbuf_read(e, u, 0);
}

static int update_unit(zt_engine *e, int u)
{
    int nu = e->layout.n_units, r = e->comm.rank, st = e->cfg.zero_stage;
    int nw = e->oo.store ? e->oo.n_work : 0, ng = e->oo.n_group;
    float **gs = e->gr.Gs ? e->gr.Gs : e->gr.G;
    ZT_TRY(e->up.err);
    zt_spart *part = zt_ost_part(&e->os, u, r);
    size_t len = part->len;
    float *ps = NULL, *gu = e->gr.store ? e->gr.rs_tmp[u & 1] : gs[u];
    if (st >= 3)
        ZT_TRY(pshard_get(e, u, &ps));
    if (e->gr.store) { /* this unit's gradient shard in; the next one's read starts */
        ZT_TRY(gbuf_read(e, u, 1));
        if (u + 1 < nu)
            ZT_TRY(gbuf_read(e, u + 1, 0));
    }
    /* parameters: stage 3's shard, else the whole unit; gradients: the reduced shard (one
     * rank: the whole unit, which is its shard) */
    zt_ost_io io = {st >= 3 ? ps : e->P[u], gu, st >= 3, 1, e->oo.store};
    /* this unit's sub-groups [c0, c1) of the shard (one, [0, len), without offload) */
    for (size_t c0 = 0, c1 = len; c0 < len; c0 = c1) {
        zt_ost_view v;
        if (nw) {
            const zt_ogroup *og = &e->oo.group[e->up.g];
            c1 = og->c1;
            ZT_TRY(zt_store_get(e->oo.store, og->blob, e->oo.work[e->up.g % nw]));
            zt_ost_view_of(e->os.opt, e->os.beta1, e->oo.work[e->up.g % nw], c0, c1 - c0, og->f0,
                           og->nc, &v);
        } else {
            zt_ost_view_of(e->os.opt, e->os.beta1, part->state, 0, len, 0, part->n_compact, &v);
        }
        if (e->os.opt == ZT_OPT_ADAFACTOR) /* (one sub-group per unit: group_floats) */
            ZT_TRY(zt_ost_adafactor_unit(&e->os, &e->up.hp, u, &part, 1, &v, &io));
        else
            ZT_TRY(zt_ost_update_range(&e->os, &e->up.hp, part, c0, c1, &v, &io));
        if (nw) { /* write back; the buffer of group g - 1 then reads group g + nw - 1 */
            ZT_TRY(zt_store_put(e->oo.store, e->oo.group[e->up.g].blob, e->oo.work[e->up.g % nw]));
            if (e->up.g >= 1)
                ZT_TRY(zt_store_wait(e->oo.store, e->oo.group[e->up.g - 1].blob));
            if (e->up.g + nw - 1 < ng)
                ZT_TRY(zt_store_prefetch(e->oo.store, e->oo.group[e->up.g + nw - 1].blob,
                                         e->oo.work[(e->up.g + nw - 1) % nw]));
            e->up.g++;
        }
    }
    if (st >= 3 && e->ga.persist[u] && e->ps.store) { /* in place: the shard copy may go */
        zt_geometry_put(&e->geo, u, r, ps, e->P[u]);
        ZT_TRY(start_ag(e, u, NULL, e->P[u], &e->gr.rpend_lo[u], &e->gr.rpend_hi[u]));
    } else if (st >= 3 && e->ga.persist[u]) {
        ZT_TRY(start_ag(e, u, e->ga.Ps[u], e->P[u], &e->gr.rpend_lo[u], &e->gr.rpend_hi[u]));
    } else if (st < 3 && e->comm.size > 1) { /* in place: this rank's slices of P[u] */
        ZT_TRY(start_ag(e, u, NULL, e->P[u], &e->gr.rpend_lo[u], &e->gr.rpend_hi[u]));
    }
    if (st >= 3) { /* write the updated shard back; read a later one ahead */
        ZT_TRY(pshard_done(e, u, 1));
        if (u + e->ps.n_slot - 1 < nu)
            ZT_TRY(pshard_prefetch(e, u + e->ps.n_slot - 1));
    }
    zt_comm_poll(&e->comm);
    return 0;
}

static int update_end(zt_engine *e)
{
    int nu = e->layout.n_units, nw = e->oo.store ? e->oo.n_work : 0;
    if (e->oo.store)
        ZT_TRY(zt_store_sync(e->oo.store));
    if (e->ps.store)
        ZT_TRY(zt_store_sync(e->ps.store));
    for (int u = 0; u < nu; u++) {
        ZT_TRY(zt_comm_wait_range(&e->comm, e->gr.rpend_lo[u], e->gr.rpend_hi[u]));
        e->gr.rpend_lo[u] = e->gr.rpend_hi[u] = -1;
    }
    /* the next update's first sub-groups, read now (they are final): they stream in during
     * the passes before it instead of at its start; update_begin finds them under way */
    for (int k = 0; k < e->oo.n_group && k < nw - 1; k++)
        ZT_TRY(zt_store_prefetch(e->oo.store, e->oo.group[k].blob, e->oo.work[k % nw]));
    return 0;
}

/* the deferred updates of units up to u (all: u = n_units - 1) */
static int lazy_upto(zt_engine *e, int u)
{
    while (e->up.lz_pending && e->up.lz_next <= u) {
        int rc = update_unit(e, e->up.lz_next++);
        if (rc == 0 && e->up.lz_next == e->layout.n_units) {
            e->up.lz_pending = 0;
            rc = update_end(e);
        }
        if (rc < 0) {
            e->up.lz_pending = 0;
            return rc;
        }
    }
    return 0;
}

int zt_zero_flush(zt_engine *e)
{
    return e && e->up.lz_pending ? lazy_upto(e, e->layout.n_units - 1) : 0;
}

/* Stage 0: whole units, every rank's shard of the state (the parts), updated on every
 * rank; the reduced shards are all-gathered back into the whole gradients first. */
static int update_whole(zt_engine *e)
{
    int nu = e->layout.n_units, np = e->os.n_parts;
    for (int u = 0; e->comm.size > 1 && u < nu; u++)
        ZT_TRY(start_ag(e, u, e->gr.Gs[u], e->gr.G[u], &e->gr.rpend_lo[u], &e->gr.rpend_hi[u]));
    zt_spart *parts[ZT_MAX_PARTS];
    zt_ost_view views[ZT_MAX_PARTS];
    for (int u = 0; u < nu; u++) {
        zt_ost_io io = {e->P[u], e->gr.G[u], 0, 0, e->oo.store};
        ZT_TRY(zt_comm_wait_range(&e->comm, e->gr.rpend_lo[u], e->gr.rpend_hi[u]));
        e->gr.rpend_lo[u] = e->gr.rpend_hi[u] = -1;
        for (int k = 0; k < np; k++) {
            zt_spart *p = &e->os.parts[u * np + k];
            parts[k] = p;
            zt_ost_view_of(e->os.opt, e->os.beta1, p->state, 0, p->len, 0, p->n_compact, &views[k]);
            if (e->os.opt != ZT_OPT_ADAFACTOR)
                ZT_TRY(zt_ost_update_range(&e->os, &e->up.hp, p, 0, p->len, &views[k], &io));
        }
        if (e->os.opt == ZT_OPT_ADAFACTOR)
            ZT_TRY(zt_ost_adafactor_unit(&e->os, &e->up.hp, u, parts, np, views, &io));
    }
    return 0;
}

int zt_zero_update(zt_engine *e, const zt_ost_hparams *hp)
{
    e->up.hp = *hp; /* (a deferred update of stage 3 applies it at the unit's next use) */
    int nu = e->layout.n_units, st = e->cfg.zero_stage;
    if (st == 0)
        return update_whole(e);
    update_begin(e);
    /* Stage 3 with offload and no persistent unit: each unit's update waits for its first
     * use in the next forward pass (acquire), so its offloaded state and shard stream in
     * and out while the units before it compute. Same arithmetic, same order: the result is
     * bit-identical; zt_zero_flush applies what is left wherever the state is read.
     * (Adafactor's update of a unit has collectives of its own: not deferred.) */
    if (st >= 3 && (e->oo.store || e->ps.store) && !e->ga.any_persist &&
        e->os.opt != ZT_OPT_ADAFACTOR) {
        e->up.lz_pending = 1;
        e->up.lz_next = 0;
        return 0;
    }
    for (int u = 0; u < nu; u++)
        ZT_TRY(update_unit(e, u));
    return update_end(e);
}

/* ---- whole-model data in and out -------------------------------------------------------- */

int zt_zero_fill_params(zt_engine *e, int (*fill)(int u, float *buf, void *arg), void *arg)
{
    int nu = e->layout.n_units;
    float *tmp;
    if (e->cfg.zero_stage < 3) {
        for (int u = 0; u < nu; u++) {
            memset(e->P[u], 0, e->geo.padded[u] * sizeof(float));
            ZT_TRY(fill(u, e->P[u], arg));
        }
        return 0;
    }
    /* stage 3: one unit at a time in a scratch buffer; the whole model never exists here */
    if (!(tmp = zt_mem_alloc(zt_geometry_max(&e->geo, -1) * sizeof(float), ZT_ALIGN_PAGE,
                             ZT_MEM_OTHER)))
        return ZT_E_NOMEM;
    int rc = 0;
    for (int u = 0; u < nu && rc == 0; u++) {
        memset(tmp, 0, e->geo.padded[u] * sizeof(float));
        if ((rc = fill(u, tmp, arg)) < 0)
            break;
        if ((rc = pshard_set(e, u, tmp)) < 0)
            break;
        if (e->ga.persist[u])
            memcpy(e->P[u], tmp, e->geo.padded[u] * sizeof(float));
    }
    zt_mem_free(tmp, zt_geometry_max(&e->geo, -1) * sizeof(float), ZT_MEM_OTHER);
    return rc;
}

/* ---- the report -------------------------------------------------------------------------- */

void zt_zero_footprint(const zt_engine *e, zt_footprint *o)
{
    double pool = 0.0;
    for (int i = 0; e->cfg.zero_stage >= 3 && i < e->ga.n_pool; i++)
        pool += (double)e->ga.pool[i].cap;
    zt_fp_in in = {
        .L = &e->layout, .N = e->comm.size, .stage = e->cfg.zero_stage, .bucket = e->geo.bucket,
        .whole_grad = e->gr.whole_grad, .opt_off = e->cfg.offload_optimizer,
        .par_off = e->cfg.zero_stage >= 3 ? e->cfg.offload_param : ZT_OFFLOAD_NONE,
        .grads_off = e->gr.store != NULL, .grad_acc_buffers = e->gr.acc[0] != NULL,
        .param_slots = e->ps.n_slot, .persist_threshold = e->cfg.persist_threshold,
        .gathered = pool, .opt_work = (double)zt_zero_offload_bytes(e)};
    size_t rep = e->os.opt == ZT_OPT_ADAFACTOR ? e->os.af_floats * sizeof(float) : 0;
    in.opt_replicated = (double)rep;
    in.opt_state = (double)(zt_ost_state_bytes(&e->os) - rep);
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
double zt_zero_traffic_theory(zt_engine *e, const zt_use *train, int n, double *plain)
{
    int nu = e->layout.n_units;
    double P = 0.0, pers = 0.0, A = e->cfg.grad_accum_steps > 1 ? e->cfg.grad_accum_steps : 1;
    zt_sched S = {0};
    *plain = 0.0;
    if (e->comm.size == 1)
        return 0.0;
    for (int u = 0; u < nu; u++)
        P += (double)e->geo.padded[u];
    *plain = 2.0;
    if (e->cfg.zero_stage < 2)
        return 2.0;
    if (e->cfg.zero_stage == 2)
        return A + 1.0;
    *plain = 3.0;
    for (int u = 0; u < nu; u++)
        pers += e->ga.persist[u] ? (double)e->geo.padded[u] : 0.0;
    zt_use *saved = e->un.uses;
    int n_saved = e->un.n_uses, *until = NULL, *rel = NULL;
    if (n <= 0 || !(S.refs = calloc((size_t)nu, sizeof *S.refs)) ||
        !(until = malloc(sizeof *until * (size_t)n)) || !(rel = malloc(sizeof *rel * (size_t)n))) {
        free(S.refs);
        free(until);
        return 0.0; /* no order known yet */
    }
    S.dry = 1;
    S.acquired = -1;
    e->un.uses = (zt_use *)train; /* (read only: the dry run changes no use) */
    e->un.n_uses = n;
    /* use j is released before acquire until[j] (the order's own record; not known: never) */
    for (int j = 0; j < n; j++)
        until[j] = train[j].until > 0 ? j + train[j].until : n;
    for (int k = 0; k < n; k++) {
        int nrel = 0;
        for (int j = 0; j < k; j++)
            if (until[j] == k)
                rel[nrel++] = j;
        sched_enter(e, &S, k, rel, nrel);
    }
    e->un.uses = saved;
    e->un.n_uses = n_saved;
    free(until);
    free(rel);
    free(S.refs);
    return (A * (P + S.moved) + pers) / P;
}
