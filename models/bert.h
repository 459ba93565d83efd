/* bert.h - the BERT family's post-LayerNorm encoders as units: embeddings, one per encoder
 * layer, and a head (masked LM, tied to the word embeddings, or sequence classification).
 * Three families share the kernels and differ in names, config fields and small rules:
 *   BERT        BertForMaskedLM / BertForSequenceClassification (pooler: dense + tanh,
 *               dropout, classifier)
 *   RoBERTa     RobertaForMaskedLM / ...ForSequenceClassification: positions start after
 *               pad_token_id and skip padding (create_position_ids_from_input_ids), the LM
 *               head's activation is always the erf GELU, the classifier is
 *               dropout, dense, tanh, dropout, out_proj on <s>
 *   DistilBERT  DistilBertForMaskedLM / ...ForSequenceClassification: no token types, no
 *               dropout after the attention's output projection, the classifier is
 *               pre_classifier, ReLU, dropout, classifier; config keys dim, n_layers, ...
 * Every family's word embeddings (and RoBERTa's positions) have nn.Embedding's padding_idx:
 * that row starts at zero and the lookup gives it no gradient. HF config.json in and out.
 *   ELECTRA     ElectraForMaskedLM (the generator: its head maps to embedding_size) /
 *               ElectraForSequenceClassification; embeddings embedding_size wide, mapped by
 *               embeddings_project
 *   ALBERT      AlbertForMaskedLM / AlbertForSequenceClassification: embeddings
 *               embedding_size wide mapped by encoder.embedding_hidden_mapping_in; a unit per
 *               layer group (albert_layer_groups.g, inner_group_num layers each) that every
 *               layer of the group uses: the model runs in steps (model.h), one per layer
 *               application; no dropout after the feed-forward; the MLM head's activation is
 *               hidden_act, its width embedding_size
 * position_embedding_type relative_key / relative_key_query: a distance_embedding per layer,
 * no absolute positions added. No next-sentence head. */
#ifndef ZT_MODELS_BERT_H
#define ZT_MODELS_BERT_H

#include "model.h"

/* the head: "architectures" in config.json */
enum { BERT_HEAD_MLM = 0, BERT_HEAD_CLS = 1 };
/* config.json's "problem_type" (BertForSequenceClassification); 0: not set, decided by the
 * labels as HF decides it (num_labels 1: regression; integer labels: single-label; else
 * multi-label) */
enum { BERT_PROBLEM_SINGLE = 1, BERT_PROBLEM_MULTI, BERT_PROBLEM_REGRESSION };
#define BERT_LABELS_BYTES 32768 /* id2label's names, NUL-separated */

/* position_embedding_type "absolute", "relative_key", "relative_key_query" */
enum { BERT_REL_NONE = 0, BERT_REL_KEY, BERT_REL_KEY_QUERY };
/* model_type: "bert", "roberta", "distilbert", "electra", "albert" */
enum { BERT_FAMILY_BERT = 0, BERT_FAMILY_ROBERTA, BERT_FAMILY_DISTILBERT, BERT_FAMILY_ELECTRA,
       BERT_FAMILY_ALBERT };

typedef struct bert_config {
    int family;                /* BERT_FAMILY_* */
    int pad_id;                /* pad_token_id: the embeddings' padding_idx (-1: none) */
    int bos_id, eos_id;        /* RoBERTa's bos_token_id, eos_token_id (written back) */
    int vocab, hidden, layers, heads, inter, max_pos, type_vocab; /* DistilBERT: type_vocab 0 */
    int emb;                   /* ELECTRA's and ALBERT's embedding_size (the embeddings'
                                * width; hidden for the others); ELECTRA: != hidden:
                                * embeddings_project maps it; ALBERT: always
                                * embedding_hidden_mapping_in */
    int groups, inner;         /* ALBERT's num_hidden_groups and inner_group_num (1 for the
                                * others): layer i runs group int(i / (layers / groups)),
                                * each group inner layers of its own */
    float eps, hidden_drop, attn_drop, init_range;
    int act_id;                /* hidden_act: an index of bert_act_name (0: "gelu") */
    int untied;                /* tie_word_embeddings false: the MLM decoder's own weight */
    int disc;                  /* ELECTRA: architectures names ElectraForPreTraining (the
                                * discriminator): its replaced-token-detection head, unless the
                                * run makes it a classifier */
    int sop;                   /* ALBERT: AlbertForPreTraining, the masked-LM head with the
                                * pooler and the sentence-order head (sop_classifier) beside
                                * it */
    int rel;                   /* position_embedding_type: BERT_REL_* */
    /* the head */
    int head;                  /* BERT_HEAD_* */
    int num_labels, problem;   /* BERT_HEAD_CLS: classes (or regression outputs), BERT_PROBLEM_* */
    int has_cls_drop;          /* "classifier_dropout" given (0: null, hidden_dropout_prob applies) */
    float cls_drop;
    int labels_len;            /* bytes of labels used; 0: HF's default names LABEL_0, ... */
    char labels[BERT_LABELS_BYTES]; /* id2label: num_labels names, each NUL-terminated */
} bert_config;

