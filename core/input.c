/* SPDX-License-Identifier: MIT */
/*
 * input.c - reading files: one opening that cannot hang, one chunker.
 *
 * A file is a regular file or a stream: a FIFO or pipe (`<(cmd)`,
 * /dev/stdin), or a character device (a terminal).  open() of a FIFO
 * waits for a writer, and read() of a stream may wait for ever: every
 * file is opened with O_NONBLOCK, so that opening never waits, and a
 * stream stays non-blocking, so that every read waits in
 * signals_read()'s poll, where Ctrl-C and SIGTERM end it.  (A FIFO that
 * has had no writer yet polls as not ready, not as ended.)  Directories,
 * block devices and sockets are refused.
 *
 * Streams (--prime, --score, --tokenize, prompts) are handed out line by
 * line, so memory use does not depend on their size.  Line by line is
 * also how spm_encode reads its input; for SentencePiece's default
 * normalisation (newlines count as spaces, runs of spaces collapse) it
 * gives the same ids as tokenizing the whole text at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "input.h"
#include "signals.h"
#include "text.h"
#include "utf8.h"

static const char *
kind_of(mode_t m)
{
	return S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" :
		"neither a file nor a stream";
}

/* A descriptor of the regular file or stream @p path, or -1 (reported).
 * *size: a regular file's, else 0. */
static int
open_file(const char *path, const char *hint, uint64_t *size)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT && hint)
			errmsg("%s: %s (%s)", path, strerror(e), hint);
		else
			errmsg("%s: %s", path, strerror(e));
		return -1;
	}
	if (fstat(fd, &sb) != 0) {
		errmsg("%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (S_ISDIR(sb.st_mode)) {
		errmsg("%s: %s", path, strerror(EISDIR));
		close(fd);
		return -1;
	}
	*size = 0;
	if (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode))
		return fd;  /* a stream: reads wait in signals_read() */
	if (!S_ISREG(sb.st_mode)) {
		errmsg("%s: is %s, which txlgen does not read", path,
		       kind_of(sb.st_mode));
		close(fd);
		return -1;
	}
	/* reads of a regular file never block; clear the flag anyway */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	*size = (uint64_t)sb.st_size;
	return fd;
}

