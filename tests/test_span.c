/* test_span.c - cmocka tests of T5 span corruption (data/span.c): T5's counts and clamps, the
 * mask's shape and the distribution of its span lengths, sentinels, reconstruction, determinism
 * and the fixed lengths of random_spans_helper. Facts taken from T5 itself are marked "T5";
 * everything else is recomputed here from T5's formulas. It does not test data loading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zerotrain.h"
#include "../common/err.h"
#include "../data/span.h"

#define D 0.15f   /* T5's defaults */
#define MU 3.0f
#define SENTINEL_TOP 32099  /* T5: vocab_size - 1 = <extra_id_0> of the 32100-id vocabulary */
#define EOS 1
#define TOKEN_LO 2          /* random tokens lie in [TOKEN_LO, TOKEN_HI) */
#define TOKEN_HI 30000

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void random_tokens(uint64_t *s, int32_t *t, int n)
{
    for (int i = 0; i < n; i++)
        t[i] = TOKEN_LO + (int32_t)(splitmix(s) % (TOKEN_HI - TOKEN_LO));
}

/* T5's random_spans_noise_mask counts, written again from the formula: float32, tf.round =
 * nearbyintf in the default rounding mode (half to even), length padded to 2. */
static void t5_counts(int length, float d, float mu, int *n_noise, int *n_spans)
{
    int L = length < 2 ? 2 : length;
    float x = (float)L * d;
    int n = (int)nearbyintf(x);
    n = n < 1 ? 1 : n > L - 1 ? L - 1 : n;
    float y = (float)n / mu;
    int s = (int)nearbyintf(y);
    *n_noise = n;
    *n_spans = s < 1 ? 1 : s;
}

/* T5's random_spans_helper transcribed (double, Python round = half to even = nearbyint) */
static long long t5_helper_inputs(long long t, double d, double mu, long long *targets)
{
    long long n = (long long)nearbyint((double)t * d);
    long long s = (long long)nearbyint((double)n / mu);
    *targets = n + s + 1;
    return t - n + s + 1;
}

static void t5_helper(int inputs_length, double d, double mu, int *tokens, int *targets)
{
    long long t = inputs_length - 1, tg, in;
    while (t5_helper_inputs(t + 1, d, mu, &tg) <= inputs_length)
        t++;
    in = t5_helper_inputs(t, d, mu, &tg);
    if (d == 0.5 && tg > in) {
        t--;
        tg--;
    }
    *tokens = (int)t;
    *targets = (int)tg;
}

/* runs of value v in mask[n]; lens[] (if given) gets their lengths in order */
static int runs_of(const uint8_t *mask, int n, int v, int *lens)
{
    int r = 0;
    for (int i = 0; i < n; i++) {
        if (mask[i] != v)
            continue;
        if (i == 0 || mask[i - 1] != v)
            r++;
        if (lens)
            lens[r - 1] = (i == 0 || mask[i - 1] != v) ? 1 : lens[r - 1] + 1;
    }
    return r;
}

static int ones(const uint8_t *mask, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += mask[i];
    return c;
}

