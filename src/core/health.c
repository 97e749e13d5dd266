/* SPDX-License-Identifier: MIT */
/*
 * health.c - the health state machine of one mux member (seed section 6,
 * DESIGN section 4): up -> down on a transient failure with an exponential
 * cooldown, down -> up through a single probe after the cooldown, and
 * draining.
 *
 * Owns: struct smux__health and smux_status_name(). Never reads a clock
 * (the caller passes `now`), never emits events (the caller turns the
 * returned transition into events) and never touches in_flight beyond
 * initialising it: the mux counts in-flight calls itself.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "core/health.h"

/* Cooldowns grow as 2^min(n - 1, MAX_SHIFT) times the base cooldown. */
#define MAX_SHIFT 6

const char *smux_status_name(enum smux_status s)
{
	switch (s) {
	case SMUX_STATUS_UP:
		return "up";
	case SMUX_STATUS_DOWN:
		return "down";
	case SMUX_STATUS_DRAINING:
		return "draining";
	}
	return "unknown";
}

/* Sets the status and its lock-free copy; caller holds h->lock (or owns
 * h during init). */
static void set_status(struct smux__health *h, enum smux_status s)
{
	h->status = s;
	atomic_store_explicit(&h->fast_status, (int)s, memory_order_release);
}

void smux__health_init(struct smux__health *h, int64_t now_ms)
{
	pthread_mutex_init(&h->lock, NULL);
	set_status(h, SMUX_STATUS_UP);
	h->consecutive_failures = 0;
	h->cooldown_until_ms = 0;
	h->last_transition_at_ms = now_ms;
	h->down_since_ms = 0;
	h->up_since_ns = INT64_MIN;
	h->probing = false;
	h->drained = false;
	memset(&h->last_error, 0, sizeof(h->last_error));
	atomic_init(&h->in_flight, 0);
}

void smux__health_release(struct smux__health *h)
{
	pthread_mutex_destroy(&h->lock);
}

bool smux__health_acquire(struct smux__health *h, int64_t now_ms, bool *probe)
{
	bool ok = false;

	*probe = false;
	if (smux__health_is_up(h))
		return true;
	pthread_mutex_lock(&h->lock);
	switch (h->status) {
	case SMUX_STATUS_UP:
		ok = true;
		break;
	case SMUX_STATUS_DOWN:
		if (now_ms >= h->cooldown_until_ms && !h->probing) {
			h->probing = true;
			*probe = true;
			ok = true;
		}
		break;
	case SMUX_STATUS_DRAINING:
		break;
	}
	pthread_mutex_unlock(&h->lock);
	return ok;
}

void smux__health_probe_cancel(struct smux__health *h)
{
	pthread_mutex_lock(&h->lock);
	h->probing = false;
	pthread_mutex_unlock(&h->lock);
}

enum smux_status smux__health_status(struct smux__health *h)
{
	return (enum smux_status)atomic_load_explicit(&h->fast_status,
						      memory_order_acquire);
}

enum smux__transition smux__health_success(struct smux__health *h,
					   int64_t now_ms, int64_t answer_ns,
					   int64_t *down_for_ms)
{
	enum smux__transition t = SMUX__HEALTH_SAME;

	if (down_for_ms)
		*down_for_ms = 0;
	/* up implies no consecutive failures (a failure takes it down) */
	if (smux__health_is_up(h))
		return t;
	pthread_mutex_lock(&h->lock);
	h->consecutive_failures = 0;
	if (h->status == SMUX_STATUS_DOWN) {
		set_status(h, SMUX_STATUS_UP);
		h->probing = false;
		h->cooldown_until_ms = 0;
		h->last_transition_at_ms = now_ms;
		h->up_since_ns = answer_ns;
		if (down_for_ms)
			*down_for_ms = now_ms - h->down_since_ms;
		t = SMUX__HEALTH_RECOVERED;
	}
	pthread_mutex_unlock(&h->lock);
	return t;
}

