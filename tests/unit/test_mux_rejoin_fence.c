// SPDX-License-Identifier: MIT
/*
 * test_mux_rejoin_fence.c - a member's rejoin resync and a user write of
 * one key (issue 9, the lose-nothing storm's mirror run whose repair
 * never converged: "no backend with the latest write of k6").
 *
 * A rejoin resync first gives the rejoining member a hint for every key
 * its source missed the latest write of, when a peer has that write
 * (mux_rejoin.c hint_source_stale). A write that reached only the
 * rejoining member records the other replicas' hints after its calls; a
 * resync that looked at the peers in between saw one not hinted yet,
 * took it for the holder of the latest write, and hinted the rejoining
 * member - the only replica holding it. Every replica then had a hint
 * for the key and no replay could run. The test stops the write there
 * (smux__fanout_hook_acked) and runs the repair beside it.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "core/mux_internal.h"
#include "mux_helpers.h"

#define N 3

/* r0, r1, r2: memory replicas behind faulty wrappers f[]. */
static struct smux_backend *inner[N], *f[N], *mux;
static struct mh_clock clk;

/* What the hooks see, under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool armed;     /* the write's hook starts the repair once */
static bool r1_hinted; /* r1 got a hint for k meanwhile (the bug) */
static unsigned waits; /* resyncs waiting at k's fence */
static bool side_over; /* the side repair returned */
static pthread_t side;

