/* SPDX-License-Identifier: MIT */
/*
 * signals.c - SIGINT, SIGTERM and SIGHUP set a flag; nothing else happens
 * in the handler, but in immediate mode, where it ends the program, and
 * SIGTERM and SIGHUP start a grace period (alarm()) after which it ends.
 * SIGBUS (the mapped model file cut short) ends the run with a message.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "signals.h"
#include "text.h"

volatile sig_atomic_t interrupted;

static volatile sig_atomic_t hangup;	/* SIGHUP came (interrupted is
					   SIGTERM then) */
static volatile sig_atomic_t received;
static volatile sig_atomic_t immediate;
static volatile sig_atomic_t int_ends = 1;  /* SIGINT ends the run too */
static bool installed, keep_ignored[NSIG];
static pthread_t main_thread;

/* The words and exit codes of signals_word() and signals_exit_code(),
 * for the handler too. */
static const char *
word_of(int sig, bool hup)
{
	return hup ? "hangup" : sig == SIGTERM ? "terminated" : "interrupted";
}

static int
code_of(int sig, bool hup)
{
	return hup ? EXIT_HANGUP : sig == SIGTERM ? EXIT_TERMINATED
		: EXIT_INTERRUPTED;
}

/* End the program now, as signals_word() and signals_exit_code() say,
 * the message followed by @p why; async-signal-safe. */
static _Noreturn void
end_now(int sig, bool hup, const char *why)
{
	const char *w = word_of(sig, hup);

	(void)!write(STDERR_FILENO, "txlgen: ", 8);
	(void)!write(STDERR_FILENO, w, strlen(w));
	(void)!write(STDERR_FILENO, why, strlen(why));
	(void)!write(STDERR_FILENO, "\n", 1);
	_exit(code_of(sig, hup));
}

/* A signal that ends the run came SIGNALS_GRACE_S seconds ago, and the
 * run has not ended: something blocks it (output into a pipe that nobody
 * reads), and what is left to write is given up. */
static void
on_alarm(int sig)
{
	(void)sig;
	end_now(interrupted, hangup, " (still not done "
		SIGNALS_GRACE_STR " s after the signal: the rest of the output "
		"is lost)");
}

static void
on_signal(int sig)
{
	bool hup = sig == SIGHUP;

	if (immediate)
		end_now(hup ? SIGTERM : sig, hup, "");
	/* the kernel may hand a signal to any thread that does not block it
	 * (OpenBLAS starts its own before main()): sent on, it wakes the
	 * main thread where that one waits for input, and sets the flag
	 * there, once */
	if (!pthread_equal(pthread_self(), main_thread)) {
		pthread_kill(main_thread, sig);
		return;
	}
	/* a terminal that goes away sends SIGHUP to the session leader and
	 * to its foreground group, often the same process: the second asks
	 * nothing new, and must not cancel the state save the first began */
	if (hup && hangup)
		return;
	received++;
	/* SIGTERM and SIGHUP win: the session must end even if Ctrl-C only
	 * asked to stop a generation */
	if (interrupted == SIGTERM)
		return;
	interrupted = hup ? SIGTERM : sig;
	hangup = hup;
	if (interrupted == SIGTERM || int_ends)
		alarm(SIGNALS_GRACE_S);
}

void
signals_setup(bool restart)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old;

	if (!installed) {
		main_thread = pthread_self();
		immediate = 1;
		/* an ignored SIGHUP (nohup) stays ignored */
		keep_ignored[SIGHUP] = sigaction(SIGHUP, NULL, &old) == 0 &&
			old.sa_handler == SIG_IGN;
		installed = true;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	sa.sa_flags = restart ? SA_RESTART : 0;
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		if (!keep_ignored[sigs[i]])
			sigaction(sigs[i], &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
}

void
signals_immediate(bool on)
{
	immediate = on;
	if (on && interrupted)
		end_now(interrupted, hangup, "");
}

void
signals_int_ends_run(bool on)
{
	int_ends = on;
}

unsigned
signals_grace_pause(void)
{
	return alarm(0);
}

void
signals_grace_resume(unsigned left)
{
	if (left)
		alarm(left);
}

void
signals_terminal_gone(void)
{
	if (!hangup)
		raise(SIGHUP);
}

unsigned
signals_received(void)
{
	return (unsigned)received;
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
	sigaddset(&block, SIGHUP);
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
	return code_of(interrupted, hangup);
}

const char *
signals_word(void)
{
	return word_of(interrupted, hangup);
}

/* The whole message, made before it is needed: the handler may only
 * write() it */
static char bus_msg[1024];
static size_t bus_len;

static void
on_sigbus(int sig)
{
	(void)sig;
	(void)!write(STDERR_FILENO, bus_msg, bus_len);
	_exit(EXIT_RUNTIME);
}

void
signals_watch_mapping(const char *path)
{
	struct sigaction sa;
	char name[512];
	int n;

	/* a read of a mapped page past the file's new end raises SIGBUS;
	 * what was in stdio's buffers is lost, the state file untouched
	 * (written only at the end, through a temporary file) */
	snprintf(name, sizeof name, "%s", path);
	text_clean_line(name);
	n = snprintf(bus_msg, sizeof bus_msg, "txlgen: %s: the model file "
		     "was cut short while in use (replace a model with mv, or "
		     "read it whole: leave out --mmap)\n", name);
	bus_len = n < 0 ? 0 : (size_t)n < sizeof bus_msg ? (size_t)n
		  : sizeof bus_msg - 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}
