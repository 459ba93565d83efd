/* test_flops.c - the model FLOP counter (zt_fb_result.flops) against a hand count for a
 * small BERT, and the profile: off by default (nothing counted), on it counts GEMM calls and
 * their FLOPs, which equal the model count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "zerotrain.h"

/* bert-tiny: 2 layers, hidden 128, 2 heads, intermediate 512; vocab cut to 100 */
enum { B = 2, T = 8, L = 2, C = 128, F = 512, V = 100 };

static zt_engine *tiny(void)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_config_init(&c);
    c.model_preset = "bert-tiny";
    c.vocab_size = V;
    c.threads = 1;
    assert_int_equal(zt_engine_create(&c, MPI_COMM_NULL, &e), 0);
    return e;
}

static void batch(zt_batch *b, int64_t *ids, int64_t *labels, int n_labelled)
{
    for (int i = 0; i < B * T; i++) {
        ids[i] = 5 + i % 90;
        labels[i] = i < n_labelled ? ids[i] : -100;
    }
    memset(b, 0, sizeof *b);
    b->B = B;
    b->T = T;
    b->input_ids = ids;
    b->labels = labels;
}

static void test_hand_count(void **state)
{
    (void)state;
    zt_engine *e = tiny();
    int64_t ids[B * T], labels[B * T];
    zt_batch b;
    zt_fb_result r;
    for (int n = 1; n <= 5; n += 4) {
        batch(&b, ids, labels, n);
        assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
        /* by hand, forward: per layer the four C x C projections (2*M*C*C each, M = 16
         * rows), the two feed-forward matrices (2*M*C*F each), attention scores and
         * context (2*T*T*(C/heads) per head and sample, each) ; the head's dense layer
         * (2*M*C*C) and the decoder over the n labelled rows (2*n*C*V). Backward: twice. */
        double M = B * T;
        double layer = 4 * (2 * M * C * C) + 2 * (2 * M * C * F) + 2 * (2.0 * B * 2 * T * T * (C / 2));
        double want = 3 * (L * layer + 2 * M * C * C + 2.0 * n * C * V);
        assert_true(fabs(r.flops - want) <= 1e-9 * want);
        assert_true(r.flops == 3 * (2 * (4 * 2.0 * 16 * 128 * 128 + 2 * 2.0 * 16 * 128 * 512 +
                                         2 * 2.0 * 2 * 2 * 8 * 8 * 64) +
                                    2.0 * 16 * 128 * 128 + 2.0 * n * 128 * 100));
    }
    zt_engine_destroy(e);
}

static void test_profile(void **state)
{
    (void)state;
    zt_engine *e = tiny();
    int64_t ids[B * T], labels[B * T];
    zt_batch b;
    zt_fb_result r;
    zt_profile_row rows[ZT_PROF_KINDS];
    batch(&b, ids, labels, 3);
    zt_profile_reset();
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
    assert_int_equal(zt_profile_get(rows, ZT_PROF_KINDS), ZT_PROF_KINDS);
    for (int k = 0; k < ZT_PROF_KINDS; k++) /* off: nothing counted */
        assert_int_equal(rows[k].calls, 0);
    zt_profile_enable(1);
    assert_int_equal(zt_engine_forward_backward(e, &b, 0, &r), 0);
    zt_profile_enable(0);
    zt_profile_get(rows, ZT_PROF_KINDS);
    assert_string_equal(rows[ZT_PROF_GEMM].kind, "GEMM");
    assert_true(rows[ZT_PROF_GEMM].calls > 0 && rows[ZT_PROF_GEMM].seconds > 0);
    /* every matrix product goes through the counted GEMMs: the same FLOPs as the model count */
    assert_true(fabs(rows[ZT_PROF_GEMM].flops - r.flops) <= 1e-9 * r.flops);
    assert_true(rows[ZT_PROF_LAYERNORM].calls > 0 && rows[ZT_PROF_SOFTMAX].calls > 0 &&
                rows[ZT_PROF_LOSS].calls == 1);
    zt_profile_reset();
    zt_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_count),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
