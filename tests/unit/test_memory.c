// SPDX-License-Identifier: MIT
/*
 * test_memory.c - what is particular to the memory backend (the behaviours
 * every backend shares are in tests/conformance/): object counts, etags
 * from one counter, directory conventions, writer snapshots, cancellation
 * between chunks, failing sources and sinks, out-of-memory, no lock held
 * across callbacks, listing pages, and whole-object consistency under
 * concurrent puts and gets of one key.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "smux/memory.h"

/* Huge allocations must fail with NULL under the sanitizers too
 * (test_no_memory) instead of aborting the run. */
const char *__asan_default_options(void);
const char *__tsan_default_options(void);

const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}

const char *__tsan_default_options(void)
{
	return "allocator_may_return_null=1";
}

static int setup(void **state)
{
	struct smux_backend *b;
	struct smux_error err;

	if (smux_memory_new("mem", &b, &err) != 0)
		return -1;
	*state = b;
	return 0;
}

static int teardown(void **state)
{
	smux_backend_unref(*state);
	return 0;
}

static void put(struct smux_backend *b, const char *key, const char *s)
{
	struct smux_error err;

	assert_int_equal(smux_backend_put_buf(b, NULL, key, s, strlen(s), &err),
			 0);
}

static void expect(struct smux_backend *b, const char *key, const void *buf,
		   size_t len)
{
	struct smux_error err;
	unsigned char *got;
	size_t got_len;

	assert_int_equal(
		smux_backend_get_all(b, NULL, key, &got, &got_len, &err), 0);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, buf, len);
	free(got);
}

static void test_count(void **state)
{
	struct smux_backend *b = *state;
	struct smux_error err;

	assert_int_equal(smux_memory_count(b), 0);
	put(b, "a", "1");
	put(b, "d/x", "2");
	put(b, "d/", "");
	assert_int_equal(smux_memory_count(b), 3); /* markers count */
	put(b, "a", "overwritten");
	assert_int_equal(smux_memory_count(b), 3);
	assert_int_equal(smux_backend_copy(b, NULL, "a", "c", &err), 0);
	assert_int_equal(smux_memory_count(b), 4);
	assert_int_equal(smux_backend_del(b, NULL, "nope", &err), 0);
	assert_int_equal(smux_memory_count(b), 4);
	/* A marker goes alone; its directory's keys stay. */
	assert_int_equal(smux_backend_del(b, NULL, "d/", &err), 0);
	assert_int_equal(smux_memory_count(b), 3);
	expect(b, "d/x", "2", 1);
}

static void etag_of(struct smux_backend *b, const char *key, char *out)
{
	struct smux_error err;
	struct smux_info info;

	assert_int_equal(smux_backend_head(b, NULL, key, &info, &err), 0);
	assert_true(info.etag[0] != '\0');
	memcpy(out, info.etag, sizeof(info.etag));
}

static void test_etag_versions(void **state)
{
	struct smux_backend *b = *state, *b2;
	struct smux_put_opts opts = {.mtime_ns = 1234567890123456789LL};
	struct smux_source src;
	struct smux_writer *w;
	struct smux_error err;
	char e1[SMUX_ETAG_MAX], e2[SMUX_ETAG_MAX], e3[SMUX_ETAG_MAX];
	char e4[SMUX_ETAG_MAX], e5[SMUX_ETAG_MAX];

	/* every store is a new version, same size and content or not */
	put(b, "x", "same");
	etag_of(b, "x", e1);
	put(b, "x", "same");
	etag_of(b, "x", e2);
	assert_string_not_equal(e1, e2);
	assert_int_equal(smux_backend_copy(b, NULL, "x", "z", &err), 0);
	etag_of(b, "z", e3);
	/* a copy keeps mtime and content: the same version token */
	assert_string_equal(e2, e3);
	assert_int_equal(smux_backend_writer_open(b, NULL, "x", 0, &w, &err),
			 0);
	assert_int_equal(smux_writer_commit(w, NULL, NULL, NULL, &err), 0);
	smux_writer_close(w);
	etag_of(b, "x", e4);
	assert_string_not_equal(e2, e4);

	/* replicas written with one explicit mtime agree on the version */
	assert_int_equal(smux_memory_new("twin", &b2, &err), 0);
	smux_source_buf(&src, "abc", 3);
	assert_int_equal(
		smux_backend_put(b, NULL, "r", &src, &opts, NULL, &err), 0);
	assert_int_equal(
		smux_backend_put(b2, NULL, "r", &src, &opts, NULL, &err), 0);
	etag_of(b, "r", e4);
	etag_of(b2, "r", e5);
	assert_string_equal(e4, e5);
	smux_backend_unref(b2);
}

