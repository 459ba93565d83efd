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
/* linear_forward without a bias for few rows M (generation's decode passes): OpenBLAS packs
 * w on every call, which costs more than the product itself when M is small; this reads w
 * once, unpacked (vm_gemm_nt_small: columns split across threads in blocks of 64, the same
 * bits at any thread count and any M). */
void linear_decode_forward(float *out, const float *inp, const float *w, int M, int K, int N);
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
 * drop: dropout on the probabilities (NULL = none). mha_forward with Tq = Tk = T, div =
 * sqrt(hs), no bias, not causal; keep records the dropout mask (B*H*ceil(T*T/32) words, may be
 * NULL). The (sample, head) pairs run in parallel, one per OpenMP thread, at most `slots`
 * threads: scratch holds slots x (T*T + T) floats (backward: slots x 2*T*T). */
typedef struct zt_dropout {
    float p;                 /* drop probability, 0 <= p < 1 */
    uint64_t seed;
    uint64_t first_sample;   /* global index of batch row 0 */
    uint32_t stream;         /* zt_rng_stream(unit, purpose) */
} zt_dropout;

void attention_forward(float *ctx, float *att, uint32_t *keep, const float *q, const float *k,
                       const float *v, const int64_t *mask, const zt_dropout *drop,
                       float *scratch, int slots, int B, int T, int C, int H);
/* The same over packed rows (self-attention, no key mask): sample b's tokens are rows cu[b]
 * ... cu[b + 1] - 1 of q, k, v, ctx [cu[B], C] (cu[0] = 0); T >= every row's length is the
 * padded length: att, keep and scratch are laid out as for [B, T], pair (b, h) uses the first
 * L*L probabilities of its T*T (L its length) and the dropout counters from h*T*T that padded
 * rows use (so not the padded call's decisions beyond row 0). */
void attention_forward_varlen(float *ctx, float *att, uint32_t *keep, const float *q,
                              const float *k, const float *v, const int32_t *cu,
                              const zt_dropout *drop, float *scratch, int slots, int B, int T,
                              int C, int H);
void attention_backward_varlen(float *dq, float *dk, float *dv, const float *dctx,
                               const float *att, const uint32_t *keep, const float *q,
                               const float *k, const float *v, const int32_t *cu,
                               const zt_dropout *drop, float *scratch, int slots, int B, int T,
                               int C, int H);
/* The attention of each sample's first token alone (BERT's [CLS], all a classifier's last
 * layer needs): q, ctx, dq are [B, C], row b the query of sample b; its keys are rows cu[b]
 * ... cu[b + 1] - 1 of k, v (packed, cu not NULL) or [B, T] with the key mask. att, keep:
 * [B, H, 1, T]. The dropout decisions are those the full call gives that row. */
void attention_forward_first(float *ctx, float *att, uint32_t *keep, const float *q,
                             const float *k, const float *v, const int64_t *mask,
                             const int32_t *cu, const zt_dropout *drop, float *scratch,
                             int slots, int B, int T, int C, int H);
void attention_backward_first(float *dq, float *dk, float *dv, const float *dctx,
                              const float *att, const uint32_t *keep, const float *q,
                              const float *k, const float *v, const int32_t *cu,
                              const zt_dropout *drop, float *scratch, int slots, int B, int T,
                              int C, int H);
/* dq, dk, dv are overwritten (not accumulated). keep: the dropout keep-mask the forward
 * recorded (B*H*ceil(T*T/32) words; NULL in both calls = regenerate it from the counters:
 * the same decisions either way). */
void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *att,
                        const uint32_t *keep, const float *q, const float *k, const float *v,
                        const zt_dropout *drop, float *scratch, int slots, int B, int T, int C,
                        int H);

/* The same three over half-precision activations (hdt = ZT_HALF_*, common/half.h): ctx, att,
 * q, k, v hold 16-bit values, the gradients dq, dk, dv, dctx stay fp32. Each (sample, head)
 * pair widens its rows and computes in fp32 as above; the forward rounds the probabilities
 * into att and multiplies v by the rounded ones (those the backward reads), and rounds the
 * context. cu: packed rows (varlen) or NULL (padded, with mask); first: the first token's
 * query alone (attention_forward_first). hdt < 0: the fp32 kernels. scratch: slots x
 * attention_scratch(hdt, first ? 1 : T, T, C / H, backward) floats. */
