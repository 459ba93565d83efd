/* lmrows.h - the buffer behind a language-model head: its logits and their gradient, sized for
 * the rows the head runs on (in training only the labelled rows, gathered: then also their
 * inputs and the inputs' gradient; every row when the caller keeps the logits). Shared by the
 * model families; not here: the head's math. */
#ifndef ZT_MODELS_LMROWS_H
#define ZT_MODELS_LMROWS_H

#include <stddef.h>
#include "../memory/mem.h"

typedef struct zt_lm_rows {
    zt_mem_account *acct;      /* counted there too (the engine's), or NULL */
    float *buf;
    size_t floats;             /* capacity */
    float *logits, *dlogits;   /* [rows, V] each (the same buffer when not kept: in place) */
    float *x, *dx;             /* [rows, C]: the gathered rows and their gradient (NULL kept) */
} zt_lm_rows;

/* floats for rows: logits [rows, V], and dlogits when kept, else the gathered x and dx */
size_t zt_lm_rows_floats(size_t rows, int V, int C, int keep);
/* Points the pieces for `rows` (at most `most`), growing the buffer with a quarter's room
 * (capped at most's need) so that the labelled count may vary without reallocating. */
int zt_lm_rows_size(zt_lm_rows *h, size_t rows, size_t most, int V, int C, int keep);
void zt_lm_rows_free(zt_lm_rows *h);

#endif
