/*
 * libaks-test-gone.so - a helper library that missing_dep.so links against.
 * It is built with an -rpath that does not hold it and lives only in the build
 * tree's .libs, so at run time the dynamic linker cannot find it.
 */
#include <aksandbox/common.h>

AKS_EXPORT int aks_test_gone_answer(void);
AKS_EXPORT int aks_test_gone_answer(void)
{
	return 42;
}
