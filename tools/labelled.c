/* labelled.c - reads labelled rows from JSON Lines (cJSON), CSV (RFC 4180) or TSV (no
 * quoting) into one pool of strings, checks every row, and maps labels to ids through a label
 * map built as Hugging Face's text-classification examples build theirs. It keeps the whole
 * file in memory (the texts once, unescaped) and knows nothing of tokenizers or models. */
#include "labelled.h"
#include "growbuf.h"
#include "zerotrain.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* a raw label as read, before any map */
enum { K_NONE, K_STRING, K_INT, K_FLOAT, K_BOOL, K_LIST };

typedef struct label {
    int kind;
    size_t text; /* scalar: pool offset of its text (how it is named); K_LIST: first element */
    size_t n;    /* scalar: length of the text; K_LIST: number of elements (in elems) */
    int64_t i;   /* K_INT */
    double f;    /* K_INT, K_FLOAT: the value */
} label;

typedef struct row {
    size_t text, text_len, pair, pair_len; /* pool offsets and lengths */
    long line;                             /* 1-based, the row's first line */
    label lab;
} row;

enum { F_TEXT, F_PAIR, F_LABEL, N_FIELDS };

struct lab_data {
    char *path;
    char *field[N_FIELDS]; /* the field names (pair NULL: none) */
    int labels;            /* the rows carry labels */
    row *rows;
    size_t n_rows, rows_cap;
    label *elems; /* the elements of list labels */
    size_t n_elems, elems_cap;
    char *pool; /* every text, NUL-terminated */
    size_t pool_len, pool_cap;
    /* lab_apply's result */
    lab_problem problem; /* LAB_AUTO: none */
    int num_labels;
    int64_t *ids;      /* LAB_SINGLE [n_rows] */
    float *values;     /* LAB_REGRESSION [n_rows] */
    size_t *multi_off; /* LAB_MULTI [n_rows + 1] into multi_ids */
    int32_t *multi_ids;
};

struct lab_map {
    lab_problem problem;
    int n;
    char **names; /* [n] */
    int *order;   /* ids sorted by the bytes of their names, for look-ups */
};

#define MAX_SHOWN 10 /* labels or field names listed in a message */

/* ---- small helpers ------------------------------------------------------------------- */

/* "PATH:LINE: message" (line 0: "PATH: message") into err; returns ZT_E_FORMAT */
static int say(char *err, size_t errlen, const char *path, long line, const char *fmt, ...)
{
    va_list ap;
    int k = line > 0 ? snprintf(err, errlen, "%s:%ld: ", path, line)
                     : snprintf(err, errlen, "%s: ", path);
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < errlen)
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return ZT_E_FORMAT;
}

static int nomem(char *err, size_t errlen, const char *path)
{
    snprintf(err, errlen, "%s: out of memory", path);
    return -ENOMEM;
}

/* Offset of the first byte of s[0..n) that does not begin a valid UTF-8 character (no
 * overlongs, surrogates or values above U+10FFFF; NUL is refused too), or n. */
static size_t utf8_bad(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        uint32_t v, min;
        if (c >= 0x01 && c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) { k = 1; v = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; v = c & 0x0f; min = 0x800; }
        else if (c >= 0xf0 && c <= 0xf4) { k = 3; v = c & 0x07; min = 0x10000; }
        else return i;
        if (n - i <= k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return i;
            v = v << 6 | (s[i + j] & 0x3f);
        }
        if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return i;
        i += k + 1;
    }
    return n;
}

/* A value for a message: "..." with at most 40 bytes (cut at a character), control
 * characters as '?'. */
