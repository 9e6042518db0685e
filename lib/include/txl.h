/* SPDX-License-Identifier: MIT */
/*
 * txl.h - libtxl, Transformer-XL inference on the CPU.
 *
 * The one installed header of libtxl.  It loads a txlgen model file
 * (a safetensors file, see txlgen-model(5)), tokenizes with the
 * SentencePiece model stored inside it, and evaluates text segment by
 * segment while keeping Transformer-XL's memory in a session, with the
 * numbers of the original PyTorch code (kimiyoung/transformer-xl).
 *
 * Objects:
 *   struct txl_model    immutable weights (memory-mapped, or read into
 *                       memory with TXL_LOAD_NO_MMAP); shareable by
 *                       any number of sessions, read-only after loading
 *                       (every function that takes a const model may be
 *                       called from any thread at once).
 *   struct txl_session  one stream of text: the per-layer key/value memory
 *                       (fixed size, whatever the amount of text fed) and
 *                       scratch buffers.  Not thread-safe; one per thread.
 *   struct txl_batch    scratch for stepping several sessions of one
 *                       model at once, each weight read once for all
 *                       (txl_batch_eval()).  One thread at a time.
 *   struct txl_sampler  picks the next token from logits, with its own
 *                       seeded random number generator.
 *
 * Threads: the process has one pool of compute threads, which every
 * session uses (as OpenBLAS's own thread count is one per process).
 * Its size is set by txl_session_new() and txl_session_set_params()
 * from their n_threads, for every session in the process: the last call
 * wins.  Sessions evaluated from several threads at once work, each
 * correctly, but while one of them holds the pool the others compute on
 * their own thread alone.
 *
 * ABI: the library's version (txl_version()) is its own; its soname
 * changes only with a change that breaks callers, and each function is
 * bound to the version node of the release that added it (txl.sym).
 * Structs change only by new fields at their end: those a caller passes
 * in (txl_session_params, txl_sampler_params) carry their size, which
 * their *_default() function sets, so that the library reads no more of
 * them than the caller has; txl_hparams carries the size the library
 * filled, so that a caller can test for a newer field (TXL_HAS()).
 *
 * Errors: functions return enum txl_status (or a documented special
 * value); the reason, one line naming the file or argument and what is
 * wrong, is available from txl_last_error() in the same thread.
 * A NULL model, session or argument pointer where one is needed, or an
 * enum value outside its type, is TXL_ERR_INVALID (or the function's
 * error value: NULL, INT32_MIN), never a crash.
 * The library never prints to stdout, never calls exit(), and writes to
 * stderr only through the log callback (default: warnings to stderr).
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

/** Version of the library, "MAJOR.MINOR.PATCH": that of the API and ABI
 *  of this header, not of txlgen. */
TXL_API const char *txl_version(void);

/**
 * The set of the library's own kernels chosen for this CPU: "scalar",
 * "avx2", "avxvnni", "avx512", "avx512vnni" or "avx512bf16" (the best the
 * CPU runs, at most the one named by $TXL_ISA).  For version reports and
 * benchmarks.
 */
TXL_API const char *txl_isa_name(void);

/**
 * The BLAS library under the matrix-matrix products, as OpenBLAS describes
 * its build and the kernels it chose for this CPU (which
 * $OPENBLAS_CORETYPE overrides): "OpenBLAS 0.3.21 DYNAMIC_ARCH ... (core
 * Zen)".
 */
TXL_API const char *txl_blas_info(void);

/**
 * Whether struct @p p (a pointer to @p type: a struct of this header with
 * a `size` member) has @p member: always for a struct a caller made with
 * a *_default() function of the library it runs on; for the hparams of a
 * library older than this header, not for the fields added since.
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
	TXL_ABORTED = 1,      /**< the abort callback asked to stop */
};

/** A short constant description of @p status ("malformed file", ...). */
TXL_API const char *txl_status_str(enum txl_status status);

/**
 * The message of the last error raised in this thread, one line without
 * a trailing newline, e.g. "m.bin: tensor 'layers.0.dec_attn.o_net.weight'
 * has shape [64, 32], expected [64, 64]".  Empty if none.  Valid until
 * the next libtxl call in this thread.
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
 * Route the library's messages to @p fn (NULL: the default, which prints
 * warnings and errors to stderr).  @p max_level drops less important
 * messages.  Not thread-safe: call it before creating models.
 */
TXL_API void txl_log_set(txl_log_fn fn, void *user_data,
			 enum txl_log_level max_level);

/* ------------------------------------------------------------------ */
/* Models                                                              */

struct txl_model;

/**
 * Load the regular file @p path, memory-mapped and validated completely
 * before any weight is used; free *@p out with txl_model_free().  On
 * failure *@p out is NULL and txl_last_error() names the first problem.
 * The file stays mapped while the model lives: do not change it in place
 * (a shrunk file raises SIGBUS); rename a new one over it, or load with
 * TXL_LOAD_NO_MMAP.
 */
TXL_API enum txl_status txl_model_load(const char *path,
				       struct txl_model **out);

