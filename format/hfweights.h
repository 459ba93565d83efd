/* hfweights.h - a Hugging Face weights folder from tensor views: model.safetensors, or above
 * a size limit model-0000k-of-0000n.safetensors split at tensor boundaries plus
 * model.safetensors.index.json, as Hugging Face's save_pretrained writes them. */
#ifndef ZT_FORMAT_HFWEIGHTS_H
#define ZT_FORMAT_HFWEIGHTS_H

#include "zerotrain.h"

/* dir must exist; every file is written atomically; max_shard_bytes 0 = never shard. */
int zt_hf_write_weights(const char *dir, const zt_tensor_view *v, int n, size_t max_shard_bytes);

/* The same with the data of tensor i asked of fetch(i, arg, &data) just before it is written
 * (in order), so it can be produced piece by piece; the views' data may then be NULL. A
 * fetch that returns < 0 (with the error message set) stops the write. */
typedef int (*zt_fetch_fn)(int i, void *arg, const void **data);
int zt_hf_write_weights_cb(const char *dir, const zt_tensor_view *v, int n,
                           size_t max_shard_bytes, zt_fetch_fn fetch, void *arg);
/* One safetensors file the same way (zt_safetensors_write with a fetch function). */
int zt_safetensors_write_cb(const char *path, const zt_tensor_view *tensors, int n,
                            const char *const *metadata, int n_meta, zt_fetch_fn fetch,
                            void *arg);

/* The same with each tensor's bytes in pieces[i] pieces, piece k of tensor i asked of
 * piece(i, k, arg, &data, &len) in file order just before it is written; the lengths must
 * add up to the tensor's size (else the write fails and no file is left). */
typedef int (*zt_piece_fn)(int i, int k, void *arg, const void **data, size_t *len);
int zt_safetensors_write_pieces(const char *path, const zt_tensor_view *tensors, int n,
                                const char *const *metadata, int n_meta, const int *pieces,
                                zt_piece_fn piece, void *arg);

#endif