static const char *show(char *buf, size_t cap, const char *s, size_t n)
{
    size_t o = 0, max = n > 40 ? 40 : n;
    while (max < n && max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    buf[o++] = '"';
    for (size_t i = 0; i < max && o + 5 < cap; i++)
        buf[o++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (max < n && o + 5 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* ", "-separated names[0..) into out: all of them if total <= MAX_SHOWN, else the first
 * MAX_SHOWN (names holds at least that many) and ", ... (TOTAL in all)". */
static void list_names(char *out, size_t cap, const char *const *names, size_t total)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < total && o + 1 < cap; i++) {
        if (i == MAX_SHOWN) {
            snprintf(out + o, cap - o, ", ... (%zu in all)", total);
            return;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", names[i]);
    }
}

/* The number a CSV value or a JSON number spells: 1 an integer (*iv, *fv), 2 another finite
 * number (*fv), 0 not a number, -1 a number out of range (1e999). The syntax is JSON's, with
 * an optional '+', leading zeros, and "1." / ".5" allowed; an integer beyond 64 bits counts
 * as a non-integer number. */
static int number(const char *s, size_t n, int64_t *iv, double *fv)
{
    char tmp[400];
    size_t i = 0, digits = 0;
    int integer = 1;
    char *end;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.') {
        integer = 0;
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
    }
    if (digits == 0)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t e = 0;
        integer = 0;
        if (++i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, e++;
        if (e == 0)
            return 0;
    }
    if (i != n)
        return 0;
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (integer) {
        long long v;
        errno = 0;
        v = strtoll(tmp, &end, 10);
        if (errno == 0) {
            *iv = v;
            *fv = (double)v;
            return 1;
        }
    }
    *fv = strtod(tmp, &end);
    return isfinite(*fv) ? 2 : -1;
}

static const char *kind_name(int kind)
{
    switch (kind) {
    case K_STRING: return "a string";
    case K_INT: return "an integer";
    case K_FLOAT: return "a number";
    case K_BOOL: return "a boolean";
    case K_LIST: return "a list";
    default: return "missing";
    }
}

/* ---- the data ------------------------------------------------------------------------ */

static int pool_put(lab_data *d, const char *s, size_t n, size_t *off)
{
    if (grow_buf((void **)&d->pool, &d->pool_cap, d->pool_len + n + 1, 1) < 0)
        return -ENOMEM;
    *off = d->pool_len;
    if (n)
        memcpy(d->pool + d->pool_len, s, n);
    d->pool[d->pool_len + n] = '\0';
    d->pool_len += n + 1;
    return 0;
}

static void drop_result(lab_data *d)
{
    free(d->ids);
    free(d->values);
    free(d->multi_off);
    free(d->multi_ids);
    d->ids = NULL;
    d->values = NULL;
    d->multi_off = NULL;
    d->multi_ids = NULL;
    d->problem = LAB_AUTO;
    d->num_labels = 0;
}

void lab_free(lab_data *d)
{
    if (!d)
        return;
    drop_result(d);
    for (int f = 0; f < N_FIELDS; f++)
        free(d->field[f]);
    free(d->path);
    free(d->rows);
    free(d->elems);
    free(d->pool);
    free(d);
}

size_t lab_rows(const lab_data *d) { return d->n_rows; }
const char *lab_path(const lab_data *d) { return d->path; }
int lab_has_pair(const lab_data *d) { return d->field[F_PAIR] != NULL; }
int lab_has_labels(const lab_data *d) { return d->labels; }
long lab_line(const lab_data *d, size_t i) { return d->rows[i].line; }

const char *lab_text(const lab_data *d, size_t i, size_t *len)
{
    if (len)
        *len = d->rows[i].text_len;
    return d->pool + d->rows[i].text;
}

const char *lab_pair(const lab_data *d, size_t i, size_t *len)
{
    if (!d->field[F_PAIR])
        return NULL;
    if (len)
        *len = d->rows[i].pair_len;
    return d->pool + d->rows[i].pair;
}

/* ---- reading: the file, line by line or byte by byte --------------------------------- */

typedef struct reader {
    lab_data *d;
    int fd, eof, io_err; /* io_err: -errno of a failed read */
    unsigned char *buf;
    size_t pos, len;
    long line; /* line of the next byte */
    char *err;
    size_t errlen;
    int labels_optional;
    long first_with, first_without; /* lines of the first row with / without a label */
    /* the current line (JSONL) or record (CSV/TSV: fields NUL-terminated back to back) */
    char *rec;
    size_t rec_len, rec_cap;
    size_t *fo; /* CSV/TSV: field offsets into rec, and lengths */
    size_t *fl;
    size_t nf, fo_cap, fl_cap;
} reader;

#define BUF_SIZE (1u << 16)

static int fill(reader *r)
{
    ssize_t k;
    if (r->eof)
        return 0;
    do
        k = read(r->fd, r->buf, BUF_SIZE);
    while (k < 0 && errno == EINTR);
    if (k < 0) {
        r->io_err = -errno;
        r->eof = 1;
        return 0;
    }
    r->pos = 0;
    r->len = (size_t)k;
    if (k == 0)
        r->eof = 1;
    return k > 0;
}

static inline int get(reader *r)
{
    if (r->pos == r->len && !fill(r))
        return EOF;
    return r->buf[r->pos++];
}

static inline int peek(reader *r)
{
    if (r->pos == r->len && !fill(r))
        return EOF;
    return r->buf[r->pos];
}

static int rec_put(reader *r, int c)
{
    if (r->rec_len + 1 >= r->rec_cap &&
        grow_buf((void **)&r->rec, &r->rec_cap, r->rec_len + 2, 1) < 0)
        return -ENOMEM;
    r->rec[r->rec_len++] = (char)c;
    return 0;
}

static int fail_io(reader *r)
{
    snprintf(r->err, r->errlen, "%s: cannot read: %s", r->d->path, strerror(-r->io_err));
    return r->io_err;
}

/* the next line without its "\n" into r->rec (NUL-terminated): 1, 0 at the end, < 0 */
static int next_line(reader *r)
{
    r->rec_len = 0;
    if (peek(r) == EOF)
        return r->io_err ? fail_io(r) : 0;
    for (;;) {
        unsigned char *nl;
        size_t k;
        if (r->pos == r->len && !fill(r))
            break;
        nl = memchr(r->buf + r->pos, '\n', r->len - r->pos);
        k = (nl ? (size_t)(nl - r->buf) : r->len) - r->pos;
        if (grow_buf((void **)&r->rec, &r->rec_cap, r->rec_len + k + 1, 1) < 0)
            return nomem(r->err, r->errlen, r->d->path);
        memcpy(r->rec + r->rec_len, r->buf + r->pos, k);
        r->rec_len += k;
        r->pos += k;
        if (nl) {
            r->pos++;
            break;
        }
    }
    if (r->io_err)
        return fail_io(r);
    r->rec[r->rec_len] = '\0';
    r->line++;
    return 1;
}

/* Checks a text or string label read for field f of the row on line: valid UTF-8, no NUL. */
static int check_text(reader *r, long line, int f, const char *s, size_t n)
{
    size_t bad = utf8_bad(s, n);
    if (bad == n)
        return 0;
    if (s[bad] == '\0')
        return say(r->err, r->errlen, r->d->path, line, "field \"%s\" holds a NUL character "
                   "(at byte %zu)", r->d->field[f], bad + 1);
    return say(r->err, r->errlen, r->d->path, line, "field \"%s\" is not valid UTF-8 (byte %zu "
               "of the value is 0x%02x)", r->d->field[f], bad + 1, (unsigned char)s[bad]);
}

/* The all-or-nothing rule for labels_optional: a row with (has = 1) or without a label. */
static int label_presence(reader *r, long line, int has)
{
    const char *what = r->d->field[F_LABEL];
    if (has && !r->first_with)
        r->first_with = line;
    if (!has && !r->first_without)
        r->first_without = line;
    if (r->first_with && r->first_without) {
        if (has)
            return say(r->err, r->errlen, r->d->path, line, "field \"%s\" is set, but line %ld "
                       "has no label (a file has labels on every row or on none)", what,
                       r->first_without);
        return say(r->err, r->errlen, r->d->path, line, "no label (field \"%s\" missing, null "
                   "or empty), but line %ld has one (a file has labels on every row or on none)",
                   what, r->first_with);
    }
    return 0;
}

static int add_row(reader *r, const row *w)
{
    lab_data *d = r->d;
    if (grow_buf((void **)&d->rows, &d->rows_cap, d->n_rows + 1, sizeof *d->rows) < 0)
        return nomem(r->err, r->errlen, d->path);
    d->rows[d->n_rows++] = *w;
    return 0;
}

/* A scalar label from its text (a CSV/TSV value, or a JSON number's spelling or string):
 * numbers become K_INT / K_FLOAT when may_number, else everything is K_STRING. */
static int scalar_label(reader *r, long line, const char *s, size_t n, int may_number,
                        label *out)
{
    char tmp[64];
    int64_t iv = 0;
    double fv = 0;
    int k = may_number ? number(s, n, &iv, &fv) : 0, rc;
    memset(out, 0, sizeof *out);
    if (k < 0)
        return say(r->err, r->errlen, r->d->path, line, "field \"%s\": the number %s is out "
                   "of range", r->d->field[F_LABEL], show(tmp, sizeof tmp, s, n));
    if (k == 1) {
        /* named by its decimal form, so that "07" and 7 are the same label */
        int m = snprintf(tmp, sizeof tmp, "%lld", (long long)iv);
        out->kind = K_INT;
        out->i = iv;
        out->f = fv;
        out->n = (size_t)m;
        rc = pool_put(r->d, tmp, (size_t)m, &out->text);
    } else {
        if (k == 0 && (rc = check_text(r, line, F_LABEL, s, n)) < 0)
            return rc;
        out->kind = k == 2 ? K_FLOAT : K_STRING;
        out->f = fv;
        out->n = n;
        rc = pool_put(r->d, s, n, &out->text);
    }
    return rc < 0 ? nomem(r->err, r->errlen, r->d->path) : 0;
}

/* ---- JSON Lines ---------------------------------------------------------------------- */

/* cJSON keeps no source positions, so the raw text of a value (a number's spelling, a
 * string's escapes) is found by walking the line, which cJSON has already accepted. */
typedef struct span { size_t a, b; } span;

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (unsigned char)s[i] <= 32) /* cJSON's whitespace */
        i++;
    return i;
}

