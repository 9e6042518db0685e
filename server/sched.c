/* SPDX-License-Identifier: MIT */
/*
 * sched.c - the one thread that computes: it owns the model and --parallel
 * slots, each a session that runs one choice of a request.  Every step it
 * takes queued choices into free slots, feeds each slot that reads a
 * prompt one segment of it, then samples a token in every slot that
 * generates and feeds them all in one step of libtxl's batch (each
 * weight read once for all).  A request that comes while others generate
 * joins at the next step.
 *
 * Connections wait on the job (sched_wait) under the same lock, which
 * also guards the sessions (sessions.c) and the counters.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-model.h"
#include "errors.h"
#include "output.h"
#include "progress.h"
#include "srv.h"

struct slot {
	struct task *t;          /* NULL: free */
	struct txl_session *own; /* the slot's session */
	struct txl_session *s;   /* in use: own, or a named session's */
	struct srv_session *named;
	struct txl_sampler *smp;
	struct output out;       /* the text, held for stop strings */
	FILE *mf;                /* out's memory stream */
	char *mbuf;
	size_t mlen, mtaken;
	int fed;                 /* prompt tokens fed */
	bool generating;
	bool drop_space;
	int32_t tok;             /* the token to feed next */
	bool feed_tok;           /* tok goes into a named session's
				    memory, then the task ends */
	bool stop_matched;       /* a stop string ended the text */
	int32_t *recent;         /* the last repeat_last_n ids */
	int n_recent, recent_cap;
	size_t offset;           /* text_offset of the next token */
	int lead;                /* bytes the first piece has over the
				    text (SentencePiece's space) */
	/* the step's token, sampled without the lock (sample_slot), given
	 * to its task under it (publish_slot) */
	bool failed;             /* sampling failed */
	bool has_row;            /* row, top: its logprobs */
	struct lp_row row;
	struct lp_alt top[20];
	int n_top;
	const char *finish;      /* the token ends the text: why */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;     /* the scheduler: work or stop */
	pthread_cond_t progress; /* sched_stop(): a job ended */
	pthread_t thread;
	bool running;
	struct engine *e;
	struct slot *slots;
	int n_slots;
	struct task **queue;     /* FIFO */
	int q_head, q_n, q_cap;
	bool stopping;           /* no new jobs */
	bool cut;                /* end the running ones now */
	struct sched_stats st;
	double rate_t0;          /* tokens_per_s: a window of time */
	uint64_t rate_n0;
	float *lp_row;           /* n_token scratch: a row's log-softmax */
} S = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.progress = PTHREAD_COND_INITIALIZER,
};

void
sched_lock(void)
{
	pthread_mutex_lock(&S.mu);
}

void
sched_unlock(void)
{
	pthread_mutex_unlock(&S.mu);
}

struct engine *
sched_engine(void)
{
	return S.e;
}

static void
changed(struct job *j)
{
	const bool done = j->n_done == j->n_tasks;

	j->seq++;
	/* only its own connection wakes, and one that waits for the whole
	 * response only at the end (it looks at its client meanwhile on
	 * its own clock): not every connection at every token */
	if (j->stream || done)
		pthread_cond_broadcast(&j->progress);
	if (done)
		pthread_cond_broadcast(&S.progress);
}

/* ---- logprobs ---- */

/* The top @p k (at most 20) of the log-probabilities @p lp (n) into
 * @p top, best first; how many. */
static int
top_logprobs(const float *lp, int n, int k, struct lp_alt *top)
{
	int best[20];
	int m = 0;

	if (k > 20)
		k = 20;
	for (int i = 0; i < n; i++) {
		int at = m < k ? m++ : k;

		if (at == k && lp[i] <= lp[best[k - 1]])
			continue;
		if (at == k)
			at = k - 1;
		while (at > 0 && lp[best[at - 1]] < lp[i]) {
			best[at] = best[at - 1];
			at--;
		}
		best[at] = i;
	}
	for (int i = 0; i < m; i++)
		top[i] = (struct lp_alt){ .id = best[i], .lp = lp[best[i]] };
	return m;
}

