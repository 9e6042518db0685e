/* SPDX-License-Identifier: MIT */
/*
 * test-session.c - properties of sessions and the tokenizer on a random
 * model (argv[1], made by tests/make_random_model.py; argv[2] a scratch
 * directory; argv[3] a model of d_head 32, for kv_type Q8_0; argv[4] one
 * stored in BF16, for txl_session_set_compute()).  Numbers
 * against PyTorch are test_parity.py's business; these are the
 * invariants that hold whatever the weights:
 *   - with same_length, segment-wise evaluation equals token by token;
 *   - saving the memory and loading it into a new session continues
 *     exactly, and so do changing the settings of a live session and
 *     copying its text into another; a
 *     compact memory (kv_type) survives conversion to F32 and back;
 *     reset equals a fresh session; abort leaves the memory;
 *   - the memory never holds more than mem_len positions;
 *   - an adapt step makes what it learned from more likely, and reset
 *     undoes it;
 *   - the last tokens of a text, as many as the receptive field, read
 *     after the others are skipped, leave the state of the whole read,
 *     byte for byte;
 *   - bad arguments and bad state files are refused with the right code,
 *     a state claiming more positions fed than any text could is too;
 *   - state files: a FIFO, a device or a directory is refused (for
 *     reading without waiting, for writing before anything is written),
 *     a replaced file keeps its mode, a symbolic link stays one, a failed
 *     save says why and leaves the old file, as does one the abort
 *     callback stops, and no temporary file outlives a save killed with
 *     SIGKILL;
 *   - a model read into memory (TXL_LOAD_NO_MMAP) computes what the
 *     mapped one does and survives its file being truncated.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-model.h"

static struct txl_model *model;
static const char *scratch;
static int V;

#define N_TOK 40
static int32_t toks[N_TOK];

static struct txl_session *
session(int seg, int mem, int same)
{
	struct txl_session_params p = session_params(seg, mem);

	p.same_length = same;
	return new_session(model, &p);
}

/*
 * Two different computations of the same numbers (another session's
 * buffers, K and V rows at other addresses, another segmentation) may sum
 * in another order: OpenBLAS picks its kernels by CPU and by size and
 * alignment, so the results differ by float32 rounding.  A logit of the
 * test model is a sum over the layers of dot products of a few hundred
 * terms of size ~1 (|logit| < 10): each rounding is ~6e-8 relative, and a
 * few hundred of them accumulate to ~1e-6.  TOL_REORDER leaves a margin of
 * ten above that and stays ten times below the smallest real change the
 * tests detect (losing memory positions moves logits by > 1e-4).  Exact
 * equality is asserted only where one computation is repeated.
 */
#define TOL_REORDER 1e-5

/* The storage types by name (txl.h): any case, NULL and -1 past them;
 * the names of libtxl 1.0 for the memory's types are the same values. */
static void
test_dtype_names(void)
{
	_Static_assert(TXL_KV_F32 == TXL_F32 && TXL_KV_F16 == TXL_F16 &&
		       TXL_KV_BF16 == TXL_BF16 && TXL_KV_Q8_0 == TXL_Q8_0 &&
		       TXL_KV_Q4_0 == TXL_Q4_0, "the old names are aliases");
	enum txl_kv_type old = TXL_KV_Q8_0;
	int n = 0;

	CHECK_EQ((int)old, (int)TXL_Q8_0);
	for (int dt = 0; txl_dtype_name(dt); dt++, n++) {
		char lower[16];
		const char *name = txl_dtype_name(dt);
		size_t i = 0;

		for (; name[i] && i + 1 < sizeof lower; i++)
			lower[i] = (char)tolower((unsigned char)name[i]);
		lower[i] = '\0';
		CHECK_EQ(txl_dtype_from_name(name), dt);
		CHECK_EQ(txl_dtype_from_name(lower), dt);
	}
	CHECK_EQ(n, TXL_N_DTYPES);
	CHECK(txl_dtype_name(-1) == NULL);
	CHECK_EQ(txl_dtype_from_name("Q4"), -1);
	CHECK_EQ(txl_dtype_from_name(""), -1);
	CHECK_EQ(txl_dtype_from_name(NULL), -1);
	CHECK_EQ(txl_dtype_uses(TXL_U8), 0u);
	CHECK_EQ(txl_dtype_uses(TXL_N_DTYPES), 0u);
	CHECK_EQ(txl_dtype_uses(TXL_Q4_0), TXL_DTYPE_WEIGHTS | TXL_DTYPE_MEMORY);
	/* a session takes the memory's types only */
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *s = NULL;

	p.kv_type = TXL_U8;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "F32, F16, BF16, Q8_0, Q4_0") != NULL);
}

static void
test_hparams(void)
{
	const struct txl_hparams *hp = txl_model_hparams(model);

	CHECK(hp->n_layer >= 1 && hp->d_model >= 1);
	CHECK_EQ(hp->n_token, V);
	CHECK(txl_model_n_params(model) > (int64_t)hp->n_token * hp->d_embed);
	CHECK(strcmp(txl_model_meta(model, "format"), "txlgen-model") == 0);
	CHECK(txl_model_meta(model, "no such key") == NULL);
}

static void
test_same_length_segmentation(void)
{
	/* with same_length every position sees the same window whatever the
	 * segmentation: 8-token segments == one token at a time */
	struct txl_session *a = session(8, 12, 1), *b = session(1, 12, 1);
	float *la = malloc(sizeof(float) * (size_t)V * 8);

	CHECK(la);
	for (int s0 = 0; s0 < N_TOK; s0 += 8) {
		CHECK_EQ(txl_session_eval(a, toks + s0, 8, TXL_LOGITS_ALL),
			 TXL_OK);
		memcpy(la, txl_session_logits(a), sizeof(float) * V * 8);
		for (int i = 0; i < 8; i++) {
			CHECK_EQ(txl_session_eval(b, toks + s0 + i, 1,
						  TXL_LOGITS_LAST), TXL_OK);
			CHECK(max_diff(la + (size_t)i * V,
				       txl_session_logits(b), V) < 1e-4);
		}
	}
	CHECK_EQ(txl_session_mem_fill(a), 12);
	CHECK_EQ(txl_session_n_past(b), N_TOK);
	free(la);
	txl_session_free(a);
	txl_session_free(b);
}

static struct txl_session *
session_init(int seg, int mem, int mem_init)
{
	struct txl_session_params p = session_params(seg, mem);

	p.same_length = 0;
	p.mem_init = mem_init;
	return new_session(model, &p);
}

/* mem_init: the model's default (empty: not an adaptive-span model);
 * zeros is a full memory from the start and after a reset, changes the
 * first predictions, is kept by a state file and by txl_session_copy();
 * a value of neither kind is refused. */
