/* SPDX-License-Identifier: MIT */
/*
 * txl-attn.c - the attentions of mem_transformer.py, one per attn_type:
 *
 *   0  RelPartialLearnableMultiHeadAttn, Transformer-XL's own: scores of
 *      content (q + r_w_bias).k and position (q + r_r_bias).R[distance],
 *      R = r_net(sinusoid(distance));
 *   1  RelLearnableMultiHeadAttn (Shaw et al.): content (q + r_w_bias).k,
 *      position q.r_emb[distance] + r_bias[distance], learned tables;
 *   2  MultiHeadAttn of the vanilla Transformer, absolute sinusoids added
 *      to the input of the first layer;
 *   3  MultiHeadAttn, learned absolute positions (r_emb) added to the
 *      input of every layer.
 *
 * Then causal masking (with same_length, exactly the last mem_len
 * positions), softmax and the weighted sum of values.  Keys and values go
 * to the session's cache, so that the memory's are computed once.  The
 * cache and the position tables R are held in the session's kv_dt (F32,
 * or F16 / BF16 with --kv-type: half the bytes a token with a long memory
 * reads; Q8_0: a bit more than a quarter, each head's row of d_head
 * values in blocks of 32; Q4_0: the same in 4 bits, a seventh) and read
 * as stored by the kernels of txl_gemm_nt_dt() and txl_gemm_nn_dt(); the
 * queries and scores stay in float.  A segment of a few queries
 * (generation: one) takes a path of its own, one pass over K, R and V for
 * every head at once (attend_few()).
 * Adding an attention means adding its case here (and its tensors to
 * bind_attention() in txl-model.c).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "txl-attn.h"
#include "txl-alloc.h"
#include "txl-kernels.h"
#include "txl-log.h"
#include "txl-ops.h"
#include "txl-pool.h"
#include "txl-products.h"
#include "txl-types.h"

static bool
relative(const struct txl_hparams *hp)
{
	return hp->attn_type <= 1;
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

/* The n_head * d_head floats of one position (src) into row pos of every
 * head of the head-major buffer buf (rows positions a head), rounded to
 * the session's kv_dt. */
static void
store_heads(struct txl_session *s, uint8_t *buf, int rows, int pos,
	    const float *src)
{
	const int D = s->model->hp.d_head;

	for (int h = 0; h < s->model->hp.n_head; h++)
		txl_narrow(txl_kv_row(s, buf, rows, h, pos), src + h * D,
			   s->kv_dt, (size_t)D);
}

bool
txl_attn_has_memory(const struct txl_hparams *hp)
{
	/* the original runs the vanilla attentions with mem_len 0 only */
	return relative(hp);
}

int
txl_attn_n_dist(const struct txl_hparams *hp, int clamp_len, int klen_max)
{
	int rows;

	switch (hp->attn_type) {
	case 0:
		/* distances 0 .. clamp_len: pos_seq.clamp_(max=clamp_len) */
		rows = clamp_len > 0 ? clamp_len + 1 : klen_max;
		break;
	case 1:
		/* the table cut to its last clamp_len rows (r_emb[-clamp_len:]);
		 * distances past its end use its first row */
		rows = clamp_len > 0 && clamp_len < hp->max_klen ? clamp_len
			: hp->max_klen;
		break;
	default:
		return 0;
	}
	return rows < klen_max ? rows : klen_max;
}

/* attn_type 0: R[l] = r_net_l(sinusoid(distance)), distances 0 ..
 * n_dist-1: the relative-position term depends on the distance only, so
 * it is computed once per session. */
static enum txl_status
init_sinusoid_r(struct txl_session *s)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	float *pe = txl_alloc_floats((size_t)s->n_dist * (size_t)d);

	if (!pe)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int t = 0; t < s->n_dist; t++)
		sinusoid(pe + (size_t)t * d, (float)t, d);
	float *rf = txl_alloc_floats((size_t)s->n_dist * (size_t)hd);

	if (!rf) {
		free(pe);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	for (int l = 0; l < hp->n_layer; l++) {
		s->r[l] = txl_alloc_kv(s, (size_t)s->n_dist);
		if (!s->r[l]) {
			free(pe);
			free(rf);
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		/* in floats, then head-major in kv_dt */
		txl_mat_mul(rf, pe, s->n_dist, &s->model->layers[l].r_net,
			    false);
		for (int t = 0; t < s->n_dist; t++)
			store_heads(s, s->r[l], s->n_dist, t,
				    rf + (size_t)t * hd);
	}
	free(pe);
	free(rf);
	return TXL_OK;
}

/* attn_type 1: the rows of r_emb and r_bias by distance.  After the cut
 * to the last clamp_len rows and the padding with the first row
 * (RelLearnableMultiHeadAttn.forward), distance t is row max_klen-1-t of
 * the model's table, and every distance from n_dist-1 on is row
 * max_klen - n_dist when the cut table is shorter than the window. */
static enum txl_status
init_learned_r(struct txl_session *s)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int H = hp->n_head, hd = H * hp->d_head, K = hp->max_klen;

	s->r_bias = calloc((size_t)hp->n_layer, sizeof *s->r_bias);
	if (!s->r_bias)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int l = 0; l < hp->n_layer; l++) {
		const struct txl_layer *ly = &s->model->layers[l];

		s->r[l] = txl_alloc_kv(s, (size_t)s->n_dist);
		s->r_bias[l] = txl_alloc_floats((size_t)s->n_dist * (size_t)H);
		if (!s->r[l] || !s->r_bias[l])
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		for (int t = 0; t < s->n_dist; t++) {
			size_t row = (size_t)(K - 1 - t);
			store_heads(s, s->r[l], s->n_dist, t,
				    ly->r_emb + row * hd);
			memcpy(s->r_bias[l] + (size_t)t * H,
			       ly->r_bias + row * H, sizeof(float) * H);
		}
	}
	return TXL_OK;
}

