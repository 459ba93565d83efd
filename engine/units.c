/* units.c - the model-agnostic unit API (zerotrain.h): registering units and parameters,
 * acquiring and releasing them for a trainer's forward and backward passes, recording and
 * checking the order of acquires, and the config.json of a trainer's own model. What a
 * stage does with a unit (gathers, reductions) lives in zero.c; this file decides when. */
#define ZT_EXPERIMENTAL
#include "zerotrain.h"
#include "units.h"
#include "zero.h"
#include "../common/err.h"
#include "../format/fileio.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { PASS_NONE = ZT_PASS_NONE, PASS_FORWARD = ZT_PASS_FORWARD, PASS_EVAL = ZT_PASS_EVAL,
       PASS_BACKWARD = ZT_PASS_BACKWARD };
enum { USE_AHEAD = 0, USE_HELD, USE_RELEASED, USE_DONE }; /* RELEASED: in un->rel */
enum { G_CLOSED = 0, G_OPEN, G_READY };
enum { REC_NONE = 0, REC_ORDER, REC_UNSCHEDULED }; /* recording the order / no order yet */

static const char *const kind_name[2] = {"forward", "backward"};

static const char *purpose_name(int p)
{
    return p == ZT_FOR_FORWARD ? "forward" : p == ZT_FOR_BACKWARD ? "backward"
           : p == ZT_FOR_RECOMPUTE ? "recompute" : "?";
}

static const char *uname(const zt_units *un, int u)
{
    return u >= 0 && u < un->L->n_units ? un->L->units[u].name : "?";
}

void zt_units_init(zt_units *un, zt_layout *L, zt_comm *comm, struct zt_zero *z, int custom)
{
    un->L = L;
    un->comm = comm;
    un->z = z;
    un->custom = custom;
}

/* ---- registration ------------------------------------------------------------------------ */

static int registering(zt_units *un, const char *fn)
{
    if (!un)
        return zt_fail(ZT_E_INVAL, "%s: NULL engine", fn);
    if (un->committed < 0)
        return zt_fail(ZT_E_INVAL, "%s: the engine failed to commit: destroy "
                       "it", fn);
    if (un->committed)
        return zt_fail(ZT_E_INVAL, "%s: the model is fixed once the engine "
                       "has run (its first acquire, step, save or commit): "
                       "register every unit and parameter before", fn);
    return 0;
}

int zt_units_add_unit(zt_units *un, const char *name, int n_params, int *unit)
{
    ZT_TRY(registering(un, "zt_engine_add_unit"));
    if (!name || !*name || strlen(name) >= sizeof un->L->units[0].name || n_params < 1 ||
        !unit)
        return zt_fail(ZT_E_INVAL, "zt_engine_add_unit: needs a name of 1 to "
                       "%zu bytes, n_params >= 1 and unit (got \"%s\", %d)",
                       sizeof un->L->units[0].name - 1,
                       name ? name : "(null)", n_params);
    int nu = un->L->n_units;
    for (int u = 0; u < nu; u++)
        if (strcmp(un->L->units[u].name, name) == 0)
            return zt_fail(ZT_E_INVAL, "zt_engine_add_unit: unit \"%s\" is "
                           "registered already (unit %d)", name, u);
    if (nu > 0) {
        const zt_unit_def *last = &un->L->units[nu - 1];
        if (last->n_params != un->unit_nparams[nu - 1])
            return zt_fail(ZT_E_INVAL, "zt_engine_add_unit \"%s\": unit %d "
                           "\"%s\" was declared with %d parameters and has "
                           "%d", name, nu - 1, last->name,
                           un->unit_nparams[nu - 1], last->n_params);
    }
    int *np = realloc(un->unit_nparams, sizeof *np * (size_t)(nu + 1));
    if (!np)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    un->unit_nparams = np;
    int rc = zt_layout_add_unit(un->L, name);
    if (rc < 0)
        return rc;
    np[rc] = n_params;
    *unit = rc;
    return 0;
}

