/*
 * plugins/ec2_ssm/ec2_ssm_internal.h - what the files of the ec2_ssm provider share:
 *   ec2_ssm.c         the plugin, its config and the instance; attach
 *   ec2_ssm_client.c  which AWS client a call uses: the instance's own (agent identity), or
 *                     one per (subject, role) assumed with STS (user identity)
 *   ec2_ssm_exec.c    commands and code: SendCommand, GetCommandInvocation polled,
 *                     CancelCommand at the deadline
 *   ec2_ssm_script.c  the shell script a run sends (no I/O; unit tested and fuzzed)
 */
#ifndef EC2_SSM_INTERNAL_H
#define EC2_SSM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_aws.h"
#include "aks_cloud.h"

#define EC2_SSM_NAME "ec2_ssm"

/* One identity's SSM client: the agent's, or a user's role assumed with STS. */
typedef struct ssm_client {
	struct ssm_client *next;
	char *subject, *role_arn; /* NULL, NULL: the agent's */
	aks_aws_source *source;   /* owned; the agent's client's is the chain */
	aks_aws_service ssm;
} ssm_client;

struct aks_provider_impl {
	const aks_host_api *host;
	aks_cloud cloud;
	char *region_setting;   /* the block's region (NULL: the default chain's) */
	char *endpoint_setting; /* the block's endpoint_url */
	char *sts_setting;      /* the block's sts_endpoint_url */
	double poll_interval_s;
	char *description;
	/* resolved at the first request (a host that never uses the profile needs no AWS
	 * settings), under lock */
	pthread_mutex_t lock;
	bool ready;
	aks_aws_env env;
	char *ssm_endpoint, *sts_endpoint;
	ssm_client *agent;   /* the instance's own identity */
	ssm_client *clients; /* users', one per (subject, role_arn) */
};

struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *id; /* the instance id */
};

/* The client a call runs with, and the user to run as (NULL: SSM's own, root): the agent's
 * for an agent-identity principal; for a user one, the role its credentials name, assumed
 * once per (subject, role_arn) and kept fresh. AKS_EPOLICY when a user principal carries no
 * role_arn; the instance's setup errors (no region, bad AWS settings) otherwise. */
int ssm_client_for(aks_provider_impl *prov, const aks_call *call, ssm_client **out,
                   const char **run_as, aks_error **err);
void ssm_clients_free(aks_provider_impl *prov);

int ssm_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                        aks_result *out, aks_error **err);
int ssm_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                     const aks_call *call, aks_result *out, aks_error **err);

/* ---- ec2_ssm_script.c ---- */

/* The heredoc's default delimiter, as the reference names it. */
#define SSM_HEREDOC_DEFAULT "AK_SANDBOX_EOF"

/* The script that runs code with python3 from a quoted heredoc whose delimiter is no line
 * of code (AK_SANDBOX_EOF, else AK_SANDBOX_EOF_<n>); malloc'd, NULL when out of memory. */
char *ssm_python_script(const char *code);
/* command as run_as would run it: `sudo -n -u <run_as> sh -c <command>`, both quoted;
 * a copy of command when run_as is NULL. malloc'd, NULL when out of memory. */
char *ssm_run_as_script(const char *command, const char *run_as);
/* The number of characters (UTF-8 code points; a stray byte counts as one) in s[0..len). */
size_t ssm_char_count(const char *s, size_t len);

/* script wrapped so that SSM's output bound can be told apart from a short output: it runs
 * in a subshell with its stdout and stderr kept in files on the instance, then the wrapper
 * prints "aks-ssm-sizes <stdout bytes>\n<stderr bytes>\n" first, the two files, and exits
 * with the script's status. malloc'd, NULL when out of memory. */
char *ssm_measured_script(const char *script);
/* Reads the sizes at the start of out[0..len): true with the byte counts and their length in
 * *skip; false when out does not start with them. */
bool ssm_sizes_parse(const char *out, size_t len, uint64_t *out_bytes, uint64_t *err_bytes,
                     size_t *skip);

/* What SSM's GetCommandInvocation keeps of a command's output, in characters: the rest is
 * in S3 only when the command sends it there. */
#define SSM_STDOUT_MAX 24000
#define SSM_STDERR_MAX 8000

#endif /* EC2_SSM_INTERNAL_H */
