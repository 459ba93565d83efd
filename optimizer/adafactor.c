/* adafactor.c - Adafactor in three phases over tensor pieces (adafactor.h), the arithmetic
 * of transformers' Adafactor.step in float32: beta2 = 1 - t^decay_rate; row / column
 * moments of g^2 + eps1 per matrix of the last two dimensions (factored) or a full moment;
 * u = g / sqrt(v_hat); u /= max(1, rms(u) / clip); u *= lr, lr = max(eps2, rms(p)) *
 * min(1e-2 (or 1e-6 t with warmup_init), 1 / sqrt(t)) with relative steps and parameter
 * scaling; optional first moment; decay p -= wd lr p; p -= u. The RMS terms span the whole
 * tensor. */
#include "adafactor.h"
#include "adamw.h"
#include "../common/prof.h"

#include <math.h>

void zt_adafactor_defaults(zt_adafactor_hparams *hp)
{
    *hp = (zt_adafactor_hparams){.lr = 0.0f, .eps1 = 1e-30f, .eps2 = 1e-3f,
                                 .clip_threshold = 1.0f, .decay_rate = -0.8f, .beta1 = -1.0f,
                                 .weight_decay = 0.0f, .relative_step = 1,
                                 .scale_parameter = 1, .warmup_init = 0, .step = 1};
}

static size_t batch_of(const zt_adafactor_shape *sh)
{
    return sh->batch ? sh->batch : 1;
}

static size_t numel_of(const zt_adafactor_shape *sh)
{
    return batch_of(sh) * sh->rows * (sh->cols ? sh->cols : 1);
}

size_t zt_adafactor_scratch(const zt_adafactor_shape *sh)
{
    return sh->cols ? batch_of(sh) * (sh->cols + 1) : 0;
}

/* beta2 of the step and 1 - beta2, computed in double and rounded as the reference passes
 * them to float32 tensor operations */
static void beta2_of(const zt_adafactor_hparams *hp, float *b2t, float *one_b2t)
{
    double b2 = 1.0 - pow((double)hp->step, hp->decay_rate);
    *b2t = (float)b2;
    *one_b2t = (float)(1.0 - b2);
}

/* Sums whose order of additions is fixed by the data, never by the thread count: the
 * squares of p and of the update in partial sums of SUM_CHUNK consecutive elements added in
 * order (zt_sumsq's rule; within a chunk eight interleaved partial sums added pairwise), the
 * row sums row by row (the same eight-lane rule over each piece's stretch of a row), the
 * column sums column by column over the rows of their matrix in order. Rows are numbered
 * across the B matrices (row i is row i mod R of matrix i / R), so a tensor of B matrices
 * sums its rows exactly as one matrix of B x R rows would. */
#define SUM_CHUNK 4096
#define SUM_GROUP 64 /* partial sums computed at once (in parallel) */

void zt_adafactor_sums_add(const zt_adafactor_shape *sh, size_t off, size_t n, const float *p,
                           const float *g, float grad_scale, float eps1, zt_adafactor_sums *s)
{
    s->p_sumsq += zt_sumsq(p, n);
    if (!sh->cols || !n)
        return;
    size_t cols = sh->cols, rows = sh->rows, r0 = off / cols, r1 = (off + n - 1) / cols + 1;
    /* rows: each sums its own stretch of the piece */
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = r0; i < r1; i++) {
        size_t a = i * cols > off ? i * cols - off : 0;
        size_t b = (i + 1) * cols < off + n ? (i + 1) * cols - off : n;
        double acc[8] = {0}; /* eight interleaved partial sums (lane k: elements k mod 8) */
        size_t k = a;
        for (; k + 8 <= b; k += 8)
            for (int q = 0; q < 8; q++) {
                float gk = g[k + q] * grad_scale;
                acc[q] += gk * gk + eps1;
            }
        for (; k < b; k++) {
            float gk = g[k] * grad_scale;
            acc[(k - a) & 7] += gk * gk + eps1;
        }
        s->row_sum[i] += ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    /* columns: blocks of 256, each over the rows in order */
    size_t nb = (cols + 255) / 256;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t cb = 0; cb < nb; cb++) {
        size_t c0 = cb * 256, c1 = c0 + 256 < cols ? c0 + 256 : cols;
        for (size_t i = r0; i < r1; i++) { /* elements [lo, hi) of the tensor */
            size_t lo = i * cols + c0 > off ? i * cols + c0 : off;
            size_t hi = i * cols + c1 < off + n ? i * cols + c1 : off + n;
            double *cs = s->col_sum + (i / rows) * cols - i * cols; /* matrix i / R's */
            for (size_t e = lo; e < hi; e++) {
                float gk = g[e - off] * grad_scale;
                cs[e] += gk * gk + eps1;
            }
        }
    }
}

