/* estimate.c - zt_estimate_memory (zerotrain.h): a configuration's bytes per rank before
 * anything is allocated, from the memory planner's own prediction (plan.c, footprint.c) over
 * the model's layout, or over a layout of num_params parameters cut into units. No engine,
 * no communicator, no weights read: what `zerotrain estimate` prints. */
#include "zerotrain.h"
#include "comm.h"
#include "config.h"
#include "footprint.h"
#include "plan.h"
#include "recompute.h"
#include "../common/err.h"
#include "../models/zoo.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ZT_EST_UNIT ((size_t)1 << 26) /* --params: floats per unit by default */
#define ZT_EST_MAX_UNITS 1000000       /* --params: 2^26 x this is 6.7e13 parameters */

/* num_params parameters in units of at most unit floats (each one 1-D parameter) */
static int synthetic_layout(double num_params, size_t unit, zt_layout *l)
{
    double nu = ceil(num_params / (double)unit);
    if (nu > ZT_EST_MAX_UNITS)
        return zt_fail(ZT_E_RANGE, "estimate: %.4g parameters in units of %zu make %.0f units "
                       "(at most %d): give larger units", num_params, unit, nu,
                       ZT_EST_MAX_UNITS);
    double left = num_params;
    for (int u = 0; left > 0; u++) {
        char name[48];
        int64_t n = (int64_t)(left < (double)unit ? left : (double)unit);
        snprintf(name, sizeof name, "unit.%d", u);
        if (zt_layout_add_unit(l, name) < 0)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        snprintf(name, sizeof name, "unit.%d.weight", u);
        if (zt_layout_add_param(l, name, 1, &n, ZT_INIT_NORMAL, 1) < 0)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        left -= (double)n;
    }
    snprintf(l->arch, sizeof l->arch, "parameters");
    return 0;
}

/* the unit whose gradient stays whole (the engine's whole_grad_unit) */
static int whole_grad(const zt_model_ops *ops, void *model, int nu)
{
    int w = -1;
    for (int u = 0; ops && u < nu; u++) {
        int t = ops->tied_unit(model, u);
        if (t >= 0)
            w = t;
    }
    return w;
}

