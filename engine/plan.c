/* plan.c - the memory planner behind zerotrain.memory_limit: from the model, the world size,
 * the stage and the batch it predicts each rank's bytes per category, then places the
 * optimizer state and (stage 3) the parameter shards in RAM or on NVMe, in that order, until
 * the predicted peak fits the limit. It fails before anything is allocated when even full
 * offload does not fit, saying what would. The placement it prints is the one the engine
 * builds; the numbers are the same formulas the memory report checks afterwards. */
#include "plan.h"
#include "geom.h"
#include "ostate.h"
#include "../common/err.h"
#include "../common/faults.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define ZT_PLAN_HEADROOM (8.0 * 1048576.0)

typedef struct plan_bytes {
    double base; /* the process before the engine allocates: code, libraries, MPI */
    double params, grads, optimizer, activations, comm, io;
    double params_off, optimizer_off, grads_off; /* in the swap files */
} plan_bytes;

static double total(const plan_bytes *b)
{
    return b->base + b->params + b->grads + b->optimizer + b->activations + b->comm + b->io;
}

static double resident_now(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * 4096.0;
}

/* a placement: where the optimizer state and the parameter shards go (ZT_OFFLOAD_*), and
 * whether the gradient shards go with the optimizer state */
typedef struct placement {
    int opt, par, grads;
} placement;

/* The footprint (footprint.h) of one placement at ZeRO stage st over Nr ranks, with the
 * stage-3 gather pool at its budget (the prefetch window and two units, capped by max_live)
 * and the optimizer's state and working buffers predicted. */
static void plan_footprint(const zt_planner *pn, placement pl, int st, int Nr, zt_footprint *fp)
{
    int nu = pn->L->n_units, opt = pl.opt, par = pl.par;
    int goff = pl.grads && opt != ZT_OFFLOAD_NONE && st >= 2;
    double N = Nr, P = 0.0, maxu = 0.0, maxs = 0.0, whole = 0.0, maxo = 0.0;
    for (int u = 0; u < nu; u++) {
        size_t padded;
        zt_geom_piece_for(pn->L->units[u].numel, (size_t)Nr, pn->cfg->bucket_size, &padded);
        P += (double)padded;
        maxu = (double)padded > maxu ? (double)padded : maxu;
        maxs = (double)padded / N > maxs ? (double)padded / N : maxs;
        if (u == pn->whole_grad) /* (a persistent one stays gathered, outside the pool) */
            whole = padded < pn->cfg->persist_threshold ? 0.0 : (double)padded;
        else
            maxo = (double)padded > maxo ? (double)padded : maxo;
    }
    /* the gather pool: two units at once, and the tied unit (the word embeddings the head
     * uses) held beside two others from the end of the forward pass into the backward */
    double live = (double)pn->cfg->prefetch_size +
                  (whole + 2 * maxo > 2 * maxu ? whole + 2 * maxo : 2 * maxu);
    if (pn->cfg->max_live && live > (double)pn->cfg->max_live + maxu)
        live = (double)pn->cfg->max_live + maxu;
    double rep, own = zt_ost_predict_bytes(pn->cfg, pn->L, Nr, st == 0, &rep), work = 0.0;
    double pb, gb, mb;
    zt_fp_dtypes(pn->cfg, &pb, &gb, &mb);
    own += mb * (st == 0 ? P : P / N); /* half precision: the fp32 master, with the moments */
    if (opt != ZT_OFFLOAD_NONE) { /* the working buffers: the largest sub-group's state each */
        int groups;
        work = zt_ost_predict_group_max(pn->cfg, pn->L, Nr,
                                        zt_fp_group_floats(pn->cfg, (size_t)maxs), &groups);
        work *= zt_fp_offload_buffers(pn->cfg, groups);
    }
    zt_fp_in in = {
        .L = pn->L, .N = Nr, .stage = st, .bucket = pn->cfg->bucket_size,
        .whole_grad = pn->whole_grad, .opt_off = opt, .par_off = st >= 3 ? par : ZT_OFFLOAD_NONE,
        .grads_off = goff, .grad_acc_buffers = goff && pn->cfg->grad_accum_steps > 1,
        .param_slots = zt_fp_param_slots(pn->cfg, (size_t)maxs),
        .persist_threshold = pn->cfg->persist_threshold,
        .gathered = live < P ? live : P, /* never more than the whole model */
        .opt_state = own, .opt_replicated = rep, .opt_work = work,
        .inference = pn->cfg->inference, .pbytes = pb, .gbytes = gb};
    zt_footprint_of(&in, fp);
}

