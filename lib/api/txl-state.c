/* SPDX-License-Identifier: MIT */
/*
 * txl-state.c - memory state files.  A state file
 * holds a session's memory (the K and V of every layer, in the session's
 * kv_type) and the output of the last position fed, so that a later run
 * continues the text exactly; it records the fingerprint of the model it
 * belongs to and ends with a checksum (txl-state.h).  A memory of another
 * kv_type is converted on load (F16, BF16 and Q8_0 widen to F32 exactly;
 * the other ways round as the session's kv_type rounds what it stores),
 * so that a state follows the user's --kv-type rather than refusing it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "txl-state.h"
#include "txl-alloc.h"
#include "txl-file.h"
#include "txl-hash.h"
#include "txl-kv.h"
#include "txl-log.h"
#include "txl-session.h"
#include "txl-session-params.h"
#include "txl-types.h"


static bool
write_all(int fd, const void *p, size_t n, struct txl_hash *sum)
{
	const char *c = p;

	txl_hash_update(sum, p, n);
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return false;
		}
		c += w;
		n -= (size_t)w;
	}
	return true;
}

/* The whole state into fd; false with errno set.  Only the rows that
 * hold memory are written: a state is the size of what it holds. */
static bool
write_state(struct txl_session *s, int fd, const int32_t *recent,
	    int n_recent)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_kv *kv = &s->kv;
	const size_t row = kv->row;
	struct txl_state_header hdr = { .version = TXL_STATE_VERSION };
	struct txl_hash sum;
	uint64_t final;
	bool ok;

	memcpy(hdr.magic, TXL_STATE_MAGIC, 8);
	hdr.n_layer = (uint32_t)hp->n_layer;
	hdr.fingerprint = txl_model_fingerprint(s->model);
	hdr.d_model = (uint32_t)hp->d_model;
	hdr.n_head = (uint32_t)hp->n_head;
	hdr.d_head = (uint32_t)hp->d_head;
	hdr.mem_len = (uint32_t)s->params.mem_len;
	hdr.fill = (uint32_t)s->kv.fill;
	hdr.have_last = s->have_last;
	hdr.n_past = s->n_past;
	hdr.kv_type = (uint32_t)s->params.kv_type;
	hdr.n_recent = (uint32_t)n_recent;
	hdr.mem_zeros = kv->zeros;

	txl_hash_init(&sum);
	ok = write_all(fd, &hdr, sizeof hdr, &sum);
	/* per layer K, then V, per head the rows it holds; the abort
	 * callback asked between heads */
	for (int l = 0; ok && l < hp->n_layer; l++) {
		for (int which = 0; ok && which < 2; which++) {
			for (int h = 0; ok && h < hp->n_head; h++) {
				const struct txl_kv_head *hd =
					txl_kv_head(kv, l, h);
				const int fill = txl_kv_head_fill(kv, hd);

				if (txl_aborted(s)) {
					errno = ECANCELED;
					ok = false;
					break;
				}
				ok = write_all(fd, which ? txl_kv_v(kv, l, h)
					       : txl_kv_k(kv, l, h),
					       row * (size_t)fill, &sum);
			}
		}
	}
	ok = ok && write_all(fd, s->last_h, sizeof(float) * hp->d_model, &sum);
	ok = ok && (n_recent == 0 || write_all(fd, recent, sizeof(int32_t) *
					       (size_t)n_recent, &sum));
	final = txl_hash_final(&sum);
	ok = ok && write_all(fd, &final, sizeof final, &sum);
	return ok && fsync(fd) == 0;
}

int64_t
txl_session_state_bytes(const struct txl_session *s, int n_recent)
{
	const struct txl_kv *kv;
	int64_t rows = 0;

	if (!s || s->window || n_recent < 0 ||
	    n_recent > TXL_REPEAT_LAST_N_MAX)
		return -1;
	kv = &s->kv;
	for (int l = 0; l < kv->n_layer; l++)
		for (int h = 0; h < kv->n_head; h++)
			rows += txl_kv_head_fill(kv, txl_kv_head(kv, l, h));
	return (int64_t)sizeof(struct txl_state_header) +
		2 * rows * (int64_t)kv->row +
		(int64_t)sizeof(float) * s->model->hp.d_model +
		(int64_t)sizeof(int32_t) * n_recent + (int64_t)sizeof(uint64_t);
}

