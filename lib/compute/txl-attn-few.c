/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-few.c - the attention of a few queries (generation: one):
 * every head in one pass over the keys.
 *
 * One pool task per layer does every head (of every stream of a batch,
 * txl_attn_few_many): a head's keys are cut into
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
 * sum of all the exps: the weights of the segment path (txl-attn-seg.c),
 * to rounding.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-kernels.h"
#include "txl-log.h"
#include "txl-pool.h"
#include "txl-types.h"

/* txl_attn_few() cuts a head's keys into blocks (units of work, handed
 * out as they finish) of whole BLOCK_UNITs, at most BLOCKS_PER_THREAD
 * per thread, and a block into passes of STEP keys (the stretch each
 * query takes at a time: 256 KB of 16-bit K, in L2). */
#define BLOCKS_PER_THREAD 2
#define BLOCK_UNIT 256
#define STEP 2048

static int
few_queries(int seg_len)
{
	return seg_len < TXL_ATTN_FEW_MAX ? seg_len : TXL_ATTN_FEW_MAX;
}

/* The most blocks a head's klen keys are cut into. */
static size_t
max_blocks(int klen)
{
	return (size_t)(klen + BLOCK_UNIT - 1) / BLOCK_UNIT;
}

struct few {
	const struct txl_attn *a;
	const struct txl_kv *kv;
	int l, n, qs, block;
	const float *q;		/* the queries, rows qs floats apart */
	const int *first;	/* per head its first unit, then the total */
	const int *from;	/* per head the first key of its units */
	float scale;
};

/* Query i's scores for head h: klen_max floats, by key. */
static float *
few_scores(const struct few *f, int h, int i)
{
	return f->a->fsc + ((size_t)h * f->n + i) *
		(size_t)f->a->shape.klen_max;
}

/* The part of query i in unit u: d_head weighted sums, then max and sum
 * of exps (-INFINITY and 0 when it sees none of the keys; the sum in
 * float, one rounding of a relative 6e-8 before the merge); with spans
 * the partition function over the window (txl_attn_unmasked()) of the
 * unit's keys the query attends to, in the units of that max, then the
 * max and sum of exps of the rest of the window (txl_attn_rest();
 * -INFINITY and 0 where none). */
enum { PART_MAX, PART_SUM, PART_Z, PART_RMAX, PART_RSUM, PART_EXTRA };

static float *
few_part(const struct few *f, int u, int i)
{
	const size_t D = (size_t)f->a->model->hp.d_head;

	return f->a->part + ((size_t)u * f->n + i) * (D + PART_EXTRA);
}

/* The kernels over n rows of a long stream, PF_ROWS at a time, the rows
 * PF_AHEAD further prefetched: the hardware's prefetchers stop at every
 * 4 KB page, and a token with a long memory reads tens of MB of K, R and
 * V from DRAM (bench/README.md has the distance's measurements). */
#define PF_ROWS 32
#define PF_AHEAD 64
/* A stream of at most PF_MIN_BYTES (a few hundred keys of a head: the
 * short memory of most models) is left to the hardware: it is read
 * again at every token and stays in L2, where the prefetches cost as many
 * instructions as they save (txlgen --n-samples 8 on models/sotu.bin,
 * 129 keys: 6% of the time in them) */
#define PF_MIN_BYTES (64u << 10)

/* Rows [r, r + PF_ROWS) of w that are before row `end`: the stream's
 * rows go on past those of one call into the next one (stopping at the
 * call's last row gained nothing), but not past the unit's keys: a short
 * memory's prefetches, each of a line past its end, would cost as many
 * instructions as its products.  The address is computed in uintptr_t
 * so that no pointer leaves its object. */
static inline void
prefetch_rows(const uint8_t *w, size_t ld, int r, int end)
{
	const uintptr_t p = (uintptr_t)w + (size_t)r * ld;
	const int rows = end - r < PF_ROWS ? end - r : PF_ROWS;

	for (size_t o = 0; rows > 0 && o < (size_t)rows * ld; o += 64)
		__builtin_prefetch((const void *)(p + o));
}

