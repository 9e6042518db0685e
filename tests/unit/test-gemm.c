/* SPDX-License-Identifier: MIT */
/*
 * test-gemm.c - the products of segments on packed weights (txl-gemm.h):
 * the packed layout of every storage type, bit for bit against an
 * independent decoding of the stored bytes; the product of every kernel
 * set this CPU runs against sums computed here in double, and against
 * the scalar set; the BF16 products against the double sums of the
 * activations rounded here, and against F32; the copy made once, on
 * first use, by whichever thread asks first; and which products of
 * txl_mat_mul() pack their weights.
 *
 * Tolerances: each value of out is a float sum of K products in some
 * order, in at most K / kc + 1 blocks, each block's sum added to the
 * last: at most n = K + K / kc + 1 roundings, so within gamma_n sum |a_k
 * w_k| of the exact sum (Higham, Accuracy and Stability of Numerical
 * Algorithms, 3.1), gamma_n = n u / (1 - n u), u = 2^-24; the products of
 * BF16 values are exact in float (8 + 8 significant bits).  Two sets
 * against each other: twice that.  BF16 compute against F32: each
 * activation moves by at most 2^-8 of itself (nearest even, 8 bits), so
 * the exact sums differ by at most 2^-8 sum |a_k w_k|; plus both
 * roundings.  No subnormal values enter (vdpbf16ps flushes them): the
 * activations are in [-1, 1] and at least 2^-20 in magnitude.
 *
 * Run under meson with each TXL_ISA, so that the set in use (the copies
 * of txl_pack_get(), txl_mat_mul()) is each set in turn.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test-rng.h"
#include "txl-gemm.h"
#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-products.h"
#include "txl-types.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t
next_u32(void)
{
	return (uint32_t)(xorshift64(&rng) >> 32);
}

/* uniform in [-1, 1), at least 2^-20 in magnitude */
static float
uniform(void)
{
	float x = (float)next_u32() / 2147483648.0f - 1.0f;

	return fabsf(x) < 0x1p-20f ? 0x1p-20f : x;
}

/* ---- a matrix of each storage type, and its exact values ---- */

/* An IEEE half's value, decoded here (not by libtxl) */
static double
half_value(uint16_t h)
{
	const int e = (h >> 10) & 31, m = h & 1023;
	const double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);

	return h & 0x8000 ? -v : v;
}

