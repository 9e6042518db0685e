/* SPDX-License-Identifier: MIT */
/*
 * repl.c - the interactive loop.
 *
 * Each input continues the text held in the session's memory, so the
 * model carries the conversation across turns; an empty line continues
 * the text without new input.  Lines that start with '/' are commands
 * ('//' sends a line that starts with '/').  A line ending in '\'
 * continues on the next line, and lines between two '"""' lines form one
 * input; so does a paste on a terminal (lineio.c).
 *
 * Ctrl-C stops a generation (the abort callback in engine.c polls the
 * flag) or drops the line being typed; at an empty prompt it asks for a
 * second Ctrl-C (or Ctrl-D) before quitting, so that one pressed just as
 * a generation ends does not end the session.  SIGTERM ends it.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "engine-model.h"
#include "engine-streams.h"
#include "lineio.h"
#include "repl.h"
#include "signals.h"
#include "suggest.h"
#include "text.h"

struct repl {
	struct engine *e;
	struct output *out;
	struct lineio io;
	bool quit_armed;       /* Ctrl-C at an empty prompt: again to quit */
	int first_error;       /* exit code of the first error (scripts) */
};

/* Remember an error of a command or turn: scripts exit with it. */
static void
failed(struct repl *r, int rc)
{
	if (rc != EXIT_OK && !r->first_error)
		r->first_error = rc;
}

/* One input, perhaps of several lines, into @p in. */
static enum read_result
read_input(struct repl *r, struct strbuf *in)
{
	enum read_result rr;
	size_t len;
	bool block;

	in->len = 0;
	strbuf_add(in, "", 0);
	rr = lineio_read(&r->io, "> ", &len);
	if (rr != READ_LINE)
		return rr;
	if (r->io.pasted) {	/* a paste is one input, whatever it holds */
		strbuf_add(in, r->io.line, len);
		return READ_LINE;
	}
	block = !strcmp(r->io.line, "\"\"\"");
	if (!block)
		strbuf_add(in, r->io.line, len);
	/* a '\' at the end of a line: the input goes on */
	while (block || (in->len && in->s[in->len - 1] == '\\')) {
		if (!block)
			in->s[--in->len] = '\0';
		rr = lineio_read(&r->io, "... ", &len);
		if (rr == READ_INTERRUPTED) {
			r->io.cut_empty = false; /* only drop this input */
			return rr;
		}
		if (rr == READ_EOF)
			break;
		if (block && !strcmp(r->io.line, "\"\"\""))
			break;
		if (in->len || block)
			strbuf_add(in, "\n", in->len ? 1 : 0);
		strbuf_add(in, r->io.line, len);
	}
	return READ_LINE;
}

static void
print_help(void)
{
	fputs(
"Type text and press Enter: the model continues it, remembering the\n"
"earlier turns.  An empty line continues the text without new input.\n"
"End a line with \\ to go on on the next one, or put the input between\n"
"two lines of \"\"\"; a paste is one input, whatever its lines.\n"
"Ctrl-C stops the generation or drops the line;\n"
"Ctrl-C twice at an empty prompt, or Ctrl-D, quits.\n"
"\n"
"  /help              this help\n"
"  /reset             clear the memory: the next input starts a new text\n"
"  /set KEY VALUE     change a setting (/show lists them; VALUE null =\n"
"                     default; \\n and \\t in VALUE are a newline, a tab)\n"
"  /show              the effective settings, as JSON\n"
"  /mem               memory fill, tokens consumed, receptive field\n"
"  /save FILE         save the memory to FILE\n"
"  /load FILE         load a memory saved with /save or --state-out\n"
"  /quit              leave (also /exit)\n"
"  //TEXT             send TEXT that starts with '/'\n", stdout);
}

/* Turn \n, \t and \\ into the characters they stand for. */
static void
unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			*d++ = *s == 'n' ? '\n' : *s == 't' ? '\t' :
				*s == 'r' ? '\r' : *s;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

void
repl_settings(struct engine *e)
{
	struct txlgen_options *o = e->opts;
	const struct setting *s = setting_find("mem_len");
	struct txl_session_params p = txl_session_params_default();
	struct txl_session_params r = txl_session_params_default();

	/* a model without memory has none to enlarge; an adaptive-span
	 * model's is its heads' spans */
	if (!txl_model_has_memory(e->mod->model) ||
	    txl_model_span(e->mod->model, 0, 0) >= 0 ||
	    (o->mem_len >= 0 && setting_origin(s, o) != ORIGIN_MODEL))
		return;
	/* the mem_len the library makes of the options' (the model's when
	 * they leave it): alone, the others are the session's to check
	 * (same_length, which needs a memory, left out) */
	p.mem_len = o->mem_len;
	p.same_length = 0;
	if (txl_session_params_resolve(e->mod->model, &p, &r) == TXL_OK &&
	    r.mem_len < REPL_MIN_MEM_LEN)
		o->mem_len = REPL_MIN_MEM_LEN;
}

