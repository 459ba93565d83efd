/* adamw.h - torch.optim.AdamW on flat fp32 ranges, and the sum of squares for global-norm
 * clipping. Pure functions over memory: no MPI (the engine reduces), no allocation. */
#ifndef ZT_OPTIMIZER_ADAMW_H
#define ZT_OPTIMIZER_ADAMW_H

#include <stddef.h>
#include <stdint.h>

typedef struct zt_adamw_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step;        /* 1 for the first update (bias corrections) */
    float grad_scale;    /* gradients are multiplied by this (clipping); 1 = none */
    int no_bias_correction; /* 1: step lr, denominator sqrt(v) + eps (DeepSpeed's Adam with
                             * bias_correction false) */
} zt_adamw_hparams;

/* One fused pass: p -= lr*wd*p; m, v updated; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
 * decay = 0 skips the weight decay for this range. Multi-threaded, elementwise. */
void zt_adamw_update(float *p, const float *g, float *m, float *v, size_t n,
                     const zt_adamw_hparams *hp, int decay);

/* Sum of squares in double, summed in fixed 4096-element chunks in order, so the result
 * does not depend on the number of threads. */
double zt_sumsq(const float *x, size_t n);
/* one 4096-element chunk of it (n <= 4096), single-threaded: eight interleaved double lanes
 * (lane k takes the elements k mod 8) added pairwise; for callers that chunk themselves */
double zt_sumsq_chunk(const float *x, size_t n);
/* the same over 16-bit values (dt: ZT_HALF_*, common/half.h): zt_sumsq of the widened values */
double zt_sumsq_half(int dt, const uint16_t *x, size_t n);

#endif
