/* SPDX-License-Identifier: MIT */
/*
 * test_ctx.c - cancel tokens and call contexts (smux/ctx.h): deadlines
 * only tighten, the first fire reason wins, check maps reasons to codes,
 * sleep ends in full, early on a token fired from another thread, or at
 * the deadline.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "smux/ctx.h"

#define MS(n) ((int64_t)(n)*1000000LL)
#define S(n)  ((int64_t)(n)*1000000000LL)

/*
 * How late a sleep may end after the event that should end it. On a loaded
 * machine a woken thread can wait longer than that for a CPU, so a timed
 * case runs up to WAKE_TRIES times and passes when one run is that prompt;
 * a sleep that misses its wake-up entirely still fails every run (it lasts
 * the whole LONG_SLEEP).
 */
#define WAKE_SLACK MS(50)
#define WAKE_TRIES 3
#define LONG_SLEEP S(2)

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* ---- tokens ---- */

static void test_token_first_reason_wins(void **state)
{
	struct smux_cancel c;

	(void)state;
	smux_cancel_init(&c);
	assert_int_equal(smux_cancel_reason(&c), SMUX_CANCEL_NONE);
	smux_cancel_fire(&c, SMUX_CANCEL_DRAIN);
	assert_int_equal(smux_cancel_reason(&c), SMUX_CANCEL_DRAIN);
	smux_cancel_fire(&c, SMUX_CANCEL_TIMEOUT);
	smux_cancel_fire(&c, SMUX_CANCEL_ABORT);
	assert_int_equal(smux_cancel_reason(&c), SMUX_CANCEL_DRAIN);
	smux_cancel_release(&c);

	/* firing with "no reason" is an abort, not a no-op */
	smux_cancel_init(&c);
	smux_cancel_fire(&c, SMUX_CANCEL_NONE);
	assert_int_equal(smux_cancel_reason(&c), SMUX_CANCEL_ABORT);
	smux_cancel_fire(&c, SMUX_CANCEL_TIMEOUT);
	assert_int_equal(smux_cancel_reason(&c), SMUX_CANCEL_ABORT);
	smux_cancel_release(&c);
}

struct racer {
	struct smux_cancel *c;
	enum smux_cancel_reason why;
	pthread_barrier_t *start;
};

static void *race_fire(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->start);
	smux_cancel_fire(r->c, r->why);
	return NULL;
}

