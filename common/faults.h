/* faults.h - the library's view of the test-only fault hooks (include/zerotrain_faults.h). */
#ifndef ZT_COMMON_FAULTS_H
#define ZT_COMMON_FAULTS_H

#include "zerotrain_faults.h"

/* the hooks in force (every field at "none" unless a test set them) */
const zt_fault_hooks *zt_faults(void);

#endif
