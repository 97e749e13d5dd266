// SPDX-License-Identifier: MIT
/*
 * conformance_basic.c - single-object behaviours: put/get round trips over
 * every source and sink kind, overwrite, ranged gets, version pins, head,
 * missing keys, directories, delete, copy, healthcheck and statfs.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "conformance/conformance.h"

/* Crosses several SMUX_IO_CHUNK boundaries, not a multiple of any. */
#define RT_LEN ((size_t)(2 * SMUX_IO_CHUNK + SMUX_IO_CHUNK / 2 + 3))

static int64_t conf_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void conf_head_ok(struct conf_env *env, const char *key,
			 struct smux_info *info)
{
	struct smux_error err;

	CONF_OK(smux_backend_head(env->b, &env->ctx, key, info, &err), &err);
}

/* A temporary file holding @pad junk bytes then @len bytes of @buf. */
static int conf_tmpfd(const void *buf, size_t len, size_t pad)
{
	char tmpl[] = "/tmp/smux-conf-src-XXXXXX";
	int fd = mkstemp(tmpl);
	unsigned char junk[64];

	assert_true(fd >= 0);
	unlink(tmpl);
	memset(junk, 0xa5, sizeof(junk));
	assert_true(pad <= sizeof(junk));
	assert_int_equal(pwrite(fd, junk, pad, 0), pad);
	assert_int_equal(pwrite(fd, buf, len, (off_t)pad), len);
	return fd;
}

void conf_next_second(void)
{
	time_t start = time(NULL);

	/* a poll of the clock, bounded: at most ~1 s by construction */
	for (int i = 0; i < 300 && time(NULL) == start; i++) {
		struct timespec ts = {0, 10000000L};

		nanosleep(&ts, NULL);
	}
}

void conf_test_roundtrip(void **state)
{
	struct conf_env *env = *state;
	unsigned char *data = malloc(RT_LEN), *back = malloc(RT_LEN + 7);
	struct smux_info pinfo, hinfo, ginfo;
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;
	int fd;

	assert_non_null(data);
	assert_non_null(back);
	conf_fill(data, RT_LEN, 1);

	/* A memory source, into directories that do not exist yet. */
	CONF_PUT(env, "rt/a/b/obj.bin", data, RT_LEN, &pinfo);
	assert_int_equal(pinfo.size, RT_LEN);
	assert_true(pinfo.etag[0] != '\0');
	conf_head_ok(env, "rt/a/b/obj.bin", &hinfo);
	assert_int_equal(hinfo.size, RT_LEN);
	assert_string_equal(hinfo.etag, pinfo.etag);
	CONF_EXPECT(env, "rt/a/b/obj.bin", data, RT_LEN);

	/* A file-descriptor source that starts at an offset. */
	fd = conf_tmpfd(data, RT_LEN, 13);
	smux_source_fd(&src, fd, 13, RT_LEN);
	CONF_OK(smux_backend_put(env->b, &env->ctx, "rt/fd.bin", &src, NULL,
				 NULL, &err),
		&err);
	close(fd);
	CONF_EXPECT(env, "rt/fd.bin", data, RT_LEN);

	/* A fixed buffer sink of exactly the object's size. */
	smux_sink_buf(&sink, back, RT_LEN);
	CONF_OK(smux_backend_get(env->b, &env->ctx, "rt/fd.bin", NULL, &sink,
				 &ginfo, &err),
		&err);
	assert_int_equal(sink.written, RT_LEN);
	assert_memory_equal(back, data, RT_LEN);
	assert_int_equal(ginfo.size, RT_LEN);

	/* A file-descriptor sink at an offset. */
	fd = conf_tmpfd(data, 0, 0);
	smux_sink_fd(&sink, fd, 7);
	CONF_OK(smux_backend_get(env->b, &env->ctx, "rt/fd.bin", NULL, &sink,
				 NULL, &err),
		&err);
	assert_int_equal(sink.written, RT_LEN);
	assert_int_equal(pread(fd, back, RT_LEN + 7, 0), RT_LEN + 7);
	assert_memory_equal(back + 7, data, RT_LEN);
	close(fd);

	/* A sink that cannot take it all fails the get; no silent cut. */
	smux_sink_buf(&sink, back, RT_LEN - 1);
	assert_int_not_equal(smux_backend_get(env->b, &env->ctx, "rt/fd.bin",
					      NULL, &sink, NULL, &err),
			     0);
	free(data);
	free(back);
}

