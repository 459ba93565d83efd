/* test_safetensors.c - cmocka tests of the safetensors reader and writer: round trips,
 * F16/BF16 conversion, a table of malformed files (each must fail with ZT_E_FORMAT and name
 * the file), and the writer's atomicity. Works in a private temp folder; no fixtures needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerotrain.h"
#include "../format/hfweights.h"

static char tmpdir[256];

static int setup(void **state)
{
    const char *base = getenv("TMPDIR");
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/zt_st_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    char p[512];
    (void)state;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    return rmdir(tmpdir);
}

static void tmp_path(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmpdir, name);
}

/* files in tmpdir whose name contains s */
static int count_files(const char *s)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int n = 0;
    assert_non_null(d);
    while ((e = readdir(d)))
        n += strstr(e->d_name, s) != NULL;
    closedir(d);
    return n;
}

static void write_file(const char *path, const void *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* ---- round trips -------------------------------------------------------------------- */

static void test_dtype_table(void **state)
{
    static const size_t sizes[ZT_DTYPE_COUNT] = {4, 2, 2, 8, 8, 4, 2, 1, 1, 1};
    (void)state;
    for (int t = 0; t < ZT_DTYPE_COUNT; t++)
        assert_int_equal(zt_dtype_size((zt_dtype)t), sizes[t]);
    assert_string_equal(zt_dtype_name(ZT_BF16), "BF16");
    assert_string_equal(zt_dtype_name(ZT_BOOL), "BOOL");
    assert_int_equal(zt_dtype_size(ZT_DTYPE_COUNT), 0);
}

static void test_roundtrip(void **state)
{
    /* F16: 1.0, -2.5, 65504, smallest subnormal, largest subnormal, +inf, -0, nan */
    static const uint16_t h16[8] = {0x3c00, 0xc100, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0x8000,
                                    0x7e00};
    /* BF16: 1.0, -2.5, 65280, subnormal 2^-133, +inf, -inf, nan */
    static const uint16_t b16[7] = {0x3f80, 0xc020, 0x477f, 0x0001, 0x7f80, 0xff80, 0x7fc0};
    float f32[6] = {1.0f, -2.5f, 65504.0f, 1e-45f, INFINITY, 3.25f};
    double f64[2] = {1.5, -1e300};
    int64_t i64[3] = {-1, INT64_MAX, 7};
    uint8_t u8[5] = {0, 1, 2, 254, 255};
    uint8_t odd[3] = {1, 0, 1}; /* puts the next tensors at odd offsets: unaligned reads */
    zt_tensor_view v[] = {
        {"zeta.f32", ZT_F32, 2, {2, 3}, f32},
        {"odd.bool", ZT_BOOL, 1, {3}, odd},
        {"alpha.f16", ZT_F16, 1, {8}, h16},
        {"beta.bf16", ZT_BF16, 3, {7, 1, 1}, b16},
        {"f64", ZT_F64, 1, {2}, f64},
        {"i64", ZT_I64, 1, {3}, i64},
        {"u8 \"quoted\"\\ \xc3\xa9\n", ZT_U8, 1, {5}, u8},
        {"empty", ZT_F32, 2, {0, 4}, NULL},
        {"scalar", ZT_F32, 0, {0}, f32},
    };
    const int n = (int)(sizeof v / sizeof v[0]);
    const char *meta[] = {"format", "pt", "note", "a \"b\" \\ \xe2\x82\xac"};
    const char *sorted[] = {"alpha.f16", "beta.bf16", "empty", "f64", "i64", "odd.bool",
                            "scalar", "u8 \"quoted\"\\ \xc3\xa9\n", "zeta.f32"};
    char path[512];
    zt_safetensors *f = NULL;
    zt_tensor_info t;
    float out[8];
    uint64_t hlen;
    FILE *fp;
    (void)state;

    tmp_path(path, sizeof path, "rt.safetensors");
    assert_int_equal(zt_safetensors_write(path, v, n, meta, 2), 0);
    assert_int_equal(count_files(".tmp."), 0);
    fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(&hlen, 8, 1, fp), 1);
    fclose(fp);
    assert_int_equal((8 + hlen) % 8, 0);

    assert_int_equal(zt_safetensors_open(path, &f), 0);
    assert_int_equal(zt_safetensors_count(f), n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(zt_safetensors_get(f, i, &t), 0);
        assert_string_equal(t.name, sorted[i]);
    }
    assert_int_equal(zt_safetensors_get(f, n, &t), ZT_E_INVAL);
    assert_string_equal(zt_safetensors_metadata(f, "format"), "pt");
    assert_string_equal(zt_safetensors_metadata(f, "note"), meta[3]);
    assert_null(zt_safetensors_metadata(f, "missing"));
    assert_int_equal(zt_safetensors_find(f, "missing", &t), ZT_E_NOTFOUND);

    assert_int_equal(zt_safetensors_find(f, "zeta.f32", &t), 0);
    assert_int_equal(t.dtype, ZT_F32);
    assert_int_equal(t.ndim, 2);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 3);
    assert_int_equal(t.numel, 6);
    assert_int_equal(t.nbytes, 24);
    assert_int_equal(t.offset, 8 + hlen); /* written first */
    assert_int_equal(zt_tensor_to_f32(&t, out, 6), 0);
    assert_memory_equal(out, f32, sizeof f32);
    assert_int_equal(zt_tensor_to_f32(&t, out, 5), ZT_E_SHAPE);
    assert_non_null(strstr(zt_last_error(), "zeta.f32"));

    assert_int_equal(zt_safetensors_find(f, "alpha.f16", &t), 0);
    assert_int_equal(t.offset % 2, 1); /* really unaligned */
    assert_int_equal(zt_tensor_to_f32(&t, out, 8), 0);
    assert_true(out[0] == 1.0f && out[1] == -2.5f && out[2] == 65504.0f);
    assert_true(out[3] == 0x1p-24f && out[4] == 1023 * 0x1p-24f);
    assert_true(isinf(out[5]) && out[5] > 0);
    assert_true(out[6] == 0.0f && signbit(out[6]));
    assert_true(isnan(out[7]));
    assert_int_equal(f32_bits(out[7]), 0x7fc00000u);

    assert_int_equal(zt_safetensors_find(f, "beta.bf16", &t), 0);
    assert_int_equal(t.ndim, 3);
    assert_int_equal(zt_tensor_to_f32(&t, out, 7), 0);
    assert_true(out[0] == 1.0f && out[1] == -2.5f && out[2] == 65280.0f);
    assert_true(out[3] == 0x1p-133f);
    assert_true(isinf(out[4]) && out[4] > 0 && isinf(out[5]) && out[5] < 0);
    assert_true(isnan(out[6]));

    assert_int_equal(zt_safetensors_find(f, "f64", &t), 0);
    assert_memory_equal(t.data, f64, sizeof f64);
    assert_int_equal(zt_tensor_to_f32(&t, out, 2), ZT_E_UNSUPPORTED);
    assert_non_null(strstr(zt_last_error(), "f64"));
    assert_int_equal(zt_safetensors_find(f, "i64", &t), 0);
    assert_memory_equal(t.data, i64, sizeof i64);
    assert_int_equal(zt_safetensors_find(f, sorted[7], &t), 0);
    assert_int_equal(t.dtype, ZT_U8);
    assert_memory_equal(t.data, u8, sizeof u8);
    assert_int_equal(zt_safetensors_find(f, "empty", &t), 0);
    assert_int_equal(t.numel, 0);
    assert_int_equal(t.nbytes, 0);
    assert_int_equal(zt_tensor_to_f32(&t, NULL, 0), 0);
    assert_int_equal(zt_safetensors_find(f, "scalar", &t), 0);
    assert_int_equal(t.ndim, 0);
    assert_int_equal(t.numel, 1);
    assert_int_equal(zt_tensor_to_f32(&t, out, 1), 0);
    assert_true(out[0] == 1.0f);
    zt_safetensors_close(f);
    zt_safetensors_close(NULL);

    /* overwrite in place: the new content replaces the old one */
    assert_int_equal(zt_safetensors_write(path, v, 1, NULL, 0), 0);
    assert_int_equal(zt_safetensors_open(path, &f), 0);
    assert_int_equal(zt_safetensors_count(f), 1);
    assert_null(zt_safetensors_metadata(f, "format"));
    zt_safetensors_close(f);
    assert_int_equal(count_files(".tmp."), 0);
}

