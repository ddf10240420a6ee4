/*
 * plugins/nats/transport.c - the nats transport: NATS JetStream through the
 * official C client (libnats). Config, connection, send and depth; provisioning is
 * in provision.c, consumers in consumer.c. The design (one stream per queue,
 * `partitions` partition subjects each with one durable pull consumer with
 * MaxAckPending 1) is described in docs/plugins/nats.md.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nats_codec.h"
#include "nats_internal.h"

#ifndef NT_PLUGIN_VERSION
#error "NT_PLUGIN_VERSION must be defined (the package version)"
#endif

/* The keys and defaults of the original's `queue.nats` block (reference,
 * Appendix A). */
static const aks_config_key nt_config_keys[] = {
    AKS_CONFIG_KEY("url", AKS_CONFIG_STRING, false, "nats://localhost:4222",
                   "server URL; comma-separated for a cluster"),
    AKS_CONFIG_KEY("input_stream", AKS_CONFIG_STRING, false, "AGENT_REQUESTS",
                   "JetStream stream of the input (request) queue"),
    AKS_CONFIG_KEY("input_subject_prefix", AKS_CONFIG_STRING, false, "chat.req",
                   "subject prefix of the input queue's partitions"),
    AKS_CONFIG_KEY("output_stream", AKS_CONFIG_STRING, false, "AGENT_REPLIES",
                   "JetStream stream of the output (completion) queue"),
    AKS_CONFIG_KEY("output_subject_prefix", AKS_CONFIG_STRING, false, "chat.out",
                   "subject prefix of the output queue's partitions"),
    AKS_CONFIG_KEY("partitions", AKS_CONFIG_INT, false, "32",
                   "partition subjects per stream, one durable consumer each; caps messages "
                   "in flight; changing it re-maps groups"),
    AKS_CONFIG_KEY("ack_wait", AKS_CONFIG_DOUBLE, false, "300",
                   "seconds before an unacked message is redelivered; must exceed the "
                   "longest execution"),
    AKS_CONFIG_KEY("retry_backoff", AKS_CONFIG_DOUBLE, false, "2.0",
                   "nak delay in seconds when the host gives none"),
    AKS_CONFIG_KEY("duplicate_window", AKS_CONFIG_DOUBLE, false, "300",
                   "stream de-duplication window, seconds"),
    AKS_CONFIG_KEY("max_age", AKS_CONFIG_DOUBLE, false, "86400",
                   "unconsumed messages are discarded after this many seconds"),
    AKS_CONFIG_KEY("request_timeout", AKS_CONFIG_DOUBLE, false, "10",
                   "seconds any single NATS request may take"),
    AKS_CONFIG_KEY("auto_provision", AKS_CONFIG_BOOL, false, "false",
                   "create missing streams and consumers (development); otherwise a missing "
                   "one is an error"),
    AKS_CONFIG_KEY("token_env", AKS_CONFIG_STRING, false, NULL,
                   "environment variable holding the server's authentication token (read at "
                   "start)"),
    AKS_CONFIG_KEY("user", AKS_CONFIG_STRING, false, NULL,
                   "user name for the server's user/password authentication (with "
                   "password_env)"),
    AKS_CONFIG_KEY("password_env", AKS_CONFIG_STRING, false, NULL,
                   "environment variable holding that user's password (read at start)"),
    AKS_CONFIG_KEY("doorbell", AKS_CONFIG_BOOL, false, "true",
                   "after each send, publish a core-NATS hint on _AKS.bell.<stream> that wakes "
                   "idle consumers at once; off, they find messages by polling (up to 32 ms)"),
    AKS_CONFIG_END,
};

const char *nt_error_text(natsStatus s)
{
	natsStatus last = NATS_OK;
	const char *text = nats_GetLastError(&last);
	if (text && *text && last == s)
		return text;
	return natsStatus_GetText(s);
}

int64_t nt_request_ms(const aks_transport_impl *t)
{
	int64_t ms = (int64_t)(t->request_timeout * 1000.0);
	return ms < 1 ? 1 : ms;
}

int nt_queue_index(const char *queue)
{
	if (queue && strcmp(queue, AKS_QUEUE_INPUT) == 0)
		return NT_INPUT;
	if (queue && strcmp(queue, AKS_QUEUE_OUTPUT) == 0)
		return NT_OUTPUT;
	return -1;
}

