/* SPDX-License-Identifier: MIT */
/*
 * options.c - the settings table and the command line (getopt_long).
 *
 * Every setting is described once, in settings[]; the command line, the
 * config file (config.c), --print-config and the REPL's /set and /show
 * all go through it, so that they accept the same names, types and
 * ranges and give the same messages.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl.h"

#include "config.h"
#include "options.h"
#include "output.h"

#define OFF(field) offsetof(struct txlgen_options, field)
#define BIG 1048576.0 /* sanity bound of lengths: 1 Mi positions */

const struct setting settings[] = {
	/* key             option             type        offset             null   excl   min   max          scope */
	{ "model",         "--model",         ST_STRING,  OFF(model),        true,  false, 0,    0,           SCOPE_START },
	{ "prompt",        "--prompt",        ST_STRING,  OFF(prompt),       true,  false, 0,    0,           SCOPE_START },
	{ "text",          "--text",          ST_STRING,  OFF(text),         true,  false, 0,    0,           SCOPE_START },
	{ "echo",          "--echo",          ST_BOOL,    OFF(echo),         false, false, 0,    1,           SCOPE_TURN },
	{ "n_predict",     "--n-predict",     ST_INT,     OFF(n_predict),    false, false, -1,   INT_MAX,     SCOPE_TURN },
	{ "stop",          "--stop",          ST_LIST,    OFF(stop),         false, false, 0,    0,           SCOPE_TURN },
	{ "ignore_eos",    "--ignore-eos",    ST_BOOL,    OFF(ignore_eos),   false, false, 0,    1,           SCOPE_TURN },
	{ "temp",          "--temp",          ST_FLOAT,   OFF(temp),         false, false, 0,    100,         SCOPE_TURN },
	{ "top_k",         "--top-k",         ST_INT,     OFF(top_k),        false, false, 0,    INT_MAX,     SCOPE_TURN },
	{ "top_p",         "--top-p",         ST_FLOAT,   OFF(top_p),        false, true,  0,    1,           SCOPE_TURN },
	{ "min_p",         "--min-p",         ST_FLOAT,   OFF(min_p),        false, false, 0,    1,           SCOPE_TURN },
	{ "repeat_penalty", "--repeat-penalty", ST_FLOAT, OFF(repeat_penalty), false, true, 0,   100,         SCOPE_TURN },
	{ "repeat_last_n", "--repeat-last-n", ST_INT,     OFF(repeat_last_n), false, false, 0,   BIG,         SCOPE_TURN },
	{ "seed",          "--seed",          ST_SEED,    OFF(seed),         true,  false, 0,    (double)SEED_MAX, SCOPE_TURN },
	{ "mem_len",       "--mem-len",       ST_INT,     OFF(mem_len),      true,  false, 0,    BIG,         SCOPE_SESSION },
	{ "seg_len",       "--seg-len",       ST_INT,     OFF(seg_len),      true,  false, 1,    BIG,         SCOPE_SESSION },
	{ "clamp_len",     "--clamp-len",     ST_INT,     OFF(clamp_len),    true,  false, 0,    INT_MAX,     SCOPE_SESSION },
	{ "same_length",   "--same-length",   ST_TRIBOOL, OFF(same_length),  true,  false, 0,    1,           SCOPE_SESSION },
	{ "threads",       "--threads",       ST_INT,     OFF(threads),      false, false, 0,    1024,        SCOPE_SESSION },
	{ "adapt",         "--adapt",         ST_FLOAT,   OFF(adapt),        false, false, 0,    1000,        SCOPE_START },
	{ "json",          "--json",          ST_BOOL,    OFF(json),         false, false, 0,    1,           SCOPE_TURN },
	{ "stats",         "--stats",         ST_BOOL,    OFF(stats),        false, false, 0,    1,           SCOPE_TURN },
	{ "color",         "--color",         ST_COLOR,   OFF(color),        false, false, 0,    0,           SCOPE_TURN },
	{ "unbuffered",    "--unbuffered",    ST_BOOL,    OFF(unbuffered),   false, false, 0,    1,           SCOPE_TURN },
	{ "prime",         "--prime",         ST_LIST,    OFF(prime),        false, false, 0,    0,           SCOPE_START },
	{ "state_in",      "--state-in",      ST_STRING,  OFF(state_in),     true,  false, 0,    0,           SCOPE_START },
	{ "state_out",     "--state-out",     ST_STRING,  OFF(state_out),    true,  false, 0,    0,           SCOPE_START },
};
const int n_settings = (int)(sizeof(settings) / sizeof(settings[0]));

