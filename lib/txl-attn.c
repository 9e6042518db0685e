/* SPDX-License-Identifier: MIT */
/*
 * txl-attn.c - Transformer-XL's relative multi-head attention
 * (attn_type 0): scores of content (q + r_w_bias).k and position
 * (q + r_r_bias).R[distance], causal masking (with same_length, exactly
 * the last mem_len positions), softmax and the weighted sum of values.
 */
#include <math.h>
#include <stdlib.h>

#include "txl-internal.h"

/* sinusoid(pos)[k] = sin(pos f_k), [k + d/2] = cos(pos f_k) with
 * f_k = 1 / 10000^(2k/d), in float like the original's PositionalEmbedding
 * (so that large positions round the same way). */
static void
sinusoid(float *out, float pos, int d)
{
	int half = (d + 1) / 2;

	for (int k = 0; k < half; k++) {
		float expo = (float)(2 * k) / (float)d;
		float inv_freq = 1.0f / powf(10000.0f, expo);
		float a = pos * inv_freq;
		out[k] = sinf(a);
		if (half + k < d)
			out[half + k] = cosf(a);
	}
}

/* R[l] = r_net_l(sinusoid(distance)), distances 0 .. n_dist-1: the
 * relative-position term depends on the distance only, so it is computed
 * once per session. */
enum txl_status
txl_attn_init(struct txl_session *s)
{
	const struct txl_hparams *hp = &s->model->hp;
	const int d = hp->d_model, hd = hp->n_head * hp->d_head;
	float *pe = txl_alloc_floats((size_t)s->n_dist * (size_t)d);

	s->r = calloc((size_t)hp->n_layer, sizeof *s->r);
	if (!pe || !s->r) {
		free(pe);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	for (int t = 0; t < s->n_dist; t++)
		sinusoid(pe + (size_t)t * d, (float)t, d);
	for (int l = 0; l < hp->n_layer; l++) {
		s->r[l] = txl_alloc_floats((size_t)s->n_dist * (size_t)hd);
		if (!s->r[l]) {
			free(pe);
			return txl_fail(TXL_ERR_NOMEM, "out of memory");
		}
		txl_mat_mul(s->r[l], pe, s->n_dist, &s->model->layers[l].r_net,
			    false);
	}
	free(pe);
	return TXL_OK;
}

void
txl_attn_free(struct txl_session *s)
{
	if (!s->r)
		return;
	for (int l = 0; l < s->model->hp.n_layer; l++)
		free(s->r[l]);
	free(s->r);
	s->r = NULL;
}

/* Multi-head attention of the n rows of s->qkv (queries) over the window
 * rows [base, base + mlen + n) of layer l's K and V, into s->attn
 * (RelPartialLearnableMultiHeadAttn after qkv_net). */
void
txl_attn_forward(struct txl_session *s, int l, int n, int base)
{
	const struct txl_hparams *hp = &s->model->hp;
	const struct txl_layer *ly = &s->model->layers[l];
	const int H = hp->n_head, D = hp->d_head, hd = H * D;
	const int mlen = s->mlen, klen = mlen + n;
	const int n_bd = klen < s->n_dist ? klen : s->n_dist;
	const float scale = 1.0f / sqrtf((float)D);
	const float *K = s->k[l] + (size_t)base * hd;
	const float *V = s->v[l] + (size_t)base * hd;

	for (int h = 0; h < H; h++) {
		/* rw_head_q = q + r_w_bias ; rr_head_q = q + r_r_bias */
		for (int i = 0; i < n; i++) {
			const float *q = s->qkv + (size_t)i * 3 * hd + h * D;
			/* in size_t: seg_len * d_head may pass INT_MAX (65536 * 65536) */
			float *qw = s->qw + (size_t)i * D;
			float *qr = s->qr + (size_t)i * D;
			for (int c = 0; c < D; c++) {
				qw[c] = q[c] + ly->r_w_bias[h * D + c];
				qr[c] = q[c] + ly->r_r_bias[h * D + c];
			}
		}
		/* AC[i, j] = rw_head_q_i . k_j */
		txl_gemm_nt(s->score, klen, s->qw, D, K + h * D, hd, n, D, klen);
		/* BD[i, t] = rr_head_q_i . R[t], t = clamped distance */
		txl_gemm_nt(s->bd, n_bd, s->qr, D, s->r[l] + h * D, hd, n, D,
			    n_bd);

		for (int i = 0; i < n; i++) {
			float *sc = s->score + (size_t)i * klen;
			const float *bd = s->bd + (size_t)i * n_bd;
			const int qpos = mlen + i;
			/* causal; with same_length exactly the last mem_len
			 * positions, the query's own included */
			int lo = s->same_length ? qpos - s->mem_len + 1 : 0;
			float max = -INFINITY;
			double sum = 0;

			if (lo < 0)
				lo = 0;
			for (int j = lo; j <= qpos; j++) {
				int t = qpos - j;	/* _rel_shift */
				if (t >= s->n_dist)
					t = s->n_dist - 1;	/* clamp_len */
				sc[j] = (sc[j] + bd[t]) * scale;
				max = sc[j] > max ? sc[j] : max;
			}
			for (int j = lo; j <= qpos; j++) {
				sc[j] = expf(sc[j] - max);
				sum += sc[j];
			}
			const float inv = (float)(1.0 / sum);
			for (int j = 0; j < lo; j++)
				sc[j] = 0.0f;
			for (int j = lo; j <= qpos; j++)
				sc[j] *= inv;
			for (int j = qpos + 1; j < klen; j++)
				sc[j] = 0.0f;
		}
		/* attn_vec[:, h] = prob . v */
		txl_gemm_nn(s->attn + h * D, hd, s->score, klen, V + h * D, hd,
			    n, klen, D);
	}
}

