/* ostate.c - the optimizer state of the engine's units (ostate.h): the compact parameters,
 * the runs of each shard, the layout of a stretch of state, the elementwise updates (AdamW,
 * AdamW8bit) and Adafactor's three phases with their reductions in rank order. It does not
 * decide where the state lives or when a unit is updated (zero.c). */
#include "ostate.h"
#include "../common/half.h"
#include "../common/err.h"
#include "../memory/mem.h"
#include "../offload/store.h"
#include "../optimizer/adafactor.h"
#include "../optimizer/adam8bit.h"
#include "../optimizer/adamw.h"

#include <stdlib.h>
#include <string.h>

/* ---- geometry and runs ------------------------------------------------------------------ */

int zt_ost_runs(const zt_layout *L, const unsigned char *compact, int u, const zt_geom *g,
                int r, zt_srun **out, int *n, size_t *n_compact)
{
    const zt_unit_def *ud = &L->units[u];
    zt_seg s;
    int cap = 0, cnt = 0;
    size_t fc = 0;
    zt_srun *run = NULL;
    *out = NULL;
    *n = 0;
    *n_compact = 0;
    for (int k = 0; zt_geom_seg(g, r, k, &s); k++)
        for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++) {
            const zt_param_def *d = &L->params[i];
            size_t a = d->offset > s.off ? d->offset : s.off;
            size_t b = d->offset + d->numel < s.off + s.len ? d->offset + d->numel
                                                             : s.off + s.len;
            if (a >= b)
                continue;
            if (cnt == cap) {
                zt_srun *nr = realloc(run, sizeof *run * (size_t)(cap = cap ? 2 * cap : 16));
                if (!nr) {
                    free(run);
                    return zt_fail(ZT_E_NOMEM, "out of memory");
                }
                run = nr;
            }
            zt_srun *x = &run[cnt++];
            x->j0 = s.soff + (a - s.off);
            x->j1 = x->j0 + (b - a);
            x->a = a;
            x->param = i;
            x->compact = compact && compact[i];
            x->f0 = x->compact ? fc : 0;
            fc += x->compact ? b - a : 0;
        }
    *out = run;
    *n = cnt;
    *n_compact = fc;
    return 0;
}

size_t zt_ost_compact_before(const zt_spart *p, size_t c)
{
    for (int k = 0; k < p->n_run; k++) {
        const zt_srun *x = &p->run[k];
        if (x->compact && x->j1 > c)
            return x->f0 + (x->j0 < c ? c - x->j0 : 0);
    }
    return p->n_compact;
}

/* ---- layout and sections ------------------------------------------------------------------ */

/* each optimizer's sections, then (half precision) the fp32 master weights */
#define MASTER_SEC {"master", ZT_SEC_POS, ZT_F32}
static const zt_ost_sec secs_adamw[] = {
    {"exp_avg", ZT_SEC_POS, ZT_F32}, {"exp_avg_sq", ZT_SEC_POS, ZT_F32}, MASTER_SEC};
static const zt_ost_sec secs_8bit[] = {
    {"state1", ZT_SEC_POS, ZT_U8},           {"state2", ZT_SEC_POS, ZT_U8},
    {"absmax1", ZT_SEC_BLOCK, ZT_F32},       {"absmax2", ZT_SEC_BLOCK, ZT_F32},
    {"state1_fp32", ZT_SEC_COMPACT, ZT_F32}, {"state2_fp32", ZT_SEC_COMPACT, ZT_F32}, MASTER_SEC};
static const zt_ost_sec secs_af[] = {
    {"exp_avg", ZT_SEC_POS, ZT_F32}, {"exp_avg_sq", ZT_SEC_COMPACT, ZT_F32}, MASTER_SEC};

int zt_ost_sections(int opt, int lay, const zt_ost_sec **out)
{
    int m = (lay & ZT_OST_MASTER) != 0;
    switch (opt) {
    case ZT_OPT_ADAMW8BIT: *out = secs_8bit; return 6 + m;
    case ZT_OPT_ADAFACTOR:
        *out = lay & ZT_OST_BETA1 ? secs_af : secs_af + 1;
        return (lay & ZT_OST_BETA1 ? 2 : 1) + m;
    default: *out = secs_adamw; return 2 + m;
    }
}

