/* gen.h - the built-in model's generation passes (engine.c), for generate.c's searches:
 * each pass a forward pass over every unit, as an evaluation's (stage 3 gathers and offloaded
 * parameters stream as in training), through the model's gen_* operations (model.h). */
#ifndef ZT_ENGINE_GEN_H
#define ZT_ENGINE_GEN_H

#include "zerotrain.h"

/* Caches for b->B x per decoder rows of at most `steps` positions; the model's eos, pad
 * and decoder start ids. ZT_E_UNSUPPORTED when the model has no decoder to generate with. */
int zt_engine_gen_begin(zt_engine *e, const zt_batch *b, int per, int steps, int *eos,
                        int *pad, int *start);
/* One pass: tokens NULL the first (encoding, then position 0), else the next position
 * of every row from tokens[rows]. *logits [*rows, *V] until the next pass. */
int zt_engine_gen_pass(zt_engine *e, const int64_t *tokens, const float **logits, int *rows,
                       int *V);
void zt_engine_gen_reorder(zt_engine *e, const int *src);
void zt_engine_gen_end(zt_engine *e);
/* rc, with this thread's last error recorded as the engine's (zt_engine_last_error) */
int zt_engine_record_error(zt_engine *e, int rc);

#endif
