/* outputs.h - `zerotrain train`'s output paths checked before the first step. */
#ifndef ZT_TOOLS_OUTPUTS_H
#define ZT_TOOLS_OUTPUTS_H

#include <stddef.h>

/* Checks, on rank 0 (which writes them), that each given path can be written: --save-model
 * an existing writable folder, or one that can be created (its nearest existing ancestor a
 * writable folder); --metrics and --summary a writable file that is not a folder, or one
 * that can be created in an existing writable folder. Creates and changes nothing. NULL
 * paths are skipped; other ranks return 0. Returns 0, or -1 with one line in err. */
int outputs_check(const char *save_model, const char *metrics, const char *summary, int rank,
                  char *err, size_t errlen);

#endif
