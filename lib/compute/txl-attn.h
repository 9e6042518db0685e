/* SPDX-License-Identifier: MIT */
/*
 * txl-attn.h - the attention of a session: its kinds (one per attn_type),
 * its state, and what each of its files does.  Not installed.
 *
 *   txl-attn-setup.c    the kinds by attn_type, and the state's life;
 *   txl-attn-layer.c    a layer's attention: its input projections, then
 *                       one of the two paths;
 *   txl-attn-few.c      the path of a few queries (generation: one), one
 *                       pass over K, R and V for every head at once;
 *   txl-attn-seg.c      the path of longer segments (scoring, prompts):
 *                       sgemm per head and block of queries;
 *   txl-attn-rel.c      the relative kinds' position tables (attn_type
 *                       0: sinusoids through r_net; 1: learned);
 *   txl-attn-abs.c      the absolute kinds' positions (2: sinusoids at
 *                       the input; 3: learned, at every layer);
 *   txl-attn-span.c     the adaptive attention span (4): a learned
 *                       position table shared by every head, and each
 *                       head's values cut to its span (its keys to its
 *                       layer's window).
 *
 * A new kind of attention is a struct txl_attn_kind in a file of its
 * own, a row of the table of txl-attn-setup.c, its value of enum
 * txl_attn_type (txl.h) and its tensors in txl-bind.c; a kind whose
 * scores the paths cannot make from the fields of struct txl_attn_kind
 * adds the field and its use in the two paths.
 */
#ifndef TXL_ATTN_H
#define TXL_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"
#include "txl-kernels.h"
#include "txl-kv.h"
#include "txl-model.h"
#include "txl-rows.h"

/* How a kind projects a layer's input to queries, keys and values. */
enum txl_attn_proj {
	/* qkv_net of the input (layer-normed with pre_lnorm) */
	TXL_PROJ_QKV,
	/* q_net of the input as it is (even with pre_lnorm, as the
	 * original does), kv_net of the normed input */
	TXL_PROJ_Q_KV,
};

struct txl_attn;

/* One kind of attention (mem_transformer.py's classes, txl.h's enum
 * txl_attn_type). */
struct txl_attn_kind {
	const char *name;	/* what it is, in a few words */
	bool memory;		/* sessions keep a memory; else they
				   recompute a window of seg_len tokens */
	enum txl_attn_proj proj;
	/* relative positions: the position term of distance t, per head, is
	 * (q + r_r_bias if r_query_bias, else q) . R[t] (+ r_bias[t] if
	 * r_bias); the keys meet q + r_w_bias if w_bias, else q */
	bool relative, w_bias, r_query_bias, r_bias;
	/* one table R for every layer and head (else one per layer, with
	 * rows per head) */
	bool r_shared;
	/* a query attends to the positions before it only, not to itself */
	bool past_only;
	/* the memory starts as mem_len positions of zero states (K = V =
	 * 0), not empty; and the input embedding is not scaled by
	 * sqrt(d_model) (the adaptive-span code's TransformerSeq) */
	bool zero_memory, unscaled_input;
	/* rows of R for these settings: distances 0 .. n_dist - 1, the
	 * last one standing for every distance beyond (relative kinds) */
	int (*n_dist)(const struct txl_model *m, int clamp_len, int mem_len,
		      int klen_max);
	/* refuse settings the kind cannot take (NULL: none) */
	enum txl_status (*check)(const struct txl_model *m,
				 const struct txl_session_params *p);
	/* the position tables of a session (NULL: none) */
	enum txl_status (*init)(struct txl_attn *a, const struct txl_kv *kv);
	/* positions added to the n rows h of layer l's input (NULL: none) */
	void (*positions)(const struct txl_attn *a, int l, float *h, int n);
};

/* The settings a session's attention is made for. */
struct txl_attn_shape {
	int seg_len, mem_len, clamp_len;
	bool same_length;
	int klen_max;		/* the most keys a query sees */
	enum txl_compute compute;	/* of the products (txl.h) */
};

