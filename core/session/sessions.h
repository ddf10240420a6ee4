/*
 * core/session/sessions.h - the sandbox sessions of each conversation, kept in the
 * state store (reference §4.2-4.6).
 *
 * Each session is a record of the conversation's namespace in the store, under
 * the key "session:<id>" (one record per session keeps a call's cost independent
 * of how many sessions the conversation has); per_runtime sessions live in the
 * AKS_STORE_NS_RUNTIME namespace, shared
 * by every conversation of the host. A lookup sees only the caller's
 * conversation and the runtime namespace, so one conversation can never
 * address another's sandboxes.
 */
#ifndef AKS_CORE_SESSION_SESSIONS_H
#define AKS_CORE_SESSION_SESSIONS_H

#include "internal.h"
#include "store/store.h"

/* One sandbox session (the seeds' SandboxSession). */
typedef struct aks_session_rec {
	char *id;   /* uuid4 hex, or default:<profile> */
	char *name; /* may be NULL */
	char *profile;
	char *provider_type; /* the profile's type when the session was made */
	char *sandbox_id;    /* the provider's reconnect handle; NULL until created */
	double created_at;   /* epoch seconds */
	double last_used_at; /* epoch seconds; drives the idle reset */
	bool closed;
	char *reset_notice; /* the reaper destroyed the sandbox: the next call's notice */
	/* Connections its egress policy refused, over the session's life (results' counts). */
	unsigned egress_refused;
} aks_session_rec;

void aks__session_clear(aks_session_rec *s);

/* The session as the reference's SandboxSession JSON object (NULL on ENOMEM), and back
 * (AKS_EIO with a message when a required member is missing). */
struct json_object;
struct json_object *aks__session_to_json(const aks_session_rec *r);
int aks__session_from_json(struct json_object *o, aks_session_rec *r, aks_error **err);

/* 32 lowercase hex characters from the kernel's random source. */
int aks__uuid4_hex(char out[33], aks_error **err);
/* Seconds since the epoch, with microseconds. */
double aks__epoch_now(void);

/* The namespace a profile's sessions live in: the conversation, or the runtime one. */
const char *aks__session_ns(const aks_profile *profile, const char *conversation);

/* new_sandbox_session: mints and stores an empty session of a per_session profile. */
int aks__sessions_new(aks_state_store *st, const aks_settings *s, const char *conversation,
                      const char *profile_name, const char *name, aks_session_rec *out,
                      aks_error **err);

/* Finds an explicit id in the conversation or the runtime namespace. AKS_ENOTFOUND
 * (no error set) when absent. */
int aks__sessions_find(aks_state_store *st, const char *conversation, const char *id,
                       aks_session_rec *out, aks_error **err);

/* The same in one namespace only (the registry of a profile's scope). */
int aks__sessions_find_in(aks_state_store *st, const char *ns, const char *id, aks_session_rec *out,
                          aks_error **err);

/* Inserts or replaces the session in `ns`. */
int aks__sessions_save(aks_state_store *st, const char *ns, const aks_session_rec *rec,
                       aks_error **err);
/* Removes it; absent is not an error. */
int aks__sessions_remove(aks_state_store *st, const char *ns, const char *id, aks_error **err);

/* list_sandbox_sessions: the conversation's sessions, then the runtime ones.
 * *out is an array of *count records; free each with aks__session_clear. */
int aks__sessions_list(aks_state_store *st, const char *conversation, aks_session_rec **out,
                       size_t *count, aks_error **err);

#endif /* AKS_CORE_SESSION_SESSIONS_H */
