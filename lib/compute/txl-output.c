/* SPDX-License-Identifier: MIT */
/*
 * txl-output.c - the output layer (ProjectedAdaptiveLogSoftmax): a full
 * softmax, or an adaptive one, whose head holds the shortlist and one
 * logit per tail cluster, each tail cluster a softmax of its own; and
 * dynamic evaluation (txl_session_adapt), which trains the session's own
 * copy of a full softmax.
 *
 * An eval keeps the last layer's outputs (the rows); logits are computed
 * from them only when asked for.  Scoring a token with an adaptive softmax
 * needs the head and the token's own cluster, never the full distribution:
 * txl_session_score() computes just that.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "txl-output.h"
#include "txl-alloc.h"
#include "txl-log.h"
#include "txl-ops.h"
#include "txl-pool.h"
#include "txl-products.h"
#include "txl-rows.h"

int
txl_out_head_size(const struct txl_hparams *hp)
{
	return hp->n_cutoffs ? hp->cutoffs[0] + hp->n_cutoffs : 0;
}

enum txl_status
txl_out_init(struct txl_out *o, const struct txl_model *m, int cap,
	     float *xn, float *tmp)
{
	const struct txl_hparams *hp = &m->hp;
	const size_t S = (size_t)cap, head = (size_t)txl_out_head_size(hp);

	*o = (struct txl_out){
		.model = m, .cap = cap, .w = m->out[0].w, .b = m->out[0].b,
		.xn = xn, .tmp = tmp,
	};
	o->logits = txl_alloc_floats(S * hp->n_token);
	o->rows = txl_alloc_floats(S * hp->d_model);
	if (!o->logits || !o->rows)
		return TXL_ERR_NOMEM;
	if (head && !(o->head = txl_alloc_floats(S * head)))
		return TXL_ERR_NOMEM;
	return TXL_OK;
}

void
txl_out_free(struct txl_out *o)
{
	free(o->logits);
	free(o->head);
	free(o->rows);
	free(o->own_w);
	free(o->own_b);
	*o = (struct txl_out){ 0 };
}

void
txl_out_clear(struct txl_out *o)
{
	o->n_rows = 0;
	o->valid = false;
}

void
txl_out_keep(struct txl_out *o, const float *h, int rows)
{
	const int d = o->model->hp.d_model;

	TXL_ASSERT(o->n_rows + rows <= o->cap);
	memcpy(o->rows + (size_t)o->n_rows * d, h,
	       sizeof(float) * (size_t)rows * d);
	o->n_rows += rows;
	o->valid = false;
}

/* h[rows, d_model] . P of output cluster c (_compute_logit's proj_hid)
 * into o->xn; h itself when the cluster has no projection. */
static const float *
project(struct txl_out *o, int c, const float *h, int rows)
{
	const struct txl_out_cluster *oc = &o->model->out[c];
	const int d = o->model->hp.d_model, e = oc->w.cols;

	if (!oc->proj.data)
		return h;
	/* proj_hid[e] = h[d] . P[d, e] */
	txl_gemm_nn(o->xn, e, h, d, txl_mat_f32(&oc->proj), e, rows, d, e);
	return o->xn;
}

/* log-softmax of the union of a[na] and b[nb] in place */
static void
log_softmax2(float *a, int na, float *b, int nb)
{
	float max = -INFINITY;
	double sum = 0;

	for (int i = 0; i < na; i++)
		max = a[i] > max ? a[i] : max;
	for (int i = 0; i < nb; i++)
		max = b[i] > max ? b[i] : max;
	for (int i = 0; i < na; i++)
		sum += expf(a[i] - max);
	for (int i = 0; i < nb; i++)
		sum += expf(b[i] - max);
	const float lse = (float)(max + log(sum));
	for (int i = 0; i < na; i++)
		a[i] -= lse;
	for (int i = 0; i < nb; i++)
		b[i] -= lse;
}

/* The head of an adaptive softmax for rows h[n, d_model]: the log-probs
 * of the shortlist into shortl[n, c0] and of the tail clusters, in the
 * head's order (tail cluster c is entry nc - c), into clus[n, nc]. */
