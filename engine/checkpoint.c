/* checkpoint.c - training checkpoints: ROOT/step-N/ with the model (HF layout), every rank's
 * shard of the optimizer state (rank-R.safetensors: the sections of ostate.h per unit), the
 * training state and a manifest of checksums written last; the folder is built under a
 * hidden name and renamed into place. A checkpoint loads at any world size and stage: the
 * state is re-sliced from the layout the state records (world size, bucket) into this
 * engine's, and it must be the same optimizer's. */
#include "checkpoint.h"
#include "lscale.h"
#include "zero.h"
#include "../common/err.h"
#include "load.h"
#include "../common/faults.h"
#include "../common/half.h"
#include "../format/fileio.h"
#include "../format/hfweights.h"
#include "../models/zoo.h"
#include "../optimizer/quant.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MANIFEST "manifest.json"
/* files a checkpoint must list, besides the weights (model.safetensors, or shards with
 * model.safetensors.index.json) and every rank's rank-<r>.safetensors */
static const char *const ckpt_files[] = {"config.json", "state.json", "train_config.json"};
#define N_FILES (int)(sizeof ckpt_files / sizeof ckpt_files[0])

/* Tests only (zt_fault_hooks.point): "before:state.json" (or "after:manifest.json@2", the
 * second time the point is reached, "before:rename", ...) kills the process there with
 * SIGKILL, to check that a crash at any moment of a save loses nothing. */
