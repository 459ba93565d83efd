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
    uint8_t m_zero, v_zero; /* the codes of 0.0 */
    uint16_t m_idx[65536], v_idx[65536]; /* zt_qmap_index of each */
    /* for the SIMD kernels: the maps' zone tables (quant.h), 1 when both were built (else
     * only the scalar kernel runs), and byte k of each code's float, [k][code] */
    zt_qzones m_zones, v_zones;
    int zones_ok;
    uint8_t m_bytes[4][256], v_bytes[4][256];
} zt_adam8_maps;

void zt_adam8_maps_init(zt_adam8_maps *q);

/* The fresh state of n elements: codes of zero, absmax 0 (n rounded up to whole blocks for
 * the absmax arrays). */
void zt_adam8bit_init(const zt_adam8_maps *q, uint8_t *cm, uint8_t *cv, float *am, float *av,
                      size_t n);

/* One step over n elements of one tensor (or of a stretch of it that starts on a block
 * boundary counted from the tensor's start; the last block may be partial). Per block:
 * dequantize m = map_m[cm] * am, v = map_v[cv] * av; m = b1 m + (1 - b1) g,
 * v = b2 v + (1 - b2) g^2 (g scaled by grad_scale); the block's new absmax of |m| and v;
 * p += step_size * m / (sqrt(v) + eps * c2), then p *= 1 - lr * wd when decay; requantize
 * m / am and v / av to the nearest codes. c1 = 1 - b1^t, c2 = sqrt(1 - b2^t), step_size =
 * -lr * c2 / c1, all in float32 as the reference kernel. A non-finite gradient leaves its
 * parameter unchanged and its moments zero. Multi-threaded over blocks. */
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

/* Nearest codes of n values (x, codes: [n]) on the signed map (is_signed = 1: the first
 * moment's) or the unsigned one, by the given kernel's quantizer: zt_quantize_fast's code
 * for every x. -ENOTSUP when the kernel cannot run here. */
int zt_adam8_quantize_path(int path, const zt_adam8_maps *q, int is_signed, const float *x,
                           uint8_t *codes, size_t n);

/* zt_adam32_update on the given kernel (the same bytes on each); -ENOTSUP as above. */
int zt_adam32_update_path(int path, float *p, const float *g, float *m, float *v, size_t n,
                          const zt_adamw_hparams *hp, int decay);

/* The same update with fp32 moments (bitsandbytes' 32-bit Adam: the state of tensors below
 * min_8bit_size). */
void zt_adam32_update(float *p, const float *g, float *m, float *v, size_t n,
                      const zt_adamw_hparams *hp, int decay);

#endif