static void
heads(struct txl_out *o, const float *h, int n, float *shortl,
      float *clus)
{
	const struct txl_model *m = o->model;
	const int nc = m->n_out - 1, c0 = m->out[0].hi;
	const float *x = project(o, 0, h, n);

	txl_mat_mul(shortl, x, n, &o->w, false, o->compute);
	txl_add_bias(shortl, o->b, n, c0);
	txl_mat_mul(clus, x, n, &m->cluster_w, false, o->compute);
	txl_add_bias(clus, m->cluster_b, n, nc);
	for (int i = 0; i < n; i++)
		log_softmax2(shortl + (size_t)i * c0, c0, clus + (size_t)i * nc,
			     nc);
}

void
txl_out_head(struct txl_out *o, int r, float *short_lp,
		float *clus_lp)
{
	const struct txl_model *m = o->model;
	const int nc = m->n_out - 1;
	float head[TXL_MAX_CLUSTERS];

	heads(o, o->rows + (size_t)r * m->hp.d_model, 1, short_lp, head);
	/* tail cluster c is head_logprob[-c] */
	for (int c = 1; c <= nc; c++)
		clus_lp[c - 1] = head[nc - c];
}

void
txl_out_tail(struct txl_out *o, int r, int c, float *lp)
{
	const struct txl_out_cluster *oc = &o->model->out[c];
	const float *x = project(o, c, o->rows + (size_t)r *
				 o->model->hp.d_model, 1);

	txl_mat_mul(lp, x, 1, &oc->w, false, o->compute);
	txl_add_bias(lp, oc->b, 1, oc->hi - oc->lo);
	txl_log_softmax(lp, lp, oc->hi - oc->lo);
}

/* An adaptive softmax in full: log p(t) for every token of every row. */
static void
adaptive_logits(struct txl_out *o)
{
	const struct txl_model *m = o->model;
	const int V = m->hp.n_token, n = o->n_rows;
	const int nc = m->n_out - 1, c0 = m->out[0].hi;

	if (n == 1) {
		/* one row, as txl_session_sample() computes it */
		float clus_lp[TXL_MAX_CLUSTERS];

		txl_out_head(o, 0, o->logits, clus_lp);
		for (int c = 1; c <= nc; c++) {
			const struct txl_out_cluster *oc = &m->out[c];
			float *lp = o->logits + oc->lo;

			txl_out_tail(o, 0, c, lp);
			for (int j = 0; j < oc->hi - oc->lo; j++)
				lp[j] = clus_lp[c - 1] + lp[j];
		}
		return;
	}
	/* the heads of all rows at once, the shortlist's log-probs copied
	 * out; the cluster entries stay in o->head after the shortlists */
	float *shortl = o->head, *clus = o->head + (size_t)n * c0;
	const float *x;

	heads(o, o->rows, n, shortl, clus);
	for (int i = 0; i < n; i++)
		memcpy(o->logits + (size_t)i * V, shortl + (size_t)i * c0,
		       sizeof(float) * c0);
	/* each tail for blocks of rows, in the room of the shortlists */
	for (int c = 1; c <= nc; c++) {
		const struct txl_out_cluster *oc = &m->out[c];
		const int size = oc->hi - oc->lo, e = oc->w.cols;
		const int block = (int)((size_t)n * c0 / (size_t)size);

		x = project(o, c, o->rows, n);
		for (int i0 = 0; i0 < n; i0 += block > 1 ? block : 1) {
			const int b = block <= 1 ? 1 : n - i0 < block ? n - i0
				: block;
			float *dst = o->logits + (size_t)i0 * V + oc->lo;
			float *t = b == 1 ? dst : shortl;

			/* n > 1: in float, a block of one row too */
			txl_mat_mul_float(t, x + (size_t)i0 * e, b, &oc->w,
					  false, o->compute);
			txl_add_bias(t, oc->b, b, size);
			for (int i = 0; i < b; i++, dst += V) {
				const float *lt = t + (size_t)i * size;
				const float head = clus[(size_t)(i0 + i) * nc +
							nc - c];
				const float lse = (float)txl_logsumexp(lt, size);
				for (int j = 0; j < size; j++)
					dst[j] = head + (lt[j] - lse);
			}
		}
	}
}

