/* config.c - DeepSpeed JSON training config (plus a "zerotrain" section) checked against one key
 * table and resolved ("auto", batch sizes) into zt_train_settings; the one list of zt_config's
 * fields (config.h), which says the JSON key that sets each, so a parsed config applies to a
 * zt_config from it; docs/config.md is generated from both. Acts on nothing, never prints: all
 * problems form one error message. */
#include "err.h"

#include <cjson/cJSON.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config.h"
#include "../format/fileio.h"
#include "../optimizer/adam8bit.h"
#include "../optimizer/schedule.h"

/* ---- the key table -------------------------------------------------------------------- */

enum { T_OBJ, T_BOOL, T_INT, T_NUM, T_STR, T_ENUM, T_BETAS, T_STRS, T_SEED, T_SIZE, T_EPS, T_ANY };
enum {
    C_APPLIED,  /* used by the engine now */
    C_LATER,    /* validated now, used by the ZeRO / offload / recomputation work */
    C_IGNORED,  /* DeepSpeed key that does not apply here: accepted with a notice */
    C_GATED,    /* DeepSpeed key accepted only while it asks for nothing (error otherwise) */
};
enum {
    A_NO,       /* "auto" is an error: nothing to derive it from */
    A_DEFAULT,  /* "auto" = the default */
    A_DERIVED,  /* "auto" = derived by a rule (auto_doc says which) */
    A_NEVER,    /* Hugging Face derives it from what zerotrain does not have: error, why */
};
#define F_NULL 1      /* null is accepted and means "not given" */
#define F_HI_OPEN 2   /* numeric range is [lo, hi) */
#define F_NOCASE 4    /* enum values compare case-insensitively */
#define F_REQUIRED 8  /* must be given when its parent section is */
#define F_QUIET 16    /* ignored without a notice, whatever the value */
#define F_DEPRECATED 32 /* C_GATED: a renamed DeepSpeed key (ZT_E_CONFIG, not unsupported) */

#define SCHED_BIT(t) (1u << (t))
#define S_LR SCHED_BIT(ZT_SCHED_WARMUP_LR)
#define S_DECAY SCHED_BIT(ZT_SCHED_WARMUP_DECAY_LR)
#define S_COS SCHED_BIT(ZT_SCHED_WARMUP_COSINE_LR)

/* optimizer.type values (the order of K_OPT_TYPE's list) and their bits for optimizer.params
 * keys that only some take */
enum { OT_ADAMW = 0, OT_ADAM, OT_ADAMW8BIT, OT_ADAFACTOR, OT_LAMB, OT_COUNT };
#define OPT_BIT(t) (1u << (t))
#define O_ADAM (OPT_BIT(OT_ADAMW) | OPT_BIT(OT_ADAM))
#define O_ADAM_ALL (O_ADAM | OPT_BIT(OT_ADAMW8BIT))
#define O_8BIT OPT_BIT(OT_ADAMW8BIT)
#define O_AF OPT_BIT(OT_ADAFACTOR)
#define O_LAMB OPT_BIT(OT_LAMB)
#define O_MOMENTS (O_ADAM_ALL | O_LAMB) /* the optimizers with Adam's two moments */

#define BIG 9007199254740992.0   /* 2^53: integers above it are not exact in JSON numbers */
#define IMAX 2147483647.0
/* a row's default is zt_config_init's value of the field the row sets (zt_cfg_fields) */
#define FIELD_DEF NAN

typedef struct key {
    const char *path;      /* dotted; "fp16.*" = any other key of fp16 */
    unsigned char type, cls, autom, flags;
    double def, lo, hi;    /* default and range of numbers; booleans use def 0/1 */
    const char *values;    /* T_ENUM: accepted values, '|'-separated (the first is index 0) */
    const char *unsup;     /* T_ENUM: DeepSpeed values that are valid there but not here */
    const char *unsup_why;
    const char *def_doc;   /* documented default when it is not simply def */
    const char *auto_doc;  /* what "auto" becomes (A_DERIVED) or why it cannot (A_NEVER) */
    const char *quiet;     /* C_IGNORED: value (besides null/false/disabled) that needs no notice */
    const char *doc;       /* one line; for C_IGNORED / C_GATED rows, why it does not apply */
    unsigned sched;        /* scheduler.params: bits of the schedule types that take it */
    unsigned opt;          /* optimizer.params: bits of the optimizer types that take it (0:
                            * every type) */
} key;

/* Rows the resolver reads by name; the unnamed ones after K_NAMED do not apply here. */
enum {
    K_TRAIN_BATCH, K_MICRO_BATCH, K_GAS, K_CLIP, K_STEPS_PER_PRINT, K_SEED_TOP,
    K_OPT, K_OPT_TYPE, K_OPT_PARAMS, K_LR, K_BETAS, K_EPS, K_WD, K_ADAM_W_MODE, K_TORCH_ADAM,
    K_BIAS_CORR, K_MIN8, K_LAMB_MAX, K_LAMB_MIN, K_LAMB_EPS_IN, K_AF_CLIP, K_AF_DECAY,
    K_AF_BETA1, K_AF_SCALE, K_AF_REL, K_AF_WARMUP,
    K_SCHED, K_SCHED_TYPE, K_SCHED_PARAMS, K_WMIN_LR, K_WMAX_LR, K_WNUM, K_WTYPE, K_TOTAL,
    K_WMIN_RATIO, K_COS_MIN_RATIO, K_LAST_IT,
    K_ZERO, K_STAGE, K_OVERLAP, K_REDUCE_BUCKET, K_ALLGATHER_BUCKET, K_REDUCE_SCATTER,
    K_ALLGATHER_PART, K_CONTIG_GRADS, K_PREFETCH_BUCKET, K_PERSIST, K_MAX_LIVE, K_MAX_REUSE,
    K_SUB_GROUP, K_ROUND_ROBIN,
    K_OFFOPT, K_OFFOPT_DEVICE, K_OFFOPT_NVME, K_OFFOPT_PIN, K_OFFOPT_BUFCOUNT, K_OFFOPT_FASTINIT,
    K_OFFPAR, K_OFFPAR_DEVICE, K_OFFPAR_NVME, K_OFFPAR_PIN, K_OFFPAR_BUFCOUNT, K_OFFPAR_BUFSIZE,
    K_OFFPAR_MAXCPU, K_CPU_OFFLOAD, K_CPU_OFFLOAD_PARAM, K_CPU_OFFLOAD_PIN,
    K_AC, K_AC_PARTITION, K_AC_CPU, K_AC_CONTIG, K_AC_NUMBER, K_AC_SYNC, K_AC_PROFILE,
    K_AIO, K_AIO_BLOCK, K_AIO_QDEPTH, K_AIO_INTRA, K_AIO_THREADS, K_AIO_SINGLE, K_AIO_OVERLAP,
    K_FP16, K_FP16_ON, K_FP16_LS, K_FP16_POWER, K_FP16_WINDOW, K_FP16_HYST, K_FP16_CONSEC,
    K_FP16_MIN, K_FP16_AUTOCAST, K_FP16_MASTER, K_BF16, K_BF16_ON, K_BFLOAT16, K_BFLOAT16_ON,
    K_DATA_TYPES, K_GRAD_ACCUM, K_COMM_DTYPE,
    K_ZT, K_ZT_NO_DECAY, K_ZT_THREADS, K_ZT_SEED, K_ZT_COLL_TIMEOUT, K_ZT_CHECK_COLL, K_ZT_PROGRESS,
    K_ZT_MEMLIMIT, K_ZT_OFFGRAD, K_ZT_DIRECT, K_ZT_RECOMPUTE, K_ZT_FP32_STATE,
    K_ZT_SKIP_NONFINITE, K_ZT_MAX_SKIPPED, K_ZT_ELECTRA_GEN,
    K_NAMED
};

#define NOT_OFFERED "not offered by zerotrain (a DeepSpeed feature outside its scope)"
#define GPU_ONLY "GPU-specific; zerotrain trains on the CPU"

