/* SPDX-License-Identifier: MIT */
/*
 * config.h - settings as JSON: the config file (--config), a model's
 * recommended settings, and --print-config.
 */
#ifndef TXLGEN_CONFIG_H
#define TXLGEN_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "settings.h"

struct txl_model;
struct txl_session;

/**
 * Apply the settings of the JSON file @p path to @p o.  Errors (unreadable
 * file, malformed JSON, unknown key, wrong type, value out of range) are
 * printed as "txlgen: FILE: key 'KEY': REASON"; returns EXIT_OK or
 * EXIT_BADMODEL.
 */
int config_load(struct txlgen_options *o, const char *path);

/**
 * Apply the model's recommended settings (the JSON object in its metadata
 * key "recommended") to the settings of @p o that still have their
 * built-in defaults.  A bad value is an error naming @p model_path
 * (EXIT_BADMODEL); an unknown key, or one a model may not set, is ignored
 * with a warning.  Returns EXIT_OK without such a key.
 */
int config_apply_recommended(struct txlgen_options *o,
			     const struct txl_model *model,
			     const char *model_path);

/**
 * Print the settings of @p o as a JSON object that config_load() accepts.
 * With @p session, the values taken from the model are shown resolved.
 * With @p sources, the object ends with "sources": where each value came
 * from (config_load() ignores that key).  Returns false if writing failed.
 */
bool config_print(FILE *f, const struct txlgen_options *o,
		  const struct txl_session *session, bool sources);

/** The value of setting @p s as compact JSON (malloc'd), with the
 *  model's values resolved from @p session (may be NULL). */
char *config_value(const struct setting *s, const struct txlgen_options *o,
		   const struct txl_session *session);

#endif /* TXLGEN_CONFIG_H */
