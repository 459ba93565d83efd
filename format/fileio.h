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

/* A folder written whole and swapped in, so that no file of an older one survives and a
 * failure leaves the older one as it was:
 *   zt_dir_stage(dir, tmp, n): creates dir's parents and the empty hidden folder
 *     "<parent>/.<name>.zt-new" (its path in tmp; one left by a save that died is removed
 *     first); the caller writes the folder's files into it, each atomically;
 *   zt_dir_commit(tmp, dir): fsyncs tmp, puts it in dir's place (exchanged with an existing
 *     dir, renameat2 RENAME_EXCHANGE; on filesystems without it, the old one moved aside to
 *     "<parent>/.<name>.zt-old" first), fsyncs the parent and removes the old folder. On a
 *     failure before the switch it removes tmp itself and dir is untouched;
 *   zt_dir_discard(tmp): removes tmp after a failed write (keeping the error message).
 * Removal never follows symbolic links and never descends into a folder: these folders hold
 * plain files. What dir may hold before it is replaced is the caller's decision. */
int zt_dir_stage(const char *dir, char *tmp, size_t n);
int zt_dir_commit(const char *tmp, const char *dir);
void zt_dir_discard(const char *tmp);

#endif