static void test_counts_t5_examples(void **state)
{
    int nn, ns;
    (void)state;
    /* T5 (0.15, 3): 512 tokens -> 77 noise tokens in 26 spans, 128 -> 19 in 6 */
    assert_int_equal(zt_span_counts(512, D, MU, &nn, &ns), 0);
    assert_int_equal(nn, 77);
    assert_int_equal(ns, 26);
    assert_int_equal(zt_span_counts(128, D, MU, &nn, &ns), 0);
    assert_int_equal(nn, 19);
    assert_int_equal(ns, 6);
    /* T5's clamps at tiny lengths: round(L * 0.15) is 0 or 1 for L <= 5, clamped to >= 1
     * noise token; round(1 / 3) = 0 clamped to 1 span; kept first, so the one noise token is
     * the last. Length 1 is drawn as length 2 ([0, 1]) and cut to [0]. */
    static const struct { int len; uint8_t mask[5]; } tiny[] = {
        {1, {0}}, {2, {0, 1}}, {3, {0, 0, 1}}, {4, {0, 0, 0, 1}}, {5, {0, 0, 0, 0, 1}},
    };
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        int len = tiny[i].len;
        assert_int_equal(zt_span_counts(len, D, MU, &nn, &ns), 0);
        assert_int_equal(nn, len == 1 ? 0 : 1);
        assert_int_equal(ns, len == 1 ? 0 : 1);
        for (uint64_t s = 0; s < 50; s++) {
            uint8_t m[5];
            memset(m, 0xAA, sizeof m);
            assert_int_equal(zt_span_mask(9, s, len, D, MU, m), 0);
            if (memcmp(m, tiny[i].mask, (size_t)len))
                fail_msg("length %d sample %llu: wrong mask", len, (unsigned long long)s);
            assert_int_equal(m[len < 5 ? len : 4], len < 5 ? 0xAA : 1);  /* nothing past it */
        }
    }
    /* the upper clamp: at density 0.9, round(0.9 L) = L for L = 2, 3, 4 (1.8, 2.7, 3.6), so
     * n_noise = L - 1; at 5, 4.5 rounds to even 4; round(n / 8) = 0 -> 1 span: one kept token
     * then the noise */
    for (int len = 2; len <= 5; len++) {
        uint8_t m[5];
        assert_int_equal(zt_span_counts(len, 0.9f, 8.0f, &nn, &ns), 0);
        assert_int_equal(nn, len - 1);
        assert_int_equal(ns, 1);
        assert_int_equal(zt_span_mask(9, 1, len, 0.9f, 8.0f, m), 0);
        for (int j = 0; j < len; j++)
            assert_int_equal(m[j], j > 0);
    }
}

/* (0.8, 20) reaches the upper clamp n_noise <= L - 1 at L = 2 */
static const struct { float d, mu; } params[] = {
    {D, MU}, {0.5f, 8.0f}, {0.3f, 1.5f}, {0.25f, 2.5f}, {0.8f, 20.0f},
};

/* the mask has the counted noise tokens and spans, for every length 2..600 */
static void test_mask_counts_sweep(void **state)
{
    uint8_t mask[600];
    (void)state;
    for (size_t p = 0; p < sizeof params / sizeof params[0]; p++)
        for (int len = 2; len <= 600; len++) {
            int nn, ns, rn, rs;
            assert_int_equal(zt_span_counts(len, params[p].d, params[p].mu, &nn, &ns), 0);
            t5_counts(len, params[p].d, params[p].mu, &rn, &rs);
            if (nn != rn || ns != rs)
                fail_msg("(%g, %g) length %d: counts %d/%d, T5's formula %d/%d",
                         (double)params[p].d, (double)params[p].mu, len, nn, ns, rn, rs);
            for (uint64_t s = 0; s < 8; s++) {
                uint64_t sample = s * 1000003ull + (uint64_t)len;
                assert_int_equal(zt_span_mask(5 + p, sample, len, params[p].d, params[p].mu,
                                              mask), 0);
                int got_n = ones(mask, len), got_s = runs_of(mask, len, 1, NULL);
                if (got_n != nn || got_s != ns)
                    fail_msg("(%g, %g) length %d sample %llu: mask has %d noise in %d spans, "
                             "expected %d in %d", (double)params[p].d, (double)params[p].mu,
                             len, (unsigned long long)sample, got_n, got_s, nn, ns);
            }
        }
}

