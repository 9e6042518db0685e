/* SPDX-License-Identifier: MIT */
/*
 * txl-session.c - sessions: their buffers and life, and the public
 * functions of a session (its settings are txl-session-params.c's).
 *
 * A session keeps the keys and values of its memory (txl-kv.h) and the
 * attention's position terms (txl-attn.h), computed once: so the cost of a
 * token depends on mem_len and the model, never on how many tokens came
 * before it, and memory use is fixed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl-session.h"
#include "txl-session-params.h"
#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-forward.h"
#include "txl-log.h"
#include "txl-output.h"
#include "txl-pool.h"
#include "txl-types.h"

/* Bytes a session of these sizes allocates (in double: the settings come
 * from files and need not be sane): kv_rows rows of K and of V (of every
 * layer and head), the position tables, the rows of seg_len tokens. */
static double
session_bytes(const struct txl_model *m, int seg, double kv_rows,
	      int klen_max, int n_dist, enum txl_dtype kv_dt, int threads)
{
	const struct txl_hparams *hp = &m->hp;
	const double hd = (double)hp->n_head * hp->d_head;
	const double dx = hp->d_model > hp->d_embed ? hp->d_model : hp->d_embed;
	const double per_row = 3.0 * hp->d_model + dx + 4 * hd +
		hp->d_inner + hp->n_token + txl_out_head_size(hp) + 2.0;

	/* K and V in kv_dt, the rest in floats */
	return 2.0 * kv_rows * (double)txl_row_bytes(kv_dt, hp->d_head) +
		txl_attn_r_bytes(m, n_dist, kv_dt) +
		4.0 * (seg * per_row + hp->d_model) +
		txl_attn_bytes(hp, seg, klen_max, n_dist, kv_dt, threads);
}

/* The settings of a session of m with in, resolved and checked, into s. */
static enum txl_status
resolve_params(const struct txl_model *m, const struct txl_session_params *in,
	       struct txl_session *s)
{
	struct txl_session_params p = txl_session_params_default();
	enum txl_status st = txl_session_params_resolve(m, in, &p);

	if (st != TXL_OK)
		return st;
	s->params = p;
	return TXL_OK;
}

/* The buffer sizes of a session with resolved settings. */
struct shape {
	double kv_rows;		/* rows of K (or V) of every layer and head */
	int klen_max;		/* the most keys a position attends to */
	int n_dist;		/* rows of the relative-position tables */
};

static struct shape
session_shape(const struct txl_session *s)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_session_params *p = &s->params;
	struct shape sh = { .klen_max = p->mem_len + p->seg_len };

	for (int l = 0; l < hp->n_layer; l++)
		for (int h = 0; h < hp->n_head; h++)
			sh.kv_rows += txl_kv_cap(txl_head_keep(s->model, l, h,
							   p->mem_len),
						 p->seg_len);
	sh.n_dist = txl_attn_n_dist(s->model, p->clamp_len, p->mem_len,
				    sh.klen_max);
	return sh;
}

int64_t
txl_session_bytes(const struct txl_model *m,
		  const struct txl_session_params *params)
{
	struct txl_session s = { .model = m };
	struct shape sh;

	if (resolve_params(m, params, &s) != TXL_OK)
		return -1;
	sh = session_shape(&s);
	return (int64_t)session_bytes(m, s.params.seg_len, sh.kv_rows,
				      sh.klen_max, sh.n_dist,
				      txl_kv_dtype(s.params.kv_type),
				      txl_threads_of(s.params.n_threads));
}

enum txl_status
txl_session_new(const struct txl_model *m,
		const struct txl_session_params *params,
		struct txl_session **out)
{
	const struct txl_hparams *hp = &m->hp;
	struct txl_session *s;
	enum txl_status st;
	struct shape sh;
	size_t S;

	*out = NULL;
	s = calloc(1, sizeof *s);
	if (!s)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	s->model = m;
	if ((st = resolve_params(m, params, s)) != TXL_OK) {
		free(s);
		return st;
	}
	const struct txl_session_params *p = &s->params;

