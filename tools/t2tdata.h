/* t2tdata.h - input -> target pairs as T5ForConditionalGeneration's samples (`finetune --task
 * text2text`): each row's input encoded once as T5Tokenizer frames a text (its pieces, then
 * </s>; truncated to seq_len keeping the </s>), its target the same to target_len; global
 * sample g reads row zt_epoch_order(seed, rows, g) (a fresh order each epoch, the same at
 * any world size or batch split) or row g mod rows (evaluation). A micro-batch pads the
 * inputs to their longest row (attention mask 0) and the labels to their longest with -100,
 * as transformers' DataCollatorForSeq2Seq does; the model shifts the labels right behind
 * decoder_start_token_id itself. Also the evaluation's counts (teacher-forced token
 * accuracy, greedy exact match). It reads no file (labelled.h does) and runs no model. */
#ifndef ZT_TOOLS_T2TDATA_H
#define ZT_TOOLS_T2TDATA_H

#include "labelled.h"
#include "tokenizer.h"
#include "zerotrain.h"

#include <stddef.h>
#include <stdint.h>

typedef struct t2t_source t2t_source;

/* The rows of d (lab_text: the input, lab_pair: the target, or none when d was read without
 * a target field: generation's inputs), encoded by tok (a T5 tokenizer). shuffle 0: sample g is row g mod rows. An empty target (nothing but </s>) is
 * an error naming the file and line. Returns 0, or < 0 with one line in err. */
int t2t_source_create(const lab_data *d, tok_tokenizer *tok, int seq_len, int target_len,
                      uint64_t seed, int shuffle, t2t_source **out, char *err, size_t errlen);
void t2t_source_destroy(t2t_source *s);
uint64_t t2t_source_rows(const t2t_source *s);
/* the rows whose input (target) was longer than seq_len (target_len) and was truncated */
uint64_t t2t_source_truncated(const t2t_source *s);
uint64_t t2t_source_target_truncated(const t2t_source *s);

/* Rows for global samples [first, first + B) into ids, mask ([B, T]: T the longest input)
 * and labels ([B, Tl]: Tl the longest target), described by *b; *n_labels: the target
 * tokens, *tokens: the real input and target tokens. */
void t2t_source_fill(const t2t_source *s, uint64_t first, int B, int64_t *ids, int64_t *mask,
                     int64_t *labels, zt_batch *b, int64_t *n_labels, uint64_t *tokens);
/* the row sample g reads, and row r's target ids (with the </s>) */
uint64_t t2t_source_row(const t2t_source *s, uint64_t g);
const int32_t *t2t_source_target(const t2t_source *s, uint64_t r, size_t *n);

#endif
