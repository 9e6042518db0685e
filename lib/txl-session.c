/* SPDX-License-Identifier: MIT */
/*
 * txl-session.c - the Transformer-XL forward pass with its memory.
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
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl-internal.h"

#define STATE_MAGIC "TXLSTATE"
#define STATE_VERSION 1u

struct txl_session {
	const struct txl_model *model;
	struct txl_session_params params;	/* resolved */
	int mem_len, seg_len, clamp_len;
	bool same_length;

	/* memory: positions [kv_start, kv_start + mlen) of k[l] and v[l] */
	int cap;		/* positions per K/V buffer */
	int kv_start, mlen;
	int64_t n_past;
	float **k, **v;		/* (n_layer) x (cap, n_head * d_head) */

	/* the output layer: the model's, or the session's own copy once
	 * txl_session_adapt() has changed it */
	float *own_out_w, *own_out_b;	/* NULL until the first adapt */
	const float *out_w, *out_b;

	float *last_h;		/* (d_model) output of the last position fed */
	bool have_last;
	int n_logits;		/* rows of logits valid now */
	const float *logits_src; /* their output-layer inputs (rows of h or
				    xn), for txl_session_adapt() */

	int n_dist;		/* rows of r: distances 0 .. n_dist-1 */
	float **r;		/* (n_layer) x (n_dist, n_head * d_head) */

	/* scratch, sized for seg_len rows */
	float *h;		/* (seg_len, d_model) the residual stream */
	float *xn;		/* (seg_len, max(d_model, d_embed)) */
	float *qkv;		/* (seg_len, 3 * n_head * d_head) */
	float *qw, *qr;		/* (seg_len, d_head) q + r_w_bias, q + r_r_bias */
	float *score;		/* (seg_len, mem_len + seg_len) */
	float *bd;		/* (seg_len, n_dist) */
	float *attn;		/* (seg_len, n_head * d_head) */
	float *tmp;		/* (seg_len, d_model) */
	float *ff;		/* (seg_len, d_inner) */
	float *logits;		/* (seg_len, n_token) */
};

static void output_logits(struct txl_session *s, int first, int rows);

struct txl_session_params
txl_session_params_default(void)
{
	return (struct txl_session_params){
		.mem_len = TXL_FROM_MODEL,
		.seg_len = TXL_FROM_MODEL,
		.clamp_len = TXL_FROM_MODEL,
		.same_length = TXL_FROM_MODEL,
		.n_threads = 0,
	};
}

static float *
alloc_floats(size_t n)
{
	/* 64-byte aligned, not cleared: pages are touched only when used;
	 * n may be 0 */
	size_t bytes = (n * sizeof(float) + 63) / 64 * 64;

	return aligned_alloc(64, bytes ? bytes : 64);
}

/* Bytes a session of these sizes allocates (in double: the settings come
 * from files and need not be sane). */
static double
session_bytes(const struct txl_hparams *hp, int seg, int cap, int klen_max,
	      int n_dist)
{
	const double hd = (double)hp->n_head * hp->d_head;
	const double dx = hp->d_model > hp->d_embed ? hp->d_model : hp->d_embed;
	const double per_row = 2.0 * hp->d_model + dx + 4 * hd +
		2.0 * hp->d_head + klen_max + n_dist + hp->d_inner +
		hp->n_token;

	return 4.0 * (hp->n_layer * (2.0 * cap * hd + (double)n_dist * hd) +
		      seg * per_row + hp->d_model);
}

/* sinusoid(pos)[k] = sin(pos f_k), [k + d/2] = cos(pos f_k) with
 * f_k = 1 / 10000^(2k/d), in float like the original's PositionalEmbedding
 * (so that large positions round the same way). */
static void
sinusoid(float *out, float pos, int d)
{
	int half = (d + 1) / 2;

	for (int k = 0; k < half; k++) {
		float expo = (float)(2 * k) / (float)d;
		float inv_freq = 1.0f / powf(10000.0f, expo);
		float a = pos * inv_freq;
		out[k] = sinf(a);
		if (half + k < d)
			out[half + k] = cosf(a);
	}
}

