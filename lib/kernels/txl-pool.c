/* SPDX-License-Identifier: MIT */
/*
 * txl-pool.c - a small persistent thread pool for libtxl's kernels.
 *
 * One pool per process, like OpenBLAS's own (whose thread count is
 * process-wide too): n - 1 workers plus the thread that calls
 * txl_pool_run(), which takes part as thread 0.  A task is published by
 * bumping a generation counter; workers spin on it for a short while
 * (generation calls tasks a few microseconds apart, far less than a
 * sleep and wake-up costs) and then sleep on a condition variable, so an
 * idle pool costs nothing.  OpenBLAS is kept to one thread and called
 * from inside tasks (txl-products.c), so that the machine runs exactly n
 * threads of ours at any time: no oversubscription, one setting.
 *
 * Tasks split their work themselves (struct txl_chunks hands out chunks
 * of rows through an atomic counter), and a worker joins a task only
 * while it is open: the caller closes it when its own share is done and
 * waits only for the workers inside.  So a worker that the system has
 * not scheduled yet (a busy machine) delays nobody; it finds the task
 * closed and goes back to waiting.  A second thread calling
 * txl_pool_run() while the pool is busy runs its task alone.
 *
 * Also here: how many threads the process runs (one setting for every
 * session, as OpenBLAS's own thread count is process-wide), and the
 * splitting of work over the pool, or not where a hand-over does not
 * pay.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "txl-kernels.h"
#include "txl-log.h"
#include "txl-pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker spins before it sleeps.  Generation runs a
 * task every few microseconds; between tokens (sampling, output) there
 * are tens of microseconds at most. */
#define SPIN_NS 200000

/* Spinning waits give the CPU away (sched_yield) after this many rounds:
 * on a machine with more runnable threads than CPUs, the thread waited
 * for may be the one that needs it. */
#define SPIN_YIELD 4096

static inline void
spin_wait(unsigned i)
{
	if (i < SPIN_YIELD)
		cpu_relax();
	else
		sched_yield();
}

void
txl_pool_spin_wait(unsigned i)
{
	spin_wait(i);
}

/* pool.state: the workers inside the current task, plus CLOSED when no
 * worker may join it */
#define CLOSED (1u << 30)

static struct {
	pthread_mutex_t busy;	/* held while a task runs */
	pthread_mutex_t lock;	/* for sleeping and waking */
	pthread_cond_t wake;
	atomic_int n;		/* threads, the caller included (set under
				   busy, read anywhere) */
	pthread_t workers[TXL_MAX_THREADS];
	atomic_uint gen;	/* bumped for every task (and to quit) */
	atomic_uint state;	/* see CLOSED */
	atomic_int sleeping;	/* workers waiting on `wake` */
	atomic_bool quit;
	/* the current task: written while it is closed and drained */
	txl_task_fn fn;
	void *ctx;
	unsigned task;		/* its number */
} pool = {
	.busy = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.n = 1,
	.state = CLOSED,
};

/* The pool's size: a relaxed look is enough, a task's is taken under
 * busy and the workers read it inside a task, which no resize meets. */
static int
threads(void)
{
	return atomic_load_explicit(&pool.n, memory_order_relaxed);
}

/* set while this thread runs a task of the pool */
static _Thread_local bool in_task;

bool
txl_pool_in_task(void)
{
	return in_task;
}

/* fn on this thread, as thread ith of nth (a task started inside one,
 * which runs alone, leaves the flag as it found it) */
