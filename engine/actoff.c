/* actoff.c - activation checkpoint offload: the outputs of ZT_KEEP_OFFLOAD layers (the next
 * layer's kept input) go to a store once the next layer's forward has read them, and come
 * back ahead of the backward pass, in reverse. The model lets several outputs share a
 * buffer (three, by ordinal); this file tracks what each buffer holds, so a buffer is only
 * written when its previous contents are saved, and only read into when no step before the
 * read's use still needs it. Same bits as keeping the outputs in RAM. */
#include "engine_impl.h"
#include "stores.h"
#include "../offload/store.h"
#include "../memory/mem.h"

#include <stdlib.h>
#include <string.h>

static zt_cslot *slot_for(zt_engine *e, const float *p)
{
    for (int i = 0; i < e->n_cslot; i++)
        if (e->cslot[i].p == p)
            return &e->cslot[i];
    return NULL;
}

static zt_cslot *slot_of_unit(zt_engine *e, int u)
{
    size_t bytes;
    if (u < 0 || u >= e->layout.n_units || !e->cblob || e->cblob[u] < 0)
        return NULL;
    return slot_for(e, e->ops->checkpoint(e->model, u, &bytes));
}

/* the slot's transfers are over (its contents may be overwritten) */
static int slot_quiet(zt_engine *e, zt_cslot *s)
{
    if (s->holder >= 0 && (s->putting || s->loading))
        ZT_TRY(zt_store_wait(e->cstore, e->cblob[s->holder]));
    s->putting = s->loading = 0;
    return 0;
}

void zt_act_close(zt_engine *e)
{
    zt_store_close(e->cstore);
    e->cstore = NULL;
    free(e->cblob);
    e->cblob = NULL;
    e->n_cslot = 0;
    e->cbytes = 0;
}

int zt_act_begin(zt_engine *e, int train)
{
    int nu = e->layout.n_units, any = 0, known = 1;
    size_t bytes = 0, b;
    float *p;
    e->ctrain = train;
    if (!e->ops->checkpoint)
        return 0;
    for (int u = 0; u < nu; u++)
        if ((p = e->ops->checkpoint(e->model, u, &b))) {
            any = 1;
            bytes = b;
            known &= slot_for(e, p) != NULL && e->cblob && e->cblob[u] >= 0;
        }
    if (!any) {
        if (e->cstore)
            zt_act_close(e);
        return 0;
    }
    if (e->cstore && bytes == e->cbytes && known) { /* the same buffers: what was under way
                                                     * is done */
        ZT_TRY(zt_store_sync(e->cstore));
        for (int i = 0; i < e->n_cslot; i++)
            e->cslot[i] = (zt_cslot){e->cslot[i].p, -1, 0, 0};
        return 0;
    }
    zt_act_close(e); /* re-carved (a larger batch, more threads): blobs and buffers anew */
    ZT_TRY(zt_offload_store_open(&e->cfg, e->nvme_path, e->comm.rank,
                                 e->nvme_path[0] ? ZT_OFFLOAD_NVME : ZT_OFFLOAD_CPU, "acts",
                                 &e->cstore));
    if (!(e->cblob = malloc((size_t)nu * sizeof *e->cblob))) {
        zt_act_close(e);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    e->cbytes = bytes;
    for (int u = 0; u < nu; u++) {
        p = e->ops->checkpoint(e->model, u, &b);
        e->cblob[u] = -1;
        if (!p)
            continue;
        if ((e->cblob[u] = zt_store_add(e->cstore, bytes, ZT_MEM_ACTIVATIONS)) < 0) {
            int rc = e->cblob[u];
            zt_act_close(e);
            return zt_fail(rc, "activation offload: cannot declare unit %d's output", u);
        }
        if (!slot_for(e, p)) {
            if (e->n_cslot == (int)(sizeof e->cslot / sizeof e->cslot[0])) {
                zt_act_close(e);
                return zt_fail(ZT_E_INVAL, "activation offload: the model shares more than "
                               "%d buffers", (int)(sizeof e->cslot / sizeof e->cslot[0]));
            }
            e->cslot[e->n_cslot++] = (zt_cslot){p, -1, 0, 0};
        }
    }
    int rc = zt_store_reserve(e->cstore);
    if (rc < 0) {
        zt_act_close(e);
        return zt_fail_wrap(rc, "activation offload");
    }
    return 0;
}

/* unit j's output in its buffer (read back, waiting for a read ahead already started) */
static int present(zt_engine *e, int j)
{
    zt_cslot *s = slot_of_unit(e, j);
    if (!s)
        return 0;
    if (s->holder == j) {
        if (s->loading)
            ZT_TRY(zt_store_get(e->cstore, e->cblob[j], s->p));
        s->loading = 0;
        return 0;
    }
    ZT_TRY(slot_quiet(e, s));
    s->holder = j;
    return zt_store_get(e->cstore, e->cblob[j], s->p);
}

int zt_act_before(zt_engine *e, int op, int u)
{
    zt_cslot *s;
    if (!e->cstore)
        return 0;
    ZT_TRY(present(e, u - 1));
    if (op != ZT_STEP_BACKWARD && (s = slot_of_unit(e, u))) { /* u's output goes here */
        ZT_TRY(slot_quiet(e, s));
        s->holder = -1;
    }
    return 0;
}

/* does a step in (from, to] read unit j's output, or write into buffer s? */
static int needed(const zt_engine *e, int from, int to, int j, const zt_cslot *s)
{
    for (int k = from + 1; k <= to && k < e->n_bsteps; k++) {
        int v = e->bsteps[k].unit;
        if (j >= 0 && v - 1 == j)
            return 1;
        if (e->bsteps[k].op == ZT_STEP_RECOMPUTE && slot_of_unit((zt_engine *)e, v) == s)
            return 1;
    }
    return 0;
}

int zt_act_after(zt_engine *e, int op, int u, int k)
{
    zt_cslot *s;
    if (!e->cstore)
        return 0;
    if (op == 0 || op == ZT_STEP_RECOMPUTE) {
        if ((s = slot_of_unit(e, u))) {
            s->holder = u;
            if (op == 0 && e->ctrain) { /* read by the next unit now, by the backward later */
                ZT_TRY(zt_store_put(e->cstore, e->cblob[u], s->p));
                s->putting = 1;
            }
        }
        if (op == 0)
            return 0;
    }
    /* the backward pass: read ahead the next output a step needs that is not in its buffer,
     * when nothing before that step still needs the buffer */
    for (int q = k + 1; q < e->n_bsteps; q++) {
        int j = e->bsteps[q].unit - 1;
        if (!(s = slot_of_unit(e, j)) || s->holder == j)
            continue;
        if (needed(e, k, q - 1, s->holder, s) ||
            (e->bsteps[q].op == ZT_STEP_RECOMPUTE && slot_of_unit(e, j + 1) == s))
            return 0;
        ZT_TRY(slot_quiet(e, s));
        ZT_TRY(zt_store_prefetch(e->cstore, e->cblob[j], s->p));
        s->holder = j;
        s->loading = 1;
        return 0;
    }
    return 0;
}
