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

static void __attribute__((format(printf, 1, 0)))
vmsg(const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	text_clean_line(msg);
	fflush(stdout); /* keep the order of output and messages on a tty */
	fprintf(stderr, "txlgen: %s\n", msg);
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
	fputs("Try 'txlgen --help' for more information.\n", stderr);
}

void
die_oom(void)
{
	fflush(stdout);
	fputs("txlgen: out of memory\n", stderr);
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
