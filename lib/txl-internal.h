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
#include <sys/stat.h>

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

/* Storage types.  Q8_0 is a block type (below): one F16 scale per 32
 * int8 values along the last dimension, as GGUF's block_q8_0.  Q4_0, the
 * same in 4 bits (GGUF's block_q4_0), holds weight matrices and the
 * attention's memory (--kv-type Q4_0). */
enum txl_dtype {
	TXL_F32, TXL_F16, TXL_BF16, TXL_U8, TXL_Q8_0, TXL_Q4_0, TXL_N_DTYPES
};

#define TXL_QK 32		/* values per Q8_0 and Q4_0 block */
struct txl_block_q8_0 {
	uint16_t d;		/* the scale, IEEE half */
	int8_t qs[TXL_QK];	/* value i = qs[i] * d */
};
_Static_assert(sizeof(struct txl_block_q8_0) == 34, "block_q8_0 is packed");

/* 32 values in 4 bits: value i = (q_i - 8) * d, q_i in [0, 15] the low
 * nibble of qs[i] for i < 16 and the high one of qs[i - 16] above (so a
 * load of the 16 bytes, masked and shifted, gives the values in order);
 * the layout of GGUF's block_q4_0.  txl_q4_0_scale() in txl-kernels.h. */
struct txl_block_q4_0 {
	uint16_t d;		/* the scale, IEEE half */
	uint8_t qs[TXL_QK / 2];
};
_Static_assert(sizeof(struct txl_block_q4_0) == 18, "block_q4_0 is packed");

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

/* A validated safetensors file, memory-mapped or read into memory. */
struct txl_file {
	char *path;
	const uint8_t *map;	/* the whole file, read-only */
	size_t size;
	bool owned;		/* map is a malloc'd copy (TXL_LOAD_NO_MMAP) */
	struct txl_tensor_info *tensors;
	int n_tensors;
	struct txl_meta_entry *meta;
	int n_meta;
};

/* Open @p path for reading if it is a regular file: opened with O_NONBLOCK
 * and checked with fstat() before anything can wait (a FIFO, a terminal,
 * a device or a directory is refused with a one-line error).  On success
 * *fd is the descriptor (blocking) and *sb its stat. */
enum txl_status txl_open_regular(const char *path, int *fd, struct stat *sb);
/* "a directory", "a FIFO", ... for messages about what is not a file */
const char *txl_file_kind(mode_t mode);
/* Map (or with TXL_LOAD_NO_MMAP in @p flags, read) and validate the
 * container (header length, JSON, dtypes, offsets inside the data and not
 * overlapping, sizes matching shapes). */
enum txl_status txl_file_open(const char *path, unsigned flags,
			      struct txl_file *f);
void txl_file_close(struct txl_file *f);
const struct txl_tensor_info *txl_file_find(const struct txl_file *f,
					    const char *name);
const char *txl_file_meta(const struct txl_file *f, const char *key);
/* Bytes per value; 0 for Q8_0 and Q4_0, whose size is per row
 * (txl_row_bytes). */
size_t txl_dtype_size(enum txl_dtype dt);
const char *txl_dtype_name(enum txl_dtype dt);
float txl_f16_to_f32(uint16_t h);
float txl_bf16_to_f32(uint16_t h);
/* Rounded to nearest even (NaNs stay NaNs). */
uint16_t txl_f32_to_f16(float f);
uint16_t txl_f32_to_bf16(float f);

/* ---- weights ---- */

/* The bytes of one row of K values (K a multiple of TXL_QK for the block
 * types). */
static inline size_t
txl_row_bytes(enum txl_dtype dt, int K)
{
	if (dt == TXL_Q8_0)
		return (size_t)K / TXL_QK * sizeof(struct txl_block_q8_0);
	if (dt == TXL_Q4_0)
		return (size_t)K / TXL_QK * sizeof(struct txl_block_q4_0);
	return (size_t)K * txl_dtype_size(dt);
}

/* A block type (Q8_0, Q4_0): its rows are K / TXL_QK blocks, and one
 * row of activations meets it quantized (the weights: quantize_q8 of
 * txl-kernels.h; the memory's queries: int16 for Q8_0, dot_rows_q16,
 * int8 for Q4_0, dot_rows_q4). */
