/* SPDX-License-Identifier: MIT */
/*
 * test_health.c - the health state machine (core/health.h) driven by a fake
 * clock: exponential cooldown and its caps, probe-on-selection, recovery,
 * draining, and a single probe under concurrent selection.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/health.h"

/* The mux's injected clock, reduced to what a test needs. */
struct fake_clock {
	int64_t now;
};

static int64_t fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->now;
}

static const struct smux__health_cfg cfg = {
	.cooldown_ms = 100,
	.max_cooldown_ms = 60000,
};

static const struct smux_error_info conn_err = {
	.code = SMUX_E_CONNECTION,
	.sys_errno = ECONNRESET,
	.backend = "b",
	.message = "connection reset",
};

struct fixture {
	struct fake_clock clk;
	struct smux_clock clock;
	struct smux__health h;
};

static int64_t now(struct fixture *f)
{
	return f->clock.now_ms(f->clock.arg);
}

static int setup(void **state)
{
	struct fixture *f = test_calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->clk.now = 1000;
	f->clock.now_ms = fake_now;
	f->clock.arg = &f->clk;
	smux__health_init(&f->h, now(f));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	smux__health_release(&f->h);
	test_free(f);
	return 0;
}

/* Fails the member once and returns the cooldown it got. */
static int64_t fail_once(struct fixture *f, const struct smux__health_cfg *c,
			 enum smux__transition want)
{
	enum smux__transition t;

	t = smux__health_failure(&f->h, c, now(f), now(f), &conn_err);
	assert_int_equal(t, want);
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_DOWN);
	return f->h.cooldown_until_ms - now(f);
}

static void test_initial_up(void **state)
{
	struct fixture *f = *state;
	enum smux_status st = SMUX_STATUS_DRAINING;
	unsigned n = 99;
	int64_t at = 0;
	bool probe = true;

	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);
	smux__health_read(&f->h, &st, &n, &at);
	assert_int_equal(st, SMUX_STATUS_UP);
	assert_int_equal(n, 0);
	assert_int_equal(at, 1000);
	assert_int_equal(atomic_load(&f->h.in_flight), 0);
}

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(smux_status_name(SMUX_STATUS_UP), "up");
	assert_string_equal(smux_status_name(SMUX_STATUS_DOWN), "down");
	assert_string_equal(smux_status_name(SMUX_STATUS_DRAINING), "draining");
	assert_string_equal(smux_status_name((enum smux_status)7), "unknown");
}

/* 1x, 2x, 4x, ... 64x, then 64x for ever (2^min(n-1, 6)). */
static void test_cooldown_growth(void **state)
{
	struct fixture *f = *state;
	const int64_t want[] = {100,  200,  400,  800,	1600,
				3200, 6400, 6400, 6400, 6400};
	unsigned n;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int64_t cd = fail_once(f, &cfg,
				       i == 0 ? SMUX__HEALTH_WENT_DOWN
					      : SMUX__HEALTH_SAME);
		assert_int_equal(cd, want[i]);
		smux__health_read(&f->h, NULL, &n, NULL);
		assert_int_equal(n, i + 1);
		f->clk.now += 7;
	}
}

/* max_cooldown caps the growth before 2^6 does. */
static void test_cooldown_max(void **state)
{
	struct fixture *f = *state;
	const struct smux__health_cfg c = {.cooldown_ms = 1000,
					   .max_cooldown_ms = 5000};
	const int64_t want[] = {1000, 2000, 4000, 5000, 5000, 5000, 5000, 5000};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_int_equal(fail_once(f, &c,
					   i == 0 ? SMUX__HEALTH_WENT_DOWN
						  : SMUX__HEALTH_SAME),
				 want[i]);
}

/* A huge base cooldown must not overflow into the past. */
static void test_cooldown_no_overflow(void **state)
{
	struct fixture *f = *state;
	const struct smux__health_cfg c = {.cooldown_ms = INT64_MAX / 4,
					   .max_cooldown_ms = INT64_MAX};
	bool probe;

	for (int i = 0; i < 10; i++)
		smux__health_failure(&f->h, &c, now(f), now(f), &conn_err);
	assert_true(f->h.cooldown_until_ms > now(f));
	f->clk.now += 1000000;
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
}

