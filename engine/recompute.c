/* recompute.c - the recomputation plan of a built-in model: per unit what its backward
 * pass keeps (ZT_KEEP_*) and the segment length, from the config (recompute "auto": the
 * planner's, plan.c), handed to the model with its backward steps and predicted activation
 * bytes following. */
#include "engine_impl.h"

#include <stdlib.h>

int zt_recompute_apply(zt_engine *e)
{
    ZT_TRY(e->ops->set_recompute(e->model, e->rc.mode, e->rc.k));
    e->rc.n_bsteps = e->ops->backward_steps(e->model, e->rc.bsteps);
    if (e->cfg.plan_micro_batch > 0 && e->cfg.plan_seq_len > 0)
        e->rc.act_predicted = e->ops->act_bytes(e->model, e->cfg.plan_micro_batch,
                                             e->cfg.plan_seq_len, NULL, 0);
    return 0;
}

/* The recomputation plan of the config (recompute "auto": the planner's, see plan.c). */
int zt_recompute_setup(zt_engine *e)
{
    int nu = e->layout.n_units, L = 0, md = ZT_KEEP_ALL;
    const zt_config *c = &e->cfg;
    if (!(e->rc.mode = calloc((size_t)nu, 1)) ||
        !(e->rc.bsteps = calloc(3 * (size_t)nu, sizeof *e->rc.bsteps)) ||
        !(e->rc.calls = calloc((size_t)nu, sizeof *e->rc.calls)) ||
        !(e->rc.bytes = calloc((size_t)nu, sizeof *e->rc.bytes)) ||
        !(e->rc.sec = calloc((size_t)nu, sizeof *e->rc.sec)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    if (!e->ops) /* a model of your own: nothing to plan */
        return 0;
    for (int u = 0; u < nu; u++)
        L += e->ops->recompute_flops(e->model, 1, 1, u, ZT_KEEP_OUTPUT) > 0;
    e->rc.k = 0;
    switch (c->recompute) {
    case ZT_RECOMPUTE_SELECTIVE: md = ZT_KEEP_SELECTIVE; break;
    case ZT_RECOMPUTE_FULL:
        md = c->offload_checkpoints ? ZT_KEEP_OFFLOAD : ZT_KEEP_OUTPUT;
        if (c->number_checkpoints > 0) /* that many inputs kept: segments */
            e->rc.k = (L + c->number_checkpoints - 1) / c->number_checkpoints;
        break;
    case ZT_RECOMPUTE_EVERY_K:
        md = c->offload_checkpoints ? ZT_KEEP_OFFLOAD : ZT_KEEP_OUTPUT;
        e->rc.k = c->recompute_k;
        break;
    default: break; /* NONE; AUTO is decided by the planner */
    }
    e->rc.k = e->rc.k >= 2 ? e->rc.k : 0;
    if (e->rc.k >= L && L > 0) /* one segment: its K working sets hold every layer */
        zt_log(ZT_LOG_WARN, "recompute every-k:%d with %d layers keeps every layer's "
               "activations (in %d working sets) and recomputes none: use \"none\", or K "
               "below the layer count", e->rc.k, L, L);
    for (int u = 0; u < nu; u++)
        e->rc.mode[u] = e->ops->recompute_flops(e->model, 1, 1, u, ZT_KEEP_OUTPUT) > 0
                          ? (unsigned char)md : ZT_KEEP_ALL;
    return zt_recompute_apply(e);
}

const char *zt_keep_name(int mode)
{
    static const char *names[ZT_KEEP_MODES] = {"keep", "selective", "full", "full+offload"};
    return mode >= 0 && mode < ZT_KEEP_MODES ? names[mode] : "?";
}

