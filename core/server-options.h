/* SPDX-License-Identifier: MIT */
/*
 * server-options.h - the fields of txlgen-server's own options: its rows
 * of the option table (settings.c, tagged PROG_SERVER) name them, and the
 * server (server/main.c) holds them.
 */
#ifndef TXLGEN_SERVER_OPTIONS_H
#define TXLGEN_SERVER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

struct srv_opts {
	const char *host;
	int port;
	int parallel;            /* completions stepped together */
	const char *api_key_file;
	bool no_api_key;         /* a non-loopback address without a key */
	bool lenient;            /* unknown request fields let be */
	const char *session_dir;
	int max_sessions;        /* sessions kept in memory */
	int max_session_bytes;   /* largest state file written; 0: any */
	int max_disk_sessions;   /* state files kept; 0: any number */
	size_t max_body;         /* bytes of a request body */
	int max_prompt;          /* tokens of a request's prompts */
	int max_tokens;          /* max_tokens of a request, at most */
	int max_n;               /* n of a request, at most */
	int max_logprob_rows;    /* logprobs entries a request may hold */
	int max_connections;
	int max_queue;           /* requests waiting for a slot */
	int timeout_s;           /* a connection idle this long is closed */
	int request_timeout_s;   /* a request must arrive whole in this */
	int max_per_client;      /* connections of one address sending */
	int grace_s;             /* SIGTERM: running requests' time to end */
	const char *cors_origin; /* NULL: no CORS headers */
	bool log_requests;       /* the request log (reqlog.c) */
	int log_format;          /* enum log_format */
	char model_name[256];    /* what /v1/models calls it */
};

/* --log-format's values (their names are settings.c's) */
enum log_format { LOG_TEXT, LOG_JSON };

#endif /* TXLGEN_SERVER_OPTIONS_H */