/*
 * Saving: the state is written to a temporary file in the target's
 * directory, synced, and renamed over the target, so that the target is
 * either the old file or the complete new one.  The temporary file is an
 * unnamed O_TMPFILE, given a name (PATH.txltmp.XXXXXX) only once
 * complete, just before the rename: a process killed while writing
 * leaves nothing.  Where the filesystem has no O_TMPFILE it is a named
 * mkstemp() file from the start.  Either way it is flock()ed by its
 * writer for its whole life, and a save first removes the abandoned
 * temporary files of its target (left by a process killed between link
 * and rename, or on such a filesystem): only what is provably one,
 * never a file of the user's that happens to have a similar name.
 */

#define TMP_MARK ".txltmp."
#define TMP_RANDOM 6		/* the XXXXXX of mkstemp() */

/* "DIR/BASE.txltmp.XXXXXX" with the X still to be filled */
static char *
temp_name(const char *path)
{
	size_t n = strlen(path) + sizeof TMP_MARK + TMP_RANDOM;
	char *t = malloc(n);

	if (t)
		snprintf(t, n, "%s" TMP_MARK "XXXXXX", path);
	return t;
}

/* The directory part of path ("." if none), as a new string. */
static char *
dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* Is n BASE.txltmp. and six letters or digits (what mkstemp() and
 * link_unnamed() put there)? */
static bool
is_temp_name(const char *n, const char *base)
{
	size_t blen = strlen(base), mlen = strlen(TMP_MARK);

	if (strlen(n) != blen + mlen + TMP_RANDOM ||
	    memcmp(n, base, blen) != 0 || memcmp(n + blen, TMP_MARK, mlen) != 0)
		return false;
	for (const char *x = n + blen + mlen; *x; x++)
		if (!(*x >= 'a' && *x <= 'z') && !(*x >= 'A' && *x <= 'Z') &&
		    !(*x >= '0' && *x <= '9'))
			return false;
	return true;
}

/* Remove the abandoned temporary files of BASE in dir: named as ours, a
 * regular file of this user with no other name, beginning with a state
 * header (the first thing a writer writes), and not locked (a writer
 * holds its lock until it closes the file).  Anything else stays: a file
 * killed before its first write (empty) too, rather than guess. */
static void
remove_stale_temps(const char *dir, const char *base)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		struct stat sb, now;
		char magic[8];
		int fd;

		if (!is_temp_name(n, base))
			continue;
		fd = openat(dirfd(d), n, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			    O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    sb.st_nlink == 1 && sb.st_uid == geteuid() &&
		    (size_t)sb.st_size >= TXL_STATE_HEADER_V5 &&
		    pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
		    memcmp(magic, TXL_STATE_MAGIC, sizeof magic) == 0 &&
		    flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    /* still the file checked under that name */
		    fstatat(dirfd(d), n, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == sb.st_dev && now.st_ino == sb.st_ino)
			unlinkat(dirfd(d), n, 0);
		close(fd);
	}
	closedir(d);
}

/* Give the complete unnamed file fd a free name PATH.txltmp.XXXXXX (in
 * tmp).  False with errno set if this system cannot link it. */
static bool
link_unnamed(int fd, char *tmp)
{
	static const char digits[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char proc[64];
	char *x = tmp + strlen(tmp) - TMP_RANDOM;
	uint64_t r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)time(NULL) ^ (uintptr_t)tmp;

	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	for (int tries = 0; tries < 100; tries++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		for (int i = 0; i < TMP_RANDOM; i++)
			x[i] = digits[(r >> (10 + 6 * i)) % 62];
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
			return true;
		if (errno != EEXIST)
			return false;
	}
	return false;
}

/* Create the temporary file for PATH with the target's mode, locked:
 * unnamed if try_unnamed and the filesystem can, else named (in tmp);
 * -1 with errno set. */
