/* SPDX-License-Identifier: MIT */
/*
 * test-sample.c - the sampler against hand-computed expectations; with
 * the model file given as argument, what txl_sampler_keep_utf8() lets
 * through, on its byte-fallback vocabulary.
 */
#include <stdlib.h>
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

/* ---- logit bias, OpenAI's penalties, typical, mirostat 2 ---- */

static struct txl_sampler *
make_p(const struct txl_sampler_params *p, int n_vocab)
{
	struct txl_sampler *s = txl_sampler_new(p, n_vocab);

	CHECK(s != NULL);
	return s;
}

/* plain temperature 1, no filters */
static struct txl_sampler_params
plain(uint64_t seed)
{
	struct txl_sampler_params p = txl_sampler_params_default();

	p.temp = 1;
	p.top_k = 0;
	p.top_p = 1;
	p.min_p = 0;
	p.seed = seed;
	return p;
}

/* Frequencies of n draws from logits[v] by one sampler of p, reset
 * after each draw. */
static void
histogram_n(const struct txl_sampler_params *p, const float *logits, int v,
	    int n, double *freq)
{
	struct txl_sampler *s = make_p(p, v);

	for (int i = 0; i < v; i++)
		freq[i] = 0;
	for (int i = 0; i < n; i++) {
		int32_t t = txl_sampler_sample(s, logits, NULL);

		CHECK(t >= 0 && t < v);
		freq[t] += 1.0 / n;
		txl_sampler_reset(s);
	}
	txl_sampler_free(s);
}

static void
test_logit_bias(void)
{
	const float logits[] = { 1.0f, 3.0f, 2.0f };
	const int32_t ids[] = { 0, 1 };
	const float bias[] = { 5.0f, -INFINITY };
	struct txl_sampler_params p = plain(3);
	struct txl_sampler *s;
	double f[3], z = exp(6) + exp(2);
	float lp;

	p.logit_bias_ids = ids;
	p.logit_bias = bias;
	p.n_logit_bias = 2;
	/* 1 + 5 = 6 against 2; token 1 never: softmax(6, -inf, 2) */
	histogram_n(&p, logits, 3, 40000, f);
	CHECK_EQ(f[1], 0);
	CHECK_NEAR(f[0], exp(6) / z, 0.01);
	CHECK_NEAR(f[2], exp(2) / z, 0.01);
	/* greedy follows the bias; the log-probability is the model's */
	p.temp = 0;
	s = make_p(&p, 3);
	CHECK_EQ(txl_sampler_sample(s, logits, &lp), 0);
	CHECK_NEAR(lp, 1 - log(exp(1) + exp(3) + exp(2)), 1e-6);
	txl_sampler_free(s);
	/* an id out of range, a NaN bias: refused */
	p.n_logit_bias = 1;
	{
		const int32_t bad_id[] = { 3 };
		const float nan_bias[] = { NAN };

		p.logit_bias_ids = bad_id;
		CHECK(txl_sampler_new(&p, 3) == NULL);
		p.logit_bias_ids = ids;
		p.logit_bias = nan_bias;
		CHECK(txl_sampler_new(&p, 3) == NULL);
	}
}

