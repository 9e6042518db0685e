/* SPDX-License-Identifier: MIT */
/*
 * txl-batch.c - batches: several sessions of one model stepped in one
 * forward pass (txl.h says what is promised).
 *
 * A batch holds the rows of a step and nothing of the streams: each step
 * lays out the tokens of its sessions as rows, those of sessions of one
 * token first (their products are matrix-vector products, txl-rows.h),
 * runs txl_forward() over them with each session's memory and attention,
 * and hands each session its rows of output as txl_session_eval() would.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl.h"
#include "txl-alloc.h"
#include "txl-forward.h"
#include "txl-log.h"
#include "txl-output.h"
#include "txl-rows.h"
#include "txl-session.h"

struct txl_batch {
	const struct txl_model *model;
	int cap;			/* rows: max_rows */
	struct txl_seg_rows rows;	/* a step's (cap rows) */
	float *qkv;			/* (cap, 3 * n_head * d_head) */
	float *act;			/* txl_rows' scratch, TXL_EACH_MAX rows */
	struct txl_forward_stream *st;	/* cap: a step's streams */
	int *of;			/* cap: the session of each stream */
	struct txl_session **sorted;	/* cap: the sessions, to find twins */
	struct txl_out **outs;		/* cap */
};

struct txl_batch_params
txl_batch_params_default(void)
{
	return (struct txl_batch_params){
		.size = sizeof(struct txl_batch_params),
		.max_rows = 512,
	};
}

/* The widest row a product of the model takes (for the scratch of its
 * activations in int8 blocks). */
static int
widest(const struct txl_hparams *hp)
{
	int k = hp->d_model;

	if (hp->d_embed > k)
		k = hp->d_embed;
	if (hp->d_inner > k)
		k = hp->d_inner;
	if (hp->n_head * hp->d_head > k)
		k = hp->n_head * hp->d_head;
	return k;
}

void
txl_batch_free(struct txl_batch *b)
{
	if (!b)
		return;
	txl_seg_rows_free(&b->rows);
	free(b->qkv);
	free(b->act);
	free(b->st);
	free(b->of);
	free(b->sorted);
	free(b->outs);
	free(b);
}

enum txl_status
txl_batch_new(const struct txl_model *m, const struct txl_batch_params *in,
	      struct txl_batch **out)
{
	const size_t min = TXL_END_OF(struct txl_batch_params, max_rows);
	struct txl_batch_params p = txl_batch_params_default();
	struct txl_batch *b;
	bool rows_ok;
	enum txl_status st;

	if (!out)
		return txl_fail(TXL_ERR_INVALID, "txl_batch_new: no place for "
				"the batch");
	*out = NULL;
	if (!m)
		return txl_fail(TXL_ERR_INVALID, "txl_batch_new: no model");
	if (in && (st = txl_copy_sized(&p, min, sizeof p, in,
				       "txl_batch_params")) != TXL_OK)
		return st;
	if (p.max_rows < 1 || p.max_rows > TXL_MAX_BATCH_ROWS)
		return txl_fail(TXL_ERR_INVALID, "max_rows %d out of range "
				"[1, %d]", p.max_rows, TXL_MAX_BATCH_ROWS);

	const struct txl_hparams *hp = &m->hp;
	const size_t R = (size_t)p.max_rows, hd = (size_t)hp->n_head *
		hp->d_head;
	const size_t dx = hp->d_model > hp->d_embed ? hp->d_model : hp->d_embed;
	const size_t act = txl_rows_act_floats(TXL_EACH_MAX, widest(hp));
	/* refused before any is touched, as a session is */
	const double need = 4.0 * ((double)R * (2.0 * hp->d_model + dx +
					       4.0 * hd + hp->d_inner) + act) +
		(double)R * (sizeof *b->st + sizeof *b->of +
			     sizeof *b->sorted + sizeof *b->outs);
	const double have = (double)sysconf(_SC_PHYS_PAGES) *
		(double)sysconf(_SC_PAGESIZE);

