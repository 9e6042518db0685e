/* SPDX-License-Identifier: MIT */
/*
 * txl.h - libtxl: Transformer-XL inference on the CPU, with the numbers
 * of the original PyTorch code (kimiyoung/transformer-xl).  The one
 * installed header (with txl-dtype-enum.h, which it includes).
 *
 * Objects:
 *   txl_model    a model file's weights and tokenizer; read-only once
 *                loaded: any number of sessions and threads may use one.
 *   txl_session  one stream of text and its key/value memory (of fixed
 *                size); one thread at a time.
 *   txl_batch    scratch to step several sessions of a model together;
 *                one thread at a time.
 *   txl_sampler  picks the next token, with its own seeded generator.
 *   txl_model_info  what a model file holds (tensors, metadata,
 *                hyperparameters, tokenizer), peeked from its header
 *                without loading it, or described from a loaded model.
 *
 * Threads: the process has one pool of compute threads, which every
 * session shares, as OpenBLAS's one thread count per process is;
 * n_threads of the last txl_session_new() or txl_session_set_params()
 * sets its size.  Sessions evaluated from several threads at once are
 * each correct, but while one holds the pool the others compute on their
 * own thread.
 *
 * ABI: txl_version() is libtxl's own version; the soname changes only
 * with a change that breaks callers, and each function is bound to the
 * version node of the release that added it (txl.sym).  Structs grow
 * only at their end: those a caller passes carry their size (set by
 * their *_default()), so that the library reads no more than the caller
 * has; txl_hparams carries the size the library filled (TXL_HAS()).
 * Enum values never change.
 *
 * Errors: functions return enum txl_status or a documented special value
 * (NULL, -1, INT32_MIN); txl_last_error() then says why, in one line, in
 * the same thread.  A NULL pointer where one is needed, or a value
 * outside its enum, is such an error, never a crash.  The library never
 * writes to stdout, never exits, and writes to stderr only through the
 * log callback (by default: warnings and errors).
 */
#ifndef TXL_H
#define TXL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TXL_API __attribute__((visibility("default")))
#else
#define TXL_API
#endif

/** libtxl's version, "MAJOR.MINOR.PATCH" (not txlgen's). */
TXL_API const char *txl_version(void);

/**
 * The kernel set in use: "scalar", "avx2", "avxvnni", "avx512",
 * "avx512vnni" or "avx512bf16": the best this CPU runs, at most the one
 * $TXL_ISA names.
 */
TXL_API const char *txl_isa_name(void);

/** The BLAS library and the kernels it chose for this CPU, as OpenBLAS
 *  describes them ($OPENBLAS_CORETYPE overrides its choice). */
TXL_API const char *txl_blas_info(void);

/**
 * Whether @p p, a @p type (a struct of this header with a `size` member),
 * has @p member: always for a struct from a *_default() of the library in
 * use; for the hparams of an older library, not for newer fields.
 */
#define TXL_HAS(type, p, member)                                             \
	(offsetof(type, member) + sizeof(((type *)0)->member) <= (p)->size)

/* ------------------------------------------------------------------ */
/* Status codes and logging                                            */

enum txl_status {
	TXL_OK = 0,
	TXL_ERR_IO = -1,      /**< a file could not be opened, read or written */
	TXL_ERR_FORMAT = -2,  /**< a model or state file is malformed */
	TXL_ERR_NOMEM = -3,   /**< out of memory */
	TXL_ERR_INVALID = -4, /**< an argument or setting is out of range */
	TXL_ERR_NUMERIC = -5, /**< the model computed NaN or inf logits */
	TXL_ABORTED = 1,      /**< the abort callback asked to stop */
};

/** A short constant description of @p status. */
TXL_API const char *txl_status_str(enum txl_status status);

/**
 * The last error of this thread, one line naming the file or argument and
 * what is wrong; "" if none.  Valid until the thread's next libtxl call.
 */
TXL_API const char *txl_last_error(void);

enum txl_log_level {
	TXL_LOG_ERROR = 0,
	TXL_LOG_WARN = 1,
	TXL_LOG_INFO = 2,
	TXL_LOG_DEBUG = 3,
};

typedef void (*txl_log_fn)(enum txl_log_level level, const char *msg,
			   void *user_data);

/**
 * Send the library's messages up to @p max_level to @p fn (NULL: the
 * default, warnings and errors to stderr).  Not thread-safe: call it
 * before creating models.
 */
TXL_API void txl_log_set(txl_log_fn fn, void *user_data,
			 enum txl_log_level max_level);

/* ------------------------------------------------------------------ */
/* Models                                                              */

struct txl_model;

/**
 * Load the model file (txlgen-model(5)) at regular file @p path,
 * memory-mapped and validated whole; free *@p out with txl_model_free().
 * On failure *@p out is NULL.  The file stays mapped while the model
 * lives: replace it by a rename, never in place (a shrunk file raises
 * SIGBUS), or load with TXL_LOAD_NO_MMAP.
 */
