/* SPDX-License-Identifier: MIT */
/*
 * progress.c - one line on stderr, redrawn in place.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

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
	p->on = isatty(STDERR_FILENO);
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
	char bar[32], left[32];

	if (!p->on || (!force && t - p->last < 0.2))
		return;
	p->last = t;
	p->shown = true;
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
		fprintf(stderr, "\r[%s] %3.0f%%  %.1f/%.1f %s  %lld tokens  "
			"%.0f tokens/s  %s%s%s\033[K", bar, 100 * f,
			bytes / unit, p->size / unit, unit_name,
			(long long)tokens, rate, left,
			extra && *left ? "  " : "", extra ? extra : "");
	} else {
		fprintf(stderr, "\r%.1f %s  %lld tokens  %.0f tokens/s%s%s"
			"\033[K", bytes / unit, unit_name, (long long)tokens,
			rate, extra ? "  " : "", extra ? extra : "");
	}
}

void
progress_count(struct progress *p, int64_t done, int64_t total)
{
	double t = now_s(), dt = t - p->t0;
	double rate = dt > 0 ? (double)done / dt : 0;
	char took[32], left[32] = "";

	if (!p->on || (p->shown && t - p->last < 0.2))
		return;
	p->last = t;
	p->shown = true;
	if (total > 0 && done > total)
		total = done;  /* the tokens that complete a character */
	fmt_duration(dt, took, sizeof(took));
	if (total > 0 && done > 0 && done < total && dt >= 1) {
		fmt_duration(dt * (double)(total - done) / (double)done, left,
			     sizeof(left));
		strcat(left, " left");
	}
	if (total > 0)
		fprintf(stderr, "\r%lld/%lld tokens  %.0f tokens/s  %s%s%s"
			"\033[K", (long long)done, (long long)total, rate, took,
			*left ? ", " : "", left);
	else
		fprintf(stderr, "\r%lld tokens  %.0f tokens/s  %s\033[K",
			(long long)done, rate, took);
}

void
progress_done(struct progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}
