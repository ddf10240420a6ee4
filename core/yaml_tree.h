/*
 * core/yaml_tree.h - YAML documents as a small tree with source positions.
 *
 * libyaml types stop here: the rest of the core (and every plugin) sees
 * aks_node trees and typed values only.
 */
#ifndef AKS_CORE_YAML_TREE_H
#define AKS_CORE_YAML_TREE_H

#include "internal.h"

typedef enum aks_node_kind {
	AKS_NODE_SCALAR = 1,
	AKS_NODE_SEQUENCE = 2,
	AKS_NODE_MAPPING = 3
} aks_node_kind;

typedef struct aks_node aks_node;
struct aks_node {
	aks_node_kind kind;
	char *value;         /* scalars: the text */
	bool plain;          /* scalars: unquoted (so `null` and `~` mean null) */
	unsigned line;       /* 1-based */
	unsigned column;     /* 1-based */
	const char *file;    /* borrowed from the document */
	aks_node **items;    /* sequence items; mappings: key, value, key, value... */
	size_t count;        /* number of items (mappings: twice the number of pairs) */
	char *owned_file;    /* the root owns the file name */
};

/* The deepest nesting accepted; deeper documents are refused, not recursed. */
#define AKS_YAML_MAX_DEPTH 64

/* Parses one YAML document. An empty document is an empty mapping. `name` is
 * used in messages ("<name>:<line>:<column>: ..."). */
int aks__yaml_parse(const char *text, size_t len, const char *name, aks_node **out,
                    aks_error **err);
int aks__yaml_load_file(const char *path, aks_node **out, aks_error **err);
void aks__node_free(aks_node *node);

/* The value for `key` in a mapping, or NULL. */
const aks_node *aks__node_get(const aks_node *map, const char *key);
bool aks__node_is_null(const aks_node *node);
size_t aks__node_pairs(const aks_node *map);

#endif /* AKS_CORE_YAML_TREE_H */
