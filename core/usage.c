/* SPDX-License-Identifier: MIT */
/*
 * usage.c - the --help text, laid out from the option table, and
 * --version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl.h"

#include "commit.h"
#include "errors.h"
#include "settings.h"
#include "usage.h"
#include "utf8.h"

#define HELP_COLUMN 26

static const char intro[] =
"Usage: txlgen [OPTION]...\n"
"Generate or score text with a Transformer-XL language model.\n"
"\n"
"With no prompt option and stdin not a terminal, the prompt is read from\n"
"stdin; with stdin a terminal, an interactive session starts.\n";

static const char server_intro[] =
"Usage: txlgen-server [OPTION]...\n"
"Serve a Transformer-XL model over HTTP: the completions API\n"
"(/v1/completions), sessions that keep their memory between requests,\n"
"many clients stepped together.\n";

static const char server_footer[] =
"The settings of txlgen above (--temp, --n-predict, --mem-len, ...) are the\n"
"defaults of requests; --config FILE takes them and the server's options\n"
"as JSON keys (\"port\", \"max_body\", ...).  Exit status: 0 stopped by\n"
"SIGTERM or SIGINT, 1 runtime error, 2 bad option, 3 bad model, config or\n"
"key file, 129 SIGHUP.  See txlgen-server(1).\n";

static const char footer[] =
"A model NAME is NAME.bin in $TXLGEN_MODEL_PATH (directories separated by\n"
"colons), ~/.local/share/txlgen/models ($XDG_DATA_HOME/txlgen/models, where\n"
"txlgen-get installs), or the installed share/txlgen.\n"
"\n"
"Every boolean option has a --no- form (--no-echo, --no-json, --no-color,\n"
"...) that overrides a config file.  Exit status: 0 ok, 1 runtime error,\n"
"2 usage error, 3 bad model or config, 130 interrupted (SIGINT), 143\n"
"terminated (SIGTERM), 129 hangup (SIGHUP).  See txlgen(1).\n";

static void
print_option(FILE *f, const struct setting *s)
{
	char left[64], name[40];
	int n;
	const char *h = settings_prog == PROG_SERVER && s->help_server ?
		s->help_server : s->help, *nl;

	setting_option(s, false, false, name, sizeof(name));
	if (s->short_opt)
		n = snprintf(left, sizeof(left), "  -%c, --%s", s->short_opt,
			     name);
	else
		n = snprintf(left, sizeof(left), "      --%s", name);
	if (s->metavar)
		n += snprintf(left + n, sizeof(left) - (size_t)n, "%s%s",
			      s->metavar[0] == '[' ? "" : " ", s->metavar);
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

/* Whether the heading at @p i has an option of this program under it. */
static bool
heading_shown(int i)
{
	for (i++; i < n_settings && settings[i].key; i++)
		if (setting_is_option(&settings[i]))
			return true;
	return false;
}

void
options_usage(FILE *f)
{
	bool server = settings_prog == PROG_SERVER;

	fputs(server ? server_intro : intro, f);
	for (int i = 0; i < n_settings; i++) {
		const struct setting *s = &settings[i];

		if (!s->key && heading_shown(i))
			fprintf(f, "\n%s\n", s->help);
		else if (setting_is_option(s))
			print_option(f, s);
	}
	fputc('\n', f);
	fputs(server ? server_footer : footer, f);
}

/* The spellings of @p s's name (its --no- form with @p neg): the long
 * one, the short one, the alias. */
static void
list_spellings(FILE *f, const struct setting *s, bool neg)
{
	char name[40];

	fprintf(f, "--%s", setting_option(s, neg, false, name, sizeof(name)));
	if (s->short_opt && !neg)
		fprintf(f, ",-%c", s->short_opt);
	if (s->alias)
		fprintf(f, ",--%s", setting_option(s, neg, true, name,
						   sizeof(name)));
}

void
options_list(FILE *f)
{
	static const char *const kinds[] = {
		[ARG_TEXT] = "text", [ARG_FILE] = "file",
		[ARG_INPUT] = "input", [ARG_MODEL] = "model",
		[ARG_CONFIG] = "config",
	};

	for (int i = 0; i < n_settings; i++) {
		const struct setting *s = &settings[i];

		if (!setting_is_option(s))
			continue;
		list_spellings(f, s, false);
		if (s->type == ST_ENUM) {
			int n;
			const char *const *names = setting_names(s, &n);

			fputs(" choice", f);
			for (int k = 0; k < n; k++)
				if (names[k])
					fprintf(f, " %s", names[k]);
			fputc('\n', f);
		} else {
			fprintf(f, " %s\n", s->type == ST_NONE ||
				s->type == ST_BOOL || s->type == ST_TRIBOOL ?
				"flag" : kinds[s->arg]);
		}
		if (setting_negatable(s)) {
			list_spellings(f, s, true);
			fputs(" flag\n", f);
		}
	}
}

void
options_version(FILE *f)
{
	fprintf(f, "%s %s (libtxl %s), commit %s%s\n",
		prog_name(settings_prog), TXLGEN_VERSION,
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
