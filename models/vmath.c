/* vmath.c - see vmath.h. The scalar and the eight-wide paths compute the same expressions;
 * only erff/expf/tanhf differ (libm's vs libmvec's, both within a few ulp). */
#include "vmath.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const float INV_SQRT2 = 0.70710678118654752f, INV_SQRT_2PI = 0.3989422804014327f;
/* gelu_new (tanh): sqrt(2/pi), 0.044715 and its triple */
static const float GT_K = 0.7978845608028654f, GT_C = 0.044715f, GT_C3 = 0.134145f;

int vm_wide(void)
{
    static int v = -1;
    if (v < 0)
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
    return v;
}

/* ---- scalar ------------------------------------------------------------------------- */

static void gelu_1(float *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        out[i] = v * 0.5f * (1.0f + erff(v * INV_SQRT2));
    }
}

static void gelu_grad_1(float *dinp, const float *x, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float cdf = 0.5f * (1.0f + erff(v * INV_SQRT2));
        float pdf = INV_SQRT_2PI * expf(-0.5f * v * v);
        dinp[i] += dout[i] * (cdf + v * pdf);
    }
}

/* Hugging Face's NewGELUActivation operation by operation: 0.5 x (1 + tanh(k (x + c x^3))) */
static void gelu_tanh_1(float *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], inner = GT_K * (v + GT_C * (v * v * v));
        out[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

static void gelu_tanh_grad_1(float *dinp, const float *x, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], inner = GT_K * (v + GT_C * (v * v * v)), th = tanhf(inner);
        float d = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GT_K * (1.0f + GT_C3 * v * v);
        dinp[i] += d * dout[i];
    }
}

/* torch's SiLU: x * sigmoid(x), sigmoid = 1 / (1 + exp(-x)) */
static void silu_1(float *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], s = 1.0f / (1.0f + expf(-v));
        out[i] = v * s;
    }
}

static void silu_grad_1(float *dinp, const float *x, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i], s = 1.0f / (1.0f + expf(-v));
        dinp[i] += s * (1.0f + v * (1.0f - s)) * dout[i];
    }
}

static double exp_sum_1(float *y, const float *x, float sub, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        float e = expf(x[i] - sub);
        if (y)
            y[i] = e;
        s += e;
    }
    return s;
}

static void keep_1(float *y, const float *x, const uint32_t *bits, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * scale;
        y[i] = (bits[i / 32] >> (i % 32)) & 1u ? v : 0.0f;
    }
}

static void drop_1(float *y, const float *x, const float *r, const uint32_t *u, size_t n,
                   uint32_t thresh, float scale, uint32_t *bits)
{
    for (size_t w = 0; bits && w < (n + 31) / 32; w++) {
        uint32_t word = 0;
        for (size_t j = w * 32; j < n && j < w * 32 + 32; j++)
            word |= (uint32_t)(u[j] >= thresh) << (j - w * 32);
        bits[w] = word;
    }
    for (size_t j = 0; j < n; j++) {
        float v = u[j] < thresh ? 0.0f : x[j] * scale;
        y[j] = r ? v + r[j] : v;
    }
}

static void softmax_1(float *row, const float *madd, float div, size_t n)
{
    float mx = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        float v = row[j] / div;
        if (madd)
            v += madd[j];
        row[j] = v;
        mx = v > mx ? v : mx;
    }
    float inv = (float)(1.0 / exp_sum_1(row, row, mx, n));
    for (size_t j = 0; j < n; j++)
        row[j] *= inv;
}

static void softmax_grad_1(float *dr, const float *ar, float div, size_t n)
{
    double dot = 0.0;
    for (size_t j = 0; j < n; j++)
        dot += (double)ar[j] * dr[j];
    float fd = (float)dot;
    for (size_t j = 0; j < n; j++)
        dr[j] = ar[j] * (dr[j] - fd) / div;
}