/** Flags of txl_model_load_flags(). */
#define TXL_LOAD_NO_MMAP 0x1u /* read the file into a private copy (on
				 huge pages where the kernel gives them)
				 instead of mapping it: safe from changes
				 to the file, not shared between
				 processes */

/**
 * txl_model_load() with @p flags (0 or TXL_LOAD_NO_MMAP); an unknown flag
 * is TXL_ERR_INVALID.
 */
TXL_API enum txl_status txl_model_load_flags(const char *path,
					     unsigned flags,
					     struct txl_model **out);

/** Free a model; NULL is a no-op.  Every session must be freed first. */
TXL_API void txl_model_free(struct txl_model *model);

/** Clusters of an adaptive softmax at most (cutoffs + 1). */
#define TXL_MAX_CLUSTERS 16

/**
 * The attention of a model (its attn_type, as MemTransformerLM names it;
 * txlgen-model(5) describes each).  The absolute ones (2, 3) have no
 * memory: sessions recompute a window of the last seg_len tokens
 * (txl_session_params.stride).  An adaptive-span model's memory keeps,
 * for each head, its layer's window (txl_model_window()): the head reads
 * the values of its span (txl_model_span()) and scores the keys of the
 * whole window, as the original's softmax does; it starts full of zero
 * states, as the original code's evaluation does.
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
	size_t size;     /* bytes of this struct as the library filled it */
	int n_token;     /* vocabulary size */
	int n_layer;
	int n_head;
	int d_model;
	int d_head;
	int d_inner;
	int d_embed;     /* = d_model unless a projection is used */
	int tgt_len;     /* training segment length: default seg_len */
	int mem_len;     /* training memory length: default mem_len */
	int clamp_len;   /* 0 = no clamping */
	bool same_length;
	bool pre_lnorm;
	bool tie_weight;
	bool untie_r;    /* per-layer r_w_bias / r_r_bias */
	enum txl_attn_type attn_type;
	int max_klen;    /* rows of the position tables of REL_LEARNED and
			    ABS_LEARNED (tgt_len + ext_len + mem_len at
			    training); 0 for the others */
	/* Adaptive input and softmax: cluster 0 is ids [0, cutoffs[0]),
	 * cluster i is [cutoffs[i-1], cutoffs[i]), the last one ends at
	 * n_token.  n_cutoffs 0 is a full softmax.  With div_val > 1,
	 * cluster i has embeddings of d_embed / div_val^i dimensions and
	 * its own projections; with div_val 1 one table serves all. */
	int div_val;
	int n_cutoffs;
	int cutoffs[TXL_MAX_CLUSTERS - 1];
	bool tie_projs[TXL_MAX_CLUSTERS]; /* output projection of cluster i
					     is the input's (tie_projs) */
	/* ADAPTIVE_SPAN (0 for the others): the longest span a head could
	 * learn (the columns of key_pe) and the length of the soft mask's
	 * ramp.  Fields since version 1.1 (TXL_HAS). */
	int attn_span;
	int span_ramp;
};

/** The model's hyperparameters (a pointer into the model). */
TXL_API const struct txl_hparams *txl_model_hparams(
	const struct txl_model *model);

/** Number of weights (parameters) of the model, tied ones counted once. */
TXL_API int64_t txl_model_n_params(const struct txl_model *model);

/**
 * A metadata string of the file's "__metadata__" (e.g. "description"),
 * or NULL.  Valid as long as the model.
 */
TXL_API const char *txl_model_meta(const struct txl_model *model,
				   const char *key);

/**
 * A 64-bit fingerprint of the model file's contents (header and data),
 * never 0: state files record it.  Computed when the model is loaded.
 */
TXL_API uint64_t txl_model_fingerprint(const struct txl_model *model);

/**
 * Whether sessions of the model keep a memory (the relative attentions)
 * or recompute a window of seg_len tokens for each prediction (the
 * absolute ones: see txl_session_eval()).
 */
TXL_API bool txl_model_has_memory(const struct txl_model *model);

/** What attention @p type is, in a few words ("relative positions with
 *  global biases (Transformer-XL)", ...); NULL for none. */
TXL_API const char *txl_attn_type_name(enum txl_attn_type type);

/**
 * The span of head @p head of layer @p layer of an adaptive-span model
 * (TXL_ATTN_ADAPTIVE_SPAN): a token attends to the positions 1 .. span
 * before it (its learned span and the ramp of its soft mask: the
 * distances whose mask is not 0, within the memory the original code
 * keeps for the layer).  -1 for a model of another attention, or a layer
 * or head out of range.  Since version 1.1.
 */
TXL_API int txl_model_span(const struct txl_model *model, int layer,
			   int head);

/**
 * The window of head @p head of layer @p layer of an adaptive-span
 * model: the positions 1 .. window before a token whose keys take part in
 * the head's softmax (the layer's memory as the original code trims it,
 * the same for every head of the layer; the head's weights are those of
 * its span, divided by their sum + 1e-8, each weight a share of the
 * window's softmax), and which a session's memory keeps for the head
 * (at most its mem_len); 0 for a head whose span is 0.  -1 for a model
 * of another attention, or a layer or head out of range.  Since version
 * 1.2.
 */