/* A session's attention: its position tables and its scratch, owned by
 * the session; the keys and values are the session's memory (struct
 * txl_kv). */
struct txl_attn {
	const struct txl_model *model;
	const struct txl_attn_kind *kind;
	struct txl_attn_shape shape;

	/* position tables: per layer, row t is the term of distance t */
	int n_dist;		/* rows: distances 0 .. n_dist-1 */
	uint8_t **r;		/* relative: (n_layer) x (n_head, n_dist,
				   d_head), in the memory's type; with
				   r_shared every layer's is the one table
				   (n_dist, d_head) */
	/* the heads' spans (the model's: adaptive span), or NULL: every
	 * head attends to the whole memory */
	const struct txl_head_span *spans;
	float **r_bias;		/* r_bias: (n_layer) x (n_dist, n_head) */
	int n_pos;		/* absolute sinusoids: rows of pos */
	float *pos;		/* absolute sinusoids: (n_pos, d_model) */

	/* scratch, sized for seg_len rows */
	float *qkv;		/* (seg_len, 3 * n_head * d_head): the
				   session's projections (struct
				   txl_forward's qkv) */
	/* the segment path: a slot of scratch per thread */
	float *seg;		/* seg_slots slots */
	int seg_slots;
	/* the few-query path */
	float *fq;		/* q + r_w_bias, q + r_r_bias per query, head */
	enum txl_act_type qact;	/* the memory's query form (struct
				   txl_type's query_act) */
	size_t qa_floats;	/* floats of a query and head in it */
	float *fqa;		/* the queries of fq (or q itself) in that
				   form, per query and head (none for
				   floats) */
	float *fsc;		/* scores per head, query: klen_max each */
	float *part;		/* per head, key block, query: the partial
				   softmax (d_head sums, max, sum of exps;
				   with spans the partition function's
				   sums: txl-attn-few.c) */
	int *units;		/* per head: its first unit of work, then
				   (n_head) the total */
};

/* Head h's row t of layer l's position table (R), in the memory's type. */
static inline const uint8_t *
txl_attn_r_row(const struct txl_attn *a, const struct txl_kv *kv, int l,
	       int h, int t)
{
	return txl_kv_row(kv, a->r[l], a->n_dist, a->kind->r_shared ? 0 : h,
			  t);
}

/* The keys [*lo, *hi) of head h of layer l (NULL spans: any) that the
 * query at position qpos of its window attends to, among [j0, j1):
 * causal (the positions before it only, with past_only); with
 * same_length exactly the last mem_len positions (the model's
 * same_length_tf: mem_len + 1, as the TensorFlow code's mask); with spans
 * the span's last positions.  False if none. */
static inline bool
txl_attn_keys(const struct txl_attn *a, int l, int h, int qpos, int j0,
	      int j1, int *lo, int *hi)
{
	int first = a->shape.same_length ? qpos - a->shape.mem_len +
		(a->model->same_length_tf ? 0 : 1) : 0;
	const int last = a->kind->past_only ? qpos : qpos + 1;

	if (a->spans) {
		const int s = a->spans[(size_t)l * a->model->hp.n_head + h].n;

		if (first < qpos - s)
			first = qpos - s;
	}
	*lo = first > j0 ? first : j0;
	*hi = last < j1 ? last : j1;
	return *lo < *hi;
}

/* With spans: the keys [*lo, *hi) among [j0, j1) that the query at qpos
 * scores only for the partition function of its softmax, which the
 * original takes over the layer's whole window: distances n + 1 .. w of
 * head h (mask 0; as far as the position table reaches).  False if
 * none, and always without spans or for a head that reads no key. */
static inline bool
txl_attn_rest(const struct txl_attn *a, int l, int h, int qpos, int j0,
	      int j1, int *lo, int *hi)
{
	if (!a->spans)
		return false;
	const struct txl_head_span *sp =
		&a->spans[(size_t)l * a->model->hp.n_head + h];
	const int far = sp->w < a->n_dist - 1 ? sp->w : a->n_dist - 1;

	if (sp->n == 0)
		return false;
	*lo = qpos - far > j0 ? qpos - far : j0;
	*hi = qpos - sp->n < j1 ? qpos - sp->n : j1;
	return *lo < *hi;
}

