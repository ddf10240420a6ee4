/*
 * plugins/common/describe.c - a container provider's "runs" line: the agent module's line
 * followed by how the provider confines its sandboxes; see aks_container.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_container.h"

#define N_LINES (sizeof(((aks_ctr_desc *)0)->line) / sizeof(((aks_ctr_desc *)0)->line[0]))

int aks_ctr_desc_init(aks_ctr_desc *d, const char *confinement)
{
	memset(d, 0, sizeof(*d));
	if (!(d->confinement = strdup(confinement)))
		return AKS_ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	d->ready = true;
	return AKS_OK;
}

const char *aks_ctr_desc_get(aks_ctr_desc *d, const char *runs)
{
	if (!d->ready)
		return runs;
	const char *text = runs; /* out of memory, or a third line: the module's alone */
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < N_LINES; i++) {
		if (!d->line[i].from &&
		    asprintf(&d->line[i].text, "%s; %s", runs, d->confinement) >= 0)
			d->line[i].from = runs;
		if (d->line[i].from == runs) {
			text = d->line[i].text;
			break;
		}
	}
	pthread_mutex_unlock(&d->mu);
	return text;
}

void aks_ctr_desc_free(aks_ctr_desc *d)
{
	if (!d->ready)
		return;
	for (size_t i = 0; i < N_LINES; i++)
		free(d->line[i].text);
	free(d->confinement);
	pthread_mutex_destroy(&d->mu);
	d->ready = false;
}
