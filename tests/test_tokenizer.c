/* test_tokenizer.c - cmocka tests of tools/tokenizer.c against ids generated independently and
 * committed under tests/fixtures/tokenizers/: BERT by tests/ref/wordpiece_ref.py (a Python
 * transcription of transformers' BertTokenizer) over a WordPiece vocabulary built from the
 * Python tutorial, T5 and a BERT over SentencePiece by tests/ref/spm_ref.py (T5Tokenizer and
 * DebertaV2Tokenizer in Python over Debian's spm_encode/spm_decode) on models spm_train made.
 * Each case: input_ids, token_type_ids and decode(ids) with and without special tokens. Also
 * the round trip through tok_save, a dataset's tokenizer, and the loading errors. It links
 * the command's tokenizer objects (the tools are not a library). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../tools/tokenizer.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fixtures[512], tmpdir[256];

static char *slurp(const char *path, size_t *len)
{
    char *buf = NULL;
    if (zt_file_read_all(path, 64u << 20, &buf, len) < 0)
        return NULL;
    return buf;
}

static void put(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void copy(const char *from_dir, const char *name, const char *to_dir, const char *as)
{
    char path[1024], *b;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", from_dir, name);
    assert_non_null(b = slurp(path, &n));
    put(to_dir, as ? as : name, b, n);
    free(b);
}

static void fresh_dir(char *out, size_t n, const char *name)
{
    char cmd[1200];
    snprintf(out, n, "%s/%s", tmpdir, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(mkdir(out, 0777), 0);
}

static cJSON *load_cases(const char *fixture)
{
    char path[1024], *text;
    cJSON *c;
    snprintf(path, sizeof path, "%s/%s/cases.json", fixtures, fixture);
    assert_non_null(text = slurp(path, NULL));
    c = cJSON_Parse(text);
    free(text);
    assert_true(cJSON_IsArray(c));
    return c;
}

static int same_ids(const cJSON *want, const int32_t *got, size_t n, size_t *at)
{
    size_t i = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, want) {
        if (i >= n || (int32_t)w->valuedouble != got[i]) {
            *at = i;
            return 0;
        }
        i++;
    }
    *at = i;
    return i == n;
}

/* Every case of the fixture (lower: only those of that "lower"; -1 all) through encode and
 * decode; returns the number that differ, each printed. */
static int check_cases(tok_tokenizer *t, const cJSON *cases, int lower, int types)
{
    const cJSON *c;
    int bad = 0, k = -1;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *lo = cJSON_GetObjectItem(c, "lower"), *pair = cJSON_GetObjectItem(c, "pair"),
                    *ml = cJSON_GetObjectItem(c, "max_len"), *ss = cJSON_GetObjectItem(c, "split_special"),
                    *dec = cJSON_GetObjectItem(c, "decoded"), *decs = cJSON_GetObjectItem(c, "decoded_skip");
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        tok_encoding e = {0};
        char err[512], *d = NULL;
        size_t at;
        k++;
        if (lower >= 0 && lo && cJSON_IsTrue(lo) != lower)
            continue;
        if (tok_encode(t, text, strlen(text), pair ? pair->valuestring : NULL,
                       pair ? strlen(pair->valuestring) : 0, ml ? (size_t)ml->valuedouble : 0,
                       cJSON_IsTrue(ss) ? TOK_SPLIT_SPECIAL : 0, &e, err, sizeof err) < 0) {
            print_error("case %d: %s\n", k, err);
            bad++;
            continue;
        }
        if (!same_ids(cJSON_GetObjectItem(c, "ids"), e.ids, e.n, &at)) {
            const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "ids"), (int)at);
            print_error("case %d (\"%.40s\"): ids differ at %zu: got %d, want %d (%zu ids, want %d)\n",
                        k, text, at, at < e.n ? e.ids[at] : -1, w ? (int)w->valuedouble : -1,
                        e.n, cJSON_GetArraySize(cJSON_GetObjectItem(c, "ids")));
            bad++;
        } else if (types && !same_ids(cJSON_GetObjectItem(c, "type_ids"), e.type_ids, e.n, &at)) {
            print_error("case %d (\"%.40s\"): token_type_ids differ at %zu\n", k, text, at);
            bad++;
        }
        for (int skip = 0; skip < 2; skip++) {
            const cJSON *want = skip ? decs : dec;
            if (!want)
                continue;
            if (tok_decode(t, e.ids, e.n, skip, &d, err, sizeof err) < 0 ||
                strcmp(d, want->valuestring) != 0) {
                print_error("case %d: decode(skip_special_tokens=%d) gives \"%s\", want \"%s\"\n",
                            k, skip, d ? d : err, want->valuestring);
                bad++;
            }
            free(d);
            d = NULL;
        }
        tok_encoding_free(&e);
    }
    return bad;
}