/* R[l] = r_net_l(sinusoid(distance)), distances 0 .. n_dist-1. */
static enum txl_status
build_r(struct txl_session *s)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	float *pe = alloc_floats((size_t)s->n_dist * (size_t)d);

	if (!pe)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int t = 0; t < s->n_dist; t++)
		sinusoid(pe + (size_t)t * d, (float)t, d);
	for (int l = 0; l < hp->n_layer; l++) {
		s->r[l] = alloc_floats((size_t)s->n_dist * (size_t)hd);
		if (!s->r[l]) {
			free(pe);
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		txl_matmul(s->r[l], pe, s->model->layers[l].r_w, s->n_dist, d,
			   hd, false);
	}
	free(pe);
	return TXL_OK;
}

static enum txl_status
resolve_params(const struct txl_model *m, const struct txl_session_params *in,
	       struct txl_session *s)
{
	const struct txl_hparams *hp = &m->hp;
	struct txl_session_params p = in ? *in : txl_session_params_default();

	if (p.mem_len == TXL_FROM_MODEL)
		p.mem_len = hp->mem_len;
	if (p.seg_len == TXL_FROM_MODEL)
		p.seg_len = hp->tgt_len;
	if (p.clamp_len == TXL_FROM_MODEL)
		p.clamp_len = hp->clamp_len;
	if (p.same_length == TXL_FROM_MODEL)
		p.same_length = hp->same_length;
	if (p.mem_len < 0 || p.mem_len > TXL_MEM_LEN_MAX)
		return txl_fail(TXL_ERR_INVALID, "mem_len %d out of range "
				"[0, %d]", p.mem_len, TXL_MEM_LEN_MAX);
	if (p.seg_len < 1 || p.seg_len > TXL_SEG_LEN_MAX)
		return txl_fail(TXL_ERR_INVALID, "seg_len %d out of range "
				"[1, %d]", p.seg_len, TXL_SEG_LEN_MAX);
	if (p.clamp_len < 0)
		return txl_fail(TXL_ERR_INVALID, "clamp_len %d is negative "
				"(0 = no clamping)", p.clamp_len);
	if (p.same_length != 0 && p.same_length != 1)
		return txl_fail(TXL_ERR_INVALID, "same_length must be 0 or 1");
	if (p.same_length && p.mem_len == 0)
		return txl_fail(TXL_ERR_INVALID, "same_length with mem_len 0 "
				"would mask every position");
	if (p.n_threads < 0)
		return txl_fail(TXL_ERR_INVALID, "n_threads %d is negative",
				p.n_threads);
	s->params = p;
	s->mem_len = p.mem_len;
	s->seg_len = p.seg_len;
	s->clamp_len = p.clamp_len;
	s->same_length = p.same_length;
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
	s->n_dist = s->clamp_len > 0 && s->clamp_len + 1 < klen_max
		? s->clamp_len + 1 : klen_max;
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
				      s.n_dist);
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
	s->out_w = m->out_w;
	s->out_b = m->out_b;
	if ((st = resolve_params(m, params, s)) != TXL_OK) {
		free(s);
		return st;
	}
	txl_set_threads(s->params.n_threads);

	S = (size_t)s->seg_len;
	klen_max = session_shape(s);

	/* Refuse what cannot fit rather than be killed while touching it
	 * (a model file's mem_len or tgt_len can ask for terabytes). */
	double need = session_bytes(hp, s->seg_len, s->cap, klen_max,
				    s->n_dist);
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

	s->k = calloc((size_t)hp->n_layer, sizeof *s->k);
	s->v = calloc((size_t)hp->n_layer, sizeof *s->v);
	s->r = calloc((size_t)hp->n_layer, sizeof *s->r);
	if (!s->k || !s->v || !s->r)
		goto nomem;
	for (int l = 0; l < hp->n_layer; l++) {
		s->k[l] = alloc_floats((size_t)s->cap * hd);
		s->v[l] = alloc_floats((size_t)s->cap * hd);
		if (!s->k[l] || !s->v[l])
			goto nomem;
	}
	int dx = hp->d_model > hp->d_embed ? hp->d_model : hp->d_embed;
	s->h = alloc_floats(S * hp->d_model);
	s->xn = alloc_floats(S * dx);
	s->qkv = alloc_floats(S * 3 * hd);
	s->qw = alloc_floats(S * hp->d_head);
	s->qr = alloc_floats(S * hp->d_head);
	s->score = alloc_floats(S * klen_max);
	s->bd = alloc_floats(S * s->n_dist);
	s->attn = alloc_floats(S * hd);
	s->tmp = alloc_floats(S * hp->d_model);
	s->ff = alloc_floats(S * hp->d_inner);
	s->logits = alloc_floats(S * hp->n_token);
	s->last_h = alloc_floats((size_t)hp->d_model);
	if (!s->last_h || !s->h || !s->xn || !s->qkv || !s->qw || !s->qr || !s->score ||
	    !s->bd || !s->attn || !s->tmp || !s->ff || !s->logits)
		goto nomem;
	if ((st = build_r(s)) != TXL_OK) {
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
		if (s->r)
			free(s->r[l]);
	}
	free(s->k);
	free(s->v);
	free(s->r);
	free(s->h);
	free(s->xn);
	free(s->qkv);
	free(s->qw);
	free(s->qr);
	free(s->score);
	free(s->bd);
	free(s->attn);
	free(s->tmp);
	free(s->ff);
	free(s->logits);
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

