/*
 * plugins/common/agent/agent_client.c - the host side of the aksandbox-agent protocol (see
 * aks_agent_client.h and docs/agent-protocol.md).
 *
 * One reader thread per connection decodes frames and completes the pending request each
 * names; callers wait on a condition variable. Writes are serialized by a write lock. The
 * reader never blocks on that lock: credit it owes the agent is recorded per request and
 * sent by whoever holds or next takes the lock (flush_credit), so a writer stuck on a full
 * pipe cannot stop the reader from draining the agent, which is what unblocks the writer.
 *
 * Memory is bounded: one frame buffer (the agent's maximum payload), and output goes
 * straight to the caller's callback, which for aks__agent_exec is the result's bounded
 * capture.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aks_agent_client.h"

#include "agent/proto.h"
#include "agent/sha256.h"

/* How long past the call's deadline the client waits for the agent's own timeout report,
 * and then for the end of a run it killed itself. */
#define AGENT_GRACE_MS   2000
#define DEFAULT_START_MS 10000

enum pending_kind { P_HELLO, P_PING, P_SPAWN, P_WRITE, P_READ, P_LISTEN };

typedef struct pending {
	struct pending *next;
	uint32_t id;
	int kind;
	bool done;
	int status; /* AKS_OK or a negative aks_status once done */
	char msg[512];
	int callbacks; /* the reader is inside fn: the pending must stay */
	uint32_t credit_due;
	aks_agent_chunk_fn fn;
	void *ud;
	aks_agent_exit exit;
	/* PING */
	uint8_t ping[8];
	/* WRITE */
	uint8_t sha[AKS_SHA256_LEN];
	/* READ */
	bool info;
	uint64_t size, got;
	aks_sha256 hash;
	/* HELLO_OK */
	uint32_t window, pid, features;
	uint64_t instance, lost;
	char version[64];
	/* NET_LISTENING */
	uint32_t port, net_window;
} pending;

struct aks_agent {
	const aks_host_api *host;
	int rfd, wfd;
	int wake[2]; /* wakes the reader to stop */
	pthread_t reader;
	bool reader_started;
	pthread_mutex_t mu; /* everything below */
	pthread_cond_t cv;
	pthread_mutex_t wmu; /* the write side of the stream */
	bool dead;
	char dead_msg[256];
	uint32_t next_id;
	pending *reqs;
	uint32_t window;
	uint32_t pid, features;
	uint64_t instance, lost;
	char version[64];
	/* the egress streams' frames go to net_fn (aks__agent_set_net_handler) */
	aks_agent_net_fn net_fn;
	void *net_ud;
	int net_calls; /* the reader is inside net_fn */
	unsigned stray;
	char stray_msg[512];
	char *beneath; /* every file request's BENEATH, or NULL */
	aks_agent_decoder dec;
};

struct aks_agent_run {
	aks_agent *a;
	pending p;
};

/* ---- small helpers ---- */

static int64_t now_ms(const aks_agent *a)
{
	return a->host->now_ms();
}

