/* cmd_predict.c - `zerotrain predict`: a trained BERT folder used, forward only
 * (zt_config.inference: no gradients, no optimizer state, one layer's activations at a time;
 * stage 3 and offloaded parameters stream as in training, under --config). --task classify
 * labels the rows of a file (JSON Lines out, written whole at the end); --task fill-mask
 * prints the top candidates for each [MASK] of a text. Not here: T5 generation. */
#include "cli.h"
#include "clsdata.h"
#include "clstok.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct predict_args {
    const char *model, *task, *input, *output, *text, *top_k, *config, *text_field,
        *pair_field, *seq, *batch, *threads, *tokenizer;
} predict_args;

typedef struct predict_ctx {
    predict_args a;
    int rank, world;
    long top_k, seq, batch, threads;
    char *cfg_text;
    zt_train_config *tc;
    zt_config cfg;
    wp_tokenizer *wp;
    lab_data *rows;
    lab_map *map;
    cls_source *src;
    zt_engine *e;
    zt_model_info mi;
    char err[2048];
} predict_ctx;

static void ctx_free(predict_ctx *c)
{
    zt_engine_destroy(c->e);
    cls_source_destroy(c->src);
    lab_free(c->rows);
    lab_map_free(c->map);
    wp_free(c->wp);
    zt_train_config_destroy(c->tc);
    free(c->cfg_text);
}

