/* SPDX-License-Identifier: MIT */
/*
 * txl-state.c - the content hash, model fingerprints and memory state
 * files.  A state file holds a session's memory (the K and V of every
 * layer) and the output of the last position fed, so that a later run
 * continues the text exactly; it records the fingerprint of the model it
 * belongs to and ends with a checksum.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txl-internal.h"

#define STATE_MAGIC "TXLSTATE"
#define STATE_VERSION 2u	/* 2: the checksum is txl_hash */

/* FNV-1a with 8-byte words as its units (eight times fewer steps than
 * bytes; a content identity, not a cryptographic hash). */
#define HASH_SEED 0xcbf29ce484222325ull
#define HASH_PRIME 0x100000001b3ull

void
txl_hash_init(struct txl_hash *hs)
{
	hs->h = HASH_SEED;
	hs->nbuf = 0;
}

void
txl_hash_update(struct txl_hash *hs, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t w;

	/* complete a word begun by an earlier call */
	while (hs->nbuf > 0 && hs->nbuf < 8 && n > 0) {
		hs->buf[hs->nbuf++] = *b++;
		n--;
	}
	if (hs->nbuf == 8) {
		memcpy(&w, hs->buf, 8);
		hs->h = (hs->h ^ w) * HASH_PRIME;
		hs->nbuf = 0;
	}
	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);	/* little-endian host */
		hs->h = (hs->h ^ w) * HASH_PRIME;
	}
	memcpy(hs->buf + hs->nbuf, b, n);
	hs->nbuf += (unsigned)n;
}

uint64_t
txl_hash_final(const struct txl_hash *hs)
{
	uint64_t h = hs->h;

	/* the tail bytes one at a time */
	for (unsigned i = 0; i < hs->nbuf; i++)
		h = (h ^ hs->buf[i]) * HASH_PRIME;
	return h;
}

uint64_t
txl_model_fingerprint(struct txl_model *m)
{
	/* of the whole file: the same weights in another file are another
	 * model as far as state files go */
	if (m->fingerprint == 0) {
		struct txl_hash hs;
		uint64_t h;

		txl_hash_init(&hs);
		txl_hash_update(&hs, m->file.map, m->file.size);
		h = txl_hash_final(&hs);
		m->fingerprint = h ? h : 1;
	}
	return m->fingerprint;
}

struct state_header {
	char magic[8];
	uint32_t version;
	uint32_t n_layer;
	uint64_t fingerprint;	/* of the model file */
	uint32_t d_model, n_head, d_head;
	uint32_t mem_len;	/* rows stored per layer, fill or not */
	uint32_t fill;		/* rows that hold memory */
	uint32_t have_last;	/* 1 if last_h below is the output of the
				   last position fed */
	int64_t n_past;
	/* then per layer mem_len rows of K, then of V; d_model floats of
	 * last_h; the txl_hash of everything before it */
};

static bool
write_all(int fd, const void *p, size_t n, struct txl_hash *sum)
{
	const char *c = p;

	txl_hash_update(sum, p, n);
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

enum txl_status
txl_session_save(struct txl_session *s, const char *path)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	struct state_header hdr = { .version = STATE_VERSION };
	struct txl_hash sum;
	size_t len = strlen(path);
	char *tmp = malloc(len + 16);
	float *zeros = NULL;
	bool ok = true;
	int fd;

	if (!tmp)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	txl_hash_init(&sum);
	memcpy(hdr.magic, STATE_MAGIC, 8);
	hdr.n_layer = (uint32_t)hp->n_layer;
	hdr.fingerprint = txl_model_fingerprint((struct txl_model *)s->model);
	hdr.d_model = (uint32_t)hp->d_model;
	hdr.n_head = (uint32_t)hp->n_head;
	hdr.d_head = (uint32_t)hp->d_head;
	hdr.mem_len = (uint32_t)s->mem_len;
	hdr.fill = (uint32_t)s->mlen;
	hdr.have_last = s->have_last;
	hdr.n_past = s->n_past;

	snprintf(tmp, len + 16, "%s.tmpXXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		enum txl_status st = txl_fail(TXL_ERR_IO, "%s: %s", path,
					      strerror(errno));
		free(tmp);
		return st;
	}
	/* fixed size: per layer mem_len rows of K, then of V, zeros past
	 * the fill */
	zeros = txl_alloc_floats(hd);
	ok = zeros && write_all(fd, &hdr, sizeof hdr, &sum);
	for (int l = 0; ok && l < hp->n_layer; l++) {
		for (int which = 0; ok && which < 2; which++) {
			const float *buf = which ? s->v[l] : s->k[l];
			ok = write_all(fd, buf + (size_t)s->kv_start * hd,
				       sizeof(float) * hd * (size_t)s->mlen, &sum);
			for (int r = s->mlen; ok && r < s->mem_len; r++)
				ok = write_all(fd, zeros, sizeof(float) * hd,
					       &sum);
		}
	}
	ok = ok && write_all(fd, s->last_h, sizeof(float) * hp->d_model, &sum);
	if (ok) {
		uint64_t final = txl_hash_final(&sum);
		ok = write_all(fd, &final, sizeof final, &sum);
	}
	ok = ok && fsync(fd) == 0;
	int saved_errno = errno;
	ok = close(fd) == 0 && ok;
	free(zeros);
	if (ok && rename(tmp, path) == 0) {
		free(tmp);
		return TXL_OK;
	}
	if (!saved_errno)
		saved_errno = errno;
	unlink(tmp);
	free(tmp);
	return txl_fail(TXL_ERR_IO, "%s: cannot write state: %s", path,
			strerror(saved_errno ? saved_errno : EIO));
}

