/* SPDX-License-Identifier: MIT */
/*
 * test_mux_replay_types.c - hint replays onto a replica of a mirror of two
 * file backends that missed changes of a name's type or of a file of
 * several names (found by an outside tester draining b, changing the tree
 * through the mount, undraining b and repairing: s37-t1-*.sh).
 *
 * Each test makes the state the drain left - a holds the tree as the
 * mount changed it, b holds it as it was, b has the hints the fan-outs
 * recorded - and repairs: every hint ends, and b holds what a holds.
 *
 *  - a file of two names (f, h) appended through f: b's h shows the
 *    append too (the replay made a new f, and h kept the old bytes);
 *  - a file of three names b missed all of (cp -a): its names replayed
 *    one after another are one file on b again (each got its own);
 *  - a directory's xattr set (noted as its plain key): the replay copies
 *    it (it read the key as a file: IS_DIRECTORY at every pass);
 *  - a file, and a FIFO, replaced by a directory, and a directory
 *    replaced by a symlink: b takes the new type (every pass failed on
 *    the old one in the way).
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/mux_internal.h"
#include "mirror_files.h"

/* The backing path @dir/@name. */
static const char *at(const char *dir, const char *name)
{
	static char path[2][PATH_MAX];
	static int i;

	i ^= 1;
	snprintf(path[i], sizeof(path[i]), "%s/%s", dir, name);
	return path[i];
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(s, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* b missed the latest change of @key (as a drain leaves it). */
static void hint_b(struct mf *t, const char *key, enum smux__hint_kind kind)
{
	struct smux_error err;

	MH_OK(smux__hints_add(smux__mux_of(t->mux)->hints, "b", key, kind, NULL,
			      &err),
	      &err);
}

/* Repairs until no hint is left (each pass may unblock the next: a
 * directory's entries go before the directory); at most @passes. */
static void repair_all(struct mf *t, int passes)
{
	unsigned replayed = 0, pending = 1;
	struct smux_error err;

	for (int i = 0; i < passes && pending; i++)
		(void)smux_mux_repair(t->mux, &t->ctx, &replayed, &pending,
				      &err);
	assert_int_equal(pending, 0);
	assert_int_equal(smux_mux_pending_hints(t->mux), 0);
}

static mode_t type_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return 0;
	return st.st_mode & S_IFMT;
}

/* f and h are one file on both; an append through f reached a only. */
static void test_linked_append_replayed(void **state)
{
	struct mf *t = *state;
	struct stat f, h;

	for (int i = 0; i < 2; i++) {
		const char *dir = i ? t->b : t->a;

		write_file(at(dir, "f"), "old\n");
		assert_int_equal(link(at(dir, "f"), at(dir, "h")), 0);
	}
	write_file(at(t->a, "f"), "old\nnew\n");
	hint_b(t, "f", SMUX__HINT_PUT);
	repair_all(t, 2);
	MH_HOLDS(t->fb, "h", "old\nnew\n");
	MH_HOLDS(t->fb, "f", "old\nnew\n");
	assert_int_equal(stat(at(t->b, "f"), &f), 0);
	assert_int_equal(stat(at(t->b, "h"), &h), 0);
	assert_true(f.st_ino == h.st_ino);
}

/* A file of two names on b, one of them made a file of its own on a (rm
 * f; echo new > f): the replay does not write the new bytes through h. */
static void test_unlinked_name_replayed_apart(void **state)
{
	struct mf *t = *state;

	write_file(at(t->a, "h"), "old\n");
	write_file(at(t->b, "f"), "old\n");
	assert_int_equal(link(at(t->b, "f"), at(t->b, "h")), 0);
	write_file(at(t->a, "f"), "new\n");
	hint_b(t, "f", SMUX__HINT_PUT);
	repair_all(t, 2);
	MH_HOLDS(t->fb, "f", "new\n");
	MH_HOLDS(t->fb, "h", "old\n");
}

/* f and h one file on both; ln -f g f on a while b was drained: f is now
 * a name of g's file there, h keeps the old bytes. The replay of f must
 * not write g's bytes into b's f - h's file too (a review of the fix
 * above: its first version decided by a's link count alone). */
static void test_other_group_not_written(void **state)
{
	struct mf *t = *state;

	for (int i = 0; i < 2; i++) {
		const char *dir = i ? t->b : t->a;

		write_file(at(dir, "f"), "old\n");
		assert_int_equal(link(at(dir, "f"), at(dir, "h")), 0);
	}
	write_file(at(t->a, "g"), "g bytes\n");
	assert_int_equal(unlink(at(t->a, "f")), 0);
	assert_int_equal(link(at(t->a, "g"), at(t->a, "f")), 0);
	hint_b(t, "f", SMUX__HINT_PUT);
	hint_b(t, "g", SMUX__HINT_PUT);
	repair_all(t, 2);
	MH_HOLDS(t->fb, "h", "old\n");
	MH_HOLDS(t->fb, "f", "g bytes\n");
	MH_HOLDS(t->fb, "g", "g bytes\n");
}

/* cp -a of a file of three names while b was drained: b missed every
 * name. Replayed one after the other, the later names become links of
 * the first on b (each got a file of its own). */
static void test_missed_link_group_linked(void **state)
{
	struct mf *t = *state;
	struct stat s1, s2, s3;

	write_file(at(t->a, "f1"), "x\n");
	assert_int_equal(link(at(t->a, "f1"), at(t->a, "f2")), 0);
	assert_int_equal(link(at(t->a, "f1"), at(t->a, "f3")), 0);
	hint_b(t, "f1", SMUX__HINT_PUT);
	repair_all(t, 1);
	hint_b(t, "f2", SMUX__HINT_PUT);
	hint_b(t, "f3", SMUX__HINT_PUT);
	repair_all(t, 1);
	MH_HOLDS(t->fb, "f3", "x\n");
	assert_int_equal(stat(at(t->b, "f1"), &s1), 0);
	assert_int_equal(stat(at(t->b, "f2"), &s2), 0);
	assert_int_equal(stat(at(t->b, "f3"), &s3), 0);
	assert_true(s1.st_ino == s2.st_ino && s1.st_ino == s3.st_ino);
	assert_int_equal(s1.st_nlink, 3);
}

/* The name remembered was made a file of its own on a since: no link. */
static void test_link_group_left_not_linked(void **state)
{
	struct mf *t = *state;
	struct stat s1, s2;

	write_file(at(t->a, "f1"), "x\n");
	assert_int_equal(link(at(t->a, "f1"), at(t->a, "f2")), 0);
	hint_b(t, "f1", SMUX__HINT_PUT);
	repair_all(t, 1);
	assert_int_equal(unlink(at(t->a, "f1")), 0);
	write_file(at(t->a, "f1"), "y\n");
	assert_int_equal(link(at(t->a, "f2"), at(t->a, "f9")), 0);
	hint_b(t, "f2", SMUX__HINT_PUT);
	repair_all(t, 1);
	MH_HOLDS(t->fb, "f2", "x\n");
	assert_int_equal(stat(at(t->b, "f1"), &s1), 0);
	assert_int_equal(stat(at(t->b, "f2"), &s2), 0);
	assert_true(s1.st_ino != s2.st_ino);
}

/* setfattr on a directory while b was drained (its plain key hinted) */
static void test_dir_xattr_replayed(void **state)
{
	struct mf *t = *state;
	char v[16] = {0};

	assert_int_equal(mkdir(at(t->a, "d1"), 0755), 0);
	assert_int_equal(mkdir(at(t->b, "d1"), 0755), 0);
	assert_int_equal(setxattr(at(t->a, "d1"), "user.dir", "dv", 2, 0), 0);
	hint_b(t, "d1", SMUX__HINT_PUT);
	repair_all(t, 2);
	assert_int_equal(getxattr(at(t->b, "d1"), "user.dir", v, sizeof(v)), 2);
	assert_string_equal(v, "dv");
}

/* rm f2d; mkdir f2d; echo y > f2d/y (and the same of a FIFO) */
static void test_file_became_dir(void **state)
{
	struct mf *t = *state;
	const char *names[2] = {"f2d", "p2d"};

	write_file(at(t->b, "f2d"), "1\n");
	assert_int_equal(mkfifo(at(t->b, "p2d"), 0644), 0);
	for (int i = 0; i < 2; i++) {
		char k[16];

		assert_int_equal(mkdir(at(t->a, names[i]), 0755), 0);
		hint_b(t, names[i], SMUX__HINT_DEL);
		snprintf(k, sizeof(k), "%s/", names[i]);
		hint_b(t, k, SMUX__HINT_PUT);
	}
	write_file(at(t->a, "f2d/y"), "y\n");
	hint_b(t, "f2d/y", SMUX__HINT_PUT);
	repair_all(t, 4);
	assert_int_equal(type_of(at(t->b, "f2d")), S_IFDIR);
	assert_int_equal(type_of(at(t->b, "p2d")), S_IFDIR);
	MH_HOLDS(t->fb, "f2d/y", "y\n");
}

/* rm -rf d2l; ln -s tgt d2l */
static void test_dir_became_symlink(void **state)
{
	struct mf *t = *state;

	assert_int_equal(mkdir(at(t->b, "d2l"), 0755), 0);
	write_file(at(t->b, "d2l/in"), "in\n");
	assert_int_equal(symlink("tgt", at(t->a, "d2l")), 0);
	hint_b(t, "d2l/in", SMUX__HINT_DEL);
	hint_b(t, "d2l/", SMUX__HINT_DEL);
	hint_b(t, "d2l", SMUX__HINT_PUT);
	repair_all(t, 4);
	assert_int_equal(type_of(at(t->b, "d2l")), S_IFLNK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_linked_append_replayed,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(
			test_unlinked_name_replayed_apart, mf_setup,
			mf_teardown),
		cmocka_unit_test_setup_teardown(test_other_group_not_written,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_missed_link_group_linked,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_link_group_left_not_linked,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_dir_xattr_replayed,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_file_became_dir, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_dir_became_symlink,
						mf_setup, mf_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