static double sqdev_1(const float *x, float mu, size_t n)
{
    double ss = 0.0;
    for (size_t c = 0; c < n; c++) {
        double d = (double)x[c] - mu;
        ss += d * d;
    }
    return ss;
}

static void ln_grad_sums_1(const float *dy, const float *w, const float *x, float mu, float rs,
                           size_t n, double *sd, double *sdx)
{
    double a = 0.0, b = 0.0;
    for (size_t c = 0; c < n; c++) {
        float xh = (x[c] - mu) * rs, g = dy[c] * w[c];
        a += g;
        b += (double)g * xh;
    }
    *sd = a;
    *sdx = b;
}

/* ---- few-row products (see vmath.h) ------------------------------------------------ */

static float dot8_1(const float *a, const float *b, int K)
{
    float l[8] = {0};
    int k = 0;
    for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; j++)
            l[j] = fmaf(a[k + j], b[k + j], l[j]);
    for (int j = 0; k + j < K; j++)
        l[j] = fmaf(a[k + j], b[k + j], l[j]);
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

void vm_gemm_nt_small_1(float *out, size_t ldo, const float *inp, const float *w, int M, int K,
                        int n0, int n1)
{
    for (int n = n0; n < n1; n++)
        for (int m = 0; m < M; m++)
            out[(size_t)m * ldo + n] = dot8_1(inp + (size_t)m * K, w + (size_t)n * K, K);
}

/* ---- eight-wide (AVX2 + libmvec) ---------------------------------------------------- */

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include <immintrin.h>

__m256 _ZGVdN8v_erff(__m256 x);
__m256 _ZGVdN8v_expf(__m256 x);
__m256 _ZGVdN8v_tanhf(__m256 x);

/* the low and high four floats as doubles */
static inline __m256d lo_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
static inline __m256d hi_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

/* eight double lanes (lo: lanes 0-3, hi: 4-7) added in lane order */
static double lanes_sum(__m256d lo, __m256d hi)
{
    double l[8], sum = 0.0;
    _mm256_storeu_pd(l, lo);
    _mm256_storeu_pd(l + 4, hi);
    for (int j = 0; j < 8; j++)
        sum += l[j];
    return sum;
}

static inline __m256 gelu_8(__m256 x)
{
    __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(x, _mm256_set1_ps(INV_SQRT2)));
    return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* Phi(x) + x phi(x) */
static inline __m256 gelu_grad_8(__m256 x)
{
    __m256 e = _ZGVdN8v_erff(_mm256_mul_ps(x, _mm256_set1_ps(INV_SQRT2)));
    __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    __m256 a = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), x), x);
    __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(INV_SQRT_2PI), _ZGVdN8v_expf(a));
    return _mm256_add_ps(cdf, _mm256_mul_ps(x, pdf));
}

/* the scalar expressions, eight at a time */
static inline __m256 gt_inner(__m256 v)
{
    __m256 cube = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
    return _mm256_mul_ps(_mm256_set1_ps(GT_K),
                         _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(GT_C), cube)));
}

static inline __m256 gelu_tanh_8(__m256 v)
{
    __m256 th = _ZGVdN8v_tanhf(gt_inner(v));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), th));
}

static inline __m256 gelu_tanh_grad_8(__m256 v)
{
    __m256 th = _ZGVdN8v_tanhf(gt_inner(v)), one = _mm256_set1_ps(1.0f),
           half = _mm256_set1_ps(0.5f);
    __m256 a = _mm256_mul_ps(half, _mm256_add_ps(one, th));
    __m256 b = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_sub_ps(one, _mm256_mul_ps(th, th)));
    b = _mm256_mul_ps(b, _mm256_set1_ps(GT_K));
    __m256 c = _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GT_C3), v), v));
    return _mm256_add_ps(a, _mm256_mul_ps(b, c));
}

