/* SPDX-License-Identifier: MIT */
/*
 * txl-gemm.c - the matrix-matrix products of segments on weights packed
 * once: the packing, the driver that splits a product into tiles over the
 * pool, the choice of a kernel set, and the scalar set (the reference of
 * the others, and the kernels of CPUs without a vector set).
 * txl-gemm.h says how the weights are laid out.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "txl.h"
#include "txl-alloc.h"
#include "txl-gemm.h"
#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-types.h"

/* ---- the scalar set ---- */

enum { SCALAR_MR = 4, SCALAR_NR = 16 };

static void
f32_scalar(float *c, size_t ldc, const float *a, size_t lda, const float *b,
	   int kc, int m, int n, bool add)
{
	float acc[SCALAR_MR][SCALAR_NR] = { { 0 } };

	for (int k = 0; k < kc; k++, b += SCALAR_NR)
		for (int i = 0; i < m; i++) {
			const float x = a[(size_t)i * lda + k];

			for (int j = 0; j < SCALAR_NR; j++)
				acc[i][j] += x * b[j];
		}
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++)
			c[(size_t)i * ldc + j] = add ? c[(size_t)i * ldc + j] +
				acc[i][j] : acc[i][j];
}

static void
widen_f16_scalar(float *dst, const void *panel, int k0, int kc, int nr)
{
	const uint16_t *p = (const uint16_t *)panel + (size_t)k0 * nr;

	for (size_t i = 0; i < (size_t)kc * nr; i++)
		dst[i] = txl_f16_to_f32(p[i]);
}

static void
widen_bf16_scalar(float *dst, const void *panel, int k0, int kc, int nr)
{
	txl_gemm_widen_bf16_c(dst, panel, k0, kc, nr);
}

static void
widen_q8_scalar(float *dst, const void *panel, int k0, int kc, int nr)
{
	txl_gemm_widen_q8_c(dst, panel, k0, kc, nr);
}

static const struct txl_gemm_kernels gemm_scalar = {
	.name = "scalar", .mr = SCALAR_MR, .nr = SCALAR_NR, .f32 = f32_scalar,
	.widen = {
		[TXL_PACK_F16] = widen_f16_scalar,
		[TXL_PACK_BF16] = widen_bf16_scalar,
		[TXL_PACK_Q8] = widen_q8_scalar,
	},
};

/* ---- the choice of a set ---- */

/* Each instruction set's, or NULL: that of the set it extends */
static const struct txl_gemm_kernels *const sets[TXL_N_ISA] = {
	[TXL_ISA_SCALAR] = &gemm_scalar,
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	[TXL_ISA_AVX2] = &txl_gemm_avx2,
	[TXL_ISA_AVX512] = &txl_gemm_avx512,
	[TXL_ISA_AVX512_BF16] = &txl_gemm_avx512bf16,
#endif
};

const struct txl_gemm_kernels *
txl_gemm_kernels_on(enum txl_isa isa)
{
	if (!txl_kernels_for(isa))
		return NULL;
	while (!sets[isa])
		isa = txl_isa_base(isa);
	return sets[isa];
}

const struct txl_gemm_kernels *
txl_gemm_kernels(void)
{
	return txl_gemm_kernels_on(txl_kernels()->isa);
}

bool
txl_gemm_bf16_native(void)
{
	return txl_gemm_kernels()->bf16 != NULL;
}

/* txl.h */
int
txl_compute_native(enum txl_compute compute)
{
	switch (compute) {
	case TXL_COMPUTE_F32:
		return 1;
	case TXL_COMPUTE_BF16:
		return txl_gemm_bf16_native();
	default:
		return -1;
	}
}

/* ---- packing ---- */

enum txl_pack_fmt
txl_pack_fmt_of(enum txl_dtype dt)
{
	return txl_type(dt)->pack;
}

/* Bytes of one panel of K values (a multiple of 64, so that every panel
 * stays aligned). */
static size_t
panel_bytes(enum txl_pack_fmt fmt, int K, int nr)
{
	size_t b;

	switch (fmt) {
	case TXL_PACK_F16:
		b = (size_t)K * nr * 2;
		break;
	case TXL_PACK_BF16:
		b = (size_t)(K + 1) / 2 * nr * 4;
		break;
	case TXL_PACK_Q8:
		b = (size_t)(K / TXL_QK) * txl_pack_q8_block(nr);
		break;
	default:
		b = (size_t)K * nr * 4;
		break;
	}
	return (b + 63) / 64 * 64;
}

