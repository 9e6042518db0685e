/* SPDX-License-Identifier: MIT */
/*
 * usage.h - what the option table (settings.c) says of itself: the
 * --help text laid out from it, --list-options, and --version; both
 * programs' (settings_prog chooses), printed by the parser (cli.c).
 */
#ifndef TXLGEN_USAGE_H
#define TXLGEN_USAGE_H

#include <stdio.h>

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

#endif /* TXLGEN_USAGE_H */
