/* test_units.c - the unit API with a model of the test's own (one rank): registration and its
 * errors, initial values and the flat layout, a model too large for the machine refused at
 * commit, a pass's order recorded and checked, misuse
 * caught with the message it prints (unregistered unit, release twice, step before the
 * gradients are ready, registering after the first step, a changed order), gradient
 * accumulation with evaluation passes between, stage 2's gradient buffers, checkpoints of a registered model (resume bit-identical; another shape
 * refused), and one AdamW step against the formula. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZT_EXPERIMENTAL
#include "zerotrain.h"
#include "tmpdir.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    tmpdir_make(tmpdir, sizeof tmpdir, "zt_units");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove(tmpdir);
}

#define EXPECT_ERR(call, needle)                                                              \
    do {                                                                                      \
        int rc_ = (call);                                                                     \
        if (rc_ >= 0 || !strstr(zt_last_error(), needle))                                     \
            fail_msg("%s: rc %d, message \"%s\" lacks \"%s\"", #call, rc_, zt_last_error(),  \
                     needle);                                                                 \
    } while (0)

/* a model of three units: a [4, 3] matrix and a [4] vector each, initial values 0.1 i + u */
enum { NU = 3 };
static int accum = 1; /* grad_accum_steps of the next model() */
static zt_engine *model(int stage, int optimizer)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_config_init(&c);
    c.zero_stage = stage;
    c.grad_accum_steps = accum;
    c.optimizer = optimizer;
    c.threads = 1;
    c.lr = 1e-2f;
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("%s", zt_last_error());
    for (int u = 0; u < NU; u++) {
        char name[32], pw[48], pb[48];
        float w[12], b[4];
        int id;
        snprintf(name, sizeof name, "block.%d", u);
        snprintf(pw, sizeof pw, "block.%d.weight", u);
        snprintf(pb, sizeof pb, "block.%d.bias", u);
        for (int i = 0; i < 12; i++)
            w[i] = 0.1f * (float)i + (float)u;
        for (int i = 0; i < 4; i++)
            b[i] = -0.5f * (float)i;
        int64_t sw[2] = {4, 3}, sb[1] = {4};
        zt_param_spec ws = {pw, 2, sw, ZT_INIT_VALUES, 0, w, 0, NULL};
        zt_param_spec bs = {pb, 1, sb, ZT_INIT_VALUES, 0, b, 1, NULL};
        if (zt_engine_add_unit(e, name, 2, &id) != 0 || id != u ||
            zt_engine_add_param(e, id, &ws, NULL) != 0 || zt_engine_add_param(e, id, &bs, NULL))
            fail_msg("%s", zt_engine_last_error(e));
    }
    return e;
}

/* one training pass: forward in order, backward in reverse with gradient g[u] = 1 + u on
 * every element */
static void train_pass(zt_engine *e)
{
    float *p, *g;
    for (int u = 0; u < NU; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL), 0);
        assert_non_null(p);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    for (int u = NU - 1; u >= 0; u--) {
        zt_param_info w, b;
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g), 0);
        zt_engine_param_get(e, 2 * u, &w);
        zt_engine_param_get(e, 2 * u + 1, &b);
        for (size_t i = 0; i < w.numel; i++)
            g[w.offset + i] += 1.0f + (float)u;
        for (size_t i = 0; i < b.numel; i++)
            g[b.offset + i] += 1.0f + (float)u;
        assert_int_equal(zt_engine_unit_grads_ready(e, u), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
}

static void read_all(zt_engine *e, float *out)
{
    float *p;
    for (int u = 0; u < NU; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD | ZT_FOR_EVAL, &p, NULL), 0);
        for (int k = 0; k < 2; k++) {
            zt_param_info pi;
            zt_engine_param_get(e, 2 * u + k, &pi);
            memcpy(out, p + pi.offset, pi.numel * sizeof(float));
            out += pi.numel;
        }
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
}

/* registration: the layout (256-float boundaries), the initial values, the errors */
static void test_register(void **state)
{
    (void)state;
    zt_engine *e = model(0, ZT_OPT_ADAMW);
    zt_param_info pi;
    int64_t sh[2] = {2, 2}, bad[2] = {2, 0};
    float *p;
    zt_param_spec s = {"extra", 2, sh, ZT_INIT_NORMAL, 0.0f, NULL, 0, NULL};
    int id;
    EXPECT_ERR(zt_engine_add_param(e, 0, &s, NULL), "last unit added (2), not unit 0");
    EXPECT_ERR(zt_engine_add_param(e, 2, &s, NULL), "declared with 2 parameters, all added");
    assert_int_equal(zt_engine_add_unit(e, "tail", 1, &id), 0);
    EXPECT_ERR(zt_engine_add_param(e, id, &s, NULL), "std > 0");
    s.std = 0.02f;
    s.shape = bad;
    EXPECT_ERR(zt_engine_add_param(e, id, &s, NULL), "dimension 1 is 0");
    s.shape = sh;
    s.name = "block.1.bias";
    EXPECT_ERR(zt_engine_add_param(e, id, &s, NULL), "\"block.1.bias\" is registered already");
    EXPECT_ERR(zt_engine_add_unit(e, "block.0", 1, &id), "unit \"block.0\" is registered already");
    EXPECT_ERR(zt_engine_add_unit(e, "more", 1, &id), "unit 3 \"tail\" was declared with 1 "
                                                      "parameters and has 0");
    EXPECT_ERR(zt_engine_commit(e), "unit 3 \"tail\" was declared with 1 parameters and has 0");
    zt_engine_destroy(e);

    e = model(0, ZT_OPT_ADAMW);
    assert_int_equal(zt_engine_commit(e), 0);
    assert_int_equal(zt_engine_unit_count(e), NU);
    assert_string_equal(zt_engine_unit_name(e, 1), "block.1");
    assert_int_equal(zt_engine_param_get(e, 3, &pi), 0);
    assert_string_equal(pi.name, "block.1.bias");
    assert_int_equal(pi.unit, 1);
    assert_int_equal(pi.offset, 256); /* after the 12 weights, on the next 256-float boundary */
    assert_int_equal(pi.decay, 0);
    assert_int_equal(zt_engine_unit_acquire(e, 1, ZT_FOR_FORWARD, &p, NULL), 0);
    assert_true(p[5] == 0.1f * 5.0f + 1.0f && p[256 + 3] == -1.5f && p[12] == 0.0f);
    assert_int_equal(zt_engine_unit_release(e, 1), 0);
    EXPECT_ERR(zt_engine_add_unit(e, "late", 1, &id), "the model is fixed");
    zt_engine_destroy(e);
}

