/* SPDX-License-Identifier: MIT */
/*
 * txl-tokenizer.h - the model's tokenizer (txl-tokenizer.c).  Not
 * installed.
 */
#ifndef TXL_TOKENIZER_H
#define TXL_TOKENIZER_H

#include "txl-model.h"

/* Load the SentencePiece model of the file's "tokenizer.model" tensor and
 * the running-text bytes of every token. */
enum txl_status txl_tokenizer_load(struct txl_model *m);
void txl_tokenizer_free(struct txl_model *m);

#endif /* TXL_TOKENIZER_H */