/* f over n floats, eight at a time (a partial last group padded) */
#define MAP_8N(f, out, x, n)                                                                 \
    do {                                                                                     \
        size_t i_ = 0;                                                                       \
        for (; i_ + 8 <= (n); i_ += 8)                                                       \
            _mm256_storeu_ps((out) + i_, f(_mm256_loadu_ps((x) + i_)));                      \
        if (i_ < (n)) {                                                                      \
            float t_[8] = {0};                                                               \
            memcpy(t_, (x) + i_, ((n) - i_) * sizeof(float));                                \
            _mm256_storeu_ps(t_, f(_mm256_loadu_ps(t_)));                                    \
            memcpy((out) + i_, t_, ((n) - i_) * sizeof(float));                              \
        }                                                                                    \
    } while (0)

static void gelu_tanh_8n(float *out, const float *x, size_t n) { MAP_8N(gelu_tanh_8, out, x, n); }

/* dinp[i] += f'(x[i]) * dout[i], eight at a time (a partial last group padded) */
#define ACC_8N(f, dinp, x, dout, n)                                                          \
    do {                                                                                     \
        size_t i_ = 0;                                                                       \
        for (; i_ + 8 <= (n); i_ += 8) {                                                     \
            __m256 g_ = _mm256_mul_ps(f(_mm256_loadu_ps((x) + i_)),                          \
                                      _mm256_loadu_ps((dout) + i_));                         \
            _mm256_storeu_ps((dinp) + i_, _mm256_add_ps(_mm256_loadu_ps((dinp) + i_), g_)); \
        }                                                                                    \
        if (i_ < (n)) {                                                                      \
            float t_[8] = {0};                                                               \
            memcpy(t_, (x) + i_, ((n) - i_) * sizeof(float));                                \
            _mm256_storeu_ps(t_, f(_mm256_loadu_ps(t_)));                                    \
            for (size_t j_ = 0; i_ + j_ < (n); j_++)                                         \
                (dinp)[i_ + j_] += t_[j_] * (dout)[i_ + j_];                                 \
        }                                                                                    \
    } while (0)

static void gelu_tanh_grad_8n(float *dinp, const float *x, const float *dout, size_t n)
{
    ACC_8N(gelu_tanh_grad_8, dinp, x, dout, n);
}

static void gelu_8n(float *out, const float *x, size_t n) { MAP_8N(gelu_8, out, x, n); }

static inline __m256 sigmoid_8(__m256 v)
{
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_setzero_ps(), v));
    return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

static inline __m256 silu_8(__m256 v) { return _mm256_mul_ps(v, sigmoid_8(v)); }

static inline __m256 silu_grad_8(__m256 v)
{
    __m256 s = sigmoid_8(v), one = _mm256_set1_ps(1.0f);
    return _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(v, _mm256_sub_ps(one, s))));
}

static void silu_8n(float *out, const float *x, size_t n) { MAP_8N(silu_8, out, x, n); }

static void silu_grad_8n(float *dinp, const float *x, const float *dout, size_t n)
{
    ACC_8N(silu_grad_8, dinp, x, dout, n);
}

static void gelu_grad_8n(float *dinp, const float *x, const float *dout, size_t n)
{
    ACC_8N(gelu_grad_8, dinp, x, dout, n);
}

/* lane sums in double, lanes added in order at the end */
static double exp_sum_8n(float *y, const float *x, float sub, size_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    __m256 s = _mm256_set1_ps(sub);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        if (y)
            _mm256_storeu_ps(y + i, e);
        lo = _mm256_add_pd(lo, lo_pd(e));
        hi = _mm256_add_pd(hi, hi_pd(e));
    }
    double sum = lanes_sum(lo, hi);
    if (i < n) {
        float t[8];
        for (int j = 0; j < 8; j++)
            t[j] = i + j < n ? x[i + j] : sub;
        _mm256_storeu_ps(t, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(t), s)));
        for (size_t j = 0; i + j < n; j++) {
            if (y)
                y[i + j] = t[j];
            sum += t[j];
        }
    }
    return sum;
}