TXL_API int txl_model_window(const struct txl_model *model, int layer,
			     int head);

/* ------------------------------------------------------------------ */
/* Tokenizer (the SentencePiece model stored in the file)              */

/**
 * Encode UTF-8 @p text of @p len bytes into token ids.
 * @return the number of ids written to @p ids (at most @p n_max); if
 * @p n_max is too small, the negated number needed (nothing useful is
 * written); INT32_MIN on error (invalid UTF-8 is not an error:
 * SentencePiece maps it like any other bytes).
 */
TXL_API int txl_tokenize(const struct txl_model *model, const char *text,
			 size_t len, int32_t *ids, int n_max);

/**
 * The bytes token @p id stands for in running text ("▁" already turned
 * into a space, byte tokens <0xNN> into that byte; control tokens are
 * empty).  Pieces may hold part of a UTF-8 character.
 * @return the length written to @p buf (not NUL-terminated), the negated
 * length needed if @p cap is too small, INT32_MIN if @p id is invalid.
 */
TXL_API int txl_token_piece(const struct txl_model *model, int32_t id,
			    char *buf, size_t cap);

/**
 * Decode @p n ids into text as SentencePiece does (leading space of the
 * text removed).  Same return convention as txl_token_piece(); @p buf is
 * NUL-terminated when it fits.
 */
TXL_API int txl_detokenize(const struct txl_model *model, const int32_t *ids,
			   int n, char *buf, size_t cap);

/** Special token ids, or -1 if the tokenizer has none.  A word-level
 * model whose <eos> ends each line (WikiText, PTB; txlgen-model(5),
 * "Vocabularies of the original code") has no end-of-sequence token: its
 * <eos> is a newline, and txl_token_bos() returns it. */
TXL_API int32_t txl_token_bos(const struct txl_model *model);
TXL_API int32_t txl_token_eos(const struct txl_model *model);
TXL_API int32_t txl_token_unk(const struct txl_model *model);

/* ------------------------------------------------------------------ */
/* Sessions                                                            */

struct txl_session;

/** Called between segments and layers; return true to stop evaluation. */
typedef bool (*txl_abort_fn)(void *data);

#define TXL_FROM_MODEL (-1) /* a setting that takes the model's value */

/* The ranges the library accepts (and txlgen's options use). */
#define TXL_MEM_LEN_MAX (1 << 20)       /* mem_len 0 .. this */
#define TXL_SEG_LEN_MAX (1 << 16)       /* seg_len 1 .. this */
#define TXL_REPEAT_LAST_N_MAX (1 << 20) /* repeat_last_n 0 .. this */
#define TXL_ADAPT_LR_MAX 1e6            /* txl_session_adapt() lr 0 .. this */

/*
 * The storage types: of a model file's tensors and of a session's memory
 * (kv_type).  F32 computes as the original code; F16 and BF16 round to
 * nearest even; Q8_0 and Q4_0 are GGUF's blocks of 32 values with one F16
 * scale (8 and 4 bits: about a quarter and a seventh of F32), and need a
 * d_head that is a multiple of 32 as memory; Q4_K holds 128 values in
 * 4 bits with a 6-bit scale and zero point per 32 (4.5 bits a value, as
 * Q4_0, with less loss; a multiple of 128 as memory).  Narrower memory is faster
 * and less exact: measure it on your text (txlgen --score).  U8 is bytes,
 * not numbers (a model file's tokenizer).  The values never change; a new
 * type takes a new one (TXL_N_DTYPES, their count, grows: enumerate with
 * txl_dtype_name() rather than build on it).
 */
#include "txl-dtype-enum.h" /* enum txl_dtype: TXL_F32 = 0, TXL_F16 = 1,
				 * ... TXL_N_DTYPES */

/* The names of libtxl 1.0 for the memory's types: the same values. */
#define txl_kv_type txl_dtype
#define TXL_KV_F32 TXL_F32
#define TXL_KV_F16 TXL_F16
#define TXL_KV_BF16 TXL_BF16
#define TXL_KV_Q8_0 TXL_Q8_0
#define TXL_KV_Q4_0 TXL_Q4_0

/** The name of storage type @p dt ("F32", "Q8_0", ...), as model files
 *  spell it; NULL for none.  Since libtxl 1.2. */
TXL_API const char *txl_dtype_name(enum txl_dtype dt);

/** The storage type named @p name, in any case ("q8_0" is Q8_0); -1 for
 *  none.  Since libtxl 1.2. */
TXL_API int txl_dtype_from_name(const char *name);

/* What a storage type can hold (txl_dtype_uses()). */
#define TXL_DTYPE_WEIGHTS 1u /* a model's weight matrices */
#define TXL_DTYPE_MEMORY 2u  /* a session's memory: its kv_type */

/** TXL_DTYPE_* of @p dt (0 for U8 and for a value that is no type).
 *  Since libtxl 1.2. */
TXL_API unsigned txl_dtype_uses(enum txl_dtype dt);

