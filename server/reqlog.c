/* SPDX-License-Identifier: MIT */
/*
 * reqlog.c - the request log: one line on stderr per request answered
 * (or given up), once it ends (a stream's at its end): the time, the
 * client's address, method, path, status, prompt and completion tokens,
 * and its duration.  As text (a line of the server's, its fields split
 * by spaces) or as one JSON object a line (--log-format json); none
 * with --no-log-requests.  One fprintf() a line: stdio's lock keeps the
 * threads' lines whole.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "errors.h"
#include "srv.h"

/* @p s (NULL: "-") with every byte that is not printable ASCII, a space,
 * '"' or '\\' written \xHH: a field of one word, whatever the client
 * sent; at most @p size - 1 bytes, cut at a whole escape. */
static void
clean(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	if (!s || !*s)
		s = "-";
	for (; *s && n + 5 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c > ' ' && c < 0x7f && c != '"' && c != '\\')
			buf[n++] = (char)c;
		else
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
	}
	buf[n] = 0;
}

void
reqlog_write(const struct sockaddr *client, const char *method,
	     const char *path, unsigned status, long long in, long long out,
	     double ms)
{
	char when[40], addr[NI_MAXHOST] = "-", m[64], p[1024], st[12] = "-",
	     tin[24] = "-", tout[24] = "-";
	struct timespec ts;
	struct tm tm;

	if (!srv.log_requests)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ",
		 ts.tv_nsec / 1000000);
	if (client && getnameinfo(client, client->sa_family == AF_INET6 ?
				  sizeof(struct sockaddr_in6) :
				  sizeof(struct sockaddr_in), addr,
				  sizeof(addr), NULL, 0, NI_NUMERICHOST))
		strcpy(addr, "-");
	clean(method, m, sizeof(m));
	clean(path, p, sizeof(p));
	ms = (double)(long long)(ms * 10 + 0.5) / 10;
	if (srv.log_format == LOG_JSON) {
		cJSON *o = cJSON_CreateObject();
		char *s;

		cJSON_AddStringToObject(o, "time", when);
		cJSON_AddStringToObject(o, "client", addr);
		cJSON_AddStringToObject(o, "method", m);
		cJSON_AddStringToObject(o, "path", p);
#define NUM_OR_NULL(key, ok, v) (ok ? (void)cJSON_AddNumberToObject(o, key, \
	(double)(v)) : (void)cJSON_AddNullToObject(o, key))
		NUM_OR_NULL("status", status, status);
		NUM_OR_NULL("prompt_tokens", in >= 0, in);
		NUM_OR_NULL("completion_tokens", out >= 0, out);
#undef NUM_OR_NULL
		cJSON_AddNumberToObject(o, "ms", ms);
		if (!(s = cJSON_PrintUnformatted(o)))
			die_oom();
		fprintf(stderr, "%s\n", s);
		cJSON_free(s);
		cJSON_Delete(o);
		return;
	}
	if (status)
		snprintf(st, sizeof(st), "%u", status);
	if (in >= 0)
		snprintf(tin, sizeof(tin), "%lld", in);
	if (out >= 0)
		snprintf(tout, sizeof(tout), "%lld", out);
	fprintf(stderr, "%s: %s %s %s %s %s %s %s %.1fms\n", err_prog, when,
		addr, m, p, st, tin, tout, ms);
}
