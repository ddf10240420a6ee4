/*
 * agent/proto.h - the aksandbox-agent wire protocol: frame layout, types, fields, the
 * incremental frame decoder and the frame builder (docs/agent-protocol.md is the
 * specification; this is its one implementation, shared by the agent, the host-side client
 * plugins/common/agent/agent_client.c and the fuzz target). libc only: the agent is a static
 * program.
 *
 * Every integer on the wire is big-endian (network order).
 */
#ifndef AKS_AGENT_PROTO_H
#define AKS_AGENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AKS_AGENT_MAGIC0  0x41 /* 'A' */
#define AKS_AGENT_MAGIC1  0x4B /* 'K' */
#define AKS_AGENT_VERSION 1    /* the frame format this code speaks */
#define AKS_AGENT_HEADER  16
/* The hard maximum of a frame's payload; larger frames are refused and skipped. */
#define AKS_AGENT_MAX_PAYLOAD (1024u * 1024u)
/* The largest data chunk (stdout, stderr, file data) either side sends. */
#define AKS_AGENT_CHUNK (64u * 1024u)
/* The default per-request output window (bytes in flight before the host grants credit). */
#define AKS_AGENT_WINDOW (256u * 1024u)

/* Frame types. Direction: h = host to agent, a = agent to host. */
enum aks_agent_type {
	AKS_AGENT_HELLO = 0x01,    /* h: VERSION_MIN, VERSION_MAX, WINDOW */
	AKS_AGENT_HELLO_OK = 0x02, /* a: VERSION, AGENT, MAX_PAYLOAD, WINDOW, FEATURES, PID, LOST */
	AKS_AGENT_PING = 0x03,     /* h: any payload (at most 1 KiB) */
	AKS_AGENT_PONG = 0x04,     /* a: the ping's payload */
	AKS_AGENT_CREDIT = 0x05,   /* h: BYTES more output the request may send */
	AKS_AGENT_ERROR = 0x06,    /* a: CODE, MESSAGE, FRAME_TYPE; ends the request */
	AKS_AGENT_SPAWN = 0x10,    /* h: ARGV* | SHELL | CODE+LANGUAGE, CWD, ENV*, STDIN, ... */
	AKS_AGENT_KILL = 0x11,     /* h: SIGNAL (default SIGKILL), for the spawn's id */
	AKS_AGENT_STDOUT = 0x12,   /* a: raw bytes */
	AKS_AGENT_STDERR = 0x13,   /* a: raw bytes */
	AKS_AGENT_EXIT = 0x14,     /* a: EXIT_CODE, EXIT_SIGNAL, TIMED_OUT, OUT/ERR_BYTES */
	AKS_AGENT_WRITE = 0x20,    /* h: PATH, SIZE, SHA256, MODE */
	AKS_AGENT_WRITE_DATA = 0x21, /* h: raw bytes; flag END on the last */
	AKS_AGENT_WRITE_OK = 0x22,   /* a: SIZE, SHA256 */
	AKS_AGENT_READ = 0x30,       /* h: PATH, MAX_SIZE */
	AKS_AGENT_READ_INFO = 0x31,  /* a: SIZE, MODE */
	AKS_AGENT_READ_DATA = 0x32,  /* a: raw bytes */
	AKS_AGENT_READ_END = 0x33,   /* a: SIZE, SHA256 */
	/* The egress proxy (docs/agent-protocol.md, "Egress"). Streams the agent opens carry
	 * ids with AKS_AGENT_NET_ID set, so they never meet the host's request ids. */
	AKS_AGENT_NET_LISTEN = 0x40,    /* h: WINDOW: starts the proxy; answered by NET_LISTENING */
	AKS_AGENT_NET_LISTENING = 0x41, /* a: PORT, WINDOW (flag END) */
	AKS_AGENT_NET_OPEN = 0x42,      /* a: HOST, PORT, NET_KIND [, DATA] for a new stream */
	AKS_AGENT_NET_OPENED = 0x43,    /* h: ADDRESS: the host connected; relay from now on */
	AKS_AGENT_NET_DATA = 0x44,      /* both: raw bytes of a stream, under the peer's credit */
	AKS_AGENT_NET_CREDIT = 0x45,    /* both: BYTES more the peer may send on the stream */
	AKS_AGENT_NET_EOF = 0x46,       /* both: the sender has no more bytes for the stream */
	AKS_AGENT_NET_CLOSE = 0x47,     /* both: NET_CODE, MESSAGE: the stream is over (END) */
};

