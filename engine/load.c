/* load.c - maps Hugging Face tensor names onto the parameter table (exact, tied alias,
 * legacy gamma/beta, missing "bert." / "roberta." / "distilbert." prefix) and converts the data in place. Ignores the
 * pooler (unless the head uses it), the NSP head and position_ids buffers; warns about
 * anything else it does not use. */

#include "load.h"
#include "../common/rng.h"
#include "../common/err.h"
#include "../format/fileio.h"
#include "../format/hfweights.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void zt_param_init(const zt_layout *l, int i, float *const *P, uint64_t seed)
{
    const zt_param_def *d = &l->params[i];
    float *p = P[d->unit] + d->offset;
    if (d->init == ZT_INIT_NORMAL) {
        zt_rng_normal(seed, (uint64_t)i, zt_rng_stream(d->unit, ZT_RNG_INIT), p, d->numel);
        for (size_t j = 0; j < d->numel; j++)
            p[j] *= d->std > 0.0f ? d->std : l->init_std;
        if (d->pad_row >= 0 && d->ndim == 2 && d->pad_row < d->shape[0])
            memset(p + (size_t)d->pad_row * (size_t)d->shape[1], 0,
                   sizeof(float) * (size_t)d->shape[1]);
    } else {
        for (size_t j = 0; j < d->numel; j++)
            p[j] = d->init == ZT_INIT_ONES ? 1.0f : 0.0f;
    }
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Parameter index for a checkpoint name, or -1; *alias = 1 when it named the tied copy. */
static int map_name(const zt_layout *l, const char *name, int *alias)
{
    char buf[ZT_NAME_MAX + 16];
    int i;
    size_t n = strlen(name);
    if (n >= ZT_NAME_MAX)
        return -1;
    snprintf(buf, sizeof buf, "%s", name);
    if (ends_with(buf, ".gamma"))
        snprintf(buf + n - 6, sizeof buf - (n - 6), ".weight");
    else if (ends_with(buf, ".beta"))
        snprintf(buf + n - 5, sizeof buf - (n - 5), ".bias");
    /* a base model's checkpoint (BertModel, RobertaModel, DistilBertModel) names its tensors
     * without the task model's base_model_prefix */
    static const char *const prefixes[] = {"bert.", "roberta.", "distilbert.", "electra.",
                                           "albert."};
    if ((i = zt_layout_find(l, buf)) >= 0)
        goto found;
    for (int k = 0; k < (int)(sizeof prefixes / sizeof *prefixes); k++) {
        size_t pl = strlen(prefixes[k]);
        if (strncmp(l->params[0].name, prefixes[k], pl) == 0 && strncmp(buf, prefixes[k], pl) != 0) {
            char pre[ZT_NAME_MAX + 24];
            snprintf(pre, sizeof pre, "%s%s", prefixes[k], buf);
            if ((i = zt_layout_find(l, pre)) >= 0)
                snprintf(buf, sizeof buf, "%s", pre);
        }
    }
found:
    *alias = i >= 0 && strcmp(l->params[i].name, buf) != 0;
    return i;
}

/* the pooler (when the head does not use it), the NSP and SOP heads, buffers */
static int ignorable(const char *name)
{
    return strstr(name, "pooler.") || strstr(name, "cls.seq_relationship.") ||
           strncmp(name, "sop_classifier.", 15) == 0 ||
           strncmp(name, "generator.", 10) == 0 || /* ELECTRA's joint folder's generator */
           ends_with(name, "position_ids");
}

typedef struct load_state {
    const zt_layout *l;
    float *const *P;
    unsigned char *alias_seen, *have; /* have: 1 = canonical loaded, 2 = only the alias */
    int unused;
    char first_unused[ZT_NAME_MAX];
} load_state;

static int load_file(load_state *s, const char *path)
{
    zt_safetensors *f;
    int rc = zt_safetensors_open(path, &f), n;
    if (rc < 0)
        return rc;
    n = zt_safetensors_count(f);
    for (int t = 0; t < n && rc == 0; t++) {
        zt_tensor_info ti;
        int alias, i;
        zt_safetensors_get(f, t, &ti);
        if ((i = map_name(s->l, ti.name, &alias)) < 0) {
            if (!ignorable(ti.name) && s->unused++ == 0)
                snprintf(s->first_unused, sizeof s->first_unused, "%s", ti.name);
            continue;
        }
        const zt_param_def *d = &s->l->params[i];
        int same = ti.ndim == d->ndim;
        if (!s->P[d->unit]) /* a unit not asked for this time */
            continue;
        for (int k = 0; same && k < d->ndim; k++)
            same = ti.shape[k] == d->shape[k];
        if (!same) {
            char got[96] = "", want[96] = "";
            for (int k = 0; k < ti.ndim && k < 4; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "",
                         (long long)ti.shape[k]);
            for (int k = 0; k < d->ndim; k++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld",
                         k ? ", " : "", (long long)d->shape[k]);
            rc = zt_fail(ZT_E_SHAPE, "%s: tensor \"%s\" has shape [%s], the config needs [%s]",
                         path, ti.name, got, want);
            break;
        }
        if (alias) {
            s->alias_seen[i] = 1;
            if (s->have[i]) /* tied: the canonical tensor wins */
                continue;
        } else if (s->have[i] == 1) {
            rc = zt_fail(ZT_E_FORMAT, "%s: tensor \"%s\" is stored twice", path, ti.name);
            break;
        }
        if (ti.dtype != ZT_F32 && ti.dtype != ZT_F16 && ti.dtype != ZT_BF16) {
            rc = zt_fail(ZT_E_FORMAT, "%s: tensor \"%s\" has dtype %s; weights must be F32, F16 "
                                      "or BF16", path, ti.name, zt_dtype_name(ti.dtype));
            break;
        }
        if ((rc = zt_tensor_to_f32(&ti, s->P[d->unit] + d->offset, d->numel)) < 0)
            break;
        int64_t bad = zt_first_nonfinite(ZT_F32, s->P[d->unit] + d->offset, d->numel);
        if (bad >= 0) {
            char what[160];
            zt_nonfinite_text(what, sizeof what, ti.dtype,
                              (const char *)ti.data + (size_t)bad * zt_dtype_size(ti.dtype),
                              ti.ndim, ti.shape, (size_t)bad);
            rc = zt_fail(ZT_E_RANGE, "%s: tensor \"%s\": %s (its first non-finite value): "
                         "non-finite weights are not loaded", path, ti.name, what);
            break;
        }
        s->have[i] = alias ? 2 : 1;
    }
    zt_safetensors_close(f);
    return rc;
}

/* model.safetensors.index.json: {"weight_map": {"name": "file", ...}} */
static int load_index(load_state *s, const char *dir, const char *index)
{
    char *text, path[4096];
    cJSON *o, *map, *it;
    int rc = zt_file_read_all(index, 64u << 20, &text, NULL), n = 0;
    char **files = NULL;
    if (rc < 0)
        return rc;
    o = cJSON_Parse(text);
    free(text);
    map = o ? cJSON_GetObjectItemCaseSensitive(o, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(o);
        return zt_fail(ZT_E_FORMAT, "%s: not a JSON object with a \"weight_map\" object", index);
    }
    cJSON_ArrayForEach(it, map) {
        int seen = 0;
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/') || it->valuestring[0] == '.' ||
            !it->valuestring[0]) {
            rc = zt_fail(ZT_E_FORMAT, "%s: weight_map entry \"%s\": \"%s\" is not a file name in "
                                      "the same folder", index, it->string,
                         cJSON_IsString(it) ? it->valuestring : "(not a string)");
            goto out;
        }
        for (int i = 0; i < n && !seen; i++)
            seen = strcmp(files[i], it->valuestring) == 0;
        if (!seen) {
            char **nf = realloc(files, sizeof *files * (size_t)(n + 1));
            if (!nf) {
                rc = zt_fail(ZT_E_NOMEM, "out of memory");
                goto out;
            }
            files = nf;
            files[n++] = it->valuestring;
        }
    }
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        rc = load_file(s, path);
    }