static const key keys[] = {
    /* top level; the batch rule is DeepSpeed's: train_batch_size = micro x accumulation x N */
    [K_TRAIN_BATCH] = {"train_batch_size", T_INT, C_APPLIED, A_DERIVED, 0, 0, 1, IMAX,
        .def_doc = "derived", .auto_doc = "derived from the other two and the world size",
        .doc = "Samples per optimizer step over all ranks: micro batch x accumulation steps x "
               "world size. Give two of the three, or one of the batch sizes alone."},
    [K_MICRO_BATCH] = {"train_micro_batch_size_per_gpu", T_INT, C_APPLIED, A_DERIVED, 0, 0, 1,
        IMAX, .def_doc = "derived",
        .auto_doc = "derived from the other two and the world size",
        .doc = "Samples per forward/backward pass on one rank."},
    [K_GAS] = {"gradient_accumulation_steps", T_INT, C_APPLIED, A_DERIVED, 0, 0, 1, IMAX,
        .def_doc = "derived (1 when only one batch size is given)",
        .auto_doc = "derived from the other two and the world size",
        .doc = "Micro-batches whose gradients are summed before each optimizer step."},
    [K_CLIP] = {"gradient_clipping", T_NUM, C_APPLIED, A_DERIVED, 0, 0, 0, INFINITY,
        .auto_doc = "1.0 (Hugging Face's max_grad_norm default)",
        .doc = "Clip the global gradient L2 norm to this value; 0 = no clipping."},
    [K_STEPS_PER_PRINT] = {"steps_per_print", T_INT, C_APPLIED, A_NO, 0, 10, 1, IMAX,
        .doc = "Optimizer steps between progress reports (printed by the command)."},
    [K_SEED_TOP] = {"seed", T_SEED, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .doc = "Same as zerotrain.seed (accepted here because Hugging Face users write it "
               "here); if both are given they must be equal."},

    [K_OPT] = {"optimizer", T_OBJ, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "AdamW with the defaults below",
        .doc = "The optimizer: AdamW (torch.optim.AdamW's update), AdamW8bit (bitsandbytes' "
               "block-wise 8-bit AdamW), Adafactor (transformers' Adafactor) or Lamb "
               "(DeepSpeed's FusedLamb)."},
    [K_OPT_TYPE] = {"optimizer.type", T_ENUM, C_APPLIED, A_NO, F_NOCASE | F_REQUIRED, 0, 0, 0,
        .values = "AdamW|Adam|AdamW8bit|Adafactor|Lamb",
        .unsup = "OneBitAdam|ZeroOneAdam|OneBitLamb|Lion|Muon|MuAdam|MuAdamW|MuSGD|"
                 "Adagrad|SGD|FusedAdam|CPUAdam|Adam8bit|PagedAdamW8bit|PagedAdamW|Lion8bit",
        .unsup_why = "zerotrain implements AdamW, AdamW8bit, Adafactor and Lamb",
        .def_doc = "required in the section",
        .doc = "\"AdamW\"; \"Adam\" with adam_w_mode true (DeepSpeed's default), which is the "
               "same AdamW; \"AdamW8bit\": both moments one byte per element with one fp32 "
               "absolute maximum per 256 (about 2.03 bytes of state per parameter instead of "
               "8), tensors below min_8bit_size in fp32; \"Adafactor\": factored second "
               "moments for tensors of two or more dimensions (over the last two: rows + "
               "columns instead of rows x columns), Hugging Face's parameters and defaults; "
               "\"Lamb\": DeepSpeed's FusedLamb (Adam's moments, each tensor's step scaled by "
               "its trust ratio norm(p) / norm(update) clamped to [min_coeff, max_coeff]). "
               "Case-insensitive, as in DeepSpeed."},
    [K_OPT_PARAMS] = {"optimizer.params", T_OBJ, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "the defaults below",
        .doc = "Optimizer parameters, named as torch.optim.AdamW, bitsandbytes' AdamW8bit and "
               "transformers' Adafactor name them; each type takes its own (a key another "
               "type takes is an error naming the ones this type does)."},
    [K_LR] = {"optimizer.params.lr", T_NUM, C_APPLIED, A_DERIVED, F_NULL, 1e-3, 0, INFINITY,
        .def_doc = "1e-3 (DeepSpeed's Adam and AdamW, torch's AdamW, bitsandbytes' AdamW8bit; "
                   "Adafactor: none, relative steps)",
        .auto_doc = "5e-5, the Hugging Face Trainer's learning_rate default (Adafactor with "
                    "relative_step: none)",
        .doc = "Learning rate: the constant lr without a scheduler, and the reference of "
               "WarmupLR (warmup_max_lr) and WarmupCosineLR. Adafactor takes it only with "
               "relative_step false (Hugging Face's rule: with relative_step true an lr is an "
               "error; null or 0 is no lr)."},
    [K_BETAS] = {"optimizer.params.betas", T_BETAS, C_APPLIED, A_DEFAULT, F_HI_OPEN, 0, 0, 1,
        .opt = O_MOMENTS,
        .def_doc = "[0.9, 0.999]", .doc = "Decay rates [beta1, beta2] of the two moments."},
    [K_EPS] = {"optimizer.params.eps", T_EPS, C_APPLIED, A_DEFAULT, 0, FIELD_DEF, 0, INFINITY,
        .def_doc = "1e-8 (Adafactor: [1e-30, 1e-3])",
        .doc = "AdamW, AdamW8bit, Lamb: added to the denominator sqrt(v). Adafactor: [eps1, eps2], "
               "eps1 added to the squared gradient, eps2 the least parameter scale."},
    [K_WD] = {"optimizer.params.weight_decay", T_NUM, C_APPLIED, A_DERIVED, 0, 0.0, 0, INFINITY,
        .def_doc = "0, as DeepSpeed's Adam and AdamW (FusedAdam, DeepSpeedCPUAdam) and "
                   "Adafactor; 0.01 with torch_adam true (torch's AdamW) and for AdamW8bit "
                   "(bitsandbytes'). zt_config_init and the Python binding use torch's 0.01",
        .auto_doc = "0, the Hugging Face Trainer's weight_decay default",
        .doc = "Decoupled weight decay (p -= lr x weight_decay x p), not applied to the "
               "zerotrain.no_decay parameters."},
    [K_ADAM_W_MODE] = {"optimizer.params.adam_w_mode", T_BOOL, C_APPLIED, A_NO, 0, 1, 0, 0,
        .opt = O_ADAM,
        .doc = "DeepSpeed's Adam switch: true = decoupled weight decay (AdamW). false (Adam "
               "with L2 regularisation) is not supported; with type AdamW it has no effect, "
               "as in DeepSpeed."},
    [K_TORCH_ADAM] = {"optimizer.params.torch_adam", T_BOOL, C_APPLIED, A_NO, 0, 0, 0, 0,
        .opt = O_ADAM,
        .doc = "DeepSpeed's choice of implementation (torch or fused); either way the update "
               "is torch.optim.AdamW's."},
    [K_BIAS_CORR] = {"optimizer.params.bias_correction", T_BOOL, C_APPLIED, A_NO, 0, 1, 0, 0,
        .opt = O_MOMENTS,
        .doc = "Adam's bias correction of the moments (DeepSpeed's FusedAdam, CPUAdam and "
               "FusedLamb take it); false: the step is lr, the denominator sqrt(v) + eps. "
               "Lamb folds both corrections into its step size (lr sqrt(1 - beta2^t) / "
               "(1 - beta1^t)), as FusedLamb does. AdamW8bit always corrects (bitsandbytes "
               "has no switch)."},
    [K_LAMB_MAX] = {"optimizer.params.max_coeff", T_NUM, C_APPLIED, A_NO, 0, FIELD_DEF, 0, INFINITY,
        .opt = O_LAMB,
        .doc = "Lamb: the upper clamp of each tensor's trust ratio norm(p) / norm(update) "
               "(FusedLamb's default 10)."},
    [K_LAMB_MIN] = {"optimizer.params.min_coeff", T_NUM, C_APPLIED, A_NO, 0, FIELD_DEF, 0, INFINITY,
        .opt = O_LAMB,
        .doc = "Lamb: the lower clamp of the trust ratio (FusedLamb's default 0.01); at most "
               "max_coeff. A tensor whose norm or update norm is 0 takes ratio 1."},
    [K_LAMB_EPS_IN] = {"optimizer.params.eps_inside_sqrt", T_BOOL, C_APPLIED, A_NO, 0, 0, 0, 0,
        .opt = O_LAMB,
        .doc = "Lamb: the denominator sqrt(v + eps) instead of sqrt(v) + eps (FusedLamb's "
               "switch)."},
    [K_MIN8] = {"optimizer.params.min_8bit_size", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 0, BIG,
        .opt = O_8BIT,
        .doc = "Tensors with fewer elements keep fp32 moments (bitsandbytes' rule; the "
               "parameter table decides, not the shard)."},
    [K_AF_CLIP] = {"optimizer.params.clip_threshold", T_NUM, C_APPLIED, A_NO, 0, FIELD_DEF, 0,
        INFINITY, .opt = O_AF,
        .doc = "The update is divided by max(1, RMS(update) / clip_threshold); > 0."},
    [K_AF_DECAY] = {"optimizer.params.decay_rate", T_NUM, C_APPLIED, A_NO, F_HI_OPEN, FIELD_DEF,
        -INFINITY, 0, .opt = O_AF,
        .doc = "The second moments' decay at step t is 1 - t^decay_rate."},
    [K_AF_BETA1] = {"optimizer.params.beta1", T_NUM, C_APPLIED, A_NO, F_NULL | F_HI_OPEN, 0, 0, 1,
        .opt = O_AF, .def_doc = "null (no first moment)",
        .doc = "Decay of a first moment of the update (4 more bytes per parameter)."},
    [K_AF_SCALE] = {"optimizer.params.scale_parameter", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .opt = O_AF, .doc = "The step size is multiplied by max(eps2, RMS(parameter))."},
    [K_AF_REL] = {"optimizer.params.relative_step", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .opt = O_AF,
        .doc = "The step size is min(1e-2, 1/sqrt(t)) (Adafactor's own schedule: no lr, no "
               "scheduler); false: lr, which a scheduler may drive."},
    [K_AF_WARMUP] = {"optimizer.params.warmup_init", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .opt = O_AF,
        .doc = "With relative_step: the step size is min(1e-6 t, 1/sqrt(t))."},

    [K_SCHED] = {"scheduler", T_OBJ, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "none: constant lr",
        .doc = "Learning-rate schedule, advanced once per optimizer step as in DeepSpeed."},
    [K_SCHED_TYPE] = {"scheduler.type", T_ENUM, C_APPLIED, A_NO, F_REQUIRED, 0, 0, 0,
        .values = "WarmupLR|WarmupDecayLR|WarmupCosineLR", .unsup = "LRRangeTest|OneCycle",
        .unsup_why = NOT_OFFERED ", use WarmupLR, WarmupDecayLR or WarmupCosineLR",
        .def_doc = "required in the section",
        .doc = "Schedule (DeepSpeed's names, case-sensitive)."},
    [K_SCHED_PARAMS] = {"scheduler.params", T_OBJ, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "the defaults below",
        .doc = "Schedule parameters. Each type takes only its own (DeepSpeed fails on the "
               "others, and so does zerotrain)."},
    [K_WMIN_LR] = {"scheduler.params.warmup_min_lr", T_NUM, C_APPLIED, A_DEFAULT, 0, 0, 0,
        INFINITY, .sched = S_LR | S_DECAY, .doc = "lr at the start of the warmup."},
    [K_WMAX_LR] = {"scheduler.params.warmup_max_lr", T_NUM, C_APPLIED, A_DERIVED, 0, 0, 0,
        INFINITY, .sched = S_LR | S_DECAY,
        .def_doc = "optimizer.params.lr (WarmupLR); 0.001 (WarmupDecayLR)",
        .auto_doc = "optimizer.params.lr", .doc = "lr at the end of the warmup."},
    [K_WNUM] = {"scheduler.params.warmup_num_steps", T_INT, C_APPLIED, A_NEVER, 0, 1000, 1, BIG,
        .sched = S_LR | S_DECAY | S_COS,
        .auto_doc = "Hugging Face computes it from TrainingArguments warmup_steps or "
                    "warmup_ratio, which zerotrain does not see",
        .doc = "Warmup length in optimizer steps (DeepSpeed uses at least 2)."},
    [K_WTYPE] = {"scheduler.params.warmup_type", T_ENUM, C_APPLIED, A_NO, 0, 0, 0, 0,
        .sched = S_LR | S_DECAY | S_COS, .values = "log|linear", .def_doc = "log",
        .doc = "Warmup curve: log(it + 1) / log(warmup_num_steps), or it / warmup_num_steps."},
    [K_TOTAL] = {"scheduler.params.total_num_steps", T_INT, C_APPLIED, A_DERIVED, 0, 0, 1, BIG,
        .sched = S_DECAY | S_COS, .def_doc = "required",
        .auto_doc = "the run's total optimizer steps (total_steps argument); an error when "
                    "the caller does not know it",
        .doc = "Step at which the decay ends."},
    [K_WMIN_RATIO] = {"scheduler.params.warmup_min_ratio", T_NUM, C_APPLIED, A_NO, 0, 0, 0, 1,
        .sched = S_COS, .doc = "Warmup starts at this fraction of optimizer.params.lr."},
    [K_COS_MIN_RATIO] = {"scheduler.params.cos_min_ratio", T_NUM, C_APPLIED, A_NO, 0, 0.0001, 0,
        1, .sched = S_COS,
        .doc = "Fraction of optimizer.params.lr reached at total_num_steps and kept after."},
    [K_LAST_IT] = {"scheduler.params.last_batch_iteration", T_INT, C_APPLIED, A_NO, 0, -1, -1,
        -1, .sched = S_LR | S_DECAY | S_COS,
        .doc = "Only -1 (start at the beginning): a resumed run takes its step from the "
               "checkpoint."},

    [K_ZERO] = {"zero_optimization", T_OBJ, C_LATER, A_NO, 0, 0, 0, 0,
        .def_doc = "stage 0", .doc = "ZeRO partitioning and offload."},
    [K_STAGE] = {"zero_optimization.stage", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 3,
        .doc = "0 = off, 1 = optimizer state, 2 = and gradients, 3 = and parameters "
               "partitioned across ranks (all four implemented)."},
    [K_OVERLAP] = {"zero_optimization.overlap_comm", T_BOOL, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "true (DeepSpeed: true with stage 3 only; here it never changes a result)",
        .doc = "Overlap the gradient reduction with the backward pass: stages 2-3 "
               "reduce-scatter a unit while the next unit's backward runs, stages 0-1 do so in "
               "the step's last micro-batch (false: reduce after the backward)."},
    [K_REDUCE_BUCKET] = {"zero_optimization.reduce_bucket_size", T_INT, C_APPLIED, A_DEFAULT, 0,
        FIELD_DEF, 0, BIG, .auto_doc = "500000000 (DeepSpeed's default; Hugging Face would use "
                                 "hidden_size^2)",
        .doc = "Elements per collective at most: a larger unit is cut into pieces of a "
               "multiple of 1024 x ranks elements when the engine is built, the same for every "
               "stage (the smaller of this and allgather_bucket_size applies to both; 0 = one "
               "collective per unit)."},
    [K_ALLGATHER_BUCKET] = {"zero_optimization.allgather_bucket_size", T_INT, C_APPLIED,
        A_DEFAULT, 0, FIELD_DEF, 0, BIG, .auto_doc = "500000000 (DeepSpeed's default)",
        .doc = "Elements per all-gather at most (see reduce_bucket_size: the smaller of the two "
               "applies)."},
    [K_REDUCE_SCATTER] = {"zero_optimization.reduce_scatter", T_BOOL, C_APPLIED, A_NO, 0, 1, 0,
        0, .doc = "Always true in zerotrain: gradients are reduce-scattered (false is accepted "
                  "with a notice)."},
    [K_ALLGATHER_PART] = {"zero_optimization.allgather_partitions", T_BOOL, C_APPLIED, A_NO, 0,
        1, 0, 0, .doc = "Always true in zerotrain: updated parameters are all-gathered (false "
                        "is accepted with a notice)."},
    [K_CONTIG_GRADS] = {"zero_optimization.contiguous_gradients", T_BOOL, C_APPLIED, A_NO, 0, 1,
        0, 0, .doc = "Always true in zerotrain: gradients live in contiguous per-unit buffers "
                     "(false is accepted with a notice)."},
    [K_PREFETCH_BUCKET] = {"zero_optimization.stage3_prefetch_bucket_size", T_INT, C_APPLIED,
        A_DEFAULT, 0, FIELD_DEF, 0, BIG,
        .auto_doc = "50000000 (DeepSpeed's default; Hugging Face would use 0.9 x "
                    "hidden_size^2)",
        .doc = "Stage 3: parameter elements gathered ahead of use while the current unit "
               "computes (whole units; 0 = gather each unit when it is needed)."},
    [K_PERSIST] = {"zero_optimization.stage3_param_persistence_threshold", T_INT, C_APPLIED,
        A_DEFAULT, 0, FIELD_DEF, 0, BIG,
        .auto_doc = "100000 (DeepSpeed's default; Hugging Face would use 10 x hidden_size)",
        .doc = "Stage 3: units (not single tensors, as in DeepSpeed) with fewer elements stay "
               "gathered; their shards are still updated by one rank each."},
    [K_MAX_LIVE] = {"zero_optimization.stage3_max_live_parameters", T_INT, C_APPLIED, A_NO, 0,
        FIELD_DEF, 0, BIG, .doc = "Stage 3: most parameter elements gathered at once; prefetching "
                            "stops at this cap (the unit in use is always gathered)."},
    [K_MAX_REUSE] = {"zero_optimization.stage3_max_reuse_distance", T_INT, C_LATER, A_NO, 0, 1e9,
        0, BIG, .doc = "Accepted; zerotrain keeps a unit gathered while consecutive uses (or "
                       "prefetched ones) need it, so there is no distance to set."},
    [K_SUB_GROUP] = {"zero_optimization.sub_group_size", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 0,
        BIG,
        .doc = "With offload_optimizer: floats of a shard whose optimizer state is read, "
               "updated and written back together (the working buffers hold one such "
               "sub-group); rounded down to a multiple of 1024 (whole 8-bit blocks). Adafactor "
               "reads a tensor's state twice per step and keeps whole shards."},
    [K_ROUND_ROBIN] = {"zero_optimization.round_robin_gradients", T_BOOL, C_LATER, A_NO, 0, 0, 0,
        0, .doc = "Spread gradient copies to host memory across ranks (stages 1 and 2)."},
    [K_OFFOPT] = {"zero_optimization.offload_optimizer", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0,
        .def_doc = "no offload", .doc = "Optimizer-state offload (stages 1 to 3)."},
    [K_OFFOPT_DEVICE] = {"zero_optimization.offload_optimizer.device", T_ENUM, C_APPLIED, A_NO, 0,
        0, 0, 0, .values = "none|cpu|nvme", .def_doc = "none",
        .doc = "Where the optimizer state lives."},
    [K_OFFOPT_NVME] = {"zero_optimization.offload_optimizer.nvme_path", T_STR, C_APPLIED, A_NO,
        F_NULL, 0, 0, 0, .def_doc = "none (required for nvme)",
        .doc = "Folder on the NVMe drive; the same folder as offload_param's if both use "
               "nvme."},
    [K_OFFOPT_PIN] = {"zero_optimization.offload_optimizer.pin_memory", T_BOOL, C_LATER, A_NO,
        0, 0, 0, 0, .doc = "Accepted; training runs on the CPU, so no host buffer is copied to "
                           "a device and none needs page-locking; the NVMe staging buffers are "
                           "registered (locked) with io_uring whenever RLIMIT_MEMLOCK allows."},
    [K_OFFOPT_BUFCOUNT] = {"zero_optimization.offload_optimizer.buffer_count", T_INT, C_APPLIED,
        A_NO, 0, FIELD_DEF, 0, IMAX,
        .doc = "Units of optimizer state in flight during the step (read ahead, update, "
               "write back); at least 3 are used."},
    [K_OFFOPT_FASTINIT] = {"zero_optimization.offload_optimizer.fast_init", T_BOOL, C_LATER,
        A_NO, 0, 0, 0, 0, .doc = "Accepted; the swap file's space is reserved at once "
                                 "(posix_fallocate) and the zero moments written in one pass, "
                                 "before the first step."},
    [K_OFFPAR] = {"zero_optimization.offload_param", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0,
        .def_doc = "no offload", .doc = "Parameter offload (stage 3 only)."},
    [K_OFFPAR_DEVICE] = {"zero_optimization.offload_param.device", T_ENUM, C_APPLIED, A_NO, 0, 0,
        0, 0, .values = "none|cpu|nvme", .def_doc = "none", .doc = "Where the parameters live."},
    [K_OFFPAR_NVME] = {"zero_optimization.offload_param.nvme_path", T_STR, C_APPLIED, A_NO, F_NULL,
        0, 0, 0, .def_doc = "none (required for nvme)",
        .doc = "Folder on the NVMe drive; the same folder as offload_optimizer's if both use "
               "nvme."},
    [K_OFFPAR_PIN] = {"zero_optimization.offload_param.pin_memory", T_BOOL, C_LATER, A_NO, 0, 0,
        0, 0, .doc = "Accepted; as offload_optimizer.pin_memory (nothing to copy to a device)."},
    [K_OFFPAR_BUFCOUNT] = {"zero_optimization.offload_param.buffer_count", T_INT, C_APPLIED, A_NO,
        0, FIELD_DEF, 0, IMAX, .doc = "Parameter shards cached in RAM (read ahead along the unit "
                               "order; at least 3 are used)."},
    [K_OFFPAR_BUFSIZE] = {"zero_optimization.offload_param.buffer_size", T_INT, C_APPLIED, A_NO,
        0, 1e8, 0, BIG, .def_doc = "the largest unit shard",
        .doc = "Elements per shard buffer. Each buffer holds one unit's shard, so the buffers "
               "are sized to the largest one; a value given below it is an error naming both."},
    [K_OFFPAR_MAXCPU] = {"zero_optimization.offload_param.max_in_cpu", T_INT, C_APPLIED, A_NO, 0,
        1e9, 0, BIG, .def_doc = "no cap beyond buffer_count",
        .doc = "Parameter elements the shard buffers may hold in RAM: caps buffer_count at "
               "max_in_cpu / the largest shard (at least 3 buffers; a value below 3 shards is "
               "an error)."},
    /* DeepSpeed's deprecated switches, read as its ZeRO config reads them (new_param_fn) */
    [K_CPU_OFFLOAD] = {"zero_optimization.cpu_offload", T_BOOL, C_APPLIED, A_NO, F_NULL, 0, 0,
        0, .def_doc = "none",
        .doc = "Deprecated DeepSpeed switch: true is read as \"offload_optimizer\": {\"device\": "
               "\"cpu\"}, with a notice, as DeepSpeed reads it; giving offload_optimizer too is "
               "an error."},
    [K_CPU_OFFLOAD_PARAM] = {"zero_optimization.cpu_offload_param", T_BOOL, C_APPLIED, A_NO,
        F_NULL, 0, 0, 0, .def_doc = "none",
        .doc = "Deprecated DeepSpeed switch: true is read as \"offload_param\": {\"device\": "
               "\"cpu\"}, with a notice; giving offload_param too is an error."},
    [K_CPU_OFFLOAD_PIN] = {"zero_optimization.cpu_offload_use_pin_memory", T_BOOL, C_LATER, A_NO,
        F_NULL, 0, 0, 0, .def_doc = "none",
        .doc = "Deprecated DeepSpeed switch (pin_memory of the offload sections); accepted, "
               "with a notice: as offload_optimizer.pin_memory, nothing to pin here."},

    [K_AC] = {"activation_checkpointing", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0,
        .def_doc = "off", .doc = "DeepSpeed's activation checkpointing section. zerotrain's "
                                 "mode is zerotrain.recompute; giving this section without "
                                 "it prints a notice (nothing is recomputed)."},
    [K_AC_PARTITION] = {"activation_checkpointing.partition_activations", T_BOOL, C_APPLIED,
        A_NO, 0, 0, 0, 0, .doc = "Partitions activations across model-parallel ranks; "
                                  "zerotrain has no model parallelism, so true is refused."},
    [K_AC_CPU] = {"activation_checkpointing.cpu_checkpointing", T_BOOL, C_APPLIED, A_NO, 0, 0,
        0, 0, .doc = "With recompute \"full\" or \"every-k:K\": the kept layer inputs go "
                     "to the offload store once the next layer has read them -- NVMe under "
                     "the nvme_path of offload_optimizer / offload_param when one is set, "
                     "else the RAM pool -- and are read back ahead of the backward pass, in "
                     "reverse. Bit-identical; refused with \"none\" and \"selective\"."},
    [K_AC_CONTIG] = {"activation_checkpointing.contiguous_memory_optimization", T_BOOL,
        C_APPLIED, A_NO, 0, 0, 0, 0,
        .doc = "zerotrain always carves every activation, checkpoints included, from one "
               "arena allocated before the first step (no fragmentation); true and false "
               "are both accepted."},
    [K_AC_NUMBER] = {"activation_checkpointing.number_checkpoints", T_INT, C_APPLIED, A_NO,
        F_NULL, 0, 1, IMAX, .def_doc = "null (one per layer)",
        .doc = "With recompute \"full\": keep this many layer inputs, recomputing segments "
               "of ceil(layers / number_checkpoints) layers (as \"every-k\"); an error "
               "with other modes."},
    [K_AC_SYNC] = {"activation_checkpointing.synchronize_checkpoint_boundary", T_BOOL,
        C_APPLIED, A_NO, 0, 0, 0, 0, .doc = "A CUDA synchronisation in DeepSpeed; accepted, "
                                             "nothing to synchronise on a CPU."},
    [K_AC_PROFILE] = {"activation_checkpointing.profile", T_BOOL, C_APPLIED, A_NO, 0, 0, 0, 0,
        .doc = "Times each unit's recomputation and counts the bytes it regenerates; "
               "`zerotrain train` prints the table at the end (so does --profile)."},

    [K_AIO] = {"aio", T_OBJ, C_APPLIED, A_NO, 0, 0, 0, 0, .def_doc = "the defaults below",
        .doc = "Asynchronous NVMe I/O (used by nvme offload)."},
    [K_AIO_BLOCK] = {"aio.block_size", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 1, IMAX,
        .doc = "Bytes per I/O request."},
    [K_AIO_QDEPTH] = {"aio.queue_depth", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 1, IMAX,
        .doc = "I/O requests in flight."},
    [K_AIO_INTRA] = {"aio.intra_op_parallelism", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 1, 16,
        .doc = "I/O threads per swap file: 1 = the engine's thread drives one io_uring ring "
               "(io_uring needs no threads to keep queue_depth requests in flight); n > 1 = n "
               "threads with a ring each, sharing the queue depth."},
    [K_AIO_THREADS] = {"aio.thread_count", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 1, 16,
        .doc = "Older name of intra_op_parallelism; if both are given they must be equal."},
    [K_AIO_SINGLE] = {"aio.single_submit", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .doc = "Submit each request to the ring on its own instead of in batches."},
    [K_AIO_OVERLAP] = {"aio.overlap_events", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .doc = "Start new requests while others are in flight; false: in waves, the next "
               "when the last one completed."},

    [K_FP16] = {"fp16", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0, .def_doc = "off",
        .doc = "fp16 mixed precision as DeepSpeed runs it: fp16 parameters (compute copies) "
               "updated from an fp32 master kept with the optimizer state, gradients "
               "accumulated in fp16 (data_types.grad_accum_dtype), the loss scaled before the "
               "backward pass and the gradients unscaled before clipping; a step whose "
               "gradients overflow is skipped and the scale lowered (dynamic loss scaling, "
               "DeepSpeed's DynamicLossScaler)."},
    [K_FP16_ON] = {"fp16.enabled", T_BOOL, C_APPLIED, A_DERIVED, 0, 0, 0, 0,
        .auto_doc = "false", .doc = "true = train in fp16 (zt_config.precision)."},
    [K_FP16_LS] = {"fp16.loss_scale", T_NUM, C_APPLIED, A_NO, 0, FIELD_DEF, 0, INFINITY,
        .doc = "0 = dynamic loss scaling; a positive number = that fixed scale."},
    [K_FP16_POWER] = {"fp16.initial_scale_power", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 100,
        .doc = "Dynamic scaling starts at 2^initial_scale_power."},
    [K_FP16_WINDOW] = {"fp16.loss_scale_window", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 1, IMAX,
        .doc = "Steps without an overflow after which the scale doubles."},
    [K_FP16_HYST] = {"fp16.hysteresis", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 1, IMAX,
        .doc = "Overflows tolerated before the scale is halved (DeepSpeed's delayed shift)."},
    [K_FP16_CONSEC] = {"fp16.consecutive_hysteresis", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0,
        0, .doc = "true: the hysteresis refills after every step without an overflow."},
    [K_FP16_MIN] = {"fp16.min_loss_scale", T_NUM, C_APPLIED, A_NO, F_HI_OPEN, FIELD_DEF, 0,
        INFINITY, .doc = "The scale never goes below it: an overflow there, with no "
                         "hysteresis left, ends the run with an error (as in DeepSpeed)."},
    [K_FP16_AUTOCAST] = {"fp16.auto_cast", T_BOOL, C_IGNORED, .quiet = "false",
        .doc = "the inputs are token ids, which nothing casts"},
    [K_FP16_MASTER] = {"fp16.fp16_master_weights_and_grads", T_BOOL, C_APPLIED, A_NO, 0, 0, 0,
        0, .doc = "false only: the master weights are fp32 (true is DeepSpeed's fp16-master "
                  "mode for its CPU Adam)."},
    [K_BF16] = {"bf16", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0, .def_doc = "off",
        .doc = "bf16 mixed precision with DeepSpeed's bf16 optimizer semantics: the "
               "parameters the passes read are bf16 values, the optimizer updates an fp32 "
               "master copy kept with its state (sharded and offloaded like the moments) and "
               "rounds it to nearest even after each step; gradients are accumulated and "
               "reduced in fp32."},
    [K_BF16_ON] = {"bf16.enabled", T_BOOL, C_APPLIED, A_DERIVED, 0, 0, 0, 0,
        .auto_doc = "false", .doc = "true = train in bf16 (zt_config.precision)."},
    [K_BFLOAT16] = {"bfloat16", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0, .def_doc = "off",
        .doc = "Older DeepSpeed name of bf16."},
    [K_BFLOAT16_ON] = {"bfloat16.enabled", T_BOOL, C_APPLIED, A_DERIVED, 0, 0, 0, 0,
        .auto_doc = "false", .doc = "Older DeepSpeed name of bf16.enabled."},
    [K_DATA_TYPES] = {"data_types", T_OBJ, C_APPLIED, A_NO, F_NULL, 0, 0, 0,
        .def_doc = "DeepSpeed's", .doc = "Data types of DeepSpeed's buffers."},
    [K_GRAD_ACCUM] = {"data_types.grad_accum_dtype", T_ENUM, C_APPLIED, A_NO, F_NULL | F_NOCASE,
        0, 0, 0, .values = "fp32|bf16|fp16|float32|bfloat16|float16|float|half",
        .def_doc = "fp32, fp16 with fp16",
        .doc = "The dtype gradients are summed in over micro-batches and kept in after their "
               "reduction (in communication_data_type): fp32, or bf16 / fp16 (2 bytes a "
               "gradient; each micro-batch's gradient is rounded to it, as a 16-bit module's "
               "is)."},
    [K_COMM_DTYPE] = {"communication_data_type", T_ENUM, C_APPLIED, A_NO, F_NULL | F_NOCASE,
        0, 0, 0, .values = "fp32|bf16|fp16|float32|bfloat16|float16|float|half",
        .def_doc = "the gradients' accumulation dtype",
        .doc = "The dtype gradients are reduced in: fp32, or bf16 / fp16 (half the bytes; each "
               "gradient rounded to it, the partial sums added in fp32 and rounded, as a "
               "16-bit all-reduce adds)."},

    [K_ZT] = {"zerotrain", T_OBJ, C_APPLIED, A_NO, 0, 0, 0, 0, .def_doc = "the defaults below",
        .doc = "zerotrain's own settings (not a DeepSpeed section; DeepSpeed would reject "
               "it)."},
    [K_ZT_NO_DECAY] = {"zerotrain.no_decay", T_STRS, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "biases and LayerNorm weights",
        .doc = "Parameter-name substrings exempt from weight decay; [] = decay every "
               "parameter."},
    [K_ZT_THREADS] = {"zerotrain.threads", T_INT, C_APPLIED, A_NO, 0, FIELD_DEF, 0, IMAX,
        .doc = "Worker threads; 0 = all cores."},
    [K_ZT_SEED] = {"zerotrain.seed", T_SEED, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .doc = "Random seed (initialisation, dropout); an integer, or a decimal string for "
               "values above 2^53."},
    [K_ZT_COLL_TIMEOUT] = {"zerotrain.collective_timeout", T_NUM, C_APPLIED, A_NO, 0, FIELD_DEF, 0,
        INFINITY, .doc = "Seconds a collective may take before the rank logs rank, sequence "
                         "number and operation and calls the hang handler (default MPI_Abort); "
                         "0 = no watchdog."},
    [K_ZT_CHECK_COLL] = {"zerotrain.check_collectives", T_BOOL, C_APPLIED, A_NO, 0, FIELD_DEF, 0, 0,
        .doc = "Before each collective, compare (sequence, operation, count) across ranks and "
               "stop at the first mismatch naming both sides (debugging; costs one small "
               "all-gather per collective)."},
    [K_ZT_PROGRESS] = {"zerotrain.comm_progress", T_ENUM, C_APPLIED, A_NO, 0, 0, 0, 0,
        .values = "poll|thread", .def_doc = "poll",
        .doc = "How non-blocking collectives advance while the engine computes: \"poll\" "
               "(MPI_Test between kernels) or \"thread\" (a progress thread; needs "
               "MPI_THREAD_MULTIPLE)."},

    [K_ZT_MEMLIMIT] = {"zerotrain.memory_limit", T_SIZE, C_APPLIED, A_NO, F_NULL, 0, 0, 0,
        .def_doc = "none",
        .doc = "Bytes per rank to plan for (a number, or a string such as \"4GiB\", "
               "\"3.5 GB\"): the engine predicts each memory category and puts the optimizer "
               "state, then (stages 2-3) the gradient shards, then (stage 3) the parameter "
               "shards on NVMe (nvme_path) until the predicted peak fits (with recompute "
               "\"auto\" it plans the recomputation too); it prints the plan, or fails "
               "before training saying what would fit."},
    [K_ZT_RECOMPUTE] = {"zerotrain.recompute", T_STR, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "none",
        .doc = "Activation recomputation: \"none\" keeps every activation for the backward "
               "pass; \"full\" keeps each transformer layer's input only and recomputes the "
               "layer's forward right before its backward (about 4 x hidden bytes per token "
               "per layer plus one layer's working set); \"selective\" keeps the matrix-"
               "product outputs and recomputes the attention core and GELU (Korthikanti et "
               "al. 2022); \"every-k:K\" keeps the input of every K-th layer and recomputes "
               "a segment of K layers before their backward (K working sets); \"auto\" "
               "needs memory_limit and chooses per layer among keep, selective, full and "
               "full with the input on NVMe so the predicted peak fits, with the fewest "
               "recomputed FLOPs, and prints the plan. Gradients are bit-identical in every "
               "mode."},
    [K_ZT_DIRECT] = {"zerotrain.direct_io", T_ENUM, C_APPLIED, A_NO, 0, 0, 0, 0,
        .values = "auto|required|off", .def_doc = "auto",
        .doc = "O_DIRECT for the swap files: \"auto\" probes it at open and falls back to "
               "buffered I/O with a warning where the filesystem refuses it; \"required\" "
               "stops with a clear error there instead; \"off\" always uses buffered I/O "
               "(the page cache then holds offloaded data too)."},
    [K_ZT_OFFGRAD] = {"zerotrain.offload_gradients", T_BOOL, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "automatic (true; memory_limit may keep them in RAM)",
        .doc = "Stages 2-3 with offload_optimizer: this rank's reduced gradient shards go where "
               "the optimizer state goes (written as each unit's reduce-scatter completes, "
               "read back by the update, as ZeRO-Infinity does), so no gradient shard stays "
               "in RAM; false keeps them in RAM (less I/O, more memory). Results are "
               "bit-identical either way."},

    [K_ZT_FP32_STATE] = {"zerotrain.fp32_optimizer_state", T_STRS, C_APPLIED, A_NO, 0, 0, 0, 0,
        .def_doc = "the embedding tables",
        .doc = "AdamW8bit: parameter-name substrings whose moments stay fp32 whatever their "
               "size. When absent, the model's embedding tables do (BERT's word, position and "
               "token-type embeddings; T5's shared table and relative-attention biases), as "
               "the Hugging Face Trainer arranges with bitsandbytes for every nn.Embedding; "
               "a list replaces that default ([] keeps only tensors below min_8bit_size in "
               "fp32)."},
    [K_ZT_SKIP_NONFINITE] = {"zerotrain.skip_nonfinite", T_BOOL, C_APPLIED, A_NO, 0, 1, 0, 0,
        .doc = "The divergence guard: a step whose loss or global gradient norm is not finite "
               "(on any rank) is skipped: parameters, optimizer state and the step count stay "
               "as they were, the data moves on, and the skip is logged (with the first unit "
               "whose gradient is not finite) and counted in the metrics. false: every step "
               "is applied and each optimizer's own per-element rule meets the non-finite "
               "values (the library's default, zt_config.skip_nonfinite 0)."},
    [K_ZT_MAX_SKIPPED] = {"zerotrain.max_skipped_steps", T_INT, C_APPLIED, A_NO, 0, 5, 1, IMAX,
        .doc = "With skip_nonfinite: this many skipped steps in a row end the run with an "
               "error naming the step and the last good checkpoint."},
    [K_ZT_ELECTRA_GEN] = {"zerotrain.electra_generator_size", T_NUM, C_APPLIED, A_NO, 0, 0.25,
        1e-6, 1.0,
        .doc = "ELECTRA's joint pretraining (an ElectraForPreTraining config trained as a masked "
               "LM): the generator's hidden_size as a fraction of the discriminator's "
               "(intermediate_size 4x it, heads it / 64, the layers the discriminator's), as "
               "google-research/electra's generator_hidden_size; a generator_config.json in "
               "the model folder takes precedence."},

    /* DeepSpeed keys that do not apply here (rows after K_NAMED have no name) */
    [K_NAMED] = {"wall_clock_breakdown", T_ANY, C_IGNORED, .doc = "use `zerotrain train "
        "--profile` for time per kernel kind"},
    {"memory_breakdown", T_ANY, C_IGNORED, .doc = "use zerotrain's memory report "
        "(zt_memory_report, printed by the command) instead"},
    {"zero_allow_untested_optimizer", T_ANY, C_IGNORED,
        .doc = "zerotrain's optimizers are its own; there is no untested one to allow"},
    {"zero_force_ds_cpu_optimizer", T_ANY, C_IGNORED, .quiet = "true",
        .doc = "offload always uses zerotrain's own CPU optimizers"},
    {"prescale_gradients", T_ANY, C_IGNORED,
        .doc = "the reduction adds in fp32 (16-bit sums are rounded from it); an fp16 sum "
               "that overflows skips the step and lowers the loss scale, as any overflow"},
    {"gradient_predivide_factor", T_ANY, C_IGNORED, .quiet = "1",
        .doc = "the reduction adds in fp32 (16-bit sums are rounded from it); an fp16 sum "
               "that overflows skips the step and lowers the loss scale, as any overflow"},
    {"seq_parallel_comm_data_type", T_ANY, C_IGNORED, .quiet = "fp32",
        .doc = "no sequence parallelism"},
    {"sparse_gradients", T_ANY, C_IGNORED, .doc = "gradients are dense (no sparse embedding "
        "gradients)"},
    {"dump_state", T_ANY, C_IGNORED, .doc = "DeepSpeed's debugging dump"},
    {"disable_allgather", T_ANY, C_IGNORED, .doc = "DeepSpeed's debugging switch"},
    {"flops_profiler", T_ANY, C_IGNORED, .doc = "no FLOPS profiler"},
    {"tensorboard", T_ANY, C_IGNORED, .doc = "no built-in monitoring backend; the command logs "
        "to the terminal"},
    {"wandb", T_ANY, C_IGNORED, .doc = "no built-in monitoring backend; the command logs to the "
        "terminal"},
    {"csv_monitor", T_ANY, C_IGNORED, .doc = "no built-in monitoring backend; the command logs "
        "to the terminal"},
    {"comet", T_ANY, C_IGNORED, .doc = "no built-in monitoring backend; the command logs to the "
        "terminal"},
    {"comms_logger", T_ANY, C_IGNORED, .doc = "no communication logger"},
    {"amp", T_ANY, C_GATED, .unsup_why = "Apex AMP (NVIDIA GPU mixed precision) is not "
        "supported, zerotrain trains in fp32: set \"enabled\": false or remove the section",
        .doc = "Apex AMP is NVIDIA GPU mixed precision"},
    {"elasticity", T_ANY, C_GATED, .unsup_why = "elastic training (a changing world size) is "
        "not supported: set \"enabled\": false or remove the section",
        .doc = "elastic training is " NOT_OFFERED},
    {"data_efficiency", T_ANY, C_IGNORED, .doc = "DeepSpeed's data-efficiency library is "
        NOT_OFFERED},
    {"curriculum_learning", T_ANY, C_IGNORED, .doc = "curriculum learning is " NOT_OFFERED},
    {"compression_training", T_ANY, C_IGNORED, .doc = "compression training is " NOT_OFFERED},
    {"checkpoint", T_ANY, C_IGNORED, .doc = "DeepSpeed checkpoint-layout options; zerotrain "
        "writes its own checkpoints"},
    {"data_types.*", T_ANY, C_IGNORED, .doc = "only grad_accum_dtype applies here"},
    {"sparse_attention", T_ANY, C_IGNORED, .doc = "attention is dense"},
    {"pipeline", T_ANY, C_IGNORED, .doc = "no pipeline parallelism"},
    {"autotuning", T_ANY, C_IGNORED, .doc = "no autotuner"},
    {"eigenvalue", T_ANY, C_IGNORED, .doc = "eigenvalue computation is " NOT_OFFERED},
    {"progressive_layer_drop", T_ANY, C_IGNORED, .doc = "progressive layer drop is " NOT_OFFERED},
    {"graph_harvesting", T_ANY, C_IGNORED, .doc = "CUDA graphs; " GPU_ONLY},
    {"nebula", T_ANY, C_IGNORED, .doc = "Azure Nebula checkpoint service"},
    {"hybrid_engine", T_ANY, C_IGNORED, .doc = "DeepSpeed-Chat's RLHF engine"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", T_ANY, C_IGNORED,
        .doc = "zerotrain always saves full fp32 weights (safetensors) gathered from all ranks"},
    {"zero_optimization.gather_16bit_weights_on_model_save", T_ANY, C_IGNORED,
        .doc = "zerotrain always saves full fp32 weights (safetensors) gathered from all ranks"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", T_ANY, C_IGNORED,
        .doc = "zerotrain always saves full fp32 weights (safetensors) gathered from all ranks"},
    {"zero_optimization.elastic_checkpoint", T_ANY, C_IGNORED,
        .doc = "DeepSpeed checkpoint-layout option; zerotrain writes its own checkpoints"},
    {"zero_optimization.load_from_fp32_weights", T_ANY, C_IGNORED, .quiet = "true",
        .doc = "the master weights are fp32 already"},
    {"zero_optimization.ignore_unused_parameters", T_ANY, C_IGNORED, .quiet = "true",
        .doc = "zerotrain's models have no unused parameters"},
    {"zero_optimization.legacy_stage1", T_ANY, C_IGNORED,
        .doc = "DeepSpeed's old stage-1 implementation"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", T_ANY, C_IGNORED, .quiet = "true",
        .doc = "DeepSpeed bucketing detail"},
    {"zero_optimization.zero_hpz_partition_size", T_ANY, C_IGNORED, .quiet = "1",
        .doc = "ZeRO++ hierarchical partitioning is " NOT_OFFERED},
    {"zero_optimization.zero_quantized_weights", T_ANY, C_IGNORED,
        .doc = "ZeRO++ quantized communication is " NOT_OFFERED
        "; communication is in the parameters' and gradients' own dtypes"},
    {"zero_optimization.zero_quantized_nontrainable_weights", T_ANY, C_IGNORED,
        .doc = "ZeRO++ quantized weights are " NOT_OFFERED},
    {"zero_optimization.zero_quantized_gradients", T_ANY, C_IGNORED,
        .doc = "ZeRO++ quantized communication is " NOT_OFFERED
        "; communication is in the parameters' and gradients' own dtypes"},
    {"zero_optimization.zeropp_loco_param", T_ANY, C_IGNORED, .doc = "ZeRO++ LoCo is " NOT_OFFERED},
    {"zero_optimization.mics_shard_size", T_ANY, C_IGNORED, .quiet = "-1",
        .doc = "MiCS sharding is " NOT_OFFERED},
    {"zero_optimization.mics_hierarchical_params_gather", T_ANY, C_IGNORED,
        .doc = "MiCS sharding is " NOT_OFFERED},
    {"zero_optimization.memory_efficient_linear", T_ANY, C_IGNORED, .quiet = "true",
        .doc = "PyTorch-specific"},
    {"zero_optimization.override_module_apply", T_ANY, C_IGNORED, .quiet = "true",
        .doc = "PyTorch-specific"},
    {"zero_optimization.pipeline_loading_checkpoint", T_ANY, C_IGNORED,
        .doc = "no pipeline parallelism"},
    {"zero_optimization.log_trace_cache_warnings", T_ANY, C_IGNORED,
        .doc = "DeepSpeed's parameter-trace cache does not exist here"},
    {"zero_optimization.enable_sanity_checks", T_ANY, C_IGNORED,
        .doc = "DeepSpeed's internal checks"},
    {"zero_optimization.stage3_module_granularity_threshold", T_ANY, C_IGNORED, .quiet = "0",
        .doc = "zerotrain always gathers whole layers"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", T_ANY, C_IGNORED,
        .doc = "zerotrain gathers parameters with all-gather"},
    {"zero_optimization.stage3_allgather_sequential", T_ANY, C_IGNORED,
        .doc = "zerotrain always gathers whole layers"},
    {"zero_optimization.stage3_model_persistence_threshold", T_ANY, C_IGNORED,
        .doc = "zerotrain has no limit on unpartitioned parameters besides "
               "stage3_param_persistence_threshold"},
    {"optimizer.params.max_grad_norm", T_ANY, C_GATED, .flags = F_DEPRECATED,
        .unsup_why = "not an optimizer parameter (DeepSpeed refuses it too): use the top-level "
                     "gradient_clipping", .doc = "refused, as DeepSpeed refuses it"},
    {"zero_optimization.offload_optimizer.pipeline_read", T_ANY, C_IGNORED,
        .doc = "zerotrain's offload engine schedules its NVMe reads itself"},
    {"zero_optimization.offload_optimizer.pipeline_write", T_ANY, C_IGNORED,
        .doc = "zerotrain's offload engine schedules its NVMe writes itself"},
    {"zero_optimization.offload_optimizer.ratio", T_ANY, C_IGNORED, .quiet = "1",
        .doc = "partial optimizer offload is " NOT_OFFERED "; all of it is offloaded"},
    {"zero_optimization.offload_optimizer.super_offload", T_ANY, C_IGNORED,
        .doc = "Superchip-specific"},
    {"zero_optimization.offload_optimizer.convert_grad_on_cpu", T_ANY, C_IGNORED,
        .quiet = "true", .doc = "gradients are fp32 already"},
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", T_ANY, C_IGNORED,
        .doc = "set zerotrain.threads instead"},
    {"aio.use_gds", T_ANY, C_IGNORED, .doc = "GPUDirect Storage; " GPU_ONLY},
    {"aio.io_backend", T_ANY, C_IGNORED, .quiet = "async_io",
        .doc = "zerotrain chooses its own I/O backend"},
    {"fp16.*", T_ANY, C_IGNORED, .flags = F_QUIET,
        .doc = "DeepSpeed's other fp16 keys"},
    {"bf16.*", T_ANY, C_IGNORED, .flags = F_QUIET,
        .doc = "DeepSpeed's other bf16 keys (immediate_grad_update, check_grad_overflow, ...) "
               "change nothing here: the update is the one fp32 step of the master"},
    {"bfloat16.*", T_ANY, C_IGNORED, .flags = F_QUIET, .doc = "as bf16.*"},
};

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

