/* SPDX-License-Identifier: MIT */
/*
 * http.c - the HTTP side, on libmicrohttpd: a thread per connection
 * (a request waits for its job there, and a stream's events are written
 * from there), the routes, the API key, CORS, and every limit: body
 * size (413), connections and queue (503 with Retry-After), idle
 * connections (closed after --timeout).  A client that goes away
 * cancels its job: a waiting request looks at its socket, a stream
 * learns it from a failed write.
 *
 * The server accepts connections itself (one thread, "the doorman"),
 * before libmicrohttpd gets them: a connection whose first bytes are
 * not a request line is answered 400 at once; one address may hold
 * --max-connections-per-client connections that are still sending
 * their request, more are answered 503; and every request must arrive
 * whole within --request-timeout seconds of the connection's opening
 * (or of the previous answer on it), else its socket is shut.  When
 * the connections are all taken, the oldest one still sending its
 * request makes room.  Slow clients so hold no more than their share.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <microhttpd.h>

#include "engine-model.h"
#include "errors.h"
#include "http.h"
#include "page.h"
#include "progress.h"
#include "srv.h"
#include "utf8.h"

#define WAIT_MS 100          /* how often a waiting request looks up */
#define KEEPALIVE_S 5        /* a quiet stream's comment line */
#define TICK_MS 200          /* how often the doorman looks at deadlines */
#define HARD_EXTRA 16        /* connections past --max-connections that
				are still answered (503) */
#define DRAIN_S 2            /* a refused connection's time to read its
				answer before it is closed */
#define LOG_PER_S 5          /* libmicrohttpd's messages a second */

/* How long a waiting request sleeps before it looks at its client (and
 * a stream at its keep-alive) when its job has no news: news wakes it at
 * once.  TXLGEN_SERVER_WAIT_MS=-1 (for tests) waits for news alone, so
 * that a wake-up lost hangs the request instead of costing it WAIT_MS. */
static int wait_ms = WAIT_MS;

static atomic_bool ready;    /* the model is loaded */
static atomic_int n_conns;
static char *api_key;        /* NULL: none */

/* answers by status, for /metrics */
static const unsigned counted[] = { 400, 401, 404, 409, 413, 500, 503 };
static atomic_ulong n_answers[sizeof(counted) / sizeof(counted[0])];

/* One request's state across the handler's calls. */
struct req {
	struct strbuf body;
	bool started;            /* the handler's first call is past */
	bool with_usage;         /* stream_options.include_usage */
	bool bad_url;            /* a NUL byte in the path, raw or %00 */
	size_t raw_len;          /* the path's length before unescaping */
	bool http11;             /* may be sent an interim 100 */
	bool probed;             /* a half-closed client's write sent */
	/* for the request log */
	double t0;               /* its request line came */
	char method[16];         /* "": not read */
	char *path;              /* as sent, before unescaping */
	struct job *job;         /* a completion's (its tokens), or NULL */
};

/* A connection the doorman knows: from its accept to its close. */
enum conn_state {
	C_DOOR,                  /* accepted, its first bytes not seen */
	C_MHD,                   /* libmicrohttpd's */
	C_DRAIN,                 /* refused: answered, read until closed */
};

struct conn {
	int fd;
	enum conn_state state;
	struct sockaddr_storage addr;
	double t0;               /* the request's clock: the connection's
				    opening, or the last answer on it */
	bool arriving;           /* its request is not all read */
	bool shut;               /* shut for its deadline or for room */
	bool bound;              /* libmicrohttpd's notice seen */
	unsigned status;         /* of the answer queued on it (the
				    connection's own thread's) */
};

static struct {
	pthread_mutex_t mu;
	struct conn **v;
	int n, cap;
	int listen_fd;
	int wake[2];
	pthread_t thread;
	bool running;
	atomic_bool stop;
	struct MHD_Daemon *d;
} D = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.listen_fd = -1,
	.wake = { -1, -1 },
};

/* A stream's: it lives as long as its response, which libmicrohttpd
 * may free after the request's end. */
struct stream {
	struct job *job;
	bool with_usage;
	double last_write;
	char *pending;           /* bytes not yet written */
	size_t pending_len, pending_off;
};

void
http_set_ready(void)
{
	atomic_store(&ready, true);
}

void
http_set_key(char *key)
{
	api_key = key;
}

/* ---- responses ---- */

static struct conn *conn_of(struct MHD_Connection *c);

/* The status of the answer to the request on @p c, for its log line. */
static void
note_status(struct MHD_Connection *c, unsigned status)
{
	struct conn *k = conn_of(c);

	if (k)
		k->status = status;
}

static void
count_answer(unsigned status)
{
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		if (counted[i] == status)
			atomic_fetch_add(&n_answers[i], 1);
}

static void
common_headers(struct MHD_Response *r)
{
	if (srv.cors_origin) {
		MHD_add_response_header(r, "Access-Control-Allow-Origin",
					srv.cors_origin);
		MHD_add_response_header(r, "Vary", "Origin");
	}
}

static enum MHD_Result
send_body(struct MHD_Connection *c, unsigned status, const char *type,
	  char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(body), body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ok;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	count_answer(status);
	note_status(c, status);
	MHD_add_response_header(r, "Content-Type", type);
	common_headers(r);
	if (status == 503)
		MHD_add_response_header(r, "Retry-After", "1");
	if (status == 401)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result
send_json(struct MHD_Connection *c, unsigned status, char *json)
{
	return send_body(c, status, "application/json", json);
}

/* {"error": {"message", "type", "param", "code"}}, OpenAI's shape. */
static char *
error_json(unsigned status, const char *msg)
{
	cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
	char *s;

	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddStringToObject(e, "type", status == 401 ?
				"authentication_error" : status >= 500 ?
				"server_error" : "invalid_request_error");
	cJSON_AddNullToObject(e, "param");
	cJSON_AddNullToObject(e, "code");
	cJSON_AddItemToObject(o, "error", e);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		die_oom();
	return s;
}

static enum MHD_Result
send_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
	return send_json(c, status, error_json(status, msg));
}

