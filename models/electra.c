/* electra.c - ELECTRA's joint pretraining: bert.c's generator and discriminator as one
 * model of the engine (electra.h). Each network is a bert_model over a view of the joint
 * layout (its own parameter table, offsets into the joint units); the steps forward to them
 * with the unit buffers remapped. */
#include "electra.h"
#include "hfconfig.h"
#include "../common/err.h"
#include "zerotrain.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ------------------------------------------------------------------------- */

/* the file `name` in the folder of `path` */
static void beside(char *out, size_t n, const char *path, const char *name)
{
    const char *slash = strrchr(path, '/');
    int d = slash ? (int)(slash - path) : 0;
    snprintf(out, n, "%.*s%s%s", d, path, slash ? "/" : "", name);
}

static int exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

int electra_joint_load(const char *path, const bert_config *d, electra_joint *j)
{
    char p[4096];
    cJSON *o;
    int rc;
    memset(j, 0, sizeof *j);
    j->gen_weight = 1.0f;
    j->disc_weight = 50.0f;
    j->temperature = 1.0f;
    if (d->family != BERT_FAMILY_ELECTRA)
        return 0;
    beside(p, sizeof p, path, ELECTRA_GENERATOR_FILE);
    if (exists(p)) {
        ZT_TRY(bert_config_load(p, &j->gen));
        j->have_gen = 1;
    }
    beside(p, sizeof p, path, ELECTRA_PRETRAINING_FILE);
    if (!exists(p))
        return 0;
    if ((rc = zt_hfc_open(p, &o)) < 0)
        return rc;
    if ((rc = zt_hfc_float(o, p, "gen_weight", 1.0, 0.0, 1e9, &j->gen_weight)) == 0 &&
        (rc = zt_hfc_float(o, p, "disc_weight", 50.0, 0.0, 1e9, &j->disc_weight)) == 0 &&
        (rc = zt_hfc_float(o, p, "temperature", 1.0, 1e-6, 1e6, &j->temperature)) == 0) {
        /* (generator_hidden_size and generator_layers are informative: the generator is
         * generator_config.json) */
        const cJSON *dc = cJSON_GetObjectItemCaseSensitive(o, "disallow_correct");
        if (dc && !cJSON_IsBool(dc) && !cJSON_IsNull(dc))
            rc = zt_fail(ZT_E_CONFIG, "%s: \"disallow_correct\" must be true or false", p);
        j->disallow = cJSON_IsTrue(dc);
    }
    cJSON_Delete(o);
    if (rc < 0)
        return rc;
    if (!d->disc)
        return zt_fail(ZT_E_CONFIG, "%s: ELECTRA's joint pretraining needs the discriminator's "
                       "config.json (architectures ElectraForPreTraining), not a %s", p,
                       bert_arch(d));
    if (!j->have_gen)
        return zt_fail(ZT_E_CONFIG, "%s: a joint ELECTRA folder needs %s beside it (the "
                       "generator's config)", p, ELECTRA_GENERATOR_FILE);
    j->on = 1;
    return electra_joint_make(d, j, p);
}

