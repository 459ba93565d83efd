/* comm.h - the engine's view of its communicator. The only library code that calls MPI
 * lives in comm.c. Collectives are blocking in this version; overlap with compute comes
 * with the stage-2/3 work. */
#ifndef ZT_ENGINE_COMM_H
#define ZT_ENGINE_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

enum { ZT_COLL_REDUCE_SCATTER = 0, ZT_COLL_ALLGATHER, ZT_COLL_OTHER, ZT_COLL_KINDS };

typedef struct zt_watchdog zt_watchdog;

typedef struct zt_comm {
    MPI_Comm comm;   /* our duplicate, MPI_COMM_NULL when running without MPI */
    int rank, size;
    uint64_t seq;    /* collectives issued so far (their sequence numbers) */
    uint64_t calls[ZT_COLL_KINDS], bytes[ZT_COLL_KINDS]; /* bytes: whole-buffer payload */
    double seconds[ZT_COLL_KINDS];
    int check;       /* compare (seq, op, count) across ranks before each collective */
    zt_watchdog *wd; /* NULL: no timeout */
} zt_comm;

/* parent may be MPI_COMM_NULL: one rank, no MPI calls. Otherwise MPI must be initialised;
 * the communicator is duplicated and set to MPI_ERRORS_RETURN. */
int zt_comm_open(zt_comm *c, MPI_Comm parent);
void zt_comm_close(zt_comm *c);

/* shard[n / size] = sum over ranks of this rank's slice of full[n] (n a multiple of size).
 * Open MPI 4.1 takes int counts: larger slices go in chunks. */
int zt_comm_reduce_scatter(zt_comm *c, const float *full, float *shard, size_t n);
/* full[n] = every rank's shard[n / size] in rank order; shard may point into full at this
 * rank's slice (in place). */
int zt_comm_allgather(zt_comm *c, const float *shard, float *full, size_t n);
/* Sum of one double per rank, added in rank order on every rank (deterministic). */
int zt_comm_sum_ordered(zt_comm *c, double x, double *sum);
int zt_comm_sum_i64(zt_comm *c, int64_t *x);
/* Starts the watchdog (timeout > 0 seconds, more than one rank) and the desync check. */
int zt_comm_watch(zt_comm *c, double timeout, int check);

#endif