static void test_directory_info(void **state)
{
	struct smux_backend *b = *state;
	struct smux_error err;
	struct smux_info info;

	put(b, "f", "file");
	assert_int_equal(smux_backend_head(b, NULL, "f", &info, &err), 0);
	assert_int_equal(info.mode, S_IFREG | 0644);
	put(b, "m/", "");
	assert_int_equal(smux_backend_head(b, NULL, "m/", &info, &err), 0);
	assert_int_equal(info.mode, S_IFDIR | 0755);
	assert_true(info.etag[0] != '\0'); /* a marker is an object */
	put(b, "i/j/k", "deep");
	assert_int_equal(smux_backend_head(b, NULL, "i", &info, &err), 0);
	assert_int_equal(info.mode, S_IFDIR | 0755);
	assert_string_equal(info.etag, ""); /* implied: no version */
	assert_int_equal(smux_backend_head(b, NULL, "i/j/", &info, &err), 0);
	assert_int_equal(info.mode, S_IFDIR | 0755);
	/* "i." sorts between "i" and "i/": it hides nothing. */
	put(b, "i.", "dot");
	assert_int_equal(smux_backend_head(b, NULL, "i", &info, &err), 0);
	assert_int_equal(info.mode & S_IFMT, S_IFDIR);
	/* An object and a directory of the same name: the object answers. */
	put(b, "i", "object");
	assert_int_equal(smux_backend_head(b, NULL, "i", &info, &err), 0);
	assert_int_equal(info.mode & S_IFMT, S_IFREG);
	assert_int_equal(smux_backend_head(b, NULL, "i/", &info, &err), 0);
	assert_int_equal(info.mode & S_IFMT, S_IFDIR);
}

static void test_writer_snapshot(void **state)
{
	struct smux_backend *b = *state;
	struct smux_writer *w;
	struct smux_error err;
	char buf[16];

	put(b, "k", "abcdef");
	assert_int_equal(smux_backend_writer_open(b, NULL, "k", 0, &w, &err),
			 0);
	/* A put after open does not reach the open writer's content. */
	put(b, "k", "XYZ");
	assert_int_equal(smux_writer_size(w), 6);
	assert_int_equal(smux_writer_pread(w, buf, sizeof(buf), 0, &err), 6);
	assert_memory_equal(buf, "abcdef", 6);
	/* Shrinking then growing shows zeros, never the old bytes. */
	assert_int_equal(smux_writer_truncate(w, NULL, 2, &err), 0);
	assert_int_equal(smux_writer_truncate(w, NULL, 6, &err), 0);
	assert_int_equal(smux_writer_pread(w, buf, sizeof(buf), 0, &err), 6);
	assert_memory_equal(buf, "ab\0\0\0\0", 6);
	/* Each commit is a snapshot; later writes do not leak into it. */
	assert_int_equal(smux_writer_commit(w, NULL, NULL, NULL, &err), 0);
	assert_int_equal(smux_writer_pwrite(w, NULL, "!", 1, 0, &err), 0);
	expect(b, "k", "ab\0\0\0\0", 6);
	smux_writer_close(w);
	expect(b, "k", "ab\0\0\0\0", 6);
	/* A writer on a marker is refused by the wrapper. */
	assert_int_equal(smux_backend_writer_open(b, NULL, "d/", 0, &w, &err),
			 -EINVAL);
}

/* A sink that fires a cancel token once it has taken one chunk. */
struct cancel_sink {
	struct smux_cancel *token;
	size_t taken;
};

static int cancel_sink_write(void *arg, const void *data, size_t len)
{
	struct cancel_sink *s = arg;

	(void)data;
	s->taken += len;
	smux_cancel_fire(s->token, SMUX_CANCEL_ABORT);
	return 0;
}

