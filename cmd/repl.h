/* SPDX-License-Identifier: MIT */
/*
 * repl.h - the interactive loop (-i, or stdin a terminal without a
 * prompt): each line continues the text in the memory; /commands.
 */
#ifndef TXLGEN_REPL_H
#define TXLGEN_REPL_H

#include "engine.h"
#include "output.h"

/**
 * Run the loop on stdin until /quit, end of input, two Ctrl-C at an empty
 * prompt, or SIGTERM.  @p first (may be NULL) is a first turn (the
 * --prompt/--text of -i).  Returns an exit code: without a terminal, the
 * code of the first error (an unknown command, a bad /set...), so that
 * scripts notice.
 */
int repl_run(struct engine *e, struct output *out, struct input *first);

#endif /* TXLGEN_REPL_H */
