/* SPDX-License-Identifier: MIT */
/*
 * text.h - bytes as text: a growing buffer, UTF-8 repair, JSON literals,
 * numbers for people, widths on a terminal; with utf8.h, which it
 * includes, UTF-8 checking and lines made printable.
 */
#ifndef TXLGEN_TEXT_H
#define TXLGEN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "utf8.h"

struct strbuf {
	char *s;
	size_t len, cap;
};

void strbuf_add(struct strbuf *b, const char *s, size_t len);
void strbuf_free(struct strbuf *b);

/* Incremental UTF-8 repair (struct utf8_state: utf8.h): complete
 * characters pass, a byte that cannot continue or start one becomes
 * U+FFFD, as SentencePiece's decoder does. */
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

/** Write @p v as a JSON number that reads back as the same double: a
 *  whole number as an integer, else the fewest of 15, 16 or 17 significant
 *  digits that do (null if not finite). */
void json_write_exact(FILE *f, double v);

struct cJSON;

/**
 * Write the JSON value @p v in txlgen's one style of JSON, that of
 * Python's json.dumps: with @p indent < 0 on one line, ", " between
 * members and ": " after keys ({"a": 1, "b": [1, 2]}), the style of
 * every JSON line txlgen writes; with @p indent >= 0 a document over
 * several lines, each level @p indent more spaces in (json.dumps(v,
 * indent=2) for 2).  Whole numbers are written as integers, others with
 * the digits that read back the same double.  No newline at the end.
 */
void json_print(FILE *f, const struct cJSON *v, int indent);

/** json_print() into a new malloc'd string. */
char *json_string(const struct cJSON *v, int indent);

/** @p v for a message: whole numbers as integers ("100000", never
 *  "1e+05"), others with up to 15 significant digits. */
const char *fmt_number(double v, char *buf, size_t len);

/** Columns that UTF-8 @p s takes on a terminal. */
int text_width(const char *s);

/** Cut @p s in place to at most @p cols columns, ending with "..." when
 *  cut. */
void text_fit(char *s, int cols);

#endif /* TXLGEN_TEXT_H */
