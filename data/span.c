/* span.c - T5 span corruption: counts, the random-spans noise mask, sentinel encoding and the
 * raw length for an inputs length, after t5/data/preprocessors.py. No I/O, no allocation, no
 * padding or batching; it never reproduces TensorFlow's random bits, only their distribution. */
#include "span.h"

#include "../common/err.h"
#include "../common/rng.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>

/* Philox purposes of this file, with unit 0: zt_rng_stream(0, 7) draws the noise-span
 * composition, zt_rng_stream(0, 8) the non-noise one (T5 splits its seed in two the same way).
 * Not in common/rng.h's enum, which leaves 7 and 8 to this file. */
enum { SPAN_PURPOSE_NOISE = 7, SPAN_PURPOSE_NONNOISE = 8 };

#define DRAW_BATCH 32

/* Round half to even, as tf.round and Python's round. x - floor(x) is exact for any double. */
static double round_half_even(double x)
{
    double f = floor(x), r = x - f;
    if (r > 0.5)
        return f + 1.0;
    if (r < 0.5)
        return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

static int check_params(const char *fn, double noise_density, double mean_span)
{
    if (!(noise_density > 0.0 && noise_density < 1.0))
        return zt_fail(ZT_E_INVAL, "%s: noise_density %g is not in (0, 1)", fn, noise_density);
    if (!(mean_span >= 1.0) || isinf(mean_span))
        return zt_fail(ZT_E_INVAL, "%s: mean_span %g is not a finite number >= 1", fn, mean_span);
    return 0;
}

/* T5's counts for the padded length L = max(length, 2), in float32 as TensorFlow does. */
static int counts_padded(const char *fn, int length, float noise_density, float mean_span,
                         int *n_noise, int *n_spans)
{
    int L = length < 2 ? 2 : length;
    float x = (float)L * noise_density;
    long long n = (long long)round_half_even(x), s;
    float y;
    if (n < 1)
        n = 1;
    if (n > L - 1)
        n = L - 1;
    y = (float)n / mean_span;
    s = (long long)round_half_even(y);
    if (s < 1)
        s = 1;
    if (s > n || s > L - n)
        return zt_fail(ZT_E_RANGE, "%s: length %d, noise_density %g, mean_span %g give %lld "
                       "spans for %lld noise and %lld non-noise tokens", fn, length,
                       (double)noise_density, (double)mean_span, s, n, (long long)L - n);
    *n_noise = (int)n;
    *n_spans = (int)s;
    return 0;
}

int zt_span_counts(int length, float noise_density, float mean_span, int *n_noise, int *n_spans)
{
    if (length < 1)
        return zt_fail(ZT_E_INVAL, "zt_span_counts: length %d < 1", length);
    if (!n_noise || !n_spans)
        return zt_fail(ZT_E_INVAL, "zt_span_counts: NULL %s", !n_noise ? "n_noise" : "n_spans");
    ZT_TRY(check_params("zt_span_counts", noise_density, mean_span));
    ZT_TRY(counts_padded("zt_span_counts", length, noise_density, mean_span, n_noise, n_spans));
    if (length == 1)
        *n_noise = *n_spans = 0;
    return 0;
}

/* random_spans_helper's _tokens_length_to_inputs_length_targets_length, in double. */
static long long helper_inputs(long long t, double noise_density, double mean_span,
                               long long *targets)
{
    long long n = (long long)round_half_even((double)t * noise_density);
    long long s = (long long)round_half_even((double)n / mean_span);
    if (targets)
        *targets = n + s + 1;
    return t - n + s + 1;
}

int zt_span_lengths(int inputs_length, double noise_density, double mean_span,
                    int *tokens_length, int *targets_length)
{
    long long t, tgt;
    int nn, ns;
    if (inputs_length < 2)
        return zt_fail(ZT_E_INVAL, "zt_span_lengths: inputs_length %d < 2", inputs_length);
    if (!tokens_length || !targets_length)
        return zt_fail(ZT_E_INVAL, "zt_span_lengths: NULL %s",
                       !tokens_length ? "tokens_length" : "targets_length");
    ZT_TRY(check_params("zt_span_lengths", noise_density, mean_span));
    /* inputs grow by about 1 - d + d / mean per raw token: refuse before a long loop */
    if ((double)inputs_length / ((1.0 - noise_density) + noise_density / mean_span) >
        (double)INT_MAX - 64.0)
        return zt_fail(ZT_E_RANGE, "zt_span_lengths: inputs_length %d at noise_density %g, "
                       "mean_span %g needs more than INT_MAX raw tokens", inputs_length,
                       noise_density, mean_span);
    /* T5's loop as written: the last t from inputs_length - 1 on whose successor overflows */
    t = inputs_length - 1;
    while (helper_inputs(t + 1, noise_density, mean_span, NULL) <= inputs_length) {
        t++;
        if (t >= INT_MAX)
            return zt_fail(ZT_E_RANGE, "zt_span_lengths: tokens_length for inputs_length %d "
                           "passes INT_MAX", inputs_length);
    }
    long long in = helper_inputs(t, noise_density, mean_span, &tgt);
    if (noise_density == 0.5 && tgt > in) {
        t--;
        tgt--;
    }
    /* the mask T5 would draw for t tokens must exist */
    ZT_TRY(counts_padded("zt_span_lengths", (int)t, (float)noise_density, (float)mean_span, &nn,
                         &ns));
    *tokens_length = (int)t;
    *targets_length = (int)tgt;
    return 0;
}

/* A uniformly random composition of `items` into `parts` positive parts, read one part at a
 * time. T5 shuffles items - 1 flags of which parts - 1 are set (a set flag starts a part);
 * here the same uniformly random (parts - 1)-subset of the items - 1 slots is chosen by
 * selection sampling (Knuth's algorithm S): slot j is set with probability need / slots,
 * decided by an exact uniform integer in [0, slots) (Lemire's rejection method). */
typedef struct {
    uint64_t seed, sample, next;  /* next: element index of the stream to fetch */
    uint32_t stream;
    uint32_t buf[DRAW_BATCH];
    int pos;                      /* next unread buf[] entry; DRAW_BATCH = empty */
    int slots, need;              /* slots left, set flags still to place in them */
} composition;

static void composition_init(composition *c, uint64_t seed, uint64_t sample, int purpose,
                             int items, int parts)
{
    c->seed = seed;
    c->sample = sample;
    c->next = 0;
    c->stream = zt_rng_stream(0, purpose);
    c->pos = DRAW_BATCH;
    c->slots = items - 1;
    c->need = parts - 1;
}

static uint32_t draw(composition *c)
{
    if (c->pos == DRAW_BATCH) {
        zt_rng_u32(c->seed, c->sample, c->stream, c->next, c->buf, DRAW_BATCH);
        c->next += DRAW_BATCH;
        c->pos = 0;
    }
    return c->buf[c->pos++];
}

/* uniform in [0, r), r >= 1 */
static uint32_t draw_below(composition *c, uint32_t r)
{
    uint64_t m = (uint64_t)draw(c) * r;
    if ((uint32_t)m < r) {
        uint32_t floor_ = (uint32_t)(-r) % r;
        while ((uint32_t)m < floor_)
            m = (uint64_t)draw(c) * r;
    }
    return (uint32_t)(m >> 32);
}

static int next_part(composition *c)
{
    int len = 1;
    while (c->slots > 0) {
        int set;
        if (c->need == 0) {  /* the rest of the items belong to this, the last part */
            len += c->slots;
            c->slots = 0;
            break;
        }
        set = c->need == c->slots || draw_below(c, (uint32_t)c->slots) < (uint32_t)c->need;
        c->slots--;
        if (set) {
            c->need--;
            break;
        }
        len++;
    }
    return len;
}

int zt_span_mask(uint64_t seed, uint64_t sample, int length, float noise_density,
                 float mean_span, uint8_t *mask)
{
    composition noise, kept;
    int n_noise, n_spans, L, p = 0;
    if (length < 1)
        return zt_fail(ZT_E_INVAL, "zt_span_mask: length %d < 1", length);
    if (!mask)
        return zt_fail(ZT_E_INVAL, "zt_span_mask: NULL mask");
    ZT_TRY(check_params("zt_span_mask", noise_density, mean_span));
    ZT_TRY(counts_padded("zt_span_mask", length, noise_density, mean_span, &n_noise, &n_spans));
    L = length < 2 ? 2 : length;
    composition_init(&noise, seed, sample, SPAN_PURPOSE_NOISE, n_noise, n_spans);
    composition_init(&kept, seed, sample, SPAN_PURPOSE_NONNOISE, L - n_noise, n_spans);
    for (int k = 0; k < n_spans; k++) {
        for (int j = next_part(&kept); j > 0; j--, p++)
            if (p < length)
                mask[p] = 0;
        for (int j = next_part(&noise); j > 0; j--, p++)
            if (p < length)
                mask[p] = 1;
    }
    return 0;
}

/* Length of noise_span_to_unique_sentinel(tokens, mask == want) and its number of runs. */
static int encoded_length(const uint8_t *mask, int length, int want, int *runs)
{
    int n = 0, r = 0;
    for (int i = 0; i < length; i++) {
        int is = (mask[i] != 0) == want, prev = i > 0 && (mask[i - 1] != 0) == want;
        if (!is)
            n++;
        else if (!prev) {
            n++;
            r++;
        }
    }
    *runs = r;
    return n;
}

static int encode(const int32_t *tokens, const uint8_t *mask, int length, int want,
                  int32_t sentinel_top, int64_t *out)
{
    int n = 0, r = 0;
    for (int i = 0; i < length; i++) {
        int is = (mask[i] != 0) == want, prev = i > 0 && (mask[i - 1] != 0) == want;
        if (!is)
            out[n++] = tokens[i];
        else if (!prev)
            out[n++] = (int64_t)sentinel_top - r++;
    }
    return n;
}

int zt_span_corrupt(const int32_t *tokens, const uint8_t *mask, int length, int32_t sentinel_top,
                    int32_t eos_id, int64_t *inputs, int in_cap, int *n_in, int64_t *targets,
                    int tgt_cap, int *n_tgt)
{
    int in_len, tgt_len, noise_runs, kept_runs, runs;
    const char *null = !tokens ? "tokens" : !mask ? "mask" : !inputs ? "inputs"
                       : !n_in ? "n_in" : !targets ? "targets" : !n_tgt ? "n_tgt" : NULL;
    if (null)
        return zt_fail(ZT_E_INVAL, "zt_span_corrupt: NULL %s", null);
    if (length < 1)
        return zt_fail(ZT_E_INVAL, "zt_span_corrupt: length %d < 1", length);
    in_len = encoded_length(mask, length, 1, &noise_runs) + 1;
    tgt_len = encoded_length(mask, length, 0, &kept_runs) + 1;
    if (in_cap < in_len)
        return zt_fail(ZT_E_SHAPE, "zt_span_corrupt: in_cap %d < %d inputs (EOS included)",
                       in_cap, in_len);
    if (tgt_cap < tgt_len)
        return zt_fail(ZT_E_SHAPE, "zt_span_corrupt: tgt_cap %d < %d targets (EOS included)",
                       tgt_cap, tgt_len);
    runs = noise_runs > kept_runs ? noise_runs : kept_runs;
    if (runs > 0 && (int64_t)sentinel_top - (runs - 1) < 0)
        return zt_fail(ZT_E_RANGE, "zt_span_corrupt: sentinel_top %d is too small for %d "
                       "sentinels", (int)sentinel_top, runs);
    if (runs > 0 && eos_id <= sentinel_top && (int64_t)eos_id > (int64_t)sentinel_top - runs)
        return zt_fail(ZT_E_RANGE, "zt_span_corrupt: eos_id %d is one of the sentinels "
                       "%d..%d", (int)eos_id, (int)(sentinel_top - (runs - 1)), (int)sentinel_top);
    in_len = encode(tokens, mask, length, 1, sentinel_top, inputs);
    inputs[in_len++] = eos_id;
    tgt_len = encode(tokens, mask, length, 0, sentinel_top, targets);
    targets[tgt_len++] = eos_id;
    *n_in = in_len;
    *n_tgt = tgt_len;
    return 0;
}

int zt_span_raw_length(int seq_len, float noise_density, float mean_span, int *raw_length,
                       int *targets_length)
{
    int best = 0, n_noise, n_spans, rc;
    if (!raw_length)
        return zt_fail(ZT_E_INVAL, "zt_span_raw_length: raw_length is NULL");
    for (int L = 2; L <= seq_len * 4 + 8; L++) { /* inputs grow with L: stop at the first miss */
        if ((rc = zt_span_counts(L, noise_density, mean_span, &n_noise, &n_spans)) < 0)
            return rc;
        if (L - n_noise + n_spans + 1 > seq_len)
            break;
        best = L;
    }
    if (best < 2)
        return zt_fail(ZT_E_RANGE, "span corruption: inputs of %d tokens hold no sample", seq_len);
    if ((rc = zt_span_counts(best, noise_density, mean_span, &n_noise, &n_spans)) < 0)
        return rc;
    *raw_length = best;
    if (targets_length)
        *targets_length = n_noise + n_spans + 1;
    return 0;
}
