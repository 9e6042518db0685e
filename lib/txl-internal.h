/* SPDX-License-Identifier: MIT */
/*
 * txl-internal.h - what the files of libtxl share; not installed.
 */
#ifndef TXL_INTERNAL_H
#define TXL_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txl.h"
#include "txl-spm.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libtxl reads little-endian files in place: big-endian hosts unsupported"
#endif

/* ---- errors and logging (txl-log.c) ---- */

/* Record the thread's last error (printf-style) and pass it to the log
 * callback at TXL_LOG_DEBUG; returns @p status for `return txl_fail(...)`. */
enum txl_status txl_fail(enum txl_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void txl_log(enum txl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Broken internal invariant: print file:line and abort. */
#define TXL_ASSERT(x)                                                        \
	do {                                                                 \
		if (!(x))                                                    \
			txl_abort(__FILE__, __LINE__, #x);                   \
	} while (0)
_Noreturn void txl_abort(const char *file, int line, const char *what);

/* ---- the model file (txl-file.c) ---- */

enum txl_dtype { TXL_F32, TXL_F16, TXL_BF16, TXL_U8 };

#define TXL_MAX_DIMS 4

struct txl_tensor_info {
	char *name;
	enum txl_dtype dtype;
	int ndim;
	int64_t shape[TXL_MAX_DIMS];
	uint64_t begin, end;	/* byte offsets in the file (absolute) */
	bool used;		/* bound to a weight by the model */
};

struct txl_meta_entry {
	char *key, *value;
};

/* A validated, memory-mapped safetensors file. */
struct txl_file {
	char *path;
	const uint8_t *map;	/* the whole file, read-only */
	size_t size;
	struct txl_tensor_info *tensors;
	int n_tensors;
	struct txl_meta_entry *meta;
	int n_meta;
};

/* Map and validate the container (header length, JSON, dtypes, offsets
 * inside the data and not overlapping, sizes matching shapes). */
enum txl_status txl_file_open(const char *path, struct txl_file *f);
void txl_file_close(struct txl_file *f);
const struct txl_tensor_info *txl_file_find(const struct txl_file *f,
					    const char *name);
const char *txl_file_meta(const struct txl_file *f, const char *key);
size_t txl_dtype_size(enum txl_dtype dt);
float txl_f16_to_f32(uint16_t h);
float txl_bf16_to_f32(uint16_t h);

/* ---- weights ---- */

/* A weight matrix as the file stores it, in PyTorch's (out_features,
 * in_features) row-major layout: rows x cols.  Only TXL_F32 so far; the
 * loader converts other dtypes to it. */
struct txl_mat {
	enum txl_dtype dtype;
	int rows, cols;
	const void *data;	/* NULL: absent (e.g. no projection) */
};

/* The matrix as F32 floats, for the BLAS calls that need them. */
static inline const float *
txl_mat_f32(const struct txl_mat *w)
{
	TXL_ASSERT(w->dtype == TXL_F32);
	return (const float *)w->data;
}

/* ---- math (txl-math.c): the only place that calls BLAS ---- */

/* out[M, w.rows] = a[M, w.cols] . w^T (+ out if accumulate): a linear
 * layer without bias.  sgemv when M == 1. */
void txl_mat_mul(float *out, const float *a, int M, const struct txl_mat *w,
		 bool accumulate);
/* Row @p row of w as floats into out[w.cols] (an embedding lookup). */
void txl_mat_row(float *out, const struct txl_mat *w, int row);
/* General strided form: out[M,N] (ldo) = a[M,K] (lda) . b[N,K]^T (ldb). */
void txl_gemm_nt(float *out, int ldo, const float *a, int lda,
		 const float *b, int ldb, int M, int K, int N);
/* out[M,N] (ldo) = a[M,K] (lda) . b[K,N] (ldb). */
void txl_gemm_nn(float *out, int ldo, const float *a, int lda,
		 const float *b, int ldb, int M, int K, int N);
/* out[M,N] (ldo) += alpha * a[K,M]^T (lda) . b[K,N] (ldb). */
void txl_gemm_tn_acc(float *out, int ldo, const float *a, int lda,
		     const float *b, int ldb, int M, int K, int N, float alpha);
/* x[n] = softmax(x)[n]. */
void txl_softmax_inplace(float *x, int n);
/* x[n] += b[n] for each of rows rows. */
void txl_add_bias(float *x, const float *b, int rows, int n);
/* LayerNorm over the last dimension, eps 1e-5; out may equal x. */
void txl_layer_norm(float *out, const float *x, const float *g,
		    const float *b, int rows, int n);
/* x[n] = max(x[n] + b[n], 0) for each of rows rows. */
void txl_add_bias_relu(float *x, const float *b, int rows, int n);
void txl_set_threads(int n);

/* ---- the model (txl-model.c) ---- */

struct txl_layer {
	struct txl_mat qkv;	/* (3 * n_head * d_head, d_model) qkv_net */
	struct txl_mat r_net;	/* (n_head * d_head, d_model) */
	struct txl_mat o_net;	/* (d_model, n_head * d_head) */
	const float *ln_attn_g, *ln_attn_b; /* (d_model) */
	struct txl_mat ff1;	/* (d_inner, d_model) pos_ff.CoreNet.0 */
	const float *ff1_b;	/* (d_inner) */
	struct txl_mat ff2;	/* (d_model, d_inner) pos_ff.CoreNet.3 */
	const float *ff2_b;	/* (d_model) */
	const float *ln_ff_g, *ln_ff_b; /* (d_model) */
	const float *r_w_bias;	/* (n_head, d_head) this layer's or shared */
	const float *r_r_bias;	/* (n_head, d_head) */
};

struct txl_piece {
	uint32_t off;		/* into txl_model.piece_bytes */
	uint32_t len;
};

/* What a newline is to a tokenizer made from an original vocabulary
 * (metadata vocab_newline, models/vocab.py). */
enum txl_newline {
	TXL_NL_TEXT,		/* a SentencePiece model's: ordinary text */
	TXL_NL_EOS,		/* each line ends with <eos> (wt103, ptb) */
	TXL_NL_DOUBLE_EOS,	/* <S> before and after each line (lm1b) */
	TXL_NL_DROP,		/* nothing (enwik8, text8) */
};

struct txl_vocab {
	bool word;		/* word level: a space before each word */
	enum txl_newline newline;
	bool no_unk;		/* no unknown symbol: ids >= n_token are
				   symbols the model lacks */
	int32_t eos;		/* the end-of-line symbol, or -1 */
};

struct txl_model {
	struct txl_file file;
	struct txl_hparams hp;
	struct txl_mat word_emb; /* (n_token, d_embed) */
	struct txl_mat emb_proj; /* (d_model, d_embed); absent if d_embed ==
				    d_model */
	struct txl_mat out_w;	/* (n_token, d_embed), word_emb when tied */
	const float *out_b;	/* (n_token) */
	struct txl_mat out_proj; /* (d_model, d_embed) or absent */
	struct txl_layer *layers; /* (n_layer) */
	float *converted;	/* weights not usable in place (F16, BF16,
				   unaligned F32), owned */
	int64_t n_params;
	struct txl_spm *spm;
	struct txl_vocab vocab;
	struct txl_piece *pieces; /* (n_token) running-text bytes per token */
	char *piece_bytes;
	uint64_t fingerprint;	/* 0 until computed */
};

/* ---- the tokenizer (txl-tokenizer.c) ---- */

/* Load the SentencePiece model of the file's "tokenizer.model" tensor and
 * the running-text bytes of every token. */
enum txl_status txl_tokenizer_load(struct txl_model *m);
void txl_tokenizer_free(struct txl_model *m);

/* ---- sessions: life (txl-session.c), forward pass (txl-forward.c),
 * attention (txl-attn.c), output layer (txl-output.c), state files
 * (txl-state.c) ---- */

struct txl_session {
	const struct txl_model *model;
	struct txl_session_params params;	/* resolved */
	int mem_len, seg_len, clamp_len;
	bool same_length;

	/* memory: positions [kv_start, kv_start + mlen) of k[l] and v[l] */
	int cap;		/* positions per K/V buffer */
	int kv_start, mlen;
	int64_t n_past;
	float **k, **v;		/* (n_layer) x (cap, n_head * d_head) */

	/* the output layer: the model's, or the session's own copy once
	 * txl_session_adapt() has changed it */
	float *own_out_w, *own_out_b;	/* NULL until the first adapt */
	struct txl_mat out_w;
	const float *out_b;

	float *last_h;		/* (d_model) output of the last position fed */
	bool have_last;
	int n_logits;		/* rows of logits valid now */
	const float *logits_src; /* their output-layer inputs (rows of h or
				    xn), for txl_session_adapt() */

	int n_dist;		/* rows of r: distances 0 .. n_dist-1 */
	float **r;		/* (n_layer) x (n_dist, n_head * d_head) */

	/* scratch, sized for seg_len rows */
	float *h;		/* (seg_len, d_model) the residual stream */
	float *xn;		/* (seg_len, max(d_model, d_embed)) */
	float *qkv;		/* (seg_len, 3 * n_head * d_head) */
	float *qw, *qr;		/* (seg_len, d_head) q + r_w_bias, q + r_r_bias */
	float *score;		/* (seg_len, mem_len + seg_len) */
	float *bd;		/* (seg_len, n_dist) */
	float *attn;		/* (seg_len, n_head * d_head) */
	float *tmp;		/* (seg_len, d_model) */
	float *ff;		/* (seg_len, d_inner) */
	float *logits;		/* (seg_len, n_token) */
};

/* true if the session's abort callback asks to stop */
static inline bool
txl_aborted(const struct txl_session *s)
{
	return s->params.abort_cb && s->params.abort_cb(s->params.abort_data);
}

/* 64-byte aligned floats, not cleared (pages are touched only when used);
 * n may be 0. */
float *txl_alloc_floats(size_t n);

/* Attention (txl-attn.c): the session's relative-position tables, and the
 * multi-head attention of the n rows of s->qkv (queries) over the window
 * rows [base, base + mlen + n) of layer l's K and V, into s->attn. */
enum txl_status txl_attn_init(struct txl_session *s);
void txl_attn_free(struct txl_session *s);
void txl_attn_forward(struct txl_session *s, int l, int n, int base);

/* The forward pass of one segment of n <= seg_len tokens (txl-forward.c):
 * updates the memory, fills the logits asked for. */
enum txl_status txl_forward_segment(struct txl_session *s,
				    const int32_t *tok, int n,
				    enum txl_logits want);

/* Logits of `rows` rows of s->h starting at row `first` (txl-output.c). */
void txl_output_logits(struct txl_session *s, int first, int rows);

/* The session's output layer back to the model's (txl-output.c). */
void txl_output_reset(struct txl_session *s);

/* A streaming 64-bit FNV-1a over 8-byte little-endian words (txl-state.c):
 * the content hash of model fingerprints and state-file checksums.  The
 * result depends only on the bytes, not on how they are split. */
struct txl_hash {
	uint64_t h;
	uint8_t buf[8];
	unsigned nbuf;
};
void txl_hash_init(struct txl_hash *hs);
void txl_hash_update(struct txl_hash *hs, const void *p, size_t n);
uint64_t txl_hash_final(const struct txl_hash *hs);

#endif /* TXL_INTERNAL_H */
