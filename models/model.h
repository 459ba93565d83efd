/* model.h - what the engine knows about a model: its units and parameter table (the flat
 * per-unit layout), and a table of functions that run one unit forward or backward.
 * Models never allocate parameters or call MPI: the engine owns every unit buffer. */
#ifndef ZT_MODELS_MODEL_H
#define ZT_MODELS_MODEL_H

#include "../memory/mem.h"
#include <stddef.h>
#include <stdint.h>
#include "zerotrain.h"

#define ZT_PARAM_ALIGN 256     /* every parameter starts on a 256-float boundary */
#define ZT_NAME_MAX 112

typedef struct zt_param_def {
    char name[ZT_NAME_MAX];    /* Hugging Face name */
    char alias[ZT_NAME_MAX];   /* tied duplicate stored by some checkpoints, or "" */
    int unit;
    size_t offset;             /* floats from the start of the unit buffer */
    size_t numel;
    int ndim;
    int64_t shape[4];
    int init;                  /* ZT_INIT_* (zerotrain.h; normal: std, or the layout's) */
    int decay;                 /* 1 = weight decay applies by default */
    float std;                 /* ZT_INIT_NORMAL's standard deviation; 0 = the layout's */
    int embedding;             /* an embedding table (nn.Embedding in transformers): AdamW8bit
                                * keeps its state in fp32 by default, as the HF Trainer does */
    int head;                  /* a task head's: initialised (with a notice) when a checkpoint
                                * lacks it, as from_pretrained does */
    int64_t pad_row;           /* nn.Embedding's padding_idx: the row that starts at zero (HF's
                                * _init_weights); -1: none */
} zt_param_def;

typedef struct zt_unit_def {
    char name[48];
    size_t numel;              /* floats incl. alignment padding between parameters */
    int first_param, n_params; /* range in the parameter table */
} zt_unit_def;

/* another name a checkpoint may store a tied parameter under (matched on load, never
 * written; the param's own alias is the one reported and exported) */
typedef struct zt_alias {
    char name[ZT_NAME_MAX];
    int param;
} zt_alias;

typedef struct zt_layout {
    zt_param_def *params;
    int n_params;
    zt_alias *aliases;
    int n_aliases;
    zt_unit_def *units;
    int n_units;
    float init_std;
    char arch[48];             /* Hugging Face architecture, e.g. "BertForMaskedLM" */
    char head_desc[64];        /* what its head parameters are, for messages ("MLM-head") */
} zt_layout;

/* Appends a parameter to unit `unit` (the last unit added). Returns its index or < 0. */
int zt_layout_add_unit(zt_layout *l, const char *name);
int zt_layout_add_param(zt_layout *l, const char *name, int ndim, const int64_t *shape, int init,
                        int decay);
void zt_layout_free(zt_layout *l);
/* Adds a further tied name of parameter `param`. 0 or ZT_E_NOMEM. */
int zt_layout_add_alias(zt_layout *l, int param, const char *name);
/* Index of a parameter by name or alias (or a further tied name), or -1. */
int zt_layout_find(const zt_layout *l, const char *name);

/* Activations are carved from one arena: each piece 64-byte aligned. base NULL counts only
 * (off becomes the arena's bytes). */
typedef struct zt_carver {
    char *base;
    size_t off;
} zt_carver;

static inline void *zt_take(zt_carver *cv, size_t words)
{
    void *p = cv->base ? cv->base + cv->off : NULL;
    cv->off += (words * 4 + 63) / 64 * 64;
    return p;
}

/* What a unit keeps from its forward pass for its backward (its recomputation mode). */
enum {
    ZT_KEEP_ALL = 0,           /* everything (no recomputation) */
    ZT_KEEP_SELECTIVE,         /* the matrix-product outputs: attention core and GELU again */
    ZT_KEEP_OUTPUT,            /* its output only: its whole forward again ("full") */
    ZT_KEEP_OFFLOAD,           /* as OUTPUT, with the output in the offload store */
    ZT_KEEP_MODES,             /* (the training modes above) */
    ZT_KEEP_FORWARD = 7        /* forward only (inference): nothing kept for a backward pass,
                                * the layers share one working set and their outputs rotate
                                * through a few buffers; a model may keep more (T5: OUTPUT) */
};

enum { ZT_STEP_RECOMPUTE = 1, ZT_STEP_BACKWARD = 2 };
typedef struct zt_step {
    int op, unit;
} zt_step;

/* P[u], G[u]: parameter and gradient buffer of unit u. A unit's forward may read other
 * units' parameters (tied weights) and its backward may add into their gradients. The
 * parameters are in the dtype the model was created with (fp32, or bf16/fp16 bit patterns
 * in 2-byte elements: the half-precision compute copies); gradients are fp32. */
