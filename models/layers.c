/* layers.c - the math of BERT's and T5's building blocks, forward and backward, in fp32.
 * Matrix products go to zt_sgemm (hgemm.h: oneDNN or OpenBLAS) with transposes and leading
 * dimensions instead of copies; everything else is OpenMP loops whose results do not depend
 * on the thread count (no cross-thread float reductions). Masks and dropout come from Philox (common/rng.h). */
#include "layers.h"
#include "../common/prof.h"
#include "../common/rng.h"
#include "vmath.h"
#include "../common/half.h"
#include "hgemm.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

/* ---- linear ------------------------------------------------------------------------- */

void linear_forward(float *out, const float *inp, const float *w, const float *b, int M, int K,
                    int N)
{
    /* out: [M,N], inp: [M,K], w: [N,K], b: [N] */
    double t0 = ZT_PROF_T0();
    if (b) {
#pragma omp parallel for schedule(static)
        for (int m = 0; m < M; m++)
            memcpy(out + (size_t)m * N, b, sizeof(float) * (size_t)N);
        ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 0, 4.0 * M * N);
        t0 = ZT_PROF_T0();
    }
    zt_sgemm(0, 1, M, N, K, 1.0f, inp, K, w, K, b ? 1.0f : 0.0f, out, N);
    ZT_PROF(ZT_PROF_GEMM, t0, 2.0 * M * N * K, 4.0 * ((double)M * K + (double)N * K +
                                                      (b ? 2.0 : 1.0) * M * N));
}

void linear_decode_forward(float *out, const float *inp, const float *w, int M, int K, int N)
{
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += 64)
        vm_gemm_nt_small(out, (size_t)N, inp, w, M, K, n0, n0 + 64 < N ? n0 + 64 : N);
    ZT_PROF(ZT_PROF_GEMM, t0, 2.0 * M * N * K, 4.0 * ((double)M * K + (double)N * K + (double)M * N));
}

/* db[N] += sum over rows of dout[M,N]; columns split across threads, rows summed in order. */
static void colsum_acc(float *db, const float *dout, int M, int N)
{
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += 64) {
        int n1 = n0 + 64 < N ? n0 + 64 : N;
        double acc[64] = {0};
        for (int m = 0; m < M; m++) {
            const float *row = dout + (size_t)m * N;
            for (int n = n0; n < n1; n++)
                acc[n - n0] += row[n];
        }
        for (int n = n0; n < n1; n++)
            db[n] += (float)acc[n - n0];
    }
}

void linear_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                     const float *w, int M, int K, int N)
{
    /* dinp: [M,K], dw: [N,K], db: [N], dout: [M,N], inp: [M,K], w: [N,K] */
    double t0 = ZT_PROF_T0();
    if (dinp)
        zt_sgemm(0, 0, M, K, N, 1.0f, dout, N, w, K, 1.0f, dinp, K);
    zt_sgemm(1, 0, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
    ZT_PROF(ZT_PROF_GEMM, t0, (dinp ? 4.0 : 2.0) * M * N * K,
            4.0 * ((dinp ? 1.0 : 0.0) * ((double)M * N + (double)N * K + 2.0 * M * K) +
                   (double)M * N + (double)M * K + 2.0 * N * K));
    if (db) {
        t0 = ZT_PROF_T0();
        colsum_acc(db, dout, M, N);
        ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)M * N, 4.0 * M * N);
    }
}

/* ---- layernorm ---------------------------------------------------------------------- */

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int M, int C, float eps)
{
    /* out, inp: [M,C]; mean, rstd: [M]; w, b: [C] */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * C;
        float *y = out + (size_t)m * C;
        float mu = (float)(vm_sum(x, NULL, (size_t)C) / C);
        double ss = vm_sqdev(x, mu, (size_t)C);
        float rs = (float)(1.0 / sqrt(ss / C + (double)eps));
        for (int c = 0; c < C; c++)
            y[c] = (x[c] - mu) * rs * w[c] + b[c];
        mean[m] = mu;
        rstd[m] = rs;
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 8.0 * M * C, 4.0 * (2.0 * M * C + 2.0 * M));
}

void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *mean, const float *rstd, const float *w, int M, int C)
{
    /* dinp, dout, inp: [M,C]; dw, db, w: [C]; mean, rstd: [M] */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * C, *dy = dout + (size_t)m * C;
        float *dx = dinp + (size_t)m * C;
        float mu = mean[m], rs = rstd[m];
        double sd, sdx;
        vm_ln_grad_sums(dy, w, x, mu, rs, (size_t)C, &sd, &sdx);
        float md = (float)(sd / C), mdx = (float)(sdx / C);
        for (int c = 0; c < C; c++) {
            float xh = (x[c] - mu) * rs, g = dy[c] * w[c];
            dx[c] += rs * (g - md - xh * mdx);
        }
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        double aw[64] = {0}, ab[64] = {0};
        for (int m = 0; m < M; m++) {
            const float *x = inp + (size_t)m * C, *dy = dout + (size_t)m * C;
            for (int c = c0; c < c1; c++) {
                aw[c - c0] += (double)dy[c] * ((x[c] - mean[m]) * rstd[m]);
                ab[c - c0] += dy[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dw[c] += (float)aw[c - c0];
            db[c] += (float)ab[c - c0];
        }
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 20.0 * M * C, 4.0 * (6.0 * M * C));
}

/* ---- GELU (exact, erf) -------------------------------------------------------------- */

/* chunks of 4096 (a multiple of 8): only the array's last group can be partial */
enum { GELU_CHUNK = 4096 };

void gelu_forward(float *out, const float *inp, size_t n)
{
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + GELU_CHUNK - 1) / GELU_CHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        size_t i = (size_t)c * GELU_CHUNK, k = n - i < GELU_CHUNK ? n - i : GELU_CHUNK;
        vm_gelu(out + i, inp + i, k);
    }
    ZT_PROF(ZT_PROF_GELU, t0, 20.0 * (double)n, 8.0 * (double)n);
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + GELU_CHUNK - 1) / GELU_CHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        size_t i = (size_t)c * GELU_CHUNK, k = n - i < GELU_CHUNK ? n - i : GELU_CHUNK;
        vm_gelu_grad_acc(dinp + i, inp + i, dout + i, k);
    }
    ZT_PROF(ZT_PROF_GELU, t0, 30.0 * (double)n, 16.0 * (double)n);
}

/* ---- dropout ------------------------------------------------------------------------ */

/* y = keep-mask(x) / (1 - p) (+ r when r is not NULL) for elements [first, first+n) of one
 * sample; y may equal x. bits != NULL also records the mask: bit i % 32 of bits[i / 32] is
 * set when element first + i is kept (first is a multiple of 32). */
static void dropout_row(float *y, const float *x, const float *r, const zt_dropout *d,
                        uint64_t sample, uint64_t first, size_t n, uint32_t *bits)
{
    uint32_t u[256];
    uint32_t thresh = (uint32_t)((double)d->p * 4294967296.0);
    float scale = 1.0f / (1.0f - d->p);
    for (size_t i = 0; i < n; i += 256) {
        size_t k = n - i < 256 ? n - i : 256;
        zt_rng_u32(d->seed, sample, d->stream, first + i, u, k);
        vm_dropout(y + i, x + i, r ? r + i : NULL, u, k, thresh, scale, bits ? bits + i / 32 : NULL);
    }
}

/* the recorded mask again: y = kept(x) / (1 - p), the same decisions as dropout_row without
 * the generator (y may equal x) */
static void apply_keep(float *y, const float *x, const uint32_t *bits, size_t n, float p)
{
    vm_apply_keep(y, x, bits, n, 1.0f / (1.0f - p));
}

/* Rows are cut into pieces of DROP_PIECE elements (a multiple of the 256 the generator is
 * asked for at a time and of 32 mask bits) so that small batches use every thread too. */
enum { DROP_PIECE = 16384 };

static size_t keep_words(size_t per_row)
{
    return (per_row + 31) / 32;
}

void dropout_apply(float *x, const zt_dropout *d, int B, size_t per_row)
{
    dropout_residual(x, NULL, NULL, d, B, per_row);
}