/* kept first, noise last, runs alternate: as many kept runs as noise runs, = n_spans */
static void test_mask_structure(void **state)
{
    static const int lens[] = {2, 3, 7, 20, 30, 31, 64, 100, 128, 512, 568, 1000};
    uint8_t mask[1000], first[1000];
    (void)state;
    for (size_t p = 0; p < sizeof params / sizeof params[0]; p++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            int len = lens[i], nn, ns, varied = 0;
            assert_int_equal(zt_span_counts(len, params[p].d, params[p].mu, &nn, &ns), 0);
            for (uint64_t s = 0; s < 60; s++) {
                assert_int_equal(zt_span_mask(77, s, len, params[p].d, params[p].mu, mask), 0);
                for (int j = 0; j < len; j++)
                    if (mask[j] > 1)
                        fail_msg("length %d: mask[%d] = %d", len, j, mask[j]);
                if (mask[0] != 0 || mask[len - 1] != 1)
                    fail_msg("(%g, %g) length %d sample %llu: mask[0] = %d, mask[last] = %d",
                             (double)params[p].d, (double)params[p].mu, len,
                             (unsigned long long)s, mask[0], mask[len - 1]);
                assert_int_equal(runs_of(mask, len, 0, NULL), ns);
                assert_int_equal(runs_of(mask, len, 1, NULL), ns);
                if (s == 0)
                    memcpy(first, mask, (size_t)len);
                else
                    varied |= memcmp(first, mask, (size_t)len) != 0;
            }
            /* one span: the noise is always the suffix (T5's behaviour at length 30, (0.15, 3));
             * otherwise the masks vary */
            if (ns == 1) {
                for (int j = 0; j < len; j++)
                    assert_int_equal(first[j], j >= len - nn);
                assert_false(varied);
            } else if (len - nn > ns || nn > ns) {
                assert_true(varied);
            }
        }
}

static double lchoose(int a, int b)
{
    return lgamma(a + 1.0) - lgamma(b + 1.0) - lgamma(a - b + 1.0);
}

/* obs[k], k = 1..n-m+1: N independent parts of uniformly random compositions of n into m
 * parts, against P(k) = C(n-k-1, m-2) / C(n-1, m-1). Pearson's chi-square with neighbouring
 * bins pooled to an expected count >= 5, rejected above the chi-square quantile at z = 5
 * (Wilson-Hilferty; a false failure has probability ~3e-7). */
static void check_composition(const long *obs, int n, int m, long N, const char *what)
{
    int kmax = n - m + 1, bins = 0;
    double psum = 0, chi2 = 0, e_bin = 0, o_bin = 0, e_last = 0, o_last = 0;
    assert_true(m >= 2);
    for (int k = 1; k <= kmax; k++) {
        double pk = exp(lchoose(n - k - 1, m - 2) - lchoose(n - 1, m - 1));
        psum += pk;
        e_bin += pk * (double)N;
        o_bin += (double)obs[k];
        if (e_bin >= 5.0 || k == kmax) {
            if (e_bin < 5.0 && bins > 0) {  /* a short tail joins the previous bin */
                chi2 -= (o_last - e_last) * (o_last - e_last) / e_last;
                e_bin += e_last;
                o_bin += o_last;
                bins--;
            }
            chi2 += (o_bin - e_bin) * (o_bin - e_bin) / e_bin;
            bins++;
            e_last = e_bin;
            o_last = o_bin;
            e_bin = o_bin = 0;
        }
    }
    assert_true(fabs(psum - 1.0) < 1e-9);
    double df = bins - 1, a = 2.0 / (9.0 * df);
    double limit = df * pow(1.0 - a + 5.0 * sqrt(a), 3.0);
    if (chi2 > limit)
        fail_msg("%s (n %d, m %d, %ld samples): chi-square %.1f on %.0f df > %.1f", what, n, m,
                 N, chi2, df, limit);
}

/* Span lengths follow T5's random segmentation. Parts of one sample are dependent (they sum
 * to n), so each sample contributes one noise and one kept part, at position sample % m: the
 * observations are independent and every position is covered. */
