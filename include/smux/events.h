/* SPDX-License-Identifier: MIT */
/*
 * smux/events.h - the event bus of the mux (seed section 9.2).
 *
 * Emitting never blocks on a subscriber: events go into a bounded queue
 * that one dispatcher thread drains, so a slow subscriber can delay other
 * subscribers but never a read or a write. When the queue is full the
 * oldest undelivered event is dropped and counted. The bus also keeps the
 * last SMUX_EVENTS_RECENT events for .smux/events.
 */
#ifndef SMUX_EVENTS_H
#define SMUX_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "smux/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum smux_topic {
	SMUX_EV_BACKEND_DOWN,	       /* storage-mux.backend.down */
	SMUX_EV_BACKEND_RECOVERED,     /* storage-mux.backend.recovered */
	SMUX_EV_FAILOVER,	       /* storage-mux.failover */
	SMUX_EV_FANOUT_PARTIAL,	       /* storage-mux.fanout-partial */
	SMUX_EV_DRAIN_STARTED,	       /* storage-mux.drain.started */
	SMUX_EV_DRAIN_COMPLETED,       /* storage-mux.drain.completed */
	SMUX_EV_BACKEND_ADDED,	       /* storage-mux.backend.added */
	SMUX_EV_BACKEND_REMOVED,       /* storage-mux.backend.removed */
	SMUX_EV_WEIGHT_CHANGED,	       /* storage-mux.weight.changed */
	SMUX_EV_HINT_RECORDED,	       /* storage-mux.hint.recorded */
	SMUX_EV_HINT_REPLAYED,	       /* storage-mux.hint.replayed */
	SMUX_EV_RECONCILED,	       /* storage-mux.reconciled */
	SMUX_EV_BACKEND_MISCONFIGURED, /* storage-mux.backend.misconfigured */
	SMUX_TOPIC_COUNT
};

#define SMUX_EVENT_MAX_FAILED 16

/*
 * One event. Which fields are set depends on the topic (seed 9.2):
 *  backend.down       name, cause, code
 *  backend.recovered  name, down_for_ms
 *  failover           from, to, attempt_index, cause
 *  fanout-partial     mode, failed[], causes[]
 *  drain.started      name, in_flight
 *  drain.completed    name, drained_duration_ms
 *  backend.added      name, weight (has_weight)
 *  backend.removed    name
 *  weight.changed     name, weight_from, weight_to
 *  hint.recorded      name (replica), key
 *  hint.replayed      name (replica), key, cause (when it failed)
 *  reconciled         key, name (the replica whose copy won), failed[]
 *                     (the replicas it was copied to, none when they
 *                     agreed; JSON "updated"), cause (when it failed):
 *                     the replicas of a key whose in-place write was
 *                     interrupted compared and made identical
 *  backend.misconfigured  name, option (the configuration key to fix,
 *                     "" when the error names none), cause, code: a
 *                     server refused the member's configuration
 *                     (STORAGE_MUX.INVALID_OPTIONS from a call: a 401
 *                     that names the region, a region the identity
 *                     catalog lacks); once, then again only when the
 *                     key changes or every 10 minutes while it lasts,
 *                     not once per failing call
 * `mux` names the mux that emitted it; `at_ms` is wall-clock time.
 */
struct smux_event {
	enum smux_topic topic;
	int64_t at_ms;
	char mux[SMUX_ERROR_NAME_MAX];
	char name[SMUX_ERROR_NAME_MAX];
	char from[SMUX_ERROR_NAME_MAX];
	char to[SMUX_ERROR_NAME_MAX];
	char mode[16];
	char option[32]; /* backend.misconfigured: the key to fix */
	char key[256];
	unsigned attempt_index;
	int64_t down_for_ms;
	int64_t drained_duration_ms;
	unsigned in_flight;
	bool has_weight;
	double weight, weight_from, weight_to;
	bool has_cause;
	struct smux_error_info cause; /* code: cause.code */
	unsigned n_failed;
	char failed[SMUX_EVENT_MAX_FAILED][SMUX_ERROR_NAME_MAX];
	struct smux_error_info causes[SMUX_EVENT_MAX_FAILED];
};

/* "storage-mux.backend.down" etc. */
const char *smux_topic_name(enum smux_topic t);

/* A subscriber. Runs on the dispatcher thread, never concurrently with
 * itself; @ev is valid during the call only. */
typedef void (*smux_event_fn)(void *arg, const struct smux_event *ev);

struct smux_events;

#define SMUX_EVENTS_QUEUE  1024
#define SMUX_EVENTS_RECENT 256

/* Creates a bus and its dispatcher thread. NULL on failure. */
struct smux_events *smux_events_new(void);
/* Delivers what is queued, stops the thread, frees. NULL is a no-op. */
void smux_events_free(struct smux_events *bus);

/* Adds a subscriber; returns an id > 0 for unsubscribe, or -ENOMEM. */
int smux_events_subscribe(struct smux_events *bus, smux_event_fn fn, void *arg);
/* Removes a subscriber; once it returns, @fn is not running and will not
 * run again. */
void smux_events_unsubscribe(struct smux_events *bus, int id);

/* Queues a copy of @ev (stamps at_ms when 0). Never blocks on
 * subscribers; safe from any thread; NULL bus is a no-op. */
void smux_events_emit(struct smux_events *bus, const struct smux_event *ev);

/* Waits until every event emitted before the call has been delivered. */
void smux_events_flush(struct smux_events *bus);

/* Events dropped because the queue was full. */
uint64_t smux_events_dropped(struct smux_events *bus);

/*
 * Copies up to @max of the most recent events, oldest first, into @out.
 * Returns the number copied.
 */
unsigned smux_events_recent(struct smux_events *bus, struct smux_event *out,
			    unsigned max);

/* Renders @ev as one line of JSON (no newline) into a string the caller
 * frees with free(); NULL on allocation failure. */
char *smux_event_to_json(const struct smux_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_EVENTS_H */
