/* SPDX-License-Identifier: MIT */
/*
 * txl-gemm.h - the matrix-matrix products of segments on weights packed
 * once (txl-gemm.c; the kernels of each instruction set in
 * txl-gemm-avx2.c, txl-gemm-avx512.c and txl-gemm-avx512bf16.c).  Not
 * installed.
 *
 * A product out[M, N] = a[M, K] . W[N, K]^T of a segment (scoring,
 * prompts, the window of attn_type 2 and 3) reads every weight M times.
 * sgemm packs W for its kernel at every call (bench/README.md); here W
 * is packed once, on first use, into panels of nr rows
 * of W (nr columns of out), each panel its K values k-major, in one of
 * these formats:
 *
 *   F32   K rows of nr floats (from F32 weights);
 *   F16   K rows of nr halves (from F16), widened kc rows at a time;
 *   BF16  (K + 1) / 2 rows of nr pairs of BF16 values: value k of column
 *         j is the low (k even) or high (k odd) half of the 32 bits of
 *         pair (k / 2, j), as vdpbf16ps takes them; widened to F32 kc
 *         rows at a time, or multiplied as they are (compute BF16);
 *   Q8    (from the block types: their unpack_q8) per block of 32 rows, nr
 *         float scales and 32 rows of nr int8 values, widened kc rows at a
 *         time.
 *
 * Each holds exactly the stored values (the copy takes the bytes of the
 * stored matrix, plus a scale in F32 rather than F16 for an 8-bit block
 * type, and twice a 4-bit one's), the last panel padded with zero columns.  A kernel computes a
 * tile of out, mr rows by nr columns, from mr rows of a (in place, lda
 * apart) and the kc rows of a panel that a block of K takes (widened
 * into a buffer that stays in L2, unless F32 or multiplied as BF16); the
 * tiles of one panel run one after the other, so that its kc rows stay
 * in cache while every row of a passes.  Each thread of the pool takes
 * whole panels: the weights are read once a product.
 *
 * Every kernel set computes the same products up to the order of the
 * float sums (txl-gemm.c's scalar set is the reference of the unit
 * tests): each value of out is a sum over k of a_k w_k in float, of at
 * most K + K / kc roundings, so within (K + K / kc + 1) 2^-24 sum |a_k
 * w_k| of the exact sum.  With compute BF16 the activations are first
 * rounded to BF16 (nearest even: each within 2^-8 of its value), and
 * vdpbf16ps flushes subnormal inputs and results to zero.
 */
#ifndef TXL_GEMM_H
#define TXL_GEMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txl-dtype.h"
#include "txl-kernels.h"

/* c[m, n] (rows ldc apart) = a[m, kc] (rows lda apart) . b (+ c if add),
 * for the m <= mr rows and n <= nr columns of a tile; b: kc rows of nr
 * floats (a panel's, or widened from one).  Rows of a beyond m are not
 * read, columns of c beyond n not written. */
typedef void (*txl_gemm_f32_fn)(float *c, size_t ldc, const float *a,
				size_t lda, const float *b, int kc, int m,
				int n, bool add);
/* The same in BF16: a holds rows of kp pairs of BF16 activations (lda
 * pairs apart), b kp rows of nr pairs of a BF16 panel; the products
 * summed in float. */
typedef void (*txl_gemm_bf16_fn)(float *c, size_t ldc, const uint32_t *a,
				 size_t lda, const uint32_t *b, int kp, int m,
				 int n, bool add);
/* a[M, K] (rows lda apart) rounded to BF16 (nearest even) as rows of
 * (K + 1) / 2 pairs (ldd apart), as the bf16 kernel takes them: an odd
 * K's last pair with a high half of 0.  A set's own may flush subnormal
 * values to 0, as its bf16 kernel would. */
typedef void (*txl_gemm_pairs_fn)(uint32_t *dst, size_t ldd, const float *a,
				  size_t lda, int M, int K);
