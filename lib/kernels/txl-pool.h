/* SPDX-License-Identifier: MIT */
/*
 * txl-pool.h - the thread pool of the process, how many threads it runs,
 * and how work is split over them (txl-pool.c).  Not installed.
 */
#ifndef TXL_POOL_H
#define TXL_POOL_H

#include <stdatomic.h>
#include <stdbool.h>

/* ---- the threads: one setting for the process ---- */

/* Threads of the kernels (the pool) and of OpenBLAS together; n <= 0:
 * one per CPU this process may run on.  Process-wide: every session
 * computes on the one pool. */
void txl_set_threads(int n);
/* The threads txl_set_threads(n) starts. */
int txl_threads_of(int n);
/* CPUs this process may run on (at least 1). */
int txl_n_cpus(void);

/* ---- the pool ---- */

/* A task runs on every thread of the pool at once: ith in [0, nth), the
 * caller being thread 0.  It splits the work itself. */
typedef void (*txl_task_fn)(void *ctx, int ith, int nth);
/* Run fn on the pool's threads and return when all have finished.  If
 * another thread is using the pool, fn runs on the caller alone
 * (ith 0, nth 1). */
void txl_pool_run(txl_task_fn fn, void *ctx);
/* The number of threads txl_pool_run() uses (the caller included). */
int txl_pool_threads(void);
/* True inside a task of the pool: a product started there runs on this
 * thread alone, in one piece (the pool's threads are all busy). */
bool txl_pool_in_task(void);
/* Start or stop workers to have n threads in all (1 <= n <=
 * TXL_MAX_THREADS; beyond, the most). */
#define TXL_MAX_THREADS 256
void txl_pool_set_threads(int n);

/* ---- splitting work ---- */

/* The threads worth handing work of this many multiply-adds (or so) to:
 * 1 for little (a hand-over to the pool costs about a microsecond), or
 * inside a task of the pool; else all of them. */
int txl_pool_threads_for(double macs);
/* txl_pool_run(), or fn on the caller alone (ith 0, nth 1) when
 * txl_pool_threads_for(macs) is 1. */
void txl_pool_run_for(txl_task_fn fn, void *ctx, double macs);
/* Round i (from 0) of a task's thread waiting on another: a pause, and
 * after many rounds the CPU given away (the one waited for may need
 * it). */
void txl_pool_spin_wait(unsigned i);
/* fn(ctx, lo, hi) over chunks of [0, rows) on the pool, or on the caller
 * alone when rows * cost (multiply-adds or so per row) is too little
 * for a hand-over. */
typedef void (*txl_rows_fn)(void *ctx, int lo, int hi);
void txl_pool_rows(txl_rows_fn fn, void *ctx, int rows, double cost);

/* Chunks of `align` items, about `per` a thread of nth_hint, handed out
 * in order by txl_chunks_take() to whichever thread asks; one thread
 * (nth_hint 1) takes it all in one. */
struct txl_chunks {
	atomic_int next;
	int n, size;
};

static inline void
txl_chunks_init_per(struct txl_chunks *c, int n, int align, int nth_hint,
		    int per)
{
	const int parts = nth_hint > 1 ? per * nth_hint : 1;
	int size = (n + parts - 1) / parts;

	size = (size + align - 1) / align * align;
	atomic_init(&c->next, 0);
	c->n = n;
	c->size = size > 0 ? size : align;
}

/* Two a thread rather than four: longer streams for the prefetchers and
 * fewer hand-overs; one a thread leaves a late thread's share to wait.
 * (The sgemm calls of matrix products take one a thread: each call packs
 * the activations again.)  bench/README.md has the measurements. */
static inline void
txl_chunks_init(struct txl_chunks *c, int n, int align, int nth_hint)
{
	txl_chunks_init_per(c, n, align, nth_hint, 2);
}

/* The next chunk [*lo, *hi), or false when none is left. */
static inline bool
txl_chunks_take(struct txl_chunks *c, int *lo, int *hi)
{
	int i = atomic_fetch_add_explicit(&c->next, c->size,
					  memory_order_relaxed);
	if (i >= c->n)
		return false;
	*lo = i;
	*hi = i + c->size < c->n ? i + c->size : c->n;
	return true;
}

#endif /* TXL_POOL_H */
