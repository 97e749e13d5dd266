/* SPDX-License-Identifier: MIT */
/*
 * test_dirnames.c - directories' complete lists of names
 * (src/fs/dirnames.c):
 *   - a name outside a known directory's names is absent, a name in it
 *     or in a directory not known is not (it is asked of the backends);
 *   - the mount's own changes keep the set a superset: a name added is
 *     found at once, a name removed is absent, a directory removed or
 *     renamed forgets its whole tree (and no other);
 *   - a listing that overlapped an added name (or a forgotten tree) is
 *     not installed;
 *   - a set older than dir_cache_timeout is not used; 0, a mount with
 *     real directories or with a local directory in its tree turns it
 *     all off;
 *   - bounded: past the directories' or the names' bound the oldest set
 *     is forgotten, a listing larger than all is not kept;
 *   - concurrent creates and listings (run under TSan too): once its add
 *     returned, a created name is never absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/fs.h"

struct fixture {
	struct smuxfs fs;
	struct smux_fs_opts opts;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->opts.dir_cache_timeout = 3600;
	f->fs.opts = &f->opts;
	smuxfs_dirnames_init(&f->fs);
	assert_non_null(f->fs.dirnames);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	smuxfs_dirnames_release(&f->fs);
	assert_null(f->fs.dirnames);
	free(f);
	return 0;
}

/* Installs @names (NULL-terminated) as @dir's, as a listing that began
 * now would. */
static void install(struct smuxfs *fs, const char *dir, const char **names)
{
	size_t n = 0;
	unsigned long gen = smuxfs_dirnames_gen(fs, dir);

	while (names && names[n])
		n++;
	smuxfs_dirnames_install(fs, dir, names, n, gen, smuxfs_dirnames_now());
}

static void test_known_set(void **state)
{
	struct fixture *f = *state;
	struct smuxfs *fs = &f->fs;
	const char *d[] = {"a", "b", "sub", NULL};
	const char *root[] = {"x", NULL};

	assert_false(smuxfs_dirnames_absent(fs, "d/c")); /* not known */
	install(fs, "d", d);
	assert_true(smuxfs_dirnames_absent(fs, "d/c"));
	assert_false(smuxfs_dirnames_absent(fs, "d/a"));
	assert_false(smuxfs_dirnames_absent(fs, "d/sub"));
	/* below a known directory: its own names are not known */
	assert_false(smuxfs_dirnames_absent(fs, "d/sub/z"));
	assert_false(smuxfs_dirnames_absent(fs, "e/a"));
	/* the root ("" without a prefix) */
	install(fs, "", root);
	assert_true(smuxfs_dirnames_absent(fs, "y"));
	assert_false(smuxfs_dirnames_absent(fs, "x"));
	/* a listing again replaces the set */
	install(fs, "d", root);
	assert_true(smuxfs_dirnames_absent(fs, "d/a"));
	assert_false(smuxfs_dirnames_absent(fs, "d/x"));
	/* made empty (mkdir) */
	install(fs, "p/q", NULL);
	assert_true(smuxfs_dirnames_absent(fs, "p/q/anything"));
}

static void test_own_changes(void **state)
{
	struct fixture *f = *state;
	struct smuxfs *fs = &f->fs;
	const char *dd[] = {"k", NULL};

	install(fs, "d", NULL);
	install(fs, "d/sub", NULL);
	install(fs, "dd", dd);
	assert_true(smuxfs_dirnames_absent(fs, "d/f"));
	smuxfs_dirnames_add(fs, "d/f"); /* create, commit, mkdir, link ... */
	assert_false(smuxfs_dirnames_absent(fs, "d/f"));
	smuxfs_dirnames_add(fs, "d/f"); /* twice: one name */
	smuxfs_dirnames_del(fs, "d/f"); /* unlink */
	assert_true(smuxfs_dirnames_absent(fs, "d/f"));
	smuxfs_dirnames_del(fs, "d/never"); /* not there: nothing */
	assert_true(smuxfs_dirnames_absent(fs, "d/never"));
	/* many names: the set grows */
	for (int i = 0; i < 500; i++) {
		char k[32];

		snprintf(k, sizeof(k), "d/n%d", i);
		smuxfs_dirnames_add(fs, k);
	}
	assert_false(smuxfs_dirnames_absent(fs, "d/n0"));
	assert_false(smuxfs_dirnames_absent(fs, "d/n499"));
	assert_true(smuxfs_dirnames_absent(fs, "d/n500"));
	/* a directory renamed or removed: its tree is forgotten, "dd" (a
	 * name that only starts the same) is not */
	smuxfs_dirnames_forget(fs, "d");
	assert_false(smuxfs_dirnames_absent(fs, "d/n500"));
	assert_false(smuxfs_dirnames_absent(fs, "d/sub/x"));
	assert_true(smuxfs_dirnames_absent(fs, "dd/x"));
	/* everything */
	smuxfs_dirnames_forget(fs, NULL);
	assert_false(smuxfs_dirnames_absent(fs, "dd/x"));
	/* the root's tree is every directory */
	install(fs, "dd", dd);
	smuxfs_dirnames_forget(fs, "");
	assert_false(smuxfs_dirnames_absent(fs, "dd/x"));
}

