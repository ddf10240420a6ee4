/*
 * core/store/store.h - the state store as the core sees it: JSON records named by a namespace
 * and a key, kept by a store plugin (<aksandbox/store.h>) or the built-in file store.
 *
 * Namespaces are conversation ids and the reserved AKS_STORE_NS_RUNTIME for per_runtime
 * sessions; keys name one session or task. Both are any NUL-free bytes, 1..AKS_STORE_NAME_MAX
 * of them. The store itself gives no meaning to any name; refusing "@runtime" as a
 * conversation id is the caller's job.
 *
 * Every record is a JSON object. The file store's layout, locking and crash behaviour:
 * docs/state-store.md. Internal API (aks__ names).
 */
#ifndef AKS_CORE_STORE_STORE_H
#define AKS_CORE_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/store.h>

#include "internal.h"

struct json_object;

/* The namespace of per_runtime sessions, shared by every conversation of a host. */
#define AKS_STORE_NS_RUNTIME "@runtime"
/* The default bound on one serialized record (the file store also refuses to read more). */
#define AKS_STORE_MAX_DOC_SIZE (16u * 1024u * 1024u)
/* The deepest nesting a record may have (objects and arrays); deeper ones are refused before
 * they are written, so that the store never writes what it could not read back. */
#define AKS_STORE_MAX_DEPTH 64

typedef struct aks_state_store aks_state_store;

/* The built-in file store's descriptor ("file"; its one config key: `dir`), for validating
 * `sandbox.state_store`. */
extern const aks_plugin_descriptor aks__file_store_descriptor;

/*
 * Opens the built-in file store in `dir`, creating it (mode 0700, with missing parents) and
 * its `ns/` subdirectory. dir NULL: $AKS_STATE_DIR if set and non-empty; else, as root,
 * /var/lib/aksandbox; else $XDG_STATE_HOME/aksandbox (when absolute); else
 * ~/.local/state/aksandbox. The directory is opened once: later changes of the working
 * directory or the environment do not move the store.
 */
int aks__store_open(const char *dir, aks_state_store **out, aks_error **err);
/* Opens a store plugin (kind AKS_PLUGIN_STORE) with its validated config block (borrowed:
 * it must outlive the store). */
int aks__store_open_plugin(const aks_plugin *plugin, const aks_config *config,
                           aks_state_store **out, aks_error **err);
/* The same for a descriptor: a loaded plugin's or a built-in store's. */
int aks__store_open_desc(const aks_plugin_descriptor *d, const aks_config *config,
                         aks_state_store **out, aks_error **err);
void aks__store_close(aks_state_store *s);
/* "file", or the plugin's name. */
const char *aks__store_name(const aks_state_store *s);
/* The file store's directory, as given or resolved at open; NULL for other stores. */
const char *aks__store_dir(const aks_state_store *s);
/* The directory aks__store_open(NULL, ...) would use, without creating it (malloc'd). */
int aks__store_default_dir(char **out, aks_error **err);
/* The same, as if running as root or not (for tests). */
int aks__store_default_dir_as(bool root, char **out, aks_error **err);
/* Changes the record size bound (bytes, > 0) for this handle; for tests and tuning. */
void aks__store_set_max_doc_size(aks_state_store *s, size_t bytes);
/* Declares the records of ns whose keys start with key_prefix worth nothing after a crash
 * (the owner's creation claims: session/owner.h), so the file store writes them without
 * fsync; other stores are unchanged. Call before the handle is shared between threads. */
int aks__store_set_volatile(aks_state_store *s, const char *ns, const char *key_prefix,
                            aks_error **err);

/*
 * A read-modify-write transaction on one record, atomic with respect to other threads and
 * other processes. The current record (a json-c object, `{}` if there is none) is passed to
 * fn, which may change it in place (never replace or json_object_put() it) and sets *changed
 * when it did. If fn returns AKS_OK with *changed set, the new record is written atomically
 * before the next transaction on it may start: a record left empty (`{}`) is deleted instead.
 * fn's non-zero return is passed back unchanged and nothing is written.
 *
 * fn must not call into the store (any record, any handle): a nested call from inside a
 * transaction on the same handle is refused with AKS_EINVAL, because it could wait for a lock
 * its own thread holds. Keep fn short: every other transaction on the record waits for it.
 *
 * Errors: AKS_EINVAL (bad name, nested call), AKS_EIO (the store failed, or the stored record
 * is corrupt: it is left in place and the message says where), AKS_ELIMIT (a record over the
 * size or depth bound), AKS_ENOMEM.
 */