/* the rows cut into pieces spread over the threads: replay == NULL draws the mask (x =
 * dropout(x) + r, recorded into rec when given), else applies the recorded one. cu == NULL:
 * B rows of per_row elements; else row b is elements [cu[b] * per_row, cu[b + 1] * per_row)
 * (per_row: the elements of one token) and its mask words start at word cu[b] * per_row / 32
 * + b (past the previous row's last word: floor(a + b) >= floor(a) + floor(b)). */
static void dropout_pieces(float *x, const float *r, uint32_t *rec, const uint32_t *replay,
                           const zt_dropout *d, int B, const int32_t *cu, size_t per_row)
{
    size_t longest = per_row;
    if (cu) {
        longest = 0;
        for (int b = 0; b < B; b++)
            longest = (size_t)(cu[b + 1] - cu[b]) > longest ? (size_t)(cu[b + 1] - cu[b]) : longest;
        longest *= per_row;
    }
    long pieces = (long)((longest + DROP_PIECE - 1) / DROP_PIECE), np = pieces * B;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < np; t++) {
        size_t b = (size_t)(t / pieces), i = (size_t)(t % pieces) * DROP_PIECE;
        size_t row = cu ? (size_t)(cu[b + 1] - cu[b]) * per_row : per_row;
        size_t start = cu ? (size_t)cu[b] * per_row : b * per_row;
        if (i >= row)
            continue;
        size_t k = row - i < DROP_PIECE ? row - i : DROP_PIECE, o = start + i;
        size_t w = (cu ? start / 32 + b : b * keep_words(per_row)) + i / 32;
        if (replay)
            apply_keep(x + o, x + o, replay + w, k, d->p);
        else
            dropout_row(x + o, x + o, r ? r + o : NULL, d, d->first_sample + b, i, k,
                        rec ? rec + w : NULL);
    }
}

void dropout_residual(float *x, const float *r, uint32_t *keep, const zt_dropout *d, int B,
                      size_t per_row)
{
    if (!d || d->p <= 0.0f) {
        if (r)
            add_into(x, r, (size_t)B * per_row);
        return;
    }
    double t0 = ZT_PROF_T0();
    dropout_pieces(x, r, keep, NULL, d, B, NULL, per_row);
    ZT_PROF(ZT_PROF_DROPOUT, t0, 12.0 * B * (double)per_row,
            (r ? 12.0 : 8.0) * B * (double)per_row);
}

/* dropout_residual_rows over half-precision x and r (hdt): each piece in blocks of HBLOCK
 * elements widened, the same decisions and fp32 arithmetic as dropout_row, rounded back */
enum { HBLOCK = 1024 };

static void half_pieces(int hdt, uint16_t *x, const uint16_t *r, uint32_t *rec,
                        const zt_dropout *d, int B, const int32_t *cu, size_t per_row)
{
    int drop = d && d->p > 0.0f;
    size_t longest = 0;
    for (int b = 0; b < B; b++) {
        size_t row = cu ? (size_t)(cu[b + 1] - cu[b]) * per_row : per_row;
        longest = row > longest ? row : longest;
    }
    long pieces = (long)((longest + DROP_PIECE - 1) / DROP_PIECE), np = pieces * B;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < np; t++) {
        float xf[HBLOCK], rf[HBLOCK];
        size_t b = (size_t)(t / pieces), i = (size_t)(t % pieces) * DROP_PIECE;
        size_t row = cu ? (size_t)(cu[b + 1] - cu[b]) * per_row : per_row;
        size_t start = cu ? (size_t)cu[b] * per_row : b * per_row;
        if (i >= row)
            continue;
        size_t k = row - i < DROP_PIECE ? row - i : DROP_PIECE, o = start + i;
        size_t w = (cu ? start / 32 + b : b * keep_words(per_row)) + i / 32;
        for (size_t j = 0; j < k; j += HBLOCK) {
            size_t kk = k - j < HBLOCK ? k - j : HBLOCK;
            zt_half_widen(hdt, xf, x + o + j, kk);
            if (r)
                zt_half_widen(hdt, rf, r + o + j, kk);
            if (drop)
                dropout_row(xf, xf, r ? rf : NULL, d, d->first_sample + b, i + j, kk,
                            rec ? rec + w + j / 32 : NULL);
            else
                for (size_t e = 0; e < kk; e++)
                    xf[e] += rf[e];
            zt_half_narrow(hdt, x + o + j, xf, kk);
        }
    }
}

void xdropout_residual_rows(int hdt, void *x, const void *r, uint32_t *keep,
                            const zt_dropout *d, int B, const int32_t *cu, size_t C)
{
    if (hdt < 0) {
        dropout_residual_rows(x, r, keep, d, B, cu, C);
        return;
    }
    if ((!d || d->p <= 0.0f) && !r)
        return;
    double t0 = ZT_PROF_T0(), n = (double)cu[B] * C;
    half_pieces(hdt, x, r, keep, d, B, cu, C);
    ZT_PROF(ZT_PROF_DROPOUT, t0, 12.0 * n, (r ? 6.0 : 4.0) * n);
}

void xdropout_residual(int hdt, void *x, const void *r, uint32_t *keep, const zt_dropout *d,
                       int B, size_t per_row)
{
    if (hdt < 0) {
        dropout_residual(x, r, keep, d, B, per_row);
        return;
    }
    if ((!d || d->p <= 0.0f) && !r)
        return;
    double t0 = ZT_PROF_T0(), n = (double)B * per_row;
    half_pieces(hdt, x, r, keep, d, B, NULL, per_row);
    ZT_PROF(ZT_PROF_DROPOUT, t0, 12.0 * n, (r ? 6.0 : 4.0) * n);
}

void dropout_residual_rows(float *x, const float *r, uint32_t *keep, const zt_dropout *d, int B,
                           const int32_t *cu, size_t C)
{
    double n = (double)cu[B] * C;
    if (!d || d->p <= 0.0f) {
        if (r)
            add_into(x, r, (size_t)cu[B] * C);
        return;
    }
    double t0 = ZT_PROF_T0();
    dropout_pieces(x, r, keep, NULL, d, B, cu, C);
    ZT_PROF(ZT_PROF_DROPOUT, t0, 12.0 * n, (r ? 12.0 : 8.0) * n);
}

void dropout_backward(float *dx, const uint32_t *keep, const zt_dropout *d, int B,
                      size_t per_row)
{
    if (!d || d->p <= 0.0f)
        return;
    if (!keep) {
        dropout_apply(dx, d, B, per_row);
        return;
    }
    double t0 = ZT_PROF_T0();
    dropout_pieces(dx, NULL, NULL, keep, d, B, NULL, per_row);
    ZT_PROF(ZT_PROF_DROPOUT, t0, 2.0 * B * (double)per_row, 8.25 * B * (double)per_row);
}

void dropout_backward_rows(float *dx, const uint32_t *keep, const zt_dropout *d, int B,
                           const int32_t *cu, size_t C)
{
    if (!d || d->p <= 0.0f)
        return;
    double t0 = ZT_PROF_T0(), n = (double)cu[B] * C;
    dropout_pieces(dx, NULL, NULL, keep, d, B, cu, C); /* keep NULL: drawn again */
    ZT_PROF(ZT_PROF_DROPOUT, t0, 2.0 * n, 8.25 * n);
}

void add_into(float *x, const float *y, size_t n)
{
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)n, 12.0 * (double)n);
}

/* ---- attention ---------------------------------------------------------------------- */

/* Attention runs one (sample, head) pair per task, the pairs spread over the OpenMP threads;
 * inside a task everything is single-threaded (OpenBLAS runs one thread inside a parallel
 * region), so the result does not depend on the thread count. The profile splits the
 * region's wall time by the time the tasks spent in each kind. */
enum { PART_GEMM, PART_SOFTMAX, PART_DROP, PART_N };

static void attention_profile(double w0, const double *part, double gemm_flops,
                              double gemm_bytes, double soft_bytes, double drop_n)
{
    double sum = part[PART_GEMM] + part[PART_SOFTMAX] + part[PART_DROP], wall;
    if (!zt_prof_on || sum <= 0.0)
        return;
    wall = zt_prof_now() - w0;
    /* zt_prof_add measures from its t0 to now: hand it a t0 that gives the share */
    zt_prof_add(ZT_PROF_GEMM, zt_prof_now() - wall * part[PART_GEMM] / sum, gemm_flops,
                gemm_bytes);
    zt_prof_add(ZT_PROF_SOFTMAX, zt_prof_now() - wall * part[PART_SOFTMAX] / sum,
                5.0 * soft_bytes / 8.0, soft_bytes);
    if (drop_n > 0)
        zt_prof_add(ZT_PROF_DROPOUT, zt_prof_now() - wall * part[PART_DROP] / sum, 12.0 * drop_n,
                    12.0 * drop_n);
}

