// SPDX-License-Identifier: MIT
/*
 * test_mux_health.c - health and isolation through the mux (seed sections
 * 5 and 6): the caller's abort, a member stuck ignoring cancellation
 * (BACKEND_TIMEOUT at the deadline), cooldown growth and its cap with an
 * injected clock, probe-on-selection and the backend.recovered event,
 * probes in the modes that choose among up members, active health
 * checks, and the probe window (a request on a one-member mux waits for
 * the background thread's probe of its member).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <unistd.h>

#include "core/mux_probe_wait.h"
#include "mux_helpers.h"

static void wait_not_hanging(struct smux_backend *fb)
{
	for (int i = 0; i < 2000 && smux_faulty_hanging(fb); i++)
		usleep(1000);
	assert_int_equal(smux_faulty_hanging(fb), 0);
}

struct fire_arg {
	struct smux_cancel *c;
	struct smux_backend *fb;
};

/* Fires the token once the member is really inside its hang. */
static void *fire_later(void *arg)
{
	struct fire_arg *a = arg;

	for (int i = 0; i < 5000 && !smux_faulty_hanging(a->fb); i++)
		usleep(1000);
	usleep(50 * 1000);
	smux_cancel_fire(a->c, SMUX_CANCEL_ABORT);
	return NULL;
}

static void test_abort(void **state)
{
	struct smux_faulty_opts hang = {.hang_rate = 1.0};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2], *mux;
	struct smux_mux_stats *st;
	struct smux_cancel token;
	struct fire_arg fa;
	struct smux_sink sink;
	struct smux_error err;
	struct smux_ctx ctx;
	pthread_t th;
	int64_t t0, ms;
	int rc;

	(void)state;
	f[0] = mh_faulty("hangs", mem, &hang);
	f[1] = mh_faulty("fine", mem, NULL);
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	mux = mh_mux("ab", &o, f, NULL, 2);
	smux_cancel_init(&token);
	smux_ctx_init(&ctx);
	ctx.cancel[0] = &token;
	fa.c = &token;
	fa.fb = f[0];
	assert_int_equal(pthread_create(&th, NULL, fire_later, &fa), 0);
	smux_sink_dyn(&sink);
	t0 = smux_now_ns();
	rc = smux_backend_get(mux, &ctx, "k", NULL, &sink, NULL, &err);
	ms = (smux_now_ns() - t0) / MS_NS;
	pthread_join(th, NULL);
	smux_sink_release(&sink);
	MH_ERR(rc, &err, SMUX_E_BACKEND_ABORTED);
	assert_int_equal(err.e.sys_errno, EINTR);
	assert_true(ms < 1000);
	/* no fall-through, and an abort is no member's failure */
	assert_int_equal(smux_faulty_calls(f[1]), 0);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_UP);
	assert_int_equal(st->backends[0].consecutive_failures, 0);
	assert_int_equal(st->total_failovers, 0);
	smux_mux_stats_free(st);
	/* the well-behaved hang saw its token and ended */
	wait_not_hanging(f[0]);
	smux_cancel_release(&token);
	smux_backend_unref(mux);
	for (int i = 0; i < 2; i++)
		smux_backend_unref(f[i]);
	smux_backend_unref(mem);
}

static void test_hang_ignoring_cancel(void **state)
{
	struct smux_faulty_opts hang = {
		.hang_rate = 1.0,
		.hang_ms = 0,
		.hang_ignores_cancel = true,
	};
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = 200,
	};
	struct smux_backend *mem = mh_memory("mem"), *f, *mux;
	struct smux_mux_stats *st;
	struct smux_error err;
	int64_t t0, ms;
	int rc;

	(void)state;
	f = mh_faulty("stuck", mem, &hang);
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	mux = mh_mux("to", &o, &f, NULL, 1);
	t0 = smux_now_ns();
	assert_null(mh_get(mux, "k", &rc, &err));
	ms = (smux_now_ns() - t0) / MS_NS;
	print_message("  BACKEND_TIMEOUT after %lld ms\n", (long long)ms);
	MH_ERR(rc, &err, SMUX_E_BACKEND_TIMEOUT);
	assert_int_equal(err.e.sys_errno, ETIMEDOUT);
	assert_in_range(ms, 190, 1000);
	/* the member is still stuck in its "system call" */
	assert_int_equal(smux_faulty_hanging(f), 1);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_int_equal(st->backends[0].timeouts, 1);
	assert_int_equal(st->backends[0].errors, 1);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_DOWN);
	assert_int_equal(st->backends[0].in_flight_count, 0);
	smux_mux_stats_free(st);
	/* the mux goes away while the call is stuck; release for cleanup */
	smux_backend_unref(mux);
	smux_faulty_release_hangs(f);
	wait_not_hanging(f);
	smux_backend_unref(f);
	smux_backend_unref(mem);
}

