/* SPDX-License-Identifier: MIT */
/*
 * txl-model.c - a loaded model: what it derives from its weights (the
 * adaptive span's heads, the slots of the packed copies of its matrices),
 * what it answers about itself, and freeing it.  Reading it is
 * txl-params.c's (the hyperparameters) and txl-bind.c's (the weights);
 * txl-load.c puts those, and the tokenizer, together.
 */
#include <math.h>
#include <stdlib.h>

#include "txl-model.h"
#include "txl-gemm.h"
#include "txl-log.h"

/* The soft mask of an adaptive-span head of learned value cv at distance
 * x (AdaptiveMask.forward, in float as the original computes it:
 * mask_template + current_val * max_size, over the ramp, plus 1,
 * clamped; the template's column of distance x holds 1 - x).  The product
 * is rounded to float before the sum, as there (volatile: no fused
 * multiply-add). */
static float
span_mask(float cv, int attn_span, int ramp, int x)
{
	volatile float z = cv * (float)attn_span;
	const float t = ((float)(1 - x) + z) / (float)ramp + 1.0f;

	return t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
}

/* The adaptive span's heads (struct txl_head_span): the distances each
 * attends to, its window and its mask.  The original trims each layer's
 * keys to the last attn_span - trim_len (AdaptiveSpan.get_trim_len():
 * from the layer's largest current_val, in double, rounded down to a
 * multiple of 64), takes the softmax over them and masks it: a head here
 * reads the values of those of its keys whose mask is not 0, and the
 * scores of the rest of the window for the partition function only,
 * which the 1e-8 the original adds to the sum of the masked weights
 * weighs against (txl-attn.h: txl_attn_keys(), txl_attn_rest()). */
enum txl_status
txl_model_compute_spans(struct txl_model *m)
{
	const struct txl_hparams *hp = &m->hp;
	const int L = hp->n_layer, H = hp->n_head;
	const int S = hp->attn_span, R = hp->span_ramp;
	size_t n_logs = 0;

	m->spans = calloc((size_t)L * H, sizeof *m->spans);
	if (!m->spans)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int l = 0; l < L; l++) {
		const float *cv = m->layers[l].span;
		double most = -INFINITY;

		for (int h = 0; h < H; h++) {
			if (!isfinite(cv[h]))
				return txl_fail(TXL_ERR_FORMAT, "%s: tensor "
						"'layers.%d.dec_attn.current_val' "
						"holds %g (head %d)", m->file.path,
						l, (double)cv[h], h);
			most = fmax(most, (double)cv[h]);
		}
		/* get_current_max_size(), then get_trim_len() */
		double size = ceil(most * S) + R;
		size = size < 0 ? 0 : size > S ? S : size;
		int trim = S - (int)size < S - 1 ? S - (int)size : S - 1;
		trim = trim / 64 * 64;
		for (int h = 0; h < H; h++) {
			struct txl_head_span *sp = &m->spans[(size_t)l * H + h];
			int n = S - trim;

			while (n > 0 && span_mask(cv[h], S, R, n) <= 0.0f)
				n--;
			sp->n = n;
			sp->w = S - trim;
			sp->ramp = 1;
			while (sp->ramp <= n &&
			       span_mask(cv[h], S, R, sp->ramp) >= 1.0f)
				sp->ramp++;
			n_logs += (size_t)(n - sp->ramp + 1);
			if (n > m->span_max)
				m->span_max = n;
			/* a head that reads nothing needs no window */
			if (n > 0 && sp->w > m->window_max)
				m->window_max = sp->w;
		}
	}
	m->span_logs = malloc(sizeof(float) * (n_logs ? 2 * n_logs : 1));
	if (!m->span_logs)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	float *inv = m->span_logs + n_logs;
	n_logs = 0;
	for (int l = 0; l < L; l++) {
		for (int h = 0; h < H; h++) {
			struct txl_head_span *sp = &m->spans[(size_t)l * H + h];
			const float cv = m->layers[l].span[h];

			sp->log_mask = m->span_logs + n_logs;
			sp->inv_mask = inv + n_logs;
			for (int x = sp->ramp; x <= sp->n; x++, n_logs++) {
				const float mx = span_mask(cv, S, R, x);

				m->span_logs[n_logs] = logf(mx);
				inv[n_logs] = 1.0f / mx;
			}
		}
	}
	/* a session's memory by default: the longest window (a head keeps
	 * its window's keys, for the partition function) */
	m->hp.mem_len = m->window_max;
	return TXL_OK;
}

/* Every weight matrix of the products of segments gets a slot for its
 * packed copy (txl-gemm.h), made by the first product that takes it; the
 * matrices that are one (the input's table tied to the output) share
 * theirs.  Not r_net: a session multiplies it once, for its position
 * tables, which a copy would not repay. */
