/* SPDX-License-Identifier: MIT */
/*
 * bench-kernels.c - the speed of libtxl's single-threaded kernels, in GB/s
 * of the stored bytes they read, on every kernel table this CPU runs:
 *
 *   gemv   a matrix of K = 384 columns (the 14.6M shape's d_model) times a
 *          vector, as generation computes it: dot_rows for F32, F16, BF16
 *          and Q8_0 against float activations, dot_il for Q8_0 against
 *          quantized ones (the interleaved copy the loader makes), on
 *          matrices of about 0.5 MB (a core's L2), 12 MB (a large L3) and
 *          256 MB (DRAM);
 *   attn   rows of d_head = 64 values, as the attention of one token reads
 *          its memory: dot_rows for the scores (K, R), axpy_rows for the
 *          weighted sum of V, 4,096 rows (one head's memory of 4,096
 *          positions: 1-2 MB, in L2 or L3).
 *
 *   bench-kernels [--ms T] [--isa scalar|avx2|avxvnni|avx512|avx512vnni]
 *
 * Each figure is the best of 3 runs of at least T ms (default 100).  Lines
 * are "isa kernel dtype MB GB/s".  The kernels are single-threaded: the
 * pool runs one per thread (lib/txl-math.c).  --isa measures one table.
 * Not a test: figures differ between machines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txl-kernels.h"
#include "txl-repack.h"
#include "txl-types.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned long long rng = 88172645463325252ull;

static float
uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void *
xmalloc(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) / 64 * 64);

	if (!p) {
		fprintf(stderr, "bench-kernels: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* rows x K random values stored as dt (the scalar table narrows them) */
static uint8_t *
make_rows(enum txl_dtype dt, int rows, int K)
{
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);
	const size_t ld = txl_row_bytes(dt, K);
	uint8_t *w = xmalloc(ld * (size_t)rows);
	float *row = xmalloc(sizeof(float) * (size_t)K);

	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < K; c++)
			row[c] = uniform();
		ref->narrow[dt](w + ld * (size_t)r, row, (size_t)K);
	}
	free(row);
	return w;
}

static double min_s = 0.1;

/* GB/s of `bytes` read per call of fn(ctx), best of 3 runs of min_s */
static double
rate(void (*fn)(void *), void *ctx, double bytes)
{
	double best = 0.0;

	for (int run = 0; run < 3; run++) {
		long calls = 0;
		double t0 = now(), t;

		do {
			fn(ctx);
			calls++;
			t = now() - t0;
		} while (t < min_s);
		if (bytes * calls / t > best)
			best = bytes * calls / t;
	}
	return best / 1e9;
}

struct call {
	const struct txl_kernels *k;
	enum txl_dtype dt;
	const uint8_t *w;
	size_t ld;
	int n, K;
	float *x, *y;
	struct txl_q8_act *a;
	struct txl_q16_act *a16;
};

static void
call_dot_rows(void *p)
{
	struct call *c = p;

	c->k->dot_rows[c->dt](c->y, c->w, c->ld, c->x, c->n, c->K);
}

static void
call_dot_il(void *p)
{
	struct call *c = p;

	(c->dt == TXL_Q4_0 ? c->k->dot_il_q4 : c->k->dot_il)(c->y, c->w,
		c->n / TXL_IL, c->a, c->K);
}

static void
call_dot_rows_q16(void *p)
{
	struct call *c = p;

	c->k->dot_rows_q16(c->y, c->w, c->ld, c->a16, c->n, c->K);
}

static void
call_dot_rows_q4(void *p)
{
	struct call *c = p;

	c->k->dot_rows_q4(c->y, c->w, c->ld, c->a, c->n, c->K);
}

static void
call_axpy_rows(void *p)
{
	struct call *c = p;

	c->k->axpy_rows[c->dt](c->y, c->x, c->w, c->ld, c->n, c->K);
}

static const char *const dt_names[] = {
	[TXL_F32] = "F32", [TXL_F16] = "F16", [TXL_BF16] = "BF16",
	[TXL_Q8_0] = "Q8_0", [TXL_Q4_0] = "Q4_0",
};
/* the weights' and the memory's */
static const enum txl_dtype dtypes[] = { TXL_F32, TXL_F16, TXL_BF16,
					 TXL_Q8_0, TXL_Q4_0 };

