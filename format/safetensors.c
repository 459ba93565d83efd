/* safetensors.c - safetensors reader (mmap, full header validation on open) and atomic writer.
 * The reader trusts nothing in the file and allocates only O(header + tensors); it does not
 * convert dtypes other than F32/F16/BF16, and it does not guard against the file shrinking
 * while mapped (SIGBUS). Little-endian hosts only. */
#include "err.h"
#include "fileio.h"
#include "hfweights.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define HEADER_MAX 100000000ull   /* the spec's limit on the JSON header, bytes */
#define EXACT_MAX 0x1p53          /* JSON numbers go through double: exact below 2^53 */

typedef struct meta_pair { const char *key, *value; } meta_pair;

struct zt_safetensors {
    void *map;
    size_t map_size;
    int n, n_meta;
    zt_tensor_info *t;    /* n, sorted by name */
    meta_pair *meta;      /* n_meta, sorted by key */
    char *strings;        /* names, keys and values */
};

static const char *const dtype_names[ZT_DTYPE_COUNT] = {
    "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"};
static const unsigned char dtype_sizes[ZT_DTYPE_COUNT] = {4, 2, 2, 8, 8, 4, 2, 1, 1, 1};

const char *zt_dtype_name(zt_dtype t)
{
    return (unsigned)t < ZT_DTYPE_COUNT ? dtype_names[t] : "?";
}

size_t zt_dtype_size(zt_dtype t)
{
    return (unsigned)t < ZT_DTYPE_COUNT ? dtype_sizes[t] : 0;
}

/* ---- validation helpers ------------------------------------------------------------- */

/* Offset of the first byte that is not strict UTF-8 (no overlongs, no surrogates,
 * <= U+10FFFF), or len if the whole buffer is valid. */
static size_t utf8_check(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) { k = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; min = 0x800; }
        else if (c >= 0xf0 && c <= 0xf4) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (len - i <= k)
            return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return i;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += k + 1;
    }
    return len;
}

/* JSON rules cJSON does not enforce, and safetensors' own: no raw control characters, no
 * "\u0000" (names are C strings), no BOM or literals, numbers only as plain non-negative
 * integers. Runs after the structural checks, whose messages are more precise.
 * Returns the bad offset or -1. */
static long scan_header(const unsigned char *h, size_t n, const char **why)
{
    for (size_t i = 0; i < n; i++) {
        unsigned c = h[i];
        if (c == '"') {
            for (i++; i < n && h[i] != '"'; i++) {
                if (h[i] < 0x20) {
                    *why = "raw control character in a string";
                    return (long)i;
                }
                if (h[i] == '\\') {
                    if (n - i > 5 && memcmp(h + i + 1, "u0000", 5) == 0) {
                        *why = "\\u0000 in a string";
                        return (long)i;
                    }
                    i++;
                }
            }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t b = i;
            while (i + 1 < n && h[i + 1] >= '0' && h[i + 1] <= '9')
                i++;
            unsigned next = i + 1 < n ? h[i + 1] : ' ';
            if (c == '-' || (c == '0' && i > b) || next == '.' || next == 'e' ||
                next == 'E' || next == '+' || next == '-') {
                *why = "number is not a plain non-negative integer";
                return (long)b;
            }
        } else if (!c || !strchr(" \t\n\r{}[]:,", (int)c)) {
            *why = "unexpected byte outside a string";
            return (long)i;
        }
    }
    return -1;
}

/* A JSON number that is an exact non-negative integer below 2^53, or why it is not. */
static const char *get_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return "is not a number";
    if (!(v->valuedouble >= 0))
        return "is negative";
    if (v->valuedouble >= EXACT_MAX)
        return "is 2^53 or more";
    if ((double)(uint64_t)v->valuedouble != v->valuedouble)
        return "is not an integer";
    *out = (uint64_t)v->valuedouble;
    return NULL;
}

