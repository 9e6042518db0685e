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

/* ---- the model (txl-model.c) ---- */

struct txl_layer {
	const float *qkv_w;	/* (3 * n_head * d_head, d_model) */
	const float *r_w;	/* (n_head * d_head, d_model) r_net */
	const float *o_w;	/* (d_model, n_head * d_head) */
	const float *ln_attn_g, *ln_attn_b; /* (d_model) */
	const float *ff1_w;	/* (d_inner, d_model) */
	const float *ff1_b;	/* (d_inner) */
	const float *ff2_w;	/* (d_model, d_inner) */
	const float *ff2_b;	/* (d_model) */
	const float *ln_ff_g, *ln_ff_b; /* (d_model) */
	const float *r_w_bias;	/* (n_head, d_head) this layer's or shared */
	const float *r_r_bias;	/* (n_head, d_head) */
};

struct txl_piece {
	uint32_t off;		/* into txl_model.piece_bytes */
	uint32_t len;
};

struct txl_model {
	struct txl_file file;
	struct txl_hparams hp;
	const float *word_emb;	/* (n_token, d_embed) */
	const float *emb_proj;	/* (d_model, d_embed), NULL if d_embed == d_model */
	const float *out_w;	/* (n_token, d_embed), word_emb when tied */
	const float *out_b;	/* (n_token) */
	const float *out_proj;	/* (d_model, d_embed) or NULL */
	struct txl_layer *layers; /* (n_layer) */
	float *converted;	/* weights not usable in place (F16, BF16,
				   unaligned F32), owned */
	int64_t n_params;
	struct txl_spm *spm;
	struct txl_piece *pieces; /* (n_token) running-text bytes per token */
	char *piece_bytes;
	uint64_t fingerprint;	/* 0 until computed */
};

/* ---- math (txl-math.c): the only place that calls BLAS ---- */

/* out[M,N] = a[M,K] . w[N,K]^T (+ out if accumulate); w in PyTorch's
 * (out_features, in_features) layout.  sgemv when M == 1. */
void txl_matmul(float *out, const float *a, const float *w, int M, int K,
		int N, bool accumulate);
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

#endif /* TXL_INTERNAL_H */