/* attn_type 2: sinusoids of positions 0 .. n_pos-1 (clamped to clamp_len
 * like pos_seq), added to the input. */
static enum txl_status
init_absolute(struct txl_session *s)
{
	const int d = s->model->hp.d_model;

	s->n_pos = s->clamp_len > 0 && s->clamp_len < s->seg_len
		? s->clamp_len + 1 : s->seg_len;
	s->pos = txl_alloc_floats((size_t)s->n_pos * (size_t)d);
	if (!s->pos)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int p = 0; p < s->n_pos; p++)
		sinusoid(s->pos + (size_t)p * d, (float)p, d);
	return TXL_OK;
}

/* Segments of up to FEW_MAX queries take attend_few(): each query
 * passes over a stretch of keys while it is in the cache; longer segments
 * are sgemm's, which reuses every key across the rows of a tile. */
#define FEW_MAX 8
/* attend_few() cuts a head's keys into blocks (units of work, handed
 * out as they finish) of whole BLOCK_UNITs, at most BLOCKS_PER_THREAD
 * per thread, and a block into passes of STEP keys (the stretch each
 * query takes at a time: 256 KB of 16-bit K, in L2). */
#define BLOCKS_PER_THREAD 2
#define BLOCK_UNIT 256
#define STEP 2048

static int
few_queries(int seg_len)
{
	return seg_len < FEW_MAX ? seg_len : FEW_MAX;
}

/* The most blocks a head's klen keys are cut into. */
static size_t
max_blocks(int klen)
{
	return (size_t)(klen + BLOCK_UNIT - 1) / BLOCK_UNIT;
}

/* A segment's units (attend_segment()) take up to SEG_ROWS queries with
 * an F32 memory; a compact one is widened by each unit, so there a unit
 * takes up to SEG_ROWS_WIDE, to widen it less often. */
#define SEG_ROWS 32
#define SEG_ROWS_WIDE 128

static int
seg_rows(int seg_len, enum txl_dtype kv_dt)
{
	const int rows = kv_dt == TXL_F32 ? SEG_ROWS : SEG_ROWS_WIDE;

	return seg_len < rows ? seg_len : rows;
}

/* Floats of a thread's slot: its queries' scores, position scores and
 * biased queries (two). */
static size_t
seg_slot_floats(const struct txl_hparams *hp, int rows, int klen_max,
		int n_dist)
{
	return (size_t)rows * ((size_t)klen_max + (size_t)n_dist +
			       2 * (size_t)hp->d_head);
}

/* The same for a session: its rows and floats */
static int
slot_rows(const struct txl_session *s)
{
	return seg_rows(s->seg_len, s->kv_dt);
}

static size_t
slot_floats(const struct txl_session *s)
{
	return seg_slot_floats(&s->model->hp, slot_rows(s), s->klen_max,
			       s->n_dist);
}

double
txl_attn_bytes(const struct txl_hparams *hp, int seg_len, int klen_max,
	       int n_dist, enum txl_dtype kv_dt, int threads)
{
	const double hd = (double)hp->n_head * hp->d_head;

	/* fq, 2 hd floats a query (and again in int16 with its scales for a
	 * Q8_0 memory: 1 + 2 / 32 floats more; in int8 with scales and
	 * offsets for a Q4_0 one: 0.5 + 4 / 32), the scores, the parts; the
	 * slots of the segments' units */
	const double fq_floats = kv_dt == TXL_Q8_0 ? 3.0 + 2.0 / TXL_QK
		: kv_dt == TXL_Q4_0 ? 2.5 + 4.0 / TXL_QK : 2.0;

	return 4.0 * few_queries(seg_len) * (fq_floats * hd +
		(double)hp->n_head *
		(klen_max + max_blocks(klen_max) * (hp->d_head + 2.0))) +
		4.0 * threads * (double)seg_slot_floats(hp,
			seg_rows(seg_len, kv_dt), klen_max, n_dist);
}