enum txl_status
txl_session_set_params(struct txl_session *s,
		       const struct txl_session_params *params)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	struct txl_session *t, swap;
	enum txl_status st;
	int keep, from;

	/* build the new buffers first, so that a refusal leaves s as it
	 * was; then move the memory over: its K and V are per-position
	 * values that no setting changes, and a smaller mem_len keeps the
	 * most recent positions, as _update_mems would */
	if ((st = txl_session_new(s->model, params, &t)) != TXL_OK)
		return st;
	keep = s->mlen < t->mem_len ? s->mlen : t->mem_len;
	from = s->kv_start + s->mlen - keep;
	for (int l = 0; l < hp->n_layer; l++) {
		memcpy(t->k[l], s->k[l] + (size_t)from * hd,
		       sizeof(float) * hd * (size_t)keep);
		memcpy(t->v[l], s->v[l] + (size_t)from * hd,
		       sizeof(float) * hd * (size_t)keep);
	}
	t->mlen = keep;
	t->n_past = s->n_past;
	/* the adapted output layer moves too */
	t->own_out_w = s->own_out_w;
	t->own_out_b = s->own_out_b;
	t->out_w = s->out_w;
	t->out_b = s->out_b;
	s->own_out_w = s->own_out_b = NULL;
	t->have_last = s->have_last;
	memcpy(t->last_h, s->last_h, sizeof(float) * hp->d_model);
	if (t->have_last) {
		/* the prediction of the next token, as after a load */
		memcpy(t->h, t->last_h, sizeof(float) * hp->d_model);
		output_logits(t, 0, 1);
		t->n_logits = 1;
	}
	swap = *s;
	*s = *t;
	*t = swap;
	txl_session_free(t);
	return TXL_OK;
}

void
txl_session_reset(struct txl_session *s)
{
	s->kv_start = 0;
	s->mlen = 0;
	s->n_past = 0;
	s->have_last = false;
	s->n_logits = 0;
	s->logits_src = NULL;
	/* back to the model's output layer */
	free(s->own_out_w);
	free(s->own_out_b);
	s->own_out_w = s->own_out_b = NULL;
	s->out_w = s->model->out_w;
	s->out_b = s->model->out_b;
}