static int
create_temp(const char *dir, char *tmp, mode_t mode, bool try_unnamed,
	    bool *unnamed)
{
	int fd = try_unnamed ? open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC,
				    mode) : -1;

	*unnamed = fd >= 0;
	if (fd < 0) {
		/* EISDIR: a kernel without O_TMPFILE; EOPNOTSUPP: a
		 * filesystem without */
		if (try_unnamed && errno != EOPNOTSUPP && errno != EISDIR &&
		    errno != EINVAL)
			return -1;
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			return -1;
	}
	/* for remove_stale_temps(): held until close */
	if (flock(fd, LOCK_EX) != 0 || fchmod(fd, mode) != 0) {
		int e = errno;
		if (!*unnamed)
			unlink(tmp);
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Where a state goes: a symbolic link is followed (the file it names is
 * replaced, the link stays); what exists there must be a regular file,
 * whose mode the new one keeps (new files: 0600, the memory of a text is
 * as private as the text). */
static enum txl_status
resolve_target(const char *path, char **real, mode_t *mode)
{
	struct stat sb;

	*real = NULL;
	*mode = 0600;
	if (lstat(path, &sb) != 0) {
		if (errno != ENOENT)
			return txl_fail(TXL_ERR_IO, "%s: %s", path,
					strerror(errno));
		*real = strdup(path);
	} else {
		if (S_ISLNK(sb.st_mode) && stat(path, &sb) != 0)
			return txl_fail(TXL_ERR_IO, "%s: %s", path,
					strerror(errno));
		if (!S_ISREG(sb.st_mode))
			return txl_fail(TXL_ERR_IO, "%s: not a regular file "
					"(%s): a state is saved only over a "
					"regular file", path,
					txl_file_kind(sb.st_mode));
		*mode = sb.st_mode & 07777;
		*real = realpath(path, NULL);
		if (!*real)
			return txl_fail(TXL_ERR_IO, "%s: %s", path,
					strerror(errno));
	}
	return *real ? TXL_OK : txl_fail(TXL_ERR_NOMEM, "out of memory");
}

enum txl_status
txl_session_save(struct txl_session *s, const char *path)
{
	return txl_session_save_recent(s, path, NULL, 0);
}

enum txl_status
txl_session_save_recent(struct txl_session *s, const char *path,
			const int32_t *recent, int n_recent)
{
	char *real = NULL, *dir = NULL, *tmp = NULL;
	const char *step = "cannot write state";
	enum txl_status st;
	bool unnamed, named = false, ok = false;
	mode_t mode;
	int fd = -1, dfd, err = 0;

	if (!s || !path)
		return txl_fail(TXL_ERR_INVALID, "txl_session_save: NULL %s",
				!s ? "session" : "path");
	if (n_recent < 0 || n_recent > TXL_REPEAT_LAST_N_MAX ||
	    (n_recent > 0 && !recent))
		return txl_fail(TXL_ERR_INVALID, "%s: %d recent ids (0 .. %d, "
				"and not NULL)", path, n_recent,
				TXL_REPEAT_LAST_N_MAX);
	for (int i = 0; i < n_recent; i++)
		if (recent[i] < 0 || recent[i] >= s->model->hp.n_token)
			return txl_fail(TXL_ERR_INVALID, "%s: recent id %d of "
					"%d out of range", path, i, n_recent);
	if (s->window)
		return txl_fail(TXL_ERR_INVALID, "%s: a model of attn_type %d "
				"has no memory to save (its context is the "
				"last seg_len tokens: feed them again)", path,
				s->model->hp.attn_type);
	st = resolve_target(path, &real, &mode);
	if (st != TXL_OK)
		goto out;
	dir = dir_of(real);
	tmp = temp_name(real);
	if (!dir || !tmp) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	remove_stale_temps(dir, strrchr(real, '/') ? strrchr(real, '/') + 1
			   : real);
	/* an unnamed file first; a named one where it cannot be linked (no
	 * /proc): written again then */
	for (int attempt = 0;; attempt++) {
		fd = create_temp(dir, tmp, mode, attempt == 0, &unnamed);
		if (fd < 0) {
			err = errno;
			step = "cannot create a temporary file";
			goto fail;
		}
		named = !unnamed;
		if (!write_state(s, fd, recent, n_recent)) {
			err = errno;
			goto fail;
		}
		/* the last moment the old file can stay */
		if (txl_aborted(s)) {
			err = ECANCELED;
			goto fail;
		}
		if (!unnamed || (named = link_unnamed(fd, tmp)))
			break;
		close(fd);
		fd = -1;
		memcpy(tmp + strlen(tmp) - TMP_RANDOM, "XXXXXX", TMP_RANDOM);
	}
	if (rename(tmp, real) != 0) {
		err = errno;
		step = "cannot rename the temporary file over it";
		goto fail;
	}
	named = false;
	ok = true;
	/* the rename itself on disk (best effort: not every filesystem
	 * syncs directories) */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
fail:
	if (named)
		unlink(tmp);
	if (fd >= 0 && close(fd) != 0 && !ok && !err)
		err = errno;
	if (!ok && err == ECANCELED)
		st = TXL_ABORTED;
	else if (!ok)
		st = txl_fail(TXL_ERR_IO, "%s: %s: %s", path, step,
			      strerror(err ? err : EIO));
out:
	free(real);
	free(dir);
	free(tmp);
	return st;
}

/* The header of the state file @p path, open as *@p fp after it; checked
 * for what needs no session (magic, version). */
static enum txl_status
read_header(const char *path, FILE **fp, struct txl_state_header *hdr)
{
	struct stat sb;
	enum txl_status st;
	FILE *f;
	int fd;

	*fp = NULL;
	if ((st = txl_open_regular(path, &fd, &sb)) != TXL_OK)
		return st;
	f = fdopen(fd, "rb");
	if (!f) {
		close(fd);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	memset(hdr, 0, sizeof *hdr);
	if (fread(hdr, TXL_STATE_HEADER_V5, 1, f) != 1 ||
	    memcmp(hdr->magic, TXL_STATE_MAGIC, 8) != 0) {
		fclose(f);
		return txl_fail(TXL_ERR_FORMAT, "%s: not a txlgen state file",
				path);
	}
	if (hdr->version < TXL_STATE_VERSION_MIN ||
	    hdr->version > TXL_STATE_VERSION) {
		fclose(f);
		return txl_fail(TXL_ERR_FORMAT, "%s: state format version %u, "
				"expected %u to %u%s", path, hdr->version,
				TXL_STATE_VERSION_MIN, TXL_STATE_VERSION,
				hdr->version < TXL_STATE_VERSION_MIN
				? " (saved by an older txlgen: feed the text "
				"again)" : " (saved by a newer txlgen)");
	}
	if (hdr->version >= 6 &&
	    fread((char *)hdr + TXL_STATE_HEADER_V5, sizeof *hdr -
		  TXL_STATE_HEADER_V5, 1, f) != 1) {
		fclose(f);
		return txl_fail(TXL_ERR_FORMAT, "%s: state file has the wrong "
				"size (truncated?)", path);
	}
	*fp = f;
	return TXL_OK;
}

enum txl_status
txl_state_mem_len(const char *path, int *mem_len)
{
	struct txl_state_header hdr;
	enum txl_status st;
	FILE *f;

	if (!path || !mem_len)
		return txl_fail(TXL_ERR_INVALID, "txl_state_mem_len: NULL %s",
				!path ? "path" : "mem_len");
	if ((st = read_header(path, &f, &hdr)) != TXL_OK)
		return st;
	fclose(f);
	if (hdr.mem_len > (1u << 20) || hdr.fill > hdr.mem_len)
		return txl_fail(TXL_ERR_FORMAT, "%s: damaged state (fill %u, "
				"mem_len %u)", path, hdr.fill, hdr.mem_len);
	*mem_len = (int)hdr.mem_len;
	return TXL_OK;
}

enum txl_status
txl_session_load(struct txl_session *s, const char *path)
{
	return txl_session_load_recent(s, path, NULL, 0, NULL);
}

enum txl_status
txl_session_load_recent(struct txl_session *s, const char *path,
			int32_t *recent, int max_recent, int *n_recent)
{
	const struct txl_hparams *hp;
	struct txl_state_header hdr;
	struct txl_hash sum;
	uint64_t stored;
	enum txl_status st = TXL_OK;
	struct txl_kv file = { 0 };
	int *keep = NULL;
	float *last = NULL;
	int32_t *ids = NULL;
	enum txl_dtype ft;
	size_t row, rows, want;
	FILE *f;
	long size;

	if (!s || !path)
		return txl_fail(TXL_ERR_INVALID, "txl_session_load: NULL %s",
				!s ? "session" : "path");
	if (max_recent < 0 || (max_recent > 0 && !recent))
		return txl_fail(TXL_ERR_INVALID, "%s: room for %d recent ids "
				"(at least 0, and not NULL)", path, max_recent);
	hp = &s->model->hp;
	if ((st = read_header(path, &f, &hdr)) != TXL_OK)
		return st;
	if (hdr.fingerprint !=
	    txl_model_fingerprint(s->model) ||
	    hdr.n_layer != (uint32_t)hp->n_layer ||
	    hdr.d_model != (uint32_t)hp->d_model ||
	    hdr.n_head != (uint32_t)hp->n_head ||
	    hdr.d_head != (uint32_t)hp->d_head) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state was saved with "
			      "another model", path);
		goto out;
	}
	const bool zeros = s->kv.zeros;
	const size_t hsize = hdr.version >= 6 ? sizeof hdr
		: TXL_STATE_HEADER_V5;
	if (hdr.version >= 6 && hdr.mem_zeros != (uint32_t)zeros &&
	    hdr.mem_zeros <= 1) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state was saved with "
			      "--mem-init %s, this session's memory starts %s "
			      "(--mem-init %s)", path, hdr.mem_zeros ? "zeros"
			      : "empty", zeros ? "as zero states" : "empty",
			      zeros ? "zeros" : "empty");
		goto out;
	}
	/* no record of it before version 6: what the numbers say */
	if (hdr.version < 6 && hdr.fill <= hdr.mem_len &&
	    (zeros ? hdr.fill != hdr.mem_len
	     : hdr.n_past < (int64_t)hdr.fill && hdr.fill == hdr.mem_len)) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state was saved with "
			      "--mem-init %s, this session's memory starts %s "
			      "(--mem-init %s)", path, zeros ? "empty" : "zeros",
			      zeros ? "as zero states" : "empty",
			      zeros ? "zeros" : "empty");
		goto out;
	}
	if (hdr.fill > hdr.mem_len || hdr.mem_len > (1u << 20) ||
	    hdr.have_last > 1 || hdr.n_past < 0 ||
	    hdr.n_past > TXL_MAX_N_PAST ||
	    (zeros ? hdr.fill != hdr.mem_len : hdr.n_past < (int64_t)hdr.fill) ||
	    (hdr.have_last && hdr.n_past == 0) ||
	    (ft = txl_kv_dtype((int)hdr.kv_type)) == TXL_N_DTYPES ||
	    hdr.n_recent > TXL_REPEAT_LAST_N_MAX ||
	    (hdr.version < 5 && hdr.n_recent != 0) ||
	    hdr.mem_zeros > 1 || hdr.reserved != 0) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: damaged state (fill %u, "
			      "mem_len %u, %lld positions fed)", path, hdr.fill,
			      hdr.mem_len, (long long)hdr.n_past);
		goto out;
	}
	if (hdr.fill > (uint32_t)s->params.mem_len) {
		st = txl_fail(TXL_ERR_INVALID, "%s: state holds %u positions, "
			      "more than this session's mem_len %d (saved with "
			      "mem_len %u)", path, hdr.fill, s->params.mem_len,
			      hdr.mem_len);
		goto out;
	}
	if (hp->d_head % txl_type(ft)->block != 0) {
		/* no session of this model holds rows of this block type */
		st = txl_fail(TXL_ERR_FORMAT, "%s: damaged state (kv_type %s "
			      "with d_head %d, not a multiple of %d)", path,
			      txl_dtype_name(ft), hp->d_head,
			      txl_type(ft)->block);
		goto out;
	}
	/* the file's rows, in its kv_type: each head's of a session of its
	 * mem_len (before version 6, zeros past the fill), since version
	 * 6 only those it holds */
	keep = malloc(sizeof *keep * (size_t)hp->n_layer * hp->n_head);
	if (!keep) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	row = txl_row_bytes(ft, hp->d_head);
	rows = 0;
	for (int l = 0; l < hp->n_layer; l++)
		for (int h = 0; h < hp->n_head; h++) {
			int k = txl_head_keep(s->model, l, h,
					      (int)hdr.mem_len);

			if (hdr.version >= 6 && k > (int)hdr.fill)
				k = (int)hdr.fill;
			rows += (size_t)(keep[(size_t)l * hp->n_head + h] = k);
		}
	want = hsize + 2 * rows * row + sizeof(float) * hp->d_model +
		sizeof(int32_t) * hdr.n_recent + sizeof stored;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    (size_t)size != want || fseek(f, (long)hsize, SEEK_SET) != 0) {
		st = txl_fail(TXL_ERR_FORMAT, "%s: state file has the wrong "
			      "size (truncated?)", path);
		goto out;
	}
	/* read into a memory of the file's, so that a bad file leaves s
	 * unchanged */
	if (txl_kv_init(&file, hp->n_layer, hp->n_head, hp->d_head, ft,
			(int)hdr.mem_len, keep, 0, false) != TXL_OK) {
		st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		goto out;
	}
	txl_hash_init(&sum);
	txl_hash_update(&sum, &hdr, hsize);
	for (int l = 0; l < hp->n_layer && st == TXL_OK; l++) {
		for (int which = 0; which < 2 && st == TXL_OK; which++) {
			for (int h = 0; h < hp->n_head; h++) {
				const size_t n = row * (size_t)txl_kv_head(
					&file, l, h)->keep;
				uint8_t *buf = which ? txl_kv_v(&file, l, h)
					: txl_kv_k(&file, l, h);

				if (fread(buf, 1, n, f) != n) {
					st = txl_fail(TXL_ERR_FORMAT, "%s: "
						      "cannot read state",
						      path);
					break;
				}
				txl_hash_update(&sum, buf, n);
			}
		}
	}
	file.fill = (int)hdr.fill;
	last = txl_alloc_floats((size_t)hp->d_model);
	if (st == TXL_OK && (!last || fread(last, sizeof(float),
					   (size_t)hp->d_model, f) !=
			     (size_t)hp->d_model))
		st = txl_fail(TXL_ERR_FORMAT, "%s: cannot read state", path);
	if (st == TXL_OK)
		txl_hash_update(&sum, last, sizeof(float) * hp->d_model);
	if (st == TXL_OK && hdr.n_recent) {
		ids = malloc(sizeof *ids * hdr.n_recent);
		if (!ids)
			st = txl_fail(TXL_ERR_NOMEM, "out of memory");
		else if (fread(ids, sizeof *ids, hdr.n_recent, f) !=
			 hdr.n_recent)
			st = txl_fail(TXL_ERR_FORMAT, "%s: cannot read state",
				      path);
		else
			txl_hash_update(&sum, ids, sizeof *ids * hdr.n_recent);
		for (uint32_t i = 0; st == TXL_OK && i < hdr.n_recent; i++)
			if (ids[i] < 0 || ids[i] >= hp->n_token)
				st = txl_fail(TXL_ERR_FORMAT, "%s: damaged "
					      "state (token id %d of %d)", path,
					      (int)ids[i], hp->n_token);
	}
	if (st == TXL_OK && (fread(&stored, sizeof stored, 1, f) != 1 ||
			     stored != txl_hash_final(&sum)))
		st = txl_fail(TXL_ERR_FORMAT, "%s: state checksum mismatch "
			      "(damaged file)", path);
	if (st == TXL_OK) {
		/* converted to the session's kv_type; a memory of zero
		 * states keeps zeros before the file's positions */
		txl_kv_copy_last(&s->kv, &file, (int)hdr.fill);
		s->n_past = hdr.n_past;
		s->have_last = hdr.have_last;
		memcpy(s->last_h, last, sizeof(float) * hp->d_model);
		txl_out_clear(&s->out);
		if (s->have_last)	/* the prediction after the saved text */
			txl_out_keep(&s->out, last, 1);
		/* the most recent that fit */
		int n = (int)hdr.n_recent < max_recent ? (int)hdr.n_recent
			: max_recent;
		if (n > 0)
			memcpy(recent, ids + hdr.n_recent - (uint32_t)n,
			       sizeof *ids * (size_t)n);
		if (n_recent)
			*n_recent = n;
	}
out:
	free(ids);
	txl_kv_free(&file);
	free(keep);
	free(last);
	fclose(f);
	return st;
}
