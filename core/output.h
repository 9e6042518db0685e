/* SPDX-License-Identifier: MIT */
/*
 * output.h - what txlgen writes to stdout while generating: pieces of
 * text made valid UTF-8 (bytes held until a character is complete),
 * stop strings (text held while it may still become one), colour, and
 * the JSON-lines form of the same events.
 */
#ifndef TXLGEN_OUTPUT_H
#define TXLGEN_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "settings.h"
#include "text.h"

enum out_status {
	OUT_CONTINUE = 0,
	OUT_STOP = 1,      /* a stop string was completed */
	OUT_ERROR = -1,    /* writing failed (see errno / ferror) */
};

struct output {
	FILE *f;
	bool json;          /* JSON lines instead of text */
	bool color;         /* colour is on: the echoed prompt in bold */
	bool color_text;    /* and the generated text in colour (REPL) */
	bool flush_each;    /* flush after every token */
	bool watch_reader;  /* a pipe or socket: its reader's leaving is
			       looked for after every token */
	bool tty;           /* a terminal: control characters shown as U+FFFD */
	bool newline_at_end; /* end the text with a newline if it has none */
	int sample;         /* --n-samples: the sample whose tokens these
			       are, tagged in JSON; -1: none */

	/* state of one generation */
	bool drop_space;    /* drop the leading space of the next piece */
	struct utf8_state u8;
	const struct strlist *stops;
	size_t max_stop;
	struct strbuf hold; /* text that may become a stop string */
	struct strbuf tok;  /* text released by the current token */
	bool in_prompt;     /* the echo of the prompt is open */
	bool in_color;      /* a colour is on in the output */
	bool wrote;         /* wrote text in this generation */
	char last;          /* last byte of text written */
};

/** Set @p out up for stdout according to @p opts and the terminal. */
void out_init(struct output *out, FILE *f, const struct txlgen_options *opts,
	      bool newline_at_end);
void out_free(struct output *out);

/** Start a generation.  @p drop_space: the text starts here, so drop
 *  the leading space of the first piece (SentencePiece's "▁"). */
void out_begin(struct output *out, bool drop_space,
	       const struct strlist *stops);

/** Echo the next part of the prompt (as typed, made valid UTF-8); the
 *  echo ends at the first token or at out_end(). */
enum out_status out_prompt(struct output *out, const char *text, size_t len);

/** One generated token: its piece bytes and log-probability. */
enum out_status out_token(struct output *out, int32_t id, const char *piece,
			  size_t len, double logprob);

/** Is a character cut short, its first bytes held until the rest come? */
bool out_char_open(const struct output *out);

/** Would @p piece go on with the character held (out_char_open())? */
bool out_char_continues(const struct output *out, const char *piece,
			size_t len);

/** Forget the bytes of a character cut short, before out_end(), so that
 *  they are neither written nor replaced by U+FFFD. */
void out_drop_open_char(struct output *out);

/** End the generation: release held text (unless a stop string matched),
 *  repair a cut character, add the final newline. */
enum out_status out_end(struct output *out, bool stopped);

#endif /* TXLGEN_OUTPUT_H */