/* adds the time since *t to *acc and restarts *t (profile on only) */
static inline void lap(int prof, double *acc, double *t)
{
    if (prof) {
        double now = zt_prof_now();
        *acc += now - *t;
        *t = now;
    }
}

/* inside the parallel region: one thread's times into the region's totals */
static void merge_parts(int prof, double *part, const double *my)
{
    if (!prof)
        return;
#pragma omp critical
    for (int i = 0; i < PART_N; i++)
        part[i] += my[i];
}

static int scratch_threads(int slots)
{
    int n = omp_get_max_threads();
    return n < slots ? n : slots > 0 ? slots : 1;
}

/* the (sample, head) pair's dropout mask on x into y: from the forward's record when there
 * is one (keep: the pair's words), else regenerated from the counters (the same decisions) */
static void pair_mask(float *y, const float *x, const zt_dropout *drop, const uint32_t *keep,
                      int b, uint64_t first, size_t n)
{
    if (keep)
        apply_keep(y, x, keep, n, drop->p);
    else
        dropout_row(y, x, NULL, drop, drop->first_sample + (uint64_t)b, first, n, NULL);
}

/* Which rows a (sample, head) pair reads, beside the padded [B, Tq] x [B, Tk] layout (NULL):
 * cu: self-attention over packed rows, sample b's tokens cu[b] ... cu[b + 1] - 1 (no key
 * mask); q_one: one query per sample, row b of q and ctx, attending to the sample's keys
 * (packed by cu, or padded [B, Tk] with the key mask) -- the first token's row of
 * self-attention, with its dropout counters (the pair's from h Tk Tk). */
typedef struct att_rows {
    const int32_t *cu;
    int q_one;
    const zt_relpos *rel;  /* BERT's relative position scores, or NULL */
    const int32_t *cuk;    /* packed keys of their own (T5's cross-attention: sample b's
                            * keys are rows cuk[b] ... cuk[b + 1] - 1), or NULL: cu's */
} att_rows;

/* pair (b, h)'s rows: its first query and key rows and their counts */
typedef struct pair_rows {
    size_t q0, k0;
    int tq, tk;
} pair_rows;

static pair_rows rows_of(const att_rows *ar, int b, int Tq, int Tk)
{
    pair_rows r = {(size_t)b * Tq, (size_t)b * Tk, Tq, Tk};
    if (ar && ar->cu) {
        const int32_t *ck = ar->cuk ? ar->cuk : ar->cu;
        r.q0 = (size_t)ar->cu[b];
        r.tq = ar->cu[b + 1] - ar->cu[b];
        r.k0 = (size_t)ck[b];
        r.tk = ck[b + 1] - ck[b];
    }
    if (ar && ar->q_one) {
        r.q0 = (size_t)b;
        r.tq = 1;
    }
    return r;
}

/* the first dropout counter of pair (b, h) is h times this */
static size_t counter_stride(const att_rows *ar, int Tq, int Tk)
{
    return ar && ar->q_one ? (size_t)Tk * Tk : (size_t)Tq * Tk;
}

/* the additive term of row i's scores over Tk keys: -FLT_MAX on masked keys (and, causal,
 * keys after i), else the bias (its rows ldb apart; 0 without); NULL when there is none */
static const float *score_terms(float *bm, const float *bias, size_t ldb, const int64_t *km,
                                int causal, int i, int Tk)
{
    if (!bias && !km && !causal)
        return NULL;
    for (int j = 0; j < Tk; j++) {
        int masked = (km && km[j] == 0) || (causal && j > i);
        bm[j] = masked ? -FLT_MAX : bias ? bias[(size_t)i * ldb + j] : 0.0f;
    }
    return bm;
}

/* the mean query rows, key rows and probabilities per pair (the profile's counts) */
static void pair_means(const att_rows *ar, int B, int Tq, int Tk, double *q, double *k,
                       double *tt)
{
    *q = *k = *tt = 0.0;
    for (int b = 0; b < B; b++) {
        pair_rows r = rows_of(ar, b, Tq, Tk);
        *q += r.tq;
        *k += r.tk;
        *tt += (double)r.tq * r.tk;
    }
    *q /= B;
    *k /= B;
    *tt /= B;
}

/* a pair's rows of x ([rows, C], head h's D columns from row r0) as fp32: the rows themselves
 * (fp32: *ld = C) or widened into buf (half precision: *ld = D) */
static const float *pair_in(const void *x, int hdt, size_t r0, int n, int C, int h, int D,
                            float *buf, int *ld)
{
    if (hdt < 0) {
        *ld = C;
        return (const float *)x + r0 * C + (size_t)h * D;
    }
    const uint16_t *src = (const uint16_t *)x + r0 * C + (size_t)h * D;
    for (int i = 0; i < n; i++)
        zt_half_widen(hdt, buf + (size_t)i * D, src + (size_t)i * C, (size_t)D);
    *ld = D;
    return buf;
}

size_t attention_scratch(int hdt, int Tq, int Tk, int D, int backward)
{
    size_t tt = (size_t)Tq * Tk;
    if (hdt < 0)
        return backward ? 2 * tt : tt + (size_t)Tk;
    return backward ? 3 * tt + (size_t)(Tq + 2 * Tk) * D
                    : 2 * tt + (size_t)Tk + 2 * (size_t)(Tq + Tk) * D;
}

/* ---- relative position scores (modeling_bert.py, relative_key / relative_key_query) ----
 * Query i (at position i, or 0 for q_one) and key j are d = i - j apart, d in [-(Tk - 1),
 * Tqp - 1]: column m = d + Tk - 1 of the nd = Tqp + Tk - 1 distances, E's row m + P - Tk. */
typedef struct rel_ctx {
    const float *E;      /* the nd rows of E in fp32 */
    int nd, Tqp, Tk, kq;
    size_t e0;           /* E's first row used */
    /* the caller's work (attention_rel_scratch): per thread, rows times E [max(Tq, Tk), nd];
     * backward: per pair its distances' gradient (queries' [Tqp, nd], keys' [Tk, nd]), E's
     * gradient [nd, D] and (half precision) one pair's rows widened [max(Tq, Tk), D] */
    float *xe, *dxe, *dE, *wide;
    size_t xe_per, pair_per;
} rel_ctx;

static size_t rel_layout(rel_ctx *rc, int hdt, int q_one, int B, int H, int Tq, int Tk, int D,
                         int slots, int backward, float *work)
{
    size_t o = 0, mx = (size_t)(Tq > Tk ? Tq : Tk);
    rc->Tqp = q_one ? 1 : Tq;
    rc->Tk = Tk;
    rc->nd = rc->Tqp + Tk - 1;
    size_t nd = (size_t)rc->nd;
    float *E = work;
    o += hdt >= 0 ? nd * D : 0;
    rc->xe = work ? work + o : NULL;
    rc->xe_per = mx * nd;
    o += rc->xe_per * (size_t)scratch_threads(slots);
    if (backward) {
        rc->pair_per = (size_t)(rc->Tqp + Tk) * nd;
        rc->dxe = work ? work + o : NULL;
        o += rc->pair_per * (size_t)B * H;
        rc->dE = work ? work + o : NULL;
        o += nd * D;
        rc->wide = work ? work + o : NULL;
        o += hdt >= 0 ? mx * D : 0;
    }
    rc->E = E;
    return o;
}

size_t attention_rel_scratch(int hdt, int first, int B, int H, int Tq, int Tk, int D, int slots,
                         int backward)
{
    rel_ctx rc;
    return rel_layout(&rc, hdt, first, B, H, Tq, Tk, D, slots, backward, NULL);
}

