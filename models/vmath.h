/* vmath.h - the transcendental loops of the kernels (GELU's erf, softmax's exp), eight floats
 * at a time through glibc's libmvec (_ZGVdN8v_erff / _expf / _tanhf, AVX2, within 4 ulp)
 * where the CPU has AVX2, else the scalar libm functions. Every element of an array goes
 * through the same function (a partial last group of eight is padded), so a result depends
 * only on the value and the machine, never on the position, the length or the threads. */
#ifndef ZT_MODELS_VMATH_H
#define ZT_MODELS_VMATH_H

#include <stddef.h>
#include <stdint.h>

/* out[i] = x * 0.5 * (1 + erf(x / sqrt(2))); out may equal x. Single-threaded. */
void vm_gelu(float *out, const float *x, size_t n);
/* dinp[i] += dout[i] * (Phi(x) + x * phi(x)) (the exact GELU's derivative). */
void vm_gelu_grad_acc(float *dinp, const float *x, const float *dout, size_t n);
/* out[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (transformers' gelu_new, T5 v1.1),
 * out may equal x; and dinp[i] += its derivative * dout[i]. Single-threaded. */
void vm_gelu_tanh(float *out, const float *x, size_t n);
void vm_gelu_tanh_grad_acc(float *dinp, const float *x, const float *dout, size_t n);
/* out[i] = x / (1 + exp(-x)) (torch's SiLU, transformers' "silu" / "swish"), out may equal
 * x; and dinp[i] += s (1 + x (1 - s)) dout[i], s = 1 / (1 + exp(-x)). Single-threaded. A
 * path forced for tests: 0 portable, 1 eight-wide (-1 when the CPU lacks it). */
void vm_silu(float *out, const float *x, size_t n);
void vm_silu_grad_acc(float *dinp, const float *x, const float *dout, size_t n);
int vm_silu_path(int path, int grad, float *out, const float *x, const float *dout, size_t n);
/* y[i] = exp(x[i] - sub) (y may equal x; NULL: not stored); returns the sum of the y[i], accumulated in double
 * in a fixed order. */
double vm_exp_sum(float *y, const float *x, float sub, size_t n);
/* y[i] = bit i of bits set ? x[i] * scale : +0 (bit i % 32 of bits[i / 32]); y may equal x.
 * Not transcendental, but the same eight-wide dispatch. */
void vm_apply_keep(float *y, const float *x, const uint32_t *bits, size_t n, float scale);
/* y[j] = (u[j] < thresh ? 0 : x[j] * scale) (+ r[j] when r is not NULL); bits != NULL
 * records u[j] >= thresh as bit j % 32 of bits[j / 32]. */
void vm_dropout(float *y, const float *x, const float *r, const uint32_t *u, size_t n,
                uint32_t thresh, float scale, uint32_t *bits);
/* attention softmax of one row of scores: row = softmax(row / div + madd) (madd may be NULL:
 * no mask; a masked position holds -FLT_MAX) */
void vm_softmax_row(float *row, const float *madd, float div, size_t n);
/* its backward: dr = ar * (dr - sum(ar * dr)) / div, ar the probabilities */
void vm_softmax_grad_row(float *dr, const float *ar, float div, size_t n);
/* sum of (double)a[i] * b[i], or of a[i] when b is NULL, in a fixed order */
double vm_sum(const float *a, const float *b, size_t n);
/* layernorm's sums: sum of ((double)x[c] - mu)^2; and with g = dy * w, xh = (x - mu) * rs
 * (float): *sd = sum g, *sdx = sum (double)g * xh */
double vm_sqdev(const float *x, float mu, size_t n);
void vm_ln_grad_sums(const float *dy, const float *w, const float *x, float mu, float rs,
                     size_t n, double *sd, double *sdx);
/* 1 when the eight-wide path is in use on this machine */
/* out[m * ldo + n] = sum_k inp[m * K + k] * w[n * K + k] for n in [n0, n1) and every m < M:
 * a product with few rows (generation's one position per row), w read once and unpacked.
 * Each dot is eight lanes of fused multiply-adds over k (k mod 8 the lane), then the lanes
 * summed as ((0+4)+(2+6))+((1+5)+(3+7)): the wide and the portable (_1) paths give the same
 * bits, independent of M, the row and the split of n. Single-threaded. */
void vm_gemm_nt_small(float *out, size_t ldo, const float *inp, const float *w, int M, int K,
                      int n0, int n1);
void vm_gemm_nt_small_1(float *out, size_t ldo, const float *inp, const float *w, int M, int K,
                        int n0, int n1);
/* one path of it: 0 portable, 1 AVX2 (two rows of inp at a time), 2 AVX-512VL (four, in 32
 * registers); -1 when the CPU lacks it (tests) */
int vm_gemm_nt_small_path(int path, float *out, size_t ldo, const float *inp, const float *w,
                          int M, int K, int n0, int n1);
int vm_wide32(void); /* AVX2, FMA, AVX-512F and VL */
int vm_wide(void);

#endif