/* The caller's own deadline passes while the first member hangs: the get
 * fails with BACKEND_TIMEOUT at that deadline, tries no other member (no
 * time is left) and blames none. */
static void test_caller_deadline(void **state)
{
	struct smux_faulty_opts hang = {.hang_rate = 1.0};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2], *mux;
	struct smux_mux_stats *st;
	struct smux_sink sink;
	struct smux_error err;
	struct smux_ctx ctx;
	int64_t t0, ms;
	int rc;

	(void)state;
	f[0] = mh_faulty("slow", mem, &hang);
	f[1] = mh_faulty("fine", mem, NULL);
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	mux = mh_mux("dl", &o, f, NULL, 2);
	smux_ctx_init(&ctx);
	t0 = smux_now_ns();
	ctx.deadline_ns = t0 + 100 * MS_NS;
	smux_sink_dyn(&sink);
	rc = smux_backend_get(mux, &ctx, "k", NULL, &sink, NULL, &err);
	ms = (smux_now_ns() - t0) / MS_NS;
	smux_sink_release(&sink);
	MH_ERR(rc, &err, SMUX_E_BACKEND_TIMEOUT);
	assert_in_range(ms, 90, 1000);
	assert_int_equal(smux_faulty_calls(f[1]), 0);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_UP);
	assert_int_equal(st->backends[1].status, SMUX_STATUS_UP);
	assert_int_equal(st->total_failovers, 0);
	smux_mux_stats_free(st);
	wait_not_hanging(f[0]);
	/* with time to spare, the next get is served as usual */
	smux_faulty_set(f[0], &(struct smux_faulty_opts){0});
	free(mh_get(mux, "k", &rc, &err));
	MH_OK(rc, &err);
	smux_backend_unref(mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	smux_backend_unref(mem);
}

/* A failover mux over a failing "f0" and a healthy "f1" with key "k",
 * on an injected clock starting at 0. */
struct cd_env {
	struct mh_clock clk;
	struct mh_events *ev;
	struct smux_backend *mem, *f[2], *mux;
};

static void cd_init(struct cd_env *c, int64_t cooldown, int64_t cap)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_FAILOVER,
		.cooldown_ms = cooldown,
		.max_cooldown_ms = cap,
	};
	struct smux_error err;

	mh_clock_init(&c->clk, 0);
	c->ev = mh_events_new();
	o.clock = &c->clk.clock;
	o.events = c->ev->bus;
	c->mem = mh_memory("mem");
	MH_OK(mh_put(c->mem, "k", "v", &err), &err);
	c->f[0] = mh_faulty("f0", c->mem, NULL);
	c->f[1] = mh_faulty("f1", c->mem, NULL);
	mh_fail(c->f[0], true);
	c->mux = mh_mux("cd", &o, c->f, NULL, 2);
	/* these tests are about the probes of failover's requests: the
	 * background thread's (test_probe_round_robin) would race them */
	smux__mux_bg_stop(smux__mux_of(c->mux));
}

static void cd_release(struct cd_env *c)
{
	smux_backend_unref(c->mux);
	smux_backend_unref(c->f[0]);
	smux_backend_unref(c->f[1]);
	smux_backend_unref(c->mem);
	mh_events_free(c->ev);
}

/* One get at @now; asserts f0 was called (or not) by it. */
static void cd_get(struct cd_env *c, int64_t now, bool f0_called)
{
	unsigned long before = smux_faulty_calls(c->f[0]);
	struct smux_error err;
	int rc;

	mh_clock_set(&c->clk, now);
	/* a test thread preempted here (CI, under ASan) would give the
	 * due probe to the background thread (it looks every BG_OVERDUE_MS
	 * while a probe is overdue) were it running: let that time pass */
	usleep(25000);
	free(mh_get(c->mux, "k", &rc, &err));
	MH_OK(rc, &err);
	if (smux_faulty_calls(c->f[0]) - before != (unsigned long)f0_called) {
		print_error("at %lld ms: f0 %s\n", (long long)now,
			    f0_called ? "not probed" : "called in cooldown");
		fail();
	}
}