void conf_test_roundtrip_empty(void **state)
{
	struct conf_env *env = *state;
	struct smux_info pinfo, hinfo;
	struct smux_sink sink;
	struct smux_error err;
	char byte = 'x';

	CONF_PUT(env, "empty", "", 0, &pinfo);
	assert_int_equal(pinfo.size, 0);
	conf_head_ok(env, "empty", &hinfo);
	assert_int_equal(hinfo.size, 0);
	assert_int_equal(hinfo.mode & S_IFMT, S_IFREG);
	assert_string_equal(hinfo.etag, pinfo.etag);
	CONF_EXPECT(env, "empty", "", 0);

	smux_sink_buf(&sink, &byte, 0);
	CONF_OK(smux_backend_get(env->b, &env->ctx, "empty", NULL, &sink, NULL,
				 &err),
		&err);
	assert_int_equal(sink.written, 0);

	/* Emptying an object that had content. */
	CONF_PUT(env, "was-full", "content", 7, NULL);
	CONF_PUT(env, "was-full", "", 0, NULL);
	CONF_EXPECT(env, "was-full", "", 0);
}

void conf_test_overwrite(void **state)
{
	struct conf_env *env = *state;
	unsigned char a[5000], b[100], c[100];
	struct smux_info i1, i2, i3, h;

	conf_fill(a, sizeof(a), 2);
	conf_fill(b, sizeof(b), 3);
	conf_fill(c, sizeof(c), 4);
	CONF_PUT(env, "ow/obj", a, sizeof(a), &i1);
	/* Shorter content: no stale tail of the old object survives. */
	CONF_PUT(env, "ow/obj", b, sizeof(b), &i2);
	assert_string_not_equal(i2.etag, i1.etag);
	conf_head_ok(env, "ow/obj", &h);
	assert_int_equal(h.size, sizeof(b));
	assert_string_equal(h.etag, i2.etag);
	CONF_EXPECT(env, "ow/obj", b, sizeof(b));
	/* Same size, new bytes, right away: the etag still changes (on a
	 * store whose token has 1 s resolution, a second later). */
	if (env->fx->flags & CONF_F_COARSE_ETAG)
		conf_next_second();
	CONF_PUT(env, "ow/obj", c, sizeof(c), &i3);
	assert_string_not_equal(i3.etag, i2.etag);
	CONF_EXPECT(env, "ow/obj", c, sizeof(c));
}

void conf_test_put_opts(void **state)
{
	struct conf_env *env = *state;
	const int64_t mtime = INT64_C(1500000000123456789);
	struct smux_put_opts opts = {.mode = 0600, .mtime_ns = mtime};
	struct smux_source src;
	struct smux_error err;
	struct smux_info info;

	smux_source_buf(&src, "kept", 4);
	CONF_OK(smux_backend_put(env->b, &env->ctx, "opts/obj", &src, &opts,
				 NULL, &err),
		&err);
	conf_head_ok(env, "opts/obj", &info);
	if (env->fx->flags & CONF_F_NO_ATTRS)
		print_message("  %s keeps no permission bits: mode not "
			      "checked\n",
			      env->fx->name);
	else
		assert_int_equal(info.mode & 07777, 0600);
	assert_int_equal(info.mode & S_IFMT, S_IFREG);
	/* Backends may keep whole seconds only. */
	if (env->fx->flags & CONF_F_NO_MTIME)
		print_message("  %s keeps no mtime: not checked\n",
			      env->fx->name);
	else
		assert_in_range(info.mtime_ns, mtime - 1000000000,
				mtime + 1000000000);
}

/* Gets [@off, @off + @len) of @key (@full holds all its @size bytes) and
 * asserts exactly @want bytes from @off came back. */
