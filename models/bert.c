/* bert.c - BertForMaskedLM and BertForSequenceClassification on per-unit flat buffers: config
 * (HF config.json), parameter layout, and unit-by-unit forward/backward built from layers.c,
 * in fp32 or over bf16/fp16 parameters and activations (hlayers.c). Owns only activations;
 * parameters and gradients are the engine's. Not here: the NSP head. */

#include "bert.h"
#include "../common/prof.h"
#include "hfconfig.h"
#include "layers.h"
#include "lmrows.h"
#include "hlayers.h"
#include "../common/half.h"
#include "../common/err.h"
#include "../format/fileio.h"
#include "../common/rng.h"
#include "../memory/mem.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ------------------------------------------------------------------------- */

/* The families: HF's names of their classes and tensors. Head tables are whole names; the
 * embeddings' and layers' are suffixes after "<prefix>.embeddings." and "<prefix>.<enc>.N.". */
enum { E_WORD, E_POS, E_TYPE, E_LNW, E_LNB, E_N };
enum { L_QW, L_QB, L_KW, L_KB, L_VW, L_VB, L_AOW, L_AOB, L_LN1W, L_LN1B, L_IW, L_IB, L_OW, L_OB,
       L_LN2W, L_LN2B, L_N, L_DIST = L_N }; /* L_DIST: relative positions' distance_embedding */
enum { H_TW, H_TB, H_LNW, H_LNB, H_BIAS, H_DEC, H_N }; /* H_DEC: an untied decoder's */
enum { C_PW, C_PB, C_W, C_B, C_N }; /* the classification head */

typedef struct family_def {
    const char *type, *prefix, *mlm_arch, *cls_arch, *enc;
    const char *config_class;   /* for messages: "BertConfig", ... */
    const char *const *keys;    /* its config.json fields (NULL-terminated) */
    const char *const *emb;    /* [E_N]; E_TYPE NULL: no token types */
    const char *const *layer;  /* [L_N] */
    const char *mlm[H_N], *bias_alias, *decoder;
    const char *cls[C_N];
    const char *cls_desc;
} family_def;

static const char *const bert_emb[E_N] = {
    "word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight",
    "LayerNorm.weight", "LayerNorm.bias"};
static const char *const bert_layer[L_N] = { /* (RoBERTa's too) */
    "attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
    "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
    "attention.output.dense.weight", "attention.output.dense.bias",
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "intermediate.dense.weight", "intermediate.dense.bias", "output.dense.weight",
    "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"};
static const char *const distil_emb[E_N] = {
    "word_embeddings.weight", "position_embeddings.weight", NULL, "LayerNorm.weight",
    "LayerNorm.bias"};
static const char *const distil_layer[L_N] = {
    "attention.q_lin.weight", "attention.q_lin.bias", "attention.k_lin.weight",
    "attention.k_lin.bias", "attention.v_lin.weight", "attention.v_lin.bias",
    "attention.out_lin.weight", "attention.out_lin.bias", "sa_layer_norm.weight",
    "sa_layer_norm.bias", "ffn.lin1.weight", "ffn.lin1.bias", "ffn.lin2.weight",
    "ffn.lin2.bias", "output_layer_norm.weight", "output_layer_norm.bias"};

static const char *const albert_layer[L_N] = {
    "attention.query.weight", "attention.query.bias", "attention.key.weight",
    "attention.key.bias", "attention.value.weight", "attention.value.bias",
    "attention.dense.weight", "attention.dense.bias", "attention.LayerNorm.weight",
    "attention.LayerNorm.bias", "ffn.weight", "ffn.bias", "ffn_output.weight", "ffn_output.bias",
    "full_layer_layer_norm.weight", "full_layer_layer_norm.bias"};

/* each family's config class's own keys (NULL-terminated) */
static const char *const bert_keys[] = {
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
    "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps",
    "position_embedding_type", NULL};
static const char *const electra_keys[] = { /* (summary_*: ElectraForMultipleChoice's) */
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
    "num_attention_heads", "intermediate_size", "hidden_act", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "position_embedding_type", "summary_type",
    "summary_use_proj", "summary_activation", "summary_last_dropout", NULL};
static const char *const albert_keys[] = {
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
    "num_attention_heads", "intermediate_size", "inner_group_num", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
    "type_vocab_size", "initializer_range", "layer_norm_eps", "classifier_dropout_prob",
    "position_embedding_type", NULL};
static const char *const distil_keys[] = {
    "vocab_size", "max_position_embeddings", "sinusoidal_pos_embds", "n_layers", "n_heads",
    "dim", "hidden_dim", "dropout", "attention_dropout", "activation", "initializer_range",
    "qa_dropout", "seq_classif_dropout", NULL};

static const family_def families[] = {
    [BERT_FAMILY_BERT] = {
        "bert", "bert", "BertForMaskedLM", "BertForSequenceClassification", "encoder.layer",
        "BertConfig", bert_keys, bert_emb, bert_layer,
        {"cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
         "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
         "cls.predictions.bias"}, "cls.predictions.decoder.bias", "cls.predictions.decoder.weight",
        {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight",
         "classifier.bias"}, "classification-head (pooler and classifier)"},
    [BERT_FAMILY_ROBERTA] = {
        "roberta", "roberta", "RobertaForMaskedLM", "RobertaForSequenceClassification",
        "encoder.layer", "RobertaConfig", bert_keys, bert_emb, bert_layer,
        {"lm_head.dense.weight", "lm_head.dense.bias", "lm_head.layer_norm.weight",
         "lm_head.layer_norm.bias", "lm_head.bias"}, "lm_head.decoder.bias",
        "lm_head.decoder.weight",
        {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
         "classifier.out_proj.bias"}, "classification-head (classifier.dense and out_proj)"},
    [BERT_FAMILY_DISTILBERT] = {
        "distilbert", "distilbert", "DistilBertForMaskedLM", "DistilBertForSequenceClassification",
        "transformer.layer", "DistilBertConfig", distil_keys, distil_emb, distil_layer,
        {"vocab_transform.weight", "vocab_transform.bias", "vocab_layer_norm.weight",
         "vocab_layer_norm.bias", "vocab_projector.bias"}, NULL, "vocab_projector.weight",
        {"pre_classifier.weight", "pre_classifier.bias", "classifier.weight", "classifier.bias"},
        "classification-head (pre_classifier and classifier)"},
    /* (masked-LM names: the generator's, ElectraForMaskedLM; the discriminator's head,
     * ElectraForPreTraining, is built apart: rtd()) */
    [BERT_FAMILY_ELECTRA] = {
        "electra", "electra", "ElectraForMaskedLM", "ElectraForSequenceClassification",
        "encoder.layer", "ElectraConfig", electra_keys, bert_emb, bert_layer,
        {"generator_predictions.dense.weight", "generator_predictions.dense.bias",
         "generator_predictions.LayerNorm.weight", "generator_predictions.LayerNorm.bias",
         "generator_lm_head.bias"}, NULL, "generator_lm_head.weight",
        {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
         "classifier.out_proj.bias"}, "classification-head (classifier.dense and out_proj)"},
    /* (enc: "<enc>.<group>.albert_layers.<inner>.<layer name>") */
    [BERT_FAMILY_ALBERT] = {
        "albert", "albert", "AlbertForMaskedLM", "AlbertForSequenceClassification",
        "encoder.albert_layer_groups", "AlbertConfig", albert_keys, bert_emb, albert_layer,
        {"predictions.dense.weight", "predictions.dense.bias", "predictions.LayerNorm.weight",
         "predictions.LayerNorm.bias", "predictions.bias"}, "predictions.decoder.bias",
        "predictions.decoder.weight",
        {"albert.pooler.weight", "albert.pooler.bias", "classifier.weight", "classifier.bias"},
        "classification-head (pooler and classifier)"},
};

static const family_def *fam(const bert_config *c) { return &families[c->family]; }

/* the embeddings' width (ELECTRA's and ALBERT's embedding_size; 0: hidden), and whether a
 * projection maps it to hidden_size (ElectraModel's embeddings_project iff the two differ;
 * AlbertTransformer's embedding_hidden_mapping_in always) */
static int emb_of(const bert_config *c) { return c->emb > 0 ? c->emb : c->hidden; }
static int projected(const bert_config *c)
{
    return c->family == BERT_FAMILY_ALBERT || emb_of(c) != c->hidden;
}
/* the masked-LM head's width: ELECTRA's generator (generator_predictions.dense) and ALBERT's
 * AlbertMLMHead map hidden_size to embedding_size for the tied decoder; the others keep
 * hidden_size */
static int head_w(const bert_config *c)
{
    return c->family == BERT_FAMILY_ELECTRA || c->family == BERT_FAMILY_ALBERT ? emb_of(c)
                                                                              : c->hidden;
}
/* the LM rows' width: the layers', or the head's when wider (an ELECTRA generator's) */
static int lm_w(const bert_config *c) { return head_w(c) > c->hidden ? head_w(c) : c->hidden; }
static int albert(const bert_config *c) { return c->family == BERT_FAMILY_ALBERT; }
/* ELECTRA's discriminator head (ElectraForPreTraining): replaced-token detection */
static int rtd(const bert_config *c)
{
    return c->family == BERT_FAMILY_ELECTRA && c->disc && c->head != BERT_HEAD_CLS;
}

const char *bert_model_type(const bert_config *c) { return fam(c)->type; }

const char *bert_arch(const bert_config *c)
{
    return c->head == BERT_HEAD_CLS ? fam(c)->cls_arch
           : c->sop                 ? "AlbertForPreTraining"
           : rtd(c)                 ? "ElectraForPreTraining" : fam(c)->mlm_arch;
}

/* transformers' ACT2FN names BERT takes, and the kernels computing them */
static const struct { const char *name; int act; } acts[] = {
    {"gelu", ZT_ACT_GELU},      {"gelu_new", ZT_ACT_GELU_TANH}, {"gelu_pytorch_tanh", ZT_ACT_GELU_TANH},
    {"relu", ZT_ACT_RELU},      {"silu", ZT_ACT_SILU},          {"swish", ZT_ACT_SILU},
};
#define N_ACTS ((int)(sizeof acts / sizeof *acts))

const char *bert_act_name(const bert_config *c)
{
    return acts[c->act_id >= 0 && c->act_id < N_ACTS ? c->act_id : 0].name;
}

int bert_act(const bert_config *c)
{
    return acts[c->act_id >= 0 && c->act_id < N_ACTS ? c->act_id : 0].act;
}

/* a boolean field taken only at one value: another is refused by name (transformers would
 * build another model), never ignored */
typedef struct bool_field { const char *key; int want; const char *what; } bool_field;

static int check_flags(const cJSON *o, const char *path, const bool_field *flags, size_t n,
                       const char *model)
{
    for (size_t k = 0; k < n; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, flags[k].key);
        if (!v || cJSON_IsNull(v))
            continue;
        if (!cJSON_IsBool(v))
            return zt_fail(ZT_E_CONFIG, "%s: \"%s\" must be true or false", path, flags[k].key);
        if (cJSON_IsTrue(v) != flags[k].want)
            return zt_fail(ZT_E_UNSUPPORTED, "%s: \"%s\": %s is not supported: it makes %s, "
                           "which zerotrain's %s does not implement (remove it or set %s)",
                           path, flags[k].key, flags[k].want ? "false" : "true", flags[k].what,
                           model, flags[k].want ? "true" : "false");
    }
    return 0;
}

/* BertConfig fields that change the model, taken only at the value BERT's masked-LM and
 * classifier have here */
static int check_defaults(const cJSON *o, const char *path)
{
    static const bool_field flags[] = {
        {"is_decoder", 0, "a causal decoder (BertLMHeadModel)"},
        {"add_cross_attention", 0, "cross-attention layers"},
        {"is_encoder_decoder", 0, "an encoder-decoder"},
        {"tie_encoder_decoder", 0, "an encoder-decoder"},
    };
    ZT_TRY(check_flags(o, path, flags, sizeof flags / sizeof *flags, "BERT"));
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(o, "pruned_heads");
    if (ph && !cJSON_IsNull(ph) && (!cJSON_IsObject(ph) || ph->child))
        return zt_fail(ZT_E_UNSUPPORTED, "%s: \"pruned_heads\" is not empty: pruned attention "
                       "heads are not supported (their layers' shapes differ)", path);
    return 0;
}

static const char *const rel_names[] = {"absolute", "relative_key", "relative_key_query"};

/* position_embedding_type: absolute (default), relative_key or relative_key_query
 * (BertSelfAttention's distance_embedding) */
static int load_rel(const cJSON *o, const char *path, bert_config *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "position_embedding_type");
    c->rel = BERT_REL_NONE;
    if (!v || cJSON_IsNull(v))
        return 0;
    for (int k = 0; cJSON_IsString(v) && k < 3; k++)
        if (strcmp(v->valuestring, rel_names[k]) == 0) {
            c->rel = k;
            return 0;
        }
    return zt_fail(ZT_E_UNSUPPORTED, "%s: \"position_embedding_type\" is %s%s%s; zerotrain "
                   "computes \"absolute\", \"relative_key\" and \"relative_key_query\"", path,
                   cJSON_IsString(v) ? "\"" : "", cJSON_IsString(v) ? v->valuestring : "not a string",
                   cJSON_IsString(v) ? "\"" : "");
}

/* tie_word_embeddings (default true): false gives the MLM decoder a weight of its own */
static int load_tie(const cJSON *o, const char *path, bert_config *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
        return zt_fail(ZT_E_CONFIG, "%s: \"tie_word_embeddings\" must be true or false", path);
    c->untied = cJSON_IsFalse(v);
    return 0;
}

static int load_act(const cJSON *o, const char *path, const char *key, bert_config *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        return zt_fail(ZT_E_CONFIG, "%s: missing required field \"%s\"", path, key);
    for (int k = 0; cJSON_IsString(v) && k < N_ACTS; k++)
        if (strcmp(v->valuestring, acts[k].name) == 0) {
            c->act_id = k;
            return 0;
        }
    return zt_fail(ZT_E_UNSUPPORTED, "%s: \"%s\" is %s%s%s; zerotrain computes \"gelu\", "
                   "\"gelu_new\", \"gelu_pytorch_tanh\", \"relu\", \"silu\" and \"swish\"", path,
                   key, cJSON_IsString(v) ? "\"" : "",
                   cJSON_IsString(v) ? v->valuestring : "not a string",
                   cJSON_IsString(v) ? "\"" : "");
}

static int validate(const bert_config *c, const char *where)
{
    if (c->hidden % c->heads != 0)
        return zt_fail(ZT_E_CONFIG,
                       "%s: hidden_size %d is not divisible by num_attention_heads %d", where,
                       c->hidden, c->heads);
    if (c->hidden_drop >= 1.0f || c->attn_drop >= 1.0f || c->cls_drop >= 1.0f)
        return zt_fail(ZT_E_CONFIG, "%s: dropout probabilities must be < 1", where);
    if (c->pad_id >= c->vocab)
        return zt_fail(ZT_E_CONFIG, "%s: pad_token_id %d is not an id of the vocabulary (vocab_size "
                       "%d)", where, c->pad_id, c->vocab);
    if (albert(c) && emb_of(c) > c->hidden) /* (ELECTRA's generators have them wider) */
        return zt_fail(ZT_E_UNSUPPORTED, "%s: embedding_size %d is larger than hidden_size %d: "
                       "zerotrain's ALBERT takes embeddings no wider than the layers (every "
                       "ALBERT release has embedding_size <= hidden_size)", where, c->emb,
                       c->hidden);
    if (albert(c) && (c->groups < 1 || c->groups > c->layers || c->inner < 1))
        return zt_fail(ZT_E_CONFIG, "%s: num_hidden_groups %d and inner_group_num %d: ALBERT "
                       "needs 1 <= num_hidden_groups <= num_hidden_layers (%d) and "
                       "inner_group_num >= 1", where, c->groups, c->inner, c->layers);
    if (albert(c) && c->rel)
        return zt_fail(ZT_E_UNSUPPORTED, "%s: \"position_embedding_type\" is \"%s\": zerotrain's "
                       "ALBERT computes \"absolute\" positions only", where,
                       c->rel == BERT_REL_KEY ? "relative_key" : "relative_key_query");
    if (c->family == BERT_FAMILY_ROBERTA && c->max_pos <= c->pad_id + 1)
        return zt_fail(ZT_E_CONFIG, "%s: max_position_embeddings %d leaves no position: RoBERTa's "
                       "positions start at pad_token_id + 1 = %d", where, c->max_pos,
                       c->pad_id + 1);
    return 0;
}


