/* zoo.h - the built-in models behind one interface: which family a config.json or preset
 * names, and that family's layout, model and config file. The engine calls only these. */
#ifndef ZT_MODELS_ZOO_H
#define ZT_MODELS_ZOO_H

#include "bert.h"
#include "electra.h"
#include "t5.h"

enum { ZT_MODEL_BERT = 1, ZT_MODEL_T5 = 2 };

typedef struct zt_model_cfg {
    int type;                  /* ZT_MODEL_* */
    bert_config bert;
    t5_config t5;
    electra_joint ej;          /* bert's (a discriminator's) ELECTRA joint pretraining: on
                                * from a folder with electra_pretraining.json, or by the head
                                * ZT_HEAD_MLM with ej.gen_size set first (the engine's
                                * electra_generator_size) */
} zt_model_cfg;

/* config.json by its "model_type" ("bert", "t5"; absent: bert). */
int zt_model_config_load(const char *path, zt_model_cfg *c);
/* bert-tiny ... bert-large, t5-small, t5-base, t5-v1_1-small, t5-v1_1-base. */
int zt_model_config_preset(const char *name, int vocab, zt_model_cfg *c);
/* torch_dtype: NULL = "float32" */
int zt_model_config_save(const zt_model_cfg *c, const char *path, const char *torch_dtype);
/* The head a run asks for (zt_config.head, ZT_HEAD_*, with num_labels, problem_type and
 * label_names) over the one the config names (source: the config, for messages). A changed
 * BERT head is logged as a notice; T5 takes ZT_HEAD_AUTO only. */
int zt_model_head_apply(zt_model_cfg *c, const char *source, int head, int num_labels,
                        int problem, const char *const *names);
int zt_model_layout(const zt_model_cfg *c, zt_layout *l);
/* hdt: the parameters' dtype, -1 (fp32) or ZT_HALF_* (half-precision compute copies) */
int zt_model_create(const zt_model_cfg *c, const zt_layout *l, int dropout, uint64_t seed,
                    int hdt, zt_mem_account *acct, const zt_model_ops **ops, void **model);
/* 1 when both describe the same parameter shapes (a checkpoint fits the model) */
int zt_model_same_shapes(const zt_model_cfg *a, const zt_model_cfg *b);
/* 1 and the first field that differs into buf ("hidden_size 128 in A, 256 in B", config.json
 * names; the names a_name, b_name), or 0 when the shapes are the same. */
int zt_model_shape_diff(const zt_model_cfg *a, const char *a_name, const zt_model_cfg *b,
                        const char *b_name, char *buf, size_t n);
void zt_model_info_fill(const zt_model_cfg *c, zt_model_info *o);
/* "BERT L4 H256 A4 I1024 V30522" / "T5 L6/6 d512 A8 kv64 ff2048 relu tied V32128" */
void zt_model_describe(const zt_model_cfg *c, char *buf, size_t n);

#endif