/* Slots for n threads (n > s->seg_slots); false if out of memory (the
 * slots stay as they were). */
static bool
seg_grow(struct txl_session *s, int n)
{
	float *p = txl_alloc_floats(slot_floats(s) * (size_t)n);

	if (!p)
		return false;
	free(s->seg);
	s->seg = p;
	s->seg_slots = n;
	return true;
}

enum txl_status
txl_attn_init(struct txl_session *s, int klen_max)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t nq = (size_t)few_queries(s->seg_len);
	const size_t hd = (size_t)hp->n_head * hp->d_head;

	s->klen_max = klen_max;
	s->fq = txl_alloc_floats(nq * 2 * hd);
	s->fsc = txl_alloc_floats(nq * (size_t)hp->n_head * (size_t)klen_max);
	s->part = txl_alloc_floats(nq * (size_t)hp->n_head *
				   max_blocks(klen_max) *
				   (size_t)(hp->d_head + 2));
	if (s->kv_dt == TXL_Q8_0) {
		s->fq16 = malloc(nq * 2 * hd * sizeof *s->fq16);
		s->fq16d = txl_alloc_floats(nq * 2 * hd / TXL_QK);
		if (!s->fq16 || !s->fq16d)
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	if (s->kv_dt == TXL_Q4_0) {
		s->fq8 = malloc(nq * 2 * hd);
		s->fq8d = txl_alloc_floats(nq * 2 * hd / TXL_QK);
		s->fq8off = malloc(nq * 2 * hd / TXL_QK * sizeof *s->fq8off);
		if (!s->fq8 || !s->fq8d || !s->fq8off)
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	if (!s->fq || !s->fsc || !s->part || !seg_grow(s, txl_pool_threads()))
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	if (relative(hp)) {
		s->r = calloc((size_t)hp->n_layer, sizeof *s->r);
		if (!s->r)
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	switch (hp->attn_type) {
	case 0:
		return init_sinusoid_r(s);
	case 1:
		return init_learned_r(s);
	case 2:
		return init_absolute(s);
	default:
		return TXL_OK;
	}
}

void
txl_attn_free(struct txl_session *s)
{
	for (int l = 0; l < s->model->hp.n_layer; l++) {
		if (s->r)
			free(s->r[l]);
		if (s->r_bias)
			free(s->r_bias[l]);
	}
	free(s->r);
	free(s->r_bias);
	free(s->pos);
	free(s->fq);
	free(s->fq16);
	free(s->fq16d);
	free(s->fq8);
	free(s->fq8d);
	free(s->fq8off);
	s->fq16 = NULL;
	s->fq16d = NULL;
	s->fq8 = NULL;
	s->fq8d = NULL;
	s->fq8off = NULL;
	free(s->fsc);
	free(s->part);
	free(s->seg);
	s->fq = s->fsc = s->part = s->seg = NULL;
	s->seg_slots = 0;
	s->r = NULL;
	s->r_bias = NULL;
	s->pos = NULL;
}

void
txl_attn_positions(struct txl_session *s, int l, int n)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int d = hp->d_model;

	if (hp->attn_type == 2 && l == 0) {
		/* word_emb + pos_emb[-qlen:]: the last token is position 0 */
		for (int i = 0; i < n; i++) {
			int p = n - 1 - i < s->n_pos ? n - 1 - i : s->n_pos - 1;
			const float *pe = s->pos + (size_t)p * d;
			float *h = s->h + (size_t)i * d;
			for (int c = 0; c < d; c++)
				h[c] += pe[c];
		}
	} else if (hp->attn_type == 3) {
		/* core_out += r_emb[l][-qlen:] (n <= max_klen: the session
		 * refuses longer segments, as the original fails on them) */
		const float *pe = s->model->layers[l].r_emb +
			(size_t)(hp->max_klen - n) * d;
		for (size_t i = 0; i < (size_t)n * d; i++)
			s->h[i] += pe[i];
	}
}

/* The queries of the n new rows into s->qkv (row stride returned) and
 * their keys and values into rows [base + mlen, base + mlen + n) of the
 * cache.  Relative attentions: qkv_net of the layer input, layer-normed
 * with pre_lnorm.  MultiHeadAttn: q_net of the input as it is (even with
 * pre_lnorm, as the original does), kv_net of the normed input. */
static int
project(struct txl_session *s, int l, int n, int base)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	const float *src = s->h;
	const float *kv;
	int q_stride, kv_stride;

	if (hp->pre_lnorm) {
		txl_layer_norm(s->xn, s->h, ly->ln_attn_g, ly->ln_attn_b, n, d);
		src = s->xn;
	}
	if (relative(hp)) {
		/* w_heads = qkv_net(cat): q, k, v side by side */
		txl_mat_mul(s->qkv, src, n, &ly->qkv, false);
		q_stride = kv_stride = 3 * hd;
		kv = s->qkv + hd;
	} else {
		float *kvbuf = s->qkv + (size_t)n * hd;
		txl_mat_mul(s->qkv, s->h, n, &ly->q_net, false);
		txl_mat_mul(kvbuf, src, n, &ly->kv_net, false);
		q_stride = hd;
		kv_stride = 2 * hd;
		kv = kvbuf;
	}
	for (int i = 0; i < n; i++) {
		const float *k = kv + (size_t)i * kv_stride;
		store_heads(s, s->k[l], s->cap, base + s->mlen + i, k);
		store_heads(s, s->v[l], s->cap, base + s->mlen + i, k + hd);
	}
	return q_stride;
}

