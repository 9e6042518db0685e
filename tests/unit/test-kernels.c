/* SPDX-License-Identifier: MIT */
/*
 * test-kernels.c - the SIMD kernels against the scalar reference and
 * against sums computed here in double, on every instruction set this
 * CPU runs (txl_kernels_for()); the matrix products of txl-math.c with
 * 1, 2 and 3 pool threads; the thread pool itself.
 *
 * Tolerances: a float dot product of K terms, whatever the order of its
 * additions, is within gamma_K * sum|w_i x_i| of the exact one, gamma_K =
 * K u / (1 - K u), u = 2^-24 (Higham, Accuracy and Stability of Numerical
 * Algorithms, 3.1).  Each result is checked against the double-precision
 * sum with that bound (plus a tiny absolute term for subnormal inputs);
 * widening (F16, BF16, Q8_0 to float) is exact and checked bit for bit.
 * Q8_0 against quantized activations: the quantization (quantize_q8) bit
 * for bit against the scalar one, the integer sums of dot_rows_q8
 * exactly, the whole against the float product with the bound of the
 * activations' rounding (check_q8_dot).  The attention's Q8_0 products
 * against an int16 query likewise (check_q16_dot), and bit for bit the
 * scalar table's, as every table computes the same floats.
 *
 * Run under meson with each TXL_ISA, so that the products (which use the
 * chosen table) run on each instruction set too.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-products.h"
#include "txl-repack.h"
#include "txl-types.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* uniform in [-1, 1) */
static float
uniform(void)
{
	return (float)next_u32() / 2147483648.0f - 1.0f;
}

static uint16_t
f32_to_f16(float f)
{
	/* round to nearest even through the float16 arithmetic of the
	 * compiler, if any; else truncate carefully enough for tests */
	_Float16 h = (_Float16)f;
	uint16_t u;

	memcpy(&u, &h, sizeof u);
	return u;
}

static uint16_t
f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof u);
	u += 0x7fff + ((u >> 16) & 1);	/* nearest even (no NaNs here) */
	return (uint16_t)(u >> 16);
}

/* Weights of n rows of K values of dtype dt, rows ld bytes apart, and
 * their exact float values (n x K). */
static void *
make_weights(enum txl_dtype dt, int n, int K, size_t ld, float *exact)
{
	uint8_t *w = calloc((size_t)n * ld + 64, 1);

	CHECK(w);
	for (int r = 0; r < n; r++) {
		uint8_t *row = w + (size_t)r * ld;
		float *e = exact + (size_t)r * K;
		for (int k = 0; k < K; k++) {
			float v = uniform() * (r % 3 == 1 ? 100.0f : 1.0f);
			uint16_t h;
			switch (dt) {
			case TXL_F32:
				memcpy(row + 4 * k, &v, 4);
				e[k] = v;
				break;
			case TXL_F16:
				h = f32_to_f16(v);
				memcpy(row + 2 * k, &h, 2);
				e[k] = txl_f16_to_f32(h);
				break;
			case TXL_BF16:
				h = f32_to_bf16(v);
				memcpy(row + 2 * k, &h, 2);
				e[k] = txl_bf16_to_f32(h);
				break;
			case TXL_Q8_0: {
				struct txl_block_q8_0 *b = (void *)row;
				b += k / TXL_QK;
				if (k % TXL_QK == 0) {
					/* scales from 2^-20 to 2^4 */
					h = f32_to_f16(ldexpf(1.0f + uniform() / 2,
							      -20 + (int)(next_u32() % 25)));
					memcpy(&b->d, &h, 2);
				}
				b->qs[k % TXL_QK] = (int8_t)(next_u32() % 255 - 127);
				memcpy(&h, &b->d, 2);
				e[k] = b->qs[k % TXL_QK] * txl_f16_to_f32(h);
				break;
			}
			case TXL_Q4_0: {
				struct txl_block_q4_0 *b = (void *)row;
				b += k / TXL_QK;
				const int i = k % TXL_QK, q = (int)(next_u32() % 16);
				if (i == 0) {
					/* scales from -2^4 to -2^-20 and
					 * 2^-20 to 2^4 */
					h = f32_to_f16(ldexpf((next_u32() % 2 ? 1.0f
						: -1.0f) * (1.0f + uniform() / 2),
						-20 + (int)(next_u32() % 25)));
					memcpy(&b->d, &h, 2);
				}
				if (i < TXL_QK / 2)
					b->qs[i] = (uint8_t)((b->qs[i] & 0xf0) | q);
				else
					b->qs[i - TXL_QK / 2] = (uint8_t)
						((b->qs[i - TXL_QK / 2] & 0x0f) | q << 4);
				memcpy(&h, &b->d, 2);
				e[k] = (float)(q - 8) * txl_f16_to_f32(h);
				break;
			}
			default:
				CHECK(!"dtype");
			}
		}
	}
	return w;
}

/* |got - (acc + sum w x)| <= gamma_K sum |w x| (twice: slack for the
 * final additions of the partial sums), and half an ulp of the result
 * for the addition to acc (a product that accumulates: acc 1, 0 else) */
static void
check_dot(float got, float acc, const float *w, const float *x, int K,
	  const char *what)
{
	double exact = 0, mag = 0;

	for (int k = 0; k < K; k++) {
		exact += (double)w[k] * x[k];
		mag += fabs((double)w[k] * x[k]);
	}
	exact += acc;
	double u = ldexp(1.0, -24), tol = 2 * K * u / (1 - K * u) * mag + 1e-37 +
		(acc != 0.0f ? u * fabs(exact) : 0.0);
	if (!(fabs(got - exact) <= tol)) {
		fprintf(stderr, "FAIL: %s: K %d: %.9g vs exact %.9g (tol %g)\n",
			what, K, got, exact, tol);
		exit(1);
	}
}

#define RUN_ON(test, kt)                                                     \
	do {                                                                 \
		test(kt);                                                    \
		fprintf(stderr, "ok %s %s\n", #test, (kt)->name);            \
	} while (0)

/* the weights' and the memory's */
static const enum txl_dtype dtypes[] = { TXL_F32, TXL_F16, TXL_BF16,
					 TXL_Q8_0, TXL_Q4_0 };

static void
test_dot_rows(const struct txl_kernels *kt)
{
	static const int Ks[] = { 1, 7, 8, 12, 15, 16, 17, 31, 32, 33, 64, 96,
				  100, 384, 1536 };
	static const int ns[] = { 1, 3, 4, 5, 9, 17 };

	for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
		enum txl_dtype dt = dtypes[d];
		for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
			int K = Ks[i];
			if (txl_dtype_blocked(dt) && K % TXL_QK)
				continue;
			for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
				int n = ns[j];
				/* rows packed, then further apart (attention reads
				 * one head's slice of wider rows) */
				for (int pad = 0; pad < 2; pad++) {
					size_t ld = txl_row_bytes(dt, K) +
						(size_t)pad * 68;
					float *e = malloc(sizeof(float) * n * K);
					float *x = malloc(sizeof(float) * K);
					float y[17], w1[1536];
					CHECK(e && x);
					void *w = make_weights(dt, n, K, ld, e);
					for (int k = 0; k < K; k++)
						x[k] = uniform();
					kt->dot_rows[dt](y, w, ld, x, n, K);
					for (int r = 0; r < n; r++) {
						char what[64];
						snprintf(what, sizeof what, "%s %s dot row %d",
							 kt->name, txl_dtype_name(dt), r);
						check_dot(y[r], 0, e + (size_t)r * K, x, K, what);
						/* widen is exact */
						kt->widen[dt](w1, (uint8_t *)w + (size_t)r * ld,
							      (size_t)K);
						CHECK(memcmp(w1, e + (size_t)r * K,
							     sizeof(float) * K) == 0);
					}
					free(w);
					free(e);
					free(x);
				}
			}
		}
	}
}

/* Every half, widened by the table, is txl_f16_to_f32 of it (NaNs: a
 * NaN; vcvtph2ps quiets signalling ones). */