void nt_durable_name(const struct nt_queue *q, unsigned p, char *buf, size_t size)
{
	snprintf(buf, size, "%s_p%u", q->stream, p);
}

/* Frees a string that may hold a secret, wiping it first. */
static void forget(char *secret)
{
	if (secret) {
		explicit_bzero(secret, strlen(secret));
		free(secret);
	}
}

/* The URL list with each URL's user information (user:password@, token@) shown as "***@":
 * what messages and logs may say. NULL on ENOMEM. */
static char *redact_urls(const char *list)
{
	size_t len = strlen(list), urls = 1;
	for (const char *c = list; *c; c++)
		urls += *c == ',';
	char *out = malloc(len + 3 * urls + 1); /* "***" may be longer than what it stands for */
	if (!out)
		return NULL;
	size_t o = 0;
	const char *p = list;
	while (*p) {
		const char *end = p + strcspn(p, ",");
		const char *scheme = strstr(p, "://");
		const char *host = scheme && scheme < end ? scheme + 3 : p;
		const char *auth_end = host + strcspn(host, "/,");
		const char *at = NULL;
		for (const char *q = host; q < auth_end; q++)
			if (*q == '@')
				at = q;
		if (at) {
			memcpy(out + o, p, (size_t)(host - p));
			o += (size_t)(host - p);
			memcpy(out + o, "***", 3);
			o += 3;
			p = at;
		}
		memcpy(out + o, p, (size_t)(end - p));
		o += (size_t)(end - p);
		p = end;
		if (*p == ',')
			out[o++] = *p++;
	}
	out[o] = '\0';
	return out;
}

/* ---- connection callbacks --------------------------------------------------------- */

/*
 * libnats runs connection callbacks on its own thread, later than the event,
 * possibly after natsConnection_Destroy(). Their closure is therefore not the
 * transport but this block, which lives until the closed callback (always the
 * last one of a connection) has run: fini waits for it, and if it does not
 * come in time leaves the block to that callback to free.
 */
struct nt_callbacks {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const aks_host_api *host;
	char *url;
	bool closing;  /* fini began: a disconnect is expected, not news */
	bool closed;   /* the closed callback ran */
	bool orphaned; /* fini gave up waiting: the closed callback frees */
};

static void callbacks_free(struct nt_callbacks *cb)
{
	if (!cb)
		return;
	pthread_mutex_destroy(&cb->mu);
	pthread_cond_destroy(&cb->cv);
	free(cb->url);
	free(cb);
}

static void on_disconnected(natsConnection *nc, void *closure)
{
	(void)nc;
	struct nt_callbacks *cb = closure;
	pthread_mutex_lock(&cb->mu);
	bool quiet = cb->closing;
	pthread_mutex_unlock(&cb->mu);
	if (!quiet)
		cb->host->log(AKS_LOG_WARNING, NT_NAME, "disconnected from %s; reconnecting",
		              cb->url);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
	struct nt_callbacks *cb = closure;
	char url[256] = "";
	natsConnection_GetConnectedUrl(nc, url, sizeof(url));
	cb->host->log(AKS_LOG_INFO, NT_NAME, "reconnected to %s", url);
}

static void on_closed(natsConnection *nc, void *closure)
{
	(void)nc;
	struct nt_callbacks *cb = closure;
	pthread_mutex_lock(&cb->mu);
	bool orphaned = cb->orphaned;
	cb->closed = true;
	pthread_cond_signal(&cb->cv);
	pthread_mutex_unlock(&cb->mu);
	if (orphaned)
		callbacks_free(cb);
}

/* Closes the connection and waits (a little) for its last callback. */
static void close_connection(aks_transport_impl *t)
{
	struct nt_callbacks *cb = t->cb;
	pthread_mutex_lock(&cb->mu);
	cb->closing = true;
	pthread_mutex_unlock(&cb->mu);
	natsConnection_Close(t->nc);
	natsConnection_Destroy(t->nc);
	t->nc = NULL;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&cb->mu);
	while (!cb->closed)
		if (pthread_cond_timedwait(&cb->cv, &cb->mu, &until) != 0)
			break;
	bool closed = cb->closed;
	cb->orphaned = !closed;
	pthread_mutex_unlock(&cb->mu);
	if (closed)
		callbacks_free(cb);
	t->cb = NULL;
}

