/* checkpoint.c - training checkpoints: ROOT/step-N/ with the model (HF layout), every rank's
 * shard of the AdamW moments (rank-R.safetensors), the training state and a manifest of
 * checksums written last; the folder is built under a hidden name and renamed into place.
 * A checkpoint loads at any world size and stage: the moments are re-sliced from the
 * layout the state records (world size, bucket) into this engine's. */
#include "engine_impl.h"
#include "load.h"
#include "../format/fileio.h"
#include "../format/hfweights.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MANIFEST "manifest.json"
/* files a checkpoint must list, besides the weights (model.safetensors, or shards with
 * model.safetensors.index.json) and every rank's rank-<r>.safetensors */
static const char *const ckpt_files[] = {"config.json", "state.json", "train_config.json"};
#define N_FILES (int)(sizeof ckpt_files / sizeof ckpt_files[0])

/* Tests only: ZT_FAULT_POINT="before:state.json" (or "after:manifest.json@2", the second
 * time the point is reached, "before:rename", ...) kills the process there with SIGKILL, to
 * check that a crash at any moment of a save loses nothing. */
static void fault_point(const char *where, const char *what)
{
    static int hits;
    const char *p = getenv("ZT_FAULT_POINT"), *at;
    char name[128];
    size_t len;
    if (!p)
        return;
    snprintf(name, sizeof name, "%s:%s", where, what);
    at = strchr(p, '@');
    len = at ? (size_t)(at - p) : strlen(p);
    if (strlen(name) == len && strncmp(p, name, len) == 0 && ++hits >= (at ? atoi(at + 1) : 1))
        raise(SIGKILL);
}

static int hash_file(const char *path, uint64_t *hash, uint64_t *bytes)
{
    char buf[1 << 16];
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    XXH64_state_t *st;
    ssize_t n;
    if (fd < 0)
        return zt_fail(-errno, "%s: %s", path, strerror(errno));
    if (!(st = XXH64_createState())) {
        close(fd);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    XXH64_reset(st, 0);
    *bytes = 0;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = zt_fail(-errno, "%s: read: %s", path, strerror(errno));
            break;
        }
        XXH64_update(st, buf, (size_t)n);
        *bytes += (uint64_t)n;
    }
    *hash = XXH64_digest(st);
    XXH64_freeState(st);
    close(fd);
    return rc;
}

/* Removes a folder of plain files (checkpoint folders hold nothing else). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[4096];
    if (!d)
        return;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    if (fd < 0)
        return zt_fail(-errno, "%s: %s", path, strerror(errno));
    if (fsync(fd) != 0)
        rc = zt_fail(-errno, "%s: fsync: %s", path, strerror(errno));
    close(fd);
    return rc;
}

/* "step-N" -> N, or -1 */
static int64_t step_of(const char *name)
{
    char *end;
    long long v;
    if (strncmp(name, "step-", 5) != 0 || name[5] < '0' || name[5] > '9')
        return -1;
    v = strtoll(name + 5, &end, 10);
    return *end ? -1 : v;
}

