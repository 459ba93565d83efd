/* t5.c - T5ForConditionalGeneration on per-unit flat buffers: config (HF config.json),
 * parameter layout, and unit-by-unit forward/backward built from layers.c, Hugging Face's math
 * operation by operation (RMS norms, unscaled attention scores, relative position biases
 * computed in each stack's first block and shared by the others, cross-attention on the
 * encoder's output, tied head scaled by d_model^-0.5). Owns only activations. Generation
 * (gen_*): one decoder position a pass over key/value caches, as transformers' T5 with
 * use_cache (past_key_values: each block's self-attention keys and values per position,
 * its cross-attention ones computed once from the encoder's output).
 * Half precision (hdt >= 0): training and evaluation passes compute on the 16-bit parameters
 * through hlayers.h, with 16-bit activations (marked "x" below) and fp32 gradients, as BERT
 * does; generation's decode passes widen the decoder's units (pview.h) and keep fp32 caches,
 * the encoder runs in 16 bits and its output is widened once. */

#include "t5.h"
#include "../common/err.h"
#include "../common/prof.h"
#include "../data/span.h"
#include "../common/rng.h"
#include "../format/fileio.h"
#include "../memory/mem.h"
#include "hfconfig.h"
#include "../common/half.h"
#include "hlayers.h"
#include "layers.h"
#include "lmrows.h"
#include "pview.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ------------------------------------------------------------------------- */

/* feed_forward_proj as transformers reads it: "[gated-]act" */
static int parse_proj(const char *s, t5_config *c)
{
    const char *act = s;
    c->gated = strncmp(s, "gated-", 6) == 0;
    if (c->gated)
        act = s + 6;
    if (strcmp(act, "relu") == 0)
        c->act = ZT_ACT_RELU;
    else if (strcmp(act, "gelu") == 0) /* transformers: "gated-gelu" means gelu_new (tanh) */
        c->act = c->gated ? ZT_ACT_GELU_TANH : ZT_ACT_GELU;
    else if (strcmp(act, "gelu_new") == 0)
        c->act = ZT_ACT_GELU_TANH;
    else
        return -1;
    return 0;
}

static int validate(const t5_config *c, const char *where)
{
    /* the log buckets start at NB/4 (encoder) and NB/2 (decoder) and need max_distance
     * beyond them (transformers computes invalid buckets there too) */
    if (c->buckets < 4 || c->buckets > 4096)
        return zt_fail(ZT_E_CONFIG, "%s: relative_attention_num_buckets %d must be in [4, 4096]",
                       where, c->buckets);
    if (c->max_dist <= c->buckets / 2)
        return zt_fail(ZT_E_CONFIG, "%s: relative_attention_max_distance %d must exceed half "
                       "of relative_attention_num_buckets (%d): the decoder's logarithmic "
                       "buckets start there", where, c->max_dist, c->buckets / 2);
    if (c->dropout >= 1.0f)
        return zt_fail(ZT_E_CONFIG, "%s: dropout_rate must be < 1", where);
    if (c->dec_start < 0 || c->dec_start >= c->vocab || c->pad < 0 || c->pad >= c->vocab)
        return zt_fail(ZT_E_CONFIG, "%s: decoder_start_token_id %d and pad_token_id %d must be "
                       "in [0, vocab_size %d)", where, c->dec_start, c->pad, c->vocab);
    return 0;
}

int t5_config_load(const char *path, t5_config *c)
{
    cJSON *o;
    const cJSON *v;
    int rc = zt_hfc_open(path, &o);
    if (rc < 0)
        return rc;
    memset(c, 0, sizeof *c);
    if ((rc = zt_hfc_int(o, path, "vocab_size", 1, 0, 1, &c->vocab)) < 0 ||
        (rc = zt_hfc_int(o, path, "d_model", 1, 0, 1, &c->d_model)) < 0 ||
        (rc = zt_hfc_int(o, path, "d_kv", 1, 0, 1, &c->d_kv)) < 0 ||
        (rc = zt_hfc_int(o, path, "d_ff", 1, 0, 1, &c->d_ff)) < 0 ||
        (rc = zt_hfc_int(o, path, "num_layers", 1, 0, 1, &c->layers)) < 0 ||
        (rc = zt_hfc_int(o, path, "num_decoder_layers", 0, c->layers, 1, &c->dec_layers)) < 0 ||
        (rc = zt_hfc_int(o, path, "num_heads", 1, 0, 1, &c->heads)) < 0 ||
        (rc = zt_hfc_int(o, path, "relative_attention_num_buckets", 0, 32, 2, &c->buckets)) < 0 ||
        (rc = zt_hfc_int(o, path, "relative_attention_max_distance", 0, 128, 2, &c->max_dist)) < 0 ||
        (rc = zt_hfc_int(o, path, "decoder_start_token_id", 0, 0, 0, &c->dec_start)) < 0 ||
        (rc = zt_hfc_int(o, path, "pad_token_id", 0, 0, 0, &c->pad)) < 0 ||
        (rc = zt_hfc_int(o, path, "eos_token_id", 0, 1, 0, &c->eos)) < 0 ||
        (rc = zt_hfc_float(o, path, "layer_norm_epsilon", 1e-6, 0.0, 1.0, &c->eps)) < 0 ||
        (rc = zt_hfc_float(o, path, "dropout_rate", 0.1, 0.0, 1.0, &c->dropout)) < 0 ||
        (rc = zt_hfc_float(o, path, "initializer_factor", 1.0, 0.0, 1e3, &c->init_factor)) < 0)
        goto out;
    v = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (cJSON_IsString(v) && strcmp(v->valuestring, "umt5") == 0) {
        rc = zt_fail(ZT_E_UNSUPPORTED, "%s: model_type \"umt5\" is not supported: UMT5 gives "
                     "every layer its own relative attention bias, and zerotrain's T5 has the "
                     "first layer's only (model_type \"t5\" and \"mt5\" are supported)", path);
        goto out;
    }
    if (v && (!cJSON_IsString(v) ||
              (strcmp(v->valuestring, "t5") != 0 && strcmp(v->valuestring, "mt5") != 0))) {
        rc = zt_fail(ZT_E_UNSUPPORTED, "%s: \"model_type\" must be \"t5\" or \"mt5\"", path);
        goto out;
    }
    c->mt5 = v && strcmp(v->valuestring, "mt5") == 0;
    v = cJSON_GetObjectItemCaseSensitive(o, "feed_forward_proj");
    if (v && !cJSON_IsString(v)) {
        rc = zt_fail(ZT_E_CONFIG, "%s: \"feed_forward_proj\" must be a string", path);
        goto out;
    }
    if (parse_proj(v ? v->valuestring : "relu", c) < 0) {
        rc = zt_fail(ZT_E_UNSUPPORTED, "%s: feed_forward_proj \"%s\" is not supported (relu, "
                     "gelu, gated-relu, gated-gelu)", path, v->valuestring);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
    if (v && !cJSON_IsBool(v)) {
        rc = zt_fail(ZT_E_CONFIG, "%s: \"tie_word_embeddings\" must be true or false", path);
        goto out;
    }
    c->tie = v ? cJSON_IsTrue(v) : 1;
    v = cJSON_GetObjectItemCaseSensitive(o, "is_encoder_decoder");
    if (v && cJSON_IsFalse(v)) {
        rc = zt_fail(ZT_E_UNSUPPORTED, "%s: only encoder-decoder T5 is supported "
                     "(is_encoder_decoder is false)", path);
        goto out;
    }
    rc = validate(c, path);
out:
    cJSON_Delete(o);
    return rc;
}

int t5_config_preset(const char *name, int vocab, t5_config *c)
{
    static const struct {
        const char *name;
        int d, kv, ff, L, A, gated;
    } presets[] = {
        {"t5-small", 512, 64, 2048, 6, 8, 0},        {"t5-base", 768, 64, 3072, 12, 12, 0},
        {"t5-v1_1-small", 512, 64, 1024, 8, 6, 1},   {"t5-v1_1-base", 768, 64, 2048, 12, 12, 1},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(name, presets[i].name) != 0)
            continue;
        *c = (t5_config){.vocab = vocab > 0 ? vocab : 32128, .d_model = presets[i].d,
                         .d_kv = presets[i].kv, .d_ff = presets[i].ff, .layers = presets[i].L,
                         .dec_layers = presets[i].L, .heads = presets[i].A, .buckets = 32,
                         .max_dist = 128,
                         .act = presets[i].gated ? ZT_ACT_GELU_TANH : ZT_ACT_RELU,
                         .gated = presets[i].gated, .tie = !presets[i].gated, .eps = 1e-6f,
                         .dropout = 0.1f, .init_factor = 1.0f, .dec_start = 0, .pad = 0,
                         .eos = 1};
        return 0;
    }
    return 1;
}

int t5_config_save(const t5_config *c, const char *path, const char *torch_dtype)
{
    char text[2048];
    const char *act = c->act == ZT_ACT_RELU ? "relu" : "gelu";
    int n = snprintf(
        text, sizeof text,
        "{\n  \"architectures\": [\"%sT5ForConditionalGeneration\"],\n  \"model_type\": \"%st5\",\n"
        "  \"vocab_size\": %d,\n  \"d_model\": %d,\n  \"d_kv\": %d,\n  \"d_ff\": %d,\n"
        "  \"num_layers\": %d,\n  \"num_decoder_layers\": %d,\n  \"num_heads\": %d,\n"
        "  \"relative_attention_num_buckets\": %d,\n  \"relative_attention_max_distance\": %d,\n"
        "  \"feed_forward_proj\": \"%s%s\",\n  \"tie_word_embeddings\": %s,\n"
        "  \"layer_norm_epsilon\": %.9g,\n  \"dropout_rate\": %.9g,\n"
        "  \"initializer_factor\": %.9g,\n  \"decoder_start_token_id\": %d,\n"
        "  \"pad_token_id\": %d,\n  \"eos_token_id\": %d,\n  \"is_encoder_decoder\": true,\n"
        "  \"torch_dtype\": \"%s\"\n}\n",
        c->mt5 ? "M" : "", c->mt5 ? "m" : "", c->vocab, c->d_model, c->d_kv, c->d_ff, c->layers,
        c->dec_layers, c->heads, c->buckets,
        c->max_dist, c->gated ? "gated-" : "", act, c->tie ? "true" : "false", c->eps,
        c->dropout, c->init_factor, c->dec_start, c->pad, c->eos,
        torch_dtype ? torch_dtype : "float32");
    const void *parts[1] = {text};
    size_t lens[1] = {(size_t)n};
    return zt_file_write_atomic(path, parts, lens, 1);
}

/* ---- layout ------------------------------------------------------------------------- */

/* a block's parameters, in this order (absent ones are -1 in the block's index table) */
enum { B_Q, B_K, B_V, B_O, B_REL, B_LN0, B_CQ, B_CK, B_CV, B_CO, B_LN1, B_WI, B_WI1, B_WO,
       B_LNF, B_N };

