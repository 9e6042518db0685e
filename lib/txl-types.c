/* SPDX-License-Identifier: MIT */
/*
 * txl-types.c - the traits table of the storage types.
 */
#include <string.h>

#include "txl-kernels.h"
#include "txl-types.h"

const struct txl_type txl_types[TXL_N_DTYPES] = {
	[TXL_F32] = { .name = "F32", .block = 1, .bytes = 4 },
	[TXL_F16] = { .name = "F16", .block = 1, .bytes = 2 },
	[TXL_BF16] = { .name = "BF16", .block = 1, .bytes = 2 },
	[TXL_U8] = { .name = "U8", .block = 1, .bytes = 1 },
	[TXL_Q8_0] = { .name = "Q8_0", .block = TXL_QK,
		       .bytes = sizeof(struct txl_block_q8_0) },
	[TXL_Q4_0] = { .name = "Q4_0", .block = TXL_QK,
		       .bytes = sizeof(struct txl_block_q4_0) },
};

bool
txl_dtype_parse(const char *name, enum txl_dtype *dt)
{
	for (int i = 0; i < TXL_N_DTYPES; i++) {
		if (strcmp(name, txl_types[i].name) == 0) {
			*dt = (enum txl_dtype)i;
			return true;
		}
	}
	return false;
}

void
txl_widen(float *dst, const void *src, enum txl_dtype dt, size_t n)
{
	txl_kernels()->widen[dt](dst, src, n);
}

void
txl_narrow(void *dst, const float *src, enum txl_dtype dt, size_t n)
{
	txl_kernels()->narrow[dt](dst, src, n);
}

void
txl_convert(void *dst, enum txl_dtype dd, const void *src, enum txl_dtype sd,
	    size_t n)
{
	/* chunks of whole Q8_0 blocks */
	float buf[1024];
	const uint8_t *s = src;
	uint8_t *d = dst;

	for (size_t i = 0; i < n; i += 1024) {
		const int len = n - i < 1024 ? (int)(n - i) : 1024;

		if (dd == sd) {
			memcpy(d, s, txl_row_bytes(sd, len));
		} else {
			txl_widen(buf, s, sd, (size_t)len);
			txl_narrow(d, buf, dd, (size_t)len);
		}
		s += txl_row_bytes(sd, 1024);
		d += txl_row_bytes(dd, 1024);
	}
}