static double
bf16_value(uint16_t h)
{
	const uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

/* A random half with a normal exponent in [2^-8, 2^2) */
static uint16_t
random_half(void)
{
	return (uint16_t)((next_u32() & 0x8000) | ((7 + next_u32() % 10) << 10) |
			  (next_u32() & 1023));
}

/* A random BF16 in [-2, 2), normal */
static uint16_t
random_bf16(void)
{
	return (uint16_t)((next_u32() & 0x8000) | ((110 + next_u32() % 18) << 7) |
			  (next_u32() & 127));
}

/* rows x cols stored values of dt (random), into *stored (malloc'd), and
 * their exact values into e[rows * cols] (decoded here) */
static void
random_matrix(enum txl_dtype dt, int rows, int cols, void **stored, double *e)
{
	const size_t ld = txl_row_bytes(dt, cols);
	uint8_t *w = malloc(ld * (size_t)rows + 1);

	CHECK(w);
	for (int r = 0; r < rows; r++) {
		uint8_t *row = w + ld * (size_t)r;
		double *er = e + (size_t)r * cols;

		for (int k = 0; k < cols; k++) {
			if (dt == TXL_F32) {
				float f = uniform();
				memcpy(row + 4 * k, &f, 4);
				er[k] = f;
			} else if (dt == TXL_F16) {
				uint16_t h = random_half();
				memcpy(row + 2 * k, &h, 2);
				er[k] = half_value(h);
			} else if (dt == TXL_BF16) {
				uint16_t h = random_bf16();
				memcpy(row + 2 * k, &h, 2);
				er[k] = bf16_value(h);
			}
		}
		if (dt == TXL_Q8_0 || dt == TXL_Q4_0) {
			const size_t bs = txl_type(dt)->bytes;

			for (int b = 0; b < cols / TXL_QK; b++) {
				uint8_t *blk = row + bs * (size_t)b;
				uint16_t d = random_half();
				const double s = half_value(d);

				memcpy(blk, &d, 2);
				for (int k = 0; k < TXL_QK; k++) {
					int q;
					if (dt == TXL_Q8_0) {
						q = (int)(next_u32() % 255) - 127;
						blk[2 + k] = (uint8_t)(int8_t)q;
					} else {
						/* nibble k % 16, low for k < 16 */
						const int v = (int)(next_u32() % 16);
						uint8_t *x = &blk[2 + k % 16];
						*x = k < 16 ? (uint8_t)((*x & 0xf0) | v)
							: (uint8_t)((*x & 0x0f) | v << 4);
						q = v - 8;
					}
					er[b * TXL_QK + k] = q * s;
				}
			}
		}
		/* Q4_K (txl-dtype.h): random bytes under a random scale;
		 * value i of sub-block j is d sc_j / 4 (4 q - z_j) */
		for (int b = 0; dt == TXL_Q4_K && b < cols / 128; b++) {
			uint8_t *blk = row + 72 * (size_t)b;
			uint16_t d = random_half();

			for (int i = 0; i < 72; i++)
				blk[i] = (uint8_t)next_u32();
			memcpy(blk, &d, 2);
			for (int k = 0; k < 128; k++) {
				const int j = k / 32, i = k % 32;
				const uint8_t *sz = blk + 2;
				const int sc = sz[j] & 63;
				const int z = sz[j] >> 6 |
					((sz[4 + j / 2] >> (j % 2 ? 4 : 0)) &
					 15) << 2;
				const int q = i < 16 ? blk[8 + 16 * j + i] & 15
					: blk[8 + 16 * j + i - 16] >> 4;

				er[b * 128 + k] = (4 * q - z) *
					(half_value(d) * sc / 4);
			}
		}
	}
	*stored = w;
}

static int
cols_for(enum txl_dtype dt, int K)
{
	/* the block types take whole blocks */
	const int b = txl_type(dt)->block;

	return (K + b - 1) / b * b;
}

#define FOR_TYPES(dt)                                                        \
	for (enum txl_dtype dt = 0; dt < TXL_N_DTYPES; dt++)                  \
		if (txl_dtype_computable(dt))

/* ---- the packed layout ---- */

/* Value (r, k) of the packed copy, read from the layout of txl-gemm.h */
static double
packed_value(const struct txl_packed *p, int r, int k)
{
	const int nr = p->nr, j = r % nr;
	const uint8_t *panel = p->data + (size_t)(r / nr) * p->panel_bytes;

	switch (p->fmt) {
	case TXL_PACK_F32: {
		float f;
		memcpy(&f, panel + ((size_t)k * nr + j) * 4, 4);
		return f;
	}
	case TXL_PACK_F16: {
		uint16_t h;
		memcpy(&h, panel + ((size_t)k * nr + j) * 2, 2);
		return half_value(h);
	}
	case TXL_PACK_BF16: {
		uint32_t pair;
		memcpy(&pair, panel + ((size_t)(k / 2) * nr + j) * 4, 4);
		return bf16_value((uint16_t)(k % 2 ? pair >> 16 : pair));
	}
	default: {
		const uint8_t *blk = panel + (size_t)(k / 32) * (size_t)nr * 36;
		float s;
		memcpy(&s, blk + 4 * (size_t)j, 4);
		return (int8_t)blk[4 * (size_t)nr + (size_t)(k % 32) * nr + j] *
		       (double)s;
	}
	}
}

static void
test_pack(const struct txl_gemm_kernels *kn)
{
	FOR_TYPES(dt) {
		const int N = 2 * kn->nr + 5, K = cols_for(dt, 69);
		double *e = malloc(sizeof *e * (size_t)N * K);
		void *w;

		CHECK(e);
		random_matrix(dt, N, K, &w, e);
		struct txl_packed *p = txl_pack(dt, w, N, K, kn);
		CHECK(p);
		CHECK_EQ(p->n_panels, 3);
		CHECK_EQ(p->nr, kn->nr);
		CHECK(p->panel_bytes * 3 == txl_packed_bytes(dt, N, K, kn->nr));
		for (int r = 0; r < 3 * kn->nr; r++)
			for (int k = 0; k < K; k++) {
				/* the padding columns are zeros */
				const double want = r < N ? e[(size_t)r * K + k]
					: 0.0;
				if (packed_value(p, r, k) != want) {
					fprintf(stderr, "%s %s: packed (%d, %d) "
						"%.9g, stored %.9g\n", kn->name,
						txl_dtype_name(dt), r, k,
						packed_value(p, r, k), want);
					CHECK(0);
				}
			}
		/* an odd K leaves the last pair's high half 0 */
		if (p->fmt == TXL_PACK_BF16)
			for (int r = 0; r < 3 * kn->nr; r++)
				CHECK(packed_value(p, r, K) == 0.0);
		txl_packed_free(p);
		free(w);
		free(e);
	}
}

/* ---- the products ---- */

/* x rounded to BF16, to nearest even (computed here) */
static double
bf16_round(float x)
{
	uint32_t b;

	memcpy(&b, &x, sizeof b);
	b = (b + 0x7fffu + ((b >> 16) & 1)) & 0xffff0000u;
	memcpy(&x, &b, sizeof b);
	return x;
}

/* Rows of K for a block of the driver (txl-gemm.c: at most 512) */
static int
n_roundings(int K)
{
	return K + K / 512 + 2;
}

static double
gamma_n(int n)
{
	const double u = 0x1p-24;

	return n * u / (1 - n * u);
}

struct shape {
	int M, N, K;
};

/* out of one product on set kn (NULL: its scalar set's); checks each
 * value against the double sums of e with the bound of the header,
 * accumulating onto `prior` if acc */
static void
check_product(const struct txl_gemm_kernels *kn, enum txl_dtype dt,
	      struct shape s, bool bf16, bool acc)
{
	const int M = s.M, N = s.N, K = cols_for(dt, s.K);
	const int lda = K + 3, ldo = N + 5;	/* rows wider than the values */
	double *e = malloc(sizeof *e * (size_t)N * K);
	float *a = malloc(sizeof *a * (size_t)M * lda);
	float *out = malloc(sizeof *out * (size_t)M * ldo);
	float *ref = malloc(sizeof *ref * (size_t)M * ldo);
	float *init = malloc(sizeof *init * (size_t)M * ldo);
	const struct txl_gemm_kernels *sc = txl_gemm_kernels_on(TXL_ISA_SCALAR);
	void *w;

	CHECK(e && a && out && ref && init);
	random_matrix(dt, N, K, &w, e);
	for (size_t i = 0; i < (size_t)M * lda; i++)
		a[i] = uniform();
	for (size_t i = 0; i < (size_t)M * ldo; i++)
		out[i] = ref[i] = init[i] = uniform();
	struct txl_packed *p = txl_pack(dt, w, N, K, kn);
	struct txl_packed *ps = txl_pack(dt, w, N, K, sc);
	CHECK(p && ps);
	CHECK(txl_gemm_packed(out, ldo, a, lda, M, p, bf16, acc));
	CHECK(txl_gemm_packed(ref, ldo, a, lda, M, ps, bf16, acc));
	const bool rounded = bf16 && dt == TXL_BF16;
	const double g = gamma_n(n_roundings(K));

	for (int m = 0; m < M; m++) {
		for (int j = 0; j < ldo; j++) {
			const size_t o = (size_t)m * ldo + j;
			/* the columns beyond N stay as they were */
			if (j >= N) {
				CHECK(out[o] == ref[o]);
				continue;
			}
			double sum = 0, mag = 0, sum32 = 0;
			for (int k = 0; k < K; k++) {
				const float x = a[(size_t)m * lda + k];
				const double xa = rounded ? bf16_round(x) : x;
				const double t = xa * e[(size_t)j * K + k];
				sum += t;
				sum32 += (double)x * e[(size_t)j * K + k];
				mag += fabs(t);
			}
			/* the prior value, added once more */
			const double prior = acc ? (double)init[o] : 0.0;
			const double tol = g * (mag + fabs(prior)) + 1e-30;
			const double got = (double)out[o] - prior;

			if (!(fabs(got - sum) <= tol)) {
				fprintf(stderr, "%s %s M %d N %d K %d bf16 %d "
					"acc %d: (%d, %d) %.9g, want %.9g, "
					"tol %g\n", kn->name,
					txl_dtype_name(dt), M, N, K, bf16, acc,
					m, j, got, sum, tol);
				CHECK(0);
			}
			/* against the scalar set */
			CHECK_NEAR(out[o], ref[o], 2 * tol);
			/* against F32: the rounding of the activations,
			 * within 2^-8 of each (mag is of the rounded
			 * ones: 1.01 for the difference) */
			if (rounded)
				CHECK_NEAR(got, sum32,
					   (0x1p-8 * 1.01 + 2 * g) * mag + tol);
		}
	}
	txl_packed_free(p);
	txl_packed_free(ps);
	free(w);
	free(e);
	free(a);
	free(out);
	free(ref);
	free(init);
}

static void
test_products(const struct txl_gemm_kernels *kn)
{
	/* M, N, K below, at and above the tile (mr, nr, 8 or 16 values a
	 * vector, 32 a Q8_0 block) and K over a block of the driver (512):
	 * odd everywhere */
	const struct shape shapes[] = {
		{ 1, 1, 1 }, { 1, 53, 37 }, { 7, 17, 3 }, { 13, 100, 70 },
		{ 33, 49, 100 }, { 9, 96, 64 }, { 40, 31, 530 },
		{ 2, 5, 1100 },
	};

	FOR_TYPES(dt)
		for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
			for (int acc = 0; acc < 2; acc++) {
				check_product(kn, dt, shapes[i], false, acc);
				if (dt == TXL_BF16)
					check_product(kn, dt, shapes[i], true,
						      acc);
			}
}

/* ---- the copy made once ---- */

struct race {
	struct txl_pack_slot *slot;
	const void *w;
	const struct txl_packed *got;
};

static void *
get_copy(void *p)
{
	struct race *r = p;

	r->got = txl_pack_get(r->slot, TXL_BF16, r->w, 300, 64);
	return NULL;
}

static void
test_slot(void)
{
	struct txl_pack_slot slot = { 0 };
	double *e = malloc(sizeof *e * 300 * 64);
	struct race r[4];
	pthread_t t[4];
	void *w;

	CHECK(e);
	random_matrix(TXL_BF16, 300, 64, &w, e);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct race){ .slot = &slot, .w = w };
		CHECK(pthread_create(&t[i], NULL, get_copy, &r[i]) == 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* one copy for all, for the set in use, kept */
	for (int i = 0; i < 4; i++)
		CHECK(r[i].got && r[i].got == r[0].got);
	CHECK(r[0].got->kern == txl_gemm_kernels());
	CHECK(txl_pack_get(&slot, TXL_BF16, w, 300, 64) == r[0].got);
	txl_pack_slot_clear(&slot);
	CHECK(atomic_load(&slot.packed) == NULL);
	free(w);
	free(e);
}

/* txl_mat_mul() packs a matrix for products of TXL_PACK_MIN_ROWS rows or
 * more (and for every product of two or more rows in BF16), and computes
 * the same values (within the bound) from the copy */
static void
test_mat_mul_packs(void)
{
	const int N = 70, K = 128, M = TXL_PACK_MIN_ROWS;
	double *e = malloc(sizeof *e * N * K);
	float *a = malloc(sizeof *a * M * K), *out = malloc(sizeof *out * M * N);
	struct txl_pack_slot slot = { 0 };
	void *w;

	CHECK(e && a && out);
	FOR_TYPES(dt) {
		random_matrix(dt, N, K, &w, e);
		for (int i = 0; i < M * K; i++)
			a[i] = uniform();
		struct txl_mat mat = { .dtype = dt, .rows = N, .cols = K,
				       .data = w, .pack = &slot };
		for (int rows = 1; rows <= M; rows++) {
			for (int c = 0; c < 2; c++) {
				const bool bf16 = c && dt == TXL_BF16;
				txl_mat_mul(out, a, rows, &mat, false,
					    c ? TXL_COMPUTE_BF16
					      : TXL_COMPUTE_F32);
				const bool packed =
					atomic_load(&slot.packed) != NULL;
				CHECK(packed == (rows >= M ||
						 (bf16 && rows > 1)));
				/* one row: the matrix-vector kernels (some
				 * quantize: test-kernels tests them) */
				for (int m = 0; m < rows && rows > 1; m++)
					for (int j = 0; j < N; j++) {
						double sum = 0, mag = 0;
						for (int k = 0; k < K; k++) {
							const float x =
								a[m * K + k];
							const double t =
								(bf16 && rows > 1
								 ? bf16_round(x)
								 : x) *
								e[j * K + k];
							sum += t;
							mag += fabs(t);
						}
						CHECK_NEAR(out[m * N + j], sum,
							   gamma_n(K + 2) * mag +
								   1e-30);
					}
				txl_pack_slot_clear(&slot);
			}
		}
		free(w);
	}
	free(e);
	free(a);
	free(out);
}

/* The choice: the set in use (the one TXL_ISA allows) or its base's, and
 * BF16 natively on avx512bf16 alone. */
static void
test_dispatch(void)
{
	const struct txl_gemm_kernels *k = txl_gemm_kernels();
	const enum txl_isa isa = txl_kernels()->isa;
	static const char *const want[TXL_N_ISA] = {
		"scalar", "avx2", "avx2", "avx512", "avx512", "avx512bf16",
	};

	CHECK(strcmp(k->name, want[isa]) == 0);
	CHECK_EQ(txl_compute_native(TXL_COMPUTE_F32), 1);
	CHECK_EQ(txl_compute_native(TXL_COMPUTE_BF16),
		 isa == TXL_ISA_AVX512_BF16);
	CHECK_EQ(txl_compute_native((enum txl_compute)7), -1);
	CHECK((k->bf16 != NULL) == (isa == TXL_ISA_AVX512_BF16));
}

int
main(void)
{
	const char *want = getenv("TXL_ISA");
	int n = 0;

	/* one run per TXL_ISA, as test-kernels */
	if (want && strcmp(want, txl_kernels()->name) != 0) {
		fprintf(stderr, "skip: TXL_ISA=%s not on this CPU (%s)\n",
			want, txl_kernels()->name);
		return TEST_SKIP;
	}
	RUN(test_dispatch);
	for (int t = 1; t <= 3; t++) {
		const struct txl_gemm_kernels *last = NULL;

		txl_set_threads(t);
		for (int i = 0; i < TXL_N_ISA; i++) {
			const struct txl_gemm_kernels *kn =
				txl_gemm_kernels_on((enum txl_isa)i);
			/* a set without kernels of its own: its base's */
			if (!kn || kn == last)
				continue;
			last = kn;
			fprintf(stderr, "set %s, %d threads\n", kn->name, t);
			n++;
			if (t == 1)
				test_pack(kn);
			test_products(kn);
		}
		RUN(test_slot);
		RUN(test_mat_mul_packs);
	}
	CHECK(n >= 3);
	return 0;
}
