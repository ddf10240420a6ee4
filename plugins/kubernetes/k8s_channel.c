/*
 * plugins/kubernetes/k8s_channel.c - the exec WebSocket's channel protocol,
 * with no sockets: every binary message is one channel byte followed by the
 * payload. 0 is stdin (client to server), 1 stdout, 2 stderr, 3 the status
 * (a metav1.Status as JSON in v4 and v5), 4 resize; v5 adds 255, a client
 * message "close this channel", which half-closes stdin.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_json.h"
#include "k8s_pure.h"

void k8s_demux_init(k8s_demux *d, k8s_out_fn out, void *ctx)
{
	memset(d, 0, sizeof(*d));
	d->out = out;
	d->ctx = ctx;
	d->channel = -1;
}

void k8s_demux_fini(k8s_demux *d)
{
	aks__buf_free(&d->status);
}

void k8s_demux_feed(k8s_demux *d, const void *data, size_t len, bool first)
{
	const char *p = data;
	if (first)
		d->channel = -1;
	if (d->channel < 0) {
		if (!len)
			return; /* the channel byte comes in a later fragment */
		d->channel = (unsigned char)*p;
		p++;
		len--;
	}
	if (!len)
		return; /* the server's empty first stdout frame, for one */
	switch (d->channel) {
	case K8S_CH_STDOUT:
	case K8S_CH_STDERR:
		d->bytes[d->channel] += len;
		if (!d->stopped && d->out && !d->out(d->ctx, d->channel, p, len))
			d->stopped = true;
		break;
	case K8S_CH_ERROR: {
		size_t room = K8S_STATUS_MAX - d->status.len;
		if (len > room) {
			d->status_truncated = true;
			len = room;
		}
		if (len && aks__buf_append(&d->status, p, len) != AKS_OK)
			d->status_truncated = true;
		break;
	}
	default:
		break; /* stdin echo, resize: nothing for us */
	}
}

static bool parse_int(const char *s, int *out)
{
	if (!s || !*s)
		return false;
	errno = 0;
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < INT_MIN || v > INT_MAX)
		return false;
	*out = (int)v;
	return true;
}

int k8s_status_exit_code(const char *status, size_t len, int *exit_code, k8s_err *e)
{
	*exit_code = -1;
	if (!status || !len)
		return k8s_err_set(e, AKS_ERROR,
		                   "the exec stream ended without a status from the server");
	json_tokener *tok = json_tokener_new();
	if (!tok)
		return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	json_object *j = json_tokener_parse_ex(tok, status, (int)(len > INT_MAX ? INT_MAX : len));
	json_tokener_free(tok);
	int rc = AKS_OK;
	const char *st = aks__jstr(j, "status");
	if (!j || !json_object_is_type(j, json_type_object) || !st) {
		rc = k8s_err_set(e, AKS_ERROR, "exec failed: %.*s", (int)(len > 500 ? 500 : len),
		                 status);
	} else if (strcmp(st, "Success") == 0) {
		*exit_code = 0;
	} else {
		const char *reason = aks__jstr(j, "reason");
		bool found = false;
		if (reason && strcmp(reason, "NonZeroExitCode") == 0) {
			json_object *causes = aks__jget(aks__jget(j, "details"), "causes");
			size_t n = json_object_is_type(causes, json_type_array)
			               ? json_object_array_length(causes)
			               : 0;
			for (size_t i = 0; i < n && !found; i++) {
				json_object *c = json_object_array_get_idx(causes, i);
				const char *cr = aks__jstr(c, "reason");
				if (cr && strcmp(cr, "ExitCode") == 0 &&
				    parse_int(aks__jstr(c, "message"), exit_code))
					found = true;
			}
		}
		if (!found) {
			const char *msg = aks__jstr(j, "message");
			rc = k8s_err_set(e, AKS_ERROR, "exec failed: %s",
			                 msg && *msg ? msg : (reason ? reason : st));
		}
	}
	json_object_put(j);
	return rc;
}

unsigned char *k8s_frame(int channel, const void *data, size_t len, size_t pre, size_t *framed_len)
{
	unsigned char *f = malloc(pre + 1 + len);
	if (!f)
		return NULL;
	f[pre] = (unsigned char)channel;
	if (len)
		memcpy(f + pre + 1, data, len);
	*framed_len = 1 + len;
	return f;
}
