/* SPDX-License-Identifier: MIT */
/*
 * info.c - --info: what a user needs to know before running a model they
 * did not make.
 *
 * The description is one JSON tree, built once; --info --json prints it,
 * and --info prints the same tree as indented "key: value" lines.  A new
 * field is one call here.  It comes from the library (hyperparameters,
 * metadata, parameter count, the memory a session takes, and
 * txl_model_describe(): the file's dtypes, every metadata key, the
 * SentencePiece model's kind and normaliser).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "engine-model.h"
#include "engine.h"
#include "modes.h"
#include "text.h"

static cJSON *
obj(cJSON *parent, const char *key)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddItemToObject(parent, key, o);
	return o;
}

static void
num(cJSON *o, const char *key, double v)
{
	cJSON_AddNumberToObject(o, key, v);
}

static void
str(cJSON *o, const char *key, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static void
flag(cJSON *o, const char *key, bool v)
{
	cJSON_AddBoolToObject(o, key, v);
}

/* A metadata value that is JSON (lists, numbers), or NULL. */
static cJSON *
meta_json(struct engine *e, const char *key)
{
	const char *s = txl_model_meta(e->mod->model, key);

	return s ? cJSON_Parse(s) : NULL;
}

/* A boolean metadata key, or @absent where the file has none. */
static void
meta_flag(struct engine *e, cJSON *o, const char *key, bool absent)
{
	cJSON *v = meta_json(e, key);

	flag(o, key, v ? cJSON_IsTrue(v) : absent);
	cJSON_Delete(v);
}

/* ------------------------------------------------------------------ */
/* The file                                                            */

/* Tensors, values and bytes per dtype; every metadata key. */
static void
describe_tensors(cJSON *file, cJSON *root, const struct txl_model_info *in)
{
	cJSON *dt = obj(file, "dtypes"), *meta = obj(root, "metadata");

	for (int i = 0; i < in->n_tensors; i++) {
		const struct txl_tensor_desc *t = &in->tensors[i];
		const char *type = txl_dtype_name(t->dtype);
		cJSON *entry = cJSON_GetObjectItemCaseSensitive(dt, type);
		double values = 1;

		for (int d = 0; d < t->ndim; d++)
			values *= (double)t->shape[d];
		if (!entry) {
			entry = obj(dt, type);
			num(entry, "tensors", 0);
			num(entry, "values", 0);
			num(entry, "bytes", 0);
		}
		cJSON_SetNumberValue(cJSON_GetObjectItem(entry, "tensors"),
			cJSON_GetObjectItem(entry, "tensors")->valuedouble + 1);
		cJSON_SetNumberValue(cJSON_GetObjectItem(entry, "values"),
			cJSON_GetObjectItem(entry, "values")->valuedouble +
			values);
		cJSON_SetNumberValue(cJSON_GetObjectItem(entry, "bytes"),
			cJSON_GetObjectItem(entry, "bytes")->valuedouble +
			(double)t->bytes);
	}
	for (int i = 0; i < in->n_meta; i++)
		str(meta, in->meta[i].key, in->meta[i].value);
}

/* The SentencePiece model's kind and normaliser. */
static void
describe_tokenizer(cJSON *voc, const struct txl_model_info *in)
{
	str(voc, "model_type", in->tokenizer_type);
	if (in->normalizer && strlen(in->normalizer) < 64) {
		char *name = xstrdup(in->normalizer);

		text_clean_line(name);
		str(voc, "normalizer", name);
		free(name);
	}
}

/* ------------------------------------------------------------------ */
/* The model                                                           */

static void
describe_output(struct engine *e, cJSON *root)
{
	const struct txl_hparams *hp = e->mod->hp;
	cJSON *out = obj(root, "output_layer");
	cJSON *cutoffs = meta_json(e, "cutoffs");
	cJSON *div = meta_json(e, "div_val"), *tie;
	int n_cut = cJSON_GetArraySize(cutoffs);
	double dv = cJSON_IsNumber(div) ? div->valuedouble : 1;

	str(out, "kind", n_cut ? "adaptive softmax" : "full softmax");
	num(out, "div_val", dv);
	flag(out, "tie_weight", hp->tie_weight);
	if (n_cut) {
		cJSON *cl = cJSON_AddArrayToObject(out, "clusters");
		double lo = 0, d = hp->d_embed;

		for (int i = 0; i <= n_cut; i++) {
			cJSON *c = cJSON_CreateObject();
			double hi = i < n_cut ?
				cJSON_GetArrayItem(cutoffs, i)->valuedouble :
				hp->n_token;

			num(c, "first", lo);
			num(c, "size", hi - lo);
			num(c, "d_embed", floor(d));
			cJSON_AddItemToArray(cl, c);
			lo = hi;
			d /= dv;
		}
	}
	tie = meta_json(e, "tie_projs");
	cJSON_AddItemToObject(out, "tie_projs", tie ? tie : cJSON_CreateNull());
	cJSON_Delete(cutoffs);
	cJSON_Delete(div);
}

