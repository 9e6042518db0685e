/* SPDX-License-Identifier: MIT */
/*
 * test-spm.c - the tokenizer of a model file, as libtxl exposes it, for
 * test_spm.py to compare with SentencePiece's own Python module.
 *
 *   test-spm MODEL < HEXLINES
 *
 * prints "bos eos unk n_token", then one line per vocabulary id with the
 * hex bytes of txl_token_piece() ("-" if it returns an error), then for
 * each input line (the hex bytes of a text, so that any bytes can be fed)
 * "ids<TAB>hex(txl_detokenize(ids))", or "error<TAB>message" where
 * txl_tokenize() refuses the text.  It checks the two-call sizing
 * conventions itself and exits 1 with a message on the first violation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txl.h"

static int failed;

#define EXPECT(cond, ...)                                                \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "test-spm: %s:%d: ", __FILE__,   \
				__LINE__);                               \
			fprintf(stderr, __VA_ARGS__);                    \
			fputc('\n', stderr);                             \
			failed = 1;                                      \
		}                                                        \
	} while (0)

static void
put_hex(const char *buf, int n)
{
	for (int i = 0; i < n; i++)
		printf("%02x", (unsigned char)buf[i]);
}

static int
unhex(const char *s, char *out)
{
	int n = 0;
	unsigned v;

	while (s[0] && s[1] && sscanf(s, "%2x", &v) == 1) {
		out[n++] = (char)v;
		s += 2;
	}
	return n;
}

static void
pieces(const struct txl_model *model, int n_token)
{
	char buf[256];

	for (int32_t id = 0; id < n_token; id++) {
		int n = txl_token_piece(model, id, buf, sizeof buf);
		if (n < 0) {
			puts("-");
			continue;
		}
		if (n > 0) {
			/* too small a buffer: the negated length needed */
			char small[1];
			EXPECT(txl_token_piece(model, id, small, 0) == -n,
			       "piece %d: size query", id);
			(void)small;
		}
		put_hex(buf, n);
		putchar('\n');
	}
	EXPECT(txl_token_piece(model, n_token, buf, sizeof buf) == INT32_MIN,
	       "piece n_token is not an error");
	EXPECT(txl_token_piece(model, -1, buf, sizeof buf) == INT32_MIN,
	       "piece -1 is not an error");
}

static void
line(const struct txl_model *model, const char *text, int len)
{
	int n = txl_tokenize(model, text, (size_t)len, NULL, 0);
	int32_t *ids;
	char *out;
	int m;

	if (n == INT32_MIN) {
		/* refused (a symbol the vocabulary lacks): say why */
		printf("error\t%s\n", txl_last_error());
		return;
	}
	EXPECT(n <= 0, "tokenize with n_max 0 returned %d", n);
	n = -n;
	ids = malloc(sizeof *ids * (size_t)(n + 1));
	EXPECT(txl_tokenize(model, text, (size_t)len, ids, n) == n,
	       "tokenize with exactly the room needed");
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", ids[i]);
	putchar('\t');

	/* size query: the negated room needed (NUL included), or the length
	 * if even nothing fits in nothing */
	m = txl_detokenize(model, ids, n, NULL, 0);
	EXPECT(m != INT32_MIN, "detokenize size query failed");
	m = m < 0 ? -m : m + 1;
	out = malloc((size_t)m + 1);
	{
		int k = txl_detokenize(model, ids, n, out, (size_t)m);
		EXPECT(k >= 0 && k < m, "detokenize returned %d (room %d)", k, m);
		if (k >= 0 && k < m) {
			EXPECT(out[k] == '\0', "detokenize: no NUL");
			put_hex(out, k);
		}
	}
	putchar('\n');
	free(out);
	free(ids);
}

int
main(int argc, char **argv)
{
	struct txl_model *model;
	const struct txl_hparams *hp;
	static char buf[1 << 16], text[1 << 15];

	if (argc != 2) {
		fprintf(stderr, "usage: test-spm MODEL < HEXLINES\n");
		return 2;
	}
	if (txl_model_load(argv[1], &model) != TXL_OK) {
		fprintf(stderr, "test-spm: %s\n", txl_last_error());
		return 1;
	}
	hp = txl_model_hparams(model);
	printf("%d %d %d %d\n", txl_token_bos(model), txl_token_eos(model),
	       txl_token_unk(model), hp->n_token);
	pieces(model, hp->n_token);
	while (fgets(buf, sizeof buf, stdin)) {
		buf[strcspn(buf, "\n")] = '\0';
		line(model, text, unhex(buf, text));
	}
	txl_model_free(model);
	return failed;
}
