/*
 * core/mcp/mcp_server.c - the MCP server's state and dispatch.
 *
 * One thread (the caller of aks__mcp_server_handle_line, the read loop)
 * parses and answers every message itself, except tools/call: each of those
 * runs on a thread of its own with its own cancel token, so the server keeps
 * reading (pings, lists, cancellations, other calls) while programs run.
 * The number of calls in flight is bounded; past the bound a call is refused
 * at once with a JSON-RPC error rather than queued.
 *
 * Output is one whole line per message, written under a lock.
 *
 * A tools/call whose request carries `_meta.progressToken` gets the program's output while
 * it runs as `notifications/progress` (see "progress" below), bounded in rate and in total
 * size, and all of them before the call's response.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp.h"

struct progress;

struct call {
	bool used;      /* the slot holds a call (running or finished, not joined) */
	bool done;      /* answered or silenced: no longer in flight (see call_main); join it */
	bool cancelled; /* notifications/cancelled (or shutdown): send nothing */
	bool structured;
	bool modern;
	pthread_t thread;
	struct json_object *id; /* a copy of the request's id */
	char *tool;
	char *args;
	aks_cancel *cancel;
	struct progress *progress; /* the request had a progressToken; else NULL */
	void *route;               /* the transport's, for every message of this call */
	char **attributes;         /* the request's, for the resolver; NULL: none */
	aks__mcp_server *srv;
};

struct aks__mcp_server {
	aks_runtime *rt;
	const aks_settings *settings;
	char *conversation;
	char *agent;
	aks__mcp_write_fn write;
	aks__mcp_route_done_fn route_done;
	void *write_data;

	pthread_mutex_t lock; /* the call slots */
	struct call *calls;
	size_t max_calls;
	double wait_timeout;   /* a call without a progressToken: seconds before it is a task */
	unsigned heartbeat_ms; /* a call with one: "still running" after this much silence */

	pthread_mutex_t write_lock; /* one line at a time; taken after `lock` */
	bool peer_gone;

	/* The read thread's own state. */
	void *route;                   /* of the message being handled */
	const char *const *attributes; /* of the message being handled (the resolver's) */
	bool route_taken;              /* a call thread will end it */
	bool initialized;              /* a legacy initialize was answered */
	const char *version;           /* the negotiated legacy revision */
	bool offered;                  /* the agents filter lets this agent see the tools */
	char *instructions;
};

/* Diagnostics go to stderr only: stdout carries protocol messages. */
void aks__mcp_vlog(const char *fmt, va_list ap)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "aksandbox: mcp: ");
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	while (len > 0 && line[len - 1] == '\n')
		len--;
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void aks__mcp_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	aks__mcp_vlog(fmt, ap);
	va_end(ap);
}
#define mcp_log aks__mcp_log

/* ---- output -------------------------------------------------------------------- */

/* Writes with the write lock already held. */
static void send_locked(aks__mcp_server *s, void *route, struct json_object *msg)
{
	size_t len = 0;
	char *line = msg ? aks__mcp_serialize(msg, &len) : NULL;
	if (!line) {
		mcp_log("out of memory: a message was not sent");
		return;
	}
	if (!s->peer_gone && s->write(s->write_data, route, line, len) < 0) {
		s->peer_gone = true;
		mcp_log("cannot write to the client; stopping");
	}
	free(line);
}

/* Sends msg (the read thread's answer to the message it handles) and releases it. */
static void send_msg(aks__mcp_server *s, struct json_object *msg)
{
	pthread_mutex_lock(&s->write_lock);
	send_locked(s, s->route, msg);
	pthread_mutex_unlock(&s->write_lock);
	json_object_put(msg);
}

static void send_error(aks__mcp_server *s, struct json_object *id, int code,
                       struct json_object *data, const char *fmt, ...) AKS_PRINTF(5, 6);
