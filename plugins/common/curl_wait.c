/*
 * plugins/common/curl_wait.c - libcurl transfers under a call's deadline and cancellation,
 * for the providers' HTTP clients; see aks_curl.h.
 */
#include "aks_curl.h"

/* The longest wait between two looks at the call: the cancellation of a host without a
 * cancel descriptor is noticed this late at most. */
#define WAIT_MAX_MS 1000

int aks_ctr_call_check(const aks_host_api *host, const aks_call *call, const char *who,
                       aks_error **err)
{
	if (!call)
		return AKS_OK;
	if (host->cancelled && host->cancelled(call))
		return host->error_set(err, AKS_ECANCELLED, "the call was cancelled");
	if (call->deadline_ms > 0 && host->now_ms() >= call->deadline_ms)
		return host->error_set(err, AKS_ETIMEOUT, "%s exceeded timeout %gs", who,
		                       call->timeout);
	return AKS_OK;
}

int aks_ctr_multi_run(const aks_host_api *host, CURLM *multi, const aks_call *call, const char *who,
                      CURLcode *result, aks_error **err)
{
	for (;;) {
		int running = 0;
		if (curl_multi_perform(multi, &running) != CURLM_OK)
			return host->error_set(err, AKS_ERROR, "libcurl failed");
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(multi, &left)))
			if (m->msg == CURLMSG_DONE) {
				*result = m->data.result;
				return AKS_OK;
			}
		int rc = aks_ctr_multi_wait(host, multi, call, who, err);
		if (rc != AKS_OK)
			return rc;
	}
}

int aks_ctr_multi_wait(const aks_host_api *host, CURLM *multi, const aks_call *call,
                       const char *who, aks_error **err)
{
	int rc = aks_ctr_call_check(host, call, who, err);
	if (rc != AKS_OK)
		return rc;
	long wait_ms = WAIT_MAX_MS;
	if (call && call->deadline_ms > 0) {
		int64_t left_ms = call->deadline_ms - host->now_ms();
		if (left_ms < wait_ms)
			wait_ms = left_ms < 0 ? 0 : (long)left_ms;
	}
	struct curl_waitfd extra = {0};
	unsigned nextra = 0;
	int cfd =
	    call && AKS_HOST_HAS(host, cancel_fd) && host->cancel_fd ? host->cancel_fd(call) : -1;
	if (cfd >= 0) {
		extra.fd = cfd;
		extra.events = CURL_WAIT_POLLIN;
		nextra = 1;
	}
	if (curl_multi_poll(multi, nextra ? &extra : NULL, nextra, (int)wait_ms, NULL) != CURLM_OK)
		return host->error_set(err, AKS_ERROR, "libcurl failed to wait");
	return AKS_OK;
}