/* Concurrent fires: one reason sticks, and it is one that was given. */
static void test_token_concurrent_fire(void **state)
{
	static const enum smux_cancel_reason whys[] = {
		SMUX_CANCEL_ABORT, SMUX_CANCEL_TIMEOUT, SMUX_CANCEL_DRAIN};

	(void)state;
	for (int round = 0; round < 20; round++) {
		struct smux_cancel c;
		pthread_barrier_t start;
		pthread_t t[3];
		struct racer r[3];
		enum smux_cancel_reason got;

		smux_cancel_init(&c);
		pthread_barrier_init(&start, NULL, 3);
		for (int i = 0; i < 3; i++) {
			r[i] = (struct racer){&c, whys[i], &start};
			assert_int_equal(
				pthread_create(&t[i], NULL, race_fire, &r[i]),
				0);
		}
		for (int i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
		got = smux_cancel_reason(&c);
		assert_true(got == SMUX_CANCEL_ABORT ||
			    got == SMUX_CANCEL_TIMEOUT ||
			    got == SMUX_CANCEL_DRAIN);
		smux_cancel_fire(&c, got == SMUX_CANCEL_ABORT
					     ? SMUX_CANCEL_DRAIN
					     : SMUX_CANCEL_ABORT);
		assert_int_equal(smux_cancel_reason(&c), got);
		pthread_barrier_destroy(&start);
		smux_cancel_release(&c);
	}
}

/* ---- derive ---- */

static void test_init(void **state)
{
	struct smux_ctx ctx;

	(void)state;
	memset(&ctx, 0xff, sizeof(ctx));
	smux_ctx_init(&ctx);
	assert_int_equal(ctx.deadline_ns, 0);
	for (int i = 0; i < SMUX_CTX_MAX_CANCEL; i++)
		assert_null(ctx.cancel[i]);
	assert_null(ctx.parent_span);
	assert_int_equal(ctx.depth, 0);
	assert_int_equal(smux_ctx_state(&ctx), SMUX_CANCEL_NONE);
	assert_int_equal(smux_ctx_remaining_ns(&ctx), INT64_MAX);
}

static void test_derive_sets_deadline(void **state)
{
	struct smux_ctx parent, child;
	int64_t before, after;

	(void)state;
	smux_ctx_init(&parent);
	before = smux_now_ns();
	assert_int_equal(smux_ctx_derive(&child, &parent, S(2), NULL), 0);
	after = smux_now_ns();
	assert_in_range(child.deadline_ns, before + S(2), after + S(2));
	assert_int_equal(parent.deadline_ns, 0);

	/* NULL parent: a fresh context with the timeout */
	memset(&child, 0xff, sizeof(child));
	assert_int_equal(smux_ctx_derive(&child, NULL, S(1), NULL), 0);
	assert_true(child.deadline_ns > before);
	assert_null(child.cancel[0]);
	assert_null(child.parent_span);
	assert_int_equal(child.depth, 0);
}

static void test_derive_tightens_never_loosens(void **state)
{
	struct smux_ctx parent, child;
	int64_t now = smux_now_ns();

	(void)state;
	smux_ctx_init(&parent);
	parent.deadline_ns = now + S(10);

	/* tighter: the child's own timeout */
	assert_int_equal(smux_ctx_derive(&child, &parent, S(1), NULL), 0);
	assert_in_range(child.deadline_ns, now + S(1), now + S(2));

	/* looser, none, negative, "forever": the parent's deadline */
	assert_int_equal(smux_ctx_derive(&child, &parent, S(60), NULL), 0);
	assert_int_equal(child.deadline_ns, parent.deadline_ns);
	assert_int_equal(smux_ctx_derive(&child, &parent, 0, NULL), 0);
	assert_int_equal(child.deadline_ns, parent.deadline_ns);
	assert_int_equal(smux_ctx_derive(&child, &parent, -S(1), NULL), 0);
	assert_int_equal(child.deadline_ns, parent.deadline_ns);
	assert_int_equal(smux_ctx_derive(&child, &parent, INT64_MAX, NULL), 0);
	assert_int_equal(child.deadline_ns, parent.deadline_ns);

	/* a grandchild cannot loosen what the child tightened */
	assert_int_equal(smux_ctx_derive(&child, &parent, MS(100), NULL), 0);
	{
		struct smux_ctx grand;

		assert_int_equal(smux_ctx_derive(&grand, &child, S(5), NULL),
				 0);
		assert_int_equal(grand.deadline_ns, child.deadline_ns);
	}

	/* a deadline already past stays past */
	parent.deadline_ns = now - 1;
	assert_int_equal(smux_ctx_derive(&child, &parent, S(5), NULL), 0);
	assert_int_equal(child.deadline_ns, now - 1);
	assert_int_equal(smux_ctx_state(&child), SMUX_CANCEL_TIMEOUT);
}

/* "Forever" from a context without a deadline must not overflow. */
static void test_derive_huge_timeout(void **state)
{
	struct smux_ctx child;

	(void)state;
	assert_int_equal(smux_ctx_derive(&child, NULL, INT64_MAX, NULL), 0);
	assert_true(child.deadline_ns == 0 ||
		    child.deadline_ns > smux_now_ns() + S(3600));
	assert_int_equal(smux_ctx_state(&child), SMUX_CANCEL_NONE);
	assert_true(smux_ctx_remaining_ns(&child) > S(3600));
}

static void test_derive_copies_and_adds_tokens(void **state)
{
	struct smux_cancel tok[SMUX_CTX_MAX_CANCEL + 1];
	struct smux_ctx parent, child, next;
	static char span_marker;
	struct smux_span *span = (struct smux_span *)(void *)&span_marker;

	(void)state;
	for (int i = 0; i <= SMUX_CTX_MAX_CANCEL; i++)
		smux_cancel_init(&tok[i]);
	smux_ctx_init(&parent);
	parent.depth = 3;
	parent.parent_span = span;

	assert_int_equal(smux_ctx_derive(&child, &parent, 0, &tok[0]), 0);
	assert_ptr_equal(child.cancel[0], &tok[0]);
	assert_null(child.cancel[1]);
	assert_null(parent.cancel[0]); /* the parent is untouched */
	assert_int_equal(child.depth, 3);
	assert_ptr_equal(child.parent_span, span);

	/* the same token again takes no slot */
	assert_int_equal(smux_ctx_derive(&next, &child, 0, &tok[0]), 0);
	assert_null(next.cancel[1]);

	/* fill every slot, deriving in place */
	for (int i = 1; i < SMUX_CTX_MAX_CANCEL; i++)
		assert_int_equal(smux_ctx_derive(&child, &child, 0, &tok[i]),
				 0);
	for (int i = 0; i < SMUX_CTX_MAX_CANCEL; i++)
		assert_ptr_equal(child.cancel[i], &tok[i]);

	/* one more: -EOVERFLOW; a token already held is still fine */
	assert_int_equal(
		smux_ctx_derive(&next, &child, 0, &tok[SMUX_CTX_MAX_CANCEL]),
		-EOVERFLOW);
	assert_int_equal(smux_ctx_derive(&next, &child, 0, &tok[2]), 0);

	/* the last slot counts: firing it cancels the context */
	smux_cancel_fire(&tok[SMUX_CTX_MAX_CANCEL - 1], SMUX_CANCEL_DRAIN);
	assert_int_equal(smux_ctx_state(&child), SMUX_CANCEL_DRAIN);
	assert_int_equal(smux_ctx_state(&parent), SMUX_CANCEL_NONE);

	for (int i = 0; i <= SMUX_CTX_MAX_CANCEL; i++)
		smux_cancel_release(&tok[i]);
}

/* ---- state, check, remaining ---- */

static void check_stop(const struct smux_ctx *ctx, int want_rc,
		       enum smux_code want_code)
{
	struct smux_error err;

	smux_error_clear(&err);
	assert_int_equal(smux_ctx_check(ctx, "be-1", &err), want_rc);
	assert_int_equal(err.e.code, want_code);
	if (want_rc == 0)
		return;
	assert_int_equal(err.e.sys_errno, -want_rc);
	assert_string_equal(err.e.backend, "be-1");
	assert_true(err.e.message[0] != '\0');
	assert_int_equal(smux_ctx_check(ctx, NULL, NULL), want_rc);
}

static void test_check_reasons(void **state)
{
	static const struct {
		enum smux_cancel_reason why;
		int rc;
		enum smux_code code;
	} cases[] = {
		{SMUX_CANCEL_ABORT, -EINTR, SMUX_E_BACKEND_ABORTED},
		{SMUX_CANCEL_TIMEOUT, -ETIMEDOUT, SMUX_E_BACKEND_TIMEOUT},
		{SMUX_CANCEL_DRAIN, -EAGAIN, SMUX_E_BACKEND_DRAINING},
	};

	(void)state;
	check_stop(NULL, 0, SMUX_OK);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct smux_cancel c;
		struct smux_ctx ctx;

		smux_cancel_init(&c);
		assert_int_equal(smux_ctx_derive(&ctx, NULL, 0, &c), 0);
		assert_int_equal(smux_ctx_state(&ctx), SMUX_CANCEL_NONE);
		check_stop(&ctx, 0, SMUX_OK);
		smux_cancel_fire(&c, cases[i].why);
		assert_int_equal(smux_ctx_state(&ctx), cases[i].why);
		check_stop(&ctx, cases[i].rc, cases[i].code);
		smux_cancel_release(&c);
	}
}

