/* zoo.c - dispatch from a config or preset to the model family that implements it. Knows the
 * families' names and shapes; nothing of their math. */
#include "zoo.h"
#include "hfconfig.h"
#include "layers.h"
#include "../common/err.h"

#include <cjson/cJSON.h>
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
    if (strcmp(type, "t5") == 0) {
        c->type = ZT_MODEL_T5;
        return t5_config_load(path, &c->t5);
    }
    c->type = ZT_MODEL_BERT; /* bert's loader names any other model_type */
    return bert_config_load(path, &c->bert);
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
                       "bert-medium, bert-base, bert-large, t5-small, t5-base, t5-v1_1-small, "
                       "t5-v1_1-base)", name);
    return 0;
}

int zt_model_config_save(const zt_model_cfg *c, const char *path)
{
    return c->type == ZT_MODEL_T5 ? t5_config_save(&c->t5, path)
                                  : bert_config_save(&c->bert, path);
}

int zt_model_layout(const zt_model_cfg *c, zt_layout *l)
{
    return c->type == ZT_MODEL_T5 ? t5_layout(&c->t5, l) : bert_layout(&c->bert, l);
}

int zt_model_create(const zt_model_cfg *c, const zt_layout *l, int dropout, uint64_t seed,
                    const zt_model_ops **ops, void **model)
{
    if (c->type == ZT_MODEL_T5) {
        *ops = &t5_ops;
        return t5_create(&c->t5, l, dropout, seed, model);
    }
    *ops = &bert_ops;
    return bert_create(&c->bert, l, dropout, seed, model);
}

int zt_model_same_shapes(const zt_model_cfg *a, const zt_model_cfg *b)
{
    if (a->type != b->type)
        return 0;
    if (a->type == ZT_MODEL_T5) {
        const t5_config *x = &a->t5, *y = &b->t5;
        return x->vocab == y->vocab && x->d_model == y->d_model && x->d_kv == y->d_kv &&
               x->d_ff == y->d_ff && x->layers == y->layers && x->dec_layers == y->dec_layers &&
               x->heads == y->heads && x->buckets == y->buckets && x->gated == y->gated &&
               x->tie == y->tie;
    }
    const bert_config *x = &a->bert, *y = &b->bert;
    return x->vocab == y->vocab && x->hidden == y->hidden && x->layers == y->layers &&
           x->heads == y->heads && x->inter == y->inter && x->max_pos == y->max_pos &&
           x->type_vocab == y->type_vocab;
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
        return;
    }
    snprintf(o->model_type, sizeof o->model_type, "bert");
    o->vocab_size = c->bert.vocab;
    o->hidden_size = c->bert.hidden;
    o->num_layers = c->bert.layers;
    o->num_heads = c->bert.heads;
    o->intermediate_size = c->bert.inter;
    o->max_positions = c->bert.max_pos;
    o->type_vocab_size = c->bert.type_vocab;
    o->head_dim = c->bert.hidden / c->bert.heads;
}

void zt_model_describe(const zt_model_cfg *c, char *buf, size_t n)
{
    if (c->type == ZT_MODEL_T5) {
        const t5_config *t = &c->t5;
        static const char *acts[] = {"relu", "gelu", "gelu_new"};
        snprintf(buf, n, "T5 L%d/%d d%d A%d kv%d ff%d %s%s %s V%d", t->layers, t->dec_layers,
                 t->d_model, t->heads, t->d_kv, t->d_ff, t->gated ? "gated-" : "",
                 acts[t->act], t->tie ? "tied" : "untied", t->vocab);
        return;
    }
    const bert_config *b = &c->bert;
    snprintf(buf, n, "BERT L%d H%d A%d I%d V%d", b->layers, b->hidden, b->heads, b->inter,
             b->vocab);
}
