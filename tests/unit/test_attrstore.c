/* SPDX-License-Identifier: MIT */
/*
 * test_attrstore.c - the persistent attribute cache (core/attrstore.h):
 * the match rules of a listing entry (etag, size, Last-Modified once
 * recorded, to the second after a HEAD), what is not kept, eviction, a
 * reopen keeps the entries, another identity empties, a garbage or
 * corrupt file is replaced, hostile keys, and puts and fills from many
 * threads (also run under TSan).
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/attrstore.h"

#define SEC 1000000000LL

static char dir[] = "/tmp/test_attrstore.XXXXXX";
static char path[256];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/test_attrstore.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/sub/dir/s3.db", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[512];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* What our own put of @key saw: a 0640 file of uid 1001, mtime 1234 s. */
static struct smux_info own(const char *etag, uint64_t size, uint32_t mode)
{
	struct smux_info i;

	smux_info_clear(&i);
	snprintf(i.etag, sizeof(i.etag), "%s", etag);
	i.size = size;
	i.mode = mode;
	i.uid = 1001;
	i.gid = 1002;
	i.has_owner = true;
	i.mtime_ns = 1234 * SEC + 5;
	return i;
}

/* A listing's entry: etag, size, Last-Modified; no mode. */
static struct smux_info listed(const char *etag, uint64_t size, int64_t lm)
{
	struct smux_info i;

	smux_info_clear(&i);
	snprintf(i.etag, sizeof(i.etag), "%s", etag);
	i.size = size;
	i.mtime_ns = lm;
	return i;
}

static void test_match_rules(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(NULL, "t", 0);
	struct smux_info a = own("e1", 10, S_IFREG | 0640), l;

	(void)state;
	assert_non_null(st);
	assert_false(smux__attrstore_persistent(st));
	l = listed("e1", 10, 100 * SEC + 7000000);
	assert_false(smux__attrstore_fill(st, "a", &l)); /* nothing yet */
	smux__attrstore_put(st, "a", &a, 0);
	/* first listing after the put: matches and records Last-Modified */
	assert_true(smux__attrstore_fill(st, "a", &l));
	assert_int_equal(l.mode, S_IFREG | 0640);
	assert_int_equal(l.uid, 1001);
	assert_int_equal(l.gid, 1002);
	assert_true(l.has_owner);
	assert_int_equal(l.mtime_ns, 1234 * SEC + 5);
	assert_int_equal(l.size, 10);
	/* the same version again */
	l = listed("e1", 10, 100 * SEC + 7000000);
	assert_true(smux__attrstore_fill(st, "a", &l));
	/* chmod by another client: CopyObject in place, same etag, later
	 * Last-Modified */
	l = listed("e1", 10, 160 * SEC);
	assert_false(smux__attrstore_fill(st, "a", &l));
	assert_int_equal(l.mode, 0);
	assert_int_equal(l.mtime_ns, 160 * SEC);
	/* other content */
	l = listed("e2", 10, 100 * SEC + 7000000);
	assert_false(smux__attrstore_fill(st, "a", &l));
	l = listed("e1", 11, 100 * SEC + 7000000);
	assert_false(smux__attrstore_fill(st, "a", &l));
	/* another key of the same etag */
	l = listed("e1", 10, 100 * SEC + 7000000);
	assert_false(smux__attrstore_fill(st, "b", &l));
	/* no etag in the listing: never a match */
	l = listed("", 10, 100 * SEC + 7000000);
	assert_false(smux__attrstore_fill(st, "a", &l));
	/* a DELETE drops it */
	smux__attrstore_forget(st, "a");
	l = listed("e1", 10, 100 * SEC + 7000000);
	assert_false(smux__attrstore_fill(st, "a", &l));
	smux__attrstore_free(st);
}