int electra_joint_make(const bert_config *d, electra_joint *j, const char *where)
{
    bert_config *g = &j->gen;
    if (d->family != BERT_FAMILY_ELECTRA || !d->disc)
        return zt_fail(ZT_E_CONFIG, "%s: ELECTRA's joint pretraining is a discriminator's "
                       "(architectures ElectraForPreTraining), not a %s's", where, bert_arch(d));
    if (!j->have_gen) {
        double s = j->gen_size > 0.0 ? j->gen_size : 0.25;
        if (s > 1.0)
            return zt_fail(ZT_E_CONFIG, "zerotrain.electra_generator_size %g: the generator is "
                           "a fraction (0, 1] of the discriminator", s);
        *g = *d;
        g->hidden = (int)nearbyint(d->hidden * s); /* (Python's round: halves to even) */
        g->inter = 4 * g->hidden;
        g->heads = g->hidden / 64 > 1 ? g->hidden / 64 : 1;
        g->disc = 0;
        g->head = BERT_HEAD_MLM;
        g->untied = 0;
        if (g->hidden < 1 || g->hidden % g->heads)
            return zt_fail(ZT_E_CONFIG, "%s: the generator scaled by %g has hidden_size %d, "
                           "which its %d heads do not divide: choose another "
                           "zerotrain.electra_generator_size or give %s", where, s, g->hidden,
                           g->heads, ELECTRA_GENERATOR_FILE);
    }
    if (g->family != BERT_FAMILY_ELECTRA || g->disc || g->head != BERT_HEAD_MLM)
        return zt_fail(ZT_E_CONFIG, "%s: the generator must be an ElectraForMaskedLM, not a %s",
                       ELECTRA_GENERATOR_FILE, bert_arch(g));
    if (g->untied)
        return zt_fail(ZT_E_CONFIG, "%s: the generator's output projection is the shared word "
                       "embeddings: tie_word_embeddings must be true", ELECTRA_GENERATOR_FILE);
    int ge = g->emb > 0 ? g->emb : g->hidden, de = d->emb > 0 ? d->emb : d->hidden;
    if (ge != de || g->vocab != d->vocab || g->max_pos != d->max_pos ||
        g->type_vocab != d->type_vocab || g->pad_id != d->pad_id || g->rel != d->rel)
        return zt_fail(ZT_E_CONFIG, "%s: the generator shares the discriminator's embeddings: "
                       "embedding_size, vocab_size, max_position_embeddings, type_vocab_size, "
                       "pad_token_id and position_embedding_type must be the same (%d %d %d "
                       "%d here, %d %d %d %d in the discriminator)", ELECTRA_GENERATOR_FILE, ge,
                       g->vocab, g->max_pos, g->type_vocab, de, d->vocab, d->max_pos,
                       d->type_vocab);
    j->on = 1;
    return 0;
}

int electra_joint_save(const electra_joint *j, const bert_config *d, const char *path,
                       const char *torch_dtype)
{
    char p[4096], text[512];
    beside(p, sizeof p, path, ELECTRA_GENERATOR_FILE);
    ZT_TRY(bert_config_save(&j->gen, p, torch_dtype));
    beside(p, sizeof p, path, ELECTRA_PRETRAINING_FILE);
    int n = snprintf(text, sizeof text,
                     "{\n  \"gen_weight\": %.9g,\n  \"disc_weight\": %.9g,\n"
                     "  \"temperature\": %.9g,\n  \"disallow_correct\": %s,\n"
                     "  \"generator_hidden_size\": %.9g,\n"
                     "  \"shared\": \"electra.embeddings.* (word, position and token-type "
                     "tables, LayerNorm)\"\n}\n",
                     j->gen_weight, j->disc_weight, j->temperature, j->disallow ? "true" : "false",
                     (double)j->gen.hidden / (double)d->hidden);
    const void *parts[1] = {text};
    size_t lens[1] = {(size_t)n};
    return zt_file_write_atomic(p, parts, lens, 1);
}

/* ---- layout ------------------------------------------------------------------------- */

static int copy_param(zt_layout *l, const zt_param_def *s, const char *prefix)
{
    char n[ZT_NAME_MAX];
    int k;
    snprintf(n, sizeof n, "%s%s", prefix, s->name);
    if ((k = zt_layout_add_param(l, n, s->ndim, s->shape, s->init, s->decay)) < 0)
        return k;
    zt_param_def *p = &l->params[k];
    p->std = s->std;
    p->embedding = s->embedding;
    p->head = s->head || prefix[0]; /* (a discriminator's checkpoint has no generator) */
    p->pad_row = s->pad_row;
    if (s->alias[0])
        snprintf(p->alias, sizeof p->alias, "%s%s", prefix, s->alias);
    return k;
}

static int shared(const char *name) { return strncmp(name, "electra.embeddings.", 19) == 0; }