static void rel_begin(rel_ctx *rc, const zt_relpos *rel, int hdt, int q_one, int B, int H,
                      int Tq, int Tk, int D, int slots, int backward)
{
    memset(rc, 0, sizeof *rc);
    if (!rel)
        return;
    rel_layout(rc, hdt, q_one, B, H, Tq, Tk, D, slots, backward, rel->work);
    rc->kq = rel->key_query;
    rc->e0 = (size_t)(rel->P - Tk);
    size_t n = (size_t)rc->nd * D;
    if (hdt < 0)
        rc->E = (const float *)rel->E + rc->e0 * D;
    else
        zt_half_widen(hdt, (float *)rc->E, (const uint16_t *)rel->E + rc->e0 * D, n);
}

/* a[i, j] += x_i . E[m(i, j)] (x: the queries, rows i) or, key side, x_j . E[m(i, j)] */
static void rel_scores(float *a, const float *x, int lx, int key_side, int tq, int tk,
                       const rel_ctx *rc, int D, float *xe)
{
    int nx = key_side ? tk : tq, nd = rc->nd;
    zt_sgemm(0, 1, nx, nd, D, 1.0f, x, lx, rc->E, D, 0.0f, xe, nd);
    for (int i = 0; i < tq; i++)
        for (int j = 0; j < tk; j++) {
            int m = i - j + rc->Tk - 1;
            a[(size_t)i * tk + j] += key_side ? xe[(size_t)j * nd + m] : xe[(size_t)i * nd + m];
        }
}

/* the scores' gradient ds [tq, tk] as the distances' of x's rows (dxe [nx, nd], zero
 * elsewhere), then dx += dxe E */
static void rel_grad(float *dxe, const float *ds, int key_side, int tq, int tk, const rel_ctx *rc,
                     float *dx, int ldx, int D)
{
    int nx = key_side ? tk : tq, nd = rc->nd;
    memset(dxe, 0, sizeof(float) * (size_t)nx * nd);
    for (int i = 0; i < tq; i++)
        for (int j = 0; j < tk; j++) {
            int m = i - j + rc->Tk - 1;
            dxe[key_side ? (size_t)j * nd + m : (size_t)i * nd + m] = ds[(size_t)i * tk + j];
        }
    zt_sgemm(0, 0, nx, D, nd, 1.0f, dxe, nd, rc->E, D, 1.0f, dx, ldx);
}

/* mha_forward, also recording the dropout keep-mask (keep: B*H pairs of ceil(Tq*Tk/32)
 * words; NULL: not recorded); ar: the rows (see att_rows; NULL: padded). bias and causal
 * apply by position within the sample (packed: pair (b, h) reads the top-left tq x tk of its
 * head's [Tq, Tk] bias), kmask to padded keys only. hdt >= 0: ctx, att, q, k, v hold
 * half-precision values (common/half.h); each pair widens its rows, computes as in fp32,
 * rounds its probabilities into att and multiplies v by the rounded ones (what the backward
 * reads), and rounds its context rows into ctx. */
static void mha_forward_keep(void *ctx, void *att, uint32_t *keep, const void *q,
                             const void *k, const void *v, const float *bias,
                             const int64_t *kmask, int causal, const att_rows *ar, float div,
                             const zt_dropout *drop, float *scratch, int slots, int B, int Tq,
                             int Tk, int H, int D, int hdt)
{
    /* ctx, q: [B,Tq,H*D]; k, v: [B,Tk,H*D]; att: [B,H,Tq,Tk]; bias: [H,Tq,Tk]; kmask: [B,Tk];
     * scratch: slots x attention_scratch(hdt, Tq, Tk, D, 0). Packed (cu): pair (b, h) uses the
     * first L*L of its Tq*Tk probabilities (L = its row's tokens), its dropout counters from
     * h*Tq*Tk as padded. */
    int C = H * D, prof = zt_prof_on, use_drop = drop && drop->p > 0.0f, hx = hdt >= 0;
    size_t tt = (size_t)Tq * Tk, wpp = (tt + 31) / 32, ctr = counter_stride(ar, Tq, Tk);
    size_t per = attention_scratch(hdt, Tq, Tk, D, 0);
    const int32_t *cu = ar ? ar->cu : NULL;
    double part[PART_N] = {0}, w0 = ZT_PROF_T0();
    rel_ctx rc;
    rel_begin(&rc, ar ? ar->rel : NULL, hdt, ar && ar->q_one, B, H, Tq, Tk, D, slots, 0);
#pragma omp parallel num_threads(scratch_threads(slots))
    {
        float *pd = scratch + (size_t)omp_get_thread_num() * per, *bm = pd + tt;
        float *xe = rc.nd ? rc.xe + (size_t)omp_get_thread_num() * rc.xe_per : NULL;
        float *sa = NULL, *qf = NULL, *kf = NULL, *vf = NULL, *cf = NULL;
        if (hx) { /* the pair's widened rows and its fp32 probabilities and context */
            sa = bm + Tk;
            qf = sa + tt;
            kf = qf + (size_t)Tq * D;
            vf = kf + (size_t)Tk * D;
            cf = vf + (size_t)Tk * D;
        }
        double my[PART_N] = {0}, t = 0.0;
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H, lq, lk, lv;
            pair_rows r = rows_of(ar, b, Tq, Tk);
            int tq = r.tq, tk = r.tk;
            const int64_t *km = kmask && !cu ? kmask + (size_t)b * Tk : NULL;
            const float *bh_bias = bias ? bias + (size_t)h * tt : NULL, *terms = NULL;
            int causal_b = causal;
            if (tq == 0 || tk == 0)
                continue;
            if (prof)
                t = zt_prof_now();
            const float *qb = pair_in(q, hdt, r.q0, tq, C, h, D, qf, &lq);
            const float *kb = pair_in(k, hdt, r.k0, tk, C, h, D, kf, &lk);
            const float *vb = pair_in(v, hdt, r.k0, tk, C, h, D, vf, &lv);
            float *a = hx ? sa : (float *)att + (size_t)bh * tt;
            zt_sgemm(0, 1, tq, tk, D, 1.0f, qb, lq, kb, lk, 0.0f, a, tk);
            if (rc.nd) { /* + q . E (+ k . E), before the division, as BertSelfAttention */
                rel_scores(a, qb, lq, 0, tq, tk, &rc, D, xe);
                if (rc.kq)
                    rel_scores(a, kb, lk, 1, tq, tk, &rc, D, xe);
            }
            lap(prof, &my[PART_GEMM], &t);
            if (!bh_bias && !causal_b) /* the same term for every row */
                terms = score_terms(bm, NULL, 0, km, 0, 0, tk);
            for (int i = 0; i < tq; i++)
                vm_softmax_row(a + (size_t)i * tk,
                               bh_bias || causal_b
                                   ? score_terms(bm, bh_bias, (size_t)Tk, km, causal_b, i, tk)
                                   : terms,
                               div, (size_t)tk);
            if (hx) { /* the probabilities kept: rounded, and used as rounded */
                uint16_t *ah = (uint16_t *)att + (size_t)bh * tt;
                zt_half_narrow(hdt, ah, a, (size_t)tq * tk);
                zt_half_widen(hdt, a, ah, (size_t)tq * tk);
            }
            lap(prof, &my[PART_SOFTMAX], &t);
            const float *p = a;
            if (use_drop) { /* the mask words of a pair start at its element 0 */
                dropout_row(pd, a, NULL, drop, drop->first_sample + (uint64_t)b,
                            (uint64_t)h * ctr, (size_t)tq * tk,
                            keep ? keep + (size_t)bh * wpp : NULL);
                p = pd;
                lap(prof, &my[PART_DROP], &t);
            }
            if (!hx) {
                zt_sgemm(0, 0, tq, D, tk, 1.0f, p, tk, vb, lv, 0.0f,
                         (float *)ctx + r.q0 * C + (size_t)h * D, C);
            } else {
                zt_sgemm(0, 0, tq, D, tk, 1.0f, p, tk, vb, lv, 0.0f, cf, D);
                uint16_t *ch = (uint16_t *)ctx + r.q0 * C + (size_t)h * D;
                for (int i = 0; i < tq; i++)
                    zt_half_narrow(hdt, ch + (size_t)i * C, cf + (size_t)i * D, (size_t)D);
            }
            lap(prof, &my[PART_GEMM], &t);
        }
        merge_parts(prof, part, my);
    }
    double pairs = (double)B * H, pq, pk, ptt;
    pair_means(ar, B, Tq, Tk, &pq, &pk, &ptt);
    attention_profile(w0, part, pairs * 4.0 * ptt * D,
                      pairs * (hx ? 2.0 : 4.0) * (2.0 * pq * D + 2.0 * pk * D + 2.0 * ptt),
                      pairs * 8.0 * ptt, use_drop ? pairs * ptt : 0.0);
}