/* "(temp = 0.5)": the value now in effect, as JSON. */
static void
show_setting(struct repl *r, const struct setting *s)
{
	char *v;

	if (!r->io.tty)
		return;
	v = config_value(s, r->e->opts, r->e->streams->session);
	text_clean_line(v);
	printf("(%s = %s)\n", s->key, v);
	free(v);
}

static int
cmd_set(struct repl *r, char *args)
{
	struct engine *e = r->e;
	const struct setting *s;
	char *key = args, *val, err[256];
	int old_int = 0;
	enum origin old_origin;

	while (*key == ' ')
		key++;
	val = key + strcspn(key, " \t");
	if (*val) {
		*val++ = '\0';
		while (*val == ' ' || *val == '\t')
			val++;
	}
	if (!*key) {
		errmsg("/set needs a KEY and a VALUE; /show lists the keys");
		return EXIT_USAGE;
	}
	s = setting_find(key);
	if (!s) {
		const char *hint = suggest_setting(key);

		if (hint)
			errmsg("/set: unknown key '%s'; did you mean '%s'?", key,
			       hint);
		else
			errmsg("/set: unknown key '%s'; /show lists the keys",
			       key);
		return EXIT_USAGE;
	}
	if (s->scope == SCOPE_START) {
		errmsg("/set: '%s' can only be set at start-up", s->key);
		return EXIT_USAGE;
	}
	if (s->type == ST_INT || s->type == ST_TRIBOOL || s->type == ST_ENUM)
		old_int = *(int *)setting_ptr(s, e->opts);
	old_origin = setting_origin(s, e->opts);
	if (!strcmp(val, "null") || !strcmp(val, "default")) {
		if (!setting_parse(s, e->opts, NULL, err, sizeof(err))) {
			errmsg("/set %s: %s", s->key, err);
			return EXIT_USAGE;
		}
		repl_settings(e);  /* the REPL's default memory */
	} else {
		if (!*val) {
			errmsg("/set %s: needs a value", s->key);
			return EXIT_USAGE;
		}
		unescape(val);
		if (s->type == ST_LIST)
			strlist_clear(setting_ptr(s, e->opts));
		if (!setting_parse(s, e->opts, val, err, sizeof(err))) {
			errmsg("/set %s: %s", s->key, err);
			return EXIT_USAGE;
		}
	}
	setting_set_origin(s, e->opts, ORIGIN_SET);
	if (s->offset == offsetof(struct txlgen_options, logit_bias) &&
	    !s->in_server && engine_make_bias(e) != EXIT_OK) {
		strlist_clear(setting_ptr(s, e->opts));
		engine_make_bias(e);
		return EXIT_USAGE;
	}
	if (s->scope == SCOPE_SESSION) {
		int rc = engine_apply_settings(e);

		if (rc != EXIT_OK) {
			/* refused: the session kept its settings and memory */
			*(int *)setting_ptr(s, e->opts) = old_int;
			setting_set_origin(s, e->opts, old_origin);
			return rc;
		}
	}
	out_free(r->out);
	out_init(r->out, stdout, e->opts, true);
	r->out->color_text = r->out->color;
	show_setting(r, s);
	return EXIT_OK;
}

/* Run the command in @p line; returns false for /quit. */
static bool
command(struct repl *r, char *line)
{
	struct engine *e = r->e;
	char *cmd = line + 1, *arg = cmd + strcspn(cmd, " \t");
	int rc = EXIT_OK;

	if (*arg) {
		*arg++ = '\0';
		arg += strspn(arg, " \t");
		/* no trailing blanks in file names */
		for (size_t n = strlen(arg); n && (arg[n - 1] == ' ' ||
						   arg[n - 1] == '\t'); n--)
			arg[n - 1] = '\0';
	}
	if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit") ||
	    !strcmp(cmd, "q")) {
		return false;
	} else if (!strcmp(cmd, "help") || !strcmp(cmd, "?")) {
		print_help();
	} else if (!strcmp(cmd, "reset")) {
		engine_reset(e);
		if (r->io.tty)
			fputs("(memory cleared)\n", stdout);
	} else if (!strcmp(cmd, "set")) {
		rc = cmd_set(r, arg);
	} else if (!strcmp(cmd, "show")) {
		struct txlgen_options shown;

		engine_effective_options(e, &shown);
		config_print(stdout, &shown, e->streams->session, false);
	} else if (!strcmp(cmd, "mem")) {
		engine_print_mem(e, stdout, "");
	} else if (!strcmp(cmd, "save") || !strcmp(cmd, "load")) {
		if (!*arg) {
			errmsg("/%s needs a FILE", cmd);
			rc = EXIT_USAGE;
		} else {
			rc = cmd[0] == 's' ? engine_save(e, arg) :
				engine_load(e, arg);
			if (rc == EXIT_OK && r->io.tty) {
				char *name = xstrdup(arg);

				text_clean_line(name);
				printf("(memory %s %s)\n", cmd[0] == 's' ?
				       "saved to" : "loaded from", name);
				free(name);
			}
		}
	} else {
		static const char *const commands[] = {
			"help", "reset", "set", "show", "mem", "save", "load",
			"quit", "exit",
		};
		const char *hint = suggest_closest(cmd, commands,
			(int)(sizeof(commands) / sizeof(commands[0])));

		if (hint)
			errmsg("unknown command '/%s'; did you mean '/%s'?", cmd,
			       hint);
		else
			errmsg("unknown command '/%s'; /help lists the "
			       "commands", cmd);
		rc = EXIT_USAGE;
	}
	failed(r, rc);
	fflush(stdout);
	return true;
}

