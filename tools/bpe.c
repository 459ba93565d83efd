/* bpe.c - byte-level BPE (bpe.h), transcribed from transformers' tokenization_gpt2.py
 * (bytes_to_unicode, get_pairs, bpe, _tokenize). The pattern's classes are the regex module's:
 * \s is Unicode White_Space, \p{L} the letters (L*), \p{N} the numbers (N*), from
 * libunistring's tables. */
#include "bpe.h"
#include "growbuf.h"

#include <cjson/cJSON.h>
#include <unictype.h>
#include <unistr.h>
#include <xxhash.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a symbol: a vocabulary token or a part of a merge (strings interned in one table) */
typedef struct sym {
    char *s;
    uint32_t len;
    int32_t id;          /* its vocab.json id, -1 if none */
} sym;

typedef struct merge_slot {
    int32_t a, b;        /* the pair's symbols (-1: empty slot) */
    int32_t rank, to;    /* its rank (line order) and the merged symbol */
} merge_slot;

struct bpe_model {
    sym *syms;
    int32_t n_syms, cap_syms;
    int32_t *sym_slot;   /* open addressing over syms by string: index or -1 */
    size_t sym_mask;
    merge_slot *merges;  /* open addressing by (a, b) */
    size_t merge_mask;
    int32_t *by_id;      /* vocabulary id -> symbol, -1 where the ids leave a gap */
    int32_t n_ids, vocab;
    int32_t byte_sym[256]; /* byte b's one-character symbol */
    /* scratch of one word's symbols */
    int32_t *w;
    size_t w_cap;
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- bytes_to_unicode --------------------------------------------------------------------- */

static int printable(int b)
{
    return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* the printable character that spells byte b: the byte itself for "!".."~", "¡".."¬",
 * "®".."ÿ", else 256 + n for the n-th other byte in order */
static uint32_t byte_char(int b)
{
    int n = 0;
    if (printable(b))
        return (uint32_t)b;
    for (int k = 0; k < b; k++)
        n += !printable(k);
    return 256u + (uint32_t)n;
}

/* the byte character c spells, or -1 (byte_char's inverse) */
static int char_byte(uint32_t c)
{
    if (c < 256)
        return printable((int)c) ? (int)c : -1;
    for (int k = 0, n = 256; k < 256; k++)
        if (!printable(k) && (uint32_t)n++ == c)
            return k;
    return -1;
}

size_t bpe_token_bytes(const char *tok, char *out)
{
    size_t o = 0, n = strlen(tok);
    const uint8_t *s = (const uint8_t *)tok;
    for (size_t i = 0; i < n;) {
        ucs4_t c;
        int k = u8_mbtoucr(&c, s + i, n - i);
        if (k < 1) { /* not UTF-8: the byte as it is */
            out[o++] = (char)s[i++];
            continue;
        }
        int b = char_byte(c);
        if (b >= 0) {
            out[o++] = (char)b;
        } else {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
        }
        i += (size_t)k;
    }
    return o;
}

/* ---- the symbol table ----------------------------------------------------------------------- */

static size_t hash_str(const char *s, size_t n) { return (size_t)XXH3_64bits(s, n); }

static int32_t find_sym(const bpe_model *b, const char *s, size_t n)
{
    if (!b->sym_slot)
        return -1;
    for (size_t h = hash_str(s, n) & b->sym_mask;; h = (h + 1) & b->sym_mask) {
        int32_t k = b->sym_slot[h];
        if (k < 0)
            return -1;
        if (b->syms[k].len == n && memcmp(b->syms[k].s, s, n) == 0)
            return k;
    }
}

static int grow_syms(bpe_model *b)
{
    size_t slots = (b->sym_mask + 1) * 2;
    int32_t *t = malloc(sizeof *t * slots);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < slots; i++)
        t[i] = -1;
    for (int32_t k = 0; k < b->n_syms; k++) {
        size_t h = hash_str(b->syms[k].s, b->syms[k].len) & (slots - 1);
        while (t[h] >= 0)
            h = (h + 1) & (slots - 1);
        t[h] = k;
    }
    free(b->sym_slot);
    b->sym_slot = t;
    b->sym_mask = slots - 1;
    return 0;
}

/* the symbol of string s (added if new) */
static int32_t intern(bpe_model *b, const char *s, size_t n)
{
    int32_t k = find_sym(b, s, n);
    if (k >= 0)
        return k;
    if ((size_t)(b->n_syms + 1) * 2 > b->sym_mask + 1 && grow_syms(b) < 0)
        return -ENOMEM;
    if (b->n_syms == b->cap_syms) {
        int32_t cap = b->cap_syms ? b->cap_syms * 2 : 1024;
        sym *g = realloc(b->syms, sizeof *g * (size_t)cap);
        if (!g)
            return -ENOMEM;
        b->syms = g;
        b->cap_syms = cap;
    }
    sym *y = &b->syms[b->n_syms];
    if (!(y->s = malloc(n + 1)))
        return -ENOMEM;
    memcpy(y->s, s, n);
    y->s[n] = '\0';
    y->len = (uint32_t)n;
    y->id = -1;
    size_t h = hash_str(s, n) & b->sym_mask;
    while (b->sym_slot[h] >= 0)
        h = (h + 1) & b->sym_mask;
    b->sym_slot[h] = b->n_syms;
    return b->n_syms++;
}

static size_t hash_pair(int32_t a, int32_t c)
{
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)c;
    return (size_t)XXH3_64bits(&k, sizeof k);
}