/* A 2^40-element parameter (4 TiB of fp32, 16 TiB with gradients and AdamW's moments) is
 * refused at commit before anything is allocated, with the predicted bytes, the machine's
 * and what would fit; a later call says the commit failed. */
static void test_too_large(void **state)
{
    (void)state;
    zt_config c;
    zt_engine *e = NULL;
    int64_t sh[2] = {1 << 20, 1 << 20};
    zt_param_spec s = {"huge", 2, sh, ZT_INIT_ZEROS, 0.0f, NULL, 0, NULL};
    int id;
    zt_config_init(&c);
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    assert_int_equal(zt_engine_add_unit(e, "huge", 1, &id), 0);
    assert_int_equal(zt_engine_add_param(e, id, &s, NULL), 0);
    assert_int_equal(zt_engine_commit(e), ZT_E_NOMEM);
    const char *m = zt_engine_last_error(e);
    if (!strstr(m, "the model registered with zt_engine_add_unit: the model does not fit this "
                   "machine: at ZeRO stage 0 it needs 17592186044416 bytes (16.0 TiB) of RAM") ||
        !strstr(m, "and the machine has") || !strstr(m, "It would fit with a model of at most") ||
        !strstr(m, "(this one has 1.1e+12; ZeRO stage 3 and offload do not help: they gather "
                   "each unit whole, and unit \"huge\" alone is 4.0 TiB)"))
        fail_msg("message: %s", m);
    EXPECT_ERR(zt_engine_step(e, 1e-3f, NULL), "the engine failed to commit earlier");
    zt_engine_destroy(e);
}

