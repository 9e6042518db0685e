/* SPDX-License-Identifier: MIT */
/*
 * api.c - the completions API: a request's JSON into a job (every field
 * checked, named in the message when wrong; unknown fields ignored), and
 * a job's progress into the response or its server-sent events.
 *
 * Defaults are the server's settings (txlgen's, with the model's
 * recommended ones), not OpenAI's: a request without sampling fields
 * gets the text txlgen gives.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine-model.h"
#include "errors.h"
#include "input.h"
#include "progress.h"
#include "srv.h"
#include "suggest.h"
#include "utf8.h"

/* stop strings of a request, at most (OpenAI's: 4) */
#define STOP_MAX 16

static bool
fail(int *status, char **err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool
fail(int *status, char **err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*status = 400;
	*err = xstrdup(msg);
	return false;
}

static const char *
kind(const cJSON *v)
{
	return cJSON_IsNull(v) ? "null" : cJSON_IsBool(v) ? "a boolean"
		: cJSON_IsNumber(v) ? "a number" : cJSON_IsString(v)
		? "a string" : cJSON_IsArray(v) ? "an array" : "an object";
}

/* Field @p f of a request: a finite number (absent or null: true, and
 * *@p f NULL). */
static bool
number_field(const cJSON *req, const char *field, const cJSON **f,
	     int *status, char **err)
{
	*f = cJSON_GetObjectItemCaseSensitive(req, field);
	if (!*f || cJSON_IsNull(*f)) {
		*f = NULL;
		return true;
	}
	if (!cJSON_IsNumber(*f))
		return fail(status, err, "'%s' must be a number, not %s",
			    field, kind(*f));
	if (!isfinite((*f)->valuedouble))
		return fail(status, err, "'%s' must be a finite number",
			    field);
	return true;
}

/* A number field from @p lo to @p hi; absent or null leaves *v. */
static bool
get_number(const cJSON *req, const char *field, double lo, double hi,
	   bool integer, double *v, int *status, char **err)
{
	const cJSON *f;

	if (!number_field(req, field, &f, status, err) || !f)
		return !f;
	if (integer && f->valuedouble != floor(f->valuedouble))
		return fail(status, err, "'%s' must be a whole number, not %g",
			    field, f->valuedouble);
	if (f->valuedouble < lo || f->valuedouble > hi)
		return fail(status, err, "'%s' must be from %g to %g, not %g",
			    field, lo, hi, f->valuedouble);
	*v = f->valuedouble;
	return true;
}

static bool
get_bool(const cJSON *req, const char *field, bool *v, int *status,
	 char **err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, field);

	if (!f || cJSON_IsNull(f))
		return true;
	if (!cJSON_IsBool(f))
		return fail(status, err, "'%s' must be true or false, not %s",
			    field, kind(f));
	*v = cJSON_IsTrue(f);
	return true;
}

/* A request's field of txlgen's setting @p key (its value of the
 * command line, in its range), into @p o as the command line sets it;
 * absent or null leaves it. */
static bool
get_setting(const cJSON *req, const char *field, const char *key,
	    struct txlgen_options *o, int *status, char **err)
{
	const struct setting *s = setting_find(key);
	const cJSON *f;
	char why[256], text[32];
	double v;

	if (!number_field(req, field, &f, status, err) || !f)
		return !f;
	v = f->valuedouble;
	if (s->type == ST_FLOAT) {
		if (!setting_check_range(s, v, why, sizeof(why)))
			return fail(status, err, "'%s': %s", field, why);
		*(double *)setting_ptr(s, o) = v;
		return true;
	}
	if (v != floor(v))
		return fail(status, err, "'%s' must be a whole number, not %g",
			    field, v);
	/* clamped to beyond every integer setting's range */
	snprintf(text, sizeof(text), "%.17g", v);
	if (!setting_set_integer(s, o, (long long)fmax(-0x1p62, fmin(v,
				 0x1p62)), text, why, sizeof(why)))
		return fail(status, err, "'%s': %s", field, why);
	return true;
}

/* A tokenizer for a connection's thread: the engine's scratch is the
 * scheduler's.  Chunk by chunk (lines, each with its newline) as txlgen
 * reads a text, spm_encode a file and the model's training its corpus:
 * SentencePiece's encode of a whole text can part the same line's
 * pieces otherwise (its ties go another way after a newline). */
