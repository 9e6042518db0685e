/* SPDX-License-Identifier: MIT */
/*
 * test-batch.c - batches (txl_batch_*) on random models made by
 * tests/make_random_model.py: argv[1] F32 weights (d_head 16), argv[2]
 * F32 of d_head 32 (a Q8_0 and Q4_0 memory), argv[3] Q8_0 weights,
 * argv[4] Q4_0 weights, argv[5] an adaptive input and softmax with
 * projections (div_val 2), argv[6] a model without memory (attn_type 2),
 * argv[7] BF16 weights.
 *
 * Each stream of a batch is checked against a twin session fed the same
 * tokens alone by txl_session_eval():
 *   - streams of one token a step: the same logits and log-probs bit for
 *     bit, step after step, whatever streams share the step (they join
 *     and leave between steps), each with its own mem_len, same_length
 *     and kv_type, on F32, Q8_0 and Q4_0 weights, with the output layer
 *     of txl_batch_logits() or txl_session_logits();
 *   - streams of several tokens in the same steps: within float32
 *     rounding (TOL_REORDER), their tokens going through sgemm with the
 *     others';
 *   - txl_session_copy() of one prompt into several streams, each then
 *     its own (--n-samples);
 *   - an adaptive softmax and input: the same, txl_batch_logits() then
 *     computing each session's as txl_session_logits() does;
 *   - a model without memory: each session as txl_session_eval();
 *   - an abort callback of one session stops the step and changes no
 *     memory; every bad argument is refused and changes nothing.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "test-model.h"

/*
 * Tokens fed several at a time go through the products together with the
 * other streams' (sgemm, or the packed kernels from 32 rows on: another
 * blocking of the same dot products than a session's alone): each product
 * differs by float32 rounding, ~6e-8 relative per term.  Through the test
 * models' layers (dot products of up to 1,536 terms of size ~1, |logit| <
 * 10) the worst case is K u ~ 1e-4, the typical ~1e-6: measured 3e-6 with
 * Zen 4's own OpenBLAS kernels, 1.3e-5 with OPENBLAS_CORETYPE=Haswell.
 * 4e-5 leaves a margin of three over that and stays below a real change
 * (another memory moves logits by > 1e-4).
 */
#define TOL_REORDER 4e-5

#define N_TOK 64
/* check_one_token_steps()'s streams at most: more than the attention
 * takes in one task (TXL_ATTN_FEW_JOBS, 32) */
#define MAX_STREAMS 56
static int32_t toks[N_TOK];

static struct txl_session *
session(const struct txl_model *m, int mem, int same, int kv)
{
	struct txl_session_params p = txl_session_params_default();

	if (mem >= 0)
		p.mem_len = mem;
	p.same_length = same;
	p.kv_type = kv;
	return new_session(m, &p);
}

static struct txl_batch *
batch(const struct txl_model *m, int max_rows)
{
	struct txl_batch_params p = txl_batch_params_default();
	struct txl_batch *b;

	p.max_rows = max_rows;
	CHECK_EQ(txl_batch_new(m, &p, &b), TXL_OK);
	return b;
}

/* The log-probs of targets under a session's rows */
static void
score(struct txl_session *s, const int32_t *t, int n, double *lp)
{
	CHECK_EQ(txl_session_score(s, t, n, lp), TXL_OK);
}

/* The sessions of a batch a[0..n) and their twins t[0..n) freed */
static void
free_twins(struct txl_session **a, struct txl_session **t, int n)
{
	for (int i = 0; i < n; i++) {
		txl_session_free(a[i]);
		txl_session_free(t[i]);
	}
}

/*
 * Streams of one token a step against their twins alone: S streams of
 * model m, with mem_len, same_length and kv_type of their own (kvs[i]),
 * a prompt of their own first (fed alone: both are the same session's
 * numbers then), then `steps` steps in which stream i takes part unless
 * (step + i) % 3 == 2 (it leaves and joins again), its token one of toks
 * of its own.  Every step: the logits of the batch's streams (by
 * txl_batch_logits() on even steps, txl_session_logits() on odd ones)
 * bit for bit the twins', and so their log-probs.
 */
