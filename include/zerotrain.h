/* zerotrain.h - the one public header of libzerotrain.
 * Everything an outside trainer or the zerotrain command needs: engine lifetime, model
 * loading, forward/backward, optimizer step, safetensors I/O, memory report, errors.
 * Internal layouts (units, shards, kernels) are not exposed; see docs/architecture.md. */
#ifndef ZEROTRAIN_H
#define ZEROTRAIN_H

#include <stddef.h>
#include <stdint.h>
/* the C API of MPI only (MPI_Comm): Open MPI's deprecated C++ bindings stay out of C++
 * clients (they do not compile cleanly with -Wextra) unless mpi.h came first */
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ZT_BUILDING_LIBRARY) && defined(__GNUC__)
#define ZT_API __attribute__((visibility("default")))
#else
#define ZT_API
#endif

#define ZT_VERSION_MAJOR 0
#define ZT_VERSION_MINOR 3
#define ZT_VERSION_PATCH 0
/* The library's soname is libzerotrain.so.ZT_ABI_VERSION; it changes whenever a public
 * struct or signature does. */
#define ZT_ABI_VERSION 10

/* ---- errors -------------------------------------------------------------------------
 * Every fallible function returns 0 (or a count) on success and a negative value on
 * failure: -errno for system errors, or one of the codes below. */
enum {
    ZT_E_BASE = -10000,
    ZT_E_FORMAT = -10001,  /* a file is not what it claims (safetensors, JSON) */
    ZT_E_CONFIG = -10002,  /* a configuration value is missing, wrong or inconsistent */
    ZT_E_SHAPE = -10003,   /* tensor shapes or dimensions do not fit */
    ZT_E_MPI = -10004,     /* an MPI call failed */
    ZT_E_INVAL = -10005,   /* API misuse: bad argument or call order */
    ZT_E_NOTFOUND = -10006, /* a named tensor or parameter does not exist */
    ZT_E_RANGE = -10007,   /* input data out of range (token id >= vocab, ...) */
    ZT_E_UNSUPPORTED = -10008, /* valid but not supported by this build */
    ZT_E_NOMEM = -10009,   /* an allocation failed */
};

/* Short description of an error code (ZT_E_* or -errno). Never NULL. */
ZT_API const char *zt_strerror(int err);
/* Detailed message of the last failing call on this thread (file, tensor, offset, ...).
 * Functions that take an engine also keep it in zt_engine_last_error(). */
ZT_API const char *zt_last_error(void);
/* "MAJOR.MINOR.PATCH" of the library linked (the header's: ZT_VERSION_*) */
ZT_API const char *zt_version(void);

/* ---- input and output files ---------------------------------------------------------- */
/* Opens a file the caller is about to read, refusing anything but a regular file (after
 * symlinks) before it can block: the open is O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags (a
 * FIFO opened so does not wait for a writer, a device or socket is never read), then fstat,
 * then O_NONBLOCK is cleared again. flags adds open(2) flags such as O_NOFOLLOW; it must not
 * ask for write access. Returns the descriptor (the caller closes it) or, with a message
 * naming the path: -errno when it cannot be opened ("PATH: cannot open: REASON"), ZT_E_FORMAT
 * when it is not a regular file ("PATH: not a regular file (a FIFO)", "(a folder)", ...). */
ZT_API int zt_open_regular(const char *path, int flags);

/* Reads a whole regular file of at most limit bytes into a NUL-terminated buffer (*out,
 * freed by the caller; *len = its length, len may be NULL), opened with zt_open_regular.
 * Errors name the path: -errno when it cannot be opened or read, ZT_E_FORMAT when it is not a
 * regular file or is too large. */
ZT_API int zt_file_read_all(const char *path, size_t limit, char **out, size_t *len);

/* Durable, atomic write: parts[0..n) (lens[i] bytes each) back to back into a temporary file
 * beside path, fsynced, renamed over path, the folder fsynced (mode 0644). Readers see the
 * old file or the complete new one. Returns 0 or -errno with a message naming the path and
 * the step that failed; on failure the temporary file is removed and path is untouched. */
ZT_API int zt_file_write_atomic(const char *path, const void *const *parts, const size_t *lens,
                                int n);

/* Removes entry name of the folder dirfd (AT_FDCWD: the working folder) and, for a folder,
 * everything in it, never following a symbolic link: a link is unlinked itself and its
 * target never touched. Returns 0 (also when name is gone already) or -errno. */
ZT_API int zt_remove_at(int dirfd, const char *name);

/* mkdir -p: dir and its missing parents, with mode (less the umask); a part of the path that
 * exists and is not a folder is an error naming it. made (NULL: not kept) collects the
 * folders the call created, outermost first, so that a writer that fails can take them away
 * again: zt_dirs_made_release(made, 1) removes them (innermost first, each only if it is
 * empty) and frees the list, (made, 0) only frees it. Returns 0 or a negative ZT_E_* code. */
typedef struct zt_dirs_made {
    char **dir;
    int n;
} zt_dirs_made;
ZT_API int zt_mkdirs(const char *dir, unsigned mode, zt_dirs_made *made);
ZT_API void zt_dirs_made_release(zt_dirs_made *made, int remove);

/* ZT_ABI_VERSION of the library linked: a client built against another header must not run */
ZT_API int zt_abi_version(void);

/* ---- logging ------------------------------------------------------------------------
 * The library never prints; it hands messages to this callback (default: none). */
enum { ZT_LOG_ERROR = 0, ZT_LOG_WARN = 1, ZT_LOG_INFO = 2, ZT_LOG_DEBUG = 3 };
typedef void (*zt_log_fn)(int level, const char *msg, void *user);
ZT_API void zt_log_set(zt_log_fn fn, void *user, int max_level);

/* ---- memory report ------------------------------------------------------------------ */
enum {
    ZT_MEM_PARAMS = 0, ZT_MEM_GRADS, ZT_MEM_OPTIMIZER, ZT_MEM_ACTIVATIONS,
    ZT_MEM_COMM, ZT_MEM_IO, ZT_MEM_OTHER, ZT_MEM_NCAT
};
typedef struct zt_mem_report {
    size_t current[ZT_MEM_NCAT]; /* bytes held now, by category */
    size_t peak[ZT_MEM_NCAT];    /* highest value of current[] seen */
    size_t total_current, total_peak;
    /* The process heap's statistics when its malloc is jemalloc (zt_memory_heap_source() is
     * "jemalloc": the zerotrain command, or a process started with jemalloc preloaded), 0
     * otherwise. The counted buffers above are the library's own mappings, not in them. */
    size_t jemalloc_allocated;   /* jemalloc stats.allocated */
    size_t jemalloc_resident;    /* jemalloc stats.resident */
    size_t peak_rss;             /* process peak resident set (getrusage), bytes */
} zt_mem_report;
ZT_API void zt_memory_report(zt_mem_report *out);
/* Where zt_mem_report's heap fields come from: "jemalloc", or "none" (then they are 0).
 * The library links no allocator and never replaces the host's malloc; it finds jemalloc's
 * mallctl at run time when the process runs jemalloc. Never NULL. */
ZT_API const char *zt_memory_heap_source(void);
ZT_API const char *zt_memory_category_name(int category);

/* ---- per-kernel profile ---------------------------------------------------------------
 * Off by default. When on, every kernel call adds its time, FLOPs and bytes moved (by the
 * kernel's own count: inputs read + outputs written) to its kind's row. Process-wide. */
enum {
    ZT_PROF_GEMM = 0, ZT_PROF_SOFTMAX, ZT_PROF_LAYERNORM, ZT_PROF_GELU, ZT_PROF_DROPOUT,
    ZT_PROF_EMBEDDING, ZT_PROF_LOSS, ZT_PROF_ELEMENTWISE, ZT_PROF_OPTIMIZER,
    ZT_PROF_COMM_WAIT, ZT_PROF_IO_WAIT, ZT_PROF_KINDS
};
typedef struct zt_profile_row {
    const char *kind;      /* "GEMM", "attention softmax", ... */
    uint64_t calls;
    double seconds, flops, bytes;
} zt_profile_row;
ZT_API void zt_profile_enable(int on);
ZT_API void zt_profile_reset(void);
/* Copies up to max rows (ZT_PROF_KINDS of them, in enum order); returns how many. */
ZT_API int zt_profile_get(zt_profile_row *rows, int max);

/* ---- safetensors --------------------------------------------------------------------
 * Reader: validates the whole header (spec checks) on open and maps the file read-only.
 * Writer: writes atomically (temp file, fsync, rename, fsync of the folder). */
