/* SPDX-License-Identifier: MIT */
/*
 * config.c - the JSON config file, parsed with cJSON onto the settings
 * table of options.c.
 *
 * The file is one JSON object whose keys are the settings' names
 * ("top_k", "mem_len", ...).  null resets a setting to its default (the
 * model's value for the Transformer-XL settings).  Anything else that is
 * not exactly right is an error naming the file, the key and the reason:
 * a config that silently does less than it says is worse than none.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "txl.h"

#include "config.h"
#include "options.h"

#define MAX_CONFIG_BYTES (16 << 20)

static char *
read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL, *nb;
	size_t cap = 0, n = 0, r;

	if (!f)
		return NULL;
	do {
		if (n + 4096 > cap) {
			cap = cap ? 2 * cap : 8192;
			if (cap > MAX_CONFIG_BYTES + 8192) {
				errno = EFBIG;
				goto fail;
			}
			nb = realloc(buf, cap + 1);
			if (!nb)
				goto fail;
			buf = nb;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	if (ferror(f))
		goto fail;
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
fail:
	{
		int e = errno ? errno : EIO;

		free(buf);
		fclose(f);
		errno = e;
		return NULL;
	}
}

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
	void *p = (char *)o + s->offset;
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
		if (s->type == ST_BOOL)
			*(bool *)p = cJSON_IsTrue(v);
		else
			*(int *)p = cJSON_IsTrue(v);
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
		if (!setting_check_range(s, d, err, errlen))
			return false;
		if (s->type == ST_INT)
			*(int *)p = (int)d;
		else
			*(int64_t *)p = (int64_t)d;
		return true;
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

int
config_load(struct txlgen_options *o, const char *path)
{
	size_t len = 0;
	char *text = read_file(path, &len);
	const char *end = NULL;
	char err[256];
	cJSON *root;
	int line, col, rc = EXIT_BADMODEL;

	if (!text) {
		errmsg("%s: %s", path, strerror(errno));
		return EXIT_BADMODEL;
	}
	if (strlen(text) != len) {
		errmsg("%s: not a JSON file (it holds a NUL byte)", path);
		free(text);
		return EXIT_BADMODEL;
	}
	root = cJSON_ParseWithOpts(text, &end, true);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		line_col(text, at ? at : text + len, &line, &col);
		errmsg("%s: line %d, column %d: malformed JSON", path, line,
		       col);
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		errmsg("%s: expected a JSON object, got %s", path,
		       json_type_name(root));
		goto out;
	}
	for (const cJSON *v = root->child; v; v = v->next) {
		const struct setting *s = NULL;

		for (int i = 0; i < n_settings; i++)
			if (!strcmp(settings[i].key, v->string))
				s = &settings[i];
		if (!s) {
			errmsg("%s: unknown key '%s'", path, v->string);
			goto out;
		}
		for (const cJSON *w = root->child; w != v; w = w->next) {
			if (!strcmp(w->string, v->string)) {
				errmsg("%s: key '%s': given twice", path,
				       v->string);
				goto out;
			}
		}
		if (!set_from_json(s, o, v, err, sizeof(err))) {
			errmsg("%s: key '%s': %s", path, v->string, err);
			goto out;
		}
	}
	if (o->prompt && o->text) {
		errmsg("%s: keys 'prompt' and 'text' cannot be used together",
		       path);
		goto out;
	}
	rc = EXIT_OK;
out:
	cJSON_Delete(root);
	free(text);
	return rc;
}

bool
config_print(FILE *f, const struct txlgen_options *o,
	     const struct txl_session *session)
{
	struct txl_session_params sp;
	cJSON *root = cJSON_CreateObject();
	char *s;
	bool ok;

	if (session)
		sp = txl_session_get_params(session);
	for (int i = 0; i < n_settings; i++) {
		const struct setting *st = &settings[i];
		const void *p = (const char *)o + st->offset;
		cJSON *v = NULL;
		int iv;

		switch (st->type) {
		case ST_BOOL:
			v = cJSON_CreateBool(*(const bool *)p);
			break;
		case ST_TRIBOOL:
			iv = *(const int *)p;
			if (session && !strcmp(st->key, "same_length"))
				iv = sp.same_length;
			v = iv < 0 ? cJSON_CreateNull() : cJSON_CreateBool(iv);
			break;
		case ST_INT:
			iv = *(const int *)p;
			if (session && !strcmp(st->key, "mem_len"))
				iv = sp.mem_len;
			else if (session && !strcmp(st->key, "seg_len"))
				iv = sp.seg_len;
			else if (session && !strcmp(st->key, "clamp_len"))
				iv = sp.clamp_len;
			v = st->nullable && iv < 0 ? cJSON_CreateNull() :
				cJSON_CreateNumber(iv);
			break;
		case ST_SEED:
			v = *(const int64_t *)p < 0 ? cJSON_CreateNull() :
				cJSON_CreateNumber((double)*(const int64_t *)p);
			break;
		case ST_FLOAT:
			v = cJSON_CreateNumber(*(const double *)p);
			break;
		case ST_STRING:
			v = *(char *const *)p ? cJSON_CreateString(
				*(char *const *)p) : cJSON_CreateNull();
			break;
		case ST_LIST: {
			const struct strlist *l = p;

			/* (cJSON_CreateStringArray refuses an empty one) */
			v = cJSON_CreateArray();
			for (int k = 0; v && k < l->n; k++) {
				cJSON *sv = cJSON_CreateString(l->v[k]);

				if (!sv) {
					cJSON_Delete(v);
					v = NULL;
				} else {
					cJSON_AddItemToArray(v, sv);
				}
			}
			break;
		}
		case ST_COLOR: {
			static const char *const names[] = {
				"auto", "always", "never"
			};

			v = cJSON_CreateString(names[*(const int *)p]);
			break;
		}
		}
		if (!v) {
			cJSON_Delete(root);
			errno = ENOMEM;
			return false;
		}
		cJSON_AddItemToObject(root, st->key, v);
	}
	s = cJSON_Print(root);
	cJSON_Delete(root);
	if (!s) {
		errno = ENOMEM;
		return false;
	}
	ok = fputs(s, f) >= 0 && fputc('\n', f) != EOF;
	free(s);
	return ok;
}
