/* clstok.c - the tokenizer of `finetune` and `predict` (clstok.h). */
#include "clstok.h"
#include "cli.h"
#include "spm.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* the family's classifier class, by config.json's model_type (absent: bert) */
static const char *cls_arch_of(const cJSON *o)
{
    const cJSON *mt = o ? cJSON_GetObjectItemCaseSensitive(o, "model_type") : NULL;
    const char *t = cJSON_IsString(mt) ? mt->valuestring : "bert";
    return !strcmp(t, "roberta") ? "RobertaForSequenceClassification"
           : !strcmp(t, "distilbert") ? "DistilBertForSequenceClassification"
           : !strcmp(t, "electra")    ? "ElectraForSequenceClassification"
           : !strcmp(t, "albert")     ? "AlbertForSequenceClassification"
                                      : "BertForSequenceClassification";
}

int clstok_config_is_classifier(const char *path)
{
    char *text = NULL;
    cJSON *o = zt_file_read_all(path, 16u << 20, &text, NULL) == 0 ? cJSON_Parse(text) : NULL, *v;
    cJSON *arch = o ? cJSON_GetObjectItemCaseSensitive(o, "architectures") : NULL;
    int cls = 0;
    if (cJSON_IsArray(arch))
        cJSON_ArrayForEach(v, arch)
            cls |= cJSON_IsString(v) && strcmp(v->valuestring, cls_arch_of(o)) == 0;
    cJSON_Delete(o);
    free(text);
    return cls;
}

void clstok_classifier_class(const char *path, char *out, size_t n)
{
    char *text = NULL;
    cJSON *o = zt_file_read_all(path, 16u << 20, &text, NULL) == 0 ? cJSON_Parse(text) : NULL;
    snprintf(out, n, "%s", cls_arch_of(o));
    cJSON_Delete(o);
    free(text);
}

/* --model names a T5: a t5-* preset, or a config.json (alone or in a folder) of model_type t5
 * or mt5 */
int clstok_model_is_t5(const char *model)
{
    char path[4096], *text = NULL;
    struct stat sb;
    int t5 = 0;
    if (stat(model, &sb) != 0)
        return strncmp(model, "t5-", 3) == 0;
    snprintf(path, sizeof path, S_ISDIR(sb.st_mode) ? "%s/config.json" : "%s", model);
    if (zt_file_read_all(path, 16u << 20, &text, NULL) == 0) {
        cJSON *o = cJSON_Parse(text), *v = o ? cJSON_GetObjectItemCaseSensitive(o, "model_type") : NULL;
        t5 = cJSON_IsString(v) &&
             (strcmp(v->valuestring, "t5") == 0 || strcmp(v->valuestring, "mt5") == 0);
        cJSON_Delete(o);
    }
    free(text);
    return t5;
}

/* sentencepiece:N's training sentences: each row's text and pair */
typedef struct rows_iter { const lab_data *d; size_t i; int pair; } rows_iter;

static int next_row(void *user, const char **line, size_t *len)
{
    rows_iter *it = user;
    while (it->i < lab_rows(it->d)) {
        const char *s = it->pair ? lab_pair(it->d, it->i, len) : lab_text(it->d, it->i, len);
        if (it->pair || !lab_has_pair(it->d))
            it->i++;
        it->pair = !it->pair && lab_has_pair(it->d);
        if (s && *len) {
            *line = s;
            return 1;
        }
    }
    return 0;
}

int clstok_open(const char *spec, const char *model, const lab_data *rows, int family,
                tok_tokenizer **out, char *err, size_t errlen)
{
    int t5 = family == TOK_T5;
    struct stat sb;
    char *buf = NULL;
    size_t len = 0;
    int rc;
    *out = NULL;
    if (spec && strncmp(spec, "wordpiece:", 10) == 0 && t5) {
        return errmsg(err, errlen, "--tokenizer %s: a WordPiece vocabulary is BERT's; T5 takes "
                      "spm:MODEL or sentencepiece:N", spec);
    } else if (spec && strncmp(spec, "wordpiece:", 10) == 0) {
        rc = tok_load_wordpiece(spec + 10, 1, out, err, errlen);
    } else if (spec && strncmp(spec, "spm:", 4) == 0) {
        if (zt_file_read_all(spec + 4, 1u << 30, &buf, &len) < 0)
            return errmsg(err, errlen, "--tokenizer %s: %s", spec, zt_last_error());
        rc = tok_load_spm(spec + 4, buf, len, t5 ? TOK_T5 : TOK_BERT, out, err, errlen);
        free(buf);
    } else if (spec && strncmp(spec, "sentencepiece:", 14) == 0) {
        char *end;
        long n = strtol(spec + 14, &end, 10);
        const char *type = strcmp(end, ":bpe") == 0 ? "bpe" : *end ? NULL : "unigram";
        rows_iter it = {rows, 0, 0};
        if (!type || n < 8 || n > 1 << 20 || !rows)
            return errmsg(err, errlen, "--tokenizer %s: expected sentencepiece:N[:bpe] with N "
                          "pieces, 8 <= N <= 1048576", spec);
        if (spm_train(type, (int)n, 0, t5 ? SPM_LAYOUT_T5 : SPM_LAYOUT_BERT, next_row, &it,
                      &buf, &len, err, errlen) < 0)
            return -1;
        rc = tok_load_spm("sentencepiece (trained on the training file)", buf, len,
                          t5 ? TOK_T5 : TOK_BERT, out, err, errlen);
        free(buf);
    } else if (spec) {
        return errmsg(err, errlen, "--tokenizer %s: expected wordpiece:VOCAB_TXT, spm:MODEL or "
                      "sentencepiece:N[:bpe] (or none: the model folder's own)", spec);
    } else if (model && stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        rc = tok_load_folder(model, out, err, errlen);
    } else {
        return errmsg(err, errlen, "--model %s is not a folder with a tokenizer: give "
                      "--tokenizer (wordpiece:VOCAB_TXT, spm:MODEL or sentencepiece:N)",
                      model ? model : "(none)");
    }
    if (rc < 0)
        return -1;
    if (tok_family(*out) != family) {
        tok_free(*out);
        *out = NULL;
        if (t5)
            return errmsg(err, errlen, "%s: a BERT tokenizer: text2text is T5's (a "
                          "T5Tokenizer: spiece.model)", spec ? spec : model);
        return errmsg(err, errlen, "%s: a %s, T5's tokenizer: classification and fill-mask "
                      "are BERT's", spec ? spec : model, "T5Tokenizer");
    }
    return 0;
}

int clstok_encode(void *tok, const char *a, size_t alen, const char *b, size_t blen,
                  int max_len, int32_t **ids, int32_t **types, size_t *n, size_t *cap,
                  char *err, size_t errlen)
{
    tok_encoding e = {0};
    if (tok_encode(tok, a, alen, b, blen, (size_t)max_len, 0, &e, err, errlen) < 0)
        return -1;
    if (e.n > *cap) {
        int32_t *ni = realloc(*ids, e.n * sizeof *ni);
        int32_t *nt = ni ? realloc(*types, e.n * sizeof *nt) : NULL;
        if (ni)
            *ids = ni;
        if (!nt) {
            tok_encoding_free(&e);
            return errmsg(err, errlen, "out of memory tokenizing");
        }
        *types = nt;
        *cap = e.n;
    }
    memcpy(*ids, e.ids, e.n * sizeof **ids);
    memcpy(*types, e.type_ids, e.n * sizeof **types);
    *n = e.n;
    tok_encoding_free(&e);
    return 0;
}
