/*
 * plugins/common/agent/agent_internal.h - what the agent module's files share: the program's
 * fields (agent_program.c) as the sessions (agent_session.c) read them.
 */
#ifndef AKS_COMMON_AGENT_INTERNAL_H
#define AKS_COMMON_AGENT_INTERNAL_H

#include "agent/sha256.h"
#include "aks_agent.h"

struct aks_agent_program {
	const aks_host_api *host;
	aks_agent_program_opts opts; /* its strings are the copies below */
	char *provider, *detail, *per_call, *note;
	char *path;          /* NULL: disabled */
	unsigned char *data; /* copied_in: the program's bytes */
	size_t size;
	uint8_t sha256[AKS_SHA256_LEN];
	char name[64];
	aks_elf_info elf;
	char *desc_base;     /* how operations run while the agent does, without the note */
	char *desc_agent;    /* the description while the agent runs: desc_base and the note */
	char *desc_fallback; /* atomic, set once: the description after a fallback */
	int unusable;        /* atomic: every sandbox runs per call */
};

/* Records a fallback in the description (the first one) and stops claiming `stateful`;
 * everywhere: the reason holds for every sandbox. True for the first fallback. */
bool aks__agent_fell_back(aks_agent_program *p, const char *reason, bool everywhere);
void aks__agent_clear_stateful(aks_agent_program *p);

#endif /* AKS_COMMON_AGENT_INTERNAL_H */