/* The adaptive span's: the span of each head of each layer (the
 * positions whose values it reads), their mean, the soft mask's ramp,
 * and each layer's window (the keys of its heads' softmax). */
static void
describe_spans(struct engine *e, cJSON *att)
{
	const struct txl_hparams *hp = e->mod->hp;
	cJSON *spans, *windows;
	double mean;

	if (txl_model_spans(e->mod->model, TXL_FROM_MODEL, &mean) < 0)
		return;
	num(att, "attn_span", hp->attn_span);
	num(att, "span_ramp", hp->span_ramp);
	spans = cJSON_AddArrayToObject(att, "spans");
	for (int l = 0; l < hp->n_layer; l++) {
		cJSON *row = cJSON_CreateArray();

		for (int h = 0; h < hp->n_head; h++)
			cJSON_AddItemToArray(row, cJSON_CreateNumber(
				txl_model_span(e->mod->model, l, h)));
		cJSON_AddItemToArray(spans, row);
	}
	num(att, "span_mean", mean);
	windows = cJSON_AddArrayToObject(att, "windows");
	for (int l = 0; l < hp->n_layer; l++)
		cJSON_AddItemToArray(windows, cJSON_CreateNumber(
			txl_model_layer_window(e->mod->model, l)));
}

/* The session the options ask for, its settings as the library resolves
 * them (what a run with these options gets), its size and receptive field
 * those of the settings resolved */
static int
describe_memory(struct engine *e, cJSON *root)
{
	const struct txl_hparams *hp = e->mod->hp;
	struct txl_session_params p, r = txl_session_params_default();
	cJSON *m = obj(root, "session");
	int64_t bytes;

	engine_session_params(e, &p);
	if (engine_check_compute(e) != EXIT_OK)
		return EXIT_USAGE;
	if (txl_session_params_resolve(e->mod->model, &p, &r) != TXL_OK ||
	    (bytes = txl_session_bytes(e->mod->model, &r)) < 0) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return EXIT_USAGE;
	}
	num(m, "mem_len", r.mem_len);
	num(m, "seg_len", r.seg_len);
	num(m, "clamp_len", r.clamp_len);
	flag(m, "same_length", r.same_length);
	str(m, "mem_init", mem_init_names[r.mem_init]);
	str(m, "kv_type", txl_dtype_name(r.kv_type));
	str(m, "compute", compute_names[e->opts->compute]);
	/* by the CPU's own instructions, or widened */
	flag(m, "compute_native", txl_compute_native(e->opts->compute) == 1);
	/* the tokens a generated one depends on, itself included */
	num(m, "receptive_field",
	    (double)txl_session_receptive_field(e->mod->model, &r, 1));
	/* what a --part reads besides its share, once: the memory's
	 * receptive field before the segment of its first token, from a
	 * segment's start (for a segment far into a text), and at most a
	 * segment less a token at each end that it shares with its
	 * neighbours */
	const int64_t far = (int64_t)r.seg_len << 24;
	const int64_t context = far - txl_session_tail_start(e->mod->model,
							     &r, far);
	num(m, "part_context", (double)context);
	num(m, "part_overhead", (double)(context + 2 * (r.seg_len - 1)));
	num(m, "bytes", (double)bytes);
	/* txl_session_adapt()'s own copy of the output weight and bias */
	num(m, "adapt_bytes", 4.0 * hp->n_token * (hp->d_embed + 1));
	return EXIT_OK;
}

