/*
 * core/util/sized.h - the SDK's versioned structs across library versions.
 *
 * Every transparent SDK struct starts with struct_version and struct_size and grows only by
 * appending (docs/abi.md). A program built against an older header has a smaller struct than
 * this library's, one built against a newer header a larger one. The two functions below are
 * the only places a struct of the caller's size meets this library's layout: the *_init_sized
 * functions write through aks__sized_write, and every public function that takes such a
 * struct reads it through aks__sized_read, so the rest of the core and every plugin see
 * this library's full layout.
 */
#ifndef AKS_CORE_UTIL_SIZED_H
#define AKS_CORE_UTIL_SIZED_H

#include <stddef.h>

#include "internal.h"

/*
 * The size of `type` as it was when `last` was its last field: the end of `last`, rounded
 * up to the struct's alignment, as the compiler laid it out then. For the frozen sizes of
 * older layouts.
 */
#define AKS__SIZE_THROUGH(type, last)                                                              \
	((offsetof(type, last) + sizeof(((type *)0)->last) + _Alignof(type) - 1) /                 \
	 _Alignof(type) * _Alignof(type))

/*
 * Writes `full` (this library's struct, every field filled in, full_size bytes) into the
 * caller's `dst` of `dst_size` bytes: the first min(dst_size, full_size) bytes, zeros past
 * them up to dst_size, and that minimum as struct_size. Never a byte past dst_size; nothing
 * at all when dst_size cannot hold the header.
 */
void aks__sized_write(void *dst, size_t dst_size, const void *full, size_t full_size);

/*
 * Reads the caller's `src` into `full` (this library's struct, full_size bytes, holding the
 * default of every field): the fields src's struct_size covers replace the defaults and the
 * rest keep them; full's own header is kept. Never a byte past src's struct_size (which, as a
 * sizeof of some layout, ends where a field does; a hand-made header that ends inside a
 * field gets that field torn, never a read past the caller's bytes). AKS_EINVAL,
 * naming the struct `what` ("aks_call"), when src is NULL or its header is not one an
 * initialiser writes (struct_version 0, or a struct_size too small for the header).
 */
int aks__sized_read(void *full, size_t full_size, const void *src, const char *what,
                    aks_error **err);

#endif /* AKS_CORE_UTIL_SIZED_H */