/* Rows [k0, k0 + kc) of a panel in its format (nr columns) as floats into
 * dst[kc * nr]; k0 and kc even for BF16 (but the last block's kc),
 * multiples of 32 for Q8. */
typedef void (*txl_gemm_widen_fn)(float *dst, const void *panel, int k0,
				  int kc, int nr);

/* The kernels of one instruction set. */
struct txl_gemm_kernels {
	const char *name;	/* as txl_kernels_for()'s set */
	int mr, nr;		/* the tile */
	txl_gemm_f32_fn f32;
	txl_gemm_bf16_fn bf16;	/* NULL: none (BF16 products widened) */
	txl_gemm_pairs_fn pairs;	/* the activations for bf16 (NULL:
					   txl-gemm.c's) */
	txl_gemm_widen_fn widen[TXL_N_PACK];	/* NULL for F32 */
};

/* The set in use (that of txl_kernels(), or the nearest below it that has
 * one), and that of any set (NULL if this CPU cannot run it). */
const struct txl_gemm_kernels *txl_gemm_kernels(void);
const struct txl_gemm_kernels *txl_gemm_kernels_on(enum txl_isa isa);
/* Whether the set in use multiplies BF16 as it is (vdpbf16ps). */
bool txl_gemm_bf16_native(void);

/* A weight matrix packed for the kernels of a set. */
struct txl_packed {
	enum txl_pack_fmt fmt;
	int n, k;		/* the matrix: n rows of k */
	int nr;			/* its kernels' */
	int n_panels;
	size_t panel_bytes;
	uint8_t *data;		/* n_panels panels, 64-byte aligned */
	const struct txl_gemm_kernels *kern;	/* the set it is packed for */
};

/* The format that weights of dt take (dt computable). */
enum txl_pack_fmt txl_pack_fmt_of(enum txl_dtype dt);
/* Bytes of the packed copy of rows x cols values of dt for a set of
 * panels nr wide. */
size_t txl_packed_bytes(enum txl_dtype dt, int rows, int cols, int nr);
/* rows x cols values of dt (rows of txl_row_bytes() bytes, as stored)
 * packed for kern; NULL if out of memory.  The panels are packed on the
 * pool. */
struct txl_packed *txl_pack(enum txl_dtype dt, const void *w, int rows,
			    int cols, const struct txl_gemm_kernels *kern);
void txl_packed_free(struct txl_packed *p);

/* Where a weight matrix keeps its packed copy, made on first use by
 * whichever thread needs it first (the others wait for none: two may
 * pack at once, one copy is kept).  Zeroed: none yet. */
struct txl_pack_slot {
	_Atomic(struct txl_packed *) packed;
};

/* The slot's packed copy of the matrix (dt, rows x cols, as stored at w)
 * for the set in use, packed now if it has none; NULL if out of memory
 * (the caller computes without it). */
const struct txl_packed *txl_pack_get(struct txl_pack_slot *slot,
				      enum txl_dtype dt, const void *w,
				      int rows, int cols);
/* Free the slot's copy (the slot itself is the caller's). */
void txl_pack_slot_clear(struct txl_pack_slot *slot);

/* out[M, p.n] (rows ldo apart) = a[M, p.k] (rows lda apart) . W^T
 * (+ out if accumulate), on p's kernels, split over the pool by panels.
 * bf16: a rounded to BF16 first (p's format BF16 only).  False (out
 * untouched) if out of memory for its buffers. */
bool txl_gemm_packed(float *out, int ldo, const float *a, int lda, int M,
		     const struct txl_packed *p, bool bf16, bool accumulate);

/* The kernels of the vector sets (built on x86-64 only) and the widening
 * each set's file compiles for itself. */
extern const struct txl_gemm_kernels txl_gemm_avx2, txl_gemm_avx512,
	txl_gemm_avx512bf16;
void txl_gemm_avx512_f32(float *c, size_t ldc, const float *a, size_t lda,
			 const float *b, int kc, int m, int n, bool add);
void txl_gemm_avx512_widen_f16(float *dst, const void *panel, int k0,
			       int kc, int nr);
