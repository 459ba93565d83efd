/* tokenizer.c - Hugging Face's slow tokenizers (BertTokenizer, T5Tokenizer, DebertaV2Tokenizer,
 * RobertaTokenizer, AlbertTokenizer) over wordpiece.c, spm.cc and bpe.c: tokenizer_config.json in and out, PreTrainedTokenizer.tokenize
 * (per-character lower-casing that spares the special tokens, the added-token split with its
 * lstrip/rstrip/single_word rules), framing, longest_first truncation, decoding. The
 * algorithms are transcribed from transformers 4.4x (tokenization_utils.py,
 * tokenization_utils_base.py, models/{bert,t5,deberta_v2,albert}/tokenization_*.py); see tokenizer.h
 * for what is left out. */
#include "tokenizer.h"
#include "bpe.h"
#include "growbuf.h"
#include "spm.h"
#include "wordpiece.h"

#include <cjson/cJSON.h>
#include <unicase.h>
#include <unictype.h>
#include <unistr.h>
#include <uninorm.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { C_BERT, C_DEBERTA, C_T5, C_ROBERTA, C_ALBERT, N_CLASSES };
/* special-token roles, in HF's SPECIAL_TOKENS_ATTRIBUTES order (bos, eos, unk, sep, pad,
 * cls, mask; additional_special_tokens after them) */
enum { R_BOS, R_EOS, R_UNK, R_SEP, R_PAD, R_CLS, R_MASK, N_ROLES };
static const char *const role_key[N_ROLES] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};
#define VERY_LARGE_INTEGER "1000000000000000019884624838656" /* int(1e30), HF's "none" */

typedef struct added {
    char *content;
    int32_t id;
    unsigned char lstrip, rstrip, single_word, normalized, special;
} added;

struct tok_tokenizer {
    int cls;                 /* C_* */
    char hf_class[64];       /* as the folder names it (DistilBertTokenizer is C_BERT) */
    char *model;             /* the vocabulary file's bytes */
    size_t model_len;
    wp_tokenizer *wp;
    spm_model *sp;
    bpe_model *bpe;          /* RoBERTa: vocab.json (model) and merges.txt (merges) */
    char *merges;
    size_t merges_len;
    int prefix_space;        /* RoBERTa's add_prefix_space */
    int remove_space, keep_accents; /* AlbertTokenizer's */
    int vocab;
    int lower;               /* do_lower_case (BERT, DebertaV2) */
    int strip_accents;       /* -1: None */
    int chinese;             /* tokenize_chinese_chars */
    int sp_lower;            /* the SentencePiece normaliser folds case */
    int extra_ids;           /* T5 */
    long max_len;            /* model_max_length, 0: none */
    int clean_up;            /* clean_up_tokenization_spaces */
    char *role[N_ROLES];     /* NULL: no such token */
    int32_t role_id[N_ROLES];
    char **additional;       /* additional_special_tokens */
    int n_additional;
    added *add;              /* the added tokens (HF's _added_tokens_decoder), by id */
    int n_add;
    char **all_special;      /* all_special_tokens, in HF's order, each once */
    int n_all_special;
    char **never;            /* BertTokenizer's never_split */
    int n_never;
    cJSON *config;           /* the folder's tokenizer_config.json (its other keys are kept) */
    int wp_mode;             /* never-split words set in wp: -1 none yet, 0 with, 1 without specials */
    unsigned char first[256];/* first bytes of the added tokens */
    char *buf;               /* the lower-cased text */
    size_t buf_cap;
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

static int push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap && grow_buf((void **)ids, cap, *n + 1, sizeof **ids) < 0)
        return -ENOMEM;
    (*ids)[(*n)++] = id;
    return 0;
}

/* Strict UTF-8 (as wordpiece.c): the length and code point, 1 and U+FFFD for a bad byte */
static size_t utf8_next(const char *s, size_t n, uint32_t *cp)
{
    ucs4_t c;
    int k = u8_mbtouc(&c, (const uint8_t *)s, n);
    if (k < 1) {
        *cp = 0xfffd;
        return 1;
    }
    *cp = c;
    return (size_t)k;
}

/* Python's str.isspace() */
static int py_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* str.lstrip() / str.rstrip() on [*s, *s + *n) */
static void py_lstrip(const char **s, size_t *n)
{
    while (*n) {
        uint32_t c;
        size_t k = utf8_next(*s, *n, &c);
        if (!py_space(c))
            break;
        *s += k;
        *n -= k;
    }
}

static void py_rstrip(const char *s, size_t *n)
{
    while (*n) {
        size_t k = 1;
        uint32_t c;
        while (k < *n && k < 4 && ((unsigned char)s[*n - k] & 0xc0) == 0x80)
            k++;
        if (utf8_next(s + *n - k, k, &c) != k || !py_space(c))
            break;
        *n -= k;
    }
}

/* ---- construction ------------------------------------------------------------------------ */

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? strdup(s) : NULL;
}

static tok_tokenizer *tok_new(int cls)
{
    static const char *const bert_roles[N_ROLES] = {NULL, NULL, "[UNK]", "[SEP]", "[PAD]",
                                                    "[CLS]", "[MASK]"};
    static const char *const deberta_roles[N_ROLES] = {"[CLS]", "[SEP]", "[UNK]", "[SEP]",
                                                       "[PAD]", "[CLS]", "[MASK]"};
    static const char *const t5_roles[N_ROLES] = {NULL, "</s>", "<unk>", NULL, "<pad>", NULL,
                                                  NULL};
    static const char *const roberta_roles[N_ROLES] = {"<s>", "</s>", "<unk>", "</s>", "<pad>",
                                                       "<s>", "<mask>"};
    static const char *const albert_roles[N_ROLES] = {"[CLS]", "[SEP]", "<unk>", "[SEP]",
                                                      "<pad>", "[CLS]", "[MASK]"};
    static const char *const names[N_CLASSES] = {"BertTokenizer", "DebertaV2Tokenizer",
                                                 "T5Tokenizer", "RobertaTokenizer",
                                                 "AlbertTokenizer"}; /* C_* */
    tok_tokenizer *t = calloc(1, sizeof *t);
    const char *const *roles = cls == C_BERT ? bert_roles : cls == C_T5 ? t5_roles
                               : cls == C_ROBERTA ? roberta_roles
                               : cls == C_ALBERT ? albert_roles : deberta_roles;
    if (!t)
        return NULL;
    t->cls = cls;
    snprintf(t->hf_class, sizeof t->hf_class, "%s", names[cls]);
    t->lower = cls == C_BERT || cls == C_ALBERT;
    t->remove_space = 1;
    t->strip_accents = -1;
    t->chinese = 1;
    t->extra_ids = cls == C_T5 ? 100 : 0;
    /* clean_up_tokenization_spaces: transformers 4.45 made False the default, which
     * RobertaTokenizer takes; the others are read as the 4.4x releases wrote them */
    t->clean_up = cls != C_ROBERTA;
    t->wp_mode = -1;
    for (int r = 0; r < N_ROLES; r++) {
        set_str(&t->role[r], roles[r]);
        t->role_id[r] = -1;
    }
    return t;
}