double zt_adafactor_step_size(const zt_adafactor_hparams *hp)
{
    double t = (double)hp->step;
    if (!hp->relative_step)
        return hp->lr;
    double lo = hp->warmup_init ? 1e-6 * t : 1e-2, inv = 1.0 / sqrt(t);
    return lo < inv ? lo : inv;
}

float zt_adafactor_stats(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                         const zt_adafactor_sums *s, float *row, float *col)
{
    float b2t, one_b2t;
    beta2_of(hp, &b2t, &one_b2t);
    if (sh->cols) {
        size_t B = batch_of(sh);
        for (size_t i = 0; i < B * sh->rows; i++) /* means over the columns */
            row[i] = row[i] * b2t + one_b2t * (float)(s->row_sum[i] / (double)sh->cols);
        for (size_t j = 0; j < B * sh->cols; j++) /* over the rows of each matrix */
            col[j] = col[j] * b2t + one_b2t * (float)(s->col_sum[j] / (double)sh->rows);
    }
    double rel = zt_adafactor_step_size(hp);
    double scale = 1.0;
    if (hp->scale_parameter) {
        double rms = (double)(float)sqrt(s->p_sumsq / (double)numel_of(sh));
        scale = rms > hp->eps2 ? rms : hp->eps2;
    }
    return (float)(scale * rel);
}

/* the mean of matrix b's row moments (its preconditioner divides by it) */
static float row_mean(const zt_adafactor_shape *sh, const float *row, size_t b)
{
    double rsum = 0.0;
    for (size_t i = b * sh->rows; i < (b + 1) * sh->rows; i++)
        rsum += row[i];
    return (float)(rsum / (double)sh->rows);
}

/* A factored tensor's preconditioner over the elements [off, off + n): for each row i of
 * matrix b its factor 1/sqrt(row_i / mean_b(row)) and the stretch of columns, with the
 * column factors 1/sqrt(col_bj) and the row means from cfac (when given: computed once for
 * all matrices) or computed here. The element's u is r * c * gk, gk = g * grad_scale. */
typedef struct factors {
    const zt_adafactor_shape *sh;
    const float *row, *col;
    const float *rmean; /* [B] (cfac's tail, or rmean1 for one matrix), or NULL */
    float rmean1;
    float *cfac;
} factors;

static void factors_init(factors *f, const zt_adafactor_shape *sh, const float *row,
                         const float *col, float *cfac)
{
    size_t B = batch_of(sh);
    f->sh = sh;
    f->row = row;
    f->col = col;
    f->cfac = cfac;
    f->rmean = NULL;
    if (cfac) {
        for (size_t j = 0; j < B * sh->cols; j++)
            cfac[j] = 1.0f / sqrtf(col[j]);
        for (size_t b = 0; b < B; b++)
            cfac[B * sh->cols + b] = row_mean(sh, row, b);
        f->rmean = cfac + B * sh->cols;
    } else if (B == 1) {
        f->rmean1 = row_mean(sh, row, 0);
        f->rmean = &f->rmean1;
    }
}

/* u of the elements [off, off + n) of a factored tensor into out, row stretch by row
 * stretch (the inner loops vectorize; each element's arithmetic is the same either way) */
static void factored_u(const factors *f, size_t off, size_t n, const float *g, float grad_scale,
                       float *out)
{
    size_t cols = f->sh->cols, rows = f->sh->rows, i = off / cols, j = off % cols;
    size_t mb = (size_t)-1; /* the matrix whose row mean is in rm (without f->rmean) */
    float rm = 0.0f;
    for (size_t k = 0; k < n; i++, j = 0) {
        size_t b = i / rows;
        if (f->rmean)
            rm = f->rmean[b];
        else if (b != mb)
            rm = row_mean(f->sh, f->row, mb = b);
        float r = 1.0f / sqrtf(f->row[i] / rm);
        size_t m = cols - j < n - k ? cols - j : n - k;
        const float *gk = g + k;
        float *o = out + k;
        if (f->cfac) {
            const float *cf = f->cfac + b * cols + j;
            for (size_t q = 0; q < m; q++)
                o[q] = r * cf[q] * (gk[q] * grad_scale);
        } else {
            const float *cl = f->col + b * cols + j;
            for (size_t q = 0; q < m; q++)
                o[q] = r * (1.0f / sqrtf(cl[q])) * (gk[q] * grad_scale);
        }
        k += m;
    }
}

#define UCHUNK 256 /* elements of u computed at a time */

