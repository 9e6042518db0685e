/* SPDX-License-Identifier: MIT */
/*
 * bench-rows.c - a prototype of the kernels a batch of streams needs: M
 * rows of activations against one weight matrix, each weight read once
 * for all of them, with every row's result the same floats as the
 * one-row kernel of lib/txl-kernels-avx512.c gives it (F32: DOT_ROWS;
 * Q8_0: dot_il_vnni on the interleaved copy, the activations quantized
 * per row as quantize_q8 does), so that a stream computes the same
 * numbers alone or in a batch.  (Compiled as libtxl is, without
 * contraction of products and sums into fused multiply-adds: ISO C.)
 *
 *   bench-rows [--ms T]
 *
 * Checks that identity (exactly: the same operations in the same order),
 * then measures, single-threaded, a set of matrices of the 14.6M shape's
 * layer (qkv 1152 x 384, o 384 x 384, ff1 1536 x 384, ff2 384 x 1536;
 * six layers: 46 MB, past a shared L3) against M = 1, 2, 4, 8, 16 rows:
 * rows x matrix-weights per second, and the gain over M one-row calls.
 * The same for the Q8_0 copy of those weights (11.3 MB: in a large L3),
 * with AVX512_VNNI.  The time is the thread's CPU time, the best of 3
 * runs of at least T ms (default 300), so that other processes on the
 * machine count less.  AVX-512 only (the figures it is for).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* [sum(a), sum(b), sum(c), sum(d)], as lib/txl-kernels-avx512.c */
static inline __m128
hsum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
	__m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a),
				  _mm512_extractf32x8_ps(a, 1));
	__m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b),
				  _mm512_extractf32x8_ps(b, 1));
	__m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c),
				  _mm512_extractf32x8_ps(c, 1));
	__m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d),
				  _mm512_extractf32x8_ps(d, 1));
	__m256 ab = _mm256_hadd_ps(a8, b8);
	__m256 cd = _mm256_hadd_ps(c8, d8);
	__m256 abcd = _mm256_hadd_ps(ab, cd);

	return _mm_add_ps(_mm256_castps256_ps128(abcd),
			  _mm256_extractf128_ps(abcd, 1));
}

/* The one-row kernel of libtxl (F32, K a multiple of 32 here). */
static void
dot_rows_f32(float *y, const float *w, size_t ld, const float *x, int n,
	     int K)
{
	for (int r = 0; r + 4 <= n; r += 4) {
		const float *w0 = w + (size_t)r * ld, *w1 = w0 + ld;
		const float *w2 = w1 + ld, *w3 = w2 + ld;
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		__m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;

		for (int k = 0; k < K; k += 32) {
			__m512 x0 = _mm512_loadu_ps(x + k);
			__m512 x1 = _mm512_loadu_ps(x + k + 16);
			a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), x0, a0);
			a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k), x0, a1);
			a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k), x0, a2);
			a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k), x0, a3);
			b0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k + 16), x1, b0);
			b1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k + 16), x1, b1);
			b2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k + 16), x1, b2);
			b3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k + 16), x1, b3);
		}
		_mm_storeu_ps(y + r, hsum4(_mm512_add_ps(a0, b0),
					   _mm512_add_ps(a1, b1),
					   _mm512_add_ps(a2, b2),
					   _mm512_add_ps(a3, b3)));
	}
}

/*
 * y[m][r] = w_r . x_m for m < M, r < n: per (m, r) the operations of
 * dot_rows_f32 in its order.  Four weight rows at a time, against two
 * activation rows at a time (16 accumulators), the rows' 4 x K weights
 * staying in L1/L2 while the pairs of activation rows pass over them.
 */