/* Header flags. */
#define AKS_AGENT_FLAG_END 0x0001u

/* Payload field tags (TLV: tag u16, length u32, value). */
enum aks_agent_tag {
	AKS_AGENT_T_MESSAGE = 1,    /* string */
	AKS_AGENT_T_CODE = 2,       /* u32 error code */
	AKS_AGENT_T_FRAME_TYPE = 3, /* u32 the offending frame's type */
	AKS_AGENT_T_VERSION_MIN = 10,
	AKS_AGENT_T_VERSION_MAX = 11,
	AKS_AGENT_T_VERSION = 12,
	AKS_AGENT_T_AGENT = 13, /* string: "aksandbox-agent <version>" */
	AKS_AGENT_T_MAX_PAYLOAD = 14,
	AKS_AGENT_T_WINDOW = 15,
	AKS_AGENT_T_FEATURES = 16, /* u32 bit set, AKS_AGENT_FEATURE_* */
	AKS_AGENT_T_PID = 17,
	AKS_AGENT_T_MAX_REQUESTS = 18,
	AKS_AGENT_T_INSTANCE = 19,   /* u64: random, the same for the agent process's life */
	AKS_AGENT_T_ARGV = 20,       /* string, repeated in order */
	AKS_AGENT_T_SHELL = 21,      /* string: run with /bin/sh -c */
	AKS_AGENT_T_SRC = 22,        /* string: code in LANGUAGE */
	AKS_AGENT_T_LANGUAGE = 23,   /* string */
	AKS_AGENT_T_CWD = 24,        /* string */
	AKS_AGENT_T_ENV = 25,        /* string "NAME=value", repeated */
	AKS_AGENT_T_ENV_CLEAR = 26,  /* u32: 1 = start from an empty environment */
	AKS_AGENT_T_STDIN = 27,      /* bytes */
	AKS_AGENT_T_TIMEOUT_MS = 28, /* u32: relative deadline; 0 or absent = none */
	AKS_AGENT_T_SESSION = 29,    /* string: persistent interpreter session name */
	AKS_AGENT_T_LOST = 30,   /* u64: the INSTANCE of a gone agent whose Python state is lost */
	AKS_AGENT_T_SIGNAL = 40, /* u32 */
	AKS_AGENT_T_EXIT_CODE = 41, /* u32 holding an int32 (-1 when killed by a signal) */
	AKS_AGENT_T_EXIT_SIGNAL = 42,
	AKS_AGENT_T_TIMED_OUT = 43,
	AKS_AGENT_T_OUT_BYTES = 44, /* u64 */
	AKS_AGENT_T_ERR_BYTES = 45, /* u64 */
	AKS_AGENT_T_NOTICE = 46,    /* string */
	AKS_AGENT_T_BYTES = 50,     /* u32 credit */
	AKS_AGENT_T_PATH = 60,
	AKS_AGENT_T_SIZE = 61,     /* u64 */
	AKS_AGENT_T_SHA256 = 62,   /* 32 bytes */
	AKS_AGENT_T_MODE = 63,     /* u32 permission bits */
	AKS_AGENT_T_MAX_SIZE = 64, /* u64 */
	AKS_AGENT_T_BENEATH = 65,  /* string: the path must resolve inside this directory */
	AKS_AGENT_T_HOST = 70,     /* string: a destination name or IP literal */
	AKS_AGENT_T_PORT = 71,     /* u32: a TCP port */
	AKS_AGENT_T_NET_KIND = 72, /* u32: AKS_AGENT_NET_* how the program asked */
	AKS_AGENT_T_DATA = 73, /* bytes: a plain HTTP request's head, to check before connecting */
	AKS_AGENT_T_ADDRESS = 74,  /* string: the address the host connected to */
	AKS_AGENT_T_NET_CODE = 75, /* u32: AKS_AGENT_NC_* why a stream closed */
};

