/*
 * plugins/sqs/sqs_hold.c - which received message a consumer hands to the host and which it
 * holds back: at most one message of a group in flight with the host (the transport
 * contract), though one ReceiveMessage may return several of a group (AWS documents that it
 * returns as many of one group as it can, in order). Lists only, no I/O: the unit test drives
 * it with the answers AWS documents, which the emulator the other tests use does not give.
 */
#include <string.h>

#include "sqs_internal.h"

static bool same_group(const sqs_msg *a, const sqs_msg *b)
{
	return a->sqs_group && b->sqs_group && strcmp(a->sqs_group, b->sqs_group) == 0;
}

bool sqs_group_busy(const sqs_lists *l, const sqs_msg *m)
{
	for (const sqs_msg *p = l->inflight; p; p = p->next)
		if (same_group(p, m))
			return true;
	return false;
}

/* Keeps the queue's count of held messages (depth reads it from another thread). */
static void count_held(const sqs_lists *l, int delta)
{
	if (!l->held_count)
		return;
	if (delta > 0)
		__atomic_add_fetch(l->held_count, (uint64_t)delta, __ATOMIC_RELAXED);
	else
		__atomic_sub_fetch(l->held_count, (uint64_t)-delta, __ATOMIC_RELAXED);
}

static void append(sqs_msg **list, sqs_msg *m)
{
	while (*list)
		list = &(*list)->next;
	m->next = NULL;
	*list = m;
}

static void hand_out(sqs_lists *l, sqs_msg *m, aks_message **out, size_t *n)
{
	append(&l->inflight, m);
	out[(*n)++] = &m->m;
}

void sqs_hand_out_held(sqs_lists *l, aks_message **out, size_t max, size_t *n)
{
	for (sqs_msg **p = &l->held; *p && *n < max;) {
		sqs_msg *m = *p;
		if (sqs_group_busy(l, m)) {
			p = &m->next;
			continue;
		}
		*p = m->next;
		count_held(l, -1);
		hand_out(l, m, out, n);
	}
}

void sqs_hand_out_or_hold(sqs_lists *l, sqs_msg *m, aks_message **out, size_t max, size_t *n)
{
	if (*n < max && !sqs_group_busy(l, m)) {
		hand_out(l, m, out, n);
	} else {
		append(&l->held, m);
		count_held(l, 1);
	}
}

sqs_msg *sqs_settle(sqs_lists *l, aks_message *msg)
{
	for (sqs_msg **p = &l->inflight; *p; p = &(*p)->next)
		if (&(*p)->m == msg) {
			sqs_msg *m = *p;
			*p = m->next;
			m->next = NULL;
			return m;
		}
	return NULL;
}

bool sqs_holds(const sqs_lists *l, const aks_message *msg)
{
	for (const sqs_msg *p = l->inflight; p; p = p->next)
		if (&p->m == msg)
			return true;
	return false;
}

sqs_msg *sqs_release_group(sqs_lists *l, const sqs_msg *m)
{
	sqs_msg *released = NULL;
	for (sqs_msg **p = &l->held; *p;) {
		sqs_msg *h = *p;
		if (same_group(h, m)) {
			*p = h->next;
			count_held(l, -1);
			append(&released, h);
		} else {
			p = &h->next;
		}
	}
	return released;
}

sqs_msg *sqs_release_held(sqs_lists *l)
{
	int count = 0;
	for (const sqs_msg *h = l->held; h; h = h->next)
		count++;
	count_held(l, -count);
	sqs_msg *released = l->held;
	l->held = NULL;
	return released;
}
