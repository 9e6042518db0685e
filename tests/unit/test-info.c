/* SPDX-License-Identifier: MIT */
/*
 * test-info.c - txl_model_peek() and txl_model_describe() on the unit
 * test model, against what tests/make_random_model.py writes (its
 * make_config() defaults: 2 layers of 2 heads of 16, d_model 32, d_inner
 * 64, tgt_len and mem_len 8, the 320 pieces of the test tokenizer, a
 * unigram model with nmt_nfkc; txlfile.py's order of tensors and
 * metadata), and on hostile files: one-line errors naming the file, and
 * a header whose tensors run past the end peeked without a byte of them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "txl.h"
#include "test.h"

static const char *model_path;
static char dir[4096];

static const char *
meta(const struct txl_model_info *in, const char *key)
{
	for (int i = 0; i < in->n_meta; i++)
		if (!strcmp(in->meta[i].key, key))
			return in->meta[i].value;
	return NULL;
}

static const struct txl_tensor_desc *
tensor(const struct txl_model_info *in, const char *name)
{
	for (int i = 0; i < in->n_tensors; i++)
		if (!strcmp(in->tensors[i].name, name))
			return &in->tensors[i];
	return NULL;
}

/* The unit model as make_random_model.py wrote it. */
static void
check_unit_model(const struct txl_model_info *in)
{
	const struct txl_hparams *hp = in->hparams;
	const struct txl_tensor_desc *t;
	struct stat sb;
	uint64_t data = 0;

	CHECK(in->size >= sizeof *in);
	CHECK(!strcmp(in->path, model_path));
	CHECK(stat(model_path, &sb) == 0);
	CHECK_EQ(in->file_bytes, sb.st_size);
	CHECK(!in->truncated);
	CHECK(TXL_HAS(struct txl_hparams, hp, span_ramp));
	CHECK_EQ(hp->n_token, 320);
	CHECK_EQ(hp->n_layer, 2);
	CHECK_EQ(hp->n_head, 2);
	CHECK_EQ(hp->d_head, 16);
	CHECK_EQ(hp->d_model, 32);
	CHECK_EQ(hp->d_inner, 64);
	CHECK_EQ(hp->d_embed, 32);
	CHECK_EQ(hp->tgt_len, 8);
	CHECK_EQ(hp->mem_len, 8);
	CHECK_EQ(hp->attn_type, TXL_ATTN_REL_PARTIAL);
	CHECK_EQ(hp->n_cutoffs, 0);

	/* the metadata in the file's order, not sorted */
	CHECK(in->n_meta > 10);
	CHECK(!strcmp(in->meta[0].key, "format"));
	CHECK(!strcmp(in->meta[0].value, "txlgen-model"));
	CHECK(!strcmp(in->meta[1].key, "format_version"));
	CHECK(!strcmp(in->meta[2].key, "n_token"));
	CHECK(!strcmp(meta(in, "n_token"), "320"));
	CHECK(!strcmp(meta(in, "d_inner"), "64"));
	CHECK(meta(in, "no such key") == NULL);

	/* the tensors in the file's order: the input first, the tokenizer
	 * last, padding left out */
	CHECK_EQ(in->n_tensors, 4 + 2 * 11 + 1);
	CHECK(!strcmp(in->tensors[0].name, "word_emb.emb_layers.0.weight"));
	CHECK(!strcmp(in->tensors[in->n_tensors - 1].name, "tokenizer.model"));
	t = &in->tensors[0];
	CHECK_EQ(t->dtype, TXL_F32);
	CHECK_EQ(t->ndim, 2);
	CHECK_EQ(t->shape[0], 320);
	CHECK_EQ(t->shape[1], 32);
	CHECK_EQ(t->bytes, 320 * 32 * 4);
	t = tensor(in, "layers.1.pos_ff.CoreNet.0.weight");
	CHECK(t && t->ndim == 2 && t->shape[0] == 64 && t->shape[1] == 32);
	CHECK_EQ(t->bytes, 64 * 32 * 4);
	t = tensor(in, "tokenizer.model");
	CHECK(t && t->dtype == TXL_U8 && t->ndim == 1);
	CHECK_EQ(t->bytes, t->shape[0]);
	for (int i = 0; i < in->n_tensors; i++) {
		CHECK(in->tensors[i].offset + in->tensors[i].bytes <=
		      in->file_bytes);
		CHECK(strncmp(in->tensors[i].name, "__pad__.", 8) != 0);
		data += in->tensors[i].bytes;
	}
	CHECK(data < in->file_bytes);

	/* the tokenizer */
	CHECK_EQ(in->n_pieces, 320);
	CHECK(in->tokenizer_type && !strcmp(in->tokenizer_type, "unigram"));
	CHECK(in->normalizer && !strcmp(in->normalizer, "nmt_nfkc"));
}

static void
test_peek(void)
{
	struct txl_model_info *in = NULL;

	CHECK_EQ(txl_model_peek(model_path, &in), TXL_OK);
	check_unit_model(in);
	txl_model_info_free(in);
	txl_model_info_free(NULL);
}

