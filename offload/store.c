/* store.c - see store.h. Per blob: its slot, whether it holds data, and the tickets of its
 * last write and read, so that a read never overtakes the write before it (io_uring may
 * reorder concurrent requests) and a write never overtakes a read of the old contents. */
#include "store.h"
#include "../common/err.h"
#include "../common/prof.h"
#include "../memory/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

typedef struct blob {
    size_t bytes;
    uint64_t off;             /* NVMe slot offset */
    int category, valid;
    void *ram;                /* RAM device: the pool copy */
    int64_t wticket, rticket; /* NVMe: last write / read in flight (0: none) */
    void *rdst;               /* where the read in flight lands */
} blob;

struct zt_store {
    zt_store_opts o;
    zt_io *io;
    blob *b;
    int n, cap;
    uint64_t end;             /* NVMe: next free slot offset */
    uint64_t reserved;        /* bytes posix_fallocate has reserved */
    zt_store_stats st;
};

static int cat_ok(int c)
{
    return c >= 0 && c < ZT_MEM_NCAT && c < 8;
}

void zt_store_opts_init(zt_store_opts *o)
{
    memset(o, 0, sizeof *o);
    o->device = ZT_STORE_RAM;
    zt_io_opts_init(&o->io);
}

int zt_store_open(zt_store **out, const zt_store_opts *o)
{
    *out = NULL;
    if (!o || (o->device != ZT_STORE_RAM && o->device != ZT_STORE_NVME))
        return zt_fail(ZT_E_INVAL, "zt_store_open: device must be RAM or NVMe");
    zt_store *s = calloc(1, sizeof *s);
    if (!s)
        return zt_fail(ZT_E_NOMEM, "zt_store_open: out of memory");
    s->o = *o;
    s->st.device = o->device;
    if (o->device == ZT_STORE_NVME) {
        zt_io_opts io = o->io;
        io.acct = o->acct;
        int rc = zt_io_open(&s->io, o->dir, o->tag, &io);
        if (rc < 0) {
            free(s);
            return rc;
        }
        zt_io_get_stats(s->io, &s->st.io);
        s->reserved = o->io.reserve;
    }
    *out = s;
    return 0;
}

static blob *get_blob(zt_store *s, int id, const char *what)
{
    if (!s || id < 0 || id >= s->n) {
        zt_fail(ZT_E_INVAL, "%s: no blob %d in the store", what, id);
        return NULL;
    }
    return &s->b[id];
}

int zt_store_add(zt_store *s, size_t bytes, int category)
{
    if (!s || !cat_ok(category))
        return zt_fail(ZT_E_INVAL, "zt_store_add: bad store or category %d", category);
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        blob *nb = realloc(s->b, (size_t)nc * sizeof *nb);
        if (!nb)
            return zt_fail(ZT_E_NOMEM, "zt_store_add: out of memory");
        s->b = nb;
        s->cap = nc;
    }
    blob *b = &s->b[s->n];
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    b->category = category;
    if (s->o.device == ZT_STORE_NVME) {
        b->off = s->end;
        s->end += (bytes + ZT_IO_ALIGN - 1) / ZT_IO_ALIGN * ZT_IO_ALIGN;
        s->st.file_bytes = s->end;
    }
    return s->n++;
}

int zt_store_reserve(zt_store *s)
{
    if (!s)
        return zt_fail(ZT_E_INVAL, "zt_store_reserve: no store");
    if (s->o.device != ZT_STORE_NVME || s->end <= s->reserved)
        return 0;
    int fd = zt_io_fd(s->io);
    int e = posix_fallocate(fd, 0, (off_t)s->end);
    if (e == EOPNOTSUPP || e == EINVAL) /* no fallocate here: space is found as written */
        return 0;
    if (e != 0)
        return zt_fail(-e, "offload: cannot reserve %llu bytes for the swap file %s: %s%s",
                       (unsigned long long)s->end, zt_io_path(s->io), strerror(e),
                       e == ENOSPC ? " (the filesystem has no space left; free space or "
                                     "point nvme_path at a larger one)" : "");
    s->reserved = s->end;
    return 0;
}

/* waits for the transfer *ticket (if any) and forgets it, timing the wait */
static int finish(zt_store *s, const blob *b, int64_t *ticket)
{
    if (!*ticket)
        return 0;
    double t0 = zt_prof_now();
    int rc = zt_io_wait(s->io, *ticket);
    s->st.wait_seconds[b->category] += zt_prof_now() - t0;
    ZT_PROF(ZT_PROF_IO_WAIT, t0, 0, 0);
    *ticket = 0;
    return rc;
}

/* the blob's read in flight, if any, has landed */
static int finish_read(zt_store *s, blob *b)
{
    b->rdst = NULL;
    return finish(s, b, &b->rticket);
}

static int finish_write(zt_store *s, blob *b)
{
    int rc = finish(s, b, &b->wticket);
    if (rc < 0)
        b->valid = 0; /* what is in the file is not what was put */
    return rc;
}