void
txl_out_logits(struct txl_out *o)
{
	const int V = o->model->hp.n_token, rows = o->n_rows;

	if (o->valid || rows == 0)
		return;
	if (o->model->n_out > 1) {
		adaptive_logits(o);
		o->src = NULL;
	} else {
		/* out_layer(h . P) (_compute_logit) */
		const float *src = project(o, 0, o->rows, rows);

		txl_mat_mul(o->logits, src, rows, &o->w, false, o->compute);
		txl_add_bias(o->logits, o->b, rows, V);
		o->src = src;
	}
	o->valid = true;
}

/* The logits of m outputs of one row each of the model's full softmax
 * without projection: the product of txl_out_logits(), each row alone,
 * the weights read once for all. */
static void
logits_each(struct txl_out *const *o, int m, float *act)
{
	const struct txl_model *md = o[0]->model;
	float *y[TXL_EACH_MAX] = { 0 };
	const float *x[TXL_EACH_MAX] = { 0 };

	for (int i = 0; i < m; i++) {
		y[i] = o[i]->logits;
		x[i] = o[i]->rows;
	}
	txl_mul_each(y, x, m, &md->out[0].w, act);
	for (int i = 0; i < m; i++) {
		txl_add_bias(o[i]->logits, md->out[0].b, 1, md->hp.n_token);
		o[i]->src = o[i]->rows;
		o[i]->valid = true;
	}
}

/* The same for m outputs of one row each of an adaptive softmax:
 * adaptive_logits() of one row, the head and every tail cluster's
 * weights read once for all (each row's projections its own: they are
 * matrix-vector products of floats, whose sums depend on the pool). */
static void
adaptive_each(struct txl_out *const *o, int m, float *act)
{
	const struct txl_model *md = o[0]->model;
	const int nc = md->n_out - 1, c0 = md->out[0].hi;
	float head[TXL_EACH_MAX][TXL_MAX_CLUSTERS];
	float *y[TXL_EACH_MAX] = { 0 };
	const float *x[TXL_EACH_MAX] = { 0 };

	/* the heads (txl_out_head()): the shortlist into the row's logits,
	 * the clusters' entries into head */
	for (int i = 0; i < m; i++) {
		x[i] = project(o[i], 0, o[i]->rows, 1);
		y[i] = o[i]->logits;
	}
	txl_mul_each(y, x, m, &o[0]->w, act);
	for (int i = 0; i < m; i++)
		y[i] = head[i];
	txl_mul_each(y, x, m, &md->cluster_w, act);
	for (int i = 0; i < m; i++) {
		txl_add_bias(o[i]->logits, o[0]->b, 1, c0);
		txl_add_bias(head[i], md->cluster_b, 1, nc);
		log_softmax2(o[i]->logits, c0, head[i], nc);
	}
	/* each tail (txl_out_tail()), after its cluster's entry */
	for (int c = 1; c <= nc; c++) {
		const struct txl_out_cluster *oc = &md->out[c];
		const int size = oc->hi - oc->lo;

		for (int i = 0; i < m; i++) {
			x[i] = project(o[i], c, o[i]->rows, 1);
			y[i] = o[i]->logits + oc->lo;
		}
		txl_mul_each(y, x, m, &oc->w, act);
		for (int i = 0; i < m; i++) {
			const float lp_c = head[i][nc - c];

			txl_add_bias(y[i], oc->b, 1, size);
			txl_log_softmax(y[i], y[i], size);
			for (int j = 0; j < size; j++)
				y[i][j] = lp_c + y[i][j];
		}
	}
	for (int i = 0; i < m; i++) {
		o[i]->src = NULL;
		o[i]->valid = true;
	}
}

void
txl_out_logits_many(struct txl_out *const *o, int n, float *act)
{
	/* the outputs of one row of a full softmax without projection, or
	 * (a model has one or the other) of an adaptive softmax */
	void (*each)(struct txl_out *const *, int, float *) =
		o[0]->model->n_out > 1 ? adaptive_each : logits_each;
	struct txl_out *one[TXL_EACH_MAX];
	int m = 0;

	for (int i = 0; i < n; i++) {
		struct txl_out *oi = o[i];

		if (oi->valid || oi->n_rows == 0)
			continue;
		if (oi->n_rows != 1 || oi->own_w || (oi->model->n_out == 1 &&
						      oi->model->out[0].proj.data)) {
			txl_out_logits(oi);
			continue;
		}
		one[m++] = oi;
		if (m == TXL_EACH_MAX) {
			each(one, m, act);
			m = 0;
		}
	}
	if (m)
		each(one, m, act);
}

