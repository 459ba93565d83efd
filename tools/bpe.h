/* bpe.h - GPT-2's byte-level BPE as Hugging Face's slow RobertaTokenizer / GPT2Tokenizer run it
 * (models/gpt2/tokenization_gpt2.py): vocab.json and merges.txt in, a text (no added tokens)
 * to ids, and the byte-level symbols back to bytes. The text is cut by GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (its alternatives in order, as the regex module tries them), each piece's UTF-8 bytes are
 * spelled with bytes_to_unicode's printable characters, and merged pair by pair in the order
 * of merges.txt's ranks; a symbol not in vocab.json is the unknown token's id. Framing,
 * special and added tokens, and decoding to text are tokenizer.c's. */
#ifndef ZT_TOOLS_BPE_H
#define ZT_TOOLS_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bpe_model bpe_model;

/* vocab.json ({"token": id}) and merges.txt ("#version" line, then "a b" per line; read as
 * HF reads it: the first line and whatever follows the last newline are not merges). name:
 * for messages. Returns < 0 with one line in err. */
int bpe_load(const char *name, const char *vocab, size_t vocab_len, const char *merges,
             size_t merges_len, bpe_model **out, char *err, size_t errlen);
void bpe_free(bpe_model *b);
/* len(encoder): the entries of vocab.json */
int bpe_vocab_size(const bpe_model *b);
/* the id of a token (its byte-level spelling), or -1 */
int32_t bpe_token_id(const bpe_model *b, const char *tok, size_t n);
/* the token of id, or NULL */
const char *bpe_id_token(const bpe_model *b, int32_t id);
/* The ids of text's pieces appended to *ids (n used, cap allocated; grown with realloc);
 * unknown symbols get unk. 0, or < 0 out of memory. */
int bpe_encode(bpe_model *b, const char *text, size_t len, int32_t unk, int32_t **ids, size_t *n,
               size_t *cap);
/* The bytes a byte-level spelling stands for, appended to out (at most strlen(tok) bytes);
 * characters outside the byte alphabet are copied as they are. Returns the bytes written. */
size_t bpe_token_bytes(const char *tok, char *out);

#endif
