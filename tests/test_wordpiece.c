/* test_wordpiece.c - cmocka tests of the BERT tokenizer in tools/wordpiece.c: a table of
 * BasicTokenizer + WordPiece cases whose expected outputs come from Hugging Face's algorithm
 * (tokenization_bert.py), over a small vocab the test writes; plus vocab loading and its
 * errors. It compiles tools/wordpiece.c in (the tools are not a library) and needs
 * -lunistring. It does not test the CLI (test_prepare.sh does). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/wordpiece.c"

static char tmpdir[256], vocab_path[300];

/* line i = id i; "5" appears twice (ids 51 and 55: the last one counts, as in HF) */
static const char *const vocab[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able", "hello",
    "world", "!", ",", ".", "'", "(", ")", "$", "^", "`", "\xc2\xbf", "?", "-", "#", "cafe",
    "caf", "##e", "##\xc3\xa9", "caf\xc3\xa9", "naive", "ecole", "\xe4\xb8\xad", "\xe5\x9b\xbd",
    "\xe4\xba\xba", "a", "##b", "##c", "x", "##x", "don", "t", "uber", "cool",
    "\xce\xbf\xce\xb4\xce\xbf\xcf\x82", "\xcf\x83\xce\xb1", "\xcf\x82", "i", "\xc4\xb1",
    "\xef\xac\x81", "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", "\xed\x95\x9c", "5", "hola",
    "\xe3\x80\x81", "\xe3\x80\x82", "5", "H", "\xce\xb1\xcf\x83", "\xce\xb1\xcf\x82",
    "\xce\xb2",
};
#define N_VOCAB ((int)(sizeof vocab / sizeof vocab[0]))

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
    assert_int_equal(fclose(fp), 0);
}

static int setup(void **state)
{
    const char *base = getenv("TMPDIR");
    FILE *fp;
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/zt_wp_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(vocab_path, sizeof vocab_path, "%s/vocab.txt", tmpdir);
    if (!(fp = fopen(vocab_path, "wb")))
        return -1;
    for (int i = 0; i < N_VOCAB; i++)
        fprintf(fp, "%s\n", vocab[i]);
    return fclose(fp);
}

static int teardown(void **state)
{
    char p[400];
    static const char *const files[] = {"vocab.txt", "crlf.txt", "nomask.txt", "empty.txt"};
    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    return rmdir(tmpdir);
}

/* tokens of text, joined by single spaces */
static void tokens(wp_tokenizer *t, const char *text, size_t len, char *out, size_t n)
{
    int32_t *ids = NULL;
    size_t ni = 0, cap = 0;
    out[0] = '\0';
    assert_int_equal(wp_encode(t, text, len, &ids, &ni, &cap), 0);
    for (size_t i = 0; i < ni; i++) {
        const char *s = wp_id_token(t, ids[i]);
        assert_non_null(s);
        if (i)
            strncat(out, " ", n - strlen(out) - 1);
        strncat(out, s, n - strlen(out) - 1);
    }
    free(ids);
}

