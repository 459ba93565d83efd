/* store.h - fixed-size blobs (a unit's shard of parameters, a slice of optimizer state, an
 * activation checkpoint) placed in a RAM pool or in a swap file on NVMe (offload/uring.h).
 *
 * A blob is declared once with its size and memory category; its slot in the swap file is
 * fixed (4096-aligned, so any size round-trips byte-exact). put writes back asynchronously,
 * prefetch reads ahead into the caller's buffer, get returns once the caller's buffer holds
 * the blob (waiting only for what is not there yet), drop forgets the contents. Operations
 * on one blob are ordered (a get after a put reads what was put); operations on different
 * blobs overlap. Not thread-safe: one store belongs to one thread. */
#ifndef ZT_OFFLOAD_STORE_H
#define ZT_OFFLOAD_STORE_H

#include "uring.h"
#include "../memory/mem.h"

#include <stddef.h>
#include <stdint.h>

typedef struct zt_store zt_store;

typedef enum zt_store_device { ZT_STORE_RAM = 1, ZT_STORE_NVME = 2 } zt_store_device;

typedef struct zt_store_opts {
    zt_store_device device;
    const char *dir;          /* NVMe: the folder of the swap file (nvme_path) */
    const char *tag;          /* distinguishes the swap files of one process (rank, purpose) */
    zt_io_opts io;            /* NVMe: the queue (aio settings) */
    zt_mem_account *acct;     /* the RAM pool's blobs and the queue's buffers are counted
                               * there too (an engine's), or NULL */
} zt_store_opts;

void zt_store_opts_init(zt_store_opts *o);
int zt_store_open(zt_store **out, const zt_store_opts *o);
/* Waits for outstanding transfers, frees everything; the swap file is already unlinked. */
void zt_store_close(zt_store *s);

/* Declares a blob of `bytes`; returns its id (>= 0) or a negative error. NVMe: the file
 * space is reserved now (ENOSPC here, not in the middle of a step) unless io.reserve was 0
 * and the blobs are declared after open -- see zt_store_reserve. */
int zt_store_add(zt_store *s, size_t bytes, int category);
/* NVMe: reserves the file space of every declared blob (posix_fallocate); fails with the
 * path and the bytes needed when the filesystem is too small. */
int zt_store_reserve(zt_store *s);

/* Write back: src must stay valid and unchanged until zt_store_wait(s, id) (RAM: copied at
 * once). */
int zt_store_put(zt_store *s, int id, const void *src);
/* Read ahead into dst (valid until the matching get or wait). */
int zt_store_prefetch(zt_store *s, int id, void *dst);
/* dst holds the blob on return: waits for a prefetch into the same dst, else reads. */
int zt_store_get(zt_store *s, int id, void *dst);
/* Waits for the blob's outstanding put or prefetch. */
int zt_store_wait(zt_store *s, int id);
/* The contents are no longer needed: a get before the next put is an error. */
int zt_store_drop(zt_store *s, int id);
/* Waits for every outstanding transfer. */
int zt_store_sync(zt_store *s);
/* Lets transfers advance without blocking (call between kernels). */
int zt_store_poll(zt_store *s);

size_t zt_store_blob_bytes(const zt_store *s, int id);

typedef struct zt_store_stats {
    zt_store_device device;
    zt_io_stats io;                      /* NVMe queue (zero for RAM) */
    size_t resident[8];                  /* RAM pool bytes held, by memory category */
    size_t file_bytes;                   /* NVMe: slot bytes of every declared blob */
    uint64_t read_bytes[8], written_bytes[8]; /* by category */
    double wait_seconds[8];              /* time get/wait blocked, by category */
} zt_store_stats;

void zt_store_get_stats(const zt_store *s, zt_store_stats *st);

#endif