TXL_API enum txl_status txl_model_load(const char *path,
				       struct txl_model **out);

/** Read the file into a private copy (on huge pages where the kernel
 *  gives them) instead of mapping it: safe from changes to the file, not
 *  shared between processes.  A flag of txl_model_load_flags(). */
#define TXL_LOAD_NO_MMAP 0x1u

/** txl_model_load() with @p flags; an unknown flag is TXL_ERR_INVALID. */
TXL_API enum txl_status txl_model_load_flags(const char *path,
					     unsigned flags,
					     struct txl_model **out);

/** Free a model (NULL: nothing), after every session of it. */
TXL_API void txl_model_free(struct txl_model *model);

/** Clusters of an adaptive softmax at most (cutoffs + 1). */
#define TXL_MAX_CLUSTERS 16

/**
 * A model's attention, its attn_type as MemTransformerLM names it
 * (txlgen-model(5)).  The absolute ones (2, 3) have no memory: sessions
 * recompute a window of the last seg_len tokens
 * (txl_session_params.stride).  An adaptive-span head reads the values of
 * its span (txl_model_span()) and scores the keys of its layer's window
 * (txl_model_window()), as the original's softmax does; its memory starts
 * as zero states.
 */
enum txl_attn_type {
	TXL_ATTN_REL_PARTIAL = 0,   /* Transformer-XL's relative positions */
	TXL_ATTN_REL_LEARNED = 1,   /* learned relative positions (Shaw) */
	TXL_ATTN_ABS_SINUSOID = 2,  /* the vanilla Transformer */
	TXL_ATTN_ABS_LEARNED = 3,   /* ... with learned absolute positions */
	TXL_ATTN_ADAPTIVE_SPAN = 4, /* Sukhbaatar et al. 2019 */
};

/** Hyperparameters, as MemTransformerLM.__init__ names them. */
struct txl_hparams {
	size_t size;     /* bytes of this struct the library filled */
	int n_token;     /* vocabulary size */
	int n_layer;
	int n_head;
	int d_model;
	int d_head;
	int d_inner;
	int d_embed;     /* d_model unless a projection is used */
	int tgt_len;     /* training segment length: the default seg_len */
	int mem_len;     /* training memory length: the default mem_len */
	int clamp_len;   /* 0: no clamping */
	bool same_length;
	bool pre_lnorm;
	bool tie_weight;
	bool untie_r;    /* per-layer r_w_bias and r_r_bias */
	enum txl_attn_type attn_type;
	int max_klen;    /* rows of the position tables of REL_LEARNED and
			    ABS_LEARNED (tgt_len + ext_len + mem_len at
			    training); 0 for the others */
	/* Adaptive input and softmax: cluster 0 is the ids [0, cutoffs[0]),
	 * cluster i [cutoffs[i-1], cutoffs[i]), the last ends at n_token;
	 * n_cutoffs 0: a full softmax.  With div_val > 1 cluster i has
	 * embeddings of d_embed / div_val^i and projections of its own; with
	 * div_val 1 one table serves all. */
	int div_val;
	int n_cutoffs;
	int cutoffs[TXL_MAX_CLUSTERS - 1];
	bool tie_projs[TXL_MAX_CLUSTERS]; /* cluster i's output projection is
					     its input's */
	/* ADAPTIVE_SPAN (0 for the others), since 1.1 (TXL_HAS): the
	 * longest span a head could learn and the soft mask's ramp. */
	int attn_span;
	int span_ramp;
};

/** The model's hyperparameters (a pointer into the model). */
TXL_API const struct txl_hparams *txl_model_hparams(
	const struct txl_model *model);

/** The model's weights, tied ones counted once. */
TXL_API int64_t txl_model_n_params(const struct txl_model *model);

/** The value of @p key in the file's "__metadata__", or NULL; valid as
 *  long as the model. */
TXL_API const char *txl_model_meta(const struct txl_model *model,
				   const char *key);

/** A 64-bit fingerprint of the file's contents, never 0 (state files
 *  record it). */
TXL_API uint64_t txl_model_fingerprint(const struct txl_model *model);

/** Whether the model's sessions keep a memory (the relative attentions)
 *  or recompute a window (the absolute ones; txl_session_eval()). */
TXL_API bool txl_model_has_memory(const struct txl_model *model);

/** What attention @p type is, in a few words; NULL for none. */
TXL_API const char *txl_attn_type_name(enum txl_attn_type type);

/**
 * The span of head @p head of layer @p layer of an adaptive-span model:
 * a token attends to the 1 .. span positions before it (where its soft
 * mask is not 0).  -1 for another attention or a layer or head out of
 * range.  Since 1.1.
 */
TXL_API int txl_model_span(const struct txl_model *model, int layer,
			   int head);

