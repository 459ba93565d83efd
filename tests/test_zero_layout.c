/* test_zero_layout.c - the sharding arithmetic of engine/geom.c: for many unit sizes, world
 * sizes and buckets, the pieces respect the bucket and Open MPI's int counts, and the ranks'
 * shards tile the padded unit exactly once (every float owned by one rank, shards of equal
 * length); taking a shard out of a whole unit and putting it back restores the unit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../engine/geom.h"
#include "../engine/comm.h"

/* a geometry of one unit */
static void one_unit(zt_geometry *g, size_t numel, int N, size_t bucket, size_t *padded,
                     size_t *piece)
{
    memset(g, 0, sizeof *g);
    g->N = (size_t)N;
    g->bucket = bucket;
    g->padded = padded;
    g->piece = piece;
    g->n_units = 1;
    piece[0] = zt_geom_piece_for(numel, (size_t)N, bucket, &padded[0]);
}

static void test_pieces_and_shards(void **state)
{
    static const size_t numels[] = {1, 1023, 1024, 4097, 300000, 1234567};
    static const int worlds[] = {1, 2, 3, 4, 7};
    static const size_t buckets[] = {0, 1, 5000, 65536, 500000000};
    (void)state;
    for (size_t a = 0; a < sizeof numels / sizeof *numels; a++)
        for (size_t b = 0; b < sizeof worlds / sizeof *worlds; b++)
            for (size_t c = 0; c < sizeof buckets / sizeof *buckets; c++) {
                zt_geometry e;
                size_t padded, piece, numel = numels[a], bucket = buckets[c];
                int N = worlds[b];
                size_t q = 1024 * (size_t)N;
                one_unit(&e, numel, N, bucket, &padded, &piece);
                assert_true(padded >= numel && padded - numel < q && padded % q == 0);
                assert_true(piece % q == 0 && piece >= q && piece <= padded);
                assert_true(piece / (size_t)N <= ZT_COMM_MAX_SLICE);
                if (bucket >= q)
                    assert_true(piece <= bucket);
                if (bucket == 0 || bucket >= padded)
                    assert_int_equal(piece, padded);
                unsigned char *owner = calloc(padded, 1);
                assert_non_null(owner);
                for (int r = 0; r < N; r++) {
                    zt_seg s;
                    size_t total = 0, next_soff = 0;
                    for (int k = 0; zt_geometry_seg(&e, 0, r, k, &s); k++) {
                        assert_int_equal(s.soff, next_soff); /* runs are back to back */
                        assert_true(s.off + s.len <= padded);
                        for (size_t i = s.off; i < s.off + s.len; i++)
                            owner[i]++;
                        next_soff += s.len;
                        total += s.len;
                    }
                    assert_int_equal(total, zt_geometry_len(&e, 0, 1));
                }
                for (size_t i = 0; i < padded; i++)
                    if (owner[i] != 1)
                        fail_msg("numel %zu N %d bucket %zu: float %zu owned %d times", numel,
                                 N, bucket, i, owner[i]);
                free(owner);
            }
}

static void test_take_put_round_trip(void **state)
{
    zt_geometry e;
    size_t padded, piece;
    (void)state;
    one_unit(&e, 50000, 3, 7000, &padded, &piece);
    assert_true(piece < padded); /* several pieces */
    float *whole = malloc(padded * sizeof(float)), *back = calloc(padded, sizeof(float));
    float *shard = malloc(padded / 3 * sizeof(float));
    assert_true(whole && back && shard);
    for (size_t i = 0; i < padded; i++)
        whole[i] = (float)i;
    for (int r = 0; r < 3; r++) {
        zt_geometry_take(&e, 0, r, whole, shard, sizeof(float));
        zt_geometry_put(&e, 0, r, shard, back, sizeof(float));
    }
    assert_memory_equal(whole, back, padded * sizeof(float));
    /* rank 1's shard starts with its slice of the first piece */
    zt_geometry_take(&e, 0, 1, whole, shard, sizeof(float));
    assert_true(shard[0] == (float)(piece / 3));
    free(whole);
    free(back);
    free(shard);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_and_shards),
        cmocka_unit_test(test_take_put_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