int electra_joint_layout(const bert_config *d, const electra_joint *j, zt_layout *l)
{
    zt_layout dl, gl;
    int rc;
    memset(l, 0, sizeof *l);
    if ((rc = bert_layout(d, &dl)) < 0)
        return rc;
    if ((rc = bert_layout(&j->gen, &gl)) < 0) {
        zt_layout_free(&dl);
        return rc;
    }
    l->init_std = d->init_range;
    snprintf(l->arch, sizeof l->arch, "%s", bert_arch(d));
    snprintf(l->head_desc, sizeof l->head_desc, "generator and replaced-token-detection head");
    /* embeddings: the discriminator's (shared tables, LayerNorm, its embeddings_project),
     * then the generator's embeddings_project */
    rc = zt_layout_add_unit(l, "embeddings");
    for (int k = 0; rc >= 0 && k < dl.units[0].n_params; k++)
        rc = copy_param(l, &dl.params[k], "");
    for (int k = 0; rc >= 0 && k < gl.units[0].n_params; k++)
        if (!shared(gl.params[k].name))
            rc = copy_param(l, &gl.params[k], ELECTRA_GEN_PREFIX);
    for (int net = 0; net < 2; net++) { /* the generator's units, the discriminator's */
        const zt_layout *s = net ? &dl : &gl;
        const char *pre = net ? "" : ELECTRA_GEN_PREFIX;
        for (int u = 1; rc >= 0 && u < s->n_units; u++) {
            char n[64];
            snprintf(n, sizeof n, "%s%s", pre, s->units[u].name);
            rc = zt_layout_add_unit(l, n);
            for (int k = 0; rc >= 0 && k < s->units[u].n_params; k++)
                rc = copy_param(l, &s->params[s->units[u].first_param + k], pre);
        }
    }
    /* ElectraForMaskedLM's generator_lm_head.weight is the shared word embeddings */
    if (rc >= 0)
        rc = zt_layout_add_alias(l, 0, ELECTRA_GEN_PREFIX "generator_lm_head.weight");
    zt_layout_free(&dl);
    zt_layout_free(&gl);
    if (rc < 0)
        zt_layout_free(l);
    return rc < 0 ? rc : 0;
}

/* ---- the model ---------------------------------------------------------------------- */

typedef struct net {
    void *m;                   /* the bert_model */
    zt_layout l;               /* its parameter table: offsets into the joint units */
    int *map;                  /* its unit -> the joint unit */
    int steps, off;            /* its steps, the first's joint index */
    void **P;                  /* the joint buffers by its units */
    float **G;
} net;

typedef struct ej_model {
    net n[2];                  /* generator, discriminator */
    electra_joint j;
    uint64_t seed;
    int B, T, vocab;
    size_t cap;
    int64_t *dids, *dlab;      /* the discriminator's input and labels [B, T] (one buffer) */
    zt_batch db;               /* the discriminator's batch */
    const int64_t *labels;     /* the batch's (the generator's) */
    const int64_t *given;      /* the batch's replacement_ids, or NULL (sampled) */
    uint32_t *u;               /* sampling scratch [V] each */
    float *row;
    int64_t lab_denom, att_denom, n_att, n_lab;
    double gen_sum, disc_sum;  /* the last loss's sums */
    const zt_model_ops *o;     /* bert_ops */
} ej_model;

/* t's view of joint layout l: network c's own layout (its names), each offset the joint one */
static int make_view(net *t, const bert_config *c, const zt_layout *l, const char *pre)
{
    ZT_TRY(bert_layout(c, &t->l));
    t->map = malloc(sizeof *t->map * (size_t)t->l.n_units);
    t->P = calloc((size_t)t->l.n_units, sizeof *t->P);
    t->G = calloc((size_t)t->l.n_units, sizeof *t->G);
    if (!t->map || !t->P || !t->G)
        return zt_fail(ZT_E_NOMEM, "out of memory creating the ELECTRA model");
    for (int k = 0; k < t->l.n_params; k++) {
        zt_param_def *q = &t->l.params[k];
        char n[ZT_NAME_MAX + 16];
        snprintf(n, sizeof n, "%s%s", shared(q->name) ? "" : pre, q->name);
        int i = zt_layout_find(l, n);
        if (i < 0)
            return zt_fail(ZT_E_INVAL, "ELECTRA joint layout: no parameter %s", n);
        q->offset = l->params[i].offset;
        t->map[q->unit] = l->params[i].unit;
    }
    return 0;
}

