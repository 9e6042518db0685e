/* SPDX-License-Identifier: MIT */
/*
 * signals.h - SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed):
 * each ends a run the same way, by a flag that the library's abort
 * callback and every loop poll, so that what was generated is flushed
 * and no file is left half-written.  SIGHUP is handled as SIGTERM, with
 * its own exit status (129).  Until the run produces anything (while the
 * model and the state load), a signal ends the program at once instead:
 * the library's loader polls no flag, and there is nothing to flush.
 */
#ifndef TXLGEN_SIGNALS_H
#define TXLGEN_SIGNALS_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* The signal that asked to stop (SIGINT, or SIGTERM for SIGTERM and
 * SIGHUP), or 0. */
extern volatile sig_atomic_t interrupted;

/**
 * Install the handlers (SIGHUP stays ignored if it was ignored at start,
 * as under nohup).  @p restart:
 * system calls resume after a signal (while writing, so that output is
 * never cut by EINTR); false around blocking reads of input, which must
 * wake up.  The first call enters the immediate mode (below).
 */
void signals_setup(bool restart);

/**
 * In immediate mode (@p on) a signal ends the program at once, with the
 * message and exit status of signals_word() and signals_exit_code();
 * one that came before is acted on now.  Leave it before anything is
 * written that would need flushing or finishing.
 */
void signals_immediate(bool on);

/* How long a signal that ends the run (SIGTERM, SIGHUP; SIGINT but in
 * the REPL) gives it to end, flushing its output, before it ends without:
 * a write into a pipe that nobody reads blocks for ever. */
#define SIGNALS_GRACE_S 10
#define SIGNALS_GRACE_STR "10"

/** Does SIGINT end the run (true but for the REPL, where it stops a
 *  generation)?  Then it starts the grace period as well. */
void signals_int_ends_run(bool on);

/** Stop the grace period while the REPL's memory is saved (the save
 *  polls the signals itself): returns the seconds it had left, for
 *  signals_grace_resume(). */
unsigned signals_grace_pause(void);
void signals_grace_resume(unsigned left);

/** The terminal failed a read or write with EIO: it is gone, and its
 *  SIGHUP may still be on the way.  Act on the hangup now, as if it had
 *  come (nothing where SIGHUP is ignored, as under nohup). */
void signals_terminal_gone(void);

/** Signals received so far (each one counts, also after the first). */
unsigned signals_received(void);

/** read() that returns -1 (errno EINTR) once a signal asked to stop, and
 *  retries when one did not. */
ssize_t signals_read(int fd, void *buf, size_t n);

/**
 * From now on, SIGBUS (a page of the model file @p path, mapped, read past
 * the file's new end) prints one line naming it and exits with status 1.
 */
void signals_watch_mapping(const char *path);

/** The exit status for the signal in `interrupted`: 130 (SIGINT), 143
 *  (SIGTERM) or 129 (SIGHUP). */
int signals_exit_code(void);

/** "interrupted", "terminated" or "hangup". */
const char *signals_word(void);

#endif /* TXLGEN_SIGNALS_H */
