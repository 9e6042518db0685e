/* SPDX-License-Identifier: MIT */
/*
 * txl-file.c - map (or read) a safetensors file and validate its
 * container.
 *
 *   u64 (little-endian) N | N bytes of JSON | tensor data
 *
 * The JSON object maps tensor names to {"dtype", "shape", "data_offsets"}
 * with offsets relative to the start of the data, plus "__metadata__", an
 * object of strings.  Everything is checked before any pointer into the
 * data is formed: the header fits in the file, it is one JSON object with
 * nothing after it but spaces, dtypes are known, shapes are non-negative,
 * each tensor's byte range lies inside the data, matches its shape and
 * dtype, and overlaps no other.  What the tensors must be for a
 * Transformer-XL is txl-bind.c's business.
 */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "txl-alloc.h"
#include "txl-file.h"
#include "txl-hash.h"
#include "txl-log.h"
#include "txl-types.h"
#include "txl-limits.h"

/* A JSON number that is an exact non-negative integer below 2^53. */
static bool
json_uint(const cJSON *item, uint64_t *out)
{
	double d;

	if (!cJSON_IsNumber(item))
		return false;
	d = item->valuedouble;
	if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d)
		return false;
	*out = (uint64_t)d;
	return true;
}

static int
cmp_begin(const void *a, const void *b)
{
	const struct txl_tensor_info *x = *(const struct txl_tensor_info *const *)a;
	const struct txl_tensor_info *y = *(const struct txl_tensor_info *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int
cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct txl_meta_entry *)a)->key,
		      ((const struct txl_meta_entry *)b)->key);
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct txl_tensor_info *)a)->name,
		      ((const struct txl_tensor_info *)b)->name);
}

static enum txl_status
parse_tensor(struct txl_file *f, const cJSON *item, uint64_t data_start,
	     struct txl_tensor_info *t)
{
	const char *p = f->path, *name = item->string;
	const cJSON *dtype, *shape, *offsets, *dim;
	uint64_t b, e, numel = 1, v;

	if (!cJSON_IsObject(item))
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' is not a JSON "
				"object", p, name);
	dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
	shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
	offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
	if (!cJSON_IsString(dtype))
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s': \"dtype\" is "
				"missing or not a string", p, name);
	if (!cJSON_IsArray(shape))
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s': \"shape\" is "
				"missing or not an array", p, name);
	if (!cJSON_IsArray(offsets))
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s': "
				"\"data_offsets\" is missing or not an array",
				p, name);
	if (!txl_dtype_parse(dtype->valuestring, &t->dtype)) {
		char types[96];

		txl_dtype_names(types, sizeof types, false, true);
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has unsupported "
				"dtype '%.32s' (expected %s)", p, name,
				dtype->valuestring, types);
	}
	t->ndim = cJSON_GetArraySize(shape);
	if (t->ndim > TXL_MAX_DIMS)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has %d "
				"dimensions (at most %d)", p, name, t->ndim,
				TXL_MAX_DIMS);
	int i = 0;
	cJSON_ArrayForEach(dim, shape) {
		/* 2^31 per dimension keeps every product below 2^124: check
		 * the running product instead of trusting it. */
		if (!json_uint(dim, &v) || v > INT32_MAX)
			return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has a "
					"bad shape entry", p, name);
		t->shape[i++] = (int64_t)v;
		if (v != 0 && numel > UINT64_MAX / 16 / v)
			return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' is "
					"impossibly large", p, name);
		numel *= v;
	}
	if (cJSON_GetArraySize(offsets) != 2 ||
	    !json_uint(cJSON_GetArrayItem(offsets, 0), &b) ||
	    !json_uint(cJSON_GetArrayItem(offsets, 1), &e) || e < b)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has bad "
				"data_offsets", p, name);
	if (!f->header_only && e > f->size - data_start)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' ends at byte "
				"%llu, beyond the end of the file (truncated?)",
				p, name, (unsigned long long)(data_start + e));
	/* a block type (not a safetensors dtype: txlgen's own)
	 * holds blocks of values along the last dimension */
	const struct txl_type *type = txl_type(t->dtype);
	if (type->block > 1 && (t->ndim == 0 ||
				t->shape[t->ndim - 1] % type->block != 0))
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' is %s but its "
				"last dimension is not a multiple of %d", p,
				name, type->name, type->block);
	const uint64_t need = numel / (uint64_t)type->block * type->bytes;
	if (e - b != need)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor '%s' has %llu bytes, "
				"its shape and dtype need %llu", p, name,
				(unsigned long long)(e - b),
				(unsigned long long)need);
	t->begin = data_start + b;
	t->end = data_start + e;
	if (t->end > f->data_end)
		f->data_end = t->end;
	t->name = strdup(name);
	return t->name ? TXL_OK : txl_fail(TXL_ERR_NOMEM, "out of memory");
}