/* The keys [*lo, *hi) among [j0, j1) whose scores the query at qpos
 * needs: those it attends to (txl_attn_keys()) and before them the rest
 * of its window (txl_attn_rest()).  False if none. */
static inline bool
txl_attn_scored(const struct txl_attn *a, int l, int h, int qpos, int j0,
		int j1, int *lo, int *hi)
{
	int rlo, rhi;

	if (!txl_attn_keys(a, l, h, qpos, j0, j1, lo, hi)) {
		/* a query whose span ends before j1 scores the rest alone */
		if (!txl_attn_rest(a, l, h, qpos, j0, j1, lo, hi))
			return false;
		return true;
	}
	if (txl_attn_rest(a, l, h, qpos, j0, j1, &rlo, &rhi) && rlo < *lo)
		*lo = rlo;
	return true;
}

/* The mask of head h's span (the log of the soft mask, added to the
 * scaled scores) on the keys [lo, hi) of the query at qpos, the score of
 * key j in sc[j - off]; nothing without spans, nor on keys beyond the
 * span. */
static inline void
txl_attn_mask(const struct txl_attn *a, int l, int h, int qpos, int lo,
	      int hi, float *sc, int off)
{
	if (!a->spans)
		return;
	const struct txl_head_span *sp =
		&a->spans[(size_t)l * a->model->hp.n_head + h];
	/* distances ramp .. n: keys qpos - n .. qpos - ramp */
	const int end = qpos - sp->ramp + 1 < hi ? qpos - sp->ramp + 1 : hi;

	for (int j = lo > qpos - sp->n ? lo : qpos - sp->n; j < end; j++)
		sc[j - off] += sp->log_mask[qpos - j - sp->ramp];
}

/* The sum of the exps e_j = exp(score_j - max) (in e[j - off]) of the
 * keys [lo, hi) of the query at qpos that head h attends to, without
 * its mask: sum (their masked sum) plus e_j (1 / m - 1) over its ramp;
 * the part of the partition function that these keys make. */
static inline double
txl_attn_unmasked(const struct txl_attn *a, int l, int h, int qpos, int lo,
		  int hi, const float *e, int off, double sum)
{
	if (!a->spans)
		return sum;
	const struct txl_head_span *sp =
		&a->spans[(size_t)l * a->model->hp.n_head + h];
	const int end = qpos - sp->ramp + 1 < hi ? qpos - sp->ramp + 1 : hi;

	for (int j = lo > qpos - sp->n ? lo : qpos - sp->n; j < end; j++)
		sum += (double)e[j - off] *
			((double)sp->inv_mask[qpos - j - sp->ramp] - 1.0);
	return sum;
}

/* The original's renormalisation: the masked weights divided by their
 * sum + 1e-8, each weight being its share of the partition function
 * over the window; in the units of the exps of a softmax of the kept
 * keys (sum of masked exps `sum`, partition function `z` in the same
 * units), the divisor of the masked exps. */
#define TXL_SPAN_EPS 1e-8
static inline double
txl_attn_divisor(double sum, double z)
{
	return sum + TXL_SPAN_EPS * z;
}

/* ---- txl-attn-setup.c ---- */

/* The kind of attn_type @p type, or NULL. */
const struct txl_attn_kind *txl_attn_kind(enum txl_attn_type type);
/* Whether sessions of the model keep a memory (the relative attentions)
 * or recompute windows (the absolute ones). */
bool txl_attn_has_memory(const struct txl_hparams *hp);
/* Rows of the relative-position tables (0 for the absolute attentions). */
int txl_attn_n_dist(const struct txl_model *m, int clamp_len, int mem_len,
		    int klen_max);
/* Settings the model's attention refuses (TXL_ERR_INVALID, one line). */
enum txl_status txl_attn_check(const struct txl_model *m,
			       const struct txl_session_params *p);
/* The bytes of the position tables of a session. */
double txl_attn_r_bytes(const struct txl_model *m, int n_dist,
			enum txl_dtype kv_dt);
