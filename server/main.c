/* SPDX-License-Identifier: MIT */
/*
 * main.c - txlgen-server: a Transformer-XL model behind the completions
 * API.  It finds the model, listens (so that /health says it is
 * loading), loads the model as txlgen does (its recommended settings
 * become the defaults of requests), starts the scheduler, then waits for a signal: SIGTERM or
 * SIGINT stop it (exit 0), SIGHUP too (exit 129, as txlgen), after the
 * running requests end or --grace seconds pass, with every session
 * written.  The signals' handlers only note the signal (whichever
 * thread, of this program's or of a library's, takes it): the first
 * starts the stop, later ones are logged.  A signal while the model
 * loads stops the server once it is read.
 *
 * Exit codes: 0 stopped by SIGTERM or SIGINT, 1 a runtime error (cannot
 * listen, cannot start), 2 a bad option, 3 a bad model, config or key
 * file, 129 SIGHUP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <unistd.h>
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
	.max_logprob_rows = 1 << 22,
	.max_connections = 128,
	.max_queue = 256,
	.timeout_s = 60,
	.request_timeout_s = 30,
	.max_per_client = 32,
	.grace_s = 10,
	.log_requests = true,
	.log_format = LOG_TEXT,
};

/* Parse the command line into srv and @p o: the option table's rows of
 * txlgen-server (core/settings.c), as txlgen parses its own.  Returns an
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
	struct stat sb;
	int err;

	if (!f) {
		errmsg("--api-key-file %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
		errmsg("--api-key-file %s: is a directory", path);
		fclose(f);
		return NULL;
	}
	errno = 0;
	n = getline(&line, &cap, f);
	err = errno;
	if (n < 0 && ferror(f)) {
		errmsg("--api-key-file %s: %s", path, strerror(err));
		fclose(f);
		free(line);
		return NULL;
	}
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	if (n <= 0) {
		errmsg("--api-key-file %s: the first line is empty", path);
		free(line);
		return NULL;
	}
	if (strlen(line) != (size_t)n) {
		errmsg("--api-key-file %s: the first line holds a NUL byte",
		       path);
		free(line);
		return NULL;
	}
	return line;
}

/* ---- signals: noted by a handler, acted on by main() ---- */

static int sig_pipe[2] = { -1, -1 };
static atomic_int first_sig;

static void
on_signal(int sig)
{
	int e = errno, none = 0;

	if (atomic_compare_exchange_strong(&first_sig, &none, sig)) {
		if (write(sig_pipe[1], "s", 1) < 0)
			(void)0;
	} else {
		/* write(2) alone: a handler may not use stdio */
		static const char term[] = "txlgen-server: Terminated: "
			"already stopping\n";
		static const char intr[] = "txlgen-server: Interrupt: "
			"already stopping\n";
		static const char hup[] = "txlgen-server: Hangup: "
			"already stopping\n";
		const char *m = sig == SIGINT ? intr : sig == SIGHUP ? hup
			: term;
		size_t n = sig == SIGINT ? sizeof(intr) : sig == SIGHUP
			? sizeof(hup) : sizeof(term);

		if (write(STDERR_FILENO, m, n - 1) < 0)
			(void)0;
	}
	errno = e;
}

/* Handlers for SIGTERM, SIGINT and SIGHUP: every thread may take them,
 * those a library started before main() too. */
static bool
catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal,
				.sa_flags = SA_RESTART }, old;
	sigset_t set;

	if (pipe2(sig_pipe, O_CLOEXEC) != 0)
		return false;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* an ignored SIGHUP (nohup) stays ignored, as txlgen's */
	if (sigaction(SIGHUP, NULL, &old) != 0 || old.sa_handler != SIG_IGN)
		sigaction(SIGHUP, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	return true;
}

/* The first signal, once one came.  poll(2), not a blocking read(2):
 * ThreadSanitizer runs a handler at once only in the calls it knows to
 * block, and defers it in any other; the flag is looked at each second
 * besides, in case a handler ran on a thread that then stayed asleep. */
