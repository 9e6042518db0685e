/* SPDX-License-Identifier: MIT */
/*
 * fuzz-common.h - what the libFuzzer harnesses share: an in-memory file
 * (memfd) that libtxl opens by its /proc/self/fd path, and checks of the
 * library's error contract.
 */
#ifndef TXL_FUZZ_COMMON_H
#define TXL_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "txl.h"

/* libFuzzer's entry points, which each harness defines (the first
 * where it has something to set up; its arguments are libFuzzer's,
 * unused) */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_file {
	int fd;
	char path[64];	/* /proc/self/fd/N */
};

/* Create an empty memfd (aborts on failure). */
void fuzz_file_init(struct fuzz_file *f, const char *name);
/* Replace the file's contents with data[0..size) (aborts on failure). */
void fuzz_file_set(struct fuzz_file *f, const void *data, size_t size);

/* Silence libtxl's log (warnings would flood the fuzzer's output). */
void fuzz_quiet_log(void);

/* Abort (a crash the fuzzer records) with a message on stderr. */
_Noreturn void fuzz_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* The error contract of txl.h: a known status, txl_last_error() one
 * non-empty line; when @p path is not NULL, naming that file. */
void fuzz_check_error(enum txl_status st, const char *path);

#endif
