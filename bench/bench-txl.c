/* SPDX-License-Identifier: MIT */
/*
 * bench-txl.c - libtxl's speed on one model, printed as figures.
 *
 *   bench-txl MODEL [--score N] [--gen N] [--seg-len T] [--mem-len M]
 *             [--prime P] [--window W] [--threads K] [--reps R]
 *             [--recompute C] [--kv-type F32|F16|BF16|Q8_0|Q4_0] [--dram]
 *             [--compute f32|bf16] [--mmap]
 *
 * score:     N token ids (fixed pseudo-random stream) scored as the
 *            original eval.py does: segments of T tokens, all logits,
 *            memory M.
 * gen:       N tokens generated one at a time (greedy, logits of each
 *            step), memory M, after P tokens fed in segments to fill it
 *            (so that a long memory is measured full without generating
 *            it first); tokens/s is also printed for every window of W
 *            tokens, to show that the cost of a token does not grow with
 *            the number generated before it; and the rate of feeding
 *            those P tokens (prime_tok_per_s: segments of T without
 *            logits, as txlgen --prime reads a file).
 * recompute: the time to evaluate a window of C tokens from scratch (one
 *            segment, no memory, logits of the last), i.e. what a model
 *            without a memory pays per generated token at context C.
 * kv-type:   how the sessions hold their memory (default F32).
 * compute:   how their products of segments compute with BF16 weights
 *            (txl_session_set_compute(); default f32).
 * dram:      the read bandwidth of this machine's memory with K threads
 *            (a buffer far larger than the caches, on 2 MiB pages where
 *            the kernel gives them, read as generation reads weights),
 *            for the floor of bench/bench.py.
 * mmap:      map the model file (TXL_LOAD_NO_MMAP otherwise: the weights
 *            read into memory on 2 MiB pages, as txlgen loads them).
 * Each figure is the best of R runs (noise on a shared machine only ever
 * slows a run down).  Output lines are "key value" pairs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "txl.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads): with one thread, the
 * cost of the work itself, which other processes hardly change */
static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
die(const char *what)
{
	fprintf(stderr, "bench-txl: %s: %s\n", what, txl_last_error());
	return 1;
}

static void
log_line(enum txl_log_level level, const char *msg, void *data)
{
	/* "kernels: avx512, 2 threads" goes to stdout as a figure */
	if (strncmp(msg, "kernels: ", 9) == 0)
		printf("kernels %s\n", msg + 9);
	else if (level <= TXL_LOG_WARN)
		fprintf(stderr, "bench-txl: %s\n", msg);
}

/* The fixed pseudo-random stream of token ids (bench.py has a copy). */
static int32_t *
pseudo_random_ids(int n, int V)
{
	int32_t *ids = malloc(sizeof *ids * (size_t)(n > 0 ? n : 1));
	uint64_t x = 88172645463325252ull;

	for (int i = 0; ids && i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ids[i] = (int32_t)(x % (uint64_t)V);
	}
	return ids;
}

/* ---- memory bandwidth ---- */

struct reader {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
};

static void *
read_slice(void *arg)
{
	struct reader *r = arg;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	for (size_t i = 0; i + 4 <= r->n; i += 4) {
		s0 += r->p[i];
		s1 += r->p[i + 1];
		s2 += r->p[i + 2];
		s3 += r->p[i + 3];
	}
	r->sum = s0 + s1 + s2 + s3;
	return NULL;
}

/* Best read bandwidth in GB/s over reps passes of a buffer of `bytes`. */
static double
dram_bandwidth(size_t bytes, int threads, int reps)
{
	size_t n = bytes / 8;
	uint64_t *buf = aligned_alloc((size_t)2 << 20, n * 8);
	pthread_t tid[256];
	struct reader rd[256];
	double best = 0;

	if (!buf)
		return 0;
#ifdef MADV_HUGEPAGE
	/* as libtxl holds weights read into memory */
	(void)madvise(buf, n * 8, MADV_HUGEPAGE);
#endif
	for (size_t i = 0; i < n; i++)
		buf[i] = i;
	if (threads > 256)
		threads = 256;
	for (int rep = 0; rep < reps; rep++) {
		double t0 = now();
		for (int t = 0; t < threads; t++) {
			rd[t].p = buf + n / threads * t;
			rd[t].n = n / threads;
			pthread_create(&tid[t], NULL, read_slice, &rd[t]);
		}
		for (int t = 0; t < threads; t++)
			pthread_join(tid[t], NULL);
		double dt = now() - t0;
		if (bytes / dt / 1e9 > best)
			best = bytes / dt / 1e9;
	}
	/* use the sums, so that the reads stay */
	uint64_t s = 0;
	for (int t = 0; t < threads; t++)
		s += rd[t].sum;
	if (s == 42)
		fprintf(stderr, " ");
	free(buf);
	return best;
}

