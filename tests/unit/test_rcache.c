// SPDX-License-Identifier: MIT
/*
 * test_rcache.c - the daemon's on-disk read cache (src/fs/rcache.c) over a
 * memory backend wrapped by a faulty one, which counts every call (so a
 * test can tell a hit from a fetch) and injects errors and latency: fill
 * and hit, a new version is a miss, LRU eviction within the capacity, the
 * bypass of objects too large, failed fills that leave nothing behind,
 * concurrent readers of one object filling it once, a cache file deleted
 * behind the cache's back, the discard at start, and a mixed stress run
 * checking every byte. The sparse cache: a random read fetches its own
 * 1 MiB chunk, not the object; sequential streams get read-ahead (each
 * byte fetched once, few gets), concurrent streams stay within the global
 * read-ahead budget, and every fetch is pinned to the version opened.
 *
 * Every test works in its own mkdtemp directory under /tmp and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/rcache.h"
#include "smux/faulty.h"
#include "smux/memory.h"

#define KB ((uint64_t)1024)

struct env {
	char base[64];		  /* mkdtemp directory */
	char dir[PATH_MAX];	  /* base/read: the cache's */
	struct smux_backend *mem; /* the objects */
	struct smux_backend *fb;  /* faulty over mem: the cache's backend */
	struct smuxfs_rcache *rc;
};

/* ---- helpers ---- */

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	struct smux_faulty_opts none = {0};
	struct env *e = calloc(1, sizeof(*e));
	struct smux_error err;

	assert_non_null(e);
	snprintf(e->base, sizeof(e->base), "/tmp/smux-test-rcache.XXXXXX");
	assert_non_null(mkdtemp(e->base));
	snprintf(e->dir, sizeof(e->dir), "%s/read", e->base);
	assert_int_equal(smux_memory_new("mem", &e->mem, &err), 0);
	assert_int_equal(smux_faulty_new("net", e->mem, &none, &e->fb, &err),
			 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	smuxfs_rcache_free(e->rc);
	smux_backend_unref(e->fb);
	smux_backend_unref(e->mem);
	nftw(e->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(e);
	return 0;
}

static void open_cache(struct env *e, uint64_t capacity)
{
	char why[256] = "";

	smuxfs_rcache_free(e->rc);
	e->rc = NULL;
	if (smuxfs_rcache_new(e->dir, capacity, e->fb, &e->rc, why,
			      sizeof(why)) != 0)
		fail_msg("smuxfs_rcache_new: %s", why);
}

/* Byte @i of version @v of object @key. */
static char pattern(const char *key, unsigned v, uint64_t i)
{
	return (char)('a' + (key[strlen(key) - 1] * 7 + v * 13 + i) % 26);
}

/* Fills @buf with bytes [@off, @off + @n) of version @v of @key (the
 * pattern repeats every 26 bytes: copied, not computed per byte, so the
 * large objects stay cheap under the sanitizers). */
static void fill_pattern(char *buf, const char *key, unsigned v, uint64_t off,
			 size_t n)
{
	size_t done = n < 26 ? n : 26;

	for (size_t i = 0; i < done; i++)
		buf[i] = pattern(key, v, off + i);
	while (done < n) {
		size_t k = done < n - done ? done : n - done;

		memcpy(buf + done, buf, k - k % 26);
		done += k - k % 26;
		if (k < 26) {
			for (; done < n; done++)
				buf[done] = pattern(key, v, off + done);
		}
	}
}

/* Stores version @v of @key, @size bytes; fills @etag. */
static void put_obj(struct env *e, const char *key, unsigned v, size_t size,
		    char etag[SMUX_ETAG_MAX])
{
	char *buf = malloc(size ? size : 1);
	struct smux_info info;
	struct smux_error err;

	assert_non_null(buf);
	fill_pattern(buf, key, v, 0, size);
	assert_int_equal(
		smux_backend_put_buf(e->mem, NULL, key, buf, size, &err), 0);
	free(buf);
	assert_int_equal(smux_backend_head(e->mem, NULL, key, &info, &err), 0);
	assert_true(info.etag[0] != '\0');
	memcpy(etag, info.etag, SMUX_ETAG_MAX);
}

static unsigned long calls(struct env *e)
{
	return smux_faulty_calls(e->fb);
}

/* Reads [off, off+len) of version @v through the cache and checks every
 * byte; returns what smuxfs_rcache_read returned. */
static long read_check(struct env *e, const char *key, const char *etag,
		       unsigned v, uint64_t size, uint64_t off, size_t len)
{
	char *buf = malloc(len ? len : 1);
	long n;

	assert_non_null(buf);
	n = smuxfs_rcache_read(e->rc, key, etag, size, buf, len, off);
	if (n >= 0) {
		uint64_t want = off >= size ? 0 : size - off;

		if (want > len)
			want = len;
		assert_int_equal(n, (long)want);
		for (long i = 0; i < n; i++)
			if (buf[i] != pattern(key, v, off + (uint64_t)i))
				fail_msg("%s v%u: byte %llu differs", key, v,
					 (unsigned long long)(off +
							      (uint64_t)i));
	}
	free(buf);
	return n;
}

/* Files in the cache directory: their number, apparent bytes, and
 * whether a temporary one is among them. */
struct dir_usage {
	unsigned files;
	uint64_t bytes;
	uint64_t blocks; /* st_blocks * 512 */
	bool tmp;
};

static struct dir_usage usage(struct env *e)
{
	struct dir_usage u = {0};
	struct dirent *d;
	DIR *dir = opendir(e->dir);

	assert_non_null(dir);
	while ((d = readdir(dir))) {
		char path[PATH_MAX + 300];
		struct stat st;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", e->dir, d->d_name);
		assert_int_equal(lstat(path, &st), 0);
		u.files++;
		u.bytes += (uint64_t)st.st_size;
		u.blocks += (uint64_t)st.st_blocks * 512;
		if (strstr(d->d_name, ".tmp"))
			u.tmp = true;
	}
	closedir(dir);
	return u;
}

static struct smuxfs_rcache_stats stats(struct env *e)
{
	struct smuxfs_rcache_stats st;

	smuxfs_rcache_stats(e->rc, &st);
	return st;
}

/*
 * The stats once every fetch that delivered @fill_bytes has ended: a fetch
 * marks its chunks present as their bytes land (a reader is done then)
 * and counts the fill when its get returns, a moment later. Polls for at
 * most 10 s; the caller's assertion then says what was counted.
 */
static struct smuxfs_rcache_stats stats_settled(struct env *e,
						uint64_t fill_bytes)
{
	struct smuxfs_rcache_stats st = stats(e);

	for (int i = 0; i < 10000 && st.fill_bytes < fill_bytes; i++) {
		usleep(1000);
		st = stats(e);
	}
	return st;
}

/* The stats once no read-ahead is queued or in flight (polls for at most
 * 10 s): what read-ahead fetched is all counted. */
static struct smuxfs_rcache_stats stats_idle(struct env *e)
{
	struct smuxfs_rcache_stats st = stats(e);

	for (int i = 0; i < 10000 && st.ra_inflight > 0; i++) {
		usleep(1000);
		st = stats(e);
	}
	assert_int_equal(st.ra_inflight, 0);
	return st;
}

/* ---- tests ---- */

static void test_fill_and_hit(void **state)
{
	struct env *e = *state;
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	struct dir_usage u;
	unsigned long c0;

	put_obj(e, "a/obj1", 1, 10000, etag);
	open_cache(e, 1024 * KB);
	c0 = calls(e);
	assert_int_equal(read_check(e, "a/obj1", etag, 1, 10000, 0, 4096),
			 4096);
	assert_int_equal(calls(e), c0 + 1); /* one whole-object get */
	assert_int_equal(read_check(e, "a/obj1", etag, 1, 10000, 4096, 4096),
			 4096);
	assert_int_equal(read_check(e, "a/obj1", etag, 1, 10000, 8192, 4096),
			 1808);
	assert_int_equal(read_check(e, "a/obj1", etag, 1, 10000, 10000, 10), 0);
	assert_int_equal(read_check(e, "a/obj1", etag, 1, 10000, 0, 100000),
			 10000);
	assert_int_equal(calls(e), c0 + 1); /* the rest were hits */
	st = stats(e);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fills, 1);
	assert_int_equal(st.hits, 5);
	assert_int_equal(st.fill_bytes, 10000);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, 12288); /* 3 blocks of 4 KiB */
	assert_int_equal(st.bypassed, 0);
	u = usage(e);
	assert_int_equal(u.files, 1);
	assert_int_equal(u.bytes, 10000);
	assert_false(u.tmp);

	/* a second object, and an empty one */
	put_obj(e, "a/empty", 1, 0, etag);
	assert_int_equal(read_check(e, "a/empty", etag, 1, 0, 0, 4096), 0);
	assert_int_equal(read_check(e, "a/empty", etag, 1, 0, 0, 4096), 0);
	assert_int_equal(calls(e), c0 + 2);

	/* freeing the cache deletes its files */
	smuxfs_rcache_free(e->rc);
	e->rc = NULL;
	open_cache(e, 1024 * KB);
	assert_int_equal(usage(e).files, 0);
}