/* The rank of token @p id in the model's output row @p row (logits or
 * log-probabilities, n): 1 + the tokens above it (GLTR's measure, which
 * top_logprobs cannot give past 20). */
static int32_t
rank_of(const float *row, int n, int32_t id)
{
	int32_t above = 0;

	for (int i = 0; i < n; i++)
		above += row[i] > row[id];
	return above + 1;
}

/* Append one token's row of logprobs to task @p t: its log-prob (NAN:
 * null), rank (0: null), alternatives (n_top < 0: null) and offset;
 * @p lead: its piece has a space the text has not. */
static void
add_logprob(struct task *t, int32_t id, bool lead, double lp, int32_t rank,
	    const struct lp_alt *top, int n_top, size_t offset)
{
	struct lp_row r = {
		.id = id, .lp = (float)lp, .offset = offset,
		.no_top = n_top < 0, .lead = lead, .rank = rank,
	};

	task_add_logprob(t, &r, top, n_top);
}

/* A job's task ended (ran, or never started): the last one ends the job,
 * and the scheduler's reference to it. */
static void
task_ended(struct job *j)
{
	if (++j->n_done == j->n_tasks && j->n_started > 0)
		S.st.running--;
	changed(j);
	if (j->n_done == j->n_tasks)
		job_unref(j);	/* the connection may be gone */
}

/* ---- a slot's life ---- */

static void
remember(struct slot *sl, int32_t id, int window)
{
	if (window <= 0)
		return;
	if (sl->n_recent == window) {
		memmove(sl->recent, sl->recent + 1,
			(size_t)(window - 1) * sizeof(int32_t));
		sl->n_recent--;
	}
	sl->recent[sl->n_recent++] = id;
}

/* Take text the output released since the last call into the task. */
static void
take_text(struct slot *sl)
{
	fflush(sl->mf);
	if (sl->mlen > sl->mtaken) {
		strbuf_add(&sl->t->text, sl->mbuf + sl->mtaken,
			   sl->mlen - sl->mtaken);
		sl->mtaken = sl->mlen;
	}
}

static void
finish_task(struct slot *sl, const char *why)
{
	struct task *t = sl->t;
	struct job *j = t->job;

	if (strcmp(why, "stop"))
		out_drop_open_char(&sl->out);
	out_end(&sl->out, sl->stop_matched);
	take_text(sl);
	fclose(sl->mf);
	free(sl->mbuf);
	sl->mf = NULL;
	sl->mbuf = NULL;
	out_free(&sl->out);
	txl_sampler_free(sl->smp);
	sl->smp = NULL;
	if (sl->named) {
		/* a prompt not read whole leaves the session as it was */
		bool read = sl->generating && sl->s == sl->named->s;
		char *err = NULL;

		if (session_release(S.e, sl->named, sl->recent, sl->n_recent,
				    read, &err)) {
			/* the text stays in the session's memory */
			j->status = 507;
			free(j->error);
			j->error = err;
		}
		sl->named = NULL;
	}
	t->finish = why;
	j->completion_tokens += t->n_gen;
	S.st.tokens_out += (uint64_t)t->n_gen;
	sl->t = NULL;
	sl->s = NULL;
	task_ended(j);
}

/* Start task @p t in slot @p sl: its session (a named one, loaded or
 * made, or the slot's own, emptied), sampler and output. */