/* ---- the fields of zt_config ---------------------------------------------------------- */

/* A parsed config: the resolved settings, the schedule and the pattern arrays zt_config
 * borrows (zt_train_config_apply). */
struct zt_train_config {
    zt_train_settings s;
    zt_sched_params sp;
    char **no_decay;      /* n_no_decay strings, in the same allocation */
    char **fp32_state;    /* n_fp32_state strings, likewise */
};

static const char *const optimizers[] = {"adamw", "adamw8bit", "adafactor", "lamb", NULL};
static const char *const devices[] = {"none", "cpu", "nvme", NULL};
/* ZT_RECOMPUTE_*, named as zerotrain.recompute names them ("every-k" takes recompute_k) */
static const char *const recomputes[] = {"none", "full", "selective", "every-k", "auto", NULL};
/* ZT_HEAD_* and ZT_PROBLEM_* (config.json's problem_type) */
static const char *const heads[] = {"auto", "mlm", "classify", NULL};
/* ZT_PREC_* and ZT_GRAD_* (DeepSpeed's names of the dtypes) */
static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
static const char *const grad_dtypes[] = {"auto", "fp32", "bf16", "fp16", NULL};
static const char *const problems[] = {"auto", "single_label_classification",
                                       "multi_label_classification", "regression", NULL};

#define CFG_SIZE(f) sizeof(((zt_config *)0)->f)
/* where field f's resolved value is (settings member m, of f's size: checked when compiled) */
#define FROM(f, m) (offsetof(struct zt_train_config, s.m) + \
                    0 * sizeof(char[CFG_SIZE(f) == sizeof(((zt_train_settings *)0)->m) ? 1 : -1]))
#define FIELD(f, t) .name = #f, .type = t, .off = offsetof(zt_config, f), .size = CFG_SIZE(f)
/* set by JSON rows k (and k2), resolved into zt_train_settings.m */
#define JSON(k, k2, m, f) .key = k, .key2 = k2, .from = FROM(f, m)
/* no JSON key sets it */
#define OWN .key = -1, .key2 = -1, .from = ZT_CF_NO_SETTING

/* Every field of zt_config (include/zerotrain.h), in the struct's order: zt_config_init,
 * zt_config_set / zt_config_get / zt_config_key / zt_config_describe (cfgset.c),
 * zt_train_config_apply and the zt_config column and table of docs/config.md all come from
 * here. A JSON row whose default is FIELD_DEF takes the field's. */
