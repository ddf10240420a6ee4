/*
 * core/plugin/result.c - the result record: bounded stdout/stderr, exit code,
 * downloaded files, notice and provider data.
 *
 * Bounding happens here, in one place, so no provider can make the host hold
 * unbounded output: past the cap a stream's bytes are counted, not kept. An output tap
 * (result.h) sees every byte as it is written, kept or not.
 */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "plugin/result.h"
#include "tools/json.h"
#include "util/util.h"

typedef struct stream_capture {
	aks_buf kept;
	uint64_t total;
} stream_capture;

typedef struct result_file {
	char *path;
	char *mime_type;
	aks_buf data;
} result_file;

struct aks_result {
	size_t stream_cap;
	size_t file_cap;
	int exit_code;
	bool timed_out;
	unsigned egress_refused; /* connections an egress policy refused (host api 1.2) */
	stream_capture out;
	stream_capture err;
	char *notice;
	char *provider_data;
	result_file *files;
	size_t file_count;
	aks_output_tap *tap; /* a reference, or NULL */
};

/* ---- output taps ---- */

struct aks_output_tap {
	atomic_int refs;
	pthread_mutex_t mu; /* held across each call of fn, and by detach */
	aks_output_tap_fn fn;
	void *userdata;
};

aks_output_tap *aks__output_tap_new(aks_output_tap_fn fn, void *userdata)
{
	aks_output_tap *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	atomic_init(&t->refs, 1);
	pthread_mutex_init(&t->mu, NULL);
	t->fn = fn;
	t->userdata = userdata;
	return t;
}

aks_output_tap *aks__output_tap_ref(aks_output_tap *tap)
{
	if (tap)
		atomic_fetch_add(&tap->refs, 1);
	return tap;
}

