/* SPDX-License-Identifier: MIT */
/*
 * klref.c - --score --kl-ref REF: a second model scores the same tokens
 * in the same pass, segment by segment as score.c feeds the first, and
 * each token's two full next-token distributions are compared as they
 * are made (no file of distributions).
 *
 * For each token: KL(REF || model) = sum_i p_ref(i) (log p_ref(i) -
 * log p_model(i)) over the whole vocabulary (every cluster of an
 * adaptive softmax), in double from the float rows of
 * txl_session_logits(); whether the two most likely tokens are the same;
 * and the change of the probability of the token that came, model minus
 * REF, from each side's txl_session_score() (what --score sums).  The
 * summary gives REF's NLL, perplexity and bits per byte beside the
 * model's, the KL's mean and standard error, median, 90th, 99th and
 * 99.9th percentiles (linear between order statistics) and maximum, the
 * share of the same top token, and the mean and RMS of that change.
 * The percentiles need every value: 8 bytes a token are kept.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-model.h"
#include "engine-streams.h"
#include "engine.h"
#include "models.h"
#include "modes.h"
#include "text.h"

struct kl_ref {
	struct txl_model *model;
	struct txl_session *session;
	char *path;
	int n_token;
	/* the rows of the segment last compared */
	double *ref_lp, *seg_kl;
	int32_t *top, *ref_top;
	int rows_cap;
	/* every token's KL, for the percentiles */
	double *kl;
	int64_t n, kl_cap;
	double ref_sum_nll;
	double kl_mean, kl_m2;   /* Welford's */
	double kl_max;
	int64_t same_top;
	double dp_sum, dp_sq;
};