static void member_health(struct smux_backend *mux, unsigned i,
			  enum smux_status *st, unsigned *failures, int64_t *at)
{
	struct smux_mux_stats *s = smux_mux_stats(mux);

	assert_non_null(s);
	*st = s->backends[i].status;
	*failures = s->backends[i].consecutive_failures;
	*at = s->backends[i].last_transition_at;
	smux_mux_stats_free(s);
}

static void test_cooldown_growth_and_cap(void **state)
{
	struct cd_env c;
	struct smux_event last;
	enum smux_status st;
	unsigned failures;
	int64_t at;

	(void)state;
	cd_init(&c, 100, 400);
	cd_get(&c, 0, true); /* fails: down until 100 */
	cd_get(&c, 50, false);
	cd_get(&c, 99, false);
	cd_get(&c, 100, true); /* probe fails: 200 ms, until 300 */
	cd_get(&c, 299, false);
	cd_get(&c, 300, true); /* 400 ms: until 700 */
	cd_get(&c, 699, false);
	cd_get(&c, 700, true); /* 800 capped at 400: until 1100 */
	cd_get(&c, 1099, false);
	cd_get(&c, 1100, true); /* still capped: until 1500 */
	cd_get(&c, 1499, false);
	member_health(c.mux, 0, &st, &failures, &at);
	assert_int_equal(st, SMUX_STATUS_DOWN);
	assert_int_equal(failures, 5);
	assert_int_equal(at, 0); /* went down at 0, never came back */
	assert_int_equal(mh_events_count(c.ev, SMUX_EV_BACKEND_DOWN), 1);
	assert_true(mh_events_last(c.ev, SMUX_EV_BACKEND_DOWN, &last));
	assert_string_equal(last.name, "f0");
	assert_true(last.has_cause);
	assert_int_equal(last.cause.code, SMUX_E_IO);

	/* healthy again: the probe at 1500 succeeds */
	mh_fail(c.f[0], false);
	cd_get(&c, 1500, true);
	member_health(c.mux, 0, &st, &failures, &at);
	assert_int_equal(st, SMUX_STATUS_UP);
	assert_int_equal(failures, 0);
	assert_int_equal(at, 1500);
	assert_int_equal(mh_events_count(c.ev, SMUX_EV_BACKEND_RECOVERED), 1);
	assert_true(mh_events_last(c.ev, SMUX_EV_BACKEND_RECOVERED, &last));
	assert_string_equal(last.name, "f0");
	assert_string_equal(last.mux, "cd");
	assert_int_equal(last.down_for_ms, 1500);
	cd_get(&c, 1501, true); /* up: first in order again */
	cd_release(&c);
}

/*
 * Calls sent to f0 while it was up and failing after it went down (the
 * writers of a copy, a fan-out: test_cdn_faults saw 9 failures in a 10 s
 * Swift outage, so the cap: 60 s before its hints replayed) are the same
 * outage: they keep its failure count and cooldown. The probe at the end
 * of the cooldown still comes at 100 and its failure doubles it.
 */
static void test_inflight_failures_keep_cooldown(void **state)
{
	struct smux_mux *mux;
	struct mux_member *m0;
	struct smux_error late;
	struct cd_env c;
	enum smux_status st;
	unsigned failures;
	int64_t at;

	(void)state;
	cd_init(&c, 100, 60000);
	cd_get(&c, 0, true); /* fails: down until 100 */
	mux = smux__mux_of(c.mux);
	pthread_rwlock_rdlock(&mux->view_lock);
	m0 = mux->view->m[0];
	pthread_rwlock_unlock(&mux->view_lock);
	smux_error_set(&late, SMUX_E_CONNECTION, "f0", "reset (late)");
	mh_clock_set(&c.clk, 10);
	for (int i = 0; i < 8; i++)
		assert_int_equal(smux__attempt_done(mux, NULL, m0, false,
						    smux_now_ns(), &late, NULL),
				 SMUX_OUTCOME_TRANSIENT);
	member_health(c.mux, 0, &st, &failures, &at);
	assert_int_equal(st, SMUX_STATUS_DOWN);
	assert_int_equal(failures, 1);
	cd_get(&c, 99, false);
	cd_get(&c, 100, true); /* probe fails: 200 ms, until 300 */
	member_health(c.mux, 0, &st, &failures, &at);
	assert_int_equal(failures, 2);
	cd_get(&c, 299, false);
	mh_fail(c.f[0], false);
	cd_get(&c, 300, true); /* back */
	member_health(c.mux, 0, &st, &failures, &at);
	assert_int_equal(st, SMUX_STATUS_UP);
	assert_int_equal(mh_events_count(c.ev, SMUX_EV_BACKEND_DOWN), 1);
	cd_release(&c);
}