int zt_ost_layout(const zt_config *c)
{
    return (c->optimizer == ZT_OPT_ADAFACTOR && c->adafactor_beta1 >= 0.0f ? ZT_OST_BETA1 : 0) |
           (c->precision != ZT_PREC_FP32 ? ZT_OST_MASTER : 0);
}

size_t zt_ost_sec_elems(const zt_ost_sec *s, size_t n, size_t nc)
{
    return s->kind == ZT_SEC_POS ? n
           : s->kind == ZT_SEC_BLOCK ? (n + ZT_QBLOCK - 1) / ZT_QBLOCK : nc;
}

size_t zt_ost_sec_offset(int opt, int lay, int sec, size_t n, size_t nc)
{
    const zt_ost_sec *s;
    int ns = zt_ost_sections(opt, lay, &s);
    size_t off = 0;
    for (int k = 0; k < sec && k < ns; k++)
        off += zt_ost_sec_elems(&s[k], n, nc) * zt_dtype_size(s[k].dtype);
    return off;
}

size_t zt_ost_bytes(int opt, int lay, size_t n, size_t nc)
{
    const zt_ost_sec *s;
    int ns = zt_ost_sections(opt, lay, &s);
    return zt_ost_sec_offset(opt, lay, ns, n, nc);
}

void zt_ost_view_of(int opt, int lay, uint8_t *base, size_t c0, size_t n, size_t f0,
                    size_t nc, zt_ost_view *v)
{
    memset(v, 0, sizeof *v);
    v->c0 = c0;
    v->f0 = f0;
    switch (opt) {
    case ZT_OPT_ADAMW8BIT:
        v->cm = base;
        v->cv = base + n;
        v->am = (float *)(void *)(base + zt_ost_sec_offset(opt, lay, 2, n, nc));
        v->av = (float *)(void *)(base + zt_ost_sec_offset(opt, lay, 3, n, nc));
        v->fm = (float *)(void *)(base + zt_ost_sec_offset(opt, lay, 4, n, nc));
        v->fv = (float *)(void *)(base + zt_ost_sec_offset(opt, lay, 5, n, nc));
        break;
    case ZT_OPT_ADAFACTOR:
        v->m = lay & ZT_OST_BETA1 ? (float *)(void *)base : NULL;
        v->fv = (float *)(void *)(base + (lay & ZT_OST_BETA1 ? n * sizeof(float) : 0));
        break;
    default:
        v->m = (float *)(void *)base;
        v->v = v->m + n;
        break;
    }
    if (lay & ZT_OST_MASTER) { /* the last section */
        const zt_ost_sec *s;
        int ns = zt_ost_sections(opt, lay, &s);
        v->w = (float *)(void *)(base + zt_ost_sec_offset(opt, lay, ns - 1, n, nc));
    }
}

const char *zt_ost_name(int opt)
{
    return opt == ZT_OPT_ADAMW8BIT   ? "AdamW8bit"
           : opt == ZT_OPT_ADAFACTOR ? "Adafactor"
           : opt == ZT_OPT_LAMB      ? "Lamb"
                                     : "AdamW";
}

int zt_ost_unitwise(int opt)
{
    return opt == ZT_OPT_ADAFACTOR || opt == ZT_OPT_LAMB;
}

/* ---- the engine's state ------------------------------------------------------------------- */

/* Adafactor's shape of parameter d: factored over its last two dimensions when it has two
 * or more (Hugging Face's rule: [..., R, C] is B = the product of the leading dimensions
 * R x C matrices), otherwise a vector */
static zt_adafactor_shape af_shape(const zt_param_def *d)
{
    zt_adafactor_shape sh = {d->numel, 0, 1};
    if (d->ndim >= 2) {
        sh = (zt_adafactor_shape){(size_t)d->shape[d->ndim - 2], (size_t)d->shape[d->ndim - 1],
                                  1};
        for (int k = 0; k < d->ndim - 2; k++)
            sh.batch *= (size_t)d->shape[k];
    }
    return sh;
}

/* the factored moments of a shape: its rows (B x R, the row sums' count and the column
 * moments' offset) and all of them (B x (R + C)); 0 for a vector */
static size_t af_rows(const zt_adafactor_shape *sh)
{
    return sh->cols ? sh->batch * sh->rows : 0;
}

static size_t af_moments(const zt_adafactor_shape *sh)
{
    return sh->cols ? sh->batch * (sh->rows + sh->cols) : 0;
}