#define T(s) s, sizeof(s) - 1
static const struct {
    const char *text;
    size_t len;
    int lower;
    const char *want;
} cases[] = {
    /* expected outputs: HF BertTokenizer(vocab, do_lower_case=lower)._tokenize(text), the
     * Python algorithm run on this vocab */
    {T("unaffable"), 1, "un ##aff ##able"},
    {T("UnAffable"), 1, "un ##aff ##able"},
    {T("UnAffable"), 0, "[UNK]"},
    {T("Hello, world!"), 1, "hello , world !"},
    {T("Hello, world!"), 0, "[UNK] , world !"},
    /* café -> cafe */
    {T("caf\xc3\xa9"), 1, "cafe"},
    /* café -> café */
    {T("caf\xc3\xa9"), 0, "caf\xc3\xa9"},
    /* CAFÉ -> cafe */
    {T("CAF\xc3\x89"), 1, "cafe"},
    /* cafe<U+0301> -> cafe */
    {T("cafe\xcc\x81"), 1, "cafe"},
    /* cafe<U+0301> -> café: NFC before the whitespace split (transformers >= 4.30) */
    {T("cafe\xcc\x81"), 0, "caf\xc3\xa9"},
    /* naïve -> naive */
    {T("na\xc3\xafve"), 1, "naive"},
    /* ÉCOLE -> ecole */
    {T("\xc3\x89" "COLE"), 1, "ecole"},
    /* 中国人abc -> 中 国 人 a ##b ##c */
    {T("\xe4\xb8\xad\xe5\x9b\xbd\xe4\xba\xba" "abc"), 1,
     "\xe4\xb8\xad \xe5\x9b\xbd \xe4\xba\xba a ##b ##c"},
    /* x中x -> x 中 x */
    {T("x\xe4\xb8\xadx"), 0, "x \xe4\xb8\xad x"},
    /* hel<U+0000>lo<U+0001> wor<U+200B>ld<U+007F> -> hello world */
    {T("hel\x00lo\x01 wor\xe2\x80\x8bld\x7f"), 1, "hello world"},
    /* hello<U+00A0>world<U+3000>the<U+0009>the<U+000D><U+000A>the -> hello world the the the */
    {T("hello\xc2\xa0world\xe3\x80\x80the\x09the\x0d\x0athe"), 1, "hello world the the the"},
    /* hello<U+2028>world<U+2029>the -> hello world the */
    {T("hello\xe2\x80\xa8world\xe2\x80\xa9the"), 1, "hello world the"},
    {T("(hello)"), 1, "( hello )"},
    {T("$5^`"), 1, "$ 5 ^ `"},
    /* ¿hola? -> ¿ hola ? */
    {T("\xc2\xbfhola?"), 1, "\xc2\xbf hola ?"},
    {T("don't"), 1, "don ' t"},
    /* Über-cool -> uber - cool */
    {T("\xc3\x9c" "ber-cool"), 1, "uber - cool"},
    {T("xq"), 1, "[UNK]"},
    /* ΟΔΟΣ ΣΑ -> οδος σα */
    {T("\xce\x9f\xce\x94\xce\x9f\xce\xa3 \xce\xa3\xce\x91"), 1,
     "\xce\xbf\xce\xb4\xce\xbf\xcf\x82 \xcf\x83\xce\xb1"},
    /* İ ı -> i ı */
    {T("\xc4\xb0 \xc4\xb1"), 1, "i \xc4\xb1"},
    /* ﬁ -> ﬁ */
    {T("\xef\xac\x81"), 1, "\xef\xac\x81"},
    /* 한 -> 한 */
    {T("\xed\x95\x9c"), 1, "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab"},
    /* 한 -> 한 */
    {T("\xed\x95\x9c"), 0, "\xed\x95\x9c"},
    /* hello<U+FFFD>world -> [UNK] */
    {T("hello\xef\xbf\xbdworld"), 1, "[UNK]"},
    {T(""), 1, ""},
    /*  <U+0009><U+000A>  -> (nothing) */
    {T(" \x09\x0a "), 1, ""},
    {T("##"), 1, "# #"},
    {T("a##b"), 1, "a # # [UNK]"},
    /* 、。 -> 、 。 */
    {T("\xe3\x80\x81\xe3\x80\x82"), 1, "\xe3\x80\x81 \xe3\x80\x82"},
    /* the<U+0300> -> the */
    {T("the\xcc\x80"), 1, "the"},
    /* <U+0300><U+0301> -> (nothing) */
    {T("\xcc\x80\xcc\x81"), 1, ""},
    /* <U+0300><U+0301> -> [UNK] */
    {T("\xcc\x80\xcc\x81"), 0, "[UNK]"},
    {T("H"), 1, "[UNK]"},
    {T("H"), 0, "H"},
    {T("aHb"), 0, "[UNK]"},
    /* ΑΣ'Β ΑΣ -> ασ ' β ας */
    {T("\xce\x91\xce\xa3'\xce\x92 \xce\x91\xce\xa3"), 1,
     "\xce\xb1\xcf\x83 ' \xce\xb2 \xce\xb1\xcf\x82"},
};

static void test_table(void **state)
{
    wp_tokenizer *t[2] = {NULL, NULL};
    char err[512], got[1024];
    int bad = 0;
    (void)state;
    for (int lower = 0; lower < 2; lower++)
        assert_int_equal(wp_load(vocab_path, lower, &t[lower], err, sizeof err), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tokens(t[cases[i].lower], cases[i].text, cases[i].len, got, sizeof got);
        if (strcmp(got, cases[i].want) != 0) {
            print_error("case %zu (lower %d): got \"%s\", want \"%s\"\n", i, cases[i].lower, got,
                        cases[i].want);
            bad++;
        }
    }
    wp_free(t[0]);
    wp_free(t[1]);
    assert_int_equal(bad, 0);
}

/* [UNK] for a word of more than 100 characters; exactly 100 still splits ("x" "##x"...) */
static void test_long_words(void **state)
{
    wp_tokenizer *t = NULL;
    char err[512], text[400];
    int32_t *ids = NULL, sp[5];
    size_t n = 0, cap = 0;
    (void)state;
    assert_int_equal(wp_load(vocab_path, 1, &t, err, sizeof err), 0);
    wp_special_ids(t, sp);
    memset(text, 'x', 100);
    assert_int_equal(wp_encode(t, text, 100, &ids, &n, &cap), 0);
    assert_int_equal(n, 100);
    assert_int_equal(ids[0], wp_token_id(t, "x", 1));
    for (size_t i = 1; i < n; i++)
        assert_int_equal(ids[i], wp_token_id(t, "##x", 3));
    memset(text, 'x', 101);
    n = 0;
    assert_int_equal(wp_encode(t, text, 101, &ids, &n, &cap), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], sp[1]);
    /* characters, not bytes */
    for (int i = 0; i < 101; i++)
        memcpy(text + 2 * i, "\xc3\xa9", 2); /* e-acute: 101 characters -> one [UNK] */
    n = 0;
    assert_int_equal(wp_encode(t, text, 202, &ids, &n, &cap), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], sp[1]);
    /* a long word next to good ones: only it becomes [UNK] */
    memset(text, 'x', 150);
    memcpy(text + 150, " hello", 6);
    n = 0;
    assert_int_equal(wp_encode(t, text, 156, &ids, &n, &cap), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], sp[1]);
    assert_int_equal(ids[1], wp_token_id(t, "hello", 5));
    free(ids);
    wp_free(t);
}