out:
    free(files);
    cJSON_Delete(o);
    return rc;
}

int zt_load_weights_unambiguous(const char *dir)
{
    char single[4096], index[4096];
    struct stat st;
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    if (stat(single, &st) == 0 && stat(index, &st) == 0)
        return zt_fail(ZT_E_FORMAT, "%s holds both model.safetensors and "
                       "model.safetensors.index.json: two sets of weights, and nothing says "
                       "which is the model's (transformers would load model.safetensors and "
                       "ignore the index and its shards, whichever is newer); remove the stale "
                       "one", dir);
    return 0;
}

/* A folder without safetensors weights: says which other format it holds, if any. */
static int no_weights(const char *dir)
{
    static const char *const other[] = {"pytorch_model.bin", "pytorch_model.bin.index.json",
                                        "tf_model.h5", "flax_model.msgpack"};
    char path[4096];
    struct stat st;
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, other[k]);
        if (stat(path, &st) == 0)
            return zt_fail(-ENOENT, "%s: no model.safetensors or model.safetensors.index.json, "
                           "only %s, a format zerotrain does not read: convert the folder "
                           "where PyTorch and transformers run, with from_pretrained(DIR) and "
                           "then save_pretrained(DIR, safe_serialization=True)", dir, other[k]);
    }
    return zt_fail(-ENOENT, "%s: no model.safetensors or model.safetensors.index.json", dir);
}

int zt_load_hf_weights(const char *dir, const zt_layout *l, float *const *P,
                       unsigned char *alias_seen, uint64_t seed, int report)
{
    char single[4096], index[4096];
    struct stat st;
    load_state s = {l, P, alias_seen, calloc((size_t)l->n_params, 1), 0, ""};
    int rc, missing = 0, head_init = 0;
    if (!s.have)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    rc = zt_load_weights_unambiguous(dir);
    if (rc == 0 && stat(single, &st) == 0)
        rc = load_file(&s, single);
    else if (rc == 0 && stat(index, &st) == 0)
        rc = load_index(&s, dir, index);
    else if (rc == 0)
        rc = no_weights(dir);
    for (int i = 0; rc == 0 && i < l->n_params; i++) {
        if (s.have[i] || !P[l->params[i].unit])
            continue;
        if (l->params[i].head) {
            zt_param_init(l, i, P, seed);
            head_init++;
        } else if (missing++ == 0) {
            rc = zt_fail(ZT_E_FORMAT, "%s: checkpoint has no tensor \"%s\"", dir,
                         l->params[i].name);
        }
    }
    if (rc == ZT_E_FORMAT && missing > 1)
        zt_fail_wrap(rc, "%d parameters missing", missing);
    if (rc == 0 && head_init && report)
        zt_log(ZT_LOG_WARN, "%s: %d %s parameters not in the checkpoint were initialised "
                            "randomly", dir, head_init, l->head_desc[0] ? l->head_desc : "head");
    if (rc == 0 && s.unused && report)
        zt_log(ZT_LOG_WARN, "%s: %d tensors not used by %s (first: \"%s\")", dir, s.unused,
               l->arch, s.first_unused);
    free(s.have);
    return rc;
}
