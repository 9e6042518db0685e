/* SPDX-License-Identifier: MIT */
/*
 * txl-model.c - a Transformer-XL model from a validated container: the
 * hyperparameters from "__metadata__", every tensor checked against them
 * by name, shape and dtype, the weights used in place (weight matrices in
 * the dtype they are stored in).  Its tokenizer is txl-tokenizer.c's, and
 * txl-load.c puts the two together.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "txl-alloc.h"
#include "txl-model.h"
#include "txl-log.h"
#include "txl-products.h"
#include "txl-repack.h"
#include "txl-types.h"
#include "txl-limits.h"

#define FORMAT_NAME "txlgen-model"
/* Version 2 adds emb_scale and proj_same_dim (read_compute); a reader of
 * 2 reads 1, and a file that needs them says 2, so that an older reader
 * refuses it rather than compute it otherwise. */
#define FORMAT_VERSION 2

/* Limits that keep every size computation far from overflow
 * (txl-limits.h: the converter reads them too). */
#define MAX_DIM TXL_MAX_DIM
#define MAX_TOKENS TXL_MAX_TOKENS
#define MAX_LAYERS TXL_MAX_LAYERS
#define MAX_SEG_LEN TXL_SEG_LEN_MAX	/* as txl_session_new allows */

static bool
parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool
parse_bool(const char *s, bool *out)
{
	if (!s)
		return false;
	if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0)
		*out = true;
	else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
		*out = false;
	else
		return false;
	return true;
}

/* Read one integer hyperparameter into *out, or fail naming it. */
static enum txl_status
meta_int(const struct txl_file *f, const char *key, long lo, long hi,
	 int *out)
{
	const char *s = txl_file_meta(f, key);
	long v;

	if (!s)
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata lacks '%s'",
				f->path, key);
	if (!parse_int(s, lo, hi, &v))
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata '%s' is '%.40s', "
				"expected an integer in [%ld, %ld]", f->path,
				key, s, lo, hi);
	*out = (int)v;
	return TXL_OK;
}

static enum txl_status
meta_bool(const struct txl_file *f, const char *key, bool *out)
{
	const char *s = txl_file_meta(f, key);

	if (!s)
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata lacks '%s'",
				f->path, key);
	if (!parse_bool(s, out))
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata '%s' is '%.40s', "
				"expected true or false", f->path, key, s);
	return TXL_OK;
}

/* A metadata list of integers (cutoffs) or of booleans (tie_projs): JSON
 * text, e.g. "[20000, 40000, 200000]" or "[false, true]".  Absent: empty.
 * Integers must lie in [lo, hi]; at most max entries. */
static enum txl_status
meta_list(const struct txl_file *f, const char *key, bool bools, long lo,
	  long hi, int max, int *vals, bool *flags, int *n)
{
	const char *s = txl_file_meta(f, key);
	enum txl_status st = TXL_OK;
	const cJSON *item;
	cJSON *arr;
	int k = 0;

	*n = 0;
	if (!s)
		return TXL_OK;
	arr = cJSON_Parse(s);
	if (!cJSON_IsArray(arr)) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: metadata '%s' is '%.40s', "
			      "expected a JSON list of %s", f->path, key, s,
			      bools ? "true/false" : "integers");
		goto out;
	}
	cJSON_ArrayForEach(item, arr) {
		if (k == max) {
			st = txl_fail(TXL_ERR_FORMAT, "%s: metadata '%s' has "
				      "more than %d entries", f->path, key, max);
			goto out;
		}
		if (bools && cJSON_IsBool(item)) {
			flags[k++] = cJSON_IsTrue(item);
		} else if (!bools && cJSON_IsNumber(item) &&
			   item->valuedouble >= (double)lo &&
			   item->valuedouble <= (double)hi &&
			   item->valuedouble == (double)(long)item->valuedouble) {
			vals[k++] = (int)item->valuedouble;
		} else {
			st = txl_fail(TXL_ERR_FORMAT, "%s: metadata '%s' is "
				      "'%.40s': entry %d is not %s", f->path,
				      key, s, k, bools ? "true or false" :
				      "an integer in range");
			goto out;
		}
	}
	*n = k;
out:
	cJSON_Delete(arr);
	return st;
}