/* How the products of a segment (two or more tokens: scoring, prompts,
 * the windows of the models without memory) compute with weight matrices
 * stored in BF16 (txl_session_set_compute(); since libtxl 1.1).
 * TXL_COMPUTE_F32, the default, widens every weight exactly and
 * multiplies in float: a model computes the function of its stored
 * weights.  TXL_COMPUTE_BF16 rounds the activations of those products to
 * BF16 (nearest even, each within 2^-8 of its value) and sums the
 * products of the pairs in float: vdpbf16ps, twice the multiply-adds of
 * float per instruction, on a CPU with AVX512_BF16
 * (txl_compute_native()); elsewhere the same products widened, no
 * faster than TXL_COMPUTE_F32.  Matrices of the other types, one token
 * at a time (generation) and the position tables that a session computes
 * once compute in float either way. */
enum txl_compute {
	TXL_COMPUTE_F32 = 0,
	TXL_COMPUTE_BF16 = 1,
};

/**
 * Whether this CPU computes @p compute with instructions of its own
 * (1: F32 always, BF16 with AVX512_BF16, unless $TXL_ISA caps the
 * kernels below avx512bf16), or the library widens it (0); -1 for a value
 * that is none of enum txl_compute.  Since libtxl 1.1.
 */
TXL_API int txl_compute_native(enum txl_compute compute);

/**
 * Whether sessions of @p model can compute as @p compute asks: TXL_OK, or
 * TXL_ERR_INVALID (txl_last_error() says why) for a value that is none
 * of enum txl_compute, or TXL_COMPUTE_BF16 with a model that stores none
 * of its weight matrices in BF16.  Since libtxl 1.1.
 */
TXL_API enum txl_status txl_model_check_compute(
	const struct txl_model *model, enum txl_compute compute);

/**
 * How a session's memory starts (txl_session_params.mem_init):
 *   EMPTY  no positions: the first token attends to itself only, as the
 *          original PyTorch code's evaluation starts;
 *   ZEROS  mem_len positions of zero states (every key and value 0,
 *          which still take part in each softmax through their position
 *          scores): the evaluation of the TensorFlow code and Hugging
 *          Face's init_mems, so that scores match theirs from the first
 *          token; txl_session_mem_fill() is then always mem_len.
 * An adaptive-span model's memory always starts as ZEROS.  ZEROS is
 * refused for pre-LayerNorm models (their zero states' keys and values
 * are not 0).  Since libtxl 1.2.
 */
enum txl_mem_init {
	TXL_MEM_EMPTY = 0,
	TXL_MEM_ZEROS = 1,
};

struct txl_session_params {
	size_t size;       /* sizeof(struct txl_session_params), as
			      txl_session_params_default() sets it */
	int mem_len;       /* positions kept in memory; TXL_FROM_MODEL (an
			      adaptive-span model's: its longest span; a
			      head keeps its span, at most mem_len) */
	int seg_len;       /* tokens per forward call; TXL_FROM_MODEL */
	int clamp_len;     /* relative distances clamped to this; 0 = none;
			      TXL_FROM_MODEL */
	int same_length;   /* 0 off, 1 on; TXL_FROM_MODEL */
	int n_threads;     /* threads of the kernels and of OpenBLAS: of the
			      process's one pool, for every session (see
			      "Threads" above); 0 = one per CPU.  libtxl's
			      own threads block every signal */
	txl_abort_fn abort_cb; /* NULL = never abort */
	void *abort_data;  /* passed to abort_cb */
	int stride;        /* models without memory (attn_type 2, 3): the
			      tokens predicted per window, 1 .. seg_len;
			      TXL_FROM_MODEL = 1.  See txl_session_eval().
			      Must be TXL_FROM_MODEL for the others. */
	enum txl_dtype kv_type; /* of the memory: a type of
				   TXL_DTYPE_MEMORY; default TXL_F32 */
	int mem_init;      /* enum txl_mem_init: how the memory starts (and
			      starts again at txl_session_reset());
			      TXL_FROM_MODEL: empty, an adaptive-span
			      model's zero states.  Since libtxl 1.2 */
};

/** The defaults: everything from the model, no abort callback. */
TXL_API struct txl_session_params txl_session_params_default(void);

/**
 * The settings a session of @p model with @p in (NULL: the defaults)
 * would have, into *@p out: every TXL_FROM_MODEL resolved as
 * txl_session_new() resolves it (txl_session_get_params() of such a
 * session), after the same checks.  *@p out must come from
 * txl_session_params_default(): its size is what the library writes.
 * @return TXL_OK, or TXL_ERR_INVALID for settings txl_session_new()
 * refuses (txl_last_error() says why; *out unchanged).
 */
TXL_API enum txl_status txl_session_params_resolve(
	const struct txl_model *model, const struct txl_session_params *in,
	struct txl_session_params *out);

/**
 * Create a session with an empty memory, or one of mem_len zero states
 * (params->mem_init; an adaptive-span model's always, see
 * TXL_ATTN_ADAPTIVE_SPAN).  The session borrows @p
 * model, which must outlive it.  Settings may exceed those the model was
 * trained with.  same_length with mem_len 0 is rejected (it masks every key).
 * Models of attn_type 2 and 3 have no memory (the original code runs them
 * with mem_len 0 only): mem_len TXL_FROM_MODEL is 0 for them and any
 * other value is rejected; attn_type 3 also rejects a seg_len longer than
 * its position table (max_klen).  @p params must come from
 * txl_session_params_default() (its size: TXL_ERR_INVALID otherwise).
 */
