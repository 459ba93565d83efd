/* tokens.c - prepared token data (docs/data-format.md): the shard writer (fixed-size shards,
 * atomic writes, manifest last) and the validating mmap reader. It does not tokenize text and
 * does not cache or prefetch beyond what the page cache does; little-endian hosts only. */
#include "tokens.h"
#include "../common/err.h"
#include "../format/fileio.h"
#include "../memory/mem.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tokens.c assumes a little-endian host"
#endif

#define MAGIC "ZTTOKENS"
#define FORMAT_NAME "zerotrain-tokens"
#define VERSION 1u
#define HEADER_BYTES 64u
#define DEFAULT_SHARD_TOKENS (64ull << 20)
#define MAX_SHARD_TOKENS (1ull << 40)
#define MANIFEST_MAX (256u << 20)  /* bytes; a manifest of a million sources is ~150 MB */
#define EXACT_MAX 0x1p53           /* JSON numbers go through double: exact below 2^53 */
#define MIN_BUF_TOKENS (1u << 20)  /* the shard buffer starts here and doubles */

typedef struct shard_header {
    char magic[8];
    uint32_t version, id_bytes, vocab_size;
    int32_t sep_id;
    uint64_t n_tokens, n_docs, tokens_offset, docs_offset, file_size;
} shard_header;
_Static_assert(sizeof(shard_header) == HEADER_BYTES, "shard header is 64 bytes");

