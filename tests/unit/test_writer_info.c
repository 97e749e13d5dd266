/* SPDX-License-Identifier: MIT */
/*
 * test_writer_info.c - a writer tells what it opened (struct smux_writer
 * has_info/info): the in-place file writer from the file it opened or
 * created, a one-target mux writer passes its member's on, a mirror's
 * says nothing. smuxfs uses it to answer getattr of a file it just
 * created without a head (one member call less per created file, issue
 * 8's untar row). The writer also says which group its directory gives
 * new files (dir_group: a set-group-ID directory's), so a create needs
 * no lookup of its directory; and, told the object must exist
 * (SMUX_WRITER_EXISTING), an open of an existing file needs no head.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mux_helpers.h"
#include "smux/file.h"

struct wt {
	char dir[64];
	unsigned n;
	struct smux_backend *file[2];
	struct smux_backend *mux;
	struct smux_ctx ctx;
};

static void wt_init(struct wt *t, enum smux_mode mode, unsigned n)
{
	struct smux_mux_opts o = {.mode = mode, .cooldown_ms = 60000};
	struct smux_error err;
	char path[128], name[16];

	memset(t, 0, sizeof(*t));
	t->n = n;
	smux_ctx_init(&t->ctx);
	snprintf(t->dir, sizeof(t->dir), "/tmp/smux-winfo-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	for (unsigned i = 0; i < n; i++) {
		struct smux_file_opts fo = {.path = path, .no_fsync = true};

		snprintf(path, sizeof(path), "%s/m%u", t->dir, i);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(name, sizeof(name), "m%u", i);
		MH_OK(smux_file_new(name, &fo, &t->file[i], &err), &err);
	}
	t->mux = mh_mux("mx", &o, t->file, NULL, n);
}

static void wt_release(struct wt *t)
{
	smux_backend_unref(t->mux);
	for (unsigned i = 0; i < t->n; i++)
		smux_backend_unref(t->file[i]);
	mh_rm_rf(t->dir);
}

/* The info equals what a head of @key on @b says now. */
static void assert_info_is_head(struct smux_backend *b, struct smux_ctx *ctx,
				const char *key, const struct smux_info *got)
{
	struct smux_info want;
	struct smux_error err;

	MH_OK(smux_backend_head(b, ctx, key, &want, &err), &err);
	assert_int_equal(got->mode, want.mode);
	assert_int_equal(got->size, want.size);
	assert_int_equal(got->nlink, want.nlink);
	assert_int_equal(got->uid, want.uid);
	assert_int_equal(got->gid, want.gid);
	assert_true(got->file_id == want.file_id);
	assert_true(got->mtime_ns == want.mtime_ns);
	assert_true(got->ctime_ns == want.ctime_ns);
}

/* Created in place (EXCL), straight from the file backend: the new empty
 * file as a head would see it. */
static void test_inplace_create_has_info(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct wt t;

	(void)state;
	wt_init(&t, SMUX_MODE_FAILOVER, 1);
	MH_OK(smux_backend_writer_open(t.file[0], &t.ctx, "new",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_EXCL,
				       &w, &err),
	      &err);
	assert_true(w->has_info);
	assert_true(S_ISREG(w->info.mode));
	assert_int_equal(w->info.size, 0);
	assert_info_is_head(t.file[0], &t.ctx, "new", &w->info);
	smux_writer_close(w);
	wt_release(&t);
}

/* A truncating open of an existing file: the info is of the cut file,
 * not of the content it had. */
static void test_inplace_trunc_info_after_cut(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct wt t;

	(void)state;
	wt_init(&t, SMUX_MODE_FAILOVER, 1);
	MH_OK(mh_put(t.file[0], "f", "some content", &err), &err);
	MH_OK(smux_backend_writer_open(t.file[0], &t.ctx, "f",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_TRUNC,
				       &w, &err),
	      &err);
	assert_true(w->has_info);
	assert_int_equal(w->info.size, 0);
	assert_info_is_head(t.file[0], &t.ctx, "f", &w->info);
	smux_writer_close(w);
	wt_release(&t);
}

/* A one-member failover mux (smuxfs's root over one backend) passes the
 * member writer's info on. */
static void test_single_mux_passes_info(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct wt t;

	(void)state;
	wt_init(&t, SMUX_MODE_FAILOVER, 1);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "new",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_EXCL,
				       &w, &err),
	      &err);
	assert_true(w->has_info);
	assert_true(S_ISREG(w->info.mode));
	assert_info_is_head(t.file[0], &t.ctx, "new", &w->info);
	smux_writer_close(w);
	wt_release(&t);
}

/* A mirror's writer spans replicas whose files differ (inodes, times):
 * no single info, so none. */
static void test_mirror_has_no_info(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct wt t;

	(void)state;
	wt_init(&t, SMUX_MODE_MIRROR, 2);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "new",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_EXCL,
				       &w, &err),
	      &err);
	assert_false(w->has_info);
	smux_writer_close(w);
	wt_release(&t);
}