const zt_cfg_field zt_cfg_fields[] = {
    {FIELD(model_dir, ZT_CF_STR), .flags = ZT_CF_LOCAL, OWN,
     .doc = "A Hugging Face model folder (config.json plus model.safetensors or "
            "model.safetensors.index.json); one of model_dir, model_preset, model_config, or "
            "none for a model of your own (`zerotrain train --model`)."},
    {FIELD(model_preset, ZT_CF_STR), .flags = ZT_CF_LOCAL, OWN,
     .doc = "A built-in model by name (\"bert-tiny\" ... \"bert-large\", \"t5-small\", ...), "
            "weights initialised from the seed."},
    {FIELD(model_config, ZT_CF_STR), .flags = ZT_CF_LOCAL, OWN,
     .doc = "A Hugging Face config.json alone: that architecture, weights initialised from the "
            "seed (from_config)."},
    {FIELD(vocab_size, ZT_CF_INT), OWN,
     .doc = "Presets only: the vocabulary size (0 = the preset's; `zerotrain train` takes the "
            "tokenizer's)."},
    {FIELD(seed, ZT_CF_U64), .def = 42, JSON(K_ZT_SEED, K_SEED_TOP, seed, seed)},
    {FIELD(threads, ZT_CF_INT), .flags = ZT_CF_LOCAL, JSON(K_ZT_THREADS, -1, threads, threads)},
    {FIELD(dropout, ZT_CF_INT), .def = 1, OWN,
     .doc = "1 = the model's dropout probabilities, 0 = no dropout."},
    {FIELD(lr, ZT_CF_FLOAT), .flags = ZT_CF_NONE_IS_0, .def = 1e-4, JSON(K_LR, -1, lr, lr),
     .doc = "AdamW's 1e-4 here (1e-3 in a config file without the key); 0 = no lr."},
    {FIELD(beta1, ZT_CF_FLOAT), .def = 0.9, JSON(K_BETAS, -1, beta1, beta1)},
    {FIELD(beta2, ZT_CF_FLOAT), .def = 0.999, JSON(K_BETAS, -1, beta2, beta2)},
    {FIELD(eps, ZT_CF_FLOAT), .def = 1e-8, JSON(K_EPS, -1, eps, eps)},
    {FIELD(weight_decay, ZT_CF_FLOAT), .def = 0.01, JSON(K_WD, -1, weight_decay, weight_decay),
     .doc = "torch's AdamW default here (see the key for a config file's)."},
    {FIELD(bias_correction, ZT_CF_INT), .def = 1,
     JSON(K_BIAS_CORR, -1, bias_correction, bias_correction),
     .doc = "AdamW: 1 = bias-corrected moments (torch), 0 = none (DeepSpeed's Adam with "
            "bias_correction false)."},
    {FIELD(grad_clip, ZT_CF_FLOAT), JSON(K_CLIP, -1, grad_clip, grad_clip)},
    {FIELD(decay_all, ZT_CF_INT), OWN,
     .doc = "1 = weight decay on every parameter, 0 = not on biases and LayerNorm weights (the "
            "BERT recipe), unless no_decay says otherwise."},
    {FIELD(no_decay, ZT_CF_PATTERNS), .key = K_ZT_NO_DECAY, .key2 = -1,
     .from = offsetof(struct zt_train_config, no_decay),
     .doc = "n_no_decay parameter-name substrings exempt from weight decay (borrowed)."},
    {FIELD(n_no_decay, ZT_CF_INT), .def = -1, JSON(K_ZT_NO_DECAY, -1, n_no_decay, n_no_decay),
     .doc = "-1 = the default rule (decay_all), else the number of no_decay patterns."},
    {FIELD(zero_stage, ZT_CF_INT), JSON(K_STAGE, -1, zero_stage, zero_stage)},
    {FIELD(bucket_size, ZT_CF_SIZE), .def = 5e8,
     JSON(K_REDUCE_BUCKET, K_ALLGATHER_BUCKET, bucket_size, bucket_size)},
    {FIELD(overlap_comm, ZT_CF_INT), .def = -1, JSON(K_OVERLAP, -1, overlap_comm, overlap_comm),
     .doc = "1 on, 0 off, -1 the default (on)."},
    {FIELD(grad_accum_steps, ZT_CF_INT), JSON(K_GAS, -1, grad_accum_steps, grad_accum_steps)},
    {FIELD(prefetch_size, ZT_CF_SIZE), .def = 5e7,
     JSON(K_PREFETCH_BUCKET, -1, prefetch_size, prefetch_size)},
    {FIELD(max_live, ZT_CF_SIZE), .def = 1e9, JSON(K_MAX_LIVE, -1, max_live, max_live)},
    {FIELD(persist_threshold, ZT_CF_SIZE), .def = 1e5,
     JSON(K_PERSIST, -1, persist_threshold, persist_threshold)},
    {FIELD(progress, ZT_CF_INT), .def = ZT_PROGRESS_POLL,
     JSON(K_ZT_PROGRESS, -1, comm_progress, progress),
     .doc = "ZT_PROGRESS_POLL 0 (\"poll\"), ZT_PROGRESS_THREAD 1 (\"thread\")."},
    {FIELD(collective_timeout, ZT_CF_DOUBLE), .def = 300,
     JSON(K_ZT_COLL_TIMEOUT, -1, collective_timeout, collective_timeout)},
    {FIELD(check_collectives, ZT_CF_INT),
     JSON(K_ZT_CHECK_COLL, -1, check_collectives, check_collectives)},
    {FIELD(offload_optimizer, ZT_CF_ENUM), .names = devices,
     JSON(K_OFFOPT_DEVICE, -1, offload_optimizer, offload_optimizer)},
    /* (the settings hold the folder; the field points to it) */
    {FIELD(nvme_path, ZT_CF_STR), .flags = ZT_CF_LOCAL, .key = K_OFFOPT_NVME,
     .key2 = K_OFFPAR_NVME, .from = offsetof(struct zt_train_config, s.nvme_path)},
    {FIELD(aio_block_size, ZT_CF_SIZE), .def = 1 << 20,
     JSON(K_AIO_BLOCK, -1, aio_block_size, aio_block_size)},
    {FIELD(aio_queue_depth, ZT_CF_INT), .def = 8,
     JSON(K_AIO_QDEPTH, -1, aio_queue_depth, aio_queue_depth)},
    {FIELD(aio_threads, ZT_CF_INT), .def = 1,
     JSON(K_AIO_INTRA, K_AIO_THREADS, aio_threads, aio_threads)},
    {FIELD(aio_single_submit, ZT_CF_INT),
     JSON(K_AIO_SINGLE, -1, aio_single_submit, aio_single_submit)},
    {FIELD(aio_overlap_events, ZT_CF_INT), .def = 1,
     JSON(K_AIO_OVERLAP, -1, aio_overlap_events, aio_overlap_events)},
    {FIELD(offload_buffers, ZT_CF_INT), .def = 4,
     JSON(K_OFFOPT_BUFCOUNT, -1, offload_buffers, offload_buffers)},
    {FIELD(sub_group_size, ZT_CF_SIZE), .def = 1e9,
     JSON(K_SUB_GROUP, -1, sub_group_size, sub_group_size)},
    {FIELD(offload_param, ZT_CF_ENUM), .names = devices,
     JSON(K_OFFPAR_DEVICE, -1, offload_param, offload_param)},
    {FIELD(offload_param_buffers, ZT_CF_INT), .def = 5,
     JSON(K_OFFPAR_BUFCOUNT, -1, offload_param_buffers, offload_param_buffers)},
    {FIELD(offload_param_buffer_size, ZT_CF_SIZE),
     JSON(K_OFFPAR_BUFSIZE, -1, offload_param_buffer_size, offload_param_buffer_size)},
    {FIELD(offload_param_max_in_cpu, ZT_CF_SIZE),
     JSON(K_OFFPAR_MAXCPU, -1, offload_param_max_in_cpu, offload_param_max_in_cpu)},
    {FIELD(offload_gradients, ZT_CF_INT),
     JSON(K_ZT_OFFGRAD, -1, offload_gradients, offload_gradients),
     .doc = "0 automatic, 1 yes (true), -1 keep them in RAM (false)."},
    {FIELD(recompute, ZT_CF_ENUM), .names = recomputes,
     JSON(K_ZT_RECOMPUTE, -1, recompute, recompute)},
    {FIELD(recompute_k, ZT_CF_INT), JSON(K_ZT_RECOMPUTE, -1, recompute_k, recompute_k),
     .doc = "K of \"every-k:K\"."},
    {FIELD(number_checkpoints, ZT_CF_INT),
     JSON(K_AC_NUMBER, -1, number_checkpoints, number_checkpoints)},
    {FIELD(offload_checkpoints, ZT_CF_INT),
     JSON(K_AC_CPU, -1, offload_checkpoints, offload_checkpoints)},
    {FIELD(recompute_profile, ZT_CF_INT),
     JSON(K_AC_PROFILE, -1, recompute_profile, recompute_profile)},
    {FIELD(direct_io, ZT_CF_INT), JSON(K_ZT_DIRECT, -1, direct_io, direct_io),
     .doc = "0 probe (\"auto\"), 1 \"required\", -1 buffered (\"off\")."},
    {FIELD(memory_limit, ZT_CF_SIZE), JSON(K_ZT_MEMLIMIT, -1, memory_limit, memory_limit),
     .doc = "Bytes; 0 = no plan."},
    {FIELD(plan_micro_batch, ZT_CF_INT),
     JSON(K_MICRO_BATCH, -1, micro_batch_size, plan_micro_batch),
     .doc = "The micro batch the memory planner counts activations for."},
    {FIELD(plan_seq_len, ZT_CF_INT), OWN,
     .doc = "The sequence length the memory planner (memory_limit, recompute \"auto\") counts "
            "activations for (`zerotrain train` takes the data's)."},
    {FIELD(optimizer, ZT_CF_ENUM), .names = optimizers,
     JSON(K_OPT_TYPE, -1, optimizer, optimizer)},
    {FIELD(min_8bit_size, ZT_CF_SIZE), .def = ZT_MIN_8BIT_SIZE,
     JSON(K_MIN8, -1, min_8bit_size, min_8bit_size)},
    {FIELD(fp32_state, ZT_CF_PATTERNS), .key = K_ZT_FP32_STATE, .key2 = -1,
     .from = offsetof(struct zt_train_config, fp32_state),
     .doc = "n_fp32_state parameter-name substrings whose AdamW8bit moments stay fp32 "
            "(borrowed)."},
    {FIELD(n_fp32_state, ZT_CF_INT), .def = -1,
     JSON(K_ZT_FP32_STATE, -1, n_fp32_state, n_fp32_state),
     .doc = "-1 = the model's embedding tables, else the number of fp32_state patterns."},
    /* transformers' Adafactor defaults */
    {FIELD(adafactor_eps1, ZT_CF_FLOAT), .def = 1e-30,
     JSON(K_EPS, -1, adafactor_eps1, adafactor_eps1), .doc = "Adafactor's eps[0]."},
    {FIELD(adafactor_eps2, ZT_CF_FLOAT), .def = 1e-3,
     JSON(K_EPS, -1, adafactor_eps2, adafactor_eps2), .doc = "Adafactor's eps[1]."},
    {FIELD(clip_threshold, ZT_CF_FLOAT), .def = 1.0,
     JSON(K_AF_CLIP, -1, clip_threshold, clip_threshold)},
    {FIELD(decay_rate, ZT_CF_FLOAT), .def = -0.8, JSON(K_AF_DECAY, -1, decay_rate, decay_rate)},
    {FIELD(adafactor_beta1, ZT_CF_FLOAT), .def = -1.0,
     JSON(K_AF_BETA1, -1, adafactor_beta1, adafactor_beta1), .doc = "< 0: no first moment."},
    /* DeepSpeed's FusedLamb defaults */
    {FIELD(max_coeff, ZT_CF_FLOAT), .def = 10.0, JSON(K_LAMB_MAX, -1, max_coeff, max_coeff)},
    {FIELD(min_coeff, ZT_CF_FLOAT), .def = 0.01, JSON(K_LAMB_MIN, -1, min_coeff, min_coeff)},
    {FIELD(eps_inside_sqrt, ZT_CF_INT), JSON(K_LAMB_EPS_IN, -1, eps_inside_sqrt,
                                             eps_inside_sqrt)},
    {FIELD(relative_step, ZT_CF_INT), .def = 1,
     JSON(K_AF_REL, -1, relative_step, relative_step)},
    {FIELD(scale_parameter, ZT_CF_INT), .def = 1,
     JSON(K_AF_SCALE, -1, scale_parameter, scale_parameter)},
    {FIELD(warmup_init, ZT_CF_INT), JSON(K_AF_WARMUP, -1, warmup_init, warmup_init)},
    {FIELD(skip_nonfinite, ZT_CF_INT),
     JSON(K_ZT_SKIP_NONFINITE, -1, skip_nonfinite, skip_nonfinite),
     .doc = "The divergence guard: 0 here, 1 in a config file without the key."},
    {FIELD(head, ZT_CF_ENUM), .names = heads, OWN,
     .doc = "BERT's head: the config's architectures (auto), a masked LM, or a "
            "BertForSequenceClassification (`zerotrain finetune --task classify`)."},
    {FIELD(num_labels, ZT_CF_INT), OWN,
     .doc = "A classifier's outputs (0 = the config's)."},
    {FIELD(problem_type, ZT_CF_ENUM), .names = problems, OWN,
     .doc = "A classifier's loss: auto = the config's, or decided by the labels as Hugging "
            "Face decides it (1 output: regression; class ids: single-label; else "
            "multi-label)."},
    {FIELD(electra_generator_size, ZT_CF_FLOAT), .def = 0.25,
     JSON(K_ZT_ELECTRA_GEN, -1, electra_generator_size, electra_generator_size)},
    {FIELD(label_names, ZT_CF_PATTERNS), OWN,
     .doc = "A classifier's num_labels names, id2label (copied; NULL = the config's, or "
            "LABEL_0, ...)."},
    {FIELD(inference, ZT_CF_INT), OWN,
     .doc = "1 = forward only (`zerotrain predict`): no gradients, no optimizer state, one "
            "layer's activations at a time."},
    {FIELD(precision, ZT_CF_ENUM), .names = precisions,
     JSON(K_BF16_ON, K_FP16_ON, precision, precision),
     .doc = "The training precision: fp32, or bf16 / fp16 (2-byte parameters rounded from an "
            "fp32 master in the optimizer state; fp16 with loss scaling)."},
    {FIELD(grad_accum_dtype, ZT_CF_ENUM), .names = grad_dtypes,
     JSON(K_GRAD_ACCUM, -1, grad_accum_dtype, grad_accum_dtype),
     .doc = "The gradients' accumulation dtype: auto = fp32 for fp32 and bf16, fp16 for fp16 "
            "(DeepSpeed's data_types.grad_accum_dtype defaults); bf16 / fp16 keep 2 bytes a "
            "gradient."},
    {FIELD(comm_dtype, ZT_CF_ENUM), .names = grad_dtypes,
     JSON(K_COMM_DTYPE, -1, comm_dtype, comm_dtype),
     .doc = "The gradients' reduction dtype: auto = the accumulation dtype (DeepSpeed's "
            "communication_data_type default); bf16 / fp16 send 2 bytes a gradient."},
    {FIELD(loss_scale, ZT_CF_DOUBLE), JSON(K_FP16_LS, -1, loss_scale, loss_scale),
     .doc = "fp16: 0 = dynamic loss scaling, else a fixed scale."},
    {FIELD(initial_scale_power, ZT_CF_INT), .def = 16,
     JSON(K_FP16_POWER, -1, initial_scale_power, initial_scale_power)},
    {FIELD(loss_scale_window, ZT_CF_INT), .def = 1000,
     JSON(K_FP16_WINDOW, -1, loss_scale_window, loss_scale_window)},
    {FIELD(hysteresis, ZT_CF_INT), .def = 2, JSON(K_FP16_HYST, -1, hysteresis, hysteresis)},
    {FIELD(consecutive_hysteresis, ZT_CF_INT),
     JSON(K_FP16_CONSEC, -1, consecutive_hysteresis, consecutive_hysteresis)},
    {FIELD(min_loss_scale, ZT_CF_DOUBLE), .def = 1.0,
     JSON(K_FP16_MIN, -1, min_loss_scale, min_loss_scale)},
};
const int zt_cfg_n_fields = (int)(sizeof zt_cfg_fields / sizeof zt_cfg_fields[0]);

#undef OWN
#undef JSON
#undef FIELD
#undef FROM
#undef CFG_SIZE

const zt_cfg_field *zt_cfg_field_find(const char *name)
{
    for (int i = 0; i < zt_cfg_n_fields; i++)
        if (strcmp(zt_cfg_fields[i].name, name) == 0)
            return &zt_cfg_fields[i];
    return NULL;
}

/* zt_config_init's value of field name (a name of the list above) */
static double field_def(const char *name)
{
    const zt_cfg_field *f = zt_cfg_field_find(name);
    assert(f);
    return f->def;
}

/* Row k's default: its own, or (FIELD_DEF) that of the first field it sets. */
static double key_def(int k)
{
    if (!isnan(keys[k].def))
        return keys[k].def;
    for (int i = 0; i < zt_cfg_n_fields; i++)
        if (zt_cfg_fields[i].key == k || zt_cfg_fields[i].key2 == k)
            return zt_cfg_fields[i].def;
    assert(!"a FIELD_DEF row sets no field");
    return 0.0;
}

/* ---- small helpers -------------------------------------------------------------------- */

static const char *last_part(const char *path)
{
    const char *d = strrchr(path, '.');
    return d ? d + 1 : path;
}

/* Does row path rp name the child `name` of section `prefix` ("" = top level)? */
static int row_is(const char *rp, const char *prefix, const char *name)
{
    size_t pl = strlen(prefix);
    if (pl) {
        if (strncmp(rp, prefix, pl) != 0 || rp[pl] != '.')
            return 0;
        rp += pl + 1;
    }
    return strcmp(rp, name) == 0;
}

/* Is row path rp a direct child of prefix? */
static int row_child_of(const char *rp, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (pl) {
        if (strncmp(rp, prefix, pl) != 0 || rp[pl] != '.')
            return 0;
        rp += pl + 1;
    }
    return strchr(rp, '.') == NULL && strcmp(rp, "*") != 0;
}

static int find_row(const char *prefix, const char *name)
{
    for (int k = 0; k < NKEYS; k++)
        if (row_is(keys[k].path, prefix, name))
            return k;
    for (int k = 0; k < NKEYS; k++)
        if (row_is(keys[k].path, prefix, "*"))
            return k;
    return -1;
}

/* Optimal-string-alignment distance, case-insensitive; 99 when either is long. */
static int edit_distance(const char *a, const char *b)
{
    int d[64][64];
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 99;
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ai != bj);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == bj && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* A distance that makes `cand` a plausible intent for `typed`; -1 when it is not. */
static int closeness(const char *typed, const char *cand)
{
    size_t n = strlen(typed), m = strlen(cand);
    int d = edit_distance(typed, cand);
    int limit = n >= 8 ? 2 : n >= 4 ? 1 : 0;
    if (d <= limit)
        return d;
    if (n >= 4 && m >= 4 && (strncasecmp(typed, cand, n < m ? n : m) == 0))
        return 3; /* one is a prefix of the other: "gradient_clip" */
    return -1;
}

/* A key or value as it may appear in a message: no control characters, bounded length. */
static const char *shown(const char *s, char *buf, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 4 < size && i < 60; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (s[i])
        buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
    buf[i] = '\0';
    return buf;
}

/* Whole numbers in full, others as the shortest decimal that reads back as the same double. */
static const char *fmt_num(double v, char *buf, size_t size)
{
    if (v == floor(v) && fabs(v) < 1e16) {
        snprintf(buf, size, "%.0f", v);
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static int is_auto(const cJSON *n)
{
    return cJSON_IsString(n) && strcmp(n->valuestring, "auto") == 0;
}

/* What a JSON value is, for "expected X, got Y". */
static const char *describe(const cJSON *n, char *buf, size_t size)
{
    char tmp[80];
    if (cJSON_IsNull(n))
        snprintf(buf, size, "null");
    else if (cJSON_IsTrue(n))
        snprintf(buf, size, "true");
    else if (cJSON_IsFalse(n))
        snprintf(buf, size, "false");
    else if (cJSON_IsNumber(n))
        snprintf(buf, size, "the number %s", fmt_num(n->valuedouble, tmp, sizeof tmp));
    else if (cJSON_IsString(n))
        snprintf(buf, size, "the string \"%s\"", shown(n->valuestring, tmp, sizeof tmp));
    else if (cJSON_IsArray(n))
        snprintf(buf, size, "an array of %d value%s", cJSON_GetArraySize(n),
                 cJSON_GetArraySize(n) == 1 ? "" : "s");
    else
        snprintf(buf, size, "an object");
    return buf;
}

/* The i-th '|'-separated value of list into buf; 0 when there is none. */
static int list_item(const char *list, int i, char *buf, size_t size)
{
    const char *p = list;
    for (; i > 0 && p; i--) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p || !list)
        return 0;
    size_t len = strcspn(p, "|");
    if (len >= size)
        len = size - 1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return 1;
}

/* '"a", "b", "c"' from 'a|b|c' */
static const char *quoted_list(const char *list, char *buf, size_t size)
{
    char item[64];
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; list_item(list, i, item, sizeof item); i++)
        len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s\"%s\"",
                                i ? ", " : "", item);
    return buf;
}

