/* hfweights.c - writes weights the way Hugging Face lays them out (one file, or shards with
 * an index), decides which folders such a write may replace, and finds non-finite values.
 * Knows nothing of models: the caller hands it named tensors. */
#include "hfweights.h"
#include "fileio.h"
#include "err.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- non-finite values ----------------------------------------------------------------- */

/* value i is an infinity or a NaN (its exponent bits all ones) */
static int nonfinite_at(zt_dtype dt, const unsigned char *p, size_t i)
{
    uint16_t h;
    uint32_t w;
    uint64_t d;
    switch (dt) {
    case ZT_F16: memcpy(&h, p + 2 * i, 2); return (h & 0x7c00u) == 0x7c00u;
    case ZT_BF16: memcpy(&h, p + 2 * i, 2); return (h & 0x7f80u) == 0x7f80u;
    case ZT_F32: memcpy(&w, p + 4 * i, 4); return (w & 0x7f800000u) == 0x7f800000u;
    case ZT_F64:
        memcpy(&d, p + 8 * i, 8);
        return (d & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
    default: return 0;
    }
}

int64_t zt_first_nonfinite(zt_dtype dt, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (dt != ZT_F16 && dt != ZT_BF16 && dt != ZT_F32 && dt != ZT_F64)
        return -1;
    if (dt == ZT_F32) { /* the common case, a block at a time without branches */
        for (size_t b = 0; b < n; b += 4096) {
            size_t e = n - b < 4096 ? n : b + 4096;
            uint32_t any = 0;
            for (size_t i = b; i < e; i++) {
                uint32_t w;
                memcpy(&w, p + 4 * i, 4);
                any |= (w & 0x7f800000u) == 0x7f800000u;
            }
            for (size_t i = b; any && i < e; i++)
                if (nonfinite_at(dt, p, i))
                    return (int64_t)i;
        }
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (nonfinite_at(dt, p, i))
            return (int64_t)i;
    return -1;
}

void zt_nonfinite_text(char *buf, size_t n, zt_dtype dt, const void *value, int ndim,
                       const int64_t *shape, size_t i)
{
    const unsigned char *p = value;
    size_t es = zt_dtype_size(dt), len, rest = i;
    int64_t idx[8] = {0};
    int neg = (p[es - 1] & 0x80) != 0, nan; /* the sign bit (little-endian) */
    uint16_t h;
    uint32_t w;
    uint64_t d;
    switch (dt) {
    case ZT_F16: memcpy(&h, p, 2); nan = (h & 0x3ffu) != 0; break;
    case ZT_BF16: memcpy(&h, p, 2); nan = (h & 0x7fu) != 0; break;
    case ZT_F32: memcpy(&w, p, 4); nan = (w & 0x7fffffu) != 0; break;
    default: memcpy(&d, p, 8); nan = (d & 0xfffffffffffffull) != 0; break;
    }
    for (int k = (ndim < 8 ? ndim : 8) - 1; k >= 0; k--) {
        idx[k] = shape[k] > 0 ? (int64_t)(rest % (size_t)shape[k]) : 0;
        rest = shape[k] > 0 ? rest / (size_t)shape[k] : 0;
    }
    len = (size_t)snprintf(buf, n, "element %zu [", i);
    for (int k = 0; k < ndim && k < 8 && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", k ? ", " : "", (long long)idx[k]);
    if (len < n)
        snprintf(buf + len, n - len, "] is %s", nan ? "NaN" : neg ? "-Inf" : "+Inf");
}

/* ---- replacing a model folder ------------------------------------------------------------ */

/* what the writers here write (and what is dropped with an older folder): config.json, the
 * weights (any *.safetensors, the index) and the temporary files of their atomic writes */
static int written_here(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    size_t len = t ? (size_t)(t - name) : strlen(name);
    if (len == 11 && !strncmp(name, "config.json", len))
        return 1;
    if (len == 28 && !strncmp(name, "model.safetensors.index.json", len))
        return 1;
    return len > 12 && !strncmp(name + len - 12, ".safetensors", 12);
}

/* what else a Hugging Face model folder holds (tokenizer, generation settings, model card):
 * carried over into the new folder */
static const char *const carried[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "tokenizer.model",
    "sentencepiece.bpe.model", "generation_config.json", "README.md"};
#define N_CARRIED (int)(sizeof carried / sizeof carried[0])

static int carried_name(const char *name)
{
    for (int k = 0; k < N_CARRIED; k++)
        if (!strcmp(name, carried[k]))
            return 1;
    return 0;
}

int zt_hf_dir_begin(const char *out, char *tmp, size_t n)
{
    struct stat sb;
    DIR *d;
    struct dirent *de;
    int rc = 0, keep = 0;
    if (lstat(out, &sb) != 0) {
        if (errno != ENOENT)
            return zt_fail(-errno, "%s: %s", out, strerror(errno));
        return zt_dir_stage(out, tmp, n);
    }
    if (S_ISLNK(sb.st_mode))
        return zt_fail(ZT_E_INVAL, "%s is a symbolic link: give the folder it points to (the "
                       "model folder is replaced as a whole, the link would be)", out);
    if (!S_ISDIR(sb.st_mode))
        return zt_fail(ZT_E_INVAL, "%s exists and is not a folder: give a new folder or a model "
                       "folder to replace", out);
    {
        char parent[4200];
        struct stat pb;
        snprintf(parent, sizeof parent, "%s/..", out);
        if (stat(parent, &pb) == 0 && pb.st_dev != sb.st_dev)
            return zt_fail(ZT_E_INVAL, "%s is a mount point: the model folder is written beside "
                           "it and renamed into its place, which cannot cross filesystems; give "
                           "a folder inside it", out);
    }
    if (!(d = opendir(out)))
        return zt_fail(-errno, "%s: %s", out, strerror(errno));
    while (rc == 0 && (de = readdir(d))) {
        struct stat fs;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (fstatat(dirfd(d), de->d_name, &fs, AT_SYMLINK_NOFOLLOW) != 0)
            rc = zt_fail(-errno, "%s/%s: %s", out, de->d_name, strerror(errno));
        else if ((!S_ISREG(fs.st_mode) && !S_ISLNK(fs.st_mode)) ||
                 (!written_here(de->d_name) && !carried_name(de->d_name)))
            rc = zt_fail(ZT_E_INVAL, "%s holds %s \"%s\", which is not part of a model folder "
                         "(config.json, *.safetensors, model.safetensors.index.json, tokenizer "
                         "files): not replacing it; give a new folder, or empty this one",
                         out, S_ISDIR(fs.st_mode) ? "the folder" : "the file", de->d_name);
        else
            keep += carried_name(de->d_name);
    }
    closedir(d);
    if (rc < 0 || (rc = zt_dir_stage(out, tmp, n)) < 0)
        return rc;
    for (int k = 0; keep && k < N_CARRIED && rc == 0; k++) { /* hard links: nothing copied */
        char src[4200], dst[4200];
        snprintf(src, sizeof src, "%s/%s", out, carried[k]);
        snprintf(dst, sizeof dst, "%s/%s", tmp, carried[k]);
        if (linkat(AT_FDCWD, src, AT_FDCWD, dst, 0) != 0 && errno != ENOENT)
            rc = zt_fail(-errno, "%s: cannot carry over into the new folder: %s", src,
                         strerror(errno));
    }
    if (rc < 0)
        zt_dir_discard(tmp);
    return rc;
}
