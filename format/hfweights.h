/* hfweights.h - a Hugging Face weights folder from tensor views: model.safetensors, or above
 * a size limit model-0000k-of-0000n.safetensors split at tensor boundaries plus
 * model.safetensors.index.json, as Hugging Face's save_pretrained writes them. */
#ifndef ZT_FORMAT_HFWEIGHTS_H
#define ZT_FORMAT_HFWEIGHTS_H

#include "zerotrain.h"

/* dir must exist; every file is written atomically; max_shard_bytes 0 = never shard. */
int zt_hf_write_weights(const char *dir, const zt_tensor_view *v, int n, size_t max_shard_bytes);

#endif
