/* test_api.c - the public engine API: Hugging Face checkpoint variants (tied duplicates,
 * legacy names, F16/BF16, sharded index), clear errors for bad configs, checkpoints and
 * batches, save/load round trip, determinism (seed, threads), clipping, API misuse,
 * non-finite parameters neither saved nor checkpointed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerotrain.h"
#include "zerotrain_faults.h"
#include "tmpdir.h"

static char tmpdir[256];
static char logbuf[4096];

static const char *fixture(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(d, sizeof d, "%s/bert-tiny", f ? f : "tests/fixtures");
    return d;
}

static void capture_log(int level, const char *msg, void *user)
{
    (void)user;
    if (level <= ZT_LOG_WARN)
        snprintf(logbuf + strlen(logbuf), sizeof logbuf - strlen(logbuf), "%s\n", msg);
}

static int setup(void **state)
{
    (void)state;
    tmpdir_make(tmpdir, sizeof tmpdir, "zt_api");
    zt_log_set(capture_log, NULL, ZT_LOG_WARN);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove(tmpdir);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void copy_config(const char *dir)
{
    char cmd[2048];
    mkdir(dir, 0755);
    snprintf(cmd, sizeof cmd, "cp '%s/config.json' '%s/'", fixture(), dir);
    assert_int_equal(system(cmd), 0);
}

static zt_engine *open_dir(const char *dir, int expect_rc)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_config_init(&c);
    c.model_dir = dir;
    int rc = zt_engine_create(&c, MPI_COMM_NULL, &e);
    if (rc != expect_rc)
        fail_msg("create(%s) = %d (%s), expected %d", dir, rc, zt_last_error(), expect_rc);
    return e;
}

static float *param(zt_engine *e, const char *name, size_t *n)
{
    for (int i = 0; i < zt_engine_param_count(e); i++) {
        zt_param_info pi;
        zt_engine_param_get(e, i, &pi);
        if (strcmp(pi.name, name) == 0) {
            float *p = malloc(pi.numel * sizeof(float));
            if (zt_engine_read_param(e, name, p, pi.numel) != 0)
                fail_msg("%s: %s", name, zt_last_error());
            *n = pi.numel;
            return p;
        }
    }
    fail_msg("no parameter %s", name);
    return NULL;
}

/* all parameters of a and b are bit-identical */
static void assert_same_params(zt_engine *a, zt_engine *b)
{
    assert_int_equal(zt_engine_param_count(a), zt_engine_param_count(b));
    for (int i = 0; i < zt_engine_param_count(a); i++) {
        zt_param_info pi;
        size_t n1, n2;
        zt_engine_param_get(a, i, &pi);
        float *x = param(a, pi.name, &n1), *y = param(b, pi.name, &n2);
        assert_int_equal(n1, n2);
        if (memcmp(x, y, n1 * sizeof(float)) != 0)
            fail_msg("parameter %s differs", pi.name);
        free(x);
        free(y);
    }
}

/* Rewrites the fixture's weights with a per-tensor transformation into dir. */
typedef int (*rewrite_fn)(const zt_tensor_info *t, zt_tensor_view *out, void **owned, int *extra);

static void rewrite(const char *dir, const char *file, rewrite_fn fn)
{
    char src[1024], dst[1200];
    zt_safetensors *f;
    snprintf(src, sizeof src, "%s/model.safetensors", fixture());
    assert_int_equal(zt_safetensors_open(src, &f), 0);
    int n = zt_safetensors_count(f), nv = 0;
    zt_tensor_view *v = calloc((size_t)n + 8, sizeof *v);
    void **owned = calloc((size_t)n + 8, sizeof *owned);
    for (int i = 0; i < n; i++) {
        zt_tensor_info t;
        int extra = 0;
        zt_safetensors_get(f, i, &t);
        if (fn(&t, &v[nv], &owned[nv], &extra))
            nv += 1 + extra;
    }
    copy_config(dir);
    snprintf(dst, sizeof dst, "%s/%s", dir, file);
    if (zt_safetensors_write(dst, v, nv, NULL, 0) != 0)
        fail_msg("write %s: %s", dst, zt_last_error());
    for (int i = 0; i < nv; i++) {
        free(owned[i]);
        if (v[i].name && strncmp(v[i].name, "x:", 2) == 0)
            free((char *)v[i].name);
    }
    free(v);
    free(owned);
    zt_safetensors_close(f);
}

static zt_tensor_view view_of(const zt_tensor_info *t, const char *name, const void *data,
                              zt_dtype dt)
{
    zt_tensor_view v = {name, dt, t->ndim, {0}, data};
    memcpy(v.shape, t->shape, sizeof v.shape);
    return v;
}

static int keep_all(const zt_tensor_info *t, zt_tensor_view *o, void **owned, int *extra)
{
    (void)owned; (void)extra;
    *o = view_of(t, t->name, t->data, t->dtype);
    return 1;
}

/* HF BertForPreTraining style: tied duplicates, pooler, NSP head, legacy gamma/beta */
static int hf_style(const zt_tensor_info *t, zt_tensor_view *o, void **owned, int *extra)
{
    static char names[64][160];
    static int k;
    const char *name = t->name;
    if (strcmp(name, "bert.embeddings.LayerNorm.weight") == 0)
        name = "bert.embeddings.LayerNorm.gamma";
    else if (strcmp(name, "bert.embeddings.LayerNorm.bias") == 0)
        name = "bert.embeddings.LayerNorm.beta";
    *o = view_of(t, name, t->data, t->dtype);
    (void)owned;
    if (strcmp(t->name, "bert.embeddings.word_embeddings.weight") == 0) {
        o[1] = view_of(t, "cls.predictions.decoder.weight", t->data, t->dtype);
        o[2] = view_of(t, "bert.pooler.dense.weight", t->data, t->dtype); /* shape irrelevant */
        *extra = 2;
    } else if (strcmp(t->name, "cls.predictions.bias") == 0) {
        o[1] = view_of(t, "cls.predictions.decoder.bias", t->data, t->dtype);
        snprintf(names[k], sizeof names[k], "cls.seq_relationship.bias");
        o[2] = view_of(t, names[k++ % 64], t->data, t->dtype);
        *extra = 2;
    }
    return 1;
}

static void test_hf_variants(void **state)
{
    char dir[512];
    (void)state;
    zt_engine *ref = open_dir(fixture(), 0);
    snprintf(dir, sizeof dir, "%s/hf", tmpdir);
    rewrite(dir, "model.safetensors", hf_style);
    logbuf[0] = '\0';
    zt_engine *e = open_dir(dir, 0);
    assert_same_params(ref, e);
    /* the tied duplicates are reported as aliases of the parameters they tie */
    zt_param_info pi;
    zt_engine_param_get(e, 0, &pi);
    assert_string_equal(pi.name, "bert.embeddings.word_embeddings.weight");
    assert_non_null(pi.alias);
    assert_string_equal(pi.alias, "cls.predictions.decoder.weight");
    zt_engine_destroy(e);
    zt_engine_destroy(ref);
}

static uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

static int as_half(const zt_tensor_info *t, zt_tensor_view *o, void **owned, int bf)
{
    uint16_t *h = malloc(t->numel * 2);
    const float *src = t->data;
    for (size_t i = 0; i < t->numel; i++) {
        float x;
        memcpy(&x, src + i, 4);
        if (bf) {
            h[i] = to_bf16(x);
        } else {
            _Float16 f = (_Float16)x;
            memcpy(&h[i], &f, 2);
        }
    }
    *owned = h;
    *o = view_of(t, t->name, h, bf ? ZT_BF16 : ZT_F16);
    return 1;
}
static int to_f16(const zt_tensor_info *t, zt_tensor_view *o, void **ow, int *x)
{
    (void)x;
    return as_half(t, o, ow, 0);
}
static int to_bf(const zt_tensor_info *t, zt_tensor_view *o, void **ow, int *x)
{
    (void)x;
    return as_half(t, o, ow, 1);
}