static void free_strs(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void tok_free(tok_tokenizer *t)
{
    if (!t)
        return;
    wp_free(t->wp);
    spm_free(t->sp);
    bpe_free(t->bpe);
    free(t->merges);
    free(t->model);
    for (int r = 0; r < N_ROLES; r++)
        free(t->role[r]);
    free_strs(t->additional, t->n_additional);
    for (int i = 0; i < t->n_add; i++)
        free(t->add[i].content);
    free(t->add);
    free(t->all_special);    /* borrowed strings */
    free_strs(t->never, t->n_never);
    cJSON_Delete(t->config);
    free(t->buf);
    free(t);
}

static int strs_push(char ***v, int *n, const char *s)
{
    char **g = realloc(*v, sizeof **v * (size_t)(*n + 1));
    if (!g)
        return -ENOMEM;
    *v = g;
    if (!(g[*n] = strdup(s)))
        return -ENOMEM;
    ++*n;
    return 0;
}

static int vocab_id(const tok_tokenizer *t, const char *s)
{
    return t->wp ? wp_token_id(t->wp, s, strlen(s))
           : t->bpe ? bpe_token_id(t->bpe, s, strlen(s)) : spm_piece_id(t->sp, s);
}

static added *find_added_id(const tok_tokenizer *t, int32_t id)
{
    for (int i = 0; i < t->n_add; i++)
        if (t->add[i].id == id)
            return &t->add[i];
    return NULL;
}

static added *find_added(const tok_tokenizer *t, const char *s, size_t n)
{
    for (int i = 0; i < t->n_add; i++)
        if (strlen(t->add[i].content) == n && memcmp(t->add[i].content, s, n) == 0)
            return &t->add[i];
    return NULL;
}

/* adds (or, for an id already there, replaces) an added token, keeping them sorted by id */
static int add_token(tok_tokenizer *t, const char *content, int32_t id, int lstrip, int rstrip,
                     int single_word, int normalized, int special)
{
    added *a = find_added_id(t, id), *g;
    int i;
    if (!a) {
        if (!(g = realloc(t->add, sizeof *g * (size_t)(t->n_add + 1))))
            return -ENOMEM;
        t->add = g;
        for (i = t->n_add; i > 0 && t->add[i - 1].id > id; i--)
            t->add[i] = t->add[i - 1];
        a = &t->add[i];
        a->content = NULL;
        t->n_add++;
    }
    set_str(&a->content, content);
    if (!a->content)
        return -ENOMEM;
    a->id = id;
    a->lstrip = (unsigned char)lstrip;
    a->rstrip = (unsigned char)rstrip;
    a->single_word = (unsigned char)single_word;
    a->normalized = (unsigned char)normalized;
    a->special = (unsigned char)special;
    return 0;
}

int tok_size(const tok_tokenizer *t)
{
    int n = t->vocab;
    for (int i = 0; i < t->n_add; i++)
        if (t->add[i].id >= n)
            n = t->add[i].id + 1;
    return n;
}

static int is_all_special(const tok_tokenizer *t, const char *s, size_t n)
{
    for (int i = 0; i < t->n_all_special; i++)
        if (strlen(t->all_special[i]) == n && memcmp(t->all_special[i], s, n) == 0)
            return 1;
    return 0;
}

static int is_additional(const tok_tokenizer *t, const char *s)
{
    for (int i = 0; i < t->n_additional; i++)
        if (!strcmp(t->additional[i], s))
            return 1;
    return 0;
}

/* The vocabulary model from the file's bytes (the tokenizer keeps them, for tok_save). */
static int set_model(tok_tokenizer *t, const char *name, const void *bytes, size_t len,
                     char *err, size_t errlen)
{
    char msg[512];
    if (!(t->model = malloc(len ? len : 1)))
        return fail(err, errlen, "%s: out of memory", name);
    memcpy(t->model, bytes, len);
    t->model_len = len;
    if (t->cls == C_ROBERTA) { /* (merges.txt was set beside it) */
        if (bpe_load(name, bytes, len, t->merges, t->merges_len, &t->bpe, err, errlen) < 0)
            return -1;
        t->vocab = bpe_vocab_size(t->bpe);
        return 0;
    }
    if (t->cls == C_BERT) {
        const wp_options opt = {t->lower, t->strip_accents, t->chinese};
        if (wp_load_mem(name, bytes, len, &opt, &t->wp, err, errlen) < 0)
            return -1;
        t->vocab = wp_vocab_size(t->wp);
        return 0;
    }
    if (spm_load(bytes, len, &t->sp, msg, sizeof msg) < 0)
        return fail(err, errlen, "%s: %s", name, msg);
    t->vocab = spm_piece_count(t->sp);
    /* the normaliser folds case: the model's own pieces written in upper case encode as
     * they do in lower case (pieces, so that every character is known to the model) */
    {
        int tried = 0, same = 1;
        for (int32_t id = 0; id < t->vocab && tried < 20 && same; id++) {
            const char *piece = spm_piece(t->sp, id);
            char lo[64], up[64];
            size_t n = 0;
            int letters = 0, ascii = 1;
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, ca = 0, nb = 0, cb = 0;
            if (spm_piece_kind(t->sp, id) != SPM_NORMAL)
                continue;
            if (!strncmp(piece, "\xe2\x96\x81", 3))
                piece += 3;
            for (const char *c = piece; *c && n < sizeof lo - 1; c++, n++) {
                ascii &= (unsigned char)*c < 0x80;
                letters += *c >= 'a' && *c <= 'z';
                lo[n] = *c;
                up[n] = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
            }
            if (!ascii || !letters || piece[n])
                continue;
            lo[n] = up[n] = '\0';
            tried++;
            if (spm_encode(t->sp, lo, n, &a, &na, &ca, msg, sizeof msg) < 0 ||
                spm_encode(t->sp, up, n, &b, &nb, &cb, msg, sizeof msg) < 0 || na != nb ||
                memcmp(a, b, na * sizeof *a) != 0)
                same = 0;
            free(a);
            free(b);
        }
        t->sp_lower = tried > 0 && same;
    }
    return 0;
}

/* After the options and special tokens are known: HF's __init__ from there on. The added
 * tokens (those the folder listed, T5's extra ids) get every special token not among them,
 * at its vocabulary id; the special ids are resolved and checked. */
static int finish(tok_tokenizer *t, const char *name, char *err, size_t errlen)
{
    static const int bert_needs[] = {R_UNK, R_SEP, R_PAD, R_CLS, R_MASK};
    static const int t5_needs[] = {R_EOS, R_UNK, R_PAD};
    const char *file = t->cls == C_BERT ? "vocab.txt" : t->cls == C_ROBERTA ? "vocab.json"
                                                      : "the SentencePiece model";
    const char **all = NULL;
    int n_all = 0, rc;

    if (t->cls == C_T5 && t->n_additional == 0) /* T5Tokenizer: the extra ids */
        for (int i = 0; i < t->extra_ids; i++) {
            char s[32];
            snprintf(s, sizeof s, "<extra_id_%d>", i);
            if (strs_push(&t->additional, &t->n_additional, s) < 0)
                return fail(err, errlen, "out of memory");
        }
    if (t->cls == C_T5) { /* the extra ids count down from the top: <extra_id_0> is
                           * len(sp) + extra_ids - 1 (where the folder did not place them) */
        int n_extra = 0;
        for (int i = 0; i < t->n_additional; i++)
            n_extra += strstr(t->additional[i], "<extra_id_") != NULL;
        for (int i = 0; i < n_extra; i++) {
            char s[32];
            snprintf(s, sizeof s, "<extra_id_%d>", i);
            if (!find_added(t, s, strlen(s)) &&
                add_token(t, s, t->vocab - 1 + t->extra_ids - i, 1, 1, 0, 0, 1) < 0)
                return fail(err, errlen, "out of memory");
        }
    }
    /* all_special_tokens: the roles, then additional_special_tokens, each once */
    if (!(all = calloc(N_ROLES + (size_t)t->n_additional + 1, sizeof *all)))
        return fail(err, errlen, "out of memory");
    for (int r = 0; r < N_ROLES + t->n_additional; r++) {
        const char *s = r < N_ROLES ? t->role[r] : t->additional[r - N_ROLES];
        int dup = 0;
        for (int j = 0; s && j < n_all; j++)
            dup |= strcmp(all[j], s) == 0;
        if (s && s[0] && !dup)
            all[n_all++] = s;
    }
    t->all_special = (char **)all;
    t->n_all_special = n_all;
    for (int i = 0; i < n_all; i++) {
        int32_t id;
        if (find_added(t, all[i], strlen(all[i])))
            continue;
        if ((id = vocab_id(t, all[i])) < 0)
            id = tok_size(t); /* HF appends it after the vocabulary */
        /* DebertaV2Tokenizer makes its unk token AddedToken(normalized=True); RobertaTokenizer
         * its mask AddedToken(lstrip=True, normalized=False) and the others AddedToken(s) */
        int is_mask = t->role[R_MASK] && !strcmp(all[i], t->role[R_MASK]);
        int normalized = t->cls == C_DEBERTA ? t->role[R_UNK] && !strcmp(all[i], t->role[R_UNK])
                         : t->cls == C_ROBERTA ? !is_mask : 0;
        if ((rc = add_token(t, all[i], id, (t->cls == C_ROBERTA || t->cls == C_ALBERT) && is_mask,
                            0, 0, normalized, 1)) < 0)
            return fail(err, errlen, "out of memory");
    }
    for (int r = 0; r < N_ROLES; r++) {
        const added *a = t->role[r] ? find_added(t, t->role[r], strlen(t->role[r])) : NULL;
        t->role_id[r] = a ? a->id : -1;
    }
    {
        const int *needs = t->cls == C_T5 ? t5_needs : bert_needs;
        int n_needs = t->cls == C_T5 ? 3 : 5;
        for (int k = 0; k < n_needs; k++) {
            int r = needs[k];
            if (!t->role[r])
                return fail(err, errlen, "%s: %s has no %s (%s needs %s)", name, t->hf_class,
                            role_key[r], t->hf_class,
                            t->cls == C_T5 ? "eos, unk and pad tokens"
                                           : "unk, sep, pad, cls and mask tokens");
            if (t->role_id[r] < 0 || t->role_id[r] >= t->vocab)
                return fail(err, errlen, "%s: %s has no %s %s (the %s of %s)", name, file,
                            t->cls == C_BERT || t->cls == C_ROBERTA ? "token" : "piece",
                            t->role[r], role_key[r], t->hf_class);
        }
    }
    if (t->wp)
        wp_set_unk(t->wp, t->role_id[R_UNK]);
    memset(t->first, 0, sizeof t->first);
    for (int i = 0; i < t->n_add; i++)
        t->first[(unsigned char)t->add[i].content[0]] = 1;
    return 0;
}

/* ---- tokenizer_config.json --------------------------------------------------------------- */

/* a special token's value: "s", {"content": "s", ...} or null */
static int token_value(const cJSON *v, const char **out)
{
    if (cJSON_IsNull(v)) {
        *out = NULL;
        return 0;
    }
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return 0;
    }
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) {
            *out = c->valuestring;
            return 0;
        }
    }
    return -1;
}

static int json_bool(const cJSON *o, const char *key, int *out, const char *path, char *err,
                     size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return fail(err, errlen, "%s: \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int read_json(const char *path, cJSON **out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    const char *end = NULL;
    int rc = zt_file_read_all(path, 64u << 20, &text, &len);
    *out = NULL;
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return fail(err, errlen, "%s", zt_last_error());
    *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*out || !cJSON_IsObject(*out)) {
        long at = *out || !end ? -1 : (long)(end - text);
        cJSON_Delete(*out);
        *out = NULL;
        free(text);
        if (at >= 0)
            return fail(err, errlen, "%s: not JSON (a syntax error at byte %ld)", path, at);
        return fail(err, errlen, "%s: not a JSON object", path);
    }
    free(text);
    return 1;
}

/* tokenizer_config.json's options (cfg may be NULL: the class's defaults) */
static int apply_options(tok_tokenizer *t, const cJSON *cfg, const char *dir, char *err,
                         size_t errlen)
{
    char path[PATH_MAX];
    const cJSON *v;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!cfg)
        return 0;
    if (json_bool(cfg, "do_lower_case", &t->lower, path, err, errlen) < 0 ||
        json_bool(cfg, "tokenize_chinese_chars", &t->chinese, path, err, errlen) < 0 ||
        json_bool(cfg, "clean_up_tokenization_spaces", &t->clean_up, path, err, errlen) < 0)
        return -1;
    v = cJSON_GetObjectItemCaseSensitive(cfg, "strip_accents");
    if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
        return fail(err, errlen, "%s: \"strip_accents\" must be true, false or null", path);
    t->strip_accents = !v || cJSON_IsNull(v) ? -1 : cJSON_IsTrue(v);
    v = cJSON_GetObjectItemCaseSensitive(cfg, "do_basic_tokenize");
    if (t->cls == C_BERT && cJSON_IsFalse(v))
        return fail(err, errlen, "%s: do_basic_tokenize false is not supported (zerotrain "
                    "runs BERT's BasicTokenizer before WordPiece)", path);
    v = cJSON_GetObjectItemCaseSensitive(cfg, "split_by_punct");
    if (t->cls == C_DEBERTA && cJSON_IsTrue(v))
        return fail(err, errlen, "%s: split_by_punct true is not supported", path);
    if (t->cls == C_ROBERTA &&
        json_bool(cfg, "add_prefix_space", &t->prefix_space, path, err, errlen) < 0)
        return -1;
    if (t->cls == C_ALBERT &&
        (json_bool(cfg, "remove_space", &t->remove_space, path, err, errlen) < 0 ||
         json_bool(cfg, "keep_accents", &t->keep_accents, path, err, errlen) < 0))
        return -1;
    v = cJSON_GetObjectItemCaseSensitive(cfg, "errors");
    if (t->cls == C_ROBERTA && v && !(cJSON_IsString(v) && !strcmp(v->valuestring, "replace")))
        return fail(err, errlen, "%s: errors %s%s%s is not supported (zerotrain decodes bytes "
                    "that are not UTF-8 as RobertaTokenizer's default, \"replace\")", path,
                    cJSON_IsString(v) ? "\"" : "", cJSON_IsString(v) ? v->valuestring : "(not a string)",
                    cJSON_IsString(v) ? "\"" : "");
    v = cJSON_GetObjectItemCaseSensitive(cfg, "legacy");
    if (t->cls == C_T5 && cJSON_IsFalse(v))
        return fail(err, errlen, "%s: legacy false is not supported (zerotrain encodes as "
                    "T5Tokenizer's default, legacy true)", path);
    v = cJSON_GetObjectItemCaseSensitive(cfg, "never_split");
    if (cJSON_IsArray(v)) {
        const cJSON *w;
        cJSON_ArrayForEach(w, v) {
            if (!cJSON_IsString(w))
                return fail(err, errlen, "%s: never_split must be a list of strings", path);
            if (strs_push(&t->never, &t->n_never, w->valuestring) < 0)
                return fail(err, errlen, "out of memory");
        }
    } else if (v && !cJSON_IsNull(v)) {
        return fail(err, errlen, "%s: never_split must be a list of strings or null", path);
    }
    v = cJSON_GetObjectItemCaseSensitive(cfg, "extra_ids");
    if (v && (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 ||
              v->valuedouble != (int)v->valuedouble))
        return fail(err, errlen, "%s: extra_ids must be a count", path);
    if (v)
        t->extra_ids = (int)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(cfg, "model_max_length");
    if (v && !cJSON_IsNumber(v))
        return fail(err, errlen, "%s: model_max_length must be a number", path);
    if (v && v->valuedouble >= 1 && v->valuedouble < 1e15)
        t->max_len = (long)v->valuedouble;
    return 0;
}