/**
 * The window of head @p head of layer @p layer of an adaptive-span model:
 * the 1 .. window positions before a token whose keys take part in the
 * head's softmax (the layer's memory as the original code trims it),
 * the same for every head of the layer, and what a
 * session's memory keeps for it (at most mem_len); 0 for a head of span
 * 0.  The head's weights are those of its span divided by their sum +
 * 1e-8.  -1 as txl_model_span().  Since 1.2.
 */
TXL_API int txl_model_window(const struct txl_model *model, int layer,
			     int head);

/**
 * The longest window of layer @p layer's heads: the positions of the
 * layer a session's memory keeps (at most mem_len).  -1 as
 * txl_model_window().  Since 1.4.
 */
TXL_API int txl_model_layer_window(const struct txl_model *model, int layer);

/**
 * The heads' spans in a memory of @p mem_len positions (each at most
 * mem_len; TXL_FROM_MODEL: as they are): the longest, returned, and
 * their mean in *@p mean (may be NULL).  -1 for another attention, or
 * mem_len < 0 but TXL_FROM_MODEL.  Since 1.4.
 */
TXL_API int txl_model_spans(const struct txl_model *model, int mem_len,
			    double *mean);

/* ------------------------------------------------------------------ */
/* Tokenizer: the SentencePiece model stored in the file               */

/**
 * Encode the @p len bytes of UTF-8 @p text.
 * @return the number of ids written to @p ids (at most @p n_max); the
 * negated number needed if @p n_max is too small; INT32_MIN on error
 * (invalid UTF-8 is not one: it is mapped as other bytes are).
 */
TXL_API int txl_tokenize(const struct txl_model *model, const char *text,
			 size_t len, int32_t *ids, int n_max);

/**
 * The bytes token @p id stands for in running text ("▁" as a space, a
 * byte token <0xNN> as that byte, a control token as nothing); possibly
 * part of a UTF-8 character.
 * @return the length written to @p buf (no NUL); the negated length
 * needed if @p cap is too small; INT32_MIN for an invalid @p id.
 */
TXL_API int txl_token_piece(const struct txl_model *model, int32_t id,
			    char *buf, size_t cap);

/**
 * Decode @p n ids as SentencePiece does (the text's leading space
 * dropped); returns as txl_token_piece(), with a NUL when it fits.
 */
TXL_API int txl_detokenize(const struct txl_model *model, const int32_t *ids,
			   int n, char *buf, size_t cap);

/** Special token ids; -1 for none.  A word-level model whose <eos> ends
 *  each line (WikiText, PTB) has no end-of-sequence token: its <eos> is
 *  a newline, which txl_token_bos() returns. */
TXL_API int32_t txl_token_bos(const struct txl_model *model);
TXL_API int32_t txl_token_eos(const struct txl_model *model);
TXL_API int32_t txl_token_unk(const struct txl_model *model);

/* ------------------------------------------------------------------ */
/* Sessions                                                            */

struct txl_session;

/** Polled between segments and layers; true stops the evaluation. */
typedef bool (*txl_abort_fn)(void *data);

#define TXL_FROM_MODEL (-1) /* a setting that takes the model's value */

/* The ranges the library accepts. */
#define TXL_MEM_LEN_MAX (1 << 20)       /* mem_len 0 .. this */
#define TXL_SEG_LEN_MAX (1 << 16)       /* seg_len 1 .. this */
#define TXL_REPEAT_LAST_N_MAX (1 << 20) /* repeat_last_n 0 .. this */
#define TXL_ADAPT_LR_MAX 1e6            /* txl_session_adapt() lr 0 .. this */

/*
 * enum txl_dtype, the storage types of tensors and memory (kv_type):
 * TXL_F32 0, TXL_F16 1, TXL_BF16 2, TXL_Q8_0 3, TXL_Q4_0 4, TXL_U8 5,
 * TXL_Q4_K 6, ...; TXL_N_DTYPES grows, so enumerate with txl_dtype_name().
 * F16 and BF16 round to nearest even; Q8_0 and Q4_0 are GGUF's blocks of
 * 32 in 8 and 4 bits, Q4_K blocks of 128 in 4.5 bits (txlgen-model(5));
 * as memory a d_head that is a multiple of the block.  Narrower memory is
 * faster and less exact: measure (txlgen --score).  U8 is bytes.
 */
#include "txl-dtype-enum.h"

/* libtxl 1.0's names of the memory's types: the same values. */
#define txl_kv_type txl_dtype
#define TXL_KV_F32 TXL_F32
#define TXL_KV_F16 TXL_F16
#define TXL_KV_BF16 TXL_BF16
#define TXL_KV_Q8_0 TXL_Q8_0
#define TXL_KV_Q4_0 TXL_Q4_0

/** The name of type @p dt as model files spell it ("Q8_0"); NULL for
 *  none.  Since 1.2. */
TXL_API const char *txl_dtype_name(enum txl_dtype dt);

/** The type named @p name, in any case; -1 for none.  Since 1.2. */
TXL_API int txl_dtype_from_name(const char *name);