size_t
txl_packed_bytes(enum txl_dtype dt, int rows, int cols, int nr)
{
	return (size_t)((rows + nr - 1) / nr) *
	       panel_bytes(txl_pack_fmt_of(dt), cols, nr);
}

struct pack_job {
	struct txl_packed *p;
	const uint8_t *w;
	size_t ld;		/* bytes per stored row */
	txl_unpack_q8_fn unpack_q8;	/* TXL_PACK_Q8 */
};

/* Panel q of the job: row r of W is column r - q nr of the panel. */
static void
pack_panel(const struct pack_job *job, int q)
{
	const struct txl_packed *p = job->p;
	const int nr = p->nr, K = p->k;
	uint8_t *dst = p->data + (size_t)q * p->panel_bytes;

	memset(dst, 0, p->panel_bytes);
	for (int j = 0; j < nr && q * nr + j < p->n; j++) {
		const uint8_t *row = job->w + (size_t)(q * nr + j) * job->ld;

		switch (p->fmt) {
		case TXL_PACK_F32:	/* the values as stored, k-major */
			for (int k = 0; k < K; k++)
				memcpy(dst + ((size_t)k * nr + j) * 4,
				       row + (size_t)k * 4, 4);
			break;
		case TXL_PACK_F16:
			for (int k = 0; k < K; k++)
				memcpy(dst + ((size_t)k * nr + j) * 2,
				       row + (size_t)k * 2, 2);
			break;
		case TXL_PACK_BF16:
			/* value k into half k % 2 of pair k / 2 (little
			 * endian: the low half first) */
			for (int k = 0; k < K; k++)
				memcpy(dst + ((size_t)(k / 2) * nr + j) * 4 +
				       (k % 2) * 2, row + (size_t)k * 2, 2);
			break;
		case TXL_PACK_Q8:
			for (int b = 0; b < K / TXL_QK; b++) {
				uint8_t *o = dst + (size_t)b *
					txl_pack_q8_block(nr);
				int8_t *q8 = (int8_t *)(o + sizeof(float) * nr);
				float d;

				job->unpack_q8(&d, q8 + j, (size_t)nr, row, b);
				memcpy(o + sizeof(float) * j, &d, sizeof d);
			}
			break;
		default:
			break;
		}
	}
}

static void
pack_rows(void *ctx, int lo, int hi)
{
	for (int q = lo; q < hi; q++)
		pack_panel(ctx, q);
}

struct txl_packed *
txl_pack(enum txl_dtype dt, const void *w, int rows, int cols,
	 const struct txl_gemm_kernels *kern)
{
	struct txl_packed *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->fmt = txl_pack_fmt_of(dt);
	p->n = rows;
	p->k = cols;
	p->nr = kern->nr;
	p->kern = kern;
	p->n_panels = (rows + kern->nr - 1) / kern->nr;
	p->panel_bytes = panel_bytes(p->fmt, cols, kern->nr);
	p->data = txl_alloc_bytes(p->panel_bytes * (size_t)p->n_panels);
	if (!p->data) {
		free(p);
		return NULL;
	}
	struct pack_job job = {
		.p = p, .w = w, .ld = txl_row_bytes(dt, cols),
		.unpack_q8 = txl_type_kernels(dt)->unpack_q8,
	};
	txl_pool_rows(pack_rows, &job, p->n_panels,
		      (double)kern->nr * cols * 4);
	return p;
}

void
txl_packed_free(struct txl_packed *p)
{
	if (!p)
		return;
	free(p->data);
	free(p);
}

const struct txl_packed *
txl_pack_get(struct txl_pack_slot *slot, enum txl_dtype dt, const void *w,
	     int rows, int cols)
{
	struct txl_packed *p = atomic_load_explicit(&slot->packed,
						    memory_order_acquire);
	struct txl_packed *none = NULL;

	if (p)
		return p;
	p = txl_pack(dt, w, rows, cols, txl_gemm_kernels());
	if (!p)
		return NULL;
	if (!atomic_compare_exchange_strong_explicit(&slot->packed, &none, p,
						     memory_order_acq_rel,
						     memory_order_acquire)) {
		/* another thread packed it meanwhile */
		txl_packed_free(p);
		return none;
	}
	return p;
}

