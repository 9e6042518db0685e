/* SPDX-License-Identifier: MIT */
/*
 * txl-tokenizer.c - the model's tokenizer: the SentencePiece model stored
 * in the file as the U8 tensor "tokenizer.model" (through the C++ shim
 * txl-spm.cc), and the running-text bytes of every token, computed once
 * at load for streaming output.
 *
 * A model converted from an original Transformer-XL vocabulary
 * (models/vocab.py) says so in its metadata, and the tokenizer adds what
 * SentencePiece cannot do alone (txlgen-model(5), "Vocabularies of the
 * original code"): lines become <eos>-terminated (wt103, ptb) or
 * <S>-enclosed (lm1b) symbol runs and <eos> prints as a newline; or
 * newlines are dropped (enwik8, text8); a run of unknown words is one
 * unknown symbol per word; and where the vocabulary has no unknown symbol,
 * text that needs one is refused, as the original refuses it.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl-tokenizer.h"
#include "txl-log.h"
#include "txl-spm.h"
#include "txl-limits.h"

/* The vocab_* metadata; a model without them is a plain SentencePiece
 * model. */
static enum txl_status
vocab_load(struct txl_model *m)
{
	const struct txl_file *f = &m->file;
	const char *kind = txl_file_meta(f, "vocab_kind");
	const char *nl = txl_file_meta(f, "vocab_newline");
	const char *unk = txl_file_meta(f, "vocab_unk");
	int n = txl_spm_vocab_size(m->spm), n_token = m->hp.n_token;
	struct txl_vocab *v = &m->vocab;

	memset(v, 0, sizeof *v);
	v->eos = -1;
	if (!kind && !nl && !unk) {
		v->newline = TXL_NL_TEXT;
		if (n != n_token)
			return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer has %d "
					"pieces, the model n_token %d", f->path,
					n, n_token);
		return TXL_OK;
	}
	if (!kind || (strcmp(kind, "word") && strcmp(kind, "char")))
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata 'vocab_kind' must "
				"be word or char", f->path);
	v->word = !strcmp(kind, "word");
	if (nl && !strcmp(nl, "eos"))
		v->newline = TXL_NL_EOS;
	else if (nl && !strcmp(nl, "double_eos"))
		v->newline = TXL_NL_DOUBLE_EOS;
	else if (nl && !strcmp(nl, "drop"))
		v->newline = TXL_NL_DROP;
	else if (nl && !strcmp(nl, "strip_eos"))
		v->newline = TXL_NL_STRIP_EOS;
	else
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata 'vocab_newline' "
				"must be eos, double_eos, drop or strip_eos",
				f->path);
	if (!unk || (strcmp(unk, "piece") && strcmp(unk, "none")))
		return txl_fail(TXL_ERR_FORMAT, "%s: metadata 'vocab_unk' must "
				"be piece or none", f->path);
	v->no_unk = !strcmp(unk, "none");
	/* without an unknown symbol the tokenizer has more pieces: its
	 * unknown piece, and the byte pieces byte fallback needs */
	if (v->no_unk ? (n <= n_token || n > n_token + 257 ||
			 txl_spm_unk_id(m->spm) < n_token) : n != n_token)
		return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer has %d pieces, "
				"the model n_token %d (vocab_unk %s)", f->path,
				n, n_token, unk);
	if (v->newline == TXL_NL_EOS || v->newline == TXL_NL_DOUBLE_EOS ||
	    v->newline == TXL_NL_STRIP_EOS) {
		v->eos = txl_spm_eos_id(m->spm);
		if (v->eos < 0 || v->eos >= n_token)
			return txl_fail(TXL_ERR_FORMAT, "%s: vocab_newline %s "
					"but the tokenizer has no end-of-line "
					"control piece", f->path, nl);
	}
	return TXL_OK;
}

/* The running-text bytes of token @p id into @p buf (at most @p cap):
 * length, negated length needed, or INT32_MIN. */