void mha_forward(float *ctx, float *att, const float *q, const float *k, const float *v,
                 const float *bias, const int64_t *kmask, int causal, float div,
                 const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk, int H,
                 int D)
{
    mha_forward_keep(ctx, att, NULL, q, k, v, bias, kmask, causal, NULL, div, drop, scratch,
                     slots, B, Tq, Tk, H, D, -1);
}

void xmha_forward(int hdt, void *ctx, void *att, const void *q, const void *k, const void *v,
                  const float *bias, const int64_t *kmask, int causal, float div,
                  const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk,
                  int H, int D)
{
    mha_forward_keep(ctx, att, NULL, q, k, v, bias, kmask, causal, NULL, div, drop, scratch,
                     slots, B, Tq, Tk, H, D, hdt);
}

void xmha_forward_packed(int hdt, void *ctx, void *att, const void *q, const void *k,
                         const void *v, const float *bias, int causal, const int32_t *cuq,
                         const int32_t *cuk, float div, const zt_dropout *drop, float *scratch,
                         int slots, int B, int Tq, int Tk, int H, int D)
{
    att_rows ar = {cuq, 0, NULL, cuk};
    mha_forward_keep(ctx, att, NULL, q, k, v, bias, NULL, causal, &ar, div, drop, scratch,
                     slots, B, Tq, Tk, H, D, hdt);
}

/* (layers.h) ctx[r, h] = softmax(q[r, h] . K[c][j, h] + madd)
 * V[c], c = r / per the cache row that row r reads (caches are [rows, positions, I], one
 * cache row every `stride` floats); madd: the additive scores of cache row c and head h at
 * madd + c * madd_row + h * madd_head ((sample, head) pairs in parallel, as mha_forward) */
void mha_decode_forward(float *ctx, const float *q, const float *K, const float *V,
                       size_t stride, int per, const float *madd, size_t madd_row,
                       size_t madd_head, int n, int R, int H, int D, float *scr, int cap,
                       int slots)
{
    int HD = H * D;
#pragma omp parallel for schedule(static) num_threads(slots)
    for (int p = 0; p < R * H; p++) {
        int r = p / H, h = p % H, c = r / per;
        float *s = scr + (size_t)omp_get_thread_num() * (size_t)cap;
        const float *Kc = K + (size_t)c * stride + (size_t)h * D;
        const float *Vc = V + (size_t)c * stride + (size_t)h * D;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, D, 1.0f, Kc, HD, q + (size_t)r * HD + h * D,
                    1, 0.0f, s, 1);
        vm_softmax_row(s, madd + c * madd_row + h * madd_head, 1.0f, (size_t)n);
        cblas_sgemv(CblasRowMajor, CblasTrans, n, D, 1.0f, Vc, HD, s, 1, 0.0f,
                    ctx + (size_t)r * HD + h * D, 1);
    }
}

/* one (sample, head) pair of the backward; dbias: the head's [Tq,Tk] (rows ldb apart) or
 * NULL; keep: the
 * pair's recorded mask or NULL; hdt >= 0: att (a: the pair's), q, k, v half precision,
 * widened into wb (3 Tq*Tk... see attention_scratch) first */
static void mha_pair_backward(float *dq, float *dk, float *dv, float *dbias, size_t ldb,
                              const float *dctx,
                              const void *a0, const uint32_t *keep, const void *q,
                              const void *k, const void *v, float div, const zt_dropout *drop,
                              float *dp, float *pd, float *wb, int hdt, int b, int h,
                              pair_rows r, size_t ctr, int C, int D, double *my,
                              const rel_ctx *rc, size_t bh)
{
    int Tq = r.tq, Tk = r.tk, lq, lk, lv;
    size_t tt = (size_t)Tq * Tk, oq = r.q0 * C + (size_t)h * D, ok = r.k0 * C + (size_t)h * D;
    int prof = zt_prof_on, use_drop = drop && drop->p > 0.0f;
    double t = prof ? zt_prof_now() : 0.0;
    if (tt == 0)
        return;
    const float *a = a0;
    float *qf = NULL, *kf = NULL, *vf = NULL;
    if (hdt >= 0) { /* wb: the probabilities, then q, k, v rows */
        zt_half_widen(hdt, wb, a0, tt);
        a = wb;
        qf = wb + tt;
        kf = qf + (size_t)Tq * D;
        vf = kf + (size_t)Tk * D;
    }
    const float *qb = pair_in(q, hdt, r.q0, Tq, C, h, D, qf, &lq);
    const float *kb = pair_in(k, hdt, r.k0, Tk, C, h, D, kf, &lk);
    const float *vb = pair_in(v, hdt, r.k0, Tk, C, h, D, vf, &lv);
    const float *p = a;
    if (use_drop) {
        pair_mask(pd, a, drop, keep, b, (uint64_t)h * ctr, tt);
        p = pd;
        lap(prof, &my[PART_DROP], &t);
    }
    /* dv = p^T dctx; dp = dctx v^T */
    zt_sgemm(1, 0, Tk, D, Tq, 1.0f, p, Tk, dctx + oq, C, 0.0f, dv + ok, C);
    zt_sgemm(0, 1, Tq, Tk, D, 1.0f, dctx + oq, C, vb, lv, 0.0f, dp, Tk);
    lap(prof, &my[PART_GEMM], &t);
    if (use_drop) { /* the gradient through the same keep-mask and scale */
        pair_mask(dp, dp, drop, keep, b, (uint64_t)h * ctr, tt);
        lap(prof, &my[PART_DROP], &t);
    }
    /* the softmax's backward, then the division of the scores */
    for (int i = 0; i < Tq; i++)
        vm_softmax_grad_row(dp + (size_t)i * Tk, a + (size_t)i * Tk, div, (size_t)Tk);
    if (dbias) /* the additive term's gradient is the scores' before the division */
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++)
                dbias[(size_t)i * ldb + j] += dp[(size_t)i * Tk + j] * div;
    lap(prof, &my[PART_SOFTMAX], &t);
    /* dq = ds k; dk = ds^T q */
    zt_sgemm(0, 0, Tq, D, Tk, 1.0f, dp, Tk, kb, lk, 0.0f, dq + oq, C);
    zt_sgemm(1, 0, Tk, D, Tq, 1.0f, dp, Tk, qb, lq, 0.0f, dk + ok, C);
    if (rc && rc->nd) { /* the relative scores: dq (dk) += their distances' gradient E; the
                         * distances' gradient kept for E's (rel_reduce) */
        float *dqe = rc->dxe + bh * rc->pair_per, *dke = dqe + (size_t)rc->Tqp * rc->nd;
        rel_grad(dqe, dp, 0, Tq, Tk, rc, dq + oq, C, D);
        if (rc->kq)
            rel_grad(dke, dp, 1, Tq, Tk, rc, dk + ok, C, D);
    }
    lap(prof, &my[PART_GEMM], &t);
}

/* E's gradient: the pairs' distance gradients times their query (key) rows, summed pair by
 * pair in order (the same bits at any thread count), added into rel->dE */
static void rel_reduce(const rel_ctx *rc, const zt_relpos *rel, const att_rows *ar,
                       const void *q, const void *k, int hdt, int B, int H, int Tq, int Tk,
                       int D)
{
    int C = H * D, nd = rc->nd, lx;
    memset(rc->dE, 0, sizeof(float) * (size_t)nd * D);
    for (int bh = 0; bh < B * H; bh++) {
        pair_rows r = rows_of(ar, bh / H, Tq, Tk);
        const float *dqe = rc->dxe + (size_t)bh * rc->pair_per;
        if (r.tq == 0 || r.tk == 0)
            continue;
        const float *x = pair_in(q, hdt, r.q0, r.tq, C, bh % H, D, rc->wide, &lx);
        zt_sgemm(1, 0, nd, D, r.tq, 1.0f, dqe, nd, x, lx, 1.0f, rc->dE, D);
        if (!rc->kq)
            continue;
        x = pair_in(k, hdt, r.k0, r.tk, C, bh % H, D, rc->wide, &lx);
        zt_sgemm(1, 0, nd, D, r.tk, 1.0f, dqe + (size_t)rc->Tqp * nd, nd, x, lx, 1.0f, rc->dE, D);
    }
    float *dst = rel->dE + rc->e0 * D;
    for (size_t i = 0; i < (size_t)nd * D; i++)
        dst[i] += rc->dE[i];
}