#define BAD(...) zt_fail(ZT_E_FORMAT, __VA_ARGS__)

/* Checks one tensor entry and fills t (offset relative to the data section for now). */
static int check_entry(const char *path, const cJSON *e, size_t data_size, zt_tensor_info *t)
{
    const char *name = e->string;
    const cJSON *dt = NULL, *sh = NULL, *off = NULL, *c;
    const char *why;
    uint64_t v[2];
    int i = 0;

    if (!cJSON_IsObject(e))
        return BAD("%s: tensor '%s': entry is not an object", path, name);
    cJSON_ArrayForEach(c, e) {
        const cJSON **slot = !strcmp(c->string, "dtype") ? &dt
                           : !strcmp(c->string, "shape") ? &sh
                           : !strcmp(c->string, "data_offsets") ? &off : NULL;
        if (!slot)
            return BAD("%s: tensor '%s': unexpected key '%s'", path, name, c->string);
        if (*slot)
            return BAD("%s: tensor '%s': duplicate key '%s'", path, name, c->string);
        *slot = c;
    }
    if (!dt || !sh || !off)
        return BAD("%s: tensor '%s': missing \"%s\"", path, name,
                   !dt ? "dtype" : !sh ? "shape" : "data_offsets");

    memset(t, 0, sizeof *t);
    t->name = name;
    if (!cJSON_IsString(dt))
        return BAD("%s: tensor '%s': dtype is not a string", path, name);
    for (t->dtype = 0; t->dtype < ZT_DTYPE_COUNT; t->dtype++)
        if (!strcmp(dt->valuestring, dtype_names[t->dtype]))
            break;
    if (t->dtype == ZT_DTYPE_COUNT)
        return BAD("%s: tensor '%s': unknown dtype '%s'", path, name, dt->valuestring);

    if (!cJSON_IsArray(sh))
        return BAD("%s: tensor '%s': shape is not an array", path, name);
    if (cJSON_GetArraySize(sh) > ZT_MAX_DIMS)
        return BAD("%s: tensor '%s': shape has %d dims, at most %d supported", path, name,
                   cJSON_GetArraySize(sh), ZT_MAX_DIMS);
    t->numel = 1;
    cJSON_ArrayForEach(c, sh) {
        uint64_t d;
        if ((why = get_uint(c, &d)))
            return BAD("%s: tensor '%s': shape[%d] %s", path, name, t->ndim, why);
        t->shape[t->ndim++] = (int64_t)d;
        if (__builtin_mul_overflow(t->numel, (size_t)d, &t->numel))
            return BAD("%s: tensor '%s': shape overflows size_t", path, name);
    }
    if (__builtin_mul_overflow(t->numel, zt_dtype_size(t->dtype), &t->nbytes))
        return BAD("%s: tensor '%s': byte size overflows size_t", path, name);

    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return BAD("%s: tensor '%s': data_offsets is not [begin, end]", path, name);
    cJSON_ArrayForEach(c, off)
        if ((why = get_uint(c, &v[i++])))
            return BAD("%s: tensor '%s': data_offsets[%d] %s", path, name, i - 1, why);
    if (v[0] > v[1])
        return BAD("%s: tensor '%s': data_offsets begin %llu > end %llu", path, name,
                   (unsigned long long)v[0], (unsigned long long)v[1]);
    if (v[1] > data_size)
        return BAD("%s: tensor '%s': data_offsets end %llu beyond the data section (%zu bytes)",
                   path, name, (unsigned long long)v[1], data_size);
    if (v[1] - v[0] != t->nbytes)
        return BAD("%s: tensor '%s': data_offsets span %llu bytes, shape x %s needs %zu", path,
                   name, (unsigned long long)(v[1] - v[0]), dtype_names[t->dtype], t->nbytes);
    t->offset = (size_t)v[0];
    return 0;
}

