/* stores.h - the offload stores of one rank (offload/store.h) with the config's aio
 * settings: parameters, optimizer state, gradients and activation checkpoints each open one. */
#ifndef ZT_ENGINE_STORES_H
#define ZT_ENGINE_STORES_H

#include "zerotrain.h"
#include "../memory/mem.h"

struct zt_store;

/* A store on device (ZT_OFFLOAD_CPU: a RAM pool; ZT_OFFLOAD_NVME: a swap file in dir) for
 * `purpose` of rank `rank` (which names the swap file). */
int zt_offload_store_open(const zt_config *c, const char *dir, int rank, int device,
                          const char *purpose, zt_mem_account *acct, struct zt_store **out);

#endif
