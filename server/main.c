/* SPDX-License-Identifier: MIT */
/*
 * main.c - txlgen-server: a Transformer-XL model behind the completions
 * API.  It listens first (so that /health says it is loading), loads the
 * model as txlgen does (its recommended settings become the defaults of
 * requests), starts the scheduler, then waits for a signal: SIGTERM or
 * SIGINT stop it (exit 0), SIGHUP too (exit 129, as txlgen), after the
 * running requests end or --grace seconds pass, with every session
 * written.
 *
 * Exit codes: 0 stopped by SIGTERM or SIGINT, 1 a runtime error (cannot
 * listen, cannot start), 2 a bad option, 3 a bad model, config or key
 * file, 129 SIGHUP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <microhttpd.h>

#include "cli.h"
#include "errors.h"
#include "http.h"
#include "models.h"
#include "srv.h"

struct srv_opts srv = {
	.host = "127.0.0.1",
	.port = 8080,
	.parallel = 4,
	.max_sessions = 64,
	.max_body = 1 << 20,
	.max_prompt = 1 << 17,
	.max_tokens = 1 << 16,
	.max_n = 16,
	.max_connections = 128,
	.max_queue = 256,
	.timeout_s = 60,
	.grace_s = 10,
};

/* Parse the command line into srv and @p o: the option table's rows of
 * txlgen-server (cmd/settings.c), as txlgen parses its own.  Returns an
 * exit code, or -1 to go on. */
static int
parse_args(int argc, char **argv, struct txlgen_options *o)
{
	bool done;
	int rc;

	settings_prog = PROG_SERVER;
	o->server = &srv;
	/* the strings of the table are the heap's: an option replaces one */
	srv.host = xstrdup(srv.host);
	rc = options_parse(o, argc, argv, &done);
	return done ? rc : -1;
}

static bool
loopback(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr)
			>> 24) == 127;
	if (a->sa_family == AF_INET6) {
		const struct in6_addr *x =
			&((const struct sockaddr_in6 *)a)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(x) ||
			(IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
	}
	return false;
}

/* The key file's first line, without its newline; NULL (reported) if it
 * cannot be read or is empty. */
static char *
read_key(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f) {
		errmsg("--api-key-file %s: %s", path, strerror(errno));
		return NULL;
	}
	n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	if (n <= 0) {
		errmsg("--api-key-file %s: the first line is empty", path);
		free(line);
		return NULL;
	}
	return line;
}

int
main(int argc, char **argv)
{
	struct txlgen_options o;
	struct engine e = { 0 };
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai = NULL;
	struct MHD_Daemon *d;
	char port[16], *model_path = NULL, *key = NULL;
	sigset_t set;
	int rc, sig = 0, bound = 0;

	err_prog = "txlgen-server";
	options_init(&o);
	if ((rc = parse_args(argc, argv, &o)) >= 0)
		goto out;
	snprintf(port, sizeof(port), "%d", srv.port);
	if ((rc = getaddrinfo(srv.host, port, &hints, &ai)) != 0) {
		usage_error("--host %s: %s", srv.host, gai_strerror(rc));
		ai = NULL;
		rc = EXIT_USAGE;
		goto out;
	}
	rc = EXIT_BADMODEL;
	if (srv.api_key_file && !(key = read_key(srv.api_key_file)))
		goto out;
	rc = EXIT_USAGE;
	if (!key && !srv.no_api_key && !loopback(ai->ai_addr)) {
		usage_error("--host %s is not a loopback address: give "
			    "--api-key-file, or --no-api-key to serve "
			    "anyone who can reach it", srv.host);
		goto out;
	}
	if (srv.session_dir) {
		struct stat sb;

		if (stat(srv.session_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
			usage_error("--session-dir %s: not a directory",
				    srv.session_dir);
			goto out;
		}
	}
	http_set_key(key);

	/* every thread started from here on leaves the stopping signals to
	 * this one's sigwait() */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	d = http_start(ai->ai_addr, &bound);
	freeaddrinfo(ai);
	ai = NULL;
	if (!d) {
		errmsg("cannot listen on %s port %d: %s", srv.host, srv.port,
		       strerror(errno));
		rc = EXIT_RUNTIME;
		goto out;
	}
	fprintf(stderr, "txlgen-server: listening on http://%s%s%s:%d/\n",
		strchr(srv.host, ':') ? "[" : "", srv.host,
		strchr(srv.host, ':') ? "]" : "", bound);

	model_path = o.model ? model_find(o.model, "--model")
		: model_find(DEFAULT_MODEL_NAME, NULL);
	rc = EXIT_BADMODEL;
	if (!model_path ||
	    (rc = engine_load_model(&e, &o, model_path)) != EXIT_OK) {
		MHD_stop_daemon(d);
		engine_close(&e);
		goto out;
	}
	{
		const char *slash = strrchr(model_path, '/');
		const char *base = slash ? slash + 1 : model_path;
		size_t n = strlen(base);

		if (n > 4 && !strcmp(base + n - 4, ".bin"))
			n -= 4;
		snprintf(srv.model_name, sizeof(srv.model_name), "%.*s",
			 (int)n, base);
	}
	if ((rc = engine_check_compute(&e)) != EXIT_OK) {
		MHD_stop_daemon(d);
		engine_close(&e);
		goto out;
	}
	if (!sched_start(&e)) {
		MHD_stop_daemon(d);
		sched_stop(0);
		engine_close(&e);
		rc = EXIT_RUNTIME;
		goto out;
	}
	http_set_ready();
	fprintf(stderr, "txlgen-server: ready: %s, %d parallel\n",
		model_path, srv.parallel);

	sigwait(&set, &sig);
	fprintf(stderr, "txlgen-server: %s: finishing the running requests "
		"(at most %d s)\n", strsignal(sig), srv.grace_s);
	MHD_quiesce_daemon(d);
	sched_stop(srv.grace_s);
	MHD_stop_daemon(d);
	engine_close(&e);
	fprintf(stderr, "txlgen-server: stopped\n");
	rc = sig == SIGHUP ? EXIT_HANGUP : EXIT_OK;
out:
	if (ai)
		freeaddrinfo(ai);
	options_free(&o);
	free(model_path);
	free(key);
	return rc;
}