/* ---- config ---------------------------------------------------------------- */

static void nt_free(aks_transport_impl *t)
{
	if (!t)
		return;
	/* Before the connection closes: ends the bells' subscriptions and waits
	 * for their last callbacks, which use the bells' memory. */
	if (t->nc)
		nt_bell_fini(t);
	if (t->js)
		jsCtx_Destroy(t->js);
	if (t->nc)
		close_connection(t);
	/* No connection: no callback ever ran or will. */
	callbacks_free(t->cb);
	natsOptions_Destroy(t->opts);
	for (int i = 0; i < NT_QUEUES; i++) {
		free(t->q[i].stream);
		free(t->q[i].prefix);
	}
	free(t->url);
	forget(t->connect_url);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int copy_string(aks_transport_impl *t, const aks_config *cfg, const char *key, char **out,
                       aks_error **err)
{
	const char *v = NULL;
	if (t->host->config_string(cfg, key, &v) != AKS_OK || !v || !*v)
		return t->host->error_set(err, AKS_ECONFIG, NT_NAME ": '%s' must be set", key);
	if (!(*out = strdup(v)))
		return t->host->error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

/* Stream and durable names end up in subjects: no dots, wildcards or spaces. */
static bool valid_name(const char *s)
{
	for (; *s; s++)
		if (*s == '.' || *s == '*' || *s == '>' || *s == ' ' || *s == '\t' || *s < 0x21 ||
		    *s == 0x7f)
			return false;
	return true;
}

/* A subject prefix: dot-separated non-empty tokens, no wildcards or spaces. */
static bool valid_prefix(const char *s)
{
	if (!*s || *s == '.' || s[strlen(s) - 1] == '.' || strstr(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '*' || *s == '>' || *(const unsigned char *)s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int read_config(aks_transport_impl *t, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *h = t->host;
	int64_t partitions = 0;
	int rc;
	if ((rc = copy_string(t, cfg, "url", &t->connect_url, err)) < 0 ||
	    (rc = copy_string(t, cfg, "input_stream", &t->q[NT_INPUT].stream, err)) < 0 ||
	    (rc = copy_string(t, cfg, "input_subject_prefix", &t->q[NT_INPUT].prefix, err)) < 0 ||
	    (rc = copy_string(t, cfg, "output_stream", &t->q[NT_OUTPUT].stream, err)) < 0 ||
	    (rc = copy_string(t, cfg, "output_subject_prefix", &t->q[NT_OUTPUT].prefix, err)) < 0)
		return rc;
	if (h->config_int(cfg, "partitions", &partitions) != AKS_OK ||
	    h->config_double(cfg, "ack_wait", &t->ack_wait) != AKS_OK ||
	    h->config_double(cfg, "retry_backoff", &t->retry_backoff) != AKS_OK ||
	    h->config_double(cfg, "duplicate_window", &t->duplicate_window) != AKS_OK ||
	    h->config_double(cfg, "max_age", &t->max_age) != AKS_OK ||
	    h->config_double(cfg, "request_timeout", &t->request_timeout) != AKS_OK ||
	    h->config_bool(cfg, "auto_provision", &t->auto_provision) != AKS_OK ||
	    h->config_bool(cfg, "doorbell", &t->doorbell) != AKS_OK)
		return h->error_set(err, AKS_ECONFIG, NT_NAME ": cannot read the config block");
	if (!(t->url = redact_urls(t->connect_url)))
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	if (partitions < 1 || partitions > NT_MAX_PARTITIONS)
		return h->error_set(err, AKS_ECONFIG,
		                    NT_NAME ": partitions must be 1..%d, not %lld",
		                    NT_MAX_PARTITIONS, (long long)partitions);
	t->partitions = (unsigned)partitions;
	const struct {
		const char *name;
		double v, min;
	} positive[] = {{"ack_wait", t->ack_wait, 0.001},
	                {"request_timeout", t->request_timeout, 0.001},
	                {"duplicate_window", t->duplicate_window, 0},
	                {"max_age", t->max_age, 0},
	                {"retry_backoff", t->retry_backoff, 0}};
	for (size_t i = 0; i < sizeof(positive) / sizeof(positive[0]); i++)
		if (!(positive[i].v >= positive[i].min) || positive[i].v > 1e9)
			return h->error_set(err, AKS_ECONFIG,
			                    NT_NAME ": %s must be a number of seconds "
			                            ">= %g, not %g",
			                    positive[i].name, positive[i].min, positive[i].v);
	for (int i = 0; i < NT_QUEUES; i++) {
		if (!valid_name(t->q[i].stream))
			return h->error_set(err, AKS_ECONFIG,
			                    NT_NAME
			                    ": stream name '%s' may not hold '.', '*', '>' or "
			                    "spaces",
			                    t->q[i].stream);
		if (!valid_prefix(t->q[i].prefix))
			return h->error_set(err, AKS_ECONFIG,
			                    NT_NAME ": subject prefix '%s' must be dot-separated "
			                            "tokens without wildcards or spaces",
			                    t->q[i].prefix);
	}
	if (strcmp(t->q[0].stream, t->q[1].stream) == 0 ||
	    strcmp(t->q[0].prefix, t->q[1].prefix) == 0)
		return h->error_set(err, AKS_ECONFIG,
		                    NT_NAME
		                    ": the input and output queues need distinct streams and "
		                    "subject prefixes");
	return AKS_OK;
}

/* ---- connection --------------------------------------------------------------- */

/* Splits the comma-separated URL list (blanks around items ignored). */
static int split_urls(const char *list, char ***out, int *count)
{
	char *copy = strdup(list);
	if (!copy)
		return -1;
	int cap = 1;
	for (const char *p = list; *p; p++)
		cap += *p == ',';
	char **urls = calloc((size_t)cap, sizeof(*urls));
	int n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); urls && tok;
	     tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		size_t len = strlen(tok);
		while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
			tok[--len] = '\0';
		if (len && !(urls[n++] = strdup(tok)))
			n = -1;
		if (n < 0)
			break;
	}
	explicit_bzero(copy, strlen(list)); /* the URLs may hold a password */
	free(copy);
	if (!urls || n <= 0) {
		for (int i = 0; urls && i < cap; i++)
			free(urls[i]);
		free(urls);
		return -1;
	}
	*out = urls;
	*count = n;
	return 0;
}

/* The secret an environment variable named by config key `key` holds: NULL (AKS_OK) when
 * the key is not set; AKS_ECONFIG when the variable is unset or empty. */
static int secret_from_env(const aks_transport_impl *t, const aks_config *cfg, const char *key,
                           const char **out, aks_error **err)
{
	const char *name = NULL;
	*out = NULL;
	if (t->host->config_string(cfg, key, &name) != AKS_OK || !name)
		return AKS_OK;
	const char *v = getenv(name);
	if (!v || !*v)
		return t->host->error_set(err, AKS_ECONFIG,
		                          NT_NAME ".%s: the environment variable %s is not set",
		                          key, name);
	*out = v;
	return AKS_OK;
}

/* token_env, or user with password_env: the server's authentication, if it asks for one.
 * (Credentials in the URL work too; messages never show them.) */
static natsStatus set_auth(aks_transport_impl *t, const aks_config *cfg, int *rc, aks_error **err)
{
	const aks_host_api *h = t->host;
	const char *user = NULL, *token = NULL, *password = NULL;
	h->config_string(cfg, "user", &user);
	if ((*rc = secret_from_env(t, cfg, "token_env", &token, err)) < 0 ||
	    (*rc = secret_from_env(t, cfg, "password_env", &password, err)) < 0)
		return NATS_ERR;
	if (token && (user || password)) {
		*rc = h->error_set(err, AKS_ECONFIG,
		                   NT_NAME ": token_env, or user with password_env: not both");
		return NATS_ERR;
	}
	if (!user != !password) {
		*rc = h->error_set(err, AKS_ECONFIG, NT_NAME ": user and password_env go together");
		return NATS_ERR;
	}
	if (token)
		return natsOptions_SetToken(t->opts, token);
	if (user)
		return natsOptions_SetUserInfo(t->opts, user, password);
	return NATS_OK;
}

static int connect_server(aks_transport_impl *t, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *h = t->host;
	char **urls = NULL;
	int count = 0;
	if (split_urls(t->connect_url, &urls, &count) < 0)
		return h->error_set(err, AKS_ECONFIG, NT_NAME ": url '%s' names no server", t->url);
	forget(t->connect_url);
	t->connect_url = NULL;
	t->cb = calloc(1, sizeof(*t->cb));
	if (!t->cb || !(t->cb->url = strdup(t->url))) {
		for (int i = 0; i < count; i++)
			forget(urls[i]);
		free(urls);
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&t->cb->mu, NULL);
	pthread_cond_init(&t->cb->cv, NULL);
	t->cb->host = h;
	natsStatus s = natsOptions_Create(&t->opts);
	if (s == NATS_OK)
		s = natsOptions_SetServers(t->opts, (const char **)urls, count);
	for (int i = 0; i < count; i++)
		forget(urls[i]);
	free(urls);
	int rc = AKS_OK;
	if (s == NATS_OK)
		s = set_auth(t, cfg, &rc, err);
	if (rc < 0)
		return rc;
	if (s == NATS_OK)
		s = natsOptions_SetName(t->opts, "aksandbox");
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(t->opts, nt_request_ms(t));
	/* Reconnect for ever: a worker outlives server restarts. Publishes made
	 * while reconnecting are buffered and flushed on reconnect; their PubAck
	 * wait still bounds each send. */
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(t->opts, -1);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectWait(t->opts, 250);
	if (s == NATS_OK)
		s = natsOptions_SetPingInterval(t->opts, 10000);
	if (s == NATS_OK)
		s = natsOptions_SetDisconnectedCB(t->opts, on_disconnected, t->cb);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectedCB(t->opts, on_reconnected, t->cb);
	if (s == NATS_OK)
		s = natsOptions_SetClosedCB(t->opts, on_closed, t->cb);
	if (s != NATS_OK)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot set up the connection to %s: %s", t->url,
		                    nt_error_text(s));
	s = natsConnection_Connect(&t->nc, t->opts);
	if (s != NATS_OK) {
		t->nc = NULL;
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot connect to the NATS server at %s: %s", t->url,
		                    nt_error_text(s));
	}
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = nt_request_ms(t);
	s = natsConnection_JetStream(&t->js, t->nc, &jo);
	if (s != NATS_OK)
		return h->error_set(err, AKS_EBROKER, NT_NAME ": no JetStream context on %s: %s",
		                    t->url, nt_error_text(s));
	return AKS_OK;
}

static int nt_init(const aks_host_api *host, const aks_config *config, aks_transport_impl **out,
                   aks_error **err)
{
	aks_transport_impl *t = calloc(1, sizeof(*t));
	if (!t)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	t->host = host;
	pthread_mutex_init(&t->lock, NULL);
	t->q[NT_INPUT].name = AKS_QUEUE_INPUT;
	t->q[NT_OUTPUT].name = AKS_QUEUE_OUTPUT;
	int rc = read_config(t, config, err);
	if (rc == AKS_OK)
		rc = connect_server(t, config, err);
	if (rc == AKS_OK)
		rc = nt_ensure_streams(t, err);
	if (rc == AKS_OK)
		nt_bell_init(t);
	if (rc < 0) {
		nt_free(t);
		return rc;
	}
	*out = t;
	return AKS_OK;
}

static void nt_fini(aks_transport_impl *t)
{
	nt_free(t);
}

/* ---- send ------------------------------------------------------------------------ */

static unsigned pick_partition(aks_transport_impl *t, const aks_message *msg)
{
	if (msg->group_id)
		return aks_nats_partition(msg->group_id, t->partitions);
	/* No group: no order to keep. The dedup id spreads them deterministically
	 * (a resend lands where the first copy went); otherwise round-robin. */
	if (msg->dedup_id)
		return aks_nats_partition(msg->dedup_id, t->partitions);
	return __atomic_fetch_add(&t->rr, 1, __ATOMIC_RELAXED) % t->partitions;
}

static natsStatus set_escaped(natsMsg *m, const char *name, const char *value)
{
	char *v = aks_nats_escape_value(value);
	if (!v)
		return NATS_NO_MEMORY;
	natsStatus s = natsMsgHeader_Set(m, name, v);
	free(v);
	return s;
}

/* Body, group, dedup id and attributes onto a new NATS message. */
static natsStatus build_message(aks_transport_impl *t, const char *subject, const aks_message *msg,
                                natsMsg **out)
{
	natsMsg *m = NULL;
	natsStatus s = natsMsg_Create(&m, subject, NULL, msg->body, (int)msg->body_len);
	if (s == NATS_OK && msg->group_id)
		s = set_escaped(m, AKS_NATS_HDR_GROUP, msg->group_id);
	if (s == NATS_OK && msg->dedup_id)
		s = set_escaped(m, AKS_NATS_HDR_DEDUP, msg->dedup_id);
	for (const char *const *a = msg->attributes; s == NATS_OK && a && a[0] && a[1]; a += 2) {
		char *key = aks_nats_escape_key(a[0]);
		size_t len = key ? strlen(AKS_NATS_ATTR_PREFIX) + strlen(key) + 1 : 0;
		char *name = key ? malloc(len) : NULL;
		if (name) {
			snprintf(name, len, "%s%s", AKS_NATS_ATTR_PREFIX, key);
			s = set_escaped(m, name, a[1]);
		} else {
			s = NATS_NO_MEMORY;
		}
		free(name);
		free(key);
	}
	(void)t;
	if (s != NATS_OK) {
		natsMsg_Destroy(m);
		return s;
	}
	*out = m;
	return NATS_OK;
}

static int nt_send(aks_transport_impl *t, const char *queue, const aks_message *msg,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *h = t->host;
	int qi = nt_queue_index(queue);
	if (qi < 0)
		return h->error_set(err, AKS_EINVAL, NT_NAME ": unknown queue '%s'",
		                    queue ? queue : "(null)");
	if (!msg || (!msg->body && msg->body_len) || msg->body_len > INT32_MAX)
		return h->error_set(err, AKS_EINVAL, NT_NAME ": send: bad message");
	if (call && h->cancelled(call))
		return h->error_set(err, AKS_ECANCELLED, NT_NAME ": send cancelled");
	int64_t wait = nt_request_ms(t);
	bool deadline_bound = false;
	if (call && call->deadline_ms > 0) {
		int64_t left = call->deadline_ms - h->now_ms();
		if (left <= 0)
			return h->error_set(err, AKS_ETIMEOUT,
			                    NT_NAME ": send: the deadline passed");
		if (left < wait) {
			wait = left;
			deadline_bound = true;
		}
	}
	struct nt_queue *q = &t->q[qi];
	char subject[512];
	snprintf(subject, sizeof(subject), "%s.%u", q->prefix, pick_partition(t, msg));

	natsMsg *m = NULL;
	natsStatus s = build_message(t, subject, msg, &m);
	if (s != NATS_OK)
		return h->error_set(err, s == NATS_NO_MEMORY ? AKS_ENOMEM : AKS_EBROKER,
		                    NT_NAME ": cannot build the message: %s", nt_error_text(s));
	char *msg_id = msg->dedup_id ? aks_nats_escape_value(msg->dedup_id) : NULL;
	if (msg->dedup_id && !msg_id) {
		natsMsg_Destroy(m);
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	}
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = wait;
	po.MsgId = msg_id;           /* Nats-Msg-Id: the stream drops a repeat in its window */
	po.ExpectStream = q->stream; /* never land in some other stream by accident */
	jsPubAck *pa = NULL;
	jsErrCode jerr = 0;
	s = js_PublishMsg(&pa, t->js, m, &po, &jerr);
	natsMsg_Destroy(m);
	free(msg_id);
	if (s == NATS_OK) {
		/* Stored: wake the queue's idle consumers (a hint, see bell.c). */
		nt_bell_ring(t, q);
		if (pa && pa->Duplicate)
			h->log(AKS_LOG_DEBUG, NT_NAME,
			       "duplicate of dedup id '%s' dropped by stream %s",
			       msg->dedup_id ? msg->dedup_id : "", q->stream);
		jsPubAck_Destroy(pa);
		return AKS_OK;
	}
	const char *why = nt_error_text(s);
	bool connected = natsConnection_Status(t->nc) == NATS_CONN_STATUS_CONNECTED;
	if (s == NATS_NO_RESPONDERS)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME
		                    ": no JetStream stream captures subject '%s' on %s (does "
		                    "stream %s exist with subjects '%s.>'? see auto_provision)",
		                    subject, t->url, q->stream, q->prefix);
	if (s == NATS_TIMEOUT && deadline_bound)
		return h->error_set(
		    err, AKS_ETIMEOUT,
		    NT_NAME ": no publish acknowledgement from %s before the deadline", t->url);
	return h->error_set(err, AKS_EBROKER, NT_NAME ": publish to '%s' on %s failed: %s%s",
	                    subject, t->url, why,
	                    connected ? "" : " (not connected: the server is unreachable)");
}