static void test_half_precision(void **state)
{
    char dir[512];
    size_t n, m;
    (void)state;
    zt_engine *ref = open_dir(fixture(), 0);
    float *w = param(ref, "bert.encoder.layer.1.output.dense.weight", &n);
    for (int bf = 0; bf < 2; bf++) {
        snprintf(dir, sizeof dir, "%s/%s", tmpdir, bf ? "bf16" : "f16");
        rewrite(dir, "model.safetensors", bf ? to_bf : to_f16);
        zt_engine *e = open_dir(dir, 0);
        float *h = param(e, "bert.encoder.layer.1.output.dense.weight", &m);
        for (size_t i = 0; i < n; i++) {
            float want;
            if (bf) {
                uint32_t u = (uint32_t)to_bf16(w[i]) << 16;
                memcpy(&want, &u, 4);
            } else {
                want = (float)(_Float16)w[i];
            }
            if (h[i] != want)
                fail_msg("%s element %zu: got %g expected %g", bf ? "BF16" : "F16", i, h[i], want);
        }
        free(h);
        zt_engine_destroy(e);
    }
    free(w);
    zt_engine_destroy(ref);
}

static int shard_a(const zt_tensor_info *t, zt_tensor_view *o, void **ow, int *x)
{
    return strncmp(t->name, "bert.encoder", 12) == 0 ? keep_all(t, o, ow, x) : 0;
}
static int shard_b(const zt_tensor_info *t, zt_tensor_view *o, void **ow, int *x)
{
    return strncmp(t->name, "bert.encoder", 12) != 0 ? keep_all(t, o, ow, x) : 0;
}

static void test_sharded(void **state)
{
    char dir[512], path[600];
    zt_safetensors *f;
    (void)state;
    snprintf(dir, sizeof dir, "%s/sharded", tmpdir);
    rewrite(dir, "model-00001-of-00002.safetensors", shard_a);
    rewrite(dir, "model-00002-of-00002.safetensors", shard_b);
    /* index json naming every tensor's file */
    snprintf(path, sizeof path, "%s/model.safetensors", fixture());
    assert_int_equal(zt_safetensors_open(path, &f), 0);
    char *json = malloc(1 << 16);
    strcpy(json, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (int i = 0; i < zt_safetensors_count(f); i++) {
        zt_tensor_info t;
        zt_safetensors_get(f, i, &t);
        snprintf(json + strlen(json), (1 << 16) - strlen(json), "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                 i ? ", " : "", t.name, strncmp(t.name, "bert.encoder", 12) == 0 ? 1 : 2);
    }
    strcat(json, "}}");
    zt_safetensors_close(f);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_file(path, json);
    zt_engine *ref = open_dir(fixture(), 0), *e = open_dir(dir, 0);
    assert_same_params(ref, e);
    zt_engine_destroy(e);
    /* an index that points outside the folder is refused */
    write_file(path, "{\"weight_map\": {\"bert.embeddings.word_embeddings.weight\": \"../x.safetensors\"}}");
    open_dir(dir, ZT_E_FORMAT);
    assert_non_null(strstr(zt_last_error(), "../x.safetensors"));
    zt_engine_destroy(ref);
    free(json);
}

static const char *drop_name;
static int drop_one(const zt_tensor_info *t, zt_tensor_view *o, void **ow, int *x)
{
    return strcmp(t->name, drop_name) != 0 ? keep_all(t, o, ow, x) : 0;
}
static int bad_shape(const zt_tensor_info *t, zt_tensor_view *o, void **ow, int *x)
{
    keep_all(t, o, ow, x);
    if (strcmp(t->name, "bert.encoder.layer.0.intermediate.dense.weight") == 0) {
        o->shape[0] = t->shape[1];
        o->shape[1] = t->shape[0];
    }
    return 1;
}

static void test_checkpoint_errors(void **state)
{
    char dir[512];
    (void)state;
    /* a missing encoder tensor is an error naming it */
    snprintf(dir, sizeof dir, "%s/missing", tmpdir);
    drop_name = "bert.encoder.layer.1.attention.self.key.bias";
    rewrite(dir, "model.safetensors", drop_one);
    open_dir(dir, ZT_E_FORMAT);
    assert_non_null(strstr(zt_last_error(), "bert.encoder.layer.1.attention.self.key.bias"));
    /* a missing MLM-head tensor is initialised, with a warning */
    snprintf(dir, sizeof dir, "%s/nohead", tmpdir);
    drop_name = "cls.predictions.transform.dense.weight";
    rewrite(dir, "model.safetensors", drop_one);
    logbuf[0] = '\0';
    zt_engine *e = open_dir(dir, 0);
    assert_non_null(strstr(logbuf, "MLM-head"));
    zt_engine_destroy(e);
    /* a transposed weight is a shape error naming tensor and both shapes */
    snprintf(dir, sizeof dir, "%s/shape", tmpdir);
    rewrite(dir, "model.safetensors", bad_shape);
    open_dir(dir, ZT_E_SHAPE);
    assert_non_null(strstr(zt_last_error(), "intermediate.dense.weight\" has shape [64, 256]"));
    /* no weights at all */
    snprintf(dir, sizeof dir, "%s/empty", tmpdir);
    copy_config(dir);
    open_dir(dir, -2 /* -ENOENT */);
    assert_non_null(strstr(zt_last_error(), "no model.safetensors"));
    /* no folder */
    open_dir("/nonexistent/model", -2);
    assert_non_null(strstr(zt_last_error(), "/nonexistent/model/config.json"));
}

static void test_config_errors(void **state)
{
    static const struct { const char *json, *needle; int rc; } cases[] = {
        {"{\"vocab_size\": 10}", "missing required field \"hidden_size\"", ZT_E_CONFIG},
        {"{\"vocab_size\": 100, \"hidden_size\": 10, \"num_hidden_layers\": 1, "
         "\"num_attention_heads\": 3, \"intermediate_size\": 8, \"max_position_embeddings\": 8, "
         "\"type_vocab_size\": 2, \"hidden_act\": \"gelu\"}",
         "hidden_size 10 is not divisible by num_attention_heads 3", ZT_E_CONFIG},
        {"{\"vocab_size\": 100, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
         "\"num_attention_heads\": 2, \"intermediate_size\": 8, \"max_position_embeddings\": 8, "
         "\"type_vocab_size\": 2, \"hidden_act\": \"quick_gelu\"}",
         "\"hidden_act\" is \"quick_gelu\"; zerotrain computes \"gelu\", \"gelu_new\"", ZT_E_UNSUPPORTED},
        {"{\"vocab_size\": -5}", "\"vocab_size\" must be a positive integer", ZT_E_CONFIG},
        {"{\"vocab_size\": 100, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
         "\"num_attention_heads\": 2, \"intermediate_size\": 8, \"max_position_embeddings\": 8, "
         "\"type_vocab_size\": 2}", "missing required field \"hidden_act\"", ZT_E_CONFIG},
        {"{\"model_type\": \"gpt2\"}", "model_type \"gpt2\" is not supported: zerotrain trains \"bert\", \"roberta\", \"distilbert\", \"electra\", \"albert\", \"t5\" and \"mt5\"", ZT_E_UNSUPPORTED},
        {"{\"model_type\": \"albert\", \"vocab_size\": 100, \"embedding_size\": 16, \"hidden_size\": 8, "
         "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 8, "
         "\"max_position_embeddings\": 8, \"type_vocab_size\": 2, \"hidden_act\": \"gelu\"}",
         "embedding_size 16 is larger than hidden_size 8", ZT_E_UNSUPPORTED},
        {"{\"model_type\": \"albert\", \"vocab_size\": 100, \"embedding_size\": 4, \"hidden_size\": 8, "
         "\"num_hidden_layers\": 2, \"num_hidden_groups\": 3, \"num_attention_heads\": 2, "
         "\"intermediate_size\": 8, \"max_position_embeddings\": 8, \"type_vocab_size\": 2, "
         "\"hidden_act\": \"gelu_new\"}", "num_hidden_groups 3 and inner_group_num 1", ZT_E_CONFIG},
        {"{\"model_type\": \"albert\", \"architectures\": [\"AlbertForPreTraining\"], \"num_labels\": 3, "
         "\"vocab_size\": 100, \"embedding_size\": 4, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
         "\"num_attention_heads\": 2, \"intermediate_size\": 8, \"max_position_embeddings\": 8, "
         "\"type_vocab_size\": 2, \"hidden_act\": \"gelu_new\"}", "AlbertForPreTraining with num_labels 3",
         ZT_E_CONFIG},
        {"{\"model_type\": \"t5\", \"vocab_size\": 100}", "missing required field \"d_model\"",
         ZT_E_CONFIG},
        {"{\"model_type\": \"t5\", \"vocab_size\": 100, \"d_model\": 8, \"d_kv\": 4, "
         "\"d_ff\": 8, \"num_layers\": 1, \"num_heads\": 2, \"feed_forward_proj\": \"swish\"}",
         "feed_forward_proj \"swish\" is not supported", ZT_E_UNSUPPORTED},
        {"{\"model_type\": \"t5\", \"vocab_size\": 100, \"d_model\": 8, \"d_kv\": 4, "
         "\"d_ff\": 8, \"num_layers\": 1, \"num_heads\": 2, \"relative_attention_num_buckets\": 32, "
         "\"relative_attention_max_distance\": 16}", "must exceed half of relative_attention_num_buckets",
         ZT_E_CONFIG},
        {"[1, 2", "not a JSON object", ZT_E_FORMAT},
    };
    char dir[512], path[600];
    (void)state;
    snprintf(dir, sizeof dir, "%s/cfg", tmpdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].json);
        open_dir(dir, cases[i].rc);
        if (!strstr(zt_last_error(), cases[i].needle) || !strstr(zt_last_error(), path))
            fail_msg("case %zu: message \"%s\" lacks \"%s\" or the path", i, zt_last_error(),
                     cases[i].needle);
    }
    zt_config c;
    zt_engine *e;
    zt_config_init(&c);
    /* no model: a model of your own, which must register a unit before it runs */
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    assert_int_equal(zt_engine_commit(e), ZT_E_INVAL);
    assert_non_null(strstr(zt_engine_last_error(e), "no units registered"));
    zt_engine_destroy(e);
    c.model_preset = "bert-huge";
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "bert-huge"));
    c.model_preset = "bert-tiny";
    c.lr = -1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
}