static void
dot_rows_multi_f32(float *y, size_t ldy, const float *w, size_t ld,
		   const float *x, size_t ldx, int M, int n, int K)
{
	for (int r = 0; r + 4 <= n; r += 4) {
		const float *w0 = w + (size_t)r * ld, *w1 = w0 + ld;
		const float *w2 = w1 + ld, *w3 = w2 + ld;
		int m = 0;

		for (; m + 2 <= M; m += 2) {
			const float *p = x + (size_t)m * ldx, *q = p + ldx;
			__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0;
			__m512 a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
			__m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
			__m512 d0 = a0, d1 = a0, d2 = a0, d3 = a0;

			for (int k = 0; k < K; k += 32) {
				__m512 p0 = _mm512_loadu_ps(p + k);
				__m512 p1 = _mm512_loadu_ps(p + k + 16);
				__m512 q0 = _mm512_loadu_ps(q + k);
				__m512 q1 = _mm512_loadu_ps(q + k + 16);
				__m512 v;

				v = _mm512_loadu_ps(w0 + k);
				a0 = _mm512_fmadd_ps(v, p0, a0);
				c0 = _mm512_fmadd_ps(v, q0, c0);
				v = _mm512_loadu_ps(w1 + k);
				a1 = _mm512_fmadd_ps(v, p0, a1);
				c1 = _mm512_fmadd_ps(v, q0, c1);
				v = _mm512_loadu_ps(w2 + k);
				a2 = _mm512_fmadd_ps(v, p0, a2);
				c2 = _mm512_fmadd_ps(v, q0, c2);
				v = _mm512_loadu_ps(w3 + k);
				a3 = _mm512_fmadd_ps(v, p0, a3);
				c3 = _mm512_fmadd_ps(v, q0, c3);
				v = _mm512_loadu_ps(w0 + k + 16);
				b0 = _mm512_fmadd_ps(v, p1, b0);
				d0 = _mm512_fmadd_ps(v, q1, d0);
				v = _mm512_loadu_ps(w1 + k + 16);
				b1 = _mm512_fmadd_ps(v, p1, b1);
				d1 = _mm512_fmadd_ps(v, q1, d1);
				v = _mm512_loadu_ps(w2 + k + 16);
				b2 = _mm512_fmadd_ps(v, p1, b2);
				d2 = _mm512_fmadd_ps(v, q1, d2);
				v = _mm512_loadu_ps(w3 + k + 16);
				b3 = _mm512_fmadd_ps(v, p1, b3);
				d3 = _mm512_fmadd_ps(v, q1, d3);
			}
			_mm_storeu_ps(y + (size_t)m * ldy + r,
				      hsum4(_mm512_add_ps(a0, b0),
					    _mm512_add_ps(a1, b1),
					    _mm512_add_ps(a2, b2),
					    _mm512_add_ps(a3, b3)));
			_mm_storeu_ps(y + (size_t)(m + 1) * ldy + r,
				      hsum4(_mm512_add_ps(c0, d0),
					    _mm512_add_ps(c1, d1),
					    _mm512_add_ps(c2, d2),
					    _mm512_add_ps(c3, d3)));
		}
		if (m < M)
			dot_rows_f32(y + (size_t)m * ldy + r, w0, ld,
				     x + (size_t)m * ldx, 4, K);
	}
}

/* ---- Q8_0, interleaved, against activations quantized per row ---- */

#define QK 32		/* values per block */
#define IL 16		/* rows per interleaved group */
#define IL_SCALES (IL * 2)
#define IL_BLOCK (IL_SCALES + IL * QK)

struct q8_act {
	int8_t *q;
	float *d;
	int32_t *off;
};

/* libtxl's quantize_q8 (txl-kernels-avx512.c), finite values only */
static void
quantize_q8(struct q8_act *a, const float *x, int K)
{
	for (int b = 0; b < K / QK; b++) {
		__m512 x0 = _mm512_loadu_ps(x + b * QK);
		__m512 x1 = _mm512_loadu_ps(x + b * QK + 16);
		float d = _mm512_reduce_max_ps(_mm512_max_ps(
			_mm512_abs_ps(x0), _mm512_abs_ps(x1))) / 127.0f;
		__m512 id = _mm512_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
		__m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id));
		__m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));

		_mm_storeu_si128((__m128i *)(void *)(a->q + b * QK),
				 _mm512_cvtsepi32_epi8(q0));
		_mm_storeu_si128((__m128i *)(void *)(a->q + b * QK + 16),
				 _mm512_cvtsepi32_epi8(q1));
		a->d[b] = d;
		a->off[b] = -128 * _mm512_reduce_add_epi32(
			_mm512_add_epi32(q0, q1));
	}
}

