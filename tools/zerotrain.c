/* zerotrain.c - the command-line tool: grad, train, inspect, version. Built only on the
 * public API in zerotrain.h; it decides what to print and the exit status. Reads small
 * JSON (step.json) with cJSON itself. */

#include "zerotrain.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "zerotrain";

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: error: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

static void log_to_stderr(int level, const char *msg, void *user)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)user;
    fprintf(stderr, "%s: %s: %s\n", prog, names[level & 3], msg);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zerotrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  grad     --model DIR --batch FILE --out FILE [--step STEP_JSON] [--threads N]\n"
            "           one forward+backward of a Hugging Face BERT folder on a batch file;\n"
            "           writes loss, logits, grad.<name> (and adamw.<name> with --step)\n"
            "  train    --model DIR|PRESET [--steps N] [--batch-size B] [--seq-len T]\n"
            "           [--lr LR] [--warmup K] [--clip X] [--seed S] [--vocab V] [--threads N]\n"
            "           [--print-every K] [--save-model DIR]\n"
            "           masked-LM training on synthetic sequences (presets: bert-tiny,\n"
            "           bert-mini, bert-small, bert-medium, bert-base, bert-large)\n"
            "  inspect  FILE      list the tensors of a safetensors file\n"
            "  version            print the version\n");
}

/* ---- argument helpers ---------------------------------------------------------------- */

typedef struct opt { const char *name; const char **value; } opt;

/* Parses --name value pairs; returns 0 or prints one error. */
static int parse_opts(int argc, char **argv, const opt *opts, int n)
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

static int parse_int(const char *s, const char *what, long lo, long hi, long *out)
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

static int parse_float(const char *s, const char *what, double lo, double hi, double *out)
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

/* ---- grad ---------------------------------------------------------------------------- */

typedef struct batch_file {
    int64_t *ids, *mask, *tt, *labels;
    int B, T;
} batch_file;

static void batch_free(batch_file *b)
{
    free(b->ids);
    free(b->mask);
    free(b->tt);
    free(b->labels);
}

static int batch_tensor(zt_safetensors *f, const char *path, const char *name, int required,
                        batch_file *b, int64_t **out)
{
    zt_tensor_info t;
    *out = NULL;
    if (zt_safetensors_find(f, name, &t) < 0)
        return required ? die("%s: batch has no tensor \"%s\"", path, name) : 0;
    if (t.dtype != ZT_I64)
        return die("%s: tensor \"%s\" has dtype %s, expected I64", path, name,
                   zt_dtype_name(t.dtype));
    if (t.ndim != 2 || t.shape[0] < 1 || t.shape[1] < 1 || t.shape[0] > INT32_MAX ||
        t.shape[1] > INT32_MAX)
        return die("%s: tensor \"%s\" must have shape [batch, seq] with both >= 1", path, name);
    if (b->B == 0) {
        b->B = (int)t.shape[0];
        b->T = (int)t.shape[1];
    } else if (t.shape[0] != b->B || t.shape[1] != b->T) {
        return die("%s: tensor \"%s\" has shape [%lld, %lld], input_ids has [%d, %d]", path,
                   name, (long long)t.shape[0], (long long)t.shape[1], b->B, b->T);
    }
    if (!(*out = malloc(t.nbytes)))
        return die("out of memory reading %s", path);
    memcpy(*out, t.data, t.nbytes);
    return 0;
}

static int read_batch(const char *path, batch_file *b)
{
    zt_safetensors *f;
    int rc;
    memset(b, 0, sizeof *b);
    if (zt_safetensors_open(path, &f) < 0)
        return die("%s", zt_last_error());
    rc = batch_tensor(f, path, "input_ids", 1, b, &b->ids) ||
         batch_tensor(f, path, "labels", 1, b, &b->labels) ||
         batch_tensor(f, path, "attention_mask", 0, b, &b->mask) ||
         batch_tensor(f, path, "token_type_ids", 0, b, &b->tt);
    zt_safetensors_close(f);
    if (rc)
        batch_free(b);
    return rc;
}

