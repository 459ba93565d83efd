/* fileio.h - durable, atomic file writes: a temporary file in the same folder, complete
 * writes with EINTR retries, fsync, rename over the target, fsync of the folder. Readers
 * see either the old file or the complete new one, never a partial one. */
#ifndef ZT_FORMAT_FILEIO_H
#define ZT_FORMAT_FILEIO_H

#include <stddef.h>
#include "zerotrain.h"

/* zt_file_write_atomic (parts written back to back) is public: zerotrain.h. */

/* The same, with part i (data and length) asked of part(i, arg, ...) just before it is
 * written: data can be produced one part at a time. A part that returns < 0 stops the
 * write (the temporary file is removed) and its status is returned as is. */
typedef int (*zt_part_fn)(int i, void *arg, const void **data, size_t *len);
int zt_file_write_atomic_cb(const char *path, int n, zt_part_fn part, void *arg);

/* zt_open_regular and zt_file_read_all are public (zerotrain.h): the command reads its
 * inputs through them too. */

/* mkdir -p: creates dir and its missing parents (mode 0755). */
int zt_mkdirs(const char *dir);

#endif