static int cmp_offset(const void *a, const void *b)
{
    const zt_tensor_info *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const zt_tensor_info *)a)->name, ((const zt_tensor_info *)b)->name);
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const meta_pair *)a)->key, ((const meta_pair *)b)->key);
}

static char *stash(char **p, const char *s)
{
    size_t len = strlen(s) + 1;
    char *r = memcpy(*p, s, len);
    *p += len;
    return r;
}

/* Fills f from the parsed header root (text hdr[0..hlen), for the lexical checks). On
 * failure the caller's zt_safetensors_close() frees what was allocated. */
static int load_header(zt_safetensors *f, const char *path, const cJSON *root,
                       const char *hdr, size_t hlen)
{
    size_t base = 8 + hlen, data_size = f->map_size - base, pos = 0, total = 0;
    const cJSON *c, *md = NULL;
    const char *why = NULL;
    long at;
    int items = 0;
    char *p;

    cJSON_ArrayForEach(c, root)
        items++;
    if (!(f->t = calloc((size_t)items + 1, sizeof *f->t)))
        return zt_fail(ZT_E_NOMEM, "%s: %d header entries: out of memory", path, items);
    cJSON_ArrayForEach(c, root) {
        int rc;
        if (strcmp(c->string, "__metadata__") != 0) {
            if ((rc = check_entry(path, c, data_size, &f->t[f->n++])) < 0)
                return rc;
            total += strlen(c->string) + 1;
            continue;
        }
        if (md)
            return BAD("%s: duplicate __metadata__", path);
        if (!cJSON_IsObject(md = c))
            return BAD("%s: __metadata__ is not an object", path);
        for (const cJSON *m = md->child; m; m = m->next) {
            if (!cJSON_IsString(m))
                return BAD("%s: __metadata__ value of '%s' is not a string", path, m->string);
            total += strlen(m->string) + strlen(m->valuestring) + 2;
        }
    }
    if ((at = scan_header((const unsigned char *)hdr, hlen, &why)) >= 0)
        return BAD("%s: header byte offset %zu: %s", path, 8 + (size_t)at, why);

    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_name); /* cJSON keeps duplicate keys */
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->t[i - 1].name, f->t[i].name))
            return BAD("%s: duplicate tensor name '%s'", path, f->t[i].name);

    /* the tensors must tile the data section exactly: no overlap, no hole, nothing left */
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_offset);
    for (int i = 0; i < f->n; i++) {
        zt_tensor_info *t = &f->t[i];
        if (t->offset != pos)
            return BAD("%s: tensor '%s' begins at byte offset %zu, expected %zu (%s)", path,
                       t->name, base + t->offset, base + pos,
                       t->offset < pos ? "overlaps the previous tensor" : "hole before it");
        pos += t->nbytes;
        t->offset += base;
        t->data = (const char *)f->map + t->offset;
    }
    if (pos != data_size)
        return BAD("%s: tensors cover %zu of %zu data bytes (bytes from offset %zu unused)",
                   path, pos, data_size, base + pos);

    /* copy the strings out of the cJSON tree, which the caller frees */
    if (!(f->meta = calloc((size_t)(md ? cJSON_GetArraySize(md) : 0) + 1, sizeof *f->meta)) ||
        !(p = f->strings = malloc(total + 1)))
        return zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < f->n; i++)
        f->t[i].name = stash(&p, f->t[i].name);
    for (const cJSON *m = md ? md->child : NULL; m; m = m->next, f->n_meta++) {
        f->meta[f->n_meta].key = stash(&p, m->string);
        f->meta[f->n_meta].value = stash(&p, m->valuestring);
    }
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_name);
    qsort(f->meta, (size_t)f->n_meta, sizeof *f->meta, cmp_key);
    for (int i = 1; i < f->n_meta; i++)
        if (!strcmp(f->meta[i - 1].key, f->meta[i].key))
            return BAD("%s: duplicate __metadata__ key '%s'", path, f->meta[i].key);
    return 0;
}