int zt_store_put(zt_store *s, int id, const void *src)
{
    blob *b = get_blob(s, id, "zt_store_put");
    if (!b)
        return ZT_E_INVAL;
    if (!src && b->bytes)
        return zt_fail(ZT_E_INVAL, "zt_store_put: no data for blob %d", id);
    if (s->o.device == ZT_STORE_RAM) {
        if (!b->ram && b->bytes) {
            if (!(b->ram = zt_mem_alloc_in(s->o.acct, b->bytes, ZT_ALIGN_CACHE, b->category)))
                return zt_fail(ZT_E_NOMEM, "offload (RAM pool): %zu bytes for blob %d: out "
                               "of memory", b->bytes, id);
            s->st.resident[b->category] += b->bytes;
        }
        if (b->bytes)
            memcpy(b->ram, src, b->bytes);
        b->valid = 1;
        s->st.written_bytes[b->category] += b->bytes;
        return 0;
    }
    ZT_TRY(finish_read(s, b));  /* the old contents may still be on their way out */
    ZT_TRY(finish_write(s, b)); /* one write per slot at a time */
    int64_t t = zt_io_write(s->io, src, b->bytes, b->off);
    if (t < 0)
        return (int)t;
    b->wticket = t;
    b->valid = 1;
    s->st.written_bytes[b->category] += b->bytes;
    return 0;
}

static int start_read(zt_store *s, blob *b, int id, void *dst)
{
    if (!b->valid)
        return zt_fail(ZT_E_INVAL, "offload: blob %d holds no data (never put, dropped, or "
                       "its write failed)", id);
    if (!dst && b->bytes)
        return zt_fail(ZT_E_INVAL, "offload: no buffer for blob %d", id);
    ZT_TRY(finish_write(s, b)); /* never read past the write before */
    int64_t t = zt_io_read(s->io, dst, b->bytes, b->off);
    if (t < 0)
        return (int)t;
    b->rticket = t;
    b->rdst = dst;
    s->st.read_bytes[b->category] += b->bytes;
    return 0;
}

int zt_store_prefetch(zt_store *s, int id, void *dst)
{
    blob *b = get_blob(s, id, "zt_store_prefetch");
    if (!b)
        return ZT_E_INVAL;
    if (s->o.device == ZT_STORE_RAM)
        return 0; /* nothing to gain: get copies from the pool */
    if (b->rticket && b->rdst == dst)
        return 0;
    ZT_TRY(finish_read(s, b));
    return start_read(s, b, id, dst);
}

int zt_store_get(zt_store *s, int id, void *dst)
{
    blob *b = get_blob(s, id, "zt_store_get");
    if (!b)
        return ZT_E_INVAL;
    if (s->o.device == ZT_STORE_RAM) {
        if (!b->valid)
            return zt_fail(ZT_E_INVAL, "offload: blob %d holds no data (never put or dropped)",
                           id);
        if (b->bytes)
            memcpy(dst, b->ram, b->bytes);
        s->st.read_bytes[b->category] += b->bytes;
        return 0;
    }
    if (!(b->rticket && b->rdst == dst)) {
        ZT_TRY(finish_read(s, b));
        ZT_TRY(start_read(s, b, id, dst));
    }
    return finish_read(s, b);
}

int zt_store_wait(zt_store *s, int id)
{
    blob *b = get_blob(s, id, "zt_store_wait");
    if (!b)
        return ZT_E_INVAL;
    if (s->o.device == ZT_STORE_RAM)
        return 0;
    int r1 = finish_read(s, b), r2 = finish_write(s, b);
    return r1 < 0 ? r1 : r2;
}

int zt_store_drop(zt_store *s, int id)
{
    blob *b = get_blob(s, id, "zt_store_drop");
    if (!b)
        return ZT_E_INVAL;
    if (s->o.device == ZT_STORE_RAM) {
        if (b->ram) {
            zt_mem_free_in(s->o.acct, b->ram, b->bytes, b->category);
            s->st.resident[b->category] -= b->bytes;
            b->ram = NULL;
        }
    } else {
        ZT_TRY(zt_store_wait(s, id));
    }
    b->valid = 0;
    return 0;
}

int zt_store_sync(zt_store *s)
{
    if (!s)
        return zt_fail(ZT_E_INVAL, "zt_store_sync: no store");
    int first = 0;
    for (int i = 0; i < s->n; i++) {
        int r = zt_store_wait(s, i);
        if (r < 0 && !first)
            first = r;
    }
    return first;
}

int zt_store_poll(zt_store *s)
{
    if (!s)
        return zt_fail(ZT_E_INVAL, "zt_store_poll: no store");
    return s->io ? zt_io_poll(s->io) : 0;
}

size_t zt_store_blob_bytes(const zt_store *s, int id)
{
    return s && id >= 0 && id < s->n ? s->b[id].bytes : 0;
}

void zt_store_get_stats(const zt_store *s, zt_store_stats *st)
{
    *st = s->st;
    if (s->io)
        zt_io_get_stats(s->io, &st->io);
}

void zt_store_close(zt_store *s)
{
    if (!s)
        return;
    if (s->io)
        zt_store_sync(s);
    for (int i = 0; i < s->n; i++)
        if (s->b[i].ram)
            zt_mem_free_in(s->o.acct, s->b[i].ram, s->b[i].bytes, s->b[i].category);
    zt_io_close(s->io);
    free(s->b);
    free(s);
}