/* An answer written on the socket itself, where libmicrohttpd cannot
 * (before it has the connection, or in the middle of a body); the
 * connection closes after it. */
static void
raw_answer(int fd, unsigned status, const char *reason, const char *msg)
{
	char *body = error_json(status, msg), *head;
	int n = asprintf(&head, "HTTP/1.1 %u %s\r\n"
			 "Content-Type: application/json\r\n"
			 "Connection: close\r\n%s%s%s%s"
			 "Content-Length: %zu\r\n\r\n", status, reason,
			 status == 503 ? "Retry-After: 1\r\n" : "",
			 srv.cors_origin ? "Access-Control-Allow-Origin: " : "",
			 srv.cors_origin ? srv.cors_origin : "",
			 srv.cors_origin ? "\r\nVary: Origin\r\n" : "",
			 strlen(body));
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	if (n < 0)
		die_oom();
	iov[0] = (struct iovec){ .iov_base = head, .iov_len = (size_t)n };
	iov[1] = (struct iovec){ .iov_base = body, .iov_len = strlen(body) };
	count_answer(status);
	/* a fresh socket's buffer takes it whole; if not, the client
	 * gets less of an answer it could not have read anyway */
	if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		(void)0;
	free(head);
	free(body);
}

/* ---- waiting ---- */

/* Has the client gone away?  (A request's body is read: whatever comes
 * now is the next request, so EOF is the only sign.)  EOF alone may be
 * a client that only shut its sending side, as nc -N does, and still
 * reads: a write tells the two apart.  An HTTP/1.1 client is sent an
 * interim "100 Continue", which it skips; one that left answers it
 * with a reset.  An HTTP/1.0 client's job runs on until its answer's
 * write fails. */