static void send_error(aks__mcp_server *s, struct json_object *id, int code,
                       struct json_object *data, const char *fmt, ...)
{
	char message[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	send_msg(s, aks__mcp_error(id, code, message, data));
}

bool aks__mcp_server_peer_gone(aks__mcp_server *s)
{
	pthread_mutex_lock(&s->write_lock);
	bool gone = s->peer_gone;
	pthread_mutex_unlock(&s->write_lock);
	return gone;
}

/* ---- results ------------------------------------------------------------------- */

static struct json_object *server_info(void)
{
	struct json_object *info = json_object_new_object();
	json_object_object_add(info, "name", json_object_new_string("aksandbox"));
	json_object_object_add(info, "title", json_object_new_string("aksandbox sandboxes"));
	json_object_object_add(info, "version", json_object_new_string(aks_version()));
	return info;
}

/* 2026-07-28 results: resultType, and the server's identity in _meta. */
static struct json_object *modern_result(struct json_object *result)
{
	struct json_object *meta = json_object_new_object();
	json_object_object_add(meta, AKS_MCP_META_SERVER_INFO, server_info());
	json_object_object_add(result, "resultType", json_object_new_string("complete"));
	json_object_object_add(result, "_meta", meta);
	return result;
}

/* The tools/call result: the tool's JSON text exactly as the runtime
 * returned it, and isError for the tools' error shape ({"error": ...} at the
 * top level; a finished task's nested result.error is data). structuredContent
 * is the result's shape that outputSchema describes, so an error result has
 * none: it is in the text (clients check structuredContent against the schema
 * whenever it is present). */
static struct json_object *call_result(const char *json, bool structured, bool modern)
{
	struct json_object *result = json_object_new_object(), *content = json_object_new_array();
	struct json_object *text = json_object_new_object();
	json_object_object_add(text, "type", json_object_new_string("text"));
	json_object_object_add(text, "text", json_object_new_string(json));
	json_object_array_add(content, text);
	json_object_object_add(result, "content", content);
	struct json_object *parsed = json_tokener_parse(json);
	bool is_error = parsed && json_object_is_type(parsed, json_type_object) &&
	                json_object_object_get_ex(parsed, "error", NULL);
	if (structured && !is_error && parsed && json_object_is_type(parsed, json_type_object))
		json_object_object_add(result, "structuredContent", parsed);
	else
		json_object_put(parsed);
	json_object_object_add(result, "isError", json_object_new_boolean(is_error));
	return modern ? modern_result(result) : result;
}

/* ---- progress: output while a call runs ------------------------------------------------- */

/*
 * The output the runtime passes to the call's on_output callback is coalesced into
 * notifications/progress: one is sent when AKS_MCP_PROGRESS_CHUNK bytes of text have
 * gathered, or AKS_MCP_PROGRESS_INTERVAL_MS after the first byte that has not been sent
 * (a flusher thread sees to that). `progress` is the number of output bytes so far (both
 * streams), so it grows with every notification; `message` is the text, each run of one
 * stream's bytes preceded by "[stdout] " or "[stderr] ", as valid UTF-8 (a character cut
 * between chunks is joined up, invalid bytes become U+FFFD). Once AKS_MCP_PROGRESS_BUDGET
 * bytes of text have been sent, the text stops and a notification saying "[output
 * continues: N bytes so far]" goes out at most every AKS_MCP_PROGRESS_STATUS_MS: the whole
 * output is in the result. Memory per call is one chunk.
 *
 * Locks: progress.mu, then the server's lock, then its write lock (as call_main takes
 * them), so a cancelled request gets no more notifications and lines never interleave.
 */
#define AKS_MCP_PROGRESS_CHUNK       ((size_t)16 << 10)
#define AKS_MCP_PROGRESS_INTERVAL_MS 150
#define AKS_MCP_PROGRESS_BUDGET      ((uint64_t)1 << 20)
#define AKS_MCP_PROGRESS_STATUS_MS   1000

/* The least time between the last notification and the response. Some clients dispatch
 * notifications later than responses that came in the same read (the TypeScript SDK 1.32's
 * Protocol runs notification handlers in a microtask, a response at once), then find the
 * request gone and report its token as unknown; a pause puts them in separate reads. */
#define AKS_MCP_PROGRESS_SETTLE_MS 100

#define MARKER_LEN 9 /* "[stdout] " */

struct progress {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t flusher;
	bool flusher_started, stop;
	struct json_object *token; /* a copy of the request's progressToken */
	char buf[AKS_MCP_PROGRESS_CHUNK];
	size_t len;
	int buf_stream;           /* the stream of the text at the end of buf; 0: none */
	unsigned char part[2][4]; /* per stream: a UTF-8 character begun, not finished */
	size_t part_len[2];
	uint64_t total;     /* output bytes so far */
	uint64_t beats;     /* "still running" notifications so far */
	uint64_t reported;  /* `progress` of the last notification */
	uint64_t text_sent; /* message bytes sent */
	bool over;          /* past the budget: status only */
	int64_t last_ms;    /* when the last notification went */
	int64_t pending_ms; /* when the oldest unsent output came; -1: none */
	int64_t started_ms; /* when the run began */
	int64_t heartbeat_ms;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* `progress`: the output bytes so far and one for each "still running" notification, so it
 * grows with every notification, as MCP requires. */
static uint64_t progress_value(const struct progress *p)
{
	return p->total + p->beats;
}

/* Sends one notification with this message (p->mu held). */
static void progress_notify_locked(struct call *c, const char *text, size_t len)
{
	struct progress *p = c->progress;
	aks__mcp_server *s = c->srv;
	struct json_object *params = json_object_new_object(), *tok = NULL;
	if (json_object_deep_copy(p->token, &tok, NULL) != 0)
		tok = NULL;
	json_object_object_add(params, "progressToken", tok);
	json_object_object_add(params, "progress",
	                       json_object_new_int64((int64_t)progress_value(p)));
	json_object_object_add(params, "message", json_object_new_string_len(text, (int)len));
	struct json_object *msg = json_object_new_object();
	json_object_object_add(msg, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(msg, "method", json_object_new_string("notifications/progress"));
	json_object_object_add(msg, "params", params);
	/* As call_main decides on its response: a cancelled request hears nothing more. */
	pthread_mutex_lock(&s->lock);
	if (!c->cancelled) {
		pthread_mutex_lock(&s->write_lock);
		pthread_mutex_unlock(&s->lock);
		send_locked(s, c->route, msg);
		pthread_mutex_unlock(&s->write_lock);
	} else {
		pthread_mutex_unlock(&s->lock);
	}
	json_object_put(msg);
	p->reported = progress_value(p);
	p->last_ms = now_ms();
}

/* Sends one notification for what has gathered (p->mu held); nothing when no output came
 * since the last one (progress must increase). */
static void progress_send_locked(struct call *c)
{
	struct progress *p = c->progress;
	if (progress_value(p) <= p->reported)
		return;
	char status[96];
	const char *text = p->buf;
	size_t len = p->len;
	if (len == 0) {
		if (!p->over)
			return; /* only an unfinished character so far */
		snprintf(status, sizeof(status), "[output continues: %llu bytes so far]",
		         (unsigned long long)p->total);
		text = status;
		len = strlen(status);
	}
	progress_notify_locked(c, text, len);
	if (text == p->buf)
		p->text_sent += len;
	p->len = 0;
	p->buf_stream = 0; /* every message starts with its stream's marker */
	p->pending_ms = -1;
}

/* A run that has been silent for a heartbeat: says it still runs (p->mu held), so a client
 * that resets its request timeout on progress keeps waiting. */
static void progress_heartbeat_locked(struct call *c)
{
	struct progress *p = c->progress;
	char status[64];
	snprintf(status, sizeof(status), "[still running: %llds]",
	         (long long)((now_ms() - p->started_ms) / 1000));
	p->beats++;
	progress_notify_locked(c, status, strlen(status));
}

/* Appends one character (or U+FFFD) of `stream` to the text (p->mu held). */
static void progress_put(struct call *c, int stream, const unsigned char *ch, size_t n)
{
	struct progress *p = c->progress;
	size_t need = n + (p->buf_stream != stream ? MARKER_LEN : 0);
	if (p->text_sent + p->len + need > AKS_MCP_PROGRESS_BUDGET) {
		progress_send_locked(c); /* the last text that fits */
		p->over = true;
		return;
	}
	if (p->len + need > sizeof(p->buf)) {
		progress_send_locked(c);
		if (p->len + need > sizeof(p->buf)) { /* not sent (cannot happen): drop it */
			p->len = 0;
			p->buf_stream = 0;
		}
	}
	if (p->buf_stream != stream) {
		memcpy(p->buf + p->len, stream == AKS_STREAM_STDOUT ? "[stdout] " : "[stderr] ",
		       MARKER_LEN);
		p->len += MARKER_LEN;
		p->buf_stream = stream;
	}
	memcpy(p->buf + p->len, ch, n);
	p->len += n;
}

/* The length of the UTF-8 sequence lead byte b starts, 0 when b cannot start one. */
static size_t utf8_len(unsigned char b)
{
	return b < 0x80                 ? 1
	       : b >= 0xc2 && b <= 0xdf ? 2
	       : b >= 0xe0 && b <= 0xef ? 3
	       : b >= 0xf0 && b <= 0xf4 ? 4
	                                : 0;
}

/* Whether s[0..n) is one valid character (no overlong form, no surrogate, <= U+10FFFF). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return false;
	if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f)))
		return false;
	if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f)))
		return false;
	return true;
}

static const unsigned char replacement[] = {0xef, 0xbf, 0xbd};

/*
 * Turns a stream's bytes into characters of the text (p->mu held), keeping a character cut
 * at the end of the chunk for the next one. p->total counts the bytes as they are taken, after
 * the character they make is in the text: a notification sent from inside (the text is full)
 * then reports exactly the bytes it carries, and `progress` grows with each one, also when
 * one chunk fills several.
 */
static void progress_text(struct call *c, int stream, const unsigned char *d, size_t len)
{
	struct progress *p = c->progress;
	int k = stream == AKS_STREAM_STDOUT ? 0 : 1;
	size_t i = 0;
	while (i < len && !p->over) {
		size_t from = i;
		if (p->part_len[k] > 0) {
			/* Finish the character begun in an earlier chunk. */
			size_t want = utf8_len(p->part[k][0]);
			while (p->part_len[k] < want && i < len && (d[i] & 0xc0) == 0x80)
				p->part[k][p->part_len[k]++] = d[i++];
			if (p->part_len[k] < want && i == len) {
				p->total += i - from; /* still unfinished: wait for more */
				break;
			}
			if (p->part_len[k] == want && utf8_valid(p->part[k], want))
				progress_put(c, stream, p->part[k], want);
			else
				progress_put(c, stream, replacement, sizeof(replacement));
			p->part_len[k] = 0;
			p->total += i - from;
			continue;
		}
		size_t n = utf8_len(d[i]);
		if (n > 1 && i + n > len) {
			memcpy(p->part[k], d + i, len - i); /* cut by the chunk's end */
			p->part_len[k] = len - i;
			i = len;
		} else if (n == 1 || (n > 1 && utf8_valid(d + i, n))) {
			progress_put(c, stream, d + i, n);
			i += n;
		} else {
			progress_put(c, stream, replacement, sizeof(replacement));
			i++;
		}
		p->total += i - from;
	}
	p->total += len - i; /* past the budget: counted, not kept */
}

/* aks_tool_context.on_output: on a library or plugin thread, while the call runs. */
static void progress_output(void *ud, const char *tool, int stream, const void *data, size_t len)
{
	(void)tool;
	struct call *c = ud;
	struct progress *p = c->progress;
	if (stream != AKS_STREAM_STDOUT && stream != AKS_STREAM_STDERR)
		return;
	pthread_mutex_lock(&p->mu);
	/* Past the budget only the count moves: 200 MiB of output costs no more work. */
	if (p->over)
		p->total += len;
	else
		progress_text(c, stream, data, len);
	/* Something unsent (text, or past the budget a count): the flusher's clock starts. */
	if (p->pending_ms < 0 && (p->len > 0 || p->over)) {
		p->pending_ms = now_ms();
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
}

/* Sends what has waited long enough: text after the interval, the status after its own. */
static void *progress_flusher(void *arg)
{
	struct call *c = arg;
	struct progress *p = c->progress;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		int64_t due, now = now_ms();
		if (p->pending_ms < 0) {
			/* Silence: a heartbeat once it has lasted as long since the last word. */
			int64_t last = p->last_ms > p->started_ms ? p->last_ms : p->started_ms;
			due = last + p->heartbeat_ms;
			if (now >= due) {
				progress_heartbeat_locked(c);
				continue;
			}
		} else {
			due = p->over ? p->last_ms + AKS_MCP_PROGRESS_STATUS_MS
			              : p->pending_ms + AKS_MCP_PROGRESS_INTERVAL_MS;
			if (now >= due) {
				progress_send_locked(c);
				p->pending_ms = -1;
				continue;
			}
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t wait = due - now;
		ts.tv_sec += (time_t)(wait / 1000);
		ts.tv_nsec += (long)(wait % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* The state for a request that asked for progress (token: a string or an integer). */
static struct progress *progress_new(struct json_object *token)
{
	struct progress *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&p->cv, &a);
	pthread_condattr_destroy(&a);
	if (rc != 0 || json_object_deep_copy(token, &p->token, NULL) != 0) {
		if (rc == 0)
			pthread_cond_destroy(&p->cv);
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	p->pending_ms = -1;
	return p;
}

/* Starts the flusher; without it the call still runs, with no notifications. */
static bool progress_start(struct call *c)
{
	struct progress *p = c->progress;
	p->started_ms = now_ms();
	p->heartbeat_ms = c->srv->heartbeat_ms;
	p->flusher_started = pthread_create(&p->flusher, NULL, progress_flusher, c) == 0;
	if (!p->flusher_started)
		mcp_log("cannot start a progress thread: the call runs without notifications");
	return p->flusher_started;
}

/* After the call returned (no callback can come any more): stops the flusher and sends
 * what is left, before the response. */
static void progress_finish(struct call *c)
{
	struct progress *p = c->progress;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->flusher, NULL);
	pthread_mutex_lock(&p->mu);
	for (int k = 0; k < 2 && !p->over; k++)
		if (p->part_len[k] > 0) /* a character the program never finished */
			progress_put(c, k == 0 ? AKS_STREAM_STDOUT : AKS_STREAM_STDERR, replacement,
			             sizeof(replacement));
	progress_send_locked(c); /* past the budget: the final count */
	int64_t wait = p->reported ? p->last_ms + AKS_MCP_PROGRESS_SETTLE_MS - now_ms() : 0;
	pthread_mutex_unlock(&p->mu);
	if (wait > 0 && wait <= AKS_MCP_PROGRESS_SETTLE_MS) {
		struct timespec ts = {0, (long)wait * 1000000L};
		while (nanosleep(&ts, &ts) < 0)
			;
	}
}

static void progress_free(struct progress *p)
{
	if (!p)
		return;
	json_object_put(p->token);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* ---- tools/call threads ----------------------------------------------------------- */

static void attributes_free(char **attributes)
{
	for (size_t i = 0; attributes && attributes[i]; i++)
		free(attributes[i]);
	free(attributes);
}

/* A deep copy of a NULL-terminated list; *out NULL for none. -1 when out of memory. */
static int attributes_copy(const char *const *in, char ***out)
{
	*out = NULL;
	if (!in)
		return 0;
	size_t n = 0;
	while (in[n])
		n++;
	char **copy = calloc(n + 1, sizeof(*copy));
	if (!copy)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!(copy[i] = strdup(in[i]))) {
			attributes_free(copy);
			return -1;
		}
	}
	*out = copy;
	return 0;
}

static void slot_clear(struct call *c)
{
	attributes_free(c->attributes);
	progress_free(c->progress);
	json_object_put(c->id);
	free(c->tool);
	free(c->args);
	aks_cancel_free(c->cancel);
	memset(c, 0, sizeof(*c));
}

static void *call_main(void *arg)
{
	struct call *c = arg;
	aks__mcp_server *s = c->srv;
	void *route = c->route;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, s->conversation, s->agent);
	ctx.cancel = c->cancel;
	ctx.attributes = (const char *const *)c->attributes;
	ctx.wait_timeout = s->wait_timeout;
	bool streaming = c->progress && progress_start(c);
	if (streaming) {
		/* The client hears the output and a heartbeat in each silence, so it can wait for
		 * the whole run: it gets the outcome rather than a task to poll. */
		ctx.on_output = progress_output;
		ctx.output_userdata = c;
		ctx.wait_timeout = AKS_WAIT_UNTIL_DONE;
	}
	char *json = NULL;
	aks_error *e = NULL;
	int rc = aks_runtime_call_tool(s->rt, c->tool, c->args, &ctx, &json, &e);
	/* The runtime calls on_output no more: the last notifications go before the response. */
	if (streaming)
		progress_finish(c);
	struct json_object *msg;
	if (rc < 0 || !json)
		msg = aks__mcp_error(c->id, AKS_MCP_INTERNAL_ERROR,
		                     e ? aks_error_message(e) : aks_strerror(rc), NULL);
	else
		msg = aks__mcp_result(c->id, call_result(json, c->structured, c->modern));
	aks_error_free(e);
	free(json);

	/* Decide and write atomically with respect to cancellation: once the
	 * client has cancelled the request, it gets no response for it. The slot
	 * is released at that decision, before the response is written: a client
	 * that has read the response may send its next call at once, and it must
	 * not be refused as busy because this thread has not yet run again after
	 * its write. From here on `c` may be cleared and reused: not touched. */
	pthread_mutex_lock(&s->lock);
	bool respond = !c->cancelled;
	c->done = true;
	if (respond)
		pthread_mutex_lock(&s->write_lock);
	pthread_mutex_unlock(&s->lock);
	if (respond) {
		send_locked(s, route, msg);
		pthread_mutex_unlock(&s->write_lock);
	}
	json_object_put(msg);
	if (route && s->route_done)
		s->route_done(s->write_data, route);
	return NULL;
}

void aks__mcp_server_reap(aks__mcp_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->max_calls; i++) {
		struct call *c = &s->calls[i];
		/* A done thread takes the lock no more, so joining it under the lock
		 * cannot deadlock; it waits at most for the write of its response. */
		if (c->used && c->done) {
			pthread_join(c->thread, NULL);
			slot_clear(c);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* Starts a call; returns 0, or a JSON-RPC error code with *why set. */
static int start_call(aks__mcp_server *s, struct json_object *id, const char *tool,
                      const char *args, struct json_object *progress_token, bool structured,
                      bool modern, const char **why)
{
	aks__mcp_server_reap(s);
	pthread_mutex_lock(&s->lock);
	struct call *slot = NULL;
	for (size_t i = 0; i < s->max_calls; i++) {
		struct call *c = &s->calls[i];
		if (!c->used) {
			if (!slot)
				slot = c;
		} else if (!c->done && aks__mcp_id_equal(c->id, id)) {
			pthread_mutex_unlock(&s->lock);
			*why = "Invalid Request: a request with this id is still running";
			return AKS_MCP_INVALID_REQUEST;
		}
	}
	if (!slot) {
		pthread_mutex_unlock(&s->lock);
		*why = "Server busy: too many tool calls are running; retry when one has finished";
		return AKS_MCP_SERVER_BUSY;
	}
	memset(slot, 0, sizeof(*slot));
	slot->srv = s;
	slot->route = s->route;
	slot->structured = structured;
	slot->modern = modern;
	slot->tool = strdup(tool);
	slot->args = strdup(args);
	if (json_object_deep_copy(id, &slot->id, NULL) != 0)
		slot->id = NULL;
	aks_error *e = NULL;
	if (progress_token)
		slot->progress = progress_new(progress_token);
	int rc = slot->tool && slot->args && slot->id && (!progress_token || slot->progress) &&
	                 attributes_copy(s->attributes, &slot->attributes) == 0
	             ? aks_cancel_new(&slot->cancel, &e)
	             : AKS_ENOMEM;
	aks_error_free(e);
	if (rc == AKS_OK) {
		/* Signals are the read loop's business: keep them off this thread. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		slot->used = true;
		if (pthread_create(&slot->thread, NULL, call_main, slot) != 0)
			rc = AKS_ENOMEM;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (rc != AKS_OK) {
		slot_clear(slot);
		pthread_mutex_unlock(&s->lock);
		*why = "Internal error: cannot start the tool call";
		return AKS_MCP_INTERNAL_ERROR;
	}
	s->route_taken = true;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void cancel_request(aks__mcp_server *s, struct json_object *params)
{
	struct json_object *rid = NULL, *reason = NULL;
	if (!params || !json_object_object_get_ex(params, "requestId", &rid) ||
	    !aks__mcp_id_valid(rid))
		return; /* nothing to tell anyone: a notification gets no answer */
	json_object_object_get_ex(params, "reason", &reason);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->max_calls; i++) {
		struct call *c = &s->calls[i];
		if (c->used && !c->done && !c->cancelled && aks__mcp_id_equal(c->id, rid)) {
			c->cancelled = true;
			aks_cancel_trigger(c->cancel);
			mcp_log("request %s cancelled%s%s", json_object_to_json_string(rid),
			        reason ? ": " : "", reason ? json_object_get_string(reason) : "");
		}
	}
	pthread_mutex_unlock(&s->lock);
}

void aks__mcp_server_shutdown(aks__mcp_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->max_calls; i++) {
		struct call *c = &s->calls[i];
		if (c->used && !c->done) {
			c->cancelled = true;
			aks_cancel_trigger(c->cancel);
		}
	}
	pthread_mutex_unlock(&s->lock);
	/* The threads take the lock to finish: join without holding it. Only
	 * this thread clears slots, so `used` cannot change under us. */
	for (size_t i = 0; i < s->max_calls; i++) {
		struct call *c = &s->calls[i];
		if (c->used) {
			pthread_join(c->thread, NULL);
			pthread_mutex_lock(&s->lock);
			slot_clear(c);
			pthread_mutex_unlock(&s->lock);
		}
	}
}

/* ---- methods ---------------------------------------------------------------------- */

/* ---- the guidance as a prompt and a resource ------------------------------------------ */

/*
 * The system-prompt guidance (aks_runtime_guidance) also travels as an MCP prompt and as a
 * resource, for clients that do not pass `instructions` on to the model: a user can pick the
 * prompt, and an agent (or its host) can read the resource. Neither is listed when there is
 * no guidance (the sandbox is off, or the agents filter leaves this agent out).
 */
#define GUIDANCE_PROMPT "sandbox-guidance"
#define GUIDANCE_URI    "aksandbox://guidance"
#define GUIDANCE_TITLE  "How to use the sandbox"
#define GUIDANCE_ABOUT                                                                             \
	"What the sandbox tools do, the configured profiles and the isolation each one gives"
/* MCP's "resource not found". */
#define AKS_MCP_RESOURCE_NOT_FOUND (-32002)

static void add_guidance_capabilities(struct json_object *caps)
{
	struct json_object *prompts = json_object_new_object();
	json_object_object_add(prompts, "listChanged", json_object_new_boolean(false));
	json_object_object_add(caps, "prompts", prompts);
	struct json_object *resources = json_object_new_object();
	json_object_object_add(resources, "subscribe", json_object_new_boolean(false));
	json_object_object_add(resources, "listChanged", json_object_new_boolean(false));
	json_object_object_add(caps, "resources", resources);
}

static bool has_guidance(const aks__mcp_server *s)
{
	return s->instructions && *s->instructions;
}

/* A list result: fixed for the life of the process, as tools/list's. */
static void send_list(aks__mcp_server *s, aks__mcp_message *m, bool modern, const char *key,
                      struct json_object *items)
{
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, key, items);
	if (modern) {
		json_object_object_add(r, "ttlMs", json_object_new_int(300000));
		json_object_object_add(r, "cacheScope", json_object_new_string("private"));
		r = modern_result(r);
	}
	send_msg(s, aks__mcp_result(m->id, r));
}

/* The string param `key`, or NULL after answering -32602. */
static const char *string_param(aks__mcp_server *s, aks__mcp_message *m, const char *key)
{
	struct json_object *v = NULL;
	if (!m->params || !json_object_object_get_ex(m->params, key, &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: %s needs \"%s\" (a string)", m->method, key);
		return NULL;
	}
	return json_object_get_string(v);
}

static void do_prompts_list(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	struct json_object *prompts = json_object_new_array();
	if (has_guidance(s)) {
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "name", json_object_new_string(GUIDANCE_PROMPT));
		json_object_object_add(p, "title", json_object_new_string(GUIDANCE_TITLE));
		json_object_object_add(p, "description", json_object_new_string(GUIDANCE_ABOUT));
		json_object_array_add(prompts, p);
	}
	send_list(s, m, modern, "prompts", prompts);
}

static void do_prompts_get(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	const char *name = string_param(s, m, "name");
	if (!name)
		return;
	if (!has_guidance(s) || strcmp(name, GUIDANCE_PROMPT) != 0) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: unknown prompt %.200s", name);
		return;
	}
	struct json_object *text = json_object_new_object(), *msg = json_object_new_object();
	json_object_object_add(text, "type", json_object_new_string("text"));
	json_object_object_add(text, "text", json_object_new_string(s->instructions));
	json_object_object_add(msg, "role", json_object_new_string("user"));
	json_object_object_add(msg, "content", text);
	struct json_object *messages = json_object_new_array(), *r = json_object_new_object();
	json_object_array_add(messages, msg);
	json_object_object_add(r, "description", json_object_new_string(GUIDANCE_ABOUT));
	json_object_object_add(r, "messages", messages);
	send_msg(s, aks__mcp_result(m->id, modern ? modern_result(r) : r));
}

static void do_resources_list(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	struct json_object *resources = json_object_new_array();
	if (has_guidance(s)) {
		struct json_object *r = json_object_new_object();
		json_object_object_add(r, "uri", json_object_new_string(GUIDANCE_URI));
		json_object_object_add(r, "name", json_object_new_string("guidance"));
		json_object_object_add(r, "title", json_object_new_string(GUIDANCE_TITLE));
		json_object_object_add(r, "description", json_object_new_string(GUIDANCE_ABOUT));
		json_object_object_add(r, "mimeType", json_object_new_string("text/plain"));
		json_object_array_add(resources, r);
	}
	send_list(s, m, modern, "resources", resources);
}

static void do_resource_templates_list(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	send_list(s, m, modern, "resourceTemplates", json_object_new_array());
}

static void do_resources_read(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	const char *uri = string_param(s, m, "uri");
	if (!uri)
		return;
	if (!has_guidance(s) || strcmp(uri, GUIDANCE_URI) != 0) {
		struct json_object *data = json_object_new_object();
		json_object_object_add(data, "uri", json_object_new_string(uri));
		send_error(s, m->id, AKS_MCP_RESOURCE_NOT_FOUND, data, "Resource not found: %.200s",
		           uri);
		return;
	}
	struct json_object *c = json_object_new_object(), *contents = json_object_new_array();
	json_object_object_add(c, "uri", json_object_new_string(GUIDANCE_URI));
	json_object_object_add(c, "mimeType", json_object_new_string("text/plain"));
	json_object_object_add(c, "text", json_object_new_string(s->instructions));
	json_object_array_add(contents, c);
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "contents", contents);
	send_msg(s, aks__mcp_result(m->id, modern ? modern_result(r) : r));
}

static struct json_object *instructions_or_null(const aks__mcp_server *s)
{
	return s->instructions && *s->instructions ? json_object_new_string(s->instructions) : NULL;
}

static void do_initialize(aks__mcp_server *s, aks__mcp_message *m)
{
	struct json_object *v = NULL;
	if (s->initialized) {
		send_error(s, m->id, AKS_MCP_INVALID_REQUEST, NULL,
		           "Invalid Request: already initialized");
		return;
	}
	if (!m->params || !json_object_object_get_ex(m->params, "protocolVersion", &v) ||
	    !json_object_is_type(v, json_type_string)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: initialize needs \"protocolVersion\" (a string)");
		return;
	}
	const char *requested = json_object_get_string(v);
	struct json_object *caps = NULL, *info = NULL;
	if ((json_object_object_get_ex(m->params, "capabilities", &caps) && caps &&
	     !json_object_is_type(caps, json_type_object)) ||
	    (json_object_object_get_ex(m->params, "clientInfo", &info) && info &&
	     !json_object_is_type(info, json_type_object))) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: \"capabilities\" and \"clientInfo\" must be objects");
		return;
	}
	s->version = aks__mcp_negotiate(requested);
	s->initialized = true;
	struct json_object *name = NULL;
	if (info)
		json_object_object_get_ex(info, "name", &name);
	mcp_log("client %s asked for protocol %s; speaking %s",
	        name && json_object_is_type(name, json_type_string) ? json_object_get_string(name)
	                                                            : "(unnamed)",
	        requested, s->version);

	struct json_object *r = json_object_new_object(), *c = json_object_new_object();
	struct json_object *tools = json_object_new_object();
	json_object_object_add(tools, "listChanged", json_object_new_boolean(false));
	json_object_object_add(c, "tools", tools);
	add_guidance_capabilities(c);
	json_object_object_add(r, "protocolVersion", json_object_new_string(s->version));
	json_object_object_add(r, "capabilities", c);
	json_object_object_add(r, "serverInfo", server_info());
	struct json_object *text = instructions_or_null(s);
	if (text)
		json_object_object_add(r, "instructions", text);
	send_msg(s, aks__mcp_result(m->id, r));
}