static int
piece_bytes(const struct txl_model *m, int id, char *buf, size_t cap)
{
	const struct txl_vocab *v = &m->vocab;

	if (id == v->eos && v->eos >= 0) {
		if (cap < 1)
			return -1;
		buf[0] = '\n';
		return 1;
	}
	if (v->word && id == txl_spm_unk_id(m->spm)) {
		/* the unknown word is a word of the corpus ("<unk>"), not
		 * SentencePiece's " ⁇ " */
		if (cap < 1)
			return -1 - (int)strlen("<unk>");
		buf[0] = ' ';
		int k = txl_spm_piece(m->spm, id, buf + 1, cap - 1);
		return k >= 0 ? k + 1 : k == INT32_MIN ? k : k - 1;
	}
	if (v->newline == TXL_NL_STRIP_EOS) {
		/* dwdb joins the symbols as they are: <unk>, <pad>, a
		 * newline (pieces no text reaches) print as themselves */
		int k = txl_spm_piece_bytes(m->spm, id, buf, cap);

		if (k == 0 || id == txl_spm_unk_id(m->spm))
			return txl_spm_piece(m->spm, id, buf, cap);
		return k;
	}
	return txl_spm_piece_bytes(m->spm, id, buf, cap);
}

enum txl_status
txl_tokenizer_load(struct txl_model *m)
{
	const struct txl_file *f = &m->file;
	const struct txl_tensor_info *t = txl_file_find(f, "tokenizer.model");
	enum txl_status st;
	size_t total = 0;
	char buf[TXL_MAX_PIECE_BYTES];

	if (!t)
		return txl_fail(TXL_ERR_FORMAT, "%s: missing tensor "
				"'tokenizer.model' (the SentencePiece model)",
				f->path);
	if (t->dtype != TXL_U8 || t->ndim != 1)
		return txl_fail(TXL_ERR_FORMAT, "%s: tensor 'tokenizer.model' "
				"must be 1-D U8", f->path);
	st = txl_spm_load(f->map + t->begin, t->end - t->begin, &m->spm);
	if (st != TXL_OK) {
		/* txl_fail formats into the buffer txl_last_error() returns */
		char why[256];
		snprintf(why, sizeof why, "%s", txl_last_error());
		return txl_fail(st, "%s: %s", f->path, why);
	}
	if ((st = vocab_load(m)) != TXL_OK)
		return st;

	/* The running-text bytes of every token, once, for streaming. */
	m->pieces = calloc((size_t)m->hp.n_token, sizeof *m->pieces);
	if (!m->pieces)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int id = 0; id < m->hp.n_token; id++) {
		int n = piece_bytes(m, id, buf, sizeof buf);
		if (n < 0)
			return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer piece %d "
					"is invalid or too long", f->path, id);
		total += (size_t)n;
	}
	if (total > UINT32_MAX)
		return txl_fail(TXL_ERR_FORMAT, "%s: tokenizer too large",
				f->path);
	m->piece_bytes = malloc(total + 1);
	if (!m->piece_bytes)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	total = 0;
	for (int id = 0; id < m->hp.n_token; id++) {
		int n = piece_bytes(m, id, m->piece_bytes + total, sizeof buf);
		m->pieces[id].off = (uint32_t)total;
		m->pieces[id].len = (uint32_t)n;
		total += (size_t)n;
	}
	return TXL_OK;
}

void
txl_tokenizer_free(struct txl_model *m)
{
	txl_spm_free(m->spm);
	free(m->pieces);
	free(m->piece_bytes);
	m->spm = NULL;
	m->pieces = NULL;
	m->piece_bytes = NULL;
}

struct idvec {
	int32_t *v;
	size_t n, cap;
};

static bool
idvec_reserve(struct idvec *a, size_t more)
{
	if (a->n + more <= a->cap)
		return true;
	size_t cap = (a->n + more) * 2 + 16;
	int32_t *v = cap <= INT_MAX ? realloc(a->v, cap * sizeof *v) : NULL;
	if (!v)
		return false;
	a->v = v;
	a->cap = cap;
	return true;
}