static bool
client_gone(struct MHD_Connection *c, struct req *q)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p;
	char b;

	if (!ci)
		return false;
	p.fd = ci->connect_fd;
	p.events = POLLIN | POLLRDHUP;
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLHUP | POLLERR))
		return true;
	if (!(p.revents & POLLRDHUP) &&
	    recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0)
		return false;
	if (!q->probed && q->http11) {
		q->probed = true;
		if (send(p.fd, cont, sizeof(cont) - 1,
			 MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
			return true;
	}
	return false;
}

/* Wait for job @p j to end; false if the client went away first (the
 * job is then cancelled). */
static bool
wait_job(struct MHD_Connection *c, struct req *q, struct job *j)
{
	unsigned seq = 0;
	bool gone = false;

	sched_lock();
	while (!sched_job_done(j)) {
		seq = sched_wait(j, seq, wait_ms);
		if (!sched_job_done(j) && client_gone(c, q)) {
			sched_cancel(j);
			gone = true;
			break;
		}
	}
	sched_unlock();
	return !gone;
}

/* A stream's bytes: the events since the last call, a comment line when
 * it has been quiet, the end after [DONE]. */
static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *q = cls;
	struct job *j = q->job;
	unsigned seq = 0;

	(void)pos;
	if (q->pending) {
		size_t n = q->pending_len - q->pending_off;

		if (n > max)
			n = max;
		memcpy(buf, q->pending + q->pending_off, n);
		q->pending_off += n;
		if (q->pending_off == q->pending_len) {
			free(q->pending);
			q->pending = NULL;
		}
		return (ssize_t)n;
	}
	sched_lock();
	for (;;) {
		char *ev = api_stream_events(j, q->with_usage);

		if (ev) {
			sched_unlock();
			q->pending = ev;
			q->pending_len = strlen(ev);
			q->pending_off = 0;
			q->last_write = now_s();
			return stream_read(cls, pos, buf, max);
		}
		if (j->done_sent) {
			sched_unlock();
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (now_s() - q->last_write > KEEPALIVE_S) {
			static const char ka[] = ": keep-alive\n\n";

			sched_unlock();
			q->last_write = now_s();
			memcpy(buf, ka, sizeof(ka) - 1);
			return (ssize_t)(sizeof(ka) - 1);
		}
		seq = sched_wait(j, seq, wait_ms);
	}
}

/* The stream's end, also when the client went away: its job stops. */
static void
stream_free(void *cls)
{
	struct stream *q = cls;

	sched_lock();
	sched_cancel(q->job);
	sched_unlock();
	job_unref(q->job);
	free(q->pending);
	free(q);
}

/* ---- routes ---- */

static bool
authorized(struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    "Authorization");
	size_t n, m;
	unsigned char diff;

	if (!api_key)
		return true;
	if (!h || strncmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	n = strlen(h);
	m = strlen(api_key);
	/* every byte compared, whatever differs: no timing of where */
	diff = n != m;
	for (size_t i = 0; i < m; i++)
		diff |= (unsigned char)(api_key[i] ^ (i < n ? h[i] : 0));
	return diff == 0;
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A key that appears twice in one object anywhere in @p j, or NULL.
 * (cJSON keeps both and reads the first: a request would mean what
 * one reader of it sees and not another.) */
static const char *
dup_key(const cJSON *j)
{
	const cJSON *it;
	const char *d = NULL;
	int n = 0, k = 0;

	cJSON_ArrayForEach(it, j) {
		n++;
		if ((cJSON_IsObject(it) || cJSON_IsArray(it)) &&
		    (d = dup_key(it)))
			return d;
	}
	if (!cJSON_IsObject(j) || n < 2)
		return NULL;
	{
		char **v = xrealloc(NULL, (size_t)n * sizeof(*v));

		cJSON_ArrayForEach(it, j)
			v[k++] = it->string;
		qsort(v, (size_t)n, sizeof(*v), cmp_names);
		for (int i = 1; i < n && !d; i++)
			if (!strcmp(v[i - 1], v[i]))
				d = v[i];
		free(v);
	}
	return d;
}

/* The offset of a \u0000 escape in JSON text @p s (valid JSON), or -1:
 * cJSON ends its string there, so "alice\u0000x" would read as
 * "alice". */
static long
nul_escape(const char *s)
{
	bool in = false;

	for (const char *p = s; *p; p++) {
		if (!in) {
			in = *p == '"';
			continue;
		}
		if (*p == '"')
			in = false;
		else if (*p == '\\') {
			if (p[1] == 'u' && !strncmp(p + 2, "0000", 4))
				return (long)(p - s);
			if (p[1])
				p++;
		}
	}
	return -1;
}

static cJSON *
parse_body(struct req *q, struct MHD_Connection *c, enum MHD_Result *res)
{
	cJSON *j;
	const char *end = NULL, *dup;
	char msg[192];
	long at;

	strbuf_add(&q->body, "", 0);
	if (q->body.len != strlen(q->body.s)) {
		*res = send_error(c, 400, "the request body holds a NUL byte");
		return NULL;
	}
	j = cJSON_ParseWithOpts(q->body.s, &end, false);
	if (!j) {
		const char *e = cJSON_GetErrorPtr();

		snprintf(msg, sizeof(msg), "the request body is not JSON "
			 "(at byte %ld)", e ? (long)(e - q->body.s) : 0L);
		*res = send_error(c, 400, msg);
		return NULL;
	}
	end += strspn(end, " \t\r\n");
	if (*end) {
		snprintf(msg, sizeof(msg), "the request body goes on after "
			 "its JSON value (at byte %ld)",
			 (long)(end - q->body.s));
		cJSON_Delete(j);
		*res = send_error(c, 400, msg);
		return NULL;
	}
	if ((dup = dup_key(j))) {
		snprintf(msg, sizeof(msg), "the request body has the key "
			 "'%.64s' twice in one object", dup);
		cJSON_Delete(j);
		*res = send_error(c, 400, msg);
		return NULL;
	}
	if ((at = nul_escape(q->body.s)) >= 0) {
		snprintf(msg, sizeof(msg), "the request body has a \\u0000 "
			 "escape (at byte %ld): no string may hold a NUL", at);
		cJSON_Delete(j);
		*res = send_error(c, 400, msg);
		return NULL;
	}
	return j;
}

static enum MHD_Result
completions(struct MHD_Connection *c, struct req *q)
{
	enum MHD_Result res = MHD_NO;
	cJSON *body = parse_body(q, c, &res), *so;
	struct job *j;
	int status = 400;
	char *err = NULL;

	if (!body)
		return res;
	j = api_completion_job(body, &status, &err);
	so = cJSON_GetObjectItemCaseSensitive(body, "stream_options");
	q->with_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
		so, "include_usage"));
	cJSON_Delete(body);
	if (!j || !sched_submit(j, &status, &err)) {
		res = send_error(c, (unsigned)status, err);
		free(err);
		job_unref(j);
		return res;
	}
	job_ref(j);
	q->job = j;
	if (j->stream) {
		struct stream *sq = xrealloc(NULL, sizeof(*sq));
		struct MHD_Response *r;

		*sq = (struct stream){ .job = j, .with_usage = q->with_usage,
				       .last_write = now_s() };
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
						      stream_read, sq,
						      stream_free);
		if (!r) {
			stream_free(sq);
			return MHD_NO;
		}
		MHD_add_response_header(r, "Content-Type",
					"text/event-stream");
		MHD_add_response_header(r, "Cache-Control", "no-cache");
		common_headers(r);
		note_status(c, 200);
		res = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return res;
	}
	if (!wait_job(c, q, j)) {
		job_unref(j);
		return MHD_NO;      /* nobody to answer */
	}
	sched_lock();
	if (j->status)
		res = send_error(c, (unsigned)j->status, j->error ? j->error
				 : "the request failed");
	else
		res = send_json(c, 200, api_completion_json(j));
	sched_unlock();
	job_unref(j);
	return res;
}