/* The step numbers of ROOT's checkpoint folders, newest first. */
static int list_steps(const char *root, int64_t **out)
{
    DIR *d = opendir(root);
    struct dirent *de;
    int64_t *v = NULL;
    int n = 0;
    *out = NULL;
    if (!d)
        return errno == ENOENT ? 0 : zt_fail(-errno, "%s: %s", root, strerror(errno));
    while ((de = readdir(d))) {
        int64_t s = step_of(de->d_name);
        int64_t *nv;
        if (s < 0)
            continue;
        if (!(nv = realloc(v, sizeof *v * (size_t)(n + 1)))) {
            free(v);
            closedir(d);
            return zt_fail(ZT_E_NOMEM, "out of memory");
        }
        v = nv;
        v[n++] = s;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            int64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *out = v;
    return n;
}

static int write_text(const char *dir, const char *name, const char *text)
{
    char path[4096];
    const void *parts[1] = {text};
    size_t lens[1] = {strlen(text)};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fault_point("before", name);
    ZT_TRY(zt_file_write_atomic(path, parts, lens, 1));
    fault_point("after", name);
    return 0;
}

/* with optimizer offload, piece k of tensor i is sub-group k of its unit, from the store */
static int moment_piece(int i, int k, void *arg, const void **data, size_t *len)
{
    zt_engine *e = arg;
    int nu = e->layout.n_units;
    const float *p;
    size_t n;
    ZT_TRY(zt_zero_moment_piece(e, i % nu, i >= nu, k, &p, &n));
    *data = p;
    *len = n * sizeof(float);
    return 0;
}

/* This rank's shard of every unit's AdamW moments: "exp_avg.<unit>" and "exp_avg_sq.<unit>",
 * [padded / N] floats each, in shard order (its slice of every piece of the unit; stage 0
 * keeps whole units and writes the same slices, so the files look the same at every
 * stage). Offloaded moments stream from the store one sub-group at a time. */
static int write_rank_file(zt_engine *e, const char *dir)
{
    char path[4096], name[32], meta_v[3][32];
    int nu = e->layout.n_units, N = e->comm.size, r = e->comm.rank, rc = 0;
    int off = e->ostore != NULL;
    zt_tensor_view *v = calloc((size_t)(2 * nu), sizeof *v);
    char **names = calloc((size_t)(2 * nu), sizeof *names);
    int *pieces = calloc((size_t)(2 * nu), sizeof *pieces);
    float *copy = NULL;
    size_t total = 0, at = 0;
    for (int u = 0; u < nu; u++)
        total += 2 * zt_zero_len(e, u, 1);
    if (!v || !names || !pieces ||
        (e->cfg.zero_stage == 0 && !(copy = malloc(total * sizeof(float))))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = zt_zero_moments_stream_begin(e)) < 0)
        goto out;
    for (int i = 0; i < 2 * nu; i++) {
        int u = i % nu;
        size_t s = zt_zero_len(e, u, 1);
        float *const *buf = i < nu ? e->M : e->V, *data = off ? NULL : buf[u];
        pieces[i] = zt_zero_moment_pieces(e, u);
        if (asprintf(&names[i], "%s.%s", i < nu ? "exp_avg" : "exp_avg_sq",
                     e->layout.units[u].name) < 0) {
            names[i] = NULL;
            rc = zt_fail(ZT_E_NOMEM, "out of memory");
            goto out;
        }
        if (copy) {
            data = copy + at;
            zt_zero_take_shard(e, u, r, buf[u], data);
            at += s;
        }
        v[i] = (zt_tensor_view){names[i], ZT_F32, 1, {(int64_t)s}, data};
    }
    snprintf(meta_v[0], sizeof meta_v[0], "%d", r);
    snprintf(meta_v[1], sizeof meta_v[1], "%d", N);
    snprintf(meta_v[2], sizeof meta_v[2], "%" PRId64, e->step);
    snprintf(name, sizeof name, "rank-%05d.safetensors", r);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    {
        const char *meta[] = {"rank", meta_v[0], "world_size", meta_v[1], "step", meta_v[2]};
        fault_point("before", name);
        rc = zt_safetensors_write_pieces(path, v, 2 * nu, meta, 3, off ? pieces : NULL,
                                         off ? moment_piece : NULL, e);
        fault_point("after", name);
    }
out:
    for (int i = 0; names && i < 2 * nu; i++)
        free(names[i]);
    free(names);
    free(v);
    free(pieces);
    free(copy);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file in the folder (model weights, single or sharded; config; state; every rank's
 * shards), sorted, with its size and xxh64; written last. */
static int write_manifest(const char *dir, const zt_engine *e)
{
    cJSON *m = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(m, "files");
    char path[4096], hex[17], *text = NULL, **names = NULL;
    int rc = 0, n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    if (!d)
        rc = zt_fail(-errno, "%s: %s", dir, strerror(errno));
    while (rc == 0 && (de = readdir(d))) {
        char **nn;
        if (de->d_name[0] == '.' || strcmp(de->d_name, MANIFEST) == 0)
            continue;
        if (!(nn = realloc(names, sizeof *names * (size_t)(n + 1))) ||
            !(nn[n] = strdup(de->d_name))) {
            names = nn ? nn : names;
            rc = zt_fail(ZT_E_NOMEM, "out of memory");
            break;
        }
        names = nn;
        n++;
    }
    if (d)
        closedir(d);
    if (rc == 0)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    cJSON_AddStringToObject(m, "format", "zerotrain-checkpoint");
    cJSON_AddNumberToObject(m, "version", 2);
    cJSON_AddNumberToObject(m, "world_size", e->comm.size);
    cJSON_AddNumberToObject(m, "zero_stage", e->cfg.zero_stage);
    cJSON_AddNumberToObject(m, "bucket_size", (double)e->bucket);
    {
        cJSON *units = cJSON_AddArrayToObject(m, "units");
        for (int u = 0; units && u < e->layout.n_units; u++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", e->layout.units[u].name);
            cJSON_AddNumberToObject(o, "numel", (double)e->layout.units[u].numel);
            cJSON_AddNumberToObject(o, "padded", (double)e->padded[u]);
            cJSON_AddNumberToObject(o, "piece", (double)e->piece[u]);
            cJSON_AddItemToArray(units, o);
        }
    }
    for (int i = 0; i < n && rc == 0; i++) {
        uint64_t h, bytes;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if ((rc = hash_file(path, &h, &bytes)) < 0)
            break;
        cJSON *f = cJSON_CreateObject();
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        cJSON_AddStringToObject(f, "name", names[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)bytes);
        cJSON_AddStringToObject(f, "xxh64", hex);
        cJSON_AddItemToArray(files, f);
    }
    if (rc == 0 && !(text = cJSON_Print(m)))
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    if (rc == 0)
        rc = write_text(dir, MANIFEST, text);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(text);
    cJSON_Delete(m);
    return rc;
}

static void prune(const char *root, int keep)
{
    int64_t *steps;
    int n = list_steps(root, &steps);
    char p[4096];
    for (int i = keep; i < n; i++) {
        snprintf(p, sizeof p, "%s/step-%" PRId64, root, steps[i]);
        remove_dir(p);
    }
    free(steps);
}

/* Every rank learns whether any rank failed; a rank that did not fail itself reports it. */

/* Rank 0, after every rank file is written: the model, state, config and manifest, then
 * the rename that commits the checkpoint. */
static int commit_rank0(zt_engine *e, const char *root, const char *tmp, const char *final,
                        const char *old, const zt_train_state *st, const char *train_config,
                        int keep)
{
    char text[512];
    struct stat sb;
    int rc;
    snprintf(text, sizeof text,
             "{\n  \"format\": \"zerotrain-train-state\",\n  \"version\": 2,\n"
             "  \"step\": %" PRId64 ",\n  \"samples\": %" PRIu64 ",\n  \"seed\": %" PRIu64
             ",\n  \"world_size\": %d,\n  \"zero_stage\": %d,\n  \"bucket_size\": %zu\n}\n",
             st->step, st->samples, st->seed, e->comm.size, e->cfg.zero_stage, e->bucket);
    if ((rc = write_text(tmp, "state.json", text)) < 0 ||
        (rc = write_text(tmp, "train_config.json", train_config ? train_config : "{}\n")) < 0 ||
        (rc = write_manifest(tmp, e)) < 0 || (rc = fsync_path(tmp)) < 0)
        return rc;
    remove_dir(old);
    if (stat(final, &sb) == 0 && rename(final, old) != 0)
        return zt_fail(-errno, "%s: cannot move aside: %s", final, strerror(errno));
    fault_point("before", "rename");
    if (rename(tmp, final) != 0) {
        rc = zt_fail(-errno, "%s: rename: %s", final, strerror(errno));
        rename(old, final);
        return rc;
    }
    fault_point("after", "rename");
    if ((rc = fsync_path(root)) < 0)
        return rc;
    remove_dir(old);
    if (keep > 0)
        prune(root, keep);
    return 0;
}

/* Every rank calls this: rank 0 makes the hidden folder, every rank writes its own
 * optimizer shards into it, rank 0 adds the model (streamed unit by unit in stage 3), the state and the
 * manifest and renames it into place. The folder must be on storage every rank sees. */
int zt_checkpoint_save(zt_engine *e, const char *root, const zt_train_state *st,
                       const char *train_config, int keep)
{
    char tmp[4096], final[4096], old[4096];
    int rc = 0, r;
    if (!e || !root || !st)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_save: NULL argument");
    ZT_TRY(zt_engine_ensure_moments(e));
    ZT_TRY(zt_zero_flush(e)); /* the checkpoint holds the step's result */
    r = e->comm.rank;
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%" PRId64, root, st->step);
    snprintf(final, sizeof final, "%s/step-%" PRId64, root, st->step);
    snprintf(old, sizeof old, "%s/.old-step-%" PRId64, root, st->step);
    if (r == 0 && (rc = zt_mkdirs(root)) == 0) {
        remove_dir(tmp); /* left by a save that died */
        if (mkdir(tmp, 0755) != 0)
            rc = zt_fail(-errno, "%s: %s", tmp, strerror(errno));
    }
    if ((rc = zt_engine_agree(e, rc, "creating the checkpoint folder")) == 0)
        rc = zt_engine_agree(e, write_rank_file(e, tmp), "writing optimizer shards");
    if (rc == 0) { /* collective; rank 0 writes; stage 3 gathers one unit at a time */
        if (r == 0)
            fault_point("before", "model.safetensors");
        rc = zt_engine_save_weights(e, tmp, (size_t)5000000000u);
        if (r == 0)
            fault_point("after", "model.safetensors");
    }
    if (rc == 0)
        rc = zt_engine_agree(e, r == 0 ? commit_rank0(e, root, tmp, final, old, st, train_config, keep)
                             : 0, "committing the checkpoint");
    if (rc < 0) {
        zt_fail_wrap(rc, "saving checkpoint %s", final);
        if (r == 0)
            remove_dir(tmp);
        return zt_engine_fail(e, rc);
    }
    return 0;
}

int zt_checkpoint_verify(const char *dir)
{
    char path[4096], *text = NULL;
    cJSON *m = NULL, *files, *f;
    int rc = 0, seen = 0;
    snprintf(path, sizeof path, "%s/%s", dir, MANIFEST);
    if (zt_file_read_all(path, 1u << 20, &text, NULL) < 0)
        return zt_fail(ZT_E_FORMAT, "%s: missing or unreadable (the save did not finish)", path);
    m = cJSON_Parse(text);
    free(text);
    files = m ? cJSON_GetObjectItemCaseSensitive(m, "files") : NULL;
    if (!cJSON_IsArray(files)) {
        cJSON_Delete(m);
        return zt_fail(ZT_E_FORMAT, "%s: not a checkpoint manifest", path);
    }
    cJSON_ArrayForEach(f, files) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"),
                    *by = cJSON_GetObjectItemCaseSensitive(f, "bytes"),
                    *hx = cJSON_GetObjectItemCaseSensitive(f, "xxh64");
        uint64_t h, bytes;
        char hex[17];
        if (!cJSON_IsString(nm) || !cJSON_IsNumber(by) || !cJSON_IsString(hx) ||
            strchr(nm->valuestring, '/')) {
            rc = zt_fail(ZT_E_FORMAT, "%s: malformed file entry", path);
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, nm->valuestring);
        if ((rc = hash_file(path, &h, &bytes)) < 0) {
            rc = zt_fail(ZT_E_FORMAT, "%s: missing or unreadable", path);
            break;
        }
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        if (bytes != (uint64_t)by->valuedouble) {
            rc = zt_fail(ZT_E_FORMAT, "%s: %" PRIu64 " bytes, the manifest says %.0f", path,
                         bytes, by->valuedouble);
            break;
        }
        if (strcmp(hex, hx->valuestring) != 0) {
            rc = zt_fail(ZT_E_FORMAT, "%s: checksum %s does not match the manifest's %s", path,
                         hex, hx->valuestring);
            break;
        }
        seen++;
    }
    for (int i = 0; rc == 0 && i < N_FILES; i++) {
        int listed = 0;
        cJSON_ArrayForEach(f, files) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
            listed |= cJSON_IsString(nm) && strcmp(nm->valuestring, ckpt_files[i]) == 0;
        }
        if (!listed)
            rc = zt_fail(ZT_E_FORMAT, "%s/%s: does not list %s", dir, MANIFEST, ckpt_files[i]);
    }
    if (rc == 0) {
        int weights = 0;
        cJSON_ArrayForEach(f, files) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
            weights |= cJSON_IsString(nm) && (strcmp(nm->valuestring, "model.safetensors") == 0 ||
                                              strcmp(nm->valuestring,
                                                     "model.safetensors.index.json") == 0);
        }
        if (!weights)
            rc = zt_fail(ZT_E_FORMAT, "%s/%s: lists no model weights", dir, MANIFEST);
    }
    (void)seen;
    cJSON_Delete(m);
    return rc;
}

