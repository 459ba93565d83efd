/* hfconfig.c - the checked field readers of hfconfig.h. */
#include "hfconfig.h"
#include "../common/err.h"
#include "../format/fileio.h"

#include <math.h>
#include <stdlib.h>

int zt_hfc_open(const char *path, cJSON **out)
{
    char *text;
    int rc = zt_file_read_all(path, 1u << 20, &text, NULL);
    if (rc < 0)
        return zt_fail_wrap(rc, "reading the model config");
    *out = cJSON_Parse(text);
    free(text);
    if (!*out || !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return zt_fail(ZT_E_FORMAT, "%s: not a JSON object", path);
    }
    return 0;
}

int zt_hfc_int(const cJSON *o, const char *path, const char *key, int required, int def, int lo,
               int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return zt_fail(ZT_E_CONFIG, "%s: missing required field \"%s\"", path, key);
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > 1e9) {
        if (lo == 1)
            return zt_fail(ZT_E_CONFIG, "%s: field \"%s\" must be a positive integer", path, key);
        return zt_fail(ZT_E_CONFIG, "%s: field \"%s\" must be an integer >= %d", path, key, lo);
    }
    *out = (int)v->valuedouble;
    return 0;
}

int zt_hfc_float(const cJSON *o, const char *path, const char *key, double def, double lo,
                 double hi, float *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = (float)def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return zt_fail(ZT_E_CONFIG, "%s: field \"%s\" must be a number in [%g, %g]", path, key,
                       lo, hi);
    *out = (float)v->valuedouble;
    return 0;
}
