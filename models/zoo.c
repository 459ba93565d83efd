/* zoo.c - dispatch from a config or preset to the model family that implements it. Knows the
 * families' names and shapes; nothing of their math. */
#include "zoo.h"
#include "hfconfig.h"
#include "layers.h"
#include "../common/err.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_model_config_load(const char *path, zt_model_cfg *c)
{
    char type[32] = "bert";
    cJSON *o, *v;
    int rc = zt_hfc_open(path, &o);
    if (rc < 0)
        return rc;
    v = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (cJSON_IsString(v))
        snprintf(type, sizeof type, "%s", v->valuestring);
    cJSON_Delete(o);
    memset(c, 0, sizeof *c);
    if (strcmp(type, "t5") == 0 || strcmp(type, "mt5") == 0 || strcmp(type, "umt5") == 0) {
        c->type = ZT_MODEL_T5; /* (t5's loader refuses umt5, naming why) */
        return t5_config_load(path, &c->t5);
    }
    c->type = ZT_MODEL_BERT; /* bert's loader names any other model_type */
    ZT_TRY(bert_config_load(path, &c->bert));
    return electra_joint_load(path, &c->bert, &c->ej);
}

int zt_model_config_preset(const char *name, int vocab, zt_model_cfg *c)
{
    memset(c, 0, sizeof *c);
    if (t5_config_preset(name, vocab, &c->t5) == 0) {
        c->type = ZT_MODEL_T5;
        return 0;
    }
    c->type = ZT_MODEL_BERT;
    if (bert_config_preset(name, vocab, &c->bert) < 0)
        return zt_fail(ZT_E_CONFIG,
                       "unknown model preset \"%s\" (known: bert-tiny, bert-mini, bert-small, "
                       "bert-medium, bert-base, bert-large, roberta-base, roberta-large, "
                       "distilbert-base, t5-small, t5-base, t5-v1_1-small, t5-v1_1-base)", name);
    return 0;
}

int zt_model_config_save(const zt_model_cfg *c, const char *path, const char *torch_dtype)
{
    if (c->type == ZT_MODEL_T5)
        return t5_config_save(&c->t5, path, torch_dtype);
    ZT_TRY(bert_config_save(&c->bert, path, torch_dtype));
    return c->ej.on ? electra_joint_save(&c->ej, &c->bert, path, torch_dtype) : 0;
}

int zt_model_head_apply(zt_model_cfg *c, const char *source, int head, int num_labels,
                        int problem, const char *const *names)
{
    bert_config *b = &c->bert;
    char *packed = NULL;
    size_t len = 0;
    int rc;
    if (head < ZT_HEAD_AUTO || head > ZT_HEAD_CLASSIFY)
        return zt_fail(ZT_E_CONFIG, "config: head %d: not a ZT_HEAD_*", head);
    if (problem < 0 || problem > ZT_PROBLEM_REGRESSION)
        return zt_fail(ZT_E_CONFIG, "config: problem_type %d: not a ZT_PROBLEM_*", problem);
    if (head == ZT_HEAD_AUTO)
        return 0;
    c->ej.on = 0; /* (a joint folder's discriminator alone, unless the head is MLM) */
    if (c->type != ZT_MODEL_BERT)
        return zt_fail(ZT_E_CONFIG, "%s is a T5 model: %s heads are BERT's (T5 is trained "
                       "text to text)", source, head == ZT_HEAD_CLASSIFY ? "sequence "
                       "classification" : "masked-LM");
    if (head == ZT_HEAD_MLM && b->family == BERT_FAMILY_ELECTRA && b->disc &&
        b->head == BERT_HEAD_MLM) /* a discriminator's masked-LM training: the joint one */
        return electra_joint_make(b, &c->ej, source);
    if (head == ZT_HEAD_MLM) {
        if (b->head == BERT_HEAD_CLS)
            zt_log(ZT_LOG_WARN, "%s is a %s: as a masked LM its classification head is not "
                   "used and its MLM head starts from the seed", source, bert_arch(b));
        b->head = BERT_HEAD_MLM;
        b->num_labels = b->problem = b->labels_len = 0;
        return 0;
    }
    if (b->head == BERT_HEAD_CLS && num_labels > 0 && num_labels != b->num_labels)
        return zt_fail(ZT_E_CONFIG, "%s is a classifier of %d labels, the run asks for %d: its "
                       "classifier has another shape (fine-tune it on labels it knows, or start "
                       "from the masked-LM checkpoint it was made from)", source, b->num_labels,
                       num_labels);
    if (b->head != BERT_HEAD_CLS && num_labels <= 0)
        num_labels = 2; /* BertConfig's default */
    if (num_labels <= 0)
        num_labels = b->num_labels;
    if (names) { /* back to back, as the config keeps them */
        for (int i = 0; i < num_labels; i++)
            len += strlen(names[i]) + 1;
        if (!(packed = malloc(len)))
            return zt_fail(ZT_E_NOMEM, "out of memory");
        for (int i = 0, off = 0; i < num_labels; i++) {
            memcpy(packed + off, names[i], strlen(names[i]) + 1);
            off += (int)strlen(names[i]) + 1;
        }
    }
    rc = bert_config_set_classifier(b, num_labels, problem ? problem : b->problem,
                                    names ? packed : b->labels_len ? b->labels : NULL,
                                    names ? len : (size_t)b->labels_len);
    free(packed);
    return rc;
}

