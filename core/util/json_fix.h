/*
 * core/util/json_fix.h - a workaround for json-c's decoding of surrogate-pair escapes.
 *
 * json-c 0.16 (Debian bookworm) decodes 32 of the 1,024 high surrogates of a "\uD8xx\uDCxx"
 * pair to U+FFFD instead of the character (those whose bits 1-5 are 11011: its check for a
 * following low surrogate looks at the wrong bits; json-c PR #893). Clients that escape
 * everything outside ASCII (Python's json.dumps, our own writer) send such pairs for
 * characters beyond the Basic Multilingual Plane, so every JSON text from outside is passed
 * through aks__json_fix_surrogates first: valid pairs inside strings become the UTF-8 bytes
 * they stand for, which json-c reads correctly. Nothing else changes; a lone surrogate is
 * left for json-c to judge.
 *
 * Header-only (static inline) so that the core and the MCP server, which links only the
 * public API, can both use it without a shared internal symbol.
 */
#ifndef AKS_CORE_UTIL_JSON_FIX_H
#define AKS_CORE_UTIL_JSON_FIX_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline long aks__json_hex4(const char *p)
{
	long v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
		        : c >= 'a' && c <= 'f' ? c - 'a' + 10
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                               : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/*
 * *out is NULL when `text` needs no change (use it as it is), else a malloc'd copy with the
 * pairs rewritten (*out_len bytes, NUL-terminated; never longer than len). Returns -1 only
 * when memory runs out.
 */
static inline int aks__json_fix_surrogates(const char *text, size_t len, char **out,
                                           size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	char *o = NULL;
	size_t n = 0;
	bool in_string = false;
	for (size_t i = 0; i < len;) {
		char c = text[i];
		size_t take = 1;
		if (c == '"') {
			in_string = !in_string;
		} else if (in_string && c == '\\' && i + 1 < len) {
			take = 2;
			long hi =
			    text[i + 1] == 'u' && i + 12 <= len ? aks__json_hex4(text + i + 2) : -1;
			if (hi >= 0)
				take = 6;
			long lo = hi >= 0xD800 && hi <= 0xDBFF && text[i + 6] == '\\' &&
			                  text[i + 7] == 'u'
			              ? aks__json_hex4(text + i + 8)
			              : -1;
			if (lo >= 0xDC00 && lo <= 0xDFFF) {
				unsigned long cp = 0x10000 + ((unsigned long)(hi - 0xD800) << 10) +
				                   (unsigned long)(lo - 0xDC00);
				if (!o) {
					if (!(o = malloc(len + 1)))
						return -1;
					memcpy(o, text, i);
					n = i;
				}
				o[n++] = (char)(0xF0 | (cp >> 18));
				o[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
				o[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
				o[n++] = (char)(0x80 | (cp & 0x3F));
				i += 12;
				continue;
			}
		}
		if (take > len - i)
			take = len - i;
		if (o)
			memcpy(o + n, text + i, take);
		n += take;
		i += take;
	}
	if (o) {
		o[n] = '\0';
		*out = o;
		*out_len = n;
	}
	return 0;
}

#endif /* AKS_CORE_UTIL_JSON_FIX_H */
