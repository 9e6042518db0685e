/* SPDX-License-Identifier: MIT */
/*
 * fuzz-api.c - libFuzzer harness of txlgen-server's request JSON: a body
 * as a client sends it, through cJSON and api_completion_job() of
 * server/api.c (every field checked, prompts tokenized by the model in
 * TXLGEN_FUZZ_MODEL, default tests/data's unit model as meson builds it),
 * then the response and the stream events of the job as parsed.
 *
 * A job that parses holds what the server relies on: choices 1 to
 * max_n times the prompts, token ids in the vocabulary, max_tokens and
 * logprobs in range; a refused one has a 400 and a one-line message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "config.h"
#include "engine-model.h"
#include "errors.h"
#include "srv.h"

struct srv_opts srv = {
	.parallel = 4, .max_sessions = 4, .max_body = 1 << 20,
	.max_prompt = 4096, .max_tokens = 1024, .max_n = 8,
	.max_logprob_rows = 1 << 20,
	.max_connections = 8, .max_queue = 8, .timeout_s = 1,
	.model_name = "fuzz",
};

static struct engine e;
static struct txlgen_options opts;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *m = getenv("TXLGEN_FUZZ_MODEL");

	fuzz_quiet_log();
	options_init(&opts);
	if (!m)
		fuzz_fail("set TXLGEN_FUZZ_MODEL to a model file");
	if (engine_load_model(&e, &opts, m) != EXIT_OK)
		fuzz_fail("cannot load %s", m);
	sched_set_engine(&e);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *req = cJSON_ParseWithLength((const char *)data, size);
	int status = 0;
	char *err = NULL, *out;
	struct job *j;

	if (!req)
		return 0;
	j = api_completion_job(req, &status, &err);
	cJSON_Delete(req);
	if (!j) {
		if (status != 400 || !err || !*err || strchr(err, '\n'))
			fuzz_fail("refused with %d '%s'", status, err ? err : "");
		free(err);
		return 0;
	}
	if (j->n_tasks < 1 || j->n_tasks % j->n_prompts ||
	    j->n_tasks / j->n_prompts > srv.max_n ||
	    j->max_tokens < 0 || j->max_tokens > srv.max_tokens ||
	    j->logprobs < -1 || j->logprobs > 20)
		fuzz_fail("a job out of its ranges");
	for (int i = 0; i < j->n_tasks; i++)
		for (int k = 0; k < j->tasks[i].n_prompt; k++)
			if (j->tasks[i].prompt[k] < 0 ||
			    j->tasks[i].prompt[k] >= e.mod->hp->n_token)
				fuzz_fail("token id %d out of the vocabulary",
					  j->tasks[i].prompt[k]);
	/* as a job the server stopped before it began */
	j->n_done = j->n_tasks;
	for (int i = 0; i < j->n_tasks; i++)
		j->tasks[i].finish = "length";
	sched_lock();
	out = api_completion_json(j);
	free(out);
	out = api_stream_events(j, true);
	free(out);
	sched_unlock();
	job_unref(j);
	return 0;
}
