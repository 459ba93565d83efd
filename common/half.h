/* half.h - bf16 and fp16 storage: conversions from fp32 with round-to-nearest-even, as
 * PyTorch rounds (c10/util/BFloat16.h round_to_nearest_even; c10/util/Half.h, after the FP16
 * library's fp16_ieee_from_fp32_value), and back (exact). NaN stays NaN: bf16 gives 0x7fc0
 * with the sign cleared (as c10 does); fp16 keeps the sign and the top ten payload bits and
 * sets the quiet bit (what F16C's vcvtps2ph does; 0x7e00 for the usual quiet NaN, as c10),
 * and widens to a quiet NaN with its payload (vcvtph2ps).
 * fp16 rounds values from 65520 up to infinity and keeps subnormals (2^-24 steps). A portable
 * path and an AVX2 one (with F16C for fp16) give the same bits for every input; the wide one
 * is used where the CPU has it. Single-threaded; dst and src must not overlap. */
#ifndef ZT_COMMON_HALF_H
#define ZT_COMMON_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* a 16-bit floating-point format: bf16 or fp16 (IEEE binary16) */
enum { ZT_HALF_BF16 = 0, ZT_HALF_F16 = 1 };

void zt_bf16_from_f32(uint16_t *dst, const float *src, size_t n);
void zt_f32_from_bf16(float *dst, const uint16_t *src, size_t n);
void zt_f16_from_f32(uint16_t *dst, const float *src, size_t n);
void zt_f32_from_f16(float *dst, const uint16_t *src, size_t n);

/* either format by its ZT_HALF_* */
void zt_half_narrow(int dt, uint16_t *dst, const float *src, size_t n);
void zt_half_widen(int dt, float *dst, const uint16_t *src, size_t n);
/* one fp16 value, portable (the arrays' bits) */
uint16_t zt_f16_round(float f);
float zt_f16_value(uint16_t h);

/* dst[i] = src[i] rounded to bf16 (fp16 when to_fp16), as an fp32 value: the compute copy
 * of a parameter held in an fp32 container. dst may be src. */
void zt_half_round(int to_fp16, float *dst, const float *src, size_t n);

/* one path of a conversion, for tests: kind 0 bf16_from_f32, 1 f32_from_bf16, 2
 * f16_from_f32, 3 f32_from_f16; path 0 portable, 1 AVX2 (+F16C). -1 when the CPU lacks it. */
int zt_half_path(int path, int kind, void *dst, const void *src, size_t n);
/* 1 when the AVX2 path is in use */
int zt_half_wide(void);

/* one value, portable (the same bits as the arrays') */
static inline uint16_t zt_bf16_round(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float zt_bf16_value(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t zt_half_of(int dt, float f)
{
    return dt == ZT_HALF_F16 ? zt_f16_round(f) : zt_bf16_round(f);
}

static inline float zt_half_value(int dt, uint16_t h)
{
    return dt == ZT_HALF_F16 ? zt_f16_value(h) : zt_bf16_value(h);
}

#endif
