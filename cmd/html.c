/* SPDX-License-Identifier: MIT */
/*
 * html.c - --score --html: the scored text as one HTML page that needs
 * nothing else (its CSS and its SVG inline, no script, no fetch): each
 * token a span coloured by its rank in the model's predictions (GLTR's
 * four bands: Gehrmann, Strobelt and Rush, 2019), its log-prob and rank
 * in data attributes and its title; the surprisal along the text as a
 * line; the summary and the settings.  The page is held in memory (the
 * text and 24 bytes a token) and written at the end into a temporary
 * file beside its path, renamed over it once complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "html.h"

int
html_open(struct html_page *pg, const char *path)
{
	struct stat sb;
	mode_t mask;
	int fd;

	memset(pg, 0, sizeof(*pg));
	if (!strcmp(path, "-")) {
		pg->f = stdout;
		return EXIT_OK;
	}
	/* rename() would replace a symbolic link, or fail on a folder */
	if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		errmsg("%s: cannot write the HTML page there: not a regular "
		       "file", path);
		return EXIT_RUNTIME;
	}
	pg->path = xstrdup(path);
	pg->tmp = xrealloc(NULL, strlen(path) + 8);
	sprintf(pg->tmp, "%s.XXXXXX", path);
	fd = mkstemp(pg->tmp);
	if (fd < 0) {
		errmsg("%s: cannot write the HTML page: %s", path,
		       strerror(errno));
		free(pg->tmp);
		pg->tmp = NULL;
		html_discard(pg);
		return EXIT_RUNTIME;
	}
	/* the mode of a new file, not mkstemp()'s 0600 */
	mask = umask(0);
	umask(mask);
	(void)fchmod(fd, 0666 & ~mask);
	pg->f = fdopen(fd, "w");
	if (!pg->f)
		die_oom();
	return EXIT_OK;
}

void
html_token(struct html_page *pg, const char *s, size_t len, double logprob,
	   int rank)
{
	if (pg->n == pg->cap) {
		pg->cap = pg->cap ? pg->cap * 2 : 1024;
		pg->tok = xrealloc(pg->tok, (size_t)pg->cap * sizeof(*pg->tok));
	}
	pg->tok[pg->n++] = (struct html_tok){ .off = pg->text.len,
		.len = len, .logprob = logprob, .rank = rank };
	strbuf_add(&pg->text, s, len);
}

void
html_token_more(struct html_page *pg, const char *s, size_t len)
{
	if (pg->n == 0)
		return;
	pg->tok[pg->n - 1].len += len;
	strbuf_add(&pg->text, s, len);
}

void
html_item(struct html_page *pg, bool summary, const char *key,
	  const char *value)
{
	struct html_item *it = summary ? pg->summary : pg->settings;
	int *n = summary ? &pg->n_summary : &pg->n_settings;

	if (*n < HTML_MAX_ITEMS)
		it[(*n)++] = (struct html_item){ key, xstrdup(value) };
}

/* Text for an element or an attribute value. */
static void
put_text(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (s[i]) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		/* a parser reads a raw CR (and CR LF) as LF */
		case '\r': fputs("&#13;", f); break;
		/* and drops a NUL: U+FFFD, as a decoder makes of it */
		case '\0': fputs("&#xFFFD;", f); break;
		default: putc(s[i], f);
		}
	}
}

static void
put_str(FILE *f, const char *s)
{
	put_text(f, s, strlen(s));
}

/* GLTR's bands: top 10, 100, 1000, the rest; 0: no prediction. */
static int
band(int rank)
{
	return rank <= 0 ? 0 : rank <= 10 ? 1 : rank <= 100 ? 2 :
		rank <= 1000 ? 3 : 4;
}

static const char style[] =
	"body{font:15px/1.5 system-ui,sans-serif;color:#222;max-width:64em;"
	"margin:1.5em auto;padding:0 1em}\n"
	"h1{font-size:1.3em}h2{font-size:1.05em;margin:1.2em 0 .4em}\n"
	"#text{white-space:pre-wrap;font:14px/1.7 ui-monospace,monospace;"
	"border:1px solid #ccc;padding:.6em .8em}\n"
	".tok{border-radius:2px}.tok:hover{outline:1px solid #222}\n"
	".b1{background:#b5eda0}.b2{background:#fbef8c}"
	".b3{background:#f9b3aa}.b4{background:#d9b8f7}\n"
	".legend span{padding:0 .5em;margin-right:.4em;border-radius:2px}\n"
	"table{border-collapse:collapse}th,td{padding:.1em .8em .1em 0;"
	"text-align:left;font-weight:normal}th{color:#555}"
	"td{font-variant-numeric:tabular-nums}\n"
	"svg{max-width:100%;height:auto}svg text{font:12px sans-serif;"
	"fill:#444}.grid{stroke:#ddd}.axis{stroke:#888}"
	".line{fill:none;stroke:#2a6fb0;stroke-width:1;"
	"stroke-linejoin:round}\n";