/* What a type can hold (txl_dtype_uses()). */
#define TXL_DTYPE_WEIGHTS 1u /* a model's weight matrices */
#define TXL_DTYPE_MEMORY 2u  /* a session's memory (kv_type) */

/** TXL_DTYPE_* of @p dt; 0 for U8 and for a value of no type.  Since
 *  1.2. */
TXL_API unsigned txl_dtype_uses(enum txl_dtype dt);

/* ------------------------------------------------------------------ */
/* What a file holds, without loading it                               */

/** A tensor of the file, as its header describes it. */
struct txl_tensor_desc {
	const char *name;
	enum txl_dtype dtype;
	int ndim;
	int64_t shape[4];
	uint64_t offset;  /* its first byte in the file */
	uint64_t bytes;
};

/** A "__metadata__" entry of the file. */
struct txl_meta_pair {
	const char *key, *value;
};

/**
 * What a model file holds: its header's tensors and metadata, its
 * hyperparameters and what its SentencePiece model says of itself, all
 * checked as a load checks them.  Since 1.6.
 */
struct txl_model_info {
	size_t size;               /* bytes of this struct the library filled */
	const char *path;
	uint64_t file_bytes;       /* the file's size */
	bool truncated;            /* the tensors end beyond the file (peeked:
				      a load refuses it) */
	const struct txl_hparams *hparams;
	int n_meta;                /* "__metadata__", in the file's order */
	const struct txl_meta_pair *meta;
	int n_tensors;             /* in the file's order, padding aside */
	const struct txl_tensor_desc *tensors;
	/* the tensor "tokenizer.model": its pieces, trainer_spec.model_type
	 * ("unigram", "bpe", "word", "char") and normalizer_spec.name; -1
	 * and NULL where it does not say (a model's always does) */
	int n_pieces;
	const char *tokenizer_type;
	const char *normalizer;
};

/**
 * The info of the model file at @p path from its header and tokenizer
 * alone (some kilobytes, whatever the weights; no fingerprint), with the
 * checks of a load on them; free *@p out with txl_model_info_free().
 * The weights are not read: a load may still refuse what a peek accepts.
 * @return TXL_OK, or a load's status and txl_last_error() (*@p out NULL).
 * Since 1.6.
 */
TXL_API enum txl_status txl_model_peek(const char *path,
				       struct txl_model_info **out);

/**
 * The same info of a loaded @p model, from what its load read (no file
 * access); its strings are the model's: free it before the model.
 * Since 1.6.
 */
TXL_API enum txl_status txl_model_describe(const struct txl_model *model,
					   struct txl_model_info **out);

/** Free an info (NULL: nothing).  Since 1.6. */
TXL_API void txl_model_info_free(struct txl_model_info *info);

/*
 * How the products of a segment (two or more tokens: scoring, prompts,
 * windows) compute with weight matrices stored in BF16.  F32, the
 * default: each weight widened exactly, the function of the stored
 * weights.  BF16: the activations rounded to BF16 (nearest even, within
 * 2^-8) and the products summed in float, with vdpbf16ps on a CPU with
 * AVX512_BF16 (txl_compute_native()), elsewhere widened and no faster.
 * Other weights, one token at a time (generation) and position tables
 * compute in float either way.  Since 1.1.
 */
enum txl_compute {
	TXL_COMPUTE_F32 = 0,
	TXL_COMPUTE_BF16 = 1,
};

/**
 * 1 if this CPU computes @p compute with instructions of its own (F32
 * always; BF16 with AVX512_BF16, unless $TXL_ISA caps the kernels below
 * avx512bf16), 0 if it is widened; -1 for no enum txl_compute.
 * Since 1.1.
 */
TXL_API int txl_compute_native(enum txl_compute compute);

/**
 * TXL_OK if sessions of @p model can compute as @p compute; else
 * TXL_ERR_INVALID: no enum txl_compute, or BF16 with a model that stores
 * no weight matrix in BF16.  Since 1.1.
 */
TXL_API enum txl_status txl_model_check_compute(
	const struct txl_model *model, enum txl_compute compute);

/*
 * How a session's memory starts, and starts again at txl_session_reset():
 * EMPTY, no positions (the original PyTorch evaluation: the first token
 * attends to itself only), or ZEROS, mem_len zero states whose position
 * scores still take part in each softmax (the TensorFlow code's and
 * Hugging Face's init_mems: the same scores from the first token;
 * txl_session_mem_fill() is always mem_len).  An adaptive-span model's
 * memory is always ZEROS; a pre-LayerNorm model refuses ZEROS (its zero
 * states' keys and values are not 0).  Since 1.2.
 */
enum txl_mem_init {
	TXL_MEM_EMPTY = 0,
	TXL_MEM_ZEROS = 1,
};

