/* ckptdir.c - the checkpoint folder a training run holds: created if missing (and removed
 * again if the run fails before its first checkpoint), locked for the whole run, refused to
 * a fresh run when it already holds checkpoints, cleared of other runs' checkpoints by
 * --overwrite only once this run has saved; and the run's record (sequence length, batch,
 * data) kept with its checkpoints. Rank 0 alone touches the folder. Only the public API. */
#include "ckptdir.h"
#include "cli.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct ckptdir {
    char root[4096];
    char created[4096]; /* the topmost folder ckptdir_open created, "" if none */
    int mode, rank, fd; /* fd: the locked folder (rank 0), -1 elsewhere */
    int saved;          /* this run has saved a checkpoint there */
};


/* mkdir -p root; the topmost folder it made goes to created ("" when root existed) */
static int make_folders(const char *root, char *created, size_t n, char *err, size_t errlen)
{
    char p[4096];
    size_t len = strlen(root);
    created[0] = '\0';
    if (len == 0 || len >= sizeof p)
        return errmsg(err, errlen, "--checkpoint-dir \"%s\": bad folder name", root);
    memcpy(p, root, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) == 0) {
            if (!created[0])
                snprintf(created, n, "%s", p);
        } else if (errno != EEXIST) {
            int e = errno;
            p[i] = c;
            return errmsg(err, errlen, "%s: cannot create the checkpoint folder: %s", root,
                        strerror(e));
        }
        p[i] = c;
    }
    return 0;
}

/* rmdir root and its parents up to created (each only if empty) */
static void remove_created(const char *root, const char *created)
{
    char p[4096];
    size_t top = strlen(created);
    if (!top)
        return;
    snprintf(p, sizeof p, "%s", root);
    for (;;) {
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/')
            p[--len] = '\0';
        if (len < top || rmdir(p) != 0 || len == top)
            return;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            return;
        *slash = '\0';
    }
}

void ckptdir_close(ckptdir *d, int failed)
{
    if (!d)
        return;
    if (failed && !d->saved && d->rank == 0)
        remove_created(d->root, d->created);
    if (d->fd >= 0)
        close(d->fd); /* (releases the lock) */
    free(d);
}

int ckptdir_open(const char *root, int mode, int rank, ckptdir **out, char *err,
                 size_t errlen)
{
    ckptdir *d;
    struct stat sb;
    DIR *dir;
    struct dirent *de;
    int64_t newest = -1;
    char newest_name[256] = "";
    *out = NULL;
    if (!root)
        return 0;
    if (!(d = calloc(1, sizeof *d)))
        return errmsg(err, errlen, "out of memory");
    snprintf(d->root, sizeof d->root, "%s", root);
    d->mode = mode;
    d->rank = rank;
    d->fd = -1;
    if (rank != 0) {
        *out = d;
        return 0;
    }
    if (stat(root, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        free(d);
        return errmsg(err, errlen, "--checkpoint-dir %s: exists and is not a folder", root);
    }
    if (make_folders(root, d->created, sizeof d->created, err, errlen) < 0) {
        free(d);
        return -1;
    }
    if ((d->fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        errmsg(err, errlen, "%s: cannot open the checkpoint folder: %s", root, strerror(errno));
        goto bad;
    }
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            /* (never remove what another run holds, even if this run created it first) */
            d->created[0] = '\0';
            errmsg(err, errlen, "%s is locked by another running zerotrain (one run at a time "
                 "per checkpoint folder)", root);
        } else {
            errmsg(err, errlen, "%s: cannot lock the checkpoint folder: %s", root,
                 strerror(errno));
        }
        goto bad;
    }
    if (access(root, W_OK | X_OK) != 0) {
        errmsg(err, errlen, "%s: cannot write checkpoints there: %s", root, strerror(errno));
        goto bad;
    }
    if (!(dir = opendir(root))) {
        errmsg(err, errlen, "%s: %s", root, strerror(errno));
        goto bad;
    }
    while ((de = readdir(dir))) {
        int64_t s = zt_checkpoint_step_of(de->d_name);
        if (s > newest) {
            newest = s;
            snprintf(newest_name, sizeof newest_name, "%s", de->d_name);
        }
    }
    closedir(dir);
    if (mode == CKPTDIR_NEW && newest >= 0) {
        errmsg(err, errlen, "%s already holds checkpoints (the newest: %s/%s): pass --resume "
             "to continue from them, or --overwrite to start a new run there (the old "
             "checkpoints are removed once it has saved its first)", root, root, newest_name);
        goto bad;
    }
    *out = d;
    return 0;
bad:
    ckptdir_close(d, 1);
    return -1;
}

