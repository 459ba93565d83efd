/* hfconfig.h - Hugging Face config.json fields for the model families' config loaders: the file
 * read and parsed as one object, integer and float fields checked with one message naming the
 * file and the key. Not here: what any field means. */
#ifndef ZT_MODELS_HFCONFIG_H
#define ZT_MODELS_HFCONFIG_H

#include <cjson/cJSON.h>

/* *out: the parsed object (cJSON_Delete it); ZT_E_FORMAT when the file is not a JSON object */
int zt_hfc_open(const char *path, cJSON **out);
/* Integer field >= lo: absent or null gives def, or an error when required. */
int zt_hfc_int(const cJSON *o, const char *path, const char *key, int required, int def, int lo,
               int *out);
/* Number field in [lo, hi]: absent or null gives def. */
int zt_hfc_float(const cJSON *o, const char *path, const char *key, double def, double lo,
                 double hi, float *out);

#endif
