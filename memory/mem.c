/* mem.c - the library's buffers, allocated by the library itself and counted by category
 * (current and peak per category, lock-free): mmap for large ones, posix_memalign + memset
 * below that. It links no allocator and never replaces the host's malloc, so libzerotrain can
 * be dlopened into any process (Python with PyTorch); the report adds the heap's own
 * statistics only when the process already runs jemalloc (mallctl found at run time).
 * It does not track small bookkeeping allocations made with plain malloc. */

#include "mem.h"
#include "err.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static _Atomic size_t cur[ZT_MEM_NCAT], peak[ZT_MEM_NCAT];
static _Atomic size_t total_cur, total_peak;

static void raise_peak(_Atomic size_t *pk, size_t now)
{
    size_t old = atomic_load(pk);
    while (now > old && !atomic_compare_exchange_weak(pk, &old, now))
        ;
}

/* The path is chosen by size alone, so zt_mem_free (which gets the size, not the alignment)
 * takes the same one. Large buffers are whole pages of their own: zero-filled by the kernel,
 * resident only once touched, and given back to the system on free. No MAP_NORESERVE: the
 * commit charge stays honest, so under strict overcommit an allocation fails here with a
 * message instead of the process dying when a page is first touched. */
static size_t page_size(void)
{
    static _Atomic size_t pg;
    size_t p = atomic_load(&pg);
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        p = v > 0 ? (size_t)v : 4096u;
        atomic_store(&pg, p);
    }
    return p;
}

static int is_mapped(size_t bytes)
{
    return bytes >= ZT_MEM_MMAP_MIN;
}

/* bytes rounded up to whole pages; 0 when that overflows */
static size_t pages_of(size_t bytes)
{
    size_t pg = page_size();
    return bytes > SIZE_MAX - (pg - 1) ? 0 : (bytes + pg - 1) & ~(pg - 1);
}

/* A mapping of len bytes (whole pages) at an address that is a multiple of align: a larger
 * alignment than the page's maps align more and unmaps the head and tail around it, so the
 * mapping left is exactly [p, p + len) and zt_mem_free unmaps it as such. */
static void *map_aligned(size_t len, size_t align)
{
    size_t pg = page_size(), extra = align > pg ? align - pg : 0;
    unsigned char *m, *p;
    if (len > SIZE_MAX - extra)
        return NULL;
    m = mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    p = (unsigned char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (p > m)
        munmap(m, (size_t)(p - m));
    if (m + len + extra > p + len)
        munmap(p + len, (size_t)(m + len + extra - (p + len)));
    return p;
}

void *zt_mem_alloc(size_t bytes, size_t align, int category)
{
    return zt_mem_alloc_in(NULL, bytes, align, category);
}

void zt_mem_free(void *p, size_t bytes, int category) { zt_mem_free_in(NULL, p, bytes, category); }

void *zt_mem_alloc_in(zt_mem_account *a, size_t bytes, size_t align, int category)
{
    void *p = NULL;
    if (category < 0 || category >= ZT_MEM_NCAT)
        category = ZT_MEM_OTHER;
    if (bytes == 0) {
        zt_fail(ZT_E_INVAL, "zero-byte allocation requested");
        return NULL;
    }
    if (align < 16)
        align = 16;
    if (align & (align - 1)) {
        zt_fail(ZT_E_INVAL, "allocation alignment %zu is not a power of two", align);
        return NULL;
    }
    if (is_mapped(bytes)) {
        size_t len = pages_of(bytes);
        p = len ? map_aligned(len, align) : NULL;
    } else if (posix_memalign(&p, align, bytes) == 0) {
        memset(p, 0, bytes);
    } else {
        p = NULL;
    }
    if (!p) {
        zt_fail(ZT_E_NOMEM, "out of memory allocating %zu bytes for %s", bytes,
                zt_memory_category_name(category));
        return NULL;
    }
    raise_peak(&peak[category], atomic_fetch_add(&cur[category], bytes) + bytes);
    raise_peak(&total_peak, atomic_fetch_add(&total_cur, bytes) + bytes);
    if (a)
        raise_peak(&a->peak[category], atomic_fetch_add(&a->current[category], bytes) + bytes);
    return p;
}

void zt_mem_free_in(zt_mem_account *a, void *p, size_t bytes, int category)
{
    if (!p)
        return;
    if (category < 0 || category >= ZT_MEM_NCAT)
        category = ZT_MEM_OTHER;
    atomic_fetch_sub(&cur[category], bytes);
    atomic_fetch_sub(&total_cur, bytes);
    if (a)
        atomic_fetch_sub(&a->current[category], bytes);
    if (is_mapped(bytes))
        munmap(p, pages_of(bytes));
    else
        free(p);
}

const char *zt_memory_category_name(int c)
{
    static const char *const names[ZT_MEM_NCAT] = {
        "params", "grads", "optimizer", "activations", "comm", "io", "other"};
    return (c >= 0 && c < ZT_MEM_NCAT) ? names[c] : "unknown";
}

/* ---- the heap's statistics, when the process's malloc is jemalloc -------------------------
 * Looked up, never linked: mallctl in the global scope, and only if the malloc every library
 * calls is that jemalloc's (a library could carry a private jemalloc; by address it cannot be
 * told, since a non-PIE executable such as python3 makes its PLT entry malloc's address): a
 * malloc of our own must show up in the thread's allocation counter. */
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
static mallctl_fn heap_ctl;
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;

static void heap_find(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "mallctl");
    mallctl_fn ctl;
    uint64_t before = 0, after = 0;
    size_t n = (size_t)64 << 10, sz = sizeof before;
    if (!sym)
        return;
    memcpy(&ctl, &sym, sizeof ctl); /* (object to function pointer, as POSIX has it) */
    if (ctl("thread.allocated", &before, &sz, NULL, 0) != 0)
        return;
    char *volatile p = malloc(n); /* (volatile: the pair must not be optimised away) */
    if (!p)
        return;
    p[0] = 1;
    sz = sizeof after;
    if (ctl("thread.allocated", &after, &sz, NULL, 0) == 0 && after - before >= n)
        heap_ctl = ctl;
    free(p);
}

static size_t heap_stat(const char *name)
{
    size_t v = 0, sz = sizeof v;
    return heap_ctl(name, &v, &sz, NULL, 0) == 0 ? v : 0;
}

const char *zt_memory_heap_source(void)
{
    pthread_once(&heap_once, heap_find);
    return heap_ctl ? "jemalloc" : "none";
}

void zt_memory_report(zt_mem_report *r)
{
    struct rusage ru;
    memset(r, 0, sizeof *r);
    for (int c = 0; c < ZT_MEM_NCAT; c++) {
        r->current[c] = atomic_load(&cur[c]);
        r->peak[c] = atomic_load(&peak[c]);
    }
    r->total_current = atomic_load(&total_cur);
    r->total_peak = atomic_load(&total_peak);
    pthread_once(&heap_once, heap_find);
    if (heap_ctl) {
        uint64_t epoch = 1;
        size_t esz = sizeof epoch;
        heap_ctl("epoch", &epoch, &esz, &epoch, esz); /* refresh jemalloc's cached stats */
        r->jemalloc_allocated = heap_stat("stats.allocated");
        r->jemalloc_resident = heap_stat("stats.resident");
    }
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        r->peak_rss = (size_t)ru.ru_maxrss * 1024u;
}
