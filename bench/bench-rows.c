/* SPDX-License-Identifier: MIT */
/*
 * bench-rows.c - the speed of libtxl's kernels of several rows of
 * activations (a batch's streams of one token each: dot_multi,
 * dot_il_multi) against its one-row kernels (dot, dot_il), on the
 * matrices of the 14.6M shape's six layers (qkv 1152 x 384, o_net
 * 384 x 384, ff1 1536 x 384, ff2 384 x 1536) in F32 (42.5 MB, past a
 * shared L3), F16 and in the interleaved Q8_0, Q4_0 and Q4_K copies
 * (11.3, 6 and 6 MB), on the set this CPU runs (or --isa's):
 *
 *   bench-rows [--ms T] [--isa scalar|avx2|avxvnni|avx512|avx512vnni]
 *
 * For M = 1, 2, 4, 8 and 16 rows: rows x weights per second of the
 * thread's CPU time (so that other processes on the machine count less),
 * the best of 3 runs of at least T ms (default 300), and the gain over
 * M = 1 (the one-row kernel).  Each M first checks that every row gets
 * the one-row kernel's floats.  Single-threaded, as the pool runs the
 * kernels (lib/kernels/txl-rows.c).  Not a test: figures differ between machines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txl-kernels.h"
#include "txl-repack.h"
#include "txl-types.h"

#include "bench-util.h"

#define N_MAT 4
#define LAYERS 6
static const int shapes[N_MAT][2] = {	/* rows (N), cols (K) */
	{ 1152, 384 }, { 384, 384 }, { 1536, 384 }, { 384, 1536 },
};
static const int Ms[] = { 1, 2, 4, 8, 16 };

struct bench {
	const struct txl_type_kernels *k;
	enum txl_dtype dt;
	bool il;
	const void *w[LAYERS][N_MAT];	/* stored rows, or interleaved */
	float *x[TXL_ROWS_MAX];		/* activations, K <= 1536 */
	struct txl_q8_act a[TXL_ROWS_MAX];
	float *y[TXL_ROWS_MAX], *one;
};

/* Matrix i of layer l against M rows: dot_multi / dot_il_multi, or the
 * one-row kernel for M = 1. */
static void
product(const struct bench *b, int l, int i, int M, float *const *y)
{
	const int N = shapes[i][0], K = shapes[i][1];

	if (b->il) {
		if (M == 1)
			b->k->dot_il(y[0], b->w[l][i], N / TXL_IL, &b->a[0], K);
		else
			b->k->dot_il_multi(y, b->w[l][i], N / TXL_IL, b->a, M,
					   K);
	} else {
		const size_t ld = txl_row_bytes(b->dt, K);
		const float *const *x = (const float *const *)b->x;

		if (M == 1)
			b->k->dot(y[0], b->w[l][i], ld, x[0], N, K);
		else
			b->k->dot_multi(y, b->w[l][i], ld, x, M, N, K);
	}
}