static tok_tokenizer *load(const char *dir)
{
    tok_tokenizer *t = NULL;
    char err[1024];
    if (tok_load_folder(dir, &t, err, sizeof err) < 0)
        print_error("%s\n", err);
    assert_non_null(t);
    return t;
}

static void fixture_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", fixtures, name);
}

/* ---- against the references -------------------------------------------------------------- */

/* a folder with vocab.txt alone: BertTokenizer's defaults (do_lower_case true) */
static void test_bert_uncased(void **state)
{
    char dir[600];
    cJSON *cases = load_cases("bert");
    tok_tokenizer *t;
    tok_specials sp;
    (void)state;
    fixture_dir(dir, sizeof dir, "bert");
    t = load(dir);
    assert_string_equal(tok_hf_class(t), "BertTokenizer");
    assert_true(tok_lower_case(t));
    tok_special_ids(t, &sp);
    assert_int_equal(sp.pad, 0);
    assert_int_equal(sp.unk, 6);
    assert_int_equal(sp.cls, 7);
    assert_int_equal(sp.sep, 8);
    assert_int_equal(sp.mask, 9);
    assert_int_equal(sp.eos, -1);
    assert_string_equal(tok_id_to_token(t, 9), "[MASK]");
    assert_int_equal(tok_token_to_id(t, "[CLS]"), 7);
    assert_int_equal(tok_size(t), tok_vocab_size(t));
    assert_int_equal(check_cases(t, cases, 1, 1), 0);
    tok_free(t);
    cJSON_Delete(cases);
}

/* tokenizer_config.json: BertTokenizerFast (read as BertTokenizer), do_lower_case false */
static void test_bert_cased(void **state)
{
    static const char cfg[] = "{\"tokenizer_class\": \"BertTokenizerFast\", \"do_lower_case\": false, "
                              "\"model_max_length\": 512}";
    char dir[600], src[600];
    cJSON *cases = load_cases("bert");
    tok_tokenizer *t;
    (void)state;
    fixture_dir(src, sizeof src, "bert");
    fresh_dir(dir, sizeof dir, "cased");
    copy(src, "vocab.txt", dir, NULL);
    put(dir, "tokenizer_config.json", cfg, sizeof cfg - 1);
    t = load(dir);
    assert_false(tok_lower_case(t));
    assert_int_equal(tok_model_max_length(t), 512);
    assert_int_equal(check_cases(t, cases, 0, 1), 0);
    tok_free(t);
    cJSON_Delete(cases);
}

/* vocab.json and merges.txt alone: RobertaTokenizer's defaults (byte-level BPE, <mask> lstrip,
 * no add_prefix_space, no clean-up on decode) against tests/ref/bpe_ref.py's cases */
static void test_roberta(void **state)
{
    char dir[600];
    cJSON *cases = load_cases("roberta");
    tok_tokenizer *t;
    tok_specials sp;
    zt_tokenizer_info mi;
    (void)state;
    fixture_dir(dir, sizeof dir, "roberta");
    t = load(dir);
    assert_string_equal(tok_hf_class(t), "RobertaTokenizer");
    assert_int_equal(tok_family(t), TOK_BERT);
    assert_false(tok_lower_case(t));
    tok_special_ids(t, &sp);
    assert_int_equal(sp.cls, 0);
    assert_int_equal(sp.pad, 1);
    assert_int_equal(sp.sep, 2);
    assert_int_equal(sp.eos, 2);
    assert_int_equal(sp.unk, 3);
    assert_int_equal(sp.mask, 1999);
    assert_int_equal(tok_vocab_size(t), 2000);
    assert_int_equal(tok_size(t), 2000);
    assert_string_equal(tok_id_to_token(t, 224), "\xc4\xa0"); /* the space's byte symbol */
    assert_int_equal(tok_token_to_id(t, "<mask>"), 1999);
    tok_manifest_info(t, &mi);
    assert_string_equal(mi.type, "bpe");
    assert_string_equal(mi.model_file, "vocab.json");
    assert_int_equal(mi.cls_id, 0);
    assert_int_equal(mi.sep_id, 2);
    assert_int_equal(check_cases(t, cases, -1, 1), 0);
    tok_free(t);
    cJSON_Delete(cases);
}

