/* cmd_predict.c - `zerotrain predict`: a trained folder used, forward only
 * (zt_config.inference: no gradients, no optimizer state, one layer's activations at a time;
 * stage 3 and offloaded parameters stream as in training, under --config). --task classify
 * labels the rows of a file with a BERT classifier (JSON Lines out, written whole at the
 * end); --task fill-mask prints the top candidates for each [MASK] of a text; --task
 * generate continues each row's input with a T5 (zt_generate: greedy or beam search over the
 * decoder's key/value caches), one JSON line per row. */
#include "cli.h"
#include "clsdata.h"
#include "clstok.h"
#include "t2tdata.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct predict_args {
    const char *model, *task, *input, *output, *text, *top_k, *config, *text_field,
        *pair_field, *seq, *batch, *threads, *tokenizer, *input_field, *max_new, *beams,
        *length_penalty, *early_stopping;
    int no_cache, with_ids;
} predict_args;

typedef struct predict_ctx {
    predict_args a;
    int rank, world;
    long top_k, seq, batch, threads;
    char *cfg_text;
    zt_train_config *tc;
    zt_config cfg;
    tok_tokenizer *tok;
    lab_data *rows;
    lab_map *map;
    cls_source *src;
    t2t_source *t2t;
    zt_generate_config gen;
    zt_engine *e;
    zt_model_info mi;
    char err[2048];
} predict_ctx;