/* ---- batches ---------------------------------------------------------------------------- */

typedef struct { int64_t ids[2 * 8], mask[2 * 8], tt[2 * 8], labels[2 * 8]; } small_batch;

static zt_batch make_batch(small_batch *s, uint64_t first)
{
    for (int i = 0; i < 16; i++) {
        s->ids[i] = 5 + (i * 37) % 500;
        s->mask[i] = (i < 8 || i % 8 < 5);
        s->tt[i] = (i % 8) >= 4;
        s->labels[i] = i % 3 == 0 ? (i * 11) % 512 : -100;
    }
    return (zt_batch){2, 8, s->ids, s->mask, s->tt, s->labels, first, 0, 0, NULL, NULL, NULL, 0, NULL};
}

static void test_batch_errors(void **state)
{
    small_batch s;
    zt_fb_result r;
    const float *lg;
    int64_t shape[3];
    float buf[4];
    (void)state;
    zt_engine *e = open_dir(fixture(), 0);
    assert_int_equal(zt_engine_logits(e, &lg, shape), ZT_E_INVAL);
    zt_batch b = make_batch(&s, 0);
    s.ids[11] = 512;
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), ZT_E_RANGE);
    assert_non_null(strstr(zt_engine_last_error(e), "input_ids[1][3] = 512 is outside [0, 512)"));
    b = make_batch(&s, 0);
    s.tt[2] = 2;
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), ZT_E_RANGE);
    assert_non_null(strstr(zt_engine_last_error(e), "token_type_ids[0][2]"));
    b = make_batch(&s, 0);
    s.labels[5] = -1;
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), ZT_E_RANGE);
    b = make_batch(&s, 0);
    b.T = 65; /* max_position_embeddings is 64 */
    b.B = 0;
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), ZT_E_INVAL);
    int64_t *big = calloc(65, sizeof *big);
    zt_batch lb = {1, 65, big, NULL, NULL, big, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    assert_int_equal(zt_engine_forward_backward(e, &lb, 0, &r), ZT_E_RANGE);
    assert_non_null(strstr(zt_engine_last_error(e), "exceeds max_position_embeddings 64"));
    free(big);
    assert_int_equal(zt_engine_read_param(e, "bert.nope", buf, 4), ZT_E_NOTFOUND);
    assert_int_equal(zt_engine_read_grad(e, "cls.predictions.bias", buf, 4), ZT_E_SHAPE);
    assert_int_equal(zt_engine_step(e, -1.0f, NULL), ZT_E_INVAL);
    zt_engine_destroy(e);
    zt_engine_destroy(NULL); /* a no-op */
}

static float *all_grads(zt_engine *e, size_t *total)
{
    size_t n = 0, off = 0;
    for (int i = 0; i < zt_engine_param_count(e); i++) {
        zt_param_info pi;
        zt_engine_param_get(e, i, &pi);
        n += pi.numel;
    }
    float *g = malloc(n * sizeof(float));
    for (int i = 0; i < zt_engine_param_count(e); i++) {
        zt_param_info pi;
        zt_engine_param_get(e, i, &pi);
        assert_int_equal(zt_engine_read_grad(e, pi.name, g + off, pi.numel), 0);
        off += pi.numel;
    }
    *total = n;
    return g;
}

/* the bert-tiny preset with the fixtures' 512-word vocabulary */
static void tiny_config(zt_config *c)
{
    zt_config_init(c);
    c->model_preset = "bert-tiny";
    c->vocab_size = 512;
}

static zt_engine *preset(int threads, int dropout, uint64_t seed)
{
    zt_config c;
    zt_engine *e;
    tiny_config(&c);
    c.threads = threads;
    c.dropout = dropout;
    c.seed = seed;
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("%s", zt_last_error());
    return e;
}

/* bf16: the parameters are bf16 values; a parameter written after a step is what the next
 * step starts from (its fp32 master too): with lr 0 the step keeps the written value's
 * rounding, not the old master's. */