/* Append the ids of @p len bytes of one line (no '\n') to @p a. */
static int
encode_line(const struct txl_model *m, const char *s, size_t len,
	    struct idvec *a)
{
	for (;;) {
		size_t room = a->cap - a->n;
		int n = txl_spm_encode(m->spm, s, len, a->v + a->n,
				       room > INT_MAX ? INT_MAX : (int)room,
				       m->vocab.word ? TXL_SPM_UNK_PER_WORD :
				       m->vocab.newline == TXL_NL_STRIP_EOS ?
				       TXL_SPM_UNK_PER_CHAR : TXL_SPM_UNK_RUN);
		if (n == INT32_MIN)
			return -1;
		if (n >= 0) {
			a->n += (size_t)n;
			return 0;
		}
		if (!idvec_reserve(a, (size_t)-n)) {
			txl_fail(TXL_ERR_NOMEM, "out of memory");
			return -1;
		}
	}
}

/* The bytes of the character at s[0 .. n) if Python's str.isspace() holds
 * for it (what str.strip() strips), else 0. */
static size_t
py_space(const unsigned char *s, size_t n)
{
	uint32_t c;
	size_t k;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return (s[0] >= 0x09 && s[0] <= 0x0d) || s[0] == ' ' ||
			(s[0] >= 0x1c && s[0] <= 0x1f);
	k = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 1;
	if (k == 1 || k > n)
		return 0;
	c = s[0] & (0x7f >> k);
	for (size_t i = 1; i < k; i++)
		c = c << 6 | (s[i] & 0x3f);
	return c == 0x85 || c == 0xa0 || c == 0x1680 ||
		(c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
		c == 0x202f || c == 0x205f || c == 0x3000 ? k : 0;
}

/* [*a, *b) of s stripped at both ends as str.strip() strips. */
static void
py_strip(const char *s, size_t *a, size_t *b)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t k;

	while (*a < *b && (k = py_space(u + *a, *b - *a)))
		*a += k;
	while (*b > *a) {
		size_t c = *b - 1;

		while (c > *a && (u[c] & 0xc0) == 0x80 && *b - c < 4)
			c--;
		if (py_space(u + c, *b - c) != *b - c)
			break;
		*b = c;
	}
}

/* An original vocabulary's tokenization: line by line, with the ends of
 * lines as the dataset had them.  With strip_eos (dwdb's encode_file) a
 * whole line is stripped and, unless empty, ends with <eos>; the text
 * after the last newline is read as it is (a prompt). */
static int
tokenize_lines(const struct txl_model *m, const char *text, size_t len,
	       int32_t *ids, int n_max)
{
	const struct txl_vocab *v = &m->vocab;
	struct idvec a = { 0 };
	size_t i = 0;
	int rc = INT32_MIN;

	while (i < len) {
		const char *nl = v->newline == TXL_NL_TEXT ? NULL :
			memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;

		if (nl && v->newline == TXL_NL_STRIP_EOS) {
			size_t from = i, to = end;

			py_strip(text, &from, &to);
			if (from == to) {
				i = end + 1;
				continue;
			}
			if (!idvec_reserve(&a, 1)) {
				txl_fail(TXL_ERR_NOMEM, "out of memory");
				goto out;
			}
			if (encode_line(m, text + from, to - from, &a) < 0)
				goto out;
			if (!idvec_reserve(&a, 1)) {
				txl_fail(TXL_ERR_NOMEM, "out of memory");
				goto out;
			}
			a.v[a.n++] = v->eos;
			i = end + 1;
			continue;
		}
		if (!idvec_reserve(&a, 2)) {
			txl_fail(TXL_ERR_NOMEM, "out of memory");
			goto out;
		}
		if (v->newline == TXL_NL_DOUBLE_EOS)
			a.v[a.n++] = v->eos;
		if (encode_line(m, text + i, end - i, &a) < 0)
			goto out;
		if (nl && (v->newline == TXL_NL_EOS ||
			   v->newline == TXL_NL_DOUBLE_EOS)) {
			if (!idvec_reserve(&a, 1)) {
				txl_fail(TXL_ERR_NOMEM, "out of memory");
				goto out;
			}
			a.v[a.n++] = v->eos;
		}
		i = end + 1;
	}
	if (a.n > INT_MAX) {
		txl_fail(TXL_ERR_INVALID, "text too long to tokenize");
		goto out;
	}
	for (size_t k = 0; k < a.n; k++)
		if (a.v[k] < 0 || a.v[k] >= m->hp.n_token) {
			txl_fail(TXL_ERR_INVALID, "the text holds a symbol the "
				 "model's vocabulary lacks (it has no unknown "
				 "symbol)");
			goto out;
		}
	rc = (int)a.n;
	if (rc > n_max)
		rc = -rc;
	else if (rc > 0)
		memcpy(ids, a.v, a.n * sizeof *ids);
out:
	free(a.v);
	return rc;
}

