/* SPDX-License-Identifier: MIT */
/*
 * txl-bind.c - a model's weights bound to its file's tensors: every
 * tensor the hyperparameters call for, checked by name, shape, dtype and
 * finiteness, used in place where it can be (weight matrices in the
 * dtype they are stored in), copied or widened where not.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "txl-bind.h"
#include "txl-log.h"
#include "txl-products.h"
#include "txl-repack.h"
#include "txl-types.h"

/* Every block scale of the block-type tensor t finite: a NaN or inf
 * scale makes every product with its block NaN, and the logits NaN,
 * which no sampler can choose from (the converter refuses non-finite
 * weights; this is a damaged or crafted file). */
static enum txl_status
check_scales(const struct txl_file *f, const struct txl_tensor_info *t)
{
	const size_t block = txl_type(t->dtype)->bytes;
	bool (*const ok)(const void *) = txl_type(t->dtype)->block_ok;
	const uint8_t *p = f->map + t->begin;
	const size_t n = (t->end - t->begin) / block;

	for (size_t i = 0; i < n; i++, p += block) {
		uint16_t d;

		memcpy(&d, p, sizeof d);	/* first in every block type */
		if ((d & 0x7c00) == 0x7c00)
			return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' is %s "
					"with a non-finite scale (%s) in block "
					"%zu: a damaged file", f->path, t->name,
					txl_dtype_name(t->dtype),
					d & 0x3ff ? "NaN" : "inf", i);
		if (ok && !ok(p))
			return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' is %s "
					"with a scale out of range in block "
					"%zu: a damaged file",
					f->path, t->name,
					txl_dtype_name(t->dtype), i);
	}
	return TXL_OK;
}

/* The index of the first non-finite value (NaN, inf) of the n values of
 * F32, F16 or BF16 at p, or n if none: the magnitudes' maximum over
 * chunks (a loop the compiler vectorizes), against the exponent all ones;
 * a chunk past it searched again for the index. */
static size_t
first_nonfinite(const void *p, enum txl_dtype dt, size_t n)
{
	enum { CHUNK = 4096 };

	for (size_t i = 0; i < n; i += CHUNK) {
		const size_t len = n - i < CHUNK ? n - i : CHUNK;
		uint32_t top = 0, inf;

		if (dt == TXL_F32) {
			const uint32_t *x = (const uint32_t *)p + i;

			for (size_t k = 0; k < len; k++) {
				uint32_t v;

				memcpy(&v, x + k, sizeof v);
				v &= 0x7fffffff;
				top = v > top ? v : top;
			}
			inf = 0x7f800000;
		} else {
			const uint16_t *x = (const uint16_t *)p + i;

			for (size_t k = 0; k < len; k++) {
				uint16_t v;

				memcpy(&v, x + k, sizeof v);
				v &= 0x7fff;
				top = v > top ? v : top;
			}
			inf = dt == TXL_F16 ? 0x7c00 : 0x7f80;
		}
		if (top < inf)
			continue;
		for (size_t k = 0; k < len; k++) {
			uint32_t v;

			if (dt == TXL_F32) {
				memcpy(&v, (const uint32_t *)p + i + k, 4);
				v &= 0x7fffffff;
			} else {
				uint16_t h;

				memcpy(&h, (const uint16_t *)p + i + k, 2);
				v = h & 0x7fffu;
			}
			if (v >= inf)
				return i + k;
		}
	}
	return n;
}

/* Every value of the float tensor t finite: NaN or inf in a weight makes
 * the logits NaN, which no sampler can choose from (the converter refuses
 * non-finite weights; this is a damaged or crafted file).  One pass over
 * the data, at every load: a mapped file's pages are all read once. */
static enum txl_status
check_floats(const struct txl_file *f, const struct txl_tensor_info *t,
	     size_t numel)
{
	const size_t i = first_nonfinite(f->map + t->begin, t->dtype, numel);
	float v;

	if (i == numel)
		return TXL_OK;
	txl_widen(&v, f->map + t->begin + i * (t->dtype == TXL_F32 ? 4 : 2),
		  t->dtype, 1);
	return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' is %s with a "
			"non-finite value (%s) at element %zu: a damaged file",
			f->path, t->name, txl_dtype_name(t->dtype),
			isnan(v) ? "NaN" : "inf", i);
}