static int
tokenize(const char *text, size_t len, int32_t **ids)
{
	struct engine *e = sched_engine();
	struct engine_model tmp = { .model = e->mod->model, .hp = e->mod->hp };
	int32_t *v = NULL;
	size_t n = 0, cap = 0;

	while (len > 0) {
		size_t c = input_chunk_len(text, len);
		int k = engine_tokenize(&tmp, text, c);

		if (k < 0 || n + (size_t)k > INT_MAX) {
			free(v);
			free(tmp.ids);
			*ids = NULL;
			return -1;
		}
		if (n + (size_t)k > cap) {
			cap = (n + (size_t)k) * 2;
			v = xrealloc(v, cap * sizeof(*v));
		}
		memcpy(v + n, tmp.ids, (size_t)k * sizeof(*v));
		n += (size_t)k;
		text += c;
		len -= c;
	}
	free(tmp.ids);
	if (!n)
		free(v);
	*ids = n ? v : NULL;
	return (int)n;
}

int
api_tokenize(const char *text, size_t len, int32_t **ids)
{
	return tokenize(text, len, ids);
}

char *
api_detokenize(const int32_t *ids, int n, int *bad)
{
	struct engine *e = sched_engine();
	struct engine_model tmp = { .model = e->mod->model, .hp = e->mod->hp };
	struct strbuf b = { 0 };

	*bad = -1;
	for (int i = 0; i < n; i++) {
		int len;
		const char *p;

		if (ids[i] < 0 || ids[i] >= e->mod->hp->n_token) {
			*bad = i;
			break;
		}
		p = engine_piece(&tmp, ids[i], &len);
		/* the first piece of a text loses SentencePiece's space */
		if (p && i == 0 && len > 0 &&
		    engine_drops_space(&tmp, ids[i], p, len)) {
			p++;
			len--;
		}
		strbuf_add(&b, p ? p : "", p ? (size_t)len : 0);
	}
	free(tmp.piece);
	strbuf_add(&b, "", 0);
	if (*bad >= 0) {
		strbuf_free(&b);
		return NULL;
	}
	return b.s;
}

/* A list of token ids; NULL if @p a is not one (an error set when it
 * looked like one but had a bad id). */
static int32_t *
id_list(const cJSON *a, const char *field, int *n, int *status, char **err)
{
	const int n_token = sched_engine()->mod->hp->n_token;
	int m = cJSON_GetArraySize(a), k = 0;
	int32_t *ids = xrealloc(NULL, (size_t)(m ? m : 1) * sizeof(int32_t));
	const cJSON *it;

	cJSON_ArrayForEach(it, a) {
		if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
		    it->valuedouble >= n_token ||
		    it->valuedouble != floor(it->valuedouble)) {
			free(ids);
			fail(status, err, "'%s': item %d is not a token id "
			     "(a whole number from 0 to %d)", field, k,
			     n_token - 1);
			return NULL;
		}
		ids[k++] = (int32_t)it->valuedouble;
	}
	*n = k;
	return ids;
}

/* One prompt: a string (tokenized) or a list of ids. */
static bool
one_prompt(const cJSON *p, const char *field, struct task *t, int *status,
	   char **err)
{
	if (cJSON_IsString(p)) {
		size_t len = strlen(p->valuestring);

		if (!utf8_valid(p->valuestring, len))
			return fail(status, err, "'%s' is not valid UTF-8",
				    field);
		t->prompt_text = xstrdup(p->valuestring);
		t->prompt_len = len;
		t->n_prompt = tokenize(p->valuestring, len, &t->prompt);
		if (t->n_prompt < 0)
			return fail(status, err, "'%s' cannot be tokenized",
				    field);
		return true;
	}
	if (cJSON_IsArray(p)) {
		int bad;

		t->prompt = id_list(p, field, &t->n_prompt, status, err);
		if (!t->prompt)
			return false;
		t->prompt_text = api_detokenize(t->prompt, t->n_prompt, &bad);
		t->prompt_len = strlen(t->prompt_text);
		return true;
	}
	return fail(status, err, "'%s' must be a string or a list of token "
		    "ids, not %s", field, kind(p));
}

