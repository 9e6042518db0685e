/* SPDX-License-Identifier: MIT */
/*
 * txl-attn-setup.c - the kinds of attention by attn_type, and the life of
 * a session's attention: its position tables (the kind's) and the
 * scratch of its two paths.
 */
#include <stdlib.h>

#include "txl-alloc.h"
#include "txl-attn.h"
#include "txl-log.h"
#include "txl-pool.h"
#include "txl-types.h"

/* The kinds, each in its file (txl-attn-rel.c, txl-attn-abs.c,
 * txl-attn-span.c) */
extern const struct txl_attn_kind txl_attn_rel_partial, txl_attn_rel_learned,
	txl_attn_abs_sinusoid, txl_attn_abs_learned, txl_attn_adaptive_span;

static const struct txl_attn_kind *const kinds[] = {
	[TXL_ATTN_REL_PARTIAL] = &txl_attn_rel_partial,
	[TXL_ATTN_REL_LEARNED] = &txl_attn_rel_learned,
	[TXL_ATTN_ABS_SINUSOID] = &txl_attn_abs_sinusoid,
	[TXL_ATTN_ABS_LEARNED] = &txl_attn_abs_learned,
	[TXL_ATTN_ADAPTIVE_SPAN] = &txl_attn_adaptive_span,
};

const struct txl_attn_kind *
txl_attn_kind(enum txl_attn_type type)
{
	return (size_t)type < sizeof kinds / sizeof *kinds ? kinds[type]
		: NULL;
}

bool
txl_attn_has_memory(const struct txl_hparams *hp)
{
	return txl_attn_kind(hp->attn_type)->memory;
}

bool
txl_model_has_memory(const struct txl_model *m)
{
	return txl_attn_has_memory(&m->hp);
}

const char *
txl_attn_type_name(enum txl_attn_type type)
{
	const struct txl_attn_kind *k = txl_attn_kind(type);

	return k ? k->name : NULL;
}

int
txl_attn_n_dist(const struct txl_model *m, int clamp_len, int mem_len,
		int klen_max)
{
	const struct txl_attn_kind *k = txl_attn_kind(m->hp.attn_type);

	return k->n_dist ? k->n_dist(m, clamp_len, mem_len, klen_max) : 0;
}

enum txl_status
txl_attn_check(const struct txl_model *m, const struct txl_session_params *p)
{
	const struct txl_attn_kind *k = txl_attn_kind(m->hp.attn_type);

	return k->check ? k->check(m, p) : TXL_OK;
}

double
txl_attn_r_bytes(const struct txl_model *m, int n_dist, enum txl_dtype kv_dt)
{
	const struct txl_hparams *hp = &m->hp;
	const struct txl_attn_kind *k = txl_attn_kind(hp->attn_type);
	/* the tables in kv_dt, r_bias in floats */
	const double row = (double)txl_row_bytes(kv_dt, hp->d_head);

	if (!k->relative)
		return 0;
	if (k->r_shared)
		return row * n_dist;
	return (double)hp->n_layer * n_dist * hp->n_head *
		(row + (k->r_bias ? 4.0 : 0.0));
}

double
txl_attn_bytes(const struct txl_hparams *hp, int seg_len, int klen_max,
	       int n_dist, enum txl_dtype kv_dt, int threads)
{
	return txl_attn_few_bytes(hp, seg_len, klen_max, kv_dt) +
		txl_attn_seg_bytes(hp, seg_len, klen_max, n_dist, kv_dt,
				   threads);
}

enum txl_status
txl_attn_init(struct txl_attn *a, const struct txl_model *m,
	      const struct txl_attn_shape *shape, const struct txl_kv *kv)
{
	const struct txl_hparams *hp = &m->hp;
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	enum txl_status st;

	*a = (struct txl_attn){
		.model = m, .kind = txl_attn_kind(hp->attn_type),
		.shape = *shape,
		.n_dist = txl_attn_n_dist(m, shape->clamp_len, shape->mem_len,
					  shape->klen_max),
		.spans = m->spans,
	};
	a->qkv = txl_alloc_floats((size_t)shape->seg_len * 3 * hd);
	if (!a->qkv)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	if ((st = txl_attn_few_init(a, kv->dt)) != TXL_OK ||
	    (st = txl_attn_seg_init(a, kv->dt, txl_pool_threads())) != TXL_OK)
		return st;
	if (a->kind->relative) {
		a->r = calloc((size_t)hp->n_layer, sizeof *a->r);
		if (!a->r)
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	return a->kind->init ? a->kind->init(a, kv) : TXL_OK;
}

void
txl_attn_free(struct txl_attn *a)
{
	if (!a->model)
		return;
	for (int l = 0; l < a->model->hp.n_layer; l++) {
		/* a shared table once */
		if (a->r && (l == 0 || !a->kind->r_shared))
			free(a->r[l]);
		if (a->r_bias)
			free(a->r_bias[l]);
	}
	free(a->r);
	free(a->r_bias);
	free(a->pos);
	free(a->qkv);
	free(a->seg);
	free(a->fq);
	free(a->fqa);
	free(a->fsc);
	free(a->part);
	free(a->units);
	*a = (struct txl_attn){ 0 };
}