int zt_units_add_param(zt_units *un, int unit, const zt_param_spec *p, int *index)
{
    const char *fn = "zt_engine_add_param";
    ZT_TRY(registering(un, fn));
    int nu = un->L->n_units;
    if (!p || !p->name || !*p->name || strlen(p->name) >= ZT_NAME_MAX)
        return zt_fail(ZT_E_INVAL, "%s: needs a spec with a name of 1 to %d "
                       "bytes", fn, ZT_NAME_MAX - 1);
    if (nu == 0 || unit != nu - 1)
        return zt_fail(ZT_E_INVAL, "%s \"%s\": parameters are added to the "
                       "last unit added (%d), not unit %d", fn, p->name,
                       nu - 1, unit);
    if (un->L->units[unit].n_params >= un->unit_nparams[unit])
        return zt_fail(ZT_E_INVAL, "%s \"%s\": unit %d \"%s\" was declared "
                       "with %d parameters, all added", fn, p->name, unit,
                       uname(un, unit), un->unit_nparams[unit]);
    if (p->ndim < 1 || p->ndim > 4 || !p->shape)
        return zt_fail(ZT_E_SHAPE, "%s \"%s\": ndim %d: 1 to 4 dimensions "
                       "with a shape", fn, p->name, p->ndim);
    size_t numel = 1;
    for (int k = 0; k < p->ndim; k++) {
        if (p->shape[k] < 1 || (size_t)p->shape[k] > ((size_t)1 << 40) / numel)
            return zt_fail(ZT_E_SHAPE, "%s \"%s\": dimension %d is %lld: "
                           "each must be >= 1 (and the tensor below 2^40 "
                           "elements)", fn, p->name, k,
                           (long long)p->shape[k]);
        numel *= (size_t)p->shape[k];
    }
    if (p->init < ZT_INIT_NORMAL || p->init > ZT_INIT_VALUES ||
        (p->init == ZT_INIT_NORMAL && !(p->std > 0.0f && isfinite(p->std))) ||
        (p->init == ZT_INIT_VALUES && !p->values))
        return zt_fail(ZT_E_INVAL, "%s \"%s\": init %d: ZT_INIT_NORMAL with "
                       "std > 0, ZT_INIT_ZEROS, ZT_INIT_ONES or "
                       "ZT_INIT_VALUES with values", fn, p->name, p->init);
    if (zt_layout_find(un->L, p->name) >= 0 ||
        (p->alias && zt_layout_find(un->L, p->alias) >= 0))
        return zt_fail(ZT_E_INVAL, "%s: the name \"%s\" is registered "
                       "already", fn, zt_layout_find(un->L, p->name) >= 0
                       ? p->name : p->alias);
    if (p->alias && strlen(p->alias) >= ZT_NAME_MAX)
        return zt_fail(ZT_E_INVAL, "%s \"%s\": alias longer than %d bytes",
                       fn, p->name, ZT_NAME_MAX - 1);
    int np = un->L->n_params;
    float **iv = realloc(un->init_vals, sizeof *iv * (size_t)(np + 1));
    if (!iv)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    un->init_vals = iv;
    iv[np] = NULL;
    if (p->init == ZT_INIT_VALUES) {
        if (!(iv[np] = malloc(numel * sizeof(float))))
            return zt_fail(ZT_E_NOMEM, "%s \"%s\": %zu initial values: out "
                           "of memory", fn, p->name, numel);
        memcpy(iv[np], p->values, numel * sizeof(float));
    }
    int i = zt_layout_add_param(un->L, p->name, p->ndim, p->shape,
                                p->init == ZT_INIT_VALUES ? ZT_INIT_ZEROS : p->init,
                                !p->no_decay);
    if (i < 0) {
        free(iv[np]);
        iv[np] = NULL;
        return i;
    }
    zt_param_def *d = &un->L->params[i];
    d->std = p->init == ZT_INIT_NORMAL ? p->std : 0.0f;
    if (p->alias)
        snprintf(d->alias, sizeof d->alias, "%s", p->alias);
    if (index)
        *index = i;
    return 0;
}

int zt_units_add_param_alias(zt_units *un, int index, const char *name)
{
    ZT_TRY(registering(un, "zt_engine_add_param_alias"));
    if (index < 0 || index >= un->L->n_params || !name || !*name ||
        strlen(name) >= ZT_NAME_MAX)
        return zt_fail(ZT_E_INVAL, "zt_engine_add_param_alias: parameter %d "
                       "of %d, name of 1 to %d bytes", index,
                       un->L->n_params, ZT_NAME_MAX - 1);
    if (zt_layout_find(un->L, name) >= 0)
        return zt_fail(ZT_E_INVAL, "zt_engine_add_param_alias: the name "
                       "\"%s\" is registered already", name);
    int rc = zt_layout_add_alias(un->L, index, name);
    return rc < 0 ? rc : 0;
}