void zt_plan_footprint(const zt_planner *pn, zt_footprint *fp)
{
    const zt_config *c = pn->cfg;
    placement pl = {c->offload_optimizer, c->offload_param, c->offload_gradients > 0};
    plan_footprint(pn, pl, pn->cfg->zero_stage, pn->comm->size, fp);
}

void zt_plan_init(zt_planner *pn, zt_config *cfg, const zt_layout *L, zt_comm *comm,
                  zt_rplan *rc, const zt_model_ops *ops, void *model, const char *nvme,
                  int whole_grad)
{
    *pn = (zt_planner){cfg, L, comm, rc, ops, model, nvme, whole_grad, 0.0};
}

/* the bytes per rank of one placement at ZeRO stage st over Nr ranks, and its footprint */
static void predict_fp(const zt_planner *pn, placement pl, int st, int Nr, plan_bytes *b,
                       zt_footprint *out)
{
    int nu = pn->L->n_units, opt = pl.opt, par = pl.par;
    int goff = pl.grads && opt != ZT_OFFLOAD_NONE && st >= 2;
    zt_footprint fp;
    plan_footprint(pn, pl, st, Nr, &fp);
    if (out)
        *out = fp;
    memset(b, 0, sizeof *b);
    b->base = pn->base;
    b->params = fp.params;
    b->grads = fp.grads;
    b->optimizer = fp.optimizer;
    b->comm = fp.comm;
    b->params_off = fp.params_off;
    b->grads_off = fp.grads_off;
    b->optimizer_off = fp.optimizer_off;
    /* activations of one micro-batch (when the batch shape is known) */
    if (pn->cfg->plan_micro_batch > 0 && pn->cfg->plan_seq_len > 0 && pn->ops && pn->ops->act_bytes)
        b->activations = (double)pn->ops->act_bytes(pn->model, pn->cfg->plan_micro_batch,
                                                    pn->cfg->plan_seq_len, NULL, 0);
    /* I/O staging buffers, one pool per store (offloaded layer inputs: one more) */
    int acts_off = 0;
    for (int u = 0; u < nu; u++)
        acts_off |= pn->rc->mode && pn->rc->mode[u] == ZT_KEEP_OFFLOAD;
    int stores = (opt == ZT_OFFLOAD_NVME) * (1 + goff) + (par == ZT_OFFLOAD_NVME) +
                 (acts_off && pn->nvme[0]);
    b->io = (double)stores * (double)pn->cfg->aio_block_size *
            (pn->cfg->aio_queue_depth > 0 ? pn->cfg->aio_queue_depth : 8);
}

static void predict_at(const zt_planner *pn, placement pl, int st, int Nr, plan_bytes *b)
{
    predict_fp(pn, pl, st, Nr, b, NULL);
}

void zt_plan_predict(const zt_planner *pn, int N, zt_footprint *fp, double *activations,
                     double *io)
{
    const zt_config *c = pn->cfg;
    placement pl = {c->offload_optimizer, c->offload_param, c->offload_gradients > 0};
    plan_bytes b;
    predict_fp(pn, pl, c->zero_stage, N, &b, fp);
    *activations = b.activations;
    *io = b.io;
}

/* the bytes per rank of one placement, this engine's stage and world size */
static void predict(const zt_planner *pn, placement pl, plan_bytes *b)
{
    predict_at(pn, pl, pn->cfg->zero_stage, pn->comm->size, b);
}