static void
test_f16_all(const struct txl_kernels *kt)
{
	uint16_t *h = malloc(65536 * 2);
	float *f = malloc(65536 * 4);

	CHECK(h && f);
	for (int i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	kt->widen[TXL_F16](f, h, 65536);
	for (int i = 0; i < 65536; i++) {
		float want = txl_f16_to_f32((uint16_t)i);
		if (isnan(want))
			CHECK(isnan(f[i]));
		else
			CHECK(memcmp(&f[i], &want, 4) == 0);
	}
	kt->widen[TXL_BF16](f, h, 65536);
	for (int i = 0; i < 65536; i++) {
		float want = txl_bf16_to_f32((uint16_t)i);
		CHECK(memcmp(&f[i], &want, 4) == 0);
	}
	free(h);
	free(f);
}

/* A Q8_0 block by hand: d = 0.5 (0x3800), values -127 .. 127. */
static void
test_q8_0_block(const struct txl_kernels *kt)
{
	struct txl_block_q8_0 b[2];
	float out[64], x[64], y;

	for (int k = 0; k < 2; k++) {
		b[k].d = k ? 0x3800 : 0xbc00;	/* 0.5, -1.0 */
		for (int i = 0; i < TXL_QK; i++)
			b[k].qs[i] = (int8_t)(i * 8 - 127);
	}
	kt->widen[TXL_Q8_0](out, b, 64);
	for (int i = 0; i < 64; i++) {
		float want = (float)((i % 32) * 8 - 127) * (i < 32 ? -1.0f : 0.5f);
		CHECK(out[i] == want);
		x[i] = i < 32 ? 1.0f : 2.0f;
	}
	/* sum(-q) + sum(q * 0.5 * 2) = 0 exactly (all integers) */
	kt->dot_rows[TXL_Q8_0](&y, b, sizeof b, x, 1, 64);
	CHECK(y == 0.0f);
	x[0] = 3.0f;		/* -(-127) * 3 instead of * 1: +254 */
	kt->dot_rows[TXL_Q8_0](&y, b, sizeof b, x, 1, 64);
	CHECK(y == 254.0f);
}

/* A Q4_0 block by hand: d = -0.5, q = i % 16 (low nibbles) and 15 - i %
 * 16 (high ones). */
static void
test_q4_0_block(const struct txl_kernels *kt)
{
	struct txl_block_q4_0 b[2];
	float out[64];

	for (int k = 0; k < 2; k++) {
		b[k].d = k ? 0x4000 : 0xb800;	/* 2.0, -0.5 */
		for (int i = 0; i < TXL_QK / 2; i++)
			b[k].qs[i] = (uint8_t)(i | (15 - i) << 4);
	}
	kt->widen[TXL_Q4_0](out, b, 64);
	for (int i = 0; i < 64; i++) {
		const int j = i % 32, q = j < 16 ? j : 15 - (j - 16);
		CHECK(out[i] == (float)(q - 8) * (i < 32 ? -0.5f : 2.0f));
	}
}

/* Narrowing to Q4_0 (txl_q4_0_scale()): hand-worked blocks; in random
 * ones every value within half a step, but those of the largest's
 * opposite sign past 7.5 steps, within one; the table's bit for bit the
 * scalar one's. */
static void
test_narrow_q4_0(const struct txl_kernels *kt)
{
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);
	enum { NB = 131, N = NB * TXL_QK };
	float *x = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
	struct txl_block_q4_0 got[NB + 1], want[NB];

	CHECK(x && back);
	for (int b = 0; b < NB; b++) {
		/* magnitudes with normal F16 scales (8 * 2^-14 to 65504 * 8) */
		const float mag = ldexpf(1.0f, -10 + (int)(next_u32() % 28));
		for (int i = 0; i < TXL_QK; i++)
			x[b * TXL_QK + i] = uniform() * mag;
	}
	/* block 0: largest 8, so d = -1 and q = 8 - x rounded, halves to
	 * the larger q (the smaller value) */
	static const float b0[9] = { 8.0f, -1.0f, 3.4f, -7.6f, 2.5f, -2.5f,
				     0.4f, -0.5f, 7.5f };
	static const int q0[9] = { 0, 9, 5, 15, 6, 11, 8, 9, 1 };
	for (int i = 0; i < TXL_QK; i++)
		x[i] = i < 9 ? b0[i] : 0.0f;
	for (int i = 0; i < TXL_QK; i++)
		x[TXL_QK + i] = 0.0f;			/* block 1: zeros */
	x[2 * TXL_QK + 5] = NAN;			/* block 2: a NaN */
	x[3 * TXL_QK + 7] = -INFINITY;			/* block 3: an inf */
	x[4 * TXL_QK + 9] = -65504.0f * 8.0f * 1.01f;	/* block 4: too big */
	for (int i = 0; i < TXL_QK; i++)	/* block 5: largest negative */
		x[5 * TXL_QK + i] = i == 3 ? -16.0f : (float)(i % 8);
	/* block 6: the largest magnitude twice, the first one's sign; block
	 * 7: negative zeros (a zero block) */
	for (int i = 0; i < TXL_QK; i++)
		x[6 * TXL_QK + i] = i == 2 ? -4.0f : i == 9 ? 4.0f
			: (float)(i % 7) / 2;
	for (int i = 0; i < TXL_QK; i++)
		x[7 * TXL_QK + i] = -0.0f;

	ref->narrow[TXL_Q4_0](want, x, N);
	CHECK_EQ(want[0].d, 0xbc00);		/* -1.0 */
	for (int i = 0; i < TXL_QK; i++) {
		const int q = i < 16 ? want[0].qs[i] & 15 : want[0].qs[i - 16] >> 4;
		CHECK_EQ(q, i < 9 ? q0[i] : 8);
	}
	CHECK_EQ(want[1].d, 0);
	CHECK_EQ(want[5].d, 0x4000);		/* 2.0: -16 is q = 0 */
	CHECK_EQ(want[6].d, 0x3800);		/* 0.5: -4 is q = 0 */
	CHECK_EQ(want[6].qs[2] & 15, 0);
	CHECK_EQ(want[6].qs[9] & 15, 15);	/* 4: 16 clipped */
	CHECK_EQ(want[7].d, 0);
	for (int i = 0; i < TXL_QK / 2; i++)
		CHECK_EQ(want[7].qs[i], 0x88);
	for (int b = 1; b <= 4; b++)
		for (int i = 0; i < TXL_QK / 2; i++)
			CHECK_EQ(want[b].qs[i], 0x88);
	CHECK((want[2].d & 0x7c00) == 0x7c00 && (want[2].d & 0x3ff));
	CHECK((want[3].d & 0x7c00) == 0x7c00 && (want[3].d & 0x3ff));
	CHECK_EQ(want[4].d, 0x7c00);		/* +inf: -(too big) / 8 */
	ref->widen[TXL_Q4_0](back, want, N);
	for (int i = 0; i < 4 * TXL_QK; i++)
		CHECK(i < TXL_QK ? back[i] == (float)(8 - q0[i < 9 ? i : 6]) :
		      i < 2 * TXL_QK ? back[i] == 0.0f : isnan(back[i]));
	for (int b = 5; b < NB; b++) {
		float m = 0.0f;
		for (int i = 0; i < TXL_QK; i++)
			if (fabsf(x[b * TXL_QK + i]) > fabsf(m))
				m = x[b * TXL_QK + i];
		const double d = fabs(txl_f16_to_f32(want[b].d));
		for (int i = 0; i < TXL_QK; i++) {
			const int k = b * TXL_QK + i;
			/* the rounding of x / d: a few ulps of a step; far
			 * values, up to |m| = 8 |d| (1 + 2^-11) (d rounded to
			 * F16) from q = 15, within a step and 2^-8 */
			const bool far = (x[k] < 0) != (m < 0) &&
				fabs(x[k]) > 7.5 * d;
			CHECK(fabs((double)back[k] - x[k]) <=
			      d * (far ? 1.0 + 0x1p-7 : 0.5 + 0x1p-18));
		}
	}
	/* odd block counts: no byte past the last block */
	for (int nb = NB; nb > NB - 20; nb -= 7) {
		memset(got, 0xa5, sizeof got);
		kt->narrow[TXL_Q4_0](got, x, (size_t)nb * TXL_QK);
		CHECK(memcmp(got, want, sizeof *got * (size_t)nb) == 0);
		CHECK_EQ(got[nb].d, 0xa5a5);
	}
	free(x);
	free(back);
}

