/* quant.c - the dynamic quantization map and nearest-code quantization (quant.h). */
#include "quant.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void zt_qmap_dynamic(float map[256], int is_signed)
{
    double v[256];
    int n = 0;
    for (int i = 0; i < 7; i++) {
        int items = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1; /* boundaries */
        double scale = 1.0;
        for (int k = i; k < 6; k++) /* 10^(i-6), exactly as a product of tenths */
            scale /= 10.0;
        for (int j = 0; j + 1 < items; j++) {
            double lo = 0.1 + 0.9 * j / (items - 1), hi = 0.1 + 0.9 * (j + 1) / (items - 1);
            double mid = scale * (lo + hi) / 2.0;
            v[n++] = mid;
            if (is_signed)
                v[n++] = -mid;
        }
    }
    v[n++] = 0.0;
    v[n++] = 1.0;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    for (int i = 0; i < 256; i++)
        map[i] = (float)v[i];
}

uint8_t zt_quantize_nearest(const float map[256], float x)
{
    int lo = 0, hi = 255;
    if (x <= map[0])
        return 0;
    if (x >= map[255])
        return 255;
    while (hi - lo > 1) { /* map[lo] < x < map[hi] (or equal to map[lo]) */
        int mid = (lo + hi) / 2;
        if (map[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    /* nearest; equal distances go to the lower code */
    return (uint8_t)(x - map[lo] <= map[hi] - x ? lo : hi);
}

void zt_qmap_index(const float map[256], uint16_t idx[65536])
{
    for (uint32_t b = 0; b < 65536; b++) {
        /* the bucket's least and greatest values: positive floats grow with their bits,
         * negative ones shrink */
        union { uint32_t u; float f; } lo = {(b << 16) | (b & 0x8000 ? 0xFFFFu : 0u)},
                                       hi = {(b << 16) | (b & 0x8000 ? 0u : 0xFFFFu)};
        if (lo.f != lo.f || hi.f != hi.f) { /* NaN: never quantized */
            idx[b] = ZT_QIDX_SCAN;
            continue;
        }
        /* the nearest code is monotonic in x: equal at both ends means the whole bucket */
        unsigned c = zt_quantize_nearest(map, lo.f), d = zt_quantize_nearest(map, hi.f);
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