static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n && s[i] != '"'; i++)
        if (s[i] == '\\')
            i++;
    return i + 1;
}

static size_t skip_value(const char *s, size_t n, size_t i)
{
    int depth = 0;
    if (s[i] == '"')
        return skip_string(s, n, i);
    if (s[i] != '{' && s[i] != '[') {
        while (i < n && (unsigned char)s[i] > 32 && !strchr(",]}", s[i]))
            i++;
        return i;
    }
    while (i < n) {
        if (s[i] == '"') {
            i = skip_string(s, n, i);
            continue;
        }
        if (s[i] == '{' || s[i] == '[')
            depth++;
        else if (s[i] == '}' || s[i] == ']')
            depth--;
        i++;
        if (depth == 0)
            break;
    }
    return i;
}

/* The spans of the k-th member (object) or element (array) of the container at s[i]. */
static span child_span(const char *s, size_t n, size_t i, size_t k)
{
    int object = s[i] == '{';
    i = skip_ws(s, n, i + 1);
    for (size_t c = 0;; c++) {
        span v;
        if (object) {
            i = skip_ws(s, n, skip_string(s, n, i));
            i = skip_ws(s, n, i + 1); /* ':' */
        }
        v.a = i;
        v.b = i = skip_value(s, n, i);
        if (c == k)
            return v;
        i = skip_ws(s, n, skip_ws(s, n, i) + 1); /* ',' */
    }
}

/* whether the raw string at s[sp] has a \u0000 escape (cJSON would cut the string there) */
static int has_nul_escape(const char *s, span sp)
{
    for (size_t i = sp.a + 1; i + 1 < sp.b; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 5 < sp.b && memcmp(s + i + 2, "0000", 4) == 0)
                return 1;
            i++;
        }
    return 0;
}

static const char *json_type(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "a list";
    return "an object";
}

/* The member named f of the row object j, and its index: 0 found, 1 absent, < 0 error. */
static int json_member(reader *r, long line, const cJSON *j, int f, const cJSON **out,
                       size_t *index)
{
    const char *name = r->d->field[f];
    size_t k = 0, first = 0;
    *out = NULL;
    for (const cJSON *c = j->child; c; c = c->next, k++) {
        if (!c->string || strcmp(c->string, name) != 0)
            continue;
        if (*out)
            return say(r->err, r->errlen, r->d->path, line, "field \"%s\" appears twice (members "
                       "%zu and %zu)", name, first + 1, k + 1);
        *out = c;
        first = *index = k;
    }
    return *out ? 0 : 1;
}

static int json_missing(reader *r, long line, const cJSON *j, int f)
{
    const char *names[MAX_SHOWN];
    char list[512];
    size_t all = 0;
    for (const cJSON *c = j->child; c; c = c->next, all++)
        if (all < MAX_SHOWN)
            names[all] = c->string;
    if (all == 0)
        return say(r->err, r->errlen, r->d->path, line, "no field \"%s\" (the row is {})",
                   r->d->field[f]);
    list_names(list, sizeof list, names, all);
    return say(r->err, r->errlen, r->d->path, line, "no field \"%s\" (the row has: %s)",
               r->d->field[f], list);
}

/* field f (F_TEXT or F_PAIR) of the row: a string */
static int json_text(reader *r, long line, const char *s, size_t n, const cJSON *j, int f,
                     size_t *off, size_t *len)
{
    const cJSON *v;
    size_t k = 0;
    int rc = json_member(r, line, j, f, &v, &k);
    if (rc < 0)
        return rc;
    if (rc)
        return json_missing(r, line, j, f);
    if (!cJSON_IsString(v))
        return say(r->err, r->errlen, r->d->path, line, "field \"%s\" is %s, expected a string",
                   r->d->field[f], json_type(v));
    if (has_nul_escape(s, child_span(s, n, skip_ws(s, n, 0), k)))
        return say(r->err, r->errlen, r->d->path, line, "field \"%s\" holds a NUL character "
                   "(\\u0000)", r->d->field[f]);
    *len = strlen(v->valuestring);
    if ((rc = check_text(r, line, f, v->valuestring, *len)) < 0)
        return rc;
    return pool_put(r->d, v->valuestring, *len, off) < 0 ? nomem(r->err, r->errlen, r->d->path)
                                                         : 0;
}

/* a JSON string, number (spelling sp) or boolean as a scalar label; element: 1-based index
 * in a list (which allows strings and integers only), 0 for the label itself */
