/* checkpoint.c - training checkpoints: ROOT/step-N/ with the model (HF layout), the AdamW
 * moments, the training state and a manifest of checksums written last; the folder is built
 * under a hidden name and renamed into place. One rank's full state in this version (the
 * sharded, any-world-size form arrives with the ZeRO stages). */
#include "engine_impl.h"
#include "load.h"
#include "../memory/mem.h"
#include "../format/fileio.h"

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
static const char *const ckpt_files[] = {"model.safetensors", "config.json",
                                         "optimizer.safetensors", "state.json",
                                         "train_config.json"};
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

/* M, V: whole-unit moment buffers (gathered from the shards when they are sharded) */
static int write_optimizer(zt_engine *e, float *const *M, float *const *V, const char *dir)
{
    char path[4096], step[32];
    int n = e->layout.n_params, rc;
    zt_tensor_view *v = calloc((size_t)(2 * n), sizeof *v);
    char **names = calloc((size_t)(2 * n), sizeof *names);
    if (!v || !names) {
        free(v);
        free(names);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < 2 * n; i++) {
        const zt_param_def *d = &e->layout.params[i % n];
        float *const *buf = i < n ? M : V;
        if (asprintf(&names[i], "%s.%s", i < n ? "exp_avg" : "exp_avg_sq", d->name) < 0) {
            names[i] = NULL;
            rc = zt_fail(ZT_E_NOMEM, "out of memory");
            goto out;
        }
        v[i] = (zt_tensor_view){names[i], ZT_F32, d->ndim, {0}, buf[d->unit] + d->offset};
        for (int k = 0; k < d->ndim; k++)
            v[i].shape[k] = d->shape[k];
    }
    snprintf(step, sizeof step, "%" PRId64, e->step);
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    {
        const char *meta[] = {"optimizer", "AdamW", "step", step};
        fault_point("before", "optimizer.safetensors");
        rc = zt_safetensors_write(path, v, 2 * n, meta, 2);
        fault_point("after", "optimizer.safetensors");
    }
out:
    for (int i = 0; i < 2 * n; i++)
        free(names[i]);
    free(names);
    free(v);
    return rc;
}