static void set_dead(aks_agent *a, const char *fmt, ...) AKS_PRINTF(2, 3);
static void set_dead(aks_agent *a, const char *fmt, ...)
{
	pthread_mutex_lock(&a->mu);
	if (!a->dead) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(a->dead_msg, sizeof(a->dead_msg), fmt, ap);
		va_end(ap);
		a->dead = true;
	}
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* Writes everything or fails; SIGPIPE (a dead agent) becomes EPIPE, not a dead host. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	sigset_t pipe_set, old;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigset_t pending_before;
	sigpending(&pending_before);
	int rc = 0;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = {fd, POLLOUT, 0};
			poll(&pf, 1, 100);
			continue;
		}
		if (w <= 0) {
			rc = errno ? -errno : -EIO;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
	if (rc == -EPIPE && !sigismember(&pending_before, SIGPIPE)) {
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static pending *find(aks_agent *a, uint32_t id)
{
	for (pending *p = a->reqs; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

static void unlink_pending(aks_agent *a, pending *p)
{
	for (pending **pp = &a->reqs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

/* One CREDIT frame: the header and one BYTES field. */
#define CREDIT_FRAME (AKS_AGENT_HEADER + 6 + 4)

static void encode_credit(uint8_t *p, uint32_t id, uint32_t bytes)
{
	p[0] = AKS_AGENT_MAGIC0;
	p[1] = AKS_AGENT_MAGIC1;
	p[2] = AKS_AGENT_VERSION;
	p[3] = AKS_AGENT_CREDIT;
	aks__agent_put16(p + 4, 0);
	aks__agent_put16(p + 6, 0);
	aks__agent_put32(p + 8, id);
	aks__agent_put32(p + 12, 10);
	aks__agent_put16(p + 16, AKS_AGENT_T_BYTES);
	aks__agent_put32(p + 18, 4);
	aks__agent_put32(p + 22, bytes);
}

/* Sends the credit the reader recorded, if the write lock is free; see the file comment.
 * Frames are built on the stack: this runs once per quarter window of output. */
static void flush_credit(aks_agent *a)
{
	for (;;) {
		if (pthread_mutex_trylock(&a->wmu) != 0)
			return; /* the holder flushes after it unlocks */
		uint8_t frames[64 * CREDIT_FRAME];
		size_t len = 0;
		pthread_mutex_lock(&a->mu);
		for (pending *p = a->reqs; p && len < sizeof(frames); p = p->next) {
			if (!p->credit_due)
				continue;
			encode_credit(frames + len, p->id, p->credit_due);
			len += CREDIT_FRAME;
			p->credit_due = 0;
		}
		bool dead = a->dead;
		pthread_mutex_unlock(&a->mu);
		if (len && !dead && write_all(a->wfd, frames, len) < 0)
			set_dead(a, "cannot write to the agent");
		pthread_mutex_unlock(&a->wmu);
		pthread_mutex_lock(&a->mu);
		bool more = false;
		for (pending *p = a->reqs; p && !more; p = p->next)
			more = p->credit_due != 0;
		more = more && !a->dead;
		pthread_mutex_unlock(&a->mu);
		if (!more)
			return;
	}
}

/* Sends whole frames held in b (under the write lock). */
static int send_buf(aks_agent *a, aks_agent_buf *b, aks_error **err)
{
	if (b->failed)
		return a->host->error_set(
		    err, AKS_ELIMIT,
		    "agent request is over the protocol's %u-byte frame limit "
		    "(or out of memory)",
		    AKS_AGENT_MAX_PAYLOAD);
	pthread_mutex_lock(&a->wmu);
	pthread_mutex_lock(&a->mu);
	bool dead = a->dead;
	pthread_mutex_unlock(&a->mu);
	int rc = dead ? -EPIPE : write_all(a->wfd, b->data, b->len);
	pthread_mutex_unlock(&a->wmu);
	flush_credit(a);
	if (rc < 0) {
		set_dead(a, "cannot write to the agent: %s", strerror(-rc));
		pthread_mutex_lock(&a->mu);
		rc = a->host->error_set(err, AKS_EGONE, "the agent connection is gone: %s",
		                        a->dead_msg);
		pthread_mutex_unlock(&a->mu);
		return rc;
	}
	return AKS_OK;
}

static void add_pending(aks_agent *a, pending *p, int kind)
{
	pthread_mutex_lock(&a->mu);
	p->kind = kind;
	p->id = a->next_id++;
	if (a->next_id == 0)
		a->next_id = 1;
	p->next = a->reqs;
	a->reqs = p;
	pthread_mutex_unlock(&a->mu);
}

static void drop_pending(aks_agent *a, pending *p)
{
	pthread_mutex_lock(&a->mu);
	unlink_pending(a, p);
	while (p->callbacks)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

static int status_of(uint32_t code)
{
	switch (code) {
	case AKS_AGENT_E_NOT_FOUND:
		return AKS_ENOTFOUND;
	case AKS_AGENT_E_LIMIT:
		return AKS_ELIMIT;
	case AKS_AGENT_E_IO:
	case AKS_AGENT_E_SPAWN:
	case AKS_AGENT_E_SIZE_MISMATCH:
	case AKS_AGENT_E_HASH_MISMATCH:
		return AKS_EIO;
	case AKS_AGENT_E_BUSY:
		return AKS_EINVAL;
	case AKS_AGENT_E_ESCAPES:
		return AKS_EPOLICY;
	default:
		return AKS_ERROR;
	}
}

/* ---- the reader ---- */

static void complete(pending *p, int status, const char *fmt, ...) AKS_PRINTF(3, 4);
static void complete(pending *p, int status, const char *fmt, ...)
{
	if (p->done)
		return;
	p->done = true;
	p->status = status;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
		va_end(ap);
	}
}

static void copy_text(char *dst, size_t cap, const uint8_t *v, uint32_t n)
{
	size_t len = n < cap - 1 ? n : cap - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

static bool is_net_stream_frame(const aks_agent_frame *f)
{
	return (f->id & AKS_AGENT_NET_ID) &&
	       (f->type == AKS_AGENT_NET_OPEN || f->type == AKS_AGENT_NET_DATA ||
	        f->type == AKS_AGENT_NET_CREDIT || f->type == AKS_AGENT_NET_EOF ||
	        f->type == AKS_AGENT_NET_CLOSE);
}

/* Handles one frame; called with mu held, may drop it around a callback. */
static void on_frame(aks_agent *a, const aks_agent_frame *f)
{
	if (is_net_stream_frame(f)) {
		if (a->net_fn) {
			aks_agent_net_fn fn = a->net_fn;
			void *ud = a->net_ud;
			a->net_calls++;
			pthread_mutex_unlock(&a->mu);
			fn(ud, f);
			pthread_mutex_lock(&a->mu);
			a->net_calls--;
			pthread_cond_broadcast(&a->cv);
		}
		return; /* no proxy on this connection: the agent never opens a stream */
	}
	pending *p = find(a, f->id);
	aks_agent_tlv it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	if (f->type == AKS_AGENT_ERROR) {
		uint32_t code = 0;
		char msg[400] = "";
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0) {
			if (tag == AKS_AGENT_T_CODE && n == 4)
				code = aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_MESSAGE)
				copy_text(msg, sizeof(msg), v, n);
		}
		if (p && !p->done) {
			complete(p, status_of(code), "agent: %s", msg);
		} else {
			a->stray++;
			snprintf(a->stray_msg, sizeof(a->stray_msg), "code %u: %s", code, msg);
		}
		return;
	}
	if (!p || p->done)
		return; /* output of a run we stopped waiting for */
	switch (f->type) {
	case AKS_AGENT_HELLO_OK:
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0) {
			if (tag == AKS_AGENT_T_WINDOW && n == 4)
				p->window = aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_PID && n == 4)
				p->pid = aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_INSTANCE && n == 8)
				p->instance = aks__agent_get64(v);
			else if (tag == AKS_AGENT_T_LOST && n == 8)
				p->lost = aks__agent_get64(v);
			else if (tag == AKS_AGENT_T_FEATURES && n == 4)
				p->features = aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_AGENT)
				copy_text(p->version, sizeof(p->version), v, n);
		}
		complete(p, AKS_OK, NULL);
		return;
	case AKS_AGENT_NET_LISTENING:
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
			if (tag == AKS_AGENT_T_PORT && n == 4)
				p->port = aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_WINDOW && n == 4)
				p->net_window = aks__agent_get32(v);
		if (p->port == 0 || p->port > 65535)
			complete(p, AKS_EIO, "the agent's NET_LISTENING has no port");
		else if (p->net_window != p->window)
			complete(p, AKS_EIO,
			         "the agent's egress window is %u bytes, not the %u asked",
			         p->net_window, p->window);
		else
			complete(p, AKS_OK, NULL);
		return;
	case AKS_AGENT_PONG:
		if (f->len == sizeof(p->ping) && memcmp(f->payload, p->ping, f->len) == 0)
			complete(p, AKS_OK, NULL);
		else
			complete(p, AKS_ERROR, "the agent answered PING with other bytes");
		return;
	case AKS_AGENT_STDOUT:
	case AKS_AGENT_STDERR:
	case AKS_AGENT_READ_DATA: {
		int stream = f->type == AKS_AGENT_STDOUT   ? AKS_STREAM_STDOUT
		             : f->type == AKS_AGENT_STDERR ? AKS_STREAM_STDERR
		                                           : AKS_STREAM_FILE;
		if (f->type == AKS_AGENT_READ_DATA) {
			if (!p->info || p->got + f->len > p->size) {
				complete(p, AKS_EIO,
				         "the agent sent more file bytes than it announced");
				return;
			}
			aks__sha256_update(&p->hash, f->payload, f->len);
			p->got += f->len;
		}
		if (p->fn) {
			p->callbacks++;
			pthread_mutex_unlock(&a->mu);
			p->fn(p->ud, stream, f->payload, f->len);
			pthread_mutex_lock(&a->mu);
			p->callbacks--;
			pthread_cond_broadcast(&a->cv);
		}
		/* Consumed: the agent may send as much again. Granted in quarters of the window so
		 * a stream of chunks costs few credit frames. */
		p->credit_due += f->len;
		return;
	}
	case AKS_AGENT_EXIT:
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0) {
			if (tag == AKS_AGENT_T_EXIT_CODE && n == 4)
				p->exit.exit_code = (int32_t)aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_EXIT_SIGNAL && n == 4)
				p->exit.signal = (int)aks__agent_get32(v);
			else if (tag == AKS_AGENT_T_TIMED_OUT && n == 4)
				p->exit.timed_out = aks__agent_get32(v) != 0;
			else if (tag == AKS_AGENT_T_OUT_BYTES && n == 8)
				p->exit.out_bytes = aks__agent_get64(v);
			else if (tag == AKS_AGENT_T_ERR_BYTES && n == 8)
				p->exit.err_bytes = aks__agent_get64(v);
			else if (tag == AKS_AGENT_T_NOTICE)
				copy_text(p->exit.notice, sizeof(p->exit.notice), v, n);
		}
		complete(p, AKS_OK, NULL);
		return;
	case AKS_AGENT_WRITE_OK: {
		bool same = false;
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
			if (tag == AKS_AGENT_T_SHA256 && n == AKS_SHA256_LEN)
				same = memcmp(v, p->sha, n) == 0;
		if (same)
			complete(p, AKS_OK, NULL);
		else
			complete(p, AKS_EIO, "the agent confirmed a write with another SHA-256");
		return;
	}
	case AKS_AGENT_READ_INFO:
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
			if (tag == AKS_AGENT_T_SIZE && n == 8) {
				p->size = aks__agent_get64(v);
				p->info = true;
			}
		if (!p->info)
			complete(p, AKS_EIO, "the agent's READ_INFO has no SIZE");
		return;
	case AKS_AGENT_READ_END: {
		uint8_t want[AKS_SHA256_LEN], got[AKS_SHA256_LEN];
		bool have = false;
		uint64_t size = UINT64_MAX;
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0) {
			if (tag == AKS_AGENT_T_SHA256 && n == AKS_SHA256_LEN) {
				memcpy(want, v, n);
				have = true;
			} else if (tag == AKS_AGENT_T_SIZE && n == 8) {
				size = aks__agent_get64(v);
			}
		}
		aks__sha256_final(&p->hash, got);
		if (!have || size != p->got || p->got != p->size)
			complete(p, AKS_EIO, "file size mismatch: announced %llu, received %llu",
			         (unsigned long long)p->size, (unsigned long long)p->got);
		else if (memcmp(want, got, sizeof(got)) != 0)
			complete(p, AKS_EIO,
			         "the file's bytes do not match the SHA-256 the agent sent");
		else
			complete(p, AKS_OK, NULL);
		return;
	}
	default:
		complete(p, AKS_ERROR, "unexpected frame type 0x%02x from the agent", f->type);
	}
}