static int json_scalar(reader *r, long line, const char *s, const cJSON *v, span sp,
                       size_t element, label *out)
{
    const char *field = r->d->field[F_LABEL];
    int rc;
    if (cJSON_IsString(v)) {
        if (has_nul_escape(s, sp))
            return say(r->err, r->errlen, r->d->path, line, "field \"%s\" holds a NUL "
                       "character (\\u0000)", field);
        return scalar_label(r, line, v->valuestring, strlen(v->valuestring), 0, out);
    }
    if (cJSON_IsNumber(v)) {
        if ((rc = scalar_label(r, line, s + sp.a, sp.b - sp.a, 1, out)) < 0)
            return rc;
        if (element && out->kind != K_INT)
            return say(r->err, r->errlen, r->d->path, line, "field \"%s\": element %zu is a "
                       "number that is not an integer, expected a string or an integer", field,
                       element);
        return 0;
    }
    if (cJSON_IsBool(v) && !element) {
        memset(out, 0, sizeof *out);
        out->kind = K_BOOL;
        out->n = cJSON_IsTrue(v) ? 4 : 5;
        if (pool_put(r->d, cJSON_IsTrue(v) ? "true" : "false", out->n, &out->text) < 0)
            return nomem(r->err, r->errlen, r->d->path);
        return 0;
    }
    if (element)
        return say(r->err, r->errlen, r->d->path, line, "field \"%s\": element %zu is %s, "
                   "expected a string or an integer", field, element, json_type(v));
    return say(r->err, r->errlen, r->d->path, line, "field \"%s\" is %s, expected a string, a "
               "number, a boolean or a list", field, json_type(v));
}

static int json_label(reader *r, long line, const char *s, size_t n, const cJSON *j,
                      label *out)
{
    lab_data *d = r->d;
    const cJSON *v;
    size_t k = 0;
    int rc = json_member(r, line, j, F_LABEL, &v, &k);
    span sp;
    memset(out, 0, sizeof *out);
    if (rc < 0)
        return rc;
    if (rc || cJSON_IsNull(v)) {
        if (r->labels_optional)
            return label_presence(r, line, 0);
        if (rc)
            return json_missing(r, line, j, F_LABEL);
        return say(r->err, r->errlen, d->path, line, "field \"%s\" is null, expected a string, "
                   "a number, a boolean or a list", d->field[F_LABEL]);
    }
    if (r->labels_optional && (rc = label_presence(r, line, 1)) < 0)
        return rc;
    sp = child_span(s, n, skip_ws(s, n, 0), k);
    if (!cJSON_IsArray(v))
        return json_scalar(r, line, s, v, sp, 0, out);
    out->kind = K_LIST;
    out->text = d->n_elems;
    out->n = (size_t)cJSON_GetArraySize(v);
    if (grow_buf((void **)&d->elems, &d->elems_cap, d->n_elems + out->n, sizeof *d->elems) < 0)
        return nomem(r->err, r->errlen, d->path);
    k = 0;
    for (const cJSON *e = v->child; e; e = e->next, k++) {
        label el;
        if ((rc = json_scalar(r, line, s, e, child_span(s, n, sp.a, k), k + 1, &el)) < 0)
            return rc;
        d->elems[d->n_elems++] = el;
    }
    return 0;
}

static int read_jsonl(reader *r)
{
    lab_data *d = r->d;
    int rc;
    while ((rc = next_line(r)) > 0) {
        const char *s = r->rec, *end = NULL;
        size_t n = r->rec_len, i;
        long line = r->line;
        cJSON *j;
        row w;
        if (n && s[n - 1] == '\r')
            n--;
        if (strspn(s, " \t\r") >= n)
            continue; /* a blank line */
        if (memchr(s, '\0', n))
            return say(r->err, r->errlen, d->path, line, "a NUL byte in the line (at byte %zu)",
                       (size_t)((const char *)memchr(s, '\0', n) - s) + 1);
        if (d->n_rows == 0 && s[skip_ws(s, n, 0)] == '[')
            return say(r->err, r->errlen, d->path, line, "a JSON array; this reader takes JSON "
                       "Lines, one object per line (convert with: jq -c '.[]')");
        j = cJSON_ParseWithLengthOpts(s, n, &end, 0);
        if (j) {
            for (i = (size_t)(end - s); i < n && strchr(" \t\r", s[i]); i++)
                ;
            if (i < n) {
                cJSON_Delete(j);
                return say(r->err, r->errlen, d->path, line, "not valid JSON: more text after "
                           "the value (at byte %zu)", (size_t)(end - s) + 1);
            }
        }
        if (!j)
            return say(r->err, r->errlen, d->path, line, "not valid JSON (at byte %zu)",
                       end && end >= s ? (size_t)(end - s) + 1 : (size_t)1);
        memset(&w, 0, sizeof w);
        w.line = line;
        if (!cJSON_IsObject(j))
            rc = say(r->err, r->errlen, d->path, line, "not a JSON object (it is %s)",
                     json_type(j));
        else if ((rc = json_text(r, line, s, n, j, F_TEXT, &w.text, &w.text_len)) == 0 &&
                 (!d->field[F_PAIR] ||
                  (rc = json_text(r, line, s, n, j, F_PAIR, &w.pair, &w.pair_len)) == 0))
            rc = d->field[F_LABEL] ? json_label(r, line, s, n, j, &w.lab) : 0;
        cJSON_Delete(j);
        if (rc < 0 || (rc = add_row(r, &w)) < 0)
            return rc;
    }
    if (rc < 0)
        return rc;
    if (d->n_rows == 0)
        return say(r->err, r->errlen, d->path, 0, "no rows");
    return 0;
}

/* ---- CSV and TSV --------------------------------------------------------------------- */

static int end_field(reader *r, size_t start)
{
    if (rec_put(r, '\0') < 0 ||
        grow_buf((void **)&r->fo, &r->fo_cap, r->nf + 1, sizeof *r->fo) < 0 ||
        grow_buf((void **)&r->fl, &r->fl_cap, r->nf + 1, sizeof *r->fl) < 0)
        return -ENOMEM;
    r->fo[r->nf] = start;
    r->fl[r->nf++] = r->rec_len - 1 - start;
    return 0;
}

/* One record into r->rec / r->fo / r->fl / r->nf, *line = its first line; blank lines are
 * skipped. quoting: CSV's double quotes (RFC 4180); TSV has none. 1, 0 at the end, < 0. */