static void test_probe_on_selection(void **state)
{
	struct fixture *f = *state;
	enum smux_status st;
	int64_t down_for = -1, at;
	unsigned n;
	bool probe;

	f->clk.now = 5000;
	fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN); /* until 5100 */
	assert_memory_equal(&f->h.last_error, &conn_err, sizeof(conn_err));
	smux__health_read(&f->h, &st, &n, &at);
	assert_int_equal(at, 5000);

	f->clk.now = 5099;
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);

	f->clk.now = 5100;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	/* Only one caller gets the probe. */
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);
	f->clk.now = 9000;
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_DOWN);

	f->clk.now = 5250;
	assert_int_equal(smux__health_success(&f->h, now(f), now(f), &down_for),
			 SMUX__HEALTH_RECOVERED);
	assert_int_equal(down_for, 250);
	smux__health_read(&f->h, &st, &n, &at);
	assert_int_equal(st, SMUX_STATUS_UP);
	assert_int_equal(n, 0);
	assert_int_equal(at, 5250);
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);

	/* A later success on an up member is no transition. */
	assert_int_equal(
		smux__health_success(&f->h, now(f) + 1, now(f) + 1, &down_for),
		SMUX__HEALTH_SAME);
	assert_int_equal(down_for, 0);

	/* Failures were reset: the next one waits the base cooldown. */
	assert_int_equal(fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN), 100);
}

static void test_failed_probe(void **state)
{
	struct fixture *f = *state;
	int64_t down_for = 0;
	bool probe;

	f->clk.now = 2000;
	fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN); /* until 2100 */
	f->clk.now = 2100;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	/* The probe fails: no second WENT_DOWN, twice the cooldown. */
	assert_int_equal(fail_once(f, &cfg, SMUX__HEALTH_SAME), 200);
	f->clk.now = 2299;
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	f->clk.now = 2300;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	assert_int_equal(smux__health_success(&f->h, 2400, 2400, &down_for),
			 SMUX__HEALTH_RECOVERED);
	/* down_since is the first failure, not the failed probe. */
	assert_int_equal(down_for, 400);
}

/*
 * Calls in flight when the member goes down fail after it: the first takes
 * it down, the others (not probes) keep its failure count and cooldown,
 * so a copy's writers or a fan-out do not push the cooldown to
 * max_cooldown (test_cdn_faults: 9 failures, 60 s before the replay).
 * A failed probe still doubles it.
 */
static void test_call_failures_while_down(void **state)
{
	struct fixture *f = *state;
	const struct smux_error_info late = {
		.code = SMUX_E_HTTP,
		.backend = "b",
		.message = "late",
	};
	unsigned n;
	bool probe;

	f->clk.now = 2000;
	assert_int_equal(smux__health_call_failure(&f->h, &cfg, now(f), now(f),
						   &conn_err),
			 SMUX__HEALTH_WENT_DOWN);
	for (int i = 0; i < 8; i++) {
		f->clk.now += 10;
		assert_int_equal(smux__health_call_failure(&f->h, &cfg, now(f),
							   now(f), &late),
				 SMUX__HEALTH_SAME);
	}
	smux__health_read(&f->h, NULL, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(f->h.cooldown_until_ms, 2100);
	assert_int_equal(f->h.last_error.code, SMUX_E_HTTP);
	f->clk.now = 2100;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	assert_int_equal(fail_once(f, &cfg, SMUX__HEALTH_SAME), 200);
	smux__health_read(&f->h, NULL, &n, NULL);
	assert_int_equal(n, 2);
}

static void test_probe_cancel(void **state)
{
	struct fixture *f = *state;
	bool probe;

	fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN);
	f->clk.now += 100;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	smux__health_probe_cancel(&f->h);
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_DOWN);
}

/*
 * A probe (or a request) sent while the member was down fails after a
 * health check brought it back: the failure is older than the recovery,
 * so the member stays up. A failure of a call sent after the recovery
 * takes it down again.
 */
static void test_failure_older_than_recovery(void **state)
{
	struct fixture *f = *state;
	int64_t sent;
	bool probe;

	fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN);
	f->clk.now += 100;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	sent = now(f);
	f->clk.now += 5;
	assert_int_equal(smux__health_success(&f->h, now(f), now(f), NULL),
			 SMUX__HEALTH_RECOVERED);
	f->clk.now += 5;
	assert_int_equal(
		smux__health_failure(&f->h, &cfg, now(f), sent, &conn_err),
		SMUX__HEALTH_SAME);
	assert_int_equal(
		smux__health_call_failure(&f->h, &cfg, now(f), sent, &conn_err),
		SMUX__HEALTH_SAME);
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_UP);
	assert_int_equal(f->h.consecutive_failures, 0);
	assert_int_equal(smux__health_call_failure(&f->h, &cfg, now(f), now(f),
						   &conn_err),
			 SMUX__HEALTH_WENT_DOWN);
}