static void ctx_free(predict_ctx *c)
{
    zt_engine_destroy(c->e);
    cls_source_destroy(c->src);
    t2t_source_destroy(c->t2t);
    lab_free(c->rows);
    lab_map_free(c->map);
    tok_free(c->tok);
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
                  {"--tokenizer", &a->tokenizer}, {"--input-field", &a->input_field},
                  {"--max-new-tokens", &a->max_new}, {"--num-beams", &a->beams},
                  {"--length-penalty", &a->length_penalty}};
    c->top_k = 5;
    c->seq = 512;
    c->batch = 0;
    c->threads = -1;
    zt_generate_config_init(&c->gen);
    /* the flags: --no-cache, --with-ids, and --early-stopping [true|false|never] (alone:
     * true, as generate(early_stopping=True)) */
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--no-cache") == 0)
            a->no_cache = 1;
        else if (strcmp(argv[i], "--with-ids") == 0)
            a->with_ids = 1;
        else if (strcmp(argv[i], "--early-stopping") == 0)
            a->early_stopping = i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[++i]
                                                                                  : "true";
        else
            argv[n++] = argv[i];
    }
    if (parse_opts(n, argv, opts, (int)(sizeof opts / sizeof opts[0])))
        return 2;
    if (!a->model || !a->task)
        return die("predict needs --model DIR and --task classify|fill-mask|generate"), 2;
    if ((a->top_k && parse_int(a->top_k, "--top-k", 1, 1 << 20, &c->top_k)) ||
        (a->seq && parse_int(a->seq, "--seq-len", 3, 1 << 20, &c->seq)) ||
        (a->batch && parse_int(a->batch, "--batch-size", 1, 1 << 20, &c->batch)) ||
        (a->threads && parse_int(a->threads, "--threads", 0, 1024, &c->threads)))
        return 2;
    int gen_opt = a->input_field || a->max_new || a->beams || a->length_penalty ||
                  a->early_stopping || a->no_cache || a->with_ids;
    if (gen_opt && strcmp(a->task, "generate") != 0)
        return die("%s is generate's", a->input_field ? "--input-field" : a->max_new
                   ? "--max-new-tokens" : a->beams ? "--num-beams" : a->length_penalty
                   ? "--length-penalty" : a->early_stopping ? "--early-stopping" : a->no_cache
                   ? "--no-cache" : "--with-ids"), 2;
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
    } else if (strcmp(a->task, "generate") == 0) {
        long v;
        double lp;
        if (!a->input || !a->output)
            return die("predict --task generate needs --input FILE and --output FILE"), 2;
        if (a->text || a->top_k || a->text_field || a->pair_field)
            return die("%s is not generate's (it reads --input's --input-field, \"input\" "
                       "unless given)", a->text ? "--text" : a->top_k ? "--top-k"
                       : a->text_field ? "--text-field" : "--text-pair-field"), 2;
        if (a->max_new) {
            if (parse_int(a->max_new, "--max-new-tokens", 1, 1 << 16, &v))
                return 2;
            c->gen.max_new_tokens = (int)v;
        }
        if (a->beams) {
            if (parse_int(a->beams, "--num-beams", 1, 1024, &v))
                return 2;
            c->gen.num_beams = (int)v;
        }
        if (a->length_penalty) {
            if (parse_float(a->length_penalty, "--length-penalty", -1e6, 1e6, &lp))
                return 2;
            c->gen.length_penalty = (float)lp;
        }
        if (a->early_stopping) {
            const char *es = a->early_stopping;
            if (strcmp(es, "true") == 0)
                c->gen.early_stopping = ZT_EARLY_STOP_TRUE;
            else if (strcmp(es, "false") == 0)
                c->gen.early_stopping = ZT_EARLY_STOP_HEURISTIC;
            else if (strcmp(es, "never") == 0)
                c->gen.early_stopping = ZT_EARLY_STOP_NEVER;
            else
                return die("--early-stopping %s: true, false or never (as generate's "
                           "early_stopping)", es), 2;
            if (c->gen.num_beams == 1)
                return die("--early-stopping is beam search's: give --num-beams 2 or more"), 2;
        }
        if (a->length_penalty && c->gen.num_beams == 1)
            return die("--length-penalty is beam search's: give --num-beams 2 or more"), 2;
        c->gen.use_cache = !a->no_cache;
    } else {
        return die("--task %s: predict knows classify, fill-mask and generate", a->task), 2;
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

/* the output file, written whole with one atomic write (or not at all): 0, or 1 after saying why */
static int write_whole(const char *path, const char *out, size_t len)
{
    const void *parts[1] = {out ? out : ""};
    size_t lens[1] = {len};
    return zt_file_write_atomic(path, parts, lens, 1) < 0 ? die("%s", zt_last_error()) : 0;
}

/* ---- classify ---------------------------------------------------------------------------- */

/* a probability or value as JSON: a float's 7 significant digits (not the double's 17) */
static void add_score(cJSON *o, const char *key, double v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", v);
    if (isfinite(v))
        cJSON_AddRawToObject(o, key, buf);
    else
        cJSON_AddNullToObject(o, key);
}

/* one row's line from its outputs p (zt_predict_classify's): {"label": ..., "scores":
 * {...}}; multi-label: "labels" (those above 0.5) and "scores"; regression: "label", "score" */
static void write_row(FILE *f, const zt_engine *e, const zt_model_info *mi, const double *p)
{
    int NL = mi->num_labels, pr = mi->problem_type ? mi->problem_type
                                  : NL == 1 ? ZT_PROBLEM_REGRESSION : ZT_PROBLEM_SINGLE_LABEL;
    cJSON *o = cJSON_CreateObject(), *sc = cJSON_CreateObject(), *ls = NULL;
    char *line;
    int best = 0;
    for (int k = 1; k < NL; k++)
        best = p[k] > p[best] ? k : best;
    if (pr == ZT_PROBLEM_REGRESSION) {
        cJSON_AddStringToObject(o, "label", zt_engine_label_name(e, 0));
        add_score(o, "score", (float)p[0]);
    } else if (pr == ZT_PROBLEM_MULTI_LABEL) {
        ls = cJSON_AddArrayToObject(o, "labels");
        for (int k = 0; k < NL; k++)
            if (p[k] > 0.5)
                cJSON_AddItemToArray(ls, cJSON_CreateString(zt_engine_label_name(e, k)));
    } else {
        cJSON_AddStringToObject(o, "label", zt_engine_label_name(e, best));
    }
    for (int k = 0; pr != ZT_PROBLEM_REGRESSION && k < NL; k++)
        add_score(sc, zt_engine_label_name(e, k), (float)p[k]);
    if (pr != ZT_PROBLEM_REGRESSION)
        cJSON_AddItemToObject(o, "scores", sc);
    else
        cJSON_Delete(sc);
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
    tok_specials sp;
    snprintf(path, sizeof path, "%s/config.json", c->a.model);
    char want[64];
    clstok_classifier_class(path, want, sizeof want);
    if (!clstok_config_is_classifier(path))
        return die("--model %s is not a %s (config.json's "
                   "architectures): --task classify needs a classifier, such as the folder "
                   "`zerotrain finetune --task classify --save-model DIR` writes", c->a.model,
                   want);
    if (lab_map_from_config(path, LAB_AUTO, &c->map, c->err, sizeof c->err) < 0 ||
        lab_read(c->a.input, &lo, &c->rows, c->err, sizeof c->err) < 0 ||
        clstok_open(c->a.tokenizer, c->a.model, NULL, TOK_BERT, &c->tok, c->err, sizeof c->err) < 0 ||
        lab_apply(c->rows, c->map, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    if (start(c, ZT_HEAD_AUTO))
        return 1;
    tok_special_ids(c->tok, &sp);
    if (cls_source_create(c->rows, c->map, clstok_encode, c->tok, sp.pad, (int)c->seq, 0, 0,
                          &c->src, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    int NL = c->mi.num_labels, B = (int)c->batch, rc = 0;
    uint64_t n = cls_source_rows(c->src), nb = (n + (uint64_t)B - 1) / (uint64_t)B;
    uint64_t rounds = (nb + (uint64_t)c->world - 1) / (uint64_t)c->world;
    size_t W = (size_t)B * (size_t)NL + 1, cells = (size_t)B * (size_t)c->seq;
    int64_t *ids = malloc(cells * sizeof *ids), *mask = malloc(cells * sizeof *mask);
    int64_t *tt = malloc(cells * sizeof *tt), *lab = malloc((size_t)B * sizeof *lab);
    float *val = malloc((size_t)B * (size_t)NL * sizeof *val);
    float *probs = malloc((size_t)B * (size_t)NL * sizeof *probs);
    double *mine = malloc(W * sizeof *mine), *all = malloc(W * (size_t)c->world * sizeof *all);
    double t0 = now(), correct = 0, labelled = 0;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = c->rank == 0 ? open_memstream(&out, &out_len) : NULL;
    if (!ids || !mask || !tt || !lab || !val || !probs || !mine || !all ||
        (c->rank == 0 && !f)) {
        rc = die("out of memory");
        goto done;
    }
    for (uint64_t k = 0; k < rounds && rc == 0; k++) {
        uint64_t b = k * (uint64_t)c->world + (uint64_t)c->rank;
        uint64_t first = (b < nb ? b : 0) * (uint64_t)B;
        int rows = (int)(n - first < (uint64_t)B ? n - first : (uint64_t)B);
        zt_batch bt;
        int64_t nl;
        uint64_t tok;
        cls_source_fill(c->src, first, rows, ids, mask, tt, lab, val, &bt, &nl, &tok);
        if (zt_predict_classify(c->e, &bt, probs) < 0) {
            rc = die("%s", zt_engine_last_error(c->e));
            break;
        }
        mine[0] = b < nb ? rows : 0;
        for (size_t i = 0; i < (size_t)rows * (size_t)NL; i++)
            mine[1 + i] = probs[i];
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
        if (write_whole(c->a.output, out, out_len))
            rc = 1;
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
    free(probs);
    free(mine);
    free(all);
    return rc;
}

/* ---- fill-mask --------------------------------------------------------------------------- */

static int fill_mask(predict_ctx *c)
{
    char path[4096];
    int32_t *ids = NULL, *types = NULL;
    tok_specials sp;
    size_t n = 0, cap = 0;
    int rc = 0;
    snprintf(path, sizeof path, "%s/config.json", c->a.model);
    if (clstok_open(c->a.tokenizer, c->a.model, NULL, TOK_BERT, &c->tok, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    tok_special_ids(c->tok, &sp);
    if (clstok_encode(c->tok, c->a.text, strlen(c->a.text), NULL, 0, (int)c->seq, &ids, &types,
                      &n, &cap, c->err, sizeof c->err) < 0)
        return die("--text: %s", c->err);
    int masks = 0;
    for (size_t i = 0; i < n; i++)
        masks += ids[i] == sp.mask;
    if (!masks) {
        free(ids);
        free(types);
        const char *mt = sp.mask >= 0 ? tok_id_to_token(c->tok, sp.mask) : NULL;
        return die("--text has no %s token: fill-mask predicts the words at %s (the tokenizer's "
                   "mask token)", mt ? mt : "mask", mt ? mt : "the mask");
    }
    if (clstok_config_is_classifier(path) && c->rank == 0)
        fprintf(stderr, "zerotrain: notice: %s is a sequence classifier: it has no masked-LM "
                        "head, so one is initialised randomly (as AutoModelForMaskedLM does) and "
                        "its candidates mean nothing\n", c->a.model);
    if (start(c, ZT_HEAD_MLM)) {
        free(ids);
        free(types);
        return 1;
    }
    int T = (int)n, k = (int)c->top_k;
    int64_t *bi = malloc(sizeof *bi * n), *bm = malloc(sizeof *bm * n);
    int64_t *bt = calloc(n, sizeof *bt), *pos = malloc(sizeof *pos * (size_t)masks);
    int32_t *top = malloc(sizeof *top * (size_t)masks * (size_t)k);
    float *sc = malloc(sizeof *sc * (size_t)masks * (size_t)k);
    if (!bi || !bm || !bt || !pos || !top || !sc) {
        rc = die("out of memory");
        goto done;
    }
    for (int t = 0; t < T; t++) {
        bi[t] = ids[t];
        bm[t] = 1;
    }
    zt_batch b = {1, T, bi, bm, bt, NULL, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    if (zt_predict_fill_mask(c->e, &b, sp.mask, k, masks, top, sc, pos) < 0) {
        rc = die("%s", zt_engine_last_error(c->e));
        goto done;
    }
    for (int m = 0; c->rank == 0 && m < masks; m++)
        for (int j = 0; j < k && top[(size_t)m * k + j] >= 0; j++) {
            int32_t id = top[(size_t)m * k + j];
            const char *tok = tok_id_to_token(c->tok, id);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "token", tok ? tok : "");
            cJSON_AddNumberToObject(o, "token_id", id);
            add_score(o, "score", sc[(size_t)m * k + j]);
            cJSON_AddNumberToObject(o, "position", (double)pos[m]);
            /* HF's token_str and sequence: the token decoded, the text with this mask filled */
            char *str = NULL, *seq = NULL, why[256];
            int32_t saved = ids[pos[m]];
            ids[pos[m]] = id;
            if (tok_decode(c->tok, &id, 1, 1, &str, why, sizeof why) == 0)
                cJSON_AddStringToObject(o, "token_str", str);
            if (tok_decode(c->tok, ids, n, 1, &seq, why, sizeof why) == 0)
                cJSON_AddStringToObject(o, "sequence", seq);
            ids[pos[m]] = saved;
            free(str);
            free(seq);
            char *line = cJSON_PrintUnformatted(o);
            if (line)
                printf("%s\n", line);
            free(line);
            cJSON_Delete(o);
        }
done:
    free(ids);
    free(types);
    free(bi);
    free(bm);
    free(bt);
    free(pos);
    free(top);
    free(sc);
    return rc;
}

/* ---- generate ---------------------------------------------------------------------------- */

/* one row's line: {"generated": text} (with --with-ids also "ids" and "score") */
static int write_generated(FILE *f, const tok_tokenizer *tok, const int32_t *ids, int n,
                           double score, int with_ids)
{
    char *text = NULL, why[256], *line;
    if (tok_decode(tok, ids, (size_t)n, 1, &text, why, sizeof why) < 0)
        return die("cannot decode a generated sequence: %s", why);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "generated", text);
    if (with_ids) {
        cJSON *a = cJSON_AddArrayToObject(o, "ids");
        for (int j = 0; j < n; j++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[j]));
        add_score(o, "score", (float)score);
    }
    if ((line = cJSON_PrintUnformatted(o))) {
        fputs(line, f);
        fputc('\n', f);
        free(line);
    }
    cJSON_Delete(o);
    free(text);
    return 0;
}

/* Batch b (rows [b B, b B + B)) is rank b mod N's, as classify's; each round's sequences are
 * gathered and rank 0 writes them in row order, the file whole at the end. */
static int generate(predict_ctx *c)
{
    lab_opts lo = {c->a.input_field ? c->a.input_field : "input", NULL, NULL, LAB_NO_LABELS};
    if (!clstok_model_is_t5(c->a.model))
        return die("--model %s is not a T5 (config.json's model_type): --task generate needs "
                   "an encoder-decoder, such as the folder `zerotrain finetune --task text2text "
                   "--save-model DIR` writes", c->a.model);
    if (lab_read(c->a.input, &lo, &c->rows, c->err, sizeof c->err) < 0 ||
        clstok_open(c->a.tokenizer, c->a.model, NULL, TOK_T5, &c->tok, c->err, sizeof c->err) < 0)
        return die("%s", c->err);
    if (start(c, ZT_HEAD_AUTO))
        return 1;
    if (t2t_source_create(c->rows, c->tok, (int)c->seq, 1, 0, 0, &c->t2t, c->err,
                          sizeof c->err) < 0)
        return die("%s", c->err);
    int B = (int)c->batch, M = c->gen.max_new_tokens, rc = 0;
    uint64_t n = t2t_source_rows(c->t2t), nb = (n + (uint64_t)B - 1) / (uint64_t)B, made = 0;
    uint64_t rounds = (nb + (uint64_t)c->world - 1) / (uint64_t)c->world;
    size_t W = 1 + (size_t)B * (2 + (size_t)M), cells = (size_t)B * (size_t)c->seq;
    int64_t *ids = malloc(cells * sizeof *ids), *mask = malloc(cells * sizeof *mask);
    int64_t *lab = malloc((size_t)B * sizeof *lab);
    int32_t *gen = malloc((size_t)B * (size_t)M * sizeof *gen), *row = malloc((size_t)M * sizeof *row);
    int *lens = malloc((size_t)B * sizeof *lens);
    float *scores = malloc((size_t)B * sizeof *scores);
    double *mine = malloc(W * sizeof *mine), *all = malloc(W * (size_t)c->world * sizeof *all);
    double t0 = now(), tgen = 0;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = c->rank == 0 ? open_memstream(&out, &out_len) : NULL;
    if (!ids || !mask || !lab || !gen || !row || !lens || !scores || !mine || !all ||
        (c->rank == 0 && !f)) {
        rc = die("out of memory");
        goto done;
    }
    if (t2t_source_truncated(c->t2t) && c->rank == 0)
        fprintf(stderr, "zerotrain: notice: %" PRIu64 " of %" PRIu64 " inputs were longer than "
                "--seq-len %ld tokens and were truncated\n", t2t_source_truncated(c->t2t), n, c->seq);
    for (uint64_t k = 0; k < rounds && rc == 0; k++) {
        uint64_t b = k * (uint64_t)c->world + (uint64_t)c->rank;
        uint64_t first = (b < nb ? b : 0) * (uint64_t)B;
        int rows = (int)(n - first < (uint64_t)B ? n - first : (uint64_t)B);
        zt_batch bt;
        int64_t nl;
        uint64_t tok;
        double t1 = now();
        t2t_source_fill(c->t2t, first, rows, ids, mask, lab, &bt, &nl, &tok);
        if (zt_generate(c->e, &bt, &c->gen, gen, lens, scores) < 0) {
            rc = die("generation: %s", zt_engine_last_error(c->e));
            break;
        }
        tgen += now() - t1;
        mine[0] = b < nb ? rows : 0;
        for (int i = 0; i < rows; i++) {
            double *x = mine + 1 + (size_t)i * (2 + (size_t)M);
            x[0] = lens[i];
            x[1] = scores[i];
            for (int j = 0; j < lens[i]; j++)
                x[2 + j] = gen[(size_t)i * M + j];
        }
        if (zt_engine_gather_f64(c->e, mine, (int)W, all) < 0) {
            rc = die("%s", zt_engine_last_error(c->e));
            break;
        }
        for (int q = 0; c->rank == 0 && q < c->world && rc == 0; q++) {
            const double *x = all + (size_t)q * W;
            for (int i = 0; i < (int)x[0] && rc == 0; i++) {
                const double *xi = x + 1 + (size_t)i * (2 + (size_t)M);
                int len = (int)xi[0];
                for (int j = 0; j < len; j++)
                    row[j] = (int32_t)xi[2 + j];
                made += (uint64_t)len;
                rc = write_generated(f, c->tok, row, len, xi[1], c->a.with_ids);
            }
        }
    }
    if (f)
        fclose(f);
    f = NULL;
    if (rc == 0 && c->rank == 0) { /* written whole, or not at all */
        if (write_whole(c->a.output, out, out_len))
            rc = 1;
        else
            fprintf(stderr, "generated %" PRIu64 " tokens for %" PRIu64 " rows in %.2f s (%.1f "
                    "tokens/s of generation, %s, %s) into %s\n", made, n, now() - t0,
                    (double)made / (tgen + 1e-9),
                    c->gen.num_beams > 1 ? "beam search" : "greedy",
                    c->gen.use_cache ? "cached" : "uncached", c->a.output);
    }
done:
    if (f)
        fclose(f);
    free(out);
    free(ids);
    free(mask);
    free(lab);
    free(gen);
    free(row);
    free(lens);
    free(scores);
    free(mine);
    free(all);
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
        rc = strcmp(c.a.task, "classify") == 0    ? classify(&c)
             : strcmp(c.a.task, "generate") == 0 ? generate(&c)
                                                 : fill_mask(&c);
    ctx_free(&c);
    return rc;
}