static void *reader_main(void *arg)
{
	aks_agent *a = arg;
	for (;;) {
		struct pollfd pf[2] = {{a->rfd, POLLIN, 0}, {a->wake[0], POLLIN, 0}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			set_dead(a, "poll failed: %s", strerror(errno));
			break;
		}
		if (pf[1].revents)
			break;
		size_t avail;
		uint8_t *buf = aks__agent_decoder_space(&a->dec, &avail);
		ssize_t n = read(a->rfd, buf, avail);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			set_dead(a, n == 0 ? "the agent closed its output (it exited or was killed)"
			                   : "cannot read from the agent");
			break;
		}
		aks__agent_decoder_commit(&a->dec, (size_t)n);
		aks_agent_frame f;
		uint32_t code;
		int rc;
		bool owe = false;
		pthread_mutex_lock(&a->mu);
		while ((rc = aks__agent_decoder_next(&a->dec, &f, &code)) != AKS_AGENT_DEC_MORE) {
			if (rc == AKS_AGENT_DEC_ERROR) {
				/* The agent's output is not framed: no request can be trusted now.
				 */
				pthread_mutex_unlock(&a->mu);
				set_dead(a, "the agent sent a malformed frame (error %u)", code);
				return NULL;
			}
			on_frame(a, &f);
			pthread_cond_broadcast(&a->cv);
		}
		for (pending *p = a->reqs; p && !owe; p = p->next)
			owe = p->credit_due >= a->window / 4 || (p->credit_due && p->done);
		pthread_mutex_unlock(&a->mu);
		if (owe)
			flush_credit(a);
	}
	return NULL;
}

