/*
 * core/state_store.h - the file-backed state store: one JSON document per namespace,
 * changed only by read-modify-write transactions that are atomic across threads and
 * processes and survive a crash at any instant (old document or new, never a torn one).
 *
 * Namespaces are conversation ids (any NUL-free bytes, 1..AKS_STORE_NS_MAX of them) and the
 * reserved AKS_STORE_NS_RUNTIME for per_runtime sessions. The store itself gives no meaning to
 * any name; refusing "@runtime" as a conversation id is the caller's job.
 *
 * Layout, locking and crash behaviour: docs/state-store.md. Internal API (aks__ names).
 */
#ifndef AKS_CORE_STATE_STORE_H
#define AKS_CORE_STATE_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

struct json_object;

/* The longest namespace, in bytes. */
#define AKS_STORE_NS_MAX 256
/* The namespace of per_runtime sessions, shared by every conversation of a host. */
#define AKS_STORE_NS_RUNTIME "@runtime"
/* The default bound on one serialized document (also enforced when reading one). */
#define AKS_STORE_MAX_DOC_SIZE (16u * 1024u * 1024u)
/* The deepest nesting a document may have (objects and arrays); deeper ones are refused
 * before they are written, so that the store never writes what it could not read back. */
#define AKS_STORE_MAX_DEPTH 64

typedef struct aks_state_store aks_state_store;

/*
 * Opens the store in `dir`, creating it (mode 0700, with missing parents) and its `ns/`
 * subdirectory. dir NULL: $AKS_STATE_DIR if set and non-empty; else, as root,
 * /var/lib/aksandbox; else $XDG_STATE_HOME/aksandbox (when absolute); else
 * ~/.local/state/aksandbox. The directory is opened once: later changes of the working
 * directory or the environment do not move the store.
 */
int aks__store_open(const char *dir, aks_state_store **out, aks_error **err);
void aks__store_close(aks_state_store *s);
/* The directory aks__store_open(NULL, ...) would use, without creating it (malloc'd). */
int aks__store_default_dir(char **out, aks_error **err);
/* The same, as if running as root or not (for tests). */
int aks__store_default_dir_as(bool root, char **out, aks_error **err);
/* The directory the store lives in, as given or resolved at open (not made absolute). */
const char *aks__store_dir(const aks_state_store *s);
/* Changes the document size bound (bytes, > 0) for this handle; for tests and tuning. */
void aks__store_set_max_doc_size(aks_state_store *s, size_t bytes);

/*
 * A read-modify-write transaction on one namespace's document, atomic with respect to other
 * threads and other processes. Under an exclusive lock the current document (a json-c object,
 * `{}` if there is none) is passed to fn, which may change it in place (never replace or
 * json_object_put() it) and sets *changed when it did. If fn returns AKS_OK with *changed set,
 * the new document is written atomically before the lock is released: a document left empty
 * (`{}`) is removed instead, so a namespace with nothing in it takes no space and is not
 * listed. fn's non-zero return is passed back unchanged and nothing is written.
 *
 * fn must not call into the store (any namespace, any handle): a nested call from inside a
 * transaction on the same handle is refused with AKS_EINVAL, because it would wait for a lock
 * its own thread holds. Keep fn short: every other transaction on the namespace waits for it.
 *
 * Errors: AKS_EINVAL (bad namespace, nested call), AKS_EIO (a system call failed, or the
 * stored document is corrupt: it is left in place and the message names the file),
 * AKS_ELIMIT (a document over the size or depth bound), AKS_ENOMEM.
 */
typedef int (*aks_store_txn_fn)(struct json_object *doc, bool *changed, void *ctx, aks_error **err);
int aks__store_update(aks_state_store *s, const char *ns, aks_store_txn_fn fn, void *ctx,
                      aks_error **err);

/* A consistent snapshot of a namespace's document (`{}` if none), taken under a shared lock.
 * The caller json_object_put()s *out. Never creates files. */
int aks__store_read(aks_state_store *s, const char *ns, struct json_object **out, aks_error **err);

/* Every namespace that has a document, sorted bytewise; NULL-terminated, freed with
 * aks__store_free_names(). A snapshot of the directory: namespaces created or emptied
 * meanwhile may or may not appear. */
int aks__store_list(aks_state_store *s, char ***out, aks_error **err);
void aks__store_free_names(char **names);

/* ---- namespace names (state_ns.c), exposed for tests and tools ---- */

/* AKS_OK, or AKS_EINVAL with a message for an empty or over-long namespace (or NULL). */
int aks__store_ns_check(const char *ns, aks_error **err);
/*
 * The namespace's path under ns/, without the file suffix: the bytes [a-z0-9_-] stand for
 * themselves and every other byte is "%xx" (lowercase hex), which is injective, never yields
 * ".", ".." or "/", and stays unambiguous on case-insensitive file systems. An encoding longer
 * than AKS_STORE_NS_CHUNK is cut into chunks, each but the last a directory named
 * "<chunk>+", because one file name holds at most 255 bytes. NULL on ENOMEM.
 */
#define AKS_STORE_NS_CHUNK 200
char *aks__store_ns_path(const char *ns);
/* The inverse of aks__store_ns_path (given the path with chunk markers and without suffix):
 * AKS_OK and the namespace in *out (malloc'd), AKS_EINVAL unless `path` is exactly the
 * canonical path of a valid namespace, or AKS_ENOMEM. */
int aks__store_ns_from_path(const char *path, char **out);

#endif /* AKS_CORE_STATE_STORE_H */
