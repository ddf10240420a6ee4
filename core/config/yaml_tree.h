/*
 * core/config/yaml_tree.h - YAML documents as a small tree with source positions.
 *
 * libyaml types stop here: the rest of the core (and every plugin) sees
 * aks_node trees and typed values only.
 */
#ifndef AKS_CORE_CONFIG_YAML_TREE_H
#define AKS_CORE_CONFIG_YAML_TREE_H

#include "internal.h"

typedef enum aks_node_kind {
	AKS_NODE_SCALAR = 1,
	AKS_NODE_SEQUENCE = 2,
	AKS_NODE_MAPPING = 3
} aks_node_kind;

typedef struct aks_node aks_node;
struct aks_node {
	aks_node_kind kind;
	char *value;      /* scalars: the text */
	bool plain;       /* scalars: unquoted (so `null` and `~` mean null) */
	unsigned line;    /* 1-based; 0: set by the environment variable named by `file` */
	unsigned column;  /* 1-based; 0 when line is 0 */
	const char *file; /* the node's own owned_file or an ancestor's ("" for a root
	                   * made from the environment alone) */
	aks_node **items; /* sequence items; mappings: key, value, key, value... */
	size_t count;     /* number of items (mappings: twice the number of pairs) */
	char *owned_file; /* set on a document's root, and on each node an environment
	                   * variable created (so a subtree can be replaced on its own) */
};

/* The deepest nesting accepted; deeper documents are refused, not recursed. */
#define AKS_YAML_MAX_DEPTH 64

/* Parses one YAML document. An empty document is an empty mapping. `name` is
 * used in messages ("<name>:<line>:<column>: ..."). */
int aks__yaml_parse(const char *text, size_t len, const char *name, aks_node **out,
                    aks_error **err);
int aks__yaml_load_file(const char *path, aks_node **out, aks_error **err);

/* The same, building only the values of the root mapping's keys listed in `sections`
 * (NULL-terminated; NULL: all). The other top-level pairs are parsed (their YAML must be
 * well formed) but left out of the tree, so a file's sections that belong to other
 * programs cost no memory and obey none of the rules above (unique keys, no aliases,
 * depth). A root that is not a mapping is built whole. */
int aks__yaml_parse_sections(const char *text, size_t len, const char *name,
                             const char *const *sections, aks_node **out, aks_error **err);
int aks__yaml_load_file_sections(const char *path, const char *const *sections, aks_node **out,
                                 aks_error **err);
void aks__node_free(aks_node *node);

/* The value for `key` in a mapping, or NULL. */
const aks_node *aks__node_get(const aks_node *map, const char *key);
bool aks__node_is_null(const aks_node *node);
size_t aks__node_pairs(const aks_node *map);

/* The one scalar of `tree` (a key or a value, at any depth) that `message` quotes whole, as
 * '<value>'; NULL when none does, or more than one (empty scalars are never matched). Lets
 * an error a plugin reports about its config block point at the value it names. */
const aks_node *aks__node_quoted_in(const aks_node *tree, const char *message);

/* Enough for aks__node_where() with any sensible path; longer ones are cut. */
#define AKS_NODE_WHERE_SIZE 1024

/* Where a node came from, to start an error message with: "<file>:<line>:<column>",
 * "environment variable <NAME>" for a node set by a variable (line 0), or "the
 * environment" for a root made from variables alone. Writes into buf (size > 0)
 * and returns it. */
const char *aks__node_where(const aks_node *node, char *buf, size_t size);

#endif /* AKS_CORE_CONFIG_YAML_TREE_H */
