/* SPDX-License-Identifier: MIT */
/*
 * test_mux_change.c - renames, deletes and links every replica makes
 * (src/core/mux_change.c): a mirror of two file backends whose daemon
 * died between two replicas' calls of a rename or a delete - its change
 * note standing in the journal, the call made on one replica only - gets
 * the change completed on the other by the next mux's repair, with a
 * reconciled event, as the next mux opens (before anyone writes); a
 * change made nowhere is left so; a replica that had missed a write of
 * either key is not called but hinted, and the replays make it what the
 * others hold; a rename through the mux leaves no note standing.
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/mux_internal.h"
#include "mirror_files.h"

/* The change notes standing in the mux's journal. */
static int changes_standing(struct mf *t)
{
	struct smux__note *l;
	int n = smux__hints_notes(smux__mux_of(t->mux)->hints, &l), k = 0;

	assert_true(n >= 0);
	for (int i = 0; i < n; i++)
		k += l[i].type == SMUX__NOTE_CHANGE;
	smux__hints_free_notes(l, n);
	return k;
}

/*
 * The daemon dies with @op (rename, delete, link) of @key under way: its
 * note is in the journal (written as smux__change_begin writes it), and
 * the mux goes without ending it. The next mux (mf_mux) loads it.
 */
static void die_in(struct mf *t, enum smux__op op, const char *key,
		   const char *to)
{
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux__call call = {.op = op, .key = key, .key2 = to};
	struct smux_error err;
	uint64_t id = 0;

	smux__mux_bg_stop(m);
	MH_OK(smux__change_begin(m, &call, &id, &err), &err);
	assert_true(id > 0);
	smux_backend_unref(t->mux);
	t->mux = NULL;
}

/* die_in for a rename (@to) or a delete (NULL). */
static void die_during(struct mf *t, const char *key, const char *to)
{
	die_in(t, to ? SMUX__OP_RENAME : SMUX__OP_DEL, key, to);
}

/* What the next mux's repair leaves: every change note ended. */
static void repair(struct mf *t)
{
	unsigned replayed = 0, pending = 0;
	struct smux_error err;

	MH_OK(smux_mux_repair(t->mux, &t->ctx, &replayed, &pending, &err),
	      &err);
	assert_int_equal(changes_standing(t), 0);
	assert_int_equal(pending, 0);
}

/* The daemon dies during a rename of src to dst that a made; the next
 * mux and its repair leave dst holding @want on both, src on neither. */
static void renamed_on_a(struct mf *t, const char *want)
{
	struct smux_error err;

	die_during(t, "src", "dst");
	MH_OK(smux_backend_rename(t->fa, &t->ctx, "src", "dst", &err), &err);
	mf_mux(t, t->state);
	repair(t);
	MH_LACKS(t->fa, "src");
	MH_LACKS(t->fb, "src");
	MH_HOLDS(t->fa, "dst", want);
	MH_HOLDS(t->fb, "dst", want);
}

/* A rename made on a only: completed on b, over b's old destination. */
static void test_rename_completed(void **state)
{
	struct mf *t = *state;
	struct smux_event ev;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "src", "new", &err), &err);
	MH_OK(mh_put(t->mux, "dst", "old", &err), &err);
	renamed_on_a(t, "new");
	assert_true(mh_events_last(t->ev, SMUX_EV_RECONCILED, &ev));
	assert_string_equal(ev.key, "src");
	assert_string_equal(ev.name, "a");
	assert_int_equal(ev.n_failed, 1);
	assert_string_equal(ev.failed[0], "b");
}

/* A delete made on b only: completed on a. */
static void test_delete_completed(void **state)
{
	struct mf *t = *state;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "gone", "x", &err), &err);
	die_during(t, "gone", NULL);
	MH_OK(smux_backend_del(t->fb, &t->ctx, "gone", &err), &err);
	mf_mux(t, t->state);
	repair(t);
	MH_LACKS(t->fa, "gone");
	MH_LACKS(t->fb, "gone");
	assert_int_equal(mh_events_count(t->ev, SMUX_EV_RECONCILED), 1);
}

