/* hgemm.h - matrix products of 16-bit floating-point operands (bf16 or fp16, common/half.h)
 * with fp32 accumulation and an fp32 result, for half-precision training:
 * C = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T, A and B 16-bit bit patterns of
 * one format, C fp32. Two paths, chosen once from the CPU:
 *   1 oneDNN's matmul primitive (Debian's libdnnl 2.6: brgemm kernels), bf16 only, where its
 *     bf16 kernel runs on AVX512_BF16 or AMX-BF16 (measured, one thread, against OpenBLAS's
 *     sgemm at BERT's shapes: Xeon with AMX 0.21-0.44x sgemm's time; AMD Zen 4 (AVX512_BF16,
 *     no AMX) 0.24-0.29x with OPENBLAS_CORETYPE=Haswell, 0.47-0.50x with it unset);
 *   0 the 16-bit tiles widened to fp32 (exactly) and multiplied by OpenBLAS's sgemm, in
 *     blocks of ZT_HGEMM_KB along k (a block's product is added to C with beta 1): fp16
 *     everywhere, bf16 elsewhere (on AVX2 oneDNN 2.6 has no bf16 matmul).
 * A product of two 16-bit values is exact in fp32, so both differ from the exact result by
 * the rounding of the fp32 sums only (at most K u sum |a b|, u = 2^-24, in any order); they
 * need not give the same bits as each other. Each is deterministic for a given machine,
 * shape and thread count. Called from one thread at a time (the products use OpenMP or
 * OpenBLAS's threads inside). */
#ifndef ZT_MODELS_HGEMM_H
#define ZT_MODELS_HGEMM_H

#include <stddef.h>
#include <stdint.h>

#define ZT_HGEMM_KB 512

/* dt: ZT_HALF_BF16 or ZT_HALF_F16. 0, or ZT_E_NOMEM / ZT_E_INTERNAL (a oneDNN failure) with
 * a message */
int zt_hgemm(int dt, int trans_a, int trans_b, int M, int N, int K, float alpha,
             const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
             int ldc);
/* one path (0 widened sgemm, 1 oneDNN); -1 when this CPU or oneDNN lacks it (tests) */
int zt_hgemm_path(int path, int dt, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                  int ldc);
/* the path zt_hgemm uses for dt, and in words ("oneDNN brg:avx512_core_bf16", "fp32 sgemm") */
int zt_hgemm_default(int dt);
const char *zt_hgemm_describe(int dt);
/* oneDNN's bf16 matmul implementation on this CPU ("brg:avx512_core_bf16"), or "" (none) */
const char *zt_hgemm_onednn(void);
/* frees oneDNN's cached primitives and the fp32 path's scratch (tests) */
void zt_hgemm_release(void);

/* fp32 products: C = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm. Two paths, chosen
 * once from the CPU:
 *   1 where the CPU has AVX-512 (F, BW, VL, DQ) and oneDNN opens: oneDNN's sgemm (its own
 *     AVX-512 kernels; OpenBLAS's follow OPENBLAS_CORETYPE, Haswell's AVX2 on machines that
 *     set it) on fixed blocks of C's rows (M >= N) or columns, each block on one thread.
 *     The blocks follow from the shape alone, so the result does not depend on the thread
 *     count. Measured at BERT's shapes, 2 threads, AMD EPYC with AVX-512: 1.7-2.4x
 *     OpenBLAS's rate with OPENBLAS_CORETYPE=Haswell, 0.97-1.48x with it unset
 *     (benchmarks/bench_hgemm.c);
 *   0 elsewhere: OpenBLAS's sgemm (its own threads).
 * Both round the same sums in different orders: they differ by fp32's rounding of the sums
 * (gamma_K sum |a b|), not bit for bit. Safe from several threads at once: inside an OpenMP
 * parallel region each call runs on its own thread. */
#define ZT_SGEMM_BLOCKS 8         /* blocks a large product is cut into */
#define ZT_SGEMM_SPLIT (1 << 22)  /* flops below which a product is one block */
void zt_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* one path (0 OpenBLAS, 1 oneDNN, on any CPU; OpenBLAS where oneDNN does not open) (tests,
 * benchmarks) */
void zt_sgemm_path(int path, int trans_a, int trans_b, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc);
/* the path zt_sgemm uses (opens oneDNN where it may be used), and in words */
int zt_sgemm_default(void);
const char *zt_sgemm_describe(void);

#endif
