/*
 * plugins/common/agent/agent_program.c - the aksandbox-agent program on this host, once per
 * provider instance: which file (the `agent` key), whether sandboxes can run it (a static
 * ELF of a known architecture, for providers that copy it in), its bytes and the name its
 * copies carry, and the instance's description of how operations run.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sha256.h"
#include "agent_internal.h"
#include "aks_file.h"

/* An agent is about 1 MiB; anything much larger is not one. */
#define PROGRAM_MAX_SIZE (64u << 20)

static int oom(const aks_host_api *host, aks_error **err)
{
	return host->error_set(err, AKS_ENOMEM, "out of memory");
}

/* The bytes, the hash and the name of a program that is copied into sandboxes. */
static int load_bytes(aks_agent_program *p, aks_error **err)
{
	const aks_host_api *host = p->host;
	p->data = (unsigned char *)aks__file_read(p->path, PROGRAM_MAX_SIZE, &p->size);
	if (!p->data)
		return host->error_set(err, AKS_ECONFIG, "%s: agent: cannot read '%s': %s",
		                       p->provider, p->path, strerror(errno));
	const char *why = aks_elf_read(p->data, p->size, &p->elf);
	if (!why && !p->elf.uname)
		why = "it is built for an architecture aksandbox does not know";
	if (why)
		return host->error_set(err, AKS_ECONFIG,
		                       "%s: agent: '%s' cannot be copied into sandboxes: %s (use "
		                       "the static aksandbox-agent, or false to disable it)",
		                       p->provider, p->path, why);
	aks_sha256 h;
	aks__sha256_init(&h);
	aks__sha256_update(&h, p->data, p->size);
	aks__sha256_final(&h, p->sha256);
	int n = snprintf(p->name, sizeof(p->name), "aksandbox-agent-");
	for (int i = 0; i < 8; i++)
		n += snprintf(p->name + n, sizeof(p->name) - (size_t)n, "%02x", p->sha256[i]);
	return AKS_OK;
}

static int describe(aks_agent_program *p, bool installed)
{
	const aks_agent_program_opts *o = &p->opts;
	char arch[48] = "";
	if (p->elf.uname)
		snprintf(arch, sizeof(arch), " (%s)", p->elf.uname);
	int n = !p->path
	            ? asprintf(&p->desc_base, "%s (agent disabled%s)", o->per_call,
	                       installed ? "" : " or not installed")
	            : asprintf(&p->desc_base,
	                       "through aksandbox-agent %s%s, %s%s%s%s; %s "
	                       "where it cannot be placed or started",
	                       p->path, arch,
	                       o->resident ? "resident in each sandbox" : "one per sandbox handle",
	                       o->detail ? " " : "", o->detail ? o->detail : "",
	                       o->python_session ? ", Python in its persistent session"
	                                         : "; python is not python3: Python runs per call",
	                       o->per_call);
	if (n < 0) {
		p->desc_base = NULL;
		return n;
	}
	return asprintf(&p->desc_agent, "%s%s", p->desc_base, p->note);
}

/* Where the `agent` key points: NULL for none; AKS_ECONFIG for a bad path. */
static int resolve(const aks_host_api *host, const aks_agent_program_opts *o, const char **path,
                   bool *installed, aks_error **err)
{
	*installed = o->installed && access(o->installed, X_OK) == 0;
	*path = o->configured;
	if (!*path)
		*path = *installed ? o->installed : NULL;
	else if (strcmp(*path, "false") == 0)
		*path = NULL;
	else if ((*path)[0] != '/' || access(*path, X_OK) != 0)
		return host->error_set(err, AKS_ECONFIG,
		                       "%s: agent: '%s' is not an executable absolute path (false "
		                       "disables the agent)",
		                       o->provider, *path);
	return AKS_OK;
}

