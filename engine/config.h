/* config.h - the one list of zt_config's fields (zt_cfg_fields, defined in config.c beside the
 * DeepSpeed key table that feeds them): name, type, offset, zt_config_init's default, enum
 * names, the JSON key that sets the field and where its resolved value lives. cfgset.c sets,
 * reads and describes zt_config by it; config.c applies a parsed config and documents it by
 * it. Not installed. */
#ifndef ZT_ENGINE_CONFIG_H
#define ZT_ENGINE_CONFIG_H

#include "zerotrain.h"

#include <stddef.h>

/* a field's C type as zt_config_set parses it */
enum {
    ZT_CF_INT,      /* int */
    ZT_CF_SIZE,     /* size_t */
    ZT_CF_U64,      /* uint64_t */
    ZT_CF_FLOAT,    /* float */
    ZT_CF_DOUBLE,   /* double */
    ZT_CF_STR,      /* const char *, borrowed */
    ZT_CF_ENUM,     /* int, set by the name of its value */
    ZT_CF_PATTERNS, /* const char *const *: set in C or from JSON, not by zt_config_set */
};
#define ZT_CF_LOCAL 1     /* may differ between ranks (paths, threads): not described */
#define ZT_CF_NONE_IS_0 2 /* "none", "None" and "null" set 0 (lr: no lr, Python's None) */
#define ZT_CF_NO_SETTING ((size_t)-1)

typedef struct zt_cfg_field {
    const char *name;          /* the zt_config member: its zt_config_set key */
    unsigned char type, flags; /* ZT_CF_* */
    size_t off, size;          /* in zt_config */
    const char *const *names;  /* ZT_CF_ENUM: the values' names in enum order, NULL-ended */
    double def;                /* zt_config_init's value (0 for strings and patterns) */
    int key, key2;             /* the JSON rows that set it (config.c's K_*), -1: none */
    size_t from;               /* its resolved value in struct zt_train_config, or
                                * ZT_CF_NO_SETTING */
    const char *doc;           /* one line: what it is (for the fields no JSON key sets,
                                * the only place it is said) */
} zt_cfg_field;

extern const zt_cfg_field zt_cfg_fields[];
extern const int zt_cfg_n_fields;

/* The field called name, or NULL. */
const zt_cfg_field *zt_cfg_field_find(const char *name);
/* cfgset.c: "name=value" lines of the fields every rank must share; bytes written or < 0 */
int zt_config_describe(const zt_config *c, char *buf, size_t n);

/* engine.c: the checks zt_engine_create makes of a config (ZT_E_CONFIG, ZT_E_UNSUPPORTED);
 * estimate 1: those zt_estimate_memory needs (any precision; no nvme_path needed) */
int zt_config_check(const zt_config *c, int estimate);

#endif