/* A change made on no replica: left so (the call never returned; the
 * replicas agree), no replica updated, no event. */
static void test_change_made_nowhere(void **state)
{
	struct mf *t = *state;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "stay", "x", &err), &err);
	die_during(t, "stay", "moved");
	mf_mux(t, t->state);
	repair(t);
	MH_HOLDS(t->fa, "stay", "x");
	MH_HOLDS(t->fb, "stay", "x");
	MH_LACKS(t->fa, "moved");
	MH_LACKS(t->fb, "moved");
	assert_int_equal(mh_events_count(t->ev, SMUX_EV_RECONCILED), 0);
}

/* b had missed the source's latest write (a hint pending, no copy of
 * it): its absence is no sign of the rename, and a live rename would
 * have left it out with a hint for the new name - the completion gives
 * it that hint, and the repair's replay the new name's content. */
static void test_stale_replica_hinted(void **state)
{
	struct mf *t = *state;
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux_error err;

	MH_OK(mh_put(t->fa, "src", "only on a", &err), &err);
	MH_OK(smux__hints_add(m->hints, "b", "src", SMUX__HINT_PUT, NULL, &err),
	      &err);
	renamed_on_a(t, "only on a");
}

/* b had missed the destination's latest write (a put while it was
 * down: a hint pending, its copy older): a live rename leaves it out,
 * and so does the completion - its old destination is never taken for
 * the new one, nor its hint cleared. */
static void test_stale_destination_left_out(void **state)
{
	struct mf *t = *state;
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux_error err;

	MH_OK(mh_put(t->mux, "src", "renamed", &err), &err);
	MH_OK(mh_put(t->fa, "dst", "newer", &err), &err);
	MH_OK(mh_put(t->fb, "dst", "older", &err), &err);
	MH_OK(smux__hints_add(m->hints, "b", "dst", SMUX__HINT_PUT, NULL, &err),
	      &err);
	renamed_on_a(t, "renamed");
}

/* b holds an older version of the source (it missed the latest write:
 * a hint pending): it is not renamed into the destination, it gets the
 * destination a fresh replica holds. */
static void test_stale_source_left_out(void **state)
{
	struct mf *t = *state;
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux_error err;

	MH_OK(mh_put(t->fa, "src", "v2", &err), &err);
	MH_OK(mh_put(t->fb, "src", "v1", &err), &err);
	MH_OK(smux__hints_add(m->hints, "b", "src", SMUX__HINT_PUT, NULL, &err),
	      &err);
	renamed_on_a(t, "v2");
}

/* The change is completed as the mux opens, before anyone uses it: a
 * write of the destination made right after the open stays, on both
 * replicas (a completion after it would rename the old source over it
 * on b). */
static void test_completed_before_use(void **state)
{
	struct mf *t = *state;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "src", "alpha", &err), &err);
	die_during(t, "src", "dst");
	MH_OK(smux_backend_rename(t->fa, &t->ctx, "src", "dst", &err), &err);
	mf_mux(t, t->state);
	assert_int_equal(changes_standing(t), 0);
	MH_OK(mh_put(t->mux, "dst", "written after", &err), &err);
	repair(t);
	MH_HOLDS(t->fa, "dst", "written after");
	MH_HOLDS(t->fb, "dst", "written after");
	MH_LACKS(t->fb, "src");
}

/* A hard link made on a only: made on b too, as a link of b's own file
 * (one inode for both names there), not a copy. */
static void test_link_completed(void **state)
{
	struct mf *t = *state;
	struct smux_event ev;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "src", "linked", &err), &err);
	die_in(t, SMUX__OP_LINK, "src", "dst");
	MH_OK(smux_backend_link(t->fa, &t->ctx, "src", "dst", &err), &err);
	mf_mux(t, t->state);
	repair(t);
	MH_HOLDS(t->fa, "dst", "linked");
	MH_HOLDS(t->fb, "dst", "linked");
	MH_HOLDS(t->fb, "src", "linked");
	mf_one_file(t->b, "src", "dst");
	assert_true(mh_events_last(t->ev, SMUX_EV_RECONCILED, &ev));
	assert_string_equal(ev.name, "a");
	assert_string_equal(ev.failed[0], "b");
}