static void
check_one_token_steps(const struct txl_model *m, const int *kvs, int S,
		      int steps)
{
	const int V = txl_model_hparams(m)->n_token;
	struct txl_session *a[MAX_STREAMS], *t[MAX_STREAMS];
	struct txl_session *go[MAX_STREAMS];
	const int32_t *tk[MAX_STREAMS];
	int n[MAX_STREAMS];
	struct txl_batch *b = batch(m, MAX_STREAMS);

	CHECK(S <= MAX_STREAMS);
	for (int i = 0; i < S; i++) {
		/* streams 8 on as 0 to 7, with memories a little longer */
		const int mem = 3 + 2 * (i % 8) + i / 8, same = i % 2;
		const int p = i % 8;

		a[i] = session(m, mem, same, kvs[p]);
		t[i] = session(m, mem, same, kvs[p]);
		CHECK_EQ(txl_session_eval(a[i], toks + p, 5 + p, TXL_LOGITS_LAST),
			 TXL_OK);
		CHECK_EQ(txl_session_eval(t[i], toks + p, 5 + p, TXL_LOGITS_LAST),
			 TXL_OK);
	}
	for (int step = 0; step < steps; step++) {
		int k = 0;

		for (int i = 0; i < S; i++) {
			if ((step + i) % 3 == 2)
				continue;
			go[k] = a[i];
			tk[k] = toks + (step * 5 + i * 11) % N_TOK;
			n[k++] = 1;
		}
		CHECK_EQ(txl_batch_eval(b, go, tk, n, k, TXL_LOGITS_LAST),
			 TXL_OK);
		if (step % 2 == 0)
			CHECK_EQ(txl_batch_logits(b, go, k), TXL_OK);
		for (int j = 0, i = 0; i < S; i++) {
			if ((step + i) % 3 == 2)
				continue;
			CHECK_EQ(txl_session_eval(t[i], tk[j++], 1,
						  TXL_LOGITS_LAST), TXL_OK);
			CHECK_EQ(txl_session_n_logits(a[i]), 1);
			CHECK_EQ(txl_session_n_past(a[i]), txl_session_n_past(t[i]));
			CHECK_EQ(txl_session_mem_fill(a[i]),
				 txl_session_mem_fill(t[i]));
			if (memcmp(txl_session_logits(a[i]),
				   txl_session_logits(t[i]), sizeof(float) * V)) {
				fprintf(stderr, "FAIL: stream %d of %d, step %d: "
					"logits differ from alone by %g\n", i,
					S, step, max_diff(txl_session_logits(a[i]),
							  txl_session_logits(t[i]),
							  V));
				exit(1);
			}
			double la, lt;
			score(a[i], toks + step % N_TOK, 1, &la);
			score(t[i], toks + step % N_TOK, 1, &lt);
			CHECK(la == lt);
		}
	}
	free_twins(a, t, S);
	txl_batch_free(b);
}

/*
 * Streams of several tokens and of one in the same steps (TXL_LOGITS_ALL):
 * the streams of one token still bit for bit as alone, the others within
 * TOL_REORDER of their twins, every row; their memories go on as the
 * twins' (the next steps agree too).
 */
