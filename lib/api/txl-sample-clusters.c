/* SPDX-License-Identifier: MIT */
/*
 * txl-sample-clusters.c - sampling from a session's adaptive softmax,
 * cluster by cluster (txl_session_sample()): greedy and plain
 * temperature sampling compute only the tail clusters the draw needs;
 * anything else samples the full distribution (txl-sample.c).
 */
#include <math.h>

#include "txl-sample.h"
#include "txl-log.h"
#include "txl-output.h"
#include "txl-session.h"

/* Greedy: the most likely token, the first of equals as the full argmax
 * takes it.  A tail token's log-probability is its cluster's head entry
 * plus a log-probability <= 0 within the cluster, so a cluster whose head
 * entry is not above the best found so far cannot hold a better token
 * and is never computed. */
static int32_t
greedy_clusters(struct txl_session *s, int r, const float *clus_lp,
		float *row, float *best_lp)
{
	const struct txl_model *m = s->model;
	float best = -INFINITY;
	int32_t tok = 0;

	for (int i = 0; i < m->out[0].hi; i++)
		if (row[i] > best) {
			best = row[i];
			tok = i;
		}
	for (int c = 1; c < m->n_out; c++) {
		const struct txl_out_cluster *oc = &m->out[c];
		float *lp = row + oc->lo;

		if (!(clus_lp[c - 1] > best))
			continue;
		txl_out_tail(&s->out, r, c, lp);
		for (int j = 0; j < oc->hi - oc->lo; j++) {
			float v = clus_lp[c - 1] + lp[j];
			if (v > best) {
				best = v;
				tok = oc->lo + j;
			}
		}
	}
	*best_lp = best;
	return tok;
}

/* Plain temperature sampling, p(t)^(1/temp) normalised, by rejection:
 * a tail cluster c is proposed with its head probability to the power
 * a = 1/temp times a bound B_c of Z_c = sum over its tokens of
 * p(t | c)^a (1 for a >= 1; size^(1-a) for a < 1, the power mean
 * inequality), and once computed accepted with probability Z_c / B_c,
 * after which its weight is exact.  Each accepted draw follows the target
 * distribution, so the token does; only proposed clusters are computed.
 * Returns -1 if the numbers are not finite (the caller then samples the
 * full distribution, which knows what to do with them). */
static int32_t
temperature_clusters(struct txl_sampler *smp, struct txl_session *s, int r,
		     const float *clus_lp, float *row, float *tok_lp)
{
	const struct txl_model *m = s->model;
	const int c0 = m->out[0].hi, nc = m->n_out - 1;
	const double a = 1.0 / smp->p.temp;
	double log_w[TXL_MAX_CLUSTERS];	/* log(B_c) or log(Z_c) */
	bool known[TXL_MAX_CLUSTERS] = { false };

	for (int c = 1; c <= nc; c++) {
		double size = m->out[c].hi - m->out[c].lo;
		log_w[c] = a >= 1 ? 0.0 : (1 - a) * log(size);
	}
	for (;;) {
		double max = -INFINITY, total = 0, coin, cum = 0;
		int pick = -1;	/* < c0: a shortlist token; else cluster */

		for (int i = 0; i < c0; i++)
			max = fmax(max, a * row[i]);
		for (int c = 1; c <= nc; c++)
			max = fmax(max, a * clus_lp[c - 1] + log_w[c]);
		if (!isfinite(max))
			return -1;
		for (int i = 0; i < c0; i++)
			total += exp(a * row[i] - max);
		for (int c = 1; c <= nc; c++)
			total += exp(a * clus_lp[c - 1] + log_w[c] - max);
		coin = txl_sampler_random(smp) * total;
		for (int i = 0; i < c0 && pick < 0; i++) {
			cum += exp(a * row[i] - max);
			if (coin < cum)
				pick = i;
		}
		for (int c = 1; c <= nc && pick < 0; c++) {
			cum += exp(a * clus_lp[c - 1] + log_w[c] - max);
			if (coin < cum || c == nc)
				pick = c0 + c - 1;
		}
		if (pick < c0) {
			*tok_lp = row[pick];
			return pick;
		}

		const int c = pick - c0 + 1, lo = m->out[c].lo;
		const int size = m->out[c].hi - lo;
		float *lp = row + lo;

		if (!known[c]) {
			double zmax = -INFINITY, z = 0, bound = log_w[c];

			txl_out_tail(&s->out, r, c, lp);
			for (int j = 0; j < size; j++)
				zmax = fmax(zmax, a * lp[j]);
			for (int j = 0; j < size; j++)
				z += exp(a * lp[j] - zmax);
			if (!isfinite(zmax) || !(z > 0))
				return -1;
			log_w[c] = zmax + log(z);
			known[c] = true;
			if (txl_sampler_random(smp) >= exp(log_w[c] - bound))
				continue;	/* rejected: propose again */
		}
		/* within the cluster: p(t | c)^a / Z_c */
		coin = txl_sampler_random(smp) * exp(log_w[c]);
		cum = 0;
		for (int j = 0; j < size; j++) {
			cum += exp(a * lp[j]);
			if (coin < cum || j == size - 1) {
				*tok_lp = clus_lp[c - 1] + lp[j];
				return lo + j;
			}
		}
	}
}

int32_t
txl_session_sample(struct txl_session *s, struct txl_sampler *smp,
		   float *logprob)
{
	const struct txl_model *m = s->model;
	const int V = m->hp.n_token, r = s->out.n_rows - 1;
	const struct txl_sampler_params *p = &smp->p;
	/* a vocabulary of whole characters (words) needs no mask */
	const bool plain = p->repeat_penalty == 1.0f && !smp->count &&
		smp->n_bias == 0 && (p->temp == 0.0f ||
		(p->top_k == 0 && p->top_p >= 1.0f && p->min_p == 0.0f &&
		 p->typical_p >= 1.0f && p->mirostat_tau == 0)) &&
		(!smp->u8_model || (smp->n_u8_bad == 0 && smp->u8.need == 0));
	float clus_lp[TXL_MAX_CLUSTERS], lp = 0;
	int32_t tok = -1;

	if (r < 0) {
		txl_fail(TXL_ERR_INVALID, "sample: no output to sample from "
			 "(nothing evaluated)");
		return -1;
	}
	if (smp->n_vocab != V) {
		txl_fail(TXL_ERR_INVALID, "sample: the sampler is for %d "
			 "tokens, the model has %d", smp->n_vocab, V);
		return -1;
	}
	if (m->n_out > 1 && plain && !s->out.valid) {
		/* the row's slot of the logits holds the shortlist's and the
		 * computed clusters' log-probabilities */
		float *row = s->out.logits + (size_t)r * V;

		txl_out_head(&s->out, r, row, clus_lp);
		if (p->temp == 0.0f)
			tok = greedy_clusters(s, r, clus_lp, row, &lp);
		else
			tok = temperature_clusters(smp, s, r, clus_lp, row,
						   &lp);
	}
	if (tok < 0)	/* the full distribution */
		tok = txl_sampler_sample(smp, txl_session_logits(s) +
					 (size_t)r * V, &lp);
	else
		txl_sampler_accept(smp, tok);
	/* a row with NaN or +inf has no finite log-probability (and a
	 * sampler picks token 0 from it) */
	if (tok >= 0 && !isfinite(lp)) {
		txl_session_nonfinite(s);
		return -1;
	}
	if (logprob)
		*logprob = lp;
	return tok;
}
