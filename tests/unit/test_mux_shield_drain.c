// SPDX-License-Identifier: MIT
/*
 * test_mux_shield_drain.c - shield writes while the origin drains (issue
 * 9, the lose-nothing storm's "replicas differ" in shield).
 *
 * A draining member takes no writes: a fan-out leaves it out, and once
 * the write reached some replica it gets a hint (mux_exec.c
 * hint_draining). In shield the origin is the first member of the view;
 * with it draining, the fan-out's first member is a mirror, and the write
 * policy took that mirror for the origin: its failure failed the write
 * and "rolled back" the mirrors that took it - with no hint for the
 * origin, which missed the write. After a delete the storm saw the origin
 * hold the old content and the mirrors none, no hint pending. These tests
 * replay that interleaving: origin r0 draining, mirror r1 failing, mirror
 * r2 taking the write; after the undrain and the repair every replica
 * must hold the write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <time.h>

#include "core/mux_internal.h"
#include "mux_helpers.h"

#define N 3

/* r0 (origin), r1, r2: memory replicas behind faulty wrappers f[]. */
struct fx {
	struct smux_backend *inner[N], *f[N], *mux;
	struct mh_clock clk;
};

static void fx_init(struct fx *x)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_SHIELD,
		.backend_timeout_ms = 250,
		.cooldown_ms = 100,
	};
	char name[16];

	memset(x, 0, sizeof(*x));
	/* a frozen clock: a member that failed stays down until
	 * fx_repair moves it, so no background replay runs meanwhile */
	mh_clock_init(&x->clk, 10000);
	o.clock = &x->clk.clock;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		x->inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		x->f[i] = mh_faulty(name, x->inner[i], NULL);
	}
	x->mux = mh_mux("shield", &o, x->f, NULL, N);
}

static void fx_release(struct fx *x)
{
	smux_backend_unref(x->mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(x->f[i]);
		smux_backend_unref(x->inner[i]);
	}
}

/* Faults lifted, the origin undrained (@undrain): repairs until nothing is pending
 * (bounded: a member marked down is probed once the clock moved). */
static void fx_repair(struct fx *x, bool undrain)
{
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;

	for (int i = 0; i < N; i++)
		mh_fail(x->f[i], false);
	smux_ctx_init(&ctx);
	if (undrain)
		MH_OK(smux_mux_undrain(x->mux, "r0", &err), &err);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&x->clk, atomic_load(&x->clk.now_ms) + 60000);
		smux_mux_check_health(x->mux);
		MH_OK(smux_mux_repair(x->mux, &ctx, NULL, &pending, &err),
		      &err);
	}
	assert_int_equal(pending, 0);
}

static void fx_drain_origin(struct fx *x)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	MH_OK(smux_mux_drain(x->mux, "r0", &ctx, &err), &err);
}

/* The storm's case: r1 missed the latest put of k (a hint pending), then
 * with r0 draining a delete of k fails on r1 and reaches r2. It is
 * acknowledged (r2 took it; r0 and r1 are hinted), and the repair
 * deletes k everywhere. On main the delete failed with r1's error, r1
 * got a delete hint and r0 none: r0 kept "v1" for good. */
static void test_delete_stale_mirror_first(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	mh_fail(x.f[1], true);
	MH_OK(mh_put(x.mux, "k", "v1", &err), &err);
	MH_HOLDS(x.inner[1], "k", "v0");
	assert_int_equal(smux_mux_pending_hints(x.mux), 1);
	fx_drain_origin(&x);
	mh_fail(x.f[1], false); /* r1 is down (cooldown): the call fails */
	rc = smux_backend_del(x.mux, &ctx, "k", &err);
	MH_LACKS(x.inner[2], "k");
	fx_repair(&x, true);
	/* whatever the delete answered, the replicas agree afterwards (the
	 * storm's check); on main r0 kept "v1" with no hint */
	for (int i = 0; i < N; i++)
		MH_LACKS(x.inner[i], "k");
	/* and it was acknowledged: r2 took it, r0 and r1 have hints */
	MH_OK(rc, &err);
	MH_LACKS(x.mux, "k");
	fx_release(&x);
}

/* No hint before: with r0 draining, a put fails on r1 and reaches r2. It
 * is acknowledged, and the repair gives "v1" to r0 and r1 (on main the
 * put failed and r2 was "rolled back" to the draining origin's v0). */
static void test_put_mirror_first_fails(void **state)
{
	struct smux_error err;
	struct fx x;
	char *got;

	(void)state;
	fx_init(&x);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	fx_drain_origin(&x);
	mh_fail(x.f[1], true);
	MH_OK(mh_put(x.mux, "k", "v1", &err), &err);
	/* r0 (draining) and r1 (failed) missed it: not read */
	got = mh_get(x.mux, "k", NULL, &err);
	assert_non_null(got);
	assert_string_equal(got, "v1");
	free(got);
	fx_repair(&x, true);
	for (int i = 0; i < N; i++)
		MH_HOLDS(x.inner[i], "k", "v1");
	fx_release(&x);
}

