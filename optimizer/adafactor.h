/* adafactor.h - Adafactor (Shazeer & Stern 2018) as Hugging Face's transformers implements
 * it, on pieces of tensors: a ZeRO shard holds any flat range of a matrix, while the
 * factored second moment needs row and column sums over the whole matrix and the update's
 * RMS over the whole tensor. A tensor of two or more dimensions [..., R, C] is factored over
 * its last two (Hugging Face's rule): B = the product of the leading dimensions independent
 * R x C matrices, each with its own row and column moments, while the parameter's and the
 * update's RMS span the whole tensor. So a step has three phases per tensor, with sums the
 * caller reduces over all pieces in between (the engine all-reduces them; this code never
 * calls MPI):
 *   1. zt_adafactor_sums: each piece adds its g^2 + eps1 into the row and column sums
 *      (factored tensors) and its p^2 into the parameter's sum of squares;
 *   2. zt_adafactor_stats on every rank with the reduced sums: the row / column moments
 *      (replicated state, small) and the step's lr; then zt_adafactor_precondition per
 *      piece: u = g / sqrt(v_hat) (1-D tensors update their per-element moment here), and
 *      the sum of u^2 of the piece;
 *   3. zt_adafactor_apply per piece with the reduced sum of u^2: clipping, lr, the first
 *      moment when beta1 is set, weight decay, p -= u.
 * Sums are in double and added in piece order by the caller, so the result does not depend
 * on the thread count and differs from one whole piece only in those additions' order. */
#ifndef ZT_OPTIMIZER_ADAFACTOR_H
#define ZT_OPTIMIZER_ADAFACTOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct zt_adafactor_hparams {
    float lr;              /* the external learning rate (relative_step = 0) */
    float eps1, eps2;      /* 1e-30 (added to g^2), 1e-3 (least parameter scale) */
    float clip_threshold;  /* 1.0 */
    float decay_rate;      /* -0.8: beta2 of step t is 1 - t^decay_rate */
    float beta1;           /* first moment's decay; < 0: none (the default) */
    float weight_decay;
    int relative_step, scale_parameter, warmup_init; /* 1, 1, 0 by default */
    int64_t step;          /* 1 for the first update */
} zt_adafactor_hparams;

void zt_adafactor_defaults(zt_adafactor_hparams *hp);

/* A tensor's shape for Adafactor: batch x rows x cols (factored: [..., R, C] with batch =
 * B the product of the leading dimensions, 0 taken as 1 so that {rows, cols} is one
 * matrix) or cols = 0 (a tensor of one dimension: a full second moment). numel = B x rows x
 * max(cols, 1). The factored moments are row[B x rows] (Hugging Face's exp_avg_sq_row of
 * shape [..., R]) and col[B x cols] (exp_avg_sq_col [..., C]), matrix b's at b x rows and
 * b x cols. */
typedef struct zt_adafactor_shape {
    size_t rows, cols, batch;
} zt_adafactor_shape;

/* The reduced sums of phase 1 (row_sum[B x rows], col_sum[B x cols] when factored). */
typedef struct zt_adafactor_sums {
    double *row_sum, *col_sum;
    double p_sumsq;
} zt_adafactor_sums;

/* Phase 1 for the piece of elements [off, off + n) of the tensor (flat, row-major): adds
 * into s (zeroed by the caller before the first piece). */
void zt_adafactor_sums_add(const zt_adafactor_shape *sh, size_t off, size_t n, const float *p,
                           const float *g, float grad_scale, float eps1, zt_adafactor_sums *s);

/* The step size before parameter scaling: lr, or with relative_step min(1e-2, 1/sqrt(t))
 * (warmup_init: min(1e-6 t, 1/sqrt(t))). */
double zt_adafactor_step_size(const zt_adafactor_hparams *hp);

/* Phase 2a, identical on every rank: the factored moments row[B x rows], col[B x cols]
 * updated with the reduced sums (means over the other dimension of each matrix), and the
 * step's learning rate. */
float zt_adafactor_stats(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                         const zt_adafactor_sums *s, float *row, float *col);

/* Phase 2b for a piece: u[n] = the preconditioned gradient (factored, element (b, i, j):
 * rsqrt(row_bi / mean_i(row_bi)) * rsqrt(col_bj) * g; a vector: its moment v[n] (the
 * piece's) updated, g / sqrt(v)); returns the piece's sum of u^2. u may be NULL (only the
 * sum, and a vector's moment). cfac: NULL, or zt_adafactor_scratch(sh) floats for the
 * column factors and the row means (computed once per call instead of once per element or
 * row; the same values). */
size_t zt_adafactor_scratch(const zt_adafactor_shape *sh);

double zt_adafactor_precondition(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                                 size_t off, size_t n, const float *g, float grad_scale,
                                 const float *row, const float *col, float *v, float *u,
                                 float *cfac);

/* Phase 3 for a piece: u /= max(1, rms(u) / clip_threshold) (rms from the reduced sum of
 * u^2 over numel), u *= lr; with beta1 m = beta1 m + (1 - beta1) u and u = m; p -=
 * weight_decay * lr * p when decay; p -= u. m may be NULL without beta1. */
void zt_adafactor_apply(const zt_adafactor_hparams *hp, size_t numel, double u_sumsq, float lr,
                        size_t n, const float *u, float *m, float *p, int decay);

/* Phase 3 from the gradient instead of u: u recomputed exactly as zt_adafactor_precondition
 * computed it (a vector's v already updated by it), then zt_adafactor_apply's arithmetic.
 * The engine uses it so that u needs no buffer of its own. */
void zt_adafactor_apply_grad(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                             size_t off, size_t n, const float *g, float grad_scale,
                             const float *row, const float *col, const float *v,
                             double u_sumsq, float lr, float *m, float *p, int decay,
                             float *cfac);

#endif