static bool
start_task(struct slot *sl, struct task *t)
{
	struct engine *e = S.e;
	struct job *j = t->job;
	struct txl_sampler_params sp = j->sp;
	struct txlgen_options o = *e->opts;
	int status = 0, window = sp.repeat_last_n;
	char *err = NULL;

	memset(&sl->out, 0, sizeof(sl->out));
	sl->t = t;
	sl->fed = 0;
	sl->generating = sl->feed_tok = sl->stop_matched = false;
	sl->n_recent = 0;
	sl->offset = 0;
	sl->lead = 0;
	sl->named = NULL;
	if (window > sl->recent_cap) {
		sl->recent = xrealloc(sl->recent,
				      (size_t)window * sizeof(int32_t));
		sl->recent_cap = window;
	}
	if (j->session) {
		sl->named = session_acquire(e, j->session, &status, &err);
		if (!sl->named) {
			j->status = status;
			free(j->error);
			j->error = err;
			sl->t = NULL;
			return false;
		}
		sl->s = sl->named->s;
		/* a prompt of more than a segment goes into a copy, the
		 * slot's own session, taken as the named one's once read
		 * whole: a request cut meanwhile leaves it as it was */
		if (t->n_prompt > txl_session_get_params(sl->s).seg_len &&
		    txl_session_copy(sl->own, sl->s) == TXL_OK)
			sl->s = sl->own;
		for (int i = 0; i < sl->named->n_recent; i++)
			remember(sl, sl->named->recent[i], window);
	} else {
		sl->s = sl->own;
		txl_session_reset(sl->s);
	}
	sp.seed = t->seed;
	sl->smp = txl_sampler_new(&sp, e->mod->hp->n_token);
	if (sl->smp && txl_sampler_keep_utf8(sl->smp, e->mod->model) != TXL_OK) {
		txl_sampler_free(sl->smp);
		sl->smp = NULL;
	}
	sl->mbuf = NULL;
	sl->mlen = sl->mtaken = 0;
	sl->mf = sl->smp ? open_memstream(&sl->mbuf, &sl->mlen) : NULL;
	if (!sl->mf) {
		txl_sampler_free(sl->smp);
		sl->smp = NULL;
		if (sl->named)
			session_release(e, sl->named, NULL, 0, false, NULL);
		j->status = 500;
		j->error = xstrdup("out of memory");
		sl->t = NULL;
		return false;
	}
	for (int i = 0; i < sl->n_recent; i++)
		txl_sampler_accept(sl->smp, sl->recent[i]);
	o.json = false;
	o.color = COLOR_NEVER;
	out_init(&sl->out, sl->mf, &o, false);
	/* a text that starts here (nothing before, no prompt) drops the
	 * leading space of its first piece, as txlgen's output does */
	sl->drop_space = t->n_prompt == 0 && txl_session_n_past(sl->s) == 0;
	out_begin(&sl->out, false, &j->stop);
	if (j->echo)
		strbuf_add(&t->text, t->prompt_text, t->prompt_len);
	if (t->n_prompt > 0 && txl_session_n_past(sl->s) == 0) {
		int len;
		const char *p = engine_piece(e->mod, t->prompt[0], &len);

		sl->lead = p && len > 0 && p[0] == ' ' &&
			(t->prompt_len == 0 || t->prompt_text[0] != ' ');
	}
	if (j->n_started++ == 0)
		S.st.running++;
	return true;
}

/* Feed @p s without the lock: connections go on meanwhile.  The slot's
 * session is the scheduler's alone (a named one is marked busy), and
 * what connections read of a job is written under the lock only. */
static int
feed_unlocked(struct txl_session *s, const int32_t *ids, int n,
	      enum txl_logits want)
{
	int rc;

	pthread_mutex_unlock(&S.mu);
	rc = engine_feed_to(S.e, s, ids, n, want);
	pthread_mutex_lock(&S.mu);
	return rc;
}

static bool
slot_failed(struct slot *sl, int rc)
{
	struct job *j = sl->t->job;

	if (rc == EXIT_OK)
		return false;
	j->status = 500;
	free(j->error);
	/* the library's reason (non-finite logits), else a generic one */
	j->error = xstrdup(*txl_last_error() ? txl_last_error()
			   : "the model failed to compute (see the server's "
			   "log)");
	S.st.errors++;
	finish_task(sl, "error");
	return true;
}