struct txl_session_params {
	size_t size;       /* set by txl_session_params_default() */
	int mem_len;       /* positions kept; TXL_FROM_MODEL (adaptive span:
			      its longest span; a head keeps at most its
			      span) */
	int seg_len;       /* tokens per forward pass; TXL_FROM_MODEL */
	int clamp_len;     /* relative distances clamped to this, 0: none;
			      TXL_FROM_MODEL */
	int same_length;   /* 0 off, 1 on; TXL_FROM_MODEL */
	int n_threads;     /* threads of the process's pool and OpenBLAS (see
			      Threads above); 0: one per CPU.  libtxl's
			      threads block every signal */
	txl_abort_fn abort_cb; /* NULL: never abort */
	void *abort_data;  /* passed to abort_cb */
	int stride;        /* no memory (attn_type 2, 3): tokens predicted
			      per window, 1 .. seg_len, TXL_FROM_MODEL 1
			      (txl_session_eval()); TXL_FROM_MODEL for the
			      others */
	enum txl_dtype kv_type; /* the memory's: a TXL_DTYPE_MEMORY type;
				   default TXL_F32 */
	int mem_init;      /* enum txl_mem_init; TXL_FROM_MODEL: EMPTY, an
			      adaptive-span model's ZEROS.  Since 1.2 */
};

/** Every setting from the model, no abort callback. */
TXL_API struct txl_session_params txl_session_params_default(void);

/**
 * The settings a session of @p model with @p in (NULL: the defaults)
 * would have, TXL_FROM_MODEL resolved, into *@p out (which must come from
 * txl_session_params_default()).
 * @return TXL_OK; TXL_ERR_INVALID for settings txl_session_new() refuses
 * (*out unchanged).
 */
TXL_API enum txl_status txl_session_params_resolve(
	const struct txl_model *model, const struct txl_session_params *in,
	struct txl_session_params *out);

/**
 * Create a session of @p model, which must outlive it, with its memory
 * as mem_init says.  @p params (NULL: the defaults) must come from
 * txl_session_params_default().  Settings may exceed the training ones.
 * TXL_ERR_INVALID for: a params of another size, same_length with
 * mem_len 0, a mem_len other than TXL_FROM_MODEL or 0 for attn_type 2
 * and 3, a seg_len beyond max_klen for attn_type 3.
 */
TXL_API enum txl_status txl_session_new(const struct txl_model *model,
					const struct txl_session_params *params,
					struct txl_session **out);

/**
 * The bytes a session of @p model with @p params (NULL: the defaults)
 * allocates, whatever the text; -1 for settings txl_session_new()
 * refuses.  txl_session_adapt() adds a copy of the output layer.
 */
TXL_API int64_t txl_session_bytes(const struct txl_model *model,
				  const struct txl_session_params *params);

/**
 * How many of a text's last tokens, fed @p n_at_once (1 .. seg_len) at a
 * time, determine what a session of @p model with @p params (NULL: the
 * defaults) holds after it: reading that many, from where a whole read
 * starts a segment (txl_session_skip() the rest), gives the very bytes of
 * a whole read (same settings, compute and threads), so a long prompt
 * costs this many tokens.  n_layer x (mem_len + n_at_once - 1) + 1;
 * adaptive span: each layer's longest span (at most mem_len) for
 * mem_len; without memory: seg_len.  Since 1.2.
 * @return the tokens; -1 for refused settings or @p n_at_once.
 */
TXL_API int64_t txl_session_receptive_field(
	const struct txl_model *model, const struct txl_session_params *params,
	int n_at_once);

/**
 * Where a session of @p model with @p params must start reading a text of
 * @p n tokens fed at once to hold what a whole read holds, bit for bit:
 * the start of the segment of the first token the end depends on (0: the
 * first segment; skip the tokens before with txl_session_skip()).  From
 * there, at most receptive_field(seg_len) + seg_len - 1 tokens and at
 * least n_layer x mem_len + 1; without memory, the last seg_len from the
 * start of their group of stride.  Since 1.2.
 * @return 0 .. n; -1 for refused settings or n < 0.
 */
TXL_API int64_t txl_session_tail_start(const struct txl_model *model,
				       const struct txl_session_params *params,
				       int64_t n);

/** Free a session; NULL: nothing. */
TXL_API void txl_session_free(struct txl_session *session);

/** The settings in effect, TXL_FROM_MODEL resolved. */
TXL_API struct txl_session_params txl_session_get_params(
	const struct txl_session *session);

/**
 * Change a live session's settings for what is fed from now on, keeping
 * its memory (its last mem_len positions) and n_past; the output becomes
 * the one row that predicts the next token (none if nothing was fed).
 * The checks of txl_session_new(); on error the session is unchanged.
 */
TXL_API enum txl_status txl_session_set_params(
	struct txl_session *session, const struct txl_session_params *params);

