/* actoff.c - activation checkpoint offload: the outputs of ZT_KEEP_OFFLOAD layers (the next
 * layer's kept input) go to a store once the next layer's forward has read them, and come
 * back ahead of the backward pass, in reverse. The model lets several outputs share a
 * buffer (three, by ordinal); this file tracks what each buffer holds, so a buffer is only
 * written when its previous contents are saved, and only read into when no step before the
 * read's use still needs it. Same bits as keeping the outputs in RAM. Sees no engine: the
 * model, the backward steps and the store settings are given at zt_act_init. */
#include "actoff.h"
#include "stores.h"
#include "../common/err.h"
#include "../offload/store.h"
#include "../memory/mem.h"

#include <stdlib.h>
#include <string.h>

static zt_cslot *slot_for(zt_actoff *ao, const void *p)
{
    for (int i = 0; i < ao->n_slot; i++)
        if (ao->slot[i].p == p)
            return &ao->slot[i];
    return NULL;
}

static zt_cslot *slot_of_unit(zt_actoff *ao, int u)
{
    size_t bytes;
    if (u < 0 || u >= ao->n_units || !ao->blob || ao->blob[u] < 0)
        return NULL;
    return slot_for(ao, ao->ops->checkpoint(ao->model, u, &bytes));
}

/* the slot's transfers are over (its contents may be overwritten) */
static int slot_quiet(zt_actoff *ao, zt_cslot *s)
{
    if (s->holder >= 0 && (s->putting || s->loading))
        ZT_TRY(zt_store_wait(ao->store, ao->blob[s->holder]));
    s->putting = s->loading = 0;
    return 0;
}

void zt_act_init(zt_actoff *ao, const zt_config *cfg, const char *dir, int rank, int n_units,
                 const zt_model_ops *ops, void *model, const zt_rplan *rc, zt_mem_account *acct)
{
    memset(ao, 0, sizeof *ao);
    ao->acct = acct;
    ao->cfg = cfg;
    ao->dir = dir;
    ao->rank = rank;
    ao->n_units = n_units;
    ao->ops = ops;
    ao->model = model;
    ao->rc = rc;
}

void zt_act_close(zt_actoff *ao)
{
    zt_store_close(ao->store);
    ao->store = NULL;
    free(ao->blob);
    ao->blob = NULL;
    ao->n_slot = 0;
    ao->bytes = 0;
}

