/*
 * plugins/common/text.c - printable text from untrusted bytes (aks_text.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>

#include "aks_text.h"

/* The length of the well-formed UTF-8 sequence at p (at most n bytes), or 0. Overlong
 * forms, surrogates and code points past U+10FFFF are not well formed. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
	if (!need || c > 0xf4 || n < need)
		return 0;
	for (size_t i = 1; i < need; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))
		return 0;
	return need;
}

size_t aks__text_printable(char *dst, size_t cap, const void *src, size_t len)
{
	const unsigned char *s = src;
	size_t o = 0;
	if (!cap)
		return 0;
	for (size_t i = 0; i < len;) {
		size_t u = s[i] >= 0x80 ? utf8_len(s + i, len - i) : 0;
		/* U+0080..U+009F, the C1 controls (CSI among them), are C2 80..C2 9F */
		bool c1 = u == 2 && s[i] == 0xc2 && s[i + 1] <= 0x9f;
		if (u && !c1) {
			if (o + u >= cap)
				break;
			for (size_t k = 0; k < u; k++)
				dst[o++] = (char)s[i + k];
			i += u;
			continue;
		}
		size_t n = u ? u : 1;
		bool plain = !u && s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\';
		size_t need = plain ? 1 : s[i] == '\\' ? 2 : 4 * n;
		if (o + need >= cap)
			break;
		if (plain) {
			dst[o++] = (char)s[i];
		} else if (s[i] == '\\') {
			dst[o++] = '\\';
			dst[o++] = '\\';
		} else {
			for (size_t k = 0; k < n; k++) {
				snprintf(dst + o, 5, "\\x%02x", s[i + k]);
				o += 4;
			}
		}
		i += n;
	}
	dst[o] = '\0';
	return o;
}

bool aks__random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[64];
	size_t done = 0;
	out[0] = '\0';
	while (done < nbytes) {
		size_t want = nbytes - done < sizeof(raw) ? nbytes - done : sizeof(raw), got = 0;
		while (got < want) {
			ssize_t r = getrandom(raw + got, want - got, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				out[0] = '\0';
				return false;
			}
			got += (size_t)r;
		}
		for (size_t i = 0; i < want; i++) {
			out[2 * (done + i)] = hex[raw[i] >> 4];
			out[2 * (done + i) + 1] = hex[raw[i] & 15];
		}
		done += want;
	}
	out[2 * nbytes] = '\0';
	return true;
}
