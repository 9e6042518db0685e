/* SPDX-License-Identifier: MIT */
/*
 * txl-session.c - sessions: their settings, buffers and life.
 *
 * The original code (mem_transformer.py) keeps, per layer, the layer
 * inputs of the last mem_len positions and recomputes their keys and
 * values at every call.  Keys and values are pure per-position functions
 * of those inputs, so this session caches them instead: per layer, the K
 * and V of the memory followed by the current segment, contiguous so that
 * BLAS can read them in one go.  They live in buffers of mem_len + seg_len
 * + slack positions; when a segment would run past the end, the memory is
 * moved back to the start (at most once every `slack` tokens).  The
 * relative-position term R = r_net(sinusoid(distance)) depends on the
 * distance only and is computed once per session.  So the cost of a token
 * depends on mem_len and the model, never on how many tokens came before
 * it, and memory use is fixed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl-internal.h"

struct txl_session_params
txl_session_params_default(void)
{
	return (struct txl_session_params){
		.mem_len = TXL_FROM_MODEL,
		.seg_len = TXL_FROM_MODEL,
		.clamp_len = TXL_FROM_MODEL,
		.same_length = TXL_FROM_MODEL,
		.n_threads = 0,
		.stride = TXL_FROM_MODEL,
		.kv_type = TXL_KV_F32,
	};
}

float *
txl_alloc_floats(size_t n)
{
	size_t bytes = (n * sizeof(float) + 63) / 64 * 64;

	return aligned_alloc(64, bytes ? bytes : 64);
}

uint8_t *
txl_alloc_kv(const struct txl_session *s, size_t rows)
{
	size_t bytes = (rows * (size_t)s->model->hp.n_head * s->kv_row + 63) /
		64 * 64;

	return aligned_alloc(64, bytes ? bytes : 64);
}

enum txl_dtype
txl_kv_dtype(int kv_type)
{
	switch (kv_type) {
	case TXL_KV_F32:
		return TXL_F32;
	case TXL_KV_F16:
		return TXL_F16;
	case TXL_KV_BF16:
		return TXL_BF16;
	case TXL_KV_Q8_0:
		return TXL_Q8_0;
	case TXL_KV_Q4_0:
		return TXL_Q4_0;
	default:
		return TXL_N_DTYPES;
	}
}

/* Floats of the head of an adaptive softmax per row (0: none). */
static int
head_size(const struct txl_hparams *hp)
{
	return hp->n_cutoffs ? hp->cutoffs[0] + hp->n_cutoffs : 0;
}

/* Bytes a session of these sizes allocates (in double: the settings come
 * from files and need not be sane). */
static double
session_bytes(const struct txl_hparams *hp, int seg, int cap, int klen_max,
	      int n_dist, enum txl_dtype kv_dt, int threads)
{
	/* K, V and R in kv_dt: bytes per value, over 4 */
	const double kv = (double)txl_row_bytes(kv_dt, hp->d_head) /
		(4.0 * hp->d_head);
	const double hd = (double)hp->n_head * hp->d_head;
	const double dx = hp->d_model > hp->d_embed ? hp->d_model : hp->d_embed;
	const double per_row = 3.0 * hp->d_model + dx + 4 * hd +
		hp->d_inner + hp->n_token + head_size(hp) + 2.0;

	/* K, V and R in kv_dt, the rest in floats */
	return 4.0 * (hp->n_layer * (kv * (2.0 * cap + n_dist) * hd +
				     (double)n_dist * hp->n_head) +
		      seg * per_row + hp->d_model) +
		txl_attn_bytes(hp, seg, klen_max, n_dist, kv_dt, threads);
}

static enum txl_status
resolve_params(const struct txl_model *m, const struct txl_session_params *in,
	       struct txl_session *s)
{
	const struct txl_hparams *hp = &m->hp;
	struct txl_session_params p = in ? *in : txl_session_params_default();
	const bool memory = txl_attn_has_memory(hp);