/* Checks the UTF-8 and JSON syntax of the header hdr[0..hlen), then loads it. */
static int parse_header(zt_safetensors *f, const char *path, const char *hdr, size_t hlen)
{
    const char *end = NULL;
    cJSON *root = NULL;
    size_t bad;
    int rc;

    if ((bad = utf8_check((const unsigned char *)hdr, hlen)) != hlen)
        return BAD("%s: header is not valid UTF-8 at byte offset %zu", path, 8 + bad);
    if (!hlen || hdr[0] != '{')
        return BAD("%s: header does not begin with '{' at byte offset 8", path);
    /* a copy of exactly hlen bytes, so the sanitizers see any read past the header */
    char *copy = malloc(hlen);
    if (!copy)
        return zt_fail(ZT_E_NOMEM, "%s: header of %zu bytes: out of memory", path, hlen);
    memcpy(copy, hdr, hlen);
    root = cJSON_ParseWithLengthOpts(copy, hlen, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        rc = BAD("%s: header is not a JSON object (near byte offset %zu)", path,
                 8 + (size_t)(end && end >= copy ? end - copy : 0));
    } else {
        bad = (size_t)(end - copy);
        while (bad < hlen && copy[bad] == ' ') /* the spec's padding: spaces only */
            bad++;
        rc = bad < hlen ? BAD("%s: bytes after the header JSON at byte offset %zu", path,
                              8 + bad)
                        : load_header(f, path, root, hdr, hlen);
    }
    cJSON_Delete(root);
    free(copy);
    return rc;
}

/* ---- reader ------------------------------------------------------------------------- */

static int map_file(zt_safetensors *f, const char *path)
{
    struct stat st;
    int rc = 0, fd = zt_open_regular(path, 0);

    if (fd < 0)
        return fd;
    if (fstat(fd, &st) < 0)
        rc = zt_fail(-errno, "%s: fstat: %s", path, strerror(errno));
    else if (st.st_size < 8) /* also keeps mmap away from empty files */
        rc = BAD("%s: file is %lld bytes, shorter than the 8-byte header length", path,
                 (long long)st.st_size);
    else if ((uint64_t)st.st_size > SIZE_MAX)
        rc = BAD("%s: file too large to map", path);
    else if ((f->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) ==
             MAP_FAILED) {
        f->map = NULL;
        rc = zt_fail(-errno, "%s: mmap: %s", path, strerror(errno));
    } else {
        f->map_size = (size_t)st.st_size;
    }
    close(fd);
    return rc;
}

/* What a file that is not safetensors is, from its first bytes (a safetensors file starts
 * with a little-endian header length and then '{'); NULL when nothing is recognised. *torch:
 * one of torch.save's formats (which can be converted). */
static const char *not_safetensors(const unsigned char *b, size_t n, int *torch)
{
    size_t i = 0, k;
    *torch = 1;
    if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0)
        return "a zip archive: the format of torch.save (pytorch_model.bin, *.pt, *.pth)";
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
        return "a Python pickle: torch.save's legacy format (pytorch_model.bin, *.pt)";
    *torch = 0;
    if (n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0)
        return "a NumPy .npy array";
    if (n >= 4 && memcmp(b, "\x89HDF", 4) == 0)
        return "an HDF5 file (Keras / TensorFlow .h5 weights)";
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        return "gzip-compressed data: decompress it first";
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
        i++;
    if (i < n && (b[i] == '{' || b[i] == '[')) {
        for (k = i; k + 10 <= n && k < 65536; k++)
            if (memcmp(b + k, "weight_map", 10) == 0)
                return "JSON: a sharded checkpoint's index (model.safetensors.index.json): "
                       "pass the model folder, or one of the shards it lists";
        return "JSON text (a config.json, tokenizer.json or the like), not tensors";
    }
    for (k = 0; k < n && k < 256; k++)
        if (b[k] < 0x09 || (b[k] > 0x0d && b[k] < 0x20) || b[k] == 0x7f)
            return NULL;
    return "text, not tensors";
}