/* A query (x: d_head floats) as few_unit's products take it against the
 * memory: slot `slot` of fqa (a query and head, numbered as fq's rows
 * are) in the memory type's query form (struct txl_type's query_act),
 * or x itself: an int16 or int8 query, whose integer products read a
 * block type's keys faster than widening each to float (bench-kernels). */
static struct txl_act
few_query(const struct txl_attn *a, const float *x, size_t slot)
{
	return txl_act_view(a->qact, a->fqa ? a->fqa + slot * a->qa_floats
			    : NULL, x, a->model->hp.d_head);
}

/* x into slot `slot` of fqa */
static void
quantize_query(const struct txl_attn *a, size_t slot, const float *x)
{
	struct txl_act q = few_query(a, x, slot);

	txl_act_quantize(&q, x, a->model->hp.d_head);
}

/* The n rows of w from a stream of `end` rows (end >= n), through the
 * kernels PF_ROWS at a time with the rows PF_AHEAD further prefetched;
 * with nothing to prefetch, in one call. */
static void
dot_stream(const struct txl_type_kernels *k, float *y, const uint8_t *w,
	   size_t ld, const struct txl_act *x, int n, int end, int K)
{
	if (end <= PF_AHEAD || (size_t)end * ld <= PF_MIN_BYTES) {
		txl_dot_act(k, y, w, ld, x, n, K);
		return;
	}
	for (int r = 0; r < n; r += PF_ROWS) {
		int m = n - r < PF_ROWS ? n - r : PF_ROWS;

		prefetch_rows(w, ld, r + PF_AHEAD, end);
		txl_dot_act(k, y + r, w + (size_t)r * ld, ld, x, m, K);
	}
}

static void
axpy_stream(txl_axpy_rows_fn fn, float *y, const float *a, const uint8_t *w,
	    size_t ld, int n, int end, int K)
{
	if (end <= PF_AHEAD || (size_t)end * ld <= PF_MIN_BYTES) {
		fn(y, a, w, ld, n, K);
		return;
	}
	for (int r = 0; r < n; r += PF_ROWS) {
		int m = n - r < PF_ROWS ? n - r : PF_ROWS;
		prefetch_rows(w, ld, r + PF_AHEAD, end);
		fn(y, a + r, w + (size_t)r * ld, ld, m, K);
	}
}

/* Keys [j0, j1) of head h, every query: scores, then position terms,
 * then softmax and values, into the parts of unit u. */
