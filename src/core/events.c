/* SPDX-License-Identifier: MIT */
/*
 * events.c - the event bus of smux/events.h (seed section 9.2).
 *
 * Owns: a bounded ring of queued events drained by one dispatcher thread,
 * the subscriber list, the ring of recent events and the JSON form of an
 * event. An emitter packs a copy of its event (only the failure entries it
 * uses: most events are a seventh of the full struct), then links it into
 * the rings under a short lock and signals; it never waits for a
 * subscriber. When the queue is full the oldest undelivered event is
 * dropped and counted. A packed event is shared by the queue and the
 * recent ring and freed when both have let go of it.
 *
 * Locks: bus->lock guards the queue, the recent ring, the packets'
 * reference counts and the sequence counters; bus->sub_lock guards the
 * subscriber list and the "delivering" state that unsubscribe waits on.
 * The dispatcher holds neither lock while it runs a subscriber, and no
 * thread holds both at once. Nothing is freed under a lock.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "smux/events.h"

/* The bytes of an event before its failure arrays. */
#define EV_HEAD_LEN offsetof(struct smux_event, failed)

/*
 * One emitted event, packed: the head of the struct, then n_failed names,
 * then n_failed causes. Immutable once linked, except refs.
 */
struct packet {
	unsigned refs; /* rings holding it; protected by bus->lock */
	uint64_t seq;  /* emission order, from 1 */
	int64_t at_ms;
	unsigned n_failed;
	unsigned char data[]; /* head, names, causes */
};

struct subscriber {
	int id; /* > 0, increasing in list order */
	smux_event_fn fn;
	void *arg;
};

struct smux_events {
	pthread_t thread;	    /* the dispatcher; for pthread_join only */
	struct smux_event *scratch; /* the event being delivered; owned by
				       the dispatcher thread */

	pthread_mutex_t lock;
	pthread_cond_t work; /* queue not empty or stop; with lock */
	pthread_cond_t done; /* an event delivered or dropped; with lock */
	struct packet *queue[SMUX_EVENTS_QUEUE]; /* ring; lock */
	unsigned head, count; /* oldest slot, slots in use; lock */
	uint64_t emitted;     /* sequence of the last emitted event; lock */
	uint64_t delivering;  /* sequence being delivered, 0: none; lock */
	uint64_t dropped;     /* events dropped (full, no memory); lock */
	bool stop;	      /* smux_events_free was called; lock */
	struct packet *recent[SMUX_EVENTS_RECENT]; /* ring; lock */
	unsigned recent_head;  /* next slot to write; lock */
	unsigned recent_count; /* slots in use; lock */

	pthread_mutex_t sub_lock;
	pthread_cond_t sub_idle;   /* current_id went back to 0; sub_lock */
	struct subscriber *subs;   /* sorted by id; sub_lock */
	unsigned n_subs, cap_subs; /* sub_lock */
	int next_id;		   /* last id handed out; sub_lock */
	int current_id; /* subscriber running now, 0: none; sub_lock */
};

static const char *const topic_names[SMUX_TOPIC_COUNT] = {
	[SMUX_EV_BACKEND_DOWN] = "storage-mux.backend.down",
	[SMUX_EV_BACKEND_RECOVERED] = "storage-mux.backend.recovered",
	[SMUX_EV_FAILOVER] = "storage-mux.failover",
	[SMUX_EV_FANOUT_PARTIAL] = "storage-mux.fanout-partial",
	[SMUX_EV_DRAIN_STARTED] = "storage-mux.drain.started",
	[SMUX_EV_DRAIN_COMPLETED] = "storage-mux.drain.completed",
	[SMUX_EV_BACKEND_ADDED] = "storage-mux.backend.added",
	[SMUX_EV_BACKEND_REMOVED] = "storage-mux.backend.removed",
	[SMUX_EV_WEIGHT_CHANGED] = "storage-mux.weight.changed",
	[SMUX_EV_HINT_RECORDED] = "storage-mux.hint.recorded",
	[SMUX_EV_HINT_REPLAYED] = "storage-mux.hint.replayed",
	[SMUX_EV_RECONCILED] = "storage-mux.reconciled",
	[SMUX_EV_BACKEND_MISCONFIGURED] = "storage-mux.backend.misconfigured",
};