/* The default cooldown is 1 s, the default cap 60 s; 2^6 is the most. */
static void test_cooldown_defaults(void **state)
{
	struct cd_env c;
	int64_t t = 0;

	(void)state;
	cd_init(&c, 0, 0);
	cd_get(&c, t, true);
	cd_get(&c, t + 999, false);
	for (int n = 1; n <= 7; n++) { /* cooldowns 1, 2, 4, .., 64 -> 60 */
		int64_t cd = 1000LL << (n - 1 < 6 ? n - 1 : 6);

		if (cd > 60000)
			cd = 60000;
		cd_get(&c, t + cd - 1, false);
		t += cd;
		cd_get(&c, t, true);
	}
	cd_release(&c);
}

/* Round-robin chooses among up members: a down one is probed (health
 * check) by the background thread once its cooldown is over (never by a
 * user request: issue 9), then is back in rotation. */
static void test_probe_round_robin(void **state)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_ROUND_ROBIN,
		.cooldown_ms = 100,
	};
	struct smux_backend *mem = mh_memory("mem"), *f[3], *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_event last;
	struct smux_error err;
	struct mh_clock clk;
	char name[32];
	int rc;

	(void)state;
	mh_clock_init(&clk, 1000);
	o.clock = &clk.clock;
	o.events = ev->bus;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		f[i] = mh_faulty(name, mem, NULL);
	}
	mh_fail(f[1], true);
	mux = mh_mux("rr", &o, f, NULL, 3);
	for (int i = 0; i < 30; i++) {
		free(mh_get(mux, "k", &rc, &err));
		MH_OK(rc, &err);
	}
	assert_int_equal(smux_faulty_calls(f[1]), 1);
	mh_fail(f[1], false);
	for (int i = 0; i < 30; i++) { /* in its cooldown: skipped */
		free(mh_get(mux, "k", &rc, &err));
		MH_OK(rc, &err);
	}
	assert_int_equal(smux_faulty_calls(f[1]), 1);
	mh_clock_set(&clk, 1100);
	/* the background thread wakes by the end of the cooldown (100 ms
	 * of real time here) and probes it */
	for (int64_t until = smux_now_ns() + 10000 * MS_NS;
	     mh_events_count(ev, SMUX_EV_BACKEND_RECOVERED) == 0 &&
	     smux_now_ns() < until;)
		usleep(1000);
	assert_int_equal(smux_faulty_calls(f[1]), 2);
	for (int i = 0; i < 30; i++) {
		free(mh_get(mux, "k", &rc, &err));
		MH_OK(rc, &err);
	}
	/* probed once, then back in rotation */
	assert_in_range(smux_faulty_calls(f[1]), 9, 12);
	assert_int_equal(mh_events_count(ev, SMUX_EV_BACKEND_RECOVERED), 1);
	assert_true(mh_events_last(ev, SMUX_EV_BACKEND_RECOVERED, &last));
	assert_string_equal(last.name, "r1");
	assert_int_equal(last.down_for_ms, 100);
	smux_backend_unref(mux);
	for (int i = 0; i < 3; i++)
		smux_backend_unref(f[i]);
	smux_backend_unref(mem);
	mh_events_free(ev);
}

/* Active health checks (what the interval timer runs): a failing check
 * marks a member down with HEALTHCHECK_FAILED; a passing one recovers it
 * once its cooldown is over. */