static enum txl_status
parse_metadata(struct txl_file *f, const cJSON *meta)
{
	const cJSON *item;
	int n = 0;

	if (!cJSON_IsObject(meta))
		return txl_fail(TXL_ERR_FORMAT, "%s: __metadata__ is not a JSON "
				"object", f->path);
	f->meta = calloc((size_t)cJSON_GetArraySize(meta) + 1, sizeof *f->meta);
	if (!f->meta)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	cJSON_ArrayForEach(item, meta) {
		if (!cJSON_IsString(item))
			return txl_fail(TXL_ERR_FORMAT, "%s: metadata '%s' is "
					"not a string", f->path, item->string);
		f->meta[n].key = strdup(item->string);
		f->meta[n].value = strdup(item->valuestring);
		f->meta[n].index = n;
		f->n_meta = ++n;
		if (!f->meta[n - 1].key || !f->meta[n - 1].value)
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	/* Sorted for lookups; a key given twice would mean one thing here
	 * and another to a reader that keeps the last one. */
	qsort(f->meta, (size_t)f->n_meta, sizeof *f->meta, cmp_key);
	for (int i = 1; i < f->n_meta; i++)
		if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0)
			return txl_fail(TXL_ERR_FORMAT, "%s: duplicate metadata "
					"'%s'", f->path, f->meta[i].key);
	return TXL_OK;
}

static enum txl_status
parse_header(struct txl_file *f, const char *json, size_t len,
	     uint64_t data_start)
{
	const char *end = NULL;
	cJSON *root, *item;
	enum txl_status st = TXL_OK;

	if (json[0] != '{')
		return txl_fail(TXL_ERR_FORMAT, "%s: header is not a JSON "
				"object (it does not start with '{'): not a "
				"model file?", f->path);
	/* Embedded NULs would silently shorten the parse: refuse them. */
	if (memchr(json, '\0', len))
		return txl_fail(TXL_ERR_FORMAT, "%s: header contains a NUL byte",
				f->path);
	root = cJSON_ParseWithLengthOpts(json, len, &end, false);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();
		size_t off = at && at >= json && at < json + len
			? (size_t)(at - json) : len;
		return txl_fail(TXL_ERR_FORMAT, "%s: header is not valid JSON "
				"(error at byte %zu of its %zu)", f->path, off,
				len);
	}
	for (const char *q = end; q < json + len; q++) {
		if (*q != ' ') {
			st = txl_fail(TXL_ERR_FORMAT, "%s: unexpected data after "
				      "the JSON header", f->path);
			goto out;
		}
	}
	if (!cJSON_IsObject(root)) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: header is not a JSON object",
			      f->path);
		goto out;
	}
	f->tensors = calloc((size_t)cJSON_GetArraySize(root) + 1,
			    sizeof *f->tensors);
	if (!f->tensors) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(item, root) {
		if (strcmp(item->string, "__metadata__") == 0) {
			if (f->meta) {
				st = txl_fail(TXL_ERR_FORMAT, "%s: duplicate "
					      "__metadata__", f->path);
				goto out;
			}
			st = parse_metadata(f, item);
		} else {
			f->tensors[f->n_tensors].index = f->n_tensors;
			st = parse_tensor(f, item, data_start,
					  &f->tensors[f->n_tensors]);
			if (st == TXL_OK)
				f->n_tensors++;
		}
		if (st != TXL_OK)
			goto out;
	}
	/* Sorted by name: duplicates are neighbours and txl_file_find() a
	 * binary search, so that a header of many tensors costs n log n,
	 * not n^2 (TXL_MAX_HEADER bytes list hundreds of thousands). */
	qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_name);
	for (int i = 1; i < f->n_tensors; i++) {
		if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
			st = txl_fail(TXL_ERR_FORMAT, "%s: duplicate tensor '%s'",
				      f->path, f->tensors[i].name);
			goto out;
		}
	}
out:
	cJSON_Delete(root);
	return st;
}

static enum txl_status
check_overlaps(struct txl_file *f)
{
	const struct txl_tensor_info **by_begin;
	enum txl_status st = TXL_OK;

	if (f->n_tensors < 2)
		return TXL_OK;
	by_begin = malloc((size_t)f->n_tensors * sizeof *by_begin);
	if (!by_begin)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int i = 0; i < f->n_tensors; i++)
		by_begin[i] = &f->tensors[i];
	qsort(by_begin, (size_t)f->n_tensors, sizeof *by_begin, cmp_begin);
	for (int i = 1; i < f->n_tensors; i++) {
		const struct txl_tensor_info *a = by_begin[i - 1], *b = by_begin[i];
		if (b->begin < a->end) {
			st = txl_fail(TXL_ERR_FORMAT, "%s: tensors '%s' and '%s' "
				      "overlap", f->path, a->name, b->name);
			break;
		}
	}
	free(by_begin);
	return st;
}