static void free_net(net *t)
{
    if (t->m)
        bert_ops.destroy(t->m);
    zt_layout_free(&t->l);
    free(t->map);
    free(t->P);
    free(t->G);
}

static void ej_destroy(void *p)
{
    ej_model *m = p;
    if (!m)
        return;
    free_net(&m->n[0]);
    free_net(&m->n[1]);
    free(m->dids);
    free(m->u);
    free(m->row);
    free(m);
}

int electra_joint_create(const bert_config *d, const electra_joint *j, const zt_layout *l,
                         int dropout, uint64_t seed, int hdt, zt_mem_account *acct, void **out)
{
    ej_model *m = calloc(1, sizeof *m);
    int rc = m ? 0 : zt_fail(ZT_E_NOMEM, "out of memory creating the ELECTRA model");
    if (rc == 0) {
        m->j = *j;
        m->seed = seed;
        m->vocab = d->vocab;
        m->o = &bert_ops;
        if (!(m->u = malloc(sizeof *m->u * (size_t)d->vocab)) ||
            !(m->row = malloc(sizeof *m->row * (size_t)d->vocab)))
            rc = zt_fail(ZT_E_NOMEM, "out of memory creating the ELECTRA model");
    }
    for (int k = 0; rc == 0 && k < 2; k++) {
        const bert_config *c = k ? d : &j->gen;
        net *t = &m->n[k];
        if ((rc = make_view(t, c, l, k ? "" : ELECTRA_GEN_PREFIX)) < 0)
            break;
        /* (the generator's dropout keyed apart from the discriminator's) */
        rc = bert_create(c, &t->l, dropout, k ? seed : seed ^ 0x9e3779b97f4a7c15ull, hdt, acct,
                         &t->m);
        if (rc == 0) {
            t->steps = bert_ops.n_steps(t->m);
            t->off = k ? m->n[0].steps : 0;
        }
    }
    if (rc < 0) {
        ej_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* the network of step s, and s as its own step */
static net *net_of(ej_model *m, int *s)
{
    net *t = &m->n[*s >= m->n[1].off];
    *s -= t->off;
    return t;
}

static const net *cnet_of(const ej_model *m, int *s)
{
    return net_of((ej_model *)m, s);
}

static void *const *view_P(net *t, void *const *P)
{
    for (int k = 0; k < t->l.n_units; k++)
        t->P[k] = P[t->map[k]];
    return t->P;
}

static float *const *view_G(net *t, float *const *G)
{
    for (int k = 0; k < t->l.n_units; k++)
        t->G[k] = G[t->map[k]];
    return t->G;
}

static int ej_n_steps(const void *p)
{
    const ej_model *m = p;
    return m->n[0].steps + m->n[1].steps;
}

static int ej_step_unit(const void *p, int s)
{
    const net *t = cnet_of(p, &s);
    return t->map[bert_ops.step_unit(t->m, s)];
}

static int grow(ej_model *m, size_t n)
{
    if (n <= m->cap)
        return 0;
    int64_t *a = realloc(m->dids, sizeof *a * 2 * n);
    if (!a)
        return zt_fail(ZT_E_NOMEM, "out of memory for the discriminator's batch");
    m->dids = a;
    m->dlab = a + n;
    m->cap = n;
    return 0;
}

static int ej_prepare(void *p, const zt_batch *b, int keep_logits, int64_t *n_labels)
{
    ej_model *m = p;
    int64_t n = 0, na = 0;
    if (b->B < 1 || b->T < 1 || !b->input_ids || !b->labels)
        return zt_fail(ZT_E_INVAL, "batch: need B >= 1, T >= 1, input_ids and labels (the "
                       "masked positions' original ids, -100 elsewhere)");
    if (b->sentence_order_label)
        return zt_fail(ZT_E_INVAL, "batch: sentence_order_label is AlbertForPreTraining's; the "
                       "model is ELECTRA's joint pretraining");
    size_t bt = (size_t)b->B * (size_t)b->T;
    for (size_t i = 0; b->replacement_ids && i < bt; i++)
        if (b->labels[i] != -100 &&
            (b->replacement_ids[i] < 0 || b->replacement_ids[i] >= m->vocab))
            return zt_fail(ZT_E_RANGE, "batch: replacement_ids[%zu][%zu] = %lld is outside [0, "
                           "%d)", i / (size_t)b->T, i % (size_t)b->T,
                           (long long)b->replacement_ids[i], m->vocab);
    ZT_TRY(grow(m, bt));
    ZT_TRY(m->o->prepare(m->n[0].m, b, keep_logits, &n));
    memcpy(m->dids, b->input_ids, sizeof *m->dids * bt); /* (valid ids until sampled over) */
    memset(m->dlab, 0, sizeof *m->dlab * bt);
    m->db = *b;
    m->db.input_ids = m->dids;
    m->db.labels = m->dlab;
    m->db.label_count = m->db.aux_count = 0;
    ZT_TRY(m->o->prepare(m->n[1].m, &m->db, keep_logits, &na));
    m->B = b->B;
    m->T = b->T;
    m->labels = b->labels;
    m->given = b->replacement_ids;
    m->n_lab = n;
    m->n_att = na;
    m->lab_denom = b->label_count > 0 ? b->label_count : n;
    m->att_denom = b->aux_count > 0 ? b->aux_count : na;
    *n_labels = n;
    return 0;
}

/* after the generator's head: its samples into the masked positions of the original input
 * (run_pretraining.py _get_fake_data: unmask, scatter_update; labels = masked and not the
 * original) */
static void sample(ej_model *m)
{
    size_t bt = (size_t)m->B * (size_t)m->T;
    if (!m->given)
        bert_sample_replacements(m->n[0].m, m->j.temperature, m->j.disallow, m->seed, m->u,
                                 m->row, m->dids);
    for (size_t i = 0; i < bt; i++) {
        if (m->given && m->labels[i] != -100)
            m->dids[i] = m->given[i];
        m->dlab[i] = m->labels[i] != -100 && m->dids[i] != m->labels[i];
    }
    bert_set_rtd_targets(m->n[1].m, m->dlab);
}

static void ej_forward_unit(void *p, int s, void *const *P)
{
    ej_model *m = p;
    net *t = net_of(m, &s);
    m->o->forward_unit(t->m, s, view_P(t, P));
    if (t == &m->n[0] && s == t->steps - 1)
        sample(m);
}

static void ej_recompute_unit(void *p, int s, void *const *P)
{
    ej_model *m = p;
    net *t = net_of(m, &s);
    m->o->recompute_unit(t->m, s, view_P(t, P));
}

static void ej_backward_unit(void *p, int s, void *const *P, float *const *G)
{
    ej_model *m = p;
    net *t = net_of(m, &s);
    m->o->backward_unit(t->m, s, view_P(t, P), view_G(t, G));
}

/* grad_scale: the loss scale over lab_denom (the masked positions the generator's mean is
 * over). The discriminator's mean is over att_denom attended positions: its sum enters
 * lab_denom / att_denom times, so that the total over lab_denom is gen_weight x the
 * generator's mean + disc_weight x the discriminator's. */
static double ej_loss(void *p, float grad_scale)
{
    ej_model *m = p;
    double r = m->att_denom > 0 ? (double)m->lab_denom / (double)m->att_denom : 0.0;
    m->gen_sum = m->o->loss(m->n[0].m, grad_scale * m->j.gen_weight);
    m->disc_sum = m->o->loss(m->n[1].m, (float)((double)grad_scale * m->j.disc_weight * r));
    return m->j.gen_weight * m->gen_sum + m->j.disc_weight * m->disc_sum * r;
}

static const float *ej_logits(const void *p, int64_t shape[3])
{
    const ej_model *m = p;
    return m->o->logits(m->n[1].m, shape);
}

static int ej_tied_unit(const void *p, int u)
{
    const ej_model *m = p;
    const net *g = &m->n[0];
    return u == g->map[g->l.n_units - 1] ? 0 : -1;
}

static void ej_set_train(void *p, int train)
{
    ej_model *m = p;
    m->o->set_train(m->n[0].m, train);
    m->o->set_train(m->n[1].m, train);
}

static void ej_set_poll(void *p, void (*fn)(void *), void *arg)
{
    ej_model *m = p;
    m->o->set_poll(m->n[0].m, fn, arg);
    m->o->set_poll(m->n[1].m, fn, arg);
}

static double ej_flops(const void *p)
{
    const ej_model *m = p;
    return m->o->flops(m->n[0].m) + m->o->flops(m->n[1].m);
}

static int ej_set_recompute(void *p, const unsigned char *mode, int k)
{
    ej_model *m = p;
    ZT_TRY(m->o->set_recompute(m->n[0].m, mode, k));
    return m->o->set_recompute(m->n[1].m, mode + m->n[1].off, k);
}

static size_t ej_act_bytes(void *p, int B, int T, const unsigned char *mode, int k)
{
    ej_model *m = p;
    return m->o->act_bytes(m->n[0].m, B, T, mode, k) +
           m->o->act_bytes(m->n[1].m, B, T, mode ? mode + m->n[1].off : NULL, k);
}

static double ej_recompute_flops(const void *p, int B, int T, int s, int mode)
{
    const ej_model *m = p;
    const net *t = cnet_of(m, &s);
    return m->o->recompute_flops(t->m, B, T, s, mode);
}

/* the discriminator's steps (it runs last), then the generator's */
static int ej_backward_steps(const void *p, zt_step *st)
{
    const ej_model *m = p;
    int n = 0;
    for (int k = 1; k >= 0; k--) {
        int c = m->o->backward_steps(m->n[k].m, st + n);
        for (int i = n; i < n + c; i++)
            st[i].unit += m->n[k].off;
        n += c;
    }
    return n;
}

static size_t ej_recompute_bytes(const void *p, int s)
{
    const ej_model *m = p;
    const net *t = cnet_of(m, &s);
    return m->o->recompute_bytes(t->m, s);
}

static void *ej_checkpoint(void *p, int s, size_t *bytes)
{
    ej_model *m = p;
    net *t = net_of(m, &s);
    return m->o->checkpoint(t->m, s, bytes);
}

int electra_joint_outputs(const void *p, zt_electra_outputs *o)
{
    const ej_model *m = p;
    memset(o, 0, sizeof *o);
    o->B = m->B;
    o->T = m->T;
    o->disc_input_ids = m->dids;
    o->disc_labels = m->dlab;
    o->generator_logits = m->o->logits(m->n[0].m, o->generator_logits_shape);
    o->generator_loss = m->n_lab > 0 ? m->gen_sum / (double)m->n_lab : 0.0;
    o->discriminator_loss = m->n_att > 0 ? m->disc_sum / (double)m->n_att : 0.0;
    o->masked = m->n_lab;
    o->attended = m->n_att;
    return 0;
}

const zt_model_ops electra_joint_ops = {
    .n_steps = ej_n_steps,
    .step_unit = ej_step_unit,
    .prepare = ej_prepare,
    .forward_unit = ej_forward_unit,
    .loss = ej_loss,
    .backward_unit = ej_backward_unit,
    .logits = ej_logits,
    .tied_unit = ej_tied_unit,
    .set_train = ej_set_train,
    .set_poll = ej_set_poll,
    .flops = ej_flops,
    .set_recompute = ej_set_recompute,
    .act_bytes = ej_act_bytes,
    .recompute_flops = ej_recompute_flops,
    .backward_steps = ej_backward_steps,
    .recompute_unit = ej_recompute_unit,
    .recompute_bytes = ej_recompute_bytes,
    .checkpoint = ej_checkpoint,
    .destroy = ej_destroy,
};
