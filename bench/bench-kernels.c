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
 *   gemm   the products of segments on packed weights (txl-gemm.h),
 *          128 rows of activations against the weight matrices of the
 *          14.6M shape (d_model 384: qkv 1152 x 384, ff1 1536 x 384, ff2
 *          384 x 1536, the 8,000-token output 8000 x 384) and of
 *          WikiText-103's (d_model 1024: qkv 3072 x 1024, ff1 4096 x
 *          1024, ff2 1024 x 4096), every storage type widened to F32
 *          (gemm_f32) and BF16 as stored (gemm_bf16: vdpbf16ps on
 *          avx512bf16, widened on the other sets), on 1 thread and on
 *          the pool's 2, in GFLOP/s and as a share of the machine's peak
 *          measured here; OpenBLAS's sgemm (one thread, as libtxl calls
 *          it) on the F32 shapes beside them;
 *   peak   the multiply-adds of a tight loop of independent vfmadd231ps
 *          (the widest vectors this CPU runs: AVX-512, AVX2 or scalar)
 *          on 1 and 2 threads, and of vdpbf16ps on AVX512_BF16, in
 *          GFLOP/s (two per multiply-add).
 *
 *   bench-kernels [--ms T] [--isa scalar|avx2|avxvnni|avx512|avx512vnni|
 *                 avx512bf16] [--no-gemv] [--no-gemm]
 *
 * Each gemv and attn figure is the best of 3 runs of at least T ms
 * (default 100); each gemm and peak figure the fastest of the calls of T
 * ms (a call lasts 0.1 to 10 ms: on a shared machine some escape the
 * other processes).  Lines are "isa kernel dtype MB GB/s" and "isa
 * kernel dtype shape threads GFLOP/s %-of-peak".  The gemv and attn
 * kernels are single-threaded: the pool runs one per thread
 * (lib/kernels/txl-products.c).  --isa measures one set.  Not a test: figures
 * differ between machines.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define X86 1
#endif

#include <cblas.h>

#include "txl-gemm.h"
#include "txl-kernels.h"
#include "txl-pool.h"
#include "txl-repack.h"
#include "txl-types.h"

#include "bench-util.h"