/* spiece.model alone: T5Tokenizer's defaults (100 extra ids, legacy) */
static void test_t5(void **state)
{
    char dir[600];
    cJSON *cases = load_cases("t5");
    tok_tokenizer *t;
    tok_specials sp;
    zt_tokenizer_info mi;
    (void)state;
    fixture_dir(dir, sizeof dir, "t5");
    t = load(dir);
    assert_string_equal(tok_hf_class(t), "T5Tokenizer");
    assert_int_equal(tok_family(t), TOK_T5);
    tok_special_ids(t, &sp);
    assert_int_equal(sp.pad, 0);
    assert_int_equal(sp.eos, 1);
    assert_int_equal(sp.unk, 2);
    assert_int_equal(sp.cls, -1);
    assert_int_equal(sp.mask, -1);
    assert_int_equal(tok_vocab_size(t), 1000);
    assert_int_equal(tok_size(t), 1100);
    assert_int_equal(tok_token_to_id(t, "<extra_id_0>"), 1099); /* len(sp) + 99 - k */
    assert_int_equal(tok_token_to_id(t, "<extra_id_99>"), 1000);
    assert_string_equal(tok_id_to_token(t, 1098), "<extra_id_1>");
    tok_manifest_info(t, &mi);
    assert_int_equal(mi.sep_id, 1);
    assert_int_equal(mi.cls_id, -1);
    assert_string_equal(mi.model_file, "spiece.model");
    assert_int_equal(check_cases(t, cases, -1, 0), 0);
    tok_free(t);
    cJSON_Delete(cases);
}

/* spm.model with [PAD] [UNK] [CLS] [SEP] [MASK]: DebertaV2Tokenizer */
static void test_bert_spm(void **state)
{
    char dir[600];
    cJSON *cases = load_cases("bert-spm");
    tok_tokenizer *t;
    (void)state;
    fixture_dir(dir, sizeof dir, "bert-spm");
    t = load(dir);
    assert_string_equal(tok_hf_class(t), "DebertaV2Tokenizer");
    assert_int_equal(tok_family(t), TOK_BERT);
    assert_int_equal(check_cases(t, cases, -1, 1), 0);
    tok_free(t);
    cJSON_Delete(cases);
}

/* spiece.model with <pad> <unk> [CLS] [SEP] [MASK] beside a config.json of model_type albert
 * (no tokenizer_config.json, as albert-base-v2 on the hub): AlbertTokenizer, against
 * tests/ref/spm_ref.py's AlbertRef (accents, quotes, the digit-comma split, [MASK]'s lstrip) */
static void test_albert(void **state)
{
    char dir[600];
    cJSON *cases = load_cases("albert");
    tok_tokenizer *t;
    tok_specials sp;
    zt_tokenizer_info mi;
    (void)state;
    fixture_dir(dir, sizeof dir, "albert");
    t = load(dir);
    assert_string_equal(tok_hf_class(t), "AlbertTokenizer");
    assert_int_equal(tok_family(t), TOK_BERT);
    tok_special_ids(t, &sp);
    assert_int_equal(sp.pad, 0);
    assert_int_equal(sp.unk, 1);
    assert_int_equal(sp.cls, 2);
    assert_int_equal(sp.sep, 3);
    assert_int_equal(sp.mask, 4);
    tok_manifest_info(t, &mi);
    assert_string_equal(mi.model_file, "spiece.model");
    assert_int_equal(mi.lower_case, 1);
    assert_int_equal(check_cases(t, cases, -1, 1), 0);
    tok_free(t);
    cJSON_Delete(cases);
}

/* ---- save and load back ------------------------------------------------------------------ */