static void test_active_health_check(void **state)
{
	struct smux_faulty_opts hc_fails = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_HEALTHCHECK,
	};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2], *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_event last;
	struct smux_mux_stats *st;
	struct mh_clock clk;

	(void)state;
	mh_clock_init(&clk, 0);
	o.clock = &clk.clock;
	o.events = ev->bus;
	f[0] = mh_faulty("a", mem, &hc_fails);
	f[1] = mh_faulty("b", mem, NULL);
	mux = mh_mux("hc", &o, f, NULL, 2);
	smux_mux_check_health(mux);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_DOWN);
	assert_int_equal(st->backends[1].status, SMUX_STATUS_UP);
	smux_mux_stats_free(st);
	assert_true(mh_events_last(ev, SMUX_EV_BACKEND_DOWN, &last));
	assert_string_equal(last.name, "a");
	assert_int_equal(last.cause.code, SMUX_E_HEALTHCHECK_FAILED);

	smux_faulty_set(f[0], &(struct smux_faulty_opts){0});
	mh_clock_set(&clk, 5000);
	smux_mux_check_health(mux);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_UP);
	smux_mux_stats_free(st);
	assert_int_equal(mh_events_count(ev, SMUX_EV_BACKEND_RECOVERED), 1);
	smux_backend_unref(mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	smux_backend_unref(mem);
	mh_events_free(ev);
}

/* ---- the probe window ---- */

static struct smux_backend *window_member;
static unsigned window_waits;

/* smux__probe_window_hook: a request waits for the probe of the member;
 * with window_member set, the probe's health check is let go now. */
static bool window_until_up; /* and the probe is let finish first */

static void window_release(struct smux_mux *mux, struct mux_member *m)
{
	(void)mux;
	window_waits++;
	if (window_member)
		smux_faulty_release_hangs(window_member);
	/* the probe ends (the member up) before the request looks again */
	for (int64_t until = smux_now_ns() + 10000 * MS_NS;
	     window_until_up &&
	     smux__health_status(&m->health) != SMUX_STATUS_UP &&
	     smux_now_ns() < until;)
		usleep(1000);
}

/* A one-member failover mux (the daemon's single-backend root) whose
 * member is down and whose cooldown is over; the background thread is
 * inside the member's probe (its health check hangs) when this returns. */
static struct smux_backend *window_mux(struct smux_backend *f,
				       struct mh_clock *clk, int64_t timeout_ms)
{
	struct smux_faulty_opts hc_hangs = {
		.hang_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_HEALTHCHECK,
	};
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_FAILOVER,
		.cooldown_ms = 100,
		.backend_timeout_ms = timeout_ms,
	};
	struct smux_backend *mux;
	struct smux_error err;
	int rc;

	mh_clock_init(clk, 1000);
	o.clock = &clk->clock;
	mux = mh_mux("root", &o, &f, NULL, 1);
	mh_fail(f, true);
	free(mh_get(mux, "k", &rc, &err)); /* down until 1100 */
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	smux_faulty_set(f, &hc_hangs);
	mh_clock_set(clk, 1100);
	/* the background thread wakes by the end of the cooldown (100 ms of
	 * real time) and probes the member */
	for (int64_t until = smux_now_ns() + 10000 * MS_NS;
	     !smux_faulty_hanging(f) && smux_now_ns() < until;)
		usleep(1000);
	assert_int_equal(smux_faulty_hanging(f), 1);
	return mux;
}

/*
 * A request that finds no other member while the background thread probes
 * the only one waits for that probe instead of failing at once with
 * ALL_BACKENDS_DOWN (EIO for a program right when its backend came back):
 * the probe succeeds, the request is served (a get, a writer's open).
 * And the wait is bounded: a
 * probe that never answers fails at the member's deadline, and so does
 * the request.
 */
static void test_probe_window_one_member(void **state)
{
	struct smux_backend *mem = mh_memory("mem"), *f, *mux;
	struct smux_error err;
	struct mh_clock clk;
	char *got;
	int rc;

	(void)state;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	f = mh_faulty("only", mem, NULL);
	smux__probe_window_hook = window_release;

	/* the probe succeeds while the request waits for it */
	mux = window_mux(f, &clk, 0);
	window_member = f;
	window_waits = 0;
	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "v");
	free(got);
	assert_int_equal(window_waits, 1);
	smux_backend_unref(mux);

	/* a writer opened in the window (the file open for writing): the
	 * same */
	mux = window_mux(f, &clk, 0);
	window_waits = 0;
	{
		struct smux_writer *w = NULL;
		struct smux_ctx ctx;

		smux_ctx_init(&ctx);
		MH_OK(smux_backend_writer_open(mux, &ctx, "k",
					       SMUX_WRITER_TRUNC, &w, &err),
		      &err);
		MH_OK(smux_writer_pwrite(w, &ctx, "w", 1, 0, &err), &err);
		MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
		smux_writer_close(w);
	}
	assert_int_equal(window_waits, 1);
	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "w");
	free(got);
	smux_backend_unref(mux);

	/* the probe hangs until its deadline (1 s: 100 ms was too short
	 * for a loaded machine to even start the calls): the request waits
	 * no longer than that and fails */
	mux = window_mux(f, &clk, 1000);
	window_member = NULL;
	window_waits = 0;
	free(mh_get(mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	assert_int_equal(window_waits, 1);
	smux_faulty_release_hangs(f);
	wait_not_hanging(f);
	smux_backend_unref(mux);

	smux__probe_window_hook = NULL;
	smux_backend_unref(f);
	smux_backend_unref(mem);
}

/* smux__probe_walk_hook: the probe of window_member's member is let go
 * and ends (the member up) before the walk looks at the members again. */
static void walk_release(struct smux_mux *mux)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *m = v->m[0];

	smux_faulty_release_hangs(window_member);
	for (int64_t until = smux_now_ns() + 10000 * MS_NS;
	     smux__health_status(&m->health) != SMUX_STATUS_UP &&
	     smux_now_ns() < until;)
		usleep(1000);
	smux__view_put(v);
}

