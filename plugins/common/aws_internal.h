/*
 * plugins/common/aws_internal.h - what the files of libaks-aws share and nothing else uses:
 * the shared config files' reading and STS's calls.
 */
#ifndef AKS_AWS_INTERNAL_H
#define AKS_AWS_INTERNAL_H

#include <stddef.h>

#include "aks_aws.h"

/* ---- the shared credentials and config files (aws_profile.c) ---- */

/* A file's settings: triples of section, key, value. */
typedef struct aks_aws_ini {
	char **items;
	size_t n; /* triples */
} aks_aws_ini;

/* Reads the AWS ini dialect: [section] lines, key = value lines, '#' and ';' comments, and
 * a key's indented sub-settings (which are skipped: nothing read here has any). AKS_OK;
 * AKS_ECONFIG with *bad_line set (1-based) for a line that is none of those; AKS_ENOMEM. */
int aks__aws_ini_parse(const char *text, size_t len, aks_aws_ini *ini, int *bad_line);
/* As aks__aws_ini_parse on the file path: AKS_ENOTFOUND when there is no such file,
 * AKS_EIO (errno set) when it cannot be read. */
int aks__aws_ini_load(const char *path, aks_aws_ini *ini, int *bad_line);
/* The value of key in section, NULL when unset. */
const char *aks__aws_ini_get(const aks_aws_ini *ini, const char *section, const char *key);
/* Whether the file has section. */
bool aks__aws_ini_has(const aks_aws_ini *ini, const char *section);
void aks__aws_ini_free(aks_aws_ini *ini);

/* The section of profile in the config file ("default", "profile x") into buf. */
void aks__aws_config_section(const char *profile, char *buf, size_t size);

/* ---- STS (aws_sts.c) ---- */

/* POSTs the query protocol's form (already encoded, "Action=...&Version=2011-06-15&...") to
 * STS at endpoint, signed with signer for region (NULL signer: unsigned, as
 * AssumeRoleWithWebIdentity is), and reads the Credentials of the answer into *out. Errors
 * worded "<who>: cannot <what>: ..." (STS's own code and message for its refusals). */
int aks__aws_sts_credentials(aks_cloud *cloud, const char *endpoint, const char *region,
                             const aks_aws_creds *signer, const char *form, const char *what,
                             const aks_call *call, aks_aws_creds *out, aks_error **err);

/* Reads the Credentials element of an STS answer; false when there is none complete. */
bool aks__aws_sts_parse_credentials(const char *xml, size_t len, aks_aws_creds *out);

#endif /* AKS_AWS_INTERNAL_H */