#define CONF_RANGE(env, key, full, size, off, len, want)                  \
	conf_range_at((env), (key), (full), (size), (off), (len), (want), \
		      __FILE__, __LINE__)
static void conf_range_at(struct conf_env *env, const char *key,
			  const unsigned char *full, uint64_t size,
			  uint64_t off, uint64_t len, uint64_t want,
			  const char *file, int line)
{
	struct smux_get_opts opts = {.offset = off, .length = len};
	struct smux_sink sink;
	struct smux_error err;
	struct smux_info info;
	unsigned char *got;
	size_t got_len;
	bool same;

	smux_sink_dyn(&sink);
	conf_ok_at(smux_backend_get(env->b, &env->ctx, key, &opts, &sink, &info,
				    &err),
		   &err, file, line);
	_assert_int_equal(info.size, size, file, line);
	_assert_int_equal(sink.written, want, file, line);
	got = smux_sink_dyn_take(&sink, &got_len);
	smux_sink_release(&sink);
	same = !want || (got_len == want && memcmp(got, full + off, want) == 0);
	free(got);
	if (!same) {
		print_error("range %llu+%llu of %s: wrong bytes\n",
			    (unsigned long long)off, (unsigned long long)len,
			    key);
		_fail(file, line);
	}
}

void conf_test_ranged_get(void **state)
{
	struct conf_env *env = *state;
	unsigned char data[4096];
	const uint64_t n = sizeof(data);

	conf_fill(data, sizeof(data), 5);
	CONF_PUT(env, "rg/obj", data, sizeof(data), NULL);
	CONF_RANGE(env, "rg/obj", data, n, 0, 1, 1);
	CONF_RANGE(env, "rg/obj", data, n, 100, 50, 50);
	CONF_RANGE(env, "rg/obj", data, n, n - 1, 1, 1);
	CONF_RANGE(env, "rg/obj", data, n, n - 1, SMUX_LEN_ALL, 1);
	CONF_RANGE(env, "rg/obj", data, n, 4000, 1000, 96); /* clipped */
	CONF_RANGE(env, "rg/obj", data, n, n, 1, 0);
	CONF_RANGE(env, "rg/obj", data, n, n, SMUX_LEN_ALL, 0);
	CONF_RANGE(env, "rg/obj", data, n, n + 904, 10, 0);
	CONF_RANGE(env, "rg/obj", data, n, UINT64_MAX - 1, 10, 0);
	CONF_RANGE(env, "rg/obj", data, n, 0, 0, 0);
	CONF_RANGE(env, "rg/obj", data, n, 17, 0, 0);
	CONF_RANGE(env, "rg/obj", data, n, 0, SMUX_LEN_ALL, n);
	CONF_RANGE(env, "rg/obj", data, n, 1, SMUX_LEN_ALL, n - 1);
	/* offset + length overflows 64 bits: still "the rest". */
	CONF_RANGE(env, "rg/obj", data, n, 10, UINT64_MAX - 5, n - 10);

	CONF_PUT(env, "rg/empty", "", 0, NULL);
	CONF_RANGE(env, "rg/empty", data, 0, 0, SMUX_LEN_ALL, 0);
	CONF_RANGE(env, "rg/empty", data, 0, 0, 1, 0);
	CONF_RANGE(env, "rg/empty", data, 0, 1, 1, 0);
}