/* The special and added tokens of tokenizer_config.json (cfg) and, as from_pretrained reads
 * them for a folder without added_tokens_decoder, of special_tokens_map.json (stm) and
 * added_tokens.json (atj); after the vocabulary is loaded (T5's extra ids sit above it). */
static int apply_tokens(tok_tokenizer *t, const cJSON *cfg, const cJSON *stm, const cJSON *atj,
                        const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    const cJSON *v, *adt = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder")
                               : NULL;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    /* the special tokens: tokenizer_config.json's, then (an older save, without
     * added_tokens_decoder) special_tokens_map.json's over them */
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *src = pass == 0 ? cfg : adt ? NULL : stm;
        const char *which = pass == 0 ? "tokenizer_config.json" : "special_tokens_map.json";
        if (!src)
            continue;
        for (int r = 0; r < N_ROLES; r++) {
            const char *s;
            if (!(v = cJSON_GetObjectItemCaseSensitive(src, role_key[r])))
                continue;
            if (token_value(v, &s) < 0)
                return fail(err, errlen, "%s/%s: %s must be a string, an AddedToken object or "
                            "null", dir, which, role_key[r]);
            set_str(&t->role[r], s);
        }
        if ((v = cJSON_GetObjectItemCaseSensitive(src, "additional_special_tokens")) &&
            !cJSON_IsNull(v)) {
            const cJSON *w;
            if (!cJSON_IsArray(v))
                return fail(err, errlen, "%s/%s: additional_special_tokens must be a list", dir,
                            which);
            free_strs(t->additional, t->n_additional);
            t->additional = NULL;
            t->n_additional = 0;
            cJSON_ArrayForEach(w, v) {
                const char *s;
                if (token_value(w, &s) < 0 || !s)
                    return fail(err, errlen, "%s/%s: additional_special_tokens must hold "
                                "strings or AddedToken objects", dir, which);
                if (strs_push(&t->additional, &t->n_additional, s) < 0)
                    return fail(err, errlen, "out of memory");
            }
        }
    }
    if (t->cls == C_T5) {
        /* T5Tokenizer: additional_special_tokens must hold the extra ids, or get them */
        int n_extra = 0;
        for (int i = 0; i < t->n_additional; i++)
            n_extra += strstr(t->additional[i], "<extra_id_") != NULL;
        if (t->n_additional && n_extra == 0) {
            for (int i = 0; i < t->extra_ids; i++) {
                char s[32];
                snprintf(s, sizeof s, "<extra_id_%d>", i);
                if (strs_push(&t->additional, &t->n_additional, s) < 0)
                    return fail(err, errlen, "out of memory");
            }
            n_extra = t->extra_ids;
        } else if (t->n_additional && t->extra_ids > 0 && n_extra != t->extra_ids) {
            return fail(err, errlen, "%s: extra_ids %d and %d <extra_id_*> tokens in "
                        "additional_special_tokens (T5Tokenizer refuses them too)", path,
                        t->extra_ids, n_extra);
        }
    }
    if (adt) {
        const cJSON *e;
        if (!cJSON_IsObject(adt))
            return fail(err, errlen, "%s: added_tokens_decoder must be an object", path);
        cJSON_ArrayForEach(e, adt) {
            char *end;
            long id = strtol(e->string, &end, 10);
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
            int f[5] = {0, 0, 0, -1, 0};
            static const char *const fk[5] = {"lstrip", "rstrip", "single_word", "normalized",
                                              "special"};
            if (*end || end == e->string || id < 0 || id > INT32_MAX || !cJSON_IsString(c) ||
                !c->valuestring[0])
                return fail(err, errlen, "%s: added_tokens_decoder[\"%s\"] must map an id to "
                            "an AddedToken with a content", path, e->string);
            for (int k = 0; k < 5; k++) {
                const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, fk[k]);
                if (b && !cJSON_IsBool(b))
                    return fail(err, errlen, "%s: added_tokens_decoder[\"%s\"].%s must be true "
                                "or false", path, e->string, fk[k]);
                if (b)
                    f[k] = cJSON_IsTrue(b);
            }
            if (f[3] < 0)
                f[3] = !f[4]; /* AddedToken: normalized defaults to not special */
            if (add_token(t, c->valuestring, (int32_t)id, f[0], f[1], f[2], f[3], f[4]) < 0)
                return fail(err, errlen, "out of memory");
        }
    } else if (atj) { /* added_tokens.json: {"token": id}, special if a special token's */
        const cJSON *e;
        cJSON_ArrayForEach(e, atj) {
            int special = 0;
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX)
                return fail(err, errlen, "%s/added_tokens.json: \"%s\" must map to an id", dir,
                            e->string);
            for (int r = 0; r < N_ROLES; r++)
                special |= t->role[r] && !strcmp(t->role[r], e->string);
            for (int i = 0; i < t->n_additional; i++)
                special |= !strcmp(t->additional[i], e->string);
            if (add_token(t, e->string, (int32_t)e->valuedouble, 0, 0, 0, !special, special) < 0)
                return fail(err, errlen, "out of memory");
        }
    }
    return 0;
}

/* The SentencePiece specials by piece (or the model's own pad/unk/bos/eos ids), for a model
 * given as spm:MODEL or trained: the role strings are the pieces' spellings. */
static int spm_roles(tok_tokenizer *t, int family, const char *name, char *err, size_t errlen)
{
    static const char *const alt[N_ROLES][2] = {
        {NULL, NULL},         {"</s>", "[EOS]"},   {"[UNK]", "<unk>"}, {"[SEP]", "<sep>"},
        {"[PAD]", "<pad>"},   {"[CLS]", "<cls>"},  {"[MASK]", "<mask>"}};
    static const int meta[N_ROLES] = {-1, SPM_EOS, SPM_UNK, SPM_EOS, SPM_PAD, SPM_BOS, -1};
    int32_t id[N_ROLES];
    int bert_ok = 1, t5_ok = 1;
    for (int r = 0; r < N_ROLES; r++) {
        id[r] = -1;
        for (int k = 0; k < 2 && id[r] < 0 && alt[r][k]; k++)
            id[r] = spm_piece_id(t->sp, alt[r][k]);
        if (id[r] < 0 && meta[r] >= 0)
            id[r] = spm_meta_id(t->sp, meta[r]);
    }
    /* a BERT vocabulary's separator is [SEP], not an end-of-sequence piece */
    if (spm_piece_id(t->sp, "[SEP]") >= 0 || spm_piece_id(t->sp, "<sep>") >= 0)
        id[R_SEP] = spm_piece_id(t->sp, spm_piece_id(t->sp, "[SEP]") >= 0 ? "[SEP]" : "<sep>");
    for (int r = R_UNK; r < N_ROLES; r++)
        bert_ok &= id[r] >= 0;
    t5_ok = id[R_EOS] >= 0 && id[R_UNK] >= 0 && id[R_PAD] >= 0;
    if (family == TOK_ANY)
        family = bert_ok ? TOK_BERT : t5_ok ? TOK_T5 : TOK_BERT;
    if (family == TOK_BERT && !bert_ok) {
        for (int r = R_UNK; r < N_ROLES; r++)
            if (id[r] < 0)
                return fail(err, errlen, "%s: the SentencePiece model has no %s (looked for the "
                            "pieces %s and %s%s%s); a T5 model needs </s>, <unk> and <pad> "
                            "instead", name, alt[r][0], alt[r][0], alt[r][1],
                            meta[r] >= 0 ? " and the model's " : "",
                            meta[r] == SPM_PAD ? "pad id" : meta[r] == SPM_UNK ? "unk id"
                            : meta[r] >= 0 ? "bos/eos id" : "");
    }
    if (family == TOK_T5 && !t5_ok) {
        static const int need[3] = {R_EOS, R_UNK, R_PAD};
        static const char *const nm[3] = {"</s>", "<unk>", "<pad>"};
        for (int k = 0; k < 3; k++)
            if (id[need[k]] < 0)
                return fail(err, errlen, "%s: the SentencePiece model has no %s (T5's %s; "
                            "looked for the piece and the model's own %s id)", name, nm[k],
                            role_key[need[k]], k == 0 ? "eos" : k == 1 ? "unk" : "pad");
    }
    for (int r = 0; r < N_ROLES; r++)
        set_str(&t->role[r], NULL);
    if (family == TOK_BERT) {
        t->cls = C_DEBERTA;
        snprintf(t->hf_class, sizeof t->hf_class, "DebertaV2Tokenizer");
        for (int r = R_UNK; r < N_ROLES; r++)
            set_str(&t->role[r], spm_piece(t->sp, id[r]));
        set_str(&t->role[R_BOS], t->role[R_CLS]);
        set_str(&t->role[R_EOS], t->role[R_SEP]);
    } else {
        t->cls = C_T5;
        t->extra_ids = 100;
        snprintf(t->hf_class, sizeof t->hf_class, "T5Tokenizer");
        set_str(&t->role[R_EOS], spm_piece(t->sp, id[R_EOS]));
        set_str(&t->role[R_UNK], spm_piece(t->sp, id[R_UNK]));
        set_str(&t->role[R_PAD], spm_piece(t->sp, id[R_PAD]));
    }
    for (int r = 0; r < N_ROLES; r++)
        for (int j = 0; j < r; j++)
            if (t->role[r] && t->role[j] && !(r == R_BOS || r == R_EOS || j == R_BOS ||
                                              j == R_EOS) && !strcmp(t->role[r], t->role[j]))
                return fail(err, errlen, "%s: %s and %s are the same piece %s", name,
                            role_key[j], role_key[r], t->role[r]);
    if (t->cls == C_T5 && id[R_EOS] == id[R_PAD])
        return fail(err, errlen, "%s: eos and pad are the same piece (id %d)", name, id[R_EOS]);
    return 0;
}

