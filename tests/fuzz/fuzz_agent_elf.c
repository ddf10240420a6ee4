/*
 * Fuzz target: the agent module's ELF reader (plugins/common/agent/agent_elf.c), which reads
 * whatever file an operator configured as aksandbox-agent before it is copied into sandboxes.
 * Checks: it never reads past the input (the sanitizers), a file it accepts has a known class
 * and byte order, a named machine is one the program runs on, and for little-endian files
 * (this host's order) its machine and its PT_INTERP answer agree with a second reading
 * through <elf.h>'s structures. Aborts when a property fails.
 */
#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aks_agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* The second reading: e_machine and whether any program header is PT_INTERP, or false when
 * a header lies past the end. Little-endian only (the structures are in this host's order). */
static bool struct_reading(const uint8_t *d, size_t size, bool is64, unsigned *machine,
                           bool *dynamic)
{
	uint64_t phoff, phentsize, phnum;
	if (is64) {
		Elf64_Ehdr h;
		if (size < sizeof(h))
			return false;
		memcpy(&h, d, sizeof(h));
		*machine = h.e_machine, phoff = h.e_phoff, phentsize = h.e_phentsize;
		phnum = h.e_phnum;
	} else {
		Elf32_Ehdr h;
		if (size < sizeof(h))
			return false;
		memcpy(&h, d, sizeof(h));
		*machine = h.e_machine, phoff = h.e_phoff, phentsize = h.e_phentsize;
		phnum = h.e_phnum;
	}
	*dynamic = false;
	for (uint64_t i = 0; i < phnum; i++) {
		uint64_t at = phoff + i * phentsize;
		uint32_t type;
		if (phoff > size || at > size || size - at < sizeof(type))
			return false;
		memcpy(&type, d + at, sizeof(type));
		*dynamic |= type == PT_INTERP;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly `size` bytes, so a read past the end is an overflow. */
	uint8_t *d = malloc(size ? size : 1);
	if (!d)
		return 0;
	memcpy(d, data, size);
	aks_elf_info e;
	const char *why = aks_elf_read(d, size, &e);
	if (!why) {
		CHECK(size >= EI_NIDENT && memcmp(d, ELFMAG, SELFMAG) == 0);
		CHECK(e.is64 == (d[EI_CLASS] == ELFCLASS64));
		CHECK(e.big_endian == (d[EI_DATA] == ELFDATA2MSB));
		CHECK(!e.uname == !e.oci);
		CHECK(!e.uname || aks_elf_runs_on(&e, e.uname));
		unsigned machine;
		bool dynamic;
		if (!e.big_endian && struct_reading(d, size, e.is64, &machine, &dynamic))
			CHECK(e.machine == machine && e.dynamic == dynamic);
	} else {
		CHECK(*why);
	}
	CHECK(!aks_elf_runs_on(&e, NULL));
	/* whatever `uname -m` a sandbox reports (the input's tail, from a small offset) */
	if (size > 1) {
		size_t at = d[0] % size;
		char *m = strndup((const char *)d + at, size - at);
		if (m)
			(void)aks_elf_runs_on(&e, m);
		free(m);
	}
	free(d);
	return 0;
}