/* Every F16 bit pattern against an independent formula. */
static void test_f16_exhaustive(void **state)
{
    static uint16_t all[65536];
    static float out[65536];
    zt_tensor_info t = {.name = "all", .dtype = ZT_F16, .ndim = 1, .shape = {65536},
                        .numel = 65536, .nbytes = 131072, .data = all};
    (void)state;
    for (int i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    assert_int_equal(zt_tensor_to_f32(&t, out, 65536), 0);
    for (int i = 0; i < 65536; i++) {
        int e = (i >> 10) & 31, m = i & 1023;
        double sign = (i & 0x8000) ? -1.0 : 1.0, want;
        if (e == 31) {
            if (m) {
                assert_true(isnan(out[i]));
                assert_int_equal(f32_bits(out[i]) & 0x7fffff, (uint32_t)m << 13);
                continue;
            }
            want = sign * INFINITY;
        } else if (e == 0) {
            want = sign * ldexp(m, -24);
        } else {
            want = sign * ldexp(1024 + m, e - 25);
        }
        if ((double)out[i] != want || !signbit(out[i]) != !signbit(want))
            fail_msg("f16 0x%04x -> %g, want %g", i, (double)out[i], want);
    }
}

static void test_valid_edge_cases(void **state)
{
    static const struct { const char *what; const char *header; size_t data; int n; } ok[] = {
        {"empty header object", "{}", 0, 0},
        {"padded with spaces", "{}      ", 0, 0},
        {"metadata only", "{\"__metadata__\":{}}", 0, 0},
        {"zero-size tensors at one offset",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
         "\"c\":{\"shape\":[0,3],\"data_offsets\":[2,2],\"dtype\":\"I16\"}}", 2, 3},
        {"escaped name", "{\"a\\u00e9\\\"\":{\"dtype\":\"I8\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]}}", 1, 1},
    };
    char path[512];
    unsigned char buf[512];
    (void)state;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t hlen = strlen(ok[i].header);
        zt_safetensors *f = NULL;
        memcpy(buf, &hlen, 8);
        memcpy(buf + 8, ok[i].header, hlen);
        memset(buf + 8 + hlen, 0x5a, ok[i].data);
        tmp_path(path, sizeof path, "ok.safetensors");
        write_file(path, buf, 8 + hlen + ok[i].data);
        int rc = zt_safetensors_open(path, &f);
        if (rc != 0)
            fail_msg("valid case '%s' rejected: %s", ok[i].what, zt_last_error());
        assert_int_equal(zt_safetensors_count(f), ok[i].n);
        zt_safetensors_close(f);
    }
    zt_tensor_info t;
    zt_safetensors *f = NULL;
    assert_int_equal(zt_safetensors_open(path, &f), 0);
    assert_int_equal(zt_safetensors_find(f, "a\xc3\xa9\"", &t), 0);
    zt_safetensors_close(f);
}

