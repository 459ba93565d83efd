/* uring.c - see uring.h. Pieces are identified by their staging buffer: piece i holds
 * buffer i while in flight, so the pool bounds both memory and the queue. The two backends
 * (io_uring, threads) differ only in how a piece is started and how a finished one is
 * reaped; every result goes through one completion handler. */
#include "uring.h"
#include "../common/err.h"
#include "../common/prof.h"
#include "../memory/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { MAX_TRIES = 32, POOL_THREADS = 2, MAX_IO_THREADS = 16 };

typedef struct piece {
    int64_t ticket;
    int is_write, tries;
    char *ubuf;               /* the caller's bytes for this piece */
    size_t ulen;              /* caller bytes; iolen = ulen rounded up to ZT_IO_ALIGN */
    size_t iolen, done;       /* done: bytes the file has confirmed (a multiple of 4096) */
    uint64_t off;
} piece;

typedef struct xfer {         /* one zt_io_read / zt_io_write */
    int64_t ticket;
    int is_write, err;
    char *msg;                /* err's message, formatted when it happened */
    char *buf;
    size_t len, next;         /* next: first byte not yet handed to a piece */
    uint64_t off;
    int outstanding;          /* pieces in flight */
} xfer;

struct zt_io {
    int fd, direct;
    char path[4096];
    zt_io_opts o;
    zt_io_backend backend;
    struct io_uring ring;
    int ring_ok, registered;
    char *pool;               /* nbuf x block bytes, 4096-aligned */
    size_t pool_bytes, block;
    int nbuf, depth, inflight;
    int *free_idx, nfree;
    piece *pc;                /* [nbuf] */
    xfer *x;                  /* FIFO of open transfers: [xhead, xtail) of xcap */
    size_t xhead, xtail, xcap;
    int64_t next_ticket, done_ticket; /* done_ticket: every ticket <= it has completed */
    int unsubmitted;          /* io_uring: SQEs prepared but not yet submitted */
    int said_unregistered;    /* the warning about unregistered buffers was logged */
    int broken;               /* the ring refused submissions: every later call fails */
    int submit_tries;         /* refused submissions in a row */
    struct fail { int64_t ticket; int code; char *msg; } *fails; /* not yet reported */
    size_t nfails, capfails;
    /* thread pool; with ZT_IO_URING_THREADS each thread drives its own ring */
    pthread_t th[MAX_IO_THREADS];
    struct io_thread { zt_io *io; struct io_uring ring; int ring_ok, registered; } *it;
    int nth, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int *workq, wq_n, *doneq, *doneres, dq_n;
    zt_io_stats st;
};

void zt_io_opts_init(zt_io_opts *o)
{
    memset(o, 0, sizeof *o);
    o->block_size = 1u << 20;
    o->queue_depth = 8;
    o->direct = 0;
}

/* ---- thread-pool backend ------------------------------------------------------------ */

static void *worker(void *arg)
{
    zt_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && io->wq_n == 0)
            pthread_cond_wait(&io->cv_work, &io->mu);
        if (io->stop)
            break;
        int i = io->workq[--io->wq_n];
        piece *p = &io->pc[i];
        pthread_mutex_unlock(&io->mu);
        char *b = io->pool + (size_t)i * io->block + p->done;
        size_t n = p->iolen - p->done;
        ssize_t r = p->is_write ? pwrite(io->fd, b, n, (off_t)(p->off + p->done))
                                : pread(io->fd, b, n, (off_t)(p->off + p->done));
        int res = r < 0 ? -errno : (int)r;
        pthread_mutex_lock(&io->mu);
        io->doneq[io->dq_n] = i;
        io->doneres[io->dq_n++] = res;
        pthread_cond_signal(&io->cv_done);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

static void prep_piece(zt_io *io, struct io_uring_sqe *sqe, int i, int registered);

/* aio.intra_op_parallelism > 1: a thread with its own ring takes pieces from the shared work
 * queue while its ring has room, submits them (each on its own with single_submit), waits
 * for one completion when it has pieces in the kernel and nothing more to take, and posts
 * every ready one. A ring
 * that keeps refusing submissions posts its queued pieces as failed (-EAGAIN: the handler
 * retries them through another thread) and takes no more. */
