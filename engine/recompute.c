/* recompute.c - the recomputation plan of a built-in model (recompute.h): per unit what its
 * backward pass keeps (ZT_KEEP_*) and the segment length, from the config (recompute "auto":
 * the planner's, plan.c), handed to the model with its backward steps and predicted
 * activation bytes following. Sees no engine: the model and the config come as arguments. */
#include "recompute.h"
#include "../common/err.h"

#include <stdlib.h>

int zt_rplan_apply(zt_rplan *rc, const zt_config *c, const zt_model_ops *ops, void *model)
{
    ZT_TRY(ops->set_recompute(model, rc->mode, rc->k));
    rc->n_bsteps = c->inference ? 0 : ops->backward_steps(model, rc->bsteps);
    if (c->plan_micro_batch > 0 && c->plan_seq_len > 0)
        rc->act_predicted = ops->act_bytes(model, c->plan_micro_batch, c->plan_seq_len, NULL, 0);
    return 0;
}

int zt_rplan_setup(zt_rplan *rc, const zt_config *c, int nu, const zt_model_ops *ops,
                   void *model)
{
    int L = 0, md = ZT_KEEP_ALL;
    rc->n = ops && ops->n_steps ? ops->n_steps(model) : nu;
    nu = rc->n; /* (below: steps) */
    if (!(rc->unit = calloc((size_t)nu, sizeof *rc->unit)) ||
        !(rc->mode = calloc((size_t)nu, 1)) ||
        !(rc->bsteps = calloc(3 * (size_t)nu, sizeof *rc->bsteps)) ||
        !(rc->calls = calloc((size_t)nu, sizeof *rc->calls)) ||
        !(rc->bytes = calloc((size_t)nu, sizeof *rc->bytes)) ||
        !(rc->sec = calloc((size_t)nu, sizeof *rc->sec)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int u = 0; u < nu; u++)
        rc->unit[u] = ops && ops->step_unit ? ops->step_unit(model, u) : u;
    if (!ops) /* a model of your own: nothing to plan */
        return 0;
    for (int u = 0; u < nu; u++)
        L += ops->recompute_flops(model, 1, 1, u, ZT_KEEP_OUTPUT) > 0;
    rc->k = 0;
    if (c->inference) { /* forward only: nothing is kept for a backward pass */
        for (int u = 0; u < nu; u++)
            rc->mode[u] = ops->recompute_flops(model, 1, 1, u, ZT_KEEP_OUTPUT) > 0
                              ? ZT_KEEP_FORWARD : ZT_KEEP_ALL;
        return zt_rplan_apply(rc, c, ops, model);
    }
    switch (c->recompute) {
    case ZT_RECOMPUTE_SELECTIVE: md = ZT_KEEP_SELECTIVE; break;
    case ZT_RECOMPUTE_FULL:
        md = c->offload_checkpoints ? ZT_KEEP_OFFLOAD : ZT_KEEP_OUTPUT;
        if (c->number_checkpoints > 0) /* that many inputs kept: segments */
            rc->k = (L + c->number_checkpoints - 1) / c->number_checkpoints;
        break;
    case ZT_RECOMPUTE_EVERY_K:
        md = c->offload_checkpoints ? ZT_KEEP_OFFLOAD : ZT_KEEP_OUTPUT;
        rc->k = c->recompute_k;
        break;
    default: break; /* NONE; AUTO is decided by the planner */
    }
    rc->k = rc->k >= 2 ? rc->k : 0;
    if (rc->k >= L && L > 0) /* one segment: its K working sets hold every layer */
        zt_log(ZT_LOG_WARN, "recompute every-k:%d with %d layers keeps every layer's "
               "activations (in %d working sets) and recomputes none: use \"none\", or K "
               "below the layer count", rc->k, L, L);
    for (int u = 0; u < nu; u++)
        rc->mode[u] = ops->recompute_flops(model, 1, 1, u, ZT_KEEP_OUTPUT) > 0
                          ? (unsigned char)md : ZT_KEEP_ALL;
    return zt_rplan_apply(rc, c, ops, model);
}

int zt_rplan_last_use(const zt_rplan *rc, int k)
{
    int u = rc->unit[rc->bsteps[k].unit];
    for (int q = k + 1; q < rc->n_bsteps; q++)
        if (rc->bsteps[q].op == ZT_STEP_BACKWARD && rc->unit[rc->bsteps[q].unit] == u)
            return 0;
    return 1;
}

void zt_rplan_free(zt_rplan *rc)
{
    free(rc->unit);
    rc->unit = NULL;
    free(rc->mode);
    free(rc->bsteps);
    free(rc->calls);
    free(rc->bytes);
    free(rc->sec);
    rc->mode = NULL;
    rc->bsteps = NULL;
    rc->calls = rc->bytes = NULL;
    rc->sec = NULL;
}

const char *zt_keep_name(int mode)
{
    static const char *names[ZT_KEEP_MODES] = {"keep", "selective", "full", "full+offload"};
    if (mode == ZT_KEEP_FORWARD)
        return "forward-only";
    return mode >= 0 && mode < ZT_KEEP_MODES ? names[mode] : "?";
}