/* misuse: each a clear error, the engine usable afterwards */
static void test_misuse(void **state)
{
    (void)state;
    zt_engine *e = model(0, ZT_OPT_ADAMW);
    zt_batch b = {0};
    float *p, *g;
    EXPECT_ERR(zt_engine_unit_acquire(e, 7, ZT_FOR_FORWARD, &p, NULL),
               "unit 7 is not registered (units 0 to 2)");
    EXPECT_ERR(zt_engine_unit_acquire(e, 0, 16, &p, NULL), "purpose 16 is not one of");
    EXPECT_ERR(zt_engine_unit_acquire(e, 0, ZT_FOR_BACKWARD, &p, &g),
               "a backward pass follows a forward pass acquired for training");
    EXPECT_ERR(zt_engine_unit_release(e, 0), "unit 0 \"block.0\" is not acquired (released twice?)");
    assert_int_equal(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL), 0);
    assert_int_equal(zt_engine_unit_release(e, 0), 0);
    EXPECT_ERR(zt_engine_unit_release(e, 0), "is not acquired (released twice?)");
    EXPECT_ERR(zt_engine_forward_backward(e, &b, 0, NULL), "has no built-in model");
    for (int u = 1; u < NU; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    EXPECT_ERR(zt_engine_step(e, 1e-2f, NULL), "has no backward pass: the gradients are not ready");
    EXPECT_ERR(zt_engine_unit_grads_ready(e, 2), "was not acquired for backward in this pass");
    assert_int_equal(zt_engine_unit_acquire(e, 2, ZT_FOR_BACKWARD, &p, &g), 0);
    EXPECT_ERR(zt_engine_step(e, 1e-2f, NULL), "unit 2 \"block.2\" is still acquired");
    assert_int_equal(zt_engine_unit_grads_ready(e, 2), 0);
    EXPECT_ERR(zt_engine_unit_grads_ready(e, 2), "was made ready already");
    assert_int_equal(zt_engine_unit_release(e, 2), 0);
    EXPECT_ERR(zt_engine_unit_acquire(e, 2, ZT_FOR_BACKWARD, &p, &g),
               "unit 2 \"block.2\": its gradients were made ready already");
    EXPECT_ERR(zt_engine_step(e, 1e-2f, NULL), "gradients are not ready");
    zt_engine_destroy(e);

    /* an order recorded, then broken; a step before every unit is ready */
    e = model(0, ZT_OPT_ADAMW);
    train_pass(e);
    assert_int_equal(zt_engine_step(e, 1e-2f, NULL), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    int id;
    int64_t sh[1] = {4};
    zt_param_spec late = {"late.weight", 1, sh, ZT_INIT_ZEROS, 0, NULL, 0, NULL};
    EXPECT_ERR(zt_engine_add_unit(e, "late", 1, &id), "zt_engine_add_unit: the model is fixed "
               "once the engine has run");
    EXPECT_ERR(zt_engine_add_param(e, 2, &late, NULL), "zt_engine_add_param: the model is fixed");
    assert_int_equal(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL), 0);
    assert_int_equal(zt_engine_unit_release(e, 0), 0);
    EXPECT_ERR(zt_engine_unit_acquire(e, 2, ZT_FOR_FORWARD, &p, NULL),
               "the unit order changed: acquire 1 of the forward pass is unit 2 \"block.2\" for "
               "forward, where the order (recorded in the first forward pass, or declared) has "
               "unit 1 \"block.1\" for forward");
    for (int u = 1; u < NU; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    assert_int_equal(zt_engine_unit_acquire(e, 2, ZT_FOR_BACKWARD, &p, &g), 0);
    assert_int_equal(zt_engine_unit_grads_ready(e, 2), 0);
    assert_int_equal(zt_engine_unit_release(e, 2), 0);
    EXPECT_ERR(zt_engine_step(e, 1e-2f, NULL), "unit 0 \"block.0\"'s gradients are not ready");
    EXPECT_ERR(zt_engine_unit_acquire(e, 1, ZT_FOR_RECOMPUTE | ZT_FOR_EVAL, &p, NULL),
               "is not one of");
    zt_engine_destroy(e);
}

/* one AdamW step from zero moments: p - lr sign(g) (bias-corrected m / sqrt v = g / |g|),
 * decay on the weights only; stage 2 gives the same bits, and 8-bit AdamW's first step too */
static void test_step(void **state)
{
    (void)state;
    float a[3 * 16], b[3 * 16], c[3 * 16];
    zt_engine *e0 = model(0, ZT_OPT_ADAMW), *e2 = model(2, ZT_OPT_ADAMW);
    train_pass(e0);
    train_pass(e2);
    assert_int_equal(zt_engine_step(e0, 1e-2f, NULL), 0);
    assert_int_equal(zt_engine_step(e2, 1e-2f, NULL), 0);
    read_all(e0, a);
    read_all(e2, b);
    assert_memory_equal(a, b, sizeof a);
    for (int u = 0; u < NU; u++)
        for (int i = 0; i < 16; i++) {
            float p0 = i < 12 ? 0.1f * (float)i + (float)u : -0.5f * (float)(i - 12);
            float keep = i < 12 ? 1.0f - 1e-2f * 0.01f : 1.0f;
            float want = (p0 - 1e-2f) * keep;
            if (fabsf(a[16 * u + i] - want) > 1e-6f * (1.0f + fabsf(want)))
                fail_msg("unit %d element %d: %.9g, AdamW's first step gives %.9g", u, i,
                         a[16 * u + i], want);
        }
    /* the report as JSON: its length when the buffer is short, then the whole text */
    char small[8], big[8192];
    int len = zt_engine_report_json(e2, small, sizeof small);
    assert_true(len > (int)sizeof small && len < (int)sizeof big);
    assert_int_equal(zt_engine_report_json(e2, big, sizeof big), len);
    assert_int_equal(strlen(big), (size_t)len);
    assert_non_null(strstr(big, "\"zero_stage\": 2, \"params\": 3072,"));
    assert_non_null(strstr(big, "\"optimizer_bytes_per_param\": 8,"));
    assert_true(big[0] == '{' && big[len - 1] == '}');
    zt_engine *e8 = model(0, ZT_OPT_ADAMW8BIT);
    train_pass(e8);
    assert_int_equal(zt_engine_step(e8, 1e-2f, NULL), 0);
    read_all(e8, c);
    for (int i = 0; i < 3 * 16; i++) /* (small tensors keep fp32 moments: the same step) */
        if (fabsf(a[i] - c[i]) > 1e-6f * (1.0f + fabsf(a[i])))
            fail_msg("element %d: AdamW %.9g, AdamW8bit %.9g", i, a[i], c[i]);
    zt_engine_destroy(e0);
    zt_engine_destroy(e2);
    zt_engine_destroy(e8);
}

/* gradient accumulation: two passes per step; stage 2 (reduced per pass, added after) gives
 * stage 0's bits at one rank (the same two sums in the same order), an evaluation pass
 * between the two changes nothing */
static void test_accumulation(void **state)
{
    (void)state;
    float a[3 * 16], b[3 * 16], c[3 * 16];
    accum = 2;
    zt_engine *e0 = model(0, ZT_OPT_ADAMW), *e2 = model(2, ZT_OPT_ADAMW);
    accum = 1;
    zt_engine *e1 = model(0, ZT_OPT_ADAMW);
    for (int s = 0; s < 2; s++) {
        train_pass(e0);
        train_pass(e2);
        read_all(e2, c); /* an evaluation pass in between */
        train_pass(e0);
        train_pass(e2);
        assert_int_equal(zt_engine_step(e0, 1e-2f, NULL), 0);
        assert_int_equal(zt_engine_step(e2, 1e-2f, NULL), 0);
        assert_int_equal(zt_engine_zero_grad(e0), 0);
        assert_int_equal(zt_engine_zero_grad(e2), 0);
    }
    read_all(e0, a);
    read_all(e2, b);
    assert_memory_equal(a, b, sizeof a);
    /* one pass of twice the gradient: AdamW's step from 2g, not from g (the passes added) */
    zt_step_info si0, si1;
    train_pass(e1);
    assert_int_equal(zt_engine_step(e1, 1e-2f, &si1), 0);
    train_pass(e0);
    train_pass(e0);
    assert_int_equal(zt_engine_step(e0, 1e-2f, &si0), 0);
    assert_true(fabs(si0.grad_norm - 2.0 * si1.grad_norm) < 1e-9 * si1.grad_norm);
    zt_engine_destroy(e0);
    zt_engine_destroy(e1);
    zt_engine_destroy(e2);
}

/* stage 2 lends two gradient buffers besides unit 0's: a third open unit is refused */
static void test_stage2_buffers(void **state)
{
    (void)state;
    zt_config c;
    zt_engine *e;
    float *p, *g;
    int id;
    zt_config_init(&c);
    c.zero_stage = 2;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    for (int u = 0; u < 4; u++) {
        char n[16];
        int64_t sh[1] = {8};
        snprintf(n, sizeof n, "u%d", u);
        zt_param_spec s = {n, 1, sh, ZT_INIT_ZEROS, 0, NULL, 0, NULL};
        assert_int_equal(zt_engine_add_unit(e, n, 1, &id), 0);
        assert_int_equal(zt_engine_add_param(e, id, &s, NULL), 0);
    }
    for (int u = 0; u < 4; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    assert_int_equal(zt_engine_unit_acquire(e, 3, ZT_FOR_BACKWARD, &p, &g), 0);
    assert_int_equal(zt_engine_unit_acquire(e, 2, ZT_FOR_BACKWARD, &p, &g), 0);
    EXPECT_ERR(zt_engine_unit_acquire(e, 1, ZT_FOR_BACKWARD, &p, &g),
               "lends gradient buffers to two units at a time");
    /* the pass let go of, the engine trains again */
    assert_int_equal(zt_engine_pass_abort(e), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    for (int u = 0; u < 4; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    for (int u = 3; u >= 0; u--) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g), 0);
        g[0] = 1.0f;
        assert_int_equal(zt_engine_unit_grads_ready(e, u), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    zt_step_info si;
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
    assert_true(fabs(si.grad_norm - 2.0) < 1e-12); /* four gradients of 1 */
    zt_engine_destroy(e);
}

/* stage 3 with every unit gathered before use, lr 0 (parameters stay u + 1 everywhere): each
 * acquire must hand out its own unit's floats */
static zt_engine *flat(int nu, int stage)
{
    zt_config c;
    zt_engine *e;
    zt_config_init(&c);
    c.zero_stage = stage;
    c.persist_threshold = 0;
    c.weight_decay = 0.0f;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    for (int u = 0; u < nu; u++) {
        char n[16];
        float v[300];
        int64_t sh[1] = {300};
        int id;
        for (int i = 0; i < 300; i++)
            v[i] = (float)(u + 1);
        snprintf(n, sizeof n, "s%d", u);
        zt_param_spec sp = {n, 1, sh, ZT_INIT_VALUES, 0, v, 0, NULL};
        assert_int_equal(zt_engine_add_unit(e, n, 1, &id), 0);
        assert_int_equal(zt_engine_add_param(e, id, &sp, NULL), 0);
    }
    return e;
}

static void use(zt_engine *e, int u, int purpose)
{
    float *p = NULL, *g = NULL;
    if (zt_engine_unit_acquire(e, u, purpose, &p, purpose == ZT_FOR_BACKWARD ? &g : NULL) != 0)
        fail_msg("unit %d: %s", u, zt_engine_last_error(e));
    if (!p || p[0] != (float)(u + 1) || p[299] != (float)(u + 1) ||
        (purpose == ZT_FOR_BACKWARD && !g))
        fail_msg("unit %d: the acquire handed out %p (%g), grads %p", u, (void *)p,
                 p ? p[0] : 0.0f, (void *)g);
    if (g) {
        g[0] += 1.0f;
        assert_int_equal(zt_engine_unit_grads_ready(e, u), 0);
    }
    assert_int_equal(zt_engine_unit_release(e, u), 0);
}

static void flat_step(zt_engine *e, int nu)
{
    for (int u = 0; u < nu; u++)
        use(e, u, ZT_FOR_FORWARD);
    for (int u = nu - 1; u >= 0; u--)
        use(e, u, ZT_FOR_BACKWARD);
    assert_int_equal(zt_engine_step(e, 0.0f, NULL), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
}

/* One unit alone at every stage (stages 2 and 3 have no other unit to lend their scratch
 * gradient buffers to, and must not allocate them); a checkpoint of a negative step is
 * refused and writes nothing. */
static void test_single_unit(void **state)
{
    char root[400];
    zt_train_state st = {-5, 0, 0};
    zt_engine *e;
    (void)state;
    for (int stage = 0; stage <= 3; stage++) {
        e = flat(1, stage);
        if (zt_engine_commit(e) != 0)
            fail_msg("stage %d: %s", stage, zt_engine_last_error(e));
        flat_step(e, 1);
        flat_step(e, 1);
        zt_engine_destroy(e);
    }
    e = flat(1, 2);
    snprintf(root, sizeof root, "%s/negative", tmpdir);
    EXPECT_ERR(zt_checkpoint_save(e, root, &st, NULL, 0), "step -5 is negative");
    assert_int_equal(access(root, F_OK), -1);
    zt_engine_destroy(e);
}

static void test_schedule(void **state)
{
    (void)state;
    float *p, *g;
    /* the backward order declared, the forward one recorded */
    zt_engine *e = flat(5, 3);
    int units[5] = {4, 3, 2, 1, 0}, purp[5];
    for (int k = 0; k < 5; k++)
        purp[k] = ZT_FOR_BACKWARD;
    assert_int_equal(zt_engine_set_order(e, ZT_FOR_BACKWARD, units, purp, NULL, 5), 0);
    flat_step(e, 5);
    flat_step(e, 5);
    use(e, 0, ZT_FOR_FORWARD); /* and not while a training forward pass runs */
    EXPECT_ERR(zt_engine_set_order(e, ZT_FOR_BACKWARD, units, purp, NULL, 5),
               "between passes only");
    zt_engine_destroy(e);
    /* a refused acquire inside the recording backward pass moves nothing */
    e = flat(3, 3);
    for (int u = 0; u < 3; u++)
        use(e, u, ZT_FOR_FORWARD);
    use(e, 2, ZT_FOR_BACKWARD);
    EXPECT_ERR(zt_engine_unit_acquire(e, 2, ZT_FOR_BACKWARD, &p, &g), "made ready already");
    use(e, 1, ZT_FOR_BACKWARD);
    use(e, 0, ZT_FOR_BACKWARD);
    assert_int_equal(zt_engine_step(e, 0.0f, NULL), 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    flat_step(e, 3); /* the recorded order is the one the acquires made */
    zt_engine_destroy(e);
    /* more units than stage 3's 32 gather buffers, with the default prefetch budget */
    e = flat(40, 3);
    for (int s = 0; s < 3; s++)
        flat_step(e, 40);
    zt_engine_destroy(e);
    /* evaluation passes before any training pass, then training */
    e = flat(4, 3);
    for (int r = 0; r < 200; r++)
        for (int u = 0; u < 4; u++)
            use(e, u, ZT_FOR_FORWARD | ZT_FOR_EVAL);
    flat_step(e, 4);
    flat_step(e, 4);
    zt_engine_destroy(e);
    /* after a failed commit: errors, not crashes */
    zt_config c;
    int id;
    zt_config_init(&c);
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    assert_int_equal(zt_engine_add_unit(e, "half", 2, &id), 0);
    EXPECT_ERR(zt_engine_commit(e), "declared with 2 parameters and has 0");
    EXPECT_ERR(zt_engine_unit_release(e, 0), "is not acquired");
    EXPECT_ERR(zt_engine_unit_grads_ready(e, 0), "was not acquired for backward");
    EXPECT_ERR(zt_engine_add_unit(e, "more", 1, &id), "the engine failed to commit: destroy it");
    EXPECT_ERR(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL), "failed to commit");
    zt_engine_destroy(e);
}

/* a registered model's checkpoint: resuming gives the bits of not stopping; a model of
 * another shape is refused naming the unit */
static void test_checkpoint(void **state)
{
    (void)state;
    char root[400], dir[600];
    float a[3 * 16], b[3 * 16];
    zt_train_state st = {2, 0, 42}, got;
    zt_engine *e = model(3, ZT_OPT_ADAMW), *f;
    for (int s = 0; s < 2; s++) {
        train_pass(e);
        assert_int_equal(zt_engine_step(e, 1e-2f, NULL), 0);
        assert_int_equal(zt_engine_zero_grad(e), 0);
    }
    snprintf(root, sizeof root, "%s/ck", tmpdir);
    if (zt_checkpoint_save(e, root, &st, NULL, 0) != 0)
        fail_msg("%s", zt_engine_last_error(e));
    train_pass(e);
    assert_int_equal(zt_engine_step(e, 1e-2f, NULL), 0);
    read_all(e, a);
    f = model(0, ZT_OPT_ADAMW);
    snprintf(dir, sizeof dir, "%s/step-2", root);
    if (zt_checkpoint_load(f, dir, &got) != 0)
        fail_msg("%s", zt_engine_last_error(f));
    assert_int_equal(got.step, 2);
    train_pass(f);
    assert_int_equal(zt_engine_step(f, 1e-2f, NULL), 0);
    read_all(f, b);
    assert_memory_equal(a, b, sizeof a);
    zt_engine_destroy(f);
    /* another shape: unit 1's weight [4, 4] */
    zt_config c;
    zt_config_init(&c);
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &f), 0);
    for (int u = 0; u < NU; u++) {
        char n[32], pw[48], pb[48];
        int id;
        int64_t sw[2] = {4, u == 1 ? 4 : 3}, sb[1] = {4};
        snprintf(n, sizeof n, "block.%d", u);
        snprintf(pw, sizeof pw, "block.%d.weight", u);
        snprintf(pb, sizeof pb, "block.%d.bias", u);
        zt_param_spec ws = {pw, 2, sw, ZT_INIT_ZEROS, 0, NULL, 0, NULL};
        zt_param_spec bs = {pb, 1, sb, ZT_INIT_ZEROS, 0, NULL, 1, NULL};
        assert_int_equal(zt_engine_add_unit(f, n, 2, &id), 0);
        assert_int_equal(zt_engine_add_param(f, id, &ws, NULL), 0);
        assert_int_equal(zt_engine_add_param(f, id, &bs, NULL), 0);
    }
    EXPECT_ERR(zt_checkpoint_load(f, dir, &got), "parameter 0 of unit \"block.1\" differs");
    zt_engine_destroy(f);
    zt_engine_destroy(e);
}

/* lineages: --keep-style pruning leaves another engine's checkpoints, a load continues the
 * lineage (and gives back the trainer's record), zt_checkpoint_remove_other_runs removes the
 * rest; the trainer record's errors */
static void test_lineage(void **state)
{
    (void)state;
    char root[400], dir[600], big[5000];
    zt_train_state st = {1, 0, 42}, got;
    zt_engine *e = model(0, ZT_OPT_ADAMW), *g = model(0, ZT_OPT_ADAMW), *f = model(0, ZT_OPT_ADAMW);
    snprintf(root, sizeof root, "%s/lineage", tmpdir);
    EXPECT_ERR(zt_checkpoint_remove_other_runs(e, root), "saved or loaded no checkpoint yet");
    EXPECT_ERR(zt_checkpoint_set_trainer_info(e, "[1]"), "not a JSON object");
    memset(big, ' ', sizeof big - 1);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    big[sizeof big - 1] = '\0';
    EXPECT_ERR(zt_checkpoint_set_trainer_info(e, big), "at most 4095");
    assert_null(zt_checkpoint_trainer_info(e));
    assert_int_equal(zt_checkpoint_set_trainer_info(e, "{\"x\": 1}"), 0);
    assert_int_equal(zt_checkpoint_save(e, root, &st, NULL, 1), 0);
    st.step = 2; /* another engine: another lineage, e's step-1 stays */
    assert_int_equal(zt_checkpoint_save(g, root, &st, NULL, 1), 0);
    snprintf(dir, sizeof dir, "%s/step-1", root);
    assert_int_equal(access(dir, F_OK), 0);
    st.step = 3; /* e's own older one goes, g's stays */
    assert_int_equal(zt_checkpoint_save(e, root, &st, NULL, 1), 0);
    assert_int_not_equal(access(dir, F_OK), 0);
    snprintf(dir, sizeof dir, "%s/step-2", root);
    assert_int_equal(access(dir, F_OK), 0);
    snprintf(dir, sizeof dir, "%s/step-3", root);
    if (zt_checkpoint_load(f, dir, &got) != 0)
        fail_msg("%s", zt_engine_last_error(f));
    assert_non_null(zt_checkpoint_trainer_info(f));
    assert_string_equal(zt_checkpoint_trainer_info(f), "{\"x\": 1}");
    st.step = 4; /* f continues e's lineage: its step-3 is pruned, g's step-2 is not */
    assert_int_equal(zt_checkpoint_save(f, root, &st, NULL, 1), 0);
    assert_int_not_equal(access(dir, F_OK), 0);
    assert_int_equal(zt_checkpoint_remove_other_runs(f, root), 1);
    snprintf(dir, sizeof dir, "%s/step-2", root);
    assert_int_not_equal(access(dir, F_OK), 0);
    snprintf(dir, sizeof dir, "%s/step-4", root);
    assert_int_equal(zt_checkpoint_verify(dir), 0);
    zt_engine_destroy(f);
    zt_engine_destroy(g);
    zt_engine_destroy(e);
}

/* the divergence guard (skip_nonfinite): a pass with a NaN in one gradient leaves the
 * parameters, the optimizer state and the step count as they were, and names the unit; the
 * next finite step then gives the bits of a run that never saw the NaN. Without the guard
 * the update goes on (the NaN reaches the parameters). Non-finite lr and hyperparameters
 * are refused. */
static zt_engine *guarded(int skip)
{
    zt_engine *e = NULL;
    zt_config c;
    zt_config_init(&c);
    c.threads = 1;
    c.skip_nonfinite = skip;
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("%s", zt_last_error());
    for (int u = 0; u < NU; u++) {
        char name[32], pw[48];
        float w[12];
        int id;
        int64_t sw[2] = {4, 3};
        snprintf(name, sizeof name, "block.%d", u);
        snprintf(pw, sizeof pw, "block.%d.weight", u);
        for (int i = 0; i < 12; i++)
            w[i] = 0.1f * (float)i + (float)u;
        zt_param_spec ws = {pw, 2, sw, ZT_INIT_VALUES, 0, w, 0, NULL};
        if (zt_engine_add_unit(e, name, 1, &id) != 0 || zt_engine_add_param(e, id, &ws, NULL))
            fail_msg("%s", zt_engine_last_error(e));
    }
    return e;
}

static void pass_with(zt_engine *e, int nan_unit)
{
    float *p, *g;
    for (int u = 0; u < NU; u++) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
    for (int u = NU - 1; u >= 0; u--) {
        assert_int_equal(zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g), 0);
        for (int i = 0; i < 12; i++)
            g[i] += 0.5f + (float)u;
        if (u == nan_unit)
            g[7] = NAN;
        assert_int_equal(zt_engine_unit_grads_ready(e, u), 0);
        assert_int_equal(zt_engine_unit_release(e, u), 0);
    }
}

static void read_weights(zt_engine *e, float *out)
{
    char n[32];
    for (int u = 0; u < NU; u++) {
        snprintf(n, sizeof n, "block.%d.weight", u);
        assert_int_equal(zt_engine_read_param(e, n, out + 12 * u, 12), 0);
    }
}

static void test_guard(void **state)
{
    (void)state;
    float before[3 * 12], after[3 * 12], clean[3 * 12];
    zt_step_info si;
    zt_engine *e = guarded(1), *ref = guarded(1);
    /* e: finite, NaN in unit 1 (skipped), finite; ref: finite, finite */
    pass_with(e, -1);
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
    assert_int_equal(si.skipped, 0);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    read_weights(e, before);
    pass_with(e, 1);
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
    assert_int_equal(si.skipped, 1);
    assert_int_equal(si.nonfinite_unit, 1);
    assert_int_equal(si.step, 1);
    assert_true(isnan(si.grad_norm));
    read_weights(e, after);
    assert_memory_equal(before, after, sizeof before);
    assert_int_equal(zt_engine_zero_grad(e), 0);
    pass_with(e, -1);
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
    assert_int_equal(si.skipped, 0);
    assert_int_equal(si.step, 2);
    read_weights(e, after);
    for (int k = 0; k < 2; k++) {
        pass_with(ref, -1);
        assert_int_equal(zt_engine_step(ref, 1e-2f, &si), 0);
        assert_int_equal(zt_engine_zero_grad(ref), 0);
    }
    read_weights(ref, clean);
    assert_memory_equal(after, clean, sizeof after); /* moments and step count untouched */
    EXPECT_ERR(zt_engine_step(e, INFINITY, &si), "is not a finite number >= 0");
    zt_engine_destroy(e);
    zt_engine_destroy(ref);

    /* without the guard (the library's default) the update is applied */
    e = guarded(0);
    pass_with(e, 2);
    assert_int_equal(zt_engine_step(e, 1e-2f, &si), 0);
    assert_int_equal(si.skipped, 0);
    assert_int_equal(si.step, 1);
    read_weights(e, after);
    assert_true(isnan(after[2 * 12 + 7]));
    zt_engine_destroy(e);

    zt_config c;
    zt_config_init(&c);
    EXPECT_ERR(zt_config_set(&c, "lr", "1e39"), "is not a finite number");
    c.beta2 = INFINITY;
    EXPECT_ERR(zt_engine_create(&c, MPI_COMM_NULL, &e), "beta2 is inf: hyperparameters must be finite");
    assert_int_equal(zt_config_set(&c, "skip_nonfinite", "1"), 0);
    assert_int_equal(c.skip_nonfinite, 1);
}

/* zt_config_set: names, values, errors */
static void test_config_set(void **state)
{
    (void)state;
    zt_config c;
    assert_int_equal(zt_config_size(), sizeof c);
    zt_config_init(&c);
    assert_int_equal(zt_config_set(&c, "zero_stage", "3"), 0);
    assert_int_equal(zt_config_set(&c, "optimizer", "adamw8bit"), 0);
    assert_int_equal(zt_config_set(&c, "offload_optimizer", "nvme"), 0);
    assert_int_equal(zt_config_set(&c, "lr", "2.5e-3"), 0);
    assert_int_equal(zt_config_set(&c, "nvme_path", "/tmp/x"), 0);
    assert_int_equal(zt_config_set(&c, "seed", "18446744073709551615"), 0);
    assert_true(c.zero_stage == 3 && c.optimizer == ZT_OPT_ADAMW8BIT &&
                c.offload_optimizer == ZT_OFFLOAD_NVME && c.lr == 2.5e-3f &&
                strcmp(c.nvme_path, "/tmp/x") == 0 && c.seed == UINT64_MAX);
    EXPECT_ERR(zt_config_set(&c, "zero_stag", "3"), "no key \"zero_stag\"");
    EXPECT_ERR(zt_config_set(&c, "zero_stage", "3x"), "zero_stage \"3x\" is not an integer");
    EXPECT_ERR(zt_config_set(&c, "optimizer", "sgd"), "one of adamw, adamw8bit, adafactor");
    EXPECT_ERR(zt_config_set(&c, "lr", "nan"), "not a finite number");
    assert_int_equal(zt_config_set(&c, "lr", "None"), 0); /* no lr (Python's None) */
    assert_true(c.lr == 0.0f);
    EXPECT_ERR(zt_config_set(&c, "beta1", "None"), "not a finite number");
    int n = 0;
    while (zt_config_key(n))
        n++;
    assert_true(n > 30);
}

/* zt_config_set(b, name, value) on a copy b of a: fails the test on an error or a byte
 * written outside [off, off + size); returns whether it changed a byte. */
static int set_in_field(const zt_config *a, zt_config *b, const char *name, const char *value,
                        size_t off, size_t size)
{
    if (zt_config_set(b, name, value) != 0)
        fail_msg("zt_config_set(%s, %s): %s", name, value, zt_last_error());
    const unsigned char *pa = (const unsigned char *)a, *pb = (const unsigned char *)b;
    int changed = 0;
    for (size_t j = 0; j < sizeof *a; j++) {
        if (pa[j] == pb[j])
            continue;
        if (j < off || j >= off + size)
            fail_msg("zt_config_set(%s) wrote byte %zu, outside the field", name, j);
        changed = 1;
    }
    return changed;
}

/* Every field of the public zt_config, written out here from the header: each is settable by
 * its name through zt_config_set (which writes its bytes and nothing else, and zt_config_key
 * lists it), but the two pattern arrays (pointers to arrays of strings: set in C, or from a
 * JSON config). The list is checked to be the whole struct: sorted by offset, the only gaps
 * are shorter than the next field's alignment (padding), and it ends at sizeof (rounded). A
 * field added to the header without a key fails here once it is added to the list, and the
 * coverage check fails until it is. */
typedef struct cfg_field {
    const char *name, *value; /* value NULL: not settable by name */
    size_t off, size, align;
} cfg_field;
#define CF(f, v) {#f, v, offsetof(zt_config, f), sizeof(((zt_config *)0)->f), \
                  _Alignof(__typeof__(((zt_config *)0)->f))}
