/* SPDX-License-Identifier: MIT */
/*
 * config.h - the JSON config file (--config) and --print-config.
 */
#ifndef TXLGEN_CONFIG_H
#define TXLGEN_CONFIG_H

#include <stdio.h>

#include "options.h"

struct txl_session;

/**
 * Apply the settings of the JSON file @p path to @p o.  Errors (unreadable
 * file, malformed JSON, unknown key, wrong type, value out of range) are
 * printed as "txlgen: FILE: key 'KEY': REASON"; returns EXIT_OK or
 * EXIT_BADMODEL.
 */
int config_load(struct txlgen_options *o, const char *path);

/**
 * Print the settings of @p o as a JSON object that config_load() accepts.
 * With @p session, the values taken from the model are shown resolved.
 * Returns false if writing failed.
 */
bool config_print(FILE *f, const struct txlgen_options *o,
		  const struct txl_session *session);

#endif /* TXLGEN_CONFIG_H */