enum txl_status
txl_model_attach_packs(struct txl_model *m)
{
	const int L = m->hp.n_layer;
	struct txl_mat **mats = calloc((size_t)(6 * L + 2 * TXL_MAX_CLUSTERS +
						1), sizeof *mats);
	int n = 0, n_slots = 0;

	if (!mats)
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	for (int l = 0; l < L; l++) {
		struct txl_layer *ly = &m->layers[l];

		mats[n++] = &ly->qkv;
		mats[n++] = &ly->q_net;
		mats[n++] = &ly->kv_net;
		mats[n++] = &ly->o_net;
		mats[n++] = &ly->ff1;
		mats[n++] = &ly->ff2;
	}
	for (int c = 0; c < m->n_emb; c++)
		mats[n++] = &m->emb[c].proj;
	for (int c = 0; c < m->n_out; c++)
		mats[n++] = &m->out[c].w;
	mats[n++] = &m->cluster_w;
	m->packs = calloc((size_t)n, sizeof *m->packs);
	if (!m->packs) {
		free(mats);
		return txl_fail(TXL_ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		struct txl_mat *w = mats[i];

		if (!w->data)
			continue;
		for (int j = 0; j < i && !w->pack; j++)
			if (mats[j]->data == w->data &&
			    mats[j]->rows == w->rows &&
			    mats[j]->cols == w->cols)
				w->pack = mats[j]->pack;
		if (!w->pack)
			w->pack = &m->packs[n_slots++];
		if (w->dtype == TXL_BF16)
			m->bf16_mats = true;
	}
	m->n_packs = n_slots;
	free(mats);
	return TXL_OK;
}
void
txl_model_close(struct txl_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_packs; i++)
		txl_pack_slot_clear(&m->packs[i]);
	free(m->packs);
	free(m->converted);
	free(m->spans);
	free(m->span_logs);
	free(m->layers);
	txl_file_close(&m->file);
	free(m);
}

enum txl_status
txl_model_check_ids(const struct txl_model *m, const int32_t *ids, int n,
		    const char *what)
{
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= m->hp.n_token)
			return txl_fail(TXL_ERR_INVALID, "%s%stoken id %d out "
					"of range [0, %d)", what ? what : "",
					what ? ": " : "", ids[i],
					m->hp.n_token);
	return TXL_OK;
}

enum txl_status
txl_model_check_compute(const struct txl_model *m, enum txl_compute compute)
{
	if (compute != TXL_COMPUTE_F32 && compute != TXL_COMPUTE_BF16)
		return txl_fail(TXL_ERR_INVALID, "compute %d is none of "
				"TXL_COMPUTE_F32 (0) or TXL_COMPUTE_BF16 (1)",
				(int)compute);
	if (compute == TXL_COMPUTE_BF16 && !m->bf16_mats)
		return txl_fail(TXL_ERR_INVALID, "%s: compute bf16: none of "
				"its weight matrices is stored in BF16",
				m->file.path);
	return TXL_OK;
}

const struct txl_hparams *
txl_model_hparams(const struct txl_model *m)
{
	return &m->hp;
}

int64_t
txl_model_n_params(const struct txl_model *m)
{
	return m->n_params;
}

const char *
txl_model_meta(const struct txl_model *m, const char *key)
{
	if (!m || !key)
		return NULL;
	return txl_file_meta(&m->file, key);
}

uint64_t
txl_model_fingerprint(const struct txl_model *m)
{
	return m->fingerprint;
}

int
txl_model_span(const struct txl_model *m, int layer, int head)
{
	if (!m || !m->spans || layer < 0 || layer >= m->hp.n_layer ||
	    head < 0 || head >= m->hp.n_head)
		return -1;
	return m->spans[(size_t)layer * m->hp.n_head + head].n;
}

int
txl_model_window(const struct txl_model *m, int layer, int head)
{
	if (!m || !m->spans || layer < 0 || layer >= m->hp.n_layer ||
	    head < 0 || head >= m->hp.n_head)
		return -1;
	const struct txl_head_span *sp =
		&m->spans[(size_t)layer * m->hp.n_head + head];

	return sp->n > 0 ? sp->w : 0;
}

int
txl_model_layer_window(const struct txl_model *m, int layer)
{
	int w = -1;

	if (!m || !m->spans || layer < 0 || layer >= m->hp.n_layer)
		return -1;
	for (int h = 0; h < m->hp.n_head; h++) {
		const int k = txl_model_window(m, layer, h);

		w = k > w ? k : w;
	}
	return w;
}

int
txl_model_spans(const struct txl_model *m, int mem_len, double *mean)
{
	long long sum = 0;
	int most = 0;

	if (!m || !m->spans || (mem_len < 0 && mem_len != TXL_FROM_MODEL))
		return -1;
	for (int i = 0; i < m->hp.n_layer * m->hp.n_head; i++) {
		int n = m->spans[i].n;

		if (mem_len != TXL_FROM_MODEL && n > mem_len)
			n = mem_len;
		sum += n;
		most = n > most ? n : most;
	}
	if (mean)
		*mean = (double)sum / ((double)m->hp.n_layer * m->hp.n_head);
	return most;
}
