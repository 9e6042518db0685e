/* SPDX-License-Identifier: MIT */
/*
 * txl-log.h - errors and logging inside libtxl (txl-log.c); not installed.
 */
#ifndef TXL_LOG_H
#define TXL_LOG_H

#include "txl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libtxl reads little-endian files in place: big-endian hosts unsupported"
#endif

/* Record the thread's last error (printf-style) and pass it to the log
 * callback at TXL_LOG_DEBUG; returns @p status for `return txl_fail(...)`. */
enum txl_status txl_fail(enum txl_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void txl_log(enum txl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Broken internal invariant: print file:line and abort. */
#define TXL_ASSERT(x)                                                        \
	do {                                                                 \
		if (!(x))                                                    \
			txl_abort(__FILE__, __LINE__, #x);                   \
	} while (0)
_Noreturn void txl_abort(const char *file, int line, const char *what);

#endif /* TXL_LOG_H */
