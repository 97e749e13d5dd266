/* SPDX-License-Identifier: MIT */
/*
 * mirror_files.h - the fixture of the crash-recovery tests of the mux
 * (test_mux_intent, test_mux_change): a mirror "m" of two file backends
 * "a" and "b" in a temporary directory, with a state directory (its hint
 * journal) and an event recorder. mf_mux opens the mirror again, as the
 * next daemon would, over the same members.
 */
#ifndef SMUX_TESTS_MIRROR_FILES_H
#define SMUX_TESTS_MIRROR_FILES_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "mux_helpers.h"
#include "smux/file.h"

struct mf {
	char dir[64];
	char a[96], b[96], state[96];
	struct smux_backend *fa, *fb, *mux;
	struct mh_events *ev;
	struct smux_ctx ctx;
};

static inline struct smux_backend *mf_file(const char *name, const char *path)
{
	struct smux_file_opts o = {.path = path, .no_fsync = true};
	struct smux_backend *b = NULL;
	struct smux_error err;

	MH_OK(smux_file_new(name, &o, &b, &err), &err);
	return b;
}

/* Opens the mux (@mode; a: a shield's origin) over the two members,
 * its journal in @state. */
static inline void mf_mux_mode(struct mf *t, const char *state,
			       enum smux_mode mode)
{
	struct smux_mux_opts o = {
		.mode = mode,
		.events = t->ev->bus,
		.state_dir = state,
	};
	struct smux_backend *bs[2] = {t->fa, t->fb};

	t->mux = mh_mux("m", &o, bs, NULL, 2);
}

/* Opens the mirror over the two members, its journal in @state. */
static inline void mf_mux(struct mf *t, const char *state)
{
	mf_mux_mode(t, state, SMUX_MODE_MIRROR);
}

/* @k1 and @k2 are one file of two names (a hard link) in the backing
 * directory @dir. */
static inline void mf_one_file(const char *dir, const char *k1, const char *k2)
{
	char p1[PATH_MAX], p2[PATH_MAX];
	struct stat s1, s2;

	snprintf(p1, sizeof(p1), "%s/%s", dir, k1);
	snprintf(p2, sizeof(p2), "%s/%s", dir, k2);
	assert_int_equal(stat(p1, &s1), 0);
	assert_int_equal(stat(p2, &s2), 0);
	assert_true(s1.st_ino == s2.st_ino);
	assert_int_equal(s1.st_nlink, 2);
}

static inline int mf_setup(void **state)
{
	struct mf *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/smux-mf-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->a, sizeof(t->a), "%s/a", t->dir);
	snprintf(t->b, sizeof(t->b), "%s/b", t->dir);
	snprintf(t->state, sizeof(t->state), "%s/state", t->dir);
	assert_int_equal(mkdir(t->a, 0755), 0);
	assert_int_equal(mkdir(t->b, 0755), 0);
	t->fa = mf_file("a", t->a);
	t->fb = mf_file("b", t->b);
	t->ev = mh_events_new();
	smux_ctx_init(&t->ctx);
	mf_mux(t, t->state);
	*state = t;
	return 0;
}

static inline int mf_teardown(void **state)
{
	struct mf *t = *state;

	smux_backend_unref(t->mux); /* NULL after a test's own unref */
	smux_backend_unref(t->fa);
	smux_backend_unref(t->fb);
	mh_events_free(t->ev);
	mh_rm_rf(t->dir);
	free(t);
	return 0;
}

#endif