typedef struct zt_model_ops {
    /* Steps. The forward pass is a sequence of steps, each run by forward_unit with the
     * step's index; a step uses one unit's parameters (and its tied unit's). Most models
     * have one step per unit (step u is unit u: n_steps and step_unit NULL). A model whose
     * units serve several steps (ALBERT: one layer's parameters for every layer) gives
     * their count and each step's unit. Every "unit u" of a pass below (forward_unit,
     * backward_unit, recompute_unit, the modes of set_recompute / act_bytes,
     * recompute_flops / _bytes, backward_steps, checkpoint) is a step index; tied_unit,
     * P and G index units. */
    int (*n_steps)(const void *m);
    int (*step_unit)(const void *m, int s);
    /* Validates the batch and sizes activations. Counts labelled tokens. */
    int (*prepare)(void *m, const zt_batch *b, int keep_logits, int64_t *n_labels);
    void (*forward_unit)(void *m, int u, void *const *P);
    /* Loss over the batch; gradient of the logits scaled by grad_scale. */
    double (*loss)(void *m, float grad_scale);
    void (*backward_unit)(void *m, int u, void *const *P, float *const *G);
    const float *(*logits)(const void *m, int64_t shape[3]);
    /* The other unit whose parameters unit u's forward and backward also use (tied
     * weights), or -1. */
    int (*tied_unit)(const void *m, int u);
    /* train = 0 turns dropout off (evaluation), 1 restores the configured behaviour. */
    void (*set_train)(void *m, int train);
    /* fn(arg) is called between kernels (the engine lets its collectives advance). */
    void (*set_poll)(void *m, void (*fn)(void *), void *arg);
    /* Matrix-product FLOPs of a forward + backward of the last prepared batch. */
    double (*flops)(const void *m);
    /* Recomputation. Per unit u, mode[u] is what the unit keeps between the forward and
     * the backward pass (ZT_KEEP_*; units that cannot be recomputed ignore it); k >= 2
     * recomputes the ZT_KEEP_OUTPUT / _OFFLOAD layers in segments of k (only each
     * segment's last output is kept). Set before the next prepare; < 0 on a plan the
     * model cannot carry out. */
    int (*set_recompute)(void *m, const unsigned char *mode, int k);
    /* Activation bytes a training batch of B x T needs under a plan (mode NULL: the current
     * one): the memory planner's estimate, the same carving prepare does. */
    size_t (*act_bytes)(void *m, int B, int T, const unsigned char *mode, int k);
    /* Matrix-product FLOPs recomputing unit u in `mode` costs for a batch of B x T. */
    double (*recompute_flops)(const void *m, int B, int T, int u, int mode);
    /* The backward pass of the current plan as steps (at most 3 x units): ZT_STEP_RECOMPUTE
     * u (what unit u did not keep, again; its output buffer is written again with the same
     * bits) and ZT_STEP_BACKWARD u. Unit u's steps and its forward read unit u - 1's
     * output. Dropout masks replay from their Philox keys: the gradients are the same
     * bits as keeping everything. */
    int (*backward_steps)(const void *m, zt_step *steps);
    void (*recompute_unit)(void *m, int u, void *const *P);
    /* Bytes the last recompute_unit(u) wrote (the profile). */
    size_t (*recompute_bytes)(const void *m, int u);
    /* ZT_KEEP_OFFLOAD units: the buffer of unit u's output (which the engine may write to
     * the offload store once the next unit's forward read it, and must read back before a
     * step reads it again) and its bytes (capacity: fixed until the next prepare that
     * re-carves). Several units' outputs share a buffer: a forward or recompute of unit u
     * overwrites what checkpoint(u) held. NULL for the other units. */
    void *(*checkpoint)(void *m, int u, size_t *bytes);
    /* Generation with a key/value cache (encoder-decoder models; NULL for the others). Each
     * pass is a forward pass over every unit, as an evaluation's. gen_begin: the next pass
     * encodes b (B rows) and decodes position 0 of B x per decoder rows (row r reads input
     * row r / per) from decoder_start_token_id, caching each decoder block's cross-attention
     * keys and values once and its self-attention ones per position, for at most `steps`
     * positions; gen_next: the next pass decodes the following position of each row from
     * tokens[rows] (the encoder's units do nothing); gen_reorder: row r's cache becomes what
     * row src[r]'s was (beam search); gen_logits: the last pass's logits [rows, V];
     * gen_end: the caches are freed. b's arrays must live until gen_end. */
    int (*gen_begin)(void *m, const zt_batch *b, int per, int steps);
    int (*gen_next)(void *m, const int64_t *tokens);
    void (*gen_reorder)(void *m, const int *src);
    const float *(*gen_logits)(const void *m, int *rows, int *V);
    void (*gen_end)(void *m);
    void (*destroy)(void *m);
} zt_model_ops;

#endif
