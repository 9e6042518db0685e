/* SPDX-License-Identifier: MIT */
/*
 * txl-params.h - a model's hyperparameters read from its file's metadata
 * and checked (txl-params.c).  Not installed.
 */
#ifndef TXL_PARAMS_H
#define TXL_PARAMS_H

#include "txl.h"
#include "txl-file.h"
#include "txl-model.h"

/* The hyperparameters of the metadata of @p f, checked as a load checks
 * them (not hp->size). */
enum txl_status txl_model_read_hparams(const struct txl_file *f,
				       struct txl_hparams *hp);
/* How the checkpoint's code computes (metadata layer_norm_eps,
 * emb_scale, proj_same_dim, same_length_mask) into @p m, whose hp is
 * read. */
enum txl_status txl_model_read_compute(const struct txl_file *f,
				       struct txl_model *m);

#endif /* TXL_PARAMS_H */
