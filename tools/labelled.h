/* labelled.h - the labelled data of `zerotrain finetune --task classify`: rows of text (and
 * an optional second text) with a label, read from JSON Lines, CSV or TSV and checked whole
 * before anything else happens; and the label map (problem type, id2label) decided as Hugging
 * Face's run_glue / run_classification examples do. It does not tokenize, batch or shuffle,
 * and it prints nothing: an error comes back as a negative code and one line in err.
 *
 * Use (every bad row is reported here, before any training starts):
 *
 *     lab_read(train_path, &opts, &train, err, n);       the rows, their raw labels
 *     lab_read(eval_path, &opts, &eval, err, n);
 *     lab_map_from_config(config_json, LAB_AUTO, &map, err, n)  a fine-tuned model's labels,
 *         or, if that is ZT_E_NOTFOUND (a base model), lab_map_build(train, LAB_AUTO, &map, ...)
 *     lab_apply(train, map, err, n); lab_apply(eval, map, err, n);   labels -> ids
 *     ... lab_text(train, i, &len), lab_label_id(train, i) / lab_label_multi / lab_label_value
 *     lab_map_to_config(map, config) when the model is saved
 *     lab_free(train); lab_free(eval); lab_map_free(map);
 *
 * The file format, the label types and the problem-type rules are in docs/data-format.md
 * ("Labelled data (finetune)"). */
#ifndef ZT_TOOLS_LABELLED_H
#define ZT_TOOLS_LABELLED_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* The problem types, spelled as Hugging Face's config.json "problem_type" (lab_problem_name). */
typedef enum lab_problem {
    LAB_AUTO = 0,       /* "auto": decide from the labels or the config */
    LAB_SINGLE = 1,     /* "single_label_classification": one class id per row */
    LAB_MULTI = 2,      /* "multi_label_classification": a 0/1 vector of num_labels per row */
    LAB_REGRESSION = 3, /* "regression": one float per row; num_labels 1 */
} lab_problem;

/* "auto", "single_label_classification", "multi_label_classification", "regression" */
const char *lab_problem_name(lab_problem p);
/* The lab_problem of one of those names, or -1. */
int lab_problem_parse(const char *name);

/* Which fields of a row are read. Borrowed for the call (lab_read copies what it keeps). */
typedef struct lab_opts {
    const char *text_field;  /* NULL: "text" */
    const char *pair_field;  /* the second text of a sentence pair; NULL: none */
    const char *label_field; /* NULL: "label" */
    /* 0: every row must have a label. 1: a file may have no labels at all (prediction
     * input); a file that has some must have one on every row. A missing field, a JSON null
     * and an empty CSV/TSV value all mean "no label". LAB_NO_LABELS: no label is read (two
     * texts per row: text2text's input and target). */
    int labels_optional;
} lab_opts;
enum { LAB_NO_LABELS = 2 };

typedef struct lab_data lab_data; /* the rows of one file */
typedef struct lab_map lab_map;   /* problem type and id2label */

/* ---- reading ------------------------------------------------------------------------- */

/* Reads a whole file; the format comes from the extension (any case): .jsonl or .json (JSON
 * Lines), .csv (RFC 4180, header row), .tsv (tab-separated, no quoting, header row). Every
 * row is checked: the fields are there, texts are strings of valid UTF-8 without NUL bytes,
 * labels are of an accepted type. opts NULL: the defaults. Returns 0, or < 0 with *out NULL
 * and one line (no newline) in err: ZT_E_FORMAT for the file's content ("PATH:LINE: what"),
 * or an unknown extension; -errno or ZT_E_FORMAT if it cannot be opened or read or is not a
 * regular file; -ENOMEM. */
int lab_read(const char *path, const lab_opts *opts, lab_data **out, char *err, size_t errlen);
/* Frees the rows, their texts and labels, and what lab_apply made. NULL: nothing. */
void lab_free(lab_data *d);

size_t lab_rows(const lab_data *d);
const char *lab_path(const lab_data *d);     /* as given to lab_read */
int lab_has_pair(const lab_data *d);         /* opts->pair_field was set */
int lab_has_labels(const lab_data *d);       /* the rows carry labels */
/* Row i's text and second text (NULL without a pair field): NUL-terminated UTF-8, *len bytes
 * (len may be NULL); valid until lab_free. i < lab_rows(d). */
