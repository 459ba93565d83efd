/* cli.c - shared pieces of the zerotrain command: one-line errors, option parsing, the
 * memory report. */
#include "cli.h"

#include <sys/stat.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char last_msg[1024];

int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "zerotrain: error: %s\n", last_msg);
    return 1;
}

const char *die_last(void) { return last_msg; }

int errmsg(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int parse_opts(int argc, char **argv, const opt *opts, int n)
{
    for (int i = 0; i < argc; i++) {
        int found = 0;
        for (int k = 0; k < n && !found; k++) {
            if (strcmp(argv[i], opts[k].name) != 0)
                continue;
            if (i + 1 >= argc)
                return die("option %s needs a value", argv[i]);
            *opts[k].value = argv[++i];
            found = 1;
        }
        if (!found)
            return die("unknown option '%s' (see 'zerotrain --help')", argv[i]);
    }
    return 0;
}

int parse_int(const char *s, const char *what, long lo, long hi, long *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return die("%s must be an integer in [%ld, %ld], got '%s'", what, lo, hi, s);
    *out = v;
    return 0;
}

int parse_float(const char *s, const char *what, double lo, double hi, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi))
        return die("%s must be a number in [%g, %g], got '%s'", what, lo, hi, s);
    *out = v;
    return 0;
}

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void print_memory(FILE *f)
{
    zt_mem_report r;
    zt_memory_report(&r);
    fprintf(f, "memory (MiB)   ");
    for (int c = 0; c < ZT_MEM_NCAT; c++)
        fprintf(f, " %s %.1f/%.1f", zt_memory_category_name(c), r.current[c] / 1048576.0,
                r.peak[c] / 1048576.0);
    fprintf(f, "\n               counted peak %.1f, heap (%s) allocated %.1f resident %.1f, "
                    "peak RSS %.1f  (current/peak)\n",
            r.total_peak / 1048576.0, zt_memory_heap_source(), r.jemalloc_allocated / 1048576.0,
            r.jemalloc_resident / 1048576.0, r.peak_rss / 1048576.0);
}

/* --model as a preset name, a config.json alone or a folder; 0, or 1 after printing why
 * not (a FIFO or a device) */
int cli_set_model(zt_config *cfg, const char *model)
{
    struct stat sb;
    if (stat(model, &sb) != 0)
        cfg->model_preset = model;
    else if (S_ISREG(sb.st_mode)) /* a config.json alone */
        cfg->model_config = model;
    else if (S_ISDIR(sb.st_mode))
        cfg->model_dir = model;
    else {
        die("--model %s: not a regular file (a config.json) nor a folder (%s)", model,
            S_ISFIFO(sb.st_mode) ? "a FIFO" : "a device or socket");
        return 1;
    }
    return 0;
}