static int
bench_type(const struct txl_kernels *ks, enum txl_dtype dt, bool il,
	   double ms)
{
	struct txl_type_kernels k;
	struct bench b = { .k = &k, .dt = dt, .il = il };
	double weights = 0, bytes = 0, base = 0;

	if (!txl_type_kernels_on(dt, ks->isa, &k) ||
	    (il ? !k.dot_il_multi : !k.dot_multi))
		return 0;
	for (int l = 0; l < LAYERS; l++)
		for (int i = 0; i < N_MAT; i++) {
			const int N = shapes[i][0], K = shapes[i][1];
			const size_t ld = txl_row_bytes(dt, K);
			float *f = bench_alloc("bench-rows", sizeof(float) * K);
			uint8_t *w = bench_alloc("bench-rows", ld * N);

			for (int r = 0; r < N; r++) {
				for (int c = 0; c < K; c++)
					f[c] = bench_uniform() * 0.1f;
				k.narrow(w + (size_t)r * ld, f, (size_t)K);
			}
			if (il) {
				void *c = bench_alloc("bench-rows", txl_il_bytes(dt, N, K));
				txl_interleave(c, dt, w, N, K);
				free(w);
				b.w[l][i] = c;
			} else {
				b.w[l][i] = w;
			}
			weights += (double)N * K;
			bytes += (double)ld * N;
			free(f);
		}
	for (int m = 0; m < TXL_ROWS_MAX; m++) {
		b.x[m] = bench_alloc("bench-rows", sizeof(float) * 1536);
		b.y[m] = bench_alloc("bench-rows", sizeof(float) * 1536);
		b.a[m].q = bench_alloc("bench-rows", 1536);
		b.a[m].d = bench_alloc("bench-rows", sizeof(float) * 1536 / TXL_QK);
		b.a[m].off = bench_alloc("bench-rows", sizeof(int32_t) * 1536 / TXL_QK);
		for (int c = 0; c < 1536; c++)
			b.x[m][c] = bench_uniform();
		ks->quantize_q8(&b.a[m], b.x[m], 1536);
	}
	b.one = bench_alloc("bench-rows", sizeof(float) * 1536);

	printf("\n%s %s%s, %.1f MB: rows x weights per CPU second\n",
	       ks->name, txl_dtype_name(dt), il ? " interleaved" : "",
	       bytes / 1e6);
	printf("%4s %10s %8s\n", "M", "G/s", "x M=1");
	for (size_t t = 0; t < sizeof Ms / sizeof *Ms; t++) {
		const int M = Ms[t];
		double best = 0;

		/* every row the one-row kernel's floats (the activations of
		 * the longest K, quantized per 1536: the first blocks are
		 * those of a shorter K) */
		for (int i = 0; i < N_MAT; i++) {
			product(&b, 0, i, M, b.y);
			for (int m = 0; m < M; m++) {
				float *one[1] = { b.one };
				struct bench b1 = b;
				b1.x[0] = b.x[m];
				b1.a[0] = b.a[m];
				product(&b1, 0, i, 1, one);
				if (memcmp(b.one, b.y[m], sizeof(float) *
					   shapes[i][0])) {
					fprintf(stderr, "bench-rows: %s %s: row %d "
						"of %d differs\n", ks->name,
						txl_dtype_name(dt), m, M);
					return 1;
				}
			}
		}
		for (int rep = 0; rep < 3; rep++) {
			double t0 = bench_clock(CLOCK_THREAD_CPUTIME_ID), t1;
			long passes = 0;

			do {
				for (int l = 0; l < LAYERS; l++)
					for (int i = 0; i < N_MAT; i++)
						product(&b, l, i, M, b.y);
				passes++;
				t1 = bench_clock(CLOCK_THREAD_CPUTIME_ID);
			} while (t1 - t0 < ms / 1e3);
			const double rate = passes * weights * M / (t1 - t0);
			if (rate > best)
				best = rate;
		}
		if (M == 1)
			base = best;
		printf("%4d %10.2f %8.2f\n", M, best / 1e9, best / base);
	}
	for (int l = 0; l < LAYERS; l++)
		for (int i = 0; i < N_MAT; i++)
			free((void *)b.w[l][i]);
	for (int m = 0; m < TXL_ROWS_MAX; m++) {
		free(b.x[m]);
		free(b.y[m]);
		free(b.a[m].q);
		free(b.a[m].d);
		free(b.a[m].off);
	}
	free(b.one);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct txl_kernels *ks = txl_kernels();
	double ms = 300;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
			ms = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
			const char *name = argv[++i];
			ks = NULL;
			for (int s = 0; s < TXL_N_ISA; s++) {
				const struct txl_kernels *c =
					txl_kernels_for((enum txl_isa)s);
				if (c && !strcmp(c->name, name))
					ks = c;
			}
			if (!ks) {
				fprintf(stderr, "bench-rows: --isa %s: not an "
					"instruction set this CPU runs\n", name);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: bench-rows [--ms T] [--isa "
				"NAME]\n");
			return 2;
		}
	}
	if (bench_type(ks, TXL_F32, false, ms) ||
	    bench_type(ks, TXL_F16, false, ms) ||
	    bench_type(ks, TXL_Q8_0, true, ms) ||
	    bench_type(ks, TXL_Q4_0, true, ms) ||
	    bench_type(ks, TXL_Q4_K, true, ms))
		return 1;
	return 0;
}
