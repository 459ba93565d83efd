/* engine_impl.h - the engine's state: struct zt_engine, built from the sub-structs each
 * engine module owns and declares in its own header (zstd's context of sub-structs), and
 * the few functions of engine.c the modules call. Nothing outside engine/ includes it.
 *
 *   module        header        sub-struct   what it owns
 *   geom.c        geom.h        geo          where each float of a unit lies over N ranks
 *   units.c       units.h       un           passes, orders of acquires, held units
 *   zero.c        zero.h        z (P, gr,    gradients; stage 3's gathers; parameter and
 *                               ga, ps, oo,  optimizer offload; the update in progress
 *                               up)
 *   ostate.c      ostate.h      os           the optimizer state's parts and layout
 *   recompute.c   recompute.h   rc           the recomputation plan
 *   actoff.c      actoff.h      ao           activation checkpoint offload
 *   checkpoint.c  checkpoint.h  ck           the run's lineage and the trainer's record
 *   footprint.c   footprint.h   -            bytes per category (pure)
 *   plan.c        plan.h        pn           memory_limit's placement
 *   stores.c      stores.h      -            an offload store with the aio settings */
#ifndef ZT_ENGINE_IMPL_H
#define ZT_ENGINE_IMPL_H

#include "zerotrain.h"
#include "comm.h"
#include "../common/err.h"
#include "../models/zoo.h"
#include "actoff.h"
#include "checkpoint.h"
#include "footprint.h"
#include "geom.h"
#include "ostate.h"
#include "plan.h"
#include "recompute.h"
#include "units.h"
#include "zero.h"

struct zt_engine {
    zt_config cfg;
    char err[ZT_ERRMSG_MAX];
    zt_comm comm;
    zt_model_cfg mc;
    zt_layout layout;
    const zt_model_ops *ops;
    void *model;
    char source[640];        /* where the model comes from, for messages ("" for a
                              * trainer's own) */
    char **patterns;         /* copies of cfg.no_decay, then cfg.fp32_state */
    int n_patterns;
    char nvme_path[3000];
    char plan[2048];         /* zerotrain.memory_limit: the plan, "" without a limit */
    int64_t step;
    /* the divergence guard: a non-finite loss since the last step (this rank), steps
     * skipped so far, whether the unguarded warning was given */
    int loss_bad, warned_nonfinite;
    int64_t skipped_steps;
    int have_logits;
    zt_geometry geo;
    zt_units un;
    zt_zero z;               /* the stage logic: P, gr, ga, ps, oo, up */
    zt_ostate os;
    zt_rplan rc;
    zt_actoff ao;
    zt_ckpt ck;
    zt_planner pn;
};

/* Creates the optimizer state (zero moments) if it does not exist yet (zt_engine_: the
 * error also recorded in the engine). */
int zt_zero_ensure_moments(zt_zero *z);
int zt_engine_ensure_moments(zt_engine *e);
/* Writes the parameters as a Hugging Face folder (weights + config.json). Collective: rank
 * 0 writes; stage 3 streams, one gathered unit at a time. Every rank returns the same
 * verdict. */
int zt_engine_save_weights(zt_engine *e, const char *dir, size_t max_shard_bytes);
/* Collective: ZT_E_RANGE when a parameter holds a NaN or an infinity, naming the first (the
 * lowest parameter and element over every rank; stage 3: each rank scans its shards), in
 * "not <what> <path>: parameter ... : nothing was written". Applies deferred updates first.
 * Every rank returns the same verdict. */
int zt_engine_check_finite(zt_engine *e, const char *what, const char *path);
/* Loads Hugging Face weights from dir into the parameters (stage 3: into the shards). */
int zt_engine_load_params(zt_engine *e, const char *dir);
/* Every rank's rc agreed on: this rank's failure, or ZT_E_MPI naming `what` when another
 * rank failed (collective). */
int zt_engine_agree(zt_engine *e, int rc, const char *what);
/* cfgset.c: "name=value" lines of the fields every rank must share; bytes written or < 0 */
int zt_config_describe(const zt_config *c, char *buf, size_t n);
/* Copies the thread's last error into the engine and returns rc. */
int zt_engine_fail(const zt_engine *e, int rc);

#endif