static inline bool
txl_dtype_blocked(enum txl_dtype dt)
{
	return dt == TXL_Q8_0 || dt == TXL_Q4_0;
}

/* Q8_0 and Q4_0 rows interleaved by groups of TXL_IL for the
 * matrix-vector kernels (txl-kernels.h says how): the bytes of `rows`
 * rows of K values (a partial group takes a whole one), and the copy of
 * `rows` rows of a stored matrix of either type (txl-math.c).  A block of
 * a group holds the same bytes as the TXL_IL rows' blocks: their scales
 * (IEEE halves), then their values. */
#define TXL_IL 16
#define TXL_IL_SCALES (TXL_IL * 2)
#define TXL_IL_BLOCK (TXL_IL_SCALES + TXL_IL * TXL_QK)		/* Q8_0 */
#define TXL_IL_BLOCK_Q4 (TXL_IL_SCALES + TXL_IL * TXL_QK / 2)	/* Q4_0 */

static inline size_t
txl_il_bytes(enum txl_dtype dt, int rows, int K)
{
	return (size_t)((rows + TXL_IL - 1) / TXL_IL) * TXL_IL *
	       txl_row_bytes(dt, K);
}

void txl_interleave(void *dst, enum txl_dtype dt, const void *src, int rows,
		    int K);

/* A weight matrix as the file stores it, in PyTorch's (out_features,
 * in_features) row-major layout: rows x cols, in F32, F16, BF16, Q8_0 or
 * Q4_0, used in place (the mapped file) and computed as stored: the
 * kernels widen each value to float exactly and accumulate in float
 * (except Q8_0 and Q4_0 against one row of activations, which are
 * quantized for integer dot products: quantize_q8 in txl-kernels.h). */
struct txl_mat {
	enum txl_dtype dtype;
	int rows, cols;
	const void *data;	/* NULL: absent (e.g. no projection) */
	const void *il;		/* Q8_0, Q4_0: the rows interleaved for
				   matrix-vector products (txl_interleave()),
				   or NULL */
};

/* Rows [first, first + n) of w as a matrix of its own (a cluster of an
 * output layer). */
static inline struct txl_mat
txl_mat_rows(const struct txl_mat *w, int first, int n)
{
	const size_t row = txl_row_bytes(w->dtype, w->cols);

	TXL_ASSERT(first >= 0 && n >= 0 && first + n <= w->rows);
	return (struct txl_mat){ .dtype = w->dtype, .rows = n, .cols = w->cols,
				 .data = w->data ? (const uint8_t *)w->data +
					 row * (size_t)first : NULL,
				 /* interleaved groups start at multiples of
				  * TXL_IL rows */
				 .il = w->il && first % TXL_IL == 0
					 ? (const uint8_t *)w->il +
					   txl_il_bytes(w->dtype, first,
							w->cols)
					 : NULL };
}

/* The matrix as F32 floats, for the BLAS calls that need them. */
static inline const float *
txl_mat_f32(const struct txl_mat *w)
{
	TXL_ASSERT(w->dtype == TXL_F32);
	return (const float *)w->data;
}

/* ---- math (txl-math.c): the only place that calls BLAS ---- */

/* out[M, w.rows] = a[M, w.cols] . w^T (+ out if accumulate): a linear
 * layer without bias, in any weight dtype.  M == 1: the kernels of
 * txl-kernels.h, rows split over the thread pool; M > 1: sgemm (compact
 * weights widened to F32 a block of rows at a time). */
void txl_mat_mul(float *out, const float *a, int M, const struct txl_mat *w,
		 bool accumulate);
/* txl_mat_mul() with float activations whatever M: one row meets Q8_0 and
 * Q4_0 weights as more rows do (sgemm), not quantized.  For the rows of a
 * segment of several tokens that a product takes a few at a time (the
 * adaptive softmax's tail clusters: the targets that fall in each), so
 * that a segment's result does not depend on how many there are. */
void txl_mat_mul_float(float *out, const float *a, int M,
		       const struct txl_mat *w, bool accumulate);