/* The message for a file whose first bytes are not a safetensors header: what it is, and
 * for PyTorch's own formats how to convert it. */
static int not_safetensors_fail(const unsigned char *b, size_t n, const char *path)
{
    int torch;
    const char *what = not_safetensors(b, n, &torch);
    if (!what)
        return 0;
    if (torch)
        return BAD("%s is not a safetensors file: it is %s, which zerotrain does not read; "
                   "convert it where PyTorch and transformers run: "
                   "AutoModelForMaskedLM.from_pretrained(DIR).save_pretrained(DIR, "
                   "safe_serialization=True) writes model.safetensors (for a bare state dict: "
                   "safetensors.torch.save_file(torch.load(FILE, map_location=\"cpu\"), "
                   "\"model.safetensors\"))", path, what);
    return BAD("%s is not a safetensors file: it is %s", path, what);
}

int zt_safetensors_open(const char *path, zt_safetensors **out)
{
    zt_safetensors *f;
    uint64_t hlen;
    int rc;

    if (!path || !out)
        return zt_fail(ZT_E_INVAL, "zt_safetensors_open: NULL argument");
    *out = NULL;
    if (!(f = calloc(1, sizeof *f)))
        return zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
    if ((rc = map_file(f, path)) < 0)
        goto fail;
    memcpy(&hlen, f->map, 8);
    if ((hlen > f->map_size - 8 || f->map_size == 8 ||
         ((const unsigned char *)f->map)[8] != '{') &&
        (rc = not_safetensors_fail(f->map, f->map_size, path)) < 0)
        goto fail;
    if (hlen > HEADER_MAX)
        rc = BAD("%s: not a safetensors file (unknown content): its header length %llu "
                 "exceeds the %llu-byte limit", path, (unsigned long long)hlen, HEADER_MAX);
    else if (hlen > f->map_size - 8)
        rc = BAD("%s: header length %llu runs past the end of the %zu-byte file", path,
                 (unsigned long long)hlen, f->map_size);
    else
        rc = parse_header(f, path, (const char *)f->map + 8, (size_t)hlen);
    if (rc < 0)
        goto fail;
    *out = f;
    return 0;
fail:
    zt_safetensors_close(f);
    return rc;
}

void zt_safetensors_close(zt_safetensors *f)
{
    if (!f)
        return;
    if (f->map)
        munmap(f->map, f->map_size);
    free(f->t);
    free(f->meta);
    free(f->strings);
    free(f);
}

int zt_safetensors_count(const zt_safetensors *f)
{
    return f ? f->n : zt_fail(ZT_E_INVAL, "zt_safetensors_count: NULL file");
}

int zt_safetensors_get(const zt_safetensors *f, int i, zt_tensor_info *out)
{
    if (!f || !out)
        return zt_fail(ZT_E_INVAL, "zt_safetensors_get: NULL argument");
    if (i < 0 || i >= f->n)
        return zt_fail(ZT_E_INVAL, "zt_safetensors_get: index %d not in [0, %d)", i, f->n);
    *out = f->t[i];
    return 0;
}

int zt_safetensors_find(const zt_safetensors *f, const char *name, zt_tensor_info *out)
{
    zt_tensor_info key = {.name = name};
    const zt_tensor_info *t;
    if (!f || !name || !out)
        return zt_fail(ZT_E_INVAL, "zt_safetensors_find: NULL argument");
    if (!(t = bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, cmp_name)))
        return zt_fail(ZT_E_NOTFOUND, "tensor '%s' not found", name);
    *out = *t;
    return 0;
}

const char *zt_safetensors_metadata(const zt_safetensors *f, const char *key)
{
    meta_pair k = {.key = key};
    const meta_pair *m;
    if (!f || !key)
        return NULL;
    m = bsearch(&k, f->meta, (size_t)f->n_meta, sizeof *f->meta, cmp_key);
    return m ? m->value : NULL;
}