static void span_distribution(int len, long N)
{
    int nn, ns;
    uint8_t *mask = malloc((size_t)len);
    int *rl = malloc(sizeof(int) * (size_t)len);
    assert_int_equal(zt_span_counts(len, D, MU, &nn, &ns), 0);
    long *obs_noise = calloc((size_t)len + 1, sizeof(long));
    long *obs_kept = calloc((size_t)len + 1, sizeof(long));
    assert_non_null(mask);
    assert_non_null(rl);
    assert_non_null(obs_noise);
    assert_non_null(obs_kept);
    for (long s = 0; s < N; s++) {
        int j = (int)(s % ns), k;
        assert_int_equal(zt_span_mask(2024, (uint64_t)s, len, D, MU, mask), 0);
        assert_int_equal(runs_of(mask, len, 1, rl), ns);
        k = rl[j];
        assert_true(k >= 1 && k <= nn - ns + 1);
        obs_noise[k]++;
        assert_int_equal(runs_of(mask, len, 0, rl), ns);
        k = rl[j];
        assert_true(k >= 1 && k <= len - nn - ns + 1);
        obs_kept[k]++;
    }
    check_composition(obs_noise, nn, ns, N, "noise spans");
    check_composition(obs_kept, len - nn, ns, N, "non-noise spans");
    free(obs_kept);
    free(obs_noise);
    free(rl);
    free(mask);
}

static void test_span_length_distribution(void **state)
{
    (void)state;
    span_distribution(512, 20000);  /* 77 in 26 parts, 435 in 26 */
    span_distribution(64, 20000);   /* 10 in 3 parts, 54 in 3 */
}

/* Corrupt one sample: tokens[len] random, mask from (seed, sample). Outputs are sized exactly
 * from zt_span_counts' formula (malloc, so the sanitizer sees any overrun). */
typedef struct {
    int len, nn, ns, n_in, n_tgt;
    int32_t *tok;
    uint8_t *mask;
    int64_t *in, *tgt;
} corrupted;

static void corrupt_one(corrupted *c, int len, uint64_t seed, uint64_t sample)
{
    uint64_t rs = seed * 31 + sample;
    c->len = len;
    assert_int_equal(zt_span_counts(len, D, MU, &c->nn, &c->ns), 0);
    int cap_in = len - c->nn + c->ns + 1, cap_tgt = c->nn + c->ns + 1;
    if (len == 1)
        cap_tgt = 2;  /* one kept run: [sentinel_top, EOS] */
    c->tok = malloc(sizeof(int32_t) * (size_t)len);
    c->mask = malloc((size_t)len);
    c->in = malloc(sizeof(int64_t) * (size_t)cap_in);
    c->tgt = malloc(sizeof(int64_t) * (size_t)cap_tgt);
    assert_true(c->tok && c->mask && c->in && c->tgt);
    random_tokens(&rs, c->tok, len);
    assert_int_equal(zt_span_mask(seed, sample, len, D, MU, c->mask), 0);
    int rc = zt_span_corrupt(c->tok, c->mask, len, SENTINEL_TOP, EOS, c->in, cap_in, &c->n_in,
                             c->tgt, cap_tgt, &c->n_tgt);
    if (rc < 0)
        fail_msg("length %d: %s", len, zt_last_error());
    assert_int_equal(c->n_in, cap_in);
    assert_int_equal(c->n_tgt, cap_tgt);
}

static void corrupted_free(corrupted *c)
{
    free(c->tok);
    free(c->mask);
    free(c->in);
    free(c->tgt);
}

static int is_sentinel(int64_t v, int ns) { return v <= SENTINEL_TOP && v > SENTINEL_TOP - ns; }

static const int corrupt_lens[] = {1, 2, 3, 5, 17, 64, 128, 511, 512, 568, 1137};

static void test_sentinels(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof corrupt_lens / sizeof corrupt_lens[0]; i++)
        for (uint64_t s = 0; s < 40; s++) {
            corrupted c;
            int k = 0, prev_noise = 0, j = 0;
            corrupt_one(&c, corrupt_lens[i], 3, s);
            /* inputs: the kept tokens in order, sentinel_top - k where noise run k starts */
            for (int t = 0; t < c.len; t++) {
                if (c.mask[t] && !prev_noise)
                    assert_int_equal(c.in[j++], SENTINEL_TOP - k++);
                else if (!c.mask[t])
                    assert_int_equal(c.in[j++], c.tok[t]);
                prev_noise = c.mask[t];
            }
            assert_int_equal(k, c.ns);
            assert_int_equal(j, c.n_in - 1);
            assert_int_equal(c.in[c.n_in - 1], EOS);
            /* targets: sentinel_top first, sentinels in descending order, one per span */
            assert_int_equal(c.tgt[0], SENTINEL_TOP);
            k = 0;
            for (int t = 0; t < c.n_tgt - 1; t++) {
                assert_int_not_equal(c.tgt[t], EOS);
                if (is_sentinel(c.tgt[t], c.ns))
                    assert_int_equal(c.tgt[t], SENTINEL_TOP - k++);
            }
            assert_int_equal(k, c.ns);
            assert_int_equal(c.tgt[c.n_tgt - 1], EOS);
            corrupted_free(&c);
        }
}