/* ---- the library ---- */

static int
score(struct txl_session *s, const int32_t *ids, int n, int seg, int V,
      double *secs, double *nll)
{
	float *lp = malloc(sizeof *lp * (size_t)V);
	double sum = 0, t0 = now();

	txl_session_reset(s);
	for (int s0 = 0; s0 < n - 1; s0 += seg) {
		int len = n - 1 - s0 < seg ? n - 1 - s0 : seg;
		if (txl_session_eval(s, ids + s0, len, TXL_LOGITS_ALL))
			return die("eval");
		/* the log-prob of each target, as scoring needs */
		const float *lg = txl_session_logits(s);
		for (int i = 0; i < len; i++) {
			txl_log_softmax(lg + (size_t)i * V, lp, V);
			sum += lp[ids[s0 + i + 1]];
		}
	}
	*secs = now() - t0;
	*nll = -sum / (n - 1);
	free(lp);
	return 0;
}

static int
generate(struct txl_session *s, const int32_t *prime, int n_prime, int seg,
	 int n_gen, int V, int window, double *secs, double *cpu,
	 double *prime_s)
{
	int32_t tok = 1 % V;
	double t0, tw, c0;

	txl_session_reset(s);
	t0 = now();
	for (int off = 0; off < n_prime; off += seg) {
		int len = n_prime - off < seg ? n_prime - off : seg;
		if (txl_session_eval(s, prime + off, len, TXL_LOGITS_NONE))
			return die("prime");
	}
	*prime_s = now() - t0;
	t0 = tw = now();
	c0 = cpu_now();
	for (int i = 0; i < n_gen; i++) {
		if (txl_session_eval(s, &tok, 1, TXL_LOGITS_LAST))
			return die("eval");
		const float *lg = txl_session_logits(s);
		/* greedy; the max kept in a register (comparing with
		 * lg[best] reloads it: a load on every element's path) */
		float max = lg[0];
		int32_t best = 0;
		for (int k = 1; k < V; k++)
			if (lg[k] > max) {
				max = lg[k];
				best = k;
			}
		tok = best;
		if (window > 0 && (i + 1) % window == 0) {
			double t = now();
			printf("gen_window %d %.1f\n", i + 1, window / (t - tw));
			tw = t;
		}
	}
	*secs = now() - t0;
	*cpu = cpu_now() - c0;
	return 0;
}