static int
wait_signal(void)
{
	struct pollfd p = { .fd = sig_pipe[0], .events = POLLIN };

	while (atomic_load(&first_sig) == 0)
		poll(&p, 1, 1000);
	return atomic_load(&first_sig);
}

/* The URL of @p a, for the log. */
static void
url_of(const struct sockaddr_storage *a, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a;

		inet_ntop(AF_INET6, &x->sin6_addr, host, sizeof(host));
		port = ntohs(x->sin6_port);
		snprintf(buf, size, "http://[%s]:%d/", host, port);
		return;
	}
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a;

		inet_ntop(AF_INET, &x->sin_addr, host, sizeof(host));
		port = ntohs(x->sin_port);
	}
	snprintf(buf, size, "http://%s:%d/", host, port);
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
	struct sockaddr_storage bound;
	char port[16], url[INET6_ADDRSTRLEN + 32], *model_path = NULL,
	     *key = NULL;
	int rc, sig = 0, lfd;
	bool open_addr = false;

	err_prog = "txlgen-server";
	if (!catch_signals()) {
		errmsg("cannot set up the signals: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	options_init(&o);
	if ((rc = parse_args(argc, argv, &o)) >= 0)
		goto out;
	if (srv.cors_origin && strpbrk(srv.cors_origin, "\r\n")) {
		usage_error("--cors-origin: an origin holds no line break");
		rc = EXIT_USAGE;
		goto out;
	}
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
	for (const struct addrinfo *a = ai; a; a = a->ai_next)
		open_addr |= !loopback(a->ai_addr);
	if (!key && !srv.no_api_key && open_addr) {
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

	/* the model is found before anything listens: "loading" is the
	 * first line, a missing model the only one */
	model_path = o.model ? model_find(o.model, "--model")
		: model_find(DEFAULT_MODEL_NAME, NULL);
	if (!model_path) {
		rc = EXIT_BADMODEL;
		goto out;
	}
	fprintf(stderr, "txlgen-server: loading %s\n", model_path);

	/* every address the name has, until one takes */
	lfd = http_listen(ai, &bound);
	freeaddrinfo(ai);
	ai = NULL;
	if (lfd < 0) {
		errmsg("cannot listen on %s port %d: %s", srv.host, srv.port,
		       strerror(errno));
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (!(d = http_start(lfd))) {
		errmsg("cannot start the HTTP server: %s", strerror(errno));
		close(lfd);
		rc = EXIT_RUNTIME;
		goto out;
	}
	url_of(&bound, url, sizeof(url));
	fprintf(stderr, "txlgen-server: listening on %s\n", url);

	if ((rc = engine_load_model(&e, &o, model_path)) != EXIT_OK) {
		http_stop(d);
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
		http_stop(d);
		engine_close(&e);
		goto out;
	}
	if (atomic_load(&first_sig)) {
		/* stopped while loading: nothing runs, nothing to save */
		sig = atomic_load(&first_sig);
		fprintf(stderr, "txlgen-server: %s while loading: stopped\n",
			strsignal(sig));
		http_stop(d);
		engine_close(&e);
		rc = sig == SIGHUP ? EXIT_HANGUP : EXIT_OK;
		goto out;
	}
	if (!sched_start(&e)) {
		http_stop(d);
		sched_stop(0);
		engine_close(&e);
		rc = EXIT_RUNTIME;
		goto out;
	}
	http_set_ready();
	fprintf(stderr, "txlgen-server: ready: %s, %d parallel\n",
		model_path, srv.parallel);

	sig = wait_signal();
	fprintf(stderr, "txlgen-server: %s: finishing the running requests "
		"(at most %d s)\n", strsignal(sig), srv.grace_s);
	http_quiesce();
	sched_stop(srv.grace_s);
	http_stop(d);
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