typedef enum zt_dtype {
    ZT_F32 = 0, ZT_F16, ZT_BF16, ZT_F64, ZT_I64, ZT_I32, ZT_I16, ZT_I8, ZT_U8, ZT_BOOL,
    ZT_DTYPE_COUNT
} zt_dtype;
#define ZT_MAX_DIMS 8
typedef struct zt_tensor_info {
    const char *name;     /* valid while the file is open */
    zt_dtype dtype;
    int ndim;
    int64_t shape[ZT_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    size_t offset;        /* absolute byte offset of the data in the file */
    const void *data;     /* mapped data, little-endian, possibly unaligned */
} zt_tensor_info;
typedef struct zt_safetensors zt_safetensors;

ZT_API const char *zt_dtype_name(zt_dtype t);
ZT_API size_t zt_dtype_size(zt_dtype t);
ZT_API int zt_safetensors_open(const char *path, zt_safetensors **out);
ZT_API void zt_safetensors_close(zt_safetensors *f);
ZT_API int zt_safetensors_count(const zt_safetensors *f);
/* i in [0, count): tensors sorted by name */
ZT_API int zt_safetensors_get(const zt_safetensors *f, int i, zt_tensor_info *out);
ZT_API int zt_safetensors_find(const zt_safetensors *f, const char *name, zt_tensor_info *out);
/* Value of a __metadata__ entry, or NULL. */
ZT_API const char *zt_safetensors_metadata(const zt_safetensors *f, const char *key);
/* Converts F32/F16/BF16 tensor data to float (n must equal numel). */
ZT_API int zt_tensor_to_f32(const zt_tensor_info *t, float *dst, size_t n);

typedef struct zt_tensor_view {
    const char *name;
    zt_dtype dtype;
    int ndim;
    int64_t shape[ZT_MAX_DIMS];
    const void *data;
} zt_tensor_view;
/* metadata: NULL or n_meta pairs {key0, value0, key1, value1, ...} */
ZT_API int zt_safetensors_write(const char *path, const zt_tensor_view *tensors, int n,
                                const char *const *metadata, int n_meta);

/* ---- token data ----------------------------------------------------------------------
 * A prepared corpus (`zerotrain prepare-data`): a folder with manifest.json and token shards
 * (format in docs/data-format.md). The stream is every document's tokens back to back, each
 * document followed by one [SEP]. Readers map the shards; nothing is copied on open. */
typedef struct zt_tokenizer_info {
    char type[32];           /* "wordpiece" or "sentencepiece" */
    char model_file[256];    /* vocab.txt or the .model file, relative to the data folder */
    int vocab_size;
    int lower_case;
    /* sep_id separates documents and is the end token T5's span corruption appends (a T5
     * vocabulary's </s>); cls_id and mask_id are -1 for a vocabulary without them (T5's) */
    int32_t pad_id, unk_id, cls_id, sep_id, mask_id;
    /* the Hugging Face tokenizer class of the folder's tokenizer_config.json ("BertTokenizer",
     * "DebertaV2Tokenizer", "T5Tokenizer"; "" for none: an older dataset) */
    char hf_class[64];
} zt_tokenizer_info;

typedef struct zt_token_writer zt_token_writer;
/* Creates dir (parents too) and writes shards of at most shard_tokens tokens (0 = default). */
ZT_API int zt_token_writer_create(const char *dir, const zt_tokenizer_info *tok,
                                  uint64_t shard_tokens, zt_token_writer **out);
/* Appends one document (ids < vocab_size); source names the input file for the manifest. */
ZT_API int zt_token_writer_add(zt_token_writer *w, const int32_t *ids, size_t n,
                               const char *source);
/* Writes the last shard, then manifest.json (atomically, last). */
ZT_API int zt_token_writer_finish(zt_token_writer *w);
/* Frees; if finish was not called, removes the shards written so far. */
ZT_API void zt_token_writer_destroy(zt_token_writer *w);

typedef struct zt_token_data zt_token_data;
typedef struct zt_token_data_info {
    zt_tokenizer_info tok;
    uint64_t n_tokens;       /* stream length, document separators included */
    uint64_t n_docs;
    int n_shards;
} zt_token_data_info;
/* verify != 0: checks every shard's checksum and that every id < vocab_size (reads all). */
ZT_API int zt_token_data_open(const char *dir, int verify, zt_token_data **out);
ZT_API void zt_token_data_close(zt_token_data *d);
ZT_API int zt_token_data_info_get(const zt_token_data *d, zt_token_data_info *out);
/* Tokens [start, start + n) of the stream, across shard boundaries. */
ZT_API int zt_token_data_read(const zt_token_data *d, uint64_t start, size_t n, int32_t *out);

/* The item global sample g reads from n items: epoch e = g / n's seeded permutation of
 * [0, n) at g mod n (a bijection keyed by (seed, e), O(1) memory): the order of the masked-LM
 * and span sources, and of `zerotrain finetune`'s rows. n 0: 0. */
ZT_API uint64_t zt_epoch_order(uint64_t seed, uint64_t n, uint64_t g);

/* ---- masked-LM batches ---------------------------------------------------------------
 * Sample g of the training stream is a function of (seed, g) only, never of the world size
 * or the micro-batch split: epoch e = g / n reads sequence perm_e(g mod n) of the corpus
 * (a seeded permutation per epoch), as [CLS] + seq_len-2 stream tokens + [SEP], and masks
 * each non-special token with probability mask_prob (80% [MASK], 10% a random id, 10%
 * unchanged), decided by Philox from (seed, g, position). */
typedef struct zt_mlm_source zt_mlm_source;
/* data NULL: synthetic data, token ids uniformly random in [5, vocab_size) with the
 * special ids [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4. */
ZT_API int zt_mlm_source_create(const zt_token_data *data, int vocab_size, int seq_len,
                                float mask_prob, uint64_t seed, zt_mlm_source **out);
ZT_API void zt_mlm_source_destroy(zt_mlm_source *s);
/* A synthetic source's special ids instead of 0 ... 4: ids[5] = pad, unk, cls, sep, mask
 * (distinct, in [0, vocab_size)); the other ids are drawn uniformly from the rest, so that
 * synthetic rows look like a model's own (RoBERTa: <s> 0, <pad> 1, </s> 2, <unk> 3, <mask>
 * vocab_size - 1). ZT_E_INVAL for a source reading data (its tokenizer's ids apply). */
ZT_API int zt_mlm_source_set_specials(zt_mlm_source *s, const int32_t ids[5]);
/* Sequences per epoch (synthetic data: 2^62). */
ZT_API uint64_t zt_mlm_source_samples(const zt_mlm_source *s);
/* Rows for global samples [first, first + B), each [B, seq_len]: ids, attention mask,
 * token types (0), labels (-100 where not masked). */
ZT_API int zt_mlm_source_fill(const zt_mlm_source *s, uint64_t first, int B, int64_t *ids,
                              int64_t *attention_mask, int64_t *token_type_ids,
                              int64_t *labels);
/* ALBERT's sentence-order prediction from the same stream (AlbertForPreTraining's data): row
 * g holds the seq_len - 3 stream tokens of its sequence as two consecutive segments A (the
 * first k, 1 <= k < seq_len - 3, k drawn by Philox from (seed, g)) and B (the rest):
 * [CLS] A [SEP] B [SEP] with sentence_order_label[b] 0, or swapped with probability 0.5,
 * [CLS] B [SEP] A [SEP] with 1 (ALBERT's create_instances_from_document; the segments are
 * cut from the token stream, which keeps no sentence boundaries). Token types 0 up to the
 * first [SEP], 1 after; masked as zt_mlm_source_fill masks. seq_len >= 5. */
ZT_API int zt_mlm_source_fill_sop(const zt_mlm_source *s, uint64_t first, int B, int64_t *ids,
                                  int64_t *attention_mask, int64_t *token_type_ids,
                                  int64_t *labels, int64_t *sentence_order_label);

/* ---- span-corruption batches (T5) ------------------------------------------------------
 * T5's pre-training objective (Raffel et al. 2020): sample g reads raw sequence
 * perm_e(g mod n) of the corpus (as the masked-LM source), of the raw length whose corrupted
 * inputs fill seq_len (T5's random_spans_helper: 568 raw tokens for 512); noise spans
 * (density 0.15, mean length 3, T5's random_spans_noise_mask, decided by Philox from (seed, g))
 * become sentinels in the inputs and the targets are the spans behind their sentinels, both
 * ending with EOS. Sentinels count down from the top of the vocabulary: the data's tokenizer
 * vocabulary V_tok followed by ZT_SPAN_EXTRA_IDS extra ids, <extra_id_0> = V_tok + 99, so the
 * model's vocab_size must be at least V_tok + 100. EOS is the tokenizer's sep id, padding its
 * pad id (T5's decoder_start and pad: 0). */
#define ZT_SPAN_EXTRA_IDS 100
typedef struct zt_span_source zt_span_source;
/* data NULL: synthetic tokens uniformly random in [5, vocab_size - 100) (specials as the
 * masked-LM source's: pad 0, [SEP] 3 as EOS). */
ZT_API int zt_span_source_create(const zt_token_data *data, int vocab_size, int seq_len,
                                 float noise_density, float mean_span, uint64_t seed,
                                 zt_span_source **out);
ZT_API void zt_span_source_destroy(zt_span_source *s);
ZT_API uint64_t zt_span_source_samples(const zt_span_source *s);
/* the targets' length (labels per row) and the raw tokens each sample reads */
ZT_API int zt_span_source_target_len(const zt_span_source *s);
ZT_API int zt_span_source_raw_len(const zt_span_source *s);
/* Rows for global samples [first, first + B): input_ids and attention_mask [B, seq_len]
 * (padding, mask 0, only where a sample's inputs come out shorter), labels [B, target_len]
 * (-100 after the targets). Not thread-safe (a source has one scratch row). */
ZT_API int zt_span_source_fill(const zt_span_source *s, uint64_t first, int B,
                               int64_t *input_ids, int64_t *attention_mask, int64_t *labels);

/* ---- training configuration (DeepSpeed JSON) ------------------------------------------
 * The keys of a DeepSpeed config that apply here, plus a "zerotrain" section of our own;
 * docs/config.md (generated from the parser's key table) lists them all. Unknown keys,
 * wrong types and out-of-range values are rejected together in one message; DeepSpeed keys
 * that do not apply are accepted with a notice (logged at ZT_LOG_WARN). */
typedef enum zt_sched_type {
    ZT_SCHED_CONSTANT = 0,   /* no "scheduler" section */
    ZT_SCHED_WARMUP_LR,
    ZT_SCHED_WARMUP_DECAY_LR,
    ZT_SCHED_WARMUP_COSINE_LR,
} zt_sched_type;

typedef enum zt_offload_device { ZT_OFFLOAD_NONE = 0, ZT_OFFLOAD_CPU, ZT_OFFLOAD_NVME } zt_offload_device;

/* Activation recomputation: NONE keeps every activation from the forward pass for the
 * backward; FULL keeps each transformer layer's input only and recomputes the layer's
 * forward right before its backward (one layer's working set serves all of them);
 * SELECTIVE keeps the matrix-product outputs and recomputes the cheap, memory-heavy parts
 * (attention scores, softmax, dropout and context; GELU), as Korthikanti et al. 2022;
 * EVERY_K keeps the input of every k-th layer and recomputes the k layers of a segment
 * before their backward; AUTO plans a mode per layer (keep, selective, full, full with the
 * input offloaded) so the predicted peak fits memory_limit with the fewest recomputed
 * FLOPs. Gradients are bit-identical in every mode. */
typedef enum zt_recompute {
    ZT_RECOMPUTE_NONE = 0, ZT_RECOMPUTE_FULL, ZT_RECOMPUTE_SELECTIVE, ZT_RECOMPUTE_EVERY_K,
    ZT_RECOMPUTE_AUTO
} zt_recompute;

/* Training precision (zt_config.precision; DeepSpeed's "bf16" / "fp16" sections): FP32
 * keeps everything in fp32; BF16 and FP16 keep 2-byte compute copies of the parameters with
 * an fp32 master copy in the optimizer state. Gradient dtypes (zt_config.grad_accum_dtype,
 * DeepSpeed's data_types.grad_accum_dtype): AUTO is the precision's (fp32 for FP32 and BF16,
 * as DeepSpeed's bf16 optimizer accumulates; fp16 for FP16, as its fp16 optimizer does). */
typedef enum zt_precision { ZT_PREC_FP32 = 0, ZT_PREC_BF16, ZT_PREC_FP16 } zt_precision;
typedef enum zt_grad_dtype {
    ZT_GRAD_AUTO = 0, ZT_GRAD_FP32, ZT_GRAD_BF16, ZT_GRAD_FP16
} zt_grad_dtype;

/* Optimizers (zt_config.optimizer, optimizer.type). */
typedef enum zt_optimizer {
    ZT_OPT_ADAMW = 0,     /* torch.optim.AdamW: fp32 moments, 8 bytes per parameter */
    ZT_OPT_ADAMW8BIT,     /* bitsandbytes' AdamW8bit: block-wise 8-bit moments, ~2 bytes */
    ZT_OPT_ADAFACTOR,     /* transformers' Adafactor: factored second moments */
    ZT_OPT_LAMB,          /* DeepSpeed's FusedLamb: AdamW's moments, per-tensor trust ratio */
} zt_optimizer;

typedef struct zt_train_settings {
    /* batch: train_batch_size = micro_batch_size * grad_accum_steps * world_size */
    int train_batch_size, micro_batch_size, grad_accum_steps;
    /* optimizer (type "AdamW", or "Adam" with adam_w_mode true) */
    float lr, beta1, beta2, eps, weight_decay;
    int bias_correction;           /* optimizer.params.bias_correction (Adam, AdamW, Lamb) */
    float max_coeff, min_coeff;    /* Lamb's trust-ratio clamp (10, 0.01) */
    int eps_inside_sqrt;           /* Lamb: sqrt(v + eps) */
    float grad_clip;               /* gradient_clipping; 0 = off */
    int steps_per_print;
    uint64_t seed;
    int seed_given;                /* the config had "seed" */
    /* scheduler, DeepSpeed parameter names */
    zt_sched_type scheduler;
    double warmup_min_lr, warmup_max_lr;     /* WarmupLR, WarmupDecayLR */
    double warmup_min_ratio, cos_min_ratio;  /* WarmupCosineLR */
    int64_t warmup_num_steps, total_num_steps;
    int warmup_log;                /* warmup_type "log" (1) or "linear" (0) */
    /* zero_optimization: the stage and where offload puts state (offload_param: a later
     * issue) */
    int zero_stage;
    zt_offload_device offload_optimizer, offload_param;
    char nvme_path[256];
    int activation_checkpointing;  /* an activation_checkpointing section was given */
    /* "zerotrain" section */
    int n_no_decay;                /* zerotrain.no_decay patterns; -1 = the default (biases
                                    * and LayerNorm weights) */
    int threads;                   /* zerotrain.threads, 0 = all cores */
    double collective_timeout;     /* zerotrain.collective_timeout, seconds, 0 = off */
    int check_collectives;         /* zerotrain.check_collectives */
    int comm_progress;             /* zerotrain.comm_progress: ZT_PROGRESS_* */
    /* zero_optimization: overlap_comm (-1 = not given: DeepSpeed's default), the smaller of
     * reduce_bucket_size and allgather_bucket_size (0 = no cap), stage3_prefetch_bucket_size,
     * stage3_param_persistence_threshold, stage3_max_live_parameters */
    int overlap_comm;
    size_t bucket_size, prefetch_size, persist_threshold, max_live;
    /* offload_optimizer.buffer_count, aio.block_size, aio.queue_depth */
    int offload_buffers, aio_queue_depth, offload_param_buffers;
    int aio_threads, aio_single_submit, aio_overlap_events;
    size_t aio_block_size, sub_group_size;
    /* offload_param.buffer_size and max_in_cpu in elements (0 = not given) */
    size_t offload_param_buffer_size, offload_param_max_in_cpu;
    size_t memory_limit;           /* zerotrain.memory_limit in bytes (0 = none) */
    int offload_gradients;         /* zerotrain.offload_gradients: 0 not given, 1, -1 */
    int direct_io;                 /* zerotrain.direct_io: 0 auto, 1 required, -1 off */
    int recompute;                 /* zerotrain.recompute: ZT_RECOMPUTE_* */
    int recompute_k;               /* "every-k:K": K */
    /* activation_checkpointing: cpu_checkpointing, number_checkpoints (0 = not given),
     * profile */
    int offload_checkpoints, number_checkpoints, recompute_profile;
    /* optimizer.type (ZT_OPT_*; "Adam" is ZT_OPT_ADAMW), AdamW8bit's min_8bit_size and the
     * zerotrain.fp32_optimizer_state patterns (zt_train_config_fp32_state; n_fp32_state -1
     * when the key is absent: the embedding tables, as zt_config's -1), Adafactor's
     * parameters with Hugging Face's names (lr above is 0 with relative_step) */
    int optimizer;
    size_t min_8bit_size;
    int n_fp32_state;
    float adafactor_eps1, adafactor_eps2, clip_threshold, decay_rate, adafactor_beta1;
    int relative_step, scale_parameter, warmup_init;
    int optimizer_given;           /* the config had an "optimizer" section (zerotrain train
                                    * gives T5 Adafactor when it has none) */
    /* zerotrain.skip_nonfinite (the divergence guard; 1 unless the config says false) and
     * zerotrain.max_skipped_steps (consecutive skips that end a run; 5) */
    int skip_nonfinite, max_skipped_steps;
    /* zerotrain.electra_generator_size (0.25): ELECTRA's joint pretraining's generator,
     * scaled from the discriminator */
    float electra_generator_size;
    int precision;                 /* ZT_PREC_*: fp16.enabled, bf16.enabled (or bfloat16.enabled) */
    int grad_accum_dtype;          /* ZT_GRAD_*: data_types.grad_accum_dtype */
    int comm_dtype;                /* ZT_GRAD_*: communication_data_type */
    double loss_scale, min_loss_scale; /* fp16.*: DeepSpeed's dynamic loss scaling */
    int initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis;
} zt_train_settings;

typedef struct zt_train_config zt_train_config;
/* Parses JSON text (source names it in messages, e.g. the file path). world_size resolves
 * the batch sizes; total_steps (0 = unknown) resolves "auto" in scheduler total_num_steps. */
ZT_API int zt_train_config_parse(const char *json, const char *source, int world_size,
                                 int64_t total_steps, zt_train_config **out);
ZT_API int zt_train_config_load(const char *path, int world_size, int64_t total_steps,
                                zt_train_config **out);
ZT_API void zt_train_config_destroy(zt_train_config *c);
ZT_API const zt_train_settings *zt_train_config_settings(const zt_train_config *c);
/* zerotrain.no_decay pattern i (0 <= i < n_no_decay); a pattern matches a parameter name
 * that contains it as a substring. */
ZT_API const char *zt_train_config_no_decay(const zt_train_config *c, int i);
/* zerotrain.fp32_optimizer_state pattern i (0 <= i < n_fp32_state), matched the same way. */
ZT_API const char *zt_train_config_fp32_state(const zt_train_config *c, int i);
/* Learning rate of optimizer step `step` (0 = the first update), as DeepSpeed's scheduler
 * gives it; the optimizer lr when there is no scheduler. */
ZT_API double zt_train_config_lr(const zt_train_config *c, int64_t step);
/* The config reference (Markdown) generated from the key table and the zt_config field list:
 * docs/config.md. */
ZT_API const char *zt_train_config_reference(void);

/* ---- engine -------------------------------------------------------------------------- */
typedef struct zt_engine zt_engine;

enum { ZT_PROGRESS_POLL = 0, ZT_PROGRESS_THREAD = 1 };

typedef struct zt_config {
    /* model: exactly one of model_dir (Hugging Face folder: config.json plus
     * model.safetensors or model.safetensors.index.json), model_preset ("bert-tiny",
     * "bert-mini", "bert-small", "bert-medium", "bert-base", "bert-large") or model_config
     * (a Hugging Face config.json alone: that architecture, weights initialised from the
     * seed, as from_config does). */
    const char *model_dir;
    const char *model_preset;
    const char *model_config;
    int vocab_size;          /* presets only: 0 = 30522 */
    uint64_t seed;           /* Philox key: init, dropout */
    int threads;             /* 0 = all cores */
    int dropout;             /* 1 = use the model's dropout probabilities, 0 = off */
    /* optimizer (AdamW, torch.optim.AdamW semantics) */
    float lr;
    float beta1, beta2, eps, weight_decay;
    /* 1 (the default): AdamW's step is lr / (1 - beta1^t) and its denominator
     * sqrt(v / (1 - beta2^t)) + eps; 0: lr and sqrt(v) + eps, as DeepSpeed's Adam with
     * bias_correction false (AdamW only; AdamW8bit always corrects, as bitsandbytes does) */
    int bias_correction;
    float grad_clip;         /* global-norm clipping, 0 = off */
    int decay_all;           /* 1 = weight decay on every parameter, 0 = skip biases and
                              * LayerNorm weights (BERT recipe) */
    /* Parameter-name substrings that get no weight decay, replacing the default rule; borrowed
     * for the call. n_no_decay < 0 (the default) keeps the default rule. */
    const char *const *no_decay;
    int n_no_decay;
    /* ZeRO stage: 0 = everything replicated, 1 = optimizer state sharded, 2 = gradients
     * too (reduce-scattered unit by unit during the backward pass), 3 = parameters too
     * (each unit gathered just before its forward and backward, released after). */
    int zero_stage;
    /* Floats per collective at most (DeepSpeed's reduce_bucket_size / allgather_bucket_size,
     * the smaller of the two): a larger unit is cut into pieces when the engine is built,
     * the same way for every stage. 0 = one collective per unit. */
    size_t bucket_size;
    /* Overlap the gradient reduction with the backward pass (1) or not (0); -1 = the
     * default, on. Stages 2-3 reduce-scatter a unit while the next unit's backward runs;
     * stages 0-1 do so in the step's last micro-batch (grad_accum_steps tells which one
     * that is). The result is the same either way. */
    int overlap_comm;
    int grad_accum_steps;    /* micro-batches per step (0 or 1: one) */
    /* Stage 3: floats gathered ahead of use (0 = gather each unit when it is needed), most
     * floats gathered at once (0 = no cap; the unit in use is always gathered), and units of
     * fewer floats than persist_threshold stay gathered (0 = none). */
    size_t prefetch_size, max_live, persist_threshold;
    /* How non-blocking collectives advance while the engine computes: ZT_PROGRESS_POLL
     * (MPI_Test between kernels) or ZT_PROGRESS_THREAD (a progress thread; needs
     * MPI_THREAD_MULTIPLE, else polling). */
    int progress;
    /* Seconds a collective may take before the hang handler runs (0 = no watchdog), and
     * whether to compare (sequence, operation, count) across ranks before each one. */
    double collective_timeout;
    int check_collectives;
    /* Optimizer-state offload (stages 1-3): ZT_OFFLOAD_NONE, ZT_OFFLOAD_CPU (a separate RAM
     * pool) or ZT_OFFLOAD_NVME (a swap file in nvme_path, written and read through io_uring
     * with O_DIRECT, unlinked at once). The step fetches each unit's moments for its update
     * and writes them back right after, offload_buffers units in flight (read ahead, update,
     * write back; at least 3). The result is bit-identical to no offload. */
    int offload_optimizer;
    const char *nvme_path;   /* borrowed for the engine's life */
    size_t aio_block_size;   /* bytes per I/O request (a multiple of 4096; 1 MiB) */
    int aio_queue_depth;     /* requests in flight (8) */
    /* aio.intra_op_parallelism (1: the engine's thread drives one ring per store; n > 1: n
     * I/O threads with a ring each share the queue depth), aio.single_submit (0: pieces
     * are submitted in batches) and aio.overlap_events (1: new pieces start while others
     * are in flight; 0: in waves). DeepSpeed's defaults: 1, 0, 1. */
    int aio_threads, aio_single_submit, aio_overlap_events;
    int offload_buffers;     /* 4 */
    /* floats per optimizer step tile when offloading (DeepSpeed's sub_group_size, 1e9):
     * each unit's shard is cut into sub-groups of at most this many; the working buffers hold
     * one sub-group each. 0 = whole units. */
    size_t sub_group_size;
    /* Parameter offload (stage 3): each unit's parameter shard lives in a RAM pool
     * (ZT_OFFLOAD_CPU) or the swap folder (ZT_OFFLOAD_NVME, nvme_path); offload_param_buffers
     * shard buffers (at least 3; DeepSpeed's buffer_count, 5) cache them, read ahead along
     * the unit order of the pass. Bit-identical to no offload. */
    int offload_param;
    int offload_param_buffers;
    /* offload_param.buffer_size: elements per shard buffer; the buffers hold the largest unit
     * shard, so a smaller value is an error (0 = not given). offload_param.max_in_cpu:
     * elements the shard buffers may hold, capping their count (0 = no cap). */
    size_t offload_param_buffer_size, offload_param_max_in_cpu;
    /* Stages 2-3 with optimizer offload: whether this rank's reduced gradient shards go
     * where the optimizer state goes (written to the store as each unit's reduce-scatter
     * completes, read back by the update, as ZeRO-Infinity does), so no gradient shard stays
     * in RAM. 0 = automatic (yes, unless memory_limit plans them in RAM), 1 = yes, -1 = keep
     * them in RAM. Bit-identical either way. */
    int offload_gradients;
    /* Recomputation (zerotrain.recompute, ZT_RECOMPUTE_*): recompute_k is EVERY_K's segment
     * length; number_checkpoints > 0 with FULL keeps that many layer inputs (segments of
     * ceil(layers / number_checkpoints)). offload_checkpoints: the kept layer inputs go to
     * the offload store (NVMe under nvme_path, else the RAM pool) once the next layer has
     * read them, and are read back ahead of the backward pass, in reverse. AUTO needs
     * memory_limit and plan_micro_batch x plan_seq_len. recompute_profile: time and bytes
     * of recomputation per unit (zt_engine_recompute_profile). */
    int recompute, recompute_k, number_checkpoints, offload_checkpoints, recompute_profile;
    /* O_DIRECT for the swap files: 0 = probe, buffered with a warning where refused; 1 =
     * required (refused: a clear error); -1 = buffered I/O. */
    int direct_io;
    /* Bytes per rank the engine plans to stay within (zerotrain.memory_limit; 0 = no plan):
     * before allocating, it predicts each category and moves the optimizer state, then
     * (stage 3) the parameter shards to NVMe (nvme_path) until the predicted peak fits, or
     * fails saying what would fit. The activations are counted when the batch shape is
     * given (plan_micro_batch x plan_seq_len). The plan is logged (ZT_LOG_INFO). */
    size_t memory_limit;
    int plan_micro_batch, plan_seq_len;
    /* The optimizer (ZT_OPT_*). AdamW and AdamW8bit use lr, beta1, beta2, eps and
     * weight_decay above; Adafactor uses lr (unless relative_step) and weight_decay (its
     * Hugging Face default is 0; zt_config_init sets AdamW's 0.01).
     * AdamW8bit (bitsandbytes' block-wise algorithm): each tensor's two moments are one byte
     * per element with one fp32 absolute maximum per 256 elements; tensors of fewer than
     * min_8bit_size elements (4096), and those whose name contains one of the n_fp32_state
     * fp32_state substrings (borrowed for the call), keep fp32 moments. n_fp32_state -1 (what
     * zt_config_init sets) means the built-in model's embedding tables instead of patterns
     * (BERT's word, position and token-type embeddings, T5's shared table and relative-
     * attention biases: every nn.Embedding, as the Hugging Face Trainer arranges with
     * bitsandbytes); parameters added with zt_engine_add_param are never embedding tables,
     * so name yours in fp32_state. 0: only the size rule.
     * Adafactor (transformers' Adafactor.step, with its defaults from zt_config_init): eps
     * (adafactor_eps1 1e-30 added to g^2, adafactor_eps2 1e-3 the least parameter scale),
     * clip_threshold 1, decay_rate -0.8, adafactor_beta1 < 0 = no first moment,
     * relative_step 1 (the step size is min(1e-2, 1/sqrt(t)), or 1e-6 t with warmup_init,
     * and the lr argument of zt_engine_step is not used; lr here must be 0, no lr, as
     * Hugging Face refuses a manual lr with relative steps), scale_parameter 1 (times the
     * parameter's RMS, at least eps2). Tensors of two or more dimensions keep factored row
     * and column moments over their last two dimensions (Hugging Face's exp_avg_sq_row
     * shape[:-1] and exp_avg_sq_col shape[:-2] + shape[-1:]; replicated on every rank,
     * small), vectors a full one. Every optimizer is
     * sharded by ZeRO, offloadable and checkpointed like AdamW, and gives the same bits at
     * every stage for one world size. */
    int optimizer;
    size_t min_8bit_size;
    const char *const *fp32_state;
    int n_fp32_state;
    float adafactor_eps1, adafactor_eps2, clip_threshold, decay_rate, adafactor_beta1;
    int relative_step, scale_parameter, warmup_init;
    /* Lamb (DeepSpeed's FusedLamb): lr, beta1, beta2, eps, weight_decay and bias_correction
     * as AdamW's fields; each tensor's step is scaled by ||p|| / ||update|| clamped to
     * [min_coeff, max_coeff] (10, 0.01), or 1 when a norm is 0; eps_inside_sqrt 1: the
     * denominator sqrt(v + eps). The norms span every rank's shard of a tensor (sums added
     * in rank order), so stages give the same bits. */
    float max_coeff, min_coeff;
    int eps_inside_sqrt;
    /* The divergence guard (zerotrain.skip_nonfinite; 0 here, 1 in `zerotrain train`): a
     * step whose global gradient norm is not finite, or whose loss was not finite on any
     * rank (zt_engine_forward_backward), is skipped by zt_engine_step: parameters,
     * optimizer state and the step count stay as they were (zt_step_info.skipped). 0: every
     * step is applied; each optimizer's own per-element rule meets non-finite values. */
    int skip_nonfinite;
    /* BERT's head (ZT_HEAD_*). ZT_HEAD_AUTO: the config's "architectures" (a
     * BertForSequenceClassification config is a classifier, anything else a masked LM).
     * ZT_HEAD_MLM: a masked LM (a classifier checkpoint's pooler and classifier are not used,
     * its MLM head is initialised, both with a notice). ZT_HEAD_CLASSIFY: a
     * BertForSequenceClassification of num_labels outputs (0: the config's), problem_type
     * ZT_PROBLEM_* (0: the config's, or decided by each batch's labels as Hugging Face
     * decides it) and label_names (num_labels names, id2label, copied; NULL: the config's,
     * or LABEL_0, LABEL_1, ...); a masked-LM checkpoint gets a freshly initialised pooler
     * and classifier, with a notice, as AutoModelForSequenceClassification gives it. T5
     * takes ZT_HEAD_AUTO only. */
    int head;
    int num_labels, problem_type;
    /* ZT_HEAD_MLM on an ELECTRA discriminator (ElectraForPreTraining): its joint pretraining
     * with a generator (zt_engine_electra_outputs); a folder with electra_pretraining.json is
     * that already with ZT_HEAD_AUTO. The generator is the folder's generator_config.json,
     * else the discriminator with hidden_size (and intermediate_size 4x, heads hidden / 64)
     * scaled by electra_generator_size (zerotrain.electra_generator_size; 0 = 0.25). */
    float electra_generator_size;
    const char *const *label_names;
    /* Forward only (prediction): no gradients and no optimizer state are allocated, every
     * layer keeps nothing for a backward pass (BERT: the layers share one working set and
     * their outputs rotate through three buffers; T5 keeps each block's output), and
     * zt_engine_evaluate / zt_engine_logits are the passes there are (forward_backward,
     * step, zero_grad, read_grad and checkpoint saves are refused). Stage 3 gathers and
     * offloaded parameters stream as in training; optimizer offload and recomputation
     * settings do not apply. */
    int inference;
    /* ZT_PREC_* and the gradients' accumulation dtype ZT_GRAD_* (see zt_precision): the
     * parameters' compute copies are 2 bytes in bf16 and fp16, with an fp32 master in the
     * optimizer state; ZT_GRAD_AUTO accumulates in fp32, or fp16 with fp16 (DeepSpeed's
     * defaults). The engine trains fp32, bf16 and fp16 (with fp16: loss scaling below). */
    int precision, grad_accum_dtype;
    /* fp16's loss scaling, DeepSpeed's fp16 section: loss_scale 0 = dynamic (else that fixed
     * scale), starting at 2^initial_scale_power, doubled after loss_scale_window steps
     * without overflow, halved on an overflow once `hysteresis` overflows were tolerated
     * (consecutive_hysteresis: refilled after each good step), never below min_loss_scale.
     * A step whose gradients overflow (not finite) is skipped. */
    double loss_scale;
    int initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis;
    double min_loss_scale;
    /* The gradients' reduction dtype (ZT_GRAD_*, DeepSpeed's communication_data_type): AUTO
     * is the accumulation dtype's; bf16 / fp16 reduce-scatter 2 bytes a gradient (each
     * rounded to it first), summed pairwise in fp32 and rounded, as a 16-bit all-reduce. */
    int comm_dtype;
} zt_config;

enum { ZT_HEAD_AUTO = 0, ZT_HEAD_MLM = 1, ZT_HEAD_CLASSIFY = 2 };
/* config.json's problem_type */
enum {
    ZT_PROBLEM_SINGLE_LABEL = 1, /* "single_label_classification": cross-entropy, labels [B] */
    ZT_PROBLEM_MULTI_LABEL = 2,  /* "multi_label_classification": BCE with logits */
    ZT_PROBLEM_REGRESSION = 3,   /* "regression": mean squared error */
};

/* A collective that does not complete cannot be returned from: after logging, the engine
 * calls this handler (default: MPI_Abort on the engine's communicator, exit code 75). This
 * is the library's one exception to "never abort"; a host program may install its own
 * (called on the watchdog thread; it should not return). NULL restores the default. */
typedef void (*zt_hang_fn)(const char *message, void *user);
ZT_API void zt_hang_handler_set(zt_hang_fn fn, void *user);

/* The start-up agreement of a trainer's ranks, before zt_engine_create (collective over
 * comm; the engine makes the same agreement over its own configuration and model shape).
 * A rank that failed on its own would otherwise leave the others waiting in their first
 * collective. Each rank passes its status (0, or a negative code with its message) and its
 * resolved settings as "key=value" lines (NULL: none). Returns 0 on every rank when every
 * rank succeeded and every rank's settings equal rank 0's; otherwise a negative code on every
 * rank, zt_last_error() naming the lowest failing rank and its message, or the first key
 * that differs and the two ranks' values. timeout > 0: seconds a rank may be missing before
 * the hang handler runs. comm MPI_COMM_NULL: status alone. */
ZT_API int zt_ranks_agree(MPI_Comm comm, int status, const char *message,
                          const char *settings, double timeout);


/* Fills defaults: AdamW lr 1e-4, betas (0.9, 0.999), eps 1e-8, wd 0.01, seed 42 (every
 * field's default: docs/config.md, "zt_config fields"). */
ZT_API void zt_config_init(zt_config *cfg);
/* The keyed interface, the recommended one (zstd's ZSTD_CCtx_setParameter): a program that
 * allocates zt_config_size() bytes, fills them with zt_config_init and sets fields only by
 * name does not depend on this struct's layout, so a field added later (fields are only ever
 * appended) needs no change there, and bindings need not mirror the struct. C code may still
 * use the struct's members; it is then compiled against the header it runs with (a new field
 * changes sizeof, and with it ZT_ABI_VERSION).
 * zt_config_set sets a field by its name from text ("zero_stage" "3", "lr" "1e-3",
 * "optimizer" "adamw8bit", "offload_optimizer" "nvme", "recompute" "every-k", "nvme_path"
 * DIR, ...; strings are borrowed like the struct's own). Every field is settable so but the
 * two pattern arrays no_decay and fp32_state (their counts are: n_fp32_state 0 or -1).
 * Unknown names and values that do not parse are ZT_E_CONFIG; ranges are checked by
 * zt_engine_create. zt_config_get writes a field's value as zt_config_set reads it (enums by
 * name) into buf: its length, or < 0 (ZT_E_NOMEM: buf too small). zt_config_key(i) names the
 * settable fields (NULL past the last). All come from one list of the fields, which also
 * gives the DeepSpeed JSON key that sets each (docs/config.md). */
ZT_API size_t zt_config_size(void);
ZT_API int zt_config_set(zt_config *cfg, const char *name, const char *value);
ZT_API int zt_config_get(const zt_config *cfg, const char *name, char *buf, size_t n);
ZT_API const char *zt_config_key(int i);
/* Sets every field of cfg that a key of the parsed config c determines (docs/config.md's
 * zt_config column; the others, such as the model and plan_seq_len, stay as they are), from
 * its resolved value: what a trainer does with a config file after zt_config_init. nvme_path
 * and the no_decay / fp32_state patterns point into c, which must outlive cfg's use. */
ZT_API int zt_train_config_apply(const zt_train_config *c, zt_config *cfg);

/* The library duplicates comm and never calls MPI_Init/Finalize. comm may be
 * MPI_COMM_NULL: one rank, no MPI calls at all. */
ZT_API int zt_engine_create(const zt_config *cfg, MPI_Comm comm, zt_engine **out);
ZT_API void zt_engine_destroy(zt_engine *e);
ZT_API const char *zt_engine_last_error(const zt_engine *e);

typedef struct zt_model_info {
    char model_type[16];     /* "bert", "roberta", "distilbert" or "t5" */
    /* T5: hidden_size = d_model, num_layers = encoder blocks, intermediate_size = d_ff,
     * max_positions = 0 (relative positions), type_vocab_size = 0 */
    int vocab_size, hidden_size, num_layers, num_heads, intermediate_size;
    int max_positions, type_vocab_size;
    size_t num_parameters;   /* trainable scalars (tied counted once) */
    int num_tensors;         /* parameter tensors (tied counted once) */
    int num_units;
    int num_decoder_layers;  /* T5; 0 for BERT */
    int head_dim;            /* d_kv (T5), hidden / heads (BERT) */
    char architecture[48];   /* "BertForMaskedLM", "BertForSequenceClassification", ... */
    int num_labels;          /* a classifier's outputs (0: not a classifier) */
    int problem_type;        /* a classifier's ZT_PROBLEM_* (0: decided by the labels) */
    /* config.json's special ids (-1: none): BERT and DistilBERT pad; RoBERTa pad, bos and
     * eos (<pad> 1, <s> 0, </s> 2); T5 pad and eos */
    int pad_token_id, bos_token_id, eos_token_id;
    /* ELECTRA's joint pretraining: its generator's shape (the rest as the discriminator's
     * above); 0 for every other model */
    int generator_hidden_size, generator_layers, generator_heads, generator_intermediate_size;
} zt_model_info;
ZT_API int zt_engine_model_info(const zt_engine *e, zt_model_info *out);
/* A classifier's name of label id (config.json's id2label), or NULL (not a classifier, or
 * id outside [0, num_labels)). Valid while the engine lives; the default names (LABEL_0, ...)
 * until this thread's next call. */
ZT_API const char *zt_engine_label_name(const zt_engine *e, int id);

typedef struct zt_param_info {
    const char *name;        /* Hugging Face name */
    const char *alias;       /* tied duplicate name the loaded checkpoint also stored, or NULL
                              * (e.g. "cls.predictions.decoder.weight") */
    int ndim;
    int64_t shape[4];
    size_t numel;
    int unit;
    int decay;               /* weight decay applies */
    size_t offset;           /* floats from the start of its unit's buffer */
} zt_param_info;
ZT_API int zt_engine_param_count(const zt_engine *e);
ZT_API int zt_engine_param_get(const zt_engine *e, int i, zt_param_info *out);

/* One micro-batch, row-major [B, T] int64 arrays. token_type_ids may be NULL (zeros),
 * attention_mask may be NULL (all ones). labels: -100 = ignored.
 * first_sample: global index of row 0 (keys dropout; row b uses first_sample + b). */
typedef struct zt_batch {
    int B, T;
    const int64_t *input_ids, *attention_mask, *token_type_ids, *labels;
    uint64_t first_sample;
    /* Labelled tokens the loss is averaged over: the whole step's count when a step has
     * several micro-batches (or ranks), so the gradient is that of the step's mean loss.
     * 0 = this batch's own count. */
    int64_t label_count;
    /* Encoder-decoder models (T5): labels are [B, T_dec] (the targets; the decoder's input is
     * them shifted right) and decoder_attention_mask [B, T_dec] may mask decoder keys (NULL:
     * causal only). T_dec 0: labels are [B, T] (BERT). */
    int T_dec;
    const int64_t *decoder_attention_mask;
    /* Sequence classification (BertForSequenceClassification): labels are class ids [B]
     * (single-label; -100 ignored), or labels is NULL and label_values [B, num_labels] holds
     * the targets (multi-label: 0/1 per class; regression: the values). */
    const float *label_values;
    /* ALBERT's sentence-order prediction (AlbertForPreTraining): sentence_order_label [B], 0
     * = the two segments in order, 1 = swapped (-100: ignored). NULL: no SOP loss (the
     * masked LM's alone). */
    const int64_t *sentence_order_label;
    /* The second loss's count, as label_count for the first (the whole step's; 0 = this
     * batch's own): AlbertForPreTraining's SOP mean is over aux_count rows, ELECTRA's joint
     * pretraining's replaced-token-detection mean over aux_count attended positions. */
    int64_t aux_count;
    /* ELECTRA's joint pretraining: the discriminator's tokens at the masked positions (labels
     * != -100) [B, T], in place of the generator's samples (a reference's replacements, or
     * the caller's own sampling; the generator is still trained). NULL: sampled. */
    const int64_t *replacement_ids;
} zt_batch;

typedef struct zt_fb_result {
    float loss;              /* mean cross-entropy over labelled tokens */
    double loss_sum;         /* sum of token losses */
    int64_t n_labels;        /* labelled tokens in the batch */
    double flops;            /* model FLOPs of this forward + backward: matrix products
                              * (linear layers, attention scores and context, the MLM
                              * decoder over the labelled rows training computes), 3x the
                              * forward's; elementwise work not counted */
} zt_fb_result;

/* Forward and backward of one micro-batch; gradients are accumulated (+=) until
 * zt_engine_zero_grad. keep_logits != 0 keeps [B, T, V] logits for zt_engine_logits. */
ZT_API int zt_engine_forward_backward(zt_engine *e, const zt_batch *b, int keep_logits,
                                      zt_fb_result *out);
/* Forward only, dropout off (evaluation): loss over the batch's labelled tokens; leaves the
 * gradients untouched. Its logits are then zt_engine_logits': a sequence classifier's
 * [B, 1, num_labels] (its batch may have no labels at all: the logits alone), a masked LM's
 * at the labelled positions only, [1, n_labels, V] in row-major order of the positions
 * (fill-mask: label the [MASK] positions with any id); T5's likewise at its labelled decoder
 * positions. */
ZT_API int zt_engine_evaluate(zt_engine *e, const zt_batch *b, zt_fb_result *out);
/* Prediction with a built-in BERT (one forward pass, zt_engine_evaluate; an engine created
 * with zt_config.inference holds no gradients or optimizer state for it). Token ids in (the
 * caller tokenizes), numbers out.
 * A sequence classifier's outputs for batch b (its labels are not used): probs [B,
 * num_labels], the softmax over the labels (single-label), each label's sigmoid
 * (multi-label), or the predicted values (regression). */
ZT_API int zt_predict_classify(zt_engine *e, const zt_batch *b, float *probs);
/* A masked LM's (zt_config.head ZT_HEAD_MLM, or its config's) k most likely tokens at each
 * position whose input id is mask_id: for mask m (row-major order over [B, T], at most
 * max_masks), positions[m] (its index into [B, T]), ids[m k + j] and scores[m k + j] (the
 * softmax probability), best first, equal logits by lower id. Returns the number of masks,
 * or < 0 (no mask, too many, not a masked LM). */
ZT_API int zt_predict_fill_mask(zt_engine *e, const zt_batch *b, int64_t mask_id, int k,
                                int max_masks, int32_t *ids, float *scores, int64_t *positions);
/* Generation with an encoder-decoder (T5ForConditionalGeneration), as transformers'
 * generate: greedy decoding (num_beams 1) or beam search (BeamSearchScorer: length penalty,
 * early stopping, eos handling, max_new_tokens). The decoder caches each block's
 * self-attention keys and values per position and its cross-attention ones once. */
enum {
    ZT_EARLY_STOP_HEURISTIC = 0, /* transformers' early_stopping=False: a batch row is done
                                  * when no open beam can beat its worst finished one at the
                                  * current length */
    ZT_EARLY_STOP_TRUE = 1,      /* True: done at num_beams finished hypotheses */
    ZT_EARLY_STOP_NEVER = 2      /* "never": only when none can beat them at any length */
};
typedef struct zt_generate_config {
    int max_new_tokens;        /* tokens generated at most, </s> included (20) */
    int num_beams;             /* 1: greedy; > 1: beam search (1) */
    float length_penalty;      /* beam search: a hypothesis scores its summed log-probability
                                * / (tokens generated)^length_penalty (1.0) */
    int early_stopping;        /* ZT_EARLY_STOP_* (ZT_EARLY_STOP_HEURISTIC) */
    int use_cache;             /* 1: the key/value caches (1); 0: each step a whole forward
                                * pass over the tokens so far (zt_engine_evaluate: slower,
                                * the same tokens) */
    int eos_token_id, pad_token_id; /* -1: the model's config's (-1) */
    /* Called with each step's logits [rows, V] (rows = B x num_beams: row r is input row
     * r / num_beams) before they are used; it may change them, as a logits processor does.
     * Non-zero fails the generation. NULL: none. */
    int (*logits_hook)(void *arg, int step, float *logits, int rows, int V);
    void *hook_arg;
} zt_generate_config;
ZT_API void zt_generate_config_init(zt_generate_config *g);
/* Generates for b's B inputs (input_ids [B, T], attention_mask [B, T] or NULL; the rest
 * unused). ids [B, max_new_tokens]: row r's tokens (the decoder start token not included;
 * its </s> included when it gave one), pad_token_id after them; lens[B]: their count;
 * scores[B] (NULL: not wanted): beam search's sequence score, greedy's summed
 * log-probability. Collective: every rank calls it, each with its own rows, and they take
 * the same number of passes (stage 3 gathers in each). Returns the passes taken, or < 0. */
ZT_API int zt_generate(zt_engine *e, const zt_batch *b, const zt_generate_config *g,
                       int32_t *ids, int *lens, float *scores);
/* Logits of the last forward_backward with keep_logits; shape[0..2] = B, T, V. */
ZT_API int zt_engine_logits(const zt_engine *e, const float **logits, int64_t shape[3]);
/* ELECTRA's joint pretraining (zt_config.head ZT_HEAD_MLM on an ElectraForPreTraining
 * config, or a folder with electra_pretraining.json): what the last pass (forward_backward
 * or evaluate) made, valid until the next. The discriminator's input (the original ids with
 * the generator's samples at the masked positions) and labels (1: replaced by a different
 * token), [B, T]; the generator's logits (zt_engine_logits' rules: [B, T, V] with
 * keep_logits, else NULL); the two losses (means over this batch's masked and attended
 * positions, before gen_weight and disc_weight) and those counts. zt_engine_logits gives the
 * discriminator's [B, T, 1]. ZT_E_INVAL for any other model. */
typedef struct zt_electra_outputs {
    int B, T;
    const int64_t *disc_input_ids, *disc_labels;
    const float *generator_logits;
    int64_t generator_logits_shape[3];
    double generator_loss, discriminator_loss;
    int64_t masked, attended;
} zt_electra_outputs;
ZT_API int zt_engine_electra_outputs(const zt_engine *e, zt_electra_outputs *out);
ZT_API int zt_engine_zero_grad(zt_engine *e);

/* Copy a parameter / its gradient by Hugging Face name into dst (n = numel). */
ZT_API int zt_engine_read_param(const zt_engine *e, const char *name, float *dst, size_t n);
ZT_API int zt_engine_read_grad(const zt_engine *e, const char *name, float *dst, size_t n);
ZT_API int zt_engine_write_param(zt_engine *e, const char *name, const float *src, size_t n);

typedef struct zt_step_info {
    double grad_norm;        /* global L2 norm before clipping (fp16: of the unscaled
                              * gradients) */
    float clip_coef;         /* factor applied to gradients (1 = none) */
    int64_t step;            /* optimizer steps taken so far, this one included */
    float lr;                /* the step size applied: the lr argument, or Adafactor's relative
                              * step (before its parameter scaling) */
    int skipped;             /* cfg.skip_nonfinite: 1 = this step was skipped (nothing changed;
                              * step is the count before it), 0 = applied */
    int nonfinite_unit;      /* skipped: the first unit whose gradient is not finite on some
                              * rank, or -1 when only the loss was */
    int overflow;            /* fp16: the scaled gradients overflowed; the step was skipped and
                              * does not count as a divergence (skipped is 1 too) */
    double loss_scale;       /* fp16: the scale the step's backward passes used (1 otherwise);
                              * zt_engine_loss_scale: the next one */
} zt_step_info;
/* fp16: the loss scale the next backward passes multiply the loss's gradient by (a trainer
 * of its own model scales its loss by it; zt_engine_step unscales); 1 in fp32 and bf16. */
ZT_API double zt_engine_loss_scale(const zt_engine *e);
/* Clip by global norm (cfg.grad_clip), then the optimizer update (cfg.optimizer) with this
 * learning rate (Adafactor with relative_step: its own step size); lr must be finite and
 * >= 0. With cfg.skip_nonfinite a non-finite loss or norm skips the update (every rank
 * alike, from the reduced values): out->skipped. */
ZT_API int zt_engine_step(zt_engine *e, float lr, zt_step_info *out);

/* ---- models of your own: units and parameters ----------------------------------------
 * An outside trainer brings its model and its forward/backward; the engine owns what ZeRO
 * shards: each unit's flat parameter buffer (every parameter on a 256-float boundary), its
 * gradients, the optimizer state, their offload, the gradient reduction and checkpoints.
 * The built-in BERT and T5 register their units and run their passes through these same
 * functions.
 *
 * Create the engine with none of model_dir, model_preset, model_config set, register every
 * unit and its parameters in the order the forward pass uses them, then drive each pass:
 *
 *   forward:  for each unit: zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL);
 *             compute with p; zt_engine_unit_release(e, u);
 *   backward: for each unit in reverse: zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g);
 *             add the unit's gradients into g (+=); zt_engine_unit_grads_ready(e, u);
 *             zt_engine_unit_release(e, u);
 *   zt_engine_step(e, lr, &info); zt_engine_zero_grad(e);
 *
 * A pass is a run of acquires of one kind: forward (ZT_FOR_FORWARD), or backward
 * (ZT_FOR_BACKWARD, and ZT_FOR_RECOMPUTE for a unit's parameters alone within it). The
 * first forward and the first backward pass record their order of acquires (or
 * zt_engine_set_order declares them); stage 3 gathers and prefetches along it, and every
 * later pass must repeat it: a different unit at some position is an error naming both.
 * While an order is being recorded with more than one rank, each acquire first checks
 * that every rank acquires the same unit (a small collective), so ranks that disagree get
 * an error, not a hang. A unit may be held by several acquires at once (tied weights:
 * acquire both units); a unit released and acquired again by the next acquire is not
 * gathered twice.
 *
 * Every call returns 0 or a negative ZT_E_* code (zt_engine_last_error: what and where).
 * Misuse (a wrong unit, purpose or order) changes nothing; after any other failure inside a
 * pass, zt_engine_pass_abort lets go of it before the engine is used again. Names and shapes
 * are copied; buffers the
 * engine hands out stay the engine's (never free them) and are valid for the span each call
 * documents. Thread-safety: an engine is used by one thread at a time (several engines may
 * run on several threads); in stage 3 acquires are collective, so every rank must make the
 * same calls in the same order. */

/* zt_param_spec.init */
enum { ZT_INIT_NORMAL = 0, ZT_INIT_ZEROS = 1, ZT_INIT_ONES = 2, ZT_INIT_VALUES = 3 };

typedef struct zt_param_spec {
    const char *name;        /* unique among all parameters (copied; at most 111 bytes) */
    int ndim;                /* 1 to 4 */
    const int64_t *shape;    /* [ndim], each >= 1 */
    int init;                /* ZT_INIT_*: normal(0, std) from the engine's seed, zeros, ones,
                              * or values */
    float std;               /* ZT_INIT_NORMAL's standard deviation (> 0) */
    const float *values;     /* ZT_INIT_VALUES: numel floats, row-major; copied by the call */
    int no_decay;            /* weight decay does not apply (biases, norms) */
    const char *alias;       /* another name checkpoints may store it under, or NULL */
} zt_param_spec;

/* Appends a unit that will hold n_params parameters (added next with zt_engine_add_param);
 * *unit receives its index (units are numbered 0, 1, ... in the order added). */
ZT_API int zt_engine_add_unit(zt_engine *e, const char *name, int n_params, int *unit);
/* Appends a parameter to `unit` (the last unit added); *index (may be NULL) receives its
 * index for zt_engine_param_get. Registration ends at the first acquire, step, save or
 * load (or zt_engine_commit): later calls fail with ZT_E_INVAL. */
ZT_API int zt_engine_add_param(zt_engine *e, int unit, const zt_param_spec *p, int *index);
/* A further name a checkpoint may store parameter `index` under (tied copies); matched on
 * load, never written. */
ZT_API int zt_engine_add_param_alias(zt_engine *e, int index, const char *name);
/* Ends registration: allocates the buffers and shards of the stage and initialises the
 * parameters (collective). Called by the first call that needs them; calling it yourself
 * reports configuration errors early. */
ZT_API int zt_engine_commit(zt_engine *e);
/* Collectives for a trainer's own bookkeeping, over the engine's communicator and under its
 * watchdog (every rank calls them alike): x[0..n) summed over ranks in place; all[r * n + j]
 * = rank r's x[j] on every rank. */
ZT_API int zt_engine_sum_i64(zt_engine *e, int64_t *x, int n);
ZT_API int zt_engine_gather_f64(zt_engine *e, const double *x, int n, double *all);
/* this rank's index and the number of ranks (the engine's communicator) */
ZT_API int zt_engine_rank(const zt_engine *e);
ZT_API int zt_engine_world_size(const zt_engine *e);
/* units registered; name of unit u (owned by the engine) */
ZT_API int zt_engine_unit_count(const zt_engine *e);
ZT_API const char *zt_engine_unit_name(const zt_engine *e, int unit);
/* A built-in model's forward pass in steps, each using one unit: its step count and step
 * s's unit. The units in order (count = unit count) except where units serve several layers
 * (ALBERT: one unit per layer group, used by each of its layers); 0 before the commit and
 * for a model of your own. */
ZT_API int zt_engine_step_count(const zt_engine *e);
ZT_API int zt_engine_step_unit(const zt_engine *e, int step);

enum {
    ZT_FOR_FORWARD = 1,      /* parameters for a forward pass */
    ZT_FOR_BACKWARD = 2,     /* parameters and gradients for a backward pass */
    ZT_FOR_RECOMPUTE = 4,    /* parameters within a backward pass (recomputation) */
    ZT_FOR_EVAL = 8,         /* with ZT_FOR_FORWARD: no backward pass follows (stage 3 does
                              * not prefetch the backward's units) */
};
/* Makes unit u's whole parameters available: *params (may be NULL) receives the unit's
 * buffer (the offset of each parameter: zt_param_info.offset), valid until the matching
 * release. In a half-precision engine (zt_engine_param_dtype: ZT_PREC_BF16 or _FP16) the
 * buffer holds the 16-bit compute copies, 2 bytes an element (cast it to uint16_t *: bf16's
 * or IEEE binary16's bit patterns); the fp32 master lives with the optimizer state. ZT_FOR_BACKWARD also lends the unit's gradient buffer in *grads (the same
 * layout; add into it), valid until zt_engine_unit_grads_ready; with the other purposes
 * *grads (may be NULL) is set to NULL. Stage 3 gathers (waiting only for what the prefetch
 * has not brought yet). Errors: an unregistered unit, a purpose that is not one of the
 * above, a unit whose gradients were already made ready in this backward pass, a change of
 * the recorded order. */
ZT_API int zt_engine_unit_acquire(zt_engine *e, int unit, int purpose, float **params,
                                  float **grads);
/* The dtype of the parameter buffers zt_engine_unit_acquire gives: ZT_PREC_FP32, or the
 * run's half precision (ZT_PREC_BF16, ZT_PREC_FP16). Gradients are always fp32. */
ZT_API int zt_engine_param_dtype(const zt_engine *e);
/* Ends one acquire of unit u (the oldest one still held); the parameter pointer it gave
 * is no longer valid. Releasing a unit that is not held is an error. */
ZT_API int zt_engine_unit_release(zt_engine *e, int unit);
/* Unit u's gradients of this backward pass are complete: stages 2-3 start its
 * reduce-scatter now (overlapping what the trainer computes next), stages 0-1 in the last
 * micro-batch of a step (grad_accum_steps). The gradient pointer is no longer valid. Every
 * unit must be made ready once in each backward pass; zt_engine_step before that is an
 * error naming the first unit that is not. */
ZT_API int zt_engine_unit_grads_ready(zt_engine *e, int unit);

/* Ends the pass in progress without its checks: every acquire let go of, lent gradient
 * buffers taken back (this step's gradients are then incomplete: zt_engine_zero_grad before
 * the next step). For a trainer's own error handling; collective in stage 3. */
ZT_API int zt_engine_pass_abort(zt_engine *e);

#ifdef ZT_EXPERIMENTAL
/* Declares a pass's order of acquires instead of recording it: kind ZT_FOR_FORWARD or
 * ZT_FOR_BACKWARD; units[k] and purposes[k] (ZT_FOR_*) the k-th acquire; hold[k] != 0 when
 * acquire k is still held when acquire k + 1 happens (tied units used together; may be
 * NULL: released before the next acquire). Between passes only (a training forward pass
 * schedules the backward order behind its own); every rank must declare the same (checked,
 * collectively). */
ZT_API int zt_engine_set_order(zt_engine *e, int kind, const int *units, const int *purposes,
                               const unsigned char *hold, int n);
#endif

/* What a configuration needs per rank, before anything is allocated (`zerotrain estimate`):
 * the same footprint the engine's memory plan and report use (docs/architecture.md,
 * "Memory"). cfg names the model (model_dir, model_config or model_preset; its layout is
 * built, no weights are read), or none of them and num_params > 0: that many parameters in
 * units of at most unit_params (0: 2^26) each, a model without activations. Stage, optimizer,
 * offload placement, precision, buckets, stage-3 prefetch and recomputation come from cfg;
 * the activations of a plan_micro_batch x plan_seq_len batch are counted when both are set
 * (a named model only; recompute "auto" needs a memory_limit and is refused here). Bytes per
 * rank, as doubles (exact to 2^53). */
typedef struct zt_estimate {
    int world_size, zero_stage, precision;
    double num_params;           /* the model's parameters */
    double padded_params;        /* P: floats over all units, shard padding included */
    double param_bytes, grad_bytes, master_bytes; /* per parameter: compute copy, gradient,
                                                   * fp32 master (0 in fp32) */
    double optimizer_bytes_per_param; /* K: master + moments per owned parameter */
    double model_state_bytes;    /* the ZeRO paper's model states: the parameters, gradients
                                  * and optimizer state the rank holds, in RAM */
    double buffer_bytes;         /* the engine's buffers beyond them (gradient scratch and
                                  * reduced shards, stage 3's gather pool, offload working
                                  * and shard buffers, collective and I/O buffers) */
    double activation_bytes;     /* one micro-batch (0 when not counted) */
    double nvme_bytes;           /* what offload puts in the swap files */
    double params_nvme, grads_nvme, optimizer_nvme;
    double params_ram, grads_ram, optimizer_ram; /* RAM by category (model states and their
                                                  * buffers: the engine report's measured
                                                  * state bytes) */
    double comm_bytes, io_bytes; /* collective and I/O staging buffers (in buffer_bytes) */
    double peak_bytes;           /* model state + buffers + activations (the process's own
                                  * code, libraries and MPI come on top) */
} zt_estimate;
ZT_API int zt_estimate_memory(const zt_config *cfg, int world_size, double num_params,
                              size_t unit_params, zt_estimate *out);

/* Per-rank model state against the footprint formula (docs/architecture.md), and the
 * collectives issued so far. */
enum { ZT_COLL_KIND_REDUCE_SCATTER = 0, ZT_COLL_KIND_ALLGATHER, ZT_COLL_KIND_OTHER };
typedef struct zt_engine_report {
    int world_size, rank, zero_stage;
    size_t params;                 /* P: floats over all units, padding included */
    size_t predicted_state_bytes;  /* stage 0: 16P, 1: 8P + 8P/N, 2: 4P + 12P/N, 3: 16P/N
                                    * for AdamW (the 8 bytes of its moments per owned
                                    * parameter are the optimizer's own figure for the
                                    * others); the optimizer state less when it is on NVMe */
    size_t buffer_bytes;           /* engine buffers beyond the formula (gradient shards of
                                    * stages 0-1, stage 2's whole-unit scratch) */
    size_t measured_state_bytes;   /* params + grads + optimizer this engine holds now (the
                                    * AdamW moments appear at the first step) */
    double traffic_theory;         /* reduce-scatter + all-gather bytes per step over the
                                    * parameter bytes, textbook: 2 for stages 0-2, 3 for
                                    * stage 3 (N > 1) */
    double traffic_schedule;       /* what this engine moves per step of grad_accum_steps
                                    * (A) micro-batches: stages 0-1 2, stage 2 A + 1 (each
                                    * micro-batch reduced); stage 3 per micro-batch gathers a
                                    * unit once for consecutive uses (and for every use
                                    * within the prefetch window), the tied unit again for
                                    * the MLM head; persistent units once per step */
    size_t gathered_peak;          /* stage 3: most parameter bytes gathered at once */
    int progress;                  /* ZT_PROGRESS_* in effect */
    uint64_t collectives;          /* sequence number of the next collective */
    uint64_t coll_calls[3], coll_bytes[3];   /* by ZT_COLL_KIND_*; bytes: whole buffers */
    double coll_seconds[3];        /* blocked waiting (communication not hidden by compute) */
    double coll_flight[3];         /* from start to completion (hidden or not) */
    /* offload: bytes read from and written to the swap files (NVMe) and the RAM pool so far,
     * and the time the engine blocked waiting for them */
    uint64_t nvme_read_bytes, nvme_written_bytes, pool_read_bytes, pool_written_bytes;
    double io_wait_seconds;
    int offload_optimizer, offload_param; /* ZT_OFFLOAD_* in effect (memory_limit may set them) */
    int offload_gradients;         /* the gradient shards live with the optimizer state */
    /* the optimizer state this rank holds (RAM or NVMe; Adafactor's replicated factored
     * moments included), and those bytes over the parameter floats it updates (P at stage
     * 0, P / N otherwise): AdamW 8, AdamW8bit about 2.03, Adafactor well below 1 without
     * beta1 */
    size_t optimizer_state_bytes;
    double optimizer_bytes_per_param;
} zt_engine_report;
ZT_API int zt_engine_report_get(const zt_engine *e, zt_engine_report *out);
/* The same report, with this engine's memory by category ("memory" holds each category's
 * current and peak bytes of this engine's buffers, model and offload stores: other engines
 * of the process are not counted), and the process's "peak_rss" and "heap": {"source":
 * "jemalloc" or "none", "allocated", "resident"}, as one JSON object in buf (n bytes; for
 * bindings): returns the text's length (without the terminator); a length >= n means buf was
 * too small (nothing usable written). */
ZT_API int zt_engine_report_json(const zt_engine *e, char *buf, size_t n);

/* Recomputation of one step of the forward pass: what it keeps between the passes ("keep",
 * "selective", "full", "full+offload"; "segment" when recomputed in segments of
 * segment_k), and with recompute_profile the calls, seconds and bytes its recomputation
 * regenerated so far. Steps are the units in order, except in a model whose units serve
 * several layers (zt_engine_step_count); name is the step's unit's. */
typedef struct zt_recompute_info {
    const char *name;              /* the unit's name ("layer.3") */
    const char *mode;
    int segment_k;
    uint64_t calls, bytes;
    double seconds;
} zt_recompute_info;
ZT_API int zt_engine_recompute_info(const zt_engine *e, int step, zt_recompute_info *out);
/* The activation bytes the recomputation plan predicts for a plan_micro_batch x
 * plan_seq_len micro-batch (0 when the shape was not given), and with recompute "auto" the
 * plan in words ("" otherwise; owned by the engine). */
ZT_API size_t zt_engine_activation_prediction(const zt_engine *e);
ZT_API const char *zt_engine_recompute_plan(const zt_engine *e);
/* With zt_config.memory_limit: the placement the planner chose and its predicted bytes per
 * category ("" without a limit). Owned by the engine. */
ZT_API const char *zt_engine_memory_plan(const zt_engine *e);

/* Save weights as a Hugging Face folder (config.json + model.safetensors), each file written
 * atomically; above 5 GB (as Hugging Face does) sharded into model-0000k-of-0000n.safetensors
 * with model.safetensors.index.json. */
ZT_API int zt_engine_save_model(zt_engine *e, const char *dir);
/* The same with another shard limit in bytes (0 = never shard). */
ZT_API int zt_engine_save_model_ex(zt_engine *e, const char *dir, size_t max_shard_bytes);
/* The dtype the weights are saved in (saved models and checkpoints): ZT_PREC_FP32, or the
 * run's own half precision (ZT_PREC_BF16: torch_dtype "bfloat16" in config.json; ZT_PREC_FP16:
 * "float16"); -1 = the run's precision, the default (zt_config.precision). A half-precision
 * run saved in fp32 writes its fp32 master (collective, as a stage-3 save). */
ZT_API int zt_engine_set_save_dtype(zt_engine *e, int precision);

/* ---- training checkpoints -------------------------------------------------------------
 * ROOT/step-N/ holds model.safetensors + config.json (a Hugging Face folder), every rank's
 * optimizer state (rank-R.safetensors), state.json (zt_train_state and the optimizer's
 * layout), train_config.json, the trainer's record (trainer.json, when one was set) and
 * manifest.json: the size and xxh64 of every file, the run id, and a checksum of the
 * manifest itself. It is written under a hidden temporary name, every file fsynced, the
 * manifest last, then renamed into place: a crash at any moment leaves the previous
 * checkpoints loadable. Nothing else visible is created in ROOT.
 *
 * A run and its resumes are one lineage, named by a run id (32 hex digits) that rank 0
 * draws at the first save of a fresh engine and zt_checkpoint_load adopts from the
 * checkpoint; pruning (keep) only ever removes checkpoints of the engine's own lineage.
 * Nothing here follows a symbolic link when it removes or moves an entry: a link is removed
 * or moved itself, its target never touched. */
typedef struct zt_train_state {
    int64_t step;            /* optimizer steps done */
    uint64_t samples;        /* global samples consumed: the data position */
    uint64_t seed;           /* data, masking and dropout seed */
} zt_train_state;

/* Saves ROOT/step-N, N = st->step, which must be >= 0 (ZT_E_INVAL otherwise, nothing
 * written). train_config: JSON text stored beside the state (may be NULL). keep > 0 deletes
 * all but the newest `keep` checkpoints of this engine's lineage after a successful save
 * (another run's, an older version's without a run id and links are never deleted). Saving
 * over an existing step-N of another run replaces it, logged as a warning. Collective. */
ZT_API int zt_checkpoint_save(zt_engine *e, const char *root, const zt_train_state *st,
                              const char *train_config, int keep);
/* Verifies dir (the manifest's fields and own checksum, every file's size and checksum)
 * without loading it. A manifest of an older version, without its own checksum, is
 * accepted (its fields are checked) with one warning per process. */
ZT_API int zt_checkpoint_verify(const char *dir);
/* Loads dir into e (same model shape) after verifying it; e continues its lineage. */
ZT_API int zt_checkpoint_load(zt_engine *e, const char *dir, zt_train_state *st);
/* Verifies dir and writes its weights as a Hugging Face folder in out (config.json and
 * model.safetensors, sharded with an index above max_shard_bytes; 0 = never). The tensors
 * are streamed from the mapped checkpoint files, not loaded. */
ZT_API int zt_checkpoint_export(const char *dir, const char *out, size_t max_shard_bytes);
/* The same in a dtype: -1 or the weights' own (as saved), or ZT_PREC_FP32 for a bf16 / fp16
 * checkpoint: the fp32 master weights, gathered from the rank files' "master.<unit>" sections
 * tensor by tensor (config.json's torch_dtype float32); refused for another 16-bit dtype. */
ZT_API int zt_checkpoint_export_dtype(const char *dir, const char *out, size_t max_shard_bytes,
                                      int dtype);
/* Finds the newest checkpoint in root that verifies; corrupt or partial ones are logged
 * (naming the bad file) and moved aside under a hidden name. Returns 1 and its path in
 * path_out (size n) when one exists, 0 when none does, < 0 on error. */
ZT_API int zt_checkpoint_find_latest(const char *root, char *path_out, size_t n);
/* The step of a checkpoint folder's name ("step-N": N), or -1 for any other name. */
ZT_API int64_t zt_checkpoint_step_of(const char *name);
/* Removes every step-N entry of root that is not a checkpoint of e's lineage (another
 * run's, an older version's, one whose manifest does not read; a link: the link alone).
 * For a trainer that was told to replace a folder's checkpoints, once it has saved its
 * own. Not collective: rank 0 removes, other ranks return 0. Returns how many it removed;
 * ZT_E_INVAL before e has saved or loaded a checkpoint. */
ZT_API int zt_checkpoint_remove_other_runs(zt_engine *e, const char *root);
/* A trainer's own record of what it trains with (a JSON object, at most 4095 bytes: its
 * sequence length, batch size, data), saved as trainer.json in every checkpoint e writes
 * from now on; NULL: none. The library copies it and does not interpret it. */
ZT_API int zt_checkpoint_set_trainer_info(zt_engine *e, const char *json);
/* The trainer.json of the checkpoint the last zt_checkpoint_load read, or NULL (no load,
 * or a checkpoint without one). Owned by e, valid until the next load. */
ZT_API const char *zt_checkpoint_trainer_info(const zt_engine *e);

#ifdef __cplusplus
}
#endif
#endif