static void test_check_deadline(void **state)
{
	struct smux_cancel c;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	ctx.deadline_ns = smux_now_ns() + S(60);
	check_stop(&ctx, 0, SMUX_OK);
	ctx.deadline_ns = smux_now_ns() - 1;
	assert_int_equal(smux_ctx_state(&ctx), SMUX_CANCEL_TIMEOUT);
	check_stop(&ctx, -ETIMEDOUT, SMUX_E_BACKEND_TIMEOUT);
	ctx.deadline_ns = 1;
	check_stop(&ctx, -ETIMEDOUT, SMUX_E_BACKEND_TIMEOUT);

	/* a fired token's reason comes before a passed deadline */
	smux_cancel_init(&c);
	assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &c), 0);
	smux_cancel_fire(&c, SMUX_CANCEL_DRAIN);
	assert_int_equal(smux_ctx_state(&ctx), SMUX_CANCEL_DRAIN);
	check_stop(&ctx, -EAGAIN, SMUX_E_BACKEND_DRAINING);
	smux_cancel_release(&c);
}

static void test_remaining(void **state)
{
	struct smux_ctx ctx;
	int64_t left;

	(void)state;
	assert_int_equal(smux_ctx_remaining_ns(NULL), INT64_MAX);
	smux_ctx_init(&ctx);
	assert_int_equal(smux_ctx_remaining_ns(&ctx), INT64_MAX);
	assert_int_equal(smux_ctx_derive(&ctx, &ctx, S(1), NULL), 0);
	left = smux_ctx_remaining_ns(&ctx);
	assert_in_range(left, S(1) - MS(500), S(1));
	sleep_ms(20);
	assert_true(smux_ctx_remaining_ns(&ctx) <= left - MS(20));
	ctx.deadline_ns = smux_now_ns() - S(1);
	assert_int_equal(smux_ctx_remaining_ns(&ctx), 0);
}

