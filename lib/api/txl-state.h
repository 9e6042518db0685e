/* SPDX-License-Identifier: MIT */
/*
 * txl-state.h - the layout of memory state files (txl-state.c).  Not
 * installed.
 *
 * A state file is this header, then per layer K, then V, each per head
 * the rows it keeps in a session of mem_len (mem_len, or an adaptive-span
 * head's layer window if shorter, none for a head of span 0) of d_head
 * values in kv_type, its last positions first (zeros past the fill);
 * d_model floats of last_h; since version 5, n_recent token ids (i32,
 * oldest first: the last ids of the text, the repeat penalty's window);
 * the txl_hash of everything before it (u64).  Since version 6 a head
 * stores only the rows that hold memory (min(fill, keep), nothing past
 * the fill), and the header ends with how the memory started (mem_init).
 * Versions 4 (no ids; n_recent was padding, 0) and 5 load.  Fields
 * are fixed-size and naturally aligned (no padding: the struct is the
 * file's bytes); a new field goes at the end, with a new version.
 */
#ifndef TXL_STATE_H
#define TXL_STATE_H

#include <stdint.h>

#define TXL_STATE_MAGIC "TXLSTATE"
/* 2: the checksum is txl_hash; 3: kv_type; 4: an adaptive-span head
 * keeps its layer's window, not its span; 5: the recent ids; 6: only
 * the filled rows, and mem_zeros */
#define TXL_STATE_VERSION 6u
#define TXL_STATE_VERSION_MIN 4u	/* the oldest that loads */

struct txl_state_header {
	char magic[8];
	uint32_t version;
	uint32_t n_layer;
	uint64_t fingerprint;	/* of the model file */
	uint32_t d_model, n_head, d_head;
	uint32_t mem_len;	/* the session's: rows stored per head, fill
				   or not (at most) */
	uint32_t fill;		/* rows that hold memory */
	uint32_t have_last;	/* 1 if last_h is the output of the last
				   position fed */
	int64_t n_past;
	uint32_t kv_type;	/* enum txl_kv_type of the rows */
	uint32_t n_recent;	/* token ids after last_h (version 4: 0,
				   padding) */
	/* since version 6 (before: the header ends here) */
	uint32_t mem_zeros;	/* 1: the memory started as zero states
				   (--mem-init zeros), 0: empty */
	uint32_t reserved;	/* 0 */
};

/* The bytes of the header of versions 4 and 5. */
#define TXL_STATE_HEADER_V5 64u

#endif /* TXL_STATE_H */
