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

/* The storage type of each kv_type (enum txl_kv_type) */
static const struct {
	int kv_type;
	enum txl_dtype dt;
} kv_types[] = {
	{ TXL_KV_F32, TXL_F32 }, { TXL_KV_F16, TXL_F16 },
	{ TXL_KV_BF16, TXL_BF16 }, { TXL_KV_Q8_0, TXL_Q8_0 },
	{ TXL_KV_Q4_0, TXL_Q4_0 },
};

#define N_KV_TYPES (sizeof kv_types / sizeof *kv_types)

enum txl_dtype
txl_kv_dtype(int kv_type)
{
	for (size_t i = 0; i < N_KV_TYPES; i++)
		if (kv_types[i].kv_type == kv_type)
			return kv_types[i].dt;
	return TXL_N_DTYPES;
}

void
txl_kv_type_names(char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_KV_TYPES && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%sTXL_KV_%s",
					i ? ", " : "",
					txl_dtype_name(kv_types[i].dt));
}

uint8_t *
txl_kv_alloc(const struct txl_kv *kv, size_t rows)
{
	return txl_alloc_bytes(rows * (size_t)kv->n_head * kv->row);
}

enum txl_status
txl_kv_init(struct txl_kv *kv, int n_layer, int n_head, int d_head,
	    enum txl_dtype dt, int cap)
{
	*kv = (struct txl_kv){
		.dt = dt, .row = txl_row_bytes(dt, d_head), .n_layer = n_layer,
		.n_head = n_head, .d_head = d_head, .cap = cap,
	};
	kv->k = calloc((size_t)n_layer, sizeof *kv->k);
	kv->v = calloc((size_t)n_layer, sizeof *kv->v);
	if (!kv->k || !kv->v)
		return TXL_ERR_NOMEM;
	for (int l = 0; l < n_layer; l++) {
		kv->k[l] = txl_kv_alloc(kv, (size_t)cap);
		kv->v[l] = txl_kv_alloc(kv, (size_t)cap);
		if (!kv->k[l] || !kv->v[l])
			return TXL_ERR_NOMEM;
	}
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
	kv->k = kv->v = NULL;
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
txl_kv_make_room(struct txl_kv *kv, int n)
{
	const size_t bytes = kv->row * (size_t)kv->fill;

	if (kv->start + kv->fill + n > kv->cap) {
		/* move the memory to the front of every head's buffer */
		for (int l = 0; l < kv->n_layer; l++) {
			for (int h = 0; h < kv->n_head; h++) {
				memmove(txl_kv_row(kv, kv->k[l], kv->cap, h, 0),
					txl_kv_row(kv, kv->k[l], kv->cap, h,
						   kv->start), bytes);
				memmove(txl_kv_row(kv, kv->v[l], kv->cap, h, 0),
					txl_kv_row(kv, kv->v[l], kv->cap, h,
						   kv->start), bytes);
			}
		}
		kv->start = 0;
	}
	TXL_ASSERT(kv->start + kv->fill + n <= kv->cap);
}

void
txl_kv_keep(struct txl_kv *kv, int n, int mem_len)
{
	const int total = kv->fill + n;
	const int keep = total < mem_len ? total : mem_len;

	kv->start += total - keep;
	kv->fill = keep;
}

void
txl_kv_copy_last(struct txl_kv *dst, const struct txl_kv *src, int keep)
{
	const size_t d = (size_t)src->d_head;
	const int from = src->start + src->fill - keep;

	TXL_ASSERT(keep <= src->fill && keep <= dst->cap);
	for (int l = 0; l < dst->n_layer; l++) {
		for (int h = 0; h < dst->n_head; h++) {
			txl_convert(txl_kv_row(dst, dst->k[l], dst->cap, h, 0),
				    dst->dt,
				    txl_kv_row(src, src->k[l], src->cap, h,
					       from),
				    src->dt, d * (size_t)keep);
			txl_convert(txl_kv_row(dst, dst->v[l], dst->cap, h, 0),
				    dst->dt,
				    txl_kv_row(src, src->v[l], src->cap, h,
					       from),
				    src->dt, d * (size_t)keep);
		}
	}
	dst->start = 0;
	dst->fill = keep;
}
