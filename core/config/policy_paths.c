/*
 * core/config/policy_paths.c - the paths a policy's fs_allow_read and fs_allow_write may
 * name. A provider that confines programs on this host (bubblewrap) shows each entry to its
 * sandboxes at the same path, so an entry is a piece of this host handed to untrusted code:
 * it must be absolute and plain, and must neither lie in nor hold a place of secrets (keys,
 * password hashes, the Docker socket, aksandbox's own state and configuration). Checked when
 * the config is loaded, with the entry's file, line and column, for every provider alike.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/settings.h"
#include "store/store.h"

/* Places of secrets; "*" stands for one path component (any user's home). */
static const char *const secret_places[] = {"/root",
                                            "/etc/shadow",
                                            "/etc/gshadow",
                                            "/etc/shadow-",
                                            "/etc/gshadow-",
                                            "/etc/sudoers",
                                            "/etc/sudoers.d",
                                            "/etc/ssh",
                                            "/etc/ssl/private",
                                            "/etc/aksandbox",
                                            "/etc/krb5.keytab",
                                            "/var/lib/aksandbox",
                                            "/run/docker.sock",
                                            "/var/run/docker.sock",
                                            "/run/containerd",
                                            "/proc",
                                            "/sys",
                                            "/boot",
                                            "/home/*/.ssh",
                                            "/home/*/.gnupg",
                                            "/home/*/.aws",
                                            "/home/*/.kube",
                                            "/home/*/.docker",
                                            "/home/*/.config/aksandbox",
                                            NULL};

/* How many leading components of a and b match (b may hold "*" components); *whole_b when
 * all of b's matched. */
static size_t common_components(const char *a, const char *b, bool *whole_a, bool *whole_b)
{
	size_t n = 0;
	for (;;) {
		while (*a == '/')
			a++;
		while (*b == '/')
			b++;
		*whole_a = !*a;
		*whole_b = !*b;
		if (!*a || !*b)
			return n;
		size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
		bool star = lb == 1 && b[0] == '*';
		if (!star && (la != lb || strncmp(a, b, la) != 0)) {
			*whole_a = *whole_b = false;
			return n;
		}
		a += la;
		b += lb;
		n++;
	}
}

/* Whether path lies in place (*in), or holds it (*holds); both when they are the same. */
static bool touches(const char *path, const char *place, bool *in)
{
	bool holds;
	common_components(path, place, &holds, in);
	return holds || *in;
}

const char *aks__policy_path_problem(const char *path, char *buf, size_t len)
{
	if (path[0] != '/')
		return "is not an absolute path";
	for (const char *p = path; *p; p++)
		if ((p[0] == '/' && p[1] == '.' && (p[2] == '/' || !p[2])) ||
		    (p[0] == '/' && p[1] == '.' && p[2] == '.' && (p[3] == '/' || !p[3])))
			return "has a '.' or '..' component";
	if (!path[strspn(path, "/")])
		return "is the whole filesystem";
	bool in;
	for (const char *const *s = secret_places; *s; s++)
		if (touches(path, *s, &in)) {
			snprintf(buf, len, "%s %s, a place of secrets never shown to a sandbox",
			         in ? "is in" : "holds", *s);
			return buf;
		}
	char *state = NULL;
	if (aks__store_default_dir_as(geteuid() == 0, &state, NULL) == AKS_OK && state &&
	    touches(path, state, &in)) {
		snprintf(buf, len, "touches aksandbox's state directory %s", state);
		free(state);
		return buf;
	}
	free(state);
	return NULL;
}
