/* SPDX-License-Identifier: MIT */
/*
 * engine-model.h - the engine's model (engine.h): the loaded model, its
 * hyperparameters and path, and the scratch of its tokenizer and output
 * (engine_tokenize(), engine_piece()).  A thread of its own tokenizes
 * with a struct engine_model of the same model and scratch of its own.
 */
#ifndef TXLGEN_ENGINE_MODEL_H
#define TXLGEN_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "txl.h"

struct engine_model {
	struct txl_model *model;
	const struct txl_hparams *hp;
	const char *path;      /* the model file's */
	int32_t *ids;          /* tokenizer scratch (engine_tokenize) */
	int ids_cap;
	float *logits;         /* n_token scratch */
	char *piece;           /* engine_piece() */
	size_t piece_cap;
};

#endif /* TXLGEN_ENGINE_MODEL_H */