/* Row @p row of w as floats into out[w.cols] (an embedding lookup). */
void txl_mat_row(float *out, const struct txl_mat *w, int row);
/* dst[n] = n values of dtype dt at src, as floats (exact). */
void txl_widen(float *dst, const void *src, enum txl_dtype dt, size_t n);
/* General strided form: out[M,N] (ldo) = a[M,K] (lda) . b[N,K]^T (ldb). */
void txl_gemm_nt(float *out, int ldo, const float *a, int lda,
		 const float *b, int ldb, int M, int K, int N);
/* out[M,N] (ldo) = a[M,K] (lda) . b[K,N] (ldb). */
void txl_gemm_nn(float *out, int ldo, const float *a, int lda,
		 const float *b, int ldb, int M, int K, int N);
/* The same with b in dtype dt (F32, F16 or BF16; ldb in values): the
 * attention's products with a compact K, V or R. */
void txl_gemm_nt_dt(float *out, int ldo, const float *a, int lda,
		    const void *b, enum txl_dtype dt, int ldb, int M, int K,
		    int N);
void txl_gemm_nn_dt(float *out, int ldo, const float *a, int lda,
		    const void *b, enum txl_dtype dt, int ldb, int M, int K,
		    int N);
/* dst[n] = src rounded to dt (F32, F16, BF16: nearest even; Q8_0: n a
 * multiple of TXL_QK, txl_q8_0_scale() in txl-kernels.h). */
void txl_narrow(void *dst, const float *src, enum txl_dtype dt, size_t n);
/* dst[n] in dtype dd = src[n] in dtype sd (F32, F16, BF16 or Q8_0, n a
 * multiple of TXL_QK then): widened exactly, then narrowed to dd (exact
 * if dd holds every value of sd); a copy if they are equal. */
void txl_convert(void *dst, enum txl_dtype dd, const void *src,
		 enum txl_dtype sd, size_t n);
/* out[M,N] (ldo) += alpha * a[K,M]^T (lda) . b[K,N] (ldb). */
void txl_gemm_tn_acc(float *out, int ldo, const float *a, int lda,
		     const float *b, int ldb, int M, int K, int N, float alpha);
/* x[n] = softmax(x)[n]. */
void txl_softmax_inplace(float *x, int n);
/* The element-wise functions split many rows over the pool. */
/* x[n] += b[n] for each of rows rows. */
void txl_add_bias(float *x, const float *b, int rows, int n);
/* LayerNorm over the last dimension, eps 1e-5; out may equal x. */
void txl_layer_norm(float *out, const float *x, const float *g,
		    const float *b, int rows, int n);
/* The residual: x[rows, n] += y, then LayerNorm in place if g is not
 * NULL (post-LayerNorm). */
void txl_residual(float *x, const float *y, const float *g, const float *b,
		  int rows, int n);
/* x[n] = max(x[n] + b[n], 0) for each of rows rows. */
void txl_add_bias_relu(float *x, const float *b, int rows, int n);
/* fn(ctx, lo, hi) over chunks of [0, rows) on the pool, or on the caller
 * alone when rows * cost (multiply-adds or so per row) is too little
 * for a hand-over. */
typedef void (*txl_rows_fn)(void *ctx, int lo, int hi);
void txl_pool_rows(txl_rows_fn fn, void *ctx, int rows, double cost);
/* out[n] = exp(x[n] - max) (out may be x or NULL); returns the sum,
 * added in double: the core of softmax and logsumexp. */
double txl_exp_sum(float *out, const float *x, int n, float max);
/* Threads of the kernels (the pool) and of OpenBLAS together; n <= 0:
 * one per CPU this process may run on. */
void txl_set_threads(int n);
/* The threads txl_set_threads(n) starts. */
int txl_threads_of(int n);

/* ---- the thread pool (txl-pool.c) ---- */

/* A task runs on every thread of the pool at once: ith in [0, nth), the
 * caller being thread 0.  It splits the work itself. */
typedef void (*txl_task_fn)(void *ctx, int ith, int nth);
/* Run fn on the pool's threads and return when all have finished.  If
 * another thread is using the pool, fn runs on the caller alone
 * (ith 0, nth 1). */
