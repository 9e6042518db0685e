/* SPDX-License-Identifier: MIT */
/*
 * lineio.h - the REPL's input: lines from libedit (editing, history) on a
 * terminal, plain lines otherwise; and the terminal itself (its width,
 * echo while the model writes).
 */
#ifndef TXLGEN_LINEIO_H
#define TXLGEN_LINEIO_H

#include <stdbool.h>
#include <stddef.h>

#ifdef HAVE_LIBEDIT
#include <histedit.h>
#endif

#include <termios.h>

#include "text.h"

enum read_result {
	READ_LINE,
	READ_EOF,
	READ_INTERRUPTED,   /* a signal; see `interrupted` */
};

struct lineio {
	bool tty;              /* stdin and stdout are terminals */
	bool cut_empty;        /* the interrupted line was empty */
	const char *prompt;
	char *histfile;        /* NULL: no history */
#ifdef HAVE_LIBEDIT
	EditLine *el;
	History *hist;
#endif
	char *line;            /* the line read, without its newline */
	size_t line_cap;
	bool pasted;           /* l->line ends with a paste: one input,
				  whatever its lines */
#ifdef HAVE_LIBEDIT
	struct strbuf paste;   /* a bracketed paste read by getc_fn */
	char ahead[8];         /* bytes read past an ESC that began no
				  paste, for libedit */
	int n_ahead, at_ahead;
#endif
	struct termios saved;  /* the terminal while echo is off */
	bool echo_off;
};

void lineio_open(struct lineio *l);
void lineio_close(struct lineio *l);

/** Read one line after @p prompt (shown on a terminal) into l->line;
 *  *@p len gets its length.  On a terminal a paste (bracketed paste
 *  mode) is taken whole, newlines and all, with what was typed before
 *  it: l->pasted says so. */
enum read_result lineio_read(struct lineio *l, const char *prompt,
			     size_t *len);

/** Add @p text to the history (saved at once). */
void lineio_add_history(struct lineio *l, const char *text);

/** Turn the terminal's echo off while the model writes (what is typed
 *  meanwhile waits for the next prompt), or back on. */
void lineio_echo(struct lineio *l, bool on);

/** Columns of the terminal on stderr (80 if unknown). */
int lineio_width(void);

#endif /* TXLGEN_LINEIO_H */
