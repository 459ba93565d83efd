/* test_optimizers.c - the engine's optimizers against their kernels: AdamW8bit and Adafactor
 * on the bert-tiny fixture through the public API (one rank, stage 0) give bit for bit the
 * parameters that the kernels of optimizer/ give when applied to each whole tensor with the
 * engine's gradients (the kernels themselves are checked against independent references in
 * test_adam8bit.c and test_adafactor.c). This pins the engine's wiring: which tensors keep
 * fp32 state (min_8bit_size, fp32_state patterns), the 8-bit blocks restarting at every
 * tensor, Adafactor's factored shapes and its sums over the tensor's runs, weight decay,
 * clipping. Also the state bytes per parameter the report gives, and misuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerotrain.h"
#include "../optimizer/adafactor.h"
#include "../optimizer/adam8bit.h"

static const char *fixture(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(d, sizeof d, "%s/bert-tiny", f ? f : "tests/fixtures");
    return d;
}

/* a masked-LM batch of B x T from a fixed generator */
typedef struct batch {
    int64_t ids[2 * 16], mask[2 * 16], labels[2 * 16];
    zt_batch b;
} batch;

static void make_batch(batch *x, int vocab, unsigned seed)
{
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (int i = 0; i < 32; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x->ids[i] = 5 + (int64_t)((s >> 33) % (uint64_t)(vocab - 5));
        x->mask[i] = 1;
        x->labels[i] = (s >> 20) % 4 == 0 ? x->ids[i] : -100;
    }
    x->b = (zt_batch){2, 16, x->ids, x->mask, NULL, x->labels, seed * 2, 0, 0, NULL, NULL, NULL, 0, NULL};
}

/* one tensor's reference copy and state */
typedef struct ref {
    zt_param_info pi;
    float *p, *g, *m, *v, *am, *av, *u, *row, *col;
    uint8_t *cm, *cv;
    int fp32;               /* AdamW8bit: fp32 moments */
} ref;

static ref *refs_create(zt_engine *e, int *n)
{
    *n = zt_engine_param_count(e);
    ref *r = calloc((size_t)*n, sizeof *r);
    assert_non_null(r);
    for (int i = 0; i < *n; i++) {
        size_t k;
        assert_int_equal(zt_engine_param_get(e, i, &r[i].pi), 0);
        k = r[i].pi.numel;
        r[i].p = malloc(k * 4);
        r[i].g = malloc(k * 4);
        r[i].m = calloc(k, 4);
        r[i].v = calloc(k, 4);
        r[i].u = calloc(k, 4);
        r[i].cm = malloc(k);
        r[i].cv = malloc(k);
        r[i].am = calloc(k / 256 + 1, 4);
        r[i].av = calloc(k / 256 + 1, 4);
        r[i].row = calloc(k, 4);
        r[i].col = calloc(k, 4);
        assert_int_equal(zt_engine_read_param(e, r[i].pi.name, r[i].p, k), 0);
    }
    return r;
}

static void refs_destroy(ref *r, int n)
{
    for (int i = 0; i < n; i++) {
        free(r[i].p), free(r[i].g), free(r[i].m), free(r[i].v), free(r[i].u);
        free(r[i].cm), free(r[i].cv), free(r[i].am), free(r[i].av);
        free(r[i].row), free(r[i].col);
    }
    free(r);
}

static void assert_params_equal(zt_engine *e, const ref *r, int n, int step)
{
    for (int i = 0; i < n; i++) {
        float *x = malloc(r[i].pi.numel * 4);
        assert_int_equal(zt_engine_read_param(e, r[i].pi.name, x, r[i].pi.numel), 0);
        for (size_t j = 0; j < r[i].pi.numel; j++)
            if (memcmp(&x[j], &r[i].p[j], 4) != 0)
                fail_msg("step %d: %s[%zu]: engine %.9g, kernel %.9g", step, r[i].pi.name, j,
                         x[j], r[i].p[j]);
        free(x);
    }
}