void zt_ckpt_fault_point(const char *where, const char *what)
{
    static int hits;
    const char *p = zt_faults()->point, *at;
    char name[128];
    size_t len;
    if (!*p)
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
    int fd = zt_open_regular(path, 0), rc = 0;
    XXH64_state_t *st;
    ssize_t n;
    if (fd < 0)
        return fd;
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

/* Removes root/name (a checkpoint folder, or a link in its place: the link alone). */
static int remove_in(const char *root, const char *name)
{
    int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;
    if (dfd < 0)
        return errno == ENOENT ? 0 : -errno;
    rc = zt_remove_at(dfd, name);
    close(dfd);
    return rc;
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
int64_t zt_checkpoint_step_of(const char *name)
{
    char *end;
    long long v;
    if (strncmp(name, "step-", 5) != 0 || name[5] < '0' || name[5] > '9')
        return -1;
    errno = 0;
    v = strtoll(name + 5, &end, 10);
    return *end || errno ? -1 : v;
}

/* an entry step-N of a checkpoint root, by the name it has there */
typedef struct step_ent {
    int64_t step;
    char name[256];
} step_ent;

/* ROOT's step-N entries (folders, or anything else of that name), newest first. */
static int list_steps(const char *root, step_ent **out)
{
    DIR *d = opendir(root);
    struct dirent *de;
    step_ent *v = NULL;
    int n = 0;
    *out = NULL;
    if (!d)
        return errno == ENOENT ? 0 : zt_fail(-errno, "%s: %s", root, strerror(errno));
    while ((de = readdir(d))) {
        int64_t s = zt_checkpoint_step_of(de->d_name);
        step_ent *nv;
        if (s < 0 || strlen(de->d_name) >= sizeof v->name)
            continue;
        if (!(nv = realloc(v, sizeof *v * (size_t)(n + 1)))) {
            free(v);
            closedir(d);
            return zt_fail(ZT_E_NOMEM, "out of memory");
        }
        v = nv;
        v[n].step = s;
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        n++;
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && v[j].step > v[j - 1].step; j--) {
            step_ent t = v[j];
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
    zt_ckpt_fault_point("before", name);
    ZT_TRY(zt_file_write_atomic(path, parts, lens, 1));
    zt_ckpt_fault_point("after", name);
    return 0;
}

/* The rank file's tensors: every unit's sections (ostate.h) of this rank's part, unit by
 * unit (so the sections of one offloaded sub-group are read once), then on rank 0
 * Adafactor's replicated factored moments by parameter name. */
typedef struct rank_file {
    zt_ckpt *ck;
    int ns;              /* sections per unit */
    const zt_tensor_view *v;
} rank_file;

/* piece k of tensor i: sub-group k of its unit's part (one piece without offload); the
 * replicated tensors after the units' are whole */
static int state_piece(int i, int k, void *arg, const void **data, size_t *len)
{
    rank_file *rf = arg;
    if (i >= rf->ck->L->n_units * rf->ns) {
        *data = rf->v[i].data;
        return 0;
    }
    return zt_zero_state_piece(rf->ck->z, i / rf->ns, rf->ck->comm->rank, i % rf->ns, k, data,
                               len);
}

/* The optimizer as state.json records it: type, Adafactor's first moment, and the
 * parameters whose state is compact (AdamW8bit's fp32 ones): a checkpoint loads only into
 * an engine that lays its state out the same way. */
static cJSON *optimizer_json(const zt_ckpt *ck)
{
    cJSON *o = cJSON_CreateObject(), *c;
    cJSON_AddStringToObject(o, "type", zt_ost_name(ck->os->opt));
    if (ck->os->opt == ZT_OPT_ADAFACTOR)
        cJSON_AddBoolToObject(o, "beta1", ck->os->lay & ZT_OST_BETA1);
    if (ck->os->lay & ZT_OST_MASTER) /* (no update has filled the master sections yet) */
        cJSON_AddBoolToObject(o, "master_fresh", ck->os->master_fresh);
    if (ck->ls) { /* fp16's loss scaler (DeepSpeed keeps it with the optimizer's state) */
        cJSON *l = cJSON_AddObjectToObject(o, "loss_scaler");
        if (l) {
            cJSON_AddNumberToObject(l, "cur_scale", ck->ls->scale);
            cJSON_AddNumberToObject(l, "cur_iter", (double)ck->ls->iter);
            cJSON_AddNumberToObject(l, "last_overflow_iter", (double)ck->ls->last_overflow);
            cJSON_AddNumberToObject(l, "cur_hysteresis", ck->ls->hysteresis);
        }
    }
    if (ck->os->opt == ZT_OPT_ADAMW8BIT && (c = cJSON_AddArrayToObject(o, "fp32_state")))
        for (int i = 0; i < ck->L->n_params; i++)
            if (ck->os->pcompact[i])
                cJSON_AddItemToArray(c, cJSON_CreateString(ck->L->params[i].name));
    return o;
}

/* Adafactor's factored moments of parameter d (two or more dimensions) as Hugging Face
 * shapes them: c = 0 exp_avg_sq_row, shape[:-1]; c = 1 exp_avg_sq_col, shape[:-2] +
 * shape[-1:]. Fills ndim and shape, *at = their offset in the parameter's stretch of af_rc
 * (the rows first); returns their count of floats. */
static size_t af_state_shape(const zt_param_def *d, int c, int *ndim, int64_t *shape,
                             size_t *at)
{
    int64_t R = d->shape[d->ndim - 2], C = d->shape[d->ndim - 1];
    size_t n = 1;
    *ndim = d->ndim - 1;
    for (int k = 0; k < d->ndim - 2; k++)
        shape[k] = d->shape[k];
    shape[d->ndim - 2] = c ? C : R;
    for (int k = 0; k < *ndim; k++)
        n *= (size_t)shape[k];
    *at = c ? d->numel / (size_t)C : 0;
    return n;
}

static const char *af_state_name(int c)
{
    return c ? "exp_avg_sq_col" : "exp_avg_sq_row";
}

int zt_ckpt_write_rank_file(zt_ckpt *ck, const char *dir)
{
    char path[4096], name[32], meta_v[3][32];
    int nu = ck->L->n_units, N = ck->comm->size, r = ck->comm->rank, rc = 0, nt = 0;
    int off = ck->z->oo.store != NULL;
    const zt_ost_sec *sd;
    rank_file rf = {ck, zt_ost_sections(ck->os->opt, ck->os->lay, &sd), NULL};
    int nrep = 0;
    for (int i = 0; r == 0 && ck->os->af_rc && i < ck->L->n_params; i++)
        nrep += ck->L->params[i].ndim >= 2 ? 2 : 0;
    int cap = nu * rf.ns + nrep;
    zt_tensor_view *v = calloc((size_t)cap, sizeof *v);
    char **names = calloc((size_t)cap, sizeof *names);
    int *pieces = calloc((size_t)cap, sizeof *pieces);
    if (!v || !names || !pieces) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto out;
    }
    rf.v = v;
    if ((rc = zt_zero_state_stream_begin(ck->z)) < 0)
        goto out;
    for (int u = 0; u < nu; u++) {
        const zt_spart *p = zt_ost_part(ck->os, u, r);
        for (int k = 0; k < rf.ns; k++, nt++) {
            const void *data = NULL;
            size_t bytes;
            if (asprintf(&names[nt], "%s.%s", sd[k].name, ck->L->units[u].name) < 0) {
                names[nt] = NULL;
                rc = zt_fail(ZT_E_NOMEM, "out of memory");
                goto out;
            }
            pieces[nt] = zt_zero_state_pieces(ck->z, u);
            if (!off && (rc = zt_zero_state_piece(ck->z, u, r, k, 0, &data, &bytes)) < 0)
                goto out;
            v[nt] = (zt_tensor_view){names[nt], sd[k].dtype, 1,
                                     {(int64_t)zt_ost_sec_elems(&sd[k], p->len, p->n_compact)},
                                     data};
        }
    }
    for (int i = 0; nrep && i < ck->L->n_params; i++) {
        const zt_param_def *d = &ck->L->params[i];
        if (d->ndim < 2)
            continue;
        for (int c = 0; c < 2; c++, nt++) {
            size_t at;
            if (asprintf(&names[nt], "%s.%s", af_state_name(c), d->name) < 0) {
                names[nt] = NULL;
                rc = zt_fail(ZT_E_NOMEM, "out of memory");
                goto out;
            }
            pieces[nt] = 1;
            v[nt] = (zt_tensor_view){names[nt], ZT_F32, 0, {0}, NULL};
            af_state_shape(d, c, &v[nt].ndim, v[nt].shape, &at);
            v[nt].data = ck->os->af_rc + ck->os->af_off[i] + at;
        }
    }
    snprintf(meta_v[0], sizeof meta_v[0], "%d", r);
    snprintf(meta_v[1], sizeof meta_v[1], "%d", N);
    snprintf(meta_v[2], sizeof meta_v[2], "%" PRId64, *ck->step);
    snprintf(name, sizeof name, "rank-%05d.safetensors", r);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    {
        const char *meta[] = {"rank", meta_v[0], "world_size", meta_v[1], "step", meta_v[2],
                              "optimizer", zt_ost_name(ck->os->opt)};
        zt_ckpt_fault_point("before", name);
        rc = zt_safetensors_write_pieces(path, v, nt, meta, 4, off ? pieces : NULL,
                                         off ? state_piece : NULL, &rf);
        zt_ckpt_fault_point("after", name);
    }
out:
    for (int i = 0; names && i < cap; i++)
        free(names[i]);
    free(names);
    free(v);
    free(pieces);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The manifest checks itself: its last member, on the line before the closing brace, is
 * "manifest_xxh64", the xxh64 (seed 0) of every byte of the file before that line. Written
 * by this version (3) with the run id; versions 1 and 2 have neither. */
#define SELF_KEY "manifest_xxh64"
#define SELF_HEAD "\t\"" SELF_KEY "\":\t\""
#define SELF_LEN (sizeof SELF_HEAD - 1 + 16 + 4) /* the line, the value, "\"\n}\n" */
#define MANIFEST_VERSION 3
#define MAX_EXACT 9007199254740992.0 /* 2^53: cJSON's numbers are doubles */

/* Every file in the folder (model weights, single or sharded; config; state; every rank's
 * shards), sorted, with its size and xxh64; written last. */
static int write_manifest(const char *dir, const zt_ckpt *ck)
{
    cJSON *m = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(m, "files");
    char path[4096], hex[17], *text = NULL, *body = NULL, *full = NULL, **names = NULL;
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
    cJSON_AddNumberToObject(m, "version", MANIFEST_VERSION);
    cJSON_AddStringToObject(m, "run_id", ck->run_id);
    cJSON_AddNumberToObject(m, "world_size", ck->comm->size);
    cJSON_AddNumberToObject(m, "zero_stage", ck->cfg->zero_stage);
    cJSON_AddNumberToObject(m, "bucket_size", (double)ck->geo->bucket);
    {
        cJSON *units = cJSON_AddArrayToObject(m, "units");
        for (int u = 0; units && u < ck->L->n_units; u++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", ck->L->units[u].name);
            cJSON_AddNumberToObject(o, "numel", (double)ck->L->units[u].numel);
            cJSON_AddNumberToObject(o, "padded", (double)ck->geo->padded[u]);
            cJSON_AddNumberToObject(o, "piece", (double)ck->geo->piece[u]);
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
    if (rc == 0) { /* cJSON_Print ends with "\n}": the members, a comma, then the checksum */
        size_t len = strlen(text);
        if (len < 2 || strcmp(text + len - 2, "\n}") != 0)
            rc = zt_fail(ZT_E_FORMAT, "%s/%s: unexpected JSON text", dir, MANIFEST);
        else if ((text[len - 2] = '\0', asprintf(&body, "%s,\n", text)) < 0)
            body = NULL, rc = zt_fail(ZT_E_NOMEM, "out of memory");
        else if (asprintf(&full, "%s" SELF_HEAD "%016" PRIx64 "\"\n}\n", body,
                          (uint64_t)XXH64(body, strlen(body), 0)) < 0)
            full = NULL, rc = zt_fail(ZT_E_NOMEM, "out of memory");
    }
    if (rc == 0)
        rc = write_text(dir, MANIFEST, full);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(text);
    free(body);
    free(full);
    cJSON_Delete(m);
    return rc;
}

/* A manifest as read and validated: the parsed JSON, its files array, the run id ("" for an
 * older version's), whether it carried its own checksum. */
typedef struct manifest {
    cJSON *m;
    const cJSON *files;
    char run_id[33];
    int self_checked;
} manifest;

/* s is exactly n lowercase hex digits */
static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[n] == '\0';
}

/* v is a number holding an integer in [lo, hi] */
static int is_int(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
           v->valuedouble == (double)(int64_t)v->valuedouble;
}

/* a file name of the checkpoint folder itself: no path, not hidden */
static int plain_name(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 256 && s[0] != '.' && !strchr(s, '/');
}

static int bad_field(const char *path, const char *field, const char *what)
{
    return zt_fail(ZT_E_FORMAT, "%s: \"%s\" %s (the manifest is corrupt)", path, field, what);
}

/* units[]: name, numel, padded, piece */
static int check_units(const char *path, const cJSON *units)
{
    const cJSON *u;
    char field[64];
    int i = 0;
    if (!cJSON_IsArray(units))
        return bad_field(path, "units", "is not an array");
    cJSON_ArrayForEach(u, units) {
        static const char *const num[] = {"numel", "padded", "piece"};
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(u, "name");
        snprintf(field, sizeof field, "units[%d].name", i);
        if (!cJSON_IsObject(u) || !cJSON_IsString(nm) || !nm->valuestring[0])
            return bad_field(path, field, "is missing or not a name");
        for (int k = 0; k < 3; k++) {
            snprintf(field, sizeof field, "units[%d].%s", i, num[k]);
            if (!is_int(cJSON_GetObjectItemCaseSensitive(u, num[k]), 0, MAX_EXACT))
                return bad_field(path, field, "is missing or not a non-negative integer");
        }
        i++;
    }
    return 0;
}

/* files[]: name (a plain file name, once), bytes, xxh64 */
static int check_files(const char *path, const cJSON *files)
{
    const cJSON *f, *g;
    char field[64];
    int i = 0;
    if (!cJSON_IsArray(files))
        return bad_field(path, "files", "is missing or not an array");
    cJSON_ArrayForEach(f, files) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"),
                    *by = cJSON_GetObjectItemCaseSensitive(f, "bytes"),
                    *hx = cJSON_GetObjectItemCaseSensitive(f, "xxh64");
        snprintf(field, sizeof field, "files[%d]", i);
        if (!cJSON_IsObject(f))
            return bad_field(path, field, "is not an object");
        snprintf(field, sizeof field, "files[%d].name", i);
        if (!cJSON_IsString(nm) || !plain_name(nm->valuestring))
            return bad_field(path, field, "is missing or not a plain file name");
        cJSON_ArrayForEach(g, files) {
            const cJSON *gn = cJSON_GetObjectItemCaseSensitive(g, "name");
            if (g == f)
                break;
            if (cJSON_IsString(gn) && strcmp(gn->valuestring, nm->valuestring) == 0)
                return bad_field(path, field, "names a file listed before");
        }
        snprintf(field, sizeof field, "files[%d].bytes", i);
        if (!is_int(by, 0, MAX_EXACT))
            return bad_field(path, field, "is missing or not a non-negative integer");
        snprintf(field, sizeof field, "files[%d].xxh64", i);
        if (!cJSON_IsString(hx) || !is_hex(hx->valuestring, 16))
            return bad_field(path, field, "is missing or not 16 lowercase hex digits");
        i++;
    }
    return 0;
}

/* Reads dir's manifest and validates every field (not the files it lists); on success the
 * caller frees mf->m. */
static int read_manifest(const char *dir, manifest *mf)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    const cJSON *v, *self;
    cJSON *m = NULL;
    int rc = 0, version;
    memset(mf, 0, sizeof *mf);
    snprintf(path, sizeof path, "%s/%s", dir, MANIFEST);
    if (zt_file_read_all(path, 1u << 20, &text, &len) < 0)
        return zt_fail(ZT_E_FORMAT, "%s: missing or unreadable (the save did not finish)", path);
    if (strlen(text) != len || !(m = cJSON_ParseWithOpts(text, NULL, 1)) || !cJSON_IsObject(m)) {
        rc = zt_fail(ZT_E_FORMAT, "%s: not a JSON object (the manifest is corrupt)", path);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(m, "format");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "zerotrain-checkpoint") != 0) {
        rc = bad_field(path, "format", "is not \"zerotrain-checkpoint\"");
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(m, "version");
    if (!is_int(v, 1, MANIFEST_VERSION)) {
        rc = bad_field(path, "version", "is not 1, 2 or 3 (a newer zerotrain's checkpoint?)");
        goto out;
    }
    version = (int)v->valuedouble;
    self = cJSON_GetObjectItemCaseSensitive(m, SELF_KEY);
    v = cJSON_GetObjectItemCaseSensitive(m, "run_id");
    if ((v || version >= 3) && (!cJSON_IsString(v) || !is_hex(v->valuestring, 32))) {
        rc = bad_field(path, "run_id", "is missing or not 32 lowercase hex digits");
        goto out;
    }
    if (v)
        snprintf(mf->run_id, sizeof mf->run_id, "%s", v->valuestring);
    {
        static const struct { const char *key; double lo, hi; } ints[] = {
            {"world_size", 1, 1 << 20}, {"zero_stage", 0, 3}, {"bucket_size", 0, MAX_EXACT}};
        for (int k = 0; k < 3; k++) {
            v = cJSON_GetObjectItemCaseSensitive(m, ints[k].key);
            if ((v || version >= 3) && !is_int(v, ints[k].lo, ints[k].hi)) {
                char what[96];
                snprintf(what, sizeof what, "is missing or not an integer in [%.0f, %.0f]",
                         ints[k].lo, ints[k].hi);
                rc = bad_field(path, ints[k].key, what);
                goto out;
            }
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(m, "units");
    if ((v || version >= 3) && (rc = check_units(path, v)) < 0)
        goto out;
    mf->files = cJSON_GetObjectItemCaseSensitive(m, "files");
    if ((rc = check_files(path, mf->files)) < 0)
        goto out;
    if (!self && version >= 3) {
        rc = bad_field(path, SELF_KEY, "is missing");
        goto out;
    }
    if (self) { /* the last member, in the form written, over the bytes before its line */
        const char *tail = text + (len < SELF_LEN ? 0 : len - SELF_LEN);
        const cJSON *last = m->child;
        char want[17];
        while (last->next)
            last = last->next;
        if (!cJSON_IsString(self) || !is_hex(self->valuestring, 16) || last != self ||
            len < SELF_LEN || memcmp(tail, SELF_HEAD, sizeof SELF_HEAD - 1) != 0 ||
            memcmp(tail + sizeof SELF_HEAD - 1, self->valuestring, 16) != 0 ||
            memcmp(text + len - 4, "\"\n}\n", 4) != 0) {
            rc = bad_field(path, SELF_KEY, "is not 16 hex digits on the manifest's last line");
            goto out;
        }
        snprintf(want, sizeof want, "%016" PRIx64, (uint64_t)XXH64(text, (size_t)(tail - text), 0));
        if (strcmp(want, self->valuestring) != 0) {
            rc = zt_fail(ZT_E_FORMAT, "%s: its content's checksum %s does not match its \""
                         SELF_KEY "\" %s (the manifest is corrupt)", path, want,
                         self->valuestring);
            goto out;
        }
        mf->self_checked = 1;
    }
out:
    free(text);
    if (rc < 0)
        cJSON_Delete(m);
    else
        mf->m = m;
    return rc;
}

/* 128 random bits as 32 hex digits: a new lineage */
static int new_run_id(char out[33])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return zt_fail(-errno, "getrandom: %s", strerror(errno));
        got += (size_t)n;
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* root/name is a checkpoint folder (not a link) of run run_id */
static int of_run(const char *root, const char *name, const char *run_id)
{
    char dir[4096];
    struct stat sb;
    manifest mf;
    int mine;
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || read_manifest(dir, &mf) < 0)
        return 0;
    mine = mf.run_id[0] && strcmp(mf.run_id, run_id) == 0;
    cJSON_Delete(mf.m);
    return mine;
}

/* Keeps the newest `keep` checkpoints of this run's lineage and removes its older ones; any
 * other entry (another run's, an older version's without a run id, one that does not read,
 * a link) is left alone. */
static void prune(const char *root, const char *run_id, int keep)
{
    step_ent *v;
    int n = list_steps(root, &v), mine = 0;
    for (int i = 0; i < n; i++)
        if (of_run(root, v[i].name, run_id) && ++mine > keep)
            remove_in(root, v[i].name);
    free(v);
}

/* Rank 0, after every rank file is written: the model, state, config and manifest, then
 * the rename that commits the checkpoint. */
int zt_ckpt_commit_rank0(zt_ckpt *ck, const char *root, const zt_train_state *st,
                         const char *train_config, int keep)
{
    char *text = NULL, *opt = NULL, tmp[4096], final[4096], old[4096], tmpn[48], finaln[48],
         oldn[48];
    struct stat sb;
    int rc;
    cJSON *oj;
    snprintf(tmpn, sizeof tmpn, ".tmp-step-%" PRId64, st->step);
    snprintf(finaln, sizeof finaln, "step-%" PRId64, st->step);
    snprintf(oldn, sizeof oldn, ".old-step-%" PRId64, st->step);
    snprintf(tmp, sizeof tmp, "%s/%s", root, tmpn);
    snprintf(final, sizeof final, "%s/%s", root, finaln);
    snprintf(old, sizeof old, "%s/%s", root, oldn);
    if (!ck->run_id[0]) /* a fresh engine's first save starts a lineage */
        ZT_TRY(new_run_id(ck->run_id));
    oj = optimizer_json(ck);
    if (!oj || !(opt = cJSON_PrintUnformatted(oj)) ||
        asprintf(&text,
                 "{\n  \"format\": \"zerotrain-train-state\",\n  \"version\": 3,\n"
                 "  \"step\": %" PRId64 ",\n  \"samples\": %" PRIu64 ",\n  \"seed\": %" PRIu64
                 ",\n  \"world_size\": %d,\n  \"zero_stage\": %d,\n  \"bucket_size\": %zu,\n"
                 "  \"optimizer\": %s\n}\n",
                 st->step, st->samples, st->seed, ck->comm->size, ck->cfg->zero_stage, ck->geo->bucket,
                 opt) < 0)
        text = NULL;
    cJSON_Delete(oj);
    free(opt);
    if (!text)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    rc = write_text(tmp, "state.json", text);
    free(text);
    if (rc < 0 ||
        (rc = write_text(tmp, "train_config.json", train_config ? train_config : "{}\n")) < 0 ||
        (ck->trainer_info[0] && (rc = write_text(tmp, "trainer.json", ck->trainer_info)) < 0) ||
        (rc = write_manifest(tmp, ck)) < 0 || (rc = fsync_path(tmp)) < 0)
        return rc;
    /* a save that died between the two renames below left the checkpoint it replaced as
     * .old-step-N: that one goes back first */
    if (lstat(old, &sb) == 0 && lstat(final, &sb) != 0)
        rename(old, final);
    remove_in(root, oldn);
    if (lstat(final, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            zt_log(ZT_LOG_WARN, "replacing %s, which is not a checkpoint folder (a link's "
                   "target is left as it is)", final);
        else if (!of_run(root, finaln, ck->run_id))
            zt_log(ZT_LOG_WARN, "replacing %s, a checkpoint of another run", final);
        zt_ckpt_fault_point("before", "rename");
        /* one atomic swap: step-N is at every moment the old checkpoint or the new one */
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
            zt_ckpt_fault_point("after", "rename");
            if ((rc = fsync_path(root)) < 0)
                return rc;
            remove_in(root, tmpn);
            goto committed;
        }
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
            return zt_fail(-errno, "%s: cannot replace: %s", final, strerror(errno));
        if (rename(final, old) != 0) /* (a filesystem without the swap) */
            return zt_fail(-errno, "%s: cannot move aside: %s", final, strerror(errno));
    } else {
        zt_ckpt_fault_point("before", "rename");
    }
    if (rename(tmp, final) != 0) {
        rc = zt_fail(-errno, "%s: rename: %s", final, strerror(errno));
        rename(old, final);
        return rc;
    }
    zt_ckpt_fault_point("after", "rename");
    if ((rc = fsync_path(root)) < 0)
        return rc;
    remove_in(root, oldn);
committed:
    if (keep > 0)
        prune(root, ck->run_id, keep);
    return 0;
}

/* The manifest, then every file it lists against its size and checksum. */
static int verify_dir(const char *dir, manifest *mf)
{
    static int told;
    char path[4096];
    const cJSON *f;
    int rc = 0;
    ZT_TRY(read_manifest(dir, mf));
    if (!mf->self_checked && !told) {
        told = 1;
        zt_log(ZT_LOG_WARN, "%s/%s was written by an older zerotrain, without a checksum of "
               "its own: its fields are checked, its bytes are not (a checkpoint saved from "
               "it has one)", dir, MANIFEST);
    }
    cJSON_ArrayForEach(f, mf->files) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name"),
                    *by = cJSON_GetObjectItemCaseSensitive(f, "bytes"),
                    *hx = cJSON_GetObjectItemCaseSensitive(f, "xxh64");
        uint64_t h, bytes;
        char hex[17];
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
    }
    for (int i = 0; rc == 0 && i < N_FILES; i++) {
        int listed = 0;
        cJSON_ArrayForEach(f, mf->files)
            listed |= strcmp(cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring,
                             ckpt_files[i]) == 0;
        if (!listed)
            rc = zt_fail(ZT_E_FORMAT, "%s/%s: does not list %s", dir, MANIFEST, ckpt_files[i]);
    }
    if (rc == 0) {
        int weights = 0;
        cJSON_ArrayForEach(f, mf->files) {
            const char *nm = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
            weights |= strcmp(nm, "model.safetensors") == 0 ||
                       strcmp(nm, "model.safetensors.index.json") == 0;
        }
        if (!weights)
            rc = zt_fail(ZT_E_FORMAT, "%s/%s: lists no model weights", dir, MANIFEST);
    }
    if (rc < 0) {
        cJSON_Delete(mf->m);
        mf->m = NULL;
    }
    return rc;
}

int zt_checkpoint_verify(const char *dir)
{
    manifest mf;
    int rc;
    if (!dir)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_verify: NULL argument");
    if ((rc = verify_dir(dir, &mf)) == 0)
        cJSON_Delete(mf.m);
    return rc;
}

int zt_ckpt_remove_other_runs(zt_ckpt *ck, const char *root)
{
    step_ent *v;
    int n, rc = 0, removed = 0;
    if (!root)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_remove_other_runs: NULL argument");
    if (ck->comm->rank != 0)
        return 0;
    if (!ck->run_id[0])
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_remove_other_runs: the "
                                         "engine has saved or loaded no checkpoint yet");
    if ((n = list_steps(root, &v)) < 0)
        return n;
    for (int i = 0; i < n; i++) {
        int r;
        if (of_run(root, v[i].name, ck->run_id))
            continue;
        if ((r = remove_in(root, v[i].name)) < 0) {
            if (rc == 0)
                rc = zt_fail(r, "%s/%s: cannot remove: %s", root, v[i].name, strerror(-r));
            continue;
        }
        zt_log(ZT_LOG_INFO, "removed %s/%s (not of run %s)", root, v[i].name, ck->run_id);
        removed++;
    }
    free(v);
    return rc < 0 ? rc : removed;
}

int zt_ckpt_set_trainer_info(zt_ckpt *ck, const char *json)
{
    cJSON *o;
    size_t len;
    if (!json) {
        ck->trainer_info[0] = '\0';
        return 0;
    }
    if ((len = strlen(json)) >= ZT_TRAINER_INFO_MAX)
        return zt_fail(ZT_E_RANGE, "zt_checkpoint_set_trainer_info: %zu "
                                         "bytes, at most %d", len, ZT_TRAINER_INFO_MAX - 1);
    o = cJSON_Parse(json);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_set_trainer_info: not a "
                                         "JSON object");
    }
    cJSON_Delete(o);
    memcpy(ck->trainer_info, json, len + 1);
    return 0;
}

