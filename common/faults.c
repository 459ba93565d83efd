/* faults.c - the test-only fault hooks (zerotrain_faults.h). */
#include "faults.h"

#include <string.h>

static zt_fault_hooks hooks = {"", 0, 0, -1, -1, -1, -1, 0.0};

void zt_fault_hooks_init(zt_fault_hooks *h)
{
    memset(h, 0, sizeof *h);
    h->stall_rank = h->skip_rank = h->skip_unit = -1;
    h->stall_seq = -1;
}

void zt_fault_hooks_set(const zt_fault_hooks *h)
{
    if (h) {
        hooks = *h;
        hooks.point[sizeof hooks.point - 1] = '\0';
    } else {
        zt_fault_hooks_init(&hooks);
    }
}

const zt_fault_hooks *zt_faults(void) { return &hooks; }
