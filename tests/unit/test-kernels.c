/* SPDX-License-Identifier: MIT */
/*
 * test-kernels.c - the SIMD kernels against the scalar reference and
 * against sums computed here in double, on every instruction set this
 * CPU runs (txl_kernels_for()); the matrix products of txl-products.c
 * with 1, 2 and 3 pool threads; the thread pool itself.
 *
 * The kernels are tested by slot, for every storage type of the traits
 * table (txl-types.h) that has the slot: a new type is tested by the
 * same code as the others, with weights made of random blocks (random
 * bytes, random scales) whose exact values are its scalar widening;
 * that widening is itself checked against an independent decoding of
 * the layouts this file knows (test_widen_scalar), and against blocks
 * worked out by hand.
 *
 * Tolerances: a float dot product of K terms, whatever the order of its
 * additions, is within gamma_K * sum|w_i x_i| of the exact one, gamma_K =
 * K u / (1 - K u), u = 2^-24 (Higham, Accuracy and Stability of Numerical
 * Algorithms, 3.1).  Each result is checked against the double-precision
 * sum with that bound (plus a tiny absolute term for subnormal inputs);
 * widening is exact and checked bit for bit.  Products against quantized
 * activations (int8 blocks, the int16 query): the quantizations bit for
 * bit against the scalar ones, the integer sums of the products exactly,
 * the whole against the float product with the bound of the activations'
 * rounding (check_act_dot), and bit for bit the scalar set's where the
 * type's traits say every set computes the same floats (same_floats).
 *
 * Run under meson with each TXL_ISA, so that the products (which use the
 * chosen set) run on each instruction set too.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "test-rng.h"
#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-products.h"
#include "txl-repack.h"
#include "txl-rows.h"
#include "txl-types.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
next_u32(void)
{
	return (uint32_t)(xorshift64(&rng) >> 32);
}

/* uniform in [-1, 1) */
static float
uniform(void)
{
	return (float)next_u32() / 2147483648.0f - 1.0f;
}