static int read_state(const char *dir, zt_train_state *st, int *world, size_t *bucket)
{
    char path[4096], *text;
    cJSON *o, *s, *g, *sd, *w, *bk;
    snprintf(path, sizeof path, "%s/state.json", dir);
    ZT_TRY(zt_file_read_all(path, 1u << 20, &text, NULL));
    o = cJSON_Parse(text);
    free(text);
    s = cJSON_GetObjectItemCaseSensitive(o, "step");
    g = cJSON_GetObjectItemCaseSensitive(o, "samples");
    sd = cJSON_GetObjectItemCaseSensitive(o, "seed");
    w = cJSON_GetObjectItemCaseSensitive(o, "world_size");
    bk = cJSON_GetObjectItemCaseSensitive(o, "bucket_size"); /* absent: whole units */
    if ((bk && (!cJSON_IsNumber(bk) || bk->valuedouble < 0 || bk->valuedouble > 9e15)) ||
        !cJSON_IsNumber(s) || !cJSON_IsNumber(g) || !cJSON_IsNumber(sd) || !cJSON_IsNumber(w) ||
        s->valuedouble < 0 || w->valuedouble < 1 || w->valuedouble > 1 << 20) {
        cJSON_Delete(o);
        return zt_fail(ZT_E_FORMAT, "%s: missing or bad step, samples, seed, world_size or "
                                    "bucket_size", path);
    }
    /* cJSON keeps numbers as doubles: exact below 2^53, far beyond any step count */
    st->step = (int64_t)s->valuedouble;
    st->samples = (uint64_t)g->valuedouble;
    st->seed = (uint64_t)sd->valuedouble;
    *world = (int)w->valuedouble;
    *bucket = bk ? (size_t)bk->valuedouble : 0;
    cJSON_Delete(o);
    return 0;
}

