/*
 * agent/proto.c - the frame decoder and builder of the agent protocol (see proto.h and
 * docs/agent-protocol.md). Shared by the agent, the host-side client and the fuzz target,
 * so all three parse exactly the same way. libc only (and plugins/common/buf.c, libc only
 * too, for the builder's memory).
 */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

#include "aks_buf.h"

int aks__agent_decoder_init(aks_agent_decoder *d, uint32_t max_payload)
{
	memset(d, 0, sizeof(*d));
	d->max_payload = max_payload;
	d->cap = AKS_AGENT_HEADER + (size_t)max_payload;
	d->buf = malloc(d->cap);
	return d->buf ? 0 : -1;
}

void aks__agent_decoder_free(aks_agent_decoder *d)
{
	free(d->buf);
	d->buf = NULL;
}

uint8_t *aks__agent_decoder_space(aks_agent_decoder *d, size_t *avail)
{
	if (d->start == d->end) {
		d->start = d->end = 0;
	} else if (d->start > 0 && d->cap - d->end < d->cap / 2) {
		memmove(d->buf, d->buf + d->start, d->end - d->start);
		d->end -= d->start;
		d->start = 0;
	}
	if (d->cap - d->end == 0 && d->start > 0) {
		memmove(d->buf, d->buf + d->start, d->end - d->start);
		d->end -= d->start;
		d->start = 0;
	}
	*avail = d->cap - d->end;
	return d->buf + d->end;
}

void aks__agent_decoder_commit(aks_agent_decoder *d, size_t n)
{
	d->end += n;
}

size_t aks__agent_decoder_feed(aks_agent_decoder *d, const void *data, size_t n)
{
	size_t avail;
	uint8_t *p = aks__agent_decoder_space(d, &avail);
	size_t take = n < avail ? n : avail;
	memcpy(p, data, take);
	d->end += take;
	return take;
}

/* What a header at p says is wrong with it: 0 (nothing) or an AKS_AGENT_E_* code. */
static uint32_t header_problem(const aks_agent_decoder *d, const uint8_t *p)
{
	if (p[0] != AKS_AGENT_MAGIC0 || p[1] != AKS_AGENT_MAGIC1)
		return AKS_AGENT_E_MALFORMED;
	if (p[2] != AKS_AGENT_VERSION)
		return AKS_AGENT_E_VERSION;
	if (aks__agent_get16(p + 6) != 0)
		return AKS_AGENT_E_MALFORMED;
	if (aks__agent_get32(p + 12) > d->max_payload)
		return AKS_AGENT_E_TOO_LARGE;
	return 0;
}

static void header_into(const uint8_t *p, aks_agent_frame *f)
{
	f->version = p[2];
	f->type = p[3];
	f->flags = aks__agent_get16(p + 4);
	f->id = aks__agent_get32(p + 8);
	f->len = aks__agent_get32(p + 12);
	f->payload = NULL;
}

/* In desync mode: drops bytes up to the next place a valid header could start. Returns
 * true when a whole valid header is at start. */
static bool resync(aks_agent_decoder *d)
{
	while (d->start < d->end) {
		const uint8_t *p = d->buf + d->start;
		size_t have = d->end - d->start;
		/* A header prefix cut by the end of what arrived: wait for the rest. */
		bool prefix = p[0] == AKS_AGENT_MAGIC0 && (have < 2 || p[1] == AKS_AGENT_MAGIC1) &&
		              (have < 3 || p[2] == AKS_AGENT_VERSION);
		if (prefix && have < AKS_AGENT_HEADER)
			return false;
		if (prefix && header_problem(d, p) == 0)
			return true;
		d->start++;
	}
	return false;
}