/* min(cooldown * 2^min(n - 1, 6), max_cooldown), without overflow. */
static int64_t cooldown_for(const struct smux__health_cfg *cfg, unsigned n)
{
	unsigned shift = n > MAX_SHIFT ? MAX_SHIFT : (n ? n - 1 : 0);
	int64_t base = cfg->cooldown_ms > 0 ? cfg->cooldown_ms : 0;
	int64_t cd;

	if (base > (INT64_MAX >> shift))
		cd = INT64_MAX;
	else
		cd = base << shift;
	if (cfg->max_cooldown_ms >= 0 && cd > cfg->max_cooldown_ms)
		cd = cfg->max_cooldown_ms;
	return cd;
}

enum smux__transition smux__health_failure(struct smux__health *h,
					   const struct smux__health_cfg *cfg,
					   int64_t now_ms, int64_t sent_ns,
					   const struct smux_error_info *e)
{
	enum smux__transition t = SMUX__HEALTH_SAME;
	int64_t cd;

	pthread_mutex_lock(&h->lock);
	if (h->status == SMUX_STATUS_UP && sent_ns < h->up_since_ns) {
		pthread_mutex_unlock(&h->lock);
		return t; /* sent before the recovery: stale */
	}
	if (h->consecutive_failures < UINT_MAX)
		h->consecutive_failures++;
	cd = cooldown_for(cfg, h->consecutive_failures);
	if (now_ms > INT64_MAX - cd)
		h->cooldown_until_ms = INT64_MAX;
	else
		h->cooldown_until_ms = now_ms + cd;
	if (e)
		h->last_error = *e;
	switch (h->status) {
	case SMUX_STATUS_UP:
		set_status(h, SMUX_STATUS_DOWN);
		h->down_since_ms = now_ms;
		h->last_transition_at_ms = now_ms;
		t = SMUX__HEALTH_WENT_DOWN;
		break;
	case SMUX_STATUS_DOWN:
		/* A failed probe: the longer cooldown above applies. */
		h->probing = false;
		break;
	case SMUX_STATUS_DRAINING:
		break;
	}
	pthread_mutex_unlock(&h->lock);
	return t;
}

enum smux__transition
smux__health_call_failure(struct smux__health *h,
			  const struct smux__health_cfg *cfg, int64_t now_ms,
			  int64_t sent_ns, const struct smux_error_info *e)
{
	pthread_mutex_lock(&h->lock);
	if (h->status == SMUX_STATUS_DOWN) {
		if (e)
			h->last_error = *e;
		pthread_mutex_unlock(&h->lock);
		return SMUX__HEALTH_SAME;
	}
	pthread_mutex_unlock(&h->lock);
	return smux__health_failure(h, cfg, now_ms, sent_ns, e);
}

void smux__health_drain(struct smux__health *h, int64_t now_ms)
{
	pthread_mutex_lock(&h->lock);
	if (h->status != SMUX_STATUS_DRAINING) {
		set_status(h, SMUX_STATUS_DRAINING);
		h->last_transition_at_ms = now_ms;
		h->drained = false;
	}
	h->probing = false;
	pthread_mutex_unlock(&h->lock);
}

void smux__health_drained(struct smux__health *h)
{
	pthread_mutex_lock(&h->lock);
	if (h->status == SMUX_STATUS_DRAINING)
		h->drained = true;
	pthread_mutex_unlock(&h->lock);
}

void smux__health_undrain(struct smux__health *h, int64_t now_ms)
{
	pthread_mutex_lock(&h->lock);
	if (h->status == SMUX_STATUS_DRAINING) {
		set_status(h, SMUX_STATUS_UP);
		h->drained = false;
		h->probing = false;
		h->consecutive_failures = 0;
		h->cooldown_until_ms = 0;
		h->last_transition_at_ms = now_ms;
	}
	pthread_mutex_unlock(&h->lock);
}

void smux__health_read(struct smux__health *h, enum smux_status *status,
		       unsigned *consecutive_failures,
		       int64_t *last_transition_at_ms)
{
	pthread_mutex_lock(&h->lock);
	if (status)
		*status = h->status;
	if (consecutive_failures)
		*consecutive_failures = h->consecutive_failures;
	if (last_transition_at_ms)
		*last_transition_at_ms = h->last_transition_at_ms;
	pthread_mutex_unlock(&h->lock);
}
