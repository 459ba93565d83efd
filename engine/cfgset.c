/* cfgset.c - zt_config by field name (zt_config_init, zt_config_set, zt_config_get,
 * zt_config_key, and the lines the ranks compare), over the one field list of config.c: for
 * language bindings, which then need not mirror the struct's layout. It validates values as
 * text of their type only; the engine checks the whole config when it is created. */
#include "zerotrain.h"
#include "config.h"
#include "../common/err.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

size_t zt_config_size(void) { return sizeof(zt_config); }

void zt_config_init(zt_config *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < zt_cfg_n_fields; i++) {
        const zt_cfg_field *f = &zt_cfg_fields[i];
        char *p = (char *)c + f->off;
        switch (f->type) {
        case ZT_CF_INT: case ZT_CF_ENUM: *(int *)p = (int)f->def; break;
        case ZT_CF_SIZE: *(size_t *)p = (size_t)f->def; break;
        case ZT_CF_U64: *(uint64_t *)p = (uint64_t)f->def; break;
        case ZT_CF_FLOAT: *(float *)p = (float)f->def; break;
        case ZT_CF_DOUBLE: *(double *)p = f->def; break;
        default: break; /* strings and patterns: NULL */
        }
    }
}

/* the i-th field zt_config_set takes (the pattern arrays are not among them) */
static const zt_cfg_field *settable(int i)
{
    for (int j = 0; j < zt_cfg_n_fields && i >= 0; j++)
        if (zt_cfg_fields[j].type != ZT_CF_PATTERNS && i-- == 0)
            return &zt_cfg_fields[j];
    return NULL;
}

const char *zt_config_key(int i)
{
    const zt_cfg_field *f = settable(i);
    return f ? f->name : NULL;
}

static const zt_cfg_field *find(const char *name)
{
    const zt_cfg_field *f = zt_cfg_field_find(name);
    return f && f->type != ZT_CF_PATTERNS ? f : NULL;
}

int zt_config_set(zt_config *c, const char *name, const char *value)
{
    const zt_cfg_field *k;
    char *end = NULL;
    if (!c || !name || !value)
        return zt_fail(ZT_E_INVAL, "zt_config_set: NULL argument");
    if (!(k = find(name)))
        return zt_fail(ZT_E_CONFIG, "zt_config_set: no key \"%s\" (zt_config_key lists them)",
                       name);
    char *p = (char *)c + k->off;
    errno = 0;
    switch (k->type) {
    case ZT_CF_STR: /* borrowed, as zt_config's strings are */
        *(const char **)p = *value ? value : NULL;
        return 0;
    case ZT_CF_ENUM:
        for (int v = 0; k->names[v]; v++)
            if (strcmp(k->names[v], value) == 0) {
                *(int *)p = v;
                return 0;
            }
    {
        char list[128] = "";
        for (int v = 0; k->names[v]; v++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", v ? ", " : "",
                     k->names[v]);
        return zt_fail(ZT_E_CONFIG, "zt_config_set: %s \"%s\": one of %s", name, value, list);
    }
    case ZT_CF_INT: {
        long x = strtol(value, &end, 10);
        if (*value && !*end && !errno && x >= -2147483647L - 1 && x <= 2147483647L) {
            *(int *)p = (int)x;
            return 0;
        }
        break;
    }
    case ZT_CF_SIZE:
    case ZT_CF_U64: {
        unsigned long long x = strtoull(value, &end, 10);
        if (*value && *value != '-' && !*end && !errno) {
            if (k->type == ZT_CF_SIZE)
                *(size_t *)p = (size_t)x;
            else
                *(uint64_t *)p = (uint64_t)x;
            return 0;
        }
        break;
    }
    default: {
        /* lr "none" / "None" / "null": no lr, the 0 Adafactor's relative steps need (Python
         * passes str(None)) */
        if ((k->flags & ZT_CF_NONE_IS_0) &&
            (strcmp(value, "none") == 0 || strcmp(value, "None") == 0 ||
             strcmp(value, "null") == 0)) {
            *(float *)p = 0.0f;
            return 0;
        }
        double x = strtod(value, &end);
        if (*value && !*end && !errno && isfinite(x) &&
            (k->type != ZT_CF_FLOAT || isfinite((float)x))) {
            if (k->type == ZT_CF_FLOAT)
                *(float *)p = (float)x;
            else
                *(double *)p = x;
            return 0;
        }
        break;
    }
    }
    return zt_fail(ZT_E_CONFIG, "zt_config_set: %s \"%s\" is not %s", name, value,
                   k->type == ZT_CF_INT ? "an integer"
                   : k->type == ZT_CF_SIZE || k->type == ZT_CF_U64 ? "a non-negative integer"
                                                                   : "a finite number");
}

/* field k of c as zt_config_set reads it back; bytes written (without the NUL) */
static int format(const zt_config *c, const zt_cfg_field *k, char *v, size_t n)
{
    const char *p = (const char *)c + k->off;
    switch (k->type) {
    case ZT_CF_INT: return snprintf(v, n, "%d", *(const int *)p);
    case ZT_CF_SIZE: return snprintf(v, n, "%zu", *(const size_t *)p);
    case ZT_CF_U64: return snprintf(v, n, "%" PRIu64, *(const uint64_t *)p);
    case ZT_CF_FLOAT: return snprintf(v, n, "%.9g", (double)*(const float *)p);
    case ZT_CF_DOUBLE: return snprintf(v, n, "%.17g", *(const double *)p);
    case ZT_CF_STR: {
        const char *str = *(const char *const *)p;
        return snprintf(v, n, "%s", str ? str : "");
    }
    default: {
        int x = *(const int *)p, nv = 0;
        while (k->names[nv])
            nv++;
        return snprintf(v, n, "%s", x >= 0 && x < nv ? k->names[x] : "?");
    }
    }
}

int zt_config_get(const zt_config *c, const char *name, char *buf, size_t n)
{
    const zt_cfg_field *k;
    if (!c || !name || (!buf && n))
        return zt_fail(ZT_E_INVAL, "zt_config_get: NULL argument");
    if (!(k = find(name)))
        return zt_fail(ZT_E_CONFIG, "zt_config_get: no key \"%s\" (zt_config_key lists them)",
                       name);
    int w = format(c, k, buf, n);
    if (w < 0 || (size_t)w >= n)
        return zt_fail(ZT_E_NOMEM, "zt_config_get: %s: the value needs %d bytes", name, w + 1);
    return w;
}

/* "name=value" lines of every field that must be the same on every rank: all but the
 * strings (paths may differ between ranks; the model is compared by its shape) and the
 * thread count. */
int zt_config_describe(const zt_config *c, char *buf, size_t n)
{
    size_t at = 0;
    for (int i = 0; i < zt_cfg_n_fields; i++) {
        const zt_cfg_field *k = &zt_cfg_fields[i];
        char v[64];
        if (k->type == ZT_CF_STR || k->type == ZT_CF_PATTERNS || (k->flags & ZT_CF_LOCAL))
            continue;
        format(c, k, v, sizeof v);
        int w = snprintf(buf + at, at < n ? n - at : 0, "%s=%s\n", k->name, v);
        if (w < 0 || at + (size_t)w >= n)
            return zt_fail(ZT_E_NOMEM, "zt_config_describe: buffer too small");
        at += (size_t)w;
    }
    return (int)at;
}
