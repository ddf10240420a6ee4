/*
 * core/config/yaml_tree.c - libyaml event stream to aks_node tree.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "config/yaml_tree.h"
#include "util/util.h"

typedef struct builder {
	yaml_parser_t parser;
	const char *name;
	const unsigned char *text; /* the input, for positions libyaml gives as offsets */
	size_t len;
	const char *const *sections; /* top-level keys to build (NULL: all) */
	aks_error **err;
} builder;

static aks_node *node_new(aks_node_kind kind, const yaml_mark_t *mark, const char *file)
{
	aks_node *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->kind = kind;
	n->line = (unsigned)mark->line + 1;
	n->column = (unsigned)mark->column + 1;
	n->file = file;
	return n;
}

void aks__node_free(aks_node *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->count; i++)
		aks__node_free(node->items[i]);
	free(node->items);
	free(node->value);
	free(node->owned_file);
	free(node);
}

/* Appends to a node being built. `cap` is the capacity of parent->items, kept by the
 * builder: growing by doubling keeps a node of n children O(n) to build. */
static int node_push(aks_node *parent, size_t *cap, aks_node *child)
{
	if (parent->count == *cap) {
		size_t ncap = *cap ? 2 * *cap : 8;
		aks_node **items = realloc(parent->items, ncap * sizeof(*items));
		if (!items)
			return AKS_ENOMEM;
		parent->items = items;
		*cap = ncap;
	}
	parent->items[parent->count++] = child;
	return AKS_OK;
}

/* Document order of two keys of one mapping (no two share a line and a column). */
static bool precedes(const aks_node *x, const aks_node *y)
{
	return x->line < y->line || (x->line == y->line && x->column < y->column);
}

/* By text, then in document order. */
static int compare_keys(const void *a, const void *b)
{
	const aks_node *x = *(const aks_node *const *)a, *y = *(const aks_node *const *)b;
	int c = strcmp(x->value, y->value);
	return c ? c : precedes(x, y) ? -1 : precedes(y, x);
}

/*
 * Refuses a mapping that sets a key twice, naming the earliest repetition in the document
 * (as a reader going top to bottom would meet it). The keys are sorted, so a mapping of n
 * keys costs O(n log n): comparing each key with every earlier one was quadratic, minutes
 * for a config near AKS_YAML_MAX_FILE.
 */
static int check_unique_keys(builder *b, const aks_node *map)
{
	size_t pairs = map->count / 2;
	if (pairs < 2)
		return AKS_OK;
	const aks_node **keys = malloc(pairs * sizeof(*keys));
	if (!keys)
		return aks__error_set(b->err, AKS_ENOMEM, "out of memory parsing %s", b->name);
	for (size_t i = 0; i < pairs; i++)
		keys[i] = map->items[2 * i];
	qsort(keys, pairs, sizeof(*keys), compare_keys);
	const aks_node *first = NULL, *again = NULL;
	for (size_t i = 1; i < pairs; i++) {
		/* keys[i - 1] is the first of its run only if it does not repeat the one before. */
		bool repeats = strcmp(keys[i - 1]->value, keys[i]->value) == 0;
		bool run_start = i == 1 || strcmp(keys[i - 2]->value, keys[i - 1]->value) != 0;
		if (!repeats || !run_start)
			continue;
		if (!again || precedes(keys[i], again)) {
			first = keys[i - 1];
			again = keys[i];
		}
	}
	int rc = AKS_OK;
	if (again)
		rc = aks__error_set(b->err, AKS_ECONFIG,
		                    "%s:%u:%u: duplicate key '%s' (first set at line %u)", b->name,
		                    again->line, again->column, again->value, first->line);
	free(keys);
	return rc;
}

/*
 * The line and column (1-based; columns count characters, as libyaml's marks do) of byte
 * `offset` of UTF-8 text: the lines end as YAML's do, at LF, CR LF, CR, NEL, LS and PS.
 */