/* The adaptive input and softmax: cutoffs, div_val, tie_projs. */
static enum txl_status
read_clusters(const struct txl_file *f, struct txl_hparams *hp)
{
	enum txl_status st;
	int n_ties;

	if ((st = meta_int(f, "div_val", 1, MAX_DIM, &hp->div_val)) ||
	    (st = meta_list(f, "cutoffs", false, 1, hp->n_token - 1,
			    TXL_MAX_CLUSTERS - 1, hp->cutoffs, NULL,
			    &hp->n_cutoffs)) ||
	    (st = meta_list(f, "tie_projs", true, 0, 0, TXL_MAX_CLUSTERS,
			    NULL, hp->tie_projs, &n_ties)))
		return st;
	for (int i = 1; i < hp->n_cutoffs; i++)
		if (hp->cutoffs[i] <= hp->cutoffs[i - 1])
			return txl_fail(TXL_ERR_FORMAT, "%s: cutoffs %d and %d "
					"are not increasing", f->path,
					hp->cutoffs[i - 1], hp->cutoffs[i]);
	/* the original ties the projections it has an entry for; the file
	 * has one per cluster (absent: none tied) */
	if (txl_file_meta(f, "tie_projs") && n_ties != hp->n_cutoffs + 1)
		return txl_fail(TXL_ERR_FORMAT, "%s: tie_projs has %d entries, "
				"expected one per cluster (%d)", f->path, n_ties,
				hp->n_cutoffs + 1);
	/* d_embed / div_val^i dimensions for cluster i, none of them 0 */
	long d = hp->d_embed;
	for (int i = 1; i <= hp->n_cutoffs && hp->div_val > 1; i++) {
		d /= hp->div_val;
		if (d < 1)
			return txl_fail(TXL_ERR_FORMAT, "%s: div_val %d leaves "
					"cluster %d of d_embed %d no dimension",
					f->path, hp->div_val, i, hp->d_embed);
	}
	return TXL_OK;
}

/* The attention: attn_type and the size of its position tables. */
static enum txl_status
read_attention(const struct txl_file *f, struct txl_hparams *hp)
{
	enum txl_status st;
	int type;

	if ((st = meta_int(f, "attn_type", TXL_ATTN_REL_PARTIAL,
			   TXL_ATTN_ADAPTIVE_SPAN, &type)))
		return st;
	hp->attn_type = (enum txl_attn_type)type;
	hp->max_klen = 0;
	hp->attn_span = hp->span_ramp = 0;
	if (hp->attn_type == TXL_ATTN_ADAPTIVE_SPAN &&
	    ((st = meta_int(f, "attn_span", 1, TXL_MAX_SPAN,
			    &hp->attn_span)) ||
	     (st = meta_int(f, "span_ramp", 1, TXL_MAX_SPAN,
			    &hp->span_ramp))))
		return st;
	if (hp->attn_type == TXL_ATTN_REL_LEARNED ||
	    hp->attn_type == TXL_ATTN_ABS_LEARNED) {
		if ((st = meta_int(f, "max_klen", 1, TXL_MAX_KLEN,
				   &hp->max_klen)))
			return st;
		if ((double)hp->n_layer * hp->max_klen * hp->n_head *
		    hp->d_head > (double)INT32_MAX)
			return txl_fail(TXL_ERR_FORMAT, "%s: max_klen %d makes "
					"r_emb too large", f->path,
					hp->max_klen);
	}
	/* attn_type 3 adds r_emb rows (n_head x d_head) to the layer input */
	if (hp->attn_type == TXL_ATTN_ABS_LEARNED &&
	    hp->n_head * hp->d_head != hp->d_model)
		return txl_fail(TXL_ERR_FORMAT, "%s: attn_type 3 needs n_head * "
				"d_head (%d x %d) equal to d_model %d", f->path,
				hp->n_head, hp->d_head, hp->d_model);
	return TXL_OK;
}

/* How the code that wrote the checkpoint computes where the TensorFlow
 * code differs from the PyTorch code (txlgen-model(5)): the LayerNorm
 * epsilon (metadata layer_norm_eps, a number in (0, 1]; absent: the
 * PyTorch code's 1e-5) and the same_length mask (same_length_mask
 * "pytorch", the default, or "tf": one position more). */