static void test_bf16_write_param(void **state)
{
    (void)state;
    zt_config c;
    zt_engine *e;
    tiny_config(&c);
    c.precision = ZT_PREC_BF16;
    c.weight_decay = 0.0f;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    int64_t ids[2 * 5] = {2, 10, 11, 12, 3, 2, 40, 41, 42, 3}, mask[10], labels[10];
    for (int i = 0; i < 10; i++) {
        mask[i] = 1;
        labels[i] = i % 3 == 1 ? 7 : -100;
    }
    zt_batch b = {2, 5, ids, mask, NULL, labels, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    zt_fb_result r;
    const char *name = "bert.embeddings.LayerNorm.bias";
    zt_param_info pi;
    int i = 0;
    while (zt_engine_param_get(e, i, &pi) == 0 && strcmp(pi.name, name))
        i++;
    float *w = calloc(pi.numel, sizeof *w), *got = calloc(pi.numel, sizeof *got);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
    assert_int_equal(zt_engine_step(e, 1e-2f, NULL), 0);
    assert_int_equal(zt_engine_read_param(e, name, got, pi.numel), 0);
    for (size_t k = 0; k < pi.numel; k++) {
        uint32_t x;
        memcpy(&x, &got[k], 4);
        assert_int_equal(x & 0xffffu, 0); /* bf16 values */
        w[k] = 0.3f + 1e-4f * (float)k;   /* not bf16 values */
    }
    assert_int_equal(zt_engine_write_param(e, name, w, pi.numel), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
    assert_int_equal(zt_engine_step(e, 0.0f, NULL), 0);
    assert_int_equal(zt_engine_read_param(e, name, got, pi.numel), 0);
    for (size_t k = 0; k < pi.numel; k++)
        assert_true(fabsf(got[k] - w[k]) <= 0x1p-8f * fabsf(w[k])); /* half a bf16 ulp */
    free(w);
    free(got);
    zt_engine_destroy(e);
}

/* fp16 with DeepSpeed's loss scaling, through the API: the loss's gradient is scaled (the
 * accumulated gradients are S times an fp32 engine's, within fp16 rounding); an overflow
 * (the gradients not finite at this scale) skips the step -- parameters and step count as
 * they were, zt_step_info.overflow and skipped set, the scale halved once the hysteresis is
 * used up -- and does not count as a divergence; the next good step unscales (its norm is
 * the fp32 engine's); and an overflow at min_loss_scale with no hysteresis left is an error
 * that changes nothing. */
static void test_fp16_loss_scale(void **state)
{
    (void)state;
    zt_config c;
    zt_engine *e, *f;
    int64_t ids[2 * 5] = {2, 10, 11, 12, 3, 2, 40, 41, 42, 3}, mask[10], labels[10];
    for (int i = 0; i < 10; i++) {
        mask[i] = 1;
        labels[i] = i % 3 == 1 ? 7 : -100;
    }
    zt_batch b = {2, 5, ids, mask, NULL, labels, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    zt_fb_result r;
    zt_step_info si;
    const char *name = "bert.embeddings.LayerNorm.bias";
    zt_param_info pi;
    tiny_config(&c);
    c.precision = ZT_PREC_FP16;
    c.initial_scale_power = 10;
    c.hysteresis = 2;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    tiny_config(&c); /* the same model in fp32 */
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &f), 0);
    int i = 0;
    while (zt_engine_param_get(e, i, &pi) == 0 && strcmp(pi.name, name))
        i++;
    float *g16 = calloc(pi.numel, 4), *g32 = calloc(pi.numel, 4), *p0 = calloc(pi.numel, 4),
          *p1 = calloc(pi.numel, 4);
    assert_true(zt_engine_loss_scale(e) == 1024.0 && zt_engine_loss_scale(f) == 1.0);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
    assert_int_equal(zt_engine_forward_backward(f, &b, 0, &r), 0);
    assert_int_equal(zt_engine_read_grad(e, name, g16, pi.numel), 0);
    assert_int_equal(zt_engine_read_grad(f, name, g32, pi.numel), 0);
    double num = 0, den = 0;
    for (size_t k = 0; k < pi.numel; k++) {
        num += ((double)g16[k] / 1024.0 - g32[k]) * ((double)g16[k] / 1024.0 - g32[k]);
        den += (double)g32[k] * g32[k];
    }
    /* the fp16 model's own roundings: a few 2^-11 (the bf16 bound's argument, u = 2^-11) */
    assert_true(den > 0 && sqrt(num / den) < 2 * sqrt(60.0 * 2 + 20) * 0x1p-11);
    zt_step_info sf;
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
    assert_int_equal(si.overflow, 0);
    assert_int_equal(si.skipped, 0);
    assert_true(si.loss_scale == 1024.0);
    assert_int_equal(zt_engine_step(f, 1e-2f, &sf), 0);
    /* the unscaled norm (what clipping compares) */
    assert_true(fabs(si.grad_norm - sf.grad_norm) < 0.02 * sf.grad_norm);
    /* an overflow: a weight of 65504 (fp16's largest) makes the forward overflow */
    assert_int_equal(zt_engine_read_param(e, name, p0, pi.numel), 0);
    for (size_t k = 0; k < pi.numel; k++)
        p1[k] = 65504.0f;
    assert_int_equal(zt_engine_write_param(e, name, p1, pi.numel), 0);
    assert_int_equal(zt_engine_read_param(e, name, p0, pi.numel), 0);
    for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(zt_engine_zero_grad(e), 0);
        assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
        assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
        assert_int_equal(si.overflow, 1);
        assert_int_equal(si.skipped, 1);
        assert_int_equal(si.step, 1); /* (the count before it) */
        assert_true(si.loss_scale == 1024.0);
        /* hysteresis 2: the first overflow keeps the scale, the second halves it */
        assert_true(zt_engine_loss_scale(e) == (rep == 0 ? 1024.0 : 512.0));
        assert_int_equal(zt_engine_read_param(e, name, p1, pi.numel), 0);
        assert_memory_equal(p0, p1, 4 * pi.numel);
    }
    zt_engine_destroy(e);
    /* at min_loss_scale, without hysteresis: the overflow is an error */
    tiny_config(&c);
    c.precision = ZT_PREC_FP16;
    c.initial_scale_power = 0;
    c.min_loss_scale = 1.0;
    c.hysteresis = 1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    for (size_t k = 0; k < pi.numel; k++)
        p1[k] = 65504.0f;
    assert_int_equal(zt_engine_write_param(e, name, p1, pi.numel), 0);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), ZT_E_RANGE);
    assert_non_null(strstr(zt_engine_last_error(e), "the scale cannot go lower"));
    assert_true(zt_engine_loss_scale(e) == 1.0);
    free(g16);
    free(g32);
    free(p0);
    free(p1);
    zt_engine_destroy(e);
    zt_engine_destroy(f);
}

/* Forward only (zt_config.inference) on the classifier fixture: the same logits, bit for
 * bit, as a training engine's evaluation, at stages 0 and 3; no gradient or optimizer bytes
 * (the report's measured state is the parameters alone); the training calls refused; and
 * zt_predict_classify's probabilities the softmax of those logits. Then a masked LM
 * (ZT_HEAD_MLM over the same folder): zt_predict_fill_mask's top tokens are the arg max of
 * the full logits at the masks. */
