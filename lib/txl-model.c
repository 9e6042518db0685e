/* SPDX-License-Identifier: MIT */
/*
 * txl-model.c - a Transformer-XL model from a validated container: the
 * hyperparameters from "__metadata__", every tensor checked against them
 * by name, shape and dtype, the weights used in place where they are
 * 64-byte aligned F32 (converted to F32 otherwise), and the tokenizer.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl-internal.h"

#define FORMAT_NAME "txlgen-model"
#define FORMAT_VERSION 1

/* Limits that keep every size computation far from overflow. */
#define MAX_DIM (1 << 20)
#define MAX_TOKENS (1 << 24)
#define MAX_LAYERS 1024
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

static enum txl_status
read_hparams(const struct txl_file *f, struct txl_hparams *hp)
{
	const char *fmt = txl_file_meta(f, "format");
	const char *s;
	enum txl_status st;
	int version, v;

	if (!fmt || strcmp(fmt, FORMAT_NAME) != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: not a txlgen model (metadata "
				"'format' is %s%.40s%s, expected '%s'); convert "
				"checkpoints with models/convert.py", f->path,
				fmt ? "'" : "", fmt ? fmt : "missing",
				fmt ? "'" : "", FORMAT_NAME);
	if ((st = meta_int(f, "format_version", 0, INT_MAX, &version)))
		return st;
	if (version != FORMAT_VERSION)
		return txl_fail(TXL_ERR_FORMAT, "%s: format version %d, this "
				"txlgen reads version %d", f->path, version,
				FORMAT_VERSION);

	if ((st = meta_int(f, "n_token", 1, MAX_TOKENS, &hp->n_token)) ||
	    (st = meta_int(f, "n_layer", 1, MAX_LAYERS, &hp->n_layer)) ||
	    (st = meta_int(f, "n_head", 1, 4096, &hp->n_head)) ||
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

	/* What this library implements; refuse the rest by name. */
	if ((st = meta_int(f, "attn_type", 0, 3, &v)))
		return st;
	if (v != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: attn_type %d is not "
				"supported (only 0)", f->path, v);
	if ((st = meta_int(f, "div_val", 1, 1, &v)))
		return st;
	s = txl_file_meta(f, "cutoffs");
	if (s && strcmp(s, "[]") != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: adaptive softmax (cutoffs "
				"%.40s) is not supported", f->path, s);
	s = txl_file_meta(f, "ext_len");
	if (s && strcmp(s, "0") != 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: ext_len %.20s is not "
				"supported (only 0)", f->path, s);
	return TXL_OK;
}

/* Bind one float tensor: check its shape, use it in place if it is
 * aligned F32, else convert it into *arena (advancing it). */
static enum txl_status
bind(struct txl_model *m, const char *name, int ndim, const int64_t *shape,
     const float **out, float **arena)
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
	if (t->dtype == TXL_U8)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has dtype U8, "
				"expected F32, F16 or BF16", f->path, name);

	const uint8_t *src = f->map + t->begin;
	if (t->dtype == TXL_F32 && (uintptr_t)src % 64 == 0) {
		*out = (const float *)(const void *)src;
		return TXL_OK;
	}
	if (!arena)		/* sizing pass */
		return TXL_OK;
	float *dst = *arena;
	for (int64_t i = 0; i < numel; i++) {
		uint16_t h;
		switch (t->dtype) {
		case TXL_F32:
			memcpy(&dst[i], src + 4 * i, 4);
			break;
		case TXL_F16:
			memcpy(&h, src + 2 * i, 2);
			dst[i] = txl_f16_to_f32(h);
			break;
		case TXL_BF16:
			memcpy(&h, src + 2 * i, 2);
			dst[i] = txl_bf16_to_f32(h);
			break;
		case TXL_U8:
			break;
		}
	}
	*out = dst;
	/* keep every converted tensor 64-byte aligned as well */
	*arena += (numel + 15) / 16 * 16;
	return TXL_OK;
}

/* Visit every weight tensor the hyperparameters call for, binding it.
 * With arena NULL it only checks them and counts the floats that need
 * converting (*n_convert) and the parameters (m->n_params). */
static enum txl_status
bind_all(struct txl_model *m, float **arena, int64_t *n_convert)
{
	const struct txl_hparams *hp = &m->hp;
	const int64_t V = hp->n_token, M = hp->d_model, E = hp->d_embed;
	const int64_t H = hp->n_head, D = hp->d_head, I = hp->d_inner;
	const int64_t L = hp->n_layer, HD = H * D;
	const float *rwb = NULL, *rrb = NULL;
	enum txl_status st;
	char name[96];
	int64_t count = 0, convert = 0;

#define BIND(nm, ptr, ...)                                                   \
	do {                                                                 \
		const int64_t shp_[] = { __VA_ARGS__ };                      \
		const int nd_ = (int)(sizeof shp_ / sizeof shp_[0]);         \
		int64_t n_ = 1;                                              \
		const float *p_ = NULL;                                      \
		for (int k_ = 0; k_ < nd_; k_++)                             \
			n_ *= shp_[k_];                                      \
		st = bind(m, (nm), nd_, shp_, &p_, arena);                   \
		if (st != TXL_OK)                                            \
			return st;                                           \
		if (!p_)                                                     \
			convert += (n_ + 15) / 16 * 16;                      \
		count += n_;                                                 \
		(ptr) = p_;                                                  \
	} while (0)
/* a weight matrix (rows, cols) */
#define BINDM(nm, mat, rows_, cols_)                                         \
	do {                                                                 \
		const float *d_;                                             \
		BIND(nm, d_, rows_, cols_);                                  \
		(mat) = (struct txl_mat){ .dtype = TXL_F32,                  \
					  .rows = (int)(rows_),              \
					  .cols = (int)(cols_), .data = d_ }; \
	} while (0)

	BINDM("word_emb.emb_layers.0.weight", m->word_emb, V, E);
	m->emb_proj = m->out_proj = (struct txl_mat){ 0 };
	if (E != M)
		BINDM("word_emb.emb_projs.0", m->emb_proj, M, E);
	if (hp->tie_weight) {
		m->out_w = m->word_emb;
	} else {
		BINDM("crit.out_layers.0.weight", m->out_w, V, E);
	}
	BIND("crit.out_layers.0.bias", m->out_b, V);
	if (E != M) {
		if (txl_file_find(&m->file, "crit.out_projs.0"))
			BINDM("crit.out_projs.0", m->out_proj, M, E);
		else
			m->out_proj = m->emb_proj;	/* tie_projs */
	}
	if (hp->untie_r) {
		BIND("r_w_bias", rwb, L, H, D);
		BIND("r_r_bias", rrb, L, H, D);
	} else {
		BIND("r_w_bias", rwb, H, D);
		BIND("r_r_bias", rrb, H, D);
	}
	for (int l = 0; l < hp->n_layer; l++) {
		struct txl_layer *ly = &m->layers[l];
#define LBIND(suffix, field, ...)                                            \
		do {                                                         \
			snprintf(name, sizeof name, "layers.%d.%s", l, suffix); \
			BIND(name, ly->field, __VA_ARGS__);                  \
		} while (0)
#define LBINDM(suffix, field, rows_, cols_)                                  \
		do {                                                         \
			snprintf(name, sizeof name, "layers.%d.%s", l, suffix); \
			BINDM(name, ly->field, rows_, cols_);                \
		} while (0)
		LBINDM("dec_attn.qkv_net.weight", qkv, 3 * HD, M);
		LBINDM("dec_attn.r_net.weight", r_net, HD, M);
		LBINDM("dec_attn.o_net.weight", o_net, M, HD);
		LBIND("dec_attn.layer_norm.weight", ln_attn_g, M);
		LBIND("dec_attn.layer_norm.bias", ln_attn_b, M);
		LBINDM("pos_ff.CoreNet.0.weight", ff1, I, M);
		LBIND("pos_ff.CoreNet.0.bias", ff1_b, I);
		LBINDM("pos_ff.CoreNet.3.weight", ff2, M, I);
		LBIND("pos_ff.CoreNet.3.bias", ff2_b, M);
		LBIND("pos_ff.layer_norm.weight", ln_ff_g, M);
		LBIND("pos_ff.layer_norm.bias", ln_ff_b, M);
#undef LBIND
#undef LBINDM
		if (rwb) {
			size_t off = hp->untie_r ? (size_t)l * (size_t)HD : 0;
			ly->r_w_bias = rwb + off;
			ly->r_r_bias = rrb + off;
		}
	}
#undef BIND
#undef BINDM
	m->n_params = count;
	*n_convert = convert;
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

enum txl_status
txl_model_load(const char *path, struct txl_model **out)
{
	struct txl_model *m;
	enum txl_status st;
	int64_t n_convert = 0;
	float *arena;

	*out = NULL;
	if (!path)
		return txl_fail(TXL_ERR_INVALID, "no model path given");
	m = calloc(1, sizeof *m);
	if (!m)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	st = txl_file_open(path, &m->file);
	if (st != TXL_OK) {
		free(m);
		return st;
	}
	if ((st = read_hparams(&m->file, &m->hp)) != TXL_OK)
		goto fail;
	m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
	if (!m->layers) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto fail;
	}
	/* Check everything first, then convert what cannot be used in place. */
	if ((st = bind_all(m, NULL, &n_convert)) != TXL_OK ||
	    (st = check_no_strays(m)) != TXL_OK ||
	    (st = txl_tokenizer_load(m)) != TXL_OK)
		goto fail;
	if (n_convert > 0) {
		m->converted = aligned_alloc(64, (size_t)n_convert * 4);
		if (!m->converted) {
			st = txl_fail(TXL_ERR_NOMEM, "%s: out of memory for %lld "
				      "weights", path, (long long)n_convert);
			goto fail;
		}
		arena = m->converted;
		if ((st = bind_all(m, &arena, &n_convert)) != TXL_OK)
			goto fail;
	}
	*out = m;
	return TXL_OK;
fail:
	txl_model_free(m);
	return st;
}

void
txl_model_free(struct txl_model *m)
{
	if (!m)
		return;
	txl_tokenizer_free(m);
	free(m->converted);
	free(m->layers);
	txl_file_close(&m->file);
	free(m);
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
	return txl_file_meta(&m->file, key);
}