/* ---- waiting ---- */

/* Waits for p until the absolute deadline (0: none) or cancellation. AKS_OK when done,
 * AKS_ETIMEOUT, AKS_ECANCELLED or AKS_EGONE otherwise. */
static int wait_pending(aks_agent *a, pending *p, int64_t deadline, const aks_call *call)
{
	pthread_mutex_lock(&a->mu);
	int rc = AKS_OK;
	while (!p->done) {
		if (a->dead) {
			rc = AKS_EGONE;
			break;
		}
		if (call && a->host->cancelled(call)) {
			rc = AKS_ECANCELLED;
			break;
		}
		int64_t now = now_ms(a);
		if (deadline && now >= deadline) {
			rc = AKS_ETIMEOUT;
			break;
		}
		/* Wake at least every 50 ms to look at the cancellation flag. */
		int64_t wait = deadline ? deadline - now : 50;
		if (wait > 50)
			wait = 50;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)(wait % 1000) * 1000000L;
		ts.tv_sec += (time_t)(wait / 1000) + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

static int fail_wait(aks_agent *a, int rc, const char *what, aks_error **err)
{
	switch (rc) {
	case AKS_EGONE: {
		char msg[256];
		pthread_mutex_lock(&a->mu);
		snprintf(msg, sizeof(msg), "%s", a->dead_msg);
		pthread_mutex_unlock(&a->mu);
		return a->host->error_set(err, AKS_EGONE, "%s: the agent connection is gone: %s",
		                          what, msg);
	}
	case AKS_ECANCELLED:
		return a->host->error_set(err, rc, "%s: cancelled", what);
	default:
		return a->host->error_set(err, AKS_ETIMEOUT, "%s: the agent did not answer in time",
		                          what);
	}
}

static int finish(aks_agent *a, pending *p, aks_error **err)
{
	if (p->status == AKS_OK)
		return AKS_OK;
	return a->host->error_set(err, p->status, "%s",
	                          p->msg[0] ? p->msg : "agent request failed");
}

/* Sends the request frame in b (freed) for p, added already, and waits for its answer until
 * the call's deadline (DEFAULT_START_MS without one). */
static int ask(aks_agent *a, pending *p, aks_agent_buf *b, const aks_call *call, const char *what,
               aks_error **err)
{
	int rc = send_buf(a, b, err);
	aks__agent_buf_free(b);
	if (rc != AKS_OK)
		return rc;
	int64_t deadline =
	    call && call->deadline_ms ? call->deadline_ms : now_ms(a) + DEFAULT_START_MS;
	rc = wait_pending(a, p, deadline, call);
	return rc != AKS_OK ? fail_wait(a, rc, what, err) : finish(a, p, err);
}

/* ---- the connection ---- */

int aks__agent_start(const aks_host_api *host, int rfd, int wfd, const aks_call *call,
                     aks_agent **out, aks_error **err)
{
	*out = NULL;
	aks_agent *a = calloc(1, sizeof(*a));
	if (!a || aks__agent_decoder_init(&a->dec, AKS_AGENT_MAX_PAYLOAD) < 0) {
		free(a);
		close(rfd);
		close(wfd);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	a->host = host;
	a->rfd = rfd;
	a->wfd = wfd;
	a->next_id = 1;
	a->window = AKS_AGENT_WINDOW;
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->wmu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pipe2(a->wake, O_CLOEXEC) < 0) {
		a->wake[0] = a->wake[1] = -1;
		aks__agent_free(a);
		return host->error_set(err, AKS_EIO, "cannot create a pipe: %s", strerror(errno));
	}
	if (pthread_create(&a->reader, NULL, reader_main, a) != 0) {
		aks__agent_free(a);
		return host->error_set(err, AKS_EIO, "cannot start the agent reader thread");
	}
	a->reader_started = true;
	pending p;
	memset(&p, 0, sizeof(p));
	add_pending(a, &p, P_HELLO);
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_HELLO, 0, p.id);
	aks__agent_put_u32(&b, AKS_AGENT_T_VERSION_MIN, AKS_AGENT_VERSION);
	aks__agent_put_u32(&b, AKS_AGENT_T_VERSION_MAX, AKS_AGENT_VERSION);
	aks__agent_put_u32(&b, AKS_AGENT_T_WINDOW, AKS_AGENT_WINDOW);
	aks__agent_frame_end(&b, s);
	int rc = ask(a, &p, &b, call, "agent hello", err);
	drop_pending(a, &p);
	if (rc != AKS_OK) {
		aks__agent_free(a);
		return rc;
	}
	a->window = p.window >= AKS_AGENT_CHUNK ? p.window : AKS_AGENT_WINDOW;
	a->pid = p.pid;
	a->instance = p.instance;
	a->lost = p.lost;
	a->features = p.features;
	memcpy(a->version, p.version, sizeof(a->version));
	*out = a;
	return AKS_OK;
}