void
txl_pack_slot_clear(struct txl_pack_slot *slot)
{
	txl_packed_free(atomic_exchange(&slot->packed, NULL));
}

/* ---- the product ---- */

/* A block of K: the kc rows of a panel that the tiles take together (at
 * most this many: the widened rows of an AVX-512 panel in 96 KB of L2). */
enum { KC_MAX = 512 };

/* The calling thread's buffer (activations in BF16, each thread's
 * widened block of a panel), kept for the next product. */
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void
buf_init(void)
{
	pthread_key_create(&buf_key, free);
}

/* bytes, 64-byte aligned; NULL if out of memory */
static void *
thread_buf(size_t bytes)
{
	size_t *b;

	pthread_once(&buf_once, buf_init);
	b = pthread_getspecific(buf_key);
	if (!b || *b < bytes) {
		free(b);
		/* the header takes 64 bytes so that the rest stays aligned */
		b = aligned_alloc(64, 64 + (bytes + 63) / 64 * 64);
		pthread_setspecific(buf_key, b);
		if (!b)
			return NULL;
		*b = bytes;
	}
	return (char *)b + 64;
}

struct gemm {
	struct txl_chunks panels;
	const struct txl_packed *p;
	float *out;
	size_t ldo;
	const float *a;		/* floats (rounded to BF16 for a widened
				   BF16 product) */
	const uint32_t *a2;	/* or pairs of BF16 */
	size_t lda;		/* floats or pairs */
	int M, kc;
	bool accumulate;
	float *bufs;		/* thread i's widened block: kc nr floats at
				   i kc nr (none for F32 and BF16 pairs) */
};

/* Panel q of the product: every tile of its columns. */
static void
gemm_panel(const struct gemm *g, int q, float *buf)
{
	const struct txl_packed *p = g->p;
	const struct txl_gemm_kernels *kn = p->kern;
	const int nr = p->nr, mr = kn->mr, K = p->k;
	const int n = p->n - q * nr < nr ? p->n - q * nr : nr;
	const uint8_t *panel = p->data + (size_t)q * p->panel_bytes;
	float *out = g->out + (size_t)q * nr;

	for (int k0 = 0; k0 < K; k0 += g->kc) {
		const int kc = K - k0 < g->kc ? K - k0 : g->kc;
		const bool add = g->accumulate || k0 > 0;

		if (g->a2) {
			const uint32_t *b = (const uint32_t *)(const void *)
				panel + (size_t)(k0 / 2) * nr;
			const int kp = (kc + 1) / 2;

			for (int i = 0; i < g->M; i += mr)
				kn->bf16(out + (size_t)i * g->ldo, g->ldo,
					 g->a2 + (size_t)i * g->lda + k0 / 2,
					 g->lda, b, kp,
					 g->M - i < mr ? g->M - i : mr, n, add);
			continue;
		}
		const float *b;
		if (p->fmt == TXL_PACK_F32) {
			b = (const float *)(const void *)panel +
				(size_t)k0 * nr;
		} else {
			kn->widen[p->fmt](buf, panel, k0, kc, nr);
			b = buf;
		}
		for (int i = 0; i < g->M; i += mr)
			kn->f32(out + (size_t)i * g->ldo, g->ldo,
				g->a + (size_t)i * g->lda + k0, g->lda, b, kc,
				g->M - i < mr ? g->M - i : mr, n, add);
	}
}

static void
gemm_task(void *ctx, int ith, int nth)
{
	struct gemm *g = ctx;
	float *buf = g->bufs ? g->bufs + (size_t)ith * g->kc * g->p->nr
		: NULL;
	int lo, hi;

	(void)nth;
	while (txl_chunks_take(&g->panels, &lo, &hi))
		for (int q = lo; q < hi; q++)
			gemm_panel(g, q, buf);
}

/* The bits of x rounded to BF16 (nearest even; NaNs stay NaNs), as
 * txl_f32_to_bf16() rounds it, in the high half; written so that the
 * compiler vectorizes the loops below. */
