// SPDX-License-Identifier: MIT
/*
 * test_events.c - the event bus (src/core/events.c): delivery order, copies,
 * a slow subscriber never slowing emit, drops, unsubscribe guarantees,
 * flush, the recent ring, the JSON of every topic, concurrent emitters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "smux/ctx.h"
#include "smux/events.h"

#define MS 1000000LL

/* ---- a recording subscriber ---- */

#define REC_MAX 4096

struct rec {
	pthread_mutex_t lock;
	unsigned n;				 /* protected by lock */
	enum smux_topic topic[REC_MAX];		 /* protected by lock */
	char name[REC_MAX][SMUX_ERROR_NAME_MAX]; /* protected by lock */
	int64_t at[REC_MAX];			 /* protected by lock */
	atomic_int sleep_ms;			 /* per event */
	atomic_int in_cb;			 /* inside the callback now */
	atomic_int calls;			 /* callbacks started */
	atomic_int finished;			 /* callbacks returned */
};

static struct rec *rec_new(void)
{
	struct rec *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	pthread_mutex_init(&r->lock, NULL);
	return r;
}

static void rec_free(struct rec *r)
{
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static unsigned rec_count(struct rec *r)
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->n;
	pthread_mutex_unlock(&r->lock);
	return n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void rec_cb(void *arg, const struct smux_event *ev)
{
	struct rec *r = arg;
	int ms;

	atomic_fetch_add(&r->calls, 1);
	atomic_store(&r->in_cb, 1);
	ms = atomic_load(&r->sleep_ms);
	if (ms > 0)
		sleep_ms(ms);
	pthread_mutex_lock(&r->lock);
	if (r->n < REC_MAX) {
		r->topic[r->n] = ev->topic;
		snprintf(r->name[r->n], sizeof(r->name[0]), "%s", ev->name);
		r->at[r->n] = ev->at_ms;
		r->n++;
	}
	pthread_mutex_unlock(&r->lock);
	atomic_store(&r->in_cb, 0);
	atomic_fetch_add(&r->finished, 1);
}

static void emit_named(struct smux_events *bus, enum smux_topic t,
		       const char *prefix, int i)
{
	struct smux_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.topic = t;
	snprintf(ev.mux, sizeof(ev.mux), "m");
	snprintf(ev.name, sizeof(ev.name), "%s%d", prefix, i);
	smux_events_emit(bus, &ev);
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- tests ---- */

static void test_topic_names(void **state)
{
	static const char *const want[SMUX_TOPIC_COUNT] = {
		"storage-mux.backend.down",
		"storage-mux.backend.recovered",
		"storage-mux.failover",
		"storage-mux.fanout-partial",
		"storage-mux.drain.started",
		"storage-mux.drain.completed",
		"storage-mux.backend.added",
		"storage-mux.backend.removed",
		"storage-mux.weight.changed",
		"storage-mux.hint.recorded",
		"storage-mux.hint.replayed",
		"storage-mux.reconciled",
		"storage-mux.backend.misconfigured",
	};

	(void)state;
	for (int t = 0; t < SMUX_TOPIC_COUNT; t++)
		assert_string_equal(smux_topic_name((enum smux_topic)t),
				    want[t]);
	assert_non_null(smux_topic_name(SMUX_TOPIC_COUNT));
}

static void test_null_bus(void **state)
{
	struct smux_event ev = {0};

	(void)state;
	smux_events_emit(NULL, &ev);
	smux_events_flush(NULL);
	smux_events_unsubscribe(NULL, 1);
	assert_int_equal(smux_events_dropped(NULL), 0);
	assert_int_equal(smux_events_recent(NULL, &ev, 1), 0);
	assert_int_equal(smux_events_subscribe(NULL, rec_cb, NULL), -EINVAL);
	smux_events_free(NULL);
}

static void test_order(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct rec *a = rec_new(), *b = rec_new();
	int ida, idb;
	char want[32];

	(void)state;
	assert_non_null(bus);
	ida = smux_events_subscribe(bus, rec_cb, a);
	idb = smux_events_subscribe(bus, rec_cb, b);
	assert_true(ida > 0);
	assert_true(idb > 0);
	assert_int_not_equal(ida, idb);
	for (int i = 0; i < 500; i++)
		emit_named(bus, (enum smux_topic)(i % SMUX_TOPIC_COUNT), "e",
			   i);
	smux_events_flush(bus);
	assert_int_equal(rec_count(a), 500);
	assert_int_equal(rec_count(b), 500);
	for (unsigned i = 0; i < 500; i++) {
		snprintf(want, sizeof(want), "e%u", i);
		assert_string_equal(a->name[i], want);
		assert_string_equal(b->name[i], want);
		assert_int_equal(a->topic[i], i % SMUX_TOPIC_COUNT);
	}
	assert_int_equal(smux_events_dropped(bus), 0);
	smux_events_free(bus);
	rec_free(a);
	rec_free(b);
}

static void test_payload_copied(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct rec *r = rec_new();
	struct smux_event *ev = calloc(1, sizeof(*ev));
	int64_t before = wall_ms(), after;

	(void)state;
	assert_non_null(bus);
	assert_non_null(ev);
	atomic_store(&r->sleep_ms, 20); /* delivery after the clobbering */
	smux_events_subscribe(bus, rec_cb, r);

	ev->topic = SMUX_EV_BACKEND_DOWN;
	snprintf(ev->name, sizeof(ev->name), "original");
	smux_events_emit(bus, ev);
	/* the caller's struct is reused at once */
	snprintf(ev->name, sizeof(ev->name), "clobbered");
	ev->at_ms = 1234;
	smux_events_emit(bus, ev);
	memset(ev, 0xff, sizeof(*ev));
	free(ev);

	smux_events_flush(bus);
	after = wall_ms();
	assert_int_equal(rec_count(r), 2);
	assert_string_equal(r->name[0], "original");
	/* at_ms stamped with wall-clock time when 0, kept otherwise */
	assert_true(r->at[0] >= before && r->at[0] <= after);
	assert_string_equal(r->name[1], "clobbered");
	assert_int_equal(r->at[1], 1234);
	smux_events_free(bus);
	rec_free(r);
}

static void keep_last_cb(void *arg, const struct smux_event *ev)
{
	*(struct smux_event *)arg = *ev; /* flushed before it is read */
}

/* Failure lists survive the trip through the queue and the recent ring;
 * unused slots come out zeroed, an oversized count is clamped. */
static void test_fanout_roundtrip(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct smux_event *ev = calloc(3, sizeof(*ev));
	struct smux_event *got = ev + 1, *recent = ev + 2;

	(void)state;
	assert_non_null(bus);
	assert_non_null(ev);
	smux_events_subscribe(bus, keep_last_cb, got);
	ev->topic = SMUX_EV_FANOUT_PARTIAL;
	snprintf(ev->mode, sizeof(ev->mode), "mirror");
	ev->n_failed = 3;
	for (int i = 0; i < 3; i++) {
		snprintf(ev->failed[i], sizeof(ev->failed[i]), "r%d", i);
		ev->causes[i].code = SMUX_E_IO;
		snprintf(ev->causes[i].message, sizeof(ev->causes[i].message),
			 "m%d", i);
	}
	/* garbage past n_failed must not travel */
	snprintf(ev->failed[3], sizeof(ev->failed[3]), "stale");
	ev->causes[3].code = SMUX_E_NO_SPACE;
	memset(got, 0xaa, sizeof(*got));
	smux_events_emit(bus, ev);
	smux_events_flush(bus);
	assert_int_equal(got->topic, SMUX_EV_FANOUT_PARTIAL);
	assert_string_equal(got->mode, "mirror");
	assert_int_equal(got->n_failed, 3);
	assert_string_equal(got->failed[2], "r2");
	assert_string_equal(got->causes[2].message, "m2");
	assert_int_equal(got->causes[1].code, SMUX_E_IO);
	assert_string_equal(got->failed[3], "");
	assert_int_equal(got->causes[3].code, SMUX_OK);
	assert_int_equal(got->causes[SMUX_EVENT_MAX_FAILED - 1].code, SMUX_OK);
	assert_int_equal(smux_events_recent(bus, recent, 1), 1);
	assert_string_equal(recent->failed[0], "r0");
	assert_string_equal(recent->failed[3], "");

	ev->n_failed = 1000; /* clamped to the array */
	snprintf(ev->failed[SMUX_EVENT_MAX_FAILED - 1], sizeof(ev->failed[0]),
		 "last");
	smux_events_emit(bus, ev);
	smux_events_flush(bus);
	assert_int_equal(got->n_failed, SMUX_EVENT_MAX_FAILED);
	assert_string_equal(got->failed[SMUX_EVENT_MAX_FAILED - 1], "last");
	smux_events_free(bus);
	free(ev);
}

/*
 * One round of the slow-subscriber test on a fresh bus: emits QUEUE + 100
 * events to a subscriber that takes 200 ms per event. Returns the time the
 * first 1000 emits took; fills the time of all and the drops seen right
 * after. Checks what was delivered once the subscriber is made fast.
 */
static int64_t slow_round(int64_t *t_all, uint64_t *dropped)
{
	struct smux_events *bus = smux_events_new();
	struct rec *r = rec_new();
	const unsigned total = SMUX_EVENTS_QUEUE + 100;
	int64_t t0, t_first = 0;
	char want[32];

	assert_non_null(bus);
	atomic_store(&r->sleep_ms, 200);
	smux_events_subscribe(bus, rec_cb, r);

	t0 = smux_now_ns();
	for (unsigned i = 0; i < total; i++) {
		emit_named(bus, SMUX_EV_FAILOVER, "e", (int)i);
		if (i == 999)
			t_first = smux_now_ns() - t0;
		if (smux_now_ns() - t0 > 1000 * MS) {
			/* emit waits for the subscriber: give up */
			atomic_store(&r->sleep_ms, 0);
			smux_events_free(bus);
			rec_free(r);
			*t_all = INT64_MAX;
			*dropped = 0;
			return INT64_MAX;
		}
	}
	*t_all = smux_now_ns() - t0;
	*dropped = smux_events_dropped(bus);
	print_message("1000 emits: %.2f ms, %u emits: %.2f ms, dropped %llu\n",
		      (double)t_first / MS, total, (double)*t_all / MS,
		      (unsigned long long)*dropped);

	/* every event was delivered or dropped; the newest survived */
	atomic_store(&r->sleep_ms, 0);
	smux_events_flush(bus);
	assert_int_equal(rec_count(r) + smux_events_dropped(bus), total);
	snprintf(want, sizeof(want), "e%u", total - 1);
	assert_string_equal(r->name[rec_count(r) - 1], want);
	smux_events_free(bus);
	rec_free(r);
	return t_first;
}

static void test_slow_subscriber(void **state)
{
	int64_t t_first = 0, t_all = 0;
	uint64_t dropped = 0;

	(void)state;
	/* One delivery takes 200 ms, 1000 emits must take under 50 ms. An
	 * emit that waited for the subscriber fails every round; a round
	 * spoiled by a busy machine is retried, twice at most. */
	for (int round = 0; round < 3; round++) {
		t_first = slow_round(&t_all, &dropped);
		if (t_first < 50 * MS && t_all < 150 * MS)
			break;
	}
	assert_true(t_first < 50 * MS);
	assert_true(t_all < 150 * MS);
	/* all emits fell within the first delivery: the queue overflowed
	 * by 100, less the one event the dispatcher may have taken out */
	assert_true(dropped == 99 || dropped == 100);
}

/* Emits one event, waits until the subscriber is inside its callback. */
static void emit_and_wait_in_cb(struct smux_events *bus, struct rec *r)
{
	int64_t end = smux_now_ns() + 5000 * MS;

	emit_named(bus, SMUX_EV_BACKEND_ADDED, "x", 0);
	while (!atomic_load(&r->in_cb)) {
		assert_true(smux_now_ns() < end);
		sleep_ms(1);
	}
}

static void test_unsubscribe_waits(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct rec *r = rec_new(), *other = rec_new();
	int id;

	(void)state;
	assert_non_null(bus);
	atomic_store(&r->sleep_ms, 150);
	id = smux_events_subscribe(bus, rec_cb, r);
	smux_events_subscribe(bus, rec_cb, other);
	emit_and_wait_in_cb(bus, r);
	smux_events_unsubscribe(bus, id);
	/* the delivery in progress finished before unsubscribe returned */
	assert_int_equal(atomic_load(&r->in_cb), 0);
	assert_int_equal(atomic_load(&r->finished), 1);

	for (int i = 0; i < 10; i++)
		emit_named(bus, SMUX_EV_BACKEND_ADDED, "y", i);
	smux_events_flush(bus);
	assert_int_equal(atomic_load(&r->calls), 1);
	assert_int_equal(rec_count(other), 11);

	smux_events_unsubscribe(bus, 9999); /* unknown: no-op */
	smux_events_unsubscribe(bus, id);   /* twice: no-op */
	smux_events_free(bus);
	rec_free(r);
	rec_free(other);
}

struct self_unsub {
	struct smux_events *bus;
	int self_id;   /* written before the first event */
	int victim_id; /* unsubscribed by the first call, 0: none */
	atomic_int calls;
};

static void self_unsub_cb(void *arg, const struct smux_event *ev)
{
	struct self_unsub *s = arg;

	(void)ev;
	atomic_fetch_add(&s->calls, 1);
	if (s->victim_id)
		smux_events_unsubscribe(s->bus, s->victim_id);
	/* from the dispatcher: must not deadlock */
	smux_events_unsubscribe(s->bus, s->self_id);
	smux_events_flush(s->bus); /* must not deadlock either */
}

static void test_unsubscribe_from_callback(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct self_unsub s = {.bus = bus};
	struct rec *victim = rec_new(), *witness = rec_new();

	(void)state;
	assert_non_null(bus);
	s.self_id = smux_events_subscribe(bus, self_unsub_cb, &s);
	s.victim_id = smux_events_subscribe(bus, rec_cb, victim);
	smux_events_subscribe(bus, rec_cb, witness);
	for (int i = 0; i < 5; i++)
		emit_named(bus, SMUX_EV_BACKEND_REMOVED, "z", i);
	smux_events_flush(bus);
	assert_int_equal(atomic_load(&s.calls), 1);
	/* the victim came after the unsubscriber in the list: never run */
	assert_int_equal(atomic_load(&victim->calls), 0);
	assert_int_equal(rec_count(witness), 5);
	smux_events_free(bus);
	rec_free(victim);
	rec_free(witness);
}

static void test_flush(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct rec *r = rec_new();

	(void)state;
	assert_non_null(bus);
	smux_events_flush(bus); /* nothing emitted: returns */
	atomic_store(&r->sleep_ms, 10);
	smux_events_subscribe(bus, rec_cb, r);
	for (int i = 0; i < 20; i++)
		emit_named(bus, SMUX_EV_DRAIN_STARTED, "f", i);
	assert_true(rec_count(r) < 20); /* 200 ms of work is pending */
	smux_events_flush(bus);
	assert_int_equal(rec_count(r), 20);
	assert_int_equal(atomic_load(&r->in_cb), 0);
	smux_events_free(bus);
	rec_free(r);
}

static void test_free_delivers_queued(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct rec *r = rec_new();

	(void)state;
	assert_non_null(bus);
	atomic_store(&r->sleep_ms, 1);
	smux_events_subscribe(bus, rec_cb, r);
	for (int i = 0; i < 50; i++)
		emit_named(bus, SMUX_EV_DRAIN_COMPLETED, "q", i);
	smux_events_free(bus);
	assert_int_equal(rec_count(r), 50);
	rec_free(r);
}

static void test_recent(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct smux_event *out = calloc(SMUX_EVENTS_RECENT + 8, sizeof(*out));
	unsigned n, total = SMUX_EVENTS_RECENT + 10;
	char want[32];

	(void)state;
	assert_non_null(bus);
	assert_non_null(out);
	assert_int_equal(smux_events_recent(bus, out, 4), 0);
	for (unsigned i = 0; i < 3; i++)
		emit_named(bus, SMUX_EV_BACKEND_RECOVERED, "r", (int)i);
	n = smux_events_recent(bus, out, SMUX_EVENTS_RECENT + 8);
	assert_int_equal(n, 3);
	assert_string_equal(out[0].name, "r0");
	assert_string_equal(out[2].name, "r2");
	assert_int_equal(out[2].topic, SMUX_EV_BACKEND_RECOVERED);
	assert_true(out[2].at_ms > 0);

	for (unsigned i = 3; i < total; i++)
		emit_named(bus, SMUX_EV_BACKEND_RECOVERED, "r", (int)i);
	n = smux_events_recent(bus, out, SMUX_EVENTS_RECENT + 8);
	assert_int_equal(n, SMUX_EVENTS_RECENT);
	for (unsigned i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "r%u", total - n + i);
		assert_string_equal(out[i].name, want);
	}
	/* a smaller max: the newest, oldest first */
	n = smux_events_recent(bus, out, 5);
	assert_int_equal(n, 5);
	for (unsigned i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "r%u", total - 5 + i);
		assert_string_equal(out[i].name, want);
	}
	smux_events_free(bus);
	free(out);
}