/* The bytes of txl_attn_init()'s buffers but the position tables. */
double txl_attn_bytes(const struct txl_hparams *hp, int seg_len,
		      int klen_max, int n_dist, enum txl_dtype kv_dt,
		      int threads);
/* A session's attention for the model, the shape and the memory kv
 * (whose type its position tables take).  Freed with txl_attn_free() in
 * any case. */
enum txl_status txl_attn_init(struct txl_attn *a, const struct txl_model *m,
			      const struct txl_attn_shape *shape,
			      const struct txl_kv *kv);
void txl_attn_free(struct txl_attn *a);

/* ---- txl-attn-layer.c ---- */

/* Absolute positions added to the n rows h of layer l's input (nothing
 * for the relative attentions). */
void txl_attn_positions(const struct txl_attn *a, int l, float *h, int n);

/* The projections of a layer's input: row i's query at q + i * qs, its
 * key and value side by side at kv + i * kvs. */
struct txl_qkv {
	const float *q, *kv;
	int qs, kvs;
};

/* Layer l's projections of the rows h of a forward pass (r: its rows;
 * xn: scratch of as many rows of d_model) into buf (r->n rows of
 * 3 n_head d_head floats), by the kind of a (any stream's: they are of
 * one model). */
void txl_attn_project(const struct txl_attn *a, int l, const float *h,
		      float *xn, float *buf, const struct txl_rows *r,
		      struct txl_qkv *out);
/* The multi-head attention of one stream's n rows, rows [first, first +
 * n) of the projections p, over its memory kv and themselves: their keys
 * and values go to kv's rows [start + fill, start + fill + n), and the
 * attention vectors, before o_net, into out (n rows of n_head *
 * d_head). */
void txl_attn_rows(struct txl_attn *a, struct txl_kv *kv, int l,
		   const struct txl_qkv *p, int first, int n, float *out);

/* ---- the two paths (txl-attn-few.c, txl-attn-seg.c) ---- */

/* Up to this many queries take the few-query path. */
#define TXL_ATTN_FEW_MAX 8

/* The scratch of each path (freed by txl_attn_free()), and its bytes. */
enum txl_status txl_attn_few_init(struct txl_attn *a, enum txl_dtype kv_dt);
double txl_attn_few_bytes(const struct txl_hparams *hp, int seg_len,
			  int klen_max, enum txl_dtype kv_dt);
enum txl_status txl_attn_seg_init(struct txl_attn *a, enum txl_dtype kv_dt,
				  int threads);
double txl_attn_seg_bytes(const struct txl_hparams *hp, int seg_len,
			  int klen_max, int n_dist, enum txl_dtype kv_dt,
			  int threads);

/* The attention vectors of the n <= TXL_ATTN_FEW_MAX queries q (rows qs
 * floats apart) into out, from layer l's keys and values of kv (their
 * last n rows already stored). */
void txl_attn_few(struct txl_attn *a, const struct txl_kv *kv, int l, int n,
		  const float *q, int qs, float *out);
/* One stream's few-query attention (txl_attn_few()'s arguments), and
 * txl_attn_few() for several streams (of one model, each its own
 * memory) at once: their units of work in one pool task, each stream's
 * floats those of txl_attn_few() alone. */
struct txl_attn_few_job {
	struct txl_attn *a;
	const struct txl_kv *kv;
	int n;
	const float *q;
	int qs;
	float *out;
	/* NULL, or the projections whose rows [first, first + n) of keys
	 * and values go into kv first (txl_kv_append()) */
	const struct txl_qkv *p;
	int first;
};
/* n_jobs of txl_attn_few_many(), at most */
#define TXL_ATTN_FEW_JOBS 32
void txl_attn_few_many(const struct txl_attn_few_job *jobs, int n_jobs,
		       int l);
/* The same for n <= seg_len queries. */
void txl_attn_seg(struct txl_attn *a, const struct txl_kv *kv, int l, int n,
		  const float *q, int qs, float *out);

#endif /* TXL_ATTN_H */