/* Opens @key on @b in place without O_EXCL (a create that finds a file
 * made meanwhile keeps it) and says whether the writer found it. */
static bool opened_found(struct smux_backend *b, struct smux_ctx *ctx,
			 const char *key)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	bool found;

	MH_OK(smux_backend_writer_open(b, ctx, key, SMUX_WRITER_INPLACE, &w,
				       &err),
	      &err);
	found = w->found;
	smux_writer_close(w);
	return found;
}

/* found: the file was there (not made by this open): the in-place file
 * writer, a mux of one passing it on, a mirror only when every replica
 * had it (one that lacked it is made, and given the creator's mode) */
static void test_writer_found(void **state)
{
	struct smux_error err;
	struct wt t;

	(void)state;
	wt_init(&t, SMUX_MODE_FAILOVER, 1);
	assert_false(opened_found(t.file[0], &t.ctx, "a"));
	assert_true(opened_found(t.file[0], &t.ctx, "a"));
	assert_false(opened_found(t.mux, &t.ctx, "b"));
	assert_true(opened_found(t.mux, &t.ctx, "b"));
	wt_release(&t);

	wt_init(&t, SMUX_MODE_MIRROR, 2);
	assert_false(opened_found(t.mux, &t.ctx, "c"));
	assert_true(opened_found(t.mux, &t.ctx, "c"));
	MH_OK(mh_put(t.file[0], "d", "on one replica", &err), &err);
	assert_false(opened_found(t.mux, &t.ctx, "d"));
	wt_release(&t);
}

/* Makes the directory @name on every member: set-group-ID when @sgid. */
static void wt_dir(struct wt *t, const char *name, bool sgid)
{
	char path[160];

	for (unsigned i = 0; i < t->n; i++) {
		snprintf(path, sizeof(path), "%s/m%u/%s", t->dir, i, name);
		assert_int_equal(mkdir(path, 0755), 0);
		/* chmod: mkdir's mode is cut by the umask, and set-group-ID
		 * on a directory of our own group needs no privilege */
		assert_int_equal(chmod(path, sgid ? 02755 : 0755), 0);
	}
}

/* Opens a writer of @key on @b, in place, and checks the group it says
 * the directory gives: @want (SMUX_ID_NONE: not set-group-ID). */
static void assert_dir_group(struct wt *t, struct smux_backend *b,
			     const char *key, uint32_t want)
{
	struct smux_writer *w = NULL;
	struct smux_error err;

	MH_OK(smux_backend_writer_open(b, &t->ctx, key,
				       SMUX_WRITER_INPLACE | SMUX_WRITER_EXCL,
				       &w, &err),
	      &err);
	assert_true(w->has_dir_group);
	assert_int_equal(w->dir_group, want);
	smux_writer_close(w);
}

/* The in-place writer says which group its directory gives new files
 * (smux_writer.dir_group): a set-group-ID directory's own, else none; a
 * one-target mux and a mirror pass it on (smuxfs then needs no lookup of
 * the directory per create). */
static void test_writer_dir_group(void **state)
{
	enum smux_mode modes[] = {SMUX_MODE_FAILOVER, SMUX_MODE_MIRROR};
	struct wt t;

	(void)state;
	for (unsigned m = 0; m < 2; m++) {
		wt_init(&t, modes[m], m + 1);
		assert_true(smux_backend_caps(t.mux) & SMUX_CAP_DIR_GROUP);
		wt_dir(&t, "sg", true);
		wt_dir(&t, "pl", false);
		assert_dir_group(&t, t.file[0], "sg/a", (uint32_t)getgid());
		assert_dir_group(&t, t.file[0], "pl/a", SMUX_ID_NONE);
		assert_dir_group(&t, t.mux, "sg/b", (uint32_t)getgid());
		assert_dir_group(&t, t.mux, "pl/b", SMUX_ID_NONE);
		assert_dir_group(&t, t.mux, "top", SMUX_ID_NONE);
		wt_release(&t);
	}
}

/* SMUX_WRITER_EXISTING: the object must exist; the writer then says what
 * it opened, so smuxfs opens an existing file without a head first. A
 * missing one (or one under a missing directory) is KEY_NOT_FOUND and
 * nothing is made; a directory IS_DIRECTORY. A failover mux (one target)
 * offers it, a mirror does not. */
