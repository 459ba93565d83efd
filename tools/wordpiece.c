/* wordpiece.c - Hugging Face BertTokenizer._tokenize in C: BasicTokenizer (clean text, CJK
 * split, NFC, lower-case + NFD accent stripping, punctuation split, never-split words) then
 * greedy longest-match-first WordPiece with "##" continuations. Character classes come from
 * libunistring (Unicode 14, the same tables as Python 3.11's unicodedata). The added-token
 * split and the per-character lower-casing before it are PreTrainedTokenizer.tokenize's, in
 * tools/tokenizer.c. */
#include "wordpiece.h"
#include "growbuf.h"
#include "zerotrain.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicase.h>
#include <unictype.h>
#include <uninorm.h>
#include <unistr.h>

typedef struct entry { uint32_t off, len; int32_t id; } entry;

struct wp_tokenizer {
    char *pool;             /* the vocab file, lines NUL-terminated in place */
    entry *slots;           /* open addressing, id < 0 = empty */
    size_t n_slots;         /* power of two */
    uint32_t *by_id;        /* pool offset of each id's token */
    int vocab;
    uint32_t max_len;       /* longest entry, bytes */
    int lower;
    int strip;              /* strip accents: HF's strip_accents, None resolved */
    int chinese;            /* tokenize_chinese_chars */
    int32_t special[5];
    int32_t unk;            /* the id a word without a split becomes */
    char **never;           /* words the BasicTokenizer keeps whole (NFC'd text) */
    int *never_kind;        /* WP_NEVER_SPLIT or WP_NEVER_SPECIAL */
    int n_never;
    /* scratch, reused across calls */
    uint32_t *cps;          /* a word's code points */
    size_t cps_cap;
    char *b1, *b2, *b3;     /* UTF-8 work buffers: lower-cased, NFD, NFC */
    size_t b1_cap, b2_cap, b3_cap;
    char *key;              /* "##" + piece */
    size_t key_cap;
};

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

int32_t wp_token_id(const wp_tokenizer *t, const char *token, size_t len)
{
    size_t mask = t->n_slots - 1, i;
    if (len > t->max_len)
        return -1;
    for (i = hash(token, len) & mask; t->slots[i].id >= 0; i = (i + 1) & mask)
        if (t->slots[i].len == len && memcmp(t->pool + t->slots[i].off, token, len) == 0)
            return t->slots[i].id;
    return -1;
}

/* inserts or, for a token seen before, moves it to the later id (HF: the last line wins) */
static void insert(wp_tokenizer *t, uint32_t off, uint32_t len, int32_t id)
{
    size_t mask = t->n_slots - 1, i;
    for (i = hash(t->pool + off, len) & mask; t->slots[i].id >= 0; i = (i + 1) & mask)
        if (t->slots[i].len == len && memcmp(t->pool + t->slots[i].off, t->pool + off, len) == 0)
            break;
    t->slots[i] = (entry){off, len, id};
    if (len > t->max_len)
        t->max_len = len;
}

