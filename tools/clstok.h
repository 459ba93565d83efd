/* clstok.h - BERT's text as model input for `finetune` and `predict`: a WordPiece tokenizer
 * from --tokenizer or a model folder (vocab.txt, tokenizer_config.json's do_lower_case), a
 * text or a text pair framed as [CLS] a [SEP] (b [SEP]) and truncated longest first as
 * Hugging Face's tokenizers truncate, and the [MASK] token written in a text kept whole (as
 * HF's added-token split does). It trains no vocabulary and reads no SentencePiece model. */
#ifndef ZT_TOOLS_CLSTOK_H
#define ZT_TOOLS_CLSTOK_H

#include "wordpiece.h"

#include <stddef.h>
#include <stdint.h>

/* spec "wordpiece:VOCAB_TXT" (lower-cased), or NULL: model's vocab.txt when model is a
 * folder. 0, or -1 with one line in err. */
int clstok_open(const char *spec, const char *model, wp_tokenizer **out, char *err,
                size_t errlen);
/* cls_encode_fn (clsdata.h) over a wp_tokenizer: [CLS] a [SEP] (b [SEP]), token types 0 (1
 * for b's), at most max_len tokens (a token off the longer text, off the second on a tie).
 * The text "[MASK]" is the mask id. */
int clstok_encode(void *tok, const char *a, size_t alen, const char *b, size_t blen,
                  int max_len, int32_t **ids, int32_t **types, size_t *n, size_t *cap,
                  char *err, size_t errlen);
/* 1 when the config.json at path names BertForSequenceClassification in "architectures" */
int clstok_config_is_classifier(const char *path);

#endif