static void test_inference(void **state)
{
    (void)state;
    char dir[4096];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(dir, sizeof dir, "%s/bert-tiny-cls", f ? f : "tests/fixtures");
    int64_t ids[2 * 6] = {2, 10, 11, 12, 3, 0, 2, 40, 4, 41, 4, 3};
    int64_t mask[2 * 6] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    zt_batch b = {2, 6, ids, mask, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    const float *lg;
    int64_t shape[3];
    float ref[2 * 3], probs[2 * 3];
    zt_fb_result r;
    for (int st = 0; st <= 3; st += 3) {
        zt_config c;
        zt_engine *e, *inf;
        zt_engine_report er;
        zt_config_init(&c);
        c.model_dir = dir;
        c.zero_stage = st;
        assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
        assert_int_equal(zt_engine_evaluate(e, &b, &r), 0);
        assert_int_equal(zt_engine_logits(e, &lg, shape), 0);
        assert_true(shape[0] == 2 && shape[1] == 1 && shape[2] == 3);
        memcpy(ref, lg, sizeof ref);
        assert_int_equal(zt_engine_report_get(e, &er), 0);
        size_t train_bytes = er.measured_state_bytes;
        zt_engine_destroy(e);
        c.inference = 1;
        assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &inf), 0);
        assert_int_equal(zt_engine_evaluate(inf, &b, &r), 0);
        assert_int_equal(zt_engine_logits(inf, &lg, shape), 0);
        assert_memory_equal(lg, ref, sizeof ref);
        assert_int_equal(zt_engine_report_get(inf, &er), 0);
        size_t pbytes = 0;
        for (int i = 0; i < zt_engine_param_count(inf); i++) {
            zt_param_info pi;
            zt_engine_param_get(inf, i, &pi);
            pbytes += pi.numel * sizeof(float);
        }
        /* parameters alone (units padded to 256 floats, so at least the tensors' bytes) */
        /* stage 0: the parameters alone, half a training engine's parameters and gradients
         * (its moments come at the first step); stage 3 (shards and the gather pool): less
         * than training's; both as the footprint predicts */
        assert_true(er.measured_state_bytes >= pbytes);
        if (st == 0)
            assert_int_equal(2 * er.measured_state_bytes, train_bytes);
        else
            assert_true(er.measured_state_bytes < train_bytes);
        assert_int_equal(er.measured_state_bytes, er.predicted_state_bytes + er.buffer_bytes);
        assert_int_equal(zt_predict_classify(inf, &b, probs), 0);
        for (int row = 0; row < 2; row++) {
            double mx = ref[3 * row], sum = 0;
            for (int k = 1; k < 3; k++)
                mx = fmax(mx, ref[3 * row + k]);
            for (int k = 0; k < 3; k++)
                sum += exp(ref[3 * row + k] - mx);
            for (int k = 0; k < 3; k++)
                assert_true(fabs(probs[3 * row + k] - exp(ref[3 * row + k] - mx) / sum) < 1e-6);
        }
        assert_int_equal(zt_engine_forward_backward(inf, &b, 0, &r), ZT_E_INVAL);
        assert_non_null(strstr(zt_engine_last_error(inf), "forward only"));
        assert_int_equal(zt_engine_step(inf, 1e-3f, NULL), ZT_E_INVAL);
        assert_int_equal(zt_engine_zero_grad(inf), ZT_E_INVAL);
        zt_engine_destroy(inf);
    }
    /* fill-mask: ids 4 are the masks (row 1, positions 2 and 4) */
    zt_config c;
    zt_engine *e, *inf;
    int64_t labels[2 * 6];
    for (int i = 0; i < 12; i++)
        labels[i] = ids[i] == 4 ? 0 : -100;
    zt_config_init(&c);
    c.model_dir = dir;
    c.head = ZT_HEAD_MLM;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    zt_batch lb = b;
    lb.labels = labels;
    assert_int_equal(zt_engine_forward_backward(e, &lb, 1, &r), 0); /* full logits */
    assert_int_equal(zt_engine_logits(e, &lg, shape), 0);
    int V = (int)shape[2], best[2];
    for (int m = 0; m < 2; m++) {
        const float *x = lg + (size_t)(6 + (m ? 4 : 2)) * V;
        best[m] = 0;
        for (int v = 1; v < V; v++)
            best[m] = x[v] > x[best[m]] ? v : best[m];
    }
    c.inference = 1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &inf), 0);
    int32_t top[2 * 3];
    float sc[2 * 3];
    int64_t pos[2];
    assert_int_equal(zt_predict_fill_mask(inf, &b, 4, 3, 2, top, sc, pos), 2);
    assert_true(pos[0] == 8 && pos[1] == 10);
    assert_int_equal(top[0], best[0]);
    assert_int_equal(top[3], best[1]);
    assert_true(sc[0] >= sc[1] && sc[1] >= sc[2] && sc[2] > 0.0f);
    assert_int_equal(zt_predict_fill_mask(inf, &b, 4, 3, 1, top, sc, pos), ZT_E_INVAL);
    assert_int_equal(zt_predict_classify(inf, &b, probs), ZT_E_INVAL); /* not a classifier */
    zt_engine_destroy(inf);
    zt_engine_destroy(e);
}