static void
test_frequency_presence(void)
{
	const float a[] = { 2.0f, 1.9f, 0.0f };
	const float b[] = { 2.0f, 1.9f, 1.0f };
	struct txl_sampler_params p = plain(0);
	struct txl_sampler *s;
	double f[3], z;

	p.temp = 0;
	/* frequency 0.5: 2.0 - 0.5 n0 against 1.9 - 0.5 n1:
	 * 0 (2.0 > 1.9), 1 (1.5 < 1.9), 0 (1.5 > 1.4), 1 (1.0 < 1.4), 0 */
	p.frequency_penalty = 0.5f;
	s = make_p(&p, 3);
	/* an accepted (prompt) token does not count: still 0 first */
	txl_sampler_accept(s, 0);
	{
		const int32_t want[] = { 0, 1, 0, 1, 0 };

		for (int i = 0; i < 5; i++)
			CHECK_EQ(txl_sampler_sample(s, a, NULL), want[i]);
	}
	/* reset forgets the counts */
	txl_sampler_reset(s);
	CHECK_EQ(txl_sampler_sample(s, a, NULL), 0);
	txl_sampler_free(s);

	/* presence 0.5, once per token: 0, 1 (1.5 < 1.9), then 0 for ever
	 * (1.5 > 1.4 and 1.0) */
	p.frequency_penalty = 0;
	p.presence_penalty = 0.5f;
	s = make_p(&p, 3);
	{
		const int32_t want[] = { 0, 1, 0, 0, 0 };

		for (int i = 0; i < 5; i++)
			CHECK_EQ(txl_sampler_sample(s, b, NULL), want[i]);
	}
	txl_sampler_free(s);

	/* sampled: after two draws of token 2 (biased first to make them)
	 * its logit is 1.0 - 2 * 0.75 - 0.25 = -0.75 */
	p = plain(17);
	p.frequency_penalty = 0.75f;
	p.presence_penalty = 0.25f;
	{
		const float only2[] = { -INFINITY, -INFINITY, 0.0f };
		int count[3] = { 0 }, n = 40000;

		for (int i = 0; i < n; i++) {
			s = make_p(&p, 3);
			p.seed++;
			CHECK_EQ(txl_sampler_sample(s, only2, NULL), 2);
			CHECK_EQ(txl_sampler_sample(s, only2, NULL), 2);
			count[txl_sampler_sample(s, b, NULL)]++;
			txl_sampler_free(s);
		}
		z = exp(2.0) + exp(1.9) + exp(-0.75);
		f[0] = (double)count[0] / n;
		f[2] = (double)count[2] / n;
		CHECK_NEAR(f[0], exp(2.0) / z, 0.01);
		CHECK_NEAR(f[2], exp(-0.75) / z, 0.01);
	}
}

static void
test_typical(void)
{
	/* p = .5 .3 .15 .05: entropy H = 1.1422 nats; |-ln p - H| =
	 * .449 .062 .755 1.854, so the typical order is 1, 0, 2, 3 */
	const float logits[] = { logf(0.5f), logf(0.3f), logf(0.15f),
				 logf(0.05f) };
	struct txl_sampler_params p = plain(5);
	double f[4];

	/* typical 0.5: 0.3 < 0.5, then 0.3 + 0.5 >= 0.5: tokens 1 and 0,
	 * renormalised .375 .625 */
	p.typical_p = 0.5f;
	histogram_n(&p, logits, 4, 40000, f);
	CHECK_NEAR(f[0], 0.625, 0.01);
	CHECK_NEAR(f[1], 0.375, 0.01);
	CHECK_EQ(f[2] + f[3], 0);
	/* typical 0.2: token 1 alone, not the most likely */
	p.typical_p = 0.2f;
	histogram_n(&p, logits, 4, 2000, f);
	CHECK_NEAR(f[1], 1, 1e-9);
	/* typical 0.9: 1, 0 (0.8), then 2 (0.95): 3 never */
	p.typical_p = 0.9f;
	histogram_n(&p, logits, 4, 40000, f);
	CHECK_EQ(f[3], 0);
	CHECK_NEAR(f[2], 0.15 / 0.95, 0.01);
	/* out of range */
	p.typical_p = 0;
	CHECK(txl_sampler_new(&p, 4) == NULL);
}