/* The log-probabilities of targets[i] under rows i < n of an adaptive
 * softmax, computing the head of every row and, per tail cluster, the
 * rows whose target lies in it (ProjectedAdaptiveLogSoftmax.forward). */
static void
score_adaptive(struct txl_out *o, const int32_t *targets, int n,
	       double *lp)
{
	const struct txl_model *m = o->model;
	const int d = m->hp.d_model, nc = m->n_out - 1, c0 = m->out[0].hi;
	float *shortl = o->head, *clus = o->head + (size_t)n * c0;
	const float *x;

	heads(o, o->rows, n, shortl, clus);
	for (int i = 0; i < n; i++) {
		int t = targets[i], c = 0;

		while (t >= m->out[c].hi)
			c++;
		/* head_logprob[-c] */
		lp[i] = c == 0 ? shortl[(size_t)i * c0 + t]
			: clus[(size_t)i * nc + nc - c];
	}
	for (int c = 1; c <= nc; c++) {
		const struct txl_out_cluster *oc = &m->out[c];
		const int size = oc->hi - oc->lo;
		int k = 0;

		/* gather the rows of this cluster's targets into o->tmp; the
		 * tail logits into o->logits, free while not valid */
		for (int i = 0; i < n; i++)
			if (targets[i] >= oc->lo && targets[i] < oc->hi)
				memcpy(o->tmp + (size_t)k++ * d,
				       o->rows + (size_t)i * d,
				       sizeof(float) * d);
		if (k == 0)
			continue;
		x = project(o, c, o->tmp, k);
		/* a segment of several tokens computes in float throughout,
		 * one of one token (generation's products) quantizes */
		if (n > 1)
			txl_mat_mul_float(o->logits, x, k, &oc->w, false,
					  o->compute);
		else
			txl_mat_mul(o->logits, x, k, &oc->w, false, o->compute);
		txl_add_bias(o->logits, oc->b, k, size);
		k = 0;
		for (int i = 0; i < n; i++) {
			if (targets[i] < oc->lo || targets[i] >= oc->hi)
				continue;
			const float *row = o->logits + (size_t)k++ * size;
			lp[i] += row[targets[i] - oc->lo] -
				txl_logsumexp(row, size);
		}
	}
}

struct score {
	const float *logits;
	int V;
	const int32_t *targets;
	double *logprobs;
	bool normalized;
};

static void
score_rows(void *p, int lo, int hi)
{
	const struct score *sc = p;

	for (int i = lo; i < hi; i++) {
		const float *row = sc->logits + (size_t)i * sc->V;
		sc->logprobs[i] = sc->normalized ? row[sc->targets[i]]
			: row[sc->targets[i]] - txl_logsumexp(row, sc->V);
	}
}

enum txl_status
txl_out_score(struct txl_out *o, const int32_t *targets, int n,
		  double *logprobs)
{
	const int V = o->model->hp.n_token;

	if (n > 0 && (!targets || !logprobs))
		return txl_fail(TXL_ERR_INVALID, "score: NULL %s",
				!targets ? "targets" : "logprobs");
	if (n < 0 || n > o->n_rows)
		return txl_fail(TXL_ERR_INVALID, "score: %d targets for %d rows "
				"of output", n, o->n_rows);
	if (n == 0)
		return TXL_OK;
	enum txl_status st = txl_model_check_ids(o->model, targets, n, "score");

	if (st != TXL_OK)
		return st;
	if (o->model->n_out > 1 && !o->valid) {
		score_adaptive(o, targets, n, logprobs);
		return TXL_OK;
	}
	txl_out_logits(o);
	struct score sc = {
		.logits = o->logits, .V = V, .targets = targets,
		.logprobs = logprobs,
		/* an adaptive softmax's logits are log-probabilities */
		.normalized = o->model->n_out > 1,
	};
	txl_pool_rows(score_rows, &sc, n, sc.normalized ? 1 : 2.0 * V);
	return TXL_OK;
}