const char *zt_ckpt_trainer_info(const zt_ckpt *ck)
{
    return ck->loaded_info[0] ? ck->loaded_info : NULL;
}

/* The checkpoint's optimizer must be laid out as this engine's (a checkpoint without the
 * record is AdamW's). */
static int check_optimizer(const zt_ckpt *ck, const char *path, const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    const char *name = cJSON_IsString(t) ? t->valuestring : o ? NULL : "AdamW";
    if (!name)
        return zt_fail(ZT_E_FORMAT, "%s: \"optimizer\" has no \"type\"", path);
    if (strcmp(name, zt_ost_name(ck->os->opt)))
        return zt_fail(ZT_E_CONFIG, "%s: the checkpoint holds %s state, and this run's "
                       "optimizer is %s: resume with optimizer.type \"%s\" (or start from the "
                       "checkpoint's weights alone, as a Hugging Face folder)", path, name,
                       zt_ost_name(ck->os->opt), name);
    if (ck->os->opt == ZT_OPT_ADAFACTOR) {
        const cJSON *b1 = cJSON_GetObjectItemCaseSensitive(o, "beta1");
        if (!cJSON_IsBool(b1) || cJSON_IsTrue(b1) != !!(ck->os->lay & ZT_OST_BETA1))
            return zt_fail(ZT_E_CONFIG, "%s: the checkpoint's Adafactor %s a first moment and "
                           "this run's %s: set optimizer.params.beta1 %s", path,
                           cJSON_IsTrue(b1) ? "has" : "has no", ck->os->lay & ZT_OST_BETA1 ? "has" : "has not",
                           cJSON_IsTrue(b1) ? "as it was" : "to null");
    }
    if (ck->os->opt == ZT_OPT_ADAMW8BIT) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "fp32_state"), *x;
        int n = 0, want = 0;
        if (!cJSON_IsArray(f))
            return zt_fail(ZT_E_FORMAT, "%s: \"optimizer\" has no \"fp32_state\" list", path);
        for (int i = 0; i < ck->L->n_params; i++)
            want += ck->os->pcompact[i];
        cJSON_ArrayForEach(x, f) {
            int i = cJSON_IsString(x) ? zt_layout_find(ck->L, x->valuestring) : -1;
            if (i < 0 || !ck->os->pcompact[i])
                return zt_fail(ZT_E_CONFIG, "%s: the checkpoint kept fp32 AdamW8bit state for "
                               "\"%s\", this run does not: set min_8bit_size and "
                               "zerotrain.fp32_optimizer_state as when it was saved", path,
                               cJSON_IsString(x) ? x->valuestring : "?");
            n++;
        }
        if (n != want)
            return zt_fail(ZT_E_CONFIG, "%s: this run keeps fp32 AdamW8bit state for %d "
                           "tensors, the checkpoint for %d: set min_8bit_size and "
                           "zerotrain.fp32_optimizer_state as when it was saved", path, want, n);
    }
    return 0;
}