const char *
txl_file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a plain file";
}

enum txl_status
txl_open_regular(const char *path, int *fd, struct stat *sb)
{
	/* O_NONBLOCK: opening a FIFO with no writer, or a device, must not
	 * wait; nothing is read before fstat() says it is a regular file. */
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (*fd < 0)
		return txl_fail(TXL_ERR_IO, "%s: %s", path, strerror(errno));
	if (fstat(*fd, sb) < 0) {
		int e = errno;
		close(*fd);
		*fd = -1;
		return txl_fail(TXL_ERR_IO, "%s: %s", path, strerror(e));
	}
	if (!S_ISREG(sb->st_mode)) {
		close(*fd);
		*fd = -1;
		return txl_fail(TXL_ERR_IO, "%s: not a regular file (%s)", path,
				txl_file_kind(sb->st_mode));
	}
	/* blocking again: regular files never wait, but be plain about it */
	fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
	return TXL_OK;
}

/* n bytes of fd at offset at into buf, whole (a read may return fewer). */
static enum txl_status
read_at(const struct txl_file *f, int fd, uint8_t *buf, size_t n, size_t at)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)(at + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return txl_fail(TXL_ERR_IO, "%s: %s", f->path,
					strerror(errno));
		if (r == 0)
			return txl_fail(TXL_ERR_IO, "%s: the file shrank while "
					"it was read (replaced in place?)",
					f->path);
		got += (size_t)r;
	}
	return TXL_OK;
}

/* The content hash of the file fd (f->size bytes), read through a buffer
 * rather than the mapping: the pages of a mapped model stay untouched
 * until used (a large embedding table is mostly never read), so the
 * process's resident memory is what it computes with. */
static enum txl_status
hash_file(struct txl_file *f, int fd)
{
	enum { CHUNK = 1 << 20 };
	uint8_t *buf = malloc(CHUNK);
	struct txl_hash hs;
	enum txl_status st = TXL_OK;

	if (!buf)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	txl_hash_init(&hs);
	for (size_t done = 0; done < f->size && st == TXL_OK;) {
		const size_t want = f->size - done < CHUNK ? f->size - done
			: CHUNK;

		st = read_at(f, fd, buf, want, done);
		txl_hash_update(&hs, buf, want);
		done += want;
	}
	free(buf);
	if (st == TXL_OK)
		f->hash = txl_hash_final(&hs);
	return st;
}

/* The whole file into 64-byte aligned memory (TXL_LOAD_NO_MMAP): the
 * weights are then used in place as from a mapping, and nothing that
 * happens to the file later can reach them. */
static enum txl_status
read_whole(struct txl_file *f, int fd)
{
	uint8_t *buf = txl_alloc_bytes(f->size);
	enum txl_status st;

	if (!buf)
		return txl_fail(TXL_ERR_NOMEM, "%s: out of memory reading %zu "
				"bytes", f->path, f->size);
	if ((st = read_at(f, fd, buf, f->size, 0)) != TXL_OK) {
		free(buf);
		return st;
	}
	f->map = buf;
	f->owned = true;
	return TXL_OK;
}

/* The header's length, from the file's first 9 bytes @p head (8 if the
 * file has no more), checked against the file's size. */
static enum txl_status
check_length(const struct txl_file *f, const uint8_t *head, uint64_t *len)
{
	const char *path = f->path;
	uint64_t hlen;

	memcpy(&hlen, head, sizeof hlen);	/* little-endian host */
	*len = hlen;
	/* what a file is not comes first: a text or another program's
	 * file has no JSON after its length (the header's own faults are
	 * named below) */
	if (f->size > 8 && hlen != 0 &&
	    !strchr("{[\"-0123456789tfn \t\r\n", ((const char *)head)[8]))
		return txl_fail(TXL_ERR_FORMAT, "%s: not a txlgen model file "
				"(no JSON header after the first 8 bytes)",
				path);
	if (hlen == 0)
		return txl_fail(TXL_ERR_FORMAT, "%s: header length is 0 (not a "
				"model file)", path);
	if (hlen <= f->size - 8 && hlen > TXL_MAX_HEADER)
		return txl_fail(TXL_ERR_FORMAT, "%s: header of %llu bytes, more "
				"than the %u a model file may have", path,
				(unsigned long long)hlen, TXL_MAX_HEADER);
	if (hlen > f->size - 8)
		return txl_fail(TXL_ERR_FORMAT, "%s: header length %llu does "
				"not fit a file of %zu bytes (not a model file, "
				"or truncated)", path, (unsigned long long)hlen,
				f->size);
	return TXL_OK;
}

