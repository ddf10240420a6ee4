/*
 * aksandbox/common.h - status codes, the error object and export macros.
 *
 * Shared by the embedding API (aksandbox.h) and the plugin SDK (plugin.h).
 * Plain C99: no compiler extensions outside the guarded attribute macros.
 *
 * Stability: status codes are append-only and never renumbered.
 */
#ifndef AKSANDBOX_COMMON_H
#define AKSANDBOX_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define AKS_EXPORT            __attribute__((visibility("default")))
#define AKS_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define AKS_EXPORT
#define AKS_PRINTF(fmt, args)
#endif

/*
 * Status codes. Functions return AKS_OK (0) or one of the negative codes below.
 * They mirror the error hierarchy of the seeds: a failing *program* is never an
 * error (it is a result with exit_code != 0).
 */
typedef enum aks_status {
	AKS_OK = 0,
	AKS_ERROR = -1,              /* machinery failure with no better code */
	AKS_ECONFIG = -2,            /* bad configuration, unknown profile/type */
	AKS_ECAPABILITY = -3,        /* operation or language not declared */
	AKS_EPOLICY = -4,            /* policy cannot be enforced, path escape */
	AKS_ETIMEOUT = -5,           /* the deadline passed; the program was killed */
	AKS_EPROVISION = -6,         /* create or attach failed */
	AKS_EGONE = -7,              /* attach target vanished (self-heal signal) */
	AKS_ESESSION_NOT_FOUND = -8, /* unknown sandbox_session_id */
	AKS_EBROKER = -9,            /* transport or delivery failure */
	AKS_ENOTFOUND = -10,         /* a file (or other named object) does not exist */
	AKS_EPLUGIN = -11,           /* plugin cannot be found, loaded or validated */
	AKS_EINVAL = -12,            /* bad argument */
	AKS_ENOMEM = -13,            /* allocation failed */
	AKS_ELIMIT = -14,            /* a size limit was exceeded */
	AKS_ECANCELLED = -15,        /* the caller cancelled the call */
	AKS_EIO = -16                /* an operating-system call failed */
#ifdef AKS_ENUM_SENTINELS
	,
	AKS_STATUS_LAST = -17
#endif
} aks_status;

/*
 * The error object: a code and a message, allocated by the host.
 *
 * Fallible functions take `aks_error **err` as their last argument. On failure
 * they return the negative code and, when err is not NULL and *err is NULL,
 * store a new error there. The caller owns it and frees it with
 * aks_error_free() (embedders) or host->error_free() (plugins).
 */
typedef struct aks_error aks_error;

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_COMMON_H */