/* The prompts of a request: "prompt" is a string, a list of ids, a list
 * of strings or a list of lists of ids; absent: one empty prompt.  The
 * limits that need no tokens are checked before any is made: the
 * choices (@p n of each prompt), then the tokens as they come. */
static struct task *
prompts(const cJSON *req, int n_each, int *n_out, int *status, char **err)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "prompt");
	struct task *t;
	int n = 1;
	int64_t total = 0;
	bool many = cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 &&
		!cJSON_IsNumber(cJSON_GetArrayItem(p, 0));
	const cJSON *it = many ? p->child : p;

	if (many)
		n = cJSON_GetArraySize(p);
	if ((int64_t)n_each * n > srv.parallel * 4 + srv.max_n) {
		fail(status, err, "'n' times the prompts: %lld choices, more "
		     "than this server takes in one request",
		     (long long)n_each * n);
		return NULL;
	}
	t = xrealloc(NULL, (size_t)n * sizeof(*t));
	memset(t, 0, (size_t)n * sizeof(*t));
	*n_out = n;
	if (!p || cJSON_IsNull(p)) {
		t[0].prompt_text = xstrdup("");
		return t;
	}
	for (int i = 0; i < n; i++, it = many ? it->next : NULL) {
		char field[32];
		bool ok;

		snprintf(field, sizeof(field), many ? "prompt[%d]" : "prompt",
			 i);
		ok = one_prompt(it, field, &t[i], status, err);
		if (ok)
			total += t[i].n_prompt;
		if (ok && total > srv.max_prompt)
			ok = fail(status, err, "'prompt': more than this "
				  "server's limit of %d tokens",
				  srv.max_prompt);
		if (!ok) {
			for (int k = 0; k <= i; k++) {
				free(t[k].prompt);
				free((char *)t[k].prompt_text);
			}
			free(t);
			return NULL;
		}
	}
	return t;
}

static bool
get_stop(const cJSON *req, struct strlist *stop, int *status, char **err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, "stop"), *it;
	int k = 0;

	if (!f || cJSON_IsNull(f))
		return true;
	if (cJSON_IsString(f)) {
		strlist_clear(stop);
		if (*f->valuestring)
			strlist_add(stop, f->valuestring);
		return true;
	}
	if (!cJSON_IsArray(f))
		return fail(status, err, "'stop' must be a string or a list "
			    "of strings, not %s", kind(f));
	if (cJSON_GetArraySize(f) > STOP_MAX)
		return fail(status, err, "'stop': %d strings, more than %d",
			    cJSON_GetArraySize(f), STOP_MAX);
	strlist_clear(stop);
	cJSON_ArrayForEach(it, f) {
		if (!cJSON_IsString(it))
			return fail(status, err, "'stop[%d]' must be a string, "
				    "not %s", k, kind(it));
		if (*it->valuestring)
			strlist_add(stop, it->valuestring);
		k++;
	}
	return true;
}

/* OpenAI's logit_bias, {"ID": BIAS}, or llama-server's [[ID or "TEXT",
 * BIAS or false]], made for the model into @p lb; absent: the server's
 * --logit-bias, @p dflt. */