static void mha_backward_keep(float *dq, float *dk, float *dv, float *dbias, const float *dctx,
                              const void *att, const uint32_t *keep, const void *q,
                              const void *k, const void *v, const att_rows *ar, float div,
                              const zt_dropout *drop, float *scratch, int slots, int B, int Tq,
                              int Tk, int H, int D, int hdt)
{
    /* dq, dctx, q: [B,Tq,H*D]; dk, dv, k, v: [B,Tk,H*D]; att: [B,H,Tq,Tk]; dbias: [H,Tq,Tk];
     * scratch: slots x attention_scratch(hdt, Tq, Tk, D, 1) */
    int C = H * D, prof = zt_prof_on;
    size_t tt = (size_t)Tq * Tk, wpp = (tt + 31) / 32, ctr = counter_stride(ar, Tq, Tk);
    size_t per = attention_scratch(hdt, Tq, Tk, D, 1), es = hdt >= 0 ? 2 : 4;
    const char *at = att;
    double part[PART_N] = {0}, w0 = ZT_PROF_T0();
    rel_ctx rc;
    rel_begin(&rc, ar ? ar->rel : NULL, hdt, ar && ar->q_one, B, H, Tq, Tk, D, slots, 1);
#pragma omp parallel num_threads(scratch_threads(slots))
    {
        float *dp = scratch + (size_t)omp_get_thread_num() * per, *pd = dp + tt;
        float *wb = hdt >= 0 ? pd + tt : NULL;
        double my[PART_N] = {0};
        if (dbias) { /* heads in parallel, each head's samples in order: a fixed sum */
#pragma omp for schedule(static)
            for (int h = 0; h < H; h++)
                for (int b = 0; b < B; b++) {
                    size_t bh = (size_t)b * H + h;
                    mha_pair_backward(dq, dk, dv, dbias + (size_t)h * tt, (size_t)Tk, dctx,
                                      at + bh * tt * es, keep ? keep + bh * wpp : NULL, q, k, v,
                                      div, drop, dp, pd, wb, hdt, b, h, rows_of(ar, b, Tq, Tk),
                                      ctr, C, D, my, NULL, bh);
                }
        } else {
#pragma omp for schedule(static)
            for (int bh = 0; bh < B * H; bh++)
                mha_pair_backward(dq, dk, dv, NULL, 0, dctx, at + (size_t)bh * tt * es,
                                  keep ? keep + (size_t)bh * wpp : NULL, q, k, v, div, drop, dp,
                                  pd, wb, hdt, bh / H, bh % H, rows_of(ar, bh / H, Tq, Tk), ctr,
                                  C, D, my, &rc, (size_t)bh);
        }
        merge_parts(prof, part, my);
    }
    if (rc.nd)
        rel_reduce(&rc, ar->rel, ar, q, k, hdt, B, H, Tq, Tk, D);
    double pairs = (double)B * H, pq, pk, ptt;
    int use_drop = drop && drop->p > 0.0f;
    pair_means(ar, B, Tq, Tk, &pq, &pk, &ptt);
    attention_profile(w0, part, pairs * 8.0 * ptt * D,
                      pairs * 4.0 * (4.0 * pq * D + 4.0 * pk * D + 4.0 * ptt),
                      pairs * 12.0 * ptt, use_drop ? 2.0 * pairs * ptt : 0.0);
}

void mha_backward(float *dq, float *dk, float *dv, float *dbias, const float *dctx,
                  const float *att, const float *q, const float *k, const float *v, float div,
                  const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk, int H,
                  int D)
{
    mha_backward_keep(dq, dk, dv, dbias, dctx, att, NULL, q, k, v, NULL, div, drop, scratch,
                      slots, B, Tq, Tk, H, D, -1);
}

void xmha_backward(int hdt, float *dq, float *dk, float *dv, float *dbias, const float *dctx,
                   const void *att, const void *q, const void *k, const void *v, float div,
                   const zt_dropout *drop, float *scratch, int slots, int B, int Tq, int Tk,
                   int H, int D)
{
    mha_backward_keep(dq, dk, dv, dbias, dctx, att, NULL, q, k, v, NULL, div, drop, scratch,
                      slots, B, Tq, Tk, H, D, hdt);
}

void xmha_backward_packed(int hdt, float *dq, float *dk, float *dv, float *dbias,
                          const float *dctx, const void *att, const void *q, const void *k,
                          const void *v, const int32_t *cuq, const int32_t *cuk, float div,
                          const zt_dropout *drop, float *scratch, int slots, int B, int Tq,
                          int Tk, int H, int D)
{
    att_rows ar = {cuq, 0, NULL, cuk};
    mha_backward_keep(dq, dk, dv, dbias, dctx, att, NULL, q, k, v, &ar, div, drop, scratch,
                      slots, B, Tq, Tk, H, D, hdt);
}

/* BERT's self-attention: the general kernel with scores / sqrt(hs), the key mask or packed
 * rows, no bias, and the dropout mask recorded in keep (or regenerated when keep is NULL) */
void xattention_forward_rel(int hdt, void *ctx, void *att, uint32_t *keep, const void *q,
                            const void *k, const void *v, const int64_t *mask, const int32_t *cu,
                            int first, const zt_relpos *rel, const zt_dropout *drop,
                            float *scratch, int slots, int B, int T, int C, int H)
{
    int hs = C / H;
    att_rows ar = {cu, first, rel, NULL};
    mha_forward_keep(ctx, att, keep, q, k, v, NULL, cu ? NULL : mask, 0,
                     cu || first || rel ? &ar : NULL, (float)sqrt((double)hs), drop, scratch,
                     slots, B, first ? 1 : T, T, H, hs, hdt);
}

void xattention_backward_rel(int hdt, float *dq, float *dk, float *dv, const float *dctx,
                             const void *att, const uint32_t *keep, const void *q, const void *k,
                             const void *v, const int32_t *cu, int first, const zt_relpos *rel,
                             const zt_dropout *drop, float *scratch, int slots, int B, int T,
                             int C, int H)
{
    int hs = C / H;
    att_rows ar = {cu, first, rel, NULL};
    mha_backward_keep(dq, dk, dv, NULL, dctx, att, keep, q, k, v, cu || first || rel ? &ar : NULL,
                      (float)sqrt((double)hs), drop, scratch, slots, B, first ? 1 : T, T, H, hs,
                      hdt);
}

void xattention_forward(int hdt, void *ctx, void *att, uint32_t *keep, const void *q,
                        const void *k, const void *v, const int64_t *mask, const int32_t *cu,
                        int first, const zt_dropout *drop, float *scratch, int slots, int B,
                        int T, int C, int H)
{
    xattention_forward_rel(hdt, ctx, att, keep, q, k, v, mask, cu, first, NULL, drop, scratch,
                           slots, B, T, C, H);
}

void xattention_backward(int hdt, float *dq, float *dk, float *dv, const float *dctx,
                         const void *att, const uint32_t *keep, const void *q, const void *k,
                         const void *v, const int32_t *cu, int first, const zt_dropout *drop,
                         float *scratch, int slots, int B, int T, int C, int H)
{
    xattention_backward_rel(hdt, dq, dk, dv, dctx, att, keep, q, k, v, cu, first, NULL, drop,
                            scratch, slots, B, T, C, H);
}

void attention_forward(float *ctx, float *att, uint32_t *keep, const float *q, const float *k,
                       const float *v, const int64_t *mask, const zt_dropout *drop,
                       float *scratch, int slots, int B, int T, int C, int H)
{
    xattention_forward(-1, ctx, att, keep, q, k, v, mask, NULL, 0, drop, scratch, slots, B, T, C,
                       H);
}

