/* SPDX-License-Identifier: MIT */
/*
 * http.c - the HTTP side, on libmicrohttpd: a thread per connection
 * (a request waits for its job there, and a stream's events are written
 * from there), the routes, the API key, CORS, and every limit: body
 * size (413), connections and queue (503 with Retry-After), idle
 * connections (closed after --timeout).  A client that goes away
 * cancels its job: a waiting request looks at its socket, a stream
 * learns it from a failed write.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "engine-model.h"
#include "errors.h"
#include "http.h"
#include "progress.h"
#include "srv.h"
#include "utf8.h"

#define WAIT_MS 100          /* how often a waiting request looks up */
#define KEEPALIVE_S 5        /* a quiet stream's comment line */

static atomic_bool ready;    /* the model is loaded */
static atomic_int n_conns;
static char *api_key;        /* NULL: none */

/* One request's state across the handler's calls. */
struct req {
	struct strbuf body;
	bool too_large;
	bool with_usage;         /* stream_options.include_usage */
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
static enum MHD_Result
send_error(struct MHD_Connection *c, unsigned status, const char *msg)
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
	return send_json(c, status, s);
}

/* ---- waiting ---- */

/* Has the client closed its side?  (A request's body is read: whatever
 * comes now is the next request, so EOF is the only sign.) */
static bool
client_gone(struct MHD_Connection *c)
{
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
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return true;
	return recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Wait for job @p j to end; false if the client went away first (the
 * job is then cancelled). */
static bool
wait_job(struct MHD_Connection *c, struct job *j)
{
	unsigned seq = 0;
	bool gone = false;

	sched_lock();
	while (!sched_job_done(j)) {
		seq = sched_wait(j, seq, WAIT_MS);
		if (!sched_job_done(j) && client_gone(c)) {
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
		seq = sched_wait(j, seq, WAIT_MS);
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

static cJSON *
parse_body(struct req *q, struct MHD_Connection *c, enum MHD_Result *res)
{
	cJSON *j;

	strbuf_add(&q->body, "", 0);
	if (q->body.len != strlen(q->body.s)) {
		*res = send_error(c, 400, "the request body holds a NUL byte");
		return NULL;
	}
	j = cJSON_ParseWithLength(q->body.s, q->body.len);
	if (!j) {
		const char *at = cJSON_GetErrorPtr();
		char msg[128];

		snprintf(msg, sizeof(msg), "the request body is not JSON "
			 "(at byte %ld)", at ? (long)(at - q->body.s) : 0L);
		*res = send_error(c, 400, msg);
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
		res = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return res;
	}
	if (!wait_job(c, j)) {
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
		    it->valuedouble >= n_token) {
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

	if (!strcmp(url, "/health")) {
		if (!atomic_load(&ready))
			return send_json(c, 503, xstrdup(
				"{\"status\":\"loading model\"}"));
		return send_json(c, 200, xstrdup("{\"status\":\"ok\"}"));
	}
	if (!atomic_load(&ready))
		return send_error(c, 503, "the model is loading");
	if (!authorized(c))
		return send_error(c, 401, "invalid or missing API key");
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

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
	   const char *method, const char *version, const char *data,
	   size_t *size, void **ptr)
{
	struct req *q = *ptr;

	(void)cls;
	(void)version;
	if (!q) {
		const char *cl = MHD_lookup_connection_value(
			c, MHD_HEADER_KIND, "Content-Length");

		q = xrealloc(NULL, sizeof(*q));
		memset(q, 0, sizeof(*q));
		*ptr = q;
		if (atomic_load(&n_conns) > srv.max_connections)
			return send_error(c, 503, "too many connections; try "
					  "again later");
		if (cl && strtoull(cl, NULL, 10) > srv.max_body)
			return send_error(c, 413, "the request body is larger "
					  "than this server takes");
		return MHD_YES;
	}
	if (*size) {
		if (q->body.len + *size > srv.max_body)
			q->too_large = true;
		else
			strbuf_add(&q->body, data, *size);
		*size = 0;
		return MHD_YES;
	}
	if (q->too_large)
		return send_error(c, 413, "the request body is larger than "
				  "this server takes");
	if (!strcmp(method, "OPTIONS") && srv.cors_origin) {
		struct MHD_Response *r = MHD_create_response_from_buffer(
			0, NULL, MHD_RESPMEM_PERSISTENT);
		enum MHD_Result ok;

		common_headers(r);
		MHD_add_response_header(r, "Access-Control-Allow-Methods",
					"GET, POST, DELETE, OPTIONS");
		MHD_add_response_header(r, "Access-Control-Allow-Headers",
					"Authorization, Content-Type");
		ok = MHD_queue_response(c, 204, r);
		MHD_destroy_response(r);
		return ok;
	}
	return route(c, method, url, q);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **ptr,
	     enum MHD_RequestTerminationCode toe)
{
	struct req *q = *ptr;

	(void)cls;
	(void)c;
	(void)toe;
	if (!q)
		return;
	strbuf_free(&q->body);
	free(q);
	*ptr = NULL;
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
	      enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)c;
	(void)socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		atomic_fetch_add(&n_conns, 1);
	else
		atomic_fetch_sub(&n_conns, 1);
}

struct MHD_Daemon *
http_start(const struct sockaddr *addr, int *port)
{
	struct MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
		MHD_USE_ERROR_LOG | MHD_USE_ITC,
		0, NULL, NULL, on_request, NULL,
		MHD_OPTION_SOCK_ADDR, addr,
		/* the cap the handler answers 503 past, with room to say so */
		MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)(srv.max_connections + 16),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv.timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_END);
	const union MHD_DaemonInfo *di;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!d)
		return NULL;
	di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
	if (di && getsockname(di->listen_fd, (struct sockaddr *)&ss, &len) == 0)
		*port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	return d;
}
