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
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine-model.h"
#include "errors.h"
#include "progress.h"
#include "srv.h"
#include "utf8.h"

/* stop strings of a request, at most (OpenAI's: 4) */
#define STOP_MAX 16

void
job_unref(struct job *j)
{
	if (!j || --j->refs > 0)
		return;
	for (int i = 0; i < j->n_tasks; i++) {
		struct task *t = &j->tasks[i];

		strbuf_free(&t->text);
		cJSON_Delete(t->lp_tokens);
		cJSON_Delete(t->lp_values);
		cJSON_Delete(t->lp_top);
		cJSON_Delete(t->lp_offsets);
		/* prompts are shared by the choices of one prompt: the first
		 * of them owns it */
		if (t->index % (j->n_tasks / j->n_prompts) == 0) {
			free(t->prompt);
			free((char *)t->prompt_text);
		}
	}
	free(j->tasks);
	strlist_clear(&j->stop);
	free(j->session);
	free(j->error);
	free(j);
}

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

/* A number field in the range of txlgen's setting @p key (NULL: none,
 * @p lo .. @p hi); absent or null leaves *v. */
static bool
get_number(const cJSON *req, const char *field, const char *key, double lo,
	   double hi, bool integer, double *v, int *status, char **err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, field);
	char why[256];

	if (!f || cJSON_IsNull(f))
		return true;
	if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
		return fail(status, err, "'%s' must be a number, not %s",
			    field, kind(f));
	if (integer && f->valuedouble != floor(f->valuedouble))
		return fail(status, err, "'%s' must be a whole number, not %g",
			    field, f->valuedouble);
	if (key) {
		const struct setting *s = setting_find(key);

		if (!setting_check_range(s, f->valuedouble, why, sizeof(why)))
			return fail(status, err, "'%s': %s", field, why);
	} else if (f->valuedouble < lo || f->valuedouble > hi) {
		return fail(status, err, "'%s' must be from %g to %g, not %g",
			    field, lo, hi, f->valuedouble);
	}
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
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, field);
	const struct setting *s = setting_find(key);
	char why[256], text[32];
	double v;

	if (!f || cJSON_IsNull(f))
		return true;
	if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
		return fail(status, err, "'%s' must be a number, not %s",
			    field, kind(f));
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
 * scheduler's. */