static int estimate(const zt_config *cfg0, int N, double num_params, size_t unit_params,
                    zt_layout *l, zt_model_cfg *mc, const zt_model_ops **ops, void **model,
                    zt_rplan *rc, zt_mem_account *acct, zt_estimate *o)
{
    zt_config c1 = *cfg0, *cfg = &c1;
    /* the engine's placement of the gradient shards (zero.c): with the optimizer state at
     * stages 2-3 unless told to stay in RAM */
    c1.offload_gradients = c1.zero_stage >= 2 && c1.offload_optimizer != ZT_OFFLOAD_NONE &&
                           c1.offload_gradients >= 0 ? 1 : -1;
    char src[4200];
    int named = cfg->model_dir || cfg->model_config || cfg->model_preset;
    if (N < 1)
        return zt_fail(ZT_E_CONFIG, "estimate: world size %d: at least 1 rank", N);
    if (cfg->zero_stage < 0 || cfg->zero_stage > 3)
        return zt_fail(ZT_E_CONFIG, "estimate: ZeRO stage %d: stages are 0 to 3",
                       cfg->zero_stage);
    if (named && num_params != 0)
        return zt_fail(ZT_E_CONFIG, "estimate: give a model or a parameter count, not both");
    if (!named && !(num_params >= 1 && num_params < 1e15))
        return zt_fail(ZT_E_CONFIG, "estimate: %g parameters: give a model, or between 1 and "
                       "1e15 parameters", num_params);
    if (!named && cfg->plan_micro_batch > 0)
        return zt_fail(ZT_E_CONFIG, "estimate: activations are counted for a model (its "
                       "layers), not for a parameter count: give a model or no batch shape");
    if (cfg->recompute == ZT_RECOMPUTE_AUTO)
        return zt_fail(ZT_E_CONFIG, "estimate: recompute \"auto\" plans to fit a memory "
                       "limit: give the mode (none, full, selective, every-k)");
    if ((cfg->plan_micro_batch > 0) != (cfg->plan_seq_len > 0) || cfg->plan_micro_batch < 0 ||
        cfg->plan_seq_len < 0)
        return zt_fail(ZT_E_CONFIG, "estimate: activations need both the micro-batch (%d) and "
                       "the sequence length (%d), each at least 1", cfg->plan_micro_batch,
                       cfg->plan_seq_len);
    ZT_TRY(zt_config_check(cfg, 1));
    int rc0 = 0;
    if (cfg->model_dir) {
        snprintf(src, sizeof src, "%s/config.json", cfg->model_dir);
        rc0 = zt_model_config_load(src, mc);
    } else if (cfg->model_config) {
        snprintf(src, sizeof src, "%s", cfg->model_config);
        rc0 = zt_model_config_load(src, mc);
    } else if (cfg->model_preset) {
        snprintf(src, sizeof src, "model preset %s", cfg->model_preset);
        rc0 = zt_model_config_preset(cfg->model_preset, cfg->vocab_size, mc);
    }
    ZT_TRY(rc0);
    if (named) {
        mc->ej.gen_size = cfg->electra_generator_size;
        ZT_TRY(zt_model_head_apply(mc, src, cfg->head, cfg->num_labels, cfg->problem_type,
                                   cfg->label_names));
        ZT_TRY(zt_model_layout(mc, l));
        ZT_TRY(zt_model_create(mc, l, cfg->dropout, cfg->seed, zt_fp_half(cfg), acct, ops, model));
    } else {
        ZT_TRY(synthetic_layout(num_params, unit_params ? unit_params : ZT_EST_UNIT, l));
    }
    ZT_TRY(zt_rplan_setup(rc, cfg, l->n_units, *ops, *model));
    zt_comm comm;
    memset(&comm, 0, sizeof comm);
    comm.comm = MPI_COMM_NULL;
    comm.size = N;
    zt_planner pn;
    zt_plan_init(&pn, (zt_config *)cfg, l, &comm, rc, *ops, *model,
                 cfg->nvme_path ? cfg->nvme_path : "", whole_grad(*ops, *model, l->n_units));
    zt_footprint fp;
    double act = 0.0, io = 0.0;
    zt_plan_predict(&pn, N, &fp, &act, &io);

    double n = 0.0, P = fp.padded, pb, gb, mb;
    for (int i = 0; i < l->n_params; i++)
        n += (double)l->params[i].numel;
    zt_fp_dtypes(cfg, &pb, &gb, &mb);
    double own = cfg->zero_stage == 0 ? P : P / N; /* the floats whose state the rank holds */
    memset(o, 0, sizeof *o);
    o->world_size = N;
    o->zero_stage = cfg->zero_stage;
    o->precision = cfg->precision;
    o->num_params = n;
    o->padded_params = P;
    o->param_bytes = pb;
    o->grad_bytes = gb;
    o->master_bytes = mb;
    o->optimizer_bytes_per_param = own > 0 ? fp.opt_state / own : 0.0;
    o->model_state_bytes = fp.formula;
    o->buffer_bytes = fp.params + fp.grads + fp.optimizer + fp.comm + io - fp.formula;
    o->activation_bytes = act;
    o->params_nvme = fp.params_off;
    o->grads_nvme = fp.grads_off;
    o->optimizer_nvme = fp.optimizer_off;
    o->params_ram = fp.params;
    o->grads_ram = fp.grads;
    o->optimizer_ram = fp.optimizer;
    o->comm_bytes = fp.comm;
    o->io_bytes = io;
    o->nvme_bytes = fp.params_off + fp.grads_off + fp.optimizer_off;
    o->peak_bytes = o->model_state_bytes + o->buffer_bytes + act;
    return 0;
}

int zt_estimate_memory(const zt_config *cfg, int world_size, double num_params,
                       size_t unit_params, zt_estimate *out)
{
    zt_clear_error();
    if (!cfg || !out)
        return zt_fail(ZT_E_INVAL, "zt_estimate_memory: cfg and out must not be NULL");
    zt_layout l = {0};
    zt_model_cfg mc;
    const zt_model_ops *ops = NULL;
    void *model = NULL;
    zt_rplan rc;
    zt_mem_account acct; /* the model's small allocations (no weights, no batch) */
    memset(&acct, 0, sizeof acct);
    memset(&mc, 0, sizeof mc);
    memset(&rc, 0, sizeof rc);
    int r = estimate(cfg, world_size, num_params, unit_params, &l, &mc, &ops, &model, &rc,
                     &acct, out);
    if (ops && model)
        ops->destroy(model);
    zt_rplan_free(&rc);
    zt_layout_free(&l);
    return r;
}