int zt_ckpt_read_state(zt_ckpt *ck, const char *dir, zt_train_state *st, int *world,
                       size_t *bucket)
{
    char path[4096], *text;
    cJSON *o, *s, *g, *sd, *w, *bk;
    int rc;
    snprintf(path, sizeof path, "%s/state.json", dir);
    ZT_TRY(zt_file_read_all(path, 16u << 20, &text, NULL));
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
    if ((rc = check_optimizer(ck, path, cJSON_GetObjectItemCaseSensitive(o, "optimizer"))) < 0) {
        cJSON_Delete(o);
        return rc;
    }
    {
        const cJSON *oo = cJSON_GetObjectItemCaseSensitive(o, "optimizer");
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(oo, "loss_scaler");
        ck->saved_fresh = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(oo, "master_fresh"));
        if (ck->ls && l) { /* (a checkpoint of another precision: the scaler starts fresh) */
            const cJSON *sc = cJSON_GetObjectItemCaseSensitive(l, "cur_scale");
            const cJSON *it = cJSON_GetObjectItemCaseSensitive(l, "cur_iter");
            const cJSON *lo = cJSON_GetObjectItemCaseSensitive(l, "last_overflow_iter");
            const cJSON *hy = cJSON_GetObjectItemCaseSensitive(l, "cur_hysteresis");
            if (!cJSON_IsNumber(sc) || !(sc->valuedouble > 0) || !cJSON_IsNumber(it) ||
                it->valuedouble < 0 || !cJSON_IsNumber(lo) || lo->valuedouble < -1 ||
                !cJSON_IsNumber(hy) || hy->valuedouble < 1) {
                cJSON_Delete(o);
                return zt_fail(ZT_E_FORMAT, "%s: \"optimizer.loss_scaler\" needs cur_scale > "
                               "0, cur_iter >= 0, last_overflow_iter >= -1 and cur_hysteresis "
                               ">= 1", path);
            }
            ck->ls->scale = sc->valuedouble;
            ck->ls->iter = (int64_t)it->valuedouble;
            ck->ls->last_overflow = (int64_t)lo->valuedouble;
            ck->ls->hysteresis = (int)hy->valuedouble;
        }
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

/* The state saved by world0 ranks with bucket0 (rank k: its shard of each unit as laid out
 * for world0), re-sliced into this engine's parts. Per-position and per-block sections map
 * unit positions; compact ones go through the runs of the saved shards. Only the first
 * numel floats of a unit carry data; the rest is padding and keeps its fresh state. */
typedef struct state_src {
    const char *dir;
    int world0;
    size_t bucket0;
    zt_safetensors **f;            /* rank k's file */
    const uint8_t **src;           /* per rank: the tensor being read */
    zt_srun **runs;                /* per rank: the saved shard's runs of unit `ru` */
    int *n_runs, ru;
    size_t *n_compact;
    zt_geom g0;                    /* unit ru's saved geometry */
    zt_ckpt *ck;
} state_src;

/* saved rank and shard position of unit position x, and how many positions from x on
 * follow contiguously */
static void saved_pos(const zt_geom *g, size_t x, int *k, size_t *sp, size_t *run)
{
    size_t base = x / g->piece * g->piece;
    size_t plen = g->padded - base < g->piece ? g->padded - base : g->piece;
    size_t sl = plen / g->N, within = x - base, o = within % sl;
    *k = (int)(within / sl);
    *sp = base / g->N + o;
    *run = sl - o;
}

static int src_unit(state_src *ss, int u)
{
    zt_ckpt *ck = ss->ck;
    if (ss->ru == u)
        return 0;
    for (int k = 0; k < ss->world0; k++) {
        free(ss->runs[k]);
        ss->runs[k] = NULL;
    }
    ss->ru = -1;
    ss->g0.N = (size_t)ss->world0;
    ss->g0.piece = zt_geom_piece_for(ck->L->units[u].numel, ss->g0.N, ss->bucket0,
                                     &ss->g0.padded);
    for (int k = 0; k < ss->world0; k++)
        ZT_TRY(zt_ost_runs(ck->L, ck->os->pcompact, u, &ss->g0, k, &ss->runs[k],
                           &ss->n_runs[k], &ss->n_compact[k]));
    ss->ru = u;
    return 0;
}

/* the saved compact index of shard position sp of rank k (a compact parameter's) */
static size_t saved_compact(const state_src *ss, int k, size_t sp)
{
    int lo = 0, hi = ss->n_runs[k] - 1;
    while (lo < hi) { /* the last run starting at or before sp */
        int mid = (lo + hi + 1) / 2;
        if (ss->runs[k][mid].j0 <= sp)
            lo = mid;
        else
            hi = mid - 1;
    }
    const zt_srun *x = &ss->runs[k][lo];
    return x->f0 + (sp - x->j0);
}

/* section `sec` of part p's positions [c0, c1) (compact [f0, f0 + nc)) into its place in
 * the block at base */
static int reslice(state_src *ss, int u, const zt_spart *p, int sec, size_t c0, size_t c1,
                   size_t f0, size_t nc, uint8_t *base)
{
    zt_ckpt *ck = ss->ck;
    const zt_ost_sec *sd;
    char path[4096], name[ZT_NAME_MAX + 16];
    (void)zt_ost_sections(ck->os->opt, ck->os->lay, &sd);
    const zt_ost_sec *S = &sd[sec];
    size_t es = zt_dtype_size(S->dtype), numel = ck->L->units[u].numel;
    size_t q = S->kind == ZT_SEC_BLOCK ? ZT_QBLOCK : 1; /* positions per element */
    uint8_t *dst = base + zt_ost_sec_offset(ck->os->opt, ck->os->lay, sec, c1 - c0, nc);
    snprintf(name, sizeof name, "%s.%s", S->name, ck->L->units[u].name);
    ZT_TRY(src_unit(ss, u));
    for (int k = 0; k < ss->world0; k++) {
        zt_tensor_info t;
        size_t want = zt_ost_sec_elems(S, ss->g0.padded / ss->g0.N, ss->n_compact[k]);
        if (zt_safetensors_find(ss->f[k], name, &t) < 0 || t.dtype != S->dtype || t.numel != want) {
            snprintf(path, sizeof path, "%s/rank-%05d.safetensors", ss->dir, k);
            return zt_fail(ZT_E_FORMAT, "%s: no %s tensor \"%s\" of %zu elements", path,
                           zt_dtype_name(S->dtype), name, want);
        }
        ss->src[k] = t.data;
    }
    if (S->kind == ZT_SEC_COMPACT) {
        for (int j = 0; j < p->n_run; j++) {
            const zt_srun *x = &p->run[j];
            size_t lo = x->j0 > c0 ? x->j0 : c0, hi = x->j1 < c1 ? x->j1 : c1;
            if (!x->compact || lo >= hi)
                continue;
            for (size_t at = lo; at < hi;) {
                int k;
                size_t sp, run;
                saved_pos(&ss->g0, x->a + (at - x->j0), &k, &sp, &run);
                run = run < hi - at ? run : hi - at;
                memcpy(dst + (x->f0 + (at - x->j0) - f0) * es,
                       ss->src[k] + saved_compact(ss, k, sp) * es, run * es);
                at += run;
            }
        }
        return 0;
    }
    /* each run of this part's segments within [c0, c1), cut where the saved slices change
     * rank; per-block sections move whole blocks (every cut is on a multiple of 1024) */
    zt_seg d;
    for (int j = 0; zt_geometry_seg(ck->geo, u, p->rank, j, &d); j++) {
        if (d.soff >= c1 || d.soff + d.len <= c0)
            continue;
        size_t lo = d.off + (d.soff < c0 ? c0 - d.soff : 0);
        size_t end = d.off + (d.soff + d.len > c1 ? c1 - d.soff : d.len);
        end = end < numel ? end : numel;
        for (size_t x = lo; x < end;) {
            int k;
            size_t sp, run;
            saved_pos(&ss->g0, x, &k, &sp, &run);
            run = run < end - x ? run : end - x;
            memcpy(dst + (d.soff + (x - d.off) - c0) / q * es, ss->src[k] + sp / q * es,
                   (run + q - 1) / q * es);
            x += run;
        }
    }
    return 0;
}

static int fill_state(int u, const zt_spart *p, size_t c0, size_t c1, size_t f0, size_t nc,
                      uint8_t *base, void *arg)
{
    state_src *ss = arg;
    const zt_ost_sec *sd;
    int ns = zt_ost_sections(ss->ck->os->opt, ss->ck->os->lay, &sd);
    zt_ost_init(ss->ck->os, base, c1 - c0, nc);
    for (int sec = 0; sec < ns; sec++) {
        if (ss->ck->os->lay & ZT_OST_MASTER && sec == ns - 1) {
            /* half precision's master: a checkpoint saved in fp32 has none, and its
             * parameters (rounded as they load) are the master to start from */
            char name[ZT_NAME_MAX + 16];
            zt_tensor_info t;
            snprintf(name, sizeof name, "%s.%s", sd[sec].name, ss->ck->L->units[u].name);
            if (zt_safetensors_find(ss->f[0], name, &t) < 0) {
                ss->ck->os->master_fresh = 1;
                continue;
            }
        }
        ZT_TRY(reslice(ss, u, p, sec, c0, c1, f0, nc, base));
    }
    return 0;
}

/* Adafactor's factored moments, from rank 0's file, in Hugging Face's shapes */
static int read_replicated(zt_ckpt *ck, const state_src *ss)
{
    for (int i = 0; ck->os->af_rc && i < ck->L->n_params; i++) {
        const zt_param_def *d = &ck->L->params[i];
        if (d->ndim < 2)
            continue;
        for (int c = 0; c < 2; c++) {
            char name[ZT_NAME_MAX + 32], want[128];
            int64_t shape[ZT_MAX_DIMS];
            int ndim, same, w = 0;
            size_t at, n = af_state_shape(d, c, &ndim, shape, &at);
            zt_tensor_info t;
            snprintf(name, sizeof name, "%s.%s", af_state_name(c), d->name);
            same = zt_safetensors_find(ss->f[0], name, &t) == 0 && t.dtype == ZT_F32 &&
                   t.ndim == ndim && t.numel == n;
            for (int k = 0; k < ndim; k++) {
                same = same && t.shape[k] == shape[k];
                w += snprintf(want + w, sizeof want - (size_t)w, "%s%lld", k ? ", " : "",
                              (long long)shape[k]);
            }
            if (!same)
                return zt_fail(ZT_E_FORMAT, "%s/rank-00000.safetensors: no F32 tensor \"%s\" "
                               "of shape [%s]", ss->dir, name, want);
            memcpy(ck->os->af_rc + ck->os->af_off[i] + at, t.data, n * sizeof(float));
        }
    }
    return 0;
}

int zt_ckpt_read_optimizer(zt_ckpt *ck, const char *dir, int world0, size_t bucket0)
{
    char path[4096];
    int rc = 0;
    size_t w = (size_t)world0;
    state_src ss = {dir, world0, bucket0, calloc(w, sizeof *ss.f), calloc(w, sizeof *ss.src),
                    calloc(w, sizeof *ss.runs), calloc(w, sizeof *ss.n_runs), -1,
                    calloc(w, sizeof *ss.n_compact), {0, 0, 0}, ck};
    if (!ss.f || !ss.src || !ss.runs || !ss.n_runs || !ss.n_compact)
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    for (int k = 0; k < world0 && rc == 0; k++) {
        snprintf(path, sizeof path, "%s/rank-%05d.safetensors", dir, k);
        rc = zt_safetensors_open(path, &ss.f[k]);
    }
    ck->os->master_fresh = ck->saved_fresh; /* (a section missing below sets it too) */
    if (rc == 0)
        rc = zt_zero_state_fill(ck->z, fill_state, &ss);
    if (rc == 0)
        rc = read_replicated(ck, &ss);
    for (int k = 0; k < world0; k++) {
        if (ss.f)
            zt_safetensors_close(ss.f[k]);
        if (ss.runs)
            free(ss.runs[k]);
    }
    free(ss.f);
    free(ss.src);
    free(ss.runs);
    free(ss.n_runs);
    free(ss.n_compact);
    return rc;
}

/* the trainer's record in a verified checkpoint (none: "") */
static int read_trainer_info(const manifest *mf, const char *dir, char *out)
{
    char path[4096], *text;
    size_t len;
    const cJSON *f;
    out[0] = '\0';
    cJSON_ArrayForEach(f, mf->files) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring, "trainer.json"))
            continue;
        snprintf(path, sizeof path, "%s/trainer.json", dir);
        ZT_TRY(zt_file_read_all(path, ZT_TRAINER_INFO_MAX - 1, &text, &len));
        memcpy(out, text, len);
        out[len] = '\0';
        free(text);
    }
    return 0;
}

