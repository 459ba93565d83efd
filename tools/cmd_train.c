/* cmd_train.c - `zerotrain train`: masked-LM (BERT) or span-corruption (T5) training from a
 * DeepSpeed-style config on a prepared corpus or synthetic ids, with progress, JSON Lines
 * metrics, evaluation on every rank, the divergence guard, crash-safe checkpoints and
 * resume. Only the public API. Every rank passes through one start-up agreement (its own
 * failures, and its settings against rank 0's) before the first collective, and every
 * collective after it is the library's (under its watchdog). */
#include "ckptdir.h"
#include "cli.h"
#include "outputs.h"
#include "train_stats.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

typedef struct train_args {
    const char *config, *model, *data, *seq, *steps, *ckpt_dir, *ckpt_every, *keep, *save,
        *seed, *metrics, *eval_data, *eval_every, *eval_samples, *threads, *timeout,
        *summary, *warmup, *resume_from;
    int resume, check_coll, profile, overwrite;
} train_args;

/* a whole regular file (configs: at most 16 MiB), or NULL with zt_last_error() set: a FIFO
 * or device is refused before it is read */
static char *read_text(const char *path)
{
    char *buf = NULL;
    return zt_file_read_all(path, 16u << 20, &buf, NULL) < 0 ? NULL : buf;
}

/* One micro-batch's buffers: [B, T] inputs, [B, Tl] labels. */
typedef struct batch_buf { int64_t *ids, *mask, *tt, *labels; } batch_buf;

static int batch_alloc(batch_buf *b, size_t n, size_t n_labels)
{
    b->ids = malloc(n * sizeof(int64_t));
    b->mask = malloc(n * sizeof(int64_t));
    b->tt = malloc(n * sizeof(int64_t));
    b->labels = malloc(n_labels * sizeof(int64_t));
    return b->ids && b->mask && b->tt && b->labels ? 0 : -1;
}

/* --model names a T5: a t5-* preset, or a config.json (alone or in a folder) of model_type t5 */
static int model_is_t5(const char *model)
{
    char path[4096], *text;
    struct stat sb;
    int t5 = 0;
    if (stat(model, &sb) != 0)
        return strncmp(model, "t5-", 3) == 0;
    snprintf(path, sizeof path, S_ISDIR(sb.st_mode) ? "%s/config.json" : "%s", model);
    if ((text = read_text(path))) {
        cJSON *o = cJSON_Parse(text), *v = o ? cJSON_GetObjectItemCaseSensitive(o, "model_type") : NULL;
        t5 = cJSON_IsString(v) && strcmp(v->valuestring, "t5") == 0;
        cJSON_Delete(o);
        free(text);
    }
    return t5;
}

/* Where samples come from: masked LM (BERT) or span corruption (T5). */
typedef struct source {
    zt_mlm_source *mlm;
    zt_span_source *span;
    int T, Tl;                 /* inputs, labels per row */
} source;

static int source_create(const zt_token_data *data, const zt_model_info *mi, int T,
                         uint64_t seed, source *s)
{
    memset(s, 0, sizeof *s);
    s->T = T;
    if (strcmp(mi->model_type, "t5") == 0) {
        if (zt_span_source_create(data, mi->vocab_size, T, 0.15f, 3.0f, seed, &s->span) < 0)
            return -1;
        s->Tl = zt_span_source_target_len(s->span);
        return 0;
    }
    s->Tl = T;
    return zt_mlm_source_create(data, mi->vocab_size, T, 0.15f, seed, &s->mlm) < 0 ? -1 : 0;
}

static void source_destroy(source *s)
{
    zt_mlm_source_destroy(s->mlm);
    zt_span_source_destroy(s->span);
}

static uint64_t source_samples(const source *s)
{
    return s->span ? zt_span_source_samples(s->span) : zt_mlm_source_samples(s->mlm);
}

/* rows for samples [first, first + B) into bb, described by *b */
static int source_fill(const source *s, uint64_t first, int B, batch_buf *bb, zt_batch *b)
{
    int rc = s->span ? zt_span_source_fill(s->span, first, B, bb->ids, bb->mask, bb->labels)
                     : zt_mlm_source_fill(s->mlm, first, B, bb->ids, bb->mask, bb->tt,
                                          bb->labels);
    *b = (zt_batch){B, s->T, bb->ids, bb->mask, s->span ? NULL : bb->tt, bb->labels, first, 0,
                    s->span ? s->Tl : 0, NULL};
    return rc;
}

static void batch_release(batch_buf *b)
{
    free(b->ids);
    free(b->mask);
    free(b->tt);
    free(b->labels);
}

/* Mean loss over the first n_samples sequences of src with fixed masks, on every rank: batch
 * b (B rows) is rank b mod N's, the batches' sums are gathered and added in batch order, so
 * the figure does not depend on N or the stage. A rank left without a batch in the last
 * round evaluates batch 0 again and drops the result (stage 3's gathers are collective).
 * *count: labelled tokens (0: *loss is NaN). */