/* Bind one tensor: check its shape and dtype, and point *out at its data.
 * A weight matrix (as_floats false) is used in the dtype it is stored in
 * (any the kernels compute with: they compute with it as stored);
 * anything else as floats (stored as F32, F16 or BF16).  In place needs
 * 64-byte aligned F32 (for BLAS) or 2-byte aligned compact data; the rest
 * is copied or widened into *arena (advancing it).  With arena NULL (the
 * sizing pass) it only checks, adding the bytes the arena will need to
 * *need. */
static enum txl_status
bind(struct txl_model *m, const char *name, int ndim, const int64_t *shape,
     bool as_floats, const void **out, enum txl_dtype *dtype,
     uint8_t **arena, size_t *need)
{
	const struct txl_file *f = &m->file;
	const struct txl_tensor_info *t = txl_file_find(f, name);
	char want[96] = "", got[96] = "";
	int64_t numel = 1;

	if (!t)
		return txl_fail(TXL_ERR_FORMAT, "%s: missing tensor '%s'",
				f->path, name);
	m->file.tensors[t - f->tensors].used = true;
	for (int i = 0; i < ndim; i++) {
		numel *= shape[i];
		snprintf(want + strlen(want), sizeof want - strlen(want),
			 "%s%lld", i ? ", " : "", (long long)shape[i]);
	}
	for (int i = 0; i < t->ndim; i++)
		snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld",
			 i ? ", " : "", (long long)t->shape[i]);
	if (t->ndim != ndim || memcmp(t->shape, shape, sizeof *shape *
				      (size_t)ndim) != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has shape [%s], "
				"expected [%s]", f->path, name, got, want);
	if (!txl_dtype_computable(t->dtype) ||
	    (as_floats && txl_dtype_blocked(t->dtype))) {
		char types[96];

		txl_dtype_names(types, sizeof types, true, !as_floats);
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has dtype %s, "
				"expected %s", f->path, name,
				txl_dtype_name(t->dtype), types);
	}

	const uint8_t *src = f->map + t->begin;
	const size_t bytes = t->end - t->begin;
	/* once, in the checking pass */
	if (!arena) {
		enum txl_status st = txl_dtype_blocked(t->dtype)
			? check_scales(f, t)
			: t->dtype == TXL_F32 || t->dtype == TXL_F16 ||
			  t->dtype == TXL_BF16
			? check_floats(f, t, (size_t)numel) : TXL_OK;

		if (st != TXL_OK)
			return st;
	}
	const bool floats = as_floats || t->dtype == TXL_F32;
	const size_t align = floats ? 64 : 2;

	*dtype = floats ? TXL_F32 : t->dtype;
	if ((!floats || t->dtype == TXL_F32) && (uintptr_t)src % align == 0) {
		*out = src;
		return TXL_OK;
	}
	/* every copy 64-byte aligned as well */
	const size_t len = floats ? (size_t)numel * sizeof(float) : bytes;
	if (!arena) {
		*need += (len + 63) / 64 * 64;
		return TXL_OK;
	}
	if (floats)
		txl_widen((float *)(void *)*arena, src, t->dtype,
			  (size_t)numel);
	else
		memcpy(*arena, src, bytes);
	*out = *arena;
	*arena += (len + 63) / 64 * 64;
	return TXL_OK;
}

/* The state of binding every tensor the hyperparameters call for.  With
 * arena NULL it only checks them and counts the bytes the arena will need
 * (need) and the parameters (count). */
struct binder {
	struct txl_model *m;
	uint8_t **arena;
	size_t need;
	int64_t count;
};

/* Bind the tensor named by the printf-style fmt, of shape shape[ndim]:
 * as floats, or (as_floats false) a matrix in its stored dtype. */