static const merge_slot *find_merge(const bpe_model *b, int32_t a, int32_t c)
{
    if (!b->merges)
        return NULL;
    for (size_t h = hash_pair(a, c) & b->merge_mask;; h = (h + 1) & b->merge_mask) {
        const merge_slot *m = &b->merges[h];
        if (m->a < 0)
            return NULL;
        if (m->a == a && m->b == c)
            return m;
    }
}

/* ---- loading -------------------------------------------------------------------------------- */

void bpe_free(bpe_model *b)
{
    if (!b)
        return;
    for (int32_t k = 0; k < b->n_syms; k++)
        free(b->syms[k].s);
    free(b->syms);
    free(b->sym_slot);
    free(b->merges);
    free(b->by_id);
    free(b->w);
    free(b);
}

static int load_vocab(bpe_model *b, const char *name, const char *text, size_t len, char *err,
                      size_t errlen)
{
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, len, &end, 0), *e;
    int rc = 0;
    if (!o || !cJSON_IsObject(o)) {
        long at = o || !end ? -1 : (long)(end - text);
        cJSON_Delete(o);
        if (at >= 0)
            return fail(err, errlen, "%s: not JSON (a syntax error at byte %ld)", name, at);
        return fail(err, errlen, "%s: not a JSON object of tokens and ids", name);
    }
    cJSON_ArrayForEach(e, o) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e8 ||
            e->valuedouble != (double)(int32_t)e->valuedouble) {
            rc = fail(err, errlen, "%s: \"%s\" maps to %s, not an id", name, e->string,
                      cJSON_IsNumber(e) ? "a number out of range" : "something else");
            break;
        }
        int32_t id = (int32_t)e->valuedouble, k = intern(b, e->string, strlen(e->string));
        if (k < 0) {
            rc = fail(err, errlen, "%s: out of memory", name);
            break;
        }
        if (b->syms[k].id >= 0) { /* (a JSON object with a key twice: the last one holds) */
            b->vocab--;
        }
        b->syms[k].id = id;
        b->vocab++;
        if (id >= b->n_ids)
            b->n_ids = id + 1;
    }
    cJSON_Delete(o);
    if (rc < 0)
        return rc;
    if (b->vocab == 0)
        return fail(err, errlen, "%s: no tokens", name);
    if (!(b->by_id = malloc(sizeof *b->by_id * (size_t)b->n_ids)))
        return fail(err, errlen, "%s: out of memory", name);
    for (int32_t i = 0; i < b->n_ids; i++)
        b->by_id[i] = -1;
    for (int32_t k = 0; k < b->n_syms; k++) {
        int32_t id = b->syms[k].id;
        if (id < 0)
            continue;
        if (b->by_id[id] >= 0)
            return fail(err, errlen, "%s: the tokens \"%s\" and \"%s\" have the same id %d "
                        "(decoding could not tell them apart)", name,
                        b->syms[b->by_id[id]].s, b->syms[k].s, (int)id);
        b->by_id[id] = k;
    }
    return 0;
}

