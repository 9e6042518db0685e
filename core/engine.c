/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the model and its session: loading, settings, the memory's
 * state files, tokens.  Feeding text into the memory is feed.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "engine-model.h"
#include "engine-sampling.h"
#include "engine-streams.h"
#include "engine.h"
#include "models.h"
#include "signals.h"

static bool
abort_fn(void *data)
{
	const struct engine *e = data;

	/* while saving, a signal that came after the save began: the REPL
	 * saves its memory after the SIGTERM that ends it */
	if (e->streams->saving)
		return signals_received() != e->streams->signals_at_save;
	return interrupted != 0;
}

static void
log_fn(enum txl_log_level level, const char *msg, void *data)
{
	(void)level;
	(void)data;
	errmsg("%s", msg);
}

const char *
engine_lib_error(enum txl_status st)
{
	const char *m = txl_last_error();

	return m && *m ? m : txl_status_str(st);
}

int
engine_run_status(enum txl_status st)
{
	if (st == TXL_ABORTED || interrupted)
		return EXIT_INTERRUPTED;
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

void
tokvec_add(struct tokvec *t, const int32_t *ids, int n)
{
	if (n <= 0)
		return;		/* ids may be NULL */
	if (t->n + n > t->cap) {
		t->cap = (t->n + n) * 2;
		t->v = xrealloc(t->v, (size_t)t->cap * sizeof(int32_t));
	}
	memcpy(t->v + t->n, ids, (size_t)n * sizeof(int32_t));
	t->n += n;
}

void
tokvec_drop(struct tokvec *t, int n)
{
	if (n <= 0)
		return;
	memmove(t->v, t->v + n, (size_t)(t->n - n) * sizeof(int32_t));
	t->n -= n;
}

/* ------------------------------------------------------------------ */
/* Model and session                                                   */

/*
 * A model file of Hugging Face's wt103 that a convert.py before
 * converter version 2 wrote (no metadata converter_version) has tail
 * clusters 1 and 3 swapped: that converter kept Hugging Face's
 * crit.cluster_weight rows in their order, which Hugging Face reads in
 * the TensorFlow code's order.  Such a file is told by its description
 * (txlgen-get's names huggingface.co) or by wt103's vocabulary and
 * cutoffs; one line says how to convert it again.
 */
static void
warn_old_conversion(const struct txl_model *m, const char *path)
{
	static const int wt103[3] = { 20000, 40000, 200000 };
	const struct txl_hparams *hp = txl_model_hparams(m);
	const char *desc = txl_model_meta(m, "description");
	bool hf = desc && strstr(desc, "huggingface.co/");

	if (txl_model_meta(m, "converter_version") || hp->n_cutoffs < 3)
		return;
	if (!hf && !(hp->n_token == 267735 && hp->n_cutoffs == 3 &&
		     !memcmp(hp->cutoffs, wt103, sizeof wt103)))
		return;
	errmsg("warning: %s: converted by a convert.py older than converter "
	       "version 2, which swapped tail clusters 1 and 3 of Hugging "
	       "Face's wt103 (%s): convert it again with 'txlgen-get --force "
	       "wt103' (or models/convert.py --weights DIR -o FILE)", path,
	       hf ? "this model: words 20,000 to 39,999 and from 200,000 on "
	       "get another cluster's probability" : "if this is that model, "
	       "words 20,000 to 39,999 and from 200,000 on get another "
	       "cluster's probability");
}

static void *
zalloc(size_t n)
{
	return memset(xrealloc(NULL, n), 0, n);
}

int
engine_load_model(struct engine *e, struct txlgen_options *opts,
		  const char *model_path)
{
	enum txl_status st;
	uint32_t r;
	int rc;

	memset(e, 0, sizeof(*e));
	e->opts = opts;
	e->mod = zalloc(sizeof(*e->mod));
	e->samp = zalloc(sizeof(*e->samp));
	e->streams = zalloc(sizeof(*e->streams));
	e->mod->path = model_path;
	txl_log_set(log_fn, NULL, TXL_LOG_WARN);

	st = txl_model_load_flags(model_path, opts->mmap ? 0 :
				  TXL_LOAD_NO_MMAP, &e->mod->model);
	if (st != TXL_OK) {
		unsigned char head[8];
		ssize_t n = 0;
		int fd = st == TXL_ERR_FORMAT ?
			open(model_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
		const char *foreign;

		if (fd >= 0) {
			n = pread(fd, head, sizeof(head), 0);
			close(fd);
		}
		foreign = model_foreign_format(model_path, n > 0 ? head : NULL,
					       n > 0 ? (size_t)n : 0);
		if (foreign)
			errmsg("%s; it is %s, and txlgen runs only "
			       "Transformer-XL model files (txlgen-model(5))",
			       engine_lib_error(st), foreign);
		else
			errmsg("%s", engine_lib_error(st));
		return EXIT_BADMODEL;
	}
	if (opts->mmap)
		signals_watch_mapping(model_path);
	e->mod->hp = txl_model_hparams(e->mod->model);
	warn_old_conversion(e->mod->model, model_path);
	e->mod->logits = xrealloc(NULL, (size_t)e->mod->hp->n_token *
				  sizeof(float));

	/* without --seed, a new seed each run (shown by --stats/--json) */
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 16;
	e->samp->seed = r;

	rc = config_apply_recommended(opts, e->mod->model, model_path);
	if (rc == EXIT_OK)
		rc = engine_make_bias(e);
	return rc;
}

int
engine_make_bias(struct engine *e)
{
	char *err;

	/* the REPL's kept sampler has the old arrays: a new one comes */
	e->samp->sampler_params.n_logit_bias = -1;
	if (engine_logit_bias(e->mod, &e->opts->logit_bias, "--logit-bias",
			      &e->samp->bias, &err) == EXIT_OK)
		return EXIT_OK;
	errmsg("%s", err);
	free(err);
	return EXIT_USAGE;
}

void
engine_interactive(struct engine *e)
{
	e->streams->keep_memory = true;
	e->samp->keep_sampler = true;
	e->streams->trim_lead = true;
}

void
engine_effective_options(const struct engine *e,
			 struct txlgen_options *shown)
{
	*shown = *e->opts;
	shown->model = (char *)e->mod->path;
	if (shown->seed < 0)
		shown->seed = (int64_t)e->samp->seed;
}

void
engine_close(struct engine *e)
{
	if (e->samp) {
		txl_sampler_free(e->samp->sampler);
		logit_bias_free(&e->samp->bias);
		free(e->samp->recent.v);
		free(e->samp);
	}
	if (e->streams) {
		txl_batch_free(e->streams->batch);
		txl_session_free(e->streams->session);
		free(e->streams->samples);
		free(e->streams);
	}
	if (e->mod) {
		txl_model_free(e->mod->model);
		free(e->mod->ids);
		free(e->mod->logits);
		free(e->mod->piece);
		free(e->mod);
	}
	memset(e, 0, sizeof(*e));
}

/* What the options ask of this model that it does not do, said in the
 * options' names before a session is made (the library's own checks then
 * cover the rest).  A model without memory (attn_type 2, 3) recomputes a
 * window of the last seg_len tokens (as the library resolves @p p): for
 * every token when it generates (the library's stride 1), every
 * --score-stride tokens when it scores (default seg_len: the original
 * eval.py's segments with mem_len 0). */
static int
model_settings(struct engine *e, struct txl_session_params *p)
{
	const struct txlgen_options *o = e->opts;
	const struct txl_hparams *hp = e->mod->hp;
	struct txl_session_params r = txl_session_params_default();
	bool scoring = o->score || o->score_docs;
	int seg;

	if (o->adapt > 0 && hp->n_cutoffs > 0) {
		errmsg("--adapt: %s has an adaptive softmax (%d clusters); "
		       "dynamic evaluation adapts a full softmax only",
		       e->mod->path, hp->n_cutoffs + 1);
		return EXIT_USAGE;
	}
	if (!scoring || txl_model_has_memory(e->mod->model)) {
		if (scoring && o->score_stride >= 0) {
			errmsg("--score-stride: %s has a memory (attn_type "
			       "%d); only models without memory (attn_type 2, "
			       "3) are scored in windows", e->mod->path,
			       hp->attn_type);
			return EXIT_USAGE;
		}
		return EXIT_OK;
	}
	/* the settings as the session gets them (those refused, as its
	 * making would say; the stride, unset, is not what refuses them) */
	if (txl_session_params_resolve(e->mod->model, p, &r) != TXL_OK) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return EXIT_USAGE;
	}
	seg = r.seg_len;
	if (o->score_stride < 0) {
		p->stride = seg;
		return EXIT_OK;
	}
	if (o->score_stride > seg) {
		errmsg("--score-stride %d: more than the %d tokens of a "
		       "window (seg_len)", o->score_stride, seg);
		return EXIT_USAGE;
	}
	p->stride = o->score_stride;
	return EXIT_OK;
}

void
engine_session_params(const struct engine *e, struct txl_session_params *p)
{
	*p = txl_session_params_default();
	p->mem_len = e->opts->mem_len;
	p->seg_len = e->opts->seg_len;
	p->clamp_len = e->opts->clamp_len;
	p->same_length = e->opts->same_length;
	p->n_threads = e->opts->threads;
	p->kv_type = e->opts->kv_type;
	p->mem_init = e->opts->mem_init;
}

struct txl_session_params
engine_params(const struct engine *e)
{
	return txl_session_get_params(e->streams->session);
}

int
engine_check_compute(const struct engine *e)
{
	if (txl_model_check_compute(e->mod->model, e->opts->compute) == TXL_OK)
		return EXIT_OK;
	errmsg("--compute %s: %s stores none of its weight matrices in "
	       "BF16 (its products compute in F32 whatever the setting)",
	       compute_names[e->opts->compute], e->mod->path);
	return EXIT_USAGE;
}

int
engine_apply_settings(struct engine *e)
{
	struct txl_session_params p;
	enum txl_status st;
	int rc;

	engine_session_params(e, &p);
	if ((rc = model_settings(e, &p)) != EXIT_OK ||
	    (rc = engine_check_compute(e)) != EXIT_OK)
		return rc;
	p.abort_cb = abort_fn;
	p.abort_data = e;
	/* a live session keeps its memory (the most recent positions if
	 * mem_len shrinks) */
	if (e->streams->session)
		st = txl_session_set_params(e->streams->session, &p);
	else
		st = txl_session_new(e->mod->model, &p, &e->streams->session);
	if (st == TXL_OK)
		st = txl_session_set_compute(e->streams->session,
					     e->opts->compute);
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return st == TXL_ERR_NOMEM ? EXIT_RUNTIME : EXIT_USAGE;
	}
	e->streams->have_logits =
		txl_session_n_logits(e->streams->session) > 0;
	return EXIT_OK;
}

