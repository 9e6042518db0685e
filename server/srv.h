/* SPDX-License-Identifier: MIT */
/*
 * srv.h - txlgen-server's rooms: the HTTP side (http.c: connections,
 * routes, limits, keys), the API (api.c: requests into jobs, jobs into
 * JSON), the jobs between them (job.c, job.h: the one owner of a job's
 * lifetime, so that the scheduler never calls back into the API), the
 * scheduler (sched.c: one thread that owns the model and steps every
 * running completion together), the sessions it keeps (sessions.c) and
 * the request log (reqlog.c).
 * The model, settings, sampling and text output are the code it shares
 * with txlgen (core/).
 */
#ifndef TXLGEN_SRV_H
#define TXLGEN_SRV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>

#include "engine.h"
#include "job.h"
#include "server-options.h"
#include "settings.h"
#include "text.h"

/* ---- the server's own settings (server-options.h), main.c's ---- */

extern struct srv_opts srv;

/* ---- the request log (reqlog.c) ---- */

/* The line of a request from @p client (NULL: unknown) that ended with
 * @p status (0: none sent): @p method and @p path as sent (NULL: not
 * read), its prompt and completion tokens (< 0: not a completion that
 * ran), its duration in ms. */
void reqlog_write(const struct sockaddr *client, const char *method,
		  const char *path, unsigned status, long long in,
		  long long out, double ms);

/* ---- jobs (job.h): requests into jobs, jobs into JSON (api.c) ---- */

/* Parse a completions request; NULL and *status / *err (malloc'd) set on
 * error (400 with the field named). */
struct job *api_completion_job(const cJSON *req, int *status, char **err);
/* The response of a finished job, or the SSE events of the progress of
 * a streaming one since the last (NULL: nothing new), ending with an
 * error event if it failed and [DONE].  Both are called with the
 * scheduler's lock held and return with it held, but let it go while
 * they write the JSON: the scheduler and /metrics go on meanwhile. */
char *api_completion_json(struct job *j);
char *api_stream_events(struct job *j, bool with_usage);
/* Text to ids and back in a connection's thread (the engine's scratch
 * is the scheduler's).  api_detokenize: NULL and *bad the index of an
 * invalid id. */
int api_tokenize(const char *text, size_t len, int32_t **ids);
char *api_detokenize(const int32_t *ids, int n, int *bad);

/* ---- the scheduler (sched.c) ---- */

struct sched_stats {
	uint64_t requests, tokens_in, tokens_out, errors, cancelled;
	int queued, running, sessions;
	double tokens_per_s;     /* generation, the last few seconds */
};

/* The engine requests are parsed for (sched_start() sets it too; a
 * harness that only parses sets it alone). */
void sched_set_engine(struct engine *e);
/* Start the scheduler on the loaded engine; false on error (reported). */
bool sched_start(struct engine *e);
/* Queue @p j; false (503) if the queue is full or the server stops. */
bool sched_submit(struct job *j, int *status, char **err);
/* Wait until @p j changed after @p seq or @p ms passed (< 0: until it
 * changed); its seq. */
unsigned sched_wait(struct job *j, unsigned seq, int ms);
bool sched_job_done(struct job *j);
void sched_cancel(struct job *j);
void sched_lock(void);
void sched_unlock(void);
void sched_stats(struct sched_stats *st);
/* Stop taking jobs; end the running ones within @p grace_s seconds
 * (then cut them); save the sessions; join the thread. */
void sched_stop(int grace_s);
struct engine *sched_engine(void);

/* ---- sessions (sessions.c), under the scheduler's lock ---- */

struct srv_session {
	char id[65];
	struct txl_session *s;
	int32_t *recent;         /* the repeat penalty's window */
	int n_recent;
	bool busy;               /* a request runs in it */
	bool dirty;              /* changed since written (or its write
				    failed: it is kept in memory) */
	bool tried;              /* evict(): a write failed this round */
	uint64_t used;           /* LRU clock */
};

bool session_id_valid(const char *id);
/* Mark @p id busy for a request queued (409 if it is already). */
bool session_reserve(const char *id, int *status, char **err);
/* The reservation of a request that never started. */
void session_unreserve(const char *id);
/* The session @p id, loaded from --session-dir or made empty; NULL and
 * *status / *err on failure (409 busy, 500, 507). */
struct srv_session *session_acquire(struct engine *e, const char *id,
				    int *status, char **err);
/* The end of a request in @p ss: @p changed, its window is @p recent.
 * Returns 0, or 507 and *err (malloc'd) if it could not be written to
 * --session-dir (it stays in memory, dirty, over --max-sessions if it
 * must, and is written at the next chance). */
int session_release(struct engine *e, struct srv_session *ss,
		    const int32_t *recent, int n_recent, bool changed,
		    char **err);
/* {"data": [...]} of the sessions in memory and in --session-dir. */
char *sessions_list_json(void);
/* 0 deleted, 404 none, 409 busy. */
int session_delete(const char *id);
/* Write every changed session to --session-dir (saying on stderr
 * which could not be); free them all. */
void sessions_close(struct engine *e);
int sessions_count(void);
/* At start, with the slots made: cap --max-sessions to the sessions
 * the machine's available memory holds, saying so on stderr. */
void sessions_fit_memory(struct engine *e);

#endif /* TXLGEN_SRV_H */