/* The logprob row of prompt token @p i from output row @p row (NULL: it
 * has none, the first token of a text). */
static void
prompt_logprob(struct slot *sl, int i, const float *row)
{
	struct engine *e = S.e;
	struct task *t = sl->t;
	size_t off = sl->offset > (size_t)sl->lead ? sl->offset - sl->lead : 0;
	double lp = NAN;
	struct lp_alt top[20];
	int n_top = -1, len;
	int32_t rank = 0;

	if (row) {
		txl_log_softmax(row, S.lp_row, e->mod->hp->n_token);
		lp = S.lp_row[t->prompt[i]];
		rank = rank_of(row, e->mod->hp->n_token, t->prompt[i]);
		n_top = t->job->logprobs > 0
			? top_logprobs(S.lp_row, e->mod->hp->n_token,
				       t->job->logprobs, top) : 0;
	}
	if (!engine_piece(e->mod, t->prompt[i], &len))
		len = 0;
	/* the first piece of a text loses the space SentencePiece gave it */
	if (i == 0 && sl->lead && len > 0)
		add_logprob(t, t->prompt[i], true, lp, rank, top, n_top, 0);
	else
		add_logprob(t, t->prompt[i], false, lp, rank, top, n_top, off);
	sl->offset += (size_t)len;
}

/* Feed the next segment of the prompt (or the start token of a text
 * without one), aligned at the prompt's start as txlgen feeds one.  With
 * echo and logprobs every row is kept: row r predicts token fed + r + 1. */
static void
feed_prompt(struct slot *sl)
{
	struct engine *e = S.e;
	struct task *t = sl->t;
	struct job *j = t->job;
	const int seg = txl_session_get_params(sl->s).seg_len;
	const bool lp = j->echo && j->logprobs >= 0;
	const int a = sl->fed;
	int n = t->n_prompt - a;

	if (t->n_prompt == 0) {
		if (txl_session_n_logits(sl->s) == 0) {
			int32_t tok = engine_start_token(e);

			if (slot_failed(sl, feed_unlocked(sl->s, &tok, 1,
							  TXL_LOGITS_LAST)))
				return;
		}
		sl->generating = true;
		return;
	}
	if (n > seg)
		n = seg;
	if (lp && a == 0)
		prompt_logprob(sl, 0, txl_session_n_logits(sl->s) > 0 &&
			       txl_session_n_past(sl->s) > 0
			       ? txl_session_logits(sl->s) : NULL);
	if (slot_failed(sl, feed_unlocked(sl->s, t->prompt + a, n,
					  lp ? TXL_LOGITS_ALL
					   : a + n == t->n_prompt
					   ? TXL_LOGITS_LAST
					   : TXL_LOGITS_NONE)))
		return;
	for (int r = 0; lp && r < n && a + r + 1 < t->n_prompt; r++)
		prompt_logprob(sl, a + r + 1, txl_session_logits(sl->s) +
			       (size_t)r * e->mod->hp->n_token);
	for (int i = a; i < a + n; i++) {
		txl_sampler_accept(sl->smp, t->prompt[i]);
		remember(sl, t->prompt[i], j->sp.repeat_last_n);
	}
	sl->fed += n;
	/* what was read, not what was sent: a request cut midway counts
	 * the segments fed */
	j->prompt_tokens += n;
	S.st.tokens_in += (uint64_t)n;
	if (sl->fed < t->n_prompt)
		return;
	if (sl->named && sl->s != sl->named->s) {
		/* read whole: the copy becomes the session */
		struct txl_session *was = sl->named->s;

		sl->named->s = sl->s;
		sl->own = was;
	}
	sl->offset = j->echo ? t->prompt_len : 0;
	sl->lead = 0;
	sl->generating = true;
	changed(j);
}

