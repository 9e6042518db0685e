/* SPDX-License-Identifier: MIT */
/*
 * txl-params.c - a model's hyperparameters from its file's
 * "__metadata__", each checked against the limits the loader sets, and
 * the metadata of how the checkpoint's code computes.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "txl-params.h"
#include "txl-log.h"
#include "txl-limits.h"

#define FORMAT_NAME "txlgen-model"
/* Version 2 adds emb_scale and proj_same_dim
 * (txl_model_read_compute()); a reader of
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
enum txl_status
txl_model_read_compute(const struct txl_file *f, struct txl_model *m)
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