static void keep_8n(float *y, const float *x, const uint32_t *bits, size_t n, float scale)
{
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 sc = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i w = _mm256_set1_epi32((int)bits[i / 32]);
        for (int g = 0; g < 4; g++) {
            __m256i b = _mm256_and_si256(w, _mm256_slli_epi32(lane, 8 * g));
            __m256 drop = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * g), sc);
            _mm256_storeu_ps(y + i + 8 * g, _mm256_andnot_ps(drop, v));
        }
    }
    keep_1(y + i, x + i, bits + i / 32, n - i, scale);
}

static void drop_8n(float *y, const float *x, const float *r, const uint32_t *u, size_t n,
                    uint32_t thresh, float scale, uint32_t *bits)
{
    /* unsigned u >= thresh as signed compare of both sides with the top bit flipped */
    const __m256i flip = _mm256_set1_epi32((int)0x80000000u);
    const __m256i th = _mm256_xor_si256(_mm256_set1_epi32((int)thresh), flip);
    const __m256 sc = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint32_t word = 0;
        for (int g = 0; g < 4; g++) {
            size_t o = i + 8 * (size_t)g;
            __m256i uu = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(u + o)), flip);
            __m256 drop = _mm256_castsi256_ps(_mm256_cmpgt_epi32(th, uu)); /* u < thresh */
            __m256 v = _mm256_andnot_ps(drop, _mm256_mul_ps(_mm256_loadu_ps(x + o), sc));
            if (r)
                v = _mm256_add_ps(v, _mm256_loadu_ps(r + o));
            _mm256_storeu_ps(y + o, v);
            word |= (uint32_t)(~_mm256_movemask_ps(drop) & 0xff) << (8 * g);
        }
        if (bits)
            bits[i / 32] = word;
    }
    drop_1(y + i, x + i, r ? r + i : NULL, u + i, n - i, thresh, scale,
           bits ? bits + i / 32 : NULL);
}

/* sum of (double)a[j] * b[j] (b NULL: of a[j]) in eight double lanes, added in order */
static double dot_8n(const float *a, const float *b, size_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 va = _mm256_loadu_ps(a + i);
        __m256d al = lo_pd(va), ah = hi_pd(va);
        if (b) {
            __m256 vb = _mm256_loadu_ps(b + i);
            al = _mm256_mul_pd(al, lo_pd(vb));
            ah = _mm256_mul_pd(ah, hi_pd(vb));
        }
        lo = _mm256_add_pd(lo, al);
        hi = _mm256_add_pd(hi, ah);
    }
    double sum = lanes_sum(lo, hi);
    for (; i < n; i++)
        sum += b ? (double)a[i] * b[i] : (double)a[i];
    return sum;
}

static void softmax_8n(float *row, const float *madd, float div, size_t n)
{
    const __m256 d = _mm256_set1_ps(div);
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(row + i), d);
        if (madd)
            v = _mm256_add_ps(v, _mm256_loadu_ps(madd + i));
        _mm256_storeu_ps(row + i, v);
        vmx = _mm256_max_ps(vmx, v);
    }
    float m8[8], mx = -INFINITY;
    _mm256_storeu_ps(m8, vmx);
    for (int j = 0; j < 8; j++)
        mx = m8[j] > mx ? m8[j] : mx;
    for (; i < n; i++) {
        float v = row[i] / div;
        if (madd)
            v += madd[i];
        row[i] = v;
        mx = v > mx ? v : mx;
    }
    const __m256 inv = _mm256_set1_ps((float)(1.0 / exp_sum_8n(row, row, mx, n)));
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), inv));
    for (; i < n; i++)
        row[i] *= _mm256_cvtss_f32(inv);
}

