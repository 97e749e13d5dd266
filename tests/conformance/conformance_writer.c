// SPDX-License-Identifier: MIT
/*
 * conformance_writer.c - pending objects (DESIGN section 6), for backends
 * that offer a writer: writes at offsets with holes, truncate both ways,
 * nothing visible before commit, commit atomic and repeatable, close
 * without commit drops the pending changes, reopen starts from the object
 * or empty. A kind the fixture flags as having no writer for the flags a
 * test opens with (CONF_F_NO_WRITER, or CONF_F_WRITER_TRUNC_ONLY: s3's,
 * which only starts empty) must answer NOT_SUPPORTED and skips the rest
 * of that test.
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

/* Opens a writer on @key; NULL when the fixture says the kind has none
 * for @flags (CONF_F_NO_WRITER, CONF_F_WRITER_TRUNC_ONLY) and it says so
 * as such a backend must (NOT_SUPPORTED, no writer: its callers put
 * whole objects instead), which is all that is asked of it then. Any
 * other kind must open one. */
static struct smux_writer *conf_writer_open(struct conf_env *env,
					    const char *key, unsigned flags)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	unsigned fx = env->fx->flags;
	bool none =
		(fx & CONF_F_NO_WRITER) || ((fx & CONF_F_WRITER_TRUNC_ONLY) &&
					    (!(flags & SMUX_WRITER_TRUNC) ||
					     (flags & SMUX_WRITER_INPLACE)));
	int rc = smux_backend_writer_open(env->b, &env->ctx, key, flags, &w,
					  &err);

	if (none) {
		CONF_ERR(rc, &err, SMUX_E_NOT_SUPPORTED, ENOTSUP);
		assert_null(w);
		print_message("  %s offers no writer (NOT_SUPPORTED)\n",
			      env->fx->name);
		return NULL;
	}
	CONF_OK(rc, &err);
	assert_non_null(w);
	return w;
}

/* Asserts the pending content is @len bytes of @buf, where readable. */
static void conf_pending(struct smux_writer *w, const void *buf, size_t len)
{
	unsigned char got[64];
	struct smux_error err;
	long n;

	assert_int_equal(smux_writer_size(w), len);
	assert_true(len < sizeof(got));
	n = smux_writer_pread(w, got, sizeof(got), 0, &err);
	if (n == -ENOTSUP)
		return; /* write-only writer */
	assert_int_equal(n, len);
	assert_memory_equal(got, buf, len);
	/* Past the end: 0 bytes. */
	assert_int_equal(smux_writer_pread(w, got, 1, len + 5, &err), 0);
}

void conf_test_writer(void **state)
{
	struct conf_env *env = *state;
	static const char v1[12] = "hello\0\0\0\0\0wo";
	static const char v2[20] = "XXllo\0\0\0\0\0wo\0\0\0\0\0\0\0\0";
	struct smux_info info, head;
	struct smux_writer *w;
	struct smux_error err;

	/* truncating: the object is absent anyway, and a writer that only
	 * starts empty (s3's) runs the test too */
	w = conf_writer_open(env, "w/obj", SMUX_WRITER_TRUNC);
	if (!w)
		return;
	assert_int_equal(smux_writer_size(w), 0); /* absent: starts empty */
	CONF_OK(smux_writer_pwrite(w, &env->ctx, "hello", 5, 0, &err), &err);
	CONF_OK(smux_writer_pwrite(w, &env->ctx, "world", 5, 10, &err), &err);
	conf_pending(w, "hello\0\0\0\0\0world", 15); /* the hole reads 0 */
	CONF_ABSENT(env, "w/obj"); /* nothing visible before commit */

	CONF_OK(smux_writer_truncate(w, &env->ctx, 12, &err), &err);
	conf_pending(w, v1, sizeof(v1));
	CONF_OK(smux_writer_commit(w, &env->ctx, NULL, &info, &err), &err);
	assert_int_equal(info.size, sizeof(v1));
	CONF_OK(smux_backend_head(env->b, &env->ctx, "w/obj", &head, &err),
		&err);
	assert_string_equal(head.etag, info.etag);
	assert_int_equal(head.mode & S_IFMT, S_IFREG);
	CONF_EXPECT(env, "w/obj", v1, sizeof(v1));

	/* The writer stays open: more changes, invisible until commit. */
	CONF_OK(smux_writer_pwrite(w, &env->ctx, "XX", 2, 0, &err), &err);
	CONF_OK(smux_writer_truncate(w, &env->ctx, 20, &err), &err);
	conf_pending(w, v2, sizeof(v2));
	CONF_EXPECT(env, "w/obj", v1, sizeof(v1));
	CONF_OK(smux_writer_commit(w, &env->ctx, NULL, &info, &err), &err);
	assert_string_not_equal(info.etag, head.etag);
	CONF_EXPECT(env, "w/obj", v2, sizeof(v2));

	/* Closing without commit drops what was not committed. */
	CONF_OK(smux_writer_pwrite(w, &env->ctx, "zzz", 3, 0, &err), &err);
	CONF_OK(smux_writer_truncate(w, &env->ctx, 3, &err), &err);
	smux_writer_close(w);
	CONF_EXPECT(env, "w/obj", v2, sizeof(v2));
}

