/* err.h - error codes with a per-thread detailed message, and the log callback.
 * Every library file reports failures through zt_fail(); nothing here prints or exits. */
#ifndef ZT_COMMON_ERR_H
#define ZT_COMMON_ERR_H

#include "zerotrain.h"

#define ZT_ERRMSG_MAX 8192

/* Formats the thread's last-error message and returns code (negative), so a caller can
 * write `return zt_fail(ZT_E_FORMAT, "%s: ...", path);`. */
int zt_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the thread's current message with more context ("loading X: <old>"). */
int zt_fail_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zt_clear_error(void);
void zt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forward a negative result. */
#define ZT_TRY(expr) do { int zt_try_rc_ = (expr); if (zt_try_rc_ < 0) return zt_try_rc_; } while (0)

#endif