static const char *const bert_names[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

int wp_load_mem(const char *name, const char *bytes, size_t size, const wp_options *opt,
                wp_tokenizer **out, char *err, size_t errlen)
{
    wp_tokenizer *t = calloc(1, sizeof *t);
    size_t n_lines = 0, i, start;
    int rc;

    *out = NULL;
    if (!t || !(t->pool = malloc(size + 1)))
        goto nomem;
    memcpy(t->pool, bytes, size);
    t->pool[size] = '\0';
    t->lower = opt->lower_case;
    t->strip = opt->strip_accents < 0 ? opt->lower_case : opt->strip_accents;
    t->chinese = opt->chinese;
    /* lines: "\n", "\r\n" and "\r" end a line (Python's universal newlines); a last line
     * without a newline counts */
    for (i = 0; i < size; i++)
        if (t->pool[i] == '\n' || (t->pool[i] == '\r' && t->pool[i + 1] != '\n'))
            n_lines++;
    if (size > 0 && t->pool[size - 1] != '\n' && t->pool[size - 1] != '\r')
        n_lines++;
    if (n_lines == 0 || n_lines >= (1u << 31) - 1) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: the vocabulary is empty", name);
        goto fail;
    }
    t->vocab = (int)n_lines;
    for (t->n_slots = 16; t->n_slots < 2 * n_lines; t->n_slots *= 2)
        ;
    if (!(t->slots = malloc(t->n_slots * sizeof *t->slots)) ||
        !(t->by_id = malloc(n_lines * sizeof *t->by_id)))
        goto nomem;
    for (i = 0; i < t->n_slots; i++)
        t->slots[i].id = -1;
    n_lines = 0;
    for (start = i = 0; i <= size; i++) {
        char c = t->pool[i];
        if (c != '\n' && c != '\r' && i < size)
            continue;
        if (i == size && i == start)
            break; /* the file ended with a newline */
        t->pool[i] = '\0';
        insert(t, (uint32_t)start, (uint32_t)(i - start), (int32_t)n_lines);
        t->by_id[n_lines++] = (uint32_t)start;
        if (c == '\r' && i + 1 < size && t->pool[i + 1] == '\n')
            i++;
        start = i + 1;
    }
    for (int k = 0; k < 5; k++)
        t->special[k] = wp_token_id(t, bert_names[k], strlen(bert_names[k]));
    t->unk = t->special[1];
    *out = t;
    return 0;
nomem:
    rc = -ENOMEM;
    snprintf(err, errlen, "%s: out of memory", name);
fail:
    wp_free(t);
    return rc;
}

int wp_load(const char *path, int lower_case, wp_tokenizer **out, char *err, size_t errlen)
{
    const wp_options opt = {lower_case, -1, 1};
    char *bytes = NULL;
    size_t size = 0;
    int rc;
    *out = NULL;
    /* a regular file only (a FIFO would block the open), under 2 GiB: ids are int32 offsets */
    if ((rc = zt_file_read_all(path, (1u << 31) - 1, &bytes, &size)) < 0) {
        snprintf(err, errlen, "%s", zt_last_error());
        return rc;
    }
    rc = wp_load_mem(path, bytes, size, &opt, out, err, errlen);
    free(bytes);
    for (int k = 0; rc == 0 && k < 5; k++)
        if ((*out)->special[k] < 0) {
            rc = -EINVAL;
            snprintf(err, errlen, "%s: the vocabulary has no %s token (BERT needs [PAD] [UNK] "
                     "[CLS] [SEP] [MASK])", path, bert_names[k]);
            wp_free(*out);
            *out = NULL;
        }
    return rc;
}

void wp_set_unk(wp_tokenizer *t, int32_t id) { t->unk = id; }

int wp_set_never_split(wp_tokenizer *t, const char *const *words, const int *kind, int n)
{
    for (int i = 0; i < t->n_never; i++)
        free(t->never[i]);
    free(t->never);
    free(t->never_kind);
    t->never = NULL;
    t->never_kind = NULL;
    t->n_never = 0;
    if (n == 0)
        return 0;
    if (!(t->never = calloc((size_t)n, sizeof *t->never)) ||
        !(t->never_kind = malloc((size_t)n * sizeof *t->never_kind)))
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        if (!(t->never[i] = strdup(words[i])))
            return -ENOMEM;
        t->never_kind[i] = kind[i];
        t->n_never++;
    }
    return 0;
}

void wp_free(wp_tokenizer *t)
{
    if (!t)
        return;
    wp_set_never_split(t, NULL, NULL, 0);
    free(t->pool);
    free(t->slots);
    free(t->by_id);
    free(t->cps);
    free(t->b1);
    free(t->b2);
    free(t->b3);
    free(t->key);
    free(t);
}

int wp_vocab_size(const wp_tokenizer *t) { return t->vocab; }

const char *wp_id_token(const wp_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->vocab ? t->pool + t->by_id[id] : NULL;
}