static const char *const problem_names[] = {NULL, "single_label_classification",
                                            "multi_label_classification", "regression"};

const char *bert_problem_name(int problem)
{
    return problem > 0 && problem <= BERT_PROBLEM_REGRESSION ? problem_names[problem] : NULL;
}

const char *bert_label_name(const bert_config *c, int id, char *buf, size_t n)
{
    if (id < 0 || id >= c->num_labels)
        return NULL;
    if (c->labels_len == 0) {
        snprintf(buf, n, "LABEL_%d", id);
        return buf;
    }
    const char *s = c->labels;
    for (int i = 0; i < id; i++)
        s += strlen(s) + 1;
    return s;
}

int bert_config_set_classifier(bert_config *c, int num_labels, int problem, const char *names,
                               size_t names_len)
{
    if (num_labels < 1)
        return zt_fail(ZT_E_CONFIG, "a classifier needs num_labels >= 1, not %d", num_labels);
    if (names_len > sizeof c->labels)
        return zt_fail(ZT_E_CONFIG, "the %d label names take %zu bytes; at most %zu are kept",
                       num_labels, names_len, sizeof c->labels);
    c->head = BERT_HEAD_CLS;
    c->num_labels = num_labels;
    c->problem = problem;
    c->labels_len = 0;
    if (!names)
        return 0;
    /* the names: num_labels strings, none twice (predictions map back through them) */
    size_t off = 0;
    for (int i = 0; i < num_labels; i++) {
        const char *a = names + off;
        size_t len = off < names_len ? strnlen(a, names_len - off) : 0;
        if (off >= names_len || off + len >= names_len)
            return zt_fail(ZT_E_CONFIG, "id2label: %d names given, %d labels", i, num_labels);
        for (size_t b = 0; b < off;) {
            if (strcmp(names + b, a) == 0)
                return zt_fail(ZT_E_CONFIG, "id2label: the name \"%s\" is given to two labels",
                               a);
            b += strlen(names + b) + 1;
        }
        off += len + 1;
    }
    memmove(c->labels, names, off); /* names may be c->labels itself */
    c->labels_len = (int)off;
    return 0;
}

/* "architectures" chooses the head; BertForSequenceClassification's fields */
static int load_head(const cJSON *o, const char *path, bert_config *c)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "architectures"), *v;
    int cls = 0, n = 2, problem = 0, rc;
    char *names = NULL;
    size_t len = 0;
    c->head = BERT_HEAD_MLM;
    if (!cJSON_IsArray(a))
        a = NULL;
    cJSON_ArrayForEach(v, a) {
        cls |= cJSON_IsString(v) && strcmp(v->valuestring, fam(c)->cls_arch) == 0;
        c->disc |= c->family == BERT_FAMILY_ELECTRA && cJSON_IsString(v) &&
                   strcmp(v->valuestring, "ElectraForPreTraining") == 0;
        c->sop |= albert(c) && cJSON_IsString(v) &&
                  strcmp(v->valuestring, "AlbertForPreTraining") == 0;
    }
    if (c->sop) { /* AlbertSOPHead: nn.Linear(hidden_size, num_labels), its loss over 2 */
        int n2 = 2;
        ZT_TRY(zt_hfc_int(o, path, "num_labels", 0, 2, 1, &n2));
        if (n2 != 2)
            return zt_fail(ZT_E_CONFIG, "%s: AlbertForPreTraining with num_labels %d: its "
                           "sentence-order head has 2 outputs (in order, swapped)", path, n2);
    }
    if (!cls)
        return 0;
    const cJSON *id2 = cJSON_GetObjectItemCaseSensitive(o, "id2label");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "problem_type");
    const cJSON *cd = c->family == BERT_FAMILY_DISTILBERT || albert(c)
                          ? NULL /* seq_classif_dropout, classifier_dropout_prob: the family's
                                  * loader */
                          : cJSON_GetObjectItemCaseSensitive(o, "classifier_dropout");
    if (id2 && !cJSON_IsNull(id2)) {
        if (!cJSON_IsObject(id2) || (n = cJSON_GetArraySize(id2)) < 1)
            return zt_fail(ZT_E_CONFIG, "%s: \"id2label\" is not an object of labels", path);
        /* keys "0" ... "n-1", each once: the names in id order */
        const cJSON **by_id = calloc((size_t)n, sizeof *by_id);
        if (!by_id)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        rc = 0;
        cJSON_ArrayForEach(v, id2) {
            char *end;
            long k = strtol(v->string, &end, 10);
            if (rc == 0 && (end == v->string || *end || k < 0 || k >= n || by_id[k]))
                rc = zt_fail(ZT_E_CONFIG, "%s: \"id2label\" key \"%s\": the keys must be the "
                             "ids 0 ... %d, each once", path, v->string, n - 1);
            else if (rc == 0 && !cJSON_IsString(v))
                rc = zt_fail(ZT_E_CONFIG, "%s: \"id2label\" \"%s\" is not a string", path,
                             v->string);
            else if (rc == 0)
                by_id[k] = v, len += strlen(v->valuestring) + 1;
        }
        if (rc == 0 && !(names = malloc(len ? len : 1)))
            rc = zt_fail(ZT_E_NOMEM, "out of memory");
        for (int i = 0, off = 0; rc == 0 && i < n; i++) {
            size_t l = strlen(by_id[i]->valuestring) + 1;
            memcpy(names + off, by_id[i]->valuestring, l);
            off += (int)l;
        }
        free(by_id);
        if (rc < 0) {
            free(names);
            return rc;
        }
    } else if ((rc = zt_hfc_int(o, path, "num_labels", 0, 2, 1, &n)) < 0) {
        return rc;
    }
    if (pt && !cJSON_IsNull(pt)) {
        for (int k = 1; k <= BERT_PROBLEM_REGRESSION && !problem; k++)
            problem = cJSON_IsString(pt) && strcmp(pt->valuestring, problem_names[k]) == 0 ? k : 0;
        if (!problem) {
            free(names);
            return zt_fail(ZT_E_CONFIG, "%s: \"problem_type\" must be \"regression\", "
                           "\"single_label_classification\" or \"multi_label_classification\"",
                           path);
        }
    }
    if (cd && !cJSON_IsNull(cd)) {
        if (!cJSON_IsNumber(cd) || !(cd->valuedouble >= 0.0 && cd->valuedouble < 1.0)) {
            free(names);
            return zt_fail(ZT_E_CONFIG, "%s: \"classifier_dropout\" must be null or a number in "
                           "[0, 1)", path);
        }
        c->cls_drop = (float)cd->valuedouble;
        c->has_cls_drop = 1;
    }
    /* names that are HF's defaults (LABEL_0, ...) are kept as the default */
    int dflt = names != NULL;
    for (int i = 0, off = 0; dflt && i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "LABEL_%d", i);
        dflt = strcmp(names + off, buf) == 0;
        off += (int)strlen(names + off) + 1;
    }
    rc = bert_config_set_classifier(c, n, problem, dflt ? NULL : names, dflt ? 0 : len);
    free(names);
    if (rc < 0)
        return zt_fail_wrap(rc, "%s", path);
    return 0;
}

/* model_type's family; absent: bert */
static int family_of(const cJSON *o, const char *path, int *family)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    *family = BERT_FAMILY_BERT;
    if (!mt)
        return 0;
    for (int f = 0; cJSON_IsString(mt) && f < (int)(sizeof families / sizeof *families); f++)
        if (strcmp(mt->valuestring, families[f].type) == 0) {
            *family = f;
            return 0;
        }
    return zt_fail(ZT_E_UNSUPPORTED, "%s: model_type %s%s%s is not supported: zerotrain "
                   "trains \"bert\", \"roberta\", \"distilbert\", \"electra\", \"albert\", "
                   "\"t5\" and \"mt5\" models", path,
                   cJSON_IsString(mt) ? "\"" : "",
                   cJSON_IsString(mt) ? mt->valuestring : "(not a string)",
                   cJSON_IsString(mt) ? "\"" : "");
}

/* BertConfig's and RobertaConfig's fields (the same names; RoBERTa's defaults differ) */
static int load_bert_fields(const cJSON *o, const char *path, bert_config *c)
{
    int roberta = c->family == BERT_FAMILY_ROBERTA, rc;
    double drop = albert(c) ? 0.0 : 0.1; /* AlbertConfig's dropouts default to 0 */
    if ((rc = load_rel(o, path, c)) < 0 ||
        (rc = zt_hfc_int(o, path, "vocab_size", 1, 0, 1, &c->vocab)) < 0 ||
        (rc = zt_hfc_int(o, path, "hidden_size", 1, 0, 1, &c->hidden)) < 0 ||
        (rc = zt_hfc_int(o, path, "num_hidden_layers", 1, 0, 1, &c->layers)) < 0 ||
        (rc = zt_hfc_int(o, path, "num_attention_heads", 1, 0, 1, &c->heads)) < 0 ||
        (rc = zt_hfc_int(o, path, "intermediate_size", 1, 0, 1, &c->inter)) < 0 ||
        (rc = zt_hfc_int(o, path, "max_position_embeddings", 1, 0, 1, &c->max_pos)) < 0 ||
        (rc = zt_hfc_int(o, path, "type_vocab_size", 1, 0, 1, &c->type_vocab)) < 0 ||
        (rc = zt_hfc_int(o, path, "pad_token_id", 0, roberta ? 1 : 0, 0, &c->pad_id)) < 0 ||
        (rc = zt_hfc_float(o, path, "layer_norm_eps", 1e-12, 0.0, 1.0, &c->eps)) < 0 ||
        (rc = zt_hfc_float(o, path, "hidden_dropout_prob", drop, 0.0, 1.0, &c->hidden_drop)) < 0 ||
        (rc = zt_hfc_float(o, path, "attention_probs_dropout_prob", drop, 0.0, 1.0,
                           &c->attn_drop)) < 0 ||
        (rc = zt_hfc_float(o, path, "initializer_range", 0.02, 0.0, 10.0, &c->init_range)) < 0 ||
        (rc = load_act(o, path, "hidden_act", c)) < 0 || (rc = check_defaults(o, path)) < 0 ||
        (rc = load_tie(o, path, c)) < 0)
        return rc;
    if (roberta && ((rc = zt_hfc_int(o, path, "bos_token_id", 0, 0, 0, &c->bos_id)) < 0 ||
                    (rc = zt_hfc_int(o, path, "eos_token_id", 0, 2, 0, &c->eos_id)) < 0))
        return rc;
    c->emb = c->hidden; /* ElectraConfig's and AlbertConfig's embedding_size (default 128) */
    c->groups = c->inner = 1;
    if ((c->family == BERT_FAMILY_ELECTRA || albert(c)) &&
        (rc = zt_hfc_int(o, path, "embedding_size", 0, 128, 1, &c->emb)) < 0)
        return rc;
    if (albert(c) && /* AlbertConfig: bos 2, eos 3 ([CLS], [SEP]); classifier_dropout_prob */
        ((rc = zt_hfc_int(o, path, "num_hidden_groups", 0, 1, 1, &c->groups)) < 0 ||
         (rc = zt_hfc_int(o, path, "inner_group_num", 0, 1, 1, &c->inner)) < 0 ||
         (rc = zt_hfc_int(o, path, "bos_token_id", 0, 2, 0, &c->bos_id)) < 0 ||
         (rc = zt_hfc_int(o, path, "eos_token_id", 0, 3, 0, &c->eos_id)) < 0 ||
         (rc = zt_hfc_float(o, path, "classifier_dropout_prob", 0.1, 0.0, 1.0, &c->cls_drop)) < 0))
        return rc;
    c->has_cls_drop |= albert(c);
    return 0;
}

/* DistilBertConfig's fields (configuration_distilbert.py: its own names and defaults; the
 * LayerNorms' eps is 1e-12, not a field) */
static int load_distil_fields(const cJSON *o, const char *path, bert_config *c)
{
    int rc;
    static const bool_field flags[] = {
        {"sinusoidal_pos_embds", 0, "fixed sinusoidal position embeddings"},
    }; /* (tie_weights_, in older hub configs, is no field of the class: transformers ignores
        * it, and tie_word_embeddings decides) */
    ZT_TRY(check_flags(o, path, flags, sizeof flags / sizeof *flags, "DistilBERT"));
    c->type_vocab = 0;
    c->eps = 1e-12f;
    if ((rc = zt_hfc_int(o, path, "vocab_size", 0, 30522, 1, &c->vocab)) < 0 ||
        (rc = zt_hfc_int(o, path, "dim", 0, 768, 1, &c->hidden)) < 0 ||
        (rc = zt_hfc_int(o, path, "n_layers", 0, 6, 1, &c->layers)) < 0 ||
        (rc = zt_hfc_int(o, path, "n_heads", 0, 12, 1, &c->heads)) < 0 ||
        (rc = zt_hfc_int(o, path, "hidden_dim", 0, 3072, 1, &c->inter)) < 0 ||
        (rc = zt_hfc_int(o, path, "max_position_embeddings", 0, 512, 1, &c->max_pos)) < 0 ||
        (rc = zt_hfc_int(o, path, "pad_token_id", 0, 0, 0, &c->pad_id)) < 0 ||
        (rc = zt_hfc_float(o, path, "dropout", 0.1, 0.0, 1.0, &c->hidden_drop)) < 0 ||
        (rc = zt_hfc_float(o, path, "attention_dropout", 0.1, 0.0, 1.0, &c->attn_drop)) < 0 ||
        (rc = zt_hfc_float(o, path, "seq_classif_dropout", 0.2, 0.0, 1.0, &c->cls_drop)) < 0 ||
        (rc = zt_hfc_float(o, path, "initializer_range", 0.02, 0.0, 10.0, &c->init_range)) < 0 ||
        (rc = load_tie(o, path, c)) < 0)
        return rc;
    c->has_cls_drop = 1;
    c->emb = c->hidden;
    c->groups = c->inner = 1;
    if (!cJSON_GetObjectItemCaseSensitive(o, "activation"))
        return c->act_id = 0, 0; /* "gelu" */
    return load_act(o, path, "activation", c);
}

/* Keys that are no field of the family's config class: transformers keeps them as attributes
 * its model never reads; a notice names them, so that nothing is dropped unseen. The
 * PretrainedConfig fields (configuration_utils.py: outputs, generation defaults, labels,
 * special ids, bookkeeping) and the legacy ones older hub configs carry are accepted as they
 * are: none changes an encoder's forward pass. */