/* Do the two models' tokenizers give each id the same bytes? */
static int
check_vocab(struct engine *e, struct kl_ref *k)
{
	const struct txl_hparams *hp = txl_model_hparams(k->model);
	char a[256], b[256];

	if (hp->n_token != e->mod->hp->n_token) {
		errmsg("--kl-ref: %s has a vocabulary of %d tokens, %s of %d: "
		       "distributions compare only over the same vocabulary",
		       k->path, hp->n_token, e->mod->path,
		       e->mod->hp->n_token);
		return EXIT_USAGE;
	}
	for (int32_t id = 0; id < hp->n_token; id++) {
		int la = txl_token_piece(e->mod->model, id, a, sizeof(a));
		int lb = txl_token_piece(k->model, id, b, sizeof(b));

		/* a piece too long for the buffer: its length compared */
		if (la != lb || (la > 0 && memcmp(a, b, (size_t)la))) {
			errmsg("--kl-ref: token %d is not the same piece in %s "
			       "as in %s: distributions compare only over the "
			       "same vocabulary", (int)id, k->path,
			       e->mod->path);
			return EXIT_USAGE;
		}
	}
	if (txl_token_bos(k->model) != txl_token_bos(e->mod->model) ||
	    txl_token_eos(k->model) != txl_token_eos(e->mod->model) ||
	    txl_token_unk(k->model) != txl_token_unk(e->mod->model)) {
		errmsg("--kl-ref: %s and %s differ in their special tokens "
		       "(bos, eos, unk)", k->path, e->mod->path);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

int
kl_ref_open(struct engine *e, struct kl_ref **out)
{
	const struct txlgen_options *o = e->opts;
	struct kl_ref *k = xrealloc(NULL, sizeof(*k));
	struct txl_session_params p;
	enum txl_status st;
	int rc;

	memset(k, 0, sizeof(*k));
	*out = k;
	k->path = model_find(o->kl_ref, "--kl-ref");
	if (!k->path)
		return EXIT_BADMODEL;
	st = txl_model_load_flags(k->path, o->mmap ? 0 : TXL_LOAD_NO_MMAP,
				  &k->model);
	if (st != TXL_OK) {
		errmsg("--kl-ref: %s", engine_lib_error(st));
		return EXIT_BADMODEL;
	}
	if ((rc = check_vocab(e, k)) != EXIT_OK)
		return rc;
	k->n_token = e->mod->hp->n_token;
	if (txl_model_check_compute(k->model, o->kl_ref_compute) != TXL_OK) {
		errmsg("--kl-ref-compute %s: %s stores none of its weight "
		       "matrices in BF16 (its products compute in F32 whatever "
		       "the setting)", compute_names[o->kl_ref_compute],
		       k->path);
		return EXIT_USAGE;
	}
	/* the model's segments and memory, so that both see the same
	 * context for every token; the reference's own memory type */
	p = engine_params(e);
	p.kv_type = o->kl_ref_kv_type;
	st = txl_session_new(k->model, &p, &k->session);
	if (st == TXL_OK)
		st = txl_session_set_compute(k->session, o->kl_ref_compute);
	if (st != TXL_OK) {
		errmsg("--kl-ref: %s: %s", k->path, engine_lib_error(st));
		return st == TXL_ERR_NOMEM ? EXIT_RUNTIME : EXIT_USAGE;
	}
	k->kl_max = -INFINITY;
	return EXIT_OK;
}

void
kl_ref_free(struct kl_ref *k)
{
	if (!k)
		return;
	txl_session_free(k->session);
	txl_model_free(k->model);
	free(k->path);
	free(k->ref_lp);
	free(k->seg_kl);
	free(k->top);
	free(k->ref_top);
	free(k->kl);
	free(k);
}

int
kl_ref_feed(struct engine *e, struct kl_ref *k, const int32_t *ids, int n)
{
	return engine_feed_to(e, k->session, ids, n, TXL_LOGITS_ALL);
}

/* log(sum(exp(row))) in double, and the index of the largest (the first
 * of equal ones). */
static double
row_lse(const float *row, int n, int32_t *top)
{
	double m = row[0], s = 0;
	int at = 0;

	for (int i = 1; i < n; i++) {
		if (row[i] > m) {
			m = row[i];
			at = i;
		}
	}
	for (int i = 0; i < n; i++)
		s += exp((double)row[i] - m);
	*top = at;
	return m + log(s);
}

int
kl_ref_compare(struct kl_ref *k, struct txl_session *model,
	       const int32_t *targets, int n, const double *lp)
{
	const float *mrows, *rrows;
	enum txl_status st;

	if (n > k->rows_cap) {
		k->rows_cap = n;
		k->ref_lp = xrealloc(k->ref_lp, (size_t)n * sizeof(double));
		k->seg_kl = xrealloc(k->seg_kl, (size_t)n * sizeof(double));
		k->top = xrealloc(k->top, (size_t)n * sizeof(int32_t));
		k->ref_top = xrealloc(k->ref_top, (size_t)n * sizeof(int32_t));
	}
	if (k->n + n > k->kl_cap) {
		k->kl_cap = (k->n + n) * 2;
		k->kl = xrealloc(k->kl, (size_t)k->kl_cap * sizeof(double));
	}
	st = txl_session_score(k->session, targets, n, k->ref_lp);
	if (st != TXL_OK) {
		errmsg("--kl-ref: %s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	mrows = txl_session_logits(model);
	rrows = txl_session_logits(k->session);
	if (!mrows || !rrows) {
		errmsg("--kl-ref: %s", engine_lib_error(TXL_ERR_NOMEM));
		return EXIT_RUNTIME;
	}
	for (int r = 0; r < n; r++) {
		const float *a = rrows + (size_t)r * (size_t)k->n_token;
		const float *b = mrows + (size_t)r * (size_t)k->n_token;
		double la = row_lse(a, k->n_token, &k->ref_top[r]);
		double lb = row_lse(b, k->n_token, &k->top[r]);
		double kl = 0, d, dp;

		for (int i = 0; i < k->n_token; i++) {
			double x = (double)a[i] - la;

			kl += exp(x) * (x - ((double)b[i] - lb));
		}
		k->seg_kl[r] = kl;
		k->kl[k->n++] = kl;
		d = kl - k->kl_mean;
		k->kl_mean += d / (double)k->n;
		k->kl_m2 += d * (kl - k->kl_mean);
		k->kl_max = kl > k->kl_max ? kl : k->kl_max;
		k->same_top += k->top[r] == k->ref_top[r];
		k->ref_sum_nll -= k->ref_lp[r];
		dp = exp(lp[r]) - exp(k->ref_lp[r]);
		k->dp_sum += dp;
		k->dp_sq += dp * dp;
	}
	return EXIT_OK;
}

void
kl_ref_json_row(const struct kl_ref *k, int r, FILE *out)
{
	fputs(", \"ref_logprob\": ", out);
	json_write_number(out, k->ref_lp[r]);
	fputs(", \"kl\": ", out);
	json_write_number(out, k->seg_kl[r]);
	fprintf(out, ", \"top\": %d, \"ref_top\": %d", (int)k->top[r],
		(int)k->ref_top[r]);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The q-quantile of the sorted v[0..n-1], linear between neighbours. */
static double
quantile(const double *v, int64_t n, double q)
{
	double at = q * (double)(n - 1);
	int64_t i = (int64_t)floor(at);

	if (i >= n - 1)
		return v[n - 1];
	return v[i] + (at - (double)i) * (v[i + 1] - v[i]);
}

void
kl_ref_summary(struct kl_ref *k, FILE *out, bool json, double bytes)
{
	double n = (double)k->n;
	double nll = k->ref_sum_nll / n;
	double bpb = bytes > 0 ? k->ref_sum_nll / log(2.0) / bytes : 0;
	double se = k->n > 1 ? sqrt(k->kl_m2 / (n - 1) / n) : NAN;
	double q[4] = { NAN, NAN, NAN, NAN };
	static const double qs[4] = { 0.5, 0.9, 0.99, 0.999 };
	static const char *const keys[] = { "ref_nll", "ref_ppl", "ref_bpb",
		"kl_mean", "kl_stderr", "kl_median", "kl_p90", "kl_p99",
		"kl_p999", "kl_max", "same_top", "dp_mean", "dp_rms" };
	double v[13];

	/* sorted in place: the summary is the last use of the values */
	qsort(k->kl, (size_t)k->n, sizeof(double), cmp_double);
	for (int i = 0; i < 4 && k->n > 0; i++)
		q[i] = quantile(k->kl, k->n, qs[i]);
	v[0] = nll;
	v[1] = exp(nll);
	v[2] = bpb;
	v[3] = k->kl_mean;
	v[4] = se;
	memcpy(v + 5, q, sizeof(q));
	v[9] = k->kl_max;
	v[10] = (double)k->same_top / n;
	v[11] = k->dp_sum / n;
	v[12] = sqrt(k->dp_sq / n);
	for (int i = 0; i < 13; i++) {
		if (json) {
			fprintf(out, ", \"%s\": ", keys[i]);
			json_write_number(out, v[i]);
		} else {
			/* as --score's nll, ppl and bpb; the rest to 6
			 * significant digits */
			if (i == 1)
				fprintf(out, "%s %.4f\n", keys[i], v[i]);
			else if (i < 3)
				fprintf(out, "%s %.6f\n", keys[i], v[i]);
			else
				fprintf(out, "%s %.6g\n", keys[i], v[i]);
		}
	}
}
