/* test_tokens.c - cmocka tests of the token-data writer and reader (data/tokens.c): round trips
 * across small shards, spans crossing shards, 16- and 32-bit ids, and a table of damaged
 * datasets (each must fail with the exact code and name the file). Works in a private temp
 * folder; it does not test tokenizers (test_wordpiece.c, test_prepare.sh do). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "zerotrain.h"

static char tmpdir[256];

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d))) {
        struct stat sb;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

static int setup(void **state)
{
    const char *base = getenv("TMPDIR");
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/zt_tok_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    remove_tree(tmpdir);
    return 0;
}

static void tmp_path(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmpdir, name);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static zt_tokenizer_info make_tok(int vocab)
{
    zt_tokenizer_info t;
    memset(&t, 0, sizeof t);
    strcpy(t.type, "wordpiece");
    strcpy(t.model_file, "vocab.txt");
    t.vocab_size = vocab;
    t.lower_case = 1;
    t.pad_id = 0;
    t.unk_id = 1;
    t.cls_id = 2;
    t.sep_id = 3;
    t.mask_id = 4;
    return t;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Writes n_docs documents of pseudo-random lengths (0..max_len, 0 = source only) and ids in
 * [5, vocab) into dir; returns the expected stream (malloc'd) and its length. */
static int32_t *make_dataset(const char *dir, int vocab, uint64_t shard_tokens, int n_docs,
                             int max_len, uint64_t seed, size_t *n_stream, uint64_t *docs_out)
{
    zt_tokenizer_info tok = make_tok(vocab);
    zt_token_writer *w = NULL;
    size_t cap = (size_t)n_docs * (size_t)(max_len + 1) + 1, n = 0;
    int32_t *stream = malloc(cap * sizeof *stream), *doc = malloc(((size_t)max_len + 1) * 4);
    uint64_t docs = 0;
    char src[64];
    assert_non_null(stream);
    assert_non_null(doc);
    assert_int_equal(zt_token_writer_create(dir, &tok, shard_tokens, &w), 0);
    for (int i = 0; i < n_docs; i++) {
        size_t len = (size_t)(lcg(&seed) % (uint64_t)(max_len + 1));
        for (size_t j = 0; j < len; j++) {
            /* mostly random, sometimes the largest id */
            doc[j] = lcg(&seed) % 7 == 0 ? vocab - 1 : 5 + (int32_t)(lcg(&seed) % (uint64_t)(vocab - 5));
            stream[n++] = doc[j];
        }
        if (len) {
            stream[n++] = tok.sep_id;
            docs++;
        }
        snprintf(src, sizeof src, "source-%d.txt", i / 3);
        assert_int_equal(zt_token_writer_add(w, doc, len, src), 0);
    }
    assert_int_equal(zt_token_writer_finish(w), 0);
    zt_token_writer_destroy(w);
    free(doc);
    *n_stream = n;
    if (docs_out)
        *docs_out = docs;
    return stream;
}