void aks__output_tap_unref(aks_output_tap *tap)
{
	if (!tap || atomic_fetch_sub(&tap->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&tap->mu);
	free(tap);
}

void aks__output_tap_detach(aks_output_tap *tap)
{
	if (!tap)
		return;
	pthread_mutex_lock(&tap->mu);
	tap->fn = NULL;
	tap->userdata = NULL;
	pthread_mutex_unlock(&tap->mu);
}

static void tap_emit(aks_output_tap *tap, int stream, const void *data, size_t len)
{
	if (!tap || !len)
		return;
	pthread_mutex_lock(&tap->mu);
	if (tap->fn)
		tap->fn(tap->userdata, stream, data, len);
	pthread_mutex_unlock(&tap->mu);
}

aks_result *aks__result_new_tapped(size_t stream_cap, size_t file_cap, aks_output_tap *tap)
{
	aks_result *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->stream_cap = stream_cap;
	r->file_cap = file_cap;
	r->tap = aks__output_tap_ref(tap);
	return r;
}

aks_result *aks__result_new(size_t stream_cap, size_t file_cap)
{
	return aks__result_new_tapped(stream_cap, file_cap, NULL);
}

static int capture(stream_capture *s, size_t cap, const void *data, size_t len)
{
	s->total += len;
	if (s->kept.len >= cap)
		return AKS_OK;
	size_t room = cap - s->kept.len;
	return aks__buf_append(&s->kept, data, len < room ? len : room);
}

int aks__result_write(aks_result *r, int stream, const void *data, size_t len, aks_error **err)
{
	if (!r || (!data && len))
		return aks__error_set(err, AKS_EINVAL, "result_write: no result or no data");
	switch (stream) {
	case AKS_STREAM_STDOUT:
		tap_emit(r->tap, stream, data, len);
		if (capture(&r->out, r->stream_cap, data, len) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory keeping stdout");
		return AKS_OK;
	case AKS_STREAM_STDERR:
		tap_emit(r->tap, stream, data, len);
		if (capture(&r->err, r->stream_cap, data, len) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory keeping stderr");
		return AKS_OK;
	case AKS_STREAM_FILE: {
		if (r->file_count == 0)
			return aks__error_set(
			    err, AKS_EINVAL,
			    "result_write: no file was added with result_add_file");
		result_file *f = &r->files[r->file_count - 1];
		if (len > r->file_cap || f->data.len > r->file_cap - len)
			return aks__error_set(
			    err, AKS_ELIMIT, "file '%s' is larger than the %zu-byte download limit",
			    f->path, r->file_cap);
		if (aks__buf_append(&f->data, data, len) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory reading file '%s'",
			                      f->path);
		return AKS_OK;
	}
	default:
		return aks__error_set(err, AKS_EINVAL, "result_write: unknown stream %d", stream);
	}
}

void aks__result_set_exit_code(aks_result *r, int exit_code)
{
	if (r)
		r->exit_code = exit_code;
}

void aks__result_set_timed_out(aks_result *r)
{
	if (r)
		r->timed_out = true;
}

static int replace_string(char **slot, const char *value)
{
	char *copy = NULL;
	if (value && !(copy = strdup(value)))
		return AKS_ENOMEM;
	free(*slot);
	*slot = copy;
	return AKS_OK;
}

int aks__result_set_notice(aks_result *r, const char *notice)
{
	return r ? replace_string(&r->notice, notice) : AKS_EINVAL;
}

int aks__result_add_file(aks_result *r, const char *path, const char *mime_type)
{
	if (!r || !path)
		return AKS_EINVAL;
	result_file *files = realloc(r->files, (r->file_count + 1) * sizeof(*files));
	if (!files)
		return AKS_ENOMEM;
	r->files = files;
	result_file *f = &files[r->file_count];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	f->mime_type = strdup(mime_type ? mime_type : "application/octet-stream");
	if (!f->path || !f->mime_type) {
		free(f->path);
		free(f->mime_type);
		return AKS_ENOMEM;
	}
	r->file_count++;
	return AKS_OK;
}

int aks__result_set_provider_data(aks_result *r, const char *json_object)
{
	if (!r)
		return AKS_EINVAL;
	if (json_object) {
		/* Provider data crosses the wire untransformed, so it must be JSON. */
		struct json_tokener *tok = json_tokener_new();
		if (!tok)
			return AKS_ENOMEM;
		struct json_object *obj = json_tokener_parse_ex(tok, json_object, -1);
		bool ok = obj && json_tokener_get_error(tok) == json_tokener_success &&
		          json_object_is_type(obj, json_type_object);
		/* Nothing but whitespace may follow the object. */
		for (size_t i = json_tokener_get_parse_end(tok); ok && json_object[i]; i++)
			ok = strchr(" \t\r\n", json_object[i]) != NULL;
		json_object_put(obj);
		json_tokener_free(tok);
		if (!ok)
			return AKS_EINVAL;
	}
	return replace_string(&r->provider_data, json_object);
}

AKS_EXPORT int aks_result_get_exit_code(const aks_result *r)
{
	return r ? r->exit_code : -1;
}

static const char *kept(const stream_capture *s, size_t *len)
{
	if (len)
		*len = s->kept.len;
	return s->kept.data ? s->kept.data : "";
}

AKS_EXPORT const char *aks_result_get_stdout(const aks_result *r, size_t *len)
{
	return kept(&r->out, len);
}

AKS_EXPORT const char *aks_result_get_stderr(const aks_result *r, size_t *len)
{
	return kept(&r->err, len);
}

AKS_EXPORT uint64_t aks_result_get_stream_total(const aks_result *r, int stream)
{
	if (!r)
		return 0;
	if (stream == AKS_STREAM_STDOUT)
		return r->out.total;
	if (stream == AKS_STREAM_STDERR)
		return r->err.total;
	return 0;
}

AKS_EXPORT bool aks_result_is_truncated(const aks_result *r, int stream)
{
	if (!r)
		return false;
	if (stream == AKS_STREAM_STDOUT)
		return r->out.total > r->out.kept.len;
	if (stream == AKS_STREAM_STDERR)
		return r->err.total > r->err.kept.len;
	return false;
}

AKS_EXPORT bool aks_result_timed_out(const aks_result *r)
{
	return r && r->timed_out;
}

void aks__result_add_unseen(aks_result *r, int stream, uint64_t bytes)
{
	stream_capture *s = !r                            ? NULL
	                    : stream == AKS_STREAM_STDOUT ? &r->out
	                    : stream == AKS_STREAM_STDERR ? &r->err
	                                                  : NULL;
	if (s)
		s->total = bytes > UINT64_MAX - s->total ? UINT64_MAX : s->total + bytes;
}

void aks__result_add_egress_refused(aks_result *r, unsigned count)
{
	if (r)
		r->egress_refused =
		    count > UINT_MAX - r->egress_refused ? UINT_MAX : r->egress_refused + count;
}

AKS_EXPORT unsigned aks_result_get_egress_refused(const aks_result *r)
{
	return r ? r->egress_refused : 0;
}

AKS_EXPORT const char *aks_result_get_notice(const aks_result *r)
{
	return r ? r->notice : NULL;
}

AKS_EXPORT const char *aks_result_get_provider_data(const aks_result *r)
{
	return r ? r->provider_data : NULL;
}

AKS_EXPORT size_t aks_result_get_file_count(const aks_result *r)
{
	return r ? r->file_count : 0;
}

AKS_EXPORT const unsigned char *aks_result_get_file(const aks_result *r, size_t index,
                                                    const char **path, const char **mime_type,
                                                    size_t *len)
{
	if (!r || index >= r->file_count)
		return NULL;
	const result_file *f = &r->files[index];
	if (path)
		*path = f->path;
	if (mime_type)
		*mime_type = f->mime_type;
	if (len)
		*len = f->data.len;
	return (const unsigned char *)(f->data.data ? f->data.data : "");
}

AKS_EXPORT void aks_result_free(aks_result *r)
{
	if (!r)
		return;
	aks__buf_free(&r->out.kept);
	aks__buf_free(&r->err.kept);
	for (size_t i = 0; i < r->file_count; i++) {
		free(r->files[i].path);
		free(r->files[i].mime_type);
		aks__buf_free(&r->files[i].data);
	}
	free(r->files);
	free(r->notice);
	free(r->provider_data);
	aks__output_tap_unref(r->tap);
	free(r);
}

/* ---- cutting a finished result down ---- */

int aks__result_truncate_stream(aks_result *r, int stream, size_t max_chars)
{
	if (!r || (stream != AKS_STREAM_STDOUT && stream != AKS_STREAM_STDERR))
		return AKS_EINVAL;
	stream_capture *s = stream == AKS_STREAM_STDOUT ? &r->out : &r->err;
	/* Characters are counted as the record's JSON encoding decodes them, so a cut never
	 * falls inside a multibyte character. */
	aks_cut_text t;
	if (aks__truncate_chars(s->kept.data ? s->kept.data : "", s->kept.len, max_chars, 0, &t) <
	    0)
		return AKS_ENOMEM;
	if (!aks__cut_text_is_cut(&t)) {
		aks__cut_text_free(&t);
		return AKS_OK;
	}
	aks_buf b = AKS_BUF_INIT;
	if (t.len && aks__buf_append(&b, t.text, t.len) < 0) {
		aks__cut_text_free(&t);
		return AKS_ENOMEM;
	}
	aks__cut_text_free(&t);
	aks__buf_free(&s->kept);
	s->kept = b;
	return AKS_OK;
}

bool aks__result_drop_last_file(aks_result *r)
{
	if (!r || r->file_count == 0)
		return false;
	result_file *f = &r->files[--r->file_count];
	free(f->path);
	free(f->mime_type);
	aks__buf_free(&f->data);
	return true;
}