const char *smux_topic_name(enum smux_topic t)
{
	if ((unsigned)t >= SMUX_TOPIC_COUNT)
		return "storage-mux.unknown";
	return topic_names[t];
}

static int64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The bus whose dispatcher runs on this thread, if any. */
static _Thread_local const struct smux_events *dispatching_bus;

static bool on_dispatcher(const struct smux_events *bus)
{
	return dispatching_bus == bus;
}

/* ---- packets ---- */

#define NAME_LEN sizeof(((struct smux_event *)0)->failed[0])
#define INFO_LEN sizeof(struct smux_error_info)

/* A packed copy of @ev stamped @at_ms, one reference; NULL: no memory. */
static struct packet *packet_new(const struct smux_event *ev, int64_t at_ms)
{
	unsigned n = ev->n_failed < SMUX_EVENT_MAX_FAILED
			     ? ev->n_failed
			     : SMUX_EVENT_MAX_FAILED;
	struct packet *p;

	p = malloc(sizeof(*p) + EV_HEAD_LEN + n * (NAME_LEN + INFO_LEN));
	if (!p)
		return NULL;
	p->refs = 1;
	p->seq = 0;
	p->at_ms = at_ms;
	p->n_failed = n;
	memcpy(p->data, ev, EV_HEAD_LEN);
	memcpy(p->data + EV_HEAD_LEN, ev->failed, n * NAME_LEN);
	memcpy(p->data + EV_HEAD_LEN + n * NAME_LEN, ev->causes, n * INFO_LEN);
	return p;
}

/* Forces every string of @ev to end inside its array. */
static void terminate_strings(struct smux_event *ev)
{
#define TERM(a) ((a)[sizeof(a) - 1] = '\0')
	TERM(ev->mux);
	TERM(ev->name);
	TERM(ev->from);
	TERM(ev->to);
	TERM(ev->mode);
	TERM(ev->key);
	TERM(ev->cause.backend);
	TERM(ev->cause.message);
	for (unsigned i = 0; i < ev->n_failed; i++) {
		TERM(ev->failed[i]);
		TERM(ev->causes[i].backend);
		TERM(ev->causes[i].message);
	}
#undef TERM
}

/* Unpacks @p into the full struct @out (unused failure slots zeroed). */
static void packet_unpack(const struct packet *p, struct smux_event *out)
{
	unsigned n = p->n_failed;

	memcpy(out, p->data, EV_HEAD_LEN);
	memcpy(out->failed, p->data + EV_HEAD_LEN, n * NAME_LEN);
	memset((char *)out->failed + n * NAME_LEN, 0,
	       (SMUX_EVENT_MAX_FAILED - n) * NAME_LEN);
	memcpy(out->causes, p->data + EV_HEAD_LEN + n * NAME_LEN, n * INFO_LEN);
	memset((char *)out->causes + n * INFO_LEN, 0,
	       (SMUX_EVENT_MAX_FAILED - n) * INFO_LEN);
	out->at_ms = p->at_ms;
	out->n_failed = n;
	terminate_strings(out);
}

/* Drops a reference under bus->lock; returns @p when the caller must free
 * it (after unlocking), else NULL. */
static struct packet *packet_put(struct packet *p)
{
	return p && --p->refs == 0 ? p : NULL;
}

/* ---- the dispatcher ---- */

/*
 * Runs every subscriber on @ev, in id order. Each is looked up afresh under
 * sub_lock and marked as current, so an unsubscribe either removes it before
 * it is picked or waits until its call returns.
 */
