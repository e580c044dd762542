/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util/esc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left) that is not a C1 control; 0 if none. */
static size_t utf8_ok(const uint8_t *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	if (len > n)
		return 0;
	cp = s[0] & (0xff >> (len + 1));
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
		return 0; /* overlong, out of range, surrogate, or C1 */
	return len;
}

const char *esc_mem(char *buf, size_t len, const void *src, size_t n)
{
	const uint8_t *s = src;
	size_t o = 0;

	if (!len)
		return buf;
	for (size_t i = 0; i < n;) {
		size_t u = s[i] >= 0x80 ? utf8_ok(s + i, n - i) : 0;
		char tmp[5];
		size_t k;

		if (u) {
			memcpy(tmp, s + i, u);
			k = u;
		} else if (s[i] < 0x20 || s[i] >= 0x7f || s[i] == '\\') {
			snprintf(tmp, sizeof(tmp), "\\x%02x", s[i]);
			k = 4;
			u = 1;
		} else {
			tmp[0] = (char)s[i];
			k = u = 1;
		}
		if (o + k + 1 > len) {
			/* cut: "..." where it fits */
			size_t dots = len > 4 ? 3 : 0;
			o = (o < len - 1 - dots ? o : len - 1 - dots);
			memcpy(buf + o, "...", dots);
			o += dots;
			break;
		}
		memcpy(buf + o, tmp, k);
		o += k;
		i += u;
	}
	buf[o] = '\0';
	return buf;
}

const char *esc_str(char *buf, size_t len, const char *s)
{
	if (!s)
		s = "(null)";
	return esc_mem(buf, len, s, strlen(s));
}