void aks__agent_free(aks_agent *a)
{
	if (!a)
		return;
	/* EOF first: the agent kills what it runs and exits. */
	if (a->wfd >= 0)
		close(a->wfd);
	a->wfd = -1;
	if (a->reader_started) {
		ssize_t n = write(a->wake[1], "x", 1);
		(void)n;
		pthread_join(a->reader, NULL);
	}
	if (a->wake[0] >= 0)
		close(a->wake[0]);
	if (a->wake[1] >= 0)
		close(a->wake[1]);
	close(a->rfd);
	aks__agent_decoder_free(&a->dec);
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->wmu);
	pthread_cond_destroy(&a->cv);
	free(a->beneath);
	free(a);
}

uint32_t aks__agent_pid(const aks_agent *a)
{
	return a->pid;
}

uint64_t aks__agent_instance(const aks_agent *a)
{
	return a->instance;
}

uint64_t aks__agent_lost(const aks_agent *a)
{
	return a->lost;
}

const char *aks__agent_version(const aks_agent *a)
{
	return a->version;
}

bool aks__agent_alive(aks_agent *a)
{
	pthread_mutex_lock(&a->mu);
	bool alive = !a->dead;
	pthread_mutex_unlock(&a->mu);
	return alive;
}

int aks__agent_ping(aks_agent *a, const aks_call *call, aks_error **err)
{
	pending p;
	memset(&p, 0, sizeof(p));
	add_pending(a, &p, P_PING);
	uint64_t stamp = (uint64_t)now_ms(a) ^ ((uint64_t)p.id << 40);
	aks__agent_put64(p.ping, stamp);
	aks_agent_buf b = {0};
	aks__agent_frame_data(&b, AKS_AGENT_PING, 0, p.id, p.ping, sizeof(p.ping));
	int rc = send_buf(a, &b, err);
	aks__agent_buf_free(&b);
	if (rc == AKS_OK) {
		int64_t deadline =
		    call && call->deadline_ms ? call->deadline_ms : now_ms(a) + DEFAULT_START_MS;
		rc = wait_pending(a, &p, deadline, call);
		rc = rc == AKS_OK ? finish(a, &p, err) : fail_wait(a, rc, "agent ping", err);
	}
	drop_pending(a, &p);
	return rc;
}

/* ---- runs ---- */