int tok_load_spm(const char *name, const void *model, size_t len, int family,
                 tok_tokenizer **out, char *err, size_t errlen)
{
    tok_tokenizer *t = tok_new(family == TOK_T5 ? C_T5 : C_DEBERTA);
    *out = NULL;
    if (!t)
        return fail(err, errlen, "out of memory");
    if (set_model(t, name, model, len, err, errlen) < 0 ||
        spm_roles(t, family, name, err, errlen) < 0 || finish(t, name, err, errlen) < 0) {
        tok_free(t);
        return -1;
    }
    t->lower = 0;
    *out = t;
    return 0;
}

int tok_load_wordpiece(const char *vocab_txt, int lower_case, tok_tokenizer **out, char *err,
                       size_t errlen)
{
    tok_tokenizer *t = tok_new(C_BERT);
    char *bytes = NULL;
    size_t len = 0;
    *out = NULL;
    if (!t)
        return fail(err, errlen, "out of memory");
    t->lower = lower_case;
    if (zt_file_read_all(vocab_txt, (1u << 31) - 1, &bytes, &len) < 0) {
        fail(err, errlen, "%s", zt_last_error());
        goto bad;
    }
    if (set_model(t, vocab_txt, bytes, len, err, errlen) < 0 ||
        finish(t, vocab_txt, err, errlen) < 0)
        goto bad;
    free(bytes);
    *out = t;
    return 0;
bad:
    free(bytes);
    tok_free(t);
    return -1;
}

static int exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

/* config.json beside the tokenizer names model_type "albert" */
static int folder_is_albert(const char *dir)
{
    char path[PATH_MAX], e[8];
    cJSON *o = NULL;
    const cJSON *v;
    int yes;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (read_json(path, &o, e, sizeof e) <= 0)
        return 0;
    v = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    yes = cJSON_IsString(v) && !strcmp(v->valuestring, "albert");
    cJSON_Delete(o);
    return yes;
}

/* tokenizer_class -> C_*; -1 unknown */
static int class_of(const char *name, char *base, size_t n)
{
    static const char *const bert[] = {"BertTokenizer", "DistilBertTokenizer",
                                       "ElectraTokenizer", "MobileBertTokenizer",
                                       "SqueezeBertTokenizer", "LayoutLMTokenizer"};
    size_t len = strlen(name);
    if (len > 4 && !strcmp(name + len - 4, "Fast"))
        len -= 4;
    snprintf(base, n, "%.*s", (int)len, name);
    for (size_t i = 0; i < sizeof bert / sizeof bert[0]; i++)
        if (!strcmp(base, bert[i]))
            return C_BERT;
    if (!strcmp(base, "T5Tokenizer"))
        return C_T5;
    if (!strcmp(base, "DebertaV2Tokenizer"))
        return C_DEBERTA;
    if (!strcmp(base, "RobertaTokenizer"))
        return C_ROBERTA;
    if (!strcmp(base, "AlbertTokenizer"))
        return C_ALBERT;
    return -1;
}

/* dir/name's bytes; a missing file named as what of cls */
static int read_file(const char *dir, const char *name, const char *what, const char *cls,
                     char **bytes, size_t *len, char *err, size_t errlen)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = zt_file_read_all(path, (1u << 31) - 1, bytes, len);
    if (rc == -ENOENT)
        return fail(err, errlen, "%s: no %s (%s of %s)", dir, name, what, cls);
    if (rc < 0)
        return fail(err, errlen, "%s", zt_last_error());
    return 0;
}

int tok_load_folder(const char *dir, tok_tokenizer **out, char *err, size_t errlen)
{
    static const char *const vocab_file[N_CLASSES] = {"vocab.txt", "spm.model", "spiece.model",
                                                      "vocab.json", "spiece.model"}; /* C_* */
    char path[PATH_MAX], base[64] = "";
    cJSON *cfg = NULL, *stm = NULL, *atj = NULL;
    tok_tokenizer *t = NULL;
    char *bytes = NULL;
    size_t len = 0;
    int cls = -1, rc = -1;
    const cJSON *v;
    struct stat sb;

    *out = NULL;
    if (stat(dir, &sb) != 0)
        return fail(err, errlen, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return fail(err, errlen, "%s is not a folder (a Hugging Face model folder holds the "
                    "tokenizer's files)", dir);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (read_json(path, &cfg, err, errlen) < 0)
        goto out;
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    if (read_json(path, &stm, err, errlen) < 0)
        goto out;
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    if (read_json(path, &atj, err, errlen) < 0)
        goto out;
    v = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class") : NULL;
    if (v && !cJSON_IsString(v)) {
        fail(err, errlen, "%s/tokenizer_config.json: tokenizer_class must be a string", dir);
        goto out;
    }
    if (v) {
        if ((cls = class_of(v->valuestring, base, sizeof base)) < 0) {
            fail(err, errlen, "%s: tokenizer_class %s is not one zerotrain reads (BertTokenizer, "
                 "T5Tokenizer, DebertaV2Tokenizer, RobertaTokenizer, AlbertTokenizer)", dir,
                 v->valuestring);
            goto out;
        }
    } else { /* no class named: the vocabulary file says, as the folder's model type would
              * (spiece.model: ALBERT's when config.json's model_type is albert, else T5's) */
        for (int c = 0; c < C_ALBERT && cls < 0; c++)
            if (exists(dir, vocab_file[c]))
                cls = c;
        if (cls == C_T5 && folder_is_albert(dir))
            cls = C_ALBERT;
        if (cls < 0) {
            if (exists(dir, "tokenizer.json"))
                fail(err, errlen, "%s holds only tokenizer.json (a fast tokenizer), which "
                     "zerotrain does not read: it needs vocab.txt (BERT), spiece.model (T5), "
                     "spm.model (DebertaV2Tokenizer) or vocab.json and merges.txt (RoBERTa), "
                     "with tokenizer_config.json", dir);
            else
                fail(err, errlen, "%s: no tokenizer (looked for tokenizer_config.json, "
                     "vocab.txt, spiece.model, spm.model and vocab.json)", dir);
            goto out;
        }
    }
    if (!(t = tok_new(cls))) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    if (base[0])
        snprintf(t->hf_class, sizeof t->hf_class, "%s", base);
    if (apply_options(t, cfg, dir, err, errlen) < 0)
        goto out;
    rc = -1;
    if (read_file(dir, vocab_file[cls], "the vocabulary", t->hf_class, &bytes, &len, err,
                  errlen) < 0)
        goto out;
    snprintf(path, sizeof path, "%s/%s", dir, vocab_file[cls]);
    if (cls == C_ROBERTA) { /* the merges beside vocab.json */
        if (read_file(dir, "merges.txt", "the merges", t->hf_class, &t->merges, &t->merges_len,
                      err, errlen) < 0)
            goto out;
        snprintf(path, sizeof path, "%s", dir); /* (bpe.c names both files) */
    }
    if (set_model(t, path, bytes, len, err, errlen) < 0 ||
        apply_tokens(t, cfg, stm, atj, dir, err, errlen) < 0)
        goto out;
    if (finish(t, dir, err, errlen) < 0)
        goto out;
    t->config = cfg;
    cfg = NULL;
    *out = t;
    t = NULL;
    rc = 0;
out:
    cJSON_Delete(cfg);
    cJSON_Delete(stm);
    cJSON_Delete(atj);
    free(bytes);
    tok_free(t);
    return rc;
}

/* ---- a prepared dataset's tokenizer -------------------------------------------------------- */

int tok_load_data(const char *data_dir, tok_tokenizer **out, char *err, size_t errlen)
{
    zt_token_data *d = NULL;
    zt_token_data_info di;
    tok_tokenizer *t = NULL;
    zt_tokenizer_info mine;
    char path[PATH_MAX], *bytes = NULL;
    size_t len = 0;
    *out = NULL;
    if (zt_token_data_open(data_dir, 0, &d) < 0)
        return fail(err, errlen, "%s", zt_last_error());
    zt_token_data_info_get(d, &di);
    zt_token_data_close(d);
    if (exists(data_dir, "tokenizer_config.json")) {
        if (tok_load_folder(data_dir, &t, err, errlen) < 0)
            return -1;
    } else { /* an older dataset: the manifest says all there is */
        snprintf(path, sizeof path, "%s/%s", data_dir, di.tok.model_file);
        if (!strcmp(di.tok.type, "wordpiece")) {
            if (tok_load_wordpiece(path, di.tok.lower_case, &t, err, errlen) < 0)
                return -1;
        } else if (!strcmp(di.tok.type, "sentencepiece")) {
            if (zt_file_read_all(path, (1u << 31) - 1, &bytes, &len) < 0)
                return fail(err, errlen, "%s", zt_last_error());
            if (tok_load_spm(path, bytes, len, di.tok.cls_id >= 0 ? TOK_BERT : TOK_T5, &t, err,
                             errlen) < 0) {
                free(bytes);
                return -1;
            }
            free(bytes);
        } else {
            return fail(err, errlen, "%s/manifest.json: tokenizer type \"%s\" is not wordpiece "
                        "or sentencepiece", data_dir, di.tok.type);
        }
    }
    tok_manifest_info(t, &mine);
    if (mine.vocab_size != di.tok.vocab_size || mine.pad_id != di.tok.pad_id ||
        mine.unk_id != di.tok.unk_id || mine.cls_id != di.tok.cls_id ||
        mine.sep_id != di.tok.sep_id || mine.mask_id != di.tok.mask_id ||
        mine.lower_case != di.tok.lower_case) {
        tok_free(t);
        return fail(err, errlen, "%s: the tokenizer files disagree with manifest.json (vocab %d, "
                    "special ids %d %d %d %d %d, lower-case %d; the manifest: %d, %d %d %d %d "
                    "%d, %d)", data_dir, mine.vocab_size, mine.pad_id, mine.unk_id, mine.cls_id,
                    mine.sep_id, mine.mask_id, mine.lower_case, di.tok.vocab_size,
                    di.tok.pad_id, di.tok.unk_id, di.tok.cls_id, di.tok.sep_id, di.tok.mask_id,
                    di.tok.lower_case);
    }
    *out = t;
    return 0;
}

/* ---- what it is ---------------------------------------------------------------------------- */

int tok_family(const tok_tokenizer *t) { return t->cls == C_T5 ? TOK_T5 : TOK_BERT; }
const char *tok_hf_class(const tok_tokenizer *t) { return t->hf_class; }
int tok_lower_case(const tok_tokenizer *t) { return t->cls == C_T5 ? t->sp_lower : t->lower || t->sp_lower; }
int tok_vocab_size(const tok_tokenizer *t) { return t->vocab; }
long tok_model_max_length(const tok_tokenizer *t) { return t->max_len; }

void tok_special_ids(const tok_tokenizer *t, tok_specials *out)
{
    out->pad = t->role_id[R_PAD];
    out->unk = t->role_id[R_UNK];
    out->cls = t->role_id[R_CLS];
    out->sep = t->role_id[R_SEP];
    out->mask = t->role_id[R_MASK];
    out->eos = t->role_id[R_EOS];
}

const char *tok_id_to_token(const tok_tokenizer *t, int32_t id)
{
    const added *a = find_added_id(t, id);
    if (a)
        return a->content;
    return t->wp ? wp_id_token(t->wp, id) : t->bpe ? bpe_id_token(t->bpe, id)
                                                   : spm_piece(t->sp, id);
}

int32_t tok_token_to_id(const tok_tokenizer *t, const char *token)
{
    const added *a = find_added(t, token, strlen(token));
    return a ? a->id : vocab_id(t, token);
}

void tok_manifest_info(const tok_tokenizer *t, zt_tokenizer_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->type, sizeof out->type, "%s", t->wp ? "wordpiece" : t->bpe ? "bpe"
                                                                          : "sentencepiece");
    snprintf(out->model_file, sizeof out->model_file, "%s",
             t->cls == C_BERT ? "vocab.txt" : t->cls == C_DEBERTA ? "spm.model"
             : t->cls == C_ROBERTA ? "vocab.json" : "spiece.model");
    snprintf(out->hf_class, sizeof out->hf_class, "%s", t->hf_class);
    out->vocab_size = t->vocab;
    out->lower_case = tok_lower_case(t);
    out->pad_id = t->role_id[R_PAD];
    out->unk_id = t->role_id[R_UNK];
    if (t->cls == C_T5) {
        out->cls_id = out->mask_id = -1;
        out->sep_id = t->role_id[R_EOS];
    } else {
        out->cls_id = t->role_id[R_CLS];
        out->sep_id = t->role_id[R_SEP];
        out->mask_id = t->role_id[R_MASK];
    }
}

