/* SPDX-License-Identifier: MIT */
/*
 * settings.c - the settings table.
 *
 * Every setting is described once, in settings[]; the command line
 * (cli.c), the config file and a model's recommended settings (config.c),
 * --print-config and the REPL's /set and /show all go through it, so that
 * they accept the same names, types and ranges and give the same
 * messages.  Ranges that the library enforces come from txl.h.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "txl.h"

#include "errors.h"
#include "settings.h"
#include "text.h"

#define OFF(field) offsetof(struct txlgen_options, field)
#define T SCOPE_TURN
#define S SCOPE_SESSION
#define START SCOPE_START

const struct setting settings[] = {
	/* key             option             type        offset             null   excl   min   max                    scope model */
	{ "model",         "--model",         ST_STRING,  OFF(model),        true,  false, 0,    0,                     START, false },
	{ "prompt",        "--prompt",        ST_STRING,  OFF(prompt),       true,  false, 0,    0,                     START, false },
	{ "text",          "--text",          ST_STRING,  OFF(text),         true,  false, 0,    0,                     START, false },
	{ "echo",          "--echo",          ST_BOOL,    OFF(echo),         false, false, 0,    1,                     T,     false },
	{ "n_predict",     "--n-predict",     ST_INT,     OFF(n_predict),    false, false, -1,   INT_MAX,               T,     true },
	{ "stop",          "--stop",          ST_LIST,    OFF(stop),         false, false, 0,    0,                     T,     true },
	{ "ignore_eos",    "--ignore-eos",    ST_BOOL,    OFF(ignore_eos),   false, false, 0,    1,                     T,     true },
	{ "temp",          "--temp",          ST_FLOAT,   OFF(temp),         false, false, 0,    100,                   T,     true },
	{ "top_k",         "--top-k",         ST_INT,     OFF(top_k),        false, false, 0,    INT_MAX,               T,     true },
	{ "top_p",         "--top-p",         ST_FLOAT,   OFF(top_p),        false, true,  0,    1,                     T,     true },
	{ "min_p",         "--min-p",         ST_FLOAT,   OFF(min_p),        false, false, 0,    1,                     T,     true },
	{ "repeat_penalty", "--repeat-penalty", ST_FLOAT, OFF(repeat_penalty), false, true, 0,   100,                   T,     true },
	{ "repeat_last_n", "--repeat-last-n", ST_INT,     OFF(repeat_last_n), false, false, 0,   TXL_REPEAT_LAST_N_MAX, T,     true },
	{ "seed",          "--seed",          ST_SEED,    OFF(seed),         true,  false, 0,    (double)SEED_MAX,      T,     false },
	{ "mem_len",       "--mem-len",       ST_INT,     OFF(mem_len),      true,  false, 0,    TXL_MEM_LEN_MAX,       S,     true },
	{ "seg_len",       "--seg-len",       ST_INT,     OFF(seg_len),      true,  false, 1,    TXL_SEG_LEN_MAX,       S,     true },
	{ "clamp_len",     "--clamp-len",     ST_INT,     OFF(clamp_len),    true,  false, 0,    INT_MAX,               S,     true },
	{ "same_length",   "--same-length",   ST_TRIBOOL, OFF(same_length),  true,  false, 0,    1,                     S,     true },
	{ "mem_init",      "--mem-init",      ST_MEM_INIT, OFF(mem_init),    true,  false, 0,    0,                     S,     true },
	{ "threads",       "--threads",       ST_INT,     OFF(threads),      false, false, 0,    1024,                  S,     false },
	{ "kv_type",       "--kv-type",       ST_KV_TYPE, OFF(kv_type),      false, false, 0,    0,                     S,     false },
	{ "compute",       "--compute",       ST_COMPUTE, OFF(compute),      false, false, 0,    0,                     S,     false },
	{ "score_stride",  "--score-stride",  ST_INT,     OFF(score_stride), true,  false, 1,    TXL_SEG_LEN_MAX,       START, false },
	{ "adapt",         "--adapt",         ST_FLOAT,   OFF(adapt),        false, false, 0,    TXL_ADAPT_LR_MAX,      START, false },
	{ "kl_ref_kv_type", "--kl-ref-kv-type", ST_KV_TYPE, OFF(kl_ref_kv_type), false, false, 0, 0,                  START, false },
	{ "kl_ref_compute", "--kl-ref-compute", ST_COMPUTE, OFF(kl_ref_compute), false, false, 0, 0,                  START, false },
	{ "read_all",      "--read-all",      ST_BOOL,    OFF(read_all),     false, false, 0,    1,                     T,     false },
	{ "json",          "--json",          ST_BOOL,    OFF(json),         false, false, 0,    1,                     T,     false },
	{ "stats",         "--stats",         ST_BOOL,    OFF(stats),        false, false, 0,    1,                     T,     false },
	{ "color",         "--color",         ST_COLOR,   OFF(color),        false, false, 0,    0,                     T,     false },
	{ "unbuffered",    "--unbuffered",    ST_BOOL,    OFF(unbuffered),   false, false, 0,    1,                     T,     false },
	{ "final_newline", "--final-newline", ST_BOOL,    OFF(final_newline), false, false, 0,   1,                     T,     false },
	{ "mmap",          "--mmap",          ST_BOOL,    OFF(mmap),         false, false, 0,    1,                     START, false },
	{ "prime",         "--prime",         ST_LIST,    OFF(prime),        false, false, 0,    0,                     START, false },
	{ "state_in",      "--state-in",      ST_STRING,  OFF(state_in),     true,  false, 0,    0,                     START, false },
	{ "state_out",     "--state-out",     ST_STRING,  OFF(state_out),    true,  false, 0,    0,                     START, false },
};
const int n_settings = (int)(sizeof(settings) / sizeof(settings[0]));
_Static_assert(sizeof(settings) / sizeof(settings[0]) <= SETTINGS_MAX,
	       "raise SETTINGS_MAX");

