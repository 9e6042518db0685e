/* SPDX-License-Identifier: MIT */
/*
 * repl.c - the interactive loop.
 *
 * Each input continues the text held in the session's memory, so the
 * model carries the conversation across turns; an empty line continues
 * the text without new input.  Lines that start with '/' are commands
 * ('//' sends a line that starts with '/').  A line ending in '\'
 * continues on the next line, and lines between two '"""' lines form one
 * input.
 *
 * On a terminal, libedit provides line editing and history; Ctrl-C stops
 * a generation (the abort callback in engine.c polls the flag), and at
 * an empty prompt it ends the program like Ctrl-D.  Without a terminal
 * the same loop reads plain lines, with no prompt and no history, so it
 * can be scripted.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

#ifdef HAVE_LIBEDIT
#include <histedit.h>
#endif

#include "config.h"
#include "repl.h"

#define HISTORY_SIZE 1000

struct repl {
	struct engine *e;
	struct output *out;
	bool tty;              /* stdin and stdout are terminals */
	bool ctrl_c_empty;     /* the interrupted line was empty */
	const char *prompt;
	char *histfile;        /* NULL: no history */
#ifdef HAVE_LIBEDIT
	EditLine *el;
	History *hist;
#endif
	char *line;            /* getline buffer */
	size_t line_cap;
};

enum read_result {
	READ_LINE,
	READ_EOF,
	READ_INTERRUPTED,
};

/* $TXLGEN_HISTFILE, or $XDG_STATE_HOME/txlgen/history; NULL if empty. */
static char *
history_path(void)
{
	const char *env = getenv("TXLGEN_HISTFILE");
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char dir[PATH_MAX], *path;

	if (env)
		return *env ? strdup(env) : NULL;
	if (state && *state == '/')
		snprintf(dir, sizeof(dir), "%s/txlgen", state);
	else if (home && *home)
		snprintf(dir, sizeof(dir), "%s/.local/state/txlgen", home);
	else
		return NULL;
	/* create the directory and its parents, private to the user */
	for (char *p = dir + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(dir, 0700);
			*p = '/';
		}
	}
	mkdir(dir, 0700);
	if (asprintf(&path, "%s/history", dir) < 0)
		return NULL;
	return path;
}

#ifdef HAVE_LIBEDIT
static struct repl *the_repl; /* for the libedit callbacks */

static char *
prompt_fn(EditLine *el)
{
	(void)el;
	return (char *)the_repl->prompt;
}

/* libedit's character reader, but one that notices Ctrl-C while the line
 * is still there to look at. */
static int
getc_fn(EditLine *el, wchar_t *wc)
{
	mbstate_t st;
	char b;

	memset(&st, 0, sizeof(st));
	for (;;) {
		ssize_t r = interrupted ? -1 : read(STDIN_FILENO, &b, 1);
		size_t k;

		if (interrupted || (r < 0 && errno == EINTR)) {
			if (interrupted) {
				const LineInfo *li = el_line(el);

				the_repl->ctrl_c_empty =
					li->lastchar == li->buffer;
				return -1;
			}
			continue;
		}
		if (r <= 0)
			return (int)r;
		k = mbrtowc(wc, &b, 1, &st);
		if (k == (size_t)-2)
			continue;
		if (k == (size_t)-1)
			*wc = (unsigned char)b;
		return 1;
	}
}
#endif

static void
repl_open(struct repl *r)
{
	r->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	r->histfile = r->tty ? history_path() : NULL;
#ifdef HAVE_LIBEDIT
	if (r->tty) {
		HistEvent ev;

		the_repl = r;
		r->hist = history_init();
		history(r->hist, &ev, H_SETSIZE, HISTORY_SIZE);
		history(r->hist, &ev, H_SETUNIQUE, 1);
		if (r->histfile)
			history(r->hist, &ev, H_LOAD, r->histfile);
		r->el = el_init("txlgen", stdin, stdout, stderr);
		el_set(r->el, EL_EDITOR, "emacs");
		el_set(r->el, EL_PROMPT, prompt_fn);
		el_set(r->el, EL_HIST, history, r->hist);
		el_set(r->el, EL_SIGNAL, 0);
		el_set(r->el, EL_GETCFN, getc_fn);
		el_source(r->el, NULL); /* ~/.editrc */
	}
#endif
}