static void describe(char *out, size_t n, const plan_bytes *b, placement pl)
{
    const double M = 1048576.0;
    snprintf(out, n,
             "optimizer state %s, gradient shards %s, parameters %s; RAM per rank: process "
             "and headroom %.0f MiB, params %.0f MiB, grads %.0f MiB, optimizer %.0f MiB, "
             "activations %.0f MiB, comm %.0f MiB, I/O buffers %.0f MiB = %.0f MiB predicted "
             "peak; on NVMe: %.0f MiB",
             pl.opt == ZT_OFFLOAD_NVME ? "on NVMe" : "in RAM",
             b->grads_off > 0 ? "on NVMe" : "in RAM",
             pl.par == ZT_OFFLOAD_NVME ? "shards on NVMe" : "in RAM", b->base / M,
             b->params / M, b->grads / M, b->optimizer / M, b->activations / M, b->comm / M,
             b->io / M, total(b) / M, (b->params_off + b->optimizer_off + b->grads_off) / M);
}

/* ---- recompute "auto" -----------------------------------------------------------------
 * Per recomputable unit a mode (keep everything, selective, full, full with the input
 * offloaded) with the fewest recomputed FLOPs whose activation bytes fit a budget: a
 * knapsack over the unit chain. What a unit keeps adds up (the model carves each piece on
 * its own), except what recomputed units share: one working set, and with offloaded inputs
 * their buffers. So three cases: nothing recomputed; recomputation without offload (the
 * working set fixed); with offload (both fixed). Bytes are rounded up to 1/4096 of the
 * budget in the programme, so the plan it returns never exceeds the budget. */

#define RC_GRAIN 4096

typedef struct rc_costs {
    int nu, B, T;
    double *own;       /* [nu][ZT_KEEP_MODES]: bytes unit u keeps in mode m */
    double *flops;     /* [nu][ZT_KEEP_MODES]: FLOPs of recomputing it */
    double fixed[3];   /* the rest: nothing recomputed, + the working set, + the buffers */
    double ws;         /* one layer's working set */
} rc_costs;

static size_t act_of(zt_planner *pn, const rc_costs *c, const unsigned char *mode)
{
    return pn->ops->act_bytes(pn->model, c->B, c->T, mode, 0);
}

