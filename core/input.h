/* SPDX-License-Identifier: MIT */
/*
 * input.h - the one way txlgen reads a file: opened without blocking and
 * checked (a regular file or a stream, or stdin as "-"), then read as a
 * stream of chunks, or whole when small (config files).
 */
#ifndef TXLGEN_INPUT_H
#define TXLGEN_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest chunk: a longer line is cut (see input_next). */
#define INPUT_CHUNK_MAX (1 << 16)

struct input {
	int fd;                 /* -1 for text in memory */
	const char *name;       /* for messages: the path, or "(stdin)" */
	char *buf;
	size_t start, end, cap;
	size_t scanned;         /* bytes from start known to hold no '\n' */
	bool eof;
	bool own_buf;
	uint64_t bytes;         /* read so far */
	uint64_t consumed;      /* handed out in chunks so far */
	uint64_t size;          /* of a regular file, else 0 */
	bool utf8;              /* text: input_next() refuses bytes that
				   are not UTF-8 (set after opening) */
};

/**
 * Open @p path for reading ("-": stdin): a regular file, or a stream (a
 * FIFO or pipe, a character device) whose reads wait where a signal ends
 * them.  A directory, a block device or a socket is refused with a
 * one-line message; so is a missing file, with @p hint appended to the
 * message if not NULL.  Returns false after printing the message.
 */
bool input_open(struct input *in, const char *path, const char *hint);

/** Read @p len bytes of @p text (kept by the caller) as an input. */
void input_open_text(struct input *in, const char *text, size_t len,
		     const char *name);

void input_close(struct input *in);

/**
 * The next chunk: a line with its '\n', or a cut of a line longer than
 * INPUT_CHUNK_MAX, before a space or tab (which then starts the next
 * chunk) or, failing that, at a character boundary.  The chunks depend
 * only on the bytes (a file and a pipe give the same).  Valid until the
 * next call.  With in->utf8, a chunk that is not UTF-8 is an error that
 * names the input and the offset of the first bad byte.  Returns 1 with a chunk, 0 at the end, -1 on a read error
 * (reported) or when interrupted (see signals.h).
 */
int input_next(struct input *in, const char **chunk, size_t *n);
/* The first chunk of the @p len bytes at @p s, a whole text, as
 * input_next() cuts it: texts tokenized chunk by chunk get the same ids
 * however they arrive. */
size_t input_chunk_len(const char *s, size_t len);

/**
 * Would input_next() return without waiting?  True when a line (or a
 * chunk's worth) is buffered, at the end, for text in memory, or when
 * the descriptor has bytes now (input_next() may then still wait for the
 * rest of a line).  So a reader with other work to do reads a stream
 * only when its writer has written.
 */
bool input_ready(struct input *in);

/** Read exactly @p n bytes from the start of what is left of @p in
 *  (not mixed with input_next); false after printing why. */
bool input_read(struct input *in, void *buf, size_t n);

/**
 * The whole file @p path, NUL-terminated, if it has at most @p max bytes;
 * else, or on any error, NULL after printing the reason.  *@p len gets
 * its length.  Free it with free().
 */
char *input_slurp(const char *path, size_t max, size_t *len);

#endif /* TXLGEN_INPUT_H */
