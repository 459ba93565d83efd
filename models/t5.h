/* t5.h - T5ForConditionalGeneration (pre-norm encoder-decoder with relative position
 * biases) as units: the shared embedding, each encoder block, the encoder's final norm, each
 * decoder block, the decoder's final norm with the LM head. HF config.json in and out.
 * Not here: generation, caches, fp16. */
#ifndef ZT_MODELS_T5_H
#define ZT_MODELS_T5_H

#include "model.h"

typedef struct t5_config {
    int vocab, d_model, d_kv, d_ff, layers, dec_layers, heads, buckets, max_dist;
    int act;                   /* ZT_ACT_* of the feed-forward (layers.h) */
    int gated;                 /* feed_forward_proj "gated-*": wo(act(wi_0 x) * wi_1 x) */
    int tie;                   /* tie_word_embeddings: LM head = shared, scaled d_model^-0.5 */
    float eps, dropout, init_factor;
    int dec_start, pad, eos;   /* decoder_start_token_id, pad_token_id, eos_token_id */
    int mt5;                   /* model_type "mt5" (MT5ForConditionalGeneration: T5 v1.1's
                                * architecture, its own model_type kept on save) */
} t5_config;

/* HF T5Config or MT5Config from config.json (model_type "t5" or "mt5"): vocab_size, d_model,
 * d_kv, d_ff, num_layers, num_heads required; the rest default as in transformers. */
int t5_config_load(const char *path, t5_config *c);
/* "t5-small", "t5-base" (v1.0: relu, tied), "t5-v1_1-small", "t5-v1_1-base" (gated-gelu,
 * untied); vocab 0 = 32128. Returns 1 when name is not a T5 preset (nothing set). */
int t5_config_preset(const char *name, int vocab, t5_config *c);
int t5_config_save(const t5_config *c, const char *path, const char *torch_dtype);
int t5_layout(const t5_config *c, zt_layout *out);

extern const zt_model_ops t5_ops;
/* dropout: 0 = off regardless of the config; seed keys the dropout masks. */
int t5_create(const t5_config *c, const zt_layout *l, int dropout, uint64_t seed, int hdt,
              zt_mem_account *acct, void **out);

#endif