static int parse(predict_ctx *c, int argc, char **argv)
{
    predict_args *a = &c->a;
    opt opts[] = {{"--model", &a->model},     {"--task", &a->task},
                  {"--input", &a->input},     {"--output", &a->output},
                  {"--text", &a->text},       {"--top-k", &a->top_k},
                  {"--config", &a->config},   {"--text-field", &a->text_field},
                  {"--text-pair-field", &a->pair_field}, {"--seq-len", &a->seq},
                  {"--batch-size", &a->batch}, {"--threads", &a->threads},
                  {"--tokenizer", &a->tokenizer}};
    c->top_k = 5;
    c->seq = 512;
    c->batch = 0;
    c->threads = -1;
    if (parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0])))
        return 2;
    if (!a->model || !a->task)
        return die("predict needs --model DIR and --task classify|fill-mask"), 2;
    if ((a->top_k && parse_int(a->top_k, "--top-k", 1, 1 << 20, &c->top_k)) ||
        (a->seq && parse_int(a->seq, "--seq-len", 3, 1 << 20, &c->seq)) ||
        (a->batch && parse_int(a->batch, "--batch-size", 1, 1 << 20, &c->batch)) ||
        (a->threads && parse_int(a->threads, "--threads", 0, 1024, &c->threads)))
        return 2;
    if (strcmp(a->task, "classify") == 0) {
        if (!a->input || !a->output)
            return die("predict --task classify needs --input FILE and --output FILE"), 2;
        if (a->text || a->top_k)
            return die("%s is fill-mask's", a->text ? "--text" : "--top-k"), 2;
    } else if (strcmp(a->task, "fill-mask") == 0) {
        if (!a->text)
            return die("predict --task fill-mask needs --text \"... [MASK] ...\""), 2;
        if (a->input || a->output || a->text_field || a->pair_field)
            return die("%s is classify's (fill-mask reads --text)",
                       a->input ? "--input" : a->output ? "--output"
                       : a->text_field ? "--text-field" : "--text-pair-field"), 2;
    } else {
        return die("--task %s: predict knows classify and fill-mask", a->task), 2;
    }
    struct stat sb;
    if (stat(a->model, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return die("--model %s: not a folder (predict runs a trained Hugging Face folder)",
                   a->model), 1;
    return 0;
}

/* the engine, forward only, over --config's stage and offload (its micro batch: the batch
 * size unless --batch-size) */
static int start(predict_ctx *c, int head)
{
    int rc;
    if (c->a.config) {
        if (zt_file_read_all(c->a.config, 16u << 20, &c->cfg_text, NULL) < 0)
            return die("%s", zt_last_error());
        rc = zt_train_config_parse(c->cfg_text, c->a.config, c->world, 1, &c->tc);
    } else {
        rc = zt_train_config_parse("{\"train_micro_batch_size_per_gpu\": 32}", "(default config)",
                                   c->world, 1, &c->tc);
    }
    if (rc < 0)
        return die("%s", zt_last_error());
    zt_config_init(&c->cfg);
    zt_train_config_apply(c->tc, &c->cfg);
    if (!c->batch)
        c->batch = zt_train_config_settings(c->tc)->micro_batch_size;
    c->cfg.model_dir = c->a.model;
    c->cfg.inference = 1;
    c->cfg.dropout = 0;
    c->cfg.head = head;
    c->cfg.plan_micro_batch = (int)c->batch;
    c->cfg.plan_seq_len = (int)c->seq;
    if (c->threads >= 0)
        c->cfg.threads = (int)c->threads;
    if (zt_engine_create(&c->cfg, MPI_COMM_WORLD, &c->e) < 0)
        return die("%s", zt_last_error());
    zt_engine_model_info(c->e, &c->mi);
    if (c->mi.max_positions > 0 && c->seq > c->mi.max_positions)
        c->seq = c->mi.max_positions;
    return 0;
}

/* ---- classify ---------------------------------------------------------------------------- */

/* one row's line: {"label": ..., "scores": {...}} (multi-label: "labels" and the list) */
static void write_row(FILE *f, const zt_engine *e, const zt_model_info *mi, const double *x)
{
    int NL = mi->num_labels, pr = mi->problem_type ? mi->problem_type
                                  : NL == 1 ? ZT_PROBLEM_REGRESSION : ZT_PROBLEM_SINGLE_LABEL;
    cJSON *o = cJSON_CreateObject(), *sc = cJSON_CreateObject(), *ls = NULL;
    char *line;
    if (pr == ZT_PROBLEM_REGRESSION) {
        cJSON_AddStringToObject(o, "label", zt_engine_label_name(e, 0));
        cJSON_AddNumberToObject(o, "score", x[0]);
        cJSON_Delete(sc);
        sc = NULL;
    } else if (pr == ZT_PROBLEM_MULTI_LABEL) {
        ls = cJSON_AddArrayToObject(o, "labels");
        for (int k = 0; k < NL; k++) {
            double p = 1.0 / (1.0 + exp(-x[k]));
            cJSON_AddNumberToObject(sc, zt_engine_label_name(e, k), p);
            if (p > 0.5)
                cJSON_AddItemToArray(ls, cJSON_CreateString(zt_engine_label_name(e, k)));
        }
    } else { /* softmax */
        int best = 0;
        double mx = x[0], sum = 0.0;
        for (int k = 1; k < NL; k++) {
            mx = x[k] > mx ? x[k] : mx;
            best = x[k] > x[best] ? k : best;
        }
        for (int k = 0; k < NL; k++)
            sum += exp(x[k] - mx);
        cJSON_AddStringToObject(o, "label", zt_engine_label_name(e, best));
        for (int k = 0; k < NL; k++)
            cJSON_AddNumberToObject(sc, zt_engine_label_name(e, k), exp(x[k] - mx) / sum);
    }
    if (sc)
        cJSON_AddItemToObject(o, "scores", sc);
    if ((line = cJSON_PrintUnformatted(o))) {
        fputs(line, f);
        fputc('\n', f);
        free(line);
    }
    cJSON_Delete(o);
}

/* Batch b (rows [b B, b B + B)) is rank b mod N's; each round's logits are gathered and
 * rank 0 writes them in row order. A rank left without a batch in the last round runs
 * batch 0 again and drops it (stage 3's gathers are collective). */
static int classify(predict_ctx *c)
{
    char path[4096];
    lab_opts lo = {c->a.text_field, c->a.pair_field, NULL, 1};
    int32_t sp[5];
    snprintf(path, sizeof path, "%s/config.json", c->a.model);
    if (!clstok_config_is_classifier(path))
        return die("--model %s is not a BertForSequenceClassification (config.json's "
                   "architectures): --task classify needs a classifier, such as the folder "
                   "`zerotrain finetune --task classify --save-model DIR` writes", c->a.model);
    if (clstok_open(c->a.tokenizer, c->a.model, &c->wp, c->err, sizeof c->err) < 0 ||
        lab_map_from_config(path, LAB_AUTO, &c->map, c->err, sizeof c->err) < 0 ||
        lab_read(c->a.input, &lo, &c->rows, c->err, sizeof c->err) < 0 ||
        lab_apply(c->rows, c->map, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    if (start(c, ZT_HEAD_AUTO))
        return 1;
    wp_special_ids(c->wp, sp);
    if (cls_source_create(c->rows, c->map, clstok_encode, c->wp, sp[0], (int)c->seq, 0, 0,
                          &c->src, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    int NL = c->mi.num_labels, B = (int)c->batch, rc = 0;
    uint64_t n = cls_source_rows(c->src), nb = (n + (uint64_t)B - 1) / (uint64_t)B;
    uint64_t rounds = (nb + (uint64_t)c->world - 1) / (uint64_t)c->world;
    size_t W = (size_t)B * (size_t)NL + 1, cells = (size_t)B * (size_t)c->seq;
    int64_t *ids = malloc(cells * sizeof *ids), *mask = malloc(cells * sizeof *mask);
    int64_t *tt = malloc(cells * sizeof *tt), *lab = malloc((size_t)B * sizeof *lab);
    float *val = malloc((size_t)B * (size_t)NL * sizeof *val);
    double *mine = malloc(W * sizeof *mine), *all = malloc(W * (size_t)c->world * sizeof *all);
    double t0 = now(), correct = 0, labelled = 0;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = c->rank == 0 ? open_memstream(&out, &out_len) : NULL;
    if (!ids || !mask || !tt || !lab || !val || !mine || !all || (c->rank == 0 && !f)) {
        rc = die("out of memory");
        goto done;
    }
    for (uint64_t k = 0; k < rounds && rc == 0; k++) {
        uint64_t b = k * (uint64_t)c->world + (uint64_t)c->rank;
        uint64_t first = (b < nb ? b : 0) * (uint64_t)B;
        int rows = (int)(n - first < (uint64_t)B ? n - first : (uint64_t)B);
        zt_batch bt;
        zt_fb_result r;
        int64_t nl, shape[3];
        uint64_t tok;
        const float *lg;
        cls_source_fill(c->src, first, rows, ids, mask, tt, lab, val, &bt, &nl, &tok);
        bt.labels = NULL; /* the logits alone */
        bt.label_values = NULL;
        if (zt_engine_evaluate(c->e, &bt, &r) < 0 || zt_engine_logits(c->e, &lg, shape) < 0) {
            rc = die("%s", zt_engine_last_error(c->e));
            break;
        }
        mine[0] = b < nb ? rows : 0;
        for (size_t i = 0; i < (size_t)rows * (size_t)NL; i++)
            mine[1 + i] = lg[i];
        if (zt_engine_gather_f64(c->e, mine, (int)W, all) < 0) {
            rc = die("%s", zt_engine_last_error(c->e));
            break;
        }
        for (int q = 0; c->rank == 0 && q < c->world; q++) {
            const double *x = all + (size_t)q * W;
            uint64_t bq = k * (uint64_t)c->world + (uint64_t)q;
            for (int i = 0; bq < nb && i < (int)x[0]; i++) {
                uint64_t row = bq * (uint64_t)B + (uint64_t)i;
                const double *xi = x + 1 + (size_t)i * NL;
                write_row(f, c->e, &c->mi, xi);
                if (lab_has_labels(c->rows) && lab_map_problem(c->map) == LAB_SINGLE) {
                    int best = 0;
                    for (int j = 1; j < NL; j++)
                        best = xi[j] > xi[best] ? j : best;
                    correct += best == lab_label_id(c->rows, row);
                    labelled++;
                }
            }
        }
    }
    if (f)
        fclose(f);
    f = NULL;
    if (rc == 0 && c->rank == 0) { /* written whole, or not at all */
        const void *parts[1] = {out ? out : ""};
        size_t lens[1] = {out_len};
        if (zt_file_write_atomic(c->a.output, parts, lens, 1) < 0)
            rc = die("%s", zt_last_error());
        else
            fprintf(stderr, "predicted %" PRIu64 " rows in %.2f s (%.1f rows/s) into %s%s",
                    n, now() - t0, (double)n / (now() - t0 + 1e-9), c->a.output,
                    labelled ? "" : "\n");
        if (rc == 0 && labelled)
            fprintf(stderr, "; accuracy against the file's labels %.4f (%.0f rows)\n",
                    correct / labelled, labelled);
    }
done:
    if (f)
        fclose(f);
    free(out);
    free(ids);
    free(mask);
    free(tt);
    free(lab);
    free(val);
    free(mine);
    free(all);
    return rc;
}

/* ---- fill-mask --------------------------------------------------------------------------- */

static int fill_mask(predict_ctx *c)
{
    char path[4096];
    int32_t *ids = NULL, *types = NULL, sp[5];
    size_t n = 0, cap = 0;
    int rc = 0;
    snprintf(path, sizeof path, "%s/config.json", c->a.model);
    if (clstok_open(c->a.tokenizer, c->a.model, &c->wp, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    wp_special_ids(c->wp, sp);
    if (clstok_encode(c->wp, c->a.text, strlen(c->a.text), NULL, 0, (int)c->seq, &ids, &types,
                      &n, &cap, c->err, sizeof c->err) < 0)
        return die("--text: %s", c->err);
    int masks = 0;
    for (size_t i = 0; i < n; i++)
        masks += ids[i] == sp[4];
    if (!masks) {
        free(ids);
        free(types);
        return die("--text has no [MASK] token: fill-mask predicts the words at [MASK]");
    }
    if (clstok_config_is_classifier(path) && c->rank == 0)
        fprintf(stderr, "zerotrain: notice: %s is a BertForSequenceClassification: it has no "
                        "masked-LM head, so one is initialised randomly (as "
                        "AutoModelForMaskedLM does) and its candidates mean nothing\n",
                c->a.model);
    if (start(c, ZT_HEAD_MLM)) {
        free(ids);
        free(types);
        return 1;
    }
    int T = (int)n, V = c->mi.vocab_size;
    int64_t *bi = malloc(sizeof *bi * n), *bm = malloc(sizeof *bm * n),
            *bt = malloc(sizeof *bt * n), *bl = malloc(sizeof *bl * n);
    int *order = malloc(sizeof *order * (size_t)V);
    if (!bi || !bm || !bt || !bl || !order) {
        rc = die("out of memory");
        goto done;
    }
    for (int t = 0; t < T; t++) { /* labels at the masks: their logits are kept */
        bi[t] = ids[t];
        bm[t] = 1;
        bt[t] = 0;
        bl[t] = ids[t] == sp[4] ? 0 : -100;
    }
    zt_batch b = {1, T, bi, bm, bt, bl, 0, 0, 0, NULL, NULL};
    zt_fb_result r;
    const float *lg;
    int64_t shape[3];
    if (zt_engine_evaluate(c->e, &b, &r) < 0 || zt_engine_logits(c->e, &lg, shape) < 0) {
        rc = die("%s", zt_engine_last_error(c->e));
        goto done;
    }
    for (int m = 0, pos = 0; c->rank == 0 && m < (int)shape[1]; m++, pos++) {
        const float *x = lg + (size_t)m * V;
        double mx = x[0], sum = 0.0;
        while (bl[pos] == -100)
            pos++;
        for (int v = 1; v < V; v++)
            mx = x[v] > mx ? x[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp(x[v] - mx);
        int k = (int)(c->top_k < V ? c->top_k : V);
        for (int j = 0; j < k; j++) { /* the k best, highest first (ties: the lower id) */
            int best = -1;
            for (int v = 0; v < V; v++) {
                int taken = 0;
                for (int q = 0; q < j && !taken; q++)
                    taken = order[q] == v;
                if (!taken && (best < 0 || x[v] > x[best]))
                    best = v;
            }
            order[j] = best;
            const char *tok = wp_id_token(c->wp, best);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "token", tok ? tok : "");
            cJSON_AddNumberToObject(o, "token_id", best);
            cJSON_AddNumberToObject(o, "score", exp(x[best] - mx) / sum);
            cJSON_AddNumberToObject(o, "position", pos);
            char *line = cJSON_PrintUnformatted(o);
            if (line)
                printf("%s\n", line);
            free(line);
            cJSON_Delete(o);
        }
    }
done:
    free(ids);
    free(types);
    free(bi);
    free(bm);
    free(bt);
    free(bl);
    free(order);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    predict_ctx c;
    memset(&c, 0, sizeof c);
    MPI_Comm_size(MPI_COMM_WORLD, &c.world);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    int rc = parse(&c, argc, argv);
    if (rc == 0)
        rc = strcmp(c.a.task, "classify") == 0 ? classify(&c) : fill_mask(&c);
    ctx_free(&c);
    return rc;
}