/* ---- JSON ---- */

static json_t *parse(const struct smux_event *ev)
{
	char *s = smux_event_to_json(ev);
	json_error_t jerr;
	json_t *j;

	assert_non_null(s);
	assert_null(strchr(s, '\n'));
	j = json_loads(s, 0, &jerr);
	if (!j)
		fail_msg("bad JSON: %s: %s", jerr.text, s);
	free(s);
	assert_true(json_is_object(j));
	return j;
}

static const char *jget_str(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_string(v))
		fail_msg("field %s is not a string", k);
	return json_string_value(v);
}

static json_int_t jget_int(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		fail_msg("field %s is not an integer", k);
	return json_integer_value(v);
}

static double jget_num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_number(v))
		fail_msg("field %s is not a number", k);
	return json_number_value(v);
}

/* topic, at, mux + @payload fields, nothing else */
static void check_common(json_t *j, enum smux_topic t, size_t payload)
{
	assert_string_equal(jget_str(j, "topic"), smux_topic_name(t));
	assert_int_equal(jget_int(j, "at"), 1700000000123LL);
	assert_string_equal(jget_str(j, "mux"), "media");
	assert_int_equal(json_object_size(j), 3 + payload);
}

static void base_event(struct smux_event *ev, enum smux_topic t)
{
	memset(ev, 0, sizeof(*ev));
	ev->topic = t;
	ev->at_ms = 1700000000123LL;
	snprintf(ev->mux, sizeof(ev->mux), "media");
	snprintf(ev->name, sizeof(ev->name), "edge-a");
}

