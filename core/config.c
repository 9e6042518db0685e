/* SPDX-License-Identifier: MIT */
/*
 * config.c - settings as JSON, parsed with cJSON onto the settings table
 * of settings.c: the config file, a model's recommended settings, and
 * --print-config.
 *
 * The config file is one JSON object whose keys are the settings' names
 * ("top_k", "mem_len", ...).  null resets a setting to its default (the
 * model's value for the Transformer-XL settings).  Anything else that is
 * not exactly right is an error naming the file, the key and the reason:
 * a config that silently does less than it says is worse than none.
 *
 * A model file may recommend settings in its metadata key "recommended",
 * a JSON object of the same form, checked the same way; they apply where
 * the user gave no value.  Only the settings of generation may be
 * recommended (settings[].model_may_set): a model file must not choose
 * files to read or write.  A key this version does not know, or one a
 * model may not set, is ignored with a warning, so that newer model
 * files still run; a bad value is an error.
 *
 * A model file is untrusted input: every check is linear (or n log n) in
 * the number of keys, and the warnings stop after a few.  Integers are
 * read from the number's own text (cJSON keeps only a double, which
 * rounds above 2^53), and a string holding \u0000 is refused rather than
 * cut short there.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "txl.h"

#include "config.h"
#include "errors.h"
#include "input.h"
#include "settings.h"
#include "suggest.h"
#include "text.h"

#define MAX_CONFIG_BYTES (16 << 20)

/* Warnings about ignored keys of a model's settings, at most; then one
 * line with the count of the rest. */
#define MAX_WARNINGS 5

/* The key --print-config adds, which a config file may hold. */
#define SOURCES_KEY "sources"

static const char *
json_type_name(const cJSON *v)
{
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsArray(v))
		return "an array";
	return "an object";
}

/* The text of a JSON number (valid, as cJSON took it) as a whole number,
 * exactly: 0, or -1 if it is no whole number ("1.5", "1e-1"), 1 if it is
 * one beyond a long long.  "1e3" and "100.0" are whole numbers. */
static int
json_integer(const char *t, size_t n, long long *out)
{
	const char *end = t + n;
	char sig[20];           /* the significant digits, those that fit */
	int nsig = 0;
	bool lost = false;      /* a nonzero digit after them */
	bool neg = t < end && *t == '-', point = false;
	long exp = 0;           /* the value: sig x 10^exp */
	unsigned long long v = 0;

	for (t += neg; t < end; t++) {
		if (*t == '.') {
			point = true;
			continue;
		}
		if (*t < '0' || *t > '9')
			break;
		exp -= point;
		if (nsig == 0 && *t == '0')
			continue;
		if (nsig < (int)sizeof(sig)) {
			sig[nsig++] = *t;
		} else {
			exp++;
			lost |= *t != '0';
		}
	}
	if (t < end && (*t == 'e' || *t == 'E')) {
		bool eneg = false;
		long e = 0;

		if (++t < end && (*t == '+' || *t == '-'))
			eneg = *t++ == '-';
		for (; t < end && *t >= '0' && *t <= '9'; t++)
			if (e < 1000000)
				e = e * 10 + (*t - '0');
		exp += eneg ? -e : e;
	}
	if (nsig == 0) {
		*out = 0;
		return 0;
	}
	if (lost)   /* 20 digits and more: in range only if a fraction */
		return exp > 0 ? 1 : -1;
	/* trailing zeros make up for a negative exponent */
	while (exp < 0 && sig[nsig - 1] == '0') {
		nsig--;
		exp++;
	}
	if (exp < 0)
		return -1;
	if (nsig + exp > 19)
		return 1;
	for (long i = 0; i < nsig + exp; i++)
		v = v * 10 + (unsigned)(i < nsig ? sig[i] - '0' : 0);
	if (v > (unsigned long long)LLONG_MAX + neg)
		return 1;
	*out = neg ? (long long)(0 - v) : (long long)v;
	return 0;
}