static void notice_unknown(const cJSON *o, const char *path, const bert_config *c)
{
    static const char *const generic[] = {
        "_name_or_path", "_commit_hash", "_attn_implementation", "transformers_version",
        "model_type", "architectures", "torch_dtype", "use_bfloat16", "return_dict",
        "output_hidden_states", "output_attentions", "torchscript", "tf_legacy_loss",
        "pruned_heads", "tie_word_embeddings", "chunk_size_feed_forward", "is_encoder_decoder",
        "is_decoder", "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder",
        "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
        "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
        "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
        "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
        "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
        "suppress_tokens", "begin_suppress_tokens", "finetuning_task", "id2label", "label2id",
        "num_labels", "tokenizer_class", "prefix", "bos_token_id", "pad_token_id", "eos_token_id",
        "sep_token_id", "decoder_start_token_id", "task_specific_params", "problem_type",
        "use_cache", "classifier_dropout",
        /* legacy: read by no current model */
        "output_past", "gradient_checkpointing", "xla_device", "tie_weights_", "vocab_type",
        "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
        "pooler_size_per_head", "pooler_type", "layer_norm_epsilon",
        /* ALBERT's hub configs (the TF release's flags) */
        "down_scale_factor", "gap_size", "net_structure_type", "num_memory_blocks"};
    const cJSON *v;
    cJSON_ArrayForEach(v, o) {
        int known = 0;
        for (const char *const *k = fam(c)->keys; !known && *k; k++)
            known = strcmp(v->string, *k) == 0;
        for (size_t k = 0; !known && k < sizeof generic / sizeof *generic; k++)
            known = strcmp(v->string, generic[k]) == 0;
        if (!known)
            zt_log(ZT_LOG_WARN, "%s: \"%s\" is no field of %s: transformers keeps it as an "
                   "attribute its model does not read, and zerotrain ignores it too", path,
                   v->string, fam(c)->config_class);
    }
}

int bert_config_load(const char *path, bert_config *c)
{
    cJSON *o;
    int rc = zt_hfc_open(path, &o);
    if (rc < 0)
        return rc;
    memset(c, 0, sizeof *c);
    if ((rc = family_of(o, path, &c->family)) < 0)
        goto out;
    rc = c->family == BERT_FAMILY_DISTILBERT ? load_distil_fields(o, path, c)
                                             : load_bert_fields(o, path, c);
    if (rc == 0 && (rc = load_head(o, path, c)) == 0)
        rc = validate(c, path);
    if (rc == 0)
        notice_unknown(o, path, c);
out:
    cJSON_Delete(o);
    return rc;
}

int bert_config_preset(const char *name, int vocab, bert_config *c)
{
    static const struct { const char *name; int family, L, H, A; } presets[] = {
        {"bert-tiny", 0, 2, 128, 2},   {"bert-mini", 0, 4, 256, 4},   {"bert-small", 0, 4, 512, 8},
        {"bert-medium", 0, 8, 512, 8}, {"bert-base", 0, 12, 768, 12}, {"bert-large", 0, 24, 1024, 16},
        {"roberta-base", BERT_FAMILY_ROBERTA, 12, 768, 12},
        {"roberta-large", BERT_FAMILY_ROBERTA, 24, 1024, 16},
        {"distilbert-base", BERT_FAMILY_DISTILBERT, 6, 768, 12},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(name, presets[i].name) != 0)
            continue;
        int rob = presets[i].family == BERT_FAMILY_ROBERTA;
        *c = (bert_config){.family = presets[i].family, .vocab = vocab > 0 ? vocab : rob ? 50265 : 30522,
                           .hidden = presets[i].H, .layers = presets[i].L, .heads = presets[i].A,
                           .inter = 4 * presets[i].H, .max_pos = rob ? 514 : 512,
                           .type_vocab = rob ? 1 : 2, .eps = rob ? 1e-5f : 1e-12f,
                           .hidden_drop = 0.1f, .attn_drop = 0.1f, .init_range = 0.02f,
                           .pad_id = rob ? 1 : 0, .eos_id = rob ? 2 : 0,
                           .emb = presets[i].H, .groups = 1, .inner = 1};
        if (presets[i].family == BERT_FAMILY_DISTILBERT) {
            c->type_vocab = 0;
            c->has_cls_drop = 1;
            c->cls_drop = 0.2f;
        }
        if (c->pad_id >= c->vocab)
            return zt_fail(ZT_E_CONFIG, "%s with vocab_size %d: too small for its pad id %d",
                           name, c->vocab, c->pad_id);
        return 0;
    }
    return zt_fail(ZT_E_CONFIG,
                   "unknown model preset \"%s\" (known: bert-tiny, bert-mini, bert-small, "
                   "bert-medium, bert-base, bert-large, roberta-base, roberta-large, "
                   "distilbert-base)",
                   name);
}

/* BertForSequenceClassification's fields as HF writes them: id2label, label2id, problem_type
 * and classifier_dropout (text, ",\n"-led lines; malloc'd) */
static char *head_fields(const bert_config *c)
{
    cJSON *id2 = cJSON_CreateObject(), *l2i = cJSON_CreateObject();
    char *a = NULL, *b = NULL, *out = NULL, buf[32], key[16];
    for (int i = 0; id2 && l2i && i < c->num_labels; i++) {
        const char *name = bert_label_name(c, i, buf, sizeof buf);
        snprintf(key, sizeof key, "%d", i);
        if (!cJSON_AddStringToObject(id2, key, name) || !cJSON_AddNumberToObject(l2i, name, i))
            goto out;
    }
    if (!id2 || !l2i || !(a = cJSON_PrintUnformatted(id2)) || !(b = cJSON_PrintUnformatted(l2i)))
        goto out;
    const char *pn = bert_problem_name(c->problem);
    size_t n = strlen(a) + strlen(b) + 256;
    if ((out = malloc(n))) {
        char drop[64] = ",\n  \"classifier_dropout\": null";
        if (c->family == BERT_FAMILY_DISTILBERT || albert(c)) /* (seq_classif_dropout,
                                                                 * classifier_dropout_prob) */
            drop[0] = 0;
        else if (c->has_cls_drop)
            snprintf(drop, sizeof drop, ",\n  \"classifier_dropout\": %.9g", c->cls_drop);
        snprintf(out, n, ",\n  \"id2label\": %s,\n  \"label2id\": %s,\n  \"problem_type\": "
                 "%s%s%s%s", a, b, pn ? "\"" : "", pn ? pn : "null", pn ? "\"" : "", drop);
    }
out:
    free(a);
    free(b);
    cJSON_Delete(id2);
    cJSON_Delete(l2i);
    return out;
}

int bert_config_save(const bert_config *c, const char *path, const char *torch_dtype)
{
    char text[2048], *head = NULL;
    int n, cls = c->head == BERT_HEAD_CLS, rc;
    const char *dtype = torch_dtype ? torch_dtype : "float32";
    if (cls && !(head = head_fields(c)))
        return zt_fail(ZT_E_NOMEM, "out of memory writing %s", path);
    if (c->family == BERT_FAMILY_DISTILBERT) /* DistilBertConfig's names */
        n = snprintf(text, sizeof text,
                     "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"distilbert\",\n"
                     "  \"vocab_size\": %d,\n  \"dim\": %d,\n  \"n_layers\": %d,\n"
                     "  \"n_heads\": %d,\n  \"hidden_dim\": %d,\n  \"activation\": \"%s\",\n"
                     "  \"dropout\": %.9g,\n  \"attention_dropout\": %.9g,\n"
                     "  \"max_position_embeddings\": %d,\n  \"sinusoidal_pos_embds\": false,\n"
                     "  \"initializer_range\": %.9g,\n  \"qa_dropout\": 0.1,\n"
                     "  \"seq_classif_dropout\": %.9g,\n  \"pad_token_id\": %d,\n"
                     "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"",
                     bert_arch(c), c->vocab, c->hidden, c->layers, c->heads, c->inter,
                     bert_act_name(c), c->hidden_drop, c->attn_drop, c->max_pos, c->init_range,
                     c->cls_drop, c->pad_id, c->untied ? "false" : "true", dtype);
    else {
        char ids[96] = "";
        if (c->family == BERT_FAMILY_ROBERTA || albert(c))
            snprintf(ids, sizeof ids, "  \"bos_token_id\": %d,\n  \"eos_token_id\": %d,\n",
                     c->bos_id, c->eos_id);
        n = snprintf(text, sizeof text,
                     "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
                     "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                     "  \"num_attention_heads\": %d,\n  \"intermediate_size\": %d,\n"
                     "  \"hidden_act\": \"%s\",\n  \"hidden_dropout_prob\": %.9g,\n"
                     "  \"attention_probs_dropout_prob\": %.9g,\n  \"max_position_embeddings\": %d,\n"
                     "  \"type_vocab_size\": %d,\n  \"initializer_range\": %.9g,\n"
                     "  \"layer_norm_eps\": %.9g,\n  \"pad_token_id\": %d,\n%s"
                     "  \"position_embedding_type\": \"%s\",\n  \"tie_word_embeddings\": %s,\n"
                     "  \"torch_dtype\": \"%s\"",
                     bert_arch(c), fam(c)->type, c->vocab, c->hidden, c->layers, c->heads, c->inter,
                     bert_act_name(c), c->hidden_drop, c->attn_drop, c->max_pos, c->type_vocab,
                     c->init_range, c->eps, c->pad_id, ids, rel_names[c->rel],
                     c->untied ? "false" : "true", dtype);
        if ((c->family == BERT_FAMILY_ELECTRA || albert(c)) && n > 0 && (size_t)n < sizeof text)
            n += snprintf(text + n, sizeof text - (size_t)n, ",\n  \"embedding_size\": %d",
                          emb_of(c));
        if (albert(c) && n > 0 && (size_t)n < sizeof text)
            n += snprintf(text + n, sizeof text - (size_t)n, ",\n  \"num_hidden_groups\": %d,\n"
                          "  \"inner_group_num\": %d,\n  \"classifier_dropout_prob\": %.9g",
                          c->groups, c->inner, c->cls_drop);
    }
    const void *parts[3] = {text, head ? head : "", "\n}\n"};
    size_t lens[3] = {(size_t)n, head ? strlen(head) : 0, 3};
    rc = zt_file_write_atomic(path, parts, lens, 3);
    free(head);
    return rc;
}

/* ---- layout ------------------------------------------------------------------------- */

static int add(zt_layout *l, const char *name, int64_t d0, int64_t d1, int init, int decay)
{
    int64_t shape[2] = {d0, d1};
    return zt_layout_add_param(l, name, d1 ? 2 : 1, shape, init, decay);
}

int bert_layout(const bert_config *c, zt_layout *l)
{
    static const struct { int out, in, init, decay; } lp[L_N] = { /* the layers' parameters */
        {'C', 'C', ZT_INIT_NORMAL, 1}, {'C', 0, ZT_INIT_ZEROS, 0}, /* query */
        {'C', 'C', ZT_INIT_NORMAL, 1}, {'C', 0, ZT_INIT_ZEROS, 0}, /* key */
        {'C', 'C', ZT_INIT_NORMAL, 1}, {'C', 0, ZT_INIT_ZEROS, 0}, /* value */
        {'C', 'C', ZT_INIT_NORMAL, 1}, {'C', 0, ZT_INIT_ZEROS, 0}, /* attention output */
        {'C', 0, ZT_INIT_ONES, 0},     {'C', 0, ZT_INIT_ZEROS, 0}, /* its LayerNorm */
        {'I', 'C', ZT_INIT_NORMAL, 1}, {'I', 0, ZT_INIT_ZEROS, 0}, /* intermediate */
        {'C', 'I', ZT_INIT_NORMAL, 1}, {'C', 0, ZT_INIT_ZEROS, 0}, /* output */
        {'C', 0, ZT_INIT_ONES, 0},     {'C', 0, ZT_INIT_ZEROS, 0}, /* its LayerNorm */
    };
    const family_def *f = fam(c);
    char n[ZT_NAME_MAX];
    int C = c->hidden, F = c->inter, E = emb_of(c), w, k;
    int64_t rows[E_N] = {c->vocab, c->max_pos, c->type_vocab};
    memset(l, 0, sizeof *l);
    l->init_std = c->init_range;
    snprintf(l->arch, sizeof l->arch, "%s", bert_arch(c));
    snprintf(l->head_desc, sizeof l->head_desc, "%s",
             c->head == BERT_HEAD_CLS ? f->cls_desc
             : rtd(c) ? "replaced-token-detection head (discriminator_predictions)" : "MLM-head");
    if (zt_layout_add_unit(l, "embeddings") < 0)
        goto fail;
    for (int j = 0; j < E_N; j++) { /* the nn.Embedding tables, then the LayerNorm */
        if (!f->emb[j])
            continue;
        snprintf(n, sizeof n, "%s.embeddings.%s", f->prefix, f->emb[j]);
        if ((k = add(l, n, j <= E_TYPE ? rows[j] : E, j <= E_TYPE ? E : 0,
                     j == E_LNW ? ZT_INIT_ONES : j == E_LNB ? ZT_INIT_ZEROS : ZT_INIT_NORMAL,
                     j <= E_TYPE)) < 0)
            goto fail;
        l->params[k].embedding = j <= E_TYPE;
        if (j == E_WORD)
            l->params[k].pad_row = c->pad_id;
        if (j == E_POS && c->family == BERT_FAMILY_ROBERTA)
            l->params[k].pad_row = c->pad_id;
    }
    if (projected(c)) { /* ElectraModel.embeddings_project, AlbertTransformer.
                         * embedding_hidden_mapping_in: nn.Linear(embedding_size, hidden) */
        const char *pj = albert(c) ? "encoder.embedding_hidden_mapping_in" : "embeddings_project";
        snprintf(n, sizeof n, "%s.%s.weight", f->prefix, pj);
        if (add(l, n, C, E, ZT_INIT_NORMAL, 1) < 0)
            goto fail;
        snprintf(n, sizeof n, "%s.%s.bias", f->prefix, pj);
        if (add(l, n, C, 0, ZT_INIT_ZEROS, 0) < 0)
            goto fail;
    }
    w = 0; /* the word embeddings (the MLM decoder's weight, unless untied) */
    if (c->head == BERT_HEAD_MLM && !c->untied && !rtd(c))
        snprintf(l->params[w].alias, ZT_NAME_MAX, "%s", f->decoder);
    /* a unit per layer; ALBERT's per layer group, its inner_group_num layers one after the
     * other (the model's steps: one per layer application) */
    for (int i = 0; i < (albert(c) ? c->groups : c->layers); i++) {
        snprintf(n, sizeof n, albert(c) ? "layer_group.%d" : "layer.%d", i);
        if (zt_layout_add_unit(l, n) < 0)
            goto fail;
        for (int q = 0; q < (albert(c) ? c->inner : 1); q++)
            for (int j = 0; j < L_N; j++) {
                int64_t d0 = lp[j].out == 'C' ? C : F;
                int64_t d1 = lp[j].in ? (lp[j].in == 'C' ? C : F) : 0;
                if (albert(c))
                    snprintf(n, sizeof n, "%s.%s.%d.albert_layers.%d.%s", f->prefix, f->enc, i,
                             q, f->layer[j]);
                else
                    snprintf(n, sizeof n, "%s.%s.%d.%s", f->prefix, f->enc, i, f->layer[j]);
                if (add(l, n, d0, d1, lp[j].init, lp[j].decay) < 0)
                    goto fail;
            }
        if (c->rel) { /* nn.Embedding(2 max_position_embeddings - 1, head size) */
            snprintf(n, sizeof n, "%s.%s.%d.attention.self.distance_embedding.weight", f->prefix,
                     f->enc, i);
            if ((k = add(l, n, 2 * (int64_t)c->max_pos - 1, C / c->heads, ZT_INIT_NORMAL, 1)) < 0)
                goto fail;
            l->params[k].embedding = 1;
        }
    }
    int first_head = l->n_params;
    if (c->head == BERT_HEAD_CLS) {
        if (zt_layout_add_unit(l, "cls_head") < 0 ||
            add(l, f->cls[C_PW], C, C, ZT_INIT_NORMAL, 1) < 0 ||
            add(l, f->cls[C_PB], C, 0, ZT_INIT_ZEROS, 0) < 0 ||
            add(l, f->cls[C_W], c->num_labels, C, ZT_INIT_NORMAL, 1) < 0 ||
            add(l, f->cls[C_B], c->num_labels, 0, ZT_INIT_ZEROS, 0) < 0)
            goto fail;
    } else if (rtd(c)) { /* ElectraDiscriminatorPredictions: dense, dense_prediction (H -> 1) */
        if (zt_layout_add_unit(l, "rtd_head") < 0 ||
            add(l, "discriminator_predictions.dense.weight", C, C, ZT_INIT_NORMAL, 1) < 0 ||
            add(l, "discriminator_predictions.dense.bias", C, 0, ZT_INIT_ZEROS, 0) < 0 ||
            add(l, "discriminator_predictions.dense_prediction.weight", 1, C, ZT_INIT_NORMAL,
                1) < 0 ||
            add(l, "discriminator_predictions.dense_prediction.bias", 1, 0, ZT_INIT_ZEROS, 0) < 0)
            goto fail;
    } else {
        if (zt_layout_add_unit(l, "mlm_head") < 0 ||
            add(l, f->mlm[H_TW], head_w(c), C, ZT_INIT_NORMAL, 1) < 0 ||
            add(l, f->mlm[H_TB], head_w(c), 0, ZT_INIT_ZEROS, 0) < 0 ||
            add(l, f->mlm[H_LNW], head_w(c), 0, ZT_INIT_ONES, 0) < 0 ||
            add(l, f->mlm[H_LNB], head_w(c), 0, ZT_INIT_ZEROS, 0) < 0 ||
            (w = add(l, f->mlm[H_BIAS], c->vocab, 0, ZT_INIT_ZEROS, 0)) < 0)
            goto fail;
        if (f->bias_alias)
            snprintf(l->params[w].alias, ZT_NAME_MAX, "%s", f->bias_alias);
        if (c->untied && add(l, f->decoder, c->vocab, head_w(c), ZT_INIT_NORMAL, 1) < 0)
            goto fail;
        /* AlbertForPreTraining: AlbertModel's pooler and AlbertSOPHead's classifier, the last
         * four of the head unit */
        if (c->sop && (add(l, "albert.pooler.weight", C, C, ZT_INIT_NORMAL, 1) < 0 ||
                       add(l, "albert.pooler.bias", C, 0, ZT_INIT_ZEROS, 0) < 0 ||
                       add(l, "sop_classifier.classifier.weight", 2, C, ZT_INIT_NORMAL, 1) < 0 ||
                       add(l, "sop_classifier.classifier.bias", 2, 0, ZT_INIT_ZEROS, 0) < 0))
            goto fail;
    }
    for (k = first_head; k < l->n_params; k++)
        l->params[k].head = 1;
    return 0;
fail:
    zt_layout_free(l);
    return ZT_E_NOMEM;
}

