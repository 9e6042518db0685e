/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the command line: the parser of the option table (settings.c);
 * --help, --version and --list-options are usage.h's.
 */
#ifndef TXLGEN_CLI_H
#define TXLGEN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

/**
 * Parse the command line: load --config first, then apply the options
 * over it.  Returns EXIT_OK, or the exit code after printing the error;
 * *@p done is set when the program should exit with that code (--help,
 * --version, errors).
 */
int options_parse(struct txlgen_options *o, int argc, char **argv,
		  bool *done);

/* The most parts of a text (--part K/N) */
#define PARTS_MAX 1000000

/**
 * Parse "K/N" (1 <= K <= N <= PARTS_MAX) of --part and of the summaries
 * of parts; false with the reason in @p err.
 */
bool part_parse(const char *s, int64_t *k, int64_t *n, char *err,
		size_t len);

#endif /* TXLGEN_CLI_H */
