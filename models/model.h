/* model.h - what the engine knows about a model: its units and parameter table (the flat
 * per-unit layout), and a table of functions that run one unit forward or backward.
 * Models never allocate parameters or call MPI: the engine owns every unit buffer. */
#ifndef ZT_MODELS_MODEL_H
#define ZT_MODELS_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "zerotrain.h"

#define ZT_PARAM_ALIGN 256     /* every parameter starts on a 256-float boundary */
#define ZT_NAME_MAX 112

enum { ZT_INIT_NORMAL = 0, ZT_INIT_ZEROS, ZT_INIT_ONES };

typedef struct zt_param_def {
    char name[ZT_NAME_MAX];    /* Hugging Face name */
    char alias[ZT_NAME_MAX];   /* tied duplicate stored by some checkpoints, or "" */
    int unit;
    size_t offset;             /* floats from the start of the unit buffer */
    size_t numel;
    int ndim;
    int64_t shape[4];
    int init;                  /* ZT_INIT_* (normal uses the model's init std) */
    int decay;                 /* 1 = weight decay applies by default */
} zt_param_def;

typedef struct zt_unit_def {
    char name[48];
    size_t numel;              /* floats incl. alignment padding between parameters */
    int first_param, n_params; /* range in the parameter table */
} zt_unit_def;

typedef struct zt_layout {
    zt_param_def *params;
    int n_params;
    zt_unit_def *units;
    int n_units;
    float init_std;
} zt_layout;

/* Appends a parameter to unit `unit` (the last unit added). Returns its index or < 0. */
int zt_layout_add_unit(zt_layout *l, const char *name);
int zt_layout_add_param(zt_layout *l, const char *name, int ndim, const int64_t *shape, int init,
                        int decay);
void zt_layout_free(zt_layout *l);
/* Index of a parameter by name or alias, or -1. */
int zt_layout_find(const zt_layout *l, const char *name);

/* P[u], G[u]: parameter and gradient buffer of unit u. A unit's forward may read other
 * units' parameters (tied weights) and its backward may add into their gradients. */
typedef struct zt_model_ops {
    /* Validates the batch and sizes activations. Counts labelled tokens. */
    int (*prepare)(void *m, const zt_batch *b, int keep_logits, int64_t *n_labels);
    void (*forward_unit)(void *m, int u, float *const *P);
    /* Loss over the batch; gradient of the logits scaled by grad_scale. */
    double (*loss)(void *m, float grad_scale);
    void (*backward_unit)(void *m, int u, float *const *P, float *const *G);
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
    /* Activation bytes a training batch of B x T needs (the memory planner's estimate). */
    size_t (*act_bytes)(void *m, int B, int T);
    /* Recomputation (ZT_RECOMPUTE_*), before the next prepare: the model keeps less of each
     * recomputed unit between the passes (FULL: its output; SELECTIVE: its matrix-product
     * outputs), and the engine calls recompute_unit(u) right before backward_unit(u) for
     * the units where recomputed(u) is true. Dropout masks replay from their Philox keys,
     * so the gradients are the same bits. */
    void (*set_recompute)(void *m, int mode);
    int (*recomputed)(const void *m, int u);
    void (*recompute_unit)(void *m, int u, float *const *P);
    void (*destroy)(void *m);
} zt_model_ops;

#endif
