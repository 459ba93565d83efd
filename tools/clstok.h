/* clstok.h - the tokenizer of `finetune` and `predict` (tokenizer.h's, which frames a text or
 * a pair as the model's Hugging Face tokenizer does): the model folder's own, or one of
 * prepare-data's specs, sentencepiece:N trained on the training file's texts; and the
 * cls_encode_fn (clsdata.h) over it. */
#ifndef ZT_TOOLS_CLSTOK_H
#define ZT_TOOLS_CLSTOK_H

#include "labelled.h"
#include "tokenizer.h"

#include <stddef.h>
#include <stdint.h>

/* spec: "wordpiece:VOCAB_TXT" (lower-cased), "spm:MODEL", "sentencepiece:N[:bpe]" (N pieces,
 * the family's special tokens first -- BERT's [PAD] [UNK] [CLS] [SEP] [MASK], T5's <pad> </s>
 * <unk> -- trained on rows' texts and pairs, case kept), or NULL: the tokenizer of model, a
 * Hugging Face folder. family: TOK_BERT or TOK_T5, the only one accepted (another is an error
 * naming it). 0, or -1 with one line in err. */
int clstok_open(const char *spec, const char *model, const lab_data *rows, int family,
                tok_tokenizer **out, char *err, size_t errlen);
/* cls_encode_fn over a tok_tokenizer: tok_encode's ids and token types */
int clstok_encode(void *tok, const char *a, size_t alen, const char *b, size_t blen,
                  int max_len, int32_t **ids, int32_t **types, size_t *n, size_t *cap,
                  char *err, size_t errlen);
/* 1 when --model names a T5: a t5-* preset, or a config.json (alone or in a folder) of
 * model_type t5 */
int clstok_model_is_t5(const char *model);
/* 1 when the config.json at path names BertForSequenceClassification in "architectures" */
int clstok_config_is_classifier(const char *path);
/* the ...ForSequenceClassification class of the config.json's family (Bert, Roberta,
 * DistilBert) into out */
void clstok_classifier_class(const char *path, char *out, size_t n);

#endif