int aks__agent_spawn(aks_agent *a, const aks_agent_spawn *spec, aks_agent_chunk_fn fn, void *ud,
                     const aks_call *call, aks_agent_run **out, aks_error **err)
{
	*out = NULL;
	int kinds = (spec->argv && spec->argv[0]) + (spec->shell != NULL) + (spec->code != NULL);
	if (kinds != 1 || (spec->code && !spec->language))
		return a->host->error_set(err, AKS_EINVAL,
		                          "agent spawn: give exactly one of argv, shell or code "
		                          "(with a language)");
	int64_t timeout = spec->timeout_ms > 0 ? spec->timeout_ms : 0;
	if (call && call->deadline_ms) {
		int64_t left = call->deadline_ms - now_ms(a);
		if (left < 1)
			left = 1;
		if (!timeout || left < timeout)
			timeout = left;
	}
	if (timeout > UINT32_MAX)
		timeout = UINT32_MAX;
	aks_agent_run *run = calloc(1, sizeof(*run));
	if (!run)
		return a->host->error_set(err, AKS_ENOMEM, "out of memory");
	run->a = a;
	run->p.fn = fn;
	run->p.ud = ud;
	add_pending(a, &run->p, P_SPAWN);
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_SPAWN, 0, run->p.id);
	if (spec->argv)
		for (size_t i = 0; spec->argv[i]; i++)
			aks__agent_put_str(&b, AKS_AGENT_T_ARGV, spec->argv[i]);
	if (spec->shell)
		aks__agent_put_str(&b, AKS_AGENT_T_SHELL, spec->shell);
	if (spec->code) {
		aks__agent_put_str(&b, AKS_AGENT_T_SRC, spec->code);
		aks__agent_put_str(&b, AKS_AGENT_T_LANGUAGE, spec->language);
	}
	if (spec->session)
		aks__agent_put_str(&b, AKS_AGENT_T_SESSION, spec->session);
	if (spec->cwd)
		aks__agent_put_str(&b, AKS_AGENT_T_CWD, spec->cwd);
	if (spec->env)
		for (size_t i = 0; spec->env[i]; i++)
			aks__agent_put_str(&b, AKS_AGENT_T_ENV, spec->env[i]);
	if (spec->env_clear)
		aks__agent_put_u32(&b, AKS_AGENT_T_ENV_CLEAR, 1);
	if (spec->stdin_len)
		aks__agent_put_bytes(&b, AKS_AGENT_T_STDIN, spec->stdin_data, spec->stdin_len);
	if (timeout)
		aks__agent_put_u32(&b, AKS_AGENT_T_TIMEOUT_MS, (uint32_t)timeout);
	aks__agent_frame_end(&b, s);
	int rc = send_buf(a, &b, err);
	aks__agent_buf_free(&b);
	if (rc != AKS_OK) {
		aks__agent_run_free(run);
		return rc;
	}
	*out = run;
	return AKS_OK;
}

static int send_kill(aks_agent *a, uint32_t id, int sig, aks_error **err)
{
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_KILL, 0, id);
	aks__agent_put_u32(&b, AKS_AGENT_T_SIGNAL, (uint32_t)sig);
	aks__agent_frame_end(&b, s);
	int rc = send_buf(a, &b, err);
	aks__agent_buf_free(&b);
	return rc;
}

int aks__agent_kill(aks_agent_run *run, int sig, aks_error **err)
{
	return send_kill(run->a, run->p.id, sig, err);
}

int aks__agent_wait(aks_agent_run *run, const aks_call *call, aks_agent_exit *exit, aks_error **err)
{
	aks_agent *a = run->a;
	pending *p = &run->p;
	int64_t deadline = call && call->deadline_ms ? call->deadline_ms + AGENT_GRACE_MS : 0;
	int rc = wait_pending(a, p, deadline, call);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		/* Kill it ourselves and give the agent a grace to confirm the tree is gone. */
		send_kill(a, p->id, SIGKILL, NULL);
		int again = wait_pending(a, p, now_ms(a) + AGENT_GRACE_MS, NULL);
		if (again == AKS_OK && p->status == AKS_OK && rc == AKS_ETIMEOUT)
			p->exit.timed_out = true;
		if (exit)
			*exit = p->exit;
		if (rc == AKS_ECANCELLED)
			return a->host->error_set(err, AKS_ECANCELLED,
			                          "cancelled; the program was killed");
		return a->host->error_set(
		    err, AKS_ETIMEOUT,
		    again == AKS_OK ? "the agent did not report the program's end in time; "
		                      "it was killed"
		                    : "the agent did not report the program's end in time "
		                      "and did not confirm the kill");
	}
	if (rc != AKS_OK)
		return fail_wait(a, rc, "agent run", err);
	if (exit)
		*exit = p->exit;
	return finish(a, p, err);
}

void aks__agent_run_free(aks_agent_run *run)
{
	if (!run)
		return;
	pthread_mutex_lock(&run->a->mu);
	bool running = !run->p.done && !run->a->dead;
	pthread_mutex_unlock(&run->a->mu);
	if (running)
		send_kill(run->a, run->p.id, SIGKILL, NULL); /* nobody will read it: stop it */
	drop_pending(run->a, &run->p);
	free(run);
}

typedef struct capture {
	const aks_host_api *host;
	aks_result *result;
} capture;

static void capture_chunk(void *ud, int stream, const void *data, size_t len)
{
	capture *c = ud;
	/* Bounded by the result's per-stream cap; past it bytes are counted, not kept. */
	c->host->result_write(c->result, stream, data, len, NULL);
}

/* Waits for the run's end, asking watch every watch_ms meanwhile; a watch that fails ends
 * the run (killed) with its error. */