static bool
get_logit_bias(const cJSON *req, const struct strlist *dflt,
	       struct logit_bias *lb, int *status, char **err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, "logit_bias");
	const cJSON *it;
	struct engine *e = sched_engine();
	struct engine_model tmp = { .model = e->mod->model, .hp = e->mod->hp };
	struct strlist items = { 0 };
	const struct strlist *spec = dflt;
	char *item, *why;
	int k = 0, rc;

	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsObject(f) && !cJSON_IsArray(f))
			return fail(status, err, "'logit_bias' must be an "
				    "object of token ids and biases, not %s",
				    kind(f));
		cJSON_ArrayForEach(it, f) {
			const cJSON *key = it, *b = it;
			double v;

			if (cJSON_IsArray(f)) {
				key = cJSON_GetArrayItem(it, 0);
				b = cJSON_GetArrayItem(it, 1);
				if (!cJSON_IsArray(it) ||
				    cJSON_GetArraySize(it) != 2 ||
				    !(cJSON_IsNumber(key) ||
				      cJSON_IsString(key))) {
					strlist_clear(&items);
					return fail(status, err, "'logit_bias[%d]' "
						    "must be [id or text, bias]",
						    k);
				}
			}
			if (!(cJSON_IsNumber(b) && isfinite(b->valuedouble)) &&
			    !cJSON_IsFalse(b)) {
				strlist_clear(&items);
				return fail(status, err, "'logit_bias': the bias "
					    "of item %d must be a number", k);
			}
			v = cJSON_IsFalse(b) ? -INFINITY : b->valuedouble;
			if (cJSON_IsNumber(key) && key != b) {
				if (asprintf(&item, "%.17g=%.17g",
					     key->valuedouble, v) < 0)
					die_oom();
			} else if (asprintf(&item, "%s=%.17g", key == b ?
					    it->string : key->valuestring,
					    v) < 0) {
				die_oom();
			}
			strlist_add(&items, item);
			free(item);
			k++;
		}
		spec = &items;
	}
	rc = engine_logit_bias(&tmp, spec, "'logit_bias'", lb, &why);
	free(tmp.ids);
	strlist_clear(&items);
	if (rc != EXIT_OK) {
		*status = 400;
		*err = why;
		return false;
	}
	return true;
}

/* llama-server's mirostat: 0 off, 2 on (mirostat_tau, default 5); its
 * first version is not implemented. */
static bool
get_mirostat(const cJSON *req, struct txlgen_options *o, int *status,
	     char **err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, "mirostat");

	if (!f || cJSON_IsNull(f))
		return true;
	if (!cJSON_IsNumber(f) || (f->valuedouble != 0 &&
				   f->valuedouble != 1 &&
				   f->valuedouble != 2))
		return fail(status, err, "'mirostat' must be 0 (off) or 2");
	if (f->valuedouble == 1)
		return fail(status, err, "'mirostat': 1 (mirostat's first "
			    "version) is not implemented: use 2");
	if (f->valuedouble == 0)
		o->mirostat_tau = 0;
	else if (o->mirostat_tau == 0)
		o->mirostat_tau = 5;
	return true;
}

/* The fields of a completions request: OpenAI's, then the extensions
 * txlgen-server(1) lists.  model and user are taken and not used: one
 * model is served, and nothing is logged by user. */
static const char *const known_fields[] = {
	"model", "prompt", "suffix", "max_tokens", "temperature", "top_p",
	"n", "stream", "stream_options", "logprobs", "echo", "stop",
	"presence_penalty", "frequency_penalty", "best_of", "logit_bias",
	"user", "seed",
	"session", "top_k", "min_p", "repeat_penalty", "repeat_last_n",
	"ignore_eos", "typical_p", "mirostat", "mirostat_tau", "mirostat_eta",
};

/* llama-server's names for fields that have others here */
static const char *const their_fields[][2] = {
	{ "n_predict", "max_tokens" }, { "n_probs", "logprobs" },
	{ "temp", "temperature" }, { "penalty_last_n", "repeat_last_n" },
	{ "content", "prompt" },
};

/* Every field known, or with --lenient let be; what is not done is
 * refused by name, not ignored (suffix, best_of other than n). */
static bool
check_fields(const cJSON *req, double n, int *status, char **err)
{
	const int n_known = (int)(sizeof(known_fields) /
				  sizeof(known_fields[0]));
	const cJSON *f, *bo;

	f = cJSON_GetObjectItemCaseSensitive(req, "suffix");
	if (f && !cJSON_IsNull(f) && !(cJSON_IsString(f) && !*f->valuestring))
		return fail(status, err, "'suffix' is not implemented: a "
			    "Transformer-XL model continues a text, it does "
			    "not fill in between two");
	bo = cJSON_GetObjectItemCaseSensitive(req, "best_of");
	if (bo && !cJSON_IsNull(bo) &&
	    !(cJSON_IsNumber(bo) && bo->valuedouble == n))
		return fail(status, err, "'best_of' other than 'n' is not "
			    "implemented (it would rank choices by their "
			    "log-probability)");
	if (srv.lenient)
		return true;
	cJSON_ArrayForEach(f, req) {
		const char *hint = NULL;
		bool known = false;

		for (int i = 0; i < n_known && !known; i++)
			known = !strcmp(f->string, known_fields[i]);
		if (known)
			continue;
		for (size_t i = 0; i < sizeof(their_fields) /
			     sizeof(their_fields[0]) && !hint; i++)
			if (!strcmp(f->string, their_fields[i][0]))
				hint = their_fields[i][1];
		if (!hint)
			hint = suggest_closest(f->string, known_fields,
					       n_known);
		return fail(status, err, "unknown field '%.64s'%s%s%s "
			    "(txlgen-server --lenient lets such fields be)",
			    f->string, hint ? "; did you mean '" : "",
			    hint ? hint : "", hint ? "'?" : "");
	}
	return true;
}