static enum txl_status
read_compute(const struct txl_file *f, struct txl_model *m)
{
	const char *s = txl_file_meta(f, "layer_norm_eps");
	enum txl_status st;

	m->ln_eps = 1e-5;
	if (s) {
		char *end;
		double v;

		errno = 0;
		v = strtod(s, &end);
		if (end == s || *end || errno || !(v > 0 && v <= 1))
			return txl_fail(TXL_ERR_FORMAT, "%s: metadata "
					"'layer_norm_eps' is '%.40s', expected "
					"a number in (0, 1]", f->path, s);
		m->ln_eps = v;
	}
	m->emb_scale = true;
	m->proj_same_dim = false;
	if ((txl_file_meta(f, "emb_scale") &&
	     (st = meta_bool(f, "emb_scale", &m->emb_scale))) ||
	    (txl_file_meta(f, "proj_same_dim") &&
	     (st = meta_bool(f, "proj_same_dim", &m->proj_same_dim))))
		return st;
	if (m->proj_same_dim && m->hp.div_val != 1)
		return txl_fail(TXL_ERR_FORMAT, "%s: proj_same_dim is for "
				"div_val 1 (with div_val %d every cluster is "
				"projected)", f->path, m->hp.div_val);
	s = txl_file_meta(f, "same_length_mask");
	m->same_length_tf = false;
	if (s) {
		if (strcmp(s, "tf") == 0)
			m->same_length_tf = true;
		else if (strcmp(s, "pytorch") != 0)
			return txl_fail(TXL_ERR_FORMAT, "%s: metadata "
					"'same_length_mask' is '%.40s', "
					"expected 'pytorch' or 'tf'", f->path,
					s);
	}
	return TXL_OK;
}