static void softmax_grad_8n(float *dr, const float *ar, float div, size_t n)
{
    float fd = (float)dot_8n(ar, dr, n);
    const __m256 f = _mm256_set1_ps(fd), d = _mm256_set1_ps(div);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dr + i), f);
        _mm256_storeu_ps(dr + i, _mm256_div_ps(_mm256_mul_ps(_mm256_loadu_ps(ar + i), g), d));
    }
    for (; i < n; i++)
        dr[i] = ar[i] * (dr[i] - fd) / div;
}

static double sqdev_8n(const float *x, float mu, size_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd(), m = _mm256_set1_pd(mu);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d dl = _mm256_sub_pd(lo_pd(v), m), dh = _mm256_sub_pd(hi_pd(v), m);
        lo = _mm256_add_pd(lo, _mm256_mul_pd(dl, dl));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(dh, dh));
    }
    return lanes_sum(lo, hi) + sqdev_1(x + i, mu, n - i);
}

static void ln_grad_sums_8n(const float *dy, const float *w, const float *x, float mu,
                            float rs, size_t n, double *sd, double *sdx)
{
    __m256d al = _mm256_setzero_pd(), ah = _mm256_setzero_pd();
    __m256d bl = _mm256_setzero_pd(), bh = _mm256_setzero_pd();
    const __m256 m = _mm256_set1_ps(mu), r = _mm256_set1_ps(rs);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), r);
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dy + i), _mm256_loadu_ps(w + i));
        __m256d gl = lo_pd(g), gh = hi_pd(g);
        al = _mm256_add_pd(al, gl);
        ah = _mm256_add_pd(ah, gh);
        bl = _mm256_add_pd(bl, _mm256_mul_pd(gl, lo_pd(xh)));
        bh = _mm256_add_pd(bh, _mm256_mul_pd(gh, hi_pd(xh)));
    }
    double ta, tb;
    ln_grad_sums_1(dy + i, w + i, x + i, mu, rs, n - i, &ta, &tb);
    *sd = lanes_sum(al, ah) + ta;
    *sdx = lanes_sum(bl, bh) + tb;
}

/* the eight lanes of v summed as dot8_1 sums them */
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* 0+4 .. 3+7 */
    __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));                                   /* (0+4)+(2+6), (1+5)+(3+7) */
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

/* four rows of w against two rows of inp at a time: w's rows stay in cache while every row
 * of inp passes them, so w is read from memory once */
