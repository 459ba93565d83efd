/* test_data.c - masked-LM samples (engine/data.c): a row is a function of (seed, global
 * sample index) only; specials are never masked; the 15% / 80-10-10 rule holds within
 * statistical bounds; an epoch of a real corpus reads every sequence exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerotrain.h"

enum { T = 32, V = 1000 };

static void fill(zt_mlm_source *s, uint64_t first, int B, int64_t *ids, int64_t *labels)
{
    int64_t *mask = malloc(sizeof(int64_t) * (size_t)B * T), *tt = malloc(sizeof(int64_t) * (size_t)B * T);
    assert_int_equal(zt_mlm_source_fill(s, first, B, ids, mask, tt, labels), 0);
    for (int i = 0; i < B * T; i++)
        assert_true(mask[i] == 1 && tt[i] == 0);
    free(mask);
    free(tt);
}

static void test_split_invariance(void **state)
{
    zt_mlm_source *s;
    int64_t a[8 * T], la[8 * T], b[5 * T], lb[5 * T];
    (void)state;
    assert_int_equal(zt_mlm_source_create(NULL, V, T, 0.15f, 9, &s), 0);
    fill(s, 100, 8, a, la);
    fill(s, 103, 5, b, lb); /* samples 103..107 = rows 3..7 of the first call */
    assert_memory_equal(a + 3 * T, b, sizeof b);
    assert_memory_equal(la + 3 * T, lb, sizeof lb);
    zt_mlm_source_destroy(s);
    /* another seed gives other rows */
    assert_int_equal(zt_mlm_source_create(NULL, V, T, 0.15f, 10, &s), 0);
    fill(s, 103, 5, b, lb);
    assert_memory_not_equal(a + 3 * T, b, sizeof b);
    zt_mlm_source_destroy(s);
}

static void test_masking_statistics(void **state)
{
    enum { B = 400 };
    zt_mlm_source *s;
    int64_t *ids = malloc(sizeof(int64_t) * B * T), *lab = malloc(sizeof(int64_t) * B * T);
    long labelled = 0, masked = 0, kept = 0, positions = 0;
    (void)state;
    assert_int_equal(zt_mlm_source_create(NULL, V, T, 0.15f, 3, &s), 0);
    fill(s, 0, B, ids, lab);
    for (int b = 0; b < B; b++) {
        assert_int_equal(ids[b * T], 2);          /* [CLS] */
        assert_int_equal(ids[b * T + T - 1], 3);  /* [SEP] */
        assert_int_equal(lab[b * T], -100);
        assert_int_equal(lab[b * T + T - 1], -100);
        for (int t = 1; t < T - 1; t++) {
            int64_t id = ids[b * T + t], l = lab[b * T + t];
            positions++;
            assert_true(id >= 0 && id < V);
            if (l == -100) {
                assert_true(id >= 5); /* unmasked synthetic ids avoid the specials */
                continue;
            }
            assert_true(l >= 5 && l < V);
            labelled++;
            masked += id == 4;
            kept += id == l;
        }
    }
    /* 12000 positions at p = 0.15: mean 1800, sd 39; bounds at 6 sd */
    assert_true(labelled > 1800 - 235 && labelled < 1800 + 235);
    /* of the labelled: 80% [MASK] (sd ~1%), 10% kept (plus 1/V chance from the random 10%) */
    assert_true(masked > 0.74 * labelled && masked < 0.86 * labelled);
    assert_true(kept > 0.06 * labelled && kept < 0.14 * labelled);
    zt_mlm_source_destroy(s);
    free(ids);
    free(lab);
}

static void test_corpus_epoch(void **state)
{
    char dir[] = "/tmp/zt_data_XXXXXX";
    zt_tokenizer_info tok = {.type = "wordpiece", .vocab_size = V, .pad_id = 0, .unk_id = 1,
                             .cls_id = 2, .sep_id = 3, .mask_id = 4};
    zt_token_writer *w;
    zt_token_data *d;
    zt_mlm_source *s;
    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(zt_token_writer_create(dir, &tok, 0, &w), 0);
    /* documents of distinct ids 10, 11, 12, ... so each sequence's first token names it */
    int32_t doc[500];
    for (int i = 0; i < 500; i++)
        doc[i] = 10 + i;
    assert_int_equal(zt_token_writer_add(w, doc, 299, "a.txt"), 0);
    assert_int_equal(zt_token_writer_add(w, doc + 299, 200, "b.txt"), 0);
    assert_int_equal(zt_token_writer_finish(w), 0);
    zt_token_writer_destroy(w);
    assert_int_equal(zt_token_data_open(dir, 1, &d), 0);
    /* stream: 299 + 1 [SEP] + 200 + 1 [SEP] = 501 tokens; sequences of T-2 = 30 -> 16 */
    assert_int_equal(zt_mlm_source_create(d, V, T, 0.0f, 5, &s), 0);
    uint64_t n = zt_mlm_source_samples(s);
    assert_int_equal(n, 501 / (T - 2));
    int64_t *ids = malloc(sizeof(int64_t) * n * T), *lab = malloc(sizeof(int64_t) * n * T);
    int seen[64] = {0}, order_differs = 0;
    int64_t first_epoch0[64];
    for (int epoch = 0; epoch < 2; epoch++) {
        memset(seen, 0, sizeof seen);
        fill(s, (uint64_t)epoch * n, (int)n, ids, lab);
        for (uint64_t k = 0; k < n; k++) {
            int64_t first = ids[k * T + 1];
            /* sequence q starts at stream position p = 30 q; stream[p] = 10 + p before the
             * [SEP] at 299 and 10 + p - 1 after it (no sequence starts on a [SEP]) */
            assert_true(first >= 10);
            int64_t p = first - 10 < 299 ? first - 10 : first - 10 + 1;
            assert_int_equal(p % (T - 2), 0);
            int q = (int)(p / (T - 2));
            assert_true(q >= 0 && q < (int)n);
            seen[q]++;
            if (epoch == 0)
                first_epoch0[k] = first;
            else
                order_differs |= first_epoch0[k] != first;
            for (int t = 0; t < T; t++)
                assert_int_equal(lab[k * T + t], -100); /* mask_prob 0 */
        }
        for (uint64_t q = 0; q < n; q++)
            if (seen[q] != 1)
                fail_msg("epoch %d: sequence %llu read %d times", epoch, (unsigned long long)q, seen[q]);
    }
    assert_true(order_differs); /* each epoch has its own order */
    free(ids);
    free(lab);
    zt_mlm_source_destroy(s);
    zt_token_data_close(d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_split_invariance),
                                       cmocka_unit_test(test_masking_statistics),
                                       cmocka_unit_test(test_corpus_epoch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