TXL_API enum txl_status txl_session_new(const struct txl_model *model,
					const struct txl_session_params *params,
					struct txl_session **out);

/**
 * The bytes a session of @p model with @p params (NULL: the defaults)
 * allocates, whatever the text fed; -1 if the settings are refused (as
 * txl_session_new() would refuse them; txl_last_error() says why).
 * txl_session_adapt() adds a copy of the output layer.
 */
TXL_API int64_t txl_session_bytes(const struct txl_model *model,
				  const struct txl_session_params *params);

/**
 * The receptive field of a session of @p model with @p params (NULL: the
 * defaults): how many of the last tokens of a text determine what the
 * session holds after reading it, the last token included, when the text
 * is fed @p n_at_once tokens at a time (1 .. seg_len: 1 for tokens
 * generated one after another, seg_len for a text fed at once, which
 * txl_session_eval() cuts into segments of seg_len from its first token).
 *
 * Bit for bit: a session that reads that many tokens at the end of a
 * text, or more, from the start of one of the segments where a whole
 * read puts them (txl_session_skip() of the tokens before), whatever it
 * held before, then holds the very bytes that a session that read the
 * whole text holds: its memory (a model without memory, its window), the
 * output of the last token and so the logits that follow, n_past; as
 * long as both compute alike (the same settings, kv_type, compute and
 * threads).  So a long prompt costs this many tokens, not its length.
 *
 * Transformer-XL: a position sees, in every layer, the memory before its
 * segment (mem_len positions) and its segment up to itself: n_layer x
 * (mem_len + n_at_once - 1) + 1 (counted so with same_length too, whose
 * positions see a part of it).  An adaptive-span model: each layer's
 * longest span (txl_model_span(), at most mem_len) for mem_len.  A model
 * without memory: its window, seg_len (its groups of stride tokens where
 * a whole read in one call puts them).  Since libtxl 1.2.
 * @return the number of tokens; -1 for settings that txl_session_new()
 * refuses, or @p n_at_once out of range (txl_last_error() says why).
 */
TXL_API int64_t txl_session_receptive_field(
	const struct txl_model *model, const struct txl_session_params *params,
	int n_at_once);

/**
 * Where a session of @p model with @p params must start reading a text
 * of @p n tokens fed at once (in segments of seg_len from its first token)
 * to hold what a whole read holds, bit for bit: the start of the segment
 * of the first token that the end of the text depends on, 0 if it is the
 * first segment (the text's tokens before are to be skipped:
 * txl_session_skip()).  The receptive field for this very text: the
 * tokens from there, n minus this, are at most
 * txl_session_receptive_field(model, params, seg_len) + seg_len - 1, and
 * as few as n_layer x mem_len + 1 (when the last token starts a segment
 * and mem_len is a multiple of seg_len).  A model without memory: the
 * last seg_len tokens, from the start of their group of stride.  Since
 * libtxl 1.2.
 * @return a token's index, 0 .. n; -1 for settings that txl_session_new()
 * refuses or n < 0 (txl_last_error() says why).
 */
TXL_API int64_t txl_session_tail_start(const struct txl_model *model,
				       const struct txl_session_params *params,
				       int64_t n);

/** Free a session; NULL is a no-op. */
TXL_API void txl_session_free(struct txl_session *session);

/** The effective settings (TXL_FROM_MODEL resolved). */
TXL_API struct txl_session_params txl_session_get_params(
	const struct txl_session *session);

/**
 * Change the settings of a live session, keeping its memory: the positions
 * it holds stay (only the most recent mem_len if mem_len shrinks), n_past
 * is unchanged, and the logits become one row predicting the token after
 * the text fed so far (none if nothing was fed).  The new settings apply
 * to what is fed from now on.  On error (the same checks as
 * txl_session_new) the session is unchanged.
 */
TXL_API enum txl_status txl_session_set_params(
	struct txl_session *session, const struct txl_session_params *params);

/**
 * Make @p dst continue the text of @p src, as if it had been fed the same
 * tokens (memory converted to dst's kv_type and mem_len, n_past, window,
 * adapted output layer, the prediction of the next token); dst keeps its
 * settings and buffers, @p src is unchanged.  So one text read once
 * continues in several sessions of the same model.
 * @return TXL_OK; TXL_ERR_INVALID for sessions of different models;
 * TXL_ERR_NOMEM (dst unchanged); TXL_ABORTED: dst's abort callback fired
 * while a model without memory recomputed its window for the prediction
 * (dst then holds the text, without the prediction: n_logits 0).
 */
TXL_API enum txl_status txl_session_copy(struct txl_session *dst,
					 const struct txl_session *src);

/** Forget the memory: the next token starts a new text (with mem_init
 *  TXL_MEM_ZEROS, an adaptive-span model's always, the memory is zero
 *  states again). */