static void round_trip(const char *fixture, int lower, const char *const *files, int n_files,
                       const char *cls)
{
    char src[600], a[600], b[600], err[1024], name[64];
    cJSON *cases = load_cases(fixture), *cfg;
    tok_tokenizer *t, *u;
    char *text;
    fixture_dir(src, sizeof src, fixture);
    snprintf(name, sizeof name, "rt-%s-a", fixture);
    fresh_dir(a, sizeof a, name);
    snprintf(name, sizeof name, "rt-%s-b", fixture);
    fresh_dir(b, sizeof b, name);
    t = load(src);
    /* stale tokenizer files of another kind are removed */
    put(a, "tokenizer.json", "{}", 2);
    put(a, "merges.txt", "x", 1);
    assert_int_equal(tok_save(t, a, 128, err, sizeof err), 0);
    {
        char path[700];
        snprintf(path, sizeof path, "%s/tokenizer.json", a);
        assert_int_equal(access(path, F_OK), -1);
        for (int i = 0; i < n_files; i++) {
            snprintf(path, sizeof path, "%s/%s", a, files[i]);
            if (access(path, F_OK) != 0)
                fail_msg("%s was not written", path);
        }
        snprintf(path, sizeof path, "%s/tokenizer_config.json", a);
        assert_non_null(text = slurp(path, NULL));
        cfg = cJSON_Parse(text);
        free(text);
        assert_non_null(cfg);
        assert_string_equal(cJSON_GetObjectItem(cfg, "tokenizer_class")->valuestring, cls);
        assert_int_equal((int)cJSON_GetObjectItem(cfg, "model_max_length")->valuedouble, 128);
        assert_non_null(cJSON_GetObjectItem(cfg, "added_tokens_decoder"));
        cJSON_Delete(cfg);
    }
    u = load(a);
    assert_string_equal(tok_hf_class(u), cls);
    assert_int_equal(check_cases(u, cases, lower, strcmp(cls, "T5Tokenizer") != 0), 0);
    /* saving what was loaded gives the same bytes */
    assert_int_equal(tok_save(u, b, 0, err, sizeof err), 0);
    for (int i = 0; i < n_files; i++) {
        char pa[700], pb[700], *x, *y;
        size_t nx, ny;
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        assert_non_null(x = slurp(pa, &nx));
        assert_non_null(y = slurp(pb, &ny));
        if (nx != ny || memcmp(x, y, nx))
            fail_msg("%s and %s differ", pa, pb);
        free(x);
        free(y);
    }
    tok_free(t);
    tok_free(u);
    cJSON_Delete(cases);
}