/* Sample the next token of slot @p sl and write its text into the
 * slot's output, without the lock: what it touches is the slot's and its
 * session's, the scheduler's alone; its task learns of it in
 * publish_slot(). */
static void
sample_slot(struct slot *sl)
{
	struct engine *e = S.e;
	struct task *t = sl->t;
	struct job *j = t->job;
	const int32_t eos = txl_token_eos(e->mod->model);
	enum out_status os;
	double logprob;
	int32_t tok;
	int len;

	sl->failed = sl->has_row = false;
	sl->finish = NULL;
	tok = engine_sample(e, sl->s, sl->smp, j->ignore_eos, true, &logprob);
	if (tok < 0) {
		sl->failed = true;
		return;
	}
	remember(sl, tok, j->sp.repeat_last_n);
	sl->tok = tok;
	if (j->logprobs >= 0) {
		sl->n_top = 0;
		if (j->logprobs > 0) {
			txl_log_softmax(engine_last_logits(e, sl->s), S.lp_row,
					e->mod->hp->n_token);
			sl->n_top = top_logprobs(S.lp_row, e->mod->hp->n_token,
						 j->logprobs, sl->top);
		}
		if (!engine_piece(e->mod, tok, &len))
			len = 0;
		sl->row = (struct lp_row){
			.id = tok, .lp = (float)logprob, .offset = sl->offset,
			.rank = rank_of(engine_last_logits(e, sl->s),
					e->mod->hp->n_token, tok),
		};
		sl->has_row = true;
		sl->offset += (size_t)len;
	}
	if (tok == eos && !j->ignore_eos) {
		sl->finish = "stop";
	} else {
		os = engine_emit(e, &sl->out, tok, logprob, &sl->drop_space);
		fflush(sl->mf);
		if (os != OUT_CONTINUE) {
			sl->stop_matched = os == OUT_STOP;
			sl->finish = "stop";
		} else if (t->n_gen + 1 >= j->max_tokens) {
			sl->finish = "length";
		}
	}
}

/* Give slot @p sl's sampled token to its task, under the lock.  Returns
 * whether it has a token to feed (sl->tok); @p wake: its job, to be
 * woken once the lock is let go (a reference taken), or NULL. */
static bool
publish_slot(struct slot *sl, struct job **wake)
{
	struct task *t = sl->t;
	struct job *j = t->job;

	*wake = NULL;
	if (sl->failed) {
		slot_failed(sl, EXIT_RUNTIME);
		return false;
	}
	if (j->t_first == 0)
		j->t_first = now_s() - j->t_submit;
	t->n_gen++;
	if (sl->has_row)
		task_add_logprob(t, &sl->row, sl->top, sl->n_top);
	take_text(sl);
	t->finish = sl->finish;
	if (!t->finish) {
		/* its connection is woken after the lock is let go: woken
		 * under it, it would only wait for the lock */
		j->seq++;
		if (j->stream) {
			job_ref(j);
			*wake = j;
		}
		return true;
	}
	changed(j);
	/* a named session's memory holds its whole text, the last token
	 * too: it is fed, then the task ends */
	if (sl->named) {
		sl->feed_tok = true;
		return true;
	}
	finish_task(sl, t->finish);
	return false;
}

/* ---- the thread ---- */

static void
take_queued(void)
{
	for (int k = 0; k < S.n_slots && S.q_n > 0; k++) {
		struct task *t;

		if (S.slots[k].t)
			continue;
		t = S.queue[S.q_head];
		S.q_head = (S.q_head + 1) % S.q_cap;
		S.q_n--;
		S.st.queued = S.q_n;
		if (t->job->cancelled || S.cut || !start_task(&S.slots[k], t)) {
			struct job *j = t->job;

			if (!t->finish)
				t->finish = S.cut ? "length" : "error";
			if (j->session && !t->job->n_started)
				session_unreserve(j->session);
			if (j->status == 0 && !j->cancelled && !S.cut) {
				j->status = 500;
				j->error = xstrdup("could not start");
			}
			task_ended(j);
		}
	}
}

