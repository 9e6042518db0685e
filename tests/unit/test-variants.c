/* SPDX-License-Identifier: MIT */
/*
 * test-variants.c - the API of every model variant, on random models
 * (argv[1..], made by tests/make_random_model.py): what holds whatever the
 * weights.  Numbers against PyTorch are test_parity.py's business.
 *   - txl_session_score() equals the log-softmax of txl_session_logits()
 *     for every row, computed or not before, and leaves the rows as they
 *     were; an adaptive softmax's logits are normalised log-probabilities;
 *   - txl_session_sample(): greedy is the argmax of the full row; plain
 *     temperature sampling (cluster by cluster for an adaptive softmax)
 *     draws from p^(1/temp) (a chi-square test of many draws); with
 *     filters it is txl_sampler_sample() on the row; its log-prob is the
 *     token's;
 *   - an adaptive softmax refuses txl_session_adapt();
 *   - models without memory (attn_type 2, 3): memory refused, stride
 *     checked; stride 1 fed at once equals token by token; stride seg_len
 *     makes independent segments; set_params keeps the window; reset
 *     forgets it; state files refused; attn_type 3 refuses segments longer
 *     than its table.  Models with memory refuse a stride.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "test-model.h"

static struct txl_model *model;
static const struct txl_hparams *hp;
static int V;

#define N_TOK 24
static int32_t toks[N_TOK];

/* float32 rounding of two computations of the same log-prob (another
 * order of the sums, see test-session.c): a few 1e-6 for the test models'
 * log-probs of order 10 */
#define TOL 2e-5

/* the relative attentions keep a memory, the absolute ones none */
static bool
has_memory(void)
{
	return hp->attn_type == TXL_ATTN_REL_PARTIAL ||
		hp->attn_type == TXL_ATTN_REL_LEARNED;
}

static struct txl_session *
session(int seg, int stride)
{
	struct txl_session_params p = txl_session_params_default();

	p.seg_len = seg;
	p.stride = has_memory() ? TXL_FROM_MODEL : stride;
	return new_session(model, &p);
}

static double
row_lse(const float *row)
{
	return txl_logsumexp(row, V);
}