	if (p.mem_len == TXL_FROM_MODEL)
		p.mem_len = memory ? hp->mem_len : 0;
	if (p.seg_len == TXL_FROM_MODEL)
		p.seg_len = hp->tgt_len;
	if (p.clamp_len == TXL_FROM_MODEL)
		p.clamp_len = hp->clamp_len;
	if (p.same_length == TXL_FROM_MODEL)
		p.same_length = memory && hp->same_length;
	if (p.stride == TXL_FROM_MODEL && !memory)
		p.stride = 1;
	if (p.mem_len < 0 || p.mem_len > TXL_MEM_LEN_MAX)
		return txl_fail(TXL_ERR_INVALID, "mem_len %d out of range "
				"[0, %d]", p.mem_len, TXL_MEM_LEN_MAX);
	if (p.mem_len > 0 && !memory)
		return txl_fail(TXL_ERR_INVALID, "mem_len %d: a model of "
				"attn_type %d has no memory (the original code "
				"runs it with mem_len 0 only); it recomputes a "
				"window of seg_len tokens instead", p.mem_len,
				hp->attn_type);
	if (p.seg_len < 1 || p.seg_len > TXL_SEG_LEN_MAX)
		return txl_fail(TXL_ERR_INVALID, "seg_len %d out of range "
				"[1, %d]", p.seg_len, TXL_SEG_LEN_MAX);
	if (hp->attn_type == 3 && p.seg_len > hp->max_klen)
		return txl_fail(TXL_ERR_INVALID, "seg_len %d is longer than "
				"the model's position table (max_klen %d)",
				p.seg_len, hp->max_klen);
	if (p.clamp_len < 0)
		return txl_fail(TXL_ERR_INVALID, "clamp_len %d is negative "
				"(0 = no clamping)", p.clamp_len);
	if (p.same_length != 0 && p.same_length != 1)
		return txl_fail(TXL_ERR_INVALID, "same_length must be 0 or 1");
	if (p.same_length && p.mem_len == 0)
		return txl_fail(TXL_ERR_INVALID, "same_length with mem_len 0 "
				"would mask every position");
	if (memory && p.stride != TXL_FROM_MODEL)
		return txl_fail(TXL_ERR_INVALID, "stride %d: only models "
				"without memory (attn_type 2, 3) evaluate "
				"windows", p.stride);
	if (!memory && (p.stride < 1 || p.stride > p.seg_len))
		return txl_fail(TXL_ERR_INVALID, "stride %d out of range "
				"[1, seg_len %d]", p.stride, p.seg_len);
	if (p.n_threads < 0)
		return txl_fail(TXL_ERR_INVALID, "n_threads %d is negative",
				p.n_threads);
	if (txl_kv_dtype(p.kv_type) == TXL_N_DTYPES)
		return txl_fail(TXL_ERR_INVALID, "kv_type %d is none of "
				"TXL_KV_F32, TXL_KV_F16, TXL_KV_BF16, "
				"TXL_KV_Q8_0, TXL_KV_Q4_0", p.kv_type);
	if (txl_dtype_blocked(txl_kv_dtype(p.kv_type)) &&
	    hp->d_head % TXL_QK != 0)
		return txl_fail(TXL_ERR_INVALID, "kv_type %s needs d_head "
				"to be a multiple of %d (blocks of %d values "
				"per head); this model's d_head is %d",
				txl_dtype_name(txl_kv_dtype(p.kv_type)),
				TXL_QK, TXL_QK, hp->d_head);
	s->params = p;
	s->mem_len = p.mem_len;
	s->seg_len = p.seg_len;
	s->clamp_len = p.clamp_len;
	s->same_length = p.same_length;
	s->stride = memory ? 0 : p.stride;
	s->kv_dt = txl_kv_dtype(p.kv_type);
	s->kv_row = txl_row_bytes(s->kv_dt, hp->d_head);
	return TXL_OK;
}