static enum MHD_Result
tokenize_route(struct MHD_Connection *c, struct req *q)
{
	enum MHD_Result res = MHD_NO;
	cJSON *body = parse_body(q, c, &res), *p, *o, *a;
	int32_t *ids = NULL;
	int n;

	if (!body)
		return res;
	p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
	if (!p)
		p = cJSON_GetObjectItemCaseSensitive(body, "content");
	if (!cJSON_IsString(p) || !utf8_valid(p->valuestring,
					      strlen(p->valuestring))) {
		cJSON_Delete(body);
		return send_error(c, 400, "'prompt' must be a string of "
				  "UTF-8 text");
	}
	n = api_tokenize(p->valuestring, strlen(p->valuestring), &ids);
	cJSON_Delete(body);
	if (n < 0)
		return send_error(c, 400, "'prompt' cannot be tokenized");
	o = cJSON_CreateObject();
	a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
	free(ids);
	cJSON_AddItemToObject(o, "tokens", a);
	res = send_json(c, 200, cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	return res;
}

static enum MHD_Result
detokenize_route(struct MHD_Connection *c, struct req *q)
{
	enum MHD_Result res = MHD_NO;
	cJSON *body = parse_body(q, c, &res), *t, *it, *o;
	int32_t *ids;
	int n = 0, bad;
	char *text, msg[128];
	const int n_token = sched_engine()->mod->hp->n_token;

	if (!body)
		return res;
	t = cJSON_GetObjectItemCaseSensitive(body, "tokens");
	if (!cJSON_IsArray(t)) {
		cJSON_Delete(body);
		return send_error(c, 400, "'tokens' must be a list of token "
				  "ids");
	}
	ids = xrealloc(NULL, (size_t)(cJSON_GetArraySize(t) + 1) *
		       sizeof(int32_t));
	cJSON_ArrayForEach(it, t) {
		if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
		    it->valuedouble >= n_token ||
		    it->valuedouble != floor(it->valuedouble)) {
			snprintf(msg, sizeof(msg), "'tokens[%d]' is not a "
				 "token id (0 to %d)", n, n_token - 1);
			free(ids);
			cJSON_Delete(body);
			return send_error(c, 400, msg);
		}
		ids[n++] = (int32_t)it->valuedouble;
	}
	cJSON_Delete(body);
	text = api_detokenize(ids, n, &bad);
	free(ids);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "prompt", text ? text : "");
	free(text);
	res = send_json(c, 200, cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	return res;
}

static enum MHD_Result
tokenizer_info(struct MHD_Connection *c)
{
	struct engine *e = sched_engine();
	cJSON *o = cJSON_CreateObject();
	int32_t eos = txl_token_eos(e->mod->model);
	int32_t bos = txl_token_bos(e->mod->model);
	const char *vk = txl_model_meta(e->mod->model, "vocab_kind");
	enum MHD_Result res;
	int len;
	struct engine_model tmp = { .model = e->mod->model, .hp = e->mod->hp };
	const char *p;

	cJSON_AddNumberToObject(o, "vocab_size", e->mod->hp->n_token);
	cJSON_AddNumberToObject(o, "eos_token_id", eos);
	p = eos >= 0 ? engine_piece(&tmp, eos, &len) : NULL;
	if (p) {
		char *s = strndup(p, (size_t)len);

		cJSON_AddStringToObject(o, "eos_token", s ? s : "");
		free(s);
	}
	if (bos >= 0)
		cJSON_AddNumberToObject(o, "bos_token_id", bos);
	free(tmp.piece);
	cJSON_AddStringToObject(o, "tokenizer", vk ? vk : "sentencepiece");
	cJSON_AddStringToObject(o, "model_family", "transformer-xl");
	cJSON_AddStringToObject(o, "model", srv.model_name);
	res = send_json(c, 200, cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	return res;
}

/* The page at / (server/page.html): no key needed, its API calls ask
 * for one; nothing but its own inline code and this server's API. */
static enum MHD_Result
page_route(struct MHD_Connection *c)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		page_html_len, (void *)page_html, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ok;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
	MHD_add_response_header(r, "Content-Security-Policy", page_csp);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	ok = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ok;
}

/* What a request without sampling fields gets (txlgen's settings with
 * the model's recommended ones), for the page's form: llama-server's
 * name, fields named as a request's. */
static enum MHD_Result
props_route(struct MHD_Connection *c)
{
	const struct txlgen_options *o = sched_engine()->opts;
	cJSON *root = cJSON_CreateObject(), *d = cJSON_CreateObject();
	enum MHD_Result res;

	cJSON_AddNumberToObject(d, "max_tokens",
				o->n_predict >= 0 ? o->n_predict : 16);
	cJSON_AddNumberToObject(d, "temperature", o->temp);
	cJSON_AddNumberToObject(d, "top_k", o->top_k);
	cJSON_AddNumberToObject(d, "top_p", o->top_p);
	cJSON_AddNumberToObject(d, "min_p", o->min_p);
	cJSON_AddNumberToObject(d, "repeat_penalty", o->repeat_penalty);
	cJSON_AddNumberToObject(d, "repeat_last_n", o->repeat_last_n);
	if (o->seed >= 0)
		cJSON_AddNumberToObject(d, "seed", (double)o->seed);
	else
		cJSON_AddNullToObject(d, "seed");
	cJSON_AddItemToObject(root, "default_generation_settings", d);
	cJSON_AddStringToObject(root, "model", srv.model_name);
	cJSON_AddNumberToObject(root, "total_slots", srv.parallel);
	cJSON_AddNumberToObject(root, "max_tokens", srv.max_tokens);
	res = send_json(c, 200, cJSON_PrintUnformatted(root));
	cJSON_Delete(root);
	return res;
}

static enum MHD_Result
models_route(struct MHD_Connection *c)
{
	cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray(),
	      *m = cJSON_CreateObject();
	enum MHD_Result res;

	cJSON_AddStringToObject(o, "object", "list");
	cJSON_AddStringToObject(m, "id", srv.model_name);
	cJSON_AddStringToObject(m, "object", "model");
	cJSON_AddNumberToObject(m, "created", 0);
	cJSON_AddStringToObject(m, "owned_by", "txlgen");
	cJSON_AddItemToArray(data, m);
	cJSON_AddItemToObject(o, "data", data);
	res = send_json(c, 200, cJSON_PrintUnformatted(o));
	cJSON_Delete(o);
	return res;
}

static enum MHD_Result
metrics_route(struct MHD_Connection *c)
{
	struct sched_stats st;
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	if (!f)
		die_oom();
	sched_stats(&st);
#define COUNTER(name, help, v) fprintf(f, "# HELP txlgen_" name " " help \
	"\n# TYPE txlgen_" name " counter\ntxlgen_" name " %llu\n", \
	(unsigned long long)(v))