static int param_compact(const zt_config *c, const zt_layout *L, int i)
{
    const zt_param_def *d = &L->params[i];
    if (c->optimizer == ZT_OPT_ADAFACTOR)
        return d->ndim < 2;
    if (c->optimizer != ZT_OPT_ADAMW8BIT)
        return 0;
    if (d->numel < c->min_8bit_size)
        return 1;
    if (c->n_fp32_state < 0) /* the default: the embedding tables */
        return d->embedding;
    for (int k = 0; k < c->n_fp32_state; k++)
        if (c->fp32_state && c->fp32_state[k] && strstr(d->name, c->fp32_state[k]))
            return 1;
    return 0;
}

int zt_ost_setup(zt_ostate *os, const zt_config *cfg, const zt_layout *L,
                 const zt_geometry *geo, zt_comm *comm, zt_mem_account *acct)
{
    os->acct = acct;
    os->cfg = cfg;
    os->L = L;
    os->geo = geo;
    os->comm = comm;
    int nu = L->n_units, np = L->n_params, N = comm->size;
    os->opt = os->cfg->optimizer;
    os->lay = zt_ost_layout(os->cfg);
    os->master_fresh = 1;
    os->n_parts = os->cfg->zero_stage == 0 ? N : 1;
    if (os->n_parts > ZT_MAX_PARTS)
        return zt_fail(ZT_E_UNSUPPORTED, "ZeRO stage 0 over %d ranks: at most %d (use stage 1 "
                       "or more, which shards the optimizer state)", N, ZT_MAX_PARTS);
    if (!(os->pcompact = calloc((size_t)np, 1)) ||
        !(os->parts = calloc((size_t)nu * (size_t)os->n_parts, sizeof *os->parts)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int i = 0; i < np; i++)
        os->pcompact[i] = (unsigned char)param_compact(cfg, L, i);
    for (int u = 0; u < nu; u++) {
        zt_geom g = zt_geometry_unit(os->geo, u);
        for (int k = 0; k < os->n_parts; k++) {
            zt_spart *p = &os->parts[u * os->n_parts + k];
            p->rank = os->n_parts > 1 ? k : os->comm->rank;
            p->len = os->geo->padded[u] / (size_t)N;
            ZT_TRY(zt_ost_runs(os->L, os->pcompact, u, &g, p->rank, &p->run, &p->n_run,
                               &p->n_compact));
        }
    }
    if (os->opt == ZT_OPT_ADAMW8BIT) {
        if (!(os->maps = zt_mem_alloc_in(os->acct, sizeof *os->maps, 64, ZT_MEM_OTHER))) /* (tables) */
            return zt_fail(ZT_E_NOMEM, "out of memory");
        zt_adam8_maps_init(os->maps);
    }
    if (os->opt == ZT_OPT_ADAFACTOR) {
        size_t most = 0, mostp = 0, scratch = 1;
        if (!(os->af_off = calloc((size_t)np, sizeof *os->af_off)) ||
            !(os->af_soff = calloc((size_t)np, sizeof *os->af_soff)))
            return zt_fail(ZT_E_NOMEM, "out of memory");
        os->af_floats = 0;
        for (int u = 0; u < nu; u++) {
            const zt_unit_def *ud = &os->L->units[u];
            size_t len = 0;
            for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++) {
                const zt_param_def *d = &os->L->params[i];
                zt_adafactor_shape sh = af_shape(d);
                size_t sc = zt_adafactor_scratch(&sh);
                scratch = sc > scratch ? sc : scratch;
                os->af_off[i] = os->af_floats;
                os->af_floats += af_moments(&sh);
                os->af_soff[i] = len; /* [row sums][column sums][p^2] */
                len += af_moments(&sh) + 1;
            }
            most = len > most ? len : most;
            mostp = (size_t)ud->n_params > mostp ? (size_t)ud->n_params : mostp;
        }
        /* scratch: a part's sums, the total, and every rank's sums */
        os->af_len = most + mostp;
        os->af_buf_n = os->af_len * (size_t)(2 + N);
        if (!(os->af_buf = malloc(os->af_buf_n * sizeof *os->af_buf)) ||
            !(os->af_lr = malloc(mostp * sizeof *os->af_lr)) ||
            !(os->af_cfac = malloc(scratch * sizeof *os->af_cfac)))
            return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    if (os->opt == ZT_OPT_LAMB) {
        os->lb_np = 1;
        for (int u = 0; u < nu; u++)
            os->lb_np = L->units[u].n_params > os->lb_np ? L->units[u].n_params : os->lb_np;
        if (!(os->lb_buf = malloc((size_t)(2 + N) * 2 * (size_t)os->lb_np * sizeof(double))))
            return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    return 0;
}

void zt_ost_teardown(zt_ostate *os)
{
    int nu = os->L ? os->L->n_units : 0; /* (setup may not have run) */
    for (int i = 0; os->parts && i < nu * os->n_parts; i++) {
        zt_spart *p = &os->parts[i];
        if (p->state)
            zt_mem_free_in(os->acct, p->state, ZT_OST_ALLOC(zt_ost_bytes(os->opt, os->lay, p->len,
                                                            p->n_compact)), ZT_MEM_OPTIMIZER);
        free(p->run);
    }
    free(os->parts);
    os->parts = NULL;
    free(os->pcompact);
    os->pcompact = NULL;
    if (os->maps)
        zt_mem_free_in(os->acct, os->maps, sizeof *os->maps, ZT_MEM_OTHER);
    os->maps = NULL;
    if (os->af_rc)
        zt_mem_free_in(os->acct, os->af_rc, os->af_floats * sizeof(float), ZT_MEM_OPTIMIZER);
    os->af_rc = NULL;
    free(os->af_off);
    free(os->af_soff);
    free(os->af_buf);
    free(os->af_lr);
    free(os->af_cfac);
    os->af_cfac = NULL;
    free(os->lb_buf);
    os->lb_buf = NULL;
    os->af_off = os->af_soff = NULL;
    os->af_buf = NULL;
    os->af_lr = NULL;
}

zt_spart *zt_ost_part(const zt_ostate *os, int u, int r)
{
    return &os->parts[u * os->n_parts + (os->n_parts > 1 ? r : 0)];
}

void zt_ost_init(const zt_ostate *os, uint8_t *base, size_t n, size_t nc)
{
    /* zeros throughout: AdamW8bit's fresh codes are 0, as zt_adam8bit_init */
    memset(base, 0, zt_ost_bytes(os->opt, os->lay, n, nc));
}

int zt_ost_alloc_parts(zt_ostate *os)
{
    for (int i = 0; i < os->L->n_units * os->n_parts; i++) {
        zt_spart *p = &os->parts[i];
        size_t b = zt_ost_bytes(os->opt, os->lay, p->len, p->n_compact);
        if (!(p->state = zt_mem_alloc_in(os->acct, ZT_OST_ALLOC(b), ZT_ALIGN_PAGE, ZT_MEM_OPTIMIZER))) {
            for (int j = 0; j < i; j++) {
                zt_spart *q = &os->parts[j];
                zt_mem_free_in(os->acct, q->state, ZT_OST_ALLOC(zt_ost_bytes(os->opt, os->lay, q->len,
                                                                q->n_compact)),
                            ZT_MEM_OPTIMIZER);
                q->state = NULL;
            }
            return zt_fail(ZT_E_NOMEM, "optimizer state: %zu bytes: out of memory",
                           zt_ost_state_bytes(os));
        }
        zt_ost_init(os, p->state, p->len, p->n_compact);
    }
    return 0;
}

int zt_ost_alloc_replicated(zt_ostate *os)
{
    if (os->opt != ZT_OPT_ADAFACTOR || os->af_rc || !os->af_floats)
        return 0;
    if (!(os->af_rc = zt_mem_alloc_in(os->acct, os->af_floats * sizeof(float), 64, ZT_MEM_OPTIMIZER)))
        return zt_fail(ZT_E_NOMEM, "Adafactor: %zu bytes of factored moments: out of memory",
                       os->af_floats * sizeof(float));
    memset(os->af_rc, 0, os->af_floats * sizeof(float));
    return 0;
}

/* ---- the updates -------------------------------------------------------------------------- */

static int poll(zt_ostate *os, const zt_ost_io *io)
{
    zt_comm_poll(os->comm);
    return io->poll ? zt_store_poll(io->poll) : 0;
}

/* parameter and gradient pointers of shard position j of run x (parameters: their index;
 * p_at only in fp32) */
static size_t p_idx(const zt_ost_io *io, const zt_srun *x, size_t j)
{
    return io->p_shard ? j : x->a + (j - x->j0);
}

static float *p_at(const zt_ost_io *io, const zt_srun *x, size_t j)
{
    return (float *)io->p + p_idx(io, x, j);
}

static const float *g_at(const zt_ost_io *io, const zt_srun *x, size_t j)
{
    return io->g + (io->g_shard ? j : x->a + (j - x->j0));
}

/* Half precision: the optimizer updates the fp32 master (the view's last section, by shard
 * position); the parameters are its rounding. Where the update reads and writes: */
static float *w_at(const zt_ost_io *io, const zt_ost_view *v, const zt_srun *x, size_t j)
{
    return v->w ? v->w + (j - v->c0) : p_at(io, x, j);
}

/* before an update of [lo, hi): a fresh master is the parameters (rounded already) */
static void master_take(const zt_ostate *os, const zt_ost_io *io, const zt_ost_view *v,
                        const zt_srun *x, size_t lo, size_t hi)
{
    if (v->w && os->master_fresh)
        zt_half_widen(io->hdt, v->w + (lo - v->c0), (uint16_t *)io->p + p_idx(io, x, lo),
                      hi - lo);
}

/* after it: the parameters are the master rounded to nearest even */
static void master_give(const zt_ostate *os, const zt_ost_io *io, const zt_ost_view *v,
                        const zt_srun *x, size_t lo, size_t hi)
{
    (void)os;
    if (v->w)
        zt_half_narrow(io->hdt, (uint16_t *)io->p + p_idx(io, x, lo), v->w + (lo - v->c0),
                       hi - lo);
}

int zt_ost_update_range(zt_ostate *os, const zt_ost_hparams *hps, const zt_spart *p,
                        size_t c0, size_t c1, const zt_ost_view *v, const zt_ost_io *io)
{
    const zt_adamw_hparams *hp = &hps->adamw;
    for (int k = 0; k < p->n_run; k++) {
        const zt_srun *x = &p->run[k];
        size_t lo = x->j0 > c0 ? x->j0 : c0, hi = x->j1 < c1 ? x->j1 : c1;
        if (lo >= hi)
            continue;
        int decay = os->L->params[x->param].decay;
        float *pp = w_at(io, v, x, lo);
        const float *gg = g_at(io, x, lo);
        size_t o = lo - v->c0, n = hi - lo;
        master_take(os, io, v, x, lo, hi);
        if (os->opt == ZT_OPT_ADAMW) {
            zt_adamw_update(pp, gg, v->m + o, v->v + o, n, hp, decay);
        } else if (x->compact) {
            size_t f = x->f0 + (lo - x->j0) - v->f0;
            zt_adam32_update(pp, gg, v->fm + f, v->fv + f, n, hp, decay);
        } else { /* lo is on a block of the tensor (ostate.h) */
            zt_adam8bit_update(os->maps, pp, gg, v->cm + o, v->cv + o, v->am + o / ZT_QBLOCK,
                               v->av + o / ZT_QBLOCK, n, hp, decay);
        }
        master_give(os, io, v, x, lo, hi);
        ZT_TRY(poll(os, io));
    }
    return 0;
}

/* total[n] += one part's sums acc[n] in rank order: this rank's part when it computes every
 * part (stage 0) or is alone, else every rank's (gathered into all[N x n]) */
static int add_part(zt_ostate *os, int n_parts, const double *acc, double *all, double *total,
                    size_t n)
{
    if (n_parts > 1 || os->comm->size == 1) {
        for (size_t j = 0; j < n; j++)
            total[j] += acc[j];
        return 0;
    }
    ZT_TRY(zt_comm_gather_d(os->comm, acc, all, n));
    for (int r = 0; r < os->comm->size; r++)
        for (size_t j = 0; j < n; j++)
            total[j] += all[(size_t)r * n + j];
    return 0;
}

/* Sums of every part into total (af_len doubles laid out by af_soff, then one per
 * parameter), each part's partial sums added in rank order: with sharded parts every rank
 * contributes its own (gathered); at stage 0 this rank computes them all. phase 1: g^2 rows
 * and columns, p^2; phase 2: u^2 (updating the vectors' moments). */
static int af_phase(zt_ostate *os, const zt_ost_hparams *hps, int u, zt_spart *const *parts,
                    int n_parts, const zt_ost_view *views, const zt_ost_io *io, int phase,
                    double *total)
{
    const zt_unit_def *ud = &os->L->units[u];
    const zt_adafactor_hparams *hp = &hps->af;
    float gs = hps->adamw.grad_scale;
    size_t L = os->af_len, r0, r1; /* the stretch of sums this phase reduces */
    double *acc = os->af_buf, *all = os->af_buf + 2 * L;
    int i0 = ud->first_param, il = i0 + ud->n_params - 1;
    if (phase == 1) {
        zt_adafactor_shape shl = af_shape(&os->L->params[il]);
        r0 = 0;
        r1 = os->af_soff[il] + 1 + af_moments(&shl);
    } else {
        r0 = L - (size_t)ud->n_params;
        r1 = L;
    }
    memset(total, 0, L * sizeof *total);
    for (int k = 0; k < n_parts; k++) {
        const zt_spart *p = parts[k];
        memset(acc, 0, L * sizeof *acc);
        for (int q = 0; q < p->n_run; q++) {
            const zt_srun *x = &p->run[q];
            const zt_param_def *d = &os->L->params[x->param];
            zt_adafactor_shape sh = af_shape(d);
            size_t off = x->a - d->offset, n = x->j1 - x->j0, s0 = os->af_soff[x->param];
            if (phase == 1) {
                zt_adafactor_sums s = {acc + s0, acc + s0 + af_rows(&sh),
                                       acc[s0 + af_moments(&sh)]};
                zt_adafactor_sums_add(&sh, off, n, w_at(io, &views[k], x, x->j0), g_at(io, x, x->j0), gs,
                                      hp->eps1, &s);
                acc[s0 + af_moments(&sh)] = s.p_sumsq;
            } else {
                const float *rc = sh.cols ? os->af_rc + os->af_off[x->param] : NULL;
                float *vv = sh.cols ? NULL : views[k].fv + (x->f0 - views[k].f0);
                acc[L - (size_t)ud->n_params + (size_t)(x->param - i0)] +=
                    zt_adafactor_precondition(&sh, hp, off, n, g_at(io, x, x->j0), gs, rc,
                                              rc ? rc + af_rows(&sh) : NULL, vv, NULL,
                                              os->af_cfac);
            }
            ZT_TRY(poll(os, io));
        }
        ZT_TRY(add_part(os, n_parts, acc + r0, all, total + r0, r1 - r0));
    }
    return 0;
}

static int adafactor_unit(zt_ostate *os, const zt_ost_hparams *hps, int u,
                          zt_spart *const *parts, int n_parts, const zt_ost_view *views,
                          const zt_ost_io *io)
{
    const zt_unit_def *ud = &os->L->units[u];
    const zt_adafactor_hparams *hp = &hps->af;
    float gs = hps->adamw.grad_scale;
    size_t L = os->af_len;
    double *total = os->af_buf + L;
    int i0 = ud->first_param;
    for (int k = 0; k < n_parts; k++)
        for (int q = 0; q < parts[k]->n_run; q++)
            master_take(os, io, &views[k], &parts[k]->run[q], parts[k]->run[q].j0,
                        parts[k]->run[q].j1);
    /* phase 1 and the factored moments, the step size of each tensor */
    ZT_TRY(af_phase(os, hps, u, parts, n_parts, views, io, 1, total));
    for (int i = i0; i < i0 + ud->n_params; i++) {
        const zt_param_def *d = &os->L->params[i];
        zt_adafactor_shape sh = af_shape(d);
        size_t s0 = os->af_soff[i];
        zt_adafactor_sums s = {total + s0, total + s0 + af_rows(&sh),
                               total[s0 + af_moments(&sh)]};
        float *row = sh.cols ? os->af_rc + os->af_off[i] : NULL;
        os->af_lr[i - i0] = zt_adafactor_stats(&sh, hp, &s, row, row ? row + af_rows(&sh) : NULL);
    }
    /* phase 2: the RMS of each tensor's preconditioned update */
    ZT_TRY(af_phase(os, hps, u, parts, n_parts, views, io, 2, total));
    /* phase 3 */
    for (int k = 0; k < n_parts; k++) {
        const zt_spart *p = parts[k];
        for (int q = 0; q < p->n_run; q++) {
            const zt_srun *x = &p->run[q];
            const zt_param_def *d = &os->L->params[x->param];
            zt_adafactor_shape sh = af_shape(d);
            const float *rc = sh.cols ? os->af_rc + os->af_off[x->param] : NULL;
            const float *vv = sh.cols ? NULL : views[k].fv + (x->f0 - views[k].f0);
            float *m = os->lay & ZT_OST_BETA1 ? views[k].m + (x->j0 - views[k].c0) : NULL;
            zt_adafactor_apply_grad(&sh, hp, x->a - d->offset, x->j1 - x->j0, g_at(io, x, x->j0),
                                    gs, rc, rc ? rc + af_rows(&sh) : NULL, vv,
                                    total[L - (size_t)ud->n_params + (size_t)(x->param - i0)],
                                    os->af_lr[x->param - i0], m, w_at(io, &views[k], x, x->j0),
                                    d->decay, os->af_cfac);
            master_give(os, io, &views[k], x, x->j0, x->j1);
            ZT_TRY(poll(os, io));
        }
    }
    return 0;
}

/* Lamb: phase 1 per part (moments, sums of p^2 and u^2 per tensor: acc[2 i], acc[2 i + 1]
 * for the unit's parameter i), added in rank order; the trust ratios; phase 2 per part. */
static int lamb_unit(zt_ostate *os, const zt_ost_hparams *hps, int u, zt_spart *const *parts,
                     int n_parts, const zt_ost_view *views, const zt_ost_io *io)
{
    const zt_unit_def *ud = &os->L->units[u];
    const zt_lamb_hparams *hp = &hps->lamb;
    size_t n = 2 * (size_t)ud->n_params;
    double *acc = os->lb_buf, *total = acc + 2 * (size_t)os->lb_np, *all = total + 2 * (size_t)os->lb_np;
    int i0 = ud->first_param;
    memset(total, 0, n * sizeof *total);
    for (int k = 0; k < n_parts; k++) {
        const zt_spart *p = parts[k];
        memset(acc, 0, n * sizeof *acc);
        for (int q = 0; q < p->n_run; q++) {
            const zt_srun *x = &p->run[q];
            size_t o = x->j0 - views[k].c0, i = (size_t)(x->param - i0);
            master_take(os, io, &views[k], x, x->j0, x->j1);
            zt_lamb_moments(w_at(io, &views[k], x, x->j0), g_at(io, x, x->j0), views[k].m + o,
                            views[k].v + o, x->j1 - x->j0, hp, os->L->params[x->param].decay,
                            &acc[2 * i], &acc[2 * i + 1]);
            ZT_TRY(poll(os, io));
        }
        ZT_TRY(add_part(os, n_parts, acc, all, total, n));
    }
    for (int k = 0; k < n_parts; k++) {
        const zt_spart *p = parts[k];
        for (int q = 0; q < p->n_run; q++) {
            const zt_srun *x = &p->run[q];
            size_t o = x->j0 - views[k].c0, i = (size_t)(x->param - i0);
            zt_lamb_apply(w_at(io, &views[k], x, x->j0), views[k].m + o, views[k].v + o,
                          x->j1 - x->j0, hp, os->L->params[x->param].decay,
                          zt_lamb_coeff(total[2 * i], total[2 * i + 1], hp));
            master_give(os, io, &views[k], x, x->j0, x->j1);
            ZT_TRY(poll(os, io));
        }
    }
    return 0;
}

int zt_ost_update_unit(zt_ostate *os, const zt_ost_hparams *hp, int u, zt_spart *const *parts,
                       int n_parts, const zt_ost_view *views, const zt_ost_io *io)
{
    return os->opt == ZT_OPT_LAMB ? lamb_unit(os, hp, u, parts, n_parts, views, io)
                                  : adafactor_unit(os, hp, u, parts, n_parts, views, io);
}

/* ---- bytes -------------------------------------------------------------------------------- */

size_t zt_ost_state_bytes(const zt_ostate *os)
{
    size_t b = os->opt == ZT_OPT_ADAFACTOR ? os->af_floats * sizeof(float) : 0;
    for (int i = 0; os->parts && i < os->L->n_units * os->n_parts; i++) /* as allocated */
        b += ZT_OST_ALLOC(zt_ost_bytes(os->opt, os->lay, os->parts[i].len,
                                       os->parts[i].n_compact));
    return b;
}

double zt_ost_predict_group_max(const zt_config *c, const zt_layout *L, int N, size_t gf,
                                int *groups)
{
    int lay = zt_ost_layout(c);
    double most = 0.0;
    *groups = 0;
    for (int u = 0; gf && u < L->n_units; u++) {
        size_t padded;
        (void)zt_geom_piece_for(L->units[u].numel, (size_t)N, c->bucket_size, &padded);
        *groups += (int)((padded / (size_t)N + gf - 1) / gf);
    }
    unsigned char *pc = calloc((size_t)L->n_params + 1, 1);
    if (!pc || gf == 0) { /* (an overestimate: every float with fp32 state) */
        free(pc);
        return (double)zt_ost_bytes(c->optimizer, lay, gf, gf);
    }
    for (int i = 0; i < L->n_params; i++)
        pc[i] = (unsigned char)param_compact(c, L, i);
    for (int u = 0; u < L->n_units; u++) {
        zt_geom g = {0, 0, (size_t)N};
        g.piece = zt_geom_piece_for(L->units[u].numel, (size_t)N, c->bucket_size, &g.padded);
        size_t len = g.padded / (size_t)N;
        for (int r = 0; r < N; r++) {
            zt_srun *run = NULL;
            int nr = 0;
            size_t nc = 0;
            if (zt_ost_runs(L, pc, u, &g, r, &run, &nr, &nc) < 0) {
                free(pc);
                return (double)zt_ost_bytes(c->optimizer, lay, gf, gf);
            }
            for (size_t c0 = 0; c0 < len; c0 += gf) { /* (offload_open's groups) */
                size_t c1 = c0 + gf < len ? c0 + gf : len, k = 0;
                for (int j = 0; j < nr; j++) {
                    size_t lo = run[j].j0 > c0 ? run[j].j0 : c0;
                    size_t hi = run[j].j1 < c1 ? run[j].j1 : c1;
                    k += run[j].compact && hi > lo ? hi - lo : 0;
                }
                double b = (double)zt_ost_bytes(c->optimizer, lay, c1 - c0, k);
                most = b > most ? b : most;
            }
            free(run);
        }
    }
    free(pc);
    return most;
}

double zt_ost_predict_bytes(const zt_config *c, const zt_layout *L, int N, int whole,
                            double *replicated)
{
    double own = 0.0, compact = 0.0, rc = 0.0, f = whole ? 1.0 : 1.0 / N;
    int opt = c->optimizer, beta1 = opt == ZT_OPT_ADAFACTOR && c->adafactor_beta1 >= 0;
    for (int u = 0; u < L->n_units; u++) {
        size_t padded;
        (void)zt_geom_piece_for(L->units[u].numel, (size_t)N, c->bucket_size,
                                &padded);
        own += (double)padded * f;
    }
    unsigned char *pc = calloc((size_t)L->n_params + 1, 1);
    for (int i = 0; i < L->n_params; i++) {
        const zt_param_def *d = &L->params[i];
        if (param_compact(c, L, i)) {
            compact += (double)d->numel * f;
            if (pc)
                pc[i] = 1;
        } else if (opt == ZT_OPT_ADAFACTOR) {
            zt_adafactor_shape sh = af_shape(d);
            rc += (double)af_moments(&sh);
        }
    }
    /* sharded: rank 0's compact positions exactly (a compact tensor's floats need not split
     * evenly over the ranks' shards), as the engine's report counts rank 0's */
    if (!whole && N > 1 && pc) {
        double c0 = 0.0;
        int okc = 1;
        for (int u = 0; u < L->n_units && okc; u++) {
            zt_geom g = {0, 0, (size_t)N};
            zt_srun *run = NULL;
            int nr = 0;
            size_t nc = 0;
            g.piece = zt_geom_piece_for(L->units[u].numel, (size_t)N, c->bucket_size, &g.padded);
            okc = zt_ost_runs(L, pc, u, &g, 0, &run, &nr, &nc) == 0;
            c0 += (double)nc;
            free(run);
        }
        if (okc)
            compact = c0;
    }
    free(pc);
    *replicated = 4.0 * rc;
    switch (opt) {
    case ZT_OPT_ADAMW8BIT: return own * (2.0 + 8.0 / ZT_QBLOCK) + 8.0 * compact;
    case ZT_OPT_ADAFACTOR: return (beta1 ? 4.0 * own : 0.0) + 4.0 * compact;
    default: return 8.0 * own;
    }
}