static void set_cause(struct smux_error_info *c, enum smux_code code,
		      const char *backend, const char *msg)
{
	memset(c, 0, sizeof(*c));
	c->code = code;
	snprintf(c->backend, sizeof(c->backend), "%s", backend);
	snprintf(c->message, sizeof(c->message), "%s", msg);
}

static void test_json_down_recovered(void **state)
{
	struct smux_event ev;
	json_t *j;

	(void)state;
	base_event(&ev, SMUX_EV_BACKEND_DOWN);
	ev.has_cause = true;
	set_cause(&ev.cause, SMUX_E_CONNECTION, "edge-a", "refused");
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_DOWN, 3);
	assert_string_equal(jget_str(j, "name"), "edge-a");
	assert_string_equal(jget_str(j, "code"), "STORAGE.CONNECTION_FAILED");
	assert_non_null(strstr(jget_str(j, "cause"), "refused"));
	assert_non_null(strstr(jget_str(j, "cause"), "CONNECTION_FAILED"));
	json_decref(j);

	base_event(&ev, SMUX_EV_BACKEND_RECOVERED);
	ev.down_for_ms = 4321;
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_RECOVERED, 2);
	assert_string_equal(jget_str(j, "name"), "edge-a");
	assert_int_equal(jget_int(j, "downForMs"), 4321);
	json_decref(j);
}

