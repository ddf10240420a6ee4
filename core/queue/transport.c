/*
 * core/queue/transport.c - the handle over a transport plugin (or the built-in in_memory one):
 * checks what the plugin hands back and names the transport in its errors.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/host_api.h"
#include "queue/transport.h"

struct aks_transport {
	const char *name;
	const aks_transport_ops *ops;
	aks_transport_impl *impl;
};

struct aks_queue_consumer {
	aks_transport *t;
	aks_consumer *impl;
	const char *queue;
};

/* Whether the ops table is long enough to hold `slot` and sets it. */
#define HAS_SLOT(ops, slot)                                                                        \
	((ops)->struct_size >= offsetof(aks_transport_ops, slot) + sizeof((ops)->slot) &&          \
	 (ops)->slot)

/* Makes sure a failing plugin call leaves a message, naming the transport and what failed. */
static int named(const aks_transport *t, int rc, aks_error **err, const char *what)
{
	if (rc < 0 && err && !*err)
		aks__error_set(err, rc, "transport '%s': %s failed (%s)", t->name, what,
		               aks_strerror(rc));
	return rc;
}

int aks__transport_open(const aks_plugin_descriptor *d, const aks_config *config,
                        aks_transport **out, aks_error **err)
{
	*out = NULL;
	if (!d || d->kind != AKS_PLUGIN_TRANSPORT || !d->ops)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s' is not a transport",
		                      d && d->name ? d->name : "(none)");
	aks_transport *t = calloc(1, sizeof(*t));
	if (!t)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	t->name = d->name;
	t->ops = d->ops; /* the loader checked the mandatory slots */
	int rc = t->ops->init(aks__host_api(), config, &t->impl, err);
	if (rc < 0 || !t->impl) {
		if (rc >= 0)
			rc = aks__error_set(err, AKS_EPLUGIN,
			                    "transport '%s' started without a handle", t->name);
		named(t, rc, err, "start");
		free(t);
		return rc;
	}
	*out = t;
	return AKS_OK;
}

void aks__transport_close(aks_transport *t)
{
	if (!t)
		return;
	if (t->ops->fini)
		t->ops->fini(t->impl);
	free(t);
}

const char *aks__transport_name(const aks_transport *t)
{
	return t->name;
}

static bool queue_known(const char *queue)
{
	return queue &&
	       (strcmp(queue, AKS_QUEUE_INPUT) == 0 || strcmp(queue, AKS_QUEUE_OUTPUT) == 0);
}

int aks__transport_send(aks_transport *t, const char *queue, const aks_message *msg,
                        const aks_call *call, aks_error **err)
{
	if (!queue_known(queue) || !msg || !msg->body || !msg->attributes)
		return aks__error_set(err, AKS_EINVAL, "transport '%s': bad send", t->name);
	return named(t, t->ops->send(t->impl, queue, msg, call, err), err, "send");
}

int aks__consumer_open(aks_transport *t, const char *queue, aks_queue_consumer **out,
                       aks_error **err)
{
	*out = NULL;
	if (!queue_known(queue))
		return aks__error_set(err, AKS_EINVAL, "transport '%s': unknown queue", t->name);
	aks_queue_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	c->t = t;
	c->queue = queue_known(queue) && strcmp(queue, AKS_QUEUE_INPUT) == 0 ? AKS_QUEUE_INPUT
	                                                                     : AKS_QUEUE_OUTPUT;
	int rc = t->ops->consumer_open(t->impl, c->queue, &c->impl, err);
	if (rc == AKS_OK && !c->impl)
		rc = aks__error_set(err, AKS_EPLUGIN, "transport '%s' opened no consumer", t->name);
	if (rc < 0) {
		free(c);
		return named(t, rc, err, "opening a consumer");
	}
	*out = c;
	return AKS_OK;
}

int aks__consumer_fetch(aks_queue_consumer *c, aks_message **out, size_t max, size_t *n,
                        int64_t wait_ms, const aks_call *call, aks_error **err)
{
	*n = 0;
	if (max == 0)
		return AKS_OK;
	size_t got = 0;
	int rc = c->t->ops->fetch(c->impl, out, max, &got, wait_ms < 0 ? 0 : wait_ms, call, err);
	if (rc < 0)
		return named(c->t, rc, err, "fetch");
	if (got > max) /* a plugin that wrote past the array has already done harm; say so */
		return aks__error_set(err, AKS_EPLUGIN,
		                      "transport '%s' returned %zu messages for at most %zu",
		                      c->t->name, got, max);
	for (size_t i = 0; i < got; i++)
		if (!out[i] || !out[i]->body || !out[i]->attributes)
			return aks__error_set(err, AKS_EPLUGIN,
			                      "transport '%s' returned a malformed message",
			                      c->t->name);
	*n = got;
	return AKS_OK;
}

int aks__consumer_ack(aks_queue_consumer *c, aks_message *msg, aks_error **err)
{
	return named(c->t, c->t->ops->ack(c->impl, msg, err), err, "ack");
}

int aks__consumer_nack(aks_queue_consumer *c, aks_message *msg, double delay_s, aks_error **err)
{
	return named(c->t, c->t->ops->nack(c->impl, msg, delay_s < 0 ? 0 : delay_s, err), err,
	             "nack");
}

int aks__consumer_dead_letter(aks_queue_consumer *c, aks_message *msg, aks_error **err)
{
	if (HAS_SLOT(c->t->ops, dead_letter))
		return named(c->t, c->t->ops->dead_letter(c->impl, msg, err), err, "dead_letter");
	return aks__consumer_ack(c, msg, err);
}

int aks__consumer_in_progress(aks_queue_consumer *c, aks_message *msg, aks_error **err)
{
	if (!HAS_SLOT(c->t->ops, in_progress))
		return AKS_ECAPABILITY;
	return named(c->t, c->t->ops->in_progress(c->impl, msg, err), err, "in_progress");
}

int aks__transport_depth(aks_transport *t, const char *queue, uint64_t *waiting, aks_error **err)
{
	if (!HAS_SLOT(t->ops, depth))
		return AKS_ECAPABILITY;
	if (!queue_known(queue))
		return aks__error_set(err, AKS_EINVAL, "transport '%s': no queue '%s'", t->name,
		                      queue ? queue : "(null)");
	return named(t, t->ops->depth(t->impl, queue, waiting, err), err, "depth");
}

void aks__consumer_close(aks_queue_consumer *c)
{
	if (!c)
		return;
	c->t->ops->consumer_close(c->impl);
	free(c);
}

const char *aks__message_attribute(const aks_message *msg, const char *key)
{
	for (const char *const *a = msg->attributes; a && a[0] && a[1]; a += 2)
		if (strcmp(a[0], key) == 0)
			return a[1];
	return NULL;
}