#define GAUGE(name, help, fmt, v) fprintf(f, "# HELP txlgen_" name " " help \
	"\n# TYPE txlgen_" name " gauge\ntxlgen_" name " " fmt "\n", v)
	COUNTER("requests_total", "Completion requests taken.", st.requests);
	COUNTER("prompt_tokens_total", "Prompt tokens read.", st.tokens_in);
	COUNTER("generated_tokens_total", "Tokens generated.", st.tokens_out);
	COUNTER("request_errors_total", "Requests that failed while running.",
		st.errors);
	COUNTER("cancelled_total", "Choices cut short by their client.",
		st.cancelled);
	GAUGE("queue_length", "Choices waiting for a slot.", "%d", st.queued);
	GAUGE("requests_running", "Requests in the slots.", "%d", st.running);
	GAUGE("sessions", "Named sessions in memory.", "%d", st.sessions);
	GAUGE("connections", "Open connections.", "%d",
	      atomic_load(&n_conns));
	GAUGE("tokens_per_second", "Generated tokens per second, recently.",
	      "%.3f", st.tokens_per_s);
	fprintf(f, "# HELP txlgen_http_responses_total Answers by HTTP status "
		"(errors only).\n# TYPE txlgen_http_responses_total counter\n");
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		fprintf(f, "txlgen_http_responses_total{code=\"%u\"} %lu\n",
			counted[i], atomic_load(&n_answers[i]));
#undef COUNTER
#undef GAUGE
	fclose(f);
	return send_body(c, 200, "text/plain; version=0.0.4", s);
}

static enum MHD_Result
route(struct MHD_Connection *c, const char *method, const char *url,
      struct req *q)
{
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");

	if (post && !strcmp(url, "/v1/completions"))
		return completions(c, q);
	if (post && (!strcmp(url, "/v1/chat/completions") ||
		     !strcmp(url, "/chat/completions")))
		return send_error(c, 400, "this server runs a Transformer-XL "
				  "language model, which continues text and "
				  "has no chat template: use /v1/completions "
				  "with the text to continue as 'prompt'");
	if (post && !strcmp(url, "/tokenize"))
		return tokenize_route(c, q);
	if (post && !strcmp(url, "/detokenize"))
		return detokenize_route(c, q);
	if (get && !strcmp(url, "/tokenizer_info"))
		return tokenizer_info(c);
	if (get && !strcmp(url, "/v1/models"))
		return models_route(c);
	if (get && !strcmp(url, "/props"))
		return props_route(c);
	if (get && !strcmp(url, "/metrics"))
		return metrics_route(c);
	if (get && !strcmp(url, "/sessions")) {
		char *s;

		sched_lock();
		s = sessions_list_json();
		sched_unlock();
		return send_json(c, 200, s);
	}
	if (!strcmp(method, "DELETE") && !strncmp(url, "/sessions/", 10)) {
		const char *id = url + 10;
		int st;

		if (!session_id_valid(id))
			return send_error(c, 400, "a session id is 1 to 64 "
					  "letters, digits, '-' and '_'");
		sched_lock();
		st = session_delete(id);
		sched_unlock();
		if (st == 409)
			return send_error(c, 409, "the session is in use");
		if (st == 404)
			return send_error(c, 404, "no such session");
		return send_json(c, 200, xstrdup("{\"deleted\":true}"));
	}
	return send_error(c, 404, "no such endpoint");
}

/* The doorman's record of connection @p c. */
static struct conn *
conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* Connections open and not shut for room or a deadline. */
static int
live_connections(void)
{
	int n = 0;

	pthread_mutex_lock(&D.mu);
	for (int i = 0; i < D.n; i++)
		n += D.v[i]->state == C_MHD && !D.v[i]->shut;
	pthread_mutex_unlock(&D.mu);
	return n;
}

static enum MHD_Result
count_header(void *cls, enum MHD_ValueKind kind, const char *key,
	     const char *value)
{
	(void)kind;
	(void)value;
	if (!strcasecmp(key, "Content-Length"))
		(*(int *)cls)++;
	return MHD_YES;
}

/* The checks that need only the headers, before a body is read: the
 * path, the framing, the connection limit, the model, the key, the
 * body's announced size.  MHD_YES without an answer: read the body. */
