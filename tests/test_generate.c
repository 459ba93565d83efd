/* test_generate.c - zt_generate on the t5-tiny fixture (random weights): the decoder's
 * key/value caches give the same tokens as decoding without them (each step the whole
 * decoder over the tokens so far, zt_engine_evaluate) and logits within fp32 rounding of
 * them, for greedy decoding and beam search; the same tokens at stage 3 with offloaded
 * parameters; beam search with one beam is greedy; the logits hook changes what is chosen
 * and its failure fails the call; misuse is refused with a message and no tokens. The
 * tokens themselves are checked against an independent PyTorch beam search in
 * tests/test_generate.sh (tests/ref/generate_ref.py). */
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

enum { B = 3, T = 7, MAXN = 12, MAXR = 3 * 4, V = 512 };

static const int64_t ids[B * T] = {37, 5, 99, 410, 23, 8, 1, /* */ 200, 201, 3, 1, 0, 0, 0,
                                   77, 66, 55, 44, 33, 22, 1};
static const int64_t mask[B * T] = {1, 1, 1, 1, 1, 1, 1, /* */ 1, 1, 1, 1, 0, 0, 0,
                                    1, 1, 1, 1, 1, 1, 1};

static zt_engine *t5(int stage, int offload)
{
    static char dir[1024];
    const char *f = getenv("ZT_FIXTURES");
    zt_config c;
    zt_engine *e;
    snprintf(dir, sizeof dir, "%s/t5-tiny", f ? f : "tests/fixtures");
    zt_config_init(&c);
    c.model_dir = dir;
    c.inference = 1;
    c.dropout = 0;
    c.threads = 1;
    c.zero_stage = stage;
    c.offload_param = offload ? ZT_OFFLOAD_CPU : ZT_OFFLOAD_NONE;
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("%s", zt_last_error());
    return e;
}

/* every step's logits, as the hook saw them */
typedef struct trace { int steps, rows; float *lg; } trace;

static int record(void *arg, int step, float *logits, int rows, int nv)
{
    trace *t = arg;
    assert_int_equal(nv, V);
    assert_int_equal(step, t->steps);
    memcpy(t->lg + (size_t)step * MAXR * V, logits, sizeof *logits * (size_t)rows * V);
    t->rows = rows;
    t->steps++;
    return 0;
}

typedef struct out { int32_t ids[B * MAXN]; int lens[B]; float scores[B]; int passes; } out;

