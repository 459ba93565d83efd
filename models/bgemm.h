/* bgemm.h - matrix products of bf16 operands with fp32 accumulation and an fp32 result, for
 * bf16 training: C = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T, A and B bf16
 * (uint16_t bit patterns), C fp32. Two paths, chosen once from the CPU:
 *   1 oneDNN's matmul primitive (Debian's libdnnl 2.6: brgemm kernels), where the CPU has
 *     AMX-BF16 (measured on a Xeon with AMX, one thread: 2.2-4.1x OpenBLAS's sgemm on the
 *     BERT shapes; without AMX its avx512_core_bf16 kernel ran at 0.70x sgemm, and on AVX2
 *     it has none, so there the fp32 path is faster);
 *   0 the bf16 tiles widened to fp32 (exactly) and multiplied by OpenBLAS's sgemm, in blocks
 *     of ZT_BGEMM_KB along k (a block's product is added to C with beta 1).
 * A bf16 x bf16 product is exact in fp32, so both differ from the exact result by the
 * rounding of the fp32 sums only (at most K u sum |a b|, u = 2^-24, in any order); they
 * need not give the same bits as each other. Each is deterministic for a given machine,
 * shape and thread count. Called from one thread at a time (the products use OpenMP or
 * OpenBLAS's threads inside). */
#ifndef ZT_MODELS_BGEMM_H
#define ZT_MODELS_BGEMM_H

#include <stddef.h>
#include <stdint.h>

#define ZT_BGEMM_KB 512

/* 0, or ZT_E_NOMEM / ZT_E_INTERNAL (a oneDNN failure) with a message */
int zt_bgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const uint16_t *A,
             int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc);
/* one path (0 fp32 sgemm, 1 oneDNN); -1 when this CPU or oneDNN lacks it (tests) */
int zt_bgemm_path(int path, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                  int ldc);
/* the path zt_bgemm uses, and in words ("oneDNN brg:avx512_core_amx_bf16", "fp32 sgemm") */
int zt_bgemm_default(void);
const char *zt_bgemm_describe(void);
/* frees oneDNN's cached primitives and the fp32 path's scratch (tests) */
void zt_bgemm_release(void);

#endif