static cJSON *load_manifest(const char *dir)
{
    char path[512], *text;
    FILE *fp;
    long len;
    cJSON *m;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = calloc(1, (size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    m = cJSON_Parse(text);
    free(text);
    assert_non_null(m);
    return m;
}

static void save_manifest(const char *dir, const cJSON *m)
{
    char path[512], *text = cJSON_Print(m);
    FILE *fp;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    free(text);
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* Reads the whole stream back in pieces of every length 1..17 from every start. */
static void check_stream(const zt_token_data *d, const int32_t *want, size_t n)
{
    int32_t *got = malloc((n + 1) * sizeof *got);
    assert_non_null(got);
    assert_int_equal(zt_token_data_read(d, 0, n, got), 0);
    assert_memory_equal(got, want, n * sizeof *got);
    for (size_t len = 1; len <= 17; len++)
        for (size_t a = 0; a + len <= n; a += 1 + (a % 3)) {
            memset(got, 0xff, len * sizeof *got);
            assert_int_equal(zt_token_data_read(d, a, len, got), 0);
            assert_memory_equal(got, want + a, len * sizeof *got);
        }
    assert_int_equal(zt_token_data_read(d, n, 0, got), 0);
    assert_int_equal(zt_token_data_read(d, n, 1, got), ZT_E_RANGE);
    assert_int_equal(zt_token_data_read(d, n - 1, 2, got), ZT_E_RANGE);
    assert_int_equal(zt_token_data_read(d, UINT64_MAX, 1, got), ZT_E_RANGE);
    free(got);
}

/* ---- round trips -------------------------------------------------------------------- */

static void roundtrip(int vocab, int id_bytes, uint64_t shard_tokens)
{
    char dir[512], path[600];
    size_t n;
    uint64_t docs;
    int32_t *want;
    zt_token_data *d = NULL;
    zt_token_data_info info;
    cJSON *m;
    struct stat sb;

    snprintf(dir, sizeof dir, "%s/rt-%d-%" PRIu64 "/nested", tmpdir, vocab, shard_tokens);
    want = make_dataset(dir, vocab, shard_tokens, 40, 23, (uint64_t)vocab, &n, &docs);
    assert_int_equal(zt_token_data_open(dir, 1, &d), 0);
    assert_int_equal(zt_token_data_info_get(d, &info), 0);
    assert_int_equal(info.n_tokens, n);
    assert_int_equal(info.n_docs, docs);
    const uint64_t per = shard_tokens ? shard_tokens : 64ull << 20; /* 0 = the default */
    assert_int_equal(info.n_shards, (int)((n + per - 1) / per));
    assert_string_equal(info.tok.type, "wordpiece");
    assert_string_equal(info.tok.model_file, "vocab.txt");
    assert_int_equal(info.tok.vocab_size, vocab);
    assert_int_equal(info.tok.lower_case, 1);
    assert_int_equal(info.tok.sep_id, 3);
    assert_int_equal(info.tok.mask_id, 4);
    check_stream(d, want, n);
    zt_token_data_close(d);

    /* shard sizes: full shards of shard_tokens, then the rest; file size from id width */
    m = load_manifest(dir);
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(m, "shards"), *s;
    uint64_t sum = 0, sum_docs = 0;
    int k = 0;
    cJSON_ArrayForEach(s, shards) {
        uint64_t t = (uint64_t)num(s, "tokens"), nd = (uint64_t)num(s, "docs");
        snprintf(path, sizeof path, "%s/%s", dir,
                 cJSON_GetObjectItemCaseSensitive(s, "file")->valuestring);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((uint64_t)sb.st_size,
                         ((64 + t * (uint64_t)id_bytes + 7) & ~7ull) + (nd + 1) * 8);
        assert_int_equal((uint64_t)num(s, "bytes"), (uint64_t)sb.st_size);
        if (k < info.n_shards - 1)
            assert_int_equal(t, per);
        sum += t;
        sum_docs += nd;
        k++;
    }
    assert_int_equal(sum, n);
    assert_int_equal(sum_docs, docs);
    const cJSON *totals = cJSON_GetObjectItemCaseSensitive(m, "totals");
    assert_int_equal((uint64_t)num(totals, "tokens"), n);
    assert_int_equal((uint64_t)num(totals, "docs"), docs);
    /* sources: 40 documents from 14 names, first-seen order, tokens add up */
    const cJSON *sources = cJSON_GetObjectItemCaseSensitive(m, "sources");
    assert_int_equal(cJSON_GetArraySize(sources), 14);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sources, 0), "file")
                            ->valuestring, "source-0.txt");
    sum = 0;
    cJSON_ArrayForEach(s, sources) {
        sum += (uint64_t)num(s, "tokens");
        assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(s, "bytes")));
    }
    assert_int_equal(sum, n);
    cJSON_Delete(m);
    free(want);
}

static void test_roundtrip_u16(void **state)
{
    (void)state;
    roundtrip(1000, 2, 7);   /* many shards, documents longer than a shard */
    roundtrip(65536, 2, 64); /* the largest vocabulary with 16-bit ids */
    roundtrip(300, 2, 0);    /* default shard size: one shard */
}

static void test_roundtrip_u32(void **state)
{
    (void)state;
    roundtrip(65537, 4, 5);
    roundtrip(200000, 4, 1);  /* one token per shard */
}