/* The fixture files shipped with the repository, when run from the project root. */
static void test_fixture(void **state)
{
    const char *path = "tests/fixtures/bert-tiny/model.safetensors";
    zt_safetensors *f = NULL;
    zt_tensor_info t;
    (void)state;
    if (access(path, R_OK) != 0) {
        print_message("skipping: %s not found (run from the project root)\n", path);
        skip();
    }
    assert_int_equal(zt_safetensors_open(path, &f), 0);
    assert_true(zt_safetensors_count(f) > 0);
    for (int i = 0; i < zt_safetensors_count(f); i++) {
        assert_int_equal(zt_safetensors_get(f, i, &t), 0);
        if (i) {
            zt_tensor_info prev;
            zt_safetensors_get(f, i - 1, &prev);
            assert_true(strcmp(prev.name, t.name) < 0);
        }
    }
    zt_safetensors_close(f);
}

/* ---- malformed files ---------------------------------------------------------------- */

#define T(name, dtype, shape, offs) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offs "}"

typedef struct bad_case {
    const char *what;
    const char *header;
    size_t hlen;        /* 0: strlen(header) */
    uint64_t claim;     /* header length written in the first 8 bytes, 0: the real one */
    size_t data;        /* data bytes after the header */
    long cut;           /* > 0: truncate the file to this many bytes */
    long sparse;        /* > 0: extend the file (sparse) to this many bytes */
} bad_case;