	S = (size_t)p->seg_len;
	sh = session_shape(s);
	const enum txl_dtype kv_dt = txl_kv_dtype(p->kv_type);

	/* Refuse what cannot fit rather than be killed while touching it
	 * (a model file's mem_len or tgt_len can ask for terabytes). */
	double need = session_bytes(m, p->seg_len, sh.kv_rows, sh.klen_max,
				    sh.n_dist, kv_dt,
				    txl_threads_of(p->n_threads));
	double have = (double)sysconf(_SC_PHYS_PAGES) *
		(double)sysconf(_SC_PAGESIZE);
	if (have > 0 && need > have) {
		txl_fail(TXL_ERR_NOMEM, "a session with mem_len %d and seg_len "
			 "%d needs %.1f GiB, more than this machine's %.1f GiB",
			 p->mem_len, p->seg_len, need / (1 << 30),
			 have / (1 << 30));
		free(s);
		return TXL_ERR_NOMEM;
	}
	/* (after the refusal: a session refused changes nothing) */
	txl_set_threads(p->n_threads);

	if (m->spans) {
		int *keep = malloc(sizeof *keep * (size_t)hp->n_layer *
				   (size_t)hp->n_head);

		if (!keep)
			goto nomem;
		for (int l = 0; l < hp->n_layer; l++)
			for (int h = 0; h < hp->n_head; h++)
				keep[(size_t)l * hp->n_head + h] =
					txl_head_keep(m, l, h, p->mem_len);
		st = txl_kv_init(&s->kv, hp->n_layer, hp->n_head, hp->d_head,
				 kv_dt, p->mem_len, keep, p->seg_len,
				 p->mem_init == TXL_MEM_ZEROS);
		free(keep);
	} else {
		st = txl_kv_init(&s->kv, hp->n_layer, hp->n_head, hp->d_head,
				 kv_dt, p->mem_len, NULL, p->seg_len,
				 p->mem_init == TXL_MEM_ZEROS);
	}
	if (st != TXL_OK)
		goto nomem;
	s->last_h = txl_alloc_floats((size_t)hp->d_model);
	if (!txl_seg_rows_alloc(&s->rows, hp, S) || !s->last_h)
		goto nomem;
	if (txl_out_init(&s->out, m, p->seg_len, s->rows.xn,
			 s->rows.tmp) != TXL_OK)
		goto nomem;

	if (!txl_attn_has_memory(&m->hp) &&
	    !(s->window = malloc(sizeof *s->window * 2 * S)))
		goto nomem;
	const struct txl_attn_shape ash = {
		.seg_len = p->seg_len, .mem_len = p->mem_len,
		.clamp_len = p->clamp_len, .same_length = p->same_length,
		.klen_max = sh.klen_max,
	};
	if ((st = txl_attn_init(&s->attn, m, &ash, &s->kv)) != TXL_OK) {
		txl_session_free(s);
		return st;
	}
	*out = s;
	return TXL_OK;
nomem:
	/* the message first: p is in s */
	st = txl_fail(TXL_ERR_NOMEM, "out of memory for a session with "
		      "mem_len %d, seg_len %d", p->mem_len, p->seg_len);
	txl_session_free(s);
	return st;
}

void
txl_session_free(struct txl_session *s)
{
	if (!s)
		return;
	txl_attn_free(&s->attn);
	txl_kv_free(&s->kv);
	txl_out_free(&s->out);
	txl_seg_rows_free(&s->rows);
	free(s->window);
	free(s->last_h);
	free(s);
}

struct txl_session_params
txl_session_get_params(const struct txl_session *s)
{
	return s->params;
}

/* One segment's forward pass on the session's memory and rows; the
 * output of its last position is kept as the last one fed. */
