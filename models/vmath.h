/* vmath.h - the transcendental loops of the kernels (GELU's erf, softmax's exp), eight floats
 * at a time through glibc's libmvec (_ZGVdN8v_erff / _ZGVdN8v_expf, AVX2, within 4 ulp)
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
/* 1 when the eight-wide path is in use on this machine */
int vm_wide(void);

#endif