/* ---- Q8_0 against quantized activations ---- */

/* The activations of one product: K values and their quantization. */
struct act {
	int K;
	float *x;
	struct txl_q8_act a;
};

static void
act_init(struct act *v, int K)
{
	v->K = K;
	v->x = malloc(sizeof(float) * K);
	v->a.q = malloc((size_t)K);
	v->a.d = malloc(sizeof(float) * (K / TXL_QK));
	v->a.off = malloc(sizeof(int32_t) * (K / TXL_QK));
	CHECK(v->x && v->a.q && v->a.d && v->a.off);
}

static void
act_free(struct act *v)
{
	free(v->x);
	free(v->a.q);
	free(v->a.d);
	free(v->a.off);
}

/* y = acc + w . x (w: K values of Q8_0 blocks, exact values e) computed from
 * the quantized activations: each x_i is replaced by q_i d (d = the
 * block's scale), which is within d (1/2 + 2^-15) of it (round to
 * nearest: |x_i / d - q_i| <= 1/2, and x_i / d is x_i * fl(1 / d) up to
 * a relative 2u, |x_i / d| <= 127, u = 2^-24), so y moves by at most
 * sum_i |w_i| d (1/2 + 2^-15); the integer sums are exact, and the nb
 * block terms, each rounded at most twice (the product of the scales,
 * then by the sum), are summed in float: gamma_(nb + 2) sum |w_i q_i d|
 * (twice, as check_dot). */
static void
check_q8_dot(float got, float acc, const float *e, const struct act *v,
	     const char *what)
{
	const int nb = v->K / TXL_QK;
	double exact = 0, quant = 0, mag = 0;

	for (int k = 0; k < v->K; k++) {
		double d = v->a.d[k / TXL_QK];
		exact += (double)e[k] * v->x[k];
		quant += fabs((double)e[k]) * d * (0.5 + ldexp(1.0, -15));
		mag += fabs((double)e[k] * v->a.q[k]) * d;
	}
	exact += acc;
	double u = ldexp(1.0, -24);
	double tol = quant + 2 * (nb + 2) * u / (1 - (nb + 2) * u) * mag + 1e-37 +
		(acc != 0.0f ? u * fabs(exact) : 0.0);
	if (!(fabs(got - exact) <= tol)) {
		fprintf(stderr, "FAIL: %s: K %d: %.9g vs exact %.9g (tol %g)\n",
			what, v->K, got, exact, tol);
		exit(1);
	}
}

/* The quantization: the scale of a block is its max |x| / 127, every
 * value the nearest multiple of it (the largest one +-127), and off is
 * -128 times the block's sum; each table's the scalar one's bit for bit
 * (the same operations, and a max, exact in any order). */
static void
test_quantize_q8(const struct txl_kernels *kt)
{
	static const int Ks[] = { 32, 96, 384, 1536 };
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
		struct act v, w;
		act_init(&v, Ks[i]);
		act_init(&w, Ks[i]);
		for (int k = 0; k < v.K; k++)
			/* blocks from 2^-30 to 2^30; one block all zero */
			v.x[k] = k / TXL_QK == 1 ? 0.0f :
				uniform() * ldexpf(1.0f, (k / TXL_QK * 13) % 61 - 30);
		v.x[5] = -ldexpf(1.0f, 40);	/* a block led by a negative */
		/* block 2: scale 1, halves: ties, to even */
		for (int k = 64; k < v.K && k < 96; k++)
			v.x[k] = k == 64 ? 127.0f : (float)(k % 7) - 3.5f;
		kt->quantize_q8(&v.a, v.x, v.K);
		for (int k = 65; k < v.K && k < 96; k++)
			CHECK_EQ(v.a.q[k], rint(v.x[k]));
		ref->quantize_q8(&w.a, v.x, v.K);
		CHECK(memcmp(v.a.q, w.a.q, (size_t)v.K) == 0);
		CHECK(memcmp(v.a.d, w.a.d, sizeof(float) * (v.K / TXL_QK)) == 0);
		CHECK(memcmp(v.a.off, w.a.off,
			     sizeof(int32_t) * (v.K / TXL_QK)) == 0);
		for (int b = 0; b < v.K / TXL_QK; b++) {
			float amax = 0.0f, d = v.a.d[b];
			int qmax = 0, sum = 0;
			for (int j = 0; j < TXL_QK; j++) {
				int k = b * TXL_QK + j, q = v.a.q[k];
				amax = fmaxf(amax, fabsf(v.x[k]));
				qmax = abs(q) > qmax ? abs(q) : qmax;
				sum += q;
				CHECK(fabs(v.x[k] - (double)q * d) <=
				      d * (0.5 + ldexp(1.0, -15)));
			}
			CHECK(d == amax / 127.0f);
			CHECK_EQ(qmax, amax > 0.0f ? 127 : 0);
			CHECK_EQ(v.a.off[b], -128 * sum);
		}
		/* a NaN or an inf: the block's scale NaN, so its products */
		v.x[3] = NAN;
		v.x[v.K - 1] = INFINITY;
		kt->quantize_q8(&v.a, v.x, v.K);
		CHECK(isnan(v.a.d[0]) && isnan(v.a.d[v.K / TXL_QK - 1]));
		act_free(&v);
		act_free(&w);
	}
}

/* Room for the interleaved copy of rows x K Q8_0 or Q4_0 values, aligned
 * as the model's arena aligns it (aligned_alloc wants a multiple of
 * 64). */
static void *
alloc_il(enum txl_dtype dt, int rows, int K)
{
	return aligned_alloc(64, (txl_il_bytes(dt, rows, K) + 63) / 64 * 64);
}

static void make_int_act(struct act *v);

/* The integer case of the Q8_0 products: n rows of w (ld bytes apart)
 * and v's quantized activations with every scale 1, random values and
 * the extremes in every third block (weights -128 and 127, activations
 * -127 and 127). */
static void
make_integers(uint8_t *w, size_t ld, int n, struct act *v)
{
	const int K = v->K;

	for (int r = 0; r < n; r++) {
		struct txl_block_q8_0 *q = (void *)(w + (size_t)r * ld);
		for (int b = 0; b < K / TXL_QK; b++) {
			q[b].d = 0x3c00;	/* 1.0 */
			for (int t = 0; t < TXL_QK && b % 3 == 2; t++)
				q[b].qs[t] = (int8_t)((r + t) % 2 ? 127 : -128);
		}
	}
	make_int_act(v);
}

/* make_integers' activations: scales 1, the extremes -127 and 127 in
 * every third block, random values elsewhere. */
static void
make_int_act(struct act *v)
{
	const int K = v->K;

	for (int k = 0; k < K; k++)
		v->a.q[k] = (int8_t)(k / TXL_QK % 3 == 2 ? (k % 3 ? -127 : 127) :
				     (int)(next_u32() % 255) - 127);
	for (int b = 0; b < K / TXL_QK; b++) {
		int32_t sum = 0;
		for (int t = 0; t < TXL_QK; t++)
			sum += v->a.q[b * TXL_QK + t];
		v->a.d[b] = 1.0f;
		v->a.off[b] = -128 * sum;
	}
}

/* Each table's dot_rows_q8: (1) with both scales 1, every value an
 * integer whose sums stay below 2^24, so that any order of the float
 * additions is exact: the result must be the integer dot product itself,
 * extreme values included (weights -128 .. 127, activations -127 .. 127);
 * (2) with random scales, against the float product (check_q8_dot). */