static void *ring_worker(void *arg)
{
    struct io_thread *w = arg;
    zt_io *io = w->io;
    int queued[64], nq = 0, busy = 0, refused = 0, dead = 0;
    unsigned room = (unsigned)(sizeof queued / sizeof queued[0]);
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && (io->wq_n == 0 || dead) && nq + busy == 0)
            pthread_cond_wait(&io->cv_work, &io->mu);
        if (io->stop && nq + busy == 0)
            break;
        struct io_uring_sqe *sqe;
        while (!dead && io->wq_n > 0 && (unsigned)(nq + busy) < room &&
               (sqe = io_uring_get_sqe(&w->ring))) {
            int i = io->workq[--io->wq_n];
            prep_piece(io, sqe, i, w->registered);
            queued[nq++] = i;
            if (io->o.single_submit)
                break;
        }
        /* more to take (single_submit, or a full ring): only look for completions */
        int more = !dead && io->wq_n > 0 && (unsigned)(nq + busy) < room &&
                   io_uring_sq_space_left(&w->ring) > 0;
        pthread_mutex_unlock(&io->mu);
        if (nq > 0 && !dead) {
            int r = io_uring_submit(&w->ring);
            if (r > 0) {
                memmove(queued, queued + r, sizeof(int) * (size_t)(nq - r));
                nq -= r;
                busy += r;
                refused = 0;
            } else if (busy == 0 && ++refused > MAX_TRIES) {
                dead = 1; /* its prepared entries are never submitted now */
            } else if (busy == 0) {
                nanosleep(&(struct timespec){0, 50000L * refused}, NULL);
            }
        }
        struct io_uring_cqe *cqe;
        int got = busy > 0 && (more ? io_uring_peek_cqe(&w->ring, &cqe)
                                    : io_uring_wait_cqe(&w->ring, &cqe)) == 0;
        pthread_mutex_lock(&io->mu);
        for (; got; got = io_uring_peek_cqe(&w->ring, &cqe) == 0) {
            io->doneq[io->dq_n] = (int)io_uring_cqe_get_data64(cqe);
            io->doneres[io->dq_n++] = cqe->res;
            io_uring_cqe_seen(&w->ring, cqe);
            busy--;
        }
        for (; dead && nq > 0; nq--) {
            io->doneq[io->dq_n] = queued[nq - 1];
            io->doneres[io->dq_n++] = -EAGAIN;
        }
        pthread_cond_broadcast(&io->cv_done);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

static int pool_start(zt_io *io)
{
    if (!(io->workq = calloc((size_t)io->nbuf, sizeof(int))) ||
        !(io->doneq = calloc((size_t)io->nbuf, sizeof(int))) ||
        !(io->doneres = calloc((size_t)io->nbuf, sizeof(int))))
        return zt_fail(ZT_E_NOMEM, "I/O thread pool: out of memory");
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->cv_work, NULL);
    pthread_cond_init(&io->cv_done, NULL);
    int n = io->backend == ZT_IO_URING_THREADS ? io->o.io_threads : POOL_THREADS;
    for (; io->nth < n; io->nth++)
        if (pthread_create(&io->th[io->nth], NULL,
                           io->backend == ZT_IO_URING_THREADS ? ring_worker : worker,
                           io->backend == ZT_IO_URING_THREADS ? (void *)&io->it[io->nth]
                                                              : (void *)io) != 0)
            return zt_fail(-EAGAIN, "I/O thread pool: cannot start a thread");
    return 0;
}

static void pool_stop(zt_io *io)
{
    if (io->nth) {
        pthread_mutex_lock(&io->mu);
        io->stop = 1;
        pthread_cond_broadcast(&io->cv_work);
        pthread_mutex_unlock(&io->mu);
        for (int i = 0; i < io->nth; i++)
            pthread_join(io->th[i], NULL);
        pthread_mutex_destroy(&io->mu);
        pthread_cond_destroy(&io->cv_work);
        pthread_cond_destroy(&io->cv_done);
    }
    for (int k = 0; io->it && k < io->o.io_threads; k++)
        if (io->it[k].ring_ok)
            io_uring_queue_exit(&io->it[k].ring);
    free(io->it);
    free(io->workq);
    free(io->doneq);
    free(io->doneres);
}

/* ---- backend dispatch --------------------------------------------------------------- */

