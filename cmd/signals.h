/* SPDX-License-Identifier: MIT */
/*
 * signals.h - SIGINT (Ctrl-C) and SIGTERM: both end a run the same way,
 * by a flag that the library's abort callback and every loop poll, so
 * that what was generated is flushed and no file is left half-written.
 */
#ifndef TXLGEN_SIGNALS_H
#define TXLGEN_SIGNALS_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* The signal that asked to stop (SIGINT, SIGTERM), or 0. */
extern volatile sig_atomic_t interrupted;

/**
 * Install the handlers.  @p restart: system calls resume after a signal
 * (while writing, so that output is never cut by EINTR); false around
 * blocking reads of input, which must wake up.
 */
void signals_setup(bool restart);

/** read() that returns -1 (errno EINTR) once a signal asked to stop, and
 *  retries when one did not. */
ssize_t signals_read(int fd, void *buf, size_t n);

/**
 * From now on, SIGBUS (a page of the model file @p path, mapped, read past
 * the file's new end) prints one line naming it and exits with status 1.
 */
void signals_watch_mapping(const char *path);

/** The exit status for the signal in `interrupted`: 130 or 143. */
int signals_exit_code(void);

/** "interrupted" or "terminated". */
const char *signals_word(void);

#endif /* TXLGEN_SIGNALS_H */