static void run(zt_engine *e, int beams, int cache, trace *t, out *o)
{
    zt_batch b = {B, T, (int64_t *)ids, (int64_t *)mask, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    zt_generate_config g;
    zt_generate_config_init(&g);
    g.max_new_tokens = MAXN;
    g.num_beams = beams;
    g.use_cache = cache;
    if (t) {
        t->steps = 0;
        g.logits_hook = record;
        g.hook_arg = t;
    }
    o->passes = zt_generate(e, &b, &g, o->ids, o->lens, o->scores);
    if (o->passes < 0)
        fail_msg("%s", zt_engine_last_error(e));
}

/* Cached against uncached: the same passes, tokens and lengths; the logits within
 * 2e-5 + 2e-5 |x|. Both are the same fp32 sums in another order (one query row against the
 * cached keys, or every row against all keys with the future masked: exp(-1e9) is 0), over
 * 2 + 2 blocks of width 64: a few ulps (1.2e-7 relative) per sum, compounding through the
 * layer norms to ~1e-6 of the logits' scale. A wrong cache (a stale position, a missing
 * position bias, a beam not reordered) moves them by 1e-2 or more. */
static void test_cache_matches(void **state)
{
    (void)state;
    zt_engine *e = t5(0, 0);
    trace tc = {0, 0, malloc(sizeof(float) * MAXN * MAXR * V)};
    trace tu = {0, 0, malloc(sizeof(float) * MAXN * MAXR * V)};
    for (int beams = 1; beams <= 4; beams += 3) {
        out oc, ou;
        run(e, beams, 1, &tc, &oc);
        run(e, beams, 0, &tu, &ou);
        assert_int_equal(oc.passes, ou.passes);
        assert_int_equal(tc.steps, oc.passes);
        assert_int_equal(tc.rows, B * beams);
        assert_memory_equal(oc.lens, ou.lens, sizeof oc.lens);
        assert_memory_equal(oc.ids, ou.ids, sizeof oc.ids);
        double worst = 0;
        for (size_t i = 0; i < (size_t)tc.steps * MAXR * V; i++) {
            if ((i % ((size_t)MAXR * V)) >= (size_t)tc.rows * V)
                continue;
            double d = fabs((double)tc.lg[i] - tu.lg[i]), tol = 2e-5 + 2e-5 * fabs(tu.lg[i]);
            if (d > tol)
                fail_msg("beams %d: logit %zu: cached %.9g uncached %.9g", beams, i, tc.lg[i],
                         tu.lg[i]);
            worst = d > worst ? d : worst;
        }
        for (int r = 0; r < B; r++) {
            assert_true(oc.lens[r] >= 1 && oc.lens[r] <= MAXN);
            assert_true(fabsf(oc.scores[r] - ou.scores[r]) <= 1e-4f * (1 + fabsf(ou.scores[r])));
            for (int j = oc.lens[r]; j < MAXN; j++)
                assert_int_equal(oc.ids[r * MAXN + j], 0); /* pad after */
        }
        print_message("beams %d: %d passes, lens %d %d %d, max |cached - uncached| %.3g\n",
                      beams, oc.passes, oc.lens[0], oc.lens[1], oc.lens[2], worst);
    }
    free(tc.lg);
    free(tu.lg);
    zt_engine_destroy(e);
}

/* greedy's score is the chosen tokens' summed log-probability, recomputed here from the
 * recorded logits; beam search with one beam is greedy, token for token */
static void test_greedy(void **state)
{
    (void)state;
    zt_engine *e = t5(0, 0);
    trace t = {0, 0, malloc(sizeof(float) * MAXN * MAXR * V)};
    out o;
    run(e, 1, 1, &t, &o);
    for (int r = 0; r < B; r++) {
        double sum = 0;
        for (int s = 0; s < o.lens[r]; s++) {
            const float *l = t.lg + ((size_t)s * MAXR + r) * V;
            int best = 0;
            double z = 0;
            for (int v = 1; v < V; v++)
                best = l[v] > l[best] ? v : best;
            assert_int_equal(o.ids[r * MAXN + s], best);
            for (int v = 0; v < V; v++)
                z += exp((double)l[v] - l[best]);
            sum -= log(z);
        }
        assert_true(fabs(o.scores[r] - sum) <= 1e-5 * (1 + fabs(sum)));
    }
    free(t.lg);
    zt_engine_destroy(e);
}

/* stage 3 with the parameters offloaded to RAM: the same tokens and scores, bit for bit */
static void test_stage3_offload(void **state)
{
    (void)state;
    zt_engine *a = t5(0, 0), *b = t5(3, 1);
    for (int beams = 1; beams <= 4; beams += 3) {
        out oa, ob;
        run(a, beams, 1, NULL, &oa);
        run(b, beams, 1, NULL, &ob);
        assert_memory_equal(&oa, &ob, sizeof oa);
    }
    zt_engine_destroy(a);
    zt_engine_destroy(b);
}

/* a hook as a logits processor: </s> and token 0 forbidden, every row runs to max_new_tokens
 * without them; a hook's failure fails the call with a message */
static int forbid(void *arg, int step, float *logits, int rows, int nv)
{
    (void)arg;
    (void)step;
    for (int r = 0; r < rows; r++)
        logits[(size_t)r * nv + 1] = logits[(size_t)r * nv] = -INFINITY;
    return 0;
}

static int fail_at_2(void *arg, int step, float *logits, int rows, int nv)
{
    (void)arg, (void)logits, (void)rows, (void)nv;
    return step == 2;
}

static void test_hook(void **state)
{
    (void)state;
    zt_engine *e = t5(0, 0);
    zt_batch b = {B, T, (int64_t *)ids, (int64_t *)mask, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    zt_generate_config g;
    out o;
    for (int beams = 1; beams <= 3; beams += 2) {
        zt_generate_config_init(&g);
        g.max_new_tokens = MAXN;
        g.num_beams = beams;
        g.logits_hook = forbid;
        assert_int_equal(zt_generate(e, &b, &g, o.ids, o.lens, NULL), MAXN);
        for (int r = 0; r < B; r++) {
            assert_int_equal(o.lens[r], MAXN);
            for (int j = 0; j < MAXN; j++)
                assert_true(o.ids[r * MAXN + j] > 1);
        }
    }
    g.logits_hook = fail_at_2;
    assert_true(zt_generate(e, &b, &g, o.ids, o.lens, NULL) < 0);
    assert_non_null(strstr(zt_engine_last_error(e), "logits hook failed at step 2"));
    run(e, 1, 1, NULL, &o); /* the engine still generates */
    assert_true(o.passes >= 1);
    zt_engine_destroy(e);
}

static void test_misuse(void **state)
{
    (void)state;
    zt_engine *e = t5(0, 0), *bert;
    zt_batch b = {B, T, (int64_t *)ids, (int64_t *)mask, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
    zt_generate_config g;
    out o;
    zt_generate_config_init(&g);
    assert_true(zt_generate(e, &b, &g, NULL, o.lens, NULL) < 0);
    assert_non_null(strstr(zt_engine_last_error(e), "NULL argument"));
    g.max_new_tokens = 0;
    assert_true(zt_generate(e, &b, &g, o.ids, o.lens, NULL) < 0);
    assert_non_null(strstr(zt_engine_last_error(e), "max_new_tokens 0"));
    zt_generate_config_init(&g);
    g.num_beams = 0;
    assert_true(zt_generate(e, &b, &g, o.ids, o.lens, NULL) < 0);
    zt_generate_config_init(&g);
    g.eos_token_id = V;
    assert_true(zt_generate(e, &b, &g, o.ids, o.lens, NULL) < 0);
    assert_non_null(strstr(zt_engine_last_error(e), "below vocab_size 512"));
    zt_batch empty = b;
    empty.B = 0;
    zt_generate_config_init(&g);
    assert_true(zt_generate(e, &empty, &g, o.ids, o.lens, NULL) < 0);
    zt_engine_destroy(e);
    zt_config c;
    zt_config_init(&c);
    c.model_preset = "bert-tiny";
    c.vocab_size = 512;
    c.inference = 1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &bert), 0);
    assert_int_equal(zt_generate(bert, &b, &g, o.ids, o.lens, NULL), ZT_E_UNSUPPORTED);
    assert_non_null(strstr(zt_engine_last_error(bert), "encoder-decoder"));
    zt_engine_destroy(bert);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_matches), cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_stage3_offload), cmocka_unit_test(test_hook),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