static void text_position(const unsigned char *text, size_t len, size_t offset, size_t *line,
                          size_t *column)
{
	*line = 1;
	*column = 1;
	for (size_t i = 0; i < offset && i < len;) {
		size_t brk = 0;
		if (text[i] == '\r')
			brk = i + 1 < len && text[i + 1] == '\n' ? 2 : 1;
		else if (text[i] == '\n')
			brk = 1;
		else if (text[i] == 0xC2 && i + 1 < len && text[i + 1] == 0x85)
			brk = 2;
		else if (text[i] == 0xE2 && i + 2 < len && text[i + 1] == 0x80 &&
		         (text[i + 2] == 0xA8 || text[i + 2] == 0xA9))
			brk = 3;
		if (brk) {
			++*line;
			*column = 1;
			i += brk;
			continue;
		}
		if ((text[i] & 0xC0) != 0x80) /* not a continuation byte: a new character */
			++*column;
		i++;
	}
	/* An offset inside a character: its lead byte, before it, was counted as the next. */
	if (offset < len && (text[offset] & 0xC0) == 0x80 && *column > 1)
		--*column;
}

static int parse_error(builder *b)
{
	const yaml_parser_t *p = &b->parser;
	if (p->error == YAML_MEMORY_ERROR)
		return aks__error_set(b->err, AKS_ENOMEM, "out of memory parsing %s", b->name);
	if (p->error == YAML_READER_ERROR && p->encoding == YAML_UTF8_ENCODING) {
		/* A character the reader refuses (a control character, say) comes with its byte
		 * offset only: problem_mark is not set. */
		size_t line, column;
		text_position(b->text, b->len, p->problem_offset, &line, &column);
		return aks__error_set(b->err, AKS_ECONFIG, "%s:%zu:%zu: invalid YAML: %s (U+%04X)",
		                      b->name, line, column, p->problem ? p->problem : "bad input",
		                      (unsigned)p->problem_value);
	}
	return aks__error_set(b->err, AKS_ECONFIG, "%s:%zu:%zu: invalid YAML: %s%s%s", b->name,
	                      (size_t)p->problem_mark.line + 1, (size_t)p->problem_mark.column + 1,
	                      p->problem ? p->problem : "syntax error", p->context ? " " : "",
	                      p->context ? p->context : "");
}

/* The length of the well-formed UTF-8 sequence at s[0] (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4;
	else
		return 0;
	if (c == 0xE0)
		lo = 0xA0;
	else if (c == 0xED)
		hi = 0x9F;
	else if (c == 0xF0)
		lo = 0x90;
	else if (c == 0xF4)
		hi = 0x8F;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

/*
 * Refuses text that is not UTF-8, naming the first byte that is not. libyaml finds these
 * too, but says where only as an offset, and points past the start of a broken sequence.
 * Text that starts with a UTF-16 byte order mark is left to libyaml, which decodes it.
 */
static int check_utf8(const builder *b)
{
	const unsigned char *s = b->text;
	if (b->len >= 2 && ((s[0] == 0xFF && s[1] == 0xFE) || (s[0] == 0xFE && s[1] == 0xFF)))
		return AKS_OK;
	for (size_t i = 0; i < b->len;) {
		size_t n = utf8_sequence(s + i, b->len - i);
		if (n) {
			i += n;
			continue;
		}
		size_t line, column;
		text_position(s, b->len, i, &line, &column);
		return aks__error_set(b->err, AKS_ECONFIG,
		                      "%s:%zu:%zu: invalid UTF-8 (byte 0x%02X): the text must be "
		                      "UTF-8",
		                      b->name, line, column, s[i]);
	}
	return AKS_OK;
}

/* Reads the node that starts with `ev` (already taken from the parser). */
static int build_node(builder *b, yaml_event_t *ev, unsigned depth, const char *file,
                      aks_node **out);

/* Whether the root mapping's value for `key` is built or skipped. */
static bool section_wanted(const builder *b, const char *key)
{
	if (!b->sections)
		return true;
	for (size_t i = 0; b->sections[i]; i++)
		if (strcmp(b->sections[i], key) == 0)
			return true;
	return false;
}