static void
test_dot_rows_q8(const struct txl_kernels *kt)
{
	/* odd block counts (a last block alone), rows in fours and not */
	static const int Ks[] = { 32, 64, 96, 384, 416, 1536 };
	static const int ns[] = { 1, 3, 4, 5, 9, 17 };

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
		int K = Ks[i];
		struct act v;
		act_init(&v, K);
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
			int n = ns[j];
			for (int pad = 0; pad < 2; pad++) {
				size_t ld = txl_row_bytes(TXL_Q8_0, K) +
					(size_t)pad * 68;
				float *e = malloc(sizeof(float) * n * K), y[17];
				CHECK(e);
				uint8_t *w = make_weights(TXL_Q8_0, n, K, ld, e);
				/* (1) integers */
				make_integers(w, ld, n, &v);
				kt->dot_rows_q8(y, w, ld, &v.a, n, K);
				for (int r = 0; r < n; r++) {
					const struct txl_block_q8_0 *q =
						(const void *)(w + (size_t)r * ld);
					int64_t want = 0;
					for (int k = 0; k < K; k++)
						want += q[k / TXL_QK].qs[k % TXL_QK] *
							v.a.q[k];
					CHECK(llabs(want) < (1 << 24));
					if (y[r] != (float)want) {
						fprintf(stderr, "FAIL: %s q8 K %d n %d row %d: "
							"%.9g, want %lld\n", kt->name, K,
							n, r, y[r], (long long)want);
						exit(1);
					}
				}
				free(w);
				/* (2) random scales, the activations quantized */
				w = make_weights(TXL_Q8_0, n, K, ld, e);
				for (int k = 0; k < K; k++)
					v.x[k] = uniform() * (k % 7 ? 1.0f : 30.0f);
				kt->quantize_q8(&v.a, v.x, K);
				kt->dot_rows_q8(y, w, ld, &v.a, n, K);
				for (int r = 0; r < n; r++) {
					char what[64];
					snprintf(what, sizeof what, "%s q8 dot row %d",
						 kt->name, r);
					check_q8_dot(y[r], 0, e + (size_t)r * K, &v, what);
				}
				free(w);
				free(e);
			}
		}
		act_free(&v);
	}
}

/* An int16 query of K values (struct txl_q16_act). */
struct act16 {
	int K;
	float *x;
	struct txl_q16_act a;
};

static void
act16_init(struct act16 *v, int K)
{
	v->K = K;
	v->x = malloc(sizeof(float) * K);
	v->a.q = malloc(sizeof(int16_t) * K);
	v->a.d = malloc(sizeof(float) * (K / TXL_QK));
	CHECK(v->x && v->a.q && v->a.d);
}

static void
act16_free(struct act16 *v)
{
	free(v->x);
	free(v->a.q);
	free(v->a.d);
}

/* txl_quantize_q16: the scale of a block is its max |x| / 32767, every
 * value within d (1/2 + 2^-9) of x (x / d rounded to nearest even, the
 * division correct to a relative 2^-24 of at most 32767), the largest
 * +-32767; an all-zero block has scale 0 and values 0, one with a NaN or
 * an inf a NaN scale; the smallest scales (subnormal values) too. */
static void
test_quantize_q16(void)
{
	static const int Ks[] = { 32, 64, 384 };

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
		struct act16 v;
		act16_init(&v, Ks[i]);
		for (int k = 0; k < v.K; k++)
			/* blocks from 2^-140 (subnormal) to 2^60; one zero */
			v.x[k] = k / TXL_QK == 1 ? 0.0f : uniform() *
				ldexpf(1.0f, (k / TXL_QK * 37) % 201 - 140);
		v.x[3] = -ldexpf(1.0f, 20);	/* led by a negative */
		txl_quantize_q16(&v.a, v.x, v.K);
		for (int b = 0; b < v.K / TXL_QK; b++) {
			float amax = 0.0f, d = v.a.d[b];
			int qmax = 0;
			for (int j = 0; j < TXL_QK; j++) {
				int k = b * TXL_QK + j, q = v.a.q[k];
				amax = fmaxf(amax, fabsf(v.x[k]));
				qmax = abs(q) > qmax ? abs(q) : qmax;
				CHECK(abs(q) <= 32767);
				if (d > 0.0f)
					CHECK(fabs(v.x[k] - (double)q * d) <=
					      d * (0.5 + ldexp(1.0, -9)));
				else
					CHECK(q == 0 && fabsf(v.x[k]) <=
					      ldexpf(1.0f, -149) * 32767);
			}
			CHECK(d == amax / 32767.0f);
			if (d > ldexpf(1.0f, -126))	/* a normal scale */
				CHECK_EQ(qmax, 32767);
		}
		CHECK(v.K == TXL_QK || v.a.d[1] == 0.0f);
		v.x[3] = NAN;
		v.x[v.K - 1] = INFINITY;
		txl_quantize_q16(&v.a, v.x, v.K);
		CHECK(isnan(v.a.d[0]) && isnan(v.a.d[v.K / TXL_QK - 1]));
		act16_free(&v);
	}
}

/* y = w . x from the int16 query, as check_q8_dot: each x_i replaced by
 * q_i d, within d (1/2 + 2^-9) of it; the integer sums exact, each of
 * the nb block terms rounded at most three times (the sum to float, the
 * product of the scales, the product), then summed in float. */
static void
check_q16_dot(float got, const float *e, const struct act16 *v,
	      const char *what)
{
	const int nb = v->K / TXL_QK;
	double exact = 0, quant = 0, mag = 0;

	for (int k = 0; k < v->K; k++) {
		double d = v->a.d[k / TXL_QK];
		exact += (double)e[k] * v->x[k];
		quant += fabs((double)e[k]) * d * (0.5 + ldexp(1.0, -9));
		mag += fabs((double)e[k] * v->a.q[k]) * d;
	}
	double u = ldexp(1.0, -24);
	double tol = quant + 2 * (nb + 3) * u / (1 - (nb + 3) * u) * mag + 1e-37;
	if (!(fabs(got - exact) <= tol)) {
		fprintf(stderr, "FAIL: %s: K %d: %.9g vs exact %.9g (tol %g)\n",
			what, v->K, got, exact, tol);
		exit(1);
	}
}

/* Each table's dot_rows_q16: (1) scales 1 and extreme values (weights
 * -128 and 127, the query +-32767) in every other block: block sums up
 * to 2^27, so the result is the sum, in block order, of each block's
 * exact integer sum rounded to float, computed here; (2) random scales
 * and values: bit for bit the scalar table's result (every table does
 * the same float operations, txl-kernels.h), and against the float
 * product (check_q16_dot).  Rows in eights and not, padded apart. */