static void
repl_add_history(struct repl *r, const char *text)
{
#ifdef HAVE_LIBEDIT
	HistEvent ev;

	if (!r->hist || !*text)
		return;
	history(r->hist, &ev, H_ENTER, text);
	if (r->histfile)
		history(r->hist, &ev, H_SAVE, r->histfile);
#else
	(void)r;
	(void)text;
#endif
}

static void
repl_close(struct repl *r)
{
#ifdef HAVE_LIBEDIT
	if (r->el)
		el_end(r->el);
	if (r->hist)
		history_end(r->hist);
#endif
	free(r->histfile);
	free(r->line);
}

/* One line without its newline into r->line. */
static enum read_result
repl_readline(struct repl *r, const char *prompt, size_t *len)
{
	ssize_t n;

	fflush(stdout);
	r->prompt = prompt;
	r->ctrl_c_empty = false;
	if (interrupted) {
		/* Ctrl-C between two prompts: as at an empty one */
		r->ctrl_c_empty = true;
		return READ_INTERRUPTED;
	}
#ifdef HAVE_LIBEDIT
	if (r->el) {
		int count;
		const char *s;

		sigint_setup(false);  /* wake up from read() on Ctrl-C */
		s = el_gets(r->el, &count);
		sigint_setup(true);

		if (!s) {
			if (count < 0 && interrupted)
				return READ_INTERRUPTED;
			return READ_EOF;
		}
		n = (ssize_t)strlen(s);
		if ((size_t)n + 1 > r->line_cap) {
			free(r->line);
			r->line_cap = (size_t)n + 1;
			r->line = malloc(r->line_cap);
			if (!r->line) {
				errmsg("out of memory");
				exit(EXIT_RUNTIME);
			}
		}
		memcpy(r->line, s, (size_t)n + 1);
		goto got;
	}
#endif
	if (r->tty) {
		fputs(prompt, stdout);
		fflush(stdout);
	}
	errno = 0;
	sigint_setup(false);
	n = getline(&r->line, &r->line_cap, stdin);
	sigint_setup(true);
	if (n < 0) {
		if (interrupted) {
			clearerr(stdin);
			r->ctrl_c_empty = true;
			return READ_INTERRUPTED;
		}
		if (ferror(stdin))
			errmsg("reading stdin: %s", strerror(errno));
		return READ_EOF;
	}
#ifdef HAVE_LIBEDIT
got:
#endif
	if (n > 0 && r->line[n - 1] == '\n')
		r->line[--n] = '\0';
	if (n > 0 && r->line[n - 1] == '\r')
		r->line[--n] = '\0';
	*len = (size_t)n;
	return READ_LINE;
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
	rr = repl_readline(r, "> ", &len);
	if (rr != READ_LINE)
		return rr;
	block = !strcmp(r->line, "\"\"\"");
	if (!block)
		strbuf_add(in, r->line, len);
	/* a '\' at the end of a line: the input goes on */
	while (block || (in->len && in->s[in->len - 1] == '\\')) {
		if (!block)
			in->s[--in->len] = '\0';
		rr = repl_readline(r, "... ", &len);
		if (rr == READ_INTERRUPTED) {
			r->ctrl_c_empty = false; /* only drop this input */
			return rr;
		}
		if (rr == READ_EOF)
			break;
		if (block && !strcmp(r->line, "\"\"\""))
			break;
		if (in->len || block)
			strbuf_add(in, "\n", in->len ? 1 : 0);
		strbuf_add(in, r->line, len);
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
"two lines of \"\"\".  Ctrl-C stops the generation; Ctrl-C at an empty\n"
"prompt or Ctrl-D quits.\n"
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

static void
cmd_set(struct repl *r, char *args)
{
	struct engine *e = r->e;
	const struct setting *s;
	char *key = args, *val, err[256];
	int old_int = 0;

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
		return;
	}
	s = setting_find(key);
	if (!s) {
		errmsg("/set: unknown key '%s'; /show lists the keys", key);
		return;
	}
	if (s->scope == SCOPE_START) {
		errmsg("/set: '%s' can only be set at start-up", s->key);
		return;
	}
	if (s->type == ST_INT || s->type == ST_TRIBOOL || s->type == ST_COLOR)
		old_int = *(int *)((char *)e->opts + s->offset);
	if (!strcmp(val, "null") || !strcmp(val, "default")) {
		if (!setting_parse(s, e->opts, NULL, err, sizeof(err))) {
			errmsg("/set %s: %s", s->key, err);
			return;
		}
	} else {
		if (!*val) {
			errmsg("/set %s: needs a value", s->key);
			return;
		}
		unescape(val);
		if (s->type == ST_LIST)
			strlist_clear((void *)((char *)e->opts + s->offset));
		if (!setting_parse(s, e->opts, val, err, sizeof(err))) {
			errmsg("/set %s: %s", s->key, err);
			return;
		}
	}
	if (s->scope == SCOPE_SESSION && engine_apply_settings(e) != EXIT_OK) {
		/* refused: the session kept its settings and memory */
		*(int *)((char *)e->opts + s->offset) = old_int;
		return;
	}
	out_free(r->out);
	out_init(r->out, stdout, e->opts, true);
}

/* Returns false for /quit. */
static bool
command(struct repl *r, char *line)
{
	struct engine *e = r->e;
	char *cmd = line + 1, *arg = cmd + strcspn(cmd, " \t");

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
		if (r->tty)
			fputs("(memory cleared)\n", stdout);
	} else if (!strcmp(cmd, "set")) {
		cmd_set(r, arg);
	} else if (!strcmp(cmd, "show")) {
		config_print(stdout, e->opts, e->session);
	} else if (!strcmp(cmd, "mem")) {
		engine_print_mem(e, stdout, "");
	} else if (!strcmp(cmd, "save") || !strcmp(cmd, "load")) {
		if (!*arg)
			errmsg("/%s needs a FILE", cmd);
		else if (cmd[0] == 's' && engine_save(e, arg) == EXIT_OK &&
			 r->tty)
			printf("(memory saved to %s)\n", arg);
		else if (cmd[0] == 'l' && engine_load(e, arg) == EXIT_OK &&
			 r->tty)
			printf("(memory loaded from %s)\n", arg);
	} else {
		errmsg("unknown command '/%s'; /help lists the commands", cmd);
	}
	fflush(stdout);
	return true;
}

