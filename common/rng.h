/* rng.h - Philox 4x32-10, counter-based: every random number is a pure function of
 * (seed, global sample index, stream, element index), so results never depend on how
 * work is split across ranks, micro-batches or threads. No global state. */
#ifndef ZT_COMMON_RNG_H
#define ZT_COMMON_RNG_H

#include <stdint.h>

/* What a random stream is for; with the unit index it forms the 32-bit stream id. */
enum {
    ZT_RNG_INIT = 1,        /* parameter initialisation (sample = parameter index) */
    ZT_RNG_DROP_EMB = 2,    /* dropout after the embedding LayerNorm */
    ZT_RNG_DROP_ATT = 3,    /* dropout on attention probabilities */
    ZT_RNG_DROP_ATTOUT = 4, /* dropout after the attention output projection */
    ZT_RNG_DROP_FFOUT = 5,  /* dropout after the feed-forward output projection */
    ZT_RNG_DATA = 6,        /* synthetic data and masking */
    ZT_RNG_DROP_CLS = 9,    /* dropout before the sequence classifier */
    ZT_RNG_DROP_CLS_IN = 10, /* RoBERTa: dropout on <s> before the classifier's dense */
    /* T5 (7 and 8 are data/span.c's) */
    ZT_RNG_DROP_DEC_EMB = 16, /* dropout on the decoder's input embeddings */
    ZT_RNG_DROP_ATT2 = 17,    /* dropout on cross-attention probabilities */
    ZT_RNG_DROP_CROSSOUT = 18, /* dropout after the cross-attention output projection */
    ZT_RNG_DROP_FFMID = 19,   /* dropout on the feed-forward's hidden activations */
    ZT_RNG_DROP_FINAL = 20,   /* dropout after a stack's final norm */
    /* ELECTRA's joint pretraining: the Gumbel noise sampling the generator's replacements
     * (stream: the position; element: the vocabulary id) */
    ZT_RNG_ELECTRA_SAMPLE = 21,
};

static inline uint32_t zt_rng_stream(int unit, int purpose)
{
    return ((uint32_t)unit << 8) | (uint32_t)(purpose & 0xff);
}

/* One Philox 4x32-10 block: out = philox(ctr, key). */
void zt_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* n 32-bit values of the stream, elements [first, first + n). */
void zt_rng_u32(uint64_t seed, uint64_t sample, uint32_t stream, uint64_t first, uint32_t *out,
                uint64_t n);

/* Uniform in [0, 1) with 24 random bits. */
static inline float zt_rng_uniform(uint32_t u) { return (float)(u >> 8) * 0x1p-24f; }

/* n normal(0, 1) values (Box-Muller on element pairs). */
void zt_rng_normal(uint64_t seed, uint64_t sample, uint32_t stream, float *out, uint64_t n);

#endif
