/* SPDX-License-Identifier: MIT */
/*
 * job.c - a job's lifetime: the connection and the scheduler each hold
 * a reference and let go from their own threads, so the count is atomic;
 * whoever lets go last frees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "job.h"

struct job *
job_new(void)
{
	static atomic_ulong counter;
	struct job *j = xrealloc(NULL, sizeof(*j));

	memset(j, 0, sizeof(*j));
	atomic_init(&j->refs, 1);
	pthread_cond_init(&j->progress, NULL);
	j->created = time(NULL);
	snprintf(j->id, sizeof(j->id), "cmpl-%lx%lx", (unsigned long)j->created,
		 atomic_fetch_add(&counter, 1) + 1);
	return j;
}

void
job_ref(struct job *j)
{
	atomic_fetch_add_explicit(&j->refs, 1, memory_order_relaxed);
}

void
job_unref(struct job *j)
{
	if (!j || atomic_fetch_sub_explicit(&j->refs, 1,
					    memory_order_acq_rel) > 1)
		return;
	for (int i = 0; i < j->n_tasks; i++) {
		struct task *t = &j->tasks[i];

		strbuf_free(&t->text);
		free(t->lp);
		free(t->lp_alt);
		/* prompts are shared by the choices of one prompt: the first
		 * of them owns it */
		if (t->index % (j->n_tasks / j->n_prompts) == 0) {
			free(t->prompt);
			free((char *)t->prompt_text);
		}
	}
	free(j->tasks);
	pthread_cond_destroy(&j->progress);
	strlist_clear(&j->stop);
	logit_bias_free(&j->bias);
	free(j->session);
	free(j->error);
	free(j);
}

void
task_add_logprob(struct task *t, const struct lp_row *row,
		 const struct lp_alt *top, int n_top)
{
	const int k = t->job->logprobs > 0 ? t->job->logprobs : 0;

	if (t->n_lp == t->lp_cap) {
		t->lp_cap = t->lp_cap ? t->lp_cap * 2 : 64;
		t->lp = xrealloc(t->lp, (size_t)t->lp_cap * sizeof(*t->lp));
		if (k)
			t->lp_alt = xrealloc(t->lp_alt, (size_t)t->lp_cap *
					     (size_t)k * sizeof(*t->lp_alt));
	}
	if (n_top > k)
		n_top = k;
	t->lp[t->n_lp] = *row;
	t->lp[t->n_lp].n_top = (uint8_t)n_top;
	if (n_top > 0)
		memcpy(t->lp_alt + (size_t)t->n_lp * k, top,
		       (size_t)n_top * sizeof(*top));
	t->n_lp++;
}