double zt_adafactor_precondition(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                                 size_t off, size_t n, const float *g, float grad_scale,
                                 const float *row, const float *col, float *v, float *u,
                                 float *cfac)
{
    double usq = 0.0;
    factors f;
    float b2t, one_b2t;
    if (sh->cols)
        factors_init(&f, sh, row, col, cfac);
    beta2_of(hp, &b2t, &one_b2t);
    for (size_t g0 = 0; g0 < n; g0 += (size_t)SUM_CHUNK * SUM_GROUP) {
        double part[SUM_GROUP];
        size_t nc = (n - g0 + SUM_CHUNK - 1) / SUM_CHUNK;
        nc = nc < SUM_GROUP ? nc : SUM_GROUP;
#pragma omp parallel for schedule(static) if (nc > 1)
        for (size_t c = 0; c < nc; c++) {
            size_t a = g0 + c * SUM_CHUNK, b = a + SUM_CHUNK < n ? a + SUM_CHUNK : n;
            double sq = 0.0;
            for (size_t k0 = a; k0 < b; k0 += UCHUNK) {
                size_t m = b - k0 < UCHUNK ? b - k0 : UCHUNK;
                float tmp[UCHUNK], *uk = u ? u + k0 : tmp;
                if (sh->cols) {
                    factored_u(&f, off + k0, m, g + k0, grad_scale, uk);
                } else {
                    for (size_t k = 0; k < m; k++) {
                        float gk = g[k0 + k] * grad_scale;
                        v[k0 + k] = v[k0 + k] * b2t + one_b2t * (gk * gk + hp->eps1);
                        uk[k] = 1.0f / sqrtf(v[k0 + k]) * gk;
                    }
                }
                double acc[8] = {0}; /* eight interleaved partial sums */
                size_t k = 0;
                for (; k + 8 <= m; k += 8)
                    for (int q = 0; q < 8; q++)
                        acc[q] += (double)uk[k + q] * uk[k + q];
                for (; k < m; k++)
                    acc[k & 7] += (double)uk[k] * uk[k];
                sq += ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                      ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            }
            part[c] = sq;
        }
        for (size_t c = 0; c < nc; c++)
            usq += part[c];
    }
    return usq;
}

/* phase 3 on one element: x = u / denom * lr, through the first moment, decay, p -= x */
static inline void apply_one(const zt_adafactor_hparams *hp, float denom, float lr, float wd,
                             float uk, float *m, float *p)
{
    float x = uk / denom * lr;
    if (hp->beta1 >= 0.0f) {
        *m = *m * hp->beta1 + (1.0f - hp->beta1) * x;
        x = *m;
    }
    if (wd != 0.0f)
        *p = *p + wd * *p;
    *p = *p - x;
}

static float clip_denom(const zt_adafactor_hparams *hp, size_t numel, double u_sumsq)
{
    float rms = (float)sqrt(u_sumsq / (double)numel), denom = rms / hp->clip_threshold;
    return denom > 1.0f ? denom : 1.0f;
}

/* phase 3 on n elements; without a first moment and decay (Adafactor's defaults) a loop that
 * vectorizes, the same operations */
static void apply_n(const zt_adafactor_hparams *hp, float denom, float lr, float wd,
                    const float *u, float *m, float *p, size_t n)
{
    if (hp->beta1 < 0.0f && wd == 0.0f) {
        for (size_t k = 0; k < n; k++)
            p[k] = p[k] - u[k] / denom * lr;
        return;
    }
    for (size_t k = 0; k < n; k++)
        apply_one(hp, denom, lr, wd, u[k], m ? m + k : NULL, p + k);
}

void zt_adafactor_apply(const zt_adafactor_hparams *hp, size_t numel, double u_sumsq, float lr,
                        size_t n, const float *u, float *m, float *p, int decay)
{
    double t0 = ZT_PROF_T0();
    float denom = clip_denom(hp, numel, u_sumsq), wd = decay ? -hp->weight_decay * lr : 0.0f;
    apply_n(hp, denom, lr, wd, u, m, p, n);
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 8.0 * (double)n, 16.0 * (double)n);
}

void zt_adafactor_apply_grad(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                             size_t off, size_t n, const float *g, float grad_scale,
                             const float *row, const float *col, const float *v,
                             double u_sumsq, float lr, float *m, float *p, int decay, float *cfac)
{
    double t0 = ZT_PROF_T0();
    size_t numel = numel_of(sh);
    float denom = clip_denom(hp, numel, u_sumsq), wd = decay ? -hp->weight_decay * lr : 0.0f;
    factors f;
    if (sh->cols)
        factors_init(&f, sh, row, col, cfac);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t k0 = 0; k0 < n; k0 += UCHUNK) {
        float u[UCHUNK];
        size_t c = n - k0 < UCHUNK ? n - k0 : UCHUNK;
        if (sh->cols)
            factored_u(&f, off + k0, c, g + k0, grad_scale, u);
        else
            for (size_t k = 0; k < c; k++)
                u[k] = 1.0f / sqrtf(v[k0 + k]) * (g[k0 + k] * grad_scale);
        apply_n(hp, denom, lr, wd, u, m ? m + k0 : NULL, p + k0, c);
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 12.0 * (double)n, 16.0 * (double)n);
}