TXL_API void txl_session_reset(struct txl_session *session);

/**
 * How the session's products of segments compute from now on (enum
 * txl_compute; a new session: TXL_COMPUTE_F32).  Its memory and logits
 * stay as they are.  Since libtxl 1.1.
 * @return TXL_OK, or TXL_ERR_INVALID (the session unchanged) for a value
 * that is none of enum txl_compute, or TXL_COMPUTE_BF16 with a model
 * that stores none of its weight matrices in BF16.
 */
TXL_API enum txl_status txl_session_set_compute(struct txl_session *session,
						enum txl_compute compute);
/** The session's enum txl_compute.  Since libtxl 1.1. */
TXL_API enum txl_compute txl_session_get_compute(
	const struct txl_session *session);

enum txl_logits {
	TXL_LOGITS_NONE = 0, /* only update the memory (priming) */
	TXL_LOGITS_LAST = 1, /* logits of the last token */
	TXL_LOGITS_ALL = 2,  /* logits of every token (n <= seg_len) */
};

/**
 * Feed @p n tokens.  They are processed in segments of at most seg_len
 * tokens, each one attending to the memory left by the one before, as the
 * original code's evaluation does; the memory then holds the last mem_len
 * positions.  Row i of the output (txl_session_logits(),
 * txl_session_score()) predicts the token after tokens[i].
 *
 * Models without memory (attn_type 2, 3) see a window instead: the tokens
 * are taken in groups of `stride`, counted from tokens[0] (the last group
 * may be shorter), and each group is computed in one forward pass together
 * with the up to seg_len - stride tokens fed before it (from this call or
 * earlier ones).  So stride 1 recomputes a window of the last seg_len
 * tokens for every token, the vanilla Transformer's evaluation in the
 * Transformer-XL paper (and its way of generating); stride seg_len
 * computes independent segments of seg_len tokens, as the original
 * eval.py does with mem_len 0 when fed the whole text at once.
 *
 * @return TXL_OK; TXL_ABORTED if the abort callback fired (the memory then
 * holds every segment completed); TXL_ERR_INVALID for a bad id,
 * TXL_LOGITS_ALL with n > seg_len, or a @p want that is none of enum
 * txl_logits.
 */
TXL_API enum txl_status txl_session_eval(struct txl_session *session,
					 const int32_t *tokens, int n,
					 enum txl_logits want);

/**
 * Count the @p n tokens @p tokens as fed without computing them: n_past
 * grows by n, and the session forgets its memory, its window and its
 * output as txl_session_reset() does (an adapted output layer stays).
 * For a long text whose end alone matters: skip its first tokens, up to
 * txl_session_tail_start() (or, of a text whose length is not known yet,
 * a multiple of seg_len that leaves at least
 * txl_session_receptive_field(model, params, seg_len) tokens; without
 * memory: of stride), then feed the rest in one call (with memory: or in
 * whole segments), and the session holds bit for bit what it would after
 * feeding the whole text.  What needs every token (their scores,
 * txl_session_adapt()) is not had for those skipped.  Since libtxl 1.2.
 * @return TXL_OK; TXL_ERR_INVALID (the session unchanged) for n < 1, a
 * NULL argument or an id out of range.
 */
TXL_API enum txl_status txl_session_skip(struct txl_session *session,
					 const int32_t *tokens, int n);

/**
 * Logits (float[rows][n_token]) of the last eval: one row for
 * TXL_LOGITS_LAST, n rows for TXL_LOGITS_ALL; after a load or set_params,
 * one row predicting the token after the text fed.  With a full softmax
 * they are unnormalised; with an adaptive softmax (n_cutoffs > 0) they
 * are log-probabilities (valid logits too).  Computed on the first call
 * after an eval: the eval keeps only the last layer's outputs, so that
 * txl_session_score() and txl_session_sample() need not compute every
 * token's logit.  Valid until the next eval, reset, load, set_params or
 * adapt on this session.
 */
TXL_API const float *txl_session_logits(struct txl_session *session);

/** Rows of output the last eval kept (0 = none): the rows of
 *  txl_session_logits(), txl_session_score() and txl_session_sample(). */
TXL_API int txl_session_n_logits(const struct txl_session *session);

/**
 * The log-probability (natural log) of targets[i] under row i of the last
 * eval's output, into @p logprobs[i], for i < @p n <= txl_session_n_logits().
 * With an adaptive softmax only the head and the targets' own clusters are
 * computed (the original ProjectedAdaptiveLogSoftmax's numbers), not the
 * full distribution; with a full softmax, the logits and their normaliser.
 * The rows stay: txl_session_logits() and a later score still work.
 * @return TXL_OK; TXL_ERR_INVALID for n out of range or an id out of range.
 */
TXL_API enum txl_status txl_session_score(struct txl_session *session,
					  const int32_t *targets, int n,
					  double *logprobs);