static int write_manifest(const char *dir)
{
    cJSON *m = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(m, "files");
    char path[4096], hex[17], *text = NULL;
    int rc = 0;
    cJSON_AddStringToObject(m, "format", "zerotrain-checkpoint");
    cJSON_AddNumberToObject(m, "version", 1);
    for (int i = 0; i < N_FILES && rc == 0; i++) {
        uint64_t h, bytes;
        snprintf(path, sizeof path, "%s/%s", dir, ckpt_files[i]);
        if ((rc = hash_file(path, &h, &bytes)) < 0)
            break;
        cJSON *f = cJSON_CreateObject();
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        cJSON_AddStringToObject(f, "name", ckpt_files[i]);
        cJSON_AddNumberToObject(f, "bytes", (double)bytes);
        cJSON_AddStringToObject(f, "xxh64", hex);
        cJSON_AddItemToArray(files, f);
    }
    if (rc == 0 && !(text = cJSON_Print(m)))
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    if (rc == 0)
        rc = write_text(dir, MANIFEST, text);
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

static int save_rank0(zt_engine *e, float *const *P, float *const *M, float *const *V,
                      const char *root, const zt_train_state *st, const char *train_config,
                      int keep)
{
    char tmp[4096], final[4096], old[4096], text[512];
    struct stat sb;
    int rc;
    if ((rc = zt_mkdirs(root)) < 0)
        return zt_engine_fail(e, rc);
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%" PRId64, root, st->step);
    snprintf(final, sizeof final, "%s/step-%" PRId64, root, st->step);
    snprintf(old, sizeof old, "%s/.old-step-%" PRId64, root, st->step);
    remove_dir(tmp); /* left by a save that died */
    if (mkdir(tmp, 0755) != 0)
        return zt_engine_fail(e, zt_fail(-errno, "%s: %s", tmp, strerror(errno)));
    fault_point("before", "model.safetensors");
    if ((rc = zt_engine_write_model(e, tmp, P, (size_t)5000000000u)) < 0)
        goto fail;
    fault_point("after", "model.safetensors");
    snprintf(text, sizeof text,
             "{\n  \"format\": \"zerotrain-train-state\",\n  \"version\": 1,\n"
             "  \"step\": %" PRId64 ",\n  \"samples\": %" PRIu64 ",\n  \"seed\": %" PRIu64
             ",\n  \"world_size\": %d\n}\n",
             st->step, st->samples, st->seed, e->comm.size);
    if ((rc = write_optimizer(e, M, V, tmp)) < 0 || (rc = write_text(tmp, "state.json", text)) < 0 ||
        (rc = write_text(tmp, "train_config.json", train_config ? train_config : "{}\n")) < 0 ||
        (rc = write_manifest(tmp)) < 0 || (rc = fsync_path(tmp)) < 0)
        goto fail;
    /* commit: move an existing folder of the same step aside, rename, sync the root */
    remove_dir(old);
    if (stat(final, &sb) == 0 && rename(final, old) != 0) {
        rc = zt_fail(-errno, "%s: cannot move aside: %s", final, strerror(errno));
        goto fail;
    }
    fault_point("before", "rename");
    if (rename(tmp, final) != 0) {
        rc = zt_fail(-errno, "%s: rename: %s", final, strerror(errno));
        rename(old, final);
        goto fail;
    }
    fault_point("after", "rename");
    if ((rc = fsync_path(root)) < 0)
        return zt_engine_fail(e, rc);
    remove_dir(old);
    if (keep > 0)
        prune(root, keep);
    return 0;
fail:
    zt_fail_wrap(rc, "saving checkpoint %s", final);
    remove_dir(tmp);
    return zt_engine_fail(e, rc);
}

/* Every rank calls this. With sharded moments (stage >= 1, N > 1) rank 0 gathers them into
 * whole units; rank 0 writes the folder; every rank returns rank 0's result. */
int zt_checkpoint_save(zt_engine *e, const char *root, const zt_train_state *st,
                       const char *train_config, int keep)
{
    int N, rc = 0, nu, sharded;
    float **M = NULL, **V = NULL;
    int64_t failed;
    if (!e || !root || !st)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_save: NULL argument");
    ZT_TRY(zt_engine_ensure_moments(e));
    N = e->comm.size;
    nu = e->layout.n_units;
    sharded = N > 1 && e->cfg.zero_stage >= 1;
    if (sharded) {
        M = calloc((size_t)nu, sizeof *M);
        V = calloc((size_t)nu, sizeof *V);
        for (int u = 0; rc == 0 && u < nu; u++) {
            size_t n = e->padded[u];
            if (e->comm.rank == 0 &&
                (!(M[u] = zt_mem_alloc(n * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_COMM)) ||
                 !(V[u] = zt_mem_alloc(n * sizeof(float), ZT_ALIGN_PAGE, ZT_MEM_COMM))))
                rc = ZT_E_NOMEM;
            /* every rank takes part in the gathers, even after a local failure */
            int r1 = zt_comm_gather(&e->comm, e->M[u], M ? M[u] : NULL, n);
            int r2 = zt_comm_gather(&e->comm, e->V[u], V ? V[u] : NULL, n);
            if (rc == 0)
                rc = r1 < 0 ? r1 : r2;
        }
    }
    float **P = NULL;
    int prc = zt_engine_gather_params(e, &P); /* collective in stage 3 */
    if (rc == 0)
        rc = prc;
    if (e->comm.rank == 0 && rc == 0)
        rc = save_rank0(e, P, sharded ? M : e->M, sharded ? V : e->V, root, st, train_config,
                        keep);
    if (P)
        zt_engine_free_gathered(e, P);
    if (sharded) {
        for (int u = 0; u < nu; u++) {
            zt_mem_free(M[u], e->padded[u] * sizeof(float), ZT_MEM_COMM);
            zt_mem_free(V[u], e->padded[u] * sizeof(float), ZT_MEM_COMM);
        }
        free(M);
        free(V);
    }
    failed = rc < 0;
    if (N > 1 && zt_comm_sum_i64(&e->comm, &failed) < 0)
        return zt_engine_fail(e, ZT_E_MPI);
    if (failed && rc == 0)
        rc = zt_engine_fail(e, zt_fail(ZT_E_MPI, "saving checkpoint in %s failed on rank 0",
                                       root));
    return rc;
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
    if (rc == 0 && seen != N_FILES)
        rc = zt_fail(ZT_E_FORMAT, "%s/%s: lists %d files, expected %d", dir, MANIFEST, seen,
                     N_FILES);
    cJSON_Delete(m);
    return rc;
}

static int read_state(const char *dir, zt_train_state *st)
{
    char path[4096], *text;
    cJSON *o, *s, *g, *sd;
    snprintf(path, sizeof path, "%s/state.json", dir);
    ZT_TRY(zt_file_read_all(path, 1u << 20, &text, NULL));
    o = cJSON_Parse(text);
    free(text);
    s = cJSON_GetObjectItemCaseSensitive(o, "step");
    g = cJSON_GetObjectItemCaseSensitive(o, "samples");
    sd = cJSON_GetObjectItemCaseSensitive(o, "seed");
    if (!cJSON_IsNumber(s) || !cJSON_IsNumber(g) || !cJSON_IsNumber(sd) || s->valuedouble < 0) {
        cJSON_Delete(o);
        return zt_fail(ZT_E_FORMAT, "%s: missing step, samples or seed", path);
    }
    /* cJSON keeps numbers as doubles: exact below 2^53, far beyond any step count */
    st->step = (int64_t)s->valuedouble;
    st->samples = (uint64_t)g->valuedouble;
    st->seed = (uint64_t)sd->valuedouble;
    cJSON_Delete(o);
    return 0;
}

static int read_optimizer(zt_engine *e, const char *dir)
{
    char path[4096], name[ZT_NAME_MAX + 16];
    zt_safetensors *f;
    int rc;
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    ZT_TRY(zt_safetensors_open(path, &f));
    for (int i = 0; i < 2 * e->layout.n_params; i++) {
        const zt_param_def *d = &e->layout.params[i % e->layout.n_params];
        float *const *buf = i < e->layout.n_params ? e->M : e->V;
        zt_tensor_info t;
        snprintf(name, sizeof name, "%s.%s", i < e->layout.n_params ? "exp_avg" : "exp_avg_sq",
                 d->name);
        if (zt_safetensors_find(f, name, &t) < 0) {
            rc = zt_fail(ZT_E_FORMAT, "%s: no tensor \"%s\"", path, name);
            goto out;
        }
        if (e->comm.size > 1 && e->cfg.zero_stage >= 1) {
            /* this rank keeps the part of the tensor that falls in its shard of the unit */
            size_t s = e->padded[d->unit] / (size_t)e->comm.size, lo = (size_t)e->comm.rank * s;
            size_t a = d->offset > lo ? d->offset : lo;
            size_t b = d->offset + d->numel < lo + s ? d->offset + d->numel : lo + s;
            float *tmp = malloc(d->numel * sizeof(float));
            if (!tmp) {
                rc = zt_fail(ZT_E_NOMEM, "out of memory");
                goto out;
            }
            if ((rc = zt_tensor_to_f32(&t, tmp, d->numel)) == 0 && a < b)
                memcpy(buf[d->unit] + (a - lo), tmp + (a - d->offset), (b - a) * sizeof(float));
            free(tmp);
        } else {
            rc = zt_tensor_to_f32(&t, buf[d->unit] + d->offset, d->numel);
        }
        if (rc < 0) {
            zt_fail_wrap(rc, "%s", path);
            goto out;
        }
    }
    rc = 0;
out:
    zt_safetensors_close(f);
    return rc;
}

int zt_checkpoint_load(zt_engine *e, const char *dir, zt_train_state *st)
{
    char path[4096];
    bert_config bc;
    int rc;
    if (!e || !dir || !st)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_load: NULL argument");
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
    if ((rc = zt_engine_load_params(e, dir)) < 0 ||
        (rc = zt_engine_ensure_moments(e)) < 0 || (rc = read_optimizer(e, dir)) < 0 ||
        (rc = read_state(dir, st)) < 0)
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