static void
test_mixed_segments(const struct txl_model *m)
{
	const int V = txl_model_hparams(m)->n_token;
	const int seg = txl_model_hparams(m)->tgt_len;
	struct txl_session *a[4], *t[4];
	const int32_t *tk[4];
	int n[4];
	struct txl_batch *b = batch(m, 4 * seg);

	for (int i = 0; i < 4; i++) {
		a[i] = session(m, 6 + i, 0, TXL_KV_F32);
		t[i] = session(m, 6 + i, 0, TXL_KV_F32);
	}
	for (int step = 0; step < 6; step++) {
		for (int i = 0; i < 4; i++) {
			/* streams 0 and 2: one token; 1 and 3: a segment
			 * (of 2 up to seg_len tokens) */
			n[i] = i % 2 == 0 ? 1 : 2 + (step * 3 + i) % (seg - 1);
			tk[i] = toks + (step * 7 + i * 13) % (N_TOK - seg);
		}
		CHECK_EQ(txl_batch_eval(b, a, tk, n, 4, TXL_LOGITS_ALL), TXL_OK);
		for (int i = 0; i < 4; i++) {
			CHECK_EQ(txl_session_eval(t[i], tk[i], n[i],
						  TXL_LOGITS_ALL), TXL_OK);
			CHECK_EQ(txl_session_n_logits(a[i]), n[i]);
			const float *la = txl_session_logits(a[i]);
			const float *lt = txl_session_logits(t[i]);
			if (n[i] == 1)
				CHECK(memcmp(la, lt, sizeof(float) * V) == 0);
			else
				CHECK(max_diff(la, lt, V * n[i]) <= TOL_REORDER);
		}
	}
	free_twins(a, t, 4);
	txl_batch_free(b);
}

/* One prompt read once, copied into 5 sessions of their own settings,
 * each then fed its own tokens in steps: each as a session that read the
 * prompt itself (--n-samples). */
static void
test_copies(const struct txl_model *m)
{
	const int V = txl_model_hparams(m)->n_token;
	struct txl_session *src = session(m, 12, 0, TXL_KV_F32);
	struct txl_session *a[5], *t[5];
	const int32_t *tk[5];
	int n[5] = { 1, 1, 1, 1, 1 };
	struct txl_batch *b = batch(m, 5);

	CHECK_EQ(txl_session_eval(src, toks, 20, TXL_LOGITS_LAST), TXL_OK);
	for (int i = 0; i < 5; i++) {
		a[i] = session(m, 12, 0, i % 2 ? TXL_KV_F16 : TXL_KV_F32);
		t[i] = session(m, 12, 0, i % 2 ? TXL_KV_F16 : TXL_KV_F32);
		CHECK_EQ(txl_session_copy(a[i], src), TXL_OK);
		CHECK_EQ(txl_session_copy(t[i], src), TXL_OK);
	}
	for (int step = 0; step < 10; step++) {
		for (int i = 0; i < 5; i++)
			tk[i] = toks + 20 + (step + i * 3) % 40;
		CHECK_EQ(txl_batch_eval(b, a, tk, n, 5, TXL_LOGITS_LAST), TXL_OK);
		CHECK_EQ(txl_batch_logits(b, a, 5), TXL_OK);
		for (int i = 0; i < 5; i++) {
			CHECK_EQ(txl_session_eval(t[i], tk[i], 1,
						  TXL_LOGITS_LAST), TXL_OK);
			CHECK(memcmp(txl_session_logits(a[i]),
				     txl_session_logits(t[i]),
				     sizeof(float) * V) == 0);
		}
	}
	free_twins(a, t, 5);
	txl_session_free(src);
	txl_batch_free(b);
}

/* A model without memory: each session of a call as
 * txl_session_eval() of its tokens alone. */
static void
test_no_memory(const struct txl_model *m)
{
	const int V = txl_model_hparams(m)->n_token;
	struct txl_session *a[3], *t[3];
	const int32_t *tk[3];
	int n[3];
	struct txl_batch *b = batch(m, 16);

	for (int i = 0; i < 3; i++) {
		a[i] = session(m, -1, 0, TXL_KV_F32);
		t[i] = session(m, -1, 0, TXL_KV_F32);
	}
	for (int step = 0; step < 5; step++) {
		for (int i = 0; i < 3; i++) {
			n[i] = 1 + (step + i) % 3;
			tk[i] = toks + step * 4 + i;
		}
		CHECK_EQ(txl_batch_eval(b, a, tk, n, 3, TXL_LOGITS_ALL), TXL_OK);
		for (int i = 0; i < 3; i++) {
			CHECK_EQ(txl_session_eval(t[i], tk[i], n[i],
						  TXL_LOGITS_ALL), TXL_OK);
			CHECK(memcmp(txl_session_logits(a[i]),
				     txl_session_logits(t[i]),
				     sizeof(float) * V * n[i]) == 0);
		}
	}
	free_twins(a, t, 3);
	txl_batch_free(b);
}

