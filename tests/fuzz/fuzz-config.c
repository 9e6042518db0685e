/* SPDX-License-Identifier: MIT */
/*
 * fuzz-config.c - libFuzzer harness of txlgen's JSON config file:
 * config_load() of core/config.c (with the settings table and value
 * parsers of core/settings.c), through a memfd path as --config gives it.
 *
 * A config that loads must survive a round trip: config_print() of the
 * result, loaded into fresh options, prints the same text again.
 * Run with -close_fd_mask=2: rejected configs print their error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "config.h"
#include "errors.h"
#include "settings.h"

static struct fuzz_file file, file2;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_file_init(&file, "txl-fuzz-config");
	fuzz_file_init(&file2, "txl-fuzz-config2");
	return 0;
}

static char *
print(const struct txlgen_options *o, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		fuzz_fail("open_memstream failed");
	if (!config_print(f, o, NULL, false))
		fuzz_fail("config_print failed");
	fclose(f);
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct txlgen_options o, o2;
	char *text, *text2;
	size_t len, len2;
	int rc;

	fuzz_file_set(&file, data, size);
	options_init(&o);
	rc = config_load(&o, file.path);
	if (rc != EXIT_OK) {
		if (rc != EXIT_BADMODEL)
			fuzz_fail("config_load returned %d", rc);
		options_free(&o);
		return 0;
	}
	text = print(&o, &len);
	fuzz_file_set(&file2, text, len);
	options_init(&o2);
	if (config_load(&o2, file2.path) != EXIT_OK)
		fuzz_fail("config_print output does not load:\n%s", text);
	text2 = print(&o2, &len2);
	if (len != len2 || memcmp(text, text2, len) != 0)
		fuzz_fail("round trip changed the config:\n%s\n---\n%s", text,
			  text2);
	free(text);
	free(text2);
	options_free(&o);
	options_free(&o2);
	return 0;
}