static void
few_unit(const struct few *f, int h, int u, int j0, int j1)
{
	const struct txl_attn *a = f->a;
	const struct txl_kv *kv = f->kv;
	const struct txl_hparams *hp = &a->model->hp;
	const struct txl_kernels *k = txl_kernels();
	const struct txl_type_kernels *tk = txl_type_kernels(kv->dt);
	const int H = hp->n_head, D = hp->d_head, l = f->l;
	const bool rel = a->kind->relative;
	const uint8_t *K = txl_kv_k(kv, l, h), *V = txl_kv_v(kv, l, h);
	const struct txl_kv_head *hd = txl_kv_head(kv, l, h);
	const int fill = txl_kv_head_fill(kv, hd);
	/* keys [0, zeros) are zero states: q . k_j = 0 and v_j = 0, not
	 * read (a memory starts so: most of a long span's keys for the
	 * first thousands of tokens) */
	const int zeros = txl_kv_head_zeros(kv, hd);
	const int last = a->n_dist - 1;
	float bd[STEP];
	int lo, hi;

	/* AC (or the plain q.k): (q_i + r_w_bias) . k_j */
	for (int c = j0; c < j1; c += STEP) {
		const int ce = c + STEP < j1 ? c + STEP : j1;
		for (int i = 0; i < f->n; i++) {
			const struct txl_act q = few_query(a, a->kind->w_bias
				? a->fq + ((size_t)i * H + h) * D
				: f->q + (size_t)i * f->qs + h * D,
				(size_t)i * H + h);
			float *sc = few_scores(f, h, i);
			if (!txl_attn_scored(a, l, h, fill + i, c, ce, &lo,
					     &hi))
				continue;
			for (; lo < hi && lo < zeros; lo++)
				sc[lo] = 0.0f;
			if (lo < hi)
				dot_stream(tk, sc + lo, K + (size_t)lo * kv->row,
					   kv->row, &q, hi - lo, j1 - lo, D);
		}
	}
	/* BD: key j is at distance qpos - j; the distances from n_dist - 1
	 * on share its row (clamp_len): rows [near, far] of R for keys
	 * [lo, hi).  The last keys first, so that R is read forwards (the
	 * prefetchers follow a forward stream, not steps back) */
	for (int c = j0 + (j1 - 1 - j0) / STEP * STEP; c >= j0; c -= STEP) {
		const int ce = c + STEP < j1 ? c + STEP : j1;
		for (int i = 0; i < f->n; i++) {
			const int qpos = fill + i;
			float *sc = few_scores(f, h, i);
			if (!txl_attn_scored(a, l, h, qpos, c, ce, &lo, &hi))
				continue;
			if (!rel) {
				for (int j = lo; j < hi; j++)
					sc[j] *= f->scale;
				continue;
			}
			const int near = qpos - (hi - 1) < last ? qpos - (hi - 1)
				: last;
			const int far = qpos - lo < last ? qpos - lo : last;
			/* R's rows go on to the unit's first key */
			const int end = qpos - j0 < last ? qpos - j0 : last;
			const struct txl_act q = few_query(a,
				a->kind->r_query_bias
				? a->fq + ((size_t)(f->n + i) * H + h) * D
				: f->q + (size_t)i * f->qs + h * D,
				(size_t)(f->n + i) * H + h);
			dot_stream(tk, bd, txl_attn_r_row(a, kv, l, h, near),
				   kv->row, &q, far - near + 1, end - near + 1,
				   D);
			if (a->kind->r_bias)
				for (int t = near; t <= far; t++)
					bd[t - near] += a->r_bias[l]
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
			txl_attn_mask(a, l, h, qpos, lo, hi, sc, 0);
		}
	}
	/* e_j = exp(score_j - m), their sum; with spans the partition
	 * function */
	for (int i = 0; i < f->n; i++) {
		float *part = few_part(f, u, i), *sc = few_scores(f, h, i);
		float *x = part + D;
		x[PART_RMAX] = -INFINITY;
		x[PART_RSUM] = 0.0f;
		if (txl_attn_rest(a, l, h, fill + i, j0, j1, &lo, &hi)) {
			x[PART_RMAX] = k->max(sc + lo, hi - lo);
			x[PART_RSUM] = (float)k->exp_sum(sc + lo, sc + lo,
							 hi - lo,
							 x[PART_RMAX]);
		}
		if (!txl_attn_keys(a, l, h, fill + i, j0, j1, &lo, &hi)) {
			x[PART_MAX] = -INFINITY;
			x[PART_SUM] = x[PART_Z] = 0.0f;
			continue;
		}
		x[PART_MAX] = k->max(sc + lo, hi - lo);
		const double sum = k->exp_sum(sc + lo, sc + lo, hi - lo,
					      x[PART_MAX]);
		x[PART_SUM] = (float)sum;
		x[PART_Z] = (float)txl_attn_unmasked(a, l, h, fill + i, lo, hi,
						     sc, 0, sum);
		memset(part, 0, sizeof(float) * (size_t)D);
	}
	/* sum of e_j v_j */
	for (int c = j0; c < j1; c += STEP) {
		const int ce = c + STEP < j1 ? c + STEP : j1;
		for (int i = 0; i < f->n; i++)
			if (txl_attn_keys(a, l, h, fill + i,
					  c > zeros ? c : zeros, ce, &lo, &hi))
				axpy_stream(tk->axpy_rows,
					    few_part(f, u, i),
					    few_scores(f, h, i) + lo,
					    V + (size_t)lo * kv->row,
					    kv->row, hi - lo, j1 - lo, D);
	}
}