static int add(zt_layout *l, const char *name, int64_t d0, int64_t d1, int init, int decay,
               double std)
{
    int64_t shape[2] = {d0, d1};
    int i = zt_layout_add_param(l, name, d1 ? 2 : 1, shape, init, decay);
    if (i >= 0)
        l->params[i].std = (float)std;
    return i;
}

static int add_block(zt_layout *l, const t5_config *c, int dec, int i)
{
    char n[ZT_NAME_MAX], pre[64];
    double f = c->init_factor, C = c->d_model, I = (double)c->heads * c->d_kv;
    int ff = dec ? 2 : 1;
    snprintf(pre, sizeof pre, "%s.block.%d", dec ? "decoder" : "encoder", i);
    if (zt_layout_add_unit(l, pre) < 0)
        return -1;
    /* HF T5PreTrainedModel._init_weights */
    static const char *qkvo[4] = {"q", "k", "v", "o"};
    for (int s = 0; s < (dec ? 2 : 1); s++) {
        const char *att = s ? "EncDecAttention" : "SelfAttention";
        for (int j = 0; j < 4; j++) {
            double std = j == 0 ? f * pow(C * c->d_kv, -0.5) : j == 3 ? f * pow(I, -0.5)
                                                                      : f * pow(C, -0.5);
            snprintf(n, sizeof n, "%s.layer.%d.%s.%s.weight", pre, s, att, qkvo[j]);
            if (add(l, n, j == 3 ? c->d_model : (int64_t)I, j == 3 ? (int64_t)I : c->d_model,
                    ZT_INIT_NORMAL, 1, std) < 0)
                return -1;
        }
        if (i == 0 && s == 0) {
            snprintf(n, sizeof n, "%s.layer.0.SelfAttention.relative_attention_bias.weight",
                     pre);
            if (add(l, n, c->buckets, c->heads, ZT_INIT_NORMAL, 1, f * pow(C, -0.5)) < 0)
                return -1;
            l->params[l->n_params - 1].embedding = 1; /* an nn.Embedding */
        }
        snprintf(n, sizeof n, "%s.layer.%d.layer_norm.weight", pre, s);
        if (add(l, n, c->d_model, 0, ZT_INIT_ONES, 0, 0) < 0)
            return -1;
    }
    for (int j = 0; j < (c->gated ? 2 : 1); j++) {
        snprintf(n, sizeof n, "%s.layer.%d.DenseReluDense.wi%s.weight", pre, ff,
                 c->gated ? (j ? "_1" : "_0") : "");
        if (add(l, n, c->d_ff, c->d_model, ZT_INIT_NORMAL, 1, f * pow(C, -0.5)) < 0)
            return -1;
    }
    snprintf(n, sizeof n, "%s.layer.%d.DenseReluDense.wo.weight", pre, ff);
    if (add(l, n, c->d_model, c->d_ff, ZT_INIT_NORMAL, 1, f * pow((double)c->d_ff, -0.5)) < 0)
        return -1;
    snprintf(n, sizeof n, "%s.layer.%d.layer_norm.weight", pre, ff);
    return add(l, n, c->d_model, 0, ZT_INIT_ONES, 0, 0) < 0 ? -1 : 0;
}

int t5_layout(const t5_config *c, zt_layout *l)
{
    int w;
    memset(l, 0, sizeof *l);
    l->init_std = c->init_factor;
    snprintf(l->arch, sizeof l->arch, "T5ForConditionalGeneration");
    if (zt_layout_add_unit(l, "shared") < 0 ||
        (w = add(l, "shared.weight", c->vocab, c->d_model, ZT_INIT_NORMAL, 1,
                 c->init_factor * 1.0)) < 0)
        goto fail;
    l->params[w].embedding = 1;
    if (c->tie)
        snprintf(l->params[w].alias, ZT_NAME_MAX, "lm_head.weight");
    /* the stacks' copies transformers may store too */
    if (zt_layout_add_alias(l, w, "encoder.embed_tokens.weight") < 0 ||
        zt_layout_add_alias(l, w, "decoder.embed_tokens.weight") < 0)
        goto fail;
    for (int i = 0; i < c->layers; i++)
        if (add_block(l, c, 0, i) < 0)
            goto fail;
    if (zt_layout_add_unit(l, "encoder.final_layer_norm") < 0 ||
        add(l, "encoder.final_layer_norm.weight", c->d_model, 0, ZT_INIT_ONES, 0, 0) < 0)
        goto fail;
    for (int i = 0; i < c->dec_layers; i++)
        if (add_block(l, c, 1, i) < 0)
            goto fail;
    if (zt_layout_add_unit(l, "decoder.final_layer_norm+lm_head") < 0 ||
        add(l, "decoder.final_layer_norm.weight", c->d_model, 0, ZT_INIT_ONES, 0, 0) < 0)
        goto fail;
    if (!c->tie && add(l, "lm_head.weight", c->vocab, c->d_model, ZT_INIT_NORMAL, 1,
                       c->init_factor * pow((double)c->d_model, -0.5)) < 0)
        goto fail;
    return 0;
fail:
    zt_layout_free(l);
    return ZT_E_NOMEM;
}

/* ---- the model ------------------------------------------------------------------------ */

typedef struct blk_acts {
    /* kept (selective keeps these too); all x but the norms' 1/rms r1, r2, r3 (fp32) */
    void *n1, *q, *k, *v, *x1;                  /* self-attention: norm, projections, residual */
    void *n2, *cq, *ck, *cv, *x2;               /* cross-attention (decoder) */
    void *n3, *h0, *h1;                         /* feed-forward: norm, wi (wi_0), wi_1 */
    float *r1, *r2, *r3;
    /* recomputed by selective */
    void *att, *ctx, *catt, *cctx, *a0, *g;     /* probabilities, contexts, act(h0), FF hidden */
    void *y;                                    /* the output */
} blk_acts;

/* generation's state (gen_begin .. gen_end): the caches and one position's working set */
typedef struct t5_gen {
    int on;                        /* 0 off; 1: the next pass encodes and decodes position 0;
                                    * 2: it decodes position t */
    int R, per, S, t;              /* decoder rows, rows per input row, positions the caches
                                    * hold, the position decoded */
    char *arena;
    size_t bytes;
    int64_t *tok;                  /* [R] the tokens decoded at position t */
    float **k, **v;                /* per decoder block: self-attention [R, S, I] */
    float **ck, **cv;              /* per decoder block: cross-attention [B, Te, I] */
    float *x, *n, *r, *q, *kk, *vv, *ctx, *o, *h0, *h1, *a0, *g, *logits;
    float *pb;                     /* [H, S] position t's biases over the keys */
    float *cmask;                  /* [B, Te] 0, or -FLT_MAX on padding */
    float *tmp;                    /* [R, S, I] the reorder's copy */
    float *enc;                    /* half precision: [B, Te, C] the encoder's output widened */
    float *scr;                    /* slots x max(S, Te) attention scores */
} t5_gen;

typedef struct t5_model {
    zt_mem_account *acct;      /* the engine's: the activations are counted there too */
    int dt;                    /* -1: fp32; else the 16-bit dtype of parameters and
                                * activations (ZT_HALF_*) */
    zt_pview pv;               /* generation, half precision: the decoder's units widened */
    t5_config c;
    const zt_layout *l;
    int dropout, train;
    uint64_t seed;
    int Le, Ld, I;                 /* blocks, inner attention width H * d_kv */
    int bidx[2][2][B_N];           /* [decoder][later block][role]: index within the unit
                                    * (-1: absent) */
    unsigned char *mode;           /* per unit: ZT_KEEP_* (blocks only) */
    int seg_k;                     /* >= 2: recomputed in segments of seg_k blocks per stack */
    int last_rc[2];                /* the last recomputed block of each stack (-1: none) */
    /* current batch */
    int B, Te, Td, keep_logits;
    int packed;                    /* the stacks run on the real rows only (set_rows) */
    int Me, Md;                    /* rows of the encoder and the decoder: B Te and B Td, or
                                    * packed, the samples' real lengths summed */
    int32_t *cu[2];                /* [B + 1] per stack: sample b's rows cu[b] ... cu[b+1]-1 */
    const int64_t *eids;           /* [Me] the encoder's ids: the batch's, or packed (pids) */
    int64_t *pids;
    int evaluated;                 /* the last loss was an evaluation's: its logits stay */
    const int64_t *ids, *mask, *dmask, *labels;
    uint64_t first_sample;
    /* activations, carved for (cap_b, cap_te, cap_td) */
    int cap_b, cap_te, cap_td;
    size_t cap_mx;                 /* rows of the longer stack at capacity */
    char *arena;
    size_t arena_bytes;
    int64_t *dec_ids;              /* [Md] labels shifted right */
    void *e_enc, *e_dec;           /* x: input embeddings (after dropout) */
    float *pb[2], *dpb[2];         /* position biases [H,T,T] of each stack and gradients */
    blk_acts *la;                  /* [Le + Ld] */
    blk_acts *ws[2];               /* working sets of recomputed blocks, per stack: one, or
                                    * one per segment position */
    void *slot[3];                 /* x: ZT_KEEP_OFFLOAD outputs */
    signed char *slot_of;          /* per block */
    float *r_ef, *r_df;            /* the final norms' 1/rms */
    void *enc_out, *dec_out;       /* x: encoder final norm, decoder's (after dropout) */
    double *row_loss;
    int compact, n_lab;
    int32_t *lab_rows;
    int64_t *lab_c;
    float *dcur, *d_edec, *d_enc, *s[2], *sI[4], *sF[4], *att_scratch;
    /* half precision's scratch: the norms', the loss's, the first block's relative-bias
     * table widened, the products' output gradients rounded (hs_n elements) */
    float *nscr, *xce, *tab;
    uint16_t *hs;
    size_t hs_n;
    int slots;
    zt_lm_rows lm;                 /* the head's rows: logits, the labelled rows (lm.x); x
                                    * unless every row's logits are kept (fp32) */
    t5_gen g;
    void (*poll)(void *);
    void *poll_arg;
} t5_model;

#define POLL(m) ((m)->poll ? (m)->poll((m)->poll_arg) : (void)0)

/* unit numbering */
static int u_encf(const t5_model *m) { return m->Le + 1; }
static int u_head(const t5_model *m) { return m->Le + m->Ld + 2; }
static int is_block(const t5_model *m, int u)
{
    return (u >= 1 && u <= m->Le) || (u >= m->Le + 2 && u <= m->Le + m->Ld + 1);
}
static int is_dec(const t5_model *m, int u) { return u > m->Le + 1; }
/* block index into la[]: encoder blocks 0..Le-1, decoder blocks Le..Le+Ld-1 */
static int blk(const t5_model *m, int u) { return is_dec(m, u) ? u - 2 : u - 1; }
static int first_of_stack(const t5_model *m, int u) { return u == 1 || u == m->Le + 2; }
/* a block's position in its stack, the stack's length and first unit */
static int pos_in_stack(const t5_model *m, int u) { return is_dec(m, u) ? u - m->Le - 2 : u - 1; }
static int stack_len(const t5_model *m, int dec) { return dec ? m->Ld : m->Le; }
static int stack_unit(const t5_model *m, int dec, int i) { return dec ? m->Le + 2 + i : 1 + i; }
/* segments of k blocks counted from each stack's end: the segment of position i ends at
 * seg_of(i); segment ends keep their output */