static void test_writer_existing(void **state)
{
	unsigned f = SMUX_WRITER_INPLACE | SMUX_WRITER_EXISTING;
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct stat st;
	char path[160];
	struct wt t;

	(void)state;
	wt_init(&t, SMUX_MODE_FAILOVER, 1);
	assert_true(smux_backend_caps(t.file[0]) & SMUX_CAP_OPEN_EXISTING);
	assert_true(smux_backend_caps(t.mux) & SMUX_CAP_OPEN_EXISTING);
	MH_OK(mh_put(t.file[0], "f", "some content", &err), &err);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "f", f, &w, &err), &err);
	assert_true(w->has_info);
	assert_int_equal(w->info.size, 12);
	assert_info_is_head(t.file[0], &t.ctx, "f", &w->info);
	smux_writer_close(w);
	w = NULL;
	assert_int_not_equal(
		smux_backend_writer_open(t.mux, &t.ctx, "nope", f, &w, &err),
		0);
	assert_int_equal(err.e.code, SMUX_E_KEY_NOT_FOUND);
	assert_int_not_equal(
		smux_backend_writer_open(t.mux, &t.ctx, "d/nope", f, &w, &err),
		0);
	assert_int_equal(err.e.code, SMUX_E_KEY_NOT_FOUND);
	assert_null(w);
	snprintf(path, sizeof(path), "%s/m0/nope", t.dir);
	assert_int_not_equal(lstat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/m0/d", t.dir);
	assert_int_not_equal(lstat(path, &st), 0);
	wt_dir(&t, "dir", false);
	assert_int_not_equal(
		smux_backend_writer_open(t.mux, &t.ctx, "dir", f, &w, &err), 0);
	assert_int_equal(err.e.code, SMUX_E_IS_DIRECTORY);
	wt_release(&t);

	wt_init(&t, SMUX_MODE_MIRROR, 2);
	assert_false(smux_backend_caps(t.mux) & SMUX_CAP_OPEN_EXISTING);
	wt_release(&t);
}

/* SMUX_CAP_ONE_COPY: a file backend and a mux of one member have it (an
 * in-place commit there only sets attributes, so smuxfs commits at the
 * release and spares the kernel's FLUSH); a mux of two never (its commit
 * records hints and applies the write policy, which close(2) reports). */
static void test_one_copy(void **state)
{
	enum smux_mode modes[] = {SMUX_MODE_FAILOVER, SMUX_MODE_MIRROR};
	struct wt t;

	(void)state;
	for (unsigned m = 0; m < 2; m++) {
		wt_init(&t, modes[m], 1);
		assert_true(smux_backend_caps(t.file[0]) & SMUX_CAP_ONE_COPY);
		assert_true(smux_backend_caps(t.mux) & SMUX_CAP_ONE_COPY);
		wt_release(&t);
		wt_init(&t, modes[m], 2);
		assert_false(smux_backend_caps(t.mux) & SMUX_CAP_ONE_COPY);
		wt_release(&t);
	}
}

/* The descriptor a writer hands the kernel for FUSE passthrough: the
 * file under the key itself, from the in-place file writer and from a
 * one-member mux's writer (which then takes the file's size as what was
 * written behind it); none from a staged writer or a mirror's, nor from
 * a single-target writer that keeps a spool to move with. */
static void test_passthrough_fd(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct stat a, b;
	char path[160];
	struct wt t;
	int fd;

	(void)state;
	wt_init(&t, SMUX_MODE_FAILOVER, 1);
	MH_OK(smux_backend_writer_open(t.file[0], &t.ctx, "f",
				       SMUX_WRITER_INPLACE, &w, &err),
	      &err);
	fd = smux_writer_passthrough_fd(w);
	assert_true(fd >= 0);
	snprintf(path, sizeof(path), "%s/m0/f", t.dir);
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	smux_writer_close(w);

	/* staged (no SMUX_WRITER_INPLACE): a temp file, never passed */
	MH_OK(smux_backend_writer_open(t.file[0], &t.ctx, "g", 0, &w, &err),
	      &err);
	assert_int_equal(smux_writer_passthrough_fd(w), -1);
	smux_writer_close(w);

	/* smuxfs's root over one backend */
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "f", SMUX_WRITER_INPLACE,
				       &w, &err),
	      &err);
	fd = smux_writer_passthrough_fd(w);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &a), 0);
	assert_true(a.st_ino == b.st_ino);
	assert_int_equal(pwrite(fd, "behind", 6, 0), 6);
	assert_int_equal(smux_writer_size(w), 6);
	smux_writer_close(w);
	wt_release(&t);

	/* a mirror: two files; a failover of two creating: a spool */
	wt_init(&t, SMUX_MODE_MIRROR, 2);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "f", SMUX_WRITER_INPLACE,
				       &w, &err),
	      &err);
	assert_int_equal(smux_writer_passthrough_fd(w), -1);
	smux_writer_close(w);
	wt_release(&t);
	wt_init(&t, SMUX_MODE_FAILOVER, 2);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "f",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_TRUNC,
				       &w, &err),
	      &err);
	assert_int_equal(smux_writer_passthrough_fd(w), -1);
	smux_writer_close(w);
	wt_release(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inplace_create_has_info),
		cmocka_unit_test(test_one_copy),
		cmocka_unit_test(test_inplace_trunc_info_after_cut),
		cmocka_unit_test(test_single_mux_passes_info),
		cmocka_unit_test(test_mirror_has_no_info),
		cmocka_unit_test(test_writer_found),
		cmocka_unit_test(test_writer_dir_group),
		cmocka_unit_test(test_writer_existing),
		cmocka_unit_test(test_passthrough_fd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
