/* test_labelled.c - cmocka tests of the labelled-data reader in tools/labelled.c: the same
 * rows in every format, CSV quoting, each error message (file:line and field), the three
 * problem types and their label order, eval-set mapping, config.json maps. Files are written
 * into a mkdtemp folder. It compiles tools/labelled.c in (the tools are not a library); it
 * does not test `zerotrain finetune` itself. */
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

#include "../tools/labelled.c"
#include "tmpdir.h"

static char tmpdir[256];

/* writes n bytes (n < 0: strlen) to tmpdir/name and returns the path (a static buffer each
 * call, four in turn) */
static const char *put(const char *name, const char *data, long n)
{
    static char paths[4][400];
    static int k;
    char *p = paths[k++ % 4];
    size_t len = n < 0 ? strlen(data) : (size_t)n;
    FILE *fp;
    snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
    fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    return p;
}

static int setup(void **state)
{
    (void)state;
    tmpdir_make(tmpdir, sizeof tmpdir, "zt_labelled");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove(tmpdir);
}

static lab_data *read_ok(const char *path, const lab_opts *o)
{
    lab_data *d = NULL;
    char err[512] = "";
    int rc = lab_read(path, o, &d, err, sizeof err);
    if (rc != 0)
        print_error("lab_read(%s): %d %s\n", path, rc, err);
    assert_int_equal(rc, 0);
    assert_non_null(d);
    return d;
}

/* lab_read fails with rc and a one-line message holding each of the NULL-ended wants */
static void read_fails(const char *path, const lab_opts *o, int rc, ...)
{
    lab_data *d = (lab_data *)1;
    char err[512] = "";
    const char *want;
    va_list ap;
    int got = lab_read(path, o, &d, err, sizeof err);
    if (got != rc)
        print_error("lab_read(%s) = %d, want %d: %s\n", path, got, rc, err);
    assert_int_equal(got, rc);
    assert_null(d);
    assert_null(strchr(err, '\n'));
    va_start(ap, rc);
    while ((want = va_arg(ap, const char *)) != NULL) {
        if (!strstr(err, want))
            print_error("message \"%s\" lacks \"%s\"\n", err, want);
        assert_non_null(strstr(err, want));
    }
    va_end(ap);
}

static lab_map *build_ok(const lab_data *d, lab_problem p)
{
    lab_map *m = NULL;
    char err[512] = "";
    int rc = lab_map_build(d, p, &m, err, sizeof err);
    if (rc != 0)
        print_error("lab_map_build: %d %s\n", rc, err);
    assert_int_equal(rc, 0);
    return m;
}

/* the map's names joined by "|" */
static const char *names_of(const lab_map *m)
{
    static char out[1024];
    out[0] = '\0';
    for (int i = 0; i < lab_map_num_labels(m); i++) {
        if (i)
            strcat(out, "|");
        strcat(out, lab_map_name(m, i));
    }
    return out;
}

static void apply_ok(lab_data *d, const lab_map *m)
{
    char err[512] = "";
    int rc = lab_apply(d, m, err, sizeof err);
    if (rc != 0)
        print_error("lab_apply: %d %s\n", rc, err);
    assert_int_equal(rc, 0);
}

/* ---- the formats --------------------------------------------------------------------- */

/* the same five rows (a comma, quotes, non-ASCII, an empty second text) in each format */
static const char *const want_text[5] = {"good film", "bad, really bad", "she said \"hi\"",
                                         "caf\xc3\xa9 \xe2\x98\x95", "plain"};
static const char *const want_pair[5] = {"yes", "no", "", "\xc3\xbc", "x"};
static const int64_t want_id[5] = {2, 0, 1, 2, 0}; /* neg=0 neutral=1 pos=2 */

static void check_rows(lab_data *d)
{
    lab_map *m;
    size_t n;
    assert_int_equal(lab_rows(d), 5);
    assert_true(lab_has_pair(d));
    assert_true(lab_has_labels(d));
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(lab_text(d, i, &n), want_text[i]);
        assert_int_equal(n, strlen(want_text[i]));
        assert_string_equal(lab_pair(d, i, &n), want_pair[i]);
        assert_int_equal(n, strlen(want_pair[i]));
    }
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_string_equal(names_of(m), "neg|neutral|pos");
    apply_ok(d, m);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(lab_label_id(d, i), want_id[i]);
    lab_map_free(m);
    lab_free(d);
}