static uint64_t
random_seed(void)
{
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint64_t)now_s() * 2654435761u;
	return r & (uint64_t)SEED_MAX;
}

struct job *
api_completion_job(const cJSON *req, int *status, char **err)
{
	const struct txlgen_options *o = sched_engine()->opts;
	struct job *j = job_new();
	struct task *pr = NULL;
	/* the request's settings over the server's, as txlgen's options
	 * (a copy that owns nothing: its strings stay the server's) */
	struct txlgen_options ro = *o;
	double n = 1, logprobs = -1,
	       max_tokens = o->n_predict >= 0 ? o->n_predict : 16;
	uint64_t seed;
	const cJSON *sess = cJSON_IsObject(req) ?
		cJSON_GetObjectItemCaseSensitive(req, "session") : NULL;
	int n_prompts = 0;
	int64_t rows = 0;

	j->ignore_eos = o->ignore_eos;
	for (int i = 0; i < o->stop.n; i++)
		strlist_add(&j->stop, o->stop.v[i]);
	if (!cJSON_IsObject(req)) {
		fail(status, err, "the request body must be a JSON object");
		goto bad;
	}
	if (!get_number(req, "max_tokens", 0, srv.max_tokens, true,
			&max_tokens, status, err) ||
	    !get_setting(req, "temperature", "temp", &ro, status, err) ||
	    !get_setting(req, "top_p", "top_p", &ro, status, err) ||
	    !get_setting(req, "min_p", "min_p", &ro, status, err) ||
	    !get_setting(req, "top_k", "top_k", &ro, status, err) ||
	    !get_setting(req, "repeat_penalty", "repeat_penalty", &ro,
			 status, err) ||
	    !get_setting(req, "repeat_last_n", "repeat_last_n", &ro, status,
			 err) ||
	    !get_setting(req, "frequency_penalty", "frequency_penalty", &ro,
			 status, err) ||
	    !get_setting(req, "presence_penalty", "presence_penalty", &ro,
			 status, err) ||
	    !get_setting(req, "typical_p", "typical", &ro, status, err) ||
	    !get_setting(req, "mirostat_tau", "mirostat_tau", &ro, status,
			 err) ||
	    !get_setting(req, "mirostat_eta", "mirostat_eta", &ro, status,
			 err) ||
	    !get_mirostat(req, &ro, status, err) ||
	    !get_logit_bias(req, &o->logit_bias, &j->bias, status, err) ||
	    !get_number(req, "n", 1, srv.max_n, true, &n, status,
			err) ||
	    !get_number(req, "logprobs", 0, 20, true, &logprobs,
			status, err) ||
	    !get_setting(req, "seed", "seed", &ro, status, err) ||
	    !get_bool(req, "echo", &j->echo, status, err) ||
	    !get_bool(req, "stream", &j->stream, status, err) ||
	    !get_bool(req, "ignore_eos", &j->ignore_eos, status, err) ||
	    !get_stop(req, &j->stop, status, err) ||
	    !check_fields(req, n, status, err))
		goto bad;
	if (sess && !cJSON_IsNull(sess)) {
		if (!cJSON_IsString(sess) || !session_id_valid(sess->valuestring)) {
			fail(status, err, "'session' must be a name of 1 to 64 "
			     "letters, digits, '-' and '_'");
			goto bad;
		}
		j->session = xstrdup(sess->valuestring);
	}
	pr = prompts(req, (int)n, &n_prompts, status, err);
	if (!pr)
		goto bad;
	j->n_prompts = n_prompts;
	if (j->session && (n_prompts > 1 || n > 1)) {
		fail(status, err, "'session': one prompt and n 1 only (a "
		     "session continues one text)");
		goto bad;
	}
	/* the logprobs a request holds until it ends: a row a token, each
	 * with its alternatives */
	for (int i = 0; logprobs >= 0 && i < n_prompts; i++)
		rows += ((j->echo ? pr[i].n_prompt : 0) + (int64_t)max_tokens) *
			(int64_t)n * (1 + (int64_t)logprobs);
	if (rows > srv.max_logprob_rows) {
		fail(status, err, "'logprobs': %lld rows of log-probabilities "
		     "(tokens times n times 1 + logprobs), more than this "
		     "server's limit of %d", (long long)rows,
		     srv.max_logprob_rows);
		goto bad;
	}

	j->max_tokens = (int)max_tokens;
	j->logprobs = (int)logprobs;
	/* the tasks' seeds are their own (below) */
	j->sp = options_sampler_params(&ro, 0);
	j->sp.logit_bias_ids = j->bias.ids;
	j->sp.logit_bias = j->bias.bias;
	j->sp.n_logit_bias = j->bias.n;
	seed = ro.seed >= 0 ? (uint64_t)ro.seed : random_seed();
	j->n_tasks = (int)n * n_prompts;
	j->tasks = xrealloc(NULL, (size_t)j->n_tasks * sizeof(*j->tasks));
	memset(j->tasks, 0, (size_t)j->n_tasks * sizeof(*j->tasks));
	for (int i = 0; i < j->n_tasks; i++) {
		struct task *t = &j->tasks[i];
		const struct task *p = &pr[i / (int)n];

		t->job = j;
		t->index = i;
		t->prompt = p->prompt;
		t->n_prompt = p->n_prompt;
		t->prompt_text = p->prompt_text;
		t->prompt_len = p->prompt_len;
		/* the choices of a prompt as txlgen --n-samples' samples */
		t->seed = sample_seed(seed, i % (int)n);
	}
	free(pr);
	return j;
bad:
	for (int i = 0; pr && i < n_prompts; i++) {
		free(pr[i].prompt);
		free((char *)pr[i].prompt_text);
	}
	free(pr);
	j->n_tasks = 0;
	job_unref(j);
	return NULL;
}