void conf_test_if_match(void **state)
{
	struct conf_env *env = *state;
	struct smux_get_opts opts = {.length = SMUX_LEN_ALL};
	struct smux_info v1, v2;
	struct smux_sink sink;
	struct smux_error err;
	char buf[16];

	CONF_PUT(env, "pin/obj", "version-1", 9, NULL);
	conf_head_ok(env, "pin/obj", &v1);
	opts.if_match = v1.etag;
	smux_sink_buf(&sink, buf, sizeof(buf));
	CONF_OK(smux_backend_get(env->b, &env->ctx, "pin/obj", &opts, &sink,
				 NULL, &err),
		&err);
	assert_int_equal(sink.written, 9);
	assert_memory_equal(buf, "version-1", 9);

	if (env->fx->flags & CONF_F_COARSE_ETAG)
		conf_next_second();
	CONF_PUT(env, "pin/obj", "version-2", 9, NULL);
	conf_head_ok(env, "pin/obj", &v2);
	assert_string_not_equal(v1.etag, v2.etag);

	/* A stale pin fails and writes nothing, whole or ranged. */
	smux_sink_buf(&sink, buf, sizeof(buf));
	CONF_ERR(smux_backend_get(env->b, &env->ctx, "pin/obj", &opts, &sink,
				  NULL, &err),
		 &err, SMUX_E_PRECONDITION_FAILED,
		 smux_code_errno(SMUX_E_PRECONDITION_FAILED));
	assert_int_equal(sink.written, 0);
	opts.offset = 3;
	opts.length = 2;
	CONF_ERR(smux_backend_get(env->b, &env->ctx, "pin/obj", &opts, &sink,
				  NULL, &err),
		 &err, SMUX_E_PRECONDITION_FAILED,
		 smux_code_errno(SMUX_E_PRECONDITION_FAILED));
	assert_int_equal(sink.written, 0);

	/* The current pin, and an empty pin (no pin at all), succeed. */
	opts.if_match = v2.etag;
	CONF_OK(smux_backend_get(env->b, &env->ctx, "pin/obj", &opts, &sink,
				 NULL, &err),
		&err);
	assert_int_equal(sink.written, 2);
	assert_memory_equal(buf, "si", 2);
	opts.if_match = "";
	CONF_OK(smux_backend_get(env->b, &env->ctx, "pin/obj", &opts, &sink,
				 NULL, &err),
		&err);
	assert_int_equal(sink.written, 4);
}

void conf_test_head(void **state)
{
	struct conf_env *env = *state;
	unsigned char data[1234];
	const int64_t slack = INT64_C(30) * 1000000000;
	int64_t before = conf_realtime_ns();
	struct smux_info info;

	conf_fill(data, sizeof(data), 6);
	CONF_PUT(env, "hd/obj", data, sizeof(data), NULL);
	conf_head_ok(env, "hd/obj", &info);
	assert_int_equal(info.size, sizeof(data));
	assert_true(info.etag[0] != '\0');
	assert_int_equal(info.mode & S_IFMT, S_IFREG);
	assert_in_range(info.mtime_ns, before - slack,
			conf_realtime_ns() + slack);
}

void conf_test_missing(void **state)
{
	struct conf_env *env = *state;
	static const char *const keys[] = {"nope", "no/such/dir/key", "nope/"};
	struct smux_sink sink;
	struct smux_error err;
	struct smux_info info;
	char buf[8];

	CONF_PUT(env, "other", "x", 1, NULL);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		CONF_ERR(smux_backend_head(env->b, &env->ctx, keys[i], &info,
					   &err),
			 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
		smux_sink_buf(&sink, buf, sizeof(buf));
		CONF_ERR(smux_backend_get(env->b, &env->ctx, keys[i], NULL,
					  &sink, NULL, &err),
			 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
		assert_int_equal(sink.written, 0);
		/* Names a backend: this one, or a mux's member that failed. */
		assert_true(err.e.backend[0] != '\0');
	}
}

void conf_test_directories(void **state)
{
	struct conf_env *env = *state;
	static const char *const dirs[] = {"d/",   "d",	  "i/", "i",
					   "p/q/", "p/q", "p/", "p"};
	const int eisdir = smux_code_errno(SMUX_E_IS_DIRECTORY);
	struct smux_source src;
	struct smux_sink sink;
	struct smux_error err;
	struct smux_info info;

	CONF_PUT(env, "d/", "", 0, NULL);   /* an explicit marker */
	CONF_PUT(env, "d/", "", 0, NULL);   /* idempotent */
	CONF_PUT(env, "i/x", "x", 1, NULL); /* implies "i/" */
	CONF_PUT(env, "p/q/", "", 0, NULL); /* a marker implies "p/" */
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		print_message("  directory %s\n", dirs[i]);
		conf_head_ok(env, dirs[i], &info);
		assert_int_equal(info.mode & S_IFMT, S_IFDIR);
		smux_sink_dyn(&sink);
		CONF_ERR(smux_backend_get(env->b, &env->ctx, dirs[i], NULL,
					  &sink, NULL, &err),
			 &err, SMUX_E_IS_DIRECTORY, eisdir);
		assert_int_equal(sink.written, 0);
		smux_sink_release(&sink);
	}
	/* A marker holds no bytes. */
	smux_source_buf(&src, "x", 1);
	CONF_ERR(smux_backend_put(env->b, &env->ctx, "e/", &src, NULL, NULL,
				  &err),
		 &err, SMUX_E_INVALID_ARGUMENT,
		 smux_code_errno(SMUX_E_INVALID_ARGUMENT));
	CONF_ABSENT(env, "e/");
	CONF_EXPECT(env, "i/x", "x", 1);
}

