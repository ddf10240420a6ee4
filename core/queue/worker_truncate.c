/*
 * core/queue/worker_truncate.c - cutting a completion to fit the queue's record limit, as the
 * reference's newest worker does (§5.6 "Truncation"): the size is that of the whole
 * ready-to-store record, and characters are counted the way the record's JSON decodes them,
 * so a multibyte character is never split.
 */
#include "config.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/result.h"
#include "queue/worker.h"
#include "tools/json.h"
#include "util/util.h"

static const char TRUNC_MARK[] = " ...[truncated]";
#define TRUNC_MARK_CHARS (sizeof(TRUNC_MARK) - 1)
#define LOG              "worker"

/* The UTF-8 length of the record's JSON; -1 on ENOMEM. */
static int64_t record_size(const aks_wire_completion *c, const char *conversation)
{
	char *s = aks__wire_record_encode(c, conversation);
	if (!s)
		return -1;
	int64_t n = (int64_t)strlen(s);
	free(s);
	return n;
}

/* Characters in text as the record's encoding decodes them; (size_t)-1 on ENOMEM. */
static size_t char_count(const char *text, size_t len)
{
	aks_cut_text t;
	if (aks__truncate_chars(text, len, 0, 0, &t) < 0)
		return (size_t)-1;
	size_t n = (size_t)t.total;
	aks__cut_text_free(&t);
	return n;
}

static int add_notice(aks_result *r, int64_t limit)
{
	const char *old = aks_result_get_notice(r);
	aks_buf b = AKS_BUF_INIT;
	int rc = old && *old ? aks__buf_printf(&b, "%s; ", old) : AKS_OK;
	if (rc == AKS_OK)
		rc = aks__buf_printf(&b,
		                     "output truncated to fit the %" PRId64
		                     "-byte record limit; rerun with a file redirection to keep "
		                     "full output",
		                     limit);
	if (rc == AKS_OK)
		rc = aks__result_set_notice(r, b.data);
	aks__buf_free(&b);
	return rc;
}

/* The error cut to its first `keep` characters, then the truncation mark. */
static int cut_error(aks_wire_completion *c, size_t keep)
{
	aks_cut_text t;
	if (aks__truncate_chars(c->error, strlen(c->error), keep, 0, &t) < 0)
		return AKS_ENOMEM;
	aks_buf b = AKS_BUF_INIT;
	int rc = aks__buf_append(&b, t.text, t.len);
	if (rc == AKS_OK)
		rc = aks__buf_append(&b, TRUNC_MARK, TRUNC_MARK_CHARS);
	aks__cut_text_free(&t);
	char *s = rc == AKS_OK ? aks__buf_steal(&b) : NULL;
	if (!s) {
		aks__buf_free(&b);
		return AKS_ENOMEM;
	}
	free(c->error);
	c->error = s;
	return AKS_OK;
}

/* One step's new size in *size; AKS_ENOMEM when the record cannot be encoded. */
static int measure(const aks_wire_completion *c, const char *conversation, int64_t *size)
{
	*size = record_size(c, conversation);
	return *size < 0 ? AKS_ENOMEM : AKS_OK;
}

/* Step 1, on the result: the notice, provider_data, output files from the end, then the
 * longer stream, again and again. Cutting `overshoot` characters frees at least `overshoot`
 * bytes (no character encodes to less than one), so the loop ends after each stream was cut
 * at most once or emptied. */
static int truncate_result(aks_wire_completion *c, const char *conversation, int64_t limit,
                           int64_t *size)
{
	aks_result *r = c->result;
	int rc = add_notice(r, limit);
	if (rc == AKS_OK)
		rc = measure(c, conversation, size);
	if (rc == AKS_OK && *size > limit && aks_result_get_provider_data(r)) {
		aks__result_set_provider_data(r, NULL);
		rc = measure(c, conversation, size);
	}
	while (rc == AKS_OK && *size > limit && aks__result_drop_last_file(r))
		rc = measure(c, conversation, size);
	while (rc == AKS_OK && *size > limit) {
		uint64_t overshoot = (uint64_t)(*size - limit);
		size_t lo = 0, le = 0;
		const char *so = aks_result_get_stdout(r, &lo);
		const char *se = aks_result_get_stderr(r, &le);
		size_t co = char_count(so, lo), ce = char_count(se, le);
		if (co == (size_t)-1 || ce == (size_t)-1)
			return AKS_ENOMEM;
		int stream = co >= ce ? AKS_STREAM_STDOUT : AKS_STREAM_STDERR; /* a tie: stdout */
		size_t len = co >= ce ? co : ce;
		if (len == 0)
			break;
		size_t keep = (uint64_t)len > overshoot ? len - (size_t)overshoot : 0;
		rc = aks__result_truncate_stream(r, stream, keep);
		if (rc == AKS_OK)
			rc = measure(c, conversation, size);
	}
	return rc;
}

/* Step 2: the error, cut to leave room for its mark. */
static int truncate_error(aks_wire_completion *c, const char *conversation, int64_t limit,
                          int64_t *size)
{
	uint64_t overshoot = (uint64_t)(*size - limit);
	size_t len = char_count(c->error, strlen(c->error));
	if (len == (size_t)-1)
		return AKS_ENOMEM;
	size_t keep = (uint64_t)len > overshoot + TRUNC_MARK_CHARS
	                  ? len - (size_t)overshoot - TRUNC_MARK_CHARS
	                  : 0;
	int rc = cut_error(c, keep);
	return rc == AKS_OK ? measure(c, conversation, size) : rc;
}

/* The reference's newest algorithm (§5.6 "Truncation"), measured on the whole record. */
bool aks__worker_truncate(aks_wire_completion *c, const char *conversation, int64_t limit,
                          bool *still_over)
{
	int64_t size = 0;
	int rc = measure(c, conversation, &size);
	if (rc == AKS_OK && size <= limit) {
		*still_over = false;
		return false;
	}
	bool cut = false;
	if (rc == AKS_OK && c->result) {
		cut = true; /* the notice, at least */
		rc = truncate_result(c, conversation, limit, &size);
	}
	if (rc == AKS_OK && size > limit && c->error) {
		cut = true;
		rc = truncate_error(c, conversation, limit, &size);
	}
	bool over = rc < 0 || size > limit;
	if (over)
		aks__log(AKS_LOG_WARNING, LOG,
		         "the completion record of task %s does not fit the %" PRId64
		         "-byte limit even after truncation (%s); the transport may reject it",
		         c->task_id ? c->task_id : "?", limit,
		         rc < 0 ? "out of memory while cutting it" : "nothing left to cut");
	*still_over = over;
	return cut;
}
