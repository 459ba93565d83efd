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

/* Opens a file the caller is about to read, refusing anything but a regular file (after
 * symlinks) before it can block: the open is O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags (a
 * FIFO opened so does not wait for a writer, a device or socket is never read), then fstat,
 * then O_NONBLOCK is cleared again. flags adds open(2) flags such as O_NOFOLLOW; it must not
 * ask for write access. Returns the descriptor (the caller closes it) or, with a message
 * naming the path: -errno when it cannot be opened ("PATH: cannot open: REASON"), ZT_E_FORMAT
 * when it is not a regular file ("PATH: not a regular file (a FIFO)", "(a folder)", ...). */
int zt_open_regular(const char *path, int flags);

/* Reads a whole regular file of at most limit bytes into a NUL-terminated buffer (*out,
 * freed by the caller; *len = its length, len may be NULL), opened with zt_open_regular.
 * Errors name the path: -errno when it cannot be opened or read, ZT_E_FORMAT when it is not a
 * regular file or is too large. */
int zt_file_read_all(const char *path, size_t limit, char **out, size_t *len);

/* mkdir -p: creates dir and its missing parents (mode 0755). */
int zt_mkdirs(const char *dir);

#endif
