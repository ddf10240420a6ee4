/*
 * plugins/docker/dk_parse.c - what the Docker Engine sends, read without I/O: the frames of a
 * non-TTY exec's output, the head of the answer to an upgraded exec start, and the JSON
 * bodies the plugin decides on (exec create and inspect, the path-stat header, a pull's
 * progress, error messages). Every input here is bytes from the engine (or anything in
 * between), so nothing is assumed of their shape; tests/fuzz/fuzz_docker_*.c feed them
 * anything.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aks_base64.h"
#include "aks_container.h"
#include "aks_json.h"
#include "dk_internal.h"

/* ---- the multiplexed stream ------------------------------------------------------------ */

void dk_demux_init(dk_demux *d, dk_frame_fn fn, void *ctx)
{
	memset(d, 0, sizeof(*d));
	d->fn = fn;
	d->ctx = ctx;
}

void dk_demux_feed(dk_demux *d, const void *data, size_t len)
{
	const unsigned char *p = data;
	while (len) {
		if (!d->remaining) {
			size_t take = 8 - d->hlen < len ? 8 - d->hlen : len;
			memcpy(d->hdr + d->hlen, p, take);
			d->hlen += take;
			p += take;
			len -= take;
			if (d->hlen < 8)
				return;
			d->hlen = 0;
			d->stream = d->hdr[0];
			d->remaining = (size_t)d->hdr[4] << 24 | (size_t)d->hdr[5] << 16 |
			               (size_t)d->hdr[6] << 8 | (size_t)d->hdr[7];
			continue;
		}
		size_t take = d->remaining < len ? d->remaining : len;
		d->fn(d->ctx, d->stream, p, take);
		d->remaining -= take;
		p += take;
		len -= take;
	}
}

/* ---- the head of an upgraded answer ---------------------------------------------------- */

/* The value of a decimal header field (spaces around it allowed); SIZE_MAX when it is not
 * a number that fits. */
static size_t decimal_value(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	size_t v = 0;
	const char *digits = p;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (SIZE_MAX - 9) / 10)
			return SIZE_MAX;
		v = v * 10 + (size_t)(*p - '0');
	}
	if (p == digits)
		return SIZE_MAX;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p == end ? v : SIZE_MAX;
}

bool dk_head_parse(const char *data, size_t len, dk_head *h)
{
	const char *end = data && len >= 4 ? memmem(data, len, "\r\n\r\n", 4) : NULL;
	if (!end)
		return false;
	h->len = (size_t)(end - data) + 4;
	h->status = 0;
	h->body_len = SIZE_MAX;
	/* "HTTP/1.1 101 UPGRADED": the three digits after the version */
	const char *sp = memchr(data, ' ', (size_t)(end - data));
	if ((size_t)(end - data) > 5 && memcmp(data, "HTTP/", 5) == 0 && sp && end - sp > 3 &&
	    sp[1] >= '1' && sp[1] <= '5' && sp[2] >= '0' && sp[2] <= '9' && sp[3] >= '0' &&
	    sp[3] <= '9' && (end - sp == 4 || sp[4] == ' ' || sp[4] == '\r'))
		h->status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
	/* the header lines, each after a CRLF, up to the empty line */
	static const char cl[] = "Content-Length:";
	for (const char *line = memmem(data, (size_t)(end - data) + 2, "\r\n", 2); line < end;) {
		line += 2;
		const char *eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
		if ((size_t)(eol - line) >= sizeof(cl) - 1 &&
		    strncasecmp(line, cl, sizeof(cl) - 1) == 0)
			h->body_len = decimal_value(line + sizeof(cl) - 1, eol);
		line = eol;
	}
	return true;
}

/* ---- names ------------------------------------------------------------------------------ */

/* Docker ids and names: [a-zA-Z0-9][a-zA-Z0-9_.-]* (a leading '/' allowed). */
bool dk_valid_ref(const char *s)
{
	if (!s)
		return false;
	if (*s == '/')
		s++;
	if (!*s || strlen(s) > 255)
		return false;
	for (const char *p = s; *p; p++) {
		char ch = *p;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		          (ch >= '0' && ch <= '9') ||
		          (p != s && (ch == '_' || ch == '.' || ch == '-'));
		if (!ok)
			return false;
	}
	return true;
}

/* ---- JSON bodies ------------------------------------------------------------------------ */

json_object *dk_resp_json(const dk_req *r)
{
	if (!r->resp.data || !r->resp.len)
		return NULL;
	return json_tokener_parse(r->resp.data);
}

char *dk_engine_message(const dk_req *r)
{
	char *msg = aks_ctr_http_message(r->resp.data, r->resp.len, r->status);
	return msg ? msg : strdup("(out of memory)");
}

int dk_parse_exec_id(const dk_req *r, char **id)
{
	*id = NULL;
	json_object *j = dk_resp_json(r);
	const char *s = aks__jstr(j, "Id");
	int rc = AKS_ERROR;
	if (dk_valid_ref(s))
		rc = (*id = strdup(s)) ? AKS_OK : AKS_ENOMEM;
	json_object_put(j);
	return rc;
}

void dk_parse_exec_state(const dk_req *r, bool *running, int *exit_code)
{
	json_object *j = dk_resp_json(r);
	*running = json_object_get_boolean(aks__jget(j, "Running"));
	json_object *code = aks__jget(j, "ExitCode"); /* NULL for a JSON null too */
	*exit_code = !*running && code ? json_object_get_int(code) : -1;
	json_object_put(j);
}

int dk_parse_path_stat(const char *header, dk_path_stat *st)
{
	memset(st, 0, sizeof(*st));
	unsigned char *js = NULL;
	size_t js_len = 0;
	json_object *j = NULL;
	if (header &&
	    aks__base64_decode(header, strlen(header), AKS_BASE64_LOOSE, &js, &js_len) == AKS_OK)
		j = json_tokener_parse((const char *)js);
	free(js);
	st->size = json_object_get_int64(aks__jget(j, "size"));
	st->mode = (uint32_t)json_object_get_int64(aks__jget(j, "mode"));
	const char *link = aks__jstr(j, "linkTarget");
	int rc = AKS_OK;
	if (link && *link && !(st->link = strdup(link)))
		rc = AKS_ENOMEM;
	json_object_put(j);
	return rc;
}

char *dk_parse_pull_error(const dk_req *r, bool *failed)
{
	*failed = false;
	const char *body = r->resp.data, *e = body ? strstr(body, "\"error\"") : NULL;
	if (!e)
		return NULL;
	*failed = true;
	/* the progress line that holds the error: one JSON object per line */
	const char *line = e;
	while (line > body && line[-1] != '\n')
		line--;
	json_object *j = json_tokener_parse(line);
	const char *msg = aks__jstr(j, "error");
	char *why = strdup(msg && *msg ? msg : "the pull failed");
	json_object_put(j);
	return why;
}