/* ---- tokenize ------------------------------------------------------------------------------ */

/* Python's lower() of one character into out (4 bytes at most); "İ" gives "i̇" */
static size_t lower_char(uint32_t c, char *out)
{
    if (c == 0x130) {
        memcpy(out, "i\xcc\x87", 3);
        return 3;
    }
    return (size_t)u8_uctomb((uint8_t *)out, uc_tolower(c), 4);
}

/* PreTrainedTokenizer.tokenize's lower-casing when do_lower_case: re.sub of
 * "(special|...)|(.+?)" keeps the special tokens (and the normalized non-special added ones),
 * tried in order at each position, and lower-cases the rest one character at a time (so no
 * final sigma). protect = 0: every character. Into t->buf; returns the length, < 0: no memory. */
static long lower_text(tok_tokenizer *t, const char *s, size_t n, int protect)
{
    size_t o = 0;
    if (grow_buf((void **)&t->buf, &t->buf_cap, 3 * n + 4, 1) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k;
        if (protect && t->first[(unsigned char)s[i]]) {
            size_t m = 0;
            for (int j = 0; j < t->n_all_special && !m; j++) {
                size_t L = strlen(t->all_special[j]);
                if (L <= n - i && !memcmp(s + i, t->all_special[j], L))
                    m = L;
            }
            for (int j = 0; j < t->n_add && !m; j++) {
                size_t L = strlen(t->add[j].content);
                if (!t->add[j].special && t->add[j].normalized && L <= n - i &&
                    !memcmp(s + i, t->add[j].content, L))
                    m = L;
            }
            if (m) {
                memcpy(t->buf + o, s + i, m);
                o += m;
                i += m;
                continue;
            }
        }
        k = utf8_next(s + i, n - i, &c);
        if (c == 0xfffd && k == 1 && (unsigned char)s[i] >= 0x80) { /* a bad byte: kept */
            t->buf[o++] = s[i++];
            continue;
        }
        o += lower_char(c, t->buf + o);
        i += k;
    }
    return (long)o;
}

/* AlbertTokenizer.preprocess_text: remove_space (" ".join(text.strip().split())), `` and ''
 * to ", unless keep_accents NFKD without combining marks, lower() when do_lower_case; into a
 * malloc'd *out */
static int albert_preprocess(tok_tokenizer *t, const char *s, size_t n, char **out, size_t *len)
{
    char *a = malloc(n + 1), *b;
    size_t m = 0;
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < n;) { /* whitespace runs to one space, none at the ends */
        uint32_t c;
        size_t k = utf8_next(s + i, n - i, &c);
        if (t->remove_space && py_space(c)) {
            while (i < n && (k = utf8_next(s + i, n - i, &c)) && py_space(c))
                i += k;
            if (m && i < n)
                a[m++] = ' ';
            continue;
        }
        memcpy(a + m, s + i, k);
        m += k;
        i += k;
    }
    for (size_t i = 0, o = 0; i <= m; i++) { /* `` and '' to " */
        if (i == m) {
            m = o;
            break;
        }
        if (i + 1 < m && ((a[i] == '`' && a[i + 1] == '`') || (a[i] == '\'' && a[i + 1] == '\''))) {
            a[o++] = '"';
            i++;
        } else {
            a[o++] = a[i];
        }
    }
    if (!t->keep_accents && m) {
        size_t nl = 0, o = 0;
        uint8_t *d = u8_normalize(UNINORM_NFKD, (const uint8_t *)a, m, NULL, &nl);
        if (!d) {
            free(a);
            return -ENOMEM;
        }
        for (size_t i = 0; i < nl;) {
            uint32_t c;
            size_t k = utf8_next((const char *)d + i, nl - i, &c);
            if (uc_combining_class(c) == 0)
                memmove(d + o, d + i, k), o += k;
            i += k;
        }
        free(a);
        a = (char *)d;
        m = o;
    }
    if (t->lower) {
        long l = lower_text(t, a, m, 0);
        if (l < 0 || !(b = malloc((size_t)l + 1))) {
            free(a);
            return -ENOMEM;
        }
        memcpy(b, t->buf, (size_t)l);
        free(a);
        a = b;
        m = (size_t)l;
    }
    *out = a;
    *len = m;
    return 0;
}

/* AlbertTokenizer._tokenize: the pieces of the preprocessed text, a piece ending in a digit
 * and a comma split as "<the digits' pieces>", "," (the digits encoded again without "▁",
 * their first piece's "▁" dropped unless the piece began with one) */
static int albert_ids(tok_tokenizer *t, const char *s, size_t n, int32_t **ids, size_t *ni,
                      size_t *cap, char *err, size_t errlen)
{
    static const char U[] = "\xe2\x96\x81"; /* SPIECE_UNDERLINE */
    char *pre = NULL, *dig = NULL;
    size_t m = 0, np = 0, cp = 0;
    int32_t *pieces = NULL, unk = t->role_id[R_UNK] >= 0 ? t->role_id[R_UNK] : 0;
    int rc = -1;
    if (albert_preprocess(t, s, n, &pre, &m) < 0)
        return fail(err, errlen, "out of memory");
    if (spm_encode(t->sp, pre, m, &pieces, &np, &cp, err, errlen) < 0)
        goto out;
    for (size_t i = 0; i < np; i++) {
        const char *p = spm_piece(t->sp, pieces[i]);
        size_t pl = p ? strlen(p) : 0, j = pl ? pl - 1 : 0, dl = 0, k;
        uint32_t c = 0;
        if (pl >= 2 && p[pl - 1] == ',') { /* the character before the comma */
            while (j > 0 && ((unsigned char)p[j - 1] & 0xc0) == 0x80)
                j--;
            if (j > 0)
                j--;
            utf8_next(p + j, pl - 1 - j, &c);
        }
        if (pl < 2 || p[pl - 1] != ',' || !(uc_digit_value(c) >= 0 || uc_decimal_value(c) >= 0)) {
            if (push_id(ids, ni, cap, pieces[i]) < 0)
                goto oom;
            continue;
        }
        free(dig);
        if (!(dig = malloc(pl)))
            goto oom;
        for (k = 0; k + 1 < pl;) /* piece[:-1] without "▁" */
            if (!strncmp(p + k, U, 3))
                k += 3;
            else
                dig[dl++] = p[k++];
        {
            int32_t *cur = NULL;
            size_t nc = 0, cc = 0;
            if (spm_encode(t->sp, dig, dl, &cur, &nc, &cc, err, errlen) < 0)
                goto out;
            for (size_t q = 0; q < nc; q++) {
                const char *cq = spm_piece(t->sp, cur[q]);
                int32_t id = cur[q];
                if (q == 0 && strncmp(p, U, 3) != 0 && cq && !strncmp(cq, U, 3)) {
                    if (!cq[3]) /* "▁" alone: dropped */
                        continue;
                    id = spm_piece_id(t->sp, cq + 3);
                    id = id >= 0 ? id : unk;
                }
                if (push_id(ids, ni, cap, id) < 0) {
                    free(cur);
                    goto oom;
                }
            }
            free(cur);
        }
        {
            int32_t comma = spm_piece_id(t->sp, ",");
            if (push_id(ids, ni, cap, comma >= 0 ? comma : unk) < 0)
                goto oom;
        }
    }
    rc = 0;
    goto out;
oom:
    rc = fail(err, errlen, "out of memory");
out:
    free(pre);
    free(dig);
    free(pieces);
    return rc;
}