static void test_empty_dataset(void **state)
{
    char dir[512];
    zt_tokenizer_info tok = make_tok(100);
    zt_token_writer *w = NULL;
    zt_token_data *d = NULL;
    zt_token_data_info info;
    int32_t x;
    (void)state;
    tmp_path(dir, sizeof dir, "empty");
    assert_int_equal(zt_token_writer_create(dir, &tok, 10, &w), 0);
    assert_int_equal(zt_token_writer_add(w, NULL, 0, "nothing.txt"), 0);
    assert_int_equal(zt_token_writer_finish(w), 0);
    zt_token_writer_destroy(w);
    assert_int_equal(zt_token_data_open(dir, 1, &d), 0);
    assert_int_equal(zt_token_data_info_get(d, &info), 0);
    assert_int_equal(info.n_tokens, 0);
    assert_int_equal(info.n_shards, 0);
    assert_int_equal(zt_token_data_read(d, 0, 0, &x), 0);
    assert_int_equal(zt_token_data_read(d, 0, 1, &x), ZT_E_RANGE);
    zt_token_data_close(d);
}

/* ---- writer ------------------------------------------------------------------------- */

static void test_writer_errors(void **state)
{
    char dir[512], path[600];
    zt_tokenizer_info tok = make_tok(100);
    zt_token_writer *w = NULL;
    int32_t ids[3] = {5, 100, 6};
    (void)state;
    tmp_path(dir, sizeof dir, "werr");

    /* invalid tokenizer info: nothing is created */
    tok.mask_id = 100;
    assert_int_equal(zt_token_writer_create(dir, &tok, 10, &w), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "mask_id 100"));
    assert_null(w);
    assert_false(exists(dir));
    tok = make_tok(100);
    tok.mask_id = tok.sep_id; /* two special tokens that are one id */
    assert_int_equal(zt_token_writer_create(dir, &tok, 10, &w), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "sep_id and mask_id are both 3"));
    assert_null(w);
    assert_false(exists(dir));
    tok = make_tok(100);
    tok.type[0] = '\0';
    assert_int_equal(zt_token_writer_create(dir, &tok, 10, &w), ZT_E_CONFIG);
    tok = make_tok(100);
    assert_int_equal(zt_token_writer_create(dir, &tok, 1ull << 41, &w), ZT_E_CONFIG);
    assert_int_equal(zt_token_writer_create(dir, NULL, 10, &w), ZT_E_INVAL);

    /* an id >= vocab_size is refused, names the source, and appends nothing */
    assert_int_equal(zt_token_writer_create(dir, &tok, 2, &w), 0);
    assert_int_equal(zt_token_writer_add(w, ids, 3, "bad.txt"), ZT_E_RANGE);
    assert_non_null(strstr(zt_last_error(), "bad.txt"));
    assert_non_null(strstr(zt_last_error(), "100"));
    ids[1] = -1;
    assert_int_equal(zt_token_writer_add(w, ids, 3, "bad.txt"), ZT_E_RANGE);
    ids[1] = 7;
    assert_int_equal(zt_token_writer_add(w, ids, 3, "good.txt"), 0);
    assert_int_equal(zt_token_writer_add(w, NULL, 2, "x"), ZT_E_INVAL);
    /* 4 tokens with shard_tokens 2: one shard is already on disk */
    snprintf(path, sizeof path, "%s/shard-00000.zts", dir);
    assert_true(exists(path));
    /* destroy without finish removes the shards and the folder it created */
    zt_token_writer_destroy(w);
    assert_false(exists(path));
    assert_false(exists(dir));
    zt_token_writer_destroy(NULL);

    /* finish twice, add after finish */
    assert_int_equal(zt_token_writer_create(dir, &tok, 2, &w), 0);
    assert_int_equal(zt_token_writer_add(w, ids, 3, "good.txt"), 0);
    assert_int_equal(zt_token_writer_finish(w), 0);
    assert_int_equal(zt_token_writer_finish(w), ZT_E_INVAL);
    assert_int_equal(zt_token_writer_add(w, ids, 3, "good.txt"), ZT_E_INVAL);
    zt_token_writer_destroy(w); /* finished: everything stays */
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    assert_true(exists(path));

    /* a new writer on the folder takes the old manifest away at once ... */
    assert_int_equal(zt_token_writer_create(dir, &tok, 2, &w), 0);
    assert_false(exists(path));
    /* ... and the folder it did not create stays when it is destroyed unfinished */
    zt_token_writer_destroy(w);
    assert_true(exists(dir));

    /* a file where the folder should be */
    tmp_path(path, sizeof path, "plainfile");
    FILE *fp = fopen(path, "w");
    fclose(fp);
    strcat(path, "/sub");
    assert_true(zt_token_writer_create(path, &tok, 2, &w) < 0);
    assert_non_null(strstr(zt_last_error(), "plainfile"));
}