/* Each replica missed a write of one of the keys: a of the destination,
 * b of the source. The rename, made on a, is a rename from a source a
 * did not miss: it happened, b gets the hints a live rename leaves it,
 * and a's hint for the destination is superseded - its copy, the only
 * one of the source's newest content, is never replaced by b's older
 * destination. */
static void test_cross_stale(void **state)
{
	struct mf *t = *state;
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux_error err;

	MH_OK(mh_put(t->fa, "src", "v2 only on a", &err), &err);
	MH_OK(mh_put(t->fb, "src", "v1", &err), &err);
	MH_OK(smux__hints_add(m->hints, "b", "src", SMUX__HINT_PUT, NULL, &err),
	      &err);
	MH_OK(mh_put(t->fa, "dst", "dst older", &err), &err);
	MH_OK(mh_put(t->fb, "dst", "dst latest", &err), &err);
	MH_OK(smux__hints_add(m->hints, "a", "dst", SMUX__HINT_PUT, NULL, &err),
	      &err);
	renamed_on_a(t, "v2 only on a");
}

/* Shield: the origin (a) alone says whether the change happened. A
 * rename made on the mirror (b) only is undone there (the live rule:
 * the origin takes every write or none goes anywhere). */
static void test_shield_origin_decides(void **state)
{
	struct mf *t = *state;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "src", "kept", &err), &err);
	die_during(t, "src", "dst");
	MH_OK(smux_backend_rename(t->fb, &t->ctx, "src", "dst", &err), &err);
	mf_mux_mode(t, t->state, SMUX_MODE_SHIELD);
	repair(t);
	MH_HOLDS(t->fa, "src", "kept");
	MH_HOLDS(t->fb, "src", "kept");
	MH_LACKS(t->fa, "dst");
	MH_LACKS(t->fb, "dst");
}

/* A note whose end was lost (its write failed) is older than a later
 * change of its key: only the newest note of a key is rolled forward.
 * The old "delete k", taken for a crash's, deleted k on b - and with it
 * the rename a made of k. */
static void test_older_note_of_key_ended(void **state)
{
	struct mf *t = *state;
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux__note n = {.type = SMUX__NOTE_CHANGE,
			       .kind = SMUX__HINT_DEL,
			       .replica = SMUX__INTENT_ALL,
			       .key = "k"};
	struct smux_error err;

	MH_OK(smux__hints_note_lazy(m->hints, &n, &err), &err); /* not ended */
	MH_OK(mh_put(t->mux, "k", "data", &err), &err);
	die_during(t, "k", "j");
	MH_OK(smux_backend_rename(t->fa, &t->ctx, "k", "j", &err), &err);
	mf_mux(t, t->state);
	repair(t);
	MH_LACKS(t->fa, "k");
	MH_LACKS(t->fb, "k");
	MH_HOLDS(t->fa, "j", "data");
	MH_HOLDS(t->fb, "j", "data");
}

/*
 * Two changes of one key in flight at a crash: a staged writer's commit
 * of f (its note the older) and a rename of a over f, made on a only,
 * where the commit then landed over it. Rolling the rename forward on b
 * gives b a's bytes as f; a keeps the commit's. The older note, a change
 * in place, was ended as if its end were lost, and f stayed different.
 * It is reconciled after the rename instead: the newest f (the commit's)
 * on both.
 */
static void test_older_overlapping_change_reconciled(void **state)
{
	struct mf *t = *state;
	struct smux_mux *m = smux__mux_of(t->mux);
	struct smux_error err;
	uint64_t commit = 0;

	MH_OK(mh_put(t->mux, "a", "renamed", &err), &err);
	MH_OK(mh_put(t->mux, "f", "old", &err), &err);
	MH_OK(smux__change_begin_key(m, "f", &commit, &err), &err);
	assert_true(commit > 0);
	die_during(t, "a", "f");
	MH_OK(smux_backend_rename(t->fa, &t->ctx, "a", "f", &err), &err);
	MH_OK(mh_put(t->fa, "f", "commit", &err), &err);
	mf_mux(t, t->state);
	repair(t);
	MH_LACKS(t->fa, "a");
	MH_LACKS(t->fb, "a");
	MH_HOLDS(t->fa, "f", "commit");
	MH_HOLDS(t->fb, "f", "commit");
}