void conf_test_writer_reopen(void **state)
{
	struct conf_env *env = *state;
	enum { HOLE = 3 * 1024 * 1024 + 5 };
	unsigned char *big;
	struct smux_writer *w;
	struct smux_error err;
	struct smux_info info;
	bool copies;

	CONF_PUT(env, "w/obj", "0123456789", 10, NULL);
	/* Without TRUNC the writer starts as a copy of the object (a kind
	 * whose writers only start empty, s3's, runs the rest). */
	w = conf_writer_open(env, "w/obj", 0);
	copies = w != NULL;
	if (w) {
		conf_pending(w, "0123456789", 10);
		CONF_OK(smux_writer_pwrite(w, &env->ctx, "A", 1, 9, &err),
			&err);
		CONF_OK(smux_writer_commit(w, &env->ctx, NULL, NULL, &err),
			&err);
		smux_writer_close(w);
		CONF_EXPECT(env, "w/obj", "012345678A", 10);
	}

	/* A put between open and commit is replaced by the commit. */
	w = conf_writer_open(env, "w/obj", SMUX_WRITER_TRUNC);
	if (!w)
		return; /* no writer at all */
	assert_int_equal(smux_writer_size(w), 0);
	CONF_PUT(env, "w/obj", "concurrent", 10, NULL);
	CONF_EXPECT(env, "w/obj", "concurrent", 10);
	CONF_OK(smux_writer_commit(w, &env->ctx, NULL, &info, &err), &err);
	assert_int_equal(info.size, 0);
	smux_writer_close(w);
	CONF_EXPECT(env, "w/obj", "", 0);

	/* A write far past the end: megabytes of hole, then the bytes. */
	w = conf_writer_open(env, "w/sparse", SMUX_WRITER_TRUNC);
	assert_non_null(w);
	CONF_OK(smux_writer_pwrite(w, &env->ctx, "end", 3, HOLE, &err), &err);
	assert_int_equal(smux_writer_size(w), HOLE + 3);
	CONF_OK(smux_writer_commit(w, &env->ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	big = calloc(1, HOLE + 3);
	assert_non_null(big);
	big[HOLE] = 'e';
	big[HOLE + 1] = 'n';
	big[HOLE + 2] = 'd';
	CONF_EXPECT(env, "w/sparse", big, HOLE + 3);
	free(big);

	/* Opening (and dropping) a writer on a new key creates nothing. */
	w = conf_writer_open(env, "w/new/never",
			     copies ? 0 : SMUX_WRITER_TRUNC);
	assert_non_null(w);
	CONF_OK(smux_writer_pwrite(w, &env->ctx, "x", 1, 0, &err), &err);
	smux_writer_close(w);
	CONF_ABSENT(env, "w/new/never");
}