static enum MHD_Result
first_call(struct MHD_Connection *c, const char *url, const char *method,
	   const char *version, struct req *q)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     "Content-Length");
	const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     "Transfer-Encoding");
	int n_cl = 0;

	q->http11 = !strcmp(version, MHD_HTTP_VERSION_1_1);
	snprintf(q->method, sizeof(q->method), "%s", method);
	/* a NUL byte cuts the path where libmicrohttpd hands it over:
	 * the raw path was longer than what arrives */
	if (q->raw_len && version > url &&
	    q->raw_len < (size_t)(version - url - 1))
		q->bad_url = true;
	if (q->bad_url)
		return send_error(c, 400, "the URL holds a NUL byte");
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &n_cl);
	if (n_cl > 1 || (n_cl && te))
		return send_error(c, 400, "the request has more than one "
				  "Content-Length, or one and a "
				  "Transfer-Encoding");
	if (te && strcasecmp(te, "chunked"))
		return send_error(c, 400, "the only Transfer-Encoding taken "
				  "is chunked");
	if (!strcmp(url, "/health")) {
		if (!atomic_load(&ready))
			return send_json(c, 503, xstrdup(
				"{\"status\":\"loading model\"}"));
		return send_json(c, 200, xstrdup("{\"status\":\"ok\"}"));
	}
	if (live_connections() > srv.max_connections)
		return send_error(c, 503, "too many connections; try again "
				  "later");
	/* the page, also while the model loads (it waits for /health) */
	if (!strcmp(url, "/") && (!strcmp(method, "GET") ||
				  !strcmp(method, "HEAD")))
		return page_route(c);
	if (!strcmp(method, "OPTIONS") && srv.cors_origin) {
		struct MHD_Response *r = MHD_create_response_from_buffer(
			0, NULL, MHD_RESPMEM_PERSISTENT);
		enum MHD_Result ok;

		common_headers(r);
		MHD_add_response_header(r, "Access-Control-Allow-Methods",
					"GET, POST, DELETE, OPTIONS");
		MHD_add_response_header(r, "Access-Control-Allow-Headers",
					"Authorization, Content-Type");
		note_status(c, 204);
		ok = MHD_queue_response(c, 204, r);
		MHD_destroy_response(r);
		return ok;
	}
	if (!atomic_load(&ready))
		return send_error(c, 503, "the model is loading");
	if (!authorized(c))
		return send_error(c, 401, "invalid or missing API key");
	if (cl && strtoull(cl, NULL, 10) > srv.max_body)
		return send_error(c, 413, "the request body is larger than "
				  "this server takes");
	return MHD_YES;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
	   const char *method, const char *version, const char *data,
	   size_t *size, void **ptr)
{
	struct req *q = *ptr;
	struct conn *k;

	(void)cls;
	if (!q) {
		q = xrealloc(NULL, sizeof(*q));
		memset(q, 0, sizeof(*q));
		*ptr = q;
	}
	if (!q->started) {
		q->started = true;
		return first_call(c, url, method, version, q);
	}
	if (*size) {
		if (q->body.len + *size > srv.max_body) {
			/* libmicrohttpd answers only once a body is all
			 * read: the answer goes out now, on the socket */
			const union MHD_ConnectionInfo *ci =
				MHD_get_connection_info(
					c, MHD_CONNECTION_INFO_CONNECTION_FD);

			if (ci) {
				note_status(c, 413);
				raw_answer(ci->connect_fd, 413,
					   "Content Too Large", "the request "
					   "body is larger than this server "
					   "takes");
				shutdown(ci->connect_fd, SHUT_WR);
			}
			return MHD_NO;
		}
		strbuf_add(&q->body, data, *size);
		*size = 0;
		return MHD_YES;
	}
	/* the request is all here: its deadline is met */
	if ((k = conn_of(c))) {
		pthread_mutex_lock(&D.mu);
		k->arriving = false;
		pthread_mutex_unlock(&D.mu);
	}
	return route(c, method, url, q);
}

/* The request line's path, before libmicrohttpd unescapes it (%00
 * becomes a NUL that cuts it): the request's state starts here. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct req *q = xrealloc(NULL, sizeof(*q));
	struct conn *k = conn_of(c);

	(void)cls;
	memset(q, 0, sizeof(*q));
	q->t0 = now_s();
	if (k)
		k->status = 0;
	if (uri) {
		const char *p = uri;

		q->raw_len = strlen(uri);
		q->path = strndup(uri, 512);
		while ((p = strchr(p, '%')))
			if (!strncmp(++p, "00", 2))
				q->bad_url = true;
	}
	return q;
}

/* The log line of request @p q, at its end (a stream's too). */
static void
log_request(struct MHD_Connection *c, const struct conn *k,
	    const struct req *q)
{
	const union MHD_ConnectionInfo *ci;
	long long in = -1, out = -1;
	unsigned status = k ? k->status : 0;

	if (!status && (ci = MHD_get_connection_info(
				c, MHD_CONNECTION_INFO_HTTP_STATUS)))
		status = ci->http_status;   /* libmicrohttpd's own answer */
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (q->job) {
		sched_lock();
		in = q->job->prompt_tokens;
		out = q->job->completion_tokens;
		sched_unlock();
	}
	reqlog_write(ci ? ci->client_addr : NULL,
		     q->method[0] ? q->method : NULL, q->path, status, in, out,
		     (now_s() - q->t0) * 1000);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **ptr,
	     enum MHD_RequestTerminationCode toe)
{
	struct req *q = *ptr;
	struct conn *k = conn_of(c);

	(void)cls;
	(void)toe;
	if (q)
		log_request(c, k, q);
	/* the next request on the connection has its own deadline */
	if (k) {
		pthread_mutex_lock(&D.mu);
		k->arriving = true;
		k->t0 = now_s();
		pthread_mutex_unlock(&D.mu);
	}
	if (!q)
		return;
	strbuf_free(&q->body);
	free(q->path);
	job_unref(q->job);
	free(q);
	*ptr = NULL;
}

/* ---- the doorman: accepts, refuses, keeps the deadlines ---- */

static void
conn_drop(int i)
{
	D.v[i] = D.v[--D.n];
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
	      enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			c, MHD_CONNECTION_INFO_CONNECTION_FD);

		atomic_fetch_add(&n_conns, 1);
		pthread_mutex_lock(&D.mu);
		for (int i = 0; ci && i < D.n; i++)
			if (D.v[i]->fd == ci->connect_fd &&
			    D.v[i]->state == C_MHD && !D.v[i]->bound) {
				D.v[i]->bound = true;
				*socket_context = D.v[i];
				break;
			}
		pthread_mutex_unlock(&D.mu);
		return;
	}
	atomic_fetch_sub(&n_conns, 1);
	/* before its socket closes: no other connection has its fd yet */
	pthread_mutex_lock(&D.mu);
	for (int i = 0; i < D.n; i++)
		if (D.v[i] == *socket_context) {
			free(D.v[i]);
			conn_drop(i);
			break;
		}
	*socket_context = NULL;
	pthread_mutex_unlock(&D.mu);
}

