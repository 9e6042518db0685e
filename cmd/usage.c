/* SPDX-License-Identifier: MIT */
/*
 * usage.c - the --help text, laid out from the option table, and
 * --version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl.h"

#include "cli.h"
#include "commit.h"
#include "errors.h"
#include "utf8.h"

#define HELP_COLUMN 26

static const char intro[] =
"Usage: txlgen [OPTION]...\n"
"Generate or score text with a Transformer-XL language model.\n"
"\n"
"With no prompt option and stdin not a terminal, the prompt is read from\n"
"stdin; with stdin a terminal, an interactive session starts.\n";

static void
print_option(FILE *f, const struct cli_opt *c)
{
	char left[64];
	int n;
	const char *h = c->help, *nl;

	if (c->short_opt)
		n = snprintf(left, sizeof(left), "  -%c, --%s", c->short_opt,
			     c->name);
	else
		n = snprintf(left, sizeof(left), "      --%s", c->name);
	if (c->metavar)
		n += snprintf(left + n, sizeof(left) - (size_t)n, "%s%s",
			      c->metavar[0] == '[' ? "" : " ", c->metavar);
	fputs(left, f);
	if (n >= HELP_COLUMN - 1) {
		fputc('\n', f);
		n = 0;
	}
	/* each line of the help at the help column */
	for (;;) {
		nl = strchr(h, '\n');
		fprintf(f, "%*s%.*s\n", HELP_COLUMN - n, "",
			nl ? (int)(nl - h) : (int)strlen(h), h);
		if (!nl)
			break;
		h = nl + 1;
		n = 0;
	}
}

void
options_usage(FILE *f)
{
	fputs(intro, f);
	for (int i = 0; i < n_cli_opts; i++) {
		const struct cli_opt *c = &cli_opts[i];

		if (!c->name)
			fprintf(f, "\n%s\n", c->help);
		else if (c->help)
			print_option(f, c);
	}
	fputc('\n', f);
	fputs(cli_help_footer, f);
}

void
options_version(FILE *f)
{
	fprintf(f, "txlgen %s (libtxl %s), commit %s%s\n", TXLGEN_VERSION,
		txl_version(), TXLGEN_COMMIT, strcmp(TXLGEN_COMMIT, "unknown") ?
		"" : " (not built from a git checkout)");
	const char *cap = getenv("TXL_ISA");

	if (cap && *cap) {
		char *c = xstrdup(cap);

		text_clean_line(c);
		fprintf(f, "kernels: %s (the best this CPU runs, at most "
			"TXL_ISA=%s)\n", txl_isa_name(), c);
		free(c);
	} else {
		fprintf(f, "kernels: %s (the best this CPU runs; TXL_ISA may "
			"cap it)\n", txl_isa_name());
	}
	fprintf(f, "BLAS: %s\n", txl_blas_info());
}