static long cancel_source_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	(void)pos;
	memset(dst, 'c', len);
	smux_cancel_fire(arg, SMUX_CANCEL_TIMEOUT);
	return (long)len;
}

static void test_cancel_between_chunks(void **state)
{
	struct smux_backend *b = *state;
	const size_t big = (size_t)4 * SMUX_IO_CHUNK;
	unsigned char *data = calloc(1, big);
	struct smux_cancel token;
	struct cancel_sink cs = {.token = &token};
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;
	struct smux_ctx ctx;

	assert_non_null(data);
	assert_int_equal(smux_backend_put_buf(b, NULL, "big", data, big, &err),
			 0);
	smux_cancel_init(&token);
	smux_ctx_init(&ctx);
	assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &token), 0);

	/* The get stops at the next chunk boundary. */
	smux_sink_cb(&sink, cancel_sink_write, NULL, &cs);
	assert_int_equal(
		smux_backend_get(b, &ctx, "big", NULL, &sink, NULL, &err),
		-smux_code_errno(SMUX_E_BACKEND_ABORTED));
	assert_int_equal(err.e.code, SMUX_E_BACKEND_ABORTED);
	assert_int_equal(cs.taken, SMUX_IO_CHUNK);
	smux_cancel_release(&token);

	/* A put cancelled mid-source stores nothing. */
	smux_cancel_init(&token);
	smux_ctx_init(&ctx);
	assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &token), 0);
	smux_source_cb(&src, cancel_source_read, &token, big);
	assert_int_equal(
		smux_backend_put(b, &ctx, "new", &src, NULL, NULL, &err),
		-smux_code_errno(SMUX_E_BACKEND_TIMEOUT));
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_int_equal(smux_memory_count(b), 1);
	smux_cancel_release(&token);
	free(data);
}

static long short_source_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	(void)arg;
	if (pos >= 10)
		return 0; /* claims 100 bytes, has 10 */
	if (len > 10 - pos)
		len = (size_t)(10 - pos);
	memset(dst, 's', len);
	return (long)len;
}

static int full_sink_write(void *arg, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	return -ENOSPC;
}

static void test_failing_source_and_sink(void **state)
{
	struct smux_backend *b = *state;
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;

	put(b, "k", "old");
	smux_source_cb(&src, short_source_read, NULL, 100);
	assert_int_equal(smux_backend_put(b, NULL, "k", &src, NULL, NULL, &err),
			 -EIO);
	/* the source failed, not the backend: the caller's error */
	assert_int_equal(err.e.code, SMUX_E_LOCAL_IO);
	expect(b, "k", "old", 3); /* the old object stays */

	smux_sink_cb(&sink, full_sink_write, NULL, NULL);
	assert_int_equal(
		smux_backend_get(b, NULL, "k", NULL, &sink, NULL, &err),
		-ENOSPC);
	assert_int_equal(err.e.code, SMUX_E_LOCAL_IO);
	assert_int_equal(err.e.sys_errno, ENOSPC);
	assert_int_equal(sink.error, ENOSPC);
}

static void test_no_memory(void **state)
{
	struct smux_backend *b = *state;
	struct smux_source src;
	struct smux_error err;

	/* Never read: the allocation of 2^62 bytes fails first. */
	smux_source_cb(&src, short_source_read, NULL, UINT64_C(1) << 62);
	assert_int_equal(
		smux_backend_put(b, NULL, "huge", &src, NULL, NULL, &err),
		-ENOMEM);
	assert_int_equal(err.e.code, SMUX_E_NO_MEMORY);
	assert_int_equal(smux_memory_count(b), 0);
}

/* A sink that calls back into the backend for every chunk. */
static int reentrant_sink_write(void *arg, const void *data, size_t len)
{
	struct smux_backend *b = arg;
	struct smux_error err;
	struct smux_info info;

	(void)data;
	(void)len;
	if (smux_backend_put_buf(b, NULL, "k", "new", 3, &err) ||
	    smux_backend_head(b, NULL, "k", &info, &err))
		return -EIO;
	return 0;
}

