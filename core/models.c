/* SPDX-License-Identifier: MIT */
/*
 * models.c - models by name, and --list-models.
 *
 * A model is named by its file (anything with a '/', or a file that
 * exists) or by a name: NAME.bin in the first directory of the model
 * path that has one.  The path is $TXLGEN_MODEL_PATH (colon-separated),
 * then the user's models directory, where txlgen-get installs
 * ($XDG_DATA_HOME/txlgen/models, default ~/.local/share/txlgen/models),
 * then the installed data directory with the default model (PREFIX/share/
 * txlgen, found from the program's own path so that an installation can
 * be moved), or for a program run from its build directory the source
 * tree's models/ instead.
 *
 * --list-models peeks at each file (txl_model_peek(): its header and
 * tokenizer, a few kilobytes; no weights, no fingerprint), so that a
 * directory of large models lists at once.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "errors.h"
#include "models.h"
#include "suggest.h"
#include "text.h"
#include "txl.h"

#define SUFFIX ".bin"

/* ------------------------------------------------------------------ */
/* The model path                                                      */

struct dirlist {
	char **v;
	int n;
};

static void
add_dir(struct dirlist *l, const char *dir)
{
	char real[PATH_MAX];
	const char *d = realpath(dir, real) ? real : dir;

	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], d))
			return;
	l->v = xrealloc(l->v, (size_t)(l->n + 2) * sizeof(*l->v));
	l->v[l->n++] = xstrdup(d);
	l->v[l->n] = NULL;
}

static bool
same_dir(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];

	return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

/* Whether this program runs from its build directory (not installed). */
static bool
from_build_dir(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return false;
	exe[n] = '\0';
	return same_dir(dirname(exe), TXLGEN_BUILD_DIR);
}

char **
model_path(void)
{
	struct dirlist l = { 0 };
	const char *env = getenv("TXLGEN_MODEL_PATH");
	const char *xdg = getenv("XDG_DATA_HOME");
	const char *home = getenv("HOME");
	char exe[PATH_MAX], *bindir = NULL, *s;
	ssize_t n;

	l.v = xrealloc(NULL, sizeof(*l.v));
	l.v[0] = NULL;
	if (env) {
		char *copy = xstrdup(env), *save = NULL;

		/* empty entries (a leading, trailing or doubled ':') count
		 * for nothing, not for the current directory */
		for (char *d = strtok_r(copy, ":", &save); d;
		     d = strtok_r(NULL, ":", &save))
			add_dir(&l, d);
		free(copy);
	}
	/* XDG: a relative XDG_DATA_HOME is invalid and ignored */
	if (xdg && xdg[0] == '/' && asprintf(&s, "%s/txlgen/models", xdg) >= 0) {
		add_dir(&l, s);
		free(s);
	} else if (home && *home &&
		   asprintf(&s, "%s/.local/share/txlgen/models", home) >= 0) {
		add_dir(&l, s);
		free(s);
	}

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		bindir = dirname(exe);
	}
	if (bindir && (same_dir(bindir, TXLGEN_BUILD_DIR) ||
		       same_dir(bindir, TXLGEN_SERVER_BUILD_DIR))) {
		/* run from the build directory: the source tree's model */
		add_dir(&l, TXLGEN_SOURCE_MODELS);
		return l.v;
	}
	if (bindir && TXLGEN_BIN_TO_DATADIR[0] != '/' &&
	    asprintf(&s, "%s/%s", bindir, TXLGEN_BIN_TO_DATADIR) >= 0) {
		add_dir(&l, s);
		free(s);
	}
	add_dir(&l, TXLGEN_DATADIR);
	return l.v;
}

void
model_path_free(char **dirs)
{
	for (char **d = dirs; d && *d; d++)
		free(*d);
	free(dirs);
}

