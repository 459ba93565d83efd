/* test_fileio.c - cmocka tests of the guarded open and whole-file read (format/fileio.c): a
 * regular file opens (blocking again), a FIFO, a folder, a device and a socket are refused at
 * once with ZT_E_FORMAT and a message naming the path and its type. An alarm turns a hang into
 * a failure. The atomic writes are tested through their users (test_safetensors.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "zerotrain.h"
#include "../format/fileio.h"
#include "tmpdir.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    tmpdir_make(tmpdir, sizeof tmpdir, "zt_fileio");
    alarm(10); /* a reader that waits on a FIFO fails the test instead of hanging it */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    return tmpdir_remove(tmpdir);
}

/* zt_open_regular(path) must fail with code, its message naming path and holding what */
static void expect_refused(const char *path, int code, const char *what)
{
    int fd = zt_open_regular(path, 0);
    if (fd != code || !strstr(zt_last_error(), path) || !strstr(zt_last_error(), what))
        fail_msg("%s: expected %d with '%s', got %d: %s", path, code, what, fd, zt_last_error());
}

/* zt_mkdirs: the folders it made, outermost first, and only those; release removes them
 * (innermost first, only when empty) or only frees the list; a file in the path refused */
static void test_mkdirs(void **state)
{
    char a[512], abc[600], file[512], want[600];
    struct stat sb;
    zt_dirs_made made = {NULL, 0};
    (void)state;
    snprintf(a, sizeof a, "%s/a", tmpdir);
    snprintf(abc, sizeof abc, "%s//b/c/", a);
    assert_int_equal(mkdir(a, 0755), 0);
    assert_int_equal(zt_mkdirs(abc, 0755, &made), 0);
    assert_int_equal(made.n, 2); /* a existed: b and c made */
    snprintf(want, sizeof want, "%s//b", a);
    assert_string_equal(made.dir[0], want);
    snprintf(want, sizeof want, "%s//b/c", a);
    assert_string_equal(made.dir[1], want);
    assert_int_equal(zt_mkdirs(abc, 0755, NULL), 0); /* all there: nothing to do */
    zt_dirs_made_release(&made, 1);
    assert_int_equal(made.n, 0);
    assert_int_equal(stat(a, &sb), 0);               /* not made by the call: kept */
    snprintf(want, sizeof want, "%s/b", a);
    assert_int_not_equal(stat(want, &sb), 0);        /* b and c removed */
    assert_int_equal(zt_mkdirs(abc, 0755, &made), 0);
    zt_dirs_made_release(&made, 0);                  /* only the list freed */
    snprintf(want, sizeof want, "%s/b/c", a);
    assert_int_equal(stat(want, &sb), 0);
    snprintf(file, sizeof file, "%s/f", tmpdir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(want, sizeof want, "%s/g", file);
    assert_int_equal(zt_mkdirs(file, 0755, NULL), -ENOTDIR);
    assert_non_null(strstr(zt_last_error(), "exists and is not a folder"));
    assert_true(zt_mkdirs(want, 0755, NULL) < 0);
}

static void test_regular(void **state)
{
    char path[512], buf[8], *text = NULL;
    size_t len = 0;
    int fd, fl;
    (void)state;
    snprintf(path, sizeof path, "%s/a.txt", tmpdir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("hello", fp);
    fclose(fp);
    fd = zt_open_regular(path, 0);
    assert_true(fd >= 0);
    fl = fcntl(fd, F_GETFL);
    assert_int_equal(fl & O_ACCMODE, O_RDONLY);
    assert_int_equal(fl & O_NONBLOCK, 0); /* cleared again: reads block as usual */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(read(fd, buf, sizeof buf), 5);
    close(fd);
    assert_int_equal(zt_file_read_all(path, 100, &text, &len), 0);
    assert_int_equal(len, 5);
    assert_string_equal(text, "hello");
    free(text);
    assert_int_equal(zt_file_read_all(path, 4, &text, &len), ZT_E_FORMAT);
    assert_null(text);
    assert_non_null(strstr(zt_last_error(), "5 bytes, larger than the 4-byte limit"));

    /* a symlink to a regular file is followed, unless the caller says O_NOFOLLOW */
    char link[520];
    snprintf(link, sizeof link, "%s/link", tmpdir);
    assert_int_equal(symlink(path, link), 0);
    fd = zt_open_regular(link, 0);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(zt_open_regular(link, O_NOFOLLOW), -ELOOP);
    assert_non_null(strstr(zt_last_error(), link));
}

static void test_special_files(void **state)
{
    char fifo[512], sock[512], link[512], missing[512], *text = (char *)1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int s;
    (void)state;
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    snprintf(sock, sizeof sock, "%s/sock", tmpdir);
    snprintf(link, sizeof link, "%s/fifo-link", tmpdir);
    snprintf(missing, sizeof missing, "%s/missing", tmpdir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(symlink(fifo, link), 0);
    /* a FIFO without a writer: an ordinary open would wait for one forever */
    expect_refused(fifo, ZT_E_FORMAT, "not a regular file (a FIFO)");
    expect_refused(link, ZT_E_FORMAT, "not a regular file (a FIFO)");
    assert_int_equal(zt_file_read_all(fifo, 100, &text, NULL), ZT_E_FORMAT);
    assert_null(text);
    assert_non_null(strstr(zt_last_error(), "(a FIFO)"));
    expect_refused(tmpdir, ZT_E_FORMAT, "not a regular file (a folder)");
    expect_refused("/dev/null", ZT_E_FORMAT, "not a regular file (a character device)");
    expect_refused(missing, -ENOENT, "cannot open: No such file or directory");
    /* a listening socket cannot be opened at all (ENXIO); either way it is refused */
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_true(zt_open_regular(sock, 0) < 0);
    assert_non_null(strstr(zt_last_error(), sock));
    close(s);
    /* the readers built on it */
    zt_safetensors *f = (zt_safetensors *)1;
    assert_int_equal(zt_safetensors_open(fifo, &f), ZT_E_FORMAT);
    assert_null(f);
    assert_non_null(strstr(zt_last_error(), "(a FIFO)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkdirs),
        cmocka_unit_test(test_regular),
        cmocka_unit_test(test_special_files),
    };
    return cmocka_run_group_tests_name("fileio", tests, setup, teardown);
}