static void test_no_lock_across_callbacks(void **state)
{
	struct smux_backend *b = *state;
	struct smux_sink sink;
	struct smux_error err;

	/* With the lock held, the put inside the sink would deadlock. */
	put(b, "k", "old content");
	smux_sink_cb(&sink, reentrant_sink_write, NULL, b);
	assert_int_equal(
		smux_backend_get(b, NULL, "k", NULL, &sink, NULL, &err), 0);
	assert_int_equal(sink.written, 11); /* the version it started on */
	expect(b, "k", "new", 3);
}

struct page_seen {
	struct smux_backend *b;
	char last[64];
	unsigned n, prefixes;
	bool disorder;
};

/* Checks order; adds keys under "p/" that sort after all of its others
 * while the listing runs, so "p/" shows up again on a later page. */
static int page_cb(void *arg, const struct smux_list_entry *e)
{
	struct page_seen *s = arg;
	struct smux_error err;
	char key[32];

	if (s->n && strcmp(s->last, e->key) >= 0)
		s->disorder = true;
	(void)snprintf(s->last, sizeof(s->last), "%s", e->key);
	s->prefixes += e->is_prefix;
	(void)snprintf(key, sizeof(key), "p/z%03u", s->n);
	smux_backend_put_buf(s->b, NULL, key, "", 0, &err);
	s->n++;
	return 0;
}

static void test_list_pages(void **state)
{
	struct smux_backend *b = *state;
	struct page_seen seen = {.b = b};
	struct smux_error err;
	char key[32];

	/* 255 objects, then "p/" as the last entry of the first page. */
	for (unsigned i = 0; i < 300; i++) {
		(void)snprintf(key, sizeof(key), "o%03u", i);
		if (i < 255)
			put(b, key, "");
		(void)snprintf(key, sizeof(key), "p/x%03u", i);
		put(b, key, "");
	}
	assert_int_equal(
		smux_backend_list(b, NULL, "", "/", page_cb, &seen, &err), 0);
	assert_false(seen.disorder);
	assert_int_equal(seen.n, 256);
	assert_int_equal(seen.prefixes, 1); /* "p/" once, however it grew */
	assert_string_equal(seen.last, "p/");
	assert_int_equal(smux_memory_count(b), 255 + 300 + 256);
}

#define TORN_THREADS 6
#define TORN_ITERS   400
#define TORN_SIZE    ((size_t)256 * 1024)

struct torn {
	struct smux_backend *b;
	atomic_int writers_left;
	atomic_int torn;
	atomic_int errors;
};

struct torn_thread {
	struct torn *t;
	unsigned id;
};

/* Writers fill whole objects with one byte value; readers check that a
 * get never mixes two. Odd writers commit through a writer instead. */
static void *torn_main(void *arg)
{
	struct torn_thread *tt = arg;
	struct torn *t = tt->t;
	unsigned char *buf = malloc(TORN_SIZE), *got;
	struct smux_writer *w;
	struct smux_error err;
	size_t len;

	if (!buf) {
		atomic_fetch_add(&t->errors, 1);
		return NULL;
	}
	for (unsigned i = 0; tt->id < 3 && i < TORN_ITERS; i++) {
		memset(buf, (int)(tt->id * 64 + i % 64), TORN_SIZE);
		if (tt->id == 1) {
			if (smux_backend_writer_open(t->b, NULL, "k",
						     SMUX_WRITER_TRUNC, &w,
						     &err) ||
			    smux_writer_pwrite(w, NULL, buf, TORN_SIZE, 0,
					       &err) ||
			    smux_writer_commit(w, NULL, NULL, NULL, &err))
				atomic_fetch_add(&t->errors, 1);
			smux_writer_close(w);
		} else if (smux_backend_put_buf(t->b, NULL, "k", buf, TORN_SIZE,
						&err)) {
			atomic_fetch_add(&t->errors, 1);
		}
	}
	if (tt->id < 3)
		atomic_fetch_sub(&t->writers_left, 1);
	while (tt->id >= 3 && atomic_load(&t->writers_left) > 0) {
		if (smux_backend_get_all(t->b, NULL, "k", &got, &len, &err)) {
			atomic_fetch_add(&t->errors, 1);
			break;
		}
		if (len != TORN_SIZE || memcmp(got, got + 1, len - 1) != 0)
			atomic_fetch_add(&t->torn, 1);
		free(got);
	}
	free(buf);
	return NULL;
}