static bool
same_client(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
			((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return true;
}

/* A refused connection: its answer, then read (and dropped) until the
 * client closes or DRAIN_S pass, so that closing sends it no reset. */
static void
refuse(struct conn *k, unsigned status, const char *reason, const char *msg)
{
	raw_answer(k->fd, status, reason, msg);
	reqlog_write((const struct sockaddr *)&k->addr, NULL, NULL, status,
		     -1, -1, (now_s() - k->t0) * 1000);
	shutdown(k->fd, SHUT_WR);
	k->state = C_DRAIN;
	k->t0 = now_s();
}

/* Are the first bytes @p b (@p n) the start of a request line?  A
 * method is a token: up to the first space, none of a token's
 * forbidden bytes.  (Leading empty lines libmicrohttpd skips.) */
static bool
looks_like_http(const unsigned char *b, ssize_t n)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";

	for (ssize_t i = 0; i < n; i++) {
		if (b[i] == ' ')
			return i > 0;
		if ((b[i] == '\r' || b[i] == '\n') && i == 0)
			return true;
		if (!(b[i] >= '0' && b[i] <= '9') &&
		    !(b[i] >= 'A' && b[i] <= 'Z') &&
		    !(b[i] >= 'a' && b[i] <= 'z') &&
		    (!b[i] || !strchr(tchar, b[i])))
			return false;
	}
	return true;        /* a method so far: libmicrohttpd reads on */
}

static void
door_close(int i)
{
	close(D.v[i]->fd);
	free(D.v[i]);
	conn_drop(i);
}

/* Look at a new connection's first bytes; under D.mu. */
static void
door_look(int i)
{
	struct conn *k = D.v[i];
	unsigned char b[16];
	ssize_t n = recv(k->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		door_close(i);
		return;
	}
	if (!looks_like_http(b, n)) {
		refuse(k, 400, "Bad Request", "this is not an HTTP request");
		return;
	}
	k->state = C_MHD;
	/* libmicrohttpd closes the socket if it cannot take it; it only
	 * queues it here, its thread takes it (and our lock) later */
	if (MHD_add_connection(D.d, k->fd, (struct sockaddr *)&k->addr,
			       k->addr.ss_family == AF_INET6
			       ? sizeof(struct sockaddr_in6)
			       : sizeof(struct sockaddr_in)) != MHD_YES) {
		free(k);
		conn_drop(i);
	}
}

static void
drain(int i)
{
	char buf[4096];
	ssize_t n = recv(D.v[i]->fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		door_close(i);
}

/* The oldest connection still sending its request, for more than a
 * second, is shut to make room; false if there is none. */
static bool
make_room(double now)
{
	struct conn *old = NULL;

	for (int i = 0; i < D.n; i++) {
		struct conn *k = D.v[i];

		if (k->state != C_DRAIN && k->arriving && !k->shut &&
		    now - k->t0 > 1 && (!old || k->t0 < old->t0))
			old = k;
	}
	if (!old)
		return false;
	old->shut = true;
	shutdown(old->fd, SHUT_RDWR);
	return true;
}

static void
door_accept(void)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(D.listen_fd, (struct sockaddr *)&ss, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *k;
		int open = 0, mine = 0;
		double now = now_s();

		if (fd < 0) {
			/* EMFILE and the like: the next tick tries again */
			return;
		}
		k = xrealloc(NULL, sizeof(*k));
		*k = (struct conn){ .fd = fd, .state = C_DOOR, .addr = ss,
				    .t0 = now, .arriving = true };
		/* a connection libmicrohttpd closed before it took it (no
		 * notice comes then) left its fd to this one */
		for (int i = D.n - 1; i >= 0; i--)
			if (D.v[i]->fd == fd && D.v[i]->state == C_MHD &&
			    !D.v[i]->bound) {
				free(D.v[i]);
				conn_drop(i);
			}
		for (int i = 0; i < D.n; i++) {
			struct conn *o = D.v[i];

			if (o->state == C_DRAIN || o->shut)
				continue;
			open++;
			if (o->arriving && same_client(&o->addr, &ss))
				mine++;
		}
		if (D.n == D.cap) {
			D.cap = D.cap ? 2 * D.cap : 256;
			D.v = xrealloc(D.v, (size_t)D.cap * sizeof(*D.v));
		}
		D.v[D.n++] = k;
		if (mine >= srv.max_per_client) {
			refuse(k, 503, "Service Unavailable", "too many "
			       "connections from your address are still "
			       "sending their requests; try again later");
			continue;
		}
		/* under --max-connections with this one, if the old ones
		 * still sending their requests make room */
		while (open >= srv.max_connections && make_room(now))
			open--;
		if (open >= srv.max_connections + HARD_EXTRA)
			refuse(k, 503, "Service Unavailable", "too many "
			       "connections; try again later");
	}
}

/* Requests past their deadline: shut (libmicrohttpd's) or closed. */
static void
door_deadlines(double now)
{
	for (int i = D.n - 1; i >= 0; i--) {
		struct conn *k = D.v[i];

		if (k->state == C_DRAIN && now - k->t0 > DRAIN_S)
			door_close(i);
		else if (k->state == C_DOOR &&
			 now - k->t0 > srv.request_timeout_s)
			door_close(i);
		else if (k->state == C_MHD && k->arriving && !k->shut &&
			 now - k->t0 > srv.request_timeout_s) {
			k->shut = true;
			shutdown(k->fd, SHUT_RDWR);
		}
	}
}

static void *
doorman(void *arg)
{
	struct pollfd *p = NULL;
	struct conn **who = NULL;
	int cap = 0;

	(void)arg;
	while (!atomic_load(&D.stop)) {
		int n = 0, m;

		pthread_mutex_lock(&D.mu);
		if (cap < D.n + 2) {
			cap = D.n + 64;
			p = xrealloc(p, (size_t)cap * sizeof(*p));
			who = xrealloc(who, (size_t)cap * sizeof(*who));
		}
		p[n++] = (struct pollfd){ .fd = D.wake[0], .events = POLLIN };
		if (D.listen_fd >= 0)
			p[n++] = (struct pollfd){ .fd = D.listen_fd,
						  .events = POLLIN };
		m = n;
		for (int i = 0; i < D.n; i++)
			if (D.v[i]->state != C_MHD) {
				who[n] = D.v[i];
				p[n++] = (struct pollfd){ .fd = D.v[i]->fd,
							  .events = POLLIN };
			}
		pthread_mutex_unlock(&D.mu);
		if (poll(p, (nfds_t)n, TICK_MS) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			char b[16];

			if (read(D.wake[0], b, sizeof(b)) < 0)
				(void)0;
		}
		pthread_mutex_lock(&D.mu);
		/* only this thread drops the connections it polled */
		for (int j = m; j < n; j++) {
			if (!p[j].revents)
				continue;
			for (int i = 0; i < D.n; i++)
				if (D.v[i] == who[j]) {
					if (who[j]->state == C_DOOR)
						door_look(i);
					else if (who[j]->state == C_DRAIN)
						drain(i);
					break;
				}
		}
		if (D.listen_fd >= 0 && m > 1 && p[1].revents)
			door_accept();
		door_deadlines(now_s());
		pthread_mutex_unlock(&D.mu);
	}
	free(p);
	free(who);
	return NULL;
}

/* ---- libmicrohttpd's own messages, as the server's ---- */

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static double t_window;
	static int n_window;
	static unsigned long left_out;
	char line[256];
	size_t n;
	double now = now_s();

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] < 32)
			line[i] = ' ';
	pthread_mutex_lock(&mu);
	if (now - t_window >= 1) {
		if (left_out)
			fprintf(stderr, "txlgen-server: (%lu more messages of "
				"libmicrohttpd left out)\n", left_out);
		t_window = now;
		n_window = 0;
		left_out = 0;
	}
	if (n_window++ < LOG_PER_S)
		fprintf(stderr, "txlgen-server: http: %s\n", line);
	else
		left_out++;
	pthread_mutex_unlock(&mu);
}

