/* outdir.h - an output folder that replaces an existing one only when complete: it is built
 * as a hidden sibling (".NAME.prepare-" and six random characters), synced, then swapped in with one
 * renameat2(RENAME_EXCHANGE), and the old folder removed. The folder that holds it is locked
 * (flock) from outdir_lock to outdir_close. It does not write the files inside; the caller
 * does, into outdir_stage's path. Errors come back as -1 plus one line in err. */
#ifndef ZT_TOOLS_OUTDIR_H
#define ZT_TOOLS_OUTDIR_H

#include <stddef.h>

typedef struct outdir outdir;

/* Whether an existing folder may be replaced: ours(name) says whether the entry called name
 * is one the command writes itself. */
typedef int (*outdir_ours_fn)(const char *name);

/* Creates the missing parents of dir, takes an exclusive non-blocking flock on the folder
 * that holds dir (a second run fails at once, naming it), removes the staging folders a
 * killed run left for dir (and puts back a folder that run had moved aside), and checks that
 * an existing dir is a folder holding only entries ours() accepts. */
int outdir_lock(const char *dir, outdir_ours_fn ours, outdir **out, char *err, size_t errlen);

/* Creates the staging folder (the mode of the folder it replaces, else 0777 & ~umask) and
 * returns its path, valid until outdir_close; NULL on failure. */
const char *outdir_stage(outdir *o, char *err, size_t errlen);

/* fsyncs the staging folder, checks the existing dir again, swaps the staging folder in,
 * fsyncs the parent and removes the old folder (a failure to remove it is only a warning on
 * stderr: the next run removes it). On failure dir is as it was. */
int outdir_commit(outdir *o, char *err, size_t errlen);

/* Unless committed, removes the staging folder and the parents outdir_lock created; releases
 * the lock. NULL is a no-op. */
void outdir_close(outdir *o);

/* Tests only: ZT_PREPARE_FAULT="POINT[:ACTION],..." with ACTION kill (the default, SIGKILL),
 * stop (SIGSTOP, then carry on) or fail (returns 1: the caller fails that step). Returns 0
 * when the point is not named. */
int outdir_fault(const char *point);

#endif
