/* SPDX-License-Identifier: MIT */
/*
 * txl-kv.c - a session's memory of keys and values (txl-kv.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl-alloc.h"
#include "txl-kv.h"
#include "txl-log.h"
#include "txl-types.h"

enum txl_dtype
txl_kv_dtype(int kv_type)
{
	return txl_dtype_uses((enum txl_dtype)kv_type) & TXL_DTYPE_MEMORY ?
		(enum txl_dtype)kv_type : TXL_N_DTYPES;
}

void
txl_kv_type_names(char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int i = 0; i < TXL_N_DTYPES && len < cap; i++)
		if (txl_dtype_uses((enum txl_dtype)i) & TXL_DTYPE_MEMORY)
			len += (size_t)snprintf(buf + len, cap - len, "%s%s",
						len ? ", " : "",
						txl_dtype_name(i));
}

uint8_t *
txl_kv_alloc(const struct txl_kv *kv, size_t rows)
{
	return txl_alloc_bytes(rows * (size_t)kv->n_head * kv->row);
}

int
txl_kv_cap(int keep, int seg_len)
{
	/* Move the memory back at most once every `slack` tokens. */
	int slack = seg_len;

	if (slack < keep / 4)
		slack = keep / 4;
	if (slack < 16)
		slack = 16;
	return keep + seg_len + slack;
}

enum txl_status
txl_kv_init(struct txl_kv *kv, int n_layer, int n_head, int d_head,
	    enum txl_dtype dt, int mem_len, const int *keep, int seg_len,
	    bool zeros)
{
	const size_t H = (size_t)n_head;
	size_t rows = 0;

	*kv = (struct txl_kv){
		.dt = dt, .row = txl_row_bytes(dt, d_head), .n_layer = n_layer,
		.n_head = n_head, .d_head = d_head, .mem_len = mem_len,
		.zeros = zeros,
	};
	kv->heads = calloc((size_t)n_layer * H, sizeof *kv->heads);
	kv->k = calloc((size_t)n_layer, sizeof *kv->k);
	kv->v = calloc((size_t)n_layer, sizeof *kv->v);
	if (!kv->heads || !kv->k || !kv->v)
		return TXL_ERR_NOMEM;
	for (int l = 0; l < n_layer; l++) {
		rows = 0;
		for (int h = 0; h < n_head; h++) {
			struct txl_kv_head *hd = txl_kv_head(kv, l, h);

			hd->keep = keep ? keep[(size_t)l * H + h] : mem_len;
			hd->cap = txl_kv_cap(hd->keep, seg_len);
			hd->off = rows;
			rows += (size_t)hd->cap;
		}
		kv->k[l] = txl_alloc_bytes(rows * kv->row);
		kv->v[l] = txl_alloc_bytes(rows * kv->row);
		if (!kv->k[l] || !kv->v[l])
			return TXL_ERR_NOMEM;
	}
	txl_kv_clear(kv);
	return TXL_OK;
}

void
txl_kv_free(struct txl_kv *kv)
{
	for (int l = 0; l < kv->n_layer; l++) {
		if (kv->k)
			free(kv->k[l]);
		if (kv->v)
			free(kv->v[l]);
	}
	free(kv->k);
	free(kv->v);
	free(kv->heads);
	kv->k = kv->v = NULL;
	kv->heads = NULL;
}

void
txl_kv_clear(struct txl_kv *kv)
{
	for (int l = 0; l < kv->n_layer; l++) {
		for (int h = 0; h < kv->n_head; h++) {
			struct txl_kv_head *hd = txl_kv_head(kv, l, h);

			hd->start = 0;
			if (!kv->zeros)
				continue;
			/* zero bytes are zero in every type (a block's
			 * scale 0, its values 0) */
			memset(kv->k[l] + hd->off * kv->row, 0,
			       (size_t)hd->keep * kv->row);
			memset(kv->v[l] + hd->off * kv->row, 0,
			       (size_t)hd->keep * kv->row);
		}
	}
	kv->fill = kv->zeros ? kv->mem_len : 0;
	kv->written = 0;
}