static void test_json_failover(void **state)
{
	struct smux_event ev;
	json_t *j;

	(void)state;
	base_event(&ev, SMUX_EV_FAILOVER);
	snprintf(ev.from, sizeof(ev.from), "primary");
	snprintf(ev.to, sizeof(ev.to), "standby");
	ev.attempt_index = 2;
	ev.has_cause = true;
	set_cause(&ev.cause, SMUX_E_BACKEND_TIMEOUT, "primary", "too slow");
	j = parse(&ev);
	check_common(j, SMUX_EV_FAILOVER, 4);
	assert_string_equal(jget_str(j, "from"), "primary");
	assert_string_equal(jget_str(j, "to"), "standby");
	assert_int_equal(jget_int(j, "attemptIndex"), 2);
	assert_non_null(strstr(jget_str(j, "cause"), "too slow"));
	assert_null(json_object_get(j, "name"));
	json_decref(j);
}

static void test_json_fanout(void **state)
{
	struct smux_event ev;
	json_t *j, *failed, *causes, *c;

	(void)state;
	base_event(&ev, SMUX_EV_FANOUT_PARTIAL);
	snprintf(ev.mode, sizeof(ev.mode), "mirror");
	ev.n_failed = 2;
	snprintf(ev.failed[0], sizeof(ev.failed[0]), "r1");
	snprintf(ev.failed[1], sizeof(ev.failed[1]), "r2");
	set_cause(&ev.causes[0], SMUX_E_IO, "r1", "disk \"broke\"");
	set_cause(&ev.causes[1], SMUX_E_NO_SPACE, "r2", "full");
	j = parse(&ev);
	check_common(j, SMUX_EV_FANOUT_PARTIAL, 3);
	assert_string_equal(jget_str(j, "mode"), "mirror");
	failed = json_object_get(j, "failed");
	causes = json_object_get(j, "causes");
	assert_true(json_is_array(failed));
	assert_true(json_is_array(causes));
	assert_int_equal(json_array_size(failed), 2);
	assert_int_equal(json_array_size(causes), 2);
	assert_string_equal(json_string_value(json_array_get(failed, 0)), "r1");
	assert_string_equal(json_string_value(json_array_get(failed, 1)), "r2");
	c = json_array_get(causes, 0);
	assert_string_equal(jget_str(c, "code"), "STORAGE.IO_ERROR");
	assert_string_equal(jget_str(c, "message"), "disk \"broke\"");
	assert_string_equal(jget_str(c, "backend"), "r1");
	assert_int_equal(json_object_size(c), 3);
	c = json_array_get(causes, 1);
	assert_string_equal(jget_str(c, "code"), "STORAGE.NO_SPACE");
	json_decref(j);

	ev.n_failed = 0;
	j = parse(&ev);
	assert_int_equal(json_array_size(json_object_get(j, "failed")), 0);
	json_decref(j);
}

