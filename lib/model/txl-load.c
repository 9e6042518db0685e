/* SPDX-License-Identifier: MIT */
/*
 * txl-load.c - a model as txl.h gives it: its weights (txl-model.c) and
 * its tokenizer (txl-tokenizer.c), loaded and freed together, so that
 * neither of the two needs the other's work.
 */
#include "txl-model.h"
#include "txl-tokenizer.h"

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