int aks__agent_decoder_next(aks_agent_decoder *d, aks_agent_frame *f, uint32_t *code)
{
	memset(f, 0, sizeof(*f));
	*code = 0;
	if (d->skip) {
		size_t have = d->end - d->start;
		size_t drop = d->skip < have ? (size_t)d->skip : have;
		d->start += drop;
		d->skip -= drop;
		if (d->skip)
			return AKS_AGENT_DEC_MORE;
	}
	if (d->desync) {
		if (!resync(d))
			return AKS_AGENT_DEC_MORE;
		d->desync = false;
	}
	size_t have = d->end - d->start;
	if (have < AKS_AGENT_HEADER) {
		/* Junk that cannot begin a header is reported now, not when 16 bytes arrived. */
		const uint8_t *p = d->buf + d->start;
		if ((have >= 1 && p[0] != AKS_AGENT_MAGIC0) ||
		    (have >= 2 && p[1] != AKS_AGENT_MAGIC1)) {
			*code = AKS_AGENT_E_MALFORMED;
			d->desync = true;
			d->start++;
			return AKS_AGENT_DEC_ERROR;
		}
		return AKS_AGENT_DEC_MORE;
	}
	const uint8_t *p = d->buf + d->start;
	uint32_t problem = header_problem(d, p);
	if (problem == AKS_AGENT_E_TOO_LARGE) {
		/* The header is sound, only the payload is too big: skip it and stay in sync. */
		header_into(p, f);
		*code = problem;
		d->start += AKS_AGENT_HEADER;
		d->skip = f->len;
		return AKS_AGENT_DEC_ERROR;
	}
	if (problem) {
		if (problem == AKS_AGENT_E_VERSION) {
			header_into(p, f);
			f->len = 0;
		}
		*code = problem;
		d->desync = true;
		d->start++;
		return AKS_AGENT_DEC_ERROR;
	}
	uint32_t len = aks__agent_get32(p + 12);
	if (have < AKS_AGENT_HEADER + (size_t)len)
		return AKS_AGENT_DEC_MORE;
	header_into(p, f);
	f->payload = p + AKS_AGENT_HEADER;
	d->start += AKS_AGENT_HEADER + (size_t)len;
	return AKS_AGENT_DEC_FRAME;
}

int aks__agent_tlv_next(aks_agent_tlv *it, uint16_t *tag, const uint8_t **value, uint32_t *len)
{
	if (it->left == 0)
		return 0;
	if (it->left < 6)
		return -1;
	uint32_t n = aks__agent_get32(it->p + 2);
	if (n > it->left - 6)
		return -1;
	*tag = aks__agent_get16(it->p);
	*len = n;
	*value = it->p + 6;
	it->p += 6 + (size_t)n;
	it->left -= 6 + (size_t)n;
	return 1;
}