void txl_pool_run(txl_task_fn fn, void *ctx);
/* txl_pool_run(), or fn on the caller alone (ith 0, nth 1) for work of
 * fewer multiply-adds than a hand-over to the pool is worth
 * (txl-math.c). */
void txl_pool_run_for(txl_task_fn fn, void *ctx, double macs);
/* The number of threads txl_pool_run() uses (the caller included). */
int txl_pool_threads(void);
/* True inside a task of the pool: a product started there runs on this
 * thread alone, in one piece (the pool's threads are all busy). */
bool txl_pool_in_task(void);
/* Start or stop workers to have n threads in all (1 <= n <=
 * TXL_MAX_THREADS; beyond, the most). */
#define TXL_MAX_THREADS 256
void txl_pool_set_threads(int n);
/* CPUs this process may run on (at least 1). */
int txl_n_cpus(void);

/* ---- the model (txl-model.c) ---- */

/* One decoder layer.  The attention's input projections depend on
 * attn_type: qkv_net for the relative ones (0, 1), q_net and kv_net for
 * the vanilla MultiHeadAttn (2, 3); the rest is common to all. */
struct txl_layer {
	struct txl_mat qkv;	/* 0, 1: (3 * n_head * d_head, d_model) qkv_net */
	struct txl_mat r_net;	/* 0: (n_head * d_head, d_model) */
	struct txl_mat q_net;	/* 2, 3: (n_head * d_head, d_model) */
	struct txl_mat kv_net;	/* 2, 3: (2 * n_head * d_head, d_model) */
	struct txl_mat o_net;	/* (d_model, n_head * d_head) */
	const float *ln_attn_g, *ln_attn_b; /* (d_model) */
	struct txl_mat ff1;	/* (d_inner, d_model) pos_ff.CoreNet.0 */
	const float *ff1_b;	/* (d_inner) */
	struct txl_mat ff2;	/* (d_model, d_inner) pos_ff.CoreNet.3 */
	const float *ff2_b;	/* (d_model) */
	const float *ln_ff_g, *ln_ff_b; /* (d_model) */
	const float *r_w_bias;	/* 0, 1: (n_head, d_head) this layer's or
				   shared */
	const float *r_r_bias;	/* 0: (n_head, d_head) */
	const float *r_emb;	/* 1, 3: (max_klen, n_head, d_head) */
	const float *r_bias;	/* 1: (max_klen, n_head) */
};

/* A cluster of the adaptive input (AdaptiveEmbedding): the embedding of
 * id t in [lo, hi) is proj . table[t - lo] (just the row without a
 * projection), times sqrt(d_model).  With div_val 1 there is one cluster
 * of all ids, whatever the cutoffs. */
struct txl_emb_cluster {
	int lo, hi;
	struct txl_mat table;	/* (hi - lo, d_emb) emb_layers.i */
	struct txl_mat proj;	/* (d_model, d_emb) emb_projs.i, or absent */
};

/* A cluster of the output layer (ProjectedAdaptiveLogSoftmax): the logits
 * of ids [lo, hi) are (h . proj) . w^T + b.  Cluster 0 is the shortlist,
 * computed with the cluster logits as the head; a full softmax is cluster
 * 0 alone. */
struct txl_out_cluster {
	int lo, hi;
	struct txl_mat w;	/* (hi - lo, d_emb): out_layers.i, rows of
				   out_layers.0 with div_val 1, the input's
				   table with tie_weight */
	const float *b;		/* (hi - lo) */
	struct txl_mat proj;	/* (d_model, d_emb), absent: h as it is;
				   the input's with tie_projs */
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
	int n_emb;		/* clusters of the input: 1 with div_val 1 */
	struct txl_emb_cluster emb[TXL_MAX_CLUSTERS];
	int n_out;		/* clusters of the output: n_cutoffs + 1 */
	struct txl_out_cluster out[TXL_MAX_CLUSTERS];
	struct txl_mat cluster_w; /* (n_out - 1, d_embed) the head's logits
				     of the tail clusters, in reverse: tail
				     i is row n_out - 1 - i */
	const float *cluster_b;	/* (n_out - 1) */
	struct txl_layer *layers; /* (n_layer) */
	void *converted;	/* weights not usable in place (vectors in
				   F16 or BF16, unaligned data), owned */
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
	int stride;		/* models without memory: tokens per window */