static zt_engine *tiny(zt_config *c, int *vocab)
{
    zt_engine *e = NULL;
    zt_model_info mi;
    c->model_dir = fixture();
    c->dropout = 0;
    c->grad_clip = 0.5f; /* (the gradients' norm is larger: the clip coefficient is used) */
    if (zt_engine_create(c, MPI_COMM_NULL, &e) != 0)
        fail_msg("create: %s", zt_last_error());
    zt_engine_model_info(e, &mi);
    *vocab = mi.vocab_size;
    return e;
}

/* one step of the engine; the gradients it used into the references */
static zt_step_info engine_step(zt_engine *e, ref *r, int n, int vocab, int step, float lr)
{
    batch x;
    zt_step_info si;
    make_batch(&x, vocab, (unsigned)step);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    assert_int_equal(zt_engine_forward_backward(e, &x.b, 0, NULL), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(zt_engine_read_grad(e, r[i].pi.name, r[i].g, r[i].pi.numel), 0);
    assert_int_equal(zt_engine_step(e, lr, &si), 0);
    assert_true(si.clip_coef < 1.0f);
    return si;
}

static void adam8_case(size_t min8, const char *const *fp32, int n_fp32)
{
    zt_config c;
    zt_config_init(&c);
    c.optimizer = ZT_OPT_ADAMW8BIT;
    c.lr = 3e-3f;
    c.min_8bit_size = min8;
    c.fp32_state = fp32;
    c.n_fp32_state = n_fp32;
    int vocab, n, n8 = 0, n32 = 0;
    zt_engine *e = tiny(&c, &vocab);
    ref *r = refs_create(e, &n);
    zt_adam8_maps *q = malloc(sizeof *q);
    zt_adam8_maps_init(q);
    for (int i = 0; i < n; i++) {
        r[i].fp32 = r[i].pi.numel < min8;
        for (int k = 0; k < n_fp32; k++)
            r[i].fp32 |= strstr(r[i].pi.name, fp32[k]) != NULL;
        zt_adam8bit_init(r[i].cm, r[i].cv, r[i].am, r[i].av, r[i].pi.numel);
        n8 += !r[i].fp32;
        n32 += r[i].fp32;
    }
    assert_true(n8 > 0 && n32 > 0); /* both kinds are exercised */
    for (int step = 1; step <= 4; step++) {
        zt_step_info si = engine_step(e, r, n, vocab, step, c.lr);
        zt_adamw_hparams hp = {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, step,
                               si.clip_coef, 0};
        assert_true(si.lr == c.lr);
        for (int i = 0; i < n; i++) {
            if (r[i].fp32)
                zt_adam32_update(r[i].p, r[i].g, r[i].m, r[i].v, r[i].pi.numel, &hp,
                                 r[i].pi.decay);
            else
                zt_adam8bit_update(q, r[i].p, r[i].g, r[i].cm, r[i].cv, r[i].am, r[i].av,
                                   r[i].pi.numel, &hp, r[i].pi.decay);
        }
        assert_params_equal(e, r, n, step);
    }
    free(q);
    refs_destroy(r, n);
    zt_engine_destroy(e);
}

static void test_adamw8bit_engine(void **state)
{
    static const char *const emb[] = {"word_embeddings"};
    (void)state;
    adam8_case(ZT_MIN_8BIT_SIZE, NULL, 0);  /* bert-tiny: 64-float vectors in fp32 */
    adam8_case(100, emb, 1);                /* the intermediate bias in 8 bits, the
                                             * word embeddings (tied decoder) in fp32 */
}

/* AdamW without bias correction (DeepSpeed's Adam with bias_correction false): 4 engine steps
 * against DeepSpeed's update written out in double from csrc/adam/multi_tensor_adam.cu (mode
 * 1, decoupled decay, both corrections 1): m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
 * p -= lr (m / (sqrt(v) + eps) + wd p). The engine computes in fp32 in torch's order (p (1 -
 * lr wd) first), about ten roundings (2^-24 each) per step on |p| and on the update (at most
 * (1 - b1) / sqrt(1 - b2) ~ 3.2 lr here): 4 steps stay within 4e-6 (|p| + 4 lr); the
 * bias-corrected update differs from it by about 2 lr (1e3 times that) from the first step. */
static void test_adamw_no_bias_correction(void **state)
{
    (void)state;
    zt_config c;
    zt_config_init(&c);
    assert_int_equal(c.bias_correction, 1); /* the default corrects, as torch does */
    c.bias_correction = 0;
    c.lr = 3e-3f;
    c.weight_decay = 0.01f;
    int vocab, n;
    zt_engine *e = tiny(&c, &vocab);
    ref *r = refs_create(e, &n);
    double **pm = calloc((size_t)n, sizeof *pm);
    for (int i = 0; i < n; i++) { /* p, m, v in double */
        size_t k = r[i].pi.numel;
        pm[i] = calloc(3 * k, sizeof(double));
        for (size_t j = 0; j < k; j++)
            pm[i][j] = r[i].p[j];
    }
    for (int step = 1; step <= 4; step++) {
        zt_step_info si = engine_step(e, r, n, vocab, step, c.lr);
        double lr = c.lr, b1 = c.beta1, b2 = c.beta2, eps = c.eps;
        for (int i = 0; i < n; i++) {
            size_t k = r[i].pi.numel;
            double *p = pm[i], *m = p + k, *v = m + k;
            double wd = r[i].pi.decay ? c.weight_decay : 0.0;
            float *x = malloc(k * 4);
            assert_int_equal(zt_engine_read_param(e, r[i].pi.name, x, k), 0);
            for (size_t j = 0; j < k; j++) {
                double g = (double)r[i].g[j] * si.clip_coef;
                m[j] = b1 * m[j] + (1 - b1) * g;
                v[j] = b2 * v[j] + (1 - b2) * g * g;
                p[j] -= lr * (m[j] / (sqrt(v[j]) + eps) + wd * p[j]);
                if (fabs(x[j] - p[j]) > 4e-6 * (fabs(p[j]) + 4 * lr))
                    fail_msg("step %d: %s[%zu]: engine %.9g, DeepSpeed's update %.9g", step,
                             r[i].pi.name, j, x[j], p[j]);
            }
            free(x);
        }
    }
    for (int i = 0; i < n; i++)
        free(pm[i]);
    free(pm);
    refs_destroy(r, n);
    zt_engine_destroy(e);
    /* AdamW8bit always corrects: refused by name */
    zt_config_init(&c);
    c.model_preset = "bert-tiny";
    c.optimizer = ZT_OPT_ADAMW8BIT;
    c.bias_correction = 0;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "bias_correction 0"));
}