/* T5's docstring: "We hold X to be Y that" -> "X these truths Y self evident Z" (a mask that
 * ends with kept tokens gets a last sentinel in the targets) */
static void test_t5_docstring_example(void **state)
{
    /* We hold these truths to be self evident that */
    static const int32_t tok[9] = {11, 12, 13, 14, 15, 16, 17, 18, 19};
    static const uint8_t mask[9] = {0, 0, 1, 1, 0, 0, 1, 1, 0};
    static const int64_t want_in[8] = {11, 12, 100, 15, 16, 99, 19, 1};
    static const int64_t want_tgt[8] = {100, 13, 14, 99, 17, 18, 98, 1};
    int64_t in[8], tgt[8];
    int n_in, n_tgt;
    (void)state;
    assert_int_equal(zt_span_corrupt(tok, mask, 9, 100, 1, in, 8, &n_in, tgt, 8, &n_tgt), 0);
    assert_int_equal(n_in, 8);
    assert_int_equal(n_tgt, 8);
    assert_memory_equal(in, want_in, sizeof in);
    assert_memory_equal(tgt, want_tgt, sizeof tgt);
}

/* each sentinel in the inputs, replaced by what follows it in the targets, gives back tokens */
static void test_reconstruction(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof corrupt_lens / sizeof corrupt_lens[0]; i++)
        for (uint64_t s = 0; s < 100; s++) {
            corrupted c;
            int out = 0;
            corrupt_one(&c, corrupt_lens[i], 11, 1000 + s);
            int32_t *rec = malloc(sizeof(int32_t) * (size_t)c.len);
            assert_non_null(rec);
            for (int j = 0; j < c.n_in - 1; j++) {
                if (!is_sentinel(c.in[j], c.ns)) {
                    assert_true(out < c.len);
                    rec[out++] = (int32_t)c.in[j];
                    continue;
                }
                int t = 0;
                while (t < c.n_tgt && c.tgt[t] != c.in[j])
                    t++;
                assert_true(t < c.n_tgt - 1);
                for (t++; t < c.n_tgt - 1 && !is_sentinel(c.tgt[t], c.ns); t++) {
                    assert_true(out < c.len);
                    rec[out++] = (int32_t)c.tgt[t];
                }
            }
            assert_int_equal(out, c.len);
            if (memcmp(rec, c.tok, sizeof(int32_t) * (size_t)c.len))
                fail_msg("length %d sample %llu: reconstruction differs", c.len,
                         (unsigned long long)s);
            free(rec);
            corrupted_free(&c);
        }
}

#define DET_N 200
#define DET_LEN 512

