/* SPDX-License-Identifier: MIT */
/*
 * test-sample.c - the sampler against hand-computed expectations.
 */
#include <string.h>

#include "txl.h"
#include "test.h"

static struct txl_sampler *
make(float temp, int top_k, float top_p, float min_p, float penalty,
     int last_n, uint64_t seed, int n_vocab)
{
	struct txl_sampler_params p = txl_sampler_params_default();

	p.temp = temp;
	p.top_k = top_k;
	p.top_p = top_p;
	p.min_p = min_p;
	p.repeat_penalty = penalty;
	p.repeat_last_n = last_n;
	p.seed = seed;
	struct txl_sampler *s = txl_sampler_new(&p, n_vocab);
	CHECK(s != NULL);
	return s;
}

/* Frequencies of n draws from logits[3] by s, which it then frees. */
static void
histogram(struct txl_sampler *s, const float *logits, int n, double *freq)
{
	int count[3] = { 0 };

	for (int i = 0; i < n; i++) {
		int32_t t = txl_sampler_sample(s, logits, NULL);
		CHECK(t >= 0 && t < 3);
		count[t]++;
	}
	for (int i = 0; i < 3; i++)
		freq[i] = (double)count[i] / n;
	txl_sampler_free(s);
}

static void
test_greedy_and_logprob(void)
{
	const float logits[] = { 1.0f, 3.0f, 2.0f };
	struct txl_sampler *s = make(0, 0, 1, 0, 1, 0, 1, 3);
	float lp;

	CHECK_EQ(txl_sampler_sample(s, logits, &lp), 1);
	/* 3 - log(e^1 + e^2 + e^3) */
	CHECK_NEAR(lp, 3.0 - log(exp(1) + exp(2) + exp(3)), 1e-6);
	txl_sampler_free(s);
}

static void
test_log_softmax(void)
{
	const float logits[] = { 0.5f, -1.0f, 2.0f, 0.0f };
	float out[4];
	double z = exp(0.5) + exp(-1.0) + exp(2.0) + exp(0.0);

	txl_log_softmax(logits, out, 4);
	for (int i = 0; i < 4; i++)
		CHECK_NEAR(out[i], logits[i] - log(z), 1e-6);
}

static void
test_distribution(void)
{
	/* temp 1, no filters: draws follow softmax(log p) = p */
	const float logits[] = { logf(0.1f), logf(0.2f), logf(0.7f) };
	double f[3];

	histogram(make(1, 0, 1, 0, 1, 0, 42, 3), logits, 40000, f);
	CHECK_NEAR(f[0], 0.1, 0.01);
	CHECK_NEAR(f[1], 0.2, 0.01);
	CHECK_NEAR(f[2], 0.7, 0.01);

	/* temp 0.5 squares the odds: p^2 normalised */
	histogram(make(0.5f, 0, 1, 0, 1, 0, 7, 3), logits, 40000, f);
	CHECK_NEAR(f[0], 0.01 / 0.54, 0.01);
	CHECK_NEAR(f[1], 0.04 / 0.54, 0.01);
	CHECK_NEAR(f[2], 0.49 / 0.54, 0.01);
}

static void
test_filters(void)
{
	const float logits[] = { logf(0.1f), logf(0.2f), logf(0.7f) };
	double f[3];

	/* top-p 0.8: {0.7, 0.2} hold 0.9 >= 0.8, so token 0 never comes;
	 * the rest is renormalised: 0.2/0.9, 0.7/0.9 */
	histogram(make(1, 0, 0.8f, 0, 1, 0, 3, 3), logits, 40000, f);
	CHECK_EQ(f[0], 0);
	CHECK_NEAR(f[1], 0.2 / 0.9, 0.01);

	/* top-p 0.5: the 0.7 token alone is enough */
	histogram(make(1, 0, 0.5f, 0, 1, 0, 3, 3), logits, 1000, f);
	CHECK_EQ(f[2], 1);

	/* top-k 2 drops the least likely */
	histogram(make(1, 2, 1, 0, 1, 0, 5, 3), logits, 40000, f);
	CHECK_EQ(f[0], 0);
	CHECK_NEAR(f[2], 0.7 / 0.9, 0.01);

	/* min-p 0.2: threshold 0.2 * 0.7 = 0.14 drops 0.1, keeps 0.2 */
	histogram(make(1, 0, 1, 0.2f, 1, 0, 9, 3), logits, 40000, f);
	CHECK_EQ(f[0], 0);
	CHECK(f[1] > 0.15);

	/* top-k 1 is greedy whatever the temperature */
	histogram(make(5, 1, 1, 0, 1, 0, 11, 3), logits, 1000, f);
	CHECK_EQ(f[2], 1);
}

