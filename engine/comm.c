/* comm.c - duplicates the caller's communicator with MPI_ERRORS_RETURN and maps MPI
 * failures to ZT_E_MPI with MPI_Error_string. Never calls MPI_Init or MPI_Finalize. */
#include "comm.h"
#include "../common/err.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- hang protection ------------------------------------------------------------------
 * A collective that never completes cannot be returned from. The watchdog thread notices
 * one that has been in flight longer than the timeout, logs rank, sequence number,
 * operation and count, and calls the hang handler (default: MPI_Abort). */

static zt_hang_fn hang_fn;
static void *hang_user;

void zt_hang_handler_set(zt_hang_fn fn, void *user)
{
    hang_fn = fn;
    hang_user = user;
}

static void hang(zt_comm *c, const char *msg)
{
    int level = 0;
    zt_log(ZT_LOG_ERROR, "%s", msg);
    if (hang_fn) {
        hang_fn(msg, hang_user);
        return;
    }
    /* MPI_Abort from this thread needs MPI_THREAD_MULTIPLE; otherwise leave at once and let
     * the launcher take the other ranks down */
    MPI_Query_thread(&level);
    if (level == MPI_THREAD_MULTIPLE)
        MPI_Abort(c->comm, 75);
    _exit(75);
}

struct zt_watchdog {
    pthread_t thread;
    pthread_mutex_t lock;
    zt_comm *c;
    double timeout;
    int stop, inflight;
    uint64_t seq;
    const char *op;
    size_t count;
    struct timespec start;
};

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static void *watch(void *arg)
{
    zt_watchdog *w = arg;
    for (;;) {
        char msg[256] = "";
        struct timespec nap = {0, 100 * 1000 * 1000};
        pthread_mutex_lock(&w->lock);
        if (w->stop) {
            pthread_mutex_unlock(&w->lock);
            return NULL;
        }
        if (w->inflight && since(&w->start) > w->timeout)
            snprintf(msg, sizeof msg, "rank %d: collective #%llu (%s of %zu floats) did not "
                     "complete within %.0f s: another rank is stalled or out of step",
                     w->c->rank, (unsigned long long)w->seq, w->op, w->count, w->timeout);
        pthread_mutex_unlock(&w->lock);
        if (msg[0]) {
            hang(w->c, msg);
            return NULL;
        }
        nanosleep(&nap, NULL);
    }
}

int zt_comm_watch(zt_comm *c, double timeout, int check)
{
    c->check = check && c->size > 1;
    if (!(timeout > 0.0) || c->size == 1 || c->wd)
        return 0;
    if (!(c->wd = calloc(1, sizeof *c->wd)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    c->wd->c = c;
    c->wd->timeout = timeout;
    pthread_mutex_init(&c->wd->lock, NULL);
    if (pthread_create(&c->wd->thread, NULL, watch, c->wd) != 0) {
        pthread_mutex_destroy(&c->wd->lock);
        free(c->wd);
        c->wd = NULL;
        return zt_fail(ZT_E_NOMEM, "cannot start the collective watchdog thread");
    }
    return 0;
}

static void unwatch(zt_comm *c)
{
    if (!c->wd)
        return;
    pthread_mutex_lock(&c->wd->lock);
    c->wd->stop = 1;
    pthread_mutex_unlock(&c->wd->lock);
    pthread_join(c->wd->thread, NULL);
    pthread_mutex_destroy(&c->wd->lock);
    free(c->wd);
    c->wd = NULL;
}

static void inflight(zt_comm *c, int on, const char *op, size_t count)
{
    if (!c->wd)
        return;
    pthread_mutex_lock(&c->wd->lock);
    c->wd->inflight = on;
    c->wd->seq = c->seq;
    c->wd->op = op;
    c->wd->count = count;
    clock_gettime(CLOCK_MONOTONIC, &c->wd->start);
    pthread_mutex_unlock(&c->wd->lock);
}

/* Before collective c->seq: tests inject a stalled rank (ZT_FAULT_STALL="rank:seq"); the
 * desync check compares (seq, op, count) across ranks. */
static void begin(zt_comm *c, int op, const char *name, size_t count)
{
    const char *stall = getenv("ZT_FAULT_STALL");
    int r = -1;
    unsigned long long s = 0;
    if (stall && sscanf(stall, "%d:%llu", &r, &s) == 2 && r == c->rank && s == c->seq)
        for (;;)
            sleep(1);
    if (c->check) {
        uint64_t mine[3] = {c->seq, (uint64_t)op, count}, *all = malloc(24 * (size_t)c->size);
        inflight(c, 1, "desync check", 3);
        if (all && MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, c->comm) ==
                       MPI_SUCCESS)
            for (int k = 0; k < c->size; k++)
                if (memcmp(all + 3 * k, mine, sizeof mine) != 0) {
                    static const char *const names[] = {"reduce-scatter", "all-gather", "other"};
                    char msg[400];
                    snprintf(msg, sizeof msg, "collectives out of step: rank %d is at #%llu "
                             "(%s of %llu floats), rank %d at #%llu (%s of %llu floats)",
                             c->rank, (unsigned long long)mine[0], name,
                             (unsigned long long)mine[2], k, (unsigned long long)all[3 * k],
                             names[all[3 * k + 1] < 3 ? all[3 * k + 1] : 2],
                             (unsigned long long)all[3 * k + 2]);
                    inflight(c, 0, NULL, 0);
                    free(all);
                    hang(c, msg);
                    return;
                }
        inflight(c, 0, NULL, 0);
        free(all);
    }
    inflight(c, 1, name, count);
}

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
    unwatch(c);
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
    inflight(c, 0, NULL, 0);
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
    begin(c, ZT_COLL_REDUCE_SCATTER, "reduce-scatter", n);
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
    begin(c, ZT_COLL_ALLGATHER, "all-gather", n);
    double t0 = MPI_Wtime();
    if (shard == full + (size_t)c->rank * s)
        rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, full, (int)s, MPI_FLOAT, c->comm);
    else
        rc = MPI_Allgather(shard, (int)s, MPI_FLOAT, full, (int)s, MPI_FLOAT, c->comm);
    account(c, ZT_COLL_ALLGATHER, n * sizeof(float), t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Allgather");
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
    begin(c, ZT_COLL_OTHER, "sum", 1);
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
    begin(c, ZT_COLL_OTHER, "sum", 1);
    double t0 = MPI_Wtime();
    rc = MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INT64_T, MPI_SUM, c->comm);
    account(c, ZT_COLL_OTHER, sizeof *x, t0);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "MPI_Allreduce");
}

