/* layout.c - builds a model's parameter table: units of back-to-back parameters, each
 * starting on a ZT_PARAM_ALIGN-float boundary. Knows nothing of shards (engine/ pads). */
#include "model.h"
#include "../common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

int zt_layout_add_unit(zt_layout *l, const char *name)
{
    zt_unit_def *u = realloc(l->units, sizeof *u * (size_t)(l->n_units + 1));
    if (!u)
        return zt_fail(ZT_E_NOMEM, "out of memory building the unit table");
    l->units = u;
    u += l->n_units;
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->first_param = l->n_params;
    return l->n_units++;
}

int zt_layout_add_param(zt_layout *l, const char *name, int ndim, const int64_t *shape, int init,
                        int decay)
{
    zt_unit_def *u;
    zt_param_def *p;
    if (l->n_units == 0 || ndim < 1 || ndim > 4)
        return zt_fail(ZT_E_INVAL, "layout: parameter %s added without a unit", name);
    p = realloc(l->params, sizeof *p * (size_t)(l->n_params + 1));
    if (!p)
        return zt_fail(ZT_E_NOMEM, "out of memory building the parameter table");
    l->params = p;
    p += l->n_params;
    u = &l->units[l->n_units - 1];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->unit = l->n_units - 1;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->offset = round_up(u->numel, ZT_PARAM_ALIGN);
    u->numel = p->offset + p->numel;
    p->init = init;
    p->decay = decay;
    p->pad_row = -1;
    u->n_params++;
    return l->n_params++;
}

void zt_layout_free(zt_layout *l)
{
    if (!l)
        return;
    free(l->params);
    free(l->units);
    free(l->aliases);
    memset(l, 0, sizeof *l);
}

int zt_layout_add_alias(zt_layout *l, int param, const char *name)
{
    zt_alias *a = realloc(l->aliases, sizeof *a * (size_t)(l->n_aliases + 1));
    if (!a)
        return zt_fail(ZT_E_NOMEM, "out of memory building the parameter table");
    l->aliases = a;
    a += l->n_aliases++;
    snprintf(a->name, sizeof a->name, "%s", name);
    a->param = param;
    return 0;
}

int zt_layout_find(const zt_layout *l, const char *name)
{
    for (int i = 0; i < l->n_params; i++)
        if (strcmp(l->params[i].name, name) == 0 ||
            (l->params[i].alias[0] && strcmp(l->params[i].alias, name) == 0))
            return i;
    for (int i = 0; i < l->n_aliases; i++)
        if (strcmp(l->aliases[i].name, name) == 0)
            return l->aliases[i].param;
    return -1;
}