/* Exact: every F16 value, subnormals, infinities and NaN payloads included, is a float. */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    float r;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | mant << 13;
    else if (exp)
        bits = sign | (exp + 112) << 23 | mant << 13;
    else {
        r = (float)mant * 0x1p-24f; /* subnormal (or zero): exact, mant < 2^10 */
        memcpy(&bits, &r, 4);
        bits |= sign;
    }
    memcpy(&r, &bits, 4);
    return r;
}

int zt_tensor_to_f32(const zt_tensor_info *t, float *dst, size_t n)
{
    const unsigned char *src;
    const char *name = t && t->name ? t->name : "?";
    if (!t)
        return zt_fail(ZT_E_INVAL, "zt_tensor_to_f32: NULL tensor");
    if ((unsigned)t->dtype >= ZT_DTYPE_COUNT)
        return zt_fail(ZT_E_INVAL, "tensor '%s': invalid dtype %d", name, (int)t->dtype);
    if (t->dtype != ZT_F32 && t->dtype != ZT_F16 && t->dtype != ZT_BF16)
        return zt_fail(ZT_E_UNSUPPORTED, "tensor '%s': dtype %s cannot be converted to F32",
                       name, dtype_names[t->dtype]);
    if (n != t->numel)
        return zt_fail(ZT_E_SHAPE, "tensor '%s': %zu elements, destination holds %zu", name,
                       t->numel, n);
    if (n && (!dst || !t->data))
        return zt_fail(ZT_E_INVAL, "tensor '%s': NULL data or destination", name);
    src = t->data;
    if (t->dtype == ZT_F32) {
        if (n)
            memcpy(dst, src, n * 4);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        uint32_t b;
        memcpy(&h, src + 2 * i, 2);
        if (t->dtype == ZT_F16) {
            dst[i] = f16_to_f32(h);
        } else {
            b = (uint32_t)h << 16;
            memcpy(&dst[i], &b, 4);
        }
    }
    return 0;
}

/* ---- writer ------------------------------------------------------------------------- */

static int valid_utf8(const char *s)
{
    return s && utf8_check((const unsigned char *)s, strlen(s)) == strlen(s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Arguments, sizes (into nbytes[i]) and duplicate names / metadata keys. */
static int check_write_args(const char *path, const zt_tensor_view *tv, int n,
                            const char *const *meta, int n_meta, size_t *nbytes, int fetched)
{
    const char **names;
    size_t total = 0;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const zt_tensor_view *v = &tv[i];
        size_t numel = 1;
        if (!valid_utf8(v->name) || !strcmp(v->name, "__metadata__"))
            return zt_fail(ZT_E_INVAL, "%s: tensor %d: NULL, non-UTF-8 or reserved name",
                           path, i);
        if ((unsigned)v->dtype >= ZT_DTYPE_COUNT || v->ndim < 0 || v->ndim > ZT_MAX_DIMS)
            return zt_fail(ZT_E_INVAL, "%s: tensor '%s': bad dtype %d or ndim %d", path,
                           v->name, (int)v->dtype, v->ndim);
        for (int d = 0; d < v->ndim; d++)
            if (v->shape[d] < 0 || (double)v->shape[d] >= EXACT_MAX ||
                __builtin_mul_overflow(numel, (size_t)v->shape[d], &numel))
                return zt_fail(ZT_E_INVAL, "%s: tensor '%s': bad shape[%d] = %lld", path,
                               v->name, d, (long long)v->shape[d]);
        if (__builtin_mul_overflow(numel, zt_dtype_size(v->dtype), &nbytes[i]))
            return zt_fail(ZT_E_INVAL, "%s: tensor '%s': size overflows", path, v->name);
        if (nbytes[i] && !v->data && !fetched)
            return zt_fail(ZT_E_INVAL, "%s: tensor '%s': NULL data", path, v->name);
        if (__builtin_add_overflow(total, nbytes[i], &total))
            return zt_fail(ZT_E_INVAL, "%s: total data size overflows", path);
    }
    for (int i = 0; i < 2 * n_meta; i++)
        if (!valid_utf8(meta[i]))
            return zt_fail(ZT_E_INVAL, "%s: metadata %s %d is NULL or not UTF-8", path,
                           i % 2 ? "value" : "key", i / 2);
    if (!(names = malloc(((size_t)(n > n_meta ? n : n_meta) + 1) * sizeof *names)))
        return zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
    for (int pass = 0; pass < 2 && !rc; pass++) {
        int m = pass ? n_meta : n;
        for (int i = 0; i < m; i++)
            names[i] = pass ? meta[2 * i] : tv[i].name;
        qsort(names, (size_t)m, sizeof *names, cmp_str);
        for (int i = 1; i < m && !rc; i++)
            if (!strcmp(names[i - 1], names[i]))
                rc = zt_fail(ZT_E_INVAL, "%s: duplicate %s '%s'", path,
                             pass ? "metadata key" : "tensor name", names[i]);
    }
    free(names);
    return rc;
}

/* A JSON string; s is valid UTF-8, so only quote, backslash and controls need escaping. */
static void put_str(FILE *m, const char *s)
{
    fputc('"', m);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(m, "\\%c", c);
        else if (c < 0x20)
            fprintf(m, "\\u%04x", c);
        else
            fputc(c, m);
    }
    fputc('"', m);
}