void attention_forward_varlen(float *ctx, float *att, uint32_t *keep, const float *q,
                              const float *k, const float *v, const int32_t *cu,
                              const zt_dropout *drop, float *scratch, int slots, int B, int T,
                              int C, int H)
{
    xattention_forward(-1, ctx, att, keep, q, k, v, NULL, cu, 0, drop, scratch, slots, B, T, C,
                       H);
}

void attention_forward_first(float *ctx, float *att, uint32_t *keep, const float *q,
                             const float *k, const float *v, const int64_t *mask,
                             const int32_t *cu, const zt_dropout *drop, float *scratch,
                             int slots, int B, int T, int C, int H)
{
    xattention_forward(-1, ctx, att, keep, q, k, v, mask, cu, 1, drop, scratch, slots, B, T, C,
                       H);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *att,
                        const uint32_t *keep, const float *q, const float *k, const float *v,
                        const zt_dropout *drop, float *scratch, int slots, int B, int T, int C,
                        int H)
{
    xattention_backward(-1, dq, dk, dv, dctx, att, keep, q, k, v, NULL, 0, drop, scratch, slots,
                        B, T, C, H);
}

void attention_backward_varlen(float *dq, float *dk, float *dv, const float *dctx,
                               const float *att, const uint32_t *keep, const float *q,
                               const float *k, const float *v, const int32_t *cu,
                               const zt_dropout *drop, float *scratch, int slots, int B, int T,
                               int C, int H)
{
    xattention_backward(-1, dq, dk, dv, dctx, att, keep, q, k, v, cu, 0, drop, scratch, slots,
                        B, T, C, H);
}

void attention_backward_first(float *dq, float *dk, float *dv, const float *dctx,
                              const float *att, const uint32_t *keep, const float *q,
                              const float *k, const float *v, const int32_t *cu,
                              const zt_dropout *drop, float *scratch, int slots, int B, int T,
                              int C, int H)
{
    xattention_backward(-1, dq, dk, dv, dctx, att, keep, q, k, v, cu, 1, drop, scratch, slots,
                        B, T, C, H);
}

/* ---- embeddings --------------------------------------------------------------------- */

/* row bt's position: pos_ids[bt], or bt % T */
static size_t position(const int64_t *pos_ids, int bt, int T)
{
    return pos_ids ? (size_t)pos_ids[bt] : (size_t)(bt % T);
}

static void embed_fwd(float *out, const int64_t *ids, const int64_t *tt, const int64_t *pos_ids,
                      const float *word, const float *type, const float *pos, int B, int T,
                      int C)
{
    /* out: [B,T,C]; ids, tt: [B,T]; word: [V,C]; type: [TT,C]; pos: [P,C] */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *w = word + (size_t)ids[bt] * C;
        const float *p = pos ? pos + position(pos_ids, bt, T) * C : NULL;
        float *o = out + (size_t)bt * C;
        if (!type) { /* no token types (DistilBERT) */
            for (int c = 0; c < C; c++)
                o[c] = w[c] + p[c];
            continue;
        }
        const float *ty = type + (size_t)(tt ? tt[bt] : 0) * C;
        if (!p) { /* no absolute positions (relative position scores) */
            for (int c = 0; c < C; c++)
                o[c] = w[c] + ty[c];
            continue;
        }
        for (int c = 0; c < C; c++)
            o[c] = (w[c] + ty[c]) + p[c];
    }
    ZT_PROF(ZT_PROF_EMBEDDING, t0, 2.0 * B * T * C, 16.0 * B * T * C);
}

void embedding_forward(float *out, const int64_t *ids, const int64_t *tt, const float *word,
                       const float *type, const float *pos, int B, int T, int C)
{
    embed_fwd(out, ids, tt, NULL, word, type, pos, B, T, C);
}

void embedding_forward_pos(float *out, const int64_t *ids, const int64_t *tt,
                           const int64_t *pos_ids, const float *word, const float *type,
                           const float *pos, int M, int C)
{
    embed_fwd(out, ids, tt, pos_ids, word, type, pos, M, 1, C);
}

static void embed_bwd(float *dword, float *dtype, float *dpos, const float *dout,
                      const int64_t *ids, const int64_t *tt, const int64_t *pos_ids, int B,
                      int T, int C, int64_t pad_word, int64_t pad_pos)
{
    /* Rows may repeat (same token twice), so channels are split across threads and each
     * thread walks all rows in order: deterministic and race-free. */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        int c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *g = dout + (size_t)bt * C;
            size_t p = position(pos_ids, bt, T);
            if (ids[bt] != pad_word) {
                float *dw = dword + (size_t)ids[bt] * C;
                for (int c = c0; c < c1; c++)
                    dw[c] += g[c];
            }
            if (dtype) {
                float *dt = dtype + (size_t)(tt ? tt[bt] : 0) * C;
                for (int c = c0; c < c1; c++)
                    dt[c] += g[c];
            }
            if (dpos && (int64_t)p != pad_pos) {
                float *dp = dpos + p * C;
                for (int c = c0; c < c1; c++)
                    dp[c] += g[c];
            }
        }
    }
    ZT_PROF(ZT_PROF_EMBEDDING, t0, 3.0 * B * T * C, 28.0 * B * T * C);
}

void embedding_backward(float *dword, float *dtype, float *dpos, const float *dout,
                        const int64_t *ids, const int64_t *tt, int B, int T, int C)
{
    embed_bwd(dword, dtype, dpos, dout, ids, tt, NULL, B, T, C, -1, -1);
}

void embedding_backward_pos(float *dword, float *dtype, float *dpos, const float *dout,
                            const int64_t *ids, const int64_t *tt, const int64_t *pos_ids,
                            int M, int C)
{
    embed_bwd(dword, dtype, dpos, dout, ids, tt, pos_ids, M, 1, C, -1, -1);
}

void embedding_backward_pad(float *dword, float *dtype, float *dpos, const float *dout,
                            const int64_t *ids, const int64_t *tt, const int64_t *pos_ids,
                            int B, int T, int C, int64_t pad_word, int64_t pad_pos)
{
    embed_bwd(dword, dtype, dpos, dout, ids, tt, pos_ids, B, T, C, pad_word, pad_pos);
}

/* ---- cross-entropy ------------------------------------------------------------------ */

double crossentropy_forward_backward(float *dlogits, double *row_loss, int64_t *count,
                                     const float *logits, const int64_t *labels, int M, int V,
                                     float grad_scale)
{
    /* dlogits, logits: [M,V]; row_loss, labels: [M] */
    double total = 0.0, t0 = ZT_PROF_T0();
    int64_t n = 0;
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        const float *x = logits + (size_t)m * V;
        float *d = dlogits ? dlogits + (size_t)m * V : NULL;
        int64_t y = labels[m];
        row_loss[m] = 0.0;
        if (y == -100) {
            if (d)
                memset(d, 0, sizeof(float) * (size_t)V);
            continue;
        }
        float mx = -INFINITY;
        for (int j = 0; j < V; j++)
            mx = x[j] > mx ? x[j] : mx;
        /* one exp pass: d holds exp(x - max), then the softmax times grad_scale */
        float xy = x[y];
        double sum = vm_exp_sum(d, x, mx, (size_t)V);
        row_loss[m] = mx + log(sum) - xy;
        if (d) {
            float f = (float)(grad_scale / sum);
            for (int j = 0; j < V; j++)
                d[j] *= f;
            d[y] -= grad_scale;
        }
    }
    for (int m = 0; m < M; m++) { /* in order: the sum does not depend on threads */
        total += row_loss[m];
        n += labels[m] != -100;
    }
    *count = n;
    ZT_PROF(ZT_PROF_LOSS, t0, 6.0 * M * (double)V, (dlogits ? 8.0 : 4.0) * M * (double)V);
    return total;
}

double bce_logits_forward_backward(float *dlogits, const float *logits, const float *y,
                                   const int64_t *mask, size_t n, float grad_scale)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = logits[i], t = y[i];
        if (mask && mask[i] != 1) {
            if (dlogits)
                dlogits[i] = 0.0f;
            continue;
        }
        total += (x > 0.0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
        if (dlogits) /* sigmoid(x) - y, from exp(-|x|) so that neither side overflows */
            dlogits[i] = (float)(((x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x))) -
                                  t) * grad_scale);
    }
    return total;
}