void conf_test_delete(void **state)
{
	struct conf_env *env = *state;
	struct smux_sink sink;
	struct smux_error err;
	int rc;

	CONF_PUT(env, "del/a", "aaa", 3, NULL);
	CONF_PUT(env, "del/b", "bbb", 3, NULL);
	CONF_OK(smux_backend_del(env->b, &env->ctx, "del/a", &err), &err);
	CONF_ABSENT(env, "del/a");
	smux_sink_dyn(&sink);
	CONF_ERR(smux_backend_get(env->b, &env->ctx, "del/a", NULL, &sink, NULL,
				  &err),
		 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	smux_sink_release(&sink);
	CONF_EXPECT(env, "del/b", "bbb", 3); /* the sibling stays */

	/* Absent keys: deleting is idempotent. */
	CONF_OK(smux_backend_del(env->b, &env->ctx, "del/a", &err), &err);
	CONF_OK(smux_backend_del(env->b, &env->ctx, "never/was", &err), &err);
	CONF_OK(smux_backend_del(env->b, &env->ctx, "never/dir/", &err), &err);

	/* The marker of an empty directory. */
	CONF_PUT(env, "em/", "", 0, NULL);
	CONF_OK(smux_backend_del(env->b, &env->ctx, "em/", &err), &err);
	CONF_ABSENT(env, "em/");

	/* The marker of a non-empty directory: refused, or removed alone. */
	CONF_PUT(env, "ne/", "", 0, NULL);
	CONF_PUT(env, "ne/child", "kid", 3, NULL);
	rc = smux_backend_del(env->b, &env->ctx, "ne/", &err);
	if (rc != 0)
		CONF_ERR(rc, &err, SMUX_E_NOT_EMPTY,
			 smux_code_errno(SMUX_E_NOT_EMPTY));
	print_message("  delete of a non-empty marker: %s\n",
		      rc ? "NOT_EMPTY" : "removed, children kept");
	CONF_EXPECT(env, "ne/child", "kid", 3);
}

/*
 * Many deletes in one call (rm -r's batch): every key named goes, whatever
 * its characters (S3's DeleteObjects sends them in XML, Swift's bulk
 * delete percent-encoded, one per line), absent keys and a key given
 * twice are no failure, a key that is not one fails alone, and nothing
 * not named is touched. A backend without del_many gets one del each.
 */
void conf_test_delete_many(void **state)
{
	static const char *const names[] = {
		"dm/a",
		"dm/sp ace",
		"dm/plus+amp&lt<gt>'\"",
		"dm/pct%41%2F",
		"dm/\xc3\xbc\xc3\xb1\xc3\xad",
		"dm/deep/er/x",
		"dm/star*?#",
		"dm/b",
	};
	const size_t nn = sizeof(names) / sizeof(names[0]);
	struct conf_env *env = *state;
	const char *keys[16];
	int rcs[16];
	struct smux_error err;
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < nn; i++)
		CONF_PUT(env, names[i], "x", 1, NULL);
	for (size_t i = 0; i + 1 < nn; i++) /* all but dm/b */
		keys[n++] = names[i];
	keys[n++] = "dm/never/was"; /* absent */
	keys[n++] = "dm/a";	    /* twice */
	CONF_OK(smux_backend_del_many(env->b, &env->ctx, keys, n, rcs, &err),
		&err);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(rcs[i], 0);
		CONF_ABSENT(env, keys[i]);
	}
	CONF_EXPECT(env, "dm/b", "x", 1);

	/* a bad key fails alone; the good ones around it go */
	CONF_PUT(env, "dm/c", "c", 1, NULL);
	keys[0] = "dm/b";
	keys[1] = "dm/../b";
	keys[2] = "dm/c";
	rc = smux_backend_del_many(env->b, &env->ctx, keys, 3, rcs, &err);
	assert_int_equal(rc, rcs[1]);
	CONF_ERR(rcs[1], &err, SMUX_E_INVALID_KEY,
		 smux_code_errno(SMUX_E_INVALID_KEY));
	assert_int_equal(rcs[0], 0);
	assert_int_equal(rcs[2], 0);
	CONF_ABSENT(env, "dm/b");
	CONF_ABSENT(env, "dm/c");

	/* nothing to delete is no call at all */
	CONF_OK(smux_backend_del_many(env->b, &env->ctx, keys, 0, rcs, &err),
		&err);
}