static void gemm_nt_small_8(float *out, size_t ldo, const float *inp, const float *w, int M,
                            int K, int n0, int n1)
{
    int K8 = K & ~7, rem = K - K8, n = n0;
    const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256i tail = _mm256_loadu_si256((const __m256i *)(lanes + 8 - rem));
    for (; n + 4 <= n1; n += 4) {
        const float *w0 = w + (size_t)n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        int m = 0;
        for (; m + 2 <= M; m += 2) {
            const float *x0 = inp + (size_t)m * K, *x1 = x0 + K;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            for (int k = 0; k < K8; k += 8) {
                __m256 u = _mm256_loadu_ps(x0 + k), v = _mm256_loadu_ps(x1 + k);
                __m256 b0 = _mm256_loadu_ps(w0 + k), b1 = _mm256_loadu_ps(w1 + k);
                __m256 b2 = _mm256_loadu_ps(w2 + k), b3 = _mm256_loadu_ps(w3 + k);
                a00 = _mm256_fmadd_ps(u, b0, a00);
                a01 = _mm256_fmadd_ps(u, b1, a01);
                a02 = _mm256_fmadd_ps(u, b2, a02);
                a03 = _mm256_fmadd_ps(u, b3, a03);
                a10 = _mm256_fmadd_ps(v, b0, a10);
                a11 = _mm256_fmadd_ps(v, b1, a11);
                a12 = _mm256_fmadd_ps(v, b2, a12);
                a13 = _mm256_fmadd_ps(v, b3, a13);
            }
            if (rem) {
                __m256 u = _mm256_maskload_ps(x0 + K8, tail), v = _mm256_maskload_ps(x1 + K8, tail);
                __m256 b0 = _mm256_maskload_ps(w0 + K8, tail), b1 = _mm256_maskload_ps(w1 + K8, tail);
                __m256 b2 = _mm256_maskload_ps(w2 + K8, tail), b3 = _mm256_maskload_ps(w3 + K8, tail);
                a00 = _mm256_fmadd_ps(u, b0, a00);
                a01 = _mm256_fmadd_ps(u, b1, a01);
                a02 = _mm256_fmadd_ps(u, b2, a02);
                a03 = _mm256_fmadd_ps(u, b3, a03);
                a10 = _mm256_fmadd_ps(v, b0, a10);
                a11 = _mm256_fmadd_ps(v, b1, a11);
                a12 = _mm256_fmadd_ps(v, b2, a12);
                a13 = _mm256_fmadd_ps(v, b3, a13);
            }
            float *o0 = out + (size_t)m * ldo + n, *o1 = o0 + ldo;
            o0[0] = hsum8(a00), o0[1] = hsum8(a01), o0[2] = hsum8(a02), o0[3] = hsum8(a03);
            o1[0] = hsum8(a10), o1[1] = hsum8(a11), o1[2] = hsum8(a12), o1[3] = hsum8(a13);
        }
        if (m < M) /* an odd row */
            vm_gemm_nt_small_1(out + (size_t)m * ldo, ldo, inp + (size_t)m * K, w, 1, K, n, n + 4);
    }
    if (n < n1) { /* the last rows of w, one at a time */
        for (; n < n1; n++)
            for (int m = 0; m < M; m++) {
                const float *x = inp + (size_t)m * K, *b = w + (size_t)n * K;
                __m256 a = _mm256_setzero_ps();
                for (int k = 0; k < K8; k += 8)
                    a = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(b + k), a);
                if (rem)
                    a = _mm256_fmadd_ps(_mm256_maskload_ps(x + K8, tail), _mm256_maskload_ps(b + K8, tail), a);
                out[(size_t)m * ldo + n] = hsum8(a);
            }
    }
}

#pragma GCC pop_options