static void adafactor_case(float beta1, int relative, float wd, float lr)
{
    zt_config c;
    zt_config_init(&c);
    c.optimizer = ZT_OPT_ADAFACTOR;
    c.adafactor_beta1 = beta1;
    c.relative_step = relative;
    c.lr = relative ? 0.0f : lr;
    c.weight_decay = wd;
    int vocab, n, nmat = 0;
    zt_engine *e = tiny(&c, &vocab);
    ref *r = refs_create(e, &n);
    for (int step = 1; step <= 4; step++) {
        zt_step_info si = engine_step(e, r, n, vocab, step, lr);
        zt_adafactor_hparams hp;
        zt_adafactor_defaults(&hp);
        hp.lr = lr;
        hp.beta1 = beta1;
        hp.relative_step = relative;
        hp.weight_decay = wd;
        hp.step = step;
        if (relative)
            assert_true(fabsf(si.lr - fminf(1e-2f, 1.0f / sqrtf((float)step))) < 1e-7f);
        for (int i = 0; i < n; i++) {
            const zt_param_info *pi = &r[i].pi;
            zt_adafactor_shape sh = {pi->numel, 0, 1};
            if (pi->ndim == 2)
                sh = (zt_adafactor_shape){(size_t)pi->shape[0], (size_t)pi->shape[1], 1};
            nmat += step == 1 && sh.cols;
            double *rs = calloc(sh.rows + 1, sizeof *rs), *cs = calloc(sh.cols + 1, sizeof *cs);
            zt_adafactor_sums s = {rs, cs, 0.0};
            zt_adafactor_sums_add(&sh, 0, pi->numel, r[i].p, r[i].g, si.clip_coef, hp.eps1, &s);
            float lr_t = zt_adafactor_stats(&sh, &hp, &s, r[i].row, r[i].col);
            double usq = zt_adafactor_precondition(&sh, &hp, 0, pi->numel, r[i].g, si.clip_coef,
                                                   r[i].row, r[i].col, r[i].v, r[i].u, NULL);
            zt_adafactor_apply(&hp, pi->numel, usq, lr_t, pi->numel, r[i].u,
                               beta1 >= 0 ? r[i].m : NULL, r[i].p, pi->decay);
            free(rs);
            free(cs);
        }
        assert_params_equal(e, r, n, step);
    }
    assert_true(nmat > 0);
    refs_destroy(r, n);
    zt_engine_destroy(e);
}