/* ---- activations -------------------------------------------------------------------- */

/* Activations are fp32, or with half-precision parameters (dt >= 0) 16-bit (hlayers.h): the
 * pieces marked "x" below hold elements of x_es(dt) bytes; statistics, masks, the gradients'
 * scratch and the classifier's logits stay fp32. */
typedef struct layer_acts {
    void *q, *k, *v, *ctx, *att, *a_pre, *a, *h, *g, *y_pre, *y;     /* x */
    float *m1, *r1, *m2, *r2;
    uint32_t *keep;            /* attention dropout keep-mask, one bit per probability */
    uint32_t *k1, *k2;         /* hidden dropout keep-masks (attention output, FFN output) */
} layer_acts;

typedef struct bert_model {
    zt_mem_account *acct;      /* the engine's: the activations are counted there too */
    bert_config c;             /* c.layers: the layer steps (ALBERT: num_hidden_layers x
                                * inner_group_num applications of its layers) */
    const zt_layout *l;
    int *su, *sp;              /* per step (embeddings, layers, head): its unit and the index
                                * of its first parameter in the layout */
    int dt;                    /* -1: fp32; else the 16-bit dtype of parameters and
                                * activations (ZT_HALF_*) */
    int dropout, train;
    /* recomputation plan: per layer ZT_KEEP_*; seg_k >= 2: segments of seg_k layers */
    unsigned char *mode;
    int seg_k;
    int last_rc;               /* the last layer using the working sets (-1: none) */
    uint64_t seed;
    /* current batch */
    int B, T, keep_logits;
    /* the rows the layers run on: M = cu[B] tokens, sample b's are rows cu[b] ... cu[b + 1]
     * - 1. A classifier packs right-padded rows (packed: their real tokens only, positions and
     * ids in pids, ptt, ppos; no key mask); otherwise cu[b] = b T, M = B T. */
    int M, packed;
    int32_t *cu;
    int32_t *cu1;              /* [B + 1]: 0, 1, ..., B (one row per sample) */
    void *cxq;                 /* x [B, C]: the last layer's input at the [CLS] rows */
    int64_t *pids, *ptt, *ppos;
    int evaluated;             /* the last loss was an evaluation's: its logits stay */
    const int64_t *ids, *mask, *tt, *labels;
    const float *label_values;  /* classification: [B, num_labels] (multi-label, regression) */
    /* AlbertForPreTraining: the batch's sentence_order_label (NULL: no SOP loss this batch),
     * the head step's parameter index of the pooler's weight (then its bias, the SOP
     * classifier's weight and bias), and the counts the MLM and SOP means are over */
    const int64_t *sop_labels;
    int sop_base;
    int64_t lab_denom, sop_denom;
    /* ElectraForPreTraining: the replaced-token logits [M], their gradient and the labels as
     * targets (fp32) */
    float *rlog, *rdlog, *rtgt;
    int problem;                /* classification: the batch's BERT_PROBLEM_* */
    uint64_t first_sample;
    /* activations, sized for cap_bt rows */
    size_t cap_bt, cap_t, cap_b;
    float *arena;
    size_t arena_bytes;
    void *e_pre, *e;           /* x: [M, E] the embeddings' sum, after LayerNorm and dropout */
    void *ep;                  /* x: [M, C] embeddings_project's output (ELECTRA, E != C) */
    float *em, *er;
    uint32_t *ke;              /* embedding dropout keep-mask */
    layer_acts *la;
    layer_acts *ws;            /* working sets of recomputed layers: [max(1, seg_k)] */
    void *slot[3];             /* x: ZT_KEEP_OFFLOAD outputs, by their ordinal mod 3 */
    signed char *slot_of;      /* per layer: its output's slot, or -1 */
    void *t1, *t2, *t3;        /* x */
    float *tm, *tr;
    double *row_loss;
    /* training (no logits kept): the decoder runs on the labelled rows only */
    int compact, n_lab;
    int32_t *lab_rows;       /* [n_lab] row indices into [B*T] */
    int64_t *lab_c;          /* [n_lab] their labels */
    /* backward scratch */
    float *dcur, *sc[5], *si[2], *att_scratch;
    float *rel_work;           /* relative position scores' work (attention_rel_scratch) */
    int slots;                 /* attention scratch: one pair's scratch per thread */
    /* 16-bit activations: a product's gradient rounded before it is multiplied (hs, hs_n
     * elements) and the kernels' per-thread rows (xs) */
    uint16_t *hs;
    size_t hs_n;
    float *xs;
    /* classification head, [B, C] each: the [CLS] rows, the pooler's dense output, its tanh
     * (dropout applied in place) (x), their gradients (fp32); the logits [B, num_labels] and
     * theirs (fp32) */
    void *cx, *cp, *ct;
    float *cdx, *cdt, *clog, *cdlog;
    uint32_t *ck;              /* the classifier dropout's keep-mask */
    uint32_t *ck0;             /* RoBERTa: the keep-mask of the dropout on <s> */
    int64_t *rpos;             /* RoBERTa: the position ids [B T] (padded rows) */
    zt_lm_rows lm;             /* the decoder's rows: logits, and the labelled rows' transformed
                                * hidden states (lm.x) and their gradient */
    void (*poll)(void *);      /* called between kernels: lets communication advance */
    void *poll_arg;
} bert_model;

static size_t es_of(const bert_model *m) { return x_es(m->dt); }

static void free_acts(bert_model *m)
{
    zt_lm_rows_free(&m->lm);
    zt_mem_free_in(m->acct, m->arena, m->arena_bytes, ZT_MEM_ACTIVATIONS);
    m->arena = NULL;
    m->arena_bytes = 0;
    m->cap_bt = 0;
}

/* ---- carving: every activation is a 64-byte aligned piece of one arena ---------------- */


/* a layer's pieces: what selective recomputation keeps, what it recomputes, the output */
enum { P_KEPT = 1, P_RECOMP = 2, P_OUT = 4, P_ALL = 7 };

typedef struct dims {
    size_t bt, T, C, F, H, es;
} dims;

/* n elements of es bytes */
static void *take_x(zt_carver *cv, size_t n, size_t es)
{
    return zt_take(cv, (n * es + 3) / 4);
}

static void carve_layer(zt_carver *cv, layer_acts *a, unsigned pieces, const dims *d)
{
    size_t bt = d->bt, C = d->C, F = d->F, mask = bt * C / 32 + bt, es = d->es; /* B rows of bits */
    if (pieces & P_KEPT) {
        a->q = take_x(cv, bt * C, es); a->k = take_x(cv, bt * C, es);
        a->v = take_x(cv, bt * C, es);
        a->a_pre = take_x(cv, bt * C, es); a->a = take_x(cv, bt * C, es);
        a->k1 = zt_take(cv, mask); a->k2 = zt_take(cv, mask);
        a->h = take_x(cv, bt * F, es); a->y_pre = take_x(cv, bt * C, es);
        a->m1 = zt_take(cv, bt); a->r1 = zt_take(cv, bt); a->m2 = zt_take(cv, bt); a->r2 = zt_take(cv, bt);
    }
    if (pieces & P_RECOMP) {
        a->ctx = take_x(cv, bt * C, es);
        a->att = take_x(cv, bt * d->H * d->T, es);
        a->keep = zt_take(cv, bt / d->T * d->H * ((d->T * d->T + 31) / 32)); /* 4-byte words */
        a->g = take_x(cv, bt * F, es);
    }
    if (pieces & P_OUT)
        a->y = take_x(cv, bt * C, es);
}

/* the pieces of the working set unit u's recomputation writes (FULL: all, SELECTIVE:
 * the recomputed ones), in bytes */
static size_t layer_bytes(unsigned pieces, const dims *d)
{
    zt_carver cv = {NULL, 0};
    layer_acts a;
    carve_layer(&cv, &a, pieces, d);
    return cv.off;
}

static int seg_end(const bert_model *m, int k, int i) { return (m->c.layers - 1 - i) % k == 0; }
static int seg_start(int k, int e) { return e - k + 1 > 0 ? e - k + 1 : 0; }
/* the end of layer i's segment */
static int seg_of(const bert_model *m, int k, int i)
{
    return i + (m->c.layers - 1 - i) % k;
}

/* floats of one thread's attention scratch (forward and backward) */
static size_t att_per_slot(const bert_model *m, int T)
{
    int D = m->c.hidden / m->c.heads;
    size_t f = attention_scratch(m->dt, T, T, D, 0), b = attention_scratch(m->dt, T, T, D, 1);
    return f > b ? f : b;
}

/* Carves the activations of a B x T batch under plan (mode, k) from cv: counting (cv->base
 * NULL: cv->off becomes the arena's bytes; m's pointers are clobbered, so count on a copy
 * unless the real carving follows) or for real (into m->arena). Layers that keep
 * everything own every piece; recomputed ones own what they keep and share the working
 * sets: one, or one per segment position when segments are recomputed (segment ends keep
 * their output, the others' outputs are in the working set too). Offloaded outputs share
 * three slots. */
static void carve(bert_model *m, zt_carver *cv, const unsigned char *mode, int k, int B, int T)
{
    size_t es = es_of(m);
    dims d = {(size_t)B * T, (size_t)T, (size_t)m->c.hidden, (size_t)m->c.inter,
              (size_t)m->c.heads, es};
    size_t bt = d.bt, C = d.C, F = d.F;
    /* X: the widest of the layers and the embeddings (an ELECTRA generator's embeddings, and
     * its head's output, may be wider than its layers) */
    size_t X = (size_t)emb_of(&m->c) > C ? (size_t)emb_of(&m->c) : C;
    int L = m->c.layers, nws = 0, noff = 0, seg = k >= 2;
    unsigned ws_pieces = P_RECOMP; /* selective layers share only what they recompute */
    layer_acts scratch_la, *ws = cv->base ? m->ws : NULL;
    for (int i = 0; i < L; i++) {
        nws += mode[i] != ZT_KEEP_ALL;
        noff += mode[i] == ZT_KEEP_OFFLOAD || mode[i] == ZT_KEEP_FORWARD;
        if (mode[i] == ZT_KEEP_OUTPUT || mode[i] == ZT_KEEP_OFFLOAD || mode[i] == ZT_KEEP_FORWARD)
            ws_pieces = P_ALL;
    }
    m->e_pre = take_x(cv, bt * X, es); m->em = zt_take(cv, bt); m->er = zt_take(cv, bt);
    m->e = take_x(cv, bt * X, es);
    m->ep = projected(&m->c) ? take_x(cv, bt * C, es) : NULL;
    m->ke = zt_take(cv, bt * X / 32 + bt);
    /* working sets */
    nws = nws == 0 ? 0 : seg ? k : 1;
    for (int p = 0; p < nws; p++)
        carve_layer(cv, ws ? &ws[p] : &scratch_la, ws_pieces, &d);
    for (int s = 0; s < (noff ? 3 : 0); s++) {
        void *x = take_x(cv, bt * C, es);
        if (cv->base)
            m->slot[s] = x;
    }
    for (int i = 0, o = 0; i < L; i++) {
        layer_acts *a = cv->base ? &m->la[i] : &scratch_la;
        int md = mode[i], end = !seg || seg_end(m, k, i);
        int p = seg ? i - seg_start(k, seg_of(m, k, i)) : 0;
        if (cv->base) {
            m->slot_of[i] = -1;
            if (md != ZT_KEEP_ALL)
                *a = ws[p]; /* shared, but what the layer keeps */
        }
        if (md == ZT_KEEP_ALL) {
            carve_layer(cv, a, P_ALL, &d);
        } else if (md == ZT_KEEP_SELECTIVE) {
            carve_layer(cv, a, P_KEPT | P_OUT, &d);
        } else if (md == ZT_KEEP_OUTPUT && end) {
            carve_layer(cv, a, P_OUT, &d);
        } else if ((md == ZT_KEEP_OFFLOAD || md == ZT_KEEP_FORWARD) && end && cv->base) {
            m->slot_of[i] = (signed char)(o % 3); /* (forward only: layer i reads i - 1's) */
            a->y = m->slot[o % 3];
        }
        o += (md == ZT_KEEP_OFFLOAD || md == ZT_KEEP_FORWARD) && end;
    }
    m->t1 = take_x(cv, bt * X, es); m->t2 = take_x(cv, bt * X, es);
    m->t3 = take_x(cv, bt * X, es);
    m->tm = zt_take(cv, bt); m->tr = zt_take(cv, bt);
    m->row_loss = zt_take(cv, bt * 2);
    m->lab_rows = zt_take(cv, bt); m->lab_c = zt_take(cv, bt * 2);
    m->dcur = zt_take(cv, bt * C);
    for (int i = 0; i < 5; i++)
        m->sc[i] = zt_take(cv, bt * X);
    m->si[0] = zt_take(cv, bt * F); m->si[1] = zt_take(cv, bt * F);
    m->att_scratch = zt_take(cv, att_per_slot(m, T) * (size_t)m->slots);
    if (m->c.rel) { /* the relative scores' work: the full layers' or the first token's */
        int D = (int)(C / m->c.heads), H = m->c.heads;
        size_t a = attention_rel_scratch(m->dt, 0, B, H, T, T, D, m->slots, 1);
        size_t b = attention_rel_scratch(m->dt, 1, B, H, 1, T, D, m->slots, 1);
        m->rel_work = zt_take(cv, a > b ? a : b);
    }
    m->hs_n = 0;
    m->hs = NULL;
    m->xs = NULL;
    if (m->dt >= 0) {
        size_t ln = xlayernorm_scratch(m->dt, (int)X, m->slots);
        size_t ce = xcrossentropy_scratch(m->dt, m->c.head == BERT_HEAD_CLS ? m->c.num_labels
                                                                         : m->c.vocab,
                                          m->slots);
        m->hs_n = bt * (F > X ? F : X);
        m->hs = take_x(cv, m->hs_n, 2);
        m->xs = zt_take(cv, ln > ce ? ln : ce);
    }
    m->cu = zt_take(cv, (size_t)B + 1);
    if (m->c.head == BERT_HEAD_CLS || m->c.sop) {
        size_t b = (size_t)B, nl = m->c.sop ? 2 : (size_t)m->c.num_labels;
        m->cu1 = zt_take(cv, b + 1); m->cxq = take_x(cv, b * C, es);
        m->pids = zt_take(cv, bt * 2); m->ptt = zt_take(cv, bt * 2); m->ppos = zt_take(cv, bt * 2);
        m->cx = take_x(cv, b * C, es); m->cp = take_x(cv, b * C, es);
        m->ct = take_x(cv, b * C, es);
        m->cdx = zt_take(cv, b * C); m->cdt = zt_take(cv, b * C);
        m->clog = zt_take(cv, b * nl); m->cdlog = zt_take(cv, b * nl);
        m->ck = zt_take(cv, b * C / 32 + b);
        m->ck0 = zt_take(cv, b * C / 32 + b);
    }
    if (m->c.family == BERT_FAMILY_ROBERTA)
        m->rpos = zt_take(cv, bt * 2);
    if (rtd(&m->c)) {
        m->rlog = zt_take(cv, bt);
        m->rdlog = zt_take(cv, bt);
        m->rtgt = zt_take(cv, bt);
    }
}