/* The position scores of head h for the n queries q (row stride qs):
 * bd[i, t] for distances t < n_bd, into bd (rows n_bd apart), qr a
 * buffer of n * d_head floats. */
static void
position_scores(struct txl_session *s, int l, int h, int n, int n_bd,
		const float *q, int qs, float *qr, float *bd)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int H = hp->n_head, D = hp->d_head;
	/* head h's rows of R */
	const uint8_t *R = txl_kv_row(s, s->r[l], s->n_dist, h, 0);

	if (hp->attn_type == 0) {
		/* BD[i, t] = (q_i + r_r_bias) . R[t] */
		for (int i = 0; i < n; i++) {
			const float *qi = q + (size_t)i * qs;
			for (int c = 0; c < D; c++)
				qr[(size_t)i * D + c] = qi[c] +
					ly->r_r_bias[h * D + c];
		}
		txl_gemm_nt_dt(bd, n_bd, qr, D, R, s->kv_dt, D, n, D, n_bd);
		return;
	}
	/* attn_type 1: B_ + D_ = q_i . r_emb[t] + r_bias[t] */
	txl_gemm_nt_dt(bd, n_bd, q, qs, R, s->kv_dt, D, n, D, n_bd);
	for (int i = 0; i < n; i++) {
		float *row = bd + (size_t)i * n_bd;
		for (int t = 0; t < n_bd; t++)
			row[t] += s->r_bias[l][(size_t)t * H + h];
	}
}

/* Row i of the scores (query at window index mlen + i): add the position
 * term (bd, NULL for absolute attentions), scale, mask, softmax. */
static void
softmax_row(struct txl_session *s, float *sc, const float *bd, int qpos,
	    int klen, float scale)
{
	/* causal; with same_length exactly the last mem_len positions, the
	 * query's own included */
	const struct txl_kernels *k = txl_kernels();
	int lo = s->same_length ? qpos - s->mem_len + 1 : 0;
	float max;
	double sum;

	if (lo < 0)
		lo = 0;
	if (bd) {
		/* _rel_shift: key j is at distance qpos - j; the distances
		 * from n_dist - 1 on share its row (clamp_len) */
		int far = qpos - s->n_dist + 1;
		for (int j = lo; j < far; j++)
			sc[j] = (sc[j] + bd[s->n_dist - 1]) * scale;
		for (int j = far > lo ? far : lo; j <= qpos; j++)
			sc[j] = (sc[j] + bd[qpos - j]) * scale;
	} else {
		for (int j = lo; j <= qpos; j++)
			sc[j] *= scale;
	}
	/* the vector kernels: a long memory has thousands of keys a row */
	max = k->max(sc + lo, qpos + 1 - lo);
	sum = k->exp_sum(sc + lo, sc + lo, qpos + 1 - lo, max);
	const float inv = (float)(1.0 / sum);
	for (int j = 0; j < lo; j++)
		sc[j] = 0.0f;
	for (int j = lo; j <= qpos; j++)
		sc[j] *= inv;
	for (int j = qpos + 1; j < klen; j++)
		sc[j] = 0.0f;
}

/* ---- a few queries: every head in one pass over the keys ----
 *
 * One pool task per layer does every head: a head's keys are cut into
 * blocks, as few as keep the threads busy to the end (one per head when
 * the heads are enough), and a unit, one block of one head, computes for
 * each query the scores of its keys (content and position term,
 * scaled), their max m, and with e_j = exp(score_j - m) the sum of the
 * e_j and the sum of the e_j v_j: the softmax of the block without its
 * normalisation, which needs nothing of the other blocks.  It reads K,
 * then R, then V, each as one forward stream, a STEP of keys at a time
 * for all the queries (without the software prefetch below, blocks of
 * 256 keys with the three streams interleaved cost a third more on one
 * core than this).  Then the caller merges the blocks of each query and
 * head, rescaling each by exp(m - the overall max) and dividing by the
 * sum of all the exps: the weights softmax_row() gives, to rounding. */