static void test_install_refused(void **state)
{
	struct fixture *f = *state;
	struct smuxfs *fs = &f->fs;
	unsigned long gen;
	int64_t t0;

	/* a name made in the directory while it was being listed */
	gen = smuxfs_dirnames_gen(fs, "d");
	t0 = smuxfs_dirnames_now();
	smuxfs_dirnames_add(fs, "d/new");
	smuxfs_dirnames_install(fs, "d", NULL, 0, gen, t0);
	assert_false(smuxfs_dirnames_absent(fs, "d/new"));
	assert_false(smuxfs_dirnames_absent(fs, "d/other"));
	/* a tree forgotten while it was being listed */
	gen = smuxfs_dirnames_gen(fs, "d");
	smuxfs_dirnames_forget(fs, "x");
	smuxfs_dirnames_install(fs, "d", NULL, 0, gen, t0);
	assert_false(smuxfs_dirnames_absent(fs, "d/other"));
	/* nothing meanwhile: installed */
	gen = smuxfs_dirnames_gen(fs, "d");
	smuxfs_dirnames_add(fs, "e/f"); /* another directory */
	smuxfs_dirnames_install(fs, "d", NULL, 0, gen, t0);
	assert_true(smuxfs_dirnames_absent(fs, "d/other"));
}

/* Polls (bounded) until "d/z" is no longer answered absent. */
static bool expires(struct smuxfs *fs)
{
	struct timespec ms = {0, 1000000};

	for (int i = 0; i < 20000; i++) {
		if (!smuxfs_dirnames_absent(fs, "d/z"))
			return true;
		nanosleep(&ms, NULL);
	}
	return false;
}

static void test_expiry_and_off(void **state)
{
	struct fixture *f = *state;
	struct smuxfs *fs = &f->fs;

	install(fs, "d", NULL);
	assert_true(smuxfs_dirnames_absent(fs, "d/z"));
	/* older than the timeout: asked again */
	f->opts.dir_cache_timeout = 0.001;
	assert_true(expires(fs));
	f->opts.dir_cache_timeout = 3600;
	assert_false(smuxfs_dirnames_absent(fs, "d/z")); /* dropped */
	/* off: dir_cache_timeout = 0, or real directories */
	install(fs, "d", NULL);
	assert_true(smuxfs_dirnames_absent(fs, "d/z"));
	f->opts.dir_cache_timeout = 0;
	assert_false(smuxfs_dirnames_absent(fs, "d/z"));
	install(fs, "e", NULL);
	f->opts.dir_cache_timeout = 3600;
	assert_false(smuxfs_dirnames_absent(fs, "e/z")); /* not kept */
	fs->real_dirs = true;
	assert_false(smuxfs_dirnames_absent(fs, "d/z"));
	fs->real_dirs = false;
	fs->has_file = true; /* a local directory in the tree */
	assert_false(smuxfs_dirnames_absent(fs, "d/z"));
	fs->has_file = false;
	assert_true(smuxfs_dirnames_absent(fs, "d/z"));
}

static void test_bounds(void **state)
{
	struct fixture *f = *state;
	struct smuxfs *fs = &f->fs;
	const char *three[] = {"a", "b", "c", NULL};
	const char *six[] = {"a", "b", "c", "d", "e", "f", NULL};

	smuxfs__dirnames_bounds(fs, 2, 5);
	install(fs, "d1", NULL);
	install(fs, "d2", NULL);
	install(fs, "d3", NULL);
	assert_false(smuxfs_dirnames_absent(fs, "d1/x")); /* the oldest */
	assert_true(smuxfs_dirnames_absent(fs, "d2/x"));
	assert_true(smuxfs_dirnames_absent(fs, "d3/x"));
	/* more names than all sets may hold: not kept */
	install(fs, "d4", six);
	assert_false(smuxfs_dirnames_absent(fs, "d4/x"));
	assert_true(smuxfs_dirnames_absent(fs, "d3/x"));
	/* over the names' bound: the oldest goes */
	install(fs, "d5", three);
	install(fs, "d6", three);
	assert_false(smuxfs_dirnames_absent(fs, "d5/x"));
	assert_true(smuxfs_dirnames_absent(fs, "d6/x"));
	/* names added past it: the oldest goes (here the set itself) */
	smuxfs_dirnames_add(fs, "d6/n1");
	smuxfs_dirnames_add(fs, "d6/n2");
	smuxfs_dirnames_add(fs, "d6/n3");
	assert_false(smuxfs_dirnames_absent(fs, "d6/x"));
	/* lowered under what is kept: trimmed at once */
	smuxfs__dirnames_bounds(fs, 2, 5);
	install(fs, "d7", NULL);
	install(fs, "d8", NULL);
	smuxfs__dirnames_bounds(fs, 1, 5);
	assert_false(smuxfs_dirnames_absent(fs, "d7/x"));
	assert_true(smuxfs_dirnames_absent(fs, "d8/x"));
}

