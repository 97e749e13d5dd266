// SPDX-License-Identifier: MIT
/*
 * test_mux_zombie_handoff.c - the end of a zombie write hands its
 * member's staleness over to a hint with no gap (issue 9, mux_zombie.c;
 * the lose-nothing storm's shield run whose repair never converged).
 *
 * While a call the mux gave up on may still land on a member, the member
 * is stale for the key (smux__member_stale: no read, no in-place writer
 * built on its copy). When the call ends the member gets a hint. The
 * zombie was forgotten first and the hint recorded after: in between the
 * member looked up to date, and the storm opened an in-place writer on
 * the shield origin there; the hint came after the open, the commit (not
 * a whole write) kept it, the mirrors that missed the commit got hints
 * too - every replica stale for the key. The hook between the two steps
 * checks the member is stale at that moment.
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

static struct smux_backend *mux;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned handoffs, stale_at_handoff, ends;

/* Between the end's hint and the zombie forgotten: is the member stale? */
static void on_handoff(struct smux_mux *m, const char *replica, const char *key)
{
	struct mux_view *v = smux__view_get(m);
	bool stale = false;

	for (unsigned i = 0; i < v->n; i++)
		if (strcmp(v->m[i]->name, replica) == 0)
			stale = smux__member_stale(m, v->m[i], key);
	smux__view_put(v);
	pthread_mutex_lock(&lock);
	handoffs++;
	stale_at_handoff += stale;
	pthread_mutex_unlock(&lock);
}

static void on_end(struct smux_mux *m, const char *replica, const char *key)
{
	(void)m;
	(void)replica;
	(void)key;
	pthread_mutex_lock(&lock);
	ends++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Shield, as in the storm: the origin's open of an in-place writer of k
 * hangs past the deadline (the open fails, no write: no hint; a zombie of
 * z0), then ends. z0 must be stale for k from the moment the mux gave the
 * call up until the hint its end records is replayed. */
static void test_origin_stale_through_zombie_end(void **state)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_SHIELD,
		.backend_timeout_ms = 250,
		.cooldown_ms = 100,
	};
	struct smux_faulty_opts hang = {
		.hang_rate = 1,
		.hang_ignores_cancel = true,
		.hang_lands = true,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct smux_backend *mem[2], *f[2];
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct timespec until;
	struct mh_clock clk;
	unsigned pending = 99;
	char name[16];

	(void)state;
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		mem[i] = mh_memory(name);
		snprintf(name, sizeof(name), "z%d", i);
		f[i] = mh_faulty(name, mem[i], NULL);
	}
	mux = mh_mux("zmux", &o, f, NULL, 2);
	smux__zombie_hook_handoff = on_handoff;
	smux__zombie_hook_end = on_end;

	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	smux_faulty_set(f[0], &hang);
	smux_ctx_init(&ctx);
	assert_true(smux_backend_writer_open(mux, &ctx, "k", 0, &w, &err) < 0);
	smux_faulty_set(f[0], NULL);
	smux_faulty_release_hangs(f[0]); /* the open ends on z0 */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&lock);
	while (ends == 0 &&
	       pthread_cond_timedwait(&cond, &lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&lock);
	assert_int_equal(ends, 1);
	assert_int_equal(handoffs, 1);
	/* on main z0 was forgotten as a zombie before its hint came */
	assert_int_equal(stale_at_handoff, 1);

	mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
	smux_mux_check_health(mux);
	MH_OK(smux_mux_repair(mux, &ctx, NULL, &pending, &err), &err);
	assert_int_equal(pending, 0);
	MH_HOLDS(mem[0], "k", "v0");
	MH_HOLDS(mem[1], "k", "v0");

	smux_backend_unref(mux);
	smux__zombie_hook_handoff = NULL;
	smux__zombie_hook_end = NULL;
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(mem[i]);
	}
}

/*
 * Mirror: k was deleted while r0 drained (r0: a delete hint). A put of k
 * fails everywhere - r0 and r2 refuse it, r1's call hangs past the
 * deadline and lands later (a zombie): not acknowledged, k's latest write
 * is still the delete. At the zombie's end r1 gets a hint; r2, which
 * holds that latest state (no k), goes out and back. Its resync must
 * keep the absence (every peer missed the delete) and the repair
 * converge. On main r1's hint was a put hint: r2 got one too at its
 * resync, every replica stale for k, no convergence (the storm's shield
 * run with a remove).
 */
static void test_zombie_end_after_delete_rejoin(void **state)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_MIRROR,
		.backend_timeout_ms = 250,
		.cooldown_ms = 100,
	};
	struct smux_faulty_opts hang = {
		.hang_rate = 1,
		.hang_ignores_cancel = true,
		.hang_lands = true,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	struct smux_faulty_opts refuse = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	struct smux_backend *mem[3], *f[3];
	struct smux_mux_member back = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct timespec until;
	struct mh_clock clk;
	unsigned pending = 1, base;
	char name[16];

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		mem[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, mem[i], NULL);
	}
	mux = mh_mux("zmux", &o, f, NULL, 3);
	smux__mux_bg_stop(smux__mux_of(mux));
	pthread_mutex_lock(&lock);
	base = ends;
	pthread_mutex_unlock(&lock);
	smux__zombie_hook_end = on_end;

	MH_OK(mh_put(mux, "k", "v0", &err), &err);
	MH_OK(smux_mux_drain(mux, "r0", &ctx, &err), &err);
	MH_OK(smux_backend_del(mux, &ctx, "k", &err), &err); /* r1, r2 */
	MH_OK(smux_mux_undrain(mux, "r0", &err), &err);
	smux_faulty_set(f[0], &refuse);
	smux_faulty_set(f[1], &hang);
	smux_faulty_set(f[2], &refuse);
	assert_true(mh_put(mux, "k", "v1", &err) < 0);
	for (int i = 0; i < 3; i++)
		smux_faulty_set(f[i], NULL);
	smux_faulty_release_hangs(f[1]); /* v1 lands on r1 */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&lock);
	while (ends == base &&
	       pthread_cond_timedwait(&cond, &lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&lock);
	assert_true(ends > base);
	smux__zombie_hook_end = NULL;
	/* r2 (no k: the latest state) out and back */
	MH_OK(smux_mux_remove(mux, "r2", &ctx, &err), &err);
	back.backend = f[2];
	MH_OK(smux_mux_add(mux, &back, &err), &err);
	for (int round = 0; round < 20 && pending; round++) {
		mh_clock_set(&clk, atomic_load(&clk.now_ms) + 60000);
		smux_mux_check_health(mux);
		smux_mux_repair(mux, &ctx, NULL, &pending, &err);
	}
	assert_int_equal(pending, 0);
	for (int i = 0; i < 3; i++)
		MH_LACKS(mem[i], "k");

	smux_backend_unref(mux);
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(mem[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_origin_stale_through_zombie_end),
		cmocka_unit_test(test_zombie_end_after_delete_rejoin),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
