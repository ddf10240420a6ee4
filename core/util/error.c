/*
 * core/util/error.c - the error object: a status code and a message.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct aks_error {
	int code;
	char *message;
};

/* Handed out when the error itself cannot be allocated; never freed. */
static struct aks_error oom_error = {AKS_ENOMEM, (char *)"out of memory"};

int aks__error_vset(aks_error **err, int code, const char *fmt, va_list ap)
{
	if (!err || *err)
		return code;
	struct aks_error *e = malloc(sizeof(*e));
	if (!e || vasprintf(&e->message, fmt, ap) < 0) {
		free(e);
		*err = &oom_error;
		return code;
	}
	e->code = code;
	*err = e;
	return code;
}

int aks__error_set(aks_error **err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	aks__error_vset(err, code, fmt, ap);
	va_end(ap);
	return code;
}

void aks__error_prefix(aks_error *err, const char *fmt, ...)
{
	if (!err || err == &oom_error)
		return;
	char *prefix = NULL, *joined = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&prefix, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (asprintf(&joined, "%s: %s", prefix, err->message) >= 0) {
		free(err->message);
		err->message = joined;
	}
	free(prefix);
}

int aks__error_pass(aks_error **err, int rc, aks_error *e)
{
	if (err && !*err)
		*err = e;
	else
		aks_error_free(e);
	return rc;
}

AKS_EXPORT int aks_error_code(const aks_error *err)
{
	return err ? err->code : AKS_OK;
}

AKS_EXPORT const char *aks_error_message(const aks_error *err)
{
	return err ? err->message : "";
}

AKS_EXPORT void aks_error_free(aks_error *err)
{
	if (!err || err == &oom_error)
		return;
	free(err->message);
	free(err);
}

AKS_EXPORT const char *aks_strerror(int code)
{
	switch (code) {
	case AKS_OK:
		return "success";
	case AKS_ERROR:
		return "sandbox error";
	case AKS_ECONFIG:
		return "configuration error";
	case AKS_ECAPABILITY:
		return "capability not supported";
	case AKS_EPOLICY:
		return "policy error";
	case AKS_ETIMEOUT:
		return "timed out";
	case AKS_EPROVISION:
		return "provisioning failed";
	case AKS_EGONE:
		return "sandbox is gone";
	case AKS_ESESSION_NOT_FOUND:
		return "sandbox session not found";
	case AKS_EBROKER:
		return "broker error";
	case AKS_ENOTFOUND:
		return "not found";
	case AKS_EPLUGIN:
		return "plugin error";
	case AKS_EINVAL:
		return "invalid argument";
	case AKS_ENOMEM:
		return "out of memory";
	case AKS_ELIMIT:
		return "limit exceeded";
	case AKS_ECANCELLED:
		return "cancelled";
	case AKS_EIO:
		return "input/output error";
	default:
		return "unknown error";
	}
}

AKS_EXPORT const char *aks_error_type_name(int code)
{
	switch (code) {
	case AKS_ECONFIG:
		return "SandboxConfigError";
	case AKS_ECAPABILITY:
		return "SandboxCapabilityError";
	case AKS_EPOLICY:
		return "SandboxPolicyError";
	case AKS_ETIMEOUT:
		return "SandboxTimeoutError";
	case AKS_EPROVISION:
		return "SandboxProvisionError";
	case AKS_EGONE:
		return "SandboxGoneError";
	case AKS_ESESSION_NOT_FOUND:
		return "SandboxSessionNotFoundError";
	case AKS_EBROKER:
		return "ExecutionBrokerError";
	case AKS_ENOTFOUND:
		return "FileNotFoundError";
	case AKS_OK:
		return NULL;
	default:
		return "SandboxError";
	}
}