static enum txl_status
bind_v(struct binder *b, const void **out, enum txl_dtype *dtype,
       bool as_floats, int ndim, const int64_t *shape, const char *fmt,
       va_list ap)
{
	char name[128];
	enum txl_status st;
	int64_t n = 1;

	vsnprintf(name, sizeof name, fmt, ap);
	for (int k = 0; k < ndim; k++)
		n *= shape[k];
	if ((st = bind(b->m, name, ndim, shape, as_floats, out, dtype,
		       b->arena, &b->need)) != TXL_OK)
		return st;
	b->count += n;
	return TXL_OK;
}

/* A tensor of floats, any shape. */
static enum txl_status __attribute__((format(printf, 5, 6)))
bind_floats(struct binder *b, const float **out, int ndim,
	    const int64_t *shape, const char *fmt, ...)
{
	const void *p = NULL;
	enum txl_dtype dt;
	enum txl_status st;
	va_list ap;

	va_start(ap, fmt);
	st = bind_v(b, &p, &dt, true, ndim, shape, fmt, ap);
	va_end(ap);
	*out = p;
	return st;
}

#define SHAPE(...) (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) /        \
			 sizeof(int64_t)), (const int64_t[]){ __VA_ARGS__ }

/* A matrix that enters matrix-vector products (generation), of a type
 * with an interleaved form (txl_interleaves()), gets an interleaved copy in the
 * arena as well (txl_interleave(): as many bytes as the stored rows, read
 * by kernels that take half the instructions); the stored rows stay in
 * use for everything else. */
static void
interleave(struct binder *b, struct txl_mat *w)
{
	/* the arena's copies stay 64-byte aligned, as bind()'s */
	const size_t len = (txl_il_bytes(w->dtype, w->rows, w->cols) + 63) /
		64 * 64;

	if (!txl_interleaves(w->dtype))
		return;
	if (!b->arena) {
		b->need += len;
		return;
	}
	txl_interleave(*b->arena, w->dtype, w->data, w->rows, w->cols);
	w->il = *b->arena;
	*b->arena += len;
}

/* How a matrix is bound: in its stored dtype, multiplied through
 * txl_mat_mul(); the same and an interleaved copy (interleave()), for a
 * matrix of matrix-vector products; or as floats, a projection (d_model,
 * d_emb), used as P . e at the input and as h . P at the output, which
 * BLAS reads transposed. */
enum mat_use { MAT_STORED, MAT_GEMV, MAT_PROJ };

static enum txl_status __attribute__((format(printf, 6, 7)))
bind_matrix(struct binder *b, struct txl_mat *out, int64_t rows,
	    int64_t cols, enum mat_use use, const char *fmt, ...)
{
	const void *p = NULL;
	enum txl_dtype dt;
	enum txl_status st;
	va_list ap;

	va_start(ap, fmt);
	st = bind_v(b, &p, &dt, use == MAT_PROJ, SHAPE(rows, cols), fmt, ap);
	va_end(ap);
	if (st != TXL_OK)
		return st;
	*out = (struct txl_mat){ .dtype = dt, .rows = (int)rows,
				 .cols = (int)cols, .data = p };
	if (use == MAT_GEMV)
		interleave(b, out);
	return TXL_OK;
}

#define bind_mat(b, out, rows, cols, ...)				\
	bind_matrix(b, out, rows, cols, MAT_STORED, __VA_ARGS__)
#define bind_gemv_mat(b, out, rows, cols, ...)				\
	bind_matrix(b, out, rows, cols, MAT_GEMV, __VA_ARGS__)
#define bind_proj(b, out, rows, cols, ...)				\
	bind_matrix(b, out, rows, cols, MAT_PROJ, __VA_ARGS__)

/* The adaptive input (AdaptiveEmbedding): one table for all ids with
 * div_val 1 (projected only when d_embed != d_model), else one table and
 * one projection per cluster. */
