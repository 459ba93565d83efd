/* quant.c - the dynamic quantization map, bitsandbytes' quantizer and its lookup, and the SIMD
 * quantizer's zone tables (quant.h). Not here: the moments' update (adam8bit.c). */
#include "quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* torch.linspace(0.1, 1, k, dtype=float32) as torch's CPU kernel computes it (quant.h): w
 * lanes per vector, fused: the base and the tail in one rounding (fmaf; the file is built
 * with fp-contract off, so the other products and sums round separately) */
static void torch_linspace(float *b, int k, int w, int fused)
{
    const float start = 0.1f, end = 1.0f, step = (end - start) / (float)(k - 1);
    const int half = k / 2;
    int i = 0;
    for (; i + 2 * w <= k; i += 2 * w)
        for (int v = 0; v < 2; v++) {
            int idx = i + v * w;
            float base;
            if (idx < half) {
                float prod = step * (float)idx;
                base = fused ? fmaf(step, (float)idx, start) : start + prod;
            } else {
                float prod = step * (float)(k - idx - 1);
                base = fused ? fmaf(-step, (float)(k - idx - 1), end) : end - prod;
            }
            for (int j = 0; j < w; j++) {
                float prod = (float)j * step;
                b[idx + j] = base + prod;
            }
        }
    for (; i < k; i++) {
        if (i < half) {
            float prod = step * (float)i;
            b[i] = fused ? fmaf(step, (float)i, start) : start + prod;
        } else {
            float prod = step * (float)(k - i - 1);
            b[i] = fused ? fmaf(-step, (float)(k - i - 1), end) : end - prod;
        }
    }
}