static void test_determinism(void **state)
{
    small_batch s;
    zt_fb_result r1, r2, r3;
    size_t n;
    (void)state;
    zt_batch b = make_batch(&s, 100);
    /* threads 1 vs 2, dropout on: bit-identical loss and gradients */
    zt_engine *a = preset(1, 1, 7), *c = preset(2, 1, 7);
    zt_model_info mi;
    zt_engine_model_info(a, &mi);
    assert_int_equal(mi.num_layers, 2);
    assert_int_equal(mi.hidden_size, 128);
    /* BERT parameter count: embeddings + L layers + head, from the shapes */
    size_t C = 128, F = 512, V = 512;
    size_t want = V * C + 512 * C + 2 * C + 2 * C + 2 * (4 * (C * C + C) + 2 * C + C * F + F +
                                                         F * C + C + 2 * C) + C * C + C + 2 * C + V;
    assert_int_equal(mi.num_parameters, want);
    assert_int_equal(zt_engine_forward_backward(a, &b, 0, &r1), 0);
    assert_int_equal(zt_engine_forward_backward(c, &b, 0, &r2), 0);
    assert_true(r1.loss == r2.loss);
    float *g1 = all_grads(a, &n), *g2 = all_grads(c, &n);
    assert_memory_equal(g1, g2, n * sizeof(float));
    /* another first_sample draws other dropout masks */
    zt_engine_zero_grad(c);
    b.first_sample = 101;
    assert_int_equal(zt_engine_forward_backward(c, &b, 0, &r3), 0);
    assert_true(r3.loss != r1.loss);
    /* gradients accumulate until zero_grad */
    b.first_sample = 100;
    assert_int_equal(zt_engine_forward_backward(a, &b, 0, &r3), 0);
    free(g2);
    g2 = all_grads(a, &n);
    /* tied and repeated rows sum several terms, so the second pass may round differently;
     * relative to the largest gradient that is a few fp32 ulps */
    float gmax = 0;
    for (size_t i = 0; i < n; i++)
        gmax = fmaxf(gmax, fabsf(g1[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(g2[i] - 2 * g1[i]) <= 1e-6f * gmax))
            fail_msg("accumulated gradient %zu: %g vs 2 x %g", i, g2[i], g1[i]);
    free(g1);
    free(g2);
    zt_engine_destroy(a);
    zt_engine_destroy(c);
}

/* Recomputation through the API: every mode gives the no-recomputation gradients bit for
 * bit (dropout on), over batches of two sizes (the activations are carved again for the
 * larger one, and the checkpoint store follows) with an evaluation between; misuse fails
 * with a message. */
/* ALBERT's steps: num_hidden_layers x inner_group_num layer applications over the group units
 * (int(i / (L / G)): L 5, G 2 gives groups 0 0 0 1 1), the embeddings and the head around them */
static void test_albert_steps(void **state)
{
    char path[512];
    zt_config c;
    zt_engine *e = NULL;
    zt_recompute_info ri;
    static const int want[] = {0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3};
    (void)state;
    snprintf(path, sizeof path, "%s/albert.json", tmpdir);
    write_file(path, "{\"model_type\": \"albert\", \"architectures\": [\"AlbertForMaskedLM\"], "
               "\"vocab_size\": 50, \"embedding_size\": 4, \"hidden_size\": 8, \"num_hidden_layers\": 5, "
               "\"num_hidden_groups\": 2, \"inner_group_num\": 2, \"num_attention_heads\": 2, "
               "\"intermediate_size\": 8, \"max_position_embeddings\": 8, \"type_vocab_size\": 2, "
               "\"hidden_act\": \"gelu_new\"}");
    zt_config_init(&c);
    c.model_config = path;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    assert_int_equal(zt_engine_commit(e), 0);
    assert_int_equal(zt_engine_unit_count(e), 4);
    assert_int_equal(zt_engine_step_count(e), 12);
    for (int s = 0; s < 12; s++)
        assert_int_equal(zt_engine_step_unit(e, s), want[s]);
    assert_string_equal(zt_engine_unit_name(e, 2), "layer_group.1");
    assert_int_equal(zt_engine_recompute_info(e, 9, &ri), 0);
    assert_string_equal(ri.name, "layer_group.1");
    assert_int_equal(zt_engine_step_unit(e, 12), ZT_E_RANGE);
    zt_engine_destroy(e);
}

static void test_recompute_api(void **state)
{
    static const struct { int mode, k, off; const char *want; } modes[] = {
        {ZT_RECOMPUTE_FULL, 0, 0, "full"},         {ZT_RECOMPUTE_SELECTIVE, 0, 0, "selective"},
        {ZT_RECOMPUTE_FULL, 0, 1, "full+offload"}, {ZT_RECOMPUTE_EVERY_K, 1, 1, "full+offload"},
    };
    small_batch s;
    zt_fb_result r0, r1, ev;
    size_t n;
    zt_config c;
    zt_engine *e;
    zt_recompute_info ri;
    (void)state;
    zt_batch b = make_batch(&s, 100);
    zt_engine *ref = preset(1, 1, 7);
    zt_batch small = b;
    small.B = 1;
    assert_int_equal(zt_engine_forward_backward(ref, &small, 0, &r0), 0);
    assert_int_equal(zt_engine_forward_backward(ref, &b, 0, &r0), 0);
    float *g0 = all_grads(ref, &n);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        tiny_config(&c);
        c.threads = 1;
        c.seed = 7;
        c.recompute = modes[i].mode;
        c.recompute_k = modes[i].k;
        c.offload_checkpoints = modes[i].off;
        c.recompute_profile = 1;
        if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
            fail_msg("mode %zu: %s", i, zt_last_error());
        assert_int_equal(zt_engine_forward_backward(e, &small, 0, &r1), 0);
        assert_int_equal(zt_engine_evaluate(e, &b, &ev), 0);
        assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r1), 0);
        assert_true(r1.loss == r0.loss);
        float *g1 = all_grads(e, &n);
        if (memcmp(g0, g1, n * sizeof(float)) != 0)
            fail_msg("mode %zu (%s): gradients differ from no recomputation", i, modes[i].want);
        free(g1);
        assert_int_equal(zt_engine_recompute_info(e, 1, &ri), 0);
        assert_string_equal(ri.mode, modes[i].want);
        assert_string_equal(ri.name, "layer.0");
        assert_int_equal(ri.calls, 2); /* layer 0 of 2 is recomputed in both passes */
        assert_true(ri.bytes > 0 && ri.seconds > 0);
        assert_int_equal(zt_engine_recompute_info(e, 0, &ri), 0);
        assert_string_equal(ri.mode, "keep");
        assert_int_equal(zt_engine_recompute_info(e, 4, &ri), ZT_E_RANGE);
        assert_non_null(strstr(zt_engine_last_error(e), "step 4 is outside [0, 4)"));
        assert_int_equal(zt_engine_recompute_info(e, 0, NULL), ZT_E_INVAL);
        assert_int_equal(zt_engine_step_count(e), 4); /* BERT: the units are the steps */
        assert_int_equal(zt_engine_step_unit(e, 2), 2);
        assert_int_equal(zt_engine_step_unit(e, 4), ZT_E_RANGE);
        zt_engine_destroy(e);
    }
    free(g0);
    zt_engine_destroy(ref);
    /* misuse: a segment length below 1, "auto" without a limit, offload with nothing kept,
     * number_checkpoints with another mode than full */
    static const struct { int mode, k, off, nck; const char *needle; } bad[] = {
        {ZT_RECOMPUTE_EVERY_K, 0, 0, 0, "every-k needs recompute_k >= 1"},
        {ZT_RECOMPUTE_AUTO, 0, 0, 0, "recompute \"auto\" plans recomputation to fit"},
        {ZT_RECOMPUTE_SELECTIVE, 0, 1, 0, "with recompute \"selective\" there are none"},
        {ZT_RECOMPUTE_SELECTIVE, 0, 0, 2, "number_checkpoints 2"},
        {7, 0, 0, 0, "recompute 7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tiny_config(&c);
        c.recompute = bad[i].mode;
        c.recompute_k = bad[i].k;
        c.offload_checkpoints = bad[i].off;
        c.number_checkpoints = bad[i].nck;
        assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
        if (!strstr(zt_last_error(), bad[i].needle))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, zt_last_error(), bad[i].needle);
    }
}

/* Training (no logits kept) runs the MLM decoder on the labelled rows only; it must give the
 * loss and gradients of the full computation. Only the summation order differs (fewer rows
 * in the decoder's weight-gradient product), so the difference is fp32 rounding: 1e-5 of
 * each tensor's largest gradient is two orders above it, while a missing or misplaced row
 * changes gradients by their own size. */
static void test_compact_head(void **state)
{
    small_batch s;
    zt_fb_result full, compact;
    size_t n;
    (void)state;
    zt_engine *e = preset(1, 0, 3);
    zt_batch b = make_batch(&s, 0);
    assert_int_equal(zt_engine_forward_backward(e, &b, 1, &full), 0);
    float *g1 = all_grads(e, &n);
    zt_engine_zero_grad(e);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &compact), 0);
    float *g0 = all_grads(e, &n);
    assert_true(fabs(full.loss - compact.loss) <= 1e-5 * fabs(full.loss));
    assert_int_equal(full.n_labels, compact.n_labels);
    /* as in the fixtures' rule, the scale has a floor of 1e-3 of the largest gradient G:
     * the attention key biases' true gradient is zero, theirs is rounding noise */
    float G = 0;
    for (size_t k = 0; k < n; k++)
        G = fmaxf(G, fabsf(g1[k]));
    size_t off = 0;
    for (int i = 0; i < zt_engine_param_count(e); i++) {
        zt_param_info pi;
        float mx = 0, d = 0;
        zt_engine_param_get(e, i, &pi);
        for (size_t k = off; k < off + pi.numel; k++) {
            mx = fmaxf(mx, fabsf(g1[k]));
            d = fmaxf(d, fabsf(g1[k] - g0[k]));
        }
        if (d > 1e-5f * fmaxf(mx, 1e-3f * G))
            fail_msg("%s: compact head differs by %g (max |g| %g)", pi.name, d, mx);
        off += pi.numel;
    }
    free(g1);
    free(g0);
    zt_engine_destroy(e);
}

static void test_save_roundtrip_and_clip(void **state)
{
    small_batch s;
    zt_fb_result r1, r2;
    zt_step_info si;
    char dir[512];
    size_t n;
    (void)state;
    zt_config c;
    zt_engine *a;
    tiny_config(&c);
    c.dropout = 0;
    c.grad_clip = 0.5f;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &a), 0);
    zt_batch b = make_batch(&s, 0);
    assert_int_equal(zt_engine_forward_backward(a, &b, 0, &r1), 0);
    float *g = all_grads(a, &n);
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)g[i] * g[i];
    assert_int_equal(zt_engine_step(a, 1e-3f, &si), 0);
    assert_true(fabs(si.grad_norm - sqrt(ss)) <= 1e-6 * sqrt(ss));
    assert_true(si.grad_norm > 0.5);
    assert_true(fabsf(si.clip_coef - (float)(0.5 / (si.grad_norm + 1e-6))) < 1e-7f);
    free(g);
    snprintf(dir, sizeof dir, "%s/saved/nested/model", tmpdir); /* parents are created */
    assert_int_equal(zt_engine_save_model(a, dir), 0);
    zt_engine *e = open_dir(dir, 0);
    assert_same_params(a, e);
    zt_engine_zero_grad(a);
    assert_int_equal(zt_engine_forward_backward(a, &b, 0, &r1), 0);
    zt_config_init(&c);
    zt_engine_destroy(e);
    c.model_dir = dir;
    c.dropout = 0;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r2), 0);
    assert_true(r1.loss == r2.loss);
    zt_engine_destroy(e);
    zt_engine_destroy(a);
}

