/*
 * sdk/check/probe.c - builds the "unknown key" probe: the user's config block
 * with one key added that no schema declares.
 *
 * The block is copied node by node into a new YAML document and emitted with
 * libyaml, so the user's keys keep their values and styles whatever the
 * layout of their file (bare block or a whole config.yaml); the probe then
 * differs from a block the plugin accepts only by the added key.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "probe.h"

#define MAX_DEPTH 64

static yaml_node_t *mapping_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

/* The same lookup as aks_config_load_block: a config.yaml (top-level
 * `sandbox`) holds the block at sandbox.<name> or in the first profile that
 * has one; any other document is the block itself. */
static int find_block(yaml_document_t *doc, const char *name, yaml_node_t **block, char *why,
                      size_t why_size)
{
	yaml_node_t *root = yaml_document_get_root_node(doc);
	yaml_node_t *sandbox = mapping_get(doc, root, "sandbox");

	*block = root;
	if (!sandbox)
		return 0;
	*block = mapping_get(doc, sandbox, name);
	yaml_node_t *profiles = mapping_get(doc, sandbox, "profiles");
	if (!*block && profiles && profiles->type == YAML_MAPPING_NODE) {
		for (yaml_node_pair_t *p = profiles->data.mapping.pairs.start;
		     !*block && p < profiles->data.mapping.pairs.top; p++)
			*block = mapping_get(doc, yaml_document_get_node(doc, p->value), name);
	}
	if (!*block) {
		snprintf(why, why_size, "no '%s' block under sandbox: or sandbox.profiles.*", name);
		return -1;
	}
	return 0;
}

/* Copies node `src` of `from` into `to`; returns the new node's index or 0. */
static int copy_node(yaml_document_t *from, yaml_node_t *src, yaml_document_t *to, int depth)
{
	int idx = 0;

	if (!src || depth > MAX_DEPTH)
		return 0;
	switch (src->type) {
	case YAML_SCALAR_NODE:
		return yaml_document_add_scalar(to, src->tag, src->data.scalar.value,
		                                (int)src->data.scalar.length,
		                                src->data.scalar.style);
	case YAML_SEQUENCE_NODE:
		idx = yaml_document_add_sequence(to, src->tag, src->data.sequence.style);
		if (!idx)
			return 0;
		for (yaml_node_item_t *i = src->data.sequence.items.start;
		     i < src->data.sequence.items.top; i++) {
			int item = copy_node(from, yaml_document_get_node(from, *i), to, depth + 1);
			if (!item || !yaml_document_append_sequence_item(to, idx, item))
				return 0;
		}
		return idx;
	case YAML_MAPPING_NODE:
		idx = yaml_document_add_mapping(to, src->tag, src->data.mapping.style);
		if (!idx)
			return 0;
		for (yaml_node_pair_t *p = src->data.mapping.pairs.start;
		     p < src->data.mapping.pairs.top; p++) {
			int k =
			    copy_node(from, yaml_document_get_node(from, p->key), to, depth + 1);
			int v =
			    copy_node(from, yaml_document_get_node(from, p->value), to, depth + 1);
			if (!k || !v || !yaml_document_append_mapping_pair(to, idx, k, v))
				return 0;
		}
		return idx;
	default:
		return 0;
	}
}