static void collect(void *user, const char *word, size_t n)
{
    char *out = user;
    if (out[0])
        strcat(out, "|");
    strncat(out, word, n);
}

/* the BasicTokenizer alone (HF BasicTokenizer(do_lower_case).tokenize) */
static void test_basic(void **state)
{
    static const char text[] = "Hello, W\xc3\xb6rld! \xe4\xb8\xad\xe6\x96\x87 don't\xc2\xa0stop.";
    wp_tokenizer *t = NULL;
    char err[512], got[512];
    (void)state;
    assert_int_equal(wp_load(vocab_path, 1, &t, err, sizeof err), 0);
    got[0] = '\0';
    assert_int_equal(wp_basic_tokenize(t, text, sizeof text - 1, collect, got), 0);
    assert_string_equal(got, "hello|,|world|!|\xe4\xb8\xad|\xe6\x96\x87|don|'|t|stop|.");
    wp_free(t);
    assert_int_equal(wp_load(vocab_path, 0, &t, err, sizeof err), 0);
    got[0] = '\0';
    assert_int_equal(wp_basic_tokenize(t, text, sizeof text - 1, collect, got), 0);
    assert_string_equal(got, "Hello|,|W\xc3\xb6rld|!|\xe4\xb8\xad|\xe6\x96\x87|don|'|t|stop|.");
    wp_free(t);
}

/* invalid UTF-8 is dropped like U+FFFD (Python would refuse to decode it) */
static void test_invalid_utf8(void **state)
{
    wp_tokenizer *t = NULL;
    char err[512], got[256];
    (void)state;
    assert_int_equal(wp_load(vocab_path, 1, &t, err, sizeof err), 0);
    tokens(t, T("hel\xfflo wor\xc0\xafld \xed\xa0\x80the \xe4\xb8"), got, sizeof got);
    assert_string_equal(got, "hello world the");
    wp_free(t);
}

static void test_vocab_loading(void **state)
{
    wp_tokenizer *t = NULL;
    char err[512], path[400];
    int32_t sp[5];
    (void)state;
    assert_int_equal(wp_load(vocab_path, 1, &t, err, sizeof err), 0);
    assert_int_equal(wp_vocab_size(t), N_VOCAB);
    wp_special_ids(t, sp);
    for (int k = 0; k < 5; k++)
        assert_int_equal(sp[k], k);
    assert_int_equal(wp_token_id(t, "5", 1), 55); /* the later of two lines */
    assert_string_equal(wp_id_token(t, 51), "5");
    assert_int_equal(wp_token_id(t, "nope", 4), -1);
    assert_null(wp_id_token(t, N_VOCAB));
    wp_free(t);

    /* CRLF and CR line ends, no newline at the end (Python's universal newlines) */
    snprintf(path, sizeof path, "%s/crlf.txt", tmpdir);
    write_text(path, "[PAD]\r\n[UNK]\r[CLS]\r\n\r\n[SEP]\n[MASK]\r\nhello");
    assert_int_equal(wp_load(path, 1, &t, err, sizeof err), 0);
    assert_int_equal(wp_vocab_size(t), 7);
    assert_int_equal(wp_token_id(t, "[SEP]", 5), 4);
    assert_int_equal(wp_token_id(t, "hello", 5), 6);
    assert_int_equal(wp_token_id(t, "", 0), 3);
    wp_free(t);

    /* errors: one line naming the file and what is wrong */
    snprintf(path, sizeof path, "%s/nomask.txt", tmpdir);
    write_text(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASKED]\n");
    assert_int_equal(wp_load(path, 1, &t, err, sizeof err), -EINVAL);
    assert_null(t);
    assert_non_null(strstr(err, "nomask.txt"));
    assert_non_null(strstr(err, "no [MASK] token"));
    snprintf(path, sizeof path, "%s/empty.txt", tmpdir);
    write_text(path, "");
    assert_int_equal(wp_load(path, 1, &t, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "empty"));
    snprintf(path, sizeof path, "%s/missing.txt", tmpdir);
    assert_int_equal(wp_load(path, 1, &t, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "missing.txt"));
    assert_null(strchr(err, '\n'));
    /* a FIFO is refused at once, not waited on (the alarm fails a hang) */
    snprintf(path, sizeof path, "%s/fifo.txt", tmpdir);
    assert_int_equal(mkfifo(path, 0644), 0);
    alarm(10);
    assert_int_equal(wp_load(path, 1, &t, err, sizeof err), ZT_E_FORMAT);
    alarm(0);
    assert_null(t);
    assert_non_null(strstr(err, "fifo.txt: not a regular file (a FIFO)"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_long_words),
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_vocab_loading),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
