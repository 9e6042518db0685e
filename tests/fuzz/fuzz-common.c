/* SPDX-License-Identifier: MIT */
/*
 * fuzz-common.c - see fuzz-common.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz-common.h"

_Noreturn void
fuzz_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FUZZ CHECK FAILED: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

void
fuzz_file_init(struct fuzz_file *f, const char *name)
{
	f->fd = memfd_create(name, MFD_CLOEXEC);
	if (f->fd < 0)
		fuzz_fail("memfd_create failed");
	snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

void
fuzz_file_set(struct fuzz_file *f, const void *data, size_t size)
{
	const char *p = data;
	off_t off = 0;

	if (ftruncate(f->fd, 0) != 0)
		fuzz_fail("ftruncate failed");
	while (size > 0) {
		ssize_t w = pwrite(f->fd, p, size, off);
		if (w <= 0)
			fuzz_fail("pwrite failed");
		p += w;
		off += w;
		size -= (size_t)w;
	}
}

static void
drop_log(enum txl_log_level level, const char *msg, void *data)
{
	(void)level;
	(void)msg;
	(void)data;
}

void
fuzz_quiet_log(void)
{
	txl_log_set(drop_log, NULL, TXL_LOG_ERROR);
}

void
fuzz_check_error(enum txl_status st, const char *path)
{
	const char *e = txl_last_error();

	switch (st) {
	case TXL_ERR_IO:
	case TXL_ERR_FORMAT:
	case TXL_ERR_NOMEM:
	case TXL_ERR_INVALID:
		break;
	default:
		fuzz_fail("unexpected status %d for a failure", (int)st);
	}
	if (!e || !*e)
		fuzz_fail("status %d with an empty txl_last_error()", (int)st);
	if (strchr(e, '\n'))
		fuzz_fail("txl_last_error() is not one line: %s", e);
	if (path && !strstr(e, path))
		fuzz_fail("error does not name the file %s: %s", path, e);
}
