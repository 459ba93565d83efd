/* adam8bit.c - block-wise 8-bit AdamW and its fp32-state twin (adam8bit.h). */
#include "adam8bit.h"
#include "../common/prof.h"

#include <math.h>
#include <string.h>

void zt_adam8_maps_init(zt_adam8_maps *q)
{
    zt_qmap_dynamic(q->m, 1);
    zt_qmap_dynamic(q->v, 0);
    q->m_zero = zt_qmap_zero(q->m);
    q->v_zero = zt_qmap_zero(q->v);
}

void zt_adam8bit_init(const zt_adam8_maps *q, uint8_t *cm, uint8_t *cv, float *am, float *av,
                      size_t n)
{
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    memset(cm, q->m_zero, n);
    memset(cv, q->v_zero, n);
    memset(am, 0, nb * sizeof(float));
    memset(av, 0, nb * sizeof(float));
}

/* the step's constants, in float32 as bitsandbytes' kernel computes them */
typedef struct consts {
    float b1, b2, one_b1, one_b2, eps_c2, step_size, keep, gs;
} consts;

static consts make_consts(const zt_adamw_hparams *hp, int decay)
{
    consts k;
    float t = (float)hp->step;
    float c1 = 1.0f - powf(hp->beta1, t), c2 = sqrtf(1.0f - powf(hp->beta2, t));
    k.b1 = hp->beta1;
    k.b2 = hp->beta2;
    k.one_b1 = 1.0f - hp->beta1;
    k.one_b2 = 1.0f - hp->beta2;
    k.eps_c2 = hp->eps * c2;
    k.step_size = -hp->lr * c2 / c1;
    k.keep = decay && hp->weight_decay > 0.0f ? 1.0f - hp->lr * hp->weight_decay : 1.0f;
    k.gs = hp->grad_scale;
    return k;
}

void zt_adam8bit_update(const zt_adam8_maps *q, float *p, const float *g, uint8_t *cm,
                        uint8_t *cv, float *am, float *av, size_t n, const zt_adamw_hparams *hp,
                        int decay)
{
    double t0 = ZT_PROF_T0();
    consts k = make_consts(hp, decay);
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * ZT_QBLOCK, len = n - lo < ZT_QBLOCK ? n - lo : ZT_QBLOCK;
        float m[ZT_QBLOCK], v[ZT_QBLOCK], am1 = 0.0f, av1 = 0.0f;
        float a_m = am[b], a_v = av[b];
        for (size_t j = 0; j < len; j++) {
            size_t i = lo + j;
            float gi = g[i] * k.gs;
            if (isfinite(gi)) {
                m[j] = q->m[cm[i]] * a_m * k.b1 + k.one_b1 * gi;
                v[j] = q->v[cv[i]] * a_v * k.b2 + k.one_b2 * gi * gi;
            } else {
                m[j] = v[j] = 0.0f; /* the element's state starts again */
            }
            am1 = fmaxf(am1, fabsf(m[j]));
            av1 = fmaxf(av1, fabsf(v[j]));
        }
        for (size_t j = 0; j < len; j++) {
            size_t i = lo + j;
            if (isfinite(g[i] * k.gs))
                p[i] = (p[i] + k.step_size * (m[j] / (sqrtf(v[j]) + k.eps_c2))) * k.keep;
            cm[i] = am1 > 0.0f ? zt_quantize_nearest(q->m, m[j] / am1) : q->m_zero;
            cv[i] = av1 > 0.0f ? zt_quantize_nearest(q->v, v[j] / av1) : q->v_zero;
        }
        am[b] = am1;
        av[b] = av1;
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 30.0 * (double)n, 14.0 * (double)n);
}

void zt_adam32_update(float *p, const float *g, float *m, float *v, size_t n,
                      const zt_adamw_hparams *hp, int decay)
{
    double t0 = ZT_PROF_T0();
    consts k = make_consts(hp, decay);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * k.gs;
        if (!isfinite(gi)) {
            m[i] = v[i] = 0.0f;
            continue;
        }
        float mi = m[i] * k.b1 + k.one_b1 * gi, vi = v[i] * k.b2 + k.one_b2 * gi * gi;
        p[i] = (p[i] + k.step_size * (mi / (sqrtf(vi) + k.eps_c2))) * k.keep;
        m[i] = mi;
        v[i] = vi;
    }
    ZT_PROF(ZT_PROF_OPTIMIZER, t0, 14.0 * (double)n, 28.0 * (double)n);
}
