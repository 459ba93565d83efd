/* fileio.c - the atomic write used by every file the project writes (safetensors, config,
 * checkpoints) and the guarded open used by every reader of a file a user names (only regular
 * files, never a wait on a FIFO). It does not create folders and does not lock against other
 * writers. */
#include "fileio.h"
#include "err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int fsync_retry(int fd)
{
    while (fsync(fd) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

/* fsync of the folder holding path, so the rename itself is durable */
static int fsync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    char *dir = malloc(len + 1);
    int fd, rc;
    if (!dir)
        return -ENOMEM;
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return -errno;
    rc = fsync_retry(fd);
    close(fd);
    return rc;
}

typedef struct parts_arg {
    const void *const *parts;
    const size_t *lens;
} parts_arg;

static int next_part(int i, void *arg, const void **data, size_t *len)
{
    const parts_arg *a = arg;
    *data = a->parts[i];
    *len = a->lens[i];
    return 0;
}

int zt_file_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n)
{
    parts_arg a = {parts, lens};
    return zt_file_write_atomic_cb(path, n, next_part, &a);
}

int zt_file_write_atomic_cb(const char *path, int n, zt_part_fn part, void *arg)
{
    const char *step = "";
    char *tmp = malloc(strlen(path) + sizeof ".tmp.XXXXXX");
    int fd = -1, created = 0, rc;

    if (!tmp)
        return zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
    sprintf(tmp, "%s.tmp.XXXXXX", path);
    step = "create temporary file";
    if ((fd = mkstemp(tmp)) < 0)
        goto sys;
    created = 1;
    step = "fchmod"; /* mkstemp makes 0600; model files are normally readable by all */
    if (fchmod(fd, 0644) < 0)
        goto sys;
    step = "write";
    for (int i = 0; i < n; i++) {
        const void *data;
        size_t len;
        if ((rc = part(i, arg, &data, &len)) < 0)
            goto out; /* the callback's message stands */
        if ((rc = write_all(fd, data, len)) < 0)
            goto fail;
    }
    step = "fsync";
    if ((rc = fsync_retry(fd)) < 0)
        goto fail;
    step = "close";
    rc = close(fd);
    fd = -1;
    if (rc < 0)
        goto sys;
    step = "rename";
    if (rename(tmp, path) < 0)
        goto sys;
    created = 0; /* the file at path is complete; only its durability is left */
    step = "fsync of the folder after rename";
    if ((rc = fsync_dir(path)) < 0)
        goto fail;
    rc = 0;
    goto out;
sys:
    rc = -errno;
fail:
    zt_fail(rc, "%s: %s: %s", path, step, strerror(-rc));
out:
    if (fd >= 0)
        close(fd);
    if (created)
        unlink(tmp);
    free(tmp);
    return rc;
}

int zt_mkdirs(const char *dir, unsigned mode, zt_dirs_made *made)
{
    size_t n = dir ? strlen(dir) : 0;
    char *p;
    int rc = 0;
    if (n == 0)
        return zt_fail(ZT_E_INVAL, "zt_mkdirs: no folder name");
    if (!(p = malloc(n + 1)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n && rc == 0; i++) {
        struct stat sb;
        if ((p[i] != '/' && p[i] != '\0') || p[i - 1] == '/') /* ("a//b") */
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, (mode_t)mode) == 0) {
            char **grown = made ? realloc(made->dir, sizeof *grown * (size_t)(made->n + 1)) : NULL;
            if (made && (!grown || !(grown[made->n] = strdup(p)))) {
                if (grown)
                    made->dir = grown;
                rc = zt_fail(ZT_E_NOMEM, "out of memory");
            } else if (made) {
                made->dir = grown;
                made->n++;
            }
        } else if (errno != EEXIST) {
            rc = zt_fail(-errno, "%s: cannot create folder: %s", p, strerror(errno));
        } else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            rc = zt_fail(-ENOTDIR, "%s: exists and is not a folder", p);
        }
        p[i] = c;
    }
    free(p);
    return rc;
}

void zt_dirs_made_release(zt_dirs_made *made, int remove)
{
    if (!made)
        return;
    for (int i = made->n - 1; remove && i >= 0; i--)
        rmdir(made->dir[i]); /* fails, harmlessly, when something else is inside */
    for (int i = 0; i < made->n; i++)
        free(made->dir[i]);
    free(made->dir);
    made->dir = NULL;
    made->n = 0;
}