void zt_units_free(zt_units *un)
{
    for (int i = 0; un->init_vals && i < un->L->n_params; i++)
        free(un->init_vals[i]);
    free(un->init_vals);
    free(un->unit_nparams);
    free(un->uses);
    free(un->use_state);
    free(un->rel);
    free(un->ord[0].use);
    free(un->ord[1].use);
    free(un->held);
    free(un->gstate);
    free(un->drvP);
    free(un->drvG);
}

/* ---- orders and the schedule -------------------------------------------------------------- */

static int grow_uses(zt_use **a, int *cap, int need)
{
    if (need <= *cap)
        return 0;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    zt_use *n = realloc(*a, sizeof *n * (size_t)c);
    if (!n)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    *a = n;
    *cap = c;
    return 0;
}

/* room for `need` uses in the schedule */
static int sched_room(zt_units *un, int need)
{
    int cap = un->uses_cap;
    ZT_TRY(grow_uses(&un->uses, &un->uses_cap, need));
    if (un->uses_cap != cap || !un->use_state) {
        unsigned char *st = realloc(un->use_state, (size_t)un->uses_cap);
        int *rel = realloc(un->rel, sizeof *rel * (size_t)un->uses_cap);
        if (st)
            un->use_state = st;
        if (rel)
            un->rel = rel;
        if (!st || !rel)
            return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    return 0;
}

static int sched_append(zt_units *un, const zt_use *w, int n)
{
    ZT_TRY(sched_room(un, un->n_uses + n));
    memcpy(un->uses + un->n_uses, w, sizeof *w * (size_t)n);
    memset(un->use_state + un->n_uses, USE_AHEAD, (size_t)n);
    un->n_uses += n;
    return 0;
}

int zt_units_train_schedule(const zt_units *un, zt_use **out)
{
    const zt_order *f = &un->ord[0], *b = &un->ord[1];
    *out = NULL;
    if (!f->known || !b->known)
        return 0;
    if (!(*out = malloc(sizeof **out * (size_t)(f->n + b->n))))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    memcpy(*out, f->use, sizeof **out * (size_t)f->n);
    memcpy(*out + f->n, b->use, sizeof **out * (size_t)b->n);
    return f->n + b->n;
}

/* Every rank's n values (collective): *other = the first rank whose values differ from mine
 * (theirs: its values), or -1. */
static int first_other(zt_units *un, const double *mine, int n, double *theirs, int *other)
{
    int N = un->comm->size;
    *other = -1;
    if (N < 2)
        return 0;
    double *all = malloc(sizeof *all * (size_t)n * (size_t)N);
    if (!all)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    int rc = zt_comm_gather_d(un->comm, mine, all, (size_t)n);
    for (int r = 0; rc == 0 && r < N && *other < 0; r++)
        if (memcmp(all + (size_t)n * r, mine, sizeof *mine * (size_t)n) != 0) {
            *other = r;
            memcpy(theirs, all + (size_t)n * r, sizeof *mine * (size_t)n);
        }
    free(all);
    return rc;
}

/* every rank acquires the same (collective): checked while no order tells stage 3 what
 * comes, so ranks that disagree fail here instead of in mismatched gathers */
static int check_ranks(zt_units *un, int kind, int pos, int u, int purpose)
{
    double mine[3] = {kind, u, purpose}, th[3];
    int r;
    ZT_TRY(first_other(un, mine, 3, th, &r));
    if (r < 0)
        return 0;
    int ru = (int)th[1];
    return zt_fail(ZT_E_INVAL, "the ranks acquire different units: acquire %d of the %s pass is "
                   "unit %d \"%s\" for %s on rank %d and unit %d \"%s\" for %s on rank %d "
                   "(every rank must acquire the same units in the same order)", pos,
                   kind_name[kind], u, uname(un, u), purpose_name(purpose), un->comm->rank, ru,
                   uname(un, ru), purpose_name((int)th[2]), r);
}

/* Ends the pass in progress: what the trainer released and what stage 3 fetched ahead is let
 * go of; a pass whose kind was recording has its order. */
static int end_pass(zt_units *un)
{
    if (un->pass == PASS_NONE)
        return 0;
    if (un->recording == REC_ORDER)
        un->ord[un->pass == PASS_BACKWARD].known = 1;
    un->recording = REC_NONE;
    un->pass = PASS_NONE;
    un->n_uses = un->n_rel = 0;
    zt_zero_pass_begin(un->z); /* (nothing is held: every gathered unit is let go of) */
    return 0;
}

static int held_unit(const zt_units *un)
{
    for (int u = 0; u < un->L->n_units; u++)
        if (un->held[u] > 0)
            return u;
    return -1;
}

int zt_units_pass_close(zt_units *un, const char *what)
{
    if (!un->committed)
        return 0;
    int u = held_unit(un);
    if (u >= 0)
        return zt_fail(ZT_E_INVAL, "%s: unit %d \"%s\" is still acquired: release it first",
                       what, u, uname(un, u));
    if (un->pass == PASS_BACKWARD && un->n_ready < un->L->n_units) {
        for (u = 0; un->gstate[u] == G_READY; u++)
            ;
        return zt_fail(ZT_E_INVAL, "%s before the backward pass is complete: unit %d \"%s\"'s "
                       "gradients are not ready (zt_engine_unit_grads_ready)", what, u,
                       uname(un, u));
    }
    return end_pass(un);
}

int zt_units_abort(zt_units *un, int rc)
{
    if (un->committed <= 0)
        return rc;
    char msg[ZT_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zt_last_error());
    zt_zero_take_back(un->z);
    for (int u = 0; u < un->L->n_units; u++)
        un->held[u] = 0;
    un->n_rel = 0;
    un->recording = REC_NONE; /* (an order half recorded stays unknown) */
    un->pass = PASS_NONE;
    un->n_uses = 0;
    zt_zero_pass_begin(un->z);
    if (rc < 0)
        zt_fail(rc, "%s", msg);
    return rc;
}

/* the backward pass ends when every unit's gradients are ready and no unit is held */
static int maybe_end_backward(zt_units *un)
{
    if (un->pass == PASS_BACKWARD && un->n_ready == un->L->n_units && held_unit(un) < 0)
        return end_pass(un);
    return 0;
}

static int forward_begin(zt_units *un, int eval)
{
    ZT_TRY(zt_units_pass_close(un, "a new forward pass"));
    const zt_order *f = &un->ord[0], *b = &un->ord[1];
    un->n_uses = 0;
    un->recording = REC_NONE;
    if (f->known) {
        ZT_TRY(sched_append(un, f->use, f->n));
        if (!eval && b->known) /* stage 3 prefetches into the backward pass */
            ZT_TRY(sched_append(un, b->use, b->n));
    } else {
        un->recording = eval ? REC_UNSCHEDULED : REC_ORDER;
        if (!eval)
            un->ord[0].n = 0;
    }
    un->pass = eval ? PASS_EVAL : PASS_FORWARD;
    un->pass_base = un->pass_pos = 0;
    return 0;
}

static int backward_begin(zt_units *un)
{
    if (un->recording == REC_ORDER) /* the first forward pass ends: its order */
        un->ord[0].known = 1;
    un->recording = REC_NONE;
    zt_zero_micro_begin(un->z);
    ZT_TRY(zt_zero_flush(un->z)); /* (the forward pass applied any deferred update) */
    ZT_TRY(zt_zero_pass_grads_begin(un->z));
    memset(un->gstate, G_CLOSED, (size_t)un->L->n_units);
    un->n_ready = 0;
    un->pass = PASS_BACKWARD;
    un->pass_base = un->ord[0].n;
    un->pass_pos = 0;
    if (!un->ord[1].known) {
        un->recording = REC_ORDER;
        un->ord[1].n = 0;
        un->n_uses = un->pass_base; /* (the forward order alone was scheduled) */
    } else if (un->n_uses == un->pass_base) { /* scheduled (or recorded) without the backward */
        ZT_TRY(sched_append(un, un->ord[1].use, un->ord[1].n));
    }
    return 0;
}

/* ---- acquire, release, gradients ---------------------------------------------------------- */

/* A recorded order learns when the trainer released each use: the uses in un->rel are let go
 * of before schedule use k, so `until` of each (its order's, where not known yet) is the
 * distance. The schedule is the forward order (uses [0, F)) then the backward order. */
static void note_releases(zt_units *un, int k)
{
    if (un->recording == REC_UNSCHEDULED)
        return;
    for (int i = 0; i < un->n_rel; i++) {
        int r = un->rel[i], f = un->ord[0].n;
        zt_order *o = &un->ord[r < f ? 0 : 1];
        int j = r < f ? r : r - f;
        if (j < o->n && o->use[j].until == 0 && o->use[j].unit == un->uses[r].unit)
            o->use[j].until = k - r;
    }
}

/* Which pass an acquire of unit u belongs to: the one in progress (BEGIN_NONE), a new
 * forward or evaluation pass, or the backward pass after a training forward pass; < 0 when
 * none can follow the pass in progress. */
enum { BEGIN_NONE = 0, BEGIN_FORWARD, BEGIN_BACKWARD };

static int pass_of(const zt_units *un, const char *fn, int u, int base, int eval)
{
    if (base == ZT_FOR_FORWARD) {
        const zt_order *f = &un->ord[0];
        if (un->pass == PASS_NONE || un->pass == PASS_BACKWARD ||
            (un->pass == PASS_EVAL) != eval ||
            (f->known && un->recording == REC_NONE && un->pass_pos >= f->n) ||
            /* evaluation before any order is known: a pass ends where its first unit comes
             * again with nothing held */
            (un->recording == REC_UNSCHEDULED && un->pass_pos > 0 && held_unit(un) < 0 &&
             u == un->uses[0].unit))
            return BEGIN_FORWARD;
        return BEGIN_NONE;
    }
    if (un->pass == PASS_FORWARD)
        return BEGIN_BACKWARD;
    if (un->pass != PASS_BACKWARD || (un->ord[1].known && !un->recording &&
                                      un->pass_pos >= un->ord[1].n))
        return zt_fail(ZT_E_INVAL, "%s: unit %d \"%s\" for %s: a backward "
                       "pass follows a forward pass acquired for training "
                       "(ZT_FOR_FORWARD without ZT_FOR_EVAL)%s", fn, u,
                       uname(un, u), purpose_name(base),
                       un->pass == PASS_BACKWARD
                       ? "; this backward pass is complete" : "");
    return BEGIN_NONE;
}

/* An acquire against the order it must follow (o, at position pos), when no order is being
 * recorded. */
static int check_order(const zt_units *un, const char *fn, const zt_order *o, int kind, int pos,
                       int u, int base)
{
    if (pos < o->n && o->use[pos].unit == u && o->use[pos].purpose == base)
        return 0;
    if (pos >= o->n)
        return zt_fail(ZT_E_INVAL, "%s: the unit order changed: the %s pass's order has %d "
                       "acquires and this is one more (unit %d \"%s\" for %s)", fn,
                       kind_name[kind], o->n, u, uname(un, u), purpose_name(base));
    int ou = o->use[pos].unit;
    return zt_fail(ZT_E_INVAL, "%s: the unit order changed: acquire %d of the %s pass is "
                   "unit %d \"%s\" for %s, where the order (recorded in the first %s "
                   "pass, or declared) has unit %d \"%s\" for %s", fn, pos,
                   kind_name[kind], u, uname(un, u), purpose_name(base), kind_name[kind],
                   ou, uname(un, ou), purpose_name(o->use[pos].purpose));
}

int zt_units_acquire(zt_units *un, int u, int purpose, void **params, float **grads)
{
    const char *fn = "zt_engine_unit_acquire";
    if (params)
        *params = NULL;
    if (grads)
        *grads = NULL;
    if (!un)
        return zt_fail(ZT_E_INVAL, "%s: NULL engine", fn);
    zt_clear_error();
    int base = purpose & ~ZT_FOR_EVAL, kind = base != ZT_FOR_FORWARD;
    if (u < 0 || u >= un->L->n_units)
        return zt_fail(ZT_E_INVAL, "%s: unit %d is not registered (units 0 "
                       "to %d)", fn, u, un->L->n_units - 1);
    if ((base != ZT_FOR_FORWARD && base != ZT_FOR_BACKWARD && base != ZT_FOR_RECOMPUTE) ||
        (kind && (purpose & ZT_FOR_EVAL)))
        return zt_fail(ZT_E_INVAL, "%s: unit %d: purpose %d is not one of "
                       "ZT_FOR_FORWARD (| ZT_FOR_EVAL), ZT_FOR_BACKWARD, "
                       "ZT_FOR_RECOMPUTE", fn, u, purpose);
    if (base == ZT_FOR_BACKWARD && !grads)
        return zt_fail(ZT_E_INVAL, "%s: unit %d for backward: grads must not "
                       "be NULL", fn, u);
    /* the pass this acquire belongs to, where it is checked, and every check, before
     * anything changes */
    int rc, eval = (purpose & ZT_FOR_EVAL) != 0, begin = pass_of(un, fn, u, base, eval);
    if (begin < 0)
        return begin;
    zt_order *o = &un->ord[kind];
    int rec = begin ? (o->known ? REC_NONE : eval ? REC_UNSCHEDULED : REC_ORDER) : un->recording;
    int pos = begin ? 0 : un->pass_pos;
    if (!rec && (rc = check_order(un, fn, o, kind, pos, u, base)) < 0)
        return rc;
    int fresh = begin == BEGIN_BACKWARD || (base == ZT_FOR_BACKWARD && un->gstate[u] == G_CLOSED);
    if (base == ZT_FOR_BACKWARD && !fresh && un->gstate[u] == G_READY)
        return zt_fail(ZT_E_INVAL, "%s: unit %d \"%s\": its gradients were "
                       "made ready already in this backward pass", fn, u,
                       uname(un, u));
    if ((base == ZT_FOR_BACKWARD && fresh && (rc = zt_zero_grads_can_lend(un->z, u)) < 0) ||
        (rec && (rc = check_ranks(un, kind, pos, u, base)) < 0))
        return rc;
    /* the pass changes from here on (a failure now is the machinery's: zt_engine_pass_abort) */
    if ((begin == BEGIN_FORWARD && (rc = forward_begin(un, eval)) < 0) ||
        (begin == BEGIN_BACKWARD && (rc = backward_begin(un)) < 0))
        return rc;
    int k = un->pass_base + pos;
    zt_use w = {u, 0, base};
    if (un->recording) {
        if ((un->recording == REC_ORDER && (rc = grow_uses(&o->use, &o->cap, pos + 1)) < 0) ||
            (rc = sched_append(un, &w, 1)) < 0)
            return rc;
        if (un->recording == REC_ORDER) {
            o->use[pos] = w;
            o->n = pos + 1;
        }
    }
    note_releases(un, k);
    if ((rc = zt_zero_enter(un->z, k, un->rel, un->n_rel)) < 0)
        return rc;
    for (int i = 0; i < un->n_rel; i++)
        un->use_state[un->rel[i]] = USE_DONE;
    un->n_rel = 0;
    if (base == ZT_FOR_BACKWARD && un->gstate[u] == G_CLOSED) {
        if ((rc = zt_zero_grads_lend(un->z, u)) < 0)
            return rc;
        un->gstate[u] = G_OPEN;
    }
    un->use_state[k] = USE_HELD;
    un->held[u]++;
    un->pass_pos++;
    if (params)
        *params = zt_zero_params(un->z, u);
    if (grads && base == ZT_FOR_BACKWARD)
        *grads = zt_zero_grads(un->z, u);
    return 0;
}

int zt_units_release(zt_units *un, int u)
{
    if (!un)
        return zt_fail(ZT_E_INVAL, "zt_engine_unit_release: NULL engine");
    if (u < 0 || u >= un->L->n_units || un->committed <= 0 || un->held[u] == 0)
        return zt_fail(ZT_E_INVAL, "zt_engine_unit_release: unit %d%s%s%s is "
                       "not acquired (released twice?)", u,
                       u >= 0 && u < un->L->n_units ? " \"" : "",
                       u >= 0 && u < un->L->n_units ? uname(un, u) : "",
                       u >= 0 && u < un->L->n_units ? "\"" : "");
    int j = 0;
    while (j < un->n_uses && !(un->uses[j].unit == u && un->use_state[j] == USE_HELD))
        j++;
    un->held[u]--;
    if (j < un->n_uses) { /* (always) let go of at the next acquire, or at the pass's end */
        un->use_state[j] = USE_RELEASED;
        un->rel[un->n_rel++] = j;
    }
    int rc = maybe_end_backward(un);
    if (rc == 0 && un->pass == PASS_EVAL && un->recording == REC_NONE &&
        un->pass_pos >= un->ord[0].n && held_unit(un) < 0)
        rc = end_pass(un); /* an evaluation pass is over: nothing stays gathered */
    return rc < 0 ? rc : 0;
}

int zt_units_grads_ready(zt_units *un, int u)
{
    const char *fn = "zt_engine_unit_grads_ready";
    int rc;
    if (!un)
        return zt_fail(ZT_E_INVAL, "%s: NULL engine", fn);
    if (u < 0 || u >= un->L->n_units)
        return zt_fail(ZT_E_INVAL, "%s: unit %d is not registered (units 0 "
                       "to %d)", fn, u, un->L->n_units - 1);
    if (un->committed <= 0 || un->pass != PASS_BACKWARD || un->gstate[u] != G_OPEN)
        return zt_fail(ZT_E_INVAL, "%s: unit %d \"%s\" %s", fn, u, uname(un, u),
                       un->pass == PASS_BACKWARD && un->gstate[u] == G_READY
                       ? "was made ready already in this backward pass"
                       : "was not acquired for backward in this pass");
    un->gstate[u] = G_READY;
    un->n_ready++;
    /* (the whole-gradient unit: with the last) */
    if (u != zt_zero_whole_grad(un->z) && (rc = zt_zero_grads_reduce(un->z, u)) < 0)
        return rc;
    if (un->n_ready == un->L->n_units) {
        if ((rc = zt_zero_grads_end(un->z)) < 0)
            return rc;
    }
    rc = maybe_end_backward(un);
    return rc < 0 ? rc : 0;
}

int zt_units_set_order(zt_units *un, int kind, const int *units, const int *purposes,
                       const unsigned char *hold, int n)
{
    const char *fn = "zt_engine_set_order";
    if (!un)
        return zt_fail(ZT_E_INVAL, "%s: NULL engine", fn);
    if ((kind != ZT_FOR_FORWARD && kind != ZT_FOR_BACKWARD) || n < 1 || !units || !purposes)
        return zt_fail(ZT_E_INVAL, "%s: kind ZT_FOR_FORWARD or "
                       "ZT_FOR_BACKWARD and n >= 1 units and purposes", fn);
    int ki = kind == ZT_FOR_BACKWARD;
    /* (a training forward pass schedules the backward order after its own) */
    if (ki ? un->pass == PASS_FORWARD || un->pass == PASS_BACKWARD
           : un->pass == PASS_FORWARD || un->pass == PASS_EVAL)
        return zt_fail(ZT_E_INVAL, "%s: between passes only (a %s pass is in "
                       "progress)", fn, un->pass == PASS_BACKWARD ? "backward"
                       : "forward");
    for (int k = 0; k < n; k++)
        if (units[k] < 0 || units[k] >= un->L->n_units ||
            (ki ? purposes[k] != ZT_FOR_BACKWARD && purposes[k] != ZT_FOR_RECOMPUTE
                : purposes[k] != ZT_FOR_FORWARD))
            return zt_fail(ZT_E_INVAL, "%s: entry %d: unit %d (of %d) for %s "
                           "does not belong in a %s pass", fn, k, units[k],
                           un->L->n_units, purpose_name(purposes[k]),
                           kind_name[ki]);
    zt_order *o = &un->ord[ki];
    int rc = grow_uses(&o->use, &o->cap, n);
    if (rc < 0)
        return rc;
    XXH64_state_t *h = XXH64_createState();
    if (!h)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    XXH64_reset(h, (unsigned)ki);
    for (int k = n - 1; k >= 0; k--) /* held with the next: released with it */
        o->use[k] = (zt_use){units[k], hold && hold[k] && k + 1 < n ? o->use[k + 1].until + 1 : 1,
                             purposes[k]};
    for (int k = 0; k < n; k++)
        XXH64_update(h, &o->use[k], sizeof o->use[k]);
    uint64_t x = XXH64_digest(h);
    XXH64_freeState(h);
    o->n = n;
    o->known = 1;
    double mine[3] = {(double)(x >> 32), (double)(x & 0xFFFFFFFFu), n}, th[3];
    int r; /* every rank declared the same order */
    if ((rc = first_other(un, mine, 3, th, &r)) == 0 && r >= 0)
        rc = zt_fail(ZT_E_INVAL, "%s: rank %d declared a different %s order than rank %d (%d "
                     "and %d acquires)", fn, r, kind_name[ki], un->comm->rank, (int)th[2], n);
    if (rc < 0) {
        o->known = 0;
        return rc;
    }
    return 0;
}

/* ---- config.json of a trainer's own model --------------------------------------------------- */

#define UNITS_KEY "zerotrain_units"

int zt_units_config_save(const zt_units *un, const char *path)
{
    cJSON *o = cJSON_CreateObject(), *us = NULL;
    char *txt = NULL;
    int rc = ZT_E_NOMEM;
    if (!o || !cJSON_AddStringToObject(o, "model_type", "zerotrain") ||
        !(us = cJSON_AddArrayToObject(o, UNITS_KEY)))
        goto done;
    for (int u = 0; u < un->L->n_units; u++) {
        const zt_unit_def *ud = &un->L->units[u];
        cJSON *uo = cJSON_CreateObject(), *ps;
        if (!uo || !cJSON_AddItemToArray(us, uo) || !cJSON_AddStringToObject(uo, "name", ud->name) ||
            !(ps = cJSON_AddArrayToObject(uo, "params")))
            goto done;
        for (int i = ud->first_param; i < ud->first_param + ud->n_params; i++) {
            const zt_param_def *d = &un->L->params[i];
            cJSON *po = cJSON_CreateObject(), *sh;
            if (!po || !cJSON_AddItemToArray(ps, po) ||
                !cJSON_AddStringToObject(po, "name", d->name) ||
                !(sh = cJSON_AddArrayToObject(po, "shape")))
                goto done;
            for (int k = 0; k < d->ndim; k++)
                if (!cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d->shape[k])))
                    goto done;
        }
    }
    if (!(txt = cJSON_Print(o)))
        goto done;
    {
        size_t len = strlen(txt);
        txt[len] = '\n'; /* (cJSON_Print leaves room for the terminator only: write len) */
        const void *parts[1] = {txt};
        rc = zt_file_write_atomic(path, parts, &len, 1);
        txt[len] = 0;
    }