static int seg_k_of(const t5_model *m, int dec)
{
    int L = stack_len(m, dec);
    return m->seg_k < L ? m->seg_k : L;
}
static int seg_end(int L, int k, int i) { return (L - 1 - i) % k == 0; }
static int seg_of(int L, int k, int i) { return i + (L - 1 - i) % k; }
static int seg_start(int k, int e) { return e - k + 1 > 0 ? e - k + 1 : 0; }

static size_t poff(const t5_model *m, int u, int j)
{
    return (size_t)m->l->params[m->l->units[u].first_param + j].offset;
}

/* parameter j of unit u: in the model's dtype (P), or fp32 (gradients, generation's views) */
static void *param(const t5_model *m, void *const *P, int u, int j)
{
    return x_at(m->dt, P[u], poff(m, u, j));
}

static float *fparam(const t5_model *m, float *const *P, int u, int j)
{
    return P[u] + poff(m, u, j);
}

/* block parameter by role (NULL when the block has none) */
static int bj(const t5_model *m, int u, int role)
{
    return m->bidx[is_dec(m, u)][!first_of_stack(m, u)][role];
}

static void *bp(const t5_model *m, void *const *P, int u, int role)
{
    int j = bj(m, u, role);
    return j < 0 ? NULL : param(m, P, u, j);
}

static float *fbp(const t5_model *m, float *const *P, int u, int role)
{
    int j = bj(m, u, role);
    return j < 0 ? NULL : fparam(m, P, u, j);
}

/* the scratch of the half-precision kernels (fp32: unused) */
#define FS(m) (m)->sF[0], (m)->cap_mx * (size_t)(m)->c.d_ff
#define HS(m) (m)->hs, (m)->hs_n
#define XS(m) (m)->nscr, (m)->slots

static zt_dropout drop_for(const t5_model *m, int u, int purpose)
{
    zt_dropout d = {m->dropout && m->train ? m->c.dropout : 0.0f, m->seed, m->first_sample,
                    zt_rng_stream(u, purpose)};
    return d;
}

/* dropout (with the residual r added, NULL: none) on stack dec's rows of w elements, by
 * sample: a packed sample's rows draw the decisions of its padded rows */
static void drop_rows(const t5_model *m, int dec, void *x, const void *r, const zt_dropout *d,
                      size_t w)
{
    if (m->packed)
        xdropout_residual_rows(m->dt, x, r, NULL, d, m->B, m->cu[dec], w);
    else
        xdropout_residual(m->dt, x, r, NULL, d, m->B, (size_t)(dec ? m->Td : m->Te) * w);
}

static void drop_back(const t5_model *m, int dec, float *dx, const zt_dropout *d, size_t w)
{
    if (m->packed)
        dropout_backward_rows(dx, NULL, d, m->B, m->cu[dec], w);
    else
        dropout_backward(dx, NULL, d, m->B, (size_t)(dec ? m->Td : m->Te) * w);
}

/* ---- carving ---------------------------------------------------------------------------- */


enum { P_KEPT = 1, P_RECOMP = 2, P_OUT = 4, P_ALL = 7 };

typedef struct dims {
    size_t B, Te, Td, C, I, F, H, es; /* es: bytes of an x element */
    int gated;
} dims;

/* n elements of es bytes */
static void *take_x(zt_carver *cv, size_t n, size_t es)
{
    return zt_take(cv, (n * es + sizeof(float) - 1) / sizeof(float));
}

static void carve_block(zt_carver *cv, blk_acts *a, unsigned pieces, const dims *d, int dec)
{
    size_t T = dec ? d->Td : d->Te, M = d->B * T, Me = d->B * d->Te, C = d->C, I = d->I,
           F = d->F, e = d->es;
    if (pieces & P_KEPT) {
        a->n1 = take_x(cv, M * C, e); a->r1 = zt_take(cv, M);
        a->q = take_x(cv, M * I, e); a->k = take_x(cv, M * I, e); a->v = take_x(cv, M * I, e);
        a->x1 = take_x(cv, M * C, e);
        if (dec) {
            a->n2 = take_x(cv, M * C, e); a->r2 = zt_take(cv, M);
            a->cq = take_x(cv, M * I, e); a->ck = take_x(cv, Me * I, e);
            a->cv = take_x(cv, Me * I, e);
            a->x2 = take_x(cv, M * C, e);
        }
        a->n3 = take_x(cv, M * C, e); a->r3 = zt_take(cv, M);
        a->h0 = take_x(cv, M * F, e);
        a->h1 = d->gated ? take_x(cv, M * F, e) : NULL;
    }
    if (pieces & P_RECOMP) {
        a->att = take_x(cv, d->B * d->H * T * T, e);
        a->ctx = take_x(cv, M * I, e);
        if (dec) {
            a->catt = take_x(cv, d->B * d->H * T * d->Te, e);
            a->cctx = take_x(cv, M * I, e);
        }
        a->a0 = d->gated ? take_x(cv, M * F, e) : NULL;
        a->g = take_x(cv, M * F, e);
    }
    if (pieces & P_OUT)
        a->y = take_x(cv, M * C, e);
}

static size_t block_bytes(unsigned pieces, const dims *d, int dec)
{
    zt_carver cv = {NULL, 0};
    blk_acts a;
    carve_block(&cv, &a, pieces, d, dec);
    return cv.off;
}

/* Every activation of a B x (Te, Td) batch under mode (counting when cv->base is NULL: m's
 * pointers are clobbered, count on a copy). Blocks that keep everything own their pieces;
 * recomputed ones own what they keep and share their stack's working set. */
static void carve(t5_model *m, zt_carver *cv, const unsigned char *mode, int B, int Te, int Td)
{
    dims d = {(size_t)B, (size_t)Te, (size_t)Td, (size_t)m->c.d_model, (size_t)m->I,
              (size_t)m->c.d_ff, (size_t)m->c.heads, x_es(m->dt), m->c.gated};
    size_t Me = (size_t)B * Te, Md = (size_t)B * Td, Mx = Me > Md ? Me : Md, C = d.C, e = d.es;
    size_t Tx = (size_t)(Te > Td ? Te : Td), H = d.H;
    int nu = u_head(m) + 1, noff = 0, seg = m->seg_k >= 2;
    unsigned wsp[2] = {0, 0};
    blk_acts scratch;
    for (int u = 0; u < nu; u++) {
        if (!is_block(m, u) || mode[u] == ZT_KEEP_ALL)
            continue;
        wsp[is_dec(m, u)] |= mode[u] == ZT_KEEP_SELECTIVE ? P_RECOMP : P_ALL;
        noff += mode[u] == ZT_KEEP_OFFLOAD;
    }
    m->dec_ids = zt_take(cv, Md * 2);
    m->pids = zt_take(cv, Me * 2);
    m->cu[0] = zt_take(cv, B + 1); m->cu[1] = zt_take(cv, B + 1);
    m->e_enc = take_x(cv, Me * C, e);
    m->e_dec = take_x(cv, Md * C, e);
    m->pb[0] = zt_take(cv, H * Te * Te); m->dpb[0] = zt_take(cv, H * Te * Te);
    m->pb[1] = zt_take(cv, H * Td * Td); m->dpb[1] = zt_take(cv, H * Td * Td);
    for (int s = 0; s < 2; s++) /* selective-only stacks share only what they recompute */
        for (int p = 0; wsp[s] && p < (seg ? seg_k_of(m, s) : 1); p++)
            carve_block(cv, cv->base ? &m->ws[s][p] : &scratch, wsp[s], &d, s);
    for (int s = 0; s < (noff ? 3 : 0); s++) {
        void *x = take_x(cv, Mx * C, e);
        if (cv->base)
            m->slot[s] = x;
    }
    for (int u = 0, o = 0; u < nu; u++) {
        if (!is_block(m, u))
            continue;
        int dec = is_dec(m, u), md = mode[u], i = pos_in_stack(m, u), L = stack_len(m, dec);
        int k = seg ? seg_k_of(m, dec) : 1, end = !seg || seg_end(L, k, i);
        int p = seg ? i - seg_start(k, seg_of(L, k, i)) : 0;
        blk_acts *a = cv->base ? &m->la[blk(m, u)] : &scratch;
        if (cv->base) {
            m->slot_of[blk(m, u)] = -1;
            if (md != ZT_KEEP_ALL)
                *a = m->ws[dec][p]; /* shared, but what the block keeps */
        }
        if (md == ZT_KEEP_ALL)
            carve_block(cv, a, P_ALL, &d, dec);
        else if (md == ZT_KEEP_SELECTIVE)
            carve_block(cv, a, P_KEPT | P_OUT, &d, dec);
        else if (md == ZT_KEEP_OUTPUT && end)
            carve_block(cv, a, P_OUT, &d, dec);
        else if (md == ZT_KEEP_OFFLOAD && end && cv->base) { /* offloaded output */
            m->slot_of[blk(m, u)] = (signed char)(o % 3);
            a->y = m->slot[o % 3];
        }
        o += md == ZT_KEEP_OFFLOAD && end;
    }
    m->r_ef = zt_take(cv, Me); m->enc_out = take_x(cv, Me * C, e);
    m->r_df = zt_take(cv, Md); m->dec_out = take_x(cv, Md * C, e);
    m->row_loss = zt_take(cv, Md * 2);
    m->lab_rows = zt_take(cv, Md); m->lab_c = zt_take(cv, Md * 2);
    m->dcur = zt_take(cv, Mx * C); m->d_edec = zt_take(cv, Md * C); m->d_enc = zt_take(cv, Me * C);
    for (int i = 0; i < 2; i++)
        m->s[i] = zt_take(cv, Mx * C);
    for (int i = 0; i < 4; i++)
        m->sI[i] = zt_take(cv, Mx * d.I);
    for (int i = 0; i < 4; i++)
        m->sF[i] = zt_take(cv, Mx * d.F);
    if (m->dt < 0) {
        m->att_scratch = zt_take(cv, 2 * Tx * Tx * (size_t)m->slots);
        m->nscr = m->xce = m->tab = NULL;
        m->hs = NULL;
        m->hs_n = 0;
    } else {
        size_t fw = attention_scratch(m->dt, (int)Tx, (int)Tx, m->c.d_kv, 0);
        size_t bw = attention_scratch(m->dt, (int)Tx, (int)Tx, m->c.d_kv, 1);
        size_t wide = d.F > d.I ? d.F : d.I;
        m->att_scratch = zt_take(cv, (fw > bw ? fw : bw) * (size_t)m->slots);
        m->nscr = zt_take(cv, xlayernorm_scratch(m->dt, (int)C, m->slots));
        m->xce = zt_take(cv, xcrossentropy_scratch(m->dt, m->c.vocab, m->slots));
        m->tab = zt_take(cv, (size_t)m->c.buckets * H);
        m->hs_n = Mx * (wide > C ? wide : C);
        m->hs = take_x(cv, m->hs_n, 2);
    }
}