/* Carves every activation from one allocation (64-byte aligned pieces). */
static int size_acts(bert_model *m, int B, int T)
{
    size_t bt = (size_t)B * T;
    if (m->arena && bt <= m->cap_bt && (size_t)T <= m->cap_t && (size_t)B <= m->cap_b &&
        m->slots >= omp_get_max_threads())
        return 0; /* pieces carved for (cap_bt rows, cap_t positions): a smaller batch uses
                   * prefixes */
    free_acts(m);
    m->slots = omp_get_max_threads(); /* attention: one scratch slot per thread */
    zt_carver cv = {NULL, 0};
    carve(m, &cv, m->mode, m->seg_k, B, T);
    if (!(m->arena = zt_mem_alloc_in(m->acct, cv.off, ZT_ALIGN_PAGE, ZT_MEM_ACTIVATIONS)))
        return ZT_E_NOMEM;
    m->arena_bytes = cv.off;
    cv = (zt_carver){(char *)m->arena, 0};
    carve(m, &cv, m->mode, m->seg_k, B, T);
    m->cap_bt = bt;
    m->cap_t = (size_t)T;
    m->cap_b = (size_t)B;
    return 0;
}

/* Bytes of activations a training batch of B x T takes under a plan: the arena plus the
 * buffers of the labelled rows (masked-LM: 15% of the positions, up to 20% in a batch, and
 * size_logits' room of a quarter more: a quarter of the rows). */
static size_t bert_act_bytes(void *p, int B, int T, const unsigned char *unit_mode, int k)
{
    bert_model t = *(bert_model *)p; /* counting sets t's pointers, not the model's */
    zt_carver cv = {NULL, 0};
    t.slots = omp_get_max_threads();
    carve(&t, &cv, unit_mode ? unit_mode + 1 : t.mode, unit_mode ? k : t.seg_k, B, T);
    if (t.c.head == BERT_HEAD_CLS || rtd(&t.c))
        return cv.off;
    return cv.off + zt_lm_rows_bytes((size_t)B * T / 4, t.c.vocab, lm_w(&t.c), 0, es_of(&t));
}

/* Step s's unit and first parameter: the embeddings, layer s - 1, the head. ALBERT's layer
 * application i (of num_hidden_layers x inner_group_num) is inner layer i % inner of group
 * int(li / (num_hidden_layers / num_hidden_groups)), li = i / inner, as
 * AlbertTransformer.forward computes it in Python floats. */
static void map_steps(bert_model *m, const bert_config *c, const zt_layout *l)
{
    int L = m->c.layers;
    for (int s = 0; s < L + 2; s++) {
        int u = s == 0 ? 0 : s == L + 1 ? l->n_units - 1 : s, inner = 0;
        if (albert(c) && s >= 1 && s <= L) {
            int li = (s - 1) / c->inner;
            u = 1 + (int)((double)li / ((double)c->layers / (double)c->groups));
            inner = (s - 1) % c->inner;
        }
        m->su[s] = u;
        m->sp[s] = l->units[u].first_param + inner * L_N;
    }
}

static void free_model(bert_model *m)
{
    free(m->la);
    free(m->ws);
    free(m->mode);
    free(m->slot_of);
    free(m->su);
    free(m->sp);
    free(m);
}

int bert_create(const bert_config *c, const zt_layout *l, int dropout, uint64_t seed, int hdt,
                zt_mem_account *acct, void **out)
{
    size_t L = (size_t)c->layers * (albert(c) ? (size_t)c->inner : 1);
    bert_model *m = calloc(1, sizeof *m);
    if (!m || !(m->la = calloc(L, sizeof *m->la)) || !(m->ws = calloc(L, sizeof *m->ws)) ||
        !(m->mode = calloc(L, 1)) || !(m->slot_of = calloc(L, 1)) ||
        !(m->su = calloc(L + 2, sizeof *m->su)) || !(m->sp = calloc(L + 2, sizeof *m->sp))) {
        if (m)
            free_model(m);
        return zt_fail(ZT_E_NOMEM, "out of memory creating the model");
    }
    m->c = *c;
    m->c.layers = (int)L;
    map_steps(m, c, l);
    m->sop_base = c->sop ? l->units[l->n_units - 1].n_params - 4 : 0;
    m->acct = m->lm.acct = acct;
    m->l = l;
    m->dt = hdt;
    m->dropout = dropout;
    m->train = 1;
    m->seed = seed;
    m->last_rc = -1;
    *out = m;
    return 0;
}

static void bert_destroy(void *p)
{
    bert_model *m = p;
    if (!m)
        return;
    free_acts(m);
    free_model(m);
}

static int prepare_cls(bert_model *m, const zt_batch *b, int64_t *n_labels)
{
    const bert_config *c = &m->c;
    int NL = c->num_labels, pr = c->problem;
    int64_t n = 0;
    if (!pr)
        pr = NL == 1 ? BERT_PROBLEM_REGRESSION : b->labels ? BERT_PROBLEM_SINGLE
                                                           : BERT_PROBLEM_MULTI;
    if (!b->labels && !b->label_values) { /* no labels: the logits alone (prediction) */
    } else if (pr == BERT_PROBLEM_SINGLE) {
        if (!b->labels || b->label_values)
            return zt_fail(ZT_E_INVAL, "batch: a %s classifier takes labels, one class id per "
                           "row ([%d]), not label_values", bert_problem_name(pr), b->B);
        for (int r = 0; r < b->B; r++) {
            if (b->labels[r] != -100 && (b->labels[r] < 0 || b->labels[r] >= NL))
                return zt_fail(ZT_E_RANGE, "batch: labels[%d] = %lld is neither -100 nor a "
                               "class id in [0, %d)", r, (long long)b->labels[r], NL);
            n += b->labels[r] != -100;
        }
    } else {
        if (!b->label_values || b->labels)
            return zt_fail(ZT_E_INVAL, "batch: a %s head takes label_values [%d, %d] (floats), "
                           "not class ids", bert_problem_name(pr), b->B, NL);
        for (int i = 0; i < b->B * NL; i++)
            if (!isfinite(b->label_values[i]))
                return zt_fail(ZT_E_RANGE, "batch: label_values[%d][%d] is not finite", i / NL,
                               i % NL);
        n = (int64_t)b->B * NL;
    }
    m->problem = pr;
    m->labels = b->labels;
    m->label_values = b->label_values;
    *n_labels = n;
    return 0;
}

/* RoBERTa's create_position_ids_from_input_ids: a token that is not padding is at
 * pad + its count among the row's non-padding tokens so far, padding at pad (the
 * position embeddings' padding_idx) */
static void roberta_positions(int64_t *pos, const int64_t *ids, int B, int T, int pad)
{
    for (int r = 0; r < B; r++) {
        int64_t k = 0;
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)r * T + t;
            k += ids[i] != pad;
            pos[i] = ids[i] != pad ? pad + k : pad;
        }
    }
}

/* the rows of the batch (see bert_model.M): a classifier whose every row is right-padded
 * (its mask 1 ... 1 0 ... 0, at least one 1) runs on its real tokens only -- the same
 * results, since a masked key's probability is exactly 0 and only [CLS] reaches the loss;
 * else (and for the masked LM, whose logits are per position) all B T positions */
static void set_rows(bert_model *m, const zt_batch *b)
{
    int B = b->B, T = b->T, pack = m->c.head == BERT_HEAD_CLS;
    const int64_t *mk = b->attention_mask;
    m->cu[0] = 0;
    for (int r = 0; r < B; r++) {
        int len = T;
        if (pack && mk) {
            const int64_t *row = mk + (size_t)r * T;
            for (len = 0; len < T && row[len] == 1;)
                len++;
            for (int t = len; t < T; t++)
                pack &= row[t] == 0;
            pack &= len > 0;
        }
        m->cu[r + 1] = m->cu[r] + len;
    }
    m->packed = pack;
    if (!pack)
        for (int r = 0; r <= B; r++)
            m->cu[r] = r * T;
    m->M = m->cu[B];
    if (m->c.head == BERT_HEAD_CLS)
        for (int r = 0; r <= B; r++)
            m->cu1[r] = r;
    if (m->rpos)
        roberta_positions(m->rpos, b->input_ids, B, T, m->c.pad_id);
    if (!pack)
        return;
    for (int r = 0; r < B; r++)
        for (int t = 0, i = m->cu[r]; i < m->cu[r + 1]; t++, i++) {
            size_t src = (size_t)r * T + t;
            m->pids[i] = b->input_ids[src];
            m->ptt[i] = m->tt ? m->tt[src] : 0;
            m->ppos[i] = m->rpos ? m->rpos[src] : t;
        }
}

static int bert_prepare(void *p, const zt_batch *b, int keep_logits, int64_t *n_labels)
{
    bert_model *m = p;
    const bert_config *c = &m->c;
    int64_t n = 0;
    int cls = c->head == BERT_HEAD_CLS;
    if (b->B < 1 || b->T < 1 || !b->input_ids || (!cls && !b->labels))
        return zt_fail(ZT_E_INVAL, "batch: need B >= 1, T >= 1, input_ids and labels");
    if (b->T_dec && b->T_dec != b->T)
        return zt_fail(ZT_E_SHAPE, "batch: labels are [%d, %d], input_ids [%d, %d]: BERT's "
                       "labels have the input's shape", b->B, b->T_dec, b->B, b->T);
    if (b->decoder_attention_mask)
        return zt_fail(ZT_E_INVAL, "batch: BERT takes no decoder_attention_mask");
    if (b->T > c->max_pos && (c->family != BERT_FAMILY_ROBERTA || c->rel))
        return zt_fail(ZT_E_RANGE,
                       "batch: sequence length %d exceeds max_position_embeddings %d", b->T,
                       c->max_pos);
    for (int r = 0; c->family == BERT_FAMILY_ROBERTA && !c->rel && r < b->B; r++) {
        int k = 0;
        for (int t = 0; t < b->T; t++)
            k += b->input_ids[(size_t)r * b->T + t] != c->pad_id;
        if (c->pad_id + k >= c->max_pos)
            return zt_fail(ZT_E_RANGE, "batch: row %d has %d tokens that are not padding: "
                           "RoBERTa's positions start after pad_token_id %d, so at most %d fit "
                           "max_position_embeddings %d", r, k, c->pad_id,
                           c->max_pos - c->pad_id - 1, c->max_pos);
    }
    /* DistilBERT has no token types: its tokenizer gives none (model_input_names), and
     * token_type_ids a BERT-style framing of a pair made are not read */
    const int64_t *tt = c->type_vocab > 0 ? b->token_type_ids : NULL;
    for (int i = 0; i < b->B * b->T; i++) {
        int r = i / b->T, t = i % b->T;
        if (b->input_ids[i] < 0 || b->input_ids[i] >= c->vocab)
            return zt_fail(ZT_E_RANGE, "batch: input_ids[%d][%d] = %lld is outside [0, %d)", r,
                           t, (long long)b->input_ids[i], c->vocab);
        if (tt && (tt[i] < 0 || tt[i] >= c->type_vocab))
            return zt_fail(ZT_E_RANGE,
                           "batch: token_type_ids[%d][%d] = %lld is outside [0, %d)", r, t,
                           (long long)tt[i], c->type_vocab);
        if (b->attention_mask && b->attention_mask[i] != 0 && b->attention_mask[i] != 1)
            return zt_fail(ZT_E_RANGE, "batch: attention_mask[%d][%d] = %lld is not 0 or 1", r,
                           t, (long long)b->attention_mask[i]);
        if (cls)
            continue;
        if (rtd(c)) { /* ElectraForPreTraining: 1 replaced, 0 original, over the attended */
            if (b->labels[i] != 0 && b->labels[i] != 1)
                return zt_fail(ZT_E_RANGE, "batch: labels[%d][%d] = %lld: ElectraForPreTraining's "
                               "labels are 1 (replaced) or 0 (original)", r, t,
                               (long long)b->labels[i]);
            n += !b->attention_mask || b->attention_mask[i] == 1;
            continue;
        }
        if (b->labels[i] != -100 && (b->labels[i] < 0 || b->labels[i] >= c->vocab))
            return zt_fail(ZT_E_RANGE,
                           "batch: labels[%d][%d] = %lld is neither -100 nor in [0, %d)", r, t,
                           (long long)b->labels[i], c->vocab);
        n += b->labels[i] != -100;
    }
    if (!cls && b->label_values)
        return zt_fail(ZT_E_INVAL, "batch: a masked-LM head takes labels [B, T], not "
                       "label_values");
    m->sop_labels = NULL;
    if (b->sentence_order_label && !c->sop)
        return zt_fail(ZT_E_INVAL, "batch: sentence_order_label is AlbertForPreTraining's; the "
                       "model is a %s", bert_arch(c));
    if (b->sentence_order_label) {
        int64_t k = 0;
        for (int r = 0; r < b->B; r++) {
            int64_t v = b->sentence_order_label[r];
            if (v != -100 && v != 0 && v != 1)
                return zt_fail(ZT_E_RANGE, "batch: sentence_order_label[%d] = %lld is not 0 (in "
                               "order), 1 (swapped) or -100", r, (long long)v);
            k += v != -100;
        }
        m->sop_labels = b->sentence_order_label;
        m->sop_denom = b->aux_count > 0 ? b->aux_count : k;
    }
    m->lab_denom = b->label_count > 0 ? b->label_count : n;
    if (cls)
        ZT_TRY(prepare_cls(m, b, &n));
    ZT_TRY(size_acts(m, b->B, b->T));
    m->B = b->B;
    m->T = b->T;
    m->keep_logits = keep_logits;
    m->ids = b->input_ids;
    m->mask = b->attention_mask;
    m->tt = tt;
    m->first_sample = b->first_sample;
    m->evaluated = 0;
    set_rows(m, b);
    if (cls) {
        m->compact = 0;
        *n_labels = n;
        return 0;
    }
    m->labels = b->labels;
    if (rtd(c)) { /* every position's logit, kept */
        bert_set_rtd_targets(m, b->labels);
        m->compact = 0;
        *n_labels = n;
        return 0;
    }
    m->compact = !keep_logits;
    m->n_lab = 0;
    if (m->compact) /* only labelled rows reach the loss: the decoder skips the others */
        for (int i = 0; i < b->B * b->T; i++)
            if (b->labels[i] != -100) {
                m->lab_rows[m->n_lab] = i;
                m->lab_c[m->n_lab++] = b->labels[i];
            }
    ZT_TRY(zt_lm_rows_size(&m->lm, m->compact ? (size_t)m->n_lab : (size_t)b->B * b->T,
                           (size_t)b->B * b->T, c->vocab, lm_w(c), keep_logits,
                           keep_logits ? sizeof(float) : es_of(m)));
    *n_labels = n;
    return 0;
}

