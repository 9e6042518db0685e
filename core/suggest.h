/* SPDX-License-Identifier: MIT */
/*
 * suggest.h - "did you mean": the name a mistyped one most likely stands
 * for, wherever txlgen takes a name (options, config keys, /set keys,
 * REPL commands).
 */
#ifndef TXLGEN_SUGGEST_H
#define TXLGEN_SUGGEST_H

#include <stdbool.h>

/** Damerau-Levenshtein distance (optimal string alignment) of @p a and
 *  @p b; 99 for names of 40 bytes or more. */
int suggest_distance(const char *a, const char *b);

/** Close enough to suggest: at most 2 edits, and at most a third of the
 *  @p len characters of what was typed. */
#define SUGGEST_CLOSE(d, len) ((d) == 0 || ((d) <= 2 && (d) * 3 <= (len)))

/** Whether @p word is one of the space-separated @p names. */
bool suggest_among(const char *word, const char *names);

/**
 * What another program (llama.cpp above all) calls @p name, as this one's
 * option name ("ctx-size" -> "mem-len"), or NULL.  @p name is lower case
 * with '-' between words.
 */
const char *suggest_alias(const char *name);

/**
 * The one of the @p n @p names that @p word most likely misspells (case,
 * '-' and '_' aside), or NULL if none is close.
 */
const char *suggest_closest(const char *word, const char *const *names,
			    int n);

/** The setting key (settings.c) that @p word misspells, or that another
 *  program's name for a setting means ("temperature" -> "temp"), or
 *  NULL. */
const char *suggest_setting(const char *word);

#endif /* TXLGEN_SUGGEST_H */