/* step.json: {"lr":..., "betas":[b1,b2], "eps":..., "weight_decay":...} */
static int read_step(const char *path, zt_config *cfg)
{
    FILE *f = fopen(path, "rb");
    char buf[65536];
    size_t n;
    cJSON *o, *v;
    int rc = 0;
    if (!f)
        return die("%s: cannot open: %s", path, strerror(errno));
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!(o = cJSON_Parse(buf)) || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return die("%s: not a JSON object", path);
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "optimizer");
    if (v && (!cJSON_IsString(v) || strcmp(v->valuestring, "AdamW") != 0))
        rc = die("%s: \"optimizer\" must be \"AdamW\"", path);
#define NUM(key, dst)                                                                          \
    if (!rc && (v = cJSON_GetObjectItemCaseSensitive(o, key))) {                               \
        if (!cJSON_IsNumber(v))                                                                \
            rc = die("%s: \"%s\" must be a number", path, key);                                \
        else                                                                                   \
            dst = (float)v->valuedouble;                                                       \
    }
    NUM("lr", cfg->lr)
    NUM("eps", cfg->eps)
    NUM("weight_decay", cfg->weight_decay)
#undef NUM
    v = cJSON_GetObjectItemCaseSensitive(o, "betas");
    if (!rc && v) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 ||
            !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(v, 1)))
            rc = die("%s: \"betas\" must be [beta1, beta2]", path);
        else {
            cfg->beta1 = (float)cJSON_GetArrayItem(v, 0)->valuedouble;
            cfg->beta2 = (float)cJSON_GetArrayItem(v, 1)->valuedouble;
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "steps");
    if (!rc && v && (!cJSON_IsNumber(v) || v->valuedouble != 1))
        rc = die("%s: only \"steps\": 1 is supported", path);
    cJSON_Delete(o);
    cfg->decay_all = 1; /* the reference step decays every parameter */
    return rc;
}

