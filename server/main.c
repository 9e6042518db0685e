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
 * listen, cannot start), 2 a bad option, 3 a bad model or key file, 129
 * SIGHUP.
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
	.grace_s = 10,
};

/* txlgen's settings a server takes as the defaults of its requests. */
static const char *const shared_settings[] = {
	"model", "n_predict", "stop", "ignore_eos", "temp", "top_k", "top_p",
	"min_p", "repeat_penalty", "repeat_last_n", "seed", "mem_len",
	"seg_len", "clamp_len", "same_length", "threads", "kv_type",
	"compute", "mmap", "mem_init", NULL,
};

static void
usage(void)
{
	printf("Usage: txlgen-server [OPTION]...\n"
"Serve a Transformer-XL model over HTTP: the completions API\n"
"(/v1/completions), sessions that keep their memory between requests,\n"
"many clients stepped together.\n"
"\n"
"  -m, --model MODEL         model file or name (as txlgen; default sotu)\n"
"      --host ADDR           address to listen on (default 127.0.0.1)\n"
"      --port N              port (default 8080; 0 = any free one)\n"
"      --parallel N          completions computed together (default 4)\n"
"      --api-key-file FILE   requests must bear the key on FILE's first\n"
"                            line (Authorization: Bearer KEY)\n"
"      --no-api-key          listen on a non-loopback address without one\n"
"      --session-dir DIR     keep sessions as state files in DIR\n"
"      --max-sessions N      sessions kept in memory (default 64)\n"
"      --max-body BYTES      largest request body (default 1048576)\n"
"      --max-prompt N        most prompt tokens a request (default 131072)\n"
"      --max-tokens N        most max_tokens a request (default 65536)\n"
"      --max-n N             most choices n a request (default 16)\n"
"      --max-logprob-rows N  most logprobs a request holds: tokens times n\n"
"                            times 1 + logprobs (default 4194304)\n"
"      --max-connections N   open connections (default 128)\n"
"      --max-queue N         requests waiting for a slot (default 256)\n"
"      --timeout S           close a connection idle S seconds (default 60)\n"
"      --grace S             on SIGTERM, S seconds for running requests\n"
"                            to end (default 10)\n"
"      --cors-origin ORIGIN  allow browsers of ORIGIN (default: no CORS)\n"
"  -t, --threads N           compute threads (default: one per CPU)\n"
"  -h, --help                this help\n"
"      --version             the version\n"
"\n"
"txlgen's settings set the defaults of requests: --temp, --top-k,\n"
"--top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed,\n"
"--n-predict (max_tokens), --stop, --ignore-eos, --mem-len, --seg-len,\n"
"--clamp-len, --same-length, --mem-init, --kv-type, --compute, --mmap.\n"
"See txlgen-server(1).\n");
}

static bool
to_int(const char *opt, const char *v, long lo, long hi, long *out)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi) {
		usage_error("%s: '%s' is not a whole number from %ld to %ld",
			    opt, v, lo, hi);
		return false;
	}
	*out = x;
	return true;
}

static bool
is_shared(const struct setting *s)
{
	for (int i = 0; shared_settings[i]; i++)
		if (!strcmp(s->key, shared_settings[i]))
			return true;
	return false;
}

/* Parse the command line into srv and @p o.  Returns an exit code, or -1
 * to go on. */
static int
parse_args(int argc, char **argv, struct txlgen_options *o)
{
	static const struct {
		const char *name;
		void *field;
		long lo, hi;
	} ints[] = {
		{ "port", &srv.port, 0, 65535 },
		{ "parallel", &srv.parallel, 1, 256 },
		{ "max-sessions", &srv.max_sessions, 0, 1 << 20 },
		{ "max-prompt", &srv.max_prompt, 1, INT_MAX },
		{ "max-tokens", &srv.max_tokens, 0, INT_MAX },
		{ "max-n", &srv.max_n, 1, 1024 },
		{ "max-logprob-rows", &srv.max_logprob_rows, 0, INT_MAX },
		{ "max-connections", &srv.max_connections, 1, 65536 },
		{ "max-queue", &srv.max_queue, 1, 1 << 20 },
		{ "timeout", &srv.timeout_s, 1, 86400 },
		{ "grace", &srv.grace_s, 0, 86400 },
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *val = NULL;
		char buf[64];
		const struct setting *s;
		char err[256];
		bool neg = false, found = false;
		long x;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return EXIT_OK;
		}
		if (!strcmp(a, "--version")) {
			printf("txlgen-server %s (libtxl %s)\n", TXLGEN_VERSION,
			       txl_version());
			return EXIT_OK;
		}
		if (!strcmp(a, "-m"))
			a = "--model";
		else if (!strcmp(a, "-t"))
			a = "--threads";
		if (strncmp(a, "--", 2) != 0 || !a[2]) {
			usage_error("unexpected argument '%s'", a);
			return EXIT_USAGE;
		}
		name = a + 2;
		if (strchr(name, '=')) {
			size_t n = (size_t)(strchr(name, '=') - name);

			if (n >= sizeof(buf))
				n = sizeof(buf) - 1;
			memcpy(buf, name, n);
			buf[n] = 0;
			val = strchr(name, '=') + 1;
			name = buf;
		}
#define NEED_VAL() do { \
		if (!val && i + 1 >= argc) { \
			usage_error("--%s needs a value", name); \
			return EXIT_USAGE; \
		} \
		if (!val) \
			val = argv[++i]; \
	} while (0)
		for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
			if (strcmp(name, ints[k].name))
				continue;
			NEED_VAL();
			if (!to_int(a, val, ints[k].lo, ints[k].hi, &x))
				return EXIT_USAGE;
			*(int *)ints[k].field = (int)x;
			found = true;
		}
		if (found)
			continue;
		if (!strcmp(name, "max-body")) {
			NEED_VAL();
			if (!to_int(a, val, 64, 1L << 30, &x))
				return EXIT_USAGE;
			srv.max_body = (size_t)x;
			continue;
		}
		if (!strcmp(name, "host") || !strcmp(name, "api-key-file") ||
		    !strcmp(name, "session-dir") ||
		    !strcmp(name, "cors-origin")) {
			NEED_VAL();
			if (!strcmp(name, "host"))
				srv.host = val;
			else if (!strcmp(name, "api-key-file"))
				srv.api_key_file = val;
			else if (!strcmp(name, "session-dir"))
				srv.session_dir = val;
			else
				srv.cors_origin = val;
			continue;
		}
		if (!strcmp(name, "no-api-key")) {
			srv.no_api_key = true;
			continue;
		}
		if (!strncmp(name, "no-", 3)) {
			neg = true;
			name += 3;
		}
		s = setting_find(name);
		if (!s || !is_shared(s)) {
			usage_error("unknown option '%s'%s", argv[i], s ?
				    " (a setting of txlgen's runs, not of "
				    "the server's)" : "");
			return EXIT_USAGE;
		}
		if (s->type == ST_BOOL || s->type == ST_TRIBOOL) {
			if (val) {
				usage_error("--%s takes no value", name);
				return EXIT_USAGE;
			}
			setting_set_bool(s, o, !neg);
		} else {
			if (neg) {
				usage_error("unknown option '%s'", argv[i]);
				return EXIT_USAGE;
			}
			NEED_VAL();
			if (!setting_parse(s, o, val, err, sizeof(err))) {
				usage_error("--%s: %s", name, err);
				return EXIT_USAGE;
			}
		}
		setting_set_origin(s, o, ORIGIN_CLI);
#undef NEED_VAL
	}
	return -1;
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