static int
tokenize(const char *text, size_t len, int32_t **ids)
{
	struct engine *e = sched_engine();
	struct engine_model tmp = { .model = e->mod->model, .hp = e->mod->hp };
	int n = engine_tokenize(&tmp, text, len);

	*ids = n > 0 ? tmp.ids : (free(tmp.ids), NULL);
	return n;
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
 * of strings or a list of lists of ids; absent: one empty prompt. */
static struct task *
prompts(const cJSON *req, int *n_out, int *status, char **err)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "prompt");
	struct task *t;
	int n = 1;
	bool many = cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 &&
		!cJSON_IsNumber(cJSON_GetArrayItem(p, 0));

	if (many)
		n = cJSON_GetArraySize(p);
	t = xrealloc(NULL, (size_t)n * sizeof(*t));
	memset(t, 0, (size_t)n * sizeof(*t));
	*n_out = n;
	if (!p || cJSON_IsNull(p)) {
		t[0].prompt_text = xstrdup("");
		return t;
	}
	for (int i = 0; i < n; i++) {
		char field[32];

		snprintf(field, sizeof(field), many ? "prompt[%d]" : "prompt",
			 i);
		if (!one_prompt(many ? cJSON_GetArrayItem(p, i) : p, field,
				&t[i], status, err)) {
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
	struct job *j = xrealloc(NULL, sizeof(*j));
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
	int64_t total = 0;
	static unsigned long counter;

	memset(j, 0, sizeof(*j));
	j->refs = 1;
	j->ignore_eos = o->ignore_eos;
	for (int i = 0; i < o->stop.n; i++)
		strlist_add(&j->stop, o->stop.v[i]);
	if (!cJSON_IsObject(req)) {
		fail(status, err, "the request body must be a JSON object");
		goto bad;
	}
	if (!get_number(req, "max_tokens", NULL, 0, srv.max_tokens, true,
			&max_tokens, status, err) ||
	    !get_setting(req, "temperature", "temp", &ro, status, err) ||
	    !get_setting(req, "top_p", "top_p", &ro, status, err) ||
	    !get_setting(req, "min_p", "min_p", &ro, status, err) ||
	    !get_setting(req, "top_k", "top_k", &ro, status, err) ||
	    !get_setting(req, "repeat_penalty", "repeat_penalty", &ro,
			 status, err) ||
	    !get_setting(req, "repeat_last_n", "repeat_last_n", &ro, status,
			 err) ||
	    !get_number(req, "n", NULL, 1, srv.max_n, true, &n, status,
			err) ||
	    !get_number(req, "logprobs", NULL, 0, 20, true, &logprobs,
			status, err) ||
	    !get_setting(req, "seed", "seed", &ro, status, err) ||
	    !get_bool(req, "echo", &j->echo, status, err) ||
	    !get_bool(req, "stream", &j->stream, status, err) ||
	    !get_bool(req, "ignore_eos", &j->ignore_eos, status, err) ||
	    !get_stop(req, &j->stop, status, err))
		goto bad;
	if (sess && !cJSON_IsNull(sess)) {
		if (!cJSON_IsString(sess) || !session_id_valid(sess->valuestring)) {
			fail(status, err, "'session' must be a name of 1 to 64 "
			     "letters, digits, '-' and '_'");
			goto bad;
		}
		j->session = xstrdup(sess->valuestring);
	}
	pr = prompts(req, &n_prompts, status, err);
	if (!pr)
		goto bad;
	j->n_prompts = n_prompts;
	for (int i = 0; i < n_prompts; i++)
		total += pr[i].n_prompt;
	if (total > srv.max_prompt) {
		fail(status, err, "'prompt': %lld tokens, more than this "
		     "server's limit of %d", (long long)total, srv.max_prompt);
		goto bad;
	}
	if (j->session && (n_prompts > 1 || n > 1)) {
		fail(status, err, "'session': one prompt and n 1 only (a "
		     "session continues one text)");
		goto bad;
	}
	if ((int)n * n_prompts > srv.parallel * 4 + srv.max_n) {
		fail(status, err, "'n' times the prompts: %d choices, more "
		     "than this server takes in one request", (int)n *
		     n_prompts);
		goto bad;
	}

	j->max_tokens = (int)max_tokens;
	j->logprobs = (int)logprobs;
	/* the tasks' seeds are their own (below) */
	j->sp = options_sampler_params(&ro, 0);
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
		t->lp_tokens = cJSON_CreateArray();
		t->lp_values = cJSON_CreateArray();
		t->lp_top = cJSON_CreateArray();
		t->lp_offsets = cJSON_CreateArray();
	}
	free(pr);
	j->created = time(NULL);
	snprintf(j->id, sizeof(j->id), "cmpl-%lx%lx", (unsigned long)j->created,
		 ++counter);
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

/* choice i's logprobs rows [from, to), or null without logprobs */
static cJSON *
logprobs_json(const struct job *j, const struct task *t, int from, int to)
{
	cJSON *o, *a[4];
	const cJSON *src[4] = { t->lp_tokens, t->lp_values, t->lp_top,
				t->lp_offsets };
	static const char *const names[4] = { "tokens", "token_logprobs",
					       "top_logprobs", "text_offset" };

	if (j->logprobs < 0)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	for (int k = 0; k < 4; k++) {
		a[k] = cJSON_CreateArray();
		for (int i = from; i < to; i++)
			cJSON_AddItemToArray(a[k], cJSON_Duplicate(
				cJSON_GetArrayItem(src[k], i), true));
		cJSON_AddItemToObject(o, names[k], a[k]);
	}
	return o;
}

static cJSON *
envelope(const struct job *j)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "id", j->id);
	cJSON_AddStringToObject(o, "object", "text_completion");
	cJSON_AddNumberToObject(o, "created", (double)j->created);
	cJSON_AddStringToObject(o, "model", srv.model_name);
	return o;
}

