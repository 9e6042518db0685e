/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the command line: the option table (optable.c), its parser
 * (cli.c) and the --help text made from it (usage.c).
 */
#ifndef TXLGEN_CLI_H
#define TXLGEN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "settings.h"

enum cli_action {
	OPT_SETTING,  /* sets the setting `key` from the argument */
	OPT_BOOL,     /* sets the boolean setting `key`; --no-NAME clears it */
	OPT_FLAG,     /* sets the bool at `offset`; --no-NAME clears it */
	OPT_PATH,     /* sets the char * at `offset` to the argument */
	OPT_NUMBER,   /* sets the int64_t at `offset` to the argument, a
			 whole number in [min, max] */
	OPT_CONFIG,   /* --config FILE, read before the other options */
	OPT_HELP,
	OPT_VERSION,
	OPT_LIST_TYPES, /* --list-types: the memory's types, one a line */
};

struct cli_opt {
	const char *name;      /* long name without "--"; NULL: a heading */
	int short_opt;         /* 0: none */
	int has_arg;           /* no_argument, required_argument, ... */
	enum cli_action action;
	const char *key;       /* OPT_SETTING, OPT_BOOL */
	size_t offset;         /* OPT_FLAG, OPT_PATH: into txlgen_options */
	bool negatable;        /* also --no-NAME */
	const char *metavar;   /* "FILE"; "[=WHEN]" for an optional one */
	const char *help;      /* NULL: an alias, not listed by --help */
	double min, max;       /* OPT_NUMBER: its range */
};

extern const struct cli_opt cli_opts[];
extern const int n_cli_opts;

/** Text after the option list of --help. */
extern const char cli_help_footer[];

/**
 * Parse the command line: load --config first, then apply the options
 * over it.  Returns EXIT_OK, or the exit code after printing the error;
 * *@p done is set when the program should exit with that code (--help,
 * --version, errors).
 */
int options_parse(struct txlgen_options *o, int argc, char **argv,
		  bool *done);

/** Print the usage summary (--help) to @p f. */
void options_usage(FILE *f);

/** Print the versions, the commit built, the kernels chosen and the BLAS
 *  (--version) to @p f. */
void options_version(FILE *f);

#endif /* TXLGEN_CLI_H */
