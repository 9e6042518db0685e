/* SPDX-License-Identifier: MIT */
/*
 * txl-log.c - the library's version, status strings, the per-thread last
 * error, the log callback, and the sizes of the structs callers pass.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl-log.h"

static _Thread_local char last_error[1024];

static txl_log_fn log_fn;
static void *log_data;
static enum txl_log_level log_max = TXL_LOG_WARN;

const char *
txl_version(void)
{
	return TXL_VERSION;
}

const char *
txl_status_str(enum txl_status status)
{
	switch (status) {
	case TXL_OK: return "success";
	case TXL_ERR_IO: return "input/output error";
	case TXL_ERR_FORMAT: return "malformed file";
	case TXL_ERR_NOMEM: return "out of memory";
	case TXL_ERR_INVALID: return "invalid argument";
	case TXL_ERR_NUMERIC: return "non-finite result";
	case TXL_ABORTED: return "aborted";
	}
	return "unknown status";
}

const char *
txl_last_error(void)
{
	return last_error;
}

void
txl_log_set(txl_log_fn fn, void *user_data, enum txl_log_level max_level)
{
	log_fn = fn;
	log_data = user_data;
	log_max = max_level;
}

/* Messages quote names and values from files (tensor names, dtypes,
 * metadata), which may hold newlines or terminal escape sequences: keep
 * every message one line of printable text. */
static void
one_line(char *msg)
{
	for (unsigned char *p = (unsigned char *)msg; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static void __attribute__((format(printf, 2, 0)))
log_va(enum txl_log_level level, const char *fmt, va_list ap)
{
	char msg[1024];

	if (level > log_max)
		return;
	vsnprintf(msg, sizeof msg, fmt, ap);
	one_line(msg);
	if (log_fn)
		log_fn(level, msg, log_data);
	else
		fprintf(stderr, "libtxl: %s\n", msg);
}

void
txl_log(enum txl_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(level, fmt, ap);
	va_end(ap);
}

enum txl_status
txl_fail(enum txl_status status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof last_error, fmt, ap);
	va_end(ap);
	one_line(last_error);
	txl_log(TXL_LOG_DEBUG, "%s", last_error);
	return status;
}

void
txl_abort(const char *file, int line, const char *what)
{
	fprintf(stderr, "libtxl: %s:%d: internal error: %s\n", file, line, what);
	abort();
}

/* src over dst, as much as the caller's struct holds: src's size (in)
 * or dst's (out); dst's size member then says what it holds. */
static enum txl_status
copy_sized(void *dst, size_t min, size_t cap, const void *src,
	   const char *what, bool out)
{
	size_t size, stamp;

	memcpy(&size, out ? dst : src, sizeof size);
	if (size < min || size > cap)
		return txl_fail(TXL_ERR_INVALID, "struct %s of %zu bytes: none "
				"of this libtxl's (%zu to %zu): start from "
				"%s_default()", what, size, min, cap, what);
	stamp = out ? size : cap;
	memcpy(dst, src, size);
	memcpy(dst, &stamp, sizeof stamp);
	return TXL_OK;
}

enum txl_status
txl_copy_sized(void *dst, size_t min, size_t cap, const void *src,
	       const char *what)
{
	return copy_sized(dst, min, cap, src, what, false);
}

enum txl_status
txl_copy_sized_out(void *dst, size_t min, size_t cap, const void *src,
		   const char *what)
{
	return copy_sized(dst, min, cap, src, what, true);
}
