/* comm.h - the engine's view of its communicator. The only library code that calls MPI
 * lives in comm.c.
 *
 * Collectives are non-blocking: a start function returns a handle, zt_comm_wait completes
 * it. Open MPI advances a non-blocking collective only inside MPI calls, so something must
 * call into MPI while the engine computes: either the engine polls (zt_comm_poll between
 * kernels, ZT_PROGRESS_POLL) or a progress thread tests the open requests
 * (ZT_PROGRESS_THREAD, needs MPI_THREAD_MULTIPLE). Every collective gets the next sequence
 * number when it starts; the watchdog times how long a wait blocks. */
#ifndef ZT_ENGINE_COMM_H
#define ZT_ENGINE_COMM_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "zerotrain.h"

enum { ZT_COLL_REDUCE_SCATTER = 0, ZT_COLL_ALLGATHER, ZT_COLL_OTHER, ZT_COLL_KINDS };

/* floats in one rank's slice of one collective: Open MPI 4.1 takes int counts */
#define ZT_COMM_MAX_SLICE ((size_t)1 << 28)
#define ZT_COMM_MAXREQ 64

typedef struct zt_watchdog zt_watchdog;
typedef struct zt_progress zt_progress;

typedef struct zt_comm_req {
    MPI_Request req;
    int kind, used, done, rc;
    uint64_t seq;
    size_t count;              /* floats in the whole buffer */
    double started;            /* MPI_Wtime at the start */
    int hdt;                   /* a 16-bit reduce-scatter's ZT_HALF_* (else -1): widened in
                                * place when it is waited for */
    float *hfull, *hshard;
} zt_comm_req;

typedef struct zt_comm {
    MPI_Comm comm;   /* our duplicate, MPI_COMM_NULL when running without MPI */
    int rank, size;
    uint64_t seq;    /* collectives started so far (their sequence numbers) */
    uint64_t calls[ZT_COLL_KINDS], bytes[ZT_COLL_KINDS]; /* bytes: whole-buffer payload */
    double seconds[ZT_COLL_KINDS];  /* time spent blocked waiting (exposed communication) */
    double flight[ZT_COLL_KINDS];   /* time from start to observed completion */
    int check;       /* compare (seq, op, count) across ranks before each collective */
    int mode;        /* ZT_PROGRESS_* in effect */
    zt_watchdog *wd; /* NULL: no timeout */
    zt_progress *pt; /* the progress thread (ZT_PROGRESS_THREAD) */
    pthread_mutex_t lock; /* guards reqs against the progress thread */
    zt_comm_req reqs[ZT_COMM_MAXREQ];
    int open;        /* requests started and not yet waited for */
    int64_t stall_seq; /* tests (zt_fault_hooks): stall before this collective, -1 = never */
} zt_comm;

/* parent may be MPI_COMM_NULL: one rank, no MPI calls. Otherwise MPI must be initialised;
 * the communicator is duplicated and set to MPI_ERRORS_RETURN. */
int zt_comm_open(zt_comm *c, MPI_Comm parent);
void zt_comm_close(zt_comm *c);
/* Starts the watchdog (timeout > 0 seconds, more than one rank), the desync check and the
 * progress mode (THREAD falls back to POLL, with a notice, without MPI_THREAD_MULTIPLE). */
int zt_comm_watch(zt_comm *c, double timeout, int check, int progress);

/* Start a collective; *h receives its sequence number, the handle for zt_comm_wait (-1:
 * already complete, e.g. one rank). The buffers must stay untouched until the wait returns.
 * reduce-scatter: shard[n / size] = sum over ranks of this rank's slice of full[n];
 * all-gather: full[n] = every rank's shard[n / size] in rank order (shard may point at this
 * rank's slice of full: in place). n is a multiple of size and n / size <=
 * ZT_COMM_MAX_SLICE: callers split larger buffers (the engine's pieces). */
int zt_comm_start_reduce_scatter(zt_comm *c, const float *full, float *shard, size_t n,
                                 int64_t *h);
int zt_comm_start_allgather(zt_comm *c, const float *shard, float *full, size_t n, int64_t *h);
/* the same over 16-bit elements (half-precision parameters) */
/* The reduce-scatter in 16 bits (dt: ZT_HALF_BF16 or _F16; half the bytes): full's n floats
 * must be values of that dtype (rounded already). They are narrowed in place into full's
 * first half and summed pairwise in fp32, each partial sum rounded to nearest even (as a
 * 16-bit all-reduce sums); zt_comm_wait widens both buffers back in place, so full is
 * unchanged and shard holds floats again. Neither may be touched before the wait. */
int zt_comm_start_reduce_scatter16(zt_comm *c, int dt, float *full, float *shard, size_t n,
                                   int64_t *h);
int zt_comm_start_allgather16(zt_comm *c, const uint16_t *shard, uint16_t *full, size_t n,
                              int64_t *h);
/* Blocks until collective number h completes (h < 0, or already waited for: returns at
 * once). */
int zt_comm_wait(zt_comm *c, int64_t h);
/* Waits for collectives lo..hi (a unit's pieces, started back to back). */
int zt_comm_wait_range(zt_comm *c, int64_t lo, int64_t hi);
/* Waits for every open collective. */
int zt_comm_wait_all(zt_comm *c);
/* Lets open collectives advance (POLL mode: MPI_Test on each; THREAD mode: nothing). Cheap
 * when nothing is open; safe to call between any two kernels. */
void zt_comm_poll(zt_comm *c);

/* Blocking forms: start + wait. */
int zt_comm_reduce_scatter(zt_comm *c, const float *full, float *shard, size_t n);
int zt_comm_allgather(zt_comm *c, const float *shard, float *full, size_t n);
int zt_comm_allgather16(zt_comm *c, const uint16_t *shard, uint16_t *full, size_t n);
/* Sum of one double per rank, added in rank order on every rank (deterministic). */
int zt_comm_sum_ordered(zt_comm *c, double x, double *sum);
int zt_comm_sum_i64(zt_comm *c, int64_t *x);
/* x[0..n) summed over ranks, in place */
int zt_comm_sum_i64_n(zt_comm *c, int64_t *x, size_t n);
/* all[r * n .. r * n + n) = rank r's n bytes at x, on every rank */
int zt_comm_gather_bytes(zt_comm *c, const void *x, void *all, size_t n);
/* Agreement (collective): every rank's status (rc, with zt_last_error() when rc < 0) is
 * shared; if any rank failed, every rank returns a failure, the ranks that did not fail with
 * "rank R: <its message>" of the lowest failing rank. Then, if settings (key=value lines)
 * is not NULL, every rank's settings are compared with rank 0's: on a difference every rank
 * returns ZT_E_CONFIG naming the first differing key and both values. One rank: rc. */
int zt_comm_agree(zt_comm *c, int rc, const char *settings);
/* all[r * n + j] = rank r's x[j] on every rank (n doubles each). */
int zt_comm_gather_d(zt_comm *c, const double *x, double *all, size_t n);

#endif