static bool
set_from_json(const struct setting *s, struct txlgen_options *o,
	      const cJSON *v, const char *num, size_t num_len, char *err,
	      size_t errlen)
{
	void *p = setting_ptr(s, o);
	const char *want = NULL;
	char text[64];
	long long iv;
	int k;

	if (cJSON_IsNull(v)) {
		if (s->nullable || s->type == ST_LIST)
			return setting_parse(s, o, NULL, err, errlen);
		snprintf(err, errlen, "must not be null");
		return false;
	}
	switch (s->type) {
	case ST_BOOL:
	case ST_TRIBOOL:
		if (!cJSON_IsBool(v)) {
			want = "a boolean";
			break;
		}
		setting_set_bool(s, o, cJSON_IsTrue(v));
		return true;
	case ST_INT:
	case ST_INT64:
	case ST_SIZE:
	case ST_SEED:
		if (!cJSON_IsNumber(v)) {
			want = "an integer";
			break;
		}
		/* the number as written (what the message quotes) */
		snprintf(text, sizeof(text), "%.*s%s", num_len < 40 ?
			 (int)num_len : 40, num, num_len < 40 ? "" : "...");
		k = json_integer(num, num_len, &iv);
		if (k < 0) {
			snprintf(err, errlen, "expected an integer, got %s",
				 text);
			return false;
		}
		if (k > 0) {
			/* beyond every setting's range */
			iv = LLONG_MAX;
		}
		return setting_set_integer(s, o, iv, text, err, errlen);
	case ST_FLOAT:
		if (!cJSON_IsNumber(v)) {
			want = "a number";
			break;
		}
		if (!setting_check_range(s, v->valuedouble, err, errlen))
			return false;
		*(double *)p = v->valuedouble;
		return true;
	case ST_STRING:
	case ST_ENUM:
		if (!cJSON_IsString(v)) {
			want = "a string";
			break;
		}
		return setting_parse(s, o, v->valuestring, err, errlen);
	case ST_LIST:
		/* a single string is taken as a list of one */
		if (cJSON_IsString(v)) {
			strlist_clear(p);
			return setting_parse(s, o, v->valuestring, err, errlen);
		}
		if (!cJSON_IsArray(v)) {
			want = "an array of strings";
			break;
		}
		strlist_clear(p);
		for (const cJSON *e = v->child; e; e = e->next) {
			if (!cJSON_IsString(e)) {
				snprintf(err, errlen, "expected an array of "
					 "strings, found %s in it",
					 json_type_name(e));
				return false;
			}
			if (!setting_parse(s, o, e->valuestring, err, errlen))
				return false;
		}
		return true;
	case ST_NONE:
		break;
	}
	snprintf(err, errlen, "expected %s, got %s", want, json_type_name(v));
	return false;
}

/* Line and column of byte @p at in @p text, for parse errors. */
static void
line_col(const char *text, const char *at, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (const char *p = text; p < at && *p; p++) {
		if (*p == '\n') {
			++*line;
			*col = 1;
		} else {
			++*col;
		}
	}
}

/* How settings from one JSON object are taken. */
struct json_source {
	const char *name;     /* for messages: the file, or "FILE: key
				 'recommended'" */
	enum origin origin;
	bool from_model;      /* a model's recommended settings */
};

/* The first \u0000 escape in the JSON @p text, or NULL.  Outside strings
 * valid JSON has no backslash, so every one starts an escape. */
static const char *
find_nul_escape(const char *text)
{
	for (const char *p = strchr(text, '\\'); p; p = strchr(p + 2, '\\'))
		if (!strncmp(p + 1, "u0000", 5))
			return p;
		else if (!p[1])
			break;
	return NULL;
}

/* cJSON's whitespace: every byte up to ' ' */
static const char *
skip_space(const char *p)
{
	while (*p && (unsigned char)*p <= ' ')
		p++;
	return p;
}

/* Past the string that starts (its '"') at @p p. */
static const char *
skip_string(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

/* Past the JSON value that starts at @p p. */
static const char *
skip_value(const char *p)
{
	long depth = 0;

	for (;;) {
		if (*p == '"')
			p = skip_string(p);
		else if (*p == '{' || *p == '[')
			depth++, p++;
		else if (*p == '}' || *p == ']')
			depth--, p++;
		else if (depth > 0)
			p++;
		else    /* a number, true, false or null */
			while ((unsigned char)*p > ' ' && !strchr(",}]", *p))
				p++;
		if (depth == 0 || !*p)
			return p;
	}
}

/* Where the value of each member of the JSON object @p text (valid, as
 * cJSON parsed it) is written, in order, so that numbers can be read
 * from their text: *n of them in at[] and len[] (malloc'd).  0 members
 * (and NULL) if the text does not read as expected. */
static void
member_texts(const char *text, const char ***at, size_t **len, size_t *n)
{
	size_t cap = 0;
	const char *p = text;

	*at = NULL;
	*len = NULL;
	*n = 0;
	if (!strncmp(p, "\xef\xbb\xbf", 3))  /* cJSON skips a BOM */
		p += 3;
	p = skip_space(p);
	if (*p++ != '{')
		return;
	for (;;) {
		p = skip_space(p);
		if (*p != '"')
			break;
		p = skip_space(skip_string(p));
		if (*p++ != ':')
			break;
		p = skip_space(p);
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			*at = xrealloc(*at, cap * sizeof(**at));
			*len = xrealloc(*len, cap * sizeof(**len));
		}
		(*at)[*n] = p;
		p = skip_value(p);
		(*len)[*n] = (size_t)(p - (*at)[*n]);
		++*n;
		p = skip_space(p);
		if (*p++ != ',')
			break;
	}
}

