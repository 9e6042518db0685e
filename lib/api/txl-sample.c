/* SPDX-License-Identifier: MIT */
/*
 * txl-sample.c - choosing the next token.
 *
 * Order of operations, each step optional:
 *   logit bias (added), repeat penalty on the last repeat_last_n tokens
 *   (CTRL: a positive logit is divided by the penalty, a negative one
 *   multiplied), frequency and presence penalties (OpenAI's, over the
 *   tokens this sampler drew), the UTF-8 mask (below);
 *   temp == 0: argmax, done; otherwise logits / temp, softmax, then
 *   either mirostat 2 (the tokens of surprise -log2 p at most mu, mu
 *   moved by eta towards the target tau after each draw), or top-k (the
 *   k most likely), typical (the tokens whose surprise is closest to the
 *   entropy of what is left, up to typical_p of its mass), min-p
 *   (p >= min_p * p_max), top-p (the smallest set, most likely first,
 *   holding at least top_p of the mass left); one draw from what
 *   remains, renormalised.
 * The random stream is the sampler's own (xorshift64*, seeded by the
 * caller through splitmix64): same seed and inputs, same tokens.
 *
 * With txl_sampler_keep_utf8(), before all of it, the tokens that would
 * make the text invalid UTF-8 get no probability: with a byte-fallback
 * vocabulary a lone byte token can start, continue or break a character,
 * and what the text still waits for (the automaton below) decides which
 * may come next.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "txl-sample.h"
#include "txl-log.h"
#include "txl-session.h"

/* Advance @p w over @p n bytes; false if they break UTF-8 (*w is then
 * undefined). */
static bool
utf8_step(struct utf8_wait *w, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned c = b[i];

		if (w->need) {
			if (c < w->lo || c > w->hi)
				return false;
			w->need--;
			w->lo = 0x80;
			w->hi = 0xbf;
			continue;
		}
		w->lo = 0x80;
		w->hi = 0xbf;
		if (c < 0x80)
			continue;
		if (c >= 0xc2 && c <= 0xdf) {
			w->need = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			w->need = 2;
			if (c == 0xe0)
				w->lo = 0xa0;
			else if (c == 0xed)
				w->hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			w->need = 3;
			if (c == 0xf0)
				w->lo = 0x90;
			else if (c == 0xf4)
				w->hi = 0x8f;
		} else {
			return false;	/* a continuation, C0, C1, F5-FF */
		}
	}
	return true;
}

struct txl_sampler_params
txl_sampler_params_default(void)
{
	return (struct txl_sampler_params){
		.size = sizeof(struct txl_sampler_params),
		.temp = 0.8f,
		.top_k = 40,
		.top_p = 0.95f,
		.min_p = 0.05f,
		.repeat_penalty = 1.0f,
		.repeat_last_n = 64,
		.seed = 0,
		.typical_p = 1.0f,
		.mirostat_eta = 0.1f,
	};
}

static uint64_t
splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

float
txl_sampler_random(struct txl_sampler *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return (float)((s->rng * 0x2545f4914f6cdd1dull) >> 40) / 16777216.0f;
}