static void test_adafactor_engine(void **state)
{
    (void)state;
    adafactor_case(-1.0f, 1, 0.0f, 0.0f);   /* Hugging Face's defaults */
    adafactor_case(0.9f, 0, 0.01f, 1e-3f);  /* a first moment, a fixed lr, weight decay */
}

/* Adafactor's phase 3 from the gradient gives the bits of precondition + apply: a vector, a
 * matrix, and a [3, 7, 3] tensor (three matrices) in pieces that cut its rows and matrices */
static void test_adafactor_apply_grad(void **state)
{
    (void)state;
    const zt_adafactor_shape shapes[3] = {{63, 0, 1}, {7, 9, 1}, {7, 3, 3}};
    for (int c = 0; c < 3; c++) {
        zt_adafactor_shape sh = shapes[c];
        size_t n = 63, cut[3] = {0, c == 2 ? 23 : n, n};
        float p[63], q[63], g[63], u[63], v1[63], v2[63], m1[63] = {0}, m2[63] = {0};
        float row[21] = {0}, col[9] = {0}, cf[30];
        double rs[21] = {0}, cs[9] = {0};
        zt_adafactor_hparams hp;
        zt_adafactor_defaults(&hp);
        hp.beta1 = 0.9f;
        hp.weight_decay = 0.1f;
        assert_true(zt_adafactor_scratch(&sh) <= 30);
        for (size_t k = 0; k < n; k++) {
            p[k] = q[k] = sinf((float)k) * 0.1f;
            g[k] = cosf((float)k * 1.3f) * 0.01f;
            v1[k] = v2[k] = 0.0f;
        }
        zt_adafactor_sums s = {rs, cs, 0.0};
        zt_adafactor_sums_add(&sh, 0, n, p, g, 0.5f, hp.eps1, &s);
        float lr = zt_adafactor_stats(&sh, &hp, &s, row, col);
        double usq = 0.0, usq2 = 0.0;
        for (int k = 0; k < 2; k++) { /* u in pieces without scratch, the sum with it */
            size_t a = cut[k], m = cut[k + 1] - a;
            usq += zt_adafactor_precondition(&sh, &hp, a, m, g + a, 0.5f, row, col, v1 + a,
                                             u + a, NULL);
        }
        usq2 = zt_adafactor_precondition(&sh, &hp, 0, n, g, 0.5f, row, col, v2, NULL, cf);
        assert_true(c == 2 || usq == usq2); /* (pieces: the same sum in another order) */
        assert_true(fabs(usq - usq2) <= 1e-12 * usq);
        assert_memory_equal(v1, v2, sizeof v1);
        zt_adafactor_apply(&hp, n, usq, lr, n, u, m1, p, 1);
        for (int k = 0; k < 2; k++) {
            size_t a = cut[k], m = cut[k + 1] - a;
            zt_adafactor_apply_grad(&sh, &hp, a, m, g + a, 0.5f, row, col, v2 + a, usq, lr,
                                    m2 + a, q + a, 1, k ? cf : NULL);
        }
        assert_memory_equal(p, q, sizeof p);
        assert_memory_equal(m1, m2, sizeof m1);
    }
}