/* ---- depth ---------------------------------------------------------------------- */

/* Whether `name` is the durable of one of the queue's partitions: the partition its trailing
 * digits give is named so. */
static bool partition_durable(const aks_transport_impl *t, const struct nt_queue *q,
                              const char *name)
{
	size_t len = name ? strlen(name) : 0, digits = len;
	while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9')
		digits--;
	unsigned long p = digits < len ? strtoul(name + digits, NULL, 10) : ULONG_MAX;
	if (p >= t->partitions)
		return false;
	char durable[300];
	nt_durable_name(q, (unsigned)p, durable, sizeof(durable));
	return strcmp(durable, name) == 0;
}

/*
 * What waits on a queue: the sum of its partitions' durables' NumPending, the messages stored
 * and not delivered yet (those queued behind their partition's message in flight included).
 * A message handed back (nacked, or its ack wait ran out) stays ack-pending on its durable
 * until it is delivered again, and a durable's info does not tell it from one in flight
 * (NumRedelivered counts messages delivered more than once and unacked, in flight or not):
 * it is not counted, so the depth may be short by one per partition until the next pull
 * takes it. One request lists the stream's durables.
 */
static int nt_depth(aks_transport_impl *t, const char *queue, uint64_t *waiting, aks_error **err)
{
	const aks_host_api *h = t->host;
	int qi = nt_queue_index(queue);
	if (qi < 0)
		return h->error_set(err, AKS_EINVAL, NT_NAME ": unknown queue '%s'",
		                    queue ? queue : "(null)");
	struct nt_queue *q = &t->q[qi];
	int rc = nt_ensure_consumers(t, q, err);
	if (rc < 0)
		return rc;
	if (natsConnection_Status(t->nc) != NATS_CONN_STATUS_CONNECTED)
		return h->error_set(
		    err, AKS_EBROKER,
		    NT_NAME ": not connected to the NATS server at %s (reconnecting)", t->url);
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = nt_request_ms(t);
	jsConsumerInfoList *list = NULL;
	jsErrCode code = 0;
	natsStatus s = js_Consumers(&list, t->js, q->stream, &jo, &code);
	if (s != NATS_OK && s != NATS_NOT_FOUND)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot list the consumers of stream %s on %s: %s",
		                    q->stream, t->url, nt_error_text(s));
	uint64_t n = 0;
	unsigned found = 0;
	for (int i = 0; list && i < list->Count; i++) {
		const jsConsumerInfo *ci = list->List[i];
		if (ci && partition_durable(t, q, ci->Name)) {
			n += ci->NumPending;
			found++;
		}
	}
	jsConsumerInfoList_Destroy(list);
	if (found != t->partitions)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME
		                    ": stream %s on %s has %u of the %u durable consumers of its "
		                    "partitions (%s_p0 to %s_p%u): the missing ones' messages "
		                    "cannot be counted",
		                    q->stream, t->url, found, t->partitions, q->stream, q->stream,
		                    t->partitions - 1);
	*waiting = n;
	return AKS_OK;
}

static const aks_transport_ops nt_ops = {
    .struct_version = AKS_TRANSPORT_OPS_VERSION,
    .struct_size = sizeof(aks_transport_ops),
    .init = nt_init,
    .fini = nt_fini,
    .send = nt_send,
    .consumer_open = nt_consumer_open,
    .fetch = nt_fetch,
    .ack = nt_ack,
    .nack = nt_nack,
    .dead_letter = nt_dead_letter,
    .consumer_close = nt_consumer_close,
    .in_progress = nt_in_progress,
    .depth = nt_depth,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_TRANSPORT, NT_NAME, NT_PLUGIN_VERSION, "Apache-2.0",
                  "NATS JetStream transport (libnats): durable streams, per-group FIFO with one "
                  "message in flight per group",
                  nt_config_keys, &nt_ops);