/* the model's _tokenize of a text without added tokens */
static int model_ids(tok_tokenizer *t, const char *s, size_t n, int split_special,
                     int32_t **ids, size_t *ni, size_t *cap, char *err, size_t errlen)
{
    if (t->cls == C_ROBERTA)
        return bpe_encode(t->bpe, s, n, t->role_id[R_UNK], ids, ni, cap) < 0
                   ? fail(err, errlen, "out of memory") : 0;
    if (t->cls == C_BERT) {
        int mode = split_special ? 1 : 0;
        if (t->wp_mode != mode) {
            /* never_split: the config's (kept whole), and unless split_special_tokens
             * all_special_tokens (kept from lower-casing and the punctuation split) */
            int n_words = t->n_never + (mode ? 0 : t->n_all_special), k = 0;
            const char **w = calloc((size_t)n_words + 1, sizeof *w);
            int *kind = calloc((size_t)n_words + 1, sizeof *kind);
            if (!w || !kind) {
                free(w);
                free(kind);
                return fail(err, errlen, "out of memory");
            }
            for (int i = 0; i < t->n_never; i++, k++) {
                w[k] = t->never[i];
                kind[k] = WP_NEVER_SPLIT;
            }
            for (int i = 0; !mode && i < t->n_all_special; i++, k++) {
                w[k] = t->all_special[i];
                kind[k] = WP_NEVER_SPECIAL;
            }
            k = wp_set_never_split(t->wp, w, kind, n_words);
            free(w);
            free(kind);
            if (k < 0)
                return fail(err, errlen, "out of memory");
            t->wp_mode = mode;
        }
        if (wp_encode(t->wp, s, n, ids, ni, cap) < 0)
            return fail(err, errlen, "out of memory");
        return 0;
    }
    if (t->cls == C_ALBERT)
        return albert_ids(t, s, n, ids, ni, cap, err, errlen);
    if (t->cls == C_DEBERTA && t->lower) { /* DebertaV2Tokenizer._tokenize: text.lower() */
        char *copy = malloc(n ? n : 1);
        long m;
        int rc;
        if (!copy)
            return fail(err, errlen, "out of memory");
        memcpy(copy, s, n);
        m = lower_text(t, copy, n, 0);
        free(copy);
        if (m < 0)
            return fail(err, errlen, "out of memory");
        s = t->buf;
        n = (size_t)m;
        rc = spm_encode(t->sp, s, n, ids, ni, cap, err, errlen);
        return rc < 0 ? -1 : 0;
    }
    return spm_encode(t->sp, s, n, ids, ni, cap, err, errlen) < 0 ? -1 : 0;
}

typedef struct seg { const char *s; size_t n; char *own; } seg;

int tok_text_ids(tok_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                 size_t *n, size_t *cap, char *err, size_t errlen)
{
    const char *s = text;
    char *lowered = NULL;
    seg *v = NULL;
    size_t nv = 0, cv = 0;
    int rc = -1;
    if (t->cls == C_ROBERTA && t->prefix_space && len) {
        /* prepare_for_tokenization: " " + text unless it starts with a space */
        uint32_t c;
        utf8_next(text, len, &c);
        if (!py_space(c)) {
            if (!(lowered = malloc(len + 1)))
                return fail(err, errlen, "out of memory");
            lowered[0] = ' ';
            memcpy(lowered + 1, text, len);
            s = lowered;
            len++;
        }
    }
    if (t->lower && t->cls != C_T5) {
        long m = lower_text(t, text, len, 1);
        if (m < 0)
            return fail(err, errlen, "out of memory");
        if (!(lowered = malloc((size_t)m + 1)))
            return fail(err, errlen, "out of memory");
        memcpy(lowered, t->buf, (size_t)m);
        s = lowered;
        len = (size_t)m;
    }
    if (flags & TOK_SPLIT_SPECIAL) {
        rc = model_ids(t, s, len, 1, ids, n, cap, err, errlen);
        free(lowered);
        return rc;
    }
    /* the added-token trie: the leftmost match, the longest there */
    {
        size_t start = 0, i = 0;
        while (i < len) {
            size_t m = 0;
            if (t->first[(unsigned char)s[i]])
                for (int j = 0; j < t->n_add; j++) {
                    size_t L = strlen(t->add[j].content);
                    if (L > m && L <= len - i && !memcmp(s + i, t->add[j].content, L))
                        m = L;
                }
            if (!m) {
                i++;
                continue;
            }
            if (grow_buf((void **)&v, &cv, nv + 2, sizeof *v) < 0)
                goto nomem;
            if (i > start)
                v[nv++] = (seg){s + start, i - start, NULL};
            v[nv++] = (seg){s + i, m, NULL};
            i += m;
            start = i;
        }
        if (grow_buf((void **)&v, &cv, nv + 1, sizeof *v) < 0)
            goto nomem;
        if (len > start)
            v[nv++] = (seg){s + start, len - start, NULL};
    }
    /* lstrip / rstrip / single_word, as tokenize applies them left to right */
    for (size_t i = 0; i < nv; i++) {
        const added *a = find_added(t, v[i].s, v[i].n);
        seg *left = i > 0 ? &v[i - 1] : NULL, *right = i + 1 < nv ? &v[i + 1] : NULL;
        int left_nonempty = left && left->n, right_nonempty = right && right->n;
        int left_space = left_nonempty && left->s[left->n - 1] == ' ';
        int right_space = right_nonempty && right->s[0] == ' ';
        if (!a)
            continue;
        if (a->rstrip && right_nonempty)
            py_lstrip(&right->s, &right->n);
        if (a->lstrip && left_nonempty)
            py_rstrip(left->s, &left->n);
        if (a->single_word && left_nonempty && !left_space) {
            char *j = malloc(left->n + v[i].n);
            if (!j)
                goto nomem;
            memcpy(j, left->s, left->n);
            memcpy(j + left->n, v[i].s, v[i].n);
            free(left->own);
            left->own = j;
            left->s = j;
            left->n += v[i].n;
            v[i].n = 0;
        } else if (a->single_word && right_nonempty && !right_space) {
            char *j = malloc(right->n + v[i].n);
            if (!j)
                goto nomem;
            memcpy(j, v[i].s, v[i].n);
            memcpy(j + v[i].n, right->s, right->n);
            free(right->own);
            right->own = j;
            right->n += v[i].n;
            right->s = j;
            v[i].n = 0;
        }
    }
    for (size_t i = 0; i < nv; i++) {
        const added *a;
        if (!v[i].n)
            continue;
        if ((a = find_added(t, v[i].s, v[i].n))) {
            if (push_id(ids, n, cap, a->id) < 0)
                goto nomem;
        } else if (model_ids(t, v[i].s, v[i].n, 0, ids, n, cap, err, errlen) < 0) {
            goto out;
        }
    }
    rc = 0;
    goto out;
nomem:
    fail(err, errlen, "out of memory");
out:
    for (size_t i = 0; i < nv; i++)
        free(v[i].own);
    free(v);
    free(lowered);
    return rc;
}

void tok_encoding_free(tok_encoding *e)
{
    free(e->ids);
    free(e->type_ids);
    memset(e, 0, sizeof *e);
}

int tok_encode(tok_tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
               size_t max_len, int flags, tok_encoding *out, char *err, size_t errlen)
{
    int32_t *ia = NULL, *ib = NULL;
    size_t la = 0, ca = 0, lb = 0, cb = 0, total, n_special = 0, need;
    const int t5 = t->cls == C_T5, rob = t->cls == C_ROBERTA;
    const int specials = !(flags & TOK_NO_SPECIALS);
    int rc = -1;
    out->n = 0;
    if (tok_text_ids(t, a, na, flags, &ia, &la, &ca, err, errlen) < 0 ||
        (b && tok_text_ids(t, b, nb, flags, &ib, &lb, &cb, err, errlen) < 0))
        goto out;
    if (specials) /* T5: a </s> b </s>; RoBERTa: <s> a </s></s> b </s>; BERT's 3 */
        n_special = t5 ? (b ? 2 : 1) : b ? (rob ? 4 : 3) : 2;
    total = la + lb + n_special;
    /* truncate_sequences, longest_first, truncation_side right */
    if (max_len && total > max_len) {
        size_t remove = total - max_len;
        if (!b) {
            if (la > remove)
                la -= remove;
        } else {
            for (size_t k = 0; k < remove; k++)
                if (la > lb)
                    la--;
                else if (lb)
                    lb--;
        }
    }
    need = la + lb + n_special;
    if (grow_buf((void **)&out->ids, &out->cap, need, sizeof *out->ids) < 0 ||
        !(out->type_ids = realloc(out->type_ids, out->cap * sizeof *out->type_ids))) {
        fail(err, errlen, "out of memory");
        goto out;
    }
#define PUT(id, type) (out->ids[out->n] = (id), out->type_ids[out->n++] = (type))
    if (specials && !t5)
        PUT(t->role_id[R_CLS], 0);
    for (size_t i = 0; i < la; i++)
        PUT(ia[i], 0);
    if (specials && (!t5 || la == 0 || ia[la - 1] != t->role_id[R_EOS])) /* T5: eos if absent */
        PUT(t5 ? t->role_id[R_EOS] : t->role_id[R_SEP], 0);
    if (b) { /* (RobertaTokenizer's token types are all 0) */
        if (specials && rob)
            PUT(t->role_id[R_SEP], 0);
        for (size_t i = 0; i < lb; i++)
            PUT(ib[i], t5 || rob || !specials ? 0 : 1);
        if (specials && (!t5 || lb == 0 || ib[lb - 1] != t->role_id[R_EOS]))
            PUT(t5 ? t->role_id[R_EOS] : t->role_id[R_SEP], t5 || rob ? 0 : 1);
    }
#undef PUT
    rc = 0;
out:
    free(ia);
    free(ib);
    return rc;
}

/* ---- decode -------------------------------------------------------------------------------- */

typedef struct sbuf { char *s; size_t n, cap; int oom; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom || grow_buf((void **)&b->s, &b->cap, b->n + n + 1, 1) < 0) {
        b->oom = 1;
        return;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* str.strip() in place */
static void sb_strip(sbuf *b)
{
    const char *s = b->s ? b->s : "";
    size_t n = b->n;
    py_lstrip(&s, &n);
    py_rstrip(s, &n);
    if (b->s) {
        memmove(b->s, s, n);
        b->s[n] = '\0';
    }
    b->n = n;
}

/* sp_model.decode(pieces) of normal pieces: "▁" becomes " ", the first one's dropped */
static void sp_decode(sbuf *b, const char *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *s = p[i];
        if (i == 0 && !strncmp(s, "\xe2\x96\x81", 3))
            s += 3;
        for (; *s; s++) {
            if (!strncmp(s, "\xe2\x96\x81", 3)) {
                sb_add(b, " ", 1);
                s += 2;
            } else {
                sb_add(b, s, 1);
            }
        }
    }
}