const float *
txl_session_logits(const struct txl_session *s)
{
	return s->logits;
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

static bool
aborted(const struct txl_session *s)
{
	return s->params.abort_cb && s->params.abort_cb(s->params.abort_data);
}

/* Embedding of n tokens into s->h: adaptive input with div_val 1, then
 * times sqrt(d_model) (AdaptiveEmbedding.forward). */
static void
embed(struct txl_session *s, const int32_t *tok, int n)
{
	const struct txl_model *m = s->model;
	const int d = m->hp.d_model, e = m->hp.d_embed;
	const float scale = sqrtf((float)d);

	if (m->emb_proj) {
		for (int i = 0; i < n; i++)
			memcpy(s->xn + (size_t)i * e,
			       m->word_emb + (size_t)tok[i] * e, sizeof(float) * e);
		txl_matmul(s->h, s->xn, m->emb_proj, n, e, d, false);
	} else {
		for (int i = 0; i < n; i++)
			memcpy(s->h + (size_t)i * d,
			       m->word_emb + (size_t)tok[i] * d, sizeof(float) * d);
	}
	for (size_t i = 0; i < (size_t)n * d; i++)
		s->h[i] *= scale;
}

/* Multi-head attention of the n rows of s->qkv (queries) over the window
 * rows [base, base + mlen + n) of layer l's K and V, into s->attn. */
static void
attention(struct txl_session *s, int l, int n, int base)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int H = hp->n_head, D = hp->d_head, hd = H * D;
	const int mlen = s->mlen, klen = mlen + n;
	const int n_bd = klen < s->n_dist ? klen : s->n_dist;
	const float scale = 1.0f / sqrtf((float)D);
	const float *K = s->k[l] + (size_t)base * hd;
	const float *V = s->v[l] + (size_t)base * hd;

	for (int h = 0; h < H; h++) {
		/* rw_head_q = q + r_w_bias ; rr_head_q = q + r_r_bias */
		for (int i = 0; i < n; i++) {
			const float *q = s->qkv + (size_t)i * 3 * hd + h * D;
			/* in size_t: seg_len * d_head may pass INT_MAX (65536 * 65536) */
			float *qw = s->qw + (size_t)i * D;
			float *qr = s->qr + (size_t)i * D;
			for (int c = 0; c < D; c++) {
				qw[c] = q[c] + ly->r_w_bias[h * D + c];
				qr[c] = q[c] + ly->r_r_bias[h * D + c];
			}
		}
		/* AC[i, j] = rw_head_q_i . k_j */
		txl_gemm_nt(s->score, klen, s->qw, D, K + h * D, hd, n, D, klen);
		/* BD[i, t] = rr_head_q_i . R[t], t = clamped distance */
		txl_gemm_nt(s->bd, n_bd, s->qr, D, s->r[l] + h * D, hd, n, D,
			    n_bd);

		for (int i = 0; i < n; i++) {
			float *sc = s->score + (size_t)i * klen;
			const float *bd = s->bd + (size_t)i * n_bd;
			const int qpos = mlen + i;
			/* causal; with same_length exactly the last mem_len
			 * positions, the query's own included */
			int lo = s->same_length ? qpos - s->mem_len + 1 : 0;
			float max = -INFINITY;
			double sum = 0;

			if (lo < 0)
				lo = 0;
			for (int j = lo; j <= qpos; j++) {
				int t = qpos - j;	/* _rel_shift */
				if (t >= s->n_dist)
					t = s->n_dist - 1;	/* clamp_len */
				sc[j] = (sc[j] + bd[t]) * scale;
				max = sc[j] > max ? sc[j] : max;
			}
			for (int j = lo; j <= qpos; j++) {
				sc[j] = expf(sc[j] - max);
				sum += sc[j];
			}
			const float inv = (float)(1.0 / sum);
			for (int j = 0; j < lo; j++)
				sc[j] = 0.0f;
			for (int j = lo; j <= qpos; j++)
				sc[j] *= inv;
			for (int j = qpos + 1; j < klen; j++)
				sc[j] = 0.0f;
		}
		/* attn_vec[:, h] = prob . v */
		txl_gemm_nn(s->attn + h * D, hd, s->score, klen, V + h * D, hd,
			    n, klen, D);
	}
}

/* One decoder layer on the n rows of s->h (RelPartialLearnableDecoderLayer:
 * attention, then the position-wise feed-forward). */
