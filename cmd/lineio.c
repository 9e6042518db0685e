/* SPDX-License-Identifier: MIT */
/*
 * lineio.c - reading the REPL's lines.
 *
 * On a terminal, libedit provides line editing and history; its
 * character reader is ours, so that a signal is noticed while the line is
 * still there to look at, and so that a paste arrives whole: the terminal
 * is asked for bracketed paste while a line is read, and what comes
 * between ESC [200~ and ESC [201~ is kept aside and ends the line, as one
 * input of many lines (a line editor would take each newline for Enter).
 * Without a terminal, plain lines, no prompt and no history, so that the
 * REPL can be scripted.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

#include "errors.h"
#include "lineio.h"
#include "signals.h"
#include "text.h"

#define HISTORY_SIZE 1000

/* $TXLGEN_HISTFILE, or $XDG_STATE_HOME/txlgen/history; NULL if empty. */
static char *
history_path(void)
{
	const char *env = getenv("TXLGEN_HISTFILE");
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char dir[PATH_MAX], *path;

	if (env)
		return *env ? xstrdup(env) : NULL;
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

/* @p path if it is a regular file or does not exist yet; else (a FIFO
 * would make libedit's fopen() wait for a writer forever) a warning and
 * no history.  Frees @p path when it returns NULL. */
static char *
history_usable(char *path)
{
	struct stat sb;

	if (!path || stat(path, &sb) != 0 || S_ISREG(sb.st_mode))
		return path;
	text_clean_line(path);
	errmsg("warning: %s: not a regular file: no history kept", path);
	free(path);
	return NULL;
}

#ifdef HAVE_LIBEDIT
static struct lineio *the_lineio; /* for the libedit callbacks */

static char *
prompt_fn(EditLine *el)
{
	(void)el;
	return (char *)the_lineio->prompt;
}

static const char paste_start[] = "\033[200~", paste_end[] = "\033[201~";

/* Read the rest of a paste, up to ESC [201~, into l->paste (newlines as
 * '\n').  Returns what signals_read() last returned. */
static ssize_t
read_paste(struct lineio *l)
{
	const size_t n_end = sizeof(paste_end) - 1;
	char b;
	ssize_t r;

	l->paste.len = 0;
	while ((r = signals_read(STDIN_FILENO, &b, 1)) == 1) {
		strbuf_add(&l->paste, &b, 1);
		if (l->paste.len >= n_end &&
		    !memcmp(l->paste.s + l->paste.len - n_end, paste_end,
			    n_end)) {
			l->paste.len -= n_end;
			break;
		}
	}
	/* terminals send Enter's \r for a newline */
	for (size_t i = 0, o = 0; i <= l->paste.len; i++) {
		if (i == l->paste.len) {
			l->paste.len = o;
			break;
		}
		if (l->paste.s[i] == '\r') {
			l->paste.s[o++] = '\n';
			if (i + 1 < l->paste.len && l->paste.s[i + 1] == '\n')
				i++;
		} else {
			l->paste.s[o++] = l->paste.s[i];
		}
	}
	return r;
}

/* One byte for libedit: the bytes read ahead first.  An ESC that starts
 * a paste takes the paste (l->pasted) and gives libedit Enter. */
static ssize_t
next_byte(struct lineio *l, char *b)
{
	const size_t n_start = sizeof(paste_start) - 1;
	ssize_t r;

	if (l->at_ahead < l->n_ahead) {
		*b = l->ahead[l->at_ahead++];
		return 1;
	}
	r = signals_read(STDIN_FILENO, b, 1);
	if (r != 1 || *b != '\033')
		return r;
	/* ESC: a paste, or a key whose bytes libedit must still get */
	l->n_ahead = l->at_ahead = 0;
	for (size_t i = 1; i < n_start; i++) {
		char c;

		if (signals_read(STDIN_FILENO, &c, 1) != 1)
			break;
		l->ahead[l->n_ahead++] = c;
		if (c != paste_start[i])
			return 1;
	}
	if (l->n_ahead != (int)n_start - 1)
		return 1;
	l->n_ahead = 0;
	if (read_paste(l) < 0 && interrupted)
		return -1;
	l->pasted = true;
	*b = '\n';
	return 1;
}

/* libedit's character reader, but one that notices a signal while the
 * line is still there to look at. */
static int
getc_fn(EditLine *el, wchar_t *wc)
{
	mbstate_t st;
	char b;

	memset(&st, 0, sizeof(st));
	for (;;) {
		ssize_t r = next_byte(the_lineio, &b);
		size_t k;

		if (r < 0 && interrupted) {
			const LineInfo *li = el_line(el);

			the_lineio->cut_empty = li->lastchar == li->buffer;
			return -1;
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

/* $EDITRC or ~/.editrc, as el_source(el, NULL) finds it, but only a
 * regular file: libedit would wait forever on a FIFO */
static void
source_editrc(EditLine *el)
{
	const char *rc = getenv("EDITRC"), *home = getenv("HOME");
	char buf[PATH_MAX];
	struct stat sb;

	if (!rc || !*rc) {
		if (!home || !*home)
			return;
		snprintf(buf, sizeof(buf), "%s/.editrc", home);
		rc = buf;
	}
	if (stat(rc, &sb) != 0)
		return;
	if (S_ISREG(sb.st_mode)) {
		el_source(el, rc);
		return;
	}
	snprintf(buf, sizeof(buf), "%s", rc);
	text_clean_line(buf);
	errmsg("warning: %s: not a regular file: not read", buf);
}
#endif

void
lineio_open(struct lineio *l)
{
	memset(l, 0, sizeof(*l));
	l->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	l->histfile = l->tty ? history_usable(history_path()) : NULL;
#ifdef HAVE_LIBEDIT
	if (l->tty) {
		HistEvent ev;

		the_lineio = l;
		l->hist = history_init();
		history(l->hist, &ev, H_SETSIZE, HISTORY_SIZE);
		history(l->hist, &ev, H_SETUNIQUE, 1);
		if (l->histfile)
			history(l->hist, &ev, H_LOAD, l->histfile);
		l->el = el_init("txlgen", stdin, stdout, stderr);
		el_set(l->el, EL_EDITOR, "emacs");
		el_set(l->el, EL_PROMPT, prompt_fn);
		el_set(l->el, EL_HIST, history, l->hist);
		el_set(l->el, EL_SIGNAL, 0);
		el_set(l->el, EL_GETCFN, getc_fn);
		/* no insert- or delete-character sequences: where a line
		 * of double-width characters wraps, libedit 3.1's inserts
		 * and deletes shift the row and lose or blank a character
		 * at its end (seen in tmux); without them it rewrites the
		 * line's tail, as on a terminal that has none */
		static const char *const no_caps[] = {
			"im", "ic", "IC", "ei", "dc", "DC", "dm", "ed",
		};
		for (size_t i = 0; i < sizeof(no_caps) / sizeof(*no_caps); i++)
			el_set(l->el, EL_SETTC, no_caps[i], "", NULL);
		source_editrc(l->el);
		/* bracketed paste: a paste typed ahead during a generation
		 * waits in the input with its marks too */
		fputs("\033[?2004h", stdout);
		fflush(stdout);
	}
#endif
}

void
lineio_add_history(struct lineio *l, const char *text)
{
#ifdef HAVE_LIBEDIT
	HistEvent ev;

	if (!l->hist || !*text)
		return;
	history(l->hist, &ev, H_ENTER, text);
	if (l->histfile)
		history(l->hist, &ev, H_SAVE, l->histfile);
#else
	(void)l;
	(void)text;
#endif
}

void
lineio_close(struct lineio *l)
{
	lineio_echo(l, true);
#ifdef HAVE_LIBEDIT
	if (l->el) {
		fputs("\033[?2004l", stdout);
		fflush(stdout);
		el_end(l->el);
	}
	if (l->hist)
		history_end(l->hist);
#endif
#ifdef HAVE_LIBEDIT
	strbuf_free(&l->paste);
#endif
	free(l->histfile);
	free(l->line);
}

static void
keep_line(struct lineio *l, const char *s, size_t n)
{
	if (n + 1 > l->line_cap) {
		l->line_cap = n + 1;
		l->line = xrealloc(l->line, l->line_cap);
	}
	memcpy(l->line, s, n);
	l->line[n] = '\0';
}

#ifdef HAVE_LIBEDIT
/* l->line's @p n bytes typed, then the paste; the paste shown as it
 * came, its control characters but tab and newline left out (they must
 * not drive the terminal). */
static void
paste_line(struct lineio *l, size_t n, size_t *len)
{
	const struct strbuf *p = &l->paste;

	if (n + p->len + 1 > l->line_cap) {
		l->line_cap = n + p->len + 1;
		l->line = xrealloc(l->line, l->line_cap);
	}
	memcpy(l->line + n, p->s, p->len);
	n += p->len;
	l->line[n] = '\0';
	for (size_t i = 0; i < p->len; i++) {
		unsigned char c = (unsigned char)p->s[i];

		if (c >= 0x20 || c == '\t' || c == '\n')
			putchar(c);
	}
	if (!p->len || p->s[p->len - 1] != '\n')
		putchar('\n');
	fflush(stdout);
	while (n > 0 && l->line[n - 1] == '\n')
		l->line[--n] = '\0';
	*len = n;
}
#endif

enum read_result
lineio_read(struct lineio *l, const char *prompt, size_t *len)
{
	ssize_t n;

	fflush(stdout);
	l->prompt = prompt;
	l->cut_empty = false;
	l->pasted = false;
	if (interrupted) {
		/* a signal between two prompts: as at an empty one */
		l->cut_empty = true;
		return READ_INTERRUPTED;
	}
#ifdef HAVE_LIBEDIT
	if (l->el) {
		int count;
		const char *s;

		errno = 0;
		l->n_ahead = l->at_ahead = 0;
		s = el_gets(l->el, &count);
		if (!s && count < 0 && errno == EIO)
			signals_terminal_gone();
		if (!s)
			return count < 0 && interrupted ? READ_INTERRUPTED :
				READ_EOF;
		n = (ssize_t)strlen(s);
		if (n > 0 && s[n - 1] == '\n')
			n--;
		keep_line(l, s, (size_t)n);
		if (l->pasted) {
			paste_line(l, (size_t)n, len);
			return READ_LINE;
		}
		goto got;
	}
#endif
	if (l->tty) {
		fputs(prompt, stdout);
		fflush(stdout);
	}
	errno = 0;
	signals_setup(false);  /* getline() must wake up on a signal */
	n = getline(&l->line, &l->line_cap, stdin);
	signals_setup(true);
	if (n < 0) {
		if (l->tty && ferror(stdin) && errno == EIO)
			signals_terminal_gone();
		if (interrupted) {
			clearerr(stdin);
			l->cut_empty = true;
			return READ_INTERRUPTED;
		}
		if (ferror(stdin))
			errmsg("reading stdin: %s", strerror(errno));
		return READ_EOF;
	}
#ifdef HAVE_LIBEDIT
got:
#endif
	if (n > 0 && l->line[n - 1] == '\n')
		l->line[--n] = '\0';
	if (n > 0 && l->line[n - 1] == '\r')
		l->line[--n] = '\0';
	*len = (size_t)n;
	return READ_LINE;
}

void
lineio_echo(struct lineio *l, bool on)
{
	struct termios t;

	if (!l->tty)
		return;
	if (!on && !l->echo_off && tcgetattr(STDIN_FILENO, &l->saved) == 0) {
		t = l->saved;
		t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
		/* what is typed meanwhile stays in the input: TCSANOW
		 * flushes nothing, and NOFLSH keeps it when Ctrl-C stops the
		 * generation */
		t.c_lflag |= NOFLSH;
		l->echo_off = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
	} else if (on && l->echo_off) {
		tcsetattr(STDIN_FILENO, TCSANOW, &l->saved);
		l->echo_off = false;
	}
}

int
lineio_width(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}
