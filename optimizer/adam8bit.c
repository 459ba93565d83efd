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
    zt_qmap_index(q->m, q->m_idx);
    zt_qmap_index(q->v, q->v_idx);
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
        float m[ZT_QBLOCK], v[ZT_QBLOCK], gb[ZT_QBLOCK], am1 = 0.0f, av1 = 0.0f;
        float a_m = am[b], a_v = av[b];
        const uint8_t *cmb = cm + lo, *cvb = cv + lo;
        float *pb = p + lo;
        for (size_t j = 0; j < len; j++) { /* dequantize (a table read each) */
            m[j] = q->m[cmb[j]] * a_m;
            v[j] = q->v[cvb[j]] * a_v;
            gb[j] = g[lo + j] * k.gs;
        }
        for (size_t j = 0; j < len; j++) { /* the moments, their block maxima */
            int fin = isfinite(gb[j]);
            float gj = fin ? gb[j] : 0.0f;
            float mj = m[j] * k.b1 + k.one_b1 * gj, vj = v[j] * k.b2 + k.one_b2 * gj * gj;
            m[j] = fin ? mj : 0.0f; /* a non-finite gradient: the element starts again */
            v[j] = fin ? vj : 0.0f;
            float am_j = fabsf(m[j]), av_j = fabsf(v[j]);
            am1 = am_j > am1 ? am_j : am1;
            av1 = av_j > av1 ? av_j : av1;
        }
        for (size_t j = 0; j < len; j++) { /* the parameters (unchanged where g is not finite) */
            float upd = (pb[j] + k.step_size * (m[j] / (sqrtf(v[j]) + k.eps_c2))) * k.keep;
            pb[j] = isfinite(gb[j]) ? upd : pb[j];
        }
        uint8_t *cmw = cm + lo, *cvw = cv + lo;
        if (am1 > 0.0f)
            for (size_t j = 0; j < len; j++)
                cmw[j] = zt_quantize_fast(q->m, q->m_idx, m[j] / am1);
        else
            memset(cmw, q->m_zero, len);
        if (av1 > 0.0f)
            for (size_t j = 0; j < len; j++)
                cvw[j] = zt_quantize_fast(q->v, q->v_idx, v[j] / av1);
        else
            memset(cvw, q->v_zero, len);
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
