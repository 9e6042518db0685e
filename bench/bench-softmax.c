/* SPDX-License-Identifier: MIT */
/*
 * bench-softmax.c - the cost of the output layer per token, printed as
 * figures: scoring (txl_session_score), the full distribution
 * (txl_session_logits) and sampling (txl_session_sample), on any model;
 * with an adaptive softmax, scoring and greedy or plain temperature
 * sampling compute the head and the clusters they need only.
 *
 *   bench-softmax MODEL [--rows R] [--reps K] [--zipf S] [--threads T]
 *
 * Targets are drawn from a Zipf law of exponent S (default 1.0) over the
 * ids (ids ordered by frequency, as the original vocabularies are), and
 * the share of each cluster is printed with the figures.  R rows (default
 * 64) are evaluated per call; the time of the evaluation alone is measured
 * too and subtracted, so that the figures are the output layer's.
 * bench/softmax.py builds models of WikiText-103's output shape and runs
 * this on them.  Output lines are "key value" pairs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txl.h"
/* the tests' xorshift64 */
#include "../tests/unit/test-rng.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
die(const char *what)
{
	fprintf(stderr, "bench-softmax: %s: %s\n", what, txl_last_error());
	return 1;
}

static uint64_t rng = 88172645463325252ull;

static double
uniform(void)
{
	return (double)(xorshift64(&rng) >> 11) / 9007199254740992.0;
}

/* n ids drawn from p(id) proportional to 1 / (id + 1)^s */
static void
zipf_ids(int32_t *out, int n, int V, double s)
{
	double *cdf = malloc(sizeof *cdf * (size_t)V), z = 0;

	for (int i = 0; i < V; i++)
		cdf[i] = z += pow(i + 1.0, -s);
	for (int k = 0; k < n; k++) {
		double u = uniform() * z;
		int lo = 0, hi = V - 1;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		out[k] = lo;
	}
	free(cdf);
}

/* Seconds per call of what(): the best of reps timed runs (after one
 * untimed), on a machine shared with others the least disturbed one. */
#define TIME_BEST(reps, secs, ...)                                           \
	do {                                                                 \
		__VA_ARGS__;                                                 \
		secs = INFINITY;                                             \
		for (int r_ = 0; r_ < (reps); r_++) {                        \
			double t0_ = now();                                  \
			__VA_ARGS__;                                         \
			double dt_ = now() - t0_;                            \
			secs = dt_ < secs ? dt_ : secs;                      \
		}                                                            \
	} while (0)

int
main(int argc, char **argv)
{
	int rows = 64, reps = 5, threads = 0;
	double zipf = 1.0;
	struct txl_model *m;
	struct txl_session *s;
	struct txl_session_params p = txl_session_params_default();

	if (argc < 2) {
		fprintf(stderr, "usage: bench-softmax MODEL [--rows R] "
			"[--reps K] [--zipf S] [--threads T]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--rows") == 0) rows = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--zipf") == 0) zipf = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else {
			fprintf(stderr, "bench-softmax: unknown option %s\n",
				argv[i]);
			return 2;
		}
	}
	if (rows < 1 || reps < 1) {
		fprintf(stderr, "bench-softmax: --rows and --reps must be >= 1\n");
		return 2;
	}
	if (txl_model_load(argv[1], &m) != TXL_OK)
		return die(argv[1]);
	const struct txl_hparams *hp = txl_model_hparams(m);
	const int V = hp->n_token;
	p.seg_len = rows;
	p.mem_len = txl_model_has_memory(m) ? rows : 0;
	p.stride = txl_model_has_memory(m) ? TXL_FROM_MODEL : rows;
	p.n_threads = threads;
	if (txl_session_new(m, &p, &s) != TXL_OK)
		return die("session");

	int32_t *ids = malloc(sizeof *ids * (size_t)(rows + 1));
	double *lp = malloc(sizeof *lp * (size_t)rows);
	zipf_ids(ids, rows + 1, V, zipf);

	printf("model %s\n", argv[1]);
	printf("n_token %d\nd_model %d\nd_embed %d\ndiv_val %d\ncutoffs",
	       V, hp->d_model, hp->d_embed, hp->div_val);
	for (int c = 0; c < hp->n_cutoffs; c++)
		printf(" %d", hp->cutoffs[c]);
	printf("%s\nrows %d\nzipf %.2f\n", hp->n_cutoffs ? "" : " none", rows,
	       zipf);
	for (int c = 0; c <= hp->n_cutoffs; c++) {
		int lo = c ? hp->cutoffs[c - 1] : 0;
		int hi = c < hp->n_cutoffs ? hp->cutoffs[c] : V, k = 0;
		for (int i = 1; i <= rows; i++)
			k += ids[i] >= lo && ids[i] < hi;
		printf("targets_in_cluster_%d %.3f\n", c, (double)k / rows);
	}

	double t_eval, t_score, t_logits, t_greedy, t_greedy_full, t_temp,
	       t_temp_full;
	struct txl_sampler_params sp = txl_sampler_params_default();
	sp.top_k = 0;
	sp.top_p = 1.0f;
	sp.min_p = 0.0f;
	sp.temp = 0.0f;
	struct txl_sampler *greedy = txl_sampler_new(&sp, V);
	sp.temp = 0.8f;
	struct txl_sampler *hot = txl_sampler_new(&sp, V);
	int st = TXL_OK;

	/* the evaluation alone, subtracted from what follows */
	TIME_BEST(reps, t_eval,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_ALL));
	TIME_BEST(reps, t_score,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_ALL);
		  st |= txl_session_score(s, ids + 1, rows, lp));
	TIME_BEST(reps, t_logits,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_ALL);
		  for (int i = 0; i < rows; i++) {
			  const float *row = txl_session_logits(s) +
				  (size_t)i * V;
			  lp[i] = row[ids[i + 1]] - txl_logsumexp(row, V);
		  });
	/* sampling the next token of the last row */
	TIME_BEST(reps, t_greedy,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_LAST);
		  (void)txl_session_sample(s, greedy, NULL));
	TIME_BEST(reps, t_greedy_full,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_LAST);
		  (void)txl_sampler_sample(greedy, txl_session_logits(s),
					   NULL));
	TIME_BEST(reps, t_temp,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_LAST);
		  (void)txl_session_sample(s, hot, NULL));
	TIME_BEST(reps, t_temp_full,
		  st |= txl_session_eval(s, ids, rows, TXL_LOGITS_LAST);
		  (void)txl_sampler_sample(hot, txl_session_logits(s), NULL));
	if (st != TXL_OK)
		return die("eval");

	/* per token (score, logits) or per sampled token (the rest), in ms;
	 * the evaluation of the LAST calls costs what the ALL ones do but
	 * the output of one row, close enough to subtract */
	printf("eval_ms_per_token %.4f\n", 1e3 * t_eval / rows);
	printf("score_ms_per_token %.4f\n", 1e3 * (t_score - t_eval) / rows);
	printf("full_logits_ms_per_token %.4f\n",
	       1e3 * (t_logits - t_eval) / rows);
	printf("greedy_ms %.4f\n", 1e3 * (t_greedy - t_eval));
	printf("greedy_full_ms %.4f\n", 1e3 * (t_greedy_full - t_eval));
	printf("temp_0.8_ms %.4f\n", 1e3 * (t_temp - t_eval));
	printf("temp_0.8_full_ms %.4f\n", 1e3 * (t_temp_full - t_eval));
	txl_sampler_free(greedy);
	txl_sampler_free(hot);
	free(ids);
	free(lp);
	txl_session_free(s);
	txl_model_free(m);
	return 0;
}