struct few {
	struct txl_session *s;
	int l, n, base, klen, qs, n_blocks, block;
	const float *q;		/* the queries, rows qs floats apart */
	float scale;
	atomic_int next;	/* the next unit: head * n_blocks + block */
};

/* The keys [*lo, *hi) of query i among [j0, j1): causal, and with
 * same_length exactly the last mem_len positions, as softmax_row();
 * false if none. */
static bool
few_keys(const struct few *f, int i, int j0, int j1, int *lo, int *hi)
{
	const struct txl_session *s = f->s;
	const int qpos = s->mlen + i;
	int a = s->same_length ? qpos - s->mem_len + 1 : 0;

	*lo = a > j0 ? a : j0;
	*hi = qpos + 1 < j1 ? qpos + 1 : j1;
	return *lo < *hi;
}

/* Query i's scores for head h: klen_max floats. */
static float *
few_scores(const struct few *f, int h, int i)
{
	return f->s->fsc + ((size_t)h * f->n + i) * (size_t)f->s->klen_max;
}

/* The part of query i, head h, block b: d_head weighted sums, then max
 * and sum of exps (-INFINITY and 0 when it sees none of the keys; the
 * sum in float, one rounding of a relative 6e-8 before the merge). */
static float *
few_part(const struct few *f, int h, int b, int i)
{
	const size_t D = (size_t)f->s->model->hp.d_head;

	return f->s->part + (((size_t)h * f->n_blocks + b) * f->n + i) *
		(D + 2);
}

/* The kernels over n rows of a long stream, PF_ROWS at a time, the rows
 * PF_AHEAD further prefetched: the hardware's prefetchers stop at every
 * 4 KB page, and a token with a long memory reads tens of MB of K, R and
 * V from DRAM.  On one Zen 5 core this halves the cost of a token with
 * 3,800 positions of F16 memory; 32 or 128 rows ahead do a little less
 * well. */
#define PF_ROWS 32
#define PF_AHEAD 64

/* Rows [r, r + PF_ROWS) of w, also past the rows of the call: the
 * stream goes on in the next one (GCC 12 dropped the prefetches of a
 * version that stopped at the call's last row, which then ran no faster
 * than none).  A prefetch past the buffer's end is harmless; the address
 * is computed in uintptr_t so that no pointer leaves its object. */
static inline void
prefetch_rows(const uint8_t *w, size_t ld, int r)
{
	const uintptr_t p = (uintptr_t)w + (size_t)r * ld;

	for (size_t o = 0; o < (size_t)PF_ROWS * ld; o += 64)
		__builtin_prefetch((const void *)(p + o));
}

/* A query of few_unit's products: float, or (the slot's of fq16) int16
 * against a Q8_0 memory, or (of fq8) int8 against a Q4_0 one, whose
 * integer products read it faster than widening each key to float (Q8_0:
 * 1.7 times on one core with AVX2, 1.2 with AVX-512: bench-kernels). */
struct few_query {
	const float *x;
	struct txl_q16_act q16;
	struct txl_q8_act q8;
};

/* A slot of fq16 or fq8: a query and head, numbered as fq's rows are. */
static struct txl_q16_act
q16_slot(const struct txl_session *s, size_t slot)
{
	const size_t D = (size_t)s->model->hp.d_head;

	return (struct txl_q16_act){ s->fq16 + slot * D,
				     s->fq16d + slot * D / TXL_QK };
}

static struct txl_q8_act
q8_slot(const struct txl_session *s, size_t slot)
{
	const size_t D = (size_t)s->model->hp.d_head;

	return (struct txl_q8_act){ s->fq8 + slot * D,
				    s->fq8d + slot * D / TXL_QK,
				    s->fq8off + slot * D / TXL_QK };
}

static struct few_query
few_query(const struct txl_session *s, const float *x, size_t slot)
{
	struct few_query fq = { .x = x };

	if (s->kv_dt == TXL_Q8_0)
		fq.q16 = q16_slot(s, slot);
	if (s->kv_dt == TXL_Q4_0)
		fq.q8 = q8_slot(s, slot);
	return fq;
}

/* x (d_head values) into slot `slot` of fq16 or fq8 */
static void
quantize_query(const struct txl_kernels *k, const struct txl_session *s,
	       size_t slot, const float *x)
{
	const int D = s->model->hp.d_head;

	if (s->kv_dt == TXL_Q8_0) {
		struct txl_q16_act a = q16_slot(s, slot);
		txl_quantize_q16(&a, x, D);
	} else {
		struct txl_q8_act a = q8_slot(s, slot);
		k->quantize_q8(&a, x, D);
	}
}