/* ---- the checking pass ---------------------------------------------------------------- */

typedef struct val {
    const cJSON *node;
    unsigned char given;   /* present and not null */
    unsigned char is_auto; /* "auto" (allowed here) */
    unsigned char bad;     /* a problem was reported for it */
    double num;            /* T_BOOL (0/1), T_INT, T_NUM, T_ENUM (index into values) */
    double pair[2];        /* T_BETAS; T_EPS given as [a, b] */
    unsigned char is_pair; /* T_EPS: an array was given */
    uint64_t u64;          /* T_SEED */
} val;

typedef struct ctx {
    const char *src;
    val v[NKEYS];
    char err[ZT_ERRMSG_MAX];
    size_t err_len;
    int n_err, n_dropped, n_config; /* n_config: problems that are not "unsupported" */
    char note[ZT_ERRMSG_MAX];       /* lines "W..." / "I...", logged on success */
    size_t note_len;
} ctx;

#define MORE_RESERVE 48  /* room for the "... and N more problems" line */

static void problem(ctx *x, int code, int k, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void problem(ctx *x, int code, int k, const char *path, const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "%s%s: %s: ", x->n_err ? "\n" : "", x->src, path);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (k >= 0)
        x->v[k].bad = 1;
    if (code != ZT_E_UNSUPPORTED)
        x->n_config++;
    size_t len = strlen(line);
    if (x->n_dropped || x->err_len + len + MORE_RESERVE >= sizeof x->err) {
        x->n_dropped++;
    } else {
        memcpy(x->err + x->err_len, line, len + 1);
        x->err_len += len;
    }
    x->n_err++;
}

static void note(ctx *x, int level, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(ctx *x, int level, const char *path, const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "%c%s: %s: ", level == ZT_LOG_INFO ? 'I' : 'W', x->src,
                     path);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    if (x->note_len + len + 2 < sizeof x->note) {
        memcpy(x->note + x->note_len, line, len);
        x->note_len += len;
        x->note[x->note_len++] = '\n';
        x->note[x->note_len] = '\0';
    }
}

static const char *expected(const key *r, char *buf, size_t size)
{
    char list[256];
    switch (r->type) {
    case T_OBJ: return "an object";
    case T_BOOL: return "true or false";
    case T_INT: return "an integer";
    case T_NUM: return "a number";
    case T_STR: return "a string";
    case T_BETAS: return "[beta1, beta2]";
    case T_EPS: return "a number, or [eps1, eps2] for Adafactor";
    case T_STRS: return "an array of strings";
    case T_SEED: return "an integer (or a string of decimal digits)";
    case T_SIZE: return "a byte count (a whole number, or a string such as \"4GiB\")";
    case T_ENUM:
        snprintf(buf, size, "one of %s", quoted_list(r->values, list, sizeof list));
        return buf;
    default: return "any value";
    }
}

static void wrong_type(ctx *x, int k, const char *path, const cJSON *n)
{
    char exp[300], got[120], hint[120] = "";
    const key *r = &keys[k];
    if (cJSON_IsString(n) && (r->type == T_BOOL || r->type == T_INT || r->type == T_NUM)) {
        char *end;
        double d = strtod(n->valuestring, &end);
        if (!strcmp(n->valuestring, "true") || !strcmp(n->valuestring, "false") ||
            (r->type != T_BOOL && end != n->valuestring && !*end && isfinite(d)))
            snprintf(hint, sizeof hint, " (write it without quotes)");
    }
    problem(x, ZT_E_CONFIG, k, path, "expected %s, got %s%s", expected(r, exp, sizeof exp),
            describe(n, got, sizeof got), hint);
}

/* Reports v if it is outside row k's range. */
static void check_range(ctx *x, int k, const char *path, double v)
{
    const key *r = &keys[k];
    char a[40], b[40], c[40];
    int hi_open = (r->flags & F_HI_OPEN) != 0;
    if (v >= r->lo && (hi_open ? v < r->hi : v <= r->hi))
        return;
    fmt_num(r->lo, a, sizeof a);
    fmt_num(r->hi, b, sizeof b);
    fmt_num(v, c, sizeof c);
    if (r->type == T_INT) {
        if (r->lo == r->hi)
            problem(x, ZT_E_CONFIG, k, path, "must be %s, got %s", a, c);
        else if (r->hi - r->lo <= 100)
            problem(x, ZT_E_CONFIG, k, path, "must be %s to %s, got %s", a, b, c);
        else if (v < r->lo)
            problem(x, ZT_E_CONFIG, k, path, "must be >= %s, got %s", a, c);
        else
            problem(x, ZT_E_CONFIG, k, path, "must be <= %s, got %s", b, c);
    } else if (isinf(r->hi)) {
        problem(x, ZT_E_CONFIG, k, path, "must be >= %s, got %s", a, c);
    } else if (isinf(r->lo)) {
        problem(x, ZT_E_CONFIG, k, path, "must be %s %s, got %s", hi_open ? "<" : "<=", b, c);
    } else {
        problem(x, ZT_E_CONFIG, k, path, "must be in [%s, %s%c, got %s", a, b,
                hi_open ? ')' : ']', c);
    }
}

/* A JSON number that must be a whole number. */
static int check_int(ctx *x, int k, const char *path, const cJSON *n)
{
    double v = n->valuedouble;
    char c[40];
    if (!isfinite(v)) {
        problem(x, ZT_E_CONFIG, k, path, "the number is too large to represent");
        return 0;
    }
    if (v != floor(v)) {
        problem(x, ZT_E_CONFIG, k, path, "must be a whole number, got %s",
                fmt_num(v, c, sizeof c));
        return 0;
    }
    check_range(x, k, path, v);
    return !x->v[k].bad;
}

static void check_enum(ctx *x, int k, const char *path, const cJSON *n)
{
    const key *r = &keys[k];
    char item[64], list[256], s[80], best[64] = "";
    int best_d = 99;
    if (!cJSON_IsString(n)) {
        wrong_type(x, k, path, n);
        return;
    }
    for (int i = 0; list_item(r->values, i, item, sizeof item); i++) {
        if ((r->flags & F_NOCASE) ? !strcasecmp(item, n->valuestring)
                                  : !strcmp(item, n->valuestring)) {
            x->v[k].num = i;
            return;
        }
        int d = closeness(n->valuestring, item);
        if (d >= 0 && d < best_d)
            best_d = d, snprintf(best, sizeof best, "%s", item);
    }
    for (int i = 0; r->unsup && list_item(r->unsup, i, item, sizeof item); i++)
        if (!strcasecmp(item, n->valuestring)) {
            problem(x, ZT_E_UNSUPPORTED, k, path, "\"%s\" is not supported: %s",
                    shown(n->valuestring, s, sizeof s), r->unsup_why);
            return;
        }
    problem(x, ZT_E_CONFIG, k, path, "must be one of %s, got \"%s\"%s%s%s",
            quoted_list(r->values, list, sizeof list), shown(n->valuestring, s, sizeof s),
            best[0] ? " (did you mean \"" : "", best,
            !best[0] ? "" : best_d == 0 ? "\"? names are case-sensitive)" : "\"?)");
}

/* Ignored keys: null, false, {} or an object whose "enabled" is false, null or "auto" (which
 * Hugging Face fills from flags zerotrain does not have). */
static int asks_nothing(const cJSON *n)
{
    if (cJSON_IsNull(n) || cJSON_IsFalse(n))
        return 1;
    if (cJSON_IsObject(n)) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(n, "enabled");
        return e ? cJSON_IsFalse(e) || cJSON_IsNull(e) || is_auto(e) : !n->child;
    }
    return 0;
}

/* Gated keys (amp, elasticity, deprecated switches) are off unless set to a value other than
 * null/false, or for a section, unless "enabled" is true (DeepSpeed's default is false). */
static int gate_on(const cJSON *n)
{
    if (cJSON_IsObject(n))
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "enabled"));
    return !cJSON_IsNull(n) && !cJSON_IsFalse(n);
}

static int is_quiet(const key *r, const cJSON *n)
{
    if ((r->flags & F_QUIET) || asks_nothing(n))
        return 1;
    if (!r->quiet)
        return 0;
    if (cJSON_IsNumber(n)) {
        char *end;
        double q = strtod(r->quiet, &end);
        return !*end && q == n->valuedouble;
    }
    if (cJSON_IsString(n))
        return strcmp(n->valuestring, r->quiet) == 0;
    return cJSON_IsTrue(n) && strcmp(r->quiet, "true") == 0;
}

static void walk(ctx *x, const cJSON *obj, const char *prefix);

static void unknown_key(ctx *x, const char *prefix, const char *name, const char *path)
{
    char best[160] = "", flat[512], s[80];
    int best_d = 99;
    /* a flattened path ("zero_optimization.stage" at the top level) */
    snprintf(flat, sizeof flat, "%s%s%s", prefix, *prefix ? "." : "", name);
    if (strchr(name, '.')) {
        for (int k = 0; k < NKEYS; k++)
            if (!strcmp(keys[k].path, flat)) {
                char sect[160];
                const char *dot = strrchr(flat, '.');
                snprintf(sect, sizeof sect, "%.*s", (int)(dot - flat), flat);
                problem(x, ZT_E_CONFIG, -1, path, "unknown key (keys are nested: write "
                        "\"%s\" inside the \"%s\" object)", last_part(flat), last_part(sect));
                return;
            }
    }
    /* a close key at this level */
    for (int k = 0; k < NKEYS; k++) {
        if (!row_child_of(keys[k].path, prefix))
            continue;
        int d = closeness(name, last_part(keys[k].path));
        if (d >= 0 && d < best_d)
            best_d = d, snprintf(best, sizeof best, "\"%s\"", last_part(keys[k].path));
    }
    if (!best[0]) /* the same key elsewhere ("aio" inside zero_optimization) */
        for (int k = 0; k < NKEYS; k++)
            if (strcmp(name, "*") && !strcmp(last_part(keys[k].path), name)) {
                snprintf(best, sizeof best, "%s\"%s\"", strchr(keys[k].path, '.') ? "" :
                         "the top-level ", keys[k].path);
                break;
            }
    if (best[0]) {
        problem(x, ZT_E_CONFIG, -1, path, "unknown key (did you mean %s?%s)", best,
                best_d == 0 ? " keys are case-sensitive" : "");
    } else if (*prefix) {
        char list[400];
        size_t len = 0;
        int n = 0;
        list[0] = '\0';
        /* (optimizer.params: the keys of the type, when it came first) */
        unsigned only = x->v[K_OPT_TYPE].given && !x->v[K_OPT_TYPE].bad &&
                        !strcmp(prefix, "optimizer.params")
                            ? OPT_BIT((int)x->v[K_OPT_TYPE].num) : 0;
        for (int k = 0; k < NKEYS; k++)
            if (keys[k].cls != C_IGNORED && keys[k].cls != C_GATED &&
                row_child_of(keys[k].path, prefix) &&
                (!only || !keys[k].opt || (keys[k].opt & only)))
                n++, len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0,
                                             "%s%s", len ? ", " : "", last_part(keys[k].path));
        if (n <= 10 && len < sizeof list)
            problem(x, ZT_E_CONFIG, -1, path, "unknown key (%s takes %s)",
                    shown(prefix, s, sizeof s), list);
        else
            problem(x, ZT_E_CONFIG, -1, path, "unknown key (docs/config.md lists the keys of "
                    "%s)", shown(prefix, s, sizeof s));
    } else
        problem(x, ZT_E_CONFIG, -1, path, "unknown key (neither a DeepSpeed key zerotrain "
                "knows nor a zerotrain one; docs/config.md lists them)");
}

/* The rows whose class, a null or "auto" decides the value (1: handled). */
static int check_special(ctx *x, int k, const cJSON *n, const char *path)
{
    const key *r = &keys[k];
    val *v = &x->v[k];
    if (r->cls == C_IGNORED) {
        if (!is_quiet(r, n))
            note(x, ZT_LOG_WARN, path, "ignored: %s", r->doc);
        return 1;
    }
    if (r->cls == C_GATED) {
        if (gate_on(n))
            problem(x, (r->flags & F_DEPRECATED) ? ZT_E_CONFIG : ZT_E_UNSUPPORTED, k, path,
                    "%s", r->unsup_why);
        return 1;
    }
    if (cJSON_IsNull(n)) {
        if (!(r->flags & F_NULL))
            wrong_type(x, k, path, n);
        return 1;
    }
    if (is_auto(n) && r->type != T_ENUM && r->type != T_STR) {
        if (r->autom == A_NO) {
            char exp[300];
            problem(x, ZT_E_CONFIG, k, path, "\"auto\" is not accepted here (there is nothing "
                    "to derive it from): give %s", expected(r, exp, sizeof exp));
        } else if (r->autom == A_NEVER) {
            problem(x, ZT_E_CONFIG, k, path, "\"auto\" cannot be resolved (%s): set a number",
                    r->auto_doc);
        } else {
            v->given = v->is_auto = 1;
        }
        return 1;
    }
    return 0;
}

/* [a, b] (betas; eps as [eps1, eps2]), each in the row's range */
static void check_pair(ctx *x, int k, const cJSON *n, const char *path)
{
    val *v = &x->v[k];
    const cJSON *a = cJSON_IsArray(n) ? n->child : NULL;
    const cJSON *b = a ? a->next : NULL;
    if (!cJSON_IsArray(n) || cJSON_GetArraySize(n) != 2 || !cJSON_IsNumber(a) ||
        !cJSON_IsNumber(b)) {
        wrong_type(x, k, path, n);
        return;
    }
    for (int i = 0; i < 2; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s[%d]", path, i);
        check_range(x, k, p, i ? b->valuedouble : a->valuedouble);
    }
    v->pair[0] = a->valuedouble;
    v->pair[1] = b->valuedouble;
    v->given = !v->bad;
}

/* a list of name patterns (zerotrain.no_decay, fp32_state) */
static void check_patterns(ctx *x, int k, const cJSON *n, const char *path)
{
    val *v = &x->v[k];
    char s[80];
    int i = 0;
    const cJSON *e;
    if (!cJSON_IsArray(n)) {
        wrong_type(x, k, path, n);
        return;
    }
    cJSON_ArrayForEach(e, n) {
        char p[300];
        snprintf(p, sizeof p, "%s[%d]", path, i++);
        if (!cJSON_IsString(e))
            problem(x, ZT_E_CONFIG, k, p, "expected a string, got %s",
                    describe(e, s, sizeof s));
        else if (!e->valuestring[0])
            problem(x, ZT_E_CONFIG, k, p, "an empty pattern matches every parameter (%s)",
                    k == K_ZT_NO_DECAY ? "to exempt all of them, set "
                    "optimizer.params.weight_decay to 0" : "to keep all of them in fp32, "
                    "use optimizer.type \"AdamW\"");
    }
    v->given = !v->bad;
}

/* bytes: a number, or a string with a unit */
static void check_size(ctx *x, int k, const cJSON *n, const char *path)
{
    val *v = &x->v[k];
    char s[80];
    double d = -1.0;
    if (cJSON_IsNumber(n)) {
        d = n->valuedouble;
    } else if (cJSON_IsString(n)) {
        static const struct { const char *u; double m; } units[] = {
            {"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
            {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0},
            {"tib", 1099511627776.0}, {"k", 1024.0}, {"m", 1048576.0}, {"g", 1073741824.0}};
        char *end, unit[8] = "";
        double num = strtod(n->valuestring, &end);
        while (*end == ' ')
            end++;
        size_t ul = strlen(end);
        for (size_t i = 0; i < ul && i < sizeof unit - 1; i++)
            unit[i] = (char)tolower((unsigned char)end[i]);
        for (size_t i = 0; end != n->valuestring && ul < sizeof unit &&
                           i < sizeof units / sizeof units[0]; i++)
            if (!strcmp(unit, units[i].u))
                d = num * units[i].m;
        if (d < 0) {
            problem(x, ZT_E_CONFIG, k, path, "\"%s\" is not a size: write a number of "
                    "bytes or a number with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
                    n->valuestring);
            return;
        }
    } else {
        wrong_type(x, k, path, n);
        return;
    }
    if (!(d >= 1048576.0) || d > 1e18 || !isfinite(d))
        problem(x, ZT_E_CONFIG, k, path, "%s bytes: must be at least 1 MiB",
                fmt_num(d, s, sizeof s));
    else
        v->num = floor(d), v->given = 1;
}

/* a seed: a whole number up to 2^53, or a string of digits up to 2^64-1 */
static void check_seed(ctx *x, int k, const cJSON *n, const char *path)
{
    val *v = &x->v[k];
    char s[80];
    if (cJSON_IsNumber(n)) {
        double d = n->valuedouble;
        if (!(d >= 0) || d != floor(d) || d > BIG)
            problem(x, ZT_E_CONFIG, k, path, "must be a whole number from 0 to 2^53 (write "
                    "larger seeds up to 2^64-1 as a string of digits), got %s",
                    fmt_num(d, s, sizeof s));
        else
            v->u64 = (uint64_t)d, v->given = 1;
    } else if (cJSON_IsString(n)) {
        const char *p = n->valuestring;
        char *end;
        errno = 0;
        unsigned long long u = strtoull(p, &end, 10);
        if (!isdigit((unsigned char)p[0]) || *end || errno == ERANGE)
            problem(x, ZT_E_CONFIG, k, path, "must be a whole number from 0 to 2^64-1, got "
                    "the string \"%s\"", shown(p, s, sizeof s));
        else
            v->u64 = u, v->given = 1;
    } else {
        wrong_type(x, k, path, n);
    }
}

static void check_value(ctx *x, int k, const cJSON *n, const char *path)
{
    const key *r = &keys[k];
    val *v = &x->v[k];

    v->node = n;
    if (check_special(x, k, n, path))
        return;
    switch (r->type) {
    case T_OBJ:
        if (!cJSON_IsObject(n))
            wrong_type(x, k, path, n);
        else {
            v->given = 1;
            walk(x, n, r->path);
        }
        return;
    case T_BOOL:
        if (!cJSON_IsBool(n))
            wrong_type(x, k, path, n);
        else
            v->num = cJSON_IsTrue(n), v->given = 1;
        return;
    case T_INT:
        if (!cJSON_IsNumber(n))
            wrong_type(x, k, path, n);
        else if (check_int(x, k, path, n))
            v->num = n->valuedouble, v->given = 1;
        return;
    case T_NUM:
        if (!cJSON_IsNumber(n))
            wrong_type(x, k, path, n);
        else if (!isfinite(n->valuedouble) || fabs(n->valuedouble) > FLT_MAX)
            problem(x, ZT_E_CONFIG, k, path, "%s is too large to represent (in 32 bits at "
                    "most 3.4e38)", isfinite(n->valuedouble) ? "the number" : "it");
        else {
            check_range(x, k, path, n->valuedouble);
            v->num = n->valuedouble;
            v->given = !v->bad;
        }
        return;
    case T_STR:
        if (!cJSON_IsString(n))
            wrong_type(x, k, path, n);
        else if (!n->valuestring[0])
            problem(x, ZT_E_CONFIG, k, path, "must not be empty");
        else
            v->given = 1;
        return;
    case T_ENUM:
        check_enum(x, k, path, n);
        v->given = !v->bad;
        return;
    case T_EPS:
        if (cJSON_IsNumber(n)) {
            check_range(x, k, path, n->valuedouble);
            v->num = n->valuedouble;
            v->given = !v->bad;
            return;
        }
        v->is_pair = 1;
        __attribute__((fallthrough)); /* [eps1, eps2] as a pair */
    case T_BETAS:
        check_pair(x, k, n, path);
        return;
    case T_STRS:
        check_patterns(x, k, n, path);
        return;
    case T_SIZE:
        check_size(x, k, n, path);
        return;
    case T_SEED:
        check_seed(x, k, n, path);
        return;
    default:
        return;
    }
}

/* Checks every member of obj, the object at row path prefix ("" = the top level). */
static void walk(ctx *x, const cJSON *obj, const char *prefix)
{
    int n = cJSON_GetArraySize(obj);
    if (n > 1000) { /* the duplicate check below is quadratic */
        problem(x, ZT_E_CONFIG, -1, *prefix ? prefix : "(top level)", "%d keys: this is not a "
                "DeepSpeed config (docs/config.md lists the keys)", n);
        return;
    }
    for (const cJSON *c = obj->child; c; c = c->next) {
        char path[512], s[80];
        const char *name = c->string ? c->string : "";
        int dup = 0;
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "",
                 *name ? shown(name, s, sizeof s) : "\"\"");
        for (const cJSON *d = obj->child; d != c && !dup; d = d->next)
            dup = d->string && !strcmp(d->string, name);
        if (dup) {
            problem(x, ZT_E_CONFIG, -1, path, "duplicate key (JSON readers disagree on which "
                    "value counts): keep one");
            continue;
        }
        int k = strchr(name, '.') ? -1 : find_row(prefix, name);
        if (k < 0)
            unknown_key(x, prefix, name, path);
        else
            check_value(x, k, c, path);
    }
    for (int k = 0; k < NKEYS; k++)
        if ((keys[k].flags & F_REQUIRED) && row_child_of(keys[k].path, prefix) &&
            !x->v[k].node) {
            char list[256];
            problem(x, ZT_E_CONFIG, k, keys[k].path, "missing: the \"%s\" section needs it "
                    "(one of %s)", last_part(prefix),
                    quoted_list(keys[k].values, list, sizeof list));
        }
}