/* The step's other paths, with the gradient shards in RAM and with them where the offloaded
 * optimizer state is (RAM pool, swap file, and kept in RAM on request), stages 2 and 3:
 * two accumulated micro-batches with clipping; a step after zero_grad with no backward pass
 * (zero gradients: Adam still moves the weights); one micro-batch of the configured two
 * (the norm read back from the store). Every variant gives the same bits as no offload. */
static zt_engine *offload_engine(int stage, int device, int grads)
{
    static char nv[600];
    zt_config c;
    zt_engine *e;
    snprintf(nv, sizeof nv, "%s/nv", tmpdir);
    mkdir(nv, 0700);
    tiny_config(&c);
    c.dropout = 1;
    c.zero_stage = stage;
    c.grad_accum_steps = 2;
    c.grad_clip = 0.05f;
    c.offload_optimizer = device;
    c.offload_gradients = grads;
    c.nvme_path = nv;
    c.sub_group_size = 3000;
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("%s", zt_last_error());
    return e;
}

static void step_paths(zt_engine *e, zt_step_info *si)
{
    small_batch s;
    zt_batch b0 = make_batch(&s, 10);
    small_batch s1;
    zt_batch b1 = make_batch(&s1, 20);
    zt_fb_result r;
    assert_int_equal(zt_engine_forward_backward(e, &b0, 0, &r), 0);
    assert_int_equal(zt_engine_forward_backward(e, &b1, 0, &r), 0);
    assert_int_equal(zt_engine_step(e, 1e-3f, &si[0]), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    assert_int_equal(zt_engine_step(e, 1e-3f, &si[1]), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    assert_int_equal(zt_engine_forward_backward(e, &b1, 0, &r), 0);
    assert_int_equal(zt_engine_step(e, 1e-3f, &si[2]), 0);
}

static void same_saved(zt_engine *a, zt_engine *b)
{
    char d[2][600], cmd[1300];
    for (int i = 0; i < 2; i++) {
        snprintf(d[i], sizeof d[i], "%s/saved%d", tmpdir, i);
        if (zt_engine_save_model(i ? b : a, d[i]) != 0)
            fail_msg("%s", zt_last_error());
    }
    snprintf(cmd, sizeof cmd, "cmp -s '%s/model.safetensors' '%s/model.safetensors'", d[0], d[1]);
    assert_int_equal(system(cmd), 0);
}

static void test_offload_step_paths(void **state)
{
    (void)state;
    for (int stage = 2; stage <= 3; stage++) {
        zt_step_info want[3], got[3];
        zt_engine *ref = offload_engine(stage, ZT_OFFLOAD_NONE, 0);
        step_paths(ref, want);
        assert_true(want[0].clip_coef < 1.0f && want[1].grad_norm == 0.0);
        const int var[3][2] = {{ZT_OFFLOAD_CPU, 0}, {ZT_OFFLOAD_NVME, 1}, {ZT_OFFLOAD_NVME, -1}};
        uint64_t written[3];
        size_t params = 0;
        for (int v = 0; v < 3; v++) {
            zt_engine *e = offload_engine(stage, var[v][0], var[v][1]);
            zt_engine_report rep;
            step_paths(e, got);
            for (int k = 0; k < 3; k++)
                if (got[k].grad_norm != want[k].grad_norm)
                    fail_msg("stage %d variant %d step %d: norm %.17g vs %.17g", stage, v, k,
                             got[k].grad_norm, want[k].grad_norm);
            same_saved(ref, e); /* (stage 3 keeps no unit whole to read from) */
            assert_int_equal(zt_engine_report_get(e, &rep), 0);
            assert_int_equal(rep.offload_gradients, var[v][1] >= 0);
            written[v] = rep.nvme_written_bytes;
            params = rep.params;
            zt_engine_destroy(e);
        }
        /* on NVMe the gradient shards (one rank: every padded float) are written by each of
         * the three backward passes and once as zeros */
        assert_true(written[1] - written[2] == 4 * 4 * params);
        zt_engine_destroy(ref);
    }
    /* asked for where it cannot be: no optimizer offload, or stage 1 */
    zt_config c;
    zt_engine *e = NULL;
    zt_config_init(&c);
    c.model_preset = "bert-tiny";
    c.zero_stage = 2;
    c.offload_gradients = 1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "offload_gradients"));
    assert_null(e);
}

/* offload_param.max_in_cpu caps the shard buffers (at least 3); buffer_size below the
 * largest unit shard, or max_in_cpu below three of them, is a config error */
static int param_offload(int buffers, size_t buffer_size, size_t max_in_cpu, zt_engine **e)
{
    zt_config c;
    tiny_config(&c);
    c.zero_stage = 3;
    c.offload_param = ZT_OFFLOAD_CPU;
    c.offload_param_buffers = buffers;
    c.offload_param_buffer_size = buffer_size;
    c.offload_param_max_in_cpu = max_in_cpu;
    *e = NULL;
    return zt_engine_create(&c, MPI_COMM_NULL, e);
}

static size_t buffer_bytes(zt_engine *e)
{
    zt_engine_report r;
    assert_int_equal(zt_engine_report_get(e, &r), 0);
    zt_engine_destroy(e);
    return r.buffer_bytes;
}

static void test_param_buffers(void **state)
{
    zt_engine *e;
    (void)state;
    assert_int_equal(param_offload(4, 0, 0, &e), 0);
    size_t b4 = buffer_bytes(e);
    assert_int_equal(param_offload(5, 0, 0, &e), 0);
    size_t b5 = buffer_bytes(e), sm = (b5 - b4) / sizeof(float); /* one shard buffer */
    assert_true(sm > 0);
    /* DeepSpeed's default max_in_cpu (1e9) caps nothing; 4 shards caps 5 buffers to 4; 3
     * shards and a float to 3; below 3 shards is refused */
    assert_int_equal(param_offload(5, 0, 1000000000, &e), 0);
    assert_true(buffer_bytes(e) == b5);
    assert_int_equal(param_offload(5, 0, 4 * sm, &e), 0);
    assert_true(buffer_bytes(e) == b4);
    assert_int_equal(param_offload(5, 0, 3 * sm + 1, &e), 0);
    assert_true(buffer_bytes(e) == b4 - sm * sizeof(float));
    assert_int_equal(param_offload(5, 0, 3 * sm - 1, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "max_in_cpu"));
    assert_null(e);
    /* buffer_size: at least the largest shard */
    assert_int_equal(param_offload(5, sm, 0, &e), 0);
    assert_true(buffer_bytes(e) == b5);
    assert_int_equal(param_offload(5, sm - 1, 0, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "buffer_size"));
    assert_null(e);
}

/* zerotrain.direct_io where the filesystem refuses O_DIRECT (injected): "auto" falls back
 * to buffered I/O with a warning, "required" stops with an error saying so, "off" never
 * asks */
