/* SPDX-License-Identifier: MIT */
/*
 * fuzz-tokenizer.c - libFuzzer harness of the tokenizer inside a model
 * file: the SentencePiece proto (untrusted: its normalisation table is
 * checked by txl-spm.cc before the library sees it) and the text it
 * tokenizes, through the whole model loader and txl_tokenize().
 *
 * Input: byte 0 selects the vocabulary metadata (0: a plain SentencePiece
 * model; 1: word level, <eos> per line; 2: word level, lm1b's <S>;
 * 3: character level, newlines dropped; 4: as 3 without an unknown
 * symbol: n_token one less than the pieces), bytes 1-4 the length L of
 * the proto (u32 little-endian), then L bytes of proto, then the text.
 * The harness wraps the proto in a tiny model (n_layer 1, d_model 8, zero
 * weights, n_token from the proto) in a memfd, loads it, and if it loads
 * tokenizes the text (two-call sizing), checks every id, decodes the ids
 * and reads every piece and the special ids.  A refused model must come
 * with a one-line error naming the file; a refused text with one line.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "txl-spm.h"

#define D 8			/* d_model = d_embed = d_inner */
#define MAX_TOKENS 100000

static struct fuzz_file file;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_log();
	fuzz_file_init(&file, "txl-fuzz-tokenizer");
	return 0;
}

struct buf {
	char *p;
	size_t n, cap;
};

static void
put(struct buf *b, const void *s, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			fuzz_fail("out of memory");
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void
putf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
putf(struct buf *b, const char *fmt, ...)
{
	char s[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, sizeof s, fmt, ap);
	va_end(ap);
	put(b, s, (size_t)n);
}

/* A safetensors model file around @p proto with @p n_token tokens. */
static void
model_file(struct buf *out, const uint8_t *proto, size_t len, int n_token,
	   int mode)
{
	static const char *const vocab[] = {
		"",
		",\"vocab_kind\":\"word\",\"vocab_newline\":\"eos\","
		"\"vocab_unk\":\"piece\"",
		",\"vocab_kind\":\"word\",\"vocab_newline\":\"double_eos\","
		"\"vocab_unk\":\"piece\"",
		",\"vocab_kind\":\"char\",\"vocab_newline\":\"drop\","
		"\"vocab_unk\":\"piece\"",
		",\"vocab_kind\":\"char\",\"vocab_newline\":\"drop\","
		"\"vocab_unk\":\"none\"",
	};
	static const struct {
		const char *name;
		int rows, cols;	/* rows -1: n_token; cols 0: 1-D */
	} t[] = {
		{ "word_emb.emb_layers.0.weight", -1, D },
		{ "crit.out_layers.0.bias", -1, 0 },
		{ "r_w_bias", 2, D / 2 },
		{ "r_r_bias", 2, D / 2 },
		{ "layers.0.dec_attn.qkv_net.weight", 3 * D, D },
		{ "layers.0.dec_attn.r_net.weight", D, D },
		{ "layers.0.dec_attn.o_net.weight", D, D },
		{ "layers.0.dec_attn.layer_norm.weight", D, 0 },
		{ "layers.0.dec_attn.layer_norm.bias", D, 0 },
		{ "layers.0.pos_ff.CoreNet.0.weight", D, D },
		{ "layers.0.pos_ff.CoreNet.0.bias", D, 0 },
		{ "layers.0.pos_ff.CoreNet.3.weight", D, D },
		{ "layers.0.pos_ff.CoreNet.3.bias", D, 0 },
		{ "layers.0.pos_ff.layer_norm.weight", D, 0 },
		{ "layers.0.pos_ff.layer_norm.bias", D, 0 },
	};
	struct buf h = { 0 };
	size_t pos = 0;
	uint64_t hlen;

	putf(&h, "{\"__metadata__\":{\"format\":\"txlgen-model\","
	     "\"format_version\":\"1\",\"n_token\":\"%d\",\"n_layer\":\"1\","
	     "\"n_head\":\"2\",\"d_model\":\"%d\",\"d_head\":\"%d\","
	     "\"d_inner\":\"%d\",\"d_embed\":\"%d\",\"div_val\":\"1\","
	     "\"cutoffs\":\"[]\",\"tie_weight\":\"true\","
	     "\"tie_projs\":\"[false]\",\"pre_lnorm\":\"false\","
	     "\"attn_type\":\"0\",\"tgt_len\":\"4\",\"ext_len\":\"0\","
	     "\"mem_len\":\"4\",\"clamp_len\":\"-1\","
	     "\"same_length\":\"false\",\"untie_r\":\"false\"%s}",
	     n_token, D, D / 2, D, D, vocab[mode]);
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		int rows = t[i].rows < 0 ? n_token : t[i].rows;
		size_t n = (size_t)rows * (t[i].cols ? (size_t)t[i].cols : 1) *
			   4;
		if (t[i].cols)
			putf(&h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
			     "\"data_offsets\":[%zu,%zu]}", t[i].name, rows,
			     t[i].cols, pos, pos + n);
		else
			putf(&h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
			     "\"data_offsets\":[%zu,%zu]}", t[i].name, rows,
			     pos, pos + n);
		pos += n;
	}
	putf(&h, ",\"tokenizer.model\":{\"dtype\":\"U8\",\"shape\":[%zu],"
	     "\"data_offsets\":[%zu,%zu]}}", len, pos, pos + len);
	hlen = h.n;
	out->n = 0;
	put(out, &hlen, 8);
	put(out, h.p, h.n);
	for (size_t i = 0; i < pos; i++)
		put(out, "", 1);
	put(out, proto, len);
	free(h.p);
}

