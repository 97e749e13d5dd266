// SPDX-License-Identifier: MIT
/*
 * test_mux_fallocate.c - fallocate(2) through the mux writer
 * (src/core/mux_writer.c, mux_writer_single.c): a mirror fans it out to
 * every replica and its size follows an allocation that extends the file;
 * a replica that fails it drops out and gets a hint at commit; a refusal
 * by every replica (no room) is the call's error and drops none; a
 * failover writer that moves to the next member carries the zeros and the
 * size in its spool. Members: file backends, each behind a faulty
 * wrapper.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mux_helpers.h"
#include "smux/file.h"

#define MIB   ((uint64_t)1024 * 1024)
#define KEEP  SMUX_FALLOC_KEEP_SIZE
#define PUNCH (SMUX_FALLOC_PUNCH_HOLE | SMUX_FALLOC_KEEP_SIZE)

struct fx {
	struct smux_backend *inner[2], *f[2], *mux;
	struct mh_clock clk;
	char base[64];
	struct smux_ctx ctx;
	struct smux_error err;
};

static void fx_init(struct fx *x, enum smux_mode mode)
{
	struct smux_mux_opts o = {.mode = mode, .cooldown_ms = 100};
	struct smux_file_opts fo = {.no_fsync = true};
	char dir[96], name[16];

	memset(x, 0, sizeof(*x));
	smux_ctx_init(&x->ctx);
	mh_clock_init(&x->clk, 10000);
	o.clock = &x->clk.clock;
	snprintf(x->base, sizeof(x->base), "/tmp/smux-falloc-XXXXXX");
	assert_non_null(mkdtemp(x->base));
	for (int i = 0; i < 2; i++) {
		snprintf(dir, sizeof(dir), "%s/r%d", x->base, i);
		assert_int_equal(mkdir(dir, 0755), 0);
		fo.path = dir;
		snprintf(name, sizeof(name), "file%d", i);
		MH_OK(smux_file_new(name, &fo, &x->inner[i], &x->err), &x->err);
		snprintf(name, sizeof(name), "r%d", i);
		x->f[i] = mh_faulty(name, x->inner[i], NULL);
	}
	x->mux = mh_mux("mux", &o, x->f, NULL, 2);
}

static void fx_release(struct fx *x)
{
	smux_backend_unref(x->mux);
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(x->f[i]);
		smux_backend_unref(x->inner[i]);
	}
	mh_rm_rf(x->base);
}

/* stat of replica @i's backing file @key; -1 when it has none. */
static int fx_stat(struct fx *x, int i, const char *key, struct stat *st)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/r%d/%s", x->base, i, key);
	return stat(path, st);
}

/* Replica @i's backing file @key, whole (size in *@len; free()). */
static unsigned char *fx_read(struct fx *x, int i, const char *key, size_t *len)
{
	unsigned char *buf;
	struct stat st;
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/r%d/%s", x->base, i, key);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static bool all_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* A writer of "k" through the mux. */
static struct smux_writer *fx_open(struct fx *x, unsigned flags)
{
	struct smux_writer *w = NULL;

	MH_OK(smux_backend_writer_open(x->mux, &x->ctx, "k", flags, &w,
				       &x->err),
	      &x->err);
	return w;
}

/* Commits and closes @w. */
static void fx_finish(struct fx *x, struct smux_writer *w)
{
	MH_OK(smux_writer_commit(w, &x->ctx, NULL, NULL, &x->err), &x->err);
	smux_writer_close(w);
}

/* Replica @i fails every writer call transiently (or none). */
static void fx_writer_fails(struct fx *x, int i, bool fail)
{
	struct smux_faulty_opts o = {
		.error_rate = fail ? 1.0 : 0.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};

	smux_faulty_set(x->f[i], &o);
}

/* Mirror: every replica gets each mode, and the writer's size follows. */
static void test_mirror_fans_out(void **state)
{
	unsigned char *a, *b;
	size_t la, lb;
	struct smux_writer *w;
	struct stat st;
	struct fx x;

	(void)state;
	fx_init(&x, SMUX_MODE_MIRROR);
	w = fx_open(&x, SMUX_WRITER_INPLACE);
	MH_OK(smux_writer_fallocate(w, &x.ctx, 0, 0, 4 * MIB, &x.err), &x.err);
	assert_int_equal(smux_writer_size(w), 4 * MIB);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fx_stat(&x, i, "k", &st), 0);
		assert_int_equal(st.st_size, 4 * MIB);
		assert_true((uint64_t)st.st_blocks * 512 >= 4 * MIB);
	}
	/* kept size: blocks past the end, the size stays */
	MH_OK(smux_writer_fallocate(w, &x.ctx, KEEP, 4 * MIB, MIB, &x.err),
	      &x.err);
	assert_int_equal(smux_writer_size(w), 4 * MIB);
	MH_OK(smux_writer_pwrite(w, &x.ctx, "abcdefgh", 8, 0, &x.err), &x.err);
	MH_OK(smux_writer_fallocate(w, &x.ctx, PUNCH, 2, 2, &x.err), &x.err);
	MH_OK(smux_writer_fallocate(w, &x.ctx, SMUX_FALLOC_ZERO_RANGE, 6,
				    5 * MIB - 6, &x.err),
	      &x.err);
	assert_int_equal(smux_writer_size(w), 5 * MIB);
	fx_finish(&x, w);
	a = fx_read(&x, 0, "k", &la);
	b = fx_read(&x, 1, "k", &lb);
	assert_int_equal(la, 5 * MIB);
	assert_int_equal(lb, la);
	assert_memory_equal(a, b, la);
	assert_memory_equal(a, "ab\0\0ef", 6);
	assert_true(all_zero(a + 6, la - 6));
	free(a);
	free(b);
	assert_int_equal(smux_mux_pending_hints(x.mux), 0);
	fx_release(&x);
}

