/* data.c - masked-LM and span-corruption (T5) samples from a prepared corpus or from synthetic
 * ids: which sequence a global sample index reads (a seeded per-epoch permutation, O(1)
 * memory) and how it is masked (Philox per position, data/span.c's spans). Knows nothing of
 * ranks or micro-batches by design. */
#include "zerotrain.h"
#include "../common/rng.h"
#include "../common/err.h"
#include "../data/span.h"
#include "../data/tokens.h"

#include <stdlib.h>
#include <string.h>

#define SYNTH_SPECIALS 5 /* [PAD] [UNK] [CLS] [SEP] [MASK] = 0..4 */

struct zt_mlm_source {
    const zt_token_data *data; /* NULL: synthetic */
    zt_tokenizer_info tok;
    int32_t special[SYNTH_SPECIALS]; /* synthetic: the special ids, ascending */
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
        if (di.tok.cls_id < 0 || di.tok.mask_id < 0) {
            zt_mlm_source_destroy(s);
            return zt_fail(ZT_E_CONFIG, "%s: the data's vocabulary has no %s (tokenizer %s%s%s): "
                           "masked-LM training needs [CLS], [SEP] and [MASK]; prepare the data "
                           "with a BERT tokenizer", zt_token_data_manifest(data),
                           di.tok.cls_id < 0 ? "[CLS]" : "[MASK]", di.tok.type,
                           di.tok.hf_class[0] ? ", " : "", di.tok.hf_class);
        }
        if (di.tok.vocab_size > vocab_size) {
            zt_mlm_source_destroy(s);
            return zt_fail(ZT_E_CONFIG, "%s: the data's vocabulary (%d ids, tokenizer %s) is "
                           "larger than the model's vocab_size %d: train a model with "
                           "vocab_size >= %d, or prepare the data with this model's tokenizer",
                           zt_token_data_manifest(data), di.tok.vocab_size, di.tok.type,
                           vocab_size, di.tok.vocab_size);
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
        for (int k = 0; k < SYNTH_SPECIALS; k++)
            s->special[k] = k;
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

int zt_mlm_source_set_specials(zt_mlm_source *s, const int32_t ids[5])
{
    if (!s || !ids || s->data)
        return zt_fail(ZT_E_INVAL, "zt_mlm_source_set_specials: %s",
                       s && ids ? "the source reads data: its tokenizer's special ids apply"
                                : "NULL argument");
    int32_t v[SYNTH_SPECIALS];
    for (int k = 0; k < SYNTH_SPECIALS; k++) {
        if (ids[k] < 0 || ids[k] >= s->vocab)
            return zt_fail(ZT_E_INVAL, "zt_mlm_source_set_specials: id %d is outside [0, %d)",
                           ids[k], s->vocab);
        for (int j = 0; j < k; j++)
            if (ids[j] == ids[k])
                return zt_fail(ZT_E_INVAL, "zt_mlm_source_set_specials: id %d is given twice",
                               ids[k]);
        int j = k; /* insertion into ascending order */
        while (j > 0 && v[j - 1] > ids[k]) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = ids[k];
    }
    memcpy(s->special, v, sizeof v);
    s->tok.pad_id = ids[0];
    s->tok.unk_id = ids[1];
    s->tok.cls_id = ids[2];
    s->tok.sep_id = ids[3];
    s->tok.mask_id = ids[4];
    return 0;
}

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

uint64_t zt_epoch_order(uint64_t seed, uint64_t n, uint64_t g)
{
    return n ? permute(g % n, n, seed, g / n) : 0;
}

static int is_special(const zt_tokenizer_info *t, int64_t id)
{
    return id == t->pad_id || id == t->cls_id || id == t->sep_id || id == t->mask_id ||
           id == t->unk_id;
}

/* synthetic ids of sample g: out[j] = element first + j of its stream, uniform over
 * [0, vocab) without the special ids (sp: ascending; 0 ... 4 gives [5, vocab)) */
static void synth_ids(uint64_t seed, uint64_t g, int vocab, const int32_t *sp, uint64_t first,
                      int32_t *out, int n)
{
    uint32_t u[64];
    for (int t = 0; t < n; t += 64) {
        int k = n - t < 64 ? n - t : 64;
        zt_rng_u32(seed, g, zt_rng_stream(1, ZT_RNG_DATA), first + (uint64_t)t, u, (uint64_t)k);
        for (int j = 0; j < k; j++) {
            int32_t r = (int32_t)(u[j] % (uint32_t)(vocab - SYNTH_SPECIALS));
            for (int q = 0; q < SYNTH_SPECIALS; q++) /* step over the specials below it */
                r += r >= sp[q];
            out[t + j] = r;
        }
    }
}

/* The rows of samples [first, first + B) (sop NULL: masked LM; else ALBERT's SOP pairs). */
static int fill(const zt_mlm_source *s, uint64_t first, int B, int64_t *ids,
                int64_t *attention_mask, int64_t *token_type_ids, int64_t *labels, int64_t *sop)
{
    int T = s->T, n = sop ? T - 3 : T - 2; /* stream tokens per row */
    for (int b = 0; b < B; b++) {
        uint64_t g = first + (uint64_t)b;
        int64_t *row = ids + (size_t)b * T, *lab = labels + (size_t)b * T;
        int sep = -1; /* SOP: the first [SEP]'s position */
        if (s->data) {
            uint64_t seq = permute(g % s->n_seq, s->n_seq, s->seed, g / s->n_seq);
            int rc = zt_token_data_read(s->data, seq * (uint64_t)(T - 2), (size_t)n, s->row);
            if (rc < 0)
                return rc;
        } else { /* (elements 1 .. n of the stream: the positions they fill) */
            synth_ids(s->seed, g, s->vocab, s->special, 1, s->row, n);
        }
        row[0] = s->tok.cls_id;
        row[T - 1] = s->tok.sep_id;
        if (!sop) {
            for (int t = 1; t < T - 1; t++)
                row[t] = s->row[t - 1];
        } else { /* A = the first k tokens, B the other n - k: [CLS] A [SEP] B [SEP], or
                  * [CLS] B [SEP] A [SEP] (label 1) */
            uint32_t r[2];
            zt_rng_u32(s->seed, g, zt_rng_stream(2, ZT_RNG_DATA), 0, r, 2);
            int k = 1 + (int)(r[0] % (uint32_t)(n - 1)), swap = r[1] >> 31;
            int na = swap ? n - k : k;
            const int32_t *first_seg = swap ? s->row + k : s->row;
            const int32_t *second_seg = swap ? s->row : s->row + k;
            for (int t = 0; t < na; t++)
                row[1 + t] = first_seg[t];
            sep = 1 + na;
            row[sep] = s->tok.sep_id;
            for (int t = 0; t < n - na; t++)
                row[sep + 1 + t] = second_seg[t];
            sop[b] = swap;
        }
        for (int t = 0; t < T; t++) {
            uint32_t r[4];
            lab[t] = -100;
            if (attention_mask)
                attention_mask[(size_t)b * T + t] = 1;
            if (token_type_ids)
                token_type_ids[(size_t)b * T + t] = sep >= 0 && t > sep;
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

int zt_mlm_source_fill(const zt_mlm_source *s, uint64_t first, int B, int64_t *ids,
                       int64_t *attention_mask, int64_t *token_type_ids, int64_t *labels)
{
    if (!s || B < 1 || !ids || !labels)
        return zt_fail(ZT_E_INVAL, "zt_mlm_source_fill: bad arguments");
    return fill(s, first, B, ids, attention_mask, token_type_ids, labels, NULL);
}

int zt_mlm_source_fill_sop(const zt_mlm_source *s, uint64_t first, int B, int64_t *ids,
                           int64_t *attention_mask, int64_t *token_type_ids, int64_t *labels,
                           int64_t *sentence_order_label)
{
    if (!s || B < 1 || !ids || !labels || !sentence_order_label)
        return zt_fail(ZT_E_INVAL, "zt_mlm_source_fill_sop: bad arguments");
    if (s->T < 5)
        return zt_fail(ZT_E_INVAL, "zt_mlm_source_fill_sop: sentence-order pairs need seq_len "
                       ">= 5 ([CLS] A [SEP] B [SEP]), not %d", s->T);
    return fill(s, first, B, ids, attention_mask, token_type_ids, labels, sentence_order_label);
}

/* ---- span corruption ------------------------------------------------------------------- */

struct zt_span_source {
    const zt_token_data *data; /* NULL: synthetic */
    zt_tokenizer_info tok;
    int T, Td, L;              /* inputs, targets, raw tokens per sample */
    float density, mean;
    int32_t sentinel_top;
    uint64_t seed, n_seq;
    /* scratch: the raw tokens [L], their noise mask [L], the inputs [T] and targets [Td] */
    int32_t *row;
    uint8_t *mask;
    int64_t *in, *tgt;
};

int zt_span_source_create(const zt_token_data *data, int vocab_size, int seq_len,
                          float noise_density, float mean_span, uint64_t seed,
                          zt_span_source **out)
{
    zt_span_source *s;
    int rc;
    if (!out || seq_len < 4 || vocab_size <= SYNTH_SPECIALS + ZT_SPAN_EXTRA_IDS)
        return zt_fail(ZT_E_INVAL, "span-corruption data: need seq_len >= 4 and vocab_size > "
                                   "%d", SYNTH_SPECIALS + ZT_SPAN_EXTRA_IDS);
    if (!(s = calloc(1, sizeof *s)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    s->data = data;
    s->T = seq_len;
    s->density = noise_density;
    s->mean = mean_span;
    s->seed = seed;
    /* the longest raw length whose inputs (kept tokens, a sentinel per span, EOS) fit T */
    if ((rc = zt_span_raw_length(seq_len, noise_density, mean_span, &s->L, &s->Td)) < 0)
        goto fail;
    if (data) {
        zt_token_data_info di;
        zt_token_data_info_get(data, &di);
        s->tok = di.tok;
        if (di.tok.vocab_size + ZT_SPAN_EXTRA_IDS > vocab_size) {
            rc = zt_fail(ZT_E_CONFIG, "%s: span corruption needs %d sentinel ids above the "
                         "data's vocabulary (%d ids, tokenizer %s): the model's vocab_size %d "
                         "is smaller than %d", zt_token_data_manifest(data), ZT_SPAN_EXTRA_IDS,
                         di.tok.vocab_size, di.tok.type, vocab_size,
                         di.tok.vocab_size + ZT_SPAN_EXTRA_IDS);
            goto fail;
        }
        s->sentinel_top = di.tok.vocab_size + ZT_SPAN_EXTRA_IDS - 1;
        s->n_seq = di.n_tokens / (uint64_t)s->L;
        if (s->n_seq == 0) {
            rc = zt_fail(ZT_E_RANGE, "the corpus has %llu tokens, fewer than one sample of %d",
                         (unsigned long long)di.n_tokens, s->L);
            goto fail;
        }
    } else {
        s->tok = (zt_tokenizer_info){.type = "synthetic", .vocab_size = vocab_size -
                                     ZT_SPAN_EXTRA_IDS, .pad_id = 0, .unk_id = 1, .cls_id = 2,
                                     .sep_id = 3, .mask_id = 4};
        s->sentinel_top = vocab_size - 1;
        s->n_seq = 1ull << 62;
    }
    if (!(s->row = malloc(sizeof *s->row * (size_t)s->L)) || !(s->mask = malloc((size_t)s->L)) ||
        !(s->in = malloc(sizeof *s->in * (size_t)s->T)) ||
        !(s->tgt = malloc(sizeof *s->tgt * (size_t)s->Td))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    zt_span_source_destroy(s);
    return rc;
}

void zt_span_source_destroy(zt_span_source *s)
{
    if (!s)
        return;
    free(s->row);
    free(s->mask);
    free(s->in);
    free(s->tgt);
    free(s);
}

uint64_t zt_span_source_samples(const zt_span_source *s) { return s ? s->n_seq : 0; }
int zt_span_source_target_len(const zt_span_source *s) { return s ? s->Td : 0; }
int zt_span_source_raw_len(const zt_span_source *s) { return s ? s->L : 0; }

int zt_span_source_fill(const zt_span_source *s, uint64_t first, int B, int64_t *input_ids,
                        int64_t *attention_mask, int64_t *labels)
{
    if (!s || B < 1 || !input_ids || !labels)
        return zt_fail(ZT_E_INVAL, "zt_span_source_fill: bad arguments");
    for (int b = 0; b < B; b++) {
        uint64_t g = first + (uint64_t)b;
        int n_in, n_tgt, rc;
        if (s->data) {
            uint64_t seq = permute(g % s->n_seq, s->n_seq, s->seed, g / s->n_seq);
            if ((rc = zt_token_data_read(s->data, seq * (uint64_t)s->L, (size_t)s->L, s->row)) < 0)
                return rc;
        } else {
            static const int32_t sp[SYNTH_SPECIALS] = {0, 1, 2, 3, 4};
            synth_ids(s->seed, g, s->tok.vocab_size, sp, 0, s->row, s->L);
        }
        if ((rc = zt_span_mask(s->seed, g, s->L, s->density, s->mean, s->mask)) < 0 ||
            (rc = zt_span_corrupt(s->row, s->mask, s->L, s->sentinel_top, s->tok.sep_id, s->in,
                                  s->T, &n_in, s->tgt, s->Td, &n_tgt)) < 0)
            return rc;
        for (int t = 0; t < s->T; t++) {
            input_ids[(size_t)b * s->T + t] = t < n_in ? s->in[t] : s->tok.pad_id;
            if (attention_mask)
                attention_mask[(size_t)b * s->T + t] = t < n_in;
        }
        for (int t = 0; t < s->Td; t++)
            labels[(size_t)b * s->Td + t] = t < n_tgt ? s->tgt[t] : -100;
    }
    return 0;
}