static int evaluate(zt_engine *e, const source *src, int B, uint64_t n_samples, batch_buf *bb,
                    int rank, int world, double *loss, int64_t *count)
{
    uint64_t nb = (n_samples + (uint64_t)B - 1) / (uint64_t)B;
    uint64_t rounds = (nb + (uint64_t)world - 1) / (uint64_t)world;
    double *mine = calloc(2 * rounds + 1, sizeof *mine), *all = NULL, sum = 0.0;
    int rc = 0;
    if (!mine || !(all = calloc((2 * rounds + 1) * (size_t)world, sizeof *all))) {
        free(mine);
        return die("out of memory");
    }
    for (uint64_t k = 0; k < rounds && rc == 0; k++) {
        uint64_t b = k * (uint64_t)world + (uint64_t)rank, first = (b < nb ? b : 0) * (uint64_t)B;
        int rows = (int)(n_samples - first < (uint64_t)B ? n_samples - first : (uint64_t)B);
        zt_fb_result r;
        zt_batch bt;
        if (source_fill(src, first, rows, bb, &bt) < 0)
            rc = die("evaluation data: %s", zt_last_error());
        else if (zt_engine_evaluate(e, &bt, &r) < 0)
            rc = die("evaluation: %s", zt_engine_last_error(e));
        else if (b < nb) {
            mine[2 * k] = r.loss_sum;
            mine[2 * k + 1] = (double)r.n_labels;
        }
    }
    if (rc)
        goto done;
    if (zt_engine_gather_f64(e, mine, (int)(2 * rounds), all) < 0) {
        rc = die("evaluation: %s", zt_engine_last_error(e));
        goto done;
    }
    *count = 0;
    for (uint64_t b = 0; b < nb; b++) {
        const double *x = all + (b % (uint64_t)world) * 2 * rounds + 2 * (b / (uint64_t)world);
        sum += x[0];
        *count += (int64_t)x[1];
    }
    *loss = *count ? sum / (double)*count : NAN;
done:
    free(mine);
    free(all);
    return rc;
}

/* A JSON number, or null when it is not finite (JSON has no NaN) */
static void json_num(FILE *f, const char *key, double v, const char *fmt)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

/* The masked-LM loss of counting alone: the cross-entropy (nats) of predicting every masked
 * token from the corpus' token frequencies, i.e. their entropy over the tokens that can be
 * masked (the special ids never are). Synthetic ids are uniform: ln(vocab - 5). A corpus
 * of more than 2^26 tokens is sampled in 64 evenly spaced stretches. NAN when it cannot be
 * read. */
static double unigram_loss(const zt_token_data *d, int vocab)
{
    enum { CHUNK = 1 << 20, CAP = 1 << 26, STRETCHES = 64 };
    zt_token_data_info di;
    uint64_t *count, n = 0;
    int32_t *buf;
    double h = NAN;
    if (!d)
        return log((double)(vocab - 5));
    zt_token_data_info_get(d, &di);
    if (!(count = calloc((size_t)vocab, sizeof *count)) || !(buf = malloc(sizeof *buf * CHUNK))) {
        free(count);
        return NAN;
    }
    int sampled = di.n_tokens > CAP;
    uint64_t span = sampled ? CAP / STRETCHES : di.n_tokens;
    for (int k = 0; k < (sampled ? STRETCHES : 1); k++) {
        uint64_t start = sampled ? (di.n_tokens - span) / (STRETCHES - 1) * (uint64_t)k : 0;
        for (uint64_t off = 0; off < span; off += CHUNK) {
            size_t m = span - off < CHUNK ? (size_t)(span - off) : CHUNK;
            if (zt_token_data_read(d, start + off, m, buf) < 0)
                goto out;
            for (size_t i = 0; i < m; i++) {
                int32_t t = buf[i];
                if (t >= 0 && t < vocab && t != di.tok.pad_id && t != di.tok.unk_id &&
                    t != di.tok.cls_id && t != di.tok.sep_id && t != di.tok.mask_id) {
                    count[t]++;
                    n++;
                }
            }
        }
    }
    if (n) {
        h = 0.0;
        for (int t = 0; t < vocab; t++)
            if (count[t])
                h -= (double)count[t] / (double)n * log((double)count[t] / (double)n);
    }
out:
    free(buf);
    free(count);
    return h;
}

static void progress(int tty, int64_t step, int64_t total, double loss, double unigram,
                     double lr, double tps, double eta)
{
    zt_mem_report r;
    char base[32] = "";
    zt_memory_report(&r);
    if (isfinite(unigram))
        snprintf(base, sizeof base, " (unigram %.2f)", unigram);
    if (tty) {
        fprintf(stderr, "\rstep %" PRId64 "/%" PRId64 "  loss %.4f%s  lr %.3g  %.0f tokens/s  "
                        "ETA %.0fs  peak RSS %.0f MiB   ",
                step, total, loss, base, lr, tps, eta, r.peak_rss / 1048576.0);
        fflush(stderr);
    } else {
        printf("step %" PRId64 "/%" PRId64 "  loss %.4f%s  lr %.3g  %.0f tokens/s  ETA %.0fs  "
               "peak RSS %.0f MiB\n",
               step, total, loss, base, lr, tps, eta, r.peak_rss / 1048576.0);
        fflush(stdout);
    }
}

/* One JSON line. Values that are not finite are null, and named in "nonfinite". */
static void write_metrics(FILE *f, int64_t step, double loss, double lr, double norm,
                          uint64_t tokens, double seconds, const double *eval_loss,
                          int skipped, int64_t skipped_total)
{
    zt_mem_report r;
    const char *bad[3];
    int nbad = 0;
    zt_memory_report(&r);
    fprintf(f, "{\"step\": %" PRId64, step);
    json_num(f, "loss", loss, "%.9g");
    json_num(f, "lr", lr, "%.9g");
    json_num(f, "grad_norm", norm, "%.9g");
    fprintf(f, ", \"tokens\": %" PRIu64 ", \"seconds\": %.6f", tokens, seconds);
    if (eval_loss)
        json_num(f, "eval_loss", *eval_loss, "%.9g");
    if (!isfinite(loss))
        bad[nbad++] = "loss";
    if (!isfinite(norm))
        bad[nbad++] = "grad_norm";
    if (eval_loss && !isfinite(*eval_loss))
        bad[nbad++] = "eval_loss";
    if (nbad) {
        fprintf(f, ", \"nonfinite\": [");
        for (int i = 0; i < nbad; i++)
            fprintf(f, "%s\"%s\"", i ? ", " : "", bad[i]);
        fputc(']', f);
    }
    fprintf(f, ", \"skipped\": %s, \"skipped_steps\": %" PRId64, skipped ? "true" : "false",
            skipped_total);
    fprintf(f, ", \"memory\": {");
    for (int c = 0; c < ZT_MEM_NCAT; c++)
        fprintf(f, "%s\"%s\": %zu", c ? ", " : "", zt_memory_category_name(c), r.current[c]);
    fprintf(f, ", \"peak_rss\": %zu}}\n", r.peak_rss);
    fflush(f);
}

