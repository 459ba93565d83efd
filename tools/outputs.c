/* outputs.c - before the first step, every output path of `zerotrain train` checked where
 * it is to be written, so that a run does not learn after its work that a folder is read-only
 * or a path names a file. It creates, opens and truncates nothing. */
#include "outputs.h"
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* the folder path's parent: "." for a plain name */
static void parent_of(const char *path, char *out, size_t n)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    while (len > 0 && path[len - 1] != '/')
        len--;
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (len == 0)
        snprintf(out, n, ".");
    else
        snprintf(out, n, "%.*s", (int)len, path);
}

/* a new entry can be made in folder dir (what, path: for the message) */
static int can_create_in(const char *what, const char *path, const char *dir, char *err,
                         size_t errlen)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errmsg(err, errlen, "%s %s: its folder %s: %s", what, path, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return errmsg(err, errlen, "%s %s: %s is not a folder", what, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return errmsg(err, errlen, "%s %s: cannot create it in %s: %s", what, path, dir,
                    strerror(errno));
    return 0;
}

/* --save-model: a folder, made with its missing parents */
static int check_folder(const char *what, const char *path, char *err, size_t errlen)
{
    char p[4096], q[4096];
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return errmsg(err, errlen, "%s %s: exists and is not a folder", what, path);
        if (access(path, W_OK | X_OK) != 0)
            return errmsg(err, errlen, "%s %s: cannot write there: %s", what, path,
                        strerror(errno));
        return 0;
    }
    snprintf(p, sizeof p, "%s", path);
    for (;;) { /* the nearest ancestor that exists */
        parent_of(p, q, sizeof q);
        if (lstat(q, &sb) == 0 || strcmp(q, p) == 0 || strcmp(q, ".") == 0 ||
            strcmp(q, "/") == 0)
            break;
        snprintf(p, sizeof p, "%s", q);
    }
    return can_create_in(what, path, q, err, errlen);
}

/* --metrics, --summary: a file, in a folder that exists */
static int check_file(const char *what, const char *path, char *err, size_t errlen)
{
    char dir[4096];
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return errmsg(err, errlen, "%s %s: is a folder", what, path);
        if (access(path, W_OK) != 0)
            return errmsg(err, errlen, "%s %s: cannot write: %s", what, path, strerror(errno));
        return 0;
    }
    parent_of(path, dir, sizeof dir);
    return can_create_in(what, path, dir, err, errlen);
}

int outputs_check(const char *save_model, const char *metrics, const char *summary, int rank,
                  char *err, size_t errlen)
{
    if (rank != 0)
        return 0;
    if ((save_model && check_folder("--save-model", save_model, err, errlen) < 0) ||
        (metrics && check_file("--metrics", metrics, err, errlen) < 0) ||
        (summary && check_file("--summary", summary, err, errlen) < 0))
        return -1;
    return 0;
}