/* Empties a record in place, from inside a transaction: the record is then deleted. */
void aks__store_clear_record(struct json_object *rec);
typedef int (*aks_store_json_fn)(struct json_object *rec, bool *changed, void *ctx,
                                 aks_error **err);
int aks__store_update(aks_state_store *s, const char *ns, const char *key, aks_store_json_fn fn,
                      void *ctx, aks_error **err);

/* Whether the store has put_expiring. */
bool aks__store_can_expire(const aks_state_store *s);
/* Writes rec (bounded like any record) replacing any value; the store removes it by itself
 * ttl_seconds (> 0) later. AKS_ECAPABILITY when the store cannot expire records. */
int aks__store_put_expiring(aks_state_store *s, const char *ns, const char *key,
                            struct json_object *rec, int64_t ttl_seconds, aks_error **err);
/* Removes a record; absent is fine. */
int aks__store_delete(aks_state_store *s, const char *ns, const char *key, aks_error **err);

/* The record as some completed transaction left it; AKS_ENOTFOUND (no error set) when there is
 * none. The caller json_object_put()s *out. */
int aks__store_get(aks_state_store *s, const char *ns, const char *key, struct json_object **out,
                   aks_error **err);

/* Calls each(ctx, key, record) for every record of `ns` whose key starts with `prefix`, in no
 * particular order; a record that is not valid JSON is skipped with a warning. A non-zero
 * return of `each` stops the scan and is returned. The record is borrowed for the call. */
typedef int (*aks_store_each_fn)(void *ctx, const char *key, struct json_object *rec);
int aks__store_scan(aks_state_store *s, const char *ns, const char *prefix, aks_store_each_fn each,
                    void *ctx, aks_error **err);

/* Every namespace that has a record, sorted bytewise; NULL-terminated, freed with
 * aks__store_free_names(). */
int aks__store_list(aks_state_store *s, char ***out, aks_error **err);
void aks__store_free_names(char **names);

/* The named lock (ns, key), held across an operation that spans several transactions. The
 * wait honours call's deadline (AKS_ETIMEOUT) and cancellation (AKS_ECANCELLED); call NULL
 * waits as long as it takes. */
int aks__store_lock(aks_state_store *s, const char *ns, const char *key, const aks_call *call,
                    aks_store_lock **out, aks_error **err);
void aks__store_unlock(aks_state_store *s, aks_store_lock *lock);

/* ---- names (file_ns.c), for the file store and tests ---- */

/* AKS_OK, or AKS_EINVAL with a message for an empty or over-long name (or NULL); `what` is
 * "namespace" or "key", for the message. */
int aks__store_name_check(const char *what, const char *name, aks_error **err);
/*
 * The name's path under the file store's ns/: the bytes [a-z0-9_-] stand for themselves and
 * every other byte is "%xx" (lowercase hex), which is injective, never yields ".", "..", "/"
 * or a '.', and stays unambiguous on case-insensitive file systems. An encoding longer than
 * AKS_STORE_NS_CHUNK is cut into chunks, each but the last a directory named "<chunk>+",
 * because one file name holds at most 255 bytes. NULL on ENOMEM.
 */
#define AKS_STORE_NS_CHUNK 200
char *aks__store_name_path(const char *name);
/* The inverse of aks__store_name_path (given the path with chunk markers and without suffix):
 * AKS_OK and the name in *out (malloc'd), AKS_EINVAL unless `path` is exactly the canonical
 * path of a valid name, or AKS_ENOMEM. */
int aks__store_name_from_path(const char *path, char **out);

#endif /* AKS_CORE_STORE_STORE_H */