static enum txl_status
forward(struct txl_session *s, const int32_t *tok, int n)
{
	const int d = s->model->hp.d_model;
	const struct txl_forward_stream st = {
		.kv = &s->kv, .attn = &s->attn,
		.tok = tok, .n = n, .abort_cb = s->params.abort_cb,
		.abort_data = s->params.abort_data,
	};
	const struct txl_forward f = {
		.model = s->model, .st = &st, .n_st = 1,
		.rows = { .n = n, .n_one = n == 1, .compute = s->compute },
		.h = s->rows.h, .xn = s->rows.xn, .att = s->rows.att,
		.tmp = s->rows.tmp, .ff = s->rows.ff, .qkv = s->attn.qkv,
	};
	enum txl_status rc = txl_forward(&f);

	if (rc != TXL_OK)
		return rc;
	memcpy(s->last_h, s->rows.h + (size_t)(n - 1) * d, sizeof(float) * d);
	s->have_last = true;
	return TXL_OK;
}

/* Models without memory: the prediction of the token after the text fed,
 * as a group of one token after its window (the rows of a stride-1 eval). */
static enum txl_status
predict_last(struct txl_session *s)
{
	const int d = s->model->hp.d_model;
	int ctx = s->n_window - 1;
	enum txl_status st;

	if (ctx > s->params.seg_len - s->params.stride)
		ctx = s->params.seg_len - s->params.stride;
	st = forward(s, s->window + s->n_window - 1 - ctx, ctx + 1);
	if (st == TXL_OK)
		txl_out_keep(&s->out, s->rows.h + (size_t)ctx * d, 1);
	return st;
}

/*
 * Give @p t, a session of the same model, the text of @p s: the most
 * recent positions of its memory that t's mem_len holds (converted to
 * t's kv_type: K and V are per-position values that no setting changes,
 * and a smaller mem_len keeps what _update_mems would), the window of a
 * model without memory, n_past, the output of the last position and the
 * prediction that follows it, as after a load.  The adapted output layer
 * is the caller's to carry.
 */
static enum txl_status
carry_text(struct txl_session *t, const struct txl_session *s)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int mem_len = t->params.mem_len, seg_len = t->params.seg_len;
	const int keep = s->kv.fill < mem_len ? s->kv.fill : mem_len;

	/* converted if the kv_type changes; with a memory of zero states,
	 * its last positions, the older ones zeros */
	txl_kv_copy_last(&t->kv, &s->kv, keep);
	/* without memory, the last tokens are the context */
	t->n_window = s->n_window < seg_len ? s->n_window : seg_len;
	if (t->n_window)
		memcpy(t->window, s->window + s->n_window - t->n_window,
		       sizeof *t->window * (size_t)t->n_window);
	t->n_past = s->n_past;
	t->have_last = s->have_last;
	memcpy(t->last_h, s->last_h, sizeof(float) * hp->d_model);
	txl_out_clear(&t->out);
	t->out.src = NULL;
	/* the prediction of the next token, as after a load */
	if (t->window && t->n_window)
		return predict_last(t);
	if (t->have_last)
		txl_out_keep(&t->out, t->last_h, 1);
	return TXL_OK;
}

enum txl_status
txl_session_set_params(struct txl_session *s,
		       const struct txl_session_params *params)
{
	struct txl_session *t, swap;
	enum txl_status st;

	/* build the new buffers first, so that a refusal leaves s as it
	 * was; then move the text over */
	if ((st = txl_session_new(s->model, params, &t)) != TXL_OK)
		return st;
	/* the adapted output layer moves too, and how it computes */
	txl_out_move_adapted(&t->out, &s->out);
	txl_session_set_compute(t, s->compute);
	if ((st = carry_text(t, s)) != TXL_OK) {
		/* back where it was, for s to keep */
		txl_out_move_adapted(&s->out, &t->out);
		txl_session_free(t);
		return st;
	}
	swap = *s;
	*s = *t;
	*t = swap;
	txl_session_free(t);
	return TXL_OK;
}