/* Unit u of f (first[h] <= u < first[h + 1]: head h) */
static void
few_run(const struct few *f, int u)
{
	const int H = f->a->model->hp.n_head;
	const int *first = f->first;
	int h = 0, top = H - 1;

	while (h < top) {
		const int mid = (h + top + 1) / 2;
		if (first[mid] <= u)
			h = mid;
		else
			top = mid - 1;
	}
	const int j0 = f->from[h] + (u - first[h]) * f->block;
	const int end = f->from[h + H];
	const int j1 = j0 + f->block < end ? j0 + f->block : end;

	few_unit(f, h, u, j0, j1);
}

/* Several streams' attention (one layer) in one pool task: items
 * [0, n_ready) make stream i's memory and queries ready (few_ready; none
 * where the caller did), then the next are the streams' units in turn
 * (base[i] the first of f[i]'s, base[n] the total), handed out from one
 * counter; a unit of a stream not yet ready waits for it (the readying
 * was handed out earlier, and is short). */
struct few_many {
	const struct few *f;
	const struct txl_attn_few_job *job;
	const int *base;
	int n, n_ready;
	atomic_int next;
	atomic_int *ready;
};

static void few_ready(const struct few *f, const struct txl_attn_few_job *j);

static void
few_task(void *p, int ith, int nth)
{
	struct few_many *m = p;
	const int total = m->n_ready + m->base[m->n];
	int u, i = 0;

	(void)ith;
	(void)nth;
	while ((u = atomic_fetch_add_explicit(&m->next, 1,
					      memory_order_relaxed)) < total) {
		if (u < m->n_ready) {
			few_ready(&m->f[u], &m->job[u]);
			atomic_store_explicit(&m->ready[u], 1,
					      memory_order_release);
			continue;
		}
		u -= m->n_ready;
		while (m->base[i + 1] <= u)
			i++;
		for (unsigned w = 0; !atomic_load_explicit(&m->ready[i],
						memory_order_acquire); w++)
			txl_pool_spin_wait(w);
		few_run(&m->f[i], u - m->base[i]);
	}
}

/* The units of query i, head h merged: its attention vector into out
 * (zeros where the head sees no key); with spans divided by the sum of
 * the masked exps + 1e-8 times the partition function over the window
 * (txl_attn_divisor()). */
static void
few_merge(const struct few *f, int h, int i, float *out)
{
	const int D = f->a->model->hp.d_head;
	const int u0 = f->first[h], u1 = f->first[h + 1];
	float max = -INFINITY;
	double sum = 0.0, z = 0.0;

	for (int u = u0; u < u1; u++)
		max = fmaxf(max, few_part(f, u, i)[D + PART_MAX]);
	memset(out, 0, sizeof(float) * (size_t)D);
	if (!(max > -INFINITY))
		return;
	for (int u = u0; u < u1; u++) {
		const float *x = few_part(f, u, i) + D;
		if (x[PART_MAX] > -INFINITY) {
			const double e = exp((double)x[PART_MAX] - max);
			sum += e * x[PART_SUM];
			z += e * x[PART_Z];
		}
		if (x[PART_RMAX] > -INFINITY)
			z += exp((double)x[PART_RMAX] - max) * x[PART_RSUM];
	}
	if (f->a->spans)
		sum = txl_attn_divisor(sum, z);
	for (int u = u0; u < u1; u++) {
		const float *p = few_part(f, u, i);
		if (!(p[D] > -INFINITY))
			continue;
		const float w = (float)(exp((double)p[D] - max) / sum);
		for (int c = 0; c < D; c++)
			out[c] += w * p[c];
	}
}

double
txl_attn_few_bytes(const struct txl_hparams *hp, int seg_len, int klen_max,
		   enum txl_dtype kv_dt)
{
	const double hd = (double)hp->n_head * hp->d_head;
	/* fq, 2 hd floats a query (and again in the memory's query form:
	 * txl_act_floats()), the scores, the parts */
	const double fq = 2.0 * hd + 2.0 * hp->n_head *
		(double)txl_act_floats(txl_type(kv_dt)->query_act, hp->d_head);