static enum txl_status
bind_input(struct binder *b)
{
	struct txl_model *m = b->m;
	const struct txl_hparams *hp = &m->hp;
	const int64_t M = hp->d_model, E = hp->d_embed;
	enum txl_status st;

	if (hp->div_val == 1) {
		struct txl_emb_cluster *c = &m->emb[0];

		m->n_emb = 1;
		c->lo = 0;
		c->hi = hp->n_token;
		c->proj = (struct txl_mat){ 0 };
		if ((st = bind_mat(b, &c->table, hp->n_token, E,
				   "word_emb.emb_layers.0.weight")))
			return st;
		if ((E != M || m->proj_same_dim) &&
		    (st = bind_proj(b, &c->proj, M, E,
				    "word_emb.emb_projs.0")))
			return st;
		return TXL_OK;
	}
	m->n_emb = hp->n_cutoffs + 1;
	for (int i = 0, d = hp->d_embed; i < m->n_emb; i++, d /= hp->div_val) {
		struct txl_emb_cluster *c = &m->emb[i];

		c->lo = i ? hp->cutoffs[i - 1] : 0;
		c->hi = i < hp->n_cutoffs ? hp->cutoffs[i] : hp->n_token;
		if ((st = bind_mat(b, &c->table, c->hi - c->lo, d,
				   "word_emb.emb_layers.%d.weight", i)) ||
		    (st = bind_proj(b, &c->proj, M, d, "word_emb.emb_projs.%d",
				    i)))
			return st;
	}
	return TXL_OK;
}

/* The output layer (ProjectedAdaptiveLogSoftmax), tied to the input as
 * MemTransformerLM ties it: tie_weight shares the tables (div_val 1: the
 * one table, of which cluster i is rows [lo, hi)), tie_projs[i] the
 * projection of cluster i (div_val 1: emb_projs.0, if there is one). */
static enum txl_status
bind_output(struct binder *b)
{
	struct txl_model *m = b->m;
	const struct txl_hparams *hp = &m->hp;
	const int64_t M = hp->d_model, E = hp->d_embed;
	struct txl_mat w1 = { 0 };
	const float *b1 = NULL;
	enum txl_status st;

	m->n_out = hp->n_cutoffs + 1;
	if (hp->div_val == 1) {
		if (hp->tie_weight) {
			w1 = m->emb[0].table;
			interleave(b, &w1);
		} else if ((st = bind_gemv_mat(b, &w1, hp->n_token, E,
					       "crit.out_layers.0.weight"))) {
			return st;
		}
		if ((st = bind_floats(b, &b1, SHAPE(hp->n_token),
				      "crit.out_layers.0.bias")))
			return st;
	}
	for (int i = 0, d = hp->d_embed; i < m->n_out; i++, d /= hp->div_val) {
		struct txl_out_cluster *c = &m->out[i];
		const struct txl_emb_cluster *e = &m->emb[hp->div_val == 1 ? 0 : i];

		c->lo = i ? hp->cutoffs[i - 1] : 0;
		c->hi = i < hp->n_cutoffs ? hp->cutoffs[i] : hp->n_token;
		c->proj = (struct txl_mat){ 0 };
		if (hp->div_val == 1) {
			c->w = txl_mat_rows(&w1, c->lo, c->hi - c->lo);
			c->b = b1 ? b1 + c->lo : NULL;
			if (E == M && !m->proj_same_dim)
				continue;
			if (hp->tie_projs[i])
				c->proj = e->proj;
			else if ((st = bind_proj(b, &c->proj, M, E,
						 "crit.out_projs.%d", i)))
				return st;
			continue;
		}
		if (hp->tie_weight) {
			c->w = e->table;
			interleave(b, &c->w);
		} else if ((st = bind_gemv_mat(b, &c->w, c->hi - c->lo, d,
					       "crit.out_layers.%d.weight",
					       i))) {
			return st;
		}
		if ((st = bind_floats(b, &c->b, SHAPE(c->hi - c->lo),
				      "crit.out_layers.%d.bias", i)))
			return st;
		if (hp->tie_projs[i])
			c->proj = e->proj;
		else if ((st = bind_proj(b, &c->proj, M, d,
					 "crit.out_projs.%d", i)))
			return st;
	}
	m->cluster_w = (struct txl_mat){ 0 };
	m->cluster_b = NULL;
	if (hp->n_cutoffs > 0 &&
	    ((st = bind_mat(b, &m->cluster_w, hp->n_cutoffs, E,
			    "crit.cluster_weight")) ||
	     (st = bind_floats(b, &m->cluster_b, SHAPE(hp->n_cutoffs),
			       "crit.cluster_bias"))))
		return st;
	return TXL_OK;
}