void wp_special_ids(const wp_tokenizer *t, int32_t ids[5])
{
    memcpy(ids, t->special, sizeof t->special);
}

/* ---- character classes (HF's _is_whitespace, _is_control, _is_punctuation, ...) ------- */

/* Python's str.split() separators that survive cleaning: HF's _is_whitespace chars (already
 * turned into spaces) plus U+2028 and U+2029, which are neither control nor Zs. */
static int is_space(uint32_t c)
{
    if (c < 0x80)
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
    return c == 0x2028 || c == 0x2029 || uc_is_general_category(c, UC_CATEGORY_Zs);
}

/* dropped by _clean_text: NUL, U+FFFD and category C* except \t \n \r */
static int is_dropped(uint32_t c)
{
    if (c < 0x80)
        return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
    return c == 0xfffd || uc_is_general_category(c, UC_CATEGORY_C);
}

static int is_punct(uint32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return 1;
    return c >= 0x80 && uc_is_general_category(c, UC_CATEGORY_P);
}

static int is_cjk(uint32_t c)
{
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) ||
           (c >= 0x20000 && c <= 0x2a6df) || (c >= 0x2a700 && c <= 0x2b73f) ||
           (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b820 && c <= 0x2ceaf) ||
           (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

/* Strict UTF-8 decoding (no overlongs, surrogates or values above U+10FFFF). Returns the
 * length and the code point, or 1 and U+FFFD for an invalid byte. */
static size_t decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t k;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) { k = 1; v = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { k = 2; v = c & 0x0f; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { k = 3; v = c & 0x07; min = 0x10000; }
    else goto bad;
    if (n <= k)
        goto bad;
    for (size_t j = 1; j <= k; j++) {
        if ((s[j] & 0xc0) != 0x80)
            goto bad;
        v = v << 6 | (s[j] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        goto bad;
    *cp = v;
    return k + 1;
bad:
    *cp = 0xfffd;
    return 1;
}

static size_t encode(char *out, uint32_t c)
{
    return (size_t)u8_uctomb((uint8_t *)out, c, 4);
}

/* ---- one word: lower-case, strip accents, split punctuation, then fn per piece -------- */

/* whole: a never-split word (WP_NEVER_SPLIT) that WordPiece must not split either */
typedef int (*piece_fn)(wp_tokenizer *t, const char *s, size_t n, int whole, void *ctx);

/* Python's str.lower() of the word (cps[0..n)) into t->b1: the full lower-case mapping
 * (U+0130 becomes "i" + U+0307) and Final_Sigma as CPython decides it, scanning the word
 * itself for the context. Returns the byte length or -ENOMEM. */
static long lower_word(wp_tokenizer *t, const uint32_t *cps, size_t n)
{
    size_t len = 0;
    if (grow_buf((void **)&t->b1, &t->b1_cap, 4 * n + 4, 1) < 0) /* "İ" grows 2 -> 3 bytes */
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cps[i], l;
        if (c == 0x130) {
            len += encode(t->b1 + len, 'i');
            len += encode(t->b1 + len, 0x307);
            continue;
        }
        if (c == 0x3a3) { /* CPython's handle_capital_sigma */
            size_t j = i;
            int final = 0;
            while (j > 0 && uc_is_property_case_ignorable(cps[j - 1]))
                j--;
            final = j > 0 && uc_is_property_cased(cps[j - 1]);
            if (final) {
                j = i + 1;
                while (j < n && uc_is_property_case_ignorable(cps[j]))
                    j++;
                final = j == n || !uc_is_property_cased(cps[j]);
            }
            l = final ? 0x3c2 : 0x3c3;
        } else {
            l = uc_tolower(c);
        }
        len += encode(t->b1 + len, l);
    }
    return (long)len;
}

static int split_punct(wp_tokenizer *t, const char *s, size_t n, piece_fn fn, void *ctx)
{
    size_t i = 0, start = 0;
    while (i < n) {
        uint32_t c;
        size_t k = decode((const unsigned char *)s + i, n - i, &c);
        if (is_punct(c)) {
            if (i > start && fn(t, s + start, i - start, 0, ctx) < 0)
                return -ENOMEM;
            if (fn(t, s + i, k, 0, ctx) < 0)
                return -ENOMEM;
            start = i + k;
        }
        i += k;
    }
    if (n > start && fn(t, s + start, n - start, 0, ctx) < 0)
        return -ENOMEM;
    return 0;
}

/* NFC of the word into t->b3; *w and *n then name the result */
static int nfc_word(wp_tokenizer *t, const char **w, size_t *n)
{
    size_t len = t->b3_cap;
    uint8_t *r = u8_normalize(UNINORM_NFC, (const uint8_t *)*w, *n, (uint8_t *)t->b3, &len);
    if (!r)
        return -ENOMEM;
    if (r != (uint8_t *)t->b3) { /* did not fit: keep the bigger buffer for next time */
        free(t->b3);
        t->b3 = (char *)r;
        t->b3_cap = len;
    }
    *w = t->b3;
    *n = len;
    return 0;
}

/* NFD, then drop Mn (HF's _run_strip_accents): from w into t->b2 */
static int strip_accents(wp_tokenizer *t, const char **w, size_t *n)
{
    size_t nfd_len = t->b2_cap, o = 0;
    uint8_t *nfd = u8_normalize(UNINORM_NFD, (const uint8_t *)*w, *n, (uint8_t *)t->b2,
                                &nfd_len);
    if (!nfd)
        return -ENOMEM;
    if (nfd != (uint8_t *)t->b2) {
        free(t->b2);
        t->b2 = (char *)nfd;
        t->b2_cap = nfd_len;
    }
    for (size_t i = 0; i < nfd_len;) { /* in place */
        uint32_t c;
        size_t k = decode(nfd + i, nfd_len - i, &c);
        if (!uc_is_general_category(c, UC_CATEGORY_Mn)) {
            memmove(t->b2 + o, nfd + i, k);
            o += k;
        }
        i += k;
    }
    *w = t->b2;
    *n = o;
    return 0;
}

/* One whitespace-separated word of the cleaned text (or one CJK character), as the
 * BasicTokenizer's loop takes it: NFC (applied to the whole text in HF: no composition spans
 * a separator), a never-split word kept whole, else lower-case, strip accents, and split at
 * punctuation. */
static int do_word(wp_tokenizer *t, const char *w, size_t n, int ascii, piece_fn fn, void *ctx)
{
    if (!ascii && nfc_word(t, &w, &n) < 0)
        return -ENOMEM;
    for (int k = 0; k < t->n_never; k++)
        if (strlen(t->never[k]) == n && memcmp(t->never[k], w, n) == 0)
            return fn(t, w, n, t->never_kind[k] == WP_NEVER_SPLIT, ctx);
    if (t->lower) {
        if (ascii) {
            if (grow_buf((void **)&t->b1, &t->b1_cap, n, 1) < 0)
                return -ENOMEM;
            for (size_t i = 0; i < n; i++)
                t->b1[i] = (char)(w[i] >= 'A' && w[i] <= 'Z' ? w[i] + 32 : w[i]);
            w = t->b1;
        } else {
            size_t m = 0;
            long len;
            if (grow_buf((void **)&t->cps, &t->cps_cap, n, sizeof *t->cps) < 0)
                return -ENOMEM;
            for (size_t i = 0; i < n;)
                i += decode((const unsigned char *)w + i, n - i, &t->cps[m++]);
            if ((len = lower_word(t, t->cps, m)) < 0)
                return -ENOMEM;
            w = t->b1;
            n = (size_t)len;
        }
    }
    if (t->strip && !ascii && strip_accents(t, &w, &n) < 0)
        return -ENOMEM;
    return split_punct(t, w, n, fn, ctx);
}

/* The BasicTokenizer over text: calls do_word for each word. */
static int basic(wp_tokenizer *t, const char *text, size_t len, piece_fn fn, void *ctx)
{
    const unsigned char *s = (const unsigned char *)text;
    char *word = NULL;
    size_t cap = 0, n = 0, i = 0;
    int ascii = 1, rc = 0;
    while (i < len && rc == 0) {
        uint32_t c;
        size_t k = s[i] < 0x80 ? (c = s[i], 1) : decode(s + i, len - i, &c);
        i += k;
        if (is_dropped(c))
            continue;
        if (is_space(c) || (t->chinese && is_cjk(c))) {
            if (n)
                rc = do_word(t, word, n, ascii, fn, ctx);
            n = 0;
            ascii = 1;
            if (rc == 0 && !is_space(c)) {
                char one[4];
                rc = do_word(t, one, encode(one, c), 0, fn, ctx);
            }
            continue;
        }
        if (n + 4 > cap && grow_buf((void **)&word, &cap, n + 4, 1) < 0) {
            rc = -ENOMEM;
            break;
        }
        memcpy(word + n, s + i - k, k);
        n += k;
        ascii &= c < 0x80;
    }
    if (rc == 0 && n)
        rc = do_word(t, word, n, ascii, fn, ctx);
    free(word);
    return rc;
}

/* ---- WordPiece ------------------------------------------------------------------------ */

typedef struct id_out { int32_t **ids; size_t *n, *cap; } id_out;

static int push(id_out *o, int32_t id)
{
    if (*o->n == *o->cap && grow_buf((void **)o->ids, o->cap, *o->n + 1, sizeof **o->ids) < 0)
        return -ENOMEM;
    (*o->ids)[(*o->n)++] = id;
    return 0;
}

/* Greedy longest-match-first over code points; [UNK] for the whole piece when some rest
 * has no match or the piece has more than WP_MAX_WORD_CHARS characters. */
static int wordpiece(wp_tokenizer *t, const char *s, size_t n, int whole, void *ctx)
{
    id_out *o = ctx;
    size_t off[WP_MAX_WORD_CHARS + 1], nc = 0, first = *o->n;
    if (whole) {
        int32_t id = wp_token_id(t, s, n);
        return push(o, id >= 0 ? id : t->unk);
    }
    for (size_t i = 0; i < n; nc++) {
        uint32_t c;
        if (nc == WP_MAX_WORD_CHARS)
            return push(o, t->unk);
        off[nc] = i;
        i += decode((const unsigned char *)s + i, n - i, &c);
    }
    off[nc] = n;
    if (grow_buf((void **)&t->key, &t->key_cap, n + 2, 1) < 0)
        return -ENOMEM;
    t->key[0] = t->key[1] = '#';
    for (size_t start = 0; start < nc;) {
        int32_t id = -1;
        size_t end = nc;
        for (; end > start; end--) {
            size_t len = off[end] - off[start];
            if (start == 0) {
                id = wp_token_id(t, s, len);
            } else {
                memcpy(t->key + 2, s + off[start], len);
                id = wp_token_id(t, t->key, len + 2);
            }
            if (id >= 0)
                break;
        }
        if (id < 0) {
            *o->n = first; /* HF: the whole word becomes [UNK] */
            return push(o, t->unk);
        }
        if (push(o, id) < 0)
            return -ENOMEM;
        start = end;
    }
    return 0;
}

int wp_encode(wp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
              size_t *cap)
{
    id_out o = {ids, n, cap};
    return basic(t, text, len, wordpiece, &o);
}

typedef struct user_cb { void (*fn)(void *, const char *, size_t); void *user; } user_cb;

static int call_user(wp_tokenizer *t, const char *s, size_t n, int whole, void *ctx)
{
    user_cb *u = ctx;
    (void)t;
    (void)whole;
    u->fn(u->user, s, n);
    return 0;
}

int wp_basic_tokenize(wp_tokenizer *t, const char *text, size_t len,
                      void (*fn)(void *user, const char *word, size_t n), void *user)
{
    user_cb u = {fn, user};
    return basic(t, text, len, call_user, &u);
}