/* ---- jobs into JSON: written straight, in time linear in the rows ---- */

/* What a response or an event says of one choice: the job's own rows for
 * a finished job, copies of the new ones for a running stream's event. */
struct view {
	const char *text;
	size_t len;
	const struct lp_row *lp;
	const struct lp_alt *alt;  /* job->logprobs a row */
	int n_lp;
	const char *finish;        /* NULL: null */
};

static void
put_str(FILE *f, const char *s)
{
	json_write_string(f, s, strlen(s));
}

/* A token's text as a JSON string; a piece that is part of a character
 * (a byte token) as OpenAI writes one, "bytes:\\xe2\\x80", so that the
 * JSON stays UTF-8. */
static void
put_piece(FILE *f, const char *p, size_t len)
{
	char buf[6 + 4 * 16 + 1];
	size_t n = 6;

	if (utf8_valid(p, len) || len > 16) {
		json_write_string(f, p, len);
		return;
	}
	memcpy(buf, "bytes:", 6);
	for (size_t i = 0; i < len; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\x%02x",
				      (unsigned char)p[i]);
	json_write_string(f, buf, n);
}

/* The token text of a row (its piece, less a space the text lacks). */
static const char *
row_piece(struct engine_model *m, const struct lp_row *r, int *len)
{
	const char *p = engine_piece(m, r->id, len);

	if (!p) {
		*len = 0;
		return "";
	}
	if (r->lead && *len > 0) {
		p++;
		(*len)--;
	}
	return p;
}

/* {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, OpenAI's,
 * and txlgen's "token_ranks" */
