/* SPDX-License-Identifier: MIT */
/*
 * test_file_fallocate.c - fallocate(2) through the file backend's writers
 * (smux_writer_fallocate: src/core/backend.c, file_inplace.c,
 * file_writer.c): each mode's size, content and allocated blocks on the
 * backing file, the modes refused, and a refusal by the local filesystem
 * (no room) as the caller's error, never a failing backend.
 *
 * Every test works in its own mkdtemp directory under /tmp (a filesystem
 * with every mode: ext4, xfs, btrfs) and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mux_helpers.h"
#include "smux/file.h"

#define MIB ((uint64_t)1024 * 1024)

struct env {
	char base[64];
	char root[PATH_MAX];
	struct smux_backend *b;
	struct smux_ctx ctx;
	struct smux_error err;
};

static int setup(void **state)
{
	struct smux_file_opts opts = {.no_fsync = true};
	struct env *env = calloc(1, sizeof(*env));

	assert_non_null(env);
	snprintf(env->base, sizeof(env->base), "/tmp/smux-test-falloc.XXXXXX");
	assert_non_null(mkdtemp(env->base));
	snprintf(env->root, sizeof(env->root), "%s/root", env->base);
	assert_int_equal(mkdir(env->root, 0755), 0);
	opts.path = env->root;
	assert_int_equal(smux_file_new("file-f", &opts, &env->b, &env->err), 0);
	smux_ctx_init(&env->ctx);
	*state = env;
	return 0;
}

static int teardown(void **state)
{
	struct env *env = *state;

	smux_backend_unref(env->b);
	mh_rm_rf(env->base);
	free(env);
	return 0;
}

static void backing_stat(struct env *env, const char *key, struct stat *st)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", env->root, key);
	assert_int_equal(stat(path, st), 0);
}

/* True when [off, off + len) of the backing file reads as zeros. */
static bool backing_zeros(struct env *env, const char *key, uint64_t off,
			  size_t len)
{
	char path[PATH_MAX + 64];
	unsigned char *buf = malloc(len);
	bool zero = true;
	int fd;

	assert_non_null(buf);
	snprintf(path, sizeof(path), "%s/%s", env->root, key);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
	for (size_t i = 0; i < len; i++)
		zero = zero && buf[i] == 0;
	free(buf);
	return zero;
}

/* @len bytes of @c at @off through the writer. */
static void fill(struct env *env, struct smux_writer *w, int c, uint64_t off,
		 size_t len)
{
	unsigned char *buf = malloc(len);

	assert_non_null(buf);
	memset(buf, c, len);
	assert_int_equal(
		smux_writer_pwrite(w, &env->ctx, buf, len, off, &env->err), 0);
	free(buf);
}

/* Each mode on the in-place writer: the backing file itself changes. */
static void test_inplace_modes(void **state)
{
	struct env *env = *state;
	struct smux_writer *w;
	struct stat st;
	blkcnt_t before;

	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "d/f",
						  SMUX_WRITER_INPLACE, &w,
						  &env->err),
			 0);
	/* mode 0: allocated and extended */
	assert_int_equal(
		smux_writer_fallocate(w, &env->ctx, 0, 0, 4 * MIB, &env->err),
		0);
	backing_stat(env, "d/f", &st);
	assert_int_equal(st.st_size, 4 * MIB);
	assert_true((uint64_t)st.st_blocks * 512 >= 4 * MIB);
	assert_int_equal(smux_writer_size(w), 4 * MIB);
	assert_true(backing_zeros(env, "d/f", 0, 4 * MIB));

	/* KEEP_SIZE past the end: blocks grow, the size stays */
	before = st.st_blocks;
	assert_int_equal(smux_writer_fallocate(w, &env->ctx,
					       SMUX_FALLOC_KEEP_SIZE, 4 * MIB,
					       2 * MIB, &env->err),
			 0);
	backing_stat(env, "d/f", &st);
	assert_int_equal(st.st_size, 4 * MIB);
	assert_true((uint64_t)(st.st_blocks - before) * 512 >= 2 * MIB);

	/* a punched hole: zeros, blocks freed, size kept */
	fill(env, w, 'x', 0, 4 * MIB);
	backing_stat(env, "d/f", &st);
	before = st.st_blocks;
	assert_int_equal(smux_writer_fallocate(w, &env->ctx,
					       SMUX_FALLOC_PUNCH_HOLE |
						       SMUX_FALLOC_KEEP_SIZE,
					       MIB, MIB, &env->err),
			 0);
	backing_stat(env, "d/f", &st);
	assert_int_equal(st.st_size, 4 * MIB);
	assert_true((uint64_t)(before - st.st_blocks) * 512 >= MIB);
	assert_true(backing_zeros(env, "d/f", MIB, MIB));
	assert_false(backing_zeros(env, "d/f", MIB - 1, 1));
	assert_false(backing_zeros(env, "d/f", 2 * MIB, 1));

	/* ZERO_RANGE with KEEP_SIZE past the end: zeros, size kept */
	assert_int_equal(smux_writer_fallocate(w, &env->ctx,
					       SMUX_FALLOC_ZERO_RANGE |
						       SMUX_FALLOC_KEEP_SIZE,
					       3 * MIB, 2 * MIB, &env->err),
			 0);
	backing_stat(env, "d/f", &st);
	assert_int_equal(st.st_size, 4 * MIB);
	assert_true(backing_zeros(env, "d/f", 3 * MIB, MIB));
	assert_false(backing_zeros(env, "d/f", 3 * MIB - 1, 1));

	/* ZERO_RANGE alone extends */
	assert_int_equal(smux_writer_fallocate(w, &env->ctx,
					       SMUX_FALLOC_ZERO_RANGE, 2 * MIB,
					       3 * MIB, &env->err),
			 0);
	backing_stat(env, "d/f", &st);
	assert_int_equal(st.st_size, 5 * MIB);
	assert_true(backing_zeros(env, "d/f", 2 * MIB, 3 * MIB));
	assert_false(backing_zeros(env, "d/f", 0, 1));
	assert_int_equal(
		smux_writer_commit(w, &env->ctx, NULL, NULL, &env->err), 0);
	smux_writer_close(w);
}

