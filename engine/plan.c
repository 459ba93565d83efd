/* plan.c - the memory planner behind zerotrain.memory_limit: from the model, the world size,
 * the stage and the batch it predicts each rank's bytes per category, then places the
 * optimizer state and (stage 3) the parameter shards in RAM or on NVMe, in that order, until
 * the predicted peak fits the limit. It fails before anything is allocated when even full
 * offload does not fit, saying what would. The placement it prints is the one the engine
 * builds; the numbers are the same formulas the memory report checks afterwards. */
#include "engine_impl.h"

#include <stdio.h>
#include <string.h>

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

/* the bytes per rank of one placement */
static void predict(const zt_engine *e, placement pl, plan_bytes *b)
{
    int nu = e->layout.n_units, st = e->cfg.zero_stage, opt = pl.opt, par = pl.par;
    int goff = pl.grads && opt != ZT_OFFLOAD_NONE && st >= 2;
    double N = e->comm.size, P = 0.0, maxu = 0.0, maxs = 0.0, F = sizeof(float);
    for (int u = 0; u < nu; u++) {
        size_t padded;
        zt_zero_piece_for(e->layout.units[u].numel, (size_t)e->comm.size, e->cfg.bucket_size,
                          &padded);
        P += (double)padded;
        maxu = (double)padded > maxu ? (double)padded : maxu;
        maxs = (double)padded / N > maxs ? (double)padded / N : maxs;
    }
    memset(b, 0, sizeof *b);
    b->base = resident_now();
    /* parameters: whole below stage 3; the shard plus what is gathered at once in stage 3
     * (the prefetch window and two units) */
    if (st < 3) {
        b->params = 4 * P;
    } else {
        double live = (double)e->cfg.prefetch_size + 2 * maxu;
        if (e->cfg.max_live && live > (double)e->cfg.max_live + maxu)
            live = (double)e->cfg.max_live + maxu;
        live = live < P ? live : P; /* never more than the whole model */
        b->params = F * live;
        if (par != ZT_OFFLOAD_NONE) /* the shard buffers; the shards in the RAM pool */
            b->params += F * zt_zero_param_slots(&e->cfg, (size_t)maxs) * maxs;
        if (par == ZT_OFFLOAD_NVME)
            b->params_off = 4 * P / N;
        else
            b->params += 4 * P / N;
    }
    /* gradients: whole units below stage 2; stage 2-3 keep the embeddings whole and two
     * scratch units; the reduced shard with N > 1 or stage >= 2, unless it goes where the
     * optimizer state goes (then two more shard buffers when micro-batches accumulate) */
    b->grads = st < 2 ? 4 * P : F * (double)e->layout.units[0].numel + 2 * F * maxu;
    if (goff && e->cfg.grad_accum_steps > 1)
        b->grads += 2 * F * maxs;
    if (goff && opt == ZT_OFFLOAD_NVME)
        b->grads_off = 4 * P / N;
    else if (N > 1 || st >= 2)
        b->grads += 4 * P / N;
    /* optimizer: two moments of what the rank owns, or the working buffers of offload */
    double own = st == 0 ? P : P / N;
    if (opt != ZT_OFFLOAD_NONE) { /* the working buffers; the moments in the RAM pool */
        double g = (double)e->cfg.sub_group_size;
        g = g > 0 && g < maxs ? g : maxs;
        int n = e->cfg.offload_buffers < 3 ? 3 : e->cfg.offload_buffers;
        b->optimizer = 2 * F * g * n;
    }
    if (opt == ZT_OFFLOAD_NVME)
        b->optimizer_off = 8 * own;
    else
        b->optimizer += 8 * own;
    /* activations of one micro-batch (when the batch shape is known) */
    if (e->cfg.plan_micro_batch > 0 && e->cfg.plan_seq_len > 0 && e->ops->act_bytes)
        b->activations = (double)e->ops->act_bytes(e->model, e->cfg.plan_micro_batch,
                                                    e->cfg.plan_seq_len);
    /* communication: the stage 2 late-micro-batch shard and the reduce buffers */
    b->comm = st >= 2 ? 2 * F * maxs : 0.0;
    /* I/O staging buffers, one pool per store */
    int stores = (opt == ZT_OFFLOAD_NVME) * (1 + goff) + (par == ZT_OFFLOAD_NVME);
    b->io = (double)stores * (double)e->cfg.aio_block_size *
            (e->cfg.aio_queue_depth > 0 ? e->cfg.aio_queue_depth : 8);
}

static void describe(char *out, size_t n, const plan_bytes *b, placement pl)
{
    const double M = 1048576.0;
    snprintf(out, n,
             "optimizer state %s, gradient shards %s, parameters %s; RAM per rank: process "
             "%.0f MiB, params %.0f MiB, grads %.0f MiB, optimizer %.0f MiB, activations %.0f "
             "MiB, comm %.0f MiB, I/O buffers %.0f MiB = %.0f MiB predicted peak; on NVMe: "
             "%.0f MiB",
             pl.opt == ZT_OFFLOAD_NVME ? "on NVMe" : "in RAM",
             b->grads_off > 0 ? "on NVMe" : "in RAM",
             pl.par == ZT_OFFLOAD_NVME ? "shards on NVMe" : "in RAM", b->base / M,
             b->params / M, b->grads / M, b->optimizer / M, b->activations / M, b->comm / M,
             b->io / M, total(b) / M, (b->params_off + b->optimizer_off + b->grads_off) / M);
}

int zt_plan_memory(zt_engine *e, char *report, size_t n)
{
    zt_config *c = &e->cfg;
    plan_bytes b;
    char line[1024];
    double limit = (double)c->memory_limit;
    if (report && n)
        report[0] = '\0';
    if (c->memory_limit == 0)
        return 0;
    /* What the config asked for is kept; the planner adds offload where it is free to, the
     * least I/O first: the optimizer state, then the gradient shards with it (stages 2-3,
     * written and read once per step), then the parameter shards (stage 3, read twice). */
    int opt0 = c->offload_optimizer, par0 = c->offload_param, g0 = c->offload_gradients;
    int optN = opt0 ? opt0 : ZT_OFFLOAD_NVME, parN = par0 ? par0 : ZT_OFFLOAD_NVME;
    int gmin = g0 > 0, gmax = g0 >= 0; /* automatic: either, in RAM first */
    placement cand[4] = {{opt0, par0, gmin}, {optN, par0, gmin}, {optN, par0, gmax},
                         {optN, parN, gmax}};
    int ncand = c->zero_stage >= 3 ? 4 : c->zero_stage >= 2 ? 3 : c->zero_stage >= 1 ? 2 : 1;
    for (int i = 0; i < ncand; i++) {
        predict(e, cand[i], &b);
        if (total(&b) > limit)
            continue;
        describe(line, sizeof line, &b, cand[i]);
        if ((cand[i].opt == ZT_OFFLOAD_NVME || cand[i].par == ZT_OFFLOAD_NVME) && !e->nvme_path[0])
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
    predict(e, cand[ncand - 1], &b);
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
