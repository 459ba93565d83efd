/* tmpdir.h - a fresh directory for a cmocka test group: tmpdir_make fills `dir` with a new
 * directory /tmp/<prefix>_<6 random characters> (mkdtemp), tmpdir_remove deletes it and all it
 * holds. Include after cmocka.h. */
#ifndef ZT_TESTS_TMPDIR_H
#define ZT_TESTS_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

static void tmpdir_make(char *dir, size_t size, const char *prefix)
{
    snprintf(dir, size, "/tmp/%s_XXXXXX", prefix); /* mkdtemp replaces the six X's */
    assert_non_null(mkdtemp(dir));
}

static int tmpdir_remove(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