int zt_checkpoint_find_latest(const char *root, char *path_out, size_t n)
{
    step_ent *v;
    int count = list_steps(root, &v), found = 0;
    if (count < 0)
        return count;
    for (int i = 0; i < count && !found; i++) {
        char dir[4096], aside[4200];
        snprintf(dir, sizeof dir, "%s/%s", root, v[i].name);
        if (zt_checkpoint_verify(dir) == 0) {
            snprintf(path_out, n, "%s", dir);
            found = 1;
            break;
        }
        zt_log(ZT_LOG_WARN, "skipping checkpoint %s: %s", dir, zt_last_error());
        for (int k = 0; k < 1000; k++) { /* a free hidden name (a link is renamed itself) */
            struct stat sb;
            snprintf(aside, sizeof aside, "%s/.corrupt-%s.%d", root, v[i].name, k);
            if (lstat(aside, &sb) != 0)
                break;
        }
        if (rename(dir, aside) == 0)
            zt_log(ZT_LOG_WARN, "moved %s aside to %s", dir, aside);
    }
    free(v);
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
        ZT_TRY(zt_load_weights_unambiguous(dir));
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

/* Export writes no weights with a NaN or an infinity (the tensors as the checkpoint holds
 * them, F32/F16/BF16). */
static int export_finite(const char *dir, const zt_tensor_view *v, int nv)
{
    for (int i = 0; i < nv; i++) {
        size_t numel = 1;
        for (int k = 0; k < v[i].ndim; k++)
            numel *= (size_t)v[i].shape[k];
        int64_t at = zt_first_nonfinite(v[i].dtype, v[i].data, numel);
        if (at >= 0) {
            char what[160];
            zt_nonfinite_text(what, sizeof what, v[i].dtype,
                              (const char *)v[i].data + (size_t)at * zt_dtype_size(v[i].dtype),
                              v[i].ndim, v[i].shape, (size_t)at);
            return zt_fail(ZT_E_RANGE, "%s: tensor \"%s\": %s (its first non-finite value): "
                           "not exporting non-finite weights", dir, v[i].name, what);
        }
    }
    return 0;
}

static int config_fp32(const char *dir, const char *config, char **out, size_t *len);

/* ELECTRA's joint pretraining's files beside config.json (generator_config.json, with torch_dtype
 * float32 when fp32, and electra_pretraining.json), from checkpoint dir into the folder tmp */
static int copy_electra_files(const char *dir, const char *tmp, int fp32)
{
    static const char *const names[] = {ELECTRA_GENERATOR_FILE, ELECTRA_PRETRAINING_FILE};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        char path[4300], *text = NULL, *t32 = NULL;
        size_t len = 0;
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (stat(path, &sb) != 0)
            continue;
        if ((rc = zt_file_read_all(path, 1u << 20, &text, &len)) == 0 && fp32 && k == 0 &&
            (rc = config_fp32(dir, text, &t32, &len)) == 0) {
            free(text);
            text = t32;
        }
        snprintf(path, sizeof path, "%s/%s", tmp, names[k]);
        const void *parts[1] = {text};
        if (rc == 0)
            rc = zt_file_write_atomic(path, parts, &len, 1);
        free(text);
    }
    return rc;
}