static bool
busy(void)
{
	for (int k = 0; k < S.n_slots; k++)
		if (S.slots[k].t)
			return true;
	return S.q_n > 0;
}

static void *
run(void *arg)
{
	struct engine *e = S.e;
	struct txl_session **rows_s = xrealloc(NULL, (size_t)S.n_slots *
					       sizeof(*rows_s));
	const int32_t **rows_t = xrealloc(NULL, (size_t)S.n_slots *
					  sizeof(*rows_t));
	int *rows_n = xrealloc(NULL, (size_t)S.n_slots * sizeof(int));
	struct slot **go = xrealloc(NULL, (size_t)S.n_slots * sizeof(*go));
	struct slot **gen = xrealloc(NULL, (size_t)S.n_slots * sizeof(*gen));
	struct job **wake = xrealloc(NULL, (size_t)S.n_slots * sizeof(*wake));

	(void)arg;
	S.rate_t0 = now_s();
	pthread_mutex_lock(&S.mu);
	for (;;) {
		int n_go = 0, n_gen = 0, n_wake = 0, rc;

		while (!busy() && !S.stopping)
			pthread_cond_wait(&S.wake, &S.mu);
		if (!busy() && S.stopping)
			break;
		take_queued();
		for (int k = 0; k < S.n_slots; k++) {
			struct slot *sl = &S.slots[k];

			if (!sl->t)
				continue;
			if (sl->t->job->cancelled || S.cut) {
				S.st.cancelled += sl->t->job->cancelled;
				finish_task(sl, "length");
				continue;
			}
			if (!sl->generating)
				feed_prompt(sl);
			else if (sl->t->n_gen >= sl->t->job->max_tokens)
				finish_task(sl, "length");
			else
				gen[n_gen++] = sl;
		}
		/* sampling, each token's logprobs and text: per-token work
		 * off the lock, the connections go on meanwhile */
		if (n_gen) {
			pthread_mutex_unlock(&S.mu);
			for (int k = 0; k < n_gen; k++)
				sample_slot(gen[k]);
			pthread_mutex_lock(&S.mu);
		}
		for (int k = 0; k < n_gen; k++) {
			if (publish_slot(gen[k], &wake[n_wake]))
				go[n_go++] = gen[k];
			n_wake += wake[n_wake] != NULL;
		}
		for (int k = 0; k < n_go; k++) {
			rows_s[k] = go[k]->s;
			rows_t[k] = &go[k]->tok;
			rows_n[k] = 1;
		}
		rc = EXIT_OK;
		if (n_go || n_wake) {
			pthread_mutex_unlock(&S.mu);
			for (int k = 0; k < n_wake; k++) {
				pthread_cond_broadcast(&wake[k]->progress);
				job_unref(wake[k]);
			}
			if (n_go == 1)
				rc = engine_feed_to(e, rows_s[0], rows_t[0], 1,
						    TXL_LOGITS_LAST);
			else if (n_go > 1)
				rc = engine_feed_many(e, rows_s, rows_t, rows_n,
						      n_go, TXL_LOGITS_LAST,
						      true, S.n_slots);
			pthread_mutex_lock(&S.mu);
		}
		for (int k = 0; k < n_go; k++) {
			struct slot *sl = go[k];

			if (!slot_failed(sl, rc) && sl->feed_tok)
				finish_task(sl, sl->t->finish);
		}
		if (now_s() - S.rate_t0 >= 2) {
			S.st.tokens_per_s = (double)(S.st.tokens_out -
						     S.rate_n0) /
				(now_s() - S.rate_t0);
			S.rate_t0 = now_s();
			S.rate_n0 = S.st.tokens_out;
		}
	}
	pthread_mutex_unlock(&S.mu);
	free(rows_s);
	free(rows_t);
	free(rows_n);
	free(go);
	free(gen);
	free(wake);
	return NULL;
}

