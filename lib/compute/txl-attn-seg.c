/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-seg.c - the attention of a segment of more queries than the
 * few-query path takes (scoring, prompts): units of one head and a block
 * of queries.
 *
 * One pool task per layer.  A unit, head h and queries [i0, i1), computes
 * their scores (content, then position, with sgemm), softmax and the
 * weighted sums of V, on one thread: the products inside a task run
 * alone, so the softmax runs in parallel with the rest and a layer costs
 * one hand-over to the pool rather than three per head.  Each thread
 * works in its own slot of scratch (a->seg), whatever the number of
 * heads and the length of the segment; a thread that the pool gained
 * since the session's slots were made, when more cannot be had, leaves
 * the units to the others.  Compact K, V and R are widened by the
 * products as they go, a head's at each call.
 * A unit's products stop at the key of its last query: the keys after
 * it are masked (an eighth of them with a memory of twice the segment,
 * half of them in a window recomputed from scratch).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-kernels.h"
#include "txl-log.h"
#include "txl-pool.h"
#include "txl-products.h"

/* A segment's units take up to SEG_ROWS queries: sgemm packs a head's K
 * (and V) at each call, so a unit of 128 queries packs them a quarter as
 * often as one of 32 (with 3,800 positions of memory the packing took
 * as long as the products of 32 queries), and a compact memory is
 * widened by each unit.  With an F32 memory and more threads than units
 * the units shrink down to SEG_ROWS_MIN queries, to share the heads out
 * (seg_unit_rows()). */
#define SEG_ROWS 128
#define SEG_ROWS_MIN 32

static int
seg_rows(int seg_len, enum txl_dtype kv_dt)
{
	(void)kv_dt;
	return seg_len < SEG_ROWS ? seg_len : SEG_ROWS;
}

/* The queries of a unit of a segment of n (at most rows, those of a
 * slot): fewer with an F32 memory when the units would be fewer than
 * two a thread. */