/* "NAME.bin" for a name (a name ending in .bin as it is) */
static char *
file_name(const char *name)
{
	size_t n = strlen(name);
	char *f;

	if (n > strlen(SUFFIX) && !strcmp(name + n - strlen(SUFFIX), SUFFIX))
		return xstrdup(name);
	if (asprintf(&f, "%s%s", name, SUFFIX) < 0)
		die_oom();
	return f;
}

/* The models txlgen-get installs (the names of its catalog, in
 * models/txlgen-get; a test holds the two lists together). */
static const char *const published[] = {
	"wt103", "enwik8", "text8", "enwik8-large", "text8-large",
	"xl-enwik8", "xl-text8", "xl-wt103", "xl-lm1b",
};
#define N_PUBLISHED ((int)(sizeof(published) / sizeof(*published)))

/* How to run txlgen-get: beside an installed txlgen it is on the same
 * PATH; a txlgen run from its build directory names the one the build
 * put beside it (cmd/meson.build), by its path, or else the source
 * tree's. */
static const char *
getter(void)
{
	static char path[PATH_MAX];

	if (!from_build_dir())
		return "txlgen-get";
	if (snprintf(path, sizeof(path), "%s/txlgen-get", TXLGEN_BUILD_DIR) <
	    (int)sizeof(path) && access(path, X_OK) == 0)
		return path;
	return TXLGEN_SOURCE_MODELS "/txlgen-get";
}

const char *
model_foreign_format(const char *name, const unsigned char *head, size_t n)
{
	static const struct {
		const char *suffix, *what;
	} by_suffix[] = {
		{ ".gguf", "a GGUF model (llama.cpp)" },
		{ ".ggml", "a GGML model (llama.cpp)" },
		{ ".safetensors", "a safetensors checkpoint" },
		{ ".pt", "a PyTorch checkpoint" },
		{ ".pth", "a PyTorch checkpoint" },
		{ ".ckpt", "a checkpoint" },
		{ ".onnx", "an ONNX model" },
	};
	size_t len = name ? strlen(name) : 0;

	if (head && n >= 4 && !memcmp(head, "GGUF", 4))
		return "a GGUF model (llama.cpp)";
	if (head && n >= 4 && (!memcmp(head, "lmgg", 4) ||
			       !memcmp(head, "tjgg", 4) ||
			       !memcmp(head, "fmgg", 4)))
		return "a GGML model (llama.cpp)";
	if (head && n >= 4 && !memcmp(head, "PK\3\4", 4))
		return "a zip file (a PyTorch checkpoint?)";
	if (head && n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5)
		return "a Python pickle (a PyTorch checkpoint?)";
	for (size_t i = 0; i < sizeof(by_suffix) / sizeof(*by_suffix); i++) {
		size_t k = strlen(by_suffix[i].suffix);

		if (len > k && !strcasecmp(name + len - k, by_suffix[i].suffix))
			return by_suffix[i].what;
	}
	return NULL;
}

/* The installed names along @p dirs and the published ones, for "did
 * you mean": a malloc'd array of *@p n malloc'd names. */
static char **
known_names(char *const *dirs, int *n)
{
	char **v = NULL;

	*n = 0;
	for (int i = 0; i < N_PUBLISHED; i++) {
		v = xrealloc(v, (size_t)(*n + 1) * sizeof(*v));
		v[(*n)++] = xstrdup(published[i]);
	}
	for (char *const *d = dirs; *d; d++) {
		DIR *dir = opendir(*d);
		struct dirent *de;

		while (dir && (de = readdir(dir))) {
			size_t len = strlen(de->d_name);

			if (len <= strlen(SUFFIX) || de->d_name[0] == '.' ||
			    strcmp(de->d_name + len - strlen(SUFFIX), SUFFIX))
				continue;
			v = xrealloc(v, (size_t)(*n + 1) * sizeof(*v));
			v[*n] = xstrdup(de->d_name);
			v[(*n)++][len - strlen(SUFFIX)] = '\0';
		}
		if (dir)
			closedir(dir);
	}
	return v;
}

static bool
is_published(const char *name)
{
	for (int i = 0; i < N_PUBLISHED; i++)
		if (!strcmp(name, published[i]))
			return true;
	return false;
}

