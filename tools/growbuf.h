/* growbuf.h - the one growing-array helper of the command's parsers and tokenizers: *buf of
 * *cap elements of elem bytes made room for need, doubling (from 64), never shrinking. */
#ifndef ZT_TOOLS_GROWBUF_H
#define ZT_TOOLS_GROWBUF_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* 0, or -ENOMEM (then *buf and *cap are as they were) */
static inline int grow_buf(void **buf, size_t *cap, size_t need, size_t elem)
{
    size_t c = *cap ? *cap : 64;
    void *g;
    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / elem || !(g = realloc(*buf, c * elem)))
        return -ENOMEM;
    *buf = g;
    *cap = c;
    return 0;
}

#endif