void ckptdir_saved(ckptdir *d, zt_engine *e)
{
    int first, n;
    if (!d)
        return;
    first = !d->saved;
    d->saved = 1;
    if (!first || d->mode != CKPTDIR_OVERWRITE || d->rank != 0)
        return;
    if ((n = zt_checkpoint_remove_other_runs(e, d->root)) < 0)
        fprintf(stderr, "zerotrain: warning: --overwrite: %s\n", zt_engine_last_error(e));
    else if (n > 0)
        fprintf(stderr, "zerotrain: notice: --overwrite: removed %d checkpoint%s of other "
                        "runs from %s\n", n, n == 1 ? "" : "s", d->root);
}

/* "DIR (its identity)" or "synthetic:SEED" */
static void describe_data(const cJSON *o, char *out, size_t n)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "data"),
                *dir = cJSON_GetObjectItemCaseSensitive(o, "data_dir");
    const char *s = cJSON_IsString(id) ? id->valuestring : "?";
    if (cJSON_IsString(dir))
        snprintf(out, n, "%s (%s)", dir->valuestring, s);
    else
        snprintf(out, n, "%s", s);
}

int ckptdir_run_info(zt_engine *e, int rank, long seq_len, int train_batch_size,
                     const char *data_id, const char *data_dir, char *err, size_t errlen)
{
    char *text = NULL;
    const char *was_text = zt_checkpoint_trainer_info(e);
    cJSON *o = cJSON_CreateObject(), *was = NULL;
    int rc = 0;
    cJSON_AddNumberToObject(o, "seq_len", (double)seq_len);
    cJSON_AddNumberToObject(o, "train_batch_size", train_batch_size);
    cJSON_AddStringToObject(o, "data", data_id);
    if (data_dir)
        cJSON_AddStringToObject(o, "data_dir", data_dir);
    if (!(text = cJSON_Print(o)))
        rc = errmsg(err, errlen, "out of memory");
    else if (zt_checkpoint_set_trainer_info(e, text) < 0)
        rc = errmsg(err, errlen, "%s", zt_engine_last_error(e));
    if (rc == 0 && rank == 0 && was_text && (was = cJSON_Parse(was_text))) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(was, "seq_len"),
                    *b = cJSON_GetObjectItemCaseSensitive(was, "train_batch_size"),
                    *dd = cJSON_GetObjectItemCaseSensitive(was, "data");
        char now_d[4400], was_d[4400];
        if (cJSON_IsNumber(t) && t->valuedouble != (double)seq_len)
            fprintf(stderr, "zerotrain: notice: resuming with seq-len %ld (the checkpoint was "
                            "trained with %.0f)\n", seq_len, t->valuedouble);
        if (cJSON_IsNumber(b) && b->valuedouble != (double)train_batch_size)
            fprintf(stderr, "zerotrain: notice: resuming with train batch size %d (the "
                            "checkpoint was trained with %.0f)\n", train_batch_size,
                    b->valuedouble);
        if (cJSON_IsString(dd) && strcmp(dd->valuestring, data_id) != 0) {
            describe_data(o, now_d, sizeof now_d);
            describe_data(was, was_d, sizeof was_d);
            fprintf(stderr, "zerotrain: notice: resuming on data %s (the checkpoint was "
                            "trained on %s)\n", now_d, was_d);
        }
    }
    cJSON_Delete(was);
    cJSON_Delete(o);
    free(text);
    return rc;
}