static void
dot_stream(const struct txl_kernels *k, enum txl_dtype dt, float *y,
	   const uint8_t *w, size_t ld, const struct few_query *x, int n,
	   int K)
{
	for (int r = 0; r < n; r += PF_ROWS) {
		int m = n - r < PF_ROWS ? n - r : PF_ROWS;
		const uint8_t *wr = w + (size_t)r * ld;

		prefetch_rows(w, ld, r + PF_AHEAD);
		if (dt == TXL_Q8_0)
			k->dot_rows_q16(y + r, wr, ld, &x->q16, m, K);
		else if (dt == TXL_Q4_0)
			k->dot_rows_q4(y + r, wr, ld, &x->q8, m, K);
		else
			k->dot_rows[dt](y + r, wr, ld, x->x, m, K);
	}
}

static void
axpy_stream(txl_axpy_rows_fn fn, float *y, const float *a, const uint8_t *w,
	    size_t ld, int n, int K)
{
	for (int r = 0; r < n; r += PF_ROWS) {
		int m = n - r < PF_ROWS ? n - r : PF_ROWS;
		prefetch_rows(w, ld, r + PF_AHEAD);
		fn(y, a + r, w + (size_t)r * ld, ld, m, K);
	}
}

/* Keys [j0, j1) of head h, every query: scores, then position terms,
 * then softmax and values, into the parts of block b. */
static void
few_unit(const struct few *f, int h, int b, int j0, int j1)
{
	const struct txl_session *s = f->s;
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_kernels *k = txl_kernels();
	const int H = hp->n_head, D = hp->d_head;
	const enum txl_dtype dt = s->kv_dt;
	const uint8_t *K = txl_kv_row(s, s->k[f->l], s->cap, h, f->base);
	const uint8_t *V = txl_kv_row(s, s->v[f->l], s->cap, h, f->base);
	const int last = s->n_dist - 1;
	float bd[STEP];
	int lo, hi;

	/* AC (or the plain q.k): (q_i + r_w_bias) . k_j */
	for (int c = j0; c < j1; c += STEP) {
		const int ce = c + STEP < j1 ? c + STEP : j1;
		for (int i = 0; i < f->n; i++) {
			const struct few_query q = few_query(s, relative(hp)
				? s->fq + ((size_t)i * H + h) * D
				: f->q + (size_t)i * f->qs + h * D,
				(size_t)i * H + h);
			if (few_keys(f, i, c, ce, &lo, &hi))
				dot_stream(k, dt, few_scores(f, h, i) + lo,
					   K + (size_t)lo * s->kv_row,
					   s->kv_row, &q, hi - lo, D);
		}
	}
	/* BD: key j is at distance qpos - j; the distances from n_dist - 1
	 * on share its row (clamp_len): rows [near, far] of R for keys
	 * [lo, hi).  The last keys first, so that R is read forwards (a
	 * third faster on one core than going back a STEP at a time) */
	for (int c = j0 + (j1 - 1 - j0) / STEP * STEP; c >= j0; c -= STEP) {
		const int ce = c + STEP < j1 ? c + STEP : j1;
		for (int i = 0; i < f->n; i++) {
			const int qpos = s->mlen + i;
			float *sc = few_scores(f, h, i);
			if (!few_keys(f, i, c, ce, &lo, &hi))
				continue;
			if (!relative(hp)) {
				for (int j = lo; j < hi; j++)
					sc[j] *= f->scale;
				continue;
			}
			const int near = qpos - (hi - 1) < last ? qpos - (hi - 1)
				: last;
			const int far = qpos - lo < last ? qpos - lo : last;
			const struct few_query q = few_query(s,
				hp->attn_type == 0
				? s->fq + ((size_t)(f->n + i) * H + h) * D
				: f->q + (size_t)i * f->qs + h * D,
				(size_t)(f->n + i) * H + h);
			dot_stream(k, dt, bd, txl_kv_row(s, s->r[f->l],
							 s->n_dist, h, near),
				   s->kv_row, &q, far - near + 1, D);
			if (hp->attn_type == 1)
				for (int t = near; t <= far; t++)
					bd[t - near] += s->r_bias[f->l]
						[(size_t)t * H + h];
			/* keys at distance last and beyond, then the others,
			 * whose terms are bd backwards (two loops that GCC
			 * vectorizes, where a min() per key kept it scalar) */
			const int mid = qpos - last + 1 < lo ? lo
				: qpos - last + 1 < hi ? qpos - last + 1 : hi;
			const int back = qpos - near;
			for (int j = lo; j < mid; j++)
				sc[j] = (sc[j] + bd[last - near]) * f->scale;
			for (int j = mid; j < hi; j++)
				sc[j] = (sc[j] + bd[back - j]) * f->scale;
		}
	}
	/* e_j = exp(score_j - m), their sum */
	for (int i = 0; i < f->n; i++) {
		float *part = few_part(f, h, b, i), *sc = few_scores(f, h, i);
		if (!few_keys(f, i, j0, j1, &lo, &hi)) {
			part[D] = -INFINITY;
			part[D + 1] = 0.0f;
			continue;
		}
		part[D] = k->max(sc + lo, hi - lo);
		part[D + 1] = (float)k->exp_sum(sc + lo, sc + lo, hi - lo,
						part[D]);
		memset(part, 0, sizeof(float) * (size_t)D);
	}
	/* sum of e_j v_j */
	for (int c = j0; c < j1; c += STEP) {
		const int ce = c + STEP < j1 ? c + STEP : j1;
		for (int i = 0; i < f->n; i++)
			if (few_keys(f, i, c, ce, &lo, &hi))
				axpy_stream(k->axpy_rows[dt],
					    few_part(f, h, b, i),
					    few_scores(f, h, i) + lo,
					    V + (size_t)lo * s->kv_row,
					    s->kv_row, hi - lo, D);
	}
}

