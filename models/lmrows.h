/* lmrows.h - the buffer behind a language-model head: its logits and their gradient, sized for
 * the rows the head runs on (in training only the labelled rows, gathered: then also their
 * inputs and the inputs' gradient; every row when the caller keeps the logits). Shared by the
 * model families; not here: the head's math. With 16-bit activations (es = 2) the gathered
 * rows' logits (their gradient in place) and inputs are 2 bytes an element; kept logits and
 * the inputs' gradient are fp32. */
#ifndef ZT_MODELS_LMROWS_H
#define ZT_MODELS_LMROWS_H

#include <stddef.h>
#include "../memory/mem.h"

typedef struct zt_lm_rows {
    zt_mem_account *acct;      /* counted there too (the engine's), or NULL */
    void *buf;
    size_t bytes;              /* capacity */
    void *logits, *dlogits;    /* [rows, V] each (the same buffer when not kept: in place) */
    void *x;                   /* [rows, C]: the gathered rows (NULL kept) */
    float *dx;                 /* [rows, C]: their gradient (NULL kept) */
    float *wide;               /* 16-bit logits evaluated, widened (zt_lm_rows_widen) */
    size_t wide_n;             /* its floats */
} zt_lm_rows;

/* bytes for rows: logits [rows, V], and dlogits when kept (fp32), else the gathered x and dx;
 * es: bytes of an activation element (4, or 2 with 16-bit activations) */
size_t zt_lm_rows_bytes(size_t rows, int V, int C, int keep, size_t es);
/* Points the pieces for `rows` (at most `most`), growing the buffer with a quarter's room
 * (capped at most's need) so that the labelled count may vary without reallocating. */
int zt_lm_rows_size(zt_lm_rows *h, size_t rows, size_t most, int V, int C, int keep,
                    size_t es);
/* The first n 16-bit logits (dt: ZT_HALF_*) widened into fp32, as zt_engine_logits gives
 * them, in a buffer of the head's own grown as needed; NULL when out of memory for it. */
const float *zt_lm_rows_widen(zt_lm_rows *h, int dt, size_t n);
/* frees the buffer and the widened logits */
void zt_lm_rows_free(zt_lm_rows *h);

#endif