static void test_determinism(void **state)
{
    static uint8_t fwd[DET_N][DET_LEN], rev[DET_N][DET_LEN], par[DET_N][DET_LEN];
    uint8_t one[DET_LEN], other[DET_LEN];
    int differ = 0;
    (void)state;
    for (int s = 0; s < DET_N; s++)
        assert_int_equal(zt_span_mask(42, (uint64_t)s, DET_LEN, D, MU, fwd[s]), 0);
    for (int s = DET_N - 1; s >= 0; s--)
        assert_int_equal(zt_span_mask(42, (uint64_t)s, DET_LEN, D, MU, rev[s]), 0);
    int bad = 0;
#pragma omp parallel for schedule(dynamic, 3) reduction(+ : bad)
    for (int s = 0; s < DET_N; s++)
        bad += zt_span_mask(42, (uint64_t)s, DET_LEN, D, MU, par[s]) != 0;
    assert_int_equal(bad, 0);
    assert_memory_equal(fwd, rev, sizeof fwd);
    assert_memory_equal(fwd, par, sizeof fwd);
    /* sample 57 on its own, after nothing else in this call */
    assert_int_equal(zt_span_mask(42, 57, DET_LEN, D, MU, one), 0);
    assert_memory_equal(one, fwd[57], DET_LEN);
    /* different samples give different masks */
    for (int a = 0; a < DET_N; a++)
        for (int b = a + 1; b < DET_N; b++)
            if (!memcmp(fwd[a], fwd[b], DET_LEN))
                fail_msg("samples %d and %d have the same mask", a, b);
    /* so do another seed and a sample differing only in its high 32 bits */
    for (int s = 0; s < DET_N; s++) {
        assert_int_equal(zt_span_mask(43, (uint64_t)s, DET_LEN, D, MU, other), 0);
        differ += memcmp(other, fwd[s], DET_LEN) != 0;
    }
    assert_int_equal(differ, DET_N);
    assert_int_equal(zt_span_mask(42, 57 + (1ull << 32), DET_LEN, D, MU, other), 0);
    assert_memory_not_equal(other, fwd[57], DET_LEN);
}

/* random_spans_helper: raw length and targets length for an inputs length; the corrupted
 * samples then fill inputs_length and targets_length exactly */
static void test_fixed_lengths(void **state)
{
    static const int lens[] = {64, 128, 256, 512, 1024};
    int t, tg, rt, rtg;
    (void)state;
    /* T5: inputs_length 512 at (0.15, 3) -> 568 raw tokens, 114 targets */
    assert_int_equal(zt_span_lengths(512, 0.15, 3.0, &t, &tg), 0);
    assert_int_equal(t, 568);
    assert_int_equal(tg, 114);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        int L = lens[i];
        assert_int_equal(zt_span_lengths(L, 0.15, 3.0, &t, &tg), 0);
        t5_helper(L, 0.15, 3.0, &rt, &rtg);
        assert_int_equal(t, rt);
        assert_int_equal(tg, rtg);
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)t);
        uint8_t *mask = malloc((size_t)t);
        int64_t *in = malloc(sizeof(int64_t) * (size_t)L), *tgt = malloc(sizeof(int64_t) * (size_t)tg);
        uint64_t rs = (uint64_t)L;
        assert_true(tok && mask && in && tgt);
        for (uint64_t s = 0; s < 200; s++) {
            int n_in, n_tgt;
            random_tokens(&rs, tok, t);
            assert_int_equal(zt_span_mask(8, s, t, D, MU, mask), 0);
            int rc = zt_span_corrupt(tok, mask, t, SENTINEL_TOP, EOS, in, L, &n_in, tgt, tg,
                                     &n_tgt);
            if (rc < 0)
                fail_msg("inputs_length %d sample %llu: %s", L, (unsigned long long)s,
                         zt_last_error());
            assert_int_equal(n_in, L);
            assert_int_equal(n_tgt, tg);
        }
        free(tok);
        free(mask);
        free(in);
        free(tgt);
    }
    /* zt_span_lengths equals T5's loop everywhere, the density-0.5 trim included */
    static const struct { double d, mu; } hp[] = {{0.15, 3.0}, {0.5, 3.0}, {0.3, 8.0}, {0.25, 2.5}};
    for (size_t p = 0; p < sizeof hp / sizeof hp[0]; p++)
        for (int L = 2; L <= 1200; L++) {
            assert_int_equal(zt_span_lengths(L, hp[p].d, hp[p].mu, &t, &tg), 0);
            t5_helper(L, hp[p].d, hp[p].mu, &rt, &rtg);
            if (t != rt || tg != rtg)
                fail_msg("(%g, %g) inputs_length %d: %d/%d, T5's loop %d/%d", hp[p].d, hp[p].mu,
                         L, t, tg, rt, rtg);
        }
    /* The helper rounds t * 0.15 in double, the mask in float32. Where both give the same
     * counts, the real lengths are the helper's; where they do not (t * 0.15 at an exact .5 in
     * one precision only) T5 itself produces other lengths than its helper promises. */
    for (int L = 10; L <= 1200; L++) {
        int nn, ns;
        long long hn, hs, htg;
        assert_int_equal(zt_span_lengths(L, 0.15, 3.0, &t, &tg), 0);
        assert_int_equal(zt_span_counts(t, D, MU, &nn, &ns), 0);
        hn = (long long)nearbyint(t * 0.15);
        hs = (long long)nearbyint((double)hn / 3.0);
        assert_int_equal(t5_helper_inputs(t, 0.15, 3.0, &htg), L);
        if (nn == hn && ns == hs) {
            assert_int_equal(t - nn + ns + 1, L);
            assert_int_equal(nn + ns + 1, tg);
        }
    }
}

