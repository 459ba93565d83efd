/* clsdata.c - a labelled file's rows as a sequence classifier's samples (tokenized once,
 * ordered per epoch by zt_epoch_order, padded per micro-batch) and the evaluation's counts and
 * metrics. */
#include "clsdata.h"
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cls_source {
    uint64_t rows, truncated;
    int num_labels, problem, pad_id, seq_len, longest, shuffle, has_labels;
    uint64_t seed;
    size_t *off;               /* [rows + 1]: row i's tokens are ids[off[i] .. off[i + 1]) */
    int32_t *ids;
    unsigned char *types;
    int64_t *label;            /* single-label: [rows] class ids */
    float *value;              /* multi-label, regression: [rows, num_labels] */
};

void cls_source_destroy(cls_source *s)
{
    if (!s)
        return;
    free(s->off);
    free(s->ids);
    free(s->types);
    free(s->label);
    free(s->value);
    free(s);
}

/* the rows' tokens, back to back */
static int encode_rows(cls_source *s, const lab_data *d, cls_encode_fn enc, void *tok,
                       char *err, size_t errlen)
{
    int32_t *ids = NULL, *types = NULL;
    size_t n = 0, cap = 0, total = 0, room = 0;
    int rc = 0;
    for (uint64_t i = 0; i < s->rows && rc == 0; i++) {
        size_t la, lb = 0;
        const char *a = lab_text(d, i, &la), *b = lab_pair(d, i, &lb);
        char why[512];
        n = 0;
        /* encoded one longer than seq_len: a row that needs more was truncated */
        if (enc(tok, a, la, b, lb, s->seq_len + 1, &ids, &types, &n, &cap, why, sizeof why) < 0) {
            rc = errmsg(err, errlen, "%s:%ld: %s", lab_path(d), lab_line(d, i), why);
            break;
        }
        if (n > (size_t)s->seq_len) {
            s->truncated++;
            n = 0;
            if (enc(tok, a, la, b, lb, s->seq_len, &ids, &types, &n, &cap, why, sizeof why) < 0) {
                rc = errmsg(err, errlen, "%s:%ld: %s", lab_path(d), lab_line(d, i), why);
                break;
            }
        }
        if (total + n > room) {
            size_t nr = (total + n) * 2 + 1024;
            int32_t *ni = realloc(s->ids, nr * sizeof *ni);
            unsigned char *nt = ni ? realloc(s->types, nr) : NULL;
            if (ni)
                s->ids = ni;
            if (!nt) {
                rc = errmsg(err, errlen, "out of memory tokenizing %s", lab_path(d));
                break;
            }
            s->types = nt;
            room = nr;
        }
        memcpy(s->ids + total, ids, n * sizeof *ids);
        for (size_t k = 0; k < n; k++)
            s->types[total + k] = (unsigned char)types[k];
        total += n;
        s->off[i + 1] = total;
        s->longest = (int)n > s->longest ? (int)n : s->longest;
    }
    free(ids);
    free(types);
    return rc;
}

int cls_source_create(const lab_data *d, const lab_map *m, cls_encode_fn enc, void *tok,
                      int pad_id, int seq_len, uint64_t seed, int shuffle, cls_source **out,
                      char *err, size_t errlen)
{
    cls_source *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s)
        return errmsg(err, errlen, "out of memory");
    s->rows = lab_rows(d);
    s->num_labels = lab_map_num_labels(m);
    s->problem = lab_map_problem(m);
    s->pad_id = pad_id;
    s->seq_len = seq_len;
    s->seed = seed;
    s->shuffle = shuffle;
    s->has_labels = lab_has_labels(d);
    size_t nl = (size_t)s->num_labels;
    if (!(s->off = calloc(s->rows + 1, sizeof *s->off)) ||
        (s->has_labels && s->problem == LAB_SINGLE &&
         !(s->label = malloc(s->rows * sizeof *s->label))) ||
        (s->has_labels && s->problem != LAB_SINGLE &&
         !(s->value = malloc(s->rows * nl * sizeof *s->value)))) {
        cls_source_destroy(s);
        return errmsg(err, errlen, "out of memory");
    }
    for (uint64_t i = 0; s->has_labels && i < s->rows; i++) {
        if (s->problem == LAB_SINGLE)
            s->label[i] = lab_label_id(d, i);
        else if (s->problem == LAB_MULTI)
            lab_label_multi(d, i, s->value + i * nl);
        else
            s->value[i] = lab_label_value(d, i);
    }
    if (encode_rows(s, d, enc, tok, err, errlen) < 0) {
        cls_source_destroy(s);
        return -1;
    }
    *out = s;
    return 0;
}

uint64_t cls_source_rows(const cls_source *s) { return s->rows; }
int cls_source_num_labels(const cls_source *s) { return s->num_labels; }
int cls_source_longest(const cls_source *s) { return s->longest; }
uint64_t cls_source_truncated(const cls_source *s) { return s->truncated; }