static void free_acts(t5_model *m)
{
    zt_lm_rows_free(&m->lm);
    zt_mem_free_in(m->acct, m->arena, m->arena_bytes, ZT_MEM_ACTIVATIONS);
    m->arena = NULL;
    m->arena_bytes = 0;
    m->cap_b = m->cap_te = m->cap_td = 0;
}

/* Pieces are carved for the capacity (B, Te, Td); every piece is a product of the batch's
 * dimensions laid out densely, so a batch no larger in any of them uses prefixes. */
static int size_acts(t5_model *m, int B, int Te, int Td)
{
    if (m->arena && B <= m->cap_b && Te <= m->cap_te && Td <= m->cap_td &&
        m->slots >= omp_get_max_threads())
        return 0;
    free_acts(m);
    m->slots = omp_get_max_threads();
    zt_carver cv = {NULL, 0};
    carve(m, &cv, m->mode, B, Te, Td);
    if (!(m->arena = zt_mem_alloc_in(m->acct, cv.off, ZT_ALIGN_PAGE, ZT_MEM_ACTIVATIONS)))
        return ZT_E_NOMEM;
    m->arena_bytes = cv.off;
    cv = (zt_carver){m->arena, 0};
    carve(m, &cv, m->mode, B, Te, Td);
    m->cap_b = B;
    m->cap_te = Te;
    m->cap_td = Td;
    m->cap_mx = (size_t)B * (size_t)(Te > Td ? Te : Td);
    return 0;
}

/* The planner's estimate for B x T: inputs of T, targets as long as span corruption makes them
 * for T (zerotrain train's objective; T when that cannot be computed), the logits of every
 * decoder row. */
static size_t t5_act_bytes(void *p, int B, int T, const unsigned char *unit_mode, int k)
{
    t5_model t = *(t5_model *)p;
    zt_carver cv = {NULL, 0};
    int raw, Td = T;
    if (zt_span_raw_length(T, 0.15f, 3.0f, &raw, &Td) < 0)
        Td = T;
    t.slots = omp_get_max_threads();
    if (unit_mode)
        t.seg_k = k >= 2 ? k : 0;
    carve(&t, &cv, unit_mode ? unit_mode : t.mode, B, T, Td);
    return cv.off + zt_lm_rows_bytes((size_t)B * Td, t.c.vocab, t.c.d_model, 0, x_es(t.dt));
}

/* ---- create / prepare -------------------------------------------------------------------- */

static void t5_destroy(void *p);

int t5_create(const t5_config *c, const zt_layout *l, int dropout, uint64_t seed, int hdt,
              zt_mem_account *acct, void **out)
{
    size_t nb = (size_t)c->layers + (size_t)c->dec_layers, nu = nb + 3;
    t5_model *m = calloc(1, sizeof *m);
    if (!m || !(m->la = calloc(nb, sizeof *m->la)) || !(m->mode = calloc(nu, 1)) ||
        !(m->slot_of = calloc(nb, 1)) ||
        !(m->ws[0] = calloc((size_t)c->layers, sizeof(blk_acts))) ||
        !(m->ws[1] = calloc((size_t)c->dec_layers, sizeof(blk_acts)))) {
        if (m) {
            free(m->la);
            free(m->mode);
            free(m->slot_of);
            free(m->ws[0]);
        }
        free(m);
        return zt_fail(ZT_E_NOMEM, "out of memory creating the model");
    }
    m->c = *c;
    m->dt = hdt;
    m->acct = m->lm.acct = acct;
    m->l = l;
    m->dropout = dropout;
    m->train = 1;
    m->seed = seed;
    m->Le = c->layers;
    m->Ld = c->dec_layers;
    m->I = c->heads * c->d_kv;
    m->last_rc[0] = m->last_rc[1] = -1;
    /* each block parameter's index within its unit: encoder / decoder, first / later block
     * (the layout's order: q k v o [relative bias] norm [cross q k v o, norm] wi [wi_1] wo
     * norm) */
    for (int dec = 0; dec < 2; dec++)
        for (int later = 0; later < 2; later++) {
            int *ix = m->bidx[dec][later], j = 0;
            for (int r = 0; r < B_N; r++)
                ix[r] = -1;
            ix[B_Q] = j++; ix[B_K] = j++; ix[B_V] = j++; ix[B_O] = j++;
            if (!later)
                ix[B_REL] = j++;
            ix[B_LN0] = j++;
            if (dec) {
                ix[B_CQ] = j++; ix[B_CK] = j++; ix[B_CV] = j++; ix[B_CO] = j++;
                ix[B_LN1] = j++;
            }
            ix[B_WI] = j++;
            if (c->gated)
                ix[B_WI1] = j++;
            ix[B_WO] = j++; ix[B_LNF] = j++;
        }
    zt_pview_init(&m->pv, -1, l, c->tie, acct); /* (generation widens: gen_begin) */
    *out = m;
    return 0;
}

static void t5_gen_end(void *p);

static void t5_destroy(void *p)
{
    t5_model *m = p;
    if (!m)
        return;
    t5_gen_end(m);
    free_acts(m);
    free(m->la);
    free(m->mode);
    free(m->slot_of);
    free(m->ws[0]);
    free(m->ws[1]);
    free(m);
}

/* the encoder's inputs of b: ids in the vocabulary, a 0/1 mask */
static int check_inputs(const t5_config *c, const zt_batch *b)
{
    if (b->token_type_ids)
        return zt_fail(ZT_E_INVAL, "batch: T5 takes no token_type_ids");
    for (int i = 0; i < b->B * b->T; i++) {
        int r = i / b->T, t = i % b->T;
        if (b->input_ids[i] < 0 || b->input_ids[i] >= c->vocab)
            return zt_fail(ZT_E_RANGE, "batch: input_ids[%d][%d] = %lld is outside [0, %d)", r,
                           t, (long long)b->input_ids[i], c->vocab);
        if (b->attention_mask && b->attention_mask[i] != 0 && b->attention_mask[i] != 1)
            return zt_fail(ZT_E_RANGE, "batch: attention_mask[%d][%d] = %lld is not 0 or 1", r,
                           t, (long long)b->attention_mask[i]);
    }
    return 0;
}

/* The rows of each stack (see t5_model.cu). A training or evaluation batch whose logits are
 * not kept, whose every input is right-padded (mask 1 ... 1 0 ... 0, at least one 1) and
 * whose decoder mask (when given) is 1 up to each row's last label, runs packed: each
 * encoder row on its real tokens only, each decoder row up to its last label (at least one
 * position). That is the padded computation without its padding, up to fp32 summation order:
 * a masked key's probability is exactly 0, the decoder's causal mask keeps the positions
 * after the last label from every labelled one, and the loss reads labelled positions only.
 * Otherwise every stack runs on all B T positions with the key masks. */
static void set_rows(t5_model *m, const zt_batch *b)
{
    int B = b->B, Te = m->Te, Td = m->Td, pack = m->compact && b->attention_mask;
    int32_t *ce = m->cu[0], *cd = m->cu[1];
    ce[0] = cd[0] = 0;
    for (int r = 0; r < B && pack; r++) {
        const int64_t *mk = b->attention_mask + (size_t)r * Te;
        const int64_t *lab = b->labels + (size_t)r * Td;
        const int64_t *dm = b->decoder_attention_mask;
        int le = 0, ld = Td;
        while (le < Te && mk[le] == 1)
            le++;
        for (int t = le; t < Te; t++)
            pack &= mk[t] == 0;
        pack &= le > 0;
        while (ld > 1 && lab[ld - 1] == -100)
            ld--;
        for (int t = 0; dm && t < ld; t++)
            pack &= dm[(size_t)r * Td + t] == 1;
        ce[r + 1] = ce[r] + le;
        cd[r + 1] = cd[r] + ld;
    }
    m->packed = pack;
    if (!pack)
        for (int r = 0; r <= B; r++) {
            ce[r] = r * Te;
            cd[r] = r * Td;
        }
    m->Me = ce[B];
    m->Md = cd[B];
    m->eids = b->input_ids;
    if (pack) {
        for (int r = 0; r < B; r++)
            memcpy(m->pids + ce[r], b->input_ids + (size_t)r * Te,
                   sizeof(int64_t) * (size_t)(ce[r + 1] - ce[r]));
        m->eids = m->pids;
    }
}

static int t5_prepare(void *p, const zt_batch *b, int keep_logits, int64_t *n_labels)
{
    t5_model *m = p;
    const t5_config *c = &m->c;
    int Td = b->T_dec > 0 ? b->T_dec : b->T;
    int64_t n = 0;
    if (b->B < 1 || b->T < 1 || !b->input_ids || !b->labels)
        return zt_fail(ZT_E_INVAL, "batch: need B >= 1, T >= 1, input_ids and labels");
    ZT_TRY(check_inputs(c, b));
    for (int i = 0; i < b->B * Td; i++) {
        int r = i / Td, t = i % Td;
        if (b->labels[i] != -100 && (b->labels[i] < 0 || b->labels[i] >= c->vocab))
            return zt_fail(ZT_E_RANGE,
                           "batch: labels[%d][%d] = %lld is neither -100 nor in [0, %d)", r, t,
                           (long long)b->labels[i], c->vocab);
        if (b->decoder_attention_mask && b->decoder_attention_mask[i] != 0 &&
            b->decoder_attention_mask[i] != 1)
            return zt_fail(ZT_E_RANGE, "batch: decoder_attention_mask[%d][%d] = %lld is not 0 "
                           "or 1", r, t, (long long)b->decoder_attention_mask[i]);
        n += b->labels[i] != -100;
    }
    ZT_TRY(size_acts(m, b->B, b->T, Td));
    m->B = b->B;
    m->Te = b->T;
    m->Td = Td;
    m->keep_logits = keep_logits;
    m->evaluated = 0;
    m->ids = b->input_ids;
    m->mask = b->attention_mask;
    m->dmask = b->decoder_attention_mask;
    m->labels = b->labels;
    m->first_sample = b->first_sample;
    m->compact = !keep_logits;
    set_rows(m, b);
    const int32_t *cd = m->cu[1];
    for (int r = 0; r < b->B; r++) /* decoder input: labels shifted right, -100 -> pad */
        for (int t = 0; t < cd[r + 1] - cd[r]; t++) {
            int64_t v = t == 0 ? c->dec_start : b->labels[(size_t)r * Td + t - 1];
            m->dec_ids[cd[r] + t] = v == -100 ? c->pad : v;
        }
    m->n_lab = 0;
    if (m->compact) /* (a labelled position is inside its sample's rows) */
        for (int i = 0; i < b->B * Td; i++)
            if (b->labels[i] != -100) {
                m->lab_rows[m->n_lab] = cd[i / Td] + i % Td;
                m->lab_c[m->n_lab++] = b->labels[i];
            }
    ZT_TRY(zt_lm_rows_size(&m->lm, m->compact ? (size_t)m->n_lab : (size_t)b->B * Td,
                           (size_t)b->B * Td, c->vocab, c->d_model, keep_logits, x_es(m->dt)));
    *n_labels = n;
    return 0;
}

/* ---- forward ----------------------------------------------------------------------------- */

