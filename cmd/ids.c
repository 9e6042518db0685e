/* SPDX-License-Identifier: MIT */
/*
 * ids.c - token ids written as text (--score --ids, --tokenize --ids).
 */
#include <stdint.h>
#include <string.h>

#include "engine.h"

static bool
is_space(char c)
{
	return c && strchr(" \t\n\r\v\f", c);
}

int
engine_parse_ids(struct engine *e, const char *name, int64_t *line,
		 const char *s, size_t len, struct tokvec *t)
{
	size_t i = 0;

	while (i < len) {
		size_t j;
		long long v = 0;
		int32_t id;

		if (s[i] == '\n')
			++*line;
		if (is_space(s[i])) {
			i++;
			continue;
		}
		for (j = i; j < len && s[j] >= '0' && s[j] <= '9'; j++)
			if (v <= INT32_MAX)
				v = v * 10 + (s[j] - '0');
		if (j == i || (j < len && !is_space(s[j]))) {
			size_t k = j;

			while (k < len && !is_space(s[k]) && k - i < 40)
				k++;
			/* errmsg() makes the quoted input printable */
			errmsg("%s: line %lld: '%.*s' is not a token id", name,
			       (long long)*line, (int)(k - i), s + i);
			return EXIT_RUNTIME;
		}
		if (v >= e->hp->n_token) {
			errmsg("%s: line %lld: token id %.*s is out of range "
			       "(0 .. %d)", name, (long long)*line,
			       (int)(j - i), s + i, e->hp->n_token - 1);
			return EXIT_RUNTIME;
		}
		id = (int32_t)v;
		tokvec_add(t, &id, 1);
		i = j;
	}
	return EXIT_OK;
}