enum txl_status
txl_model_read_hparams(const struct txl_file *f, struct txl_hparams *hp)
{
	const char *fmt = txl_file_meta(f, "format");
	const char *s;
	enum txl_status st;
	int version;

	if (!fmt || strcmp(fmt, FORMAT_NAME) != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: not a txlgen model (metadata "
				"'format' is %s%.40s%s, expected '%s'); convert "
				"checkpoints with models/convert.py", f->path,
				fmt ? "'" : "", fmt ? fmt : "missing",
				fmt ? "'" : "", FORMAT_NAME);
	if ((st = meta_int(f, "format_version", 0, INT_MAX, &version)))
		return st;
	if (version < 1 || version > FORMAT_VERSION)
		return txl_fail(TXL_ERR_FORMAT, "%s: format version %d, this "
				"txlgen reads versions 1 to %d", f->path,
				version, FORMAT_VERSION);

	if ((st = meta_int(f, "n_token", 1, MAX_TOKENS, &hp->n_token)) ||
	    (st = meta_int(f, "n_layer", 1, MAX_LAYERS, &hp->n_layer)) ||
	    (st = meta_int(f, "n_head", 1, TXL_MAX_HEADS, &hp->n_head)) ||
	    (st = meta_int(f, "d_model", 1, MAX_DIM, &hp->d_model)) ||
	    (st = meta_int(f, "d_head", 1, MAX_DIM, &hp->d_head)) ||
	    (st = meta_int(f, "d_inner", 1, MAX_DIM, &hp->d_inner)) ||
	    (st = meta_int(f, "d_embed", 1, MAX_DIM, &hp->d_embed)) ||
	    (st = meta_int(f, "tgt_len", 1, MAX_SEG_LEN, &hp->tgt_len)) ||
	    (st = meta_int(f, "mem_len", 0, MAX_DIM, &hp->mem_len)) ||
	    (st = meta_int(f, "clamp_len", INT_MIN, MAX_DIM, &hp->clamp_len)) ||
	    (st = meta_bool(f, "same_length", &hp->same_length)) ||
	    (st = meta_bool(f, "pre_lnorm", &hp->pre_lnorm)) ||
	    (st = meta_bool(f, "tie_weight", &hp->tie_weight)))
		return st;
	if (hp->clamp_len < 0)	/* the original: clamp_len <= 0 = none */
		hp->clamp_len = 0;
	if ((long)hp->n_head * hp->d_head > MAX_DIM)
		return txl_fail(TXL_ERR_FORMAT, "%s: n_head * d_head is too "
				"large", f->path);
	hp->untie_r = false;
	if (txl_file_meta(f, "untie_r") &&
	    (st = meta_bool(f, "untie_r", &hp->untie_r)))
		return st;
	if ((st = read_attention(f, hp)) || (st = read_clusters(f, hp)))
		return st;
	if (hp->attn_type == TXL_ATTN_ADAPTIVE_SPAN &&
	    (hp->same_length || hp->clamp_len > 0))
		return txl_fail(TXL_ERR_FORMAT, "%s: attn_type 4 (adaptive "
				"span) takes neither same_length nor clamp_len",
				f->path);
	s = txl_file_meta(f, "ext_len");
	if (s && strcmp(s, "0") != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: ext_len %.20s is not "
				"supported (only 0)", f->path, s);
	return TXL_OK;
}

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
static enum txl_status
bind_all(struct txl_model *m, uint8_t **arena, size_t *n_copy)
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
static enum txl_status
check_no_strays(const struct txl_model *m)
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

/* The soft mask of an adaptive-span head of learned value cv at distance
 * x (AdaptiveMask.forward, in float as the original computes it:
 * mask_template + current_val * max_size, over the ramp, plus 1,
 * clamped; the template's column of distance x holds 1 - x).  The product
 * is rounded to float before the sum, as there (volatile: no fused
 * multiply-add). */
static float
span_mask(float cv, int attn_span, int ramp, int x)
{
	volatile float z = cv * (float)attn_span;
	const float t = ((float)(1 - x) + z) / (float)ramp + 1.0f;

	return t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
}

/* The adaptive span's heads (struct txl_head_span): the distances each
 * attends to, its window and its mask.  The original trims each layer's
 * keys to the last attn_span - trim_len (AdaptiveSpan.get_trim_len():
 * from the layer's largest current_val, in double, rounded down to a
 * multiple of 64), takes the softmax over them and masks it: a head here
 * reads the values of those of its keys whose mask is not 0, and the
 * scores of the rest of the window for the partition function only,
 * which the 1e-8 the original adds to the sum of the masked weights
 * weighs against (txl-attn.h: txl_attn_keys(), txl_attn_rest()). */
static enum txl_status
compute_spans(struct txl_model *m)
{
	const struct txl_hparams *hp = &m->hp;
	const int L = hp->n_layer, H = hp->n_head;
	const int S = hp->attn_span, R = hp->span_ramp;
	size_t n_logs = 0;

	m->spans = calloc((size_t)L * H, sizeof *m->spans);
	if (!m->spans)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int l = 0; l < L; l++) {
		const float *cv = m->layers[l].span;
		double most = -INFINITY;

		for (int h = 0; h < H; h++) {
			if (!isfinite(cv[h]))
				return txl_fail(TXL_ERR_FORMAT, "%s: tensor "
						"'layers.%d.dec_attn.current_val' "
						"holds %g (head %d)", m->file.path,
						l, (double)cv[h], h);
			most = fmax(most, (double)cv[h]);
		}
		/* get_current_max_size(), then get_trim_len() */
		double size = ceil(most * S) + R;
		size = size < 0 ? 0 : size > S ? S : size;
		int trim = S - (int)size < S - 1 ? S - (int)size : S - 1;
		trim = trim / 64 * 64;
		for (int h = 0; h < H; h++) {
			struct txl_head_span *sp = &m->spans[(size_t)l * H + h];
			int n = S - trim;

			while (n > 0 && span_mask(cv[h], S, R, n) <= 0.0f)
				n--;
			sp->n = n;
			sp->w = S - trim;
			sp->ramp = 1;
			while (sp->ramp <= n &&
			       span_mask(cv[h], S, R, sp->ramp) >= 1.0f)
				sp->ramp++;
			n_logs += (size_t)(n - sp->ramp + 1);
			if (n > m->span_max)
				m->span_max = n;
			/* a head that reads nothing needs no window */
			if (n > 0 && sp->w > m->window_max)
				m->window_max = sp->w;
		}
	}
	m->span_logs = malloc(sizeof(float) * (n_logs ? 2 * n_logs : 1));
	if (!m->span_logs)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	float *inv = m->span_logs + n_logs;
	n_logs = 0;
	for (int l = 0; l < L; l++) {
		for (int h = 0; h < H; h++) {
			struct txl_head_span *sp = &m->spans[(size_t)l * H + h];
			const float cv = m->layers[l].span[h];

			sp->log_mask = m->span_logs + n_logs;
			sp->inv_mask = inv + n_logs;
			for (int x = sp->ramp; x <= sp->n; x++, n_logs++) {
				const float mx = span_mask(cv, S, R, x);

				m->span_logs[n_logs] = logf(mx);
				inv[n_logs] = 1.0f / mx;
			}
		}
	}
	/* a session's memory by default: the longest window (a head keeps
	 * its window's keys, for the partition function) */
	m->hp.mem_len = m->window_max;
	return TXL_OK;
}