static void on_hint(bool pending, const char *replica, const char *key,
		    int kind, uint64_t id)
{
	(void)kind;
	(void)id;
	if (!pending || strcmp(replica, "r1") != 0 || strcmp(key, "k") != 0)
		return;
	pthread_mutex_lock(&lock);
	r1_hinted = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_replay_wait(struct smux_mux *m, const char *key)
{
	(void)m;
	if (strcmp(key, "k") != 0)
		return;
	pthread_mutex_lock(&lock);
	waits++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void *side_main(void *arg)
{
	struct smux_error err;
	struct smux_ctx ctx;

	(void)arg;
	smux_ctx_init(&ctx);
	smux_mux_repair(mux, &ctx, NULL, NULL, &err);
	pthread_mutex_lock(&lock);
	side_over = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/*
 * The write of k reached r1 alone and holds k's fence; the hints of r0
 * and r2 are not recorded yet. The repair runs beside it: r0's replay of
 * k finds no source (r2 is down, r1 rejoining) and touches no fence; the
 * resync of r1 either waits at k's fence (fixed) or hints r1 at once
 * (main). Waits for one of the two (bounded: a repair that does neither
 * fails the test).
 */
static void on_acked(struct smux_mux *m, const char *key)
{
	struct timespec until;
	bool done;

	(void)m;
	if (!armed || strcmp(key, "k") != 0)
		return;
	armed = false;
	assert_int_equal(pthread_create(&side, NULL, side_main, NULL), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&lock);
	while (!r1_hinted && waits == 0 && !side_over &&
	       pthread_cond_timedwait(&cond, &lock, &until) != ETIMEDOUT)
		;
	done = r1_hinted || waits > 0;
	pthread_mutex_unlock(&lock);
	if (!done)
		print_error("the repair neither hinted r1 nor waited at the "
			    "fence of k (waits %u, over %d)\n",
			    waits, side_over);
	assert_true(done);
}

/* Replica @i refuses puts (semantic: it stays up, gets a hint). */
static void refuse_puts(int i, bool refuse)
{
	struct smux_faulty_opts o = {
		.semantic_rate = refuse ? 1.0 : 0.0,
		.ops = 1u << SMUX_FAULTY_PUT,
	};

	smux_faulty_set(f[i], &o);
}

static void test_write_during_rejoin_hints(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR, .cooldown_ms = 100};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("mirror", &o, f, NULL, N);
	/* only this test's repairs run (no background replay) */
	smux__mux_bg_stop(smux__mux_of(mux));

	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	/* r0 misses v1: up, with a hint for k (the resync's source) */
	refuse_puts(0, true);
	MH_OK(mh_put(mux, "k", "v1", &err), &err);
	/* r1 out and back: rejoining (stale for every key) */
	MH_OK(smux_mux_remove(mux, "r1", &ctx, &err), &err);
	back.backend = f[1];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	/* v2 reaches r1 alone (r0 refuses, r2 fails): acknowledged */
	mh_fail(f[2], true);
	smux__hints_hook_change = on_hint;
	atomic_store(&smux__replay_wait_hook, on_replay_wait);
	smux__fanout_hook_acked = on_acked;
	armed = true;
	MH_OK(mh_put(mux, "k", "v2", &err), &err);
	assert_false(armed); /* the hook ran */
	pthread_join(side, NULL);
	smux__fanout_hook_acked = NULL;
	atomic_store(&smux__replay_wait_hook, NULL);
	smux__hints_hook_change = NULL;
	MH_HOLDS(inner[1], "k", "v2");

	/* faults lifted: the repair converges on v2 everywhere (on main
	 * every replica had a hint for k: "no backend with the latest") */
	refuse_puts(0, false);
	mh_fail(f[2], false);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		smux_mux_repair(mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < N; i++)
		MH_HOLDS(inner[i], "k", "v2");
	MH_HOLDS(mux, "k", "v2");

	smux_backend_unref(mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

/* ---- a resync whose member starts draining ---- */

static void drain_r2_once(struct smux_mux *m, const char *key)
{
	struct smux_error err;
	struct smux_ctx ctx;

	(void)m;
	if (!armed || strcmp(key, "k") != 0)
		return;
	armed = false;
	smux_ctx_init(&ctx);
	MH_OK(smux_mux_drain(mux, "r2", &ctx, &err), &err);
}

/*
 * r2 rejoins holding v0 (it was out while v1 was written); its resync
 * lists r0 and r2, and r2 starts draining before the copy of k asks r2
 * whether a write reached it since. Draining, r2 does not answer: the
 * resync must fail and keep its hint. On main the non-answer counted as
 * "a newer write reached it": the copy was skipped, the resync ended, and
 * r2 kept v0 with no hint (the storm's shield run with a remove, then a
 * drain of the same member).
 */
static void test_resync_member_drains(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR, .cooldown_ms = 100};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("mirror", &o, f, NULL, N);
	smux__mux_bg_stop(smux__mux_of(mux));

	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_remove(mux, "r2", &ctx, &err), &err);
	MH_OK(mh_put(mux, "k", "v1", &err), &err);
	back.backend = f[2];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	armed = true;
	smux__rejoin_hook_check = drain_r2_once;
	smux_mux_repair(mux, &ctx, NULL, NULL, &err);
	smux__rejoin_hook_check = NULL;
	assert_false(armed); /* the hook ran */
	MH_OK(smux_mux_undrain(mux, "r2", &err), &err);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		smux_mux_repair(mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < N; i++)
		MH_HOLDS(inner[i], "k", "v1");

	smux_backend_unref(mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

/* ---- a resync while a peer has a zombie ---- */

static unsigned zombie_ends;

static void on_zombie_end(struct smux_mux *m, const char *replica,
			  const char *key)
{
	(void)m;
	(void)replica;
	(void)key;
	pthread_mutex_lock(&lock);
	zombie_ends++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/*
 * r2 rejoins holding v0; r0 took v1 (acknowledged), r1 missed it (a
 * hint). Then an in-place writer's open of k hangs on r0 and is given up
 * on: r0 is stale for k while it may still land (a zombie), though it
 * holds the latest write. The resync of r2 must not take r2's v0 for the
 * latest because every peer is stale: r2 gets a hint, and no read returns
 * v0. On main r2 kept v0 without a hint and served it (the storm's shield
 * stale read after a remove and a zombie on the origin).
 */
static void test_resync_peer_zombie(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR,
				  .backend_timeout_ms = 250,
				  .cooldown_ms = 100};
	struct smux_faulty_opts hang = {
		.hang_rate = 1,
		.hang_ignores_cancel = true,
		.hang_lands = true,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct smux_mux_member back = {0};
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct timespec until;
	unsigned pending = 1;
	char name[16], *got;

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("mirror", &o, f, NULL, N);
	smux__mux_bg_stop(smux__mux_of(mux));
	zombie_ends = 0;
	smux__zombie_hook_end = on_zombie_end;

	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_remove(mux, "r2", &ctx, &err), &err);
	refuse_puts(1, true);
	MH_OK(mh_put(mux, "k", "v1", &err), &err); /* r0 only, r1 hinted */
	refuse_puts(1, false);
	back.backend = f[2];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	/* an in-place writer goes to r0 alone (r1 and r2 are stale) and
	 * its open is given up on there: a zombie of (r0, k) */
	smux_faulty_set(f[0], &hang);
	assert_true(smux_backend_writer_open(mux, &ctx, "k", 0, &w, &err) < 0);
	smux_faulty_set(f[0], NULL);
	smux_mux_repair(mux, &ctx, NULL, NULL, &err); /* r2's resync */
	got = mh_get(mux, "k", NULL, &err);
	if (got && strcmp(got, "v1") != 0)
		print_error("read of k returned \"%s\"\n", got);
	assert_true(!got || strcmp(got, "v1") == 0);
	free(got);

	smux_faulty_release_hangs(f[0]); /* the open ends on r0 */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&lock);
	while (zombie_ends == 0 &&
	       pthread_cond_timedwait(&cond, &lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&lock);
	assert_int_equal(zombie_ends, 1);
	smux__zombie_hook_end = NULL;
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		smux_mux_repair(mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < N; i++)
		MH_HOLDS(inner[i], "k", "v1");

	smux_backend_unref(mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

/*
 * r0 rejoins; a put of k hangs on r1 (a zombie; r0 takes it), then a
 * delete of k reaches r0 alone (r1 is left out while its put may land,
 * and gets a delete hint). r0's resync finds k on r1 only: every peer
 * missed the delete, so r0's absence is the latest state and it keeps it
 * without a hint. On main r1's zombie made that "unknown": r0 got a put
 * hint, every replica was stale for k, and the repair never converged
 * (the storm's mirror run with two removes).
 */
static void test_resync_keeps_delete_peer_zombie(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR,
				  .backend_timeout_ms = 250,
				  .cooldown_ms = 100};
	struct smux_faulty_opts hang = {
		.hang_rate = 1,
		.hang_ignores_cancel = true,
		.hang_lands = true,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct timespec until;
	unsigned pending = 1;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("mirror", &o, f, NULL, N);
	smux__mux_bg_stop(smux__mux_of(mux));
	zombie_ends = 0;
	smux__zombie_hook_end = on_zombie_end;

	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_remove(mux, "r2", &ctx, &err), &err); /* for good */
	MH_OK(smux_mux_remove(mux, "r0", &ctx, &err), &err);
	back.backend = f[0];
	MH_OK(smux_mux_add(mux, &back, &err), &err); /* r0 rejoining */
	smux_faulty_set(f[1], &hang);
	MH_OK(mh_put(mux, "k", "v1", &err), &err); /* r0; r1 a zombie */
	smux_faulty_set(f[1], NULL);
	MH_OK(smux_backend_del(mux, &ctx, "k", &err), &err); /* r0 alone */
	MH_LACKS(inner[0], "k");
	/* r1 up again (its puts hang, the rest answers): the resync's
	 * source while its put may still land */
	mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
	smux_mux_check_health(mux);
	smux_mux_repair(mux, &ctx, NULL, NULL, &err);

	smux_faulty_release_hangs(f[1]); /* v1 lands on r1 */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&lock);
	while (zombie_ends == 0 &&
	       pthread_cond_timedwait(&cond, &lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&lock);
	assert_int_equal(zombie_ends, 1);
	smux__zombie_hook_end = NULL;
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		smux_mux_repair(mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	MH_LACKS(inner[0], "k");
	MH_LACKS(inner[1], "k");
	MH_LACKS(mux, "k");

	smux_backend_unref(mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

/*
 * Two members rejoin at once: r1 is added back and takes a delete of k
 * (r0 fails it: a delete hint) while r2 is out; then r2, holding the old
 * v0, is added back too. r1 holds k's latest state (deleted), though it
 * is stale "for every key" until its resync. On main neither resync could
 * tell: r2 kept v0 as the latest, r1 was hinted and copied v0 back, and
 * the acknowledged delete was lost on every replica (the storm's mirror
 * run with two removes). mux_fresh.c notes what a rejoining member took.
 */
static void test_two_rejoins_delete(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR, .cooldown_ms = 100};
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		inner[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, inner[i], NULL);
	}
	mux = mh_mux("mirror", &o, f, NULL, N);
	smux__mux_bg_stop(smux__mux_of(mux));
	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_remove(mux, "r1", &ctx, &err), &err);
	back.backend = f[1];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	MH_OK(smux_mux_remove(mux, "r2", &ctx, &err), &err);
	mh_fail(f[0], true);
	MH_OK(smux_backend_del(mux, &ctx, "k", &err), &err);
	mh_fail(f[0], false);
	MH_LACKS(inner[1], "k");
	back.backend = f[2];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		smux_mux_repair(mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < N; i++)
		MH_LACKS(inner[i], "k");
	MH_LACKS(mux, "k");

	smux_backend_unref(mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_during_rejoin_hints),
		cmocka_unit_test(test_resync_member_drains),
		cmocka_unit_test(test_resync_peer_zombie),
		cmocka_unit_test(test_resync_keeps_delete_peer_zombie),
		cmocka_unit_test(test_two_rejoins_delete),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
