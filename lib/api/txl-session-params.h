/* SPDX-License-Identifier: MIT */
/*
 * txl-session-params.h - a session's settings against a model
 * (txl-session-params.c; the public functions are txl.h's).  Not
 * installed.
 */
#ifndef TXL_SESSION_PARAMS_H
#define TXL_SESSION_PARAMS_H

#include "txl.h"
#include "txl-model.h"

/* The positions head h of layer l keeps in a session of mem_len: with a
 * span its layer's window (its keys past the span count in its
 * softmax's partition function; none if its span is 0), else mem_len;
 * at most mem_len. */
int txl_head_keep(const struct txl_model *m, int l, int h, int mem_len);

#endif /* TXL_SESSION_PARAMS_H */