static void
test_dot_rows_q16(const struct txl_kernels *kt)
{
	static const int Ks[] = { 32, 64, 96, 128, 384 };
	static const int ns[] = { 1, 7, 8, 9, 17, 32 };
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
		const int K = Ks[i], nb = K / TXL_QK;
		struct act16 v;
		act16_init(&v, K);
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
			const int n = ns[j];
			for (int pad = 0; pad < 2; pad++) {
				const size_t ld = txl_row_bytes(TXL_Q8_0, K) +
					(size_t)pad * 68;
				float *e = malloc(sizeof(float) * n * K);
				float y[32], want[32];
				CHECK(e);
				uint8_t *w = make_weights(TXL_Q8_0, n, K, ld, e);
				/* (1) integers */
				for (int r = 0; r < n; r++) {
					struct txl_block_q8_0 *q =
						(void *)(w + (size_t)r * ld);
					for (int b = 0; b < nb; b++) {
						q[b].d = 0x3c00;	/* 1.0 */
						for (int t = 0; t < TXL_QK && b % 2; t++)
							q[b].qs[t] = (int8_t)((r + t) % 2 ?
								-128 : 127);
					}
				}
				for (int k = 0; k < K; k++)
					v.a.q[k] = (int16_t)(k / TXL_QK % 2 ?
						((k + 1) % 2 ? 32767 : -32767) :
						(int)(next_u32() % 65535) - 32767);
				for (int b = 0; b < nb; b++)
					v.a.d[b] = 1.0f;
				kt->dot_rows_q16(y, w, ld, &v.a, n, K);
				for (int r = 0; r < n; r++) {
					const struct txl_block_q8_0 *q =
						(const void *)(w + (size_t)r * ld);
					float acc = 0.0f;
					for (int b = 0; b < nb; b++) {
						int64_t s = 0;
						for (int t = 0; t < TXL_QK; t++)
							s += q[b].qs[t] *
								v.a.q[b * TXL_QK + t];
						CHECK(llabs(s) <= 32 * 128 * 32767);
						acc += (float)s;
					}
					if (y[r] != acc) {
						fprintf(stderr, "FAIL: %s q16 K %d n %d row "
							"%d: %.9g, want %.9g\n", kt->name,
							K, n, r, y[r], acc);
						exit(1);
					}
				}
				free(w);
				/* (2) random scales, the query quantized */
				w = make_weights(TXL_Q8_0, n, K, ld, e);
				for (int k = 0; k < K; k++)
					v.x[k] = uniform() * (k % 7 ? 1.0f : 30.0f);
				txl_quantize_q16(&v.a, v.x, K);
				kt->dot_rows_q16(y, w, ld, &v.a, n, K);
				ref->dot_rows_q16(want, w, ld, &v.a, n, K);
				CHECK(memcmp(y, want, sizeof(float) * n) == 0);
				for (int r = 0; r < n; r++) {
					char what[64];
					snprintf(what, sizeof what, "%s q16 dot row %d",
						 kt->name, r);
					check_q16_dot(y[r], e + (size_t)r * K, &v, what);
				}
				free(w);
				free(e);
			}
		}
		act16_free(&v);
	}
}

/* Each table's dot_rows_q4 (a Q4_0 memory against an int8 query): (1)
 * scales 1, the extreme values (q 0 and 15, the query +-127): the exact
 * integer sums, block by block; (2) random scales and values: bit for
 * bit the scalar table's result (txl-kernels.h), and against the float
 * product (check_q8_dot: every key value widens exactly, and the int
 * sums, below 2^15, are floats).  Rows in sixteens, eights and not,
 * padded apart. */
static void
test_dot_rows_q4(const struct txl_kernels *kt)
{
	static const int Ks[] = { 32, 64, 96, 128 };
	static const int ns[] = { 1, 7, 8, 9, 16, 17, 31, 32 };
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
		const int K = Ks[i], nb = K / TXL_QK;
		struct act v;
		act_init(&v, K);
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
			const int n = ns[j];
			for (int pad = 0; pad < 2; pad++) {
				const size_t ld = txl_row_bytes(TXL_Q4_0, K) +
					(size_t)pad * 18;
				float *e = malloc(sizeof(float) * n * K);
				float y[32], want[32];
				CHECK(e);
				uint8_t *w = make_weights(TXL_Q4_0, n, K, ld, e);
				/* (1) integers */
				for (int r = 0; r < n; r++) {
					struct txl_block_q4_0 *q =
						(void *)(w + (size_t)r * ld);
					for (int b = 0; b < nb; b++) {
						q[b].d = 0x3c00;	/* 1.0 */
						for (int t = 0; t < TXL_QK / 2 && b % 2; t++)
							q[b].qs[t] = (r + t) % 2 ? 0xf0 : 0x0f;
					}
				}
				for (int b = 0; b < nb; b++) {
					int32_t sum = 0;
					for (int t = 0; t < TXL_QK; t++) {
						v.a.q[b * TXL_QK + t] = (int8_t)(b % 2 ?
							(t % 3 ? 127 : -127) :
							(int)(next_u32() % 255) - 127);
						sum += v.a.q[b * TXL_QK + t];
					}
					v.a.d[b] = 1.0f;
					v.a.off[b] = -128 * sum;
				}
				kt->dot_rows_q4(y, w, ld, &v.a, n, K);
				for (int r = 0; r < n; r++) {
					const struct txl_block_q4_0 *q =
						(const void *)(w + (size_t)r * ld);
					float acc = 0.0f;
					for (int b = 0; b < nb; b++) {
						int32_t s = 0;
						for (int t = 0; t < TXL_QK; t++) {
							const int h = t < 16 ?
								q[b].qs[t] & 15 :
								q[b].qs[t - 16] >> 4;
							s += (h - 8) * v.a.q[b * TXL_QK + t];
						}
						acc += (float)s;
					}
					if (y[r] != acc) {
						fprintf(stderr, "FAIL: %s q4 K %d n %d row "
							"%d: %.9g, want %.9g\n", kt->name,
							K, n, r, y[r], acc);
						exit(1);
					}
				}
				free(w);
				/* (2) random scales, the query quantized */
				w = make_weights(TXL_Q4_0, n, K, ld, e);
				for (int k = 0; k < K; k++)
					v.x[k] = uniform() * (k % 7 ? 1.0f : 30.0f);
				ref->quantize_q8(&v.a, v.x, K);
				kt->dot_rows_q4(y, w, ld, &v.a, n, K);
				ref->dot_rows_q4(want, w, ld, &v.a, n, K);
				CHECK(memcmp(y, want, sizeof(float) * n) == 0);
				for (int r = 0; r < n; r++) {
					char what[64];
					snprintf(what, sizeof what, "%s q4 dot row %d",
						 kt->name, r);
					check_q8_dot(y[r], 0.0f, e + (size_t)r * K, &v,
						     what);
				}
				free(w);
				free(e);
			}
		}
		act_free(&v);
	}
}

/* The integer case of the Q4_0 products: n rows of w (ld bytes apart)
 * with every scale 1, the extreme values 0 and 15 in every third block
 * (make_weights' random ones elsewhere), and make_integers'
 * activations. */
static void
make_integers_q4(uint8_t *w, size_t ld, int n, struct act *v)
{
	for (int r = 0; r < n; r++) {
		struct txl_block_q4_0 *q = (void *)(w + (size_t)r * ld);
		for (int b = 0; b < v->K / TXL_QK; b++) {
			q[b].d = 0x3c00;	/* 1.0 */
			for (int t = 0; t < TXL_QK / 2 && b % 3 == 2; t++)
				q[b].qs[t] = (r + t) % 2 ? 0xf0 : 0x0f;
		}
	}
	make_int_act(v);
}

/* The exact integer product of a row of Q8_0 or Q4_0 values (scales
 * ignored) and the quantized activations: sum q x, or sum (q - 8) x. */
static int64_t
int_row_dot(enum txl_dtype dt, const uint8_t *row, const struct act *v)
{
	int64_t sum = 0;

	for (int k = 0; k < v->K; k++) {
		const int b = k / TXL_QK, t = k % TXL_QK;
		int q;
		if (dt == TXL_Q8_0) {
			q = ((const struct txl_block_q8_0 *)(const void *)row)[b].qs[t];
		} else {
			const uint8_t *qs = ((const struct txl_block_q4_0 *)
					     (const void *)row)[b].qs;
			q = (t < TXL_QK / 2 ? qs[t] & 15 : qs[t - TXL_QK / 2] >> 4) - 8;
		}
		sum += q * v->a.q[k];
	}
	return sum;
}

/* Each table's dot_il and dot_il_q4 (interleaved Q8_0 and Q4_0, the
 * copies of txl_interleave()): (1) integers as in test_dot_rows_q8 and
 * test_dot_rows_q4, extremes included: the exact integer dot product;
 * (2) random scales: against the float product (check_q8_dot), and bit
 * for bit the scalar table's result, as every table does the same float
 * operations in the same order (txl-kernels.h); the padding rows of a
 * partial group are 0. */