static void
layer_forward(struct txl_session *s, int l, int n, int base)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	const int I = hp->d_inner;
	const size_t nd = (size_t)n * d;
	const float *src = s->h;

	/* w_heads = qkv_net(layer_norm(cat) if pre_lnorm else cat); only the
	 * new rows are computed, memory rows are cached */
	if (hp->pre_lnorm) {
		txl_layer_norm(s->xn, s->h, ly->ln_attn_g, ly->ln_attn_b, n, d);
		src = s->xn;
	}
	txl_matmul(s->qkv, src, ly->qkv_w, n, d, 3 * hd, false);
	for (int i = 0; i < n; i++) {
		size_t row = (size_t)(base + s->mlen + i) * hd;
		const float *kv = s->qkv + (size_t)i * 3 * hd + hd;
		memcpy(s->k[l] + row, kv, sizeof(float) * hd);
		memcpy(s->v[l] + row, kv + hd, sizeof(float) * hd);
	}
	attention(s, l, n, base);

	/* attn_out = o_net(attn_vec); residual, post- or pre-LayerNorm */
	txl_matmul(s->tmp, s->attn, ly->o_w, n, hd, d, false);
	for (size_t i = 0; i < nd; i++)
		s->h[i] += s->tmp[i];
	if (!hp->pre_lnorm)
		txl_layer_norm(s->h, s->h, ly->ln_attn_g, ly->ln_attn_b, n, d);

	/* PositionwiseFF: Linear, ReLU, Linear; residual and LayerNorm */
	src = s->h;
	if (hp->pre_lnorm) {
		txl_layer_norm(s->xn, s->h, ly->ln_ff_g, ly->ln_ff_b, n, d);
		src = s->xn;
	}
	txl_matmul(s->ff, src, ly->ff1_w, n, d, I, false);
	txl_add_bias_relu(s->ff, ly->ff1_b, n, I);
	txl_matmul(s->tmp, s->ff, ly->ff2_w, n, I, d, false);
	txl_add_bias(s->tmp, ly->ff2_b, n, d);
	for (size_t i = 0; i < nd; i++)
		s->h[i] += s->tmp[i];
	if (!hp->pre_lnorm)
		txl_layer_norm(s->h, s->h, ly->ln_ff_g, ly->ln_ff_b, n, d);
}

/* Logits of `rows` rows of s->h starting at row `first`:
 * out_layer(h . P) (ProjectedAdaptiveLogSoftmax._compute_logit). */
static void
output_logits(struct txl_session *s, int first, int rows)
{
	const struct txl_model *m = s->model;
	const int d = m->hp.d_model, e = m->hp.d_embed, V = m->hp.n_token;
	const float *src = s->h + (size_t)first * d;

	if (m->out_proj) {
		/* proj_hid[e] = h[d] . P[d, e] */
		txl_gemm_nn(s->xn, e, src, d, m->out_proj, e, rows, d, e);
		src = s->xn;
	}
	txl_matmul(s->logits, src, s->out_w, rows, e, V, false);
	txl_add_bias(s->logits, s->out_b, rows, V);
	s->logits_src = src;
}