/* parameter j of step u (the parameters' dtype) and its gradient (fp32), in the step's
 * unit */
static void *param(const bert_model *m, void *const *P, int u, int j)
{
    const zt_param_def *d = &m->l->params[m->sp[u] + j];
    return x_at(m->dt, P[m->su[u]], d->offset);
}

static float *gparam(const bert_model *m, float *const *G, int u, int j)
{
    const zt_param_def *d = &m->l->params[m->sp[u] + j];
    return G[m->su[u]] + d->offset;
}

/* the embeddings unit's parameter k (E_*): DistilBERT has no E_TYPE */
static int eidx(const bert_model *m, int k)
{
    return m->c.type_vocab == 0 && k > E_TYPE ? k - 1 : k;
}

/* embeddings_project's weight (+1: its bias) in unit 0, after the LayerNorm */
static int pidx(const bert_model *m) { return eidx(m, E_LNB) + 1; }

/* the dropout after the attention's output projection (DistilBERT has none) and after the
 * feed-forward (AlbertLayer has one it never applies) */
static float attout_p(const bert_model *m)
{
    return m->c.family == BERT_FAMILY_DISTILBERT ? 0.0f : m->c.hidden_drop;
}

static float ffout_p(const bert_model *m) { return albert(&m->c) ? 0.0f : m->c.hidden_drop; }

/* the MLM decoder's weight (head unit u): the word embeddings of unit 0, or its own */
static void *dec_w(const bert_model *m, void *const *P, int u)
{
    return m->c.untied ? param(m, P, u, H_DEC) : param(m, P, 0, E_WORD);
}

static float *dec_g(const bert_model *m, float *const *G, int u)
{
    return m->c.untied ? gparam(m, G, u, H_DEC) : gparam(m, G, 0, E_WORD);
}

/* the MLM head's activation: RobertaLMHead's and ElectraGeneratorPredictions' are the erf
 * GELU whatever hidden_act says */
static int head_act(const bert_model *m)
{
    return m->c.family == BERT_FAMILY_ROBERTA || m->c.family == BERT_FAMILY_ELECTRA
               ? ZT_ACT_GELU
               : bert_act(&m->c);
}

static zt_dropout drop_for(const bert_model *m, int u, int purpose, float p)
{
    zt_dropout d = {m->dropout && m->train ? p : 0.0f, m->seed, m->first_sample,
                    zt_rng_stream(u, purpose)};
    return d;
}

/* the kernels' scratch: the forward products' fp32 rows (the backward's si[0], free while a
 * forward or recomputation runs), the backward products' rounded gradient, the rows */
#define FS(m) (m)->si[0], (size_t)(m)->M * (size_t)(m)->c.inter
#define HS(m) (m)->hs, (m)->hs_n
#define XS(m) (m)->xs, (m)->slots

/* layer a's attention core over the batch's rows (packed or padded with the key mask) */
/* layer unit u's relative position scores (relative_key / relative_key_query), or NULL;
 * G NULL: the forward's */
static const zt_relpos *rel_of(bert_model *m, int u, void *const *P, float *const *G,
                               zt_relpos *r)
{
    if (!m->c.rel)
        return NULL;
    *r = (zt_relpos){param(m, P, u, L_DIST), G ? gparam(m, G, u, L_DIST) : NULL, m->rel_work,
                     m->c.max_pos, m->c.rel == BERT_REL_KEY_QUERY};
    return r;
}

static void attn_forward(bert_model *m, int u, void *const *P, layer_acts *a,
                         const zt_dropout *da)
{
    const bert_config *c = &m->c;
    zt_relpos r;
    xattention_forward_rel(m->dt, a->ctx, a->att, a->keep, a->q, a->k, a->v, m->mask,
                           m->packed ? m->cu : NULL, 0, rel_of(m, u, P, NULL, &r), da,
                           m->att_scratch, m->slots, m->B, m->T, c->hidden, c->heads);
}

static void attn_backward(bert_model *m, int u, void *const *P, float *const *G, layer_acts *a,
                          const zt_dropout *da, float *dq, float *dk, float *dv,
                          const float *dctx)
{
    const bert_config *c = &m->c;
    zt_relpos r;
    xattention_backward_rel(m->dt, dq, dk, dv, dctx, a->att, a->keep, a->q, a->k, a->v,
                            m->packed ? m->cu : NULL, 0, rel_of(m, u, P, G, &r), da,
                            m->att_scratch, m->slots, m->B, m->T, c->hidden, c->heads);
}

static int bert_set_recompute(void *p, const unsigned char *unit_mode, int k)
{
    bert_model *m = p;
    int L = m->c.layers;
    k = k >= 2 ? (k < L ? k : L) : 0;
    for (int i = 0; i < L; i++) {
        int md = unit_mode[i + 1];
        if (md >= ZT_KEEP_MODES && md != ZT_KEEP_FORWARD)
            return zt_fail(ZT_E_INVAL, "recomputation: unit %d: no mode %d", i + 1, md);
        if (k && md == ZT_KEEP_FORWARD)
            return zt_fail(ZT_E_INVAL, "forward only: no segments");
        if (k && md != ZT_KEEP_OUTPUT && md != ZT_KEEP_OFFLOAD)
            return zt_fail(ZT_E_INVAL, "recomputation in segments of %d: layer %d must be "
                           "recomputed whole (it keeps more)", k, i);
    }
    if (memcmp(m->mode, unit_mode + 1, (size_t)L) != 0 || m->seg_k != k)
        free_acts(m); /* carved again at the next prepare */
    memcpy(m->mode, unit_mode + 1, (size_t)L);
    m->seg_k = k;
    m->last_rc = -1;
    for (int i = 0; i < L; i++)
        if (m->mode[i] != ZT_KEEP_ALL)
            m->last_rc = i;
    return 0;
}

/* Head, layers in reverse, embeddings. A recomputed layer is recomputed right before its
 * backward, a segment (its layers in forward order) before its last layer's backward --
 * except the last layer (segment) that used the working sets: they still hold its forward. */
static int bert_backward_steps(const void *p, zt_step *st)
{
    const bert_model *m = p;
    int L = m->c.layers, k = m->seg_k, n = 0;
    st[n++] = (zt_step){ZT_STEP_BACKWARD, L + 1};
    for (int i = L - 1; i >= 0; i--) {
        if (k && seg_end(m, k, i) && i != L - 1)
            for (int j = seg_start(k, i); j <= i; j++)
                st[n++] = (zt_step){ZT_STEP_RECOMPUTE, j + 1};
        else if (!k && m->mode[i] != ZT_KEEP_ALL && i != m->last_rc)
            st[n++] = (zt_step){ZT_STEP_RECOMPUTE, i + 1};
        st[n++] = (zt_step){ZT_STEP_BACKWARD, i + 1};
    }
    st[n++] = (zt_step){ZT_STEP_BACKWARD, 0};
    return n;
}

static void *bert_checkpoint(void *p, int u, size_t *bytes)
{
    bert_model *m = p;
    if (u < 1 || u > m->c.layers || !m->arena || m->slot_of[u - 1] < 0 ||
        m->mode[u - 1] != ZT_KEEP_OFFLOAD)
        return NULL;
    *bytes = m->cap_bt * (size_t)m->c.hidden * es_of(m);
    return m->la[u - 1].y;
}

/* forward FLOPs of a layer (all) or of its attention core (selective) */
static double bert_recompute_flops(const void *p, int B, int T, int u, int mode)
{
    const bert_model *m = p;
    double M = (double)B * T, C = m->c.hidden, F = m->c.inter;
    if (u < 1 || u > m->c.layers || mode == ZT_KEEP_ALL)
        return 0.0;
    double core = 2.0 * 2.0 * M * T * C;
    return mode == ZT_KEEP_SELECTIVE ? core : 2.0 * M * (4.0 * C * C + 2.0 * C * F) + core;
}

static size_t bert_recompute_bytes(const void *p, int u)
{
    const bert_model *m = p;
    dims d = {(size_t)m->B * m->T, (size_t)m->T, (size_t)m->c.hidden, (size_t)m->c.inter,
              (size_t)m->c.heads, es_of(m)};
    if (u < 1 || u > m->c.layers || m->mode[u - 1] == ZT_KEEP_ALL)
        return 0;
    return layer_bytes(m->mode[u - 1] == ZT_KEEP_SELECTIVE ? P_RECOMP : P_ALL, &d);
}

static const void *unit_input(const bert_model *m, int u)
{
    return u == 1 ? (m->ep ? m->ep : m->e) : m->la[u - 2].y;
}

#define POLL(m) ((m)->poll ? (m)->poll((m)->poll_arg) : (void)0)

/* the classification heads that drop out h itself first (RoBERTa's, ELECTRA's), and the
 * activations of the two whose dense is no tanh pooler (DistilBERT's, ELECTRA's) */
static int cls_in_drop(const bert_config *c)
{
    return c->family == BERT_FAMILY_ROBERTA || c->family == BERT_FAMILY_ELECTRA;
}

static int cls_act(const bert_config *c)
{
    return c->family == BERT_FAMILY_ELECTRA ? ZT_ACT_GELU : ZT_ACT_RELU;
}

static zt_dropout cls_drop(const bert_model *m, int u)
{
    const bert_config *c = &m->c;
    return drop_for(m, u, ZT_RNG_DROP_CLS, c->has_cls_drop ? c->cls_drop : c->hidden_drop);
}

/* The classification heads on the [CLS] (<s>) rows h:
 *   BERT        logits = classifier(dropout(tanh(pooler.dense(h))))
 *   RoBERTa     logits = out_proj(dropout(tanh(dense(dropout(h)))))  (RobertaClassificationHead)
 *   ELECTRA     logits = out_proj(dropout(gelu(dense(dropout(h)))))  (ElectraClassificationHead:
 *               get_activation("gelu"), the erf form, whatever hidden_act says)
 *   DistilBERT  logits = classifier(dropout(relu(pre_classifier(h))))
 * cx: h (RoBERTa: after its dropout), cp: the dense output (tanh'd in place), ct: after the
 * activation and the dropout. */
static void cls_forward(bert_model *m, int u, void *const *P)
{
    const bert_config *c = &m->c;
    int B = m->B, C = c->hidden, dt = m->dt, k = m->sop_base, NL = c->sop ? 2 : c->num_labels;
    const void *y = m->la[c->layers - 1].y; /* [B, C]: the [CLS] rows (first_only) */
    zt_dropout d = cls_drop(m, u);
    if (c->sop) /* (AlbertForPreTraining: the last layer ran on every row) */
        xgather_rows(dt, m->cx, y, m->cu, B, C);
    else
        memcpy(m->cx, y, es_of(m) * (size_t)B * C);
    if (cls_in_drop(c)) {
        zt_dropout d0 = drop_for(m, u, ZT_RNG_DROP_CLS_IN, d.p);
        xdropout_residual(dt, m->cx, NULL, m->ck0, &d0, B, (size_t)C);
    }
    xlinear_forward(dt, m->cp, m->cx, param(m, P, u, k + C_PW), param(m, P, u, k + C_PB), B, C,
                    C, FS(m));
    if (c->family == BERT_FAMILY_DISTILBERT || c->family == BERT_FAMILY_ELECTRA) {
        xact_forward(dt, cls_act(c), m->ct, m->cp, (size_t)B * C);
    } else {
        xtanh_forward(dt, m->cp, m->cp, (size_t)B * C);
        memcpy(m->ct, m->cp, es_of(m) * (size_t)B * C);
    }
    xdropout_residual(dt, m->ct, NULL, m->ck, &d, B, (size_t)C);
    xlinear_forward_f32(dt, m->clog, m->ct, param(m, P, u, k + C_W), param(m, P, u, k + C_B), B,
                        C, NL);
    POLL(m);
}

/* the gradient of the last layer's output at the [CLS] rows (dcur [B, C]) */
static void cls_backward(bert_model *m, int u, void *const *P, float *const *G)
{
    const bert_config *c = &m->c;
    int B = m->B, C = c->hidden, dt = m->dt, k = m->sop_base, NL = c->sop ? 2 : c->num_labels;
    size_t bc = (size_t)B * C;
    zt_dropout d = cls_drop(m, u);
    memset(m->cdt, 0, sizeof(float) * bc);
    xlinear_backward(dt, m->cdt, gparam(m, G, u, k + C_W), gparam(m, G, u, k + C_B), m->cdlog,
                     m->ct, param(m, P, u, k + C_W), B, C, NL, HS(m));
    dropout_backward(m->cdt, m->ck, &d, B, (size_t)C);
    memset(m->cdx, 0, sizeof(float) * bc); /* cdx: the gradient before the activation */
    if (c->family == BERT_FAMILY_DISTILBERT || c->family == BERT_FAMILY_ELECTRA)
        xact_backward(dt, cls_act(c), m->cdx, m->cp, m->cdt, bc);
    else
        xtanh_backward(dt, m->cdx, m->cp, m->cdt, bc);
    memset(m->cdt, 0, sizeof(float) * bc); /* cdt: the [CLS] rows' gradient */
    xlinear_backward(dt, m->cdt, gparam(m, G, u, k + C_PW), gparam(m, G, u, k + C_PB), m->cdx,
                     m->cx, param(m, P, u, k + C_PW), B, C, C, HS(m));
    if (cls_in_drop(c)) {
        zt_dropout d0 = drop_for(m, u, ZT_RNG_DROP_CLS_IN, d.p);
        dropout_backward(m->cdt, m->ck0, &d0, B, (size_t)C);
    }
    if (c->sop) /* added to the masked LM's gradient of the last layer's [CLS] rows */
        for (int b = 0; b < B; b++) {
            float *dst = m->dcur + (size_t)m->cu[b] * C;
            const float *src = m->cdt + (size_t)b * C;
            for (int j = 0; j < C; j++)
                dst[j] += src[j];
        }
    else
        memcpy(m->dcur, m->cdt, sizeof(float) * bc);
    POLL(m);
}

static void zero(float *x, size_t n)
{
    double t0 = ZT_PROF_T0();
    memset(x, 0, n * sizeof(float));
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 0, 4.0 * (double)n);
}

static void copy(float *dst, const float *src, size_t n)
{
    double t0 = ZT_PROF_T0();
    memcpy(dst, src, n * sizeof(float));
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 0, 8.0 * (double)n);
}

/* A classifier's last layer needs its output at the [CLS] rows only: K and V over every
 * row, the rest (Q, the attention of one query, the output projection, both LayerNorms, the
 * feed-forward) over the B [CLS] rows, its activations the first B rows of each buffer but
 * K's and V's. The same values as the whole layer's [CLS] rows, dropout decisions included
 * (the row's own counters); the other rows had no gradient. */