/* rows x K random values stored as dt (the scalar set narrows them) */
static uint8_t *
make_rows(enum txl_dtype dt, int rows, int K)
{
	struct txl_type_kernels ref;
	const size_t ld = txl_row_bytes(dt, K);
	uint8_t *w = bench_alloc("bench-kernels", ld * (size_t)rows);
	float *row = bench_alloc("bench-kernels", sizeof(float) * (size_t)K);

	txl_type_kernels_on(dt, TXL_ISA_SCALAR, &ref);
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < K; c++)
			row[c] = bench_uniform();
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
		double t0 = bench_clock(CLOCK_MONOTONIC), t;

		do {
			fn(ctx);
			calls++;
			t = bench_clock(CLOCK_MONOTONIC) - t0;
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
	float *x = bench_alloc("bench-kernels", sizeof(float) * (size_t)(n_attn > K ? n_attn : K));
	float *buf = bench_alloc("bench-kernels", sizeof(float) * (size_t)(K + 64));
	size_t min_ld = SIZE_MAX;
	char name[64];

	/* a result for every row of the largest matrix (its narrowest rows
	 * the type of fewest bytes a row's) */
	for (int dt = 0; dt < TXL_N_DTYPES; dt++)
		if (txl_dtype_computable(dt) && txl_row_bytes(dt, K) < min_ld)
			min_ld = txl_row_bytes(dt, K);
	float *y = bench_alloc("bench-kernels", sizeof(float) * ((256u << 20) / min_ld + 1));

	for (int i = 0; i < (n_attn > K ? n_attn : K); i++)
		x[i] = bench_uniform();

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
				uint8_t *il = bench_alloc("bench-kernels", txl_il_bytes(dt, rows, K));
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

/* ---- the machine's peak: independent multiply-adds ---- */

/* The fastest of calls of fn(ctx) over about min_s: seconds */
static double
fastest(void (*fn)(void *), void *ctx)
{
	double best = 1e30, t0 = bench_clock(CLOCK_MONOTONIC);

	do {
		const double t = bench_clock(CLOCK_MONOTONIC);
		fn(ctx);
		if (bench_clock(CLOCK_MONOTONIC) - t < best)
			best = bench_clock(CLOCK_MONOTONIC) - t;
	} while (bench_clock(CLOCK_MONOTONIC) - t0 < min_s);
	return best;
}

enum { PEAK_STEPS = 200000 };

/* 12 accumulators: more than the units' latency times their number
 * (4 x 2 on Zen 4 and Intel's server cores) */
#ifdef X86
__attribute__((target("avx512f,fma"))) static void
peak_avx512(void *out)
{
	__m512 s[12], m = _mm512_set1_ps(1.0f - 0x1p-20f), c = _mm512_set1_ps(
		0x1p-20f);

	for (int i = 0; i < 12; i++)
		s[i] = _mm512_set1_ps((float)i);
	for (int k = 0; k < PEAK_STEPS; k++)
#pragma GCC unroll 12
		for (int i = 0; i < 12; i++)
			s[i] = _mm512_fmadd_ps(s[i], m, c);
	for (int i = 1; i < 12; i++)
		s[0] = _mm512_add_ps(s[0], s[i]);
	_mm512_storeu_ps(out, s[0]);
}

__attribute__((target("avx2,fma"))) static void
peak_avx2(void *out)
{
	__m256 s[12], m = _mm256_set1_ps(1.0f - 0x1p-20f), c = _mm256_set1_ps(
		0x1p-20f);

	for (int i = 0; i < 12; i++)
		s[i] = _mm256_set1_ps((float)i);
	for (int k = 0; k < PEAK_STEPS; k++)
#pragma GCC unroll 12
		for (int i = 0; i < 12; i++)
			s[i] = _mm256_fmadd_ps(s[i], m, c);
	for (int i = 1; i < 12; i++)
		s[0] = _mm256_add_ps(s[0], s[i]);
	_mm256_storeu_ps(out, s[0]);
}

__attribute__((target("avx512f,avx512bf16"))) static void
peak_bf16(void *out)
{
	__m512 s[12];
	const __m512bh m = (__m512bh)_mm512_set1_epi16(0x3f80);	/* 1.0 */

	for (int i = 0; i < 12; i++)
		s[i] = _mm512_set1_ps((float)i);
	for (int k = 0; k < PEAK_STEPS; k++)
#pragma GCC unroll 12
		for (int i = 0; i < 12; i++)
			s[i] = _mm512_dpbf16_ps(s[i], m, m);
	for (int i = 1; i < 12; i++)
		s[0] = _mm512_add_ps(s[0], s[i]);
	_mm512_storeu_ps(out, s[0]);
}
#endif

static void
peak_scalar(void *out)
{
	float s[12], *o = out;

	for (int i = 0; i < 12; i++)
		s[i] = (float)i;
	for (int k = 0; k < PEAK_STEPS; k++)
#pragma GCC unroll 12
		for (int i = 0; i < 12; i++)
			s[i] = s[i] * (1.0f - 0x1p-20f) + 0x1p-20f;
	for (int i = 1; i < 12; i++)
		s[0] += s[i];
	o[0] = s[0];
}

struct peak {
	void (*fn)(void *);
	float out[16];
	double best;
};

static void *
peak_thread(void *p)
{
	struct peak *pk = p;

	pk->best = fastest(pk->fn, pk->out);
	return NULL;
}

/* GFLOP/s of fn (macs multiply-adds a call) on `threads` threads at
 * once (each its own fastest call) */
static double
peak_rate(void (*fn)(void *), double macs, int threads)
{
	struct peak pk[2] = { { .fn = fn }, { .fn = fn } };
	pthread_t t;
	double r;

	if (threads > 1 && pthread_create(&t, NULL, peak_thread, &pk[1]) != 0)
		threads = 1;
	peak_thread(&pk[0]);
	r = 2 * macs / pk[0].best;
	if (threads > 1) {
		pthread_join(t, NULL);
		r += 2 * macs / pk[1].best;
	}
	return r / 1e9;
}

/* The FMA peak of the widest set, on 1 and 2 threads, into fma[1..2];
 * and vdpbf16ps's (0 without AVX512_BF16) */
static void
measure_peaks(double fma[3], double bf16[3])
{
	void (*fn)(void *) = peak_scalar;
	double lanes = 1;
	const char *name = "scalar";

	bf16[1] = bf16[2] = 0;
#ifdef X86
	if (txl_kernels_for(TXL_ISA_AVX512)) {
		fn = peak_avx512;
		lanes = 16;
		name = "avx512";
	} else if (txl_kernels_for(TXL_ISA_AVX2)) {
		fn = peak_avx2;
		lanes = 8;
		name = "avx2";
	}
#endif
	for (int t = 1; t <= 2; t++) {
		fma[t] = peak_rate(fn, lanes * 12.0 * PEAK_STEPS, t);
		printf("%s peak_fma F32 - %d %.1f 100\n", name, t, fma[t]);
	}
#ifdef X86
	if (txl_kernels_for(TXL_ISA_AVX512_BF16))
		for (int t = 1; t <= 2; t++) {
			bf16[t] = peak_rate(peak_bf16, 32.0 * 12 * PEAK_STEPS, t);
			printf("avx512bf16 peak_vdpbf16ps BF16 - %d %.1f 100\n", t,
			       bf16[t]);
		}
#endif
	fflush(stdout);
}

/* ---- the products of segments ---- */

struct gemm_call {
	float *out;
	const float *a;
	const float *wf;	/* F32 weights, for sgemm */
	int M;
	const struct txl_packed *p;
	bool bf16;
};

static void
call_gemm(void *p)
{
	struct gemm_call *g = p;

	txl_gemm_packed(g->out, g->p->n, g->a, g->p->k, g->M, g->p, g->bf16,
			false);
}

static void
call_sgemm(void *p)
{
	struct gemm_call *g = p;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->M, g->p->n,
		    g->p->k, 1.0f, g->a, g->p->k, g->wf, g->p->k, 0.0f, g->out,
		    g->p->n);
}