/* merges.txt as HF reads it: read().split("\n")[1:-1], each line's split() a pair; the
 * rank is the line's place (a line that is not two symbols takes a rank and merges
 * nothing; a pair given twice keeps its last rank) */
static int load_merges(bpe_model *b, const char *name, const char *text, size_t len, char *err,
                       size_t errlen)
{
    size_t n_lines = 0, slots = 16;
    for (size_t i = 0; i < len; i++)
        n_lines += text[i] == '\n';
    while (slots < 2 * n_lines + 2)
        slots *= 2;
    if (!(b->merges = malloc(sizeof *b->merges * slots)))
        return fail(err, errlen, "%s: out of memory", name);
    b->merge_mask = slots - 1;
    for (size_t i = 0; i < slots; i++)
        b->merges[i].a = -1;
    const char *p = memchr(text, '\n', len), *stop = text + len;
    int32_t rank = 0;
    char buf[1024];
    if (!p)
        return 0;
    for (p++; p < stop; rank++) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        if (!nl) /* after the last newline: not a merge */
            break;
        /* str.split(): runs of whitespace (ASCII here: the symbols are printable) */
        const char *f[3] = {NULL}, *fe[3] = {NULL};
        int nf = 0;
        for (const char *q = p; q < nl && nf < 3;) {
            while (q < nl && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\v' || *q == '\f'))
                q++;
            if (q == nl)
                break;
            f[nf] = q;
            while (q < nl && !(*q == ' ' || *q == '\t' || *q == '\r' || *q == '\v' || *q == '\f'))
                q++;
            fe[nf++] = q;
        }
        if (nf == 2 && (size_t)(fe[0] - f[0]) + (size_t)(fe[1] - f[1]) < sizeof buf) {
            size_t la = (size_t)(fe[0] - f[0]), lc = (size_t)(fe[1] - f[1]);
            int32_t a = intern(b, f[0], la), c = intern(b, f[1], lc), to;
            memcpy(buf, f[0], la);
            memcpy(buf + la, f[1], lc);
            to = intern(b, buf, la + lc);
            if (a < 0 || c < 0 || to < 0)
                return fail(err, errlen, "%s: out of memory", name);
            size_t h = hash_pair(a, c) & b->merge_mask;
            while (b->merges[h].a >= 0 && !(b->merges[h].a == a && b->merges[h].b == c))
                h = (h + 1) & b->merge_mask;
            b->merges[h] = (merge_slot){a, c, rank, to};
        }
        p = nl + 1;
    }
    return 0;
}

int bpe_load(const char *name, const char *vocab, size_t vocab_len, const char *merges,
             size_t merges_len, bpe_model **out, char *err, size_t errlen)
{
    bpe_model *b = calloc(1, sizeof *b);
    *out = NULL;
    if (!b || !(b->sym_slot = malloc(sizeof *b->sym_slot * 1024))) {
        free(b);
        return fail(err, errlen, "%s: out of memory", name);
    }
    b->sym_mask = 1023;
    for (size_t i = 0; i < 1024; i++)
        b->sym_slot[i] = -1;
    char vname[1100], mname[1100];
    snprintf(vname, sizeof vname, "%s/vocab.json", name);
    snprintf(mname, sizeof mname, "%s/merges.txt", name);
    if (load_vocab(b, vname, vocab, vocab_len, err, errlen) < 0 ||
        load_merges(b, mname, merges, merges_len, err, errlen) < 0)
        goto bad;
    for (int x = 0; x < 256; x++) {
        uint8_t u[4];
        int k = u8_uctomb(u, byte_char(x), 4);
        if ((b->byte_sym[x] = intern(b, (const char *)u, (size_t)k)) < 0) {
            fail(err, errlen, "%s: out of memory", name);
            goto bad;
        }
    }
    *out = b;
    return 0;
bad:
    bpe_free(b);
    return -1;
}

int bpe_vocab_size(const bpe_model *b) { return b->vocab; }

int32_t bpe_token_id(const bpe_model *b, const char *tok, size_t n)
{
    int32_t k = find_sym(b, tok, n);
    return k < 0 ? -1 : b->syms[k].id;
}

const char *bpe_id_token(const bpe_model *b, int32_t id)
{
    return id < 0 || id >= b->n_ids || b->by_id[id] < 0 ? NULL : b->syms[b->by_id[id]].s;
}