static void test_formats(void **state)
{
    const lab_opts o = {"sentence", "hypothesis", "gold", 0};
    (void)state;
    check_rows(read_ok(put("rows.jsonl",
        "{\"sentence\": \"good film\", \"hypothesis\": \"yes\", \"gold\": \"pos\"}\n"
        "{\"gold\": \"neg\", \"sentence\": \"bad, really bad\", \"hypothesis\": \"no\", "
        "\"extra\": [1, {\"a\": 2}]}\n"
        "\n"
        "  {\"sentence\":\"she said \\\"hi\\\"\",\"hypothesis\":\"\",\"gold\":\"neutral\"}  \r\n"
        "{\"sentence\": \"caf\\u00e9 \xe2\x98\x95\", \"hypothesis\": \"\xc3\xbc\", "
        "\"gold\": \"pos\"}\n"
        "{\"sentence\": \"plain\", \"hypothesis\": \"x\", \"gold\": \"neg\"}", -1), &o));
    /* a .json file holding JSON Lines, CRLF line ends */
    check_rows(read_ok(put("rows.json",
        "{\"sentence\": \"good film\", \"hypothesis\": \"yes\", \"gold\": \"pos\"}\r\n"
        "{\"sentence\": \"bad, really bad\", \"hypothesis\": \"no\", \"gold\": \"neg\"}\r\n"
        "{\"sentence\": \"she said \\\"hi\\\"\", \"hypothesis\": \"\", \"gold\": \"neutral\"}\r\n"
        "{\"sentence\": \"caf\xc3\xa9 \xe2\x98\x95\", \"hypothesis\": \"\xc3\xbc\", "
        "\"gold\": \"pos\"}\r\n"
        "{\"sentence\": \"plain\", \"hypothesis\": \"x\", \"gold\": \"neg\"}\r\n", -1), &o));
    check_rows(read_ok(put("rows.csv",
        "id,sentence,gold,hypothesis\n"
        "1,good film,pos,yes\n"
        "2,\"bad, really bad\",neg,no\n"
        "3,\"she said \"\"hi\"\"\",neutral,\"\"\n"
        "4,caf\xc3\xa9 \xe2\x98\x95,pos,\xc3\xbc\n"
        "5,plain,neg,x\n", -1), &o));
    /* TSV: no quoting, so quotes are text */
    check_rows(read_ok(put("rows.TSV",
        "sentence\thypothesis\tgold\n"
        "good film\tyes\tpos\n"
        "bad, really bad\tno\tneg\n"
        "she said \"hi\"\t\tneutral\n"
        "caf\xc3\xa9 \xe2\x98\x95\t\xc3\xbc\tpos\n"
        "plain\tx\tneg", -1), &o));
}

/* RFC 4180: quoted fields with commas, doubled quotes, LF and CRLF inside; CRLF records; a
 * BOM; blank lines skipped; the line of a multi-line record is its first line */
static void test_csv_quoting(void **state)
{
    lab_data *d;
    size_t n;
    (void)state;
    d = read_ok(put("q.csv",
        "\xef\xbb\xbftext,label\r\n"                 /* line 1 */
        "\"one\ntwo\",a\r\n"                         /* lines 2-3 */
        "\r\n"                                       /* line 4: blank */
        "\"x,\"\"y\"\"\r\nz\",b\r\n"                 /* lines 5-6 */
        "\"\",a\n"                                   /* line 7: an empty text */
        "say \"hi\" now,b\n"                         /* line 8: quotes inside unquoted */
        "\"last\",\"c\"", -1), NULL);                /* line 9, no newline at the end */
    assert_int_equal(lab_rows(d), 5);
    assert_false(lab_has_pair(d));
    assert_null(lab_pair(d, 0, NULL));
    assert_string_equal(lab_text(d, 0, NULL), "one\ntwo");
    assert_string_equal(lab_text(d, 1, &n), "x,\"y\"\r\nz");
    assert_int_equal(n, 8);
    assert_string_equal(lab_text(d, 2, &n), "");
    assert_int_equal(n, 0);
    assert_string_equal(lab_text(d, 3, NULL), "say \"hi\" now");
    assert_string_equal(lab_text(d, 4, NULL), "last");
    assert_int_equal(lab_line(d, 0), 2);
    assert_int_equal(lab_line(d, 1), 5);
    assert_int_equal(lab_line(d, 2), 7);
    assert_int_equal(lab_line(d, 3), 8);
    assert_int_equal(lab_line(d, 4), 9);
    lab_free(d);

    /* the error after a multi-line record names the right line */
    read_fails(put("q2.csv", "text,label\n\"a\nb\nc\",x\n\"d\",e,f\n", -1), NULL, ZT_E_FORMAT,
               "q2.csv:5: 3 fields, the header has 2", NULL);
    /* TSV lines: CRLF, a BOM, blank lines */
    d = read_ok(put("t.tsv", "\xef\xbb\xbftext\tlabel\r\n\r\n\"a\tb\r\nc\"\td\r\n", -1), NULL);
    assert_int_equal(lab_rows(d), 2);
    assert_string_equal(lab_text(d, 0, NULL), "\"a");
    assert_int_equal(lab_line(d, 0), 3);
    assert_int_equal(lab_line(d, 1), 4);
    lab_free(d);
}