static void test_drain(void **state)
{
	struct fixture *f = *state;
	enum smux_status st;
	unsigned n;
	int64_t at;
	bool probe;

	f->clk.now = 3000;
	smux__health_drain(&f->h, now(f));
	smux__health_read(&f->h, &st, &n, &at);
	assert_int_equal(st, SMUX_STATUS_DRAINING);
	assert_int_equal(at, 3000);
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);

	/* In-flight calls finishing do not take it out of draining. */
	assert_int_equal(
		smux__health_failure(&f->h, &cfg, now(f), now(f), &conn_err),
		SMUX__HEALTH_SAME);
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_DRAINING);
	assert_int_equal(smux__health_success(&f->h, now(f), now(f), NULL),
			 SMUX__HEALTH_SAME);
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_DRAINING);

	smux__health_drained(&f->h);
	assert_true(f->h.drained);
	/* Never selectable, however long we wait. */
	for (int i = 0; i < 10; i++) {
		f->clk.now += 100000;
		assert_false(smux__health_acquire(&f->h, now(f), &probe));
		assert_false(probe);
	}

	f->clk.now = 900000;
	smux__health_undrain(&f->h, now(f));
	smux__health_read(&f->h, &st, &n, &at);
	assert_int_equal(st, SMUX_STATUS_UP);
	assert_int_equal(n, 0);
	assert_int_equal(at, 900000);
	assert_false(f->h.drained);
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);
}

/* Draining a down member also stops its probes; undrain brings it up. */
static void test_drain_down_member(void **state)
{
	struct fixture *f = *state;
	bool probe;

	fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN);
	f->clk.now += 100;
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_true(probe);
	smux__health_drain(&f->h, now(f));
	f->clk.now += 100000;
	assert_false(smux__health_acquire(&f->h, now(f), &probe));
	smux__health_undrain(&f->h, now(f));
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_UP);
	assert_true(smux__health_acquire(&f->h, now(f), &probe));
	assert_false(probe);
}

/* Undrain of a member that is not draining changes nothing. */
static void test_undrain_not_draining(void **state)
{
	struct fixture *f = *state;

	fail_once(f, &cfg, SMUX__HEALTH_WENT_DOWN);
	smux__health_undrain(&f->h, now(f));
	assert_int_equal(smux__health_status(&f->h), SMUX_STATUS_DOWN);
}

/* ---- concurrency ---- */

#define THREADS 8

struct race {
	struct smux__health *h;
	pthread_barrier_t *barrier;
	int64_t now;
	atomic_int probes;
	atomic_int granted;
};

static void *race_acquire(void *arg)
{
	struct race *r = arg;
	bool probe;

	pthread_barrier_wait(r->barrier);
	for (int i = 0; i < 100; i++) {
		if (smux__health_acquire(r->h, r->now, &probe)) {
			atomic_fetch_add(&r->granted, 1);
			if (probe)
				atomic_fetch_add(&r->probes, 1);
		}
	}
	return NULL;
}

static void test_concurrent_single_probe(void **state)
{
	struct fixture *f = *state;
	pthread_barrier_t barrier;
	pthread_t t[THREADS];

	pthread_barrier_init(&barrier, NULL, THREADS);
	for (int round = 0; round < 50; round++) {
		struct race r = {.h = &f->h, .barrier = &barrier};

		f->clk.now += 1000000;
		smux__health_failure(&f->h, &cfg, now(f), now(f), &conn_err);
		r.now = now(f) + 6400;
		for (int i = 0; i < THREADS; i++)
			assert_int_equal(
				pthread_create(&t[i], NULL, race_acquire, &r),
				0);
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		assert_int_equal(atomic_load(&r.probes), 1);
		assert_int_equal(atomic_load(&r.granted), 1);
		/* The probe fails; the next round probes again. */
	}
	pthread_barrier_destroy(&barrier);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_initial_up, setup,
						teardown),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test_setup_teardown(test_cooldown_growth, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cooldown_max, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cooldown_no_overflow,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_on_selection, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_probe, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_call_failures_while_down,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_cancel, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_failure_older_than_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_down_member, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_undrain_not_draining,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_single_probe,
						setup, teardown),
	};

	return cmocka_run_group_tests_name("health", tests, NULL, NULL);
}