	/* memory: positions [kv_start, kv_start + mlen) of k[l] and v[l],
	 * held in kv_dt (params.kv_type), as are the rows of r.  Head-major
	 * (txl_kv_row()): a head's keys are contiguous, so that its pass
	 * over a long memory streams rather than picking d_head values out
	 * of every n_head * d_head (two to four times faster reads of a
	 * 3,800-position memory in a micro-benchmark) */
	int cap;		/* positions per K/V buffer */
	int kv_start, mlen;
	int64_t n_past;
	enum txl_dtype kv_dt;	/* TXL_F32, TXL_F16, TXL_BF16, TXL_Q8_0 or
				   TXL_Q4_0 */
	size_t kv_row;		/* bytes of one head's row: d_head values */
	uint8_t **k, **v;	/* (n_layer) x (n_head, cap, d_head) */

	/* models without memory (attn_type 2, 3): the last seg_len tokens
	 * fed, the context of the next window */
	int32_t *window;	/* (2 * seg_len): n_window, then a group */
	int n_window;

	/* the output layer: the model's, or the session's own copy of a
	 * full softmax once txl_session_adapt() has changed it */
	float *own_out_w, *own_out_b;	/* NULL until the first adapt */
	struct txl_mat out_w;
	const float *out_b;

	float *last_h;		/* (d_model) output of the last position fed */
	bool have_last;
	/* the output rows of the last eval: the last layer's outputs, from
	 * which logits, scores and samples are computed on demand */
	float *rows;		/* (seg_len, d_model) */
	int n_logits;		/* rows held */
	bool logits_valid;	/* logits computed for them */
	const float *logits_src; /* the logits' output-layer inputs (rows of
				    `rows` or xn), for txl_session_adapt() */

	/* position tables of the relative attentions (txl-attn.c):
	 * per layer, row t is the term of distance t */
	int n_dist;		/* rows: distances 0 .. n_dist-1 */
	uint8_t **r;		/* (n_layer) x (n_head, n_dist, d_head), in
				   kv_dt */
	float **r_bias;		/* attn_type 1: (n_layer) x (n_dist, n_head) */
	int n_pos;		/* attn_type 2: rows of pos */
	float *pos;		/* attn_type 2: (n_pos, d_model) sinusoids */