enum txl_status
txl_file_open(const char *path, unsigned flags, struct txl_file *f)
{
	struct stat sb;
	uint64_t hlen;
	enum txl_status st;
	void *map;
	int fd = -1;

	memset(f, 0, sizeof *f);
	f->path = strdup(path);
	if (!f->path)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");

	st = txl_open_regular(path, &fd, &sb);
	if (st != TXL_OK)
		goto fail;
	if ((uint64_t)sb.st_size < 8) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: file too short (%lld bytes) "
			      "to be a model", path, (long long)sb.st_size);
		goto fail;
	}
	f->size = (size_t)sb.st_size;
	if (flags & TXL_LOAD_NO_MMAP) {
		st = read_whole(f, fd);
		if (st != TXL_OK)
			goto fail;
	} else {
		map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			st = txl_fail(TXL_ERR_IO, "%s: cannot map: %s", path,
				      strerror(errno));
			goto fail;
		}
		f->map = map;
	}

	if ((st = check_length(f, f->map, &hlen)) != TXL_OK)
		goto fail;
	st = parse_header(f, (const char *)f->map + 8, hlen, 8 + hlen);
	if (st == TXL_OK)
		st = check_overlaps(f);
	if (st != TXL_OK)
		goto fail;
	/* a valid container: its fingerprint */
	if (f->owned) {
		struct txl_hash hs;

		txl_hash_init(&hs);
		txl_hash_update(&hs, f->map, f->size);
		f->hash = txl_hash_final(&hs);
	} else if ((st = hash_file(f, fd)) != TXL_OK) {
		goto fail;
	}
	close(fd);
	return TXL_OK;
fail:
	if (fd >= 0)
		close(fd);
	txl_file_close(f);
	return st;
}

enum txl_status
txl_file_peek(const char *path, struct txl_file *f)
{
	uint8_t head[9] = { 0 };
	struct stat sb;
	uint64_t hlen;
	enum txl_status st;
	char *json = NULL;
	int fd = -1;

	memset(f, 0, sizeof *f);
	f->header_only = true;
	f->path = strdup(path);
	if (!f->path)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	if ((st = txl_open_regular(path, &fd, &sb)) != TXL_OK)
		goto out;
	if ((uint64_t)sb.st_size < 8) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: file too short (%lld bytes) "
			      "to be a model", path, (long long)sb.st_size);
		goto out;
	}
	f->size = (size_t)sb.st_size;
	if ((st = read_at(f, fd, head, f->size > 8 ? 9 : 8, 0)) != TXL_OK ||
	    (st = check_length(f, head, &hlen)) != TXL_OK)
		goto out;
	/* at most TXL_MAX_HEADER bytes, as the loader parses */
	if (!(json = malloc((size_t)hlen))) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((st = read_at(f, fd, (uint8_t *)json, (size_t)hlen, 8)) != TXL_OK)
		goto out;
	st = parse_header(f, json, (size_t)hlen, 8 + hlen);
	if (st == TXL_OK)
		st = check_overlaps(f);
out:
	free(json);
	if (fd >= 0)
		close(fd);
	if (st != TXL_OK)
		txl_file_close(f);
	return st;
}

void
txl_file_close(struct txl_file *f)
{
	if (f->owned)
		free((void *)f->map);
	else if (f->map)
		munmap((void *)f->map, f->size);
	for (int i = 0; i < f->n_tensors; i++)
		free(f->tensors[i].name);
	for (int i = 0; i < f->n_meta; i++) {
		free(f->meta[i].key);
		free(f->meta[i].value);
	}
	free(f->tensors);
	free(f->meta);
	free(f->path);
	memset(f, 0, sizeof *f);
}

const struct txl_tensor_info *
txl_file_find(const struct txl_file *f, const char *name)
{
	/* f->tensors is sorted by name (parse_header) */
	const struct txl_tensor_info key = { .name = (char *)name };

	if (f->n_tensors == 0)
		return NULL;
	return bsearch(&key, f->tensors, (size_t)f->n_tensors,
		       sizeof *f->tensors, cmp_name);
}

const char *
txl_file_meta(const struct txl_file *f, const char *key)
{
	/* f->meta is sorted by key (parse_metadata) */
	const struct txl_meta_entry k = { .key = (char *)key };
	const struct txl_meta_entry *e;

	if (f->n_meta == 0)
		return NULL;
	e = bsearch(&k, f->meta, (size_t)f->n_meta, sizeof *f->meta, cmp_key);
	return e ? e->value : NULL;
}
