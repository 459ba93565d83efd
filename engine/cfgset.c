/* cfgset.c - zt_config by field name (zt_config_set): for language bindings, which then need
 * not mirror the struct's layout. One table of the settable fields; the DeepSpeed JSON
 * parser (config.c) stays the way to configure from a file. */
#include "zerotrain.h"
#include "../common/err.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { T_INT, T_SIZE, T_U64, T_FLOAT, T_DOUBLE, T_STR, T_ENUM };

typedef struct key {
    const char *name;
    int type;
    size_t off;
    const char *const *names; /* T_ENUM: the values' names, in enum order */
} key;

static const char *const optimizers[] = {"adamw", "adamw8bit", "adafactor", NULL};
static const char *const devices[] = {"none", "cpu", "nvme", NULL};
/* ZT_RECOMPUTE_*, named as zerotrain.recompute names them ("every-k" takes recompute_k) */
static const char *const recomputes[] = {"none", "full", "selective", "every-k", "auto", NULL};

#define F(n, t) {#n, t, offsetof(zt_config, n), NULL}
static const key keys[] = {
    F(model_dir, T_STR), F(model_preset, T_STR), F(model_config, T_STR), F(nvme_path, T_STR),
    F(vocab_size, T_INT), F(seed, T_U64), F(threads, T_INT), F(dropout, T_INT),
    F(lr, T_FLOAT), F(beta1, T_FLOAT), F(beta2, T_FLOAT), F(eps, T_FLOAT),
    F(weight_decay, T_FLOAT), F(grad_clip, T_FLOAT), F(decay_all, T_INT),
    F(zero_stage, T_INT), F(bucket_size, T_SIZE), F(overlap_comm, T_INT),
    F(grad_accum_steps, T_INT), F(prefetch_size, T_SIZE), F(max_live, T_SIZE),
    F(persist_threshold, T_SIZE), F(collective_timeout, T_DOUBLE), F(check_collectives, T_INT),
    {"offload_optimizer", T_ENUM, offsetof(zt_config, offload_optimizer), devices},
    {"offload_param", T_ENUM, offsetof(zt_config, offload_param), devices},
    F(aio_block_size, T_SIZE), F(aio_queue_depth, T_INT), F(offload_buffers, T_INT),
    F(sub_group_size, T_SIZE), F(offload_gradients, T_INT), F(direct_io, T_INT),
    F(memory_limit, T_SIZE), {"optimizer", T_ENUM, offsetof(zt_config, optimizer), optimizers},
    F(min_8bit_size, T_SIZE), F(adafactor_eps1, T_FLOAT), F(adafactor_eps2, T_FLOAT),
    F(clip_threshold, T_FLOAT), F(decay_rate, T_FLOAT), F(adafactor_beta1, T_FLOAT),
    F(relative_step, T_INT), F(scale_parameter, T_INT), F(warmup_init, T_INT),
    F(skip_nonfinite, T_INT), F(progress, T_INT), F(aio_threads, T_INT),
    F(aio_single_submit, T_INT), F(aio_overlap_events, T_INT), F(offload_param_buffers, T_INT),
    F(offload_param_buffer_size, T_SIZE), F(offload_param_max_in_cpu, T_SIZE),
    {"recompute", T_ENUM, offsetof(zt_config, recompute), recomputes},
    F(recompute_k, T_INT), F(number_checkpoints, T_INT), F(offload_checkpoints, T_INT),
    F(recompute_profile, T_INT), F(plan_micro_batch, T_INT), F(plan_seq_len, T_INT),
    F(n_no_decay, T_INT), F(n_fp32_state, T_INT),
};
#undef F

size_t zt_config_size(void) { return sizeof(zt_config); }

const char *zt_config_key(int i)
{
    return i >= 0 && i < (int)(sizeof keys / sizeof keys[0]) ? keys[i].name : NULL;
}

int zt_config_set(zt_config *c, const char *name, const char *value)
{
    const key *k = NULL;
    char *end = NULL;
    if (!c || !name || !value)
        return zt_fail(ZT_E_INVAL, "zt_config_set: NULL argument");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && !k; i++)
        if (strcmp(keys[i].name, name) == 0)
            k = &keys[i];
    if (!k)
        return zt_fail(ZT_E_CONFIG, "zt_config_set: no key \"%s\" (zt_config_key lists them)",
                       name);
    char *p = (char *)c + k->off;
    errno = 0;
    switch (k->type) {
    case T_STR: /* borrowed, as zt_config's strings are */
        *(const char **)p = *value ? value : NULL;
        return 0;
    case T_ENUM:
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
    case T_INT: {
        long x = strtol(value, &end, 10);
        if (*value && !*end && !errno && x >= -2147483647L - 1 && x <= 2147483647L) {
            *(int *)p = (int)x;
            return 0;
        }
        break;
    }
    case T_SIZE:
    case T_U64: {
        unsigned long long x = strtoull(value, &end, 10);
        if (*value && *value != '-' && !*end && !errno) {
            if (k->type == T_SIZE)
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
        if (strcmp(k->name, "lr") == 0 &&
            (strcmp(value, "none") == 0 || strcmp(value, "None") == 0 ||
             strcmp(value, "null") == 0)) {
            *(float *)p = 0.0f;
            return 0;
        }
        double x = strtod(value, &end);
        if (*value && !*end && !errno && isfinite(x) &&
            (k->type != T_FLOAT || isfinite((float)x))) {
            if (k->type == T_FLOAT)
                *(float *)p = (float)x;
            else
                *(double *)p = x;
            return 0;
        }
        break;
    }
    }
    return zt_fail(ZT_E_CONFIG, "zt_config_set: %s \"%s\" is not %s", name, value,
                   k->type == T_INT ? "an integer" : k->type == T_SIZE || k->type == T_U64
                                                         ? "a non-negative integer"
                                                         : "a finite number");
}

/* "name=value" lines of every field that must be the same on every rank: all but the
 * strings (paths may differ between ranks; the model is compared by its shape) and the
 * thread count. */
int zt_config_describe(const zt_config *c, char *buf, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const key *k = &keys[i];
        const char *p = (const char *)c + k->off;
        char v[64];
        if (k->type == T_STR || strcmp(k->name, "threads") == 0)
            continue;
        switch (k->type) {
        case T_INT: snprintf(v, sizeof v, "%d", *(const int *)p); break;
        case T_SIZE: snprintf(v, sizeof v, "%zu", *(const size_t *)p); break;
        case T_U64: snprintf(v, sizeof v, "%" PRIu64, *(const uint64_t *)p); break;
        case T_FLOAT: snprintf(v, sizeof v, "%.9g", (double)*(const float *)p); break;
        case T_DOUBLE: snprintf(v, sizeof v, "%.17g", *(const double *)p); break;
        default: {
            int x = *(const int *)p, nv = 0;
            while (k->names[nv])
                nv++;
            snprintf(v, sizeof v, "%s", x >= 0 && x < nv ? k->names[x] : "?");
        }
        }
        int w = snprintf(buf + at, at < n ? n - at : 0, "%s=%s\n", k->name, v);
        if (w < 0 || at + (size_t)w >= n)
            return zt_fail(ZT_E_NOMEM, "zt_config_describe: buffer too small");
        at += (size_t)w;
    }
    return (int)at;
}