static const bad_case bad[] = {
    {"empty file", "", 0, 0, 0, -1, 0},
    {"shorter than 8 bytes", "{}", 0, 0, 0, 5, 0},
    {"header cut short", "{" T("a", "U8", "[4]", "[0,4]") "}", 0, 0, 4, 20, 0},
    {"data cut short", "{" T("a", "U8", "[4]", "[0,4]") "}", 0, 0, 2, 0, 0},
    {"header length past the file", "{}", 0, 1000, 0, 0, 0},
    {"header length > 100 MB", "{}", 0, 100000001, 0, 0, 100000100},
    {"header length 2^64-1", "{}", 0, UINT64_MAX, 0, 0, 0},
    {"offsets past the data", "{" T("a", "U8", "[64]", "[0,64]") "}", 0, 0, 16, 0, 0},
    {"overlapping offsets",
     "{" T("a", "U8", "[8]", "[0,8]") "," T("b", "U8", "[8]", "[4,12]") "}", 0, 0, 12, 0, 0},
    {"hole between tensors",
     "{" T("a", "U8", "[4]", "[0,4]") "," T("b", "U8", "[4]", "[8,12]") "}", 0, 0, 12, 0, 0},
    {"first tensor not at 0", "{" T("a", "U8", "[4]", "[4,8]") "}", 0, 0, 8, 0, 0},
    {"data left over", "{" T("a", "U8", "[4]", "[0,4]") "}", 0, 0, 8, 0, 0},
    {"data without tensors", "{}", 0, 0, 4, 0, 0},
    {"shape x dtype mismatch", "{" T("a", "F32", "[3]", "[0,8]") "}", 0, 0, 8, 0, 0},
    {"shape overflow 2^62 x 2^62",
     "{" T("a", "U8", "[4611686018427387904,4611686018427387904]", "[0,0]") "}", 0, 0, 0, 0, 0},
    {"shape overflow 2^32 x 2^32 x 2^32",
     "{" T("a", "U8", "[4294967296,4294967296,4294967296]", "[0,0]") "}", 0, 0, 0, 0, 0},
    {"byte size overflow", "{" T("a", "F64", "[4503599627370495,4096]", "[0,0]") "}", 0, 0,
     0, 0, 0},
    {"negative dim", "{" T("a", "U8", "[-1]", "[0,0]") "}", 0, 0, 0, 0, 0},
    {"fractional dim", "{" T("a", "U8", "[1.5]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"dim as 1.0", "{" T("a", "U8", "[1.0]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"dim as 1e0", "{" T("a", "U8", "[1e0]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"dim with leading zero", "{" T("a", "U8", "[01]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"dim as string", "{" T("a", "U8", "[\"1\"]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"too many dims", "{" T("a", "U8", "[1,1,1,1,1,1,1,1,1]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"shape not an array", "{" T("a", "U8", "1", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"begin > end", "{" T("a", "U8", "[0]", "[4,0]") "}", 0, 0, 4, 0, 0},
    {"three offsets", "{" T("a", "U8", "[1]", "[0,1,1]") "}", 0, 0, 1, 0, 0},
    {"negative offset", "{" T("a", "U8", "[1]", "[-1,0]") "}", 0, 0, 1, 0, 0},
    {"duplicate names",
     "{" T("a", "U8", "[1]", "[0,1]") "," T("a", "U8", "[1]", "[1,2]") "}", 0, 0, 2, 0, 0},
    {"duplicate key in entry",
     "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 0,
     1, 0, 0},
    {"extra key in entry",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 0, 0, 1, 0, 0},
    {"missing data_offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 0, 0, 1, 0, 0},
    {"missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 0, 1, 0, 0},
    {"entry not an object", "{\"a\":[1]}", 0, 0, 0, 0, 0},
    {"unknown dtype", "{" T("a", "F8", "[1]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"lower-case dtype", "{" T("a", "f32", "[1]", "[0,4]") "}", 0, 0, 4, 0, 0},
    {"bad JSON", "{\"a\":", 0, 0, 0, 0, 0},
    {"empty header", "", 0, 0, 0, 0, 0},
    {"header is an array", "[]", 0, 0, 0, 0, 0},
    {"trailing garbage after JSON", "{}x", 0, 0, 0, 0, 0},
    {"two JSON objects", "{}{}", 0, 0, 0, 0, 0},
    {"leading space", " {}", 0, 0, 0, 0, 0},
    {"padded with a newline", "{}\n", 0, 0, 0, 0, 0},
    {"NUL inside the header", "{}\0 ", 4, 0, 0, 0, 0},
    {"NUL before the object", "\0{}", 3, 0, 0, 0, 0},
    {"raw newline in a name", "{" T("a\nb", "U8", "[1]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"raw tab in metadata", "{\"__metadata__\":{\"k\":\"a\tb\"}}", 0, 0, 0, 0, 0},
    {"\\u0000 in a name", "{" T("a\\u0000b", "U8", "[1]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"UTF-8 BOM", "\xef\xbb\xbf{}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: stray continuation", "{\"\x80\":{}}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: overlong /", "{\"\xc0\xaf\":{}}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: overlong 3-byte", "{\"\xe0\x80\xaf\":{}}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: surrogate", "{\"\xed\xa0\x80\":{}}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: above U+10FFFF", "{\"\xf4\x90\x80\x80\":{}}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: truncated sequence", "{\"\xe2\x82\":{}}", 0, 0, 0, 0, 0},
    {"invalid UTF-8: at the very end", "{}\xc3", 0, 0, 0, 0, 0},
    {"lone surrogate escape", "{" T("\\ud800", "U8", "[1]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"metadata with a number", "{\"__metadata__\":{\"k\":1}}", 0, 0, 0, 0, 0},
    {"metadata with an object", "{\"__metadata__\":{\"k\":{}}}", 0, 0, 0, 0, 0},
    {"metadata not an object", "{\"__metadata__\":\"x\"}", 0, 0, 0, 0, 0},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, 0, 0, 0},
    {"metadata duplicate key", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, 0, 0, 0, 0},
    {"nested shape", "{" T("a", "U8", "[[1]]", "[0,1]") "}", 0, 0, 1, 0, 0},
    {"dim -0", "{" T("a", "U8", "[-0]", "[0,0]") "}", 0, 0, 0, 0, 0},
    {"literal true as dim", "{" T("a", "U8", "[true]", "[0,1]") "}", 0, 0, 1, 0, 0},
};

static void test_malformed(void **state)
{
    int failures = 0;
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *c = &bad[i];
        size_t hlen = c->hlen ? c->hlen : strlen(c->header), len = 8 + hlen + c->data;
        uint64_t claim = c->claim ? c->claim : hlen;
        unsigned char *buf = calloc(1, len);
        zt_safetensors *f = (zt_safetensors *)buf; /* must be reset to NULL on failure */
        char path[512], name[64];
        assert_non_null(buf);
        memcpy(buf, &claim, 8);
        memcpy(buf + 8, c->header, hlen);
        snprintf(name, sizeof name, "bad%02zu.safetensors", i);
        tmp_path(path, sizeof path, name);
        write_file(path, buf, c->cut < 0 ? 0 : c->cut > 0 ? (size_t)c->cut : len);
        if (c->sparse > 0)
            assert_int_equal(truncate(path, c->sparse), 0);
        free(buf);
        int rc = zt_safetensors_open(path, &f);
        const char *msg = zt_last_error();
        if (rc != ZT_E_FORMAT || f != NULL || !msg[0] || !strstr(msg, path)) {
            print_error("case %zu '%s': rc=%d (%s) msg='%s'\n", i, c->what, rc,
                        zt_strerror(rc), msg);
            failures++;
            if (rc == 0)
                zt_safetensors_close(f);
        }
        unlink(path);
    }
    assert_int_equal(failures, 0);
}

/* Messages name what is wrong, not just the file. */
static void test_messages(void **state)
{
    static const struct { const char *header; size_t data; const char *want; } m[] = {
        {"{" T("weight", "F8", "[1]", "[0,1]") "}", 1, "'F8'"},
        {"{" T("weight", "F32", "[3]", "[0,8]") "}", 8, "'weight'"},
        {"{" T("a", "U8", "[4]", "[0,4]") "," T("bias", "U8", "[4]", "[8,12]") "}", 12,
         "'bias' begins at byte offset"},
        {"{\"x\xc0\":{}}", 0, "byte offset 11"},
    };
    char path[512];
    unsigned char buf[256];
    (void)state;
    tmp_path(path, sizeof path, "msg.safetensors");
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        uint64_t hlen = strlen(m[i].header);
        zt_safetensors *f = NULL;
        memcpy(buf, &hlen, 8);
        memcpy(buf + 8, m[i].header, hlen);
        memset(buf + 8 + hlen, 0, m[i].data);
        write_file(path, buf, 8 + hlen + m[i].data);
        assert_int_equal(zt_safetensors_open(path, &f), ZT_E_FORMAT);
        if (!strstr(zt_last_error(), m[i].want))
            fail_msg("message '%s' lacks '%s'", zt_last_error(), m[i].want);
    }
    unlink(path);
}

static void test_open_errors(void **state)
{
    char path[512];
    zt_safetensors *f = NULL;
    (void)state;
    tmp_path(path, sizeof path, "does-not-exist.safetensors");
    assert_int_equal(zt_safetensors_open(path, &f), -ENOENT);
    assert_null(f);
    assert_non_null(strstr(zt_last_error(), path));
    assert_int_equal(zt_safetensors_open(tmpdir, &f), ZT_E_FORMAT); /* a folder */
    assert_int_equal(zt_safetensors_open(NULL, &f), ZT_E_INVAL);
    /* a FIFO without a writer is refused at once, not waited on (the alarm fails a hang) */
    tmp_path(path, sizeof path, "fifo.safetensors");
    assert_int_equal(mkfifo(path, 0644), 0);
    alarm(10);
    assert_int_equal(zt_safetensors_open(path, &f), ZT_E_FORMAT);
    alarm(0);
    assert_null(f);
    assert_non_null(strstr(zt_last_error(), path));
    assert_non_null(strstr(zt_last_error(), "not a regular file (a FIFO)"));
    unlink(path);
}

/* ---- writer ------------------------------------------------------------------------- */

static void test_write_invalid(void **state)
{
    float x[4] = {0};
    const char *dup_meta[] = {"k", "a", "k", "b"};
    const char *null_meta[] = {"k", NULL};
    zt_tensor_view ok = {"a", ZT_F32, 1, {4}, x};
    zt_tensor_view v[2];
    char path[512];
    (void)state;
    tmp_path(path, sizeof path, "inval.safetensors");

    v[0] = ok;
    v[1] = ok;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL); /* duplicate */
    v[1].name = NULL;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1] = ok;
    v[1].name = "__metadata__";
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].name = "bad\xff";
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].name = "b";
    v[1].ndim = ZT_MAX_DIMS + 1;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].ndim = -1;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].ndim = 1;
    v[1].shape[0] = -4;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].shape[0] = 4;
    v[1].dtype = ZT_DTYPE_COUNT;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].dtype = ZT_F32;
    v[1].data = NULL;
    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), ZT_E_INVAL);
    v[1].data = x;
    assert_int_equal(zt_safetensors_write(path, v, 2, dup_meta, 2), ZT_E_INVAL);
    assert_int_equal(zt_safetensors_write(path, v, 2, null_meta, 1), ZT_E_INVAL);
    assert_int_equal(zt_safetensors_write(path, v, -1, NULL, 0), ZT_E_INVAL);
    assert_int_equal(zt_safetensors_write(path, NULL, 1, NULL, 0), ZT_E_INVAL);
    assert_int_equal(zt_safetensors_write(NULL, v, 2, NULL, 0), ZT_E_INVAL);
    assert_non_null(strstr(zt_last_error(), "NULL"));
    assert_int_equal(count_files("inval"), 0);

    assert_int_equal(zt_safetensors_write(path, v, 2, NULL, 0), 0); /* the fixed one works */
    assert_int_equal(count_files("inval"), 1);
    unlink(path);
}

/* tensors given in pieces (how checkpoints stream offloaded moments): the same file as the
 * whole tensors; pieces that do not add up to a tensor's size fail and leave no file */
typedef struct piece_src {
    const float *x;
    const int *pieces;
    int short_by;  /* floats the last piece of tensor 1 leaves out */
} piece_src;

/* piece k of tensor i (a: x[0..7), b: x[7..17)): 3 floats, the last one the rest */
static int give_piece(int i, int k, void *arg, const void **data, size_t *len)
{
    const piece_src *p = arg;
    size_t n = i == 0 ? 7 : 10, lo = 3 * (size_t)k, hi = lo + 3;
    if (k == p->pieces[i] - 1)
        hi = n - (i == 1 ? (size_t)p->short_by : 0);
    *data = p->x + (i == 0 ? 0 : 7) + lo;
    *len = (hi - lo) * sizeof(float);
    return 0;
}

static void test_write_pieces(void **state)
{
    float x[17];
    for (int i = 0; i < 17; i++)
        x[i] = (float)i * 0.5f - 3.0f;
    zt_tensor_view whole[2] = {{"a", ZT_F32, 1, {7}, x}, {"b", ZT_F32, 2, {2, 5}, x + 7}};
    zt_tensor_view bare[2] = {{"a", ZT_F32, 1, {7}, NULL}, {"b", ZT_F32, 2, {2, 5}, NULL}};
    const char *meta[] = {"k", "v"};
    int pieces[2] = {3, 4}; /* a: 3 + 3 + 1; b: 3 + 3 + 3 + 1 */
    piece_src src = {x, pieces, 0};
    char p1[512], p2[512], cmd[1100];
    (void)state;
    tmp_path(p1, sizeof p1, "whole.safetensors");
    tmp_path(p2, sizeof p2, "pieces.safetensors");
    assert_int_equal(zt_safetensors_write(p1, whole, 2, meta, 1), 0);
    assert_int_equal(zt_safetensors_write_pieces(p2, bare, 2, meta, 1, pieces, give_piece, &src), 0);
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", p1, p2);
    assert_int_equal(system(cmd), 0);
    unlink(p2);
    src.short_by = 1; /* tensor b's pieces give 9 floats of 10 */
    assert_int_equal(zt_safetensors_write_pieces(p2, bare, 2, meta, 1, pieces, give_piece, &src),
                     ZT_E_INVAL);
    assert_non_null(strstr(zt_last_error(), "'b'"));
    assert_int_equal(count_files("pieces"), 0);
    pieces[1] = 0;
    assert_int_equal(zt_safetensors_write_pieces(p2, bare, 2, meta, 1, pieces, give_piece, &src),
                     ZT_E_INVAL);
    unlink(p1);
}

static void test_write_no_partial_output(void **state)
{
    static unsigned char big[1 << 16];
    zt_tensor_view v = {"big", ZT_U8, 1, {sizeof big}, big};
    struct rlimit old, lim;
    char path[512];
    struct stat st;
    int rc;
    (void)state;

    /* into a folder that does not exist: an error, and nothing appears */
    snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", tmpdir);
    rc = zt_safetensors_write(path, &v, 1, NULL, 0);
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(zt_last_error(), path));
    assert_int_equal(stat(path, &st), -1);
    snprintf(path, sizeof path, "%s/no", tmpdir);
    assert_int_equal(stat(path, &st), -1);

    /* a write that fails half way (file size limit): no file, no temp file left */
    tmp_path(path, sizeof path, "partial.safetensors");
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    rc = zt_safetensors_write(path, &v, 1, NULL, 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, -EFBIG);
    assert_non_null(strstr(zt_last_error(), path));
    assert_int_equal(count_files("partial"), 0);

    /* an existing file survives a failed overwrite untouched */
    big[0] = 42;
    v.shape[0] = 16;
    assert_int_equal(zt_safetensors_write(path, &v, 1, NULL, 0), 0);
    v.shape[0] = sizeof big;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    signal(SIGXFSZ, SIG_IGN);
    rc = zt_safetensors_write(path, &v, 1, NULL, 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(count_files("partial"), 1);
    zt_safetensors *f = NULL;
    zt_tensor_info t;
    assert_int_equal(zt_safetensors_open(path, &f), 0);
    assert_int_equal(zt_safetensors_find(f, "big", &t), 0);
    assert_int_equal(t.numel, 16);
    assert_int_equal(((const unsigned char *)t.data)[0], 42);
    zt_safetensors_close(f);
    unlink(path);
}

static void test_write_empty(void **state)
{
    char path[512];
    zt_safetensors *f = NULL;
    (void)state;
    tmp_path(path, sizeof path, "empty.safetensors");
    assert_int_equal(zt_safetensors_write(path, NULL, 0, NULL, 0), 0);
    assert_int_equal(zt_safetensors_open(path, &f), 0);
    assert_int_equal(zt_safetensors_count(f), 0);
    zt_safetensors_close(f);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_valid_edge_cases),
        cmocka_unit_test(test_fixture),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_write_invalid),
        cmocka_unit_test(test_write_pieces),
        cmocka_unit_test(test_write_no_partial_output),
        cmocka_unit_test(test_write_empty),
    };
    return cmocka_run_group_tests_name("safetensors", tests, setup, teardown);
}
