/* fileio.c - the atomic write used by every file the project writes (safetensors, config,
 * checkpoints) and the guarded open used by every reader of a file a user names (only regular
 * files, never a wait on a FIFO). It does not create folders and does not lock against other
 * writers. */
#include "fileio.h"
#include "err.h"

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

int zt_mkdirs(const char *dir)
{
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p)
        return zt_fail(ZT_E_INVAL, "bad folder name \"%s\"", dir);
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return zt_fail(-errno, "%s: cannot create folder: %s", p, strerror(errno));
        p[i] = c;
    }
    return 0;
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
