/* SPDX-License-Identifier: MIT */
/*
 * fuzz-model.c - libFuzzer harness of the model loader (txl-file.c,
 * txl-params.c, txl-bind.c, the SentencePiece shim).
 *
 * The input is a whole model file.  It is written to a memfd and loaded
 * with txl_model_load_flags() (mapped, or read into memory when the size
 * is odd); a rejected file must come with a one-line error
 * naming the file.  A model that loads is used as the CLI would: its
 * accessors and tokenizer, then a small session (mem_len <= 4, seg_len 2,
 * so that executions stay fast) that evaluates two tokens with every
 * logit read, more tokens through the memory's wrap-around, and a
 * sampler on the logits (whatever weights the file holds, NaN and inf
 * included, a sampled id must be a valid id).  The memory's kv_type is
 * (size / 2) % 5 (F32, F16, BF16, Q8_0, Q4_0; F32 where d_head is not a
 * multiple of 32): make-seeds.py pads the header of its d_head 32 seeds
 * to give each one of them.
 *
 * TXL_FUZZ_MODEL_DEFAULTS=1 makes the session take the model's own
 * mem_len/tgt_len/clamp_len/same_length as txlgen does, to look for
 * accepted files that make a session ask for absurd memory (run it with
 * -malloc_limit_mb).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"

static struct fuzz_file file;
static bool model_defaults;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *e = getenv("TXL_FUZZ_MODEL_DEFAULTS");

	fuzz_quiet_log();
	fuzz_file_init(&file, "txl-fuzz-model");
	model_defaults = e && *e && strcmp(e, "0") != 0;
	return 0;
}

static void
check_token(const struct txl_hparams *hp, int32_t tok, const char *what)
{
	if (tok < 0 || tok >= hp->n_token)
		fuzz_fail("%s returned token %d, n_token %d", what, (int)tok,
			  hp->n_token);
}

static void
use_sampler(const struct txl_hparams *hp, const float *logits, float temp)
{
	struct txl_sampler_params p = txl_sampler_params_default();
	struct txl_sampler *smp;
	float lp;

	p.temp = temp;
	p.repeat_penalty = 1.3f;
	smp = txl_sampler_new(&p, hp->n_token);
	if (!smp)
		fuzz_fail("txl_sampler_new failed: %s", txl_last_error());
	txl_sampler_accept(smp, 0);
	check_token(hp, txl_sampler_sample(smp, logits, &lp), "sampler");
	check_token(hp, txl_sampler_sample(smp, logits, NULL), "sampler");
	txl_sampler_free(smp);
}

static void
use_tokenizer(const struct txl_model *m, const struct txl_hparams *hp)
{
	static const char text[] = "Hello, world!  \xc3\xa9t\xc3\xa9 \xff\xfe 42\n";
	int32_t ids[256];
	char buf[1024];
	int n;

	n = txl_tokenize(m, text, sizeof text - 1, ids, 256);
	if (n == INT32_MIN)
		fuzz_check_error(TXL_ERR_INVALID, NULL);
	if (n > 256)
		fuzz_fail("txl_tokenize wrote %d ids into 256", n);
	for (int i = 0; i < n; i++) {
		check_token(hp, ids[i], "txl_tokenize");
		(void)txl_token_piece(m, ids[i], buf, sizeof buf);
	}
	if (n >= 0)
		(void)txl_detokenize(m, ids, n, buf, sizeof buf);
	/* every piece, through the table built at load time */
	for (int32_t id = 0; id < hp->n_token && id < 4096; id++) {
		int len = txl_token_piece(m, id, buf, sizeof buf);
		if (len < 0 && len != INT32_MIN && -len <= (int)sizeof buf)
			fuzz_fail("token_piece asked for %d bytes, had %zu",
				  -len, sizeof buf);
	}
	(void)txl_token_bos(m);
	(void)txl_token_eos(m);
	(void)txl_token_unk(m);
	(void)txl_detokenize(m, ids, 0, buf, sizeof buf);
}

static void
use_session(const struct txl_model *m, const struct txl_hparams *hp,
	    const uint8_t *data, size_t size)
{
	struct txl_session_params sp = txl_session_params_default();
	struct txl_session *s;
	enum txl_status st;
	int32_t tok[20];
	const float *lg;
	volatile float sink = 0;

	sp.n_threads = 1;
	sp.kv_type = (int)(size / 2 % 5);
	if ((sp.kv_type == TXL_KV_Q8_0 || sp.kv_type == TXL_KV_Q4_0) &&
	    hp->d_head % 32 != 0)
		sp.kv_type = TXL_KV_F32;
	if (!model_defaults) {
		sp.mem_len = hp->mem_len < 4 ? hp->mem_len : 4;
		sp.seg_len = 2;
		if (hp->clamp_len > 8)
			sp.clamp_len = 8;
	}
	st = txl_session_new(m, &sp, &s);
	if (st != TXL_OK) {
		fuzz_check_error(st, NULL);
		return;
	}
	for (int i = 0; i < 20; i++)
		tok[i] = (int32_t)((size > (size_t)i ? data[size - 1 - i] : i) *
				   2654435761u % (uint32_t)hp->n_token);
	st = txl_session_eval(s, tok, 2, TXL_LOGITS_ALL);
	if (st != TXL_OK)
		fuzz_fail("eval of 2 tokens: %s", txl_last_error());
	lg = txl_session_logits(s);
	for (size_t i = 0; i < 2 * (size_t)hp->n_token; i++)
		sink += lg[i];
	use_sampler(hp, lg + hp->n_token, 0.8f);
	use_sampler(hp, lg, 0.0f);
	/* past the end of the K/V buffers, so that the memory moves back */
	st = txl_session_eval(s, tok, 20, TXL_LOGITS_LAST);
	if (st != TXL_OK)
		fuzz_fail("eval of 20 tokens: %s", txl_last_error());
	use_sampler(hp, txl_session_logits(s), 1.0f);
	if (txl_session_mem_fill(s) != (sp.mem_len < 0 ? hp->mem_len :
					sp.mem_len) && !model_defaults)
		fuzz_fail("mem_fill %d after 22 tokens", txl_session_mem_fill(s));
	(void)sink;
	txl_session_free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct txl_model *m = NULL;
	const struct txl_hparams *hp;
	enum txl_status st;

	fuzz_file_set(&file, data, size);
	/* mapped, or read into memory (TXL_LOAD_NO_MMAP) for inputs of odd
	 * size: both ways of getting the bytes in, the same checks after */
	st = txl_model_load_flags(file.path, size & 1 ? TXL_LOAD_NO_MMAP : 0,
				  &m);
	if (st != TXL_OK) {
		if (m)
			fuzz_fail("failed load left *out set");
		fuzz_check_error(st, file.path);
		return 0;
	}
	hp = txl_model_hparams(m);
	if (hp->n_token < 1 || hp->n_layer < 1 || hp->d_model < 1)
		fuzz_fail("accepted hyperparameters out of range");
	(void)txl_model_n_params(m);
	(void)txl_model_meta(m, "description");
	(void)txl_model_fingerprint(m);
	use_tokenizer(m, hp);
	use_session(m, hp, data, size);
	txl_model_free(m);
	return 0;
}
