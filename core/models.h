/* SPDX-License-Identifier: MIT */
/*
 * models.h - models by name: `-m NAME` finds NAME.bin along the model
 * path ($TXLGEN_MODEL_PATH, the user's models directory, the installed
 * data directory), and --list-models lists what is there.
 */
#ifndef TXLGEN_MODELS_H
#define TXLGEN_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The model used when none is named: its name along the model path. */
#define DEFAULT_MODEL_NAME "sotu"

/**
 * The model file @p spec stands for: @p spec itself if it names an
 * existing file or holds a '/', else NAME.bin (NAME if it ends in .bin)
 * in the first directory of the model path that has it.  @p what names
 * where @p spec came from for messages ("--model", "TXLGEN_MODEL"); NULL
 * for the default model, which is only looked up by name.  Returns a
 * malloc'd path, or NULL after a one-line message that lists the
 * directories searched.
 */
char *model_find(const char *spec, const char *what);

/**
 * What a file that txlgen cannot run is, from its name (@p name's
 * suffix: ".gguf") or its first @p n bytes @p head (either may be NULL):
 * "a GGUF model (llama.cpp)", or NULL when nothing tells.
 */
const char *model_foreign_format(const char *name, const unsigned char *head,
				 size_t n);

/** The directories searched for a model name, in order: a NULL-ended
 *  malloc'd array of malloc'd strings (free with model_path_free). */
char **model_path(void);
void model_path_free(char **dirs);

/**
 * --list-models: one line per model file along the model path (name,
 * size, weight type, vocabulary, description and source), from the
 * files' headers alone; a name found again further down the path is
 * marked as shadowed.  @p json: one JSON object per line instead.
 * Returns an exit code.
 */
int models_list(FILE *out, bool json);

#endif /* TXLGEN_MODELS_H */