/* 8-byte length + header JSON, padded with spaces to a multiple of 8; entries in order. */
static int build_header(const char *path, const zt_tensor_view *tv, int n,
                        const size_t *nbytes, const char *const *meta, int n_meta,
                        char **out, size_t *len)
{
    FILE *m = open_memstream(out, len);
    size_t pos = 0;
    uint64_t hlen;
    if (!m)
        return zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
    fputs("01234567{", m);
    for (int i = 0; i < n_meta; i++) {
        fputs(i ? "," : "\"__metadata__\":{", m);
        put_str(m, meta[2 * i]);
        fputc(':', m);
        put_str(m, meta[2 * i + 1]);
    }
    fputs(n_meta && n ? "}," : n_meta ? "}" : "", m);
    for (int i = 0; i < n; i++) {
        put_str(m, tv[i].name);
        fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", dtype_names[tv[i].dtype]);
        for (int d = 0; d < tv[i].ndim; d++)
            fprintf(m, d ? ",%lld" : "%lld", (long long)tv[i].shape[d]);
        fprintf(m, "],\"data_offsets\":[%zu,%zu]}%s", pos, pos + nbytes[i],
                i + 1 < n ? "," : "");
        pos += nbytes[i]; /* no overflow: check_write_args summed them */
    }
    fputc('}', m);
    while (ftell(m) > 0 && ftell(m) % 8)
        fputc(' ', m);
    if (ferror(m) | fclose(m)) {
        free(*out);
        *out = NULL;
        return zt_fail(ZT_E_NOMEM, "%s: cannot build the header", path);
    }
    hlen = *len - 8;
    if (hlen > HEADER_MAX) {
        free(*out);
        *out = NULL;
        return zt_fail(ZT_E_INVAL, "%s: header of %llu bytes exceeds the 100 MB limit", path,
                       (unsigned long long)hlen);
    }
    memcpy(*out, &hlen, 8);
    return 0;
}

typedef struct write_arg {
    const char *path;
    const char *hdr;
    const size_t *nbytes;          /* [0] header, [1 + i] tensor i */
    const zt_tensor_view *tv;
    const int *pieces;             /* per tensor (NULL: one each) */
    zt_piece_fn piece;
    void *arg;
    int i, k;                      /* the next part: piece k of tensor i */
    size_t done;                   /* bytes of tensor i given so far */
} write_arg;

