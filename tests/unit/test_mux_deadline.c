// SPDX-License-Identifier: MIT
/*
 * test_mux_deadline.c - issue 9 part D through a mux of faulty members:
 * deadlines that fit transfers (the budget starts when the member starts
 * the call, a stream that keeps moving is not cut, a stalled one still
 * fails), probes that never run on a user request, a bounded stop with a
 * member hung for good, and a mirror read whose first replica breaks
 * mid-stream.
 *
 * Timing: these tests are about deadlines, so some use real time, always
 * with a wide margin (hundreds of ms) between what must pass and what must
 * fail; nothing asserts on how fast a call was. Waits for a state poll a
 * condition (MH_SOON), never sleep for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "mux_helpers.h"

/* Polls @cond every ms for up to @ms milliseconds, then asserts it. */
#define MH_SOON(cond, ms)                                             \
	do {                                                          \
		int64_t until_ = smux_now_ns() + (int64_t)(ms)*MS_NS; \
		while (!(cond) && smux_now_ns() < until_)             \
			usleep(1000);                                 \
		assert_true(cond);                                    \
	} while (0)

/* Two faulty members f0, f1 over one shared memory backend. */
struct duo {
	struct smux_backend *mem;
	struct smux_backend *f[2];
};

static void duo_init(struct duo *d, const struct smux_faulty_opts *o0)
{
	d->mem = mh_memory("mem");
	d->f[0] = mh_faulty("f0", d->mem, o0);
	d->f[1] = mh_faulty("f1", d->mem, NULL);
}

static void duo_release(struct duo *d)
{
	smux_backend_unref(d->f[0]);
	smux_backend_unref(d->f[1]);
	smux_backend_unref(d->mem);
}

/* 100 bytes: "0123456789" ten times. */
static const char *hundred(void)
{
	static char s[101];

	for (int i = 0; i < 100; i++)
		s[i] = (char)('0' + i % 10);
	s[100] = '\0';
	return s;
}

static struct smux_backend_stats member_stats(struct smux_backend *mux,
					      unsigned i)
{
	struct smux_mux_stats *st = smux_mux_stats(mux);
	struct smux_backend_stats b;

	assert_non_null(st);
	assert_true(i < st->n_backends);
	b = st->backends[i];
	b.child = NULL;
	smux_mux_stats_free(st);
	return b;
}

/* ---- deadlines ---- */

/*
 * A 100-byte object that f0 streams in 10 pieces, one every 100 ms (about
 * 1 s in all), under a 400 ms budget: the stream keeps moving, so the get
 * finishes on f0, and f0 is neither timed out nor marked down. Before
 * issue 9 one fixed deadline covered the whole transfer: the get timed out
 * at 400 ms, f0 went down and f1 served it.
 */
static void test_slow_stream_finishes(void **state)
{
	struct smux_faulty_opts o = {
		.ops = 1u << SMUX_FAULTY_GET,
		.stream_chunk = 10,
		.stream_chunk_ms = 100,
	};
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = 400,
		.cooldown_ms = 600000,
	};
	struct smux_backend *mux;
	struct smux_backend_stats b;
	struct smux_error err;
	struct duo d;
	int64_t t0;
	char *got;
	int rc;

	(void)state;
	duo_init(&d, &o);
	MH_OK(mh_put(d.mem, "big", hundred(), &err), &err);
	mux = mh_mux("dl", &mo, d.f, NULL, 2);
	t0 = smux_now_ns();
	got = mh_get(mux, "big", &rc, &err);
	print_message("  slow stream: %lld ms under a 400 ms budget\n",
		      (long long)((smux_now_ns() - t0) / MS_NS));
	MH_OK(rc, &err);
	assert_string_equal(got, hundred());
	free(got);
	assert_int_equal(smux_faulty_calls(d.f[1]), 0);
	b = member_stats(mux, 0);
	assert_int_equal(b.timeouts, 0);
	assert_int_equal(b.errors, 0);
	assert_int_equal(b.hits, 1);
	assert_int_equal(b.status, SMUX_STATUS_UP);
	smux_backend_unref(mux);
	duo_release(&d);
}

