/* SPDX-License-Identifier: MIT */
/*
 * progress.c - one line on stderr, redrawn in place on a terminal; with
 * --progress, where stderr is no terminal (a log), the same line every
 * few seconds, each on its own.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

/* a log's lines: the first at once, then one every LOG_INTERVAL s */
#define LOG_INTERVAL 5.0
/* a terminal's line: redrawn at most every TTY_INTERVAL s */
#define TTY_INTERVAL 0.2

static bool forced;

void
progress_force(bool on)
{
	forced = on;
}

/* Whether to draw now, at time @p t; @p first_at_once: a terminal's first
 * line too. */
static bool
due(struct progress *p, double t, bool first_at_once)
{
	if (!p->on)
		return false;
	if (p->log)
		return !p->shown || t - p->last >= LOG_INTERVAL;
	return (first_at_once && !p->shown) || t - p->last >= TTY_INTERVAL;
}

/* The line @p line: in place on a terminal, a line of its own in a log. */
static void
emit(struct progress *p, const char *line)
{
	if (p->log)
		fprintf(stderr, "%s\n", line);
	else
		fprintf(stderr, "\r%s\033[K", line);
	p->shown = true;
}

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
progress_init(struct progress *p, uint64_t size)
{
	p->log = !isatty(STDERR_FILENO);
	p->on = !p->log || forced;
	p->shown = false;
	p->t0 = p->last = now_s();
	p->size = size;
}

/* "42s", "3m05s", "2h10m" */
static void
fmt_duration(double s, char *buf, size_t len)
{
	long t = (long)(s + 0.5);

	if (t < 60)
		snprintf(buf, len, "%lds", t);
	else if (t < 3600)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
}

void
progress_show(struct progress *p, uint64_t bytes, int64_t tokens,
	      const char *extra, bool force)
{
	double t = now_s(), dt = t - p->t0;
	double rate = dt > 0 ? (double)tokens / dt : 0;
	char bar[32], left[32], line[256];

	if (!p->on || (!force && !due(p, t, false)))
		return;
	p->last = t;
	/* a small file in kB: "0.0/0.1 MB" says nothing */
	const double big = (double)(p->size ? p->size : (uint64_t)bytes);
	const double unit = big < 1e6 ? 1e3 : 1e6;
	const char *unit_name = big < 1e6 ? "kB" : "MB";

	if (p->size) {
		double f = (double)bytes / (double)p->size;
		int w = 20, k = (int)(f * w + 0.5);

		if (k > w)
			k = w;
		memset(bar, '=', (size_t)k);
		memset(bar + k, ' ', (size_t)(w - k));
		bar[w] = '\0';
		if (bytes > 0 && dt >= 1 && bytes < p->size) {
			fmt_duration(dt * (double)(p->size - bytes) /
				     (double)bytes, left, sizeof(left));
			strcat(left, " left");
		} else {
			left[0] = '\0';
		}
		snprintf(line, sizeof(line), "[%s] %3.0f%%  %.1f/%.1f %s  %lld "
			 "tokens  %.0f tokens/s  %s%s%s", bar, 100 * f,
			 bytes / unit, p->size / unit, unit_name,
			 (long long)tokens, rate, left,
			 extra && *left ? "  " : "", extra ? extra : "");
	} else {
		snprintf(line, sizeof(line), "%.1f %s  %lld tokens  %.0f "
			 "tokens/s%s%s", bytes / unit, unit_name,
			 (long long)tokens, rate, extra ? "  " : "",
			 extra ? extra : "");
	}
	emit(p, line);
}

void
progress_count(struct progress *p, int64_t done, int64_t total)
{
	double t = now_s(), dt = t - p->t0;
	double rate = dt > 0 ? (double)done / dt : 0;
	char took[32], left[32] = "", line[160];

	if (!due(p, t, true))
		return;
	p->last = t;
	if (total > 0 && done > total)
		total = done;  /* the tokens that complete a character */
	fmt_duration(dt, took, sizeof(took));
	if (total > 0 && done > 0 && done < total && dt >= 1) {
		fmt_duration(dt * (double)(total - done) / (double)done, left,
			     sizeof(left));
		strcat(left, " left");
	}
	if (total > 0)
		snprintf(line, sizeof(line), "%lld/%lld tokens  %.0f tokens/s  "
			 "%s%s%s", (long long)done, (long long)total, rate,
			 took, *left ? ", " : "", left);
	else
		snprintf(line, sizeof(line), "%lld tokens  %.0f tokens/s  %s",
			 (long long)done, rate, took);
	emit(p, line);
}

void
progress_done(struct progress *p)
{
	if (p->shown && !p->log)
		fputs("\r\033[K", stderr);
	p->shown = false;
}