struct txl_sampler *
txl_sampler_new(const struct txl_sampler_params *params, int n_vocab)
{
	struct txl_sampler_params p = txl_sampler_params_default();
	struct txl_sampler *s;

	if (params && txl_copy_sized(&p, TXL_END_OF(struct txl_sampler_params,
						    seed), sizeof p, params,
				     "txl_sampler_params") != TXL_OK)
		return NULL;
	if (n_vocab <= 0 || !(p.temp >= 0) || !isfinite(p.temp) ||
	    p.top_k < 0 || !(p.top_p > 0 && p.top_p <= 1) ||
	    !(p.min_p >= 0 && p.min_p <= 1) ||
	    !(p.repeat_penalty > 0) || !isfinite(p.repeat_penalty) ||
	    p.repeat_last_n < 0 || p.repeat_last_n > TXL_REPEAT_LAST_N_MAX ||
	    !isfinite(p.frequency_penalty) || !isfinite(p.presence_penalty) ||
	    !(p.typical_p > 0 && p.typical_p <= 1) ||
	    !(p.mirostat_tau >= 0) || !isfinite(p.mirostat_tau) ||
	    !(p.mirostat_eta > 0) || !isfinite(p.mirostat_eta) ||
	    p.n_logit_bias < 0 || (p.n_logit_bias > 0 &&
				   (!p.logit_bias_ids || !p.logit_bias))) {
		txl_fail(TXL_ERR_INVALID, "sampler setting out of range");
		return NULL;
	}
	for (int i = 0; i < p.n_logit_bias; i++)
		if (p.logit_bias_ids[i] < 0 || p.logit_bias_ids[i] >= n_vocab ||
		    isnan(p.logit_bias[i]) || p.logit_bias[i] == INFINITY) {
			txl_fail(TXL_ERR_INVALID, "logit bias %d: token %d of "
				 "%d, bias %g", i, (int)p.logit_bias_ids[i],
				 n_vocab, (double)p.logit_bias[i]);
			return NULL;
		}
	s = calloc(1, sizeof *s);
	if (!s) {
		txl_fail(TXL_ERR_NOMEM, "out of memory");
		return NULL;
	}
	s->p = p;
	s->n_vocab = n_vocab;
	s->rng = splitmix64(p.seed);
	if (s->rng == 0)
		s->rng = 1;
	s->work = malloc(sizeof *s->work * (size_t)n_vocab);
	s->idx = malloc(sizeof *s->idx * (size_t)n_vocab);
	s->history = malloc(sizeof *s->history *
			    (size_t)(p.repeat_last_n ? p.repeat_last_n : 1));
	/* what the optional steps need, only when they are on */
	if (p.repeat_penalty != 1.0f && p.repeat_last_n > 0 &&
	    !(s->seen = calloc((size_t)n_vocab, sizeof *s->seen)))
		goto nomem;
	if ((p.frequency_penalty != 0 || p.presence_penalty != 0) &&
	    (!(s->count = calloc((size_t)n_vocab, sizeof *s->count)) ||
	     !(s->drawn = malloc(sizeof *s->drawn * (size_t)n_vocab))))
		goto nomem;
	if (p.typical_p < 1 && !(s->aux = malloc(sizeof *s->aux *
						 (size_t)n_vocab)))
		goto nomem;
	if (p.n_logit_bias > 0) {
		s->bias_ids = malloc(sizeof *s->bias_ids *
				     (size_t)p.n_logit_bias);
		s->bias = malloc(sizeof *s->bias * (size_t)p.n_logit_bias);
		if (!s->bias_ids || !s->bias)
			goto nomem;
		memcpy(s->bias_ids, p.logit_bias_ids,
		       sizeof *s->bias_ids * (size_t)p.n_logit_bias);
		memcpy(s->bias, p.logit_bias,
		       sizeof *s->bias * (size_t)p.n_logit_bias);
		s->n_bias = p.n_logit_bias;
	}
	/* the caller's arrays are not kept */
	s->p.logit_bias_ids = NULL;
	s->p.logit_bias = NULL;
	s->mu = 2 * p.mirostat_tau;
	if (!s->work || !s->idx || !s->history) {
nomem:
		txl_sampler_free(s);
		txl_fail(TXL_ERR_NOMEM, "out of memory");
		return NULL;
	}
	return s;
}

void
txl_sampler_free(struct txl_sampler *s)
{
	if (!s)
		return;
	free(s->work);
	free(s->idx);
	free(s->history);
	free(s->u8_bad);
	free(s->u8_cont);
	free(s->u8_keep);
	free(s->aux);
	free(s->seen);
	free(s->count);
	free(s->drawn);
	free(s->bias_ids);
	free(s->bias);
	free(s);
}

static const unsigned char *
piece_of(const struct txl_model *m, int32_t id, size_t *len)
{
	*len = m->pieces[id].len;
	return (const unsigned char *)m->piece_bytes + m->pieces[id].off;
}

/* The text goes on with @p token: what it waits for now.  A token that
 * breaks it (a prompt's ids may) starts afresh after itself. */
