/* err.c - error strings, the per-thread last-error message, and the log callback.
 * Messages are formatted once at the failure site; callers add context with zt_fail_wrap. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[ZT_ERRMSG_MAX];
static zt_log_fn log_fn;
static void *log_user;
static int log_max = ZT_LOG_INFO;

#define ZT_STR2(x) #x
#define ZT_STR(x) ZT_STR2(x)
const char *zt_version(void)
{
    return ZT_STR(ZT_VERSION_MAJOR) "." ZT_STR(ZT_VERSION_MINOR) "." ZT_STR(ZT_VERSION_PATCH);
}

int zt_abi_version(void) { return ZT_ABI_VERSION; }

const char *zt_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case ZT_E_FORMAT: return "malformed file";
    case ZT_E_CONFIG: return "invalid configuration";
    case ZT_E_SHAPE: return "shape mismatch";
    case ZT_E_MPI: return "MPI error";
    case ZT_E_INVAL: return "invalid argument";
    case ZT_E_NOTFOUND: return "not found";
    case ZT_E_RANGE: return "value out of range";
    case ZT_E_UNSUPPORTED: return "not supported";
    case ZT_E_NOMEM: return "out of memory";
    default: break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}

const char *zt_last_error(void) { return last_msg; }

void zt_clear_error(void) { last_msg[0] = '\0'; }

int zt_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}

int zt_fail_wrap(int code, const char *fmt, ...)
{
    char prefix[ZT_ERRMSG_MAX], old[ZT_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_msg, sizeof old);
    snprintf(last_msg, sizeof last_msg, "%s: %s", prefix, old[0] ? old : zt_strerror(code));
    return code;
}

void zt_log_set(zt_log_fn fn, void *user, int max_level)
{
    log_fn = fn;
    log_user = user;
    log_max = max_level;
}

void zt_log(int level, const char *fmt, ...)
{
    char buf[ZT_ERRMSG_MAX];
    va_list ap;
    if (!log_fn || level > log_max)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(level, buf, log_user);
}