/* ---- few-row products with 32 vector registers (AVX-512VL) ------------------------- */
/* The eight-wide kernel again, four rows of w against four rows of inp (16 accumulators):
 * eight loads per 16 fused multiply-adds instead of ten per eight. Still eight lanes of
 * __m256, summed by hsum8: the bits of the portable path. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl")
#define FMA4(acc, x, b0, b1, b2, b3)                                                            \
    acc##0 = _mm256_fmadd_ps(x, b0, acc##0), acc##1 = _mm256_fmadd_ps(x, b1, acc##1),          \
    acc##2 = _mm256_fmadd_ps(x, b2, acc##2), acc##3 = _mm256_fmadd_ps(x, b3, acc##3)
static void gemm_nt_small_16(float *out, size_t ldo, const float *inp, const float *w, int M,
                             int K, int n0, int n1)
{
    int K8 = K & ~7, rem = K - K8, n = n0;
    const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256i tail = _mm256_loadu_si256((const __m256i *)(lanes + 8 - rem));
    for (; n + 4 <= n1; n += 4) {
        const float *w0 = w + (size_t)n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        int m = 0;
        for (; m + 4 <= M; m += 4) {
            const float *x0 = inp + (size_t)m * K, *x1 = x0 + K, *x2 = x1 + K, *x3 = x2 + K;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0,
                   b3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0, d0 = a0, d1 = a0, d2 = a0, d3 = a0;
            const char *pf = (const char *)(w3 + K); /* the next four rows, while on the first */
            int pfk = m == 0 && n + 8 <= n1 ? K8 : 0;
            for (int k = 0; k < K8; k += 8) {
                if (k < pfk && !(k & 15)) {
                    _mm_prefetch(pf + 4 * k, _MM_HINT_T0);
                    _mm_prefetch(pf + 4 * ((size_t)K + k), _MM_HINT_T0);
                    _mm_prefetch(pf + 4 * (2 * (size_t)K + k), _MM_HINT_T0);
                    _mm_prefetch(pf + 4 * (3 * (size_t)K + k), _MM_HINT_T0);
                }
                __m256 v0 = _mm256_loadu_ps(w0 + k), v1 = _mm256_loadu_ps(w1 + k);
                __m256 v2 = _mm256_loadu_ps(w2 + k), v3 = _mm256_loadu_ps(w3 + k);
                __m256 u = _mm256_loadu_ps(x0 + k);
                FMA4(a, u, v0, v1, v2, v3);
                u = _mm256_loadu_ps(x1 + k);
                FMA4(b, u, v0, v1, v2, v3);
                u = _mm256_loadu_ps(x2 + k);
                FMA4(c, u, v0, v1, v2, v3);
                u = _mm256_loadu_ps(x3 + k);
                FMA4(d, u, v0, v1, v2, v3);
            }
            if (rem) {
                __m256 v0 = _mm256_maskload_ps(w0 + K8, tail), v1 = _mm256_maskload_ps(w1 + K8, tail);
                __m256 v2 = _mm256_maskload_ps(w2 + K8, tail), v3 = _mm256_maskload_ps(w3 + K8, tail);
                __m256 u = _mm256_maskload_ps(x0 + K8, tail);
                FMA4(a, u, v0, v1, v2, v3);
                u = _mm256_maskload_ps(x1 + K8, tail);
                FMA4(b, u, v0, v1, v2, v3);
                u = _mm256_maskload_ps(x2 + K8, tail);
                FMA4(c, u, v0, v1, v2, v3);
                u = _mm256_maskload_ps(x3 + K8, tail);
                FMA4(d, u, v0, v1, v2, v3);
            }
            float *o = out + (size_t)m * ldo + n;
            o[0] = hsum8(a0), o[1] = hsum8(a1), o[2] = hsum8(a2), o[3] = hsum8(a3);
            o += ldo;
            o[0] = hsum8(b0), o[1] = hsum8(b1), o[2] = hsum8(b2), o[3] = hsum8(b3);
            o += ldo;
            o[0] = hsum8(c0), o[1] = hsum8(c1), o[2] = hsum8(c2), o[3] = hsum8(c3);
            o += ldo;
            o[0] = hsum8(d0), o[1] = hsum8(d1), o[2] = hsum8(d2), o[3] = hsum8(d3);
        }
        if (m < M) /* the last rows of inp: the two-row kernel */
            gemm_nt_small_8(out + (size_t)m * ldo, ldo, inp + (size_t)m * K, w, M - m, K, n, n + 4);
    }
    if (n < n1)
        gemm_nt_small_8(out, ldo, inp, w, M, K, n, n1);
}
#undef FMA4
#pragma GCC pop_options

/* ---- dispatch ----------------------------------------------------------------------- */

int vm_wide32(void)
{
    static int v = -1;
    if (v < 0)
        v = vm_wide() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    return v;
}

int vm_gemm_nt_small_path(int path, float *out, size_t ldo, const float *inp, const float *w,
                          int M, int K, int n0, int n1)
{
    if (path == 0)
        vm_gemm_nt_small_1(out, ldo, inp, w, M, K, n0, n1);
    else if (path == 1 && vm_wide())
        gemm_nt_small_8(out, ldo, inp, w, M, K, n0, n1);
    else if (path == 2 && vm_wide32())
        gemm_nt_small_16(out, ldo, inp, w, M, K, n0, n1);
    else
        return -1;
    return 0;
}

