/*
 * core/plugin/call.c - per-call context: deadline, policy, principal; a caller's call read
 * into this library's layout.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "util/sized.h"

int64_t aks__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *const no_strings[] = {NULL};

static void policy_defaults(aks_policy *policy)
{
	memset(policy, 0, sizeof(*policy));
	policy->struct_version = AKS_POLICY_VERSION;
	policy->struct_size = sizeof(*policy);
	policy->network_egress = AKS_EGRESS_ALLOW;
	policy->network_allow = no_strings;
	policy->fs_allow_read = no_strings;
	policy->fs_allow_write = no_strings;
	policy->timeout = 120.0;
	policy->strict = true;
}

static void principal_defaults(aks_principal *principal, const char *subject)
{
	memset(principal, 0, sizeof(*principal));
	principal->struct_version = AKS_PRINCIPAL_VERSION;
	principal->struct_size = sizeof(*principal);
	principal->mode = AKS_IDENTITY_AGENT;
	principal->subject = subject ? subject : "agent";
	principal->groups = no_strings;
	principal->credentials = no_strings;
}

AKS_EXPORT void aks_policy_init_sized(aks_policy *policy, size_t size)
{
	aks_policy full;
	policy_defaults(&full);
	aks__sized_write(policy, size, &full, sizeof(full));
}

AKS_EXPORT void aks_principal_init_sized(aks_principal *principal, size_t size, const char *subject)
{
	aks_principal full;
	principal_defaults(&full, subject);
	aks__sized_write(principal, size, &full, sizeof(full));
}

/* Used when a call is made without a policy or principal. */
static aks_policy default_policy;
static aks_principal default_principal;

static void init_defaults(void)
{
	policy_defaults(&default_policy);
	principal_defaults(&default_principal, "agent");
}

static void call_defaults(aks_call *call, double timeout, const aks_policy *policy,
                          const aks_principal *principal, aks_cancel *cancel)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_defaults);
	memset(call, 0, sizeof(*call));
	call->struct_version = AKS_CALL_VERSION;
	call->struct_size = sizeof(*call);
	if (timeout > 0) {
		call->timeout = timeout;
		/* Round up so a sub-millisecond timeout still has a deadline. */
		call->deadline_ms = aks__now_ms() + (int64_t)(timeout * 1000.0 + 0.999);
	}
	call->policy = policy ? policy : &default_policy;
	call->principal = principal ? principal : &default_principal;
	call->host_private = cancel;
}

AKS_EXPORT void aks_call_init_sized(aks_call *call, size_t size, double timeout,
                                    const aks_policy *policy, const aks_principal *principal,
                                    aks_cancel *cancel)
{
	aks_call full;
	call_defaults(&full, timeout, policy, principal, cancel);
	aks__sized_write(call, size, &full, sizeof(full));
}

int aks__policy_import(aks_policy *out, const aks_policy *policy, aks_error **err)
{
	policy_defaults(out);
	return policy ? aks__sized_read(out, sizeof(*out), policy, "aks_policy", err) : AKS_OK;
}

int aks__principal_import(aks_principal *out, const aks_principal *principal, aks_error **err)
{
	principal_defaults(out, "agent");
	return principal ? aks__sized_read(out, sizeof(*out), principal, "aks_principal", err)
	                 : AKS_OK;
}

int aks__call_import(aks__imported_call *out, const aks_call *call, aks_error **err)
{
	call_defaults(&out->call, 0, NULL, NULL, NULL);
	int rc = aks__sized_read(&out->call, sizeof(out->call), call, "aks_call", err);
	if (rc == AKS_OK)
		rc = aks__policy_import(&out->policy, out->call.policy, err);
	if (rc == AKS_OK)
		rc = aks__principal_import(&out->principal, out->call.principal, err);
	out->call.policy = &out->policy;
	out->call.principal = &out->principal;
	return rc;
}
