/* ckptdir.h - `zerotrain train`'s hold on its --checkpoint-dir for the whole run: an
 * exclusive lock on the folder, the rule for a folder that already holds checkpoints, and
 * --overwrite's removal of the other runs' ones once this run has saved; and the record of
 * what the run trains with, kept in its checkpoints and compared on resume. It writes no
 * checkpoint itself (the library does). */
#ifndef ZT_TOOLS_CKPTDIR_H
#define ZT_TOOLS_CKPTDIR_H

#include "zerotrain.h"

#include <stddef.h>

enum {
    CKPTDIR_NEW = 0,       /* a fresh run: the folder must hold no step-N entry */
    CKPTDIR_RESUME = 1,    /* --resume or --resume-from: whatever the folder holds stays */
    CKPTDIR_OVERWRITE = 2, /* --overwrite: once this run has saved its first checkpoint,
                            * every step-N entry not of its lineage is removed */
};
typedef struct ckptdir ckptdir;

/* Takes the checkpoint folder root for a run in the given mode. Rank 0 alone touches the
 * folder: it creates root (and missing parents) if needed, locks it (flock LOCK_EX |
 * LOCK_NB on the folder's own descriptor, held until ckptdir_close), checks that it can
 * write there and, in CKPTDIR_NEW, that root holds no step-N entry. Other ranks only get a
 * handle. root NULL: *out = NULL and 0. Returns 0, or -1 with one line (no trailing
 * newline) in err; then *out is NULL, the lock is not held and whatever it created is
 * removed again. Only rank 0 can fail: the caller makes every rank agree. */
int ckptdir_open(const char *root, int mode, int rank, ckptdir **out, char *err,
                 size_t errlen);
/* After each successful zt_checkpoint_save into the folder (every rank): the folder now
 * holds this run's work; in CKPTDIR_OVERWRITE the first call removes the other runs'
 * checkpoints (rank 0; a failure there is a warning on stderr, the run goes on). NULL:
 * nothing. */
void ckptdir_saved(ckptdir *d, zt_engine *e);
/* Releases the lock and frees d. failed != 0 and no checkpoint saved by this run: removes
 * the folders ckptdir_open created (when empty). NULL: nothing. */
void ckptdir_close(ckptdir *d, int failed);

/* What this run trains with, saved in every checkpoint it writes
 * (zt_checkpoint_set_trainer_info): seq_len, train_batch_size and the data's identity data_id
 * (the command's: "synthetic:SEED", or its manifest's checksum) with data_dir (NULL for
 * synthetic data); after a load, each that differs from the checkpoint's is a notice on
 * stderr (rank 0). Call on every rank once, after any load and before the first step.
 * Returns 0 or -1 with the message in err. */
int ckptdir_run_info(zt_engine *e, int rank, long seq_len, int train_batch_size,
                     const char *data_id, const char *data_dir, char *err, size_t errlen);

#endif