static const void *block_input(const t5_model *m, int u)
{
    if (u == 1)
        return m->e_enc;
    if (u == m->Le + 2)
        return m->e_dec;
    return m->la[blk(m, u) - 1].y;
}

/* the attention core of block u: self (and cross) probabilities and contexts */
static void block_attention(t5_model *m, int u, blk_acts *a)
{
    int dec = is_dec(m, u), T = dec ? m->Td : m->Te, H = m->c.heads, D = m->c.d_kv;
    zt_dropout da = drop_for(m, u, ZT_RNG_DROP_ATT);
    if (m->packed)
        xmha_forward_packed(m->dt, a->ctx, a->att, a->q, a->k, a->v, m->pb[dec], dec,
                            m->cu[dec], NULL, 1.0f, &da, m->att_scratch, m->slots, m->B, T, T,
                            H, D);
    else
        xmha_forward(m->dt, a->ctx, a->att, a->q, a->k, a->v, m->pb[dec],
                     dec ? m->dmask : m->mask, dec, 1.0f, &da, m->att_scratch, m->slots, m->B,
                     T, T, H, D);
    POLL(m);
}

static void cross_attention(t5_model *m, int u, blk_acts *a)
{
    zt_dropout dc = drop_for(m, u, ZT_RNG_DROP_ATT2);
    if (m->packed)
        xmha_forward_packed(m->dt, a->cctx, a->catt, a->cq, a->ck, a->cv, NULL, 0, m->cu[1],
                            m->cu[0], 1.0f, &dc, m->att_scratch, m->slots, m->B, m->Td, m->Te,
                            m->c.heads, m->c.d_kv);
    else
        xmha_forward(m->dt, a->cctx, a->catt, a->cq, a->ck, a->cv, NULL, m->mask, 0, 1.0f, &dc,
                     m->att_scratch, m->slots, m->B, m->Td, m->Te, m->c.heads, m->c.d_kv);
    POLL(m);
}

/* the feed-forward's hidden activations from h0 (and h1): g = drop(act(h0) [* h1]) */
static void ff_hidden(t5_model *m, int u, blk_acts *a, int M)
{
    size_t nf = (size_t)M * m->c.d_ff;
    zt_dropout dm = drop_for(m, u, ZT_RNG_DROP_FFMID);
    if (m->c.gated) {
        xact_forward(m->dt, m->c.act, a->a0, a->h0, nf);
        xmul_forward(m->dt, a->g, a->a0, a->h1, nf);
    } else {
        xact_forward(m->dt, m->c.act, a->g, a->h0, nf);
    }
    drop_rows(m, is_dec(m, u), a->g, NULL, &dm, (size_t)m->c.d_ff);
    POLL(m);
}

/* the first block's relative-bias table [buckets, H] as fp32 (half precision: widened) */
static const float *rel_table(t5_model *m, void *const *P, int u)
{
    if (m->dt < 0)
        return bp(m, P, u, B_REL);
    zt_half_widen(m->dt, m->tab, bp(m, P, u, B_REL), (size_t)m->c.buckets * m->c.heads);
    return m->tab;
}

static void block_forward(t5_model *m, int u, void *const *P)
{
    const t5_config *c = &m->c;
    int dec = is_dec(m, u), T = dec ? m->Td : m->Te, M = dec ? m->Md : m->Me, Me = m->Me;
    int C = c->d_model, I = m->I, F = c->d_ff, dt = m->dt;
    blk_acts *a = &m->la[blk(m, u)];
    const void *x = block_input(m, u);
    zt_dropout d1 = drop_for(m, u, ZT_RNG_DROP_ATTOUT), d2 = drop_for(m, u, ZT_RNG_DROP_FFOUT);
    if (first_of_stack(m, u)) {
        posbias_forward(m->pb[dec], rel_table(m, P, u), !dec, c->buckets, c->max_dist, T, T,
                        c->heads);
        POLL(m);
    }
    xrmsnorm_forward(dt, a->n1, a->r1, x, bp(m, P, u, B_LN0), M, C, c->eps, XS(m));
    xlinear_forward(dt, a->q, a->n1, bp(m, P, u, B_Q), NULL, M, C, I, FS(m));
    POLL(m);
    xlinear_forward(dt, a->k, a->n1, bp(m, P, u, B_K), NULL, M, C, I, FS(m));
    POLL(m);
    xlinear_forward(dt, a->v, a->n1, bp(m, P, u, B_V), NULL, M, C, I, FS(m));
    POLL(m);
    block_attention(m, u, a);
    xlinear_forward(dt, a->x1, a->ctx, bp(m, P, u, B_O), NULL, M, I, C, FS(m));
    POLL(m);
    drop_rows(m, dec, a->x1, x, &d1, (size_t)C);
    xclamp_f16(dt, a->x1, (size_t)M * C); /* fp16: transformers' T5Block clamp */
    const void *xf = a->x1;
    if (dec) {
        zt_dropout dc = drop_for(m, u, ZT_RNG_DROP_CROSSOUT);
        xrmsnorm_forward(dt, a->n2, a->r2, a->x1, bp(m, P, u, B_LN1), M, C, c->eps, XS(m));
        xlinear_forward(dt, a->cq, a->n2, bp(m, P, u, B_CQ), NULL, M, C, I, FS(m));
        POLL(m);
        xlinear_forward(dt, a->ck, m->enc_out, bp(m, P, u, B_CK), NULL, Me, C, I, FS(m));
        POLL(m);
        xlinear_forward(dt, a->cv, m->enc_out, bp(m, P, u, B_CV), NULL, Me, C, I, FS(m));
        POLL(m);
        cross_attention(m, u, a);
        xlinear_forward(dt, a->x2, a->cctx, bp(m, P, u, B_CO), NULL, M, I, C, FS(m));
        POLL(m);
        drop_rows(m, dec, a->x2, a->x1, &dc, (size_t)C);
        xclamp_f16(dt, a->x2, (size_t)M * C);
        xf = a->x2;
    }
    xrmsnorm_forward(dt, a->n3, a->r3, xf, bp(m, P, u, B_LNF), M, C, c->eps, XS(m));
    xlinear_forward(dt, a->h0, a->n3, bp(m, P, u, B_WI), NULL, M, C, F, FS(m));
    POLL(m);
    if (c->gated) {
        xlinear_forward(dt, a->h1, a->n3, bp(m, P, u, B_WI1), NULL, M, C, F, FS(m));
        POLL(m);
    }
    ff_hidden(m, u, a, M);
    xlinear_forward(dt, a->y, a->g, bp(m, P, u, B_WO), NULL, M, F, C, FS(m));
    POLL(m);
    drop_rows(m, dec, a->y, xf, &d2, (size_t)C);
    xclamp_f16(dt, a->y, (size_t)M * C);
}

/* ---- generation ---------------------------------------------------------------------------- */

/* a decode pass's product of R rows (no bias): unpacked for few rows, OpenBLAS's otherwise */
static void gen_linear(float *out, const float *inp, const float *w, int R, int K, int N)
{
    if (R <= 64)
        linear_decode_forward(out, inp, w, R, K, N);
    else
        linear_forward(out, inp, w, NULL, R, K, N);
}

/* decoder block u at position t of every row: the residual stream g->x in place */
static void gen_block(t5_model *m, int u, float *const *P)
{
    t5_gen *g = &m->g;
    const t5_config *c = &m->c;
    int R = g->R, C = c->d_model, I = m->I, F = c->d_ff, H = c->heads, D = c->d_kv;
    int t = g->t, S = g->S, Te = m->Te, j = blk(m, u) - m->Le, cap = S > Te ? S : Te;
    size_t nr = (size_t)R * C;
    if (first_of_stack(m, u)) { /* position t's biases, shared by the stack's blocks */
        const float *tab = fbp(m, P, u, B_REL);
        for (int k = 0; k <= t; k++) {
            const float *row = tab + (size_t)t5_bucket(k - t, 0, c->buckets, c->max_dist) * H;
            for (int h = 0; h < H; h++)
                g->pb[(size_t)h * S + k] = row[h];
        }
    }
    if (g->on == 1) { /* the cross-attention keys and values, once */
        const float *enc = m->dt < 0 ? (const float *)m->enc_out : g->enc;
        linear_forward(g->ck[j], enc, fbp(m, P, u, B_CK), NULL, m->B * Te, C, I);
        POLL(m);
        linear_forward(g->cv[j], enc, fbp(m, P, u, B_CV), NULL, m->B * Te, C, I);
        POLL(m);
    }
    rmsnorm_forward(g->n, g->r, g->x, fbp(m, P, u, B_LN0), R, C, c->eps);
    gen_linear(g->q, g->n, fbp(m, P, u, B_Q), R, C, I);
    gen_linear(g->kk, g->n, fbp(m, P, u, B_K), R, C, I);
    gen_linear(g->vv, g->n, fbp(m, P, u, B_V), R, C, I);
    for (int r = 0; r < R; r++) {
        size_t at = ((size_t)r * S + t) * I;
        memcpy(g->k[j] + at, g->kk + (size_t)r * I, sizeof(float) * (size_t)I);
        memcpy(g->v[j] + at, g->vv + (size_t)r * I, sizeof(float) * (size_t)I);
    }
    mha_decode_forward(g->ctx, g->q, g->k[j], g->v[j], (size_t)S * I, 1, g->pb, 0, (size_t)S, t + 1, R,
               H, D, g->scr, cap, m->slots);
    gen_linear(g->o, g->ctx, fbp(m, P, u, B_O), R, I, C);
    add_into(g->x, g->o, nr);
    POLL(m);
    rmsnorm_forward(g->n, g->r, g->x, fbp(m, P, u, B_LN1), R, C, c->eps);
    gen_linear(g->q, g->n, fbp(m, P, u, B_CQ), R, C, I);
    mha_decode_forward(g->ctx, g->q, g->ck[j], g->cv[j], (size_t)Te * I, g->per, g->cmask, (size_t)Te,
               0, Te, R, H, D, g->scr, cap, m->slots);
    gen_linear(g->o, g->ctx, fbp(m, P, u, B_CO), R, I, C);
    add_into(g->x, g->o, nr);
    POLL(m);
    rmsnorm_forward(g->n, g->r, g->x, fbp(m, P, u, B_LNF), R, C, c->eps);
    gen_linear(g->h0, g->n, fbp(m, P, u, B_WI), R, C, F);
    if (c->gated) {
        gen_linear(g->h1, g->n, fbp(m, P, u, B_WI1), R, C, F);
        act_forward(c->act, g->a0, g->h0, (size_t)R * F);
        mul_forward(g->g, g->a0, g->h1, (size_t)R * F);
    } else {
        act_forward(c->act, g->g, g->h0, (size_t)R * F);
    }
    gen_linear(g->o, g->g, fbp(m, P, u, B_WO), R, F, C);
    add_into(g->x, g->o, nr);
    POLL(m);
}

/* the encoder's units of a generation pass (the first pass only; every pass embeds its
 * tokens), on the parameters as they are */