/* fields far larger than the 64 KiB read buffer, in every format */
static void test_large(void **state)
{
    size_t big = 300000, k;
    char *text = malloc(big + 1), *file = malloc(2 * big + 100);
    lab_data *d;
    (void)state;
    assert_non_null(text);
    assert_non_null(file);
    for (size_t i = 0; i < big; i++)
        text[i] = (char)('a' + i % 26);
    text[big] = '\0';
    k = (size_t)sprintf(file, "{\"label\": 1, \"text\": \"%s\"}\n{\"text\": \"x\", \"label\": 2}",
                        text);
    d = read_ok(put("big.jsonl", file, (long)k), NULL);
    assert_int_equal(lab_rows(d), 2);
    assert_string_equal(lab_text(d, 0, NULL), text);
    assert_int_equal(lab_line(d, 1), 2);
    lab_free(d);
    text[1000] = '\n';
    k = (size_t)sprintf(file, "label,text\n1,\"%s\"\n2,x\n", text);
    d = read_ok(put("big.csv", file, (long)k), NULL);
    assert_int_equal(lab_rows(d), 2);
    assert_string_equal(lab_text(d, 0, NULL), text);
    assert_int_equal(lab_line(d, 1), 4);
    lab_free(d);
    text[1000] = 'x';
    k = (size_t)sprintf(file, "label\ttext\n1\t%s\n2\tx\n", text);
    d = read_ok(put("big.tsv", file, (long)k), NULL);
    assert_string_equal(lab_text(d, 0, NULL), text);
    lab_free(d);
    free(text);
    free(file);
}