/* The moments saved by world0 ranks with bucket0 (rank k: its shard of each unit as laid out
 * for world0), re-sliced into this engine's layout: whole units (stage 0) or this rank's
 * shard. Only the first numel floats of a unit carry data; the rest is padding and stays
 * zero. */
typedef struct moment_src {
    const char *dir;
    int world0;
    size_t bucket0;
    zt_safetensors **f;            /* rank k's file */
    const float **src;             /* per rank: the tensor being read */
    const zt_engine *e;
} moment_src;

/* positions [c0, c1) of unit u's moment tensor `kind` ("exp_avg", "exp_avg_sq") into dst */
static int reslice(moment_src *ms, int u, const char *kind, size_t c0, size_t c1, float *dst)
{
    const zt_engine *e = ms->e;
    char path[4096], name[ZT_NAME_MAX + 16];
    int world0 = ms->world0, shard = e->cfg.zero_stage >= 1;
    size_t numel = e->layout.units[u].numel, padded0;
    size_t piece0 = zt_zero_piece_for(numel, (size_t)world0, ms->bucket0, &padded0);
    size_t s0 = padded0 / (size_t)world0;
    zt_seg d = {0, e->padded[u], 0};
    snprintf(name, sizeof name, "%s.%s", kind, e->layout.units[u].name);
    for (int k = 0; k < world0; k++) {
        zt_tensor_info t;
        if (zt_safetensors_find(ms->f[k], name, &t) < 0 || t.dtype != ZT_F32 || t.numel != s0) {
            snprintf(path, sizeof path, "%s/rank-%05d.safetensors", ms->dir, k);
            return zt_fail(ZT_E_FORMAT, "%s: no F32 tensor \"%s\" of %zu floats", path, name,
                           s0);
        }
        ms->src[k] = t.data;
    }
    memset(dst, 0, (c1 - c0) * sizeof(float));
    /* each run of this engine's segments within [c0, c1), cut where the saved slices
     * change rank */
    for (int j = 0; shard ? zt_zero_seg(e, u, e->comm.rank, j, &d) : j == 0; j++) {
        if (d.soff >= c1 || d.soff + d.len <= c0)
            continue;
        size_t lo = d.off + (d.soff < c0 ? c0 - d.soff : 0);
        size_t end = d.off + (d.soff + d.len > c1 ? c1 - d.soff : d.len);
        end = end < numel ? end : numel;
        for (size_t x = lo; x < end;) {
            size_t base = x / piece0 * piece0;
            size_t plen = padded0 - base < piece0 ? padded0 - base : piece0;
            size_t sl = plen / (size_t)world0, within = x - base, o = within % sl;
            size_t run = sl - o < end - x ? sl - o : end - x;
            memcpy(dst + d.soff + (x - d.off) - c0,
                   ms->src[within / sl] + base / (size_t)world0 + o, run * sizeof(float));
            x += run;
        }
    }
    return 0;
}