/*
 * The probe another caller runs ends - the member up - after the walk's
 * health check passed the member over and before the walk, out of
 * members, looks for a probe to wait for: none runs any more, and the
 * walk must try the member instead of answering ALL_BACKENDS_DOWN.
 */
static void test_probe_ends_before_walk_looks(void **state)
{
	struct smux_backend *mem = mh_memory("mem"), *f, *mux;
	struct smux_error err;
	struct mh_clock clk;
	char *got;
	int rc;

	(void)state;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	f = mh_faulty("only", mem, NULL);
	mux = window_mux(f, &clk, 0);
	window_member = f;
	smux__probe_walk_hook = walk_release;
	got = mh_get(mux, "k", &rc, &err);
	smux__probe_walk_hook = NULL;
	MH_OK(rc, &err);
	assert_string_equal(got, "v");
	free(got);
	smux_backend_unref(mux);
	smux_backend_unref(f);
	smux_backend_unref(mem);
}

/*
 * The probe ends - the member up - between the request's failed acquire
 * and its next look at the probe: the request must try the member, not
 * fail because no probe runs any more (the race behind test_mux_failover's
 * test_no_stale_read failing 1 run in a few thousand under load: a
 * standby back at the health check was passed over and the read answered
 * ALL_BACKENDS_DOWN).
 */
static void test_probe_window_ends_between_looks(void **state)
{
	struct smux_backend *mem = mh_memory("mem"), *f, *mux;
	struct smux_error err;
	struct mh_clock clk;
	char *got;
	int rc;

	(void)state;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	f = mh_faulty("only", mem, NULL);
	smux__probe_window_hook = window_release;
	mux = window_mux(f, &clk, 0);
	window_member = f;
	window_until_up = true;
	window_waits = 0;
	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "v");
	free(got);
	assert_int_equal(window_waits, 1);
	window_until_up = false;
	smux__probe_window_hook = NULL;
	smux_backend_unref(mux);
	smux_backend_unref(f);
	smux_backend_unref(mem);
}

/*
 * A mirror of two: "other" (first) and "back" (second), both down since
 * clock 1000 (cooldown 100). At 1100 the background thread probes them
 * in order: other's health check fails (@other_up false: every call of
 * other fails, its cooldown grows) or passes (@other_up true: only its
 * puts and writers fail), then back's hangs. Returns once the background
 * thread is inside back's probe.
 */
static struct smux_backend *window_mirror(struct smux_backend *other,
					  struct smux_backend *back,
					  struct mh_clock *clk, bool other_up)
{
	struct smux_faulty_opts hc_hangs = {
		.hang_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_HEALTHCHECK,
	};
	struct smux_faulty_opts writes_fail = {
		.error_rate = 1.0,
		.ops = (1u << SMUX_FAULTY_PUT) | (1u << SMUX_FAULTY_WRITER),
	};
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_MIRROR,
		.cooldown_ms = 100,
	};
	struct smux_backend *bs[2] = {other, back}, *mux;
	struct mux_view *v;
	struct smux_error err;

	mh_clock_init(clk, 1000);
	o.clock = &clk->clock;
	mux = mh_mux("mirror", &o, bs, NULL, 2);
	mh_fail(other, true);
	mh_fail(back, true);
	MH_ERR(mh_put(mux, "k", "old", &err), &err, SMUX_E_ALL_BACKENDS_DOWN);
	if (other_up)
		smux_faulty_set(other, &writes_fail);
	smux_faulty_set(back, &hc_hangs);
	mh_clock_set(clk, 1100);
	for (int64_t until = smux_now_ns() + 10000 * MS_NS;
	     !smux_faulty_hanging(back) && smux_now_ns() < until;)
		usleep(1000);
	assert_int_equal(smux_faulty_hanging(back), 1);
	v = smux__view_get(smux__mux_of(mux));
	assert_int_equal(smux__health_status(&v->m[0]->health),
			 other_up ? SMUX_STATUS_UP : SMUX_STATUS_DOWN);
	smux__view_put(v);
	return mux;
}