static void deliver(struct smux_events *bus, const struct smux_event *ev)
{
	int last = 0;

	for (;;) {
		struct subscriber s = {0};

		pthread_mutex_lock(&bus->sub_lock);
		for (unsigned i = 0; i < bus->n_subs; i++) {
			if (bus->subs[i].id > last) {
				s = bus->subs[i];
				break;
			}
		}
		bus->current_id = s.id;
		pthread_mutex_unlock(&bus->sub_lock);
		if (!s.id)
			return;
		s.fn(s.arg, ev);
		last = s.id;
		pthread_mutex_lock(&bus->sub_lock);
		bus->current_id = 0;
		pthread_cond_broadcast(&bus->sub_idle);
		pthread_mutex_unlock(&bus->sub_lock);
	}
}

static void *dispatcher_main(void *arg)
{
	struct smux_events *bus = arg;
	struct packet *p, *gone;

	dispatching_bus = bus;
	pthread_mutex_lock(&bus->lock);
	for (;;) {
		while (bus->count == 0 && !bus->stop)
			pthread_cond_wait(&bus->work, &bus->lock);
		if (bus->count == 0)
			break; /* stopping and drained */
		p = bus->queue[bus->head];
		bus->queue[bus->head] = NULL;
		bus->head = (bus->head + 1) % SMUX_EVENTS_QUEUE;
		bus->count--;
		bus->delivering = p->seq;
		pthread_mutex_unlock(&bus->lock);

		/* the queue's reference is ours until we drop it */
		packet_unpack(p, bus->scratch);
		deliver(bus, bus->scratch);

		pthread_mutex_lock(&bus->lock);
		bus->delivering = 0;
		gone = packet_put(p);
		pthread_cond_broadcast(&bus->done);
		if (gone) {
			pthread_mutex_unlock(&bus->lock);
			free(gone);
			pthread_mutex_lock(&bus->lock);
		}
	}
	pthread_mutex_unlock(&bus->lock);
	return NULL;
}

/* ---- lifetime ---- */

struct smux_events *smux_events_new(void)
{
	struct smux_events *bus = calloc(1, sizeof(*bus));

	if (!bus)
		return NULL;
	bus->scratch = malloc(sizeof(*bus->scratch));
	if (!bus->scratch)
		goto out_free;
	pthread_mutex_init(&bus->lock, NULL);
	pthread_cond_init(&bus->work, NULL);
	pthread_cond_init(&bus->done, NULL);
	pthread_mutex_init(&bus->sub_lock, NULL);
	pthread_cond_init(&bus->sub_idle, NULL);
	if (pthread_create(&bus->thread, NULL, dispatcher_main, bus) != 0)
		goto out_destroy;
	return bus;

out_destroy:
	pthread_cond_destroy(&bus->sub_idle);
	pthread_mutex_destroy(&bus->sub_lock);
	pthread_cond_destroy(&bus->done);
	pthread_cond_destroy(&bus->work);
	pthread_mutex_destroy(&bus->lock);
out_free:
	free(bus->scratch);
	free(bus);
	return NULL;
}

/* Must not be called from a subscriber (the dispatcher cannot join itself). */
void smux_events_free(struct smux_events *bus)
{
	if (!bus)
		return;
	pthread_mutex_lock(&bus->lock);
	bus->stop = true;
	pthread_cond_signal(&bus->work);
	pthread_mutex_unlock(&bus->lock);
	pthread_join(bus->thread, NULL);

	/* the queue is empty now; the recent ring holds the last refs */
	for (unsigned i = 0; i < SMUX_EVENTS_RECENT; i++)
		free(packet_put(bus->recent[i]));
	pthread_cond_destroy(&bus->sub_idle);
	pthread_mutex_destroy(&bus->sub_lock);
	pthread_cond_destroy(&bus->done);
	pthread_cond_destroy(&bus->work);
	pthread_mutex_destroy(&bus->lock);
	free(bus->subs);
	free(bus->scratch);
	free(bus);
}

/* ---- subscribers ---- */