static const char *const color_names[] = { "auto", "always", "never" };

void
errmsg(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout); /* keep the order of output and messages on a tty */
	fputs("txlgen: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void
strlist_add(struct strlist *l, const char *s)
{
	char **v = realloc(l->v, (size_t)(l->n + 1) * sizeof(*v));
	char *d = strdup(s);

	if (!v || !d) {
		errmsg("out of memory");
		exit(EXIT_RUNTIME);
	}
	v[l->n++] = d;
	l->v = v;
}

void
strlist_clear(struct strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* A float default as the short decimal it was written as (0.8, not
 * 0.800000011920929), so that --print-config shows what a user types. */
static double
tidy(float f)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.7g", (double)f);
	return strtod(buf, NULL);
}

void
options_init(struct txlgen_options *o)
{
	struct txl_sampler_params sp = txl_sampler_params_default();

	memset(o, 0, sizeof(*o));
	o->n_predict = 256;
	o->temp = tidy(sp.temp);
	o->top_k = sp.top_k;
	o->top_p = tidy(sp.top_p);
	o->min_p = tidy(sp.min_p);
	o->repeat_penalty = tidy(sp.repeat_penalty);
	o->repeat_last_n = 64;
	o->seed = SEED_RANDOM;
	o->mem_len = TXL_FROM_MODEL;
	o->seg_len = TXL_FROM_MODEL;
	o->clamp_len = TXL_FROM_MODEL;
	o->same_length = TXL_FROM_MODEL;
	o->color = COLOR_AUTO;
}

void
options_free(struct txlgen_options *o)
{
	for (int i = 0; i < n_settings; i++) {
		void *p = (char *)o + settings[i].offset;

		if (settings[i].type == ST_STRING) {
			free(*(char **)p);
			*(char **)p = NULL;
		} else if (settings[i].type == ST_LIST) {
			strlist_clear(p);
		}
	}
	free(o->config);
	free(o->score);
	o->config = o->score = NULL;
}

const struct setting *
setting_find(const char *key)
{
	char k[64];
	size_t i;

	for (i = 0; key[i] && i < sizeof(k) - 1; i++)
		k[i] = key[i] == '-' ? '_' : key[i];
	k[i] = '\0';
	for (int j = 0; j < n_settings; j++)
		if (strcmp(settings[j].key, k) == 0)
			return &settings[j];
	return NULL;
}

bool
setting_check_range(const struct setting *s, double v, char *err,
		    size_t errlen)
{
	bool low = s->min_exclusive ? !(v > s->min) : !(v >= s->min);

	if (isnan(v) || low || v > s->max) {
		if (s->max == INT_MAX)
			snprintf(err, errlen, "%g is out of range (must be %s %g)",
				 v, s->min_exclusive ? ">" : ">=", s->min);
		else
			snprintf(err, errlen, "%g is out of range (%s%g .. %.15g)",
				 v, s->min_exclusive ? "> " : "", s->min,
				 s->max);
		return false;
	}
	return true;
}

/* A whole number in a double, or false. */
static bool
parse_integer(const char *val, double *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(val, &end, 10);
	if (end == val || *end != '\0' || errno == ERANGE)
		return false;
	*out = (double)v;
	return true;
}

bool
setting_parse(const struct setting *s, struct txlgen_options *o,
	      const char *val, char *err, size_t errlen)
{
	void *p = (char *)o + s->offset;
	double d;
	char *end;

	if (!val) {
		/* reset to null: only nullable settings and lists */
		switch (s->type) {
		case ST_STRING:
			free(*(char **)p);
			*(char **)p = NULL;
			return true;
		case ST_LIST:
			strlist_clear(p);
			return true;
		case ST_TRIBOOL:
		case ST_INT:
			if (!s->nullable)
				break;
			*(int *)p = -1;
			return true;
		case ST_SEED:
			*(int64_t *)p = SEED_RANDOM;
			return true;
		default:
			break;
		}
		snprintf(err, errlen, "needs a value");
		return false;
	}

	switch (s->type) {
	case ST_BOOL:
	case ST_TRIBOOL:
		if (!strcmp(val, "true") || !strcmp(val, "1") ||
		    !strcmp(val, "on") || !strcmp(val, "yes"))
			d = 1;
		else if (!strcmp(val, "false") || !strcmp(val, "0") ||
			 !strcmp(val, "off") || !strcmp(val, "no"))
			d = 0;
		else {
			snprintf(err, errlen, "'%s' is not a boolean "
				 "(true or false)", val);
			return false;
		}
		if (s->type == ST_BOOL)
			*(bool *)p = d != 0;
		else
			*(int *)p = (int)d;
		return true;
	case ST_INT:
	case ST_SEED:
		if (!parse_integer(val, &d)) {
			snprintf(err, errlen, "'%s' is not an integer", val);
			return false;
		}
		if (!setting_check_range(s, d, err, errlen))
			return false;
		if (s->type == ST_INT)
			*(int *)p = (int)d;
		else
			*(int64_t *)p = strtoll(val, NULL, 10);
		return true;
	case ST_FLOAT:
		errno = 0;
		d = strtod(val, &end);
		if (end == val || *end != '\0' || errno == ERANGE ||
		    !isfinite(d)) {
			snprintf(err, errlen, "'%s' is not a number", val);
			return false;
		}
		if (!setting_check_range(s, d, err, errlen))
			return false;
		*(double *)p = d;
		return true;
	case ST_STRING:
		if (!*val && strcmp(s->key, "text")) {
			snprintf(err, errlen, "must not be empty");
			return false;
		}
		free(*(char **)p);
		*(char **)p = strdup(val);
		return true;
	case ST_LIST:
		if (!*val) {
			snprintf(err, errlen, "must not be empty");
			return false;
		}
		if (!utf8_valid(val, strlen(val))) {
			snprintf(err, errlen, "is not valid UTF-8");
			return false;
		}
		strlist_add(p, val);
		return true;
	case ST_COLOR:
		for (int i = 0; i < 3; i++) {
			if (!strcmp(val, color_names[i])) {
				*(int *)p = i;
				return true;
			}
		}
		snprintf(err, errlen, "'%s' is not one of auto, always, never",
			 val);
		return false;
	}
	return false;
}

void
setting_format(const struct setting *s, const struct txlgen_options *o,
	       char *buf, size_t len)
{
	const void *p = (const char *)o + s->offset;
	const struct strlist *l;
	size_t at;

	switch (s->type) {
	case ST_BOOL:
		snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false");
		break;
	case ST_TRIBOOL:
		snprintf(buf, len, "%s", *(const int *)p < 0 ? "null" :
			 *(const int *)p ? "true" : "false");
		break;
	case ST_INT:
		if (s->nullable && *(const int *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%d", *(const int *)p);
		break;
	case ST_SEED:
		if (*(const int64_t *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%lld",
				 (long long)*(const int64_t *)p);
		break;
	case ST_FLOAT:
		snprintf(buf, len, "%g", *(const double *)p);
		break;
	case ST_STRING:
		snprintf(buf, len, "%s", *(char *const *)p ?
			 *(char *const *)p : "null");
		break;
	case ST_LIST:
		l = p;
		at = 0;
		buf[0] = '\0';
		for (int i = 0; i < l->n && at < len; i++)
			at += (size_t)snprintf(buf + at, len - at, "%s\"%s\"",
					       i ? ", " : "", l->v[i]);
		if (!l->n)
			snprintf(buf, len, "(none)");
		break;
	case ST_COLOR:
		snprintf(buf, len, "%s", color_names[*(const int *)p]);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* Command line                                                        */

enum {
	OPT_NONE = 0,
	OPT_SETTING,    /* sets settings[key] from the argument */
	OPT_TRUE,       /* sets a bool setting to true */
	OPT_FALSE,      /* sets a bool setting to false */
	OPT_CONFIG,
	OPT_PRINT_CONFIG,
	OPT_SCORE,
	OPT_IDS,
	OPT_INTERACTIVE,
	OPT_HELP,
	OPT_VERSION,
};

struct cli_opt {
	const char *name;
	int has_arg;
	int short_opt;
	int action;
	const char *key;
};

static const struct cli_opt cli_opts[] = {
	{ "model",          required_argument, 'm', OPT_SETTING, "model" },
	{ "prompt",         required_argument, 'f', OPT_SETTING, "prompt" },
	{ "file",           required_argument, 0,   OPT_SETTING, "prompt" },
	{ "text",           required_argument, 'p', OPT_SETTING, "text" },
	{ "echo",           no_argument,       0,   OPT_TRUE,    "echo" },
	{ "no-echo",        no_argument,       0,   OPT_FALSE,   "echo" },
	{ "n-predict",      required_argument, 'n', OPT_SETTING, "n_predict" },
	{ "stop",           required_argument, 0,   OPT_SETTING, "stop" },
	{ "ignore-eos",     no_argument,       0,   OPT_TRUE,    "ignore_eos" },
	{ "no-ignore-eos",  no_argument,       0,   OPT_FALSE,   "ignore_eos" },
	{ "temp",           required_argument, 0,   OPT_SETTING, "temp" },
	{ "top-k",          required_argument, 0,   OPT_SETTING, "top_k" },
	{ "top-p",          required_argument, 0,   OPT_SETTING, "top_p" },
	{ "min-p",          required_argument, 0,   OPT_SETTING, "min_p" },
	{ "repeat-penalty", required_argument, 0,   OPT_SETTING, "repeat_penalty" },
	{ "repeat-last-n",  required_argument, 0,   OPT_SETTING, "repeat_last_n" },
	{ "seed",           required_argument, 's', OPT_SETTING, "seed" },
	{ "mem-len",        required_argument, 0,   OPT_SETTING, "mem_len" },
	{ "seg-len",        required_argument, 0,   OPT_SETTING, "seg_len" },
	{ "clamp-len",      required_argument, 0,   OPT_SETTING, "clamp_len" },
	{ "same-length",    no_argument,       0,   OPT_TRUE,    "same_length" },
	{ "no-same-length", no_argument,       0,   OPT_FALSE,   "same_length" },
	{ "threads",        required_argument, 't', OPT_SETTING, "threads" },
	{ "adapt",          required_argument, 0,   OPT_SETTING, "adapt" },
	{ "json",           no_argument,       0,   OPT_TRUE,    "json" },
	{ "no-json",        no_argument,       0,   OPT_FALSE,   "json" },
	{ "stats",          no_argument,       0,   OPT_TRUE,    "stats" },
	{ "no-stats",       no_argument,       0,   OPT_FALSE,   "stats" },
	{ "color",          optional_argument, 0,   OPT_SETTING, "color" },
	{ "colour",         optional_argument, 0,   OPT_SETTING, "color" },
	{ "unbuffered",     no_argument,       'u', OPT_TRUE,    "unbuffered" },
	{ "prime",          required_argument, 0,   OPT_SETTING, "prime" },
	{ "state-in",       required_argument, 0,   OPT_SETTING, "state_in" },
	{ "state-out",      required_argument, 0,   OPT_SETTING, "state_out" },
	{ "config",         required_argument, 'c', OPT_CONFIG,  NULL },
	{ "print-config",   no_argument,       0,   OPT_PRINT_CONFIG, NULL },
	{ "score",          required_argument, 0,   OPT_SCORE,   NULL },
	{ "ids",            no_argument,       0,   OPT_IDS,     NULL },
	{ "interactive",    no_argument,       'i', OPT_INTERACTIVE, NULL },
	{ "help",           no_argument,       'h', OPT_HELP,    NULL },
	{ "version",        no_argument,       'V', OPT_VERSION, NULL },
};
#define N_CLI ((int)(sizeof(cli_opts) / sizeof(cli_opts[0])))

void
options_usage(FILE *f)
{
	fputs(
"Usage: txlgen [OPTION]...\n"
"Generate or score text with a Transformer-XL language model.\n"
"\n"
"With no prompt option and stdin not a terminal, the prompt is read from\n"
"stdin; with stdin a terminal, an interactive session starts.\n"
"\n"
"Model and input:\n"
"  -m, --model FILE        model file (default: $TXLGEN_MODEL or sotu.bin)\n"
"  -f, --prompt FILE       read the prompt from FILE ('-' = stdin)\n"
"  -p, --text STRING       use STRING as the prompt\n"
"      --echo              print the prompt before the continuation\n"
"      --prime FILE        feed FILE into the memory first (repeatable)\n"
"      --state-in FILE     start from a saved memory state\n"
"      --state-out FILE    save the memory state at the end\n"
"  -i, --interactive       interactive session (REPL)\n"
"\n"
"Length and stopping:\n"
"  -n, --n-predict N       tokens to generate (default 256; -1 = no limit)\n"
"      --stop STRING       stop before STRING (repeatable)\n"
"      --ignore-eos        never generate the end-of-sequence token\n"
"\n"
"Sampling:\n"
"      --temp T            temperature (default 0.8; 0 = greedy)\n"
"      --top-k K           keep the K most likely tokens (default 40; 0 = off)\n"
"      --top-p P           nucleus sampling (default 0.95; 1 = off)\n"
"      --min-p P           drop tokens below P x the top one (default 0.05)\n"
"      --repeat-penalty X  penalise recent tokens (default 1 = off)\n"
"      --repeat-last-n N   tokens the penalty looks back (default 64)\n"
"  -s, --seed N            random seed (default: a new one each run)\n"
"\n"
"Transformer-XL (defaults from the model):\n"
"      --mem-len N         positions kept in the memory\n"
"      --seg-len N         tokens per segment\n"
"      --clamp-len N       clamp relative distances to N (0 = none)\n"
"      --same-length, --no-same-length\n"
"                          every position sees the same number of keys\n"
"  -t, --threads N         OpenBLAS threads (default 0 = OpenBLAS decides)\n"
"\n"
"Scoring:\n"
"      --score FILE        print NLL, perplexity and bits per byte of FILE\n"
"                          ('-' = stdin), read as a stream\n"
"      --ids               --score input is whitespace-separated token ids\n"
"      --adapt LR          learn from the text read (--score, --prime, the\n"
"                          prompt): a gradient step on the output layer\n"
"                          after each segment, learning rate LR (default 0\n"
"                          = off)\n"
"\n"
"Output:\n"
"      --json              JSON lines: one object per token, then a summary\n"
"      --stats             token counts, speed and memory fill on stderr\n"
"      --color[=WHEN]      colour the echoed prompt: auto, always, never\n"
"  -u, --unbuffered        flush after every token even into a pipe\n"
"\n"
"Configuration:\n"
"  -c, --config FILE       read settings from a JSON file\n"
"      --print-config      print the effective settings as JSON and exit\n"
"  -h, --help              show this help and exit\n"
"  -V, --version           show the version and exit\n"
"\n"
"Boolean options have --no- forms (--no-echo, --no-json, ...) that override\n"
"a config file.  Exit status: 0 ok, 1 runtime error, 2 usage error,\n"
"3 bad model or config, 130 interrupted.  See txlgen(1).\n", f);
}

static void
usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("txlgen: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'txlgen --help' for more information.\n", stderr);
}

static void
build_getopt(struct option *lo, char *so)
{
	int k = 0;

	*so++ = '+'; /* no permutation: stop at the first argument */
	*so++ = ':';
	for (int i = 0; i < N_CLI; i++) {
		lo[i].name = cli_opts[i].name;
		lo[i].has_arg = cli_opts[i].has_arg;
		lo[i].flag = NULL;
		lo[i].val = 256 + i;
		if (cli_opts[i].short_opt) {
			so[k++] = (char)cli_opts[i].short_opt;
			if (cli_opts[i].has_arg == required_argument)
				so[k++] = ':';
		}
	}
	so[k] = '\0';
	memset(&lo[N_CLI], 0, sizeof(lo[0]));
}

static int
find_cli(int c)
{
	if (c >= 256 && c < 256 + N_CLI)
		return c - 256;
	for (int i = 0; i < N_CLI; i++)
		if (cli_opts[i].short_opt == c)
			return i;
	return -1;
}

/* The option as the user spelled it, for messages. */
static void
opt_name(int i, int c, char *buf, size_t len)
{
	if (c < 256)
		snprintf(buf, len, "-%c", c);
	else
		snprintf(buf, len, "--%s", cli_opts[i].name);
}

static bool
is_set_on_cli(const bool *seen, const char *key)
{
	const struct setting *s = setting_find(key);

	return seen[s - settings];
}

int
options_parse(struct txlgen_options *o, int argc, char **argv, bool *done)
{
	struct option lo[N_CLI + 1];
	char so[2 * N_CLI + 3];
	bool seen[sizeof(settings) / sizeof(settings[0])] = { false };
	char err[256], name[64];
	int c, rc;

	*done = true;
	build_getopt(lo, so);

	/* Pass 1: the config file, which the other options override. */
	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		int i = find_cli(c);

		if (i >= 0 && cli_opts[i].action == OPT_CONFIG) {
			free(o->config);
			o->config = strdup(optarg);
		}
	}
	if (o->config) {
		rc = config_load(o, o->config);
		if (rc != EXIT_OK)
			return rc;
	}

	/* Pass 2: everything else, in order. */
	optind = 0;
	while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		int i = find_cli(c);
		const struct setting *s;

		if (c == '?' || c == ':') {
			const char *bad = argv[optind - 1];

			if (c == ':')
				usage_error("option '%s' needs an argument",
					    bad);
			else if (optopt && optopt < 256)
				usage_error("unknown option '-%c'", optopt);
			else
				usage_error("unknown option '%s'", bad);
			return EXIT_USAGE;
		}
		if (i < 0) {
			usage_error("unknown option");
			return EXIT_USAGE;
		}
		opt_name(i, c, name, sizeof(name));
		switch (cli_opts[i].action) {
		case OPT_SETTING:
		case OPT_TRUE:
		case OPT_FALSE:
			s = setting_find(cli_opts[i].key);
			/* a list from the command line replaces the config's */
			if (s->type == ST_LIST && !seen[s - settings])
				strlist_clear((void *)((char *)o + s->offset));
			seen[s - settings] = true;
			if (cli_opts[i].action == OPT_SETTING) {
				const char *val = optarg;

				if (s->type == ST_COLOR && !val)
					val = "always";
				if (!setting_parse(s, o, val, err,
						   sizeof(err))) {
					usage_error("%s: %s", name, err);
					return EXIT_USAGE;
				}
			} else if (s->type == ST_BOOL) {
				*(bool *)((char *)o + s->offset) =
					cli_opts[i].action == OPT_TRUE;
			} else {
				*(int *)((char *)o + s->offset) =
					cli_opts[i].action == OPT_TRUE;
			}
			break;
		case OPT_CONFIG:
			break;
		case OPT_PRINT_CONFIG:
			o->print_config = true;
			break;
		case OPT_SCORE:
			free(o->score);
			o->score = strdup(optarg);
			break;
		case OPT_IDS:
			o->ids = true;
			break;
		case OPT_INTERACTIVE:
			o->interactive = true;
			break;
		case OPT_HELP:
			options_usage(stdout);
			return EXIT_OK;
		case OPT_VERSION:
			printf("txlgen %s (libtxl %s)\n", TXLGEN_VERSION,
			       txl_version());
			return EXIT_OK;
		}
	}
	if (optind < argc) {
		usage_error("unexpected argument '%s' (a prompt goes with "
			    "--text or --prompt)", argv[optind]);
		return EXIT_USAGE;
	}

	/* A prompt source on the command line replaces the config's. */
	if (is_set_on_cli(seen, "prompt") && is_set_on_cli(seen, "text")) {
		usage_error("--prompt and --text cannot be used together");
		return EXIT_USAGE;
	}
	if (is_set_on_cli(seen, "prompt")) {
		free(o->text);
		o->text = NULL;
	} else if (is_set_on_cli(seen, "text")) {
		free(o->prompt);
		o->prompt = NULL;
	}
	if (o->ids && !o->score) {
		usage_error("--ids needs --score");
		return EXIT_USAGE;
	}
	if (o->score && o->interactive) {
		usage_error("--score and --interactive cannot be used together");
		return EXIT_USAGE;
	}
	*done = false;
	return EXIT_OK;
}
