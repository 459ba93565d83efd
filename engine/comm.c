/* comm.c - duplicates the caller's communicator with MPI_ERRORS_RETURN and maps MPI
 * failures to ZT_E_MPI with MPI_Error_string. Never calls MPI_Init or MPI_Finalize. */
#include "comm.h"
#include "../common/err.h"
#include "../common/faults.h"
#include "../common/half.h"
#include "../common/prof.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
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

/* ---- requests ---------------------------------------------------------------------------
 * Up to ZT_COMM_MAXREQ collectives are open at once; starting one more first waits for the
 * oldest. Every MPI_Test on a request happens under c->lock so the progress thread and the
 * engine never test the same request at once. */

enum { OP_RS, OP_AG, OP_AG_INPLACE, OP_GATHER_D, OP_SUM_I64, OP_GATHER_B, OP_AG16,
       OP_AG16_INPLACE, OP_RS_BF16, OP_RS_F16 };

/* ---- 16-bit sums: MPI operations over MPI_UINT16_T holding bf16 / fp16 values ---------- */

static void sum16(int dt, const uint16_t *in, uint16_t *inout, int n)
{
    for (int i = 0; i < n; i++)
        inout[i] = zt_half_of(dt, zt_half_value(dt, in[i]) + zt_half_value(dt, inout[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    sum16(ZT_HALF_BF16, in, inout, *len);
}

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    sum16(ZT_HALF_F16, in, inout, *len);
}

static MPI_Op op16[2] = {MPI_OP_NULL, MPI_OP_NULL};
static pthread_mutex_t op16_lock = PTHREAD_MUTEX_INITIALIZER;

/* the MPI operation of dt's sum (made once per process; MPI_Finalize frees it) */
static int op16_get(int dt, MPI_Op *op)
{
    int rc = MPI_SUCCESS, i = dt == ZT_HALF_F16;
    pthread_mutex_lock(&op16_lock);
    if (op16[i] == MPI_OP_NULL)
        rc = MPI_Op_create(i ? sum_f16 : sum_bf16, 1, &op16[i]);
    *op = op16[i];
    pthread_mutex_unlock(&op16_lock);
    return rc;
}

/* In place, through a small buffer (memcpy: no aliasing between the two views): x's n floats
 * narrowed into its first 2n bytes (forwards: a chunk's 16-bit values land on floats read
 * already), and back (backwards: a chunk's floats land on 16-bit values read already). */
#define INPLACE_CHUNK 512
static void narrow_in_place(int dt, float *x, size_t n)
{
    uint16_t h[INPLACE_CHUNK];
    for (size_t i = 0; i < n; i += INPLACE_CHUNK) {
        size_t k = n - i < INPLACE_CHUNK ? n - i : INPLACE_CHUNK;
        zt_half_narrow(dt, h, x + i, k);
        memcpy((char *)x + 2 * i, h, 2 * k);
    }
}

static void widen_in_place(int dt, float *x, size_t n)
{
    uint16_t h[INPLACE_CHUNK];
    for (size_t end = n; end > 0;) {
        size_t k = end < INPLACE_CHUNK ? end : INPLACE_CHUNK, i = end - k;
        memcpy(h, (const char *)x + 2 * i, 2 * k);
        zt_half_widen(dt, x + i, h, k);
        end = i;
    }
}

static void mark_done(zt_comm *c, zt_comm_req *q, int rc)
{
    q->done = 1;
    q->rc = rc;
    c->flight[q->kind] += MPI_Wtime() - q->started;
}

/* c->lock held */
static void test_open(zt_comm *c)
{
    for (int i = 0; i < ZT_COMM_MAXREQ; i++) {
        zt_comm_req *q = &c->reqs[i];
        int flag = 0, rc;
        if (!q->used || q->done)
            continue;
        rc = MPI_Test(&q->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            mark_done(c, q, rc);
    }
}

void zt_comm_poll(zt_comm *c)
{
    if (c->open == 0 || c->mode != ZT_PROGRESS_POLL)
        return;
    test_open(c);
}

struct zt_progress {
    pthread_t thread;
    pthread_cond_t wake;
    int stop;
};

/* The progress thread: tests the open requests, then naps briefly; sleeps on a condition
 * variable while none is open. */
static void *progress(void *arg)
{
    zt_comm *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        if (c->pt->stop)
            break;
        if (c->open == 0) {
            pthread_cond_wait(&c->pt->wake, &c->lock);
            continue;
        }
        test_open(c);
        pthread_mutex_unlock(&c->lock);
        {
            struct timespec nap = {0, 20 * 1000};
            nanosleep(&nap, NULL);
        }
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static int start_progress(zt_comm *c, int mode)
{
    int level = 0;
    c->mode = ZT_PROGRESS_POLL;
    if (mode != ZT_PROGRESS_THREAD || c->size == 1 || c->pt)
        return 0;
    MPI_Query_thread(&level);
    if (level != MPI_THREAD_MULTIPLE) {
        zt_log(ZT_LOG_INFO, "MPI was initialised without MPI_THREAD_MULTIPLE: communication "
                            "progresses by polling instead of a progress thread");
        return 0;
    }
    if (!(c->pt = calloc(1, sizeof *c->pt)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    pthread_cond_init(&c->pt->wake, NULL);
    if (pthread_create(&c->pt->thread, NULL, progress, c) != 0) {
        pthread_cond_destroy(&c->pt->wake);
        free(c->pt);
        c->pt = NULL;
        return zt_fail(ZT_E_NOMEM, "cannot start the communication progress thread");
    }
    c->mode = ZT_PROGRESS_THREAD;
    return 0;
}

static void stop_progress(zt_comm *c)
{
    if (!c->pt)
        return;
    pthread_mutex_lock(&c->lock);
    c->pt->stop = 1;
    pthread_cond_signal(&c->pt->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->pt->thread, NULL);
    pthread_cond_destroy(&c->pt->wake);
    free(c->pt);
    c->pt = NULL;
}

int zt_comm_watch(zt_comm *c, double timeout, int check, int mode)
{
    c->check = check && c->size > 1;
    ZT_TRY(start_progress(c, mode));
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

static void inflight(zt_comm *c, int on, uint64_t seq, const char *op, size_t count)
{
    if (!c->wd)
        return;
    pthread_mutex_lock(&c->wd->lock);
    c->wd->inflight = on;
    c->wd->seq = seq;
    c->wd->op = op;
    c->wd->count = count;
    clock_gettime(CLOCK_MONOTONIC, &c->wd->start);
    pthread_mutex_unlock(&c->wd->lock);
}

static const char *const kind_names[] = {"reduce-scatter", "all-gather", "sum"};

/* Before collective c->seq: tests inject a stalled rank (zt_fault_hooks.stall_*); the
 * desync check compares (seq, op, count) across ranks. */
static void begin(zt_comm *c, int op, const char *name, size_t count)
{
    if (c->stall_seq >= 0 && (uint64_t)c->stall_seq == c->seq)
        for (;;)
            sleep(1);
    if (c->check) {
        uint64_t mine[3] = {c->seq, (uint64_t)op, count}, *all = malloc(24 * (size_t)c->size);
        inflight(c, 1, c->seq, "desync check", 3);
        if (all && MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, c->comm) ==
                       MPI_SUCCESS)
            for (int k = 0; k < c->size; k++)
                if (memcmp(all + 3 * k, mine, sizeof mine) != 0) {
                    char msg[400];
                    snprintf(msg, sizeof msg, "collectives out of step: rank %d is at #%llu "
                             "(%s of %llu floats), rank %d at #%llu (%s of %llu floats)",
                             c->rank, (unsigned long long)mine[0], name,
                             (unsigned long long)mine[2], k, (unsigned long long)all[3 * k],
                             kind_names[all[3 * k + 1] < 3 ? all[3 * k + 1] : 2],
                             (unsigned long long)all[3 * k + 2]);
                    inflight(c, 0, 0, NULL, 0);
                    free(all);
                    hang(c, msg);
                    return;
                }
        inflight(c, 0, 0, NULL, 0);
        free(all);
    }
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
    pthread_mutex_init(&c->lock, NULL);
    c->comm = MPI_COMM_NULL;
    c->stall_seq = -1;
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
    if (zt_faults()->stall_rank == c->rank) /* tests only: this rank stalls */
        c->stall_seq = (int64_t)zt_faults()->stall_seq;
    return 0;
}

void zt_comm_close(zt_comm *c)
{
    int finalized = 0;
    if (c->comm != MPI_COMM_NULL && c->open > 0)
        zt_comm_wait_all(c);
    stop_progress(c);
    unwatch(c);
    if (c->comm == MPI_COMM_NULL) {
        pthread_mutex_destroy(&c->lock);
        return;
    }
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&c->comm);
    c->comm = MPI_COMM_NULL;
    pthread_mutex_destroy(&c->lock);
}

static void lock(zt_comm *c)
{
    if (c->pt)
        pthread_mutex_lock(&c->lock);
}

static void unlock(zt_comm *c)
{
    if (c->pt)
        pthread_mutex_unlock(&c->lock);
}

static int64_t oldest_open(const zt_comm *c)
{
    int best = -1;
    for (int i = 0; i < ZT_COMM_MAXREQ; i++)
        if (c->reqs[i].used && (best < 0 || c->reqs[i].seq < c->reqs[best].seq))
            best = i;
    return best < 0 ? -1 : (int64_t)c->reqs[best].seq;
}


/* Starts collective `op` as number c->seq; *h = that number. */
static int start(zt_comm *c, int op, const void *in, void *out, size_t n, int64_t *h)
{
    int kind = op == OP_RS || op == OP_RS_BF16 || op == OP_RS_F16 ? ZT_COLL_REDUCE_SCATTER
               : op == OP_AG || op == OP_AG_INPLACE || op == OP_AG16 || op == OP_AG16_INPLACE
                   ? ZT_COLL_ALLGATHER : ZT_COLL_OTHER;
    int slot = -1, rc = MPI_SUCCESS, cnt = (int)(n / (size_t)c->size);
    size_t bytes = op == OP_GATHER_D ? sizeof(double) * (size_t)c->size * n
                   : op == OP_GATHER_B ? (size_t)c->size * n
                   : op == OP_SUM_I64 ? sizeof(int64_t) * n
                   : op == OP_AG16 || op == OP_AG16_INPLACE || op == OP_RS_BF16 ||
                           op == OP_RS_F16 ? n * sizeof(uint16_t)
                   : n * sizeof(float);
    *h = -1;
    if (c->open == ZT_COMM_MAXREQ)
        ZT_TRY(zt_comm_wait(c, oldest_open(c)));
    begin(c, kind, kind_names[kind], n);
    lock(c);
    for (int i = 0; i < ZT_COMM_MAXREQ && slot < 0; i++)
        if (!c->reqs[i].used)
            slot = i;
    zt_comm_req *q = &c->reqs[slot];
    memset(q, 0, sizeof *q);
    q->req = MPI_REQUEST_NULL;
    q->hdt = -1;
    switch (op) {
    case OP_RS:
        rc = MPI_Ireduce_scatter_block(in, out, cnt, MPI_FLOAT, MPI_SUM, c->comm, &q->req);
        break;
    case OP_RS_BF16:
    case OP_RS_F16: {
        MPI_Op sum;
        q->hdt = op == OP_RS_F16 ? ZT_HALF_F16 : ZT_HALF_BF16;
        q->hfull = (float *)in;
        q->hshard = out;
        if ((rc = op16_get(q->hdt, &sum)) == MPI_SUCCESS)
            rc = MPI_Ireduce_scatter_block(in, out, cnt, MPI_UINT16_T, sum, c->comm, &q->req);
        break;
    }
    case OP_AG:
        rc = MPI_Iallgather(in, cnt, MPI_FLOAT, out, cnt, MPI_FLOAT, c->comm, &q->req);
        break;
    case OP_AG_INPLACE:
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_FLOAT, out, cnt, MPI_FLOAT, c->comm, &q->req);
        break;
    case OP_AG16:
        rc = MPI_Iallgather(in, cnt, MPI_UINT16_T, out, cnt, MPI_UINT16_T, c->comm, &q->req);
        break;
    case OP_AG16_INPLACE:
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_UINT16_T, out, cnt, MPI_UINT16_T, c->comm,
                            &q->req);
        break;
    case OP_GATHER_D:
        rc = MPI_Iallgather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, c->comm, &q->req);
        break;
    case OP_GATHER_B:
        rc = MPI_Iallgather(in, (int)n, MPI_BYTE, out, (int)n, MPI_BYTE, c->comm, &q->req);
        break;
    default:
        rc = MPI_Iallreduce(MPI_IN_PLACE, out, (int)n, MPI_INT64_T, MPI_SUM, c->comm, &q->req);
        break;
    }
    q->used = 1;
    q->kind = kind;
    q->seq = c->seq++;
    q->count = n;
    q->started = MPI_Wtime();
    c->calls[kind]++;
    c->bytes[kind] += bytes;
    c->open++;
    if (rc != MPI_SUCCESS)
        mark_done(c, q, rc);
    else if (c->pt)
        pthread_cond_signal(&c->pt->wake);
    unlock(c);
    *h = (int64_t)q->seq;
    return 0;
}

int zt_comm_wait(zt_comm *c, int64_t h)
{
    zt_comm_req *q = NULL;
    double t0;
    int rc;
    if (h < 0)
        return 0;
    for (int i = 0; i < ZT_COMM_MAXREQ && !q; i++)
        if (c->reqs[i].used && c->reqs[i].seq == (uint64_t)h)
            q = &c->reqs[i];
    if (!q) /* waited for already (to free its slot): its status was returned then */
        return 0;
    t0 = MPI_Wtime();
    double tp = ZT_PROF_T0();
    lock(c);
    if (!q->done) {
        inflight(c, 1, q->seq, kind_names[q->kind], q->count);
        while (!q->done) {
            int flag = 0;
            rc = MPI_Test(&q->req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS || flag)
                mark_done(c, q, rc);
            else if (c->pt) { /* let the progress thread in now and then */
                unlock(c);
                lock(c);
            }
        }
        inflight(c, 0, 0, NULL, 0);
    }
    rc = q->rc;
    if (q->hdt >= 0) { /* a 16-bit reduce-scatter: both buffers floats again */
        widen_in_place(q->hdt, q->hfull, q->count);
        widen_in_place(q->hdt, q->hshard, q->count / (size_t)c->size);
    }
    c->seconds[q->kind] += MPI_Wtime() - t0;
    ZT_PROF(ZT_PROF_COMM_WAIT, tp, 0, 0);
    q->used = 0;
    c->open--;
    unlock(c);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "a non-blocking collective");
}

int zt_comm_wait_range(zt_comm *c, int64_t lo, int64_t hi)
{
    for (int64_t h = lo; lo >= 0 && h <= hi; h++)
        ZT_TRY(zt_comm_wait(c, h));
    return 0;
}

int zt_comm_wait_all(zt_comm *c)
{
    int rc = 0;
    int64_t h;
    while (c->open > 0 && (h = oldest_open(c)) >= 0) {
        int r = zt_comm_wait(c, h);
        rc = rc < 0 ? rc : r;
    }
    return rc;
}

static int check_n(const zt_comm *c, size_t n)
{
    if (n % (size_t)c->size != 0 || n / (size_t)c->size > ZT_COMM_MAX_SLICE)
        return zt_fail(ZT_E_INVAL, "internal: a collective of %zu floats over %d ranks (slices "
                       "must be equal and at most %zu floats)", n, c->size, ZT_COMM_MAX_SLICE);
    return 0;
}

int zt_comm_start_reduce_scatter(zt_comm *c, const float *full, float *shard, size_t n,
                                 int64_t *h)
{
    *h = -1;
    if (c->size == 1) {
        if (shard != full)
            memcpy(shard, full, n * sizeof(float));
        return 0;
    }
    ZT_TRY(check_n(c, n));
    return start(c, OP_RS, full, shard, n, h);
}

int zt_comm_start_reduce_scatter16(zt_comm *c, int dt, float *full, float *shard, size_t n,
                                   int64_t *h)
{
    *h = -1;
    if (c->size == 1) { /* (the sum of one value: itself) */
        if (shard != full)
            memcpy(shard, full, n * sizeof(float));
        return 0;
    }
    ZT_TRY(check_n(c, n));
    narrow_in_place(dt, full, n);
    return start(c, dt == ZT_HALF_F16 ? OP_RS_F16 : OP_RS_BF16, full, shard, n, h);
}

int zt_comm_start_allgather(zt_comm *c, const float *shard, float *full, size_t n, int64_t *h)
{
    size_t s = n / (size_t)c->size;
    *h = -1;
    if (c->size == 1) {
        if (shard != full)
            memcpy(full, shard, n * sizeof(float));
        return 0;
    }
    ZT_TRY(check_n(c, n));
    return start(c, shard == full + (size_t)c->rank * s ? OP_AG_INPLACE : OP_AG, shard, full, n,
                 h);
}

int zt_comm_start_allgather16(zt_comm *c, const uint16_t *shard, uint16_t *full, size_t n,
                              int64_t *h)
{
    size_t s = n / (size_t)c->size;
    *h = -1;
    if (c->size == 1) {
        if (shard != full)
            memcpy(full, shard, n * sizeof *full);
        return 0;
    }
    ZT_TRY(check_n(c, n));
    return start(c, shard == full + (size_t)c->rank * s ? OP_AG16_INPLACE : OP_AG16, shard,
                 full, n, h);
}

int zt_comm_allgather16(zt_comm *c, const uint16_t *shard, uint16_t *full, size_t n)
{
    int64_t h;
    ZT_TRY(zt_comm_start_allgather16(c, shard, full, n, &h));
    return zt_comm_wait(c, h);
}

int zt_comm_reduce_scatter(zt_comm *c, const float *full, float *shard, size_t n)
{
    int64_t h;
    ZT_TRY(zt_comm_start_reduce_scatter(c, full, shard, n, &h));
    return zt_comm_wait(c, h);
}

int zt_comm_allgather(zt_comm *c, const float *shard, float *full, size_t n)
{
    int64_t h;
    ZT_TRY(zt_comm_start_allgather(c, shard, full, n, &h));
    return zt_comm_wait(c, h);
}

int zt_comm_sum_ordered(zt_comm *c, double x, double *sum)
{
    double *buf;
    int64_t h;
    int rc;
    if (c->size == 1) {
        *sum = x;
        return 0;
    }
    if (!(buf = malloc(sizeof *buf * (size_t)c->size)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    if ((rc = start(c, OP_GATHER_D, &x, buf, 1, &h)) == 0 && (rc = zt_comm_wait(c, h)) == 0) {
        *sum = 0.0;
        for (int r = 0; r < c->size; r++)
            *sum += buf[r];
    }
    free(buf);
    return rc;
}

int zt_comm_gather_d(zt_comm *c, const double *x, double *all, size_t n)
{
    int64_t h;
    if (c->size == 1) {
        memcpy(all, x, n * sizeof *x);
        return 0;
    }
    if (n > (size_t)INT_MAX)
        return zt_fail(ZT_E_INVAL, "gather of %zu doubles: more than an int count", n);
    ZT_TRY(start(c, OP_GATHER_D, x, all, n, &h));
    return zt_comm_wait(c, h);
}

int zt_comm_sum_i64(zt_comm *c, int64_t *x)
{
    return zt_comm_sum_i64_n(c, x, 1);
}

int zt_comm_sum_i64_n(zt_comm *c, int64_t *x, size_t n)
{
    int64_t h;
    if (c->size == 1 || n == 0)
        return 0;
    if (n > (size_t)INT_MAX)
        return zt_fail(ZT_E_INVAL, "sum of %zu integers: more than an int count", n);
    ZT_TRY(start(c, OP_SUM_I64, NULL, x, n, &h));
    return zt_comm_wait(c, h);
}

int zt_comm_gather_bytes(zt_comm *c, const void *x, void *all, size_t n)
{
    int64_t h;
    if (c->size == 1) {
        memcpy(all, x, n);
        return 0;
    }
    if (n > (size_t)INT_MAX)
        return zt_fail(ZT_E_INVAL, "gather of %zu bytes: more than an int count", n);
    ZT_TRY(start(c, OP_GATHER_B, x, all, n, &h));
    return zt_comm_wait(c, h);
}

/* ---- agreement ------------------------------------------------------------------------
 * Ranks that fail alone leave the others waiting in their next collective. Wherever a rank
 * can fail on its own (I/O, bad input), every rank passes through an agreement: one
 * gather of every rank's status and message; then, if settings are given, a gather of
 * every rank's "key=value" lines, compared with rank 0's. */

#define AGREE_MSG 496
typedef struct agree_rec {
    int32_t status;
    int32_t pad;
    uint64_t settings_len;     /* bytes of the settings text, 0 = none */
    char msg[AGREE_MSG];
} agree_rec;

/* the value of key `k` (length kn) in text t ("key=value" lines), or NULL; *vn its length */
static const char *find_key(const char *t, const char *k, size_t kn, size_t *vn)
{
    for (const char *l = t; l && *l;) {
        const char *nl = strchr(l, '\n'), *eq = memchr(l, '=', nl ? (size_t)(nl - l) : strlen(l));
        size_t ln = nl ? (size_t)(nl - l) : strlen(l);
        if (eq && (size_t)(eq - l) == kn && memcmp(l, k, kn) == 0) {
            *vn = ln - kn - 1;
            return eq + 1;
        }
        l = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* The first key whose value differs between a (rank ra) and b (rank rb), as an error. */
static int settings_differ(const char *a, int ra, const char *b, int rb)
{
    for (int pass = 0; pass < 2; pass++) { /* keys of a, then keys only b has */
        const char *x = pass ? b : a, *y = pass ? a : b;
        for (const char *l = x; l && *l;) {
            const char *nl = strchr(l, '\n');
            size_t ln = nl ? (size_t)(nl - l) : strlen(l), kn, vn = 0;
            const char *eq = memchr(l, '=', ln), *v;
            if (eq) {
                kn = (size_t)(eq - l);
                v = find_key(y, l, kn, &vn);
                if (!v || vn != ln - kn - 1 || memcmp(v, eq + 1, vn) != 0) {
                    const char *va = pass ? v : eq + 1, *vb = pass ? eq + 1 : v;
                    int na = (int)(pass ? vn : ln - kn - 1), nb = (int)(pass ? ln - kn - 1 : vn);
                    return zt_fail(ZT_E_CONFIG, "the ranks disagree on %.*s: rank %d has %s%.*s%s, "
                                   "rank %d has %s%.*s%s", (int)kn, l, ra, va ? "\"" : "(",
                                   va ? na : 4, va ? va : "none", va ? "\"" : ")", rb,
                                   vb ? "\"" : "(", vb ? nb : 4, vb ? vb : "none",
                                   vb ? "\"" : ")");
                }
            }
            l = nl ? nl + 1 : NULL;
        }
    }
    return 0;
}

int zt_comm_agree(zt_comm *c, int rc, const char *settings)
{
    agree_rec mine = {0}, *all = NULL;
    char *texts = NULL;
    size_t longest = 0;
    int bad = -1, res = 0;
    if (c->size == 1 || c->comm == MPI_COMM_NULL)
        return rc;
    mine.status = rc < 0 ? rc : 0;
    mine.settings_len = settings ? strlen(settings) : 0;
    if (rc < 0)
        snprintf(mine.msg, sizeof mine.msg, "%s", zt_last_error());
    if (!(all = calloc((size_t)c->size, sizeof *all)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    if ((res = zt_comm_gather_bytes(c, &mine, all, sizeof mine)) < 0)
        goto done;
    for (int r = 0; r < c->size; r++) {
        if (all[r].status < 0 && bad < 0)
            bad = r;
        longest = all[r].settings_len > longest ? all[r].settings_len : longest;
    }
    if (bad >= 0) { /* every rank fails; one that failed itself keeps its own message */
        all[bad].msg[AGREE_MSG - 1] = '\0';
        res = rc < 0 ? zt_fail(rc, "%s", mine.msg)
                     : zt_fail(all[bad].status, "rank %d: %s", bad, all[bad].msg);
        goto done;
    }
    if (longest == 0) /* (known alike on every rank) */
        goto done;
    if (!(texts = calloc((size_t)c->size, longest + 1))) {
        res = zt_fail(ZT_E_NOMEM, "out of memory");
        goto done;
    }
    {   /* (every rank takes part in this gather: each has a settings text) */
        char *own = calloc(1, longest + 1);
        if (!own) {
            res = zt_fail(ZT_E_NOMEM, "out of memory");
            goto done;
        }
        if (mine.settings_len)
            memcpy(own, settings, mine.settings_len);
        res = zt_comm_gather_bytes(c, own, texts, longest + 1);
        free(own);
        if (res < 0)
            goto done;
    }
    for (int r = 1; r < c->size && res == 0; r++)
        if (strcmp(texts, texts + (size_t)r * (longest + 1)) != 0)
            res = settings_differ(texts, 0, texts + (size_t)r * (longest + 1), r);
done:
    free(texts);
    free(all);
    return res;
}

int zt_ranks_agree(MPI_Comm comm, int status, const char *message, const char *settings,
                   double timeout)
{
    zt_comm c;
    int rc;
    if (comm == MPI_COMM_NULL)
        return status < 0 ? zt_fail(status, "%s", message ? message : "failed") : 0;
    if ((rc = zt_comm_open(&c, comm)) < 0)
        return rc;
    if ((rc = zt_comm_watch(&c, timeout, 0, ZT_PROGRESS_POLL)) == 0) {
        if (status < 0)
            zt_fail(status, "%s", message ? message : "failed");
        rc = zt_comm_agree(&c, status < 0 ? status : 0, settings);
    }
    zt_comm_close(&c);
    return rc;
}