/* Consumes the events of the next node without building it: libyaml still checks its syntax,
 * but no node is allocated and none of this file's own rules (unique keys, no aliases, the
 * depth limit) applies to a section the caller never reads. Iterative, so any depth is fine. */
static int skip_node(builder *b)
{
	size_t open = 0;
	do {
		yaml_event_t ev;
		if (!yaml_parser_parse(&b->parser, &ev))
			return parse_error(b);
		if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
			open++;
		else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
			open--;
		yaml_event_delete(&ev);
	} while (open > 0);
	return AKS_OK;
}

static int build_children(builder *b, aks_node *parent, yaml_event_type_t end, unsigned depth,
                          const char *file)
{
	size_t cap = 0;
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&b->parser, &ev))
			return parse_error(b);
		if (ev.type == end) {
			yaml_event_delete(&ev);
			return parent->kind == AKS_NODE_MAPPING ? check_unique_keys(b, parent)
			                                        : AKS_OK;
		}
		aks_node *child = NULL;
		int rc = build_node(b, &ev, depth + 1, file, &child);
		yaml_event_delete(&ev);
		if (rc < 0)
			return rc;
		/* A key must be a scalar (uniqueness is checked when the mapping ends). */
		if (parent->kind == AKS_NODE_MAPPING && parent->count % 2 == 0 &&
		    child->kind != AKS_NODE_SCALAR) {
			rc = aks__error_set(b->err, AKS_ECONFIG,
			                    "%s:%u:%u: mapping keys must be scalars", b->name,
			                    child->line, child->column);
			aks__node_free(child);
			return rc;
		}
		if (depth == 0 && parent->kind == AKS_NODE_MAPPING && parent->count % 2 == 0 &&
		    !section_wanted(b, child->value)) {
			aks__node_free(child);
			if ((rc = skip_node(b)) < 0)
				return rc;
			continue;
		}
		if (node_push(parent, &cap, child) < 0) {
			aks__node_free(child);
			return aks__error_set(b->err, AKS_ENOMEM, "out of memory parsing %s",
			                      b->name);
		}
	}
}

static int build_node(builder *b, yaml_event_t *ev, unsigned depth, const char *file,
                      aks_node **out)
{
	if (depth > AKS_YAML_MAX_DEPTH)
		return aks__error_set(b->err, AKS_ECONFIG,
		                      "%s:%zu:%zu: nesting deeper than %d levels", b->name,
		                      (size_t)ev->start_mark.line + 1,
		                      (size_t)ev->start_mark.column + 1, AKS_YAML_MAX_DEPTH);
	aks_node *n = NULL;
	int rc = AKS_OK;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		/* A "\0" escape in a quoted scalar: the value would end there, silently. */
		if (memchr(ev->data.scalar.value, '\0', ev->data.scalar.length))
			return aks__error_set(b->err, AKS_ECONFIG,
			                      "%s:%zu:%zu: a NUL character (\\0) in a value",
			                      b->name, (size_t)ev->start_mark.line + 1,
			                      (size_t)ev->start_mark.column + 1);
		n = node_new(AKS_NODE_SCALAR, &ev->start_mark, file);
		if (!n || !(n->value = strndup((const char *)ev->data.scalar.value,
		                               ev->data.scalar.length))) {
			rc = AKS_ENOMEM;
			break;
		}
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		break;
	case YAML_SEQUENCE_START_EVENT:
		n = node_new(AKS_NODE_SEQUENCE, &ev->start_mark, file);
		if (!n) {
			rc = AKS_ENOMEM;
			break;
		}
		rc = build_children(b, n, YAML_SEQUENCE_END_EVENT, depth, file);
		break;
	case YAML_MAPPING_START_EVENT:
		n = node_new(AKS_NODE_MAPPING, &ev->start_mark, file);
		if (!n) {
			rc = AKS_ENOMEM;
			break;
		}
		rc = build_children(b, n, YAML_MAPPING_END_EVENT, depth, file);
		break;
	case YAML_ALIAS_EVENT:
		/* Aliases make documents that expand exponentially; configs do not need them. */
		rc = aks__error_set(
		    b->err, AKS_ECONFIG, "%s:%zu:%zu: YAML aliases (*name) are not supported",
		    b->name, (size_t)ev->start_mark.line + 1, (size_t)ev->start_mark.column + 1);
		break;
	default:
		rc = aks__error_set(b->err, AKS_ECONFIG, "%s:%zu:%zu: unexpected YAML event",
		                    b->name, (size_t)ev->start_mark.line + 1,
		                    (size_t)ev->start_mark.column + 1);
		break;
	}
	if (rc == AKS_ENOMEM)
		aks__error_set(b->err, AKS_ENOMEM, "out of memory parsing %s", b->name);
	if (rc < 0) {
		aks__node_free(n);
		return rc;
	}
	*out = n;
	return AKS_OK;
}