static void do_discover(aks__mcp_server *s, aks__mcp_message *m)
{
	struct json_object *r = json_object_new_object(), *c = json_object_new_object();
	json_object_object_add(c, "tools", json_object_new_object());
	add_guidance_capabilities(c);
	json_object_object_add(r, "supportedVersions", aks__mcp_supported_versions());
	json_object_object_add(r, "capabilities", c);
	struct json_object *text = instructions_or_null(s);
	if (text)
		json_object_object_add(r, "instructions", text);
	json_object_object_add(r, "ttlMs", json_object_new_int(300000));
	json_object_object_add(r, "cacheScope", json_object_new_string("private"));
	send_msg(s, aks__mcp_result(m->id, modern_result(r)));
}

static void do_tools_list(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	struct json_object *r = json_object_new_object();
	/* No tools when the sandbox is off or the agents filter leaves this agent out: a tool
	 * that can only answer "disabled" is not offered. outputSchema goes to the revisions that
	 * have structuredContent. */
	json_object_object_add(
	    r, "tools",
	    s->offered
	        ? aks__mcp_catalog_tools(modern || aks__mcp_has_structured_content(s->version))
	        : json_object_new_array());
	if (modern) {
		/* The list depends only on the config and the agent: fixed for the
		 * life of this process. */
		json_object_object_add(r, "ttlMs", json_object_new_int(300000));
		json_object_object_add(r, "cacheScope", json_object_new_string("private"));
		r = modern_result(r);
	}
	send_msg(s, aks__mcp_result(m->id, r));
}