static int abort_calls;

static bool
abort_third(void *data)
{
	(void)data;
	return ++abort_calls == 3;
}

/* An abort callback of one session fired during a step: TXL_ABORTED,
 * every session's memory and n_past as before (the next step of each
 * then equals its twin's, which never saw the aborted one), no rows of
 * output. */
static void
test_abort(const struct txl_model *m)
{
	const int V = txl_model_hparams(m)->n_token;
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *a[3], *t[3];
	const int32_t *tk[3] = { toks + 1, toks + 2, toks + 3 };
	int n[3] = { 1, 3, 1 };
	struct txl_batch *b = batch(m, 8);

	p.abort_cb = abort_third;
	for (int i = 0; i < 3; i++) {
		if (i == 1)
			CHECK_EQ(txl_session_new(m, &p, &a[i]), TXL_OK);
		else
			a[i] = session(m, -1, 0, TXL_KV_F32);
		t[i] = session(m, -1, 0, TXL_KV_F32);
		CHECK_EQ(txl_session_eval(a[i], toks + 10 * i, 4,
					  TXL_LOGITS_LAST), TXL_OK);
		CHECK_EQ(txl_session_eval(t[i], toks + 10 * i, 4,
					  TXL_LOGITS_LAST), TXL_OK);
	}
	/* the callback fires before the first layer... on its third call:
	 * this step's second layer (the test models have two) */
	abort_calls = 1;
	CHECK_EQ(txl_batch_eval(b, a, tk, n, 3, TXL_LOGITS_LAST), TXL_ABORTED);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(txl_session_n_past(a[i]), 4);
		CHECK_EQ(txl_session_mem_fill(a[i]), 4);
		CHECK_EQ(txl_session_n_logits(a[i]), 0);
	}
	abort_calls = -1000;
	CHECK_EQ(txl_batch_eval(b, a, tk, n, 3, TXL_LOGITS_LAST), TXL_OK);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(txl_session_eval(t[i], tk[i], n[i], TXL_LOGITS_LAST),
			 TXL_OK);
		CHECK(max_diff(txl_session_logits(a[i]), txl_session_logits(t[i]),
			       V) <= (n[i] == 1 ? 0.0 : TOL_REORDER));
	}
	free_twins(a, t, 3);
	txl_batch_free(b);
}

