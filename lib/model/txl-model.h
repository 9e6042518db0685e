/* SPDX-License-Identifier: MIT */
/*
 * txl-model.h - a loaded model (txl-model.c): its hyperparameters and
 * weights as the layers, the adaptive input and the output layer use
 * them, and its tokenizer's data.  Not installed.
 */
#ifndef TXL_MODEL_H
#define TXL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"
#include "txl-file.h"
#include "txl-products.h"

struct txl_spm;

/* One decoder layer.  The attention's input projections depend on
 * attn_type: qkv_net for the relative ones (0, 1) and the adaptive span
 * (4: proj_query, proj_key and proj_val stacked), q_net and kv_net for
 * the vanilla MultiHeadAttn (2, 3); the rest is common to all. */
struct txl_layer {
	struct txl_mat qkv;	/* 0, 1, 4: (3 * n_head * d_head, d_model)
				   qkv_net */
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
	const float *span;	/* 4: (n_head) the learned spans, as fractions
				   of attn_span (AdaptiveMask.current_val) */
};

/* What an adaptive-span head attends to (adaptive_span.py): the keys at
 * distances 1 .. n before the query (n as the original trims the layer's
 * memory, and no further than its soft mask is non-zero), weighted by
 * the mask m(x) = clamp((1 - x + z) / ramp + 1, 0, 1), z = current_val *
 * attn_span, which is 1 below distance `ramp`.  The original's softmax
 * is taken over the layer's whole window, distances 1 .. w (w >= n), and
 * the masked weights are divided by their sum + 1e-8: the keys at
 * distances n + 1 .. w take part in that sum's scale (the partition
 * function), not in the output. */
struct txl_head_span {
	int n;			/* distances 1 .. n (0: none) */
	int w;			/* the layer's window: distances 1 .. w */
	int ramp;		/* the first distance whose mask is < 1 */
	const float *log_mask;	/* log m(x) of distances ramp .. n */
	const float *inv_mask;	/* 1 / m(x) of distances ramp .. n */
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
	TXL_NL_STRIP_EOS,	/* a line is stripped of white space and ends
				   with <eos>, an empty one is nothing, and
				   <eos> ends a text (dwdb/transformer-xl) */
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
	/* how the checkpoint's code computes (metadata layer_norm_eps,
	 * same_length_mask): the LayerNorm epsilon (the PyTorch code's 1e-5,
	 * TensorFlow's 1e-12); with same_length a query sees the last
	 * mem_len + 1 positions, as the TF code's mask lets it, not the
	 * last mem_len */
	double ln_eps;
	bool same_length_tf;
	/* (metadata emb_scale, proj_same_dim) whether the embedding is
	 * multiplied by sqrt(d_model), as the original's is; whether the
	 * input (and output) projection is there where d_embed = d_model,
	 * as dwdb/transformer-xl's always is */
	bool emb_scale;
	bool proj_same_dim;
	/* the adaptive span (attn_type 4) */
	const float *key_pe;	/* (d_head, attn_span): column attn_span - x
				   is the position vector of distance x */
	struct txl_head_span *spans; /* (n_layer, n_head), or NULL */
	int span_max;		/* the longest span */
	int window_max;		/* the longest window of a head with a
				   span (0: none) */
	float *span_logs;	/* the spans' log_mask, then inv_mask values,
				   owned */
	void *converted;	/* weights not usable in place (vectors in
				   F16 or BF16, unaligned data), owned */
	struct txl_pack_slot *packs; /* (n_packs) the packed copies of the
					weight matrices of products
					(txl-gemm.h), made on first use */
	int n_packs;
	bool bf16_mats;		/* some of them are stored in BF16 */
	int64_t n_params;
	struct txl_spm *spm;
	struct txl_vocab vocab;
	struct txl_piece *pieces; /* (n_token) running-text bytes per token */
	char *piece_bytes;
	uint64_t fingerprint;	/* of the file, never 0 (txl_hash) */
};

/* The adaptive span's heads (m->spans, m->span_max, m->window_max) from
 * the bound weights; sets m->hp.mem_len to the longest window. */
enum txl_status txl_model_compute_spans(struct txl_model *m);
/* A slot for the packed copy of every weight matrix of the products of
 * segments (m->packs, txl-gemm.h); notes m->bf16_mats. */
enum txl_status txl_model_attach_packs(struct txl_model *m);
/* Free what txl-load.c opened (not the tokenizer); NULL is fine. */
void txl_model_close(struct txl_model *m);

/* TXL_OK if each of the @p n ids is a token of @p m; else
 * TXL_ERR_INVALID naming the first that is not, after "@p what: " (what
 * NULL: nothing). */
enum txl_status txl_model_check_ids(const struct txl_model *m,
				    const int32_t *ids, int n,
				    const char *what);

#endif /* TXL_MODEL_H */