static void
utf8_accept(struct txl_sampler *s, int32_t token)
{
	const unsigned char *b;
	size_t n;

	if (!s->u8_model || token < 0 || token >= s->n_vocab)
		return;
	b = piece_of(s->u8_model, token, &n);
	if (utf8_step(&s->u8, b, n))
		return;
	s->u8 = (struct utf8_wait){ 0 };
	/* the longest tail of the piece that is UTF-8 on its own */
	for (size_t k = 0; k < n; k++) {
		struct utf8_wait w = { 0 };

		if (utf8_step(&w, b + k, n - k)) {
			s->u8 = w;
			return;
		}
	}
}

enum txl_status
txl_sampler_keep_utf8(struct txl_sampler *s, const struct txl_model *m)
{
	int32_t *bad, *cont;
	int n_bad = 0, n_cont = 0;

	if (!s || !m) {
		txl_fail(TXL_ERR_INVALID, "keep_utf8: no sampler or model");
		return TXL_ERR_INVALID;
	}
	if (m->hp.n_token != s->n_vocab || !m->pieces) {
		txl_fail(TXL_ERR_INVALID, "keep_utf8: the sampler is for %d "
			 "tokens, the model has %d", s->n_vocab,
			 m->hp.n_token);
		return TXL_ERR_INVALID;
	}
	bad = malloc(sizeof *bad * (size_t)s->n_vocab);
	cont = malloc(sizeof *cont * (size_t)s->n_vocab);
	if (!bad || !cont) {
		free(bad);
		free(cont);
		txl_fail(TXL_ERR_NOMEM, "out of memory");
		return TXL_ERR_NOMEM;
	}
	for (int32_t t = 0; t < s->n_vocab; t++) {
		struct utf8_wait w = { 0 };
		size_t n;
		const unsigned char *b = piece_of(m, t, &n);

		if (!utf8_step(&w, b, n))
			bad[n_bad++] = t;
		if (n > 0 && b[0] >= 0x80 && b[0] <= 0xbf)
			cont[n_cont++] = t;
	}
	free(s->u8_bad);
	free(s->u8_cont);
	free(s->u8_keep);
	s->u8_bad = bad;
	s->u8_cont = cont;
	s->n_u8_bad = n_bad;
	s->n_u8_cont = n_cont;
	s->u8_keep = malloc(sizeof *s->u8_keep * (size_t)(n_cont + 1));
	s->u8_model = m;
	s->u8 = (struct utf8_wait){ 0 };
	if (!s->u8_keep) {
		s->u8_model = NULL;
		txl_fail(TXL_ERR_NOMEM, "out of memory");
		return TXL_ERR_NOMEM;
	}
	return TXL_OK;
}

/* Give the tokens that would break the text's UTF-8 no probability: the
 * ones that cannot start a character between characters, all but the
 * continuations that fit inside one.  If nothing would be left (a
 * vocabulary without the byte tokens), nothing is masked. */
static void
utf8_mask(struct txl_sampler *s, float *w)
{
	int kept = 0;

	if (!s->u8_model)
		return;
	if (s->u8.need == 0) {
		for (int i = 0; i < s->n_u8_bad; i++)
			w[s->u8_bad[i]] = -INFINITY;
		return;
	}
	for (int i = 0; i < s->n_u8_cont; i++) {
		int32_t t = s->u8_cont[i];
		struct utf8_wait u = s->u8;
		size_t n;
		const unsigned char *b = piece_of(s->u8_model, t, &n);

		s->u8_keep[i] = utf8_step(&u, b, n) ? w[t] : -INFINITY;
		kept += s->u8_keep[i] > -INFINITY;
	}
	if (kept == 0)
		return;
	for (int i = 0; i < s->n_vocab; i++)
		w[i] = -INFINITY;
	for (int i = 0; i < s->n_u8_cont; i++)
		w[s->u8_cont[i]] = s->u8_keep[i];
}

void
txl_sampler_accept(struct txl_sampler *s, int32_t token)
{
	utf8_accept(s, token);
	if (s->p.repeat_last_n == 0)
		return;
	s->history[s->hist_pos] = token;
	s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
	if (s->n_hist < s->p.repeat_last_n)
		s->n_hist++;
}

void
txl_sampler_reset(struct txl_sampler *s)
{
	s->n_hist = 0;
	s->hist_pos = 0;
	s->u8 = (struct utf8_wait){ 0 };
	for (int i = 0; i < s->n_drawn; i++)
		s->count[s->drawn[i]] = 0;
	s->n_drawn = 0;
	s->mu = 2 * s->p.mirostat_tau;
}