static void test_now_is_monotonic(void **state)
{
	int64_t a, b;

	(void)state;
	a = smux_now_ns();
	sleep_ms(5);
	b = smux_now_ns();
	assert_true(a > 0);
	assert_true(b - a >= MS(5));
	assert_true(b - a < S(5));
}

/* ---- sleep ---- */

static void test_sleep_full(void **state)
{
	struct smux_cancel c, d;
	struct smux_ctx ctx;
	struct smux_error err;
	int64_t t0, dt;

	(void)state;
	/* no context, an empty one, one token, two tokens */
	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_sleep(NULL, MS(20), "be", &err), 0);
	dt = smux_now_ns() - t0;
	assert_in_range(dt, MS(20), MS(20) + S(1));

	smux_ctx_init(&ctx);
	ctx.deadline_ns = smux_now_ns() + S(10);
	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_sleep(&ctx, MS(20), "be", &err), 0);
	assert_in_range(smux_now_ns() - t0, MS(20), MS(20) + S(1));

	smux_cancel_init(&c);
	smux_cancel_init(&d);
	assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &c), 0);
	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_sleep(&ctx, MS(20), "be", &err), 0);
	assert_in_range(smux_now_ns() - t0, MS(20), MS(20) + S(1));
	assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &d), 0);
	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_sleep(&ctx, MS(20), "be", &err), 0);
	assert_in_range(smux_now_ns() - t0, MS(20), MS(20) + S(1));

	/* zero and negative: no sleep at all */
	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_sleep(&ctx, 0, "be", NULL), 0);
	assert_int_equal(smux_ctx_sleep(&ctx, -S(1), "be", NULL), 0);
	assert_true(smux_now_ns() - t0 < MS(20));
	smux_cancel_release(&c);
	smux_cancel_release(&d);
}

struct firer {
	struct smux_cancel *c;
	int delay_ms;
	int64_t fired_at; /* read after join */
};

static void *fire_later(void *arg)
{
	struct firer *f = arg;

	sleep_ms(f->delay_ms);
	f->fired_at = smux_now_ns();
	smux_cancel_fire(f->c, SMUX_CANCEL_ABORT);
	return NULL;
}

/*
 * A long sleep on a context whose token @slot (of @ntok) another thread
 * fires after 30 ms ends with BACKEND_ABORTED. Returns how long after the
 * fire it ended.
 */
static int64_t sleep_ended_by_token(int ntok, int slot, int64_t ns)
{
	struct smux_cancel tok[SMUX_CTX_MAX_CANCEL];
	struct smux_ctx ctx;
	struct smux_error err;
	struct firer f;
	pthread_t t;
	int64_t t0, end;
	int rc;

	smux_ctx_init(&ctx);
	for (int i = 0; i < ntok; i++) {
		smux_cancel_init(&tok[i]);
		assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &tok[i]), 0);
	}
	f = (struct firer){.c = &tok[slot], .delay_ms = 30};
	t0 = smux_now_ns();
	assert_int_equal(pthread_create(&t, NULL, fire_later, &f), 0);
	smux_error_clear(&err);
	rc = smux_ctx_sleep(&ctx, ns, "sleeper", &err);
	end = smux_now_ns();
	pthread_join(t, NULL);

	assert_int_equal(rc, -EINTR);
	assert_int_equal(err.e.code, SMUX_E_BACKEND_ABORTED);
	assert_string_equal(err.e.backend, "sleeper");
	assert_true(end >= f.fired_at);
	assert_true(end - t0 < LONG_SLEEP);
	for (int i = 0; i < ntok; i++)
		smux_cancel_release(&tok[i]);
	return end - f.fired_at;
}

/* The sleep ends within WAKE_SLACK of the fire (best of WAKE_TRIES). */
static void check_token_wakes(int ntok, int slot, int64_t ns)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < WAKE_TRIES && best >= WAKE_SLACK; i++) {
		int64_t late = sleep_ended_by_token(ntok, slot, ns);

		if (late < best)
			best = late;
	}
	if (best >= WAKE_SLACK)
		fail_msg("%d token(s), slot %d: woke %lld ms after the fire",
			 ntok, slot, (long long)(best / MS(1)));
}