/* Stream ids the agent chooses (NET_OPEN) have this bit; the host's never do. */
#define AKS_AGENT_NET_ID 0x80000000u
/* How a program asked the proxy for a stream (T_NET_KIND). */
enum aks_agent_net_kind {
	AKS_AGENT_NET_CONNECT = 1, /* HTTP CONNECT: a tunnel */
	AKS_AGENT_NET_HTTP = 2,    /* a plain HTTP request (DATA holds its head, origin-form) */
	AKS_AGENT_NET_SOCKS = 3,   /* SOCKS5 CONNECT: a tunnel */
};
/* Why a stream closed (T_NET_CODE); the agent turns each into its proxy answer. */
enum aks_agent_net_code {
	AKS_AGENT_NC_DONE = 0,        /* both ends finished */
	AKS_AGENT_NC_POLICY = 1,      /* the destination is not allowed (HTTP 403) */
	AKS_AGENT_NC_RESOLVE = 2,     /* the name does not resolve (HTTP 502) */
	AKS_AGENT_NC_REFUSED = 3,     /* the destination refused the connection (HTTP 502) */
	AKS_AGENT_NC_UNREACHABLE = 4, /* no route, or the connection failed (HTTP 502) */
	AKS_AGENT_NC_TIMEOUT = 5,     /* the connection timed out (HTTP 504) */
	AKS_AGENT_NC_LIMIT = 6,       /* too many streams (HTTP 503) */
	AKS_AGENT_NC_PROTOCOL = 7,    /* a peer broke the stream's rules (credit, order) */
	AKS_AGENT_NC_RESET = 8,       /* one end went away */
};
/* Bytes either side may have in flight on one stream before the peer grants more. */
#define AKS_AGENT_NET_WINDOW (256u * 1024u)
/* Streams at once per agent; more connections are refused at once. */
#define AKS_AGENT_NET_MAX 64

#define AKS_AGENT_FEATURE_PYTHON_SESSION 0x1u
#define AKS_AGENT_FEATURE_EGRESS         0x2u /* NET_LISTEN and the NET_* streams */

/* Error codes carried by ERROR frames (T_CODE). */
enum aks_agent_errcode {
	AKS_AGENT_E_MALFORMED = 1,    /* bad magic or reserved bits: the stream resynchronizes */
	AKS_AGENT_E_VERSION = 2,      /* unsupported frame or protocol version */
	AKS_AGENT_E_TOO_LARGE = 3,    /* payload over the maximum: the frame is skipped */
	AKS_AGENT_E_UNKNOWN_TYPE = 4, /* the message names the type */
	AKS_AGENT_E_BAD_PAYLOAD = 5,  /* a field is malformed, missing or of the wrong size */
	AKS_AGENT_E_NO_HELLO = 6,     /* a request before the hello */
	AKS_AGENT_E_DUPLICATE_ID = 7, /* the id names a request still running */
	AKS_AGENT_E_NO_SUCH_REQUEST = 8,
	AKS_AGENT_E_LIMIT = 9,          /* too many requests, code too long, file too large */
	AKS_AGENT_E_IO = 10,            /* an operating-system call failed (message says which) */
	AKS_AGENT_E_NOT_FOUND = 11,     /* the path or program does not exist */
	AKS_AGENT_E_SIZE_MISMATCH = 12, /* a file's bytes differ in number from its SIZE */
	AKS_AGENT_E_HASH_MISMATCH = 13, /* a file's bytes do not hash to its SHA256 */
	AKS_AGENT_E_SPAWN = 14,         /* fork/pipe failed */
	AKS_AGENT_E_BUSY = 15,          /* the session is running another request */
	AKS_AGENT_E_ESCAPES = 16,       /* the path resolves outside BENEATH */
};

/* ---- big-endian helpers ---- */
static inline uint16_t aks__agent_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t aks__agent_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t aks__agent_get64(const uint8_t *p)
{
	return (uint64_t)aks__agent_get32(p) << 32 | aks__agent_get32(p + 4);
}
static inline void aks__agent_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void aks__agent_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void aks__agent_put64(uint8_t *p, uint64_t v)
{
	aks__agent_put32(p, (uint32_t)(v >> 32));
	aks__agent_put32(p + 4, (uint32_t)v);
}

/* ---- the decoder: bytes in any split, whole frames out ---- */

typedef struct aks_agent_frame {
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint32_t id;
	uint32_t len;
	const uint8_t *payload; /* into the decoder's buffer: valid until the next call */
} aks_agent_frame;

