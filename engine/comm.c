/* comm.c - duplicates the caller's communicator with MPI_ERRORS_RETURN and maps MPI
 * failures to ZT_E_MPI with MPI_Error_string. Never calls MPI_Init or MPI_Finalize. */
#include "comm.h"
#include "../common/err.h"

#include <string.h>

static int mpi_fail(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        len = 0;
    msg[len] = '\0';
    return zt_fail(ZT_E_MPI, "%s failed: %s", what, msg);
}

int zt_comm_open(zt_comm *c, MPI_Comm parent)
{
    int inited = 0, finalized = 0, rc;
    memset(c, 0, sizeof *c);
    c->comm = MPI_COMM_NULL;
    c->rank = 0;
    c->size = 1;
    if (parent == MPI_COMM_NULL)
        return 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized)
        return zt_fail(ZT_E_INVAL, "a communicator was given but MPI is not initialised "
                                   "(call MPI_Init first, or pass MPI_COMM_NULL)");
    if ((rc = MPI_Comm_dup(parent, &c->comm)) != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Comm_dup");
    if ((rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank(c->comm, &c->rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(c->comm, &c->size)) != MPI_SUCCESS) {
        MPI_Comm_free(&c->comm);
        return mpi_fail(rc, "setting up the communicator");
    }
    return 0;
}

void zt_comm_close(zt_comm *c)
{
    int finalized = 0;
    if (c->comm == MPI_COMM_NULL)
        return;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&c->comm);
    c->comm = MPI_COMM_NULL;
}

#define CHUNK ((size_t)1 << 28) /* floats per collective: well below INT_MAX */

static void account(zt_comm *c, int kind, size_t bytes, double t0)
{
    c->seq++;
    c->calls[kind]++;
    c->bytes[kind] += bytes;
    c->seconds[kind] += MPI_Wtime() - t0;
}

int zt_comm_reduce_scatter(zt_comm *c, const float *full, float *shard, size_t n)
{
    size_t s = n / (size_t)c->size;
    int rc;
    if (c->size == 1) {
        if (shard != full)
            memcpy(shard, full, n * sizeof(float));
        return 0;
    }
    if (s > CHUNK) /* a unit above 2^28 floats per shard: split units first (ZeRO buckets) */
        return zt_fail(ZT_E_UNSUPPORTED, "shards above %zu floats are not supported yet",
                       (size_t)CHUNK);
    double t0 = MPI_Wtime();
    rc = MPI_Reduce_scatter_block(full, shard, (int)s, MPI_FLOAT, MPI_SUM, c->comm);
    account(c, ZT_COLL_REDUCE_SCATTER, n * sizeof(float), t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Reduce_scatter_block");
}

int zt_comm_allgather(zt_comm *c, const float *shard, float *full, size_t n)
{
    size_t s = n / (size_t)c->size;
    int rc;
    if (c->size == 1) {
        if (shard != full)
            memcpy(full, shard, n * sizeof(float));
        return 0;
    }
    if (s > CHUNK)
        return zt_fail(ZT_E_UNSUPPORTED, "shards above %zu floats are not supported yet",
                       (size_t)CHUNK);
    double t0 = MPI_Wtime();
    if (shard == full + (size_t)c->rank * s)
        rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, full, (int)s, MPI_FLOAT, c->comm);
    else
        rc = MPI_Allgather(shard, (int)s, MPI_FLOAT, full, (int)s, MPI_FLOAT, c->comm);
    account(c, ZT_COLL_ALLGATHER, n * sizeof(float), t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Allgather");
}

int zt_comm_gather(zt_comm *c, const float *shard, float *full, size_t n)
{
    size_t s = n / (size_t)c->size;
    int rc;
    if (c->size == 1) {
        if (full && shard != full)
            memcpy(full, shard, n * sizeof(float));
        return 0;
    }
    if (s > CHUNK)
        return zt_fail(ZT_E_UNSUPPORTED, "shards above %zu floats are not supported yet",
                       (size_t)CHUNK);
    double t0 = MPI_Wtime();
    rc = MPI_Gather(shard, (int)s, MPI_FLOAT, full, (int)s, MPI_FLOAT, 0, c->comm);
    account(c, ZT_COLL_OTHER, n * sizeof(float), t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Gather");
}

int zt_comm_sum_ordered(zt_comm *c, double x, double *sum)
{
    double buf[1024];
    int rc;
    if (c->size == 1) {
        *sum = x;
        return 0;
    }
    if (c->size > 1024)
        return zt_fail(ZT_E_UNSUPPORTED, "more than 1024 ranks");
    double t0 = MPI_Wtime();
    rc = MPI_Allgather(&x, 1, MPI_DOUBLE, buf, 1, MPI_DOUBLE, c->comm);
    account(c, ZT_COLL_OTHER, sizeof(double) * (size_t)c->size, t0);
    if (rc != MPI_SUCCESS)
        return mpi_fail(rc, "MPI_Allgather");
    *sum = 0.0;
    for (int r = 0; r < c->size; r++)
        *sum += buf[r];
    return 0;
}

int zt_comm_sum_i64(zt_comm *c, int64_t *x)
{
    int rc;
    if (c->size == 1)
        return 0;
    double t0 = MPI_Wtime();
    rc = MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INT64_T, MPI_SUM, c->comm);
    account(c, ZT_COLL_OTHER, sizeof *x, t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Allreduce");
}

int zt_comm_barrier(zt_comm *c)
{
    int rc;
    if (c->size == 1)
        return 0;
    double t0 = MPI_Wtime();
    rc = MPI_Barrier(c->comm);
    account(c, ZT_COLL_OTHER, 0, t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Barrier");
}