static int
cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A key given twice in @p root, or NULL: sorted, duplicates are
 * neighbours (n log n, where comparing each key with every other took
 * minutes for a model file's million keys). */
static const char *
duplicate_key(const cJSON *root)
{
	const char **keys = NULL, *dup = NULL;
	size_t n = 0, cap = 0;

	for (const cJSON *v = root->child; v; v = v->next) {
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		keys[n++] = v->string;
	}
	if (n > 1)
		qsort(keys, n, sizeof(*keys), cmp_keys);
	for (size_t i = 1; i < n && !dup; i++)
		if (!strcmp(keys[i - 1], keys[i]))
			dup = keys[i];
	free(keys);
	return dup;
}

/* Parse @p text (of @p len bytes) as a JSON object and apply it to @p o.
 * Returns an exit code after printing any error. */
static int
apply_json(struct txlgen_options *o, const char *text, size_t len,
	   const struct json_source *src)
{
	const char *end = NULL, *nul, *dup, **num_at = NULL;
	size_t *num_len = NULL, n_nums = 0, i = 0;
	long ignored = 0;
	char err[256];
	cJSON *root;
	int line, col, rc = EXIT_BADMODEL;

	if (strlen(text) != len) {
		errmsg("%s: not JSON (it holds a NUL byte)", src->name);
		return EXIT_BADMODEL;
	}
	root = cJSON_ParseWithOpts(text, &end, true);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		line_col(text, at ? at : text + len, &line, &col);
		errmsg("%s: line %d, column %d: malformed JSON", src->name,
		       line, col);
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		errmsg("%s: expected a JSON object, got %s", src->name,
		       json_type_name(root));
		goto out;
	}
	/* cJSON would keep the string up to the NUL: silently less */
	if ((nul = find_nul_escape(text)) != NULL) {
		line_col(text, nul, &line, &col);
		errmsg("%s: line %d, column %d: a string holds \\u0000 (a NUL "
		       "character), which no setting takes", src->name, line,
		       col);
		goto out;
	}
	if ((dup = duplicate_key(root)) != NULL) {
		errmsg("%s: key '%s': given twice", src->name, dup);
		goto out;
	}
	member_texts(text, &num_at, &num_len, &n_nums);
	if ((size_t)cJSON_GetArraySize(root) != n_nums) {
		/* the scan and cJSON disagree: cannot be for valid JSON */
		errmsg("%s: cannot read the members of the object", src->name);
		goto out;
	}
	for (const cJSON *v = root->child; v; v = v->next, i++) {
		const struct setting *s = NULL;

		for (int k = 0; k < n_settings; k++)
			if (setting_is_key(&settings[k]) &&
			    !strcmp(settings[k].key, v->string))
				s = &settings[k];
		if (!s && !src->from_model && !strcmp(v->string, SOURCES_KEY) &&
		    cJSON_IsObject(v))
			continue;  /* what --print-config adds */
		if (!s && !src->from_model) {
			const char *hint = suggest_setting(v->string);
			const char *other = NULL;

			/* a key of the other program of the table */
			for (int k = 0; !hint && k < n_settings; k++)
				if (settings[k].key && settings[k].scope !=
				    SCOPE_CLI && !strcmp(settings[k].key,
							 v->string))
					other = prog_name(settings[k].progs &
							  ~settings_prog);
			if (other)
				errmsg("%s: unknown key '%s' (a setting of %s, "
				       "not of %s)", src->name, v->string,
				       other, prog_name(settings_prog));
			else
				errmsg("%s: unknown key '%s'%s%s%s", src->name,
				       v->string, hint ? "; did you mean '" :
				       "", hint ? hint : "", hint ? "'?" : "");
			goto out;
		}
		if (src->from_model && (!s || !s->model_may_set)) {
			if (++ignored <= MAX_WARNINGS)
				errmsg("warning: %s: key '%s' ignored (%s)",
				       src->name, v->string, s ? "not a setting "
				       "a model may choose" : "not a setting of "
				       "this version");
			continue;
		}
		if (src->from_model && setting_origin(s, o) != ORIGIN_DEFAULT)
			continue;  /* the user's choice stands */
		if (!set_from_json(s, o, v, num_at[i], num_len[i], err,
				   sizeof(err))) {
			errmsg("%s: key '%s': %s", src->name, v->string, err);
			goto out;
		}
		setting_set_origin(s, o, src->origin);
	}
	if (ignored > MAX_WARNINGS)
		errmsg("warning: %s: %ld more keys ignored", src->name,
		       ignored - MAX_WARNINGS);
	if (o->prompt && o->text) {
		errmsg("%s: keys 'prompt' and 'text' cannot be used together",
		       src->name);
		goto out;
	}
	rc = EXIT_OK;
out:
	free(num_at);
	free(num_len);
	cJSON_Delete(root);
	return rc;
}