static int cmd_grad(int argc, char **argv)
{
    const char *model = NULL, *batch = NULL, *out = NULL, *step = NULL, *threads = NULL;
    opt opts[] = {{"--model", &model}, {"--batch", &batch}, {"--out", &out},
                  {"--step", &step}, {"--threads", &threads}};
    zt_config cfg;
    zt_engine *e = NULL;
    batch_file bf;
    zt_fb_result res;
    zt_tensor_view *views = NULL;
    float **bufs = NULL;
    int np, nv = 0, rc = 1;
    long nt = 0;
    if (parse_opts(argc, argv, opts, 5))
        return 2;
    if (!model || !batch || !out)
        return die("grad needs --model DIR, --batch FILE and --out FILE"), 2;
    if (threads && parse_int(threads, "--threads", 1, 1024, &nt))
        return 2;
    zt_config_init(&cfg);
    cfg.model_dir = model;
    cfg.threads = (int)nt;
    if (step && read_step(step, &cfg))
        return 1;
    if (read_batch(batch, &bf))
        return 1;
    if (zt_engine_create(&cfg, MPI_COMM_NULL, &e) < 0) {
        die("%s", zt_last_error());
        goto done;
    }
    zt_batch b = {bf.B, bf.T, bf.ids, bf.mask, bf.tt, bf.labels, 0};
    if (zt_engine_forward_backward(e, &b, 1, &res) < 0) {
        die("%s: %s", batch, zt_engine_last_error(e));
        goto done;
    }
    np = zt_engine_param_count(e);
    /* loss, logits, a grad (and maybe an alias grad) per parameter, adamw per parameter */
    views = calloc((size_t)(2 + 3 * np), sizeof *views);
    bufs = calloc((size_t)(2 * np), sizeof *bufs);
    if (!views || !bufs) {
        die("out of memory");
        goto done;
    }
    views[nv++] = (zt_tensor_view){"loss", ZT_F32, 1, {1}, &res.loss};
    {
        const float *lg;
        int64_t shape[3];
        zt_engine_logits(e, &lg, shape);
        views[nv++] = (zt_tensor_view){"logits", ZT_F32, 3, {shape[0], shape[1], shape[2]}, lg};
    }
    for (int i = 0; i < np; i++) {
        zt_param_info pi;
        zt_engine_param_get(e, i, &pi);
        if (!(bufs[i] = malloc(pi.numel * sizeof(float)))) {
            die("out of memory");
            goto done;
        }
        zt_engine_read_grad(e, pi.name, bufs[i], pi.numel);
        for (int alias = 0; alias < 2; alias++) {
            const char *nm = alias ? pi.alias : pi.name;
            char *full;
            if (!nm || asprintf(&full, "grad.%s", nm) < 0)
                continue;
            views[nv] = (zt_tensor_view){full, ZT_F32, pi.ndim, {0}, bufs[i]};
            memcpy(views[nv].shape, pi.shape, sizeof pi.shape);
            nv++;
        }
    }
    if (step) {
        if (zt_engine_step(e, cfg.lr, NULL) < 0) {
            die("%s", zt_engine_last_error(e));
            goto done;
        }
        for (int i = 0; i < np; i++) {
            zt_param_info pi;
            char *full;
            zt_engine_param_get(e, i, &pi);
            if (!(bufs[np + i] = malloc(pi.numel * sizeof(float))) ||
                asprintf(&full, "adamw.%s", pi.name) < 0) {
                die("out of memory");
                goto done;
            }
            zt_engine_read_param(e, pi.name, bufs[np + i], pi.numel);
            views[nv] = (zt_tensor_view){full, ZT_F32, pi.ndim, {0}, bufs[np + i]};
            memcpy(views[nv].shape, pi.shape, sizeof pi.shape);
            nv++;
        }
    }
    if (zt_safetensors_write(out, views, nv, NULL, 0) < 0) {
        die("%s", zt_last_error());
        goto done;
    }
    printf("loss %.8g over %" PRId64 " labelled tokens; wrote %d tensors to %s\n", res.loss,
           res.n_labels, nv, out);
    rc = 0;
done:
    for (int i = 2; views && i < nv; i++)
        free((char *)views[i].name);
    for (int i = 0; bufs && i < 2 * np; i++)
        free(bufs[i]);
    free(views);
    free(bufs);
    zt_engine_destroy(e);
    batch_free(&bf);
    return rc;
}

/* ---- inspect ------------------------------------------------------------------------- */

static int cmd_inspect(int argc, char **argv)
{
    zt_safetensors *f;
    size_t total = 0;
    int n;
    if (argc != 1)
        return die("inspect takes one file"), 2;
    if (zt_safetensors_open(argv[0], &f) < 0)
        return die("%s", zt_last_error());
    n = zt_safetensors_count(f);
    printf("%-64s %-5s %-22s %12s\n", "name", "dtype", "shape", "bytes");
    for (int i = 0; i < n; i++) {
        zt_tensor_info t;
        char shape[128] = "[";
        zt_safetensors_get(f, i, &t);
        for (int k = 0; k < t.ndim; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                     k ? ", " : "", (long long)t.shape[k]);
        strncat(shape, "]", sizeof shape - strlen(shape) - 1);
        printf("%-64s %-5s %-22s %12zu\n", t.name, zt_dtype_name(t.dtype), shape, t.nbytes);
        total += t.nbytes;
    }
    printf("%d tensors, %zu bytes of data\n", n, total);
    zt_safetensors_close(f);
    return 0;
}

/* ---- train --------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Synthetic MLM batch: each row is a segment of Zipf-distributed token ids (ids >= 5)
 * followed by the same segment again, so a model can lower the loss first by learning the
 * token frequencies and then by copying from the other half. 15% of positions are
 * labelled: 80% replaced by [MASK] (id 4), 10% by a random id, 10% kept. Row r depends
 * only on (seed, global sample index). cdf: Zipf(1) over V - 5 ids. */