	/* scratch, sized for seg_len rows */
	float *h;		/* (seg_len, d_model) the residual stream */
	float *xn;		/* (seg_len, max(d_model, d_embed)) */
	float *qkv;		/* (seg_len, 3 * n_head * d_head) */
	/* segments of more queries (txl-attn.c, attend_segment()): a slot
	 * of scratch per thread */
	float *seg;		/* seg_slots slots */
	int seg_slots;
	/* segments of a few queries (txl-attn.c, txl_attn_bytes()) */
	int klen_max;		/* the most keys a query sees */
	float *fq;		/* q + r_w_bias, q + r_r_bias per query, head */
	int16_t *fq16;		/* with a Q8_0 memory: the queries of fq (or
				   q itself) in int16, per query and head */
	float *fq16d;		/* their scales, one per TXL_QK values */
	int8_t *fq8;		/* with a Q4_0 memory: the same in int8 */
	float *fq8d;		/* their scales */
	int32_t *fq8off;	/* their offsets (struct txl_q8_act) */
	float *fsc;		/* scores per head, query: klen_max each */
	float *part;		/* per head, key block, query: the partial
				   softmax (d_head sums, max, sum of exps) */
	float *attn;		/* (seg_len, n_head * d_head) */
	float *tmp;		/* (seg_len, d_model) */
	float *ff;		/* (seg_len, d_inner) */
	float *logits;		/* (seg_len, n_token) */
	float *head;		/* adaptive softmax: (seg_len, head size) */
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
/* The same for `rows` positions of K, V or R (every head) in the
 * session's kv_dt. */
uint8_t *txl_alloc_kv(const struct txl_session *s, size_t rows);

/* Row `pos` of head h in a head-major buffer of `rows` positions. */
static inline uint8_t *
txl_kv_row(const struct txl_session *s, uint8_t *buf, int rows, int h,
	   int pos)
{
	return buf + ((size_t)h * (size_t)rows + (size_t)pos) * s->kv_row;
}
/* The storage type of a kv_type (TXL_N_DTYPES if it is none). */
enum txl_dtype txl_kv_dtype(int kv_type);

/* Attention (txl-attn.c), every attn_type behind one interface:
 *   txl_attn_has_memory whether sessions keep a memory (the relative
 *                      attentions) or recompute windows (the absolute);
 *   txl_attn_n_dist    rows of the relative-position tables (0 for the
 *                      absolute attentions);
 *   txl_attn_bytes     the bytes of txl_attn_init()'s scratch buffers;
 *   txl_attn_init      the session's position tables and scratch buffers
 *                      (once per session);
 *   txl_attn_positions absolute positions added to the input of layer l
 *                      (attn_type 2 and 3; nothing for the relative ones);
 *   txl_attn_forward   the multi-head attention of the n rows of s->h
 *                      (layer l's input) over the window rows [base, base
 *                      + mlen + n) of its K and V (whose last n rows it
 *                      computes), into s->attn, before o_net. */
bool txl_attn_has_memory(const struct txl_hparams *hp);
int txl_attn_n_dist(const struct txl_hparams *hp, int clamp_len,
		    int klen_max);
double txl_attn_bytes(const struct txl_hparams *hp, int seg_len,
		      int klen_max, int n_dist, enum txl_dtype kv_dt,
		      int threads);
enum txl_status txl_attn_init(struct txl_session *s, int klen_max);
void txl_attn_free(struct txl_session *s);
void txl_attn_positions(struct txl_session *s, int l, int n);
void txl_attn_forward(struct txl_session *s, int l, int n, int base);

/* The forward pass of one segment of n <= seg_len tokens (txl-forward.c):
 * the last layer's outputs into s->h, the memory updated. */
enum txl_status txl_forward_segment(struct txl_session *s,
				    const int32_t *tok, int n);

/* The output layer (txl-output.c). */
/* Append `rows` last-layer outputs to the rows of the output. */
void txl_output_keep(struct txl_session *s, const float *h, int rows);
/* The logits of every row held (s->logits), if not computed yet. */
void txl_output_logits(struct txl_session *s);
/* An adaptive softmax, one row at a time (for the sampler): the head's
 * log-probabilities of row r, the shortlist into short_lp[cutoffs[0]] and
 * the tail clusters into clus_lp[n_out - 1] (clus_lp[c - 1] = log p(the
 * token is in cluster c)); and the log-probabilities within cluster c of
 * row r into lp[hi - lo]. */
void txl_output_head(struct txl_session *s, int r, float *short_lp,
		     float *clus_lp);
void txl_output_tail(struct txl_session *s, int r, int c, float *lp);
/* The session's output layer back to the model's. */
void txl_output_reset(struct txl_session *s);

/* State files (txl-state.c): this header, then per layer K, then V, each
 * per head mem_len rows of d_head values in kv_type (zeros past the
 * fill); d_model floats of last_h; the txl_hash of everything before it
 * (u64).  Fields are fixed-size and naturally aligned (no padding: the
 * struct is the file's bytes); a new field goes at the end, with a new
 * version. */
#define TXL_STATE_MAGIC "TXLSTATE"
#define TXL_STATE_VERSION 3u	/* 2: the checksum is txl_hash; 3: kv_type */

struct txl_state_header {
	char magic[8];
	uint32_t version;
	uint32_t n_layer;
	uint64_t fingerprint;	/* of the model file */
	uint32_t d_model, n_head, d_head;
	uint32_t mem_len;	/* rows stored per layer, fill or not */
	uint32_t fill;		/* rows that hold memory */
	uint32_t have_last;	/* 1 if last_h is the output of the last
				   position fed */
	int64_t n_past;
	uint32_t kv_type;	/* enum txl_kv_type of the rows */
	uint32_t zero;		/* 0 (explicit padding) */
};

/* The most positions a session counts as fed (n_past stays there): 2^53,
 * 285 years at a million tokens a second, exact as a JSON number.  A
 * state file claiming more is damaged or crafted. */
#define TXL_MAX_N_PAST (INT64_C(1) << 53)

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
