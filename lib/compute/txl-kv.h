/* SPDX-License-Identifier: MIT */
/*
 * txl-kv.h - a session's memory: the keys and values of the positions it
 * remembers, per layer and head (txl-kv.c).  Not installed.
 *
 * The original code (mem_transformer.py) keeps, per layer, the layer
 * inputs of the last mem_len positions and recomputes their keys and
 * values at every call.  Keys and values are pure per-position functions
 * of those inputs, so this memory caches them instead: per layer and
 * head, the K and V of the memory followed by the current segment,
 * contiguous so that BLAS can read them in one go.
 *
 * Each head has a window of its own: it keeps the last `keep` positions
 * (mem_len for Transformer-XL; an adaptive-span head its layer's window,
 * so that the memory is sized to the windows), in buffers of `cap` rows (keep +
 * seg_len + slack); when a segment would run past the end, the head's
 * memory is moved back to the start (at most once every `slack` tokens).
 * The memory as a whole holds `fill` positions (0 .. mem_len); a head
 * holds the last min(fill, keep) of them.
 *
 * Rows are held in one storage type (kv_type) and head-major: a head's
 * rows are contiguous, so that its pass over a long memory streams
 * rather than picking d_head values out of every n_head * d_head.  The
 * attention's tables of relative positions (R) are held the same way.
 */
#ifndef TXL_KV_H
#define TXL_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txl.h"
#include "txl-dtype.h"

/* One head's window in one layer. */
struct txl_kv_head {
	int keep;		/* positions it keeps: 0 .. mem_len */
	int cap;		/* rows of its buffers */
	int start;		/* its memory: rows [start, start + fill) */
	size_t off;		/* its first row in the layer's buffers */
};

struct txl_kv {
	enum txl_dtype dt;	/* of TXL_DTYPE_MEMORY */
	size_t row;		/* bytes of one head's row: d_head values */
	int n_layer, n_head, d_head;
	int mem_len;		/* the most positions a head keeps */
	int fill;		/* positions of the memory: 0 .. mem_len */
	bool zeros;		/* an empty memory is mem_len positions of
				   zero states (adaptive span), not none */
	int written;		/* with zeros: the positions since then that
				   are not zero states (0 .. mem_len) */
	struct txl_kv_head *heads; /* (n_layer, n_head) */
	uint8_t **k, **v;	/* (n_layer) x every head's rows */
};

/* The storage type of a kv_type: itself if it is a type of
 * TXL_DTYPE_MEMORY, else TXL_N_DTYPES. */
enum txl_dtype txl_kv_dtype(int kv_type);
/* "F32, F16, ..." (the memory's types) into buf (cut at cap bytes). */
void txl_kv_type_names(char *buf, size_t cap);

/* Rows of the buffers of a head that keeps `keep` positions, in sessions
 * of segments of seg_len tokens. */
int txl_kv_cap(int keep, int seg_len);

/* An empty memory (txl_kv_clear()) of n_layer layers of n_head heads of
 * rows of d_head values of dt, head (l, h) keeping keep[l * n_head + h]
 * positions (keep NULL: every head mem_len), for segments of up to
 * seg_len tokens; TXL_ERR_NOMEM.  Freed with txl_kv_free() in any
 * case. */
enum txl_status txl_kv_init(struct txl_kv *kv, int n_layer, int n_head,
			    int d_head, enum txl_dtype dt, int mem_len,
			    const int *keep, int seg_len, bool zeros);
void txl_kv_free(struct txl_kv *kv);

/* Forget the memory: fill 0, or with `zeros` mem_len positions of zero
 * states (every key and value 0), as the adaptive-span code's evaluation
 * starts. */
void txl_kv_clear(struct txl_kv *kv);

static inline struct txl_kv_head *
txl_kv_head(const struct txl_kv *kv, int l, int h)
{
	return &kv->heads[(size_t)l * (size_t)kv->n_head + (size_t)h];
}

/* The positions head hd holds: the last min(fill, keep). */
static inline int
txl_kv_head_fill(const struct txl_kv *kv, const struct txl_kv_head *hd)
{
	return kv->fill < hd->keep ? kv->fill : hd->keep;
}

/* With zeros: the rows [0, n) of head hd's memory that are zero states
 * still (K = V = 0), which the attention of a query need not read; at
 * most that many (a memory restored from another may hold zeros it
 * counts as positions). */
static inline int
txl_kv_head_zeros(const struct txl_kv *kv, const struct txl_kv_head *hd)
{
	const int z = txl_kv_head_fill(kv, hd) - kv->written;

	return kv->zeros && z > 0 ? z : 0;
}
/* Row `pos` of head h in a head-major buffer of `rows` positions of rows
 * `row` bytes long. */
static inline uint8_t *
txl_heads_row(uint8_t *buf, size_t row, int rows, int h, int pos)
{
	return buf + ((size_t)h * (size_t)rows + (size_t)pos) * row;
}

/* The same in a buffer of kv's rows (a table in its type). */
static inline uint8_t *
txl_kv_row(const struct txl_kv *kv, uint8_t *buf, int rows, int h, int pos)
{
	return txl_heads_row(buf, kv->row, rows, h, pos);
}

/* The first row of head h's memory in layer l, K or V (its window: the
 * memory, then the segment being computed). */
static inline uint8_t *
txl_kv_k(const struct txl_kv *kv, int l, int h)
{
	const struct txl_kv_head *hd = txl_kv_head(kv, l, h);

	return kv->k[l] + (hd->off + (size_t)hd->start) * kv->row;
}

static inline uint8_t *
txl_kv_v(const struct txl_kv *kv, int l, int h)
{
	const struct txl_kv_head *hd = txl_kv_head(kv, l, h);

	return kv->v[l] + (hd->off + (size_t)hd->start) * kv->row;
}

/* A head-major buffer of `rows` positions in kv's type (64-byte
 * aligned, not cleared), or NULL. */
uint8_t *txl_kv_alloc(const struct txl_kv *kv, size_t rows);

/* The n_head * d_head floats of one position (src) into row pos of every
 * head of the head-major buffer buf of `rows` positions, rounded to kv's
 * type. */
void txl_kv_store(const struct txl_kv *kv, uint8_t *buf, int rows, int pos,
		  const float *src);

/* The keys and values of the n positions of the segment being computed
 * into layer l: position i's keys at rows + i * stride, its values after
 * them (n_head * d_head floats each), into row fill + i of every head's
 * window, rounded to kv's type. */
void txl_kv_append(const struct txl_kv *kv, int l, const float *rows,
		   size_t stride, int n);

/* Room for n more positions after the memory: a head's moved back to the
 * start of its buffers if they would run past the end. */
void txl_kv_make_room(struct txl_kv *kv, int n);

/* After n positions were appended to the memory: keep the last mem_len
 * (_update_mems), each head the last `keep` of them. */
void txl_kv_keep(struct txl_kv *kv, int n);

/* The last `keep` positions of src's memory as dst's memory (each head
 * the last of them that it keeps), converted to dst's type (dst: as many
 * layers and heads).  With dst's `zeros` the positions before them are
 * zero states and dst is full. */
void txl_kv_copy_last(struct txl_kv *dst, const struct txl_kv *src,
		      int keep);

#endif /* TXL_KV_H */
