/* lmrows.c - sizing the LM head's row buffer (lmrows.h), counted as activations. */
#include "lmrows.h"
#include "../common/half.h"
#include "../common/err.h"
#include "../memory/mem.h"

/* the pieces' bytes, each 64-byte aligned */
static size_t al(size_t b) { return (b + 63) / 64 * 64; }

size_t zt_lm_rows_bytes(size_t rows, int V, int C, int keep, size_t es)
{
    if (keep)
        return 2 * al(rows * (size_t)V * sizeof(float));
    return al(rows * (size_t)V * es) + al(rows * (size_t)C * es) +
           al(rows * (size_t)C * sizeof(float));
}

int zt_lm_rows_size(zt_lm_rows *h, size_t rows, size_t most, int V, int C, int keep,
                    size_t es)
{
    size_t need = zt_lm_rows_bytes(rows, V, C, keep, es);
    if (need > h->bytes) {
        size_t cap = zt_lm_rows_bytes(most, V, C, keep, es);
        size_t want = need + need / 4 < cap ? need + need / 4 : need; /* room to vary */
        zt_lm_rows_free(h);
        if (!(h->buf = zt_mem_alloc_in(h->acct, want ? want : 64, ZT_ALIGN_PAGE,
                                       ZT_MEM_ACTIVATIONS)))
            return ZT_E_NOMEM;
        h->bytes = want ? want : 64;
    }
    char *b = h->buf;
    h->logits = b;
    if (keep) {
        h->dlogits = b + al(rows * (size_t)V * sizeof(float));
        h->x = NULL;
        h->dx = NULL;
        return 0;
    }
    h->dlogits = b;
    h->x = b + al(rows * (size_t)V * es);
    h->dx = (float *)((char *)h->x + al(rows * (size_t)C * es));
    return 0;
}

const float *zt_lm_rows_widen(zt_lm_rows *h, int dt, size_t n)
{
    if (n > h->wide_n) {
        zt_mem_free_in(h->acct, h->wide, h->wide_n * sizeof(float), ZT_MEM_ACTIVATIONS);
        h->wide_n = 0;
        if (!(h->wide = zt_mem_alloc_in(h->acct, n * sizeof(float), ZT_ALIGN_PAGE,
                                        ZT_MEM_ACTIVATIONS)))
            return NULL;
        h->wide_n = n;
    }
    zt_half_widen(dt, h->wide, h->logits, n);
    return h->wide;
}

void zt_lm_rows_free(zt_lm_rows *h)
{
    zt_mem_free_in(h->acct, h->buf, h->bytes, ZT_MEM_ACTIVATIONS);
    zt_mem_free_in(h->acct, h->wide, h->wide_n * sizeof(float), ZT_MEM_ACTIVATIONS);
    h->buf = NULL;
    h->bytes = 0;
    h->wide = NULL;
    h->wide_n = 0;
}