static void
bench_table(const struct txl_kernels *k)
{
	static const double sizes_mb[] = { 0.5, 12, 256 };
	const int K = 384, D = 64, n_attn = 4096;
	float *x = xmalloc(sizeof(float) * (size_t)(n_attn > K ? n_attn : K));
	/* a result for every row of the largest matrix (its narrowest rows
	 * Q4_0's) */
	float *y = xmalloc(sizeof(float) * ((256u << 20) /
					    txl_row_bytes(TXL_Q4_0, K) + 1));
	int8_t *aq = xmalloc((size_t)K);
	float *ad = xmalloc(sizeof(float) * (size_t)(K / TXL_QK));
	int32_t *aoff = xmalloc(sizeof(int32_t) * (size_t)(K / TXL_QK));
	struct txl_q8_act act = { .q = aq, .d = ad, .off = aoff };
	int16_t q16[64];
	float d16[64 / TXL_QK];
	struct txl_q16_act act16 = { .q = q16, .d = d16 };
	int8_t q8[64];
	float d8[64 / TXL_QK];
	int32_t off8[64 / TXL_QK];
	struct txl_q8_act act8 = { .q = q8, .d = d8, .off = off8 };

	for (int i = 0; i < (n_attn > K ? n_attn : K); i++)
		x[i] = uniform();
	k->quantize_q8(&act, x, K);
	txl_quantize_q16(&act16, x, D);
	k->quantize_q8(&act8, x, D);

	for (size_t s = 0; s < sizeof sizes_mb / sizeof *sizes_mb; s++) {
		for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
			const enum txl_dtype dt = dtypes[d];
			const size_t ld = txl_row_bytes(dt, K);
			int rows = (int)(sizes_mb[s] * (1 << 20) / (double)ld);
			rows = rows / TXL_IL * TXL_IL;
			uint8_t *w = make_rows(dt, rows, K);
			struct call c = { .k = k, .dt = dt, .w = w, .ld = ld,
					  .n = rows, .K = K, .x = x, .y = y,
					  .a = &act };
			const double bytes = (double)ld * rows;

			/* Q4_0 rows meet float activations only out of
			 * memory: its products are the integer ones */
			printf("%s gemv_dot_rows%s %s %.1f %.1f\n", k->name,
			       dt == TXL_Q4_0 ? "_q4" : "", dt_names[dt],
			       bytes / (1 << 20), rate(dt == TXL_Q4_0 ?
				call_dot_rows_q4 : call_dot_rows, &c, bytes));
			fflush(stdout);
			if (txl_dtype_blocked(dt)) {
				uint8_t *il = xmalloc(txl_il_bytes(dt, rows, K));
				txl_interleave(il, dt, w, rows, K);
				c.w = il;
				printf("%s gemv_dot_il %s %.1f %.1f\n", k->name,
				       dt_names[dt], bytes / (1 << 20),
				       rate(call_dot_il, &c, bytes));
				fflush(stdout);
				free(il);
			}
			free(w);
		}
	}
	for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
		const enum txl_dtype dt = dtypes[d];
		const size_t ld = txl_row_bytes(dt, D);
		uint8_t *w = make_rows(dt, n_attn, D);
		struct call c = { .k = k, .dt = dt, .w = w, .ld = ld,
				  .n = n_attn, .K = D, .x = x, .y = y,
				  .a16 = &act16, .a = &act8 };
		const double bytes = (double)ld * n_attn;

		if (k->dot_rows[dt])
			printf("%s attn_dot_rows %s %.1f %.1f\n", k->name,
			       dt_names[dt], bytes / (1 << 20),
			       rate(call_dot_rows, &c, bytes));
		if (dt == TXL_Q8_0)
			/* what a Q8_0 memory takes: an int16 query */
			printf("%s attn_dot_rows_q16 %s %.1f %.1f\n", k->name,
			       dt_names[dt], bytes / (1 << 20),
			       rate(call_dot_rows_q16, &c, bytes));
		if (dt == TXL_Q4_0)
			/* and a Q4_0 one: an int8 query */
			printf("%s attn_dot_rows_q4 %s %.1f %.1f\n", k->name,
			       dt_names[dt], bytes / (1 << 20),
			       rate(call_dot_rows_q4, &c, bytes));
		memset(y, 0, sizeof(float) * (size_t)D);
		printf("%s attn_axpy_rows %s %.1f %.1f\n", k->name,
		       dt_names[dt], bytes / (1 << 20),
		       rate(call_axpy_rows, &c, bytes));
		fflush(stdout);
		free(w);
	}
	free(x);
	free(y);
	free(aq);
	free(ad);
	free(aoff);
}

int
main(int argc, char **argv)
{
	const char *only = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
			min_s = atof(argv[++i]) / 1000.0;
		} else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else {
			fprintf(stderr, "usage: bench-kernels [--ms T] "
				"[--isa scalar|avx2|avxvnni|avx512|avx512vnni]\n");
			return 2;
		}
	}
	if (!(min_s > 0.0))
		min_s = 0.1;
	printf("# isa kernel dtype MB GB/s (single thread, best of 3)\n");
	for (int isa = 0; isa < TXL_N_ISA; isa++) {
		const struct txl_kernels *k = txl_kernels_for(isa);

		if (!k || (only && strcmp(only, k->name) != 0))
			continue;
		bench_table(k);
	}
	return 0;
}
