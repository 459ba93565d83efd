/* outdir.c - an output folder built beside its target and swapped in when complete (see
 * outdir.h). Every removal works on descriptors and never follows a symlink: a link met
 * inside a folder being removed is unlinked itself. It does not write, copy or check the
 * files the caller puts inside. */
#include "outdir.h"
#include "zerotrain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Hidden siblings of --out: ".NAME" + tag + six random characters, which mkdtemp(3) writes
 * in place of the six X's of its template. The X's are mkdtemp's required template, the
 * finished value, not a placeholder. */
#define MKDTEMP_TAIL "XXXXXX"
#define SUFFIX_LEN (sizeof MKDTEMP_TAIL - 1)
#define STAGE_TAG ".prepare-"   /* the folder being written */
#define ASIDE_TAG ".replaced-"  /* the old folder moved aside, where there is no exchange */

struct outdir {
    char shown[PATH_MAX];       /* dir as the caller named it, for messages */
    char parent[PATH_MAX];      /* the folder that holds it, open as pfd and locked */
    char name[NAME_MAX + 1];
    int pfd;
    outdir_ours_fn ours;
    int exists;                 /* dir is there (and may be replaced) */
    mode_t mode;                /* its permission bits, for the staging folder */
    char stage[NAME_MAX + 1];   /* the staging folder's name in parent; "" when none */
    char stage_path[PATH_MAX];
    zt_dirs_made made;          /* parents outdir_lock created, outermost first */
    int committed;
};