/* A replica whose fallocate fails drops out of the writer, misses what
 * follows and gets a hint at commit; the other takes it all. */
static void test_failing_replica_drops(void **state)
{
	struct smux_writer *w;
	struct stat st;
	struct fx x;

	(void)state;
	fx_init(&x, SMUX_MODE_MIRROR);
	w = fx_open(&x, SMUX_WRITER_INPLACE);
	fx_writer_fails(&x, 1, true);
	MH_OK(smux_writer_fallocate(w, &x.ctx, 0, 0, MIB, &x.err), &x.err);
	fx_writer_fails(&x, 1, false);
	MH_OK(smux_writer_pwrite(w, &x.ctx, "x", 1, 0, &x.err), &x.err);
	fx_finish(&x, w);
	assert_int_equal(fx_stat(&x, 0, "k", &st), 0);
	assert_int_equal(st.st_size, MIB);
	assert_int_equal(fx_stat(&x, 1, "k", &st), 0);
	assert_int_equal(st.st_size, 0); /* created at open, nothing since */
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	fx_release(&x);
}

/* No room anywhere: the call's error (ENOSPC or EFBIG), every replica
 * stays in the writer and takes the next write; no hint. */
static void test_refused_everywhere(void **state)
{
	struct smux_writer *w;
	struct stat st;
	struct fx x;
	int rc;

	(void)state;
	fx_init(&x, SMUX_MODE_MIRROR);
	w = fx_open(&x, SMUX_WRITER_INPLACE);
	rc = smux_writer_fallocate(w, &x.ctx, 0, 0, (uint64_t)1 << 60, &x.err);
	assert_true(rc == -ENOSPC || rc == -EFBIG);
	assert_int_equal(smux_writer_size(w), 0);
	MH_OK(smux_writer_pwrite(w, &x.ctx, "y", 1, 0, &x.err), &x.err);
	fx_finish(&x, w);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fx_stat(&x, i, "k", &st), 0);
		assert_int_equal(st.st_size, 1);
	}
	assert_int_equal(smux_mux_pending_hints(x.mux), 0);
	fx_release(&x);
}

/* Failover: the writer's spool follows each fallocate (zeros, size), so
 * when its member fails and the writer moves, the next member gets the
 * same content. */
static void test_failover_moves_with_zeros(void **state)
{
	unsigned char *b;
	struct smux_writer *w;
	struct fx x;
	size_t lb;

	(void)state;
	fx_init(&x, SMUX_MODE_FAILOVER);
	w = fx_open(&x, SMUX_WRITER_TRUNC);
	MH_OK(smux_writer_pwrite(w, &x.ctx, "abcdefgh", 8, 0, &x.err), &x.err);
	MH_OK(smux_writer_fallocate(w, &x.ctx, PUNCH, 1, 2, &x.err), &x.err);
	MH_OK(smux_writer_fallocate(w, &x.ctx, SMUX_FALLOC_ZERO_RANGE | KEEP, 6,
				    100, &x.err),
	      &x.err);
	MH_OK(smux_writer_fallocate(w, &x.ctx, 0, 0, MIB, &x.err), &x.err);
	assert_int_equal(smux_writer_size(w), MIB);
	mh_fail(x.f[0], true);
	MH_OK(smux_writer_pwrite(w, &x.ctx, "Z", 1, 3, &x.err), &x.err);
	fx_finish(&x, w);
	b = fx_read(&x, 1, "k", &lb);
	assert_int_equal(lb, MIB);
	assert_memory_equal(b, "a\0\0Zef\0\0", 8);
	assert_true(all_zero(b + 6, lb - 6));
	free(b);
	mh_fail(x.f[0], false);
	fx_release(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mirror_fans_out),
		cmocka_unit_test(test_failing_replica_drops),
		cmocka_unit_test(test_refused_everywhere),
		cmocka_unit_test(test_failover_moves_with_zeros),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
