/* SPDX-License-Identifier: MIT */
/*
 * main.c - txlgen: generate or score text with a Transformer-XL model.
 *
 * stdout carries only the generated text (or JSON, or the scores);
 * everything else goes to stderr.  SIGPIPE keeps its default action, so
 * that `txlgen | head` ends quietly; other write errors (a full disk, a
 * closed stdout) are reported and give exit status 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl.h"

#include "config.h"
#include "engine.h"
#include "options.h"
#include "output.h"
#include "repl.h"

#define DEFAULT_MODEL "sotu.bin"

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

/* The default model: $TXLGEN_MODEL, else sotu.bin installed or in the
 * source tree.  NULL (reported) if there is none. */
static char *
default_model(void)
{
	const char *env = getenv("TXLGEN_MODEL");
	const char *dirs[] = { TXLGEN_DATADIR, TXLGEN_SOURCE_MODELS };
	char *path;

	if (env && *env)
		return strdup(env);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (asprintf(&path, "%s/%s", dirs[i], DEFAULT_MODEL) < 0)
			return NULL;
		if (access(path, R_OK) == 0)
			return path;
		free(path);
	}
	errmsg("no model: the default model %s is in neither %s nor %s; "
	       "pass --model FILE or set TXLGEN_MODEL", DEFAULT_MODEL,
	       dirs[0], dirs[1]);
	return NULL;
}

/* The whole prompt file ('-' = stdin), without its final newlines (as
 * the shell's $(cat FILE) has it). */
static char *
read_prompt(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	const char *name = strcmp(path, "-") ? path : "(stdin)";
	struct strbuf b = { 0 };
	char buf[65536];
	size_t n;

	if (!f) {
		errmsg("%s: %s", path, strerror(errno));
		return NULL;
	}
	strbuf_add(&b, "", 0);
	sigint_setup(false);  /* Ctrl-C must end a read from a terminal */
	while (!interrupted && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		strbuf_add(&b, buf, n);
	sigint_setup(true);
	if (interrupted) {
		if (f != stdin)
			fclose(f);
		strbuf_free(&b);
		return NULL;
	}
	if (ferror(f)) {
		if (!interrupted)
			errmsg("%s: %s", name, strerror(errno));
		if (f != stdin)
			fclose(f);
		strbuf_free(&b);
		return NULL;
	}
	if (f != stdin)
		fclose(f);
	while (b.len && (b.s[b.len - 1] == '\n' || b.s[b.len - 1] == '\r'))
		b.s[--b.len] = '\0';
	*len = b.len;
	return b.s;
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
	return rc;
}

int
main(int argc, char **argv)
{
	struct txlgen_options o;
	struct engine e;
	struct output out;
	char *model = NULL, *prompt = NULL;
	size_t prompt_len = 0;
	bool done, repl;
	int rc;

	signal(SIGPIPE, SIG_DFL);
	fix_std_fds();
	/* characters for libedit; numbers stay in the C locale */
	setlocale(LC_CTYPE, "");

	options_init(&o);
	rc = options_parse(&o, argc, argv, &done);
	if (done) {
		options_free(&o);
		return finish(rc);
	}
	if (o.print_config) {
		if (!config_print(stdout, &o, NULL) && !ferror(stdout))
			rc = EXIT_RUNTIME;
		options_free(&o);
		return finish(rc);
	}

	sigint_setup(true);

	model = o.model ? strdup(o.model) : default_model();
	if (!model) {
		options_free(&o);
		return finish(EXIT_BADMODEL);
	}

	repl = !o.score && (o.interactive ||
			    (isatty(STDIN_FILENO) && !o.prompt && !o.text));
	for (int i = 0; i < o.prime.n; i++) {
		bool prompt_stdin = !repl && !o.text &&
			(!o.prompt || !strcmp(o.prompt, "-"));

		if (!strcmp(o.prime.v[i], "-") &&
		    (prompt_stdin || repl || (o.score && !strcmp(o.score, "-")))) {
			errmsg("--prime - reads stdin, which is also the %s; "
			       "give that with a file or --text", o.score ?
			       "--score input" : repl ? "interactive input" :
			       "prompt");
			free(model);
			options_free(&o);
			return finish(EXIT_USAGE);
		}
	}
	if (o.score) {
		/* nothing to read before the model */
	} else if (o.text) {
		prompt = strdup(o.text);
		prompt_len = strlen(prompt);
	} else if (o.prompt || !repl) {
		prompt = read_prompt(o.prompt ? o.prompt : "-", &prompt_len);
		if (!prompt) {
			rc = interrupted ? EXIT_INTERRUPTED : EXIT_RUNTIME;
			free(model);
			options_free(&o);
			return finish(rc);
		}
	}

	rc = engine_open(&e, &o, model);
	if (rc != EXIT_OK)
		goto out;
	e.keep_memory = o.state_out != NULL;
	if (o.state_in && (rc = engine_load(&e, o.state_in)) != EXIT_OK)
		goto out;
	for (int i = 0; i < o.prime.n; i++)
		if ((rc = engine_prime(&e, o.prime.v[i])) != EXIT_OK)
			goto out;

	if (o.score) {
		rc = engine_score(&e, o.score, stdout);
	} else if (repl) {
		out_init(&out, stdout, &o, true);
		rc = repl_run(&e, &out, prompt, prompt_len);
		out_free(&out);
	} else {
		out_init(&out, stdout, &o, isatty(STDOUT_FILENO));
		rc = engine_generate(&e, prompt, prompt_len, &out);
		out_free(&out);
		if (o.stats && e.last.end != GEN_ERROR)
			engine_print_stats(&e);
	}
	/* the REPL's memory is whole even after Ctrl-C at the prompt */
	if (o.state_out && (rc == EXIT_OK || (repl && rc == EXIT_INTERRUPTED))) {
		int src = engine_save(&e, o.state_out);

		if (src != EXIT_OK)
			rc = src;
	}
	if (rc == EXIT_INTERRUPTED && !repl)
		errmsg("interrupted");
out:
	if (e.model)
		engine_close(&e);
	free(prompt);
	free(model);
	options_free(&o);
	return finish(rc);
}
