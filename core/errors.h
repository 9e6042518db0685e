/* SPDX-License-Identifier: MIT */
/*
 * errors.h - txlgen's exit codes and its one way of writing a message.
 */
#ifndef TXLGEN_ERRORS_H
#define TXLGEN_ERRORS_H

#include <stddef.h>

/* Exit codes, documented in txlgen(1) and README.md. */
enum txlgen_exit {
	EXIT_OK = 0,
	EXIT_RUNTIME = 1,      /* I/O error, bad input, write failure */
	EXIT_USAGE = 2,        /* bad option or value */
	EXIT_BADMODEL = 3,     /* bad or missing model, bad config file */
	EXIT_HANGUP = 129,     /* SIGHUP (128 + 1) */
	EXIT_INTERRUPTED = 130, /* SIGINT (128 + 2) */
	EXIT_TERMINATED = 143, /* SIGTERM (128 + 15) */
};

/* The program that speaks: "txlgen" unless another program of the
 * project (txlgen-server) sets its own name. */
extern const char *err_prog;

/**
 * Print "txlgen: MSG" and a newline to stderr, printf-style.  The message
 * is made one line of printable text first (control characters, terminal
 * escapes and invalid UTF-8 become '?'), as libtxl does with its own:
 * messages quote file names, keys and input.
 */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** errmsg(), then "Try 'txlgen --help' for more information." */
void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Report "out of memory" and exit with EXIT_RUNTIME. */
_Noreturn void die_oom(void);

/** realloc() and strdup() that never return NULL (die_oom instead). */
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

#endif /* TXLGEN_ERRORS_H */
