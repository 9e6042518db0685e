/* SPDX-License-Identifier: MIT */
/*
 * html.h - --score --html: the scored text as one standalone HTML page
 * (html.c).
 */
#ifndef TXLGEN_HTML_H
#define TXLGEN_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "text.h"

/* One token of the page: its text in html_page.text. */
struct html_tok {
	size_t off, len;
	double logprob;  /* NAN: the first token, which nothing predicts */
	int rank;        /* 1: the most likely; 0 with NAN */
};

/* A line of a table of the page: a name and its value as text. */
struct html_item {
	const char *key;
	char *value;     /* malloc'd, freed with the page */
};

#define HTML_MAX_ITEMS 32

struct html_page {
	char *path;      /* the target; NULL: standard output */
	char *tmp;       /* the file written, renamed over path at the end */
	FILE *f;
	struct strbuf text;
	struct html_tok *tok;
	int n, cap;
	struct html_item summary[HTML_MAX_ITEMS], settings[HTML_MAX_ITEMS];
	int n_summary, n_settings;
};

/**
 * Start a page for @p path ("-": standard output): a temporary file
 * beside it, created now, so that a path that cannot be written fails
 * before any scoring.  Returns EXIT_OK, or EXIT_RUNTIME after one line
 * naming the path.
 */
int html_open(struct html_page *pg, const char *path);

/** Append a token of @p len bytes of text (UTF-8). */
void html_token(struct html_page *pg, const char *s, size_t len,
		double logprob, int rank);

/** Append text to the last token (a character it leaves unfinished). */
void html_token_more(struct html_page *pg, const char *s, size_t len);

/** Add a line to the summary's or the settings' table (@p value is
 *  copied). */
void html_item(struct html_page *pg, bool summary, const char *key,
	       const char *value);

/**
 * Write the page, then close it and rename it over its path (standard
 * output: flush it).  Returns EXIT_OK or EXIT_RUNTIME after one line;
 * the page is freed either way.
 */
int html_write(struct html_page *pg, const char *title);

/** Free the page, its temporary file removed (nothing written). */
void html_discard(struct html_page *pg);

#endif /* TXLGEN_HTML_H */