static void test_json_drain_membership(void **state)
{
	struct smux_event ev;
	json_t *j;

	(void)state;
	base_event(&ev, SMUX_EV_DRAIN_STARTED);
	ev.in_flight = 7;
	j = parse(&ev);
	check_common(j, SMUX_EV_DRAIN_STARTED, 2);
	assert_int_equal(jget_int(j, "inFlightCount"), 7);
	json_decref(j);

	base_event(&ev, SMUX_EV_DRAIN_COMPLETED);
	ev.drained_duration_ms = 99;
	j = parse(&ev);
	check_common(j, SMUX_EV_DRAIN_COMPLETED, 2);
	assert_int_equal(jget_int(j, "drainedDurationMs"), 99);
	json_decref(j);

	base_event(&ev, SMUX_EV_BACKEND_ADDED);
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_ADDED, 1); /* weight is optional */
	assert_string_equal(jget_str(j, "name"), "edge-a");
	json_decref(j);
	ev.has_weight = true;
	ev.weight = 2.5;
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_ADDED, 2);
	assert_true(jget_num(j, "weight") == 2.5);
	json_decref(j);

	base_event(&ev, SMUX_EV_BACKEND_REMOVED);
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_REMOVED, 1);
	assert_string_equal(jget_str(j, "name"), "edge-a");
	json_decref(j);

	base_event(&ev, SMUX_EV_WEIGHT_CHANGED);
	ev.weight_from = 1;
	ev.weight_to = 0.25;
	j = parse(&ev);
	check_common(j, SMUX_EV_WEIGHT_CHANGED, 3);
	assert_true(jget_num(j, "from") == 1.0);
	assert_true(jget_num(j, "to") == 0.25);
	json_decref(j);
}