/* Whether NAME.bin is in one of @p dirs. */
static bool
installed(const char *name, char *const *dirs)
{
	struct stat sb;
	bool found = false;
	char *f;

	for (char *const *d = dirs; *d && !found; d++) {
		if (asprintf(&f, "%s/%s%s", *d, name, SUFFIX) < 0)
			die_oom();
		found = stat(f, &sb) == 0 && S_ISREG(sb.st_mode);
		free(f);
	}
	return found;
}

/* The one-line message for a model @p spec that is neither a file nor a
 * name along the model path (@p where: the directories searched). */
static void
report_missing(const char *spec, const char *what, const char *file,
	       const char *where, char *const *dirs)
{
	const char *foreign = model_foreign_format(spec, NULL, 0);
	const char *close;
	char **names;
	int n;

	if (is_published(spec)) {
		errmsg("%s %s: not installed (no %s in %s); '%s %s' downloads, "
		       "converts and installs it", what, spec, file, where,
		       getter(), spec);
		return;
	}
	if (foreign) {
		errmsg("%s %s: no such file; and a file of that name would be "
		       "%s, while txlgen runs only Transformer-XL model files "
		       "(txlgen-model(5))", what, spec, foreign);
		return;
	}
	names = known_names(dirs, &n);
	close = suggest_closest(spec, (const char *const *)names, n);
	if (close) {
		char hint[PATH_MAX + 64] = "";

		if (is_published(close) && !installed(close, dirs))
			snprintf(hint, sizeof(hint), " ('%s %s' installs it)",
				 getter(), close);
		errmsg("%s %s: no such file, nor %s in %s; did you mean '%s'?%s",
		       what, spec, file, where, close, hint);
	}
	else
		errmsg("%s %s: no such file, nor %s in %s; txlgen runs "
		       "Transformer-XL model files (txlgen-model(5)), not GPT-2, "
		       "llama or GGUF models; 'txlgen --list-models' lists the "
		       "installed ones, '%s --list' the published ones",
		       what, spec, file, where, getter());
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

char *
model_find(const char *spec, const char *what)
{
	struct stat sb;
	struct strbuf where = { 0 };
	char **dirs, *file, *path = NULL;

	if (what && (strchr(spec, '/') || stat(spec, &sb) == 0))
		return xstrdup(spec);
	/* a link that leads nowhere (dangling, a loop) is that file, not a
	 * name to look for */
	if (what && lstat(spec, &sb) == 0) {
		int e = (stat(spec, &sb), errno);

		errmsg("%s %s: %s", what, spec, strerror(e));
		return NULL;
	}
	file = file_name(spec);
	dirs = model_path();
	for (char **d = dirs; *d && !path; d++) {
		if (asprintf(&path, "%s/%s", *d, file) < 0)
			die_oom();
		if (stat(path, &sb) != 0 || S_ISDIR(sb.st_mode)) {
			free(path);
			path = NULL;
		}
		if (where.len)
			strbuf_add(&where, ", ", 2);
		strbuf_add(&where, *d, strlen(*d));
	}
	if (!path && what)
		report_missing(spec, what, file,
			       where.len ? where.s : "(no directory)", dirs);
	else if (!path)
		errmsg("no model: the default model %s is in none of %s; "
		       "give one with --model FILE or NAME", file,
		       where.len ? where.s : "(no directory)");
	strbuf_free(&where);
	model_path_free(dirs);
	free(file);
	return path;
}

/* ------------------------------------------------------------------ */
/* --list-models                                                       */

struct entry {
	char *name;         /* without .bin */
	const char *dir;
	char *path;
	uint64_t bytes;
	char weights[16];   /* the dtype holding most of the weight bytes */
	char *vocab;        /* "SentencePiece", "word", "char" */
	long n_token;
	char *description;
	char *source;
	char *error;        /* not a model txlgen reads: why */
	bool shadowed;      /* a file of the same name comes earlier */
};

static char *
dup_clean(const char *s)
{
	char *d;

	if (!s)
		return NULL;
	d = xstrdup(s);
	text_clean_line(d);
	return d;
}

static const char *
meta_string(const struct txl_model_info *in, const char *key)
{
	for (int i = 0; i < in->n_meta; i++)
		if (!strcmp(in->meta[i].key, key))
			return in->meta[i].value;
	return NULL;
}

/* Fill @p e from its file's header (libtxl's peek: no weight is read);
 * e->error on failure. */
static void
read_entry(struct entry *e)
{
	double bytes[TXL_N_DTYPES] = { 0 }, best = 0;
	struct txl_model_info *in;
	const char *kind, *why;
	size_t n = strlen(e->path);

	if (txl_model_peek(e->path, &in) != TXL_OK) {
		/* the row names the file */
		why = txl_last_error();
		if (!strncmp(why, e->path, n) && !strncmp(why + n, ": ", 2))
			why += n + 2;
		e->error = dup_clean(why);
		return;
	}
	kind = meta_string(in, "vocab_kind");
	e->vocab = dup_clean(kind ? kind : "SentencePiece");
	e->n_token = in->hparams->n_token;
	e->description = dup_clean(meta_string(in, "description"));
	e->source = dup_clean(meta_string(in, "source"));

	/* the weights' storage: the dtype of most bytes, the tokenizer's
	 * bytes (U8) aside */
	for (int i = 0; i < in->n_tensors; i++) {
		const struct txl_tensor_desc *t = &in->tensors[i];

		if (t->dtype == TXL_U8 || t->dtype >= TXL_N_DTYPES)
			continue;
		bytes[t->dtype] += (double)t->bytes;
		if (bytes[t->dtype] > best) {
			best = bytes[t->dtype];
			snprintf(e->weights, sizeof(e->weights), "%s",
				 txl_dtype_name(t->dtype));
		}
	}
	txl_model_info_free(in);
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name,
		      ((const struct entry *)b)->name);
}