/* hidden_act's transformers name of act_id ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu",
 * "silu", "swish"), and its kernel (ZT_ACT_*, layers.h) */
const char *bert_act_name(const bert_config *c);
int bert_act(const bert_config *c);
/* HF BertConfig, RobertaConfig or DistilBertConfig from config.json (by model_type; absent:
 * bert): shape fields and the activation are required (one of the names above).
 * "architectures" naming the family's ...ForSequenceClassification chooses that head (with
 * id2label, num_labels, problem_type and classifier_dropout / seq_classif_dropout); anything
 * else the masked-LM head. */
int bert_config_load(const char *path, bert_config *c);
/* Makes c a BertForSequenceClassification of num_labels outputs (problem: BERT_PROBLEM_*),
 * names: num_labels NUL-terminated names back to back (NULL: LABEL_0, LABEL_1, ...).
 * ZT_E_CONFIG when the names do not fit or repeat. */
int bert_config_set_classifier(bert_config *c, int num_labels, int problem, const char *names,
                               size_t names_len);
/* label id's name (id2label), or NULL outside [0, num_labels) */
const char *bert_label_name(const bert_config *c, int id, char *buf, size_t n);
/* "single_label_classification", "multi_label_classification", "regression", or NULL */
const char *bert_problem_name(int problem);
/* "bert-tiny" ... "bert-large", "roberta-base", "roberta-large", "distilbert-base"; vocab 0:
 * the preset's own (30522; RoBERTa 50265). */
int bert_config_preset(const char *name, int vocab, bert_config *c);
/* Writes config.json (HF field names) atomically. */
/* torch_dtype: "float32" (NULL) or "bfloat16", the dtype of the weights written beside it */
int bert_config_save(const bert_config *c, const char *path, const char *torch_dtype);
int bert_layout(const bert_config *c, zt_layout *out);
/* "bert", "roberta", "distilbert", "electra"; and the family's HF architecture of the config's
 * head */
const char *bert_model_type(const bert_config *c);
const char *bert_arch(const bert_config *c);


extern const zt_model_ops bert_ops;
/* ELECTRA's joint pretraining (electra.c), on models of this file:
 * bert_sample_replacements: a masked LM's (the generator's) last forward pass samples each
 * labelled position's token, argmax(logits / temperature + Gumbel noise) with the noise from
 * Philox (seed, the sample's index, ZT_RNG_ELECTRA_SAMPLE at the position), into ids[b T +
 * t] (the other positions untouched); disallow: the original token (the label) has 1000
 * taken off first (google's disallow_correct); u and row: scratch of vocab_size each.
 * bert_set_rtd_targets: an ElectraForPreTraining's targets of the prepared batch (its labels
 * 0 / 1 [B, T], decided after prepare). */
void bert_sample_replacements(void *m, float temperature, int disallow, uint64_t seed,
                              uint32_t *u, float *row, int64_t *ids);
void bert_set_rtd_targets(void *m, const int64_t *labels);
/* dropout: 0 = off regardless of the config; seed keys the dropout masks. */
int bert_create(const bert_config *c, const zt_layout *l, int dropout, uint64_t seed,
                int hdt, zt_mem_account *acct, void **out);

#endif