bool
input_open(struct input *in, const char *path, const char *hint)
{
	struct stat sb;

	memset(in, 0, sizeof(*in));
	if (!strcmp(path, "-")) {
		in->fd = STDIN_FILENO;
		in->name = "(stdin)";
		if (fstat(in->fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			errmsg("%s: %s", in->name, strerror(EISDIR));
			return false;
		}
		if (fstat(in->fd, &sb) == 0 && S_ISREG(sb.st_mode))
			in->size = (uint64_t)sb.st_size;
	} else {
		in->name = path;
		in->fd = open_file(path, hint, &in->size);
		if (in->fd < 0)
			return false;
	}
	in->own_buf = true;  /* allocated at the first read */
	return true;
}

void
input_open_text(struct input *in, const char *text, size_t len,
		const char *name)
{
	memset(in, 0, sizeof(*in));
	in->fd = -1;
	in->name = name;
	in->buf = (char *)text;  /* only read */
	in->end = in->cap = len;
	in->eof = true;
	in->bytes = in->size = len;
}

void
input_close(struct input *in)
{
	if (in->fd > STDIN_FILENO)
		close(in->fd);
	if (in->own_buf)
		free(in->buf);
	memset(in, 0, sizeof(*in));
	in->fd = -1;
}

/* Where to cut the INPUT_CHUNK_MAX bytes at @p s, which hold no newline:
 * before the last space or tab (which then starts the next chunk: the
 * same ids), else after the last character they hold whole.  Only those
 * bytes decide, so that the chunks of a text do not depend on how much
 * of it a read() returned. */
/* Are the @p n bytes data rather than text in another encoding?  A NUL,
 * or in 32 bytes or more, control characters past one in a hundred, or
 * a third of the bytes above ASCII (Latin-1 prose has a few in a
 * hundred; a few bytes are too few to tell). */
static bool
looks_binary(const unsigned char *u, size_t n)
{
	size_t ctl = 0, high = 0;

	for (size_t i = 0; i < n; i++) {
		if (u[i] == 0)
			return true;
		ctl += u[i] < 0x20 && !strchr("\t\n\r\f\v", u[i]);
		high += u[i] >= 0x80;
	}
	return n >= 32 && (ctl * 100 > n || high * 3 > n);
}

static size_t
cut_point(const char *s)
{
	const size_t max = INPUT_CHUNK_MAX;
	size_t cut = max;

	while (cut > 1 && s[cut - 1] != ' ' && s[cut - 1] != '\t')
		cut--;
	if (cut > 1)
		return cut - 1;
	/* the last character's first byte, and how long it says it is */
	for (size_t back = 1; back <= 4; back++) {
		unsigned char c = (unsigned char)s[max - back];
		size_t len = c >= 0xf8 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 :
			c >= 0xc0 ? 2 : 1;

		if ((c & 0xc0) != 0x80)
			return len > back ? max - back : max;
	}
	return max;  /* not UTF-8 there: anywhere */
}

size_t
input_chunk_len(const char *s, size_t len)
{
	const char *nl = memchr(s, '\n', len < INPUT_CHUNK_MAX ? len
				: INPUT_CHUNK_MAX);

	if (nl)
		return (size_t)(nl + 1 - s);
	return len >= INPUT_CHUNK_MAX ? cut_point(s) : len;
}

int
input_next(struct input *in, const char **chunk, size_t *n)
{
	if (!in->buf) {
		in->cap = INPUT_CHUNK_MAX + 65536;
		in->buf = xrealloc(NULL, in->cap);
	}
	for (;;) {
		char *s = in->buf + in->start;
		size_t have = in->end - in->start;
		/* a newline within a chunk's length ends the chunk; where
		 * there is none, the first INPUT_CHUNK_MAX bytes are cut, or
		 * (at the end) what is left is the chunk: more bytes read at
		 * once never change a chunk */
		size_t lim = have < INPUT_CHUNK_MAX ? have : INPUT_CHUNK_MAX;
		char *nl = memchr(s + in->scanned, '\n', lim - in->scanned);
		ssize_t got;

		in->scanned = lim;
		if (nl) {
			*n = (size_t)(nl + 1 - s);
		} else if (have >= INPUT_CHUNK_MAX) {
			*n = cut_point(s);
		} else if (in->eof) {
			if (!have)
				return 0;
			*n = have;
		} else {
			memmove(in->buf, s, have);
			in->start = 0;
			in->end = have;
			got = signals_read(in->fd, in->buf + in->end,
					   in->cap - in->end);
			if (got < 0) {
				if (!interrupted)
					errmsg("%s: %s", in->name,
					       strerror(errno));
				return -1;
			}
			if (got == 0)
				in->eof = true;
			in->end += (size_t)got;
			in->bytes += (uint64_t)got;
			continue;
		}
		if (in->utf8 && (!utf8_valid(s, *n) || memchr(s, 0, *n))) {
			const unsigned char *u = (const unsigned char *)s;
			size_t i = 0, c;

			/* the first byte of no character, or a NUL (a
			 * binary file's) */
			while (i + 1 < *n && u[i] &&
			       (c = utf8_char_len(u + i, *n - i)))
				i += c;
			if (!u[i])
				errmsg("%s: not text (a NUL byte at offset "
				       "%llu)", in->name,
				       (unsigned long long)(in->consumed + i));
			else if (looks_binary(u, *n))
				errmsg("%s: not text (binary data: byte 0x%02X "
				       "at offset %llu)", in->name, u[i],
				       (unsigned long long)(in->consumed + i));
			else
				errmsg("%s: not UTF-8 text (byte 0x%02X at "
				       "offset %llu); convert it first ('iconv "
				       "-f latin1 -t utf-8' for Latin-1)",
				       in->name, u[i],
				       (unsigned long long)(in->consumed + i));
			return -1;
		}
		*chunk = s;
		in->start += *n;
		in->consumed += *n;
		in->scanned = 0;
		return 1;
	}
}

bool
input_ready(struct input *in)
{
	struct pollfd pfd = { .fd = in->fd, .events = POLLIN };
	size_t have = in->end - in->start;

	if (in->fd < 0 || in->eof || have >= INPUT_CHUNK_MAX ||
	    (have && memchr(in->buf + in->start, '\n', have)))
		return true;
	return poll(&pfd, 1, 0) > 0;
}

bool
input_read(struct input *in, void *buf, size_t n)
{
	size_t at = 0;

	while (at < n) {
		ssize_t got = signals_read(in->fd, (char *)buf + at, n - at);

		if (got <= 0) {
			if (got == 0)
				errmsg("%s: unexpected end of file", in->name);
			else if (!interrupted)
				errmsg("%s: %s", in->name, strerror(errno));
			return false;
		}
		at += (size_t)got;
	}
	return true;
}

char *
input_slurp(const char *path, size_t max, size_t *len)
{
	struct input in;
	struct strbuf b = { 0 };
	char buf[65536];
	ssize_t got;

	if (!input_open(&in, path, NULL))
		return NULL;
	strbuf_add(&b, "", 0);
	while ((got = signals_read(in.fd, buf, sizeof(buf))) > 0) {
		if (b.len + (size_t)got > max) {
			errmsg("%s: %s", in.name, strerror(EFBIG));
			got = -2;
			break;
		}
		strbuf_add(&b, buf, (size_t)got);
	}
	if (got == -1 && !interrupted)
		errmsg("%s: %s", in.name, strerror(errno));
	input_close(&in);
	if (got < 0) {
		strbuf_free(&b);
		return NULL;
	}
	*len = b.len;
	return b.s;
}
