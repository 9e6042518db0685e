/* SPDX-License-Identifier: MIT */
/*
 * engine.c - txlgen's use of libtxl: the session, streaming text into the
 * memory (--prime), generating, and scoring with the protocol of the
 * original eval.py.
 *
 * Streams (--prime, --score) are read and tokenized line by line, so
 * memory use does not depend on their size.  Line by line is also how
 * spm_encode reads its input; for SentencePiece's default normalisation
 * (newlines count as spaces, runs of spaces collapse) it gives the same
 * ids as tokenizing the whole text at once.  A line longer than
 * CHUNK_MAX is cut before a space or tab (same ids) or, failing that, at
 * a character boundary (which may change the ids at the cut).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

#define CHUNK_MAX (1 << 20)

volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

void
sigint_setup(bool restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGINT, &sa, NULL);
}

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		errmsg("out of memory");
		exit(EXIT_RUNTIME);
	}
	return p;
}

static bool
abort_fn(void *data)
{
	(void)data;
	return interrupted != 0;
}

static void
log_fn(enum txl_log_level level, const char *msg, void *data)
{
	(void)level;
	(void)data;
	errmsg("%s", msg);
}

/* The library's reason for the last failure, or a generic one. */
static const char *
lib_error(enum txl_status st)
{
	const char *m = txl_last_error();

	return m && *m ? m : txl_status_str(st);
}

/* ------------------------------------------------------------------ */
/* Session                                                             */

int
engine_open(struct engine *e, struct txlgen_options *opts,
	    const char *model_path)
{
	enum txl_status st;
	uint32_t r;

	memset(e, 0, sizeof(*e));
	e->opts = opts;
	e->model_path = model_path;
	txl_log_set(log_fn, NULL, TXL_LOG_WARN);

	st = txl_model_load(model_path, &e->model);
	if (st != TXL_OK) {
		errmsg("%s", lib_error(st));
		return EXIT_BADMODEL;
	}
	e->hp = txl_model_hparams(e->model);
	e->logits = xrealloc(NULL, (size_t)e->hp->n_token * sizeof(float));

	/* without --seed, a new seed each run (shown by --stats/--json) */
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 16;
	e->seed = r;

	return engine_apply_settings(e);
}

void
engine_close(struct engine *e)
{
	txl_session_free(e->session);
	txl_model_free(e->model);
	free(e->ids);
	free(e->logits);
	memset(e, 0, sizeof(*e));
}

int
engine_apply_settings(struct engine *e)
{
	struct txl_session_params p = txl_session_params_default();
	enum txl_status st;

	p.mem_len = e->opts->mem_len;
	p.seg_len = e->opts->seg_len;
	p.clamp_len = e->opts->clamp_len;
	p.same_length = e->opts->same_length;
	p.n_threads = e->opts->threads;
	p.abort_cb = abort_fn;
	p.abort_data = NULL;
	/* a live session keeps its memory (the most recent positions if
	 * mem_len shrinks) */
	if (e->session)
		st = txl_session_set_params(e->session, &p);
	else
		st = txl_session_new(e->model, &p, &e->session);
	if (st != TXL_OK) {
		errmsg("%s", lib_error(st));
		return st == TXL_ERR_NOMEM ? EXIT_RUNTIME : EXIT_USAGE;
	}
	e->have_logits = txl_session_n_logits(e->session) > 0;
	return EXIT_OK;
}

void
engine_reset(struct engine *e)
{
	txl_session_reset(e->session);
	e->have_logits = false;
	e->started = false;
}

int
engine_tokenize(struct engine *e, const char *text, size_t len)
{
	int n;

	if (!len)
		return 0;
	n = txl_tokenize(e->model, text, len, e->ids, e->ids_cap);
	if (n < 0 && n != INT32_MIN) {
		e->ids_cap = -n;
		e->ids = xrealloc(e->ids, (size_t)e->ids_cap * sizeof(int32_t));
		n = txl_tokenize(e->model, text, len, e->ids, e->ids_cap);
	}
	if (n < 0) {
		errmsg("%s", lib_error(TXL_ERR_INVALID));
		return -1;
	}
	return n;
}