static int
cmp_prob_desc(const void *a, const void *b, void *probs)
{
	const float *p = probs;
	float x = p[*(const int32_t *)a], y = p[*(const int32_t *)b];

	if (x != y)
		return x > y ? -1 : 1;
	/* ties by id, so that the order (and the draw) is deterministic */
	return *(const int32_t *)a - *(const int32_t *)b;
}

static int
cmp_dist_asc(const void *a, const void *b, void *dist)
{
	const float *d = dist;
	float x = d[*(const int32_t *)a], y = d[*(const int32_t *)b];

	if (x != y)
		return x < y ? -1 : 1;
	return *(const int32_t *)a - *(const int32_t *)b;
}

/* Keep the k most likely of idx[0..n) (probabilities, or logits, in p),
 * unordered. */
static int
keep_top_k(int32_t *idx, int n, const float *p, int k)
{
	int lo = 0, hi = n - 1;

	if (k >= n)
		return n;
	/* quickselect: afterwards idx[0..k) hold the k largest */
	while (lo < hi) {
		float pivot = p[idx[(lo + hi) / 2]];
		int i = lo, j = hi;
		while (i <= j) {
			while (p[idx[i]] > pivot)
				i++;
			while (p[idx[j]] < pivot)
				j--;
			if (i <= j) {
				int32_t t = idx[i];
				idx[i++] = idx[j];
				idx[j--] = t;
			}
		}
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			break;
	}
	return k;
}

/* The logits as the draw sees them: bias, penalties, the UTF-8 mask. */
static void
adjust(struct txl_sampler *s, const float *logits, float *w)
{
	const int V = s->n_vocab;

	memcpy(w, logits, sizeof *w * (size_t)V);
	/* A NaN logit (a model whose weights hold NaN or overflow) gets no
	 * probability: as -inf it keeps every comparison below total. */
	for (int i = 0; i < V; i++)
		if (isnan(w[i]))
			w[i] = -INFINITY;
	for (int i = 0; i < s->n_bias; i++)
		w[s->bias_ids[i]] += s->bias[i];
	if (s->seen && s->n_hist > 0) {
		/* each distinct recent token is penalised once, however
		 * often it occurs */
		if (++s->stamp == 0) {
			memset(s->seen, 0, sizeof *s->seen * (size_t)V);
			s->stamp = 1;
		}
		for (int i = 0; i < s->n_hist; i++) {
			int32_t t = s->history[i];

			if (t < 0 || t >= V || s->seen[t] == s->stamp)
				continue;
			s->seen[t] = s->stamp;
			w[t] = w[t] > 0 ? w[t] / s->p.repeat_penalty
				: w[t] * s->p.repeat_penalty;
		}
	}
	for (int i = 0; i < s->n_drawn; i++) {
		int32_t t = s->drawn[i];

		w[t] -= (float)s->count[t] * s->p.frequency_penalty +
			s->p.presence_penalty;
	}
	utf8_mask(s, w);
}

/* Typical sampling on the n candidates idx (weights w, mass): keep the
 * ones whose surprise -log p is closest to the entropy, up to typical_p
 * of the mass, at least one.  Returns how many are left, first in idx. */
static int
keep_typical(struct txl_sampler *s, int32_t *idx, int n, float *w,
	     double mass)
{
	double h = 0, keep = s->p.typical_p, acc = 0;
	float *d = s->aux;
	int m = 0;

	for (int i = 0; i < n; i++) {
		double q = w[idx[i]] / mass;

		if (q > 0)
			h -= q * log(q);
	}
	for (int i = 0; i < n; i++) {
		double q = w[idx[i]] / mass;

		d[idx[i]] = q > 0 ? (float)fabs(-log(q) - h) : INFINITY;
	}
	qsort_r(idx, (size_t)n, sizeof *idx, cmp_dist_asc, d);
	while (m < n && acc < keep)
		acc += w[idx[m++]] / mass;
	return m > 0 ? m : 1;
}

/* Mirostat 2 on the n candidates idx, most likely first (weights w,
 * mass): the ones of surprise -log2 p <= mu, at least one. */
