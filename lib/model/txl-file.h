/* SPDX-License-Identifier: MIT */
/*
 * txl-file.h - the model file as a container (txl-file.c): a validated
 * safetensors file, its tensors and metadata.  Not installed.
 */
#ifndef TXL_FILE_H
#define TXL_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "txl.h"
#include "txl-dtype.h"

#define TXL_MAX_DIMS 4

struct txl_tensor_info {
	char *name;
	enum txl_dtype dtype;
	int ndim;
	int64_t shape[TXL_MAX_DIMS];
	uint64_t begin, end;	/* byte offsets in the file (absolute) */
	bool used;		/* bound to a weight by the model */
	int index;		/* its place in the header */
};

struct txl_meta_entry {
	char *key, *value;
	int index;		/* its place in __metadata__ */
};

/* A validated safetensors file, memory-mapped or read into memory. */
struct txl_file {
	char *path;
	const uint8_t *map;	/* the whole file, read-only */
	size_t size;
	bool owned;		/* map is a malloc'd copy (TXL_LOAD_NO_MMAP) */
	struct txl_tensor_info *tensors;
	int n_tensors;
	struct txl_meta_entry *meta;
	int n_meta;
	uint64_t hash;		/* txl_hash of the whole file */
	/* txl_file_peek(): map is NULL, no hash, and the tensors may end
	 * beyond the file (data_end > size: truncated) */
	bool header_only;
	uint64_t data_end;	/* where the last tensor ends (absolute) */
};

/* Open @p path for reading if it is a regular file: opened with O_NONBLOCK
 * and checked with fstat() before anything can wait (a FIFO, a terminal,
 * a device or a directory is refused with a one-line error).  On success
 * *fd is the descriptor (blocking) and *sb its stat. */
enum txl_status txl_open_regular(const char *path, int *fd, struct stat *sb);
/* "a directory", "a FIFO", ... for messages about what is not a file */
const char *txl_file_kind(mode_t mode);
/* Map (or with TXL_LOAD_NO_MMAP in @p flags, read) and validate the
 * container (header length, JSON, dtypes, offsets inside the data and not
 * overlapping, sizes matching shapes), and hash its contents. */
enum txl_status txl_file_open(const char *path, unsigned flags,
			      struct txl_file *f);
/* The checks of txl_file_open() on the header alone, read (not mapped)
 * from the file: no byte of data is read, and the tensors' extent is not
 * held to the file's size (data_end says where they end). */
enum txl_status txl_file_peek(const char *path, struct txl_file *f);
void txl_file_close(struct txl_file *f);
const struct txl_tensor_info *txl_file_find(const struct txl_file *f,
					    const char *name);
const char *txl_file_meta(const struct txl_file *f, const char *key);

#endif /* TXL_FILE_H */