static void test_version_change(void **state)
{
	struct env *e = *state;
	char v1[SMUX_ETAG_MAX], v2[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;

	open_cache(e, 1024 * KB);
	put_obj(e, "k", 1, 5000, v1);
	assert_int_equal(read_check(e, "k", v1, 1, 5000, 0, 5000), 5000);
	put_obj(e, "k", 2, 7000, v2);
	assert_string_not_equal(v1, v2);
	c0 = calls(e);
	/* a new version is a miss, fetched once */
	assert_int_equal(read_check(e, "k", v2, 2, 7000, 0, 7000), 7000);
	assert_int_equal(calls(e), c0 + 1);
	assert_int_equal(read_check(e, "k", v2, 2, 7000, 100, 50), 50);
	assert_int_equal(calls(e), c0 + 1);
	/* a handle still pinned to v1 reads v1, never a mix */
	assert_int_equal(read_check(e, "k", v1, 1, 5000, 0, 5000), 5000);
	assert_int_equal(calls(e), c0 + 1);
	st = stats(e);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.entries, 2);
	assert_int_equal(usage(e).files, 2);

	/* forget drops both; v1 is gone from the backend, so it is not
	 * served again (If-Match fails: no file, the caller reads through
	 * and gets ESTALE as without a cache) */
	smuxfs_rcache_forget(e->rc, "k");
	assert_int_equal(stats(e).entries, 0);
	assert_int_equal(stats(e).bytes, 0);
	assert_int_equal(usage(e).files, 0);
	assert_true(read_check(e, "k", v1, 1, 5000, 0, 5000) < 0);
	assert_int_equal(usage(e).files, 0);
	assert_int_equal(stats(e).fill_failures, 1);
	assert_int_equal(read_check(e, "k", v2, 2, 7000, 0, 7000), 7000);
	smuxfs_rcache_forget(e->rc, "no-such-key");
	assert_int_equal(usage(e).files, 1);
}