/* The Hugging Face folder out, written whole beside it and swapped in (hfweights.h): no file
 * of an older export survives, and a failure leaves out as it was. */
static int export_folder(const char *dir, const char *out, const zt_tensor_view *v, int nv,
                         size_t max_shard_bytes, const char *config, size_t config_len)
{
    char tmp[4200], path[4300];
    const void *parts[1] = {config};
    int rc = zt_hf_dir_begin(out, tmp, sizeof tmp);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof path, "%s/config.json", tmp);
    if ((rc = zt_hf_write_weights(tmp, v, nv, max_shard_bytes)) < 0 ||
        (rc = zt_file_write_atomic(path, parts, &config_len, 1)) < 0 ||
        (rc = copy_electra_files(dir, tmp, 0)) < 0) {
        zt_dir_discard(tmp);
        return rc;
    }
    zt_ckpt_fault_point("before", "export");
    return zt_dir_commit(tmp, out);
}

/* ---- export in fp32 from a half-precision checkpoint's master ------------------------------
 * The weights of a bf16 / fp16 checkpoint are its compute copies; the fp32 master is the last
 * section ("master.<unit>") of each rank file, rank k holding its slices of every unit as
 * laid out for the saved world size and bucket (saved_pos). Each tensor's fp32 values are
 * gathered from them just before it is written (one tensor in memory at a time); a
 * checkpoint saved before its first step keeps no master, and its weights widened are it. */