static void
test_repeat_penalty(void)
{
	struct txl_sampler *s = make(0, 0, 1, 0, 1.5f, 4, 0, 3);
	const float pos[] = { 2.0f, 1.9f, 0.0f };
	const float neg[] = { -1.0f, -1.2f, -5.0f };

	/* 2.0 / 1.5 = 1.33 < 1.9 */
	txl_sampler_accept(s, 0);
	txl_sampler_accept(s, 0);	/* twice, penalised once */
	CHECK_EQ(txl_sampler_sample(s, pos, NULL), 1);
	/* now 0 and 1 are both recent: 1.33 vs 1.27 */
	CHECK_EQ(txl_sampler_sample(s, pos, NULL), 0);
	txl_sampler_reset(s);
	/* -1.0 * 1.5 = -1.5 < -1.2 */
	txl_sampler_accept(s, 0);
	CHECK_EQ(txl_sampler_sample(s, neg, NULL), 1);
	txl_sampler_free(s);

	/* the history is a window of repeat_last_n tokens */
	s = make(0, 0, 1, 0, 1.5f, 1, 0, 3);
	txl_sampler_accept(s, 0);
	txl_sampler_accept(s, 2);	/* pushes 0 out */
	CHECK_EQ(txl_sampler_sample(s, pos, NULL), 0);
	txl_sampler_free(s);
}

static void
test_seeded(void)
{
	float logits[64];
	int32_t a[200], b[200], c[200];
	struct txl_sampler *s1, *s2, *s3;
	int same = 0;

	for (int i = 0; i < 64; i++)
		logits[i] = (float)(i % 7) * 0.1f;
	s1 = make(1, 0, 1, 0, 1, 0, 1234, 64);
	s2 = make(1, 0, 1, 0, 1, 0, 1234, 64);
	s3 = make(1, 0, 1, 0, 1, 0, 1235, 64);
	for (int i = 0; i < 200; i++) {
		a[i] = txl_sampler_sample(s1, logits, NULL);
		b[i] = txl_sampler_sample(s2, logits, NULL);
		c[i] = txl_sampler_sample(s3, logits, NULL);
	}
	CHECK(memcmp(a, b, sizeof a) == 0);
	for (int i = 0; i < 200; i++)
		same += a[i] == c[i];
	CHECK(same < 50);	/* ~200/64 expected by chance */
	txl_sampler_free(s1);
	txl_sampler_free(s2);
	txl_sampler_free(s3);
}

static void
test_non_finite_logits(void)
{
	/* a model whose weights overflow gives NaN or inf logits: the
	 * sampler still returns a valid token, and NaN never wins */
	const float nan_one[] = { NAN, 1.0f, 2.0f };
	const float pinf[] = { 0.0f, INFINITY, 1.0f };
	const float all_nan[] = { NAN, NAN, NAN };
	const float all_ninf[] = { -INFINITY, -INFINITY, -INFINITY };
	struct txl_sampler *greedy = make(0, 0, 1, 0, 1, 0, 1, 3);
	struct txl_sampler *hot = make(1, 2, 0.9f, 0.05f, 1.3f, 4, 1, 3);

	CHECK_EQ(txl_sampler_sample(greedy, nan_one, NULL), 2);
	CHECK_EQ(txl_sampler_sample(greedy, pinf, NULL), 1);
	for (int i = 0; i < 50; i++) {
		CHECK(txl_sampler_sample(hot, nan_one, NULL) != 0);
		CHECK_EQ(txl_sampler_sample(hot, pinf, NULL), 1);
		int32_t t = txl_sampler_sample(hot, all_nan, NULL);
		CHECK(t >= 0 && t < 3);
		t = txl_sampler_sample(hot, all_ninf, NULL);
		CHECK(t >= 0 && t < 3);
	}
	txl_sampler_free(greedy);
	txl_sampler_free(hot);
}

static void
test_invalid(void)
{
	struct txl_sampler_params p = txl_sampler_params_default();

	p.temp = -1;
	CHECK(txl_sampler_new(&p, 10) == NULL);
	CHECK(strstr(txl_last_error(), "sampler") != NULL);
	p = txl_sampler_params_default();
	p.top_p = 0;
	CHECK(txl_sampler_new(&p, 10) == NULL);
	p = txl_sampler_params_default();
	p.min_p = 1.5f;
	CHECK(txl_sampler_new(&p, 10) == NULL);
	p = txl_sampler_params_default();
	CHECK(txl_sampler_new(&p, 0) == NULL);
	txl_sampler_free(NULL);
}

int
main(void)
{
	RUN(test_greedy_and_logprob);
	RUN(test_log_softmax);
	RUN(test_distribution);
	RUN(test_filters);
	RUN(test_repeat_penalty);
	RUN(test_seeded);
	RUN(test_non_finite_logits);
	RUN(test_invalid);
	return 0;
}
