/* hfweights.c - writes weights the way Hugging Face lays them out (one file, or shards with
 * an index). Knows nothing of models: the caller hands it named tensors. */
#include "hfweights.h"
#include "fileio.h"
#include "err.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const meta[] = {"format", "pt", "producer", "zerotrain 0.1.0"};

static size_t view_bytes(const zt_tensor_view *v)
{
    size_t n = zt_dtype_size(v->dtype);
    for (int k = 0; k < v->ndim; k++)
        n *= (size_t)v->shape[k];
    return n;
}

/* tensor i of one shard file is tensor first + i of the whole set */
typedef struct shard_fetch {
    zt_fetch_fn fetch;
    void *arg;
    int first;
} shard_fetch;

static int fetch_in_shard(int i, void *p, const void **data)
{
    const shard_fetch *s = p;
    return s->fetch(s->first + i, s->arg, data);
}

static int write_file(const char *path, const zt_tensor_view *v, int first, int n,
                      zt_fetch_fn fetch, void *arg)
{
    shard_fetch s = {fetch, arg, first};
    return zt_safetensors_write_cb(path, v + first, n, meta, 2, fetch ? fetch_in_shard : NULL,
                                   &s);
}

int zt_hf_write_weights(const char *dir, const zt_tensor_view *v, int n, size_t max_shard_bytes)
{
    return zt_hf_write_weights_cb(dir, v, n, max_shard_bytes, NULL, NULL);
}

int zt_hf_write_weights_cb(const char *dir, const zt_tensor_view *v, int n,
                           size_t max_shard_bytes, zt_fetch_fn fetch, void *arg)
{
    char path[4096];
    size_t total = 0, cur = 0;
    int n_shards = 0, rc = 0, *start;
    for (int i = 0; i < n; i++)
        total += view_bytes(&v[i]);
    if (max_shard_bytes == 0 || total <= max_shard_bytes) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        return write_file(path, v, 0, n, fetch, arg);
    }
    if (!(start = calloc((size_t)n + 1, sizeof *start)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        size_t b = view_bytes(&v[i]);
        if (i == 0 || (cur > 0 && cur + b > max_shard_bytes)) {
            start[n_shards++] = i;
            cur = 0;
        }
        cur += b;
    }
    start[n_shards] = n;
    cJSON *idx = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(idx, "metadata"),
          *map = cJSON_AddObjectToObject(idx, "weight_map");
    cJSON_AddNumberToObject(md, "total_size", (double)total);
    for (int s = 0; s < n_shards && rc == 0; s++) {
        char file[64];
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        rc = write_file(path, v, start[s], start[s + 1] - start[s], fetch, arg);
        for (int i = start[s]; i < start[s + 1]; i++)
            cJSON_AddStringToObject(map, v[i].name, file);
    }
    char *text = rc == 0 ? cJSON_Print(idx) : NULL;
    if (rc == 0 && !text)
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    if (rc == 0) {
        const void *parts[1] = {text};
        size_t lens[1] = {strlen(text)};
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        rc = zt_file_write_atomic(path, parts, lens, 1);
    }
    free(text);
    cJSON_Delete(idx);
    free(start);
    return rc;
}