/* One segment of n <= seg_len tokens. */
static enum txl_status
eval_segment(struct txl_session *s, const int32_t *tok, int n,
	     enum txl_logits want)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int hd = hp->n_head * hp->d_head;

	if (s->kv_start + s->mlen + n > s->cap) {
		/* move the memory to the front of every buffer */
		for (int l = 0; l < hp->n_layer; l++) {
			memmove(s->k[l], s->k[l] + (size_t)s->kv_start * hd,
				sizeof(float) * (size_t)s->mlen * hd);
			memmove(s->v[l], s->v[l] + (size_t)s->kv_start * hd,
				sizeof(float) * (size_t)s->mlen * hd);
		}
		s->kv_start = 0;
	}
	TXL_ASSERT(s->kv_start + s->mlen + n <= s->cap);

	embed(s, tok, n);
	for (int l = 0; l < hp->n_layer; l++) {
		/* the memory stays as it was until the segment completes */
		if (aborted(s))
			return TXL_ABORTED;
		layer_forward(s, l, n, s->kv_start);
	}
	if (want == TXL_LOGITS_ALL)
		output_logits(s, 0, n);
	else if (want == TXL_LOGITS_LAST)
		output_logits(s, n - 1, 1);
	s->n_logits = want == TXL_LOGITS_ALL ? n : want == TXL_LOGITS_LAST;
	memcpy(s->last_h, s->h + (size_t)(n - 1) * hp->d_model,
	       sizeof(float) * hp->d_model);
	s->have_last = true;

	/* _update_mems: keep the last mem_len positions */
	int total = s->mlen + n;
	int keep = total < s->mem_len ? total : s->mem_len;
	s->kv_start += total - keep;
	s->mlen = keep;
	s->n_past += n;
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
	for (int off = 0; off < n; off += s->seg_len) {
		int len = n - off < s->seg_len ? n - off : s->seg_len;
		bool last = off + len == n;
		enum txl_status st;

		if (off > 0 && aborted(s))
			return TXL_ABORTED;
		st = eval_segment(s, tokens + off, len,
				  last ? want : TXL_LOGITS_NONE);
		if (st != TXL_OK)
			return st;
	}
	return TXL_OK;
}

enum txl_status
txl_session_adapt(struct txl_session *s, const int32_t *targets, int n,
		  float lr)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int V = hp->n_token, E = hp->d_embed;

	if (!(lr >= 0.0f && lr <= (float)TXL_ADAPT_LR_MAX))
		return txl_fail(TXL_ERR_INVALID, "adapt: learning rate %g is "
				"not a number in [0, %g]", (double)lr,
				TXL_ADAPT_LR_MAX);
	if (n < 1 || !targets || n != s->n_logits)
		return txl_fail(TXL_ERR_INVALID, "adapt: %d targets for %d "
				"rows of logits", n, s->n_logits);
	for (int i = 0; i < n; i++)
		if (targets[i] < 0 || targets[i] >= V)
			return txl_fail(TXL_ERR_INVALID, "adapt: token id %d "
					"out of range [0, %d)", targets[i], V);
	if (!s->own_out_w) {
		/* the session's own copy, never the model's (shared) one;
		 * with tied weights the input embedding stays as it is */
		s->own_out_w = alloc_floats((size_t)V * E);
		s->own_out_b = alloc_floats((size_t)V);
		if (!s->own_out_w || !s->own_out_b) {
			free(s->own_out_w);
			free(s->own_out_b);
			s->own_out_w = s->own_out_b = NULL;
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		memcpy(s->own_out_w, s->out_w, sizeof(float) * (size_t)V * E);
		memcpy(s->own_out_b, s->out_b, sizeof(float) * (size_t)V);
		s->out_w = s->own_out_w;
		s->out_b = s->own_out_b;
	}
	/* d(mean NLL)/d logits = softmax - onehot, in place of the logits */
	for (int i = 0; i < n; i++) {
		float *g = s->logits + (size_t)i * V;

		txl_softmax_inplace(g, V);
		g[targets[i]] -= 1.0f;
	}
	/* W -= lr/n G^T X,  b -= lr/n sum_i G_i */
	const float alpha = -lr / (float)n;
	txl_gemm_tn_acc(s->own_out_w, E, s->logits, V, s->logits_src, E, V, n,
			E, alpha);
	for (int i = 0; i < n; i++) {
		const float *g = s->logits + (size_t)i * V;
		for (int j = 0; j < V; j++)
			s->own_out_b[j] += alpha * g[j];
	}
	s->n_logits = 0;
	return TXL_OK;
}

/* ---- memory state files ---- */

struct state_header {
	char magic[8];
	uint32_t version;
	uint32_t n_layer;
	uint64_t fingerprint;	/* of the model file */
	uint32_t d_model, n_head, d_head;
	uint32_t mem_len;	/* rows stored per layer, fill or not */
	uint32_t fill;		/* rows that hold memory */
	uint32_t have_last;	/* 1 if last_h below is the output of the
				   last position fed */
	int64_t n_past;
	/* then per layer mem_len rows of K, then of V; d_model floats of
	 * last_h; a 64-bit FNV-1a of everything before it */
};