static inline uint32_t
bf16_high(float x)
{
	uint32_t b;

	memcpy(&b, &x, sizeof b);
	return (b & 0x7fffffffu) > 0x7f800000u ? (b | 0x00400000u) & 0xffff0000u
		: (b + 0x7fffu + ((b >> 16) & 1)) & 0xffff0000u;
}

/* a[M, K] as rows of (K + 1) / 2 pairs of BF16 (txl_gemm_pairs_fn) */
static void
to_pairs(uint32_t *dst, size_t ldd, const float *a, size_t lda, int M, int K)
{
	for (int i = 0; i < M; i++) {
		const float *x = a + (size_t)i * lda;
		uint32_t *d = dst + (size_t)i * ldd;

		for (int k = 0; k + 1 < K; k += 2)
			d[k / 2] = bf16_high(x[k]) >> 16 | bf16_high(x[k + 1]);
		if (K % 2)
			d[K / 2] = bf16_high(x[K - 1]) >> 16;
	}
}

/* a[M, K] rounded to BF16, as floats */
static void
to_bf16_floats(float *dst, const float *a, int lda, int M, int K)
{
	for (int i = 0; i < M; i++) {
		const float *x = a + (size_t)i * lda;
		float *d = dst + (size_t)i * K;

		for (int k = 0; k < K; k++) {
			const uint32_t b = bf16_high(x[k]);
			memcpy(&d[k], &b, sizeof b);
		}
	}
}

/* The rows of K that a block takes: K in as few blocks of at most KC_MAX
 * as it needs, each a multiple of 32 (Q8 blocks, BF16 pairs). */
static int
block_of(int K)
{
	const int nb = (K + KC_MAX - 1) / KC_MAX;
	const int kc = (K + nb - 1) / nb;

	return (kc + 31) / 32 * 32;
}

bool
txl_gemm_packed(float *out, int ldo, const float *a, int lda, int M,
		const struct txl_packed *p, bool bf16, bool accumulate)
{
	struct gemm g = {
		.p = p, .out = out, .ldo = (size_t)ldo, .a = a,
		.lda = (size_t)lda, .M = M, .kc = block_of(p->k),
		.accumulate = accumulate,
	};
	const double macs = (double)M * p->n * p->k;
	const int nth = txl_pool_threads_for(macs);
	const size_t ldp = (size_t)(p->k + 1) / 2;
	/* the activations as the kernels take them: as they are, pairs of
	 * BF16, or (a BF16 product widened) their BF16 values as floats */
	const bool pairs = bf16 && p->fmt == TXL_PACK_BF16 && p->kern->bf16;
	const bool rounded = bf16 && p->fmt == TXL_PACK_BF16 && !pairs;
	const size_t act = pairs ? sizeof(uint32_t) * ldp * (size_t)M
		: rounded ? sizeof(float) * (size_t)p->k * (size_t)M : 0;
	const size_t widen = p->fmt == TXL_PACK_F32 || pairs ? 0 :
		sizeof(float) * (size_t)g.kc * (size_t)p->nr;
	uint8_t *buf;

	if (M <= 0 || p->n <= 0)
		return true;
	if (p->k <= 0) {
		if (!accumulate)
			for (int i = 0; i < M; i++)
				memset(out + (size_t)i * ldo, 0,
				       sizeof(float) * (size_t)p->n);
		return true;
	}
	buf = thread_buf((act + 63) / 64 * 64 + widen * (size_t)nth);
	if (!buf)
		return false;
	if (pairs) {
		(p->kern->pairs ? p->kern->pairs : to_pairs)(
			(uint32_t *)(void *)buf, ldp, a, (size_t)lda, M, p->k);
		g.a2 = (const uint32_t *)(void *)buf;
		g.lda = ldp;
	} else if (rounded) {
		to_bf16_floats((float *)(void *)buf, a, lda, M, p->k);
		g.a = (const float *)(void *)buf;
		g.lda = (size_t)p->k;
	}
	if (widen)
		g.bufs = (float *)(void *)(buf + (act + 63) / 64 * 64);
	/* a few panels a thread, handed out in turn */
	txl_chunks_init_per(&g.panels, p->n_panels, 1, nth, 4);
	txl_pool_run_for(gemm_task, &g, macs);
	return true;
}
