/*
 * plugins/sqs/sqs.c - the sqs transport: the queue broker's two queues as Amazon SQS FIFO
 * queues, spoken to with the AWS JSON protocol through libaks-aws (credentials as the AWS
 * SDKs' default chain finds them, requests signed by libcurl). Config, the queues, send and
 * depth; consumers are in sqs_consumer.c, the mapping of a message in sqs_codec.c. The design
 * is described in docs/plugins/sqs.md.
 *
 * Nothing is resolved at init: the region, the credentials and each queue's existence are
 * settled at its first use (sqs_ready), so `aksandbox check` and a host that never touches the
 * queue need no AWS settings. The worker opens its consumers at start, so a missing queue
 * fails it at once with the queue's name.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_json.h"
#include "sqs_internal.h"

#ifndef SQS_PLUGIN_VERSION
#error "SQS_PLUGIN_VERSION must be defined (the package version)"
#endif

/* The sqs block (reference Appendix A: `input.url` and `output.url` are the queue block's, and
 * reach the plugin as input_url and output_url; transport.h). */
static const aks_config_key sqs_config_keys[] = {
    AKS_CONFIG_KEY("region", AKS_CONFIG_STRING, false, NULL,
                   "AWS region; null = the queue URL's, else AWS_REGION and the shared "
                   "config's"),
    AKS_CONFIG_KEY("endpoint_url", AKS_CONFIG_STRING, false, NULL,
                   "SQS endpoint; null = AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL, else the "
                   "queue URL's"),
    AKS_CONFIG_KEY("sts_endpoint_url", AKS_CONFIG_STRING, false, NULL,
                   "STS endpoint for web identity credentials; null = the region's"),
    AKS_CONFIG_KEY("auto_provision", AKS_CONFIG_BOOL, false, "false",
                   "create missing FIFO queues (development); otherwise a missing queue is "
                   "an error"),
    AKS_CONFIG_KEY("visibility_timeout", AKS_CONFIG_DOUBLE, false, "0",
                   "seconds a received message stays invisible (the ack wait); 0 = the "
                   "longest policy.timeout plus 60"),
    AKS_CONFIG_KEY("retry_backoff", AKS_CONFIG_DOUBLE, false, "2.0",
                   "seconds before a nacked message comes back when the host gives none"),
    AKS_CONFIG_KEY("request_timeout", AKS_CONFIG_DOUBLE, false, "10",
                   "seconds any single SQS request may take (beside a long poll's wait)"),
    AKS_CONFIG_KEY("max_message_bytes", AKS_CONFIG_INT, false, "262144",
                   "the largest message the queues take (SQS's MaximumMessageSize); "
                   "inline_payload_max_bytes must fit in it"),
    AKS_CONFIG_KEY("input_url", AKS_CONFIG_STRING, false, NULL,
                   "set from sandbox.broker.queue.input.url"),
    AKS_CONFIG_KEY("output_url", AKS_CONFIG_STRING, false, NULL,
                   "set from sandbox.broker.queue.output.url"),
    AKS_CONFIG_KEY("longest_timeout", AKS_CONFIG_DOUBLE, false, "0",
                   "set from the profiles' longest policy.timeout"),
    AKS_CLOUD_CONFIG_KEYS,
    AKS_CONFIG_END,
};

int sqs_queue_index(const char *queue)
{
	if (queue && strcmp(queue, AKS_QUEUE_INPUT) == 0)
		return SQS_INPUT;
	if (queue && strcmp(queue, AKS_QUEUE_OUTPUT) == 0)
		return SQS_OUTPUT;
	return -1;
}

void sqs_request_call(const aks_transport_impl *t, const aks_call *call, int64_t extra_ms,
                      aks_call *out)
{
	if (call)
		*out = *call; /* the cancellation stays the host's */
	else
		*out = (aks_call){AKS_CALL_INIT};
	int64_t bound = t->host->now_ms() + extra_ms + (int64_t)(t->request_timeout * 1000.0);
	if (out->deadline_ms == 0 || out->deadline_ms > bound) {
		out->deadline_ms = bound;
		out->timeout = (double)(bound - t->host->now_ms()) / 1000.0;
	}
}

/* ---- the queues ---- */