int smux_events_subscribe(struct smux_events *bus, smux_event_fn fn, void *arg)
{
	int id;

	if (!bus || !fn)
		return -EINVAL;
	pthread_mutex_lock(&bus->sub_lock);
	if (bus->n_subs == bus->cap_subs) {
		unsigned cap = bus->cap_subs ? 2 * bus->cap_subs : 4;
		struct subscriber *subs;

		subs = realloc(bus->subs, cap * sizeof(*subs));
		if (!subs) {
			pthread_mutex_unlock(&bus->sub_lock);
			return -ENOMEM;
		}
		bus->subs = subs;
		bus->cap_subs = cap;
	}
	id = ++bus->next_id;
	bus->subs[bus->n_subs++] = (struct subscriber){id, fn, arg};
	pthread_mutex_unlock(&bus->sub_lock);
	return id;
}

void smux_events_unsubscribe(struct smux_events *bus, int id)
{
	if (!bus || id <= 0)
		return;
	pthread_mutex_lock(&bus->sub_lock);
	for (unsigned i = 0; i < bus->n_subs; i++) {
		if (bus->subs[i].id == id) {
			memmove(&bus->subs[i], &bus->subs[i + 1],
				(bus->n_subs - i - 1) * sizeof(bus->subs[0]));
			bus->n_subs--;
			break;
		}
	}
	/* From a subscriber (the dispatcher itself) the running callback is
	 * the caller, which cannot wait for itself; no other callback runs
	 * then. From any other thread, wait for a delivery in progress. */
	if (!on_dispatcher(bus)) {
		while (bus->current_id == id)
			pthread_cond_wait(&bus->sub_idle, &bus->sub_lock);
	}
	pthread_mutex_unlock(&bus->sub_lock);
}

/* ---- emitting ---- */

void smux_events_emit(struct smux_events *bus, const struct smux_event *ev)
{
	struct packet *p, *gone_q = NULL, *gone_r = NULL;
	unsigned slot;

	if (!bus || !ev)
		return;
	/* copy outside the lock; the lock only links pointers */
	p = packet_new(ev, ev->at_ms ? ev->at_ms : realtime_ms());

	pthread_mutex_lock(&bus->lock);
	if (!p) {
		bus->emitted++;
		bus->dropped++;
		pthread_cond_broadcast(&bus->done);
		pthread_mutex_unlock(&bus->lock);
		return;
	}
	if (bus->count == SMUX_EVENTS_QUEUE) {
		/* full: the oldest undelivered event gives way */
		gone_q = packet_put(bus->queue[bus->head]);
		bus->queue[bus->head] = NULL;
		bus->head = (bus->head + 1) % SMUX_EVENTS_QUEUE;
		bus->count--;
		bus->dropped++;
		pthread_cond_broadcast(&bus->done);
	}
	p->seq = ++bus->emitted;
	p->refs = 2; /* the queue and the recent ring */
	slot = (bus->head + bus->count) % SMUX_EVENTS_QUEUE;
	bus->queue[slot] = p;
	bus->count++;

	gone_r = packet_put(bus->recent[bus->recent_head]);
	bus->recent[bus->recent_head] = p;
	bus->recent_head = (bus->recent_head + 1) % SMUX_EVENTS_RECENT;
	if (bus->recent_count < SMUX_EVENTS_RECENT)
		bus->recent_count++;
	pthread_cond_signal(&bus->work);
	pthread_mutex_unlock(&bus->lock);
	free(gone_q);
	free(gone_r);
}

void smux_events_flush(struct smux_events *bus)
{
	uint64_t target;

	/* A subscriber waiting for its own thread would never return. */
	if (!bus || on_dispatcher(bus))
		return;
	pthread_mutex_lock(&bus->lock);
	target = bus->emitted;
	for (;;) {
		bool queued =
			bus->count > 0 && bus->queue[bus->head]->seq <= target;
		bool running = bus->delivering && bus->delivering <= target;

		if (!queued && !running)
			break;
		pthread_cond_wait(&bus->done, &bus->lock);
	}
	pthread_mutex_unlock(&bus->lock);
}

uint64_t smux_events_dropped(struct smux_events *bus)
{
	uint64_t n;

	if (!bus)
		return 0;
	pthread_mutex_lock(&bus->lock);
	n = bus->dropped;
	pthread_mutex_unlock(&bus->lock);
	return n;
}