int
engine_save(struct engine *e, const char *path)
{
	enum txl_status st = txl_session_save(e->session, path);

	if (st != TXL_OK) {
		errmsg("%s", lib_error(st));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int
engine_load(struct engine *e, const char *path)
{
	enum txl_status st = txl_session_load(e->session, path);

	if (st != TXL_OK) {
		errmsg("%s", lib_error(st));
		return st == TXL_ERR_IO ? EXIT_RUNTIME : EXIT_BADMODEL;
	}
	/* the state predicts the token after its text: an empty prompt
	 * continues that text */
	e->have_logits = txl_session_n_logits(e->session) > 0;
	e->started = true;
	return EXIT_OK;
}

void
engine_print_mem(struct engine *e, FILE *f, const char *prefix)
{
	struct txl_session_params p = txl_session_get_params(e->session);
	int fill = txl_session_mem_fill(e->session);

	fprintf(f, "%smemory: %d/%d positions (%.0f%%), %lld tokens consumed, "
		"receptive field %lld tokens (%d layers x mem_len %d)\n",
		prefix, fill, p.mem_len,
		p.mem_len ? 100.0 * fill / p.mem_len : 0.0,
		(long long)txl_session_n_past(e->session),
		(long long)e->hp->n_layer * p.mem_len, e->hp->n_layer,
		p.mem_len);
}

/* ------------------------------------------------------------------ */
/* Streams                                                             */

struct reader {
	int fd;
	const char *name;
	char *buf;
	size_t start, end, cap;
	bool eof;
	uint64_t bytes;     /* read so far */
	uint64_t consumed;  /* handed out in chunks so far */
	uint64_t size;      /* of a regular file, else 0 */
};

static int
reader_open(struct reader *r, const char *path)
{
	struct stat sb;

	memset(r, 0, sizeof(*r));
	r->name = strcmp(path, "-") ? path : "(stdin)";
	r->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	if (r->fd < 0) {
		errmsg("%s: %s", path, strerror(errno));
		return EXIT_RUNTIME;
	}
	if (fstat(r->fd, &sb) == 0 && S_ISREG(sb.st_mode))
		r->size = (uint64_t)sb.st_size;
	if (fstat(r->fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		errmsg("%s: %s", r->name, strerror(EISDIR));
		if (r->fd > 0)
			close(r->fd);
		return EXIT_RUNTIME;
	}
	r->cap = CHUNK_MAX + 65536;
	r->buf = xrealloc(NULL, r->cap);
	return EXIT_OK;
}

static void
reader_close(struct reader *r)
{
	if (r->fd > 0)
		close(r->fd);
	free(r->buf);
}

/*
 * The next chunk of the stream: a line with its '\n', or a cut of a line
 * longer than CHUNK_MAX.  Returns 1 with a chunk, 0 at the end, -1 on a
 * read error (reported) or an interruption.
 */
static int
reader_next(struct reader *r, const char **chunk, size_t *n)
{
	for (;;) {
		char *s = r->buf + r->start;
		size_t have = r->end - r->start;
		char *nl = memchr(s, '\n', have);
		ssize_t got;

		if (nl) {
			*n = (size_t)(nl + 1 - s);
		} else if (have >= CHUNK_MAX) {
			size_t cut = CHUNK_MAX;

			while (cut > 1 && s[cut - 1] != ' ' &&
			       s[cut - 1] != '\t')
				cut--;
			if (cut > 1)
				cut--;      /* the space starts the next chunk */
			else
				for (cut = CHUNK_MAX; cut > CHUNK_MAX - 3 &&
				     ((unsigned char)s[cut] & 0xc0) == 0x80;
				     cut--)
					;
			*n = cut;
		} else if (r->eof) {
			if (!have)
				return 0;
			*n = have;
		} else {
			memmove(r->buf, s, have);
			r->start = 0;
			r->end = have;
			if (interrupted)
				return -1;
			sigint_setup(false);
			got = read(r->fd, r->buf + r->end, r->cap - r->end);
			sigint_setup(true);
			if (got < 0) {
				if (errno == EINTR && !interrupted)
					continue;
				if (errno != EINTR)
					errmsg("%s: %s", r->name,
					       strerror(errno));
				return -1;
			}
			if (got == 0)
				r->eof = true;
			r->end += (size_t)got;
			r->bytes += (uint64_t)got;
			continue;
		}
		*chunk = s;
		r->start += *n;
		r->consumed += *n;
		return 1;
	}
}

struct progress {
	bool on;
	double t0, last;
	uint64_t size;
};

static void
progress_init(struct progress *p, uint64_t size)
{
	p->on = isatty(STDERR_FILENO);
	p->t0 = p->last = now_s();
	p->size = size;
}

static void
progress_show(struct progress *p, uint64_t bytes, int64_t tokens, bool force)
{
	double t = now_s(), rate;
	char bar[32];

	if (!p->on || (!force && t - p->last < 0.2))
		return;
	p->last = t;
	rate = t > p->t0 ? (double)tokens / (t - p->t0) : 0;
	if (p->size) {
		double f = (double)bytes / (double)p->size;
		int w = 24, k = (int)(f * w + 0.5);

		if (k > w)
			k = w;
		memset(bar, '=', (size_t)k);
		memset(bar + k, ' ', (size_t)(w - k));
		bar[w] = '\0';
		fprintf(stderr, "\r[%s] %3.0f%%  %.1f/%.1f MB  %lld tokens  "
			"%.0f tokens/s\033[K", bar, 100 * f, bytes / 1e6,
			p->size / 1e6, (long long)tokens, rate);
	} else {
		fprintf(stderr, "\r%.1f MB  %lld tokens  %.0f tokens/s\033[K",
			bytes / 1e6, (long long)tokens, rate);
	}
}

static void
progress_done(struct progress *p)
{
	if (p->on)
		fputs("\r\033[K", stderr);
}

/* With --adapt, learn from the n rows of logits just computed, whose
 * next tokens are targets[0..n-1].  Returns an exit code. */
static int
adapt(struct engine *e, const int32_t *targets, int n)
{
	enum txl_status st;

	if (e->opts->adapt <= 0)
		return EXIT_OK;
	st = txl_session_adapt(e->session, targets, n, (float)e->opts->adapt);
	e->have_logits = false;
	if (st != TXL_OK) {
		errmsg("%s", lib_error(st));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Feed @p n tokens; reports errors.  Returns an exit code. */
static int
feed(struct engine *e, const int32_t *ids, int n, enum txl_logits want)
{
	enum txl_status st = txl_session_eval(e->session, ids, n, want);

	if (st == TXL_ABORTED || interrupted) {
		e->have_logits = false;
		return EXIT_INTERRUPTED;
	}
	if (st != TXL_OK) {
		errmsg("%s", lib_error(st));
		e->have_logits = false;
		return EXIT_RUNTIME;
	}
	e->have_logits = want != TXL_LOGITS_NONE;
	return EXIT_OK;
}

/* Feed the whole segments of ids[0..n) that leave at least one token
 * over, so that each one's next token is known: *fed of them, a multiple
 * of seg_len, so the segments are where one feed() of all n would put
 * them.  With --adapt one at a time, learning from each.  Returns an
 * exit code. */
static int
feed_segments(struct engine *e, const int32_t *ids, int n, int *fed)
{
	int seg = txl_session_get_params(e->session).seg_len, rc = EXIT_OK;
	int k = n > 0 ? (n - 1) / seg * seg : 0;

	*fed = k;
	if (k == 0)
		return EXIT_OK;
	if (e->opts->adapt <= 0)
		return feed(e, ids, k, TXL_LOGITS_NONE);
	for (int i = 0; i < k && rc == EXIT_OK; i += seg) {
		rc = feed(e, ids + i, seg, TXL_LOGITS_ALL);
		if (rc == EXIT_OK)
			rc = adapt(e, ids + i + 1, seg);
	}
	return rc;
}

struct tokvec {
	int32_t *v;
	int n, cap;
};

static void
tokvec_add(struct tokvec *t, const int32_t *ids, int n)
{
	if (t->n + n > t->cap) {
		t->cap = (t->n + n) * 2;
		t->v = xrealloc(t->v, (size_t)t->cap * sizeof(int32_t));
	}
	memcpy(t->v + t->n, ids, (size_t)n * sizeof(int32_t));
	t->n += n;
}

static void
tokvec_drop(struct tokvec *t, int n)
{
	memmove(t->v, t->v + n, (size_t)(t->n - n) * sizeof(int32_t));
	t->n -= n;
}

int
engine_prime(struct engine *e, const char *path)
{
	struct tokvec t = { 0 };
	struct progress pg;
	struct reader r;
	const char *chunk;
	size_t len;
	int64_t total = 0;
	int rc, k, got;

	rc = reader_open(&r, path);
	if (rc != EXIT_OK)
		return rc;
	progress_init(&pg, r.size);
	/* segments aligned at the start of the file, as if it were fed at
	 * once; the last one, never empty, also gives the logits */
	while ((got = reader_next(&r, &chunk, &len)) > 0) {
		k = engine_tokenize(e, chunk, len);
		if (k < 0) {
			rc = EXIT_RUNTIME;
			goto out;
		}
		tokvec_add(&t, e->ids, k);
		total += k;
		rc = feed_segments(e, t.v, t.n, &k);
		if (rc != EXIT_OK)
			goto out;
		tokvec_drop(&t, k);
		progress_show(&pg, r.consumed, total, false);
	}
	if (got < 0) {
		rc = interrupted ? EXIT_INTERRUPTED : EXIT_RUNTIME;
		goto out;
	}
	if (t.n)
		rc = feed(e, t.v, t.n, TXL_LOGITS_LAST);
	if (total)
		e->started = true;
out:
	progress_done(&pg);
	reader_close(&r);
	free(t.v);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Generation                                                          */

static const char *const end_names[] = {
	"length", "eos", "stop", "interrupted", "error"
};

/* The token a text starts from when there is no prompt: the end of a
 * previous text, as the original corpora separate texts; else BOS. */
static int32_t
start_token(struct engine *e)
{
	int32_t t = txl_token_eos(e->model);

	if (t < 0)
		t = txl_token_bos(e->model);
	if (t < 0)
		t = txl_token_unk(e->model);
	return t < 0 ? 0 : t;
}

int
engine_generate(struct engine *e, const char *text, size_t len,
		struct output *out)
{
	struct txlgen_options *o = e->opts;
	struct txl_sampler_params sp = txl_sampler_params_default();
	struct gen_stats *gs = &e->last;
	struct txl_sampler *smp;
	int32_t eos = txl_token_eos(e->model), tok;
	bool drop_space;
	char piece[256];
	char *pbuf = piece;
	size_t pcap = sizeof(piece);
	double t0;
	int n, rc = EXIT_OK;

	memset(gs, 0, sizeof(*gs));
	gs->end = GEN_LENGTH;

	sp.temp = (float)o->temp;
	sp.top_k = o->top_k;
	sp.top_p = (float)o->top_p;
	sp.min_p = (float)o->min_p;
	sp.repeat_penalty = (float)o->repeat_penalty;
	sp.repeat_last_n = o->repeat_last_n;
	/* each generation starts the random stream anew, so that a saved
	 * memory continued elsewhere gives the same text */
	sp.seed = o->seed >= 0 ? (uint64_t)o->seed : e->seed;
	smp = txl_sampler_new(&sp, e->hp->n_token);
	if (!smp) {
		errmsg("%s", lib_error(TXL_ERR_INVALID));
		gs->end = GEN_ERROR;
		return EXIT_USAGE;
	}

	n = engine_tokenize(e, text, len);
	if (n < 0) {
		rc = EXIT_RUNTIME;
		goto out;
	}
	for (int i = 0; i < n; i++)
		txl_sampler_accept(smp, e->ids[i]);
	drop_space = e->trim_lead || (!e->started && n == 0);
	if (n == 0 && !e->have_logits) {
		if (!e->ids_cap) {
			e->ids_cap = 16;
			e->ids = xrealloc(NULL, 16 * sizeof(int32_t));
		}
		e->ids[0] = start_token(e);
		n = 1;
	}

	t0 = now_s();
	if (n > 0) {
		int k;

		rc = feed_segments(e, e->ids, n, &k);
		if (rc == EXIT_OK)
			rc = feed(e, e->ids + k, n - k, TXL_LOGITS_LAST);
		gs->n_prompt = n;
		if (rc != EXIT_OK)
			goto out;
	}
	if (len)
		e->started = true;
	gs->t_prompt = now_s() - t0;

	out_begin(out, false, &o->stop);
	if (o->echo && len && out_prompt(out, text, len) == OUT_ERROR) {
		rc = EXIT_RUNTIME;
		goto out;
	}

	t0 = now_s();
	for (int i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
		const float *lg = txl_session_logits(e->session);
		float lp;
		double logprob;
		int plen;
		enum out_status os;
		bool last = o->n_predict >= 0 && i + 1 == o->n_predict;

		if (interrupted) {
			rc = EXIT_INTERRUPTED;
			break;
		}
		if (o->ignore_eos && eos >= 0) {
			memcpy(e->logits, lg, (size_t)e->hp->n_token *
			       sizeof(float));
			e->logits[eos] = -INFINITY;
			tok = txl_sampler_sample(smp, e->logits, &lp);
			logprob = o->json ? lg[tok] -
				txl_logsumexp(lg, e->hp->n_token) : lp;
		} else {
			tok = txl_sampler_sample(smp, lg, &lp);
			logprob = lp;
		}
		if (tok < 0 || tok >= e->hp->n_token) {
			errmsg("%s", lib_error(TXL_ERR_INVALID));
			rc = EXIT_RUNTIME;
			break;
		}
		gs->n_gen++;
		e->started = true;
		if (tok == eos && !o->ignore_eos) {
			gs->end = GEN_EOS;
			if (e->keep_memory)
				rc = feed(e, &tok, 1, TXL_LOGITS_LAST);
			break;
		}
		plen = txl_token_piece(e->model, tok, pbuf, pcap);
		if (plen < 0 && plen != INT32_MIN) {
			pcap = (size_t)-plen;
			pbuf = xrealloc(pbuf == piece ? NULL : pbuf, pcap);
			plen = txl_token_piece(e->model, tok, pbuf, pcap);
		}
		if (plen < 0)
			plen = 0;
		if (drop_space && plen > 0) {
			/* as SentencePiece's decoder: it drops the leading
			 * space of a text only for tokenizers that add one */
			char d[8];
			int dl = txl_detokenize(e->model, &tok, 1, d, sizeof(d));

			if (pbuf[0] == ' ' && (e->trim_lead ||
					       (dl >= 0 && dl < plen) ||
					       (dl < 0 && dl != INT32_MIN &&
						-dl < plen)))
				os = out_token(out, tok, pbuf + 1,
					       (size_t)plen - 1, logprob);
			else
				os = out_token(out, tok, pbuf, (size_t)plen,
					       logprob);
			drop_space = false;
		} else {
			os = out_token(out, tok, pbuf, (size_t)plen, logprob);
		}
		if (os == OUT_ERROR) {
			rc = EXIT_RUNTIME;
			break;
		}
		if (os == OUT_STOP)
			gs->end = GEN_STOP;
		if ((os == OUT_STOP || last) && !e->keep_memory) {
			e->have_logits = false;
			break;
		}
		rc = feed(e, &tok, 1, TXL_LOGITS_LAST);
		if (rc != EXIT_OK || os == OUT_STOP)
			break;
	}
	gs->t_gen = now_s() - t0;
	if (rc == EXIT_INTERRUPTED)
		gs->end = GEN_INTERRUPTED;
	else if (rc != EXIT_OK)
		gs->end = GEN_ERROR;
	if (out_end(out, gs->end == GEN_STOP) == OUT_ERROR && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	if (rc == EXIT_RUNTIME && ferror(out->f)) {
		errmsg("writing output failed: %s", strerror(errno));
		rc = EXIT_RUNTIME;
	}
	if (o->json && gs->end != GEN_ERROR) {
		FILE *f = out->f;

		fprintf(f, "{\"n_prompt\": %d, \"n_gen\": %d, "
			"\"prompt_tokens_per_s\": ", gs->n_prompt, gs->n_gen);
		json_write_number(f, gs->t_prompt > 0 ?
				  gs->n_prompt / gs->t_prompt : 0);
		fputs(", \"gen_tokens_per_s\": ", f);
		json_write_number(f, gs->t_gen > 0 ? gs->n_gen / gs->t_gen : 0);
		fprintf(f, ", \"mem_fill\": %d, \"mem_len\": %d, "
			"\"n_past\": %lld, \"end\": \"%s\", \"seed\": %llu}\n",
			txl_session_mem_fill(e->session),
			txl_session_get_params(e->session).mem_len,
			(long long)txl_session_n_past(e->session),
			end_names[gs->end], (unsigned long long)sp.seed);
		fflush(f);
		if (ferror(f) && rc == EXIT_OK) {
			errmsg("writing output failed: %s", strerror(errno));
			rc = EXIT_RUNTIME;
		}
	}
out:
	if (rc == EXIT_INTERRUPTED)
		gs->end = GEN_INTERRUPTED;
	if (pbuf != piece)
		free(pbuf);
	txl_sampler_free(smp);
	return rc;
}

void
engine_print_stats(struct engine *e)
{
	const struct gen_stats *g = &e->last;
	uint64_t seed = e->opts->seed >= 0 ? (uint64_t)e->opts->seed : e->seed;

	fflush(stdout);
	fprintf(stderr, "txlgen: prompt: %d tokens in %.3f s (%.1f tokens/s)\n",
		g->n_prompt, g->t_prompt,
		g->t_prompt > 0 ? g->n_prompt / g->t_prompt : 0.0);
	fprintf(stderr, "txlgen: generated: %d tokens in %.3f s "
		"(%.1f tokens/s), ended by %s, seed %llu\n", g->n_gen, g->t_gen,
		g->t_gen > 0 ? g->n_gen / g->t_gen : 0.0, end_names[g->end],
		(unsigned long long)seed);
	engine_print_mem(e, stderr, "txlgen: ");
}

/* ------------------------------------------------------------------ */
/* Scoring                                                             */

struct score {
	struct engine *e;
	FILE *out;
	int64_t base;      /* input index of t.v[0] */
	double sum_nll;
	int64_t n_pred;
};

/* Score the predictions of t[1..n] from inputs t[0..n-1], one segment. */
static int
score_segment(struct score *sc, const int32_t *t, int n)
{
	struct engine *e = sc->e;
	const float *lg;
	int rc = feed(e, t, n, TXL_LOGITS_ALL);

	if (rc != EXIT_OK)
		return rc;
	lg = txl_session_logits(e->session);
	for (int i = 0; i < n; i++) {
		const float *row = lg + (size_t)i * e->hp->n_token;
		double lp = row[t[i + 1]] - txl_logsumexp(row, e->hp->n_token);

		sc->sum_nll -= lp;
		sc->n_pred++;
		if (e->opts->json) {
			fprintf(sc->out, "{\"pos\": %lld, \"id\": %d, "
				"\"logprob\": ", (long long)(sc->base + i + 1),
				(int)t[i + 1]);
			json_write_number(sc->out, lp);
			fputs("}\n", sc->out);
		}
	}
	sc->base += n;
	rc = adapt(e, t + 1, n);
	if (rc != EXIT_OK)
		return rc;
	if (ferror(sc->out)) {
		errmsg("writing output failed: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Parse the token ids of one chunk of --ids input. */
static int
parse_ids(struct engine *e, const char *name, int64_t *line, const char *s,
	  size_t len, struct tokvec *t)
{
	size_t i = 0;

	while (i < len) {
		size_t j;
		long long v = 0;
		int32_t id;

		if (s[i] == '\n')
			++*line;
		if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
		    s[i] == '\r' || s[i] == '\v' || s[i] == '\f') {
			i++;
			continue;
		}
		for (j = i; j < len && s[j] >= '0' && s[j] <= '9'; j++)
			if (v <= INT32_MAX)
				v = v * 10 + (s[j] - '0');
		if (j == i || (j < len && !strchr(" \t\n\r\v\f", s[j]))) {
			size_t k = j;

			while (k < len && !strchr(" \t\n\r\v\f", s[k]) &&
			       k - i < 40)
				k++;
			errmsg("%s: line %lld: '%.*s' is not a token id", name,
			       (long long)*line, (int)(k - i), s + i);
			return EXIT_RUNTIME;
		}
		if (v >= e->hp->n_token) {
			errmsg("%s: line %lld: token id %.*s is out of range "
			       "(0 .. %d)", name, (long long)*line,
			       (int)(j - i), s + i, e->hp->n_token - 1);
			return EXIT_RUNTIME;
		}
		id = (int32_t)v;
		tokvec_add(t, &id, 1);
		i = j;
	}
	return EXIT_OK;
}

int
engine_score(struct engine *e, const char *path, FILE *out)
{
	int seg = txl_session_get_params(e->session).seg_len;
	struct score sc = { .e = e, .out = out };
	struct tokvec t = { 0 };
	struct progress pg;
	struct reader r;
	const char *chunk;
	char piece[256];
	size_t len;
	int64_t total = 0, line = 1;
	uint64_t bytes = 0;
	bool first_piece = true;
	int rc, got;

	rc = reader_open(&r, path);
	if (rc != EXIT_OK)
		return rc;
	progress_init(&pg, r.size);
	while ((got = reader_next(&r, &chunk, &len)) > 0) {
		int before = t.n, k;

		if (e->opts->ids) {
			rc = parse_ids(e, r.name, &line, chunk, len, &t);
			if (rc != EXIT_OK)
				goto out;
			/* bytes of the text the ids stand for */
			for (int i = before; i < t.n; i++) {
				int pl = txl_token_piece(e->model, t.v[i],
							 piece, sizeof(piece));
				bool space = pl > 0 && piece[0] == ' ';

				if (pl < 0 && pl != INT32_MIN)
					pl = -pl;  /* long pieces: size only */
				if (pl <= 0)
					continue;
				if (first_piece && space)
					pl--;
				first_piece = false;
				bytes += (uint64_t)pl;
			}
		} else {
			k = engine_tokenize(e, chunk, len);
			if (k < 0) {
				rc = EXIT_RUNTIME;
				goto out;
			}
			tokvec_add(&t, e->ids, k);
			bytes += len;
		}
		total += t.n - before;
		/* a full segment and the token after it: as eval.py's
		 * iterator, inputs x[s:s+seg], targets x[s+1:s+seg+1] */
		while (t.n > seg) {
			rc = score_segment(&sc, t.v, seg);
			if (rc != EXIT_OK)
				goto out;
			tokvec_drop(&t, seg);
			progress_show(&pg, r.consumed, sc.base, false);
		}
	}
	if (got < 0) {
		rc = interrupted ? EXIT_INTERRUPTED : EXIT_RUNTIME;
		goto out;
	}
	if (total < 2) {
		errmsg("%s: nothing to score: %s", r.name, total ?
		       "one token gives no prediction, at least 2 are needed" :
		       e->opts->ids ? "no token ids" : "no text");
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (t.n > 1) {
		rc = score_segment(&sc, t.v, t.n - 1);
		if (rc != EXIT_OK)
			goto out;
	}
	progress_done(&pg);
	pg.on = false;
	{
		double nll = sc.sum_nll / (double)sc.n_pred;
		double bpb = bytes ? sc.sum_nll / log(2.0) / (double)bytes : 0;

		if (e->opts->json) {
			fprintf(out, "{\"tokens\": %lld, \"predicted\": %lld, "
				"\"bytes\": %llu, \"nll\": ", (long long)total,
				(long long)sc.n_pred, (unsigned long long)bytes);
			json_write_number(out, nll);
			fputs(", \"ppl\": ", out);
			json_write_number(out, exp(nll));
			fputs(", \"bpb\": ", out);
			json_write_number(out, bpb);
			fputs("}\n", out);
		} else {
			fprintf(out, "tokens %lld\npredicted %lld\nbytes %llu\n"
				"nll %.6f\nppl %.4f\nbpb %.6f\n",
				(long long)total, (long long)sc.n_pred,
				(unsigned long long)bytes, nll, exp(nll), bpb);
		}
		fflush(out);
		if (ferror(out)) {
			errmsg("writing output failed: %s", strerror(errno));
			rc = EXIT_RUNTIME;
		}
	}
	if (e->opts->stats) {
		double t1 = now_s() - pg.t0;

		fprintf(stderr, "txlgen: scored %lld tokens in %.3f s "
			"(%.1f tokens/s)\n", (long long)total, t1,
			t1 > 0 ? total / t1 : 0.0);
		engine_print_mem(e, stderr, "txlgen: ");
	}
out:
	progress_done(&pg);
	reader_close(&r);
	free(t.v);
	return rc;
}