/* Bad arguments: TXL_ERR_INVALID with a reason, nothing changed. */
static void
test_errors(const struct txl_model *m, const struct txl_model *other)
{
	struct txl_batch_params p = txl_batch_params_default();
	struct txl_session *a = session(m, -1, 0, TXL_KV_F32);
	struct txl_session *c = session(m, -1, 0, TXL_KV_F32);
	struct txl_session *o = session(other, -1, 0, TXL_KV_F32);
	struct txl_batch *b = batch(m, 4), *none = (void *)1;
	const int seg = txl_session_get_params(a).seg_len;
	const int V = txl_model_hparams(m)->n_token;
	int32_t bad[1] = { V }, neg[1] = { -1 };
	const int32_t *tk[2] = { toks, toks + 1 };
	int one[2] = { 1, 1 };

	CHECK_EQ(txl_session_eval(a, toks, 3, TXL_LOGITS_LAST), TXL_OK);
	/* params */
	p.max_rows = 0;
	CHECK_EQ(txl_batch_new(m, &p, &none), TXL_ERR_INVALID);
	CHECK(none == NULL);
	CHECK(strstr(txl_last_error(), "max_rows") != NULL);
	p.max_rows = TXL_MAX_BATCH_ROWS + 1;
	CHECK_EQ(txl_batch_new(m, &p, &none), TXL_ERR_INVALID);
	p = txl_batch_params_default();
	p.size = 3;
	CHECK_EQ(txl_batch_new(m, &p, &none), TXL_ERR_INVALID);
	CHECK_EQ(txl_batch_new(NULL, NULL, &none), TXL_ERR_INVALID);
	CHECK_EQ(txl_batch_new(m, NULL, &none), TXL_OK);
	txl_batch_free(none);
	txl_batch_free(NULL);

#define REFUSED(call, what)                                                  \
	do {                                                                 \
		CHECK_EQ(call, TXL_ERR_INVALID);                             \
		CHECK(strstr(txl_last_error(), what) != NULL);               \
		CHECK_EQ(txl_session_n_past(a), 3);                          \
		CHECK_EQ(txl_session_n_logits(a), 1);                        \
	} while (0)
	struct txl_session *pair[2] = { a, c }, *twice[2] = { a, a };
	struct txl_session *mixed[2] = { a, o }, *hole[2] = { a, NULL };
	REFUSED(txl_batch_eval(NULL, pair, tk, one, 2, TXL_LOGITS_LAST),
		"no batch");
	REFUSED(txl_batch_eval(b, NULL, tk, one, 2, TXL_LOGITS_LAST),
		"no sessions");
	REFUSED(txl_batch_eval(b, pair, tk, one, 0, TXL_LOGITS_LAST),
		"no sessions");
	REFUSED(txl_batch_eval(b, hole, tk, one, 2, TXL_LOGITS_LAST),
		"NULL");
	REFUSED(txl_batch_eval(b, mixed, tk, one, 2, TXL_LOGITS_LAST),
		"another model");
	REFUSED(txl_batch_eval(b, twice, tk, one, 2, TXL_LOGITS_LAST),
		"twice");
	REFUSED(txl_batch_eval(b, pair, NULL, one, 2, TXL_LOGITS_LAST),
		"no tokens");
	REFUSED(txl_batch_eval(b, pair, tk, NULL, 2, TXL_LOGITS_LAST),
		"no tokens");
	REFUSED(txl_batch_eval(b, pair, tk, one, 2, (enum txl_logits)7),
		"want");
	int zero[2] = { 1, 0 }, long_[2] = { seg + 1, 1 };
	REFUSED(txl_batch_eval(b, pair, tk, zero, 2, TXL_LOGITS_LAST),
		"out of range");
	REFUSED(txl_batch_eval(b, pair, tk, long_, 2, TXL_LOGITS_LAST),
		"seg_len");
	const int32_t *badt[2] = { toks, bad }, *negt[2] = { neg, toks };
	REFUSED(txl_batch_eval(b, pair, badt, one, 2, TXL_LOGITS_LAST),
		"token id");
	REFUSED(txl_batch_eval(b, pair, negt, one, 2, TXL_LOGITS_LAST),
		"token id");
	const int32_t *nul[2] = { toks, NULL };
	REFUSED(txl_batch_eval(b, pair, nul, one, 2, TXL_LOGITS_LAST),
		"no tokens");
	/* 3 + 3 tokens for a batch of 4 rows */
	int three[2] = { 3, 3 };
	CHECK(seg >= 3);
	REFUSED(txl_batch_eval(b, pair, tk, three, 2, TXL_LOGITS_LAST),
		"max_rows");
	REFUSED(txl_batch_logits(b, mixed, 2), "another model");
	REFUSED(txl_batch_logits(b, twice, 2), "twice");
	REFUSED(txl_batch_logits(NULL, pair, 2), "no batch");
#undef REFUSED
	txl_session_free(a);
	txl_session_free(c);
	txl_session_free(o);
	txl_batch_free(b);
}

/* A batch computes as its sessions do: one of BF16 compute and one of
 * F32 are refused together (nothing changes), two of BF16 stepped. */