size_t attention_scratch(int hdt, int Tq, int Tk, int D, int backward);
void xattention_forward(int hdt, void *ctx, void *att, uint32_t *keep, const void *q,
                        const void *k, const void *v, const int64_t *mask, const int32_t *cu,
                        int first, const zt_dropout *drop, float *scratch, int slots, int B,
                        int T, int C, int H);
/* BERT's relative position scores (position_embedding_type relative_key / relative_key_query,
 * modeling_bert.py BertSelfAttention): scores[i, j] += q_i . E[i - j + P - 1] (and, key_query,
 * + k_j . E[i - j + P - 1]) before the division by sqrt(hs), positions counted within each
 * sample (the first token's query alone: i = 0). E: distance_embedding [2P - 1, hs] in the
 * activations' dtype (hdt); dE: its fp32 gradient, accumulated by the backward (the pairs
 * summed in order); work: attention_rel_scratch floats. T <= P. */
typedef struct zt_relpos {
    const void *E;
    float *dE;
    float *work;
    int P, key_query;
} zt_relpos;
size_t attention_rel_scratch(int hdt, int first, int B, int H, int Tq, int Tk, int D, int slots,
                         int backward);
void xattention_forward_rel(int hdt, void *ctx, void *att, uint32_t *keep, const void *q,
                            const void *k, const void *v, const int64_t *mask, const int32_t *cu,
                            int first, const zt_relpos *rel, const zt_dropout *drop,
                            float *scratch, int slots, int B, int T, int C, int H);
void xattention_backward_rel(int hdt, float *dq, float *dk, float *dv, const float *dctx,
                             const void *att, const uint32_t *keep, const void *q, const void *k,
                             const void *v, const int32_t *cu, int first, const zt_relpos *rel,
                             const zt_dropout *drop, float *scratch, int slots, int B, int T,
                             int C, int H);
void xattention_backward(int hdt, float *dq, float *dk, float *dv, const float *dctx,
                         const void *att, const uint32_t *keep, const void *q, const void *k,
                         const void *v, const int32_t *cu, int first, const zt_dropout *drop,
                         float *scratch, int slots, int B, int T, int C, int H);

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
/* The same over packed rows: sample b is tokens cu[b] ... cu[b + 1] - 1 of x [cu[B], C]
 * (cu[0] = 0), with the decisions a padded row gives its first tokens; keep: at most cu[B] * C
 * / 32 + B words (row b's from word cu[b] * C / 32 + b). */
void dropout_residual_rows(float *x, const float *r, uint32_t *keep, const zt_dropout *d, int B,
                           const int32_t *cu, size_t C);
void dropout_backward_rows(float *dx, const uint32_t *keep, const zt_dropout *d, int B,
                           const int32_t *cu, size_t C);
/* x[i] += y[i] */
void add_into(float *x, const float *y, size_t n);
/* dropout_residual(_rows) over half-precision x and r (hdt = ZT_HALF_*; < 0: the fp32
 * kernels): the same decisions and fp32 arithmetic, x rounded */
void xdropout_residual(int hdt, void *x, const void *r, uint32_t *keep, const zt_dropout *d,
                       int B, size_t per_row);
void xdropout_residual_rows(int hdt, void *x, const void *r, uint32_t *keep,
                            const zt_dropout *d, int B, const int32_t *cu, size_t C);

/* out[b,t,:] = word[ids] + type[tt] + pos[t] (tt may be NULL: type 0; type NULL: no token
 * types, word + pos; pos NULL (with a type table): no absolute positions, word + type). */
void embedding_forward(float *out, const int64_t *ids, const int64_t *tt, const float *word,
                       const float *type, const float *pos, int B, int T, int C);
void embedding_backward(float *dword, float *dtype, float *dpos, const float *dout,
                        const int64_t *ids, const int64_t *tt, int B, int T, int C);
/* The same over M rows with their positions pos_ids[M] (packed rows) */
void embedding_forward_pos(float *out, const int64_t *ids, const int64_t *tt,
                           const int64_t *pos_ids, const float *word, const float *type,
                           const float *pos, int M, int C);
void embedding_backward_pos(float *dword, float *dtype, float *dpos, const float *dout,
                            const int64_t *ids, const int64_t *tt, const int64_t *pos_ids,
                            int M, int C);