/* A half's value through the compiler's float16 arithmetic */
static float
f16_value(uint16_t h)
{
	_Float16 x;

	memcpy(&x, &h, sizeof x);
	return (float)x;
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

/* ---- the kernels of one instruction set ---- */

/* One set's type-less kernels and each type's kernels on it (a slot the
 * set lacks: its base's, as the library resolves them). */
struct set {
	const struct txl_kernels *k;
	struct txl_type_kernels t[TXL_N_DTYPES];
};

static struct set ref;		/* the scalar set: the reference */

static bool
set_of(enum txl_isa isa, struct set *s)
{
	s->k = txl_kernels_for(isa);
	if (!s->k)
		return false;
	for (int dt = 0; dt < TXL_N_DTYPES; dt++)
		CHECK(txl_type_kernels_on(dt, isa, &s->t[dt]));
	return true;
}

#define FOR_TYPES(dt)                                                        \
	for (enum txl_dtype dt = 0; dt < TXL_N_DTYPES; dt++)                  \
		if (txl_dtype_computable(dt))

/* ---- weights of any type ---- */

/* A block type's blocks begin with their F16 scale (txl-dtype.h); the
 * rest of a block is its values' bytes. */
static void
set_scale(uint8_t *blk, uint16_t d)
{
	memcpy(blk, &d, sizeof d);
}

/* A random block scale: +- (1 + U/2) 2^e, e from -20 to 4 (subnormal F16
 * scales among them) */
static uint16_t
random_scale(void)
{
	return f32_to_f16(ldexpf((next_u32() % 2 ? 1.0f : -1.0f) *
				 (1.0f + uniform() / 2),
				 -20 + (int)(next_u32() % 25)));
}

/* Weights of n rows of K values of type dt, rows ld bytes apart, and
 * their exact float values (n x K: the scalar widening).  Plain types:
 * values uniform in [-1, 1), rows 1, 4, 7, ... times 100, rounded to the
 * type; block types: random bytes under random scales. */
static void *
make_weights(enum txl_dtype dt, int n, int K, size_t ld, float *exact)
{
	const struct txl_type *t = txl_type(dt);
	uint8_t *w = calloc((size_t)n * ld + 64, 1);
	float *v = malloc(sizeof(float) * (size_t)K);

	CHECK(w && v);
	for (int r = 0; r < n; r++) {
		uint8_t *row = w + (size_t)r * ld;
		if (t->block == 1) {
			for (int k = 0; k < K; k++)
				v[k] = uniform() * (r % 3 == 1 ? 100.0f : 1.0f);
			ref.t[dt].narrow(row, v, (size_t)K);
		} else {
			for (size_t i = 0; i < txl_row_bytes(dt, K); i++)
				row[i] = (uint8_t)next_u32();
			for (int b = 0; b < K / t->block; b++)
				set_scale(row + (size_t)b * t->bytes,
					  random_scale());
		}
		ref.t[dt].widen(exact + (size_t)r * K, row, (size_t)K);
	}
	free(v);
	return w;
}

/* The values of the layouts this file knows, decoded here from their
 * definitions (txl-dtype.h), not by the library: value k of row; false
 * for a type it does not know. */
static bool
decode(enum txl_dtype dt, const uint8_t *row, int k, float *out)
{
	uint16_t h;
	float f;

	switch (dt) {
	case TXL_F32:
		memcpy(&f, row + 4 * k, 4);
		*out = f;
		return true;
	case TXL_F16:
		memcpy(&h, row + 2 * k, 2);
		*out = f16_value(h);
		return true;
	case TXL_BF16: {
		uint32_t u;
		memcpy(&h, row + 2 * k, 2);
		u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
		*out = f;
		return true;
	}
	case TXL_Q8_0: {
		const struct txl_block_q8_0 *b =
			(const void *)(row + k / TXL_QK * 34);
		memcpy(&h, &b->d, 2);
		*out = (float)b->qs[k % TXL_QK] * f16_value(h);
		return true;
	}
	case TXL_Q4_0: {
		const struct txl_block_q4_0 *b =
			(const void *)(row + k / TXL_QK * 18);
		const int i = k % TXL_QK;
		const int q = i < 16 ? b->qs[i] & 15 : b->qs[i - 16] >> 4;
		memcpy(&h, &b->d, 2);
		*out = (float)(q - 8) * f16_value(h);
		return true;
	}
	case TXL_Q4_K: {
		/* sub-block j: 6-bit scale and zero point, u (4 q - z) */
		const uint8_t *b = row + k / 128 * 72, *sz = b + 2;
		const int j = k % 128 / 32, i = k % 32;
		const int sc = sz[j] & 63;
		const int z = sz[j] >> 6 | ((sz[4 + j / 2] >> (j % 2 ? 4 : 0)) &
					    15) << 2;
		const int q = i < 16 ? b[8 + 16 * j + i] & 15
			: b[8 + 16 * j + i - 16] >> 4;
		memcpy(&h, b, 2);
		*out = (float)(4 * q - z) * (f16_value(h) * (float)sc / 4);
		return true;
	}
	default:
		return false;
	}
}

/* The zero point of the layouts this file knows whose values are
 * stored plus an offset, in steps of the block's scale: Q4_0's q - 8.  A
 * kernel may sum q d and take 8 d back, whose rounding is relative to
 * |q| d, up to |value| + 8 |d|: the magnitude its bounds take. */
static int
zero_point(enum txl_dtype dt)
{
	return dt == TXL_Q4_0 ? 8 : 0;
}

/* |value k| + the zero point times the block's scale |d| (Q4_K: its
 * sub-block's zero point times its unit, at most 63 d 63 / 4) */
static float
magnitude(enum txl_dtype dt, const uint8_t *row, const float *values, int k)
{
	const struct txl_type *t = txl_type(dt);
	uint16_t d;

	if (dt == TXL_Q4_K) {
		memcpy(&d, row + (size_t)(k / t->block) * t->bytes, sizeof d);
		return fabsf(values[k]) + 63.0f * 63.0f / 4.0f *
			fabsf(txl_f16_to_f32(d));
	}
	if (!zero_point(dt))
		return fabsf(values[k]);
	memcpy(&d, row + (size_t)(k / t->block) * t->bytes, sizeof d);
	return fabsf(values[k]) + (float)zero_point(dt) *
		fabsf(txl_f16_to_f32(d));
}

/* The scalar widening of random weights against decode() (NaNs: NaNs),
 * so that make_weights()' exact values are what the layouts define. */
static void
test_widen_scalar(void)
{
	enum { N = 5, K = 384 };

	FOR_TYPES(dt) {
		const size_t ld = txl_row_bytes(dt, K);
		float *e = malloc(sizeof(float) * N * K), want;
		uint8_t *w = make_weights(dt, N, K, ld, e);

		CHECK(e);
		if (!decode(dt, w, 0, &want)) {
			fprintf(stderr, "note: no independent decoding of %s\n",
				txl_dtype_name(dt));
			free(w);
			free(e);
			continue;
		}
		for (int r = 0; r < N; r++)
			for (int k = 0; k < K; k++) {
				CHECK(decode(dt, w + (size_t)r * ld, k, &want));
				const float got = e[(size_t)r * K + k];
				CHECK(isnan(want) ? isnan(got)
				      : memcmp(&got, &want, 4) == 0);
			}
		free(w);
		free(e);
	}
}

/* |got - (acc + sum w x)| <= gamma_K sum |w x| (twice: slack for the
 * final additions of the partial sums), and half an ulp of the result
 * for the addition to acc (a product that accumulates: acc 1, 0 else);
 * with wmag, sum wmag |x| in place of sum |w x| (below). */
static void
check_dot_mag(float got, float acc, const float *w, const float *wmag,
	      const float *x, int K, const char *what)
{
	double exact = 0, mag = 0;

	for (int k = 0; k < K; k++) {
		exact += (double)w[k] * x[k];
		mag += fabs((double)(wmag ? wmag[k] : w[k]) * x[k]);
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

static void
check_dot(float got, float acc, const float *w, const float *x, int K,
	  const char *what)
{
	check_dot_mag(got, acc, w, NULL, x, K, what);
}

#define RUN_ON(test, s)                                                      \
	do {                                                                 \
		test(s);                                                     \
		fprintf(stderr, "ok %s %s\n", #test, (s)->k->name);          \
	} while (0)

/* Rows against float activations, and widening: every type, rows packed
 * and further apart (attention reads one head's slice of wider rows). */
static void
test_dot(const struct set *s)
{
	static const int Ks[] = { 1, 7, 8, 12, 15, 16, 17, 31, 32, 33, 64, 96,
				  100, 384, 1536 };
	static const int ns[] = { 1, 3, 4, 5, 9, 17 };

	FOR_TYPES(dt) {
		const int blk = txl_type(dt)->block;
		for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
			int K = Ks[i];
			if (K % blk)
				continue;
			for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
				int n = ns[j];
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
					s->t[dt].dot(y, w, ld, x, n, K);
					for (int r = 0; r < n; r++) {
						char what[64];
						snprintf(what, sizeof what, "%s %s dot row %d",
							 s->k->name, txl_dtype_name(dt), r);
						check_dot(y[r], 0, e + (size_t)r * K, x, K, what);
						/* widen is exact */
						s->t[dt].widen(w1, (uint8_t *)w + (size_t)r * ld,
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

/* Every half, widened by the set, is txl_f16_to_f32 of it (NaNs: a
 * NaN; vcvtph2ps quiets signalling ones). */
static void
test_f16_all(const struct set *s)
{
	uint16_t *h = malloc(65536 * 2);
	float *f = malloc(65536 * 4);

	CHECK(h && f);
	for (int i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	s->t[TXL_F16].widen(f, h, 65536);
	for (int i = 0; i < 65536; i++) {
		float want = txl_f16_to_f32((uint16_t)i);
		if (isnan(want))
			CHECK(isnan(f[i]));
		else
			CHECK(memcmp(&f[i], &want, 4) == 0);
	}
	s->t[TXL_BF16].widen(f, h, 65536);
	for (int i = 0; i < 65536; i++) {
		float want = txl_bf16_to_f32((uint16_t)i);
		CHECK(memcmp(&f[i], &want, 4) == 0);
	}
	free(h);
	free(f);
}

/* A Q8_0 block by hand: d = 0.5 (0x3800), values -127 .. 127. */
static void
test_q8_0_block(const struct set *s)
{
	struct txl_block_q8_0 b[2];
	float out[64], x[64], y;

	for (int k = 0; k < 2; k++) {
		b[k].d = k ? 0x3800 : 0xbc00;	/* 0.5, -1.0 */
		for (int i = 0; i < TXL_QK; i++)
			b[k].qs[i] = (int8_t)(i * 8 - 127);
	}
	s->t[TXL_Q8_0].widen(out, b, 64);
	for (int i = 0; i < 64; i++) {
		float want = (float)((i % 32) * 8 - 127) * (i < 32 ? -1.0f : 0.5f);
		CHECK(out[i] == want);
		x[i] = i < 32 ? 1.0f : 2.0f;
	}
	/* sum(-q) + sum(q * 0.5 * 2) = 0 exactly (all integers) */
	s->t[TXL_Q8_0].dot(&y, b, sizeof b, x, 1, 64);
	CHECK(y == 0.0f);
	x[0] = 3.0f;		/* -(-127) * 3 instead of * 1: +254 */
	s->t[TXL_Q8_0].dot(&y, b, sizeof b, x, 1, 64);
	CHECK(y == 254.0f);
}

/* nb blocks of TXL_QK random values, each block's magnitude 2^e for a
 * random e from e0 to e0 + n_e - 1 */
static void
random_blocks(float *x, int nb, int e0, int n_e)
{
	for (int b = 0; b < nb; b++) {
		const float mag = ldexpf(1.0f, e0 + (int)(next_u32() % n_e));
		for (int i = 0; i < TXL_QK; i++)
			x[b * TXL_QK + i] = uniform() * mag;
	}
}

/* Blocks 1 to 4 of the narrowing tests: zeros, a NaN, an inf, and a
 * value too big for the type's scale (too_big) */
static void
special_blocks(float *x, float too_big)
{
	for (int i = 0; i < TXL_QK; i++)
		x[TXL_QK + i] = 0.0f;			/* block 1: zeros */
	x[2 * TXL_QK + 5] = NAN;			/* block 2: a NaN */
	x[3 * TXL_QK + 7] = -INFINITY;			/* block 3: an inf */
	x[4 * TXL_QK + 9] = too_big;			/* block 4: too big */
}

/* The set's narrowing to block type dt of nb of the NB blocks of x, for
 * odd block counts: the first nb of the scalar kernel's blocks (want)
 * bit for bit, and no byte past the last block (a block begins with its
 * F16 scale). */
static void
check_narrow_counts(const struct set *s, enum txl_dtype dt, const float *x,
		    const void *want, int NB)
{
	const size_t bs = txl_row_bytes(dt, TXL_QK);
	uint8_t *got = malloc(bs * (size_t)(NB + 1));

	CHECK(got);
	for (int nb = NB; nb > NB - 20; nb -= 7) {
		uint16_t d;
		memset(got, 0xa5, bs * (size_t)(NB + 1));
		s->t[dt].narrow(got, x, (size_t)nb * TXL_QK);
		CHECK(memcmp(got, want, bs * (size_t)nb) == 0);
		memcpy(&d, got + bs * (size_t)nb, sizeof d);
		CHECK_EQ(d, 0xa5a5);
	}
	free(got);
}

/* A Q4_0 block by hand: d = -0.5, q = i % 16 (low nibbles) and 15 - i %
 * 16 (high ones). */
static void
test_q4_0_block(const struct set *s)
{
	struct txl_block_q4_0 b[2];
	float out[64];

	for (int k = 0; k < 2; k++) {
		b[k].d = k ? 0x4000 : 0xb800;	/* 2.0, -0.5 */
		for (int i = 0; i < TXL_QK / 2; i++)
			b[k].qs[i] = (uint8_t)(i | (15 - i) << 4);
	}
	s->t[TXL_Q4_0].widen(out, b, 64);
	for (int i = 0; i < 64; i++) {
		const int j = i % 32, q = j < 16 ? j : 15 - (j - 16);
		CHECK(out[i] == (float)(q - 8) * (i < 32 ? -0.5f : 2.0f));
	}
}
/* Narrowing to Q4_0 (txl_q4_0_scale()): hand-worked blocks; in random
 * ones every value within half a step, but those of the largest's
 * opposite sign past 7.5 steps, within one; the set's bit for bit the
 * scalar one's. */
static void
test_narrow_q4_0(const struct set *s)
{
	enum { NB = 131, N = NB * TXL_QK };
	float *x = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
	struct txl_block_q4_0 want[NB];

	CHECK(x && back);
	/* magnitudes with normal F16 scales (8 * 2^-14 to 65504 * 8) */
	random_blocks(x, NB, -10, 28);
	/* block 0: largest 8, so d = -1 and q = 8 - x rounded, halves to
	 * the larger q (the smaller value) */
	static const float b0[9] = { 8.0f, -1.0f, 3.4f, -7.6f, 2.5f, -2.5f,
				     0.4f, -0.5f, 7.5f };
	static const int q0[9] = { 0, 9, 5, 15, 6, 11, 8, 9, 1 };
	for (int i = 0; i < TXL_QK; i++)
		x[i] = i < 9 ? b0[i] : 0.0f;
	special_blocks(x, -65504.0f * 8.0f * 1.01f);
	for (int i = 0; i < TXL_QK; i++)	/* block 5: largest negative */
		x[5 * TXL_QK + i] = i == 3 ? -16.0f : (float)(i % 8);
	/* block 6: the largest magnitude twice, the first one's sign; block
	 * 7: negative zeros (a zero block) */
	for (int i = 0; i < TXL_QK; i++)
		x[6 * TXL_QK + i] = i == 2 ? -4.0f : i == 9 ? 4.0f
			: (float)(i % 7) / 2;
	for (int i = 0; i < TXL_QK; i++)
		x[7 * TXL_QK + i] = -0.0f;

	ref.t[TXL_Q4_0].narrow(want, x, N);
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
	ref.t[TXL_Q4_0].widen(back, want, N);
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
	check_narrow_counts(s, TXL_Q4_0, x, want, NB);
	free(x);
	free(back);
}

/* Rounding floats to F16 and BF16: the scalar conversions against the
 * compiler's (_Float16) and against bit patterns worked out by hand; the
 * set's against the scalar ones, bit for bit. */
static void
test_narrow(const struct set *s)
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
			s->t[dt].narrow(got, x, (size_t)len);
			CHECK(memcmp(got, want, 2 * (size_t)len) == 0);
			CHECK_EQ(got[len], 0xa5a5);
		}
	}
	free(x);
}

/* Narrowing to Q8_0: hand-worked blocks and every value within half a
 * step of its block on the scalar kernel (txl_q8_0_scale()); the set's
 * blocks bit for bit the scalar ones. */
static void
test_narrow_q8_0(const struct set *s)
{
	enum { NB = 131, N = NB * TXL_QK };
	float *x = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
	struct txl_block_q8_0 want[NB];

	CHECK(x && back);
	/* magnitudes from 2^-30 (subnormal scales) to 2^25 (past F16's
	 * range: 65504 * 127 < 2^23) */
	random_blocks(x, NB, -30, 56);
	/* block 0: max 127, so the scale is 1 and the values are the
	 * rounding itself: halves away from zero */
	static const float b0[8] = { 127.0f, 2.5f, -2.5f, 0.5f, -0.5f,
				     1.4999999f, -126.5f, 0.0f };
	static const int8_t q0[8] = { 127, 3, -3, 1, -1, 1, -127, 0 };
	for (int i = 0; i < TXL_QK; i++)
		x[i] = i < 8 ? b0[i] : 0.25f;
	special_blocks(x, 65504.0f * 127.0f * 1.01f);

	ref.t[TXL_Q8_0].narrow(want, x, N);
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
	ref.t[TXL_Q8_0].widen(back, want, N);
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
	check_narrow_counts(s, TXL_Q8_0, x, want, NB);
	free(x);
	free(back);
}

static void
test_exp(const struct set *s)
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
		CHECK(s->k->max(x, n) == max);
		double got = s->k->exp_sum(out, x, n, max);
		for (int j = 0; j < n; j++) {
			/* of the float difference, as the kernels take it */
			double want = exp((double)(x[j] - max));
			sum += (float)want;
			/* 4 ulp, and nothing above expf's subnormal range */
			CHECK(fabs(out[j] - want) <= 4 * ldexp(1.0, -24) * want +
			      ldexp(1.0, -126));
		}
		CHECK(fabs(got - sum) <= 1e-6 * sum);
		CHECK(s->k->exp_sum(NULL, x, n, max) == got);
	}
}

/* Narrowing, every type: the set's bytes those of the scalar kernel, bit
 * for bit, and none past the end; the values from every exponent F16
 * has and some it has not, random bits, and blocks of zeros, negative
 * zeros, a NaN, an inf, values past F16's range, the largest magnitude
 * twice, the largest of either sign (lengths: whole blocks, odd ones for
 * the plain types). */
static void
test_narrow_types(const struct set *s)
{
	enum { NB = 131, N = NB * TXL_QK };
	float *x = malloc(sizeof(float) * N);
	uint8_t *got = malloc((size_t)N * 4 + 64), *want = malloc((size_t)N * 4);

	CHECK(x && got && want);
	for (int i = 0; i < N; i++) {
		uint32_t u = next_u32();
		u = (u & 0x807fffff) | ((uint32_t)(95 + next_u32() % 50) << 23);
		memcpy(&x[i], &u, sizeof u);
	}
	for (int i = 0; i < TXL_QK; i++) {
		x[i] = 0.0f;
		x[TXL_QK + i] = -0.0f;
		x[6 * TXL_QK + i] = i == 2 ? -4.0f : i == 9 ? 4.0f
			: (float)(i % 7) / 2;
		x[7 * TXL_QK + i] = i == 3 ? -16.0f : (float)(i % 8);
	}
	x[2 * TXL_QK + 5] = NAN;
	x[3 * TXL_QK + 7] = -INFINITY;
	x[4 * TXL_QK + 9] = 65504.0f * 127.0f * 1.01f;
	x[5 * TXL_QK + 1] = -65504.0f * 8.0f * 1.01f;
	FOR_TYPES(dt) {
		const int blk = txl_type(dt)->block;
		for (int len = N; len > N - 20 * blk; len -= 7 * blk) {
			const size_t bytes = txl_row_bytes(dt, len);
			ref.t[dt].narrow(want, x, (size_t)len);
			memset(got, 0xa5, bytes + 64);
			s->t[dt].narrow(got, x, (size_t)len);
			if (memcmp(got, want, bytes) != 0) {
				fprintf(stderr, "FAIL: %s narrow %s: not the "
					"scalar kernel's bytes\n", s->k->name,
					txl_dtype_name(dt));
				exit(1);
			}
			for (int i = 0; i < 64; i++)
				CHECK_EQ(got[bytes + (size_t)i], 0xa5);
		}
	}
	free(x);
	free(got);
	free(want);
}

/* ---- products against quantized activations ---- */

/* The activations of one product: K values and their quantization in
 * one of the forms (struct txl_act). */
struct act {
	int K;
	float *x;
	float *buf;
	struct txl_act a;
};

static void
act_init(struct act *v, enum txl_act_type type, int K)
{
	v->K = K;
	v->x = malloc(sizeof(float) * K);
	v->buf = malloc(sizeof(float) * (txl_act_floats(type, K) + 1));
	CHECK(v->x && v->buf);
	v->a = txl_act_view(type, v->buf, v->x, K);
}

static void
act_free(struct act *v)
{
	free(v->x);
	free(v->buf);
}

/* The quantized value k and its block's scale */
static int
act_q(const struct act *v, int k)
{
	return v->a.type == TXL_ACT_Q16 ? v->a.q16.q[k] : v->a.q8.q[k];
}

static float
act_d(const struct act *v, int b)
{
	return v->a.type == TXL_ACT_Q16 ? v->a.q16.d[b] : v->a.q8.d[b];
}

/* x quantized by the scalar set's quantizer of its form */
static void
quantize_ref(struct act *v)
{
	if (v->a.type == TXL_ACT_Q16)
		txl_quantize_q16(&v->a.q16, v->x, v->K);
	else
		ref.k->quantize_q8(&v->a.q8, v->x, v->K);
}

/* y = acc + w . x (w: K values, exact values e) computed from the
 * quantized activations: each x_i is replaced by q_i d (d = the block's
 * scale), which is within d (1/2 + r) of it (int8: r = 2^-15: round to
 * nearest, |x_i / d - q_i| <= 1/2, and x_i / d is x_i * fl(1 / d) up to
 * a relative 2u, |x_i / d| <= 127, u = 2^-24; int16: r = 2^-9, the
 * division correct to a relative 2^-24 of at most 32767), so y moves by
 * at most sum_i |w_i| d (1/2 + r); the integer sums are exact, and the
 * nb block terms, each rounded at most twice (int8: the product of the
 * scales, then by the sum) or three times (int16: the sum to float
 * too), are summed in float: gamma_(nb + 2 or 3) sum |w_i q_i d| (twice,
 * as check_dot). */
static void
check_act_dot(float got, float acc, const float *e, const struct act *v,
	      const char *what)
{
	const bool q16 = v->a.type == TXL_ACT_Q16;
	const int nb = v->K / TXL_QK, m = nb + (q16 ? 3 : 2);
	const double r = ldexp(1.0, q16 ? -9 : -15);
	double exact = 0, quant = 0, mag = 0;

	for (int k = 0; k < v->K; k++) {
		double d = act_d(v, k / TXL_QK);
		exact += (double)e[k] * v->x[k];
		quant += fabs((double)e[k]) * d * (0.5 + r);
		mag += fabs((double)e[k] * act_q(v, k)) * d;
	}
	exact += acc;
	double u = ldexp(1.0, -24);
	double tol = quant + 2 * m * u / (1 - m * u) * mag + 1e-37 +
		(acc != 0.0f ? u * fabs(exact) : 0.0);
	if (!(fabs(got - exact) <= tol)) {
		fprintf(stderr, "FAIL: %s: K %d: %.9g vs exact %.9g (tol %g)\n",
			what, v->K, got, exact, tol);
		exit(1);
	}
}

/* The int8 quantization: the scale of a block is its max |x| / 127,
 * every value the nearest multiple of it (the largest one +-127), and
 * off is -128 times the block's sum; each set's the scalar one's bit for
 * bit (the same operations, and a max, exact in any order). */
static void
test_quantize_q8(const struct set *s)
{
	static const int Ks[] = { 32, 96, 384, 1536 };

	for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
		struct act v, w;
		act_init(&v, TXL_ACT_Q8, Ks[i]);
		act_init(&w, TXL_ACT_Q8, Ks[i]);
		for (int k = 0; k < v.K; k++)
			/* blocks from 2^-30 to 2^30; one block all zero */
			v.x[k] = k / TXL_QK == 1 ? 0.0f :
				uniform() * ldexpf(1.0f, (k / TXL_QK * 13) % 61 - 30);
		v.x[5] = -ldexpf(1.0f, 40);	/* a block led by a negative */
		/* block 2: scale 1, halves: ties, to even */
		for (int k = 64; k < v.K && k < 96; k++)
			v.x[k] = k == 64 ? 127.0f : (float)(k % 7) - 3.5f;
		s->k->quantize_q8(&v.a.q8, v.x, v.K);
		for (int k = 65; k < v.K && k < 96; k++)
			CHECK_EQ(v.a.q8.q[k], rint(v.x[k]));
		ref.k->quantize_q8(&w.a.q8, v.x, v.K);
		CHECK(memcmp(v.a.q8.q, w.a.q8.q, (size_t)v.K) == 0);
		CHECK(memcmp(v.a.q8.d, w.a.q8.d,
			     sizeof(float) * (v.K / TXL_QK)) == 0);
		CHECK(memcmp(v.a.q8.off, w.a.q8.off,
			     sizeof(int32_t) * (v.K / TXL_QK)) == 0);
		for (int b = 0; b < v.K / TXL_QK; b++) {
			float amax = 0.0f, d = v.a.q8.d[b];
			int qmax = 0, sum = 0;
			for (int j = 0; j < TXL_QK; j++) {
				int k = b * TXL_QK + j, q = v.a.q8.q[k];
				amax = fmaxf(amax, fabsf(v.x[k]));
				qmax = abs(q) > qmax ? abs(q) : qmax;
				sum += q;
				CHECK(fabs(v.x[k] - (double)q * d) <=
				      d * (0.5 + ldexp(1.0, -15)));
			}
			CHECK(d == amax / 127.0f);
			CHECK_EQ(qmax, amax > 0.0f ? 127 : 0);
			CHECK_EQ(v.a.q8.off[b], -128 * sum);
		}
		/* a NaN or an inf: the block's scale NaN, so its products */
		v.x[3] = NAN;
		v.x[v.K - 1] = INFINITY;
		s->k->quantize_q8(&v.a.q8, v.x, v.K);
		CHECK(isnan(v.a.q8.d[0]) && isnan(v.a.q8.d[v.K / TXL_QK - 1]));
		act_free(&v);
		act_free(&w);
	}
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
		struct act v;
		act_init(&v, TXL_ACT_Q16, Ks[i]);
		for (int k = 0; k < v.K; k++)
			/* blocks from 2^-140 (subnormal) to 2^60; one zero */
			v.x[k] = k / TXL_QK == 1 ? 0.0f : uniform() *
				ldexpf(1.0f, (k / TXL_QK * 37) % 201 - 140);
		v.x[3] = -ldexpf(1.0f, 20);	/* led by a negative */
		txl_quantize_q16(&v.a.q16, v.x, v.K);
		for (int b = 0; b < v.K / TXL_QK; b++) {
			float amax = 0.0f, d = v.a.q16.d[b];
			int qmax = 0;
			for (int j = 0; j < TXL_QK; j++) {
				int k = b * TXL_QK + j, q = v.a.q16.q[k];
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
		CHECK(v.K == TXL_QK || v.a.q16.d[1] == 0.0f);
		v.x[3] = NAN;
		v.x[v.K - 1] = INFINITY;
		txl_quantize_q16(&v.a.q16, v.x, v.K);
		CHECK(isnan(v.a.q16.d[0]) && isnan(v.a.q16.d[v.K / TXL_QK - 1]));
		act_free(&v);
	}
}

/* A Q4_K block by hand: d = 0.5, sub-block j's scale j + 1 (its unit
 * (j + 1) / 8) and zero points 0, 5, 32, 63 (sz: 0x01, 0x42, 0x03, 0xc4,
 * then 0x10, 0xf8); q = i % 16 (low nibbles) and 15 - i % 16 (high ones).
 * The set's widening, its product with int8 activations and the scalar
 * unpacking into int8 blocks. */
static void
test_q4_k_block(const struct set *s)
{
	static const uint8_t sz[6] = { 0x01, 0x42, 0x03, 0xc4, 0x10, 0xf8 };
	/* (index, value): u (4 q - z) worked out */
	static const struct { int i; float v; } want[] = {
		{ 0, 0.0f }, { 1, 0.5f }, { 16, 7.5f }, { 31, 0.0f },
		{ 32, -1.25f }, { 33, -0.25f }, { 48, 13.75f },
		{ 64, -12.0f }, { 80, 10.5f }, { 96, -31.5f }, { 101, -21.5f },
		{ 111, -1.5f }, { 112, -1.5f }, { 127, -31.5f },
	};
	struct txl_block_q4_k b;
	float out[128], d;
	int8_t q[32];

	b.d = 0x3800;
	memcpy(b.sz, sz, sizeof sz);
	for (int j = 0; j < 4; j++) {
		CHECK_EQ(txl_q4_k_sc(b.sz, j), j + 1);
		for (int i = 0; i < 16; i++)
			b.qs[16 * j + i] = (uint8_t)(i | (15 - i) << 4);
	}
	CHECK_EQ(txl_q4_k_z(b.sz, 0), 0);
	CHECK_EQ(txl_q4_k_z(b.sz, 1), 5);
	CHECK_EQ(txl_q4_k_z(b.sz, 2), 32);
	CHECK_EQ(txl_q4_k_z(b.sz, 3), 63);
	s->t[TXL_Q4_K].widen(out, &b, 128);
	for (size_t k = 0; k < sizeof want / sizeof *want; k++)
		CHECK(out[want[k].i] == want[k].v);
	/* against activations 1 (scale 1) but 2 at value 48 (13.75) and 0 at
	 * 96 (-31.5): the sum of the values plus 13.75 + 31.5 */
	struct act v;
	double sum = 45.25;

	act_init(&v, TXL_ACT_Q8, 128);
	for (int k = 0; k < 128; k++) {
		v.a.q8.q[k] = (int8_t)(k == 48 ? 2 : k == 96 ? 0 : 1);
		sum += out[k];
	}
	for (int j = 0; j < 4; j++) {
		int32_t t = 0;
		for (int i = 0; i < 32; i++)
			t += v.a.q8.q[32 * j + i];
		v.a.q8.d[j] = 1.0f;
		v.a.q8.off[j] = -128 * t;
	}
	float y;
	s->t[TXL_Q4_K].dot_q8(&y, &b, sizeof b, &v.a.q8, 1, 128);
	CHECK(y == (float)sum);
	act_free(&v);
	/* sub-block 3 as an int8 block: 4 q - 63, scale 0.5 */
	ref.t[TXL_Q4_K].unpack_q8(&d, q, 1, &b, 3);
	CHECK(d == 0.5f && q[0] == -63 && q[5] == -43 && q[16] == -3 &&
	      q[31] == -63);
}

/* ---- the integer case of the products ----
 *
 * Block weights with every scale 1 and activations with every scale 1:
 * each block's sum is an integer, computed here exactly from the scalar
 * widening of the weights (with scale 1, their integer values); the
 * extremes in the blocks b of a pattern (every third, or every other):
 * the weights' value bytes alternate between 0x7f and 0x80 (Q8_0's 127
 * and -128) or between 0x0f and 0xf0 (Q4_0's nibbles 15 and 0, values 7
 * and -8), the activations their largest magnitudes with both signs. */

enum { EVERY_THIRD, EVERY_OTHER, N_PATTERNS };

static bool
extreme_block(int pattern, int b)
{
	return pattern == EVERY_THIRD ? b % 3 == 2 : b % 2 == 1;
}

/* n rows of w (ld bytes apart, block type dt) in the integer case:
 * scales 1, byte pattern `bytes` (0: 0x7f/0x80, 1: 0x0f/0xf0) in the
 * extreme blocks, the weights' bytes elsewhere as they are. */
static void
make_int_weights(enum txl_dtype dt, uint8_t *w, size_t ld, int n, int K,
		 int pattern, int bytes)
{
	const struct txl_type *t = txl_type(dt);
	static const uint8_t ext[2][2] = { { 0x7f, 0x80 }, { 0x0f, 0xf0 } };

	for (int r = 0; r < n; r++)
		for (int b = 0; b < K / t->block; b++) {
			uint8_t *blk = w + (size_t)r * ld + (size_t)b * t->bytes;
			set_scale(blk, 0x3c00);		/* 1.0 */
			for (size_t i = 2; i < t->bytes && extreme_block(pattern, b);
			     i++)
				blk[i] = ext[bytes][(r + (int)i) % 2];
			/* Q4_K: every sub-block's scale 4, its unit 1 (the
			 * zero points as they are) */
			for (int j = 0; dt == TXL_Q4_K && j < TXL_Q4_K_SUB; j++)
				blk[2 + j] = (uint8_t)((blk[2 + j] & 0xc0) | 4);
		}
}

/* The activations of the integer case: scales 1, the extremes in the
 * extreme blocks (+-127 or +-32767), random values elsewhere. */
static void
make_int_act(struct act *v, int pattern)
{
	const bool q16 = v->a.type == TXL_ACT_Q16;
	const int top = q16 ? 32767 : 127;

	for (int k = 0; k < v->K; k++) {
		const int q = extreme_block(pattern, k / TXL_QK)
			? (k % 3 ? -top : top)
			: (int)(next_u32() % (2u * top + 1)) - top;
		if (q16)
			v->a.q16.q[k] = (int16_t)q;
		else
			v->a.q8.q[k] = (int8_t)q;
	}
	for (int b = 0; b < v->K / TXL_QK; b++) {
		int32_t sum = 0;
		for (int t = 0; t < TXL_QK; t++)
			sum += act_q(v, b * TXL_QK + t);
		if (q16) {
			v->a.q16.d[b] = 1.0f;
		} else {
			v->a.q8.d[b] = 1.0f;
			v->a.q8.off[b] = -128 * sum;
		}
	}
}

/* The integer case of pattern and bytes: n rows of K weights of dt, ld
 * bytes apart (their values in e), and v's activations */
static uint8_t *
make_int_case(enum txl_dtype dt, int n, int K, size_t ld, float *e,
	      struct act *v, int pattern, int bytes)
{
	uint8_t *w = make_weights(dt, n, K, ld, e);

	make_int_weights(dt, w, ld, n, K, pattern, bytes);
	make_int_act(v, pattern);
	return w;
}

/* The integer sums of a row (its values e: the widening with scales 1)
 * and the activations, block by block; *total their exact sum, and the
 * return value their float sum in block order (what a set that computes
 * the scalar floats gives). */
static float
int_row_dot(const float *e, const struct act *v, int64_t *total)
{
	float acc = 0.0f;

	*total = 0;
	for (int b = 0; b < v->K / TXL_QK; b++) {
		int64_t s = 0;
		for (int t = 0; t < TXL_QK; t++) {
			const int k = b * TXL_QK + t;
			CHECK(e[k] == rintf(e[k]));
			s += (int64_t)e[k] * act_q(v, k);
		}
		*total += s;
		acc += (float)s;
	}
	return acc;
}

static void
fail_int(const struct set *s, enum txl_dtype dt, const char *what, int K,
	 int n, int r, float got, float want)
{
	fprintf(stderr, "FAIL: %s %s %s K %d n %d row %d: %.9g, want %.9g\n",
		s->k->name, txl_dtype_name(dt), what, K, n, r, got, want);
	exit(1);
}

/* Rows of a block type against activations of one form (the kernel
 * dot_q8 or dot_q16 of the types that have it): (1) the integer case,
 * both patterns and both byte patterns: the exact integer sums (below
 * 2^24, so that any order of the float additions is exact), or, where
 * every set computes the scalar floats, their float sum in block order;
 * (2) random scales and values, the activations quantized: against the
 * float product (check_act_dot) and, where the traits say so, bit for
 * bit the scalar set's.  Rows in sixteens, eights, fours and not, padded
 * apart. */
static void
test_dot_act(const struct set *s)
{
	static const int Ks[] = { 32, 64, 96, 128, 384, 416, 1536 };
	static const int ns[] = { 1, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32 };
	static const int pads[] = { 0, 18, 68 };

	FOR_TYPES(dt) for (int at = TXL_ACT_Q8; at <= TXL_ACT_Q16; at++) {
		const struct txl_type *t = txl_type(dt);
		const bool same = t->same_floats & (1u << at);
		const char *what = at == TXL_ACT_Q8 ? "int8" : "int16";
		if (at == TXL_ACT_Q8 ? !s->t[dt].dot_q8 : !s->t[dt].dot_q16)
			continue;
		for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++)
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
		for (size_t p = 0; p < sizeof pads / sizeof *pads; p++) {
			const int K = Ks[i], n = ns[j];
			if (K % t->block)
				continue;
			const size_t ld = txl_row_bytes(dt, K) + (size_t)pads[p];
			float *e = malloc(sizeof(float) * n * K), y[32], want[32];
			struct act v;
			CHECK(e);
			act_init(&v, at, K);
			/* (1) integers */
			for (int pat = 0; pat < N_PATTERNS; pat++)
			for (int bytes = 0; bytes < 2; bytes++) {
				uint8_t *w = make_int_case(dt, n, K, ld, e, &v,
							   pat, bytes);
				txl_dot_act(&s->t[dt], y, w, ld, &v.a, n, K);
				for (int r = 0; r < n; r++) {
					int64_t exact;
					float row[1536];
					ref.t[dt].widen(row, w + (size_t)r * ld,
							(size_t)K);
					const float in_order = int_row_dot(row, &v,
									   &exact);
					if (!same)
						CHECK(llabs(exact) < (1 << 24));
					if (y[r] != (same ? in_order : (float)exact))
						fail_int(s, dt, what, K, n, r, y[r],
							 same ? in_order : (float)exact);
				}
				free(w);
			}
			/* (2) random scales, the activations quantized */
			uint8_t *w = make_weights(dt, n, K, ld, e);
			for (int k = 0; k < K; k++)
				v.x[k] = uniform() * (k % 7 ? 1.0f : 30.0f);
			quantize_ref(&v);
			txl_dot_act(&s->t[dt], y, w, ld, &v.a, n, K);
			if (same) {
				txl_dot_act(&ref.t[dt], want, w, ld, &v.a, n, K);
				CHECK(memcmp(y, want, sizeof(float) * n) == 0);
			}
			for (int r = 0; r < n; r++) {
				char name[64];
				snprintf(name, sizeof name, "%s %s %s dot row %d",
					 s->k->name, txl_dtype_name(dt), what, r);
				check_act_dot(y[r], 0, e + (size_t)r * K, &v, name);
			}
			free(w);
			free(e);
			act_free(&v);
		}
	}
}

/* Room for the interleaved copy of rows x K values of dt, aligned as the
 * model's arena aligns it (aligned_alloc wants a multiple of 64). */
static void *
alloc_il(enum txl_dtype dt, int rows, int K)
{
	return aligned_alloc(64, (txl_il_bytes(dt, rows, K) + 63) / 64 * 64);
}

/* The interleaved copies (txl_interleave()) of the types that have one,
 * against the int8 activations: (1) the integer case, both patterns and
 * both byte patterns: the exact integer dot product; (2) random scales:
 * against the float product (check_act_dot), and bit for bit the scalar
 * set's result, as every set does the same float operations in the same
 * order (txl-kernels.h); the padding rows of a partial group are 0. */
static void
test_dot_il(const struct set *s)
{
	static const int Ks[] = { 32, 96, 384, 416 };
	static const int ns[] = { 1, 15, 16, 17, 33 };

	FOR_TYPES(dt) {
		if (!s->t[dt].dot_il)
			continue;
		CHECK(txl_type(dt)->same_floats & TXL_SAME_DOT_IL);
		for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++)
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
			const int K = Ks[i], n = ns[j];
			if (K % txl_type(dt)->block)
				continue;
			const int ng = (n + TXL_IL - 1) / TXL_IL;
			const size_t ld = txl_row_bytes(dt, K);
			float *e = malloc(sizeof(float) * n * K);
			float y[48], want[48], row[416];
			uint8_t *il = alloc_il(dt, n, K);
			struct act v;
			CHECK(e && il);
			act_init(&v, TXL_ACT_Q8, K);
			/* (1) integers, scales 1 */
			for (int pat = 0; pat < N_PATTERNS; pat++)
			for (int bytes = 0; bytes < 2; bytes++) {
				uint8_t *w = make_int_case(dt, n, K, ld, e, &v,
							   pat, bytes);
				txl_interleave(il, dt, w, n, K);
				s->t[dt].dot_il(y, il, ng, &v.a.q8, K);
				for (int r = 0; r < ng * TXL_IL; r++) {
					int64_t exact = 0;
					if (r < n) {
						ref.t[dt].widen(row, w + (size_t)r * ld,
								(size_t)K);
						int_row_dot(row, &v, &exact);
					}
					CHECK(llabs(exact) < (1 << 24));
					if (y[r] != (float)exact)
						fail_int(s, dt, "il", K, n, r, y[r],
							 (float)exact);
				}
				free(w);
			}
			/* (2) random scales, the activations quantized */
			uint8_t *w = make_weights(dt, n, K, ld, e);
			for (int k = 0; k < K; k++)
				v.x[k] = uniform() * (k % 7 ? 1.0f : 30.0f);
			quantize_ref(&v);
			txl_interleave(il, dt, w, n, K);
			s->t[dt].dot_il(y, il, ng, &v.a.q8, K);
			ref.t[dt].dot_il(want, il, ng, &v.a.q8, K);
			CHECK(memcmp(y, want, sizeof(float) * ng * TXL_IL) == 0);
			for (int r = 0; r < ng * TXL_IL; r++) {
				char what[64];
				snprintf(what, sizeof what, "%s %s il row %d",
					 s->k->name, txl_dtype_name(dt), r);
				if (r < n)
					check_act_dot(y[r], 0, e + (size_t)r * K, &v,
						      what);
				else
					CHECK(y[r] == 0.0f);
			}
			free(w);
			free(il);
			free(e);
			act_free(&v);
		}
	}
}

/* ---- several rows of activations (a batch's streams of one token) ---- */

/* dot_multi: each row of activations gets, bit for bit, what the set's
 * own dot gives it alone over the same rows (a stream computes the same
 * numbers in a batch as alone), for every count of rows up to
 * TXL_ROWS_MAX, odd ones too, over lengths that take each of dot's
 * tails, rows packed and further apart; so also the bound of test_dot.
 * A set has its own dot_multi wherever it has its own dot for a type
 * whose scalar kernels have one (else it would pair another set's
 * order with its own). */
static void
test_dot_multi(const struct set *s)
{
	static const int Ks[] = { 1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 384 };
	static const int ns[] = { 1, 3, 4, 5, 9, 17, 36 };
	static const int Ms[] = { 1, 2, 3, 5, 8, TXL_ROWS_MAX };

	FOR_TYPES(dt) {
		if (!ref.t[dt].dot_multi)
			continue;
		CHECK(s->t[dt].dot_multi);
		if (s->k->isa != TXL_ISA_SCALAR) {
			const struct txl_type_kernels *own =
				txl_type(dt)->isa[s->k->isa];
			CHECK(!own || !own->dot || own->dot_multi);
		}
		for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++)
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
		for (size_t l = 0; l < sizeof Ms / sizeof *Ms; l++)
		for (int pad = 0; pad < 2; pad++) {
			const int K = Ks[i], n = ns[j], M = Ms[l];
			const size_t ld = txl_row_bytes(dt, K) + (size_t)pad * 68;
			float *e = malloc(sizeof(float) * n * K);
			float *xs = malloc(sizeof(float) * M * (K + 3));
			float *ys = malloc(sizeof(float) * M * n), one[36];
			const float *x[TXL_ROWS_MAX];
			float *y[TXL_ROWS_MAX];
			CHECK(e && xs && ys);
			void *w = make_weights(dt, n, K, ld, e);
			for (int m = 0; m < M; m++) {
				/* rows of activations anywhere: K + 3 apart */
				x[m] = xs + (size_t)(M - 1 - m) * (K + 3);
				y[m] = ys + (size_t)m * n;
			}
			for (int k = 0; k < M * (K + 3); k++)
				xs[k] = uniform();
			s->t[dt].dot_multi(y, w, ld, x, M, n, K);
			for (int m = 0; m < M; m++) {
				s->t[dt].dot(one, w, ld, x[m], n, K);
				if (memcmp(one, y[m], sizeof(float) * n)) {
					fprintf(stderr, "FAIL: %s %s dot_multi: K %d "
						"n %d M %d: row %d is not dot's\n",
						s->k->name, txl_dtype_name(dt),
						K, n, M, m);
					exit(1);
				}
			}
			free(w);
			free(e);
			free(xs);
			free(ys);
		}
	}
}