int aks__yaml_parse(const char *text, size_t len, const char *name, aks_node **out, aks_error **err)
{
	return aks__yaml_parse_sections(text, len, name, NULL, out, err);
}

int aks__yaml_parse_sections(const char *text, size_t len, const char *name,
                             const char *const *sections, aks_node **out, aks_error **err)
{
	builder b = {.name = name,
	             .text = (const unsigned char *)text,
	             .len = len,
	             .sections = sections,
	             .err = err};
	int rc = check_utf8(&b);
	if (rc < 0)
		return rc;
	aks_node *root = NULL;
	char *file = strdup(name);
	if (!file || !yaml_parser_initialize(&b.parser)) {
		free(file);
		return aks__error_set(err, AKS_ENOMEM, "out of memory parsing %s", name);
	}
	yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
	bool in_document = false;
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&b.parser, &ev)) {
			rc = parse_error(&b);
			break;
		}
		yaml_event_type_t type = ev.type;
		if (type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (type == YAML_DOCUMENT_START_EVENT) {
			if (root) {
				rc = aks__error_set(err, AKS_ECONFIG,
				                    "%s:%zu:%zu: only one YAML document is allowed",
				                    name, (size_t)ev.start_mark.line + 1,
				                    (size_t)ev.start_mark.column + 1);
				yaml_event_delete(&ev);
				break;
			}
			in_document = true;
		} else if (in_document && type != YAML_DOCUMENT_END_EVENT && !root) {
			rc = build_node(&b, &ev, 0, file, &root);
			if (rc < 0) {
				yaml_event_delete(&ev);
				break;
			}
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&b.parser);
	if (rc < 0) {
		aks__node_free(root);
		free(file);
		return rc;
	}
	if (!root) {
		yaml_mark_t start = {0, 0, 0};
		root = node_new(AKS_NODE_MAPPING, &start, file);
		if (!root) {
			free(file);
			return aks__error_set(err, AKS_ENOMEM, "out of memory parsing %s", name);
		}
	}
	root->owned_file = file;
	*out = root;
	return AKS_OK;
}

/* Config files are small; refuse anything absurd rather than read it all. */
#define AKS_YAML_MAX_FILE (16u << 20)

int aks__yaml_load_file(const char *path, aks_node **out, aks_error **err)
{
	return aks__yaml_load_file_sections(path, NULL, out, err);
}

/* "a FIFO" for messages about a file that is not a regular one. */
static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

static int not_regular(const char *path, mode_t mode, aks_error **err)
{
	return aks__error_set(err, AKS_ECONFIG, "'%s' is %s: a config file must be a regular file",
	                      path, file_kind(mode));
}

/*
 * Opens a config file for reading, refusing anything but a regular file: a FIFO would block
 * the open (and the read) until a writer came, a device could be read for ever. stat() first,
 * so nothing else is ever opened; O_NONBLOCK and fstat() after, for a file swapped for a FIFO
 * in between. Returns the descriptor and its size, or a negative status.
 */
static int open_regular(const char *path, off_t *size, aks_error **err)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return aks__error_set(err, errno == ENOENT ? AKS_ENOTFOUND : AKS_ECONFIG,
		                      "cannot open '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return not_regular(path, st.st_mode, err);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return aks__error_set(err, errno == ENOENT ? AKS_ENOTFOUND : AKS_ECONFIG,
		                      "cannot open '%s': %s", path, strerror(errno));
	int rc = AKS_OK;
	if (fstat(fd, &st) < 0)
		rc =
		    aks__error_set(err, AKS_ECONFIG, "cannot read '%s': %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = not_regular(path, st.st_mode, err);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*size = st.st_size;
	return fd;
}