static int
seg_unit_rows(int rows, int n, int n_head, enum txl_dtype kv_dt,
	      int threads)
{
	while (kv_dt == TXL_F32 && rows > SEG_ROWS_MIN &&
	       n_head * ((n + rows - 1) / rows) < 2 * threads)
		rows /= 2;
	return rows;
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
slot_rows(const struct txl_attn *a, enum txl_dtype kv_dt)
{
	return seg_rows(a->shape.seg_len, kv_dt);
}

static size_t
slot_floats(const struct txl_attn *a, enum txl_dtype kv_dt)
{
	return seg_slot_floats(&a->model->hp, slot_rows(a, kv_dt),
			       a->shape.klen_max, a->n_dist);
}

double
txl_attn_seg_bytes(const struct txl_hparams *hp, int seg_len, int klen_max,
		   int n_dist, enum txl_dtype kv_dt, int threads)
{
	/* the slots of the segments' units */
	return 4.0 * threads * (double)seg_slot_floats(hp,
		seg_rows(seg_len, kv_dt), klen_max, n_dist);
}

/* Slots for n threads (n > a->seg_slots); false if out of memory (the
 * slots stay as they were). */
static bool
seg_grow(struct txl_attn *a, enum txl_dtype kv_dt, int n)
{
	float *p = txl_alloc_floats(slot_floats(a, kv_dt) * (size_t)n);

	if (!p)
		return false;
	free(a->seg);
	a->seg = p;
	a->seg_slots = n;
	return true;
}

enum txl_status
txl_attn_seg_init(struct txl_attn *a, enum txl_dtype kv_dt, int threads)
{
	if (!seg_grow(a, kv_dt, threads))
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	return TXL_OK;
}

/* The position scores of head h for the n queries q (row stride qs):
 * bd[i, t] for distances t < n_bd, into bd (rows n_bd apart), qr a
 * buffer of n * d_head floats. */
static void
position_scores(const struct txl_attn *a, const struct txl_kv *kv, int l,
		int h, int n, int n_bd, const float *q, int qs, float *qr,
		float *bd)
{
	const struct txl_hparams *hp = &a->model->hp;
	const struct txl_layer *ly = &a->model->layers[l];
	const int H = hp->n_head, D = hp->d_head;
	/* head h's rows of R */
	const uint8_t *R = txl_attn_r_row(a, kv, l, h, 0);

	if (a->kind->r_query_bias) {
		/* BD[i, t] = (q_i + r_r_bias) . R[t] */
		for (int i = 0; i < n; i++) {
			const float *qi = q + (size_t)i * qs;
			for (int c = 0; c < D; c++)
				qr[(size_t)i * D + c] = qi[c] +
					ly->r_r_bias[h * D + c];
		}
		txl_gemm_nt_dt(bd, n_bd, qr, D, R, kv->dt, D, n, D, n_bd);
	} else {
		/* B_ + D_ = q_i . r_emb[t] (+ r_bias[t] below) */
		txl_gemm_nt_dt(bd, n_bd, q, qs, R, kv->dt, D, n, D, n_bd);
	}
	if (a->kind->r_bias) {
		for (int i = 0; i < n; i++) {
			float *row = bd + (size_t)i * n_bd;
			for (int t = 0; t < n_bd; t++)
				row[t] += a->r_bias[l][(size_t)t * H + h];
		}
	}
}

/* Row i of the scores of head h (query at window index qpos, keys [jb,
 * je) in sc[0 .. je - jb)): add the position term (bd, NULL for absolute
 * attentions), scale, mask, exponentiate; returns the reciprocal of the
 * softmax's divisor, by which the caller scales the row's weighted sum of
 * V (a multiply per value of V rather than per key).  With spans the
 * keys of the window past the span are scored for the partition function
 * only (and left 0). */
static float
softmax_row(const struct txl_attn *a, int l, int h, float *sc,
	    const float *bd, int qpos, int jb, int je, float scale)
{
	const struct txl_kernels *k = txl_kernels();
	const int n_dist = a->n_dist;
	float max;
	double sum, z;
	int lo, hi, all, rlo, rhi;

	/* causal; with same_length exactly the last mem_len positions, the
	 * query's own included; with spans the span before the query */
	if (!txl_attn_keys(a, l, h, qpos, jb, je, &lo, &hi)) {
		for (int j = jb; j < je; j++)
			sc[j - jb] = 0.0f;
		return 0.0f;
	}
	txl_attn_scored(a, l, h, qpos, jb, je, &all, &hi);
	if (bd) {
		/* _rel_shift: key j is at distance qpos - j; the distances
		 * from n_dist - 1 on share its row (clamp_len) */
		int far = qpos - n_dist + 1;
		for (int j = all; j < far; j++)
			sc[j - jb] = (sc[j - jb] + bd[n_dist - 1]) * scale;
		for (int j = far > all ? far : all; j < hi; j++)
			sc[j - jb] = (sc[j - jb] + bd[qpos - j]) * scale;
	} else {
		for (int j = all; j < hi; j++)
			sc[j - jb] *= scale;
	}
	txl_attn_mask(a, l, h, qpos, lo, hi, sc, jb);
	/* the vector kernels: a long memory has thousands of keys a row */
	max = k->max(sc + lo - jb, hi - lo);
	sum = k->exp_sum(sc + lo - jb, sc + lo - jb, hi - lo, max);
	z = txl_attn_unmasked(a, l, h, qpos, lo, hi, sc, jb, sum);
	if (txl_attn_rest(a, l, h, qpos, jb, je, &rlo, &rhi)) {
		/* the rest of the window, in units of exp(max) */
		const float rmax = k->max(sc + rlo - jb, rhi - rlo);
		const double e = k->exp_sum(sc + rlo - jb, sc + rlo - jb,
					    rhi - rlo, rmax);

		z += exp((double)rmax - max) * e;
	}
	for (int j = jb; j < lo; j++)
		sc[j - jb] = 0.0f;
	for (int j = hi; j < je; j++)
		sc[j - jb] = 0.0f;
	return (float)(1.0 / txl_attn_divisor(sum, z));
}

struct seg {
	const struct txl_attn *a;
	const struct txl_kv *kv;
	const float *q;		/* the queries, rows qs floats apart */
	float *out;
	int l, n, qs, n_blocks, rows;
	size_t slot;		/* floats of a slot */
	float scale;
	atomic_int next;	/* the next unit: head * n_blocks + block */
};

static void
seg_unit(const struct seg *g, float *slot, int h, int i0, int i1)
{
	const struct txl_attn *a = g->a;
	const struct txl_kv *kv = g->kv;
	const struct txl_hparams *hp = &a->model->hp;
	const struct txl_layer *ly = &a->model->layers[g->l];
	const int D = hp->d_head, hd = hp->n_head * D, m = i1 - i0;
	const int rows = g->rows, l = g->l;
	const enum txl_dtype dt = kv->dt;
	const bool rel = a->kind->relative;
	const float *q = g->q + (size_t)i0 * g->qs + h * D;
	const struct txl_kv_head *head = txl_kv_head(kv, l, h);
	const int fill = txl_kv_head_fill(kv, head);
	/* keys [0, zeros) are zero states (K = V = 0): their products are
	 * 0, not computed (a memory starts so: most of a long window's keys
	 * for its first thousands of tokens) */
	const int zeros = txl_kv_head_zeros(kv, head);
	/* head h's window of K and V */
	const uint8_t *K = txl_kv_k(kv, l, h), *V = txl_kv_v(kv, l, h);
	/* the slot: scores (rows klen apart), position scores (n_bd apart),
	 * q + r_w_bias, q + r_r_bias */
	float *sc = slot;
	float *bd = sc + (size_t)rows * a->shape.klen_max;
	float *qw = bd + (size_t)rows * a->n_dist;
	float *qr = qw + (size_t)rows * D;
	float *out = g->out + (size_t)i0 * hd + h * D;
	/* each query's 1 / softmax divisor */
	float inv[SEG_ROWS];
	/* the keys of the block's queries: [jb, je), none after the last
	 * query's own (causal: the products stop there); the distances
	 * they take: 0 .. n_bd - 1 */
	int jb = 0, je = fill + i1, n_bd, lo, hi;

	if (a->spans) {
		/* the first query's window (the partition function's keys
		 * before its span) to the last one's last key */
		if (!txl_attn_scored(a, l, h, fill + i0, 0, fill + i1, &jb,
				     &hi))
			jb = fill + i1;
		je = txl_attn_keys(a, l, h, fill + i1 - 1, 0, fill + i1, &lo,
				   &hi) ? hi : jb;
		if (je <= jb) {
			for (int i = 0; i < m; i++)
				for (int c = 0; c < D; c++)
					out[(size_t)i * hd + c] = 0.0f;
			return;
		}
	}
	n_bd = fill + i1 - jb < a->n_dist ? fill + i1 - jb : a->n_dist;
	const int klen = je - jb;
	/* the keys whose products are computed: [jz, je) */
	const int jz = zeros > jb ? zeros < je ? zeros : je : jb;

	for (int i = 0; jz > jb && i < m; i++)
		for (int j = jb; j < jz; j++)
			sc[(size_t)i * klen + (j - jb)] = 0.0f;

	if (a->kind->w_bias) {
		/* AC[i, j] = (q_i + r_w_bias) . k_j */
		for (int i = 0; i < m; i++)
			for (int c = 0; c < D; c++)
				qw[(size_t)i * D + c] = q[(size_t)i * g->qs + c]
					+ ly->r_w_bias[h * D + c];
		if (je > jz)
			txl_gemm_nt_dt(sc + (jz - jb), klen, qw, D,
				       K + (size_t)jz * kv->row, dt, D, m, D,
				       je - jz);
	} else if (je > jz) {
		/* q_i . k_j */
		txl_gemm_nt_dt(sc + (jz - jb), klen, q, g->qs,
			       K + (size_t)jz * kv->row, dt, D, m, D, je - jz);
	}
	if (rel)
		position_scores(a, kv, l, h, m, n_bd, q, g->qs, qr, bd);
	for (int i = 0; i < m; i++)
		inv[i] = softmax_row(a, l, h, sc + (size_t)i * klen,
			    rel ? bd + (size_t)i * n_bd : NULL,
			    fill + i0 + i, jb, je, g->scale);
	/* attn_vec[:, h] = prob . v, from the first key a query attends to
	 * (the weights before it are 0: the partition function's keys) that
	 * is no zero state */
	int jv = jz;
	if (a->spans && txl_attn_keys(a, l, h, fill + i0, jb, je, &lo, &hi) &&
	    lo > jv)
		jv = lo;
	if (jv < je) {
		txl_gemm_nn_dt(out, hd, sc + (jv - jb), klen,
			       V + (size_t)jv * kv->row, dt, D, m, je - jv, D);
		for (int i = 0; i < m; i++)
			for (int c = 0; c < D; c++)
				out[(size_t)i * hd + c] *= inv[i];
	} else {
		for (int i = 0; i < m; i++)
			for (int c = 0; c < D; c++)
				out[(size_t)i * hd + c] = 0.0f;
	}
}

static void
seg_task(void *p, int ith, int nth)
{
	struct seg *g = p;
	const struct txl_attn *a = g->a;
	const int units = a->model->hp.n_head * g->n_blocks;
	int u;

	(void)nth;
	if (ith >= a->seg_slots)
		return;
	while ((u = atomic_fetch_add_explicit(&g->next, 1,
					      memory_order_relaxed)) < units) {
		const int h = u / g->n_blocks;
		const int i0 = u % g->n_blocks * g->rows;
		const int i1 = i0 + g->rows < g->n ? i0 + g->rows : g->n;

		seg_unit(g, a->seg + (size_t)ith * g->slot, h, i0, i1);
	}
}

void
txl_attn_seg(struct txl_attn *a, const struct txl_kv *kv, int l, int n,
	     const float *q, int qs, float *out)
{
	const struct txl_hparams *hp = &a->model->hp;
	const int rows = seg_unit_rows(slot_rows(a, kv->dt), n, hp->n_head,
				       kv->dt, txl_pool_threads());
	const int klen = kv->fill + n;
	struct seg g = {
		.a = a, .kv = kv, .q = q, .out = out, .l = l, .n = n, .qs = qs,
		.n_blocks = (n + rows - 1) / rows, .rows = rows,
		.slot = slot_floats(a, kv->dt),
		.scale = 1.0f / sqrtf((float)hp->d_head),
	};

	TXL_ASSERT(n <= a->shape.seg_len && klen <= a->shape.klen_max);
	if (txl_pool_threads() > a->seg_slots)
		seg_grow(a, kv->dt, txl_pool_threads());
	atomic_init(&g.next, 0);
	/* a product of d_head per key and query for AC, BD and V */
	txl_pool_run_for(seg_task, &g, 3.0 * n * hp->n_head * klen *
			 hp->d_head);
}