static const cfg_field cfg_fields[] = {
    CF(model_dir, "x"), CF(model_preset, "x"), CF(model_config, "x"), CF(vocab_size, "7"),
    CF(seed, "7"), CF(threads, "7"), CF(dropout, "7"), CF(lr, "0.5"), CF(beta1, "0.5"),
    CF(beta2, "0.5"), CF(eps, "0.5"), CF(weight_decay, "0.5"), CF(bias_correction, "7"),
    CF(grad_clip, "0.5"),
    CF(decay_all, "7"), CF(no_decay, NULL), CF(n_no_decay, "7"), CF(zero_stage, "7"),
    CF(bucket_size, "7"), CF(overlap_comm, "7"), CF(grad_accum_steps, "7"),
    CF(prefetch_size, "7"), CF(max_live, "7"), CF(persist_threshold, "7"), CF(progress, "7"),
    CF(collective_timeout, "0.5"), CF(check_collectives, "7"), CF(offload_optimizer, "cpu"),
    CF(nvme_path, "x"), CF(aio_block_size, "7"), CF(aio_queue_depth, "7"),
    CF(aio_threads, "7"), CF(aio_single_submit, "7"), CF(aio_overlap_events, "7"),
    CF(offload_buffers, "7"), CF(sub_group_size, "7"), CF(offload_param, "cpu"),
    CF(offload_param_buffers, "7"), CF(offload_param_buffer_size, "7"),
    CF(offload_param_max_in_cpu, "7"), CF(offload_gradients, "7"), CF(recompute, "every-k"),
    CF(recompute_k, "7"), CF(number_checkpoints, "7"), CF(offload_checkpoints, "7"),
    CF(recompute_profile, "7"), CF(direct_io, "7"), CF(memory_limit, "7"),
    CF(plan_micro_batch, "7"), CF(plan_seq_len, "7"), CF(optimizer, "adafactor"),
    CF(min_8bit_size, "7"), CF(fp32_state, NULL), CF(n_fp32_state, "7"),
    CF(adafactor_eps1, "0.5"), CF(adafactor_eps2, "0.5"), CF(clip_threshold, "0.5"),
    CF(decay_rate, "0.5"), CF(adafactor_beta1, "0.5"), CF(relative_step, "7"),
    CF(scale_parameter, "7"), CF(warmup_init, "7"), CF(max_coeff, "0.5"),
    CF(min_coeff, "0.5"), CF(eps_inside_sqrt, "7"), CF(skip_nonfinite, "7"),
    CF(head, "classify"), CF(num_labels, "7"), CF(problem_type, "regression"),
    CF(electra_generator_size, "0.5"), CF(label_names, NULL), CF(inference, "7"), CF(precision, "bf16"), CF(grad_accum_dtype, "fp16"),
    CF(loss_scale, "0.5"), CF(initial_scale_power, "7"), CF(loss_scale_window, "7"),
    CF(hysteresis, "7"), CF(consecutive_hysteresis, "7"), CF(min_loss_scale, "0.5"),
    CF(comm_dtype, "bf16"),
};
#undef CF

