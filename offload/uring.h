/* uring.h - one asynchronous I/O queue over one swap file: io_uring (liburing) with O_DIRECT
 * and a bounded pool of registered, aligned staging buffers; or, where io_uring cannot be
 * used, a small pool of threads doing pread/pwrite.
 *
 * A transfer (zt_io_read / zt_io_write) names a caller buffer of any size and alignment and a
 * file offset that is a multiple of ZT_IO_ALIGN. It is cut into block_size pieces; each piece
 * is copied through one staging buffer (so the file only ever sees aligned, whole-4096
 * transfers; a partial last block is zero-padded on write), with at most queue_depth pieces
 * in flight. Every completion is checked: short transfers are continued, -EAGAIN / -EINTR /
 * -EBUSY resubmitted (bounded), -ENOMEM shrinks the depth; anything else (EIO, ENOSPC, ...)
 * fails the transfer with the path, the offset and the byte count.
 *
 * Not thread-safe: one queue belongs to one thread (the engine's). */
#ifndef ZT_OFFLOAD_URING_H
#define ZT_OFFLOAD_URING_H

#include <stddef.h>
#include <stdint.h>

#define ZT_IO_ALIGN 4096

typedef struct zt_io zt_io;

/* ZT_IO_URING: one ring driven by the caller's thread; ZT_IO_URING_THREADS: one ring per I/O
 * thread (aio.intra_op_parallelism > 1), each taking pieces from a shared queue;
 * ZT_IO_THREADS: the pread/pwrite fallback */
typedef enum zt_io_backend { ZT_IO_URING = 0, ZT_IO_THREADS, ZT_IO_URING_THREADS } zt_io_backend;

/* Test hooks: a fault layer between the kernel and the queue's completion handling. `res` is
 * what the kernel returned for a piece of `len` bytes; the hook returns what the queue should
 * see (a short count, -EAGAIN, -EIO, ...). The data the kernel moved stays moved. */
typedef int (*zt_io_fault_fn)(void *arg, int is_write, uint64_t off, size_t len, int res);

typedef struct zt_io_opts {
    size_t block_size;        /* bytes per piece, a multiple of 4096 (DeepSpeed aio: 1 MiB) */
    int queue_depth;          /* pieces in flight (aio.queue_depth: 8) */
    int buffer_count;         /* staging buffers (>= queue_depth; 0: queue_depth) */
    int direct;               /* 1 require O_DIRECT, 0 try it (buffered with a warning), -1 off */
    int threads_only;         /* 1: skip io_uring, use the thread pool */
    int io_threads;           /* aio.intra_op_parallelism: > 1 = that many threads, a ring each */
    int single_submit;        /* aio.single_submit: submit each piece on its own */
    int no_overlap;           /* !aio.overlap_events: a new wave of pieces starts only when
                               * none is in flight */
    size_t reserve;           /* bytes to preallocate in the file (0: grow as written) */
    struct zt_mem_account *acct; /* the staging buffers are counted there too, or NULL */
    /* tests only */
    zt_io_fault_fn fault;
    void *fault_arg;
    int fault_open_einval;    /* the O_DIRECT open fails with EINVAL (a filesystem refusing) */
    int fault_setup_errno;    /* io_uring_queue_init fails with this errno (ENOSYS, EPERM) */
    int fault_register_errno; /* buffer registration fails with this errno (ENOMEM: memlock) */
} zt_io_opts;

void zt_io_opts_init(zt_io_opts *o);

/* Creates the swap file `dir`/zerotrain-<pid>-<tag>.swap, unlinks it at once (nothing is
 * left behind, even after SIGKILL) and probes O_DIRECT with one aligned write and read. */
int zt_io_open(zt_io **out, const char *dir, const char *tag, const zt_io_opts *o);
void zt_io_close(zt_io *io);

/* Start a transfer; returns a ticket (> 0) or a negative ZT_E code. The buffer must stay
 * valid (and, for writes, unchanged) until the ticket completes. */
int64_t zt_io_write(zt_io *io, const void *buf, size_t len, uint64_t off);
int64_t zt_io_read(zt_io *io, void *buf, size_t len, uint64_t off);
/* Wait for a ticket (and every earlier one); 0 or the first error of that ticket. */
int zt_io_wait(zt_io *io, int64_t ticket);
/* Advance without blocking: reap completions, submit what waits for a buffer. */
int zt_io_poll(zt_io *io);
/* 1 when the ticket has completed (successfully or not) */
int zt_io_done(const zt_io *io, int64_t ticket);

typedef struct zt_io_stats {
    zt_io_backend backend;
    int direct;               /* O_DIRECT in use */
    int registered;           /* staging buffers registered with the ring */
    uint64_t bytes_read, bytes_written, pieces, retries, short_transfers;
    double wait_seconds;      /* time blocked in zt_io_wait */
} zt_io_stats;

void zt_io_get_stats(const zt_io *io, zt_io_stats *s);
const char *zt_io_path(const zt_io *io);
int zt_io_fd(const zt_io *io);

#endif
