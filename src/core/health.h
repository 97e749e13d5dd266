/* SPDX-License-Identifier: MIT */
/*
 * health.h (internal) - the health state of one mux member (seed section
 * 6): up / down / draining, consecutive failures, exponential cooldown,
 * probe-on-selection after the cooldown.
 *
 * Owns: the state machine only. Never emits events or reads a clock: the
 * caller passes `now` (the mux's injected clock) and turns the returned
 * transition into events.
 */
#ifndef SMUX_CORE_HEALTH_H
#define SMUX_CORE_HEALTH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "smux/error.h"
#include "smux/mux.h"

struct smux__health_cfg {
	int64_t cooldown_ms;
	int64_t max_cooldown_ms;
};

struct smux__health {
	pthread_mutex_t lock;
	/* protected by lock: */
	enum smux_status status;
	unsigned consecutive_failures;
	int64_t cooldown_until_ms;
	int64_t last_transition_at_ms;
	int64_t down_since_ms;
	/* monotonic ns of the answer that brought it back up last (a call
	 * sent before it that fails says nothing about the member now) */
	int64_t up_since_ns;
	bool probing; /* one selection is probing this down member */
	bool drained; /* draining finished: never selected until undrain */
	struct smux_error_info last_error;
	/* atomic, no lock: */
	atomic_uint in_flight;
	/* A copy of `status` for lock-free reads on the hot path; written
	 * under lock together with status. */
	atomic_int fast_status;
};

/* Lock-free: is the member up right now (the common case)? */
static inline bool smux__health_is_up(struct smux__health *h)
{
	return atomic_load_explicit(&h->fast_status, memory_order_acquire) ==
	       SMUX_STATUS_UP;
}

enum smux__transition {
	SMUX__HEALTH_SAME,
	SMUX__HEALTH_WENT_DOWN, /* emit backend.down */
	SMUX__HEALTH_RECOVERED, /* emit backend.recovered */
};

void smux__health_init(struct smux__health *h, int64_t now_ms);
void smux__health_release(struct smux__health *h);

/*
 * May a new request use this member now? Up: yes. Draining: no. Down: only
 * when now >= cooldown_until and no other request is probing it; then this
 * caller becomes the probe (*@probe = true) and must report the outcome
 * with smux__health_success/failure (or smux__health_probe_cancel when
 * it did not make the call).
 */
bool smux__health_acquire(struct smux__health *h, int64_t now_ms, bool *probe);
void smux__health_probe_cancel(struct smux__health *h);

/* Cheap read of the status (no probe side effect). */
enum smux_status smux__health_status(struct smux__health *h);

/*
 * A call succeeded, its answer in at monotonic @answer_ns. A down member
 * comes back up: returns RECOVERED with *@down_for_ms = now -
 * down_since. Resets consecutive failures.
 */
enum smux__transition smux__health_success(struct smux__health *h,
					   int64_t now_ms, int64_t answer_ns,
					   int64_t *down_for_ms);

/*
 * A call failed with a TRANSIENT error (the caller classifies; semantic
 * and abort outcomes must not be reported here). consecutive_failures++,
 * status down, cooldown_until = now + min(cooldown * 2^min(n-1, 6),
 * max_cooldown) where n is the new consecutive_failures (so the first
 * failure waits `cooldown`, the next `2*cooldown`, ...). Returns WENT_DOWN
 * when the member was up. A draining member stays draining.
 *
 * @sent_ns is when the call was sent (monotonic). A member that came back
 * up after that (another call's answer, e.g. a health check) stays up and
 * nothing is counted: the failure is older news than the recovery - a
 * probe or a request that was under way through the outage.
 */
enum smux__transition smux__health_failure(struct smux__health *h,
					   const struct smux__health_cfg *cfg,
					   int64_t now_ms, int64_t sent_ns,
					   const struct smux_error_info *e);

/*
 * A call that was not a probe failed with a TRANSIENT error. While the
 * member is down, it was sent before the member went down (only a probe
 * is let through a down member): the same outage, so it only records the
 * error and neither counts a failure nor lengthens the cooldown - else
 * the calls in flight when a member goes down (a fan-out, a copy's
 * writers) push its cooldown to max_cooldown and hold its hints back that
 * long after it is back. Otherwise (up, draining) as smux__health_failure.
 */
enum smux__transition
smux__health_call_failure(struct smux__health *h,
			  const struct smux__health_cfg *cfg, int64_t now_ms,
			  int64_t sent_ns, const struct smux_error_info *e);

/* Draining: start (stops new selection), finish (drained), undrain. */
void smux__health_drain(struct smux__health *h, int64_t now_ms);
void smux__health_drained(struct smux__health *h);
void smux__health_undrain(struct smux__health *h, int64_t now_ms);

/* Snapshot of the fields stats need. */
void smux__health_read(struct smux__health *h, enum smux_status *status,
		       unsigned *consecutive_failures,
		       int64_t *last_transition_at_ms);

#endif /* SMUX_CORE_HEALTH_H */