static void test_lru_eviction(void **state)
{
	struct env *e = *state;
	char etag[10][SMUX_ETAG_MAX], key[10][16];
	const uint64_t cap = 64 * KB;
	struct smuxfs_rcache_stats st;
	struct dir_usage u;
	unsigned long c0;

	open_cache(e, cap);
	for (int i = 0; i < 10; i++) {
		snprintf(key[i], sizeof(key[i]), "o%d", i);
		/* 12000 bytes: 12 KiB charged, 5 fit in 64 KiB */
		put_obj(e, key[i], 1, 12000, etag[i]);
	}
	for (int i = 0; i < 5; i++)
		assert_int_equal(
			read_check(e, key[i], etag[i], 1, 12000, 0, 12000),
			12000);
	assert_int_equal(stats(e).evictions, 0);
	/* o0 used again: o1 is now the least recently used */
	c0 = calls(e);
	assert_int_equal(read_check(e, key[0], etag[0], 1, 12000, 0, 10), 10);
	assert_int_equal(calls(e), c0);
	assert_int_equal(read_check(e, key[5], etag[5], 1, 12000, 0, 10), 10);
	assert_int_equal(stats(e).evictions, 1);
	c0 = calls(e);
	assert_int_equal(read_check(e, key[0], etag[0], 1, 12000, 0, 10), 10);
	assert_int_equal(calls(e), c0); /* kept */
	assert_int_equal(read_check(e, key[1], etag[1], 1, 12000, 0, 10), 10);
	assert_int_equal(calls(e), c0 + 1); /* evicted: fetched again */

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 10; i++) {
			assert_int_equal(read_check(e, key[i], etag[i], 1,
						    12000, 6000, 6000),
					 6000);
			st = stats(e);
			u = usage(e);
			assert_true(st.bytes <= cap);
			assert_true(u.bytes <= cap);
			assert_true(u.blocks <= cap);
			assert_false(u.tmp);
			assert_int_equal(u.files, st.entries);
		}
	}
	st = stats(e);
	assert_int_equal(st.entries, 5);
	assert_true(st.evictions >= 25);
	assert_int_equal(st.bypassed, 0);
}

static void test_oversized(void **state)
{
	struct env *e = *state;
	char big[SMUX_ETAG_MAX], fits[SMUX_ETAG_MAX];
	unsigned long c0;

	open_cache(e, 64 * KB); /* objects up to 16 KiB */
	put_obj(e, "big", 1, 16 * KB + 1, big);
	put_obj(e, "fits", 1, 16 * KB, fits);
	c0 = calls(e);
	assert_int_equal(smuxfs_rcache_read(e->rc, "big", big, 16 * KB + 1,
					    (char[16]){0}, 16, 0),
			 -EFBIG);
	assert_int_equal(calls(e), c0); /* never fetched */
	assert_int_equal(usage(e).files, 0);
	assert_int_equal(stats(e).bypassed, 1);
	assert_int_equal(stats(e).misses, 0);
	assert_int_equal(read_check(e, "fits", fits, 1, 16 * KB, 0, 16 * KB),
			 16 * KB);
	assert_int_equal(usage(e).files, 1);

	/* no etag, no cache */
	assert_true(smuxfs_rcache_read(e->rc, "fits", "", 16 * KB,
				       (char[16]){0}, 16, 0) < 0);
	/* a zero capacity caches nothing that takes room */
	open_cache(e, 0);
	assert_true(smuxfs_rcache_read(e->rc, "fits", fits, 16 * KB,
				       (char[16]){0}, 16, 0) < 0);
	assert_int_equal(usage(e).files, 0);
}

static void test_failed_fill(void **state)
{
	struct env *e = *state;
	struct smux_faulty_opts fail_gets = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct smux_faulty_opts none = {0};
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;

	open_cache(e, 1024 * KB);
	put_obj(e, "f", 1, 9000, etag);
	smux_faulty_set(e->fb, &fail_gets);
	c0 = calls(e);
	assert_true(read_check(e, "f", etag, 1, 9000, 0, 4096) < 0);
	assert_int_equal(calls(e), c0 + 1);
	assert_int_equal(usage(e).files, 0); /* no file, no .tmp */
	st = stats(e);
	assert_int_equal(st.fill_failures, 1);
	assert_int_equal(st.bytes, 0);
	/* the failure is remembered: no fill per read */
	smux_faulty_set(e->fb, &none);
	assert_true(read_check(e, "f", etag, 1, 9000, 4096, 4096) < 0);
	assert_int_equal(calls(e), c0 + 1);
	assert_int_equal(stats(e).bypassed, 2);

	/* an object shorter or longer than the size pinned at open */
	put_obj(e, "short", 1, 3000, etag);
	assert_true(read_check(e, "short", etag, 1, 4000, 0, 100) < 0);
	put_obj(e, "long", 1, 5000, etag);
	assert_true(read_check(e, "long", etag, 1, 4000, 0, 100) < 0);
	/* a key that is gone */
	assert_true(read_check(e, "gone", "\"x\"", 1, 100, 0, 100) < 0);
	assert_int_equal(usage(e).files, 0);
	st = stats(e);
	assert_int_equal(st.fill_failures, 4);
	assert_int_equal(st.fills, 0);
	assert_int_equal(st.bytes, 0);
}

struct racer {
	struct env *e;
	const char *key;
	const char *etag;
	pthread_barrier_t *go;
	long n;
	bool ok;
};

