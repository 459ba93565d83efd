/* footprint.c - the bytes one rank holds (footprint.h). Each line is the allocation zero.c
 * and ostate.c make for it. */
#include "footprint.h"
#include "geom.h"
#include "../common/half.h"
#include "../models/model.h"

#include "zerotrain.h"

void zt_footprint_of(const zt_fp_in *in, zt_footprint *o)
{
    const zt_layout *L = in->L;
    /* F: bytes per parameter float, G: per gradient float */
    double F = in->pbytes > 0 ? in->pbytes : 4.0, G = in->gbytes > 0 ? in->gbytes : 4.0;
    double N = in->N, P = 0.0, maxs = 0.0, maxo = 0.0, whole = 0.0;
    double persist = 0.0;
    int st = in->stage;
    for (int u = 0; u < L->n_units; u++) {
        size_t padded;
        zt_geom_piece_for(L->units[u].numel, (size_t)in->N, in->bucket, &padded);
        double p = (double)padded;
        P += p;
        maxs = p / N > maxs ? p / N : maxs;
        if (u == in->whole_grad)
            whole = p;
        else
            maxo = p > maxo ? p : maxo;
        persist += padded < in->persist_threshold ? p : 0.0;
    }
    *o = (zt_footprint){0};
    o->padded = P;
    /* parameters: whole units below stage 3; stage 3: this rank's shards (in RAM, the
     * offload's RAM pool with its shard buffers, or the swap file with them), the units kept
     * gathered and the gather pool */
    if (st < 3) {
        o->params = F * P;
    } else {
        o->params = F * (persist + in->gathered);
        if (in->par_off != ZT_OFFLOAD_NONE) /* the shard slots */
            o->params += F * in->param_slots * maxs;
        if (in->par_off == ZT_OFFLOAD_NVME)
            o->params_off = F * P / N;
        else
            o->params += F * P / N;
    }
    if (in->inference) { /* forward only: the parameters alone */
        o->formula = st < 3 ? F * P : (o->params_off ? 0.0 : F * P / N);
        return;
    }
    /* gradients: whole units below stage 2; stages 2-3 the whole-gradient unit and two
     * scratch buffers of the largest other unit; the reduced shards with N > 1 or stage >= 2
     * (in RAM, or where the optimizer state goes, with two accumulation buffers) */
    /* (a 16-bit accumulation dtype: every stage lends fp32 buffers as stage 2 does) */
    int h16 = G < 4.0;
    double lent = 4.0 * (whole + 2 * maxo);
    o->grads = st < 2 ? G * P + (h16 ? lent : 0.0) : lent;
    if (in->grads_off) {
        o->grads += in->grad_acc_buffers ? 2 * G * maxs : 0.0;
        o->grads += h16 ? 2 * G * maxs : 0.0; /* each shard rounded for its write-back */
        if (in->opt_off == ZT_OFFLOAD_NVME)
            o->grads_off = G * P / N;
        else
            o->grads += G * P / N;
    } else if (in->N > 1 || st >= 2) {
        o->grads += G * P / N;
    }
    /* the optimizer: the state of the parts this rank holds (in RAM, or the offload's RAM
     * pool or swap file, with its working buffers) and what every rank keeps whole */
    o->optimizer = in->opt_replicated + (in->opt_off != ZT_OFFLOAD_NONE ? in->opt_work : 0.0);
    if (in->opt_off == ZT_OFFLOAD_NVME)
        o->optimizer_off = in->opt_state;
    else
        o->optimizer += in->opt_state;
    /* stages 2-3: a later micro-batch's reduced shard waits in one of two fp32 buffers (with
     * 16-bit accumulation also at stage 1, a shard widened for the update, and at stage 0
     * with several ranks, a reduced shard before its rounding) */
    o->comm = st >= 2 || (h16 && (st == 1 || in->N > 1)) ? 2 * 4.0 * maxs : 0.0;
    /* the ZeRO paper's figure */
    double ost = in->opt_state + in->opt_replicated;
    o->opt_state = ost;
    o->formula = st < 2 ? (F + G) * P + ost : st == 2 ? F * P + G * P / N + ost
                                                     : (F + G) * P / N + ost;
    if (in->opt_off == ZT_OFFLOAD_NVME)
        o->formula -= in->opt_state;
    if (st >= 3 && in->par_off == ZT_OFFLOAD_NVME)
        o->formula -= F * P / N;
    if (in->grads_off && in->opt_off == ZT_OFFLOAD_NVME)
        o->formula -= G * P / N;
}

int zt_fp_half(const zt_config *c)
{
    return c->precision == ZT_PREC_BF16 ? ZT_HALF_BF16
           : c->precision == ZT_PREC_FP16 ? ZT_HALF_F16 : -1;
}

int zt_fp_grad_half(const zt_config *c)
{
    int g = c->grad_accum_dtype;
    if (g == ZT_GRAD_AUTO) /* DeepSpeed: the bf16 optimizer accumulates in fp32, fp16 in fp16 */
        g = c->precision == ZT_PREC_FP16 ? ZT_GRAD_FP16 : ZT_GRAD_FP32;
    return g == ZT_GRAD_BF16 ? ZT_HALF_BF16 : g == ZT_GRAD_FP16 ? ZT_HALF_F16 : -1;
}

int zt_fp_comm_half(const zt_config *c)
{
    int g = c->comm_dtype;
    if (g == ZT_GRAD_AUTO) /* DeepSpeed: the gradients' own dtype */
        return zt_fp_grad_half(c);
    return g == ZT_GRAD_BF16 ? ZT_HALF_BF16 : g == ZT_GRAD_FP16 ? ZT_HALF_F16 : -1;
}

void zt_fp_dtypes(const zt_config *c, double *pb, double *gb, double *mb)
{
    int half = c->precision == ZT_PREC_BF16 || c->precision == ZT_PREC_FP16;
    /* the compute copy: 2 bytes in bf16 and fp16 */
    *pb = half ? 2.0 : 4.0;
    *gb = zt_fp_grad_half(c) < 0 ? 4.0 : 2.0;
    *mb = half ? 4.0 : 0.0;
}

int zt_fp_param_slots(const zt_config *c, size_t largest_shard)
{
    int n = c->offload_param_buffers < 3 ? 3 : c->offload_param_buffers;
    size_t cap = largest_shard ? c->offload_param_max_in_cpu / largest_shard : 0;
    if (c->offload_param_max_in_cpu && cap < (size_t)n) /* max_in_cpu: at least 3 */
        n = cap < 3 ? 3 : (int)cap;
    return n > ZT_OFF_MAXBUF ? ZT_OFF_MAXBUF : n;
}

size_t zt_fp_group_floats(const zt_config *c, size_t largest_shard)
{
    size_t g = c->sub_group_size ? c->sub_group_size : (size_t)1 << 62;
    if (c->optimizer == ZT_OPT_ADAFACTOR || c->optimizer == ZT_OPT_LAMB) /* (their updates
                                                        * read a tensor's state twice) */
        g = (size_t)1 << 62;
    g = g < ZT_SHARD_ALIGN ? ZT_SHARD_ALIGN : g / ZT_SHARD_ALIGN * ZT_SHARD_ALIGN;
    return g < largest_shard ? g : largest_shard;
}

int zt_fp_offload_buffers(const zt_config *c, int groups)
{
    int n = c->offload_buffers < 3 ? 3 : c->offload_buffers;
    n = n > groups + 1 ? groups + 1 : n;
    return n > ZT_OFF_MAXBUF ? ZT_OFF_MAXBUF : n;
}
