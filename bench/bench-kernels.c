/* SPDX-License-Identifier: MIT */
/*
 * bench-kernels.c - the speed of libtxl's single-threaded kernels, in GB/s
 * of the stored bytes they read, for every storage type of the traits
 * table (txl-types.h) on every instruction set this CPU runs:
 *
 *   gemv   a matrix of K = 384 columns (the 14.6M shape's d_model) times a
 *          vector, as generation computes it: gemv_dot_rows against float
 *          activations, gemv_dot_q8 (or _q16) against the quantized ones
 *          of a type whose products take them (Q8_0, Q4_0: int8 blocks),
 *          gemv_dot_il on the interleaved copy the loader makes of such a
 *          type, on matrices of about 0.5 MB (a core's L2), 12 MB (a
 *          large L3) and 256 MB (DRAM);
 *   attn   rows of d_head = 64 values, as the attention of one token reads
 *          its memory: attn_dot_rows for the scores (K, R) against a
 *          float query, attn_dot_q16 (or _q8) against the quantized query
 *          a memory of the type takes (Q8_0: int16, Q4_0: int8),
 *          attn_axpy_rows for the weighted sum of V, 4,096 rows (one
 *          head's memory of 4,096 positions: 1-2 MB, in L2 or L3).
 *
 *   bench-kernels [--ms T] [--isa scalar|avx2|avxvnni|avx512|avx512vnni]
 *
 * Each figure is the best of 3 runs of at least T ms (default 100).  Lines
 * are "isa kernel dtype MB GB/s".  The kernels are single-threaded: the
 * pool runs one per thread (lib/txl-products.c).  --isa measures one set.
 * Not a test: figures differ between machines.
 */
#include <stdint.h>
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

/* rows x K random values stored as dt (the scalar set narrows them) */
static uint8_t *
make_rows(enum txl_dtype dt, int rows, int K)
{
	struct txl_type_kernels ref;
	const size_t ld = txl_row_bytes(dt, K);
	uint8_t *w = xmalloc(ld * (size_t)rows);
	float *row = xmalloc(sizeof(float) * (size_t)K);

	txl_type_kernels_on(dt, TXL_ISA_SCALAR, &ref);
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < K; c++)
			row[c] = uniform();
		ref.narrow(w + ld * (size_t)r, row, (size_t)K);
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
	const struct txl_type_kernels *k;
	const uint8_t *w;
	size_t ld;
	int n, K;
	float *y;
	const float *x;
	struct txl_act a;
};

static void
call_dot(void *p)
{
	struct call *c = p;

	txl_dot_act(c->k, c->y, c->w, c->ld, &c->a, c->n, c->K);
}

static void
call_dot_il(void *p)
{
	struct call *c = p;

	c->k->dot_il(c->y, c->w, c->n / TXL_IL, &c->a.q8, c->K);
}

static void
call_axpy_rows(void *p)
{
	struct call *c = p;

	c->k->axpy_rows(c->y, c->x, c->w, c->ld, c->n, c->K);
}

/* the kernels' names by the activations they take */
static const char *const act_names[TXL_N_ACT] = {
	[TXL_ACT_F32] = "rows", [TXL_ACT_Q8] = "q8", [TXL_ACT_Q16] = "q16",
};

/* x (K values) in the form type, quantized by set k, over buf */
static struct txl_act
activations(const struct txl_kernels *k, enum txl_act_type type,
	    float *buf, const float *x, int K)
{
	struct txl_act a = txl_act_view(type, buf, x, K);

	if (type == TXL_ACT_Q8)
		k->quantize_q8(&a.q8, x, K);
	else if (type == TXL_ACT_Q16)
		txl_quantize_q16(&a.q16, x, K);
	return a;
}

static void
print(const struct txl_kernels *k, const char *kernel, enum txl_dtype dt,
      double bytes, double gbps)
{
	printf("%s %s %s %.1f %.1f\n", k->name, kernel, txl_dtype_name(dt),
	       bytes / (1 << 20), gbps);
	fflush(stdout);
}