/*
 * f0 sends 10 bytes and then stalls for good: the get fails on f0 one
 * budget after its last byte (BACKEND_TIMEOUT, charged: f0 goes down) and
 * f1 serves the whole object from the start.
 */
static void test_stalled_stream_fails(void **state)
{
	struct smux_faulty_opts o = {
		.ops = 1u << SMUX_FAULTY_GET,
		.hang_rate = 1,
		.get_fault_after = 10,
	};
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = 300,
		.cooldown_ms = 600000,
	};
	struct smux_backend *mux;
	struct smux_backend_stats b;
	struct smux_error err;
	struct duo d;
	char *got;
	int rc;

	(void)state;
	duo_init(&d, &o);
	MH_OK(mh_put(d.mem, "big", hundred(), &err), &err);
	mux = mh_mux("dl", &mo, d.f, NULL, 2);
	got = mh_get(mux, "big", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, hundred());
	free(got);
	b = member_stats(mux, 0);
	assert_int_equal(b.timeouts, 1);
	assert_int_equal(b.status, SMUX_STATUS_DOWN);
	smux_backend_unref(mux);
	smux_faulty_release_hangs(d.f[0]);
	duo_release(&d);
}

struct bg_get {
	struct smux_backend *mux;
	const char *key;
	int rc;
	char *got;
	struct smux_error err;
};

static void *bg_get_main(void *arg)
{
	struct bg_get *g = arg;

	g->got = mh_get(g->mux, g->key, &g->rc, &g->err);
	return NULL;
}

/*
 * max_inflight 1 and two gets of f0, each taking 1500 ms, under a 2600 ms
 * budget: the second waits in f0's queue for about 1500 ms, then runs
 * 1500 ms. Its budget starts when f0 starts it, so it succeeds on f0 and
 * nothing is charged to f0. Before issue 9 the budget ran from the moment
 * it was queued: it timed out 1100 ms into its own call and f0 went down.
 * (1.1 s of slack for a loaded machine: 600/1000 ms failed at load 50.)
 */
static void test_queue_time_not_charged(void **state)
{
	struct smux_faulty_opts o = {
		.ops = 1u << SMUX_FAULTY_GET,
		.latency_ms = 1500,
	};
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = 2600,
		.cooldown_ms = 600000,
		.max_inflight = 1,
	};
	struct bg_get g = {.key = "k"};
	struct smux_backend *mux;
	struct smux_backend_stats b;
	struct smux_error err;
	pthread_t th;
	struct duo d;
	char *got;
	int rc;

	(void)state;
	duo_init(&d, &o);
	MH_OK(mh_put(d.mem, "k", "v", &err), &err);
	mux = mh_mux("dl", &mo, d.f, NULL, 2);
	g.mux = mux;
	assert_int_equal(pthread_create(&th, NULL, bg_get_main, &g), 0);
	/* the first get is inside f0 (its latency) */
	MH_SOON(smux_faulty_calls(d.f[0]) == 1, 5000);
	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "v");
	free(got);
	pthread_join(th, NULL);
	MH_OK(g.rc, &g.err);
	free(g.got);
	assert_int_equal(smux_faulty_calls(d.f[1]), 0);
	b = member_stats(mux, 0);
	assert_int_equal(b.timeouts, 0);
	assert_int_equal(b.hits, 2);
	assert_int_equal(b.status, SMUX_STATUS_UP);
	smux_backend_unref(mux);
	duo_release(&d);
}

/* ---- probes off the I/O path, bounded stop ---- */

struct bg_gets {
	struct smux_backend *mux;
	int n, failed;
	atomic_bool done;
};

static void *bg_gets_main(void *arg)
{
	struct bg_gets *g = arg;
	struct smux_error err;
	int rc;

	for (int i = 0; i < g->n; i++) {
		free(mh_get(g->mux, "k", &rc, &err));
		if (rc)
			g->failed++;
	}
	atomic_store(&g->done, true);
	return NULL;
}

/* Three round-robin members, r1 down with its cooldown over and a health
 * check that hangs until released; no backend timeout; active health
 * checks every @healthcheck_interval_ms (0: none). */
