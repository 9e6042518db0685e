/* SPDX-License-Identifier: MIT */
/*
 * cli.c - the command line: getopt_long over the option table, and
 * messages that help: an ambiguous abbreviation lists its candidates, a
 * misspelt option or one of llama.cpp's names gets "did you mean"
 * (suggest.c).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "txl.h"

#include "cli.h"
#include "config.h"
#include "errors.h"
#include "settings.h"
#include "suggest.h"
#include "text.h"
#include "usage.h"

/* the long spellings: each row's name, its --no- form, its alias and the
 * alias's --no- form at most */
#define MAX_LONG (4 * SETTINGS_MAX)

/* getopt's table: every spelling of every option (its name, its --no-
 * form, its alias and the alias's --no- form), and the option of each. */
struct getopt_table {
	struct option lo[MAX_LONG + 1];
	char names[MAX_LONG][40];
	int row[MAX_LONG];      /* the option's index in settings[] */
	bool neg[MAX_LONG];     /* a --no- form */
	int n;
	char so[128];
};

/* getopt_long's value for long spelling i of the table */
#define VAL(i) (256 + (i))

/* The argument getopt takes for @p s. */
static int
has_arg(const struct setting *s)
{
	if (s->type == ST_NONE || s->type == ST_BOOL || s->type == ST_TRIBOOL)
		return no_argument;
	return s->bare ? optional_argument : required_argument;
}

static void
build_getopt(struct getopt_table *t)
{
	int k = 0;

	t->so[k++] = '+'; /* no permutation: stop at the first argument */
	t->so[k++] = ':';
	t->n = 0;
	for (int i = 0; i < n_settings; i++) {
		const struct setting *s = &settings[i];

		if (!setting_is_option(s))
			continue;
		for (int form = 0; form < 4; form++) {
			bool neg = form & 1, alias = form & 2;

			if ((neg && !setting_negatable(s)) ||
			    (alias && !s->alias))
				continue;
			setting_option(s, neg, alias, t->names[t->n],
				       sizeof(t->names[0]));
			t->lo[t->n] = (struct option){
				t->names[t->n], neg ? no_argument : has_arg(s),
				NULL, VAL(t->n)
			};
			t->row[t->n] = i;
			t->neg[t->n] = neg;
			t->n++;
		}
		if (s->short_opt) {
			t->so[k++] = (char)s->short_opt;
			if (has_arg(s) == required_argument)
				t->so[k++] = ':';
		}
	}
	t->so[k] = '\0';
	memset(&t->lo[t->n], 0, sizeof(t->lo[0]));
}

/* ------------------------------------------------------------------ */
/* Suggestions                                                         */

/* llama.cpp's short options that mean something else here or nothing */
static const struct {
	char theirs;
	const char *ours;
} short_aliases[] = {
	{ 'r', "--stop (llama.cpp's -r/--reverse-prompt)" },
	{ 'b', "--seg-len (llama.cpp's -b/--batch-size)" },
	{ 'e', "--stop $'\\n' (the shell's $'...' makes the escapes)" },
};

/* llama.cpp's short options of several letters, which getopt would read
 * as one letter and its value ("-np 4" as "-n p"): their long option
 * here, or NULL and what to say instead */
static const struct {
	const char *theirs;
	const char *ours;
	const char *note;
	unsigned progs;       /* the programs the note is of */
} multi_shorts[] = {
	{ "-np", "parallel", NULL, PROG_BOTH },
	{ "-ctk", "kv-type", NULL, PROG_BOTH },
	{ "-ctv", "kv-type", NULL, PROG_BOTH },
	{ "-tb", "threads", NULL, PROG_BOTH },
	{ "-to", "timeout", NULL, PROG_BOTH },
	{ "-ngl", NULL, "runs on the CPU: there are no GPU layers to "
	  "offload", PROG_BOTH },
	{ "-cb", NULL, "steps every running completion together "
	  "always", PROG_SERVER },
	{ "-no-cnv", NULL, "has no chat mode to turn off: it continues the "
	  "text of -p, and -i is its REPL", PROG_TXLGEN },
};

