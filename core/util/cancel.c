/*
 * core/util/cancel.c - cancellation tokens.
 *
 * A token is an atomic flag plus an eventfd, so a provider blocked in poll()
 * wakes up the moment the call is cancelled, and triggering is
 * async-signal-safe (the CLI triggers from its SIGINT handler).
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/cancel.h"

struct aks_cancel {
	atomic_bool triggered;
	int fd;
};

AKS_EXPORT int aks_cancel_new(aks_cancel **out, aks_error **err)
{
	aks_cancel *c = calloc(1, sizeof(*c));
	if (!c)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->fd < 0) {
		int e = errno;
		free(c);
		return aks__error_set(err, AKS_EIO, "cannot create a cancellation eventfd: %s",
		                      strerror(e));
	}
	atomic_init(&c->triggered, false);
	*out = c;
	return AKS_OK;
}

AKS_EXPORT void aks_cancel_trigger(aks_cancel *cancel)
{
	if (!cancel || atomic_exchange(&cancel->triggered, true))
		return;
	uint64_t one = 1;
	ssize_t n = write(cancel->fd, &one, sizeof(one));
	(void)n; /* a full eventfd counter still reads as readable */
}

AKS_EXPORT bool aks_cancel_is_triggered(const aks_cancel *cancel)
{
	return cancel && atomic_load(&((aks_cancel *)cancel)->triggered);
}

AKS_EXPORT void aks_cancel_free(aks_cancel *cancel)
{
	if (!cancel)
		return;
	close(cancel->fd);
	free(cancel);
}

/* The call's token; none when the call is too small to carry one (plugins get the host's
 * layout, but an embedder driving a plugin's table directly passes its own). */
static const aks_cancel *call_token(const aks_call *call)
{
	if (!call ||
	    call->struct_size < offsetof(aks_call, host_private) + sizeof(call->host_private))
		return NULL;
	return call->host_private;
}

bool aks__call_cancelled(const aks_call *call)
{
	return aks_cancel_is_triggered(call_token(call));
}

int aks__call_cancel_fd(const aks_call *call)
{
	const aks_cancel *c = call_token(call);
	return c ? c->fd : -1;
}
