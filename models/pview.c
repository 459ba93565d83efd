/* pview.c - fp32 views of half-precision parameter buffers (pview.h). */
#include "pview.h"
#include "../common/err.h"
#include "../common/half.h"
#include "../common/prof.h"

#include <stdlib.h>
#include <string.h>

static size_t largest(const zt_layout *L)
{
    size_t m = 0;
    for (int u = 0; u < L->n_units; u++)
        m = L->units[u].numel > m ? L->units[u].numel : m;
    return m;
}

size_t zt_pview_bytes(const zt_layout *L, int hdt, int tied)
{
    return hdt < 0 ? 0 : (tied ? 2 : 1) * ((largest(L) * sizeof(float) + 63) / 64 * 64);
}

int zt_pview_init(zt_pview *v, int hdt, const zt_layout *L, int tied, zt_mem_account *acct)
{
    memset(v, 0, sizeof *v);
    v->hdt = hdt;
    v->L = L;
    v->acct = acct;
    if (hdt < 0)
        return 0;
    v->cap = (largest(L) * sizeof(float) + 63) / 64 * 64 / sizeof(float);
    if (!(v->view = calloc((size_t)L->n_units, sizeof *v->view)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int i = 0; i < (tied ? 2 : 1); i++)
        if (!(v->buf[i] = zt_mem_alloc_in(acct, v->cap * sizeof(float), 64, ZT_MEM_ACTIVATIONS)))
            return zt_fail(ZT_E_NOMEM, "half-precision parameters: %zu bytes of fp32 views: out "
                           "of memory", v->cap * sizeof(float));
    return 0;
}

float *const *zt_pview_of(zt_pview *v, void *const *P, int u, int t)
{
    if (v->hdt < 0)
        return (float *const *)P;
    for (int i = 0; i < 2; i++) {
        int w = i ? t : u;
        if (w < 0)
            continue;
        double t0 = ZT_PROF_T0();
        size_t n = v->L->units[w].numel;
        zt_half_widen(v->hdt, v->buf[i], P[w], n);
        ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 0, 6.0 * (double)n);
        v->view[w] = v->buf[i];
    }
    return v->view;
}

void zt_pview_free(zt_pview *v)
{
    for (int i = 0; i < 2; i++)
        zt_mem_free_in(v->acct, v->buf[i], v->cap * sizeof(float), ZT_MEM_ACTIVATIONS);
    free(v->view);
    memset(v, 0, sizeof *v);
}