/* ---- resolution: derived values, cross-key rules -------------------------------------- */

#define GIVEN(k) (x->v[k].given && !x->v[k].is_auto && !x->v[k].bad)
#define AUTO(k) (x->v[k].given && x->v[k].is_auto && !x->v[k].bad)
#define BAD(k) (x->v[k].bad)
#define NUM(k) (x->v[k].num)
#define NUM_OR_DEF(k) (GIVEN(k) ? NUM(k) : key_def(k))

typedef struct resolved {
    zt_train_settings s;
    zt_sched_params sp;
    const cJSON *no_decay; /* the array, or NULL for the default */
    const cJSON *fp32_state; /* zerotrain.fp32_optimizer_state, or NULL */
} resolved;

/* a * b * c, saturated at INT64_MAX (all positive) */
static int64_t mul3(int64_t a, int64_t b, int64_t c)
{
    int64_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc))
        return INT64_MAX;
    return abc;
}

/* DeepSpeed's rule (runtime/config.py, _set_batch_related_parameters), with exact division
 * required where DeepSpeed floors and then fails its assertion. */
static void resolve_batch(ctx *x, int world, zt_train_settings *s)
{
    const char *tbp = keys[K_TRAIN_BATCH].path, *mbp = keys[K_MICRO_BATCH].path,
               *gap = keys[K_GAS].path;
    int ht = GIVEN(K_TRAIN_BATCH), hm = GIVEN(K_MICRO_BATCH), hg = GIVEN(K_GAS);
    int64_t tb = ht ? (int64_t)NUM(K_TRAIN_BATCH) : 0, mb = hm ? (int64_t)NUM(K_MICRO_BATCH) : 0,
            ga = hg ? (int64_t)NUM(K_GAS) : 0, w = world;
    int before = x->n_err;
    if (BAD(K_TRAIN_BATCH) || BAD(K_MICRO_BATCH) || BAD(K_GAS))
        return;
    if (ht && hm && hg) {
        if (tb != mul3(mb, ga, w))
            problem(x, ZT_E_CONFIG, K_TRAIN_BATCH, tbp, "%lld is not "
                    "train_micro_batch_size_per_gpu %lld x gradient_accumulation_steps %lld x "
                    "world size %lld = %lld: change one of them, or set one to \"auto\" to "
                    "derive it", (long long)tb, (long long)mb, (long long)ga, (long long)w,
                    (long long)mul3(mb, ga, w));
    } else if (ht && (hm || hg)) {
        int64_t d = (hm ? mb : ga) * w, lo = tb / d * d;
        char alt[64];
        if (lo)
            snprintf(alt, sizeof alt, "%lld or %lld", (long long)lo, (long long)(lo + d));
        else
            snprintf(alt, sizeof alt, "%lld", (long long)d);
        if (tb % d)
            problem(x, ZT_E_CONFIG, K_TRAIN_BATCH, tbp, "%lld is not a multiple of %s %lld x "
                    "world size %lld = %lld, so %s cannot be derived: use %s", (long long)tb,
                    hm ? mbp : gap, (long long)(hm ? mb : ga), (long long)w, (long long)d,
                    hm ? gap : mbp, alt);
        else if (hm)
            ga = tb / d;
        else
            mb = tb / d;
    } else if (hm && hg) {
        tb = mul3(mb, ga, w);
        if (tb > INT_MAX)
            problem(x, ZT_E_CONFIG, K_TRAIN_BATCH, tbp, "train_micro_batch_size_per_gpu %lld x "
                    "gradient_accumulation_steps %lld x world size %lld is above %d",
                    (long long)mb, (long long)ga, (long long)w, INT_MAX);
    } else if (ht) {
        ga = 1;
        mb = tb / w;
        if (tb % w)
            problem(x, ZT_E_CONFIG, K_TRAIN_BATCH, tbp, "%lld is not a multiple of the world "
                    "size %lld, so train_micro_batch_size_per_gpu cannot be derived: use a "
                    "multiple of %lld, or give train_micro_batch_size_per_gpu", (long long)tb,
                    (long long)w, (long long)w);
    } else if (hm) {
        ga = 1;
        tb = mul3(mb, 1, w);
        if (tb > INT_MAX)
            problem(x, ZT_E_CONFIG, K_TRAIN_BATCH, tbp, "train_micro_batch_size_per_gpu %lld x "
                    "world size %lld is above %d", (long long)mb, (long long)w, INT_MAX);
    } else {
        problem(x, ZT_E_CONFIG, K_MICRO_BATCH, mbp, "cannot derive the batch size (neither it "
                "nor train_batch_size is a number; \"auto\" is derived from the other two): "
                "set it to the samples per rank per micro-step");
    }
    if (x->n_err != before)
        return;
    s->train_batch_size = (int)tb;
    s->micro_batch_size = (int)mb;
    s->grad_accum_steps = (int)ga;
    for (int k = K_TRAIN_BATCH; k <= K_GAS; k++)
        if (AUTO(k))
            note(x, ZT_LOG_INFO, keys[k].path, "\"auto\" -> %lld (train_batch_size %lld = "
                 "micro batch %lld x accumulation %lld x world size %lld)",
                 (long long)(k == K_TRAIN_BATCH ? tb : k == K_MICRO_BATCH ? mb : ga),
                 (long long)tb, (long long)mb, (long long)ga, (long long)w);
}

static double resolve_num(ctx *x, int k, double auto_value, const char *why)
{
    char a[40];
    if (GIVEN(k))
        return NUM(k);
    if (AUTO(k)) {
        note(x, ZT_LOG_INFO, keys[k].path, "\"auto\" -> %s (%s)",
             fmt_num(auto_value, a, sizeof a), why);
        return auto_value;
    }
    return key_def(k);
}

/* optimizer.params keys the chosen type does not take: one problem each, naming the ones
 * it does take */
static void check_opt_params(ctx *x, int type)
{
    char tname[32], list[512];
    list_item(keys[K_OPT_TYPE].values, type, tname, sizeof tname);
    for (int k = 0; k < NKEYS; k++) {
        if (!keys[k].opt || !x->v[k].node || (keys[k].opt & OPT_BIT(type)) || BAD(k))
            continue;
        size_t len = 0;
        list[0] = '\0';
        for (int j = 0; j < NKEYS; j++)
            if (row_child_of(keys[j].path, "optimizer.params") &&
                (!keys[j].opt || (keys[j].opt & OPT_BIT(type))))
                len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0,
                                        "%s%s", len ? ", " : "", last_part(keys[j].path));
        problem(x, ZT_E_CONFIG, k, keys[k].path, "not a parameter of %s: remove it; %s takes %s",
                tname, tname, list);
    }
}

static void resolve_optimizer(ctx *x, zt_train_settings *s, double *lr)
{
    int type = GIVEN(K_OPT_TYPE) ? (int)NUM(K_OPT_TYPE) : OT_ADAMW;
    int adam = type == OT_ADAM, af = type == OT_ADAFACTOR;
    check_opt_params(x, type);
    s->optimizer_given = x->v[K_OPT].given;
    s->optimizer = type == OT_ADAMW8BIT ? ZT_OPT_ADAMW8BIT
                   : af                 ? ZT_OPT_ADAFACTOR
                   : type == OT_LAMB    ? ZT_OPT_LAMB
                                        : ZT_OPT_ADAMW;
    s->max_coeff = (float)NUM_OR_DEF(K_LAMB_MAX);
    s->min_coeff = (float)NUM_OR_DEF(K_LAMB_MIN);
    s->eps_inside_sqrt = (int)NUM_OR_DEF(K_LAMB_EPS_IN);
    if (s->min_coeff > s->max_coeff)
        problem(x, ZT_E_CONFIG, K_LAMB_MIN, keys[K_LAMB_MIN].path, "%g is above max_coeff %g: "
                "the trust ratio is clamped to [min_coeff, max_coeff]", (double)s->min_coeff,
                (double)s->max_coeff);
    s->grad_clip = (float)resolve_num(x, K_CLIP, 1.0, "Hugging Face's max_grad_norm default");
    s->min_8bit_size = (size_t)NUM_OR_DEF(K_MIN8);
    s->bias_correction = 1;
    /* Adafactor: transformers' defaults and rules */
    s->adafactor_eps1 = (float)field_def("adafactor_eps1");
    s->adafactor_eps2 = (float)field_def("adafactor_eps2");
    s->clip_threshold = (float)NUM_OR_DEF(K_AF_CLIP);
    s->decay_rate = (float)NUM_OR_DEF(K_AF_DECAY);
    s->adafactor_beta1 =
        (float)(GIVEN(K_AF_BETA1) ? NUM(K_AF_BETA1) : field_def("adafactor_beta1"));
    s->scale_parameter = (int)NUM_OR_DEF(K_AF_SCALE);
    s->relative_step = (int)NUM_OR_DEF(K_AF_REL);
    s->warmup_init = (int)NUM_OR_DEF(K_AF_WARMUP);
    if (af) { /* (betas and eps keep AdamW's defaults: Adafactor does not read them) */
        s->beta1 = (float)field_def("beta1");
        s->beta2 = (float)field_def("beta2");
        s->eps = (float)field_def("eps");
        if (GIVEN(K_EPS) && !x->v[K_EPS].is_pair)
            problem(x, ZT_E_CONFIG, K_EPS, keys[K_EPS].path, "Adafactor takes [eps1, eps2] "
                    "(Hugging Face's default [1e-30, 1e-3]), not one number");
        else if (GIVEN(K_EPS)) {
            s->adafactor_eps1 = (float)x->v[K_EPS].pair[0];
            s->adafactor_eps2 = (float)x->v[K_EPS].pair[1];
        }
        if (GIVEN(K_AF_CLIP) && !(NUM(K_AF_CLIP) > 0))
            problem(x, ZT_E_CONFIG, K_AF_CLIP, keys[K_AF_CLIP].path, "must be > 0");
        if (s->warmup_init && !s->relative_step)
            problem(x, ZT_E_CONFIG, K_AF_WARMUP, keys[K_AF_WARMUP].path, "true needs "
                    "relative_step true (Hugging Face's rule: warmup_init shapes the relative "
                    "step size)");
        s->weight_decay = GIVEN(K_WD) ? (float)NUM(K_WD) : 0.0f;
        if (s->relative_step) { /* (an lr of 0 is no lr, as null is) */
            if (GIVEN(K_LR) && NUM(K_LR) != 0.0)
                problem(x, ZT_E_CONFIG, K_LR, keys[K_LR].path, "Adafactor with relative_step "
                        "true computes its own step size (min(1e-2, 1/sqrt(step))), so a "
                        "manual lr cannot be combined with it (as in Hugging Face: \"Cannot "
                        "combine manual `lr` and `relative_step=True` options\"): remove "
                        "optimizer.params.lr (or null, or 0), or set "
                        "optimizer.params.relative_step false");
            if (AUTO(K_LR))
                note(x, ZT_LOG_INFO, keys[K_LR].path, "\"auto\" -> none (Adafactor's relative "
                     "step size)");
            if (GIVEN(K_SCHED))
                problem(x, ZT_E_CONFIG, K_SCHED, keys[K_SCHED].path, "Adafactor with "
                        "relative_step true follows its own schedule, so there is no lr for a "
                        "scheduler to drive: remove the section, or set "
                        "optimizer.params.relative_step false and give lr");
            *lr = 0.0;
        } else if (!GIVEN(K_LR) && !AUTO(K_LR) && !BAD(K_LR)) {
            problem(x, ZT_E_CONFIG, K_LR, keys[K_LR].path, "missing: Adafactor with "
                    "relative_step false needs a learning rate");
            *lr = 0.0;
        } else {
            *lr = resolve_num(x, K_LR, 5e-5, "the Hugging Face Trainer's learning_rate "
                              "default");
        }
        s->lr = (float)*lr;
        return;
    }
    *lr = resolve_num(x, K_LR, 5e-5, "the Hugging Face Trainer's learning_rate default");
    s->lr = (float)*lr;
    if (GIVEN(K_BETAS)) {
        s->beta1 = (float)x->v[K_BETAS].pair[0];
        s->beta2 = (float)x->v[K_BETAS].pair[1];
    } else {
        s->beta1 = (float)field_def("beta1");
        s->beta2 = (float)field_def("beta2");
        if (AUTO(K_BETAS))
            note(x, ZT_LOG_INFO, keys[K_BETAS].path, "\"auto\" -> [0.9, 0.999] (the Hugging "
                 "Face Trainer's adam_beta1 and adam_beta2 defaults)");
    }
    if (GIVEN(K_EPS) && x->v[K_EPS].is_pair) {
        char tname[32];
        list_item(keys[K_OPT_TYPE].values, type, tname, sizeof tname);
        problem(x, ZT_E_CONFIG, K_EPS, keys[K_EPS].path, "[eps1, eps2] is Adafactor's; %s "
                "takes one number", tname);
    }
    s->eps = (float)resolve_num(x, K_EPS, key_def(K_EPS), "the Hugging Face Trainer's "
                                "adam_epsilon default");
    /* absent: the default of the class DeepSpeed (or bitsandbytes) builds; "auto": what the
     * HF Trainer fills in */
    s->weight_decay = (float)resolve_num(x, K_WD, 0.0, "the Hugging Face Trainer's "
                                         "weight_decay default");
    if (!GIVEN(K_WD) && !AUTO(K_WD) &&
        (type == OT_ADAMW8BIT || (GIVEN(K_TORCH_ADAM) && NUM(K_TORCH_ADAM) != 0)))
        s->weight_decay = 0.01f;
    if (GIVEN(K_ADAM_W_MODE) && NUM(K_ADAM_W_MODE) == 0) {
        if (adam)
            problem(x, ZT_E_UNSUPPORTED, K_ADAM_W_MODE, keys[K_ADAM_W_MODE].path, "false "
                    "selects Adam with L2 regularisation, which is not supported: remove it or "
                    "set true (AdamW, decoupled weight decay)");
        else if (GIVEN(K_OPT_TYPE))
            note(x, ZT_LOG_WARN, keys[K_ADAM_W_MODE].path, "false has no effect with type "
                 "\"AdamW\" (DeepSpeed also uses decoupled weight decay for AdamW): remove it");
    }
    if (GIVEN(K_BIAS_CORR) && NUM(K_BIAS_CORR) == 0) {
        if (type == OT_ADAMW8BIT)
            problem(x, ZT_E_UNSUPPORTED, K_BIAS_CORR, keys[K_BIAS_CORR].path, "false is not "
                    "supported with AdamW8bit (bitsandbytes always corrects the bias): remove "
                    "it");
        s->bias_correction = 0;
    }
}

static void resolve_scheduler(ctx *x, int64_t total_steps, double lr, zt_train_settings *s,
                              zt_sched_params *sp)
{
    char a[40], b[40], list[512];
    sp->type = ZT_SCHED_CONSTANT;
    sp->base_lr = lr;
    if (!GIVEN(K_SCHED) || !GIVEN(K_SCHED_TYPE))
        return;
    zt_sched_type t = (zt_sched_type)(NUM(K_SCHED_TYPE) + 1);
    unsigned mask = SCHED_BIT(t);
    char tname[32];
    list_item(keys[K_SCHED_TYPE].values, (int)NUM(K_SCHED_TYPE), tname, sizeof tname);
    for (int k = 0; k < NKEYS; k++) {
        if (!keys[k].sched || !x->v[k].node || (keys[k].sched & mask) || BAD(k))
            continue;
        size_t len = 0;
        list[0] = '\0';
        for (int j = 0; j < NKEYS; j++)
            if (keys[j].sched & mask)
                len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0,
                                        "%s%s", len ? ", " : "", last_part(keys[j].path));
        problem(x, ZT_E_CONFIG, k, keys[k].path, "not a parameter of %s (DeepSpeed would fail "
                "on it too): remove it; %s takes %s", tname, tname, list);
    }
    s->scheduler = sp->type = t;
    sp->warmup_num_steps = GIVEN(K_WNUM) ? (int64_t)NUM(K_WNUM) : (int64_t)key_def(K_WNUM);
    if (sp->warmup_num_steps < 2 && GIVEN(K_WNUM))
        note(x, ZT_LOG_WARN, keys[K_WNUM].path, "%lld acts as 2 (DeepSpeed warms up over at "
             "least 2 steps): set 2, or remove the warmup with a constant lr",
             (long long)sp->warmup_num_steps);
    sp->warmup_log = !GIVEN(K_WTYPE) || NUM(K_WTYPE) == 0;
    if (t == ZT_SCHED_WARMUP_LR || t == ZT_SCHED_WARMUP_DECAY_LR) {
        sp->min_lr = resolve_num(x, K_WMIN_LR, 0.0, "Hugging Face's value");
        if (GIVEN(K_WMAX_LR))
            sp->max_lr = NUM(K_WMAX_LR);
        else if (AUTO(K_WMAX_LR) || t == ZT_SCHED_WARMUP_LR) {
            sp->max_lr = lr;
            if (AUTO(K_WMAX_LR))
                note(x, ZT_LOG_INFO, keys[K_WMAX_LR].path, "\"auto\" -> %s "
                     "(optimizer.params.lr)", fmt_num(lr, a, sizeof a));
        } else {
            sp->max_lr = 0.001; /* WarmupDecayLR's own default in DeepSpeed */
            if (lr != 0.001)
                note(x, ZT_LOG_WARN, keys[K_WMAX_LR].path, "not given: WarmupDecayLR peaks "
                     "at DeepSpeed's default 0.001, not at optimizer.params.lr %s: set it (or "
                     "\"auto\") to choose", fmt_num(lr, a, sizeof a));
        }
    } else {
        sp->warmup_min_ratio = GIVEN(K_WMIN_RATIO) ? NUM(K_WMIN_RATIO) : key_def(K_WMIN_RATIO);
        sp->cos_min_ratio = GIVEN(K_COS_MIN_RATIO) ? NUM(K_COS_MIN_RATIO)
                                                   : key_def(K_COS_MIN_RATIO);
    }
    if (t != ZT_SCHED_WARMUP_LR) {
        const char *tp = keys[K_TOTAL].path;
        if (GIVEN(K_TOTAL)) {
            sp->total_num_steps = (int64_t)NUM(K_TOTAL);
            if (total_steps > 0 && total_steps != sp->total_num_steps)
                note(x, ZT_LOG_WARN, tp, "%lld, but this run has %lld steps: the schedule "
                     "will %s; set \"auto\" to use the run's length", (long long)
                     sp->total_num_steps, (long long)total_steps,
                     total_steps < sp->total_num_steps ? "stop before its end"
                                                       : "stay at its final lr after its end");
        } else if (AUTO(K_TOTAL)) {
            if (total_steps > 0) {
                sp->total_num_steps = total_steps;
                note(x, ZT_LOG_INFO, tp, "\"auto\" -> %lld (the run's total steps)",
                     (long long)total_steps);
            } else {
                problem(x, ZT_E_CONFIG, K_TOTAL, tp, "\"auto\" needs the run's total number "
                        "of optimizer steps, which the caller did not give: set a number");
            }
        } else if (!BAD(K_TOTAL)) {
            problem(x, ZT_E_CONFIG, K_TOTAL, tp, "missing: %s needs it (DeepSpeed has no "
                    "default)%s", tname, total_steps > 0 ? "; \"auto\" uses the run's length" : "");
        }
        int64_t w = sp->warmup_num_steps < 2 ? 2 : sp->warmup_num_steps;
        if (sp->total_num_steps > 0 && sp->total_num_steps < w && !BAD(K_WNUM))
            note(x, ZT_LOG_WARN, tp, "%s is less than warmup_num_steps %s: the lr %s", fmt_num(
                 (double)sp->total_num_steps, a, sizeof a), fmt_num((double)w, b, sizeof b),
                 t == ZT_SCHED_WARMUP_DECAY_LR ? "drops to its end value right after the warmup"
                                               : "stays at cos_min_ratio after the warmup");
    }
    s->warmup_min_lr = sp->min_lr;
    s->warmup_max_lr = sp->max_lr;
    s->warmup_min_ratio = sp->warmup_min_ratio;
    s->cos_min_ratio = sp->cos_min_ratio;
    s->warmup_num_steps = sp->warmup_num_steps;
    s->total_num_steps = sp->total_num_steps;
    s->warmup_log = sp->warmup_log;
}