#define EXPECT_FAIL(call, code, word)                                                       \
    do {                                                                                    \
        zt_clear_error();                                                                  \
        int rc_ = (call);                                                                   \
        if (rc_ != (code) || !strstr(zt_last_error(), (word)))                              \
            fail_msg("%s: rc %d (want %d), message \"%s\" (want \"%s\")", #call, rc_, (code), \
                     zt_last_error(), (word));                                              \
    } while (0)

static void test_errors(void **state)
{
    int nn, ns, t, tg, n_in, n_tgt;
    uint8_t mask[64];
    int32_t tok[64] = {0};
    int64_t in[64], tgt[64];
    (void)state;
    EXPECT_FAIL(zt_span_counts(0, D, MU, &nn, &ns), ZT_E_INVAL, "length");
    EXPECT_FAIL(zt_span_counts(-5, D, MU, &nn, &ns), ZT_E_INVAL, "length");
    EXPECT_FAIL(zt_span_counts(10, 0.0f, MU, &nn, &ns), ZT_E_INVAL, "noise_density");
    EXPECT_FAIL(zt_span_counts(10, 1.0f, MU, &nn, &ns), ZT_E_INVAL, "noise_density");
    EXPECT_FAIL(zt_span_counts(10, -0.1f, MU, &nn, &ns), ZT_E_INVAL, "noise_density");
    EXPECT_FAIL(zt_span_counts(10, NAN, MU, &nn, &ns), ZT_E_INVAL, "noise_density");
    EXPECT_FAIL(zt_span_counts(10, D, 0.5f, &nn, &ns), ZT_E_INVAL, "mean_span");
    EXPECT_FAIL(zt_span_counts(10, D, NAN, &nn, &ns), ZT_E_INVAL, "mean_span");
    EXPECT_FAIL(zt_span_counts(10, D, INFINITY, &nn, &ns), ZT_E_INVAL, "mean_span");
    EXPECT_FAIL(zt_span_counts(10, D, MU, NULL, &ns), ZT_E_INVAL, "n_noise");
    EXPECT_FAIL(zt_span_counts(10, D, MU, &nn, NULL), ZT_E_INVAL, "n_spans");
    /* 6 noise tokens in 6 spans cannot alternate with 4 kept tokens (T5 fails too) */
    EXPECT_FAIL(zt_span_counts(10, 0.6f, 1.0f, &nn, &ns), ZT_E_RANGE, "spans");

    EXPECT_FAIL(zt_span_lengths(1, 0.15, 3.0, &t, &tg), ZT_E_INVAL, "inputs_length");
    EXPECT_FAIL(zt_span_lengths(512, 1.5, 3.0, &t, &tg), ZT_E_INVAL, "noise_density");
    EXPECT_FAIL(zt_span_lengths(512, 0.15, 0.0, &t, &tg), ZT_E_INVAL, "mean_span");
    EXPECT_FAIL(zt_span_lengths(512, 0.15, 3.0, NULL, &tg), ZT_E_INVAL, "tokens_length");
    EXPECT_FAIL(zt_span_lengths(512, 0.15, 3.0, &t, NULL), ZT_E_INVAL, "targets_length");
    EXPECT_FAIL(zt_span_lengths(1000000, 0.999999, 1e6, &t, &tg), ZT_E_RANGE, "INT_MAX");
    EXPECT_FAIL(zt_span_lengths(512, 0.6, 1.0, &t, &tg), ZT_E_RANGE, "spans");

    EXPECT_FAIL(zt_span_mask(1, 2, 0, D, MU, mask), ZT_E_INVAL, "length");
    EXPECT_FAIL(zt_span_mask(1, 2, 64, D, MU, NULL), ZT_E_INVAL, "mask");
    EXPECT_FAIL(zt_span_mask(1, 2, 64, 2.0f, MU, mask), ZT_E_INVAL, "noise_density");
    EXPECT_FAIL(zt_span_mask(1, 2, 64, D, -1.0f, mask), ZT_E_INVAL, "mean_span");

    assert_int_equal(zt_span_mask(1, 2, 64, D, MU, mask), 0);
    assert_int_equal(zt_span_counts(64, D, MU, &nn, &ns), 0);
    int want_in = 64 - nn + ns + 1, want_tgt = nn + ns + 1;
    EXPECT_FAIL(zt_span_corrupt(NULL, mask, 64, 100, 1, in, 64, &n_in, tgt, 64, &n_tgt),
                ZT_E_INVAL, "tokens");
    EXPECT_FAIL(zt_span_corrupt(tok, NULL, 64, 100, 1, in, 64, &n_in, tgt, 64, &n_tgt),
                ZT_E_INVAL, "mask");
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 1, NULL, 64, &n_in, tgt, 64, &n_tgt),
                ZT_E_INVAL, "inputs");
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 1, in, 64, NULL, tgt, 64, &n_tgt),
                ZT_E_INVAL, "n_in");
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 1, in, 64, &n_in, NULL, 64, &n_tgt),
                ZT_E_INVAL, "targets");
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 1, in, 64, &n_in, tgt, 64, NULL),
                ZT_E_INVAL, "n_tgt");
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 0, 100, 1, in, 64, &n_in, tgt, 64, &n_tgt),
                ZT_E_INVAL, "length");
    /* capacities one short; nothing written */
    for (int j = 0; j < 64; j++)
        in[j] = tgt[j] = -7;
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 1, in, want_in - 1, &n_in, tgt, 64, &n_tgt),
                ZT_E_SHAPE, "in_cap");
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 1, in, 64, &n_in, tgt, want_tgt - 1, &n_tgt),
                ZT_E_SHAPE, "tgt_cap");
    for (int j = 0; j < 64; j++)
        assert_true(in[j] == -7 && tgt[j] == -7);
    /* sentinels down to sentinel_top - (ns - 1) must stay >= 0 and miss eos_id */
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, ns - 2, 1000, in, 64, &n_in, tgt, 64, &n_tgt),
                ZT_E_RANGE, "sentinel_top");
    assert_int_equal(zt_span_corrupt(tok, mask, 64, ns - 1, 1000, in, 64, &n_in, tgt, 64,
                                     &n_tgt), 0);
    EXPECT_FAIL(zt_span_corrupt(tok, mask, 64, 100, 100 - (ns - 1), in, 64, &n_in, tgt, 64,
                                &n_tgt), ZT_E_RANGE, "eos_id");
    assert_int_equal(zt_span_corrupt(tok, mask, 64, 100, 100 - ns, in, want_in, &n_in, tgt,
                                     want_tgt, &n_tgt), 0);
    assert_int_equal(n_in, want_in);
    assert_int_equal(n_tgt, want_tgt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_t5_examples),
        cmocka_unit_test(test_mask_counts_sweep),
        cmocka_unit_test(test_mask_structure),
        cmocka_unit_test(test_span_length_distribution),
        cmocka_unit_test(test_sentinels),
        cmocka_unit_test(test_t5_docstring_example),
        cmocka_unit_test(test_reconstruction),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_fixed_lengths),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
