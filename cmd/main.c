/* SPDX-License-Identifier: MIT */
/*
 * main.c - txlgen: generate or score text with a Transformer-XL model.
 *
 * stdout carries only the generated text (or JSON, or the scores);
 * everything else goes to stderr.  SIGPIPE keeps its default action, so
 * that `txlgen | head` ends quietly; other write errors (a full disk, a
 * closed stdout) are reported and give exit status 1.  SIGINT, SIGTERM
 * and SIGHUP end a run cleanly (signals.c): what was generated is
 * written, no state file is left half-written, exit status 130, 143 or
 * 129; while the model and the state load, at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "txl.h"

#include "cli.h"
#include "config.h"
#include "engine-model.h"
#include "engine-streams.h"
#include "engine.h"
#include "errors.h"
#include "input.h"
#include "models.h"
#include "modes.h"
#include "output.h"
#include "progress.h"
#include "repl.h"
#include "settings.h"
#include "signals.h"

/*
 * Give closed standard descriptors a harmless file, so that no file we
 * open later becomes "stdout".  A closed stdout gets a read-only one:
 * writing then fails (EBADF) and is reported like any write error.
 */
static void
fix_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			open("/dev/null", fd == 2 ? O_WRONLY : O_RDONLY);
}

/* The model file: --model, the config's "model", $TXLGEN_MODEL or the
 * default model, each a file or a name along the model path (models.c).
 * NULL (reported) if there is none. */
static char *
choose_model(const struct txlgen_options *o)
{
	const char *env = getenv("TXLGEN_MODEL");
	const struct setting *s = setting_find("model");
	char what[1100];

	if (o->model) {
		if (setting_origin(s, o) == ORIGIN_CONFIG)
			snprintf(what, sizeof(what), "%s: key 'model'",
				 o->config);
		else
			snprintf(what, sizeof(what), "--model");
		return model_find(o->model, what);
	}
	if (env && *env)
		return model_find(env, "TXLGEN_MODEL");
	return model_find(DEFAULT_MODEL_NAME, NULL);
}

/* Flush and close stdout; a failure is an error unless one was already
 * reported. */
static int
finish(int rc)
{
	int e = 0;

	if (fflush(stdout) != 0 || ferror(stdout))
		e = errno ? errno : EIO;
	if (fclose(stdout) != 0 && !e)
		e = errno ? errno : EIO;
	if (e && rc == EXIT_OK) {
		errmsg("writing output failed: %s", strerror(e));
		rc = EXIT_RUNTIME;
	}
	return rc == EXIT_INTERRUPTED ? signals_exit_code() : rc;
}

/* Is stdout a file (or /dev/null), not a terminal or a pipe?  Then the
 * terminal may show how far generation is: the reader of a pipe (less,
 * head) may draw on it or end the run before the line is erased. */
static bool
into_file(void)
{
	struct stat sb;

	return fstat(STDOUT_FILENO, &sb) == 0 && !isatty(STDOUT_FILENO) &&
		(S_ISREG(sb.st_mode) || S_ISCHR(sb.st_mode));
}

/* Everything a run reads, opened (and checked) before the model loads. */
struct inputs {
	struct input prompt;
	bool have_prompt;
	struct input stream;   /* --score, --score-docs or --tokenize */
	struct input *prime;
	int n_prime;
};

/* The input of --score, --score-docs or --tokenize, or NULL. */
static const char *
stream_of(const struct txlgen_options *o)
{
	return o->score ? o->score : o->score_docs ? o->score_docs
		: o->tokenize;
}