static void
test_score(void)
{
	const int n = 8;
	struct txl_session *s = session(n, n);
	double lp[8], lp2[8];

	CHECK_EQ(txl_session_eval(s, toks, n, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_n_logits(s), n);
	/* before the logits are computed (an adaptive softmax then computes
	 * the head and the targets' clusters only), and after */
	CHECK_EQ(txl_session_score(s, toks + 1, n, lp), TXL_OK);
	const float *lg = txl_session_logits(s);
	for (int i = 0; i < n; i++) {
		const float *row = lg + (size_t)i * V;
		CHECK_NEAR(lp[i], row[toks[i + 1]] - row_lse(row), TOL);
		if (hp->n_cutoffs)	/* log-probabilities */
			CHECK_NEAR(row_lse(row), 0.0, 1e-5);
	}
	CHECK_EQ(txl_session_score(s, toks + 1, n, lp2), TXL_OK);
	for (int i = 0; i < n; i++)
		CHECK_NEAR(lp2[i], lp[i], TOL);
	/* fewer targets than rows: the first rows */
	CHECK_EQ(txl_session_score(s, toks + 1, 3, lp2), TXL_OK);
	CHECK_NEAR(lp2[2], lp[2], TOL);
	CHECK_EQ(txl_session_score(s, toks + 1, n + 1, lp2), TXL_ERR_INVALID);
	int32_t bad = V;
	CHECK_EQ(txl_session_score(s, &bad, 1, lp2), TXL_ERR_INVALID);
	/* no rows after NONE */
	CHECK_EQ(txl_session_eval(s, toks, 4, TXL_LOGITS_NONE), TXL_OK);
	CHECK_EQ(txl_session_n_logits(s), 0);
	CHECK_EQ(txl_session_score(s, toks, 1, lp2), TXL_ERR_INVALID);
	txl_session_free(s);
}

static struct txl_sampler *
sampler(float temp, int top_k, uint64_t seed)
{
	struct txl_sampler_params p = txl_sampler_params_default();
	struct txl_sampler *smp;

	p.temp = temp;
	p.top_k = top_k;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	p.seed = seed;
	CHECK((smp = txl_sampler_new(&p, V)) != NULL);
	return smp;
}

static void
test_greedy(void)
{
	struct txl_session *s = session(hp->tgt_len, 1);
	struct txl_sampler *smp = sampler(0.0f, 0, 1);

	for (int i = 0; i < N_TOK; i++) {
		float lp;
		int32_t tok;

		CHECK_EQ(txl_session_eval(s, toks + i, 1, TXL_LOGITS_LAST),
			 TXL_OK);
		tok = txl_session_sample(s, smp, &lp);
		const float *row = txl_session_logits(s);
		int best = 0;
		for (int j = 1; j < V; j++)
			if (row[j] > row[best])
				best = j;
		CHECK_EQ(tok, best);
		CHECK_NEAR(lp, row[best] - row_lse(row), TOL);
	}
	txl_sampler_free(smp);
	txl_session_free(s);
}

/* Draws of txl_session_sample() at temperature temp from one row against
 * p^(1/temp) normalised, the distribution txl_sampler_sample() draws from:
 * a chi-square statistic over the tokens expected at least 10 times (the
 * rest pooled).  With N draws and k cells it has k-1 degrees of freedom;
 * k - 1 + 8 sqrt(2 (k-1)) is far in its tail (p < 1e-9), while a wrong
 * cluster weight moves it by thousands. */
static void
check_temperature(struct txl_session *s, float temp, uint64_t seed)
{
	const int N = 40000;
	struct txl_sampler *smp = sampler(temp, 0, seed);
	double *p = calloc((size_t)V, sizeof *p);
	int *count = calloc((size_t)V, sizeof *count);
	const float *row = txl_session_logits(s);
	struct txl_session_params sp = txl_session_get_params(s);
	double max = -INFINITY, z = 0, chi2 = 0, rest_p = 0, rest_n = 0;
	int cells = 0;

	CHECK(p && count);
	for (int j = 0; j < V; j++)
		max = fmax(max, row[j] / temp);
	for (int j = 0; j < V; j++)
		z += p[j] = exp(row[j] / temp - max);
	CHECK_EQ(txl_session_set_params(s, &sp), TXL_OK);
	/* the draws, with the logits not computed, so that an adaptive
	 * softmax goes cluster by cluster (once they are, it samples them):
	 * set_params makes the same row anew without them */
	for (int k = 0; k < N; k++) {
		float lp;
		int32_t tok;

		tok = txl_session_sample(s, smp, &lp);
		CHECK(tok >= 0 && tok < V);
		count[tok]++;
		if (k < 50) {
			const float *lg = txl_session_logits(s);
			CHECK_NEAR(lp, lg[tok] - row_lse(lg), TOL);
			CHECK_EQ(txl_session_set_params(s, &sp), TXL_OK);
		}
	}
	for (int j = 0; j < V; j++) {
		double e = N * p[j] / z;
		if (e >= 10) {
			chi2 += (count[j] - e) * (count[j] - e) / e;
			cells++;
		} else {
			rest_p += e;
			rest_n += count[j];
		}
	}
	if (rest_p > 0) {
		chi2 += (rest_n - rest_p) * (rest_n - rest_p) / rest_p;
		cells++;
	}
	CHECK(cells > 10);
	if (!(chi2 < cells - 1 + 8 * sqrt(2.0 * (cells - 1)))) {
		fprintf(stderr, "temp %g: chi2 %.1f over %d cells\n",
			(double)temp, chi2, cells);
		CHECK(!"the draws follow p^(1/temp)");
	}
	free(p);
	free(count);
	txl_sampler_free(smp);
}

static void
test_temperature(void)
{
	struct txl_session *s = session(hp->tgt_len, 1);

	CHECK_EQ(txl_session_eval(s, toks, 4, TXL_LOGITS_LAST), TXL_OK);
	/* below 1, 1 and above 1: the three bounds of the cluster weights */
	check_temperature(s, 0.7f, 3);
	check_temperature(s, 1.0f, 4);
	check_temperature(s, 1.6f, 5);
	/* with a filter: txl_sampler_sample() on the row, the same draws */
	struct txl_sampler *a = sampler(0.9f, 20, 7), *b = sampler(0.9f, 20, 7);
	for (int k = 0; k < 20; k++) {
		float la, lb;
		int32_t ta = txl_session_sample(s, a, &la);
		int32_t tb = txl_sampler_sample(b, txl_session_logits(s), &lb);
		CHECK_EQ(ta, tb);
		CHECK(la == lb);
	}
	txl_sampler_free(a);
	txl_sampler_free(b);
	/* nothing to sample from */
	txl_session_reset(s);
	CHECK_EQ(txl_session_sample(s, a = sampler(1, 0, 1), NULL), -1);
	txl_sampler_free(a);
	txl_session_free(s);
}

static void
test_adapt(void)
{
	struct txl_session *s = session(8, 8);

	CHECK_EQ(txl_session_eval(s, toks, 8, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_adapt(s, toks + 1, 8, 0.1f),
		 hp->n_cutoffs ? TXL_ERR_INVALID : TXL_OK);
	txl_session_free(s);
}

/* Models without memory: the window and the stride. */
static void
test_windows(void)
{
	struct txl_session_params p = txl_session_params_default();
	const int W = hp->tgt_len < 8 ? hp->tgt_len : 8;
	struct txl_session *s, *t;
	float *all = malloc(sizeof(float) * (size_t)V * W);
	char path[] = "/tmp/txl-variants-XXXXXX";

	CHECK(all);
	if (has_memory()) {
		p.stride = 1;
		CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "stride"));
		free(all);
		return;
	}
	p.mem_len = 4;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "memory"));
	p = txl_session_params_default();
	p.seg_len = W;
	p.stride = W + 1;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	p.stride = 0;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	if (hp->attn_type == TXL_ATTN_ABS_LEARNED) {
		p.stride = 1;
		p.seg_len = hp->max_klen + 1;
		CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "max_klen"));
	}
	/* the default: no memory, stride 1 */
	CHECK_EQ(txl_session_new(model, NULL, &s), TXL_OK);
	CHECK_EQ(txl_session_get_params(s).mem_len, 0);
	CHECK_EQ(txl_session_get_params(s).stride, 1);
	txl_session_free(s);

	/* stride 1: W tokens at once == one at a time, after W of context */
	s = session(W, 1);
	t = session(W, 1);
	CHECK_EQ(txl_session_eval(s, toks, W, TXL_LOGITS_NONE), TXL_OK);
	CHECK_EQ(txl_session_eval(s, toks + W, W, TXL_LOGITS_ALL), TXL_OK);
	memcpy(all, txl_session_logits(s), sizeof(float) * (size_t)V * W);
	CHECK_EQ(txl_session_eval(t, toks, W, TXL_LOGITS_LAST), TXL_OK);
	for (int i = 0; i < W; i++) {
		CHECK_EQ(txl_session_eval(t, toks + W + i, 1, TXL_LOGITS_LAST),
			 TXL_OK);
		const float *lt = txl_session_logits(t);
		for (int j = 0; j < V; j++)
			CHECK_NEAR(lt[j], all[(size_t)i * V + j], TOL);
	}
	CHECK_EQ(txl_session_n_past(t), 2 * W);
	CHECK_EQ(txl_session_mem_fill(t), 0);
	/* a new setting keeps the window: the same next prediction */
	memcpy(all, txl_session_logits(t), sizeof(float) * (size_t)V);
	p = txl_session_get_params(t);
	p.n_threads = 1;
	CHECK_EQ(txl_session_set_params(t, &p), TXL_OK);
	CHECK_EQ(txl_session_n_logits(t), 1);
	CHECK_EQ(txl_session_n_past(t), 2 * W);
	for (int j = 0; j < V; j++)
		CHECK_NEAR(txl_session_logits(t)[j], all[j], TOL);
	/* no state files: the window is not a memory */
	CHECK(mkstemp(path) >= 0);
	CHECK_EQ(txl_session_save(t, path), TXL_ERR_INVALID);
	remove(path);
	/* reset forgets the window: the same as a fresh session */
	txl_session_reset(t);
	txl_session_free(s);
	s = session(W, 1);
	CHECK_EQ(txl_session_eval(t, toks + 3, 5, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(s, toks + 3, 5, TXL_LOGITS_LAST), TXL_OK);
	for (int j = 0; j < V; j++)
		CHECK(txl_session_logits(t)[j] == txl_session_logits(s)[j]);
	txl_session_free(s);
	txl_session_free(t);

	/* stride W: independent segments, the text before does not count */
	s = session(W, W);
	t = session(W, W);
	CHECK_EQ(txl_session_eval(s, toks, W, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_eval(s, toks + W, W, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_eval(t, toks + W, W, TXL_LOGITS_ALL), TXL_OK);
	for (size_t j = 0; j < (size_t)V * W; j++)
		CHECK(txl_session_logits(s)[j] == txl_session_logits(t)[j]);
	txl_session_free(s);
	txl_session_free(t);
	free(all);
}

/* The model's attention as the API tells it, and the settings a session
 * of it resolves to: txl_session_params_resolve() gives what a session's
 * txl_session_get_params() gives, refuses what txl_session_new()
 * refuses, and neither takes a struct of a size no *_default() makes. */
static void
test_resolve(void)
{
	struct txl_session_params p = txl_session_params_default();
	struct txl_session_params r = txl_session_params_default(), g;
	struct txl_sampler_params sp = txl_sampler_params_default();
	struct txl_session *s;

	CHECK(txl_model_has_memory(model) == has_memory());
	CHECK(txl_attn_type_name(hp->attn_type) != NULL);
	CHECK(txl_attn_type_name((enum txl_attn_type)99) == NULL);
	CHECK_EQ(txl_session_params_resolve(model, NULL, &r), TXL_OK);
	CHECK_EQ(r.mem_len, has_memory() ? hp->mem_len : 0);
	CHECK_EQ(r.seg_len, hp->tgt_len);
	CHECK_EQ(r.clamp_len, hp->clamp_len);
	CHECK_EQ(r.same_length, has_memory() && hp->same_length);
	CHECK_EQ(r.stride, has_memory() ? TXL_FROM_MODEL : 1);
	CHECK_EQ(r.size, sizeof r);
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_OK);
	g = txl_session_get_params(s);
	CHECK_EQ(g.mem_len, r.mem_len);
	CHECK_EQ(g.seg_len, r.seg_len);
	CHECK_EQ(g.clamp_len, r.clamp_len);
	CHECK_EQ(g.same_length, r.same_length);
	CHECK_EQ(g.stride, r.stride);
	CHECK_EQ(g.kv_type, r.kv_type);
	txl_session_free(s);
	/* refused as a session refuses it; out unchanged */
	p.seg_len = 0;
	r.mem_len = -7;
	CHECK_EQ(txl_session_params_resolve(model, &p, &r), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "seg_len"));
	CHECK_EQ(r.mem_len, -7);
	/* sizes */
	p = txl_session_params_default();
	for (int k = 0; k < 2; k++) {
		p.size = k ? sizeof p + 8 : 0;
		CHECK_EQ(txl_session_params_resolve(model, &p, &r),
			 TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "txl_session_params_default"));
		CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
		CHECK_EQ(txl_session_bytes(model, &p), -1);
	}
	r.size = 4;
	CHECK_EQ(txl_session_params_resolve(model, NULL, &r), TXL_ERR_INVALID);
	sp.size = 4;
	CHECK(txl_sampler_new(&sp, V) == NULL);
	CHECK(strstr(txl_last_error(), "txl_sampler_params_default"));
	/* the hparams say which fields they have: every one of this header */
	CHECK_EQ(hp->size, sizeof *hp);
	CHECK(TXL_HAS(struct txl_hparams, hp, tie_projs));
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test-variants MODEL...\n");
		return TEST_SKIP;
	}
	for (int a = 1; a < argc; a++) {
		CHECK_EQ(txl_model_load(argv[a], &model), TXL_OK);
		hp = txl_model_hparams(model);
		V = hp->n_token;
		for (int i = 0; i < N_TOK; i++)
			toks[i] = (int32_t)((i * 7919u + 13u) % (unsigned)V);
		fprintf(stderr, "%s: attn_type %d, %d cutoffs, div_val %d\n",
			argv[a], hp->attn_type, hp->n_cutoffs, hp->div_val);
		RUN(test_score);
		RUN(test_greedy);
		RUN(test_temperature);
		RUN(test_adapt);
		RUN(test_windows);
		RUN(test_resolve);
		txl_model_free(model);
	}
	return 0;
}