unsigned smux_events_recent(struct smux_events *bus, struct smux_event *out,
			    unsigned max)
{
	struct packet *held[SMUX_EVENTS_RECENT];
	unsigned n, first;

	if (!bus || !out)
		return 0;
	/* take references, unpack unlocked, give them back */
	pthread_mutex_lock(&bus->lock);
	n = bus->recent_count < max ? bus->recent_count : max;
	first = (bus->recent_head + SMUX_EVENTS_RECENT - n) %
		SMUX_EVENTS_RECENT;
	for (unsigned i = 0; i < n; i++) {
		held[i] = bus->recent[(first + i) % SMUX_EVENTS_RECENT];
		held[i]->refs++;
	}
	pthread_mutex_unlock(&bus->lock);

	for (unsigned i = 0; i < n; i++)
		packet_unpack(held[i], &out[i]);

	pthread_mutex_lock(&bus->lock);
	for (unsigned i = 0; i < n; i++)
		held[i] = packet_put(held[i]);
	pthread_mutex_unlock(&bus->lock);
	for (unsigned i = 0; i < n; i++)
		free(held[i]);
	return n;
}

/* ---- JSON ---- */

/*
 * A JSON string of at most @max bytes of @s. jansson refuses invalid UTF-8
 * (keys and names are bytes). A string cut to its event's array may end
 * in the middle of a character: that part goes (at most 3 bytes). Else
 * every byte outside ASCII becomes '?'.
 */