/* ---- errors -------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    const lab_opts pair = {NULL, "text_b", NULL, 0};
    char dir[400];
    (void)state;
    /* the messages the finetune command shows */
    read_fails(put("train.csv", "text,sentiment\nhi,pos\n", -1), NULL, ZT_E_FORMAT,
               "train.csv:1: no field \"label\" (the header has: text, sentiment)", NULL);
    read_fails(put("train.jsonl", "{\"text\": \"a\", \"label\": 1}\n"
                                  "{\"text\": \"b\", \"label\": 0}\n"
                                  "{\"text\": 5, \"label\": 1}\n", -1), NULL, ZT_E_FORMAT,
               "train.jsonl:3: field \"text\" is a number, expected a string", NULL);
    read_fails(put("train.jsonl", "{\"text\": \"a\", \"label\": 1}\n\n"
                                  "{\"text\": \"b\", \"label\": 0}\n   \n"
                                  "\"text\"\n", -1), NULL, ZT_E_FORMAT,
               "train.jsonl:5: not a JSON object (it is a string)", NULL);
    read_fails(put("x.csv", "text,label\na,1\nb,1\nc,1\n\"d\n\ne\",1\nf,1\n1,2,3\n", -1),
               NULL, ZT_E_FORMAT, "x.csv:9: 3 fields, the header has 2", NULL);
    read_fails(put("x.csv", "text,label\na,1\nb\n", -1), NULL, ZT_E_FORMAT,
               "x.csv:3: 1 field, the header has 2", NULL);
    read_fails(put("x.csv", "", 0), NULL, ZT_E_FORMAT, "x.csv: empty file (no header)", NULL);
    read_fails(put("x.csv", "\xef\xbb\xbf\r\n\n", -1), NULL, ZT_E_FORMAT,
               "x.csv: empty file (no header)", NULL);
    read_fails(put("x.csv", "text,label\r\n", -1), NULL, ZT_E_FORMAT,
               "x.csv: no rows (only the header)", NULL);
    read_fails(put("x.jsonl", "\n \n\r\n", -1), NULL, ZT_E_FORMAT, "x.jsonl: no rows", NULL);
    read_fails(put("x.jsonl", "", 0), NULL, ZT_E_FORMAT, "x.jsonl: no rows", NULL);
    /* invalid UTF-8 and NUL characters, in text, pair and label */
    read_fails(put("u.jsonl", "{\"text\": \"ok\", \"label\": 1}\n"
                              "{\"text\": \"caf\xe9\", \"label\": 1}\n", -1), NULL, ZT_E_FORMAT,
               "u.jsonl:2: field \"text\" is not valid UTF-8 (byte 4 of the value is 0xe9)",
               NULL);
    read_fails(put("u.csv", "text,text_b,label\nok,\xed\xa0\x80,1\n", -1), &pair, ZT_E_FORMAT,
               "u.csv:2: field \"text_b\" is not valid UTF-8", NULL);
    read_fails(put("u.tsv", "text\tlabel\nok\tb\xc0\xaf\n", -1), NULL, ZT_E_FORMAT,
               "u.tsv:2: field \"label\" is not valid UTF-8", NULL);
    read_fails(put("n.jsonl", "{\"text\": \"a\\u0000b\", \"label\": 1}\n", -1), NULL,
               ZT_E_FORMAT, "n.jsonl:1: field \"text\" holds a NUL character", NULL);
    read_fails(put("n.csv", "text,label\n\"a\0b\",1\n", 19), NULL, ZT_E_FORMAT,
               "n.csv:2: field \"text\" holds a NUL character (at byte 2)", NULL);
    read_fails(put("n.jsonl", "{\"text\": \"a\", \"label\": 1}\0\n", 27), NULL, ZT_E_FORMAT,
               "n.jsonl:1: a NUL byte in the line", NULL);
    /* extensions */
    read_fails(put("data.txt", "text,label\na,1\n", -1), NULL, ZT_E_FORMAT,
               "data.txt: unknown extension", ".jsonl", ".json", ".csv", ".tsv", NULL);
    read_fails(put("data", "text,label\na,1\n", -1), NULL, ZT_E_FORMAT,
               "data: unknown extension", NULL);
    read_fails("/nonexistent/zt/train.csv", NULL, -ENOENT, "/nonexistent/zt/train.csv", NULL);
    snprintf(dir, sizeof dir, "%s/dir.csv", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    read_fails(dir, NULL, ZT_E_FORMAT, "dir.csv: not a regular file (a folder)", NULL);
    /* JSON */
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"a\",}\n", -1), NULL,
               ZT_E_FORMAT, "j.jsonl:2: not valid JSON (at byte 14)", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": 1} {}\n", -1), NULL, ZT_E_FORMAT,
               "j.jsonl:1: not valid JSON: more text after the value", NULL);
    read_fails(put("j.json", "[\n  {\"text\": \"a\", \"label\": 1}\n]\n", -1), NULL,
               ZT_E_FORMAT, "j.json:1: a JSON array", "JSON Lines", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"sentiment\": 1, \"id\": 7}\n", -1), NULL,
               ZT_E_FORMAT, "j.jsonl:1: no field \"label\" (the row has: text, sentiment, id)",
               NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": null}\n", -1), NULL, ZT_E_FORMAT,
               "j.jsonl:1: field \"label\" is null", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": {\"x\": 1}}\n", -1), NULL,
               ZT_E_FORMAT, "j.jsonl:1: field \"label\" is an object, expected a string, a "
               "number, a boolean or a list", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": [\"x\", 1.5]}\n", -1), NULL,
               ZT_E_FORMAT, "j.jsonl:1: field \"label\": element 2 is a number that is not "
               "an integer", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": [\"x\", true]}\n", -1), NULL,
               ZT_E_FORMAT, "j.jsonl:1: field \"label\": element 2 is a boolean", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": 1e999}\n", -1), NULL, ZT_E_FORMAT,
               "j.jsonl:1: field \"label\": the number \"1e999\" is out of range", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": 1, \"text\": \"b\"}\n", -1), NULL,
               ZT_E_FORMAT, "j.jsonl:1: field \"text\" appears twice", NULL);
    read_fails(put("j.jsonl", "{\"text\": \"a\", \"label\": 1}\n", -1), &pair, ZT_E_FORMAT,
               "j.jsonl:1: no field \"text_b\" (the row has: text, label)", NULL);
    read_fails(put("j.jsonl", "{\"text\": [\"a\"], \"label\": 1}\n", -1), NULL, ZT_E_FORMAT,
               "j.jsonl:1: field \"text\" is a list, expected a string", NULL);
    /* CSV */
    read_fails(put("c.csv", "text,label\na,1\n\"b,1\nc,1\n", -1), NULL, ZT_E_FORMAT,
               "c.csv:3: field 1: the quoted field is not closed", NULL);
    read_fails(put("c.csv", "text,label\n\"a\"b,1\n", -1), NULL, ZT_E_FORMAT,
               "c.csv:2: field 1: text after the closing quote", NULL);
    read_fails(put("c.csv", "text,label\na,\n", -1), NULL, ZT_E_FORMAT,
               "c.csv:2: field \"label\" is empty", NULL);
    read_fails(put("c.csv", "text,label,text\na,1,b\n", -1), NULL, ZT_E_FORMAT,
               "c.csv:1: the header has \"text\" twice (columns 1 and 3)", NULL);
    read_fails(put("c.csv", "text,label\na,1e400\n", -1), NULL, ZT_E_FORMAT,
               "c.csv:2: field \"label\": the number \"1e400\" is out of range", NULL);
    read_fails(put("c.tsv", "text\tlabel\na\tb\tc\n", -1), NULL, ZT_E_FORMAT,
               "c.tsv:2: 3 fields, the header has 2", NULL);
    read_fails(put("c.csv", "a,b,c,d,e,f,g,h,i,j,k,l\n1,2,3,4,5,6,7,8,9,10,11,12\n", -1), NULL,
               ZT_E_FORMAT, "c.csv:1: no field \"text\" (the header has: a, b, c, d, e, f, g, "
               "h, i, j, ... (12 in all))", NULL);
}