/* The models of @p dir, sorted by name, appended to *@p v. */
static void
scan_dir(const char *dir, struct entry **v, int *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int first = *n;

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat sb;
		struct entry *e;

		if (len <= strlen(SUFFIX) || de->d_name[0] == '.' ||
		    strcmp(de->d_name + len - strlen(SUFFIX), SUFFIX) ||
		    fstatat(dirfd(d), de->d_name, &sb, 0) != 0 ||
		    S_ISDIR(sb.st_mode))
			continue;
		*v = xrealloc(*v, (size_t)(*n + 1) * sizeof(**v));
		e = &(*v)[(*n)++];
		memset(e, 0, sizeof(*e));
		e->name = xstrdup(de->d_name);
		e->name[len - strlen(SUFFIX)] = '\0';
		e->dir = dir;
		e->bytes = (uint64_t)sb.st_size;
		if (asprintf(&e->path, "%s/%s", dir, de->d_name) < 0)
			die_oom();
	}
	closedir(d);
	qsort(*v + first, (size_t)(*n - first), sizeof(**v), cmp_name);
}

/* "37.1 MB" */
static void
fmt_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1000 && u < 4) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", b);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

static void
vocab_text(const struct entry *e, char *buf, size_t len)
{
	if (e->error)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s %ld", e->vocab, e->n_token);
}

/* What the model is, in the last column. */
static char *
about(const struct entry *e)
{
	struct strbuf b = { 0 };

	strbuf_add(&b, "", 0);
	if (e->shadowed)
		strbuf_add(&b, "(shadowed) ", 11);
	if (e->error)
		strbuf_add(&b, e->error, strlen(e->error));
	else if (e->description)
		strbuf_add(&b, e->description, strlen(e->description));
	if (e->source) {
		strbuf_add(&b, b.len ? " (source: " : "(source: ",
			   b.len ? 10 : 9);
		strbuf_add(&b, e->source, strlen(e->source));
		strbuf_add(&b, ")", 1);
	}
	return b.s;
}