void
sched_set_engine(struct engine *e)
{
	S.e = e;
}

bool
sched_start(struct engine *e)
{
	struct txl_session_params p;
	enum txl_status st;

	S.e = e;
	S.n_slots = srv.parallel;
	S.slots = xrealloc(NULL, (size_t)S.n_slots * sizeof(*S.slots));
	memset(S.slots, 0, (size_t)S.n_slots * sizeof(*S.slots));
	S.q_cap = srv.max_queue + srv.parallel * 4 + srv.max_n;
	S.queue = xrealloc(NULL, (size_t)S.q_cap * sizeof(*S.queue));
	S.lp_row = xrealloc(NULL, (size_t)e->mod->hp->n_token * sizeof(float));
	engine_session_params(e, &p);
	for (int k = 0; k < S.n_slots; k++) {
		st = engine_session_new(e, &p, &S.slots[k].own);
		if (st != TXL_OK) {
			errmsg("%s", engine_lib_error(st));
			return false;
		}
	}
	sessions_fit_memory(e);
	if (pthread_create(&S.thread, NULL, run, NULL) != 0) {
		errmsg("cannot start the scheduler: %s", strerror(errno));
		return false;
	}
	S.running = true;
	return true;
}

bool
sched_submit(struct job *j, int *status, char **err)
{
	sched_lock();
	if (S.stopping) {
		sched_unlock();
		*status = 503;
		*err = xstrdup("the server is stopping");
		return false;
	}
	if (S.q_n + j->n_tasks > S.q_cap || S.q_n >= srv.max_queue) {
		sched_unlock();
		*status = 503;
		*err = xstrdup("too many requests waiting; try again later");
		return false;
	}
	if (j->session && !session_reserve(j->session, status, err)) {
		sched_unlock();
		return false;
	}
	job_ref(j);
	j->t_submit = now_s();
	for (int i = 0; i < j->n_tasks; i++) {
		S.queue[(S.q_head + S.q_n) % S.q_cap] = &j->tasks[i];
		S.q_n++;
	}
	S.st.queued = S.q_n;
	S.st.requests++;
	pthread_cond_signal(&S.wake);
	sched_unlock();
	return true;
}

unsigned
sched_wait(struct job *j, unsigned seq, int ms)
{
	struct timespec ts;

	if (ms < 0) {
		while (j->seq == seq && j->n_done < j->n_tasks)
			pthread_cond_wait(&j->progress, &S.mu);
		return j->seq;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (j->seq == seq && j->n_done < j->n_tasks)
		if (pthread_cond_timedwait(&j->progress, &S.mu, &ts) ==
		    ETIMEDOUT)
			break;
	return j->seq;
}

bool
sched_job_done(struct job *j)
{
	return j->n_done == j->n_tasks;
}

void
sched_cancel(struct job *j)
{
	if (!sched_job_done(j)) {
		j->cancelled = true;
		pthread_cond_signal(&S.wake);
	}
}

void
sched_stats(struct sched_stats *out)
{
	sched_lock();
	*out = S.st;
	out->sessions = sessions_count();
	sched_unlock();
}

void
sched_stop(int grace_s)
{
	double t0 = now_s();

	sched_lock();
	S.stopping = true;
	pthread_cond_signal(&S.wake);
	while (S.running && busy() && now_s() - t0 < grace_s) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&S.progress, &S.mu, &ts);
	}
	S.cut = true;
	pthread_cond_signal(&S.wake);
	sched_unlock();
	if (S.running)
		pthread_join(S.thread, NULL);
	S.running = false;
	sched_lock();
	sessions_close(S.e);
	sched_unlock();
	for (int k = 0; k < S.n_slots; k++) {
		txl_session_free(S.slots[k].own);
		free(S.slots[k].recent);
	}
	free(S.slots);
	free(S.queue);
	free(S.lp_row);
}
