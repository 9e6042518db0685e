/* SPDX-License-Identifier: MIT */
/*
 * txl-forward.h - the forward pass of a segment (txl-forward.c).  Not installed.
 */
#ifndef TXL_FORWARD_H
#define TXL_FORWARD_H

#include "txl-session.h"

/* The forward pass of one segment of n <= seg_len tokens (txl-forward.c):
 * the last layer's outputs into s->h, the memory updated. */
enum txl_status txl_forward_segment(struct txl_session *s,
				    const int32_t *tok, int n);

#endif /* TXL_FORWARD_H */