struct probe_env {
	struct smux_backend *mem, *f[3], *mux;
	struct mh_events *ev;
	struct mh_clock clk;
};

static void probe_env_init(struct probe_env *p, bool ignores_cancel,
			   int64_t healthcheck_interval_ms)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_ROUND_ROBIN,
		.cooldown_ms = 100,
		.backend_timeout_ms = -1,
		.healthcheck_interval_ms = healthcheck_interval_ms,
	};
	struct smux_faulty_opts hang = {
		.ops = 1u << SMUX_FAULTY_HEALTHCHECK,
		.hang_rate = 1,
		.hang_ignores_cancel = ignores_cancel,
	};
	struct smux_error err;
	char name[32];
	int rc;

	p->mem = mh_memory("mem");
	p->ev = mh_events_new();
	mh_clock_init(&p->clk, 1000);
	o.clock = &p->clk.clock;
	o.events = p->ev->bus;
	MH_OK(mh_put(p->mem, "k", "v", &err), &err);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		p->f[i] = mh_faulty(name, p->mem, NULL);
	}
	mh_fail(p->f[1], true);
	p->mux = mh_mux("rr", &o, p->f, NULL, 3);
	for (int i = 0; i < 3; i++) {
		free(mh_get(p->mux, "k", &rc, &err));
		MH_OK(rc, &err);
	}
	assert_int_equal(mh_events_count(p->ev, SMUX_EV_BACKEND_DOWN), 1);
	smux_faulty_set(p->f[1], &hang);
	mh_clock_set(&p->clk, 1100); /* r1's cooldown is over */
}

static void probe_env_release(struct probe_env *p)
{
	for (int i = 0; i < 3; i++)
		smux_backend_unref(p->f[i]);
	smux_backend_unref(p->mem);
	mh_events_free(p->ev);
}

/*
 * Issue 9: round-robin (also weighted, sticky) probed a down member whose
 * cooldown was over on the next user request, which then waited for the
 * health check: up to backend_timeout per hung member, here (no timeout)
 * for ever. Now the background thread probes; 30 gets finish while the
 * probe hangs (a watchdog of 10 s tells a hang from a pass), then the
 * probe, released, brings r1 back.
 */
static void test_probe_off_request_path(void **state)
{
	struct bg_gets g = {.n = 30};
	struct probe_env p;
	pthread_t th;

	(void)state;
	probe_env_init(&p, false, 0);
	g.mux = p.mux;
	atomic_init(&g.done, false);
	assert_int_equal(pthread_create(&th, NULL, bg_gets_main, &g), 0);
	MH_SOON(atomic_load(&g.done), 10000);
	pthread_join(th, NULL);
	assert_int_equal(g.failed, 0);
	/* the background thread is the one waiting for r1 */
	MH_SOON(smux_faulty_hanging(p.f[1]) == 1, 10000);
	smux_faulty_release_hangs(p.f[1]);
	MH_SOON(mh_events_count(p.ev, SMUX_EV_BACKEND_RECOVERED) == 1, 10000);
	smux_backend_unref(p.mux);
	probe_env_release(&p);
}

struct bg_unref {
	struct smux_backend *mux;
	atomic_bool done;
};

static void *bg_unref_main(void *arg)
{
	struct bg_unref *u = arg;

	smux_backend_unref(u->mux);
	atomic_store(&u->done, true);
	return NULL;
}

/*
 * Issue 9: the mux's stop joined its background thread, which could be
 * waiting for a member hung for good (no backend timeout, a health check
 * stuck in a system call: it ignores cancellation), here in an active
 * health check (or the probe). The stop cancels the
 * thread's calls now: destroying the mux returns (watchdog 10 s), the hung
 * call is left to its worker.
 */