/**
 * Dynamic evaluation (Krause et al., 2018): one step of gradient descent,
 * learning rate @p lr, of the session's own copy of the output layer on
 * the mean negative log-likelihood of @p targets under the rows now held
 * (n = txl_session_n_logits(); row i predicts targets[i]), which it uses
 * up.  txl_session_reset() returns to the model's layer; state files do
 * not hold the adaptation.  A full softmax only (n_cutoffs 0).
 * @return TXL_OK; TXL_ERR_INVALID for a bad lr (NaN, < 0,
 * > TXL_ADAPT_LR_MAX), an id out of range, n != n_logits or an adaptive
 * softmax; TXL_ERR_NOMEM.
 */
TXL_API enum txl_status txl_session_adapt(struct txl_session *session,
					  const int32_t *targets, int n,
					  float lr);

/** Positions currently held in memory (0..mem_len; always mem_len for a
 *  memory that starts full of zero states: TXL_MEM_ZEROS). */
TXL_API int txl_session_mem_fill(const struct txl_session *session);

/** Tokens fed since the session was created or reset. */
TXL_API int64_t txl_session_n_past(const struct txl_session *session);

/**
 * Save the memory, the model's fingerprint, the settings that shape the
 * memory and the last position's output to @p path (its size depends on
 * the model, mem_len and kv_type only).  Written whole or not at all: a
 * temporary file renamed over @p path, which must be a regular file (or
 * a link to one) or absent; a new file is created 0600.  The abort
 * callback is polled while writing (TXL_ABORTED, the old file kept).
 */
TXL_API enum txl_status txl_session_save(struct txl_session *session,
					 const char *path);

/**
 * Replace the memory with the one saved in @p path, and the logits with
 * the prediction that follows the saved text (if any was fed).  A file of
 * another model, or holding more positions than this session's mem_len,
 * is TXL_ERR_INVALID; a damaged one TXL_ERR_FORMAT; one that cannot be
 * read, or is not a regular file, TXL_ERR_IO; the session is unchanged on
 * error.  A memory saved with another kv_type is converted to this
 * session's.
 */
TXL_API enum txl_status txl_session_load(struct txl_session *session,
					 const char *path);

/**
 * txl_session_save() that also records @p n_recent token ids (oldest
 * first; 0 .. TXL_REPEAT_LAST_N_MAX, each a token of the model): the
 * last ids of the text, which a caller gives back to its sampler after a
 * load (txl_sampler_accept()) so that the repeat penalty's window goes
 * on as if the text had never stopped.  Since libtxl 1.3.
 */
TXL_API enum txl_status txl_session_save_recent(struct txl_session *session,
						const char *path,
						const int32_t *recent,
						int n_recent);

/**
 * txl_session_load() that also gives the ids txl_session_save_recent()
 * recorded: the last min(recorded, @p max_recent) of them into @p recent
 * (oldest first), their number into *@p n_recent (may be NULL; 0 for a
 * file saved without ids, or by a txlgen before libtxl 1.3, whose state
 * files still load).  Since libtxl 1.3.
 */
TXL_API enum txl_status txl_session_load_recent(struct txl_session *session,
						const char *path,
						int32_t *recent,
						int max_recent,
						int *n_recent);

/**
 * The mem_len of the session that saved the state file @p path, into
 * *@p mem_len (a session of this mem_len loads it; one of less loads it
 * only if the memory fits).  Reads the file's header only.
 * @return TXL_OK; TXL_ERR_FORMAT for a file that is not a state file of
 * a version this library reads; TXL_ERR_IO; TXL_ERR_INVALID for NULL.
 * Since libtxl 1.3.
 */
TXL_API enum txl_status txl_state_mem_len(const char *path, int *mem_len);

/* ------------------------------------------------------------------ */
/* Batches: several sessions stepped together                          */

/*
 * A batch steps several sessions of one model at once, each weight matrix
 * read once for the tokens of all (a token of generation costs about a
 * read of every weight), while each session keeps its own memory,
 * settings and output.  The batch holds only a step's scratch: any
 * sessions of its model may be stepped by any call.  A session of one
 * token computes exactly the numbers it computes alone; several tokens go
 * through sgemm with the others', within float rounding of that.  One
 * thread at a time uses a batch and the sessions of a call.
 */
struct txl_batch;

struct txl_batch_params {
	size_t size;       /* sizeof(struct txl_batch_params), as
			      txl_batch_params_default() sets it */
	int max_rows;      /* the most tokens of one txl_batch_eval(), all
			      sessions together (the batch's scratch is
			      sized for them); default 512 */
};

/** The most rows a batch takes (max_rows). */
#define TXL_MAX_BATCH_ROWS 65536

/** The defaults: max_rows 512. */
TXL_API struct txl_batch_params txl_batch_params_default(void);

/**
 * Create a batch for sessions of @p model, which must outlive it.
 * @p params must come from txl_batch_params_default() (NULL: the
 * defaults).
 * @return TXL_OK; TXL_ERR_INVALID for max_rows < 1 or above
 * TXL_MAX_BATCH_ROWS, or a params struct of another size; TXL_ERR_NOMEM
 * (also when its scratch would exceed the machine's memory).
 */
TXL_API enum txl_status txl_batch_new(const struct txl_model *model,
				      const struct txl_batch_params *params,
				      struct txl_batch **out);