static int rc_costs_get(zt_planner *pn, rc_costs *c)
{
    int nu = pn->rc->n;
    unsigned char *ref = calloc((size_t)nu, 1), *m = calloc((size_t)nu, 1);
    c->nu = nu;
    c->B = pn->cfg->plan_micro_batch;
    c->T = pn->cfg->plan_seq_len;
    c->own = calloc((size_t)nu * ZT_KEEP_MODES, sizeof *c->own);
    c->flops = calloc((size_t)nu * ZT_KEEP_MODES, sizeof *c->flops);
    if (!ref || !m || !c->own || !c->flops) {
        free(ref);
        free(m);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    /* the reference: every unit offloaded (owns nothing; working set and buffers there) */
    for (int u = 0; u < nu; u++)
        ref[u] = pn->ops->recompute_flops(pn->model, 1, 1, u, ZT_KEEP_OUTPUT) > 0
                     ? ZT_KEEP_OFFLOAD : ZT_KEEP_ALL;
    double a_ref = (double)act_of(pn, c, ref), sum_out = 0.0, sum_all = 0.0;
    c->ws = 0.0;
    for (int u = 0; u < nu; u++)
        for (int md = 0; md < ZT_KEEP_MODES; md++) {
            memcpy(m, ref, (size_t)nu);
            if (ref[u] == ZT_KEEP_OFFLOAD)
                m[u] = (unsigned char)md;
            c->own[u * ZT_KEEP_MODES + md] = (double)act_of(pn, c, m) - a_ref;
            c->flops[u * ZT_KEEP_MODES + md] =
                ref[u] == ZT_KEEP_OFFLOAD
                    ? pn->ops->recompute_flops(pn->model, c->B, c->T, u, md) : 0.0;
            if (md == ZT_KEEP_ALL && ref[u] == ZT_KEEP_OFFLOAD &&
                c->own[u * ZT_KEEP_MODES + md] > c->ws)
                c->ws = c->own[u * ZT_KEEP_MODES + md];
        }
    for (int u = 0; u < nu; u++) {
        sum_out += c->own[u * ZT_KEEP_MODES + ZT_KEEP_OUTPUT];
        sum_all += c->own[u * ZT_KEEP_MODES + ZT_KEEP_ALL];
    }
    c->fixed[2] = a_ref;
    for (int u = 0; u < nu; u++)
        m[u] = ref[u] == ZT_KEEP_OFFLOAD ? ZT_KEEP_OUTPUT : ZT_KEEP_ALL;
    c->fixed[1] = (double)act_of(pn, c, m) - sum_out;
    memset(m, ZT_KEEP_ALL, (size_t)nu);
    c->fixed[0] = (double)act_of(pn, c, m) - sum_all;
    free(ref);
    free(m);
    return 0;
}

static void rc_costs_free(rc_costs *c)
{
    free(c->own);
    free(c->flops);
}

/* The cheapest plan of case `cs` (0, 1 or 2) within budget: *cost (FLOPs, plus one per
 * offloaded input to prefer keeping them) and mode, or -1 when none fits. */
static int rc_knapsack(const rc_costs *c, int cs, double budget, unsigned char *mode,
                       double *cost)
{
    int nu = c->nu, nm = cs == 0 ? 1 : cs == 1 ? ZT_KEEP_OFFLOAD : ZT_KEEP_MODES;
    double room = budget - c->fixed[cs];
    if (room < 0)
        return -1;
    double grain = room / RC_GRAIN > 1.0 ? room / RC_GRAIN : 1.0;
    int W = (int)floor(room / grain);
    /* best[u][w]: least cost of units u.. within w grains; choice[u][w] the mode */
    double *best = malloc(sizeof *best * (size_t)(nu + 1) * (size_t)(W + 1));
    unsigned char *choice = malloc((size_t)nu * (size_t)(W + 1));
    if (!best || !choice) {
        free(best);
        free(choice);
        return -1;
    }
    for (int w = 0; w <= W; w++)
        best[(size_t)nu * (W + 1) + w] = 0.0;
    for (int u = nu - 1; u >= 0; u--)
        for (int w = 0; w <= W; w++) {
            double b = INFINITY;
            int bm = 0;
            for (int md = 0; md < nm; md++) {
                int g = (int)ceil(c->own[u * ZT_KEEP_MODES + md] / grain - 1e-9);
                if (g > w)
                    continue;
                double v = best[(size_t)(u + 1) * (W + 1) + (w - g)] +
                           c->flops[u * ZT_KEEP_MODES + md] + (md == ZT_KEEP_OFFLOAD);
                if (v < b) {
                    b = v;
                    bm = md;
                }
            }
            best[(size_t)u * (W + 1) + w] = b;
            choice[(size_t)u * (W + 1) + w] = (unsigned char)bm;
        }
    *cost = best[W];
    for (int u = 0, w = W; u < nu && isfinite(*cost); u++) {
        mode[u] = choice[(size_t)u * (W + 1) + w];
        w -= (int)ceil(c->own[u * ZT_KEEP_MODES + mode[u]] / grain - 1e-9);
    }
    free(best);
    free(choice);
    return isfinite(*cost) ? 0 : -1;
}

/* The plan in words: runs of steps (by their units' names) with their mode. */
static void rc_describe(const zt_planner *pn, const unsigned char *mode, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (int u = 0; u < pn->rc->n;) {
        int v = u;
        while (v + 1 < pn->rc->n && mode[v + 1] == mode[u])
            v++;
        if (len < n)
            len += (size_t)snprintf(out + len, n - len, "%s%s%s%s %s", len ? ", " : "",
                                    pn->L->units[pn->rc->unit[u]].name, v > u ? ".." : "",
                                    v > u ? pn->L->units[pn->rc->unit[v]].name : "",
                                    zt_keep_name(mode[u]));
        u = v + 1;
    }
}

/* Plans recomputation for placement pl: *cost and pn->rc->mode, or -1 when nothing fits. */
static int plan_recompute(zt_planner *pn, const rc_costs *c, double limit, placement pl,
                          unsigned char *mode, double *cost, double *act)
{
    plan_bytes b;
    int nu = pn->rc->n, ok = -1;
    unsigned char *m = malloc((size_t)nu);
    if (!m)
        return -1;
    memset(pn->rc->mode, ZT_KEEP_ALL, (size_t)nu);
    predict(pn, pl, &b);
    double rest = total(&b) - b.activations;
    double io = (double)pn->cfg->aio_block_size *
                (pn->cfg->aio_queue_depth > 0 ? pn->cfg->aio_queue_depth : 8);
    for (int cs = 0; cs < (pn->nvme[0] ? 3 : 2); cs++) {
        double v;
        if (rc_knapsack(c, cs, limit - rest - (cs == 2 ? io : 0.0), m, &v) < 0 ||
            (ok == 0 && v >= *cost))
            continue;
        memcpy(mode, m, (size_t)nu);
        *cost = v;
        *act = (double)act_of(pn, c, m);
        ok = 0;
    }
    free(m);
    return ok;
}

static int plan_auto(zt_planner *pn, placement *cand, int ncand, double limit, int *chosen)
{
    zt_config *cf = pn->cfg;
    int nu = pn->rc->n, best = -1;
    double best_cost = 0.0, best_act = 0.0, step_flops = 0.0;
    rc_costs c = {0};
    unsigned char *mode = malloc((size_t)nu), *bmode = malloc((size_t)nu);
    if (!mode || !bmode || rc_costs_get(pn, &c) < 0) {
        free(mode);
        free(bmode);
        rc_costs_free(&c);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    /* the placement whose plan recomputes least (offload hides behind compute; recomputing
     * does not), the least offload among equals */
    for (int i = 0; i < ncand; i++) {
        double cost = 0.0, act = 0.0;
        if (plan_recompute(pn, &c, limit, cand[i], mode, &cost, &act) < 0 ||
            (best >= 0 && cost >= best_cost))
            continue;
        best = i;
        best_cost = cost;
        best_act = act;
        memcpy(bmode, mode, (size_t)nu);
    }
    for (int u = 0; u < nu; u++)
        step_flops += 3.0 * pn->ops->recompute_flops(pn->model, cf->plan_micro_batch,
                                                    cf->plan_seq_len, u, ZT_KEEP_OUTPUT);
    if (best < 0) { /* the least the rest takes (over the placements) and the least the
                     * activations take */
        plan_bytes b;
        double rest = INFINITY, floor_b = c.fixed[pn->nvme[0] ? 2 : 1];
        memset(pn->rc->mode, ZT_KEEP_ALL, (size_t)nu);
        for (int i = 0; i < ncand; i++) {
            predict(pn, cand[i], &b);
            rest = total(&b) - b.activations < rest ? total(&b) - b.activations : rest;
        }
        for (int u = 0; u < nu; u++)
            floor_b += c.own[u * ZT_KEEP_MODES + (pn->nvme[0] ? ZT_KEEP_OFFLOAD
                                                                  : ZT_KEEP_OUTPUT)];
        free(mode);
        free(bmode);
        rc_costs_free(&c);
        return zt_fail(ZT_E_CONFIG, "zerotrain.memory_limit %.0f MiB is too small for recompute "
                       "\"auto\": with every layer recomputed%s the activations of a %d x %d "
                       "micro-batch still need %.1f MiB (one layer's working set is %.1f MiB) "
                       "and the rest at least %.1f MiB. Raise the limit, use more ranks or a "
                       "smaller micro-batch", limit / 1048576.0,
                       pn->nvme[0] ? " and its input on NVMe" : "", cf->plan_micro_batch,
                       cf->plan_seq_len, floor_b / 1048576.0, c.ws / 1048576.0,
                       rest / 1048576.0);
    }
    memcpy(pn->rc->mode, bmode, (size_t)nu);
    pn->rc->k = 0;
    char runs[700];
    rc_describe(pn, bmode, runs, sizeof runs);
    snprintf(pn->rc->plan, sizeof pn->rc->plan,
             "recompute plan (auto) for a %d x %d micro-batch: %s; predicted activations %.1f "
             "MiB, recomputed FLOPs %.1f%% of the step's", cf->plan_micro_batch,
             cf->plan_seq_len, runs, best_act / 1048576.0,
             step_flops > 0 ? 100.0 * floor(best_cost) / step_flops : 0.0);
    free(mode);
    free(bmode);
    rc_costs_free(&c);
    *chosen = best;
    return zt_rplan_apply(pn->rc, pn->cfg, pn->ops, pn->model);
}

int zt_plan_memory(zt_planner *pn, char *report, size_t n)
{
    zt_config *c = pn->cfg;
    plan_bytes b;
    char line[1024];
    double limit = (double)c->memory_limit;
    if (report && n)
        report[0] = '\0';
    if (c->memory_limit == 0)
        return 0;
    /* the process as it is, measured once for every placement compared, and what grows
     * after the plan without an allocation the engine counts (OpenBLAS and MPI buffers,
     * allocator metadata, thread stacks) */
    pn->base = resident_now() + ZT_PLAN_HEADROOM;
    if (pn->comm->size > 1) { /* every rank plans from the largest: one plan for all of them
                             * (stage 3 gathers along the recomputation plan's steps) */
        double *all = malloc(sizeof *all * (size_t)pn->comm->size);
        if (!all)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        int rc = zt_comm_gather_d(pn->comm, &pn->base, all, 1);
        for (int r = 0; rc == 0 && r < pn->comm->size; r++)
            pn->base = all[r] > pn->base ? all[r] : pn->base;
        free(all);
        ZT_TRY(rc);
    }
    /* What the config asked for is kept; the planner adds offload where it is free to, the
     * least I/O first: the optimizer state, then the gradient shards with it (stages 2-3,
     * written and read once per step), then the parameter shards (stage 3, read twice). */
    int opt0 = c->offload_optimizer, par0 = c->offload_param, g0 = c->offload_gradients;
    int optN = opt0 ? opt0 : ZT_OFFLOAD_NVME, parN = par0 ? par0 : ZT_OFFLOAD_NVME;
    int gmin = g0 > 0, gmax = g0 >= 0; /* automatic: either, in RAM first */
    placement cand[4] = {{opt0, par0, gmin}, {optN, par0, gmin}, {optN, par0, gmax},
                         {optN, parN, gmax}};
    int ncand = c->zero_stage >= 3 ? 4 : c->zero_stage >= 2 ? 3 : c->zero_stage >= 1 ? 2 : 1;
    int first = 0;
    if (c->recompute == ZT_RECOMPUTE_AUTO) /* recomputation and placement together */
        ZT_TRY(plan_auto(pn, cand, ncand, limit, &first));
    for (int i = first; i < ncand; i++) {
        predict(pn, cand[i], &b);
        if (total(&b) > limit)
            continue;
        describe(line, sizeof line, &b, cand[i]);
        if ((cand[i].opt == ZT_OFFLOAD_NVME || cand[i].par == ZT_OFFLOAD_NVME) && !pn->nvme[0])
            return zt_fail(ZT_E_CONFIG, "zerotrain.memory_limit %.0f MiB: the plan needs NVMe "
                           "offload (%s) but no nvme_path is set: give "
                           "zero_optimization.offload_optimizer.nvme_path",
                           limit / 1048576.0, line);
        c->offload_optimizer = cand[i].opt;
        c->offload_param = cand[i].par;
        c->offload_gradients = cand[i].grads ? 1 : -1;
        if (report)
            snprintf(report, n, "memory plan for %.0f MiB per rank: %s", limit / 1048576.0,
                     line);
        return 0;
    }
    predict(pn, cand[ncand - 1], &b);
    describe(line, sizeof line, &b, cand[ncand - 1]);
    return zt_fail(ZT_E_CONFIG, "zerotrain.memory_limit %.0f MiB is too small even with %s: "
                   "%s. Raise the limit, use more ranks%s, or a smaller micro-batch",
                   limit / 1048576.0,
                   c->zero_stage >= 3 ? "the optimizer state, the gradients and the parameters "
                                        "on NVMe"
                   : c->zero_stage >= 2 ? "the optimizer state and the gradients on NVMe"
                   : c->zero_stage >= 1 ? "the optimizer state on NVMe" : "stage 0",
                   line, c->zero_stage < 3 ? ", a higher ZeRO stage" : "");
}

/* ---- does the model fit the machine at all ---------------------------------------------
 * Without a memory_limit nothing above stops a model whose state needs terabytes: the
 * allocations succeed (virtual memory) and the process climbs toward the OOM killer as it
 * touches them. The same prediction, per rank, times the ranks on this machine, against its
 * RAM and swap; what offload puts on NVMe against the free space of nvme_path. */

#define GIB (1024.0 * 1048576.0)

/* MemTotal + SwapTotal in bytes (*ram, *swap: the two), 0 when unknown. The fault hooks'
 * memory_total (tests only) pretends a machine of that size without swap. */
static double machine_bytes(double *ram, double *swap)
{
    char line[256];
    FILE *f;
    *ram = *swap = 0.0;
    if (zt_faults()->memory_total > 0.0)
        return *ram = zt_faults()->memory_total;
    if (!(f = fopen("/proc/meminfo", "r")))
        return 0.0;
    while (fgets(line, sizeof line, f)) {
        double kb;
        if (sscanf(line, "MemTotal: %lf kB", &kb) == 1)
            *ram = kb * 1024.0;
        else if (sscanf(line, "SwapTotal: %lf kB", &kb) == 1)
            *swap = kb * 1024.0;
    }
    fclose(f);
    return *ram + *swap;
}

/* free bytes for an unprivileged writer where path is (or would be: its nearest existing
 * parent), -1 when unknown */
static double free_bytes(const char *path)
{
    char p[4096];
    struct statvfs sv;
    snprintf(p, sizeof p, "%s", path && *path ? path : ".");
    for (;;) {
        if (statvfs(p, &sv) == 0)
            return (double)sv.f_bavail * (double)sv.f_frsize;
        char *slash = strrchr(p, '/');
        if (errno != ENOENT || !slash)
            return -1.0;
        if (slash == p)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

/* ranks of this engine on this machine: Open MPI's local size, at most the world size */
static int ranks_here(const zt_planner *pn)
{
    const char *s = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = s ? atoi(s) : 1;
    return n < 1 ? 1 : n > pn->comm->size ? pn->comm->size : n;
}

static double ram_of(const plan_bytes *b) { return total(b); }
static double disk_of(const plan_bytes *b)
{
    return b->params_off + b->optimizer_off + b->grads_off;
}

/* "512.0 MiB", "1.7 GiB", "16.0 TiB" */
static const char *human(double x, char *buf, size_t n)
{
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int k = 0;
    while (x >= 1024.0 && k < 5) {
        x /= 1024.0;
        k++;
    }
    snprintf(buf, n, k ? "%.1f %s" : "%.0f %s", x, unit[k]);
    return buf;
}

/* appends "; or <text>" (the first without "; or ") */
static void alternative(char *fix, size_t n, const char *text)
{
    size_t len = strlen(fix);
    snprintf(fix + len, n - len, "%s%s", len ? "; or " : "", text);
}

int zt_plan_check_fit(zt_planner *pn, const char *what)
{
    const zt_config *c = pn->cfg;
    int st = c->zero_stage, N = pn->comm->size, here = ranks_here(pn);
    placement pl = {c->offload_optimizer, c->offload_param,
                    st >= 2 && c->offload_optimizer && c->offload_gradients >= 0};
    placement none = {0, 0, 0}, all = {ZT_OFFLOAD_NVME, ZT_OFFLOAD_NVME, 1};
    plan_bytes b, o;
    double ram, swap, mem = machine_bytes(&ram, &swap), P = 0.0;
    char fix[1200] = "", text[400], note[200] = "", h[9][32];
    predict(pn, pl, &b);
    double need = ram_of(&b) * here, disk = disk_of(&b) * here;
    double room = disk > 0 ? free_bytes(pn->nvme) : -1.0;
    int ram_short = mem > 0 && need > mem, disk_short = disk > 0 && room >= 0 && disk > room;
    if (!ram_short && !disk_short)
        return 0;
    for (int i = 0; i < pn->L->n_params; i++)
        P += (double)pn->L->params[i].numel;
    if (ram_short) { /* stage 3 over more ranks, one per machine like this one */
        int k = N > 1 ? N : 2;
        for (; k <= (1 << 20); k = k < 64 ? k + 1 : k * 2) {
            predict_at(pn, none, 3, k, &o);
            if (ram_of(&o) <= mem)
                break;
        }
        if (k <= (1 << 20) && (st < 3 || k > N)) {
            snprintf(text, sizeof text, "ZeRO stage 3 over %d ranks, one per machine like this "
                     "one (%s each)", k, human(ram_of(&o), h[0], 32));
            alternative(fix, sizeof fix, text);
        } else if (k > (1 << 20)) { /* what stage 3 cannot shard: a unit gathered whole */
            int big = 0;
            for (int u = 1; u < pn->L->n_units; u++)
                big = pn->L->units[u].numel > pn->L->units[big].numel ? u : big;
            snprintf(note, sizeof note, "; ZeRO stage 3 and offload do not help: they gather "
                     "each unit whole, and unit \"%s\" alone is %s", pn->L->units[big].name,
                     human(4.0 * (double)pn->L->units[big].numel, h[0], 32));
        }
        predict_at(pn, all, 3, N, &o); /* everything offloaded at this world size */
        double r = pn->nvme[0] ? free_bytes(pn->nvme) : -1.0;
        if (ram_of(&o) * here <= mem && (r < 0 || disk_of(&o) * here <= r) &&
            (pl.opt != all.opt || pl.par != all.par || st < 3)) {
            snprintf(text, sizeof text, "ZeRO stage 3 with offload_optimizer and offload_param "
                     "on NVMe (%s of RAM here, %s on the drive%s%s%s)",
                     human(ram_of(&o) * here, h[0], 32), human(disk_of(&o) * here, h[1], 32),
                     r >= 0 ? ", which has " : "; nvme_path: a folder on it",
                     r >= 0 ? human(r, h[2], 32) : "", r >= 0 ? " free" : "");
            alternative(fix, sizeof fix, text);
        }
    } else { /* the drive: the state kept in RAM instead, or more space */
        predict_at(pn, none, st, N, &o);
        if (mem <= 0 || ram_of(&o) * here <= mem) {
            snprintf(text, sizeof text, "the state in RAM (offload device \"cpu\" or \"none\": "
                     "%s of RAM here)", human(ram_of(&o) * here, h[0], 32));
            alternative(fix, sizeof fix, text);
        }
        snprintf(text, sizeof text, "nvme_path on a drive with %s free",
                 human(disk, h[0], 32));
        alternative(fix, sizeof fix, text);
    }
    snprintf(text, sizeof text, "a model of at most about %.3g parameters (this one has "
             "%.3g%s)", P * 0.9 * (ram_short ? mem / need : room / disk), P, note);
    alternative(fix, sizeof fix, text);
    if (ram_short)
        return zt_fail(ZT_E_NOMEM, "%s: the model does not fit this machine: at ZeRO stage %d "
                       "it needs %.0f bytes (%s) of RAM for the %d rank%s here (per rank: "
                       "parameters %s, gradients %s, optimizer state %s, activations %s, "
                       "buffers %s), and the machine has %.0f (%s: MemTotal %s + SwapTotal %s). "
                       "It would fit with %s", what, st, need, human(need, h[0], 32), here,
                       here > 1 ? "s" : "", human(b.params, h[1], 32), human(b.grads, h[2], 32),
                       human(b.optimizer, h[3], 32), human(b.activations, h[4], 32),
                       human(b.comm + b.io + b.base, h[5], 32), mem, human(mem, h[6], 32),
                       human(ram, h[7], 32), human(swap, h[8], 32), fix);
    return zt_fail(ZT_E_NOMEM, "%s: the model does not fit the NVMe drive: at ZeRO stage %d the "
                   "%d rank%s here would put %.0f bytes (%s) of offloaded state in %s, which "
                   "has %.0f (%s) free. It would fit with %s", what, st, here,
                   here > 1 ? "s" : "", disk, human(disk, h[0], 32), pn->nvme, room,
                   human(room, h[1], 32), fix);
}