done:
    if (rc == ZT_E_NOMEM)
        rc = zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
    free(txt);
    cJSON_Delete(o);
    return rc;
}

int zt_units_config_check(const zt_units *un, const char *path)
{
    char *txt = NULL;
    size_t len = 0;
    int rc = zt_file_read_all(path, 64u << 20, &txt, &len);
    if (rc < 0)
        return rc;
    cJSON *o = cJSON_ParseWithLength(txt, len);
    const cJSON *us = cJSON_GetObjectItemCaseSensitive(o, UNITS_KEY), *uo;
    free(txt);
    if (!o || !cJSON_IsArray(us)) {
        cJSON_Delete(o);
        return zt_fail(ZT_E_FORMAT, "%s: not the config of a model registered through the "
                       "unit API (no \"%s\" list)", path, UNITS_KEY);
    }
    int u = 0;
    rc = 0;
    cJSON_ArrayForEach(uo, us) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(uo, "name");
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(uo, "params"), *po;
        if (u >= un->L->n_units) {
            u++;
            continue;
        }
        const zt_unit_def *ud = &un->L->units[u];
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, ud->name) != 0 ||
            !cJSON_IsArray(ps) || cJSON_GetArraySize(ps) != ud->n_params) {
            rc = zt_fail(ZT_E_SHAPE, "%s: unit %d is \"%s\" with %d parameters there and \"%s\" "
                         "with %d here", path, u, cJSON_IsString(nm) ? nm->valuestring : "?",
                         cJSON_IsArray(ps) ? cJSON_GetArraySize(ps) : -1, ud->name,
                         ud->n_params);
            break;
        }
        int i = ud->first_param;
        cJSON_ArrayForEach(po, ps) {
            const zt_param_def *d = &un->L->params[i++];
            const cJSON *pn = cJSON_GetObjectItemCaseSensitive(po, "name");
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(po, "shape");
            int same = cJSON_IsString(pn) && strcmp(pn->valuestring, d->name) == 0 &&
                       cJSON_IsArray(sh) && cJSON_GetArraySize(sh) == d->ndim;
            for (int k = 0; same && k < d->ndim; k++) {
                const cJSON *x = cJSON_GetArrayItem(sh, k);
                same = cJSON_IsNumber(x) && x->valuedouble == (double)d->shape[k];
            }
            if (!same) {
                rc = zt_fail(ZT_E_SHAPE, "%s: parameter %d of unit \"%s\" differs from this "
                             "engine's \"%s\" (name or shape)", path, i - 1 - ud->first_param,
                             ud->name, d->name);
                break;
            }
        }
        if (rc < 0)
            break;
        u++;
    }
    if (rc == 0 && u != un->L->n_units)
        rc = zt_fail(ZT_E_SHAPE, "%s: the checkpoint's model has %d units, this engine's %d",
                     path, u, un->L->n_units);
    cJSON_Delete(o);
    return rc;
}