/* The data's identity for the ranks' comparison: the xxh64 of its manifest (which holds
 * every shard's checksum), or the synthetic seed. */
static void data_identity(const char *dir, uint64_t synth_seed, char *out, size_t n)
{
    char path[4096], *text;
    if (!dir) {
        snprintf(out, n, "synthetic:%" PRIu64, synth_seed);
        return;
    }
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (!(text = read_text(path))) {
        snprintf(out, n, "unreadable");
        return;
    }
    snprintf(out, n, "manifest xxh64 %016llx", (unsigned long long)XXH64(text, strlen(text), 0));
    free(text);
}

/* The recomputation plan's predicted activation peak against the measured one, and with
 * the profile each recomputed unit's time and bytes. */
static void print_recompute(const zt_engine *e, const zt_model_info *mi, int profile)
{
    zt_mem_report r;
    zt_recompute_info ri;
    size_t pred = zt_engine_activation_prediction(e);
    int any = 0;
    zt_memory_report(&r);
    for (int u = 0; u < mi->num_units; u++)
        any |= zt_engine_recompute_info(e, u, &ri) == 0 && strcmp(ri.mode, "keep") != 0;
    if (!any)
        return;
    if (pred > 0)
        fprintf(stderr, "activations: predicted %.1f MiB, measured peak %.1f MiB (%.3fx)\n",
                pred / 1048576.0, r.peak[ZT_MEM_ACTIVATIONS] / 1048576.0,
                (double)r.peak[ZT_MEM_ACTIVATIONS] / (double)pred);
    if (!profile)
        return;
    fprintf(stderr, "recompute profile   unit           mode          calls   seconds  "
                    "ms/call  MiB/call\n");
    for (int u = 0; u < mi->num_units; u++) {
        if (zt_engine_recompute_info(e, u, &ri) < 0 || ri.calls == 0)
            continue;
        fprintf(stderr, "                    %-14s %-12s %6llu %9.3f %8.2f %9.1f\n",
                ri.name, ri.mode, (unsigned long long)ri.calls, ri.seconds,
                1e3 * ri.seconds / (double)ri.calls,
                (double)ri.bytes / (double)ri.calls / 1048576.0);
    }
}

/* 1 when every rank is ok (collective). A rank that is fine but sees another fail says
 * nothing more: the failed rank printed its message. */
static int all_ok(zt_engine *e, int ok)
{
    int64_t bad = !ok;
    if (zt_engine_sum_i64(e, &bad, 1) < 0) {
        die("%s", zt_engine_last_error(e));
        return 0;
    }
    return bad == 0;
}

/* This rank's resolved settings as "key=value" lines, for the start-up comparison of the
 * ranks (the engine compares its own configuration and the model's shape itself); NULL when
 * out of memory. */
