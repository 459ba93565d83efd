/* t2tdata.c - input -> target pairs as T5's samples (each text encoded once, rows ordered per
 * epoch by zt_epoch_order, inputs and labels padded per micro-batch). */
#include "t2tdata.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* one side of the rows (inputs or targets): row i's ids are ids[off[i] .. off[i + 1]) */
typedef struct side {
    size_t *off;
    int32_t *ids;
    size_t n, cap;
    uint64_t truncated;
} side;

struct t2t_source {
    uint64_t rows;
    int pad_id, shuffle;
    uint64_t seed;
    side in, tgt;
};

static void side_free(side *s)
{
    free(s->off);
    free(s->ids);
}

void t2t_source_destroy(t2t_source *s)
{
    if (!s)
        return;
    side_free(&s->in);
    side_free(&s->tgt);
    free(s);
}

/* text encoded as T5Tokenizer(text, truncation=True, max_length=max_len): pieces then </s>,
 * onto the end of sd as row i (a row longer than max_len counted as truncated) */
static int put(side *sd, uint64_t i, tok_tokenizer *tok, const char *text, size_t len,
               int max_len, const lab_data *d, const char *what, char *err, size_t errlen)
{
    tok_encoding e = {0}, f = {0};
    char why[512];
    /* encoded one longer than max_len first: a text that needs more is truncated */
    if (tok_encode(tok, text, len, NULL, 0, (size_t)max_len + 1, 0, &e, why, sizeof why) < 0)
        return errmsg(err, errlen, "%s:%ld: %s: %s", lab_path(d), lab_line(d, i), what, why);
    if (e.n > (size_t)max_len) {
        sd->truncated++;
        tok_encoding_free(&e);
        if (tok_encode(tok, text, len, NULL, 0, (size_t)max_len, 0, &f, why, sizeof why) < 0)
            return errmsg(err, errlen, "%s:%ld: %s: %s", lab_path(d), lab_line(d, i), what, why);
        e = f;
    }
    if (sd->n + e.n > sd->cap) {
        size_t nc = (sd->n + e.n) * 2 + 1024;
        int32_t *ni = realloc(sd->ids, nc * sizeof *ni);
        if (!ni) {
            tok_encoding_free(&e);
            return errmsg(err, errlen, "out of memory tokenizing %s", lab_path(d));
        }
        sd->ids = ni;
        sd->cap = nc;
    }
    memcpy(sd->ids + sd->n, e.ids, e.n * sizeof *e.ids);
    sd->n += e.n;
    sd->off[i + 1] = sd->n;
    tok_encoding_free(&e);
    return 0;
}

int t2t_source_create(const lab_data *d, tok_tokenizer *tok, int seq_len, int target_len,
                      uint64_t seed, int shuffle, t2t_source **out, char *err, size_t errlen)
{
    t2t_source *s = calloc(1, sizeof *s);
    tok_specials sp;
    *out = NULL;
    if (!s)
        return errmsg(err, errlen, "out of memory");
    tok_special_ids(tok, &sp);
    s->rows = lab_rows(d);
    s->pad_id = sp.pad;
    s->seed = seed;
    s->shuffle = shuffle;
    if (!(s->in.off = calloc(s->rows + 1, sizeof *s->in.off)) ||
        !(s->tgt.off = calloc(s->rows + 1, sizeof *s->tgt.off))) {
        t2t_source_destroy(s);
        return errmsg(err, errlen, "out of memory");
    }
    for (uint64_t i = 0; i < s->rows; i++) {
        size_t la, lt;
        const char *a = lab_text(d, i, &la), *t = lab_pair(d, i, &lt);
        if (put(&s->in, i, tok, a, la, seq_len, d, "the input", err, errlen) < 0 ||
            (t && put(&s->tgt, i, tok, t, lt, target_len, d, "the target", err, errlen) < 0)) {
            t2t_source_destroy(s);
            return -1;
        }
        if (t && s->tgt.off[i + 1] - s->tgt.off[i] < 2) { /* </s> alone */
            errmsg(err, errlen, "%s:%ld: the target is empty (it encodes to no token but "
                   "</s>): there is nothing to learn from this row", lab_path(d), lab_line(d, i));
            t2t_source_destroy(s);
            return -1;
        }
    }
    *out = s;
    return 0;
}

uint64_t t2t_source_rows(const t2t_source *s) { return s->rows; }
uint64_t t2t_source_truncated(const t2t_source *s) { return s->in.truncated; }
uint64_t t2t_source_target_truncated(const t2t_source *s) { return s->tgt.truncated; }

uint64_t t2t_source_row(const t2t_source *s, uint64_t g)
{
    return s->shuffle ? zt_epoch_order(s->seed, s->rows, g) : g % s->rows;
}

const int32_t *t2t_source_target(const t2t_source *s, uint64_t r, size_t *n)
{
    *n = s->tgt.off[r + 1] - s->tgt.off[r];
    return s->tgt.ids + s->tgt.off[r];
}

/* the longest row of the samples [first, first + B) on one side */
static int longest(const t2t_source *s, const side *sd, uint64_t first, int B)
{
    int T = 1;
    for (int r = 0; r < B; r++) {
        uint64_t i = t2t_source_row(s, first + (uint64_t)r);
        int n = (int)(sd->off[i + 1] - sd->off[i]);
        T = n > T ? n : T;
    }
    return T;
}

void t2t_source_fill(const t2t_source *s, uint64_t first, int B, int64_t *ids, int64_t *mask,
                     int64_t *labels, zt_batch *b, int64_t *n_labels, uint64_t *tokens)
{
    int T = longest(s, &s->in, first, B), Tl = longest(s, &s->tgt, first, B);
    *n_labels = 0;
    *tokens = 0;
    for (int r = 0; r < B; r++) {
        uint64_t i = t2t_source_row(s, first + (uint64_t)r);
        size_t o = s->in.off[i], ot = s->tgt.off[i];
        int n = (int)(s->in.off[i + 1] - o), nt = (int)(s->tgt.off[i + 1] - ot);
        for (int t = 0; t < T; t++) {
            ids[(size_t)r * T + t] = t < n ? s->in.ids[o + t] : s->pad_id;
            mask[(size_t)r * T + t] = t < n;
        }
        for (int t = 0; t < Tl; t++) /* label_pad_token_id -100 */
            labels[(size_t)r * Tl + t] = t < nt ? s->tgt.ids[ot + t] : -100;
        *n_labels += nt;
        *tokens += (uint64_t)(n + nt);
    }
    *b = (zt_batch){B, T, ids, mask, NULL, labels, first, 0, Tl, NULL, NULL, NULL, 0, NULL};
}
