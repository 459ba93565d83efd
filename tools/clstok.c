/* clstok.c - BERT's text as model input for `finetune` and `predict` (clstok.h). */
#include "clstok.h"
#include "cli.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *read_small(const char *path)
{
    char *buf = NULL;
    return zt_file_read_all(path, 16u << 20, &buf, NULL) < 0 ? NULL : buf;
}

int clstok_config_is_classifier(const char *path)
{
    char *text = read_small(path);
    cJSON *o = text ? cJSON_Parse(text) : NULL, *v;
    cJSON *arch = o ? cJSON_GetObjectItemCaseSensitive(o, "architectures") : NULL;
    int cls = 0;
    if (cJSON_IsArray(arch))
        cJSON_ArrayForEach(v, arch)
            cls |= cJSON_IsString(v) && strcmp(v->valuestring, "BertForSequenceClassification") == 0;
    cJSON_Delete(o);
    free(text);
    return cls;
}

int clstok_open(const char *spec, const char *model, wp_tokenizer **out, char *err,
                size_t errlen)
{
    char path[4096];
    int lower = 1;
    struct stat sb;
    if (spec && strncmp(spec, "wordpiece:", 10) == 0) {
        snprintf(path, sizeof path, "%s", spec + 10);
    } else if (spec) {
        return errmsg(err, errlen, "--tokenizer %s: this command takes wordpiece:VOCAB_TXT (or "
                      "none: the model folder's own)", spec);
    } else if (model && stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", model);
        char *text = stat(path, &sb) == 0 ? read_small(path) : NULL;
        cJSON *o = text ? cJSON_Parse(text) : NULL;
        cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, "do_lower_case") : NULL;
        if (cJSON_IsBool(v))
            lower = cJSON_IsTrue(v);
        cJSON_Delete(o);
        free(text);
        snprintf(path, sizeof path, "%s/vocab.txt", model);
        if (stat(path, &sb) != 0)
            return errmsg(err, errlen, "--model %s has no tokenizer (vocab.txt): give "
                          "--tokenizer wordpiece:VOCAB_TXT", model);
    } else {
        return errmsg(err, errlen, "--model %s is not a folder with a tokenizer: give "
                      "--tokenizer wordpiece:VOCAB_TXT", model ? model : "(none)");
    }
    return wp_load(path, lower, out, err, errlen) < 0 ? -1 : 0;
}

/* text's ids, the literal "[MASK]" as the mask id (HF's added-token split) */
static int encode_text(wp_tokenizer *t, const char *s, size_t len, int32_t **ids, size_t *n,
                       size_t *cap)
{
    static const char mask[] = "[MASK]";
    int32_t sp[5];
    wp_special_ids(t, sp);
    while (len > 0) {
        const char *hit = memmem(s, len, mask, sizeof mask - 1);
        size_t piece = hit ? (size_t)(hit - s) : len;
        if (wp_encode(t, s, piece, ids, n, cap) < 0)
            return -1;
        if (!hit)
            break;
        if (*n + 1 > *cap) {
            int32_t *g = realloc(*ids, (*cap * 2 + 16) * sizeof *g);
            if (!g)
                return -1;
            *ids = g;
            *cap = *cap * 2 + 16;
        }
        (*ids)[(*n)++] = sp[4];
        s = hit + sizeof mask - 1;
        len -= piece + sizeof mask - 1;
    }
    return 0;
}

int clstok_encode(void *tok, const char *a, size_t alen, const char *b, size_t blen,
                  int max_len, int32_t **ids, int32_t **types, size_t *n, size_t *cap,
                  char *err, size_t errlen)
{
    wp_tokenizer *t = tok;
    int32_t *x = NULL, *y = NULL, sp[5];
    size_t nx = 0, cx = 0, ny = 0, cy = 0, total;
    int rc = 0, specials = b ? 3 : 2;
    wp_special_ids(t, sp);
    if (max_len < specials + 1) {
        rc = errmsg(err, errlen, "a length of %d tokens leaves no room for the text", max_len);
        goto out;
    }
    if (encode_text(t, a, alen, &x, &nx, &cx) < 0 ||
        (b && encode_text(t, b, blen, &y, &ny, &cy) < 0)) {
        rc = errmsg(err, errlen, "out of memory tokenizing");
        goto out;
    }
    while (nx + ny + (size_t)specials > (size_t)max_len) {
        if (nx > ny)
            nx--;
        else
            ny--;
    }
    total = nx + ny + (size_t)specials;
    if (total > *cap) {
        int32_t *ni = realloc(*ids, total * sizeof *ni);
        int32_t *nt = ni ? realloc(*types, total * sizeof *nt) : NULL;
        if (ni)
            *ids = ni;
        if (!nt) {
            rc = errmsg(err, errlen, "out of memory tokenizing");
            goto out;
        }
        *types = nt;
        *cap = total;
    }
    size_t k = 0;
    (*ids)[k] = sp[2], (*types)[k++] = 0;
    for (size_t i = 0; i < nx; i++)
        (*ids)[k] = x[i], (*types)[k++] = 0;
    (*ids)[k] = sp[3], (*types)[k++] = 0;
    for (size_t i = 0; b && i < ny; i++)
        (*ids)[k] = y[i], (*types)[k++] = 1;
    if (b)
        (*ids)[k] = sp[3], (*types)[k++] = 1;
    *n = k;
out:
    free(x);
    free(y);
    return rc;
}