static void test_source_bytes(void **state)
{
    char dir[512], src[512];
    zt_tokenizer_info tok = make_tok(100);
    zt_token_writer *w = NULL;
    int32_t ids[2] = {5, 6};
    FILE *fp;
    cJSON *m;
    (void)state;
    tmp_path(dir, sizeof dir, "srcbytes");
    tmp_path(src, sizeof src, "input.txt");
    fp = fopen(src, "w");
    fputs("hello world\n", fp);
    fclose(fp);
    assert_int_equal(zt_token_writer_create(dir, &tok, 0, &w), 0);
    assert_int_equal(zt_token_writer_add(w, ids, 2, src), 0);
    assert_int_equal(zt_token_writer_add(w, ids, 1, src), 0);
    assert_int_equal(zt_token_writer_finish(w), 0);
    zt_token_writer_destroy(w);
    m = load_manifest(dir);
    const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "sources"), 0);
    assert_int_equal((int)num(s, "bytes"), 12);
    assert_int_equal((int)num(s, "tokens"), 5);
    assert_int_equal((int)num(s, "docs"), 2);
    assert_int_equal((int)num(cJSON_GetObjectItemCaseSensitive(m, "totals"), "source_bytes"), 12);
    cJSON_Delete(m);
}

/* ---- damaged datasets --------------------------------------------------------------- */

/* A fresh 3-shard dataset (vocab 100, shard_tokens 16) in tmpdir/name. */
static void fresh(const char *name, char *dir, size_t n)
{
    size_t len;
    snprintf(dir, n, "%s/%s", tmpdir, name);
    remove_tree(dir);
    free(make_dataset(dir, 100, 16, 6, 12, 99, &len, NULL));
    assert_true(len > 32);
}

static void shard_file(const char *dir, int k, char *out, size_t n)
{
    snprintf(out, n, "%s/shard-%05d.zts", dir, k);
}

static void patch(const char *path, long off, const void *bytes, size_t n)
{
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, off, SEEK_SET), 0);
    assert_int_equal(fwrite(bytes, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* Sets the manifest's xxh64 of shard k to the file's real hash. */
static void rehash(const char *dir, int k)
{
    char path[600], hex[17];
    FILE *fp;
    long len;
    shard_file(dir, k, path, sizeof path);
    fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)len);
    assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    snprintf(hex, sizeof hex, "%016" PRIx64, (uint64_t)XXH64(buf, (size_t)len, 0));
    free(buf);
    cJSON *m = load_manifest(dir);
    cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "shards"), k);
    cJSON_ReplaceItemInObjectCaseSensitive(s, "xxh64", cJSON_CreateString(hex));
    save_manifest(dir, m);
    cJSON_Delete(m);
}

/* open must fail with code (with and without verify, or only with verify), naming `names` */
static void expect_open(const char *dir, int verify, int code, const char *names, const char *what)
{
    zt_token_data *d = (zt_token_data *)1;
    int rc = zt_token_data_open(dir, verify, &d);
    if (rc != code || !strstr(zt_last_error(), names) || !strstr(zt_last_error(), what))
        fail_msg("expected %d naming '%s' and '%s', got %d: %s", code, names, what, rc,
                 zt_last_error());
    assert_null(d);
}

