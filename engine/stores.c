/* stores.c - an offload store with the config's aio settings (stores.h). */
#include "stores.h"
#include "../common/faults.h"
#include "../offload/store.h"

#include <errno.h>
#include <stdio.h>

int zt_offload_store_open(const zt_config *c, const char *dir, int rank, int device,
                          const char *purpose, zt_mem_account *acct, zt_store **out)
{
    char tag[64];
    zt_store_opts o;
    zt_store_opts_init(&o);
    o.device = device == ZT_OFFLOAD_NVME ? ZT_STORE_NVME : ZT_STORE_RAM;
    o.dir = dir;
    snprintf(tag, sizeof tag, "%s-rank%d", purpose, rank);
    o.tag = tag;
    o.acct = acct;
    o.io.block_size = c->aio_block_size;
    o.io.queue_depth = c->aio_queue_depth;
    o.io.io_threads = c->aio_threads;
    o.io.single_submit = c->aio_single_submit;
    o.io.no_overlap = !c->aio_overlap_events;
    o.io.direct = c->direct_io;
    /* tests only: the filesystem refuses O_DIRECT, io_uring is unavailable */
    o.io.fault_open_einval = zt_faults()->io_no_odirect;
    if (zt_faults()->io_no_uring)
        o.io.fault_setup_errno = ENOSYS;
    return zt_store_open(out, &o);
}