enum txl_status
txl_session_set_compute(struct txl_session *s, enum txl_compute compute)
{
	enum txl_status st = txl_model_check_compute(s->model, compute);

	if (st != TXL_OK)
		return st;
	s->compute = compute;
	s->attn.shape.compute = compute;
	s->out.compute = compute;
	return TXL_OK;
}

enum txl_compute
txl_session_get_compute(const struct txl_session *s)
{
	return s->compute;
}

enum txl_status
txl_session_copy(struct txl_session *dst, const struct txl_session *src)
{
	enum txl_status st;

	if (!dst || !src)
		return txl_fail(TXL_ERR_INVALID, "txl_session_copy: a NULL "
				"session");
	if (dst->model != src->model)
		return txl_fail(TXL_ERR_INVALID, "txl_session_copy: the "
				"sessions are of different models");
	if (dst == src)
		return TXL_OK;
	/* in place, dst's buffers reused (a copy per document of
	 * --score-docs must not build a session); the adapted output layer
	 * first, the only part that can fail */
	if ((st = txl_out_copy_adapted(&dst->out, &src->out)) != TXL_OK)
		return st;
	return carry_text(dst, src);
}

void
txl_session_reset(struct txl_session *s)
{
	txl_kv_clear(&s->kv);
	s->n_window = 0;
	s->n_past = 0;
	s->have_last = false;
	txl_out_clear(&s->out);
	s->out.src = NULL;
	txl_out_reset(&s->out);
}

enum txl_status
txl_session_skip(struct txl_session *s, const int32_t *tokens, int n)
{
	if (!s)
		return txl_fail(TXL_ERR_INVALID, "txl_session_skip: no "
				"session");
	if (n <= 0 || !tokens)
		return txl_fail(TXL_ERR_INVALID, "no tokens to skip");
	for (int i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= s->model->hp.n_token)
			return txl_fail(TXL_ERR_INVALID, "token id %d out of "
					"range [0, %d)", tokens[i],
					s->model->hp.n_token);
	/* forget the memory, as a reset does (a memory of zero states that
	 * holds nothing else stays as it is: a long text is skipped a line
	 * at a time), but not the adapted output layer */
	if (!s->kv.zeros || s->kv.written > 0)
		txl_kv_clear(&s->kv);
	s->n_window = 0;
	s->have_last = false;
	txl_out_clear(&s->out);
	s->out.src = NULL;
	txl_count_fed(s, n);
	return TXL_OK;
}

int
txl_session_n_logits(const struct txl_session *s)
{
	return s->out.n_rows;
}

int
txl_session_mem_fill(const struct txl_session *s)
{
	return s->kv.fill;
}

int64_t
txl_session_n_past(const struct txl_session *s)
{
	return s->n_past;
}

const float *
txl_session_logits(struct txl_session *s)
{
	if (!s) {
		txl_fail(TXL_ERR_INVALID, "txl_session_logits: no session");
		return NULL;
	}
	txl_out_logits(&s->out);
	return s->out.logits;
}

enum txl_status
txl_session_nonfinite(const struct txl_session *s)
{
	return txl_fail(TXL_ERR_NUMERIC, "%s: the model produced non-finite "
			"values (NaN or inf) in its logits: its weights "
			"overflow", s->model->file.path);
}

enum txl_status
txl_session_score(struct txl_session *s, const int32_t *targets, int n,
		  double *logprobs)
{
	enum txl_status st;

	if (!s)
		return txl_fail(TXL_ERR_INVALID, "txl_session_score: no "
				"session");
	if ((st = txl_out_score(&s->out, targets, n, logprobs)) != TXL_OK)
		return st;
	/* a finite row's log-probabilities are finite */
	for (int i = 0; i < n; i++)
		if (!isfinite(logprobs[i]))
			return txl_session_nonfinite(s);
	return TXL_OK;
}