static void
bench_gemm(const struct txl_gemm_kernels *kn, const double fma[3],
	   const double bf16_peak[3])
{
	static const struct { const char *name; int n, k; } shapes[] = {
		{ "qkv", 1152, 384 }, { "ff1", 1536, 384 },
		{ "ff2", 384, 1536 }, { "out", 8000, 384 },
		{ "wt103_qkv", 3072, 1024 }, { "wt103_ff1", 4096, 1024 },
		{ "wt103_ff2", 1024, 4096 },
	};
	const int M = 128;

	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		const int N = shapes[s].n, K = shapes[s].k;
		const double flops = 2.0 * M * N * K;
		float *a = bench_alloc("bench-kernels", sizeof(float) * (size_t)M * K);
		float *out = bench_alloc("bench-kernels", sizeof(float) * (size_t)M * N);
		char shape[64];

		snprintf(shape, sizeof shape, "%s_%dx%dx%d", shapes[s].name, M,
			 N, K);
		for (size_t i = 0; i < (size_t)M * K; i++)
			a[i] = bench_uniform();
		for (int dt = 0; dt < TXL_N_DTYPES; dt++) {
			if (!txl_dtype_computable(dt))
				continue;
			uint8_t *w = make_rows(dt, N, K);
			struct txl_packed *p = txl_pack(dt, w, N, K, kn);
			float *wf = NULL;
			struct gemm_call g = { .out = out, .a = a, .M = M,
					       .p = p };

			if (!p)
				continue;
			for (int c = 0; c < 2; c++) {
				g.bf16 = c == 1;
				if (g.bf16 && dt != TXL_BF16)
					continue;
				for (int t = 1; t <= 2; t++) {
					txl_set_threads(t);
					const double r = flops /
						fastest(call_gemm, &g) / 1e9;
					const double peak = g.bf16 &&
						bf16_peak[t] > 0 ? bf16_peak[t]
						: fma[t];
					printf("%s gemm_%s %s %s %d %.1f %.0f\n",
					       kn->name, g.bf16 ? "bf16" : "f32",
					       txl_dtype_name(dt), shape, t, r,
					       100 * r / peak);
					fflush(stdout);
				}
			}
			if (dt == TXL_F32 &&
			    kn == txl_gemm_kernels()) {
				/* OpenBLAS on one thread, as libtxl calls it */
				wf = (float *)(void *)w;
				g.wf = wf;
				openblas_set_num_threads(1);
				const double r = flops /
					fastest(call_sgemm, &g) / 1e9;
				printf("openblas sgemm F32 %s 1 %.1f %.0f\n",
				       shape, r, 100 * r / fma[1]);
			}
			txl_packed_free(p);
			free(w);
		}
		free(a);
		free(out);
	}
	txl_set_threads(1);
}

int
main(int argc, char **argv)
{
	const char *only = NULL;
	bool gemv = true, gemm = true;
	double fma[3], bf16[3];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
			min_s = atof(argv[++i]) / 1000.0;
		} else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else if (strcmp(argv[i], "--no-gemv") == 0) {
			gemv = false;
		} else if (strcmp(argv[i], "--no-gemm") == 0) {
			gemm = false;
		} else {
			fprintf(stderr, "usage: bench-kernels [--ms T] "
				"[--isa scalar|avx2|avxvnni|avx512|avx512vnni|"
				"avx512bf16] [--no-gemv] [--no-gemm]\n");
			return 2;
		}
	}
	if (!(min_s > 0.0))
		min_s = 0.1;
	printf("# isa kernel dtype MB GB/s (single thread, best of 3)\n");
	printf("# isa kernel dtype shape threads GFLOP/s %%peak (fastest "
	       "call)\n");
	measure_peaks(fma, bf16);
	for (int isa = 0; isa < TXL_N_ISA; isa++) {
		const struct txl_kernels *k = txl_kernels_for(isa);
		const struct txl_gemm_kernels *kn = txl_gemm_kernels_on(isa);

		if (!k || (only && strcmp(only, k->name) != 0))
			continue;
		if (gemv)
			bench_set(k);
		/* a set without products of its own: its base's, once */
		if (gemm && (isa == TXL_ISA_SCALAR || only ||
			     kn != txl_gemm_kernels_on(txl_isa_base(isa))))
			bench_gemm(kn, fma, bf16);
	}
	return 0;
}