	return 4.0 * few_queries(seg_len) * (fq + (double)hp->n_head *
		(klen_max + max_blocks(klen_max) * (hp->d_head +
						    (double)PART_EXTRA)));
}

enum txl_status
txl_attn_few_init(struct txl_attn *a, enum txl_dtype kv_dt)
{
	const struct txl_hparams *hp = &a->model->hp;
	const size_t nq = (size_t)few_queries(a->shape.seg_len);
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	const int klen_max = a->shape.klen_max;

	a->qact = txl_type(kv_dt)->query_act;
	a->qa_floats = txl_act_floats(a->qact, hp->d_head);
	a->fq = txl_alloc_floats(nq * 2 * hd);
	a->fsc = txl_alloc_floats(nq * (size_t)hp->n_head * (size_t)klen_max);
	a->part = txl_alloc_floats(nq * (size_t)hp->n_head *
				   max_blocks(klen_max) *
				   (size_t)(hp->d_head + PART_EXTRA));
	a->units = malloc(sizeof *a->units * (3 * (size_t)hp->n_head + 1));
	if (a->qa_floats && !(a->fqa = txl_alloc_floats(
			nq * 2 * (size_t)hp->n_head * a->qa_floats)))
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	if (!a->fq || !a->fsc || !a->part || !a->units)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	return TXL_OK;
}

/* The units of work of layer l's heads for n queries into f: each head's
 * keys [from[h], from[h + H]) (the oldest its first query sees to the
 * newest its last one does) cut into blocks of f->block keys, as few as
 * keep the threads busy to the end (one per head when the heads are
 * enough); the products per key and query, for the pool. */
static double
few_units(struct few *f, int *units)
{
	const struct txl_attn *a = f->a;
	const struct txl_kv *kv = f->kv;
	const int H = a->model->hp.n_head, n = f->n;
	int *first = units, *from = units + H + 1;
	int64_t total = 0;
	int longest = 0;

	for (int h = 0; h < H; h++) {
		const int fill = txl_kv_head_fill(kv, txl_kv_head(kv, f->l, h));
		int lo, hi;

		/* the union of the queries' keys (with spans the
		 * partition function's too) */
		from[h] = from[h + H] = 0;
		for (int i = 0; i < n; i++) {
			if (!txl_attn_scored(a, f->l, h, fill + i, 0, fill + n,
					     &lo, &hi))
				continue;
			if (from[h] == from[h + H] || lo < from[h])
				from[h] = lo;
			if (hi > from[h + H])
				from[h + H] = hi;
		}
		total += from[h + H] - from[h];
		if (from[h + H] - from[h] > longest)
			longest = from[h + H] - from[h];
	}
	f->block = BLOCK_UNIT;
	if (total > 0) {
		/* blocks of the longest head: enough units for every
		 * thread over all heads */
		int64_t nb = ((int64_t)BLOCKS_PER_THREAD * txl_pool_threads() *
			      longest + total - 1) / total;
		if (nb > (int64_t)max_blocks(longest))
			nb = (int64_t)max_blocks(longest);
		f->block = (int)((longest + nb - 1) / nb);
		f->block = (f->block + BLOCK_UNIT - 1) / BLOCK_UNIT *
			BLOCK_UNIT;
	}
	first[0] = 0;
	for (int h = 0; h < H; h++)
		first[h + 1] = first[h] + (from[h + H] - from[h] + f->block - 1) /
			f->block;
	f->first = first;
	f->from = from;
	return (double)total * n * a->model->hp.d_head;
}

/* f set up for job j: its units of work; returns their products */
static double
few_plan(struct few *f, const struct txl_attn_few_job *j, int l)
{
	*f = (struct few){
		.a = j->a, .kv = j->kv, .l = l, .n = j->n, .qs = j->qs,
		.q = j->q,
		.scale = 1.0f / sqrtf((float)j->a->model->hp.d_head),
	};
	return few_units(f, j->a->units);
}

/* Job j's keys and values into its memory (where it brings them), and
 * its queries biased and quantized as few_unit takes them. */