static void do_tools_call(aks__mcp_server *s, aks__mcp_message *m, bool modern, const char *version)
{
	struct json_object *name = NULL, *args = NULL;
	if (!m->params || !json_object_object_get_ex(m->params, "name", &name) ||
	    !json_object_is_type(name, json_type_string)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: tools/call needs \"name\" (a string)");
		return;
	}
	const char *tool = json_object_get_string(name);
	if (strlen(tool) != (size_t)json_object_get_string_len(name) ||
	    !aks__mcp_catalog_has(tool)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL, "Unknown tool: %.200s", tool);
		return;
	}
	json_object_object_get_ex(m->params, "arguments", &args);
	if (args && !json_object_is_type(args, json_type_object)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: \"arguments\" must be an object");
		return;
	}
	const char *text = args ? json_object_to_json_string_ext(
	                              args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
	                        : "{}";
	/* _meta.progressToken (a string or an integer) asks for notifications/progress. */
	struct json_object *meta = NULL, *token = NULL;
	if (json_object_object_get_ex(m->params, "_meta", &meta) &&
	    json_object_is_type(meta, json_type_object) &&
	    json_object_object_get_ex(meta, "progressToken", &token) &&
	    !json_object_is_type(token, json_type_string) &&
	    !json_object_is_type(token, json_type_int))
		token = NULL;
	if (strcmp(tool, "run_code") != 0 && strcmp(tool, "run_command") != 0)
		token = NULL; /* the other tools have no output to stream */
	const char *why = NULL;
	int code = start_call(s, m->id, tool, text ? text : "{}", token,
	                      modern || aks__mcp_has_structured_content(version), modern, &why);
	if (code != 0)
		send_error(s, m->id, code, NULL, "%s", why);
}