/* A loaded model says the same as its file's peek. */
static void
test_describe(void)
{
	struct txl_model *m;
	struct txl_model_info *a, *b;

	CHECK_EQ(txl_model_load(model_path, &m), TXL_OK);
	CHECK_EQ(txl_model_describe(m, &a), TXL_OK);
	check_unit_model(a);
	CHECK_EQ(txl_model_peek(model_path, &b), TXL_OK);
	CHECK_EQ(a->n_meta, b->n_meta);
	for (int i = 0; i < a->n_meta; i++) {
		CHECK(!strcmp(a->meta[i].key, b->meta[i].key));
		CHECK(!strcmp(a->meta[i].value, b->meta[i].value));
	}
	CHECK_EQ(a->n_tensors, b->n_tensors);
	for (int i = 0; i < a->n_tensors; i++) {
		CHECK(!strcmp(a->tensors[i].name, b->tensors[i].name));
		CHECK_EQ(a->tensors[i].offset, b->tensors[i].offset);
		CHECK_EQ(a->tensors[i].bytes, b->tensors[i].bytes);
	}
	CHECK_EQ(a->hparams->n_token, txl_model_hparams(m)->n_token);
	CHECK(!strcmp(txl_model_meta(m, "n_token"), meta(b, "n_token")));
	txl_model_info_free(b);
	txl_model_info_free(a);
	txl_model_free(m);
}

static void
write_file(const char *path, const void *a, size_t na, const void *b,
	   size_t nb)
{
	FILE *f = fopen(path, "wb");

	CHECK(f);
	CHECK(fwrite(a, 1, na, f) == na);
	CHECK(nb == 0 || fwrite(b, 1, nb, f) == nb);
	CHECK(fclose(f) == 0);
}

/* @p path is refused with @p st, one line naming it and saying @p why. */
static void
refused(const char *path, enum txl_status st, const char *why)
{
	struct txl_model_info *in = (struct txl_model_info *)&in;
	const char *e;

	CHECK_EQ(txl_model_peek(path, &in), st);
	CHECK(in == NULL);
	e = txl_last_error();
	if (!strstr(e, path) || !strstr(e, why) || strchr(e, '\n')) {
		fprintf(stderr, "FAIL: %s: '%s'\n", path, e);
		exit(1);
	}
}

static void
test_hostile(void)
{
	char path[4200], *head;
	uint64_t n;
	FILE *f;

	/* a header length past the file, and past any file */
	snprintf(path, sizeof path, "%s/huge.bin", dir);
	n = UINT64_C(1) << 60;
	write_file(path, &n, 8, "{}", 2);
	refused(path, TXL_ERR_FORMAT, "does not fit");
	/* more than a header may have, in a file that holds it */
	snprintf(path, sizeof path, "%s/big.bin", dir);
	n = (16u << 20) + 1;
	head = calloc(1, (size_t)n);
	CHECK(head);
	head[0] = '{';
	write_file(path, &n, 8, head, (size_t)n);
	free(head);
	refused(path, TXL_ERR_FORMAT, "more than");
	/* not JSON; not an object; a tensor of a bad dtype */
	snprintf(path, sizeof path, "%s/text.bin", dir);
	write_file(path, "hello, world", 12, NULL, 0);
	refused(path, TXL_ERR_FORMAT, "not a txlgen model file");
	snprintf(path, sizeof path, "%s/array.bin", dir);
	n = 2;
	write_file(path, &n, 8, "[]", 2);
	refused(path, TXL_ERR_FORMAT, "not a JSON object");
	snprintf(path, sizeof path, "%s/dtype.bin", dir);
	{
		static const char h[] = "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],"
			"\"data_offsets\":[0,8]}}";

		n = sizeof h - 1;
		write_file(path, &n, 8, h, (size_t)n);
	}
	refused(path, TXL_ERR_FORMAT, "unsupported dtype");
	/* a container with no model in it */
	snprintf(path, sizeof path, "%s/empty.bin", dir);
	n = 2;
	write_file(path, &n, 8, "{}", 2);
	refused(path, TXL_ERR_FORMAT, "not a txlgen model");
	/* what is not a file */
	refused(dir, TXL_ERR_IO, "a directory");
	snprintf(path, sizeof path, "%s/none.bin", dir);
	refused(path, TXL_ERR_IO, "No such file");
	CHECK_EQ(txl_model_peek(NULL, &(struct txl_model_info *){ 0 }),
		 TXL_ERR_INVALID);
	CHECK_EQ(txl_model_peek(model_path, NULL), TXL_ERR_INVALID);
	CHECK_EQ(txl_model_describe(NULL, &(struct txl_model_info *){ 0 }),
		 TXL_ERR_INVALID);

	/* the model's header and 64 bytes of its data: a peek reads no
	 * weight and says what the file lacks; a load refuses it */
	f = fopen(model_path, "rb");
	CHECK(f && fread(&n, 8, 1, f) == 1 && n < (1u << 20));
	head = calloc(1, (size_t)n + 64);
	CHECK(head && fread(head, 1, (size_t)n, f) == n);
	fclose(f);
	snprintf(path, sizeof path, "%s/cut.bin", dir);
	write_file(path, &n, 8, head, (size_t)n + 64);
	free(head);
	{
		struct txl_model_info *in;
		struct txl_model *m;

		CHECK_EQ(txl_model_peek(path, &in), TXL_OK);
		CHECK(in->truncated);
		CHECK_EQ(in->file_bytes, 8 + n + 64);
		CHECK_EQ(in->hparams->n_token, 320);
		/* its tokenizer is not there to read */
		CHECK_EQ(in->n_pieces, -1);
		CHECK(in->tokenizer_type == NULL && in->normalizer == NULL);
		txl_model_info_free(in);
		CHECK(txl_model_load(path, &m) == TXL_ERR_FORMAT && !m);
		CHECK(strstr(txl_last_error(), "beyond the end of the file"));
	}
}

int
main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: test-info MODEL DIR\n");
		return TEST_SKIP;
	}
	model_path = argv[1];
	snprintf(dir, sizeof dir, "%s/info-test", argv[2]);
	mkdir(dir, 0700);
	RUN(test_peek);
	RUN(test_describe);
	RUN(test_hostile);
	return 0;
}