/* ---- concurrent creates and listings ---- */

#define CREATORS 4
#define PER	 1500

/* What "the backend" holds: names put, under lock. */
struct race {
	struct smuxfs *fs;
	pthread_mutex_t lock;
	char **names;
	size_t n;
	atomic_int creating;
	atomic_int wrong;
	int id;
};

struct creator {
	struct race *r;
	int id;
};

static void *create_loop(void *arg)
{
	struct creator *c = arg;
	struct race *r = c->r;
	char key[64];

	for (int i = 0; i < PER; i++) {
		char *name = malloc(32);

		assert_non_null(name);
		snprintf(name, 32, "c%d-%d", c->id, i);
		snprintf(key, sizeof(key), "d/%s", name);
		/* the put: a listing from now on has it */
		pthread_mutex_lock(&r->lock);
		r->names[r->n++] = name;
		pthread_mutex_unlock(&r->lock);
		/* the create is done */
		smuxfs_dirnames_add(r->fs, key);
		if (smuxfs_dirnames_absent(r->fs, key))
			atomic_fetch_add(&r->wrong, 1);
		/* a directory removed elsewhere: the epoch moves */
		if (i % 7 == 0)
			smuxfs_dirnames_forget(r->fs, "elsewhere");
	}
	atomic_fetch_sub(&r->creating, 1);
	return NULL;
}

static void *list_loop(void *arg)
{
	struct race *r = arg;
	const char **copy = malloc((size_t)CREATORS * PER * sizeof(*copy));

	assert_non_null(copy);
	while (atomic_load(&r->creating) > 0) {
		unsigned long gen = smuxfs_dirnames_gen(r->fs, "d");
		int64_t t0 = smuxfs_dirnames_now();
		size_t n;

		/* the listing: what the backend holds now */
		pthread_mutex_lock(&r->lock);
		n = r->n;
		memcpy(copy, r->names, n * sizeof(*copy));
		pthread_mutex_unlock(&r->lock);
		smuxfs_dirnames_install(r->fs, "d", copy, n, gen, t0);
	}
	free(copy);
	return NULL;
}

static void test_concurrent_create_vs_lookup(void **state)
{
	struct fixture *f = *state;
	struct race r = {.fs = &f->fs};
	struct creator c[CREATORS];
	pthread_t tc[CREATORS], tl[2];

	pthread_mutex_init(&r.lock, NULL);
	r.names = calloc((size_t)CREATORS * PER, sizeof(*r.names));
	assert_non_null(r.names);
	atomic_init(&r.creating, CREATORS);
	atomic_init(&r.wrong, 0);
	install(&f->fs, "d", NULL); /* made empty */
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&tl[i], NULL, list_loop, &r),
				 0);
	for (int i = 0; i < CREATORS; i++) {
		c[i].r = &r;
		c[i].id = i;
		assert_int_equal(
			pthread_create(&tc[i], NULL, create_loop, &c[i]), 0);
	}
	for (int i = 0; i < CREATORS; i++)
		pthread_join(tc[i], NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(tl[i], NULL);
	assert_int_equal(atomic_load(&r.wrong), 0);
	/* every name made is found, whatever listing was installed last */
	for (size_t i = 0; i < r.n; i++) {
		char key[64];

		snprintf(key, sizeof(key), "d/%s", r.names[i]);
		assert_false(smuxfs_dirnames_absent(&f->fs, key));
	}
	assert_true(smuxfs_dirnames_absent(&f->fs, "d/none"));
	for (size_t i = 0; i < r.n; i++)
		free(r.names[i]);
	free(r.names);
	pthread_mutex_destroy(&r.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_known_set, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_changes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_install_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_expiry_and_off, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_concurrent_create_vs_lookup, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
