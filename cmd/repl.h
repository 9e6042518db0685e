/* SPDX-License-Identifier: MIT */
/*
 * repl.h - the interactive loop (-i, or stdin a terminal without a
 * prompt): each line continues the text in the memory; /commands.
 */
#ifndef TXLGEN_REPL_H
#define TXLGEN_REPL_H

#include <stddef.h>

#include "engine.h"
#include "output.h"

/**
 * Run the loop on stdin until /quit, end of input, or Ctrl-C at an empty
 * prompt.  @p first (may be NULL) is a first turn (the --prompt/--text
 * of -i).  Line editing and history only when stdin is a terminal.
 * Returns an exit code.
 */
int repl_run(struct engine *e, struct output *out, const char *first,
	     size_t first_len);

#endif /* TXLGEN_REPL_H */