/**
 * Make @p dst continue @p src's text as if fed the same tokens (memory
 * converted to dst's kv_type and mem_len, n_past, window, adapted output
 * layer, the next token's prediction), so that a text read once goes on
 * in several sessions; dst keeps its settings, @p src is unchanged.
 * Since 1.1.
 * @return TXL_OK; TXL_ERR_INVALID for sessions of different models;
 * TXL_ERR_NOMEM (dst unchanged); TXL_ABORTED if dst's abort callback
 * fired while a model without memory recomputed the prediction (dst then
 * holds the text with n_logits 0).
 */
TXL_API enum txl_status txl_session_copy(struct txl_session *dst,
					 const struct txl_session *src);

/** Forget the text: the memory starts again as mem_init says. */
TXL_API void txl_session_reset(struct txl_session *session);

/**
 * How the session's products of segments compute from now on (a new
 * session: TXL_COMPUTE_F32); memory and logits stay.  TXL_ERR_INVALID
 * (unchanged) as txl_model_check_compute().  Since 1.1.
 */
TXL_API enum txl_status txl_session_set_compute(struct txl_session *session,
						enum txl_compute compute);
/** The session's compute.  Since 1.1. */
TXL_API enum txl_compute txl_session_get_compute(
	const struct txl_session *session);

enum txl_logits {
	TXL_LOGITS_NONE = 0, /* only update the memory (priming) */
	TXL_LOGITS_LAST = 1, /* the last token's */
	TXL_LOGITS_ALL = 2,  /* every token's (n <= seg_len) */
};

/**
 * Feed @p n tokens in segments of at most seg_len, each attending to the
 * memory the one before left, as the original evaluation; row i of the
 * output predicts the token after tokens[i].  Without memory (attn_type
 * 2, 3): groups of `stride` tokens from tokens[0], each computed with up
 * to seg_len - stride tokens fed before it (stride 1: the vanilla
 * Transformer's window per token; seg_len: eval.py with mem_len 0).
 * @return TXL_OK; TXL_ABORTED (the memory holds every segment completed);
 * TXL_ERR_INVALID for a bad id, TXL_LOGITS_ALL with n > seg_len, or a
 * @p want of no enum txl_logits.
 */
TXL_API enum txl_status txl_session_eval(struct txl_session *session,
					 const int32_t *tokens, int n,
					 enum txl_logits want);

/**
 * Count @p n tokens as fed without computing them: n_past grows by n, the
 * rest is forgotten as by txl_session_reset() (an adapted output layer
 * stays).  Skip up to txl_session_tail_start() (length unknown: a
 * multiple of seg_len, or of stride, leaving receptive_field(seg_len)
 * tokens), feed the rest, and the session holds what a whole read gives,
 * bit for bit, without the skipped tokens' scores.  Since 1.2.
 * @return TXL_OK; TXL_ERR_INVALID (unchanged) for n < 1, NULL or a bad id.
 */
TXL_API enum txl_status txl_session_skip(struct txl_session *session,
					 const int32_t *tokens, int n);

/**
 * The logits, float[rows][n_token], of the last eval (one row for
 * TXL_LOGITS_LAST, n for TXL_LOGITS_ALL; after a load or set_params one
 * row, for the next token): unnormalised with a full softmax,
 * log-probabilities with an adaptive one.  Computed at the first call
 * after an eval, so that score and sample need not compute them all.
 * Valid until the session's next eval, reset, load, set_params or adapt.
 */
TXL_API const float *txl_session_logits(struct txl_session *session);

/** Rows of output the last eval kept (0: none), for txl_session_logits(),
 *  txl_session_score() and txl_session_sample(). */
TXL_API int txl_session_n_logits(const struct txl_session *session);

/**
 * logprobs[i] = the natural log-probability of targets[i] under output
 * row i, for i < @p n <= txl_session_n_logits().  An adaptive softmax
 * computes only the head and the targets' clusters (the original
 * ProjectedAdaptiveLogSoftmax's numbers).  The rows stay.
 * @return TXL_OK; TXL_ERR_INVALID for n or an id out of range;
 * TXL_ERR_NUMERIC where a log-probability is NaN or infinite (the model's
 * logits are not all finite: its weights overflow).
 */
TXL_API enum txl_status txl_session_score(struct txl_session *session,
					  const int32_t *targets, int n,
					  double *logprobs);

/**
 * Dynamic evaluation (Krause et al., 2018): one gradient step, rate
 * @p lr, of the session's own copy of the output layer on the mean
 * negative log-likelihood of @p targets under the rows held (n =
 * txl_session_n_logits(); row i predicts targets[i]), which it uses up.
 * txl_session_reset() returns to the model's layer; state files do not
 * keep it.  A full softmax only.
 * @return TXL_OK; TXL_ERR_INVALID for lr NaN, < 0 or > TXL_ADAPT_LR_MAX,
 * an id out of range, n != n_logits or an adaptive softmax;
 * TXL_ERR_NOMEM.
 */
TXL_API enum txl_status txl_session_adapt(struct txl_session *session,
					  const int32_t *targets, int n,
					  float lr);