/* A name a link would make, already there on b as another file, is no
 * sign that the link happened there: it happened nowhere, a gets no
 * link. */
static void test_link_name_there_before(void **state)
{
	struct mf *t = *state;
	struct smux_error err;

	MH_OK(mh_put(t->mux, "src", "linked", &err), &err);
	MH_OK(mh_put(t->fb, "dst", "another file", &err), &err);
	die_in(t, SMUX__OP_LINK, "src", "dst");
	mf_mux(t, t->state);
	MH_LACKS(t->fa, "dst");
	assert_int_equal(mh_events_count(t->ev, SMUX_EV_RECONCILED), 0);
}

/* The backing file @dir/@name. */
static const char *backing(const char *dir, const char *name)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/*
 * A chmod and a setfattr made on a only (same bytes, same mtime on both):
 * their in-place note becomes a write intent whose reconcile gives b a's
 * mode and attribute, with an event naming b. Before, nothing noted them
 * and b kept 0644 and no attribute for good.
 */
static void test_setattr_reconciled(void **state)
{
	struct mf *t = *state;
	char value[8] = "";
	struct smux_event ev;
	struct smux_error err;
	struct stat st;

	MH_OK(mh_put(t->mux, "k", "same", &err), &err);
	die_in(t, SMUX__OP_SETATTR, "k", NULL);
	assert_int_equal(chmod(backing(t->a, "k"), 0600), 0);
	assert_int_equal(setxattr(backing(t->a, "k"), "user.k", "v", 1, 0), 0);
	mf_mux(t, t->state);
	repair(t);
	assert_int_equal(smux_mux_pending_intents(t->mux), 0);
	assert_int_equal(stat(backing(t->b, "k"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(getxattr(backing(t->b, "k"), "user.k", value,
				  sizeof(value) - 1),
			 1);
	assert_string_equal(value, "v");
	MH_HOLDS(t->fb, "k", "same");
	assert_true(mh_events_last(t->ev, SMUX_EV_RECONCILED, &ev));
	assert_string_equal(ev.key, "k");
	assert_int_equal(ev.n_failed, 1);
	assert_string_equal(ev.failed[0], "b");
}

/* A symlink whose owner differs (an lchown made on a only) gets a's
 * owner on b; its xattrs are not looked at (a symlink has none). */
static void test_symlink_owner_reconciled(void **state)
{
	struct mf *t = *state;
	struct stat st;

	if (geteuid() != 0)
		skip(); /* lchown to another user needs root (CI has it) */
	assert_int_equal(symlink("target", backing(t->a, "s")), 0);
	assert_int_equal(symlink("target", backing(t->b, "s")), 0);
	/* one mtime (made apart, b's may be a tick later and b taken for
	 * the newer: a's owner then went, CI failed so): a, the first of
	 * two alike, is the source */
	for (int i = 0; i < 2; i++)
		assert_int_equal(
			utimensat(AT_FDCWD, backing(i ? t->b : t->a, "s"),
				  (struct timespec[2]){{.tv_sec = 1700000000},
						       {.tv_sec = 1700000000}},
				  AT_SYMLINK_NOFOLLOW),
			0);
	die_in(t, SMUX__OP_SETATTR, "s", NULL);
	assert_int_equal(lchown(backing(t->a, "s"), 65534, 65534), 0);
	mf_mux(t, t->state);
	repair(t);
	assert_int_equal(smux_mux_pending_intents(t->mux), 0);
	assert_int_equal(lstat(backing(t->b, "s"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_uid, 65534);
	assert_int_equal(st.st_gid, 65534);
}

/*
 * A setfattr on a directory reaches it through its plain key ("dd": the
 * file backend takes a plain key naming a directory), and so is noted.
 * Reconciled as the directory "dd/": b gets the attribute, and the intent
 * ends. Before, the reconcile took the two directories (their mtimes
 * differ) for files of other versions, the copy's GET failed (a
 * directory) and the intent stayed pending for good, retried every pass.
 */
static void test_dir_plain_key_reconciled(void **state)
{
	struct mf *t = *state;
	char value[8] = "";

	assert_int_equal(mkdir(backing(t->a, "dd"), 0755), 0);
	assert_int_equal(mkdir(backing(t->b, "dd"), 0755), 0);
	assert_int_equal(mkdir(backing(t->b, "dd/sub"), 0755), 0);
	/* their mtimes differ (their entries do) */
	assert_int_equal(utimensat(AT_FDCWD, backing(t->a, "dd"),
				   (struct timespec[2]){{.tv_sec = 1700000000},
							{.tv_sec = 1700000000}},
				   0),
			 0);
	die_in(t, SMUX__OP_SETXATTR, "dd", NULL);
	assert_int_equal(setxattr(backing(t->a, "dd"), "user.k", "v", 1, 0), 0);
	mf_mux(t, t->state);
	repair(t);
	assert_int_equal(smux_mux_pending_intents(t->mux), 0);
	assert_int_equal(smux_mux_pending_hints(t->mux), 0);
	assert_int_equal(getxattr(backing(t->b, "dd"), "user.k", value,
				  sizeof(value) - 1),
			 1);
	assert_string_equal(value, "v");
}

/*
 * A reconcile that would fix only mode, owner or xattrs waits while an
 * in-place writer holds the key (its intent stays): ended then, the
 * difference stayed for good (a chmod killed between the replicas, and an
 * appender opening the file before the repair pass).
 */
static void test_meta_fix_waits_for_writer(void **state)
{
	struct mf *t = *state;
	unsigned replayed = 0, pending = 0;
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct stat st;

	MH_OK(mh_put(t->mux, "k", "same", &err), &err);
	die_in(t, SMUX__OP_SETATTR, "k", NULL);
	assert_int_equal(chmod(backing(t->a, "k"), 0600), 0);
	/* no background pass before the writer opens: one right after the
	 * mux started reconciled the intent first (a CI run, TSan lane) */
	smux_mux_hold_repairs(true);
	mf_mux(t, t->state);
	smux__mux_bg_stop(smux__mux_of(t->mux));
	smux_mux_hold_repairs(false);
	MH_OK(smux_backend_writer_open(t->mux, &t->ctx, "k",
				       SMUX_WRITER_INPLACE, &w, &err),
	      &err);
	(void)smux_mux_repair(t->mux, &t->ctx, &replayed, &pending, &err);
	assert_int_equal(smux_mux_pending_intents(t->mux), 1);
	assert_int_equal(stat(backing(t->b, "k"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	smux_writer_close(w);
	repair(t);
	assert_int_equal(smux_mux_pending_intents(t->mux), 0);
	assert_int_equal(stat(backing(t->b, "k"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
}

/* A mkdir made on a only is made on b; a directory both have, whose
 * mtimes differ (their entries'), is not copied: no replica updated. */
static void test_mkdir_reconciled(void **state)
{
	struct mf *t = *state;
	struct smux_event ev;
	struct stat st;

	assert_int_equal(mkdir(backing(t->a, "both"), 0755), 0);
	assert_int_equal(mkdir(backing(t->b, "both"), 0755), 0);
	assert_int_equal(mkdir(backing(t->b, "both/sub"), 0755), 0);
	die_in(t, SMUX__OP_PUT, "d/", NULL);
	assert_int_equal(mkdir(backing(t->a, "d"), 0750), 0);
	mf_mux(t, t->state);
	repair(t);
	assert_int_equal(stat(backing(t->b, "d"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_true(mh_events_last(t->ev, SMUX_EV_RECONCILED, &ev));
	assert_string_equal(ev.key, "d/");
	assert_int_equal(ev.n_failed, 1);
	/* a second daemon's note of "both/": nothing differs there */
	die_in(t, SMUX__OP_SETATTR, "both/", NULL);
	mf_mux(t, t->state);
	repair(t);
	assert_int_equal(mh_events_count(t->ev, SMUX_EV_RECONCILED), 2);
	assert_true(mh_events_last(t->ev, SMUX_EV_RECONCILED, &ev));
	assert_string_equal(ev.key, "both/");
	assert_int_equal(ev.n_failed, 0);
}

/*
 * A journal that cannot take a note (its disk full; here the file size
 * limit, so that every append fails) does not refuse the change: an rm
 * must free space there too, and a chmod is no reason to fail. The
 * changes are made on both replicas, and no note stands.
 */
static void test_change_without_note(void **state)
{
	struct smux_setattr mode = {.flags = SMUX_SET_MODE, .mode = 0600};
	struct smux__note probe = {.type = SMUX__NOTE_CHANGE,
				   .kind = SMUX__HINT_DEL,
				   .replica = SMUX__INTENT_ALL,
				   .key = "probe"};
	struct mf *t = *state;
	struct rlimit old, lim;
	struct smux_error err;
	char journal[160];
	struct stat st;

	MH_OK(mh_put(t->mux, "p", "x", &err), &err);
	MH_OK(mh_put(t->mux, "q", "y", &err), &err);
	snprintf(journal, sizeof(journal), "%s/m.hints", t->state);
	assert_int_equal(stat(journal, &st), 0);
	assert_true(signal(SIGXFSZ, SIG_IGN) != SIG_ERR);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)st.st_size;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	/* the journal takes no note now */
	assert_true(smux__hints_note_lazy(smux__mux_of(t->mux)->hints, &probe,
					  &err) < 0);
	MH_OK(smux_backend_del(t->mux, &t->ctx, "p", &err), &err);
	MH_OK(smux_backend_setattr(t->mux, &t->ctx, "q", &mode, &err), &err);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	MH_LACKS(t->fa, "p");
	MH_LACKS(t->fb, "p");
	assert_int_equal(stat(backing(t->b, "q"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(changes_standing(t), 0);
}

/* How many lines of the mux's journal hold @s. */
static int in_journal(struct mf *t, const char *s)
{
	char path[160], line[4096];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/m.hints", t->state);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, s) != NULL;
	fclose(f);
	return n;
}

/*
 * An in-place open that may create makes the file replica by replica: it
 * is noted until every replica's open returned (a daemon killed between
 * them left an empty file on one replica for good: test_meta_crash.sh),
 * then the note ends - no write intent, no reconcile for a create that
 * went well. An open of an existing file (no SMUX_WRITER_CREATE) notes
 * nothing.
 */
static void test_create_noted(void **state)
{
	struct mf *t = *state;
	struct smux_writer *w = NULL;
	unsigned replayed = 0, pending = 0;
	struct smux_error err;
	int notes = in_journal(t, "\"key\":\"n\"");

	MH_OK(smux_backend_writer_open(t->mux, &t->ctx, "n",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_CREATE,
				       &w, &err),
	      &err);
	assert_int_equal(in_journal(t, "\"key\":\"n\""), notes + 1);
	assert_int_equal(changes_standing(t), 0);
	assert_int_equal(smux_mux_pending_intents(t->mux), 0);
	MH_OK(smux_writer_commit(w, &t->ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(t->fa, "n", "");
	MH_HOLDS(t->fb, "n", "");
	/* as smuxfs opens an existing file on a mirror (no create) */
	MH_OK(smux_backend_writer_open(t->mux, &t->ctx, "n",
				       SMUX_WRITER_INPLACE, &w, &err),
	      &err);
	smux_writer_close(w);
	assert_int_equal(in_journal(t, "\"key\":\"n\""), notes + 1);
	MH_OK(smux_mux_repair(t->mux, &t->ctx, &replayed, &pending, &err),
	      &err);
	assert_int_equal(mh_events_count(t->ev, SMUX_EV_RECONCILED), 0);
}

/*
 * A create that leaves a replica out (draining here; down, or its open
 * failed) makes the file on the others only, and the left-out replica
 * gets it from the hint the commit records. Until then the key has a
 * write intent: a daemon killed before the commit (here: a close without
 * one) leaves it for the repair, which makes the file on b. The create's
 * note alone ended when the open returned, and b never got the file.
 */
static void test_create_left_out_held(void **state)
{
	struct mf *t = *state;
	struct smux_writer *w = NULL;
	unsigned replayed = 0, pending = 0;
	struct smux_error err;

	MH_OK(smux_mux_drain(t->mux, "b", &t->ctx, &err), &err);
	MH_OK(smux_backend_writer_open(t->mux, &t->ctx, "n",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_CREATE,
				       &w, &err),
	      &err);
	assert_int_equal(smux_mux_pending_intents(t->mux), 1);
	MH_HOLDS(t->fa, "n", "");
	MH_LACKS(t->fb, "n");
	smux_writer_close(w); /* no commit: as a crash leaves it */
	assert_int_equal(changes_standing(t), 0);
	MH_OK(smux_mux_undrain(t->mux, "b", &err), &err);
	MH_OK(smux_mux_repair(t->mux, &t->ctx, &replayed, &pending, &err),
	      &err);
	assert_int_equal(pending, 0);
	MH_HOLDS(t->fb, "n", "");
	assert_int_equal(smux_mux_pending_intents(t->mux), 0);
}

/* Renames, deletes, links, puts, setattrs and xattrs through the mux end
 * their notes. */
static void test_live_changes_end(void **state)
{
	struct smux_setattr mode = {.flags = SMUX_SET_MODE, .mode = 0600};
	struct smux_writer *w = NULL;
	struct mf *t = *state;
	struct smux_error err;
	int notes;

	MH_OK(mh_put(t->mux, "p", "x", &err), &err);
	MH_OK(smux_backend_setattr(t->mux, &t->ctx, "p", &mode, &err), &err);
	MH_OK(smux_backend_setxattr(t->mux, &t->ctx, "p", "user.a", "1", 1, 0,
				    &err),
	      &err);
	MH_OK(smux_backend_removexattr(t->mux, &t->ctx, "p", "user.a", &err),
	      &err);
	/* a staged writer's commit (one per replica): noted, then ended */
	MH_OK(smux_backend_writer_open(t->mux, &t->ctx, "w", 0, &w, &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &t->ctx, "staged", 6, 0, &err), &err);
	notes = in_journal(t, "\"key\":\"w\"");
	MH_OK(smux_writer_commit(w, &t->ctx, NULL, NULL, &err), &err);
	assert_int_equal(in_journal(t, "\"key\":\"w\""), notes + 1);
	smux_writer_close(w);
	MH_HOLDS(t->fb, "w", "staged");
	MH_OK(smux_backend_rename(t->mux, &t->ctx, "p", "q", &err), &err);
	MH_OK(smux_backend_link(t->mux, &t->ctx, "q", "r", &err), &err);
	MH_OK(smux_backend_del(t->mux, &t->ctx, "q", &err), &err);
	MH_OK(smux_backend_del(t->mux, &t->ctx, "r", &err), &err);
	/* a failed one too (nothing to rename) */
	MH_ERR(smux_backend_rename(t->mux, &t->ctx, "p", "q", &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(changes_standing(t), 0);
	MH_LACKS(t->fa, "q");
	MH_LACKS(t->fb, "q");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rename_completed, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_delete_completed, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_change_made_nowhere,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_stale_replica_hinted,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_stale_destination_left_out,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_stale_source_left_out,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_completed_before_use,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_link_completed, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_cross_stale, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_shield_origin_decides,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_older_note_of_key_ended,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(
			test_older_overlapping_change_reconciled, mf_setup,
			mf_teardown),
		cmocka_unit_test_setup_teardown(test_link_name_there_before,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_setattr_reconciled,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_symlink_owner_reconciled,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_dir_plain_key_reconciled,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_meta_fix_waits_for_writer,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_reconciled, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_change_without_note,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_create_noted, mf_setup,
						mf_teardown),
		cmocka_unit_test_setup_teardown(test_create_left_out_held,
						mf_setup, mf_teardown),
		cmocka_unit_test_setup_teardown(test_live_changes_end, mf_setup,
						mf_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