/* The backward of either (pos_ids NULL: B rows of T positions; else B = M rows, T = 1) with
 * nn.Embedding's padding_idx: word row pad_word and position row pad_pos get no gradient
 * (-1: none); dtype NULL: no token types. */
void embedding_backward_pad(float *dword, float *dtype, float *dpos, const float *dout,
                            const int64_t *ids, const int64_t *tt, const int64_t *pos_ids,
                            int B, int T, int C, int64_t pad_word, int64_t pad_pos);

/* Cross-entropy of logits[M,V] against labels[M] (-100 = ignored). Returns the loss sum
 * over labelled rows (double); *count = labelled rows. If dlogits is not NULL it is set to
 * (softmax - onehot) * grad_scale on labelled rows and 0 elsewhere (may equal logits).
 * row_loss[M] is scratch (and holds each row's loss afterwards). */
double crossentropy_forward_backward(float *dlogits, double *row_loss, int64_t *count,
                                     const float *logits, const int64_t *labels, int M, int V,
                                     float grad_scale);

/* The losses of BertForSequenceClassification beside cross-entropy, over n = rows x outputs
 * elements: each returns the sum of the element losses (double, added in order) and sets
 * dlogits[n] (NULL: not wanted; may equal logits) to d(element loss) x grad_scale.
 * bce: BCEWithLogitsLoss's max(x, 0) - x y + log(1 + exp(-|x|)), gradient sigmoid(x) - y;
 * elements whose mask is not 1 are left out of the sum, their gradient 0 (mask NULL: none
 * left out; ElectraForPreTraining's attended positions);
 * mse: (x - y)^2, gradient 2 (x - y). */
double bce_logits_forward_backward(float *dlogits, const float *logits, const float *y,
                                   const int64_t *mask, size_t n, float grad_scale);
double mse_forward_backward(float *dlogits, const float *x, const float *y, size_t n,
                            float grad_scale);
/* out[n] = tanh(inp); backward: dinp[n] += dout (1 - out^2) (from the output) */
void tanh_forward(float *out, const float *inp, size_t n);
void tanh_backward(float *dinp, const float *out, const float *dout, size_t n);

/* ---- T5's pieces ------------------------------------------------------------------------ */

/* T5LayerNorm: out[M,C] = w * x * rstd, rstd[M] = 1 / sqrt(mean(x^2) + eps) (no mean, no
 * bias). */
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int M, int C,
                     float eps);
void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                      const float *rstd, const float *w, int M, int C);

/* T5's bucket of relative position n = key - query: bidirectional (encoder) or causal
 * (decoder), NB buckets, logarithmic beyond NB/2 (or NB/4) up to max_distance. */
int t5_bucket(int n, int bidirectional, int NB, int max_distance);
/* bias[H,Tq,Tk] = table[bucket(j - i), h]; table: [NB, H]. */
void posbias_forward(float *bias, const float *table, int bidirectional, int NB, int maxd,
                     int Tq, int Tk, int H);
/* dtable[NB,H] += the sums of dbias[H,Tq,Tk] over each bucket's (i, j) */
void posbias_backward(float *dtable, const float *dbias, int bidirectional, int NB, int maxd,
                      int Tq, int Tk, int H);

/* Multi-head attention, general: q [B,Tq,H*D], k, v [B,Tk,H*D], ctx [B,Tq,H*D], att
 * [B,H,Tq,Tk] the probabilities (before dropout). scores = q k^T / div + bm, bm = bias[h,i,j]
 * (bias [H,Tq,Tk], NULL = 0), or -FLT_MAX where key j is masked (kmask[B,Tk] == 0) or, when
 * causal, j > i. T5: div = 1. drop: dropout on the probabilities (regenerated in backward).
 * scratch: slots x (Tq*Tk + Tk) floats (backward: slots x 2*Tq*Tk); (sample, head) pairs in
 * parallel (with dbias, heads in parallel and samples in order: dbias summed in a fixed
 * order). */
void mha_forward(float *ctx, float *att, const float *q, const float *k, const float *v,
                 const float *bias, const int64_t *kmask, int causal, float div,
                 const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk, int H,
                 int D);
