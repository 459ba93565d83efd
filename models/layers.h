/* layers.h - transformer kernels as forward/backward pairs on plain float arrays.
 * Outputs first, dimensions last; backward accumulates (+=) into parameter gradients and,
 * unless said otherwise, into input gradients. No allocation, no MPI, no global state.
 * Letters: B batch, T sequence, C channels, H heads, V vocabulary, M = B*T rows. */
#ifndef ZT_MODELS_LAYERS_H
#define ZT_MODELS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/* out[M,N] = inp[M,K] w[N,K]^T + b[N] (b may be NULL). K, N: in and out features. */
void linear_forward(float *out, const float *inp, const float *w, const float *b, int M, int K,
                    int N);
/* dinp[M,K] += dout w (dinp may be NULL); dw[N,K] += dout^T inp; db[N] += sum_rows dout
 * (db may be NULL). */
void linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                     const float *w, int M, int K, int N);

/* out[M,C] = (inp - mean) * rstd * w + b, biased variance; mean[M], rstd[M] saved. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int M, int C, float eps);
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *mean, const float *rstd, const float *w, int M, int C);

/* Exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))). out may equal inp. */
void gelu_forward(float *out, const float *inp, size_t n);
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

/* Multi-head softmax attention over q, k, v [B,T,C] (C = H*hs, head h = channels
 * [h*hs, (h+1)*hs)). att[B,H,T,T] keeps the softmax probabilities (before dropout).
 * scores = q k^T / sqrt(hs) + (1 - mask[b,j]) * (-FLT_MAX); mask[B,T] may be NULL.
 * drop: dropout on the probabilities (NULL = none). The (sample, head) pairs run in
 * parallel, one per OpenMP thread, at most `slots` threads: scratch holds slots x (T*T + T)
 * floats (backward: slots x 2*T*T). */
typedef struct zt_dropout {
    float p;                 /* drop probability, 0 <= p < 1 */
    uint64_t seed;
    uint64_t first_sample;   /* global index of batch row 0 */
    uint32_t stream;         /* zt_rng_stream(unit, purpose) */
} zt_dropout;

void attention_forward(float *ctx, float *att, uint32_t *keep, const float *q, const float *k,
                       const float *v, const int64_t *mask, const zt_dropout *drop,
                       float *scratch, int slots, int B, int T, int C, int H);
/* dq, dk, dv are overwritten (not accumulated). keep: the dropout keep-mask the forward
 * recorded (B*H*ceil(T*T/32) words; NULL in both calls = regenerate it from the counters:
 * the same decisions either way). */
void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *att,
                        const uint32_t *keep, const float *q, const float *k, const float *v,
                        const zt_dropout *drop, float *scratch, int slots, int B, int T, int C,
                        int H);

/* x[B, per_row] *= keep_mask / (1 - p), mask drawn from Philox per (sample, element);
 * the same call in backward applies the identical mask to the gradient. */
void dropout_apply(float *x, const zt_dropout *d, int B, size_t per_row);
/* x = dropout(x) + r (r may be NULL; with d NULL or p = 0 just x += r). keep (may be NULL)
 * records the mask: B rows of ceil(per_row / 32) words, bit i % 32 of word i / 32 of a row
 * set when element i is kept. */
void dropout_residual(float *x, const float *r, uint32_t *keep, const zt_dropout *d, int B,
                      size_t per_row);
/* dx *= the mask dropout_residual recorded in keep (NULL: regenerated, as dropout_apply). */
void dropout_backward(float *dx, const uint32_t *keep, const zt_dropout *d, int B,
                      size_t per_row);
/* x[i] += y[i] */
void add_into(float *x, const float *y, size_t n);

/* out[b,t,:] = word[ids] + type[tt] + pos[t] (tt may be NULL: type 0). */
void embedding_forward(float *out, const int64_t *ids, const int64_t *tt, const float *word,
                       const float *type, const float *pos, int B, int T, int C);
void embedding_backward(float *dword, float *dtype, float *dpos, const float *dout,
                        const int64_t *ids, const int64_t *tt, int B, int T, int C);

/* Cross-entropy of logits[M,V] against labels[M] (-100 = ignored). Returns the loss sum
 * over labelled rows (double); *count = labelled rows. If dlogits is not NULL it is set to
 * (softmax - onehot) * grad_scale on labelled rows and 0 elsewhere (may equal logits).
 * row_loss[M] is scratch (and holds each row's loss afterwards). */
double crossentropy_forward_backward(float *dlogits, double *row_loss, int64_t *count,
                                     const float *logits, const int64_t *labels, int M, int V,
                                     float grad_scale);

#endif