int aks_agent_program_open(const aks_host_api *host, const aks_agent_program_opts *o,
                           aks_agent_program **out, aks_error **err)
{
	*out = NULL;
	const char *path;
	bool installed;
	int rc = resolve(host, o, &path, &installed, err);
	if (rc != AKS_OK)
		return rc;
	aks_agent_program *p = calloc(1, sizeof(*p));
	if (!p)
		return oom(host, err);
	p->host = host;
	p->opts = *o;
	if (!(p->provider = strdup(o->provider)) || (path && !(p->path = strdup(path))) ||
	    (o->detail && !(p->detail = strdup(o->detail))) ||
	    !(p->per_call = strdup(o->per_call)) || !(p->note = strdup(o->note ? o->note : ""))) {
		aks_agent_program_free(p);
		return oom(host, err);
	}
	p->opts.provider = p->provider;
	p->opts.detail = p->detail;
	p->opts.per_call = p->per_call;
	p->opts.note = p->note;
	p->opts.configured = p->opts.installed = NULL;
	if (p->path && o->copied_in && (rc = load_bytes(p, err)) != AKS_OK) {
		aks_agent_program_free(p);
		return rc;
	}
	if (describe(p, installed) < 0) {
		p->desc_agent = NULL;
		aks_agent_program_free(p);
		return oom(host, err);
	}
	if (!p->path || !o->python_session)
		aks__agent_clear_stateful(p);
	if (p->path && o->copied_in && p->elf.dynamic) {
		char *reason = NULL;
		if (asprintf(&reason,
		             "aksandbox-agent %s cannot run in a sandbox: it is dynamically linked "
		             "(it needs this host's libraries; use the static aksandbox-agent)",
		             p->path) < 0) {
			aks_agent_program_free(p);
			return oom(host, err);
		}
		aks_agent_program_unusable(p, reason);
		free(reason);
	}
	*out = p;
	return AKS_OK;
}

void aks_agent_program_free(aks_agent_program *p)
{
	if (!p)
		return;
	free(p->provider);
	free(p->path);
	free(p->detail);
	free(p->per_call);
	free(p->note);
	free(p->desc_base);
	free(p->data);
	free(p->desc_agent);
	free(p->desc_fallback);
	free(p);
}

void aks__agent_clear_stateful(aks_agent_program *p)
{
	/* The host holds a pointer to the instance's capabilities: the flag changes in place. */
	if (p->opts.stateful)
		__atomic_store_n(p->opts.stateful, false, __ATOMIC_RELEASE);
}

bool aks__agent_fell_back(aks_agent_program *p, const char *reason, bool everywhere)
{
	char *d = NULL;
	int n = everywhere ? asprintf(&d, "%s: %s%s", p->per_call, reason, p->note)
	                   : asprintf(&d, "%s; %s in a sandbox where it could not run: %s%s",
	                              p->desc_base, p->per_call, reason, p->note);
	char *none = NULL;
	/* The first reason stays: readers hold the pointer (aks_agent_program_description). */
	bool first = n >= 0 && __atomic_compare_exchange_n(&p->desc_fallback, &none, d, false,
	                                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	if (!first && n >= 0)
		free(d);
	aks__agent_clear_stateful(p);
	return first;
}

void aks_agent_program_unusable(aks_agent_program *p, const char *reason)
{
	bool first = aks__agent_fell_back(p, reason, true);
	__atomic_store_n(&p->unusable, 1, __ATOMIC_RELEASE);
	p->host->log(first ? AKS_LOG_WARNING : AKS_LOG_INFO, p->provider, "%s; running %s", reason,
	             p->per_call);
}

bool aks_agent_program_enabled(const aks_agent_program *p)
{
	return p && p->path;
}

bool aks_agent_program_usable(const aks_agent_program *p)
{
	return aks_agent_program_enabled(p) && !__atomic_load_n(&p->unusable, __ATOMIC_ACQUIRE);
}

const char *aks_agent_program_path(const aks_agent_program *p)
{
	return p->path;
}

const void *aks_agent_program_data(const aks_agent_program *p, size_t *size)
{
	*size = p->size;
	return p->data;
}

const char *aks_agent_program_name(const aks_agent_program *p)
{
	return p->name;
}

const uint8_t *aks_agent_program_sha256(const aks_agent_program *p)
{
	return p->sha256;
}

const aks_elf_info *aks_agent_program_elf(const aks_agent_program *p)
{
	return &p->elf;
}

const char *aks_agent_program_description(const aks_agent_program *p)
{
	const char *fallback = __atomic_load_n(&p->desc_fallback, __ATOMIC_ACQUIRE);
	return fallback ? fallback : p->desc_agent;
}