static void test_sleep_ended_by_token(void **state)
{
	(void)state;
	check_token_wakes(1, 0, LONG_SLEEP);
	check_token_wakes(2, 0, LONG_SLEEP);
	check_token_wakes(2, 1, LONG_SLEEP);
	check_token_wakes(SMUX_CTX_MAX_CANCEL, SMUX_CTX_MAX_CANCEL - 1,
			  LONG_SLEEP);
	/* "forever" still wakes on the token */
	check_token_wakes(1, 0, INT64_MAX);
}

static void test_sleep_token_already_fired(void **state)
{
	struct smux_cancel c;
	struct smux_ctx ctx;
	struct smux_error err;
	int64_t t0;

	(void)state;
	smux_cancel_init(&c);
	assert_int_equal(smux_ctx_derive(&ctx, NULL, 0, &c), 0);
	smux_cancel_fire(&c, SMUX_CANCEL_DRAIN);
	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_sleep(&ctx, LONG_SLEEP, "be", &err), -EAGAIN);
	assert_int_equal(err.e.code, SMUX_E_BACKEND_DRAINING);
	assert_true(smux_now_ns() - t0 < LONG_SLEEP / 2);
	smux_cancel_release(&c);
}

/* A sleep past the deadline ends at the deadline with BACKEND_TIMEOUT,
 * whether the context has tokens or not. Returns how long after the
 * deadline it ended. */
static int64_t sleep_ended_by_deadline(int ntok)
{
	struct smux_cancel tok[2];
	struct smux_ctx ctx;
	struct smux_error err;
	int64_t t0, end;

	t0 = smux_now_ns();
	assert_int_equal(smux_ctx_derive(&ctx, NULL, MS(30), NULL), 0);
	for (int i = 0; i < ntok; i++) {
		smux_cancel_init(&tok[i]);
		assert_int_equal(smux_ctx_derive(&ctx, &ctx, 0, &tok[i]), 0);
	}
	smux_error_clear(&err);
	assert_int_equal(smux_ctx_sleep(&ctx, LONG_SLEEP, "slow", &err),
			 -ETIMEDOUT);
	end = smux_now_ns();
	assert_int_equal(err.e.code, SMUX_E_BACKEND_TIMEOUT);
	assert_string_equal(err.e.backend, "slow");
	assert_true(end >= ctx.deadline_ns);
	assert_true(end - t0 >= MS(30));
	assert_true(end - t0 < LONG_SLEEP);
	for (int i = 0; i < ntok; i++)
		smux_cancel_release(&tok[i]);
	return end - ctx.deadline_ns;
}

static void test_sleep_ended_by_deadline(void **state)
{
	(void)state;
	for (int ntok = 0; ntok <= 2; ntok++) {
		int64_t best = INT64_MAX;

		for (int i = 0; i < WAKE_TRIES && best >= WAKE_SLACK; i++) {
			int64_t late = sleep_ended_by_deadline(ntok);

			if (late < best)
				best = late;
		}
		if (best >= WAKE_SLACK)
			fail_msg("%d token(s): woke %lld ms after the deadline",
				 ntok, (long long)(best / MS(1)));
	}
}

int main(void)
{
	const struct CMUnitTest tokens[] = {
		cmocka_unit_test(test_token_first_reason_wins),
		cmocka_unit_test(test_token_concurrent_fire),
	};
	const struct CMUnitTest derive[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_derive_sets_deadline),
		cmocka_unit_test(test_derive_tightens_never_loosens),
		cmocka_unit_test(test_derive_huge_timeout),
		cmocka_unit_test(test_derive_copies_and_adds_tokens),
	};
	const struct CMUnitTest check[] = {
		cmocka_unit_test(test_check_reasons),
		cmocka_unit_test(test_check_deadline),
		cmocka_unit_test(test_remaining),
		cmocka_unit_test(test_now_is_monotonic),
	};
	const struct CMUnitTest sleeps[] = {
		cmocka_unit_test(test_sleep_full),
		cmocka_unit_test(test_sleep_ended_by_token),
		cmocka_unit_test(test_sleep_token_already_fired),
		cmocka_unit_test(test_sleep_ended_by_deadline),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("ctx_tokens", tokens, NULL, NULL);
	failed += cmocka_run_group_tests_name("ctx_derive", derive, NULL, NULL);
	failed += cmocka_run_group_tests_name("ctx_check", check, NULL, NULL);
	failed += cmocka_run_group_tests_name("ctx_sleep", sleeps, NULL, NULL);
	return failed ? 1 : 0;
}
