/* SPDX-License-Identifier: MIT */
/*
 * suggest.c - "did you mean": edit distance to the names txlgen knows,
 * and other programs' names for its settings (the option table's).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "settings.h"
#include "suggest.h"

#define NAME_MAX_LEN 40

int
suggest_distance(const char *a, const char *b)
{
	int la = (int)strlen(a), lb = (int)strlen(b);
	int d[NAME_MAX_LEN][NAME_MAX_LEN];

	if (la >= NAME_MAX_LEN || lb >= NAME_MAX_LEN)
		return 99;
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++) {
		for (int j = 1; j <= lb; j++) {
			int cost = a[i - 1] != b[j - 1];
			int v = d[i - 1][j] + 1;

			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

bool
suggest_among(const char *word, const char *names)
{
	size_t n = strlen(word);

	for (const char *p = names; p && *p; p += strcspn(p, " "), p += !!*p)
		if (!strncmp(p, word, n) && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}

const char *
suggest_alias(const char *name)
{
	static char ours[NAME_MAX_LEN + 3];
	bool no = !strncmp(name, "no-", 3);

	/* the option table's names of other programs; their "no-" form is
	 * this one's */
	for (int i = 0; i < n_settings; i++) {
		const struct setting *s = &settings[i];
		bool neg;

		if (suggest_among(name, s->theirs))
			neg = false;
		else if (suggest_among(name, s->theirs_off) ||
			 (no && setting_negatable(s) &&
			  suggest_among(name + 3, s->theirs)))
			neg = true;
		else
			continue;
		return setting_option(s, neg, false, ours, sizeof(ours));
	}
	return NULL;
}

/* @p s in lower case with @p sep between words ('-' and '_' alike);
 * false if it does not fit. */
static bool
normalise(const char *s, char sep, char *out, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i < len - 1; i++)
		out[i] = s[i] == '-' || s[i] == '_' ? sep :
			(char)tolower((unsigned char)s[i]);
	out[i] = '\0';
	return !s[i];
}

const char *
suggest_closest(const char *word, const char *const *names, int n)
{
	char w[NAME_MAX_LEN], c[NAME_MAX_LEN];
	const char *best = NULL;
	int best_d = 99;

	if (!normalise(word, '_', w, sizeof(w)))
		return NULL;
	for (int i = 0; i < n; i++) {
		int d;

		if (!normalise(names[i], '_', c, sizeof(c)))
			continue;
		d = suggest_distance(w, c);
		if (d < best_d) {
			best_d = d;
			best = names[i];
		}
	}
	return best && SUGGEST_CLOSE(best_d, (int)strlen(w)) ? best : NULL;
}

const char *
suggest_setting(const char *word)
{
	static char key[NAME_MAX_LEN];
	const char *keys[SETTINGS_MAX], *ours;
	const struct setting *s;
	char w[NAME_MAX_LEN];
	int n = 0;

	if (normalise(word, '-', w, sizeof(w)) && (ours = suggest_alias(w)) &&
	    (s = setting_find(ours))) {
		snprintf(key, sizeof(key), "%s", s->key);
		return key;
	}
	for (int i = 0; i < n_settings; i++)
		if (setting_is_key(&settings[i]))
			keys[n++] = settings[i].key;
	return suggest_closest(word, keys, n);
}