static int fill_moments(int u, size_t c0, size_t c1, float *m, float *v, void *arg)
{
    ZT_TRY(reslice(arg, u, "exp_avg", c0, c1, m));
    return reslice(arg, u, "exp_avg_sq", c0, c1, v);
}

static int read_optimizer(zt_engine *e, const char *dir, int world0, size_t bucket0)
{
    char path[4096];
    int rc = 0;
    moment_src ms = {dir, world0, bucket0, calloc((size_t)world0, sizeof *ms.f),
                     calloc((size_t)world0, sizeof *ms.src), e};
    if (!ms.f || !ms.src) {
        free(ms.f);
        free(ms.src);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    for (int k = 0; k < world0 && rc == 0; k++) {
        snprintf(path, sizeof path, "%s/rank-%05d.safetensors", dir, k);
        rc = zt_safetensors_open(path, &ms.f[k]);
    }
    if (rc == 0)
        rc = zt_zero_moments_fill(e, fill_moments, &ms);
    for (int k = 0; k < world0; k++)
        zt_safetensors_close(ms.f[k]);
    free(ms.f);
    free(ms.src);
    return rc;
}

int zt_checkpoint_load(zt_engine *e, const char *dir, zt_train_state *st)
{
    char path[4096];
    bert_config bc;
    int rc;
    if (!e || !dir || !st)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_load: NULL argument");
    if ((rc = zt_zero_flush(e)) < 0)
        return zt_engine_fail(e, rc);
    if ((rc = zt_checkpoint_verify(dir)) < 0)
        return zt_engine_fail(e, rc);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if ((rc = bert_config_load(path, &bc)) < 0)
        return zt_engine_fail(e, rc);
    if (bc.vocab != e->bc.vocab || bc.hidden != e->bc.hidden || bc.layers != e->bc.layers ||
        bc.heads != e->bc.heads || bc.inter != e->bc.inter || bc.max_pos != e->bc.max_pos ||
        bc.type_vocab != e->bc.type_vocab)
        return zt_engine_fail(e, zt_fail(ZT_E_SHAPE, "%s: the checkpoint's model shape differs "
                                                     "from this engine's", path));
    int world0 = 1;
    size_t bucket0 = 0;
    if ((rc = zt_engine_load_params(e, dir)) < 0 ||
        (rc = read_state(dir, st, &world0, &bucket0)) < 0 ||
        (rc = zt_engine_ensure_moments(e)) < 0 ||
        (rc = read_optimizer(e, dir, world0, bucket0)) < 0)
        return zt_engine_fail(e, rc);
    e->step = st->step;
    return 0;
}

int zt_checkpoint_find_latest(const char *root, char *path_out, size_t n)
{
    int64_t *steps;
    int count = list_steps(root, &steps), found = 0;
    if (count < 0)
        return count;
    for (int i = 0; i < count && !found; i++) {
        char dir[4096], aside[4200];
        snprintf(dir, sizeof dir, "%s/step-%" PRId64, root, steps[i]);
        if (zt_checkpoint_verify(dir) == 0) {
            snprintf(path_out, n, "%s", dir);
            found = 1;
            break;
        }
        zt_log(ZT_LOG_WARN, "skipping checkpoint %s: %s", dir, zt_last_error());
        for (int k = 0; k < 1000; k++) { /* a free hidden name */
            struct stat sb;
            snprintf(aside, sizeof aside, "%s/.corrupt-step-%" PRId64 ".%d", root, steps[i], k);
            if (stat(aside, &sb) != 0)
                break;
        }
        if (rename(dir, aside) == 0)
            zt_log(ZT_LOG_WARN, "moved %s aside to %s", dir, aside);
    }
    free(steps);
    return found;
}

static int cmp_data(const void *a, const void *b)
{
    const char *x = ((const zt_tensor_view *)a)->data, *y = ((const zt_tensor_view *)b)->data;
    return (x > y) - (x < y);
}

/* The weight files of a checkpoint: model.safetensors, or the shards its index names. */
static int weight_files(const char *dir, char ***out, int *n)
{
    char path[4096], *text;
    struct stat sb;
    cJSON *o, *map, *it;
    int rc;
    *out = NULL;
    *n = 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (stat(path, &sb) == 0) {
        if (!(*out = calloc(1, sizeof **out)) || !((*out)[0] = strdup("model.safetensors")))
            return zt_fail(ZT_E_NOMEM, "out of memory");
        *n = 1;
        return 0;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    ZT_TRY(zt_file_read_all(path, 64u << 20, &text, NULL));
    o = cJSON_Parse(text);
    free(text);
    map = cJSON_GetObjectItemCaseSensitive(o, "weight_map");
    rc = cJSON_IsObject(map) ? 0 : zt_fail(ZT_E_FORMAT, "%s: no weight_map", path);
    cJSON_ArrayForEach(it, map) {
        int seen = 0;
        char **nn;
        if (rc < 0 || !cJSON_IsString(it) || strchr(it->valuestring, '/')) {
            rc = rc < 0 ? rc : zt_fail(ZT_E_FORMAT, "%s: bad weight_map entry", path);
            break;
        }
        for (int i = 0; i < *n && !seen; i++)
            seen = strcmp((*out)[i], it->valuestring) == 0;
        if (seen)
            continue;
        if (!(nn = realloc(*out, sizeof **out * (size_t)(*n + 1))) ||
            !(nn[*n] = strdup(it->valuestring))) {
            *out = nn ? nn : *out;
            rc = zt_fail(ZT_E_NOMEM, "out of memory");
            break;
        }
        *out = nn;
        (*n)++;
    }
    cJSON_Delete(o);
    return rc;
}

int zt_checkpoint_export(const char *dir, const char *out, size_t max_shard_bytes)
{
    char path[4096], **files = NULL, *config = NULL;
    zt_safetensors **f = NULL;
    zt_tensor_view *v = NULL;
    size_t config_len = 0;
    int nf = 0, nv = 0, rc;
    if (!dir || !out)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_export: NULL argument");
    if ((rc = zt_checkpoint_verify(dir)) < 0 || (rc = weight_files(dir, &files, &nf)) < 0)
        goto done;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if ((rc = zt_file_read_all(path, 1u << 20, &config, &config_len)) < 0)
        goto done;
    if (!(f = calloc((size_t)nf, sizeof *f))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto done;
    }
    /* the tensors stay in the mapped files: nothing is copied into memory */
    for (int k = 0; k < nf && rc == 0; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        if ((rc = zt_safetensors_open(path, &f[k])) < 0)
            break;
        int cnt = zt_safetensors_count(f[k]);
        zt_tensor_view *nvp = realloc(v, sizeof *v * (size_t)(nv + cnt));
        if (!nvp) {
            rc = zt_fail(ZT_E_NOMEM, "out of memory");
            break;
        }
        v = nvp;
        int first = nv;
        for (int i = 0; i < cnt; i++) {
            zt_tensor_info t;
            zt_safetensors_get(f[k], i, &t);
            v[nv] = (zt_tensor_view){t.name, t.dtype, t.ndim, {0}, t.data};
            memcpy(v[nv].shape, t.shape, sizeof t.shape);
            nv++;
        }
        /* keep the file's own order (by data offset), so a copy is byte-identical */
        qsort(v + first, (size_t)(nv - first), sizeof *v, cmp_data);
    }
    if (rc == 0 && (rc = zt_mkdirs(out)) == 0 &&
        (rc = zt_hf_write_weights(out, v, nv, max_shard_bytes)) == 0) {
        const void *parts[1] = {config};
        snprintf(path, sizeof path, "%s/config.json", out);
        rc = zt_file_write_atomic(path, parts, &config_len, 1);
    }
done:
    for (int k = 0; f && k < nf; k++)
        zt_safetensors_close(f[k]);
    for (int k = 0; files && k < nf; k++)
        free(files[k]);
    free(files);
    free(f);
    free(v);
    free(config);
    return rc;
}