/* The 2026-07-28 per-request metadata: 1 when valid (modern request), 0
 * when absent (legacy request), -1 when an error was sent. */
static int check_modern(aks__mcp_server *s, aks__mcp_message *m)
{
	struct json_object *meta = NULL, *v = NULL, *caps = NULL;
	if (!m->params || !json_object_object_get_ex(m->params, "_meta", &meta) ||
	    !json_object_is_type(meta, json_type_object) ||
	    !json_object_object_get_ex(meta, AKS_MCP_META_VERSION, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: _meta[\"" AKS_MCP_META_VERSION "\"] must be a string");
		return -1;
	}
	const char *version = json_object_get_string(v);
	if (strcmp(version, AKS_MCP_MODERN_VERSION) != 0) {
		struct json_object *data = json_object_new_object();
		json_object_object_add(data, "supported", aks__mcp_supported_versions());
		json_object_object_add(data, "requested", json_object_new_string(version));
		send_error(s, m->id, AKS_MCP_UNSUPPORTED_VERSION, data,
		           "Unsupported protocol version");
		return -1;
	}
	if (!json_object_object_get_ex(meta, AKS_MCP_META_CAPABILITIES, &caps) ||
	    !json_object_is_type(caps, json_type_object)) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: _meta[\"" AKS_MCP_META_CAPABILITIES
		           "\"] is required (an object)");
		return -1;
	}
	return 1;
}

