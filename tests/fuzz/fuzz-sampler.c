/* SPDX-License-Identifier: MIT */
/*
 * fuzz-sampler.c - libFuzzer harness of txl_sampler_sample() on arbitrary
 * logits: a model file decides the logits (weights may hold NaN or inf,
 * or overflow to them), so the sampler must return a valid id whatever
 * they are.
 *
 * Input: 24 bytes of settings (temp, top_k, top_p, min_p, repeat_penalty,
 * repeat_last_n as float/int32 bit patterns, out-of-range ones folded
 * into range), then the logits as float32; the vocabulary is their count
 * (at least 1).  Every setting combination is sampled a few times, with
 * history, as generation does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"

static float
get_f(const uint8_t *p)
{
	float f;

	memcpy(&f, p, sizeof f);
	return f;
}

static int32_t
get_i(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, sizeof v);
	return v;
}

/* fold any bit pattern into [lo, hi] (NaN and inf to lo) */
static float
fold(float f, float lo, float hi)
{
	if (!isfinite(f))
		return lo;
	f = fabsf(f);
	if (f > hi)
		f = fmodf(f, hi - lo) + lo;
	return f < lo ? lo : f;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct txl_sampler_params p;
	struct txl_sampler *s;
	float *logits;
	int V;

	if (size < 24 + 4)
		return 0;
	V = (int)((size - 24) / 4);
	p = txl_sampler_params_default();
	p.temp = fold(get_f(data), 0.0f, 100.0f);
	if (data[0] & 1)
		p.temp = 0.0f;		/* greedy */
	p.top_k = abs(get_i(data + 4) % (V + 2));
	p.top_p = fold(get_f(data + 8), 1e-6f, 1.0f);
	p.min_p = fold(get_f(data + 12), 0.0f, 1.0f);
	p.repeat_penalty = fold(get_f(data + 16), 1e-3f, 100.0f);
	p.repeat_last_n = abs(get_i(data + 20) % 64);
	p.seed = size;
	s = txl_sampler_new(&p, V);
	if (!s)
		fuzz_fail("sampler_new refused folded settings: %s",
			  txl_last_error());
	logits = malloc(sizeof *logits * (size_t)V);	/* exact size: ASan */
	if (!logits)
		fuzz_fail("out of memory");
	memcpy(logits, data + 24, sizeof *logits * (size_t)V);
	for (int k = 0; k < 4; k++) {
		float lp;
		int32_t tok = txl_sampler_sample(s, logits, &lp);

		if (tok < 0 || tok >= V)
			fuzz_fail("sampled token %d of %d", (int)tok, V);
		txl_sampler_accept(s, (int32_t)(k * 7 % V));
	}
	txl_sampler_free(s);
	free(logits);
	return 0;
}
