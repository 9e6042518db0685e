/* SPDX-License-Identifier: MIT */
/*
 * txl-tokenizer.c - the model's tokenizer: the SentencePiece model stored
 * in the file as the U8 tensor "tokenizer.model" (through the C++ shim
 * txl-spm.cc), and the running-text bytes of every token, computed once
 * at load for streaming output.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl-internal.h"

enum txl_status
txl_tokenizer_load(struct txl_model *m)
{
	const struct txl_file *f = &m->file;
	const struct txl_tensor_info *t = txl_file_find(f, "tokenizer.model");
	enum txl_status st;
	size_t total = 0;
	char buf[256];

	if (!t)
		return txl_fail(TXL_ERR_FORMAT, "%s: missing tensor "
				"'tokenizer.model' (the SentencePiece model)",
				f->path);
	if (t->dtype != TXL_U8 || t->ndim != 1)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor 'tokenizer.model' "
				"must be 1-D U8", f->path);
	st = txl_spm_load(f->map + t->begin, t->end - t->begin, &m->spm);
	if (st != TXL_OK) {
		/* txl_fail formats into the buffer txl_last_error() returns */
		char why[256];
		snprintf(why, sizeof why, "%s", txl_last_error());
		return txl_fail(st, "%s: %s", f->path, why);
	}
	if (txl_spm_vocab_size(m->spm) != m->hp.n_token)
		return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer has %d pieces, "
				"the model n_token %d", f->path,
				txl_spm_vocab_size(m->spm), m->hp.n_token);

	/* The running-text bytes of every token, once, for streaming. */
	m->pieces = calloc((size_t)m->hp.n_token, sizeof *m->pieces);
	if (!m->pieces)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int id = 0; id < m->hp.n_token; id++) {
		int n = txl_spm_piece_bytes(m->spm, id, buf, sizeof buf);
		if (n < 0)
			return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer piece %d "
					"is invalid or too long", f->path, id);
		total += (size_t)n;
	}
	if (total > UINT32_MAX)
		return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer too large",
				f->path);
	m->piece_bytes = malloc(total + 1);
	if (!m->piece_bytes)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	total = 0;
	for (int id = 0; id < m->hp.n_token; id++) {
		int n = txl_spm_piece_bytes(m->spm, id, m->piece_bytes + total,
					    sizeof buf);
		m->pieces[id].off = (uint32_t)total;
		m->pieces[id].len = (uint32_t)n;
		total += (size_t)n;
	}
	return TXL_OK;
}

void
txl_tokenizer_free(struct txl_model *m)
{
	txl_spm_free(m->spm);
	free(m->pieces);
	free(m->piece_bytes);
	m->spm = NULL;
	m->pieces = NULL;
	m->piece_bytes = NULL;
}

int
txl_tokenize(const struct txl_model *m, const char *text, size_t len,
	     int32_t *ids, int n_max)
{
	return txl_spm_encode(m->spm, text, len, ids, n_max);
}

int
txl_token_piece(const struct txl_model *m, int32_t id, char *buf, size_t cap)
{
	if (id < 0 || id >= m->hp.n_token)
		return INT32_MIN;
	const struct txl_piece *p = &m->pieces[id];
	if (p->len > cap)
		return -(int)p->len;
	memcpy(buf, m->piece_bytes + p->off, p->len);
	return (int)p->len;
}

int
txl_detokenize(const struct txl_model *m, const int32_t *ids, int n,
	       char *buf, size_t cap)
{
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= m->hp.n_token)
			return INT32_MIN;
	return txl_spm_decode(m->spm, ids, n, buf, cap);
}

int32_t
txl_token_bos(const struct txl_model *m)
{
	return txl_spm_bos_id(m->spm);
}

int32_t
txl_token_eos(const struct txl_model *m)
{
	return txl_spm_eos_id(m->spm);
}

int32_t
txl_token_unk(const struct txl_model *m)
{
	return txl_spm_unk_id(m->spm);
}