static void
test_mirostat(void)
{
	/* p = .5 .3 .15 .05, surprises 1, 1.737, 2.737, 4.32 bits.
	 * tau 0.5, eta 1: mu starts at 2 tau = 1: only token 0 (1 <= 1);
	 * its surprise renormalised is 0, so mu = 1 - (0 - 0.5) = 1.5:
	 * token 0 alone again, mu 2; then 0 and 1 (1.737 <= 2),
	 * renormalised .625 .375; never 2 or 3. */
	const float logits[] = { logf(0.5f), logf(0.3f), logf(0.15f),
				 logf(0.05f) };
	struct txl_sampler_params p = plain(1);
	int count[4] = { 0 }, n = 40000;

	p.mirostat_tau = 0.5f;
	p.mirostat_eta = 1.0f;
	p.top_k = 1;		/* ignored under mirostat */
	for (int i = 0; i < n; i++) {
		struct txl_sampler *s = make_p(&p, 4);

		p.seed++;
		CHECK_EQ(txl_sampler_sample(s, logits, NULL), 0);
		CHECK_EQ(txl_sampler_sample(s, logits, NULL), 0);
		count[txl_sampler_sample(s, logits, NULL)]++;
		/* reset starts mu again at 2 tau: token 0 alone */
		txl_sampler_reset(s);
		CHECK_EQ(txl_sampler_sample(s, logits, NULL), 0);
		txl_sampler_free(s);
	}
	CHECK_EQ(count[2] + count[3], 0);
	CHECK_NEAR((double)count[0] / n, 0.625, 0.01);
	CHECK_NEAR((double)count[1] / n, 0.375, 0.01);
	/* a negative tau, a zero eta: refused */
	p.mirostat_tau = -1;
	CHECK(txl_sampler_new(&p, 4) == NULL);
	p.mirostat_tau = 5;
	p.mirostat_eta = 0;
	CHECK(txl_sampler_new(&p, 4) == NULL);
}

/* ---- txl_sampler_keep_utf8() on the unit model's vocabulary ---- */

static const struct txl_model *u8_model;
static int u8_vocab;

/* the id of the byte token of @p b, found by its piece */
static int32_t
byte_token(unsigned b)
{
	for (int32_t t = 0; t < u8_vocab; t++) {
		char buf[8];
		int n = txl_token_piece(u8_model, t, buf, sizeof buf);

		if (n == 1 && (unsigned char)buf[0] == b)
			return t;
	}
	return -1;
}

static struct txl_sampler *
u8_sampler(float temp, uint64_t seed)
{
	struct txl_sampler *s = make(temp, 0, 1, 0, 1, 0, seed, u8_vocab);

	CHECK_EQ(txl_sampler_keep_utf8(s, u8_model), TXL_OK);
	return s;
}

/* Greedy: the most likely token is a lone continuation byte, masked
 * between characters; a lead byte then allows only what continues it. */
static void
test_utf8_greedy(void)
{
	float *lg = malloc(sizeof *lg * (size_t)u8_vocab);
	const int32_t c80 = byte_token(0x80), e2 = byte_token(0xe2),
		      a0 = byte_token(0xa0);
	struct txl_sampler *s = u8_sampler(0, 1);
	float lp;

	CHECK(c80 >= 0 && e2 >= 0 && a0 >= 0);
	for (int i = 0; i < u8_vocab; i++)
		lg[i] = -10;
	lg[c80] = 5;
	lg[e2] = 4;
	lg[a0] = 4.5f;
	/* between characters 0x80 and 0xA0 cannot come: E2 starts one */
	CHECK_EQ(txl_sampler_sample(s, lg, &lp), e2);
	/* its log-probability is the model's, unmasked */
	CHECK_NEAR(lp, 4 - txl_logsumexp(lg, u8_vocab), 1e-5);
	/* inside it, 0x80 (the best) twice: U+2000 */
	CHECK_EQ(txl_sampler_sample(s, lg, NULL), c80);
	CHECK_EQ(txl_sampler_sample(s, lg, NULL), c80);
	/* a character again: E2 */
	CHECK_EQ(txl_sampler_sample(s, lg, NULL), e2);
	txl_sampler_free(s);

	/* a prompt's E0 waits for A0-BF: 0x80 (best) would be overlong */
	s = u8_sampler(0, 1);
	txl_sampler_accept(s, byte_token(0xe0));
	CHECK_EQ(txl_sampler_sample(s, lg, NULL), a0);
	txl_sampler_free(s);
	/* ED waits for 80-9F (no surrogates): A0 is out, 80 in */
	s = u8_sampler(0, 1);
	lg[c80] = 1;
	txl_sampler_accept(s, byte_token(0xed));
	CHECK_EQ(txl_sampler_sample(s, lg, NULL), c80);
	txl_sampler_free(s);
	/* without keep_utf8 the best token comes, whatever it breaks */
	s = make(0, 0, 1, 0, 1, 0, 1, u8_vocab);
	lg[c80] = 5;
	CHECK_EQ(txl_sampler_sample(s, lg, NULL), c80);
	txl_sampler_free(s);
	free(lg);
}