static void
few_task(void *p, int ith, int nth)
{
	struct few *f = p;
	const int units = f->s->model->hp.n_head * f->n_blocks;
	int u;

	while ((u = atomic_fetch_add_explicit(&f->next, 1,
					      memory_order_relaxed)) < units) {
		const int h = u / f->n_blocks, b = u % f->n_blocks;
		const int j0 = b * f->block;
		const int j1 = j0 + f->block < f->klen ? j0 + f->block
			: f->klen;

		few_unit(f, h, b, j0, j1);
	}
}

/* The blocks of query i, head h merged: its attention vector into out. */
static void
few_merge(const struct few *f, int h, int i, float *out)
{
	const int D = f->s->model->hp.d_head;
	float max = -INFINITY;
	double sum = 0.0;

	for (int b = 0; b < f->n_blocks; b++)
		max = fmaxf(max, few_part(f, h, b, i)[D]);
	for (int b = 0; b < f->n_blocks; b++) {
		const float *p = few_part(f, h, b, i);
		if (p[D] > -INFINITY)
			sum += exp((double)p[D] - max) * p[D + 1];
	}
	memset(out, 0, sizeof(float) * (size_t)D);
	for (int b = 0; b < f->n_blocks; b++) {
		const float *p = few_part(f, h, b, i);
		if (!(p[D] > -INFINITY))
			continue;
		const float w = (float)(exp((double)p[D] - max) / sum);
		for (int c = 0; c < D; c++)
			out[c] += w * p[c];
	}
}

static void
attend_few(struct txl_session *s, int l, int n, int base, int qs)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int H = hp->n_head, D = hp->d_head, hd = H * D;
	const int klen = s->mlen + n;
	/* blocks: enough units for every thread */
	int nb = (BLOCKS_PER_THREAD * txl_pool_threads() + H - 1) / H;
	struct few f = {
		.s = s, .l = l, .n = n, .base = base, .klen = klen, .qs = qs,
		.q = s->qkv, .scale = 1.0f / sqrtf((float)D),
	};

	TXL_ASSERT(klen <= s->klen_max);
	if (nb > (int)max_blocks(klen))
		nb = (int)max_blocks(klen);
	f.block = (klen + nb - 1) / nb;
	f.block = (f.block + BLOCK_UNIT - 1) / BLOCK_UNIT * BLOCK_UNIT;
	f.n_blocks = (klen + f.block - 1) / f.block;
	atomic_init(&f.next, 0);
	if (relative(hp)) {
		/* q + r_w_bias, then (attn_type 0) q + r_r_bias, n rows of
		 * every head each */
		for (int i = 0; i < n; i++) {
			const float *qi = s->qkv + (size_t)i * qs;
			float *qw = s->fq + (size_t)i * hd;
			float *qr = s->fq + (size_t)(n + i) * hd;
			for (int c = 0; c < hd; c++) {
				qw[c] = qi[c] + ly->r_w_bias[c];
				if (hp->attn_type == 0)
					qr[c] = qi[c] + ly->r_r_bias[c];
			}
		}
	}
	if (txl_dtype_blocked(s->kv_dt)) {
		/* the queries of AC and BD as few_unit takes them, in int16
		 * or int8 (slots as fq's) */
		const struct txl_kernels *k = txl_kernels();

		for (int i = 0; i < n; i++)
			for (int h = 0; h < H; h++) {
				const float *q = s->qkv + (size_t)i * qs + h * D;
				const size_t ac = (size_t)i * H + h;
				const size_t bd = (size_t)(n + i) * H + h;
				quantize_query(k, s, ac, relative(hp) ?
					       s->fq + ac * D : q);
				if (relative(hp))
					quantize_query(k, s, bd,
						       hp->attn_type == 0 ?
						       s->fq + bd * D : q);
			}
	}
	/* a product of d_head per key and query for AC, BD and V */
	txl_pool_run_for(few_task, &f, 3.0 * n * H * klen * D);
	for (int i = 0; i < n; i++)
		for (int h = 0; h < H; h++)
			few_merge(&f, h, i, s->attn + (size_t)i * hd + h * D);
}