static void test_head_seconds(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(NULL, "t", 0);
	struct smux_info a = own("e1", 3, S_IFLNK | 0777), l;

	(void)state;
	/* a HEAD's Last-Modified has whole seconds */
	smux__attrstore_put(st, "ln", &a, 200 * SEC);
	l = listed("e1", 3, 200 * SEC + 123000000);
	assert_true(smux__attrstore_fill(st, "ln", &l));
	assert_int_equal(l.mode, S_IFLNK | 0777);
	/* the listing's finer time is recorded: now exact */
	l = listed("e1", 3, 200 * SEC + 124000000);
	assert_false(smux__attrstore_fill(st, "ln", &l));
	l = listed("e1", 3, 200 * SEC + 123000000);
	assert_true(smux__attrstore_fill(st, "ln", &l));
	/* another second never matched */
	smux__attrstore_put(st, "x", &a, 300 * SEC);
	l = listed("e1", 3, 301 * SEC);
	assert_false(smux__attrstore_fill(st, "x", &l));
	/* a recorded time is not replaced by one that did not match */
	l = listed("e1", 3, 300 * SEC);
	assert_true(smux__attrstore_fill(st, "x", &l));
	smux__attrstore_free(st);
}

static void test_not_kept(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(NULL, "t", 0);
	struct smux_info a = own("e1", 0, S_IFDIR | 0755), l;

	(void)state;
	smux__attrstore_put(st, "d/", &a, 0);
	smux__attrstore_put(st, "d", &a, 0); /* a directory */
	a = own("", 1, S_IFREG | 0644);	     /* no etag */
	smux__attrstore_put(st, "n", &a, 0);
	a = own("e1", 1, 0); /* no mode */
	smux__attrstore_put(st, "m", &a, 0);
	assert_int_equal(smux__attrstore_count(st), 0);
	/* a put that is not kept drops the older entry */
	a = own("e1", 1, S_IFREG | 0644);
	smux__attrstore_put(st, "k", &a, 0);
	assert_int_equal(smux__attrstore_count(st), 1);
	a.etag[0] = '\0';
	smux__attrstore_put(st, "k", &a, 0);
	assert_int_equal(smux__attrstore_count(st), 0);
	l = listed("e1", 1, SEC);
	assert_false(smux__attrstore_fill(st, "k", &l));
	smux__attrstore_free(st);
}

static void test_hostile_keys(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(path, "t", 0);
	const char *keys[] = {"a'; DROP TABLE attrs; --", "\x01\xff\xfe",
			      "%s%n", "a b\nc\td", "\xc3\x28 bad utf-8"};
	struct smux_info a = own("e1", 1, S_IFREG | 0600), l;

	(void)state;
	assert_true(smux__attrstore_persistent(st));
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		smux__attrstore_put(st, keys[i], &a, 0);
	assert_int_equal(smux__attrstore_count(st), 5);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		l = listed("e1", 1, SEC);
		assert_true(smux__attrstore_fill(st, keys[i], &l));
		assert_int_equal(l.mode, S_IFREG | 0600);
	}
	/* a prefix of a key is another key */
	l = listed("e1", 1, SEC);
	assert_false(smux__attrstore_fill(st, "a'", &l));
	smux__attrstore_free(st);
}

static void test_evict(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(path, "t", 100);
	struct smux_info a = own("e", 1, S_IFREG | 0644), l;
	char key[32];

	(void)state;
	for (int i = 0; i < 250; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		smux__attrstore_put(st, key, &a, 0);
		assert_true(smux__attrstore_count(st) <= 100);
	}
	assert_true(smux__attrstore_count(st) >= 90);
	/* the newest stays, the oldest went */
	l = listed("e", 1, SEC);
	assert_true(smux__attrstore_fill(st, "k249", &l));
	l = listed("e", 1, SEC);
	assert_false(smux__attrstore_fill(st, "k0", &l));
	smux__attrstore_free(st);
}

static void test_reopen(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(path, "s3 b", 0);
	struct smux_info a = own("e1", 10, S_IFREG | 0751), l;
	struct stat sb;

	(void)state;
	assert_true(smux__attrstore_persistent(st));
	smux__attrstore_put(st, "dir/f", &a, 0);
	l = listed("e1", 10, 50 * SEC + 1);
	assert_true(smux__attrstore_fill(st, "dir/f", &l)); /* records */
	smux__attrstore_free(st);
	/* names of objects are private: the file is the owner's alone */
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 077, 0);

	st = smux__attrstore_open(path, "s3 b", 0);
	assert_true(smux__attrstore_persistent(st));
	assert_int_equal(smux__attrstore_count(st), 1);
	l = listed("e1", 10, 50 * SEC + 1);
	assert_true(smux__attrstore_fill(st, "dir/f", &l));
	assert_int_equal(l.mode, S_IFREG | 0751);
	/* the recorded Last-Modified survived too */
	l = listed("e1", 10, 51 * SEC);
	assert_false(smux__attrstore_fill(st, "dir/f", &l));
	smux__attrstore_free(st);

	/* the same file for another bucket: emptied */
	st = smux__attrstore_open(path, "s3 other", 0);
	assert_int_equal(smux__attrstore_count(st), 0);
	l = listed("e1", 10, 50 * SEC + 1);
	assert_false(smux__attrstore_fill(st, "dir/f", &l));
	smux__attrstore_free(st);
}

