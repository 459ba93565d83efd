/* tokenizer.h - one tokenizer over BERT's WordPiece (wordpiece.h) and SentencePiece (spm.h),
 * as Hugging Face's Python ("slow") tokenizers run them: loaded from a model folder, from a
 * prepared dataset or from prepare-data's specs; one text or a pair to model input (BERT:
 * [CLS] a [SEP] b [SEP] with token types 0/1; T5: a </s> b </s>), truncated longest_first,
 * with the added tokens written in the text ("[MASK]", "<extra_id_0>") split out as HF's
 * added-token trie does; ids back to tokens and text; and the tokenizer's files written into
 * a folder as save_pretrained writes them. It does not read tokenizer.json (the fast
 * tokenizers' format), pad batches, or train vocabularies (spm.h trains).
 *
 * The Hugging Face classes (tokenizer_class; a "Fast" suffix is read as the class itself):
 *   BertTokenizer       vocab.txt; do_lower_case, strip_accents, tokenize_chinese_chars,
 *                       never_split; also read as DistilBertTokenizer, ElectraTokenizer
 *   T5Tokenizer         spiece.model, legacy=True (transformers' default); <extra_id_k> is
 *                       id len(spiece) + extra_ids - 1 - k; </s> appended after the text
 *   DebertaV2Tokenizer  spm.model: the class written for a BERT whose vocabulary is a
 *                       SentencePiece model with [PAD] [UNK] [CLS] [SEP] [MASK] (zerotrain's
 *                       sentencepiece:N and spm:MODEL). Among transformers' SentencePiece
 *                       classes with BERT's framing it is the one that encodes the text with
 *                       the model alone (AlbertTokenizer rewrites `` and '' to " and splits
 *                       "9," pieces; BigBirdTokenizer returns no token_type_ids by default),
 *                       its defaults are exactly those five tokens, and it frames
 *                       [CLS] a [SEP] b [SEP] with token types 0/1. Written with
 *                       do_lower_case false and split_by_punct false: case folding, when the
 *                       data was lower-cased, is in the model's own normaliser
 *                       (nmt_nfkc_cf), so HF and prepare-data give the same ids.
 * Every function that can fail returns < 0 and writes one line into err. */
#ifndef ZT_TOOLS_TOKENIZER_H
#define ZT_TOOLS_TOKENIZER_H

#include "zerotrain.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tok_tokenizer tok_tokenizer;

/* family: how a text is framed. TOK_ANY (loading a SentencePiece model): BERT if it has
 * [CLS] [SEP] [MASK], else T5 if it has an end-of-sequence piece. */
enum { TOK_ANY = -1, TOK_BERT = 0, TOK_T5 = 1 };

/* A Hugging Face model folder's tokenizer: tokenizer_config.json (tokenizer_class, options,
 * special tokens, added_tokens_decoder, model_max_length), special_tokens_map.json and
 * added_tokens.json where tokenizer_config.json has no added_tokens_decoder (older saves),
 * and the class's vocabulary file; absent files and keys take the class's defaults. A folder
 * with no tokenizer is an error naming the folder and the files looked for. */
int tok_load_folder(const char *dir, tok_tokenizer **out, char *err, size_t errlen);
/* A prepared dataset's tokenizer: its files (as tok_save wrote them) checked against
 * manifest.json, or for an older dataset built from the manifest alone. */
int tok_load_data(const char *data_dir, tok_tokenizer **out, char *err, size_t errlen);
/* wordpiece:VOCAB (BertTokenizer, do_lower_case as given) */
int tok_load_wordpiece(const char *vocab_txt, int lower_case, tok_tokenizer **out, char *err,
                       size_t errlen);
/* spm:MODEL or a trained model's bytes (name for messages): DebertaV2Tokenizer (TOK_BERT) or
 * T5Tokenizer (TOK_T5), or the one the pieces fit (TOK_ANY) */
int tok_load_spm(const char *name, const void *model, size_t len, int family,
                 tok_tokenizer **out, char *err, size_t errlen);
void tok_free(tok_tokenizer *t);

int tok_family(const tok_tokenizer *t);
const char *tok_hf_class(const tok_tokenizer *t);
/* whether it lower-cases: do_lower_case, or a SentencePiece normaliser that folds case */
int tok_lower_case(const tok_tokenizer *t);
/* the vocabulary the text encodes to (vocab.txt's lines, the model's pieces) */
int tok_vocab_size(const tok_tokenizer *t);
/* with the added tokens above it (T5: the extra ids): len(tokenizer) in HF */
int tok_size(const tok_tokenizer *t);
/* the model_max_length the folder gave (0: none) */
long tok_model_max_length(const tok_tokenizer *t);

