/* SPDX-License-Identifier: MIT */
/*
 * signals.c - SIGINT and SIGTERM set a flag; nothing else happens in the
 * handler.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "signals.h"

volatile sig_atomic_t interrupted;

static void
on_signal(int sig)
{
	/* SIGTERM wins: the session must end even if Ctrl-C only asked to
	 * stop a generation */
	if (interrupted != SIGTERM)
		interrupted = sig;
}

void
signals_setup(bool restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

ssize_t
signals_read(int fd, void *buf, size_t n)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	sigset_t block, old;
	ssize_t got;
	int k;

	/* wait with the signals blocked except inside ppoll(), so that one
	 * arriving just before the wait cannot be missed */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	for (;;) {
		sigprocmask(SIG_BLOCK, &block, &old);
		k = interrupted ? -1 : ppoll(&pfd, 1, NULL, &old);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (interrupted) {
			errno = EINTR;
			return -1;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		got = read(fd, buf, n);
		if (got >= 0 || (errno != EINTR && errno != EAGAIN))
			return got;
	}
}

int
signals_exit_code(void)
{
	return interrupted == SIGTERM ? EXIT_TERMINATED : EXIT_INTERRUPTED;
}

const char *
signals_word(void)
{
	return interrupted == SIGTERM ? "terminated" : "interrupted";
}
