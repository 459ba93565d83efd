/* lamb.h - LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning") as DeepSpeed's
 * FusedLamb computes it (deepspeed/ops/lamb/fused_lamb.py, csrc/lamb/fused_lamb_cuda_kernel.cu),
 * on pieces of tensors: a ZeRO shard holds any flat range of a tensor, while the trust ratio
 * needs the norms of the whole tensor. Per tensor and step:
 *   g' = g x grad_scale; m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g' g'
 *   u  = m / (sqrt(v) + eps) + wd p        (eps_inside_sqrt: m / sqrt(v + eps) + wd p)
 *   coeff = ||p|| / ||u|| clamped to [min_coeff, max_coeff], or 1 when either norm is 0
 *   p -= step_size coeff u,  step_size = lr sqrt(1 - b2^t) / (1 - b1^t) (bias_correction)
 *                            or lr (without)
 * The moments in u are not bias-corrected (FusedLamb folds both corrections into the step
 * size, so they do not enter the trust ratio), and p is the value before the update. So a
 * step has two phases per tensor, with two sums the caller reduces over all pieces in
 * between (the engine adds them in rank order; this code never calls MPI):
 *   1. zt_lamb_moments per piece: m and v updated, the piece's sums of p^2 and u^2 added;
 *   2. zt_lamb_coeff with the reduced sums, then zt_lamb_apply per piece (u recomputed from
 *      the stored moments, as FusedLamb's third kernel does).
 * Sums are in double over fixed 4096-element chunks added in order, so they do not depend on
 * the thread count. */
#ifndef ZT_OPTIMIZER_LAMB_H
#define ZT_OPTIMIZER_LAMB_H

#include <stddef.h>
#include <stdint.h>

typedef struct zt_lamb_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    float max_coeff, min_coeff; /* FusedLamb's defaults: 10 and 0.01 */
    int64_t step;               /* 1 for the first update */
    float grad_scale;           /* gradients are multiplied by this (clipping, loss scale) */
    int no_bias_correction;     /* 1: the step size is lr */
    int eps_inside_sqrt;        /* FusedLamb's eps_inside_sqrt (its mode 0) */
} zt_lamb_hparams;

/* Phase 1 on n elements of one tensor: m, v updated; *w2 += sum p^2, *u2 += sum u^2 (u with
 * weight decay unless decay = 0). */
void zt_lamb_moments(const float *p, const float *g, float *m, float *v, size_t n,
                     const zt_lamb_hparams *hp, int decay, double *w2, double *u2);

/* The trust ratio of a tensor from its reduced sums. */
float zt_lamb_coeff(double w2, double u2, const zt_lamb_hparams *hp);

/* The step size: lr sqrt(1 - b2^t) / (1 - b1^t), or lr without bias correction. */
float zt_lamb_step_size(const zt_lamb_hparams *hp);

/* Phase 2 on the same n elements: p -= step_size x coeff x u. */
void zt_lamb_apply(float *p, const float *m, const float *v, size_t n,
                   const zt_lamb_hparams *hp, int decay, float coeff);

#endif