enum txl_status
engine_session_new(struct engine *e, const struct txl_session_params *p,
		   struct txl_session **out)
{
	enum txl_status st = txl_session_new(e->mod->model, p, out);

	if (st == TXL_OK &&
	    (st = txl_session_set_compute(*out, e->opts->compute)) != TXL_OK) {
		txl_session_free(*out);
		*out = NULL;
	}
	return st;
}

void
engine_note_fed(struct engine *e, const int32_t *ids, int n)
{
	int keep = e->opts->repeat_last_n;

	if (keep <= 0) {
		e->samp->recent.n = 0;
		return;
	}
	if (n > keep) {
		ids += n - keep;
		n = keep;
	}
	tokvec_add(&e->samp->recent, ids, n);
	if (e->samp->recent.n > 2 * keep)
		tokvec_drop(&e->samp->recent, e->samp->recent.n - keep);
}

void
engine_seed_sampler(const struct engine *e, struct txl_sampler *smp)
{
	int n = e->samp->recent.n < e->opts->repeat_last_n ? e->samp->recent.n
		: e->opts->repeat_last_n;

	/* never a lone byte token that breaks the text (the ids below
	 * tell the sampler what a character still waits for) */
	if (smp && txl_sampler_keep_utf8(smp, e->mod->model) != TXL_OK)
		errmsg("%s", engine_lib_error(TXL_ERR_NOMEM));
	for (int i = e->samp->recent.n - n; smp && i < e->samp->recent.n; i++)
		txl_sampler_accept(smp, e->samp->recent.v[i]);
}