/* The methods that only read what the server offers: the lists, a prompt, a resource. */
static void do_listing(aks__mcp_server *s, aks__mcp_message *m, bool modern)
{
	static const struct {
		const char *method;
		void (*handle)(aks__mcp_server *s, aks__mcp_message *m, bool modern);
	} table[] = {
	    {"tools/list", do_tools_list},
	    {"prompts/list", do_prompts_list},
	    {"prompts/get", do_prompts_get},
	    {"resources/list", do_resources_list},
	    {"resources/read", do_resources_read},
	    {"resources/templates/list", do_resource_templates_list},
	};
	struct json_object *cursor = NULL;
	size_t len = strlen(m->method);
	if (len > 5 && strcmp(m->method + len - 5, "/list") == 0 && m->params &&
	    json_object_object_get_ex(m->params, "cursor", &cursor) && cursor) {
		/* One page only: any cursor is one we never handed out. */
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: unknown cursor");
		return;
	}
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].method, m->method) == 0) {
			table[i].handle(s, m, modern);
			return;
		}
}

static void handle_request(aks__mcp_server *s, aks__mcp_message *m)
{
	static const char *const methods[] = {"initialize",
	                                      "ping",
	                                      "server/discover",
	                                      "tools/list",
	                                      "tools/call",
	                                      "prompts/list",
	                                      "prompts/get",
	                                      "resources/list",
	                                      "resources/read",
	                                      "resources/templates/list",
	                                      NULL};
	const char *method = m->method;
	size_t i = 0;
	/* A name with a NUL inside ("ping\u0000x") is no method of ours. */
	while (methods[i] && (strcmp(methods[i], method) != 0 || strlen(method) != m->method_len))
		i++;
	if (!methods[i]) {
		send_error(s, m->id, AKS_MCP_METHOD_NOT_FOUND, NULL, "Method not found: %.200s",
		           method);
		return;
	}
	/* initialize is the legacy handshake, whatever _meta it carries. */
	if (strcmp(method, "initialize") == 0) {
		do_initialize(s, m);
		return;
	}
	int modern = check_modern(s, m);
	if (modern < 0)
		return;
	if (modern) {
		if (strcmp(method, "ping") == 0) {
			/* 2026-07-28 removed ping. */
			send_error(
			    s, m->id, AKS_MCP_METHOD_NOT_FOUND, NULL,
			    "Method not found: ping (removed in protocol " AKS_MCP_MODERN_VERSION
			    ")");
		} else if (strcmp(method, "server/discover") == 0) {
			do_discover(s, m);
		} else if (strcmp(method, "tools/call") == 0) {
			do_tools_call(s, m, true, AKS_MCP_MODERN_VERSION);
		} else {
			do_listing(s, m, true);
		}
		return;
	}
	/* Legacy: ping is allowed at any time, the rest after initialize. */
	if (strcmp(method, "ping") == 0) {
		send_msg(s, aks__mcp_result(m->id, json_object_new_object()));
		return;
	}
	if (!s->initialized || strcmp(method, "server/discover") == 0) {
		send_error(s, m->id, AKS_MCP_INVALID_PARAMS, NULL,
		           "Invalid params: no _meta[\"" AKS_MCP_META_VERSION
		           "\"] (protocol " AKS_MCP_MODERN_VERSION
		           ") and no initialize before (protocol " AKS_MCP_LEGACY_LATEST
		           " and earlier)");
		return;
	}
	if (strcmp(method, "tools/call") == 0)
		do_tools_call(s, m, false, s->version);
	else
		do_listing(s, m, false);
}