/** Positions in memory, 0 .. mem_len (always mem_len for TXL_MEM_ZEROS). */
TXL_API int txl_session_mem_fill(const struct txl_session *session);

/** Tokens fed since the session was created or reset. */
TXL_API int64_t txl_session_n_past(const struct txl_session *session);

/**
 * Save to @p path the memory, the model's fingerprint, the settings that
 * shape the memory and the last position's output (the size is that of
 * the positions the memory holds, at most mem_len).  Written whole or
 * not at all, through a temporary file renamed over @p path, which must
 * be a regular file, a link to one, or absent (created 0600).  The abort
 * callback is polled while writing: TXL_ABORTED keeps the old file.
 */
TXL_API enum txl_status txl_session_save(struct txl_session *session,
					 const char *path);

/**
 * Replace the memory with the one saved at @p path, and the output with
 * the prediction after the saved text (if any); a memory of another
 * kv_type is converted.  The session is unchanged on error:
 * TXL_ERR_INVALID for another model's file, more positions than
 * mem_len or another mem_init, TXL_ERR_FORMAT for a damaged one,
 * TXL_ERR_IO for one unread or not a regular file.
 */
TXL_API enum txl_status txl_session_load(struct txl_session *session,
					 const char *path);

/**
 * txl_session_save() that also records @p n_recent ids (oldest first,
 * 0 .. TXL_REPEAT_LAST_N_MAX, each of the model): the text's last ones,
 * to give back to a sampler after a load (txl_sampler_accept()) so that
 * the repeat penalty goes on.  Since 1.3.
 */
TXL_API enum txl_status txl_session_save_recent(struct txl_session *session,
						const char *path,
						const int32_t *recent,
						int n_recent);

/**
 * txl_session_load() that also gives the last min(recorded,
 * @p max_recent) ids txl_session_save_recent() recorded into @p recent
 * (oldest first) and their count into *@p n_recent (may be NULL; 0 for a
 * file without ids, such as those of libtxl before 1.3, which still
 * load).  Since 1.3.
 */
TXL_API enum txl_status txl_session_load_recent(struct txl_session *session,
						const char *path,
						int32_t *recent,
						int max_recent,
						int *n_recent);

/**
 * The bytes of the state file txl_session_save_recent() would write now
 * with @p n_recent ids; -1 for a session without memory to save (or a
 * bad @p n_recent).  Since 1.5.
 */
TXL_API int64_t txl_session_state_bytes(const struct txl_session *session,
					int n_recent);

/**
 * The mem_len of the session that saved state file @p path, from its
 * header, into *@p mem_len (a session of at least that loads it; of less,
 * only if the memory fits).  Since 1.3.
 * @return TXL_OK; TXL_ERR_FORMAT for no state file this library reads;
 * TXL_ERR_IO; TXL_ERR_INVALID for NULL.
 */
TXL_API enum txl_status txl_state_mem_len(const char *path, int *mem_len);

/* ------------------------------------------------------------------ */
/* Batches: several sessions stepped together                          */

/*
 * A batch steps several sessions of one model in one forward pass, each
 * weight matrix read once for all their tokens, while each keeps its own
 * memory, settings and output.  It holds only scratch: any sessions of
 * its model may go into any call.  A session's single token computes the
 * floats it computes alone; several go through sgemm with the others',
 * within float rounding.  One thread at a time uses a batch and the
 * sessions of a call.  Since 1.1.
 */
struct txl_batch;

struct txl_batch_params {
	size_t size;  /* set by txl_batch_params_default() */
	int max_rows; /* the most tokens of one txl_batch_eval(), of all
			 sessions (the scratch's size); default 512 */
};

/** The most rows a batch takes (max_rows). */
#define TXL_MAX_BATCH_ROWS 65536

/** max_rows 512. */
TXL_API struct txl_batch_params txl_batch_params_default(void);

/**
 * A batch for sessions of @p model, which must outlive it; @p params
 * (NULL: the defaults) from txl_batch_params_default().
 * @return TXL_OK; TXL_ERR_INVALID for max_rows outside 1 ..
 * TXL_MAX_BATCH_ROWS or a params of another size; TXL_ERR_NOMEM (also
 * for scratch beyond the machine's memory).
 */
TXL_API enum txl_status txl_batch_new(const struct txl_model *model,
				      const struct txl_batch_params *params,
				      struct txl_batch **out);

/** Free a batch, not its sessions; NULL: nothing. */
TXL_API void txl_batch_free(struct txl_batch *batch);

/**
 * txl_session_eval(sessions[i], tokens[i], n[i], @p want) for each i <
 * @p n_sessions in one forward pass, n[i] 1 .. seg_len (one segment);
 * sessions without memory are evaluated in turn.
 * @return TXL_OK; TXL_ABORTED if any abort callback fired (memories and
 * n_past as before, no output; without memory, the sessions before the
 * one stopped are evaluated); TXL_ERR_INVALID, nothing changed, for NULL,
 * n_sessions < 1, a session of another model or twice, different
 * computes, an n[i] or id out of range, or over max_rows tokens in all.
 */