#define NVME_PATH_SIZE sizeof(((zt_train_settings *)0)->nvme_path)

static zt_offload_device resolve_offload(ctx *x, int sect, int dev, int nvme, int min_stage,
                                         int stage, const char *why)
{
    zt_offload_device d = GIVEN(dev) ? (zt_offload_device)NUM(dev) : ZT_OFFLOAD_NONE;
    if (d == ZT_OFFLOAD_NVME && !GIVEN(nvme) && !BAD(nvme))
        problem(x, ZT_E_CONFIG, nvme, keys[nvme].path, "missing: device \"nvme\" needs the "
                "folder on the NVMe drive");
    if (GIVEN(nvme) && strlen(x->v[nvme].node->valuestring) >= NVME_PATH_SIZE)
        problem(x, ZT_E_CONFIG, nvme, keys[nvme].path, "longer than %zu bytes",
                NVME_PATH_SIZE - 1);
    if (d != ZT_OFFLOAD_NONE && stage < min_stage) {
        note(x, ZT_LOG_WARN, keys[sect].path, "ignored with stage %d (%s): set "
             "zero_optimization.stage to %s, or remove it", stage, why,
             min_stage == 3 ? "3" : "1 or more");
        d = ZT_OFFLOAD_NONE;
    }
    return d;
}

/* DeepSpeed's deprecated cpu_offload / cpu_offload_param: true is device "cpu" of the section
 * that replaced it (DeepSpeedZeroConfig's new_param_fn), false none; both given is an error,
 * as pydantic's deprecated-field check makes it in DeepSpeed */
static zt_offload_device legacy_offload(ctx *x, int k, int sect, zt_offload_device d,
                                        int min_stage, int stage)
{
    if (!GIVEN(k))
        return d;
    const char *name = strrchr(keys[sect].path, '.') + 1;
    if (GIVEN(sect)) {
        problem(x, ZT_E_CONFIG, k, keys[k].path, "deprecated DeepSpeed key given together with "
                "%s, which replaced it: remove it", name);
        return d;
    }
    note(x, ZT_LOG_WARN, keys[k].path, "deprecated DeepSpeed key, read as DeepSpeed reads it: "
         "\"%s\": {\"device\": \"%s\"} (write that instead)", name, NUM(k) ? "cpu" : "none");
    if (!NUM(k))
        return ZT_OFFLOAD_NONE;
    if (stage < min_stage) {
        note(x, ZT_LOG_WARN, keys[k].path, "ignored with stage %d: set zero_optimization.stage "
             "to %s, or remove it", stage, min_stage == 3 ? "3" : "1 or more");
        return ZT_OFFLOAD_NONE;
    }
    return ZT_OFFLOAD_CPU;
}

static void resolve_zero(ctx *x, zt_train_settings *s)
{
    s->zero_stage = (int)NUM_OR_DEF(K_STAGE);
    s->overlap_comm = GIVEN(K_OVERLAP) ? (int)NUM(K_OVERLAP) : -1;
    {
        double rb = NUM_OR_DEF(K_REDUCE_BUCKET), ab = NUM_OR_DEF(K_ALLGATHER_BUCKET);
        /* 0 means "no cap" for either; otherwise the smaller one caps both */
        s->bucket_size = (size_t)(rb == 0 ? ab : ab == 0 ? rb : rb < ab ? rb : ab);
    }
    s->prefetch_size = (size_t)NUM_OR_DEF(K_PREFETCH_BUCKET);
    s->persist_threshold = (size_t)NUM_OR_DEF(K_PERSIST);
    s->max_live = (size_t)NUM_OR_DEF(K_MAX_LIVE);
    s->offload_optimizer = resolve_offload(x, K_OFFOPT, K_OFFOPT_DEVICE, K_OFFOPT_NVME, 1,
                                           s->zero_stage, "DeepSpeed offloads the optimizer "
                                           "state with ZeRO stages 1 to 3");
    s->offload_param = resolve_offload(x, K_OFFPAR, K_OFFPAR_DEVICE, K_OFFPAR_NVME, 3,
                                       s->zero_stage, "DeepSpeed offloads parameters with ZeRO "
                                       "stage 3 only");
    s->offload_optimizer = legacy_offload(x, K_CPU_OFFLOAD, K_OFFOPT, s->offload_optimizer, 1,
                                          s->zero_stage);
    s->offload_param = legacy_offload(x, K_CPU_OFFLOAD_PARAM, K_OFFPAR, s->offload_param, 3,
                                      s->zero_stage);
    if (GIVEN(K_CPU_OFFLOAD_PIN))
        note(x, ZT_LOG_WARN, keys[K_CPU_OFFLOAD_PIN].path, "deprecated DeepSpeed key (pin_memory "
             "of offload_optimizer and offload_param replaced it); nothing to pin here");
    const char *po = GIVEN(K_OFFOPT_NVME) ? x->v[K_OFFOPT_NVME].node->valuestring : NULL;
    const char *pp = GIVEN(K_OFFPAR_NVME) ? x->v[K_OFFPAR_NVME].node->valuestring : NULL;
    if (s->offload_optimizer == ZT_OFFLOAD_NVME && s->offload_param == ZT_OFFLOAD_NVME && po &&
        pp && strcmp(po, pp))
        problem(x, ZT_E_UNSUPPORTED, K_OFFPAR_NVME, keys[K_OFFPAR_NVME].path, "differs from "
                "offload_optimizer.nvme_path; zerotrain keeps both in one folder: give the "
                "same path");
    /* the folder of nvme offload; with zerotrain.memory_limit a folder given without a
     * device is where the planner may put state, and with cpu_checkpointing where the
     * checkpoints go */
    const char *path = s->offload_optimizer == ZT_OFFLOAD_NVME ? po
                       : s->offload_param == ZT_OFFLOAD_NVME ? pp
                       : GIVEN(K_ZT_MEMLIMIT) || (GIVEN(K_AC_CPU) && NUM(K_AC_CPU) != 0)
                           ? (po ? po : pp) : NULL;
    if (path && strlen(path) < sizeof s->nvme_path)
        snprintf(s->nvme_path, sizeof s->nvme_path, "%s", path);
    if (GIVEN(K_AIO_INTRA) && GIVEN(K_AIO_THREADS) && NUM(K_AIO_INTRA) != NUM(K_AIO_THREADS))
        problem(x, ZT_E_CONFIG, K_AIO_THREADS, keys[K_AIO_THREADS].path, "differs from "
                "aio.intra_op_parallelism (it is the older name of the same setting): keep one");
    s->activation_checkpointing = GIVEN(K_AC);
    if (GIVEN(K_AC_PARTITION) && NUM(K_AC_PARTITION) != 0)
        problem(x, ZT_E_UNSUPPORTED, K_AC_PARTITION, keys[K_AC_PARTITION].path, "partitions "
                "activations across model-parallel ranks, and zerotrain has no model "
                "parallelism: set it to false (zerotrain.recompute chooses recomputation)");
    s->offload_buffers = (int)NUM_OR_DEF(K_OFFOPT_BUFCOUNT);
    s->aio_queue_depth = (int)NUM_OR_DEF(K_AIO_QDEPTH);
    s->aio_threads = (int)(GIVEN(K_AIO_THREADS) ? NUM(K_AIO_THREADS) : NUM_OR_DEF(K_AIO_INTRA));
    s->aio_single_submit = (int)NUM_OR_DEF(K_AIO_SINGLE);
    s->aio_overlap_events = (int)NUM_OR_DEF(K_AIO_OVERLAP);
    s->aio_block_size = (size_t)NUM_OR_DEF(K_AIO_BLOCK);
    s->sub_group_size = (size_t)NUM_OR_DEF(K_SUB_GROUP);
    s->offload_param_buffers = (int)NUM_OR_DEF(K_OFFPAR_BUFCOUNT);
    s->offload_param_buffer_size = GIVEN(K_OFFPAR_BUFSIZE) ? (size_t)NUM(K_OFFPAR_BUFSIZE) : 0;
    s->offload_param_max_in_cpu = GIVEN(K_OFFPAR_MAXCPU) ? (size_t)NUM(K_OFFPAR_MAXCPU) : 0;
    if (GIVEN(K_AIO_BLOCK) && (size_t)NUM(K_AIO_BLOCK) % 4096)
        problem(x, ZT_E_CONFIG, K_AIO_BLOCK, keys[K_AIO_BLOCK].path, "%.0f is not a multiple "
                "of 4096 (direct I/O moves whole 4096-byte blocks)", NUM(K_AIO_BLOCK));
}

/* fp16.enabled, bf16.enabled (or its older name): DeepSpeed's rule, at most one of them */
static void resolve_precision(ctx *x, zt_train_settings *s)
{
    static const int k3[] = {K_FP16_ON, K_BF16_ON, K_BFLOAT16_ON};
    for (int i = 0; i < 3; i++)
        if (AUTO(k3[i]))
            note(x, ZT_LOG_INFO, keys[k3[i]].path, "\"auto\" -> false (the Hugging Face "
                 "Trainer's fp16 and bf16 defaults)");
    int fp16 = GIVEN(K_FP16_ON) && NUM(K_FP16_ON) == 1;
    /* DeepSpeed reads "bf16" first and its older name only without it */
    int bf16 = GIVEN(K_BF16_ON) ? NUM(K_BF16_ON) == 1
                                : GIVEN(K_BFLOAT16_ON) && NUM(K_BFLOAT16_ON) == 1;
    s->precision = bf16 ? ZT_PREC_BF16 : fp16 ? ZT_PREC_FP16 : ZT_PREC_FP32;
    if (fp16 && bf16)
        problem(x, ZT_E_CONFIG, K_FP16_ON, keys[K_FP16_ON].path, "fp16 and bf16 are both "
                "enabled: enable one of them");
    if (GIVEN(K_FP16_MASTER) && NUM(K_FP16_MASTER) == 1)
        problem(x, ZT_E_UNSUPPORTED, K_FP16_MASTER, keys[K_FP16_MASTER].path, "true is not "
                "supported: zerotrain keeps an fp32 master (DeepSpeed's default, false)");
    /* the fp16 section's scaling (read whether or not fp16 is enabled: DeepSpeed ignores it
     * then, and so does the engine) */
    s->loss_scale = NUM_OR_DEF(K_FP16_LS);
    s->initial_scale_power = (int)NUM_OR_DEF(K_FP16_POWER);
    s->loss_scale_window = (int)NUM_OR_DEF(K_FP16_WINDOW);
    s->hysteresis = (int)NUM_OR_DEF(K_FP16_HYST);
    s->consecutive_hysteresis = (int)NUM_OR_DEF(K_FP16_CONSEC);
    s->min_loss_scale = NUM_OR_DEF(K_FP16_MIN);
    /* data_types.grad_accum_dtype: fp32, bf16, fp16 and DeepSpeed's other spellings */
    s->grad_accum_dtype = ZT_GRAD_AUTO;
    if (GIVEN(K_GRAD_ACCUM)) {
        static const int g[] = {ZT_GRAD_FP32, ZT_GRAD_BF16, ZT_GRAD_FP16, ZT_GRAD_FP32,
                                ZT_GRAD_BF16, ZT_GRAD_FP16, ZT_GRAD_FP32, ZT_GRAD_FP16};
        s->grad_accum_dtype = g[(int)NUM(K_GRAD_ACCUM)];
    }
    s->comm_dtype = ZT_GRAD_AUTO; /* communication_data_type: the same spellings */
    if (GIVEN(K_COMM_DTYPE)) {
        static const int g[] = {ZT_GRAD_FP32, ZT_GRAD_BF16, ZT_GRAD_FP16, ZT_GRAD_FP32,
                                ZT_GRAD_BF16, ZT_GRAD_FP16, ZT_GRAD_FP32, ZT_GRAD_FP16};
        s->comm_dtype = g[(int)NUM(K_COMM_DTYPE)];
    }
}

static void resolve(ctx *x, int world, int64_t total_steps, resolved *r)
{
    zt_train_settings *s = &r->s;
    double lr;
    memset(r, 0, sizeof *r);
    resolve_batch(x, world, s);
    resolve_optimizer(x, s, &lr);
    s->steps_per_print = GIVEN(K_STEPS_PER_PRINT) ? (int)NUM(K_STEPS_PER_PRINT)
                                                  : (int)key_def(K_STEPS_PER_PRINT);
    resolve_scheduler(x, total_steps, lr, s, &r->sp);
    resolve_zero(x, s);
    resolve_precision(x, s);

    s->seed = (uint64_t)key_def(K_ZT_SEED);
    if (GIVEN(K_ZT_SEED) && GIVEN(K_SEED_TOP) && x->v[K_ZT_SEED].u64 != x->v[K_SEED_TOP].u64)
        problem(x, ZT_E_CONFIG, K_SEED_TOP, keys[K_SEED_TOP].path, "%llu differs from "
                "zerotrain.seed %llu: keep one", (unsigned long long)x->v[K_SEED_TOP].u64,
                (unsigned long long)x->v[K_ZT_SEED].u64);
    if (GIVEN(K_ZT_SEED) || GIVEN(K_SEED_TOP)) {
        s->seed = x->v[GIVEN(K_ZT_SEED) ? K_ZT_SEED : K_SEED_TOP].u64;
        s->seed_given = 1;
    }
    s->threads = (int)NUM_OR_DEF(K_ZT_THREADS);
    if (GIVEN(K_CONTIG_GRADS) && !NUM(K_CONTIG_GRADS))
        note(x, ZT_LOG_WARN, keys[K_CONTIG_GRADS].path, "false has no effect: gradients always "
             "live in zerotrain's contiguous per-unit buffers");
    if (GIVEN(K_REDUCE_SCATTER) && !NUM(K_REDUCE_SCATTER))
        note(x, ZT_LOG_WARN, keys[K_REDUCE_SCATTER].path, "false has no effect: zerotrain always "
             "reduce-scatters gradients");
    if (GIVEN(K_ALLGATHER_PART) && !NUM(K_ALLGATHER_PART))
        note(x, ZT_LOG_WARN, keys[K_ALLGATHER_PART].path, "false has no effect: zerotrain always "
             "all-gathers updated parameters");
    s->collective_timeout = GIVEN(K_ZT_COLL_TIMEOUT) ? NUM(K_ZT_COLL_TIMEOUT)
                                                     : key_def(K_ZT_COLL_TIMEOUT);
    s->check_collectives = (int)NUM_OR_DEF(K_ZT_CHECK_COLL);
    s->comm_progress = GIVEN(K_ZT_PROGRESS) ? (int)NUM(K_ZT_PROGRESS) : 0;
    s->recompute = ZT_RECOMPUTE_NONE;
    if (GIVEN(K_ZT_RECOMPUTE)) {
        const char *v = x->v[K_ZT_RECOMPUTE].node->valuestring;
        static const char *modes[] = {"none", "full", "selective"};
        char *end;
        int found = 0;
        for (int i = 0; i < 3; i++)
            if (!strcmp(v, modes[i])) {
                s->recompute = i;
                found = 1;
            }
        if (!strcmp(v, "auto")) {
            s->recompute = ZT_RECOMPUTE_AUTO;
            found = 1;
            if (!GIVEN(K_ZT_MEMLIMIT))
                problem(x, ZT_E_CONFIG, K_ZT_RECOMPUTE, keys[K_ZT_RECOMPUTE].path, "\"auto\" "
                        "plans recomputation to fit zerotrain.memory_limit: set the limit, or "
                        "choose a mode");
        } else if (!strncmp(v, "every-k:", 8)) {
            long k = strtol(v + 8, &end, 10);
            if (end == v + 8 || *end || k < 1 || k > 100000)
                problem(x, ZT_E_CONFIG, K_ZT_RECOMPUTE, keys[K_ZT_RECOMPUTE].path, "\"%s\": "
                        "K in \"every-k:K\" must be a whole number from 1", v);
            s->recompute = ZT_RECOMPUTE_EVERY_K;
            s->recompute_k = (int)k;
            found = 1;
        }
        if (!found)
            problem(x, ZT_E_CONFIG, K_ZT_RECOMPUTE, keys[K_ZT_RECOMPUTE].path, "\"%s\" is not a "
                    "mode: use \"none\", \"full\", \"selective\", \"every-k:K\" (K a whole "
                    "number) or \"auto\"", v);
    }
    s->offload_checkpoints = GIVEN(K_AC_CPU) && NUM(K_AC_CPU) != 0;
    s->number_checkpoints = GIVEN(K_AC_NUMBER) ? (int)NUM(K_AC_NUMBER) : 0;
    s->recompute_profile = GIVEN(K_AC_PROFILE) && NUM(K_AC_PROFILE) != 0;
    if (s->offload_checkpoints && s->recompute != ZT_RECOMPUTE_FULL &&
        s->recompute != ZT_RECOMPUTE_EVERY_K)
        problem(x, ZT_E_CONFIG, K_AC_CPU, keys[K_AC_CPU].path, "offloads the layer inputs that "
                "zerotrain.recompute \"full\" or \"every-k:K\" keeps; with \"%s\" there are "
                "none: set one of those, or false",
                s->recompute == ZT_RECOMPUTE_AUTO ? "auto (it plans offload itself)"
                : s->recompute == ZT_RECOMPUTE_SELECTIVE ? "selective" : "none");
    if (s->number_checkpoints && s->recompute != ZT_RECOMPUTE_FULL)
        problem(x, ZT_E_CONFIG, K_AC_NUMBER, keys[K_AC_NUMBER].path, "sets how many layer inputs "
                "zerotrain.recompute \"full\" keeps (segments of ceil(layers / n)): set "
                "\"recompute\": \"full\", or use \"every-k:K\" directly");
    s->direct_io = !GIVEN(K_ZT_DIRECT) ? 0 : NUM(K_ZT_DIRECT) == 1 ? 1 : NUM(K_ZT_DIRECT) == 2 ? -1 : 0;
    s->memory_limit = GIVEN(K_ZT_MEMLIMIT) ? (size_t)NUM(K_ZT_MEMLIMIT) : 0;
    s->offload_gradients = !GIVEN(K_ZT_OFFGRAD) ? 0 : NUM(K_ZT_OFFGRAD) != 0 ? 1 : -1;
    r->no_decay = GIVEN(K_ZT_NO_DECAY) ? x->v[K_ZT_NO_DECAY].node : NULL;
    s->n_no_decay = r->no_decay ? cJSON_GetArraySize(r->no_decay) : -1;
    s->skip_nonfinite = GIVEN(K_ZT_SKIP_NONFINITE) ? (int)NUM(K_ZT_SKIP_NONFINITE)
                                                   : (int)key_def(K_ZT_SKIP_NONFINITE);
    s->max_skipped_steps = GIVEN(K_ZT_MAX_SKIPPED) ? (int)NUM(K_ZT_MAX_SKIPPED)
                                                   : (int)key_def(K_ZT_MAX_SKIPPED);
    s->electra_generator_size = (float)NUM_OR_DEF(K_ZT_ELECTRA_GEN);
    r->fp32_state = GIVEN(K_ZT_FP32_STATE) ? x->v[K_ZT_FP32_STATE].node : NULL;
    s->n_fp32_state = r->fp32_state ? cJSON_GetArraySize(r->fp32_state) : -1;
    if (r->fp32_state && s->optimizer != ZT_OPT_ADAMW8BIT)
        note(x, ZT_LOG_WARN, keys[K_ZT_FP32_STATE].path, "has no effect: only AdamW8bit keeps "
             "some state in 8 bits");
}