static int first_only(const bert_model *m, int u)
{
    return m->c.head == BERT_HEAD_CLS && u == m->c.layers;
}

static void first_attention(bert_model *m, int u, void *const *P, layer_acts *a,
                            const zt_dropout *da)
{
    const bert_config *c = &m->c;
    zt_relpos r;
    xattention_forward_rel(m->dt, a->ctx, a->att, a->keep, a->q, a->k, a->v, m->mask,
                           m->packed ? m->cu : NULL, 1, rel_of(m, u, P, NULL, &r), da,
                           m->att_scratch, m->slots, m->B, m->T, c->hidden, c->heads);
}

static void first_forward(bert_model *m, int u, void *const *P, layer_acts *a, const void *x)
{
    const bert_config *c = &m->c;
    int B = m->B, C = c->hidden, F = c->inter, M = m->M, dt = m->dt;
    zt_dropout da = drop_for(m, u, ZT_RNG_DROP_ATT, c->attn_drop);
    zt_dropout d1 = drop_for(m, u, ZT_RNG_DROP_ATTOUT, attout_p(m));
    zt_dropout d2 = drop_for(m, u, ZT_RNG_DROP_FFOUT, ffout_p(m));
    xgather_rows(dt, m->cxq, x, m->cu, B, C);
    xlinear_forward(dt, a->q, m->cxq, param(m, P, u, L_QW), param(m, P, u, L_QB), B, C, C, FS(m));
    POLL(m);
    xlinear_forward(dt, a->k, x, param(m, P, u, L_KW), param(m, P, u, L_KB), M, C, C, FS(m));
    POLL(m);
    xlinear_forward(dt, a->v, x, param(m, P, u, L_VW), param(m, P, u, L_VB), M, C, C, FS(m));
    POLL(m);
    first_attention(m, u, P, a, &da);
    POLL(m);
    xlinear_forward(dt, a->a_pre, a->ctx, param(m, P, u, L_AOW), param(m, P, u, L_AOB), B, C, C,
                    FS(m));
    POLL(m);
    xdropout_residual_rows(dt, a->a_pre, m->cxq, a->k1, &d1, B, m->cu1, (size_t)C);
    xlayernorm_forward(dt, a->a, a->m1, a->r1, a->a_pre, param(m, P, u, L_LN1W),
                       param(m, P, u, L_LN1B), B, C, c->eps, XS(m));
    POLL(m);
    xlinear_forward(dt, a->h, a->a, param(m, P, u, L_IW), param(m, P, u, L_IB), B, C, F, FS(m));
    POLL(m);
    xact_forward(dt, bert_act(&m->c), a->g, a->h, (size_t)B * F);
    POLL(m);
    xlinear_forward(dt, a->y_pre, a->g, param(m, P, u, L_OW), param(m, P, u, L_OB), B, F, C,
                    FS(m));
    POLL(m);
    xdropout_residual_rows(dt, a->y_pre, a->a, a->k2, &d2, B, m->cu1, (size_t)C);
    xlayernorm_forward(dt, a->y, a->m2, a->r2, a->y_pre, param(m, P, u, L_LN2W),
                       param(m, P, u, L_LN2B), B, C, c->eps, XS(m));
    POLL(m);
}

/* A layer's backward from its output's gradient (dcur, rows x C) through LN2, the
 * feed-forward and LN1 (the first `rows` rows of each buffer; cu: their samples' rows, for
 * the dropout): leaves in s[0] the gradient of a_pre = x + drop(ao), before that dropout */
static void ffn_backward(bert_model *m, int u, void *const *P, float *const *G,
                         const layer_acts *a, int rows, const int32_t *cu)
{
    const bert_config *c = &m->c;
    int C = c->hidden, F = c->inter, dt = m->dt;
    size_t n = (size_t)rows * C, ni = (size_t)rows * F;
    float **s = m->sc, **si = m->si;
    zt_dropout d2 = drop_for(m, u, ZT_RNG_DROP_FFOUT, ffout_p(m));
    /* y = LN2(y_pre), y_pre = a + drop(o) */
    zero(s[0], n);
    xlayernorm_backward(dt, s[0], gparam(m, G, u, L_LN2W), gparam(m, G, u, L_LN2B), m->dcur,
                        a->y_pre, a->m2, a->r2, param(m, P, u, L_LN2W), rows, C, XS(m));
    POLL(m);
    copy(s[1], s[0], n);
    dropout_backward_rows(s[0], a->k2, &d2, m->B, cu, (size_t)C);
    /* o = g Wo^T + bo, g = gelu(h), h = a Wi^T + bi */
    zero(si[0], ni);
    xlinear_backward(dt, si[0], gparam(m, G, u, L_OW), gparam(m, G, u, L_OB), s[0], a->g,
                     param(m, P, u, L_OW), rows, F, C, HS(m));
    POLL(m);
    zero(si[1], ni);
    xact_backward(dt, bert_act(&m->c), si[1], a->h, si[0], ni);
    POLL(m);
    xlinear_backward(dt, s[1], gparam(m, G, u, L_IW), gparam(m, G, u, L_IB), si[1], a->a,
                     param(m, P, u, L_IW), rows, C, F, HS(m));
    POLL(m);
    /* a = LN1(a_pre), a_pre = x + drop(ao) */
    zero(s[0], n);
    xlayernorm_backward(dt, s[0], gparam(m, G, u, L_LN1W), gparam(m, G, u, L_LN1B), s[1],
                        a->a_pre, a->m1, a->r1, param(m, P, u, L_LN1W), rows, C, XS(m));
    POLL(m);
}

static void first_backward(bert_model *m, int u, void *const *P, float *const *G,
                           layer_acts *a, const void *x)
{
    const bert_config *c = &m->c;
    int B = m->B, C = c->hidden, M = m->M, dt = m->dt;
    size_t nb = (size_t)B * C;
    float **s = m->sc;
    zt_dropout da = drop_for(m, u, ZT_RNG_DROP_ATT, c->attn_drop);
    zt_dropout d1 = drop_for(m, u, ZT_RNG_DROP_ATTOUT, attout_p(m));
    ffn_backward(m, u, P, G, a, B, m->cu1); /* dcur [B, C]: the [CLS] rows' gradient */
    /* dcur becomes the input's gradient [M, C]: the residual's at the [CLS] rows, ... */
    zero(m->dcur, (size_t)M * C);
    for (int b = 0; b < B; b++)
        memcpy(m->dcur + (size_t)m->cu[b] * C, s[0] + (size_t)b * C, sizeof(float) * (size_t)C);
    dropout_backward_rows(s[0], a->k1, &d1, B, m->cu1, (size_t)C);
    zero(s[1], nb);
    xlinear_backward(dt, s[1], gparam(m, G, u, L_AOW), gparam(m, G, u, L_AOB), s[0], a->ctx,
                     param(m, P, u, L_AOW), B, C, C, HS(m));
    POLL(m);
    zt_relpos r;
    xattention_backward_rel(dt, s[2], s[3], s[4], s[1], a->att, a->keep, a->q, a->k, a->v,
                            m->packed ? m->cu : NULL, 1, rel_of(m, u, P, G, &r), &da,
                            m->att_scratch, m->slots, B, m->T, C, c->heads);
    POLL(m);
    /* ... Q's at the [CLS] rows, K's and V's at every row */
    xgather_rows(dt, m->cxq, x, m->cu, B, C);
    zero(s[0], nb);
    xlinear_backward(dt, s[0], gparam(m, G, u, L_QW), gparam(m, G, u, L_QB), s[2], m->cxq,
                     param(m, P, u, L_QW), B, C, C, HS(m));
    POLL(m);
    for (int b = 0; b < B; b++) {
        float *d = m->dcur + (size_t)m->cu[b] * C;
        const float *g = s[0] + (size_t)b * C;
        for (int j = 0; j < C; j++)
            d[j] += g[j];
    }
    xlinear_backward(dt, m->dcur, gparam(m, G, u, L_KW), gparam(m, G, u, L_KB), s[3], x,
                     param(m, P, u, L_KW), M, C, C, HS(m));
    POLL(m);
    xlinear_backward(dt, m->dcur, gparam(m, G, u, L_VW), gparam(m, G, u, L_VB), s[4], x,
                     param(m, P, u, L_VW), M, C, C, HS(m));
    POLL(m);
}

static void bert_forward_unit(void *p, int u, void *const *P)
{
    bert_model *m = p;
    const bert_config *c = &m->c;
    int B = m->B, T = m->T, C = c->hidden, F = c->inter, M = m->M, dt = m->dt, E = emb_of(c);
    if (u == 0) {
        zt_dropout d = drop_for(m, 0, ZT_RNG_DROP_EMB, c->hidden_drop);
        const void *type = c->type_vocab ? param(m, P, 0, E_TYPE) : NULL;
        const void *pos = c->rel ? NULL : param(m, P, 0, E_POS); /* relative: none added */
        if (m->packed)
            xembedding_forward(dt, m->e_pre, m->pids, m->ptt, m->ppos, param(m, P, 0, E_WORD),
                               type, pos, M, 1, E);
        else if (m->rpos)
            xembedding_forward(dt, m->e_pre, m->ids, m->tt, m->rpos, param(m, P, 0, E_WORD),
                               type, pos, M, 1, E);
        else
            xembedding_forward(dt, m->e_pre, m->ids, m->tt, NULL, param(m, P, 0, E_WORD),
                               type, pos, B, T, E);
        POLL(m);
        xlayernorm_forward(dt, m->e, m->em, m->er, m->e_pre, param(m, P, 0, eidx(m, E_LNW)),
                           param(m, P, 0, eidx(m, E_LNB)), M, E, c->eps, XS(m));
        POLL(m);
        xdropout_residual_rows(dt, m->e, NULL, m->ke, &d, B, m->cu, (size_t)E);
        if (m->ep) { /* ElectraModel: embeddings_project after the embeddings' dropout */
            xlinear_forward(dt, m->ep, m->e, param(m, P, 0, pidx(m)), param(m, P, 0, pidx(m) + 1),
                            M, E, C, FS(m));
            POLL(m);
        }
    } else if (first_only(m, u)) {
        first_forward(m, u, P, &m->la[u - 1], unit_input(m, u));
    } else if (u <= c->layers) {
        layer_acts *a = &m->la[u - 1];
        const void *x = unit_input(m, u);
        zt_dropout da = drop_for(m, u, ZT_RNG_DROP_ATT, c->attn_drop);
        zt_dropout d1 = drop_for(m, u, ZT_RNG_DROP_ATTOUT, attout_p(m));
        zt_dropout d2 = drop_for(m, u, ZT_RNG_DROP_FFOUT, ffout_p(m));
        xlinear_forward(dt, a->q, x, param(m, P, u, L_QW), param(m, P, u, L_QB), M, C, C, FS(m));
        POLL(m);
        xlinear_forward(dt, a->k, x, param(m, P, u, L_KW), param(m, P, u, L_KB), M, C, C, FS(m));
        POLL(m);
        xlinear_forward(dt, a->v, x, param(m, P, u, L_VW), param(m, P, u, L_VB), M, C, C, FS(m));
        POLL(m);
        attn_forward(m, u, P, a, &da);
        POLL(m);
        xlinear_forward(dt, a->a_pre, a->ctx, param(m, P, u, L_AOW), param(m, P, u, L_AOB), M, C,
                        C, FS(m));
        POLL(m);
        xdropout_residual_rows(dt, a->a_pre, x, a->k1, &d1, B, m->cu, (size_t)C);
        xlayernorm_forward(dt, a->a, a->m1, a->r1, a->a_pre, param(m, P, u, L_LN1W),
                           param(m, P, u, L_LN1B), M, C, c->eps, XS(m));
        POLL(m);
        xlinear_forward(dt, a->h, a->a, param(m, P, u, L_IW), param(m, P, u, L_IB), M, C, F,
                        FS(m));
        POLL(m);
        xact_forward(dt, bert_act(&m->c), a->g, a->h, (size_t)M * F);
        POLL(m);
        xlinear_forward(dt, a->y_pre, a->g, param(m, P, u, L_OW), param(m, P, u, L_OB), M, F, C,
                        FS(m));
        POLL(m);
        xdropout_residual_rows(dt, a->y_pre, a->a, a->k2, &d2, B, m->cu, (size_t)C);
        xlayernorm_forward(dt, a->y, a->m2, a->r2, a->y_pre, param(m, P, u, L_LN2W),
                           param(m, P, u, L_LN2B), M, C, c->eps, XS(m));
        POLL(m);
    } else if (c->head == BERT_HEAD_CLS) {
        cls_forward(m, u, P);
    } else if (rtd(c)) { /* ElectraDiscriminatorPredictions: dense, hidden_act, dense_prediction */
        const void *y = m->la[c->layers - 1].y;
        xlinear_forward(dt, m->t1, y, param(m, P, u, 0), param(m, P, u, 1), M, C, C, FS(m));
        POLL(m);
        xact_forward(dt, bert_act(c), m->t2, m->t1, (size_t)M * C);
        xlinear_forward_f32(dt, m->rlog, m->t2, param(m, P, u, 2), param(m, P, u, 3), M, C, 1);
        POLL(m);
    } else {
        const void *y = m->la[c->layers - 1].y;
        int W = head_w(c); /* (the t1..t3 buffers are [M, max(C, E)]) */
        xlinear_forward(dt, m->t1, y, param(m, P, u, H_TW), param(m, P, u, H_TB), M, C, W, FS(m));
        POLL(m);
        xact_forward(dt, head_act(m), m->t2, m->t1, (size_t)M * W);
        POLL(m);
        xlayernorm_forward(dt, m->t3, m->tm, m->tr, m->t2, param(m, P, u, H_LNW),
                           param(m, P, u, H_LNB), M, W, c->eps, XS(m));
        POLL(m);
        /* decoder tied to the word embeddings of unit 0 */
        if (!m->compact) { /* every row's logits, kept: fp32 */
            xlinear_forward_f32(dt, m->lm.logits, m->t3, dec_w(m, P, u),
                                param(m, P, u, H_BIAS), M, W, c->vocab);
            POLL(m);
        } else if (m->n_lab > 0) {
            xgather_rows(dt, m->lm.x, m->t3, m->lab_rows, m->n_lab, W);
            xlinear_forward(dt, m->lm.logits, m->lm.x, dec_w(m, P, u),
                            param(m, P, u, H_BIAS), m->n_lab, W, c->vocab, FS(m));
            POLL(m);
        }
        if (m->sop_labels) /* AlbertForPreTraining: the sentence-order head on [CLS] */
            cls_forward(m, u, P);
    }
}

/* what layer unit u did not keep: all of its forward (OUTPUT, OFFLOAD), or the attention
 * core and GELU from the kept Q, K, V and intermediate (SELECTIVE) */
static void bert_recompute_unit(void *p, int u, void *const *P)
{
    bert_model *m = p;
    const bert_config *c = &m->c;
    if (m->mode[u - 1] != ZT_KEEP_SELECTIVE) {
        bert_forward_unit(p, u, P);
        return;
    }
    layer_acts *a = &m->la[u - 1];
    zt_dropout da = drop_for(m, u, ZT_RNG_DROP_ATT, c->attn_drop);
    if (first_only(m, u))
        first_attention(m, u, P, a, &da);
    else
        attn_forward(m, u, P, a, &da);
    POLL(m);
    xact_forward(m->dt, bert_act(&m->c), a->g, a->h, (size_t)(first_only(m, u) ? m->B : m->M) * c->inter);
    POLL(m);
}