double mse_forward_backward(float *dlogits, const float *x, const float *y, size_t n,
                            float grad_scale)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        float d = x[i] - y[i];
        total += (double)d * d;
        if (dlogits)
            dlogits[i] = 2.0f * d * grad_scale;
    }
    return total;
}

void tanh_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = tanhf(inp[i]);
}

void tanh_backward(float *dinp, const float *out, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * (1.0f - out[i] * out[i]);
}

/* ---- T5: RMS norm ---------------------------------------------------------------------- */

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int M, int C,
                     float eps)
{
    /* out, inp: [M,C]; rstd: [M]; w: [C] */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * C;
        float *y = out + (size_t)m * C;
        float var = (float)(vm_sum(x, x, (size_t)C) / C);
        float rs = 1.0f / sqrtf(var + eps);
        for (int c = 0; c < C; c++)
            y[c] = w[c] * (x[c] * rs);
        rstd[m] = rs;
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 5.0 * M * C, 4.0 * (2.0 * M * C + M));
}

void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                      const float *rstd, const float *w, int M, int C)
{
    /* dinp, dout, inp: [M,C]; dw, w: [C]; rstd: [M]. y = w * x * rs, rs = (mean x^2 + eps)^-1/2:
     * dx = rs * (g - xh * mean(g * xh)), g = dy * w, xh = x * rs */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        const float *x = inp + (size_t)m * C, *dy = dout + (size_t)m * C;
        float *dx = dinp + (size_t)m * C;
        float rs = rstd[m];
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (double)(dy[c] * w[c]) * (double)(x[c] * rs);
        float mg = (float)(s / C);
        for (int c = 0; c < C; c++)
            dx[c] += rs * (dy[c] * w[c] - (x[c] * rs) * mg);
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        double aw[64] = {0};
        for (int m = 0; m < M; m++) {
            const float *x = inp + (size_t)m * C, *dy = dout + (size_t)m * C;
            for (int c = c0; c < c1; c++)
                aw[c - c0] += (double)dy[c] * (x[c] * rstd[m]);
        }
        for (int c = c0; c < c1; c++)
            dw[c] += (float)aw[c - c0];
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 10.0 * M * C, 4.0 * (5.0 * M * C));
}

/* ---- T5: relative position bias ------------------------------------------------------- */

int t5_bucket(int n, int bidirectional, int NB, int max_distance)
{
    int b = 0;
    if (bidirectional) {
        NB /= 2;
        b = n > 0 ? NB : 0;
        n = n < 0 ? -n : n;
    } else {
        n = n < 0 ? -n : 0;
    }
    int exact = NB / 2;
    if (n < exact)
        return b + n;
    /* in float32, as Hugging Face's _relative_position_bucket; int truncates */
    float r = logf((float)n / (float)exact) / (float)log((double)max_distance / exact) *
              (float)(NB - exact);
    int big = exact + (int)r;
    return b + (big < NB - 1 ? big : NB - 1);
}

void posbias_forward(float *bias, const float *table, int bidirectional, int NB, int maxd,
                     int Tq, int Tk, int H)
{
    /* bias: [H,Tq,Tk]; table: [NB,H] */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++) {
            const float *row = table + (size_t)t5_bucket(j - i, bidirectional, NB, maxd) * H;
            for (int h = 0; h < H; h++)
                bias[((size_t)h * Tq + i) * Tk + j] = row[h];
        }
    ZT_PROF(ZT_PROF_EMBEDDING, t0, 0, 8.0 * H * Tq * Tk);
}

void posbias_backward(float *dtable, const float *dbias, int bidirectional, int NB, int maxd,
                      int Tq, int Tk, int H)
{
    /* dtable: [NB,H] (NB <= 4096); dbias: [H,Tq,Tk]. Heads in parallel, (i, j) in order. */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double acc[4096];
        memset(acc, 0, sizeof(double) * (size_t)NB);
        for (int i = 0; i < Tq; i++) {
            const float *d = dbias + ((size_t)h * Tq + i) * Tk;
            for (int j = 0; j < Tk; j++)
                acc[t5_bucket(j - i, bidirectional, NB, maxd)] += d[j];
        }
        for (int k = 0; k < NB; k++)
            dtable[(size_t)k * H + h] += (float)acc[k];
    }
    ZT_PROF(ZT_PROF_EMBEDDING, t0, (double)H * Tq * Tk, 4.0 * H * Tq * Tk);
}

/* ---- T5's feed-forward pieces ---------------------------------------------------------- */

void act_forward(int act, float *out, const float *inp, size_t n)
{
    double t0 = ZT_PROF_T0();
    if (act == ZT_ACT_GELU) {
        gelu_forward(out, inp, n);
        return;
    }
    if (act == ZT_ACT_RELU) { /* (one loop per activation: each vectorizes) */
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
    } else { /* gelu (tanh) or silu: vmath's loops over GELU_CHUNK-element chunks */
        void (*f)(float *, const float *, size_t) = act == ZT_ACT_SILU ? vm_silu : vm_gelu_tanh;
        long chunks = (long)((n + GELU_CHUNK - 1) / GELU_CHUNK);
#pragma omp parallel for schedule(static)
        for (long c = 0; c < chunks; c++) {
            size_t i = (size_t)c * GELU_CHUNK, k = n - i < GELU_CHUNK ? n - i : GELU_CHUNK;
            f(out + i, inp + i, k);
        }
    }
    ZT_PROF(ZT_PROF_GELU, t0, (act == ZT_ACT_RELU ? 1.0 : 20.0) * (double)n, 8.0 * (double)n);
}

void act_backward(int act, float *dinp, const float *inp, const float *dout, size_t n)
{
    double t0 = ZT_PROF_T0();
    if (act == ZT_ACT_GELU) {
        gelu_backward(dinp, inp, dout, n);
        return;
    }
    if (act == ZT_ACT_RELU) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) { /* (both loads unconditional: it vectorizes) */
            float d = dout[i];
            dinp[i] += inp[i] > 0.0f ? d : 0.0f;
        }
    } else {
        void (*f)(float *, const float *, const float *, size_t) =
            act == ZT_ACT_SILU ? vm_silu_grad_acc : vm_gelu_tanh_grad_acc;
        long chunks = (long)((n + GELU_CHUNK - 1) / GELU_CHUNK);
#pragma omp parallel for schedule(static)
        for (long c = 0; c < chunks; c++) {
            size_t i = (size_t)c * GELU_CHUNK, k = n - i < GELU_CHUNK ? n - i : GELU_CHUNK;
            f(dinp + i, inp + i, dout + i, k);
        }
    }
    ZT_PROF(ZT_PROF_GELU, t0, (act == ZT_ACT_RELU ? 1.0 : 25.0) * (double)n, 12.0 * (double)n);
}

void mul_forward(float *out, const float *a, const float *b, size_t n)
{
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] * b[i];
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)n, 12.0 * (double)n);
}

void mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                  size_t n)
{
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        if (da)
            da[i] += dout[i] * b[i];
        if (db)
            db[i] += dout[i] * a[i];
    }
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 2.0 * (double)n, 20.0 * (double)n);
}

void lookup_forward(float *out, const int64_t *ids, const float *word, int M, int C)
{
    /* out: [M,C]; ids: [M]; word: [V,C] */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
        memcpy(out + (size_t)m * C, word + (size_t)ids[m] * C, sizeof(float) * (size_t)C);
    ZT_PROF(ZT_PROF_EMBEDDING, t0, 0, 8.0 * M * C);
}

void lookup_backward(float *dword, const float *dout, const int64_t *ids, int M, int C)
{
    /* channels split across threads, rows in order (ids repeat): deterministic */
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 16) {
        int c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int m = 0; m < M; m++) {
            const float *g = dout + (size_t)m * C;
            float *dw = dword + (size_t)ids[m] * C;
            for (int c = c0; c < c1; c++)
                dw[c] += g[c];
        }
    }
    ZT_PROF(ZT_PROF_EMBEDDING, t0, (double)M * C, 12.0 * M * C);
}

void scale_inplace(float *x, float s, size_t n)
{
    double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)n, 8.0 * (double)n);
}
