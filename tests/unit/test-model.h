/* SPDX-License-Identifier: MIT */
/*
 * test-model.h - the fixtures of the C tests that run models through the
 * public API (test-session.c, test-batch.c, test-variants.c): a model
 * loaded or the test fails, a session of given settings or the test
 * fails, and the largest difference of two rows of logits.
 */
#ifndef TXL_TEST_MODEL_H
#define TXL_TEST_MODEL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "txl.h"

/* the model file at path; a load that fails fails the test */
static inline struct txl_model *
load_model(const char *path)
{
	struct txl_model *m;

	if (txl_model_load(path, &m) != TXL_OK) {
		fprintf(stderr, "FAIL: %s\n", txl_last_error());
		exit(1);
	}
	return m;
}

/* txl_session_params_default() with seg_len and mem_len set */
static inline struct txl_session_params
session_params(int seg, int mem)
{
	struct txl_session_params p = txl_session_params_default();

	p.seg_len = seg;
	p.mem_len = mem;
	return p;
}

/* a session of m with p; one that is refused fails the test */
static inline struct txl_session *
new_session(const struct txl_model *m, const struct txl_session_params *p)
{
	struct txl_session *s;

	CHECK_EQ(txl_session_new(m, p, &s), TXL_OK);
	return s;
}

/* the largest difference of a[i] and b[i], i < n, in double */
static inline double
max_diff(const float *a, const float *b, int n)
{
	double m = 0;

	for (int i = 0; i < n; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

#endif
