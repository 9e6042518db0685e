/* SPDX-License-Identifier: MIT */
/*
 * fuzz-state.c - libFuzzer harness of txl_session_load() (memory state
 * files, txl-state.c).
 *
 * The model is fixed: TXL_FUZZ_STATE_MODEL names a valid model file
 * (tests/fuzz/make-seeds.py writes one with the seeds, which are states
 * that txlgen saved for it; of d_head 32, so that every kv_type can hold
 * its memory).  Each input is loaded twice into a session with mem_len 8,
 * seg_len 4, whose kv_type (F32, F16, BF16, Q8_0, Q4_0) is the first byte
 * of the input's checksum modulo 5 (the second load recomputes the
 * checksum anyway), so that the states of each type are loaded into
 * sessions of every type:
 *   1. as it is;
 *   2. with the model's fingerprint written into the header and the
 *      trailing checksum recomputed, so that mutations reach what lies
 *      behind those two checks.
 * A rejected file must leave the session as it was (fill, n_past) and
 * come with a one-line error naming the file; a loaded one must give a
 * fill within mem_len and evaluate.  The header layout and the checksum
 * are the library's own (txl-state.h, txl-hash.h), so that this harness
 * follows the format when it changes.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "txl-hash.h"
#include "txl-state.h"	/* the state header */

#define HDR_SIZE sizeof(struct txl_state_header)
#define FP_OFFSET offsetof(struct txl_state_header, fingerprint)

static struct fuzz_file file;
static struct txl_model *model;
static struct txl_session *sessions[5];	/* by kv_type */
static struct txl_session *sess;		/* this input's */
static uint8_t *fixed;
static size_t fixed_cap;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *path = getenv("TXL_FUZZ_STATE_MODEL");
	struct txl_session_params sp = txl_session_params_default();

	fuzz_quiet_log();
	if (!path || !*path) {
		fprintf(stderr, "fuzz-state: set TXL_FUZZ_STATE_MODEL to the "
			"model the seeds were saved with (make-seeds.py)\n");
		exit(2);
	}
	if (txl_model_load(path, &model) != TXL_OK) {
		fprintf(stderr, "fuzz-state: %s\n", txl_last_error());
		exit(2);
	}
	sp.mem_len = 8;
	sp.seg_len = 4;
	sp.n_threads = 1;
	for (int kv = 0; kv < 5; kv++) {
		sp.kv_type = kv;
		if (txl_session_new(model, &sp, &sessions[kv]) != TXL_OK) {
			fprintf(stderr, "fuzz-state: kv_type %d: %s (the model "
				"must have d_head 32)\n", kv,
				txl_last_error());
			exit(2);
		}
	}
	fuzz_file_init(&file, "txl-fuzz-state");
	return 0;
}

static void
try_load(const uint8_t *data, size_t size)
{
	const int32_t tok[3] = { 1, 2, 3 };
	int fill;
	int64_t past;
	enum txl_status st;

	/* a known state before each load: 3 tokens in memory */
	txl_session_reset(sess);
	if (txl_session_eval(sess, tok, 3, TXL_LOGITS_NONE) != TXL_OK)
		fuzz_fail("eval: %s", txl_last_error());
	fill = txl_session_mem_fill(sess);
	past = txl_session_n_past(sess);

	fuzz_file_set(&file, data, size);
	st = txl_session_load(sess, file.path);
	if (st != TXL_OK) {
		fuzz_check_error(st, file.path);
		if (txl_session_mem_fill(sess) != fill ||
		    txl_session_n_past(sess) != past)
			fuzz_fail("failed load changed the session");
		return;
	}
	fill = txl_session_mem_fill(sess);
	if (fill < 0 || fill > 8)
		fuzz_fail("loaded fill %d, mem_len 8", fill);
	/* the memory must be usable: evaluate past mem_len, every logit */
	int32_t more[12];
	for (int i = 0; i < 12; i++)
		more[i] = (int32_t)i;
	if (txl_session_eval(sess, more, 12, TXL_LOGITS_LAST) != TXL_OK)
		fuzz_fail("eval after load: %s", txl_last_error());
	if (txl_session_mem_fill(sess) != 8)
		fuzz_fail("fill %d after 12 more tokens",
			  txl_session_mem_fill(sess));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct txl_hash hs;
	uint64_t fp, sum;

	sess = sessions[size >= 8 ? data[size - 8] % 5 : 0];
	try_load(data, size);

	if (size < HDR_SIZE + 8)
		return 0;
	if (size > fixed_cap) {
		free(fixed);
		fixed = malloc(size);
		if (!fixed)
			fuzz_fail("out of memory");
		fixed_cap = size;
	}
	memcpy(fixed, data, size);
	fp = txl_model_fingerprint(model);
	memcpy(fixed + FP_OFFSET, &fp, sizeof fp);
	txl_hash_init(&hs);
	txl_hash_update(&hs, fixed, size - 8);
	sum = txl_hash_final(&hs);
	memcpy(fixed + size - 8, &sum, sizeof sum);
	try_load(fixed, size);
	return 0;
}
