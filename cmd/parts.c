/* SPDX-License-Identifier: MIT */
/*
 * parts.c - --score-merge, which joins the summaries of a text's parts
 * (--score --part K/N, score.c) into the whole text's.
 *
 * A part's summary line carries its share of the sums that make the whole
 * one (tokens, predictions, bytes, characters, the sum of the NLL and the
 * sum of squared deviations from the part's mean NLL, which Chan et al.'s
 * pairwise update joins without the loss of precision of a plain sum of
 * squares), its "K/N" and a fingerprint of the model, the settings and
 * the text's tokens, so that only the parts of one run are joined.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "errors.h"
#include "input.h"
#include "modes.h"
#include "text.h"

/* A part's summary, as --score --part K/N --json writes it. */
struct part_summary {
	const char *path;
	int64_t k, n;
	char fingerprint[32];
	struct score_figures f;
};

/* The last line of @p path that is not blank, into @p line. */
static int
last_line(const char *path, struct strbuf *line)
{
	struct input in;
	const char *chunk;
	size_t len;
	int got;

	if (!input_open(&in, path, NULL))
		return EXIT_RUNTIME;
	while ((got = input_next(&in, &chunk, &len)) > 0) {
		while (len > 0 && (chunk[len - 1] == '\n' ||
				   chunk[len - 1] == '\r'))
			len--;
		if (len == 0)
			continue;
		line->len = 0;
		strbuf_add(line, chunk, len);
	}
	input_close(&in);
	return got < 0 ? EXIT_RUNTIME : EXIT_OK;
}

static bool
number(const cJSON *o, const char *key, double *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
		return false;
	*v = x->valuedouble;
	return true;
}

static int
read_part(const char *path, struct part_summary *p)
{
	struct strbuf line = { 0 };
	cJSON *o = NULL;
	const cJSON *part, *fp, *partial;
	double tokens, predicted;
	char err[128];
	int rc = last_line(path, &line);

	if (rc != EXIT_OK)
		goto out;
	rc = EXIT_RUNTIME;
	if (line.len > 0)
		o = cJSON_ParseWithLength(line.s, line.len);
	part = cJSON_GetObjectItemCaseSensitive(o, "part");
	fp = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
	partial = cJSON_GetObjectItemCaseSensitive(o, "partial");
	if (!cJSON_IsObject(o) || !cJSON_IsString(part) ||
	    !cJSON_IsString(fp) || strlen(fp->valuestring) >=
	    sizeof(p->fingerprint) || !cJSON_IsBool(partial) ||
	    !number(o, "tokens", &tokens) ||
	    !number(o, "predicted", &predicted) ||
	    !number(o, "bytes", &p->f.bytes) ||
	    !number(o, "chars", &p->f.chars) ||
	    !number(o, "nll_sum", &p->f.sum_nll) ||
	    !number(o, "nll_m2", &p->f.m2) || tokens < 0 || predicted < 0 ||
	    tokens > 9e15 || predicted > tokens) {
		errmsg("%s: its last line is not the summary of a part "
		       "(txlgen --score FILE --part K/N --json writes it)",
		       path);
		goto out;
	}
	if (!part_parse(part->valuestring, &p->k, &p->n, err, sizeof(err))) {
		errmsg("%s: \"part\": %s", path, err);
		goto out;
	}
	if (cJSON_IsTrue(partial)) {
		errmsg("%s: part %" PRId64 "/%" PRId64 " was interrupted "
		       "(\"partial\": true): score it again", path, p->k, p->n);
		goto out;
	}
	p->path = path;
	p->f.tokens = (int64_t)tokens;
	p->f.predicted = (int64_t)predicted;
	strcpy(p->fingerprint, fp->valuestring);
	rc = EXIT_OK;
out:
	cJSON_Delete(o);
	strbuf_free(&line);
	return rc;
}

int
score_merge(const struct strlist *files, bool json, FILE *out)
{
	struct part_summary *p = xrealloc(NULL, (size_t)files->n *
					  sizeof(*p));
	struct part_summary **by_k = NULL;
	struct score_figures all = { 0 };
	int64_t n = 0;
	int rc = EXIT_RUNTIME;

	for (int i = 0; i < files->n; i++) {
		if (read_part(files->v[i], &p[i]) != EXIT_OK)
			goto out;
		if (i == 0) {
			n = p[0].n;
			by_k = xrealloc(NULL, (size_t)n * sizeof(*by_k));
			memset(by_k, 0, (size_t)n * sizeof(*by_k));
		} else if (p[i].n != n) {
			errmsg("%s: part %" PRId64 "/%" PRId64 " is of %" PRId64
			       " parts, %s's of %" PRId64, p[i].path, p[i].k,
			       p[i].n, p[i].n, p[0].path, n);
			goto out;
		} else if (strcmp(p[i].fingerprint, p[0].fingerprint)) {
			errmsg("%s: part %" PRId64 "/%" PRId64 " is of another "
			       "run than %s (another text, model or settings: "
			       "fingerprint %s, not %s)", p[i].path, p[i].k, n,
			       p[0].path, p[i].fingerprint, p[0].fingerprint);
			goto out;
		}
		if (by_k[p[i].k - 1]) {
			errmsg("%s: part %" PRId64 "/%" PRId64 " given twice: "
			       "%s has it too", p[i].path, p[i].k, n,
			       by_k[p[i].k - 1]->path);
			goto out;
		}
		by_k[p[i].k - 1] = &p[i];
	}
	for (int64_t k = 0; k < n; k++) {
		if (!by_k[k]) {
			errmsg("--score-merge: part %" PRId64 "/%" PRId64
			       " is missing (%d of %" PRId64 " parts given)",
			       k + 1, n, files->n, n);
			goto out;
		}
	}
	/* in text order; the pairwise update of the squared deviations */
	for (int64_t k = 0; k < n; k++) {
		const struct score_figures *f = &by_k[k]->f;
		double na = (double)all.predicted, nb = (double)f->predicted;

		if (f->predicted > 0 && all.predicted > 0) {
			double d = f->sum_nll / nb - all.sum_nll / na;

			all.m2 += f->m2 + d * d * na * nb / (na + nb);
		} else {
			all.m2 += f->m2;
		}
		all.tokens += f->tokens;
		all.predicted += f->predicted;
		all.bytes += f->bytes;
		all.chars += f->chars;
		all.sum_nll += f->sum_nll;
	}
	if (all.predicted < 1) {
		errmsg("--score-merge: the parts predict no token");
		goto out;
	}
	score_figures_write(out, json, &all);
	if (json)
		fprintf(out, ", \"partial\": false, \"parts\": %" PRId64 "}\n",
			n);
	else
		fprintf(out, "partial false\nparts %" PRId64 "\n", n);
	fflush(out);
	rc = EXIT_OK;
	if (ferror(out)) {
		errmsg("writing output failed: %s", strerror(errno));
		rc = EXIT_RUNTIME;
	}
out:
	free(by_k);
	free(p);
	return rc;
}
