/* SPDX-License-Identifier: MIT */
/*
 * txl-session.h - a session: one stream of text, with its settings, its
 * memory, its attention, its output layer and the rows it computes in
 * (txl-session.c; state files: txl-state.c; sampling: txl-sample.c).
 * Not installed.
 */
#ifndef TXL_SESSION_H
#define TXL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "txl.h"
#include "txl-attn.h"
#include "txl-forward.h"
#include "txl-kv.h"
#include "txl-model.h"
#include "txl-output.h"

/* The most positions a session counts as fed (n_past stays there): 2^53,
 * 285 years at a million tokens a second, exact as a JSON number.  A
 * state file claiming more is damaged or crafted. */
#define TXL_MAX_N_PAST (INT64_C(1) << 53)

struct txl_session {
	const struct txl_model *model;
	struct txl_session_params params;	/* resolved: every setting's
						   value (stride: tokens per
						   window, for models without
						   memory only) */
	enum txl_compute compute;	/* of the products of segments */
	int64_t n_past;		/* tokens fed */

	struct txl_kv kv;	/* the memory */
	struct txl_attn attn;
	struct txl_out out;

	/* models without memory (attn_type 2, 3): the last seg_len tokens
	 * fed, the context of the next window */
	int32_t *window;	/* (2 * seg_len): n_window, then a group */
	int n_window;

	float *last_h;		/* (d_model) output of the last position fed */
	bool have_last;

	struct txl_seg_rows rows;	/* a segment's (seg_len rows) */
};

/* true if the session's abort callback asks to stop */
static inline bool
txl_aborted(const struct txl_session *s)
{
	return s->params.abort_cb && s->params.abort_cb(s->params.abort_data);
}

/* n more positions fed: the count stops at TXL_MAX_N_PAST (a loaded
 * state may start near it), never overflowing. */
static inline void
txl_count_fed(struct txl_session *s, int n)
{
	s->n_past = s->n_past > TXL_MAX_N_PAST - n ? TXL_MAX_N_PAST
		    : s->n_past + n;
}

/* TXL_ERR_NUMERIC, its message naming s's model file: what the model
 * computed is NaN or inf (finite weights can still overflow). */
enum txl_status txl_session_nonfinite(const struct txl_session *s);

#endif /* TXL_SESSION_H */
