/* lmrows.c - sizing the LM head's row buffer (lmrows.h), counted as activations. */
#include "lmrows.h"
#include "../common/err.h"
#include "../memory/mem.h"

size_t zt_lm_rows_floats(size_t rows, int V, int C, int keep)
{
    return rows * ((size_t)V * (keep ? 2 : 1) + (keep ? 0 : 2 * (size_t)C));
}

int zt_lm_rows_size(zt_lm_rows *h, size_t rows, size_t most, int V, int C, int keep)
{
    size_t need = zt_lm_rows_floats(rows, V, C, keep);
    if (need > h->floats) {
        size_t cap = zt_lm_rows_floats(most, V, C, keep);
        size_t want = need + need / 4 < cap ? need + need / 4 : need; /* room to vary */
        zt_lm_rows_free(h);
        if (!(h->buf = zt_mem_alloc_in(h->acct, (want ? want : 1) * sizeof(float), ZT_ALIGN_PAGE,
                                       ZT_MEM_ACTIVATIONS)))
            return ZT_E_NOMEM;
        h->floats = want ? want : 1;
    }
    h->logits = h->buf;
    h->dlogits = keep ? h->buf + rows * (size_t)V : h->buf;
    h->x = keep ? NULL : h->buf + rows * (size_t)V;
    h->dx = keep ? NULL : h->x + rows * (size_t)C;
    return 0;
}

void zt_lm_rows_free(zt_lm_rows *h)
{
    zt_mem_free_in(h->acct, h->buf, h->floats * sizeof(float), ZT_MEM_ACTIVATIONS);
    h->buf = NULL;
    h->floats = 0;
}