static void test_json_hints(void **state)
{
	struct smux_event ev;
	json_t *j;

	(void)state;
	base_event(&ev, SMUX_EV_HINT_RECORDED);
	snprintf(ev.key, sizeof(ev.key), "photos/2026/a.jpg");
	j = parse(&ev);
	check_common(j, SMUX_EV_HINT_RECORDED, 2);
	assert_string_equal(jget_str(j, "name"), "edge-a");
	assert_string_equal(jget_str(j, "key"), "photos/2026/a.jpg");
	json_decref(j);

	ev.topic = SMUX_EV_HINT_REPLAYED;
	j = parse(&ev);
	check_common(j, SMUX_EV_HINT_REPLAYED, 2); /* no cause: succeeded */
	assert_string_equal(jget_str(j, "key"), "photos/2026/a.jpg");
	json_decref(j);
	ev.has_cause = true;
	set_cause(&ev.cause, SMUX_E_KEY_NOT_FOUND, "origin", "gone");
	j = parse(&ev);
	check_common(j, SMUX_EV_HINT_REPLAYED, 3);
	assert_non_null(strstr(jget_str(j, "cause"), "gone"));
	json_decref(j);

	/* reconciled: the key, the winning copy and where it went */
	ev.topic = SMUX_EV_RECONCILED;
	ev.has_cause = false;
	ev.n_failed = 2;
	snprintf(ev.failed[0], sizeof(ev.failed[0]), "b");
	snprintf(ev.failed[1], sizeof(ev.failed[1]), "c");
	j = parse(&ev);
	check_common(j, SMUX_EV_RECONCILED, 3);
	assert_string_equal(jget_str(j, "key"), "photos/2026/a.jpg");
	assert_string_equal(jget_str(j, "source"), "edge-a");
	assert_int_equal(json_array_size(json_object_get(j, "updated")), 2);
	assert_string_equal(json_string_value(json_array_get(
				    json_object_get(j, "updated"), 1)),
			    "c");
	json_decref(j);

	/* backend.misconfigured: the member, the key to fix, the cause */
	base_event(&ev, SMUX_EV_BACKEND_MISCONFIGURED);
	snprintf(ev.option, sizeof(ev.option), "region");
	ev.has_cause = true;
	set_cause(&ev.cause, SMUX_E_INVALID_OPTIONS, "edge-a",
		  "401 ... (check region =)");
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_MISCONFIGURED, 4);
	assert_string_equal(jget_str(j, "name"), "edge-a");
	assert_string_equal(jget_str(j, "option"), "region");
	assert_string_equal(jget_str(j, "code"), "STORAGE_MUX.INVALID_OPTIONS");
	assert_non_null(strstr(jget_str(j, "cause"), "(check region =)"));
	json_decref(j);
	/* no key named: no "option" */
	ev.option[0] = '\0';
	j = parse(&ev);
	check_common(j, SMUX_EV_BACKEND_MISCONFIGURED, 3);
	assert_null(json_object_get(j, "option"));
	json_decref(j);
}

