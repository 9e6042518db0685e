/* SPDX-License-Identifier: MIT */
/*
 * txl-log.h - errors and logging inside libtxl (txl-log.c); not installed.
 */
#ifndef TXL_LOG_H
#define TXL_LOG_H

#include <stddef.h>

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

/* A struct a caller passes in, src (its first member its size_t size),
 * over dst, which holds the library's defaults and is cap bytes: the
 * fields the caller's struct has; dst's size becomes cap.  min: the size
 * of the struct's first version.  TXL_ERR_INVALID (naming the struct,
 * `what`) for a size no version of its *_default() gives. */
enum txl_status txl_copy_sized(void *dst, size_t min, size_t cap,
			       const void *src, const char *what);

/* The same the other way: the library's struct src (cap bytes) into a
 * caller's dst, as much of it as dst's size says dst has. */
enum txl_status txl_copy_sized_out(void *dst, size_t min, size_t cap,
				   const void *src, const char *what);

/* The end of member m of struct type t: the size of the versions of t
 * that have m. */
#define TXL_END_OF(t, m) (offsetof(t, m) + sizeof(((t *)0)->m))

#endif /* TXL_LOG_H */