/* The scheme and host of a URL ("https://sqs.us-east-1.amazonaws.com"), malloc'd. */
static char *url_origin(const char *url)
{
	const char *p = strstr(url, "://");
	if (!p)
		return NULL;
	const char *end = strchr(p + 3, '/');
	size_t len = end ? (size_t)(end - url) : strlen(url);
	return strndup(url, len);
}

/* The queue's name: the URL's last path segment. */
static const char *url_queue_name(const char *url)
{
	const char *slash = strrchr(url, '/');
	return slash ? slash + 1 : url;
}

/* The region an AWS queue URL names ("sqs.<region>.amazonaws.com"), into buf; "" when the
 * URL is not AWS's. */
static void url_region(const char *url, char *buf, size_t size)
{
	buf[0] = '\0';
	const char *h = strstr(url, "://sqs.");
	if (!h)
		return;
	h += 7;
	const char *dot = strchr(h, '.');
	if (dot && strncmp(dot, ".amazonaws.com", 14) == 0 && (size_t)(dot - h) < size)
		snprintf(buf, size, "%.*s", (int)(dot - h), h);
}

static int check_url(const aks_host_api *host, const char *key, const char *url, aks_error **err)
{
	const char *name = url_queue_name(url);
	size_t len = strlen(name);
	if ((strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0) ||
	    !strchr(strstr(url, "://") + 3, '/'))
		return host->error_set(
		    err, AKS_ECONFIG,
		    SQS_NAME ": sandbox.broker.queue.%.*s.url '%s' is not an "
		             "SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/"
		             "<name>.fifo)",
		    (int)(strlen(key) - 4), key, url);
	if (len < 6 || len > 80 || strcmp(name + len - 5, ".fifo") != 0)
		return host->error_set(err, AKS_ECONFIG,
		                       SQS_NAME
		                       ": the queue '%s' of sandbox.broker.queue.%.*s.url is "
		                       "not a FIFO queue (its name must end in .fifo): per-session "
		                       "order needs one",
		                       name, (int)(strlen(key) - 4), key);
	for (size_t i = 0; i + 5 < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return host->error_set(err, AKS_ECONFIG,
			                       SQS_NAME
			                       ": the queue name '%s' may hold only A-Z a-z "
			                       "0-9 - _ before .fifo",
			                       name);
	}
	return AKS_OK;
}