int aks__yaml_load_file_sections(const char *path, const char *const *sections, aks_node **out,
                                 aks_error **err)
{
	off_t size = 0;
	int fd = open_regular(path, &size, err);
	if (fd < 0)
		return fd;
	int rc = AKS_OK;
	if (size > (off_t)AKS_YAML_MAX_FILE)
		rc = aks__error_set(err, AKS_ECONFIG, "'%s' is larger than %u bytes", path,
		                    AKS_YAML_MAX_FILE);
	/* The size is a hint (the file may grow while read); the cap is enforced on what comes. */
	aks_buf text = AKS_BUF_INIT;
	char chunk[65536];
	while (rc == AKS_OK) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = aks__error_set(err, AKS_ECONFIG, "cannot read '%s': %s", path,
			                    strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if (text.len + (size_t)n > AKS_YAML_MAX_FILE)
			rc = aks__error_set(err, AKS_ECONFIG, "'%s' is larger than %u bytes", path,
			                    AKS_YAML_MAX_FILE);
		else if (aks__buf_append(&text, chunk, (size_t)n) < 0)
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory reading '%s'", path);
	}
	close(fd);
	if (rc == AKS_OK)
		rc = aks__yaml_parse_sections(text.data ? text.data : "", text.len, path, sections,
		                              out, err);
	aks__buf_free(&text);
	return rc;
}

const aks_node *aks__node_get(const aks_node *map, const char *key)
{
	if (!map || map->kind != AKS_NODE_MAPPING)
		return NULL;
	for (size_t i = 0; i + 1 < map->count; i += 2)
		if (strcmp(map->items[i]->value, key) == 0)
			return map->items[i + 1];
	return NULL;
}

bool aks__node_is_null(const aks_node *node)
{
	if (!node)
		return true;
	if (node->kind != AKS_NODE_SCALAR || !node->plain)
		return false;
	const char *v = node->value;
	return !*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
	       strcmp(v, "NULL") == 0;
}

size_t aks__node_pairs(const aks_node *map)
{
	return map && map->kind == AKS_NODE_MAPPING ? map->count / 2 : 0;
}

/* Whether `message` holds "'<value>'". */
static bool quotes(const char *message, const char *value)
{
	size_t n = strlen(value);
	for (const char *p = strchr(message, '\''); p; p = strchr(p + 1, '\''))
		if (strncmp(p + 1, value, n) == 0 && p[1 + n] == '\'')
			return true;
	return false;
}

/* Counts the scalars under `n` that `message` quotes, keeping the first in *found. */
static size_t count_quoted(const aks_node *n, const char *message, const aks_node **found)
{
	if (!n)
		return 0;
	if (n->kind == AKS_NODE_SCALAR) {
		if (!n->value || !*n->value || !quotes(message, n->value))
			return 0;
		if (!*found)
			*found = n;
		return 1;
	}
	size_t total = 0;
	for (size_t i = 0; i < n->count; i++)
		total += count_quoted(n->items[i], message, found);
	return total;
}

const aks_node *aks__node_quoted_in(const aks_node *tree, const char *message)
{
	const aks_node *found = NULL;
	if (!message || count_quoted(tree, message, &found) != 1)
		return NULL;
	return found;
}

const char *aks__node_where(const aks_node *node, char *buf, size_t size)
{
	if (!buf || size == 0)
		return "";
	if (!node)
		snprintf(buf, size, "<unknown>");
	else if (node->line == 0 && node->file && *node->file)
		snprintf(buf, size, "environment variable %s", node->file);
	else if (node->line == 0)
		snprintf(buf, size, "the environment");
	else
		snprintf(buf, size, "%s:%u:%u", node->file ? node->file : "<unknown>", node->line,
		         node->column);
	return buf;
}