/* Submits the prepared entries. A transient refusal (-EAGAIN, -EBUSY: the kernel wants
 * completions reaped first; -EINTR) returns 1 so the caller reaps and comes back; after
 * MAX_TRIES refusals in a row, with a growing pause, the queue gives up and is broken. */
static int ring_flush(zt_io *io)
{
    while (io->unsubmitted > 0) {
        int r = io_uring_submit(&io->ring);
        if (r > 0) {
            io->unsubmitted -= r < io->unsubmitted ? r : io->unsubmitted;
            io->submit_tries = 0;
            continue;
        }
        if ((r == 0 || r == -EAGAIN || r == -EBUSY || r == -EINTR) &&
            ++io->submit_tries <= MAX_TRIES) {
            nanosleep(&(struct timespec){0, 50000L * io->submit_tries}, NULL);
            return 1;
        }
        io->broken = zt_fail(r < 0 ? r : -EAGAIN, "%s: io_uring accepts no submissions: %s",
                             io->path, strerror(r < 0 ? -r : EAGAIN));
        return io->broken;
    }
    return 0;
}

/* an SQE for piece i's remaining part (registered: the pool is the ring's fixed buffers) */
static void prep_piece(zt_io *io, struct io_uring_sqe *sqe, int i, int registered)
{
    piece *p = &io->pc[i];
    char *b = io->pool + (size_t)i * io->block + p->done;
    unsigned n = (unsigned)(p->iolen - p->done);
    uint64_t off = p->off + p->done;
    if (registered) {
        if (p->is_write)
            io_uring_prep_write_fixed(sqe, io->fd, b, n, off, i);
        else
            io_uring_prep_read_fixed(sqe, io->fd, b, n, off, i);
    } else if (p->is_write) {
        io_uring_prep_write(sqe, io->fd, b, n, off);
    } else {
        io_uring_prep_read(sqe, io->fd, b, n, off);
    }
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
}

