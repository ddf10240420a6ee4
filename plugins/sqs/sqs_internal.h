/*
 * plugins/sqs/sqs_internal.h - what the files of the sqs transport share:
 *   sqs.c           the plugin: its config, the queues (checked or created at start), send
 *   sqs_consumer.c  consumers: ReceiveMessage, the held-back messages of a group, settling
 *   sqs_codec.c     how a message maps onto SQS's fields (no I/O; unit tested and fuzzed)
 *
 * The design (FIFO queues, one message group per sandbox session, visibility as the ack wait)
 * is described in docs/plugins/sqs.md.
 */
#ifndef SQS_INTERNAL_H
#define SQS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>
#include <aksandbox/transport.h>

#include "aks_aws.h"
#include "aks_cloud.h"

#define SQS_NAME "sqs"

enum { SQS_INPUT = 0, SQS_OUTPUT = 1, SQS_QUEUES = 2 };

/* SQS's own bounds. */
#define SQS_MAX_BATCH      10    /* messages per ReceiveMessage */
#define SQS_MAX_WAIT_S     20    /* long polling */
#define SQS_MAX_VISIBILITY 43200 /* seconds (12 hours) */
#define SQS_MAX_ID         128   /* MessageGroupId, MessageDeduplicationId */
#define SQS_MAX_ATTRIBUTES 10    /* message attributes per message */

/* The attributes the transport adds beside the host's (a host attribute may not use the
 * prefix). */
#define SQS_ATTR_PREFIX  "aks-"
#define SQS_ATTR_BODY    "aks-body"    /* "base64": the body was not SQS text */
#define SQS_ATTR_GROUP   "aks-group"   /* the host's group id, when SQS's is derived from it */
#define SQS_ATTR_NOGROUP "aks-nogroup" /* "1": sent without a group (SQS's is random) */

struct sqs_queue {
	const char *name; /* AKS_QUEUE_INPUT or AKS_QUEUE_OUTPUT */
	const char *key;  /* the config key it came from: "input_url" */
	char *url;        /* the queue URL */
	char *endpoint;   /* where its requests go */
	aks_aws_service svc;
	bool checked;  /* exists (or was created) and is FIFO; under the transport's lock */
	uint64_t held; /* messages this process's consumers hold back (sqs_hold.c); atomic */
};

struct aks_transport_impl {
	const aks_host_api *host;
	aks_cloud cloud;
	char *region_setting, *endpoint_setting, *sts_setting;
	bool auto_provision;
	int visibility_s;  /* the ack wait */
	int64_t max_bytes; /* max_message_bytes */
	double retry_backoff;
	double request_timeout;
	struct sqs_queue q[SQS_QUEUES];
	/* resolved at the first request, under lock */
	pthread_mutex_t lock;
	bool ready;
	aks_aws_env env;
	aks_aws_source *source;
};

/* ---- sqs.c ---- */

/* The queue's index for a name, or -1. */
int sqs_queue_index(const char *queue);
/* Makes the transport ready (region, credentials, the queue checked or created) for queue
 * index qi: AKS_OK, or the error worded for the operator. Thread-safe. */
int sqs_ready(aks_transport_impl *t, int qi, const aks_call *call, aks_error **err);
/* A call for a request of the transport's own: the deadline of `call` (NULL: none) bounded
 * by extra_ms plus request_timeout, its cancellation kept. */
void sqs_request_call(const aks_transport_impl *t, const aks_call *call, int64_t extra_ms,
                      aks_call *out);
/* One SQS operation ("ReceiveMessage") on queue qi; body's QueueUrl is set here. */
int sqs_call(aks_transport_impl *t, int qi, const char *what, const char *op, json_object *body,
             aks_cloud_retry retry, const aks_call *call, json_object **out, aks_aws_fault *fault,
             aks_error **err);

/* ---- sqs_consumer.c ---- */

int sqs_consumer_open(aks_transport_impl *t, const char *queue, aks_consumer **out,
                      aks_error **err);
int sqs_fetch(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
              const aks_call *call, aks_error **err);
