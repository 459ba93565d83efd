/* cmd_train.c - `zerotrain train`: masked-LM (BERT) or span-corruption (T5) training from a
 * DeepSpeed-style config on a prepared corpus or synthetic ids, with progress, JSON Lines
 * metrics, evaluation on every rank, the divergence guard, crash-safe checkpoints and
 * resume. Only the public API. Every rank passes through one start-up agreement (its own
 * failures, and its settings against rank 0's) before the first collective, and every
 * collective after it is the library's (under its watchdog). */
#include "ckptdir.h"
#include "clsdata.h"
#include "t2tdata.h"
#include "clstok.h"
#include "cli.h"
#include "outputs.h"
#include "tokenizer.h"
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
        *summary, *warmup, *resume_from, *save_dtype;
    /* finetune: the task, the labelled files and their fields, the tokenizer */
    const char *task, *train, *eval, *text_field, *pair_field, *label_field, *tokenizer;
    /* finetune --task text2text: the pair's fields, the targets' length */
    const char *input_field, *target_field, *target_len;
    int resume, check_coll, profile, overwrite;
    int finetune;              /* the command is `finetune` */
} train_args;

/* a whole regular file (configs: at most 16 MiB), or NULL with zt_last_error() set: a FIFO
 * or device is refused before it is read */
static char *read_text(const char *path)
{
    char *buf = NULL;
    return zt_file_read_all(path, 16u << 20, &buf, NULL) < 0 ? NULL : buf;
}

/* One micro-batch's buffers: [B, T] inputs, [B, Tl] labels, and a classifier's [B,
 * num_labels] targets. */
typedef struct batch_buf { int64_t *ids, *mask, *tt, *labels, *sop; float *values; } batch_buf;

static int batch_alloc(batch_buf *b, size_t n, size_t n_labels, size_t n_values)
{
    b->ids = malloc(n * sizeof(int64_t));
    b->mask = malloc(n * sizeof(int64_t));
    b->tt = malloc(n * sizeof(int64_t));
    b->labels = malloc(n_labels * sizeof(int64_t));
    b->values = malloc((n_values ? n_values : 1) * sizeof(float));
    b->sop = malloc(n * sizeof(int64_t)); /* (rows <= cells) */
    return b->ids && b->mask && b->tt && b->labels && b->values && b->sop ? 0 : -1;
}

/* The end token span corruption appends (the data's separator: T5's </s>, or [SEP]) and its
 * padding must be the eos_token_id and pad_token_id the model's config names (a preset's:
 * 1 and 0), or the exported model would stop at another token than it learnt to emit; 0, or
 * 1 after printing why not. */
static int t5_tokens_match(const char *model, const zt_token_data *data, const char *data_dir)
{
    char path[4096], *text;
    struct stat sb;
    zt_token_data_info di;
    int eos = 1, pad = 0;
    zt_token_data_info_get(data, &di);
    if (stat(model, &sb) == 0) {
        snprintf(path, sizeof path, S_ISDIR(sb.st_mode) ? "%s/config.json" : "%s", model);
        if ((text = read_text(path))) {
            cJSON *o = cJSON_Parse(text);
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "eos_token_id"),
                        *p = cJSON_GetObjectItemCaseSensitive(o, "pad_token_id");
            eos = cJSON_IsNumber(e) ? (int)e->valuedouble : eos;
            pad = cJSON_IsNumber(p) ? (int)p->valuedouble : pad;
            cJSON_Delete(o);
            free(text);
        }
    }
    if (di.tok.sep_id == eos && di.tok.pad_id == pad)
        return 0;
    return die("%s/manifest.json: the data's end token is id %d and its padding %d, but %s's eos_token_id is %d "
               "and pad_token_id %d: T5 would learn to end with another token than its config "
               "names. Prepare the data for T5 (prepare-data --model-type t5: <pad> 0, </s> 1, "
               "<unk> 2), or give a config.json with eos_token_id %d and pad_token_id %d",
               data_dir, di.tok.sep_id, di.tok.pad_id, model, eos, pad,
               di.tok.sep_id, di.tok.pad_id);
}

/* Where samples come from: masked LM (BERT), span corruption (T5) or a labelled file
 * (finetune; the source is the command's, set up by open_data). */
typedef struct source {
    zt_mlm_source *mlm;
    zt_span_source *span;
    cls_source *cls;
    t2t_source *t2t;
    int T, Tl;                 /* inputs, labels per row (cls: T the longest, Tl 1) */
    int sop;                   /* AlbertForPreTraining: masked LM + sentence-order pairs */
    int electra;               /* ELECTRA's joint pretraining: aux_count = attended tokens */
    int NL;                    /* cls: the classifier's outputs */
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
    /* (trained as a masked LM, a discriminator is ELECTRA's joint pretraining: the masks
     * are the generator's, the engine samples the replacements) */
    s->electra = strcmp(mi->architecture, "ElectraForPreTraining") == 0;
    s->sop = strcmp(mi->architecture, "AlbertForPreTraining") == 0;
    if (s->sop && T < 5) { /* (printed here: -2) */
        die("AlbertForPreTraining's sentence-order pairs need --seq-len >= 5 ([CLS] A [SEP] B "
            "[SEP]), not %d", T);
        return -2;
    }
    if (zt_mlm_source_create(data, mi->vocab_size, T, 0.15f, seed, &s->mlm) < 0)
        return -1;
    if (!data && strcmp(mi->model_type, "roberta") == 0) {
        /* synthetic rows with RoBERTa's specials: pad, <unk> 3, <s>, </s>, <mask> last */
        int32_t sp[5] = {mi->pad_token_id, 3, mi->bos_token_id, mi->eos_token_id,
                         mi->vocab_size - 1};
        if (zt_mlm_source_set_specials(s->mlm, sp) < 0)
            return -1;
    }
    return 0;
}

static void source_destroy(source *s)
{
    zt_mlm_source_destroy(s->mlm);
    zt_span_source_destroy(s->span);
    cls_source_destroy(s->cls);
    t2t_source_destroy(s->t2t);
}

static uint64_t source_samples(const source *s)
{
    return s->cls ? cls_source_rows(s->cls) : s->t2t ? t2t_source_rows(s->t2t)
           : s->span ? zt_span_source_samples(s->span) : zt_mlm_source_samples(s->mlm);
}

/* rows for samples [first, first + B) into bb, described by *b; *n_labels: the loss's
 * elements (labelled tokens, or a classifier's), *tokens: the real tokens (AlbertForPreTraining:
 * its sentence-order rows are B) */
static int source_fill(const source *s, uint64_t first, int B, batch_buf *bb, zt_batch *b,
                       int64_t *n_labels, uint64_t *tokens)
{
    if (s->cls) {
        cls_source_fill(s->cls, first, B, bb->ids, bb->mask, bb->tt, bb->labels, bb->values, b,
                        n_labels, tokens);
        return 0;
    }
    if (s->t2t) {
        t2t_source_fill(s->t2t, first, B, bb->ids, bb->mask, bb->labels, b, n_labels, tokens);
        return 0;
    }
    int rc = s->span  ? zt_span_source_fill(s->span, first, B, bb->ids, bb->mask, bb->labels)
             : s->sop ? zt_mlm_source_fill_sop(s->mlm, first, B, bb->ids, bb->mask, bb->tt,
                                               bb->labels, bb->sop)
                      : zt_mlm_source_fill(s->mlm, first, B, bb->ids, bb->mask, bb->tt,
                                           bb->labels);
    *b = (zt_batch){B, s->T, bb->ids, bb->mask, s->span ? NULL : bb->tt, bb->labels, first, 0,
                    s->span ? s->Tl : 0, NULL, NULL, s->sop ? bb->sop : NULL, 0, NULL};
    *n_labels = 0;
    for (size_t i = 0; i < (size_t)B * (size_t)s->Tl; i++)
        *n_labels += bb->labels[i] != -100;
    *tokens = (uint64_t)B * (uint64_t)s->T;
    return rc;
}