/* dot_il_multi: each row of activations, quantized on its own, gets bit
 * for bit what dot_il gives it alone (the set's, and so the scalar
 * set's: every set computes the same floats), partial groups' padding
 * rows 0; activations of large and small blocks, so that the integer
 * sums and the scales both matter; Q4_K in one super-block and three. */
static void
test_dot_il_multi(const struct set *s)
{
	static const int Ks[] = { 32, 96, 128, 384, 416 };
	static const int ns[] = { 1, 16, 33 };
	static const int Ms[] = { 1, 2, 3, 4, 5, 7, 8, TXL_ROWS_MAX };

	FOR_TYPES(dt) {
		if (!s->t[dt].dot_il)
			continue;
		CHECK(s->t[dt].dot_il_multi);
		for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++)
		for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
		for (size_t l = 0; l < sizeof Ms / sizeof *Ms; l++) {
			const int K = Ks[i], n = ns[j], M = Ms[l];
			if (K % txl_type(dt)->block)
				continue;
			const int ng = (n + TXL_IL - 1) / TXL_IL;
			const size_t ld = txl_row_bytes(dt, K);
			float *e = malloc(sizeof(float) * n * K);
			float *ys = malloc(sizeof(float) * M * ng * TXL_IL);
			float one[48], want[48];
			uint8_t *il = alloc_il(dt, n, K);
			struct act v[TXL_ROWS_MAX];
			struct txl_q8_act a[TXL_ROWS_MAX];
			float *y[TXL_ROWS_MAX];
			CHECK(e && ys && il);
			uint8_t *w = make_weights(dt, n, K, ld, e);
			txl_interleave(il, dt, w, n, K);
			for (int m = 0; m < M; m++) {
				act_init(&v[m], TXL_ACT_Q8, K);
				for (int k = 0; k < K; k++)
					v[m].x[k] = uniform() *
						(k % (5 + m) ? 1.0f : 30.0f + m);
				quantize_ref(&v[m]);
				a[m] = v[m].a.q8;
				y[m] = ys + (size_t)m * ng * TXL_IL;
			}
			s->t[dt].dot_il_multi(y, il, ng, a, M, K);
			for (int m = 0; m < M; m++) {
				s->t[dt].dot_il(one, il, ng, &a[m], K);
				ref.t[dt].dot_il(want, il, ng, &a[m], K);
				CHECK(memcmp(one, want, sizeof(float) * ng * TXL_IL)
				      == 0);
				if (memcmp(one, y[m], sizeof(float) * ng * TXL_IL)) {
					fprintf(stderr, "FAIL: %s %s dot_il_multi: "
						"K %d n %d M %d: row %d is not "
						"dot_il's\n", s->k->name,
						txl_dtype_name(dt), K, n, M, m);
					exit(1);
				}
				for (int r = n; r < ng * TXL_IL; r++)
					CHECK(y[m][r] == 0.0f);
				act_free(&v[m]);
			}
			free(w);
			free(il);
			free(e);
			free(ys);
		}
	}
}