/* What a file that is not a regular one is, for the message. */
static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a folder"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "of an unknown type";
}

int zt_open_regular(const char *path, int flags)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags), fl, rc;
    if (fd < 0)
        return zt_fail(-errno, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        rc = zt_fail(-errno, "%s: fstat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = zt_fail(ZT_E_FORMAT, "%s: not a regular file (%s)", path, file_kind(sb.st_mode));
        goto fail;
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        rc = zt_fail(-errno, "%s: fcntl: %s", path, strerror(errno));
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return rc;
}

int zt_file_read_all(const char *path, size_t limit, char **out, size_t *len)
{
    struct stat sb;
    char *buf = NULL;
    size_t got = 0;
    int fd, rc = 0;
    *out = NULL;
    if ((fd = zt_open_regular(path, 0)) < 0)
        return fd;
    if (fstat(fd, &sb) != 0) {
        rc = zt_fail(-errno, "%s: fstat: %s", path, strerror(errno));
        goto out;
    }
    if ((uint64_t)sb.st_size > limit) {
        rc = zt_fail(ZT_E_FORMAT, "%s: %lld bytes, larger than the %zu-byte limit", path,
                     (long long)sb.st_size, limit);
        goto out;
    }
    if (!(buf = malloc((size_t)sb.st_size + 1))) {
        rc = zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = zt_fail(-errno, "%s: read: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    *out = buf;
    if (len)
        *len = got;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

/* ---- whole folders --------------------------------------------------------------------- */

/* parent and name of path ("a/b/c" -> "a/b", "c"; "c" -> ".", "c"), trailing slashes dropped */
static int split_path(const char *path, char *parent, size_t np, char *name, size_t nn)
{
    char p[4096];
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (len == 0 || len >= sizeof p)
        return zt_fail(ZT_E_INVAL, "bad folder name \"%s\"", path);
    memcpy(p, path, len);
    p[len] = '\0';
    char *slash = strrchr(p, '/');
    const char *base = slash ? slash + 1 : p;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return zt_fail(ZT_E_INVAL, "%s: give the folder by its name (not \".\", \"..\" or /)",
                       path);
    if ((size_t)snprintf(name, nn, "%s", base) >= nn)
        return zt_fail(ZT_E_INVAL, "%s: name too long", path);
    if (!slash)
        snprintf(parent, np, ".");
    else if (slash == p)
        snprintf(parent, np, "/");
    else {
        *slash = '\0';
        snprintf(parent, np, "%s", p);
    }
    return 0;
}

/* The hidden sibling of dir with the given suffix: "<parent>/.<name>.<suffix>". */
static int sibling(const char *dir, const char *suffix, char *out, size_t n)
{
    char parent[4096], name[256];
    ZT_TRY(split_path(dir, parent, sizeof parent, name, sizeof name));
    if ((size_t)snprintf(out, n, "%s/.%s.%s", parent, name, suffix) >= n)
        return zt_fail(ZT_E_INVAL, "%s: path too long", dir);
    return 0;
}

/* Removes a folder that holds files only (symbolic links are removed, never followed; a
 * folder inside stops it). Missing is fine. */
static int remove_flat(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int rc = 0;
    if (!d)
        return errno == ENOENT ? 0 : zt_fail(-errno, "%s: %s", dir, strerror(errno));
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) != 0 && rc == 0)
            rc = zt_fail(-errno, "%s/%s: cannot remove: %s", dir, de->d_name, strerror(errno));
    }
    closedir(d);
    if (rc == 0 && rmdir(dir) != 0)
        rc = zt_fail(-errno, "%s: cannot remove: %s", dir, strerror(errno));
    return rc;
}

int zt_dir_stage(const char *dir, char *tmp, size_t n)
{
    char parent[4096], name[256];
    ZT_TRY(split_path(dir, parent, sizeof parent, name, sizeof name));
    ZT_TRY(sibling(dir, "zt-new", tmp, n));
    ZT_TRY(zt_mkdirs(parent, 0755, NULL));
    ZT_TRY(remove_flat(tmp)); /* left by a save that died */
    if (mkdir(tmp, 0755) != 0)
        return zt_fail(-errno, "%s: cannot create folder: %s", tmp, strerror(errno));
    return 0;
}

void zt_dir_discard(const char *tmp)
{
    char msg[ZT_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zt_last_error()); /* the failure that brought us here */
    if (remove_flat(tmp) < 0)
        zt_log(ZT_LOG_WARN, "%s", zt_last_error());
    zt_fail(ZT_E_BASE, "%s", msg);
}

int zt_dir_commit(const char *tmp, const char *dir)
{
    char parent[4096], name[256], old[4200] = "";
    struct stat sb;
    int fd, rc;
    if ((rc = split_path(dir, parent, sizeof parent, name, sizeof name)) < 0)
        goto discard;
    if ((fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = zt_fail(-errno, "%s: %s", tmp, strerror(errno));
        goto discard;
    }
    rc = fsync_retry(fd); /* the names of the files in it (each file is synced already) */
    close(fd);
    if (rc < 0) {
        zt_fail(rc, "%s: fsync: %s", tmp, strerror(-rc));
        goto discard;
    }
    if (lstat(dir, &sb) != 0) { /* nothing to replace */
        if (errno != ENOENT || rename(tmp, dir) != 0) {
            rc = zt_fail(-errno, "%s: rename from %s: %s", dir, tmp, strerror(errno));
            goto discard;
        }
    } else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
        snprintf(old, sizeof old, "%s", tmp); /* the old folder is where the new one was */
    } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
        /* a filesystem without exchange: the old folder aside, the new one in */
        if ((rc = sibling(dir, "zt-old", old, sizeof old)) < 0 || (rc = remove_flat(old)) < 0)
            goto discard;
        if (rename(dir, old) != 0) {
            rc = zt_fail(-errno, "%s: cannot move aside to %s: %s", dir, old, strerror(errno));
            goto discard;
        }
        if (rename(tmp, dir) != 0) {
            rc = zt_fail(-errno, "%s: rename from %s: %s", dir, tmp, strerror(errno));
            if (rename(old, dir) != 0)
                zt_log(ZT_LOG_ERROR, "%s: could not move the old folder back from %s: %s", dir,
                       old, strerror(errno));
            goto discard;
        }
    } else {
        rc = zt_fail(-errno, "%s: exchange with %s: %s", dir, tmp, strerror(errno));
        goto discard;
    }
    /* the new folder is in place; the rename becomes durable with its folder */
    if ((fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || (rc = fsync_retry(fd)) < 0) {
        rc = fd < 0 ? -errno : rc;
        zt_fail(rc, "%s: fsync of the folder after rename: %s (the previous folder is kept "
                "as %s)", parent, strerror(-rc), old[0] ? old : "-");
        if (fd >= 0)
            close(fd);
        return rc;
    }
    close(fd);
    if (old[0] && remove_flat(old) < 0)
        zt_log(ZT_LOG_WARN, "%s", zt_last_error());
    return 0;
discard:
    zt_dir_discard(tmp);
    return rc;
}

/* ---- removal that never follows a link ------------------------------------------------ */

static int remove_in_depth(int dfd, const char *name, int depth)
{
    struct stat sb;
    DIR *d;
    int fd, rc = 0, removed;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(sb.st_mode))
        return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
    if (depth >= 16) /* deeper than any folder zerotrain writes */
        return -ELOOP;
    if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        if (errno == ELOOP || errno == ENOTDIR) /* replaced by a link or a file meanwhile */
            return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
        return errno == ENOENT ? 0 : -errno;
    }
    if (!(d = fdopendir(fd))) {
        rc = -errno;
        close(fd);
        return rc;
    }
    /* passes until one removes nothing: removing entries while a folder is read may make
     * readdir skip some on some file systems; a pass with an error is the last */
    do {
        struct dirent *e;
        removed = 0;
        rewinddir(d);
        while ((e = readdir(d))) {
            int r;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            if ((r = remove_in_depth(dirfd(d), e->d_name, depth + 1)) < 0)
                rc = rc < 0 ? rc : r;
            else
                removed++;
        }
    } while (rc == 0 && removed);
    closedir(d);
    if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        rc = -errno;
    return rc;
}

int zt_remove_at(int dirfd, const char *name)
{
    return remove_in_depth(dirfd, name, 0);
}
