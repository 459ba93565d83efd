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
    for (int i = 0; i < e->ao.n_slot; i++)
        if (e->ao.slot[i].p == p)
            return &e->ao.slot[i];
    return NULL;
}

static zt_cslot *slot_of_unit(zt_engine *e, int u)
{
    size_t bytes;
    if (u < 0 || u >= e->layout.n_units || !e->ao.blob || e->ao.blob[u] < 0)
        return NULL;
    return slot_for(e, e->ops->checkpoint(e->model, u, &bytes));
}

/* the slot's transfers are over (its contents may be overwritten) */
static int slot_quiet(zt_engine *e, zt_cslot *s)
{
    if (s->holder >= 0 && (s->putting || s->loading))
        ZT_TRY(zt_store_wait(e->ao.store, e->ao.blob[s->holder]));
    s->putting = s->loading = 0;
    return 0;
}

void zt_act_close(zt_engine *e)
{
    zt_store_close(e->ao.store);
    e->ao.store = NULL;
    free(e->ao.blob);
    e->ao.blob = NULL;
    e->ao.n_slot = 0;
    e->ao.bytes = 0;
}

int zt_act_begin(zt_engine *e, int train)
{
    int nu = e->layout.n_units, any = 0, known = 1;
    size_t bytes = 0, b;
    float *p;
    e->ao.train = train;
    if (!e->ops->checkpoint)
        return 0;
    for (int u = 0; u < nu; u++)
        if ((p = e->ops->checkpoint(e->model, u, &b))) {
            any = 1;
            bytes = b;
            known &= slot_for(e, p) != NULL && e->ao.blob && e->ao.blob[u] >= 0;
        }
    if (!any) {
        if (e->ao.store)
            zt_act_close(e);
        return 0;
    }
    if (e->ao.store && bytes == e->ao.bytes && known) { /* the same buffers: what was under way
                                                     * is done */
        ZT_TRY(zt_store_sync(e->ao.store));
        for (int i = 0; i < e->ao.n_slot; i++)
            e->ao.slot[i] = (zt_cslot){e->ao.slot[i].p, -1, 0, 0};
        return 0;
    }
    zt_act_close(e); /* re-carved (a larger batch, more threads): blobs and buffers anew */
    ZT_TRY(zt_offload_store_open(&e->cfg, e->nvme_path, e->comm.rank,
                                 e->nvme_path[0] ? ZT_OFFLOAD_NVME : ZT_OFFLOAD_CPU, "acts",
                                 &e->ao.store));
    if (!(e->ao.blob = malloc((size_t)nu * sizeof *e->ao.blob))) {
        zt_act_close(e);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    e->ao.bytes = bytes;
    for (int u = 0; u < nu; u++) {
        p = e->ops->checkpoint(e->model, u, &b);
        e->ao.blob[u] = -1;
        if (!p)
            continue;
        if ((e->ao.blob[u] = zt_store_add(e->ao.store, bytes, ZT_MEM_ACTIVATIONS)) < 0) {
            int rc = e->ao.blob[u];
            zt_act_close(e);
            return zt_fail(rc, "activation offload: cannot declare unit %d's output", u);
        }
        if (!slot_for(e, p)) {
            if (e->ao.n_slot == (int)(sizeof e->ao.slot / sizeof e->ao.slot[0])) {
                zt_act_close(e);
                return zt_fail(ZT_E_INVAL, "activation offload: the model shares more than "
                               "%d buffers", (int)(sizeof e->ao.slot / sizeof e->ao.slot[0]));
            }
            e->ao.slot[e->ao.n_slot++] = (zt_cslot){p, -1, 0, 0};
        }
    }
    int rc = zt_store_reserve(e->ao.store);
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
            ZT_TRY(zt_store_get(e->ao.store, e->ao.blob[j], s->p));
        s->loading = 0;
        return 0;
    }
    ZT_TRY(slot_quiet(e, s));
    s->holder = j;
    return zt_store_get(e->ao.store, e->ao.blob[j], s->p);
}

int zt_act_before(zt_engine *e, int op, int u)
{
    zt_cslot *s;
    if (!e->ao.store)
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
    for (int k = from + 1; k <= to && k < e->rc.n_bsteps; k++) {
        int v = e->rc.bsteps[k].unit;
        if (j >= 0 && v - 1 == j)
            return 1;
        if (e->rc.bsteps[k].op == ZT_STEP_RECOMPUTE && slot_of_unit((zt_engine *)e, v) == s)
            return 1;
    }
    return 0;
}

int zt_act_after(zt_engine *e, int op, int u, int k)
{
    zt_cslot *s;
    if (!e->ao.store)
        return 0;
    if (op == 0 || op == ZT_STEP_RECOMPUTE) {
        if ((s = slot_of_unit(e, u))) {
            s->holder = u;
            if (op == 0 && e->ao.train) { /* read by the next unit now, by the backward later */
                ZT_TRY(zt_store_put(e->ao.store, e->ao.blob[u], s->p));
                s->putting = 1;
            }
        }
        if (op == 0)
            return 0;
    }
    /* the backward pass: read ahead the next output a step needs that is not in its buffer,
     * when nothing before that step still needs the buffer */
    for (int q = k + 1; q < e->rc.n_bsteps; q++) {
        int j = e->rc.bsteps[q].unit - 1;
        if (!(s = slot_of_unit(e, j)) || s->holder == j)
            continue;
        if (needed(e, k, q - 1, s->holder, s) ||
            (e->rc.bsteps[q].op == ZT_STEP_RECOMPUTE && slot_of_unit(e, j + 1) == s))
            return 0;
        ZT_TRY(slot_quiet(e, s));
        ZT_TRY(zt_store_prefetch(e->ao.store, e->ao.blob[j], s->p));
        s->holder = j;
        s->loading = 1;
        return 0;
    }
    return 0;
}
