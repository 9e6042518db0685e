/* SPDX-License-Identifier: MIT */
/*
 * txl-info.c - what a model file holds (txl_model_info): from its header
 * alone (txl_model_peek(), which reads the header and the tokenizer's
 * bytes, never a weight) or from a loaded model (txl_model_describe()).
 * Both go through the loader's own checks (txl-file.c, txl-params.c).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl-file.h"
#include "txl-log.h"
#include "txl-model.h"
#include "txl-params.h"
#include "txl-spm.h"

/* A tokenizer larger than this is not described by a peek (real ones
 * are a few megabytes; the pieces are at most TXL_MAX_TOKENS). */
#define MAX_TOKENIZER_BYTES (256u << 20)

/* The public struct first, so that its pointer is the box's. */
struct info_box {
	struct txl_model_info info;
	struct txl_file file;	/* a peek's own header; unused otherwise */
	struct txl_hparams hp;
	struct txl_meta_pair *meta;
	struct txl_tensor_desc *tensors;
	char *normalizer;
};

static int
cmp_index(const void *a, const void *b)
{
	const struct txl_tensor_info *x = *(const struct txl_tensor_info *const *)a;
	const struct txl_tensor_info *y = *(const struct txl_tensor_info *const *)b;

	return (x->index > y->index) - (x->index < y->index);
}

static enum txl_status
fill_tokenizer(struct info_box *box, const uint8_t *proto, size_t len)
{
	static const char *const types[] = {
		NULL, "unigram", "bpe", "word", "char"
	};
	struct txl_spm_desc d;

	if (!txl_spm_describe(proto, len, &d))
		return TXL_OK;
	box->info.n_pieces = d.n_pieces;
	box->info.tokenizer_type = d.model_type >= 1 && d.model_type <= 4 ?
		types[d.model_type] : NULL;
	if (d.name) {
		box->normalizer = strndup(d.name, d.name_len);
		if (!box->normalizer)
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		box->info.normalizer = box->normalizer;
	}
	return TXL_OK;
}

/* The info of @p f's header (in its order), whose tokenizer's bytes are
 * @p proto (NULL: unread). */
static enum txl_status
fill(struct info_box *box, const struct txl_file *f, const uint8_t *proto,
     size_t proto_len)
{
	struct txl_model_info *in = &box->info;
	const struct txl_tensor_info **order;

	in->size = sizeof *in;
	in->path = f->path;
	in->file_bytes = f->size;
	in->truncated = f->data_end > f->size;
	in->hparams = &box->hp;
	in->n_pieces = -1;
	box->meta = calloc((size_t)f->n_meta + 1, sizeof *box->meta);
	box->tensors = calloc((size_t)f->n_tensors + 1, sizeof *box->tensors);
	order = malloc(((size_t)f->n_tensors + 1) * sizeof *order);
	if (!box->meta || !box->tensors || !order) {
		free(order);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < f->n_meta; i++)
		box->meta[f->meta[i].index] = (struct txl_meta_pair){
			f->meta[i].key, f->meta[i].value
		};
	in->n_meta = f->n_meta;
	in->meta = box->meta;
	for (int i = 0; i < f->n_tensors; i++)
		order[i] = &f->tensors[i];
	qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_index);
	for (int i = 0; i < f->n_tensors; i++) {
		const struct txl_tensor_info *t = order[i];
		struct txl_tensor_desc *d = &box->tensors[in->n_tensors];

		if (strncmp(t->name, "__pad__.", 8) == 0)
			continue;
		d->name = t->name;
		d->dtype = t->dtype;
		d->ndim = t->ndim;
		memcpy(d->shape, t->shape, sizeof d->shape);
		d->offset = t->begin;
		d->bytes = t->end - t->begin;
		in->n_tensors++;
	}
	free(order);
	in->tensors = box->tensors;
	return proto ? fill_tokenizer(box, proto, proto_len) : TXL_OK;
}

void
txl_model_info_free(struct txl_model_info *info)
{
	struct info_box *box = (struct info_box *)info;

	if (!box)
		return;
	txl_file_close(&box->file);
	free(box->meta);
	free(box->tensors);
	free(box->normalizer);
	free(box);
}

/* The bytes of a peeked file's tokenizer, or NULL (none, or not in the
 * file, or too large to describe). */
static uint8_t *
read_tokenizer(const struct txl_file *f, size_t *len)
{
	const struct txl_tensor_info *t = txl_file_find(f, "tokenizer.model");
	uint8_t *buf;
	int fd = -1;
	struct stat sb;
	size_t got = 0;

	if (!t || t->dtype != TXL_U8 || t->end > f->size ||
	    t->end - t->begin > MAX_TOKENIZER_BYTES)
		return NULL;
	*len = (size_t)(t->end - t->begin);
	if (txl_open_regular(f->path, &fd, &sb) != TXL_OK)
		return NULL;
	buf = malloc(*len ? *len : 1);
	while (buf && got < *len) {
		ssize_t r = pread(fd, buf + got, *len - got,
				  (off_t)(t->begin + got));

		if (r <= 0) {
			free(buf);
			buf = NULL;
		} else {
			got += (size_t)r;
		}
	}
	close(fd);
	return buf;
}

enum txl_status
txl_model_peek(const char *path, struct txl_model_info **out)
{
	struct info_box *box;
	enum txl_status st;
	uint8_t *proto = NULL;
	size_t len = 0;

	if (out)
		*out = NULL;
	if (!out || !path)
		return txl_fail(TXL_ERR_INVALID, "txl_model_peek: NULL %s",
				!out ? "out" : "path");
	if (!(box = calloc(1, sizeof *box)))
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	st = txl_file_peek(path, &box->file);
	if (st == TXL_OK)
		st = txl_model_read_hparams(&box->file, &box->hp);
	if (st == TXL_OK) {
		box->hp.size = sizeof box->hp;
		proto = read_tokenizer(&box->file, &len);
		st = fill(box, &box->file, proto, len);
	}
	free(proto);
	if (st != TXL_OK) {
		txl_model_info_free(&box->info);
		return st;
	}
	*out = &box->info;
	return TXL_OK;
}

enum txl_status
txl_model_describe(const struct txl_model *model, struct txl_model_info **out)
{
	const struct txl_file *f;
	const struct txl_tensor_info *t;
	struct info_box *box;
	enum txl_status st;

	if (out)
		*out = NULL;
	if (!out || !model)
		return txl_fail(TXL_ERR_INVALID, "txl_model_describe: NULL %s",
				!out ? "out" : "model");
	if (!(box = calloc(1, sizeof *box)))
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	f = &model->file;
	box->hp = model->hp;
	t = txl_file_find(f, "tokenizer.model");
	st = fill(box, f, t ? f->map + t->begin : NULL,
		  t ? (size_t)(t->end - t->begin) : 0);
	if (st != TXL_OK) {
		txl_model_info_free(&box->info);
		return st;
	}
	*out = &box->info;
	return TXL_OK;
}
