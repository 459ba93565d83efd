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

/* Starts writing a model folder `out` as a whole (fileio.h's zt_dir_stage): out must be
 * missing or a folder holding only what a model folder holds (config.json, *.safetensors,
 * model.safetensors.index.json, tokenizer and generation files, README.md) -- anything else
 * (or a symbolic link, or not a folder) is refused before anything is written, naming it.
 * The tokenizer and generation files and README.md are carried over (hard links) into the
 * staged folder, whose path is put in tmp; the caller writes the weights and config.json
 * there, then zt_dir_commit(tmp, out) or zt_dir_discard(tmp). */
int zt_hf_dir_begin(const char *out, char *tmp, size_t n);

/* The index of the first NaN or infinity among n values of dtype dt (F16, BF16, F32, F64;
 * other dtypes hold none), or -1. */
int64_t zt_first_nonfinite(zt_dtype dt, const void *data, size_t n);
/* "element i [a, b] is NaN" (or +Inf, -Inf) for element i of a tensor of that shape, whose
 * value (of dtype dt) is at `value`. */
void zt_nonfinite_text(char *buf, size_t n, zt_dtype dt, const void *value, int ndim,
                       const int64_t *shape, size_t i);

#endif
