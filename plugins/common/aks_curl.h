/*
 * plugins/common/aks_curl.h - libcurl transfers under a call's deadline and cancellation,
 * for the providers' HTTP clients (docker's dk_http.c, kubernetes' k8s_rest.c, e2b's
 * e2b_http.c). Part of libaks-http (curl_wait.c); apart from aks_http.h because it needs
 * libcurl's types, which the host-free code including that header must not.
 */
#ifndef AKS_CURL_H
#define AKS_CURL_H

#include <curl/curl.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_http.h"

/* AKS_OK while the call may go on; else AKS_ECANCELLED, or AKS_ETIMEOUT worded "<who>
 * exceeded timeout <t>s", set in *err. A NULL call is never over. */
int aks_ctr_call_check(const aks_host_api *host, const aks_call *call, const char *who,
                       aks_error **err);

/* Between two curl_multi_perform() calls: checks the call (as aks_ctr_call_check), then
 * waits for activity on multi's transfers, a second at most and never past the deadline,
 * woken early by the call's cancel descriptor. AKS_OK, the check's error, or AKS_ERROR. */
int aks_ctr_multi_wait(const aks_host_api *host, CURLM *multi, const aks_call *call,
                       const char *who, aks_error **err);

/* Runs multi's one transfer to its end: AKS_OK with the transfer's own result in *result
 * (CURLE_OK or why it failed), or the call's end (as aks_ctr_call_check), or AKS_ERROR when
 * libcurl itself fails. */
int aks_ctr_multi_run(const aks_host_api *host, CURLM *multi, const aks_call *call, const char *who,
                      CURLcode *result, aks_error **err);

#endif /* AKS_CURL_H */
