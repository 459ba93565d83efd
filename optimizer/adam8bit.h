/* adam8bit.h - 8-bit AdamW as bitsandbytes' block-wise optimizer (Dettmers et al. 2021):
 * both moments stored as one byte per element (dynamic quantization, quant.h) with one fp32
 * absolute maximum per 256-element block; and the same update with fp32 moments, for the
 * tensors below min_8bit_size. Pure functions over memory: no MPI, no allocation. */
#ifndef ZT_OPTIMIZER_ADAM8BIT_H
#define ZT_OPTIMIZER_ADAM8BIT_H

#include "adamw.h"
#include "quant.h"

#include <stddef.h>
#include <stdint.h>

#define ZT_MIN_8BIT_SIZE 4096 /* bitsandbytes' min_8bit_size: smaller tensors keep fp32 */

/* The two maps: signed for the first moment, unsigned for the second. */
typedef struct zt_adam8_maps {
    float m[256], v[256];
    uint16_t m_idx[65536], v_idx[65536]; /* zt_qmap_index of each */
    /* for the SIMD kernels: the maps' zone tables (quant.h), 1 when both were built (else
     * only the scalar kernel runs), and byte k of each code's float, [k][code] */
    zt_qzones m_zones, v_zones;
    int zones_ok;
    uint8_t m_bytes[4][256], v_bytes[4][256];
} zt_adam8_maps;

void zt_adam8_maps_init(zt_adam8_maps *q);

/* The fresh state of n elements: codes 0 and absmax 0, as bitsandbytes allocates it (zeros;
 * the codes dequantize to -0 and +0), n rounded up to whole blocks for the absmax arrays. */
void zt_adam8bit_init(uint8_t *cm, uint8_t *cv, float *am, float *av, size_t n);

/* One step over n elements of one tensor (or of a stretch of it that starts on a block
 * boundary counted from the tensor's start; a partial block only as the tensor's last), as
 * bitsandbytes' kOptimizerStatic8bit2StateBlockwise (csrc/kernels.cu, 256-element blocks)
 * computes it, in float32 with float32 hyperparameters, element for element:
 *  - where g is finite (g itself, before the scale): g' = g * grad_scale,
 *    v = (map_v[cv] * av) * b2 + ((1 - b2) * g') * g', m = (map_m[cm] * am) * b1 + (1 - b1) g';
 *    elsewhere m = v = +0 (the element starts again) and the parameter stays;
 *  - the block's new absmax: the largest |m| (|v|) from -FLT_MAX, a NaN passed over (fmaxf),
 *    so a block of NaN moments keeps -FLT_MAX; a partial block also counts bitsandbytes'
 *    padding elements (g = 0, codes 128 and 0: |(map_m[128] * am) * b1 + (1 - b1) 0 g'|);
 *  - p = (p + step_size * (m / (sqrt(v) + eps * c2))) * (1 - lr wd) (the factor only when
 *    decay and wd > 0); c1 = 1 - b1^t, c2 = sqrt(1 - b2^t), step_size = -lr * c2 / c1;
 *  - codes: zt_quantize_bnb of m / am (the signed map) then zt_qsign_fix by m, and of v / av
 *    (unsigned). An all-zero block (am = 0) is NaN throughout: first-moment codes 255 for +0
 *    and 0 for -0, second-moment codes 0.
 * The CUDA kernel's __powf and __fdividef are approximations (2 ulp); here the power is C's
 * powf and division and sqrt are correctly rounded, as in the numpy reference. Where p and
 * its step are both NaN, p's NaN is kept (x86 keeps the first operand's). Multi-threaded
 * over blocks. */
void zt_adam8bit_update(const zt_adam8_maps *q, float *p, const float *g, uint8_t *cm,
                        uint8_t *cv, float *am, float *av, size_t n, const zt_adamw_hparams *hp,
                        int decay);

/* The kernels behind zt_adam8bit_update, for tests and benchmarks: each gives the same
 * bytes (parameters, codes, absmax) for every input. AUTO is the best the CPU runs (AVX-512
 * needs F, BW, VL, DQ and VBMI), chosen at run time: the library builds without -march. */
enum { ZT_ADAM8_AUTO = -1, ZT_ADAM8_SCALAR = 0, ZT_ADAM8_AVX2 = 1, ZT_ADAM8_AVX512 = 2 };

/* The kernel AUTO picks for these maps; whether `path` runs here (1) or not (0); its name. */
int zt_adam8bit_path(const zt_adam8_maps *q);
int zt_adam8bit_path_available(const zt_adam8_maps *q, int path);
const char *zt_adam8bit_path_name(int path);

/* zt_adam8bit_update on the given kernel; -ENOTSUP (nothing done) when it cannot run here. */
int zt_adam8bit_update_path(int path, const zt_adam8_maps *q, float *p, const float *g,
                            uint8_t *cm, uint8_t *cv, float *am, float *av, size_t n,
                            const zt_adamw_hparams *hp, int decay);

/* Codes of n values (x, codes: [n]) on the signed map (is_signed = 1: the first moment's code
 * of m = x with absmax 1, zt_qsign_fix(zt_quantize_fast(x), x)) or the unsigned one
 * (zt_quantize_fast), by the given kernel's quantizer. -ENOTSUP when the kernel cannot run
 * here. */
int zt_adam8_quantize_path(int path, const zt_adam8_maps *q, int is_signed, const float *x,
                           uint8_t *codes, size_t n);

/* zt_adam32_update on the given kernel (the same bytes on each); -ENOTSUP as above. */
int zt_adam32_update_path(int path, float *p, const float *g, float *m, float *v, size_t n,
                          const zt_adamw_hparams *hp, int decay);

/* The same update with fp32 moments (bitsandbytes' kOptimizer32bit2State for Adam with decay:
 * the state of tensors below min_8bit_size), except for a non-finite g * grad_scale: there
 * m = v = +0 and the parameter stays (the 32-bit kernel has no such rule: NaN would spread). */
void zt_adam32_update(float *p, const float *g, float *m, float *v, size_t n,
                      const zt_adamw_hparams *hp, int decay);

#endif