static void write_file(const char *p, const char *s, off_t at)
{
	int fd = open(p, O_WRONLY | O_CREAT, 0600);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, s, strlen(s), at), (ssize_t)strlen(s));
	close(fd);
}

static void test_garbage_replaced(void **state)
{
	struct smux__attrstore *st;
	struct smux_info a = own("e1", 1, S_IFREG | 0644), l;

	(void)state;
	assert_int_equal(smux__mkdirs(path), 0);
	rmdir(path);
	write_file(path, "this is not an SQLite file, just garbage\n", 0);
	st = smux__attrstore_open(path, "t", 0);
	assert_non_null(st);
	assert_true(smux__attrstore_persistent(st));
	assert_int_equal(smux__attrstore_count(st), 0);
	smux__attrstore_put(st, "k", &a, 0);
	l = listed("e1", 1, SEC);
	assert_true(smux__attrstore_fill(st, "k", &l));
	smux__attrstore_free(st);

	/* a store whose pages were overwritten: dropped, made anew */
	write_file(path, "garbage garbage garbage garbage garbage", 0);
	st = smux__attrstore_open(path, "t", 0);
	assert_true(smux__attrstore_persistent(st));
	assert_int_equal(smux__attrstore_count(st), 0);
	smux__attrstore_put(st, "k2", &a, 0);
	assert_int_equal(smux__attrstore_count(st), 1);
	smux__attrstore_free(st);
}

static void test_unusable_path(void **state)
{
	char p[300];
	struct smux__attrstore *st;
	struct smux_info a = own("e1", 1, S_IFREG | 0644), l;

	(void)state;
	/* a directory where the file should be: memory only, still works */
	snprintf(p, sizeof(p), "%s/isdir", dir);
	assert_int_equal(mkdir(p, 0700), 0);
	st = smux__attrstore_open(p, "t", 0);
	assert_non_null(st);
	assert_false(smux__attrstore_persistent(st));
	smux__attrstore_put(st, "k", &a, 0);
	l = listed("e1", 1, SEC);
	assert_true(smux__attrstore_fill(st, "k", &l));
	smux__attrstore_free(st);
	smux__attrstore_free(NULL);
}

#define THREADS 4
#define PER	300

struct worker {
	struct smux__attrstore *st;
	int id;
	int hits;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct smux_info a = own("e", 7, S_IFREG | 0644), l;
	char key[32];

	for (int i = 0; i < PER; i++) {
		snprintf(key, sizeof(key), "t%d/%d", w->id, i);
		smux__attrstore_put(w->st, key, &a, 0);
		l = listed("e", 7, SEC);
		w->hits += smux__attrstore_fill(w->st, key, &l);
		/* a neighbour's keys, being written */
		snprintf(key, sizeof(key), "t%d/%d", (w->id + 1) % THREADS, i);
		l = listed("e", 7, SEC);
		smux__attrstore_fill(w->st, key, &l);
		if (i % 10 == 0)
			smux__attrstore_forget(w->st, key);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct smux__attrstore *st = smux__attrstore_open(path, "t", 1000);
	struct worker w[THREADS];
	pthread_t tid[THREADS];

	(void)state;
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.st = st, .id = i};
		assert_int_equal(pthread_create(&tid[i], NULL, worker, &w[i]),
				 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		/* a key just put is found, unless a neighbour forgot it or
		 * (a thread stalled on a loaded machine) it was evicted */
		assert_true(w[i].hits >= PER / 2);
	}
	assert_true(smux__attrstore_count(st) <= 1000);
	smux__attrstore_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_match_rules, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_head_seconds, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_not_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_keys, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_evict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_replaced, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unusable_path, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