typedef struct aks_agent_decoder {
	uint8_t *buf;
	size_t cap;   /* AKS_AGENT_HEADER + max_payload */
	size_t start; /* first undecoded byte */
	size_t end;   /* one past the last received byte */
	uint32_t max_payload;
	uint64_t skip; /* bytes of a too-large payload still to drop */
	bool desync;   /* lost the frame boundary: scanning for the next header */
} aks_agent_decoder;

/* Allocates a buffer for one frame of at most max_payload bytes: 0, or -1 (no memory). */
int aks__agent_decoder_init(aks_agent_decoder *d, uint32_t max_payload);
void aks__agent_decoder_free(aks_agent_decoder *d);
/* Where to read received bytes into, and how many fit (never 0 unless the decoder still
 * holds a whole frame, which only happens if next() was not called). */
uint8_t *aks__agent_decoder_space(aks_agent_decoder *d, size_t *avail);
void aks__agent_decoder_commit(aks_agent_decoder *d, size_t n);
/* Copies bytes in (for callers that hold their own buffer): returns how many were taken. */
size_t aks__agent_decoder_feed(aks_agent_decoder *d, const void *data, size_t n);

enum { AKS_AGENT_DEC_MORE = 0, AKS_AGENT_DEC_FRAME = 1, AKS_AGENT_DEC_ERROR = -1 };
/* Decodes the next frame. FRAME: *f is filled. MORE: feed more bytes. ERROR: *code (an
 * AKS_AGENT_E_*) and f->type/f->id (0 when unknown) describe a malformed frame; the decoder
 * has already recovered (skipping a too-large payload, or scanning for the next header) and
 * reports one ERROR per lost stretch. Never reads outside what was fed. */
int aks__agent_decoder_next(aks_agent_decoder *d, aks_agent_frame *f, uint32_t *code);

/* ---- payload fields ---- */

typedef struct aks_agent_tlv {
	const uint8_t *p;
	size_t left;
} aks_agent_tlv;

static inline void aks__agent_tlv_init(aks_agent_tlv *it, const aks_agent_frame *f)
{
	it->p = f->payload;
	it->left = f->len;
}
/* 1: a field (tag, value, len); 0: the end; -1: a truncated field. */
int aks__agent_tlv_next(aks_agent_tlv *it, uint16_t *tag, const uint8_t **value, uint32_t *len);

/* ---- the builder: frames appended to a growable byte buffer ---- */

/* The memory grows as plugins/common/aks_buf.h's does (proto.c lends it to
 * aks__buf_reserve). TODO(agent module): hold an aks_buf here once core/agent_client.c no
 * longer reaches into data, len and failed itself. */
typedef struct aks_agent_buf {
	uint8_t *data;
	size_t off; /* bytes already consumed (sent) from the front */
	size_t len; /* bytes in use, from 0 */
	size_t cap;
	bool failed; /* an allocation failed or a frame grew past the maximum */
} aks_agent_buf;

void aks__agent_buf_free(aks_agent_buf *b);
/* Bytes waiting to be sent. */
static inline size_t aks__agent_buf_pending(const aks_agent_buf *b)
{
	return b->len - b->off;
}
/* Marks n bytes sent; resets the buffer when it empties, shifts it when mostly consumed. */
void aks__agent_buf_consume(aks_agent_buf *b, size_t n);
/* Starts a frame and returns its offset for frame_end(). */
size_t aks__agent_frame_begin(aks_agent_buf *b, uint8_t type, uint16_t flags, uint32_t id);
void aks__agent_put_bytes(aks_agent_buf *b, uint16_t tag, const void *v, size_t n);
void aks__agent_put_str(aks_agent_buf *b, uint16_t tag, const char *s);
void aks__agent_put_u32(aks_agent_buf *b, uint16_t tag, uint32_t v);
void aks__agent_put_u64(aks_agent_buf *b, uint16_t tag, uint64_t v);
/* Appends raw payload bytes (data frames). */
void aks__agent_put_raw(aks_agent_buf *b, const void *v, size_t n);
/* Writes the length into the header; a payload over the maximum marks the buffer failed. */
void aks__agent_frame_end(aks_agent_buf *b, size_t start);
/* A whole data frame in one call. */
void aks__agent_frame_data(aks_agent_buf *b, uint8_t type, uint16_t flags, uint32_t id,
                           const void *data, size_t n);

/* A readable name of a frame type ("SPAWN"), or NULL for an unknown one. */
const char *aks__agent_type_name(uint8_t type);

#endif /* AKS_AGENT_PROTO_H */
