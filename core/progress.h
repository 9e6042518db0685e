/* SPDX-License-Identifier: MIT */
/*
 * progress.h - the progress line of long reads (--score, --prime) and of
 * generation into a file or pipe, on stderr when it is a terminal:
 * position, speed, time left and a running figure; with --progress
 * (progress_force()) elsewhere too, a line every few seconds.
 */
#ifndef TXLGEN_PROGRESS_H
#define TXLGEN_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct progress {
	bool on;
	bool log;           /* stderr is no terminal: whole lines */
	bool shown;         /* a line is on the screen (or in the log) */
	double t0, last;
	uint64_t size;      /* bytes in all, 0 if unknown (a pipe) */
};

/** Seconds on a monotonic clock. */
double now_s(void);

/** Progress lines also where stderr is not a terminal (--progress): a
 *  line every few seconds, the first at once. */
void progress_force(bool on);

void progress_init(struct progress *p, uint64_t size);

/** Show that @p bytes were read and @p tokens processed, with @p extra
 *  (may be NULL) at the end; at most five times a second (in a log:
 *  every few seconds) unless @p force. */
void progress_show(struct progress *p, uint64_t bytes, int64_t tokens,
		   const char *extra, bool force);

/** Show that @p done of @p total (0: no end known) tokens are generated,
 *  with the speed and the time taken (and left); the first call at once,
 *  then at most five times a second. */
void progress_count(struct progress *p, int64_t done, int64_t total);

/** Erase the line. */
void progress_done(struct progress *p);

#endif /* TXLGEN_PROGRESS_H */