/* AlbertTokenizer / T5Tokenizer / SPMTokenizer's convert_tokens_to_string */
static void sp_tokens_to_string(const tok_tokenizer *t, sbuf *out, const char **tok, size_t n)
{
    sbuf b = {0};
    size_t start = 0;
    int prev_special = 0;
    if (t->cls == C_T5 && n && !strncmp(tok[0], "\xe2\x96\x81", 3)) /* add_prefix_space */
        tok[0] += 3;
    for (size_t i = 0; i < n; i++) {
        if (!is_all_special(t, tok[i], strlen(tok[i]))) {
            prev_special = 0;
            continue;
        }
        if (!prev_special)
            sb_add(&b, " ", 1);
        sp_decode(&b, tok + start, i - start);
        sb_str(&b, tok[i]);
        prev_special = 1;
        start = i + 1;
    }
    sp_decode(&b, tok + start, n - start);
    sb_strip(&b);
    sb_add(out, b.s ? b.s : "", b.n);
    out->oom |= b.oom;
    free(b.s);
}

/* GPT2Tokenizer's convert_tokens_to_string: the tokens' bytes, decoded as
 * bytes.decode("utf-8", errors="replace") does (each maximal ill-formed part one U+FFFD) */
static void bpe_tokens_to_string(sbuf *out, const char **tok, size_t n)
{
    sbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        char buf[256], *big = NULL, *o = buf;
        size_t L = strlen(tok[i]);
        if (L > sizeof buf && !(o = big = malloc(L))) {
            out->oom = 1;
            return;
        }
        sb_add(&b, o, bpe_token_bytes(tok[i], o));
        free(big);
    }
    const uint8_t *s = (const uint8_t *)(b.s ? b.s : "");
    for (size_t i = 0; i < b.n;) {
        uint8_t c = s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                      : c >= 0xf0 && c <= 0xf4 ? 4 : 0, k = 1;
        /* the second byte's range narrows for E0, ED, F0, F4 (no overlong, surrogate or
         * beyond-U+10FFFF forms) */
        uint8_t lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        uint8_t hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        while (need && k < need && i + k < b.n &&
               s[i + k] >= (k == 1 ? lo : 0x80) && s[i + k] <= (k == 1 ? hi : 0xbf))
            k++;
        if (need && k == need)
            sb_add(out, (const char *)s + i, k);
        else
            sb_add(out, "\xef\xbf\xbd", 3);
        i += k;
    }
    out->oom |= b.oom;
    free(b.s);
}

static void clean_up(sbuf *b)
{
    static const char *const rules[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","},
                                           {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
                                           {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t r = 0; b->s && r < sizeof rules / sizeof rules[0]; r++) {
        size_t lf = strlen(rules[r][0]), lt = strlen(rules[r][1]), o = 0;
        for (size_t i = 0; i < b->n;) { /* str.replace: left to right, never shorter */
            if (i + lf <= b->n && !memcmp(b->s + i, rules[r][0], lf)) {
                memmove(b->s + o, rules[r][1], lt);
                o += lt;
                i += lf;
            } else {
                b->s[o++] = b->s[i++];
            }
        }
        b->n = o;
        b->s[o] = '\0';
    }
}

int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
               char **out, char *err, size_t errlen)
{
    const char **tok = calloc(n + 1, sizeof *tok);
    sbuf res = {0};
    size_t m = 0;
    *out = NULL;
    if (!tok)
        return fail(err, errlen, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = tok_id_to_token(t, ids[i]);
        if (!s)
            s = t->role[R_UNK]; /* HF: _convert_id_to_token's fallback */
        if (skip_special && is_all_special(t, s, strlen(s)))
            continue;
        tok[m++] = s;
    }
    /* _decode: tokens that are added but not special, and T5's extra ids (additional special
     * tokens above the vocabulary), stand apart from the text around them */
    {
        size_t start = 0;
        int first = 1;
        for (size_t i = 0; i <= m; i++) {
            const added *a = i < m ? find_added(t, tok[i], strlen(tok[i])) : NULL;
            int apart = a && (!is_all_special(t, tok[i], strlen(tok[i])) ||
                              (is_additional(t, tok[i]) && a->id >= t->vocab));
            if (i < m && !apart)
                continue;
            if (i > start) { /* convert_tokens_to_string of tok[start, i) */
                sbuf b = {0};
                if (t->cls == C_BERT) {
                    for (size_t j = start; j < i; j++) {
                        if (j > start)
                            sb_add(&b, " ", 1);
                        sb_str(&b, tok[j]);
                    }
                    if (b.s) { /* .replace(" ##", "") */
                        size_t o = 0;
                        for (size_t j = 0; j < b.n;) {
                            if (j + 3 <= b.n && !memcmp(b.s + j, " ##", 3))
                                j += 3;
                            else
                                b.s[o++] = b.s[j++];
                        }
                        b.n = o;
                        b.s[o] = '\0';
                    }
                    sb_strip(&b);
                } else if (t->cls == C_ROBERTA) {
                    bpe_tokens_to_string(&b, tok + start, i - start);
                } else {
                    sp_tokens_to_string(t, &b, tok + start, i - start);
                }
                if (b.n || i == m) { /* an empty one is kept only at the end, as in HF */
                    if (!first)
                        sb_add(&res, " ", 1); /* spaces_between_special_tokens */
                    sb_add(&res, b.s ? b.s : "", b.n);
                    first = 0;
                }
                res.oom |= b.oom;
                free(b.s);
            }
            if (i < m) {
                if (!first)
                    sb_add(&res, " ", 1);
                sb_str(&res, tok[i]);
                first = 0;
            }
            start = i + 1;
        }
    }
    free(tok);
    if (!res.s)
        sb_add(&res, "", 0);
    if (t->clean_up)
        clean_up(&res);
    if (res.oom) {
        free(res.s);
        return fail(err, errlen, "out of memory");
    }
    *out = res.s;
    return 0;
}

/* ---- save_pretrained ------------------------------------------------------------------------ */

/* json.dumps(o, indent=2, sort_keys=True, ensure_ascii=False): object keys sorted (numeric
 * keys, added_tokens_decoder's ints, by value), 2-space indents */
static int key_cmp(const void *pa, const void *pb)
{
    const cJSON *a = *(const cJSON *const *)pa, *b = *(const cJSON *const *)pb;
    size_t la = strlen(a->string), lb = strlen(b->string);
    int da = la > 0 && strspn(a->string, "0123456789") == la,
        db = lb > 0 && strspn(b->string, "0123456789") == lb;
    if (da && db && la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a->string, b->string);
}

static void emit_str(sbuf *b, const char *s)
{
    sb_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_add(b, esc, 2);
        } else if (c < 0x20) {
            const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t"
                                : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (named)
                sb_str(b, named);
            else {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                sb_str(b, esc);
            }
        } else {
            sb_add(b, s, 1);
        }
    }
    sb_add(b, "\"", 1);
}

static void emit(sbuf *b, const cJSON *v, int level)
{
    char num[64];
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        const int obj = cJSON_IsObject(v);
        const cJSON *c;
        const cJSON **kids;
        int n = cJSON_GetArraySize(v), i = 0;
        if (n == 0) {
            sb_str(b, obj ? "{}" : "[]");
            return;
        }
        if (!(kids = malloc(sizeof *kids * (size_t)n))) {
            b->oom = 1;
            return;
        }
        cJSON_ArrayForEach(c, v) kids[i++] = c;
        if (obj)
            qsort(kids, (size_t)n, sizeof *kids, key_cmp);
        sb_str(b, obj ? "{\n" : "[\n");
        for (i = 0; i < n; i++) {
            for (int k = 0; k < 2 * (level + 1); k++)
                sb_add(b, " ", 1);
            if (obj) {
                emit_str(b, kids[i]->string);
                sb_str(b, ": ");
            }
            emit(b, kids[i], level + 1);
            sb_str(b, i + 1 < n ? ",\n" : "\n");
        }
        for (int k = 0; k < 2 * level; k++)
            sb_add(b, " ", 1);
        sb_str(b, obj ? "}" : "]");
        free(kids);
    } else if (cJSON_IsString(v)) {
        emit_str(b, v->valuestring);
    } else if (cJSON_IsRaw(v)) {
        sb_str(b, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        if (v->valuedouble == (double)(long long)v->valuedouble && v->valuedouble < 9e15 && v->valuedouble > -9e15)
            snprintf(num, sizeof num, "%lld", (long long)v->valuedouble);
        else
            snprintf(num, sizeof num, "%.17g", v->valuedouble);
        sb_str(b, num);
    } else {
        sb_str(b, cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false" : "null");
    }
}

static int write_file(const char *dir, const char *name, const void *data, size_t len,
                      char *err, size_t errlen)
{
    char path[PATH_MAX];
    const void *parts[1] = {data};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (zt_file_write_atomic(path, parts, &len, 1) < 0)
        return fail(err, errlen, "%s", zt_last_error());
    return 0;
}

static int write_json(const char *dir, const char *name, const cJSON *o, char *err,
                      size_t errlen)
{
    sbuf b = {0};
    int rc;
    emit(&b, o, 0);
    sb_add(&b, "\n", 1);
    if (b.oom) {
        free(b.s);
        return fail(err, errlen, "out of memory");
    }
    rc = write_file(dir, name, b.s, b.n, err, errlen);
    free(b.s);
    return rc;
}

/* an AddedToken as __getstate__ gives it (special: with the "special" key) */
static cJSON *added_json(const char *content, int lstrip, int rstrip, int single_word,
                         int normalized, int special, int with_special)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddBoolToObject(o, "lstrip", lstrip);
    cJSON_AddBoolToObject(o, "normalized", normalized);
    cJSON_AddBoolToObject(o, "rstrip", rstrip);
    cJSON_AddBoolToObject(o, "single_word", single_word);
    if (with_special)
        cJSON_AddBoolToObject(o, "special", special);
    return o;
}

static void set_item(cJSON *o, const char *key, cJSON *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    if (v)
        cJSON_AddItemToObject(o, key, v);
}

