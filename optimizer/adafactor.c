/* adafactor.c - Adafactor in three phases over tensor pieces (adafactor.h), the arithmetic
 * of transformers' Adafactor.step in float32: beta2 = 1 - t^decay_rate; row / column
 * moments of g^2 + eps1 (factored) or a full moment; u = g / sqrt(v_hat); u /= max(1,
 * rms(u) / clip); u *= lr, lr = max(eps2, rms(p)) * min(1e-2 (or 1e-6 t with warmup_init),
 * 1 / sqrt(t)) with relative steps and parameter scaling; optional first moment; decay
 * p -= wd lr p; p -= u. */
#include "adafactor.h"
#include "../common/prof.h"

#include <math.h>

void zt_adafactor_defaults(zt_adafactor_hparams *hp)
{
    *hp = (zt_adafactor_hparams){.lr = 0.0f, .eps1 = 1e-30f, .eps2 = 1e-3f,
                                 .clip_threshold = 1.0f, .decay_rate = -0.8f, .beta1 = -1.0f,
                                 .weight_decay = 0.0f, .relative_step = 1,
                                 .scale_parameter = 1, .warmup_init = 0, .step = 1};
}

static size_t numel_of(const zt_adafactor_shape *sh)
{
    return sh->rows * (sh->cols ? sh->cols : 1);
}

/* beta2 of the step and 1 - beta2, computed in double and rounded as the reference passes
 * them to float32 tensor operations */
static void beta2_of(const zt_adafactor_hparams *hp, float *b2t, float *one_b2t)
{
    double b2 = 1.0 - pow((double)hp->step, hp->decay_rate);
    *b2t = (float)b2;
    *one_b2t = (float)(1.0 - b2);
}

void zt_adafactor_sums_add(const zt_adafactor_shape *sh, size_t off, size_t n, const float *p,
                           const float *g, float grad_scale, float eps1, zt_adafactor_sums *s)
{
    double psq = 0.0;
    for (size_t k = 0; k < n; k++) {
        float gk = g[k] * grad_scale, x = gk * gk + eps1;
        psq += (double)p[k] * p[k];
        if (sh->cols) {
            size_t e = off + k;
            s->row_sum[e / sh->cols] += x;
            s->col_sum[e % sh->cols] += x;
        }
    }
    s->p_sumsq += psq;
}

float zt_adafactor_stats(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                         const zt_adafactor_sums *s, float *row, float *col)
{
    double t = (double)hp->step;
    float b2t, one_b2t;
    beta2_of(hp, &b2t, &one_b2t);
    if (sh->cols) {
        for (size_t i = 0; i < sh->rows; i++) /* means over the columns */
            row[i] = row[i] * b2t + one_b2t * (float)(s->row_sum[i] / (double)sh->cols);
        for (size_t j = 0; j < sh->cols; j++) /* over the rows */
            col[j] = col[j] * b2t + one_b2t * (float)(s->col_sum[j] / (double)sh->rows);
    }
    double rel = hp->lr;
    if (hp->relative_step) {
        double lo = hp->warmup_init ? 1e-6 * t : 1e-2, inv = 1.0 / sqrt(t);
        rel = lo < inv ? lo : inv;
    }
    double scale = 1.0;
    if (hp->scale_parameter) {
        double rms = (double)(float)sqrt(s->p_sumsq / (double)numel_of(sh));
        scale = rms > hp->eps2 ? rms : hp->eps2;
    }
    return (float)(scale * rel);
}

double zt_adafactor_precondition(const zt_adafactor_shape *sh, const zt_adafactor_hparams *hp,
                                 size_t off, size_t n, const float *g, float grad_scale,
                                 const float *row, const float *col, float *v, float *u)
{
    double usq = 0.0;
    if (sh->cols) {
        double rsum = 0.0;
        for (size_t i = 0; i < sh->rows; i++)
            rsum += row[i];
        float rmean = (float)(rsum / (double)sh->rows);
        for (size_t k = 0; k < n; k++) {
            size_t e = off + k;
            float r = 1.0f / sqrtf(row[e / sh->cols] / rmean);
            float c = 1.0f / sqrtf(col[e % sh->cols]);
            u[k] = r * c * (g[k] * grad_scale);
            usq += (double)u[k] * u[k];
        }
        return usq;
    }
    float b2t, one_b2t;
    beta2_of(hp, &b2t, &one_b2t);
    for (size_t k = 0; k < n; k++) {
        float gk = g[k] * grad_scale;
        v[k] = v[k] * b2t + one_b2t * (gk * gk + hp->eps1);
        u[k] = 1.0f / sqrtf(v[k]) * gk;
        usq += (double)u[k] * u[k];
    }
    return usq;
}

void zt_adafactor_apply(const zt_adafactor_hparams *hp, size_t numel, double u_sumsq, float lr,
                        size_t n, const float *u, float *m, float *p, int decay)
{
    double t0 = ZT_PROF_T0();
    float rms = (float)sqrt(u_sumsq / (double)numel), denom = rms / hp->clip_threshold;
    denom = denom > 1.0f ? denom : 1.0f;
    float wd = decay ? -hp->weight_decay * lr : 0.0f;
    for (size_t k = 0; k < n; k++) {
        float x = u[k] / denom * lr;
        if (hp->beta1 >= 0.0f) {
            m[k] = m[k] * hp->beta1 + (1.0f - hp->beta1) * x;
            x = m[k];
        }
        if (wd != 0.0f)
            p[k] = p[k] + wd * p[k];
        p[k] = p[k] - x;
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 8.0 * (double)n, 16.0 * (double)n);
}