static void
test_dot_il(const struct txl_kernels *kt)
{
	static const int Ks[] = { 32, 96, 384, 416 };
	static const int ns[] = { 1, 15, 16, 17, 33 };
	static const enum txl_dtype dts[] = { TXL_Q8_0, TXL_Q4_0 };
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks * 2; i++) {
		const enum txl_dtype dt = dts[i % 2];
		const int K = Ks[i / 2];
		const size_t ld = txl_row_bytes(dt, K);
		const txl_dot_il_fn dot = dt == TXL_Q8_0 ? kt->dot_il : kt->dot_il_q4;
		const txl_dot_il_fn dot_ref = dt == TXL_Q8_0 ? ref->dot_il
			: ref->dot_il_q4;
		struct act v;
		act_init(&v, K);
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
			const int n = ns[j], ng = (n + TXL_IL - 1) / TXL_IL;
			float *e = malloc(sizeof(float) * n * K);
			float y[48], want[48];
			uint8_t *il = alloc_il(dt, n, K);
			CHECK(e && il);
			/* (1) integers, scales 1 */
			uint8_t *w = make_weights(dt, n, K, ld, e);
			if (dt == TXL_Q8_0)
				make_integers(w, ld, n, &v);
			else
				make_integers_q4(w, ld, n, &v);
			txl_interleave(il, dt, w, n, K);
			dot(y, il, ng, &v.a, K);
			for (int r = 0; r < ng * TXL_IL; r++) {
				int64_t exact = r < n ?
					int_row_dot(dt, w + (size_t)r * ld, &v) : 0;
				CHECK(llabs(exact) < (1 << 24));
				if (y[r] != (float)exact) {
					fprintf(stderr, "FAIL: %s %s il K %d n %d row %d: "
						"%.9g, want %lld\n", kt->name,
						txl_dtype_name(dt), K, n, r, y[r],
						(long long)exact);
					exit(1);
				}
			}
			free(w);
			/* (2) random scales, the activations quantized */
			w = make_weights(dt, n, K, ld, e);
			for (int k = 0; k < K; k++)
				v.x[k] = uniform() * (k % 7 ? 1.0f : 30.0f);
			ref->quantize_q8(&v.a, v.x, K);
			txl_interleave(il, dt, w, n, K);
			dot(y, il, ng, &v.a, K);
			dot_ref(want, il, ng, &v.a, K);
			CHECK(memcmp(y, want, sizeof(float) * ng * TXL_IL) == 0);
			for (int r = 0; r < ng * TXL_IL; r++) {
				char what[64];
				snprintf(what, sizeof what, "%s il row %d", kt->name, r);
				if (r < n)
					check_q8_dot(y[r], 0, e + (size_t)r * K, &v, what);
				else
					CHECK(y[r] == 0.0f);
			}
			free(w);
			free(il);
			free(e);
		}
		act_free(&v);
	}
}

/* The weighted sums of rows against the double-precision ones: every
 * value widens exactly, so each column is a float dot product of n terms
 * (check_dot's bound).  Q8_0 and Q4_0 rows take lengths of whole blocks,
 * an odd number of them too (the kernels' last block alone). */
static void
test_axpy(const struct txl_kernels *kt)
{
	static const int Ks[] = { 1, 8, 12, 16, 33, 64, 65, 100, 130 };
	static const int Ks_q8[] = { 32, 64, 96, 128, 160 };

	for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
		enum txl_dtype dt = dtypes[d];
		const bool q8 = txl_dtype_blocked(dt);
		const size_t nK = q8 ? sizeof Ks_q8 / sizeof *Ks_q8
			: sizeof Ks / sizeof *Ks;
		for (size_t i = 0; i < nK; i++) {
			int K = q8 ? Ks_q8[i] : Ks[i], n = 37;
			int ld = q8 ? K + TXL_QK : K + 5;
			float *e = malloc(sizeof(float) * n * ld), a[37], y[160],
			      col[37], wcol[37];
			CHECK(e);
			void *w = make_weights(dt, n, ld,
					       txl_row_bytes(dt, ld), e);
			for (int r = 0; r < n; r++)
				a[r] = uniform();
			for (int k = 0; k < K; k++)
				y[k] = 0.0f;
			kt->axpy_rows[dt](y, a, w, txl_row_bytes(dt, ld), n, K);
			for (int k = 0; k < K; k++) {
				for (int r = 0; r < n; r++) {
					col[r] = a[r];
					wcol[r] = e[(size_t)r * ld + k];
				}
				check_dot(y[k], 0, wcol, col, n, kt->name);
			}
			free(w);
			free(e);
		}
	}
}

/* Rounding floats to F16 and BF16: the scalar conversions against the
 * compiler's (_Float16) and against bit patterns worked out by hand; the
 * table's against the scalar ones, bit for bit. */
