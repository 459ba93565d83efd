/* clsdata.h - a labelled file's rows as a sequence classifier's samples: every row tokenized
 * once into model input (the tokenizer's framing, truncated to seq_len), global sample g reads
 * row zt_epoch_order(seed, rows, g) (a fresh order each epoch, the same at any world size or
 * batch split), and a micro-batch is padded to its longest row (dynamic padding). Also the
 * evaluation's counts and metrics: accuracy, macro F1 (scikit-learn's), mean squared error.
 * It reads no file (labelled.h does) and runs no model. */
#ifndef ZT_TOOLS_CLSDATA_H
#define ZT_TOOLS_CLSDATA_H

#include "labelled.h"
#include "zerotrain.h"

#include <stddef.h>
#include <stdint.h>

/* One row as model input: ids (with the tokenizer's special tokens) and token types, at most
 * max_len of them, into *ids / *types (n used, cap allocated; grown with realloc). b NULL: a
 * single text. Returns 0, or < 0 with one line in err. */
typedef int (*cls_encode_fn)(void *tok, const char *a, size_t alen, const char *b, size_t blen,
                             int max_len, int32_t **ids, int32_t **types, size_t *n,
                             size_t *cap, char *err, size_t errlen);

typedef struct cls_source cls_source;

/* The rows of d (labels mapped through m by lab_apply, or none: prediction input), encoded by
 * enc. shuffle 0: sample g is row g mod rows (evaluation, prediction). Returns 0, or < 0 with
 * one line in err naming the file and line of a row that cannot be encoded. */
int cls_source_create(const lab_data *d, const lab_map *m, cls_encode_fn enc, void *tok,
                      int pad_id, int seq_len, uint64_t seed, int shuffle, cls_source **out,
                      char *err, size_t errlen);
void cls_source_destroy(cls_source *s);
uint64_t cls_source_rows(const cls_source *s);
int cls_source_num_labels(const cls_source *s);
/* the longest encoded row (tokens), and the rows seq_len truncated */
int cls_source_longest(const cls_source *s);
uint64_t cls_source_truncated(const cls_source *s);

/* Rows for global samples [first, first + B) into ids, mask, tt ([B, T]: T the longest of
 * them, at most seq_len) and labels [B] (single-label) or values [B, num_labels]
 * (multi-label, regression; either may be NULL without labels), described by *b;
 * *n_labels: the loss's elements (labelled rows, or rows x num_labels), *tokens: the real
 * (unpadded) tokens. */
void cls_source_fill(const cls_source *s, uint64_t first, int B, int64_t *ids, int64_t *mask,
                     int64_t *tt, int64_t *labels, float *values, zt_batch *b,
                     int64_t *n_labels, uint64_t *tokens);
/* the row sample g reads */
uint64_t cls_source_row(const cls_source *s, uint64_t g);

/* ---- evaluation ------------------------------------------------------------------------ */

/* Doubles per batch of cls_eval_count: loss sum, loss elements, rows, correct rows, squared
 * error, then true positives, false positives and false negatives per label */
int cls_eval_width(int num_labels);
/* One evaluated batch's counts into out[cls_eval_width]: logits [B, num_labels] against
 * the batch's labels (single-label: the arg max; multi-label: logit > 0; a row is correct
 * when every label is) */
void cls_eval_count(const cls_source *s, const zt_batch *b, const float *logits,
                    double loss_sum, int64_t n_labels, double *out);
typedef struct cls_metrics {
    double loss;      /* the mean over the loss's elements */
    double accuracy;  /* correct rows / rows (classification) */
    double f1_macro;  /* scikit-learn's f1_score(average="macro"): single-label over the
                       * labels that occur in the truth or the predictions, multi-label over
                       * every label (0 where a label has no positive either way) */
    double mse;       /* regression: the mean squared error */
    int64_t rows;
} cls_metrics;
/* the metrics of counts summed over every batch */
void cls_eval_metrics(const cls_source *s, const double *sum, cls_metrics *out);

#endif
