/* SPDX-License-Identifier: MIT */
/*
 * text.h - bytes as text: a growing buffer, UTF-8 checking and repair,
 * JSON literals, numbers for people, and lines made safe for a terminal.
 */
#ifndef TXLGEN_TEXT_H
#define TXLGEN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct strbuf {
	char *s;
	size_t len, cap;
};

void strbuf_add(struct strbuf *b, const char *s, size_t len);
void strbuf_free(struct strbuf *b);

/** Is @p s (of @p len bytes) valid UTF-8? */
bool utf8_valid(const char *s, size_t len);

/* Incremental UTF-8 repair: complete characters pass, a byte that cannot
 * continue or start one becomes U+FFFD, as SentencePiece's decoder does. */
struct utf8_state {
	unsigned char buf[4];
	int len;                /* bytes held */
	int need;               /* continuation bytes still expected */
	unsigned char lo, hi;   /* range of the next continuation byte */
};

void utf8_feed(struct utf8_state *u, const char *s, size_t len,
	       struct strbuf *out);
void utf8_finish(struct utf8_state *u, struct strbuf *out);

/** Write @p s as a JSON string literal (quotes included). */
void json_write_string(FILE *f, const char *s, size_t len);

/** The inside of a JSON string literal, without the quotes. */
void json_write_chars(FILE *f, const char *s, size_t len);

/** Write @p v as a JSON number with 9 significant digits (null if not
 *  finite). */
void json_write_number(FILE *f, double v);

/** @p v for a message: whole numbers as integers ("100000", never
 *  "1e+05"), others with up to 15 significant digits. */
const char *fmt_number(double v, char *buf, size_t len);

/** Length of the control character at @p s (C0, DEL, C1), 0 if none;
 *  @p s holds @p n > 0 bytes of UTF-8. */
size_t text_control_len(const unsigned char *s, size_t n);

/**
 * Make @p s one line of printable text in place: C0 and C1 control
 * characters (ESC, CSI, newlines...), DEL and bytes that are not UTF-8
 * become '?'.  For messages that quote input.
 */
void text_clean_line(char *s);

/** Columns that UTF-8 @p s takes on a terminal. */
int text_width(const char *s);

/** Cut @p s in place to at most @p cols columns, ending with "..." when
 *  cut. */
void text_fit(char *s, int cols);

#endif /* TXLGEN_TEXT_H */
