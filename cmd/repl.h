/* SPDX-License-Identifier: MIT */
/*
 * repl.h - the interactive loop (-i, or stdin a terminal without a
 * prompt): each line continues the text in the memory; /commands.
 */
#ifndef TXLGEN_REPL_H
#define TXLGEN_REPL_H

#include "engine.h"
#include "output.h"

/* The least memory of an interactive session, in positions: a turn of
 * 256 tokens must not push the text typed before it out of the memory. */
#define REPL_MIN_MEM_LEN 1024

/**
 * The interactive session's own defaults, applied to the settings of the
 * loaded model before its session is made: where no number was given
 * for mem_len (or the model's recommended one), the model's length or
 * REPL_MIN_MEM_LEN, whichever is larger.
 */
void repl_settings(struct engine *e);

/**
 * Run the loop on stdin until /quit, end of input, two Ctrl-C at an empty
 * prompt, or SIGTERM.  @p first (may be NULL) is a first turn (the
 * --prompt/--text of -i).  Returns an exit code: without a terminal, the
 * code of the first error (an unknown command, a bad /set...), so that
 * scripts notice.
 */
int repl_run(struct engine *e, struct output *out, struct input *first);

#endif /* TXLGEN_REPL_H */