	if (have > 0 && need > have)
		return txl_fail(TXL_ERR_NOMEM, "a batch of %d rows needs %.1f "
				"GiB, more than this machine's %.1f GiB",
				p.max_rows, need / (1 << 30), have / (1 << 30));
	if (!(b = calloc(1, sizeof *b)))
		return txl_fail(TXL_ERR_NOMEM, "out of memory for a batch");
	b->model = m;
	b->cap = p.max_rows;
	rows_ok = txl_seg_rows_alloc(&b->rows, hp, R);
	b->qkv = txl_alloc_floats(R * 3 * hd);
	b->act = txl_alloc_floats(act);
	b->st = calloc(R, sizeof *b->st);
	b->of = calloc(R, sizeof *b->of);
	b->sorted = calloc(R, sizeof *b->sorted);
	b->outs = calloc(R, sizeof *b->outs);
	if (!rows_ok || !b->qkv || !b->act || !b->st || !b->of ||
	    !b->sorted || !b->outs) {
		txl_batch_free(b);
		return txl_fail(TXL_ERR_NOMEM, "out of memory for a batch of "
				"%d rows", p.max_rows);
	}
	*out = b;
	return TXL_OK;
}

static int
by_address(const void *a, const void *b)
{
	const uintptr_t x = (uintptr_t)*(struct txl_session *const *)a;
	const uintptr_t y = (uintptr_t)*(struct txl_session *const *)b;

	return x < y ? -1 : x > y;
}

/* The sessions of a call: of the batch's model, none twice, at most
 * cap of them. */
static enum txl_status
check_sessions(struct txl_batch *b, const char *fn,
	       struct txl_session *const *sessions, int n_sessions)
{
	if (!sessions || n_sessions < 1)
		return txl_fail(TXL_ERR_INVALID, "%s: no sessions", fn);
	if (n_sessions > b->cap)
		return txl_fail(TXL_ERR_INVALID, "%s: %d sessions, more than "
				"the batch's max_rows %d", fn, n_sessions,
				b->cap);
	for (int i = 0; i < n_sessions; i++) {
		if (!sessions[i])
			return txl_fail(TXL_ERR_INVALID, "%s: session %d is "
					"NULL", fn, i);
		if (sessions[i]->model != b->model)
			return txl_fail(TXL_ERR_INVALID, "%s: session %d is of "
					"another model than the batch", fn, i);
		if (sessions[i]->compute != sessions[0]->compute)
			return txl_fail(TXL_ERR_INVALID, "%s: session %d "
					"computes otherwise than the first "
					"(txl_session_set_compute)", fn, i);
		b->sorted[i] = sessions[i];
	}
	qsort(b->sorted, (size_t)n_sessions, sizeof *b->sorted, by_address);
	for (int i = 1; i < n_sessions; i++)
		if (b->sorted[i] == b->sorted[i - 1])
			return txl_fail(TXL_ERR_INVALID, "%s: a session comes "
					"twice", fn);
	return TXL_OK;
}

/* A session's rows of output after its segment: rows [first, first + n)
 * of the pass, as txl_session_eval() keeps them. */
static void
keep_output(struct txl_session *s, const float *h, int n,
	    enum txl_logits want)
{
	const int d = s->model->hp.d_model;

	memcpy(s->last_h, h + (size_t)(n - 1) * d, sizeof(float) * d);
	s->have_last = true;
	txl_count_fed(s, n);
	if (want == TXL_LOGITS_ALL)
		txl_out_keep(&s->out, h, n);
	else if (want == TXL_LOGITS_LAST)
		txl_out_keep(&s->out, h + (size_t)(n - 1) * d, 1);
}

enum txl_status
txl_batch_eval(struct txl_batch *b, struct txl_session *const *sessions,
	       const int32_t *const *tokens, const int *n, int n_sessions,
	       enum txl_logits want)
{
	const int V = b ? b->model->hp.n_token : 0;
	enum txl_status st;
	int rows = 0, k = 0;

