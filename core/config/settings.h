/*
 * core/config/settings.h - the typed model of config.yaml's `sandbox:` block.
 */
#ifndef AKS_CORE_CONFIG_SETTINGS_H
#define AKS_CORE_CONFIG_SETTINGS_H

#include <stdatomic.h>

#include "config/yaml_tree.h"
#include "internal.h"

/* Policy dimensions, as the gate and `aksandbox check` name them. */
enum {
	AKS_DIM_NETWORK = AKS_POLICY_NETWORK,
	AKS_DIM_FILESYSTEM = AKS_POLICY_FILESYSTEM,
	AKS_DIM_RESOURCES = AKS_POLICY_RESOURCES,
};

/* The longest profile name, in bytes: its default session's id, "default:<name>", must fit a
 * state store key (AKS_STORE_NAME_MAX), and tool arguments naming a profile are held to it. */
#define AKS_PROFILE_NAME_MAX 128

typedef struct aks_broker_settings {
	char *flavor;              /* embedded | thread | queue | plugin */
	double wait_timeout;       /* seconds; 0 = always promote */
	double wait_poll_interval; /* seconds */
	int64_t inline_payload_max_bytes;
	int64_t response_ttl;          /* seconds */
	double sweep_interval;         /* seconds */
	double worker_timeout_ceiling; /* seconds; 0 = none */
	char *queue_json;              /* the queue block as JSON, or NULL */
	char *response_store_json;     /* the response_store block as JSON, or NULL */
	/* sandbox.broker.queue's consumer settings (reference Appendix A) */
	unsigned input_max_receive, output_max_receive; /* deliveries before the dead end */
	unsigned input_consumers, output_consumers;     /* threads per loop */
	unsigned batch_size;                            /* messages per fetch */
} aks_broker_settings;

/* A provider block in a profile for another type than the profile's: inert until the type
 * selects it (`AK_SANDBOX__TYPE=docker`), checked against its own plugin when installed. */
typedef struct aks_inactive_block {
	char *name;   /* the key: a provider plugin's name */
	int state;    /* aks_block_state */
	char *detail; /* VALID: the plugin's file; UNCHECKED: why not; INVALID: the located error */
} aks_inactive_block;

struct aks_profile {
	char *name;
	char *type;           /* as written: a plugin name or a path */
	int scope;            /* aks_scope */
	int environment;      /* aks_environment */
	int64_t idle_timeout; /* seconds */
	int identity_mode;    /* aks_identity_mode */
	int pool_size;        /* sandboxes kept created ahead (0: no pool) */
	double pool_max_idle; /* seconds a pooled sandbox waits before it is replaced */
	aks_policy policy;
	char **network_allow; /* owned arrays behind policy's pointers */
	char **fs_allow_read;
	char **fs_allow_write;
	char *params_json; /* params block as JSON ("{}" when absent) */
	char *attach_to;   /* from the provider block or params, or NULL */
	const aks_plugin *plugin;
	aks_config *block;      /* validated provider block */
	aks_provider *provider; /* the instance */
	unsigned unenforced;    /* AKS_DIM_* the provider cannot enforce */
	atomic_bool warned;     /* the strict: false warning was logged */
	aks_inactive_block *inactive;
	size_t inactive_count;
};

struct aks_settings {
	char *file; /* NULL for the embedded default */
	bool enabled;
	char **agents; /* NULL = every agent; else NULL-terminated */
	char *default_profile;
	int64_t tool_output_max_chars;
	aks_broker_settings broker;
	char *resolver_type; /* NULL = the built-in agent resolver */
	const aks_plugin *resolver_plugin;
	aks_config *resolver_block;
	aks_resolver *resolver;
	char *store_type;               /* NULL = the built-in file store by default */
	const aks_plugin *store_plugin; /* NULL = the built-in file store */
	aks_config *store_block;        /* validated against the store's schema */
	/* flavor queue, enabled: the transport and response store (descriptors of the loaded
	 * plugins, or of the built-in in_memory pair, whose plugins are NULL) and their options */
	const aks_plugin_descriptor *queue_desc;
	const aks_plugin_descriptor *response_desc;
	const aks_plugin *queue_plugin;
	aks_config *queue_block;
	const aks_plugin *response_plugin;
	aks_config *response_block;
	aks_profile **profiles;
	size_t profile_count;
	char **warnings; /* what loads but is likely a mistake, each located; NULL-terminated */
	size_t warning_count;
};

/* Builds the model from a parsed document (env overrides already applied). */
int aks__settings_from_tree(const aks_node *root, const char *file, aks_settings **out,
                            aks_error **err);

/* Records a warning (also logged): what the original accepts and we load, but is likely a
 * mistake. AKS_ENOMEM when it cannot be kept. */
int aks__settings_warn(aks_settings *s, const char *fmt, ...) AKS_PRINTF(2, 3);

/* The provider blocks of the original's schema: accepted in any profile, installed or not. */
#define AKS_BUILTIN_PROVIDER_BLOCKS                                                                \
	"local_subprocess", "docker", "e2b", "daytona", "bedrock_agentcore", "kubernetes", "ec2_ssm"

/* Whether `name` is one of the original's provider blocks (local_subprocess, docker, e2b,
 * daytona, bedrock_agentcore, kubernetes, ec2_ssm). */
bool aks__is_builtin_provider(const char *name);

/* Whether a profile key may be a provider block: a built-in provider's name (the original's
 * schema), or an installed plugin's. */
bool aks__is_provider_block_name(const char *key);

/* Records the profile mapping pn's provider blocks other than `own` (and `skip`, another
 * block the mapping holds for itself, or NULL) as inactive; with `load`, checks each against
 * its plugin's schema, and warns (aks__settings_warn) about one its plugin refuses. */
int aks__inactive_blocks_collect(aks_settings *s, aks_profile *p, const aks_node *pn,
                                 const char *path, const char *own, const char *skip, bool load,
                                 aks_error **err);
void aks__inactive_blocks_free(aks_profile *p);

/* The policy dimensions the profile's provider cannot enforce, in gate order. */
unsigned aks__policy_unenforced(const aks_policy *policy, const aks_capabilities *caps);
/* "['network_egress', 'filesystem']" for a mask. */
char *aks__dims_repr(unsigned mask);

/* Why a path cannot be an fs_allow_read or fs_allow_write entry (policy_paths.c): not
 * absolute, not plain, or in or holding a place of secrets; NULL when it can. The text may be
 * written to buf. */
const char *aks__policy_path_problem(const char *path, char *buf, size_t len);

#endif /* AKS_CORE_CONFIG_SETTINGS_H */