static void
test_mem_init(void)
{
	struct txl_session_params p = txl_session_params_default(), r;
	struct txl_session *z, *e, *y;
	float *lz = malloc(sizeof(float) * (size_t)V);
	char path[4096];

	CHECK(lz);
	r = txl_session_params_default();
	CHECK_EQ(p.mem_init, TXL_FROM_MODEL);
	CHECK_EQ(txl_session_params_resolve(model, &p, &r), TXL_OK);
	CHECK_EQ(r.mem_init, TXL_MEM_EMPTY);
	p.mem_init = 2;
	CHECK_EQ(txl_session_params_resolve(model, &p, &r), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "mem_init") != NULL);
	if (txl_model_hparams(model)->pre_lnorm) {
		p.mem_init = TXL_MEM_ZEROS;
		CHECK_EQ(txl_session_params_resolve(model, &p, &r),
			 TXL_ERR_INVALID);
		free(lz);
		return;
	}
	z = session_init(4, 12, TXL_MEM_ZEROS);
	e = session_init(4, 12, TXL_MEM_EMPTY);
	CHECK_EQ(txl_session_get_params(z).mem_init, TXL_MEM_ZEROS);
	CHECK_EQ(txl_session_mem_fill(z), 12);
	CHECK_EQ(txl_session_mem_fill(e), 0);
	CHECK_EQ(txl_session_eval(z, toks, 3, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(e, toks, 3, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_mem_fill(z), 12);
	CHECK_EQ(txl_session_n_past(z), 3);
	/* zero states take part in the softmax: other predictions */
	CHECK(max_diff(txl_session_logits(z), txl_session_logits(e), V) >
	      1e-3);
	/* a state file and a copy continue the zeros' text exactly */
	snprintf(path, sizeof path, "%s/zeros.state", scratch);
	CHECK_EQ(txl_session_save(z, path), TXL_OK);
	y = session_init(4, 12, TXL_MEM_ZEROS);
	CHECK_EQ(txl_session_load(y, path), TXL_OK);
	CHECK_EQ(txl_session_eval(z, toks + 3, 4, TXL_LOGITS_LAST), TXL_OK);
	memcpy(lz, txl_session_logits(z), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(y, toks + 3, 4, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(lz, txl_session_logits(y), V) <= TOL_REORDER);
	/* reset: zeros again (the same segments: with a memory of zeros,
	 * how many a position sees depends on them) */
	txl_session_reset(y);
	CHECK_EQ(txl_session_mem_fill(y), 12);
	CHECK_EQ(txl_session_eval(y, toks, 3, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(y, toks + 3, 4, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(lz, txl_session_logits(y), V) <= TOL_REORDER);
	/* a copy into a session that starts empty continues z's text, its
	 * zero states included */
	CHECK_EQ(txl_session_copy(e, z), TXL_OK);
	CHECK_EQ(txl_session_mem_fill(e), 12);
	CHECK_EQ(txl_session_eval(z, toks + 7, 2, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(e, toks + 7, 2, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(txl_session_logits(z), txl_session_logits(e), V) <=
	      TOL_REORDER);
	free(lz);
	txl_session_free(y);
	txl_session_free(z);
	txl_session_free(e);
}

static void
test_last_equals_all(void)
{
	struct txl_session *a = session(16, 10, 0), *b = session(16, 10, 0);
	float *all = malloc(sizeof(float) * (size_t)V * 16);

	CHECK(all);
	CHECK_EQ(txl_session_eval(a, toks, 16, TXL_LOGITS_ALL), TXL_OK);
	memcpy(all, txl_session_logits(a), sizeof(float) * V * 16);
	CHECK_EQ(txl_session_eval(b, toks, 16, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(all + (size_t)15 * V, txl_session_logits(b), V) <= TOL_REORDER);
	/* more tokens than seg_len are split into segments */
	CHECK_EQ(txl_session_eval(a, toks, N_TOK, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_n_past(a), 16 + N_TOK);
	CHECK_EQ(txl_session_mem_fill(a), 10);
	free(all);
	txl_session_free(a);
	txl_session_free(b);
}

/* A session made while the pool had 1 thread, evaluating a segment of
 * 40 queries (units of 32 and 8 queries of its attention) after
 * another session gave the pool 3: its per-thread scratch grows with the
 * pool, and the logits are those of a session made with 3 threads. */
static void
test_threads_after_session(void)
{
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *one, *three;
	float *want = malloc(sizeof(float) * (size_t)V);

	CHECK(want);
	p.seg_len = N_TOK;
	p.mem_len = 8;
	p.n_threads = 1;
	CHECK_EQ(txl_session_new(model, &p, &one), TXL_OK);
	p.n_threads = 3;
	CHECK_EQ(txl_session_new(model, &p, &three), TXL_OK);
	CHECK_EQ(txl_session_eval(three, toks, N_TOK, TXL_LOGITS_LAST), TXL_OK);
	memcpy(want, txl_session_logits(three), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(one, toks, N_TOK, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(want, txl_session_logits(one), V) <= TOL_REORDER);
	free(want);
	txl_session_free(one);
	txl_session_free(three);
}

static void
test_save_load(void)
{
	char path[4096], bad[4096];
	struct txl_session *a = session(5, 16, 0), *b = session(5, 16, 0);
	struct txl_session *small = session(5, 4, 0);
	float *la = malloc(sizeof(float) * (size_t)V);
	FILE *f;

	CHECK(la);
	snprintf(path, sizeof path, "%s/state.bin", scratch);
	snprintf(bad, sizeof bad, "%s/state-bad.bin", scratch);
	CHECK_EQ(txl_session_eval(a, toks, 23, TXL_LOGITS_LAST), TXL_OK);
	memcpy(la, txl_session_logits(a), sizeof(float) * V);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);

	CHECK_EQ(txl_session_load(b, path), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 23);
	CHECK_EQ(txl_session_mem_fill(b), 16);
	/* the load predicts the token after the saved text, as a did */
	CHECK_EQ(txl_session_n_logits(b), 1);
	CHECK(max_diff(la, txl_session_logits(b), V) <= TOL_REORDER);
	CHECK_EQ(txl_session_eval(a, toks + 23, 7, TXL_LOGITS_LAST), TXL_OK);
	memcpy(la, txl_session_logits(a), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(b, toks + 23, 7, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(la, txl_session_logits(b), V) <= TOL_REORDER);

	/* 16 positions do not fit a memory of 4 */
	CHECK_EQ(txl_session_load(small, path), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "mem_len") != NULL);

	/* a flipped byte fails the checksum; b keeps its memory */
	f = fopen(path, "rb");
	CHECK(f);
	char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	CHECK(n > 100 && n < sizeof buf);
	buf[n / 2] ^= 0x40;
	f = fopen(bad, "wb");
	CHECK(f && fwrite(buf, 1, n, f) == n);
	fclose(f);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	CHECK_EQ(txl_session_n_past(b), 30);
	/* truncated */
	f = fopen(bad, "wb");
	CHECK(f && fwrite(buf, 1, n - 9, f) == n - 9);
	fclose(f);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	/* not a state file at all (empty), not a file, and a missing one */
	f = fopen(bad, "wb");
	CHECK(f);
	fclose(f);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	CHECK_EQ(txl_session_load(b, "/dev/null"), TXL_ERR_IO);
	CHECK(strstr(txl_last_error(), "character device") != NULL);
	CHECK_EQ(txl_session_load(b, "/nonexistent/state"), TXL_ERR_IO);
	CHECK(strstr(txl_last_error(), "/nonexistent/state") != NULL);
	/* unwritable destination: error, nothing left behind */
	CHECK_EQ(txl_session_save(a, "/nonexistent/dir/state"), TXL_ERR_IO);

	unlink(path);
	unlink(bad);
	free(la);
	txl_session_free(a);
	txl_session_free(b);
	txl_session_free(small);
}

/* The state file's checksum, written here from its description in
 * txl-internal.h (64-bit FNV-1a over little-endian 8-byte words, the
 * tail bytes one at a time), so that a test can alter a header and still
 * get past it. */
static uint64_t
state_checksum(const unsigned char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, w;
	const uint64_t prime = 0x100000001b3ull;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * prime;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * prime;
	return h;
}

/* The state file @p from with @p len bytes at @p off replaced by @p v
 * and its checksum made right again, as @p to; its size in bytes. */
static size_t
write_state_patch(const char *from, const char *to, size_t off,
		  const void *v, size_t len)
{
	static unsigned char buf[1 << 16];
	FILE *f = fopen(from, "rb");
	size_t n;
	uint64_t sum;

	CHECK(f);
	n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	CHECK(n > 64 && n < sizeof buf && off + len <= n - 8);
	memcpy(buf + off, v, len);
	sum = state_checksum(buf, n - 8);
	memcpy(buf + n - 8, &sum, 8);
	f = fopen(to, "wb");
	CHECK(f && fwrite(buf, 1, n, f) == n);
	CHECK(fclose(f) == 0);
	return n;
}

/* The state file @p from (format version 6) as one of version @p v (4
 * or 5) at @p to: the header of 64 bytes, each head's rows up to its
 * keep, zeros past the fill (@p keep the rows every head keeps, a model
 * without adaptive spans); its checksum made right again. */
static void
write_state_old(const char *from, const char *to, uint32_t v, int keep)
{
	static unsigned char in[1 << 16], out[1 << 17];
	FILE *f = fopen(from, "rb");
	const size_t row = (size_t)txl_model_hparams(model)->d_head * 4;
	size_t n, at = 72, o = 64;
	uint32_t fill;
	uint64_t sum;

	CHECK(f);
	n = fread(in, 1, sizeof in, f);
	fclose(f);
	CHECK(n > 72 && n < sizeof in);
	memcpy(&fill, in + 40, 4);
	memcpy(out, in, 64);
	memcpy(out + 8, &v, 4);
	for (int b = 0; b < 2 * txl_model_hparams(model)->n_layer * txl_model_hparams(model)->n_head; b++) {
		memcpy(out + o, in + at, row * fill);
		memset(out + o + row * fill, 0, row * (size_t)(keep - (int)fill));
		at += row * fill;
		o += row * (size_t)keep;
	}
	memcpy(out + o, in + at, n - 8 - at);
	o += n - 8 - at;
	sum = state_checksum(out, o);
	memcpy(out + o, &sum, 8);
	o += 8;
	f = fopen(to, "wb");
	CHECK(f && fwrite(out, 1, o, f) == o);
	CHECK(fclose(f) == 0);
}

/* The state file @p from with n_past (at byte 48 of the header) set to
 * @p n_past and its checksum made right again, as @p to. */
static void
write_state_n_past(const char *from, const char *to, int64_t n_past)
{
	write_state_patch(from, to, 48, &n_past, 8);
}

/* A count of positions fed that no text could reach (INT64_MAX, which
 * the next evaluation would overflow) is a damaged state; up to 2^53 is
 * taken, and the count then stops there. */
static void
test_state_n_past(void)
{
	char path[4096], bad[4096];
	struct txl_session *a = session(5, 8, 0), *b = session(5, 8, 0);
	const int64_t most = (int64_t)1 << 53;

	snprintf(path, sizeof path, "%s/past.state", scratch);
	snprintf(bad, sizeof bad, "%s/past-bad.state", scratch);
	CHECK_EQ(txl_session_eval(a, toks, 12, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	/* the rewriting is right: the count it writes is taken */
	write_state_n_past(path, bad, 1000);
	CHECK_EQ(txl_session_load(b, bad), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 1000);

	write_state_n_past(path, bad, INT64_MAX);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	CHECK(strstr(txl_last_error(), "damaged state") != NULL);
	CHECK_EQ(txl_session_n_past(b), 1000);
	write_state_n_past(path, bad, most + 1);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);

	write_state_n_past(path, bad, most - 2);
	CHECK_EQ(txl_session_load(b, bad), TXL_OK);
	CHECK_EQ(txl_session_eval(b, toks, 5, TXL_LOGITS_LAST), TXL_OK);
	CHECK(txl_session_n_past(b) == most);
	CHECK_EQ(txl_session_save(b, path), TXL_OK);
	CHECK_EQ(txl_session_load(a, path), TXL_OK);
	CHECK(txl_session_n_past(a) == most);

	unlink(path);
	unlink(bad);
	txl_session_free(a);
	txl_session_free(b);
}

/* The last ids of the text travel with the memory (the repeat penalty's
 * window); a state of format version 4, which had none, still loads; the
 * mem_len of the saving session is read from the header alone. */
static void
test_state_recent(void)
{
	char path[4096], plain[4096], bad[4096];
	struct txl_session *a = session(5, 16, 0), *b = session(5, 16, 0);
	const int32_t ids[5] = { 3, 1, 4, 1, 5 }, wild[2] = { 2, -1 };
	int32_t got[8] = { 0 };
	const uint32_t v4 = 4, v5 = 5, v7 = 7, n_recent = 2;
	int n = -1, mem_len = 0;
	struct stat sa, sp;

	snprintf(path, sizeof path, "%s/recent.state", scratch);
	snprintf(plain, sizeof plain, "%s/plain.state", scratch);
	snprintf(bad, sizeof bad, "%s/recent-bad.state", scratch);
	CHECK_EQ(txl_session_eval(a, toks, 20, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save_recent(a, path, ids, 5), TXL_OK);
	CHECK_EQ(txl_session_save(a, plain), TXL_OK);
	/* 5 ids, 4 bytes each, and nothing else is longer */
	CHECK(stat(path, &sa) == 0 && stat(plain, &sp) == 0);
	CHECK_EQ((long)(sa.st_size - sp.st_size), 20L);

	CHECK_EQ(txl_session_load_recent(b, path, got, 8, &n), TXL_OK);
	CHECK_EQ(n, 5);
	CHECK(!memcmp(got, ids, sizeof ids));
	CHECK_EQ(txl_session_n_past(b), 20);
	/* room for 3: the last 3 */
	CHECK_EQ(txl_session_load_recent(b, path, got, 3, &n), TXL_OK);
	CHECK_EQ(n, 3);
	CHECK(got[0] == 4 && got[1] == 1 && got[2] == 5);
	/* the plain load of such a file, and ids asked of a plain file */
	CHECK_EQ(txl_session_load(b, path), TXL_OK);
	CHECK_EQ(txl_session_load_recent(b, plain, got, 8, &n), TXL_OK);
	CHECK_EQ(n, 0);

	/* format version 4 (before the ids): loads, without them */
	write_state_old(plain, bad, v4, 16);
	n = -1;
	CHECK_EQ(txl_session_load_recent(b, bad, got, 8, &n), TXL_OK);
	CHECK_EQ(n, 0);
	CHECK_EQ(txl_session_n_past(b), 20);
	/* ... where the field of their number was padding, always 0 */
	write_state_old(path, bad, v4, 16);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	/* version 5 (every head's rows up to mem_len) loads, ids too */
	write_state_old(path, bad, v5, 16);
	n = -1;
	CHECK_EQ(txl_session_load_recent(b, bad, got, 8, &n), TXL_OK);
	CHECK_EQ(n, 5);
	CHECK(!memcmp(got, ids, sizeof ids));
	/* a version to come is refused as such */
	write_state_patch(plain, bad, 8, &v7, 4);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	CHECK(strstr(txl_last_error(), "newer") != NULL);
	/* a number of ids the file does not hold; an id out of range */
	write_state_patch(path, bad, 60, &n_recent, 4);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	CHECK(strstr(txl_last_error(), "size") != NULL);
	write_state_patch(path, bad, (size_t)sa.st_size - 8 - 4, &V, 4);
	CHECK_EQ(txl_session_load(b, bad), TXL_ERR_FORMAT);
	CHECK(strstr(txl_last_error(), "token id") != NULL);

	/* what a save refuses: ids out of range, NULL, a negative count */
	CHECK_EQ(txl_session_save_recent(a, bad, wild, 2), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_save_recent(a, bad, NULL, 2), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_save_recent(a, bad, ids, -1), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_load_recent(b, path, NULL, 4, &n),
		 TXL_ERR_INVALID);

	/* a memory not full: only the rows it holds are written; the same
	 * memory in version 5 (zeros past the fill) loads the same */
	txl_session_reset(a);
	CHECK_EQ(txl_session_eval(a, toks, 6, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(a, plain), TXL_OK);
	CHECK(stat(plain, &sp) == 0);
	CHECK_EQ((long)txl_session_state_bytes(a, 0), (long)sp.st_size);
	CHECK_EQ((long)txl_session_state_bytes(a, 5), (long)sp.st_size + 20);
	CHECK_EQ((long)txl_session_state_bytes(a, -1), -1L);
	CHECK_EQ((long)sp.st_size, (long)(72 + 2 * txl_model_hparams(model)->n_layer *
		 txl_model_hparams(model)->n_head * 6 * txl_model_hparams(model)->d_head * 4 +
		 txl_model_hparams(model)->d_model * 4 + 8));
	CHECK_EQ(txl_session_load(b, plain), TXL_OK);
	CHECK_EQ(txl_session_mem_fill(b), 6);
	CHECK_EQ(txl_session_n_past(b), 6);
	write_state_old(plain, bad, v5, 16);
	CHECK_EQ(txl_session_load(b, bad), TXL_OK);
	CHECK_EQ(txl_session_mem_fill(b), 6);
	CHECK_EQ(txl_session_n_past(b), 6);
	CHECK(max_diff(txl_session_logits(a), txl_session_logits(b), V) == 0);

	/* the saving session's mem_len, from the header */
	CHECK_EQ(txl_state_mem_len(path, &mem_len), TXL_OK);
	CHECK_EQ(mem_len, 16);
	CHECK_EQ(txl_state_mem_len("/dev/null", &mem_len), TXL_ERR_IO);
	CHECK_EQ(txl_state_mem_len(path, NULL), TXL_ERR_INVALID);
	CHECK_EQ(txl_state_mem_len(NULL, &mem_len), TXL_ERR_INVALID);

	unlink(path);
	unlink(plain);
	unlink(bad);
	txl_session_free(a);
	txl_session_free(b);
}

/* Feed @p n tokens to each session; true if both predict the same. */
static bool
same_continuation(struct txl_session *a, struct txl_session *b,
		  const int32_t *t, int n, double tol)
{
	float *la = malloc(sizeof(float) * (size_t)V);
	bool same;

	CHECK(la);
	CHECK_EQ(txl_session_eval(a, t, n, TXL_LOGITS_LAST), TXL_OK);
	memcpy(la, txl_session_logits(a), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(b, t, n, TXL_LOGITS_LAST), TXL_OK);
	same = max_diff(la, txl_session_logits(b), V) <= tol;
	free(la);
	return same;
}

/* The bytes of the file @p path into a new buffer; *n their count. */
static unsigned char *
slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long len;

	CHECK(f);
	CHECK(fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0);
	rewind(f);
	buf = malloc((size_t)len);
	CHECK(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
	*n = (size_t)len;
	return buf;
}

/* A text of n tokens of its own: the ids of seed */
static void
text_of(int32_t *t, int n, int seed)
{
	for (int i = 0; i < n; i++)
		t[i] = (int32_t)(((int64_t)i * 7919 + seed * 104729 + 13) % V);
}

#define N_FIELD 160	/* tokens of the texts of test_receptive_field */

/* Read the last n - o tokens of the text t into a session of p that
 * read `before` (5 tokens) first, txl_session_skip() of the o before
 * them (o 0: none); save its state to path; its logits into lg. */
static void
read_tail(const struct txl_session_params *p, const int32_t *before,
	  const int32_t *t, int n, int o, const char *path, float *lg)
{
	struct txl_session *s;

	CHECK_EQ(txl_session_new(model, p, &s), TXL_OK);
	CHECK_EQ(txl_session_eval(s, before, 5, TXL_LOGITS_LAST), TXL_OK);
	if (o > 0)
		CHECK_EQ(txl_session_skip(s, t, o), TXL_OK);
	CHECK_EQ(txl_session_eval(s, t + o, n - o, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_n_past(s), 5 + n);
	memcpy(lg, txl_session_logits(s), sizeof(float) * V);
	CHECK_EQ(txl_session_save(s, path), TXL_OK);
	txl_session_free(s);
}

/* Whether the state file at path holds the bytes fa[0..na). */
static bool
same_file(const char *path, const unsigned char *fa, size_t na)
{
	size_t nb;
	unsigned char *fb = slurp(path, &nb);
	const bool same = na == nb && memcmp(fa, fb, na) == 0;

	free(fb);
	return same;
}

/* The receptive field, from the model's shape (n_layer x (mem_len +
 * n_at_once - 1) + 1), a text's own tail (txl_session_tail_start()), and
 * what they promise: a session that reads a text from the start of its
 * tail, or from any segment's start before it, after txl_session_skip()
 * of the tokens before and whatever text before them, leaves the state
 * file and the logits of the session that read it all, byte for byte.
 * The tail is exact: read from the next segment, a text ends otherwise
 * (the token at the edge weighs little, so of texts that end at ten
 * places, one at least; not with same_length, whose field is counted
 * whole). */
static void
test_receptive_field(void)
{
	static const struct {
		int seg, mem, same, kv;
	} cases[] = {
		{ 5, 7, 0, TXL_KV_F32 }, { 5, 7, 1, TXL_KV_F32 },
		{ 1, 6, 0, TXL_KV_F32 }, { 1, 6, 1, TXL_KV_F32 },
		{ 4, 0, 0, TXL_KV_F32 }, { 6, 11, 0, TXL_KV_F16 },
		{ 8, 3, 0, TXL_KV_BF16 }, { 3, 9, 0, TXL_KV_F32 },
	};
	const int L = txl_model_hparams(model)->n_layer;
	int32_t t[N_FIELD], a[5], b[5];
	float *whole = malloc(sizeof(float) * (size_t)V);
	float *lg = malloc(sizeof(float) * (size_t)V);
	char pa[4096], pb[4096];

	CHECK(whole && lg);
	snprintf(pa, sizeof pa, "%s/field-a.state", scratch);
	snprintf(pb, sizeof pb, "%s/field-b.state", scratch);
	text_of(t, N_FIELD, 1);
	text_of(a, 5, 2);
	text_of(b, 5, 3);
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct txl_session_params p = txl_session_params_default();
		const int seg = cases[c].seg, mem = cases[c].mem;
		bool tried = false, differ = false;
		int64_t field;

		p.seg_len = seg;
		p.mem_len = mem;
		p.same_length = cases[c].same;
		p.kv_type = cases[c].kv;
		CHECK_EQ(txl_session_receptive_field(model, &p, 1),
			 (int64_t)L * mem + 1);
		field = txl_session_receptive_field(model, &p, seg);
		CHECK_EQ(field, (int64_t)L * (mem + seg - 1) + 1);
		CHECK(field + 2 * seg <= N_FIELD - 9);
		for (int n = N_FIELD - 9; n <= N_FIELD; n++) {
			const int64_t start = txl_session_tail_start(model,
								     &p, n);
			unsigned char *fa;
			size_t na;

			CHECK(start % seg == 0);
			CHECK(n - start >= (int64_t)L * mem + 1);
			CHECK(n - start <= field + seg - 1);
			if (seg == 1)
				CHECK_EQ(start, n - 1 - L * mem);
			read_tail(&p, a, t, n, 0, pa, whole);
			fa = slurp(pa, &na);
			/* the tail's start, the three segments before it
			 * and 0 (nothing skipped: the text before does not
			 * matter either) */
			for (int k = 0; k <= 4; k++) {
				const int o = k < 4 ? (int)start - k * seg : 0;

				if (o < 0)
					continue;
				read_tail(&p, b, t, n, o, pb, lg);
				CHECK(same_file(pb, fa, na));
				CHECK(memcmp(whole, lg, sizeof(float) * V) == 0);
			}
			if (!cases[c].same && start + seg < n) {
				read_tail(&p, b, t, n, (int)start + seg, pb, lg);
				tried = true;
				differ = differ || !same_file(pb, fa, na);
			}
			free(fa);
		}
		/* (mem_len 0: the tail is the last segment) */
		CHECK(differ || (!tried && (cases[c].same || mem == 0)));
	}
	unlink(pa);
	unlink(pb);
	free(whole);
	free(lg);
}

/* What txl_session_receptive_field(), txl_session_tail_start() and
 * txl_session_skip() refuse; a skip forgets the memory and the output
 * but counts the tokens. */
static void
test_skip(void)
{
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *s = session(5, 7, 0), *fresh = session(5, 7, 0);
	int32_t bad[2] = { 1, V };

	p.seg_len = 5;
	CHECK_EQ(txl_session_receptive_field(model, &p, 0), -1);
	CHECK(strstr(txl_last_error(), "out of range") != NULL);
	CHECK_EQ(txl_session_receptive_field(model, &p, 6), -1);
	CHECK_EQ(txl_session_receptive_field(NULL, &p, 1), -1);
	p.mem_len = 0;
	p.same_length = 1;
	CHECK_EQ(txl_session_receptive_field(model, &p, 1), -1);
	CHECK(strstr(txl_last_error(), "same_length") != NULL);
	CHECK_EQ(txl_session_receptive_field(model, NULL, 1),
		 (int64_t)txl_model_hparams(model)->n_layer *
		 txl_model_hparams(model)->mem_len + 1);
	CHECK_EQ(txl_session_tail_start(model, NULL, -1), -1);
	CHECK_EQ(txl_session_tail_start(model, NULL, 0), 0);
	CHECK_EQ(txl_session_tail_start(model, NULL, 1), 0);
	CHECK_EQ(txl_session_tail_start(NULL, NULL, 9), -1);

	CHECK_EQ(txl_session_eval(s, toks, 9, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_skip(s, toks, 0), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_skip(s, NULL, 3), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_skip(NULL, toks, 3), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_skip(s, bad, 2), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "out of range") != NULL);
	/* unchanged by the refusals */
	CHECK_EQ(txl_session_n_past(s), 9);
	CHECK_EQ(txl_session_mem_fill(s), 7);
	CHECK_EQ(txl_session_n_logits(s), 1);

	CHECK_EQ(txl_session_skip(s, toks, 20), TXL_OK);
	CHECK_EQ(txl_session_n_past(s), 29);
	CHECK_EQ(txl_session_mem_fill(s), 0);
	CHECK_EQ(txl_session_n_logits(s), 0);
	/* and goes on as a new session, but for the count */
	CHECK(same_continuation(s, fresh, toks + 20, 12, 0));
	CHECK_EQ(txl_session_n_past(s), 41);
	txl_session_free(s);
	txl_session_free(fresh);
}

/* @p s's mem_len set to @p mem by txl_session_set_params(); its settings */
static struct txl_session_params
set_mem_len(struct txl_session *s, int mem)
{
	struct txl_session_params p = txl_session_get_params(s);

	p.mem_len = mem;
	CHECK_EQ(txl_session_set_params(s, &p), TXL_OK);
	return p;
}

/* @p s has no text: no position fed, no logits */
static void
check_nothing_fed(const struct txl_session *s)
{
	CHECK_EQ(txl_session_n_logits(s), 0);
	CHECK_EQ(txl_session_n_past(s), 0);
}

static void
test_set_params(void)
{
	char path[4096];
	struct txl_session *a = session(5, 4, 0), *b = session(5, 4, 0);
	struct txl_session *big = session(7, 16, 0), *twin = session(5, 16, 0);
	struct txl_session *ref;
	struct txl_session_params p;
	float *la = malloc(sizeof(float) * (size_t)V);

	CHECK(la);
	snprintf(path, sizeof path, "%s/state-set.bin", scratch);

	/* growing: the same as saving the memory and loading it into a
	 * session with the new settings */
	CHECK_EQ(txl_session_eval(a, toks, 23, TXL_LOGITS_LAST), TXL_OK);
	memcpy(la, txl_session_logits(a), sizeof(float) * V);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	CHECK_EQ(txl_session_load(big, path), TXL_OK);
	p = txl_session_get_params(a);
	p.seg_len = 7;
	p.mem_len = 16;
	CHECK_EQ(txl_session_set_params(a, &p), TXL_OK);
	CHECK_EQ(txl_session_get_params(a).mem_len, 16);
	CHECK_EQ(txl_session_mem_fill(a), 4);
	CHECK_EQ(txl_session_n_past(a), 23);
	/* still predicting the token after the text fed */
	CHECK_EQ(txl_session_n_logits(a), 1);
	CHECK(max_diff(la, txl_session_logits(a), V) <= TOL_REORDER);
	CHECK(same_continuation(a, big, toks + 23, 7, TOL_REORDER));
	CHECK_EQ(txl_session_mem_fill(a), 11);

	/* shrinking to the fill changes nothing for the next segment
	 * (the twin keeps more positions only after it) */
	txl_session_free(b);
	b = session(5, 16, 0);
	CHECK_EQ(txl_session_eval(b, toks, 10, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(twin, toks, 10, TXL_LOGITS_LAST), TXL_OK);
	set_mem_len(b, 10);
	CHECK_EQ(txl_session_mem_fill(b), 10);
	CHECK(same_continuation(b, twin, toks + 10, 5, TOL_REORDER));

	/* shrinking below it keeps the most recent positions: those that a
	 * session with the smaller memory keeps after one segment of the
	 * same text */
	txl_session_free(b);
	b = session(10, 16, 0);
	ref = session(10, 3, 0);
	CHECK_EQ(txl_session_eval(b, toks, 10, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(ref, toks, 10, TXL_LOGITS_LAST), TXL_OK);
	p = set_mem_len(b, 3);
	CHECK_EQ(txl_session_mem_fill(b), 3);
	CHECK_EQ(txl_session_n_past(b), 10);
	CHECK(same_continuation(b, ref, toks + 10, 5, TOL_REORDER));
	/* and the memory did lose something */
	CHECK(!same_continuation(b, twin, toks + 15, 5, 1e-4));

	/* mem_len 0 keeps nothing: the same as a new session */
	txl_session_free(twin);
	twin = session(5, 0, 0);
	p.mem_len = 0;
	CHECK_EQ(txl_session_set_params(b, &p), TXL_OK);
	CHECK_EQ(txl_session_mem_fill(b), 0);
	CHECK(same_continuation(b, twin, toks, 5, TOL_REORDER));

	/* refused settings leave the session as it was */
	p = txl_session_get_params(a);
	p.seg_len = 0;
	CHECK_EQ(txl_session_set_params(a, &p), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "seg_len") != NULL);
	p = txl_session_get_params(a);
	p.same_length = 1;
	p.mem_len = 0;
	CHECK_EQ(txl_session_set_params(a, &p), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_get_params(a).mem_len, 16);
	CHECK_EQ(txl_session_get_params(a).seg_len, 7);
	CHECK(same_continuation(a, big, toks + 30, 7, TOL_REORDER));

	/* nothing fed: no logits before or after */
	txl_session_free(twin);
	twin = session(5, 4, 0);
	CHECK_EQ(txl_session_set_params(twin, NULL), TXL_OK);
	check_nothing_fed(twin);

	unlink(path);
	free(la);
	txl_session_free(a);
	txl_session_free(b);
	txl_session_free(big);
	txl_session_free(twin);
	txl_session_free(ref);
}

/* txl_session_copy(): the copy continues the text as the original does,
 * in its own settings, and the original goes on unchanged. */
static void
test_copy(struct txl_model *other)
{
	struct txl_session *a = session(5, 16, 0), *twin = session(5, 16, 0);
	struct txl_session *b = session(5, 16, 0), *fresh = session(5, 16, 0);
	struct txl_session *small = session(10, 3, 0), *ref = session(10, 3, 0);
	struct txl_session_params p = txl_session_get_params(b);
	struct txl_session *half, *alien;
	float *la = malloc(sizeof(float) * (size_t)V);

	CHECK(la);
	CHECK_EQ(txl_session_eval(a, toks, 23, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(twin, toks, 23, TXL_LOGITS_LAST), TXL_OK);
	memcpy(la, txl_session_logits(a), sizeof(float) * V);

	/* the text, its length and the prediction that follows it: the
	 * same row of the same layer, computed again */
	CHECK_EQ(txl_session_copy(b, a), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 23);
	CHECK_EQ(txl_session_mem_fill(b), txl_session_mem_fill(a));
	CHECK_EQ(txl_session_n_logits(b), 1);
	CHECK(max_diff(la, txl_session_logits(b), V) == 0);
	/* it goes on as the original, which the copy left as it was (its
	 * twin was never copied from), and not as an empty memory does */
	CHECK(same_continuation(a, twin, toks + 23, 7, TOL_REORDER));
	memcpy(la, txl_session_logits(twin), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(b, toks + 23, 7, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(la, txl_session_logits(b), V) <= TOL_REORDER);
	CHECK(!same_continuation(b, fresh, toks + 30, 5, 1e-4));

	/* a copy keeps its own settings: a shorter memory holds the most
	 * recent positions, as a session of that memory has after the same
	 * text */
	txl_session_reset(b);
	CHECK_EQ(txl_session_eval(b, toks, 10, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_eval(ref, toks, 10, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_copy(small, b), TXL_OK);
	CHECK_EQ(txl_session_get_params(small).mem_len, 3);
	CHECK_EQ(txl_session_get_params(small).seg_len, 10);
	CHECK_EQ(txl_session_mem_fill(small), 3);
	CHECK(same_continuation(small, ref, toks + 10, 5, TOL_REORDER));

	/* another kv_type: the memory rounded as that session stores it,
	 * close to the original but not the same */
	p.kv_type = TXL_KV_F16;
	CHECK_EQ(txl_session_new(model, &p, &half), TXL_OK);
	CHECK_EQ(txl_session_copy(half, a), TXL_OK);
	CHECK_EQ(txl_session_copy(twin, a), TXL_OK);
	CHECK_EQ(txl_session_eval(half, toks + 5, 5, TXL_LOGITS_LAST), TXL_OK);
	memcpy(la, txl_session_logits(half), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(twin, toks + 5, 5, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(la, txl_session_logits(twin), V) <= 1e-2);
	CHECK(max_diff(la, txl_session_logits(twin), V) > 0);

	/* an adapted output layer goes with the text, as a copy: adapting
	 * the copy further leaves the original's */
	txl_session_reset(a);
	CHECK_EQ(txl_session_eval(a, toks, 5, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_adapt(a, toks + 1, 5, 0.5f), TXL_OK);
	CHECK_EQ(txl_session_copy(b, a), TXL_OK);
	CHECK_EQ(txl_session_n_logits(b), 1);
	CHECK(same_continuation(b, a, toks + 5, 4, TOL_REORDER));
	txl_session_reset(fresh);
	CHECK_EQ(txl_session_eval(fresh, toks, 9, TXL_LOGITS_NONE), TXL_OK);
	CHECK(!same_continuation(b, fresh, toks + 9, 4, 1e-4));
	CHECK_EQ(txl_session_eval(b, toks, 5, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_adapt(b, toks + 1, 5, 0.5f), TXL_OK);
	CHECK_EQ(txl_session_eval(a, toks, 5, TXL_LOGITS_NONE), TXL_OK);
	CHECK(!same_continuation(b, a, toks + 16, 4, 1e-4));

	/* nothing fed, nothing to predict, and b's adaptation gone with
	 * its text */
	txl_session_reset(a);
	CHECK_EQ(txl_session_copy(b, a), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 0);
	CHECK_EQ(txl_session_n_logits(b), 0);
	CHECK(same_continuation(b, a, toks, 5, TOL_REORDER));

	/* refused, and the session unchanged */
	CHECK_EQ(txl_session_copy(NULL, a), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_copy(b, NULL), TXL_ERR_INVALID);
	if (other) {
		CHECK_EQ(txl_session_new(other, NULL, &alien), TXL_OK);
		CHECK_EQ(txl_session_copy(b, alien), TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "different models") != NULL);
		CHECK_EQ(txl_session_n_past(b), 5);
		txl_session_free(alien);
	}

	free(la);
	txl_session_free(a);
	txl_session_free(b);
	txl_session_free(twin);
	txl_session_free(fresh);
	txl_session_free(small);
	txl_session_free(ref);
	txl_session_free(half);
}

static double
log_prob(const float *row, int t)
{
	double max = row[0], sum = 0;

	for (int j = 1; j < V; j++)
		max = fmax(max, row[j]);
	for (int j = 0; j < V; j++)
		sum += exp(row[j] - max);
	return row[t] - max - log(sum);
}

static void
test_adapt(void)
{
	struct txl_session *a = session(8, 8, 0), *b = session(8, 8, 0);
	struct txl_session_params p;
	float *first = malloc(sizeof(float) * (size_t)V * 8);
	int32_t bad = V;
	double gain = 0;

	CHECK(first);
	CHECK_EQ(txl_session_eval(a, toks, 8, TXL_LOGITS_ALL), TXL_OK);
	memcpy(first, txl_session_logits(a), sizeof(float) * V * 8);

	/* refused: no step taken, the logits still there */
	CHECK_EQ(txl_session_adapt(a, toks + 1, 7, 0.05f), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_adapt(a, toks + 1, 8, -1.0f), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_adapt(a, toks + 1, 8, NAN), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_adapt(a, &bad, 1, 0.05f), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_n_logits(a), 8);

	/* a step uses the logits up and leaves the memory alone */
	CHECK_EQ(txl_session_adapt(a, toks + 1, 8, 0.05f), TXL_OK);
	CHECK_EQ(txl_session_n_logits(a), 0);
	CHECK_EQ(txl_session_adapt(a, toks + 1, 8, 0.05f), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_mem_fill(a), 8);

	/* with the memory dropped (set_params keeps the adapted layer), the
	 * same tokens give the same hidden states as before the step, and
	 * the targets it learned from are more likely: the loss is convex in
	 * the output layer and the step small */
	p = txl_session_get_params(a);
	p.mem_len = 0;
	CHECK_EQ(txl_session_set_params(a, &p), TXL_OK);
	CHECK_EQ(txl_session_set_params(b, &p), TXL_OK);
	CHECK_EQ(txl_session_eval(a, toks, 8, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_eval(b, toks, 8, TXL_LOGITS_ALL), TXL_OK);
	CHECK(max_diff(first, txl_session_logits(b), V * 8) <= TOL_REORDER);
	for (int i = 0; i < 8; i++)
		gain += log_prob(txl_session_logits(a) + (size_t)i * V,
				 toks[i + 1]) -
			log_prob(txl_session_logits(b) + (size_t)i * V,
				 toks[i + 1]);
	CHECK(gain > 1e-3);

	/* reset returns to the model's output layer */
	txl_session_reset(a);
	CHECK_EQ(txl_session_eval(a, toks, 8, TXL_LOGITS_ALL), TXL_OK);
	CHECK(max_diff(txl_session_logits(b), txl_session_logits(a),
		       V * 8) == 0);

	free(first);
	txl_session_free(a);
	txl_session_free(b);
}

static bool
abort_now(void *data)
{
	int *calls = data;
	return ++*calls > 1;	/* let the first layer run, then stop */
}

static void
test_reset_and_abort(void)
{
	struct txl_session *a = session(8, 8, 0), *fresh = session(8, 8, 0);
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *ab;
	float *lf = malloc(sizeof(float) * (size_t)V);
	int calls = 0;

	CHECK(lf);
	CHECK_EQ(txl_session_eval(fresh, toks, 8, TXL_LOGITS_LAST), TXL_OK);
	memcpy(lf, txl_session_logits(fresh), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(a, toks + 8, 20, TXL_LOGITS_NONE), TXL_OK);
	txl_session_reset(a);
	CHECK_EQ(txl_session_mem_fill(a), 0);
	CHECK_EQ(txl_session_n_logits(a), 0);
	CHECK_EQ(txl_session_eval(a, toks, 8, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(lf, txl_session_logits(a), V) == 0);

	p.seg_len = 8;
	p.mem_len = 8;
	p.abort_cb = abort_now;
	p.abort_data = &calls;
	CHECK_EQ(txl_session_new(model, &p, &ab), TXL_OK);
	CHECK_EQ(txl_session_eval(ab, toks, 8, TXL_LOGITS_LAST), TXL_ABORTED);
	check_nothing_fed(ab);
	CHECK_EQ(txl_session_mem_fill(ab), 0);
	free(lf);
	txl_session_free(a);
	txl_session_free(fresh);
	txl_session_free(ab);
}

static struct txl_session *
session_kv(const struct txl_model *m, int seg, int mem, int kv_type)
{
	struct txl_session_params p = session_params(seg, mem);

	p.kv_type = kv_type;
	return new_session(m, &p);
}

static long
file_size(const char *path)
{
	struct stat sb;

	CHECK(stat(path, &sb) == 0);
	return (long)sb.st_size;
}

/* A compact memory (kv_type F16, BF16, Q8_0, Q4_0) of model m: its state
 * files hold 16-bit rows (Q8_0: 34 bytes a block of 32 values, Q4_0: 18),
 * and a state of another kv_type is converted on load.  Widening to F32
 * is exact, and rounding an F32 that holds such a value gives it back
 * (Q8_0: the block's max is 127 d, so its scale comes out as d and every
 * value as q d, for scales in F16's normal range; Q4_0: a narrowed
 * block's largest value is -8 d, q = 0, so the same), so a compact
 * memory that goes through an F32 session (loaded there, saved again)
 * comes back bit for bit: the session that loads it continues as the one
 * that saved it.  set_params converts as a load does. */
static void
test_kv_type_of(const struct txl_model *m, int kv)
{
	const struct txl_hparams *hp = txl_model_hparams(m);
	const long values = 2L * hp->n_layer * 16 * hp->n_head * hp->d_head;
	char pc[4096], p32[4096], pf[4096];
	struct txl_session_params p;
	struct txl_session *a = session_kv(m, 5, 16, kv);
	struct txl_session *wide = session_kv(m, 5, 16, TXL_KV_F32);
	struct txl_session *b = session_kv(m, 5, 16, kv);
	struct txl_session *f = session_kv(m, 5, 16, TXL_KV_F32);

	snprintf(pc, sizeof pc, "%s/kvc.state", scratch);
	snprintf(p32, sizeof p32, "%s/kv32.state", scratch);
	snprintf(pf, sizeof pf, "%s/kvf.state", scratch);
	/* K, V and R in fewer bytes */
	p = txl_session_get_params(f);
	int64_t full = txl_session_bytes(m, &p);
	p.kv_type = kv;
	CHECK(txl_session_bytes(m, &p) < full);
	CHECK_EQ(txl_session_eval(a, toks, 23, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(a, pc), TXL_OK);
	CHECK_EQ(txl_session_load(wide, pc), TXL_OK);
	CHECK_EQ(txl_session_save(wide, p32), TXL_OK);
	/* the K and V rows take 2 bytes a value (Q8_0: 34 / 32, Q4_0:
	 * 18 / 32), then 4 */
	CHECK_EQ(file_size(p32) - file_size(pc),
		 kv == TXL_KV_Q8_0 ? values * 4 - values / 32 * 34 :
		 kv == TXL_KV_Q4_0 ? values * 4 - values / 32 * 18 : values * 2);
	CHECK_EQ(txl_session_load(b, p32), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 23);
	CHECK(same_continuation(a, b, toks + 23, 7, TOL_REORDER));

	/* an F32 memory converted by set_params = by a load */
	CHECK_EQ(txl_session_eval(f, toks, 23, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(f, pf), TXL_OK);
	txl_session_free(b);
	b = session_kv(m, 5, 16, kv);
	CHECK_EQ(txl_session_load(b, pf), TXL_OK);
	p = txl_session_get_params(f);
	p.kv_type = kv;
	CHECK_EQ(txl_session_set_params(f, &p), TXL_OK);
	CHECK_EQ(txl_session_get_params(f).kv_type, kv);
	CHECK(same_continuation(f, b, toks + 23, 7, TOL_REORDER));
	txl_session_free(a);
	txl_session_free(wide);
	txl_session_free(b);
	txl_session_free(f);
	unlink(pc);
	unlink(p32);
	unlink(pf);
}

/* kv_type: every compact type on the models that allow it.  Bad kv_types
 * are refused, and so are Q8_0 and Q4_0 on a model whose d_head (16) is no
 * multiple of 32, as a session or as a state file (one that says so, made
 * by hand: no session of the model can save it). */
static void
test_kv_type(const struct txl_model *m32)
{
	const struct txl_hparams *hp = txl_model_hparams(model);
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *s;
	char path[4096];
	char want[64];

	for (int kv = TXL_KV_F16; kv <= TXL_KV_BF16; kv++)
		test_kv_type_of(model, kv);
	for (int kv = TXL_KV_Q8_0; kv <= TXL_KV_Q4_0; kv++) {
		const char *name = kv == TXL_KV_Q8_0 ? "Q8_0" : "Q4_0";
		if (m32)
			test_kv_type_of(m32, kv);
		else
			fprintf(stderr, "skip: kv_type %s (no model of d_head "
				"32)\n", name);

		CHECK(hp->d_head % 32 != 0);
		p.kv_type = kv;
		CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
		snprintf(want, sizeof want, "d_head is %d", hp->d_head);
		CHECK(strstr(txl_last_error(), name) != NULL);
		CHECK(strstr(txl_last_error(), want) != NULL);
		CHECK(txl_session_bytes(model, &p) == -1);

		snprintf(path, sizeof path, "%s/kvq.state", scratch);
		s = session_kv(model, 5, 16, TXL_KV_F32);
		CHECK_EQ(txl_session_eval(s, toks, 9, TXL_LOGITS_LAST), TXL_OK);
		CHECK_EQ(txl_session_save(s, path), TXL_OK);
		/* the header's kv_type: after magic, version, n_layer,
		 * fingerprint, d_model, n_head, d_head, mem_len, fill,
		 * have_last, n_past */
		const uint32_t q = (uint32_t)kv;
		int fd = open(path, O_WRONLY);
		CHECK(fd >= 0 && pwrite(fd, &q, 4, 56) == 4 && close(fd) == 0);
		CHECK_EQ(txl_session_load(s, path), TXL_ERR_FORMAT);
		CHECK(strstr(txl_last_error(), name) != NULL);
		CHECK_EQ(txl_session_mem_fill(s), 9);
		txl_session_free(s);
		unlink(path);
	}

	p.kv_type = 5;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "kv_type") != NULL);
	p.kv_type = -1;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	CHECK(txl_session_bytes(model, &p) == -1);
}

static void
test_invalid(void)
{
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *s = session(4, 4, 0);
	int32_t bad = V;

	CHECK_EQ(txl_session_eval(s, &bad, 1, TXL_LOGITS_LAST),
		 TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "out of range") != NULL);
	CHECK_EQ(txl_session_eval(s, toks, 5, TXL_LOGITS_ALL), TXL_ERR_INVALID);
	CHECK_EQ(txl_session_eval(s, toks, 0, TXL_LOGITS_LAST),
		 TXL_ERR_INVALID);
	/* as txl_batch_eval(): no value but the three of enum txl_logits */
	CHECK_EQ(txl_session_eval(s, toks, 2, (enum txl_logits)9),
		 TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "want 9") != NULL);
	CHECK_EQ(txl_session_eval(s, toks, 2, (enum txl_logits)-1),
		 TXL_ERR_INVALID);

	/* NULL where a pointer is needed: refused, not a crash, as the
	 * batch functions do */
	{
		struct txl_model *m = (struct txl_model *)1;
		int32_t ids[4];
		double lp[2];

		CHECK_EQ(txl_session_eval(NULL, toks, 2, TXL_LOGITS_LAST),
			 TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "no session") != NULL);
		CHECK(txl_session_logits(NULL) == NULL);
		CHECK_EQ(txl_session_score(NULL, toks, 1, lp), TXL_ERR_INVALID);
		CHECK_EQ(txl_session_adapt(NULL, toks, 1, 0.1f),
			 TXL_ERR_INVALID);
		CHECK_EQ(txl_session_eval(s, toks, 2, TXL_LOGITS_ALL), TXL_OK);
		/* the pointer missing is named, not a count that fits */
		CHECK_EQ(txl_session_score(s, toks + 1, 2, NULL),
			 TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "NULL logprobs") != NULL);
		CHECK_EQ(txl_session_score(s, NULL, 2, lp), TXL_ERR_INVALID);
		CHECK(strstr(txl_last_error(), "NULL targets") != NULL);
		CHECK_EQ(txl_session_score(s, toks + 1, 2, lp), TXL_OK);

		CHECK_EQ(txl_model_load("x.bin", NULL), TXL_ERR_INVALID);
		CHECK_EQ(txl_model_load(NULL, &m), TXL_ERR_INVALID);
		CHECK(m == NULL);
		CHECK(txl_model_meta(model, NULL) == NULL);
		CHECK(txl_model_meta(NULL, "description") == NULL);
		CHECK_EQ(txl_tokenize(model, NULL, 5, ids, 4), INT32_MIN);
		CHECK_EQ(txl_tokenize(NULL, "ab", 2, ids, 4), INT32_MIN);
		CHECK_EQ(txl_tokenize(model, "ab", 2, NULL, 4), INT32_MIN);
		CHECK(txl_tokenize(model, "ab", 2, NULL, 0) < 0);
		CHECK(txl_tokenize(model, "ab", 2, ids, 4) > 0);
	}
	txl_session_free(s);

	p.same_length = 1;
	p.mem_len = 0;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	CHECK(s == NULL);
	p = txl_session_params_default();
	p.seg_len = 0;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	p = txl_session_params_default();
	p.clamp_len = -3;
	CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_INVALID);
	/* within range, but beyond this machine's memory: refused up
	 * front, not killed later.  The scratch of a segment's attention
	 * is a slot of 32 queries' scores per thread, so the most threads
	 * with the longest memory ask for 256 x 32 x 2^21 floats (64 GiB)
	 * even of this small model. */
	p = txl_session_params_default();
	p.mem_len = TXL_MEM_LEN_MAX;
	p.seg_len = TXL_SEG_LEN_MAX;
	p.n_threads = 256;
	const double need = (double)txl_session_bytes(model, &p);
	const double have = (double)sysconf(_SC_PHYS_PAGES) *
		(double)sysconf(_SC_PAGESIZE);
	CHECK(need > 64.0 * (1 << 30));
	if (need > have) {
		CHECK_EQ(txl_session_new(model, &p, &s), TXL_ERR_NOMEM);
		CHECK(s == NULL);
		CHECK(strstr(txl_last_error(), "GiB") != NULL);
	} else {
		fprintf(stderr, "note: %.0f GiB of memory, more than a %.0f GiB "
			"session needs: not refused here\n", have / (1 << 30),
			need / (1 << 30));
	}
	txl_session_free(NULL);
}

/* Files in the scratch directory whose name starts with @p prefix. */
static int
count_files(const char *prefix)
{
	DIR *d = opendir(scratch);
	struct dirent *de;
	int n = 0;

	CHECK(d);
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* @p b loads the state file @p path: @p n_past positions fed; and no
 * temporary file of a save to it is left in the scratch directory */
static void
check_state_kept(struct txl_session *b, const char *path, int n_past)
{
	char prefix[4096];

	CHECK_EQ(txl_session_load(b, path), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), n_past);
	snprintf(prefix, sizeof prefix, "%s.", strrchr(path, '/') + 1);
	CHECK_EQ(count_files(prefix), 0);
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	CHECK(f && fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
}

static void
copy_file(const char *from, const char *to)
{
	char buf[1 << 16];
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	size_t n;

	CHECK(in && out);
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		CHECK(fwrite(buf, 1, n, out) == n);
	fclose(in);
	CHECK(fclose(out) == 0);
}

static void
on_alarm(int sig)
{
	static const char msg[] = "FAIL: a state file operation hung\n";

	(void)sig;
	(void)!write(2, msg, sizeof msg - 1);
	_exit(1);
}

static void
test_state_targets(void)
{
	char path[4096], fifo[4096], dir[4096], link[4096];
	struct txl_session *a = session(5, 8, 0), *b = session(5, 8, 0);
	struct stat sb;

	snprintf(path, sizeof path, "%s/tgt.state", scratch);
	snprintf(fifo, sizeof fifo, "%s/tgt-fifo.state", scratch);
	snprintf(dir, sizeof dir, "%s/tgt-dir.state", scratch);
	snprintf(link, sizeof link, "%s/tgt-link.state", scratch);
	unlink(path);
	unlink(fifo);
	unlink(link);
	rmdir(dir);
	CHECK_EQ(txl_session_eval(a, toks, 12, TXL_LOGITS_LAST), TXL_OK);

	/* a FIFO is neither read (it would wait for a writer forever) nor
	 * replaced */
	CHECK(mkfifo(fifo, 0600) == 0);
	signal(SIGALRM, on_alarm);
	alarm(20);
	CHECK_EQ(txl_session_load(b, fifo), TXL_ERR_IO);
	alarm(0);
	CHECK(strstr(txl_last_error(), "FIFO") != NULL);
	CHECK(strstr(txl_last_error(), fifo) != NULL);
	CHECK_EQ(txl_session_save(a, fifo), TXL_ERR_IO);
	CHECK(strstr(txl_last_error(), "not a regular file (a FIFO)") != NULL);
	CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));

	/* a directory: the real reason, and nothing written beside it */
	CHECK(mkdir(dir, 0700) == 0);
	CHECK_EQ(txl_session_load(b, dir), TXL_ERR_IO);
	CHECK(strstr(txl_last_error(), "directory") != NULL);
	CHECK_EQ(txl_session_save(a, dir), TXL_ERR_IO);
	CHECK(strstr(txl_last_error(), "not a regular file (a directory)") !=
	      NULL);
	CHECK(lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
	CHECK_EQ(count_files("tgt-dir.state."), 0);

	/* a new file is private; a replaced one keeps its mode */
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0600);
	CHECK(chmod(path, 0640) == 0);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0640);
	CHECK_EQ(txl_session_load(b, path), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 12);

	/* through a symbolic link: the file it names is replaced, the link
	 * stays */
	CHECK(symlink("tgt.state", link) == 0);
	CHECK(chmod(path, 0604) == 0);
	CHECK_EQ(txl_session_eval(a, toks + 12, 3, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(a, link), TXL_OK);
	CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0604);
	check_state_kept(b, path, 15);

	unlink(path);
	unlink(fifo);
	unlink(link);
	rmdir(dir);
	txl_session_free(a);
	txl_session_free(b);
}

static void
test_state_failed_save(void)
{
	char path[4096];
	struct txl_session *a = session(5, 8, 0), *b = session(5, 8, 0);
	int status;
	pid_t pid;

	snprintf(path, sizeof path, "%s/full.state", scratch);
	CHECK_EQ(txl_session_eval(a, toks, 9, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	/* a write that fails half-way (a file size limit, as a full disk
	 * would): the reason, the old file intact, no temporary left */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 100, 100 };
		signal(SIGXFSZ, SIG_IGN);
		CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
		CHECK_EQ(txl_session_eval(a, toks, 5, TXL_LOGITS_LAST), TXL_OK);
		CHECK_EQ(txl_session_save(a, path), TXL_ERR_IO);
		CHECK(strstr(txl_last_error(), "File too large") != NULL);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	check_state_kept(b, path, 9);
	unlink(path);
	txl_session_free(a);
	txl_session_free(b);
}

static bool
abort_after(void *data)
{
	int *left = data;
	return --*left < 0;
}

/* The abort callback is polled while saving: a save it stops leaves the
 * old file, and no temporary one; at each of its polls. */
static void
test_state_aborted_save(void)
{
	char path[4096];
	struct txl_session_params p = txl_session_params_default();
	struct txl_session *a = session(5, 8, 0), *b = session(5, 8, 0), *ab;
	int left = 0, polls = -1;

	snprintf(path, sizeof path, "%s/abort.state", scratch);
	CHECK_EQ(txl_session_eval(a, toks, 9, TXL_LOGITS_LAST), TXL_OK);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	p.seg_len = 5;
	p.mem_len = 8;
	p.abort_cb = abort_after;
	p.abort_data = &left;
	CHECK_EQ(txl_session_new(model, &p, &ab), TXL_OK);
	left = 1000;
	CHECK_EQ(txl_session_eval(ab, toks, 12, TXL_LOGITS_LAST), TXL_OK);
	/* count the polls of a whole save (one at least per layer) */
	left = 1000;
	CHECK_EQ(txl_session_save(ab, path), TXL_OK);
	polls = 1000 - left;
	CHECK(polls > txl_model_hparams(model)->n_layer);
	CHECK_EQ(txl_session_save(a, path), TXL_OK);
	for (int k = 0; k < polls; k++) {
		left = k;
		CHECK_EQ(txl_session_save(ab, path), TXL_ABORTED);
		check_state_kept(b, path, 9);
	}
	unlink(path);
	txl_session_free(a);
	txl_session_free(b);
	txl_session_free(ab);
}

static void
test_state_killed_save(void)
{
	char path[4096], stale[4200], live[4200];
	struct txl_session *a = session(5, 64, 0), *b = session(5, 64, 0);
	int status, fd;
	pid_t pid;

	snprintf(path, sizeof path, "%s/kill.state", scratch);
	unlink(path);
	CHECK_EQ(txl_session_eval(a, toks, 40, TXL_LOGITS_LAST), TXL_OK);
	/* a child saving again and again, killed at some point of a save
	 * (it spends nearly all its time in one) */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		for (;;)
			CHECK_EQ(txl_session_save(a, path), TXL_OK);
	}
	for (int i = 0; i < 200 && access(path, F_OK) != 0; i++)
		usleep(10000);
	usleep(20000);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status));
	/* the target is whole, nothing else is left (an unnamed temporary
	 * file dies with its process; a named one is removed by the next
	 * save: there is one) */
	CHECK_EQ(txl_session_load(b, path), TXL_OK);
	CHECK_EQ(txl_session_n_past(b), 40);

	/* what the next save removes, and what it leaves: an abandoned
	 * temporary file (its name, a state header) that no process holds
	 * goes; one that a live writer holds (locked) stays, and so does
	 * every file that is not provably one: other names, names like
	 * ours holding something else, an empty one */
	static const char *const keep[] = {
		".tmpAbC123", ".tmpbackup", ".tmp.jsonl", ".txltmp.AbC12",
		".txltmp.AbC1234", ".txltmp.AbC-12", ".txltmp.Empty0",
		".txltmp.Other1",
	};
	char name[4200];

	snprintf(stale, sizeof stale, "%s.txltmp.AbC123", path);
	snprintf(live, sizeof live, "%s.txltmp.LiVe99", path);
	copy_file(path, stale);
	copy_file(path, live);
	for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
		snprintf(name, sizeof name, "%s%s", path, keep[i]);
		if (strstr(keep[i], "Empty"))
			write_file(name, "");
		else if (strstr(keep[i], "Other"))
			write_file(name, "precious, and longer than a state "
				   "file's header: not one of ours");
		else
			copy_file(path, name);
	}
	fd = open(live, O_RDONLY);
	CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
	CHECK_EQ(txl_session_save(b, path), TXL_OK);
	CHECK(access(stale, F_OK) != 0);
	CHECK(access(live, F_OK) == 0);
	close(fd);
	unlink(live);
	for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
		snprintf(name, sizeof name, "%s%s", path, keep[i]);
		CHECK(access(name, F_OK) == 0);
		unlink(name);
	}
	CHECK_EQ(count_files("kill.state."), 0);
	unlink(path);
	txl_session_free(a);
	txl_session_free(b);
}

/* txl_session_set_compute(): F32 weights refuse BF16; with BF16 weights
 * a segment's logits move by the rounding of the activations (each
 * within 2^-8 of itself at each of a layer's products, through 2 layers
 * whose attention, peaked on purpose, amplifies it: 0.9% of the largest
 * logit measured; 5% is far below what a wrong product gives, an error
 * the size of the values), one token at a time not at all (the
 * matrix-vector kernels, the same computation repeated). */
static void
test_compute(const struct txl_model *mb)
{
	struct txl_session *s = session(5, 4, 0), *a, *b;
	struct txl_session_params p = txl_session_params_default();
	const int n = 33;
	float *la = malloc(sizeof(float) * (size_t)V * n);

	CHECK(la);
	CHECK_EQ(txl_session_get_compute(s), TXL_COMPUTE_F32);
	CHECK_EQ(txl_session_set_compute(s, TXL_COMPUTE_BF16),
		 TXL_ERR_INVALID);
	CHECK(strstr(txl_last_error(), "BF16"));
	CHECK_EQ(txl_session_set_compute(s, (enum txl_compute)2),
		 TXL_ERR_INVALID);
	CHECK_EQ(txl_session_get_compute(s), TXL_COMPUTE_F32);
	CHECK_EQ(txl_session_set_compute(s, TXL_COMPUTE_F32), TXL_OK);
	txl_session_free(s);

	p.seg_len = n;
	p.mem_len = 8;
	CHECK_EQ(txl_session_new(mb, &p, &a), TXL_OK);
	CHECK_EQ(txl_session_new(mb, &p, &b), TXL_OK);
	CHECK_EQ(txl_session_set_compute(b, TXL_COMPUTE_BF16), TXL_OK);
	CHECK_EQ(txl_session_get_compute(b), TXL_COMPUTE_BF16);
	CHECK_EQ(txl_session_eval(a, toks, n, TXL_LOGITS_ALL), TXL_OK);
	CHECK_EQ(txl_session_eval(b, toks, n, TXL_LOGITS_ALL), TXL_OK);
	memcpy(la, txl_session_logits(a), sizeof(float) * (size_t)V * n);
	const double d = max_diff(la, txl_session_logits(b), V * n);
	double top = 0;
	for (int i = 0; i < V * n; i++)
		top = fmax(top, fabs(la[i]));
	CHECK(d > 0 && d < 0.05 * top);

	/* kept by set_params */
	p = txl_session_get_params(b);
	p.seg_len = 1;
	CHECK_EQ(txl_session_set_params(b, &p), TXL_OK);
	CHECK_EQ(txl_session_get_compute(b), TXL_COMPUTE_BF16);
	txl_session_free(a);
	txl_session_free(b);

	/* one token at a time: as F32 */
	p.seg_len = 1;
	CHECK_EQ(txl_session_new(mb, &p, &a), TXL_OK);
	CHECK_EQ(txl_session_new(mb, &p, &b), TXL_OK);
	CHECK_EQ(txl_session_set_compute(b, TXL_COMPUTE_BF16), TXL_OK);
	for (int i = 0; i < 12; i++) {
		CHECK_EQ(txl_session_eval(a, toks + i, 1, TXL_LOGITS_LAST),
			 TXL_OK);
		CHECK_EQ(txl_session_eval(b, toks + i, 1, TXL_LOGITS_LAST),
			 TXL_OK);
		CHECK(memcmp(txl_session_logits(a), txl_session_logits(b),
			     sizeof(float) * (size_t)V) == 0);
	}
	txl_session_free(a);
	txl_session_free(b);
	free(la);
}

static void
test_no_mmap(const char *model_path)
{
	char copy[4096], buf[1 << 16];
	struct txl_model *m, *dev;
	struct txl_session *s, *ref = session(8, 8, 0);
	struct txl_session_params p = txl_session_params_default();
	float *want = malloc(sizeof(float) * (size_t)V);
	FILE *in, *out;
	size_t n;

	CHECK(want);
	snprintf(copy, sizeof copy, "%s/no-mmap.bin", scratch);
	in = fopen(model_path, "rb");
	out = fopen(copy, "wb");
	CHECK(in && out);
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		CHECK(fwrite(buf, 1, n, out) == n);
	fclose(in);
	CHECK(fclose(out) == 0);

	CHECK_EQ(txl_model_load_flags(copy, 0x80, &m), TXL_ERR_INVALID);
	CHECK(m == NULL);
	CHECK_EQ(txl_model_load_flags(copy, TXL_LOAD_NO_MMAP, &m), TXL_OK);
	/* the file cut to nothing under it, as `cp` over it does first: a
	 * mapped model would die of SIGBUS at the next page it reads */
	CHECK(truncate(copy, 0) == 0);
	p.seg_len = 8;
	p.mem_len = 8;
	CHECK_EQ(txl_session_new(m, &p, &s), TXL_OK);
	CHECK_EQ(txl_session_eval(ref, toks, 16, TXL_LOGITS_LAST), TXL_OK);
	memcpy(want, txl_session_logits(ref), sizeof(float) * V);
	CHECK_EQ(txl_session_eval(s, toks, 16, TXL_LOGITS_LAST), TXL_OK);
	CHECK(max_diff(want, txl_session_logits(s), V) <= TOL_REORDER);
	CHECK(txl_model_fingerprint(m) ==
	      txl_model_fingerprint((struct txl_model *)model));
	/* a FIFO or a device is refused without waiting */
	CHECK_EQ(txl_model_load_flags("/dev/zero", TXL_LOAD_NO_MMAP, &dev),
		 TXL_ERR_IO);
	CHECK(strstr(txl_last_error(), "not a regular file") != NULL);
	txl_session_free(s);
	txl_model_free(m);
	unlink(copy);
	free(want);
	txl_session_free(ref);
}

static void
test_tokenizer(void)
{
	const char *text = "Fellow citizens, the state of the Union is "
		"strong. \xc3\xa9t\xc3\xa9 \xe2\x82\xac 42";
	int32_t ids[256];
	char out[512], pieces[512];
	size_t plen = 0;
	int n, m;

	n = txl_tokenize(model, text, strlen(text), ids, 256);
	CHECK(n > 0);
	CHECK_EQ(txl_tokenize(model, text, strlen(text), ids, 1), -n);
	m = txl_detokenize(model, ids, n, out, sizeof out);
	CHECK_EQ(m, (int)strlen(text));
	CHECK(strcmp(out, text) == 0);
	CHECK_EQ(txl_detokenize(model, ids, n, out, 3), -(m + 1));
	/* running-text pieces concatenate to the text, with SentencePiece's
	 * leading space */
	for (int i = 0; i < n; i++) {
		int k = txl_token_piece(model, ids[i], pieces + plen,
					sizeof pieces - plen);
		CHECK(k >= 0);
		plen += (size_t)k;
	}
	CHECK_EQ(plen, strlen(text) + 1);
	CHECK(pieces[0] == ' ' && memcmp(pieces + 1, text, plen - 1) == 0);
	CHECK_EQ(txl_token_piece(model, V, out, sizeof out), INT32_MIN);
	CHECK_EQ(txl_token_piece(model, -1, out, sizeof out), INT32_MIN);
	CHECK(txl_token_unk(model) >= 0);
}

int
main(int argc, char **argv)
{
	struct txl_model *m32 = NULL;

	if (argc < 3) {
		fprintf(stderr, "usage: test-session MODEL SCRATCH_DIR "
			"[MODEL_D_HEAD_32]\n");
		return 2;
	}
	if (access(argv[1], R_OK) != 0) {
		fprintf(stderr, "SKIP: no test model %s\n", argv[1]);
		return TEST_SKIP;
	}
	scratch = argv[2];
	if (txl_model_load(argv[1], &model) != TXL_OK) {
		fprintf(stderr, "FAIL: %s\n", txl_last_error());
		return 1;
	}
	if (argc > 3 && txl_model_load(argv[3], &m32) != TXL_OK) {
		fprintf(stderr, "FAIL: %s\n", txl_last_error());
		return 1;
	}
	V = txl_model_hparams(model)->n_token;
	/* the tokens are of both models */
	CHECK(!m32 || txl_model_hparams(m32)->n_token >= V);
	for (int i = 0; i < N_TOK; i++)
		toks[i] = (int32_t)((i * 7919 + 13) % V);
	RUN(test_dtype_names);
	RUN(test_hparams);
	RUN(test_same_length_segmentation);
	RUN(test_last_equals_all);
	RUN(test_mem_init);
	RUN(test_threads_after_session);
	RUN(test_save_load);
	RUN(test_state_n_past);
	RUN(test_receptive_field);
	RUN(test_skip);
	RUN(test_state_recent);
	RUN(test_set_params);
	if (m32)
		fprintf(stderr, "kv_type Q8_0 on %s\n", argv[3]);
	test_kv_type(m32);
	fprintf(stderr, "ok test_kv_type\n");
	RUN(test_adapt);
	test_copy(m32);
	fprintf(stderr, "ok test_copy\n");
	RUN(test_reset_and_abort);
	RUN(test_invalid);
	RUN(test_tokenizer);
	RUN(test_state_targets);
	RUN(test_state_failed_save);
	RUN(test_state_killed_save);
	RUN(test_state_aborted_save);
	test_no_mmap(argv[1]);
	fprintf(stderr, "ok test_no_mmap\n");
	if (argc > 4) {
		struct txl_model *mb;

		if (txl_model_load(argv[4], &mb) != TXL_OK) {
			fprintf(stderr, "FAIL: %s\n", txl_last_error());
			return 1;
		}
		CHECK(txl_model_hparams(mb)->n_token >= V);
		test_compute(mb);
		fprintf(stderr, "ok test_compute\n");
		txl_model_free(mb);
	}
	txl_model_free(model);
	txl_model_free(m32);
	return 0;
}