enum txl_status
txl_session_adapt(struct txl_session *s, const int32_t *targets, int n,
		  float lr)
{
	if (!s)
		return txl_fail(TXL_ERR_INVALID, "txl_session_adapt: no "
				"session");
	return txl_out_adapt(&s->out, targets, n, lr);
}

/* Keep the output rows asked for of the n rows the forward pass left. */
static void
keep_rows(struct txl_session *s, int n, enum txl_logits want)
{
	const int d = s->model->hp.d_model;

	if (want == TXL_LOGITS_ALL)
		txl_out_keep(&s->out, s->rows.h, n);
	else if (want == TXL_LOGITS_LAST)
		txl_out_keep(&s->out, s->rows.h + (size_t)(n - 1) * d, 1);
}

/* Models without memory: groups of `stride` tokens, each computed after
 * the up to seg_len - stride tokens before it.  Without memory a group
 * changes nothing but the context of later ones, so only the groups whose
 * output is asked for are computed. */
static enum txl_status
eval_windows(struct txl_session *s, const int32_t *tokens, int n,
	     enum txl_logits want)
{
	const int W = s->params.seg_len, S = s->params.stride;

	for (int off = 0; off < n; off += S) {
		const int g = n - off < S ? n - off : S;
		const bool last = off + g == n;
		const int ctx = s->n_window < W - S ? s->n_window : W - S;
		int32_t *win = s->window + s->n_window - ctx;
		enum txl_status st;

		if (off > 0 && txl_aborted(s))
			return TXL_ABORTED;
		memcpy(s->window + s->n_window, tokens + off,
		       sizeof *tokens * (size_t)g);
		if (want == TXL_LOGITS_ALL || (want == TXL_LOGITS_LAST && last)) {
			if ((st = forward(s, win, ctx + g)))
				return st;
			if (want == TXL_LOGITS_ALL)
				txl_out_keep(&s->out, s->rows.h + (size_t)ctx *
						s->model->hp.d_model, g);
			else
				keep_rows(s, ctx + g, want);
		}
		/* the window: the last seg_len tokens */
		s->n_window += g;
		if (s->n_window > W) {
			memmove(s->window, s->window + s->n_window - W,
				sizeof *s->window * (size_t)W);
			s->n_window = W;
		}
		txl_count_fed(s, g);
	}
	if (want == TXL_LOGITS_NONE)
		s->have_last = false;	/* nothing computed */
	return TXL_OK;
}

enum txl_status
txl_session_eval(struct txl_session *s, const int32_t *tokens, int n,
		 enum txl_logits want)
{
	int V;

	if (!s)
		return txl_fail(TXL_ERR_INVALID, "txl_session_eval: no session");
	if (want != TXL_LOGITS_NONE && want != TXL_LOGITS_LAST &&
	    want != TXL_LOGITS_ALL)
		return txl_fail(TXL_ERR_INVALID, "txl_session_eval: want %d is "
				"none of TXL_LOGITS_NONE, _LAST, _ALL",
				(int)want);
	V = s->model->hp.n_token;
	if (n <= 0 || !tokens)
		return txl_fail(TXL_ERR_INVALID, "no tokens to evaluate");
	if (want == TXL_LOGITS_ALL && n > s->params.seg_len)
		return txl_fail(TXL_ERR_INVALID, "all logits of %d tokens asked, "
				"more than seg_len %d", n, s->params.seg_len);
	for (int i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= V)
			return txl_fail(TXL_ERR_INVALID, "token id %d out of "
					"range [0, %d)", tokens[i], V);
	txl_out_clear(&s->out);
	if (s->window)
		return eval_windows(s, tokens, n, want);
	for (int off = 0, seg = s->params.seg_len; off < n; off += seg) {
		int len = n - off < seg ? n - off : seg;
		enum txl_status st;

		if (off > 0 && txl_aborted(s))
			return TXL_ABORTED;
		if ((st = forward(s, tokens + off, len)))
			return st;
		txl_count_fed(s, len);
		if (off + len == n)
			keep_rows(s, len, want);
	}
	return TXL_OK;
}
