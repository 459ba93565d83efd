/* lamb.c - LAMB's two phases (lamb.h), in FusedLamb's fp32 arithmetic and order: the moments
 * b1 m + (1 - b1) g and b2 v + ((1 - b2) g) g, the update m / denom + wd p, the step
 * p - (step_size coeff) u. Its norms are sums in double (FusedLamb's are fp32 block sums). */
#include "lamb.h"
#include "adamw.h"
#include "../common/prof.h"

#include <math.h>

enum { CHUNK = 4096, BATCH = 1024 };

/* m / denom + wd p, denom = sqrtf(v + e_in) + e_out: eps outside the root (e_in 0) or inside
 * (e_out 0), the same values as either form written alone (adding +0 changes nothing: v and
 * the root are >= 0), with no branch in the loop, so it vectorizes */
static inline float update_of(float m, float v, float p, float e_in, float e_out, float wd)
{
    return m / (sqrtf(v + e_in) + e_out) + wd * p;
}

/* one chunk (n <= CHUNK): the moments and the update (an elementwise loop that
 * vectorizes), then its two sums as zt_sumsq's chunks add them (the same order whatever the
 * thread that runs it) */
static void chunk_moments(const float *p, const float *g, float *m, float *v, size_t n,
                          const zt_lamb_hparams *hp, float wd, double *w2, double *u2)
{
    float b1 = hp->beta1, b2 = hp->beta2, one_b1 = 1.0f - b1, one_b2 = 1.0f - b2;
    float gs = hp->grad_scale, u[CHUNK];
    float e_in = hp->eps_inside_sqrt ? hp->eps : 0.0f, e_out = hp->eps_inside_sqrt ? 0.0f : hp->eps;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float mi = b1 * m[i] + one_b1 * gi;
        float vi = b2 * v[i] + one_b2 * gi * gi;
        u[i] = update_of(mi, vi, p[i], e_in, e_out, wd);
        m[i] = mi;
        v[i] = vi;
    }
    *w2 = zt_sumsq_chunk(p, n);
    *u2 = zt_sumsq_chunk(u, n);
}

void zt_lamb_moments(const float *p, const float *g, float *m, float *v, size_t n,
                     const zt_lamb_hparams *hp, int decay, double *w2, double *u2)
{
    double t0 = ZT_PROF_T0();
    float wd = decay ? hp->weight_decay : 0.0f;
    size_t nc = (n + CHUNK - 1) / CHUNK;
    for (size_t c0 = 0; c0 < nc; c0 += BATCH) {
        double pw[BATCH], pu[BATCH];
        size_t c1 = c0 + BATCH < nc ? c0 + BATCH : nc;
#pragma omp parallel for schedule(static)
        for (size_t c = c0; c < c1; c++) {
            size_t lo = c * CHUNK, k = lo + CHUNK < n ? CHUNK : n - lo;
            chunk_moments(p + lo, g + lo, m + lo, v + lo, k, hp, wd, &pw[c - c0], &pu[c - c0]);
        }
        for (size_t c = c0; c < c1; c++) { /* in chunk order */
            *w2 += pw[c - c0];
            *u2 += pu[c - c0];
        }
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 16.0 * (double)n, 24.0 * (double)n);
}

float zt_lamb_coeff(double w2, double u2, const zt_lamb_hparams *hp)
{
    /* the sums rounded to float before sqrtf, as FusedLamb's T = float holds them */
    float w = sqrtf((float)w2), u = sqrtf((float)u2), c = 1.0f;
    if (w != 0.0f && u != 0.0f) {
        c = w / u;
        if (c > hp->max_coeff)
            c = hp->max_coeff;
        if (c < hp->min_coeff)
            c = hp->min_coeff;
    }
    return c;
}

float zt_lamb_step_size(const zt_lamb_hparams *hp)
{
    if (hp->no_bias_correction)
        return hp->lr;
    double t = (double)hp->step;
    float bc1 = (float)(1.0 - pow((double)hp->beta1, t));
    float bc2 = (float)(1.0 - pow((double)hp->beta2, t));
    return hp->lr * sqrtf(bc2) / bc1;
}

void zt_lamb_apply(float *p, const float *m, const float *v, size_t n,
                   const zt_lamb_hparams *hp, int decay, float coeff)
{
    double t0 = ZT_PROF_T0();
    float wd = decay ? hp->weight_decay : 0.0f, scale = zt_lamb_step_size(hp) * coeff;
    float e_in = hp->eps_inside_sqrt ? hp->eps : 0.0f, e_out = hp->eps_inside_sqrt ? 0.0f : hp->eps;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        p[i] = p[i] - scale * update_of(m[i], v[i], p[i], e_in, e_out, wd);
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 6.0 * (double)n, 16.0 * (double)n);
}