/* mha_forward / mha_backward over half-precision ctx, att, q, k, v (hdt = ZT_HALF_*; < 0: the
 * fp32 kernels), as xattention_forward / _backward: scratch slots x attention_scratch(hdt, Tq,
 * Tk, D, backward) floats */
void xmha_forward(int hdt, void *ctx, void *att, const void *q, const void *k, const void *v,
                  const float *bias, const int64_t *kmask, int causal, float div,
                  const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk,
                  int H, int D);
void xmha_backward(int hdt, float *dq, float *dk, float *dv, float *dbias, const float *dctx,
                   const void *att, const void *q, const void *k, const void *v, float div,
                   const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk,
                   int H, int D);
/* The same over packed rows (T5's right-padded batches without their padding): sample b's
 * queries are rows cuq[b] ... cuq[b + 1] - 1 of q, ctx (dq, dctx), its keys rows cuk[b] ...
 * cuk[b + 1] - 1 of k, v (dk, dv) (cuk NULL: cuq's, self-attention); no key mask. Tq, Tk >=
 * every sample's rows are the padded lengths: bias, dbias [H, Tq, Tk] are indexed by position
 * within the sample, att and scratch laid out as padded (pair (b, h) uses the first lq*lk of
 * its Tq*Tk probabilities), the attention-dropout counters of pair (b, h) run from h*Tq*Tk.
 * causal masks key j > query i by position. A sample of no queries is skipped; every sample
 * with queries needs keys. */
void xmha_forward_packed(int hdt, void *ctx, void *att, const void *q, const void *k,
                         const void *v, const float *bias, int causal, const int32_t *cuq,
                         const int32_t *cuk, float div, const zt_dropout *drop, float *scratch,
                         int slots, int B, int Tq, int Tk, int H, int D);
void xmha_backward_packed(int hdt, float *dq, float *dk, float *dv, float *dbias,
                          const float *dctx, const void *att, const void *q, const void *k,
                          const void *v, const int32_t *cuq, const int32_t *cuk, float div,
                          const zt_dropout *drop, float *scratch, int slots, int B, int Tq,
                          int Tk, int H, int D);
/* Decoding: one query per row against n cached keys. ctx[r, h] = softmax(q[r, h] . K[c][j, h]
 * + madd) V[c] over keys j < n, where c = r / per is the cache row that row r reads (caches
 * [rows, positions, H*D], one cache row every `stride` floats) and madd, the additive scores
 * of cache row c and head h, starts at madd + c * madd_row + h * madd_head (-FLT_MAX masks a
 * key). T5 divides by nothing. scr: slots x cap floats (cap >= n); (row, head) pairs in
 * parallel. */
void mha_decode_forward(float *ctx, const float *q, const float *K, const float *V,
                        size_t stride, int per, const float *madd, size_t madd_row,
                        size_t madd_head, int n, int R, int H, int D, float *scr, int cap,
                        int slots);
/* dq, dk, dv are overwritten; dbias[H,Tq,Tk] += the scores' gradient summed over samples
 * (NULL: not wanted). */
void mha_backward(float *dq, float *dk, float *dv, float *dbias, const float *dctx,
                  const float *att, const float *q, const float *k, const float *v, float div,
                  const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk, int H,
                  int D);

/* activations of the feed-forward layers: ZT_ACT_RELU, ZT_ACT_GELU (erf), ZT_ACT_GELU_TANH
 * (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))), ZT_ACT_SILU (x sigmoid(x), torch's
 * SiLU). out may equal inp. */
enum { ZT_ACT_RELU = 0, ZT_ACT_GELU, ZT_ACT_GELU_TANH, ZT_ACT_SILU };
void act_forward(int act, float *out, const float *inp, size_t n);
/* dinp[n] += act'(inp) * dout */
void act_backward(int act, float *dinp, const float *inp, const float *dout, size_t n);
/* out[n] = a * b; backward: da += dout * b, db += dout * a (either may be NULL) */
void mul_forward(float *out, const float *a, const float *b, size_t n);
void mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                  size_t n);
/* out[M,C] = word[ids[m]]; backward: dword[ids[m]] += dout[m] (rows in order) */
void lookup_forward(float *out, const int64_t *ids, const float *word, int M, int C);
void lookup_backward(float *dword, const float *dout, const int64_t *ids, int M, int C);
/* x[n] *= s */
void scale_inplace(float *x, float s, size_t n);

#endif
