/* SPDX-License-Identifier: MIT */
/*
 * test_writer_info.c - a writer tells what it opened (struct smux_writer
 * has_info/info): the in-place file writer from the file it opened or
 * created, a one-target mux writer passes its member's on, a mirror's
 * says nothing. smuxfs uses it to answer getattr of a file it just
 * created without a head (one member call less per created file, issue
 * 8's untar row).
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inplace_create_has_info),
		cmocka_unit_test(test_inplace_trunc_info_after_cut),
		cmocka_unit_test(test_single_mux_passes_info),
		cmocka_unit_test(test_mirror_has_no_info),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