	if (!b)
		return txl_fail(TXL_ERR_INVALID, "txl_batch_eval: no batch");
	if ((st = check_sessions(b, "txl_batch_eval", sessions, n_sessions)))
		return st;
	if (!tokens || !n)
		return txl_fail(TXL_ERR_INVALID, "txl_batch_eval: no tokens");
	if (want != TXL_LOGITS_NONE && want != TXL_LOGITS_LAST &&
	    want != TXL_LOGITS_ALL)
		return txl_fail(TXL_ERR_INVALID, "txl_batch_eval: want %d is "
				"none of TXL_LOGITS_NONE, _LAST, _ALL",
				(int)want);
	for (int i = 0; i < n_sessions; i++) {
		if (n[i] < 1 || n[i] > sessions[i]->params.seg_len)
			return txl_fail(TXL_ERR_INVALID, "txl_batch_eval: %d "
					"tokens for session %d, out of range "
					"[1, seg_len %d]", n[i], i,
					sessions[i]->params.seg_len);
		if (!tokens[i])
			return txl_fail(TXL_ERR_INVALID, "txl_batch_eval: no "
					"tokens for session %d", i);
		for (int j = 0; j < n[i]; j++)
			if (tokens[i][j] < 0 || tokens[i][j] >= V)
				return txl_fail(TXL_ERR_INVALID,
						"txl_batch_eval: token id %d "
						"of session %d out of range "
						"[0, %d)", tokens[i][j], i, V);
		rows += n[i];
		if (rows > b->cap)
			return txl_fail(TXL_ERR_INVALID, "txl_batch_eval: more "
					"than the batch's max_rows %d tokens",
					b->cap);
	}
	if (!txl_attn_has_memory(&b->model->hp)) {
		/* a window of its own per token: one after another */
		for (int i = 0; i < n_sessions; i++)
			if ((st = txl_session_eval(sessions[i], tokens[i], n[i],
						   want)) != TXL_OK)
				return st;
		return TXL_OK;
	}

	/* the rows: sessions of one token first (matrix-vector products),
	 * then the segments of the others */
	rows = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n_sessions; i++) {
			struct txl_session *s = sessions[i];

			if ((n[i] == 1) != (pass == 0))
				continue;
			b->st[k] = (struct txl_forward_stream){
				.kv = &s->kv, .attn = &s->attn,
				.tok = tokens[i],
				.first = rows, .n = n[i],
				.abort_cb = s->params.abort_cb,
				.abort_data = s->params.abort_data,
			};
			b->of[k++] = i;
			rows += n[i];
		}
	int n_one = 0;
	while (n_one < k && b->st[n_one].n == 1)
		n_one++;
	const struct txl_forward f = {
		.model = b->model, .st = b->st, .n_st = k,
		.rows = { .n = rows, .n_one = n_one,
			  .compute = sessions[0]->compute, .act = b->act },
		.h = b->rows.h, .xn = b->rows.xn, .att = b->rows.att,
		.tmp = b->rows.tmp, .ff = b->rows.ff, .qkv = b->qkv,
	};
	for (int i = 0; i < n_sessions; i++)
		txl_out_clear(&sessions[i]->out);
	if ((st = txl_forward(&f)) != TXL_OK)
		return st;
	for (int j = 0; j < k; j++)
		keep_output(sessions[b->of[j]], b->rows.h +
			    (size_t)b->st[j].first * b->model->hp.d_model,
			    b->st[j].n, want);
	return TXL_OK;
}

enum txl_status
txl_batch_logits(struct txl_batch *b, struct txl_session *const *sessions,
		 int n_sessions)
{
	enum txl_status st;

	if (!b)
		return txl_fail(TXL_ERR_INVALID, "txl_batch_logits: no batch");
	if ((st = check_sessions(b, "txl_batch_logits", sessions,
				 n_sessions)))
		return st;
	for (int i = 0; i < n_sessions; i++)
		b->outs[i] = &sessions[i]->out;
	txl_out_logits_many(b->outs, n_sessions, b->act);
	return TXL_OK;
}
