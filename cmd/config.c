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
 */
#include <errno.h>
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

#define MAX_CONFIG_BYTES (16 << 20)

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

static bool
set_from_json(const struct setting *s, struct txlgen_options *o,
	      const cJSON *v, char *err, size_t errlen)
{
	void *p = setting_ptr(s, o);
	const char *want = NULL;
	double d;

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
	case ST_SEED:
		if (!cJSON_IsNumber(v)) {
			want = "an integer";
			break;
		}
		d = v->valuedouble;
		if (d != floor(d)) {
			snprintf(err, errlen, "expected an integer, got %g", d);
			return false;
		}
		return setting_set_integer(s, o, d, err, errlen);
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
	case ST_COLOR:
	case ST_KV_TYPE:
	case ST_COMPUTE:
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

/* Parse @p text (of @p len bytes) as a JSON object and apply it to @p o.
 * Returns an exit code after printing any error. */
static int
apply_json(struct txlgen_options *o, const char *text, size_t len,
	   const struct json_source *src)
{
	const char *end = NULL;
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
	for (const cJSON *v = root->child; v; v = v->next) {
		const struct setting *s = NULL;

		for (int i = 0; i < n_settings; i++)
			if (!strcmp(settings[i].key, v->string))
				s = &settings[i];
		for (const cJSON *w = root->child; w != v; w = w->next) {
			if (!strcmp(w->string, v->string)) {
				errmsg("%s: key '%s': given twice", src->name,
				       v->string);
				goto out;
			}
		}
		if (!s && !src->from_model && !strcmp(v->string, SOURCES_KEY) &&
		    cJSON_IsObject(v))
			continue;  /* what --print-config adds */
		if (!s && !src->from_model) {
			const char *hint = suggest_setting(v->string);

			errmsg("%s: unknown key '%s'%s%s%s", src->name,
			       v->string, hint ? "; did you mean '" : "",
			       hint ? hint : "", hint ? "'?" : "");
			goto out;
		}
		if (src->from_model && (!s || !s->model_may_set)) {
			errmsg("warning: %s: key '%s' ignored (%s)", src->name,
			       v->string, s ? "not a setting a model may "
			       "choose" : "not a setting of this version");
			continue;
		}
		if (src->from_model && setting_origin(s, o) != ORIGIN_DEFAULT)
			continue;  /* the user's choice stands */
		if (!set_from_json(s, o, v, err, sizeof(err))) {
			errmsg("%s: key '%s': %s", src->name, v->string, err);
			goto out;
		}
		setting_set_origin(s, o, src->origin);
	}
	if (o->prompt && o->text) {
		errmsg("%s: keys 'prompt' and 'text' cannot be used together",
		       src->name);
		goto out;
	}
	rc = EXIT_OK;
out:
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
	struct txl_session_params sp = { 0 };
	cJSON *v;
	int iv;

	if (session)
		sp = txl_session_get_params(session);
	switch (st->type) {
	case ST_BOOL:
		return cJSON_CreateBool(*(const bool *)p);
	case ST_TRIBOOL:
		iv = *(const int *)p;
		if (session && !strcmp(st->key, "same_length"))
			iv = sp.same_length;
		return iv < 0 ? cJSON_CreateNull() : cJSON_CreateBool(iv);
	case ST_INT:
		iv = *(const int *)p;
		if (session && !strcmp(st->key, "mem_len"))
			iv = sp.mem_len;
		else if (session && !strcmp(st->key, "seg_len"))
			iv = sp.seg_len;
		else if (session && !strcmp(st->key, "clamp_len"))
			iv = sp.clamp_len;
		return st->nullable && iv < 0 ? cJSON_CreateNull() :
			cJSON_CreateNumber(iv);
	case ST_SEED:
		return *(const int64_t *)p < 0 ? cJSON_CreateNull() :
			cJSON_CreateNumber((double)*(const int64_t *)p);
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
	case ST_COLOR:
	case ST_KV_TYPE:
	case ST_COMPUTE:
		return cJSON_CreateString(setting_names(st, &iv)[*(const int *)p]);
	}
	return NULL;
}

char *
config_value(const struct setting *s, const struct txlgen_options *o,
	     const struct txl_session *session)
{
	cJSON *v = setting_json(s, o, session);
	char *text = v ? cJSON_PrintUnformatted(v) : NULL;

	cJSON_Delete(v);
	if (!text)
		die_oom();
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
		cJSON *v = setting_json(st, o, session);

		if (!v)
			die_oom();
		cJSON_AddItemToObject(root, st->key, v);
		if (from && !cJSON_AddStringToObject(from, st->key,
				origin_name(setting_origin(st, o))))
			die_oom();
	}
	if (from)
		cJSON_AddItemToObject(root, SOURCES_KEY, from);
	s = cJSON_Print(root);
	cJSON_Delete(root);
	if (!s)
		die_oom();
	ok = fputs(s, f) >= 0 && fputc('\n', f) != EOF;
	free(s);
	return ok;
}