/* Every weight matrix of the products of segments gets a slot for its
 * packed copy (txl-gemm.h), made by the first product that takes it; the
 * matrices that are one (the input's table tied to the output) share
 * theirs.  Not r_net: a session multiplies it once, for its position
 * tables, which a copy would not repay. */
static enum txl_status
attach_packs(struct txl_model *m)
{
	const int L = m->hp.n_layer;
	struct txl_mat **mats = calloc((size_t)(6 * L + 2 * TXL_MAX_CLUSTERS +
						1), sizeof *mats);
	int n = 0, n_slots = 0;

	if (!mats)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int l = 0; l < L; l++) {
		struct txl_layer *ly = &m->layers[l];

		mats[n++] = &ly->qkv;
		mats[n++] = &ly->q_net;
		mats[n++] = &ly->kv_net;
		mats[n++] = &ly->o_net;
		mats[n++] = &ly->ff1;
		mats[n++] = &ly->ff2;
	}
	for (int c = 0; c < m->n_emb; c++)
		mats[n++] = &m->emb[c].proj;
	for (int c = 0; c < m->n_out; c++)
		mats[n++] = &m->out[c].w;
	mats[n++] = &m->cluster_w;
	m->packs = calloc((size_t)n, sizeof *m->packs);
	if (!m->packs) {
		free(mats);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		struct txl_mat *w = mats[i];

		if (!w->data)
			continue;
		for (int j = 0; j < i && !w->pack; j++)
			if (mats[j]->data == w->data &&
			    mats[j]->rows == w->rows &&
			    mats[j]->cols == w->cols)
				w->pack = mats[j]->pack;
		if (!w->pack)
			w->pack = &m->packs[n_slots++];
		if (w->dtype == TXL_BF16)
			m->bf16_mats = true;
	}
	m->n_packs = n_slots;
	free(mats);
	return TXL_OK;
}

enum txl_status
txl_model_open(const char *path, unsigned flags, struct txl_model **out)
{
	struct txl_model *m;
	enum txl_status st;
	size_t n_copy = 0;
	uint8_t *arena;

	if (out)
		*out = NULL;
	if (!out || !path)
		return txl_fail(TXL_ERR_INVALID, "txl_model_load: NULL %s",
				!out ? "out" : "path");
	if (flags & ~TXL_LOAD_NO_MMAP)
		return txl_fail(TXL_ERR_INVALID, "%s: unknown load flags 0x%x",
				path, flags & ~TXL_LOAD_NO_MMAP);
	m = calloc(1, sizeof *m);
	if (!m)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	st = txl_file_open(path, flags, &m->file);
	if (st != TXL_OK) {
		free(m);
		return st;
	}
	if ((st = txl_model_read_hparams(&m->file, &m->hp)) != TXL_OK ||
	    (st = read_compute(&m->file, m)) != TXL_OK)
		goto fail;
	m->hp.size = sizeof m->hp;
	/* of the whole file: the same weights in another file are another
	 * model as far as state files go */
	m->fingerprint = m->file.hash ? m->file.hash : 1;
	m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
	if (!m->layers) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto fail;
	}
	/* Check everything first, then copy what cannot be used in place. */
	if ((st = bind_all(m, NULL, &n_copy)) != TXL_OK ||
	    (st = check_no_strays(m)) != TXL_OK)
		goto fail;
	if (n_copy > 0) {
		m->converted = txl_alloc_bytes(n_copy);
		if (!m->converted) {
			st = txl_fail(TXL_ERR_NOMEM, "%s: out of memory for %zu "
				      "bytes of weights", path, n_copy);
			goto fail;
		}
		arena = m->converted;
		if ((st = bind_all(m, &arena, &n_copy)) != TXL_OK)
			goto fail;
	}
	if (m->hp.attn_type == TXL_ATTN_ADAPTIVE_SPAN &&
	    (st = compute_spans(m)) != TXL_OK)
		goto fail;
	if ((st = attach_packs(m)) != TXL_OK)
		goto fail;
	*out = m;
	return TXL_OK;