/* other programs' options that have no counterpart here, space-separated
 * names, and what to say of them */
static const struct {
	const char *theirs;
	const char *note;
	unsigned progs;
} habits[] = {
	{ "n-gpu-layers gpu-layers n-gpu-layers-draft main-gpu",
	  "runs on the CPU: there are no GPU layers to offload", PROG_BOTH },
	{ "cont-batching", "steps every running completion together always",
	  PROG_SERVER },
	/* Hugging Face generate()'s */
	{ "do-sample", "samples unless --temp 0 (greedy)", PROG_BOTH },
	{ "num-beams", "has no beam search: it samples, or with --temp 0 "
	  "takes the most likely token", PROG_BOTH },
};

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The row of another program than this one that takes the long option
 * @p name (any spelling), or NULL. */
static const struct setting *
other_program_row(const char *name)
{
	char buf[64];

	for (int i = 0; i < n_settings; i++) {
		const struct setting *s = &settings[i];

		if (!s->key || (s->progs & settings_prog))
			continue;
		for (int form = 0; form < 4; form++) {
			bool neg = form & 1, alias = form & 2;

			if ((neg && !setting_negatable(s)) ||
			    (alias && !s->alias))
				continue;
			if (!strcmp(setting_option(s, neg, alias, buf,
						   sizeof(buf)), name))
				return s;
		}
	}
	return NULL;
}

/*
 * What the option @p arg as typed ("--name", "-np") is elsewhere: this
 * program's option of another program's name (llama.cpp's above all),
 * an option of the other program of the table, or a habit with nothing
 * to match.  Reported ("unknown option '--x'; ...") and true, or false.
 * @p norm is the name in lower case with '-' between words.
 */
static bool
known_elsewhere(const char *arg, const char *norm)
{
	const char *me = prog_name(settings_prog);
	const struct setting *s;
	const char *alias;

	if ((alias = suggest_alias(norm))) {
		s = other_program_row(alias);
		if (!s)
			usage_error("unknown option '%s'; did you mean '--%s'?",
				    arg, alias);
		else
			usage_error("unknown option '%s'; --%s is an option of "
				    "%s", arg, alias,
				    prog_name(s->progs & ~settings_prog));
		return true;
	}
	if ((s = other_program_row(norm))) {
		usage_error("unknown option '%s'; --%s is an option of %s, "
			    "not of %s", arg, norm,
			    prog_name(s->progs & ~settings_prog), me);
		return true;
	}
	for (size_t i = 0; i < sizeof(habits) / sizeof(habits[0]); i++) {
		if ((habits[i].progs & settings_prog) &&
		    suggest_among(norm, habits[i].theirs)) {
			usage_error("unknown option '%s'; %s %s", arg, me,
				    habits[i].note);
			return true;
		}
	}
	return false;
}

/* A multi-letter short option of llama.cpp's at @p arg: reported, true. */
static bool
bad_multi_short(const char *arg)
{
	for (size_t i = 0; i < sizeof(multi_shorts) / sizeof(multi_shorts[0]);
	     i++) {
		if (strcmp(arg, multi_shorts[i].theirs) ||
		    !(multi_shorts[i].progs & settings_prog))
			continue;
		if (multi_shorts[i].ours)
			return known_elsewhere(arg, multi_shorts[i].ours) ||
				(usage_error("unknown option '%s'; did you mean "
					     "'--%s'?", arg,
					     multi_shorts[i].ours), true);
		usage_error("unknown option '%s'; %s %s", arg,
			    prog_name(settings_prog), multi_shorts[i].note);
		return true;
	}
	return false;
}