__attribute__((target("avx512vnni")))
static inline __m512i
il_step(__m512i s, __m512i w, const int8_t *x, int j)
{
	return _mm512_dpbusd_epi32(s, w, _mm512_set1_epi32(
		*(const int32_t *)(const void *)(x + 4 * j)));
}

/* The one-row kernel of libtxl (dot_il_vnni), blocks in pairs. */
__attribute__((target("avx512vnni")))
static void
dot_il(float *y, const uint8_t *blk, int ng, const struct q8_act *a, int K)
{
	const int nb = K / QK;
	const __m512i flip = _mm512_set1_epi8(-128);

	for (int g = 0; g < ng; g++) {
		__m512 acc[2] = { _mm512_setzero_ps(), _mm512_setzero_ps() };

		for (int b = 0; b < nb; b++, blk += IL_BLOCK) {
			const uint8_t *qs = blk + IL_SCALES;
			const int8_t *x = a->q + b * QK;
			__m512i s0 = _mm512_set1_epi32(a->off[b]);
			__m512i s1 = _mm512_setzero_si512();

			for (int j = 0; j < QK / 4; j += 2) {
				s0 = il_step(s0, _mm512_xor_si512(
					_mm512_loadu_si512(qs + 64 * j), flip),
					x, j);
				s1 = il_step(s1, _mm512_xor_si512(
					_mm512_loadu_si512(qs + 64 * j + 64),
					flip), x, j + 1);
			}
			acc[b & 1] = _mm512_add_ps(acc[b & 1], _mm512_mul_ps(
				_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
				_mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
					(const __m256i *)(const void *)blk)),
					      _mm512_set1_ps(a->d[b]))));
		}
		_mm512_storeu_ps(y + g * IL, _mm512_add_ps(acc[0], acc[1]));
	}
}

/* y[m][...] for M rows of activations: each block of a group (its 8 x 64
 * bytes of weights, flipped to unsigned once) against 4 rows at a time,
 * their 8 integer sums interleaved (exact in any order); per row the
 * float operations of dot_il in its order. */
__attribute__((target("avx512vnni")))
static void
dot_il_multi(float *y, size_t ldy, const uint8_t *w, int ng,
	     const struct q8_act *a, int M, int K)
{
	const int nb = K / QK;
	const __m512i flip = _mm512_set1_epi8(-128);

	for (int g = 0; g < ng; g++) {
		const uint8_t *grp = w + (size_t)g * nb * IL_BLOCK;
		int m0 = 0;

		for (; m0 + 4 <= M; m0 += 4) {
			const struct q8_act *am = a + m0;
			__m512 e[4], o[4];

#pragma GCC unroll 4
			for (int m = 0; m < 4; m++)
				e[m] = o[m] = _mm512_setzero_ps();
			for (int b = 0; b < nb; b++) {
				const uint8_t *blk = grp + (size_t)b * IL_BLOCK;
				const uint8_t *qs = blk + IL_SCALES;
				__m512 sc = _mm512_cvtph_ps(_mm256_loadu_si256(
					(const __m256i *)(const void *)blk));
				__m512i s[4], t[4];

#pragma GCC unroll 4
				for (int m = 0; m < 4; m++) {
					s[m] = _mm512_set1_epi32(am[m].off[b]);
					t[m] = _mm512_setzero_si512();
				}
#pragma GCC unroll 4
				for (int j = 0; j < QK / 4; j += 2) {
					__m512i w0 = _mm512_xor_si512(
						_mm512_loadu_si512(qs + 64 * j),
						flip);
					__m512i w1 = _mm512_xor_si512(
						_mm512_loadu_si512(qs + 64 * j +
								   64), flip);
#pragma GCC unroll 4
					for (int m = 0; m < 4; m++) {
						const int8_t *x = am[m].q +
							b * QK;
						s[m] = il_step(s[m], w0, x, j);
						t[m] = il_step(t[m], w1, x,
							       j + 1);
					}
				}
#pragma GCC unroll 4
				for (int m = 0; m < 4; m++) {
					__m512 v = _mm512_mul_ps(
						_mm512_cvtepi32_ps(
							_mm512_add_epi32(s[m],
									 t[m])),
						_mm512_mul_ps(sc, _mm512_set1_ps(
							am[m].d[b])));
					if (b & 1)
						o[m] = _mm512_add_ps(o[m], v);
					else
						e[m] = _mm512_add_ps(e[m], v);
				}
			}
#pragma GCC unroll 4
			for (int m = 0; m < 4; m++)
				_mm512_storeu_ps(y + (size_t)(m0 + m) * ldy +
						 g * IL, _mm512_add_ps(e[m], o[m]));
		}
		for (; m0 < M; m0++)
			dot_il(y + (size_t)m0 * ldy + g * IL, grp, 1, a + m0,
			       K);
	}
}

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define N_MAT 4
static const int shapes[N_MAT][2] = {	/* rows (N), cols (K) */
	{ 1152, 384 }, { 384, 384 }, { 1536, 384 }, { 384, 1536 },
};
#define LAYERS 6