void aks__mcp_server_handle_line(aks__mcp_server *s, const char *line, size_t len)
{
	aks__mcp_server_handle(s, line, len, NULL, NULL);
}

void aks__mcp_server_handle(aks__mcp_server *s, const char *line, size_t len, void *route,
                            const char *const *attributes)
{
	s->route = route;
	s->attributes = attributes;
	s->route_taken = false;
	aks__mcp_message m;
	aks__mcp_parse(line, len, &m);
	switch (m.kind) {
	case AKS_MCP_MSG_INVALID:
		send_error(s, m.id, m.error_code, NULL, "%s", m.error_message);
		break;
	case AKS_MCP_MSG_REQUEST:
		handle_request(s, &m);
		break;
	case AKS_MCP_MSG_NOTIFICATION:
		if (strcmp(m.method, "notifications/cancelled") == 0 &&
		    strlen(m.method) == m.method_len)
			cancel_request(s, m.params);
		/* notifications/initialized and anything else: nothing to do. */
		break;
	case AKS_MCP_MSG_RESPONSE:
		break; /* we never send requests */
	}
	aks__mcp_message_clear(&m);
	s->route = NULL;
	s->attributes = NULL;
	if (route && !s->route_taken && s->route_done)
		s->route_done(s->write_data, route);
}