/* The buffer sizes of a session with resolved settings: s->cap and
 * s->n_dist; returns the most keys a position attends to. */
static int
session_shape(struct txl_session *s)
{
	int klen_max = s->mem_len + s->seg_len;
	/* Move the memory back at most once every `slack` tokens. */
	int slack = s->seg_len;

	if (slack < s->mem_len / 4)
		slack = s->mem_len / 4;
	if (slack < 16)
		slack = 16;
	s->cap = klen_max + slack;
	s->n_dist = txl_attn_n_dist(&s->model->hp, s->clamp_len, klen_max);
	return klen_max;
}

int64_t
txl_session_bytes(const struct txl_model *m,
		  const struct txl_session_params *params)
{
	struct txl_session s = { .model = m };
	int klen_max;

	if (resolve_params(m, params, &s) != TXL_OK)
		return -1;
	klen_max = session_shape(&s);
	return (int64_t)session_bytes(&m->hp, s.seg_len, s.cap, klen_max,
				      s.n_dist, s.kv_dt,
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
	int hd = hp->n_head * hp->d_head, klen_max;
	size_t S;

	*out = NULL;
	s = calloc(1, sizeof *s);
	if (!s)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	s->model = m;
	s->out_w = m->out[0].w;
	s->out_b = m->out[0].b;
	if ((st = resolve_params(m, params, s)) != TXL_OK) {
		free(s);
		return st;
	}
	S = (size_t)s->seg_len;
	klen_max = session_shape(s);

	/* Refuse what cannot fit rather than be killed while touching it
	 * (a model file's mem_len or tgt_len can ask for terabytes). */
	double need = session_bytes(hp, s->seg_len, s->cap, klen_max,
				    s->n_dist, s->kv_dt,
				    txl_threads_of(s->params.n_threads));
	double have = (double)sysconf(_SC_PHYS_PAGES) *
		(double)sysconf(_SC_PAGESIZE);
	if (have > 0 && need > have) {
		txl_fail(TXL_ERR_NOMEM, "a session with mem_len %d and seg_len "
			 "%d needs %.1f GiB, more than this machine's %.1f GiB",
			 s->mem_len, s->seg_len, need / (1 << 30),
			 have / (1 << 30));
		free(s);
		return TXL_ERR_NOMEM;
	}
	/* (after the refusal: a session refused changes nothing) */
	txl_set_threads(s->params.n_threads);

	s->k = calloc((size_t)hp->n_layer, sizeof *s->k);
	s->v = calloc((size_t)hp->n_layer, sizeof *s->v);
	if (!s->k || !s->v)
		goto nomem;
	for (int l = 0; l < hp->n_layer; l++) {
		s->k[l] = txl_alloc_kv(s, (size_t)s->cap);
		s->v[l] = txl_alloc_kv(s, (size_t)s->cap);
		if (!s->k[l] || !s->v[l])
			goto nomem;
	}
	int dx = hp->d_model > hp->d_embed ? hp->d_model : hp->d_embed;
	s->h = txl_alloc_floats(S * hp->d_model);
	s->xn = txl_alloc_floats(S * dx);
	s->qkv = txl_alloc_floats(S * 3 * hd);
	s->attn = txl_alloc_floats(S * hd);
	s->tmp = txl_alloc_floats(S * hp->d_model);
	s->ff = txl_alloc_floats(S * hp->d_inner);
	s->logits = txl_alloc_floats(S * hp->n_token);
	s->last_h = txl_alloc_floats((size_t)hp->d_model);
	s->rows = txl_alloc_floats(S * hp->d_model);
	if (!s->last_h || !s->h || !s->xn || !s->qkv || !s->attn || !s->tmp ||
	    !s->ff || !s->logits || !s->rows)
		goto nomem;
	if (head_size(hp) &&
	    !(s->head = txl_alloc_floats(S * (size_t)head_size(hp))))
		goto nomem;
	if (s->stride && !(s->window = malloc(sizeof *s->window * 2 * S)))
		goto nomem;
	if ((st = txl_attn_init(s, klen_max)) != TXL_OK) {
		txl_session_free(s);
		return st;
	}
	*out = s;
	return TXL_OK;
nomem:
	txl_session_free(s);
	return txl_fail(TXL_ERR_NOMEM, "out of memory for a session with "
			"mem_len %d, seg_len %d", s->mem_len, s->seg_len);
}

void
txl_session_free(struct txl_session *s)
{
	if (!s)
		return;
	for (int l = 0; l < s->model->hp.n_layer; l++) {
		if (s->k)
			free(s->k[l]);
		if (s->v)
			free(s->v[l]);
	}
	txl_attn_free(s);
	free(s->k);
	free(s->v);
	free(s->h);
	free(s->xn);
	free(s->qkv);
	free(s->attn);
	free(s->tmp);
	free(s->ff);
	free(s->logits);
	free(s->head);
	free(s->rows);
	free(s->window);
	free(s->last_h);
	free(s->own_out_w);
	free(s->own_out_b);
	free(s);
}

struct txl_session_params
txl_session_get_params(const struct txl_session *s)
{
	return s->params;
}

/* Models without memory: the prediction of the token after the text fed,
 * as a group of one token after its window (the rows of a stride-1 eval). */
static enum txl_status
predict_last(struct txl_session *s)
{
	const int d = s->model->hp.d_model;
	int ctx = s->n_window - 1;
	enum txl_status st;

	if (ctx > s->seg_len - s->stride)
		ctx = s->seg_len - s->stride;
	st = txl_forward_segment(s, s->window + s->n_window - 1 - ctx,
				 ctx + 1);
	if (st == TXL_OK)
		txl_output_keep(s, s->h + (size_t)ctx * d, 1);
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
	const size_t d = (size_t)hp->d_head;
	const int keep = s->mlen < t->mem_len ? s->mlen : t->mem_len;
	const int from = s->kv_start + s->mlen - keep;

	for (int l = 0; l < hp->n_layer; l++) {
		for (int h = 0; h < hp->n_head; h++) {
			txl_convert(txl_kv_row(t, t->k[l], t->cap, h, 0),
				    t->kv_dt,
				    txl_kv_row(s, s->k[l], s->cap, h, from),
				    s->kv_dt, d * (size_t)keep);
			txl_convert(txl_kv_row(t, t->v[l], t->cap, h, 0),
				    t->kv_dt,
				    txl_kv_row(s, s->v[l], s->cap, h, from),
				    s->kv_dt, d * (size_t)keep);
		}
	}
	t->kv_start = 0;
	t->mlen = keep;
	/* without memory, the last tokens are the context */
	t->n_window = s->n_window < t->seg_len ? s->n_window : t->seg_len;
	if (t->n_window)
		memcpy(t->window, s->window + s->n_window - t->n_window,
		       sizeof *t->window * (size_t)t->n_window);
	t->n_past = s->n_past;
	t->have_last = s->have_last;
	memcpy(t->last_h, s->last_h, sizeof(float) * hp->d_model);
	t->n_logits = 0;
	t->logits_valid = false;
	t->logits_src = NULL;
	if (t->window && t->n_window)
		return predict_last(t);
	if (t->have_last)
		txl_output_keep(t, t->last_h, 1);
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
	/* the adapted output layer moves too */
	t->own_out_w = s->own_out_w;
	t->own_out_b = s->own_out_b;
	t->out_w = s->out_w;
	t->out_b = s->out_b;
	s->own_out_w = s->own_out_b = NULL;
	if ((st = carry_text(t, s)) != TXL_OK) {
		/* back where it was, for s to keep */
		s->own_out_w = t->own_out_w;
		s->own_out_b = t->own_out_b;
		t->own_out_w = t->own_out_b = NULL;
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
txl_session_copy(struct txl_session *dst, const struct txl_session *src)
{
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
	if (src->own_out_w) {
		const size_t rows = (size_t)src->out_w.rows;
		const size_t n = rows * (size_t)src->out_w.cols;
		float *w = dst->own_out_w, *b = dst->own_out_b;

		if (!w) {
			w = txl_alloc_floats(n);
			b = txl_alloc_floats(rows);
			if (!w || !b) {
				free(w);
				free(b);
				return txl_fail(TXL_ERR_NOMEM, "out of memory "
						"for a copy of the adapted "
						"output layer");
			}
		}
		memcpy(w, src->own_out_w, n * sizeof(float));
		memcpy(b, src->own_out_b, rows * sizeof(float));
		dst->own_out_w = w;
		dst->own_out_b = b;
		dst->out_w = src->out_w;
		dst->out_w.data = w;
		dst->out_b = b;
	} else {
		txl_output_reset(dst);
	}
	return carry_text(dst, src);
}

void
txl_session_reset(struct txl_session *s)
{
	s->kv_start = 0;
	s->mlen = 0;
	s->n_window = 0;
	s->n_past = 0;
	s->have_last = false;
	s->n_logits = 0;
	s->logits_valid = false;
	s->logits_src = NULL;
	txl_output_reset(s);
}

int
txl_session_n_logits(const struct txl_session *s)
{
	return s->n_logits;
}

int
txl_session_mem_fill(const struct txl_session *s)
{
	return s->mlen;
}

int64_t
txl_session_n_past(const struct txl_session *s)
{
	return s->n_past;
}

/* Keep the output rows asked for of the n rows the forward pass left. */
static void
keep_rows(struct txl_session *s, int n, enum txl_logits want)
{
	const int d = s->model->hp.d_model;

	if (want == TXL_LOGITS_ALL)
		txl_output_keep(s, s->h, n);
	else if (want == TXL_LOGITS_LAST)
		txl_output_keep(s, s->h + (size_t)(n - 1) * d, 1);
}

/* Models without memory: groups of `stride` tokens, each computed after
 * the up to seg_len - stride tokens before it.  Without memory a group
 * changes nothing but the context of later ones, so only the groups whose
 * output is asked for are computed. */
static enum txl_status
eval_windows(struct txl_session *s, const int32_t *tokens, int n,
	     enum txl_logits want)
{
	const int W = s->seg_len, S = s->stride;

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
			if ((st = txl_forward_segment(s, win, ctx + g)))
				return st;
			if (want == TXL_LOGITS_ALL)
				txl_output_keep(s, s->h + (size_t)ctx *
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
		s->n_past += g;
	}
	if (want == TXL_LOGITS_NONE)
		s->have_last = false;	/* nothing computed */
	return TXL_OK;
}

enum txl_status
txl_session_eval(struct txl_session *s, const int32_t *tokens, int n,
		 enum txl_logits want)
{
	const int V = s->model->hp.n_token;

	if (n <= 0 || !tokens)
		return txl_fail(TXL_ERR_INVALID, "no tokens to evaluate");
	if (want == TXL_LOGITS_ALL && n > s->seg_len)
		return txl_fail(TXL_ERR_INVALID, "all logits of %d tokens asked, "
				"more than seg_len %d", n, s->seg_len);
	for (int i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= V)
			return txl_fail(TXL_ERR_INVALID, "token id %d out of "
					"range [0, %d)", tokens[i], V);
	s->n_logits = 0;
	s->logits_valid = false;
	if (s->window)
		return eval_windows(s, tokens, n, want);
	for (int off = 0; off < n; off += s->seg_len) {
		int len = n - off < s->seg_len ? n - off : s->seg_len;
		enum txl_status st;

		if (off > 0 && txl_aborted(s))
			return TXL_ABORTED;
		if ((st = txl_forward_segment(s, tokens + off, len)))
			return st;
		s->n_past += len;
		if (off + len == n)
			keep_rows(s, len, want);
	}
	return TXL_OK;
}
