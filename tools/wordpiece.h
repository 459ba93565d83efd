/* wordpiece.h - BERT's WordPiece tokenizer over a vocab.txt: Hugging Face BertTokenizer's
 * _tokenize (do_basic_tokenize=True; do_lower_case, strip_accents, tokenize_chinese_chars and
 * never-split words as options). Text in, ids out; it does not add [CLS]/[SEP], truncate, or
 * split added tokens such as "[MASK]" out of the text (tools/tokenizer.h does all three). */
#ifndef ZT_TOOLS_WORDPIECE_H
#define ZT_TOOLS_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#define WP_MAX_WORD_CHARS 100   /* longer words become [UNK], as in HF */

typedef struct wp_tokenizer wp_tokenizer;

/* BertTokenizer's options: do_lower_case; strip_accents -1 (None: as do_lower_case), 0 or
 * 1; tokenize_chinese_chars */
typedef struct wp_options { int lower_case, strip_accents, chinese; } wp_options;

/* never-split words: WP_NEVER_SPLIT (BertTokenizer's never_split: one token, the vocabulary's
 * or [UNK]) or WP_NEVER_SPECIAL (the special tokens: not lower-cased or split at punctuation
 * by the BasicTokenizer, then WordPiece as any word, as HF does) */
enum { WP_NEVER_SPECIAL = 0, WP_NEVER_SPLIT = 1 };

/* Loads a vocab.txt (one token per line, id = line number, universal newlines; a token that
 * appears twice keeps its last line, as HF's load_vocab does) and looks up [PAD] [UNK] [CLS]
 * [SEP] [MASK]. lower_case: lower-case and strip accents (HF do_lower_case=True).
 * On failure returns < 0 and writes one line naming the file and the problem into err. */
int wp_load(const char *vocab_path, int lower_case, wp_tokenizer **out, char *err, size_t errlen);
/* The same from the file's bytes (name for messages), with options, requiring no special
 * token: wp_special_ids gives -1 for a missing one, and [UNK] (or the id wp_set_unk sets) is
 * what a word without a split becomes. */
int wp_load_mem(const char *name, const char *bytes, size_t len, const wp_options *opt,
                wp_tokenizer **out, char *err, size_t errlen);
void wp_free(wp_tokenizer *t);
void wp_set_unk(wp_tokenizer *t, int32_t id);
/* Replaces the never-split words (copied; n = 0 clears them). Returns 0 or -ENOMEM. */
int wp_set_never_split(wp_tokenizer *t, const char *const *words, const int *kind, int n);

int wp_vocab_size(const wp_tokenizer *t);
/* Id of a vocabulary entry (exact bytes), or -1. */
int32_t wp_token_id(const wp_tokenizer *t, const char *token, size_t len);
/* The entry of id (the last line that defines it), or NULL. */
const char *wp_id_token(const wp_tokenizer *t, int32_t id);
/* ids[0..4] = [PAD] [UNK] [CLS] [SEP] [MASK], by those spellings (-1: absent) */
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