static void test_concurrent_no_torn_reads(void **state)
{
	struct torn t = {.b = *state};
	struct torn_thread tt[TORN_THREADS];
	pthread_t tid[TORN_THREADS];
	unsigned char *init = calloc(1, TORN_SIZE);
	struct smux_error err;

	assert_non_null(init);
	assert_int_equal(
		smux_backend_put_buf(t.b, NULL, "k", init, TORN_SIZE, &err), 0);
	free(init);
	atomic_init(&t.writers_left, 3);
	for (unsigned i = 0; i < TORN_THREADS; i++) {
		tt[i] = (struct torn_thread){.t = &t, .id = i};
		assert_int_equal(
			pthread_create(&tid[i], NULL, torn_main, &tt[i]), 0);
	}
	for (unsigned i = 0; i < TORN_THREADS; i++)
		pthread_join(tid[i], NULL);
	assert_int_equal(atomic_load(&t.errors), 0);
	assert_int_equal(atomic_load(&t.torn), 0);
	assert_int_equal(smux_memory_count(t.b), 1);
}

static void test_optional_ops(void **state)
{
	struct smux_backend *b = *state;
	struct smux_statfs st;
	struct smux_error err;

	assert_string_equal(b->ops->kind, "memory");
	assert_non_null(b->ops->copy);
	assert_non_null(b->ops->writer_open);
	assert_int_equal(smux_backend_healthcheck(b, NULL, &err), 0);
	memset(&st, 0xff, sizeof(st));
	assert_int_equal(smux_backend_statfs(b, NULL, &st, &err), 0);
	assert_int_equal(st.total_bytes, 0);
	assert_int_equal(st.free_bytes, 0);
	assert_int_equal(st.total_files, 0);
	assert_int_equal(st.free_files, 0);
}

/* Special objects keep their type: a symlink (content = target, mode
 * always 0777), a FIFO (no content, its own mode); copy and rename keep
 * the type; a symlink needs a target, a FIFO takes none. */
static void test_special_objects(void **state)
{
	struct smux_backend *b = *state;
	struct smux_put_opts link = {.mode = S_IFLNK | 0640};
	struct smux_put_opts fifo = {.mode = S_IFIFO | 0604};
	struct smux_source src;
	struct smux_info info;
	struct smux_error err;

	smux_source_buf(&src, "a/b", 3);
	assert_int_equal(
		smux_backend_put(b, NULL, "l", &src, &link, &info, &err), 0);
	assert_int_equal(info.mode, S_IFLNK | 0777);
	assert_int_equal(info.size, 3);
	assert_int_equal(smux_backend_copy(b, NULL, "l", "l2", &err), 0);
	assert_int_equal(smux_backend_rename(b, NULL, "l2", "l3", &err), 0);
	assert_int_equal(smux_backend_head(b, NULL, "l3", &info, &err), 0);
	assert_int_equal(info.mode, S_IFLNK | 0777);
	smux_source_buf(&src, "", 0);
	assert_true(smux_backend_put(b, NULL, "bad", &src, &link, NULL, &err) <
		    0);
	assert_int_equal(
		smux_backend_put(b, NULL, "p", &src, &fifo, &info, &err), 0);
	assert_int_equal(info.mode, S_IFIFO | 0604);
	smux_source_buf(&src, "x", 1);
	assert_true(smux_backend_put(b, NULL, "p2", &src, &fifo, NULL, &err) <
		    0);
	assert_int_equal(smux_backend_head(b, NULL, "p2", &info, &err),
			 -ENOENT);
}

/* Owners, atime and ctime are kept: none until a put or setattr gives
 * one, kept by a replacing put, copied by copy and rename; the ctime
 * moves on every change; mode 0000 is meant with SMUX_PUT_MODE. */
