/*
 * core/internal.h - declarations shared by the core's own files (aks__ names).
 * Nothing here is part of the public API.
 */
#ifndef AKS_CORE_INTERNAL_H
#define AKS_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/aksandbox.h>

/* Internal symbols are hidden by -fvisibility=hidden; public ones say AKS_EXPORT. */

/* ---- errors (error.c) ---- */
int aks__error_set(aks_error **err, int code, const char *fmt, ...) AKS_PRINTF(3, 4);
int aks__error_vset(aks_error **err, int code, const char *fmt, va_list ap) AKS_PRINTF(3, 0);
/* Prefixes an existing error's message: "<prefix>: <old message>". */
void aks__error_prefix(aks_error *err, const char *fmt, ...) AKS_PRINTF(2, 3);
/* Hands a library error `e` (owned, may be NULL) on to the caller's err when that has none
 * yet, else frees it; returns rc, so that `return aks__error_pass(err, rc, e);` ends a path. */
int aks__error_pass(aks_error **err, int rc, aks_error *e);

/* ---- principals (principal.c) ---- */
int aks__principal_set(aks_principal_builder *b, int mode, const char *subject);
int aks__principal_add_group(aks_principal_builder *b, const char *group);
int aks__principal_add_credential(aks_principal_builder *b, const char *key, const char *value);

/* ---- time and calls (call.c) ---- */
int64_t aks__now_ms(void);

/*
 * A caller's aks_call read into this library's layout, with its policy and principal: what
 * the core and the plugins see of it, so they may read every field. The fields the caller's
 * struct_size (or its policy's, its principal's) does not cover hold aks_call_init's
 * defaults; a NULL policy or principal is the default one.
 */
typedef struct aks__imported_call {
	aks_call call; /* .policy and .principal point at the two below */
	aks_policy policy;
	aks_principal principal;
} aks__imported_call;

/* AKS_OK, or AKS_EINVAL when a header is not one an initialiser writes (util/sized.h). */
int aks__call_import(aks__imported_call *out, const aks_call *call, aks_error **err);
/* The same for a policy or principal on its own (NULL: the defaults). */
int aks__policy_import(aks_policy *out, const aks_policy *policy, aks_error **err);
int aks__principal_import(aks_principal *out, const aks_principal *principal, aks_error **err);

/* ---- logging (host_api.c) ---- */
void aks__log(int level, const char *component, const char *fmt, ...) AKS_PRINTF(3, 4);

/* Frees *p; for __attribute__((cleanup)). */
static inline void aks__freep(void *p)
{
	void **pp = p;
	extern void free(void *);
	free(*pp);
}
#define aks_autofree __attribute__((cleanup(aks__freep)))

/* Returns *p and sets it to NULL: hands ownership out of a cleanup scope. */
#define aks_steal(p)                                                                               \
	({                                                                                         \
		__typeof__(*(p)) aks_steal_tmp_ = *(p);                                            \
		*(p) = NULL;                                                                       \
		aks_steal_tmp_;                                                                    \
	})

#endif /* AKS_CORE_INTERNAL_H */
