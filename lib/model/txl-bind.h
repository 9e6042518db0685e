/* SPDX-License-Identifier: MIT */
/*
 * txl-bind.h - a model's weights bound to the tensors of its file
 * (txl-bind.c).  Not installed.
 */
#ifndef TXL_BIND_H
#define TXL_BIND_H

#include <stddef.h>
#include <stdint.h>

#include "txl-model.h"

/* Visit every weight tensor m->hp calls for, binding it.  With @p arena
 * NULL it only checks them and counts the bytes of the weights that need
 * copying (*n_copy) and the parameters (m->n_params); else it copies
 * those into *arena. */
enum txl_status txl_model_bind_all(struct txl_model *m, uint8_t **arena,
				   size_t *n_copy);
/* TXL_ERR_FORMAT if the file holds a tensor the model does not use. */
enum txl_status txl_model_check_strays(const struct txl_model *m);

#endif /* TXL_BIND_H */
