/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the command line: the parser of the option table (settings.c)
 * in cli.c, and the --help text and --list-options made from it
 * (usage.c).
 */
#ifndef TXLGEN_CLI_H
#define TXLGEN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/** Print the usage summary (--help) to @p f. */
void options_usage(FILE *f);

/** Print every spelling of every option to @p f (--list-options), one a
 *  line: "SPELLINGS KIND [VALUE]...", where SPELLINGS are the names that
 *  mean the same, comma-separated, the one --help lists first, and KIND
 *  is what its value is: flag (none), text, file, input (a file or '-'),
 *  model (a file or a model's name), config (a JSON file) or choice
 *  (then the VALUEs). */
void options_list(FILE *f);

/** Print the versions, the commit built, the kernels chosen and the BLAS
 *  (--version) to @p f. */
void options_version(FILE *f);

#endif /* TXLGEN_CLI_H */