/* ---- the pattern -------------------------------------------------------------------------- */

enum { K_SPACE, K_LETTER, K_NUMBER, K_OTHER };

static int kind(ucs4_t c)
{
    if (uc_is_property_white_space(c))
        return K_SPACE;
    if (uc_is_general_category(c, UC_CATEGORY_L))
        return K_LETTER;
    if (uc_is_general_category(c, UC_CATEGORY_N))
        return K_NUMBER;
    return K_OTHER;
}

/* the character at s[i] (a byte that is not UTF-8 counts as one "other" character) */
static size_t char_at(const char *s, size_t n, size_t i, int *k)
{
    ucs4_t c;
    int len = u8_mbtoucr(&c, (const uint8_t *)s + i, n - i);
    if (len < 1) {
        *k = K_OTHER;
        return 1;
    }
    *k = kind(c);
    return (size_t)len;
}

/* the end of a run of characters of kind k from i */
static size_t run(const char *s, size_t n, size_t i, int k)
{
    while (i < n) {
        int kk;
        size_t len = char_at(s, n, i, &kk);
        if (kk != k)
            break;
        i += len;
    }
    return i;
}

/* the length of the pattern's match at i (i < n) */
static size_t piece(const char *s, size_t n, size_t i)
{
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    int k0, k1 = -1;
    if (s[i] == '\'')
        for (size_t c = 0; c < sizeof contractions / sizeof *contractions; c++) {
            size_t L = strlen(contractions[c]);
            if (L <= n - i && !memcmp(s + i, contractions[c], L))
                return L;
        }
    size_t l0 = char_at(s, n, i, &k0), j = i;
    if (s[i] == ' ' && i + 1 < n) /* " ?" then a letter, number or other run */
        char_at(s, n, i + 1, &k1);
    if (s[i] == ' ' && k1 >= K_LETTER)
        j = i + 1;
    else if (k0 >= K_LETTER)
        k1 = k0;
    if (k1 >= K_LETTER && (j > i || k0 >= K_LETTER))
        return run(s, n, j, k1) - i;
    /* whitespace: \s+(?!\S) gives back its last character before a non-space, \s+ not */
    size_t e = run(s, n, i, K_SPACE), last = i;
    (void)l0;
    if (e == n)
        return e - i;
    for (size_t q = i; q < e;) { /* the start of the run's last character */
        int kk;
        last = q;
        q += char_at(s, n, q, &kk);
    }
    return last > i ? last - i : e - i;
}

/* ---- merging -------------------------------------------------------------------------------- */

/* bpe(): the lowest-ranked pair present, merged at every place left to right, until none */
static size_t merge_word(const bpe_model *b, int32_t *w, size_t n)
{
    while (n > 1) {
        int32_t best = INT32_MAX, a = -1, c = -1, to = -1;
        for (size_t i = 0; i + 1 < n; i++) {
            const merge_slot *m = find_merge(b, w[i], w[i + 1]);
            if (m && m->rank < best) {
                best = m->rank;
                a = w[i];
                c = w[i + 1];
                to = m->to;
            }
        }
        if (a < 0)
            break;
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            if (w[i] == a && i + 1 < n && w[i + 1] == c) {
                w[o++] = to;
                i += 2;
            } else {
                w[o++] = w[i++];
            }
        }
        n = o;
    }
    return n;
}

int bpe_encode(bpe_model *b, const char *text, size_t len, int32_t unk, int32_t **ids, size_t *n,
               size_t *cap)
{
    for (size_t i = 0; i < len;) {
        size_t m = piece(text, len, i);
        if (grow_buf((void **)&b->w, &b->w_cap, m, sizeof *b->w) < 0 ||
            grow_buf((void **)ids, cap, *n + m, sizeof **ids) < 0)
            return -ENOMEM;
        for (size_t j = 0; j < m; j++)
            b->w[j] = b->byte_sym[(uint8_t)text[i + j]];
        size_t k = merge_word(b, b->w, m);
        for (size_t j = 0; j < k; j++) {
            int32_t id = b->syms[b->w[j]].id;
            (*ids)[(*n)++] = id >= 0 ? id : unk;
        }
        i += m;
    }
    return 0;
}