/* A writer opened while r0 drains: r1 failing drops out of it like any
 * mirror (on main r1 was taken for the origin: the writer failed). */
static void test_writer_mirror_first_fails(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	fx_drain_origin(&x);
	MH_OK(smux_backend_writer_open(x.mux, &ctx, "k", SMUX_WRITER_TRUNC, &w,
				       &err),
	      &err);
	mh_fail(x.f[1], true);
	MH_OK(smux_writer_pwrite(w, &ctx, "v1", 2, 0, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(x.inner[2], "k", "v1");
	fx_repair(&x, true);
	for (int i = 0; i < N; i++)
		MH_HOLDS(x.inner[i], "k", "v1");
	fx_release(&x);
}

/* With the origin up, it still decides: it fails, the write fails, and
 * the mirror that took it is rolled back to the origin's version. */
static void test_origin_fails_rolls_back(void **state)
{
	struct smux_error err;
	struct fx x;
	int rc;

	(void)state;
	fx_init(&x);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	mh_fail(x.f[0], true);
	rc = mh_put(x.mux, "k", "v1", &err);
	assert_true(rc < 0);
	fx_repair(&x, false);
	for (int i = 0; i < N; i++)
		MH_HOLDS(x.inner[i], "k", "v0");
	fx_release(&x);
}

/* @x with only the test's repairs, k "v0" everywhere, then "v1" on r1
 * and r2 while r0 (the origin) is drained: r0 has a hint for k. */
static void fx_origin_missed(struct fx *x)
{
	struct smux_error err;

	fx_init(x);
	smux__mux_bg_stop(smux__mux_of(x->mux));
	MH_OK(mh_put(x->mux, "k", "v0", &err), &err);
	fx_drain_origin(x);
	MH_OK(mh_put(x->mux, "k", "v1", &err), &err);
}

/* A mirror drains while the origin - stale for k - fails a put the other
 * mirror takes: the write stays on that mirror (the origin is no source
 * to roll back to), so the draining mirror, which missed it, needs a
 * hint as after any write. On main it got none and kept v1 for good. */
static void test_stale_origin_fails_mirror_draining(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_origin_missed(&x); /* r0 stale for k */
	/* r2 drains (before r0's undrain: a drain replays the hints of the
	 * members up, which would make r0 current); r0 fails v2, r1 takes
	 * it */
	MH_OK(smux_mux_drain(x.mux, "r2", &ctx, &err), &err);
	MH_OK(smux_mux_undrain(x.mux, "r0", &err), &err);
	mh_fail(x.f[0], true);
	assert_true(mh_put(x.mux, "k", "v2", &err) < 0); /* unknown */
	MH_HOLDS(x.inner[1], "k", "v2");
	MH_HOLDS(x.inner[2], "k", "v1");
	MH_OK(smux_mux_undrain(x.mux, "r2", &err), &err);
	fx_repair(&x, false);
	/* the replicas agree, on the newest content a replica took */
	for (int i = 0; i < N; i++)
		MH_HOLDS(x.inner[i], "k", "v2");
	fx_release(&x);
}

/* A rolling drain without a repair between its steps: r0 missed v1 while
 * drained; right after its undrain r1 drains. The drain replays the
 * hints of the members up first, so r0 holds v1 before r1 leaves, and a
 * read of k is served (s44-t1: opens of such files failed with EIO
 * while the next member was drained). */
static void test_drain_replays_members_up_first(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_origin_missed(&x); /* repairs: only the drain's */
	MH_HOLDS(x.inner[0], "k", "v0");
	MH_OK(smux_mux_undrain(x.mux, "r0", &err), &err);
	MH_OK(smux_mux_drain(x.mux, "r1", &ctx, &err), &err);
	MH_HOLDS(x.inner[0], "k", "v1");
	MH_OK(smux_mux_undrain(x.mux, "r1", &err), &err);
	fx_release(&x);
}

static unsigned zombie_ends;
static pthread_mutex_t zlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t zcond = PTHREAD_COND_INITIALIZER;

static void on_zombie_end(struct smux_mux *m, const char *replica,
			  const char *key)
{
	(void)m;
	(void)replica;
	(void)key;
	pthread_mutex_lock(&zlock);
	zombie_ends++;
	pthread_cond_broadcast(&zcond);
	pthread_mutex_unlock(&zlock);
}

/*
 * A rename of k the origin fails: its call hangs past the deadline (a
 * zombie: r0 is stale for k from then on, no source to roll back to),
 * r1 fails it, r2 takes it (k gone there). r0 and r1 missed what r2 did
 * to k - a delete. Then r2 is removed and added back without k while
 * the rename may still land on r0: its resync must keep that absence
 * (every peer missed the delete), and the repair converge. On main r0 and r1 got put hints for k, r2 one too at
 * its resync: every replica stale for k, the repair never converged (the
 * storm's shield run with two removes).
 */
static void test_rename_origin_zombie_mirror_rejoins(void **state)
{
	struct smux_faulty_opts hang = {
		.hang_rate = 1,
		.hang_ignores_cancel = true,
		.hang_lands = true,
		.ops = 1u << SMUX_FAULTY_COPY, /* rename */
	};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct timespec until;
	unsigned pending = 1;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x);
	smux__mux_bg_stop(smux__mux_of(x.mux));
	zombie_ends = 0;
	smux__zombie_hook_end = on_zombie_end;
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err);
	smux_faulty_set(x.f[0], &hang);
	mh_fail(x.f[1], true);
	assert_true(smux_backend_rename(x.mux, &ctx, "k", "k2", &err) < 0);
	MH_LACKS(x.inner[2], "k");
	smux_faulty_set(x.f[0], NULL);
	mh_fail(x.f[1], false);
	/* r2 out and back, rejoining without k, while the rename may
	 * still land on r0: its resync runs now */
	MH_OK(smux_mux_remove(x.mux, "r2", &ctx, &err), &err);
	back.backend = x.f[2];
	MH_OK(smux_mux_add(x.mux, &back, &err), &err);
	mh_clock_set(&x.clk, atomic_load(&x.clk.now_ms) + 60000);
	smux_mux_check_health(x.mux);
	smux_mux_repair(x.mux, &ctx, NULL, NULL, &err);
	smux_faulty_release_hangs(x.f[0]); /* the rename lands on r0 */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&zlock);
	while (zombie_ends == 0 &&
	       pthread_cond_timedwait(&zcond, &zlock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&zlock);
	assert_true(zombie_ends >= 1);
	smux__zombie_hook_end = NULL;
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&x.clk, atomic_load(&x.clk.now_ms) + 60000);
		smux_mux_check_health(x.mux);
		smux_mux_repair(x.mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < N; i++)
		MH_LACKS(x.inner[i], "k");
	fx_release(&x);
}

