// SPDX-License-Identifier: MIT
/*
 * test_mux_fanout.c - fan-out never builds on a stale replica (issue 9
 * item 2): in mirror and shield, a replica with a pending hint for a key
 * (it missed the key's latest write) is not used to build new content of
 * that key - an in-place writer, a copy or rename from it, a setattr on
 * it - and does not serve reads of it; it keeps its hint, and the repair
 * makes it equal to the others. Members: one memory, one file replica,
 * each behind a faulty wrapper.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mux_internal.h"
#include "mux_helpers.h"
#include "smux/file.h"

/* r0 (memory) and r1 (file), faulty wrappers f[0], f[1]. */
struct fx {
	struct smux_backend *inner[2], *f[2], *mux;
	struct mh_clock clk;
	char base[64];
};

static void fx_init(struct fx *x, enum smux_mode mode)
{
	struct smux_mux_opts o = {.mode = mode, .cooldown_ms = 100};
	struct smux_file_opts fo = {.no_fsync = true};
	struct smux_error err;
	char dir[96];

	memset(x, 0, sizeof(*x));
	mh_clock_init(&x->clk, 10000);
	o.clock = &x->clk.clock;
	snprintf(x->base, sizeof(x->base), "/tmp/smux-fanout-XXXXXX");
	assert_non_null(mkdtemp(x->base));
	snprintf(dir, sizeof(dir), "%s/r1", x->base);
	assert_int_equal(mkdir(dir, 0755), 0);
	fo.path = dir;
	x->inner[0] = mh_memory("mem0");
	MH_OK(smux_file_new("file1", &fo, &x->inner[1], &err), &err);
	x->f[0] = mh_faulty("r0", x->inner[0], NULL);
	x->f[1] = mh_faulty("r1", x->inner[1], NULL);
	x->mux = mh_mux("fan", &o, x->f, NULL, 2);
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

/* Replica @i refuses puts (semantic: it stays up, and no replay can
 * repair it meanwhile), or takes them again. */
static void fx_refuse_puts(struct fx *x, int i, bool refuse)
{
	struct smux_faulty_opts o = {
		.semantic_rate = refuse ? 1.0 : 0.0,
		.ops = 1u << SMUX_FAULTY_PUT,
	};

	smux_faulty_set(x->f[i], &o);
}

/* @key is @v0 everywhere, then @v1 everywhere but on replica @stale,
 * which keeps @v0 and a hint. */
static void fx_stale(struct fx *x, int stale, const char *key, const char *v0,
		     const char *v1)
{
	struct smux_error err;

	fx_refuse_puts(x, stale, false);
	MH_OK(mh_put(x->mux, key, v0, &err), &err);
	fx_refuse_puts(x, stale, true);
	MH_OK(mh_put(x->mux, key, v1, &err), &err);
	MH_HOLDS(x->inner[stale], key, v0);
	MH_HOLDS(x->inner[1 - stale], key, v1);
	assert_true(smux_mux_pending_hints(x->mux) >= 1);
}

/* Repairs with puts allowed again; nothing is left pending. A call that
 * failed just before the faults were lifted (the background thread's
 * replay) may still mark a member down: then again, a bounded number of
 * times (no new failure can come). */
static void fx_repair(struct fx *x)
{
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;

	for (int i = 0; i < 2; i++)
		fx_refuse_puts(x, i, false); /* and no other fault */
	smux_ctx_init(&ctx);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&x->clk, atomic_load(&x->clk.now_ms) + 60000);
		smux_mux_check_health(x->mux); /* a member failed is up */
		MH_OK(smux_mux_repair(x->mux, &ctx, NULL, &pending, &err),
		      &err);
	}
	assert_int_equal(pending, 0);
}

/* The reproduction: replicas that missed an overwrite, then
 * edited in place (4 bytes at offset 0) before their replay. */
static void inplace_after_missed(enum smux_mode mode, int stale)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;
	char key[32], buf[64];

	smux_ctx_init(&ctx);
	fx_init(&x, mode);
	for (int k = 0; k < 8; k++) {
		struct smux_writer *w = NULL;
		long n;

		snprintf(key, sizeof(key), "f%d", k);
		fx_stale(&x, stale, key, "v1-old-content", "vvvvNEW-content2");
		fx_refuse_puts(&x, stale, true); /* still no replay */
		MH_OK(smux_backend_writer_open(x.mux, &ctx, key,
					       SMUX_WRITER_INPLACE, &w, &err),
		      &err);
		/* what the writer holds is the latest version */
		assert_int_equal(smux_writer_size(w), 16);
		MH_OK(smux_writer_pwrite(w, &ctx, "EDIT", 4, 0, &err), &err);
		n = smux_writer_pread(w, buf, sizeof(buf), 0, &err);
		assert_int_equal(n, 16);
		assert_memory_equal(buf, "EDITNEW-content2", 16);
		MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
		smux_writer_close(w);
		/* the stale replica was not edited, and keeps its hint */
		assert_true(smux_mux_pending_hints(x.mux) >= 1);
	}
	fx_repair(&x);
	for (int k = 0; k < 8; k++) {
		snprintf(key, sizeof(key), "f%d", k);
		MH_HOLDS(x.inner[0], key, "EDITNEW-content2");
		MH_HOLDS(x.inner[1], key, "EDITNEW-content2");
	}
	fx_release(&x);
}

static void test_mirror_inplace_stale_memory(void **state)
{
	(void)state;
	inplace_after_missed(SMUX_MODE_MIRROR, 0);
}

static void test_mirror_inplace_stale_file(void **state)
{
	(void)state;
	inplace_after_missed(SMUX_MODE_MIRROR, 1);
}

