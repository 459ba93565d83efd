/* mem.h - the library's aligned, zero-filled buffers (mmap when large), counted by category.
 * Does not pin, offload or pool memory; callers free what they allocate with its size. */
#ifndef ZT_MEMORY_MEM_H
#define ZT_MEMORY_MEM_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include "zerotrain.h"

#define ZT_ALIGN_CACHE 64u
#define ZT_ALIGN_PAGE 4096u    /* anything that may go through O_DIRECT */
/* from this size on a buffer is a mapping of its own (whole pages, unmapped on free); under
 * AddressSanitizer every buffer comes from malloc instead, whose bounds it checks */
#if defined(__SANITIZE_ADDRESS__)
#define ZT_MEM_MMAP_MIN SIZE_MAX
#else
#define ZT_MEM_MMAP_MIN ((size_t)256 << 10)
#endif

/* The bytes one owner (an engine) holds, per category, counted besides the process's
 * totals: zt_memory_report is the process's, an engine's report its own account. */
typedef struct zt_mem_account {
    _Atomic size_t current[ZT_MEM_NCAT], peak[ZT_MEM_NCAT];
} zt_mem_account;

/* As zt_mem_alloc / zt_mem_free, also counted in a (NULL: the process's totals only). */
void *zt_mem_alloc_in(zt_mem_account *a, size_t bytes, size_t align, int category);
void zt_mem_free_in(zt_mem_account *a, void *p, size_t bytes, int category);

/* Zero-filled, aligned to align (a power of two >= 16), counted in category.
 * Returns NULL (and sets the last error) when bytes is 0 or memory is exhausted. */
void *zt_mem_alloc(size_t bytes, size_t align, int category);
/* p may be NULL; bytes and category must be those given to zt_mem_alloc. */
void zt_mem_free(void *p, size_t bytes, int category);

#endif