static char *run_settings(const train_args *a, const zt_train_settings *ts, long steps, long seq,
                          uint64_t seed, const char *data_dir, uint64_t synth_seed,
                          long eval_every, long eval_samples, long ckpt_every, long keep,
                          long warmup)
{
    char *buf = NULL, id[128];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    static const char *const sched[] = {"constant", "WarmupLR", "WarmupDecayLR",
                                        "WarmupCosineLR"};
    if (!f)
        return NULL;
    fprintf(f, "--steps=%ld\n--seq-len=%ld\nseed=%" PRIu64 "\n", steps, seq, seed);
    data_identity(data_dir, synth_seed, id, sizeof id);
    fprintf(f, "--data=%s\n", id);
    if (a->eval_data) {
        data_identity(a->eval_data, 0, id, sizeof id);
        fprintf(f, "--eval-data=%s\n--eval-every=%ld\n--eval-samples=%ld\n", id, eval_every,
                eval_samples);
    }
    fprintf(f, "--model=%s\n", a->model);
    fprintf(f, "--checkpoint-dir=%s\n--checkpoint-every=%ld\n--keep=%ld\n--resume=%d\n"
               "--overwrite=%d\n--resume-from=%s\n--save-model=%s\n--warmup=%ld\n",
            a->ckpt_dir ? a->ckpt_dir : "", ckpt_every, keep, a->resume, a->overwrite,
            a->resume_from ? a->resume_from : "", a->save ? a->save : "", warmup);
    if (ts) {
        fprintf(f, "train_batch_size=%d\ntrain_micro_batch_size_per_gpu=%d\n"
                   "gradient_accumulation_steps=%d\nscheduler.type=%s\n"
                   "scheduler.warmup_min_lr=%.17g\nscheduler.warmup_max_lr=%.17g\n"
                   "scheduler.warmup_num_steps=%" PRId64 "\nscheduler.total_num_steps=%" PRId64
                   "\nscheduler.warmup_type=%s\nscheduler.warmup_min_ratio=%.17g\n"
                   "scheduler.cos_min_ratio=%.17g\noptimizer.params.lr=%.9g\n"
                   "zerotrain.skip_nonfinite=%d\nzerotrain.max_skipped_steps=%d\n",
                ts->train_batch_size, ts->micro_batch_size, ts->grad_accum_steps,
                sched[ts->scheduler], ts->warmup_min_lr, ts->warmup_max_lr,
                ts->warmup_num_steps, ts->total_num_steps, ts->warmup_log ? "log" : "linear",
                ts->warmup_min_ratio, ts->cos_min_ratio, (double)ts->lr, ts->skip_nonfinite,
                ts->max_skipped_steps);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int cmd_train(int argc, char **argv)
{
    train_args a = {0};
    opt opts[] = {
        {"--config", &a.config},         {"--model", &a.model},
        {"--data", &a.data},             {"--seq-len", &a.seq},
        {"--steps", &a.steps},           {"--checkpoint-dir", &a.ckpt_dir},
        {"--checkpoint-every", &a.ckpt_every}, {"--keep", &a.keep},
        {"--save-model", &a.save},       {"--seed", &a.seed},
        {"--metrics", &a.metrics},       {"--eval-data", &a.eval_data},
        {"--eval-every", &a.eval_every}, {"--eval-samples", &a.eval_samples},
        {"--threads", &a.threads},       {"--collective-timeout", &a.timeout},
        {"--summary", &a.summary},       {"--warmup", &a.warmup},
        {"--resume-from", &a.resume_from},
    };
    long steps = 100, seq = 128, ckpt_every = 0, keep = 0, eval_every = 0, eval_samples = 256,
         threads = -1, seed = -1, warmup = 1;
    train_stats stats = {0};
    int world = 1, rank = 0, rc = 1, tty = isatty(2);
    char *cfg_text = NULL, resume_path[4096];
    const char *data_dir = NULL;
    zt_train_config *tc = NULL;
    const zt_train_settings *ts = NULL;
    zt_token_data *data = NULL, *eval_data = NULL;
    source src = {0}, eval_src = {0};
    zt_engine *e = NULL;
    zt_config cfg;
    zt_model_info mi;
    char rc_name[32] = "none";
    zt_train_state st = {0, 0, 42};
    batch_buf *bufs = NULL;
    zt_batch *batches = NULL;
    FILE *metrics = NULL;
    uint64_t synth_seed = 0;
    double unigram = NAN;      /* the masked-LM loss of counting (rank 0; BERT only) */
    /* start-up: a rank's own failure (its status, already printed) waits for the agreement */
    int start_rc = 0, is_t5 = 0;
    int64_t skipped_total = 0, skipped_run = 0;
    char last_ckpt[4096] = "";
    ckptdir *cd = NULL;
    char cd_msg[8192] = "";
    double agree_timeout = 300.0;
#define START_FAIL(code) do { start_rc = (code); goto agree; } while (0)

    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    /* --resume is a flag; the rest take values */
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--resume") == 0)
            a.resume = 1;
        else if (strcmp(argv[i], "--check-collectives") == 0)
            a.check_coll = 1;
        else if (strcmp(argv[i], "--profile") == 0)
            a.profile = 1;
        else if (strcmp(argv[i], "--overwrite") == 0)
            a.overwrite = 1;
        else
            argv[n++] = argv[i];
    }
    if (parse_opts(n, argv, opts, (int)(sizeof opts / sizeof opts[0])))
        START_FAIL(2);
    if (!a.model || !a.data) {
        die("train needs --model DIR|PRESET|CONFIG_JSON and --data DIR|synthetic[:SEED]");
        START_FAIL(2);
    }
    if ((a.steps && parse_int(a.steps, "--steps", 1, 1L << 40, &steps)) ||
        (a.seq && parse_int(a.seq, "--seq-len", 3, 1 << 20, &seq)) ||
        (a.ckpt_every && parse_int(a.ckpt_every, "--checkpoint-every", 1, 1L << 40, &ckpt_every)) ||
        (a.keep && parse_int(a.keep, "--keep", 1, 1 << 20, &keep)) ||
        (a.eval_every && parse_int(a.eval_every, "--eval-every", 1, 1L << 40, &eval_every)) ||
        (a.eval_samples && parse_int(a.eval_samples, "--eval-samples", 1, 1L << 30, &eval_samples)) ||
        (a.threads && parse_int(a.threads, "--threads", 0, 1024, &threads)) ||
        (a.seed && parse_int(a.seed, "--seed", 0, INT64_MAX, &seed)) ||
        (a.warmup && parse_int(a.warmup, "--warmup", 0, 1L << 30, &warmup)))
        START_FAIL(2);
    if ((a.ckpt_every || a.resume || a.keep || a.overwrite) && !a.ckpt_dir) {
        die("--checkpoint-every, --keep, --resume and --overwrite need --checkpoint-dir");
        START_FAIL(2);
    }
    if (a.resume && a.overwrite) {
        die("--resume (continue the folder's checkpoints) and --overwrite (replace them by a "
            "new run's) exclude each other");
        START_FAIL(2);
    }
    if (a.resume && a.resume_from) {
        die("--resume (the newest checkpoint in --checkpoint-dir) and --resume-from DIR "
            "(that one) exclude each other");
        START_FAIL(2);
    }
    if (!!a.eval_data != !!a.eval_every) {
        die("--eval-data and --eval-every go together");
        START_FAIL(2);
    }
    if (strcmp(a.data, "synthetic") == 0 || strncmp(a.data, "synthetic:", 10) == 0) {
        long v = 0;
        if (a.data[9] == ':' && parse_int(a.data + 10, "synthetic seed", 0, INT64_MAX, &v))
            START_FAIL(2);
        synth_seed = (uint64_t)v;
    } else {
        data_dir = a.data;
    }

    /* everything is validated before anything is allocated or written */
    if (a.config) {
        if (!(cfg_text = read_text(a.config))) {
            die("%s", zt_last_error());
            START_FAIL(1);
        }
        rc = zt_train_config_parse(cfg_text, a.config, world, steps, &tc);
    } else {
        cfg_text = strdup("{\"train_micro_batch_size_per_gpu\": 8}\n");
        rc = cfg_text ? zt_train_config_parse(cfg_text, "(default config)", world, steps, &tc)
                      : ZT_E_NOMEM;
    }
    if (rc < 0) {
        die("%s", zt_last_error());
        START_FAIL(1);
    }
    rc = 1;
    ts = zt_train_config_settings(tc);
    agree_timeout = ts->collective_timeout;
    st.seed = seed >= 0 ? (uint64_t)seed : ts->seed_given ? ts->seed : 42;

    if (ts->activation_checkpointing && ts->recompute == ZT_RECOMPUTE_NONE)
        fprintf(stderr, "zerotrain: notice: the activation_checkpointing section does not turn "
                        "recomputation on: set \"zerotrain\": {\"recompute\": \"full\"}\n");
    if (data_dir && zt_token_data_open(data_dir, 1, &data) < 0) {
        die("%s", zt_last_error());
        START_FAIL(1);
    }
    if (a.eval_data && zt_token_data_open(a.eval_data, 1, &eval_data) < 0) {
        die("%s", zt_last_error());
        START_FAIL(1);
    }

    zt_config_init(&cfg);
    zt_train_config_apply(tc, &cfg); /* every field the config file sets */
    /* what the command line, the model and the data decide */
    {
        struct stat sb;
        if (stat(a.model, &sb) != 0)
            cfg.model_preset = a.model;
        else if (S_ISREG(sb.st_mode)) /* a config.json alone */
            cfg.model_config = a.model;
        else if (S_ISDIR(sb.st_mode))
            cfg.model_dir = a.model;
        else {
            die("--model %s: not a regular file (a config.json) nor a folder (%s)", a.model,
                S_ISFIFO(sb.st_mode) ? "a FIFO" : "a device or socket");
            START_FAIL(1);
        }
    }
    is_t5 = model_is_t5(a.model);
    if (data) {
        zt_token_data_info di;
        zt_token_data_info_get(data, &di);
        /* a T5 preset: the tokenizer's vocabulary and span corruption's sentinels */
        cfg.vocab_size = di.tok.vocab_size + (cfg.model_preset && is_t5 ? ZT_SPAN_EXTRA_IDS : 0);
    }
    cfg.seed = st.seed;
    if (threads >= 0)
        cfg.threads = (int)threads;
    {   /* mpirun binds each rank to one core by default when ranks <= 2: threads beyond
         * the cores a rank may run on only take turns */
        cpu_set_t cs;
        int want = cfg.threads > 0 ? cfg.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (sched_getaffinity(0, sizeof cs, &cs) == 0 && CPU_COUNT(&cs) < want && rank == 0)
            fprintf(stderr, "zerotrain: warning: this rank may run on %d core%s but uses %d "
                            "threads; give mpirun --bind-to none (or --map-by slot:PE=%d)\n",
                    CPU_COUNT(&cs), CPU_COUNT(&cs) == 1 ? "" : "s", want, want);
    }
    /* T5's own optimizer when the config names none: Adafactor with transformers' defaults
     * (the config's, which without an optimizer section are zt_config_init's); with a
     * scheduler its T5 recipe: at the scheduler's lr, no relative steps */
    if (is_t5 && !ts->optimizer_given) {
        cfg.optimizer = ZT_OPT_ADAFACTOR;
        cfg.relative_step = cfg.scale_parameter = ts->scheduler == ZT_SCHED_CONSTANT;
        if (cfg.relative_step)
            cfg.lr = 0.0f; /* (relative steps take no lr) */
        cfg.weight_decay = 0.0f;
        if (rank == 0)
            fprintf(stderr, "zerotrain: notice: no optimizer section: T5 trains with Adafactor "
                            "(%s)\n", cfg.relative_step ? "relative steps, transformers' "
                            "defaults" : "the scheduler's lr, relative_step and "
                            "scale_parameter false");
    }
    if (a.check_coll)
        cfg.check_collectives = 1;
    if (a.profile)
        cfg.recompute_profile = 1;
    if (ts->recompute == ZT_RECOMPUTE_EVERY_K)
        snprintf(rc_name, sizeof rc_name, "every-k:%d", ts->recompute_k);
    else
        snprintf(rc_name, sizeof rc_name, "%s",
                 (const char *[]){"none", "full", "selective", "every-k", "auto"}[ts->recompute]);
    cfg.plan_seq_len = (int)seq; /* (plan_micro_batch: the config's micro batch) */
    if (a.timeout) {
        double tmo;
        if (parse_float(a.timeout, "--collective-timeout", 0, 1e9, &tmo))
            START_FAIL(2);
        cfg.collective_timeout = tmo;
        agree_timeout = tmo;
    }
    {   /* every output can be written and the checkpoint folder is this run's, before any
         * work: rank 0 checks them and holds the folder's lock for the run */
        int mode = a.overwrite ? CKPTDIR_OVERWRITE
                   : a.resume || a.resume_from ? CKPTDIR_RESUME : CKPTDIR_NEW;
        if (outputs_check(a.save, a.metrics, a.summary, rank, cd_msg, sizeof cd_msg) < 0 ||
            ckptdir_open(a.ckpt_dir, mode, rank, &cd, cd_msg, sizeof cd_msg) < 0) {
            die("%s", cd_msg);
            START_FAIL(1);
        }
    }
agree:
    /* Every rank, whatever happened above: its status, then its settings against rank 0's
     * (a rank that failed alone would leave the others waiting in their first collective;
     * ranks given different settings would train silently apart or mismatch collectives) */
    {
        char *settings = start_rc == 0 ? run_settings(&a, ts, steps, seq, st.seed, data_dir,
                                                      synth_seed, eval_every, eval_samples,
                                                      ckpt_every, keep, warmup)
                                       : NULL;
        int arc = zt_ranks_agree(MPI_COMM_WORLD, start_rc ? ZT_E_INVAL : 0, die_last(),
                                 settings, agree_timeout);
        free(settings);
        if (start_rc) {
            rc = start_rc;
            goto done;
        }
        if (arc < 0) {
            if (rank == 0)
                die("%s", zt_last_error());
            rc = 1;
            goto done;
        }
    }
    if (zt_engine_create(&cfg, MPI_COMM_WORLD, &e) < 0) {
        die("%s", zt_last_error());
        goto done;
    }
    zt_engine_model_info(e, &mi);
    if (mi.max_positions > 0 && seq > mi.max_positions) {
        die("--seq-len %ld exceeds the model's max_position_embeddings %d", seq, mi.max_positions);
        goto done;
    }
    if (source_create(data, &mi, (int)seq, data ? st.seed : st.seed ^ synth_seed, &src) < 0 ||
        (eval_data && source_create(eval_data, &mi, (int)seq, 1234, &eval_src) < 0)) {
        die("%s", zt_last_error());
        goto done;
    }
    if (a.resume_from) { /* that checkpoint, which must verify */
        int ok = zt_checkpoint_load(e, a.resume_from, &st) == 0;
        if (!ok)
            die("%s", zt_engine_last_error(e));
        if (!all_ok(e, ok))
            goto done;
        snprintf(last_ckpt, sizeof last_ckpt, "%s", a.resume_from);
        if (rank == 0)
            fprintf(stderr, "zerotrain: resumed from %s at step %" PRId64 "\n", a.resume_from,
                    st.step);
    }
    if (a.resume) {
        /* rank 0 looks first (and moves corrupt checkpoints aside), then the others */
        int found = rank == 0 ? zt_checkpoint_find_latest(a.ckpt_dir, resume_path,
                                                          sizeof resume_path) : 0;
        if (found < 0)
            die("%s", zt_last_error());
        if (!all_ok(e, found >= 0)) /* (also: the others wait for rank 0's look) */
            goto done;
        if (rank != 0 && (found = zt_checkpoint_find_latest(a.ckpt_dir, resume_path,
                                                             sizeof resume_path)) < 0)
            die("%s", zt_last_error());
        if (!all_ok(e, found >= 0))
            goto done;
        {   /* every rank found the same one (or none) */
            double mine[2] = {found, found > 0 ? (double)(XXH64(resume_path, strlen(resume_path),
                                                                 0) >> 12) : 0.0};
            double *all = malloc(sizeof *all * 2 * (size_t)world);
            int same = all != NULL;
            if (!all || zt_engine_gather_f64(e, mine, 2, all) < 0) {
                free(all);
                die("%s", all ? zt_engine_last_error(e) : "out of memory");
                goto done;
            }
            for (int r = 0; r < world; r++)
                same &= all[2 * r] == mine[0] && all[2 * r + 1] == mine[1];
            free(all);
            if (!same) {
                die("the ranks found different checkpoints in %s (is it on storage every rank "
                    "sees alike?)", a.ckpt_dir);
                goto done;
            }
        }
        if (found == 0 && rank == 0) {
            fprintf(stderr, "zerotrain: notice: no valid checkpoint in %s; starting from "
                            "scratch\n", a.ckpt_dir);
        } else if (found > 0) {
            uint64_t want_seed = st.seed;
            int ok = zt_checkpoint_load(e, resume_path, &st) == 0;
            if (!ok)
                die("%s", zt_engine_last_error(e));
            if (!all_ok(e, ok))
                goto done;
            snprintf(last_ckpt, sizeof last_ckpt, "%s", resume_path);
            if (st.seed != want_seed && rank == 0)
                fprintf(stderr, "zerotrain: notice: continuing with the checkpoint's seed %" PRIu64
                                " (not %" PRIu64 ")\n", st.seed, want_seed);
            if (rank == 0)
                fprintf(stderr, "zerotrain: resumed from %s at step %" PRId64 "\n",
                        resume_path, st.step);
        }
    }
    {   /* what the run trains with, kept in its checkpoints; a resume that changed it says so
         * (it fails only out of memory, as the allocations below) */
        char id[128];
        data_identity(data_dir, synth_seed, id, sizeof id);
        if (ckptdir_run_info(e, rank, seq, ts->train_batch_size, id, data_dir, cd_msg,
                             sizeof cd_msg) < 0) {
            die("%s", cd_msg);
            goto done;
        }
    }

    int gas = ts->grad_accum_steps, micro = ts->micro_batch_size;
    size_t cells = (size_t)micro * (size_t)seq, lcells = (size_t)micro * (size_t)src.Tl;
    if (!(bufs = calloc((size_t)gas, sizeof *bufs)) ||
        !(batches = calloc((size_t)gas, sizeof *batches))) {
        die("out of memory");
        goto done;
    }
    for (int k = 0; k < gas; k++)
        if (batch_alloc(&bufs[k], cells, lcells) < 0) {
            die("out of memory");
            goto done;
        }
    if (rank == 0 && zt_engine_memory_plan(e)[0])
        fprintf(stderr, "%s\n", zt_engine_memory_plan(e));
    if (rank == 0 && zt_engine_recompute_plan(e)[0])
        fprintf(stderr, "%s\n", zt_engine_recompute_plan(e));
    if (rank == 0) {
        zt_engine_report er;
        zt_engine_report_get(e, &er);
        fprintf(stderr, "model state per rank predicted (stage %d, %d ranks): %.1f MiB by the "
                        "formula + %.1f MiB of buffers\n",
                er.zero_stage, er.world_size, er.predicted_state_bytes / 1048576.0,
                er.buffer_bytes / 1048576.0);
    }
    if (rank == 0)
        fprintf(stderr, "zerotrain %s: %s L%d H%d A%d V%d, %zu parameters; steps %" PRId64
                        "..%ld, batch %d = %d x %d x %d ranks, seq %ld, %s\n",
                zt_version(), strcmp(mi.model_type, "t5") == 0 ? "T5" : "BERT", mi.num_layers,
                mi.hidden_size, mi.num_heads, mi.vocab_size,
                mi.num_parameters, st.step + 1, steps, ts->train_batch_size, micro, gas, world,
                seq, data_dir ? data_dir : "synthetic data");
    if (rank == 0 && strcmp(mi.model_type, "t5") != 0 &&
        isfinite(unigram = unigram_loss(data, mi.vocab_size)))
        fprintf(stderr, "unigram baseline %.4f: the loss of predicting each masked token from "
                        "its frequency in the %s alone; a loss below it is learning more than "
                        "counting\n", unigram, data ? "corpus" : "(uniform) synthetic ids");

    /* (opened, or truncated, only now that the run has passed its start-up checks) */
    if (a.metrics && rank == 0 && !(metrics = fopen(a.metrics, st.step > 0 ? "a" : "w"))) {
        die("%s: cannot open: %s", a.metrics, strerror(errno));
        goto done;
    }
    double t_start = now(), t_last = t_start;
    int64_t first_step = st.step;
    if (stats_init(&stats, steps - first_step, (int)warmup) < 0) {
        die("out of memory");
        goto done;
    }
    if (warmup == 0) { /* measure from the first step */
        zt_engine_report er0;
        zt_engine_report_get(e, &er0);
        stats_comm_mark(&stats, &er0);
        if (a.profile) {
            zt_profile_reset();
            zt_profile_enable(1);
        }
    }
    uint64_t tokens_total = 0;
    double loss = 0.0, shown_sum = 0.0; /* (the finite losses since the last progress line) */
    int shown_n = 0;
    for (; st.step < steps; ) {
        double t0 = now(), lr = zt_train_config_lr(tc, st.step), loss_sum = 0.0, *evp = NULL,
               ev = 0.0;
        int64_t labels = 0;
        zt_step_info si;
        uint64_t base = st.samples + (uint64_t)rank * (uint64_t)micro * (uint64_t)gas;
        for (int k = 0; k < gas; k++) {
            if (source_fill(&src, base + (uint64_t)k * (uint64_t)micro, micro, &bufs[k],
                            &batches[k]) < 0) {
                die("data: %s", zt_last_error());
                goto done;
            }
            for (size_t i = 0; i < lcells; i++)
                labels += bufs[k].labels[i] != -100;
        }
        /* the step's mean is over the labelled tokens of every rank */
        if (zt_engine_sum_i64(e, &labels, 1) < 0) {
            die("step %" PRId64 ": %s", st.step + 1, zt_engine_last_error(e));
            goto done;
        }
        zt_engine_zero_grad(e);
        double step_flops = 0.0;
        for (int k = 0; k < gas; k++) {
            zt_fb_result r;
            zt_batch b = batches[k];
            b.label_count = labels;
            if (zt_engine_forward_backward(e, &b, 0, &r) < 0) {
                die("step %" PRId64 ": %s", st.step + 1, zt_engine_last_error(e));
                goto done;
            }
            loss_sum += r.loss_sum;
            step_flops += r.flops;
        }
        if (zt_engine_step(e, (float)lr, &si) < 0) {
            die("step %" PRId64 ": %s", st.step + 1, zt_engine_last_error(e));
            goto done;
        }
        lr = si.lr; /* (Adafactor's relative step size) */
        if (world > 1) { /* loss sums added in rank order: the same on every rank and run */
            double *all = malloc(sizeof(double) * (size_t)world);
            if (!all || zt_engine_gather_f64(e, &loss_sum, 1, all) < 0) {
                die("step %" PRId64 ": gathering the loss: %s", st.step + 1,
                    all ? zt_engine_last_error(e) : "out of memory");
                free(all);
                goto done;
            }
            loss_sum = 0.0;
            for (int r = 0; r < world; r++)
                loss_sum += all[r];
            free(all);
        }
        /* the data moves on either way; a skipped step leaves the step count as it was */
        st.samples += (uint64_t)ts->train_batch_size;
        loss = labels ? loss_sum / (double)labels : 0.0;
        uint64_t step_tokens = (uint64_t)ts->train_batch_size * (uint64_t)seq;
        tokens_total += step_tokens;
        if (si.skipped) {
            char where[200] = "";
            skipped_total++;
            skipped_run++;
            if (si.nonfinite_unit >= 0)
                snprintf(where, sizeof where, "; the first unit with a non-finite gradient is "
                         "%d \"%s\"", si.nonfinite_unit, zt_engine_unit_name(e, si.nonfinite_unit));
            else
                snprintf(where, sizeof where, "; the gradients are finite, the loss is not");
            if (rank == 0)
                fprintf(stderr, "%szerotrain: warning: step %" PRId64 " skipped: loss %g, "
                        "gradient norm %g%s (%" PRId64 " in a row, %" PRId64 " in all; the "
                        "parameters and optimizer state are unchanged)\n", tty ? "\n" : "",
                        st.step + 1, isnan(loss) ? NAN : loss, isnan(si.grad_norm) ? NAN :
                        si.grad_norm, where, skipped_run, skipped_total);
            if (metrics && rank == 0)
                write_metrics(metrics, st.step + 1, loss, lr, si.grad_norm, step_tokens,
                              now() - t0, NULL, 1, skipped_total);
            if (skipped_run >= ts->max_skipped_steps) {
                die("step %" PRId64 ": %" PRId64 " steps in a row were skipped (their loss or "
                    "gradient norm was not finite; zerotrain.max_skipped_steps %d): the run "
                    "diverged. The last good checkpoint is %s", st.step + 1, skipped_run,
                    ts->max_skipped_steps,
                    last_ckpt[0] ? last_ckpt : "none (no checkpoint was written or resumed)");
                goto done;
            }
            continue;
        }
        skipped_run = 0;
        st.step++;
        if ((eval_src.mlm || eval_src.span) && st.step % eval_every == 0) {
            uint64_t ns = source_samples(&eval_src);
            int64_t counted = 0;
            if (evaluate(e, &eval_src, micro, ns < (uint64_t)eval_samples ? ns : (uint64_t)eval_samples,
                         &bufs[0], rank, world, &ev, &counted))
                goto done;
            evp = &ev;
            if (rank == 0 && counted)
                fprintf(stderr, "%sstep %" PRId64 "  eval_loss %.4f\n", tty ? "\n" : "",
                        st.step, ev);
            else if (rank == 0)
                fprintf(stderr, "%sstep %" PRId64 "  eval_loss none: the evaluation samples "
                        "have no labelled token\n", tty ? "\n" : "", st.step);
        }
        double t1 = now();
        if (stats_step(&stats, t1 - t0, step_flops, a.profile)) {
            zt_engine_report er0;
            zt_engine_report_get(e, &er0);
            stats_comm_mark(&stats, &er0);
        }
        if (metrics && rank == 0)
            write_metrics(metrics, st.step, loss, lr, si.grad_norm, step_tokens, t1 - t0, evp,
                          0, skipped_total);
        if (isfinite(loss)) {
            shown_sum += loss;
            shown_n++;
        }
        int print_now = tty ? (t1 - t_last > 0.25 || st.step == steps)
                            : (st.step % ts->steps_per_print == 0 || st.step == steps);
        if (print_now && rank == 0) { /* the mean loss since the last line, as HF logs it */
            double el = t1 - t_start, tps = tokens_total / (el > 1e-9 ? el : 1e-9);
            double eta = (double)(steps - st.step) * el / (double)(st.step - first_step);
            progress(tty, st.step, steps, shown_n ? shown_sum / shown_n : loss, unigram, lr,
                     tps, eta);
            t_last = t1;
            shown_sum = 0.0;
            shown_n = 0;
        }
        if (a.ckpt_dir && ckpt_every && st.step % ckpt_every == 0 && st.step < steps) {
            if (zt_checkpoint_save(e, a.ckpt_dir, &st, cfg_text, (int)keep) < 0) {
                die("%s", zt_engine_last_error(e));
                goto done;
            }
            snprintf(last_ckpt, sizeof last_ckpt, "%s/step-%" PRId64, a.ckpt_dir, st.step);
            ckptdir_saved(cd, e);
        }
    }
    if (tty && rank == 0)
        fputc('\n', stderr);
    /* (resumed from elsewhere with no step to take: saved again, laid out for this world
     * size and stage) */
    if (a.ckpt_dir && (st.step > first_step || a.resume_from)) {
        if (zt_checkpoint_save(e, a.ckpt_dir, &st, cfg_text, (int)keep) < 0) {
            die("%s", zt_engine_last_error(e));
            goto done;
        }
        ckptdir_saved(cd, e);
    }
    zt_engine_report er; /* before the save, whose stage-3 gathers are not per step */
    zt_engine_report_get(e, &er);
    zt_profile_enable(0);
    if (rank == 0)
        print_recompute(e, &mi, cfg.recompute_profile && st.step > first_step);
    if (a.profile && rank == 0) {
        if (stats.n > 0)
            stats_print_profile(stderr, &stats);
        else
            fprintf(stderr, "zerotrain: notice: --profile: no step after the %ld warm-up "
                            "steps\n", warmup);
    }
    if (a.summary) {
        static const char *const dev[] = {"none", "cpu", "nvme"};
        char off[64] = "none";
        zt_engine_report erx;
        zt_engine_report_get(e, &erx);
        if (erx.offload_optimizer || erx.offload_param)
            snprintf(off, sizeof off, "optimizer:%s+grads:%s+params:%s",
                     dev[erx.offload_optimizer % 3],
                     dev[erx.offload_gradients ? erx.offload_optimizer % 3 : 0],
                     dev[erx.offload_param % 3]);
        stats_context sx = {a.model, mi.num_parameters, cfg.threads, micro, gas,
                            ts->train_batch_size, (int)seq, off, rc_name,
                            ts->optimizer == ZT_OPT_ADAMW8BIT  ? "adamw8bit"
                            : ts->optimizer == ZT_OPT_ADAFACTOR ? "adafactor" : "adamw"};
        if (stats_write_summary(a.summary, &stats, &sx, e, rank, world) < 0) {
            die("%s: cannot write the summary", a.summary);
            goto done;
        }
    }
    if (a.save) { /* collective: every rank takes part, rank 0 writes */
        if (zt_engine_save_model(e, a.save) < 0) {
            die("%s", zt_engine_last_error(e));
            goto done;
        }
        if (rank == 0)
            fprintf(stderr, "saved the model to %s\n", a.save);
    }
    if (st.step > first_step) {
        int64_t steps_run = st.step - first_step;
        if (rank == 0)
            fprintf(stderr,
                    "model state per rank (stage %d, %d ranks): measured %zu bytes; formula %zu "
                    "+ buffers %zu = %zu\n"
                    "optimizer state per rank: %zu bytes, %.3f per parameter updated\n"
                    "collectives per step: reduce-scatter %.0f bytes, all-gather %.0f bytes "
                    "(%.2f x the %zu parameter bytes; schedule %.2f x, textbook %.0f x); "
                    "waited %.3f s of %.3f s in flight (%s progress)\n",
                    er.zero_stage, er.world_size, er.measured_state_bytes,
                    er.predicted_state_bytes, er.buffer_bytes,
                    er.predicted_state_bytes + er.buffer_bytes, er.optimizer_state_bytes,
                    er.optimizer_bytes_per_param,
                    (double)er.coll_bytes[0] / (double)steps_run,
                    (double)er.coll_bytes[1] / (double)steps_run,
                    (double)(er.coll_bytes[0] + er.coll_bytes[1]) / (double)steps_run /
                        (double)(er.params * 4),
                    er.params * 4, er.traffic_schedule, er.traffic_theory,
                    (er.coll_seconds[0] + er.coll_seconds[1]) / (double)steps_run,
                    (er.coll_flight[0] + er.coll_flight[1]) / (double)steps_run,
                    er.progress == ZT_PROGRESS_THREAD ? "thread" : "poll");
        if (rank == 0 && er.zero_stage >= 3)
            fprintf(stderr, "stage 3: at most %.1f MiB of parameters gathered at once\n",
                    er.gathered_peak / 1048576.0);
    }
    if (rank == 0 && st.step == first_step)
        fprintf(stderr, "zerotrain: step %" PRId64 " already reached; nothing to train\n", st.step);
    else if (rank == 0)
        print_memory(stderr);
    rc = 0;
done:
    if (metrics)
        fclose(metrics);
    stats_free(&stats);
    for (int k = 0; bufs && k < ts->grad_accum_steps; k++)
        batch_release(&bufs[k]);
    free(bufs);
    source_destroy(&src);
    source_destroy(&eval_src);
    free(batches);
    zt_engine_destroy(e);
    ckptdir_close(cd, rc != 0);
    zt_token_data_close(data);
    zt_token_data_close(eval_data);
    zt_train_config_destroy(tc);
    free(cfg_text);
    return rc;
}