int
config_load(struct txlgen_options *o, const char *path)
{
	struct json_source src = { path, ORIGIN_CONFIG, false };
	size_t len = 0;
	char *text = input_slurp(path, MAX_CONFIG_BYTES, &len);
	int rc;

	if (!text)
		return EXIT_BADMODEL;
	rc = apply_json(o, text, len, &src);
	free(text);
	return rc;
}

int
config_apply_recommended(struct txlgen_options *o,
			 const struct txl_model *model, const char *model_path)
{
	const char *text = txl_model_meta(model, "recommended");
	struct json_source src = { NULL, ORIGIN_MODEL, true };
	char name[1024];

	if (!text)
		return EXIT_OK;
	snprintf(name, sizeof(name), "%s: metadata 'recommended'", model_path);
	src.name = name;
	return apply_json(o, text, strlen(text), &src);
}

/* The value of setting @p st as JSON; resolved from @p session if the
 * model gives it. */
static cJSON *
setting_json(const struct setting *st, const struct txlgen_options *o,
	     const struct txl_session *session)
{
	const void *p = setting_ptr(st, o);
	struct txl_session_params sp;
	const char *const *names;
	char num[32];
	cJSON *v;
	int iv, n;

	if (session && st->from_session) {
		/* an int of both: the session's */
		sp = txl_session_get_params(session);
		p = (const char *)&sp + st->session_offset;
	}
	switch (st->type) {
	case ST_BOOL:
		return cJSON_CreateBool(*(const bool *)p);
	case ST_TRIBOOL:
		iv = *(const int *)p;
		return iv < 0 ? cJSON_CreateNull() : cJSON_CreateBool(iv);
	case ST_INT:
		iv = *(const int *)p;
		return st->nullable && iv < 0 ? cJSON_CreateNull() :
			cJSON_CreateNumber(iv);
	case ST_SEED:
	case ST_INT64:
		if (*(const int64_t *)p < 0)
			return cJSON_CreateNull();
		/* as digits: cJSON prints a double to 15 digits when that
		 * reads back within its tolerance (9007199254740991 became
		 * 9.00719925474099e+15, another seed) */
		snprintf(num, sizeof(num), "%lld",
			 (long long)*(const int64_t *)p);
		return cJSON_CreateRaw(num);
	case ST_SIZE:
		return cJSON_CreateNumber((double)*(const size_t *)p);
	case ST_FLOAT:
		return cJSON_CreateNumber(*(const double *)p);
	case ST_STRING:
		return *(char *const *)p ?
			cJSON_CreateString(*(char *const *)p) :
			cJSON_CreateNull();
	case ST_LIST:
		/* (cJSON_CreateStringArray refuses an empty one) */
		v = cJSON_CreateArray();
		for (int k = 0; v && k < ((const struct strlist *)p)->n; k++) {
			cJSON *sv = cJSON_CreateString(
				((const struct strlist *)p)->v[k]);

			if (!sv) {
				cJSON_Delete(v);
				return NULL;
			}
			cJSON_AddItemToArray(v, sv);
		}
		return v;
	case ST_ENUM:
		names = setting_names(st, &n);
		iv = *(const int *)p;
		return iv < 0 || iv >= n || !names[iv] ? cJSON_CreateNull() :
			cJSON_CreateString(names[iv]);
	case ST_NONE:
		break;
	}
	return NULL;
}

char *
config_value(const struct setting *s, const struct txlgen_options *o,
	     const struct txl_session *session)
{
	cJSON *v = setting_json(s, o, session);
	char *text;

	if (!v)
		die_oom();
	text = json_string(v, -1);
	cJSON_Delete(v);
	return text;
}

bool
config_print(FILE *f, const struct txlgen_options *o,
	     const struct txl_session *session, bool sources)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *from = sources ? cJSON_CreateObject() : NULL;
	char *s;
	bool ok;

	if (!root || (sources && !from))
		die_oom();
	for (int i = 0; i < n_settings; i++) {
		const struct setting *st = &settings[i];
		cJSON *v;

		if (!setting_is_key(st))
			continue;
		v = setting_json(st, o, session);

		if (!v)
			die_oom();
		cJSON_AddItemToObject(root, st->key, v);
		if (from && !cJSON_AddStringToObject(from, st->key,
				origin_name(setting_origin(st, o))))
			die_oom();
	}
	if (from)
		cJSON_AddItemToObject(root, SOURCES_KEY, from);
	s = json_string(root, 2);
	cJSON_Delete(root);
	ok = fputs(s, f) >= 0 && fputc('\n', f) != EOF;
	free(s);
	return ok;
}