/* The staged writer (temp file published at commit): the object changes
 * at commit only, with the zeros and the size. */
static void test_staged_writer(void **state)
{
	struct env *env = *state;
	struct smux_writer *w;
	struct stat st;

	assert_int_equal(smux_backend_put_buf(env->b, &env->ctx, "s", "abcdef",
					      6, &env->err),
			 0);
	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "s", 0, &w,
						  &env->err),
			 0);
	assert_int_equal(
		smux_writer_fallocate(w, &env->ctx, 0, 0, MIB, &env->err), 0);
	assert_int_equal(smux_writer_size(w), MIB);
	assert_int_equal(smux_writer_fallocate(w, &env->ctx,
					       SMUX_FALLOC_PUNCH_HOLE |
						       SMUX_FALLOC_KEEP_SIZE,
					       1, 2, &env->err),
			 0);
	backing_stat(env, "s", &st);
	assert_int_equal(st.st_size, 6); /* not committed yet */
	assert_int_equal(
		smux_writer_commit(w, &env->ctx, NULL, NULL, &env->err), 0);
	smux_writer_close(w);
	backing_stat(env, "s", &st);
	assert_int_equal(st.st_size, MIB);
	assert_false(backing_zeros(env, "s", 0, 1));
	assert_true(backing_zeros(env, "s", 1, 2));
	assert_false(backing_zeros(env, "s", 3, 1));
	assert_true(backing_zeros(env, "s", 6, MIB - 6));
}

/* Modes a writer does not take, an empty range and one past the largest
 * file are refused before the backend is asked. */
static void test_refused(void **state)
{
	struct env *env = *state;
	struct smux_writer *w;
	struct stat st;

	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "r",
						  SMUX_WRITER_INPLACE, &w,
						  &env->err),
			 0);
	/* punch without KEEP_SIZE (fallocate(2) says EOPNOTSUPP), and
	 * COLLAPSE_RANGE (0x08) */
	assert_int_equal(smux_writer_fallocate(w, &env->ctx,
					       SMUX_FALLOC_PUNCH_HOLE, 0, 1,
					       &env->err),
			 -EOPNOTSUPP);
	assert_int_equal(env->err.e.code, SMUX_E_NOT_SUPPORTED);
	assert_int_equal(
		smux_writer_fallocate(w, &env->ctx, 0x08, 0, 4096, &env->err),
		-EOPNOTSUPP);
	assert_int_equal(
		smux_writer_fallocate(w, &env->ctx, 0, 0, 0, &env->err),
		-EINVAL);
	assert_int_equal(
		smux_writer_fallocate(w, &env->ctx, 0, INT64_MAX, 2, &env->err),
		-EFBIG);
	backing_stat(env, "r", &st);
	assert_int_equal(st.st_size, 0);
	smux_writer_close(w);
}

/* No room on the local filesystem: ENOSPC (or EFBIG) as the caller's
 * error, semantic: the mux keeps the member in service. */
static void test_no_room_is_callers(void **state)
{
	struct env *env = *state;
	struct smux_writer *w;
	int rc;

	assert_int_equal(smux_backend_writer_open(env->b, &env->ctx, "big",
						  SMUX_WRITER_INPLACE, &w,
						  &env->err),
			 0);
	/* 1 EiB: more than any test machine's disk */
	rc = smux_writer_fallocate(w, &env->ctx, 0, 0, (uint64_t)1 << 60,
				   &env->err);
	assert_true(rc == -ENOSPC || rc == -EFBIG);
	assert_int_equal(env->err.e.sys_errno, -rc);
	assert_int_equal(smux_classify(&env->err.e), SMUX_OUTCOME_SEMANTIC);
	smux_writer_close(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_inplace_modes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_staged_writer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_room_is_callers, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
