/* checkpoint.h - checkpoints (checkpoint.c): the state an engine keeps between saves and
 * loads, and the parts of zt_checkpoint_save / _load that write and read the files (engine.c
 * settles the engine around them: commit, pass, deferred updates, agreement). */
#ifndef ZT_ENGINE_CHECKPOINT_H
#define ZT_ENGINE_CHECKPOINT_H

#include <stdint.h>
#include "zerotrain.h"
#include "comm.h"
#include "geom.h"
#include "ostate.h"
#include "../models/zoo.h"

#define ZT_TRAINER_INFO_MAX 4096 /* bytes of a trainer's record, its NUL included */

struct zt_zero;

/* The run's lineage, 32 hex digits ("" until rank 0's first save of a fresh engine, or a
 * load adopts the checkpoint's); the trainer's record saved with every checkpoint, and the
 * one the last load read; per parameter, whether the checkpoint stored the tied alias; and
 * what it works with (zt_ckpt_init; the pointers must outlive it). */
typedef struct zt_ckpt {
    const zt_config *cfg;
    const zt_layout *L;
    const zt_model_cfg *mc;
    zt_comm *comm;
    const zt_geometry *geo;
    zt_ostate *os;
    struct zt_zero *z;       /* the parameters and the optimizer state's pieces */
    const int64_t *step;     /* the engine's step count */
    char run_id[33];
    char trainer_info[ZT_TRAINER_INFO_MAX], loaded_info[ZT_TRAINER_INFO_MAX];
    unsigned char *alias_seen;
    int saved_fresh;         /* the checkpoint being loaded recorded an unfilled bf16 master */
    struct zt_lscale *ls;    /* fp16: the loss scale, saved and restored; NULL otherwise */
} zt_ckpt;

void zt_ckpt_init(zt_ckpt *ck, const zt_config *cfg, const zt_layout *L, const zt_model_cfg *mc,
                  zt_comm *comm, const zt_geometry *geo, zt_ostate *os, struct zt_zero *z,
                  const int64_t *step, struct zt_lscale *ls);
/* Saving: rank 0 makes the hidden folder tmp (named tmpn in root; one a dead save left is
 * replaced) and removes it again on failure; every rank writes its rank file into it; rank 0
 * writes the state and the manifest, renames the folder into place and prunes to keep. */
int zt_ckpt_make_tmp(const char *root, const char *tmpn, const char *tmp);
void zt_ckpt_remove_tmp(const char *root, const char *tmpn);
int zt_ckpt_write_rank_file(zt_ckpt *ck, const char *dir);
int zt_ckpt_commit_rank0(zt_ckpt *ck, const char *root, const zt_train_state *st,
                         const char *train_config, int keep);
/* Tests only (zt_fault_hooks.point): SIGKILL at "where:what". */
void zt_ckpt_fault_point(const char *where, const char *what);
/* Loading: the manifest and every file it lists checked, its run id and trainer record
 * (info: ZT_TRAINER_INFO_MAX bytes); the training state with the saved world size and
 * bucket (before anything changes); the optimizer state re-sliced into this engine's parts. */
int zt_ckpt_verify_read(const char *dir, char run_id[33], char *info);
int zt_ckpt_read_state(zt_ckpt *ck, const char *dir, zt_train_state *st, int *world,
                       size_t *bucket);
int zt_ckpt_read_optimizer(zt_ckpt *ck, const char *dir, int world0, size_t bucket0);
/* zt_checkpoint_remove_other_runs, _set_trainer_info, _trainer_info (zerotrain.h) */
int zt_ckpt_remove_other_runs(zt_ckpt *ck, const char *root);
int zt_ckpt_set_trainer_info(zt_ckpt *ck, const char *json);
const char *zt_ckpt_trainer_info(const zt_ckpt *ck);

#endif