/* On window_mirror's mux: a put (or a writer's open, write and commit)
 * of @data to @key waits once for back's probe and lands on @landed
 * (back's store). Returns the mux. */
static struct smux_backend *
window_write(struct smux_backend *other, struct smux_backend *back,
	     struct smux_backend *landed, struct mh_clock *clk, bool other_up,
	     bool writer, const char *key, const char *data)
{
	struct smux_backend *mux = window_mirror(other, back, clk, other_up);
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	window_waits = 0;
	if (!writer) {
		MH_OK(mh_put(mux, key, data, &err), &err);
	} else {
		MH_OK(smux_backend_writer_open(mux, &ctx, key,
					       SMUX_WRITER_TRUNC, &w, &err),
		      &err);
		MH_OK(smux_writer_pwrite(w, &ctx, data, strlen(data), 0, &err),
		      &err);
		MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
		smux_writer_close(w);
	}
	assert_int_equal(window_waits, 1);
	MH_HOLDS(landed, key, data);
	return mux;
}

/*
 * A mirror write whose other replicas are down (or fail it) while the
 * background thread probes a replica that is coming back waits for that
 * probe, as a failover request does, and lands there: not
 * ALL_BACKENDS_DOWN (EIO for the program) right as the replica is back.
 * The replica that missed it gets a hint.
 */
static void test_probe_window_mirror(void **state)
{
	struct smux_backend *mem1 = mh_memory("mem1"),
			    *mem2 = mh_memory("mem2");
	struct smux_backend *other, *back, *mux;
	struct mh_clock clk;

	(void)state;
	other = mh_faulty("other", mem1, NULL);
	back = mh_faulty("back", mem2, NULL);
	smux__probe_window_hook = window_release;
	window_member = back;

	/* other down, not due: the put waits for back's probe */
	mux = window_write(other, back, mem2, &clk, false, false, "k", "v1");
	{
		struct mux_view *v = smux__view_get(smux__mux_of(mux));

		assert_true(
			smux__member_stale(smux__mux_of(mux), v->m[0], "k"));
		smux__view_put(v);
	}
	smux_backend_unref(mux);
	/* a writer (a file opened for writing) the same */
	smux_backend_unref(
		window_write(other, back, mem2, &clk, false, true, "w", "w1"));
	/* other up, but its put fails: the put then waits for back */
	smux_backend_unref(
		window_write(other, back, mem2, &clk, true, false, "k", "v2"));
	/* other up, but its writer fails to open: the open then waits for
	 * back (before, only a writer with no replica to open on did) */
	smux_backend_unref(
		window_write(other, back, mem2, &clk, true, true, "w2", "w2"));

	smux__probe_window_hook = NULL;
	window_member = NULL;
	smux_backend_unref(back);
	smux_backend_unref(other);
	smux_backend_unref(mem2);
	smux_backend_unref(mem1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_abort),
		cmocka_unit_test(test_hang_ignoring_cancel),
		cmocka_unit_test(test_caller_deadline),
		cmocka_unit_test(test_cooldown_growth_and_cap),
		cmocka_unit_test(test_inflight_failures_keep_cooldown),
		cmocka_unit_test(test_cooldown_defaults),
		cmocka_unit_test(test_probe_round_robin),
		cmocka_unit_test(test_active_health_check),
		cmocka_unit_test(test_probe_window_one_member),
		cmocka_unit_test(test_probe_window_ends_between_looks),
		cmocka_unit_test(test_probe_ends_before_walk_looks),
		cmocka_unit_test(test_probe_window_mirror),
	};

	return cmocka_run_group_tests_name("mux health", tests, NULL, NULL);
}
