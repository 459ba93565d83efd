/* electra.h - ELECTRA's joint pretraining (Clark et al. 2020; google-research/electra
 * run_pretraining.py): a small masked-LM generator (ElectraForMaskedLM) and the
 * discriminator (ElectraForPreTraining) as one model of bert.c's two networks.
 *   the generator reads the masked input and predicts the masked tokens (cross-entropy, mean
 *   over the masked positions);
 *   its predictions are sampled (Gumbel-max, Philox: bert_sample_replacements) into the
 *   masked positions of the original input: the discriminator's input, labelled 1 where the
 *   sample differs from the original token;
 *   the discriminator detects the replaced tokens (BCE with logits, mean over the attended
 *   positions);
 *   loss = gen_weight (1) x generator's + disc_weight (50) x discriminator's.
 * The two share the embedding tables and their LayerNorm (the "electra/embeddings" scope of
 * google's code), and the generator's output projection is the word embeddings. Tensor
 * names: the discriminator's HF names, the generator's "generator." + its own HF names
 * (without the shared generator.electra.embeddings.*). Units: embeddings (shared, with both
 * networks' embeddings_project), the generator's layers and head, the discriminator's
 * layers and head; steps: the generator's (embeddings, layers, head) then the
 * discriminator's, so the embeddings unit serves two steps and the generator's head. */
#ifndef ZT_MODELS_ELECTRA_H
#define ZT_MODELS_ELECTRA_H

#include "bert.h"

#define ELECTRA_PRETRAINING_FILE "electra_pretraining.json"
#define ELECTRA_GENERATOR_FILE "generator_config.json"
#define ELECTRA_GEN_PREFIX "generator."

typedef struct electra_joint {
    int on;                    /* the model is the joint pretraining */
    int have_gen;              /* gen came from generator_config.json */
    double gen_size;           /* zerotrain.electra_generator_size (0: 0.25) */
    bert_config gen;           /* the generator (ElectraForMaskedLM) */
    float gen_weight, disc_weight, temperature;
    int disallow;              /* disallow_correct: the original token is never sampled */
} electra_joint;

/* The folder of config.json `path` (a discriminator d): electra_pretraining.json makes j a
 * joint model, generator_config.json gives its generator; neither: j->on 0. */
int electra_joint_load(const char *path, const bert_config *d, electra_joint *j);
/* d's joint pretraining (j->on): its generator from generator_config.json when j has one,
 * else scaled from d by j->gen_size (run_pretraining.py get_generator_config: hidden_size
 * round(H x size), intermediate_size 4 x that, num_attention_heads max(1, that / 64), the
 * layers and everything else d's). where: for messages. */
int electra_joint_make(const bert_config *d, electra_joint *j, const char *where);
/* Beside config.json `path` (of the discriminator d): generator_config.json and
 * electra_pretraining.json. */
int electra_joint_save(const electra_joint *j, const bert_config *d, const char *path,
                       const char *torch_dtype);
int electra_joint_layout(const bert_config *d, const electra_joint *j, zt_layout *l);

extern const zt_model_ops electra_joint_ops;
int electra_joint_create(const bert_config *d, const electra_joint *j, const zt_layout *l,
                         int dropout, uint64_t seed, int hdt, zt_mem_account *acct, void **out);
/* zt_engine_electra_outputs' fields of a model of electra_joint_create */
int electra_joint_outputs(const void *m, zt_electra_outputs *o);

#endif