static int load_document(const char *path, yaml_document_t *doc, char *why, size_t why_size)
{
	yaml_parser_t parser;
	FILE *f = fopen(path, "rb");

	if (!f) {
		snprintf(why, why_size, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	int ok = yaml_parser_load(&parser, doc);
	if (!ok)
		snprintf(why, why_size, "%s:%zu:%zu: %s", path, parser.problem_mark.line + 1,
		         parser.problem_mark.column + 1,
		         parser.problem ? parser.problem : "invalid YAML");
	yaml_parser_delete(&parser);
	fclose(f);
	return ok ? 0 : -1;
}

/* Builds the probe document: the block's pairs plus `key: 1`. */
static int build_probe(yaml_document_t *src, yaml_node_t *block, const char *key,
                       yaml_document_t *probe, char *why, size_t why_size)
{
	if (!yaml_document_initialize(probe, NULL, NULL, NULL, 1, 1)) {
		snprintf(why, why_size, "out of memory");
		return -1;
	}
	int map = yaml_document_add_mapping(probe, NULL, YAML_BLOCK_MAPPING_STYLE);
	if (!map)
		goto oom;
	if (block && block->type == YAML_MAPPING_NODE) {
		for (yaml_node_pair_t *p = block->data.mapping.pairs.start;
		     p < block->data.mapping.pairs.top; p++) {
			int k = copy_node(src, yaml_document_get_node(src, p->key), probe, 0);
			int v = copy_node(src, yaml_document_get_node(src, p->value), probe, 0);
			if (!k || !v || !yaml_document_append_mapping_pair(probe, map, k, v))
				goto oom;
		}
	} else if (block && !(block->type == YAML_SCALAR_NODE && block->data.scalar.length == 0)) {
		yaml_document_delete(probe);
		snprintf(why, why_size, "the config block is not a mapping");
		return -1;
	}
	int k =
	    yaml_document_add_scalar(probe, NULL, (yaml_char_t *)key, -1, YAML_PLAIN_SCALAR_STYLE);
	int v =
	    yaml_document_add_scalar(probe, NULL, (yaml_char_t *)"1", 1, YAML_PLAIN_SCALAR_STYLE);
	if (!k || !v || !yaml_document_append_mapping_pair(probe, map, k, v))
		goto oom;
	return 0;
oom:
	yaml_document_delete(probe);
	snprintf(why, why_size, "cannot build the probe document (too deep or out of memory)");
	return -1;
}

/* Emits `doc` (consumed, as yaml_emitter_dump does) to a new temporary file. */
static int emit_to_temp(yaml_document_t *doc, char *path_out, size_t path_size, char *why,
                        size_t why_size)
{
	const char *tmpdir = getenv("TMPDIR");
	yaml_emitter_t emitter;

	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	int n = snprintf(path_out, path_size, "%s/aksandbox-plugin-check-XXXXXX.yaml", tmpdir);
	if (n < 0 || (size_t)n >= path_size) {
		yaml_document_delete(doc);
		snprintf(why, why_size, "TMPDIR is too long");
		return -1;
	}
	int fd = mkstemps(path_out, 5);
	if (fd < 0) {
		yaml_document_delete(doc);
		snprintf(why, why_size, "cannot create %s: %s", path_out, strerror(errno));
		return -1;
	}
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		close(fd);
		unlink(path_out);
		yaml_document_delete(doc);
		snprintf(why, why_size, "fdopen: %s", strerror(errno));
		return -1;
	}
	yaml_emitter_initialize(&emitter);
	yaml_emitter_set_output_file(&emitter, f);
	yaml_emitter_set_unicode(&emitter, 1);
	int ok = yaml_emitter_open(&emitter);
	if (!ok)
		yaml_document_delete(doc);
	/* yaml_emitter_dump() destroys the document, whether it fails or not. */
	ok = ok && yaml_emitter_dump(&emitter, doc) && yaml_emitter_close(&emitter) &&
	     yaml_emitter_flush(&emitter);
	if (!ok)
		snprintf(why, why_size, "cannot write the probe: %s",
		         emitter.problem ? emitter.problem : "emitter error");
	yaml_emitter_delete(&emitter);
	if (fclose(f) != 0 && ok) {
		snprintf(why, why_size, "cannot write %s: %s", path_out, strerror(errno));
		ok = 0;
	}
	if (!ok)
		unlink(path_out);
	return ok ? 0 : -1;
}

int aks_check_write_probe(const char *config_path, const char *name, const char *key,
                          char *path_out, size_t path_size, char *why, size_t why_size)
{
	yaml_document_t src, probe;
	yaml_node_t *block = NULL;
	bool have_src = false;
	int rc = -1;

	if (config_path) {
		if (load_document(config_path, &src, why, why_size) != 0)
			return -1;
		have_src = true;
		if (find_block(&src, name, &block, why, why_size) != 0)
			goto out;
	}
	if (build_probe(&src, block, key, &probe, why, why_size) != 0)
		goto out;
	rc = emit_to_temp(&probe, path_out, path_size, why, why_size);
out:
	if (have_src)
		yaml_document_delete(&src);
	return rc;
}