static void test_round_trip(void **state)
{
    static const char *const bert[] = {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"};
    static const char *const t5[] = {"spiece.model", "tokenizer_config.json",
                                     "special_tokens_map.json", "added_tokens.json"};
    static const char *const bs[] = {"spm.model", "tokenizer_config.json", "special_tokens_map.json"};
    (void)state;
    round_trip("bert", 1, bert, 3, "BertTokenizer");
    round_trip("t5", -1, t5, 4, "T5Tokenizer");
    round_trip("bert-spm", -1, bs, 3, "DebertaV2Tokenizer");
    {
        static const char *const al[] = {"spiece.model", "tokenizer_config.json",
                                         "special_tokens_map.json"};
        round_trip("albert", -1, al, 3, "AlbertTokenizer");
    }
    {
        static const char *const rb[] = {"vocab.json", "merges.txt", "tokenizer_config.json",
                                         "special_tokens_map.json"};
        round_trip("roberta", -1, rb, 4, "RobertaTokenizer");
    }
}

/* a dataset's tokenizer: the files tok_save wrote, checked against the manifest */
static void test_data_dir(void **state)
{
    char src[600], dir[600], err[1024];
    tok_tokenizer *t, *u;
    zt_tokenizer_info mi;
    zt_token_writer *w = NULL;
    int32_t ids[3] = {10, 11, 12};
    (void)state;
    fixture_dir(src, sizeof src, "t5");
    fresh_dir(dir, sizeof dir, "data");
    t = load(src);
    assert_int_equal(tok_save(t, dir, 0, err, sizeof err), 0);
    tok_manifest_info(t, &mi);
    assert_int_equal(zt_token_writer_create(dir, &mi, 0, &w), 0);
    assert_int_equal(zt_token_writer_add(w, ids, 3, "doc"), 0);
    assert_int_equal(zt_token_writer_finish(w), 0);
    zt_token_writer_destroy(w);
    if (tok_load_data(dir, &u, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_string_equal(tok_hf_class(u), "T5Tokenizer");
    tok_free(u);
    /* files that disagree with the manifest */
    copy(src, "spiece.model", dir, NULL);
    {
        /* (with added_tokens_decoder, so that special_tokens_map.json does not count) */
        static const char cfg[] = "{\"tokenizer_class\": \"T5Tokenizer\", \"eos_token\": \"<pad>\", "
                                  "\"pad_token\": \"</s>\", \"added_tokens_decoder\": {}}";
        put(dir, "tokenizer_config.json", cfg, sizeof cfg - 1);
    }
    assert_int_equal(tok_load_data(dir, &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "disagree with manifest.json"));
    tok_free(t);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void expect_error(const char *dir, const char *want)
{
    tok_tokenizer *t = NULL;
    char err[1024] = "";
    assert_int_equal(tok_load_folder(dir, &t, err, sizeof err), -1);
    assert_null(t);
    if (!strstr(err, want))
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
    assert_null(strchr(err, '\n'));
}

static void test_errors(void **state)
{
    static const char bert_cfg[] = "{\"tokenizer_class\": \"BertTokenizer\"}";
    char dir[600], src[600], bs[600], want[800];
    char err[1024];
    tok_tokenizer *t = NULL;
    char *model;
    size_t n;
    (void)state;
    fixture_dir(src, sizeof src, "bert");
    fixture_dir(bs, sizeof bs, "bert-spm");

    fresh_dir(dir, sizeof dir, "empty");
    snprintf(want, sizeof want, "%s: no tokenizer (looked for tokenizer_config.json, vocab.txt, "
             "spiece.model, spm.model and vocab.json)", dir);
    expect_error(dir, want);

    put(dir, "tokenizer.json", "{}", 2);
    expect_error(dir, "holds only tokenizer.json (a fast tokenizer)");

    fresh_dir(dir, sizeof dir, "novocab");
    put(dir, "tokenizer_config.json", bert_cfg, sizeof bert_cfg - 1);
    snprintf(want, sizeof want, "%s: no vocab.txt (the vocabulary of BertTokenizer)", dir);
    expect_error(dir, want);

    fresh_dir(dir, sizeof dir, "notjson");
    copy(src, "vocab.txt", dir, NULL);
    put(dir, "tokenizer_config.json", "{\"do_lower_case\": tru", 21);
    expect_error(dir, "tokenizer_config.json: not JSON");
    put(dir, "tokenizer_config.json", "[1]", 3);
    expect_error(dir, "tokenizer_config.json: not a JSON object");
    put(dir, "tokenizer_config.json", "{\"tokenizer_class\": \"XLNetTokenizer\"}", 37);
    expect_error(dir, "tokenizer_class XLNetTokenizer is not one zerotrain reads");
    put(dir, "tokenizer_config.json", "{\"tokenizer_class\": \"AlbertTokenizer\"}", 38);
    expect_error(dir, "no spiece.model (the vocabulary of AlbertTokenizer)");
    put(dir, "tokenizer_config.json", "{\"mask_token\": \"<mask>\"}", 24);
    expect_error(dir, "vocab.txt has no token <mask> (the mask_token of BertTokenizer)");

    /* a SentencePiece model without T5's pieces, as a T5 folder and as spm:MODEL */
    fresh_dir(dir, sizeof dir, "nopieces");
    copy(bs, "spm.model", dir, "spiece.model");
    expect_error(dir, "the SentencePiece model has no piece </s> (the eos_token of T5Tokenizer)");
    snprintf(want, sizeof want, "%s/spm.model", bs);
    assert_non_null(model = slurp(want, &n));
    assert_int_equal(tok_load_spm("bert.model", model, n, TOK_T5, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "bert.model: the SentencePiece model has no </s>"));
    assert_int_equal(tok_load_spm("bert.model", model, n, TOK_ANY, &t, err, sizeof err), 0);
    assert_string_equal(tok_hf_class(t), "DebertaV2Tokenizer");
    tok_free(t);
    free(model);
    snprintf(want, sizeof want, "%s/t5/spiece.model", fixtures);
    assert_non_null(model = slurp(want, &n));
    assert_int_equal(tok_load_spm("t5.model", model, n, TOK_BERT, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "t5.model: the SentencePiece model has no [CLS]"));
    free(model);
    put(dir, "spiece.model", "not a model", 11);
    expect_error(dir, "spiece.model: not a SentencePiece model");
}

static int setup(void **state)
{
    const char *base = getenv("TMPDIR"), *fx = getenv("ZT_FIXTURES");
    (void)state;
    snprintf(fixtures, sizeof fixtures, "%s/tokenizers", fx && *fx ? fx : "tests/fixtures");
    snprintf(tmpdir, sizeof tmpdir, "%s/zt_tok_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[400];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bert_uncased), cmocka_unit_test(test_bert_cased),
        cmocka_unit_test(test_t5),           cmocka_unit_test(test_bert_spm),
        cmocka_unit_test(test_albert),
        cmocka_unit_test(test_roberta),
        cmocka_unit_test(test_round_trip),   cmocka_unit_test(test_data_dir),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
