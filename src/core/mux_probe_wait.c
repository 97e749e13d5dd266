/* SPDX-License-Identifier: MIT */
/*
 * mux_probe_wait.c - the probe window (issue 9, part V).
 *
 * A down member is probed by the background thread once its cooldown is
 * over (mux_repair.c, probe_due), and while that probe runs the member is
 * "being probed": smux__health_acquire refuses every other caller. A
 * request of failover or shield walking the members in order passed over
 * it and, with no other member left, failed at once with
 * ALL_BACKENDS_DOWN. On a mux with one member (the daemon wraps a
 * single-backend root in one) that is an EIO for a program right when its
 * backend comes back. So a walk that has run out of members waits for such
 * a probe (smux__cursor_probed, after smux__cursor_next returned NULL) and
 * tries the member when the probe brought it back. The wait is bounded by
 * the probe's own deadline (backend_timeout: the probe is a member call
 * through the bulkhead) and by the request's context; it polls the health
 * state every 2 ms, as the repair does for a replica being probed
 * (mux_repair.c, replica_acquire), so health.c keeps no waiters. A
 * fan-out that called no member successfully waits the same way
 * (mux_fanout.c, smux__fan_probed).
 */
#include "core/mux_probe_wait.h"

void (*smux__probe_window_hook)(struct smux_mux *mux, struct mux_member *m);
void (*smux__probe_walk_hook)(struct smux_mux *mux);

/* How often a waiting request looks at the member's health again. */
#define PROBE_POLL_NS (2 * 1000000LL)

static bool being_probed(struct mux_member *m)
{
	bool probing;

	pthread_mutex_lock(&m->health.lock);
	probing = m->health.status == SMUX_STATUS_DOWN && m->health.probing;
	pthread_mutex_unlock(&m->health.lock);
	return probing;
}

/*
 * Waits for the probe of @m to end; true when @m may be called now (up,
 * or this caller's own probe: *@probe). Whether the probe still runs is
 * looked at before each acquire: a probe that ended between a failed
 * acquire and a later look would otherwise end the wait although it
 * brought the member back (the request then failed with
 * ALL_BACKENDS_DOWN: test_mux_failover's test_no_stale_read, 1 run in a
 * few thousand under load).
 */
bool smux__probe_wait(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *m, bool *probe)
{
	int64_t until = mux->timeout_ms > 0
				? smux_now_ns() + mux->timeout_ms * 1000000LL
				: INT64_MAX;
	bool hooked = false;

	for (;;) {
		bool probing = being_probed(m);

		if (smux__health_acquire(&m->health, smux__mux_now(mux), probe))
			return true;
		if (!hooked && probing && smux__probe_window_hook) {
			smux__probe_window_hook(mux, m);
			hooked = true;
		}
		/* not probed before the acquire: its answer is final */
		if (!probing || smux_now_ns() >= until ||
		    smux_ctx_sleep(ctx, PROBE_POLL_NS, mux->base.name, NULL))
			return false;
	}
}

struct mux_member *smux__cursor_probed(struct mux_cursor *c,
				       const struct smux_ctx *ctx, bool *probe)
{
	struct mux_view *v = c->sel->view;
	unsigned base =
		c->mux->mode == SMUX_MODE_STICKY ? (unsigned)c->start : 0;

	*probe = false;
	/* a member-order walk that ran out, once */
	if (!c->by_order || c->pos != v->n)
		return NULL;
	c->pos++;
	if (smux__probe_walk_hook)
		smux__probe_walk_hook(c->mux);
	for (unsigned i = 0; i < v->n; i++) {
		unsigned idx = (base + i) % v->n;
		struct mux_member *m = v->m[idx];
		bool refused = false;

		for (unsigned j = 0; j < c->n_refused && !refused; j++)
			refused = c->refused[j] == idx;
		/* one the walk's health check refused whose probe ended since
		 * (by another caller, the member back up): tried now - no
		 * probe left to wait for would otherwise pass it over */
		if (being_probed(m)
			    ? !smux__probe_wait(c->mux, ctx, m, probe)
			    : !refused || !smux__health_acquire(
						  &m->health,
						  smux__mux_now(c->mux), probe))
			continue;
		c->tried++;
		return smux__member_get(m);
	}
	return NULL;
}