const char *lab_text(const lab_data *d, size_t i, size_t *len);
const char *lab_pair(const lab_data *d, size_t i, size_t *len);
/* The 1-based line row i starts on (for messages about a row). */
long lab_line(const lab_data *d, size_t i);

/* ---- the label map ------------------------------------------------------------------- */

/* Decides the problem type and the labels from d's labels (d must have labels):
 * LAB_AUTO: every label a list -> LAB_MULTI, names = the sorted set of all elements; every
 * label a number and one not an integer -> LAB_REGRESSION (one name, "LABEL_0"); otherwise
 * LAB_SINGLE, names = the sorted distinct labels. Sorted: by value if every label (element)
 * is an integer, else by bytes of the label's text. Lists mixed with other labels are an
 * error, and so is single-label data with one distinct label. Another problem forces that
 * type (an integer column as regression, say); a label that does not fit it is an error
 * naming its line. Returns 0 or < 0 (ZT_E_FORMAT, -ENOMEM, ZT_E_INVAL: d has no labels) with
 * one line in err. */
int lab_map_build(const lab_data *d, lab_problem problem, lab_map **out, char *err,
                  size_t errlen);
/* A map of n labels, names[id] in id order (copied). problem LAB_AUTO: regression if n == 1,
 * else single-label (Hugging Face's rule for a config without problem_type). Duplicate names,
 * n < 1, or regression with n != 1 are ZT_E_INVAL. */
int lab_map_from_names(lab_problem problem, const char *const *names, int n, lab_map **out,
                       char *err, size_t errlen);
/* The map of a Hugging Face config.json: its "id2label" ({"0": "neg", "1": "pos"}, ids 0..n-1
 * each once) and "problem_type" if present (a problem other than LAB_AUTO that contradicts it
 * is ZT_E_CONFIG; without it, as lab_map_from_names). ZT_E_NOTFOUND when the config has no
 * id2label (a base model: build the map from the training set), ZT_E_FORMAT when it is
 * malformed, ZT_E_INVAL for a name twice, -errno when it cannot be read; one line in err. */
int lab_map_from_config(const char *config_path, lab_problem problem, lab_map **out, char *err,
                        size_t errlen);
/* Sets "id2label", "label2id" and "problem_type" of a config.json object (replacing them).
 * Returns 0 or -ENOMEM. */
int lab_map_to_config(const lab_map *m, struct cJSON *config);
void lab_map_free(lab_map *m); /* NULL: nothing */

lab_problem lab_map_problem(const lab_map *m);
int lab_map_num_labels(const lab_map *m);
const char *lab_map_name(const lab_map *m, int id); /* NULL if id is out of range */
int lab_map_id(const lab_map *m, const char *name, size_t len); /* -1 if unknown */
/* 1 if the names are Hugging Face's placeholders LABEL_0 .. LABEL_{n-1} (a config saved
 * without real label names; run_glue then ignores them and uses the data's labels). */
int lab_map_is_placeholder(const lab_map *m);

/* ---- labels as ids ------------------------------------------------------------------- */

/* Maps every label of d through m (the training set's own map, or one from a model or
 * another file). A label m does not know is an error naming the file, line, field, the
 * value and m's labels; so is a label of the wrong kind (a list for a single-label map, a
 * string for regression). d without labels: nothing to do, 0. Applying another map replaces
 * the previous result. Returns 0 or < 0 (ZT_E_FORMAT, -ENOMEM) with one line in err. */
int lab_apply(lab_data *d, const lab_map *m, char *err, size_t errlen);

/* Row i's target, after lab_apply with a map of that problem type (asserted):
 * LAB_SINGLE: the class id, 0 .. num_labels-1 (Hugging Face's int64 "labels"); */
int64_t lab_label_id(const lab_data *d, size_t i);
/* LAB_MULTI: out[0..num_labels) = 1 for each of the row's labels, else 0; */
void lab_label_multi(const lab_data *d, size_t i, float *out);
/* LAB_REGRESSION: the number. */
float lab_label_value(const lab_data *d, size_t i);

#endif
