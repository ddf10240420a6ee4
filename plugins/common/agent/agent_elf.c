/*
 * plugins/common/agent/agent_elf.c - what an ELF header says about a program: its machine
 * (to compare with an image's or a node's) and whether it needs an interpreter (a dynamically
 * linked program runs only where its loader and libraries are). Reads either byte order and
 * either class from a buffer, bounds-checked: the input is any file an operator configured.
 */
#include "config.h"

#include <elf.h>
#include <stddef.h>
#include <string.h>

#include "aks_agent.h"

typedef struct elf_reader {
	const unsigned char *d;
	size_t len;
	bool big;
} elf_reader;

/* The n-byte unsigned integer at off in the file's byte order; false past the end. */
static bool get_uint(const elf_reader *r, size_t off, unsigned n, uint64_t *out)
{
	if (off > r->len || n > r->len - off)
		return false;
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned shift = 8 * (r->big ? n - 1 - i : i);
		v |= (uint64_t)r->d[off + i] << shift;
	}
	*out = v;
	return true;
}

typedef struct arch_name {
	unsigned machine;
	int bits; /* 0: either class */
	int big;  /* -1: either byte order */
	const char *uname, *oci;
} arch_name;

static const arch_name arch_names[] = {
    {EM_X86_64, 64, 0, "x86_64", "amd64"},   {EM_386, 32, 0, "i686", "386"},
    {EM_AARCH64, 64, 0, "aarch64", "arm64"}, {EM_ARM, 32, 0, "arm", "arm"},
    {EM_PPC64, 64, 0, "ppc64le", "ppc64le"}, {EM_PPC64, 64, 1, "ppc64", "ppc64"},
    {EM_S390, 64, 1, "s390x", "s390x"},      {EM_RISCV, 64, 0, "riscv64", "riscv64"},
    {EM_RISCV, 32, 0, "riscv32", "riscv32"},
};

static void name_arch(aks_elf_info *e)
{
	for (size_t i = 0; i < sizeof(arch_names) / sizeof(arch_names[0]); i++) {
		const arch_name *a = &arch_names[i];
		if (a->machine == e->machine && (a->bits == 0 || a->bits == (e->is64 ? 64 : 32)) &&
		    (a->big < 0 || a->big == (int)e->big_endian)) {
			e->uname = a->uname;
			e->oci = a->oci;
			return;
		}
	}
}

/* Whether a program header says PT_INTERP; NULL or why the headers cannot be read. */
static const char *find_interp(const elf_reader *r, bool is64, bool *dynamic)
{
	uint64_t phoff, phentsize, phnum;
	size_t at_phoff = is64 ? offsetof(Elf64_Ehdr, e_phoff) : offsetof(Elf32_Ehdr, e_phoff);
	size_t at_phentsize =
	    is64 ? offsetof(Elf64_Ehdr, e_phentsize) : offsetof(Elf32_Ehdr, e_phentsize);
	size_t at_phnum = is64 ? offsetof(Elf64_Ehdr, e_phnum) : offsetof(Elf32_Ehdr, e_phnum);
	if (!get_uint(r, at_phoff, is64 ? 8 : 4, &phoff) ||
	    !get_uint(r, at_phentsize, 2, &phentsize) || !get_uint(r, at_phnum, 2, &phnum))
		return "its ELF header is truncated";
	if (phnum && phentsize < 4)
		return "its program headers are malformed";
	*dynamic = false;
	for (uint64_t i = 0; i < phnum; i++) {
		uint64_t type;
		if (phoff > r->len || i * phentsize > r->len - phoff ||
		    !get_uint(r, (size_t)(phoff + i * phentsize), 4, &type))
			return "its program headers are truncated";
		if (type == PT_INTERP)
			*dynamic = true;
	}
	return NULL;
}

const char *aks_elf_read(const void *data, size_t len, aks_elf_info *out)
{
	memset(out, 0, sizeof(*out));
	const unsigned char *d = data;
	if (len < EI_NIDENT || memcmp(d, ELFMAG, SELFMAG) != 0)
		return "it is not an ELF executable";
	if ((d[EI_CLASS] != ELFCLASS32 && d[EI_CLASS] != ELFCLASS64) ||
	    (d[EI_DATA] != ELFDATA2LSB && d[EI_DATA] != ELFDATA2MSB))
		return "its ELF class or byte order is unknown";
	elf_reader r = {d, len, d[EI_DATA] == ELFDATA2MSB};
	out->is64 = d[EI_CLASS] == ELFCLASS64;
	out->big_endian = r.big;
	uint64_t machine;
	if (!get_uint(&r, offsetof(Elf64_Ehdr, e_machine), 2, &machine))
		return "its ELF header is truncated";
	out->machine = (unsigned)machine;
	name_arch(out);
	return find_interp(&r, out->is64, &out->dynamic);
}

bool aks_elf_runs_on(const aks_elf_info *elf, const char *m)
{
	if (!elf->uname || !m)
		return false;
	if (strcmp(elf->uname, m) == 0)
		return true;
	if (strcmp(elf->uname, "i686") == 0) /* i386 ... i686 */
		return m[0] == 'i' && m[1] >= '3' && m[1] <= '6' && strcmp(m + 2, "86") == 0;
	if (strcmp(elf->uname, "arm") == 0) /* armv6l, armv7l, ... */
		return strncmp(m, "arm", 3) == 0 && strcmp(m, "arm64") != 0;
	return false;
}