void aks__agent_buf_free(aks_agent_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void aks__agent_buf_consume(aks_agent_buf *b, size_t n)
{
	b->off += n;
	if (b->off >= b->len) {
		b->off = b->len = 0;
	} else if (b->off > b->cap / 2) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
}

/* Adds n bytes at the end and returns where they start, or NULL (and marks the buffer
 * failed). The memory grows as an aks_buf's does: the buffer is lent to aks__buf_reserve. */
static uint8_t *grow(aks_agent_buf *b, size_t n)
{
	if (b->failed)
		return NULL;
	aks_buf mem = {(char *)b->data, b->len, b->cap, false};
	if (aks__buf_reserve(&mem, n) != AKS_OK) {
		b->failed = true;
		return NULL;
	}
	b->data = (uint8_t *)mem.data;
	b->cap = mem.cap;
	uint8_t *p = b->data + b->len;
	b->len += n;
	return p;
}

size_t aks__agent_frame_begin(aks_agent_buf *b, uint8_t type, uint16_t flags, uint32_t id)
{
	size_t start = b->len;
	uint8_t *p = grow(b, AKS_AGENT_HEADER);
	if (!p)
		return start;
	p[0] = AKS_AGENT_MAGIC0;
	p[1] = AKS_AGENT_MAGIC1;
	p[2] = AKS_AGENT_VERSION;
	p[3] = type;
	aks__agent_put16(p + 4, flags);
	aks__agent_put16(p + 6, 0);
	aks__agent_put32(p + 8, id);
	aks__agent_put32(p + 12, 0);
	return start;
}

void aks__agent_put_raw(aks_agent_buf *b, const void *v, size_t n)
{
	uint8_t *p = grow(b, n);
	if (p && n)
		memcpy(p, v, n);
}

void aks__agent_put_bytes(aks_agent_buf *b, uint16_t tag, const void *v, size_t n)
{
	if (n > AKS_AGENT_MAX_PAYLOAD) {
		b->failed = true;
		return;
	}
	uint8_t *p = grow(b, 6 + n);
	if (!p)
		return;
	aks__agent_put16(p, tag);
	aks__agent_put32(p + 2, (uint32_t)n);
	if (n)
		memcpy(p + 6, v, n);
}

void aks__agent_put_str(aks_agent_buf *b, uint16_t tag, const char *s)
{
	aks__agent_put_bytes(b, tag, s, strlen(s));
}

void aks__agent_put_u32(aks_agent_buf *b, uint16_t tag, uint32_t v)
{
	uint8_t raw[4];
	aks__agent_put32(raw, v);
	aks__agent_put_bytes(b, tag, raw, 4);
}

void aks__agent_put_u64(aks_agent_buf *b, uint16_t tag, uint64_t v)
{
	uint8_t raw[8];
	aks__agent_put64(raw, v);
	aks__agent_put_bytes(b, tag, raw, 8);
}

void aks__agent_frame_end(aks_agent_buf *b, size_t start)
{
	if (b->failed)
		return;
	size_t len = b->len - start - AKS_AGENT_HEADER;
	if (len > AKS_AGENT_MAX_PAYLOAD) {
		b->failed = true;
		return;
	}
	aks__agent_put32(b->data + start + 12, (uint32_t)len);
}

void aks__agent_frame_data(aks_agent_buf *b, uint8_t type, uint16_t flags, uint32_t id,
                           const void *data, size_t n)
{
	size_t start = aks__agent_frame_begin(b, type, flags, id);
	aks__agent_put_raw(b, data, n);
	aks__agent_frame_end(b, start);
}

const char *aks__agent_type_name(uint8_t type)
{
	switch (type) {
	case AKS_AGENT_HELLO:
		return "HELLO";
	case AKS_AGENT_HELLO_OK:
		return "HELLO_OK";
	case AKS_AGENT_PING:
		return "PING";
	case AKS_AGENT_PONG:
		return "PONG";
	case AKS_AGENT_CREDIT:
		return "CREDIT";
	case AKS_AGENT_ERROR:
		return "ERROR";
	case AKS_AGENT_SPAWN:
		return "SPAWN";
	case AKS_AGENT_KILL:
		return "KILL";
	case AKS_AGENT_STDOUT:
		return "STDOUT";
	case AKS_AGENT_STDERR:
		return "STDERR";
	case AKS_AGENT_EXIT:
		return "EXIT";
	case AKS_AGENT_WRITE:
		return "WRITE";
	case AKS_AGENT_WRITE_DATA:
		return "WRITE_DATA";
	case AKS_AGENT_WRITE_OK:
		return "WRITE_OK";
	case AKS_AGENT_READ:
		return "READ";
	case AKS_AGENT_READ_INFO:
		return "READ_INFO";
	case AKS_AGENT_READ_DATA:
		return "READ_DATA";
	case AKS_AGENT_READ_END:
		return "READ_END";
	case AKS_AGENT_NET_LISTEN:
		return "NET_LISTEN";
	case AKS_AGENT_NET_LISTENING:
		return "NET_LISTENING";
	case AKS_AGENT_NET_OPEN:
		return "NET_OPEN";
	case AKS_AGENT_NET_OPENED:
		return "NET_OPENED";
	case AKS_AGENT_NET_DATA:
		return "NET_DATA";
	case AKS_AGENT_NET_CREDIT:
		return "NET_CREDIT";
	case AKS_AGENT_NET_EOF:
		return "NET_EOF";
	case AKS_AGENT_NET_CLOSE:
		return "NET_CLOSE";
	default:
		return NULL;
	}
}