static void test_flipped_byte(void **state)
{
    char dir[512], path[600];
    uint8_t b;
    zt_token_data *d = NULL;
    (void)state;
    fresh("flip", dir, sizeof dir);
    shard_file(dir, 1, path, sizeof path);
    FILE *fp = fopen(path, "rb");
    fseek(fp, 64 + 5, SEEK_SET);
    assert_int_equal(fread(&b, 1, 1, fp), 1);
    fclose(fp);
    b ^= 0x01; /* the low bit of a token: still a valid id, only the checksum can tell */
    patch(path, 64 + 5, &b, 1);
    /* the header is fine: open without verify works */
    assert_int_equal(zt_token_data_open(dir, 0, &d), 0);
    zt_token_data_close(d);
    expect_open(dir, 1, ZT_E_FORMAT, "shard-00001.zts", "checksum");
}

static void test_id_out_of_range(void **state)
{
    char dir[512], path[600];
    uint16_t big = 100;
    zt_token_data *d = NULL;
    int32_t out[16];
    (void)state;
    fresh("range", dir, sizeof dir);
    shard_file(dir, 2, path, sizeof path);
    patch(path, 64 + 2 * 3, &big, 2); /* token 3 of shard 2 */
    rehash(dir, 2);                    /* so that only the id check can catch it */
    expect_open(dir, 1, ZT_E_FORMAT, "shard-00002.zts", "token 3 = 100 >= vocab_size 100");
    /* without verify, reading the span that holds it refuses too */
    assert_int_equal(zt_token_data_open(dir, 0, &d), 0);
    assert_int_equal(zt_token_data_read(d, 0, 16, out), 0);
    assert_int_equal(zt_token_data_read(d, 30, 6, out), ZT_E_RANGE);
    assert_non_null(strstr(zt_last_error(), "shard-00002.zts: token 3 = 100"));
    zt_token_data_close(d);
}

static void test_bad_magic(void **state)
{
    char dir[512], path[600];
    (void)state;
    fresh("magic", dir, sizeof dir);
    shard_file(dir, 0, path, sizeof path);
    patch(path, 0, "ZTTOKENZ", 8);
    expect_open(dir, 0, ZT_E_FORMAT, "shard-00000.zts", "magic");
}

static void test_bad_version(void **state)
{
    char dir[512], path[600];
    uint32_t v = 2;
    (void)state;
    fresh("version", dir, sizeof dir);
    shard_file(dir, 1, path, sizeof path);
    patch(path, 8, &v, 4);
    expect_open(dir, 0, ZT_E_FORMAT, "shard-00001.zts", "version 2");
}

static void test_truncated(void **state)
{
    char dir[512], path[600];
    struct stat sb;
    (void)state;
    fresh("trunc", dir, sizeof dir);
    shard_file(dir, 1, path, sizeof path);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 8), 0);
    expect_open(dir, 0, ZT_E_FORMAT, "shard-00001.zts", "truncated");
    assert_int_equal(truncate(path, 20), 0);
    expect_open(dir, 0, ZT_E_FORMAT, "shard-00001.zts", "truncated");
}

static void test_missing_shard(void **state)
{
    char dir[512], path[600];
    (void)state;
    fresh("missing", dir, sizeof dir);
    shard_file(dir, 2, path, sizeof path);
    assert_int_equal(unlink(path), 0);
    expect_open(dir, 0, -ENOENT, "shard-00002.zts", "No such file");
}