static void test_json_hostile_strings(void **state)
{
	struct smux_event ev;
	json_t *j;

	(void)state;
	base_event(&ev, SMUX_EV_HINT_RECORDED);
	/* a key that is not UTF-8, and a name filling its array */
	snprintf(ev.key, sizeof(ev.key), "a/\xff\xfe-b");
	memset(ev.name, 'n', sizeof(ev.name)); /* no terminator */
	j = parse(&ev);
	assert_string_equal(jget_str(j, "key"), "a/?"
						"?-b");
	assert_int_equal(strlen(jget_str(j, "name")), sizeof(ev.name));
	json_decref(j);

	/* a long UTF-8 key cut in the middle of a character by the event's
	 * array: its whole characters stay (every one showed as ?) */
	base_event(&ev, SMUX_EV_HINT_REPLAYED);
	for (size_t i = 0; i + 2 < sizeof(ev.key); i += 2)
		memcpy(ev.key + i, "\xc3\xa9", 2); /* é */
	ev.key[sizeof(ev.key) - 2] = '\xc3';	   /* half of one */
	ev.key[sizeof(ev.key) - 1] = '\0';
	j = parse(&ev);
	assert_int_equal(strlen(jget_str(j, "key")), sizeof(ev.key) - 2);
	assert_null(strchr(jget_str(j, "key"), '?'));
	assert_memory_equal(jget_str(j, "key"), "\xc3\xa9\xc3\xa9", 4);
	json_decref(j);

	assert_null(smux_event_to_json(NULL));
}

/* ---- concurrent emitters ---- */