void
txl_kv_store(const struct txl_kv *kv, uint8_t *buf, int rows, int pos,
	     const float *src)
{
	const int D = kv->d_head;

	for (int h = 0; h < kv->n_head; h++)
		txl_narrow(txl_kv_row(kv, buf, rows, h, pos), src + h * D,
			   kv->dt, (size_t)D);
}

void
txl_kv_append(const struct txl_kv *kv, int l, const float *rows,
	      size_t stride, int n)
{
	const int D = kv->d_head, HD = kv->n_head * kv->d_head;

	for (int i = 0; i < n; i++) {
		const float *k = rows + (size_t)i * stride, *v = k + HD;

		for (int h = 0; h < kv->n_head; h++) {
			const struct txl_kv_head *hd = txl_kv_head(kv, l, h);
			const size_t at = (size_t)(txl_kv_head_fill(kv, hd) +
						   i) * kv->row;

			txl_narrow(txl_kv_k(kv, l, h) + at, k + h * D, kv->dt,
				   (size_t)D);
			txl_narrow(txl_kv_v(kv, l, h) + at, v + h * D, kv->dt,
				   (size_t)D);
		}
	}
}

void
txl_kv_make_room(struct txl_kv *kv, int n)
{
	for (int l = 0; l < kv->n_layer; l++) {
		for (int h = 0; h < kv->n_head; h++) {
			struct txl_kv_head *hd = txl_kv_head(kv, l, h);
			const int fill = txl_kv_head_fill(kv, hd);
			const size_t bytes = kv->row * (size_t)fill;

			if (hd->start + fill + n <= hd->cap)
				continue;
			/* move the memory to the front of the head's
			 * buffers */
			memmove(kv->k[l] + hd->off * kv->row,
				txl_kv_k(kv, l, h), bytes);
			memmove(kv->v[l] + hd->off * kv->row,
				txl_kv_v(kv, l, h), bytes);
			hd->start = 0;
			TXL_ASSERT(fill + n <= hd->cap);
		}
	}
}

void
txl_kv_keep(struct txl_kv *kv, int n)
{
	for (int l = 0; l < kv->n_layer; l++) {
		for (int h = 0; h < kv->n_head; h++) {
			struct txl_kv_head *hd = txl_kv_head(kv, l, h);
			const int total = txl_kv_head_fill(kv, hd) + n;

			hd->start += total - (total < hd->keep ? total
					      : hd->keep);
		}
	}
	kv->fill = kv->fill + n < kv->mem_len ? kv->fill + n : kv->mem_len;
	kv->written = kv->written + n < kv->mem_len ? kv->written + n
		: kv->mem_len;
}

void
txl_kv_copy_last(struct txl_kv *dst, const struct txl_kv *src, int keep)
{
	const size_t d = (size_t)src->d_head;

	TXL_ASSERT(keep <= src->fill && keep <= dst->mem_len);
	txl_kv_clear(dst);
	for (int l = 0; l < dst->n_layer; l++) {
		for (int h = 0; h < dst->n_head; h++) {
			const struct txl_kv_head *sh = txl_kv_head(src, l, h);
			const struct txl_kv_head *dh = txl_kv_head(dst, l, h);
			const int have = txl_kv_head_fill(src, sh);
			int n = keep < have ? keep : have;
			/* the room of the copy: all of a memory of zero
			 * states, the first `keep` rows of another */
			const int room = dst->zeros ? dh->keep
				: keep < dh->keep ? keep : dh->keep;

			if (n > room)
				n = room;
			txl_convert(txl_kv_k(dst, l, h) + (size_t)(room - n) *
				    dst->row, dst->dt, txl_kv_k(src, l, h) +
				    (size_t)(have - n) * src->row, src->dt,
				    d * (size_t)n);
			txl_convert(txl_kv_v(dst, l, h) + (size_t)(room - n) *
				    dst->row, dst->dt, txl_kv_v(src, l, h) +
				    (size_t)(have - n) * src->row, src->dt,
				    d * (size_t)n);
		}
	}
	dst->fill = dst->zeros ? dst->mem_len : keep;
	/* a head holds at most `keep` copied positions after its zeros */
	dst->written = keep;
}