/* The weighted sums of rows against the double-precision ones: every
 * value widens exactly, so each column is a float dot product of n terms
 * (check_dot's bound; with a zero point, of its magnitudes: the Q4_0
 * kernels of AVX2 and AVX-512 sum a q d and take 8 a d back).  Block
 * types take lengths of whole blocks, an odd number of them too (the
 * kernels' last block alone). */
static void
test_axpy(const struct set *s)
{
	static const int Ks[] = { 1, 8, 12, 16, 33, 64, 65, 100, 130 };
	static const int Ks_blk[] = { 32, 64, 96, 128, 160, 256, 384 };

	FOR_TYPES(dt) {
		const int blk = txl_type(dt)->block;
		const size_t nK = blk > 1 ? sizeof Ks_blk / sizeof *Ks_blk
			: sizeof Ks / sizeof *Ks;
		for (size_t i = 0; i < nK; i++) {
			int K = blk > 1 ? Ks_blk[i] : Ks[i], n = 37;
			if (K % blk)
				continue;
			int ld = blk > 1 ? K + blk : K + 5;
			float *e = malloc(sizeof(float) * n * ld), a[37], y[384],
			      col[37], wcol[37], wmag[37];
			CHECK(e);
			void *w = make_weights(dt, n, ld,
					       txl_row_bytes(dt, ld), e);
			for (int r = 0; r < n; r++)
				a[r] = uniform();
			for (int k = 0; k < K; k++)
				y[k] = 0.0f;
			s->t[dt].axpy_rows(y, a, w, txl_row_bytes(dt, ld), n, K);
			for (int k = 0; k < K; k++) {
				for (int r = 0; r < n; r++) {
					col[r] = a[r];
					wcol[r] = e[(size_t)r * ld + k];
					wmag[r] = magnitude(dt, (const uint8_t *)w +
							    txl_row_bytes(dt, ld) * r,
							    e + (size_t)r * ld, k);
				}
				check_dot_mag(y[k], 0, wcol, wmag, col, n,
					      txl_dtype_name(dt));
			}
			free(w);
			free(e);
		}
	}
}