static json_t *jstr(const char *s, size_t max)
{
	size_t len = strnlen(s, max);
	json_t *j = json_stringn(s, len);
	char *copy;

	for (size_t cut = 1; !j && cut <= 3 && cut <= len; cut++)
		if (((unsigned char)s[len - cut] & 0xc0) == 0xc0) {
			j = json_stringn(s, len - cut); /* from its lead byte */
			break;
		}
	if (j)
		return j;
	copy = malloc(len + 1);
	if (!copy)
		return NULL;
	for (size_t i = 0; i < len; i++)
		copy[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
	copy[len] = '\0';
	j = json_stringn(copy, len);
	free(copy);
	return j;
}

#define JSTR(a) jstr((a), sizeof(a))

static json_t *jnum(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* "CODE [backend]: message" of one cause. */
static json_t *jcause_text(const struct smux_error_info *c)
{
	struct smux_error e = {.e = *c};
	char buf[2 * SMUX_ERROR_MSG_MAX];

	return jstr(smux_error_format(&e, buf, sizeof(buf)), sizeof(buf));
}

static json_t *jcause_object(const struct smux_error_info *c)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_object_set_new(o, "code",
				json_string(smux_code_name(c->code))) ||
	    json_object_set_new(o, "message", JSTR(c->message)) ||
	    json_object_set_new(o, "backend", JSTR(c->backend))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Adds @v (consumed) as @k; false when @v is NULL or on failure. */
static bool put(json_t *o, const char *k, json_t *v)
{
	return v && json_object_set_new(o, k, v) == 0;
}

static bool put_cause(json_t *o, const struct smux_event *ev, bool with_code)
{
	if (!ev->has_cause)
		return put(o, "cause", json_null()) &&
		       (!with_code || put(o, "code", json_null()));
	return put(o, "cause", jcause_text(&ev->cause)) &&
	       (!with_code ||
		put(o, "code", json_string(smux_code_name(ev->cause.code))));
}

static bool put_fanout(json_t *o, const struct smux_event *ev)
{
	unsigned n = ev->n_failed < SMUX_EVENT_MAX_FAILED
			     ? ev->n_failed
			     : SMUX_EVENT_MAX_FAILED;
	json_t *failed, *causes;

	if (!put(o, "mode", JSTR(ev->mode)))
		return false;
	/* once added, the arrays belong to @o and are freed with it */
	failed = json_array();
	if (!put(o, "failed", failed))
		return false;
	causes = json_array();
	if (!put(o, "causes", causes))
		return false;
	for (unsigned i = 0; i < n; i++) {
		if (json_array_append_new(failed, JSTR(ev->failed[i])) ||
		    json_array_append_new(causes,
					  jcause_object(&ev->causes[i])))
			return false;
	}
	return true;
}

/* ev->failed[] as a JSON array of names (NULL on no memory). */
static json_t *names_array(const struct smux_event *ev)
{
	unsigned n = ev->n_failed < SMUX_EVENT_MAX_FAILED
			     ? ev->n_failed
			     : SMUX_EVENT_MAX_FAILED;
	json_t *a = json_array();

	for (unsigned i = 0; a && i < n; i++) {
		if (json_array_append_new(a, JSTR(ev->failed[i]))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The payload fields of @ev's topic (seed 9.2 spelling). */
static bool put_payload(json_t *o, const struct smux_event *ev)
{
	switch (ev->topic) {
	case SMUX_EV_BACKEND_DOWN:
		return put(o, "name", JSTR(ev->name)) && put_cause(o, ev, true);
	case SMUX_EV_BACKEND_RECOVERED:
		return put(o, "name", JSTR(ev->name)) &&
		       put(o, "downForMs", json_integer(ev->down_for_ms));
	case SMUX_EV_FAILOVER:
		return put(o, "from", JSTR(ev->from)) &&
		       put(o, "to", JSTR(ev->to)) &&
		       put(o, "attemptIndex",
			   json_integer(ev->attempt_index)) &&
		       put_cause(o, ev, false);
	case SMUX_EV_FANOUT_PARTIAL:
		return put_fanout(o, ev);
	case SMUX_EV_DRAIN_STARTED:
		return put(o, "name", JSTR(ev->name)) &&
		       put(o, "inFlightCount", json_integer(ev->in_flight));
	case SMUX_EV_DRAIN_COMPLETED:
		return put(o, "name", JSTR(ev->name)) &&
		       put(o, "drainedDurationMs",
			   json_integer(ev->drained_duration_ms));
	case SMUX_EV_BACKEND_ADDED:
		return put(o, "name", JSTR(ev->name)) &&
		       (!ev->has_weight || put(o, "weight", jnum(ev->weight)));
	case SMUX_EV_BACKEND_REMOVED:
		return put(o, "name", JSTR(ev->name));
	case SMUX_EV_WEIGHT_CHANGED:
		return put(o, "name", JSTR(ev->name)) &&
		       put(o, "from", jnum(ev->weight_from)) &&
		       put(o, "to", jnum(ev->weight_to));
	case SMUX_EV_HINT_RECORDED:
		return put(o, "name", JSTR(ev->name)) &&
		       put(o, "key", JSTR(ev->key));
	case SMUX_EV_HINT_REPLAYED:
		return put(o, "name", JSTR(ev->name)) &&
		       put(o, "key", JSTR(ev->key)) &&
		       (!ev->has_cause || put_cause(o, ev, false));
	case SMUX_EV_RECONCILED:
		return put(o, "key", JSTR(ev->key)) &&
		       put(o, "source", JSTR(ev->name)) &&
		       put(o, "updated", names_array(ev)) &&
		       (!ev->has_cause || put_cause(o, ev, false));
	case SMUX_EV_BACKEND_MISCONFIGURED:
		return put(o, "name", JSTR(ev->name)) &&
		       (!ev->option[0] || put(o, "option", JSTR(ev->option))) &&
		       put_cause(o, ev, true);
	case SMUX_TOPIC_COUNT:
		break;
	}
	return true;
}

char *smux_event_to_json(const struct smux_event *ev)
{
	json_t *o;
	char *s = NULL;

	if (!ev)
		return NULL;
	o = json_object();
	if (!o)
		return NULL;
	if (put(o, "topic", json_string(smux_topic_name(ev->topic))) &&
	    put(o, "at", json_integer(ev->at_ms)) &&
	    put(o, "mux", JSTR(ev->mux)) && put_payload(o, ev))
		s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}
