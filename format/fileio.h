/* fileio.h - durable, atomic file writes: a temporary file in the same folder, complete
 * writes with EINTR retries, fsync, rename over the target, fsync of the folder. Readers
 * see either the old file or the complete new one, never a partial one. */
#ifndef ZT_FORMAT_FILEIO_H
#define ZT_FORMAT_FILEIO_H

#include <stddef.h>

/* Writes parts[0..n) (lens[i] bytes each) back to back into path, mode 0644.
 * Returns 0 or -errno with a message naming the path and the step that failed; on failure
 * the temporary file is removed and an existing file at path is left untouched. */
int zt_file_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n);

/* The same, with part i (data and length) asked of part(i, arg, ...) just before it is
 * written: data can be produced one part at a time. A part that returns < 0 stops the
 * write (the temporary file is removed) and its status is returned as is. */
typedef int (*zt_part_fn)(int i, void *arg, const void **data, size_t *len);
int zt_file_write_atomic_cb(const char *path, int n, zt_part_fn part, void *arg);

/* Reads a whole regular file of at most limit bytes into a NUL-terminated buffer (*out,
 * freed by the caller; *len = its length, len may be NULL). Errors name the path: -errno when
 * it cannot be opened or read, ZT_E_FORMAT when it is not a regular file or is too large. */
int zt_file_read_all(const char *path, size_t limit, char **out, size_t *len);

/* mkdir -p: creates dir and its missing parents (mode 0755). */
int zt_mkdirs(const char *dir);

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