static void
bench_set(const struct txl_kernels *k)
{
	static const double sizes_mb[] = { 0.5, 12, 256 };
	const int K = 384, D = 64, n_attn = 4096;
	float *x = xmalloc(sizeof(float) * (size_t)(n_attn > K ? n_attn : K));
	float *buf = xmalloc(sizeof(float) * (size_t)(K + 64));
	size_t min_ld = SIZE_MAX;
	char name[64];

	/* a result for every row of the largest matrix (its narrowest rows
	 * the type of fewest bytes a row's) */
	for (int dt = 0; dt < TXL_N_DTYPES; dt++)
		if (txl_dtype_computable(dt) && txl_row_bytes(dt, K) < min_ld)
			min_ld = txl_row_bytes(dt, K);
	float *y = xmalloc(sizeof(float) * ((256u << 20) / min_ld + 1));

	for (int i = 0; i < (n_attn > K ? n_attn : K); i++)
		x[i] = uniform();

	for (size_t s = 0; s < sizeof sizes_mb / sizeof *sizes_mb; s++) {
		for (int dt = 0; dt < TXL_N_DTYPES; dt++) {
			const struct txl_type *t = txl_type(dt);
			struct txl_type_kernels tk;
			if (!txl_dtype_computable(dt) ||
			    !txl_type_kernels_on(dt, k->isa, &tk))
				continue;
			const size_t ld = txl_row_bytes(dt, K);
			int rows = (int)(sizes_mb[s] * (1 << 20) / (double)ld);
			rows = rows / TXL_IL * TXL_IL;
			uint8_t *w = make_rows(dt, rows, K);
			struct call c = { .k = &tk, .w = w, .ld = ld, .n = rows,
					  .K = K, .y = y, .x = x };
			const double bytes = (double)ld * rows;

			c.a = activations(k, TXL_ACT_F32, buf, x, K);
			print(k, "gemv_dot_rows", dt, bytes,
			      rate(call_dot, &c, bytes));
			if (t->act != TXL_ACT_F32) {
				c.a = activations(k, t->act, buf, x, K);
				snprintf(name, sizeof name, "gemv_dot_%s",
					 act_names[t->act]);
				print(k, name, dt, bytes, rate(call_dot, &c,
							       bytes));
			}
			if (tk.dot_il && t->act == TXL_ACT_Q8) {
				uint8_t *il = xmalloc(txl_il_bytes(dt, rows, K));
				txl_interleave(il, dt, w, rows, K);
				c.w = il;
				print(k, "gemv_dot_il", dt, bytes,
				      rate(call_dot_il, &c, bytes));
				free(il);
			}
			free(w);
		}
	}
	for (int dt = 0; dt < TXL_N_DTYPES; dt++) {
		const struct txl_type *t = txl_type(dt);
		struct txl_type_kernels tk;
		if (!txl_dtype_computable(dt) || t->block > D ||
		    !txl_type_kernels_on(dt, k->isa, &tk))
			continue;
		const size_t ld = txl_row_bytes(dt, D);
		uint8_t *w = make_rows(dt, n_attn, D);
		struct call c = { .k = &tk, .w = w, .ld = ld, .n = n_attn,
				  .K = D, .y = y, .x = x };
		const double bytes = (double)ld * n_attn;

		c.a = activations(k, TXL_ACT_F32, buf, x, D);
		print(k, "attn_dot_rows", dt, bytes, rate(call_dot, &c, bytes));
		if (t->query_act != TXL_ACT_F32) {
			c.a = activations(k, t->query_act, buf, x, D);
			snprintf(name, sizeof name, "attn_dot_%s",
				 act_names[t->query_act]);
			print(k, name, dt, bytes, rate(call_dot, &c, bytes));
		}
		memset(y, 0, sizeof(float) * (size_t)D);
		print(k, "attn_axpy_rows", dt, bytes,
		      rate(call_axpy_rows, &c, bytes));
		free(w);
	}
	free(x);
	free(y);
	free(buf);
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
		bench_set(k);
	}
	return 0;
}