static void *race_read(void *arg)
{
	struct racer *r = arg;
	size_t len = 40000;
	char *buf = malloc(len);

	r->ok = buf != NULL;
	pthread_barrier_wait(r->go);
	if (!buf)
		return NULL;
	r->n = smuxfs_rcache_read(r->e->rc, r->key, r->etag, len, buf, len, 0);
	for (long i = 0; r->ok && i < r->n; i++)
		r->ok = buf[i] == pattern(r->key, 1, (uint64_t)i);
	free(buf);
	return NULL;
}

static void test_concurrent_fill(void **state)
{
	enum { N = 8 };
	struct env *e = *state;
	struct smux_faulty_opts slow = {
		.latency_ms = 100,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct racer r[N];
	pthread_t t[N];
	pthread_barrier_t go;
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;

	open_cache(e, 1024 * KB);
	put_obj(e, "shared", 1, 40000, etag);
	smux_faulty_set(e->fb, &slow);
	pthread_barrier_init(&go, NULL, N);
	c0 = calls(e);
	for (int i = 0; i < N; i++) {
		r[i] = (struct racer){
			.e = e, .key = "shared", .etag = etag, .go = &go};
		assert_int_equal(pthread_create(&t[i], NULL, race_read, &r[i]),
				 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_true(r[i].ok);
		assert_int_equal(r[i].n, 40000);
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(calls(e), c0 + 1); /* one fill for all */
	st = stats(e);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fills, 1);
	assert_int_equal(st.hits, N);
	assert_int_equal(usage(e).files, 1);
}

/* Deletes every file of the cache directory (behind the cache's back). */
static void wipe_files(struct env *e)
{
	struct dirent *d;
	DIR *dir = opendir(e->dir);

	assert_non_null(dir);
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			assert_int_equal(unlinkat(dirfd(dir), d->d_name, 0), 0);
	closedir(dir);
}

static void test_damaged_file(void **state)
{
	struct env *e = *state;
	char etag[SMUX_ETAG_MAX];
	unsigned long c0;

	open_cache(e, 1024 * KB);
	put_obj(e, "d", 1, 6000, etag);
	assert_int_equal(read_check(e, "d", etag, 1, 6000, 0, 6000), 6000);
	wipe_files(e);
	c0 = calls(e);
	/* not served (the caller reads through), and dropped */
	assert_true(read_check(e, "d", etag, 1, 6000, 0, 6000) < 0);
	assert_int_equal(stats(e).entries, 0);
	assert_int_equal(stats(e).bytes, 0);
	/* the next read fills it again */
	assert_int_equal(read_check(e, "d", etag, 1, 6000, 10, 100), 100);
	assert_int_equal(calls(e), c0 + 1);
	assert_int_equal(usage(e).files, 1);
}

/* Creates @name in @dir with @data. */
static void put_file(const char *dir, const char *name, const char *data)
{
	char path[PATH_MAX + 300];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

static bool exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX + 300];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/*
 * What an earlier run cached is deleted at start, whether the cache is on
 * or off; what is not named as the cache names its files (a directory
 * the operator shares with something else, or that held a user's files)
 * is left where it is.
 */
static void test_discard_at_start(void **state)
{
	static const char own1[] = "0123456789abcdef0123456789abcdef"
				   "0123456789abcdef0123456789abcdef"
				   "-0000000000000001";
	static const char own2[] = "fedcba9876543210fedcba9876543210"
				   "fedcba9876543210fedcba9876543210"
				   "-00000000000000ff";
	struct env *e = *state;
	char path[PATH_MAX + 32], etag[SMUX_ETAG_MAX];

	put_obj(e, "k", 1, 6000, etag);
	assert_int_equal(mkdir(e->dir, 0700), 0);
	put_file(e->dir, own1, "stale");
	put_file(e->dir, "precious", "a user's file");
	put_file(e->dir, "0123-0000000000000001", "short hash");
	snprintf(path, sizeof(path), "%s/sub", e->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	open_cache(e, 64 * KB);
	assert_false(exists_in(e->dir, own1));
	assert_true(exists_in(e->dir, "precious"));
	assert_true(exists_in(e->dir, "0123-0000000000000001"));
	assert_true(exists_in(e->dir, "sub"));
	/* the cache works beside them */
	assert_int_equal(read_check(e, "k", etag, 1, 6000, 10, 100), 100);
	assert_int_equal(usage(e).files, 4); /* its own file beside them */

	/* and when the cache is off */
	smuxfs_rcache_free(e->rc);
	e->rc = NULL;
	put_file(e->dir, own2, "stale");
	assert_int_equal(smuxfs_rcache_discard(e->dir), 0);
	assert_false(exists_in(e->dir, own2));
	assert_true(exists_in(e->dir, "precious"));
	assert_int_equal(rmdir(path), 0);
	snprintf(path, sizeof(path), "%s/precious", e->dir);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/0123-0000000000000001", e->dir);
	assert_int_equal(unlink(path), 0);
	/* nothing else was left: every cache file of the first run went */
	assert_int_equal(rmdir(e->dir), 0);
	assert_int_equal(smuxfs_rcache_discard(e->dir), 0); /* missing */
	open_cache(e, 64 * KB);				    /* re-created */
	assert_int_equal(usage(e).files, 0);
}

/*
 * A cache directory a live cache uses (a second mount with the same
 * cache_dir) is not emptied under it: a second cache there is refused
 * (-EBUSY, saying why; the daemon then runs without one) and a discard
 * leaves it alone; once the first is gone, the next cache empties it.
 */
static void test_dir_in_use(void **state)
{
	struct env *e = *state;
	struct smuxfs_rcache *second = NULL;
	char etag[SMUX_ETAG_MAX], why[256] = "";
	unsigned before;

	put_obj(e, "k", 1, 6000, etag);
	open_cache(e, 64 * KB);
	assert_int_equal(read_check(e, "k", etag, 1, 6000, 10, 100), 100);
	before = usage(e).files;
	assert_true(before >= 1);
	assert_int_equal(smuxfs_rcache_new(e->dir, 64 * KB, e->fb, &second, why,
					   sizeof(why)),
			 -EBUSY);
	assert_null(second);
	assert_non_null(strstr(why, "in use"));
	assert_int_equal(smuxfs_rcache_discard(e->dir), 0);
	assert_int_equal(usage(e).files, before);
	/* the first still serves from its file */
	assert_int_equal(read_check(e, "k", etag, 1, 6000, 200, 100), 100);
	smuxfs_rcache_free(e->rc);
	e->rc = NULL;
	put_file(e->dir,
		 "0123456789abcdef0123456789abcdef0123456789abcdef"
		 "0123456789abcdef-0000000000000007",
		 "stale");
	open_cache(e, 64 * KB);
	assert_int_equal(usage(e).files, 0);
}

/* Several threads read and forget objects at random in a small cache;
 * every byte read is checked, and the cache stays within its bounds. */
struct stress {
	struct env *e;
	char (*etag)[SMUX_ETAG_MAX];
	unsigned seed;
	unsigned bad;
};

#define STRESS_OBJS 16
#define STRESS_SIZE 5000

static void *stress_run(void *arg)
{
	struct stress *s = arg;
	char buf[STRESS_SIZE];

	for (int i = 0; i < 400; i++) {
		unsigned o = (unsigned)rand_r(&s->seed) % STRESS_OBJS;
		uint64_t off = (uint64_t)rand_r(&s->seed) % STRESS_SIZE;
		size_t len = (size_t)rand_r(&s->seed) % STRESS_SIZE + 1;
		char key[16];
		long n;

		snprintf(key, sizeof(key), "s%u", o);
		if (rand_r(&s->seed) % 16 == 0) {
			smuxfs_rcache_forget(s->e->rc, key);
			continue;
		}
		n = smuxfs_rcache_read(s->e->rc, key, s->etag[o], STRESS_SIZE,
				       buf, len, off);
		if (n < 0) {
			if (n != -ENOSPC)
				s->bad++;
			continue;
		}
		if ((uint64_t)n !=
		    (off + len > STRESS_SIZE ? STRESS_SIZE - off : len))
			s->bad++;
		for (long j = 0; j < n; j++)
			if (buf[j] != pattern(key, 1, off + (uint64_t)j)) {
				s->bad++;
				break;
			}
	}
	return NULL;
}

static void test_stress(void **state)
{
	enum { N = 4 };
	struct env *e = *state;
	char etag[STRESS_OBJS][SMUX_ETAG_MAX];
	struct stress s[N];
	pthread_t t[N];
	struct smuxfs_rcache_stats st;
	struct dir_usage u;

	open_cache(e, 32 * KB); /* 4 objects of 8 KiB charged */
	for (int i = 0; i < STRESS_OBJS; i++) {
		char key[16];

		snprintf(key, sizeof(key), "s%d", i);
		put_obj(e, key, 1, STRESS_SIZE, etag[i]);
	}
	for (int i = 0; i < N; i++) {
		s[i] = (struct stress){.e = e, .etag = etag, .seed = 7u + i};
		assert_int_equal(pthread_create(&t[i], NULL, stress_run, &s[i]),
				 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(s[i].bad, 0);
	}
	st = stats(e);
	u = usage(e);
	assert_true(st.bytes <= 32 * KB);
	assert_true(u.bytes <= 32 * KB);
	assert_int_equal(u.files, st.entries);
	assert_false(u.tmp);
	assert_true(st.hits > 0);
	assert_true(st.fills > 0);
	assert_int_equal(st.fill_failures, 0);
}

/* ---- the sparse cache and read-ahead ---- */

#define MB (1024 * KB)

/* Reads [off, off+len) through the stream @ra (NULL: none) and checks
 * every byte against version @v. */
static long read_ra_check(struct env *e, struct smuxfs_rcache_ra *ra,
			  const char *key, const char *etag, unsigned v,
			  uint64_t size, uint64_t off, size_t len)
{
	char *buf = malloc(len ? len : 1);
	long n;

	assert_non_null(buf);
	n = smuxfs_rcache_read_ra(e->rc, ra, key, etag, size, buf, len, off);
	if (n >= 0) {
		uint64_t want = off >= size ? 0 : size - off;
		char *exp = malloc(len ? len : 1);

		if (want > len)
			want = len;
		assert_int_equal(n, (long)want);
		assert_non_null(exp);
		fill_pattern(exp, key, v, off, (size_t)n);
		if (memcmp(buf, exp, (size_t)n) != 0)
			fail_msg("%s v%u: bytes at %llu differ", key, v,
				 (unsigned long long)off);
		free(exp);
	}
	free(buf);
	return n;
}

/* A read in the middle of a large object fetches its own 1 MiB chunk
 * only, not the whole object (the cache used to fetch all of it before
 * serving the first byte). */
static void test_random_read_fetches_its_chunk(void **state)
{
	struct env *e = *state;
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;

	open_cache(e, 64 * MB);
	put_obj(e, "big", 1, 8 * MB + 5, etag);
	c0 = calls(e);
	assert_int_equal(
		read_check(e, "big", etag, 1, 8 * MB + 5, 5 * MB + 100, 4096),
		4096);
	assert_int_equal(calls(e), c0 + 1);
	st = stats(e);
	assert_int_equal(st.fill_bytes, 1 * MB);
	/* the same chunk again: a hit */
	assert_int_equal(
		read_check(e, "big", etag, 1, 8 * MB + 5, 5 * MB + 8192, 4096),
		4096);
	assert_int_equal(calls(e), c0 + 1);
	/* across two chunks: one get for the missing one */
	assert_int_equal(
		read_check(e, "big", etag, 1, 8 * MB + 5, 6 * MB - 10, 20), 20);
	assert_int_equal(calls(e), c0 + 2);
	/* the short last chunk */
	assert_int_equal(
		read_check(e, "big", etag, 1, 8 * MB + 5, 8 * MB, 4096), 5);
	assert_int_equal(calls(e), c0 + 3);
	st = stats(e);
	assert_int_equal(st.fill_bytes, 2 * MB + 5);
	assert_int_equal(st.fills, 3);
	assert_int_equal(st.bytes, 8 * MB + 4096); /* charged whole */
}

/* Random reads through a stream queue no read-ahead; sequential reads
 * do, and fetch every byte exactly once in far fewer gets than chunks. */
static void test_sequential_readahead(void **state)
{
	struct env *e = *state;
	const uint64_t size = 12 * MB + 777;
	struct smuxfs_rcache_ra ra = {0}, rnd = {0};
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;

	open_cache(e, 128 * MB);
	put_obj(e, "rnd", 1, size, etag);
	/* random reads (not starting at 0): no read-ahead, one get each */
	c0 = calls(e);
	for (int i = 0; i < 6; i++)
		assert_int_equal(read_ra_check(e, &rnd, "rnd", etag, 1, size,
					       (uint64_t)(i * 7 % 10 + 1) * MB,
					       4096),
				 4096);
	assert_int_equal(calls(e), c0 + 6);
	assert_int_equal(stats(e).ra_gets, 0);
	put_obj(e, "seq", 1, size, etag);
	c0 = calls(e);
	for (uint64_t off = 0; off < size; off += 128 * KB)
		assert_true(read_ra_check(e, &ra, "seq", etag, 1, size, off,
					  128 * KB) > 0);
	st = stats_settled(e, 6 * MB + size);
	assert_true(st.ra_gets > 0);
	/* 13 chunks in gets of up to 8 MiB: far fewer gets than chunks */
	assert_true(calls(e) - c0 <= 6);
	assert_int_equal(st.fill_bytes, 6 * MB + size); /* none twice */
	assert_true(st.ra_inflight_max <= st.ra_budget);
	assert_int_equal(st.fill_failures, 0);
	/* a second pass: all hits */
	c0 = calls(e);
	memset(&ra, 0, sizeof(ra));
	for (uint64_t off = 0; off < size; off += 1 * MB)
		assert_true(read_ra_check(e, &ra, "seq", etag, 1, size, off,
					  1 * MB) > 0);
	assert_int_equal(calls(e), c0);
}

/*
 * A stream from offset 0 starts with a small window (a reader of a file's
 * head costs little more than its own chunks) and, once its first refill
 * shows it sequential, queues RC_STREAM bytes: a get for every worker at
 * once. Before, the window doubled from 1.125 MiB, so after 3 MiB read
 * in order about 6 MiB were queued and one or two gets were in flight.
 */
static void test_stream_window(void **state)
{
	struct env *e = *state;
	const uint64_t size = 48 * MB;
	struct smuxfs_rcache_ra ra = {0};
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;

	open_cache(e, 256 * MB);
	put_obj(e, "win", 1, size, etag);
	for (uint64_t off = 0; off < 3 * MB; off += 128 * KB)
		assert_true(read_ra_check(e, &ra, "win", etag, 1, size, off,
					  128 * KB) > 0);
	st = stats(e);
	print_message("  queued %llu bytes in %llu gets after 3 MiB\n",
		      (unsigned long long)st.ra_bytes,
		      (unsigned long long)st.ra_gets);
	assert_true(st.ra_bytes >= 30 * MB);
	assert_true(st.ra_inflight_max <= st.ra_budget);
	/* the bytes queued land, right */
	st = stats_settled(e, 3 * MB + st.ra_bytes);
	assert_int_equal(st.fill_failures, 0);
	for (uint64_t off = 3 * MB; off < 34 * MB; off += 1 * MB)
		assert_true(read_ra_check(e, &ra, "win", etag, 1, size, off,
					  1 * MB) > 0);
}

/*
 * An object larger than a quarter of the capacity is cached in segments
 * (each at most that quarter, charged and evicted on its own) instead of
 * read past the cache with a get per read: a sequential stream gets
 * read-ahead across the segments, every byte is fetched once and right,
 * the cache stays within its capacity, and a read across a segment
 * boundary is served whole.
 */
static void test_large_object_segments(void **state)
{
	struct env *e = *state;
	const uint64_t size = 20 * MB + 333;
	struct smuxfs_rcache_ra ra = {0};
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;
	unsigned reads = 0;

	open_cache(e, 16 * MB); /* segments of 4 MiB */
	put_obj(e, "large", 1, size, etag);
	c0 = calls(e);
	for (uint64_t off = 0; off < size; off += 128 * KB, reads++) {
		assert_true(read_ra_check(e, &ra, "large", etag, 1, size, off,
					  128 * KB) > 0);
		assert_true(stats(e).bytes <= 16 * MB);
	}
	st = stats_settled(e, size);
	assert_int_equal(st.bypassed, 0);
	assert_int_equal(st.fill_failures, 0);
	assert_true(st.ra_gets > 0);
	assert_int_equal(st.fill_bytes, size); /* each byte once */
	print_message("%u reads, %lu gets\n", reads, calls(e) - c0);
	assert_true(calls(e) - c0 <= reads / 8);
	assert_true(st.evictions > 0);
	assert_true(usage(e).blocks <= 16 * MB);
	/* across the boundary of two segments, and the short end */
	assert_int_equal(read_check(e, "large", etag, 1, size, 8 * MB - 4, 8),
			 8);
	assert_int_equal(read_check(e, "large", etag, 1, size, 20 * MB, 4096),
			 333);
	assert_int_equal(read_check(e, "large", etag, 1, size, size, 16), 0);
	assert_int_equal(stats(e).bypassed, 0);
}

/*
 * Reads a 32 MiB object through a cache of 16 MiB (segments of 4 MiB,
 * four at most) with an 8 MiB read-ahead budget, one stream, 1 MiB at a
 * time at the offsets in MiB of @order (@n of them, each once), letting
 * its read-ahead land before the next read; every byte must be fetched
 * once, with evictions along the way.
 */
static void stream_in_order(struct env *e, const unsigned *order, size_t n)
{
	const uint64_t size = 32 * MB;
	struct smuxfs_rcache_ra ra = {0};
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;

	open_cache(e, 16 * MB);
	smuxfs_rcache_set_readahead(e->rc, 8 * MB);
	put_obj(e, "order", 1, size, etag);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(read_ra_check(e, &ra, "order", etag, 1, size,
					       order[i] * MB, 1 * MB),
				 (long)(1 * MB));
		stats_idle(e);
	}
	st = stats_idle(e);
	print_message("  %llu bytes fetched, %llu evictions\n",
		      (unsigned long long)st.fill_bytes,
		      (unsigned long long)st.evictions);
	assert_true(st.evictions > 0);
	assert_true(st.ra_gets > 0);
	assert_int_equal(st.fill_bytes, size); /* every byte once */
	assert_int_equal(st.fill_failures, 0);
	assert_int_equal(st.bypassed, 0);
}

/*
 * The kernel's read-ahead of a FUSE file sometimes asks for bytes far
 * ahead of the reader (seen: the last 2 MiB of a 32 MiB file while cat
 * was at 14 MiB), then goes on in order and never asks for them again
 * (they are in its page cache). With a cache too small to keep them until
 * the stream gets there, the stream's read-ahead fetched them a second
 * time (test_http_read under load: "the big file was fetched more than
 * once", 33-35 MiB for 32). What this handle was already served is not
 * read ahead again.
 */
static void test_readahead_skips_served(void **state)
{
	/* in MiB: 0-13 in order, the kernel's early reads of the end, then
	 * the rest in order up to what the kernel already has */
	static const unsigned order[] = {
		0,  1,	2,  3,	4,  5,	6,  7,	8,  9,	10, 11, 12, 13, 30, 31,
		14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29};

	stream_in_order(*state, order, sizeof(order) / sizeof(order[0]));
}

/*
 * The kernel's reads of a stream arrive out of order (its read-ahead
 * keeps several READs in flight and the daemon's threads take them as
 * they come): a late READ of a segment the stream had left made it the
 * most recently used, and the next segment's entry evicted the one the
 * stream was in, whose read-ahead chunks the kernel had not read yet; they
 * were fetched again (test_http_read in CI: 33 MiB fetched for 32). A
 * segment whose chunks were all read is evicted before one holding chunks
 * read ahead and not read yet.
 */
static void test_unread_readahead_kept(void **state)
{
	/* in MiB: in order, 12 before 11, then READs ahead of the ones the
	 * stream has not sent yet (13-15, read ahead), then the rest */
	static const unsigned order[] = {
		0,  1,	2,  3,	4,  5,	6,  7,	8,  9,	10, 12, 11, 16, 20, 24,
		13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26, 27, 28, 29, 30, 31};

	stream_in_order(*state, order, sizeof(order) / sizeof(order[0]));
}

/* Several readers at once stream one object under a small budget: every
 * byte right, each fetched once, the budget never exceeded. */
/*
 * A stream that outruns its read-ahead (the store is slower than the
 * reader) waits for the next piece, which starts at the chunk it needs,
 * instead of fetching that chunk with a get of its own and the rest of
 * the piece with another: a cold 512 MiB read from s3rver sent 8 such
 * 1 MiB gets among 41; their requests cost the server more than their
 * bytes. The budget still bounds what is ahead of the reader.
 */
static void test_stream_outruns_readahead(void **state)
{
	struct env *e = *state;
	const uint64_t size = 40 * MB;
	struct smux_faulty_opts slow = {
		.latency_ms = 20,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct smuxfs_rcache_ra ra = {0};
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;
	unsigned long c0;

	open_cache(e, 128 * MB);
	smuxfs_rcache_set_readahead(e->rc, 4 * MB);
	put_obj(e, "fast", 1, size, etag);
	smux_faulty_set(e->fb, &slow);
	c0 = calls(e);
	for (uint64_t off = 0; off < size; off += 1 * MB)
		assert_int_equal(read_ra_check(e, &ra, "fast", etag, 1, size,
					       off, 1 * MB),
				 (long)(1 * MB));
	st = stats_settled(e, size);
	print_message("  %lu gets, %llu read-ahead gets\n", calls(e) - c0,
		      (unsigned long long)st.ra_gets);
	assert_int_equal(st.fill_bytes, size); /* every byte once */
	assert_true(st.ra_inflight_max <= 4 * MB);
	/* the first read fetches its own chunk (the stream is not proven
	 * yet), none after (before: 8 of 18 gets); 40 MiB in pieces of up
	 * to 4 MiB (the budget) and the reader's chunk */
	assert_true(calls(e) - c0 - st.ra_gets <= 2);
	assert_true(calls(e) - c0 <= 20);
	assert_int_equal(st.fill_failures, 0);
}

struct streamer {
	struct env *e;
	const char *etag;
	uint64_t size;
	pthread_barrier_t *go;
	bool ok;
};

static void *stream_run(void *arg)
{
	struct streamer *s = arg;
	struct smuxfs_rcache_ra ra = {0};
	size_t len = 128 * KB;
	char *buf = malloc(len), *exp = malloc(len);

	s->ok = buf && exp;
	pthread_barrier_wait(s->go);
	for (uint64_t off = 0; s->ok && off < s->size; off += len) {
		long n = smuxfs_rcache_read_ra(s->e->rc, &ra, "shared", s->etag,
					       s->size, buf, len, off);
		uint64_t want = s->size - off < len ? s->size - off : len;

		s->ok = n == (long)want;
		if (s->ok) {
			fill_pattern(exp, "shared", 1, off, (size_t)n);
			s->ok = memcmp(buf, exp, (size_t)n) == 0;
		}
	}
	free(buf);
	free(exp);
	return NULL;
}

static void test_concurrent_streams_budget(void **state)
{
	enum { N = 4 };
	struct env *e = *state;
	const uint64_t size = 8 * MB + 3;
	struct smux_faulty_opts slow = {
		.latency_ms = 5,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct streamer s[N];
	pthread_t t[N];
	pthread_barrier_t go;
	char etag[SMUX_ETAG_MAX];
	struct smuxfs_rcache_stats st;

	open_cache(e, 128 * MB);
	smuxfs_rcache_set_readahead(e->rc, 3 * MB);
	put_obj(e, "shared", 1, size, etag);
	smux_faulty_set(e->fb, &slow);
	pthread_barrier_init(&go, NULL, N);
	for (int i = 0; i < N; i++) {
		s[i] = (struct streamer){
			.e = e, .etag = etag, .size = size, .go = &go};
		assert_int_equal(pthread_create(&t[i], NULL, stream_run, &s[i]),
				 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_true(s[i].ok);
	}
	pthread_barrier_destroy(&go);
	st = stats_settled(e, size);
	assert_int_equal(st.fill_bytes, size); /* every byte once */
	assert_true(st.ra_inflight_max <= 3 * MB);
	assert_int_equal(st.ra_budget, 3 * MB);
	assert_int_equal(st.fill_failures, 0);
	assert_int_equal(usage(e).files, 1);
}

/* Read-ahead never asks for more than half the cache: with cache_size
 * 16M and the default 64 MiB window, read-ahead of a large file pinned
 * segments the reader then found no room for, and its read went past the
 * cache (test_http_read under load: "1 reads past the cache"). */
static void test_readahead_within_cache(void **state)
{
	struct env *e = *state;

	open_cache(e, 16 * MB);
	smuxfs_rcache_set_readahead(e->rc, SMUXFS_RCACHE_RA_DEFAULT);
	assert_int_equal(stats(e).ra_budget, 8 * MB);
	smuxfs_rcache_set_readahead(e->rc, 2 * MB); /* below: kept */
	assert_int_equal(stats(e).ra_budget, 2 * MB);
}

/* Every fetch is pinned to the version opened: once the object is
 * replaced, a chunk not yet fetched is not served (the caller reads
 * through and answers ESTALE), never mixed with the new version. */
static void test_pinned_version(void **state)
{
	struct env *e = *state;
	const uint64_t size = 6 * MB;
	char etag[SMUX_ETAG_MAX], etag2[SMUX_ETAG_MAX];
	unsigned long c0;

	open_cache(e, 64 * MB);
	put_obj(e, "p", 1, size, etag);
	assert_int_equal(read_check(e, "p", etag, 1, size, 0, 4096), 4096);
	put_obj(e, "p", 2, size, etag2);
	c0 = calls(e);
	assert_true(read_check(e, "p", etag, 1, size, 3 * MB, 4096) < 0);
	assert_int_equal(calls(e), c0 + 1);
	/* the old version is not served any more, not even its chunk 0 */
	assert_true(read_check(e, "p", etag, 1, size, 0, 4096) < 0);
	assert_int_equal(calls(e), c0 + 1);
	assert_int_equal(usage(e).files, 0);
	/* the new version is a new entry */
	assert_int_equal(read_check(e, "p", etag2, 2, size, 3 * MB, 4096),
			 4096);
	/* shutting down with read-ahead queued or running is clean */
	{
		struct smuxfs_rcache_ra ra = {0};

		for (uint64_t off = 0; off < 3 * MB; off += 128 * KB)
			assert_true(read_ra_check(e, &ra, "p", etag2, 2, size,
						  off, 128 * KB) > 0);
	}
	smuxfs_rcache_free(e->rc);
	e->rc = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fill_and_hit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_version_change, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lru_eviction, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_oversized, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_fill, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_fill, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_damaged_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dir_in_use, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_discard_at_start, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stress, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_random_read_fetches_its_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sequential_readahead,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_outruns_readahead,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_streams_budget,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_object_segments,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_window, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_readahead_skips_served,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unread_readahead_kept,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_readahead_within_cache,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_pinned_version, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("rcache", tests, NULL, NULL);
}