static void synth_batch(int64_t *ids, int64_t *labels, int B, int T, int V, const double *cdf,
                        uint64_t seed, uint64_t first_sample)
{
    int64_t span = V - 5, half = (T + 1) / 2;
    for (int b = 0; b < B; b++) {
        uint64_t st = seed * 0x100000001B3ull ^ (first_sample + (uint64_t)b);
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            if (t < half) {
                double u = (double)(splitmix(&st) >> 11) * 0x1p-53;
                int64_t lo = 0, hi = span - 1;
                while (lo < hi) { /* first rank whose cdf exceeds u */
                    int64_t mid = (lo + hi) / 2;
                    if (cdf[mid] > u) hi = mid; else lo = mid + 1;
                }
                ids[i] = 5 + lo;
            } else {
                ids[i] = ids[i - half];
            }
        }
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            uint64_t r = splitmix(&st);
            labels[i] = -100;
            if (r % 1000 < 150) {
                uint64_t how = (r / 1000) % 10;
                labels[i] = ids[i];
                if (how < 8)
                    ids[i] = 4;
                else if (how < 9)
                    ids[i] = 5 + (int64_t)((r >> 20) % (uint64_t)span);
            }
        }
    }
}

static double *zipf_cdf(int V)
{
    int64_t n = V - 5;
    double *c = malloc(sizeof *c * (size_t)n), s = 0;
    if (!c)
        return NULL;
    for (int64_t k = 0; k < n; k++)
        c[k] = (s += 1.0 / (double)(k + 1));
    for (int64_t k = 0; k < n; k++)
        c[k] /= s;
    return c;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_memory(void)
{
    zt_mem_report r;
    zt_memory_report(&r);
    fprintf(stderr, "memory (MiB)   ");
    for (int c = 0; c < ZT_MEM_NCAT; c++)
        fprintf(stderr, " %s %.1f/%.1f", zt_memory_category_name(c), r.current[c] / 1048576.0,
                r.peak[c] / 1048576.0);
    fprintf(stderr, "\n               counted peak %.1f, jemalloc allocated %.1f resident %.1f, "
                    "peak RSS %.1f  (current/peak)\n",
            r.total_peak / 1048576.0, r.jemalloc_allocated / 1048576.0,
            r.jemalloc_resident / 1048576.0, r.peak_rss / 1048576.0);
}

static int cmd_train(int argc, char **argv)
{
    const char *model = NULL, *steps_s = "100", *bs_s = "8", *seq_s = "64", *lr_s = "1e-3",
               *seed_s = "42", *vocab_s = "0", *threads_s = "0", *save = NULL, *every_s = "10",
               *warm_s = "0", *clip_s = "1.0";
    opt opts[] = {{"--model", &model},     {"--steps", &steps_s},   {"--batch-size", &bs_s},
                  {"--seq-len", &seq_s},   {"--lr", &lr_s},         {"--seed", &seed_s},
                  {"--vocab", &vocab_s},   {"--threads", &threads_s}, {"--save-model", &save},
                  {"--print-every", &every_s}, {"--warmup", &warm_s}, {"--clip", &clip_s}};
    long steps, bs, seq, seed, vocab, threads, every, warm;
    double lr, clip;
    zt_config cfg;
    zt_engine *e = NULL;
    zt_model_info mi;
    int64_t *ids = NULL, *labels = NULL;
    double *cdf = NULL;
    int rc = 1;
    if (parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0])))
        return 2;
    if (!model)
        return die("train needs --model DIR or a preset name"), 2;
    if (parse_int(steps_s, "--steps", 1, 1L << 40, &steps) ||
        parse_int(bs_s, "--batch-size", 1, 1 << 20, &bs) ||
        parse_int(seq_s, "--seq-len", 1, 1 << 20, &seq) ||
        parse_int(seed_s, "--seed", 0, INT64_MAX, &seed) ||
        parse_int(vocab_s, "--vocab", 0, 1 << 30, &vocab) ||
        parse_int(threads_s, "--threads", 0, 1024, &threads) ||
        parse_int(every_s, "--print-every", 1, 1L << 40, &every) ||
        parse_int(warm_s, "--warmup", 0, 1L << 40, &warm) ||
        parse_float(lr_s, "--lr", 0, 10, &lr) || parse_float(clip_s, "--clip", 0, 1e9, &clip))
        return 2;
    zt_config_init(&cfg);
    if (access(model, F_OK) == 0)
        cfg.model_dir = model;
    else
        cfg.model_preset = model;
    cfg.seed = (uint64_t)seed;
    cfg.vocab_size = (int)vocab;
    cfg.threads = (int)threads;
    cfg.lr = (float)lr;
    cfg.grad_clip = (float)clip;
    if (zt_engine_create(&cfg, MPI_COMM_WORLD, &e) < 0)
        return die("%s", zt_last_error());
    zt_engine_model_info(e, &mi);
    if (mi.vocab_size < 16)
        return zt_engine_destroy(e), die("synthetic data needs a vocabulary of at least 16");
    if (seq > mi.max_positions) {
        zt_engine_destroy(e);
        return die("--seq-len %ld exceeds the model's max_position_embeddings %d", seq,
                   mi.max_positions);
    }
    fprintf(stderr, "zerotrain %s: BERT L%d H%d A%d, %zu parameters; %ld steps of %ld x %ld "
                    "tokens, lr %g\n",
            zt_version(), mi.num_layers, mi.hidden_size, mi.num_heads, mi.num_parameters, steps,
            bs, seq, lr);
    ids = malloc(sizeof *ids * (size_t)(bs * seq));
    labels = malloc(sizeof *labels * (size_t)(bs * seq));
    cdf = zipf_cdf(mi.vocab_size);
    if (!ids || !labels || !cdf) {
        die("out of memory");
        goto done;
    }
    double t0 = now(), tprint = t0;
    long tokens_since = 0;
    for (long s = 0; s < steps; s++) {
        zt_fb_result res;
        zt_step_info si;
        float cur_lr = (float)(warm > 0 && s < warm ? lr * (double)(s + 1) / (double)warm : lr);
        synth_batch(ids, labels, (int)bs, (int)seq, mi.vocab_size, cdf, (uint64_t)seed,
                    (uint64_t)(s * bs));
        zt_batch b = {(int)bs, (int)seq, ids, NULL, NULL, labels, (uint64_t)(s * bs)};
        if (zt_engine_zero_grad(e) < 0 || zt_engine_forward_backward(e, &b, 0, &res) < 0 ||
            zt_engine_step(e, cur_lr, &si) < 0) {
            die("step %ld: %s", s + 1, zt_engine_last_error(e));
            goto done;
        }
        tokens_since += bs * seq;
        if ((s + 1) % every == 0 || s + 1 == steps || s == 0) {
            double t = now();
            printf("step %6ld/%ld  loss %.4f  grad_norm %.3f  lr %.3g  %.0f tokens/s  %.1fs\n",
                   s + 1, steps, res.loss, si.grad_norm, cur_lr,
                   tokens_since / (t - tprint > 1e-9 ? t - tprint : 1e-9), t - t0);
            fflush(stdout);
            tprint = t;
            tokens_since = 0;
        }
    }
    if (save) {
        if (zt_engine_save_model(e, save) < 0) {
            die("%s", zt_engine_last_error(e));
            goto done;
        }
        fprintf(stderr, "saved the model to %s\n", save);
    }
    print_memory();
    rc = 0;
done:
    free(ids);
    free(labels);
    free(cdf);
    zt_engine_destroy(e);
    return rc;
}

int main(int argc, char **argv)
{
    int rc, provided = 0;
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    zt_log_set(log_to_stderr, NULL, ZT_LOG_WARN);
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("zerotrain %s\n", zt_version());
        return 0;
    }
    if (strcmp(argv[1], "grad") == 0)
        return cmd_grad(argc - 2, argv + 2);
    if (strcmp(argv[1], "inspect") == 0)
        return cmd_inspect(argc - 2, argv + 2);
    if (strcmp(argv[1], "train") == 0) {
        if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return die("MPI_Init_thread failed");
        rc = cmd_train(argc - 2, argv + 2);
        MPI_Finalize();
        return rc;
    }
    return die("unknown command '%s' (see 'zerotrain --help')", argv[1]), 2;
}
