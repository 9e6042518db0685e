/* SPDX-License-Identifier: MIT */
/*
 * errors.c - messages on stderr, and allocation that cannot fail.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "utf8.h"

const char *err_prog = "txlgen";

static void __attribute__((format(printf, 1, 0)))
vmsg(const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	text_clean_line(msg);
	fflush(stdout); /* keep the order of output and messages on a tty */
	fprintf(stderr, "%s: %s\n", err_prog, msg);
}

void
errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void
usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try '%s --help' for more information.\n", err_prog);
}

void
die_oom(void)
{
	fflush(stdout);
	fprintf(stderr, "%s: out of memory\n", err_prog);
	exit(EXIT_RUNTIME);
}

void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die_oom();
	return p;
}

char *
xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		die_oom();
	return d;
}