/* hand piece i (its remaining part) to the kernel */
static int be_start(zt_io *io, int i)
{
    if (io->backend != ZT_IO_URING) { /* a thread takes it */
        pthread_mutex_lock(&io->mu);
        io->workq[io->wq_n++] = i;
        pthread_cond_signal(&io->cv_work);
        pthread_mutex_unlock(&io->mu);
        return 0;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    if (!sqe) { /* the submission queue is full of prepared entries: push them first */
        int r = ring_flush(io);
        if (r < 0)
            return r;
        if (!(sqe = io_uring_get_sqe(&io->ring)))
            return zt_fail(-EBUSY, "%s: io_uring submission queue stays full", io->path);
    }
    prep_piece(io, sqe, i, io->registered);
    io->unsubmitted++;
    if (io->o.single_submit) { /* each piece on its own (a refusal is retried by the reaper) */
        int r = ring_flush(io);
        return r < 0 ? r : 0;
    }
    return 0;
}

/* one finished piece: *idx and the kernel's result. wait = 0: 1 if none is ready. */
static int be_reap(zt_io *io, int wait, int *idx, int *res)
{
    if (io->backend != ZT_IO_URING) {
        pthread_mutex_lock(&io->mu);
        while (wait && io->dq_n == 0)
            pthread_cond_wait(&io->cv_done, &io->mu);
        int got = io->dq_n > 0;
        if (got) {
            *idx = io->doneq[0];
            *res = io->doneres[0];
            io->dq_n--;
            memmove(io->doneq, io->doneq + 1, sizeof(int) * (size_t)io->dq_n);
            memmove(io->doneres, io->doneres + 1, sizeof(int) * (size_t)io->dq_n);
        }
        pthread_mutex_unlock(&io->mu);
        return got ? 0 : 1;
    }
    struct io_uring_cqe *cqe = NULL;
    int r;
    for (;;) {
        if (io->unsubmitted > 0 && (r = ring_flush(io)) < 0)
            return r;
        /* waiting needs something submitted: entries the ring refused are retried first */
        if (wait && io->unsubmitted > 0 && io->inflight <= io->unsubmitted &&
            io_uring_peek_cqe(&io->ring, &cqe) != 0)
            continue;
        r = wait ? io_uring_wait_cqe(&io->ring, &cqe) : io_uring_peek_cqe(&io->ring, &cqe);
        if (r != -EINTR) /* a signal: wait again (the kernel still owns the buffers) */
            break;
    }
    if (r == -EAGAIN && !wait)
        return 1;
    if (r < 0)
        return zt_fail(r, "%s: waiting for io_uring completions failed: %s", io->path,
                       strerror(-r));
    *idx = (int)io_uring_cqe_get_data64(cqe);
    *res = cqe->res;
    io_uring_cqe_seen(&io->ring, cqe);
    return 0;
}

/* ---- pieces and transfers ----------------------------------------------------------- */

static void fail_xfer(struct xfer *t, int code);

static xfer *find_xfer(zt_io *io, int64_t ticket)
{
    if (io->xhead == io->xtail)
        return NULL;
    int64_t first = io->x[io->xhead % io->xcap].ticket;
    if (ticket < first || ticket >= first + (int64_t)(io->xtail - io->xhead))
        return NULL;
    return &io->x[(io->xhead + (size_t)(ticket - first)) % io->xcap];
}

static int xfer_done(const xfer *t)
{
    return (t->next >= t->len || t->err) && t->outstanding == 0;
}

/* a failed transfer's error, kept (with its message) until a wait reports it */
static void keep_failure(zt_io *io, const xfer *t)
{
    if (io->nfails == io->capfails) {
        size_t nc = io->capfails ? io->capfails * 2 : 8;
        struct fail *nf = realloc(io->fails, nc * sizeof *nf);
        if (!nf) { /* no room to keep it: the queue cannot report it, so it stops */
            free(t->msg);
            io->broken = ZT_E_NOMEM;
            return;
        }
        io->fails = nf;
        io->capfails = nc;
    }
    io->fails[io->nfails].ticket = t->ticket;
    io->fails[io->nfails].code = t->err;
    io->fails[io->nfails++].msg = t->msg; /* ownership moves */
}

/* retire finished transfers at the head of the FIFO */
static void retire(zt_io *io)
{
    while (io->xhead < io->xtail && xfer_done(&io->x[io->xhead % io->xcap])) {
        const xfer *t = &io->x[io->xhead % io->xcap];
        if (t->err)
            keep_failure(io, t);
        io->done_ticket = t->ticket;
        io->xhead++;
    }
}

/* this ticket's failure, if it failed (reported once, then forgotten); other tickets'
 * failures wait for their own waits */
static int take_failure(zt_io *io, int64_t ticket)
{
    for (size_t k = 0; k < io->nfails; k++) {
        if (io->fails[k].ticket != ticket)
            continue;
        int code = io->fails[k].code;
        if (io->fails[k].msg)
            zt_fail(code, "%s", io->fails[k].msg);
        else
            zt_fail(code, "%s: transfer failed: %s", io->path, strerror(-code));
        free(io->fails[k].msg);
        memmove(io->fails + k, io->fails + k + 1, (io->nfails - k - 1) * sizeof *io->fails);
        io->nfails--;
        return code;
    }
    return 0;
}

static void release(zt_io *io, int i)
{
    io->free_idx[io->nfree++] = i;
    io->inflight--;
}

/* start as many pieces as buffers and depth allow, oldest transfer first */
static int fill(zt_io *io)
{
    if (io->o.no_overlap && io->inflight > 0) /* waves: the next starts when this one is done */
        return 0;
    for (size_t k = io->xhead; k < io->xtail; k++) {
        xfer *t = &io->x[k % io->xcap];
        while (!t->err && t->next < t->len && io->nfree > 0 && io->inflight < io->depth) {
            int i = io->free_idx[--io->nfree];
            piece *p = &io->pc[i];
            p->ticket = t->ticket;
            p->is_write = t->is_write;
            p->tries = 0;
            p->ubuf = t->buf + t->next;
            p->ulen = t->len - t->next < io->block ? t->len - t->next : io->block;
            p->iolen = (p->ulen + ZT_IO_ALIGN - 1) / ZT_IO_ALIGN * ZT_IO_ALIGN;
            p->done = 0;
            p->off = t->off + t->next;
            if (p->is_write) {
                char *b = io->pool + (size_t)i * io->block;
                memcpy(b, p->ubuf, p->ulen);
                memset(b + p->ulen, 0, p->iolen - p->ulen);
            }
            t->next += p->ulen;
            t->outstanding++;
            io->inflight++;
            int r = be_start(io, i);
            if (r < 0) { /* never handed to the kernel: undo, and the transfer fails */
                t->outstanding--;
                release(io, i);
                fail_xfer(t, r);
                retire(io);
                return io->broken ? io->broken : 0;
            }
        }
        if (io->nfree == 0 || io->inflight >= io->depth)
            break;
    }
    if (io->backend == ZT_IO_URING && io->unsubmitted > 0) {
        int r = ring_flush(io);
        if (r < 0)
            return r;
    }
    return 0;
}

/* the transfer fails with the message just formatted (the first failure wins) */
static void fail_xfer(xfer *t, int code)
{
    if (!t || t->err)
        return;
    t->err = code;
    t->msg = strdup(zt_last_error());
}

/* the result of one piece: continue, retry, finish or fail its transfer */
static int complete(zt_io *io, int i, int res)
{
    piece *p = &io->pc[i];
    xfer *t = find_xfer(io, p->ticket);
    size_t want = p->iolen - p->done;
    if (io->o.fault)
        res = io->o.fault(io->o.fault_arg, p->is_write, p->off + p->done, want, res);
    if (res == -EAGAIN || res == -EINTR || res == -EBUSY || res == -ENOMEM ||
        (res >= 0 && (size_t)res < want)) {
        if (res == -ENOMEM && io->depth > 1)
            io->depth /= 2; /* the kernel is short of memory: fewer requests in flight */
        if (res > 0) {
            /* continue after the confirmed whole blocks (O_DIRECT offsets stay aligned;
             * a partial block is transferred again, which is idempotent) */
            size_t adv = (size_t)res / ZT_IO_ALIGN * ZT_IO_ALIGN;
            io->st.short_transfers++;
            if (adv > 0) {
                p->done += adv;
                p->tries = 0;
            } else {
                p->tries++;
            }
        } else if (res == 0 && !p->is_write) {
            p->tries = MAX_TRIES + 1; /* end of file: retrying cannot help */
        } else {
            p->tries++;
            io->st.retries++;
        }
        if (p->tries <= MAX_TRIES) {
            if (res == -EAGAIN || res == -ENOMEM || res == -EBUSY) /* back off a little */
                nanosleep(&(struct timespec){0, 20000L * p->tries}, NULL);
            int r = be_start(io, i);
            if (r == 0)
                return 0;
            res = r; /* could not even resubmit: the transfer fails */
            p->tries = MAX_TRIES + 1;
        }
        if (t && !t->err)
            fail_xfer(t, zt_fail(res < 0 ? res : -EIO,
                             "%s: %s of %zu bytes at offset %llu: %s after %d attempts",
                             io->path, p->is_write ? "write" : "read", want,
                             (unsigned long long)(p->off + p->done),
                             res < 0 ? strerror(-res) : res == 0 ? "end of file" : "short transfer",
                             MAX_TRIES));
    } else if (res < 0) {
        if (t && !t->err)
            fail_xfer(t, zt_fail(res, "%s: %s of %zu bytes at offset %llu failed: %s%s",
                                 io->path, p->is_write ? "write" : "read", want,
                                 (unsigned long long)(p->off + p->done), strerror(-res),
                                 res == -ENOSPC ? " (the filesystem has no space left)" : ""));
    } else {
        io->st.pieces++;
        if (p->is_write) {
            io->st.bytes_written += p->ulen;
        } else {
            memcpy(p->ubuf, io->pool + (size_t)i * io->block, p->ulen);
            io->st.bytes_read += p->ulen;
        }
    }
    if (t)
        t->outstanding--;
    release(io, i);
    retire(io);
    return 0;
}

static int reap(zt_io *io, int wait)
{
    int i, res, r;
    while ((r = be_reap(io, wait, &i, &res)) == 0) {
        ZT_TRY(complete(io, i, res));
        wait = 0;
    }
    return r < 0 ? r : 0;
}

static int64_t start(zt_io *io, int is_write, void *buf, size_t len, uint64_t off)
{
    if (!io || (!buf && len))
        return zt_fail(ZT_E_INVAL, "zt_io: no queue or no buffer");
    if (io->broken)
        return zt_fail(io->broken, "%s: the I/O queue failed earlier and takes no more "
                       "transfers", io->path);
    if (off % ZT_IO_ALIGN)
        return zt_fail(ZT_E_INVAL, "%s: offset %llu is not a multiple of %d", io->path,
                       (unsigned long long)off, ZT_IO_ALIGN);
    if (io->xtail - io->xhead == io->xcap) {
        size_t ncap = io->xcap ? io->xcap * 2 : 16;
        xfer *nx = malloc(ncap * sizeof *nx);
        if (!nx)
            return zt_fail(ZT_E_NOMEM, "zt_io: out of memory");
        for (size_t k = io->xhead; k < io->xtail; k++)
            nx[k - io->xhead] = io->x[k % io->xcap];
        io->xtail -= io->xhead;
        io->xhead = 0;
        free(io->x);
        io->x = nx;
        io->xcap = ncap;
    }
    xfer *t = &io->x[io->xtail % io->xcap];
    memset(t, 0, sizeof *t);
    t->ticket = ++io->next_ticket;
    t->is_write = is_write;
    t->buf = buf;
    t->len = len;
    t->off = off;
    io->xtail++;
    int64_t ticket = t->ticket;
    retire(io); /* an empty transfer is done at once */
    (void)fill(io); /* an error stays with the transfers and comes out of their waits */
    return ticket;
}

int64_t zt_io_write(zt_io *io, const void *buf, size_t len, uint64_t off)
{
    return start(io, 1, (void *)buf, len, off);
}

int64_t zt_io_read(zt_io *io, void *buf, size_t len, uint64_t off)
{
    return start(io, 0, buf, len, off);
}

int zt_io_done(const zt_io *io, int64_t ticket)
{
    return io && ticket <= io->done_ticket;
}

int zt_io_poll(zt_io *io)
{
    if (!io)
        return zt_fail(ZT_E_INVAL, "zt_io_poll: no queue");
    ZT_TRY(reap(io, 0));
    return fill(io);
}

int zt_io_wait(zt_io *io, int64_t ticket)
{
    if (!io || ticket <= 0 || ticket > io->next_ticket)
        return zt_fail(ZT_E_INVAL, "zt_io_wait: no such transfer");
    double t0 = zt_prof_now();
    while (io->done_ticket < ticket) {
        ZT_TRY(fill(io));
        if (io->broken)
            return zt_fail(io->broken, "%s: the I/O queue failed: %s", io->path,
                           zt_strerror(io->broken));
        if (io->inflight == 0)
            return zt_fail(ZT_E_INVAL, "%s: transfer %lld cannot progress", io->path,
                           (long long)ticket);
        ZT_TRY(reap(io, 1));
    }
    io->st.wait_seconds += zt_prof_now() - t0;
    return take_failure(io, ticket);
}

/* ---- open / close ------------------------------------------------------------------- */

static int probe_direct(zt_io *io)
{
    char *b = io->pool; /* aligned */
    memset(b, 0x5a, ZT_IO_ALIGN);
    errno = 0;
    ssize_t w = pwrite(io->fd, b, ZT_IO_ALIGN, 0);
    ssize_t r = w == ZT_IO_ALIGN ? pread(io->fd, b, ZT_IO_ALIGN, 0) : -1;
    if (w == ZT_IO_ALIGN && r == ZT_IO_ALIGN)
        return 0;
    return (w < 0 || r < 0) && errno ? -errno : -EIO; /* a short probe: say EIO */
}

/* The staging pool as the ring's fixed buffers (piece i = buffer i); 0, or the error after
 * saying that the ring runs with unregistered buffers (said once per queue). */
static int register_pool(zt_io *io, struct io_uring *ring, int fault_errno)
{
    struct iovec *iov = calloc((size_t)io->nbuf, sizeof *iov);
    if (!iov)
        return zt_fail(ZT_E_NOMEM, "zt_io: out of memory");
    for (int i = 0; i < io->nbuf; i++) {
        iov[i].iov_base = io->pool + (size_t)i * io->block;
        iov[i].iov_len = io->block;
    }
    int r = fault_errno ? -fault_errno
                        : io_uring_register_buffers(ring, iov, (unsigned)io->nbuf);
    free(iov);
    if (r < 0 && !io->said_unregistered) {
        io->said_unregistered = 1;
        zt_log(ZT_LOG_WARN, "offload: cannot register %zu bytes of I/O buffers with "
               "io_uring (%s%s); running with unregistered buffers", io->pool_bytes,
               strerror(-r), r == -ENOMEM ? ": the locked-memory limit RLIMIT_MEMLOCK "
               "is too low" : "");
    }
    return r;
}

/* aio.intra_op_parallelism = n > 1: n threads, a ring each (the caller's ring goes) */
static int thread_rings(zt_io *io, int n)
{
    if (n > MAX_IO_THREADS)
        return zt_fail(ZT_E_CONFIG, "offload: %d I/O threads (aio.intra_op_parallelism); at "
                       "most %d", n, MAX_IO_THREADS);
    if (!(io->it = calloc((size_t)n, sizeof *io->it)))
        return zt_fail(ZT_E_NOMEM, "zt_io: out of memory");
    io_uring_queue_exit(&io->ring);
    io->ring_ok = 0;
    io->backend = ZT_IO_URING_THREADS;
    for (int k = 0; k < n; k++) {
        struct io_thread *w = &io->it[k];
        w->io = io;
        int r = io_uring_queue_init((unsigned)io->nbuf * 2, &w->ring, 0);
        if (r < 0)
            return zt_fail(r, "offload: io_uring_queue_init for I/O thread %d failed: %s", k,
                           strerror(-r));
        w->ring_ok = 1;
        w->registered = register_pool(io, &w->ring, io->o.fault_register_errno) == 0;
    }
    return 0;
}

int zt_io_open(zt_io **out, const char *dir, const char *tag, const zt_io_opts *o)
{
    *out = NULL;
    zt_io_opts def;
    if (!o) {
        zt_io_opts_init(&def);
        o = &def;
    }
    if (!dir || !*dir)
        return zt_fail(ZT_E_CONFIG, "offload: no nvme_path given");
    if (o->block_size < ZT_IO_ALIGN || o->block_size % ZT_IO_ALIGN || o->block_size > (1u << 30))
        return zt_fail(ZT_E_CONFIG, "aio.block_size %zu: must be a multiple of %d up to 1 GiB",
                       o->block_size, ZT_IO_ALIGN);
    if (o->queue_depth < 1 || o->queue_depth > 4096)
        return zt_fail(ZT_E_CONFIG, "aio.queue_depth %d: must be 1..4096", o->queue_depth);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return zt_fail(ZT_E_CONFIG, "offload: nvme_path \"%s\" is not a folder: %s", dir,
                       stat(dir, &sb) != 0 ? strerror(errno) : "not a directory");
    zt_io *io = calloc(1, sizeof *io);
    if (!io)
        return zt_fail(ZT_E_NOMEM, "zt_io: out of memory");
    io->fd = -1;
    io->o = *o;
    io->block = o->block_size;
    io->depth = o->queue_depth;
    io->nbuf = o->buffer_count > o->queue_depth ? o->buffer_count : o->queue_depth;
    snprintf(io->path, sizeof io->path, "%s/zerotrain-%ld-%s.swap", dir, (long)getpid(),
             tag ? tag : "0");
    int rc;
    io->pool_bytes = (size_t)io->nbuf * io->block;
    if (!(io->pool = zt_mem_alloc_in(io->o.acct, io->pool_bytes, ZT_ALIGN_PAGE, ZT_MEM_IO)) ||
        !(io->pc = calloc((size_t)io->nbuf, sizeof *io->pc)) ||
        !(io->free_idx = calloc((size_t)io->nbuf, sizeof(int)))) {
        rc = zt_fail(ZT_E_NOMEM, "offload: %zu bytes of I/O buffers: out of memory",
                     io->pool_bytes);
        goto fail;
    }
    for (int i = io->nbuf - 1; i >= 0; i--)
        io->free_idx[io->nfree++] = i;
    /* open: O_DIRECT first unless asked not to */
    int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
    io->direct = o->direct >= 0;
    if (io->direct) {
        errno = 0;
        io->fd = o->fault_open_einval ? (errno = EINVAL, -1) : open(io->path, flags | O_DIRECT, 0600);
        if (io->fd < 0 && errno != EINVAL) {
            rc = zt_fail(-errno, "offload: cannot create %s: %s", io->path, strerror(errno));
            goto fail;
        }
    }
    if (io->fd >= 0) {
        unlink(io->path); /* nothing is left behind, whatever happens to the process */
        int pr = probe_direct(io);
        if (pr == -EINVAL) { /* opened, but O_DIRECT transfers are refused */
            fcntl(io->fd, F_SETFL, fcntl(io->fd, F_GETFL) & ~O_DIRECT);
            io->direct = 0;
        } else if (pr < 0) {
            rc = zt_fail(pr, "offload: %s: first write failed: %s", io->path, strerror(-pr));
            goto fail;
        }
    } else if (io->direct) {
        io->direct = 0;
    }
    if (!io->direct && o->direct == 1) {
        rc = zt_fail(ZT_E_UNSUPPORTED,
                     "offload: the filesystem of %s refuses O_DIRECT (aio direct I/O was "
                     "required)", dir);
        goto fail;
    }
    if (!io->direct && o->direct == 0)
        zt_log(ZT_LOG_WARN, "offload: the filesystem of %s refuses O_DIRECT; using buffered "
               "I/O (the page cache will hold offloaded data too)", dir);
    if (io->fd < 0) {
        if ((io->fd = open(io->path, flags, 0600)) < 0) {
            rc = zt_fail(-errno, "offload: cannot create %s: %s", io->path, strerror(errno));
            goto fail;
        }
        unlink(io->path);
    }
    if (o->reserve > 0) {
        int e = posix_fallocate(io->fd, 0, (off_t)o->reserve);
        if (e != 0) {
            rc = zt_fail(-e, "offload: cannot reserve %zu bytes in %s: %s%s", o->reserve, dir,
                         strerror(e), e == ENOSPC ? " (the filesystem has no space left)" : "");
            goto fail;
        }
    }
    /* the queue */
    io->backend = ZT_IO_THREADS;
    if (!o->threads_only) {
        int r = o->fault_setup_errno ? -o->fault_setup_errno
                                     : io_uring_queue_init((unsigned)io->nbuf * 2, &io->ring, 0);
        if (r == 0) {
            io->ring_ok = 1;
            io->backend = ZT_IO_URING;
        } else if (r == -ENOSYS || r == -EPERM || r == -EACCES || r == -ENOMEM) {
            zt_log(ZT_LOG_WARN, "offload: io_uring is not available here (%s); using a "
                   "pool of %d threads doing pread/pwrite", strerror(-r), POOL_THREADS);
        } else {
            rc = zt_fail(r, "offload: io_uring_queue_init failed: %s", strerror(-r));
            goto fail;
        }
    }
    if (io->backend == ZT_IO_URING && o->io_threads > 1 &&
        (rc = thread_rings(io, o->io_threads)) < 0)
        goto fail;
    if (io->backend == ZT_IO_URING) {
        io->registered = register_pool(io, &io->ring, o->fault_register_errno) == 0;
    } else if ((rc = pool_start(io)) < 0) {
        goto fail;
    }
    io->st.backend = io->backend;
    io->st.direct = io->direct;
    io->st.registered = io->registered || (io->it && io->it[0].registered);
    *out = io;
    return 0;
fail:
    zt_io_close(io);
    return rc;
}

void zt_io_close(zt_io *io)
{
    if (!io)
        return;
    /* let the kernel finish what it has (the staging buffers are about to go away) */
    while (io->inflight > io->unsubmitted && !io->broken && reap(io, 1) == 0)
        ;
    if (io->backend == ZT_IO_URING && io->ring_ok) {
        /* a broken queue (or a failed wait) still has pieces in the kernel: they land in
         * the staging pool, so their completions are drained, the results ignored (the
         * prepared entries were never submitted and are not now) */
        for (int n = io->inflight - io->unsubmitted; n > 0; n--) {
            struct io_uring_cqe *c;
            if (io_uring_wait_cqe(&io->ring, &c) < 0)
                break;
            io_uring_cqe_seen(&io->ring, c);
        }
    }
    if (io->ring_ok)
        io_uring_queue_exit(&io->ring);
    pool_stop(io);
    if (io->fd >= 0)
        close(io->fd);
    zt_mem_free_in(io->o.acct, io->pool, io->pool_bytes, ZT_MEM_IO);
    free(io->pc);
    free(io->free_idx);
    for (size_t k = io->xhead; io->x && k < io->xtail; k++)
        free(io->x[k % io->xcap].msg);
    free(io->x);
    for (size_t k = 0; k < io->nfails; k++)
        free(io->fails[k].msg);
    free(io->fails);
    free(io);
}

void zt_io_get_stats(const zt_io *io, zt_io_stats *s)
{
    *s = io->st;
}

const char *zt_io_path(const zt_io *io)
{
    return io->path;
}

int zt_io_fd(const zt_io *io)
{
    return io->fd;
}