/* Generate a continuation of @p text; returns an exit code for errors
 * that end the loop (EXIT_OK otherwise). */
static int
turn(struct repl *r, const char *text, size_t len)
{
	int rc = engine_generate(r->e, text, len, r->out);

	if (rc == EXIT_INTERRUPTED) {
		interrupted = 0;
		if (r->tty)
			fputs("(stopped)\n", stderr);
		rc = EXIT_OK;
	}
	if (r->e->opts->stats && r->e->last.end != GEN_ERROR)
		engine_print_stats(r->e);
	if (ferror(stdout))
		return EXIT_RUNTIME;  /* already reported */
	/* a bad setting or input spoils one turn, not the session */
	return EXIT_OK;
}

int
repl_run(struct engine *e, struct output *out, const char *first,
	 size_t first_len)
{
	struct repl r = { .e = e, .out = out };
	struct strbuf in = { 0 };
	int rc = EXIT_OK;

	e->keep_memory = true;
	e->trim_lead = true;
	repl_open(&r);
	if (r.tty) {
		const char *desc = txl_model_meta(e->model, "description");

		fprintf(stderr, "txlgen %s: %s%s%s%s (%lld parameters, memory "
			"%d positions)\n/help for help, Ctrl-D to quit.\n",
			TXLGEN_VERSION, e->model_path, desc ? " (" : "",
			desc ? desc : "", desc ? ")" : "",
			(long long)txl_model_n_params(e->model),
			txl_session_get_params(e->session).mem_len);
	}
	if (first) {
		rc = turn(&r, first, first_len);
		if (rc != EXIT_OK)
			goto out;
	}
	for (;;) {
		enum read_result rr;

		rr = read_input(&r, &in);
		if (rr == READ_EOF) {
			if (r.tty)
				fputc('\n', stdout);
			break;
		}
		if (rr == READ_INTERRUPTED) {
			interrupted = 0;
			if (r.ctrl_c_empty) {
				if (r.tty)
					fputc('\n', stdout);
				rc = EXIT_INTERRUPTED;
				break;
			}
			continue;
		}
		repl_add_history(&r, in.s);
		if (in.s[0] == '/' && in.s[1] != '/') {
			if (!command(&r, in.s))
				break;
			if (ferror(stdout)) {
				rc = EXIT_RUNTIME;
				break;
			}
			continue;
		}
		rc = turn(&r, in.s[0] == '/' ? in.s + 1 : in.s,
			  in.len - (in.s[0] == '/'));
		if (rc != EXIT_OK)
			break;
	}
out:
	fflush(stdout);
	strbuf_free(&in);
	repl_close(&r);
	return rc;
}