static void test_manifest_errors(void **state)
{
    char dir[512], path[600];
    FILE *fp;
    cJSON *m;
    (void)state;
    fresh("manifest", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/manifest.json", dir);

    /* not JSON */
    fp = fopen(path, "w");
    fputs("{\"format\": \"zerotrain-tokens\", \"version\": 1,", fp);
    fclose(fp);
    expect_open(dir, 0, ZT_E_FORMAT, "manifest.json", "not valid JSON");
    fp = fopen(path, "w");
    fclose(fp);
    expect_open(dir, 0, ZT_E_FORMAT, "manifest.json", "not valid JSON");
    /* JSON, but not ours */
    fp = fopen(path, "w");
    fputs("[1, 2, 3]", fp);
    fclose(fp);
    expect_open(dir, 0, ZT_E_FORMAT, "manifest.json", "not a zerotrain token manifest");
    /* missing */
    unlink(path);
    expect_open(dir, 0, -ENOENT, "manifest.json", "not a prepared dataset");

    /* field by field */
    static const char M[] = "manifest.json", S0[] = "shard-00000.zts";
    static const struct { const char *obj, *key, *json, *file, *what; } cases[] = {
        {NULL, "version", "2", M, "version"},
        {"tokenizer", "vocab_size", "0", M, "vocab_size"},
        {"tokenizer", "vocab_size", "1.5", M, "vocab_size"},
        {"tokenizer", "mask_id", "100", M, "mask_id"},
        {"tokenizer", "sep_id", "5", S0, "sep_id"},  /* differs from the shards' header */
        {"tokenizer", "mask_id", "3", M, "tokenizer.sep_id and tokenizer.mask_id are both 3"},
        {"tokenizer", "pad_id", "1", M, "tokenizer.pad_id and tokenizer.unk_id are both 1"},
        {"tokenizer", "cls_id", "4", M, "tokenizer.cls_id and tokenizer.mask_id are both 4"},
        {"tokenizer", "pad_id", "null", M, "tokenizer.pad_id is not a number"},
        {"tokenizer", "eos_id", "2", M, "tokenizer.eos_id must equal tokenizer.sep_id 3"},
        {"tokenizer", "hf_class", "7", M, "tokenizer.hf_class must be a string"},
        {"tokenizer", "vocab_size", "70000", S0, "vocab_size"},
        {"tokenizer", "lower_case", "1", M, "lower_case"},
        {"tokenizer", "type", "\"\"", M, "type"},
        {"totals", "tokens", "1", M, "totals"},
        {"totals", "docs", "-1", M, "totals"},
        {"shard0", "file", "\"../shard-00000.zts\"", M, "plain file name"},
        {"shard0", "xxh64", "\"12\"", M, "xxh64"},
        {"shard0", "tokens", "17", S0, "the manifest says"},
        {"shard0", "bytes", "1", S0, "the manifest"},
        {NULL, "shards", "{}", M, "must be arrays"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fresh("manifest", dir, sizeof dir);
        m = load_manifest(dir);
        cJSON *o = !cases[i].obj ? m
                   : !strcmp(cases[i].obj, "shard0")
                       ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "shards"), 0)
                       : cJSON_GetObjectItemCaseSensitive(m, cases[i].obj);
        assert_non_null(o);
        if (cJSON_GetObjectItemCaseSensitive(o, cases[i].key)) /* (hf_class may be absent) */
            cJSON_ReplaceItemInObjectCaseSensitive(o, cases[i].key, cJSON_Parse(cases[i].json));
        else
            cJSON_AddItemToObject(o, cases[i].key, cJSON_Parse(cases[i].json));
        if (!strcmp(cases[i].key, "sep_id")) /* the end token is the separator */
            cJSON_ReplaceItemInObjectCaseSensitive(o, "eos_id", cJSON_Parse(cases[i].json));
        save_manifest(dir, m);
        cJSON_Delete(m);
        expect_open(dir, 0, ZT_E_FORMAT, cases[i].file, cases[i].what);
    }
}

/* The same shard listed twice (by name, or under a second name through a hard link), with
 * totals that add up: each entry agrees with its file, only the file's identity tells. */
