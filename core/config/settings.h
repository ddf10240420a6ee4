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

struct aks_profile {
	char *name;
	char *type;           /* as written: a plugin name or a path */
	int scope;            /* aks_scope */
	int environment;      /* aks_environment */
	int64_t idle_timeout; /* seconds */
	int identity_mode;    /* aks_identity_mode */
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
};

/* Builds the model from a parsed document (env overrides already applied). */
int aks__settings_from_tree(const aks_node *root, const char *file, aks_settings **out,
                            aks_error **err);

/* The policy dimensions the profile's provider cannot enforce, in gate order. */
unsigned aks__policy_unenforced(const aks_policy *policy, const aks_capabilities *caps);
/* "['network_egress', 'filesystem']" for a mask. */
char *aks__dims_repr(unsigned mask);

#endif /* AKS_CORE_CONFIG_SETTINGS_H */