static void
run_task(txl_task_fn fn, void *ctx, int ith, int nth)
{
	const bool was = in_task;

	in_task = true;
	fn(ctx, ith, nth);
	in_task = was;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until the generation differs from `seen`; return it. */
static unsigned
wait_task(unsigned seen)
{
	unsigned g;
	uint64_t t0 = 0;

	for (unsigned i = 0;; i++) {
		g = atomic_load_explicit(&pool.gen, memory_order_acquire);
		if (g != seen)
			return g;
		spin_wait(i);
		if ((i & 63) == 63) {
			uint64_t t = now_ns();
			if (t0 == 0)
				t0 = t;
			else if (t - t0 > SPIN_NS)
				break;
		}
	}
	pthread_mutex_lock(&pool.lock);
	atomic_fetch_add(&pool.sleeping, 1);	/* seq_cst: see txl_pool_run */
	while ((g = atomic_load(&pool.gen)) == seen)
		pthread_cond_wait(&pool.wake, &pool.lock);
	atomic_fetch_sub(&pool.sleeping, 1);
	pthread_mutex_unlock(&pool.lock);
	return g;
}

struct worker_arg {
	int ith;
	unsigned gen;
	unsigned task;		/* the last task run, when it was made */
};

static void *
worker(void *p)
{
	struct worker_arg a = *(struct worker_arg *)p;
	/* the last task this worker ran: taken under busy by its maker,
	 * not from pool.task, which the next task may be writing */
	unsigned done = a.task;

	free(p);
	for (;;) {
		a.gen = wait_task(a.gen);
		if (atomic_load_explicit(&pool.quit, memory_order_acquire))
			return NULL;
		/* join the task if it is still open; while we are inside,
		 * the caller leaves fn, ctx and task alone */
		unsigned st = atomic_fetch_add_explicit(&pool.state, 1,
							memory_order_acquire);
		if (!(st & CLOSED) && pool.task != done) {
			done = pool.task;
			run_task(pool.fn, pool.ctx, a.ith, threads());
		}
		atomic_fetch_sub_explicit(&pool.state, 1, memory_order_release);
	}
}

/* Publish a new generation and wake the sleepers. */
static void
publish(void)
{
	/* seq_cst, as the sleeper's increment of `sleeping` before its
	 * last look at `gen`: one of the two sees the other */
	atomic_fetch_add(&pool.gen, 1);
	if (atomic_load(&pool.sleeping) > 0) {
		pthread_mutex_lock(&pool.lock);
		pthread_cond_broadcast(&pool.wake);
		pthread_mutex_unlock(&pool.lock);
	}
}

void
txl_pool_run(txl_task_fn fn, void *ctx)
{
	if (threads() == 1 || pthread_mutex_trylock(&pool.busy) != 0) {
		run_task(fn, ctx, 0, 1);
		return;
	}
	if (threads() == 1) {	/* shrunk meanwhile */
		pthread_mutex_unlock(&pool.busy);
		run_task(fn, ctx, 0, 1);
		return;
	}
	pool.fn = fn;
	pool.ctx = ctx;
	pool.task++;
	/* open it: from closed with nobody inside (a late worker of the
	 * last task may be passing through) */
	for (unsigned i = 0, closed = CLOSED;
	     !atomic_compare_exchange_weak_explicit(&pool.state, &closed, 0,
						    memory_order_release,
						    memory_order_relaxed);
	     closed = CLOSED)
		spin_wait(i++);
	publish();
	run_task(fn, ctx, 0, threads());
	/* close it and wait for the workers that joined */
	atomic_fetch_or_explicit(&pool.state, CLOSED, memory_order_relaxed);
	for (unsigned i = 0; atomic_load_explicit(&pool.state,
						  memory_order_acquire) != CLOSED;)
		spin_wait(i++);
	pthread_mutex_unlock(&pool.busy);
}

int
txl_pool_threads(void)
{
	return threads();
}

static void
stop_workers(void)
{
	if (threads() == 1)
		return;
	atomic_store(&pool.quit, true);
	publish();
	for (int i = 1; i < threads(); i++)
		pthread_join(pool.workers[i], NULL);
	atomic_store(&pool.quit, false);
	atomic_store(&pool.n, 1);
}

void
txl_pool_set_threads(int n)
{
	if (n < 1)
		n = 1;
	if (n > TXL_MAX_THREADS)
		n = TXL_MAX_THREADS;
	pthread_mutex_lock(&pool.busy);
	if (n != threads()) {
		sigset_t all, old;

		/* the workers never take the application's signals: a
		 * handler run on one of them could not wake the thread that
		 * waits for input.  Those of their own faults stay open (a
		 * SIGBUS blocked when a mapped model shrinks would kill the
		 * process without the application's handler) */
		sigfillset(&all);
		sigdelset(&all, SIGBUS);
		sigdelset(&all, SIGSEGV);
		sigdelset(&all, SIGFPE);
		sigdelset(&all, SIGILL);
		sigdelset(&all, SIGTRAP);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		stop_workers();
		for (int i = 1; i < n; i++) {
			struct worker_arg *a = malloc(sizeof *a);
			if (!a)
				break;
			a->ith = i;
			a->gen = atomic_load(&pool.gen);
			a->task = pool.task;
			if (pthread_create(&pool.workers[i], NULL, worker, a)) {
				free(a);
				break;
			}
			atomic_store(&pool.n, i + 1);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (threads() != n)
			txl_log(TXL_LOG_WARN, "thread pool: started %d of %d "
				"threads", threads(), n);
	}
	pthread_mutex_unlock(&pool.busy);
}

/* ---- the threads: one setting for the process ---- */

int
txl_n_cpus(void)
{
#ifdef CPU_COUNT
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
#endif
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int
txl_threads_of(int n)
{
	if (n <= 0)
		n = txl_n_cpus();
	return n < TXL_MAX_THREADS ? n : TXL_MAX_THREADS;
}

void
txl_set_threads(int n)
{
	n = txl_threads_of(n);
	if (n == txl_pool_threads() && n > 1)
		return;
	txl_pool_set_threads(n);
	txl_log(TXL_LOG_INFO, "kernels: %s, %d thread%s", txl_kernels()->name,
		txl_pool_threads(), txl_pool_threads() == 1 ? "" : "s");
}

/* ---- splitting work ---- */

/* Below this many multiply-adds work runs on the calling thread: handing
 * it to the pool costs about a microsecond. */
#define PARALLEL_MIN 32768

int
txl_pool_threads_for(double macs)
{
	return macs < PARALLEL_MIN || txl_pool_in_task() ? 1
		: txl_pool_threads();
}

void
txl_pool_run_for(txl_task_fn fn, void *ctx, double macs)
{
	if (txl_pool_threads_for(macs) > 1)
		txl_pool_run(fn, ctx);
	else
		fn(ctx, 0, 1);
}

struct rows {
	struct txl_chunks part;
	txl_rows_fn fn;
	void *ctx;
};

static void
rows_task(void *p, int ith, int nth)
{
	struct rows *r = p;
	int lo, hi;

	while (txl_chunks_take(&r->part, &lo, &hi))
		r->fn(r->ctx, lo, hi);
}

void
txl_pool_rows(txl_rows_fn fn, void *ctx, int rows, double cost)
{
	struct rows r = { .fn = fn, .ctx = ctx };
	double work = (double)rows * cost;

	txl_chunks_init(&r.part, rows, 1, txl_pool_threads_for(work));
	txl_pool_run_for(rows_task, &r, work);
}

/* ---- the process ---- */

/* A forked child has the caller's thread only. */
static void
after_fork_child(void)
{
	pthread_mutex_init(&pool.busy, NULL);
	pthread_mutex_init(&pool.lock, NULL);
	pthread_cond_init(&pool.wake, NULL);
	atomic_store(&pool.sleeping, 0);
	atomic_store(&pool.state, CLOSED);
	atomic_store(&pool.n, 1);
}

__attribute__((constructor)) static void
pool_init(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

/* Join the workers before the library goes away (dlclose, exit). */
__attribute__((destructor)) static void
pool_fini(void)
{
	if (pthread_mutex_trylock(&pool.busy) == 0) {
		stop_workers();
		pthread_mutex_unlock(&pool.busy);
	}
}
