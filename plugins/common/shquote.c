/*
 * plugins/common/shquote.c - words quoted for a POSIX shell (aks_shquote.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aks_shquote.h"

char *aks_shquote_argv(const char *const *argv)
{
	/* the worst case: every byte a quote ('\'' is 4 bytes), two quotes and a space a word */
	size_t size = 1;
	for (const char *const *w = argv; w && *w; w++) {
		size_t n = strlen(*w);
		if (n > (SIZE_MAX - size - 3) / 4)
			return NULL;
		size += n * 4 + 3;
	}
	char *out = malloc(size), *p = out;
	if (!out)
		return NULL;
	for (const char *const *w = argv; w && *w; w++) {
		if (w != argv)
			*p++ = ' ';
		*p++ = '\'';
		for (const char *s = *w; *s; s++) {
			if (*s == '\'') {
				memcpy(p, "'\\''", 4);
				p += 4;
			} else {
				*p++ = *s;
			}
		}
		*p++ = '\'';
	}
	*p = '\0';
	return out;
}