static uint64_t
fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static bool
write_all(int fd, const void *p, size_t n, uint64_t *sum)
{
	const char *c = p;

	*sum = fnv1a(*sum, p, n);
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

enum txl_status
txl_session_save(struct txl_session *s, const char *path)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	struct state_header hdr = { .version = STATE_VERSION };
	uint64_t sum = 0xcbf29ce484222325ull;
	size_t len = strlen(path);
	char *tmp = malloc(len + 16);
	float *zeros = NULL;
	bool ok = true;
	int fd;

	if (!tmp)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	memcpy(hdr.magic, STATE_MAGIC, 8);
	hdr.n_layer = (uint32_t)hp->n_layer;
	hdr.fingerprint = txl_model_fingerprint((struct txl_model *)s->model);
	hdr.d_model = (uint32_t)hp->d_model;
	hdr.n_head = (uint32_t)hp->n_head;
	hdr.d_head = (uint32_t)hp->d_head;
	hdr.mem_len = (uint32_t)s->mem_len;
	hdr.fill = (uint32_t)s->mlen;
	hdr.have_last = s->have_last;
	hdr.n_past = s->n_past;

	snprintf(tmp, len + 16, "%s.tmpXXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		enum txl_status st = txl_fail(TXL_ERR_IO, "%s: %s", path,
					      strerror(errno));
		free(tmp);
		return st;
	}
	/* fixed size: per layer mem_len rows of K, then of V, zeros past
	 * the fill */
	zeros = alloc_floats(hd);
	ok = zeros && write_all(fd, &hdr, sizeof hdr, &sum);
	for (int l = 0; ok && l < hp->n_layer; l++) {
		for (int which = 0; ok && which < 2; which++) {
			const float *buf = which ? s->v[l] : s->k[l];
			ok = write_all(fd, buf + (size_t)s->kv_start * hd,
				       sizeof(float) * hd * (size_t)s->mlen, &sum);
			for (int r = s->mlen; ok && r < s->mem_len; r++)
				ok = write_all(fd, zeros, sizeof(float) * hd,
					       &sum);
		}
	}
	ok = ok && write_all(fd, s->last_h, sizeof(float) * hp->d_model, &sum);
	if (ok) {
		uint64_t final = sum;
		ok = write_all(fd, &final, sizeof final, &sum);
	}
	ok = ok && fsync(fd) == 0;
	int saved_errno = errno;
	ok = close(fd) == 0 && ok;
	free(zeros);
	if (ok && rename(tmp, path) == 0) {
		free(tmp);
		return TXL_OK;
	}
	if (!saved_errno)
		saved_errno = errno;
	unlink(tmp);
	free(tmp);
	return txl_fail(TXL_ERR_IO, "%s: cannot write state: %s", path,
			strerror(saved_errno ? saved_errno : EIO));
}