int
txl_tokenize(const struct txl_model *m, const char *text, size_t len,
	     int32_t *ids, int n_max)
{
	if (!m || (!text && len > 0) || n_max < 0 || (!ids && n_max > 0)) {
		txl_fail(TXL_ERR_INVALID, "txl_tokenize: %s", !m ? "no model"
			 : !text && len ? "NULL text" : "no room for ids");
		return INT32_MIN;
	}
	if (m->vocab.newline == TXL_NL_TEXT && !m->vocab.no_unk &&
	    !m->vocab.word)
		return txl_spm_encode(m->spm, text, len, ids, n_max,
				      TXL_SPM_UNK_RUN);
	return tokenize_lines(m, text, len, ids, n_max);
}

int
txl_token_piece(const struct txl_model *m, int32_t id, char *buf, size_t cap)
{
	if (id < 0 || id >= m->hp.n_token)
		return INT32_MIN;
	const struct txl_piece *p = &m->pieces[id];
	if (p->len > cap)
		return -(int)p->len;
	memcpy(buf, m->piece_bytes + p->off, p->len);
	return (int)p->len;
}

/* The pieces joined: words by a space, lines by a newline (no space at
 * the start of a line, no <S> that opens one). */
static int
detokenize_pieces(const struct txl_model *m, const int32_t *ids, int n,
		  char *buf, size_t cap)
{
	size_t len = 0;
	bool line_start = true;

	for (int i = 0; i < n; i++) {
		const struct txl_piece *p = &m->pieces[ids[i]];
		const char *s = m->piece_bytes + p->off;
		size_t k = p->len;

		if (line_start && ids[i] == m->vocab.eos &&
		    m->vocab.newline == TXL_NL_DOUBLE_EOS)
			continue;
		if (line_start && m->vocab.word && k && s[0] == ' ') {
			s++;
			k--;
		}
		if (len + k < cap)
			memcpy(buf + len, s, k);
		len += k;
		if (len > INT_MAX - 1)
			return INT32_MIN;
		if (k)
			line_start = s[k - 1] == '\n';
	}
	if (len + 1 > cap)
		return -(int)(len + 1);
	buf[len] = '\0';
	return (int)len;
}

int
txl_detokenize(const struct txl_model *m, const int32_t *ids, int n,
	       char *buf, size_t cap)
{
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= m->hp.n_token)
			return INT32_MIN;
	if (m->vocab.newline == TXL_NL_TEXT && !m->vocab.word)
		return txl_spm_decode(m->spm, ids, n, buf, cap);
	return detokenize_pieces(m, ids, n, buf, cap);
}

/* <eos> of wt103 and ptb is a newline, not the end of a text: such a model
 * has no end-of-sequence token, and a text starts after an <eos>. */
int32_t
txl_token_bos(const struct txl_model *m)
{
	if (m->vocab.eos >= 0)
		return m->vocab.eos;
	return m->vocab.newline == TXL_NL_TEXT ? txl_spm_bos_id(m->spm) : -1;
}

int32_t
txl_token_eos(const struct txl_model *m)
{
	if (m->vocab.newline == TXL_NL_DOUBLE_EOS ||
	    m->vocab.newline == TXL_NL_STRIP_EOS)
		return m->vocab.eos;
	return m->vocab.newline == TXL_NL_TEXT ? txl_spm_eos_id(m->spm) : -1;
}

int32_t
txl_token_unk(const struct txl_model *m)
{
	return m->vocab.no_unk ? -1 : txl_spm_unk_id(m->spm);
}