static void test_shield_inplace_stale_cache(void **state)
{
	(void)state;
	inplace_after_missed(SMUX_MODE_SHIELD, 1);
}

/* A truncating writer builds the whole new content: it reaches the stale
 * replica, and its commit clears that replica's hint. */
static void test_trunc_writer_clears_hint(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	fx_stale(&x, 1, "k", "old", "new");
	fx_refuse_puts(&x, 1, false);
	MH_OK(smux_backend_writer_open(x.mux, &ctx, "k",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_TRUNC,
				       &w, &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "whole", 5, 0, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(x.inner[0], "k", "whole");
	MH_HOLDS(x.inner[1], "k", "whole");
	assert_int_equal(smux_mux_pending_hints(x.mux), 0);
	fx_release(&x);
}

/* A replay runs while an in-place writer of the key is open (its files
 * changed directly): it must leave the key alone - a replay's put would
 * replace file1's file under the writer, whose writes and commit then go
 * to a file no name points at (file1 kept "new", not "whole"). The hint
 * stays until the writer's commit, which makes the whole content there. */
static void test_replay_leaves_inplace_writer(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	fx_stale(&x, 1, "k", "old", "new");
	MH_OK(smux_backend_writer_open(x.mux, &ctx, "k",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_TRUNC,
				       &w, &err),
	      &err);
	fx_refuse_puts(&x, 1, false);
	mh_clock_set(&x.clk, atomic_load(&x.clk.now_ms) + 60000);
	smux_mux_check_health(x.mux);
	/* the replay of file1's hint, while the writer is open */
	MH_OK(smux_mux_repair(x.mux, &ctx, NULL, NULL, &err), &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "whole", 5, 0, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(x.inner[0], "k", "whole");
	MH_HOLDS(x.inner[1], "k", "whole");
	assert_int_equal(smux_mux_pending_hints(x.mux), 0);
	fx_release(&x);
}

/* copy and rename from a key a replica missed: not done there (it would
 * copy the old version); the destination gets a hint instead. */
static void test_copy_rename_stale_source(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	for (int stale = 0; stale < 2; stale++) {
		fx_init(&x, SMUX_MODE_MIRROR);
		fx_stale(&x, stale, "src", "old", "new");
		MH_OK(smux_backend_copy(x.mux, &ctx, "src", "copy", &err),
		      &err);
		MH_OK(smux_backend_rename(x.mux, &ctx, "src", "moved", &err),
		      &err);
		fx_repair(&x);
		for (int i = 0; i < 2; i++) {
			MH_HOLDS(x.inner[i], "copy", "new");
			MH_HOLDS(x.inner[i], "moved", "new");
			MH_LACKS(x.inner[i], "src");
		}
		fx_release(&x);
	}
}

/* A setattr edits the object where it is: not on a replica that missed
 * its latest content (that replica keeps its hint). */
static void test_setattr_stale(void **state)
{
	struct smux_setattr a = {.flags = SMUX_SET_MODE, .mode = 0600};
	struct smux_faulty_opts refuse_get = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	/* r0 refuses to be read from before r1 misses a write: no replay of
	 * the background thread can copy the fresh version (one that read
	 * it before a later refusal put it on r1 once r1 took puts again:
	 * no hint was left, a local CI of d547f8d under load) */
	smux_faulty_set(x.f[0], &refuse_get);
	fx_stale(&x, 1, "k", "old", "new");
	/* r1 takes puts (and setattrs: the same faulty op) again, but no
	 * replay can fix it meanwhile */
	fx_refuse_puts(&x, 1, false);
	MH_OK(smux_backend_setattr(x.mux, &ctx, "k", &a, &err), &err);
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	fx_repair(&x);
	for (int i = 0; i < 2; i++) {
		MH_HOLDS(x.inner[i], "k", "new");
		MH_OK(smux_backend_head(x.inner[i], &ctx, "k", &info, &err),
		      &err);
		assert_int_equal(info.mode & 0777, 0600);
	}
	fx_release(&x);
}

/* Reads never come from a replica that missed the key's latest write:
 * when the fresh one fails, the read fails (unavailable), never the old
 * version. Mirror (get, reader) and shield (a cache replica behind a
 * failing origin). */
static void test_reads_never_stale(void **state)
{
	enum smux_mode modes[2] = {SMUX_MODE_MIRROR, SMUX_MODE_SHIELD};
	struct smux_reader *r = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;
	char *got;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	for (int m = 0; m < 2; m++) {
		fx_init(&x, modes[m]);
		fx_stale(&x, 1, "k", "old", "new");
		mh_fail(x.f[0], true);
		got = mh_get(x.mux, "k", &rc, &err);
		if (got)
			print_error("mode %d read \"%s\"\n", m, got);
		assert_null(got);
		assert_true(rc < 0);
		rc = smux_backend_reader_open(x.mux, &ctx, "k", &r, &err);
		assert_true(rc < 0);
		assert_null(r);
		/* other keys are served by r1 */
		mh_fail(x.f[0], false);
		fx_repair(&x);
		mh_fail(x.f[0], true);
		got = mh_get(x.mux, "k", &rc, &err);
		MH_OK(rc, &err);
		assert_string_equal(got, "new");
		free(got);
		fx_release(&x);
	}
}

/* ---- drain and remove with open writers (issue 9 item 4) ---- */

struct smux_mux;
/* mux_fanout.c's test hook: runs once a member took a write, before the
 * mux checks that member is still in the view */
extern void (*smux__fanout_hook_acked)(struct smux_mux *mux, const char *key);

static struct smux_backend *hook_mux;
static const char *hook_remove; /* the member the hook removes, once */

static void remove_on_ack(struct smux_mux *mux, const char *key)
{
	struct smux_error err;
	struct smux_ctx ctx;
	const char *name = hook_remove;

	(void)mux;
	(void)key;
	if (!name)
		return;
	hook_remove = NULL;
	smux_ctx_init(&ctx);
	MH_OK(smux_mux_remove(hook_mux, name, &ctx, &err), &err);
}

static void hook_arm(struct smux_backend *mux, const char *name)
{
	hook_mux = mux;
	hook_remove = name;
	smux__fanout_hook_acked = remove_on_ack;
}

static void hook_disarm(void)
{
	smux__fanout_hook_acked = NULL;
	hook_remove = NULL;
}

/* Failover: the member that took a put is removed before the put is
 * acknowledged: the write lives on no member, so it is not acknowledged
 * (it was: then lost, the remaining member never had it). */
static void test_failover_acked_member_removed(void **state)
{
	struct smux_error err;
	struct fx x;
	int rc;

	(void)state;
	fx_init(&x, SMUX_MODE_FAILOVER);
	hook_arm(x.mux, "r0");
	rc = mh_put(x.mux, "k", "v", &err);
	hook_disarm();
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	MH_LACKS(x.inner[1], "k");
	fx_release(&x);
}

/* Mirror: the only replica that took a put (the other failing) is
 * removed before the put is acknowledged: not acknowledged. */
static void test_mirror_acked_replica_removed(void **state)
{
	struct smux_error err;
	struct fx x;
	int rc;

	(void)state;
	fx_init(&x, SMUX_MODE_MIRROR);
	mh_fail(x.f[0], true);
	hook_arm(x.mux, "r1");
	rc = mh_put(x.mux, "k", "v", &err);
	hook_disarm();
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	fx_release(&x);
}

/* Failover: a file open on r0 (its writer between two writes) while r0 is
 * removed: the next write does not go to r0 any more; the writer moves
 * to r1 with what it holds, and the commit is acknowledged there. */
static void test_failover_writer_moves_off_removed(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_FAILOVER);
	MH_OK(smux_backend_writer_open(x.mux, &ctx, "k", SMUX_WRITER_TRUNC, &w,
				       &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "one", 3, 0, &err), &err);
	/* between two writes: no call in flight, the remove completes */
	MH_OK(smux_mux_remove(x.mux, "r0", &ctx, &err), &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "two", 3, 3, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(x.mux, "k", "onetwo");
	MH_HOLDS(x.inner[1], "k", "onetwo");
	fx_release(&x);
}

/* Mirror: the writer's only live replica (the other failed at open) is
 * removed between two writes: what follows is not acknowledged on the
 * removed replica alone. */
static void test_mirror_writer_last_replica_removed(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	mh_fail(x.f[0], true);
	MH_OK(smux_backend_writer_open(x.mux, &ctx, "k", SMUX_WRITER_TRUNC, &w,
				       &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "one", 3, 0, &err), &err);
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	rc = smux_writer_pwrite(w, &ctx, "two", 3, 3, &err);
	if (rc == 0)
		rc = smux_writer_commit(w, &ctx, NULL, NULL, &err);
	assert_true(rc < 0);
	smux_writer_close(w);
	fx_release(&x);
}

/* A removed replica's hints are kept: added back under the same name, it
 * is repaired before it serves the keys it missed (a repair while it was
 * out dropped them, and it served its old version for good). */
static void test_remove_add_keeps_hints(void **state)
{
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	fx_stale(&x, 1, "k", "old", "new");
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	MH_OK(smux_mux_repair(x.mux, &ctx, NULL, &pending, &err), &err);
	/* r0 fails (so nothing can resync r1 yet): the only replica left
	 * must not serve "old" */
	mh_fail(x.f[0], true);
	back.backend = x.f[1];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	assert_null(mh_get(x.mux, "k", NULL, &err));
	mh_fail(x.f[0], false);
	fx_repair(&x);
	MH_HOLDS(x.inner[1], "k", "new");
	fx_release(&x);
}

/* A drain of member @name (NULL: "r1") in a thread of its own. */
struct drain_arg {
	struct smux_backend *mux;
	const char *name;
	atomic_bool done;
	int rc;
};

static void *drain_main(void *arg)
{
	struct drain_arg *d = arg;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	d->rc = smux_mux_drain(d->mux, d->name ? d->name : "r1", &ctx, &err);
	atomic_store(&d->done, true);
	return NULL;
}

/* A pwrite of @s (NULL: "two") at @off (0: 3) in a thread of its own. */
struct write_arg {
	struct smux_writer *w;
	const char *s;
	uint64_t off;
	int rc;
};

static void *write_main(void *arg)
{
	struct write_arg *a = arg;
	const char *s = a->s ? a->s : "two";
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	a->rc = smux_writer_pwrite(a->w, &ctx, s, strlen(s),
				   a->off ? a->off : 3, &err);
	return NULL;
}

static enum smux_status member_status(struct smux_backend *mux, unsigned i)
{
	struct smux_mux_stats *st = smux_mux_stats(mux);
	enum smux_status s;

	assert_non_null(st);
	s = st->backends[i].status;
	smux_mux_stats_free(st);
	return s;
}

/* A drain while a writer's call is in flight on the member waits for that
 * call; the writer's next call does not go to the drained member (it
 * drops out, hinted), and the repair after the undrain makes it equal. */
static void test_drain_waits_for_writer_call(void **state)
{
	struct smux_faulty_opts hang = {
		.hang_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct drain_arg d = {0};
	struct write_arg wa = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	pthread_t dt, wt;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	MH_OK(smux_backend_writer_open(x.mux, &ctx, "k", SMUX_WRITER_TRUNC,
				       &wa.w, &err),
	      &err);
	MH_OK(smux_writer_pwrite(wa.w, &ctx, "one", 3, 0, &err), &err);
	/* the second write stays in flight on r1 */
	smux_faulty_set(x.f[1], &hang);
	assert_int_equal(pthread_create(&wt, NULL, write_main, &wa), 0);
	while (smux_faulty_hanging(x.f[1]) == 0)
		usleep(1000);
	d.mux = x.mux;
	atomic_init(&d.done, false);
	assert_int_equal(pthread_create(&dt, NULL, drain_main, &d), 0);
	while (member_status(x.mux, 1) != SMUX_STATUS_DRAINING)
		usleep(1000);
	/* a write is in flight on r1: the drain cannot be over */
	assert_false(atomic_load(&d.done));
	smux_faulty_release_hangs(x.f[1]);
	pthread_join(wt, NULL);
	pthread_join(dt, NULL);
	MH_OK(wa.rc, NULL);
	MH_OK(d.rc, NULL);
	/* drained: the next write and the commit leave r1 out */
	MH_OK(smux_writer_pwrite(wa.w, &ctx, "three", 5, 6, &err), &err);
	MH_OK(smux_writer_commit(wa.w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(wa.w);
	MH_HOLDS(x.inner[0], "k", "onetwothree");
	MH_LACKS(x.inner[1], "k");
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	smux_faulty_set(x.f[1], &(struct smux_faulty_opts){0});
	MH_OK(smux_mux_undrain(x.mux, "r1", &err), &err);
	fx_repair(&x);
	MH_HOLDS(x.inner[1], "k", "onetwothree");
	fx_release(&x);
}

/*
 * An in-place writer of a mirror of two file replicas: r0 drained (the
 * writer drops it), undrained, and taken back by the writer's next write
 * (its file made a copy of r1's: rejoin_drained). A drain of r0 while
 * that copy is under way waits for it, as for a user's call: the copy's
 * calls were not counted in flight, the drain was over at once, and the
 * copy went on writing the replica just drained.
 */
static void test_drain_waits_for_rejoin_copy(void **state)
{
	struct smux_faulty_opts hang = {
		.hang_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR, .cooldown_ms = 100};
	struct smux_file_opts fo = {.no_fsync = true};
	struct smux_backend *inner[2], *f[2], *mux;
	struct drain_arg d = {.name = "r0"};
	struct write_arg wa = {.s = "three", .off = 6};
	struct smux_error err;
	struct smux_ctx ctx;
	char base[64], dir[96], name[16];
	pthread_t dt, wt;

	(void)state;
	smux_ctx_init(&ctx);
	snprintf(base, sizeof(base), "/tmp/smux-rejoin-XXXXXX");
	assert_non_null(mkdtemp(base));
	for (int i = 0; i < 2; i++) {
		snprintf(dir, sizeof(dir), "%s/r%d", base, i);
		assert_int_equal(mkdir(dir, 0755), 0);
		fo.path = dir;
		snprintf(name, sizeof(name), "file%d", i);
		MH_OK(smux_file_new(name, &fo, &inner[i], &err), &err);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("fan", &o, f, NULL, 2);
	MH_OK(smux_backend_writer_open(mux, &ctx, "k",
				       SMUX_WRITER_INPLACE | SMUX_WRITER_CREATE,
				       &wa.w, &err),
	      &err);
	MH_OK(smux_writer_pwrite(wa.w, &ctx, "one", 3, 0, &err), &err);
	MH_OK(smux_mux_drain(mux, "r0", &ctx, &err), &err);
	MH_OK(smux_writer_pwrite(wa.w, &ctx, "two", 3, 3, &err), &err);
	MH_OK(smux_mux_undrain(mux, "r0", &err), &err);
	/* the next write takes r0 back: its copy hangs on r0 */
	smux_faulty_set(f[0], &hang);
	assert_int_equal(pthread_create(&wt, NULL, write_main, &wa), 0);
	while (smux_faulty_hanging(f[0]) == 0)
		usleep(1000);
	d.mux = mux;
	atomic_init(&d.done, false);
	assert_int_equal(pthread_create(&dt, NULL, drain_main, &d), 0);
	while (member_status(mux, 0) != SMUX_STATUS_DRAINING)
		usleep(1000);
	usleep(50 * 1000);
	/* the copy is in flight on r0: the drain cannot be over */
	assert_false(atomic_load(&d.done));
	smux_faulty_release_hangs(f[0]);
	pthread_join(wt, NULL);
	pthread_join(dt, NULL);
	MH_OK(wa.rc, NULL);
	MH_OK(d.rc, NULL);
	MH_OK(smux_writer_commit(wa.w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(wa.w);
	MH_HOLDS(inner[1], "k", "onetwothree");
	MH_HOLDS(mux, "k", "onetwothree");
	smux_backend_unref(mux);
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
	mh_rm_rf(base);
}

/* A member removed, written around, and added back: it is stale for
 * every key until its resync (it missed writes that left it no hint),
 * and the resync makes it equal: overwritten, new and deleted keys. */
static void test_rejoin_resyncs(void **state)
{
	struct smux_put_opts old_mtime = {.mtime_ns =
						  1000000000LL * 1000000000};
	struct smux_mux_member back = {0};
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	MH_OK(mh_put(x.mux, "k", "v1", &err), &err);
	MH_OK(mh_put(x.mux, "gone", "g", &err), &err);
	MH_OK(mh_put(x.mux, "same", "s", &err), &err);
	MH_OK(mh_put(x.mux, "old", "o1", &err), &err);
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	MH_OK(mh_put(x.mux, "k", "v2", &err), &err);
	MH_OK(mh_put(x.mux, "sub/new", "n", &err), &err);
	MH_OK(smux_backend_del(x.mux, &ctx, "gone", &err), &err);
	/* same size, and an mtime older than r1's version (cp -p does it):
	 * still a newer version */
	smux_source_buf(&src, "o2", 2);
	MH_OK(smux_backend_put(x.mux, &ctx, "old", &src, &old_mtime, NULL,
			       &err),
	      &err);
	/* r0 fails (so nothing can resync r1 yet): r1 must not serve what
	 * it may have missed */
	mh_fail(x.f[0], true);
	back.backend = x.f[1];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	assert_null(mh_get(x.mux, "k", NULL, &err));
	assert_null(mh_get(x.mux, "gone", NULL, &err));
	mh_fail(x.f[0], false);
	fx_repair(&x);
	MH_HOLDS(x.inner[1], "k", "v2");
	MH_HOLDS(x.inner[1], "sub/new", "n");
	MH_HOLDS(x.inner[1], "same", "s");
	MH_HOLDS(x.inner[1], "old", "o2");
	MH_LACKS(x.inner[1], "gone");
	/* a full member again */
	mh_fail(x.f[0], true);
	MH_HOLDS(x.mux, "k", "v2");
	fx_release(&x);
}

/*
 * Mirror: a delete taken by r1 alone (r0 missed it: a delete hint), then
 * r1 removed and added back. Its resync must keep r1's absence of the key
 * (the latest state: r0's replay copies it) instead of hinting r1 too:
 * with both replicas hinted no replay can run and the key stays
 * unavailable for good (the storm's mirror failure with a remove, e.g.
 * seed 1796174322341: two delete hints and the rejoined member's put
 * hint).
 */
static void test_rejoin_keeps_delete(void **state)
{
	struct smux_faulty_opts del_down = {
		.error_rate = 1,
		.ops = 1u << SMUX_FAULTY_DEL,
	};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	smux_faulty_set(x.f[0], &del_down);
	MH_OK(smux_backend_del(x.mux, &ctx, "k", &err), &err); /* r1 only */
	MH_HOLDS(x.inner[0], "k", "v0");
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	back.backend = x.f[1];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	fx_repair(&x);
	MH_LACKS(x.inner[0], "k");
	MH_LACKS(x.inner[1], "k");
	assert_null(mh_get(x.mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	fx_release(&x);
}

static int count_key(void *arg, const struct smux_list_entry *e)
{
	unsigned *n = arg;

	print_message("  listed %s\n", e->key);
	(*n)++;
	return 0;
}

/* Failover: a member added back answers no listing before its resync (it
 * would list a key deleted while it was out), and its rejoin hint is no
 * listing entry. */
static void test_rejoin_failover_listing(void **state)
{
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned n = 0;
	struct fx x;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_FAILOVER);
	MH_OK(mh_put(x.mux, "a", "x", &err), &err);
	MH_OK(smux_backend_put_buf(x.inner[1], &ctx, "a", "x", 1, &err), &err);
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	MH_OK(smux_backend_del(x.mux, &ctx, "a", &err), &err);
	mh_fail(x.f[0], true);
	back.backend = x.f[1];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	rc = smux_backend_list(x.mux, &ctx, "", "/", count_key, &n, &err);
	assert_true(rc < 0);
	assert_int_equal(n, 0);
	mh_fail(x.f[0], false);
	fx_repair(&x);
	MH_LACKS(x.inner[1], "a");
	fx_release(&x);
}

/* ---- part M: writes that missed a member leave it a hint ---- */

static const char *hook_undrain; /* the member the hook undrains, once */

static void undrain_on_ack(struct smux_mux *mux, const char *key)
{
	struct smux_error err;
	const char *name = hook_undrain;

	(void)mux;
	(void)key;
	if (!name)
		return;
	hook_undrain = NULL;
	MH_OK(smux_mux_undrain(hook_mux, name, &err), &err);
}

/* r1 missed "k" ("new"): no read of k is served by it while r0 fails
 * (it has a hint), and the repair gives it "new". r1 refuses puts until
 * then (fx_refuse_puts before the write), so that the background replay
 * cannot give it "new" before the read (then it may serve it). */
static void expect_missed(struct fx *x)
{
	struct smux_error err;
	char *got;
	int rc;

	MH_LACKS(x->inner[1], "k");
	assert_int_equal(smux_mux_pending_hints(x->mux), 1);
	mh_fail(x->f[0], true);
	got = mh_get(x->mux, "k", &rc, &err);
	if (got)
		print_error("r1 served \"%s\" for k\n", got);
	assert_null(got);
	mh_fail(x->f[0], false);
	fx_refuse_puts(x, 1, false);
	fx_repair(x);
	MH_HOLDS(x->inner[1], "k", "new");
}

/* A put that left out r1 (draining when it started) while r1 is undrained
 * before the put is acknowledged: r1 missed it and gets a hint (it got
 * none: the hint went only to members still draining at the end, and the
 * storm read an old version from the undrained replica). */
static void test_put_undrained_midway(void **state)
{
	enum smux_mode modes[2] = {SMUX_MODE_MIRROR, SMUX_MODE_SHIELD};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	for (int m = 0; m < 2; m++) {
		fx_init(&x, modes[m]);
		fx_refuse_puts(&x, 1, true); /* until expect_missed's read */
		MH_OK(smux_mux_drain(x.mux, "r1", &ctx, &err), &err);
		hook_mux = x.mux;
		hook_undrain = "r1";
		smux__fanout_hook_acked = undrain_on_ack;
		MH_OK(mh_put(x.mux, "k", "new", &err), &err);
		hook_disarm();
		assert_null(hook_undrain); /* the hook ran */
		expect_missed(&x);
		fx_release(&x);
	}
}

/* The same for a writer: opened while r1 was draining, committed after
 * the undrain. */
static void test_writer_undrained_midway(void **state)
{
	enum smux_mode modes[2] = {SMUX_MODE_MIRROR, SMUX_MODE_SHIELD};
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	for (int m = 0; m < 2; m++) {
		fx_init(&x, modes[m]);
		fx_refuse_puts(&x, 1, true); /* until expect_missed's read */
		MH_OK(smux_mux_drain(x.mux, "r1", &ctx, &err), &err);
		MH_OK(smux_backend_writer_open(x.mux, &ctx, "k",
					       SMUX_WRITER_TRUNC, &w, &err),
		      &err);
		MH_OK(smux_writer_pwrite(w, &ctx, "new", 3, 0, &err), &err);
		MH_OK(smux_mux_undrain(x.mux, "r1", &err), &err);
		MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
		smux_writer_close(w);
		expect_missed(&x);
		fx_release(&x);
	}
}

/* ---- part M: the rejoin resync and user writes of the same key ---- */

/* A side thread's operation, and whether it is over or waits at the
 * fence (what the hook that started it waits for). */
struct side {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool over, fenced;
	pthread_t t;
	bool started;
	struct smux_backend *mux;
	const char *key, *value;
	int rc;
};

static struct side side = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void side_flag(bool *flag)
{
	pthread_mutex_lock(&side.lock);
	*flag = true;
	pthread_cond_broadcast(&side.cond);
	pthread_mutex_unlock(&side.lock);
}

/* Starts @fn on a side thread and waits until it is over or waits at
 * the fence. */
static void side_run(void *(*fn)(void *))
{
	/* fenced is not reset here: the mux's background thread may have
	 * reached the fence already (side_arm_fence reset it) */
	pthread_mutex_lock(&side.lock);
	side.over = false;
	pthread_mutex_unlock(&side.lock);
	side.started = true;
	assert_int_equal(pthread_create(&side.t, NULL, fn, &side), 0);
	pthread_mutex_lock(&side.lock);
	while (!side.over && !side.fenced)
		pthread_cond_wait(&side.cond, &side.lock);
	pthread_mutex_unlock(&side.lock);
}

static void side_join(void)
{
	if (side.started)
		pthread_join(side.t, NULL);
	side.started = false;
}

static void side_fenced(struct smux_mux *mux, const char *key)
{
	(void)mux;
	(void)key;
	side_flag(&side.fenced);
}

/* Arms side_fenced: from now on a replay - the side thread's, or the
 * mux's background thread's - that waits at the fence is seen. */
static void side_arm_fence(void)
{
	pthread_mutex_lock(&side.lock);
	side.fenced = false;
	pthread_mutex_unlock(&side.lock);
	atomic_store(&smux__replay_wait_hook, side_fenced);
}

static void *side_put(void *arg)
{
	struct side *sd = arg;
	struct smux_error err;

	sd->rc = mh_put(sd->mux, sd->key, sd->value, &err);
	side_flag(&sd->over);
	return NULL;
}

static void *side_repair(void *arg)
{
	struct side *sd = arg;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	sd->rc = smux_mux_repair(sd->mux, &ctx, NULL, NULL, &err);
	side_flag(&sd->over);
	return NULL;
}

/* The resync's copy, between its get and its put: a user put of the key */
static void put_during_copy(struct smux_mux *mux, const char *key)
{
	(void)mux;
	(void)key; /* "k": the resync's own copy is freed after it */
	smux__rejoin_hook_copy = NULL;
	side_run(side_put);
}

/* A member added back is resynced while a user put of a key lands on it:
 * the put wins (the resync's older copy landed on top of it between the
 * resync's check and its put, and its rejoin hint was done: the replica
 * kept the old version for good). */
static void test_rejoin_copy_vs_put(void **state)
{
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	MH_OK(mh_put(x.mux, "k", "old", &err), &err);
	back.backend = x.f[1];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	side.mux = x.mux;
	side.key = "k";
	side.value = "new";
	atomic_store(&smux__fence_wait_hook, side_fenced);
	smux__rejoin_hook_copy = put_during_copy;
	fx_repair(&x);
	side_join();
	smux__rejoin_hook_copy = NULL;
	atomic_store(&smux__fence_wait_hook, NULL);
	MH_OK(side.rc, NULL);
	MH_HOLDS(x.inner[0], "k", "new");
	MH_HOLDS(x.inner[1], "k", "new");
	fx_release(&x);
}

/* Before a put is acknowledged (r0 refused it, r1 took it), a repair
 * resyncs r1 from r0 */
static void repair_on_ack(struct smux_mux *mux, const char *key)
{
	(void)mux;
	(void)key;
	smux__fanout_hook_acked = NULL;
	side_run(side_repair);
}

/* Three memory replicas; r1 removed and added back. A put reaches r1 and
 * r2 but not r0, the resync's source, and the resync runs before r0's
 * hint is recorded: it must not copy r0's old version onto r1 (it did,
 * and r1's rejoin was done: r0's replay could then copy the old version
 * back from r1). */
static void test_rejoin_source_missed_write(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR, .cooldown_ms = 100};
	struct smux_faulty_opts refuse = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	struct smux_backend *inner[3], *f[3], *mux;
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct mh_clock clk;
	unsigned pending = 1;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("fan3", &o, f, NULL, 3);
	MH_OK(mh_put(mux, "k", "old", &err), &err);
	MH_OK(smux_mux_remove(mux, "r1", &ctx, &err), &err);
	back.backend = f[1];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	smux_faulty_set(f[0], &refuse);
	side.mux = mux;
	side_arm_fence();
	smux__fanout_hook_acked = repair_on_ack;
	MH_OK(mh_put(mux, "k", "new", &err), &err);
	side_join();
	hook_disarm();
	atomic_store(&smux__replay_wait_hook, NULL);
	MH_HOLDS(inner[1], "k", "new");
	MH_HOLDS(inner[2], "k", "new");
	smux_faulty_set(f[0], &(struct smux_faulty_opts){0});
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		MH_OK(smux_mux_repair(mux, &ctx, NULL, &pending, &err), &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < 3; i++)
		MH_HOLDS(inner[i], "k", "new");
	smux_backend_unref(mux);
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

static struct smux_backend *wait_mux;

/* The replay of r1's hint for k, right after its check: first the other
 * replay of that repair (r1's rejoin resync, which passes over k: it has
 * a hint of its own) ends. */
static void check_after_rejoin(struct smux_mux *mux, const char *replica,
			       const char *key)
{
	(void)mux;
	if (strcmp(replica, "r1") != 0 || strcmp(key, "k") != 0)
		return;
	atomic_store(&smux__replay_check_hook, NULL);
	for (int i = 0; i < 10000 && smux_mux_pending_hints(wait_mux) > 1; i++)
		usleep(1000);
	assert_int_equal(smux_mux_pending_hints(wait_mux), 1);
}

/* A replica that missed a delete of k is removed, k is put again while it
 * is out (no hint: it is no member), and it is added back: its kept
 * delete hint must not delete the new k (it did: the replay repeated the
 * delete, and the replica lacked k for good while the other held it). */
static void test_readded_delete_hint_outdated(void **state)
{
	enum smux_mode modes[2] = {SMUX_MODE_MIRROR, SMUX_MODE_SHIELD};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	for (int m = 0; m < 2; m++) {
		fx_init(&x, modes[m]);
		MH_OK(mh_put(x.mux, "k", "old", &err), &err);
		mh_fail(x.f[1], true);
		MH_OK(smux_backend_del(x.mux, &ctx, "k", &err), &err);
		mh_fail(x.f[1], false);
		assert_int_equal(smux_mux_pending_hints(x.mux), 1);
		MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
		MH_OK(mh_put(x.mux, "k", "new", &err), &err);
		back.backend = x.f[1];
		/* set before the add: its kick may start the replays */
		wait_mux = x.mux;
		atomic_store(&smux__replay_check_hook, check_after_rejoin);
		MH_OK(smux_mux_add(x.mux, &back, &err), &err);
		fx_repair(&x);
		atomic_store(&smux__replay_check_hook, NULL);
		MH_HOLDS(x.inner[0], "k", "new");
		MH_HOLDS(x.inner[1], "k", "new");
		fx_release(&x);
	}
}

/* A rename while r1 is draining: r1 missed both keys of it, and gets a
 * hint for each (it got one for the destination only, and kept the
 * source for good). */
static void test_rename_while_draining(void **state)
{
	enum smux_mode modes[2] = {SMUX_MODE_MIRROR, SMUX_MODE_SHIELD};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	for (int m = 0; m < 2; m++) {
		fx_init(&x, modes[m]);
		MH_OK(mh_put(x.mux, "k", "v", &err), &err);
		MH_OK(smux_mux_drain(x.mux, "r1", &ctx, &err), &err);
		MH_OK(smux_backend_rename(x.mux, &ctx, "k", "k2", &err), &err);
		assert_int_equal(smux_mux_pending_hints(x.mux), 2);
		MH_OK(smux_mux_undrain(x.mux, "r1", &err), &err);
		fx_repair(&x);
		MH_LACKS(x.inner[0], "k");
		MH_LACKS(x.inner[1], "k");
		MH_HOLDS(x.inner[1], "k2", "v");
		fx_release(&x);
	}
}

/* Shield: the origin r0 missed k's latest write (it was draining) and
 * fails the next write of k, which r1 takes. r1 holds a version as new as
 * any, and r0 is no source to roll r1 back to: r1 gets no hint (it got
 * one: both replicas stale for k, no replay could ever run, and k was
 * unavailable for good). */
static void test_shield_stale_origin_fails_write(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_SHIELD);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_drain(x.mux, "r0", &ctx, &err), &err);
	MH_OK(mh_put(x.mux, "k", "v1", &err), &err);
	fx_refuse_puts(&x, 0, true); /* r0's replay cannot run either */
	MH_OK(smux_mux_undrain(x.mux, "r0", &err), &err);
	assert_true(mh_put(x.mux, "k", "v2", &err) < 0);
	MH_HOLDS(x.inner[1], "k", "v2");
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	fx_repair(&x);
	MH_HOLDS(x.inner[0], "k", "v2");
	MH_HOLDS(x.mux, "k", "v2");
	fx_release(&x);
}

/* Shield: the origin fails a rename that the mirror takes. The rename is
 * not acknowledged and the mirror is rolled back to the origin (source
 * back, destination gone); the origin, which still holds the source,
 * gets no hint to delete it (it got one: both replicas stale for the
 * source, and no replay could ever run). */
static void test_shield_origin_fails_rename(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_SHIELD);
	MH_OK(mh_put(x.mux, "k", "v", &err), &err);
	mh_fail(x.f[0], true);
	assert_true(smux_backend_rename(x.mux, &ctx, "k", "k2", &err) < 0);
	mh_fail(x.f[0], false);
	MH_HOLDS(x.inner[0], "k", "v");
	MH_LACKS(x.inner[1], "k");
	fx_repair(&x);
	MH_HOLDS(x.inner[0], "k", "v");
	MH_HOLDS(x.inner[1], "k", "v");
	MH_LACKS(x.inner[0], "k2");
	MH_LACKS(x.inner[1], "k2");
	fx_release(&x);
}

/* The shield origin fails a put that r1 takes, undrained r2 has a hint
 * for the key: a repair of r2 before the put's rollback hint for r1 is
 * recorded */
static void undrain_and_repair(struct smux_mux *mux, const char *key)
{
	struct smux_error err;

	(void)mux;
	(void)key;
	smux__fanout_hook_acked = NULL;
	MH_OK(smux_mux_undrain(side.mux, "r2", &err), &err);
	side_run(side_repair);
}

/* Shield of three memory replicas: a replay must not copy from a replica
 * a write is still being decided on (it copied r1's version of a put the
 * origin failed onto r2 just before r1 was hinted to be rolled back: r2
 * kept it, no hint left). */
static void test_replay_source_mid_write(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_SHIELD, .cooldown_ms = 100};
	struct smux_backend *inner[3], *f[3], *mux;
	struct smux_error err;
	struct smux_ctx ctx;
	struct mh_clock clk;
	unsigned pending = 1;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("shield3", &o, f, NULL, 3);
	MH_OK(mh_put(mux, "k", "v1", &err), &err);
	MH_OK(smux_mux_drain(mux, "r2", &ctx, &err), &err);
	MH_OK(mh_put(mux, "k", "v2", &err), &err);
	mh_fail(f[0], true);
	side.mux = mux;
	side_arm_fence();
	smux__fanout_hook_acked = undrain_and_repair;
	assert_true(mh_put(mux, "k", "v3", &err) < 0);
	side_join();
	hook_disarm();
	atomic_store(&smux__replay_wait_hook, NULL);
	mh_fail(f[0], false);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		MH_OK(smux_mux_repair(mux, &ctx, NULL, &pending, &err), &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < 3; i++)
		MH_HOLDS(inner[i], "k", "v2");
	smux_backend_unref(mux);
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

/* r1 holds the only latest copy of k (r0 missed it and cannot replay
 * yet) and is removed, then added back: its resync keeps its k, and r0's
 * replay copies it (r1 got a hint too: both replicas stale for k, no
 * replay could ever run, k unavailable for good). */
static void test_rejoin_holds_only_latest(void **state)
{
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_MIRROR);
	fx_stale(&x, 0, "k", "old", "new");
	MH_OK(smux_mux_remove(x.mux, "r1", &ctx, &err), &err);
	back.backend = x.f[1];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	fx_repair(&x);
	MH_HOLDS(x.inner[0], "k", "new");
	MH_HOLDS(x.inner[1], "k", "new");
	fx_release(&x);
}

/* Shield: the origin r0 missed k's latest write and a later write of k
 * fails on every replica: nothing changed, so r1 (which holds the latest
 * write) gets no hint (it got one: both replicas stale for k for good). */
static void test_shield_stale_origin_write_fails_everywhere(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x, SMUX_MODE_SHIELD);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_drain(x.mux, "r0", &ctx, &err), &err);
	MH_OK(mh_put(x.mux, "k", "v1", &err), &err);
	fx_refuse_puts(&x, 0, true);
	MH_OK(smux_mux_undrain(x.mux, "r0", &err), &err);
	mh_fail(x.f[1], true);
	assert_true(mh_put(x.mux, "k", "v2", &err) < 0);
	mh_fail(x.f[1], false);
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	fx_repair(&x);
	MH_HOLDS(x.inner[0], "k", "v1");
	MH_HOLDS(x.inner[1], "k", "v1");
	fx_release(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mirror_inplace_stale_memory),
		cmocka_unit_test(test_mirror_inplace_stale_file),
		cmocka_unit_test(test_shield_inplace_stale_cache),
		cmocka_unit_test(test_trunc_writer_clears_hint),
		cmocka_unit_test(test_replay_leaves_inplace_writer),
		cmocka_unit_test(test_copy_rename_stale_source),
		cmocka_unit_test(test_setattr_stale),
		cmocka_unit_test(test_reads_never_stale),
		cmocka_unit_test(test_failover_acked_member_removed),
		cmocka_unit_test(test_mirror_acked_replica_removed),
		cmocka_unit_test(test_failover_writer_moves_off_removed),
		cmocka_unit_test(test_mirror_writer_last_replica_removed),
		cmocka_unit_test(test_remove_add_keeps_hints),
		cmocka_unit_test(test_drain_waits_for_writer_call),
		cmocka_unit_test(test_drain_waits_for_rejoin_copy),
		cmocka_unit_test(test_rejoin_resyncs),
		cmocka_unit_test(test_rejoin_keeps_delete),
		cmocka_unit_test(test_rejoin_failover_listing),
		cmocka_unit_test(test_put_undrained_midway),
		cmocka_unit_test(test_writer_undrained_midway),
		cmocka_unit_test(test_rejoin_copy_vs_put),
		cmocka_unit_test(test_rejoin_source_missed_write),
		cmocka_unit_test(test_readded_delete_hint_outdated),
		cmocka_unit_test(test_rename_while_draining),
		cmocka_unit_test(test_shield_stale_origin_fails_write),
		cmocka_unit_test(test_shield_origin_fails_rename),
		cmocka_unit_test(test_replay_source_mid_write),
		cmocka_unit_test(test_rejoin_holds_only_latest),
		cmocka_unit_test(
			test_shield_stale_origin_write_fails_everywhere),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