void
txl_out_reset(struct txl_out *o)
{
	free(o->own_w);
	free(o->own_b);
	o->own_w = o->own_b = NULL;
	o->w = o->model->out[0].w;
	o->b = o->model->out[0].b;
}

enum txl_status
txl_out_adapt(struct txl_out *o, const int32_t *targets, int n, float lr)
{
	const struct txl_hparams *hp = &o->model->hp;
	const int V = hp->n_token, E = hp->d_embed;

	if (o->model->n_out > 1)
		return txl_fail(TXL_ERR_INVALID, "adapt: dynamic evaluation "
				"needs a full softmax; this model's is "
				"adaptive (%d clusters)", o->model->n_out);
	if (!(lr >= 0.0f && lr <= (float)TXL_ADAPT_LR_MAX))
		return txl_fail(TXL_ERR_INVALID, "adapt: learning rate %g is "
				"not a number in [0, %g]", (double)lr,
				TXL_ADAPT_LR_MAX);
	if (n < 1 || !targets || n != o->n_rows)
		return txl_fail(TXL_ERR_INVALID, "adapt: %d targets for %d "
				"rows of logits", n, o->n_rows);
	enum txl_status st = txl_model_check_ids(o->model, targets, n, "adapt");

	if (st != TXL_OK)
		return st;
	txl_out_logits(o);
	if (!o->own_w) {
		/* the session's own copy, never the model's (shared) one;
		 * with tied weights the input embedding stays as it is */
		o->own_w = txl_alloc_floats((size_t)V * E);
		o->own_b = txl_alloc_floats((size_t)V);
		if (!o->own_w || !o->own_b) {
			free(o->own_w);
			free(o->own_b);
			o->own_w = o->own_b = NULL;
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		for (int j = 0; j < V; j++)
			txl_mat_row(o->own_w + (size_t)j * E, &o->w, j);
		memcpy(o->own_b, o->b, sizeof(float) * (size_t)V);
		o->w = (struct txl_mat){ .dtype = TXL_F32, .rows = V,
					 .cols = E, .data = o->own_w };
		o->b = o->own_b;
	}
	/* d(mean NLL)/d logits = softmax - onehot, in place of the logits */
	for (int i = 0; i < n; i++) {
		float *g = o->logits + (size_t)i * V;

		txl_softmax_inplace(g, V);
		g[targets[i]] -= 1.0f;
	}
	/* W -= lr/n G^T X,  b -= lr/n sum_i G_i */
	const float alpha = -lr / (float)n;
	txl_gemm_tn_acc(o->own_w, E, o->logits, V, o->src, E, V, n, E,
			alpha);
	for (int i = 0; i < n; i++) {
		const float *g = o->logits + (size_t)i * V;
		for (int j = 0; j < V; j++)
			o->own_b[j] += alpha * g[j];
	}
	o->n_rows = 0;
	o->valid = false;
	return TXL_OK;
}

void
txl_out_move_adapted(struct txl_out *dst, struct txl_out *src)
{
	if (!src->own_w)
		return;
	txl_out_reset(dst);
	dst->own_w = src->own_w;
	dst->own_b = src->own_b;
	dst->w = src->w;
	dst->b = src->b;
	src->own_w = src->own_b = NULL;
	src->w = src->model->out[0].w;
	src->b = src->model->out[0].b;
}

enum txl_status
txl_out_copy_adapted(struct txl_out *dst, const struct txl_out *src)
{
	const struct txl_hparams *hp = &src->model->hp;
	const size_t V = (size_t)hp->n_token, E = (size_t)hp->d_embed;
	float *w = dst->own_w, *b = dst->own_b;

	if (!src->own_w) {
		txl_out_reset(dst);
		return TXL_OK;
	}
	/* dst's copy reused if it has one */
	if (!w) {
		w = txl_alloc_floats(V * E);
		b = txl_alloc_floats(V);
		if (!w || !b) {
			free(w);
			free(b);
			return txl_fail(TXL_ERR_NOMEM, "out of memory for a "
					"copy of the adapted output layer");
		}
	}
	memcpy(w, src->own_w, sizeof(float) * V * E);
	memcpy(b, src->own_b, sizeof(float) * V);
	dst->own_w = w;
	dst->own_b = b;
	dst->w = src->w;
	dst->w.data = w;
	dst->b = b;
	return TXL_OK;
}