int outdir_fault(const char *point)
{
    const char *p = getenv("ZT_PREPARE_FAULT");
    size_t n = strlen(point);
    while (p && *p) {
        const char *end = strchr(p, ','), *colon;
        size_t len = end ? (size_t)(end - p) : strlen(p);
        colon = memchr(p, ':', len);
        if ((size_t)((colon ? colon : p + len) - p) == n && strncmp(p, point, n) == 0) {
            const char *act = colon ? colon + 1 : "kill";
            size_t alen = colon ? len - (size_t)(colon + 1 - p) : 4;
            if (alen == 4 && !strncmp(act, "fail", 4))
                return 1;
            raise(alen == 4 && !strncmp(act, "stop", 4) ? SIGSTOP : SIGKILL);
            return 0;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* Whether entry is ".NAME" + tag + mkdtemp's six random characters */
static int is_ours_hidden(const outdir *o, const char *entry, const char *tag)
{
    size_t n = strlen(o->name), t = strlen(tag);
    return entry[0] == '.' && strncmp(entry + 1, o->name, n) == 0 &&
           strncmp(entry + 1 + n, tag, t) == 0 && strlen(entry + 1 + n + t) == SUFFIX_LEN;
}

/* What a run that was killed left for this folder: a staging folder (removed) and, if it was
 * killed between the two renames of the fallback, the old folder moved aside (put back). Only
 * called under the lock, so no live run owns any of them. */
static int clean_stale(outdir *o, char *err, size_t errlen)
{
    char **names = NULL;
    size_t n = 0, cap = 0;
    int fd = dup(o->pfd), rc = 0;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    if (!d) {
        snprintf(err, errlen, "%s: cannot read the folder: %s", o->parent, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while (rc == 0 && (e = readdir(d))) {
        if (!is_ours_hidden(o, e->d_name, STAGE_TAG) && !is_ours_hidden(o, e->d_name, ASIDE_TAG))
            continue;
        if (n == cap) {
            char **g = realloc(names, sizeof *g * (cap = cap ? 2 * cap : 4));
            if (!g) {
                rc = -1;
                break;
            }
            names = g;
        }
        if (!(names[n] = strdup(e->d_name)))
            rc = -1;
        else
            n++;
    }
    closedir(d);
    if (rc < 0)
        snprintf(err, errlen, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct stat sb;
        int err_no;
        if (is_ours_hidden(o, names[i], ASIDE_TAG) &&
            fstatat(o->pfd, o->name, &sb, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT &&
            renameat(o->pfd, names[i], o->pfd, o->name) == 0) {
            fprintf(stderr, "zerotrain: notice: %s: put back the folder an interrupted run had "
                    "moved aside to %s/%s\n", o->shown, o->parent, names[i]);
            continue;
        }
        if ((err_no = -zt_remove_at(o->pfd, names[i])) != 0) {
            snprintf(err, errlen, "%s/%s: left by an interrupted prepare-data run, cannot be "
                     "removed: %s", o->parent, names[i], strerror(err_no));
            rc = -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* An existing dir may be replaced only when it is a folder of entries the command writes. */
static int check_replaceable(outdir *o, char *err, size_t errlen)
{
    struct stat sb;
    struct dirent *e;
    DIR *d;
    int fd, rc = 0;
    o->exists = 0;
    if (fstatat(o->pfd, o->name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", o->shown, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: exists and is not a folder", o->shown);
        return -1;
    }
    o->exists = 1;
    o->mode = sb.st_mode & 07777;
    if ((fd = openat(o->pfd, o->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        !(d = fdopendir(fd))) {
        snprintf(err, errlen, "%s: cannot read the folder: %s", o->shown, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !(S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) || !o->ours(e->d_name)) {
            snprintf(err, errlen, "%s: holds %s, which prepare-data does not write: a folder is "
                     "replaced only when it holds nothing else (move that away or choose "
                     "another --out)", o->shown, e->d_name);
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

int outdir_lock(const char *dir, outdir_ours_fn ours, outdir **out, char *err, size_t errlen)
{
    outdir *o = calloc(1, sizeof *o);
    char path[PATH_MAX], *slash;
    size_t len;

    *out = NULL;
    if (!o) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    o->pfd = -1;
    o->ours = ours;
    snprintf(o->shown, sizeof o->shown, "%s", dir);
    /* a symlink to a folder: the folder it names is the one replaced (the link stays) */
    if (!realpath(dir, path) && snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        snprintf(err, errlen, "%s: path too long", dir);
        goto fail;
    }
    len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    slash = strrchr(path, '/');
    snprintf(o->name, sizeof o->name, "%s", slash ? slash + 1 : path);
    if (!slash)
        snprintf(o->parent, sizeof o->parent, ".");
    else if (slash == path)
        snprintf(o->parent, sizeof o->parent, "/");
    else
        snprintf(o->parent, sizeof o->parent, "%.*s", (int)(slash - path), path);
    if (!o->name[0] || !strcmp(o->name, ".") || !strcmp(o->name, "..")) {
        snprintf(err, errlen, "%s: not a folder that can be written as a whole (name a folder)",
                 dir);
        goto fail;
    }
    if (1 + strlen(o->name) + strlen(STAGE_TAG) + SUFFIX_LEN > NAME_MAX) {
        snprintf(err, errlen, "%s: the folder name is too long (at most %zu bytes, to leave "
                 "room for its staging folder's)", dir,
                 (size_t)NAME_MAX - 1 - strlen(STAGE_TAG) - SUFFIX_LEN);
        goto fail;
    }
    if (zt_mkdirs(o->parent, 0777, &o->made) < 0) {
        snprintf(err, errlen, "%s", zt_last_error());
        goto fail;
    }
    if ((o->pfd = open(o->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", o->parent, strerror(errno));
        goto fail;
    }
    if (flock(o->pfd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            snprintf(err, errlen, "%s: the folder %s is locked by another prepare-data run "
                     "writing into it; wait for that run to end (or write into another folder)",
                     dir, o->parent);
        else
            snprintf(err, errlen, "%s: cannot lock the folder %s: %s", dir, o->parent,
                     strerror(errno));
        goto fail;
    }
    outdir_fault("locked");
    if (clean_stale(o, err, errlen) < 0 || check_replaceable(o, err, errlen) < 0)
        goto fail;
    *out = o;
    return 0;
fail:
    outdir_close(o);
    return -1;
}

const char *outdir_stage(outdir *o, char *err, size_t errlen)
{
    mode_t mode = o->mode;
    if (!o->exists) {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0777 & ~mask;
    }
    snprintf(o->stage_path, sizeof o->stage_path, "%s/.%s" STAGE_TAG MKDTEMP_TAIL, o->parent,
             o->name);
    if (!mkdtemp(o->stage_path)) {
        snprintf(err, errlen, "%s: cannot create the staging folder %s: %s", o->shown,
                 o->stage_path, strerror(errno));
        return NULL;
    }
    snprintf(o->stage, sizeof o->stage, "%s", strrchr(o->stage_path, '/') + 1);
    if (fchmodat(o->pfd, o->stage, mode, 0) != 0) {
        snprintf(err, errlen, "%s: chmod: %s", o->stage_path, strerror(errno));
        return NULL;
    }
    return o->stage_path;
}

static int sync_fd(int fd)
{
    while (fsync(fd) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

int outdir_commit(outdir *o, char *err, size_t errlen)
{
    char aside[NAME_MAX + 1];
    const char *old = NULL;     /* where the replaced folder is after the swap */
    int fd;

    if ((fd = openat(o->pfd, o->stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        sync_fd(fd) != 0) {
        snprintf(err, errlen, "%s: fsync: %s", o->stage_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    if (check_replaceable(o, err, errlen) < 0)
        return -1;
    if (o->exists) {
        /* one atomic step: dir is the old folder or the new one, never neither */
        int rc = outdir_fault("exchange") ? (errno = EINVAL, -1)
                 : renameat2(o->pfd, o->stage, o->pfd, o->name, RENAME_EXCHANGE);
        if (rc == 0) {
            old = o->stage;
        } else if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
            snprintf(err, errlen, "%s: cannot swap in %s: %s", o->shown, o->stage_path,
                     strerror(errno));
            return -1;
        } else {
            /* no RENAME_EXCHANGE here: two renames; a run killed between them leaves dir
             * missing, and the next run puts the old folder back (clean_stale) */
            snprintf(aside, sizeof aside, ".%s" ASIDE_TAG "%s", o->name,
                     o->stage + strlen(o->stage) - SUFFIX_LEN);
            if (renameat(o->pfd, o->name, o->pfd, aside) != 0) {
                snprintf(err, errlen, "%s: cannot move it aside to %s: %s", o->shown, aside,
                         strerror(errno));
                return -1;
            }
            outdir_fault("aside");
            if (renameat(o->pfd, o->stage, o->pfd, o->name) != 0) {
                int e = errno;
                renameat(o->pfd, aside, o->pfd, o->name);
                snprintf(err, errlen, "%s: cannot rename %s into place: %s", o->shown,
                         o->stage_path, strerror(e));
                return -1;
            }
            old = aside;
        }
    } else if (renameat2(o->pfd, o->stage, o->pfd, o->name, RENAME_NOREPLACE) != 0 &&
               ((errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) ||
                renameat(o->pfd, o->stage, o->pfd, o->name) != 0)) {
        snprintf(err, errlen, "%s: cannot rename %s into place: %s", o->shown, o->stage_path,
                 strerror(errno));
        return -1;
    }
    o->committed = 1;
    if (sync_fd(o->pfd) != 0)
        fprintf(stderr, "zerotrain: warning: %s: fsync of %s after the rename failed: %s\n",
                o->shown, o->parent, strerror(errno));
    outdir_fault("swapped");
    if (old) {
        int e = -zt_remove_at(o->pfd, old);
        if (e)
            fprintf(stderr, "zerotrain: warning: %s: the replaced folder, now %s/%s, could not "
                    "be removed: %s (the next run into %s removes it)\n", o->shown, o->parent,
                    old, strerror(e), o->shown);
    }
    o->stage[0] = '\0';
    return 0;
}

void outdir_close(outdir *o)
{
    if (!o)
        return;
    if (!o->committed && o->stage[0] && o->pfd >= 0)
        zt_remove_at(o->pfd, o->stage);
    zt_dirs_made_release(&o->made, !o->committed);
    if (o->pfd >= 0)
        close(o->pfd);
    free(o);
}
