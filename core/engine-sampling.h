/* SPDX-License-Identifier: MIT */
/*
 * engine-sampling.h - the engine's sampling (engine.h): the seed of the
 * run, the sampler kept across generations and what it was made from,
 * and the window of recent tokens the repeat penalty sees.
 */
#ifndef TXLGEN_ENGINE_SAMPLING_H
#define TXLGEN_ENGINE_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"

#include "engine.h"

struct engine_sampling {
	uint64_t seed;         /* the effective seed */
	bool keep_sampler;     /* one sampler across generations (REPL) */
	struct txl_sampler *sampler;  /* that sampler, its settings, */
	struct txl_sampler_params sampler_params;
	uint64_t sampler_seed; /* the session's seed it was made for */
	uint64_t n_samplers;   /* and how many were made for that seed */
	struct logit_bias bias; /* --logit-bias made for the model */
	struct tokvec recent;  /* the last ids of the session's text (at
				  least repeat_last_n of them when there
				  are): the repeat penalty's window, saved
				  with the memory */
};

#endif /* TXLGEN_ENGINE_SAMPLING_H */