/* The special ids, -1 where the tokenizer has none (T5: no cls or mask; BERT: no eos) */
typedef struct tok_specials { int32_t pad, unk, cls, sep, mask, eos; } tok_specials;
void tok_special_ids(const tok_tokenizer *t, tok_specials *out);
/* id -> token (the vocabulary's entry, the piece, or the added token), NULL if none */
const char *tok_id_to_token(const tok_tokenizer *t, int32_t id);
/* token -> id (an added token, or the vocabulary's), -1 if none */
int32_t tok_token_to_id(const tok_tokenizer *t, const char *token);
/* What a dataset's manifest records of it (type, model_file, vocab_size, lower_case, the
 * special ids, hf_class; the separator is [SEP], or </s> for T5). */
void tok_manifest_info(const tok_tokenizer *t, zt_tokenizer_info *out);

enum {
    TOK_SPLIT_SPECIAL = 1,   /* added tokens in the text are text (HF split_special_tokens) */
    TOK_NO_SPECIALS = 2,     /* no [CLS]/[SEP]/</s> around it (add_special_tokens=False) */
};
typedef struct tok_encoding {
    int32_t *ids, *type_ids; /* n each (malloc'd) */
    size_t n, cap;
} tok_encoding;
/* tokenizer(a, b, truncation=True, max_length=max_len) as HF computes input_ids and
 * token_type_ids: b NULL for one text; max_len 0: no truncation. A single text too long for
 * even its special tokens is left whole (HF logs an error and does the same). */
int tok_encode(tok_tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
               size_t max_len, int flags, tok_encoding *out, char *err, size_t errlen);
void tok_encoding_free(tok_encoding *e);
/* The ids of a text alone (HF's tokenize + convert_tokens_to_ids), appended to *ids (n used,
 * cap allocated; grown with realloc). flags: TOK_SPLIT_SPECIAL. */
int tok_text_ids(tok_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                 size_t *n, size_t *cap, char *err, size_t errlen);
/* HF's decode(ids, skip_special_tokens): WordPiece joins with "##" merging, SentencePiece
 * turns "▁" into spaces; both with clean_up_tokenization when the tokenizer's
 * clean_up_tokenization_spaces says so. *out is malloc'd and NUL-terminated. */
int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
               char **out, char *err, size_t errlen);

/* Writes the tokenizer's files into dir as save_pretrained does: the vocabulary (vocab.txt,
 * spm.model or spiece.model, the bytes it was loaded from), tokenizer_config.json,
 * special_tokens_map.json and (T5) added_tokens.json, each atomically; model_max_length > 0
 * replaces the folder's (0 keeps it; none at all: HF's "very large" default). Other
 * tokenizer files in dir (tokenizer.json, another class's vocabulary, ...) are removed, so
 * that AutoTokenizer loads these. */
int tok_save(const tok_tokenizer *t, const char *dir, long model_max_length, char *err,
             size_t errlen);

/* ---- the tokenizer of the data a model was trained with ----------------------------------
 * train --save-model: the data's tokenizer into the model folder. Checkpoints: into
 * CKPT_ROOT/tokenizers/ID/ (ID: the data's identity as trainer.json records it, "manifest
 * xxh64 H" -> H), once per dataset; export finds it by the checkpoint's trainer.json. */
int tok_save_data_tokenizer(const char *data_dir, const char *model_dir, long model_max_length,
                            char *err, size_t errlen);
int tok_store_for_checkpoints(const char *data_dir, const char *data_id, const char *ckpt_root,
                              long model_max_length, char *err, size_t errlen);
/* The same for a tokenizer in hand (finetune's, whose data is a labelled file: data_id
 * "file xxh64 H") */
int tok_store_tokenizer(const tok_tokenizer *t, const char *data_id, const char *ckpt_root,
                        long model_max_length, char *err, size_t errlen);
/* Copies a checkpoint's tokenizer files (see above) into out_dir: 1 if it did, 0 if the
 * checkpoint has none (trained on synthetic data, or before tokenizers were stored). */
int tok_export_checkpoint(const char *ckpt_dir, const char *out_dir, char *err, size_t errlen);

#endif