int zt_model_layout(const zt_model_cfg *c, zt_layout *l)
{
    return c->type == ZT_MODEL_T5 ? t5_layout(&c->t5, l)
           : c->ej.on             ? electra_joint_layout(&c->bert, &c->ej, l)
                                  : bert_layout(&c->bert, l);
}

int zt_model_create(const zt_model_cfg *c, const zt_layout *l, int dropout, uint64_t seed,
                    int hdt, zt_mem_account *acct, const zt_model_ops **ops, void **model)
{
    if (c->type == ZT_MODEL_T5) {
        *ops = &t5_ops;
        return t5_create(&c->t5, l, dropout, seed, hdt, acct, model);
    }
    if (c->ej.on) {
        *ops = &electra_joint_ops;
        return electra_joint_create(&c->bert, &c->ej, l, dropout, seed, hdt, acct, model);
    }
    *ops = &bert_ops;
    return bert_create(&c->bert, l, dropout, seed, hdt, acct, model);
}

/* the fields that fix the parameter shapes, by their config.json names */
typedef struct shape_field {
    const char *name;
    size_t off;
} shape_field;

static const shape_field bert_fields[] = {
    {"vocab_size", offsetof(bert_config, vocab)},
    {"hidden_size", offsetof(bert_config, hidden)},
    {"num_hidden_layers", offsetof(bert_config, layers)},
    {"num_attention_heads", offsetof(bert_config, heads)},
    {"intermediate_size", offsetof(bert_config, inter)},
    {"max_position_embeddings", offsetof(bert_config, max_pos)},
    {"type_vocab_size", offsetof(bert_config, type_vocab)},
    {"the head (0: masked LM, 1: sequence classification)",
     offsetof(bert_config, head)},
    {"num_labels", offsetof(bert_config, num_labels)},
    {"tie_word_embeddings false (1) or true (0)", offsetof(bert_config, untied)},
    {"position_embedding_type (0 absolute, 1 relative_key, 2 relative_key_query)",
     offsetof(bert_config, rel)},
    {"embedding_size", offsetof(bert_config, emb)},
    {"num_hidden_groups", offsetof(bert_config, groups)},
    {"inner_group_num", offsetof(bert_config, inner)},
};
static const shape_field t5_fields[] = {
    {"vocab_size", offsetof(t5_config, vocab)},
    {"d_model", offsetof(t5_config, d_model)},
    {"d_kv", offsetof(t5_config, d_kv)},
    {"d_ff", offsetof(t5_config, d_ff)},
    {"num_layers", offsetof(t5_config, layers)},
    {"num_decoder_layers", offsetof(t5_config, dec_layers)},
    {"num_heads", offsetof(t5_config, heads)},
    {"relative_attention_num_buckets", offsetof(t5_config, buckets)},
    {"feed_forward_proj gated (1) or not (0)", offsetof(t5_config, gated)},
    {"tie_word_embeddings", offsetof(t5_config, tie)},
};

/* the first of fields f[0..nf) that differs between configs pa and pb, into buf */
static int fields_diff(const shape_field *f, int nf, const void *pa, const void *pb,
                       const char *a_name, const char *b_name, const char *whose, char *buf,
                       size_t n)
{
    for (int k = 0; k < nf; k++) {
        int x, y;
        memcpy(&x, (const char *)pa + f[k].off, sizeof x);
        memcpy(&y, (const char *)pb + f[k].off, sizeof y);
        if (x != y) {
            snprintf(buf, n, "%s%s %d in %s, %d in %s", whose, f[k].name, x, a_name, y, b_name);
            return 1;
        }
    }
    return 0;
}

