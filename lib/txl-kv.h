/* SPDX-License-Identifier: MIT */
/*
 * txl-kv.h - a session's memory: the keys and values of the positions it
 * remembers, per layer and head (txl-kv.c).  Not installed.
 *
 * The original code (mem_transformer.py) keeps, per layer, the layer
 * inputs of the last mem_len positions and recomputes their keys and
 * values at every call.  Keys and values are pure per-position functions
 * of those inputs, so this memory caches them instead: per layer, the K
 * and V of the memory followed by the current segment, contiguous so that
 * BLAS can read them in one go.  They live in buffers of `cap` positions
 * (mem_len + seg_len + slack); when a segment would run past the end, the
 * memory is moved back to the start (at most once every `slack` tokens).
 *
 * Rows are held in one storage type (kv_type: F32, F16, BF16, Q8_0 or
 * Q4_0) and head-major: a head's rows are contiguous, so that its pass
 * over a long memory streams rather than picking d_head values out of
 * every n_head * d_head (two to four times faster reads of a
 * 3,800-position memory in a micro-benchmark).  The attention's tables
 * of relative positions (R) are held the same way.
 */
#ifndef TXL_KV_H
#define TXL_KV_H

#include <stddef.h>
#include <stdint.h>

#include "txl.h"
#include "txl-dtype.h"

struct txl_kv {
	enum txl_dtype dt;	/* F32, F16, BF16, Q8_0 or Q4_0 */
	size_t row;		/* bytes of one head's row: d_head values */
	int n_layer, n_head, d_head;
	int cap;		/* positions per buffer */
	int start, fill;	/* the memory: positions [start, start +
				   fill) of every buffer */
	uint8_t **k, **v;	/* (n_layer) x (n_head, cap, d_head) */
};

/* The storage type of a kv_type (TXL_N_DTYPES if it is none). */
enum txl_dtype txl_kv_dtype(int kv_type);
/* "TXL_KV_F32, ..., TXL_KV_Q4_0" into buf (cut at cap bytes). */
void txl_kv_type_names(char *buf, size_t cap);

/* An empty memory of n_layer layers of `cap` positions of n_head rows of
 * d_head values of dt; TXL_ERR_NOMEM.  Freed with txl_kv_free() in any
 * case. */
enum txl_status txl_kv_init(struct txl_kv *kv, int n_layer, int n_head,
			    int d_head, enum txl_dtype dt, int cap);
void txl_kv_free(struct txl_kv *kv);

/* Row `pos` of head h in a head-major buffer of `rows` positions of rows
 * `row` bytes long. */
static inline uint8_t *
txl_heads_row(uint8_t *buf, size_t row, int rows, int h, int pos)
{
	return buf + ((size_t)h * (size_t)rows + (size_t)pos) * row;
}

/* The same in a buffer of kv's rows (its K, V, or a table in its type). */
static inline uint8_t *
txl_kv_row(const struct txl_kv *kv, uint8_t *buf, int rows, int h, int pos)
{
	return txl_heads_row(buf, kv->row, rows, h, pos);
}

/* A head-major buffer of `rows` positions in kv's type (64-byte
 * aligned, not cleared), or NULL. */
uint8_t *txl_kv_alloc(const struct txl_kv *kv, size_t rows);

/* The n_head * d_head floats of one position (src) into row pos of every
 * head of the head-major buffer buf of `rows` positions, rounded to kv's
 * type. */
void txl_kv_store(const struct txl_kv *kv, uint8_t *buf, int rows, int pos,
		  const float *src);

/* Room for n more positions after the memory: moved back to the start of
 * every buffer if they would run past the end. */
void txl_kv_make_room(struct txl_kv *kv, int n);

/* After n positions were appended to the memory: keep the last mem_len
 * (_update_mems). */
void txl_kv_keep(struct txl_kv *kv, int n, int mem_len);

/* The last `keep` positions of src's memory as dst's whole memory,
 * converted to dst's type (dst: as many layers and heads). */
void txl_kv_copy_last(struct txl_kv *dst, const struct txl_kv *src,
		      int keep);

#endif /* TXL_KV_H */
