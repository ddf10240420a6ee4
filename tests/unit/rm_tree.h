/* tests/unit/rm_tree.h - removes a test's temporary directory tree (header-only). */
#ifndef AKS_TESTS_RM_TREE_H
#define AKS_TESTS_RM_TREE_H

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static int rm_tree_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* path and everything under it, symbolic links removed, never followed; best effort. */
static inline void rm_tree(const char *path)
{
	nftw(path, rm_tree_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif /* AKS_TESTS_RM_TREE_H */