static int
keep_mirostat(const struct txl_sampler *s, const int32_t *idx, int n,
	      const float *w, double mass)
{
	int m = 0;

	while (m < n && -log2(w[idx[m]] / mass) <= s->mu)
		m++;
	return m > 0 ? m : 1;
}

int32_t
txl_sampler_sample(struct txl_sampler *s, const float *logits, float *logprob)
{
	const int V = s->n_vocab;
	float *w = s->work;
	int32_t *idx = s->idx;
	int32_t tok = 0;
	int n = V;

	adjust(s, logits, w);
	if (s->p.temp == 0.0f) {
		for (int i = 1; i < V; i++)
			if (w[i] > w[tok])
				tok = i;
	} else {
		const bool mirostat = s->p.mirostat_tau > 0;
		float max = -INFINITY;
		double mass = 0, cum = 0;

		for (int i = 0; i < V; i++)
			max = w[i] > max ? w[i] : max;
		if (!isfinite(max)) {
			/* +inf: those tokens hold all the mass, take the
			 * first; all -inf: no distribution, token 0.  (exp
			 * of inf - inf would be NaN, and every token would
			 * be filtered out.) */
			while (tok < V - 1 && w[tok] != max)
				tok++;
			goto done;
		}
		/* now w[i] - max is finite or -inf: every w[i] is in
		 * [0, 1] and the first maximum is exactly 1, so min-p,
		 * top-k and top-p each keep at least that one.  The
		 * probabilities rise with the logits, so top-k picks on
		 * the logits and only its k get an exp (of 8,000 tokens,
		 * 40: the exps were a tenth of a step of --n-samples 8) */
		for (int i = 0; i < V; i++)
			idx[i] = i;
		if (s->p.top_k > 0 && !mirostat)
			n = keep_top_k(idx, n, w, s->p.top_k);
		for (int i = 0; i < n; i++)
			w[idx[i]] = expf((w[idx[i]] - max) / s->p.temp);
		if (mirostat || s->p.typical_p < 1) {
			for (int i = 0; i < n; i++)
				mass += w[idx[i]];
			if (mirostat) {
				/* only the tokens of p >= 2^-mu can stay,
				 * and the most likely (weight exactly 1):
				 * the rest need no sorting */
				double floor = mass * exp2(-(double)s->mu);
				int m = 0;

				for (int i = 0; i < n; i++)
					if (w[idx[i]] >= floor ||
					    w[idx[i]] == 1.0f)
						idx[m++] = idx[i];
				qsort_r(idx, (size_t)m, sizeof *idx,
					cmp_prob_desc, w);
				n = keep_mirostat(s, idx, m, w, mass);
			} else {
				n = keep_typical(s, idx, n, w, mass);
			}
			mass = 0;
		}
		if (s->p.min_p > 0 && !mirostat) {
			/* p_max is exp(0) = 1 before normalisation */
			int m = 0;
			for (int i = 0; i < n; i++)
				if (w[idx[i]] >= s->p.min_p)
					idx[m++] = idx[i];
			if (m == 0)	/* typical may have dropped p_max */
				m = 1;
			n = m;
		}
		qsort_r(idx, (size_t)n, sizeof *idx, cmp_prob_desc, w);
		for (int i = 0; i < n; i++)
			mass += w[idx[i]];
		if (s->p.top_p < 1.0f && !mirostat) {
			double keep = s->p.top_p * mass, acc = 0;
			int m = 0;
			while (m < n && acc < keep)
				acc += w[idx[m++]];
			n = m;
			mass = acc;
		}
		TXL_ASSERT(n > 0);
		double coin = txl_sampler_random(s) * mass;
		tok = idx[n - 1];
		for (int i = 0; i < n; i++) {
			cum += w[idx[i]];
			if (coin < cum) {
				tok = idx[i];
				break;
			}
		}
		if (mirostat)	/* the surprise of the draw, renormalised */
			s->mu -= s->p.mirostat_eta *
				(float)(-log2(w[tok] / mass) -
					s->p.mirostat_tau);
	}
done:
	if (logprob)
		*logprob = (float)(logits[tok] - txl_logsumexp(logits, V));
	if (s->count && s->count[tok]++ == 0)
		s->drawn[s->n_drawn++] = tok;
	txl_sampler_accept(s, tok);
	return tok;
}