/* ---- a segment: units of one head and a block of queries ----
 *
 * One pool task per layer.  A unit, head h and queries [i0, i1), computes
 * their scores (content, then position, with sgemm), softmax and the
 * weighted sums of V, on one thread: the products inside a task run
 * alone, so the softmax runs in parallel with the rest and a layer costs
 * one hand-over to the pool rather than three per head.  Each thread
 * works in its own slot of scratch (s->seg), whatever the number of
 * heads and the length of the segment; a thread that the pool gained
 * since the session's slots were made, when more cannot be had, leaves
 * the units to the others.  Compact K, V and R are widened by the
 * products as they go, a head's at each call (hence SEG_ROWS_WIDE). */

struct seg {
	struct txl_session *s;
	int l, n, base, klen, n_bd, qs, n_blocks;
	float scale;
	atomic_int next;	/* the next unit: head * n_blocks + block */
};

static void
seg_unit(const struct seg *g, float *slot, int h, int i0, int i1)
{
	struct txl_session *s = g->s;
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[g->l];
	const int D = hp->d_head, hd = hp->n_head * D, m = i1 - i0;
	const int klen = g->klen, n_bd = g->n_bd, rows = slot_rows(s);
	const enum txl_dtype dt = s->kv_dt;
	const float *q = s->qkv + (size_t)i0 * g->qs + h * D;
	/* head h's rows of the window's K and V */
	const uint8_t *K = txl_kv_row(s, s->k[g->l], s->cap, h, g->base);
	const uint8_t *V = txl_kv_row(s, s->v[g->l], s->cap, h, g->base);
	/* the slot: scores (rows klen apart), position scores (n_bd apart),
	 * q + r_w_bias, q + r_r_bias */
	float *sc = slot;
	float *bd = sc + (size_t)rows * s->klen_max;
	float *qw = bd + (size_t)rows * s->n_dist;
	float *qr = qw + (size_t)rows * D;

	if (relative(hp)) {
		/* AC[i, j] = (q_i + r_w_bias) . k_j */
		for (int i = 0; i < m; i++)
			for (int c = 0; c < D; c++)
				qw[(size_t)i * D + c] = q[(size_t)i * g->qs + c]
					+ ly->r_w_bias[h * D + c];
		txl_gemm_nt_dt(sc, klen, qw, D, K, dt, D, m, D, klen);
		position_scores(s, g->l, h, m, n_bd, q, g->qs, qr, bd);
	} else {
		/* q_i . k_j */
		txl_gemm_nt_dt(sc, klen, q, g->qs, K, dt, D, m, D, klen);
	}
	for (int i = 0; i < m; i++)
		softmax_row(s, sc + (size_t)i * klen,
			    relative(hp) ? bd + (size_t)i * n_bd : NULL,
			    s->mlen + i0 + i, klen, g->scale);
	/* attn_vec[:, h] = prob . v */
	txl_gemm_nn_dt(s->attn + (size_t)i0 * hd + h * D, hd, sc, klen, V, dt,
		       D, m, klen, D);
}

static void
seg_task(void *p, int ith, int nth)
{
	struct seg *g = p;
	struct txl_session *s = g->s;
	const int units = s->model->hp.n_head * g->n_blocks;
	const int rows = slot_rows(s);
	const size_t slot = slot_floats(s);
	int u;

	(void)nth;
	if (ith >= s->seg_slots)
		return;
	while ((u = atomic_fetch_add_explicit(&g->next, 1,
					      memory_order_relaxed)) < units) {
		const int h = u / g->n_blocks;
		const int i0 = u % g->n_blocks * rows;
		const int i1 = i0 + rows < g->n ? i0 + rows : g->n;

		seg_unit(g, s->seg + (size_t)ith * slot, h, i0, i1);
	}
}

static void
attend_segment(struct txl_session *s, int l, int n, int base, int qs)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int klen = s->mlen + n;
	struct seg g = {
		.s = s, .l = l, .n = n, .base = base, .klen = klen,
		.n_bd = klen < s->n_dist ? klen : s->n_dist, .qs = qs,
		.n_blocks = (n + slot_rows(s) - 1) / slot_rows(s),
		.scale = 1.0f / sqrtf((float)hp->d_head),
	};

	TXL_ASSERT(n <= s->seg_len && klen <= s->klen_max);
	if (txl_pool_threads() > s->seg_slots)
		seg_grow(s, txl_pool_threads());
	atomic_init(&g.next, 0);
	/* a product of d_head per key and query for AC, BD and V */
	txl_pool_run_for(seg_task, &g, 3.0 * n * hp->n_head * klen *
			 hp->d_head);
}

void
txl_attn_forward(struct txl_session *s, int l, int n, int base)
{
	const int qs = project(s, l, n, base);

	if (n <= FEW_MAX)
		attend_few(s, l, n, base, qs);
	else
		attend_segment(s, l, n, base, qs);
}
