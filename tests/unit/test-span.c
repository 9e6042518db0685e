/* SPDX-License-Identifier: MIT */
/*
 * test-span.c - what the heads of an adaptive-span model keep and read,
 * as libtxl exports it (txl_model_span(), txl_model_window(),
 * txl_model_layer_window(), txl_model_spans()), against values worked
 * out by hand for the model argv[1] (tests/unit/meson.build), and
 * the -1 of those getters on a model of another attention (argv[2]).
 *
 * The model: 2 layers of 2 heads, attn_span 192, ramp R = 32, each
 * head's current_val c (z = 192 c positions).  A head reads the
 * distances x whose soft mask (1 - x + z) / R + 1 is above 0, x < z + 33:
 *   layer 0: c = 0 -> 32; c = 0.25 (z 48) -> 80;
 *   layer 1: c = 0.05 (z 9.6) -> 42; c = 0.7 (z 134.4) -> 167.
 * A layer's window (the original's trimming): its largest span,
 * ceil(192 c_max) + R, at most 192, then 192 - (192 - that) / 64 * 64:
 *   layer 0: 48 + 32 = 80 -> 192 - 112 / 64 * 64 = 128;
 *   layer 1: 135 + 32 = 167 -> 192 - 25 / 64 * 64 = 192.
 */
#include <unistd.h>

#include "test-model.h"
#include "test.h"
#include "txl.h"

static struct txl_model *model, *plain;

static void
test_heads(void)
{
	static const int span[2][2] = { { 32, 80 }, { 42, 167 } };
	static const int window[2] = { 128, 192 };

	for (int l = 0; l < 2; l++) {
		for (int h = 0; h < 2; h++) {
			CHECK_EQ(txl_model_span(model, l, h), span[l][h]);
			CHECK_EQ(txl_model_window(model, l, h), window[l]);
		}
		CHECK_EQ(txl_model_layer_window(model, l), window[l]);
	}
	CHECK_EQ(txl_model_layer_window(model, 2), -1);
	CHECK_EQ(txl_model_layer_window(model, -1), -1);
	CHECK_EQ(txl_model_layer_window(NULL, 0), -1);
}

static void
test_spans(void)
{
	double mean = -1;

	/* (32 + 80 + 42 + 167) / 4 */
	CHECK_EQ(txl_model_spans(model, TXL_FROM_MODEL, &mean), 167);
	CHECK_NEAR(mean, 80.25, 0);
	/* the memory of the model's session (its longest window) cuts none */
	CHECK_EQ(txl_model_spans(model, 192, &mean), 167);
	CHECK_NEAR(mean, 80.25, 0);
	/* at most 100: (32 + 80 + 42 + 100) / 4 */
	CHECK_EQ(txl_model_spans(model, 100, &mean), 100);
	CHECK_NEAR(mean, 63.5, 0);
	CHECK_EQ(txl_model_spans(model, 0, &mean), 0);
	CHECK_NEAR(mean, 0, 0);
	CHECK_EQ(txl_model_spans(model, 50, NULL), 50);
	mean = -1;
	CHECK_EQ(txl_model_spans(model, -2, &mean), -1);
	CHECK_NEAR(mean, -1, 0);
}

/* A session keeps each layer's window, at most its mem_len: a token
 * depends on the windows of every layer and itself. */
static void
test_session(void)
{
	struct txl_session_params p = txl_session_params_default();
	struct txl_session_params r = txl_session_params_default();

	CHECK_EQ(txl_session_params_resolve(model, &p, &r), TXL_OK);
	CHECK_EQ(r.mem_len, 192);
	CHECK_EQ(txl_session_receptive_field(model, &p, 1), 128 + 192 + 1);
	p.mem_len = 150;
	CHECK_EQ(txl_session_receptive_field(model, &p, 1), 128 + 150 + 1);
	p.mem_len = 100;
	CHECK_EQ(txl_session_receptive_field(model, &p, 1), 100 + 100 + 1);
}

static void
test_other_attention(void)
{
	double mean = -1;

	CHECK_EQ(txl_model_span(plain, 0, 0), -1);
	CHECK_EQ(txl_model_window(plain, 0, 0), -1);
	CHECK_EQ(txl_model_layer_window(plain, 0), -1);
	CHECK_EQ(txl_model_spans(plain, TXL_FROM_MODEL, &mean), -1);
	CHECK_NEAR(mean, -1, 0);
}

int
main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: test-span SPAN_MODEL MODEL\n");
		return 2;
	}
	if (access(argv[1], R_OK) != 0 || access(argv[2], R_OK) != 0) {
		fprintf(stderr, "SKIP: no test models\n");
		return TEST_SKIP;
	}
	model = load_model(argv[1]);
	plain = load_model(argv[2]);
	CHECK_EQ(txl_model_hparams(model)->attn_type, TXL_ATTN_ADAPTIVE_SPAN);
	CHECK_EQ(txl_model_hparams(model)->n_layer, 2);
	CHECK_EQ(txl_model_hparams(model)->n_head, 2);
	RUN(test_heads);
	RUN(test_spans);
	RUN(test_session);
	RUN(test_other_attention);
	txl_model_free(model);
	txl_model_free(plain);
	return 0;
}