static void gen_encode_unit(t5_model *m, int u, void *const *P)
{
    t5_gen *g = &m->g;
    const t5_config *c = &m->c;
    int C = c->d_model, Me = m->B * m->Te;
    if (u == 0) {
        if (g->on == 1)
            xlookup_forward(m->dt, m->e_enc, m->ids, param(m, P, 0, 0), Me, C);
        xwiden_rows(m->dt, g->x, param(m, P, 0, 0), g->tok, g->R, C);
    } else if (g->on == 1 && is_block(m, u)) {
        block_forward(m, u, P); /* (dropout off: evaluating) */
    } else if (g->on == 1) {
        xrmsnorm_forward(m->dt, m->enc_out, m->r_ef, m->la[m->Le - 1].y, param(m, P, u, 0), Me,
                         C, c->eps, XS(m));
        if (m->dt >= 0)
            zt_half_widen(m->dt, g->enc, m->enc_out, (size_t)Me * C);
    }
    POLL(m);
}

/* the decoder's units of a generation pass, on fp32 parameters (half precision: views) */
static void gen_forward_unit(t5_model *m, int u, float *const *P)
{
    t5_gen *g = &m->g;
    const t5_config *c = &m->c;
    int C = c->d_model;
    if (is_block(m, u)) {
        gen_block(m, u, P);
    } else {
        const float *w = c->tie ? fparam(m, P, 0, 0) : fparam(m, P, u, 1);
        rmsnorm_forward(g->n, g->r, g->x, fparam(m, P, u, 0), g->R, C, c->eps);
        if (c->tie)
            scale_inplace(g->n, (float)pow((double)C, -0.5), (size_t)g->R * C);
        gen_linear(g->logits, g->n, w, g->R, C, c->vocab);
    }
    POLL(m);
}

/* every piece of the generation arena (counting when cv->base is NULL) */
static void gen_carve(t5_model *m, zt_carver *cv, t5_gen *g)
{
    size_t R = (size_t)g->R, S = (size_t)g->S, I = (size_t)m->I, C = (size_t)m->c.d_model;
    size_t F = (size_t)m->c.d_ff, Me = (size_t)m->B * m->Te, Te = (size_t)m->Te;
    size_t cap = S > Te ? S : Te;
    g->tok = zt_take(cv, R * 2);
    for (int j = 0; j < m->Ld; j++) {
        g->k[j] = zt_take(cv, R * S * I);
        g->v[j] = zt_take(cv, R * S * I);
        g->ck[j] = zt_take(cv, Me * I);
        g->cv[j] = zt_take(cv, Me * I);
    }
    g->x = zt_take(cv, R * C); g->n = zt_take(cv, R * C); g->r = zt_take(cv, R);
    g->q = zt_take(cv, R * I); g->kk = zt_take(cv, R * I); g->vv = zt_take(cv, R * I);
    g->ctx = zt_take(cv, R * I); g->o = zt_take(cv, R * C);
    g->h0 = zt_take(cv, R * F); g->h1 = zt_take(cv, R * F); g->a0 = zt_take(cv, R * F);
    g->g = zt_take(cv, R * F);
    g->logits = zt_take(cv, R * (size_t)m->c.vocab);
    g->pb = zt_take(cv, (size_t)m->c.heads * S);
    g->cmask = zt_take(cv, Me);
    g->tmp = zt_take(cv, R * S * I);
    g->scr = zt_take(cv, (size_t)m->slots * cap);
    g->enc = m->dt >= 0 ? zt_take(cv, Me * C) : NULL;
}

static void t5_gen_end(void *p)
{
    t5_model *m = p;
    t5_gen *g = &m->g;
    zt_mem_free_in(m->acct, g->arena, g->bytes, ZT_MEM_ACTIVATIONS);
    free(g->k);
    memset(g, 0, sizeof *g);
    zt_pview_free(&m->pv);
    zt_pview_init(&m->pv, -1, m->l, m->c.tie, m->acct);
}

