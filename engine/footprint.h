/* footprint.h - the bytes one rank holds, per category, from the layout, the world size, the
 * stage, the offload placement, the bytes per parameter and gradient float (4 in fp32, 2 for
 * half-precision parameters; the gradients in their accumulation dtype) and the optimizer's
 * state bytes (with half precision, the fp32 master copy is part of them). One function for the memory planner (plan.c, before
 * anything is allocated, for any placement and world size), the engine's report and the
 * allocation check; tests/test_footprint.c checks that it equals what the engine allocates.
 * Pure arithmetic over explicit inputs: no engine. */
#ifndef ZT_ENGINE_FOOTPRINT_H
#define ZT_ENGINE_FOOTPRINT_H

#include <stddef.h>

#define ZT_OFF_MAXBUF 16 /* most shard / working buffers of one offload store */

struct zt_layout;
struct zt_config;

typedef struct zt_fp_in {
    const struct zt_layout *L;
    int N, stage;
    size_t bucket;             /* floats per collective (geom.h) */
    int whole_grad;            /* stages 2-3: the unit whose gradient stays whole, or -1 */
    int opt_off, par_off;      /* ZT_OFFLOAD_*: where the optimizer state / stage 3's
                                * parameter shards live */
    int grads_off;             /* stages 2-3 with opt_off: the gradient shards go with it */
    int grad_acc_buffers;      /* ... and two accumulation buffers exist (micro-batches) */
    int param_slots;           /* parameter offload: shard buffers in RAM */
    size_t persist_threshold;  /* stage 3: units below it stay gathered */
    double gathered;           /* stage 3: floats of the gather pool (the planner's budget,
                                * or the engine's buffers) */
    double opt_state;          /* bytes of the optimizer state of the parts this rank holds */
    double opt_replicated;     /* bytes kept whole on every rank (Adafactor's factored
                                * moments) */
    double opt_work;           /* optimizer offload: bytes of its working buffers */
    int inference;             /* forward only: no gradients, no optimizer state */
    double pbytes, gbytes;     /* bytes per parameter / gradient float (0: 4, fp32) */
} zt_fp_in;

typedef struct zt_footprint {
    double params, grads, optimizer, comm;         /* RAM (an offload RAM pool included) */
    double params_off, grads_off, optimizer_off;   /* in the swap files (device nvme) */
    double formula;       /* the ZeRO paper's model state: params + grads + optimizer
                           * state of what the rank owns (stage 0: (p + g + K) P, 1:
                           * (p + g) P + K P/N, 2: p P + (g + K) P/N, 3: (p + g + K) P/N;
                           * fp32 AdamW p = g = 4, K = 8; fp16 p = g = 2, K = 12), less
                           * what lives on NVMe */
    double padded;        /* P: floats over the units, shard padding included */
    double opt_state;     /* the optimizer's state bytes of the parts the rank holds and of
                           * what it keeps whole, wherever they live */
} zt_footprint;

void zt_footprint_of(const zt_fp_in *in, zt_footprint *out);

/* The config's bytes per parameter float (*pb: its compute copy), per gradient float (*gb:
 * the accumulation dtype) and per owned parameter of the fp32 master (*mb, 0 in fp32). */
void zt_fp_dtypes(const struct zt_config *c, double *pb, double *gb, double *mb);
/* The parameters' dtype: -1 (fp32) or ZT_HALF_* (common/half.h) of the compute copies; the
 * gradients' accumulation dtype and their reduction dtype: -1 (fp32) or ZT_HALF_*. */
int zt_fp_half(const struct zt_config *c);
int zt_fp_grad_half(const struct zt_config *c);
int zt_fp_comm_half(const struct zt_config *c);

/* engine.c, for tests/test_footprint.c: an engine's footprint now (its buffers) and the
 * planner's for its placement, stage and world size. */
struct zt_engine;
void zt_engine_footprints(const struct zt_engine *e, zt_footprint *now, zt_footprint *plan);

/* parameter offload: how many shard buffers (buffer_count, capped by max_in_cpu, at least
 * 3) for shards of largest_shard floats */
int zt_fp_param_slots(const struct zt_config *c, size_t largest_shard);

/* optimizer offload: floats per sub-group, the count of sub-groups and of working buffers,
 * for shards of the given lengths (floats) */
size_t zt_fp_group_floats(const struct zt_config *c, size_t largest_shard);
int zt_fp_offload_buffers(const struct zt_config *c, int groups);

#endif