void zt_qmap_dynamic_torch(float map[256], int is_signed, int flavour)
{
    /* (float)10^(i-6): python's 10 ** (i - 6), a double, as torch multiplies a float32
     * tensor by it */
    static const double decade[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    int w = flavour == ZT_QMAP_TORCH_AVX512 ? 16 : 8, fused = flavour != ZT_QMAP_TORCH_DEFAULT;
    float b[129];
    int n = 0;
    for (int i = 0; i < 7; i++) {
        int items = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1; /* boundaries */
        float scale = (float)decade[i];
        torch_linspace(b, items, w, fused);
        for (int j = 0; j + 1 < items; j++) {
            float sum = b[j] + b[j + 1], mean = sum / 2.0f;
            map[n++] = scale * mean;
            if (is_signed)
                map[n++] = -scale * mean;
        }
    }
    map[n++] = 0.0f;
    map[n++] = 1.0f;
    qsort(map, (size_t)n, sizeof map[0], cmp_float);
}

void zt_qmap_dynamic(float map[256], int is_signed)
{
    zt_qmap_dynamic_torch(map, is_signed, ZT_QMAP_TORCH_AVX2);
}

uint8_t zt_quantize_bnb(const float map[256], int is_signed, float x)
{
    int pivot = 127, upper_pivot = 255, lower_pivot = 0;
    float lower = is_signed ? -1.0f : 0.0f, upper = 1.0f, val = map[pivot];
    for (int i = 64; i > 0; i >>= 1) {
        if (x > val) {
            lower_pivot = pivot;
            lower = val;
            pivot += i;
        } else {
            upper_pivot = pivot;
            upper = val;
            pivot -= i;
        }
        val = map[pivot];
    }
    if (x > val) {
        float sum = upper + val, mid = sum * 0.5f;
        return (uint8_t)(x > mid ? upper_pivot : pivot);
    }
    float sum = lower + val, mid = sum * 0.5f;
    return (uint8_t)(x < mid ? lower_pivot : pivot);
}

void zt_qmap_index(const float map[256], int is_signed, uint16_t idx[65536])
{
    for (uint32_t b = 0; b < 65536; b++) {
        /* the bucket's least and greatest values: positive floats grow with their bits,
         * negative ones shrink */
        union { uint32_t u; float f; } lo = {(b << 16) | (b & 0x8000 ? 0xFFFFu : 0u)},
                                       hi = {(b << 16) | (b & 0x8000 ? 0u : 0xFFFFu)};
        if (lo.f != lo.f || hi.f != hi.f) { /* NaN (and the infinities' buckets): scanned */
            idx[b] = ZT_QIDX_SCAN;
            continue;
        }
        /* the code is monotonic in x (a count of thresholds passed): equal at both ends
         * means the whole bucket */
        unsigned c = zt_quantize_bnb(map, is_signed, lo.f),
                 d = zt_quantize_bnb(map, is_signed, hi.f);
        idx[b] = (uint16_t)(c == d ? c : d == c + 1 ? c | ZT_QIDX_PAIR : c | ZT_QIDX_SCAN);
    }
}

uint8_t zt_qmap_zero(const float map[256])
{
    for (int i = 0; i < 256; i++)
        if (map[i] == 0.0f)
            return (uint8_t)i;
    return 0;
}

/* ---- the SIMD quantizer's zone tables (quant.h) ---------------------------------------- */

static float bits_float(uint32_t u)
{
    union { uint32_t u; float f; } c = {u};
    return c.f;
}

/* A code boundary: the least a in [0, 1] (as bits) with code(a) >= code (neg = 0), or with
 * code(-a) <= code (neg = 1); 0x3F800001 when there is none. The code is monotonic in x. */
typedef struct qside {
    const float *map;
    const uint16_t *idx;
    int neg;
} qside;

static int side_reached(const qside *s, uint32_t a, unsigned code)
{
    float x = bits_float(a);
    unsigned c = zt_quantize_fast(s->map, s->idx, s->neg ? -x : x);
    return s->neg ? c <= code : c >= code;
}

static uint32_t least_reaching(const qside *s, unsigned code)
{
    uint32_t lo = 0, hi = 0x3F800001u; /* !reached(lo) <= ... <= reached(hi) */
    if (side_reached(s, 0, code))
        return 0;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (side_reached(s, mid, code))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* P exactly as the SIMD code computes it: a truncation of the AVX2 quantizer's product then
 * sum (volatile: never contracted into a fused multiply-add) or of the AVX-512 quantizer's
 * fused multiply-add (fused = 1: fmaf rounds once, as vfmadd does). NaN gives INT32_MIN there
 * (cvttps2dq). */
static int32_t zone_p(uint32_t a, float za, float zc, int fused)
{
    volatile float s;
    if (fused)
        s = fmaf(bits_float(a), za, zc);
    else {
        volatile float t = bits_float(a) * za;
        s = t + zc;
    }
    return s == s && s < 2147483648.0f && s >= -2147483648.0f ? (int32_t)s : INT32_MIN;
}

/* left to zt_quantize_fast by the SIMD code: P % 4096 is 0 or 1 (P = 4096 position + 1, the
 * position within 1/4096 of an integer) */
static int near_boundary(int32_t p)
{
    return (p & 4094) == 0;
}

int zt_qmap_zones(const float map[256], const uint16_t idx[65536], int is_signed, zt_qzones *z)
{
    unsigned zero = is_signed ? 127 : 0, base[9], n[9];
    uint32_t zlw[10], zhi[10]; /* zone s (1..8) starts at zlw for one sign, zhi for the other */
    qside pos = {map, idx, 0}, neg = {map, idx, 1};
    base[0] = zero;
    n[0] = 1;
    for (int d = 0; d < 7; d++) {
        n[1 + d] = is_signed ? 1u << d : 2u << d;
        base[1 + d] = base[d] + n[d];
    }
    base[8] = base[7] + n[7];
    n[8] = 1;
    if (base[8] != 255 || zt_quantize_fast(map, idx, 0.0f) != zero ||
        zt_quantize_fast(map, idx, -0.0f) != zero)
        return -1;
    for (int s = 1; s <= 8; s++) {
        uint32_t p = least_reaching(&pos, base[s]), q = p;
        if (is_signed && s < 8)
            q = least_reaching(&neg, 254 - base[s]);
        zlw[s] = p < q ? p : q;
        zhi[s] = p < q ? q : p;
        if (zlw[s] == 0 || zhi[s] > 0x3F800000u || (s > 1 && zlw[s] <= zhi[s - 1]) ||
            zhi[s] - zlw[s] > 4096)
            return -1;
    }
    zlw[9] = zhi[9] = 0x3F800001u; /* past 1 */
    /* a negative x at or past the positive side's 1.0 zone: the most negative code (the SIMD
     * code caps 254 - 255 at 0) */
    if (is_signed && zt_quantize_fast(map, idx, -bits_float(zhi[8])) != 0)
        return -1;
    for (int s = 0; s < 16; s++) { /* unused zones: code 0 */
        z->a[s] = 0.0f;
        z->c[s] = 2049.0f;
        z->top[s] = 0;
    }
    /* zone 0: from zero code + 1/2 up to zero code + 1 at the first boundary (so that where
     * the boundary differs by sign, P is at an integer and the element is left over) */
    z->a[0] = (float)(2048.0 / bits_float(zlw[1]));
    z->c[0] = (float)(4096.0 * (zero + 0.5) + 1.0);
    z->top[0] = (int32_t)zero;
    double scale = 1e-6; /* decade d: n midpoints evenly spaced on [0.1, 1] * 10^(d-6) */
    for (int s = 1; s <= 7; s++, scale *= 10.0) {
        z->a[s] = (float)(4096.0 * n[s] / (0.9 * scale));
        z->c[s] = (float)(4096.0 * (base[s] - n[s] / 9.0) + 1.0);
        z->top[s] = (int32_t)(base[s] + n[s] - 1);
    }
    z->c[8] = (float)(4096.0 * 255.5 + 1.0);
    z->top[8] = 255;
    for (int fused = 0; fused < 2; fused++) /* both quantizers' P */
        for (int s = 0; s <= 8; s++) {
            unsigned top = (unsigned)z->top[s];
            if (s > 0 && zone_p(zhi[s], z->a[s], z->c[s], fused) < 4096 * (int32_t)base[s])
                return -1; /* the zone's least |x| (both signs) at its first code */
            for (unsigned k = base[s] + 1; k <= top; k++) /* its code boundaries, both sides */
                for (int sg = 0; sg <= is_signed; sg++) {
                    uint32_t t = sg ? least_reaching(&neg, 254 - k) : least_reaching(&pos, k);
                    if (t == 0 || t > 0x3F800000u ||
                        zone_p(t, z->a[s], z->c[s], fused) < 4096 * (int32_t)k ||
                        zone_p(t - 1, z->a[s], z->c[s], fused) > 4096 * (int32_t)k + 1)
                        return -1;
                }
            /* the next zone's start: at most its least |x| by either sign; where the two
             * differ, every |x| between is left over (this zone's P at an integer) */
            for (uint32_t a = zlw[s + 1]; a < zhi[s + 1]; a++)
                if (!near_boundary(zone_p(a, z->a[s], z->c[s], fused)))
                    return -1;
        }
    for (uint32_t b = 0; b < 16; b++) { /* the pairs of binades: exponents 96 + 2b, 97 + 2b */
        uint32_t lo = b ? (96 + 2 * b) << 23 : 0;
        uint32_t hi = b == 15 ? 0x3F800000u : ((98 + 2 * b) << 23) - 1;
        int inside = 0, zone = 0;
        z->zhi[b] = INFINITY;
        for (int s = 1; s <= 8; s++) {
            if (zhi[s] <= lo)
                zone = s;
            else if (zlw[s] <= hi) {
                inside++;
                z->zhi[b] = bits_float(zhi[s]);
            }
        }
        if (inside > 1)
            return -1;
        z->zlo[b] = zone;
        for (int up = 0; up < 2; up++) {
            int s = zone + (up && inside);
            z->a2[b + 16 * up] = z->a[s];
            z->c2[b + 16 * up] = z->c[s];
            z->top2[b + 16 * up] = z->top[s];
        }
    }
    return 0;
}