int
main(int argc, char **argv)
{
	int n_score = 4096, n_gen = 512, seg = 128, mem = 256, window = 0;
	int threads = 0, reps = 1, n_prime = 0, recompute = 0, dram = 0;
	unsigned load_flags = TXL_LOAD_NO_MMAP;
	int kv_type = TXL_KV_F32;
	enum txl_compute compute = TXL_COMPUTE_F32;
	static const char *const kv_names[] = { "F32", "F16", "BF16", "Q8_0",
						"Q4_0" };
	struct txl_model *m;
	struct txl_session *s;
	struct txl_session_params p = txl_session_params_default();

	if (argc < 2) {
		fprintf(stderr, "usage: bench-txl MODEL [--score N] [--gen N] "
			"[--seg-len T] [--mem-len M] [--prime P] [--window W] "
			"[--threads K] [--reps R] [--recompute C] "
			"[--kv-type F32|F16|BF16|Q8_0|Q4_0] [--dram] "
			"[--compute f32|bf16] [--mmap]\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--dram") == 0) {
			dram = 1;
			continue;
		}
		if (strcmp(argv[i], "--mmap") == 0) {
			load_flags = 0;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "bench-txl: %s needs a value\n", argv[i]);
			return 2;
		}
		if (strcmp(argv[i], "--compute") == 0) {
			const char *c = argv[++i];
			if (strcmp(c, "f32") && strcmp(c, "bf16")) {
				fprintf(stderr, "bench-txl: --compute %s: not "
					"f32 or bf16\n", c);
				return 2;
			}
			compute = strcmp(c, "bf16") == 0 ? TXL_COMPUTE_BF16
				: TXL_COMPUTE_F32;
			continue;
		}
		if (strcmp(argv[i], "--kv-type") == 0) {
			const char *t = argv[++i];
			kv_type = -1;
			for (int k = 0; k < (int)(sizeof kv_names /
						      sizeof *kv_names); k++)
				if (strcmp(t, kv_names[k]) == 0)
					kv_type = k;
			if (kv_type < 0) {
				fprintf(stderr, "bench-txl: --kv-type %s: not "
					"F32, F16, BF16, Q8_0 or Q4_0\n", t);
				return 2;
			}
			continue;
		}
		int v = atoi(argv[++i]);
		const char *o = argv[i - 1];
		if (strcmp(o, "--score") == 0) n_score = v;
		else if (strcmp(o, "--gen") == 0) n_gen = v;
		else if (strcmp(o, "--seg-len") == 0) seg = v;
		else if (strcmp(o, "--mem-len") == 0) mem = v;
		else if (strcmp(o, "--prime") == 0) n_prime = v;
		else if (strcmp(o, "--window") == 0) window = v;
		else if (strcmp(o, "--threads") == 0) threads = v;
		else if (strcmp(o, "--reps") == 0) reps = v > 0 ? v : 1;
		else if (strcmp(o, "--recompute") == 0) recompute = v;
		else {
			fprintf(stderr, "bench-txl: unknown option %s\n", o);
			return 2;
		}
	}
	txl_log_set(log_line, NULL, TXL_LOG_INFO);
	double t0 = now();
	if (txl_model_load_flags(argv[1], load_flags, &m) != TXL_OK)
		return die(argv[1]);
	const int V = txl_model_hparams(m)->n_token;
	printf("load_s %.3f\n", now() - t0);
	printf("params %lld\n", (long long)txl_model_n_params(m));

	p.seg_len = seg;
	p.mem_len = mem;
	p.same_length = 0;
	p.n_threads = threads;
	p.kv_type = kv_type;
	printf("kv_type %s\n", kv_names[kv_type]);
	if (txl_session_new(m, &p, &s) != TXL_OK ||
	    txl_session_set_compute(s, compute) != TXL_OK)
		return die("session");
	printf("compute %s%s\n", compute == TXL_COMPUTE_BF16 ? "bf16" : "f32",
	       txl_compute_native(compute) == 1 ? "" : " (widened)");
	int n_ids = n_score > n_prime ? n_score : n_prime;
	if (recompute > n_ids)
		n_ids = recompute;
	int32_t *ids = pseudo_random_ids(n_ids, V);

	if (n_score > 1) {
		double best = 1e300, cpu = 1e300, dt, nll = 0;
		for (int r = 0; r < reps; r++) {
			double c0 = cpu_now();
			if (score(s, ids, n_score, seg, V, &dt, &nll))
				return 1;
			best = dt < best ? dt : best;
			c0 = cpu_now() - c0;
			cpu = c0 < cpu ? c0 : cpu;
		}
		printf("score_tokens %d\nscore_s %.3f\nscore_tok_per_s %.1f\n",
		       n_score - 1, best, (n_score - 1) / best);
		printf("score_cpu_s %.3f\n", cpu);
		printf("score_mean_nll %.4f\n", nll);
	}

	if (n_gen > 0 || n_prime > 0) {
		double best = 1e300, cpu = 1e300, pbest = 1e300, dt, c0, pt;
		for (int r = 0; r < reps; r++) {
			if (generate(s, ids, n_prime, seg, n_gen, V,
				     r == 0 ? window : 0, &dt, &c0, &pt))
				return 1;
			best = dt < best ? dt : best;
			cpu = c0 < cpu ? c0 : cpu;
			pbest = pt < pbest ? pt : pbest;
		}
		if (n_prime > 0)
			printf("prime_tokens %d\nprime_s %.3f\n"
			       "prime_tok_per_s %.1f\n", n_prime, pbest,
			       n_prime / pbest);
		printf("gen_tokens %d\ngen_s %.3f\ngen_tok_per_s %.1f\n", n_gen,
		       best, n_gen / best);
		printf("gen_cpu_s %.3f\n", cpu);
		printf("mem_fill %d\n", txl_session_mem_fill(s));
	}
	txl_session_free(s);

	if (recompute > 0) {
		/* a model without memory: the whole window in one segment */
		struct txl_session *w;
		double best = 1e300;
		p.seg_len = recompute;
		p.mem_len = 0;
		if (txl_session_new(m, &p, &w) != TXL_OK ||
		    txl_session_set_compute(w, compute) != TXL_OK)
			return die("session");
		for (int r = 0; r < reps; r++) {
			double tr = now();
			txl_session_reset(w);
			if (txl_session_eval(w, ids, recompute, TXL_LOGITS_LAST))
				return die("recompute");
			tr = now() - tr;
			best = tr < best ? tr : best;
		}
		printf("recompute_tokens %d\nrecompute_s %.4f\n", recompute,
		       best);
		txl_session_free(w);
	}
	free(ids);
	txl_model_free(m);

	if (dram) {
		long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
		size_t bytes = (size_t)1 << 30;
		if (l3 > 0 && (size_t)l3 * 4 > bytes)
			bytes = (size_t)l3 * 4;
		if (bytes > ((size_t)4 << 30))
			bytes = (size_t)4 << 30;
		int nt = threads > 0 ? threads :
			(int)sysconf(_SC_NPROCESSORS_ONLN);
		printf("dram_buffer_bytes %zu\n", bytes);
		printf("dram_read_GBps %.2f\n",
		       dram_bandwidth(bytes, nt > 0 ? nt : 1, reps + 2));
	}
	return 0;
}