/* @p name (@p len bytes) in lower case with '-' between words. */
static void
normalise(const char *name, size_t len, char *norm)
{
	for (size_t i = 0; i < len; i++)
		norm[i] = name[i] == '_' ? '-' : (char)tolower(
			(unsigned char)name[i]);
	norm[len] = '\0';
}

/* The error for the long option @p arg ("--name" or "--name=value"). */
static void
bad_long_option(const struct getopt_table *t, const char *arg)
{
	char name[64], norm[64], list[1024], typed[72];
	const char *match[MAX_LONG];
	const char *eq = strchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
	int n_match = 0, best = -1, best_d = 99, at = 0;

	if (len >= sizeof(name))
		len = sizeof(name) - 1;
	memcpy(name, arg + 2, len);
	name[len] = '\0';

	/* an abbreviation of several: getopt calls it unknown */
	for (int i = 0; i < t->n; i++) {
		if (!strncmp(t->names[i], name, len)) {
			if (!strcmp(t->names[i], name)) {
				/* exact: then the problem is the value */
				usage_error("option '--%s' takes no value",
					    name);
				return;
			}
			match[n_match++] = t->names[i];
		}
	}
	qsort(match, (size_t)n_match, sizeof(match[0]), cmp_str);
	list[0] = '\0';
	for (int i = 0; i < n_match && at < (int)sizeof(list); i++)
		at += snprintf(list + at, sizeof(list) - (size_t)at, "%s--%s",
			       i ? ", " : "", match[i]);
	if (n_match > 1 && len) {
		usage_error("option '--%s' is ambiguous: %s", name, list);
		return;
	}

	/* another program's name, this one's in another spelling, or the
	 * other program's option */
	normalise(name, len, norm);
	snprintf(typed, sizeof(typed), "--%s", name);
	if (known_elsewhere(typed, norm))
		return;
	for (int i = 0; i < t->n; i++) {
		int d = suggest_distance(norm, t->names[i]);

		if (d < best_d) {
			best_d = d;
			best = i;
		}
	}
	if (best >= 0 && SUGGEST_CLOSE(best_d, (int)len))
		usage_error("unknown option '--%s'; did you mean '--%s'?",
			    name, t->names[best]);
	else
		usage_error("unknown option '--%s'", name);
}

/*
 * Whether the long option @p arg as typed abbreviates t's spelling @p k
 * while being another program's name or the other program's option
 * ("--api-key", which getopt would take for --api-key-file): reported
 * then, and true.
 */
static bool
abbreviates_another(const struct getopt_table *t, int k, const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
	char norm[64], typed[72];

	if (strncmp(arg, "--", 2) || len >= sizeof(norm) ||
	    (strlen(t->names[k]) == len && !strncmp(t->names[k], arg + 2, len)))
		return false;
	normalise(arg + 2, len, norm);
	snprintf(typed, sizeof(typed), "--%s", norm);
	return known_elsewhere(typed, norm);
}