enum txl_status
txl_session_load(struct txl_session *s, const char *path)
{
	const struct txl_hparams *hp = &s->model->hp;
	const size_t hd = (size_t)hp->n_head * hp->d_head;
	struct state_header hdr;
	struct txl_hash sum;
	uint64_t stored;
	enum txl_status st = TXL_OK;
	float **k = NULL, **v = NULL, *last = NULL;
	size_t rows_bytes, want;
	FILE *f;
	long size;

	f = fopen(path, "rb");
	if (!f)
		return txl_fail(TXL_ERR_IO, "%s: %s", path, strerror(errno));
	if (fread(&hdr, sizeof hdr, 1, f) != 1 ||
	    memcmp(hdr.magic, STATE_MAGIC, 8) != 0) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: not a txlgen state file",
			      path);
		goto out;
	}
	if (hdr.version != STATE_VERSION) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: state format version %u, "
			      "expected %u", path, hdr.version, STATE_VERSION);
		goto out;
	}
	if (hdr.fingerprint !=
	    txl_model_fingerprint((struct txl_model *)s->model) ||
	    hdr.n_layer != (uint32_t)hp->n_layer ||
	    hdr.d_model != (uint32_t)hp->d_model ||
	    hdr.n_head != (uint32_t)hp->n_head ||
	    hdr.d_head != (uint32_t)hp->d_head) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state was saved with "
			      "another model", path);
		goto out;
	}
	if (hdr.fill > hdr.mem_len || hdr.mem_len > (1u << 20) ||
	    hdr.have_last > 1 || hdr.n_past < (int64_t)hdr.fill ||
	    (hdr.have_last && hdr.n_past == 0)) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: damaged state (fill %u, "
			      "mem_len %u, %lld positions fed)", path, hdr.fill,
			      hdr.mem_len, (long long)hdr.n_past);
		goto out;
	}
	if (hdr.fill > (uint32_t)s->mem_len) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state holds %u positions, "
			      "more than this session's mem_len %d (saved with "
			      "mem_len %u)", path, hdr.fill, s->mem_len,
			      hdr.mem_len);
		goto out;
	}
	rows_bytes = sizeof(float) * hd * hdr.mem_len;
	want = sizeof hdr + 2 * rows_bytes * hp->n_layer +
		sizeof(float) * hp->d_model + sizeof stored;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    (size_t)size != want || fseek(f, (long)sizeof hdr, SEEK_SET) != 0) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: state file has the wrong "
			      "size (truncated?)", path);
		goto out;
	}
	/* read into new buffers, so that a bad file leaves s unchanged */
	k = calloc((size_t)hp->n_layer, sizeof *k);
	v = calloc((size_t)hp->n_layer, sizeof *v);
	if (!k || !v) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	txl_hash_init(&sum);
	txl_hash_update(&sum, &hdr, sizeof hdr);
	for (int l = 0; l < hp->n_layer && st == TXL_OK; l++) {
		k[l] = txl_alloc_floats((size_t)s->cap * hd);
		v[l] = txl_alloc_floats((size_t)s->cap * hd);
		if (!k[l] || !v[l]) {
			st = txl_fail(TXL_ERR_NOMEM, "out of memory");
			break;
		}
		for (int which = 0; which < 2; which++) {
			float *buf = which ? v[l] : k[l];
			float *scratch = malloc(rows_bytes ? rows_bytes : 1);
			if (!scratch || fread(scratch, 1, rows_bytes, f) !=
			    rows_bytes) {
				free(scratch);
				st = txl_fail(TXL_ERR_FORMAT, "%s: cannot read "
					      "state", path);
				break;
			}
			txl_hash_update(&sum, scratch, rows_bytes);
			memcpy(buf, scratch, sizeof(float) * hd * hdr.fill);
			free(scratch);
		}
	}
	last = txl_alloc_floats((size_t)hp->d_model);
	if (st == TXL_OK && (!last || fread(last, sizeof(float),
					   (size_t)hp->d_model, f) !=
			     (size_t)hp->d_model))
		st = txl_fail(TXL_ERR_FORMAT, "%s: cannot read state", path);
	if (st == TXL_OK)
		txl_hash_update(&sum, last, sizeof(float) * hp->d_model);
	if (st == TXL_OK && (fread(&stored, sizeof stored, 1, f) != 1 ||
			     stored != txl_hash_final(&sum)))
		st = txl_fail(TXL_ERR_FORMAT, "%s: state checksum mismatch "
			      "(damaged file)", path);
	if (st == TXL_OK) {
		for (int l = 0; l < hp->n_layer; l++) {
			float *t = s->k[l];
			s->k[l] = k[l];
			k[l] = t;
			t = s->v[l];
			s->v[l] = v[l];
			v[l] = t;
		}
		s->kv_start = 0;
		s->mlen = (int)hdr.fill;
		s->n_past = hdr.n_past;
		s->have_last = hdr.have_last;
		memcpy(s->last_h, last, sizeof(float) * hp->d_model);
		s->n_logits = 0;
		if (s->have_last) {
			/* the prediction that follows the saved text */
			memcpy(s->h, last, sizeof(float) * hp->d_model);
			txl_output_logits(s, 0, 1);
			s->n_logits = 1;
		}
	}
out:
	for (int l = 0; l < hp->n_layer; l++) {
		if (k)
			free(k[l]);
		if (v)
			free(v[l]);
	}
	free(k);
	free(v);
	free(last);
	fclose(f);
	return st;
}
