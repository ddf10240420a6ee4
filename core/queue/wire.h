/*
 * core/queue/wire.h - the queue broker's wire format (reference §2.9 and §5.7): execution requests
 * going to workers, completions coming back, and the completion record the response store
 * keeps. JSON, with file contents in standard base64.
 *
 * Decoding is for untrusted input: every member is type-checked, unknown operations and
 * statuses are refused, and a message that fails any check is an AKS_EINVAL with a message
 * saying what is wrong (never a crash). Internal API (aks__ names).
 */
#ifndef AKS_CORE_QUEUE_WIRE_H
#define AKS_CORE_QUEUE_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"
#include "session/sessions.h"

/* BrokerOperation. */
typedef enum aks_wire_op {
	AKS_WIRE_EXECUTE_CODE = 0,
	AKS_WIRE_EXECUTE_COMMAND,
	AKS_WIRE_INSTALL_PACKAGES,
	AKS_WIRE_UPLOAD_FILE,
	AKS_WIRE_DOWNLOAD_FILE,
	AKS_WIRE_DESTROY
} aks_wire_op;

const char *aks__wire_op_name(int op);

/* ExecutionRequest. Owned strings; `principal` and `policy` are views of the owned parts,
 * ready to hand to a provider. */
typedef struct aks_wire_request {
	char *task_id;
	int op; /* aks_wire_op */
	/* payload, by operation */
	char *code, *language;  /* execute_code */
	char *command;          /* execute_command */
	char **packages;        /* install_packages (NULL-terminated) */
	char *path;             /* upload_file, download_file */
	unsigned char *content; /* upload_file */
	size_t content_len;
	char *profile;
	/* principal */
	char *subject;
	char **groups;      /* NULL-terminated */
	char **credentials; /* NULL-terminated key, value pairs */
	/* policy */
	char **network_allow, **fs_allow_read, **fs_allow_write;
	aks_session_rec session;
	char *ak_session_id;
	char *agent;
	bool has_wait_deadline;
	double wait_deadline;
	aks_principal principal;
	aks_policy policy;
} aks_wire_request;

/* Encodes a request (malloc'd JSON, NULL on ENOMEM). Only the members of r that its
 * operation uses are written; principal and policy are read from r->principal/r->policy. */
char *aks__wire_request_encode(const aks_wire_request *r);
/* Decodes and validates; *out is the caller's, freed with aks__wire_request_free. */
int aks__wire_request_decode(const char *json, size_t len, aks_wire_request **out, aks_error **err);
void aks__wire_request_free(aks_wire_request *r);

/* ExecutionCompletion. */
typedef enum aks_wire_status {
	AKS_WIRE_SUCCEEDED = 0,
	AKS_WIRE_FAILED,
	AKS_WIRE_TIMED_OUT
} aks_wire_status;

const char *aks__wire_status_name(int status);

typedef struct aks_wire_completion {
	char *task_id;
	int status;         /* aks_wire_status */
	aks_result *result; /* NULL: none */
	char *error;        /* NULL: none */
	char *error_type;   /* the reference's error class name, or NULL */
	aks_session_rec session;
} aks_wire_completion;

/* The completion as its JSON object (base64 file contents). NULL on ENOMEM. */
struct json_object *aks__wire_completion_json(const aks_wire_completion *c);
/* The ready-to-store record: {"request_id", "session_id" (the conversation), "status_code"
 * (200, 500 or 504 by status), "body": completion}. malloc'd JSON, NULL on ENOMEM. */
char *aks__wire_record_encode(const aks_wire_completion *c, const char *conversation);
/* Decodes a record's completion (the record, or its body alone); *out freed with
 * aks__wire_completion_free. */
int aks__wire_completion_decode(const char *json, size_t len, aks_wire_completion **out,
                                aks_error **err);
void aks__wire_completion_free(aks_wire_completion *c);

/* The error class the reference names for a status code (error_type across the wire), and
 * back: "SandboxTimeoutError" for AKS_ETIMEOUT, ..., "ExecutionBrokerError" for anything
 * unknown. */
const char *aks__wire_error_type(int code);
int aks__wire_error_code(const char *error_type);

#endif /* AKS_CORE_QUEUE_WIRE_H */