/* The write's hook: r2 is added back, and the repair (its resync) runs
 * to its end, before the write records its hints. */
static struct fx *hook_x;
static bool hook_armed;

static void add_r2_and_repair(struct smux_mux *m, const char *key)
{
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;

	(void)m;
	if (!hook_armed || strcmp(key, "k") != 0)
		return;
	hook_armed = false;
	smux_ctx_init(&ctx);
	back.backend = hook_x->f[2];
	MH_OK(smux_mux_add(hook_x->mux, &back, &err), &err);
	/* no key of the write in this resync: nothing waits at its fence */
	smux_mux_repair(hook_x->mux, &ctx, NULL, NULL, &err);
}

/*
 * Shield: k is v0 on r0 and r1; r2 is out (it never had k). A delete of
 * k fails on the origin and reaches r1: not done, r1 is hinted to get the
 * origin's v0 back. Meanwhile r2 is added back and resyncs - from r1,
 * which lacks k now, before r1's hint shows: r2 keeps no k. r2 must get
 * a hint too (the write was not sent to it), and the repair give it v0.
 * On main it got none: r2 lacked k for good, "replicas differ" (the
 * storm's shield run under ASan).
 */
static void test_rollback_member_added_meanwhile(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct fx x;

	(void)state;
	smux_ctx_init(&ctx);
	fx_init(&x);
	smux__mux_bg_stop(smux__mux_of(x.mux));
	MH_OK(smux_mux_remove(x.mux, "r2", &ctx, &err), &err);
	MH_OK(mh_put(x.mux, "k", "v0", &err), &err); /* r0, r1 */
	mh_fail(x.f[0], true);
	hook_x = &x;
	hook_armed = true;
	smux__fanout_hook_acked = add_r2_and_repair;
	assert_true(smux_backend_del(x.mux, &ctx, "k", &err) < 0);
	smux__fanout_hook_acked = NULL;
	assert_false(hook_armed); /* the hook ran */
	MH_LACKS(x.inner[1], "k");
	MH_LACKS(x.inner[2], "k");
	fx_repair(&x, false);
	for (int i = 0; i < N; i++)
		MH_HOLDS(x.inner[i], "k", "v0");
	fx_release(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delete_stale_mirror_first),
		cmocka_unit_test(test_put_mirror_first_fails),
		cmocka_unit_test(test_writer_mirror_first_fails),
		cmocka_unit_test(test_origin_fails_rolls_back),
		cmocka_unit_test(test_stale_origin_fails_mirror_draining),
		cmocka_unit_test(test_drain_replays_members_up_first),
		cmocka_unit_test(test_rename_origin_zombie_mirror_rejoins),
		cmocka_unit_test(test_rollback_member_added_meanwhile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