/* The attention's own tensors, shared by the layers or per layer:
 * attn_type 0: r_w_bias, r_r_bias ([n_layer] x n_head x d_head with
 * untie_r) and per layer qkv_net, r_net; 1: r_emb, r_w_bias, r_bias and
 * qkv_net; 2: q_net, kv_net; 3: r_emb, q_net, kv_net; 4: key_pe, and per
 * layer qkv_net and current_val (the spans). */
static enum txl_status
bind_attention(struct binder *b)
{
	struct txl_model *m = b->m;
	const struct txl_hparams *hp = &m->hp;
	const int64_t L = hp->n_layer, H = hp->n_head, D = hp->d_head;
	const int64_t M = hp->d_model, K = hp->max_klen, HD = H * D;
	const bool qkv = hp->attn_type == TXL_ATTN_REL_PARTIAL ||
		hp->attn_type == TXL_ATTN_REL_LEARNED ||
		hp->attn_type == TXL_ATTN_ADAPTIVE_SPAN;
	const bool span = hp->attn_type == TXL_ATTN_ADAPTIVE_SPAN;
	const float *rwb = NULL, *rrb = NULL, *remb = NULL, *rb = NULL;
	bool per_layer = hp->untie_r || hp->attn_type == TXL_ATTN_REL_LEARNED;
	enum txl_status st = TXL_OK;

	const int64_t bias[] = { L, H, D };	/* [L] x H x D */
	const int nb = per_layer ? 3 : 2;

	switch (hp->attn_type) {
	case TXL_ATTN_REL_PARTIAL:
		if ((st = bind_floats(b, &rwb, nb, bias + 3 - nb, "r_w_bias")) ||
		    (st = bind_floats(b, &rrb, nb, bias + 3 - nb, "r_r_bias")))
			return st;
		break;
	case TXL_ATTN_REL_LEARNED:
		if ((st = bind_floats(b, &remb, SHAPE(L, K, H, D), "r_emb")) ||
		    (st = bind_floats(b, &rwb, SHAPE(L, H, D), "r_w_bias")) ||
		    (st = bind_floats(b, &rb, SHAPE(L, K, H), "r_bias")))
			return st;
		break;
	case TXL_ATTN_ABS_SINUSOID:
		break;
	case TXL_ATTN_ABS_LEARNED:
		if ((st = bind_floats(b, &remb, SHAPE(L, K, H, D), "r_emb")))
			return st;
		break;
	case TXL_ATTN_ADAPTIVE_SPAN:
		if ((st = bind_floats(b, &m->key_pe, SHAPE(1, D, hp->attn_span),
				      "key_pe")))
			return st;
		break;
	}
	for (int l = 0; l < hp->n_layer; l++) {
		struct txl_layer *ly = &m->layers[l];
		size_t off = per_layer ? (size_t)l * (size_t)HD : 0;

		ly->r_w_bias = rwb ? rwb + off : NULL;
		ly->r_r_bias = rrb ? rrb + off : NULL;
		ly->r_emb = remb ? remb + (size_t)l * (size_t)(K * HD) : NULL;
		ly->r_bias = rb ? rb + (size_t)l * (size_t)(K * H) : NULL;
		if (qkv &&
		    (st = bind_gemv_mat(b, &ly->qkv, 3 * HD, M,
					"layers.%d.dec_attn.qkv_net.weight", l)))
			return st;
		if (span &&
		    (st = bind_floats(b, &ly->span, SHAPE(H),
				      "layers.%d.dec_attn.current_val", l)))
			return st;
		if (hp->attn_type == TXL_ATTN_REL_PARTIAL &&
		    (st = bind_mat(b, &ly->r_net, HD, M,
				   "layers.%d.dec_attn.r_net.weight", l)))
			return st;
		if (!qkv &&
		    ((st = bind_gemv_mat(b, &ly->q_net, HD, M,
					 "layers.%d.dec_attn.q_net.weight", l)) ||
		     (st = bind_gemv_mat(b, &ly->kv_net, 2 * HD, M,
					 "layers.%d.dec_attn.kv_net.weight",
					 l))))
			return st;
	}
	return TXL_OK;
}

