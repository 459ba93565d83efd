/* adamw.c - the AdamW update exactly as torch.optim.AdamW (1.13, single-tensor path):
 * decoupled decay p *= 1 - lr*wd, moments with mul/add, step_size = lr / (1 - b1^t),
 * denom = sqrt(v) / sqrt(1 - b2^t) + eps (without bias correction: lr and sqrt(v) + eps, as
 * DeepSpeed's FusedAdam / DeepSpeedCPUAdam with bias_correction false). Clipping scales the
 * gradient on the fly. */
#include "adamw.h"
#include "../common/prof.h"
#include "../common/half.h"

#include <math.h>

void zt_adamw_update(float *p, const float *g, float *m, float *v, size_t n,
                     const zt_adamw_hparams *hp, int decay)
{
    /* p, g, m, v: [n] */
    double t = (double)hp->step, t0 = ZT_PROF_T0();
    float keep = decay ? (float)(1.0 - (double)hp->lr * hp->weight_decay) : 1.0f;
    float b1 = hp->beta1, b2 = hp->beta2, one_b1 = (float)(1.0 - hp->beta1),
          one_b2 = (float)(1.0 - hp->beta2);
    /* without bias correction both corrections are 1, as DeepSpeed's multi_tensor_adam and
     * cpu_adam set them: step lr, sqrt(v) / 1 + eps */
    float step_size = hp->no_bias_correction ? hp->lr : (float)(hp->lr / (1.0 - pow(hp->beta1, t)));
    float bc2_sqrt = hp->no_bias_correction ? 1.0f : (float)sqrt(1.0 - pow(hp->beta2, t));
    float eps = hp->eps, gs = hp->grad_scale;
    /* simd: vectorized sqrt and division are the same correctly rounded IEEE operations */
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gs;
        float pi = p[i] * keep;
        float mi = m[i] * b1 + gi * one_b1;
        float vi = v[i] * b2 + gi * gi * one_b2;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi - step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 14.0 * (double)n, 28.0 * (double)n);
}

/* one chunk's sum of squares: eight interleaved double accumulators (lane k takes the
 * elements k mod 8), added pairwise; the same order in both versions, so the same bits */
#define SUMSQ_BODY                                                                             \
    double a[8] = {0};                                                                         \
    size_t i = 0;                                                                              \
    for (; i + 8 <= n; i += 8)                                                                 \
        for (int k = 0; k < 8; k++)                                                            \
            a[k] += (double)x[i + k] * x[i + k];                                               \
    for (; i < n; i++)                                                                         \
        a[i & 7] += (double)x[i] * x[i];                                                       \
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));

__attribute__((target("avx2"))) static double chunk_sumsq_avx2(const float *x, size_t n)
{
    SUMSQ_BODY
}

static double chunk_sumsq(const float *x, size_t n)
{
    SUMSQ_BODY
}
#undef SUMSQ_BODY

double zt_sumsq_chunk(const float *x, size_t n)
{
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2");
    return avx2 ? chunk_sumsq_avx2(x, n) : chunk_sumsq(x, n);
}

double zt_sumsq(const float *x, size_t n)
{
    enum { CHUNK = 4096 };
    size_t nc = (n + CHUNK - 1) / CHUNK;
    double total = 0.0;
    int avx2 = __builtin_cpu_supports("avx2");
    /* chunk partials are computed in parallel and added in chunk order */
    for (size_t c0 = 0; c0 < nc; c0 += 1024) {
        double part[1024];
        size_t c1 = c0 + 1024 < nc ? c0 + 1024 : nc;
#pragma omp parallel for schedule(static)
        for (size_t c = c0; c < c1; c++) {
            size_t lo = c * CHUNK, k = lo + CHUNK < n ? CHUNK : n - lo;
            part[c - c0] = avx2 ? chunk_sumsq_avx2(x + lo, k) : chunk_sumsq(x + lo, k);
        }
        for (size_t c = c0; c < c1; c++)
            total += part[c - c0];
    }
    return total;
}

double zt_sumsq_half(int dt, const uint16_t *x, size_t n)
{
    enum { CHUNK = 4096 };
    size_t nc = (n + CHUNK - 1) / CHUNK;
    double total = 0.0;
    int avx2 = __builtin_cpu_supports("avx2");
    for (size_t c0 = 0; c0 < nc; c0 += 1024) {
        double part[1024];
        size_t c1 = c0 + 1024 < nc ? c0 + 1024 : nc;
#pragma omp parallel for schedule(static)
        for (size_t c = c0; c < c1; c++) {
            float w[CHUNK];
            size_t lo = c * CHUNK, k = lo + CHUNK < n ? CHUNK : n - lo;
            zt_half_widen(dt, w, x + lo, k);
            part[c - c0] = avx2 ? chunk_sumsq_avx2(w, k) : chunk_sumsq(w, k);
        }
        for (size_t c = c0; c < c1; c++)
            total += part[c - c0];
    }
    return total;
}
