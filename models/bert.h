/* bert.h - BertForMaskedLM (post-LayerNorm encoder, MLM head tied to the word embeddings)
 * as units: embeddings, one per encoder layer, the head. HF config.json in and out.
 * No pooler, no next-sentence head, no relative position embeddings. */
#ifndef ZT_MODELS_BERT_H
#define ZT_MODELS_BERT_H

#include "model.h"

typedef struct bert_config {
    int vocab, hidden, layers, heads, inter, max_pos, type_vocab;
    float eps, hidden_drop, attn_drop, init_range;
} bert_config;

/* HF BertConfig from config.json: shape fields are required; hidden_act must be "gelu". */
int bert_config_load(const char *path, bert_config *c);
/* "bert-tiny" ... "bert-large"; vocab 0 = 30522. */
int bert_config_preset(const char *name, int vocab, bert_config *c);
/* Writes config.json (HF field names) atomically. */
int bert_config_save(const bert_config *c, const char *path);
int bert_layout(const bert_config *c, zt_layout *out);

extern const zt_model_ops bert_ops;
/* dropout: 0 = off regardless of the config; seed keys the dropout masks. */
int bert_create(const bert_config *c, const zt_layout *l, int dropout, uint64_t seed,
                zt_mem_account *acct, void **out);

#endif