/* labels_optional: prediction input with no labels; labels on some rows only is an error */
static void test_optional_labels(void **state)
{
    const lab_opts o = {NULL, NULL, NULL, 1};
    lab_data *d;
    lab_map *m;
    char err[512];
    (void)state;
    d = read_ok(put("p.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\", \"label\": null}\n", -1), &o);
    assert_false(lab_has_labels(d));
    assert_int_equal(lab_rows(d), 2);
    assert_int_equal(lab_map_build(d, LAB_AUTO, &m, err, sizeof err), ZT_E_INVAL);
    assert_null(m);
    assert_non_null(strstr(err, "p.jsonl: the rows have no labels"));
    assert_int_equal(lab_map_from_names(LAB_AUTO, (const char *const[]){"a", "b"}, 2, &m, err,
                                        sizeof err), 0);
    assert_int_equal(lab_apply(d, m, err, sizeof err), 0); /* nothing to map */
    lab_map_free(m);
    lab_free(d);
    d = read_ok(put("p.csv", "text\na\nb\n", -1), &o);
    assert_false(lab_has_labels(d));
    lab_free(d);
    d = read_ok(put("p.csv", "text,label\na,\nb,\n", -1), &o);
    assert_false(lab_has_labels(d));
    lab_free(d);
    d = read_ok(put("p.csv", "text,label\na,x\nb,y\n", -1), &o);
    assert_true(lab_has_labels(d));
    lab_free(d);
    read_fails(put("p.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\"}\n", -1), &o,
               ZT_E_FORMAT, "p.jsonl:2: no label", "but line 1 has one", NULL);
    read_fails(put("p.csv", "text,label\na,\nb,1\n", -1), &o, ZT_E_FORMAT,
               "p.csv:3: field \"label\" is set, but line 2 has no label", NULL);
}

/* ---- problem types and label order --------------------------------------------------- */