static double bert_loss(void *p, float grad_scale)
{
    bert_model *m = p;
    int64_t count;
    if (m->c.head == BERT_HEAD_CLS) {
        size_t n = (size_t)m->B * m->c.num_labels;
        if (!m->labels && !m->label_values)
            return 0.0;
        if (m->problem == BERT_PROBLEM_SINGLE)
            return crossentropy_forward_backward(m->cdlog, m->row_loss, &count, m->clog,
                                                 m->labels, m->B, m->c.num_labels, grad_scale);
        if (m->problem == BERT_PROBLEM_MULTI)
            return bce_logits_forward_backward(m->cdlog, m->clog, m->label_values, NULL, n,
                                               grad_scale);
        return mse_forward_backward(m->cdlog, m->clog, m->label_values, n, grad_scale);
    }
    if (rtd(&m->c)) /* BCEWithLogitsLoss over the attended positions */
        return bce_logits_forward_backward(m->rdlog, m->rlog, m->rtgt, m->mask, (size_t)m->M,
                                           grad_scale);
    /* evaluating (train 0): no gradient, so that the logits (which it would overwrite when
     * they are not kept) stay for zt_engine_logits */
    void *d = m->train ? m->lm.dlogits : NULL;
    m->evaluated = !m->train;
    double s = 0.0;
    if (!m->compact) {
        s = crossentropy_forward_backward(d, m->row_loss, &count, m->lm.logits, m->labels,
                                          m->B * m->T, m->c.vocab, grad_scale);
    } else if (m->n_lab) {
        s = xcrossentropy_forward_backward(m->dt, d, m->row_loss, &count, m->lm.logits,
                                           m->lab_c, m->n_lab, m->c.vocab, grad_scale, XS(m));
        if (m->evaluated && m->dt >= 0) /* the logits as zt_engine_logits gives them: fp32 */
            zt_lm_rows_widen(&m->lm, m->dt, (size_t)m->n_lab * (size_t)m->c.vocab);
    }
    if (m->sop_labels && m->sop_denom > 0) {
        /* AlbertForPreTraining: + the mean SOP cross-entropy over sop_denom rows (grad_scale
         * is the loss scale over lab_denom); its sum enters as lab_denom / sop_denom times
         * itself, so that the sum over lab_denom is the two means' sum */
        double r = (double)m->lab_denom / (double)m->sop_denom;
        double so = crossentropy_forward_backward(m->train ? m->cdlog : NULL, m->row_loss,
                                                  &count, m->clog, m->sop_labels, m->B, 2,
                                                  (float)((double)grad_scale * r));
        s += so * r;
    }
    return s;
}

static void bert_backward_unit(void *p, int u, void *const *P, float *const *G)
{
    bert_model *m = p;
    const bert_config *c = &m->c;
    int B = m->B, C = c->hidden, M = m->M, dt = m->dt;
    size_t n = (size_t)M * C;
    float **s = m->sc;
    if (u == c->layers + 1 && c->head == BERT_HEAD_CLS) {
        cls_backward(m, u, P, G);
    } else if (u == c->layers + 1 && rtd(c)) {
        const void *y = m->la[c->layers - 1].y;
        zero(s[0], n);
        xlinear_backward(dt, s[0], gparam(m, G, u, 2), gparam(m, G, u, 3), m->rdlog, m->t2,
                         param(m, P, u, 2), M, C, 1, HS(m));
        POLL(m);
        zero(s[1], n);
        xact_backward(dt, bert_act(c), s[1], m->t1, s[0], n);
        zero(m->dcur, n);
        xlinear_backward(dt, m->dcur, gparam(m, G, u, 0), gparam(m, G, u, 1), s[1], y,
                         param(m, P, u, 0), M, C, C, HS(m));
        POLL(m);
    } else if (u == c->layers + 1) {
        const void *y = m->la[c->layers - 1].y;
        int W = head_w(c);
        size_t nw = (size_t)M * W;
        zero(s[0], nw);
        if (!m->compact) {
            xlinear_backward(dt, s[0], dec_g(m, G, u), gparam(m, G, u, H_BIAS),
                             m->lm.dlogits, m->t3, dec_w(m, P, u), M, W, c->vocab,
                             HS(m));
            POLL(m);
        } else if (m->n_lab > 0) {
            zero(m->lm.dx, (size_t)m->n_lab * W);
            if (dt < 0)
                linear_backward(m->lm.dx, dec_g(m, G, u), gparam(m, G, u, H_BIAS),
                                m->lm.dlogits, m->lm.x, dec_w(m, P, u), m->n_lab, W,
                                c->vocab);
            else /* (the gradient was rounded into the logits' place) */
                xlinear_backward_h(dt, m->lm.dx, dec_g(m, G, u), gparam(m, G, u, H_BIAS),
                                   m->lm.dlogits, m->lm.x, dec_w(m, P, u), m->n_lab, W,
                                   c->vocab);
            POLL(m);
            for (int i = 0; i < m->n_lab; i++) /* rows are distinct: a plain copy */
                memcpy(s[0] + (size_t)m->lab_rows[i] * W, m->lm.dx + (size_t)i * W,
                       sizeof(float) * (size_t)W);
        }
        zero(s[1], nw);
        xlayernorm_backward(dt, s[1], gparam(m, G, u, H_LNW), gparam(m, G, u, H_LNB), s[0],
                            m->t2, m->tm, m->tr, param(m, P, u, H_LNW), M, W, XS(m));
        POLL(m);
        zero(s[2], nw);
        xact_backward(dt, head_act(m), s[2], m->t1, s[1], nw);
        POLL(m);
        zero(m->dcur, n);
        xlinear_backward(dt, m->dcur, gparam(m, G, u, H_TW), gparam(m, G, u, H_TB), s[2], y,
                         param(m, P, u, H_TW), M, C, W, HS(m));
        POLL(m);
        if (m->sop_labels)
            cls_backward(m, u, P, G);
    } else if (first_only(m, u)) {
        first_backward(m, u, P, G, &m->la[u - 1], unit_input(m, u));
    } else if (u >= 1) {
        layer_acts *a = &m->la[u - 1];
        const void *x = unit_input(m, u);
        zt_dropout da = drop_for(m, u, ZT_RNG_DROP_ATT, c->attn_drop);
        zt_dropout d1 = drop_for(m, u, ZT_RNG_DROP_ATTOUT, attout_p(m));
        ffn_backward(m, u, P, G, a, M, m->cu);
        copy(m->dcur, s[0], n);
        dropout_backward_rows(s[0], a->k1, &d1, B, m->cu, (size_t)C);
        zero(s[1], n);
        xlinear_backward(dt, s[1], gparam(m, G, u, L_AOW), gparam(m, G, u, L_AOB), s[0], a->ctx,
                         param(m, P, u, L_AOW), M, C, C, HS(m));
        POLL(m);
        attn_backward(m, u, P, G, a, &da, s[2], s[3], s[4], s[1]);
        POLL(m);
        xlinear_backward(dt, m->dcur, gparam(m, G, u, L_QW), gparam(m, G, u, L_QB), s[2], x,
                         param(m, P, u, L_QW), M, C, C, HS(m));
        POLL(m);
        xlinear_backward(dt, m->dcur, gparam(m, G, u, L_KW), gparam(m, G, u, L_KB), s[3], x,
                         param(m, P, u, L_KW), M, C, C, HS(m));
        POLL(m);
        xlinear_backward(dt, m->dcur, gparam(m, G, u, L_VW), gparam(m, G, u, L_VB), s[4], x,
                         param(m, P, u, L_VW), M, C, C, HS(m));
        POLL(m);
    } else {
        zt_dropout d = drop_for(m, 0, ZT_RNG_DROP_EMB, c->hidden_drop);
        int E = emb_of(c);
        float *de = m->dcur; /* the gradient of the embeddings' output [M, E] */
        if (m->ep) { /* embeddings_project: dcur [M, C] -> s[1] [M, E] */
            de = s[1];
            zero(de, (size_t)M * E);
            xlinear_backward(dt, de, gparam(m, G, 0, pidx(m)), gparam(m, G, 0, pidx(m) + 1),
                             m->dcur, m->e, param(m, P, 0, pidx(m)), M, E, C, HS(m));
            POLL(m);
        }
        dropout_backward_rows(de, m->ke, &d, B, m->cu, (size_t)E);
        zero(s[0], (size_t)M * E);
        xlayernorm_backward(dt, s[0], gparam(m, G, 0, eidx(m, E_LNW)),
                            gparam(m, G, 0, eidx(m, E_LNB)), de, m->e_pre, m->em, m->er,
                            param(m, P, 0, eidx(m, E_LNW)), M, E, XS(m));
        POLL(m);
        float *dtype = c->type_vocab ? gparam(m, G, 0, E_TYPE) : NULL;
        int64_t pad_pos = m->rpos ? c->pad_id : -1; /* RoBERTa's positions' padding_idx */
        float *dpos = c->rel ? NULL : gparam(m, G, 0, E_POS);
        if (m->packed)
            embedding_backward_pad(gparam(m, G, 0, E_WORD), dtype, dpos, s[0],
                                   m->pids, m->ptt, m->ppos, M, 1, E, c->pad_id, pad_pos);
        else
            embedding_backward_pad(gparam(m, G, 0, E_WORD), dtype, dpos, s[0],
                                   m->ids, m->tt, m->rpos, m->rpos ? M : B, m->rpos ? 1 : m->T,
                                   E, c->pad_id, pad_pos);
        POLL(m);
    }
}

/* Matrix-product FLOPs of the last prepared batch's forward + backward (3x the forward):
 * per layer Q, K, V, output, intermediate and output projections and the attention scores
 * and context; the head's transform and the decoder over the rows it runs on. */
static double bert_flops(const void *p)
{
    const bert_model *m = p;
    const bert_config *c = &m->c;
    double M = m->M, C = c->hidden, F = c->inter, pairs = 0.0; /* pairs: sum of L^2 */
    double rows = m->compact ? (double)m->n_lab : M;
    for (int b = 0; b < m->B; b++)
        pairs += (double)(m->cu[b + 1] - m->cu[b]) * (m->cu[b + 1] - m->cu[b]);
    double layer = 2.0 * M * (4.0 * C * C + 2.0 * C * F) + 2.0 * 2.0 * pairs * C;
    if (c->rel) /* q (and k) times the 2L - 1 distances' embeddings */
        layer += (c->rel == BERT_REL_KEY_QUERY ? 2.0 : 1.0) * 2.0 * 2.0 * pairs * C;
    double fwd = c->layers * layer;
    if (c->head == BERT_HEAD_CLS) /* the last layer: K, V over M rows, the rest over B */
        fwd += 2.0 * (m->B - M) * (2.0 * C * C + 2.0 * C * F) + 2.0 * 2.0 * (M - pairs) * C;
    double head = c->head == BERT_HEAD_CLS ? 2.0 * m->B * C * (C + c->num_labels)
                  : rtd(c)                 ? 2.0 * M * C * (C + 1)
                                           : 2.0 * M * C * C + 2.0 * rows * C * c->vocab;
    fwd += head;
    if (m->sop_labels) /* AlbertForPreTraining's pooler and SOP classifier */
        fwd += 2.0 * m->B * C * (C + 2);
    if (projected(c)) /* embeddings_project */
        fwd += 2.0 * M * emb_of(c) * C;
    return 3.0 * fwd;
}

static const float *bert_logits(const void *p, int64_t shape[3])
{
    const bert_model *m = p;
    if (m->c.head == BERT_HEAD_CLS) { /* [B, 1, num_labels]: always kept */
        shape[0] = m->B;
        shape[1] = 1;
        shape[2] = m->c.num_labels;
        return m->clog;
    }
    if (rtd(&m->c)) { /* [B, T, 1]: every position's, always kept */
        shape[0] = m->B;
        shape[1] = m->T;
        shape[2] = 1;
        return m->rlog;
    }
    if (!m->keep_logits && !m->evaluated)
        return NULL;
    if (!m->keep_logits) { /* evaluated: the labelled positions' rows, in order */
        shape[0] = 1;
        shape[1] = m->n_lab;
        shape[2] = m->c.vocab;
        return m->dt < 0 ? m->lm.logits : m->lm.wide;
    }
    shape[0] = m->B;
    shape[1] = m->T;
    shape[2] = m->c.vocab;
    return m->lm.logits;
}

static void bert_set_train(void *p, int train) { ((bert_model *)p)->train = train; }

static void bert_set_poll(void *p, void (*fn)(void *), void *arg)
{
    ((bert_model *)p)->poll = fn;
    ((bert_model *)p)->poll_arg = arg;
}

/* the MLM head's decoder is the word-embedding matrix of unit 0 (the classifier has none) */
static int bert_tied_unit(const void *p, int u)
{
    const bert_model *m = p;
    return m->c.head == BERT_HEAD_MLM && !m->c.untied && !rtd(&m->c) && u == m->l->n_units - 1
               ? 0 : -1;
}

/* ---- the ELECTRA joint pretraining's hooks (electra.c) ------------------------------- */

void bert_sample_replacements(void *p, float temperature, int disallow, uint64_t seed,
                              uint32_t *u, float *row, int64_t *ids)
{
    bert_model *m = p;
    int V = m->c.vocab, n = m->compact ? m->n_lab : m->B * m->T;
    size_t es = m->compact ? es_of(m) : sizeof(float); /* (kept logits are fp32) */
    for (int k = 0; k < n; k++) {
        int i = m->compact ? m->lab_rows[k] : k;
        if (m->labels[i] == -100)
            continue;
        const char *lg = (const char *)m->lm.logits + (size_t)k * V * es;
        if (es == sizeof(float))
            memcpy(row, lg, sizeof(float) * (size_t)V);
        else
            zt_half_widen(m->dt, row, (const uint16_t *)lg, (size_t)V);
        /* pretrain_helpers.sample_from_softmax: argmax(logits / T + gumbel), gumbel =
         * -log(-log(u + 1e-9) + 1e-9), u uniform in [0, 1) from Philox keyed by the sample
         * and the position */
        zt_rng_u32(seed, m->first_sample + (uint64_t)(i / m->T),
                   zt_rng_stream(i % m->T, ZT_RNG_ELECTRA_SAMPLE), 0, u, (uint64_t)V);
        float best = -INFINITY;
        int arg = 0;
        for (int v = 0; v < V; v++) { /* (ties: the first, as argmax) */
            float g = row[v] / temperature - (disallow && v == m->labels[i] ? 1000.0f : 0.0f) -
                      logf(-logf(zt_rng_uniform(u[v]) + 1e-9f) + 1e-9f);
            if (g > best) {
                best = g;
                arg = v;
            }
        }
        ids[i] = arg;
    }
}

void bert_set_rtd_targets(void *p, const int64_t *labels)
{
    bert_model *m = p;
    for (int i = 0; i < m->B * m->T; i++)
        m->rtgt[i] = (float)labels[i];
}

static int bert_n_steps(const void *p) { return ((const bert_model *)p)->c.layers + 2; }
static int bert_step_unit(const void *p, int s) { return ((const bert_model *)p)->su[s]; }

const zt_model_ops bert_ops = {
    .n_steps = bert_n_steps,
    .step_unit = bert_step_unit,
    .set_train = bert_set_train,
    .set_poll = bert_set_poll,
    .flops = bert_flops,
    .act_bytes = bert_act_bytes,
    .set_recompute = bert_set_recompute,
    .recompute_flops = bert_recompute_flops,
    .backward_steps = bert_backward_steps,
    .recompute_unit = bert_recompute_unit,
    .recompute_bytes = bert_recompute_bytes,
    .checkpoint = bert_checkpoint,
    .tied_unit = bert_tied_unit,
    .prepare = bert_prepare,
    .forward_unit = bert_forward_unit,
    .loss = bert_loss,
    .backward_unit = bert_backward_unit,
    .logits = bert_logits,
    .destroy = bert_destroy,
};