/* ---- the public API ------------------------------------------------------------------- */

static void emit_notes(const char *notes)
{
    char line[ZT_ERRMSG_MAX];
    for (const char *p = notes; *p;) {
        size_t len = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(len - 1), p + 1);
        zt_log(*p == 'I' ? ZT_LOG_INFO : ZT_LOG_WARN, "%s", line);
        p += len + (p[len] == '\n');
    }
}

int zt_train_config_parse(const char *json, const char *source, int world_size,
                          int64_t total_steps, zt_train_config **out)
{
    const char *end = NULL, *src = source ? source : "config";
    cJSON *root = NULL;
    ctx xs, *x = &xs; /* on the stack: nothing is allocated but the JSON tree until valid */
    resolved r;
    int rc = 0;

    if (out)
        *out = NULL;
    if (!json || !out || world_size < 1 || total_steps < 0)
        return zt_fail(ZT_E_INVAL, "zt_train_config_parse: %s",
                       !json || !out ? "json and out must not be NULL"
                       : world_size < 1 ? "world_size must be >= 1" : "total_steps must be >= 0");
    if (!strncmp(json, "\xEF\xBB\xBF", 3))
        json += 3; /* a UTF-8 byte-order mark, as some editors write */
    root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        int line = 1, col = 1;
        char near[40];
        for (const char *p = json; end && p < end && *p; p++)
            if (*p == '\n')
                line++, col = 1;
            else
                col++;
        snprintf(near, sizeof near, "%s", end && *end ? end : "end of text");
        for (char *p = near; *p; p++)
            if (*p == '\n' || *p == '\r' || *p == '\t')
                *p = ' ';
        return zt_fail(ZT_E_FORMAT, "%s:%d:%d: not valid JSON (near \"%.20s\")", src, line,
                       col, near);
    }
    if (!cJSON_IsObject(root)) {
        char got[120];
        rc = zt_fail(ZT_E_CONFIG, "%s: the config must be a JSON object ({...}), got %s", src,
                     describe(root, got, sizeof got));
        goto out;
    }
    memset(x, 0, sizeof *x);
    x->src = src;
    walk(x, root, "");
    resolve(x, world_size, total_steps, &r);
    if (x->n_err) {
        size_t len = x->err_len;
        if (x->n_dropped)
            snprintf(x->err + len, sizeof x->err - len, "\n%s: ... and %d more problems", src,
                     x->n_dropped);
        rc = zt_fail(x->n_config ? ZT_E_CONFIG : ZT_E_UNSUPPORTED, "%s", x->err);
        goto out;
    }

    /* valid: one allocation for the config and the no_decay and fp32_state patterns */
    size_t size = sizeof(zt_train_config), n_nd = r.s.n_no_decay > 0 ? (size_t)r.s.n_no_decay : 0;
    size_t n_fs = r.s.n_fp32_state > 0 ? (size_t)r.s.n_fp32_state : 0;
    const cJSON *e;
    size += (n_nd + n_fs) * sizeof(char *);
    if (r.no_decay)
        cJSON_ArrayForEach(e, r.no_decay) size += strlen(e->valuestring) + 1;
    if (r.fp32_state)
        cJSON_ArrayForEach(e, r.fp32_state) size += strlen(e->valuestring) + 1;
    zt_train_config *c = calloc(1, size);
    if (!c) {
        rc = zt_fail(ZT_E_NOMEM, "%s: out of memory", src);
        goto out;
    }
    c->s = r.s;
    c->sp = r.sp;
    c->no_decay = (char **)(c + 1);
    c->fp32_state = c->no_decay + n_nd;
    char *p = (char *)(c->fp32_state + n_fs);
    int i = 0;
    if (r.no_decay)
        cJSON_ArrayForEach(e, r.no_decay) {
            size_t len = strlen(e->valuestring) + 1;
            c->no_decay[i++] = memcpy(p, e->valuestring, len);
            p += len;
        }
    i = 0;
    if (r.fp32_state)
        cJSON_ArrayForEach(e, r.fp32_state) {
            size_t len = strlen(e->valuestring) + 1;
            c->fp32_state[i++] = memcpy(p, e->valuestring, len);
            p += len;
        }
    emit_notes(x->note);
    *out = c;
out:
    cJSON_Delete(root);
    return rc;
}

int zt_train_config_load(const char *path, int world_size, int64_t total_steps,
                         zt_train_config **out)
{
    char *text = NULL;
    size_t n = 0;
    int rc;
    if (out)
        *out = NULL;
    if (!path)
        return zt_fail(ZT_E_INVAL, "zt_train_config_load: path must not be NULL");
    if ((rc = zt_file_read_all(path, 16u << 20, &text, &n)) < 0) {
        char why[1024]; /* (the reader's message names the path, and why: a FIFO, too large) */
        snprintf(why, sizeof why, "%s", zt_last_error());
        return rc == ZT_E_FORMAT ? zt_fail(ZT_E_CONFIG, "%s", why) : rc;
    }
    if (strlen(text) != n)
        rc = zt_fail(ZT_E_FORMAT, "%s: contains a NUL byte at offset %zu (not a text file)",
                     path, strlen(text));
    else
        rc = zt_train_config_parse(text, path, world_size, total_steps, out);
    free(text);
    return rc;
}

void zt_train_config_destroy(zt_train_config *c)
{
    free(c);
}

const zt_train_settings *zt_train_config_settings(const zt_train_config *c)
{
    return c ? &c->s : NULL;
}

const char *zt_train_config_no_decay(const zt_train_config *c, int i)
{
    return c && i >= 0 && i < c->s.n_no_decay ? c->no_decay[i] : NULL;
}

const char *zt_train_config_fp32_state(const zt_train_config *c, int i)
{
    return c && i >= 0 && i < c->s.n_fp32_state ? c->fp32_state[i] : NULL;
}

double zt_train_config_lr(const zt_train_config *c, int64_t step)
{
    return c ? zt_sched_lr(&c->sp, step) : 0.0;
}

/* Each field of the list that a JSON key sets, from its resolved value (the folder and the
 * pattern arrays borrowed from c). */
int zt_train_config_apply(const zt_train_config *c, zt_config *cfg)
{
    if (!c || !cfg)
        return zt_fail(ZT_E_INVAL, "zt_train_config_apply: c and cfg must not be NULL");
    for (int i = 0; i < zt_cfg_n_fields; i++) {
        const zt_cfg_field *f = &zt_cfg_fields[i];
        const char *src = (const char *)c + f->from;
        char *dst = (char *)cfg + f->off;
        if (f->from == ZT_CF_NO_SETTING)
            continue;
        if (f->type == ZT_CF_STR) /* nvme_path: the settings hold the folder */
            *(const char **)dst = src;
        else if (f->type == ZT_CF_PATTERNS)
            *(const char *const **)dst = (const char *const *)*(char **const *)src;
        else
            memcpy(dst, src, f->size);
    }
    return 0;
}

/* ---- the reference (docs/config.md) --------------------------------------------------- */

static char ref[96 * 1024];
static size_t ref_len;
static pthread_once_t ref_once = PTHREAD_ONCE_INIT;

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ref + ref_len, sizeof ref - ref_len, fmt, ap);
    va_end(ap);
    assert(n >= 0 && (size_t)n < sizeof ref - ref_len); /* grow ref[] if this fires */
    ref_len += (size_t)n;
}

static const char *doc_type(const key *r)
{
    switch (r->type) {
    case T_OBJ: return (r->flags & F_NULL) ? "object or null" : "object";
    case T_BOOL: return "boolean";
    case T_INT: return (r->flags & F_NULL) ? "integer or null" : "integer";
    case T_NUM: return "number";
    case T_STR: return (r->flags & F_NULL) ? "string or null" : "string";
    case T_ENUM: return "string";
    case T_BETAS: return "[number, number]";
    case T_EPS: return "number or [number, number]";
    case T_STRS: return "array of strings";
    case T_SEED: return "integer or digit string";
    default: return "any";
    }
}

static const char *doc_default(const key *r, char *buf, size_t size)
{
    double def = key_def((int)(r - keys));
    if (r->def_doc)
        return r->def_doc;
    switch (r->type) {
    case T_BOOL: return def ? "true" : "false";
    case T_INT: case T_NUM: case T_SEED: return fmt_num(def, buf, size);
    default: return "";
    }
}

static const char *doc_allowed(const key *r, char *buf, size_t size)
{
    char a[40], b[40], list[300];
    buf[0] = '\0';
    if (r->type == T_ENUM) {
        snprintf(buf, size, "%s%s", quoted_list(r->values, list, sizeof list),
                 (r->flags & F_NOCASE) ? " (any case)" : "");
    } else if (r->type == T_INT || r->type == T_NUM || r->type == T_BETAS || r->type == T_EPS) {
        fmt_num(r->lo, a, sizeof a);
        fmt_num(r->hi, b, sizeof b);
        if (r->lo == r->hi)
            snprintf(buf, size, "%s only", a);
        else if (isinf(r->hi) || r->hi >= IMAX)
            snprintf(buf, size, ">= %s", a);
        else if (isinf(r->lo))
            snprintf(buf, size, "%s %s", (r->flags & F_HI_OPEN) ? "<" : "<=", b);
        else if (r->type == T_INT)
            snprintf(buf, size, "%s to %s", a, b);
        else
            snprintf(buf, size, "%s[%s, %s%c", r->type == T_BETAS ? "each in " : "", a, b,
                     (r->flags & F_HI_OPEN) ? ')' : ']');
    } else if (r->type == T_SEED) {
        snprintf(buf, size, "0 to 2^64-1");
    }
    return buf;
}

static const char *doc_auto(const key *r, char *buf, size_t size)
{
    char d[40];
    switch (r->autom) {
    case A_DEFAULT:
        snprintf(buf, size, "%s", r->auto_doc ? r->auto_doc : doc_default(r, d, sizeof d));
        return buf;
    case A_DERIVED: return r->auto_doc;
    case A_NEVER: snprintf(buf, size, "error: %s", r->auto_doc); return buf;
    default: return "no";
    }
}

/* The zt_config fields row k sets: "`a`, `b`", or "" */
static const char *doc_fields(int k, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < zt_cfg_n_fields; i++)
        if (zt_cfg_fields[i].key == k || zt_cfg_fields[i].key2 == k)
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s`%s`",
                                    len ? ", " : "", zt_cfg_fields[i].name);
    return buf;
}

static const char *group_of(const char *path, char *buf, size_t size)
{
    size_t len = strcspn(path, ".");
    if (!path[len] && keys[find_row("", path)].type != T_OBJ)
        return "";
    if (!strncmp(path, "fp16", len) || !strncmp(path, "bf16", len) ||
        !strncmp(path, "bfloat16", len))
        return "precision";
    snprintf(buf, size, "%.*s", (int)len, path);
    return buf;
}

/* The table of every zt_config field: what a library user sets by name. */
static void reference_fields(void)
{
    static const char *const ctype[] = {"int", "size_t", "uint64_t", "float", "double",
                                        "const char *", "int (by name)",
                                        "const char *const *"};
    char d1[200], d2[200];
    put("\n## zt_config fields\n\n"
        "Every field of `zt_config` (include/zerotrain.h) by the name `zt_config_set`, "
        "`zt_config_get` and `zt_config_key` use, with `zt_config_init`'s default. "
        "`zt_train_config_apply` sets each field from the JSON key in the fourth column (of a "
        "parsed config); the fields without one are set by the program (`zerotrain train`: "
        "from its options and the data). Where the two defaults differ, the library's is "
        "the one of this table (lr, weight_decay, skip_nonfinite, ...), the config file's "
        "the one of its key above. Integers are set in decimal, enumerations by the name of "
        "their value, strings are borrowed like the struct's own; the pattern arrays are set "
        "in C or from the JSON config only (zt_config_set refuses them).\n\n"
        "| Field | C type | Default | Values | JSON key | Description |\n"
        "|---|---|---|---|---|---|\n");
    for (int i = 0; i < zt_cfg_n_fields; i++) {
        const zt_cfg_field *f = &zt_cfg_fields[i];
        size_t len = 0;
        d2[0] = '\0';
        if (f->type == ZT_CF_ENUM)
            for (int v = 0; f->names[v]; v++)
                len += (size_t)snprintf(d2 + len, len < sizeof d2 ? sizeof d2 - len : 0,
                                        "%s\"%s\"", v ? ", " : "", f->names[v]);
        else if (f->flags & ZT_CF_NONE_IS_0)
            snprintf(d2, sizeof d2, "\"none\" = 0 (no lr)");
        if (f->type == ZT_CF_STR || f->type == ZT_CF_PATTERNS)
            snprintf(d1, sizeof d1, "NULL");
        else if (f->type == ZT_CF_ENUM)
            snprintf(d1, sizeof d1, "\"%s\"", f->names[(int)f->def]);
        else
            fmt_num(f->def, d1, sizeof d1);
        put("| `%s` | %s | %s | %s | ", f->name, ctype[f->type], d1, d2);
        if (f->key < 0)
            put("none");
        else if (f->key2 < 0)
            put("`%s`", keys[f->key].path);
        else
            put("`%s`, `%s`", keys[f->key].path, keys[f->key2].path);
        put(" | %s |\n", f->doc ? f->doc : "");
    }
}

static void build_reference(void)
{
    char prev[64] = "-", gbuf[64], d1[200], d2[400], d3[400], d4[200];
    put("# zerotrain training configuration\n\n"
        "<!-- Generated by zt_train_config_reference() from the key table and the zt_config "
        "field list in engine/config.c; regenerate with `make docs`. -->\n\n"
        "zerotrain reads a DeepSpeed JSON config (`zt_train_config_load`, "
        "`zt_train_config_parse`): the DeepSpeed keys that apply here, plus a `zerotrain` "
        "section of its own. Hugging Face Trainer's DeepSpeed configs load once the values "
        "only the Trainer can fill are given (the batch size, `warmup_num_steps`).\n\n"
        "- **Problems are reported together.** Unknown keys (at any depth, with a suggestion "
        "when a known key is close), wrong types, out-of-range values and inconsistent "
        "settings each give one line `<file>: <key path>: <problem>` of a single error. The "
        "error code is `ZT_E_UNSUPPORTED` when every problem is a valid DeepSpeed setting "
        "that zerotrain does not support (fp16, Adam without adam_w_mode, ...), "
        "`ZT_E_CONFIG` otherwise, and `ZT_E_FORMAT` when the text is not JSON.\n"
        "- **`\"auto\"`** (as Hugging Face Trainer writes it) is accepted where the "
        "`\"auto\"` column says what it becomes; resolved values are logged at "
        "`ZT_LOG_INFO`.\n"
        "- **DeepSpeed keys that do not apply** (last table) are accepted with a notice at "
        "`ZT_LOG_WARN` saying why, except when the value asks for nothing (see there).\n"
        "- **Status**: *applied* keys resolve into `zt_train_settings` for the trainer now; "
        "*validated* keys are checked now and acted on by the ZeRO, offload and recomputation "
        "work.\n"
        "- **zt_config**: the column names the `zt_config` fields a key sets "
        "(`zt_train_config_apply`), by the names `zt_config_set` takes; the last table lists "
        "every field, the ones no JSON key sets too (model_dir, ...).\n"
        "- **Learning rate**: `zt_train_config_lr(c, k)` is the lr of optimizer update k "
        "(k = 0 first) exactly as DeepSpeed's scheduler gives it (deepspeedai/DeepSpeed "
        "`deepspeed/runtime/lr_schedules.py` at commit 22779f2c): the engine steps the "
        "scheduler after each optimizer step, so update k uses `last_batch_iteration` k - 1 "
        "and update 0 runs at `warmup_min_lr` (WarmupLR, WarmupDecayLR) or at 0 "
        "(WarmupCosineLR). Without a `scheduler` section the lr is constant.\n");
    for (int k = 0; k < K_NAMED; k++) {
        const key *r = &keys[k];
        const char *g = group_of(r->path, gbuf, sizeof gbuf);
        if (strcmp(g, prev)) {
            snprintf(prev, sizeof prev, "%s", g);
            put("\n## %s\n\n", !*g ? "Top-level keys" : !strcmp(g, "precision")
                    ? "Precision (fp16, bf16)" : g);
            put("| Key | Type | Default | Allowed | `\"auto\"` | Status | zt_config | "
                "Description |\n|---|---|---|---|---|---|---|---|\n");
        }
        put("| `%s` | %s | %s | %s | %s | %s | %s | %s", r->path, doc_type(r),
            doc_default(r, d1, sizeof d1), doc_allowed(r, d2, sizeof d2),
            doc_auto(r, d3, sizeof d3), r->cls == C_APPLIED ? "applied" : "validated",
            doc_fields(k, d4, sizeof d4), r->doc);
        if (r->opt) {
            put(" Taken by");
            for (int t = 0, first = 1; t < OT_COUNT; t++)
                if (r->opt & OPT_BIT(t)) {
                    list_item(keys[K_OPT_TYPE].values, t, d1, sizeof d1);
                    put("%s %s", first ? "" : ",", d1);
                    first = 0;
                }
            put(".");
        }
        if (r->sched) {
            put(" Used by");
            for (int t = ZT_SCHED_WARMUP_LR, first = 1; t <= ZT_SCHED_WARMUP_COSINE_LR; t++)
                if (r->sched & SCHED_BIT(t)) {
                    list_item(keys[K_SCHED_TYPE].values, t - 1, d1, sizeof d1);
                    put("%s %s", first ? "" : ",", d1);
                    first = 0;
                }
            put(".");
        }
        put(" |\n");
    }
    put("\n## DeepSpeed keys that do not apply\n\n"
        "Silent for `null`, `false`, `{}`, an object with `\"enabled\"` false or `\"auto\"`, "
        "and the value in the second column; otherwise a notice. The keys marked *error* are "
        "rejected only when they are switched on (`true`, or `\"enabled\": true`).\n\n"
        "| Key | Also silent for | Otherwise |\n|---|---|---|\n");
    for (int k = K_NAMED; k < NKEYS; k++) {
        const key *r = &keys[k];
        char *end = NULL;
        if (r->quiet)
            strtod(r->quiet, &end);
        if (r->flags & F_QUIET)
            snprintf(d1, sizeof d1, "any value");
        else if (!r->quiet)
            d1[0] = '\0';
        else if (!strcmp(r->quiet, "true") || !*end)
            snprintf(d1, sizeof d1, "`%s`", r->quiet);
        else
            snprintf(d1, sizeof d1, "`\"%s\"`", r->quiet);
        if (r->cls == C_GATED)
            put("| `%s` | %s | error: %s |\n", r->path, d1, r->unsup_why);
        else
            put("| `%s` | %s | notice: ignored, %s |\n", r->path, d1, r->doc);
    }
    reference_fields();
}

const char *zt_train_config_reference(void)
{
    pthread_once(&ref_once, build_reference);
    return ref;
}
