/* wordpiece.h - BERT's WordPiece tokenizer (Hugging Face BertTokenizer with
 * do_basic_tokenize=True, tokenize_chinese_chars=True, strip_accents=None) over a vocab.txt.
 * Text in, ids out; it does not add [CLS]/[SEP], truncate, or treat "[MASK]" in the text as
 * special (that matches Google's original BERT tokenizer rather than HF's added-token split). */
#ifndef ZT_TOOLS_WORDPIECE_H
#define ZT_TOOLS_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#define WP_MAX_WORD_CHARS 100   /* longer words become [UNK], as in HF */

typedef struct wp_tokenizer wp_tokenizer;

/* Loads a vocab.txt (one token per line, id = line number, universal newlines; a token that
 * appears twice keeps its last line, as HF's load_vocab does) and looks up [PAD] [UNK] [CLS]
 * [SEP] [MASK]. lower_case: lower-case and strip accents (HF do_lower_case=True).
 * On failure returns < 0 and writes one line naming the file and the problem into err. */
int wp_load(const char *vocab_path, int lower_case, wp_tokenizer **out, char *err, size_t errlen);
void wp_free(wp_tokenizer *t);

int wp_vocab_size(const wp_tokenizer *t);
/* Id of a vocabulary entry (exact bytes), or -1. */
int32_t wp_token_id(const wp_tokenizer *t, const char *token, size_t len);
/* The entry of id (the last line that defines it), or NULL. */
const char *wp_id_token(const wp_tokenizer *t, int32_t id);
/* ids[0..4] = [PAD] [UNK] [CLS] [SEP] [MASK] */
void wp_special_ids(const wp_tokenizer *t, int32_t ids[5]);

/* Appends the ids of UTF-8 text (len bytes; invalid bytes are dropped, as U+FFFD is) to
 * *ids (n used, cap allocated; grown with realloc). Returns 0 or -ENOMEM. */
int wp_encode(wp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
              size_t *cap);

/* BasicTokenizer only (cleaning, CJK split, lower-casing and accent stripping if enabled,
 * punctuation split): calls fn for each resulting word. Returns 0 or -ENOMEM. */
int wp_basic_tokenize(wp_tokenizer *t, const char *text, size_t len,
                      void (*fn)(void *user, const char *word, size_t n), void *user);

#endif