static void test_config_every_field(void **state)
{
    (void)state;
    size_t nf = sizeof cfg_fields / sizeof cfg_fields[0], end = 0, max_align = 1;
    int keys = 0, named = 0;
    while (zt_config_key(keys))
        keys++;
    /* the list is the whole struct: fields in offset order, gaps only padding */
    for (size_t i = 0; i < nf; i++) {
        const cfg_field *f = &cfg_fields[i];
        if (f->off < end || f->off - end >= f->align)
            fail_msg("zt_config: %zu bytes before %s at offset %zu not covered by this list "
                     "(a field of the header missing here?)", f->off - end, f->name, f->off);
        end = f->off + f->size;
        max_align = f->align > max_align ? f->align : max_align;
    }
    if ((end + max_align - 1) / max_align * max_align != sizeof(zt_config))
        fail_msg("zt_config is %zu bytes, the listed fields end at %zu: a field of the header "
                 "missing here?", sizeof(zt_config), end);
    /* each settable by its name: its bytes change, and no other's */
    for (size_t i = 0; i < nf; i++) {
        const cfg_field *f = &cfg_fields[i];
        int listed = 0;
        for (int k = 0; k < keys; k++)
            listed |= strcmp(zt_config_key(k), f->name) == 0;
        if (!f->value) {
            assert_false(listed);
            continue;
        }
        if (!listed)
            fail_msg("zt_config.%s: zt_config_key does not list it", f->name);
        zt_config a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        if (!set_in_field(&a, &b, f->name, f->value, f->off, f->size))
            fail_msg("zt_config_set(%s, %s) changed nothing", f->name, f->value);
        named++;
    }
    assert_int_equal(named, keys); /* and no key names something not in the struct */
}