static cJSON *
usage(const struct job *j)
{
	cJSON *u = cJSON_CreateObject();

	cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->prompt_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens",
				(double)j->completion_tokens);
	cJSON_AddNumberToObject(u, "total_tokens",
				(double)(j->prompt_tokens +
					 j->completion_tokens));
	return u;
}

static char *
print(cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	cJSON_Delete(o);
	if (!s)
		die_oom();
	return s;
}

char *
api_completion_json(struct job *j)
{
	cJSON *o = envelope(j), *choices = cJSON_CreateArray();

	for (int i = 0; i < j->n_tasks; i++) {
		struct task *t = &j->tasks[i];
		cJSON *c = cJSON_CreateObject();
		char *text = strndup(t->text.s ? t->text.s : "", t->text.len);

		if (!text)
			die_oom();
		cJSON_AddStringToObject(c, "text", text);
		free(text);
		cJSON_AddNumberToObject(c, "index", i);
		cJSON_AddItemToObject(c, "logprobs", logprobs_json(j, t, 0,
			cJSON_GetArraySize(t->lp_tokens)));
		cJSON_AddStringToObject(c, "finish_reason", t->finish ?
					t->finish : "length");
		cJSON_AddItemToArray(choices, c);
	}
	cJSON_AddItemToObject(o, "choices", choices);
	cJSON_AddItemToObject(o, "usage", usage(j));
	return print(o);
}

char *
api_stream_events(struct job *j, bool with_usage)
{
	struct strbuf b = { 0 };

	for (int i = 0; i < j->n_tasks; i++) {
		struct task *t = &j->tasks[i];
		int rows = cJSON_GetArraySize(t->lp_tokens);
		bool fresh = t->text.len > t->sent || (int)t->lp_sent < rows;
		bool end = t->finish && !t->end_sent;
		cJSON *o, *choices, *c;
		char *s, *text;

		if (!fresh && !end)
			continue;
		o = envelope(j);
		choices = cJSON_CreateArray();
		c = cJSON_CreateObject();
		text = strndup(t->text.s ? t->text.s + t->sent : "",
			       t->text.len - t->sent);
		if (!text)
			die_oom();
		cJSON_AddStringToObject(c, "text", text);
		free(text);
		cJSON_AddNumberToObject(c, "index", i);
		cJSON_AddItemToObject(c, "logprobs", logprobs_json(j, t,
			(int)t->lp_sent, rows));
		if (end)
			cJSON_AddStringToObject(c, "finish_reason", t->finish);
		else
			cJSON_AddNullToObject(c, "finish_reason");
		cJSON_AddItemToArray(choices, c);
		cJSON_AddItemToObject(o, "choices", choices);
		t->sent = t->text.len;
		t->lp_sent = (size_t)rows;
		t->end_sent = end || t->end_sent;
		s = print(o);
		strbuf_add(&b, "data: ", 6);
		strbuf_add(&b, s, strlen(s));
		strbuf_add(&b, "\n\n", 2);
		free(s);
	}
	if (sched_job_done(j) && !j->done_sent) {
		if (with_usage) {
			cJSON *o = envelope(j);
			char *s;

			cJSON_AddItemToObject(o, "choices", cJSON_CreateArray());
			cJSON_AddItemToObject(o, "usage", usage(j));
			s = print(o);
			strbuf_add(&b, "data: ", 6);
			strbuf_add(&b, s, strlen(s));
			strbuf_add(&b, "\n\n", 2);
			free(s);
		}
		strbuf_add(&b, "data: [DONE]\n\n", 14);
		j->done_sent = true;
	}
	if (!b.len)
		return NULL;
	strbuf_add(&b, "", 0);
	return b.s;
}