static void
print_json(FILE *out, const struct entry *e)
{
	cJSON *o = cJSON_CreateObject();
	char *s;

	cJSON_AddStringToObject(o, "name", e->name);
	cJSON_AddStringToObject(o, "path", e->path);
	cJSON_AddNumberToObject(o, "bytes", (double)e->bytes);
	if (e->error) {
		cJSON_AddStringToObject(o, "error", e->error);
	} else {
		cJSON_AddStringToObject(o, "weights", e->weights);
		cJSON_AddStringToObject(o, "vocabulary", e->vocab);
		cJSON_AddNumberToObject(o, "n_token", (double)e->n_token);
		if (e->description)
			cJSON_AddStringToObject(o, "description", e->description);
		else
			cJSON_AddNullToObject(o, "description");
		if (e->source)
			cJSON_AddStringToObject(o, "source", e->source);
		else
			cJSON_AddNullToObject(o, "source");
	}
	cJSON_AddBoolToObject(o, "shadowed", e->shadowed);
	s = json_string(o, -1);
	fprintf(out, "%s\n", s);
	free(s);
	cJSON_Delete(o);
}

static void
print_table(FILE *out, const struct entry *v, int n)
{
	int wn = 4, ws = 4, ww = 7, wv = 10;
	char size[32], voc[64];
	const char *dir = NULL;

	for (int i = 0; i < n; i++) {
		fmt_bytes(v[i].bytes, size, sizeof(size));
		vocab_text(&v[i], voc, sizeof(voc));
		wn = (int)strlen(v[i].name) > wn ? (int)strlen(v[i].name) : wn;
		ws = (int)strlen(size) > ws ? (int)strlen(size) : ws;
		ww = (int)strlen(v[i].weights) > ww ? (int)strlen(v[i].weights)
			: ww;
		wv = (int)strlen(voc) > wv ? (int)strlen(voc) : wv;
	}
	fprintf(out, "  %-*s  %*s  %-*s  %-*s  %s\n", wn, "NAME", ws, "SIZE",
		ww, "WEIGHTS", wv, "VOCABULARY", "DESCRIPTION");
	for (int i = 0; i < n; i++) {
		char *name = dup_clean(v[i].name), *what = about(&v[i]);

		if (v[i].dir != dir) {
			char *d = dup_clean(v[i].dir);

			dir = v[i].dir;
			fprintf(out, "%s:\n", d);
			free(d);
		}
		fmt_bytes(v[i].bytes, size, sizeof(size));
		vocab_text(&v[i], voc, sizeof(voc));
		fprintf(out, "  %-*s  %*s  %-*s  %-*s  %s\n", wn, name, ws, size,
			ww, v[i].error ? "-" : v[i].weights, wv, voc, what);
		free(name);
		free(what);
	}
}

int
models_list(FILE *out, bool json)
{
	char **dirs = model_path();
	struct entry *v = NULL;
	struct strbuf where = { 0 };
	int n = 0;

	for (char **d = dirs; *d; d++) {
		scan_dir(*d, &v, &n);
		if (where.len)
			strbuf_add(&where, ", ", 2);
		strbuf_add(&where, *d, strlen(*d));
	}
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < i && !v[i].shadowed; j++)
			v[i].shadowed = !strcmp(v[i].name, v[j].name);
		read_entry(&v[i]);
	}
	if (json) {
		for (int i = 0; i < n; i++)
			print_json(out, &v[i]);
	} else if (n) {
		print_table(out, v, n);
	}
	if (!n)
		errmsg("no models in %s; 'txlgen-get NAME' installs a "
		       "published one", where.len ? where.s : "(no directory)");
	for (int i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].path);
		free(v[i].vocab);
		free(v[i].description);
		free(v[i].source);
		free(v[i].error);
	}
	free(v);
	strbuf_free(&where);
	model_path_free(dirs);
	fflush(out);
	if (ferror(out)) {
		errmsg("writing output failed: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}