size_t aks__mcp_server_calls_running(aks__mcp_server *s)
{
	size_t n = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->max_calls; i++)
		n += s->calls[i].used && !s->calls[i].done;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void aks__mcp_server_handle_oversized(aks__mcp_server *s, size_t limit)
{
	send_error(s, NULL, AKS_MCP_INVALID_REQUEST, NULL,
	           "Invalid Request: message longer than %zu bytes; discarded", limit);
}

/* ---- construction ------------------------------------------------------------------ */

int aks__mcp_server_new(const aks__mcp_options *opt, aks__mcp_server **out)
{
	*out = NULL;
	aks__mcp_server *s = calloc(1, sizeof(*s));
	if (!s)
		return AKS_ENOMEM;
	s->rt = opt->rt;
	s->settings = opt->settings;
	s->write = opt->write;
	s->route_done = opt->route_done;
	s->write_data = opt->write_data;
	s->max_calls = opt->max_calls ? opt->max_calls : AKS_MCP_DEFAULT_MAX_CALLS;
	double configured = aks_settings_get_wait_timeout(opt->settings);
	if (opt->wait_timeout > 0)
		s->wait_timeout = opt->wait_timeout;
	else if (opt->wait_timeout < 0)
		s->wait_timeout = 0;
	else
		s->wait_timeout = configured < AKS_MCP_DEFAULT_WAIT_TIMEOUT
		                      ? configured
		                      : AKS_MCP_DEFAULT_WAIT_TIMEOUT;
	s->heartbeat_ms = opt->heartbeat_ms ? opt->heartbeat_ms : AKS_MCP_DEFAULT_HEARTBEAT_MS;
	s->version = AKS_MCP_LEGACY_LATEST;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->write_lock, NULL);
	s->conversation = strdup(opt->conversation_id);
	s->agent = opt->agent ? strdup(opt->agent) : NULL;
	s->calls = calloc(s->max_calls, sizeof(*s->calls));
	s->instructions = aks_runtime_guidance(s->rt, s->agent);
	s->offered = aks_settings_is_enabled(s->settings) &&
	             aks_settings_agent_allowed(s->settings, s->agent);
	if (!s->conversation || (opt->agent && !s->agent) || !s->calls || !s->instructions ||
	    aks__mcp_catalog_ensure(s->rt, s->settings) != AKS_OK) {
		aks__mcp_server_free(s);
		return AKS_ENOMEM;
	}
	*out = s;
	return AKS_OK;
}

void aks__mcp_server_free(aks__mcp_server *s)
{
	if (!s)
		return;
	if (s->calls)
		aks__mcp_server_shutdown(s);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->write_lock);
	free(s->instructions);
	free(s->calls);
	free(s->conversation);
	free(s->agent);
	free(s);
}