const char *const color_names[3] = { "auto", "always", "never" };
const char *const compute_names[2] = {
	[TXL_COMPUTE_F32] = "f32", [TXL_COMPUTE_BF16] = "bf16",
};
const char *const mem_init_names[2] = {
	[TXL_MEM_EMPTY] = "empty", [TXL_MEM_ZEROS] = "zeros",
};

const char *const *
setting_names(const struct setting *s, int *n)
{
	if (s->type == ST_KV_TYPE) {
		/* by enum txl_dtype, NULL for the types of no memory */
		static const char *kv_names[TXL_N_DTYPES];

		for (int i = 0; i < TXL_N_DTYPES; i++)
			kv_names[i] = txl_dtype_uses(i) & TXL_DTYPE_MEMORY ?
				txl_dtype_name(i) : NULL;
		*n = TXL_N_DTYPES;
		return kv_names;
	}
	if (s->type == ST_COMPUTE) {
		*n = (int)(sizeof compute_names / sizeof *compute_names);
		return compute_names;
	}
	if (s->type == ST_MEM_INIT) {
		*n = (int)(sizeof mem_init_names / sizeof *mem_init_names);
		return mem_init_names;
	}
	*n = (int)(sizeof color_names / sizeof *color_names);
	return color_names;
}

static const char *const origin_names[] = {
	"default", "model", "state file", "config file", "command line",
	"/set"
};

const char *
origin_name(enum origin from)
{
	return origin_names[from];
}

enum origin
setting_origin(const struct setting *s, const struct txlgen_options *o)
{
	return (enum origin)o->origin[s - settings];
}

void
setting_set_origin(const struct setting *s, struct txlgen_options *o,
		   enum origin from)
{
	o->origin[s - settings] = (unsigned char)from;
}