void
engine_reset(struct engine *e)
{
	e->samp->recent.n = 0;
	txl_session_reset(e->streams->session);
	if (e->samp->sampler)
		txl_sampler_reset(e->samp->sampler);
	e->streams->have_logits = false;
	e->streams->started = false;
}

int
engine_tokenize(struct engine_model *m, const char *text, size_t len)
{
	int n;

	if (!len)
		return 0;
	n = txl_tokenize(m->model, text, len, m->ids, m->ids_cap);
	if (n < 0 && n != INT32_MIN) {
		m->ids_cap = -n;
		m->ids = xrealloc(m->ids, (size_t)m->ids_cap *
				  sizeof(int32_t));
		n = txl_tokenize(m->model, text, len, m->ids, m->ids_cap);
	}
	if (n < 0) {
		errmsg("%s", engine_lib_error(TXL_ERR_INVALID));
		return -1;
	}
	return n;
}

double
engine_available_bytes(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	double kib = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	if (kib >= 0)
		return kib * 1024;
	return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

void
logit_bias_free(struct logit_bias *lb)
{
	free(lb->ids);
	free(lb->bias);
	*lb = (struct logit_bias){ 0 };
}

int
engine_logit_bias(struct engine_model *m, const struct strlist *spec,
		  const char *what, struct logit_bias *lb, char **err)
{
	struct logit_bias out = { 0 };
	int cap = 0;

	*err = NULL;
	for (int i = 0; i < spec->n; i++) {
		const char *item = spec->v[i], *eq = strrchr(item, '=');
		const char *key = item;
		size_t klen = eq ? (size_t)(eq - item) : 0;
		const int32_t *toks;
		int32_t one;
		char *end;
		double b;
		bool digits = klen > 0;
		int n;

		for (size_t k = 0; k < klen; k++)
			digits &= key[k] >= '0' && key[k] <= '9';
		b = eq ? strtod(eq + 1, &end) : 0;
		if (!eq || !klen || end == eq + 1 || *end || isnan(b) ||
		    !(b == -INFINITY || (b >= -100 && b <= 100))) {
			if (asprintf(err, "%s '%s': not ID=BIAS or TEXT=BIAS "
				     "(BIAS from -100 to 100, or -inf)", what,
				     item) < 0)
				die_oom();
			logit_bias_free(&out);
			return EXIT_USAGE;
		}
		if (digits) {
			long id = strtol(key, NULL, 10);

			if (klen > 9 || id >= m->hp->n_token) {
				if (asprintf(err, "%s '%s': no token %.*s (the "
					     "model has %d)", what, item,
					     (int)klen, key,
					     m->hp->n_token) < 0)
					die_oom();
				logit_bias_free(&out);
				return EXIT_USAGE;
			}
			one = (int32_t)id;
			toks = &one;
			n = 1;
		} else if ((n = engine_tokenize(m, key, klen)) > 0) {
			toks = m->ids;
		} else {
			if (asprintf(err, "%s '%s': '%.*s' has no tokens",
				     what, item, (int)klen, key) < 0)
				die_oom();
			logit_bias_free(&out);
			return EXIT_USAGE;
		}
		if (out.n + n > cap) {
			cap = 2 * (out.n + n);
			out.ids = xrealloc(out.ids, (size_t)cap *
					   sizeof(*out.ids));
			out.bias = xrealloc(out.bias, (size_t)cap *
					    sizeof(*out.bias));
		}
		for (int k = 0; k < n; k++) {
			out.ids[out.n] = toks[k];
			out.bias[out.n++] = (float)b;
		}
	}
	logit_bias_free(lb);
	*lb = out;
	return EXIT_OK;
}

const char *
engine_piece(struct engine_model *m, int32_t id, int *len)
{
	int n;

	if (!m->piece) {
		m->piece_cap = 256;
		m->piece = xrealloc(NULL, m->piece_cap);
	}
	n = txl_token_piece(m->model, id, m->piece, m->piece_cap);
	if (n < 0 && n != INT32_MIN) {
		m->piece_cap = (size_t)-n;
		m->piece = xrealloc(m->piece, m->piece_cap);
		n = txl_token_piece(m->model, id, m->piece,
				    m->piece_cap);
	}
	if (n < 0)
		return NULL;
	*len = n;
	return m->piece;
}

bool
engine_drops_space(struct engine_model *m, int32_t id, const char *p, int len)
{
	char d[8];
	int dl;

	if (len <= 0 || p[0] != ' ')
		return false;
	dl = txl_detokenize(m->model, &id, 1, d, sizeof(d));
	return (dl >= 0 && dl < len) || (dl < 0 && dl != INT32_MIN &&
					 -dl < len);
}

int
engine_save(struct engine *e, const char *path)
{
	enum txl_status st;

	unsigned grace = signals_grace_pause();

	e->streams->saving = true;
	e->streams->signals_at_save = signals_received();
	{
		const struct tokvec *r = &e->samp->recent;
		int n = r->n < e->opts->repeat_last_n ? r->n
			: e->opts->repeat_last_n;

		st = txl_session_save_recent(e->streams->session, path,
					     r->v + (r->n - n), n);
	}
	e->streams->saving = false;
	signals_grace_resume(grace);
	if (st == TXL_ABORTED)
		return EXIT_INTERRUPTED;  /* the old file stays */
	if (st != TXL_OK) {
		errmsg("%s", engine_lib_error(st));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

static const char *
file_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" :
		S_ISCHR(m) ? "a character device" : S_ISBLK(m) ?
		"a block device" : S_ISSOCK(m) ? "a socket" :
		"not a plain file";
}

int
engine_check_save(const char *path)
{
	struct stat sb;
	char *real, *slash;
	const char *dir;
	int e = 0;

	/* as txl_session_save() goes: through a symbolic link to a regular
	 * file, replaced by a new file in that file's directory */
	if (stat(path, &sb) == 0) {
		if (!S_ISREG(sb.st_mode)) {
			errmsg("%s: not a regular file (%s): a state is saved "
			       "only over a regular file", path,
			       file_kind(sb.st_mode));
			return EXIT_RUNTIME;
		}
		real = realpath(path, NULL);
		e = real ? 0 : errno;
	} else {
		e = errno;
		/* a new file, unless a dangling symbolic link is there */
		real = e == ENOENT && lstat(path, &sb) != 0 ? xstrdup(path)
			: NULL;
	}
	if (!real) {
		errmsg("%s: %s", path, strerror(e));
		return EXIT_RUNTIME;
	}
	slash = strrchr(real, '/');
	if (!slash) {
		dir = ".";
	} else if (slash == real) {
		dir = "/";
	} else {
		*slash = '\0';
		dir = real;
	}
	e = faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0 ? 0 : errno;
	if (e)
		errmsg("%s: cannot save a state in %s: %s", path, dir,
		       strerror(e));
	free(real);
	return e ? EXIT_RUNTIME : EXIT_OK;
}

int
engine_load(struct engine *e, const char *path)
{
	int max = e->opts->repeat_last_n > 0 ? e->opts->repeat_last_n : 0;
	int32_t *ids = xrealloc(NULL, (size_t)(max ? max : 1) *
				sizeof(int32_t));
	int n = 0, state_len = 0;
	enum txl_status st = txl_session_load_recent(e->streams->session,
						     path, ids, max, &n);

	if (st == TXL_ERR_INVALID &&
	    txl_state_mem_len(path, &state_len) == TXL_OK &&
	    state_len > engine_params(e).mem_len) {
		/* the memory does not fit: --mem-len (or a config's) asks
		 * for less than the state's */
		if (e->samp->keep_sampler)	/* the REPL's /load */
			errmsg("%s: saved with mem_len %d, it holds more "
			       "positions than mem_len %d keeps: '/set mem_len "
			       "%d', then /load it", path, state_len,
			       engine_params(e).mem_len,
			       state_len);
		else
			errmsg("%s: saved with mem_len %d, it holds more "
			       "positions than mem_len %d keeps: leave "
			       "--mem-len out (the state's %d is used), or give "
			       "a larger one", path, state_len,
			       engine_params(e).mem_len,
			       state_len);
		free(ids);
		return EXIT_BADMODEL;
	}
	if (st != TXL_OK) {
		free(ids);
		errmsg("%s", engine_lib_error(st));
		return st == TXL_ERR_IO ? EXIT_RUNTIME : EXIT_BADMODEL;
	}
	e->samp->recent.n = 0;
	tokvec_add(&e->samp->recent, ids, n);
	free(ids);
	/* the REPL's sampler goes on from the loaded text, not its own */
	if (e->samp->sampler) {
		txl_sampler_reset(e->samp->sampler);
		engine_seed_sampler(e, e->samp->sampler);
	}
	/* the state predicts the token after its text: an empty prompt
	 * continues that text */
	e->streams->have_logits =
		txl_session_n_logits(e->streams->session) > 0;
	e->streams->started = true;
	return EXIT_OK;
}

void
engine_print_mem(struct engine *e, FILE *f, const char *prefix)
{
	struct txl_session_params p = engine_params(e);
	int fill = txl_session_mem_fill(e->streams->session);
	long long past = (long long)txl_session_n_past(e->streams->session);
	/* the tokens a generated one depends on, itself included */
	long long field = (long long)txl_session_receptive_field(e->mod->model,
								 &p, 1);
	const struct txl_hparams *hp = e->mod->hp;
	double mean;
	int most;

	if (!txl_model_has_memory(e->mod->model)) {
		/* no memory: every prediction sees its window only */
		if (p.stride > 1)
			fprintf(f, "%sno memory (attn_type %d): a window of up "
				"to %d tokens is recomputed for every %d tokens "
				"predicted", prefix, hp->attn_type, p.seg_len,
				p.stride);
		else
			fprintf(f, "%sno memory (attn_type %d): a window of the "
				"last %d tokens is recomputed for every token",
				prefix, hp->attn_type, p.seg_len);
		fprintf(f, ", %lld token%s consumed, receptive field %lld "
			"tokens\n", past, past == 1 ? "" : "s", field);
		return;
	}
	if ((most = txl_model_spans(e->mod->model, p.mem_len, &mean)) >= 0) {
		/* the spans: full from the start (zero states before the
		 * text) */
		fprintf(f, "%smemory: each head its span (mean %.0f, longest "
			"%d positions) in its layer's window, zero states "
			"before the text; %lld token%s consumed, receptive "
			"field %lld tokens\n", prefix, mean, most, past,
			past == 1 ? "" : "s", field);
		return;
	}
	fprintf(f, "%smemory: %d/%d positions (%.0f%%), %lld token%s "
		"consumed, receptive field %lld tokens (the last and %d layers "
		"x mem_len %d before it)\n", prefix, fill, p.mem_len,
		p.mem_len ? 100.0 * fill / p.mem_len : 0.0, past,
		past == 1 ? "" : "s", field, hp->n_layer, p.mem_len);
}