/* ---- start and stop ---- */

int
http_listen(const struct addrinfo *ai, struct sockaddr_storage *bound)
{
	int err = EADDRNOTAVAIL;

	for (; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype |
				SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
		socklen_t len = sizeof(*bound);

		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6) {
			/* "::" takes IPv4 too (dual stack); any other IPv6
			 * address only itself */
			int v6only = !IN6_IS_ADDR_UNSPECIFIED(
				&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);

			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
				   sizeof(v6only));
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, SOMAXCONN) == 0 &&
		    getsockname(fd, (struct sockaddr *)bound, &len) == 0)
			return fd;
		err = errno;
		close(fd);
	}
	errno = err;
	return -1;
}

struct MHD_Daemon *
http_start(int listen_fd)
{
	const char *w = getenv("TXLGEN_SERVER_WAIT_MS");

	if (w && *w)
		wait_ms = atoi(w);
	D.listen_fd = listen_fd;
	if (pipe2(D.wake, O_CLOEXEC | O_NONBLOCK) != 0)
		return NULL;
	D.d = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
		MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC |
		MHD_USE_NO_LISTEN_SOCKET,
		0, NULL, NULL, on_request, NULL,
		/* first, or its start-up messages go to stderr raw */
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		/* the doorman keeps the limits; room for the connections
		 * it shut that have yet to close */
		MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)(srv.max_connections + 2 * HARD_EXTRA + 64),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv.timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
		MHD_OPTION_END);
	if (!D.d)
		return NULL;
	if (pthread_create(&D.thread, NULL, doorman, NULL) != 0) {
		MHD_stop_daemon(D.d);
		D.d = NULL;
		return NULL;
	}
	D.running = true;
	return D.d;
}

void
http_quiesce(void)
{
	pthread_mutex_lock(&D.mu);
	if (D.listen_fd >= 0)
		close(D.listen_fd);
	D.listen_fd = -1;
	pthread_mutex_unlock(&D.mu);
	if (write(D.wake[1], "q", 1) < 0)
		(void)0;
}

void
http_stop(struct MHD_Daemon *d)
{
	if (D.running) {
		atomic_store(&D.stop, true);
		if (write(D.wake[1], "s", 1) < 0)
			(void)0;
		pthread_join(D.thread, NULL);
		D.running = false;
	}
	/* the connections still at the door are ours to close */
	pthread_mutex_lock(&D.mu);
	for (int i = D.n - 1; i >= 0; i--)
		if (D.v[i]->state != C_MHD)
			door_close(i);
	pthread_mutex_unlock(&D.mu);
	if (d)
		MHD_stop_daemon(d);
	pthread_mutex_lock(&D.mu);
	for (int i = D.n - 1; i >= 0; i--) {
		free(D.v[i]);
		conn_drop(i);
	}
	free(D.v);
	D.v = NULL;
	D.cap = 0;
	pthread_mutex_unlock(&D.mu);
	if (D.listen_fd >= 0)
		close(D.listen_fd);
	D.listen_fd = -1;
}