static void test_direct_io(void **state)
{
    static char nv[600];
    const int mode[3] = {0, 1, -1};
    (void)state;
    snprintf(nv, sizeof nv, "%s/nvd", tmpdir);
    mkdir(nv, 0700);
    zt_fault_hooks fh;
    zt_fault_hooks_init(&fh);
    fh.io_no_odirect = 1;
    zt_fault_hooks_set(&fh);
    for (int k = 0; k < 3; k++) {
        zt_config c;
        zt_engine *e = NULL;
        tiny_config(&c);
        c.zero_stage = 1;
        c.offload_optimizer = ZT_OFFLOAD_NVME;
        c.nvme_path = nv;
        c.direct_io = mode[k];
        logbuf[0] = '\0';
        int rc = zt_engine_create(&c, MPI_COMM_NULL, &e);
        if (mode[k] == 1) {
            assert_int_equal(rc, ZT_E_UNSUPPORTED);
            assert_non_null(strstr(zt_last_error(), "refuses O_DIRECT"));
            assert_null(e);
            continue;
        }
        if (rc != 0)
            fail_msg("direct_io %d: %s", mode[k], zt_last_error());
        assert_true((strstr(logbuf, "refuses O_DIRECT") != NULL) == (mode[k] == 0));
        zt_engine_destroy(e);
    }
    zt_fault_hooks_set(NULL);
}

/* model_config: a config.json alone gives that architecture initialised from the seed --
 * the same weights as the preset of the same shape; a missing file is named */
static void test_model_config(void **state)
{
    char path[600];
    zt_config c;
    zt_engine *a, *b = NULL;
    (void)state;
    snprintf(path, sizeof path, "%s/tiny-config.json", tmpdir);
    write_file(path, "{\"model_type\": \"bert\", \"vocab_size\": 512, \"hidden_size\": 128, "
                     "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                     "\"intermediate_size\": 512, \"hidden_act\": \"gelu\", "
                     "\"max_position_embeddings\": 512, \"type_vocab_size\": 2, "
                     "\"layer_norm_eps\": 1e-12}");
    a = preset(1, 1, 9);
    zt_config_init(&c);
    c.model_config = path;
    c.seed = 9;
    c.threads = 1;
    if (zt_engine_create(&c, MPI_COMM_NULL, &b) != 0)
        fail_msg("%s", zt_last_error());
    assert_same_params(a, b);
    zt_engine_destroy(b);
    b = NULL;
    snprintf(path, sizeof path, "%s/missing.json", tmpdir);
    assert_true(zt_engine_create(&c, MPI_COMM_NULL, &b) < 0);
    assert_non_null(strstr(zt_last_error(), "missing.json"));
    assert_null(b);
    c.model_preset = "bert-tiny"; /* two models at once */
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &b), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "exactly one of"));
    zt_engine_destroy(a);
}

/* A NaN or an infinity in a parameter: save_model and checkpoint_save refuse, naming the
 * tensor and its first non-finite element, and create nothing (not even the parents).
 * Finite again, a save over the saved folder replaces it whole. */
static void test_nonfinite(void **state)
{
    const char *name = "bert.encoder.layer.1.output.dense.weight"; /* [128, 512] */
    char dir[512], root[512], want[256];
    struct stat sb;
    size_t n;
    (void)state;
    zt_engine *e = preset(1, 0, 1);
    float *w = param(e, name, &n), keep = w[600];
    zt_train_state st = {3, 24, 1};
    snprintf(dir, sizeof dir, "%s/nonfinite/model", tmpdir);
    snprintf(root, sizeof root, "%s/nonfinite/ck", tmpdir);
    w[600] = NAN; /* row 1, column 88 */
    assert_int_equal(zt_engine_write_param(e, name, w, n), 0);
    assert_int_equal(zt_engine_save_model(e, dir), ZT_E_RANGE);
    snprintf(want, sizeof want, "not saving the model to %s: parameter \"%s\" element 600 [1, "
             "88] is NaN", dir, name);
    if (!strstr(zt_engine_last_error(e), want))
        fail_msg("message \"%s\" lacks \"%s\"", zt_engine_last_error(e), want);
    assert_int_equal(zt_checkpoint_save(e, root, &st, NULL, 0), ZT_E_RANGE);
    snprintf(want, sizeof want, "not saving checkpoint %s/step-3: parameter \"%s\" element 600",
             root, name);
    if (!strstr(zt_engine_last_error(e), want))
        fail_msg("message \"%s\" lacks \"%s\"", zt_engine_last_error(e), want);
    w[5] = -INFINITY; /* the first one is named */
    assert_int_equal(zt_engine_write_param(e, name, w, n), 0);
    assert_int_equal(zt_engine_save_model(e, dir), ZT_E_RANGE);
    assert_non_null(strstr(zt_engine_last_error(e), "element 5 [0, 5] is -Inf"));
    snprintf(want, sizeof want, "%s/nonfinite", tmpdir);
    assert_int_not_equal(stat(want, &sb), 0);
    w[5] = 0.0f; /* finite again: both save */
    w[600] = keep;
    assert_int_equal(zt_engine_write_param(e, name, w, n), 0);
    assert_int_equal(zt_engine_save_model(e, dir), 0);
    assert_int_equal(zt_checkpoint_save(e, root, &st, NULL, 0), 0);
    /* saved again over it: the folder is replaced whole (a stale shard goes, a tokenizer
     * file stays); a folder with a file of another kind is refused */
    snprintf(want, sizeof want, "%s/model-00001-of-00002.safetensors", dir);
    write_file(want, "stale");
    snprintf(want, sizeof want, "%s/vocab.txt", dir);
    write_file(want, "[PAD]\n");
    assert_int_equal(zt_engine_save_model(e, dir), 0);
    assert_int_equal(stat(want, &sb), 0);
    snprintf(want, sizeof want, "%s/model-00001-of-00002.safetensors", dir);
    assert_int_not_equal(stat(want, &sb), 0);
    snprintf(want, sizeof want, "%s/notes.md", dir);
    write_file(want, "mine");
    assert_int_equal(zt_engine_save_model(e, dir), ZT_E_INVAL);
    assert_non_null(strstr(zt_engine_last_error(e), "holds the file \"notes.md\", which is not "
                                                    "part of a model folder"));
    assert_int_equal(stat(want, &sb), 0);
    free(w);
    zt_engine_destroy(e);
}

static void test_misc(void **state)
{
    (void)state;
    assert_string_equal(zt_version(), "0.3.0");
    assert_int_equal(zt_abi_version(), ZT_ABI_VERSION);
    assert_string_equal(zt_strerror(ZT_E_FORMAT), "malformed file");
    assert_string_equal(zt_strerror(-2), "No such file or directory");
    assert_string_equal(zt_strerror(12345), "unknown error");
    zt_mem_report r;
    zt_engine *e = preset(0, 0, 1);
    zt_memory_report(&r);
    assert_true(r.current[ZT_MEM_PARAMS] > 0 && r.current[ZT_MEM_PARAMS] == r.current[ZT_MEM_GRADS]);
    zt_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_variants),    cmocka_unit_test(test_half_precision),
        cmocka_unit_test(test_sharded),        cmocka_unit_test(test_checkpoint_errors),
        cmocka_unit_test(test_config_errors),  cmocka_unit_test(test_batch_errors),
        cmocka_unit_test(test_determinism),    cmocka_unit_test(test_compact_head),
        cmocka_unit_test(test_recompute_api),
        cmocka_unit_test(test_albert_steps),
        cmocka_unit_test(test_save_roundtrip_and_clip),
        cmocka_unit_test(test_offload_step_paths),
        cmocka_unit_test(test_model_config),
        cmocka_unit_test(test_param_buffers),
        cmocka_unit_test(test_direct_io),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_misc),
        cmocka_unit_test(test_inference),
        cmocka_unit_test(test_bf16_write_param), cmocka_unit_test(test_fp16_loss_scale),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