/* What every layer has: o_net and the attention's LayerNorm, and the
 * position-wise feed-forward. */
static enum txl_status
bind_layer(struct binder *b, int l)
{
	const struct txl_hparams *hp = &b->m->hp;
	struct txl_layer *ly = &b->m->layers[l];
	const int64_t M = hp->d_model, I = hp->d_inner;
	const int64_t HD = (int64_t)hp->n_head * hp->d_head;
	enum txl_status st;

	if ((st = bind_gemv_mat(b, &ly->o_net, M, HD,
				"layers.%d.dec_attn.o_net.weight", l)) ||
	    (st = bind_floats(b, &ly->ln_attn_g, SHAPE(M),
			      "layers.%d.dec_attn.layer_norm.weight", l)) ||
	    (st = bind_floats(b, &ly->ln_attn_b, SHAPE(M),
			      "layers.%d.dec_attn.layer_norm.bias", l)) ||
	    (st = bind_gemv_mat(b, &ly->ff1, I, M,
				"layers.%d.pos_ff.CoreNet.0.weight", l)) ||
	    (st = bind_floats(b, &ly->ff1_b, SHAPE(I),
			      "layers.%d.pos_ff.CoreNet.0.bias", l)) ||
	    (st = bind_gemv_mat(b, &ly->ff2, M, I,
				"layers.%d.pos_ff.CoreNet.3.weight", l)) ||
	    (st = bind_floats(b, &ly->ff2_b, SHAPE(M),
			      "layers.%d.pos_ff.CoreNet.3.bias", l)) ||
	    (st = bind_floats(b, &ly->ln_ff_g, SHAPE(M),
			      "layers.%d.pos_ff.layer_norm.weight", l)) ||
	    (st = bind_floats(b, &ly->ln_ff_b, SHAPE(M),
			      "layers.%d.pos_ff.layer_norm.bias", l)))
		return st;
	return TXL_OK;
}

/* Visit every weight tensor the hyperparameters call for, binding it.
 * With arena NULL it only checks them and counts the bytes of the weights
 * that need copying (*n_copy) and the parameters (m->n_params). */
enum txl_status
txl_model_bind_all(struct txl_model *m, uint8_t **arena, size_t *n_copy)
{
	struct binder b = { .m = m, .arena = arena };
	enum txl_status st;

	if ((st = bind_input(&b)) || (st = bind_output(&b)) ||
	    (st = bind_attention(&b)))
		return st;
	for (int l = 0; l < m->hp.n_layer; l++)
		if ((st = bind_layer(&b, l)))
			return st;
	m->n_params = b.count;
	*n_copy = b.need;
	return TXL_OK;
}

/* Every tensor in the file must be one the model uses (bind() marks
 * them): a stray one means the file was written for another
 * architecture. */
enum txl_status
txl_model_check_strays(const struct txl_model *m)
{
	const struct txl_file *f = &m->file;

	for (int i = 0; i < f->n_tensors; i++) {
		const struct txl_tensor_info *t = &f->tensors[i];
		bool ok = t->used || strcmp(t->name, "tokenizer.model") == 0;

		if (strncmp(t->name, "__pad__.", 8) == 0)
			ok = t->dtype == TXL_U8 && t->ndim == 1;
		if (!ok)
			return txl_fail(TXL_ERR_FORMAT, "%s: unexpected tensor "
					"'%s' for these hyperparameters",
					f->path, t->name);
	}
	return TXL_OK;
}
