/* Unit tests: which file-store writes are synced to the disk (core/store/store.h,
 * aks__store_set_volatile). Every record is fsynced (the file, then its directory) before its
 * transaction ends, except the owner's creation claims (core/session/owner.h), which lose
 * nothing when a crash takes them. Linked with -Wl,--wrap=fsync: every fsync of the store
 * code in this program is counted. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "core/session/owner.h"
#include "core/store/store.h"
#include "tests/unit/rm_tree.h"

int __real_fsync(int fd);
int __wrap_fsync(int fd);

static int fsyncs;

int __wrap_fsync(int fd)
{
	fsyncs++;
	return __real_fsync(fd);
}

typedef struct fixture {
	char dir[64];
	aks_state_store *s;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/aks-store-sync-XXXXXX");
	if (!mkdtemp(f->dir) || aks__store_open(f->dir, &f->s, NULL) != AKS_OK)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	aks__store_close(f->s);
	rm_tree(f->dir);
	free(f);
	return 0;
}

static int put_fn(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object_object_add(rec, "v", json_object_new_int(1));
	*changed = true;
	return AKS_OK;
}

/* The fsyncs one write of (ns, key) made. */
static int put(fixture *f, const char *ns, const char *key)
{
	int before = fsyncs;
	assert_int_equal(aks__store_update(f->s, ns, key, put_fn, NULL, NULL), AKS_OK);
	return fsyncs - before;
}

static int delete (fixture *f, const char *ns, const char *key)
{
	int before = fsyncs;
	assert_int_equal(aks__store_delete(f->s, ns, key, NULL), AKS_OK);
	return fsyncs - before;
}

/* Without a declaration every write and removal is synced; with one, only the records it
 * names are not: its namespace and key prefix, nothing beside them. */
static void test_volatile_records(void **state)
{
	fixture *f = *state;
	put(f, "ns", "claim:0"); /* the namespace's directory is created (and synced) once */
	assert_int_equal(put(f, "ns", "claim:a"), 2); /* the file, its directory */
	assert_int_equal(delete (f, "ns", "claim:a"), 1);

	assert_int_equal(aks__store_set_volatile(f->s, "ns", "claim:", NULL), AKS_OK);
	assert_int_equal(put(f, "ns", "claim:b"), 0);
	assert_int_equal(put(f, "ns", "claim:b"), 0); /* a replacement too */
	assert_int_equal(delete (f, "ns", "claim:b"), 0);
	assert_int_equal(put(f, "ns", "store"), 2);
	assert_int_equal(put(f, "ns", "clai"), 2);
	assert_int_equal(put(f, "ns2", "claim:c"), 2 + 1); /* and ns2's new directory */
	assert_int_equal(delete (f, "ns", "store"), 1);

	/* Written without a sync, the record is there all the same. */
	json_object *rec = NULL;
	put(f, "ns", "claim:d");
	assert_int_equal(aks__store_get(f->s, "ns", "claim:d", &rec, NULL), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(rec, "v")), 1);
	json_object_put(rec);
}

/* The owner declares its claims: a claim and its release sync nothing; the owner id, minted
 * by the first claim, is synced. */
static void test_owner_claims(void **state)
{
	fixture *f = *state;
	aks_owner *o = NULL;
	assert_int_equal(aks__owner_new(f->s, &o, NULL), AKS_OK);
	aks_owner_claim *c = NULL;
	int before = fsyncs;
	assert_int_equal(aks__owner_claim(o, "p", &c, NULL), AKS_OK); /* mints the owner id */
	assert_true(fsyncs - before >= 2);
	aks__owner_release(c);
	before = fsyncs;
	assert_int_equal(aks__owner_claim(o, "p", &c, NULL), AKS_OK);
	aks__owner_release(c);
	assert_int_equal(fsyncs - before, 0);
	aks__owner_free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_volatile_records, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_owner_claims, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
