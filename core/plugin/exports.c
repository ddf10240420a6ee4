/*
 * core/plugin/exports.c - lists what a loaded plugin exports by walking its
 * dynamic section in memory (link_map->l_ld): DT_SYMTAB and DT_STRTAB give
 * the symbols and their names, DT_GNU_HASH or DT_HASH their number (the
 * dynamic section does not record it directly).
 *
 * Reading the object the dynamic linker actually mapped, rather than the file
 * on disk, checks exactly what the host sees and needs no ELF file parser.
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exports.h"

/* Symbols the toolchain's start files define in every shared object; older
 * linkers export them, and the plugin author cannot hide them. */
static const char *const toolchain_symbols[] = {"_init", "_fini", NULL};

/* glibc relocates the address entries of l_ld in place on most targets but
 * not on all (the dynamic section is read-only on MIPS and RISC-V); an
 * unrelocated entry is an offset below the load address. */
static const void *dyn_addr(const struct link_map *lm, ElfW(Addr) value)
{
	if (value < lm->l_addr)
		value += lm->l_addr;
	return (const void *)value;
}

/* The number of dynamic symbols, from the GNU hash table: one past the
 * highest symbol index reachable from any bucket. */
static size_t gnu_hash_symbol_count(const uint32_t *table)
{
	uint32_t nbuckets = table[0];
	uint32_t symoffset = table[1];
	uint32_t bloom_words = table[2];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(table + 4);
	const uint32_t *buckets = (const uint32_t *)(bloom + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;

	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset; /* no hashed (defined) symbols */
	while ((chain[last - symoffset] & 1) == 0)
		last++;
	return (size_t)last + 1;
}

static bool exportable_type(unsigned type)
{
	return type == STT_FUNC || type == STT_OBJECT || type == STT_GNU_IFUNC || type == STT_TLS ||
	       type == STT_COMMON;
}

static bool is_toolchain_symbol(const char *name)
{
	for (size_t i = 0; toolchain_symbols[i]; i++)
		if (strcmp(name, toolchain_symbols[i]) == 0)
			return true;
	/* AddressSanitizer's one-definition-rule indicator of an exported global: the global
	 * itself is listed, and a sanitizer build adds nothing the author wrote. */
	return strncmp(name, "__odr_asan", 10) == 0;
}

static int collect(const struct link_map *lm, struct aks__plugin_exports *out, char *why,
                   size_t why_size)
{
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *gnu_hash = NULL, *sysv_hash = NULL;
	size_t strsz = 0, count;

	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB:
			symtab = dyn_addr(lm, d->d_un.d_ptr);
			break;
		case DT_STRTAB:
			strtab = dyn_addr(lm, d->d_un.d_ptr);
			break;
		case DT_STRSZ:
			strsz = d->d_un.d_val;
			break;
		case DT_GNU_HASH:
			gnu_hash = dyn_addr(lm, d->d_un.d_ptr);
			break;
		case DT_HASH:
			sysv_hash = dyn_addr(lm, d->d_un.d_ptr);
			break;
		default:
			break;
		}
	}
	if (!symtab || !strtab) {
		snprintf(why, why_size, "the object has no dynamic symbol table");
		return -1;
	}
	if (gnu_hash)
		count = gnu_hash_symbol_count(gnu_hash);
	else if (sysv_hash)
		count = sysv_hash[1]; /* nchain equals the number of symbols */
	else {
		snprintf(why, why_size, "the object has neither DT_GNU_HASH nor DT_HASH");
		return -1;
	}

	out->names = calloc(count ? count : 1, sizeof(*out->names));
	if (!out->names) {
		snprintf(why, why_size, "out of memory");
		return -1;
	}
	for (size_t i = 1; i < count; i++) { /* entry 0 is the null symbol */
		const ElfW(Sym) *s = &symtab[i];
		unsigned bind = ELF64_ST_BIND(s->st_info);
		unsigned vis = ELF64_ST_VISIBILITY(s->st_other);

		if (s->st_shndx == SHN_UNDEF || !exportable_type(ELF64_ST_TYPE(s->st_info)))
			continue;
		if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
			continue;
		if (vis != STV_DEFAULT && vis != STV_PROTECTED)
			continue;
		if (strsz && s->st_name >= strsz)
			continue;
		const char *name = strtab + s->st_name;
		if (is_toolchain_symbol(name))
			continue;
		out->names[out->count] = strdup(name);
		if (!out->names[out->count]) {
			snprintf(why, why_size, "out of memory");
			return -1;
		}
		out->count++;
	}
	return 0;
}

int aks__plugin_exports_read(const char *file, struct aks__plugin_exports *out, char *why,
                             size_t why_size)
{
	struct link_map *lm = NULL;
	int rc;

	out->names = NULL;
	out->count = 0;
	void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!handle) {
		snprintf(why, why_size, "%s is not loaded: %s", file, dlerror());
		return -1;
	}
	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
		snprintf(why, why_size, "dlinfo(RTLD_DI_LINKMAP) failed: %s", dlerror());
		dlclose(handle);
		return -1;
	}
	rc = collect(lm, out, why, why_size);
	dlclose(handle); /* drops only the reference RTLD_NOLOAD took */
	if (rc != 0)
		aks__plugin_exports_free(out);
	return rc;
}

bool aks__plugin_exports_has(const struct aks__plugin_exports *ex, const char *name)
{
	for (size_t i = 0; i < ex->count; i++)
		if (strcmp(ex->names[i], name) == 0)
			return true;
	return false;
}

void aks__plugin_exports_free(struct aks__plugin_exports *ex)
{
	for (size_t i = 0; i < ex->count; i++)
		free(ex->names[i]);
	free(ex->names);
	ex->names = NULL;
	ex->count = 0;
}