void vm_gemm_nt_small(float *out, size_t ldo, const float *inp, const float *w, int M, int K,
                      int n0, int n1)
{
    if (vm_wide32())
        gemm_nt_small_16(out, ldo, inp, w, M, K, n0, n1);
    else if (vm_wide())
        gemm_nt_small_8(out, ldo, inp, w, M, K, n0, n1);
    else
        vm_gemm_nt_small_1(out, ldo, inp, w, M, K, n0, n1);
}

void vm_gelu(float *out, const float *x, size_t n)
{
    if (vm_wide())
        gelu_8n(out, x, n);
    else
        gelu_1(out, x, n);
}

void vm_gelu_tanh(float *out, const float *x, size_t n)
{
    if (vm_wide())
        gelu_tanh_8n(out, x, n);
    else
        gelu_tanh_1(out, x, n);
}

void vm_gelu_tanh_grad_acc(float *dinp, const float *x, const float *dout, size_t n)
{
    if (vm_wide())
        gelu_tanh_grad_8n(dinp, x, dout, n);
    else
        gelu_tanh_grad_1(dinp, x, dout, n);
}

void vm_silu(float *out, const float *x, size_t n)
{
    if (vm_wide())
        silu_8n(out, x, n);
    else
        silu_1(out, x, n);
}

void vm_silu_grad_acc(float *dinp, const float *x, const float *dout, size_t n)
{
    if (vm_wide())
        silu_grad_8n(dinp, x, dout, n);
    else
        silu_grad_1(dinp, x, dout, n);
}

int vm_silu_path(int path, int grad, float *out, const float *x, const float *dout, size_t n)
{
    if (path == 1 && !vm_wide())
        return -1;
    if (grad)
        (path ? silu_grad_8n : silu_grad_1)(out, x, dout, n);
    else
        (path ? silu_8n : silu_1)(out, x, n);
    return 0;
}

void vm_gelu_grad_acc(float *dinp, const float *x, const float *dout, size_t n)
{
    if (vm_wide())
        gelu_grad_8n(dinp, x, dout, n);
    else
        gelu_grad_1(dinp, x, dout, n);
}

void vm_apply_keep(float *y, const float *x, const uint32_t *bits, size_t n, float scale)
{
    if (vm_wide())
        keep_8n(y, x, bits, n, scale);
    else
        keep_1(y, x, bits, n, scale);
}

void vm_dropout(float *y, const float *x, const float *r, const uint32_t *u, size_t n,
                uint32_t thresh, float scale, uint32_t *bits)
{
    if (vm_wide())
        drop_8n(y, x, r, u, n, thresh, scale, bits);
    else
        drop_1(y, x, r, u, n, thresh, scale, bits);
}

void vm_softmax_row(float *row, const float *madd, float div, size_t n)
{
    if (vm_wide())
        softmax_8n(row, madd, div, n);
    else
        softmax_1(row, madd, div, n);
}

void vm_softmax_grad_row(float *dr, const float *ar, float div, size_t n)
{
    if (vm_wide())
        softmax_grad_8n(dr, ar, div, n);
    else
        softmax_grad_1(dr, ar, div, n);
}

double vm_sum(const float *a, const float *b, size_t n)
{
    if (vm_wide())
        return dot_8n(a, b, n);
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += b ? (double)a[i] * b[i] : (double)a[i];
    return s;
}

double vm_sqdev(const float *x, float mu, size_t n)
{
    return vm_wide() ? sqdev_8n(x, mu, n) : sqdev_1(x, mu, n);
}

void vm_ln_grad_sums(const float *dy, const float *w, const float *x, float mu, float rs,
                     size_t n, double *sd, double *sdx)
{
    if (vm_wide())
        ln_grad_sums_8n(dy, w, x, mu, rs, n, sd, sdx);
    else
        ln_grad_sums_1(dy, w, x, mu, rs, n, sd, sdx);
}

double vm_exp_sum(float *y, const float *x, float sub, size_t n)
{
    return vm_wide() ? exp_sum_8n(y, x, sub, n) : exp_sum_1(y, x, sub, n);
}