static void test_stop_bounded(void **state)
{
	struct bg_unref u;
	struct probe_env p;
	pthread_t th;
	int64_t t0;

	(void)state;
	probe_env_init(&p, true, 50);
	MH_SOON(smux_faulty_hanging(p.f[1]) == 1, 10000);
	u.mux = p.mux;
	atomic_init(&u.done, false);
	t0 = smux_now_ns();
	assert_int_equal(pthread_create(&th, NULL, bg_unref_main, &u), 0);
	MH_SOON(atomic_load(&u.done), 10000);
	print_message("  stop with a member hung for good: %lld ms\n",
		      (long long)((smux_now_ns() - t0) / MS_NS));
	pthread_join(th, NULL);
	smux_faulty_release_hangs(p.f[1]);
	MH_SOON(smux_faulty_hanging(p.f[1]) == 0, 10000);
	probe_env_release(&p);
}

/* ---- mirror read mid-stream ---- */

/* A mirror over f0 (faults @o0) and f1 (faults @o1), both holding the
 * 100-byte "big" (one shared memory backend). */
static struct smux_backend *mirror_of(struct duo *d,
				      const struct smux_faulty_opts *o0,
				      const struct smux_faulty_opts *o1)
{
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_MIRROR,
		.cooldown_ms = 600000,
	};
	struct smux_error err;

	duo_init(d, o0);
	smux_faulty_set(d->f[1], o1);
	MH_OK(mh_put(d->mem, "big", hundred(), &err), &err);
	return mh_mux("mir", &mo, d->f, NULL, 2);
}

/*
 * Issue 9: the replica that owned the first bytes of a mirror read failed
 * mid-stream while the other, healthy, was still on its way: the other
 * was refused the sink and the read failed. Now the sink is rewound and
 * handed over: f1 (300 ms late) serves the whole object.
 */
static void test_mirror_owner_fails_other_running(void **state)
{
	struct smux_faulty_opts o0 = {
		.ops = 1u << SMUX_FAULTY_GET,
		.error_rate = 1,
		.get_fault_after = 10,
	};
	struct smux_faulty_opts o1 = {
		.ops = 1u << SMUX_FAULTY_GET,
		.latency_ms = 300,
	};
	struct smux_backend *mux;
	struct smux_error err;
	struct duo d;
	char *got;
	int rc;

	(void)state;
	mux = mirror_of(&d, &o0, &o1);
	got = mh_get(mux, "big", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, hundred());
	free(got);
	assert_int_equal(member_stats(mux, 0).status, SMUX_STATUS_DOWN);
	assert_int_equal(member_stats(mux, 1).status, SMUX_STATUS_UP);
	smux_backend_unref(mux);
	duo_release(&d);
}

/*
 * The same, but f1 had already been refused (f0 owned the sink and kept
 * streaming, slowly) when f0 broke: the read goes on from f1, from the
 * start, instead of failing. f0's first bytes come at 300 ms, f1 answers
 * at 1200 ms, f0 breaks after its sixth chunk (1800 ms): 900 and 600 ms
 * of slack for a loaded machine (150 ms failed at load 50).
 */
static void test_mirror_owner_fails_others_refused(void **state)
{
	struct smux_faulty_opts o0 = {
		.ops = 1u << SMUX_FAULTY_GET,
		.error_rate = 1,
		.get_fault_after = 60,
		.stream_chunk = 10,
		.stream_chunk_ms = 300,
	};
	struct smux_faulty_opts o1 = {
		.ops = 1u << SMUX_FAULTY_GET,
		.latency_ms = 1200,
	};
	struct smux_backend *mux;
	struct smux_error err;
	struct duo d;
	char *got;
	int rc;

	(void)state;
	mux = mirror_of(&d, &o0, &o1);
	got = mh_get(mux, "big", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, hundred());
	free(got);
	assert_int_equal(smux_faulty_calls(d.f[1]), 2); /* refused, then read */
	assert_int_equal(member_stats(mux, 0).status, SMUX_STATUS_DOWN);
	smux_backend_unref(mux);
	duo_release(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slow_stream_finishes),
		cmocka_unit_test(test_stalled_stream_fails),
		cmocka_unit_test(test_queue_time_not_charged),
		cmocka_unit_test(test_probe_off_request_path),
		cmocka_unit_test(test_stop_bounded),
		cmocka_unit_test(test_mirror_owner_fails_other_running),
		cmocka_unit_test(test_mirror_owner_fails_others_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