typedef struct master_src {
    const char *dir;
    zt_layout L;
    int world0;
    size_t bucket0;
    zt_safetensors **rf;          /* the rank files */
    const zt_tensor_view *w;      /* the saved weights (their data) */
    int *param;                   /* per tensor: its parameter in L */
    float *buf;
    size_t cap;
} master_src;

static int fetch_master(int i, void *arg, const void **data)
{
    master_src *ms = arg;
    const zt_param_def *d = &ms->L.params[ms->param[i]];
    int u = d->unit;
    char name[ZT_NAME_MAX + 16], path[4200];
    zt_geom g = {0, 0, (size_t)ms->world0};
    if (d->numel > ms->cap) {
        float *b = realloc(ms->buf, d->numel * sizeof *b);
        if (!b)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        ms->buf = b;
        ms->cap = d->numel;
    }
    *data = ms->buf;
    g.piece = zt_geom_piece_for(ms->L.units[u].numel, g.N, ms->bucket0, &g.padded);
    snprintf(name, sizeof name, "master.%s", ms->L.units[u].name);
    zt_tensor_info t;
    if (zt_safetensors_find(ms->rf[0], name, &t) < 0) { /* (no step taken: the weights) */
        zt_half_widen(ms->w[i].dtype == ZT_F16 ? ZT_HALF_F16 : ZT_HALF_BF16, ms->buf,
                      ms->w[i].data, d->numel);
        return 0;
    }
    for (size_t x = d->offset; x < d->offset + d->numel;) {
        int k;
        size_t sp, run;
        saved_pos(&g, x, &k, &sp, &run);
        run = run < d->offset + d->numel - x ? run : d->offset + d->numel - x;
        if (zt_safetensors_find(ms->rf[k], name, &t) < 0 || t.dtype != ZT_F32 ||
            t.numel != g.padded / g.N) {
            snprintf(path, sizeof path, "%s/rank-%05d.safetensors", ms->dir, k);
            return zt_fail(ZT_E_FORMAT, "%s: no F32 tensor \"%s\" of %zu elements", path, name,
                           g.padded / g.N);
        }
        memcpy(ms->buf + (x - d->offset), (const float *)t.data + sp, run * sizeof(float));
        x += run;
    }
    return 0;
}

/* config.json with torch_dtype float32 */
static int config_fp32(const char *dir, const char *config, char **out, size_t *len)
{
    cJSON *o = cJSON_Parse(config);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return zt_fail(ZT_E_FORMAT, "%s/config.json: not a JSON object", dir);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "torch_dtype");
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    *out = cJSON_Print(o);
    cJSON_Delete(o);
    if (!*out)
        return zt_fail(ZT_E_NOMEM, "out of memory");
    *len = strlen(*out);
    return 0;
}

