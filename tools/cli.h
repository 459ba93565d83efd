/* cli.h - what the zerotrain command's files share: error printing, option parsing, the
 * commands. The command is built only on the public API (zerotrain.h). */
#ifndef ZT_TOOLS_CLI_H
#define ZT_TOOLS_CLI_H

#include "zerotrain.h"
/* zt_open_regular and zt_file_read_all, linked from libzerotrain.a: the one library-internal
 * header the command uses (readers of a user's files must not wait on a FIFO). */

#include <stdio.h>

/* Prints "zerotrain: error: ..." as one line on stderr and returns 1. */
int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* the last message die() printed ("" before the first) */
const char *die_last(void);
/* Formats a one-line message into err (errlen bytes) and returns -1: for functions that
 * report to a caller which decides when to print. */
int errmsg(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct opt { const char *name; const char **value; } opt;
/* Parses --name value pairs into opts; unknown options and missing values are errors. */
int parse_opts(int argc, char **argv, const opt *opts, int n);
int parse_int(const char *s, const char *what, long lo, long hi, long *out);
int parse_float(const char *s, const char *what, double lo, double hi, double *out);
double now(void);
/* --model as a preset name, a config.json alone or a folder, into cfg; 0, or 1 after
 * printing why not (a FIFO or a device) */
int cli_set_model(zt_config *cfg, const char *model);
void print_memory(FILE *f);

int cmd_grad(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_prepare_data(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_config_reference(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
int cmd_estimate(int argc, char **argv);

#endif