static cJSON *str_list(char *const *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

int tok_save(const tok_tokenizer *t, const char *dir, long model_max_length, char *err,
             size_t errlen)
{
    static const char *const others[] = {"tokenizer.json", "vocab.json", "merges.txt",
                                         "tokenizer.model", "sentencepiece.bpe.model",
                                         "vocab.txt", "spm.model", "spiece.model",
                                         "added_tokens.json"};
    zt_tokenizer_info mi;
    cJSON *cfg = t->config ? cJSON_Duplicate(t->config, 1) : cJSON_CreateObject();
    cJSON *stm = cJSON_CreateObject(), *adt = cJSON_CreateObject(), *atj = cJSON_CreateObject();
    int rc = -1, n_above = 0;
    long max_len = model_max_length > 0 ? model_max_length : t->max_len;

    tok_manifest_info(t, &mi);
    if (!cfg || !stm || !adt || !atj) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    /* tokenizer_config.json: the init kwargs (the folder's, plus the class's own), the
     * special tokens as strings, model_max_length, clean_up_tokenization_spaces,
     * added_tokens_decoder, tokenizer_class; save_pretrained drops the file names */
    {
        static const char *const dropped[] = {"name_or_path", "special_tokens_map_file",
                                              "tokenizer_file", "vocab_file", "init_inputs"};
        for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
            cJSON_DeleteItemFromObjectCaseSensitive(cfg, dropped[i]);
    }
    for (int r = 0; r < N_ROLES; r++)
        set_item(cfg, role_key[r], t->role[r] ? cJSON_CreateString(t->role[r]) : NULL);
    set_item(cfg, "additional_special_tokens",
             t->n_additional ? str_list(t->additional, t->n_additional) : NULL);
    set_item(cfg, "clean_up_tokenization_spaces", cJSON_CreateBool(t->clean_up));
    set_item(cfg, "model_max_length", max_len > 0 ? cJSON_CreateNumber((double)max_len)
                                                  : cJSON_CreateRaw(VERY_LARGE_INTEGER));
    set_item(cfg, "tokenizer_class", cJSON_CreateString(t->hf_class));
    if (t->cls == C_BERT) {
        set_item(cfg, "do_lower_case", cJSON_CreateBool(t->lower));
        set_item(cfg, "do_basic_tokenize", cJSON_CreateBool(1));
        set_item(cfg, "never_split",
                 t->n_never ? str_list(t->never, t->n_never) : cJSON_CreateNull());
        set_item(cfg, "strip_accents", t->strip_accents < 0 ? cJSON_CreateNull()
                                                            : cJSON_CreateBool(t->strip_accents));
        set_item(cfg, "tokenize_chinese_chars", cJSON_CreateBool(t->chinese));
    } else if (t->cls == C_ROBERTA) {
        set_item(cfg, "errors", cJSON_CreateString("replace"));
        set_item(cfg, "add_prefix_space", cJSON_CreateBool(t->prefix_space));
    } else {
        set_item(cfg, "sp_model_kwargs", cJSON_CreateObject());
        if (t->cls == C_DEBERTA) {
            set_item(cfg, "do_lower_case", cJSON_CreateBool(t->lower));
            set_item(cfg, "split_by_punct", cJSON_CreateBool(0));
        } else if (t->cls == C_ALBERT) {
            set_item(cfg, "do_lower_case", cJSON_CreateBool(t->lower));
            set_item(cfg, "remove_space", cJSON_CreateBool(t->remove_space));
            set_item(cfg, "keep_accents", cJSON_CreateBool(t->keep_accents));
        } else {
            set_item(cfg, "extra_ids", cJSON_CreateNumber(t->extra_ids));
            set_item(cfg, "legacy", cJSON_CreateBool(1));
            set_item(cfg, "add_prefix_space", cJSON_CreateBool(1));
        }
    }
    for (int i = 0; i < t->n_add; i++) {
        char key[16];
        const added *a = &t->add[i];
        snprintf(key, sizeof key, "%d", (int)a->id);
        cJSON_AddItemToObject(adt, key, added_json(a->content, a->lstrip, a->rstrip,
                                                   a->single_word, a->normalized, a->special, 1));
        if (a->id >= t->vocab) {
            cJSON_AddNumberToObject(atj, a->content, a->id);
            n_above++;
        }
    }
    set_item(cfg, "added_tokens_decoder", adt);
    adt = NULL;
    /* special_tokens_map.json: the strings, or (tokens the class makes AddedTokens: T5's
     * eos/unk/pad, DebertaV2's unk) the AddedToken without "special" */
    for (int r = 0; r < N_ROLES; r++) {
        const added *a;
        if (!t->role[r])
            continue;
        a = find_added(t, t->role[r], strlen(t->role[r]));
        if (a && (t->cls == C_T5 || t->cls == C_ROBERTA || (t->cls == C_DEBERTA && r == R_UNK) ||
                  (t->cls == C_ALBERT && r == R_MASK)))
            cJSON_AddItemToObject(stm, role_key[r],
                                  added_json(a->content, a->lstrip, a->rstrip, a->single_word,
                                             t->cls == C_DEBERTA ||
                                                 (t->cls == C_ROBERTA && a->normalized), 1, 0));
        else
            cJSON_AddStringToObject(stm, role_key[r], t->role[r]);
    }
    if (t->n_additional)
        cJSON_AddItemToObject(stm, "additional_special_tokens",
                              str_list(t->additional, t->n_additional));
    /* the other tokenizers' files go, so that AutoTokenizer finds these */
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char path[PATH_MAX];
        struct stat sb;
        if (!strcmp(others[i], mi.model_file) ||
            (n_above && !strcmp(others[i], "added_tokens.json")) ||
            (t->cls == C_ROBERTA && !strcmp(others[i], "merges.txt")))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, others[i]);
        if (lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode) && unlink(path) != 0) {
            fail(err, errlen, "%s: cannot remove it: %s", path, strerror(errno));
            goto out;
        }
    }
    if (write_file(dir, mi.model_file, t->model, t->model_len, err, errlen) < 0 ||
        (t->cls == C_ROBERTA &&
         write_file(dir, "merges.txt", t->merges, t->merges_len, err, errlen) < 0) ||
        write_json(dir, "tokenizer_config.json", cfg, err, errlen) < 0 ||
        write_json(dir, "special_tokens_map.json", stm, err, errlen) < 0 ||
        (n_above && write_json(dir, "added_tokens.json", atj, err, errlen) < 0))
        goto out;
    rc = 0;
out:
    cJSON_Delete(cfg);
    cJSON_Delete(stm);
    cJSON_Delete(adt);
    cJSON_Delete(atj);
    return rc;
}

/* ---- the tokenizer of the data a model was trained with --------------------------------- */

int tok_save_data_tokenizer(const char *data_dir, const char *model_dir, long model_max_length,
                            char *err, size_t errlen)
{
    tok_tokenizer *t;
    int rc;
    if (tok_load_data(data_dir, &t, err, errlen) < 0)
        return -1;
    rc = tok_save(t, model_dir, model_max_length, err, errlen);
    tok_free(t);
    return rc;
}

/* "manifest xxh64 H" (a dataset) or "file xxh64 H" (finetune's labelled file) -> H (16 hex
 * digits), or -1 */
static int data_hash(const char *data_id, char h[17])
{
    static const char *const pre[] = {"manifest xxh64 ", "file xxh64 "};
    for (int k = 0; data_id && k < 2; k++) {
        size_t n = strlen(pre[k]);
        if (strncmp(data_id, pre[k], n) == 0 && strlen(data_id + n) == 16 &&
            strspn(data_id + n, "0123456789abcdef") == 16) {
            memcpy(h, data_id + n, 17);
            return 0;
        }
    }
    return -1;
}

static void remove_tree_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int store_tokenizer(const tok_tokenizer *given, const char *data_dir, const char *data_id,
                           const char *ckpt_root, long model_max_length, char *err,
                           size_t errlen);

int tok_store_for_checkpoints(const char *data_dir, const char *data_id, const char *ckpt_root,
                              long model_max_length, char *err, size_t errlen)
{
    return data_dir ? store_tokenizer(NULL, data_dir, data_id, ckpt_root, model_max_length, err,
                                      errlen)
                    : 0; /* synthetic data: no tokenizer */
}

int tok_store_tokenizer(const tok_tokenizer *t, const char *data_id, const char *ckpt_root,
                        long model_max_length, char *err, size_t errlen)
{
    return store_tokenizer(t, NULL, data_id, ckpt_root, model_max_length, err, errlen);
}

/* t's files (or those of data_dir's tokenizer) into CKPT_ROOT/tokenizers/H */
static int store_tokenizer(const tok_tokenizer *given, const char *data_dir, const char *data_id,
                           const char *ckpt_root, long model_max_length, char *err,
                           size_t errlen)
{
    char h[17], top[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX];
    tok_tokenizer *t = NULL;
    int rc;
    if (data_hash(data_id, h) < 0)
        return 0;
    snprintf(top, sizeof top, "%s/tokenizers", ckpt_root);
    snprintf(dst, sizeof dst, "%s/%s", top, h);
    if (exists(dst, "tokenizer_config.json"))
        return 0;
    if (mkdir(top, 0777) != 0 && errno != EEXIST)
        return fail(err, errlen, "%s: %s", top, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", top, h);
    if (!mkdtemp(tmp))
        return fail(err, errlen, "%s: %s", tmp, strerror(errno));
    if (!given && tok_load_data(data_dir, &t, err, errlen) < 0) {
        rmdir(tmp);
        return -1;
    }
    rc = tok_save(given ? given : t, tmp, model_max_length, err, errlen);
    tok_free(t);
    if (rc == 0 && rename(tmp, dst) != 0 && errno != ENOTEMPTY && errno != EEXIST)
        rc = fail(err, errlen, "%s: %s", dst, strerror(errno));
    if (exists(tmp, "."))
        remove_tree_files(tmp); /* failed, or another run stored it first */
    return rc;
}

int tok_export_checkpoint(const char *ckpt_dir, const char *out_dir, char *err, size_t errlen)
{
    char path[PATH_MAX], parent[PATH_MAX], h[17], *text = NULL;
    cJSON *o;
    const cJSON *id;
    tok_tokenizer *t;
    size_t len;
    int rc;
    snprintf(path, sizeof path, "%s/trainer.json", ckpt_dir);
    if (zt_file_read_all(path, 1u << 20, &text, NULL) < 0)
        return 0; /* an older checkpoint: no record of its data */
    o = cJSON_Parse(text);
    free(text);
    id = cJSON_GetObjectItemCaseSensitive(o, "data");
    rc = cJSON_IsString(id) ? data_hash(id->valuestring, h) : -1;
    cJSON_Delete(o);
    if (rc < 0)
        return 0; /* synthetic data */
    snprintf(parent, sizeof parent, "%s", ckpt_dir);
    for (len = strlen(parent); len > 1 && parent[len - 1] == '/'; len--)
        parent[len - 1] = '\0';
    {
        char *slash = strrchr(parent, '/');
        if (!slash)
            snprintf(parent, sizeof parent, ".");
        else if (slash == parent)
            parent[1] = '\0';
        else
            *slash = '\0';
    }
    snprintf(path, sizeof path, "%s/tokenizers/%s", parent, h);
    if (!exists(path, "tokenizer_config.json"))
        return 0;
    if (tok_load_folder(path, &t, err, errlen) < 0)
        return -1;
    rc = tok_save(t, out_dir, 0, err, errlen);
    tok_free(t);
    return rc < 0 ? -1 : 1;
}