static uint64_t align8(uint64_t x) { return (x + 7) & ~7ull; }
static int id_bytes_for(int vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

static const char *const special_names[5] = {"pad_id", "unk_id", "cls_id", "sep_id", "mask_id"};

/* Whether two of the five special ids are equal (a masked position would read as padding, a
 * separator as a mask, ...); *a < *b are the first such pair. */
static int special_clash(const int32_t ids[5], int *a, int *b)
{
    for (*a = 0; *a < 5; ++*a)
        for (*b = *a + 1; *b < 5; ++*b)
            if (ids[*a] >= 0 && ids[*a] == ids[*b])
                return 1;
    return 0;
}

/* cls_id and mask_id may be -1 (a vocabulary without them, T5's); the others are required */
static int optional_special(int i) { return i == 2 || i == 4; }

static int tok_check(const zt_tokenizer_info *t, const char *what)
{
    const int32_t ids[5] = {t->pad_id, t->unk_id, t->cls_id, t->sep_id, t->mask_id};
    const char *const *names = special_names;
    int a, b;
    if (!memchr(t->type, '\0', sizeof t->type) || !t->type[0])
        return zt_fail(ZT_E_CONFIG, "%s: tokenizer type is empty or not terminated", what);
    if (!memchr(t->model_file, '\0', sizeof t->model_file))
        return zt_fail(ZT_E_CONFIG, "%s: tokenizer model_file is not terminated", what);
    if (t->vocab_size < 1)
        return zt_fail(ZT_E_CONFIG, "%s: vocab_size %d must be positive", what, t->vocab_size);
    if (!memchr(t->hf_class, '\0', sizeof t->hf_class))
        return zt_fail(ZT_E_CONFIG, "%s: tokenizer hf_class is not terminated", what);
    for (int i = 0; i < 5; i++)
        if ((ids[i] < 0 && !(ids[i] == -1 && optional_special(i))) || ids[i] >= t->vocab_size)
            return zt_fail(ZT_E_CONFIG, "%s: %s %d is outside [0, vocab_size %d)%s", what,
                           names[i], ids[i], t->vocab_size,
                           optional_special(i) ? " (-1: none)" : "");
    if (special_clash(ids, &a, &b))
        return zt_fail(ZT_E_CONFIG, "%s: %s and %s are both %d (the five special tokens need "
                       "five different ids)", what, names[a], names[b], ids[a]);
    return 0;
}

/* ======================================================================================
 * writer
 * ====================================================================================== */

typedef struct shard_rec { uint64_t tokens, docs, bytes, hash; } shard_rec;
typedef struct source_rec { char *name; int64_t bytes; uint64_t tokens, docs; } source_rec;

struct zt_token_writer {
    char *dir;
    zt_tokenizer_info tok;
    uint64_t shard_tokens;
    int id_bytes;
    void *buf;                  /* current shard's ids, id_bytes each (zt_mem, ZT_MEM_IO) */
    uint64_t buf_cap, buf_n;    /* tokens */
    uint64_t *starts;           /* document starts in the current shard */
    size_t n_starts, cap_starts;
    shard_rec *shards;
    int n_shards, cap_shards;
    source_rec *sources;
    size_t n_sources, cap_sources, last_source;
    zt_dirs_made created;       /* folders this writer created, parents first */
    uint64_t total_tokens, total_docs;
    int failed;                 /* a write failed: the writer refuses further calls */
    int finished;
    int manifest_written;
};

static void shard_path(const char *dir, int k, char *out, size_t n)
{
    snprintf(out, n, "%s/shard-%05d.zts", dir, k);
}

int zt_token_writer_create(const char *dir, const zt_tokenizer_info *tok, uint64_t shard_tokens,
                           zt_token_writer **out)
{
    zt_token_writer *w = NULL;
    char *manifest = NULL;
    int rc;

    if (!out)
        return zt_fail(ZT_E_INVAL, "zt_token_writer_create: out is NULL");
    *out = NULL;
    if (!dir || !dir[0] || !tok)
        return zt_fail(ZT_E_INVAL, "zt_token_writer_create: dir and tok are required");
    if ((rc = tok_check(tok, dir)) < 0)
        return rc;
    if (shard_tokens == 0)
        shard_tokens = DEFAULT_SHARD_TOKENS;
    if (shard_tokens > MAX_SHARD_TOKENS)
        return zt_fail(ZT_E_CONFIG, "%s: shard_tokens %" PRIu64 " exceeds the limit 2^40", dir,
                       shard_tokens);
    if (!(w = calloc(1, sizeof *w)) || !(w->dir = strdup(dir)) ||
        !(manifest = malloc(strlen(dir) + sizeof "/manifest.json"))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto fail;
    }
    w->tok = *tok;
    w->shard_tokens = shard_tokens;
    w->id_bytes = id_bytes_for(tok->vocab_size);
    w->last_source = SIZE_MAX;
    if ((rc = zt_mkdirs(dir, 0755, &w->created)) < 0)
        goto fail;
    /* From here on the folder is not a dataset until finish writes the new manifest. */
    sprintf(manifest, "%s/manifest.json", dir);
    if (unlink(manifest) != 0 && errno != ENOENT) {
        rc = zt_fail(-errno, "%s: cannot remove the old manifest: %s", manifest, strerror(errno));
        goto fail;
    }
    free(manifest);
    *out = w;
    return 0;
fail:
    free(manifest);
    zt_token_writer_destroy(w);
    return rc;
}

/* Writes the buffered tokens as the next shard. */
/* Room for at least `need` entries in the document-start table. */
static int reserve_starts(zt_token_writer *w, size_t need)
{
    size_t cap = w->cap_starts ? w->cap_starts : 1024;
    uint64_t *g;
    if (need <= w->cap_starts)
        return 0;
    while (cap < need)
        cap *= 2;
    if (!(g = realloc(w->starts, sizeof *g * cap)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    w->starts = g;
    w->cap_starts = cap;
    return 0;
}

static int flush_shard(zt_token_writer *w)
{
    char path[4096];
    shard_header h;
    static const uint8_t zeros[8];
    uint64_t tok_bytes = w->buf_n * (uint64_t)w->id_bytes;
    XXH64_state_t *st = NULL;
    int rc;

    if (w->n_shards == w->cap_shards) {
        int cap = w->cap_shards ? 2 * w->cap_shards : 16;
        shard_rec *g = realloc(w->shards, sizeof *g * (size_t)cap);
        if (!g)
            return zt_fail(ZT_E_NOMEM, "out of memory");
        w->shards = g;
        w->cap_shards = cap;
    }
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = VERSION;
    h.id_bytes = (uint32_t)w->id_bytes;
    h.vocab_size = (uint32_t)w->tok.vocab_size;
    h.sep_id = w->tok.sep_id;
    h.n_tokens = w->buf_n;
    h.n_docs = w->n_starts;
    h.tokens_offset = HEADER_BYTES;
    h.docs_offset = align8(HEADER_BYTES + tok_bytes);
    h.file_size = h.docs_offset + (h.n_docs + 1) * 8;

    /* the table ends with one more entry, n_tokens */
    ZT_TRY(reserve_starts(w, w->n_starts + 1));
    w->starts[w->n_starts] = w->buf_n;
    const void *parts[4] = {&h, w->buf, zeros, w->starts};
    size_t lens[4] = {HEADER_BYTES, (size_t)tok_bytes,
                      (size_t)(h.docs_offset - HEADER_BYTES - tok_bytes),
                      (size_t)(h.n_docs + 1) * 8};

    if (!(st = XXH64_createState()))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    XXH64_reset(st, 0);
    for (int i = 0; i < 4; i++)
        XXH64_update(st, parts[i], lens[i]);
    w->shards[w->n_shards] = (shard_rec){w->buf_n, w->n_starts, h.file_size, XXH64_digest(st)};
    XXH64_freeState(st);

    shard_path(w->dir, w->n_shards, path, sizeof path);
    /* counted before the write: a failed write may still leave the file behind (a failed
     * fsync of the folder after the rename), and destroy must remove it */
    w->n_shards++;
    if ((rc = zt_file_write_atomic(path, parts, lens, 4)) < 0)
        return rc;
    w->buf_n = 0;
    w->n_starts = 0;
    return 0;
}

/* Room for at least one more token in the shard buffer (buf_n < shard_tokens). */
static int grow_buf(zt_token_writer *w)
{
    uint64_t cap = w->buf_cap ? 2 * w->buf_cap : MIN_BUF_TOKENS;
    void *g;
    if (cap > w->shard_tokens)
        cap = w->shard_tokens;
    if (cap > SIZE_MAX / (uint64_t)w->id_bytes)
        return zt_fail(ZT_E_NOMEM, "shard buffer of %" PRIu64 " tokens does not fit in memory", cap);
    if (!(g = zt_mem_alloc((size_t)cap * (size_t)w->id_bytes, ZT_ALIGN_CACHE, ZT_MEM_IO)))
        return ZT_E_NOMEM;
    if (w->buf_n)
        memcpy(g, w->buf, (size_t)w->buf_n * (size_t)w->id_bytes);
    zt_mem_free(w->buf, (size_t)w->buf_cap * (size_t)w->id_bytes, ZT_MEM_IO);
    w->buf = g;
    w->buf_cap = cap;
    return 0;
}

/* Appends n ids (already checked) to the stream, writing shards as they fill. */
static int put_ids(zt_token_writer *w, const int32_t *ids, size_t n)
{
    while (n) {
        if (w->buf_n == w->shard_tokens)
            ZT_TRY(flush_shard(w));
        if (w->buf_n == w->buf_cap)
            ZT_TRY(grow_buf(w));
        uint64_t room = w->buf_cap - w->buf_n;
        size_t k = n < room ? n : (size_t)room;
        if (w->id_bytes == 2) {
            uint16_t *d = (uint16_t *)w->buf + w->buf_n;
            for (size_t i = 0; i < k; i++)
                d[i] = (uint16_t)ids[i];
        } else {
            memcpy((uint32_t *)w->buf + w->buf_n, ids, k * sizeof *ids);
        }
        w->buf_n += k;
        ids += k;
        n -= k;
    }
    return 0;
}

static source_rec *find_source(zt_token_writer *w, const char *name)
{
    source_rec *s;
    struct stat sb;
    if (w->last_source != SIZE_MAX && strcmp(w->sources[w->last_source].name, name) == 0)
        return &w->sources[w->last_source];
    for (size_t i = 0; i < w->n_sources; i++)
        if (strcmp(w->sources[i].name, name) == 0) {
            w->last_source = i;
            return &w->sources[i];
        }
    if (w->n_sources == w->cap_sources) {
        size_t cap = w->cap_sources ? 2 * w->cap_sources : 64;
        source_rec *g = realloc(w->sources, sizeof *g * cap);
        if (!g)
            return NULL;
        w->sources = g;
        w->cap_sources = cap;
    }
    s = &w->sources[w->n_sources];
    if (!(s->name = strdup(name)))
        return NULL;
    s->bytes = stat(name, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
    s->tokens = s->docs = 0;
    w->last_source = w->n_sources++;
    return s;
}

static int writer_usable(const zt_token_writer *w, const char *fn)
{
    if (!w)
        return zt_fail(ZT_E_INVAL, "%s: writer is NULL", fn);
    if (w->finished)
        return zt_fail(ZT_E_INVAL, "%s: %s: the writer is already finished", fn, w->dir);
    if (w->failed)
        return zt_fail(ZT_E_INVAL, "%s: %s: an earlier write failed", fn, w->dir);
    return 0;
}

int zt_token_writer_add(zt_token_writer *w, const int32_t *ids, size_t n, const char *source)
{
    const int32_t sep = w ? w->tok.sep_id : 0;
    source_rec *src;
    int rc;
    ZT_TRY(writer_usable(w, "zt_token_writer_add"));
    if (n && !ids)
        return zt_fail(ZT_E_INVAL, "zt_token_writer_add: ids is NULL");
    if (!source)
        source = "";
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= w->tok.vocab_size)
            return zt_fail(ZT_E_RANGE, "%s: token %zu of the document = %" PRId32
                           " is outside [0, vocab_size %d)", source[0] ? source : "(unnamed)",
                           i, ids[i], w->tok.vocab_size);
    if (!(src = find_source(w, source)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    if (n == 0)
        return 0;
    if (w->buf_n == w->shard_tokens && (rc = flush_shard(w)) < 0)
        goto fail;
    ZT_TRY(reserve_starts(w, w->n_starts + 2)); /* + 2: this start and flush's sentinel */
    w->starts[w->n_starts++] = w->buf_n;
    if ((rc = put_ids(w, ids, n)) < 0 || (rc = put_ids(w, &sep, 1)) < 0)
        goto fail;
    src->tokens += (uint64_t)n + 1;
    src->docs++;
    w->total_tokens += (uint64_t)n + 1;
    w->total_docs++;
    return 0;
fail:
    w->failed = 1;
    return rc;
}

static cJSON *manifest_json(const zt_token_writer *w)
{
    cJSON *m = cJSON_CreateObject(), *t, *arr, *o;
    double src_bytes = 0;
    char hex[17], name[32];
    if (!m)
        return NULL;
    cJSON_AddStringToObject(m, "format", FORMAT_NAME);
    cJSON_AddNumberToObject(m, "version", VERSION);
    t = cJSON_AddObjectToObject(m, "tokenizer");
    if (!t)
        goto fail;
    cJSON_AddStringToObject(t, "type", w->tok.type);
    cJSON_AddStringToObject(t, "model_file", w->tok.model_file);
    cJSON_AddNumberToObject(t, "vocab_size", w->tok.vocab_size);
    cJSON_AddBoolToObject(t, "lower_case", w->tok.lower_case != 0);
    {
        const int32_t ids[5] = {w->tok.pad_id, w->tok.unk_id, w->tok.cls_id, w->tok.sep_id,
                                w->tok.mask_id};
        for (int i = 0; i < 5; i++)
            if (ids[i] >= 0)
                cJSON_AddNumberToObject(t, special_names[i], ids[i]);
            else
                cJSON_AddNullToObject(t, special_names[i]);
    }
    /* the end token span corruption appends: the separator (written for readers' sake) */
    cJSON_AddNumberToObject(t, "eos_id", w->tok.sep_id);
    if (w->tok.hf_class[0])
        cJSON_AddStringToObject(t, "hf_class", w->tok.hf_class);
    if (!(arr = cJSON_AddArrayToObject(m, "shards")))
        goto fail;
    for (int k = 0; k < w->n_shards; k++) {
        if (!(o = cJSON_CreateObject()))
            goto fail;
        cJSON_AddItemToArray(arr, o);
        snprintf(name, sizeof name, "shard-%05d.zts", k);
        snprintf(hex, sizeof hex, "%016" PRIx64, w->shards[k].hash);
        cJSON_AddStringToObject(o, "file", name);
        cJSON_AddNumberToObject(o, "tokens", (double)w->shards[k].tokens);
        cJSON_AddNumberToObject(o, "docs", (double)w->shards[k].docs);
        cJSON_AddNumberToObject(o, "bytes", (double)w->shards[k].bytes);
        cJSON_AddStringToObject(o, "xxh64", hex);
    }
    if (!(arr = cJSON_AddArrayToObject(m, "sources")))
        goto fail;
    for (size_t i = 0; i < w->n_sources; i++) {
        const source_rec *s = &w->sources[i];
        if (!(o = cJSON_CreateObject()))
            goto fail;
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "file", s->name);
        if (s->bytes >= 0)
            cJSON_AddNumberToObject(o, "bytes", (double)s->bytes);
        else
            cJSON_AddNullToObject(o, "bytes");
        cJSON_AddNumberToObject(o, "tokens", (double)s->tokens);
        cJSON_AddNumberToObject(o, "docs", (double)s->docs);
        src_bytes += s->bytes > 0 ? (double)s->bytes : 0;
    }
    if (!(o = cJSON_AddObjectToObject(m, "totals")))
        goto fail;
    cJSON_AddNumberToObject(o, "tokens", (double)w->total_tokens);
    cJSON_AddNumberToObject(o, "docs", (double)w->total_docs);
    cJSON_AddNumberToObject(o, "shards", w->n_shards);
    cJSON_AddNumberToObject(o, "source_bytes", src_bytes);
    return m;
fail:
    cJSON_Delete(m);
    return NULL;
}

int zt_token_writer_finish(zt_token_writer *w)
{
    char *path = NULL, *text = NULL;
    cJSON *m = NULL;
    int rc;
    ZT_TRY(writer_usable(w, "zt_token_writer_finish"));
    if (w->buf_n && (rc = flush_shard(w)) < 0)
        goto fail;
    if (!(m = manifest_json(w)) || !(text = cJSON_Print(m)) ||
        !(path = malloc(strlen(w->dir) + sizeof "/manifest.json"))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto fail;
    }
    sprintf(path, "%s/manifest.json", w->dir);
    {
        const void *parts[2] = {text, "\n"};
        size_t lens[2] = {strlen(text), 1};
        w->manifest_written = 1; /* as in flush_shard: a late failure may leave it in place */
        if ((rc = zt_file_write_atomic(path, parts, lens, 2)) < 0)
            goto fail;
    }
    w->finished = 1;
    rc = 0;
    goto out;
fail:
    w->failed = 1;
out:
    free(path);
    free(text);
    cJSON_Delete(m);
    return rc;
}

void zt_token_writer_destroy(zt_token_writer *w)
{
    char path[4096];
    if (!w)
        return;
    if (!w->finished) {
        if (w->manifest_written) {
            snprintf(path, sizeof path, "%s/manifest.json", w->dir);
            unlink(path);
        }
        for (int k = 0; k < w->n_shards; k++) {
            shard_path(w->dir, k, path, sizeof path);
            unlink(path);
        }
    }
    zt_dirs_made_release(&w->created, !w->finished);
    for (size_t i = 0; i < w->n_sources; i++)
        free(w->sources[i].name);
    free(w->sources);
    free(w->shards);
    free(w->starts);
    zt_mem_free(w->buf, (size_t)w->buf_cap * (size_t)w->id_bytes, ZT_MEM_IO);
    free(w->dir);
    free(w);
}

/* ======================================================================================
 * reader
 * ====================================================================================== */

typedef struct shard {
    char *path;
    void *map;
    size_t size;
    const void *tokens;         /* n_tokens ids, id_bytes each */
    const uint64_t *docs;       /* n_docs + 1 entries */
    uint64_t n_tokens, n_docs;
    uint64_t start;             /* stream position of the first token */
    uint64_t hash;              /* from the manifest */
    dev_t dev;                  /* the file's identity: no shard may be listed twice */
    ino_t ino;
} shard;

struct zt_token_data {
    zt_token_data_info info;
    int id_bytes;
    shard *s;
    char *manifest;            /* its path, for messages (tokens.h) */
};

#define BAD(...) zt_fail(ZT_E_FORMAT, __VA_ARGS__)

/* A JSON number that is an exact integer in [lo, hi], or why it is not. */
static const char *get_int(const cJSON *v, double lo, double hi, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return v ? "is not a number" : "is missing";
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return "is out of range";
    if (v->valuedouble != (double)(int64_t)v->valuedouble)
        return "is not an integer";
    *out = (uint64_t)(int64_t)v->valuedouble;
    return NULL;
}

static const cJSON *field(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int read_text(const char *path, char **out, size_t *len)
{
    int rc = zt_file_read_all(path, MANIFEST_MAX, out, len);
    if (rc == -ENOENT)
        zt_fail(rc, "%s: %s (not a prepared dataset: the manifest is written last, so a "
                    "failed or unfinished run has none)", path, strerror(ENOENT));
    return rc;
}

static int parse_tokenizer(const cJSON *t, const char *mpath, zt_tokenizer_info *tok)
{
    const char *const *id_names = special_names;
    int32_t *ids[5] = {&tok->pad_id, &tok->unk_id, &tok->cls_id, &tok->sep_id, &tok->mask_id};
    int32_t vals[5];
    int a, b;
    const cJSON *type = field(t, "type"), *model = field(t, "model_file"),
                *lower = field(t, "lower_case");
    const char *why;
    uint64_t v;
    if (!cJSON_IsObject(t))
        return BAD("%s: \"tokenizer\" is missing or not an object", mpath);
    if (!cJSON_IsString(type) || !type->valuestring[0] ||
        strlen(type->valuestring) >= sizeof tok->type)
        return BAD("%s: tokenizer.type must be a non-empty string of less than %zu bytes", mpath,
                   sizeof tok->type);
    if (!cJSON_IsString(model) || strlen(model->valuestring) >= sizeof tok->model_file)
        return BAD("%s: tokenizer.model_file must be a string of less than %zu bytes", mpath,
                   sizeof tok->model_file);
    if (!cJSON_IsBool(lower))
        return BAD("%s: tokenizer.lower_case must be true or false", mpath);
    strcpy(tok->type, type->valuestring);
    strcpy(tok->model_file, model->valuestring);
    tok->lower_case = cJSON_IsTrue(lower);
    if ((why = get_int(field(t, "vocab_size"), 1, INT32_MAX, &v)))
        return BAD("%s: tokenizer.vocab_size %s (must be an integer in [1, 2^31))", mpath, why);
    tok->vocab_size = (int)v;
    for (int i = 0; i < 5; i++) {
        if (optional_special(i) && cJSON_IsNull(field(t, id_names[i]))) {
            *ids[i] = vals[i] = -1;
            continue;
        }
        if ((why = get_int(field(t, id_names[i]), 0, tok->vocab_size - 1, &v)))
            return BAD("%s: tokenizer.%s %s (must be an integer in [0, vocab_size %d)%s)",
                       mpath, id_names[i], why, tok->vocab_size,
                       optional_special(i) ? ", or null" : "");
        *ids[i] = vals[i] = (int32_t)v;
    }
    if (special_clash(vals, &a, &b))
        return BAD("%s: tokenizer.%s and tokenizer.%s are both %" PRId32 " (the five special "
                   "tokens need five different ids)", mpath, id_names[a], id_names[b], vals[a]);
    if (field(t, "eos_id") && (get_int(field(t, "eos_id"), 0, tok->vocab_size - 1, &v) ||
                               (int32_t)v != tok->sep_id))
        return BAD("%s: tokenizer.eos_id must equal tokenizer.sep_id %" PRId32 " (the separator "
                   "is the end token)", mpath, tok->sep_id);
    {
        const cJSON *hf = field(t, "hf_class");
        tok->hf_class[0] = '\0';
        if (hf && (!cJSON_IsString(hf) || strlen(hf->valuestring) >= sizeof tok->hf_class))
            return BAD("%s: tokenizer.hf_class must be a string of less than %zu bytes", mpath,
                       sizeof tok->hf_class);
        if (hf)
            strcpy(tok->hf_class, hf->valuestring);
    }
    return 0;
}

static int parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (strlen(s) != 16)
        return -1;
    for (int i = 0; i < 16; i++) {
        int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* Opens, maps and checks one shard against its manifest entry. */
static int open_shard(zt_token_data *d, int k, const char *dir, const char *mpath,
                      const cJSON *entry)
{
    shard *s = &d->s[k];
    const cJSON *file = field(entry, "file");
    const char *why, *name;
    uint64_t m_tokens, m_docs, m_bytes;
    shard_header h;
    struct stat sb;
    int fd, rc = 0;

    if (!cJSON_IsObject(entry))
        return BAD("%s: shards[%d] is not an object", mpath, k);
    if (!cJSON_IsString(file) || !file->valuestring[0] || strchr(file->valuestring, '/') ||
        !strcmp(file->valuestring, ".") || !strcmp(file->valuestring, ".."))
        return BAD("%s: shards[%d].file must be a plain file name in the folder", mpath, k);
    name = file->valuestring;
    if ((why = get_int(field(entry, "tokens"), 1, EXACT_MAX, &m_tokens)))
        return BAD("%s: shards[%d].tokens %s (must be a positive integer)", mpath, k, why);
    if ((why = get_int(field(entry, "docs"), 0, EXACT_MAX, &m_docs)))
        return BAD("%s: shards[%d].docs %s", mpath, k, why);
    if ((why = get_int(field(entry, "bytes"), 0, EXACT_MAX, &m_bytes)))
        return BAD("%s: shards[%d].bytes %s", mpath, k, why);
    if (!cJSON_IsString(field(entry, "xxh64")) ||
        parse_hex64(field(entry, "xxh64")->valuestring, &s->hash) < 0)
        return BAD("%s: shards[%d].xxh64 must be 16 lower-case hex digits", mpath, k);
    if (!(s->path = malloc(strlen(dir) + strlen(name) + 2)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    sprintf(s->path, "%s/%s", dir, name);

    if ((fd = zt_open_regular(s->path, 0)) < 0)
        return fd == ZT_E_FORMAT ? fd : zt_fail(fd, "%s: %s (listed in %s)", s->path,
                                                 strerror(-fd), mpath);
    if (fstat(fd, &sb) != 0) {
        rc = zt_fail(-errno, "%s: fstat: %s", s->path, strerror(errno));
        goto out;
    }
    if ((uint64_t)sb.st_size < HEADER_BYTES) {
        rc = BAD("%s: truncated: %lld bytes, less than the %u-byte header", s->path,
                 (long long)sb.st_size, HEADER_BYTES);
        goto out;
    }
    s->size = (size_t)sb.st_size;
    s->dev = sb.st_dev;
    s->ino = sb.st_ino;
    s->map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, fd, 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        rc = zt_fail(-errno, "%s: mmap: %s", s->path, strerror(errno));
        goto out;
    }
    memcpy(&h, s->map, sizeof h);
    if (memcmp(h.magic, MAGIC, 8) != 0) {
        rc = BAD("%s: bad magic (not a zerotrain token shard)", s->path);
        goto out;
    }
    if (h.version != VERSION) {
        rc = BAD("%s: format version %" PRIu32 ", this build reads version %u", s->path,
                 h.version, VERSION);
        goto out;
    }
    if (h.vocab_size != (uint32_t)d->info.tok.vocab_size || h.sep_id != d->info.tok.sep_id) {
        rc = BAD("%s: vocab_size %" PRIu32 " and sep_id %" PRId32 " differ from the manifest's "
                 "%d and %" PRId32, s->path, h.vocab_size, h.sep_id, d->info.tok.vocab_size,
                 d->info.tok.sep_id);
        goto out;
    }
    if (h.id_bytes != (uint32_t)d->id_bytes) {
        rc = BAD("%s: id width %" PRIu32 " bytes, expected %d for vocab_size %d", s->path,
                 h.id_bytes, d->id_bytes, d->info.tok.vocab_size);
        goto out;
    }
    if (h.n_tokens != m_tokens || h.n_docs != m_docs) {
        rc = BAD("%s: %" PRIu64 " tokens and %" PRIu64 " docs, the manifest says %" PRIu64
                 " and %" PRIu64, s->path, h.n_tokens, h.n_docs, m_tokens, m_docs);
        goto out;
    }
    /* m_tokens, m_docs < 2^53: none of the sums below overflow */
    if (h.tokens_offset != HEADER_BYTES ||
        h.docs_offset != align8(HEADER_BYTES + h.n_tokens * h.id_bytes) ||
        h.file_size != h.docs_offset + (h.n_docs + 1) * 8) {
        rc = BAD("%s: inconsistent header (tokens_offset %" PRIu64 ", docs_offset %" PRIu64
                 ", file_size %" PRIu64 " for %" PRIu64 " tokens and %" PRIu64 " docs)",
                 s->path, h.tokens_offset, h.docs_offset, h.file_size, h.n_tokens, h.n_docs);
        goto out;
    }
    if (h.file_size != (uint64_t)sb.st_size || m_bytes != (uint64_t)sb.st_size) {
        rc = BAD("%s: %s: the file has %lld bytes, the header says %" PRIu64 " and the "
                 "manifest %" PRIu64, s->path,
                 (uint64_t)sb.st_size < h.file_size ? "truncated" : "wrong size",
                 (long long)sb.st_size, h.file_size, m_bytes);
        goto out;
    }
    s->n_tokens = h.n_tokens;
    s->n_docs = h.n_docs;
    s->tokens = (const char *)s->map + HEADER_BYTES;
    s->docs = (const uint64_t *)(const void *)((const char *)s->map + h.docs_offset);
    if (s->docs[s->n_docs] != s->n_tokens) {
        rc = BAD("%s: the document table ends with %" PRIu64 ", not the token count %" PRIu64,
                 s->path, s->docs[s->n_docs], s->n_tokens);
        goto out;
    }
    if (k == 0 && (s->n_docs == 0 || s->docs[0] != 0)) {
        rc = BAD("%s: the first shard does not start with a document", s->path);
        goto out;
    }
out:
    close(fd);
    return rc;
}

typedef struct shard_id { dev_t dev; ino_t ino; int k; } shard_id;

static int cmp_shard_id(const void *pa, const void *pb)
{
    const shard_id *a = pa, *b = pb;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->ino != b->ino)
        return a->ino < b->ino ? -1 : 1;
    return a->k - b->k;
}

/* Refuses a manifest that lists one file twice, by the same name or through a link: its
 * tokens would be read twice, and every per-entry check would still pass. */
static int check_distinct(const zt_token_data *d, const char *mpath)
{
    const int n = d->info.n_shards;
    shard_id *v;
    int rc = 0;
    if (n < 2)
        return 0;
    if (!(v = malloc(sizeof *v * (size_t)n)))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    for (int k = 0; k < n; k++)
        v[k] = (shard_id){d->s[k].dev, d->s[k].ino, k};
    qsort(v, (size_t)n, sizeof *v, cmp_shard_id);
    for (int i = 1; i < n && rc == 0; i++)
        if (v[i].dev == v[i - 1].dev && v[i].ino == v[i - 1].ino) {
            const char *a = d->s[v[i - 1].k].path, *b = d->s[v[i].k].path;
            int same = strcmp(a, b) == 0;
            rc = BAD("%s: shards[%d] and shards[%d] are the same file (%s%s%s): a shard may be "
                     "listed once", mpath, v[i - 1].k, v[i].k, a, same ? "" : " = ",
                     same ? "" : b);
        }
    free(v);
    return rc;
}

static uint32_t token_at(const zt_token_data *d, const shard *s, uint64_t i)
{
    return d->id_bytes == 2 ? ((const uint16_t *)s->tokens)[i] : ((const uint32_t *)s->tokens)[i];
}

/* The token at stream position pos (pos < n_tokens). */
static uint32_t stream_token(const zt_token_data *d, int k, uint64_t pos)
{
    while (pos < d->s[k].start)
        k--;
    return token_at(d, &d->s[k], pos - d->s[k].start);
}

static int verify_shard(const zt_token_data *d, int k)
{
    const shard *s = &d->s[k];
    const uint32_t vocab = (uint32_t)d->info.tok.vocab_size, sep = (uint32_t)d->info.tok.sep_id;
    uint64_t h = XXH64(s->map, s->size, 0);
    if (h != s->hash)
        return BAD("%s: checksum mismatch: xxh64 %016" PRIx64 ", the manifest says %016" PRIx64
                   " (the file is corrupt)", s->path, h, s->hash);
    for (uint64_t i = 0; i < s->n_tokens; i++) {
        uint32_t v = token_at(d, s, i);
        if (v >= vocab)
            return BAD("%s: token %" PRIu64 " = %" PRIu32 " >= vocab_size %" PRIu32, s->path, i,
                       v, vocab);
    }
    for (uint64_t j = 0; j < s->n_docs; j++) {
        uint64_t at = s->docs[j], pos = s->start + at;
        if ((j > 0 && at <= s->docs[j - 1]) || at >= s->n_tokens)
            return BAD("%s: document table entry %" PRIu64 " = %" PRIu64 " is not increasing "
                       "or not below %" PRIu64, s->path, j, at, s->n_tokens);
        if (pos > 0 && stream_token(d, k, pos - 1) != sep)
            return BAD("%s: document %" PRIu64 " starts at token %" PRIu64 " but the token "
                       "before it is not sep_id %" PRIu32, s->path, j, at, sep);
    }
    if (k == d->info.n_shards - 1 && token_at(d, s, s->n_tokens - 1) != sep)
        return BAD("%s: the stream does not end with sep_id %" PRIu32, s->path, sep);
    return 0;
}

int zt_token_data_open(const char *dir, int verify, zt_token_data **out)
{
    zt_token_data *d = NULL;
    char *mpath = NULL, *text = NULL;
    cJSON *m = NULL;
    const cJSON *shards, *totals, *sources, *fmt;
    const char *why;
    uint64_t t_tokens, t_docs, t_shards, sum_tokens = 0, sum_docs = 0, ver;
    size_t len = 0;
    int rc, n;

    if (!out)
        return zt_fail(ZT_E_INVAL, "zt_token_data_open: out is NULL");
    *out = NULL;
    if (!dir || !dir[0])
        return zt_fail(ZT_E_INVAL, "zt_token_data_open: dir is empty");
    if (!(mpath = malloc(strlen(dir) + sizeof "/manifest.json")))
        return zt_fail(ZT_E_NOMEM, "out of memory");
    sprintf(mpath, "%s/manifest.json", dir);
    if ((rc = read_text(mpath, &text, &len)) < 0)
        goto fail;
    if (!(m = cJSON_ParseWithLength(text, len))) {
        const char *at = cJSON_GetErrorPtr();
        rc = BAD("%s: not valid JSON (at byte %ld)", mpath,
                 at && at >= text && at <= text + len ? (long)(at - text) : -1L);
        goto fail;
    }
    if (!(d = calloc(1, sizeof *d))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto fail;
    }
    fmt = field(m, "format");
    if (!cJSON_IsObject(m) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT_NAME)) {
        rc = BAD("%s: not a zerotrain token manifest (\"format\" is not \"%s\")", mpath,
                 FORMAT_NAME);
        goto fail;
    }
    if ((why = get_int(field(m, "version"), 0, EXACT_MAX, &ver)) || ver != VERSION) {
        rc = BAD("%s: version %s, this build reads version %u", mpath,
                 why ? why : "is unknown", VERSION);
        goto fail;
    }
    if ((rc = parse_tokenizer(field(m, "tokenizer"), mpath, &d->info.tok)) < 0)
        goto fail;
    d->id_bytes = id_bytes_for(d->info.tok.vocab_size);
    shards = field(m, "shards");
    sources = field(m, "sources");
    totals = field(m, "totals");
    if (!cJSON_IsArray(shards) || !cJSON_IsArray(sources) || !cJSON_IsObject(totals)) {
        rc = BAD("%s: \"shards\" and \"sources\" must be arrays and \"totals\" an object", mpath);
        goto fail;
    }
    if ((n = cJSON_GetArraySize(shards)) > 0 && !(d->s = calloc((size_t)n, sizeof *d->s))) {
        rc = zt_fail(ZT_E_NOMEM, "out of memory");
        goto fail;
    }
    d->info.n_shards = n;
    for (int k = 0; k < n; k++) {
        if ((rc = open_shard(d, k, dir, mpath, cJSON_GetArrayItem(shards, k))) < 0)
            goto fail;
        d->s[k].start = sum_tokens;
        sum_tokens += d->s[k].n_tokens;
        sum_docs += d->s[k].n_docs;
    }
    if ((rc = check_distinct(d, mpath)) < 0)
        goto fail;
    if ((why = get_int(field(totals, "tokens"), 0, EXACT_MAX, &t_tokens)) ||
        (why = get_int(field(totals, "docs"), 0, EXACT_MAX, &t_docs)) ||
        (why = get_int(field(totals, "shards"), 0, EXACT_MAX, &t_shards))) {
        rc = BAD("%s: totals.tokens, .docs or .shards %s", mpath, why);
        goto fail;
    }
    if (t_tokens != sum_tokens || t_docs != sum_docs || t_shards != (uint64_t)n) {
        rc = BAD("%s: totals (%" PRIu64 " tokens, %" PRIu64 " docs, %" PRIu64 " shards) differ "
                 "from the shards' sums (%" PRIu64 ", %" PRIu64 ", %d)", mpath, t_tokens, t_docs,
                 t_shards, sum_tokens, sum_docs, n);
        goto fail;
    }
    d->info.n_tokens = sum_tokens;
    d->info.n_docs = sum_docs;
    for (int k = 0; verify && k < n; k++)
        if ((rc = verify_shard(d, k)) < 0)
            goto fail;
    d->manifest = mpath;
    mpath = NULL;
    *out = d;
    d = NULL;
    rc = 0;
fail:
    zt_token_data_close(d);
    cJSON_Delete(m);
    free(text);
    free(mpath);
    return rc;
}

const char *zt_token_data_manifest(const zt_token_data *d)
{
    return d && d->manifest ? d->manifest : "the token data";
}

void zt_token_data_close(zt_token_data *d)
{
    if (!d)
        return;
    for (int k = 0; k < d->info.n_shards; k++) {
        if (d->s[k].map)
            munmap(d->s[k].map, d->s[k].size);
        free(d->s[k].path);
    }
    free(d->s);
    free(d->manifest);
    free(d);
}

int zt_token_data_info_get(const zt_token_data *d, zt_token_data_info *out)
{
    if (!d || !out)
        return zt_fail(ZT_E_INVAL, "zt_token_data_info_get: NULL argument");
    *out = d->info;
    return 0;
}

int zt_token_data_read(const zt_token_data *d, uint64_t start, size_t n, int32_t *out)
{
    const uint32_t vocab = d ? (uint32_t)d->info.tok.vocab_size : 0;
    int lo, hi;
    if (!d || (n && !out))
        return zt_fail(ZT_E_INVAL, "zt_token_data_read: NULL argument");
    if (start > d->info.n_tokens || n > d->info.n_tokens - start)
        return zt_fail(ZT_E_RANGE, "zt_token_data_read: tokens [%" PRIu64 ", %" PRIu64 ") are "
                       "outside the stream of %" PRIu64, start, start + (uint64_t)n,
                       d->info.n_tokens);
    if (n == 0)
        return 0;
    /* the last shard starting at or before start */
    lo = 0;
    hi = d->info.n_shards - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (d->s[mid].start <= start)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int k = lo; n; k++) {
        const shard *s = &d->s[k];
        uint64_t off = start - s->start;
        size_t m = s->n_tokens - off < n ? (size_t)(s->n_tokens - off) : n;
        uint32_t bad = 0;
        if (d->id_bytes == 2) {
            const uint16_t *src = (const uint16_t *)s->tokens + off;
            for (size_t i = 0; i < m; i++) {
                out[i] = src[i];
                bad |= (uint32_t)(src[i] >= vocab);
            }
        } else {
            const uint32_t *src = (const uint32_t *)s->tokens + off;
            for (size_t i = 0; i < m; i++) {
                out[i] = (int32_t)src[i];
                bad |= (uint32_t)(src[i] >= vocab);
            }
        }
        if (bad)
            for (size_t i = 0; i < m; i++)
                if ((uint32_t)out[i] >= vocab)
                    return zt_fail(ZT_E_RANGE, "%s: token %" PRIu64 " = %" PRIu32 " >= vocab_size "
                                   "%" PRIu32 " (the shard is corrupt)", s->path, off + i,
                                   (uint32_t)out[i], vocab);
        out += m;
        start += m;
        n -= m;
    }
    return 0;
}