/* Generate a continuation of @p in; returns an exit code for what ends
 * the loop (EXIT_OK otherwise). */
static int
turn(struct repl *r, struct input *in)
{
	int rc;

	lineio_echo(&r->io, false);
	rc = engine_generate(r->e, in, r->out);
	lineio_echo(&r->io, true);
	if (rc == EXIT_INTERRUPTED) {
		if (interrupted == SIGTERM)
			return rc;
		interrupted = 0;
		if (r->io.tty)
			fputs("(stopped)\n", stderr);
		rc = EXIT_OK;
	}
	if (r->e->opts->stats && r->e->streams->last.end != GEN_ERROR)
		engine_print_stats(r->e);
	if (ferror(stdout))
		return EXIT_RUNTIME;  /* already reported */
	/* a bad setting or input spoils one turn, not the session */
	failed(r, rc);
	return EXIT_OK;
}

/* The banner, each line cut to the terminal's width. */
static void
banner(struct repl *r)
{
	const char *desc = txl_model_meta(r->e->mod->model, "description");
	int width = lineio_width();
	char line[1024];

	snprintf(line, sizeof(line), "txlgen %s: %s%s%s%s", TXLGEN_VERSION,
		 r->e->mod->path, desc ? " (" : "", desc ? desc : "",
		 desc ? ")" : "");
	text_clean_line(line);
	text_fit(line, width - 1);
	fprintf(stderr, "%s\n", line);
	snprintf(line, sizeof(line), "%lld parameters, memory %d positions",
		 (long long)txl_model_n_params(r->e->mod->model),
		 engine_params(r->e).mem_len);
	text_fit(line, width - 1);
	fprintf(stderr, "%s\n", line);
	snprintf(line, sizeof(line), "The model continues the text you type; "
		 "it does not chat or answer.");
	text_fit(line, width - 1);
	fprintf(stderr, "%s\n", line);
	snprintf(line, sizeof(line), "/help for help, \"\"\" for many lines, "
		 "Ctrl-D to quit.");
	text_fit(line, width - 1);
	fprintf(stderr, "%s\n", line);
}

/* A signal at the prompt.  Returns false to end the loop. */
static bool
on_signal(struct repl *r, int *rc)
{
	bool empty = r->io.cut_empty;

	if (interrupted == SIGTERM) {
		*rc = EXIT_INTERRUPTED;
		return false;
	}
	interrupted = 0;
	if (r->io.tty)
		fputs(empty ? "\n" : "^C\n", stdout);
	if (!empty) {
		r->quit_armed = false;
		return true;        /* the line is dropped */
	}
	if (r->quit_armed || !r->io.tty) {
		*rc = EXIT_INTERRUPTED;
		return false;
	}
	r->quit_armed = true;
	fflush(stdout);
	fputs("(Ctrl-C again or Ctrl-D to quit)\n", stderr);
	return true;
}

int
repl_run(struct engine *e, struct output *out, struct input *first)
{
	struct repl r = { .e = e, .out = out };
	struct strbuf in = { 0 };
	int rc = EXIT_OK;

	engine_interactive(e);
	out->color_text = out->color;
	lineio_open(&r.io);
	if (r.io.tty)
		banner(&r);
	if (first) {
		rc = turn(&r, first);
		if (rc != EXIT_OK)
			goto out;
	}
	for (;;) {
		enum read_result rr = read_input(&r, &in);
		struct input text;

		if (rr == READ_EOF) {
			if (r.io.tty)
				fputc('\n', stdout);
			break;
		}
		if (rr == READ_INTERRUPTED) {
			if (!on_signal(&r, &rc))
				break;
			continue;
		}
		r.quit_armed = false;
		lineio_add_history(&r.io, in.s);
		if (in.s[0] == '/' && in.s[1] != '/') {
			if (!command(&r, in.s))
				break;
			if (ferror(stdout)) {
				rc = EXIT_RUNTIME;
				break;
			}
			continue;
		}
		input_open_text(&text, in.s + (in.s[0] == '/'),
				in.len - (in.s[0] == '/'), "(input)");
		rc = turn(&r, &text);
		if (rc != EXIT_OK)
			break;
	}
out:
	fflush(stdout);
	strbuf_free(&in);
	lineio_close(&r.io);
	if (rc == EXIT_OK && !r.io.tty)
		rc = r.first_error;
	return rc;
}