static void
put_table(FILE *f, const char *id, const struct html_item *it, int n)
{
	fprintf(f, "<table id=\"%s\">\n", id);
	for (int i = 0; i < n; i++) {
		fputs("<tr><th>", f);
		put_str(f, it[i].key);
		fprintf(f, "</th><td id=\"%s-", id);
		put_str(f, it[i].key);
		fputs("\">", f);
		put_str(f, it[i].value);
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
}

static void
put_tokens(FILE *f, const struct html_page *pg)
{
	fputs("<div id=\"text\">", f);
	for (int i = 0; i < pg->n; i++) {
		const struct html_tok *t = &pg->tok[i];

		fprintf(f, "<span class=\"tok b%d\"", band(t->rank));
		if (isnan(t->logprob)) {
			fputs(" data-logprob=\"\" data-rank=\"\" title=\"the "
			      "first token: nothing predicts it\">", f);
		} else {
			fprintf(f, " data-logprob=\"%.9g\" data-rank=\"%d\" "
				"title=\"log-prob %.4f (%.2f bits), p %.3g, "
				"rank %d\">", t->logprob, t->rank, t->logprob,
				-t->logprob / log(2.0), exp(t->logprob),
				t->rank);
		}
		put_text(f, pg->text.s + t->off, t->len);
		fputs("</span>", f);
	}
	fputs("</div>\n", f);
}

/* The surprisal of each predicted token, in bits, along the text. */
static void
put_plot(FILE *f, const struct html_page *pg)
{
	const double W = 960, H = 240, L = 52, R = 12, T = 10, B = 40;
	const double pw = W - L - R, ph = H - T - B;
	double top = 0, step;
	int n = 0, k = 0;

	for (int i = 0; i < pg->n; i++)
		if (!isnan(pg->tok[i].logprob)) {
			double bits = -pg->tok[i].logprob / log(2.0);

			top = bits > top ? bits : top;
			n++;
		}
	step = top <= 8 ? 1 : top <= 20 ? 2 : top <= 50 ? 5 : 10;
	top = fmax(step, ceil(top / step) * step);
	fprintf(f, "<svg id=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"role=\"img\" aria-label=\"surprisal in bits of each "
		"predicted token\">\n", W, H, W, H);
	for (double y = 0; y <= top + step / 2; y += step) {
		double py = T + ph * (1 - y / top);

		fprintf(f, "<line class=\"grid\" x1=\"%.0f\" x2=\"%.0f\" "
			"y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.0f\" y=\"%.1f\" "
			"text-anchor=\"end\">%g</text>\n", L, W - R, py, py,
			L - 6, py + 4, y);
	}
	fprintf(f, "<line class=\"axis\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" "
		"y2=\"%.0f\"/>\n", L, W - R, T + ph, T + ph);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">1</text><text x=\"%.0f\" "
		"y=\"%.0f\" text-anchor=\"end\">%d</text>\n", L, T + ph + 16,
		W - R, T + ph + 16, n);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">"
		"predicted token</text>\n", L + pw / 2, H - 6);
	fprintf(f, "<text transform=\"translate(14 %.0f) rotate(-90)\" "
		"text-anchor=\"middle\">surprisal (bits)</text>\n", T + ph / 2);
	fputs("<polyline class=\"line\" id=\"surprisal\" points=\"", f);
	for (int i = 0; i < pg->n; i++) {
		const double lp = pg->tok[i].logprob;

		if (isnan(lp))
			continue;
		fprintf(f, "%s%.1f,%.1f", k ? " " : "",
			L + (n > 1 ? pw * k / (n - 1) : pw / 2),
			T + ph * (1 - -lp / log(2.0) / top));
		k++;
	}
	fputs("\"/>\n</svg>\n", f);
}

static void
free_page(struct html_page *pg)
{
	for (int i = 0; i < pg->n_summary; i++)
		free(pg->summary[i].value);
	for (int i = 0; i < pg->n_settings; i++)
		free(pg->settings[i].value);
	strbuf_free(&pg->text);
	free(pg->tok);
	free(pg->path);
	free(pg->tmp);
	memset(pg, 0, sizeof(*pg));
}

int
html_write(struct html_page *pg, const char *title)
{
	FILE *f = pg->f;
	int e = 0;

	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
	      "<meta charset=\"utf-8\">\n"
	      "<meta name=\"generator\" content=\"txlgen " TXLGEN_VERSION
	      "\">\n<title>", f);
	put_str(f, title);
	fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>",
		style);
	put_str(f, title);
	fputs("</h1>\n<h2>Summary</h2>\n", f);
	put_table(f, "summary", pg->summary, pg->n_summary);
	fputs("<h2>Model and settings</h2>\n", f);
	put_table(f, "settings", pg->settings, pg->n_settings);
	fputs("<h2>Surprisal along the text</h2>\n", f);
	put_plot(f, pg);
	fputs("<h2>The text</h2>\n<p class=\"legend\">The rank of each token "
	      "among the model's predictions (1: the most likely): "
	      "<span class=\"b1\">top 10</span><span class=\"b2\">top 100"
	      "</span><span class=\"b3\">top 1,000</span><span class=\"b4\">"
	      "below</span> (GLTR's bands). Its log-prob and rank are in "
	      "its title.</p>\n", f);
	put_tokens(f, pg);
	fputs("</body>\n</html>\n", f);

	if (fflush(f) != 0 || ferror(f))
		e = errno ? errno : EIO;
	if (pg->path) {
		if (!e && fsync(fileno(f)) != 0 && errno != EINVAL)
			e = errno;
		if (fclose(f) != 0 && !e)
			e = errno;
		pg->f = NULL;
		if (!e && rename(pg->tmp, pg->path) != 0)
			e = errno;
		if (e)
			unlink(pg->tmp);
	}
	if (e)
		errmsg("%s: writing the HTML page failed: %s", pg->path ?
		       pg->path : "standard output", strerror(e));
	free_page(pg);
	return e ? EXIT_RUNTIME : EXIT_OK;
}

void
html_discard(struct html_page *pg)
{
	if (pg->path && pg->f) {
		fclose(pg->f);
		unlink(pg->tmp);
	}
	free_page(pg);
}