static int t5_gen_begin(void *p, const zt_batch *b, int per, int steps)
{
    t5_model *m = p;
    t5_gen *g = &m->g;
    if (b->B < 1 || b->T < 1 || !b->input_ids || per < 1 || steps < 1)
        return zt_fail(ZT_E_INVAL, "generation: need B >= 1, T >= 1, input_ids, and at least "
                       "one row per input and one position");
    ZT_TRY(check_inputs(&m->c, b));
    t5_gen_end(m);
    ZT_TRY(size_acts(m, b->B, b->T, 1));
    if (m->dt >= 0) /* the decoder's units widened for the decode passes */
        ZT_TRY(zt_pview_init(&m->pv, m->dt, m->l, m->c.tie, m->acct));
    m->B = b->B;
    m->Te = b->T;
    m->Td = 1;
    m->ids = b->input_ids;
    m->mask = b->attention_mask;
    m->dmask = m->labels = NULL;
    m->keep_logits = m->evaluated = m->n_lab = 0;
    m->compact = 1;
    m->packed = 0; /* (the encoder's pass: padded, with the key mask) */
    m->Me = b->B * b->T;
    m->Md = b->B;
    m->eids = b->input_ids;
    m->first_sample = 0;
    if (!(g->k = calloc((size_t)m->Ld * 4 + 1, sizeof *g->k)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    g->v = g->k + m->Ld;
    g->ck = g->v + m->Ld;
    g->cv = g->ck + m->Ld;
    g->R = b->B * per;
    g->per = per;
    g->S = steps;
    zt_carver cv = {NULL, 0};
    gen_carve(m, &cv, g);
    if (!(g->arena = zt_mem_alloc_in(m->acct, cv.off, ZT_ALIGN_PAGE, ZT_MEM_ACTIVATIONS))) {
        t5_gen_end(m);
        return zt_fail(ZT_E_NOMEM, "out of memory for generation's caches (%.1f MiB)",
                       (double)cv.off / 1048576.0);
    }
    g->bytes = cv.off;
    cv = (zt_carver){g->arena, 0};
    gen_carve(m, &cv, g);
    for (int i = 0; i < b->B * b->T; i++)
        g->cmask[i] = b->attention_mask && b->attention_mask[i] == 0 ? -FLT_MAX : 0.0f;
    for (int r = 0; r < g->R; r++)
        g->tok[r] = m->c.dec_start;
    g->t = 0;
    g->on = 1;
    return 0;
}

static int t5_gen_next(void *p, const int64_t *tokens)
{
    t5_model *m = p;
    t5_gen *g = &m->g;
    if (!g->on || g->t + 1 >= g->S)
        return zt_fail(ZT_E_INVAL, "generation: %s", g->on ? "the caches are full" : "not begun");
    for (int r = 0; r < g->R; r++) {
        if (tokens[r] < 0 || tokens[r] >= m->c.vocab)
            return zt_fail(ZT_E_RANGE, "generation: token %lld of row %d is outside [0, %d)",
                           (long long)tokens[r], r, m->c.vocab);
        g->tok[r] = tokens[r];
    }
    g->t++;
    g->on = 2;
    return 0;
}

static void t5_gen_reorder(void *p, const int *src)
{
    t5_model *m = p;
    t5_gen *g = &m->g;
    size_t row = (size_t)g->S * m->I, n = sizeof(float) * (size_t)(g->t + 1) * m->I;
    int same = 1;
    for (int r = 0; r < g->R; r++)
        same &= src[r] == r;
    if (same)
        return;
    /* only the rows that change are written; a row another one reads before it is
     * overwritten is saved first (beams keep their own rows or take a sibling's) */
    unsigned char *saved = calloc((size_t)g->R, 1);
    for (int r = 0; saved && r < g->R; r++)
        if (src[r] != r && src[src[r]] != src[r])
            saved[src[r]] = 1;
    for (int j = 0; j < 2 * m->Ld; j++) {
        float *c = j < m->Ld ? g->k[j] : g->v[j - m->Ld];
        if (!saved) { /* out of memory for the flags: every row through tmp */
            for (int r = 0; r < g->R; r++)
                memcpy(g->tmp + (size_t)r * row, c + (size_t)src[r] * row, n);
            for (int r = 0; r < g->R; r++)
                memcpy(c + (size_t)r * row, g->tmp + (size_t)r * row, n);
            continue;
        }
        for (int r = 0; r < g->R; r++)
            if (saved[r])
                memcpy(g->tmp + (size_t)r * row, c + (size_t)r * row, n);
        for (int r = 0; r < g->R; r++)
            if (src[r] != r)
                memcpy(c + (size_t)r * row,
                       (saved[src[r]] ? g->tmp : c) + (size_t)src[r] * row, n);
    }
    free(saved);
}

static const float *t5_gen_logits(const void *p, int *rows, int *V)
{
    const t5_model *m = p;
    *rows = m->g.R;
    *V = m->c.vocab;
    return m->g.on ? m->g.logits : NULL;
}

static void t5_forward(t5_model *m, int u, void *const *P)
{
    const t5_config *c = &m->c;
    int C = c->d_model, Me = m->Me, Md = m->Md, dt = m->dt;
    if (u == 0) {
        zt_dropout de = drop_for(m, 0, ZT_RNG_DROP_EMB), dd = drop_for(m, 0, ZT_RNG_DROP_DEC_EMB);
        xlookup_forward(dt, m->e_enc, m->eids, param(m, P, 0, 0), Me, C);
        drop_rows(m, 0, m->e_enc, NULL, &de, (size_t)C);
        xlookup_forward(dt, m->e_dec, m->dec_ids, param(m, P, 0, 0), Md, C);
        drop_rows(m, 1, m->e_dec, NULL, &dd, (size_t)C);
        POLL(m);
    } else if (is_block(m, u)) {
        block_forward(m, u, P);
    } else if (u == u_encf(m)) {
        zt_dropout df = drop_for(m, u, ZT_RNG_DROP_FINAL);
        xrmsnorm_forward(dt, m->enc_out, m->r_ef, m->la[m->Le - 1].y, param(m, P, u, 0), Me, C,
                         c->eps, XS(m));
        drop_rows(m, 0, m->enc_out, NULL, &df, (size_t)C);
        POLL(m);
    } else {
        zt_dropout df = drop_for(m, u, ZT_RNG_DROP_FINAL);
        const void *w = c->tie ? param(m, P, 0, 0) : param(m, P, u, 1);
        xrmsnorm_forward(dt, m->dec_out, m->r_df, m->la[m->Le + m->Ld - 1].y, param(m, P, u, 0),
                         Md, C, c->eps, XS(m));
        drop_rows(m, 1, m->dec_out, NULL, &df, (size_t)C);
        POLL(m);
        const void *rows = m->dec_out;
        int nr = Md;
        if (m->compact) {
            xgather_rows(dt, m->lm.x, m->dec_out, m->lab_rows, m->n_lab, C);
            rows = m->lm.x;
            nr = m->n_lab;
        }
        if (nr > 0) {
            if (c->tie) { /* the scaled copy is what the head multiplies */
                void *sc = m->compact ? m->lm.x : (void *)m->s[0];
                xscale(dt, sc, rows, (float)pow((double)C, -0.5), (size_t)nr * C);
                rows = sc;
            }
            if (m->compact) /* the labelled rows' logits: x */
                xlinear_forward(dt, m->lm.logits, rows, w, NULL, nr, C, c->vocab, FS(m));
            else /* every row's, kept: fp32 */
                xlinear_forward_f32(dt, m->lm.logits, rows, w, NULL, nr, C, c->vocab);
            POLL(m);
        }
    }
}

static void t5_recompute(t5_model *m, int u, void *const *P)
{
    if (m->mode[u] != ZT_KEEP_SELECTIVE) {
        t5_forward(m, u, P);
        return;
    }
    blk_acts *a = &m->la[blk(m, u)];
    block_attention(m, u, a);
    if (is_dec(m, u))
        cross_attention(m, u, a);
    ff_hidden(m, u, a, is_dec(m, u) ? m->Md : m->Me);
}

static double t5_loss(void *p, float grad_scale)
{
    t5_model *m = p;
    int64_t count;
    /* evaluating (train 0): no gradient, so that the logits (which it would overwrite when
     * they are not kept) stay for zt_engine_logits */
    void *d = m->train ? m->lm.dlogits : NULL;
    m->evaluated = !m->train;
    if (!m->compact)
        return crossentropy_forward_backward(d, m->row_loss, &count, m->lm.logits, m->labels,
                                             m->B * m->Td, m->c.vocab, grad_scale);
    if (!m->n_lab)
        return 0.0;
    double s = xcrossentropy_forward_backward(m->dt, d, m->row_loss, &count, m->lm.logits,
                                              m->lab_c, m->n_lab, m->c.vocab, grad_scale,
                                              m->xce, m->slots);
    if (m->evaluated && m->dt >= 0) /* the logits as zt_engine_logits gives them: fp32 */
        zt_lm_rows_widen(&m->lm, m->dt, (size_t)m->n_lab * (size_t)m->c.vocab);
    return s;
}

/* ---- backward ----------------------------------------------------------------------------- */

static void zero(float *x, size_t n) { memset(x, 0, n * sizeof(float)); }

/* the feed-forward sub-layer: dcur = d(its output) in, d(its input) out */
static void ff_backward(t5_model *m, int u, blk_acts *a, const void *xf, void *const *P,
                        float *const *G, int M)
{
    const t5_config *c = &m->c;
    int C = c->d_model, F = c->d_ff, dt = m->dt, dec = is_dec(m, u);
    size_t n = (size_t)M * C, nf = (size_t)M * F;
    zt_dropout d2 = drop_for(m, u, ZT_RNG_DROP_FFOUT), dm = drop_for(m, u, ZT_RNG_DROP_FFMID);
    float **s = m->s, **sf = m->sF;
    memcpy(s[0], m->dcur, n * sizeof(float));
    drop_back(m, dec, s[0], &d2, (size_t)C);
    zero(sf[0], nf);
    xlinear_backward(dt, sf[0], fbp(m, G, u, B_WO), NULL, s[0], a->g, bp(m, P, u, B_WO), M, F, C,
                     HS(m));
    POLL(m);
    drop_back(m, dec, sf[0], &dm, (size_t)F);
    zero(sf[1], nf);
    if (c->gated) { /* g = act(h0) * h1 */
        zero(sf[2], nf);
        zero(sf[3], nf);
        xmul_backward(dt, sf[2], sf[3], sf[0], a->a0, a->h1, nf);
        xact_backward(dt, c->act, sf[1], a->h0, sf[2], nf);
    } else {
        xact_backward(dt, c->act, sf[1], a->h0, sf[0], nf);
    }
    POLL(m);
    zero(s[1], n);
    xlinear_backward(dt, s[1], fbp(m, G, u, B_WI), NULL, sf[1], a->n3, bp(m, P, u, B_WI), M, C, F,
                     HS(m));
    POLL(m);
    if (c->gated) {
        xlinear_backward(dt, s[1], fbp(m, G, u, B_WI1), NULL, sf[3], a->n3, bp(m, P, u, B_WI1), M,
                         C, F, HS(m));
        POLL(m);
    }
    xrmsnorm_backward(dt, m->dcur, fbp(m, G, u, B_LNF), s[1], xf, a->r3, bp(m, P, u, B_LNF), M, C,
                      XS(m));
    POLL(m);
}

static void block_backward(t5_model *m, int u, void *const *P, float *const *G)
{
    const t5_config *c = &m->c;
    int dec = is_dec(m, u), T = dec ? m->Td : m->Te, M = dec ? m->Md : m->Me, Me = m->Me;
    int C = c->d_model, I = m->I, H = c->heads, D = c->d_kv, dt = m->dt;
    size_t n = (size_t)M * C, ni = (size_t)M * I;
    blk_acts *a = &m->la[blk(m, u)];
    const void *x = block_input(m, u);
    float **s = m->s, **sI = m->sI;
    ff_backward(m, u, a, dec ? a->x2 : a->x1, P, G, M);
    if (dec) { /* x2 = x1 + drop(o_c(cross(rms(x1), enc_out))) */
        zt_dropout dc = drop_for(m, u, ZT_RNG_DROP_CROSSOUT), d2 = drop_for(m, u, ZT_RNG_DROP_ATT2);
        memcpy(s[0], m->dcur, n * sizeof(float));
        drop_back(m, dec, s[0], &dc, (size_t)C);
        zero(sI[0], ni);
        xlinear_backward(dt, sI[0], fbp(m, G, u, B_CO), NULL, s[0], a->cctx, bp(m, P, u, B_CO), M,
                         I, C, HS(m));
        POLL(m);
        if (m->packed)
            xmha_backward_packed(dt, sI[1], sI[2], sI[3], NULL, sI[0], a->catt, a->cq, a->ck,
                                 a->cv, m->cu[1], m->cu[0], 1.0f, &d2, m->att_scratch, m->slots,
                                 m->B, T, m->Te, H, D);
        else
            xmha_backward(dt, sI[1], sI[2], sI[3], NULL, sI[0], a->catt, a->cq, a->ck, a->cv,
                          1.0f, &d2, m->att_scratch, m->slots, m->B, T, m->Te, H, D);
        POLL(m);
        zero(s[0], n);
        xlinear_backward(dt, s[0], fbp(m, G, u, B_CQ), NULL, sI[1], a->n2, bp(m, P, u, B_CQ), M,
                         C, I, HS(m));
        POLL(m);
        xlinear_backward(dt, m->d_enc, fbp(m, G, u, B_CK), NULL, sI[2], m->enc_out,
                         bp(m, P, u, B_CK), Me, C, I, HS(m));
        POLL(m);
        xlinear_backward(dt, m->d_enc, fbp(m, G, u, B_CV), NULL, sI[3], m->enc_out,
                         bp(m, P, u, B_CV), Me, C, I, HS(m));
        POLL(m);
        xrmsnorm_backward(dt, m->dcur, fbp(m, G, u, B_LN1), s[0], a->x1, a->r2,
                          bp(m, P, u, B_LN1), M, C, XS(m));
        POLL(m);
    }
    /* x1 = x + drop(o(self(rms(x)))) */
    zt_dropout d1 = drop_for(m, u, ZT_RNG_DROP_ATTOUT), da = drop_for(m, u, ZT_RNG_DROP_ATT);
    memcpy(s[0], m->dcur, n * sizeof(float));
    drop_back(m, dec, s[0], &d1, (size_t)C);
    zero(sI[0], ni);
    xlinear_backward(dt, sI[0], fbp(m, G, u, B_O), NULL, s[0], a->ctx, bp(m, P, u, B_O), M, I, C,
                     HS(m));
    POLL(m);
    if (m->packed)
        xmha_backward_packed(dt, sI[1], sI[2], sI[3], m->dpb[dec], sI[0], a->att, a->q, a->k,
                             a->v, m->cu[dec], NULL, 1.0f, &da, m->att_scratch, m->slots, m->B,
                             T, T, H, D);
    else
        xmha_backward(dt, sI[1], sI[2], sI[3], m->dpb[dec], sI[0], a->att, a->q, a->k, a->v,
                      1.0f, &da, m->att_scratch, m->slots, m->B, T, T, H, D);
    POLL(m);
    zero(s[0], n);
    xlinear_backward(dt, s[0], fbp(m, G, u, B_Q), NULL, sI[1], a->n1, bp(m, P, u, B_Q), M, C, I,
                     HS(m));
    POLL(m);
    xlinear_backward(dt, s[0], fbp(m, G, u, B_K), NULL, sI[2], a->n1, bp(m, P, u, B_K), M, C, I,
                     HS(m));
    POLL(m);
    xlinear_backward(dt, s[0], fbp(m, G, u, B_V), NULL, sI[3], a->n1, bp(m, P, u, B_V), M, C, I,
                     HS(m));
    POLL(m);
    xrmsnorm_backward(dt, m->dcur, fbp(m, G, u, B_LN0), s[0], x, a->r1, bp(m, P, u, B_LN0), M, C,
                      XS(m));
    POLL(m);
    if (first_of_stack(m, u)) {
        posbias_backward(fbp(m, G, u, B_REL), m->dpb[dec], !dec, c->buckets, c->max_dist, T, T,
                         H);
        POLL(m);
    }
}

static void t5_backward(t5_model *m, int u, void *const *P, float *const *G)
{
    const t5_config *c = &m->c;
    int C = c->d_model, Me = m->Me, Md = m->Md, H = c->heads, dt = m->dt;
    if (u == u_head(m)) { /* the first step of the backward pass */
        zt_dropout df = drop_for(m, u, ZT_RNG_DROP_FINAL);
        const void *w = c->tie ? param(m, P, 0, 0) : param(m, P, u, 1);
        float *dw = c->tie ? fparam(m, G, 0, 0) : fparam(m, G, u, 1);
        float sc = (float)pow((double)C, -0.5);
        zero(m->dpb[0], (size_t)H * m->Te * m->Te);
        zero(m->dpb[1], (size_t)H * m->Td * m->Td);
        zero(m->d_enc, (size_t)Me * C);
        zero(m->s[1], (size_t)Md * C);
        if (!m->compact) {
            /* the forward's scaled copy of dec_out is in s[0] when tied */
            xlinear_backward(dt, m->s[1], dw, NULL, m->lm.dlogits,
                             c->tie ? (const void *)m->s[0] : m->dec_out, w, Md, C, c->vocab,
                             HS(m));
            POLL(m);
        } else if (m->n_lab > 0) {
            zero(m->lm.dx, (size_t)m->n_lab * C);
            if (dt < 0)
                linear_backward(m->lm.dx, dw, NULL, m->lm.dlogits, m->lm.x, w, m->n_lab, C,
                                c->vocab);
            else /* (the gradient was rounded into the logits' place) */
                xlinear_backward_h(dt, m->lm.dx, dw, NULL, m->lm.dlogits, m->lm.x, w, m->n_lab,
                                   C, c->vocab);
            POLL(m);
            for (int i = 0; i < m->n_lab; i++)
                memcpy(m->s[1] + (size_t)m->lab_rows[i] * C, m->lm.dx + (size_t)i * C,
                       sizeof(float) * (size_t)C);
        }
        if (c->tie)
            scale_inplace(m->s[1], sc, (size_t)Md * C);
        drop_back(m, 1, m->s[1], &df, (size_t)C);
        zero(m->dcur, (size_t)Md * C);
        xrmsnorm_backward(dt, m->dcur, fparam(m, G, u, 0), m->s[1], m->la[m->Le + m->Ld - 1].y,
                          m->r_df, param(m, P, u, 0), Md, C, XS(m));
        POLL(m);
    } else if (is_block(m, u)) {
        block_backward(m, u, P, G);
    } else if (u == u_encf(m)) {
        zt_dropout df = drop_for(m, u, ZT_RNG_DROP_FINAL);
        /* dcur holds the decoder input's gradient: kept for unit 0 */
        memcpy(m->d_edec, m->dcur, sizeof(float) * (size_t)Md * C);
        drop_back(m, 0, m->d_enc, &df, (size_t)C);
        zero(m->dcur, (size_t)Me * C);
        xrmsnorm_backward(dt, m->dcur, fparam(m, G, u, 0), m->d_enc, m->la[m->Le - 1].y, m->r_ef,
                          param(m, P, u, 0), Me, C, XS(m));
        POLL(m);
    } else {
        zt_dropout de = drop_for(m, 0, ZT_RNG_DROP_EMB), dd = drop_for(m, 0, ZT_RNG_DROP_DEC_EMB);
        drop_back(m, 0, m->dcur, &de, (size_t)C);
        lookup_backward(fparam(m, G, 0, 0), m->dcur, m->eids, Me, C);
        drop_back(m, 1, m->d_edec, &dd, (size_t)C);
        lookup_backward(fparam(m, G, 0, 0), m->d_edec, m->dec_ids, Md, C);
        POLL(m);
    }
}

/* ---- plan, profile, misc ------------------------------------------------------------------ */

static int t5_set_recompute(void *p, const unsigned char *unit_mode, int k)
{
    t5_model *m = p;
    int nu = u_head(m) + 1;
    k = k >= 2 ? k : 0;
    unsigned char fwd[nu];
    for (int u = 0; u < nu; u++) /* forward only: each block keeps its output */
        fwd[u] = unit_mode[u] == ZT_KEEP_FORWARD ? ZT_KEEP_OUTPUT : unit_mode[u];
    unit_mode = fwd;
    for (int u = 0; u < nu; u++) {
        if (unit_mode[u] >= ZT_KEEP_MODES)
            return zt_fail(ZT_E_INVAL, "recomputation: unit %d: no mode %d", u, unit_mode[u]);
        if (k && is_block(m, u) && unit_mode[u] != ZT_KEEP_OUTPUT &&
            unit_mode[u] != ZT_KEEP_OFFLOAD)
            return zt_fail(ZT_E_INVAL, "recomputation in segments of %d: block %s must be "
                           "recomputed whole (it keeps more)", k, m->l->units[u].name);
    }
    if (memcmp(m->mode, unit_mode, (size_t)nu) != 0 || m->seg_k != k)
        free_acts(m);
    for (int u = 0; u < nu; u++)
        m->mode[u] = is_block(m, u) ? unit_mode[u] : ZT_KEEP_ALL;
    m->seg_k = k;
    m->last_rc[0] = m->last_rc[1] = -1;
    for (int u = 0; u < nu; u++)
        if (is_block(m, u) && m->mode[u] != ZT_KEEP_ALL)
            m->last_rc[is_dec(m, u)] = u;
    return 0;
}

/* Head, decoder blocks in reverse, encoder norm, encoder blocks in reverse, embeddings. A
 * recomputed block is recomputed right before its backward, a segment (its blocks in forward
 * order) before its last block's backward -- except each stack's last recomputed block
 * (segment): its stack's working sets still hold its forward. */
static int t5_backward_steps(const void *p, zt_step *st)
{
    const t5_model *m = p;
    int n = 0;
    st[n++] = (zt_step){ZT_STEP_BACKWARD, u_head(m)};
    for (int dec = 1; dec >= 0; dec--) {
        int L = stack_len(m, dec), k = m->seg_k >= 2 ? seg_k_of(m, dec) : 0;
        for (int i = L - 1; i >= 0; i--) {
            int u = stack_unit(m, dec, i);
            if (k && seg_end(L, k, i) && i != L - 1)
                for (int j = seg_start(k, i); j <= i; j++)
                    st[n++] = (zt_step){ZT_STEP_RECOMPUTE, stack_unit(m, dec, j)};
            else if (!k && m->mode[u] != ZT_KEEP_ALL && u != m->last_rc[dec])
                st[n++] = (zt_step){ZT_STEP_RECOMPUTE, u};
            st[n++] = (zt_step){ZT_STEP_BACKWARD, u};
        }
        if (dec)
            st[n++] = (zt_step){ZT_STEP_BACKWARD, u_encf(m)};
    }
    st[n++] = (zt_step){ZT_STEP_BACKWARD, 0};
    return n;
}

static void *t5_checkpoint(void *p, int u, size_t *bytes)
{
    t5_model *m = p;
    if (!is_block(m, u) || !m->arena || m->slot_of[blk(m, u)] < 0)
        return NULL;
    *bytes = (size_t)m->cap_b * (size_t)(is_dec(m, u) ? m->cap_td : m->cap_te) *
             (size_t)m->c.d_model * x_es(m->dt);
    return m->la[blk(m, u)].y;
}

/* a batch's sizes for its FLOPs: the rows of each stack, the score pairs of the encoder's
 * and the decoder's self-attention and of the cross-attention, summed over the samples */
typedef struct rowsum {
    double Me, Md, ee, dd, de;
} rowsum;

static rowsum padded_rows(double B, double Te, double Td)
{
    return (rowsum){B * Te, B * Td, B * Te * Te, B * Td * Td, B * Td * Te};
}

/* forward matrix-product FLOPs of block u (all) or its attention cores (selective) */
static double block_flops(const t5_model *m, const rowsum *r, int u, int mode)
{
    double C = m->c.d_model, I = m->I, F = m->c.d_ff * (m->c.gated ? 1.5 : 1.0);
    int dec = is_dec(m, u);
    double M = dec ? r->Md : r->Me, core = 2.0 * 2.0 * (dec ? r->dd : r->ee) * I;
    if (dec)
        core += 2.0 * 2.0 * r->de * I;
    if (mode == ZT_KEEP_SELECTIVE)
        return core;
    double lin = 2.0 * M * (4.0 * C * I + 2.0 * C * F);
    if (dec)
        lin += 2.0 * M * 2.0 * C * I + 2.0 * r->Me * 2.0 * C * I;
    return lin + core;
}

static double t5_recompute_flops(const void *p, int B, int T, int u, int mode)
{
    const t5_model *m = p;
    rowsum r = padded_rows(B, T, T);
    if (!is_block(m, u) || mode == ZT_KEEP_ALL)
        return 0.0;
    return block_flops(m, &r, u, mode);
}

static size_t t5_recompute_bytes(const void *p, int u)
{
    const t5_model *m = p;
    dims d = {(size_t)m->B, (size_t)m->Te, (size_t)m->Td, (size_t)m->c.d_model, (size_t)m->I,
              (size_t)m->c.d_ff, (size_t)m->c.heads, x_es(m->dt), m->c.gated};
    if (!is_block(m, u) || m->mode[u] == ZT_KEEP_ALL)
        return 0;
    return block_bytes(m->mode[u] == ZT_KEEP_SELECTIVE ? P_RECOMP : P_ALL, &d, is_dec(m, u));
}

static double t5_flops(const void *p)
{
    const t5_model *m = p;
    double fwd = 0.0, rows = m->compact ? (double)m->n_lab : (double)m->B * m->Td;
    rowsum r = padded_rows(m->B, m->Te, m->Td);
    if (m->packed) { /* the samples' own lengths */
        r = (rowsum){m->Me, m->Md, 0.0, 0.0, 0.0};
        for (int b = 0; b < m->B; b++) {
            double le = m->cu[0][b + 1] - m->cu[0][b], ld = m->cu[1][b + 1] - m->cu[1][b];
            r.ee += le * le;
            r.dd += ld * ld;
            r.de += ld * le;
        }
    }
    for (int u = 0; u <= u_head(m); u++)
        if (is_block(m, u))
            fwd += block_flops(m, &r, u, ZT_KEEP_ALL);
    fwd += 2.0 * rows * m->c.d_model * m->c.vocab;
    return 3.0 * fwd;
}

static const float *t5_logits(const void *p, int64_t shape[3])
{
    const t5_model *m = p;
    if (!m->keep_logits && !m->evaluated)
        return NULL;
    if (!m->keep_logits) { /* evaluated: the labelled positions' rows, in order */
        shape[0] = 1;
        shape[1] = m->n_lab;
        shape[2] = m->c.vocab;
        return m->dt < 0 ? m->lm.logits : m->lm.wide;
    }
    shape[0] = m->B;
    shape[1] = m->Td;
    shape[2] = m->c.vocab;
    return m->lm.logits;
}

static void t5_set_train(void *p, int train) { ((t5_model *)p)->train = train; }

static void t5_set_poll(void *p, void (*fn)(void *), void *arg)
{
    ((t5_model *)p)->poll = fn;
    ((t5_model *)p)->poll_arg = arg;
}

/* the tied head multiplies by the shared embedding of unit 0 */
static int t5_tied_unit(const void *p, int u)
{
    const t5_model *m = p;
    return u == u_head(m) && m->c.tie ? 0 : -1;
}

/* the engine's calls. Generation's decode passes run the decoder on fp32 views. */
static void t5_forward_unit(void *p, int u, void *const *P)
{
    t5_model *m = p;
    if (!m->g.on)
        t5_forward(m, u, P);
    else if (u == 0 || u <= u_encf(m))
        gen_encode_unit(m, u, P);
    else
        gen_forward_unit(m, u, zt_pview_of(&m->pv, P, u, t5_tied_unit(m, u)));
}

static void t5_recompute_unit(void *p, int u, void *const *P)
{
    t5_recompute(p, u, P);
}

static void t5_backward_unit(void *p, int u, void *const *P, float *const *G)
{
    t5_backward(p, u, P, G);
}

const zt_model_ops t5_ops = {
    .set_train = t5_set_train,
    .set_poll = t5_set_poll,
    .flops = t5_flops,
    .act_bytes = t5_act_bytes,
    .set_recompute = t5_set_recompute,
    .recompute_flops = t5_recompute_flops,
    .backward_steps = t5_backward_steps,
    .recompute_unit = t5_recompute_unit,
    .recompute_bytes = t5_recompute_bytes,
    .checkpoint = t5_checkpoint,
    .tied_unit = t5_tied_unit,
    .prepare = t5_prepare,
    .forward_unit = t5_forward_unit,
    .loss = t5_loss,
    .backward_unit = t5_backward_unit,
    .logits = t5_logits,
    .gen_begin = t5_gen_begin,
    .gen_next = t5_gen_next,
    .gen_reorder = t5_gen_reorder,
    .gen_logits = t5_gen_logits,
    .gen_end = t5_gen_end,
    .destroy = t5_destroy,
};