enum txl_status
txl_session_load(struct txl_session *s, const char *path)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	struct state_header hdr;
	uint64_t sum = 0xcbf29ce484222325ull, stored;
	enum txl_status st = TXL_OK;
	float **k = NULL, **v = NULL, *last = NULL;
	size_t rows_bytes, want;
	FILE *f;
	long size;

	f = fopen(path, "rb");
	if (!f)
		return txl_fail(TXL_ERR_IO, "%s: %s", path, strerror(errno));
	if (fread(&hdr, sizeof hdr, 1, f) != 1 ||
	    memcmp(hdr.magic, STATE_MAGIC, 8) != 0) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: not a txlgen state file",
			      path);
		goto out;
	}
	if (hdr.version != STATE_VERSION) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: state format version %u, "
			      "expected %u", path, hdr.version, STATE_VERSION);
		goto out;
	}
	if (hdr.fingerprint !=
	    txl_model_fingerprint((struct txl_model *)s->model) ||
	    hdr.n_layer != (uint32_t)hp->n_layer ||
	    hdr.d_model != (uint32_t)hp->d_model ||
	    hdr.n_head != (uint32_t)hp->n_head ||
	    hdr.d_head != (uint32_t)hp->d_head) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state was saved with "
			      "another model", path);
		goto out;
	}
	if (hdr.fill > hdr.mem_len || hdr.mem_len > (1u << 20) ||
	    hdr.have_last > 1 || hdr.n_past < (int64_t)hdr.fill ||
	    (hdr.have_last && hdr.n_past == 0)) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: damaged state (fill %u, "
			      "mem_len %u, %lld positions fed)", path, hdr.fill,
			      hdr.mem_len, (long long)hdr.n_past);
		goto out;
	}
	if (hdr.fill > (uint32_t)s->mem_len) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state holds %u positions, "
			      "more than this session's mem_len %d (saved with "
			      "mem_len %u)", path, hdr.fill, s->mem_len,
			      hdr.mem_len);
		goto out;
	}
	rows_bytes = sizeof(float) * hd * hdr.mem_len;
	want = sizeof hdr + 2 * rows_bytes * hp->n_layer +
		sizeof(float) * hp->d_model + sizeof stored;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    (size_t)size != want || fseek(f, (long)sizeof hdr, SEEK_SET) != 0) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: state file has the wrong "
			      "size (truncated?)", path);
		goto out;
	}
	/* read into new buffers, so that a bad file leaves s unchanged */
	k = calloc((size_t)hp->n_layer, sizeof *k);
	v = calloc((size_t)hp->n_layer, sizeof *v);
	if (!k || !v) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	sum = fnv1a(sum, &hdr, sizeof hdr);
	for (int l = 0; l < hp->n_layer && st == TXL_OK; l++) {
		k[l] = alloc_floats((size_t)s->cap * hd);
		v[l] = alloc_floats((size_t)s->cap * hd);
		if (!k[l] || !v[l]) {
			st = txl_fail(TXL_ERR_NOMEM, "out of memory");
			break;
		}
		for (int which = 0; which < 2; which++) {
			float *buf = which ? v[l] : k[l];
			float *scratch = malloc(rows_bytes ? rows_bytes : 1);
			if (!scratch || fread(scratch, 1, rows_bytes, f) !=
			    rows_bytes) {
				free(scratch);
				st = txl_fail(TXL_ERR_FORMAT, "%s: cannot read "
					      "state", path);
				break;
			}
			sum = fnv1a(sum, scratch, rows_bytes);
			memcpy(buf, scratch, sizeof(float) * hd * hdr.fill);
			free(scratch);
		}
	}
	last = alloc_floats((size_t)hp->d_model);
	if (st == TXL_OK && (!last || fread(last, sizeof(float),
					   (size_t)hp->d_model, f) !=
			     (size_t)hp->d_model))
		st = txl_fail(TXL_ERR_FORMAT, "%s: cannot read state", path);
	if (st == TXL_OK)
		sum = fnv1a(sum, last, sizeof(float) * hp->d_model);
	if (st == TXL_OK && (fread(&stored, sizeof stored, 1, f) != 1 ||
			     stored != sum))
		st = txl_fail(TXL_ERR_FORMAT, "%s: state checksum mismatch "
			      "(damaged file)", path);
	if (st == TXL_OK) {
		for (int l = 0; l < hp->n_layer; l++) {
			float *t = s->k[l];
			s->k[l] = k[l];
			k[l] = t;
			t = s->v[l];
			s->v[l] = v[l];
			v[l] = t;
		}
		s->kv_start = 0;
		s->mlen = (int)hdr.fill;
		s->n_past = hdr.n_past;
		s->have_last = hdr.have_last;
		memcpy(s->last_h, last, sizeof(float) * hp->d_model);
		s->n_logits = 0;
		if (s->have_last) {
			/* the prediction that follows the saved text */
			memcpy(s->h, last, sizeof(float) * hp->d_model);
			output_logits(s, 0, 1);
			s->n_logits = 1;
		}
	}
out:
	for (int l = 0; l < hp->n_layer; l++) {
		if (k)
			free(k[l]);
		if (v)
			free(v[l]);
	}
	free(k);
	free(v);
	free(last);
	fclose(f);
	return st;
}
