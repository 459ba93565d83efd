/* hlayers.h - BERT's and T5's kernels over activations of either precision. dt < 0 calls the fp32
 * kernels of layers.h as they are; dt = ZT_HALF_BF16 or ZT_HALF_F16 (common/half.h) reads and
 * writes 16-bit activations and parameters (uint16_t bit patterns), computes in fp32 inside
 * and rounds to nearest even what it stores: the matrix products through hgemm.h (bf16 on
 * bf16 instructions where the CPU has them, else widened into sgemm), the rest widened a row
 * or a block at a time into the same fp32 arithmetic as layers.c (the same vmath loops, the
 * same orders), so that each equals its fp32 kernel on the widened inputs, rounded. Gradients
 * stay fp32 (the products' operands are rounded to the dtype first, as a 16-bit module's
 * gradients are). Letters as layers.h; "h" below: a 16-bit array when dt >= 0, fp32 else.
 * Scratch is the caller's: its floats per call are given by the *_scratch functions, for at
 * most `slots` threads. */
#ifndef ZT_MODELS_HLAYERS_H
#define ZT_MODELS_HLAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "layers.h"

/* bytes of one element of an activation of dtype dt */
static inline size_t x_es(int dt) { return dt < 0 ? 4 : 2; }
/* element i of an activation array */
static inline void *x_at(int dt, const void *p, size_t i)
{
    return (char *)p + i * x_es(dt);
}

/* out[M,N] (h) = inp[M,K] (h) w[N,K]^T (h) + b[N] (h, may be NULL). scr: scr_n floats (at
 * least N; fp32 unused): the product's rows in blocks of scr_n / N. */
void xlinear_forward(int dt, void *out, const void *inp, const void *w, const void *b, int M,
                     int K, int N, float *scr, size_t scr_n);
/* the same with an fp32 result (logits) */
void xlinear_forward_f32(int dt, float *out, const void *inp, const void *w, const void *b,
                         int M, int K, int N);
/* dout (fp32) rounded into hscr (hscr_n elements, at least N; rows in blocks), then dinp[M,K]
 * += dh w (dinp may be NULL), dw[N,K] += dh^T inp, db[N] += sum of dh's rows (db may be
 * NULL); all fp32 */
void xlinear_backward(int dt, float *dinp, float *dw, float *db, const float *dout,
                      const void *inp, const void *w, int M, int K, int N, uint16_t *hscr,
                      size_t hscr_n);
/* the same from a 16-bit dout (dt >= 0 only) */
void xlinear_backward_h(int dt, float *dinp, float *dw, float *db, const uint16_t *dout,
                        const void *inp, const void *w, int M, int K, int N);

/* layernorm_forward / _backward (mean, rstd, dinp, dw, db fp32); scr: xlayernorm_scratch */
size_t xlayernorm_scratch(int dt, int C, int slots);
void xlayernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp,
                        const void *w, const void *b, int M, int C, float eps, float *scr,
                        int slots);
void xlayernorm_backward(int dt, float *dinp, float *dw, float *db, const float *dout,
                         const void *inp, const float *mean, const float *rstd, const void *w,
                         int M, int C, float *scr, int slots);

/* tanh; its backward from the output */
void xtanh_forward(int dt, void *out, const void *inp, size_t n);
void xtanh_backward(int dt, float *dinp, const void *out, const float *dout, size_t n);

/* out[M,C] = word[ids] + type[tt] + pos[pos_ids or t] (embedding_forward(_pos)); pos_ids NULL:
 * B rows of T positions, else M = B rows (T = 1) at their positions; type NULL: word + pos */
void xembedding_forward(int dt, void *out, const int64_t *ids, const int64_t *tt,
                        const int64_t *pos_ids, const void *word, const void *type,
                        const void *pos, int B, int T, int C);

/* crossentropy_forward_backward over logits of dtype dt (dlogits too: may equal logits);
 * scr: xcrossentropy_scratch */
size_t xcrossentropy_scratch(int dt, int V, int slots);
double xcrossentropy_forward_backward(int dt, void *dlogits, double *row_loss, int64_t *count,
                                      const void *logits, const int64_t *labels, int M, int V,
                                      float grad_scale, float *scr, int slots);

/* ---- T5 ---- */
/* rmsnorm_forward / _backward (rstd, dinp, dw fp32); scr: xlayernorm_scratch */
void xrmsnorm_forward(int dt, void *out, float *rstd, const void *inp, const void *w, int M,
                      int C, float eps, float *scr, int slots);
void xrmsnorm_backward(int dt, float *dinp, float *dw, const float *dout, const void *inp,
                       const float *rstd, const void *w, int M, int C, float *scr, int slots);
/* act_forward / act_backward (ZT_ACT_*; out may equal inp; dinp fp32) */
void xact_forward(int dt, int act, void *out, const void *inp, size_t n);
void xact_backward(int dt, int act, float *dinp, const void *inp, const float *dout, size_t n);
/* mul_forward / mul_backward (da, db fp32, either may be NULL) */
void xmul_forward(int dt, void *out, const void *a, const void *b, size_t n);
void xmul_backward(int dt, float *da, float *db, const float *dout, const void *a,
                   const void *b, size_t n);
/* out[M,C] = word[ids] (lookup_forward: the rows copied) */
void xlookup_forward(int dt, void *out, const int64_t *ids, const void *word, int M, int C);
/* out[n] = inp[n] * s (scale_inplace when out == inp), rounded */
void xscale(int dt, void *out, const void *inp, float s, size_t n);
/* fp16 only (else nothing): when any of x[n] is infinite, every element clamped to
 * +-(65504 - 1000) (as transformers' T5Block clamps fp16 hidden states); 1 if it clamped */
int xclamp_f16(int dt, void *x, size_t n);
/* row i of dst (fp32) = row idx[i] of src (fp32 or 16-bit: widened) */
void xwiden_rows(int dt, float *dst, const void *src, const int64_t *idx, int n, int C);

/* row i of dst = row idx[i] of src (n rows of C elements) */
void xgather_rows(int dt, void *dst, const void *src, const int32_t *idx, int n, int C);

#endif