TXL_API enum txl_status txl_batch_eval(struct txl_batch *batch,
				       struct txl_session *const *sessions,
				       const int32_t *const *tokens,
				       const int *n, int n_sessions,
				       enum txl_logits want);

/**
 * txl_session_logits() of each of @p n_sessions sessions: those of one
 * row from one read of the output layer (each the floats it computes
 * alone), the others in turn; logits already computed stay.
 * @return TXL_OK; TXL_ERR_INVALID for NULL, n_sessions < 1 or a session
 * of another model.
 */
TXL_API enum txl_status txl_batch_logits(struct txl_batch *batch,
					 struct txl_session *const *sessions,
					 int n_sessions);

/* ------------------------------------------------------------------ */
/* Sampling                                                            */

struct txl_sampler;

struct txl_sampler_params {
	size_t size;          /* set by txl_sampler_params_default() */
	float temp;           /* temperature; 0: greedy (argmax) */
	int top_k;            /* keep the k most likely; 0: off */
	float top_p;          /* nucleus: the smallest set of mass >= p; 1: off */
	float min_p;          /* drop p < min_p * p_max; 0: off */
	float repeat_penalty; /* CTRL's penalty of recent tokens; 1: off */
	int repeat_last_n;    /* tokens the penalty looks back; 0: none */
	uint64_t seed;        /* the same seed, the same choices */
	/* since 1.5: */
	/* OpenAI's: logit - count * frequency_penalty - (count > 0) *
	 * presence_penalty, count: the token's draws by this sampler (the
	 * generated text, not accepted tokens); 0: off */
	float frequency_penalty;
	float presence_penalty;
	float typical_p;      /* locally typical set of mass >= p; 1: off */
	/* mirostat 2 (target surprise tau in bits, learning rate eta)
	 * instead of top-k, typical, min-p and top-p; tau 0: off */
	float mirostat_tau;
	float mirostat_eta;
	/* added to the logits of tokens logit_bias_ids[i] first (-inf: never);
	 * copied by txl_sampler_new() */
	const int32_t *logit_bias_ids;
	const float *logit_bias;
	int n_logit_bias;
};

/** temp 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalties, typical
 *  and mirostat off (eta 0.1), no bias, seed 0. */
TXL_API struct txl_sampler_params txl_sampler_params_default(void);

/** A sampler for @p n_vocab tokens; NULL for a parameter out of range or
 *  no memory. */
TXL_API struct txl_sampler *txl_sampler_new(
	const struct txl_sampler_params *params, int n_vocab);

/** Free a sampler; NULL: nothing. */
TXL_API void txl_sampler_free(struct txl_sampler *sampler);

/**
 * Pick a token from @p logits (float[n_vocab], unchanged) and add it to
 * the history (the repeat penalty).  *@p logprob (if not NULL): its
 * log-probability under the full distribution, before temperature and
 * filtering.
 */
TXL_API int32_t txl_sampler_sample(struct txl_sampler *sampler,
				   const float *logits, float *logprob);

/**
 * txl_sampler_sample() on the last row of txl_session_logits().  With an
 * adaptive softmax, greedy and plain temperature sampling compute only
 * the clusters that can hold the token (the same distribution, other
 * random numbers).
 * @return the token; -1 if the session holds no output row, or (the last
 * error TXL_ERR_NUMERIC's, naming the model file) if the row's logits
 * are not all finite, which leaves no log-probability to sample by.
 */
TXL_API int32_t txl_session_sample(struct txl_session *session,
				   struct txl_sampler *sampler,
				   float *logprob);

/**
 * From now on draw only tokens that keep the text valid UTF-8: with a
 * byte-fallback vocabulary, no lone byte that cannot start a character,
 * and inside a character only the bytes that continue it (its pending
 * bytes known from the tokens sampled and accepted); the rest of the
 * distribution renormalised.  txl_sampler_sample()'s log-probability
 * stays the model's.  Since 1.5.
 */
TXL_API enum txl_status txl_sampler_keep_utf8(struct txl_sampler *sampler,
					      const struct txl_model *model);

/** Add a token not sampled (a prompt's) to the history. */
TXL_API void txl_sampler_accept(struct txl_sampler *sampler, int32_t token);

/** Clear the history; the random stream goes on. */
TXL_API void txl_sampler_reset(struct txl_sampler *sampler);

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

/** Log-softmax of @p n logits into @p out (may be @p logits), the
 *  normaliser in double. */
TXL_API void txl_log_softmax(const float *logits, float *out, int n);

/** log(sum(exp(x[i]))) of @p n values, stable: x[t] minus it is token
 *  t's log-probability. */
TXL_API double txl_logsumexp(const float *x, int n);

#ifdef __cplusplus
}
#endif

#endif /* TXL_H */