/* ---- the products of txl-products.c (the chosen set, the pool) ---- */

/* N rows of weights of dt, of 96 values or three blocks of a type of
 * longer ones; their values in *e (malloc'd), their interleaved copy in
 * *il where the type has one (else NULL) */
static struct txl_mat
make_mat(enum txl_dtype dt, int N, float **e, void **il)
{
	const int K = 96 % txl_type(dt)->block ? 3 * txl_type(dt)->block : 96;
	struct txl_mat w = { .dtype = dt, .rows = N, .cols = K };

	*e = malloc(sizeof(float) * N * K);
	CHECK(*e);
	w.data = make_weights(dt, N, K, txl_row_bytes(dt, K), *e);
	*il = NULL;
	if (txl_interleaves(dt)) {
		*il = alloc_il(dt, N, K);
		CHECK(*il);
		txl_interleave(*il, dt, w.data, N, K);
	}
	return w;
}

static void
test_mat_mul(void)
{
	static const int Ms[] = { 1, 2, 5, 33 };
	const int N = 70;

	FOR_TYPES(dt) {
		float *e;
		void *il;
		const struct txl_mat w = make_mat(dt, N, &e, &il);
		const int K = w.cols;
		/* one row meets the type's activations (int8 blocks for
		 * Q8_0 and Q4_0: quantized) */
		const enum txl_act_type at = txl_type(dt)->act;
		for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++) {
			int M = Ms[i];
			float *a = malloc(sizeof(float) * M * K);
			float *out = malloc(sizeof(float) * M * N);
			float *row = malloc(sizeof(float) * K);
			CHECK(a && out && row);
			for (int j = 0; j < M * K; j++)
				a[j] = uniform();
			/* the activations of one row, as quantized */
			struct act v;
			act_init(&v, at, K);
			memcpy(v.x, a, sizeof(float) * K);
			txl_act_quantize(&v.a, v.x, K);
			/* k 2, 3: with the interleaved copy the loader makes
			 * (used for one row of activations) */
			for (int k = 0; k < (il ? 4 : 2); k++) {
				const int acc = k % 2;
				struct txl_mat wi = w;
				wi.il = k >= 2 ? il : NULL;
				for (int j = 0; j < M * N; j++)
					out[j] = 1.0f;
				txl_mat_mul(out, a, M, &wi, acc, TXL_COMPUTE_F32);
				for (int m = 0; m < M; m++)
					for (int r = 0; r < N; r++) {
						float got = out[m * N + r];
						const float *er = e + (size_t)r * K;
						if (M == 1 && at != TXL_ACT_F32)
							check_act_dot(got, acc, er, &v,
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
			CHECK(memcmp(row, e + (size_t)(N - 1) * K,
				     sizeof(float) * K) == 0);
			free(row);
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
				act_init(&v, at, K);
				for (int k = 0; k < K; k++)
					v.x[k] = uniform();
				txl_act_quantize(&v.a, v.x, K);
				txl_mat_mul(out, v.x, 1, &sub, false,
					    TXL_COMPUTE_F32);
				for (int r = 0; r < N - first; r++)
					check_act_dot(out[r], 0, e + (size_t)(first + r) * K,
						      &v, txl_dtype_name(dt));
				act_free(&v);
			}
		}
		free(il);
		free((void *)w.data);
		free(e);
	}
}

/* The products of a batch's streams of one token (txl-rows.h): each row
 * bit for bit what txl_mat_mul() gives that row alone, with and without
 * the interleaved copy, for counts of rows that take several calls of
 * the kernels (TXL_ROWS_MAX) and a partial last group of rows; and
 * txl_rows_mul(): those rows first, then a segment as txl_mat_mul()
 * computes it. */
static void
test_mul_each(void)
{
	static const int Ms[] = { 2, 3, 16, 17, 40 };
	const int N = 70;

	FOR_TYPES(dt) {
		float *e;
		void *il;
		const struct txl_mat w = make_mat(dt, N, &e, &il);
		const int K = w.cols;
		for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
		for (int k = 0; k < (il ? 2 : 1); k++) {
			const int M = Ms[i], seg = 5;
			float *a = malloc(sizeof(float) * (M + seg) * K);
			float *out = malloc(sizeof(float) * (M + seg) * N);
			float *want = malloc(sizeof(float) * (M + seg) * N);
			float *act = malloc(sizeof(float) *
					    txl_rows_act_floats(M, K));
			float *y[TXL_EACH_MAX];
			const float *x[TXL_EACH_MAX];
			CHECK(a && out && want && act);
			struct txl_mat wi = w;
			wi.il = k ? il : NULL;
			for (int j = 0; j < (M + seg) * K; j++)
				a[j] = uniform() * (j % 11 ? 1.0f : 20.0f);
			for (int m = 0; m < M; m++) {
				x[m] = a + (size_t)(M - 1 - m) * K;
				y[m] = out + (size_t)m * N;
				txl_mat_mul(want + (size_t)m * N, x[m], 1, &wi,
					    false, TXL_COMPUTE_F32);
			}
			txl_mul_each(y, x, M, &wi, act);
			CHECK(memcmp(out, want, sizeof(float) * M * N) == 0);
			/* M rows of one token each, then a segment */
			struct txl_rows r = { .n = M + seg, .n_one = M,
					      .act = act };
			for (int m = 0; m < M; m++)
				txl_mat_mul(want + (size_t)m * N,
					    a + (size_t)m * K, 1, &wi, false,
					    TXL_COMPUTE_F32);
			txl_mat_mul(want + (size_t)M * N, a + (size_t)M * K, seg,
				    &wi, false, TXL_COMPUTE_F32);
			txl_rows_mul(out, a, &r, &wi);
			CHECK(memcmp(out, want, sizeof(float) * (M + seg) * N)
			      == 0);
			free(a);
			free(out);
			free(want);
			free(act);
		}
		free(il);
		free((void *)w.data);
		free(e);
	}
}

/* out[M,N] (rows N apart) against the dot products of a's rows (ld
 * apart) and b's (ldb apart), K terms each */
static void
check_gemm_nt(const float *out, int N, const float *a, int ld,
	      const float *b, int ldb, int M, int K, const char *name)
{
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++)
			check_dot(out[m * N + n], 0, b + (size_t)n * ldb,
				  a + (size_t)m * ld, K, name);
}

