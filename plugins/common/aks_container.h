/*
 * plugins/common/aks_container.h - code shared by the providers that run
 * sandboxes as containers (docker, kubernetes): one-file tars in memory and out of an
 * archive and the instance's description; with the headers of what they share with other
 * providers: the workspace path rule (aks_wspath.h) and the script that kills a run's
 * processes (aks_killscript.h) of libaks-util, and the HTTP helpers (aks_http.h) of
 * libaks-http. Transfers under a call's deadline are in aks_curl.h (they need libcurl's
 * types).
 *
 * A static convenience library (libaks-container): each plugin links its own
 * hidden copy, so no plugin depends on another at run time. It links nothing
 * itself; tar_mem.c needs libarchive, which both plugins link already. Functions return
 * aks_status codes and leave the wording of errors to the plugin, except where
 * the host API is passed in.
 */
#ifndef AKS_CONTAINER_H
#define AKS_CONTAINER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <aksandbox/plugin.h>

#include "aks_base64.h"
#include "aks_http.h"
#include "aks_killscript.h"
#include "aks_wspath.h"

/* ---- tars in memory (tar_mem.c; libarchive) ---- */

struct archive;

/*
 * A pax-restricted tar, in memory, of one regular file named `rel` (mode
 * 0644, mtime now) holding data[0..len); with `parents`, an entry (0755) for
 * each of its parent directories comes first. Returns 0 with *out malloc'd
 * (NUL-terminated past *out_len) or -1 (out of memory or libarchive failed).
 */
int aks_ctr_tar_file(const char *rel, const void *data, size_t len, bool parents, char **out,
                     size_t *out_len);
/* The same with the file's mode (an executable: 0755). */
int aks_ctr_tar_file_mode(const char *rel, const void *data, size_t len, bool parents,
                          unsigned mode, char **out, size_t *out_len);

typedef struct aks_ctr_tar_opts {
	bool dir;          /* rel is a directory, without data ("/": the directory the tar is
	                      unpacked into, whose owner and mode the Docker Engine then sets) */
	unsigned mode;     /* rel's permissions; 0: 0644 for a file, 0755 for a directory */
	unsigned uid, gid; /* the owner of every entry */
	/* Entries (0755) only for the parent directories of rel longer than this many bytes:
	 * the ones up to it exist, and an entry would change their owner and mode. 0: all of
	 * them; SIZE_MAX: none. */
	size_t existing;
} aks_ctr_tar_opts;

/* The same with an owner, and entries for the parents that do not exist yet; or a tar of one
 * directory. */
int aks_ctr_tar_file_opts(const char *rel, const void *data, size_t len, const aks_ctr_tar_opts *o,
                          char **out, size_t *out_len);

/* What aks_ctr_tar_read_file() returns when libarchive fails: never an
 * aks_status; archive_error_string() says why. */
#define AKS_CTR_BADTAR 1

/*
 * Reads the opened archive `a` up to its first regular file and writes that
 * file to `out` as the file `path` (result_add_file, then result_write of
 * each block, and of zeros for the holes of a sparse file). Returns AKS_OK;
 * AKS_ENOTFOUND (set in *err) when the archive holds no regular file; a host
 * error (set in *err); or AKS_CTR_BADTAR, with nothing set, when libarchive
 * fails or the blocks go back.
 */
int aks_ctr_tar_read_file(const aks_host_api *host, struct archive *a, const char *path,
                          aks_result *out, aks_error **err);

/* ---- the instance's description (describe.c) ---- */

/*
 * The "runs" line of a container provider (its instance_description, shown by `aksandbox
 * check`): the agent module's line, how operations run, then "; " and how the provider
 * confines its sandboxes. The module's line changes at most once (at its first fallback) and
 * the host may keep a pointer we returned, so each line is made once and kept until
 * aks_ctr_desc_free; `runs` is compared by pointer (the module keeps its lines until it is
 * freed). Any thread may ask.
 */
typedef struct aks_ctr_desc {
	bool ready;
	pthread_mutex_t mu;
	char *confinement;
	struct {
		const char *from; /* the module's line it was made from */
		char *text;
	} line[2];
} aks_ctr_desc;

/* Copies confinement; AKS_OK or AKS_ENOMEM. A zeroed aks_ctr_desc may be freed too. */
int aks_ctr_desc_init(aks_ctr_desc *d, const char *confinement);
/* The line for the module's current line `runs` (itself when out of memory). */
const char *aks_ctr_desc_get(aks_ctr_desc *d, const char *runs);
void aks_ctr_desc_free(aks_ctr_desc *d);

#endif