void conf_test_copy(void **state)
{
	struct conf_env *env = *state;
	unsigned char a[3000], b[2000];
	struct smux_error err;
	struct smux_info info;

	conf_fill(a, sizeof(a), 7);
	conf_fill(b, sizeof(b), 8);
	CONF_PUT(env, "cp/src", a, sizeof(a), NULL);
	CONF_OK(smux_backend_copy(env->b, &env->ctx, "cp/src", "cp/dst", &err),
		&err);
	CONF_EXPECT(env, "cp/dst", a, sizeof(a));
	conf_head_ok(env, "cp/dst", &info);
	assert_int_equal(info.size, sizeof(a));
	assert_int_equal(info.mode & S_IFMT, S_IFREG);

	/* The copy is independent of its source. */
	CONF_PUT(env, "cp/src", b, sizeof(b), NULL);
	CONF_EXPECT(env, "cp/dst", a, sizeof(a));
	CONF_EXPECT(env, "cp/src", b, sizeof(b));
	CONF_OK(smux_backend_del(env->b, &env->ctx, "cp/src", &err), &err);
	CONF_EXPECT(env, "cp/dst", a, sizeof(a));

	/* Into a directory that does not exist yet; over an existing key. */
	CONF_OK(smux_backend_copy(env->b, &env->ctx, "cp/dst", "cp/new/sub/dst",
				  &err),
		&err);
	CONF_EXPECT(env, "cp/new/sub/dst", a, sizeof(a));
	CONF_PUT(env, "cp/src", b, sizeof(b), NULL);
	CONF_OK(smux_backend_copy(env->b, &env->ctx, "cp/src", "cp/dst", &err),
		&err);
	CONF_EXPECT(env, "cp/dst", b, sizeof(b));

	/* A missing source: nothing is created. */
	CONF_ERR(smux_backend_copy(env->b, &env->ctx, "cp/none", "cp/dst2",
				   &err),
		 &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	CONF_ABSENT(env, "cp/dst2");
}

void conf_test_healthcheck(void **state)
{
	struct conf_env *env = *state;
	struct smux_error err;

	CONF_OK(smux_backend_healthcheck(env->b, &env->ctx, &err), &err);
	CONF_PUT(env, "hc", "1", 1, NULL);
	CONF_OK(smux_backend_healthcheck(env->b, &env->ctx, &err), &err);
}

void conf_test_statfs(void **state)
{
	struct conf_env *env = *state;
	struct smux_statfs st;
	struct smux_error err;

	memset(&st, 0xff, sizeof(st));
	CONF_OK(smux_backend_statfs(env->b, &env->ctx, &st, &err), &err);
	/* Zero means unknown; known figures must be coherent. */
	if (st.total_bytes)
		assert_true(st.free_bytes <= st.total_bytes);
	if (st.total_files)
		assert_true(st.free_files <= st.total_files);
	print_message("  statfs: %llu/%llu bytes free, %llu/%llu files free\n",
		      (unsigned long long)st.free_bytes,
		      (unsigned long long)st.total_bytes,
		      (unsigned long long)st.free_files,
		      (unsigned long long)st.total_files);
}
