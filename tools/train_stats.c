/* train_stats.c - what `zerotrain train` measures for benchmarks: per-step times after the
 * warm-up, model FLOPs, per-rank peak RSS and memory by category, bytes communicated, and
 * the per-kernel profile (--profile); written as one JSON object (--summary FILE) and the
 * profile printed as a table. */
#include "train_stats.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int stats_init(train_stats *s, int64_t steps, int warmup)
{
    memset(s, 0, sizeof *s);
    s->warmup = warmup;
    if (!(s->seconds = calloc((size_t)(steps > 0 ? steps : 1), sizeof *s->seconds)))
        return -1;
    return 0;
}

void stats_free(train_stats *s) { free(s->seconds); }

int stats_step(train_stats *s, double seconds, double flops, int profile)
{
    if (s->done++ < s->warmup) {
        if (s->done < s->warmup)
            return 0;
        if (profile) { /* the profile counts measured steps only */
            zt_profile_reset();
            zt_profile_enable(1);
        }
        return 1;
    }
    s->seconds[s->n++] = seconds;
    s->flops += flops;
    return 0;
}

void stats_comm_mark(train_stats *s, const zt_engine_report *er)
{
    for (int k = 0; k < 3; k++)
        s->comm0[k] = er->coll_bytes[k];
    s->wait0 = er->coll_seconds[0] + er->coll_seconds[1] + er->coll_seconds[2];
    s->nvme0[0] = er->nvme_read_bytes;
    s->nvme0[1] = er->nvme_written_bytes;
    s->io0 = er->io_wait_seconds;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double *c = malloc(sizeof *c * (size_t)(n ? n : 1)), m;
    if (!c || n == 0) {
        free(c);
        return 0.0;
    }
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

void stats_print_profile(FILE *f, const train_stats *s)
{
    zt_profile_row rows[ZT_PROF_KINDS];
    int n = zt_profile_get(rows, ZT_PROF_KINDS), order[ZT_PROF_KINDS];
    double step = 0.0, counted = 0.0;
    for (int i = 0; i < s->n; i++)
        step += s->seconds[i];
    for (int i = 0; i < n; i++) {
        order[i] = i;
        counted += rows[i].seconds;
    }
    for (int i = 1; i < n; i++) /* by time, largest first */
        for (int j = i; j > 0 && rows[order[j]].seconds > rows[order[j - 1]].seconds; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    fprintf(f, "profile of rank 0 over %d measured steps (%.3f s):\n", s->n, step);
    fprintf(f, "  %-24s %9s %7s %10s %10s %9s %9s\n", "kernel kind", "seconds", "share",
            "GFLOP", "GB moved", "GFLOP/s", "GB/s");
    for (int i = 0; i < n; i++) {
        const zt_profile_row *r = &rows[order[i]];
        if (r->calls == 0)
            continue;
        fprintf(f, "  %-24s %9.3f %6.1f%% %10.2f %10.2f %9.1f %9.2f\n", r->kind, r->seconds,
                step > 0 ? 100.0 * r->seconds / step : 0.0, r->flops * 1e-9, r->bytes * 1e-9,
                r->seconds > 0 ? r->flops * 1e-9 / r->seconds : 0.0,
                r->seconds > 0 ? r->bytes * 1e-9 / r->seconds : 0.0);
    }
    fprintf(f, "  %-24s %9.3f %6.1f%%\n", "other (not in a kernel)",
            step - counted > 0 ? step - counted : 0.0,
            step > 0 ? 100.0 * (step - counted) / step : 0.0);
}

/* JSON string body: names here are plain ASCII, quote and backslash escaped anyway */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int stats_write_summary(const char *path, const train_stats *s, const stats_context *x,
                        zt_engine *e, int rank, int world)
{
    zt_mem_report m;
    zt_engine_report er;
    double flops = s->flops, *rss = NULL;
    unsigned long long peaks[ZT_MEM_NCAT], my_peaks[ZT_MEM_NCAT], my_rss;
    int rc = 0;
    zt_memory_report(&m);
    zt_engine_report_get(e, &er);
    for (int c = 0; c < ZT_MEM_NCAT; c++)
        my_peaks[c] = m.peak[c];
    my_rss = m.peak_rss;
    /* every rank takes part (through the engine's collectives, under its watchdog): FLOPs
     * summed, memory peaks as the largest over ranks, every rank's peak RSS */
    if (world > 1) {
        double mine[ZT_MEM_NCAT + 2], *all = malloc(sizeof *all * (size_t)world * (ZT_MEM_NCAT + 2));
        for (int c = 0; c < ZT_MEM_NCAT; c++)
            mine[c] = (double)my_peaks[c];
        mine[ZT_MEM_NCAT] = (double)my_rss;
        mine[ZT_MEM_NCAT + 1] = flops;
        if (!all || zt_engine_gather_f64(e, mine, ZT_MEM_NCAT + 2, all) < 0)
            rc = -1;
        if (rc == 0 && (rss = malloc(sizeof *rss * (size_t)world))) {
            flops = 0.0;
            for (int c = 0; c < ZT_MEM_NCAT; c++)
                peaks[c] = 0;
            for (int r = 0; r < world; r++) {
                const double *a = all + (size_t)r * (ZT_MEM_NCAT + 2);
                for (int c = 0; c < ZT_MEM_NCAT; c++)
                    peaks[c] = (unsigned long long)a[c] > peaks[c] ? (unsigned long long)a[c]
                                                                   : peaks[c];
                rss[r] = a[ZT_MEM_NCAT];
                flops += a[ZT_MEM_NCAT + 1];
            }
        }
        free(all);
        if (rc < 0) {
            free(rss);
            return -1;
        }
    } else {
        memcpy(peaks, my_peaks, sizeof peaks);
        if ((rss = malloc(sizeof *rss)))
            rss[0] = (double)my_rss;
    }
    if (rank != 0)
        return 0;
    FILE *f = fopen(path, "w");
    if (!f || !rss) {
        free(rss);
        if (f)
            fclose(f);
        return -1;
    }
    double med = median(s->seconds, s->n), mn = 0.0, mx = 0.0;
    for (int i = 0; i < s->n; i++) {
        mn = i == 0 || s->seconds[i] < mn ? s->seconds[i] : mn;
        mx = i == 0 || s->seconds[i] > mx ? s->seconds[i] : mx;
    }
    double per = s->n > 0 ? 1.0 / s->n : 0.0;
    fprintf(f, "{\n  \"zerotrain\": \"%s\",\n  \"model\": ", zt_version());
    put_str(f, x->model);
    fprintf(f, ",\n  \"parameters\": %zu,\n  \"world_size\": %d,\n  \"zero_stage\": %d,\n"
               "  \"threads\": %d,\n  \"micro_batch\": %d,\n  \"grad_accum\": %d,\n"
               "  \"train_batch\": %d,\n  \"seq_len\": %d,\n  \"optimizer\": \"%s\",\n"
               "  \"optimizer_state_bytes\": %zu,\n  \"optimizer_bytes_per_param\": %.6f,\n"
               "  \"offload\": \"%s\",\n  \"recompute\": \"%s\",\n  \"comm_progress\": \"%s\",\n"
               "  \"warmup_steps\": %d,\n  \"measured_steps\": %d,\n  \"step_seconds\": [",
            x->parameters, world, er.zero_stage, x->threads, x->micro, x->gas, x->batch, x->seq,
            x->optimizer ? x->optimizer : "adamw", er.optimizer_state_bytes,
            er.optimizer_bytes_per_param, x->offload ? x->offload : "none", x->recompute ? x->recompute : "none", er.progress == ZT_PROGRESS_THREAD ? "thread" : "poll",
            s->warmup, s->n);
    for (int i = 0; i < s->n; i++)
        fprintf(f, "%s%.6f", i ? ", " : "", s->seconds[i]);
    fprintf(f, "],\n  \"step_median\": %.6f,\n  \"step_min\": %.6f,\n  \"step_max\": %.6f,\n",
            med, mn, mx);
    fprintf(f, "  \"tokens_per_step\": %.0f,\n  \"tokens_per_s\": %.3f,\n",
            (double)x->batch * x->seq, med > 0 ? (double)x->batch * x->seq / med : 0.0);
    fprintf(f, "  \"model_flops_per_step\": %.6g,\n  \"model_flops_per_s\": %.6g,\n",
            flops * per, med > 0 ? flops * per / med : 0.0);
    fprintf(f, "  \"peak_rss_per_rank\": [");
    for (int r = 0; r < world; r++)
        fprintf(f, "%s%.0f", r ? ", " : "", rss[r]);
    fprintf(f, "],\n  \"memory_peak\": {");
    for (int c = 0; c < ZT_MEM_NCAT; c++)
        fprintf(f, "%s\"%s\": %llu", c ? ", " : "", zt_memory_category_name(c), peaks[c]);
    fprintf(f, "},\n  \"activations_predicted\": %zu,\n  \"comm_bytes_per_step\": {",
            zt_engine_activation_prediction(e));
    fprintf(f, "\"reduce_scatter\": %.0f, \"all_gather\": %.0f, "
               "\"other\": %.0f},\n",
            (double)(er.coll_bytes[0] - s->comm0[0]) * per,
            (double)(er.coll_bytes[1] - s->comm0[1]) * per,
            (double)(er.coll_bytes[2] - s->comm0[2]) * per);
    fprintf(f, "  \"comm_wait_s_per_step\": %.6f,\n",
            (er.coll_seconds[0] + er.coll_seconds[1] + er.coll_seconds[2] - s->wait0) * per);
    fprintf(f, "  \"traffic_schedule\": %.4f,\n  \"nvme_read_bytes_per_step\": %.0f,\n"
               "  \"nvme_write_bytes_per_step\": %.0f,\n  \"io_wait_s_per_step\": %.6f,\n"
               "  \"profile\": [",
            er.traffic_schedule, (double)(er.nvme_read_bytes - s->nvme0[0]) * per,
            (double)(er.nvme_written_bytes - s->nvme0[1]) * per,
            (er.io_wait_seconds - s->io0) * per);
    {
        zt_profile_row rows[ZT_PROF_KINDS];
        int n = zt_profile_get(rows, ZT_PROF_KINDS), first = 1;
        for (int i = 0; i < n; i++) {
            if (!rows[i].calls)
                continue;
            fprintf(f, "%s\n    {\"kind\": ", first ? "" : ",");
            put_str(f, rows[i].kind);
            fprintf(f, ", \"calls\": %llu, \"seconds\": %.6f, \"flops\": %.6g, \"bytes\": %.6g}",
                    (unsigned long long)rows[i].calls, rows[i].seconds, rows[i].flops,
                    rows[i].bytes);
            first = 0;
        }
    }
    fprintf(f, "\n  ]\n}\n");
    free(rss);
    if (ferror(f))
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}