uint64_t cls_source_row(const cls_source *s, uint64_t g)
{
    return s->shuffle ? zt_epoch_order(s->seed, s->rows, g) : g % s->rows;
}

void cls_source_fill(const cls_source *s, uint64_t first, int B, int64_t *ids, int64_t *mask,
                     int64_t *tt, int64_t *labels, float *values, zt_batch *b,
                     int64_t *n_labels, uint64_t *tokens)
{
    size_t nl = (size_t)s->num_labels;
    int T = 1;
    *n_labels = 0;
    *tokens = 0;
    for (int r = 0; r < B; r++) { /* padded to the longest row of the micro-batch */
        uint64_t i = cls_source_row(s, first + (uint64_t)r);
        int n = (int)(s->off[i + 1] - s->off[i]);
        T = n > T ? n : T;
    }
    for (int r = 0; r < B; r++) {
        uint64_t i = cls_source_row(s, first + (uint64_t)r);
        size_t o = s->off[i];
        int n = (int)(s->off[i + 1] - o);
        for (int t = 0; t < T; t++) {
            size_t c = (size_t)r * T + t;
            ids[c] = t < n ? s->ids[o + t] : s->pad_id;
            mask[c] = t < n;
            tt[c] = t < n ? s->types[o + t] : 0;
        }
        *tokens += (uint64_t)n;
        if (s->label && labels) {
            labels[r] = s->label[i];
            *n_labels += s->label[i] != -100;
        } else if (s->value && values) {
            memcpy(values + (size_t)r * nl, s->value + i * nl, nl * sizeof *values);
            *n_labels += (int64_t)nl;
        }
    }
    *b = (zt_batch){B, T, ids, mask, tt, s->label ? labels : NULL, first, 0, 0, NULL,
                    s->value ? values : NULL, NULL, 0, NULL};
}

/* ---- evaluation ------------------------------------------------------------------------ */

enum { E_LOSS, E_N, E_ROWS, E_CORRECT, E_SQERR, E_FIXED };

int cls_eval_width(int num_labels) { return E_FIXED + 3 * num_labels; }

void cls_eval_count(const cls_source *s, const zt_batch *b, const float *logits,
                    double loss_sum, int64_t n_labels, double *out)
{
    int NL = s->num_labels;
    double *tp = out + E_FIXED, *fp = tp + NL, *fn = fp + NL;
    memset(out, 0, sizeof *out * (size_t)cls_eval_width(NL));
    out[E_LOSS] = loss_sum;
    out[E_N] = (double)n_labels;
    for (int r = 0; r < b->B; r++) {
        const float *x = logits + (size_t)r * NL;
        if (s->problem == LAB_SINGLE) {
            int64_t y = b->labels[r];
            int p = 0;
            if (y == -100)
                continue;
            for (int k = 1; k < NL; k++) /* the first of equal maxima, as torch.argmax */
                p = x[k] > x[p] ? k : p;
            out[E_ROWS]++;
            out[E_CORRECT] += p == y;
            if (p == y) {
                tp[p]++;
            } else {
                fp[p]++;
                fn[y]++;
            }
        } else if (s->problem == LAB_MULTI) {
            const float *y = b->label_values + (size_t)r * NL;
            int all = 1;
            for (int k = 0; k < NL; k++) {
                int p = x[k] > 0.0f, t = y[k] > 0.5f; /* sigmoid(x) > 0.5 */
                tp[k] += p && t;
                fp[k] += p && !t;
                fn[k] += !p && t;
                all &= p == t;
            }
            out[E_ROWS]++;
            out[E_CORRECT] += all;
        } else {
            const float *y = b->label_values + (size_t)r * NL;
            for (int k = 0; k < NL; k++)
                out[E_SQERR] += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
            out[E_ROWS]++;
        }
    }
}

void cls_eval_metrics(const cls_source *s, const double *sum, cls_metrics *o)
{
    int NL = s->num_labels, used = 0;
    const double *tp = sum + E_FIXED, *fp = tp + NL, *fn = fp + NL;
    double f1 = 0.0;
    memset(o, 0, sizeof *o);
    o->rows = (int64_t)sum[E_ROWS];
    o->loss = sum[E_N] > 0 ? sum[E_LOSS] / sum[E_N] : NAN;
    o->accuracy = o->f1_macro = o->mse = NAN;
    if (s->problem == LAB_REGRESSION) {
        o->mse = sum[E_ROWS] > 0 ? sum[E_SQERR] / (sum[E_ROWS] * NL) : NAN;
        return;
    }
    o->accuracy = sum[E_ROWS] > 0 ? sum[E_CORRECT] / sum[E_ROWS] : NAN;
    for (int k = 0; k < NL; k++) {
        double den = 2.0 * tp[k] + fp[k] + fn[k];
        /* single-label: the labels of the truth or the predictions; multi-label: all */
        if (s->problem == LAB_SINGLE && den == 0.0)
            continue;
        f1 += den > 0.0 ? 2.0 * tp[k] / den : 0.0;
        used++;
    }
    o->f1_macro = used ? f1 / used : NAN;
}