static void
test_narrow(const struct txl_kernels *kt)
{
	static const struct { float f; uint16_t h, b; } known[] = {
		{ 1.0f, 0x3c00, 0x3f80 }, { -2.0f, 0xc000, 0xc000 },
		{ 65504.0f, 0x7bff, 0x4780 }, { 65520.0f, 0x7c00, 0x4780 },
		{ 0x1p-24f, 0x0001, 0x3380 }, { 0x1p-25f, 0x0000, 0x3300 },
		{ 1.0f + 0x1p-11f, 0x3c00, 0x3f80 },	/* tie: to even */
		{ 1.0f + 3 * 0x1p-11f, 0x3c02, 0x3f80 },	/* tie: up */
		{ 1.00390625f, 0x3c04, 0x3f80 },	/* bf16 tie: to even */
		{ 1.01171875f, 0x3c0c, 0x3f82 },	/* bf16 tie: up */
		{ INFINITY, 0x7c00, 0x7f80 }, { -0.0f, 0x8000, 0x8000 },
	};
	enum { N = 4099 };
	float *x = malloc(sizeof(float) * N);
	uint16_t got[N + 1], want[N];

	CHECK(x);
	for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
		CHECK_EQ(txl_f32_to_f16(known[i].f), known[i].h);
		CHECK_EQ(txl_f32_to_bf16(known[i].f), known[i].b);
	}
	CHECK((txl_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
	CHECK((txl_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0);
	for (int i = 0; i < N; i++) {
		/* every exponent F16 has and some it has not, random bits */
		uint32_t u = next_u32();
		u = (u & 0x807fffff) | ((uint32_t)(95 + next_u32() % 50) << 23);
		memcpy(&x[i], &u, sizeof u);
		if (i % 97 == 0)
			x[i] = known[i / 97 % (sizeof known / sizeof *known)].f;
		if (i % 101 == 50) {
			/* NaNs, some signalling, with payloads */
			u = 0x7f800001u | (next_u32() & 0x807fffff);
			memcpy(&x[i], &u, sizeof u);
			continue;
		}
		CHECK_EQ(txl_f32_to_f16(x[i]), f32_to_f16(x[i]));
	}
	for (int dt = TXL_F16; dt <= TXL_BF16; dt++) {
		for (int i = 0; i < N; i++)
			want[i] = dt == TXL_F16 ? txl_f32_to_f16(x[i]) :
				txl_f32_to_bf16(x[i]);
		/* odd lengths and offsets: the tails */
		for (int len = N; len > N - 20; len -= 7) {
			memset(got, 0xa5, sizeof got);
			kt->narrow[dt](got, x, (size_t)len);
			CHECK(memcmp(got, want, 2 * (size_t)len) == 0);
			CHECK_EQ(got[len], 0xa5a5);
		}
	}
	free(x);
}

/* Narrowing to Q8_0: hand-worked blocks and every value within half a
 * step of its block on the scalar kernel (txl_q8_0_scale()); the table's
 * blocks bit for bit the scalar ones. */
static void
test_narrow_q8_0(const struct txl_kernels *kt)
{
	const struct txl_kernels *ref = txl_kernels_for(TXL_ISA_SCALAR);
	enum { NB = 131, N = NB * TXL_QK };
	float *x = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
	struct txl_block_q8_0 got[NB + 1], want[NB];

	CHECK(x && back);
	for (int b = 0; b < NB; b++) {
		/* magnitudes from 2^-30 (subnormal scales) to 2^25 (past
		 * F16's range: 65504 * 127 < 2^23) */
		const float mag = ldexpf(1.0f, -30 + (int)(next_u32() % 56));
		for (int i = 0; i < TXL_QK; i++)
			x[b * TXL_QK + i] = uniform() * mag;
	}
	/* block 0: max 127, so the scale is 1 and the values are the
	 * rounding itself: halves away from zero */
	static const float b0[8] = { 127.0f, 2.5f, -2.5f, 0.5f, -0.5f,
				     1.4999999f, -126.5f, 0.0f };
	static const int8_t q0[8] = { 127, 3, -3, 1, -1, 1, -127, 0 };
	for (int i = 0; i < TXL_QK; i++)
		x[i] = i < 8 ? b0[i] : 0.25f;
	for (int i = 0; i < TXL_QK; i++)
		x[TXL_QK + i] = 0.0f;			/* block 1: zeros */
	x[2 * TXL_QK + 5] = NAN;			/* block 2: a NaN */
	x[3 * TXL_QK + 7] = -INFINITY;			/* block 3: an inf */
	x[4 * TXL_QK + 9] = 65504.0f * 127.0f * 1.01f;	/* block 4: too big */

	ref->narrow[TXL_Q8_0](want, x, N);
	CHECK_EQ(want[0].d, 0x3c00);
	for (int i = 0; i < TXL_QK; i++)
		CHECK_EQ(want[0].qs[i], i < 8 ? q0[i] : 0);
	CHECK_EQ(want[1].d, 0);
	for (int b = 1; b <= 4; b++)
		for (int i = 0; i < TXL_QK; i++)
			CHECK_EQ(want[b].qs[i], 0);
	CHECK((want[2].d & 0x7c00) == 0x7c00 && (want[2].d & 0x3ff));
	CHECK((want[3].d & 0x7c00) == 0x7c00 && (want[3].d & 0x3ff));
	CHECK_EQ(want[4].d, 0x7c00);
	ref->widen[TXL_Q8_0](back, want, N);
	for (int b = 5; b < NB; b++) {
		float amax = 0.0f;
		for (int i = 0; i < TXL_QK; i++)
			amax = fmaxf(amax, fabsf(x[b * TXL_QK + i]));
		const float d = txl_f16_to_f32(want[b].d);
		for (int i = 0; i < TXL_QK; i++) {
			const int k = b * TXL_QK + i;
			if (!isfinite(d)) {
				CHECK(amax > 65504.0f * 127.0f);
				CHECK(isnan(back[k]));
				continue;
			}
			/* half a step (and the rounding of x / d: 127 *
			 * 2^-23 of a step), and the subnormals' spacing */
			CHECK(fabs((double)back[k] - x[k]) <=
			      d * (0.5 + 0x1p-15) +
			      (d < 0x1p-14f ? 127 * 0x1p-25 : 0.0));
		}
	}
	/* odd block counts: no byte past the last block */
	for (int nb = NB; nb > NB - 20; nb -= 7) {
		memset(got, 0xa5, sizeof got);
		kt->narrow[TXL_Q8_0](got, x, (size_t)nb * TXL_QK);
		CHECK(memcmp(got, want, sizeof *got * (size_t)nb) == 0);
		CHECK_EQ(got[nb].d, 0xa5a5);
	}
	free(x);
	free(back);
}

static void
test_exp(const struct txl_kernels *kt)
{
	static const int ns[] = { 0, 1, 7, 8, 15, 16, 17, 100, 8000 };
	float x[8000], out[8000];

	for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
		int n = ns[i];
		double sum = 0;
		float max = -INFINITY;

		for (int j = 0; j < n; j++)
			/* from far below expf's range up to the max */
			x[j] = j % 11 == 0 ? -200.0f : uniform() * 60.0f;
		if (n > 2)
			x[1] = -INFINITY;	/* a masked logit */
		for (int j = 0; j < n; j++)
			max = x[j] > max ? x[j] : max;
		CHECK(kt->max(x, n) == max);
		double got = kt->exp_sum(out, x, n, max);
		for (int j = 0; j < n; j++) {
			/* of the float difference, as the kernels take it */
			double want = exp((double)(x[j] - max));
			sum += (float)want;
			/* 4 ulp, and nothing above expf's subnormal range */
			CHECK(fabs(out[j] - want) <= 4 * ldexp(1.0, -24) * want +
			      ldexp(1.0, -126));
		}
		CHECK(fabs(got - sum) <= 1e-6 * sum);
		CHECK(kt->exp_sum(NULL, x, n, max) == got);
	}
}

/* ---- the products of txl-math.c (chosen table, the pool) ---- */

static void
test_mat_mul(void)
{
	static const int Ms[] = { 1, 2, 5, 33 };
	const int N = 70, K = 96;

	for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
		enum txl_dtype dt = dtypes[d];
		float *e = malloc(sizeof(float) * N * K);
		CHECK(e);
		struct txl_mat w = {
			.dtype = dt, .rows = N, .cols = K,
			.data = make_weights(dt, N, K, txl_row_bytes(dt, K), e),
		};
		void *il = NULL;
		if (txl_dtype_blocked(dt)) {
			il = alloc_il(dt, N, K);
			CHECK(il);
			txl_interleave(il, dt, w.data, N, K);
		}
		for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
			int M = Ms[i];
			float *a = malloc(sizeof(float) * M * K);
			float *out = malloc(sizeof(float) * M * N);
			float row[96];
			CHECK(a && out);
			for (int j = 0; j < M * K; j++)
				a[j] = uniform();
			/* one row against Q8_0, Q4_0: the activations
			 * quantized */
			struct act v;
			act_init(&v, K);
			memcpy(v.x, a, sizeof(float) * K);
			txl_kernels()->quantize_q8(&v.a, v.x, K);
			/* k 2, 3: Q8_0, Q4_0 weights with the interleaved
			 * copy the loader makes (used for one row of
			 * activations) */
			for (int k = 0; k < (il ? 4 : 2); k++) {
				const int acc = k % 2;
				struct txl_mat wi = w;
				wi.il = k >= 2 ? il : NULL;
				for (int j = 0; j < M * N; j++)
					out[j] = 1.0f;
				txl_mat_mul(out, a, M, &wi, acc);
				for (int m = 0; m < M; m++)
					for (int r = 0; r < N; r++) {
						float got = out[m * N + r];
						const float *er = e + (size_t)r * K;
						if (M == 1 && il)
							check_q8_dot(got, acc, er, &v,
								     txl_dtype_name(dt));
						else
							check_dot(got, acc, er, a + (size_t)m * K,
								  K, txl_dtype_name(dt));
					}
			}
			act_free(&v);
			free(a);
			free(out);
			txl_mat_row(row, &w, N - 1);
			CHECK(memcmp(row, e + (size_t)(N - 1) * K, sizeof row) == 0);
		}
		if (il) {
			/* rows of the matrix (a cluster of an output layer):
			 * from a group's first row, the interleaved copy's;
			 * from another, none */
			for (int first = 16; first <= 21; first += 5) {
				struct txl_mat sub = w;
				float out[70];
				sub.il = il;
				sub = txl_mat_rows(&sub, first, N - first);
				CHECK((sub.il != NULL) == (first % TXL_IL == 0));
				struct act v;
				act_init(&v, K);
				for (int k = 0; k < K; k++)
					v.x[k] = uniform();
				txl_kernels()->quantize_q8(&v.a, v.x, K);
				txl_mat_mul(out, v.x, 1, &sub, false);
				for (int r = 0; r < N - first; r++)
					check_q8_dot(out[r], 0, e + (size_t)(first + r) * K,
						     &v, txl_dtype_name(dt));
				act_free(&v);
			}
		}
		free(il);
		free((void *)w.data);
		free(e);
	}
}

