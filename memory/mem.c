/* mem.c - allocation accounting (current and peak per category, lock-free) on top of
 * jemalloc's mallocx in an arena of our own, so a host process's malloc is left alone.
 * It does not track small bookkeeping allocations made with plain malloc. */

#include "mem.h"
#include "err.h"

#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>

static _Atomic size_t cur[ZT_MEM_NCAT], peak[ZT_MEM_NCAT];
static _Atomic size_t total_cur, total_peak;
static unsigned arena;
static int arena_ok;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void arena_init(void)
{
    size_t sz = sizeof arena;
    arena_ok = mallctl("arenas.create", &arena, &sz, NULL, 0) == 0;
}

static void raise_peak(_Atomic size_t *pk, size_t now)
{
    size_t old = atomic_load(pk);
    while (now > old && !atomic_compare_exchange_weak(pk, &old, now))
        ;
}

static int flags_for(size_t align)
{
    int f = MALLOCX_ALIGN(align) | MALLOCX_ZERO | MALLOCX_TCACHE_NONE;
    if (arena_ok)
        f |= MALLOCX_ARENA(arena);
    return f;
}

void *zt_mem_alloc(size_t bytes, size_t align, int category)
{
    void *p;
    if (category < 0 || category >= ZT_MEM_NCAT)
        category = ZT_MEM_OTHER;
    if (bytes == 0) {
        zt_fail(ZT_E_INVAL, "zero-byte allocation requested");
        return NULL;
    }
    if (align < 16)
        align = 16;
    pthread_once(&arena_once, arena_init);
    p = mallocx(bytes, flags_for(align));
    if (!p) {
        zt_fail(ZT_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes,
                zt_memory_category_name(category));
        return NULL;
    }
    raise_peak(&peak[category], atomic_fetch_add(&cur[category], bytes) + bytes);
    raise_peak(&total_peak, atomic_fetch_add(&total_cur, bytes) + bytes);
    return p;
}

void zt_mem_free(void *p, size_t bytes, int category)
{
    if (!p)
        return;
    if (category < 0 || category >= ZT_MEM_NCAT)
        category = ZT_MEM_OTHER;
    atomic_fetch_sub(&cur[category], bytes);
    atomic_fetch_sub(&total_cur, bytes);
    dallocx(p, arena_ok ? (MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE) : MALLOCX_TCACHE_NONE);
}

const char *zt_memory_category_name(int c)
{
    static const char *const names[ZT_MEM_NCAT] = {
        "params", "grads", "optimizer", "activations", "comm", "io", "other"};
    return (c >= 0 && c < ZT_MEM_NCAT) ? names[c] : "unknown";
}

static size_t je_stat(const char *name)
{
    size_t v = 0, sz = sizeof v;
    return mallctl(name, &v, &sz, NULL, 0) == 0 ? v : 0;
}

void zt_memory_report(zt_mem_report *r)
{
    struct rusage ru;
    uint64_t epoch = 1;
    size_t esz = sizeof epoch;
    memset(r, 0, sizeof *r);
    for (int c = 0; c < ZT_MEM_NCAT; c++) {
        r->current[c] = atomic_load(&cur[c]);
        r->peak[c] = atomic_load(&peak[c]);
    }
    r->total_current = atomic_load(&total_cur);
    r->total_peak = atomic_load(&total_peak);
    mallctl("epoch", &epoch, &esz, &epoch, esz); /* refresh jemalloc's cached stats */
    r->jemalloc_allocated = je_stat("stats.allocated");
    r->jemalloc_resident = je_stat("stats.resident");
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        r->peak_rss = (size_t)ru.ru_maxrss * 1024u;
}