/* The same for Q8_0 weights (interleaved, as libtxl's loader makes
 * them) against activations quantized per row, VNNI. */
static int
bench_q8(double ms)
{
	static uint8_t *w[LAYERS][N_MAT];
	static struct q8_act act[16];
	float *x = aligned_alloc(64, 16 * 1536 * sizeof(float));
	float *y = aligned_alloc(64, 16 * 1536 * sizeof(float));
	float *y1 = aligned_alloc(64, 1536 * sizeof(float));
	const int Ms[] = { 1, 2, 4, 8, 16 };
	double weights = 0, bytes = 0, base = 0;

	if (!__builtin_cpu_supports("avx512vnni")) {
		fprintf(stderr, "bench-rows: no AVX512_VNNI: no Q8_0 figures\n");
		return 0;
	}
	for (int l = 0; l < LAYERS; l++) {
		for (int i = 0; i < N_MAT; i++) {
			const int N = shapes[i][0], K = shapes[i][1];
			size_t n = (size_t)N / IL * (K / QK) * IL_BLOCK;

			w[l][i] = aligned_alloc(64, n);
			for (size_t j = 0; j < n; j++)
				w[l][i][j] = (uint8_t)(rand() % 255 - 127);
			/* the scales: halves of 2^-8 .. 2^-6 */
			for (size_t b = 0; b < n; b += IL_BLOCK)
				for (int r = 0; r < IL; r++) {
					uint16_t h = (uint16_t)(0x1c00 +
							        rand() % 0x800);
					memcpy(w[l][i] + b + 2 * r, &h, 2);
				}
			weights += (double)N * K;
			bytes += (double)n;
		}
	}
	for (int m = 0; m < 16; m++) {
		act[m].q = aligned_alloc(64, 1536);
		act[m].d = aligned_alloc(64, 1536 / QK * sizeof(float));
		act[m].off = aligned_alloc(64, 1536 / QK * sizeof(int32_t));
	}
	for (int j = 0; j < 16 * 1536; j++)
		x[j] = (float)rand() / RAND_MAX - 0.5f;
	for (int i = 0; i < N_MAT; i++) {
		const int N = shapes[i][0], K = shapes[i][1];

		for (int m = 0; m < 15; m++)
			quantize_q8(&act[m], x + (size_t)m * K, K);
		dot_il_multi(y, (size_t)N, w[0][i], N / IL, act, 15, K);
		for (int m = 0; m < 15; m++) {
			dot_il(y1, w[0][i], N / IL, &act[m], K);
			if (memcmp(y1, y + (size_t)m * N, sizeof(float) * N)) {
				fprintf(stderr, "bench-rows: Q8_0 row %d of "
					"matrix %d differs\n", m, i);
				return 1;
			}
		}
	}
	printf("\n%.1f MB of Q8_0 weights (interleaved), VNNI; rows x weights "
	       "per CPU second\n", bytes / 1e6);
	printf("%4s %12s %8s\n", "M", "G/s", "x M=1");
	for (size_t t = 0; t < sizeof Ms / sizeof *Ms; t++) {
		const int M = Ms[t];
		double best = 0;

		for (int rep = 0; rep < 3; rep++) {
			double t0 = cpu_now(), t1;
			long passes = 0;

			do {
				for (int l = 0; l < LAYERS; l++)
					for (int i = 0; i < N_MAT; i++) {
						const int N = shapes[i][0];
						const int K = shapes[i][1];

						if (M == 1)
							dot_il(y, w[l][i], N / IL,
							       act, K);
						else
							dot_il_multi(y, (size_t)N,
								     w[l][i],
								     N / IL, act,
								     M, K);
					}
				passes++;
				t1 = cpu_now();
			} while (t1 - t0 < ms / 1e3);
			double rate = passes * weights * M / (t1 - t0);
			if (rate > best)
				best = rate;
		}
		if (M == 1)
			base = best;
		printf("%4d %12.2f %8.2f\n", M, best / 1e9, best / base);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	double ms = argc > 2 && !strcmp(argv[1], "--ms") ? atof(argv[2]) : 300;
	float *w[LAYERS][N_MAT], *x, *y, *y1;
	const int Ms[] = { 1, 2, 4, 8, 16 };
	double weights = 0, base = 0;

	if (!__builtin_cpu_supports("avx512f")) {
		fprintf(stderr, "bench-rows: this CPU has no AVX-512\n");
		return 77;
	}
	srand(1);
	for (int l = 0; l < LAYERS; l++) {
		for (int i = 0; i < N_MAT; i++) {
			size_t n = (size_t)shapes[i][0] * shapes[i][1];

			w[l][i] = aligned_alloc(64, n * sizeof(float));
			for (size_t j = 0; j < n; j++)
				w[l][i][j] = (float)rand() / RAND_MAX - 0.5f;
			weights += (double)n;
		}
	}
	x = aligned_alloc(64, 16 * 1536 * sizeof(float));
	y = aligned_alloc(64, 16 * 1536 * sizeof(float));
	y1 = aligned_alloc(64, 1536 * sizeof(float));
	for (int j = 0; j < 16 * 1536; j++)
		x[j] = (float)rand() / RAND_MAX - 0.5f;

	/* the same floats as the one-row kernel, row by row */
	for (int i = 0; i < N_MAT; i++) {
		const int N = shapes[i][0], K = shapes[i][1];

		dot_rows_multi_f32(y, (size_t)N, w[0][i], (size_t)K, x,
				   (size_t)K, 15, N, K);
		for (int m = 0; m < 15; m++) {
			dot_rows_f32(y1, w[0][i], (size_t)K, x + (size_t)m * K,
				     N, K);
			if (memcmp(y1, y + (size_t)m * N, sizeof(float) * N)) {
				fprintf(stderr, "bench-rows: row %d of matrix "
					"%d differs\n", m, i);
				return 1;
			}
		}
	}
	printf("%.1f MB of F32 weights; rows x weights per CPU second\n",
	       weights * 4 / 1e6);
	printf("%4s %12s %8s\n", "M", "G/s", "x M=1");
	for (size_t t = 0; t < sizeof Ms / sizeof *Ms; t++) {
		const int M = Ms[t];
		double best = 0;

		for (int rep = 0; rep < 3; rep++) {
			double t0 = cpu_now(), t1;
			long passes = 0;

			do {
				for (int l = 0; l < LAYERS; l++)
					for (int i = 0; i < N_MAT; i++)
						dot_rows_multi_f32(
							y, (size_t)shapes[i][0],
							w[l][i],
							(size_t)shapes[i][1], x,
							(size_t)shapes[i][1], M,
							shapes[i][0],
							shapes[i][1]);
				passes++;
				t1 = cpu_now();
			} while (t1 - t0 < ms / 1e3);
			double rate = passes * weights * M / (t1 - t0);
			if (rate > best)
				best = rate;
		}
		if (M == 1)
			base = best;
		printf("%4d %12.2f %8.2f\n", M, best / 1e9, best / base);
	}
	return bench_q8(ms);
}