#define EMITTERS    4
#define PER_EMITTER 1000 /* EMITTERS * PER_EMITTER <= REC_MAX */

struct emitter {
	struct smux_events *bus;
	int index;
};

static void *emitter_main(void *arg)
{
	struct emitter *e = arg;
	struct smux_event ev;

	for (int i = 0; i < PER_EMITTER; i++) {
		memset(&ev, 0, sizeof(ev));
		ev.topic = SMUX_EV_FAILOVER;
		snprintf(ev.name, sizeof(ev.name), "%d:%d", e->index, i);
		smux_events_emit(e->bus, &ev);
	}
	return NULL;
}

static void test_concurrent_emitters(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct rec *r = rec_new();
	struct emitter em[EMITTERS];
	pthread_t th[EMITTERS];
	int last[EMITTERS];
	unsigned n;

	(void)state;
	assert_non_null(bus);
	smux_events_subscribe(bus, rec_cb, r);
	for (int i = 0; i < EMITTERS; i++) {
		em[i] = (struct emitter){bus, i};
		assert_int_equal(
			pthread_create(&th[i], NULL, emitter_main, &em[i]), 0);
	}
	for (int i = 0; i < EMITTERS; i++)
		pthread_join(th[i], NULL);
	smux_events_flush(bus);
	n = rec_count(r);
	assert_int_equal(n + smux_events_dropped(bus), EMITTERS * PER_EMITTER);
	/* each emitter's events arrive in its order */
	for (int i = 0; i < EMITTERS; i++)
		last[i] = -1;
	for (unsigned k = 0; k < n; k++) {
		int t, i;

		assert_int_equal(sscanf(r->name[k], "%d:%d", &t, &i), 2);
		assert_true(t >= 0 && t < EMITTERS);
		assert_true(i > last[t]);
		last[t] = i;
	}
	smux_events_free(bus);
	rec_free(r);
}

/*
 * Subscribing and unsubscribing while events flow. Runs off the cmocka
 * thread, so it counts violations instead of asserting.
 */
static void *churn_main(void *arg)
{
	struct smux_events *bus = arg;
	uintptr_t bad = 0;

	for (int i = 0; i < 200; i++) {
		struct rec *r = rec_new();
		int id = smux_events_subscribe(bus, rec_cb, r);

		if (id <= 0)
			bad++;
		if (i % 3 == 0)
			sleep_ms(1);
		smux_events_unsubscribe(bus, id);
		/* the callback is not running and never will: free it */
		if (atomic_load(&r->in_cb) ||
		    atomic_load(&r->calls) != atomic_load(&r->finished))
			bad++;
		rec_free(r);
	}
	return (void *)bad;
}

static void test_subscribe_churn(void **state)
{
	struct smux_events *bus = smux_events_new();
	struct emitter em = {bus, 0};
	pthread_t churn, emit;
	void *bad = NULL;

	(void)state;
	assert_non_null(bus);
	assert_int_equal(pthread_create(&emit, NULL, emitter_main, &em), 0);
	assert_int_equal(pthread_create(&churn, NULL, churn_main, bus), 0);
	pthread_join(emit, NULL);
	pthread_join(churn, &bad);
	assert_int_equal((uintptr_t)bad, 0);
	smux_events_flush(bus);
	smux_events_free(bus);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_topic_names),
		cmocka_unit_test(test_null_bus),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_payload_copied),
		cmocka_unit_test(test_fanout_roundtrip),
		cmocka_unit_test(test_slow_subscriber),
		cmocka_unit_test(test_unsubscribe_waits),
		cmocka_unit_test(test_unsubscribe_from_callback),
		cmocka_unit_test(test_flush),
		cmocka_unit_test(test_free_delivers_queued),
		cmocka_unit_test(test_recent),
		cmocka_unit_test(test_json_down_recovered),
		cmocka_unit_test(test_json_failover),
		cmocka_unit_test(test_json_fanout),
		cmocka_unit_test(test_json_drain_membership),
		cmocka_unit_test(test_json_hints),
		cmocka_unit_test(test_json_hostile_strings),
		cmocka_unit_test(test_concurrent_emitters),
		cmocka_unit_test(test_subscribe_churn),
	};

	return cmocka_run_group_tests_name("events", tests, NULL, NULL);
}