/** Free a batch; NULL is a no-op.  The sessions are not touched. */
TXL_API void txl_batch_free(struct txl_batch *batch);

/**
 * Feed session sessions[i] the n[i] tokens tokens[i], for i <
 * @p n_sessions, as txl_session_eval(sessions[i], tokens[i], n[i], want)
 * would, all in one forward pass: afterwards each session holds its
 * memory, n_past, and rows of output (@p want: TXL_LOGITS_LAST, ALL or
 * NONE, for every one) as after that call.  Each n[i] is at most the
 * session's seg_len: one segment each (feed a longer text a segment per
 * call, or by txl_session_eval()).
 *
 * A model without memory (attn_type 2, 3) recomputes a window for each
 * token, a segment of its own: its sessions are evaluated one after
 * another by txl_session_eval().
 *
 * @return TXL_OK; TXL_ABORTED if the abort callback of any of the
 * sessions fired (each session's memory and n_past then as before the
 * call, no rows of output; without memory: the sessions before the one
 * stopped were evaluated); TXL_ERR_INVALID, nothing changed, for a NULL
 * argument, n_sessions < 1, a session of another model, a session twice,
 * sessions of different computes (txl_session_set_compute()), an n[i]
 * outside 1..seg_len, a token id out of range, or more tokens in all than
 * max_rows.
 */
TXL_API enum txl_status txl_batch_eval(struct txl_batch *batch,
				       struct txl_session *const *sessions,
				       const int32_t *const *tokens,
				       const int *n, int n_sessions,
				       enum txl_logits want);

/**
 * txl_session_logits() of each of the @p n_sessions sessions, those of
 * one row of output from one read of the output layer's weights (each
 * the floats that session computes alone), the others one after another;
 * sessions whose logits are computed already are left as they are.
 * @return TXL_OK; TXL_ERR_INVALID for a NULL argument, n_sessions < 1 or
 * a session of another model.
 */
TXL_API enum txl_status txl_batch_logits(struct txl_batch *batch,
					 struct txl_session *const *sessions,
					 int n_sessions);

/* ------------------------------------------------------------------ */
/* Sampling                                                            */

struct txl_sampler;

struct txl_sampler_params {
	size_t size;          /* sizeof(struct txl_sampler_params), as
				 txl_sampler_params_default() sets it */
	float temp;           /* temperature; 0 = greedy (argmax) */
	int top_k;            /* keep the k most likely; 0 = off */
	float top_p;          /* nucleus: smallest set with mass >= p; 1 = off */
	float min_p;          /* drop p < min_p * p_max; 0 = off */
	float repeat_penalty; /* CTRL-style penalty of recent tokens; 1 = off */
	int repeat_last_n;    /* tokens the penalty looks back; 0 = none */
	uint64_t seed;        /* the random stream; same seed, same choices */
};

/** temp 0.8, top_k 40, top_p 0.95, min_p 0.05, no penalty, seed 0. */
TXL_API struct txl_sampler_params txl_sampler_params_default(void);

/** Create a sampler for a vocabulary of @p n_vocab tokens; NULL if out of
 *  memory or a parameter is out of range (see txl_last_error()). */
TXL_API struct txl_sampler *txl_sampler_new(
	const struct txl_sampler_params *params, int n_vocab);

/** Free a sampler; NULL is a no-op. */
TXL_API void txl_sampler_free(struct txl_sampler *sampler);

/**
 * Pick a token from @p logits (float[n_vocab], not modified) and record
 * it in the sampler's history (for the repeat penalty).  If @p logprob is
 * not NULL it receives the token's log-probability under the model's
 * full distribution (before temperature and filtering).
 */
TXL_API int32_t txl_sampler_sample(struct txl_sampler *sampler,
				   const float *logits, float *logprob);

/**
 * Pick the token that follows the text fed to @p session: the
 * distribution and rules of txl_sampler_sample() on the last row of
 * txl_session_logits().  With an adaptive softmax, greedy choice and
 * plain temperature sampling go cluster by cluster, computing only the
 * clusters that can hold the token (other random numbers, the same
 * distribution).  @p logprob as in txl_sampler_sample().
 * @return the token; -1 if the session holds no output row (see
 * txl_last_error()).
 */
TXL_API int32_t txl_session_sample(struct txl_session *session,
				   struct txl_sampler *sampler,
				   float *logprob);

/** Record a token that was not sampled (a prompt token) in the history. */
TXL_API void txl_sampler_accept(struct txl_sampler *sampler, int32_t token);

/** Clear the history; the random stream goes on. */
TXL_API void txl_sampler_reset(struct txl_sampler *sampler);

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

/**
 * Log-softmax of @p n logits into @p out (may equal @p logits), computed
 * in double precision for the normaliser.
 */
TXL_API void txl_log_softmax(const float *logits, float *out, int n);

/**
 * log(sum(exp(x[i]))) of @p n values, stable (the normaliser of
 * txl_log_softmax: the log-probability of token t is x[t] minus this).
 */
TXL_API double txl_logsumexp(const float *x, int n);

#ifdef __cplusplus
}
#endif

#endif /* TXL_H */