static int read_record(reader *r, int delim, int quoting, long *line)
{
    int c;
again:
    r->rec_len = r->nf = 0;
    *line = r->line;
    if ((c = get(r)) == EOF)
        return r->io_err ? fail_io(r) : 0;
    for (;;) {
        size_t start = r->rec_len;
        int quoted = quoting && c == '"';
        if (quoted) {
            for (;;) {
                if ((c = get(r)) == EOF) {
                    if (r->io_err)
                        return fail_io(r);
                    return say(r->err, r->errlen, r->d->path, *line, "field %zu: the quoted "
                               "field is not closed (the file ends inside it)", r->nf + 1);
                }
                if (c == '"') {
                    if (peek(r) != '"')
                        break;
                    get(r);
                } else if (c == '\n' || (c == '\r' && peek(r) != '\n')) {
                    r->line++;
                }
                if (rec_put(r, c) < 0)
                    return nomem(r->err, r->errlen, r->d->path);
            }
            c = get(r);
            if (c != delim && c != '\n' && c != '\r' && c != EOF)
                return say(r->err, r->errlen, r->d->path, *line, "field %zu: text after the "
                           "closing quote (a quote inside a quoted field is written \"\")",
                           r->nf + 1);
        } else {
            while (c != delim && c != '\n' && c != '\r' && c != EOF) {
                if (rec_put(r, c) < 0)
                    return nomem(r->err, r->errlen, r->d->path);
                c = get(r);
            }
        }
        if (end_field(r, start) < 0)
            return nomem(r->err, r->errlen, r->d->path);
        if (c == delim) {
            c = get(r);
            continue;
        }
        if (c == '\r' && peek(r) == '\n')
            get(r);
        if (c != EOF)
            r->line++;
        if (r->io_err)
            return fail_io(r);
        if (r->nf == 1 && r->fl[0] == 0 && !quoted)
            goto again; /* a blank line */
        return 1;
    }
}

static int read_table(reader *r, int delim, int quoting)
{
    lab_data *d = r->d;
    const char *cols[MAX_SHOWN];
    char list[512];
    size_t ncols, col[N_FIELDS], i;
    long line;
    int rc = read_record(r, delim, quoting, &line);
    if (rc <= 0)
        return rc < 0 ? rc : say(r->err, r->errlen, d->path, 0, "empty file (no header)");
    ncols = r->nf;
    for (i = 0; i < ncols && i < MAX_SHOWN; i++)
        cols[i] = r->rec + r->fo[i];
    list_names(list, sizeof list, cols, ncols);
    for (int f = 0; f < N_FIELDS; f++) {
        col[f] = SIZE_MAX;
        if (!d->field[f])
            continue;
        for (i = 0; i < ncols; i++) {
            if (strcmp(r->rec + r->fo[i], d->field[f]) != 0)
                continue;
            if (col[f] != SIZE_MAX)
                return say(r->err, r->errlen, d->path, line, "the header has \"%s\" twice "
                           "(columns %zu and %zu)", d->field[f], col[f] + 1, i + 1);
            col[f] = i;
        }
        if (col[f] == SIZE_MAX && (f != F_LABEL || !r->labels_optional))
            return say(r->err, r->errlen, d->path, line, "no field \"%s\" (the header has: %s)",
                       d->field[f], list);
    }
    d->labels = col[F_LABEL] != SIZE_MAX;
    while ((rc = read_record(r, delim, quoting, &line)) > 0) {
        row w;
        memset(&w, 0, sizeof w);
        w.line = line;
        if (r->nf != ncols)
            return say(r->err, r->errlen, d->path, line, "%zu field%s, the header has %zu",
                       r->nf, r->nf == 1 ? "" : "s", ncols);
        for (int f = F_TEXT; f <= F_PAIR; f++) {
            const char *s = r->rec + r->fo[col[f] == SIZE_MAX ? 0 : col[f]];
            size_t n = r->fl[col[f] == SIZE_MAX ? 0 : col[f]];
            size_t *off = f == F_TEXT ? &w.text : &w.pair, *len = f == F_TEXT ? &w.text_len
                                                                              : &w.pair_len;
            if (col[f] == SIZE_MAX)
                continue;
            if ((rc = check_text(r, line, f, s, n)) < 0)
                return rc;
            if (pool_put(d, s, n, off) < 0)
                return nomem(r->err, r->errlen, d->path);
            *len = n;
        }
        if (d->labels) {
            size_t n = r->fl[col[F_LABEL]];
            if (n == 0 && !r->labels_optional)
                return say(r->err, r->errlen, d->path, line, "field \"%s\" is empty",
                           d->field[F_LABEL]);
            if (r->labels_optional && (rc = label_presence(r, line, n > 0)) < 0)
                return rc;
            if (n && (rc = scalar_label(r, line, r->rec + r->fo[col[F_LABEL]], n, 1,
                                        &w.lab)) < 0)
                return rc;
        }
        if ((rc = add_row(r, &w)) < 0)
            return rc;
    }
    if (rc < 0)
        return rc;
    if (d->n_rows == 0)
        return say(r->err, r->errlen, d->path, 0, "no rows (only the header)");
    return 0;
}

/* ---- lab_read ------------------------------------------------------------------------ */

enum { FMT_JSONL, FMT_CSV, FMT_TSV };

static int format_of(const char *path)
{
    const char *base = strrchr(path, '/'), *dot;
    dot = strrchr(base ? base + 1 : path, '.');
    if (!dot)
        return -1;
    if (strcasecmp(dot, ".jsonl") == 0 || strcasecmp(dot, ".json") == 0)
        return FMT_JSONL;
    if (strcasecmp(dot, ".csv") == 0)
        return FMT_CSV;
    if (strcasecmp(dot, ".tsv") == 0)
        return FMT_TSV;
    return -1;
}

