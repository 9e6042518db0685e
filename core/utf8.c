/* SPDX-License-Identifier: MIT */
/*
 * utf8.c - UTF-8 checked byte by byte, and lines made printable: what
 * every message that quotes input needs, so it depends on nothing else
 * of txlgen's (errors.c cleans its messages with it).
 */
#include <string.h>

#include "utf8.h"

bool
utf8_lead(struct utf8_state *u, unsigned char c)
{
	u->lo = 0x80;
	u->hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		u->need = 1;
	} else if (c >= 0xe0 && c <= 0xef) {
		u->need = 2;
		if (c == 0xe0)
			u->lo = 0xa0;   /* no overlong forms */
		else if (c == 0xed)
			u->hi = 0x9f;   /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		u->need = 3;
		if (c == 0xf0)
			u->lo = 0x90;
		else if (c == 0xf4)
			u->hi = 0x8f;   /* nothing above U+10FFFF */
	} else {
		return false;
	}
	u->buf[0] = c;
	u->len = 1;
	return true;
}

size_t
utf8_char_len(const unsigned char *s, size_t n)
{
	struct utf8_state u = { 0 };
	size_t k;

	if (s[0] < 0x80)
		return 1;
	if (!utf8_lead(&u, s[0]))
		return 0;
	for (k = 1; u.need; k++, u.need--) {
		if (k >= n || s[k] < u.lo || s[k] > u.hi)
			return 0;
		u.lo = 0x80;
		u.hi = 0xbf;
	}
	return k;
}

bool
utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t k = utf8_char_len(p + i, len - i);

		if (!k)
			return false;
		i += k;
	}
	return true;
}

size_t
text_control_len(const unsigned char *s, size_t n)
{
	if (s[0] < 0x20 || s[0] == 0x7f)
		return 1;
	/* C1 controls U+0080..U+009F (CSI is U+009B) */
	if (n > 1 && s[0] == 0xc2 && s[1] >= 0x80 && s[1] < 0xa0)
		return 2;
	return 0;
}

void
text_clean_line(char *s)
{
	unsigned char *p = (unsigned char *)s;
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		size_t k = utf8_char_len(p + i, n - i);
		size_t c = k ? text_control_len(p + i, n - i) : 1;

		if (c) {
			/* one '?' for the control, or for a byte of no
			 * character */
			memmove(p + i + 1, p + i + c, n - i - c + 1);
			p[i++] = '?';
			n -= c - 1;
		} else {
			i += k;
		}
	}
}
