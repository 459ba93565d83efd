/* data.c - masked-LM samples from a prepared corpus or from synthetic ids: which sequence a
 * global sample index reads (a seeded per-epoch permutation, O(1) memory) and how it is
 * masked (Philox per position). Knows nothing of ranks or micro-batches by design. */
#include "zerotrain.h"
#include "rng.h"
#include "../common/err.h"

#include <stdlib.h>
#include <string.h>

#define SYNTH_SPECIALS 5 /* [PAD] [UNK] [CLS] [SEP] [MASK] = 0..4 */

struct zt_mlm_source {
    const zt_token_data *data; /* NULL: synthetic */
    zt_tokenizer_info tok;
    int vocab, T;
    uint32_t mask_threshold;   /* select a position when u32 < threshold */
    uint64_t seed, n_seq;
    int32_t *row;              /* scratch: one row of stream tokens */
};

int zt_mlm_source_create(const zt_token_data *data, int vocab_size, int seq_len,
                         float mask_prob, uint64_t seed, zt_mlm_source **out)
{
    zt_mlm_source *s;
    if (!out || seq_len < 3 || vocab_size <= SYNTH_SPECIALS || !(mask_prob >= 0.0f) ||
        mask_prob > 1.0f)
        return zt_fail(ZT_E_INVAL, "masked-LM data: need seq_len >= 3, vocab_size > %d and "
                                   "mask_prob in [0, 1]", SYNTH_SPECIALS);
    if (!(s = calloc(1, sizeof *s)) || !(s->row = malloc(sizeof(int32_t) * (size_t)seq_len))) {
        free(s);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    s->data = data;
    s->vocab = vocab_size;
    s->T = seq_len;
    s->seed = seed;
    s->mask_threshold = (uint32_t)((double)mask_prob * 4294967295.0);
    if (data) {
        zt_token_data_info di;
        zt_token_data_info_get(data, &di);
        s->tok = di.tok;
        if (di.tok.vocab_size > vocab_size) {
            zt_mlm_source_destroy(s);
            return zt_fail(ZT_E_CONFIG, "the data's vocabulary (%d) is larger than the model's "
                                        "vocab_size %d", di.tok.vocab_size, vocab_size);
        }
        s->n_seq = di.n_tokens / (uint64_t)(seq_len - 2);
        if (s->n_seq == 0) {
            zt_mlm_source_destroy(s);
            return zt_fail(ZT_E_RANGE, "the corpus has %llu tokens, fewer than one sequence of "
                                       "%d", (unsigned long long)di.n_tokens, seq_len - 2);
        }
    } else {
        s->tok = (zt_tokenizer_info){.type = "synthetic", .vocab_size = vocab_size,
                                     .pad_id = 0, .unk_id = 1, .cls_id = 2, .sep_id = 3,
                                     .mask_id = 4};
        s->n_seq = 1ull << 62;
    }
    *out = s;
    return 0;
}

void zt_mlm_source_destroy(zt_mlm_source *s)
{
    if (!s)
        return;
    free(s->row);
    free(s);
}

uint64_t zt_mlm_source_samples(const zt_mlm_source *s) { return s ? s->n_seq : 0; }

/* A bijection of [0, n) keyed by (seed, epoch): a 4-round Feistel network on the smallest
 * even number of bits covering n, cycle-walking until the value falls inside [0, n). */
static uint64_t permute(uint64_t x, uint64_t n, uint64_t seed, uint64_t epoch)
{
    int bits = 2;
    while (bits < 64 && (1ull << bits) < n)
        bits += 2;
    int half = bits / 2;
    uint64_t mask = (1ull << half) - 1;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (uint32_t round = 0; round < 4; round++) {
            uint32_t f;
            zt_rng_u32(seed ^ 0x5bd1e995ull, epoch, zt_rng_stream(round, ZT_RNG_DATA), r, &f, 1);
            uint64_t t = l ^ (f & mask);
            l = r;
            r = t;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

static int is_special(const zt_tokenizer_info *t, int64_t id)
{
    return id == t->pad_id || id == t->cls_id || id == t->sep_id || id == t->mask_id ||
           id == t->unk_id;
}

int zt_mlm_source_fill(const zt_mlm_source *s, uint64_t first, int B, int64_t *ids,
                       int64_t *attention_mask, int64_t *token_type_ids, int64_t *labels)
{
    int T;
    if (!s || B < 1 || !ids || !labels)
        return zt_fail(ZT_E_INVAL, "zt_mlm_source_fill: bad arguments");
    T = s->T;
    for (int b = 0; b < B; b++) {
        uint64_t g = first + (uint64_t)b;
        int64_t *row = ids + (size_t)b * T, *lab = labels + (size_t)b * T;
        row[0] = s->tok.cls_id;
        row[T - 1] = s->tok.sep_id;
        if (s->data) {
            uint64_t seq = permute(g % s->n_seq, s->n_seq, s->seed, g / s->n_seq);
            int rc = zt_token_data_read(s->data, seq * (uint64_t)(T - 2), (size_t)(T - 2),
                                        s->row);
            if (rc < 0)
                return rc;
            for (int t = 1; t < T - 1; t++)
                row[t] = s->row[t - 1];
        } else {
            uint32_t u[64];
            for (int t = 1; t < T - 1; t += 64) {
                int k = T - 1 - t < 64 ? T - 1 - t : 64;
                zt_rng_u32(s->seed, g, zt_rng_stream(1, ZT_RNG_DATA), (uint64_t)t, u, (uint64_t)k);
                for (int j = 0; j < k; j++)
                    row[t + j] = SYNTH_SPECIALS + (int64_t)(u[j] % (uint32_t)(s->vocab - SYNTH_SPECIALS));
            }
        }
        for (int t = 0; t < T; t++) {
            uint32_t r[4];
            lab[t] = -100;
            if (attention_mask)
                attention_mask[(size_t)b * T + t] = 1;
            if (token_type_ids)
                token_type_ids[(size_t)b * T + t] = 0;
            if (is_special(&s->tok, row[t]))
                continue;
            zt_rng_u32(s->seed, g, zt_rng_stream(0, ZT_RNG_DATA), 4 * (uint64_t)t, r, 4);
            if (r[0] >= s->mask_threshold)
                continue;
            lab[t] = row[t];
            if (r[1] % 10 < 8)
                row[t] = s->tok.mask_id;
            else if (r[1] % 10 == 8)
                row[t] = (int64_t)(r[2] % (uint32_t)s->vocab);
        }
    }
    return 0;
}