static void
put_logprobs(FILE *f, struct engine_model *m, const struct job *j,
	     const struct view *v)
{
	const int k = j->logprobs > 0 ? j->logprobs : 0;
	int len;
	const char *p;

	if (j->logprobs < 0) {
		fputs("null", f);
		return;
	}
	fputs("{\"tokens\":[", f);
	for (int i = 0; i < v->n_lp; i++) {
		p = row_piece(m, &v->lp[i], &len);
		fputs(i ? "," : "", f);
		put_piece(f, p, (size_t)len);
	}
	fputs("],\"token_logprobs\":[", f);
	for (int i = 0; i < v->n_lp; i++) {
		fputs(i ? "," : "", f);
		json_write_number(f, v->lp[i].lp);
	}
	fputs("],\"top_logprobs\":[", f);
	for (int i = 0; i < v->n_lp; i++) {
		const struct lp_alt *alt = v->alt + (size_t)i * k;
		/* pieces of one text are one key: the likelier is kept */
		char *key[20];
		int klen[20], n_key = 0;

		fputs(i ? "," : "", f);
		if (v->lp[i].no_top) {
			fputs("null", f);
			continue;
		}
		putc('{', f);
		for (int a = 0; a < v->lp[i].n_top && a < 20; a++) {
			bool dup = false;

			p = engine_piece(m, alt[a].id, &len);
			if (!p)
				len = 0;
			for (int b = 0; b < n_key && !dup; b++)
				dup = klen[b] == len &&
					!memcmp(key[b], p, (size_t)len);
			if (dup)
				continue;
			key[n_key] = xrealloc(NULL, (size_t)len + 1);
			memcpy(key[n_key], p ? p : "", (size_t)len);
			klen[n_key] = len;
			fputs(n_key++ ? "," : "", f);
			/* pieces that end a line make keys; a part of a
			 * character its bytes' */
			put_piece(f, key[n_key - 1], (size_t)len);
			putc(':', f);
			json_write_number(f, alt[a].lp);
		}
		putc('}', f);
		while (n_key > 0)
			free(key[--n_key]);
	}
	fputs("],\"text_offset\":[", f);
	for (int i = 0; i < v->n_lp; i++)
		fprintf(f, "%s%zu", i ? "," : "", v->lp[i].offset);
	fputs("],\"token_ranks\":[", f);
	for (int i = 0; i < v->n_lp; i++) {
		fputs(i ? "," : "", f);
		if (v->lp[i].rank > 0)
			fprintf(f, "%d", (int)v->lp[i].rank);
		else
			fputs("null", f);
	}
	fputs("]}", f);
}

static void
put_envelope(FILE *f, const struct job *j)
{
	fputs("{\"id\":", f);
	put_str(f, j->id);
	fprintf(f, ",\"object\":\"text_completion\",\"created\":%lld,"
		"\"model\":", (long long)j->created);
	put_str(f, srv.model_name);
}

static void
put_choice(FILE *f, struct engine_model *m, const struct job *j, int i,
	   const struct view *v)
{
	fputs("{\"text\":", f);
	json_write_string(f, v->text ? v->text : "", v->len);
	fprintf(f, ",\"index\":%d,\"logprobs\":", i);
	put_logprobs(f, m, j, v);
	fputs(",\"finish_reason\":", f);
	if (v->finish)
		put_str(f, v->finish);
	else
		fputs("null", f);
	putc('}', f);
}

static void
put_usage(FILE *f, int64_t in, int64_t out)
{
	fprintf(f, "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":"
		"%lld,\"total_tokens\":%lld}", (long long)in, (long long)out,
		(long long)(in + out));
}

static FILE *
open_out(char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);

	if (!f)
		die_oom();
	return f;
}

static char *
close_out(FILE *f, char **buf)
{
	if (fclose(f) != 0 || !*buf)
		die_oom();
	return *buf;
}

char *
api_completion_json(struct job *j)
{
	struct engine *e = sched_engine();
	struct engine_model m = { .model = e->mod->model, .hp = e->mod->hp };
	/* a finished job changes no more: it is read without the lock */
	const bool done = sched_job_done(j);
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (done)
		sched_unlock();
	f = open_out(&buf, &len);
	put_envelope(f, j);
	fputs(",\"choices\":[", f);
	for (int i = 0; i < j->n_tasks; i++) {
		const struct task *t = &j->tasks[i];
		struct view v = {
			.text = t->text.s, .len = t->text.len, .lp = t->lp,
			.alt = t->lp_alt, .n_lp = t->n_lp,
			.finish = t->finish ? t->finish : "length",
		};

		fputs(i ? "," : "", f);
		put_choice(f, &m, j, i, &v);
	}
	fputs("],", f);
	put_usage(f, j->prompt_tokens, j->completion_tokens);
	putc('}', f);
	close_out(f, &buf);
	free(m.piece);
	if (done)
		sched_lock();
	return buf;
}