fail:
	txl_model_close(m);
	return st;
}

void
txl_model_close(struct txl_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_packs; i++)
		txl_pack_slot_clear(&m->packs[i]);
	free(m->packs);
	free(m->converted);
	free(m->spans);
	free(m->span_logs);
	free(m->layers);
	txl_file_close(&m->file);
	free(m);
}

enum txl_status
txl_model_check_ids(const struct txl_model *m, const int32_t *ids, int n,
		    const char *what)
{
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= m->hp.n_token)
			return txl_fail(TXL_ERR_INVALID, "%s%stoken id %d out "
					"of range [0, %d)", what ? what : "",
					what ? ": " : "", ids[i],
					m->hp.n_token);
	return TXL_OK;
}

enum txl_status
txl_model_check_compute(const struct txl_model *m, enum txl_compute compute)
{
	if (compute != TXL_COMPUTE_F32 && compute != TXL_COMPUTE_BF16)
		return txl_fail(TXL_ERR_INVALID, "compute %d is none of "
				"TXL_COMPUTE_F32 (0) or TXL_COMPUTE_BF16 (1)",
				(int)compute);
	if (compute == TXL_COMPUTE_BF16 && !m->bf16_mats)
		return txl_fail(TXL_ERR_INVALID, "%s: compute bf16: none of "
				"its weight matrices is stored in BF16",
				m->file.path);
	return TXL_OK;
}

const struct txl_hparams *
txl_model_hparams(const struct txl_model *m)
{
	return &m->hp;
}

int64_t
txl_model_n_params(const struct txl_model *m)
{
	return m->n_params;
}

const char *
txl_model_meta(const struct txl_model *m, const char *key)
{
	if (!m || !key)
		return NULL;
	return txl_file_meta(&m->file, key);
}

uint64_t
txl_model_fingerprint(const struct txl_model *m)
{
	return m->fingerprint;
}

int
txl_model_span(const struct txl_model *m, int layer, int head)
{
	if (!m || !m->spans || layer < 0 || layer >= m->hp.n_layer ||
	    head < 0 || head >= m->hp.n_head)
		return -1;
	return m->spans[(size_t)layer * m->hp.n_head + head].n;
}

int
txl_model_window(const struct txl_model *m, int layer, int head)
{
	if (!m || !m->spans || layer < 0 || layer >= m->hp.n_layer ||
	    head < 0 || head >= m->hp.n_head)
		return -1;
	const struct txl_head_span *sp =
		&m->spans[(size_t)layer * m->hp.n_head + head];

	return sp->n > 0 ? sp->w : 0;
}

int
txl_model_layer_window(const struct txl_model *m, int layer)
{
	int w = -1;

	if (!m || !m->spans || layer < 0 || layer >= m->hp.n_layer)
		return -1;
	for (int h = 0; h < m->hp.n_head; h++) {
		const int k = txl_model_window(m, layer, h);

		w = k > w ? k : w;
	}
	return w;
}

int
txl_model_spans(const struct txl_model *m, int mem_len, double *mean)
{
	long long sum = 0;
	int most = 0;

	if (!m || !m->spans || (mem_len < 0 && mem_len != TXL_FROM_MODEL))
		return -1;
	for (int i = 0; i < m->hp.n_layer * m->hp.n_head; i++) {
		int n = m->spans[i].n;

		if (mem_len != TXL_FROM_MODEL && n > mem_len)
			n = mem_len;
		sum += n;
		most = n > most ? n : most;
	}
	if (mean)
		*mean = (double)sum / ((double)m->hp.n_layer * m->hp.n_head);
	return most;
}
