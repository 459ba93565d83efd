/* span.h - T5 span corruption (Raffel et al. 2020, t5/data/preprocessors.py): the random-spans
 * noise mask, the sentinel encoding of inputs and targets, and the fixed raw length for an
 * inputs length. Pure functions of their arguments; it does not read data, tokenize, pad,
 * pack or batch, and it allocates nothing.
 *
 * Randomness: Philox (common/rng.h) streams zt_rng_stream(0, 7) (noise-span lengths) and
 * zt_rng_stream(0, 8) (non-noise-span lengths), keyed by (seed, sample): a mask depends only
 * on (seed, sample, length, noise_density, mean_span), never on threads, ranks or on which
 * other samples were drawn. The bits differ from TensorFlow's; the distribution is T5's. */
#ifndef ZT_DATA_SPAN_H
#define ZT_DATA_SPAN_H

#include <stdint.h>

/* The counts T5's random_spans_noise_mask uses for a sequence of `length` tokens, computed as
 * it does in float32 with round-half-to-even (tf.round):
 *   L = max(length, 2); n_noise = clamp(round(L * noise_density), 1, L - 1);
 *   n_spans = max(round(n_noise / mean_span), 1)   (noise spans = non-noise spans).
 * Reported for the mask zt_span_mask returns: length 1 gives 0 and 0 (T5 builds the length-2
 * mask [0, 1] and keeps its first element). The mask of a sequence of length >= 2 gives
 * zt_span_corrupt outputs of length - n_noise + n_spans + 1 (inputs) and n_noise + n_spans + 1
 * (targets), EOS included.
 * Needs length >= 1, 0 < noise_density < 1, 1 <= mean_span < inf; ZT_E_INVAL otherwise, and
 * ZT_E_RANGE if n_spans non-noise spans do not fit in the L - n_noise non-noise tokens (T5
 * fails there too, e.g. density 0.6 with mean_span 1). n_noise, n_spans: one int each. */
int zt_span_counts(int length, float noise_density, float mean_span, int *n_noise,
                   int *n_spans);

/* T5's random_spans_helper with one sentinel per span in inputs and targets (as T5's
 * span_corruption calls it), computed as T5 does in double with Python's round (half to even):
 * the raw tokens per sample (*tokens_length, for split_tokens) whose corrupted inputs, EOS
 * included, are the longest not exceeding inputs_length, and the targets length with EOS
 * (*targets_length). At noise_density 0.5, T5 trims one token if targets would be longer than
 * inputs. T5 rounds here in double but masks in float32: where t * noise_density sits at an
 * exact .5 in one precision only, the real lengths differ from these (zt_span_counts on
 * *tokens_length gives the real ones); inputs_length 64, 128, 256, 512 and 1024 at (0.15, 3)
 * are exact. inputs_length 512 at (0.15, 3) gives 568 and 114. Takes O(tokens_length) steps.
 * Needs inputs_length >= 2 and the arguments of zt_span_counts; ZT_E_RANGE if tokens_length
 * would pass INT_MAX or the mask at tokens_length is impossible. Outputs: one int each. */
int zt_span_lengths(int inputs_length, double noise_density, double mean_span,
                    int *tokens_length, int *targets_length);

/* The raw length zerotrain's span-corruption source reads for inputs of seq_len: the longest
 * L >= 2 whose corrupted inputs (EOS included) fit seq_len by zt_span_counts' float32
 * counts, and the targets' length at L (*targets_length, may be NULL). T5's
 * zt_span_lengths counts in double: the same except at its .5 cases. Errors as
 * zt_span_counts; ZT_E_RANGE when no L >= 2 fits. */
int zt_span_raw_length(int seq_len, float noise_density, float mean_span, int *raw_length,
                       int *targets_length);

/* mask[length]: 1 = noise, 0 = kept. T5's random_spans_noise_mask: the counts of
 * zt_span_counts, noise and non-noise span lengths each a uniformly random composition into
 * n_spans positive parts, interleaved non-noise, noise, non-noise, ..., so a mask of
 * length >= 2 starts with kept tokens and ends with noise. A pure function of (seed, sample,
 * length, noise_density, mean_span). Errors as zt_span_counts, ZT_E_INVAL for a NULL mask. */
int zt_span_mask(uint64_t seed, uint64_t sample, int length, float noise_density,
                 float mean_span, uint8_t *mask);

/* T5's noise_span_to_unique_sentinel (inputs) and nonnoise_span_to_unique_sentinel (targets),
 * then EOS appended to each, for any mask:
 *   inputs:  kept tokens in order, the k-th noise run (k = 0, 1, ...) replaced by the single
 *            token sentinel_top - k, then eos_id;
 *   targets: noise tokens in order, the k-th kept run replaced by sentinel_top - k, then eos_id.
 * For a zt_span_mask mask (kept first, noise last) the targets are: sentinel_top, noise span 0,
 * sentinel_top - 1, noise span 1, ..., EOS, and sentinel k means the same span on both sides.
 * A nonzero mask byte is noise. Tokens are copied as they are: keep them out of the sentinel
 * range. tokens[length], mask[length]; inputs[in_cap] -> *n_in values; targets[tgt_cap] ->
 * *n_tgt values. ZT_E_INVAL for NULL pointers or length < 1, ZT_E_SHAPE if a capacity is too
 * small, ZT_E_RANGE if a sentinel would go below 0 or equal eos_id; on error nothing is
 * written. */
int zt_span_corrupt(const int32_t *tokens, const uint8_t *mask, int length, int32_t sentinel_top,
                    int32_t eos_id, int64_t *inputs, int in_cap, int *n_in, int64_t *targets,
                    int tgt_cap, int *n_tgt);

#endif