static void
bad_short_option(int c)
{
	char name[40];

	for (size_t i = 0; i < sizeof(short_aliases) / sizeof(short_aliases[0]);
	     i++) {
		if (short_aliases[i].theirs == c) {
			usage_error("unknown option '-%c'; did you mean %s?", c,
				    short_aliases[i].ours);
			return;
		}
	}
	for (int i = 0; i < n_settings; i++) {
		const struct setting *s = &settings[i];

		if (s->key && s->short_opt == c &&
		    !(s->progs & settings_prog)) {
			usage_error("unknown option '-%c'; -%c/--%s is an option "
				    "of %s, not of %s", c, c,
				    setting_option(s, false, false, name,
						   sizeof(name)),
				    prog_name(s->progs), prog_name(
					    settings_prog));
			return;
		}
	}
	usage_error("unknown option '-%c'", c);
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

/* The option (index of settings[]) of getopt's value @p c, or -1. */
static int
find_opt(const struct getopt_table *t, int c)
{
	if (c >= VAL(0) && c < VAL(t->n))
		return t->row[c - VAL(0)];
	for (int i = 0; i < n_settings; i++)
		if (setting_is_option(&settings[i]) &&
		    settings[i].short_opt == c)
			return i;
	return -1;
}

/* The option as the user spelled it, for messages. */
static void
opt_name(const struct getopt_table *t, int c, char *buf, size_t len)
{
	if (c < VAL(0))
		snprintf(buf, len, "-%c", c);
	else
		snprintf(buf, len, "--%s", t->names[c - VAL(0)]);
}

static bool
all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* Pass 1: the config file, which the other options override. */
static int
load_config(struct txlgen_options *o, int argc, char **argv,
	    const struct getopt_table *t)
{
	struct stat sb;
	int c, seen = 0;

	opterr = 0;
	optind = 0;
	for (;;) {
		/* each argument that getopt starts on (not a value) */
		int at = optind ? optind : 1, i;

		if (at != seen && at < argc) {
			seen = at;
			if (bad_multi_short(argv[at]))
				return EXIT_USAGE;
		}
		if ((c = getopt_long(argc, argv, t->so, t->lo, NULL)) == -1)
			break;
		i = find_opt(t, c);
		if (i >= 0 && settings[i].action == ACT_CONFIG) {
			free(o->config);
			o->config = xstrdup(optarg);
		}
	}
	if (!o->config)
		return EXIT_OK;
	if (all_digits(o->config) && stat(o->config, &sb) != 0) {
		usage_error("-c/--config reads a JSON config file and there is "
			    "no file '%s'; llama.cpp's -c/--ctx-size %s is "
			    "--mem-len %s here", o->config, o->config,
			    o->config);
		return EXIT_USAGE;
	}
	if (!strcmp(o->config, "nv") && stat(o->config, &sb) != 0) {
		usage_error("-c/--config reads a JSON config file and there is "
			    "no file 'nv'; llama.cpp's -cnv (conversation) is "
			    "-i/--interactive here");
		return EXIT_USAGE;
	}
	return config_load(o, o->config);
}

/* Apply option i of the table (getopt value c) with argument @p arg. */
static int
apply(struct txlgen_options *o, const struct getopt_table *t, int i, int c,
      const char *arg, int argc, char **argv)
{
	const struct setting *s = &settings[i];
	bool neg = c >= VAL(0) && t->neg[c - VAL(0)];
	char err[256], name[64];

	if (s->action != ACT_SET && s->action != ACT_ONCE)
		return EXIT_OK;
	opt_name(t, c, name, sizeof(name));
	/* a list from the command line replaces the config's */
	if (s->type == ST_LIST && setting_origin(s, o) != ORIGIN_CLI)
		strlist_clear(setting_ptr(s, o));
	setting_set_origin(s, o, ORIGIN_CLI);
	if (s->type == ST_BOOL || s->type == ST_TRIBOOL) {
		setting_set_bool(s, o, !neg);
		return EXIT_OK;
	}
	if (neg) {
		arg = s->negated;
	} else if (!arg && s->bare) {
		/* "--color always" as well as "--color=always" */
		int n;
		const char *const *names = setting_names(s, &n);

		arg = s->bare;
		for (int k = 0; optind < argc && k < n; k++) {
			if (names[k] && !strcmp(argv[optind], names[k])) {
				arg = argv[optind++];
				break;
			}
		}
	}
	if (!setting_parse(s, o, arg, err, sizeof(err))) {
		usage_error("%s: %s", name, err);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

bool
part_parse(const char *s, int64_t *k, int64_t *n, char *err, size_t len)
{
	const char *arg = s;
	char *end;
	long long a, b;

	errno = 0;
	a = strtoll(s, &end, 10);
	if (end == s || *end != '/' || errno || s[0] == '+' || s[0] == ' ')
		goto bad;
	s = end + 1;
	b = strtoll(s, &end, 10);
	if (end == s || *end || errno || s[0] == '+' || s[0] == ' ')
		goto bad;
	if (b < 1 || b > PARTS_MAX || a < 1 || a > b) {
		snprintf(err, len, "part %lld of %lld: K/N needs 1 <= K <= N "
			 "<= %d", a, b, PARTS_MAX);
		return false;
	}
	*k = a;
	*n = b;
	return true;
bad:
	snprintf(err, len, "'%s' is not K/N (part K of N, as 2/5)", arg);
	return false;
}

/* What the options say together. */
static int
check_combination(struct txlgen_options *o)
{
	const struct setting *prompt = setting_find("prompt");
	const struct setting *text = setting_find("text");
	bool cli_prompt = setting_origin(prompt, o) == ORIGIN_CLI;
	bool cli_text = setting_origin(text, o) == ORIGIN_CLI;

	/* a prompt source on the command line replaces the config's */
	if (cli_prompt && cli_text) {
		usage_error("--prompt and --text cannot be used together");
		return EXIT_USAGE;
	}
	if (cli_prompt) {
		free(o->text);
		o->text = NULL;
	} else if (cli_text) {
		free(o->prompt);
		o->prompt = NULL;
	}
	if (o->ids && !o->score && !o->tokenize) {
		usage_error("--ids needs --score or --tokenize");
		return EXIT_USAGE;
	}
	if (setting_origin(setting_find("score_stride"), o) == ORIGIN_CLI &&
	    !o->score && !o->score_docs) {
		usage_error("--score-stride needs --score or --score-docs");
		return EXIT_USAGE;
	}
	if (o->html && !o->score) {
		usage_error("--html needs --score");
		return EXIT_USAGE;
	}
	if (o->html && !strcmp(o->html, "-") && o->json) {
		usage_error("--html -: the page takes standard output, which "
			    "--json would share");
		return EXIT_USAGE;
	}
	if (o->kl_ref && !o->score) {
		usage_error("--kl-ref needs --score");
		return EXIT_USAGE;
	}
	for (int i = 0; i < 2; i++) {
		const char *k = i ? "kl_ref_compute" : "kl_ref_kv_type";

		if (setting_origin(setting_find(k), o) == ORIGIN_CLI &&
		    !o->kl_ref) {
			usage_error("--%s needs --kl-ref", i ?
				    "kl-ref-compute" : "kl-ref-kv-type");
			return EXIT_USAGE;
		}
	}
	/* the reference starts from an empty memory and stays as it is */
	if (o->kl_ref && (o->prime.n || o->state_in || o->state_out ||
			  o->adapt > 0)) {
		usage_error("--kl-ref: %s", o->prime.n ? "--prime feeds one "
			    "model's memory; the two start empty" :
			    o->state_in ? "--state-in holds one model's memory; "
			    "the two start empty" : o->state_out ?
			    "--state-out: a run of two memories saves neither" :
			    "--adapt changes one model as it reads");
		return EXIT_USAGE;
	}
	if (!o->score_docs && (o->field || o->strict || o->first_line != 1 ||
			       o->streams != 8)) {
		usage_error("--%s needs --score-docs", o->field ? "field" :
			    o->strict ? "strict" : o->first_line != 1 ?
			    "first-line" : "streams");
		return EXIT_USAGE;
	}
	if (o->part) {
		char err[128];
		const char *other = o->html ? "html" : o->kl_ref ? "kl-ref" :
			o->adapt > 0 ? "adapt" : o->prime.n ? "prime" :
			o->state_in ? "state-in" : o->state_out ? "state-out" :
			NULL;

		if (!o->score) {
			usage_error("--part needs --score");
			return EXIT_USAGE;
		}
		if (!part_parse(o->part, &o->part_k, &o->part_n, err,
				sizeof(err))) {
			usage_error("--part: %s", err);
			return EXIT_USAGE;
		}
		/* each part of a run must start from what the whole run
		 * has there, whatever the parts before it read */
		if (other) {
			usage_error("--part: not with --%s (a part knows the "
				    "text before it only through the memory "
				    "it reads again)", other);
			return EXIT_USAGE;
		}
	}
	/* one job a run */
	const char *job = NULL;
	const char *const jobs[] = { o->score ? "score" : NULL,
		o->score_merge.n ? "score-merge" : NULL,
		o->score_docs ? "score-docs" : NULL,
		o->tokenize ? "tokenize" : NULL,
		o->interactive ? "interactive" : NULL,
		o->n_samples > 1 ? "n-samples" : NULL };
	for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
		if (jobs[i] && job) {
			usage_error("--%s and --%s cannot be used together",
				    job, jobs[i]);
			return EXIT_USAGE;
		}
		if (jobs[i])
			job = jobs[i];
	}
	/* one memory to save, and the model as it is for every document */
	if (o->state_out && (o->score_docs || o->n_samples > 1)) {
		usage_error("--state-out: %s", o->score_docs ?
			    "--score-docs starts every document from the "
			    "same memory and keeps none" :
			    "--n-samples leaves one memory per sample; save "
			    "the prompt's with -n 0 and continue it with "
			    "--state-in");
		return EXIT_USAGE;
	}
	if (o->score_docs && o->adapt > 0) {
		usage_error("--adapt: --score-docs scores every document with "
			    "the model as it is");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int
options_parse(struct txlgen_options *o, int argc, char **argv, bool *done)
{
	struct getopt_table t;
	int c, rc;

	*done = true;
	build_getopt(&t);
	rc = load_config(o, argc, argv, &t);
	if (rc != EXIT_OK)
		return rc;

	/* Pass 2: everything else, in order. */
	optind = 0;
	for (;;) {
		int at = optind ? optind : 1, i;

		if ((c = getopt_long(argc, argv, t.so, t.lo, NULL)) == -1) {
			/* --score-merge A B C: the parts after the first too,
			 * options among them */
			if (o->score_merge.n == 0 || optind >= argc ||
			    !strcmp(argv[optind - 1], "--"))
				break;
			strlist_add(&o->score_merge, argv[optind++]);
			continue;
		}
		i = find_opt(&t, c);
		if (c >= VAL(0) && c < VAL(t.n) && at < argc &&
		    abbreviates_another(&t, c - VAL(0), argv[at]))
			return EXIT_USAGE;

		if (c == ':') {
			usage_error("option '%s' needs an argument",
				    argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (c == '?' || i < 0) {
			if (optopt && optopt < 256)
				bad_short_option(optopt);
			else
				bad_long_option(&t, argv[optind - 1]);
			return EXIT_USAGE;
		}
		switch (settings[i].action) {
		case ACT_HELP:
			options_usage(stdout);
			return EXIT_OK;
		case ACT_VERSION:
			options_version(stdout);
			return EXIT_OK;
		case ACT_LIST_TYPES:
			for (int dt = 0; txl_dtype_name(dt); dt++)
				if (txl_dtype_uses(dt) & TXL_DTYPE_MEMORY)
					printf("%s\n", txl_dtype_name(dt));
			return EXIT_OK;
		case ACT_LIST_OPTIONS:
			options_list(stdout);
			return EXIT_OK;
		default:
			rc = apply(o, &t, i, c, optarg, argc, argv);
			if (rc != EXIT_OK)
				return rc;
		}
	}
	if (optind < argc) {
		if (settings_prog == PROG_TXLGEN)
			usage_error("unexpected argument '%s' (give a prompt "
				    "with -p/--text STRING or -f/--prompt "
				    "FILE)", argv[optind]);
		else
			usage_error("unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	rc = settings_prog == PROG_TXLGEN ? check_combination(o) : EXIT_OK;
	if (rc == EXIT_OK)
		*done = false;
	return rc;
}
