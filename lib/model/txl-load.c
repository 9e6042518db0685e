/* SPDX-License-Identifier: MIT */
/*
 * txl-load.c - a model as txl.h gives it, opened from its file: its
 * hyperparameters (txl-params.c), its weights (txl-bind.c) and what the
 * model derives from them (txl-model.c), and its tokenizer
 * (txl-tokenizer.c), loaded and freed together, so that none of them
 * needs another's work.
 */
#include <stdint.h>
#include <stdlib.h>

#include "txl-alloc.h"
#include "txl-bind.h"
#include "txl-model.h"
#include "txl-params.h"
#include "txl-tokenizer.h"

/* The model in the file at @p path (flags of txl_model_load_flags()),
 * its weights bound and checked, without its tokenizer; on error *out is
 * NULL and the reason is the library's last. */
static enum txl_status
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
	    (st = txl_model_read_compute(&m->file, m)) != TXL_OK)
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
	if ((st = txl_model_bind_all(m, NULL, &n_copy)) != TXL_OK ||
	    (st = txl_model_check_strays(m)) != TXL_OK)
		goto fail;
	if (n_copy > 0) {
		m->converted = txl_alloc_bytes(n_copy);
		if (!m->converted) {
			st = txl_fail(TXL_ERR_NOMEM, "%s: out of memory for %zu "
				      "bytes of weights", path, n_copy);
			goto fail;
		}
		arena = m->converted;
		if ((st = txl_model_bind_all(m, &arena, &n_copy)) != TXL_OK)
			goto fail;
	}
	if (m->hp.attn_type == TXL_ATTN_ADAPTIVE_SPAN &&
	    (st = txl_model_compute_spans(m)) != TXL_OK)
		goto fail;
	if ((st = txl_model_attach_packs(m)) != TXL_OK)
		goto fail;
	*out = m;
	return TXL_OK;
fail:
	txl_model_close(m);
	return st;
}

enum txl_status
txl_model_load(const char *path, struct txl_model **out)
{
	return txl_model_load_flags(path, 0, out);
}

enum txl_status
txl_model_load_flags(const char *path, unsigned flags, struct txl_model **out)
{
	enum txl_status st = txl_model_open(path, flags, out);

	if (st == TXL_OK && (st = txl_tokenizer_load(*out)) != TXL_OK) {
		txl_model_free(*out);
		*out = NULL;
	}
	return st;
}

void
txl_model_free(struct txl_model *m)
{
	if (!m)
		return;
	txl_tokenizer_free(m);
	txl_model_close(m);
}