static void test_owner_times(void **state)
{
	struct smux_backend *b = *state;
	struct smux_setattr own = {
		.flags = SMUX_SET_OWNER, .uid = 1000, .gid = SMUX_ID_NONE};
	struct smux_setattr at = {.flags = SMUX_SET_ATIME | SMUX_SET_MODE,
				  .atime_ns = 42,
				  .mode = 04755};
	struct smux_put_opts po = {
		.flags = SMUX_PUT_MODE | SMUX_PUT_OWNER, .uid = 7, .gid = 8};
	struct smux_source src;
	struct smux_error err;
	struct smux_info info;
	int64_t ctime0;

	assert_true(smux_backend_caps(b) & SMUX_CAP_OWNER);
	put(b, "f", "one");
	assert_int_equal(smux_backend_head(b, NULL, "f", &info, &err), 0);
	assert_false(info.has_owner);
	assert_int_equal(info.uid, SMUX_ID_NONE);
	assert_true(info.ctime_ns > 0);
	assert_int_equal(info.atime_ns, info.mtime_ns);
	assert_int_equal(info.nlink, 1);
	ctime0 = info.ctime_ns;

	assert_int_equal(smux_backend_setattr(b, NULL, "f", &own, &err), 0);
	assert_int_equal(smux_backend_head(b, NULL, "f", &info, &err), 0);
	assert_true(info.has_owner);
	assert_int_equal(info.uid, 1000);
	assert_int_equal(info.gid, SMUX_ID_NONE);
	assert_true(info.ctime_ns > ctime0);
	ctime0 = info.ctime_ns;

	/* the mode after the owner: setuid stays; a chown then clears it */
	assert_int_equal(smux_backend_setattr(b, NULL, "f", &at, &err), 0);
	assert_int_equal(smux_backend_head(b, NULL, "f", &info, &err), 0);
	assert_int_equal(info.atime_ns, 42);
	assert_int_equal(info.mode, S_IFREG | 04755);
	assert_int_equal(smux_backend_setattr(b, NULL, "f", &own, &err), 0);
	assert_int_equal(smux_backend_head(b, NULL, "f", &info, &err), 0);
	assert_int_equal(info.mode, S_IFREG | 0755);

	/* a put replacing it keeps the owner; the ctime moves */
	put(b, "f", "two");
	assert_int_equal(smux_backend_head(b, NULL, "f", &info, &err), 0);
	assert_true(info.has_owner);
	assert_int_equal(info.uid, 1000);
	assert_true(info.ctime_ns > ctime0);

	/* copy and rename carry the owner */
	assert_int_equal(smux_backend_copy(b, NULL, "f", "g", &err), 0);
	assert_int_equal(smux_backend_rename(b, NULL, "g", "h", &err), 0);
	assert_int_equal(smux_backend_head(b, NULL, "h", &info, &err), 0);
	assert_true(info.has_owner);
	assert_int_equal(info.uid, 1000);

	/* a put with mode 0000 and an owner */
	smux_source_buf(&src, "x", 1);
	assert_int_equal(smux_backend_put(b, NULL, "h", &src, &po, NULL, &err),
			 0);
	assert_int_equal(smux_backend_head(b, NULL, "h", &info, &err), 0);
	assert_int_equal(info.mode, S_IFREG | 0);
	assert_int_equal(info.uid, 7);
	assert_int_equal(info.gid, 8);
	/* a marker: mode 0000 too, no link count of its own */
	smux_source_buf(&src, "", 0);
	assert_int_equal(smux_backend_put(b, NULL, "d/", &src, &po, NULL, &err),
			 0);
	assert_int_equal(smux_backend_head(b, NULL, "d/", &info, &err), 0);
	assert_int_equal(info.mode, S_IFDIR | 0);
	assert_int_equal(info.nlink, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_count),
		T(test_etag_versions),
		T(test_directory_info),
		T(test_writer_snapshot),
		T(test_cancel_between_chunks),
		T(test_failing_source_and_sink),
		T(test_no_memory),
		T(test_no_lock_across_callbacks),
		T(test_list_pages),
		T(test_concurrent_no_torn_reads),
		T(test_optional_ops),
		T(test_special_objects),
		T(test_owner_times),
	};

	return cmocka_run_group_tests_name("memory", tests, NULL, NULL);
}