int sqs_call(aks_transport_impl *t, int qi, const char *what, const char *op, json_object *body,
             aks_cloud_retry retry, const aks_call *call, json_object **out, aks_aws_fault *fault,
             aks_error **err)
{
	struct sqs_queue *q = &t->q[qi];
	json_object *url = json_object_new_string(q->url);
	if (!url || json_object_object_add(body, "QueueUrl", url) != 0) {
		json_object_put(url);
		return t->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char target[64];
	snprintf(target, sizeof(target), "AmazonSQS.%s", op);
	return aks_aws_json_call(&q->svc, what, target, body, retry, call, out, fault, err);
}

static bool is_missing_queue(const aks_aws_fault *f)
{
	return strcmp(f->code, "QueueDoesNotExist") == 0 ||
	       strcmp(f->code, "AWS.SimpleQueueService.NonExistentQueue") == 0;
}

/* Creates the queue the URL names (auto_provision), FIFO, with the ack wait as its default
 * visibility. */
static int create_queue(aks_transport_impl *t, int qi, const aks_call *call, aks_error **err)
{
	struct sqs_queue *q = &t->q[qi];
	char vis[16];
	snprintf(vis, sizeof(vis), "%d", t->visibility_s);
	json_object *body = json_object_new_object(), *attrs = json_object_new_object(),
	            *out = NULL;
	bool ok = body && attrs &&
	          !json_object_object_add(body, "QueueName",
	                                  json_object_new_string(url_queue_name(q->url))) &&
	          !json_object_object_add(attrs, "FifoQueue", json_object_new_string("true")) &&
	          !json_object_object_add(attrs, "VisibilityTimeout", json_object_new_string(vis));
	if (ok) {
		ok = !json_object_object_add(body, "Attributes", attrs);
		attrs = NULL;
	}
	json_object_put(attrs);
	if (!ok) {
		json_object_put(body);
		return t->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	aks_aws_fault fault;
	char target[] = "AmazonSQS.CreateQueue";
	int rc = aks_aws_json_call(&q->svc, "create the queue", target, body, AKS_CLOUD_RETRY_SAFE,
	                           call, &out, &fault, err);
	json_object_put(body);
	const char *made = aks__jstr(out, "QueueUrl");
	if (rc == AKS_OK)
		t->host->log(AKS_LOG_INFO, SQS_NAME, "created the FIFO queue %s (auto_provision)",
		             made ? made : url_queue_name(q->url));
	json_object_put(out);
	return rc;
}

/* GetQueueAttributes of queue qi's attribute `name`: its value (SQS answers strings) in
 * *value, malloc'd; NULL when the answer has none. */
static int queue_attribute(aks_transport_impl *t, int qi, const char *what, const char *name,
                           const aks_call *call, char **value, aks_aws_fault *fault,
                           aks_error **err)
{
	*value = NULL;
	*fault = (aks_aws_fault){0};
	json_object *body = json_object_new_object(), *names = json_object_new_array(), *out = NULL;
	bool ok = body && names && !json_object_array_add(names, json_object_new_string(name));
	if (ok) {
		ok = !json_object_object_add(body, "AttributeNames", names);
		names = NULL;
	}
	json_object_put(names);
	if (!ok) {
		json_object_put(body);
		return t->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	int rc = sqs_call(t, qi, what, "GetQueueAttributes", body, AKS_CLOUD_RETRY_SAFE, call, &out,
	                  fault, err);
	json_object_put(body);
	const char *v = rc == AKS_OK ? aks__jstr(aks__jget(out, "Attributes"), name) : NULL;
	if (v && !(*value = strdup(v)))
		rc = t->host->error_set(err, AKS_ENOMEM, "out of memory");
	json_object_put(out);
	return rc;
}

/* The queue exists and is FIFO (or is created, with auto_provision). */
static int check_queue(aks_transport_impl *t, int qi, const aks_call *call, aks_error **err)
{
	struct sqs_queue *q = &t->q[qi];
	aks_aws_fault fault;
	aks_error *e = NULL;
	char *fifo = NULL;
	int rc = queue_attribute(t, qi, "read the queue's attributes", "FifoQueue", call, &fifo,
	                         &fault, &e);
	if (rc != AKS_OK && is_missing_queue(&fault)) {
		t->host->error_free(e);
		e = NULL;
		if (!t->auto_provision)
			return t->host->error_set(
			    err, AKS_EBROKER,
			    SQS_NAME
			    ": the %s queue %s does not exist (in %s at %s): create it as a "
			    "FIFO queue, or set auto_provision: true in the sqs block for "
			    "development",
			    q->name, url_queue_name(q->url), q->svc.region, q->endpoint);
		return create_queue(t, qi, call, err);
	}
	if (rc != AKS_OK) {
		if (err && !*err)
			*err = e;
		else
			t->host->error_free(e);
		return rc;
	}
	bool is_fifo = fifo && strcmp(fifo, "true") == 0;
	free(fifo);
	if (!is_fifo)
		return t->host->error_set(err, AKS_EBROKER,
		                          SQS_NAME ": the %s queue %s is not a FIFO queue: "
		                                   "per-session order needs one",
		                          q->name, url_queue_name(q->url));
	return AKS_OK;
}

/* Region, credentials and endpoints, once. Under t->lock. */
static int setup(aks_transport_impl *t, aks_error **err)
{
	const aks_host_api *host = t->host;
	if (t->ready)
		return AKS_OK;
	char from_url[64] = "";
	for (int i = 0; i < SQS_QUEUES && !from_url[0]; i++)
		if (t->q[i].url)
			url_region(t->q[i].url, from_url, sizeof(from_url));
	aks_aws_env_free(&t->env);
	int rc = aks_aws_env_load(
	    &t->env, host, SQS_NAME,
	    t->region_setting ? t->region_setting : (from_url[0] ? from_url : NULL), err);
	if (rc != AKS_OK)
		return rc;
	if (!t->env.region)
		return host->error_set(err, AKS_ECONFIG,
		                       SQS_NAME ": no AWS region: set region in the sqs block, or "
		                                "AWS_REGION, or the region of profile '%s' in %s",
		                       t->env.profile, t->env.config_file);
	char *sts = NULL;
	if ((rc = aks_aws_endpoint(host, SQS_NAME, "sts", t->env.region, t->sts_setting, &sts,
	                           err)) != AKS_OK)
		return rc;
	aks_aws_source_free(t->source);
	t->source = NULL;
	rc = aks_aws_chain_new(&t->cloud, &t->env, sts, &t->source, err);
	free(sts);
	if (rc != AKS_OK)
		return rc;
	bool env_endpoint = getenv("AWS_ENDPOINT_URL_SQS") || getenv("AWS_ENDPOINT_URL");
	for (int i = 0; i < SQS_QUEUES; i++) {
		struct sqs_queue *q = &t->q[i];
		free(q->endpoint);
		q->endpoint = NULL;
		char *origin = NULL;
		if (!t->endpoint_setting && !env_endpoint && !(origin = url_origin(q->url)))
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		rc = aks_aws_endpoint(host, SQS_NAME, "sqs", t->env.region,
		                      t->endpoint_setting ? t->endpoint_setting : origin,
		                      &q->endpoint, err);
		free(origin);
		if (rc != AKS_OK)
			return rc;
		q->svc = (aks_aws_service){
		    .cloud = &t->cloud,
		    .source = t->source,
		    .service = "sqs",
		    .region = t->env.region,
		    .endpoint = q->endpoint,
		    .json_version = "1.0",
		};
	}
	t->ready = true;
	host->log(AKS_LOG_DEBUG, SQS_NAME, "SQS at %s in %s; credentials from %s",
	          t->q[SQS_INPUT].endpoint, t->env.region, aks_aws_source_describe(t->source));
	return AKS_OK;
}

int sqs_ready(aks_transport_impl *t, int qi, const aks_call *call, aks_error **err)
{
	pthread_mutex_lock(&t->lock);
	int rc = setup(t, err);
	if (rc == AKS_OK && !t->q[qi].checked) {
		aks_call c;
		sqs_request_call(t, call, 0, &c);
		if ((rc = check_queue(t, qi, &c, err)) == AKS_OK)
			t->q[qi].checked = true;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* ---- init, fini ---- */

static void sqs_fini(aks_transport_impl *t)
{
	if (!t)
		return;
	for (int i = 0; i < SQS_QUEUES; i++) {
		free(t->q[i].url);
		free(t->q[i].endpoint);
	}
	aks_aws_source_free(t->source);
	aks_aws_env_free(&t->env);
	aks_cloud_fini(&t->cloud);
	free(t->region_setting);
	free(t->endpoint_setting);
	free(t->sts_setting);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int dup_setting(const aks_host_api *host, const aks_config *cfg, const char *key, char **out,
                       aks_error **err)
{
	const char *v = NULL;
	*out = NULL;
	if (host->config_string(cfg, key, &v) != AKS_OK || !v)
		return AKS_OK;
	return (*out = strdup(v)) ? AKS_OK : host->error_set(err, AKS_ENOMEM, "out of memory");
}

/* The ack wait: as set, else the longest policy timeout plus a minute (SQS's bounds kept);
 * a setting below the longest timeout is allowed (the worker's in_progress extends a running
 * request's visibility every second) but warned about, as the seeds advise. */
static int visibility(aks_transport_impl *t, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *host = t->host;
	double set = 0, longest = 0;
	host->config_double(cfg, "visibility_timeout", &set);
	host->config_double(cfg, "longest_timeout", &longest);
	if (set != 0) {
		if (!(set >= 1 && set <= SQS_MAX_VISIBILITY))
			return host->error_set(err, AKS_ECONFIG,
			                       SQS_NAME
			                       ": visibility_timeout must be 1 to %d seconds "
			                       "(SQS's bounds), not %g",
			                       SQS_MAX_VISIBILITY, set);
		t->visibility_s = (int)ceil(set);
		char limit[64] = "a profile has none";
		if (longest > 0)
			snprintf(limit, sizeof(limit), "%g s", longest);
		if (longest <= 0 || set < longest)
			host->log(
			    AKS_LOG_WARNING, SQS_NAME,
			    "visibility_timeout %d s is shorter than the longest policy.timeout "
			    "(%s): a request that outlives it stays invisible only through the "
			    "worker's heartbeat, and runs twice if that worker stalls; size it "
			    "above the longest timeout",
			    t->visibility_s, limit);
		return AKS_OK;
	}
	double v = longest > 0 ? longest + 60 : SQS_MAX_VISIBILITY;
	t->visibility_s = v > SQS_MAX_VISIBILITY ? SQS_MAX_VISIBILITY : (int)ceil(v);
	return AKS_OK;
}

static int sqs_init(const aks_host_api *host, const aks_config *cfg, aks_transport_impl **out,
                    aks_error **err)
{
	*out = NULL;
	aks_transport_impl *t = calloc(1, sizeof(*t));
	if (!t)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	t->host = host;
	pthread_mutex_init(&t->lock, NULL);
	t->q[SQS_INPUT].name = AKS_QUEUE_INPUT;
	t->q[SQS_INPUT].key = "input_url";
	t->q[SQS_OUTPUT].name = AKS_QUEUE_OUTPUT;
	t->q[SQS_OUTPUT].key = "output_url";
	int rc = aks_cloud_configure(&t->cloud, host, cfg, SQS_NAME, err);
	if (rc == AKS_OK)
		rc = dup_setting(host, cfg, "region", &t->region_setting, err);
	if (rc == AKS_OK)
		rc = dup_setting(host, cfg, "endpoint_url", &t->endpoint_setting, err);
	if (rc == AKS_OK)
		rc = dup_setting(host, cfg, "sts_endpoint_url", &t->sts_setting, err);
	for (int i = 0; i < SQS_QUEUES && rc == AKS_OK; i++) {
		if ((rc = dup_setting(host, cfg, t->q[i].key, &t->q[i].url, err)) != AKS_OK)
			break;
		if (!t->q[i].url)
			rc = host->error_set(err, AKS_ECONFIG,
			                     SQS_NAME
			                     ": sandbox.broker.queue.%s.url is required: the "
			                     "URL of the %s FIFO queue",
			                     t->q[i].name, t->q[i].name);
		else
			rc = check_url(host, t->q[i].key, t->q[i].url, err);
	}
	if (rc == AKS_OK && t->endpoint_setting)
		rc = aks_cloud_check_url(host, SQS_NAME, "endpoint_url", t->endpoint_setting, err);
	if (rc == AKS_OK) {
		host->config_bool(cfg, "auto_provision", &t->auto_provision);
		t->retry_backoff = 2.0;
		t->request_timeout = 10;
		host->config_double(cfg, "retry_backoff", &t->retry_backoff);
		host->config_double(cfg, "request_timeout", &t->request_timeout);
		host->config_int(cfg, "max_message_bytes", &t->max_bytes);
		if (!(t->retry_backoff >= 0 && t->retry_backoff <= SQS_MAX_VISIBILITY) ||
		    !(t->request_timeout >= 0.1 && t->request_timeout <= 300))
			rc = host->error_set(err, AKS_ECONFIG,
			                     SQS_NAME ": retry_backoff must be 0 to %d seconds and "
			                              "request_timeout 0.1 to 300",
			                     SQS_MAX_VISIBILITY);
		else if (t->max_bytes < 1024 || t->max_bytes > 1048576)
			rc = host->error_set(err, AKS_ECONFIG,
			                     SQS_NAME ": max_message_bytes must be 1024 to 1048576 "
			                              "(SQS's bounds), not %lld",
			                     (long long)t->max_bytes);
	}
	if (rc == AKS_OK)
		rc = visibility(t, cfg, err);
	if (rc != AKS_OK) {
		sqs_fini(t);
		return rc;
	}
	*out = t;
	return AKS_OK;
}

/* ---- send ---- */

static int sqs_send(aks_transport_impl *t, const char *queue, const aks_message *msg,
                    const aks_call *call, aks_error **err)
{
	const aks_host_api *host = t->host;
	int qi = sqs_queue_index(queue);
	if (qi < 0)
		return host->error_set(err, AKS_EINVAL, SQS_NAME ": no queue '%s'",
		                       queue ? queue : "(null)");
	/* a call already over is not sent: a fast answer would otherwise outrun the check */
	if (call && host->cancelled(call))
		return host->error_set(err, AKS_ECANCELLED, SQS_NAME ": send cancelled");
	if (call && call->deadline_ms > 0 && host->now_ms() >= call->deadline_ms)
		return host->error_set(err, AKS_ETIMEOUT, SQS_NAME ": send: the deadline passed");
	int rc = sqs_ready(t, qi, call, err);
	if (rc != AKS_OK)
		return rc;
	json_object *body = json_object_new_object(), *out = NULL;
	if (!body)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if ((rc = sqs_encode(host, msg, body, err)) != AKS_OK) {
		json_object_put(body);
		return rc;
	}
	size_t len = strlen(json_object_get_string(aks__jget(body, "MessageBody")));
	if ((int64_t)len > t->max_bytes) {
		json_object_put(body);
		return host->error_set(err, AKS_ELIMIT,
		                       SQS_NAME
		                       ": a message of %zu bytes is over max_message_bytes "
		                       "(%lld)",
		                       len, (long long)t->max_bytes);
	}
	aks_call c;
	sqs_request_call(t, call, 0, &c);
	aks_aws_fault fault;
	/* sent again safely: the deduplication id makes a second copy a no-op */
	rc = sqs_call(t, qi, "send a message", "SendMessage", body, AKS_CLOUD_RETRY_SAFE, &c, &out,
	              &fault, err);
	json_object_put(body);
	json_object_put(out);
	return rc;
}

/* ---- depth ---- */

/*
 * What waits on a queue: SQS's ApproximateNumberOfMessages, the messages a receive could
 * return (those of a group queued behind its message in flight included; approximate, and a
 * little late), plus those this process's consumers received and hold back behind their
 * group's message in flight (sqs_hold.c), which SQS counts as in flight though no host has
 * them. Another process's held-back messages cannot be seen from here and are not counted.
 * A nacked message counts once its delay has passed and it is visible again.
 */
static int sqs_depth(aks_transport_impl *t, const char *queue, uint64_t *waiting, aks_error **err)
{
	const aks_host_api *host = t->host;
	int qi = sqs_queue_index(queue);
	if (qi < 0)
		return host->error_set(err, AKS_EINVAL, SQS_NAME ": no queue '%s'",
		                       queue ? queue : "(null)");
	int rc = sqs_ready(t, qi, NULL, err);
	if (rc != AKS_OK)
		return rc;
	aks_call call;
	sqs_request_call(t, NULL, 0, &call);
	aks_aws_fault fault;
	char *value = NULL;
	rc = queue_attribute(t, qi, "read the queue's depth", "ApproximateNumberOfMessages", &call,
	                     &value, &fault, err);
	if (rc != AKS_OK)
		return rc;
	char *end = NULL;
	errno = 0;
	unsigned long long visible =
	    value && *value >= '0' && *value <= '9' ? strtoull(value, &end, 10) : 0;
	if (!value)
		rc = host->error_set(err, AKS_EBROKER,
		                     SQS_NAME ": GetQueueAttributes of the %s queue answered no "
		                              "ApproximateNumberOfMessages",
		                     t->q[qi].name);
	else if (!end || *end || errno)
		rc = host->error_set(err, AKS_EBROKER,
		                     SQS_NAME ": the %s queue's ApproximateNumberOfMessages is "
		                              "'%.32s', not a count",
		                     t->q[qi].name, value);
	else
		*waiting = visible + __atomic_load_n(&t->q[qi].held, __ATOMIC_RELAXED);
	free(value);
	return rc;
}

static const aks_transport_ops sqs_ops = {
    AKS_TRANSPORT_OPS_INIT,
    .init = sqs_init,
    .fini = sqs_fini,
    .send = sqs_send,
    .consumer_open = sqs_consumer_open,
    .fetch = sqs_fetch,
    .ack = sqs_ack,
    .nack = sqs_nack,
    .dead_letter = sqs_dead_letter,
    .consumer_close = sqs_consumer_close,
    .in_progress = sqs_in_progress,
    .depth = sqs_depth,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_TRANSPORT, SQS_NAME, SQS_PLUGIN_VERSION, "Apache-2.0",
                  "queue transport over Amazon SQS FIFO queues (one message group per session)",
                  sqs_config_keys, &sqs_ops);
