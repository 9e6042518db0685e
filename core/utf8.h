/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - UTF-8 checked byte by byte, and lines made printable
 * (utf8.c).
 */
#ifndef TXLGEN_UTF8_H
#define TXLGEN_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* A UTF-8 character being read: the bytes held and what may come next. */
struct utf8_state {
	unsigned char buf[4];
	int len;                /* bytes held */
	int need;               /* continuation bytes still expected */
	unsigned char lo, hi;   /* range of the next continuation byte */
};

/** Start a character in @p u with lead byte @p c; false if @p c cannot
 *  lead one. */
bool utf8_lead(struct utf8_state *u, unsigned char c);

/** Length of the valid UTF-8 character at @p s (at most @p n bytes), or
 *  0 if none starts there. */
size_t utf8_char_len(const unsigned char *s, size_t n);

/** Is @p s (of @p len bytes) valid UTF-8? */
bool utf8_valid(const char *s, size_t len);

/** Length of the control character at @p s (C0, DEL, C1), 0 if none;
 *  @p s holds @p n > 0 bytes of UTF-8. */
size_t text_control_len(const unsigned char *s, size_t n);

/**
 * Make @p s one line of printable text in place: C0 and C1 control
 * characters (ESC, CSI, newlines...), DEL and bytes that are not UTF-8
 * become '?'.  For messages that quote input.
 */
void text_clean_line(char *s);

#endif /* TXLGEN_UTF8_H */