/* out[M,ncols] (rows N apart) against the dot products of a's rows (ld
 * apart) and the first ncols columns of b (K rows, ldb apart) */
static void
check_gemm_nn(const float *out, int N, const float *a, int ld,
	      const float *b, int ldb, int M, int K, int ncols,
	      const char *name)
{
	float *col = malloc(sizeof(float) * K);

	CHECK(col);
	for (int m = 0; m < M; m++)
		for (int n = 0; n < ncols; n++) {
			for (int k = 0; k < K; k++)
				col[k] = b[(size_t)k * ldb + n];
			check_dot(out[m * N + n], 0, col, a + (size_t)m * ld,
				  K, name);
		}
	free(col);
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
		txl_gemm_nt_dt(out, N, a, ld, b, TXL_F32, ld, M, K, N);
		check_gemm_nt(out, N, a, ld, b, ld, M, K, "gemm_nt");
		/* out[M,N] = a[M,K] . b[K,N] (b as K rows of ld >= N) */
		txl_gemm_nn(out, N, a, ld, b, N + 3, M, K, N);
		check_gemm_nn(out, N, a, ld, b, N + 3, M, K, N, "gemm_nn");
	}
	/* the same with b in F16 and BF16 (K, V and R of a compact memory) */
	for (int dt = TXL_F16; dt <= TXL_BF16; dt++) {
		float *e = malloc(sizeof(float) * N * ld);
		CHECK(e);
		void *bc = make_weights(dt, N, ld, txl_row_bytes(dt, ld), e);
		for (int M = 1; M <= M0; M += M0 - 1) {
			txl_gemm_nt_dt(out, N, a, ld, bc, dt, ld, M, K, N);
			check_gemm_nt(out, N, a, ld, e, ld, M, K, "gemm_nt_dt");
			/* b as K rows of N (ldb = ld >= N? no: K rows of ld) */
			txl_gemm_nn_dt(out, N, a, ld, bc, dt, ld, M, K, 60);
			check_gemm_nn(out, N, a, ld, e, ld, M, K, 60, "gemm_nn_dt");
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
	atomic_int nth;		/* every thread writes it (the same) */
};

static void
count_task(void *p, int ith, int nth)
{
	struct count *c = p;

	atomic_fetch_add(&c->calls, 1);
	atomic_fetch_or(&c->mask, 1 << ith);
	atomic_store(&c->nth, nth);
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
	/* Keep the task open a while (up to 1 ms): on a busy machine a
	 * worker that is not scheduled in time finds it closed. */
	if (ith == 0) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while (atomic_load(&m->seen) != (1 << nth) - 1 &&
		       (t.tv_sec - t0.tv_sec) * 1000000000L +
		       (t.tv_nsec - t0.tv_nsec) < 1000000L);
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
	for (int i = 0; i < 20000 && atomic_load(&m.seen) != 7; i++)
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

	CHECK(set_of(TXL_ISA_SCALAR, &ref));
	RUN(test_widen_scalar);
	for (int i = 0; i < TXL_N_ISA; i++) {
		struct set s;
		if (!set_of((enum txl_isa)i, &s)) {
			fprintf(stderr, "skip: instruction set %d not on this CPU\n",
				i);
			continue;
		}
		n_isa++;
		RUN_ON(test_dot, &s);
		RUN_ON(test_f16_all, &s);
		RUN_ON(test_q8_0_block, &s);
		RUN_ON(test_q4_0_block, &s);
		RUN_ON(test_q4_k_block, &s);
		RUN_ON(test_quantize_q8, &s);
		RUN_ON(test_dot_act, &s);
		RUN_ON(test_dot_il, &s);
		RUN_ON(test_dot_multi, &s);
		RUN_ON(test_dot_il_multi, &s);
		RUN_ON(test_axpy, &s);
		RUN_ON(test_narrow, &s);
		RUN_ON(test_narrow_types, &s);
		RUN_ON(test_narrow_q8_0, &s);
		RUN_ON(test_narrow_q4_0, &s);
		RUN_ON(test_exp, &s);
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
		RUN(test_mul_each);
		RUN(test_gemm);
	}
	return 0;
}