static void
test_computes(const struct txl_model *m)
{
	struct txl_batch *b = batch(m, 4);
	struct txl_session *s[2] = { session(m, -1, 0, TXL_KV_F32),
				     session(m, -1, 0, TXL_KV_F32) };
	const int32_t *tk[2] = { toks, toks + 1 };
	int one[2] = { 1, 1 };

	CHECK_EQ(txl_session_set_compute(s[1], TXL_COMPUTE_BF16), TXL_OK);
	CHECK_EQ(txl_batch_eval(b, s, tk, one, 2, TXL_LOGITS_LAST),
		 TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "computes otherwise") != NULL);
	CHECK_EQ(txl_session_n_past(s[0]), 0);
	CHECK_EQ(txl_session_n_past(s[1]), 0);
	CHECK_EQ(txl_session_set_compute(s[0], TXL_COMPUTE_BF16), TXL_OK);
	CHECK_EQ(txl_batch_eval(b, s, tk, one, 2, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_n_past(s[0]), 1);
	CHECK_EQ(txl_session_n_past(s[1]), 1);
	txl_session_free(s[0]);
	txl_session_free(s[1]);
	txl_batch_free(b);
}

int
main(int argc, char **argv)
{
	struct txl_model *m, *m32, *q8, *q4, *adaptive, *window, *bf16;
	int kvs[8];

	if (argc < 8) {
		fprintf(stderr, "usage: test-batch F32 F32_D_HEAD_32 Q8_0 Q4_0 "
			"ADAPTIVE ATTN_TYPE_2 BF16\n");
		return 2;
	}
	for (int i = 1; i < 8; i++)
		if (access(argv[i], R_OK) != 0) {
			fprintf(stderr, "SKIP: no test model %s\n", argv[i]);
			return TEST_SKIP;
		}
	m = load_model(argv[1]);
	m32 = load_model(argv[2]);
	q8 = load_model(argv[3]);
	q4 = load_model(argv[4]);
	adaptive = load_model(argv[5]);
	window = load_model(argv[6]);
	bf16 = load_model(argv[7]);
	/* the tokens are of every model */
	int V = txl_model_hparams(m)->n_token;
	struct txl_model *all[] = { m32, q8, q4, adaptive, window, bf16 };
	for (int i = 0; i < 6; i++)
		if (txl_model_hparams(all[i])->n_token < V)
			V = txl_model_hparams(all[i])->n_token;
	for (int i = 0; i < N_TOK; i++)
		toks[i] = (int32_t)((i * 7919 + 13) % V);

	/* F32 weights, every memory type a d_head of 16 takes */
	for (int i = 0; i < 8; i++)
		kvs[i] = (int[]){ TXL_KV_F32, TXL_KV_F16, TXL_KV_BF16 }[i % 3];
	check_one_token_steps(m, kvs, 7, 24);
	fprintf(stderr, "ok one token a step, F32\n");
	/* d_head 32: the block types too */
	for (int i = 0; i < 8; i++)
		kvs[i] = i % 5;
	check_one_token_steps(m32, kvs, 8, 16);
	check_one_token_steps(q8, kvs, 8, 16);
	/* more streams than one attention task takes (about 37 a step) */
	check_one_token_steps(q8, kvs, MAX_STREAMS, 4);
	fprintf(stderr, "ok one token a step, Q8_0\n");
	check_one_token_steps(q4, kvs, 5, 12);
	fprintf(stderr, "ok one token a step, Q4_0\n");
	for (int i = 0; i < 8; i++)
		kvs[i] = TXL_KV_F32;
	check_one_token_steps(adaptive, kvs, 4, 12);
	fprintf(stderr, "ok one token a step, adaptive\n");
	test_mixed_segments(m);
	test_mixed_segments(q8);
	test_mixed_segments(adaptive);
	fprintf(stderr, "ok mixed segments\n");
	test_copies(m);
	fprintf(stderr, "ok copies\n");
	test_no_memory(window);
	fprintf(stderr, "ok no memory\n");
	test_abort(m);
	fprintf(stderr, "ok abort\n");
	test_errors(m, m32);
	fprintf(stderr, "ok errors\n");
	test_computes(bf16);
	fprintf(stderr, "ok computes\n");
	txl_model_free(m);
	txl_model_free(m32);
	txl_model_free(q8);
	txl_model_free(q4);
	txl_model_free(adaptive);
	txl_model_free(window);
	txl_model_free(bf16);
	return 0;
}
