/*
 * core/util/sized.c - copying versioned structs between the caller's size and ours.
 */
#include "config.h"

#include <string.h>

#include "util/sized.h"

/* The header every transparent SDK struct starts with. */
typedef struct sized_header {
	uint32_t struct_version;
	uint32_t struct_size;
} sized_header;

/* Through memcpy: the struct behind the pointer is of another type. */
static sized_header header_of(const void *s)
{
	sized_header h;
	memcpy(&h, s, sizeof(h));
	return h;
}

void aks__sized_write(void *dst, size_t dst_size, const void *full, size_t full_size)
{
	if (!dst || dst_size < sizeof(sized_header))
		return;
	size_t n = dst_size < full_size ? dst_size : full_size;
	memcpy(dst, full, n);
	/* A caller built against a newer header: its fields we do not know read as zero, and
	 * struct_size says they were not filled in. */
	memset((char *)dst + n, 0, dst_size - n);
	uint32_t size = (uint32_t)n;
	memcpy((char *)dst + offsetof(sized_header, struct_size), &size, sizeof(size));
}

int aks__sized_read(void *full, size_t full_size, const void *src, const char *what,
                    aks_error **err)
{
	if (!src)
		return aks__error_set(err, AKS_EINVAL, "%s: missing", what);
	sized_header theirs = header_of(src);
	if (theirs.struct_version < 1 || theirs.struct_size < sizeof(sized_header))
		return aks__error_set(err, AKS_EINVAL,
		                      "%s has struct_version %u and struct_size %u: initialise it "
		                      "with %s_init",
		                      what, theirs.struct_version, theirs.struct_size, what);
	sized_header ours = header_of(full);
	memcpy(full, src, theirs.struct_size < full_size ? theirs.struct_size : full_size);
	memcpy(full, &ours, sizeof(ours));
	return AKS_OK;
}