static void test_duplicate_shard(void **state)
{
    char dir[512], a[600], b[600];
    (void)state;
    for (int link_it = 0; link_it < 2; link_it++) {
        fresh("dup", dir, sizeof dir);
        cJSON *m = load_manifest(dir), *shards = cJSON_GetObjectItemCaseSensitive(m, "shards");
        cJSON *totals = cJSON_GetObjectItemCaseSensitive(m, "totals");
        cJSON *copy = cJSON_Duplicate(cJSON_GetArrayItem(shards, 0), 1);
        int n = cJSON_GetArraySize(shards);
        if (link_it) {
            shard_file(dir, 0, a, sizeof a);
            snprintf(b, sizeof b, "%s/shard-again.zts", dir);
            assert_int_equal(link(a, b), 0);
            cJSON_ReplaceItemInObjectCaseSensitive(copy, "file", cJSON_CreateString("shard-again.zts"));
        }
        cJSON_AddItemToArray(shards, copy);
        cJSON_ReplaceItemInObjectCaseSensitive(totals, "tokens", cJSON_CreateNumber(
            num(totals, "tokens") + num(copy, "tokens")));
        cJSON_ReplaceItemInObjectCaseSensitive(totals, "docs", cJSON_CreateNumber(
            num(totals, "docs") + num(copy, "docs")));
        cJSON_ReplaceItemInObjectCaseSensitive(totals, "shards", cJSON_CreateNumber(n + 1));
        save_manifest(dir, m);
        cJSON_Delete(m);
        char what[200];
        snprintf(what, sizeof what, "shards[0] and shards[%d] are the same file", n);
        expect_open(dir, 0, ZT_E_FORMAT, "manifest.json", what);
        expect_open(dir, 0, ZT_E_FORMAT, link_it ? "shard-again.zts" : "shard-00000.zts", what);
    }
}

/* A manifest or a shard that is a FIFO is refused at once (an open would wait for a writer;
 * the alarm turns a hang into a failure), naming the file. */
static void test_fifo(void **state)
{
    char dir[512], path[600];
    (void)state;
    alarm(10);
    fresh("fifo", dir, sizeof dir);
    shard_file(dir, 1, path, sizeof path);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_open(dir, 0, ZT_E_FORMAT, "shard-00001.zts", "not a regular file (a FIFO)");
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_open(dir, 0, ZT_E_FORMAT, "manifest.json", "not a regular file (a FIFO)");
    alarm(0);
}

/* A document table that is not increasing, or a document start not after a separator. */
static void test_bad_doc_table(void **state)
{
    char dir[512], path[600];
    uint64_t docs_offset, n_docs, v;
    zt_token_data *d = NULL;
    (void)state;
    fresh("doctable", dir, sizeof dir);
    shard_file(dir, 0, path, sizeof path);
    FILE *fp = fopen(path, "rb");
    fseek(fp, 32, SEEK_SET);
    assert_int_equal(fread(&n_docs, 8, 1, fp), 1);
    fseek(fp, 48, SEEK_SET);
    assert_int_equal(fread(&docs_offset, 8, 1, fp), 1);
    fclose(fp);
    assert_true(n_docs >= 2);
    v = 5; /* document 1 "starts" at token 5, which does not follow a separator */
    patch(path, (long)(docs_offset + 8), &v, 8);
    rehash(dir, 0);
    assert_int_equal(zt_token_data_open(dir, 0, &d), 0); /* only verify reads the table */
    zt_token_data_close(d);
    expect_open(dir, 1, ZT_E_FORMAT, "shard-00000.zts", "document 1");
    v = 0;
    patch(path, (long)(docs_offset + 8), &v, 8);
    rehash(dir, 0);
    expect_open(dir, 1, ZT_E_FORMAT, "shard-00000.zts", "not increasing");
}

static void test_api_misuse(void **state)
{
    zt_token_data *d = NULL;
    zt_token_data_info info;
    int32_t x;
    (void)state;
    assert_int_equal(zt_token_data_open(NULL, 0, &d), ZT_E_INVAL);
    assert_int_equal(zt_token_data_open(tmpdir, 0, NULL), ZT_E_INVAL);
    assert_int_equal(zt_token_data_info_get(NULL, &info), ZT_E_INVAL);
    assert_int_equal(zt_token_data_read(NULL, 0, 1, &x), ZT_E_INVAL);
    zt_token_data_close(NULL);
    assert_int_equal(zt_token_writer_add(NULL, &x, 1, "a"), ZT_E_INVAL);
    assert_int_equal(zt_token_writer_finish(NULL), ZT_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_u16),
        cmocka_unit_test(test_roundtrip_u32),
        cmocka_unit_test(test_empty_dataset),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_source_bytes),
        cmocka_unit_test(test_flipped_byte),
        cmocka_unit_test(test_id_out_of_range),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_missing_shard),
        cmocka_unit_test(test_manifest_errors),
        cmocka_unit_test(test_duplicate_shard),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_bad_doc_table),
        cmocka_unit_test(test_api_misuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