int zt_model_shape_diff(const zt_model_cfg *a, const char *a_name, const zt_model_cfg *b,
                        const char *b_name, char *buf, size_t n)
{
    const char *ta = a->type == ZT_MODEL_T5 ? "t5" : bert_model_type(&a->bert);
    const char *tb = b->type == ZT_MODEL_T5 ? "t5" : bert_model_type(&b->bert);
    int nb = (int)(sizeof bert_fields / sizeof *bert_fields);
    if (strcmp(ta, tb) != 0) {
        snprintf(buf, n, "model_type %s in %s, %s in %s", ta, a_name, tb, b_name);
        return 1;
    }
    if (a->type == ZT_MODEL_T5)
        return fields_diff(t5_fields, (int)(sizeof t5_fields / sizeof *t5_fields), &a->t5,
                           &b->t5, a_name, b_name, "", buf, n);
    if (a->ej.on != b->ej.on) {
        snprintf(buf, n, "ELECTRA's joint pretraining (generator and discriminator) in %s, the "
                 "discriminator alone in %s", a->ej.on ? a_name : b_name,
                 a->ej.on ? b_name : a_name);
        return 1;
    }
    return (a->ej.on && fields_diff(bert_fields, nb, &a->ej.gen, &b->ej.gen, a_name, b_name,
                                    "the generator's ", buf, n)) ||
           fields_diff(bert_fields, nb, &a->bert, &b->bert, a_name, b_name, "", buf, n);
}

int zt_model_same_shapes(const zt_model_cfg *a, const zt_model_cfg *b)
{
    char buf[8];
    return !zt_model_shape_diff(a, "", b, "", buf, sizeof buf);
}

void zt_model_info_fill(const zt_model_cfg *c, zt_model_info *o)
{
    if (c->type == ZT_MODEL_T5) {
        snprintf(o->model_type, sizeof o->model_type, "t5");
        o->vocab_size = c->t5.vocab;
        o->hidden_size = c->t5.d_model;
        o->num_layers = c->t5.layers;
        o->num_decoder_layers = c->t5.dec_layers;
        o->num_heads = c->t5.heads;
        o->intermediate_size = c->t5.d_ff;
        o->head_dim = c->t5.d_kv;
        o->pad_token_id = c->t5.pad;
        o->bos_token_id = -1;
        o->eos_token_id = c->t5.eos;
        return;
    }
    snprintf(o->model_type, sizeof o->model_type, "%s", bert_model_type(&c->bert));
    o->vocab_size = c->bert.vocab;
    o->hidden_size = c->bert.hidden;
    o->num_layers = c->bert.layers;
    o->num_heads = c->bert.heads;
    o->intermediate_size = c->bert.inter;
    o->max_positions = c->bert.max_pos;
    if (c->bert.head == BERT_HEAD_CLS) {
        o->num_labels = c->bert.num_labels;
        o->problem_type = c->bert.problem;
    }
    o->type_vocab_size = c->bert.type_vocab;
    o->head_dim = c->bert.hidden / c->bert.heads;
    o->pad_token_id = c->bert.pad_id;
    int ids = c->bert.family == BERT_FAMILY_ROBERTA || c->bert.family == BERT_FAMILY_ALBERT;
    o->bos_token_id = ids ? c->bert.bos_id : -1;
    o->eos_token_id = ids ? c->bert.eos_id : -1;
    if (c->ej.on) {
        o->generator_hidden_size = c->ej.gen.hidden;
        o->generator_layers = c->ej.gen.layers;
        o->generator_heads = c->ej.gen.heads;
        o->generator_intermediate_size = c->ej.gen.inter;
    }
}

void zt_model_describe(const zt_model_cfg *c, char *buf, size_t n)
{
    if (c->type == ZT_MODEL_T5) {
        const t5_config *t = &c->t5;
        static const char *acts[] = {"relu", "gelu", "gelu_new", "silu"}; /* ZT_ACT_* */
        snprintf(buf, n, "T5 L%d/%d d%d A%d kv%d ff%d %s%s %s V%d", t->layers, t->dec_layers,
                 t->d_model, t->heads, t->d_kv, t->d_ff, t->gated ? "gated-" : "",
                 acts[t->act], t->tie ? "tied" : "untied", t->vocab);
        return;
    }
    const bert_config *b = &c->bert;
    static const char *const fam[] = {"BERT", "RoBERTa", "DistilBERT", "ELECTRA", "ALBERT"};
    int k = snprintf(buf, n, "%s L%d H%d A%d I%d V%d", fam[b->family], b->layers, b->hidden,
                     b->heads, b->inter, b->vocab);
    if (b->family >= BERT_FAMILY_ELECTRA && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " E%d", b->emb > 0 ? b->emb : b->hidden);
    if (b->family == BERT_FAMILY_ALBERT && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " groups %d x %d", b->groups, b->inner);
    if (c->ej.on && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", generator L%d H%d A%d I%d (joint pretraining)",
                 c->ej.gen.layers, c->ej.gen.hidden, c->ej.gen.heads, c->ej.gen.inter);
}