static int watched_wait(aks_agent_run *run, const aks_call *call, const aks_agent_watch *w,
                        aks_agent_exit *ex, aks_error **err)
{
	aks_agent *a = run->a;
	int64_t end = call && call->deadline_ms ? call->deadline_ms + AGENT_GRACE_MS : 0;
	while (w && w->fn && w->every_ms > 0) {
		int64_t until = now_ms(a) + w->every_ms;
		if (end && until > end)
			until = end;
		if (wait_pending(a, &run->p, until, call) != AKS_ETIMEOUT || (end && until >= end))
			break;
		int rc = w->fn(w->ud, err);
		if (rc != AKS_OK) {
			send_kill(a, run->p.id, SIGKILL, NULL);
			return rc;
		}
	}
	return aks__agent_wait(run, call, ex, err);
}

int aks__agent_exec_watched(aks_agent *a, const aks_agent_spawn *spec, aks_result *result,
                            const aks_call *call, const aks_agent_watch *watch,
                            aks_agent_exit *exit, aks_error **err)
{
	capture c = {a->host, result};
	aks_agent_run *run = NULL;
	int rc = aks__agent_spawn(a, spec, capture_chunk, &c, call, &run, err);
	if (rc != AKS_OK)
		return rc;
	aks_agent_exit ex;
	memset(&ex, 0, sizeof(ex));
	rc = watched_wait(run, call, watch, &ex, err);
	aks__agent_run_free(run);
	if (exit)
		*exit = ex;
	if (rc == AKS_OK || rc == AKS_ETIMEOUT) {
		a->host->result_set_exit_code(result, ex.signal ? 128 + ex.signal : ex.exit_code);
		if (ex.notice[0])
			a->host->result_set_notice(result, ex.notice);
	}
	if (rc == AKS_OK && ex.timed_out) {
		a->host->result_set_timed_out(result);
		return a->host->error_set(err, AKS_ETIMEOUT,
		                          "the program ran past its deadline and "
		                          "was killed with everything it started");
	}
	if (rc == AKS_ETIMEOUT)
		a->host->result_set_timed_out(result);
	return rc;
}

int aks__agent_exec(aks_agent *a, const aks_agent_spawn *spec, aks_result *result,
                    const aks_call *call, aks_agent_exit *exit, aks_error **err)
{
	return aks__agent_exec_watched(a, spec, result, call, NULL, exit, err);
}

/* ---- files ---- */

int aks__agent_write_file(aks_agent *a, const char *path, const void *data, size_t len,
                          uint32_t mode, const aks_call *call, aks_error **err)
{
	pending p;
	memset(&p, 0, sizeof(p));
	aks_sha256 h;
	aks__sha256_init(&h);
	aks__sha256_update(&h, data, len);
	aks__sha256_final(&h, p.sha);
	add_pending(a, &p, P_WRITE);
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_WRITE, 0, p.id);
	aks__agent_put_str(&b, AKS_AGENT_T_PATH, path);
	aks__agent_put_u64(&b, AKS_AGENT_T_SIZE, len);
	aks__agent_put_bytes(&b, AKS_AGENT_T_SHA256, p.sha, sizeof(p.sha));
	aks__agent_put_u32(&b, AKS_AGENT_T_MODE, mode);
	if (a->beneath)
		aks__agent_put_str(&b, AKS_AGENT_T_BENEATH, a->beneath);
	aks__agent_frame_end(&b, s);
	int rc = send_buf(a, &b, err);
	const uint8_t *bytes = data;
	size_t off = 0;
	while (rc == AKS_OK) {
		size_t n = len - off < AKS_AGENT_CHUNK ? len - off : AKS_AGENT_CHUNK;
		bool last = off + n == len;
		b.off = b.len = 0;
		aks__agent_frame_data(&b, AKS_AGENT_WRITE_DATA, last ? AKS_AGENT_FLAG_END : 0, p.id,
		                      bytes + off, n);
		rc = send_buf(a, &b, err);
		off += n;
		if (last)
			break;
		pthread_mutex_lock(&a->mu);
		bool refused = p.done;
		pthread_mutex_unlock(&a->mu);
		if (refused)
			break; /* the agent already said no: stop sending */
		if (call && a->host->cancelled(call)) {
			rc =
			    a->host->error_set(err, AKS_ECANCELLED, "write of %s: cancelled", path);
			break;
		}
	}
	aks__agent_buf_free(&b);
	if (rc == AKS_OK) {
		int64_t deadline = call && call->deadline_ms ? call->deadline_ms : 0;
		rc = wait_pending(a, &p, deadline, call);
		rc = rc == AKS_OK ? finish(a, &p, err) : fail_wait(a, rc, "agent write", err);
	}
	drop_pending(a, &p);
	return rc;
}

