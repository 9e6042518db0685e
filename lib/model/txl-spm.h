/* SPDX-License-Identifier: MIT */
/*
 * txl-spm.h - a C view of SentencePiece (C++), for libtxl's own use.
 * No exception crosses this boundary: each entry point catches them and
 * reports through the status / return value.
 */
#ifndef TXL_SPM_H
#define TXL_SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct txl_spm;

/* Parse a serialized SentencePiece model proto of @p len bytes. */
enum txl_status txl_spm_load(const void *proto, size_t len,
			     struct txl_spm **out);
void txl_spm_free(struct txl_spm *spm);

/* What a serialized model proto says of itself, read without loading it:
 * its pieces (ModelProto.pieces), trainer_spec.model_type (1 unigram,
 * 2 bpe, 3 word, 4 char; the proto's default 1) and normalizer_spec.name
 * ([name, name + name_len) inside the proto; NULL: none). */
struct txl_spm_desc {
	int n_pieces;
	int model_type;
	const char *name;
	size_t name_len;
};

/* False if the proto is malformed (its fields do not parse). */
bool txl_spm_describe(const void *proto, size_t len, struct txl_spm_desc *d);
int txl_spm_vocab_size(const struct txl_spm *spm);

/* How a run of unknown pieces, which SentencePiece merges into one, is
 * split: not at all, one unknown id per word (word models), one per
 * character (dwdb's character vocabulary). */
enum txl_spm_unk {
	TXL_SPM_UNK_RUN,
	TXL_SPM_UNK_PER_WORD,
	TXL_SPM_UNK_PER_CHAR,
};

/* Ids of @p text; count, negated count needed, or INT32_MIN on error. */
int txl_spm_encode(const struct txl_spm *spm, const char *text, size_t len,
		   int32_t *ids, int n_max, enum txl_spm_unk split_unk);

/* Decoded text of @p ids into @p buf (NUL-terminated if it fits); length,
 * negated length needed, or INT32_MIN on error. */
int txl_spm_decode(const struct txl_spm *spm, const int32_t *ids, int n,
		   char *buf, size_t cap);

/* The bytes token @p id contributes to running text; same convention. */
int txl_spm_piece_bytes(const struct txl_spm *spm, int id, char *buf,
			size_t cap);

/* The piece string of @p id as the model holds it; same convention. */
int txl_spm_piece(const struct txl_spm *spm, int id, char *buf, size_t cap);
/* Whether @p id is a control piece. */
int txl_spm_is_control(const struct txl_spm *spm, int id);

int32_t txl_spm_bos_id(const struct txl_spm *spm);
int32_t txl_spm_eos_id(const struct txl_spm *spm);
int32_t txl_spm_unk_id(const struct txl_spm *spm);

#ifdef __cplusplus
}
#endif

#endif /* TXL_SPM_H */
