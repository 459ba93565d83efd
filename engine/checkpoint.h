/* checkpoint.h - the checkpoint state an engine keeps between saves and loads
 * (checkpoint.c; the functions are zerotrain.h's zt_checkpoint_*). */
#ifndef ZT_ENGINE_CHECKPOINT_H
#define ZT_ENGINE_CHECKPOINT_H

#define ZT_TRAINER_INFO_MAX 4096 /* bytes of a trainer's record, its NUL included */

/* the run's lineage, 32 hex digits ("" until rank 0's first save of a fresh engine, or a
 * load adopts the checkpoint's); the trainer's record saved with every checkpoint, and the
 * one the last load read; per parameter, whether the checkpoint stored the tied alias */
typedef struct zt_ckpt {
    char run_id[33];
    char trainer_info[ZT_TRAINER_INFO_MAX], loaded_info[ZT_TRAINER_INFO_MAX];
    unsigned char *alias_seen;
} zt_ckpt;

#endif
