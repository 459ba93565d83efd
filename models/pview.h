/* pview.h - a model's fp32 view of half-precision parameters: the unit a call runs on and
 * the unit it is tied to, widened (exactly) into two buffers of the model's own, for the
 * kernels that read fp32 parameters. With fp32 parameters the view is the buffers
 * themselves. Counted with the model's activations (the planner sees it in act_bytes). */
#ifndef ZT_MODELS_PVIEW_H
#define ZT_MODELS_PVIEW_H

#include "model.h"

typedef struct zt_pview {
    int hdt;                   /* -1: fp32 parameters; else ZT_HALF_* */
    const zt_layout *L;
    zt_mem_account *acct;
    float *buf[2];             /* the unit's and its tied unit's floats */
    size_t cap;                /* floats each: the largest unit */
    float **view;              /* [n_units] */
} zt_pview;

/* Allocates the buffers (half precision; tied: a unit is tied to another). 0 or
 * ZT_E_NOMEM. */
int zt_pview_init(zt_pview *v, int hdt, const zt_layout *L, int tied, zt_mem_account *acct);
/* The parameters of unit u and of unit t (-1: none) as fp32 (the others NULL). */
float *const *zt_pview_of(zt_pview *v, void *const *P, int u, int t);
/* bytes of the buffers the view allocates for a layout (tied: a tied unit exists) */
size_t zt_pview_bytes(const zt_layout *L, int hdt, int tied);
void zt_pview_free(zt_pview *v);

#endif