/* The strided BLAS-shaped products, against loops in double. */
static void
test_gemm(void)
{
	/* big enough to be split over the pool */
	const int M0 = 40, K = 70, N = 300, ld = 80;
	float *a = malloc(sizeof(float) * M0 * ld);
	float *b = malloc(sizeof(float) * N * ld);	/* N x K or K x N */
	float *out = malloc(sizeof(float) * M0 * N);
	float col[300], brow[300];

	CHECK(a && b && out);
	for (int i = 0; i < M0 * ld; i++)
		a[i] = uniform();
	for (int i = 0; i < N * ld; i++)
		b[i] = uniform();
	for (int M = 1; M <= M0; M += M0 - 1) {
		/* out[M,N] = a[M,K] . b[N,K]^T */
		txl_gemm_nt(out, N, a, ld, b, ld, M, K, N);
		for (int m = 0; m < M; m++)
			for (int n = 0; n < N; n++)
				check_dot(out[m * N + n], 0, b + (size_t)n * ld,
					  a + (size_t)m * ld, K, "gemm_nt");
		/* out[M,N] = a[M,K] . b[K,N] (b as K rows of ld >= N) */
		txl_gemm_nn(out, N, a, ld, b, N + 3, M, K, N);
		for (int m = 0; m < M; m++)
			for (int n = 0; n < N; n++) {
				for (int k = 0; k < K; k++)
					col[k] = b[(size_t)k * (N + 3) + n];
				check_dot(out[m * N + n], 0, col, a + (size_t)m * ld,
					  K, "gemm_nn");
			}
	}
	/* the same with b in F16 and BF16 (K, V and R of a compact memory) */
	for (int dt = TXL_F16; dt <= TXL_BF16; dt++) {
		float *e = malloc(sizeof(float) * N * ld);
		CHECK(e);
		void *bc = make_weights(dt, N, ld, txl_row_bytes(dt, ld), e);
		for (int M = 1; M <= M0; M += M0 - 1) {
			txl_gemm_nt_dt(out, N, a, ld, bc, dt, ld, M, K, N);
			for (int m = 0; m < M; m++)
				for (int n = 0; n < N; n++)
					check_dot(out[m * N + n], 0, e + (size_t)n * ld,
						  a + (size_t)m * ld, K, "gemm_nt_dt");
			/* b as K rows of N (ldb = ld >= N? no: K rows of ld) */
			txl_gemm_nn_dt(out, N, a, ld, bc, dt, ld, M, K, 60);
			for (int m = 0; m < M; m++)
				for (int n = 0; n < 60; n++) {
					for (int k = 0; k < K; k++)
						col[k] = e[(size_t)k * ld + n];
					check_dot(out[m * N + n], 0, col,
						  a + (size_t)m * ld, K, "gemm_nn_dt");
				}
		}
		free(bc);
		free(e);
	}
	/* out[M,N] += alpha a[K,M]^T b[K,N]: a as K rows of M0 */
	const int M = 33;
	for (int i = 0; i < M * N; i++)
		out[i] = 1.0f;
	txl_gemm_tn_acc(out, N, a, M0, b, N, M, K, N, -0.5f);
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++) {
			for (int k = 0; k < K; k++) {
				col[k] = a[(size_t)k * M0 + m] * -0.5f;
				brow[k] = b[(size_t)k * N + n];
			}
			check_dot(out[m * N + n], 1.0f, col, brow, K, "gemm_tn");
		}
	free(a);
	free(b);
	free(out);
}

/* ---- the pool ---- */

struct count {
	atomic_int calls, mask;
	int nth;
};

static void
count_task(void *p, int ith, int nth)
{
	struct count *c = p;

	atomic_fetch_add(&c->calls, 1);
	atomic_fetch_or(&c->mask, 1 << ith);
	c->nth = nth;
}

/* Each thread at most once, the caller always; workers that were not
 * scheduled in time may miss a task (it is closed when the caller's share
 * is done). */
static void
check_count(const struct count *c)
{
	CHECK(c->mask & 1);
	CHECK(c->mask < (1 << c->nth));
	CHECK_EQ(c->calls, __builtin_popcount((unsigned)c->mask));
}

static void *
run_many(void *p)
{
	for (int i = 0; i < 2000; i++) {
		struct count c = { 0 };
		txl_pool_run(count_task, &c);
		check_count(&c);
	}
	return p;
}

/* Each pool thread's signal mask, by its index. */
struct masks {
	sigset_t set[4];
	atomic_int seen;
};

static void
mask_task(void *p, int ith, int nth)
{
	struct masks *m = p;

	(void)nth;
	if (ith < 4) {
		pthread_sigmask(SIG_SETMASK, NULL, &m->set[ith]);
		atomic_fetch_or(&m->seen, 1 << ith);
	}
}

/* The workers block the application's signals (a handler run there
 * could not wake the thread that waits for input), not those of their
 * own faults (a blocked SIGBUS kills the process without the
 * application's handler); the caller's mask is left as it was. */
static void
test_pool_signals(void)
{
	sigset_t before, after;
	struct masks m;

	txl_pool_set_threads(1);
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	txl_pool_set_threads(3);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	CHECK(sigismember(&before, SIGINT) == sigismember(&after, SIGINT));
	CHECK(sigismember(&before, SIGTERM) == sigismember(&after, SIGTERM));
	/* the workers take a task each in turn until all have run one */
	atomic_init(&m.seen, 0);
	for (int i = 0; i < 100000 && atomic_load(&m.seen) != 7; i++)
		txl_pool_run(mask_task, &m);
	CHECK_EQ(atomic_load(&m.seen), 7);
	for (int t = 1; t < 3; t++) {
		CHECK(sigismember(&m.set[t], SIGINT));
		CHECK(sigismember(&m.set[t], SIGTERM));
		CHECK(sigismember(&m.set[t], SIGPIPE));
		CHECK(!sigismember(&m.set[t], SIGBUS));
		CHECK(!sigismember(&m.set[t], SIGSEGV));
		CHECK(!sigismember(&m.set[t], SIGFPE));
	}
	txl_pool_set_threads(1);
}

static void
test_pool(void)
{
	for (int n = 1; n <= 4; n++) {
		txl_pool_set_threads(n);
		CHECK_EQ(txl_pool_threads(), n);
		for (int i = 0; i < 1000; i++) {
			struct count c = { 0 };
			txl_pool_run(count_task, &c);
			check_count(&c);
			CHECK_EQ(c.nth, n);
		}
	}
	/* two threads using the pool at once: one of them runs alone */
	pthread_t t;
	CHECK(pthread_create(&t, NULL, run_many, NULL) == 0);
	run_many(NULL);
	pthread_join(t, NULL);
}

int
main(void)
{
	int n_isa = 0;
	const char *want = getenv("TXL_ISA");

	/* One run per TXL_ISA: a set this CPU lacks is capped to one it
	 * has, which another run already tests, so say so (meson: SKIP). */
	if (want && strcmp(want, txl_kernels()->name) != 0) {
		fprintf(stderr, "skip: TXL_ISA=%s not on this CPU (%s)\n",
			want, txl_kernels()->name);
		return 77;
	}

	for (int i = 0; i < TXL_N_ISA; i++) {
		const struct txl_kernels *kt = txl_kernels_for((enum txl_isa)i);
		if (!kt) {
			fprintf(stderr, "skip: instruction set %d not on this CPU\n",
				i);
			continue;
		}
		n_isa++;
		RUN_ON(test_dot_rows, kt);
		RUN_ON(test_f16_all, kt);
		RUN_ON(test_q8_0_block, kt);
		RUN_ON(test_quantize_q8, kt);
		RUN_ON(test_dot_rows_q8, kt);
		RUN_ON(test_dot_il, kt);
		RUN_ON(test_dot_rows_q16, kt);
		RUN_ON(test_q4_0_block, kt);
		RUN_ON(test_dot_rows_q4, kt);
		RUN_ON(test_narrow_q4_0, kt);
		RUN_ON(test_axpy, kt);
		RUN_ON(test_narrow, kt);
		RUN_ON(test_narrow_q8_0, kt);
		RUN_ON(test_exp, kt);
	}
	CHECK(n_isa >= 1);
	RUN(test_quantize_q16);
	fprintf(stderr, "products with the %s kernels\n", txl_kernels()->name);
	RUN(test_pool);
	RUN(test_pool_signals);
	for (int n = 1; n <= 3; n++) {
		txl_set_threads(n);
		CHECK_EQ(txl_pool_threads(), n);
		RUN(test_mat_mul);
		RUN(test_gemm);
	}
	return 0;
}
