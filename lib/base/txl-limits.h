/* SPDX-License-Identifier: MIT */
/*
 * txl-limits.h - what a model file may hold: the loader's limits
 * (txl-file.c, txl-params.c, txl-tokenizer.c).  One list for C and Python:
 * models/txlgen/loadable.py reads the TXL_ integer macros of lib/'s
 * headers, these among them, so that the converter refuses what txlgen
 * would refuse.  Keep each a "#define TXL_NAME value" line, the value an
 * integer expression of numbers, ( ), <<, *, +, - and earlier TXL_ names.
 */
#ifndef TXL_LIMITS_H
#define TXL_LIMITS_H

#include "txl.h"		/* TXL_SEG_LEN_MAX, TXL_MEM_LEN_MAX,
				   TXL_MAX_CLUSTERS */

/* A header larger than this is hostile, not a model: real ones hold a few
 * hundred entries (kilobytes), and cJSON needs ~14 bytes per header byte. */
#define TXL_MAX_HEADER (16u << 20)

/* Hyperparameters: limits that keep every size computation far from
 * overflow. */
#define TXL_MAX_DIM (1 << 20)
#define TXL_MAX_TOKENS (1 << 24)
#define TXL_MAX_LAYERS 1024
#define TXL_MAX_HEADS 4096
/* rows of the attn_type 1 and 3 position tables */
#define TXL_MAX_KLEN (TXL_SEG_LEN_MAX * 32)
/* attn_span and span_ramp of attn_type 4: a head's span is its memory */
#define TXL_MAX_SPAN TXL_MEM_LEN_MAX

/* The running-text bytes of one token (a tokenizer piece) */
#define TXL_MAX_PIECE_BYTES 256

#endif /* TXL_LIMITS_H */