/* Sampled inside a character after F0 (continuations 90-BF): the three
 * allowed tokens of high logit in the proportions of their
 * probabilities renormalised, the masked ones never. */
static void
test_utf8_distribution(void)
{
	float *lg = malloc(sizeof *lg * (size_t)u8_vocab);
	const int32_t f0 = byte_token(0xf0), b80 = byte_token(0x80),
		      b90 = byte_token(0x90), ba0 = byte_token(0xa0),
		      bbf = byte_token(0xbf);
	struct txl_sampler *s = u8_sampler(1, 7);
	int count[3] = { 0 }, n = 20000, other = 0;
	double z, want[3];

	for (int i = 0; i < u8_vocab; i++)
		lg[i] = -40;
	lg[b80] = 3;		/* masked: F0 80 is overlong */
	lg[b90] = 1;
	lg[ba0] = 0;
	lg[bbf] = -1;
	for (int i = 0; i < n; i++) {
		int32_t t;

		/* F0 after whatever came: the text waits for 90-BF again */
		txl_sampler_accept(s, f0);
		t = txl_sampler_sample(s, lg, NULL);
		if (t == b90)
			count[0]++;
		else if (t == ba0)
			count[1]++;
		else if (t == bbf)
			count[2]++;
		else
			other++;
	}
	/* the other 45 allowed continuations hold e^-40 each: nothing */
	z = exp(1) + exp(0) + exp(-1);
	want[0] = exp(1) / z;
	want[1] = exp(0) / z;
	want[2] = exp(-1) / z;
	CHECK_EQ(other, 0);
	for (int k = 0; k < 3; k++)
		CHECK_NEAR((double)count[k] / n, want[k], 0.015);
	txl_sampler_free(s);

	/* between characters every lone continuation, C0, C1 and F5-FF
	 * is masked however likely; the one plain token left comes */
	s = u8_sampler(1, 9);
	for (int i = 0; i < u8_vocab; i++)
		lg[i] = -40;
	for (unsigned b = 0x80; b <= 0xff; b++)
		if (b <= 0xc1 || b >= 0xf5)
			lg[byte_token(b)] = 10;
	lg[byte_token('a')] = 0;
	for (int i = 0; i < 200; i++)
		CHECK_EQ(txl_sampler_sample(s, lg, NULL), byte_token('a'));
	txl_sampler_free(s);
	free(lg);
}

int
main(int argc, char **argv)
{
	RUN(test_greedy_and_logprob);
	RUN(test_log_softmax);
	RUN(test_distribution);
	RUN(test_filters);
	RUN(test_repeat_penalty);
	RUN(test_seeded);
	RUN(test_non_finite_logits);
	RUN(test_invalid);
	RUN(test_logit_bias);
	RUN(test_frequency_presence);
	RUN(test_typical);
	RUN(test_mirostat);
	if (argc > 1) {
		struct txl_model *m;

		CHECK_EQ(txl_model_load(argv[1], &m), TXL_OK);
		u8_model = m;
		u8_vocab = txl_model_hparams(m)->n_token;
		RUN(test_utf8_greedy);
		RUN(test_utf8_distribution);
		txl_model_free(m);
	}
	return 0;
}