static int
check_stdin_users(const struct txlgen_options *o, bool repl)
{
	bool prompt_stdin = !repl && !o->text && !o->score &&
		!o->score_docs && !o->tokenize &&
		(!o->prompt || !strcmp(o->prompt, "-"));
	const char *stream = stream_of(o);

	for (int i = 0; i < o->prime.n; i++) {
		if (!strcmp(o->prime.v[i], "-") && (prompt_stdin || repl ||
		    (stream && !strcmp(stream, "-")))) {
			errmsg("--prime - reads stdin, which is also the %s; "
			       "give that with a file or --text", stream ?
			       (o->score ? "--score input" : o->score_docs ?
				"--score-docs input" : "--tokenize input") :
			       repl ?
			       "interactive input" : "prompt");
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

static int
open_inputs(struct inputs *in, const struct txlgen_options *o, bool repl)
{
	const char *stream = stream_of(o);

	memset(in, 0, sizeof(*in));
	in->prompt.fd = in->stream.fd = -1;
	if (stream) {
		if (!input_open(&in->stream, stream, NULL))
			return EXIT_RUNTIME;
		/* --score reads text; --tokenize shows what any bytes
		 * become */
		in->stream.utf8 = o->score != NULL;
	} else if (o->text) {
		input_open_text(&in->prompt, o->text, strlen(o->text),
				"--text");
		in->have_prompt = true;
	} else if (o->prompt || !repl) {
		if (!input_open(&in->prompt, o->prompt ? o->prompt : "-",
				"--prompt reads a file; use -p/--text for a "
				"string"))
			return EXIT_RUNTIME;
		in->prompt.utf8 = true;
		in->have_prompt = true;
	}
	in->prime = xrealloc(NULL, (size_t)o->prime.n * sizeof(*in->prime));
	for (; in->n_prime < o->prime.n; in->n_prime++)
		if (!input_open(&in->prime[in->n_prime],
				o->prime.v[in->n_prime], NULL))
			return EXIT_RUNTIME;
		else
			in->prime[in->n_prime].utf8 = true;
	return EXIT_OK;
}

static void
close_inputs(struct inputs *in)
{
	input_close(&in->prompt);
	input_close(&in->stream);
	for (int i = 0; i < in->n_prime; i++)
		input_close(&in->prime[i]);
	free(in->prime);
}

/* Load the model and make the session with the settings of the run
 * (the REPL's own defaults where it is one).  Returns an exit code. */
static int
open_engine(struct engine *e, struct txlgen_options *o, const char *model,
	    bool repl)
{
	const struct setting *mem = setting_find("mem_len");
	int rc = engine_load_model(e, o, model), state_len;

	if (rc == EXIT_OK && repl)
		repl_settings(e);
	/* a state's memory is as long as the session that saved it (the
	 * REPL's, a run's with --mem-len): kept so unless the user says
	 * otherwise (engine_load() then says what fits) */
	if (rc == EXIT_OK && o->state_in &&
	    setting_origin(mem, o) < ORIGIN_CONFIG &&
	    txl_model_has_memory(e->mod->model) &&
	    txl_state_mem_len(o->state_in, &state_len) == TXL_OK) {
		o->mem_len = state_len;
		setting_set_origin(mem, o, ORIGIN_STATE);
	}
	return rc == EXIT_OK ? engine_apply_settings(e) : rc;
}

/* --print-config (the settings of the run these options make, the
 * model's values and the seed resolved) and --info. */
static int
describe(struct txlgen_options *o, const char *model, bool repl)
{
	struct engine e = { 0 };
	struct txlgen_options shown;
	int rc;

	if (o->info) {
		rc = engine_load_model(&e, o, model);
		if (rc == EXIT_OK) {
			signals_immediate(false);
			rc = engine_info(&e, stdout);
		}
	} else {
		rc = open_engine(&e, o, model, repl);
		if (rc == EXIT_OK) {
			signals_immediate(false);
			engine_effective_options(&e, &shown);
			if (!config_print(stdout, &shown, e.streams->session,
					  true) && !ferror(stdout))
				rc = EXIT_RUNTIME;
		}
	}
	engine_close(&e);
	return rc;
}

/* The run proper: the model is loaded, the inputs are open. */
static int
run(struct engine *e, struct txlgen_options *o, struct inputs *in, bool repl,
    bool prime_only)
{
	struct output out;
	int rc = EXIT_OK;

	e->streams->keep_memory = o->state_out != NULL;
	if (o->state_in && (rc = engine_load(e, o->state_in)) != EXIT_OK)
		return rc;
	/* from here on a signal stops the work, which then finishes */
	signals_immediate(false);
	for (int i = 0; i < in->n_prime; i++)
		if ((rc = engine_prime(e, &in->prime[i])) != EXIT_OK)
			return rc;

	if (prime_only) {
		/* the memory of the primes, saved below */
	} else if (o->score) {
		rc = engine_score(e, &in->stream, stdout);
	} else if (o->score_docs) {
		rc = engine_score_docs(e, &in->stream, stdout);
	} else if (repl) {
		out_init(&out, stdout, o, true);
		rc = repl_run(e, &out, in->have_prompt ? &in->prompt : NULL);
		out_free(&out);
	} else {
		out_init(&out, stdout, o, o->final_newline);
		e->streams->gen_progress = !out.tty && into_file();
		rc = engine_generate(e, &in->prompt, &out);
		out_free(&out);
		if (o->stats && e->streams->last.end != GEN_ERROR)
			engine_print_stats(e);
	}
	/* the REPL's memory is whole even after Ctrl-C at the prompt */
	if (o->state_out && (rc == EXIT_OK || (repl && rc == EXIT_INTERRUPTED))) {
		int src = engine_save(e, o->state_out);

		if (src != EXIT_OK)
			rc = src;
	}
	return rc;
}

int
main(int argc, char **argv)
{
	struct txlgen_options o;
	struct engine e = { 0 };
	struct inputs in = { 0 };
	char *model = NULL;
	bool done, repl, prime_only;
	int rc;

	signal(SIGPIPE, SIG_DFL);
	fix_std_fds();
	/* characters for libedit; numbers stay in the C locale.  Text is
	 * UTF-8 whatever the locale: where it names none (LC_ALL=C, POSIX),
	 * C.UTF-8, so that the line editor keeps the characters typed */
	setlocale(LC_CTYPE, "");
	if (!strcmp(nl_langinfo(CODESET), "ANSI_X3.4-1968"))
		setlocale(LC_CTYPE, "C.UTF-8");

	options_init(&o);
	/* before the config file, which may be a stream that never comes */
	signals_setup(true);
	rc = options_parse(&o, argc, argv, &done);
	if (done) {
		if (rc != EXIT_OK && interrupted) {
			errmsg("%s", signals_word());
			rc = EXIT_INTERRUPTED;
		}
		options_free(&o);
		return finish(rc);
	}

	progress_force(o.progress);
	if (o.list_models) {
		rc = models_list(stdout, o.json);
		options_free(&o);
		return finish(rc);
	}
	/* the parts' summaries: no model */
	if (o.score_merge.n) {
		rc = score_merge(&o.score_merge, o.json, stdout);
		options_free(&o);
		return finish(rc);
	}
	model = choose_model(&o);
	if (!model) {
		options_free(&o);
		return finish(EXIT_BADMODEL);
	}
	/* --prime and --state-out with no prompt on a terminal: prime and
	 * save, no generation, no interactive session (-i asks for it) */
	prime_only = !o.score && !o.score_docs && !o.tokenize &&
		!o.interactive && o.prime.n > 0 && o.state_out &&
		isatty(STDIN_FILENO) && !o.prompt && !o.text;
	if (prime_only)
		o.text = xstrdup("");
	repl = !o.score && !o.score_docs && !o.tokenize && (o.interactive ||
		(isatty(STDIN_FILENO) && !o.prompt && !o.text));
	if (repl && o.n_samples > 1) {
		usage_error("--n-samples: the interactive session generates one "
			    "continuation at a time; give a prompt with -p or "
			    "-f");
		rc = EXIT_USAGE;
		goto out;
	}
	if (o.print_config || o.info) {
		rc = describe(&o, model, repl);
		goto out;
	}

	signals_int_ends_run(!repl);
	rc = check_stdin_users(&o, repl);
	if (rc == EXIT_OK)
		rc = open_inputs(&in, &o, repl);
	/* not found out after the whole run */
	if (rc == EXIT_OK && o.state_out && !o.tokenize)
		rc = engine_check_save(o.state_out);
	if (rc != EXIT_OK)
		goto out;

	if (o.tokenize) {
		rc = engine_load_model(&e, &o, model);
		if (rc == EXIT_OK) {
			signals_immediate(false);
			rc = engine_list_tokens(&e, &in.stream, stdout);
		}
	} else {
		rc = open_engine(&e, &o, model, repl);
		if (rc == EXIT_OK)
			rc = run(&e, &o, &in, repl, prime_only);
	}
	if (rc == EXIT_INTERRUPTED && (!repl || interrupted == SIGTERM))
		errmsg("%s", signals_word());
out:
	engine_close(&e);
	close_inputs(&in);
	free(model);
	options_free(&o);
	return finish(rc);
}
