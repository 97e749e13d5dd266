// SPDX-License-Identifier: MIT
/*
 * conformance_reader.c - readers (smux_backend_reader_open), for backends
 * that offer one: a reader reads what a ranged get of the same range
 * reads, reports the version a head reports, keeps reading the version it
 * opened (or says PRECONDITION_FAILED) once the key is replaced, and
 * refuses missing keys and directories. A kind flagged CONF_F_NO_READER
 * must answer NOT_SUPPORTED instead, and is asked nothing more.
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

#include <cmocka.h>

#include "conformance/conformance.h"

/* Crosses the 128 KiB pieces the kernel reads in; not a multiple. */
#define RD_LEN ((size_t)(300 * 1024 + 17))

/* Asserts pread(@off, @len) returns what get(@off, @len) returns. */
static void conf_read_as_get(struct conf_env *env, struct smux_reader *r,
			     const char *key, uint64_t off, size_t len)
{
	unsigned char *got = malloc(len ? len : 1);
	unsigned char *want = malloc(len ? len : 1);
	struct smux_get_opts opts = {.offset = off, .length = len};
	struct smux_sink sink;
	struct smux_error err;
	long n;

	assert_non_null(got);
	assert_non_null(want);
	smux_sink_buf(&sink, want, len);
	CONF_OK(smux_backend_get(env->b, &env->ctx, key, &opts, &sink, NULL,
				 &err),
		&err);
	n = smux_reader_pread(r, &env->ctx, got, len, off, &err);
	if (n < 0)
		CONF_OK(n, &err);
	assert_int_equal(n, sink.written);
	assert_memory_equal(got, want, (size_t)n);
	free(got);
	free(want);
}

void conf_test_reader(void **state)
{
	struct conf_env *env = *state;
	static const struct {
		uint64_t off;
		size_t len;
	} ranges[] = {
		{0, RD_LEN},	 {1, 100},
		{RD_LEN - 1, 1}, {RD_LEN - 10, 100},
		{RD_LEN, 10},	 {RD_LEN + 1000, 10},
		{17, 0},	 {131072 - 3, 131072},
		{0, 4096},
	};
	unsigned char *v1 = malloc(RD_LEN), *v2 = malloc(RD_LEN), *got;
	struct smux_reader *r = NULL, *r2 = NULL;
	struct smux_info put, head;
	struct smux_error err;
	long n;
	int rc;

	assert_non_null(v1);
	assert_non_null(v2);
	conf_fill(v1, RD_LEN, 31);
	conf_fill(v2, RD_LEN, 32);
	CONF_PUT(env, "rd/obj", v1, RD_LEN, &put);
	rc = smux_backend_reader_open(env->b, &env->ctx, "rd/obj", &r, &err);
	if (env->fx->flags & CONF_F_NO_READER) {
		/* the contract of a backend without readers: it says so,
		 * and callers get (NOT_SUPPORTED) and use gets */
		CONF_ERR(rc, &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
		assert_null(r);
		print_message("  %s offers no reader (NOT_SUPPORTED, as a "
			      "backend without readers answers)\n",
			      env->fx->name);
		free(v1);
		free(v2);
		return;
	}
	CONF_OK(rc, &err);
	assert_non_null(r);

	/* the version a head reports */
	CONF_OK(smux_backend_head(env->b, &env->ctx, "rd/obj", &head, &err),
		&err);
	assert_int_equal(r->info.size, RD_LEN);
	assert_string_equal(r->info.etag, head.etag);
	assert_string_equal(r->info.etag, put.etag);
	assert_int_equal(r->info.mode & S_IFMT, S_IFREG);

	/* the bytes a get reads, range by range */
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		conf_read_as_get(env, r, "rd/obj", ranges[i].off,
				 ranges[i].len);

	/* two readers of one key at once */
	CONF_OK(smux_backend_reader_open(env->b, &env->ctx, "rd/obj", &r2,
					 &err),
		&err);
	conf_read_as_get(env, r2, "rd/obj", 5000, 70000);
	smux_reader_close(r2);

	/* replaced: the version opened, or PRECONDITION_FAILED; never a
	 * byte of the new one */
	CONF_PUT(env, "rd/obj", v2, RD_LEN, NULL);
	got = malloc(RD_LEN);
	assert_non_null(got);
	n = smux_reader_pread(r, &env->ctx, got, RD_LEN, 0, &err);
	if (n < 0) {
		assert_int_equal(err.e.code, SMUX_E_PRECONDITION_FAILED);
	} else {
		assert_int_equal(n, RD_LEN);
		assert_memory_equal(got, v1, RD_LEN);
	}
	free(got);
	smux_reader_close(r);

	/* a missing key, a directory */
	r = NULL;
	rc = smux_backend_reader_open(env->b, &env->ctx, "rd/none", &r, &err);
	CONF_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND, ENOENT);
	assert_null(r);
	rc = smux_backend_reader_open(env->b, &env->ctx, "rd", &r, &err);
	CONF_ERR(rc, &err, SMUX_E_IS_DIRECTORY, EISDIR);
	assert_null(r);
	free(v1);
	free(v2);
}