static void
few_ready(const struct few *f, const struct txl_attn_few_job *j)
{
	struct txl_attn *a = j->a;
	const struct txl_hparams *hp = &a->model->hp;
	const struct txl_layer *ly = &a->model->layers[f->l];
	const int H = hp->n_head, D = hp->d_head, hd = H * D;
	const int n = j->n, qs = j->qs;
	const float *q = j->q;
	const bool w_bias = a->kind->w_bias, rel = a->kind->relative;
	const bool r_query_bias = a->kind->r_query_bias;

	if (j->p)
		txl_kv_append(j->kv, f->l, j->p->kv + (size_t)j->first *
			      j->p->kvs, (size_t)j->p->kvs, n);
	if (w_bias || r_query_bias) {
		/* q + r_w_bias, then (r_query_bias) q + r_r_bias, n rows of
		 * every head each */
		for (int i = 0; i < n; i++) {
			const float *qi = q + (size_t)i * qs;
			float *qw = a->fq + (size_t)i * hd;
			float *qr = a->fq + (size_t)(n + i) * hd;
			for (int c = 0; c < hd; c++) {
				if (w_bias)
					qw[c] = qi[c] + ly->r_w_bias[c];
				if (r_query_bias)
					qr[c] = qi[c] + ly->r_r_bias[c];
			}
		}
	}
	if (a->qact != TXL_ACT_F32) {
		/* the queries of AC and BD as few_unit takes them (slots as
		 * fq's) */
		for (int i = 0; i < n; i++)
			for (int h = 0; h < H; h++) {
				const float *qh = q + (size_t)i * qs + h * D;
				const size_t ac = (size_t)i * H + h;
				const size_t bd = (size_t)(n + i) * H + h;
				quantize_query(a, ac, w_bias ? a->fq + ac * D
					       : qh);
				if (rel)
					quantize_query(a, bd, r_query_bias ?
						       a->fq + bd * D : qh);
			}
	}
}

void
txl_attn_few_many(const struct txl_attn_few_job *jobs, int n_jobs, int l)
{
	struct few f[TXL_ATTN_FEW_JOBS];
	int base[TXL_ATTN_FEW_JOBS + 1];
	atomic_int ready[TXL_ATTN_FEW_JOBS];
	/* one stream (a session alone): readied by the caller, as before
	 * there were batches */
	struct few_many m = { .f = f, .job = jobs, .base = base, .n = n_jobs,
			      .n_ready = n_jobs > 1 ? n_jobs : 0,
			      .ready = ready };
	double work = 0.0;

	TXL_ASSERT(n_jobs <= TXL_ATTN_FEW_JOBS);
	base[0] = 0;
	for (int j = 0; j < n_jobs; j++) {
		work += few_plan(&f[j], &jobs[j], l);
		base[j + 1] = base[j] + f[j].first[f[j].a->model->hp.n_head];
		atomic_init(&ready[j], !m.n_ready);
	}
	if (n_jobs == 1)
		few_ready(&f[0], &jobs[0]);
	atomic_init(&m.next, 0);
	/* a product of d_head per key and query for AC, BD and V; the
	 * units are those of each stream alone, whoever computes them */
	txl_pool_run_for(few_task, &m, 3.0 * work);
	for (int j = 0; j < n_jobs; j++) {
		const struct txl_hparams *hp = &jobs[j].a->model->hp;
		const int hd = hp->n_head * hp->d_head;

		for (int i = 0; i < jobs[j].n; i++)
			for (int h = 0; h < hp->n_head; h++)
				few_merge(&f[j], h, i, jobs[j].out +
					  (size_t)i * hd + h * hp->d_head);
	}
}

void
txl_attn_few(struct txl_attn *a, const struct txl_kv *kv, int l, int n,
	     const float *q, int qs, float *out)
{
	const struct txl_attn_few_job j = {
		.a = a, .kv = kv, .n = n, .q = q, .qs = qs, .out = out,
	};

	txl_attn_few_many(&j, 1, l);
}