/* the state bytes per parameter the report gives for bert-mini (random init, no step) */
static double bytes_per_param(int opt, float beta1, int n_fp32_state, size_t *bytes)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_engine_report er;
    zt_config_init(&c);
    c.model_preset = "bert-mini";
    c.optimizer = opt;
    c.n_fp32_state = n_fp32_state;
    c.adafactor_beta1 = beta1;
    c.lr = opt == ZT_OPT_ADAFACTOR ? 0.0f : c.lr; /* (relative steps take no lr) */
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("create: %s", zt_last_error());
    assert_int_equal(zt_engine_report_get(e, &er), 0);
    zt_engine_destroy(e);
    *bytes = er.optimizer_state_bytes;
    return er.optimizer_bytes_per_param;
}

static void test_state_bytes(void **state)
{
    size_t b32, b8, b8e, baf, baf1;
    (void)state;
    double adamw = bytes_per_param(ZT_OPT_ADAMW, -1.0f, -1, &b32);
    double a8 = bytes_per_param(ZT_OPT_ADAMW8BIT, -1.0f, 0, &b8);
    double a8e = bytes_per_param(ZT_OPT_ADAMW8BIT, -1.0f, -1, &b8e);
    double af = bytes_per_param(ZT_OPT_ADAFACTOR, -1.0f, -1, &baf);
    double af1 = bytes_per_param(ZT_OPT_ADAFACTOR, 0.9f, -1, &baf1);
    print_message("optimizer state bytes per parameter (bert-mini): AdamW %.4f, AdamW8bit "
                  "%.4f (embedding tables in fp32, the default: %.4f), Adafactor %.4f, with "
                  "beta1 %.4f\n", adamw, a8, a8e, af, af1);
    assert_true(adamw == 8.0);
    /* size rule only: 2 code bytes + 8 bytes of maxima per 256, plus fp32 moments of the
     * small tensors */
    assert_true(a8 >= 2.0 + 8.0 / 256 && a8 <= 2.05);
    /* by default the embedding tables keep their two moments in fp32 too, 8 bytes more per
     * element: the word (30522 rows of 256) and position (512) tables; token types (2 x 256)
     * are below min_8bit_size already */
    assert_true(b8e - b8 == 8u * (30522u + 512u) * 256u);
    assert_true(af < 0.05);             /* rows + columns, and the vectors */
    assert_true(fabs(af1 - af - 4.0) < 1e-3);
}

static void test_misuse(void **state)
{
    zt_config c;
    zt_engine *e = NULL;
    (void)state;
    zt_config_init(&c);
    c.model_dir = fixture();
    c.optimizer = 7;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "ZT_OPT_ADAMW8BIT"));
    assert_null(e);
    zt_config_init(&c);
    c.model_dir = fixture();
    c.optimizer = ZT_OPT_ADAFACTOR;
    c.relative_step = 0;
    c.warmup_init = 1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "warmup_init"));
    /* relative steps and a manual lr (zt_config_init's AdamW 1e-4): Hugging Face's error;
     * an lr of 0 is none */
    zt_config_init(&c);
    c.model_dir = fixture();
    c.optimizer = ZT_OPT_ADAFACTOR;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "Adafactor with relative_step 1 computes its own "
                                            "step size, so it cannot be combined with a manual "
                                            "lr (lr 0.0001"));
    assert_non_null(strstr(zt_last_error(), "set lr 0"));
    assert_null(e);
    c.lr = 0.0f;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    zt_engine_destroy(e);
    e = NULL;
    c.relative_step = c.scale_parameter = 0;
    c.lr = 1e-3f; /* the T5 fine-tuning settings */
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    zt_engine_destroy(e);
    e = NULL;
    zt_config_init(&c);
    c.model_dir = fixture();
    c.optimizer = ZT_OPT_ADAMW8BIT;
    c.n_fp32_state = 2; /* and no array */
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "fp32_state"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw8bit_engine),
        cmocka_unit_test(test_adamw_no_bias_correction),
        cmocka_unit_test(test_adafactor_engine),
        cmocka_unit_test(test_adafactor_apply_grad),
        cmocka_unit_test(test_state_bytes),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
