/*
 * Fuzz target: the kubernetes plugin's kubeconfig reader (the file is
 * operator input, but a reader must never crash on it). The input is the
 * kubeconfig text; the first line, when it starts with "#ctx:", names the
 * context to select. Checks the reader's promises: on success a server URL
 * and a source; on failure a code and a message, and nothing left allocated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_pure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char ctx[64] = "";
	if (size > 5 && memcmp(text, "#ctx:", 5) == 0) {
		const char *nl = memchr(text, '\n', size);
		size_t n = nl ? (size_t)(nl - text) - 5 : size - 5;
		if (n >= sizeof(ctx))
			n = sizeof(ctx) - 1;
		memcpy(ctx, text + 5, n);
		ctx[n] = '\0';
	}
	k8s_conn_cfg c;
	k8s_err e = {0};
	/* no path: relative file references resolve against the working directory */
	int rc = k8s_kubeconfig_parse(text, size, NULL, ctx[0] ? ctx : NULL, &c, &e);
	if (rc == AKS_OK) {
		CHECK(e.code == AKS_OK);
		CHECK(c.server && (strncmp(c.server, "https://", 8) == 0 ||
		                   strncmp(c.server, "http://", 7) == 0));
		CHECK(c.source);
		CHECK(!c.cert.data == !c.key.data);
		k8s_conn_cfg_free(&c);
	} else {
		CHECK(rc < 0 && e.code == rc && e.msg[0]);
		CHECK(!c.server && !c.source && !c.token);
	}
	return 0;
}