static void
use(const struct txl_model *m, const char *text, size_t len)
{
	const struct txl_hparams *hp = txl_model_hparams(m);
	int32_t *ids;
	char piece[256], *out;
	int n, k, cap;

	for (int id = 0; id < hp->n_token; id++)
		if (txl_token_piece(m, id, piece, sizeof piece) == INT32_MIN)
			fuzz_fail("piece %d: error", id);
	/* Two-call sizing for short texts (and whenever the guess below is
	 * short); a long text is tokenized once into room for 4 ids a
	 * byte: tokenizing is half of an execution's time. */
	cap = len < 256 ? 0 : 4 * (int)len + 64;
	ids = malloc(sizeof *ids * (size_t)(cap + 1));
	if (!ids)
		fuzz_fail("out of memory");
	n = txl_tokenize(m, text, len, cap ? ids : NULL, cap);
	if (n == INT32_MIN) {
		fuzz_check_error(TXL_ERR_INVALID, NULL);
		free(ids);
		return;
	}
	if (n > 0 && cap == 0)
		fuzz_fail("txl_tokenize with no room returned %d", n);
	if (n < 0) {
		n = -n;
		free(ids);
		ids = malloc(sizeof *ids * (size_t)(n + 1));
		if (!ids)
			fuzz_fail("out of memory");
		k = txl_tokenize(m, text, len, ids, n);
		if (k != n)
			fuzz_fail("txl_tokenize: %d ids, then %d", n, k);
	}
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= hp->n_token)
			fuzz_fail("txl_tokenize: id %d, n_token %d", ids[i],
				  hp->n_token);
	k = txl_detokenize(m, ids, n, NULL, 0);
	if (k == INT32_MIN)
		fuzz_fail("txl_detokenize failed: %s", txl_last_error());
	k = k < 0 ? -k : k + 1;
	out = malloc((size_t)k);
	if (!out)
		fuzz_fail("out of memory");
	if (txl_detokenize(m, ids, n, out, (size_t)k) < 0)
		fuzz_fail("txl_detokenize with the room it asked for failed");
	free(out);
	free(ids);
}

/* A varint at b[*i..len) into *v; false if it runs past the end. */
static bool
varint(const uint8_t *b, size_t len, size_t *i, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *i < len; shift += 7) {
		uint8_t c = b[(*i)++];
		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
	}
	return false;
}

/* The number of fields 1 (ModelProto.pieces) of the message @p b; 0 if it
 * is not well-formed at its top level. */
static int
count_pieces(const uint8_t *b, size_t len)
{
	size_t i = 0;
	int n = 0;

	while (i < len) {
		uint64_t key, v;

		if (!varint(b, len, &i, &key))
			return 0;
		switch (key & 7) {
		case 0:
			if (!varint(b, len, &i, &v))
				return 0;
			break;
		case 2:
			if (!varint(b, len, &i, &v) || v > len - i)
				return 0;
			i += (size_t)v;
			n += (key >> 3) == 1 && n < INT_MAX;
			break;
		case 1:
		case 5:
			if (len - i < ((key & 7) == 1 ? 8u : 4u))
				return 0;
			i += (key & 7) == 1 ? 8 : 4;
			break;
		default:
			return 0;
		}
	}
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct buf f;
	struct txl_model *m;
	enum txl_status st;
	uint32_t len;
	int mode, n_token;

	if (size < 5)
		return 0;
	mode = data[0] % 5;
	memcpy(&len, data + 1, 4);
	if (len > size - 5)
		return -1;
	/* n_token from the proto itself (its pieces, field 1); one that does
	 * not parse is refused by the loader below, with the file's name.
	 * Counted here rather than by loading the proto twice: half of an
	 * execution's time on the large tokenizers. */
	n_token = count_pieces(data + 5, len) - (mode == 4);
	if (n_token < 1)
		n_token = 1;
	if (n_token < 1 || n_token > MAX_TOKENS)
		return -1;
	model_file(&f, data + 5, len, n_token, mode);
	fuzz_file_set(&file, f.p, f.n);
	st = txl_model_load(file.path, &m);
	if (st != TXL_OK) {
		fuzz_check_error(st, file.path);
		return 0;
	}
	if (txl_token_eos(m) >= txl_model_hparams(m)->n_token ||
	    txl_token_bos(m) >= txl_model_hparams(m)->n_token ||
	    txl_token_unk(m) >= txl_model_hparams(m)->n_token)
		fuzz_fail("a special id past n_token");
	use(m, (const char *)data + 5 + len, size - 5 - len);
	txl_model_free(m);
	return 0;
}