/* Every key of docs/config.md's zt_config table (zt_train_config_reference, generated from the
 * field list) is settable through zt_config_set: set to a value other than zt_config_init's,
 * its bytes change and no other's, and zt_config_get reads the value back; the pattern arrays
 * are refused. The table lists exactly the header's fields (cfg_fields) and zt_config_key's
 * keys, so a library user sees every settable key. */
static void test_config_documented_keys(void **state)
{
    (void)state;
    size_t nf = sizeof cfg_fields / sizeof cfg_fields[0];
    int seen[sizeof cfg_fields / sizeof cfg_fields[0]] = {0}, rows = 0, settable = 0, keys = 0;
    const char *p = strstr(zt_train_config_reference(), "\n## zt_config fields\n");
    while (zt_config_key(keys))
        keys++;
    assert_non_null(p);
    assert_non_null(p = strstr(p, "\n|---"));
    for (p = strchr(p + 1, '\n') + 1; *p == '|'; p = strchr(p, '\n') + 1) {
        char line[2048], *col[8] = {0}, *save = NULL, name[64], value[64];
        int nc = 0;
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
        for (char *c = strtok_r(line, "|", &save); c && nc < 8; c = strtok_r(NULL, "|", &save)) {
            while (*c == ' ')
                c++;
            for (char *e = c + strlen(c); e > c && e[-1] == ' ';)
                *--e = '\0';
            col[nc++] = c;
        }
        assert_true(nc >= 5);
        if (sscanf(col[0], "`%63[a-z0-9_]`", name) != 1)
            fail_msg("docs/config.md: zt_config row without a `name`: %s", col[0]);
        size_t i = 0;
        while (i < nf && strcmp(cfg_fields[i].name, name))
            i++;
        if (i == nf)
            fail_msg("docs/config.md documents zt_config.%s, which the header lacks", name);
        if (seen[i]++)
            fail_msg("docs/config.md documents zt_config.%s twice", name);
        rows++;
        const char *type = col[1];
        if (!strcmp(type, "const char *const *")) { /* a pattern array: C or JSON only */
            zt_config c;
            zt_config_init(&c);
            assert_int_equal(zt_config_set(&c, name, "x"), ZT_E_CONFIG);
            continue;
        }
        if (!strcmp(type, "int (by name)")) { /* an enumeration: its last value, not the default */
            const char *last = strrchr(col[3], '"');
            const char *open = last ? last - 1 : NULL;
            while (open && open > col[3] && *open != '"')
                open--;
            assert_true(open && last > open);
            snprintf(value, sizeof value, "%.*s", (int)(last - open - 1), open + 1);
            assert_true(strstr(col[2], value) == NULL);
        } else if (!strcmp(type, "float") || !strcmp(type, "double")) {
            snprintf(value, sizeof value, "0.5");
        } else if (!strcmp(type, "const char *")) {
            snprintf(value, sizeof value, "x");
        } else if (!strcmp(type, "int") || !strcmp(type, "size_t") || !strcmp(type, "uint64_t")) {
            snprintf(value, sizeof value, "7");
        } else {
            fail_msg("docs/config.md: zt_config.%s has the type \"%s\", which this test does not "
                     "know", name, type);
        }
        assert_true(strcmp(col[2], value) != 0); /* (not the default) */
        const cfg_field *f = &cfg_fields[i];
        zt_config a, b;
        char got[64];
        zt_config_init(&a);
        zt_config_init(&b);
        if (!set_in_field(&a, &b, name, value, f->off, f->size))
            fail_msg("zt_config_set(%s, %s) left zt_config_init's value", name, value);
        if (zt_config_get(&b, name, got, sizeof got) < 0 || strcmp(got, value))
            fail_msg("zt_config_get(%s) after setting %s: %s", name, value, got);
        settable++;
    }
    for (size_t i = 0; i < nf; i++)
        if (!seen[i])
            fail_msg("zt_config.%s: not in docs/config.md's zt_config table", cfg_fields[i].name);
    assert_int_equal(rows, (int)nf);
    assert_int_equal(settable, keys); /* every key zt_config_key lists is documented */
    char tiny[2];
    zt_config c;
    zt_config_init(&c);
    assert_int_equal(zt_config_get(&c, "optimizer", tiny, sizeof tiny), ZT_E_NOMEM);
    EXPECT_ERR(zt_config_get(&c, "no_decay", tiny, sizeof tiny), "no key \"no_decay\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register),     cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_step),         cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_stage2_buffers), cmocka_unit_test(test_single_unit),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_checkpoint),   cmocka_unit_test(test_lineage),
        cmocka_unit_test(test_config_set),   cmocka_unit_test(test_guard),
        cmocka_unit_test(test_config_every_field),
        cmocka_unit_test(test_config_documented_keys),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
