/* load.h - Hugging Face weights into the engine's unit buffers: model.safetensors or a
 * sharded model.safetensors.index.json, F32/F16/BF16, tied duplicates optional. */
#ifndef ZT_ENGINE_LOAD_H
#define ZT_ENGINE_LOAD_H

#include <stdint.h>
#include "../models/model.h"

/* Fills the units of P that are not NULL from dir (the others are skipped: stage 3 loads
 * one unit at a time). alias_seen[i] = 1 when the checkpoint also stored parameter i's tied
 * duplicate. Missing head parameters (zt_param_def.head) are initialised (seed), with a warning
 * when report is set (as is the count of unused tensors); any other missing parameter, a
 * shape mismatch, an unsupported dtype or a NaN or infinity is an error, as is a folder
 * holding both model.safetensors and an index (zt_load_weights_unambiguous). */
int zt_load_hf_weights(const char *dir, const zt_layout *l, float *const *P,
                       unsigned char *alias_seen, uint64_t seed, int report);

/* ZT_E_FORMAT naming both files when dir holds model.safetensors and
 * model.safetensors.index.json: which set is the model's is not known. */
int zt_load_weights_unambiguous(const char *dir);

/* HF initialisation of parameter i: normal(0, init_std), ones or zeros. */
void zt_param_init(const zt_layout *l, int i, float *const *P, uint64_t seed);

#endif
