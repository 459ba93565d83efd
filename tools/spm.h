/* spm.h - a small C interface to SentencePiece (tools/spm.cc): train a model from lines a
 * callback supplies, load one, look up pieces, encode text to ids. It does not decode, sample
 * or expose the model protobuf. Errors come back as < 0 plus one line in err. */
#ifndef ZT_TOOLS_SPM_H
#define ZT_TOOLS_SPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spm_model spm_model;

/* Next training sentence: returns 1 with *line and *len set (valid until the next call), 0 at the
 * end, < 0 on an error (training stops and spm_train returns that value). */
typedef int (*spm_next_line)(void *user, const char **line, size_t *len);

/* The special pieces a trained model starts with. SPM_LAYOUT_BERT: [PAD] = 0, [UNK] = 1 and
 * the control symbols [CLS] [SEP] [MASK] = 2, 3, 4 (no BOS/EOS). SPM_LAYOUT_T5: <pad> = 0,
 * </s> = 1 (EOS), <unk> = 2, no BOS, as T5's own spiece.model. */
enum { SPM_LAYOUT_BERT = 0, SPM_LAYOUT_T5 = 1 };

/* Trains a model of exactly vocab_size pieces, the special ones included (model_type
 * "unigram" or "bpe") in the given layout, NFKC normalisation (plus case folding when
 * lower_case), a fixed thread count and seed. *model (malloc'd, *model_len bytes) is the
 * serialized model, as spm_train writes it. */
int spm_train(const char *model_type, int vocab_size, int lower_case, int layout,
              spm_next_line next, void *user, char **model, size_t *model_len, char *err,
              size_t errlen);

int spm_load(const void *model, size_t len, spm_model **out, char *err, size_t errlen);
void spm_free(spm_model *m);

int spm_piece_count(const spm_model *m);
/* Id of the piece spelled exactly so, or -1. */
int32_t spm_piece_id(const spm_model *m, const char *piece);
const char *spm_piece(const spm_model *m, int32_t id);
float spm_score(const spm_model *m, int32_t id);
/* The model's own unk/bos/eos/pad ids (-1 when disabled). */
enum { SPM_UNK = 0, SPM_BOS, SPM_EOS, SPM_PAD };
int32_t spm_meta_id(const spm_model *m, int which);
/* What a piece is: SPM_NORMAL (user-defined ones too), SPM_CONTROL, SPM_UNKNOWN, SPM_BYTE
 * (-1: no such id) */
enum { SPM_NORMAL = 0, SPM_CONTROL, SPM_UNKNOWN, SPM_BYTE };
int spm_piece_kind(const spm_model *m, int32_t id);

/* Appends the ids of text to *ids (n used, cap allocated; grown with realloc). */
int spm_encode(spm_model *m, const char *text, size_t len, int32_t **ids, size_t *n,
               size_t *cap, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