/* part p of the file: the header, then each tensor's pieces in order (p only grows) */
static int write_part(int p, void *wp, const void **data, size_t *len)
{
    write_arg *w = wp;
    if (p == 0) {
        *data = w->hdr;
        *len = w->nbytes[0];
        return 0;
    }
    int i = w->i, k = w->k, np = w->pieces ? w->pieces[i] : 1;
    *data = w->tv[i].data;
    *len = w->nbytes[1 + i]; /* (a piece function sets its own) */
    if (w->piece)
        ZT_TRY(w->piece(i, k, w->arg, data, len));
    w->done += *len;
    if (k + 1 < np) {
        w->k++;
        if (w->done <= w->nbytes[1 + i])
            return 0;
    } else {
        w->i++;
        w->k = 0;
        if (w->done == w->nbytes[1 + i]) {
            w->done = 0;
            return 0;
        }
    }
    return zt_fail(ZT_E_INVAL, "%s: tensor '%s': the pieces give %zu bytes, the shape %zu",
                   w->path, w->tv[i].name, w->done, w->nbytes[1 + i]);
}

int zt_safetensors_write_pieces(const char *path, const zt_tensor_view *tensors, int n,
                                const char *const *metadata, int n_meta, const int *pieces,
                                zt_piece_fn piece, void *arg)
{
    size_t *nbytes = NULL, hsize = 0;
    char *hdr = NULL;
    int rc, parts = 1;

    if (!path || n < 0 || (n && !tensors) || n_meta < 0 || (n_meta && !metadata) ||
        (pieces && !piece))
        return zt_fail(ZT_E_INVAL, "zt_safetensors_write(%s): bad arguments",
                       path ? path : "NULL");
    for (int i = 0; i < n; i++) {
        if (pieces && (pieces[i] < 1 || pieces[i] > INT_MAX - parts))
            return zt_fail(ZT_E_INVAL, "%s: tensor %d: %d pieces", path, i, pieces[i]);
        parts += pieces ? pieces[i] : 1;
    }
    /* nbytes[0] = header, nbytes[1 + i] = tensor i */
    if (!(nbytes = calloc((size_t)n + 1, sizeof *nbytes))) {
        rc = zt_fail(ZT_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((rc = check_write_args(path, tensors, n, metadata, n_meta, nbytes + 1, piece != NULL)) <
            0 ||
        (rc = build_header(path, tensors, n, nbytes + 1, metadata, n_meta, &hdr, &hsize)) < 0)
        goto out;
    nbytes[0] = hsize;
    {
        write_arg w = {path, hdr, nbytes, tensors, pieces, piece, arg, 0, 0, 0};
        rc = zt_file_write_atomic_cb(path, parts, write_part, &w);
    }
out:
    free(hdr);
    free(nbytes);
    return rc;
}

/* a whole tensor per fetch */
typedef struct fetch_arg {
    zt_fetch_fn fetch;
    void *arg;
} fetch_arg;

static int fetch_whole(int i, int k, void *fp, const void **data, size_t *len)
{
    const fetch_arg *f = fp;
    (void)k;
    (void)len; /* the tensor's size, set by write_part */
    return f->fetch(i, f->arg, data);
}

int zt_safetensors_write_cb(const char *path, const zt_tensor_view *tensors, int n,
                            const char *const *metadata, int n_meta, zt_fetch_fn fetch,
                            void *arg)
{
    fetch_arg f = {fetch, arg};
    return zt_safetensors_write_pieces(path, tensors, n, metadata, n_meta, NULL,
                                       fetch ? fetch_whole : NULL, &f);
}

int zt_safetensors_write(const char *path, const zt_tensor_view *tensors, int n,
                         const char *const *metadata, int n_meta)
{
    return zt_safetensors_write_cb(path, tensors, n, metadata, n_meta, NULL, NULL);
}