void
strlist_add(struct strlist *l, const char *s)
{
	l->v = xrealloc(l->v, (size_t)(l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = xstrdup(s);
}

void
strlist_clear(struct strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* A float default as the short decimal it was written as (0.8, not
 * 0.800000011920929), so that --print-config shows what a user types. */
static double
tidy(float f)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.7g", (double)f);
	return strtod(buf, NULL);
}

void
options_init(struct txlgen_options *o)
{
	struct txl_sampler_params sp = txl_sampler_params_default();

	memset(o, 0, sizeof(*o));
	o->n_predict = 256;
	o->temp = tidy(sp.temp);
	o->top_k = sp.top_k;
	o->top_p = tidy(sp.top_p);
	o->min_p = tidy(sp.min_p);
	o->repeat_penalty = tidy(sp.repeat_penalty);
	o->repeat_last_n = 64;
	o->seed = SEED_RANDOM;
	o->mem_len = TXL_FROM_MODEL;
	o->seg_len = TXL_FROM_MODEL;
	o->clamp_len = TXL_FROM_MODEL;
	o->same_length = TXL_FROM_MODEL;
	o->mem_init = TXL_FROM_MODEL;
	o->score_stride = -1;
	o->color = COLOR_AUTO;
	o->final_newline = true;
	o->n_samples = 1;
	o->first_line = 1;
	o->streams = 8;
}

void
options_free(struct txlgen_options *o)
{
	for (int i = 0; i < n_settings; i++) {
		void *p = setting_ptr(&settings[i], o);

		if (settings[i].type == ST_STRING) {
			free(*(char **)p);
			*(char **)p = NULL;
		} else if (settings[i].type == ST_LIST) {
			strlist_clear(p);
		}
	}
	free(o->config);
	free(o->score);
	free(o->tokenize);
	free(o->score_docs);
	free(o->field);
	free(o->kl_ref);
	o->config = o->score = o->tokenize = NULL;
	o->score_docs = o->field = o->kl_ref = NULL;
}

const struct setting *
setting_find(const char *key)
{
	char k[64];
	size_t i;

	for (i = 0; key[i] && i < sizeof(k) - 1; i++)
		k[i] = key[i] == '-' ? '_' : key[i];
	k[i] = '\0';
	if (key[i])
		return NULL;
	for (int j = 0; j < n_settings; j++)
		if (strcmp(settings[j].key, k) == 0)
			return &settings[j];
	return NULL;
}

/* "@p value is out of range (LOW .. HIGH)", the bounds of @p s. */
static void
range_error(const struct setting *s, const char *value, char *err,
	    size_t errlen)
{
	char lo[32], hi[32];

	fmt_number(s->min, lo, sizeof(lo));
	fmt_number(s->max, hi, sizeof(hi));
	snprintf(err, errlen, "%s is out of range (%s%s .. %s%s)", value,
		 s->min_exclusive ? "> " : "", lo, hi,
		 s->type == ST_SEED ? ", or -1 for a random seed" : "");
}

bool
setting_check_range(const struct setting *s, double v, char *err,
		    size_t errlen)
{
	bool low = s->min_exclusive ? !(v > s->min) : !(v >= s->min);
	char a[32];

	if (isnan(v) || low || v > s->max) {
		range_error(s, fmt_number(v, a, sizeof(a)), err, errlen);
		return false;
	}
	return true;
}

/* A whole number: 0, or -1 if @p val is not one, 1 if it is one too
 * large for a long long (and for every setting). */
static int
parse_integer(const char *val, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(val, &end, 10);
	if (end == val || *end != '\0')
		return -1;
	if (errno == ERANGE)
		return 1;
	*out = v;
	return 0;
}

void
setting_set_bool(const struct setting *s, struct txlgen_options *o, bool v)
{
	if (s->type == ST_BOOL)
		*(bool *)setting_ptr(s, o) = v;
	else
		*(int *)setting_ptr(s, o) = v;
}

bool
setting_set_integer(const struct setting *s, struct txlgen_options *o,
		    long long v, const char *text, char *err, size_t errlen)
{
	char buf[32];

	if (s->type == ST_SEED && v == -1) {
		/* llama.cpp's habit: -1 is a random seed */
		*(int64_t *)setting_ptr(s, o) = SEED_RANDOM;
		return true;
	}
	/* the bounds are whole numbers below 2^53, exact in a double */
	if (v < (long long)s->min || (s->min_exclusive && v == s->min) ||
	    v > (long long)s->max) {
		if (!text) {
			snprintf(buf, sizeof(buf), "%lld", v);
			text = buf;
		}
		range_error(s, text, err, errlen);
		return false;
	}
	if (s->type == ST_INT)
		*(int *)setting_ptr(s, o) = (int)v;
	else
		*(int64_t *)setting_ptr(s, o) = (int64_t)v;
	return true;
}

/* Reset a setting to null; false if it has none. */
static bool
setting_reset(const struct setting *s, struct txlgen_options *o)
{
	void *p = setting_ptr(s, o);

	switch (s->type) {
	case ST_STRING:
		free(*(char **)p);
		*(char **)p = NULL;
		return true;
	case ST_LIST:
		strlist_clear(p);
		return true;
	case ST_TRIBOOL:
	case ST_INT:
	case ST_MEM_INIT:
		if (!s->nullable)
			return false;
		*(int *)p = -1;
		return true;
	case ST_SEED:
		*(int64_t *)p = SEED_RANDOM;
		return true;
	default:
		return false;
	}
}

bool
setting_parse(const struct setting *s, struct txlgen_options *o,
	      const char *val, char *err, size_t errlen)
{
	void *p = setting_ptr(s, o);
	double d;
	int k;
	char *end;
	long long iv;

	if (!val) {
		if (setting_reset(s, o))
			return true;
		snprintf(err, errlen, "needs a value");
		return false;
	}

	switch (s->type) {
	case ST_BOOL:
	case ST_TRIBOOL:
		if (!strcmp(val, "true") || !strcmp(val, "1") ||
		    !strcmp(val, "on") || !strcmp(val, "yes"))
			d = 1;
		else if (!strcmp(val, "false") || !strcmp(val, "0") ||
			 !strcmp(val, "off") || !strcmp(val, "no"))
			d = 0;
		else {
			snprintf(err, errlen, "'%s' is not a boolean "
				 "(true or false)", val);
			return false;
		}
		setting_set_bool(s, o, d != 0);
		return true;
	case ST_INT:
	case ST_SEED:
		k = parse_integer(val, &iv);
		if (k) {
			if (k < 0)
				snprintf(err, errlen, "'%s' is not an integer",
					 val);
			else
				range_error(s, val, err, errlen);
			return false;
		}
		return setting_set_integer(s, o, iv, val, err, errlen);
	case ST_FLOAT:
		errno = 0;
		d = strtod(val, &end);
		if (end == val || *end != '\0' || errno == ERANGE ||
		    !isfinite(d)) {
			snprintf(err, errlen, "'%s' is not a number", val);
			return false;
		}
		if (!setting_check_range(s, d, err, errlen))
			return false;
		*(double *)p = d;
		return true;
	case ST_STRING:
		if (!*val && strcmp(s->key, "text")) {
			snprintf(err, errlen, "must not be empty");
			return false;
		}
		free(*(char **)p);
		*(char **)p = xstrdup(val);
		return true;
	case ST_LIST:
		if (!*val) {
			snprintf(err, errlen, "must not be empty");
			return false;
		}
		if (!utf8_valid(val, strlen(val))) {
			snprintf(err, errlen, "is not valid UTF-8");
			return false;
		}
		strlist_add(p, val);
		return true;
	case ST_COLOR:
	case ST_KV_TYPE:
	case ST_COMPUTE:
	case ST_MEM_INIT: {
		int n;
		const char *const *names = setting_names(s, &n);

		/* any case, as "q8_0" or "BF16" */
		for (int i = 0; i < n; i++) {
			if (names[i] && !strcasecmp(val, names[i])) {
				*(int *)p = i;
				return true;
			}
		}
		int at = snprintf(err, errlen, "'%s' is not one of", val);
		for (int i = 0, listed = 0; i < n && at >= 0 &&
		     (size_t)at < errlen; i++)
			if (names[i])
				at += snprintf(err + at, errlen - (size_t)at,
					       "%s %s", listed++ ? "," : "",
					       names[i]);
		return false;
	}
	}
	return false;
}

void
setting_format(const struct setting *s, const struct txlgen_options *o,
	       char *buf, size_t len)
{
	const void *p = setting_ptr(s, o);
	const struct strlist *l;
	size_t at;

	switch (s->type) {
	case ST_BOOL:
		snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false");
		break;
	case ST_TRIBOOL:
		snprintf(buf, len, "%s", *(const int *)p < 0 ? "null" :
			 *(const int *)p ? "true" : "false");
		break;
	case ST_INT:
		if (s->nullable && *(const int *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%d", *(const int *)p);
		break;
	case ST_SEED:
		if (*(const int64_t *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%lld",
				 (long long)*(const int64_t *)p);
		break;
	case ST_FLOAT:
		snprintf(buf, len, "%g", *(const double *)p);
		break;
	case ST_STRING:
		snprintf(buf, len, "%s", *(char *const *)p ?
			 *(char *const *)p : "null");
		break;
	case ST_LIST:
		l = p;
		at = 0;
		buf[0] = '\0';
		for (int i = 0; i < l->n && at < len; i++)
			at += (size_t)snprintf(buf + at, len - at, "%s\"%s\"",
					       i ? ", " : "", l->v[i]);
		if (!l->n)
			snprintf(buf, len, "(none)");
		break;
	case ST_COLOR:
	case ST_KV_TYPE:
	case ST_COMPUTE:
	case ST_MEM_INIT: {
		int n;
		if (*(const int *)p < 0)
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%s",
				 setting_names(s, &n)[*(const int *)p]);
		break;
	}
	}
}