void txl_gemm_avx512_widen_bf16(float *dst, const void *panel, int k0,
				int kc, int nr);
void txl_gemm_avx512_widen_q8(float *dst, const void *panel, int k0,
			      int kc, int nr);

/* ---- the widening of the formats, in C, for each set's file to compile
 * for its own instruction set ---- */

/* Bytes of one block of 32 rows of a Q8 panel nr wide. */
static inline size_t
txl_pack_q8_block(int nr)
{
	return (size_t)nr * (sizeof(float) + TXL_QK);
}

static inline void
txl_gemm_widen_bf16_c(float *restrict dst, const void *panel, int k0,
		      int kc, int nr)
{
	const uint32_t *p = (const uint32_t *)panel + (size_t)(k0 / 2) * nr;

	for (int k = 0; k < kc; k += 2, p += nr) {
		float *lo = dst + (size_t)k * nr, *hi = lo + nr;

		for (int j = 0; j < nr; j++) {
			const uint32_t l = p[j] << 16;

			memcpy(&lo[j], &l, sizeof l);
		}
		if (k + 1 == kc)
			break;
		for (int j = 0; j < nr; j++) {
			const uint32_t h = p[j] & 0xffff0000u;

			memcpy(&hi[j], &h, sizeof h);
		}
	}
}

/* The k loop of a vector set's tile of MR rows by NV vectors (the file's
 * enum): acc[i][j] = the sum over k < kc of the products of row i's value
 * k (a's rows lda elements of type T apart, rows beyond m repeating the
 * last: computed, not stored) and the panel's vector j of step k (b, NR
 * elements a step), each by MADD(acc, broadcast, panel vector), the
 * vectors of type V by ZERO(), LOAD(p) and BCAST(p).  Arrays unrolled
 * whole into registers. */
#define TXL_GEMM_TILE(T, V, ZERO, LOAD, BCAST, MADD, acc, a, lda, b, kc, m) \
	do {                                                                \
		const T *ar_[MR];                                           \
		const T *b_ = (b);                                          \
		_Pragma("GCC unroll 8")                                     \
		for (int i_ = 0; i_ < MR; i_++) {                           \
			ar_[i_] = (a) + (size_t)(i_ < (m) ? i_ : (m) - 1) * \
				(lda);                                      \
			_Pragma("GCC unroll 3")                             \
			for (int j_ = 0; j_ < NV; j_++)                     \
				(acc)[i_][j_] = ZERO();                     \
		}                                                           \
		for (int k_ = 0; k_ < (kc); k_++, b_ += NR) {               \
			V bv_[NV];                                          \
			_Pragma("GCC unroll 3")                             \
			for (int j_ = 0; j_ < NV; j_++)                     \
				bv_[j_] = LOAD(b_ + NR / NV * j_);          \
			_Pragma("GCC unroll 8")                             \
			for (int i_ = 0; i_ < MR; i_++) {                   \
				const V x_ = BCAST(ar_[i_] + k_);           \
				_Pragma("GCC unroll 3")                     \
				for (int j_ = 0; j_ < NV; j_++)             \
					(acc)[i_][j_] = MADD((acc)[i_][j_], \
							     x_, bv_[j_]);  \
			}                                                   \
		}                                                           \
	} while (0)

static inline void
txl_gemm_widen_q8_c(float *restrict dst, const void *panel, int k0, int kc,
		    int nr)
{
	const uint8_t *blk = (const uint8_t *)panel +
		(size_t)(k0 / TXL_QK) * txl_pack_q8_block(nr);

	for (int b = 0; b < kc / TXL_QK; b++, blk += txl_pack_q8_block(nr)) {
		const float *sc = (const float *)(const void *)blk;
		const int8_t *q = (const int8_t *)(blk + sizeof(float) * nr);

		for (int k = 0; k < TXL_QK; k++, dst += nr, q += nr)
			for (int j = 0; j < nr; j++)
				dst[j] = (float)q[j] * sc[j];
	}
}

#endif /* TXL_GEMM_H */