/* the fp32 export of the half-precision weights v[0..nv) of checkpoint dir */
static int export_master(const char *dir, const char *out, const zt_tensor_view *v, int nv,
                         size_t max_shard_bytes, const char *config)
{
    master_src ms = {.dir = dir};
    zt_model_cfg mc;
    zt_tensor_view *w = NULL;
    char path[4096], *cfg32 = NULL;
    size_t cfg32_len = 0;
    int rc;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if ((rc = zt_model_config_load(path, &mc)) < 0 ||
        (rc = zt_model_head_apply(&mc, path, ZT_HEAD_AUTO, 0, 0, NULL)) < 0 ||
        (rc = zt_model_layout(&mc, &ms.L)) < 0)
        return zt_fail_wrap(rc, "export in fp32 from the master");
    {   /* the saved world size and bucket (state.json, as zt_ckpt_read_state reads them) */
        char *text = NULL;
        snprintf(path, sizeof path, "%s/state.json", dir);
        if ((rc = zt_file_read_all(path, 16u << 20, &text, NULL)) < 0)
            goto out;
        cJSON *o = cJSON_Parse(text);
        const cJSON *wj = cJSON_GetObjectItemCaseSensitive(o, "world_size");
        const cJSON *bk = cJSON_GetObjectItemCaseSensitive(o, "bucket_size");
        free(text);
        if (!cJSON_IsNumber(wj) || wj->valuedouble < 1 || wj->valuedouble > 1 << 20 ||
            (bk && (!cJSON_IsNumber(bk) || bk->valuedouble < 0 || bk->valuedouble > 9e15)))
            rc = zt_fail(ZT_E_FORMAT, "%s: missing or bad world_size or bucket_size", path);
        else {
            ms.world0 = (int)wj->valuedouble;
            ms.bucket0 = bk ? (size_t)bk->valuedouble : 0;
        }
        cJSON_Delete(o);
    }
    if (rc == 0 && (!(ms.rf = calloc((size_t)ms.world0, sizeof *ms.rf)) ||
                    !(ms.param = calloc((size_t)nv, sizeof *ms.param)) ||
                    !(w = malloc(sizeof *w * (size_t)nv))))
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
    for (int k = 0; rc == 0 && k < ms.world0; k++) {
        snprintf(path, sizeof path, "%s/rank-%05d.safetensors", dir, k);
        rc = zt_safetensors_open(path, &ms.rf[k]);
    }
    for (int i = 0; rc == 0 && i < nv; i++) {
        int j = 0;
        while (j < ms.L.n_params && strcmp(ms.L.params[j].name, v[i].name) &&
               strcmp(ms.L.params[j].alias, v[i].name))
            j++;
        size_t numel = 1;
        for (int k = 0; k < v[i].ndim; k++)
            numel *= (size_t)v[i].shape[k];
        if (j == ms.L.n_params || ms.L.params[j].numel != numel)
            rc = zt_fail(ZT_E_FORMAT, "%s: tensor \"%s\" is no parameter of the model its "
                         "config.json describes", dir, v[i].name);
        ms.param[i] = j;
        w[i] = v[i];
        w[i].dtype = ZT_F32;
        w[i].data = NULL;
    }
    ms.w = v;
    if (rc == 0)
        rc = config_fp32(dir, config, &cfg32, &cfg32_len);
    if (rc == 0) {
        char tmp[4200];
        const void *parts[1] = {cfg32};
        if ((rc = zt_hf_dir_begin(out, tmp, sizeof tmp)) == 0) {
            snprintf(path, sizeof path, "%s/config.json", tmp);
            if ((rc = zt_hf_write_weights_cb(tmp, w, nv, max_shard_bytes, fetch_master,
                                              &ms)) < 0 ||
                (rc = zt_file_write_atomic(path, parts, &cfg32_len, 1)) < 0 ||
                (rc = copy_electra_files(dir, tmp, 1)) < 0)
                zt_dir_discard(tmp);
            else
                rc = zt_dir_commit(tmp, out);
        }
    }
out:
    for (int k = 0; ms.rf && k < ms.world0; k++)
        zt_safetensors_close(ms.rf[k]);
    free(ms.rf);
    free(ms.param);
    free(ms.buf);
    free(w);
    free(cfg32);
    zt_layout_free(&ms.L);
    return rc;
}

int zt_checkpoint_export(const char *dir, const char *out, size_t max_shard_bytes)
{
    return zt_checkpoint_export_dtype(dir, out, max_shard_bytes, -1);
}

int zt_checkpoint_export_dtype(const char *dir, const char *out, size_t max_shard_bytes,
                               int dtype)
{
    char path[4096], **files = NULL, *config = NULL;
    zt_safetensors **f = NULL;
    zt_tensor_view *v = NULL;
    size_t config_len = 0;
    int nf = 0, nv = 0, rc;
    if (!dir || !out)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_export: NULL argument");
    if (dtype != -1 && dtype != ZT_PREC_FP32 && dtype != ZT_PREC_BF16 && dtype != ZT_PREC_FP16)
        return zt_fail(ZT_E_INVAL, "zt_checkpoint_export_dtype: dtype %d: -1 or a ZT_PREC_*",
                       dtype);
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
    if (rc == 0)
        rc = export_finite(dir, v, nv);
    if (rc == 0 && dtype >= 0) { /* the weights' dtype: as saved, or fp32 from the master */
        zt_dtype saved = nv ? v[0].dtype : ZT_F32, want = dtype == ZT_PREC_FP32 ? ZT_F32
                                                       : dtype == ZT_PREC_BF16 ? ZT_BF16 : ZT_F16;
        static const char *const prec[] = {"fp32", "bf16", "fp16"};
        if (saved != want && want != ZT_F32)
            rc = zt_fail(ZT_E_INVAL, "%s: its weights are %s: exported as they are, or in fp32 "
                         "(from the master); not in %s", dir, zt_dtype_name(saved), prec[dtype]);
        else if (saved != want) {
            rc = export_master(dir, out, v, nv, max_shard_bytes, config);
            goto done;
        }
    }
    if (rc == 0)
        rc = export_folder(dir, out, v, nv, max_shard_bytes, config, config_len);
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

/* ---- for engine.c's zt_checkpoint_save and _load ------------------------------------------ */

void zt_ckpt_init(zt_ckpt *ck, const zt_config *cfg, const zt_layout *L, const zt_model_cfg *mc,
                  zt_comm *comm, const zt_geometry *geo, zt_ostate *os, zt_zero *z,
                  const int64_t *step, zt_lscale *ls)
{
    ck->ls = ls;
    ck->cfg = cfg;
    ck->L = L;
    ck->mc = mc;
    ck->comm = comm;
    ck->geo = geo;
    ck->os = os;
    ck->z = z;
    ck->step = step;
}

int zt_ckpt_make_tmp(const char *root, const char *tmpn, const char *tmp)
{
    ZT_TRY(zt_mkdirs(root, 0755, NULL));
    remove_in(root, tmpn); /* left by a save that died (a link there: the link) */
    if (mkdir(tmp, 0755) != 0)
        return zt_fail(-errno, "%s: %s", tmp, strerror(errno));
    return 0;
}

void zt_ckpt_remove_tmp(const char *root, const char *tmpn) { remove_in(root, tmpn); }

int zt_ckpt_verify_read(const char *dir, char run_id[33], char *info)
{
    manifest mf;
    ZT_TRY(verify_dir(dir, &mf));
    int rc = read_trainer_info(&mf, dir, info);
    memcpy(run_id, mf.run_id, sizeof mf.run_id);
    cJSON_Delete(mf.m);
    return rc;
}