int zt_act_begin(zt_actoff *ao, int train)
{
    int nu = ao->n_units, any = 0, known = 1;
    size_t bytes = 0, b;
    void *p;
    ao->train = train;
    if (!ao->ops->checkpoint)
        return 0;
    for (int u = 0; u < nu; u++)
        if ((p = ao->ops->checkpoint(ao->model, u, &b))) {
            any = 1;
            bytes = b;
            known &= slot_for(ao, p) != NULL && ao->blob && ao->blob[u] >= 0;
        }
    if (!any) {
        if (ao->store)
            zt_act_close(ao);
        return 0;
    }
    if (ao->store && bytes == ao->bytes && known) { /* the same buffers: what was under way
                                                     * is done */
        ZT_TRY(zt_store_sync(ao->store));
        for (int i = 0; i < ao->n_slot; i++)
            ao->slot[i] = (zt_cslot){ao->slot[i].p, -1, 0, 0};
        return 0;
    }
    zt_act_close(ao); /* re-carved (a larger batch, more threads): blobs and buffers anew */
    ZT_TRY(zt_offload_store_open(ao->cfg, ao->dir, ao->rank,
                                 ao->dir[0] ? ZT_OFFLOAD_NVME : ZT_OFFLOAD_CPU, "acts", ao->acct,
                                 &ao->store));
    if (!(ao->blob = malloc((size_t)nu * sizeof *ao->blob))) {
        zt_act_close(ao);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    ao->bytes = bytes;
    for (int u = 0; u < nu; u++) {
        p = ao->ops->checkpoint(ao->model, u, &b);
        ao->blob[u] = -1;
        if (!p)
            continue;
        if ((ao->blob[u] = zt_store_add(ao->store, bytes, ZT_MEM_ACTIVATIONS)) < 0) {
            int rc = ao->blob[u];
            zt_act_close(ao);
            return zt_fail(rc, "activation offload: cannot declare unit %d's output", u);
        }
        if (!slot_for(ao, p)) {
            if (ao->n_slot == (int)(sizeof ao->slot / sizeof ao->slot[0])) {
                zt_act_close(ao);
                return zt_fail(ZT_E_INVAL, "activation offload: the model shares more than "
                               "%d buffers", (int)(sizeof ao->slot / sizeof ao->slot[0]));
            }
            ao->slot[ao->n_slot++] = (zt_cslot){p, -1, 0, 0};
        }
    }
    int rc = zt_store_reserve(ao->store);
    if (rc < 0) {
        zt_act_close(ao);
        return zt_fail_wrap(rc, "activation offload");
    }
    return 0;
}

/* unit j's output in its buffer (read back, waiting for a read ahead already started) */
static int present(zt_actoff *ao, int j)
{
    zt_cslot *s = slot_of_unit(ao, j);
    if (!s)
        return 0;
    if (s->holder == j) {
        if (s->loading)
            ZT_TRY(zt_store_get(ao->store, ao->blob[j], s->p));
        s->loading = 0;
        return 0;
    }
    ZT_TRY(slot_quiet(ao, s));
    s->holder = j;
    return zt_store_get(ao->store, ao->blob[j], s->p);
}

int zt_act_before(zt_actoff *ao, int op, int u)
{
    zt_cslot *s;
    if (!ao->store)
        return 0;
    ZT_TRY(present(ao, u - 1));
    if (op != ZT_STEP_BACKWARD && (s = slot_of_unit(ao, u))) { /* u's output goes here */
        ZT_TRY(slot_quiet(ao, s));
        s->holder = -1;
    }
    return 0;
}

/* does a step in (from, to] read unit j's output, or write into buffer s? */
static int needed(const zt_actoff *ao, int from, int to, int j, const zt_cslot *s)
{
    for (int k = from + 1; k <= to && k < ao->rc->n_bsteps; k++) {
        int v = ao->rc->bsteps[k].unit;
        if (j >= 0 && v - 1 == j)
            return 1;
        if (ao->rc->bsteps[k].op == ZT_STEP_RECOMPUTE && slot_of_unit((zt_actoff *)ao, v) == s)
            return 1;
    }
    return 0;
}

int zt_act_after(zt_actoff *ao, int op, int u, int k)
{
    zt_cslot *s;
    if (!ao->store)
        return 0;
    if (op == 0 || op == ZT_STEP_RECOMPUTE) {
        if ((s = slot_of_unit(ao, u))) {
            s->holder = u;
            if (op == 0 && ao->train) { /* read by the next unit now, by the backward later */
                ZT_TRY(zt_store_put(ao->store, ao->blob[u], s->p));
                s->putting = 1;
            }
        }
        if (op == 0)
            return 0;
    }
    /* the backward pass: read ahead the next output a step needs that is not in its buffer,
     * when nothing before that step still needs the buffer */
    for (int q = k + 1; q < ao->rc->n_bsteps; q++) {
        int j = ao->rc->bsteps[q].unit - 1;
        if (!(s = slot_of_unit(ao, j)) || s->holder == j)
            continue;
        if (needed(ao, k, q - 1, s->holder, s) ||
            (ao->rc->bsteps[q].op == ZT_STEP_RECOMPUTE && slot_of_unit(ao, j + 1) == s))
            return 0;
        ZT_TRY(slot_quiet(ao, s));
        ZT_TRY(zt_store_prefetch(ao->store, ao->blob[j], s->p));
        s->holder = j;
        s->loading = 1;
        return 0;
    }
    return 0;
}