int lab_read(const char *path, const lab_opts *opts, lab_data **out, char *err, size_t errlen)
{
    static const lab_opts defaults = {NULL, NULL, NULL, 0};
    const char *names[N_FIELDS];
    reader r;
    lab_data *d;
    int fmt = format_of(path), rc;

    *out = NULL;
    if (!opts)
        opts = &defaults;
    if (fmt < 0) {
        snprintf(err, errlen, "%s: unknown extension (labelled data is .jsonl or .json for "
                 "JSON Lines, .csv or .tsv)", path);
        return ZT_E_FORMAT;
    }
    memset(&r, 0, sizeof r);
    r.fd = -1;
    if (!(d = calloc(1, sizeof *d)) || !(d->path = strdup(path)))
        goto nomem;
    names[F_TEXT] = opts->text_field ? opts->text_field : "text";
    names[F_PAIR] = opts->pair_field;
    names[F_LABEL] = opts->labels_optional == LAB_NO_LABELS ? NULL
                     : opts->label_field ? opts->label_field : "label";
    for (int f = 0; f < N_FIELDS; f++)
        if (names[f] && !(d->field[f] = strdup(names[f])))
            goto nomem;
    d->labels = 1; /* CSV/TSV: set by the header; with labels_optional: set below */
    r.d = d;
    r.err = err;
    r.errlen = errlen;
    r.labels_optional = opts->labels_optional;
    if (!(r.buf = malloc(BUF_SIZE)))
        goto nomem;
    if ((r.fd = zt_open_regular(path, 0)) < 0) {
        rc = r.fd;
        snprintf(err, errlen, "%s", zt_last_error());
        goto fail;
    }
    /* an optional UTF-8 byte order mark */
    while (r.len < 3 && !r.eof) {
        ssize_t k = read(r.fd, r.buf + r.len, 3 - r.len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            r.io_err = -errno;
        if (k <= 0)
            r.eof = 1;
        else
            r.len += (size_t)k;
    }
    if (r.io_err) {
        rc = fail_io(&r);
        goto fail;
    }
    r.eof = 0;
    if (r.len == 3 && memcmp(r.buf, "\xef\xbb\xbf", 3) == 0)
        r.pos = 3;
    r.line = 0; /* next_line counts the line it reads */
    if (fmt == FMT_JSONL) {
        rc = read_jsonl(&r);
    } else {
        r.line = 1;
        rc = read_table(&r, fmt == FMT_CSV ? ',' : '\t', fmt == FMT_CSV);
    }
    if (rc < 0)
        goto fail;
    if (r.labels_optional)
        d->labels = r.first_with != 0;
    close(r.fd);
    free(r.buf);
    free(r.rec);
    free(r.fo);
    free(r.fl);
    *out = d;
    return 0;
nomem:
    rc = nomem(err, errlen, path);
fail:
    if (r.fd >= 0)
        close(r.fd);
    free(r.buf);
    free(r.rec);
    free(r.fo);
    free(r.fl);
    lab_free(d);
    return rc;
}

/* ---- the label map ------------------------------------------------------------------- */

const char *lab_problem_name(lab_problem p)
{
    switch (p) {
    case LAB_SINGLE: return "single_label_classification";
    case LAB_MULTI: return "multi_label_classification";
    case LAB_REGRESSION: return "regression";
    default: return "auto";
    }
}

int lab_problem_parse(const char *name)
{
    for (int p = LAB_AUTO; p <= LAB_REGRESSION; p++)
        if (strcmp(name, lab_problem_name((lab_problem)p)) == 0)
            return p;
    return -1;
}

void lab_map_free(lab_map *m)
{
    if (!m)
        return;
    for (int i = 0; m->names && i < m->n; i++)
        free(m->names[i]);
    free(m->names);
    free(m->order);
    free(m);
}

lab_problem lab_map_problem(const lab_map *m) { return m->problem; }
int lab_map_num_labels(const lab_map *m) { return m->n; }

const char *lab_map_name(const lab_map *m, int id)
{
    return id >= 0 && id < m->n ? m->names[id] : NULL;
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

int lab_map_id(const lab_map *m, const char *name, size_t len)
{
    int lo = 0, hi = m->n - 1;
    if (m->problem == LAB_REGRESSION)
        return -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, id = m->order[mid];
        int c = bytes_cmp(m->names[id], strlen(m->names[id]), name, len);
        if (c == 0)
            return id;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int lab_map_is_placeholder(const lab_map *m)
{
    char want[32];
    for (int i = 0; i < m->n; i++) {
        snprintf(want, sizeof want, "LABEL_%d", i);
        if (strcmp(m->names[i], want) != 0)
            return 0;
    }
    return 1;
}

/* a label to sort: its text and, when every label is an integer, its value (or an id) */
typedef struct sort_key { const char *s; size_t n; int64_t i; } sort_key;

static int key_value_cmp(const void *a, const void *b)
{
    int64_t x = ((const sort_key *)a)->i, y = ((const sort_key *)b)->i;
    return (x > y) - (x < y);
}

static int key_bytes_cmp(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    return bytes_cmp(x->s, x->n, y->s, y->n);
}

/* lab_map_from_names, its messages starting with what ("label map", "PATH: id2label") */
static int map_create(lab_problem problem, const char *const *names, int n, const char *what,
                      lab_map **out, char *err, size_t errlen)
{
    lab_map *m = NULL;
    sort_key *keys = NULL;
    char tmp[64];
    int rc = ZT_E_INVAL;
    *out = NULL;
    if (n < 1 || problem < LAB_AUTO || problem > LAB_REGRESSION) {
        snprintf(err, errlen, "%s: %s", what, n < 1 ? "no labels" : "unknown problem type");
        return ZT_E_INVAL;
    }
    if (problem == LAB_AUTO)
        problem = n == 1 ? LAB_REGRESSION : LAB_SINGLE;
    if (problem == LAB_REGRESSION && n != 1) {
        snprintf(err, errlen, "%s: regression with %d outputs; only one is supported", what, n);
        return ZT_E_INVAL;
    }
    if (!(m = calloc(1, sizeof *m)) || !(m->names = calloc((size_t)n, sizeof *m->names)) ||
        !(m->order = malloc((size_t)n * sizeof *m->order)) ||
        !(keys = malloc((size_t)n * sizeof *keys)))
        goto nomem;
    m->problem = problem;
    m->n = n;
    for (int i = 0; i < n; i++) {
        if (!(m->names[i] = strdup(names[i])))
            goto nomem;
        keys[i] = (sort_key){m->names[i], strlen(m->names[i]), i};
    }
    qsort(keys, (size_t)n, sizeof *keys, key_bytes_cmp);
    for (int i = 0; i < n; i++) {
        m->order[i] = (int)keys[i].i;
        if (i > 0 && key_bytes_cmp(&keys[i - 1], &keys[i]) == 0) {
            int64_t a = keys[i - 1].i, b = keys[i].i;
            snprintf(err, errlen, "%s: the label %s appears twice (ids %d and %d)", what,
                     show(tmp, sizeof tmp, keys[i].s, keys[i].n), (int)(a < b ? a : b),
                     (int)(a < b ? b : a));
            goto fail;
        }
    }
    free(keys);
    *out = m;
    return 0;
nomem:
    snprintf(err, errlen, "%s: out of memory", what);
    rc = -ENOMEM;
fail:
    free(keys);
    lab_map_free(m);
    return rc;
}

int lab_map_from_names(lab_problem problem, const char *const *names, int n, lab_map **out,
                       char *err, size_t errlen)
{
    return map_create(problem, names, n, "label map", out, err, errlen);
}

static int is_number(int kind) { return kind == K_INT || kind == K_FLOAT; }

int lab_map_build(const lab_data *d, lab_problem problem, lab_map **out, char *err,
                  size_t errlen)
{
    static const char *const regression[1] = {"LABEL_0"};
    const char *field = d->field[F_LABEL];
    const row *list = NULL, *scalar = NULL, *other = NULL; /* first list, scalar, non-number */
    sort_key *keys = NULL;
    const char **names = NULL;
    char tmp[64];
    size_t n_keys, n_names = 0, i;
    int all_int = 1, any_float = 0, rc;

    *out = NULL;
    if (!d->labels) {
        snprintf(err, errlen, "%s: the rows have no labels (field \"%s\"), so no label map "
                 "can be built from them", d->path, field);
        return ZT_E_INVAL;
    }
    for (i = 0; i < d->n_rows; i++) {
        const row *w = &d->rows[i];
        int k = w->lab.kind;
        if (k == K_LIST && !list)
            list = w;
        if (k != K_LIST && !scalar)
            scalar = w;
        if (!is_number(k) && !other)
            other = w;
        any_float |= k == K_FLOAT;
        if (problem == LAB_AUTO && list && scalar) {
            const row *a = list->line < scalar->line ? list : scalar;
            return say(err, errlen, d->path, w->line, "field \"%s\" is %s, but line %ld has %s "
                       "(multi-label classification needs a list on every row)", field,
                       kind_name(k), a->line, kind_name(a->lab.kind));
        }
    }
    if (problem == LAB_AUTO)
        problem = list ? LAB_MULTI : !other && any_float ? LAB_REGRESSION : LAB_SINGLE;
    if (problem == LAB_MULTI && scalar)
        return say(err, errlen, d->path, scalar->line, "field \"%s\" is %s, expected a list "
                   "(multi_label_classification)", field, kind_name(scalar->lab.kind));
    if (problem == LAB_SINGLE && list)
        return say(err, errlen, d->path, list->line, "field \"%s\" is a list, expected one "
                   "label (single_label_classification)", field);
    if (problem == LAB_REGRESSION) {
        if (other)
            return say(err, errlen, d->path, other->line, "field \"%s\" is %s, expected a "
                       "number (regression)", field, kind_name(other->lab.kind));
        return map_create(LAB_REGRESSION, regression, 1, "label map", out, err, errlen);
    }
    /* the labels (multi-label: the list elements), sorted, distinct */
    n_keys = problem == LAB_MULTI ? d->n_elems : d->n_rows;
    if (!(keys = malloc((n_keys ? n_keys : 1) * sizeof *keys)) ||
        !(names = malloc((n_keys ? n_keys : 1) * sizeof *names)))
        goto nomem;
    for (i = 0; i < n_keys; i++) {
        const label *l = problem == LAB_MULTI ? &d->elems[i] : &d->rows[i].lab;
        keys[i] = (sort_key){d->pool + l->text, l->n, l->i};
        all_int &= l->kind == K_INT;
    }
    qsort(keys, n_keys, sizeof *keys, all_int ? key_value_cmp : key_bytes_cmp);
    for (i = 0; i < n_keys; i++)
        if (i == 0 || key_bytes_cmp(&keys[i - 1], &keys[i]) != 0)
            names[n_names++] = keys[i].s;
    if (n_names == 0)
        rc = say(err, errlen, d->path, 0, "field \"%s\": every label list is empty", field);
    else if (n_names == 1 && problem == LAB_SINGLE)
        rc = say(err, errlen, d->path, 0, "field \"%s\": every row has the label %s; "
                 "classification needs at least two", field,
                 show(tmp, sizeof tmp, names[0], strlen(names[0])));
    else if (n_names > INT32_MAX)
        rc = say(err, errlen, d->path, 0, "field \"%s\": %zu distinct labels", field, n_names);
    else
        rc = map_create(problem, names, (int)n_names, "label map", out, err, errlen);
    free(keys);
    free(names);
    return rc;
nomem:
    free(keys);
    free(names);
    return nomem(err, errlen, d->path);
}

/* an id2label key: "0", "1", ... (decimal, no sign or leading zero), or -1 */
static long id_key(const char *s)
{
    long v = 0;
    if (!*s || (s[0] == '0' && s[1]))
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > INT32_MAX / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

int lab_map_from_config(const char *path, lab_problem problem, lab_map **out, char *err,
                        size_t errlen)
{
    char *text = NULL, tmp[64], what[400];
    const char **names = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    const cJSON *id2label, *pt;
    int rc, n;

    *out = NULL;
    if ((rc = zt_file_read_all(path, (size_t)1 << 30, &text, &len)) < 0) {
        snprintf(err, errlen, "%s", zt_last_error());
        return rc;
    }
    rc = ZT_E_FORMAT;
    if (!(j = cJSON_ParseWithLength(text, len)) || !cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        goto done;
    }
    pt = cJSON_GetObjectItemCaseSensitive(j, "problem_type");
    if (pt && !cJSON_IsNull(pt)) {
        int given = cJSON_IsString(pt) ? lab_problem_parse(pt->valuestring) : -1;
        if (given <= LAB_AUTO) {
            snprintf(err, errlen, "%s: problem_type is not single_label_classification, "
                     "multi_label_classification or regression", path);
            goto done;
        }
        if (problem != LAB_AUTO && problem != (lab_problem)given) {
            snprintf(err, errlen, "%s: problem_type is %s, not %s", path,
                     lab_problem_name((lab_problem)given), lab_problem_name(problem));
            rc = ZT_E_CONFIG;
            goto done;
        }
        problem = (lab_problem)given;
    }
    id2label = cJSON_GetObjectItemCaseSensitive(j, "id2label");
    if (!id2label || cJSON_IsNull(id2label)) {
        snprintf(err, errlen, "%s: no id2label (the model has no labels yet)", path);
        rc = ZT_E_NOTFOUND;
        goto done;
    }
    if (!cJSON_IsObject(id2label) || (n = cJSON_GetArraySize(id2label)) < 1) {
        snprintf(err, errlen, "%s: id2label is not an object of \"id\": \"name\"", path);
        goto done;
    }
    if (!(names = calloc((size_t)n, sizeof *names))) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -ENOMEM;
        goto done;
    }
    for (const cJSON *c = id2label->child; c; c = c->next) {
        long id = id_key(c->string);
        if (id < 0 || id >= n) {
            snprintf(err, errlen, "%s: id2label has the key %s, not an id from 0 to %d", path,
                     show(tmp, sizeof tmp, c->string, strlen(c->string)), n - 1);
            goto done;
        }
        if (names[id]) {
            snprintf(err, errlen, "%s: id2label has the id %ld twice", path, id);
            goto done;
        }
        if (!cJSON_IsString(c)) {
            snprintf(err, errlen, "%s: id2label[\"%ld\"] is %s, expected a string", path, id,
                     json_type(c));
            goto done;
        }
        names[id] = c->valuestring;
    }
    snprintf(what, sizeof what, "%s: id2label", path);
    rc = map_create(problem, names, n, what, out, err, errlen);
done:
    free(names);
    cJSON_Delete(j);
    free(text);
    return rc;
}

int lab_map_to_config(const lab_map *m, struct cJSON *config)
{
    cJSON *id2label = cJSON_CreateObject(), *label2id = cJSON_CreateObject(), *pt = NULL;
    char key[32];
    if (!id2label || !label2id)
        goto nomem;
    for (int i = 0; i < m->n; i++) {
        snprintf(key, sizeof key, "%d", i);
        if (!cJSON_AddStringToObject(id2label, key, m->names[i]) ||
            !cJSON_AddNumberToObject(label2id, m->names[i], i))
            goto nomem;
    }
    if (!(pt = cJSON_CreateString(lab_problem_name(m->problem))))
        goto nomem;
    cJSON_DeleteItemFromObjectCaseSensitive(config, "id2label");
    cJSON_DeleteItemFromObjectCaseSensitive(config, "label2id");
    cJSON_DeleteItemFromObjectCaseSensitive(config, "problem_type");
    if (!cJSON_AddItemToObject(config, "id2label", id2label)) {
        cJSON_Delete(label2id);
        label2id = NULL;
        goto nomem; /* id2label is still ours */
    }
    id2label = NULL;
    if (!cJSON_AddItemToObject(config, "label2id", label2id))
        goto nomem;
    label2id = NULL;
    if (!cJSON_AddItemToObject(config, "problem_type", pt))
        goto nomem;
    return 0;
nomem:
    cJSON_Delete(id2label);
    cJSON_Delete(label2id);
    cJSON_Delete(pt);
    return -ENOMEM;
}

/* ---- labels as ids ------------------------------------------------------------------- */

static int unknown(const lab_data *d, const lab_map *m, const row *w, const label *l,
                   char *err, size_t errlen)
{
    char tmp[64], known[600];
    list_names(known, sizeof known, (const char *const *)m->names, (size_t)m->n);
    return say(err, errlen, d->path, w->line, "field \"%s\": unknown label %s (the labels "
               "are: %s)", d->field[F_LABEL], show(tmp, sizeof tmp, d->pool + l->text, l->n),
               known);
}

int lab_apply(lab_data *d, const lab_map *m, char *err, size_t errlen)
{
    const char *field = d->field[F_LABEL], *p = lab_problem_name(m->problem);
    size_t n = d->n_rows, total = 0, i;
    int rc = 0;
    drop_result(d);
    if (!d->labels)
        return 0;
    if (m->problem == LAB_SINGLE)
        d->ids = malloc((n ? n : 1) * sizeof *d->ids);
    if (m->problem == LAB_REGRESSION)
        d->values = malloc((n ? n : 1) * sizeof *d->values);
    if (m->problem == LAB_MULTI) {
        d->multi_off = malloc((n + 1) * sizeof *d->multi_off);
        d->multi_ids = malloc((d->n_elems ? d->n_elems : 1) * sizeof *d->multi_ids);
    }
    if (!d->ids && !d->values && !(d->multi_off && d->multi_ids)) {
        drop_result(d);
        return nomem(err, errlen, d->path);
    }
    for (i = 0; i < n && rc == 0; i++) {
        const row *w = &d->rows[i];
        const label *l = &w->lab;
        int id;
        if (m->problem == LAB_MULTI) {
            if (l->kind != K_LIST) {
                rc = say(err, errlen, d->path, w->line, "field \"%s\" is %s, expected a list "
                         "(%s)", field, kind_name(l->kind), p);
                break;
            }
            d->multi_off[i] = total;
            for (size_t e = 0; e < l->n && rc == 0; e++) {
                const label *el = &d->elems[l->text + e];
                if ((id = lab_map_id(m, d->pool + el->text, el->n)) < 0)
                    rc = unknown(d, m, w, el, err, errlen);
                d->multi_ids[total++] = id;
            }
        } else if (m->problem == LAB_SINGLE) {
            if (l->kind == K_LIST)
                rc = say(err, errlen, d->path, w->line, "field \"%s\" is a list, expected one "
                         "label (%s)", field, p);
            else if ((id = lab_map_id(m, d->pool + l->text, l->n)) < 0)
                rc = unknown(d, m, w, l, err, errlen);
            else
                d->ids[i] = id;
        } else {
            if (!is_number(l->kind))
                rc = say(err, errlen, d->path, w->line, "field \"%s\" is %s, expected a number "
                         "(%s)", field, kind_name(l->kind), p);
            else
                d->values[i] = (float)l->f;
        }
    }
    if (rc < 0) {
        drop_result(d);
        return rc;
    }
    if (m->problem == LAB_MULTI)
        d->multi_off[n] = total;
    d->problem = m->problem;
    d->num_labels = m->n;
    return 0;
}

int64_t lab_label_id(const lab_data *d, size_t i)
{
    assert(d->problem == LAB_SINGLE && i < d->n_rows);
    return d->ids[i];
}

void lab_label_multi(const lab_data *d, size_t i, float *out)
{
    assert(d->problem == LAB_MULTI && i < d->n_rows);
    memset(out, 0, (size_t)d->num_labels * sizeof *out);
    for (size_t k = d->multi_off[i]; k < d->multi_off[i + 1]; k++)
        out[d->multi_ids[k]] = 1.0f;
}

float lab_label_value(const lab_data *d, size_t i)
{
    assert(d->problem == LAB_REGRESSION && i < d->n_rows);
    return d->values[i];
}
