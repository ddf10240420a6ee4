/*
 * plugins/common/curl_global.c - libcurl's global state, initialised once
 * and counted per provider instance; see aks_http.h.
 */
#include <pthread.h>

#include <curl/curl.h>

#include "aks_http.h"

static pthread_mutex_t curl_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned curl_users;

bool aks_ctr_curl_acquire(void)
{
	bool ok = true;
	pthread_mutex_lock(&curl_lock);
	if (curl_users == 0)
		ok = curl_global_init(CURL_GLOBAL_ALL) == CURLE_OK;
	if (ok)
		curl_users++;
	pthread_mutex_unlock(&curl_lock);
	return ok;
}

void aks_ctr_curl_release(void)
{
	pthread_mutex_lock(&curl_lock);
	if (curl_users && --curl_users == 0)
		curl_global_cleanup();
	pthread_mutex_unlock(&curl_lock);
}