int sqs_ack(aks_consumer *c, aks_message *msg, aks_error **err);
int sqs_nack(aks_consumer *c, aks_message *msg, double delay_s, aks_error **err);
int sqs_dead_letter(aks_consumer *c, aks_message *msg, aks_error **err);
int sqs_in_progress(aks_consumer *c, aks_message *msg, aks_error **err);
void sqs_consumer_close(aks_consumer *c);

/* ---- sqs_codec.c ---- */

/* Whether s[0..len) is text an SQS message may carry: UTF-8 of the characters #x9, #xA, #xD,
 * #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF. */
bool sqs_text_ok(const char *s, size_t len);
/* Whether s can be a MessageGroupId or MessageDeduplicationId as it is: 1 to 128 of
 * [A-Za-z0-9] and ASCII punctuation. */
bool sqs_id_ok(const char *s);
/* An SQS id for s: s itself when sqs_id_ok, else "aks-" and 32 hex digits of its hash, into
 * buf (at least SQS_MAX_ID + 1 bytes). */
void sqs_id_for(const char *s, char *buf, size_t size);
/* Whether name can be a message attribute's name: 1 to 256 of [A-Za-z0-9_.-], no leading,
 * trailing or doubled '.', not starting with "AWS." or "Amazon." (any case). */
bool sqs_attr_name_ok(const char *name);

/* The SendMessage request's fields for msg: MessageBody, MessageGroupId,
 * MessageDeduplicationId, MessageAttributes. AKS_OK; AKS_EINVAL with the reason (an attribute
 * name SQS refuses, too many attributes) in *err; AKS_ENOMEM. */
int sqs_encode(const aks_host_api *host, const aks_message *msg, json_object *req, aks_error **err);

/* A received message, decoded: the host's view and what settling it needs. */
typedef struct sqs_msg {
	aks_message m; /* first: the host's pointer is ours */
	char *body;
	size_t body_len;
	char **attrs; /* NULL-terminated key, value pairs */
	char *group;  /* the host's group (NULL: none) */
	char *sqs_group;
	char *dedup;
	char *message_id;
	char *receipt;
	int64_t visible_at_ms; /* monotonic: when SQS makes it visible again */
	struct sqs_msg *next;
} sqs_msg;

/* ---- sqs_hold.c ---- */

/* A consumer's messages: handed to the host and not settled yet, and received but held back
 * until their group's message in flight is settled (in the order SQS gave them). */
typedef struct sqs_lists {
	sqs_msg *inflight;
	sqs_msg *held;
	uint64_t *held_count; /* the queue's count of held messages, kept up here; NULL: none */
} sqs_lists;

/* Whether a message of m's group is in flight with the host. */
bool sqs_group_busy(const sqs_lists *l, const sqs_msg *m);
/* Hands held messages whose group is free to the host, in order, into out[*n..max). */
void sqs_hand_out_held(sqs_lists *l, aks_message **out, size_t max, size_t *n);
/* A message just received: to the host when out has room and its group is free, else held. */
void sqs_hand_out_or_hold(sqs_lists *l, sqs_msg *m, aks_message **out, size_t max, size_t *n);
/* Takes msg off the in-flight list (NULL: the consumer does not hold it). */
sqs_msg *sqs_settle(sqs_lists *l, aks_message *msg);
/* Whether msg is in flight with the host from this consumer. */
bool sqs_holds(const sqs_lists *l, const aks_message *msg);
/* Takes the held messages of m's group off the held list, in order (a list; NULL: none). */
sqs_msg *sqs_release_group(sqs_lists *l, const sqs_msg *m);
/* Takes every held message off the held list, in order (a list; NULL: none). */
sqs_msg *sqs_release_held(sqs_lists *l);

/* One message of a ReceiveMessage answer (an element of Messages) as the host will see it:
 * AKS_OK with *out; AKS_EBROKER with the reason when the answer is not what SQS sends (no
 * receipt handle, a body marked base64 that is not). */
int sqs_decode(const aks_host_api *host, json_object *m, sqs_msg **out, aks_error **err);
void sqs_msg_free(sqs_msg *m);

#endif /* SQS_INTERNAL_H */