/* An event's line: "data: ...\n\n" */
static void
put_event_start(FILE *f)
{
	fputs("data: ", f);
}

static void
put_event_end(FILE *f)
{
	fputs("\n\n", f);
}

char *
api_stream_events(struct job *j, bool with_usage)
{
	struct engine *e = sched_engine();
	struct engine_model m = { .model = e->mod->model, .hp = e->mod->hp };
	const int k = j->logprobs > 0 ? j->logprobs : 0;
	struct view *v = xrealloc(NULL, (size_t)j->n_tasks * sizeof(*v));
	int *which = xrealloc(NULL, (size_t)j->n_tasks * sizeof(int));
	int n_ev = 0, status = 0;
	bool end_job = false;
	int64_t in = 0, out = 0;
	char *error = NULL, *buf = NULL;
	size_t len = 0;
	FILE *f;

	/* under the lock: copies of what is new (the scheduler appends to
	 * the rows and the text meanwhile) */
	for (int i = 0; i < j->n_tasks; i++) {
		struct task *t = &j->tasks[i];
		const int rows = t->n_lp - t->lp_sent;
		const bool fresh = t->text.len > t->sent || rows > 0;
		const bool end = t->finish && !t->end_sent;
		struct view *w = &v[n_ev];

		if (!fresh && !end)
			continue;
		w->len = t->text.len - t->sent;
		w->text = w->len ? xrealloc(NULL, w->len) : NULL;
		if (w->len)
			memcpy((char *)w->text, t->text.s + t->sent, w->len);
		w->n_lp = rows;
		w->lp = NULL;
		w->alt = NULL;
		if (rows > 0) {
			w->lp = xrealloc(NULL, (size_t)rows * sizeof(*w->lp));
			memcpy((void *)w->lp, t->lp + t->lp_sent,
			       (size_t)rows * sizeof(*w->lp));
		}
		if (rows > 0 && k > 0) {
			size_t n = (size_t)rows * (size_t)k * sizeof(*w->alt);

			w->alt = xrealloc(NULL, n);
			memcpy((void *)w->alt, t->lp_alt + (size_t)t->lp_sent * k,
			       n);
		}
		w->finish = end ? t->finish : NULL;
		t->sent = t->text.len;
		t->lp_sent = t->n_lp;
		t->end_sent = end || t->end_sent;
		which[n_ev++] = i;
	}
	if (sched_job_done(j) && !j->done_sent) {
		end_job = true;
		j->done_sent = true;
		in = j->prompt_tokens;
		out = j->completion_tokens;
		status = j->status;
		if (status)
			error = xstrdup(j->error ? j->error
					: "the request failed");
	}
	if (!n_ev && !end_job) {
		free(v);
		free(which);
		return NULL;
	}

	sched_unlock();
	f = open_out(&buf, &len);
	for (int i = 0; i < n_ev; i++) {
		put_event_start(f);
		put_envelope(f, j);
		fputs(",\"choices\":[", f);
		put_choice(f, &m, j, which[i], &v[i]);
		fputs("]}", f);
		put_event_end(f);
		free((char *)v[i].text);
		free((void *)v[i].lp);
		free((void *)v[i].alt);
	}
	if (end_job && with_usage) {
		put_event_start(f);
		put_envelope(f, j);
		fputs(",\"choices\":[],", f);
		put_usage(f, in, out);
		putc('}', f);
		put_event_end(f);
	}
	/* a failure after the 200 went out: an event says what went wrong,
	 * as the error of a response would */
	if (error) {
		put_event_start(f);
		fputs("{\"error\":{\"message\":", f);
		put_str(f, error);
		fputs(",\"type\":", f);
		put_str(f, status == 401 ? "authentication_error"
			: status >= 500 ? "server_error"
			: "invalid_request_error");
		fprintf(f, ",\"param\":null,\"code\":%d}}", status);
		put_event_end(f);
		free(error);
	}
	if (end_job)
		fputs("data: [DONE]\n\n", f);
	close_out(f, &buf);
	free(m.piece);
	free(v);
	free(which);
	sched_lock();
	return buf;
}