static void batch_release(batch_buf *b)
{
    free(b->ids);
    free(b->mask);
    free(b->tt);
    free(b->labels);
    free(b->values);
    free(b->sop);
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
        int64_t nl;
        uint64_t tok;
        if (source_fill(src, first, rows, bb, &bt, &nl, &tok) < 0)
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

/* A classifier's metrics over the whole evaluation file, on every rank: batch b (B rows) is
 * rank b mod N's, the batches' counts (cls_eval_count) are gathered and added in batch
 * order, so the figures do not depend on N or the stage. A rank left without a batch in the
 * last round evaluates batch 0 again and drops the result. */
static int evaluate_cls(zt_engine *e, const source *src, int B, batch_buf *bb, int rank,
                        int world, cls_metrics *m)
{
    uint64_t n = cls_source_rows(src->cls), nb = (n + (uint64_t)B - 1) / (uint64_t)B;
    uint64_t rounds = (nb + (uint64_t)world - 1) / (uint64_t)world;
    size_t W = (size_t)cls_eval_width(src->NL);
    double *mine = calloc(W * rounds + 1, sizeof *mine), *sum = calloc(W, sizeof *sum);
    double *all = calloc(W * rounds * (size_t)world + 1, sizeof *all);
    int rc = 0;
    if (!mine || !sum || !all) {
        rc = die("out of memory");
        goto done;
    }
    for (uint64_t k = 0; k < rounds && rc == 0; k++) {
        uint64_t b = k * (uint64_t)world + (uint64_t)rank, first = (b < nb ? b : 0) * (uint64_t)B;
        int rows = (int)(n - first < (uint64_t)B ? n - first : (uint64_t)B);
        zt_fb_result r;
        zt_batch bt;
        int64_t nl, shape[3];
        uint64_t tok;
        const float *lg;
        source_fill(src, first, rows, bb, &bt, &nl, &tok);
        if (zt_engine_evaluate(e, &bt, &r) < 0 || zt_engine_logits(e, &lg, shape) < 0)
            rc = die("evaluation: %s", zt_engine_last_error(e));
        else if (b < nb)
            cls_eval_count(src->cls, &bt, lg, r.loss_sum, r.n_labels, mine + W * k);
    }
    if (rc)
        goto done;
    if (zt_engine_gather_f64(e, mine, (int)(W * rounds), all) < 0) {
        rc = die("evaluation: %s", zt_engine_last_error(e));
        goto done;
    }
    for (uint64_t b = 0; b < nb; b++) {
        const double *x = all + (b % (uint64_t)world) * W * rounds + W * (b / (uint64_t)world);
        for (size_t j = 0; j < W; j++)
            sum[j] += x[j];
    }
    cls_eval_metrics(src->cls, sum, m);
done:
    free(mine);
    free(sum);
    free(all);
    return rc;
}

/* ---- text2text's evaluation --------------------------------------------------------- */

enum { T2T_LOSS, T2T_N, T2T_CORRECT, T2T_ROWS, T2T_EXACT, T2T_W };

/* the greedy continuation of decoder position t of row r: the first of equal maxima */
static int32_t arg_max(const float *x, int64_t V)
{
    int32_t best = 0;
    for (int64_t j = 1; j < V; j++)
        best = x[j] > x[best] ? (int32_t)j : best;
    return best;
}

/* 1 when ids a and b decode (special tokens skipped) to the same text, 0 when not, -1 */
static int same_text(const tok_tokenizer *tok, const int32_t *a, size_t na, const int32_t *b,
                     size_t nb)
{
    char *ta = NULL, *tb = NULL, err[256];
    int rc = tok_decode(tok, a, na, 1, &ta, err, sizeof err) < 0 ||
                     tok_decode(tok, b, nb, 1, &tb, err, sizeof err) < 0
                 ? -1
                 : strcmp(ta, tb) == 0;
    free(ta);
    free(tb);
    return rc;
}

/* text2text's figures over the whole evaluation file, on every rank: the teacher-forced loss
 * and token accuracy, and greedy generation's exact match against the targets (as texts);
 * batch b is rank b mod N's, the counts gathered and added in batch order (the same at any
 * N and stage). out: loss, token accuracy, exact match, rows. */
static int evaluate_t2t(zt_engine *e, const source *src, tok_tokenizer *tok, int B,
                        batch_buf *bb, int rank, int world, double out[4])
{
    const t2t_source *ts = src->t2t;
    uint64_t n = t2t_source_rows(ts), nb = (n + (uint64_t)B - 1) / (uint64_t)B;
    uint64_t rounds = (nb + (uint64_t)world - 1) / (uint64_t)world;
    int max_new = src->Tl;
    tok_specials sp;
    double *mine = calloc(T2T_W * rounds + 1, sizeof *mine), sum[T2T_W] = {0};
    double *all = calloc(T2T_W * rounds * (size_t)world + 1, sizeof *all);
    int32_t *gen = malloc(sizeof *gen * (size_t)B * (size_t)max_new);
    int *glen = malloc(sizeof *glen * (size_t)B), rc = 0;
    zt_generate_config g;
    tok_special_ids(tok, &sp);
    zt_generate_config_init(&g); /* greedy, cached */
    g.max_new_tokens = max_new;
    g.eos_token_id = sp.eos;
    g.pad_token_id = sp.pad;
    if (!mine || !all || !gen || !glen) {
        rc = die("out of memory");
        goto done;
    }
    for (uint64_t k = 0; k < rounds && rc == 0; k++) {
        uint64_t b = k * (uint64_t)world + (uint64_t)rank, first = (b < nb ? b : 0) * (uint64_t)B;
        int rows = (int)(n - first < (uint64_t)B ? n - first : (uint64_t)B);
        double *x = mine + T2T_W * k;
        zt_fb_result r;
        zt_batch bt;
        int64_t nl, shape[3], i = 0;
        uint64_t tok_n;
        const float *lg;
        source_fill(src, first, rows, bb, &bt, &nl, &tok_n);
        if (zt_engine_evaluate(e, &bt, &r) < 0 || zt_engine_logits(e, &lg, shape) < 0) {
            rc = die("evaluation: %s", zt_engine_last_error(e));
            break;
        }
        x[T2T_LOSS] = r.loss_sum;
        x[T2T_N] = (double)r.n_labels;
        x[T2T_ROWS] = rows;
        /* the logits of the labelled positions, row by row */
        for (int64_t c = 0; c < (int64_t)rows * bt.T_dec; c++)
            if (bt.labels[c] != -100) {
                x[T2T_CORRECT] += arg_max(lg + (size_t)i * (size_t)shape[2], shape[2]) == bt.labels[c];
                i++;
            }
        if (zt_generate(e, &bt, &g, gen, glen, NULL) < 0) {
            rc = die("evaluation (greedy decoding): %s", zt_engine_last_error(e));
            break;
        }
        for (int q = 0; q < rows; q++) {
            size_t nt;
            const int32_t *want = t2t_source_target(ts, t2t_source_row(ts, first + (uint64_t)q), &nt);
            int same = same_text(tok, gen + (size_t)q * max_new, (size_t)glen[q], want, nt);
            if (same < 0) {
                rc = die("evaluation: cannot decode a generated sequence");
                break;
            }
            x[T2T_EXACT] += same;
        }
        if (b >= nb)
            memset(x, 0, sizeof *x * T2T_W);
    }
    if (rc)
        goto done;
    if (zt_engine_gather_f64(e, mine, (int)(T2T_W * rounds), all) < 0) {
        rc = die("evaluation: %s", zt_engine_last_error(e));
        goto done;
    }
    for (uint64_t b = 0; b < nb; b++) {
        const double *x = all + (b % (uint64_t)world) * T2T_W * rounds + T2T_W * (b / (uint64_t)world);
        for (int j = 0; j < T2T_W; j++)
            sum[j] += x[j];
    }
    out[0] = sum[T2T_N] > 0 ? sum[T2T_LOSS] / sum[T2T_N] : NAN;
    out[1] = sum[T2T_N] > 0 ? sum[T2T_CORRECT] / sum[T2T_N] : NAN;
    out[2] = sum[T2T_ROWS] > 0 ? sum[T2T_EXACT] / sum[T2T_ROWS] : NAN;
    out[3] = sum[T2T_ROWS];
done:
    free(mine);
    free(all);
    free(gen);
    free(glen);
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

/* --save-model-dtype's ZT_PREC_* */
static int save_dtype_of(const char *s)
{
    return !strcmp(s, "bf16") ? ZT_PREC_BF16 : !strcmp(s, "fp16") ? ZT_PREC_FP16 : ZT_PREC_FP32;
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

/* An evaluation's figures: the loss, and a classifier's metrics */
typedef struct eval_result {
    double loss;               /* NaN: nothing labelled */
    int cls, regression;       /* cls: the figures below apply (regression: mse alone) */
    double accuracy, f1_macro, mse;
    int t2t;                   /* text2text: the token accuracy and exact match apply */
    double token_accuracy, exact_match;
} eval_result;

/* One JSON line. Values that are not finite are null, and named in "nonfinite". si: the
 * step's (fp16: its loss scale, and whether it overflowed) */
static void write_metrics(FILE *f, int64_t step, double loss, double lr, double norm,
                          uint64_t tokens, double seconds, const eval_result *ev,
                          int skipped, int64_t skipped_total, const zt_step_info *si,
                          int fp16)
{
    zt_mem_report r;
    const char *bad[8];
    int nbad = 0;
    zt_memory_report(&r);
    fprintf(f, "{\"step\": %" PRId64, step);
    json_num(f, "loss", loss, "%.9g");
    json_num(f, "lr", lr, "%.9g");
    json_num(f, "grad_norm", norm, "%.9g");
    fprintf(f, ", \"tokens\": %" PRIu64 ", \"seconds\": %.6f", tokens, seconds);
    if (ev) {
        const struct { const char *key; double v; int on; } fig[] = {
            {"eval_loss", ev->loss, 1},
            {"eval_accuracy", ev->accuracy, ev->cls && !ev->regression},
            {"eval_f1_macro", ev->f1_macro, ev->cls && !ev->regression},
            {"eval_mse", ev->mse, ev->cls && ev->regression},
            {"eval_token_accuracy", ev->token_accuracy, ev->t2t},
            {"eval_exact_match", ev->exact_match, ev->t2t},
        };
        for (size_t k = 0; k < sizeof fig / sizeof fig[0]; k++) {
            if (!fig[k].on)
                continue;
            json_num(f, fig[k].key, fig[k].v, "%.9g");
            if (!isfinite(fig[k].v))
                bad[nbad++] = fig[k].key;
        }
    }
    if (!isfinite(loss))
        bad[nbad++] = "loss";
    if (!isfinite(norm))
        bad[nbad++] = "grad_norm";
    if (nbad) {
        fprintf(f, ", \"nonfinite\": [");
        for (int i = 0; i < nbad; i++)
            fprintf(f, "%s\"%s\"", i ? ", " : "", bad[i]);
        fputc(']', f);
    }
    fprintf(f, ", \"skipped\": %s, \"skipped_steps\": %" PRId64, skipped ? "true" : "false",
            skipped_total);
    if (fp16) /* (DeepSpeed's dynamic loss scaling) */
        fprintf(f, ", \"loss_scale\": %.9g, \"overflow\": %s", si->loss_scale,
                si->overflow ? "true" : "false");
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
    struct stat sb;
    if (dir && stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a labelled file: its bytes */
        FILE *f = fopen(dir, "rb");
        XXH64_state_t *h = XXH64_createState();
        char buf[1 << 16];
        size_t got;
        if (!f || !h) {
            snprintf(out, n, "unreadable");
        } else {
            XXH64_reset(h, 0);
            while ((got = fread(buf, 1, sizeof buf, f)) > 0)
                XXH64_update(h, buf, got);
            snprintf(out, n, "file xxh64 %016llx", (unsigned long long)XXH64_digest(h));
        }
        if (f)
            fclose(f);
        XXH64_freeState(h);
        return;
    }
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
static void print_recompute(const zt_engine *e, int profile)
{
    zt_mem_report r;
    zt_recompute_info ri;
    size_t pred = zt_engine_activation_prediction(e);
    int any = 0;
    zt_memory_report(&r);
    int ns = zt_engine_step_count(e);
    for (int u = 0; u < ns; u++)
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
    for (int u = 0; u < ns; u++) {
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
    fprintf(f, "--task=%s\n--target-len=%s\n", a->task ? a->task : "",
            a->target_len ? a->target_len : "");
    data_identity(a->finetune ? a->train : data_dir, synth_seed, id, sizeof id);
    fprintf(f, "--data=%s\n", id);
    if (a->finetune && a->eval) {
        data_identity(a->eval, 0, id, sizeof id);
        fprintf(f, "--eval=%s\n--eval-every=%ld\n", id, eval_every);
    }
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

/* What the phases of the command share, in the order the phases fill it in: the command
 * line, the training config and the data, the engine's zt_config, the checkpoint folder,
 * then the engine, the samples and what the training loop leaves for the end.
 * train_ctx_free releases whatever was opened, on every path. */
typedef struct train_ctx {
    train_args a;
    long steps, seq, ckpt_every, keep, eval_every, eval_samples, threads, seed, warmup;
    long target_len;               /* text2text: the targets' tokens at most */
    int t2t;                       /* finetune --task text2text */
    int world, rank, tty;
    int fp16;                      /* fp16 training: the loss scale in the metrics */
    const char *data_dir;          /* NULL: synthetic ids */
    uint64_t synth_seed;           /* synthetic:SEED's SEED */
    char *cfg_text;                /* the config's text, stored in every checkpoint */
    zt_train_config *tc;
    const zt_train_settings *ts;   /* tc's settings */
    double agree_timeout;          /* seconds the start-up agreement waits for the ranks */
    zt_token_data *data, *eval_data;
    zt_config cfg;
    char rc_name[32];              /* zerotrain.recompute as configured, for the summary */
    ckptdir *cd;
    char cd_msg[8192];             /* outputs_check's and ckptdir's messages */
    zt_engine *e;
    zt_model_info mi;
    source src, eval_src;
    zt_train_state st;
    char last_ckpt[4096];          /* the last checkpoint written or resumed ("": none) */
    batch_buf *bufs;               /* [grad_accum_steps] micro-batches' buffers */
    zt_batch *batches;             /* [grad_accum_steps] */
    double unigram;                /* the masked-LM loss of counting (rank 0; BERT only) */
    FILE *metrics;                 /* --metrics (rank 0) */
    train_stats stats;
    int64_t first_step;            /* the step the training loop started from */
    /* finetune --task classify: the labelled files, their label map, the tokenizer */
    lab_data *ltrain, *leval;
    lab_map *lmap;
    int problem, num_labels;       /* LAB_* and the classifier's outputs */
    const char **label_names;      /* [num_labels] the map's, for zt_config.label_names */
    tok_tokenizer *tok;            /* its tokenizer (the model folder's, or --tokenizer) */
    int64_t evaluated_at;          /* the last step evaluated (-1: none) */
} train_ctx;

static void train_ctx_init(train_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->steps = 100;
    c->seq = 128;
    c->target_len = 128;
    c->eval_samples = 256;
    c->threads = -1;
    c->seed = -1;
    c->warmup = 1;
    c->world = 1;
    c->tty = isatty(2);
    c->agree_timeout = 300.0;
    snprintf(c->rc_name, sizeof c->rc_name, "none");
    c->st = (zt_train_state){0, 0, 42};
    c->unigram = NAN;
    c->evaluated_at = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &c->world);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
}

/* rc: the command's status (0: success; otherwise the checkpoint folder is left as the
 * run found it when the run saved nothing there) */
static void train_ctx_free(train_ctx *c, int rc)
{
    if (c->metrics)
        fclose(c->metrics);
    stats_free(&c->stats);
    for (int k = 0; c->bufs && k < c->ts->grad_accum_steps; k++)
        batch_release(&c->bufs[k]);
    free(c->bufs);
    source_destroy(&c->src);
    source_destroy(&c->eval_src);
    free(c->batches);
    zt_engine_destroy(c->e);
    ckptdir_close(c->cd, rc != 0);
    zt_token_data_close(c->data);
    zt_token_data_close(c->eval_data);
    zt_train_config_destroy(c->tc);
    free(c->cfg_text);
    lab_free(c->ltrain);
    lab_free(c->leval);
    lab_map_free(c->lmap);
    free(c->label_names);
    tok_free(c->tok);
}

/* The numbers of the command line, within their bounds; 0, or 2 after printing why not */
static int parse_numbers(train_ctx *c)
{
    const train_args *a = &c->a;
    if ((a->steps && parse_int(a->steps, "--steps", 1, 1L << 40, &c->steps)) ||
        (a->seq && parse_int(a->seq, "--seq-len", 3, 1 << 20, &c->seq)) ||
        (a->ckpt_every &&
         parse_int(a->ckpt_every, "--checkpoint-every", 1, 1L << 40, &c->ckpt_every)) ||
        (a->keep && parse_int(a->keep, "--keep", 1, 1 << 20, &c->keep)) ||
        (a->eval_every && parse_int(a->eval_every, "--eval-every", 1, 1L << 40, &c->eval_every)) ||
        (a->eval_samples &&
         parse_int(a->eval_samples, "--eval-samples", 1, 1L << 30, &c->eval_samples)) ||
        (a->threads && parse_int(a->threads, "--threads", 0, 1024, &c->threads)) ||
        (a->seed && parse_int(a->seed, "--seed", 0, INT64_MAX, &c->seed)) ||
        (a->warmup && parse_int(a->warmup, "--warmup", 0, 1L << 30, &c->warmup)) ||
        (a->target_len && parse_int(a->target_len, "--target-len", 2, 1 << 20, &c->target_len)))
        return 2;
    return 0;
}

/* train: --model and --data, none of finetune's options; 0, or 1 after printing why not */
static int check_train_args(const train_args *a)
{
    const char *ft = a->task ? "--task" : a->train ? "--train" : a->eval ? "--eval"
                     : a->text_field ? "--text-field" : a->pair_field ? "--text-pair-field"
                     : a->label_field ? "--label-field" : a->tokenizer ? "--tokenizer"
                     : a->input_field ? "--input-field" : a->target_field ? "--target-field"
                     : a->target_len ? "--target-len" : NULL;
    if (ft)
        return die("%s is an option of `zerotrain finetune` (train pretrains on --data)", ft);
    if (!a->model || !a->data)
        return die("train needs --model DIR|PRESET|CONFIG_JSON and --data DIR|synthetic[:SEED]");
    return 0;
}

/* finetune: --model, --task classify, --train; --eval-every needs --eval; 0, or 1 after
 * printing why not */
static int check_finetune_args(const train_args *a)
{
    if (!a->model || !a->task || !a->train)
        return die("finetune needs --model DIR|PRESET|CONFIG_JSON, --task classify|text2text and "
                   "--train FILE (JSON Lines, CSV or TSV)");
    if (strcmp(a->task, "classify") != 0 && strcmp(a->task, "text2text") != 0)
        return die("--task %s: finetune knows the tasks classify (BERT: sequence "
                   "classification) and text2text (T5: input -> target)", a->task);
    int t2t = strcmp(a->task, "text2text") == 0;
    const char *other = t2t ? (a->text_field ? "--text-field" : a->pair_field ? "--text-pair-field"
                               : a->label_field ? "--label-field" : NULL)
                            : (a->input_field ? "--input-field" : a->target_field ? "--target-field"
                               : a->target_len ? "--target-len" : NULL);
    if (other)
        return die("%s is an option of --task %s", other, t2t ? "classify" : "text2text");
    if (a->data || a->eval_data || a->eval_samples)
        return die("%s: finetune reads --train FILE and --eval FILE", a->data ? "--data"
                   : a->eval_data ? "--eval-data" : "--eval-samples");
    if (a->eval_every && !a->eval)
        return die("--eval-every needs --eval FILE");
    return 0;
}

/* The command line into c->a and its numbers, and the options checked against each other;
 * 0, or 2 after printing why not. argv is reordered. */
static int parse_args(train_ctx *c, int argc, char **argv)
{
    train_args *a = &c->a;
    opt opts[] = {
        {"--config", &a->config},         {"--model", &a->model},
        {"--data", &a->data},             {"--seq-len", &a->seq},
        {"--steps", &a->steps},           {"--checkpoint-dir", &a->ckpt_dir},
        {"--checkpoint-every", &a->ckpt_every}, {"--keep", &a->keep},
        {"--save-model", &a->save},       {"--seed", &a->seed},
        {"--save-model-dtype", &a->save_dtype},
        {"--metrics", &a->metrics},       {"--eval-data", &a->eval_data},
        {"--eval-every", &a->eval_every}, {"--eval-samples", &a->eval_samples},
        {"--threads", &a->threads},       {"--collective-timeout", &a->timeout},
        {"--summary", &a->summary},       {"--warmup", &a->warmup},
        {"--resume-from", &a->resume_from},
        {"--task", &a->task},             {"--train", &a->train},
        {"--eval", &a->eval},             {"--text-field", &a->text_field},
        {"--text-pair-field", &a->pair_field}, {"--label-field", &a->label_field},
        {"--tokenizer", &a->tokenizer},
        {"--input-field", &a->input_field}, {"--target-field", &a->target_field},
        {"--target-len", &a->target_len},
    };
    /* --resume and the other flags take no value; the rest do */
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--resume") == 0)
            a->resume = 1;
        else if (strcmp(argv[i], "--check-collectives") == 0)
            a->check_coll = 1;
        else if (strcmp(argv[i], "--profile") == 0)
            a->profile = 1;
        else if (strcmp(argv[i], "--overwrite") == 0)
            a->overwrite = 1;
        else
            argv[n++] = argv[i];
    }
    if (parse_opts(n, argv, opts, (int)(sizeof opts / sizeof opts[0])))
        return 2;
    if (a->finetune ? check_finetune_args(a) : check_train_args(a))
        return 2;
    if (a->save_dtype && strcmp(a->save_dtype, "fp32") && strcmp(a->save_dtype, "bf16") &&
        strcmp(a->save_dtype, "fp16"))
        return die("--save-model-dtype %s: fp32, bf16 or fp16", a->save_dtype), 2;
    if (a->save_dtype && !a->save)
        return die("--save-model-dtype needs --save-model DIR"), 2;
    if (parse_numbers(c))
        return 2;
    if ((a->ckpt_every || a->resume || a->keep || a->overwrite) && !a->ckpt_dir) {
        die("--checkpoint-every, --keep, --resume and --overwrite need --checkpoint-dir");
        return 2;
    }
    if (a->resume && a->overwrite) {
        die("--resume (continue the folder's checkpoints) and --overwrite (replace them by a "
            "new run's) exclude each other");
        return 2;
    }
    if (a->resume && a->resume_from) {
        die("--resume (the newest checkpoint in --checkpoint-dir) and --resume-from DIR "
            "(that one) exclude each other");
        return 2;
    }
    if (!a->finetune && !!a->eval_data != !!a->eval_every) {
        die("--eval-data and --eval-every go together");
        return 2;
    }
    if (a->finetune) {
        c->data_dir = NULL;
        c->t2t = strcmp(a->task, "text2text") == 0;
    } else if (strcmp(a->data, "synthetic") == 0 || strncmp(a->data, "synthetic:", 10) == 0) {
        long v = 0;
        if (a->data[9] == ':' && parse_int(a->data + 10, "synthetic seed", 0, INT64_MAX, &v))
            return 2;
        c->synth_seed = (uint64_t)v;
    } else {
        c->data_dir = a->data;
    }
    return 0;
}

/* The training config (--config, or a micro batch of 8) parsed for this world size, and the
 * run's seed; 0, or 1 after printing why not. Everything is validated before anything is
 * allocated or written. */
static int read_config(train_ctx *c)
{
    int rc;
    if (c->a.config) {
        if (!(c->cfg_text = read_text(c->a.config))) {
            die("%s", zt_last_error());
            return 1;
        }
        rc = zt_train_config_parse(c->cfg_text, c->a.config, c->world, c->steps, &c->tc);
    } else {
        c->cfg_text = strdup("{\"train_micro_batch_size_per_gpu\": 8}\n");
        rc = c->cfg_text ? zt_train_config_parse(c->cfg_text, "(default config)", c->world,
                                                 c->steps, &c->tc)
                         : ZT_E_NOMEM;
    }
    if (rc < 0) {
        die("%s", zt_last_error());
        return 1;
    }
    c->ts = zt_train_config_settings(c->tc);
    c->fp16 = c->ts->precision == ZT_PREC_FP16;
    c->agree_timeout = c->ts->collective_timeout;
    c->st.seed = c->seed >= 0 ? (uint64_t)c->seed : c->ts->seed_given ? c->ts->seed : 42;
    if (c->ts->activation_checkpointing && c->ts->recompute == ZT_RECOMPUTE_NONE)
        fprintf(stderr, "zerotrain: notice: the activation_checkpointing section does not turn "
                        "recomputation on: set \"zerotrain\": {\"recompute\": \"full\"}\n");
    return 0;
}

/* finetune: the tokenizer, the labelled files (every row checked before anything else),
 * the label map (a fine-tuned classifier's own names, else decided from --train as HF's
 * run_glue does) and the rows tokenized as samples; 0, or 1 after printing why not */
static int open_labelled(train_ctx *c)
{
    const train_args *a = &c->a;
    char err[2048], path[4096];
    lab_opts lo = {a->text_field, a->pair_field, a->label_field, 0};
    struct stat sb;
    tok_specials sp;
    if (lab_read(a->train, &lo, &c->ltrain, err, sizeof err) < 0 ||
        (a->eval && lab_read(a->eval, &lo, &c->leval, err, sizeof err) < 0))
        return die("%s", err);
    if (clstok_open(c->a.tokenizer, c->a.model, c->ltrain, TOK_BERT, &c->tok, err, sizeof err) < 0)
        return die("%s", err);
    if (stat(a->model, &sb) == 0) {
        snprintf(path, sizeof path, S_ISDIR(sb.st_mode) ? "%s/config.json" : "%s", a->model);
        if (clstok_config_is_classifier(path)) {
            int rc = lab_map_from_config(path, LAB_AUTO, &c->lmap, err, sizeof err);
            if (rc < 0 && rc != ZT_E_NOTFOUND)
                return die("%s", err);
            if (rc == 0 && lab_map_is_placeholder(c->lmap)) { /* LABEL_0 ...: the data's */
                lab_map_free(c->lmap);
                c->lmap = NULL;
            }
        }
    }
    if (!c->lmap && lab_map_build(c->ltrain, LAB_AUTO, &c->lmap, err, sizeof err) < 0)
        return die("%s", err);
    if (lab_apply(c->ltrain, c->lmap, err, sizeof err) < 0 ||
        (c->leval && lab_apply(c->leval, c->lmap, err, sizeof err) < 0))
        return die("%s", err);
    c->problem = lab_map_problem(c->lmap);
    c->num_labels = lab_map_num_labels(c->lmap);
    if (!(c->label_names = malloc(sizeof *c->label_names * (size_t)c->num_labels)))
        return die("out of memory");
    for (int i = 0; i < c->num_labels; i++)
        c->label_names[i] = lab_map_name(c->lmap, i);
    tok_special_ids(c->tok, &sp);
    if (cls_source_create(c->ltrain, c->lmap, clstok_encode, c->tok, sp.pad, (int)c->seq, c->st.seed,
                          1, &c->src.cls, err, sizeof err) < 0 ||
        (c->leval && cls_source_create(c->leval, c->lmap, clstok_encode, c->tok, sp.pad, (int)c->seq,
                                       0, 0, &c->eval_src.cls, err, sizeof err) < 0))
        return die("%s", err);
    c->src.T = c->eval_src.T = (int)c->seq;
    c->src.Tl = c->eval_src.Tl = 1;
    c->src.NL = c->eval_src.NL = c->num_labels;
    return 0;
}

/* finetune --task text2text: the T5 tokenizer, the input -> target files (every row checked
 * and encoded before anything else); 0, or 1 after printing why not */
static int open_text2text(train_ctx *c)
{
    const train_args *a = &c->a;
    char err[2048];
    lab_opts lo = {a->input_field ? a->input_field : "input",
                   a->target_field ? a->target_field : "target", NULL, LAB_NO_LABELS};
    if (!clstok_model_is_t5(a->model))
        return die("--model %s is not a T5: --task text2text fine-tunes "
                   "T5ForConditionalGeneration (BERT's task is classify)", a->model);
    if (lab_read(a->train, &lo, &c->ltrain, err, sizeof err) < 0 ||
        (a->eval && lab_read(a->eval, &lo, &c->leval, err, sizeof err) < 0))
        return die("%s", err);
    if (clstok_open(a->tokenizer, a->model, c->ltrain, TOK_T5, &c->tok, err, sizeof err) < 0)
        return die("%s", err);
    if (t2t_source_create(c->ltrain, c->tok, (int)c->seq, (int)c->target_len, c->st.seed, 1,
                          &c->src.t2t, err, sizeof err) < 0 ||
        (c->leval && t2t_source_create(c->leval, c->tok, (int)c->seq, (int)c->target_len, 0, 0,
                                       &c->eval_src.t2t, err, sizeof err) < 0))
        return die("%s", err);
    c->src.T = c->eval_src.T = (int)c->seq;
    c->src.Tl = c->eval_src.Tl = (int)c->target_len;
    return 0;
}

/* The prepared corpora (--data unless synthetic, --eval-data) with their tokenizers, or
 * finetune's labelled files; 0, or 1 after printing why not */
static int open_data(train_ctx *c)
{
    if (c->a.finetune && c->t2t)
        return open_text2text(c);
    if (c->a.finetune)
        return open_labelled(c);
    if (c->data_dir && zt_token_data_open(c->data_dir, 1, &c->data) < 0) {
        die("%s", zt_last_error());
        return 1;
    }
    if (c->a.eval_data && zt_token_data_open(c->a.eval_data, 1, &c->eval_data) < 0) {
        die("%s", zt_last_error());
        return 1;
    }
    return 0;
}


/* mpirun binds each rank to one core by default when ranks <= 2: threads beyond the cores
 * a rank may run on only take turns (rank 0 warns) */
static void warn_affinity(int threads, int rank)
{
    cpu_set_t cs;
    int want = threads > 0 ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof cs, &cs) == 0 && CPU_COUNT(&cs) < want && rank == 0)
        fprintf(stderr, "zerotrain: warning: this rank may run on %d core%s but uses %d "
                        "threads; give mpirun --bind-to none (or --map-by slot:PE=%d)\n",
                CPU_COUNT(&cs), CPU_COUNT(&cs) == 1 ? "" : "s", want, want);
}

/* T5's own optimizer when the config names none: Adafactor with transformers' defaults
 * (the config's, which without an optimizer section are zt_config_init's); with a
 * scheduler its T5 recipe: at the scheduler's lr, no relative steps */
static void t5_optimizer(zt_config *cfg, const zt_train_settings *ts, int rank)
{
    cfg->optimizer = ZT_OPT_ADAFACTOR;
    cfg->relative_step = cfg->scale_parameter = ts->scheduler == ZT_SCHED_CONSTANT;
    if (cfg->relative_step)
        cfg->lr = 0.0f; /* (relative steps take no lr) */
    cfg->weight_decay = 0.0f;
    if (rank == 0)
        fprintf(stderr, "zerotrain: notice: no optimizer section: T5 trains with Adafactor "
                        "(%s)\n", cfg->relative_step ? "relative steps, transformers' "
                        "defaults" : "the scheduler's lr, relative_step and "
                        "scale_parameter false");
}

/* The engine's configuration: zt_config_init's defaults, every field the config file sets,
 * then what the command line, the model and the data decide; 0, or 1 or 2 after printing
 * why not */
static int build_config(train_ctx *c)
{
    zt_config *cfg = &c->cfg;
    const zt_train_settings *ts = c->ts;
    zt_config_init(cfg);
    zt_train_config_apply(c->tc, cfg);
    if (cli_set_model(cfg, c->a.model))
        return 1;
    int is_t5 = clstok_model_is_t5(c->a.model);
    if (c->a.finetune && c->t2t) { /* T5ForConditionalGeneration: a preset takes the tokenizer's
                                    * vocabulary, its extra ids included */
        if (cfg->model_preset)
            cfg->vocab_size = tok_size(c->tok);
    } else if (c->a.finetune) { /* a BertForSequenceClassification over the labels of the data */
        cfg->head = ZT_HEAD_CLASSIFY;
        cfg->num_labels = c->num_labels;
        cfg->problem_type = c->problem; /* (LAB_* are ZT_PROBLEM_*) */
        cfg->label_names = c->label_names;
        cfg->vocab_size = tok_vocab_size(c->tok);
    } else if (!is_t5) {
        cfg->head = ZT_HEAD_MLM;
    }
    if (is_t5 && c->data && t5_tokens_match(c->a.model, c->data, c->data_dir))
        return 1;
    if (c->data) {
        zt_token_data_info di;
        zt_token_data_info_get(c->data, &di);
        /* a T5 preset: the tokenizer's vocabulary and span corruption's sentinels */
        cfg->vocab_size = di.tok.vocab_size + (cfg->model_preset && is_t5 ? ZT_SPAN_EXTRA_IDS : 0);
    }
    cfg->seed = c->st.seed;
    if (c->threads >= 0)
        cfg->threads = (int)c->threads;
    warn_affinity(cfg->threads, c->rank);
    if (is_t5 && !ts->optimizer_given)
        t5_optimizer(cfg, ts, c->rank);
    if (c->a.check_coll)
        cfg->check_collectives = 1;
    if (c->a.profile)
        cfg->recompute_profile = 1;
    if (ts->recompute == ZT_RECOMPUTE_EVERY_K)
        snprintf(c->rc_name, sizeof c->rc_name, "every-k:%d", ts->recompute_k);
    else
        snprintf(c->rc_name, sizeof c->rc_name, "%s",
                 (const char *[]){"none", "full", "selective", "every-k", "auto"}[ts->recompute]);
    cfg->plan_seq_len = (int)c->seq; /* (plan_micro_batch: the config's micro batch) */
    if (c->a.timeout) {
        double tmo;
        if (parse_float(c->a.timeout, "--collective-timeout", 0, 1e9, &tmo))
            return 2;
        cfg->collective_timeout = tmo;
        c->agree_timeout = tmo;
    }
    return 0;
}

/* Every output can be written and the checkpoint folder is this run's, before any work:
 * rank 0 checks them and holds the folder's lock for the run. 0, or 1 after printing why
 * not. */
static int check_outputs(train_ctx *c)
{
    int mode = c->a.overwrite ? CKPTDIR_OVERWRITE
               : c->a.resume || c->a.resume_from ? CKPTDIR_RESUME : CKPTDIR_NEW;
    if (outputs_check(c->a.save, c->a.metrics, c->a.summary, c->rank, c->cd_msg,
                      sizeof c->cd_msg) < 0 ||
        ckptdir_open(c->a.ckpt_dir, mode, c->rank, &c->cd, c->cd_msg, sizeof c->cd_msg) < 0) {
        die("%s", c->cd_msg);
        return 1;
    }
    return 0;
}

/* Every rank, whatever its start-up did (start_rc: its status, already printed): its status,
 * then its settings against rank 0's (a rank that failed alone would leave the others
 * waiting in their first collective; ranks given different settings would train silently
 * apart or mismatch collectives). Returns start_rc, 1 when the ranks disagree, or 0. */
static int agree(train_ctx *c, int start_rc)
{
    char *settings = start_rc == 0 ? run_settings(&c->a, c->ts, c->steps, c->seq, c->st.seed,
                                                  c->data_dir, c->synth_seed, c->eval_every,
                                                  c->eval_samples, c->ckpt_every, c->keep,
                                                  c->warmup)
                                   : NULL;
    int arc = zt_ranks_agree(MPI_COMM_WORLD, start_rc ? ZT_E_INVAL : 0, die_last(), settings,
                             c->agree_timeout);
    free(settings);
    if (start_rc)
        return start_rc;
    if (arc < 0) {
        if (c->rank == 0)
            die("%s", zt_last_error());
        return 1;
    }
    return 0;
}

/* The engine, the model's shape and the samples' sources; 0, or 1 after printing why not */
static int start_engine(train_ctx *c)
{
    if (zt_engine_create(&c->cfg, MPI_COMM_WORLD, &c->e) < 0) {
        die("%s", zt_last_error());
        return 1;
    }
    if (c->a.save_dtype && /* (checked now; applied to the final save only) */
        (zt_engine_set_save_dtype(c->e, save_dtype_of(c->a.save_dtype)) < 0 ||
         zt_engine_set_save_dtype(c->e, -1) < 0)) {
        die("--save-model-dtype: %s", zt_engine_last_error(c->e));
        return 1;
    }
    zt_engine_model_info(c->e, &c->mi);
    if (c->mi.max_positions > 0 && c->seq > c->mi.max_positions) {
        die("--seq-len %ld exceeds the model's max_position_embeddings %d", c->seq,
            c->mi.max_positions);
        return 1;
    }
    if (c->a.finetune) {
        int ids = c->t2t ? tok_size(c->tok) : tok_vocab_size(c->tok);
        if (c->mi.vocab_size < ids) {
            die("the tokenizer has %d ids, the model's vocab_size is %d", ids, c->mi.vocab_size);
            return 1;
        }
        return 0;
    }
    int rc = source_create(c->data, &c->mi, (int)c->seq,
                           c->data ? c->st.seed : c->st.seed ^ c->synth_seed, &c->src);
    if (rc == 0 && c->eval_data)
        rc = source_create(c->eval_data, &c->mi, (int)c->seq, 1234, &c->eval_src);
    if (rc < 0) {
        if (rc == -1)
            die("%s", zt_last_error());
        return 1;
    }
    return 0;
}

/* 1 when every rank found the same checkpoint (found > 0: path) or none (collective); 0
 * after printing why not */
static int same_checkpoint(train_ctx *c, int found, const char *path)
{
    double mine[2] = {found, found > 0 ? (double)(XXH64(path, strlen(path), 0) >> 12) : 0.0};
    double *all = malloc(sizeof *all * 2 * (size_t)c->world);
    int same = all != NULL;
    if (!all || zt_engine_gather_f64(c->e, mine, 2, all) < 0) {
        free(all);
        die("%s", all ? zt_engine_last_error(c->e) : "out of memory");
        return 0;
    }
    for (int r = 0; r < c->world; r++)
        same &= all[2 * r] == mine[0] && all[2 * r + 1] == mine[1];
    free(all);
    if (!same) {
        die("the ranks found different checkpoints in %s (is it on storage every rank "
            "sees alike?)", c->a.ckpt_dir);
        return 0;
    }
    return 1;
}

/* --resume: the newest valid checkpoint in --checkpoint-dir, the same on every rank, or
 * none (then the run starts from scratch); 0, or 1 after printing why not */
static int resume_latest(train_ctx *c)
{
    char path[4096];
    int rank = c->rank;
    /* rank 0 looks first (and moves corrupt checkpoints aside), then the others */
    int found = rank == 0 ? zt_checkpoint_find_latest(c->a.ckpt_dir, path, sizeof path) : 0;
    if (found < 0)
        die("%s", zt_last_error());
    if (!all_ok(c->e, found >= 0)) /* (also: the others wait for rank 0's look) */
        return 1;
    if (rank != 0 && (found = zt_checkpoint_find_latest(c->a.ckpt_dir, path, sizeof path)) < 0)
        die("%s", zt_last_error());
    if (!all_ok(c->e, found >= 0))
        return 1;
    if (!same_checkpoint(c, found, path))
        return 1;
    if (found == 0 && rank == 0) {
        fprintf(stderr, "zerotrain: notice: no valid checkpoint in %s; starting from "
                        "scratch\n", c->a.ckpt_dir);
    } else if (found > 0) {
        uint64_t want_seed = c->st.seed;
        int ok = zt_checkpoint_load(c->e, path, &c->st) == 0;
        if (!ok)
            die("%s", zt_engine_last_error(c->e));
        if (!all_ok(c->e, ok))
            return 1;
        snprintf(c->last_ckpt, sizeof c->last_ckpt, "%s", path);
        if (c->st.seed != want_seed && rank == 0)
            fprintf(stderr, "zerotrain: notice: continuing with the checkpoint's seed %" PRIu64
                            " (not %" PRIu64 ")\n", c->st.seed, want_seed);
        if (rank == 0)
            fprintf(stderr, "zerotrain: resumed from %s at step %" PRId64 "\n", path,
                    c->st.step);
    }
    return 0;
}

/* --resume-from DIR or --resume, then what the run trains with, kept in its checkpoints (a
 * resume that changed it says so); 0, or 1 after printing why not */
static int resume(train_ctx *c)
{
    if (c->a.resume_from) { /* that checkpoint, which must verify */
        int ok = zt_checkpoint_load(c->e, c->a.resume_from, &c->st) == 0;
        if (!ok)
            die("%s", zt_engine_last_error(c->e));
        if (!all_ok(c->e, ok))
            return 1;
        snprintf(c->last_ckpt, sizeof c->last_ckpt, "%s", c->a.resume_from);
        if (c->rank == 0)
            fprintf(stderr, "zerotrain: resumed from %s at step %" PRId64 "\n",
                    c->a.resume_from, c->st.step);
    }
    if (c->a.resume && resume_latest(c))
        return 1;
    char id[128]; /* (ckptdir_run_info fails only out of memory) */
    const char *data = c->a.finetune ? c->a.train : c->data_dir;
    data_identity(data, c->synth_seed, id, sizeof id);
    if (ckptdir_run_info(c->e, c->rank, c->seq, c->ts->train_batch_size, id, data,
                         c->cd_msg, sizeof c->cd_msg) < 0) {
        die("%s", c->cd_msg);
        return 1;
    }
    return 0;
}

/* model_type as the start-up line names the family */
static const char *family_name(const char *model_type)
{
    static const char *const names[][2] = {{"t5", "T5"},           {"mt5", "T5"},
                                           {"roberta", "RoBERTa"}, {"distilbert", "DistilBERT"},
                                           {"electra", "ELECTRA"}, {"albert", "ALBERT"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(model_type, names[i][0]) == 0)
            return names[i][1];
    return "BERT";
}

/* Rank 0's account of the run before its first step: the memory and recomputation plans,
 * the predicted model state, the model and batch, and (BERT) the unigram baseline */
static void print_start(train_ctx *c)
{
    const zt_model_info *mi = &c->mi;
    const zt_train_settings *ts = c->ts;
    zt_engine_report er;
    if (c->rank != 0)
        return;
    if (zt_engine_memory_plan(c->e)[0])
        fprintf(stderr, "%s\n", zt_engine_memory_plan(c->e));
    if (zt_engine_recompute_plan(c->e)[0])
        fprintf(stderr, "%s\n", zt_engine_recompute_plan(c->e));
    zt_engine_report_get(c->e, &er);
    fprintf(stderr, "model state per rank predicted (stage %d, %d ranks): %.1f MiB by the "
                    "formula + %.1f MiB of buffers\n",
            er.zero_stage, er.world_size, er.predicted_state_bytes / 1048576.0,
            er.buffer_bytes / 1048576.0);
    char prec[160] = "";
    if (ts->precision != ZT_PREC_FP32) { /* (the gradients' dtype as the engine settles it) */
        int g = ts->grad_accum_dtype, fp16 = ts->precision == ZT_PREC_FP16, k = ts->comm_dtype;
        const char *gd = g == ZT_GRAD_BF16 ? "bf16" : g == ZT_GRAD_FP16 || (!g && fp16)
                                                                  ? "fp16" : "fp32";
        const char *cd = k == ZT_GRAD_AUTO ? gd : k == ZT_GRAD_BF16 ? "bf16"
                         : k == ZT_GRAD_FP16 ? "fp16" : "fp32";
        char sc[64] = "";
        if (fp16)
            snprintf(sc, sizeof sc, ", %s loss scale %g", ts->loss_scale > 0 ? "static"
                                                                           : "dynamic",
                     zt_engine_loss_scale(c->e));
        snprintf(prec, sizeof prec, ", %s (fp32 master, %s gradients reduced in %s%s)",
                 fp16 ? "fp16" : "bf16", gd, cd, sc);
    }
    fprintf(stderr, "zerotrain %s: %s L%d H%d A%d V%d, %zu parameters; steps %" PRId64
                    "..%ld, batch %d = %d x %d x %d ranks, seq %ld%s, %s\n",
            zt_version(), family_name(mi->model_type), mi->num_layers,
            mi->hidden_size, mi->num_heads, mi->vocab_size, mi->num_parameters,
            c->st.step + 1, c->steps, ts->train_batch_size, ts->micro_batch_size,
            ts->grad_accum_steps, c->world, c->seq, prec,
            c->a.finetune ? c->a.train : c->data_dir ? c->data_dir : "synthetic data");
    if (c->a.finetune && c->t2t) {
        uint64_t rows = t2t_source_rows(c->src.t2t);
        fprintf(stderr, "finetune: %s, text2text, %" PRIu64 " training rows (an epoch is %.1f "
                        "steps)%s", mi->architecture, rows, (double)rows / ts->train_batch_size,
                c->eval_src.t2t ? ", " : "\n");
        if (c->eval_src.t2t)
            fprintf(stderr, "%" PRIu64 " evaluation rows\n", t2t_source_rows(c->eval_src.t2t));
        if (t2t_source_truncated(c->src.t2t) || t2t_source_target_truncated(c->src.t2t))
            fprintf(stderr, "zerotrain: notice: of the %" PRIu64 " training rows, %" PRIu64
                            " inputs are longer than --seq-len %ld and %" PRIu64 " targets longer "
                            "than --target-len %ld tokens: truncated\n", rows,
                    t2t_source_truncated(c->src.t2t), c->seq,
                    t2t_source_target_truncated(c->src.t2t), c->target_len);
        return;
    }
    if (c->a.finetune) {
        uint64_t rows = cls_source_rows(c->src.cls);
        fprintf(stderr, "finetune: %s, %d label%s (%s), %" PRIu64 " training rows (an epoch is "
                        "%.1f steps)%s", mi->architecture, c->num_labels,
                c->num_labels == 1 ? "" : "s", lab_problem_name(c->problem), rows,
                (double)rows / ts->train_batch_size, c->eval_src.cls ? ", " : "\n");
        if (c->eval_src.cls)
            fprintf(stderr, "%" PRIu64 " evaluation rows\n", cls_source_rows(c->eval_src.cls));
        if (cls_source_truncated(c->src.cls))
            fprintf(stderr, "zerotrain: notice: %" PRIu64 " of the %" PRIu64 " training rows "
                            "are longer than --seq-len %ld tokens and were truncated\n",
                    cls_source_truncated(c->src.cls), rows, c->seq);
        return;
    }
    if (c->src.electra) {
        fprintf(stderr, "ELECTRA joint pretraining: generator L%d H%d A%d I%d sharing the "
                        "embeddings; loss = gen_weight x the generator's masked-LM "
                        "cross-entropy + disc_weight x the discriminator's replaced-token "
                        "detection (1 and 50, or the folder's electra_pretraining.json)\n",
                mi->generator_layers, mi->generator_hidden_size, mi->generator_heads,
                mi->generator_intermediate_size);
    } else if (strcmp(mi->model_type, "t5") != 0 &&
        isfinite(c->unigram = unigram_loss(c->data, mi->vocab_size))) {
        if (c->src.sop) /* + the sentence-order loss of a coin: ln 2 */
            c->unigram += log(2.0);
        fprintf(stderr, "unigram baseline %.4f: the loss of predicting each masked token from "
                        "its frequency in the %s alone%s; a loss below it is learning more "
                        "than counting\n", c->unigram, c->data ? "corpus" : "(uniform) synthetic ids",
                c->src.sop ? ", plus ln 2 for the sentence order" : "");
    }
}

/* The micro-batches' buffers, the start-up account and the metrics file; 0, or 1 after
 * printing why not */
static int prepare_run(train_ctx *c)
{
    int gas = c->ts->grad_accum_steps, micro = c->ts->micro_batch_size;
    size_t cells = (size_t)micro * (size_t)c->seq, lcells = (size_t)micro * (size_t)c->src.Tl;
    size_t vcells = (size_t)micro * (size_t)c->src.NL;
    if (!(c->bufs = calloc((size_t)gas, sizeof *c->bufs)) ||
        !(c->batches = calloc((size_t)gas, sizeof *c->batches))) {
        die("out of memory");
        return 1;
    }
    for (int k = 0; k < gas; k++)
        if (batch_alloc(&c->bufs[k], cells, lcells, vcells) < 0) {
            die("out of memory");
            return 1;
        }
    print_start(c);
    /* (opened, or truncated, only now that the run has passed its start-up checks) */
    if (c->a.metrics && c->rank == 0 &&
        !(c->metrics = fopen(c->a.metrics, c->st.step > 0 ? "a" : "w"))) {
        die("%s: cannot open: %s", c->a.metrics, strerror(errno));
        return 1;
    }
    return 0;
}

/* The training loop's running figures, from one step to the next */
typedef struct loop_state {
    double t_start, t_last;        /* the loop's start, the last progress line's time */
    uint64_t tokens_total;
    double shown_sum;              /* the finite losses since the last progress line */
    int shown_n;
    int64_t skipped_total, skipped_run; /* steps skipped in all, and in a row */
    int64_t overflows;             /* fp16: steps skipped for an overflow (not counted above) */
} loop_state;

/* One step's outcome */
typedef struct step_result {
    double t0;                     /* its start */
    double lr, loss, flops;        /* loss: the mean over the labelled tokens of every rank */
    uint64_t tokens;
    zt_step_info si;
} step_result;

/* One optimizer step over this rank's grad_accum_steps micro-batches: their rows, forward
 * and backward, the step (which the engine may skip: sr->si.skipped), and the loss summed
 * over the ranks. The data moves on either way. 0, or 1 after printing why not. */
static int train_step(train_ctx *c, step_result *sr)
{
    const zt_train_settings *ts = c->ts;
    int gas = ts->grad_accum_steps, micro = ts->micro_batch_size;
    double loss_sum = 0.0;
    int64_t labels = 0;
    sr->t0 = now();
    sr->lr = zt_train_config_lr(c->tc, c->st.step);
    sr->flops = 0.0;
    uint64_t base = c->st.samples + (uint64_t)c->rank * (uint64_t)micro * (uint64_t)gas;
    /* the loss's elements, the real tokens, the second loss's (the SOP rows, ELECTRA's
     * attended tokens) */
    int64_t counts[3] = {0, 0, 0};
    for (int k = 0; k < gas; k++) {
        int64_t nl;
        uint64_t tok;
        if (source_fill(&c->src, base + (uint64_t)k * (uint64_t)micro, micro, &c->bufs[k],
                        &c->batches[k], &nl, &tok) < 0)
            return die("data: %s", zt_last_error());
        counts[0] += nl;
        counts[1] += (int64_t)tok;
        counts[2] += c->batches[k].sentence_order_label ? micro : 0;
        for (int i = 0; c->src.electra && i < micro * c->src.T; i++)
            counts[2] += !c->batches[k].attention_mask || c->batches[k].attention_mask[i] == 1;
    }
    /* the step's mean is over the labelled tokens (a classifier's rows) of every rank */
    if (zt_engine_sum_i64(c->e, counts, 3) < 0)
        return die("step %" PRId64 ": %s", c->st.step + 1, zt_engine_last_error(c->e));
    labels = counts[0];
    zt_engine_zero_grad(c->e);
    for (int k = 0; k < gas; k++) {
        zt_fb_result r;
        zt_batch b = c->batches[k];
        b.label_count = labels;
        b.aux_count = counts[2];
        if (zt_engine_forward_backward(c->e, &b, 0, &r) < 0)
            return die("step %" PRId64 ": %s", c->st.step + 1, zt_engine_last_error(c->e));
        loss_sum += r.loss_sum;
        sr->flops += r.flops;
    }
    if (zt_engine_step(c->e, (float)sr->lr, &sr->si) < 0)
        return die("step %" PRId64 ": %s", c->st.step + 1, zt_engine_last_error(c->e));
    sr->lr = sr->si.lr; /* (Adafactor's relative step size) */
    if (c->world > 1) { /* loss sums added in rank order: the same on every rank and run */
        double *all = malloc(sizeof(double) * (size_t)c->world);
        if (!all || zt_engine_gather_f64(c->e, &loss_sum, 1, all) < 0) {
            die("step %" PRId64 ": gathering the loss: %s", c->st.step + 1,
                all ? zt_engine_last_error(c->e) : "out of memory");
            free(all);
            return 1;
        }
        loss_sum = 0.0;
        for (int r = 0; r < c->world; r++)
            loss_sum += all[r];
        free(all);
    }
    /* the data moves on either way; a skipped step leaves the step count as it was */
    c->st.samples += (uint64_t)ts->train_batch_size;
    sr->loss = labels ? loss_sum / (double)labels : 0.0;
    sr->tokens = (uint64_t)counts[1];
    return 0;
}

/* A step the engine skipped (its loss or gradient norm was not finite): a warning, a
 * metrics line, and the end of the run after zerotrain.max_skipped_steps of them in a row;
 * fp16's overflows (the loss scale lowered, as DeepSpeed's dynamic loss scaling does) are a
 * notice and do not count. 0, or 1 after printing why the run ends */
static int step_skipped(train_ctx *c, loop_state *ls, const step_result *sr)
{
    const zt_step_info *si = &sr->si;
    char where[200] = "";
    if (si->overflow) {
        ls->overflows++;
        if (c->rank == 0)
            fprintf(stderr, "%szerotrain: step %" PRId64 ": the fp16 gradients overflowed at "
                    "loss scale %g: the step is skipped, the scale is now %g (%" PRId64
                    " overflows)\n", c->tty ? "\n" : "", c->st.step + 1, si->loss_scale,
                    zt_engine_loss_scale(c->e), ls->overflows);
        if (c->metrics && c->rank == 0)
            write_metrics(c->metrics, c->st.step + 1, sr->loss, sr->lr, si->grad_norm,
                          sr->tokens, now() - sr->t0, NULL, 1, ls->skipped_total, si, 1);
        return 0;
    }
    ls->skipped_total++;
    ls->skipped_run++;
    if (si->nonfinite_unit >= 0)
        snprintf(where, sizeof where, "; the first unit with a non-finite gradient is "
                 "%d \"%s\"", si->nonfinite_unit, zt_engine_unit_name(c->e, si->nonfinite_unit));
    else
        snprintf(where, sizeof where, "; the gradients are finite, the loss is not");
    if (c->rank == 0)
        fprintf(stderr, "%szerotrain: warning: step %" PRId64 " skipped: loss %g, "
                "gradient norm %g%s (%" PRId64 " in a row, %" PRId64 " in all; the "
                "parameters and optimizer state are unchanged)\n", c->tty ? "\n" : "",
                c->st.step + 1, isnan(sr->loss) ? NAN : sr->loss, isnan(si->grad_norm) ? NAN :
                si->grad_norm, where, ls->skipped_run, ls->skipped_total);
    if (c->metrics && c->rank == 0)
        write_metrics(c->metrics, c->st.step + 1, sr->loss, sr->lr, si->grad_norm, sr->tokens,
                      now() - sr->t0, NULL, 1, ls->skipped_total, si, c->fp16);
    if (ls->skipped_run >= c->ts->max_skipped_steps) {
        die("step %" PRId64 ": %" PRId64 " steps in a row were skipped (their loss or "
            "gradient norm was not finite; zerotrain.max_skipped_steps %d): the run "
            "diverged. The last good checkpoint is %s", c->st.step + 1, ls->skipped_run,
            c->ts->max_skipped_steps,
            c->last_ckpt[0] ? c->last_ckpt : "none (no checkpoint was written or resumed)");
        return 1;
    }
    return 0;
}

/* A classifier's evaluation over --eval, into *ev (and a line from rank 0); 0, or 1 after
 * printing why not */
static int step_eval_cls(train_ctx *c, eval_result *ev)
{
    cls_metrics m;
    if (evaluate_cls(c->e, &c->eval_src, c->ts->micro_batch_size, &c->bufs[0], c->rank,
                     c->world, &m))
        return 1;
    *ev = (eval_result){m.loss, 1, c->problem == LAB_REGRESSION, m.accuracy, m.f1_macro, m.mse,
                        0, NAN, NAN};
    if (c->rank != 0)
        return 0;
    if (ev->regression)
        fprintf(stderr, "%sstep %" PRId64 "  eval_loss %.4f  eval_mse %.4f  (%" PRId64
                " rows)\n", c->tty ? "\n" : "", c->st.step, m.loss, m.mse, m.rows);
    else
        fprintf(stderr, "%sstep %" PRId64 "  eval_loss %.4f  eval_accuracy %.4f  "
                "eval_f1_macro %.4f  (%" PRId64 " rows)\n", c->tty ? "\n" : "", c->st.step,
                m.loss, m.accuracy, m.f1_macro, m.rows);
    return 0;
}

/* text2text's evaluation over --eval, into *ev (and a line from rank 0); 0, or 1 after
 * printing why not */
static int step_eval_t2t(train_ctx *c, eval_result *ev)
{
    double m[4];
    if (evaluate_t2t(c->e, &c->eval_src, c->tok, c->ts->micro_batch_size, &c->bufs[0], c->rank,
                     c->world, m))
        return 1;
    *ev = (eval_result){m[0], 0, 0, NAN, NAN, NAN, 1, m[1], m[2]};
    if (c->rank == 0)
        fprintf(stderr, "%sstep %" PRId64 "  eval_loss %.4f  eval_token_accuracy %.4f  "
                "eval_exact_match %.4f  (%.0f rows, greedy)\n", c->tty ? "\n" : "", c->st.step,
                m[0], m[1], m[2], m[3]);
    return 0;
}

/* --eval-data's loss after the step just done, into *ev (and a line from rank 0); 0, or 1
 * after printing why not */
static int step_eval(train_ctx *c, eval_result *ev)
{
    uint64_t ns = source_samples(&c->eval_src);
    int64_t counted = 0;
    if (c->eval_src.cls)
        return step_eval_cls(c, ev);
    if (c->eval_src.t2t)
        return step_eval_t2t(c, ev);
    memset(ev, 0, sizeof *ev);
    if (evaluate(c->e, &c->eval_src, c->ts->micro_batch_size,
                 ns < (uint64_t)c->eval_samples ? ns : (uint64_t)c->eval_samples, &c->bufs[0],
                 c->rank, c->world, &ev->loss, &counted))
        return 1;
    if (c->rank == 0 && counted)
        fprintf(stderr, "%sstep %" PRId64 "  eval_loss %.4f\n", c->tty ? "\n" : "",
                c->st.step, ev->loss);
    else if (c->rank == 0)
        fprintf(stderr, "%sstep %" PRId64 "  eval_loss none: the evaluation samples "
                "have no labelled token\n", c->tty ? "\n" : "", c->st.step);
    return 0;
}

/* a checkpoint of step st.step in --checkpoint-dir (collective); 0, or 1 after printing
 * why not */
static int save_checkpoint(train_ctx *c)
{
    if (zt_checkpoint_save(c->e, c->a.ckpt_dir, &c->st, c->cfg_text, (int)c->keep) < 0)
        return die("%s", zt_engine_last_error(c->e));
    ckptdir_saved(c->cd, c->e);
    if (c->rank == 0 && (c->data_dir || c->tok)) { /* the tokenizer, for export (once per
                                                     * dataset) */
        char id[128], msg[1024];
        long mml = c->mi.max_positions > 0 ? c->mi.max_positions : 512;
        data_identity(c->tok ? c->a.train : c->data_dir, c->synth_seed, id, sizeof id);
        if ((c->tok ? tok_store_tokenizer(c->tok, id, c->a.ckpt_dir, mml, msg, sizeof msg)
                    : tok_store_for_checkpoints(c->data_dir, id, c->a.ckpt_dir, mml, msg,
                                                sizeof msg)) < 0)
            fprintf(stderr, "zerotrain: warning: the checkpoints have no tokenizer (export "
                            "writes the model without one): %s\n", msg);
    }
    return 0;
}

/* After a step that counted: the evaluation when due, the step's timing, its metrics line,
 * the progress line when due (the mean loss since the last one, as HF logs it) and the
 * checkpoint when due; 0, or 1 after printing why not */
static int step_done(train_ctx *c, loop_state *ls, const step_result *sr)
{
    const train_args *a = &c->a;
    eval_result ev, *evp = NULL;
    int ft_eval = c->eval_src.cls || c->eval_src.t2t; /* finetune: at the end too */
    if ((c->eval_src.mlm || c->eval_src.span || ft_eval) &&
        ((c->eval_every && c->st.step % c->eval_every == 0) ||
         (ft_eval && c->st.step == c->steps))) {
        if (step_eval(c, &ev))
            return 1;
        evp = &ev;
        c->evaluated_at = c->st.step;
    }
    double t1 = now();
    if (stats_step(&c->stats, t1 - sr->t0, sr->flops, a->profile)) {
        zt_engine_report er0;
        zt_engine_report_get(c->e, &er0);
        stats_comm_mark(&c->stats, &er0);
    }
    if (c->metrics && c->rank == 0)
        write_metrics(c->metrics, c->st.step, sr->loss, sr->lr, sr->si.grad_norm, sr->tokens,
                      t1 - sr->t0, evp, 0, ls->skipped_total, &sr->si, c->fp16);
    if (isfinite(sr->loss)) {
        ls->shown_sum += sr->loss;
        ls->shown_n++;
    }
    int64_t step = c->st.step, steps = c->steps;
    int print_now = c->tty ? (t1 - ls->t_last > 0.25 || step == steps)
                           : (step % c->ts->steps_per_print == 0 || step == steps);
    if (print_now && c->rank == 0) {
        double el = t1 - ls->t_start, tps = ls->tokens_total / (el > 1e-9 ? el : 1e-9);
        double eta = (double)(steps - step) * el / (double)(step - c->first_step);
        progress(c->tty, step, steps, ls->shown_n ? ls->shown_sum / ls->shown_n : sr->loss,
                 c->unigram, sr->lr, tps, eta);
        ls->t_last = t1;
        ls->shown_sum = 0.0;
        ls->shown_n = 0;
    }
    if (a->ckpt_dir && c->ckpt_every && step % c->ckpt_every == 0 && step < steps) {
        if (save_checkpoint(c))
            return 1;
        snprintf(c->last_ckpt, sizeof c->last_ckpt, "%s/step-%" PRId64, a->ckpt_dir, step);
    }
    return 0;
}

/* The steps from st.step to --steps, measured after --warmup steps; 0, or 1 after printing
 * why not */
static int train_loop(train_ctx *c)
{
    loop_state ls = {0};
    ls.t_start = ls.t_last = now();
    c->first_step = c->st.step;
    if (stats_init(&c->stats, c->steps - c->first_step, (int)c->warmup) < 0)
        return die("out of memory");
    if (c->warmup == 0) { /* measure from the first step */
        zt_engine_report er0;
        zt_engine_report_get(c->e, &er0);
        stats_comm_mark(&c->stats, &er0);
        if (c->a.profile) {
            zt_profile_reset();
            zt_profile_enable(1);
        }
    }
    while (c->st.step < c->steps) {
        step_result sr;
        if (train_step(c, &sr))
            return 1;
        ls.tokens_total += sr.tokens;
        if (sr.si.skipped) {
            if (step_skipped(c, &ls, &sr))
                return 1;
            continue;
        }
        ls.skipped_run = 0;
        c->st.step++;
        if (step_done(c, &ls, &sr))
            return 1;
    }
    if (c->tty && c->rank == 0)
        fputc('\n', stderr);
    return 0;
}

/* --summary's JSON (collective: rank 0 writes it); 0, or 1 after printing why not */
static int write_summary(train_ctx *c)
{
    static const char *const dev[] = {"none", "cpu", "nvme"};
    const zt_train_settings *ts = c->ts;
    char off[64] = "none";
    zt_engine_report erx;
    zt_engine_report_get(c->e, &erx);
    if (erx.offload_optimizer || erx.offload_param)
        snprintf(off, sizeof off, "optimizer:%s+grads:%s+params:%s",
                 dev[erx.offload_optimizer % 3],
                 dev[erx.offload_gradients ? erx.offload_optimizer % 3 : 0],
                 dev[erx.offload_param % 3]);
    stats_context sx = {c->a.model, c->mi.num_parameters, c->cfg.threads, ts->micro_batch_size,
                        ts->grad_accum_steps, ts->train_batch_size, (int)c->seq, off,
                        c->rc_name,
                        ts->optimizer == ZT_OPT_ADAMW8BIT  ? "adamw8bit"
                        : ts->optimizer == ZT_OPT_ADAFACTOR ? "adafactor" : "adamw"};
    if (stats_write_summary(c->a.summary, &c->stats, &sx, c->e, c->rank, c->world) < 0)
        return die("%s: cannot write the summary", c->a.summary);
    return 0;
}

/* Rank 0's closing account from er: the model state and collectives measured over the
 * steps run, or that there was no step to run; then the memory */
static void print_final(const train_ctx *c, const zt_engine_report *er)
{
    int64_t steps_run = c->st.step - c->first_step;
    if (c->rank != 0)
        return;
    if (steps_run > 0) {
        fprintf(stderr,
                "model state per rank (stage %d, %d ranks): measured %zu bytes; formula %zu "
                "+ buffers %zu = %zu\n"
                "optimizer state per rank: %zu bytes, %.3f per parameter updated\n"
                "collectives per step: reduce-scatter %.0f bytes, all-gather %.0f bytes "
                "(%.2f x the %zu parameter bytes; schedule %.2f x, textbook %.0f x); "
                "waited %.3f s of %.3f s in flight (%s progress)\n",
                er->zero_stage, er->world_size, er->measured_state_bytes,
                er->predicted_state_bytes, er->buffer_bytes,
                er->predicted_state_bytes + er->buffer_bytes, er->optimizer_state_bytes,
                er->optimizer_bytes_per_param,
                (double)er->coll_bytes[0] / (double)steps_run,
                (double)er->coll_bytes[1] / (double)steps_run,
                (double)(er->coll_bytes[0] + er->coll_bytes[1]) / (double)steps_run /
                    (double)(er->params * 4),
                er->params * 4, er->traffic_schedule, er->traffic_theory,
                (er->coll_seconds[0] + er->coll_seconds[1]) / (double)steps_run,
                (er->coll_flight[0] + er->coll_flight[1]) / (double)steps_run,
                er->progress == ZT_PROGRESS_THREAD ? "thread" : "poll");
        if (er->zero_stage >= 3)
            fprintf(stderr, "stage 3: at most %.1f MiB of parameters gathered at once\n",
                    er->gathered_peak / 1048576.0);
    }
    if (c->st.step == c->first_step)
        fprintf(stderr, "zerotrain: step %" PRId64 " already reached; nothing to train\n",
                c->st.step);
    else
        print_memory(stderr);
}

/* The end of the run: the last checkpoint, the recomputation and --profile reports, the
 * summary, the model (--save-model) and the closing account; 0, or 1 after printing why
 * not */
static int finish(train_ctx *c)
{
    const train_args *a = &c->a;
    zt_engine_report er;
    /* (resumed from elsewhere with no step to take: saved again, laid out for this world
     * size and stage) */
    if (a->ckpt_dir && (c->st.step > c->first_step || a->resume_from) && save_checkpoint(c))
        return 1;
    zt_engine_report_get(c->e, &er); /* before the model's save, whose stage-3 gathers are
                                      * not per step */
    zt_profile_enable(0);
    if (c->rank == 0)
        print_recompute(c->e, c->cfg.recompute_profile && c->st.step > c->first_step);
    if (a->profile && c->rank == 0) {
        if (c->stats.n > 0)
            stats_print_profile(stderr, &c->stats);
        else
            fprintf(stderr, "zerotrain: notice: --profile: no step after the %ld warm-up "
                            "steps\n", c->warmup);
    }
    if (a->summary && write_summary(c))
        return 1;
    if (a->save) { /* collective: every rank takes part, rank 0 writes */
        char msg[1024];
        if ((a->save_dtype && zt_engine_set_save_dtype(c->e, save_dtype_of(a->save_dtype)) < 0) ||
            zt_engine_save_model(c->e, a->save) < 0)
            return die("%s", zt_engine_last_error(c->e));
        /* with the tokenizer of the data it was trained on, so that the folder loads in
         * AutoTokenizer as well as in AutoModel */
        long mml = c->mi.max_positions > 0 ? c->mi.max_positions : 512;
        if (c->rank == 0 && (c->data_dir || c->tok) &&
            (c->tok ? tok_save(c->tok, a->save, mml, msg, sizeof msg)
                    : tok_save_data_tokenizer(c->data_dir, a->save, mml, msg, sizeof msg)) < 0)
            return die("%s: the model is saved, its tokenizer not: %s", a->save, msg);
        if (c->rank == 0)
            fprintf(stderr, "saved the model to %s\n", a->save);
    }
    print_final(c, &er);
    return 0;
}

/* The phases in order. Until the start-up agreement each rank goes on alone and stops at
 * its first failure; from the agreement on every rank takes the same path. */
static int run(int argc, char **argv, int finetune)
{
    train_ctx c;
    int rc;
    train_ctx_init(&c);
    c.a.finetune = finetune;
    rc = parse_args(&c, argc, argv);
    if (rc == 0)
        rc = read_config(&c);
    if (rc == 0)
        rc = open_data(&c);
    if (rc == 0)
        rc = build_config(&c);
    if (rc == 0)
        rc = check_outputs(&c);
    rc = agree(&c, rc);
    if (rc == 0)
        rc = start_engine(&c);
    if (rc == 0)
        rc = resume(&c);
    if (rc == 0)
        rc = prepare_run(&c);
    if (rc == 0)
        rc = train_loop(&c);
    if (rc == 0)
        rc = finish(&c);
    train_ctx_free(&c, rc);
    return rc;
}

int cmd_train(int argc, char **argv) { return run(argc, argv, 0); }

/* `zerotrain finetune --task classify`: the same run over a labelled file's rows, the model
 * a BertForSequenceClassification */
int cmd_finetune(int argc, char **argv) { return run(argc, argv, 1); }