static int
describe(struct engine *e, cJSON *root)
{
	const struct txl_hparams *hp = e->mod->hp;
	struct txl_model_info *in;
	cJSON *file, *arch, *att, *voc, *rec, *version, *eps;
	int32_t special[3] = {
		txl_token_bos(e->mod->model), txl_token_eos(e->mod->model),
		txl_token_unk(e->mod->model)
	};
	static const char *const special_names[3] = { "bos", "eos", "unk" };
	int rc;

	str(root, "model", e->mod->path);
	str(root, "description", txl_model_meta(e->mod->model, "description"));

	file = obj(root, "file");
	str(file, "format", txl_model_meta(e->mod->model, "format"));
	version = meta_json(e, "format_version");
	cJSON_AddItemToObject(file, "format_version", version ? version :
			      cJSON_CreateNull());
	/* which converter wrote it, from what (txlgen-model(5)) */
	version = meta_json(e, "converter_version");
	cJSON_AddItemToObject(file, "converter_version", version ? version :
			      cJSON_CreateNull());
	str(file, "origin", txl_model_meta(e->mod->model, "origin"));
	if (txl_model_describe(e->mod->model, &in) != TXL_OK) {
		errmsg("%s", engine_lib_error(TXL_ERR_NOMEM));
		return EXIT_RUNTIME;
	}
	num(file, "bytes", (double)in->file_bytes);
	num(root, "parameters", (double)txl_model_n_params(e->mod->model));

	arch = obj(root, "architecture");
	num(arch, "n_layer", hp->n_layer);
	num(arch, "d_model", hp->d_model);
	num(arch, "n_head", hp->n_head);
	num(arch, "d_head", hp->d_head);
	num(arch, "d_inner", hp->d_inner);
	num(arch, "d_embed", hp->d_embed);
	flag(arch, "pre_lnorm", hp->pre_lnorm);
	flag(arch, "untie_r", hp->untie_r);
	/* how the checkpoint's code computes: absent, the PyTorch code's */
	eps = meta_json(e, "layer_norm_eps");
	cJSON_AddItemToObject(arch, "layer_norm_eps", eps ? eps :
			      cJSON_CreateNumber(1e-5));
	str(arch, "same_length_mask",
	    txl_model_meta(e->mod->model, "same_length_mask") ?
	    txl_model_meta(e->mod->model, "same_length_mask") : "pytorch");
	/* the input scaled by sqrt(d_model), and d_embed = d_model
	 * projected all the same (format 2): absent, the original code's */
	meta_flag(e, arch, "emb_scale", true);
	meta_flag(e, arch, "proj_same_dim", false);

	att = obj(root, "attention");
	num(att, "attn_type", hp->attn_type);
	str(att, "kind", txl_attn_type_name(hp->attn_type));
	describe_spans(e, att);

	voc = obj(root, "vocabulary");
	num(voc, "tokens", hp->n_token);
	str(voc, "tokenizer", "SentencePiece");
	describe_tokenizer(voc, in);
	for (int i = 0; i < 3; i++) {
		if (special[i] >= 0)
			num(voc, special_names[i], special[i]);
		else
			cJSON_AddNullToObject(voc, special_names[i]);
	}

	describe_output(e, root);
	rc = describe_memory(e, root);
	rec = meta_json(e, "recommended");
	cJSON_AddItemToObject(root, "recommended", rec ? rec :
			      cJSON_CreateNull());
	describe_tensors(file, root, in);
	txl_model_info_free(in);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */

/* " (28.9 MB)", " (7.2M)" after a size or a count */
static void
human(const char *key, double v, FILE *out)
{
	static const char *const units[] = { "k", "M", "G", "T" };
	size_t kl = strlen(key);
	bool bytes = kl >= 5 && !strcmp(key + kl - 5, "bytes");
	int u = -1;

	if (!bytes && strcmp(key, "parameters"))
		return;
	while (v >= 1000 && u < 3) {
		v /= 1000;
		u++;
	}
	if (u >= 0)
		fprintf(out, " (%.1f %s%s)", v, units[u], bytes ? "B" : "");
}

static void
print_value(const cJSON *v, FILE *out)
{
	char buf[64], *s;

	if (cJSON_IsNumber(v)) {
		fputs(fmt_number(v->valuedouble, buf, sizeof(buf)), out);
		human(v->string ? v->string : "", v->valuedouble, out);
	} else if (cJSON_IsString(v)) {
		s = xstrdup(v->valuestring);
		text_clean_line(s);
		fputs(s, out);
		free(s);
	} else if (cJSON_IsNull(v)) {
		fputs("none", out);
	} else {
		s = cJSON_PrintUnformatted(v);
		if (!s)
			die_oom();
		text_clean_line(s);
		fputs(s, out);
		free(s);
	}
}

/* Whether v is a non-empty array of arrays (a table: the spans). */
static bool
is_table(const cJSON *v)
{
	const cJSON *row;

	if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v))
		return false;
	cJSON_ArrayForEach(row, v)
		if (!cJSON_IsArray(row))
			return false;
	return true;
}

static void
print_text(const cJSON *o, int depth, FILE *out)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, o) {
		char *key = xstrdup(v->string);

		text_clean_line(key);
		fprintf(out, "%*s%s:", 2 * depth, "", key);
		free(key);
		if (cJSON_IsObject(v)) {
			fputc('\n', out);
			print_text(v, depth + 1, out);
		} else if (is_table(v)) {
			/* a row a line, numbered */
			const cJSON *row;
			int i = 0;

			fputc('\n', out);
			cJSON_ArrayForEach(row, v) {
				fprintf(out, "%*s%d: ", 2 * depth + 2, "", i++);
				print_value(row, out);
				fputc('\n', out);
			}
		} else {
			fputc(' ', out);
			print_value(v, out);
			fputc('\n', out);
		}
	}
}

int
engine_info(struct engine *e, FILE *out)
{
	cJSON *root = cJSON_CreateObject();
	int rc = describe(e, root);

	if (rc == EXIT_OK) {
		if (e->opts->json) {
			json_print(out, root, 2);
			fputc('\n', out);
		} else {
			print_text(root, 0, out);
		}
	}
	cJSON_Delete(root);
	fflush(out);
	if (rc == EXIT_OK && ferror(out)) {
		errmsg("writing output failed: %s", strerror(errno));
		rc = EXIT_RUNTIME;
	}
	return rc;
}