static void test_single_label(void **state)
{
    lab_data *d;
    lab_map *m;
    (void)state;
    /* strings: byte order */
    d = read_ok(put("s.jsonl", "{\"text\":\"a\",\"label\":\"pos\"}\n{\"text\":\"b\",\"label\":"
                               "\"Neg\"}\n{\"text\":\"c\",\"label\":\"neg\"}\n"
                               "{\"text\":\"d\",\"label\":\"pos\"}\n", -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_string_equal(lab_problem_name(lab_map_problem(m)), "single_label_classification");
    assert_string_equal(names_of(m), "Neg|neg|pos");
    apply_ok(d, m);
    assert_int_equal(lab_label_id(d, 0), 2);
    assert_int_equal(lab_label_id(d, 1), 0);
    assert_int_equal(lab_label_id(d, 2), 1);
    assert_int_equal(lab_label_id(d, 3), 2);
    lab_map_free(m);
    lab_free(d);
    /* integers: numeric order (bytes would give -1|10|2) */
    d = read_ok(put("i.jsonl", "{\"text\":\"a\",\"label\":10}\n{\"text\":\"b\",\"label\":2}\n"
                               "{\"text\":\"c\",\"label\":-1}\n{\"text\":\"d\",\"label\":2}\n",
                    -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_string_equal(names_of(m), "-1|2|10");
    apply_ok(d, m);
    assert_int_equal(lab_label_id(d, 0), 2);
    assert_int_equal(lab_label_id(d, 2), 0);
    lab_map_free(m);
    lab_free(d);
    /* the same from CSV, where numbers are strings that parse ("07" is 7) */
    d = read_ok(put("i.csv", "text,label\na,10\nb,2\nc,-1\nd,07\n", -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_string_equal(names_of(m), "-1|2|7|10");
    lab_map_free(m);
    lab_free(d);
    /* integers and strings: byte order of the text */
    d = read_ok(put("m.jsonl", "{\"text\":\"a\",\"label\":10}\n{\"text\":\"b\",\"label\":2}\n"
                               "{\"text\":\"c\",\"label\":\"x\"}\n"
                               "{\"text\":\"d\",\"label\":\"2\"}\n",
                    -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_string_equal(names_of(m), "10|2|x");
    lab_map_free(m);
    lab_free(d);
    /* booleans */
    d = read_ok(put("b.jsonl", "{\"text\":\"a\",\"label\":true}\n"
                               "{\"text\":\"b\",\"label\":false}\n",
                    -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_string_equal(names_of(m), "false|true");
    apply_ok(d, m);
    assert_int_equal(lab_label_id(d, 0), 1);
    lab_map_free(m);
    lab_free(d);
    /* floats and strings: classification, the floats named as written */
    d = read_ok(put("fs.csv", "text,label\na,0.5\nb,n/a\nc,1\n", -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_string_equal(names_of(m), "0.5|1|n/a");
    lab_map_free(m);
    lab_free(d);
}

static void test_regression(void **state)
{
    lab_data *d;
    lab_map *m;
    char err[512];
    (void)state;
    d = read_ok(put("r.jsonl", "{\"text\":\"a\",\"label\":0.5}\n{\"text\":\"b\",\"label\":3}\n"
                               "{\"text\":\"c\",\"label\":-2.25e1}\n", -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_REGRESSION);
    assert_int_equal(lab_map_num_labels(m), 1);
    assert_string_equal(names_of(m), "LABEL_0");
    apply_ok(d, m);
    assert_true(lab_label_value(d, 0) == 0.5f);
    assert_true(lab_label_value(d, 1) == 3.0f);
    assert_true(lab_label_value(d, 2) == -22.5f);
    lab_map_free(m);
    lab_free(d);
    /* "4.0" is a float as written (pandas and pyarrow read such a column as float64) */
    d = read_ok(put("r.tsv", "text\tlabel\na\t4.0\nb\t1.0\nc\t5\n", -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_REGRESSION);
    apply_ok(d, m);
    assert_true(lab_label_value(d, 0) == 4.0f);
    assert_true(lab_label_value(d, 2) == 5.0f);
    lab_map_free(m);
    /* forced: integers as regression, floats as classes */
    lab_free(d);
    d = read_ok(put("r.csv", "text,label\na,1\nb,5\n", -1), NULL);
    m = build_ok(d, LAB_REGRESSION);
    assert_int_equal(lab_map_problem(m), LAB_REGRESSION);
    apply_ok(d, m);
    assert_true(lab_label_value(d, 1) == 5.0f);
    lab_map_free(m);
    lab_free(d);
    d = read_ok(put("r.csv", "text,label\na,1.5\nb,2.5\nc,1.5\n", -1), NULL);
    m = build_ok(d, LAB_SINGLE);
    assert_string_equal(names_of(m), "1.5|2.5");
    lab_map_free(m);
    lab_free(d);
    d = read_ok(put("r.csv", "text,label\na,1.5\nb,2.5\nc,high\n", -1), NULL);
    assert_int_equal(lab_map_build(d, LAB_REGRESSION, &m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "r.csv:4: field \"label\" is a string, expected a number "
                                "(regression)"));
    lab_free(d);
}

static void test_multi_label(void **state)
{
    lab_data *d;
    lab_map *m;
    char err[512];
    float v[3];
    (void)state;
    d = read_ok(put("ml.jsonl", "{\"text\":\"a\",\"label\":[\"sports\",\"news\"]}\n"
                                "{\"text\":\"b\",\"label\":[]}\n"
                                "{\"text\":\"c\",\"label\":[\"arts\", \"news\", \"news\"]}\n",
                    -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_MULTI);
    assert_string_equal(names_of(m), "arts|news|sports");
    apply_ok(d, m);
    lab_label_multi(d, 0, v);
    assert_true(v[0] == 0.0f && v[1] == 1.0f && v[2] == 1.0f);
    lab_label_multi(d, 1, v);
    assert_true(v[0] == 0.0f && v[1] == 0.0f && v[2] == 0.0f);
    lab_label_multi(d, 2, v);
    assert_true(v[0] == 1.0f && v[1] == 1.0f && v[2] == 0.0f);
    lab_map_free(m);
    lab_free(d);
    /* integer elements: numeric order */
    d = read_ok(put("ml.jsonl", "{\"text\":\"a\",\"label\":[10, 2]}\n"
                                "{\"text\":\"b\",\"label\":[1]}\n", -1), NULL);
    m = build_ok(d, LAB_AUTO);
    assert_string_equal(names_of(m), "1|2|10");
    lab_map_free(m);
    lab_free(d);
    /* lists mixed with scalars */
    d = read_ok(put("mx.jsonl", "{\"text\":\"a\",\"label\":[\"x\"]}\n"
                                "{\"text\":\"b\",\"label\":[\"y\"]}\n\n"
                                "{\"text\":\"c\",\"label\":\"x\"}\n", -1), NULL);
    assert_int_equal(lab_map_build(d, LAB_AUTO, &m, err, sizeof err), ZT_E_FORMAT);
    assert_null(m);
    assert_non_null(strstr(err, "mx.jsonl:4: field \"label\" is a string, but line 1 has a "
                                "list"));
    assert_int_equal(lab_map_build(d, LAB_SINGLE, &m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "mx.jsonl:1: field \"label\" is a list, expected one label"));
    lab_free(d);
    /* forced multi-label on scalars; every list empty */
    d = read_ok(put("s.csv", "text,label\na,x\n", -1), NULL);
    assert_int_equal(lab_map_build(d, LAB_MULTI, &m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "s.csv:2: field \"label\" is a string, expected a list"));
    lab_free(d);
    d = read_ok(put("one.csv", "text,label\na,x\nb,x\n", -1), NULL);
    assert_int_equal(lab_map_build(d, LAB_AUTO, &m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "one.csv: field \"label\": every row has the label \"x\"; "
                                "classification needs at least two"));
    lab_free(d);
    d = read_ok(put("e.jsonl", "{\"text\":\"a\",\"label\":[]}\n", -1), NULL);
    assert_int_equal(lab_map_build(d, LAB_AUTO, &m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "e.jsonl: field \"label\": every label list is empty"));
    lab_free(d);
}

/* ---- the eval set, config.json ------------------------------------------------------- */

static void test_eval_mapping(void **state)
{
    lab_data *train, *eval;
    lab_map *m;
    char err[512], file[4096];
    size_t k;
    (void)state;
    train = read_ok(put("train.jsonl", "{\"text\":\"a\",\"label\":\"pos\"}\n"
                                       "{\"text\":\"b\",\"label\":\"neg\"}\n", -1), NULL);
    m = build_ok(train, LAB_AUTO);
    apply_ok(train, m);
    eval = read_ok(put("eval.csv", "label,text\nneg,x\npos,y\nneg,z\n", -1), NULL);
    apply_ok(eval, m);
    assert_int_equal(lab_label_id(eval, 0), 0);
    assert_int_equal(lab_label_id(eval, 1), 1);
    assert_int_equal(lab_label_id(eval, 2), 0);
    lab_free(eval);
    eval = read_ok(put("eval.jsonl", "{\"text\":\"x\",\"label\":\"neg\"}\n\n"
                                     "{\"text\":\"y\",\"label\":\"neutral\"}\n", -1), NULL);
    assert_int_equal(lab_apply(eval, m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "eval.jsonl:3: field \"label\": unknown label \"neutral\" (the "
                                "labels are: neg, pos)"));
    lab_free(eval);
    eval = read_ok(put("eval.jsonl", "{\"text\":\"x\",\"label\":[\"neg\"]}\n", -1), NULL);
    assert_int_equal(lab_apply(eval, m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "eval.jsonl:1: field \"label\" is a list, expected one label "
                                "(single_label_classification)"));
    lab_free(eval);
    lab_map_free(m);
    lab_free(train);

    /* integer labels: an eval "07" in CSV is the training set's 7; many labels abbreviated */
    k = (size_t)sprintf(file, "text,label\n");
    for (int i = 0; i < 15; i++)
        k += (size_t)sprintf(file + k, "t%d,%d\n", i, 14 - i);
    train = read_ok(put("train.csv", file, (long)k), NULL);
    m = build_ok(train, LAB_AUTO);
    assert_int_equal(lab_map_num_labels(m), 15);
    eval = read_ok(put("eval.tsv", "text\tlabel\nx\t07\ny\t14\n", -1), NULL);
    apply_ok(eval, m);
    assert_int_equal(lab_label_id(eval, 0), 7);
    assert_int_equal(lab_label_id(eval, 1), 14);
    lab_free(eval);
    eval = read_ok(put("eval.tsv", "text\tlabel\nx\t07\ny\t15\n", -1), NULL);
    assert_int_equal(lab_apply(eval, m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "eval.tsv:3: field \"label\": unknown label \"15\" (the labels "
                                "are: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (15 in all))"));
    /* a regression map wants numbers */
    lab_free(eval);
    lab_map_free(m);
    assert_int_equal(lab_map_from_names(LAB_REGRESSION, (const char *const[]){"LABEL_0"}, 1, &m,
                                        err, sizeof err), 0);
    eval = read_ok(put("eval.csv", "text,label\nx,0.5\ny,good\n", -1), NULL);
    assert_int_equal(lab_apply(eval, m, err, sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "eval.csv:3: field \"label\" is a string, expected a number "
                                "(regression)"));
    lab_free(eval);
    lab_map_free(m);
    lab_free(train);
}

static void test_config(void **state)
{
    lab_map *m, *m2;
    char err[512];
    cJSON *cfg;
    char *s;
    (void)state;
    assert_int_equal(lab_map_from_config(put("config.json", "{\"id2label\": {\"1\": \"pos\", "
                                             "\"0\": \"neg\"}, \"problem_type\": "
                                             "\"single_label_classification\"}", -1),
                                         LAB_AUTO, &m, err, sizeof err), 0);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_string_equal(names_of(m), "neg|pos");
    assert_int_equal(lab_map_id(m, "pos", 3), 1);
    assert_int_equal(lab_map_id(m, "po", 2), -1);
    assert_null(lab_map_name(m, 2));
    assert_false(lab_map_is_placeholder(m));
    /* written into a config and read back */
    cfg = cJSON_Parse("{\"hidden_size\": 8, \"id2label\": {\"0\": \"LABEL_0\"}}");
    assert_int_equal(lab_map_to_config(m, cfg), 0);
    s = cJSON_PrintUnformatted(cfg);
    assert_string_equal(s, "{\"hidden_size\":8,\"id2label\":{\"0\":\"neg\",\"1\":\"pos\"},"
                           "\"label2id\":{\"neg\":0,\"pos\":1},\"problem_type\":"
                           "\"single_label_classification\"}");
    assert_int_equal(lab_map_from_config(put("config2.json", s, -1), LAB_AUTO, &m2, err,
                                         sizeof err), 0);
    assert_string_equal(names_of(m2), "neg|pos");
    assert_int_equal(lab_map_problem(m2), LAB_SINGLE);
    free(s);
    cJSON_Delete(cfg);
    lab_map_free(m2);
    lab_map_free(m);
    assert_int_equal(lab_map_from_config(put("config2.json", "", -1), LAB_AUTO, &m2, err,
                                         sizeof err), ZT_E_FORMAT);
    assert_non_null(strstr(err, "config2.json: not a JSON object"));
    /* no problem_type: one label is regression, else single-label; placeholders */
    assert_int_equal(lab_map_from_config(put("c1.json", "{\"id2label\": {\"0\": \"LABEL_0\", "
                                             "\"1\": \"LABEL_1\"}}", -1),
                                         LAB_AUTO, &m, err, sizeof err), 0);
    assert_int_equal(lab_map_problem(m), LAB_SINGLE);
    assert_true(lab_map_is_placeholder(m));
    lab_map_free(m);
    assert_int_equal(lab_map_from_config(put("c1.json", "{\"id2label\": {\"0\": \"LABEL_0\"}}",
                                             -1), LAB_AUTO, &m, err, sizeof err), 0);
    assert_int_equal(lab_map_problem(m), LAB_REGRESSION);
    lab_map_free(m);
    assert_int_equal(lab_map_from_config(put("c1.json", "{\"id2label\": {\"0\": \"a\", \"1\": "
                                             "\"b\"}}", -1), LAB_MULTI, &m, err, sizeof err), 0);
    assert_int_equal(lab_map_problem(m), LAB_MULTI);
    lab_map_free(m);
    /* errors */
    assert_int_equal(lab_map_from_config(put("base.json", "{\"hidden_size\": 8}", -1), LAB_AUTO,
                                         &m, err, sizeof err), ZT_E_NOTFOUND);
    assert_null(m);
    assert_non_null(strstr(err, "base.json: no id2label"));
    assert_int_equal(lab_map_from_config(put("c.json", "{\"id2label\": {\"0\": \"a\", \"2\": "
                                             "\"b\"}}", -1), LAB_AUTO, &m, err, sizeof err),
                     ZT_E_FORMAT);
    assert_non_null(strstr(err, "c.json: id2label has the key \"2\", not an id from 0 to 1"));
    assert_int_equal(lab_map_from_config(put("c.json", "{\"id2label\": {\"0\": \"a\", \"1\": "
                                             "\"a\"}}", -1), LAB_AUTO, &m, err, sizeof err),
                     ZT_E_INVAL);
    assert_non_null(strstr(err, "c.json: id2label: the label \"a\" appears twice (ids 0 and "
                                "1)"));
    assert_int_equal(lab_map_from_config(put("c.json", "{\"id2label\": {\"0\": \"a\", \"1\": "
                                             "\"b\"}, \"problem_type\": \"regression\"}", -1),
                                         LAB_AUTO, &m, err, sizeof err), ZT_E_INVAL);
    assert_non_null(strstr(err, "regression with 2 outputs"));
    assert_int_equal(lab_map_from_config(put("c.json", "{\"id2label\": {\"0\": \"a\", \"1\": "
                                             "\"b\"}, \"problem_type\": "
                                             "\"multi_label_classification\"}", -1),
                                         LAB_SINGLE, &m, err, sizeof err), ZT_E_CONFIG);
    assert_non_null(strstr(err, "c.json: problem_type is multi_label_classification, not "
                                "single_label_classification"));
    assert_int_equal(lab_problem_parse("regression"), LAB_REGRESSION);
    assert_int_equal(lab_problem_parse("nope"), -1);
}

/* a pair field in a task that also has regression targets (STS-B's shape) */
static void test_pair(void **state)
{
    const lab_opts o = {"sentence1", "sentence2", "score", 0};
    lab_data *d;
    lab_map *m;
    size_t n;
    (void)state;
    d = read_ok(put("stsb.tsv", "index\tsentence1\tsentence2\tscore\n"
                                "0\tA plane is taking off.\tAn air plane is taking off.\t5.000\n"
                                "1\tA man is playing a flute.\tA man is playing a flute.\t3.800\n",
                    -1), &o);
    assert_true(lab_has_pair(d));
    assert_string_equal(lab_text(d, 1, NULL), "A man is playing a flute.");
    assert_string_equal(lab_pair(d, 0, &n), "An air plane is taking off.");
    assert_int_equal(n, 27);
    m = build_ok(d, LAB_AUTO);
    assert_int_equal(lab_map_problem(m), LAB_REGRESSION);
    apply_ok(d, m);
    assert_true(lab_label_value(d, 1) == 3.8f);
    lab_map_free(m);
    lab_free(d);
    read_fails(put("stsb.csv", "sentence1,score\na,1\n", -1), &o, ZT_E_FORMAT,
               "stsb.csv:1: no field \"sentence2\" (the header has: sentence1, score)", NULL);
    read_fails(put("stsb.jsonl", "{\"sentence1\": \"a\", \"sentence2\": 2, \"score\": 1}\n", -1),
               &o, ZT_E_FORMAT, "stsb.jsonl:1: field \"sentence2\" is a number, expected a "
               "string", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_csv_quoting),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_optional_labels),
        cmocka_unit_test(test_single_label),
        cmocka_unit_test(test_regression),
        cmocka_unit_test(test_multi_label),
        cmocka_unit_test(test_eval_mapping),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_pair),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
