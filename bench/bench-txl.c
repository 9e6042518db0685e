/* SPDX-License-Identifier: MIT */
/*
 * bench-txl.c - libtxl's speed on one model, printed as figures.
 *
 *   bench-txl MODEL [--score N] [--gen N] [--seg-len T] [--mem-len M]
 *             [--window W] [--threads K]
 *
 * score: N token ids (fixed pseudo-random stream) scored as the original
 *        eval.py does: segments of T tokens, all logits, memory M.
 * gen:   N tokens generated one at a time (greedy, logits of each step),
 *        memory M; tokens/s is also printed for every window of W tokens,
 *        to show that the cost of a token does not grow with the number
 *        generated before it.
 * Output lines are "key value" pairs, easy to read and to parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txl.h"

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
	fprintf(stderr, "bench-txl: %s: %s\n", what, txl_last_error());
	return 1;
}

int
main(int argc, char **argv)
{
	int n_score = 4096, n_gen = 512, seg = 128, mem = 256, window = 0;
	int threads = 0;
	struct txl_model *m;
	struct txl_session *s;
	struct txl_session_params p = txl_session_params_default();

	if (argc < 2) {
		fprintf(stderr, "usage: bench-txl MODEL [--score N] [--gen N] "
			"[--seg-len T] [--mem-len M] [--window W] "
			"[--threads K]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		int v = atoi(argv[i + 1]);
		if (strcmp(argv[i], "--score") == 0) n_score = v;
		else if (strcmp(argv[i], "--gen") == 0) n_gen = v;
		else if (strcmp(argv[i], "--seg-len") == 0) seg = v;
		else if (strcmp(argv[i], "--mem-len") == 0) mem = v;
		else if (strcmp(argv[i], "--window") == 0) window = v;
		else if (strcmp(argv[i], "--threads") == 0) threads = v;
		else {
			fprintf(stderr, "bench-txl: unknown option %s\n",
				argv[i]);
			return 2;
		}
	}
	double t0 = now();
	if (txl_model_load(argv[1], &m) != TXL_OK)
		return die(argv[1]);
	const int V = txl_model_hparams(m)->n_token;
	printf("load_s %.3f\n", now() - t0);
	printf("params %lld\n", (long long)txl_model_n_params(m));

	p.seg_len = seg;
	p.mem_len = mem;
	p.same_length = 0;
	p.n_threads = threads;
	if (txl_session_new(m, &p, &s) != TXL_OK)
		return die("session");

	if (n_score > 0) {
		int32_t *ids = malloc(sizeof *ids * (size_t)n_score);
		uint64_t x = 88172645463325252ull;
		for (int i = 0; i < n_score; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			ids[i] = (int32_t)(x % (uint64_t)V);
		}
		float *lp = malloc(sizeof *lp * (size_t)V);
		double sum = 0;
		t0 = now();
		for (int s0 = 0; s0 < n_score - 1; s0 += seg) {
			int len = n_score - 1 - s0 < seg ? n_score - 1 - s0 : seg;
			if (txl_session_eval(s, ids + s0, len, TXL_LOGITS_ALL))
				return die("eval");
			/* the log-prob of each target, as scoring needs */
			const float *lg = txl_session_logits(s);
			for (int i = 0; i < len; i++) {
				txl_log_softmax(lg + (size_t)i * V, lp, V);
				sum += lp[ids[s0 + i + 1]];
			}
		}
		double dt = now() - t0;
		printf("score_tokens %d\nscore_s %.3f\nscore_tok_per_s %.1f\n",
		       n_score - 1, dt, (n_score - 1) / dt);
		printf("score_mean_nll %.4f\n", -sum / (n_score - 1));
		free(lp);
		free(ids);
	}

	if (n_gen > 0) {
		int32_t tok = 1 % V;
		double tw = now();
		txl_session_reset(s);
		t0 = tw;
		for (int i = 0; i < n_gen; i++) {
			if (txl_session_eval(s, &tok, 1, TXL_LOGITS_LAST))
				return die("eval");
			const float *lg = txl_session_logits(s);
			int32_t best = 0;
			for (int k = 1; k < V; k++)
				if (lg[k] > lg[best])
					best = k;
			tok = best;
			if (window > 0 && (i + 1) % window == 0) {
				double t = now();
				printf("gen_window %d %.1f\n", i + 1,
				       window / (t - tw));
				tw = t;
			}
		}
		double dt = now() - t0;
		printf("gen_tokens %d\ngen_s %.3f\ngen_tok_per_s %.1f\n", n_gen,
		       dt, n_gen / dt);
		printf("mem_fill %d\n", txl_session_mem_fill(s));
	}
	txl_session_free(s);
	txl_model_free(m);
	return 0;
}