int aks__agent_read_file(aks_agent *a, const char *path, uint64_t max_size, aks_agent_chunk_fn fn,
                         void *ud, const aks_call *call, uint64_t *size, aks_error **err)
{
	pending p;
	memset(&p, 0, sizeof(p));
	p.fn = fn;
	p.ud = ud;
	aks__sha256_init(&p.hash);
	add_pending(a, &p, P_READ);
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_READ, 0, p.id);
	aks__agent_put_str(&b, AKS_AGENT_T_PATH, path);
	aks__agent_put_u64(&b, AKS_AGENT_T_MAX_SIZE, max_size);
	if (a->beneath)
		aks__agent_put_str(&b, AKS_AGENT_T_BENEATH, a->beneath);
	aks__agent_frame_end(&b, s);
	int rc = send_buf(a, &b, err);
	aks__agent_buf_free(&b);
	if (rc == AKS_OK) {
		int64_t deadline = call && call->deadline_ms ? call->deadline_ms : 0;
		rc = wait_pending(a, &p, deadline, call);
		rc = rc == AKS_OK ? finish(a, &p, err) : fail_wait(a, rc, "agent read", err);
	}
	drop_pending(a, &p);
	if (size)
		*size = p.got;
	return rc;
}

/* The download of aks__agent_read_into: the file added to the result on the first chunk
 * (or at the end, for an empty file), its bytes written after it. */
typedef struct read_into {
	aks_agent *a;
	aks_result *out;
	const char *name;
	bool added;
	int rc;         /* the result's first refusal (the host's file limit), or AKS_OK */
	aks_error *err; /* its message */
} read_into;

static int add_file(read_into *c)
{
	if (c->added || c->rc != AKS_OK)
		return c->rc;
	const aks_host_api *host = c->a->host;
	c->added = true;
	c->rc = host->result_add_file(c->out, c->name, "application/octet-stream");
	if (c->rc != AKS_OK)
		c->rc =
		    host->error_set(&c->err, c->rc, "cannot add file '%s' to the result", c->name);
	return c->rc;
}

/* On the client's reader thread: after the result's first refusal the rest is dropped. */
static void write_chunk(void *ud, int stream, const void *data, size_t len)
{
	read_into *c = ud;
	if (stream != AKS_STREAM_FILE || add_file(c) != AKS_OK)
		return;
	c->rc = c->a->host->result_write(c->out, AKS_STREAM_FILE, data, len, &c->err);
}

int aks__agent_read_into(aks_agent *a, const char *path, uint64_t max_size, aks_result *out,
                         const char *name, const aks_call *call, bool *refused, aks_error **err)
{
	read_into c = {.a = a, .out = out, .name = name, .rc = AKS_OK};
	*refused = false;
	int rc = aks__agent_read_file(a, path, max_size, write_chunk, &c, call, NULL, err);
	if (rc == AKS_OK && c.rc == AKS_OK)
		add_file(&c); /* an empty file sent no chunk */
	if (rc == AKS_OK && c.rc != AKS_OK) {
		*refused = true;
		rc = c.rc;
		if (err && !*err) {
			*err = c.err;
			c.err = NULL;
		}
	}
	if (c.err)
		a->host->error_free(c.err);
	return rc;
}

/* ---- the egress proxy ---- */

uint32_t aks__agent_features(const aks_agent *a)
{
	return a->features;
}

int aks__agent_net_listen(aks_agent *a, uint32_t window, const aks_call *call, unsigned *port,
                          aks_error **err)
{
	pending p;
	memset(&p, 0, sizeof(p));
	add_pending(a, &p, P_LISTEN);
	p.window = window;
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_NET_LISTEN, 0, p.id);
	aks__agent_put_u32(&b, AKS_AGENT_T_WINDOW, window);
	aks__agent_frame_end(&b, s);
	int rc = ask(a, &p, &b, call, "agent net listen", err);
	drop_pending(a, &p);
	if (rc == AKS_OK)
		*port = p.port;
	return rc;
}

void aks__agent_set_net_handler(aks_agent *a, aks_agent_net_fn fn, void *ud)
{
	pthread_mutex_lock(&a->mu);
	a->net_fn = fn;
	a->net_ud = ud;
	while (!fn && a->net_calls > 0)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

int aks__agent_send_frames(aks_agent *a, aks_agent_buf *b, aks_error **err)
{
	return aks__agent_buf_pending(b) ? send_buf(a, b, err) : AKS_OK;
}

/* ---- diagnostics ---- */

int aks__agent_send_raw(aks_agent *a, const void *data, size_t len, aks_error **err)
{
	aks_agent_buf b = {0};
	aks__agent_put_raw(&b, data, len);
	int rc = send_buf(a, &b, err);
	aks__agent_buf_free(&b);
	return rc;
}

int aks__agent_set_beneath(aks_agent *a, const char *dir)
{
	char *copy = dir ? strdup(dir) : NULL;
	if (dir && !copy)
		return AKS_ENOMEM;
	free(a->beneath);
	a->beneath = copy;
	return AKS_OK;
}

unsigned aks__agent_stray_errors(aks_agent *a, char *msg, size_t msglen)
{
	pthread_mutex_lock(&a->mu);
	unsigned n = a->stray;
	if (msg && msglen)
		snprintf(msg, msglen, "%s", a->stray_msg);
	pthread_mutex_unlock(&a->mu);
	return n;
}
