/* SPDX-License-Identifier: MIT */
/*
 * mux_exec.c - running the attempts of one mux operation: sequential
 * fall-through (failover, round-robin, weighted, sticky-by-key, shield
 * reads; optionally passing over members that missed a key's latest
 * write), the mirror read race, and the shield/mirror write fan-out with
 * its write policy and hints. Listings that merge are mux_list.c's; what
 * failover does with the walk is mux_failover.c's.
 *
 * Every member call goes through the member's bulkhead, so a stuck member
 * costs a caller its deadline and nothing more. Every finished attempt goes
 * through smux__attempt_done(), the one place that updates stats and
 * health and emits the health events.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mux_internal.h"
#include "core/mux_probe_wait.h"

static void emit(struct smux_mux *mux, struct smux_event *ev)
{
	snprintf(ev->mux, sizeof(ev->mux), "%s", mux->base.name);
	smux_events_emit(mux->events, ev);
}

struct smux_span *smux__attempt_span(struct smux_mux *mux,
				     struct smux_span *parent,
				     struct mux_member *m, unsigned index)
{
	struct smux_span *s;

	if (!mux->tracer)
		return NULL;
	s = smux_span_start(mux->tracer, "storage-mux.attempt", parent);
	smux_span_str(mux->tracer, s, "mux.backend.name", m->name);
	smux_span_int(mux->tracer, s, "mux.attempt.index", index);
	smux_span_str(mux->tracer, s, "mux.mode", smux_mode_name(mux->mode));
	return s;
}

/* A configuration error a server keeps reporting is logged again this
 * often while it lasts (a reminder, not a flood). */
#define MISCONF_REPEAT_MS (10LL * 60 * 1000)

/*
 * A server refused the configuration of @m (INVALID_OPTIONS from one of
 * its calls: Bunny's 401 naming the region, a region the identity catalog
 * lacks): every call of @m fails the same way until someone edits the
 * file, so an operator must see it without -d. backend.misconfigured
 * (logged at error level) says so once, then again only when the key to
 * fix changes or MISCONF_REPEAT_MS later: not once per failing call.
 * Reported where the error starts, not again by each mux above it.
 */
static void misconfigured(struct smux_mux *mux, struct mux_member *m,
			  const struct smux_error_info *e, int64_t now)
{
	struct smux_event ev = {.topic = SMUX_EV_BACKEND_MISCONFIGURED};
	int64_t last;
	unsigned h;

	if (smux_is_mux(m->backend))
		return;
	smux_error_option(e, ev.option, sizeof(ev.option));
	h = smux_fnv1a(ev.option, strlen(ev.option)) | 1; /* never 0 */
	last = atomic_load(&m->misconf_ms);
	if (atomic_exchange(&m->misconf, h) == h &&
	    now - last < MISCONF_REPEAT_MS)
		return;
	/* of several calls failing at once, one reports */
	if (!atomic_compare_exchange_strong(&m->misconf_ms, &last, now))
		return;
	snprintf(ev.name, sizeof(ev.name), "%s", m->name);
	ev.has_cause = true;
	ev.cause = *e;
	emit(mux, &ev);
}

enum smux_outcome
smux__attempt_done(struct smux_mux *mux, const struct smux_ctx *ctx,
		   struct mux_member *m, bool probe, int64_t started_ns,
		   const struct smux_error *err, struct smux_span *span)
{
	double ms = (double)(smux_now_ns() - started_ns) / 1e6;
	enum smux_outcome o = err ? smux_classify(&err->e) : SMUX_OUTCOME_OK;
	enum smux_outcome counted = o;
	struct smux_event ev = {0};
	enum smux__transition tr = SMUX__HEALTH_SAME;
	int64_t now = smux__mux_now(mux), down_for = 0;

	/* the caller ran out of time (or gave up): the member may be fine */
	if (o == SMUX_OUTCOME_TIMEOUT && ctx &&
	    smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
		counted = SMUX_OUTCOME_ABORT;
	/* queued behind our own max_inflight: the member never saw it */
	if (o == SMUX_OUTCOME_TIMEOUT && smux__bulkhead_unstarted(err))
		counted = SMUX_OUTCOME_ABORT;
	smux__stats_record(&m->stats, counted, err ? err->e.code : SMUX_OK, ms);
	if (err && err->e.code == SMUX_E_INVALID_OPTIONS)
		misconfigured(mux, m, &err->e, now);
	switch (counted) {
	case SMUX_OUTCOME_OK:
	case SMUX_OUTCOME_SEMANTIC:
		/* a semantic answer proves the member is alive */
		tr = smux__health_success(&m->health, now, smux_now_ns(),
					  &down_for);
		break;
	case SMUX_OUTCOME_TRANSIENT:
		/* a full member answered: it is alive and serves reads; the
		 * call falls through (another member may have room) but the
		 * member stays up, or a full disk took the mount down */
		if (err && err->e.code == SMUX_E_NO_SPACE) {
			tr = smux__health_success(&m->health, now,
						  smux_now_ns(), &down_for);
			break;
		}
		/* a replay's failure may be its key's alone: judged after
		 * the replay (mux_repair.c) */
		if (err && !probe && smux__replay_judges(mux, m))
			break;
		/* fall through */
	case SMUX_OUTCOME_TIMEOUT:
		/* always an error: only an error is transient; a call
		 * sent before the member went down does not lengthen its
		 * cooldown, only a failed probe does */
		if (err && probe)
			tr = smux__health_failure(&m->health, &mux->health_cfg,
						  now, started_ns, &err->e);
		else if (err)
			tr = smux__health_call_failure(&m->health,
						       &mux->health_cfg, now,
						       started_ns, &err->e);
		break;
	case SMUX_OUTCOME_ABORT:
	case SMUX_OUTCOME_LOCAL:
		/* the caller gave up, or its own sink or source failed:
		 * nothing is known about the member */
		if (probe)
			smux__health_probe_cancel(&m->health);
		break;
	}
	if (tr == SMUX__HEALTH_WENT_DOWN) {
		ev.topic = SMUX_EV_BACKEND_DOWN;
		snprintf(ev.name, sizeof(ev.name), "%s", m->name);
		ev.has_cause = err != NULL;
		if (err)
			ev.cause = err->e;
		emit(mux, &ev);
		smux__mux_reselect(mux);
		/* the background thread probes it once its cooldown ends */
		smux__mux_kick(mux);
	} else if (tr == SMUX__HEALTH_RECOVERED) {
		ev.topic = SMUX_EV_BACKEND_RECOVERED;
		snprintf(ev.name, sizeof(ev.name), "%s", m->name);
		ev.down_for_ms = down_for;
		emit(mux, &ev);
		smux__mux_reselect(mux);
		/* replay the hints it missed, those whose replay failed
		 * before it came back too */
		atomic_fetch_add(&m->recoveries, 1);
		smux__mux_kick(mux);
	}
	if (span) {
		smux_span_str(mux->tracer, span, "mux.outcome",
			      smux_outcome_name(o));
		smux_span_int(mux->tracer, span, "mux.latency.ms", (int64_t)ms);
		smux_span_end(mux->tracer, span);
	}
	return o;
}

const struct smux_put_opts *
smux__uniform_mtime(struct smux_put_opts *po, const struct smux_put_opts *opts)
{
	if (smux_put_has_mtime(opts))
		return opts;
	*po = opts ? *opts : (struct smux_put_opts){0};
	po->mtime_ns = smux_unique_wall_ns();
	return po;
}

bool smux__member_enter(struct mux_member *m)
{
	atomic_fetch_add(&m->health.in_flight, 1);
	/* pairs with the fence in smux_mux_drain (status store, then
	 * in_flight load): one of the two sees the other */
	atomic_thread_fence(memory_order_seq_cst);
	if (smux__health_status(&m->health) != SMUX_STATUS_DRAINING)
		return true;
	atomic_fetch_sub(&m->health.in_flight, 1);
	return false;
}

long smux__attempt(struct smux_mux *mux, const struct smux_ctx *ctx,
		   struct smux__call *call, struct mux_member *m, bool probe,
		   unsigned index, struct smux_span *span, enum smux_outcome *o,
		   struct smux_error *e)
{
	struct smux_span *as;
	int64_t t0 = smux_now_ns();
	long rc;

	if (!smux__member_enter(m)) {
		if (probe)
			smux__health_probe_cancel(&m->health);
		*o = SMUX_OUTCOME_TRANSIENT;
		return smux_error_set(e, SMUX_E_BACKEND_DRAINING, m->name,
				      NULL);
	}
	as = smux__attempt_span(mux, span, m, index);
	call->backend = m->backend;
	call->span = as ? as : span;
	rc = smux__bulkhead_run(m->bh, ctx, mux->timeout_ms, call, e);
	atomic_fetch_sub(&m->health.in_flight, 1);
	*o = smux__attempt_done(mux, ctx, m, probe, t0, rc < 0 ? e : NULL, as);
	return rc;
}

/* Counts list entries so a list that failed midway is not retried. */
struct list_count {
	smux_list_fn fn;
	void *arg;
	unsigned long n;
};

static int count_entry(void *arg, const struct smux_list_entry *e)
{
	struct list_count *lc = arg;

	lc->n++;
	return lc->fn(lc->arg, e);
}

long smux__exhausted(struct smux_mux *mux, unsigned attempts, bool all_timeouts,
		     const struct smux_error *last, struct smux_error *err)
{
	if (attempts == 0)
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "no backend is available");
	*err = *last;
	/* the seed's BACKEND_TIMEOUT, once every attempt timed out; and a
	 * full last member's NO_SPACE (ENOSPC, as a full local disk says:
	 * it stays up, only this write found no room) */
	if (all_timeouts || last->e.code == SMUX_E_NO_SPACE) {
		err->e.attempts = attempts;
		return -err->e.sys_errno;
	}
	smux_error_wrap(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			"all %u attempts failed", attempts);
	err->e.attempts = attempts;
	return -err->e.sys_errno;
}

/* How one sequential walk goes besides falling through on transient
 * errors. */
struct walk {
	bool by_order;	 /* member order (failover, shield), else the mode's */
	bool skip_stale; /* pass over members stale for the call's keys */
	bool holder;	 /* failover: only the holder of the call's key */
	struct mux_member **acked; /* out: the member that succeeded */
};

/* True when @m missed the latest write of a key @call works on (a copy's
 * or rename's source or destination). */
static bool call_stale(struct smux_mux *mux, struct mux_member *m,
		       const struct smux__call *call)
{
	if (smux__member_stale(mux, m, call->key))
		return true;
	return (call->op == SMUX__OP_COPY || call->op == SMUX__OP_RENAME ||
		call->op == SMUX__OP_LINK) &&
	       smux__member_stale(mux, m, call->key2);
}

/* True when @call changes a key on which an abandoned call may still land
 * on @m (mux_zombie.c): it would be overwritten by the older zombie. */
static bool zombie_blocks(struct smux_mux *mux, struct mux_member *m,
			  const struct smux__call *call)
{
	switch (call->op) {
	case SMUX__OP_PUT:
	case SMUX__OP_DEL:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
		return smux__member_zombie(mux, m, call->key);
	case SMUX__OP_COPY:
	case SMUX__OP_LINK:
		return smux__member_zombie(mux, m, call->key2);
	case SMUX__OP_RENAME:
		return smux__member_zombie(mux, m, call->key) ||
		       smux__member_zombie(mux, m, call->key2);
	default:
		return false;
	}
}

/* Round-robin, weighted: waits until no abandoned call of a key @call
 * changes may still land on the shared store (mux_zombie.c). 0 or the
 * refusal. */
static long zombie_wait(struct smux_mux *mux, const struct smux_ctx *ctx,
			const struct smux__call *call, struct smux_error *err)
{
	switch (call->op) {
	case SMUX__OP_PUT:
	case SMUX__OP_DEL:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
		return smux__zombie_wait(mux, ctx, call->key, NULL, err);
	case SMUX__OP_COPY:
	case SMUX__OP_LINK:
		return smux__zombie_wait(mux, ctx, NULL, call->key2, err);
	case SMUX__OP_RENAME:
		return smux__zombie_wait(mux, ctx, call->key, call->key2, err);
	default:
		return 0;
	}
}

_Atomic(smux__fanout_hook_fn) smux__walk_hook_next;

/* A directory is made by a put of its marker ("dir/") and looked up by its
 * name ("dir"): whether @m has a hint pending for @key's marker (its kind
 * in *@kind), so that its "not found" for @key may be a directory it
 * missed (a store of prefixes lacks it until something under it is
 * replayed), and its directory one whose removal it missed. */
static bool marker_missed(struct smux_mux *mux, struct mux_member *m,
			  const char *key, enum smux__hint_kind *kind)
{
	char marker[SMUX_KEY_MAX + 2];
	size_t len = strlen(key);

	if (len == 0 || key[len - 1] == '/' ||
	    smux__hints_pending(mux->hints, m->name) == 0 ||
	    snprintf(marker, sizeof(marker), "%s/", key) !=
		    (int)(len + 1)) /* (too long for a key: none) */
		return false;
	return smux__hints_kind(mux->hints, m->name, marker, kind);
}

/*
 * The sequential walk: the members in the mode's (or member) order,
 * falling through on transient errors; with w->skip_stale, passing over
 * members that missed the latest write of a key of the call.
 */
static long sequential(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux__call *orig, const struct walk *w,
		       struct smux_span *span, struct smux_error *err)
{
	/* a private copy: attempts set its backend, and a listing counts
	 * what it delivered through it */
	struct smux__call copy = *orig, *call = &copy;
	struct list_count lc = {orig->list_fn, orig->list_arg, 0};
	/* an answer that does not end the walk, given when none is better */
	struct smux_error last = {0}, deferred = {0}, e;
	struct mux_member *m, *prev = NULL;
	struct mux_cursor c;
	bool all_timeouts = true, gave_up = false, probe;
	/* a directory's head from a member behind on its attributes */
	struct smux_info old_info;
	bool dir_old = false;
	/* in member order (failover, shield): round-robin and weighted
	 * members are gateways of one store, whose answer is the store's */
	bool pinned = w->by_order && call->op == SMUX__OP_GET &&
		      call->get_opts && call->get_opts->if_match &&
		      call->get_opts->if_match[0];
	unsigned attempts = 0, stale = 0;
	enum smux__hint_kind mk;
	long rc = 0;

	if (w->acked)
		*w->acked = NULL;
	rc = zombie_wait(mux, ctx, call, err);
	if (rc < 0) {
		err->e.attempts = 0;
		return rc;
	}
	if (call->op == SMUX__OP_LIST) {
		call->list_fn = count_entry;
		call->list_arg = &lc;
	}
	smux__cursor_init(&c, mux, call->key, w->by_order);
	if (call->n_avoid)
		smux__cursor_avoid(&c, call->avoid, call->n_avoid);
	/* once no member is left, one being probed is waited for */
	while ((m = smux__cursor_next(&c, &probe)) ||
	       (m = smux__cursor_probed(&c, ctx, &probe))) {
		smux__fanout_hook_fn hook = atomic_load(&smux__walk_hook_next);
		enum smux_outcome o;

		if (prev && hook)
			hook(mux, call->key);
		if ((w->skip_stale && call_stale(mux, m, call)) ||
		    (w->holder && !smux__failover_holds(mux, m, call->key)) ||
		    zombie_blocks(mux, m, call)) {
			/* it missed a key's latest write: not asked */
			if (probe)
				smux__health_probe_cancel(&m->health);
			smux__member_put(m);
			stale++;
			continue;
		}
		if (prev) {
			struct smux_event ev = {.topic = SMUX_EV_FAILOVER};

			snprintf(ev.from, sizeof(ev.from), "%s", prev->name);
			snprintf(ev.to, sizeof(ev.to), "%s", m->name);
			ev.attempt_index = attempts;
			ev.has_cause = true;
			ev.cause = last.e;
			emit(mux, &ev);
			atomic_fetch_add(&mux->total_failovers, 1);
			smux__member_put(prev);
			prev = NULL;
		}
		rc = smux__attempt(mux, ctx, call, m, probe, attempts, span, &o,
				   &e);
		if (rc < 0 && e.e.code == SMUX_E_BACKEND_DRAINING) {
			/* drained since it was chosen: the next one */
			smux__member_put(m);
			continue;
		}
		attempts++;
		/* a rename given up on at its deadline may have landed since
		 * (on the store a later member shares, round-robin and
		 * weighted): the source gone is no answer about this call,
		 * whose outcome is unknown - not "no such key" */
		if (rc < 0 && e.e.code == SMUX_E_KEY_NOT_FOUND &&
		    call->op == SMUX__OP_RENAME && gave_up) {
			smux__member_put(m);
			rc = smux__exhausted(mux, attempts, all_timeouts, &last,
					     err);
			/* not "full" either: its outcome is unknown */
			if (rc < 0 && err->e.code == SMUX_E_NO_SPACE)
				rc = smux_error_wrap(
					err, SMUX_E_ALL_BACKENDS_DOWN,
					mux->base.name,
					"all %u attempts failed", attempts);
			err->e.attempts = attempts;
			goto out;
		}
		/* A get pinned to a version token: a token is one member's
		 * own (mux_version.c), so another member's "not that
		 * version" says nothing of the version, and the next member
		 * may hold it under that token (failover of a local
		 * directory and WebDAV: the version opened on WebDAV while
		 * the directory was out, read on once it was back). The
		 * answer when none holds it. */
		if ((rc < 0 && pinned &&
		     (e.e.code == SMUX_E_PRECONDITION_FAILED ||
		      /* past the member that answered "another
		       * version": any other answer of a member that
		       * lacks the version (not found: s42-t3, ENOENT
		       * for an open file replaced meanwhile) */
		      (o == SMUX_OUTCOME_SEMANTIC &&
		       deferred.e.code == SMUX_E_PRECONDITION_FAILED))) ||
		    /* a directory this member may have missed (its
		     * marker's hint pending): not found here only
		     * (test_dir_head_avoids_stale) */
		    (rc < 0 && call->op == SMUX__OP_HEAD &&
		     e.e.code == SMUX_E_KEY_NOT_FOUND &&
		     marker_missed(mux, m, call->key, &mk))) {
			if (deferred.e.code == SMUX_OK)
				deferred = e;
			smux__member_put(m);
			continue;
		}
		/* ...and the directory of a member that missed its removal is
		 * none (s42-t3: a directory removed while the replica was out
		 * answered stat and mkdir from it, while listings hid it) */
		if (rc >= 0 && call->op == SMUX__OP_HEAD && call->info &&
		    S_ISDIR(call->info->mode) &&
		    marker_missed(mux, m, call->key, &mk) &&
		    mk == SMUX__HINT_DEL) {
			if (deferred.e.code == SMUX_OK)
				smux_error_set(&deferred, SMUX_E_KEY_NOT_FOUND,
					       m->name,
					       "%s: removed (%s missed it)",
					       call->key, m->name);
			smux__member_put(m);
			continue;
		}
		/* ...and one that missed a change of it (chmod, touch,
		 * xattrs: its marker's put hint) has its old attributes:
		 * the answer only when no other member gives one (s43
		 * review) */
		if (rc >= 0 && call->op == SMUX__OP_HEAD && call->info &&
		    S_ISDIR(call->info->mode) && !w->acked && !dir_old &&
		    marker_missed(mux, m, call->key, &mk) &&
		    mk == SMUX__HINT_PUT) {
			old_info = *call->info;
			dir_old = true;
			smux__member_put(m);
			continue;
		}
		/* a semantic answer is final; a failure on the caller's side
		 * (LOCAL) would fail the same way on the next member */
		if (rc >= 0 || o == SMUX_OUTCOME_SEMANTIC ||
		    o == SMUX_OUTCOME_LOCAL) {
			if (rc < 0 && dir_old) { /* the directory it has */
				smux__member_put(m);
				break;
			}
			if (rc < 0) {
				*err = e;
				err->e.attempts = attempts;
			}
			if (rc >= 0 && w->acked)
				*w->acked = m; /* the caller's reference */
			else
				smux__member_put(m);
			goto out;
		}
		if (o == SMUX_OUTCOME_ABORT) {
			*err = e;
			if (e.e.code != SMUX_E_BACKEND_ABORTED)
				smux_error_wrap(err, SMUX_E_BACKEND_ABORTED,
						mux->base.name,
						"operation aborted");
			err->e.attempts = attempts;
			rc = -err->e.sys_errno;
			smux__member_put(m);
			goto out;
		}
		if (o == SMUX_OUTCOME_TIMEOUT &&
		    smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
			/* the caller's own deadline: no time is left for
			 * another member, and none of them is to blame */
			*err = e;
			err->e.attempts = attempts;
			rc = -err->e.sys_errno;
			smux__member_put(m);
			goto out;
		}
		if (o != SMUX_OUTCOME_TIMEOUT)
			all_timeouts = false;
		else
			gave_up = true;
		last = e;
		prev = m;
		/* a get or list that already delivered data can be retried
		 * only from the start */
		if (call->op == SMUX__OP_GET && call->sink->written > 0 &&
		    smux_sink_rewind(call->sink) != 0)
			break;
		if (call->op == SMUX__OP_LIST && lc.n > 0)
			break;
	}
	if (dir_old) {
		/* none else answered: the directory as that member has it */
		*call->info = old_info;
		rc = 0;
	} else if (deferred.e.code != SMUX_OK) {
		/* none gave a better answer: that, whatever else failed */
		*err = deferred;
		err->e.attempts = attempts;
		rc = -err->e.sys_errno;
	} else if (attempts == 0 && stale > 0)
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "no backend with the latest write of %s is "
				    "available",
				    call->key);
	else
		rc = smux__exhausted(mux, attempts, all_timeouts, &last, err);
out:
	smux__member_put(prev);
	smux__cursor_release(&c);
	return rc;
}

long smux__exec_sequential(struct smux_mux *mux, const struct smux_ctx *ctx,
			   struct smux__call *call, bool by_order,
			   struct smux_span *span, struct smux_error *err)
{
	struct walk w = {.by_order = by_order};

	return sequential(mux, ctx, call, &w, span, err);
}

long smux__exec_walk_holder(struct smux_mux *mux, const struct smux_ctx *ctx,
			    struct smux__call *call, struct mux_member **acked,
			    struct smux_span *span, struct smux_error *err)
{
	struct walk w = {
		.by_order = true,
		.skip_stale = true,
		.holder = true,
		.acked = acked,
	};

	return sequential(mux, ctx, call, &w, span, err);
}

long smux__exec_walk(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct smux__call *call, bool skip_stale,
		     struct mux_member **acked, struct smux_span *span,
		     struct smux_error *err)
{
	struct walk w = {
		.by_order = true,
		.skip_stale = skip_stale,
		.acked = acked,
	};

	return sequential(mux, ctx, call, &w, span, err);
}

/* ---- mirror read race ---- */

/* The caller's sink, claimed by the first racer that delivers a byte. */
struct race {
	pthread_mutex_t lock;
	int owner; /* protected by lock; -1 until claimed */
	struct smux_sink *real;
};

struct racer {
	struct race *race;
	int idx;
	bool refused; /* protected by race->lock: another owned the sink */
};

static int race_write(void *arg, const void *data, size_t len)
{
	struct racer *r = arg;
	int rc;

	pthread_mutex_lock(&r->race->lock);
	if (r->race->owner < 0)
		r->race->owner = r->idx;
	if (r->race->owner != r->idx) {
		r->refused = true;
		rc = -ECANCELED; /* lost the race: stop this get */
	} else
		rc = smux_sink_write(r->race->real, data, len);
	pthread_mutex_unlock(&r->race->lock);
	return rc;
}

/*
 * The owner of the sink (@idx) failed: unless the caller's sink cannot be
 * rewound, forget what it wrote and free the sink for the racers still
 * running. False when the bytes it wrote must stay (the read then fails).
 */
static bool race_disown(struct race *race, int idx)
{
	bool freed = true;

	pthread_mutex_lock(&race->lock);
	if (race->owner == idx) {
		if (race->real->written > 0 &&
		    smux_sink_rewind(race->real) != 0)
			freed = false;
		else
			race->owner = -1;
	}
	pthread_mutex_unlock(&race->lock);
	return freed;
}

static int race_rewind(void *arg)
{
	struct racer *r = arg;
	int rc = 0;

	pthread_mutex_lock(&r->race->lock);
	if (r->race->owner == r->idx)
		rc = smux_sink_rewind(r->race->real);
	pthread_mutex_unlock(&r->race->lock);
	return rc;
}

#define RACE_MAX 32

/* @m failed this operation already (call->avoid). */
static bool avoided(const struct smux__call *call, const struct mux_member *m)
{
	for (unsigned i = 0; i < call->n_avoid; i++)
		if (call->avoid[i] == m->backend)
			return true;
	return false;
}

long smux__exec_race(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct smux__call *call, struct smux_span *span,
		     struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct race race = {.owner = -1, .real = call->sink};
	struct racer racers[RACE_MAX];
	struct smux_sink sinks[RACE_MAX];
	struct smux__call calls[RACE_MAX];
	struct smux_info infos[RACE_MAX];
	struct smux__job *jobs[RACE_MAX];
	struct smux_span *spans[RACE_MAX];
	struct mux_member *ms[RACE_MAX];
	int64_t t0[RACE_MAX];
	bool probes[RACE_MAX];
	struct smux_error last = {0}, semantic = {0};
	struct smux__group g;
	unsigned n = 0, left = 0, seen = 0, failed = 0;
	bool all_timeouts = true, have_semantic = false, disowned = false;
	unsigned refused = 0; /* racers stopped because another owned it */
	int winner = -1;
	long rc = 0;
	int64_t now = smux__mux_now(mux);

	/* the racers: up members (or due probes) that did not miss a write
	 * of this key; a stale one never serves it (not even when nothing
	 * else is left: the key is then unavailable) */
	for (unsigned i = 0; i < v->n && n < RACE_MAX; i++) {
		struct mux_member *m = v->m[i];

		if (smux__member_stale(mux, m, call->key) || avoided(call, m))
			continue;
		if (!smux__health_acquire(&m->health, now, &probes[n]))
			continue;
		ms[n++] = m;
	}
	if (n == 1) {
		/* nothing to race: one plain attempt on that member (a walk
		 * in member order could meet a stale replica first) */
		enum smux_outcome o;
		struct smux_error e;

		rc = smux__attempt(mux, ctx, call, ms[0], probes[0], 0, span,
				   &o, &e);
		if (rc >= 0 || o == SMUX_OUTCOME_SEMANTIC ||
		    o == SMUX_OUTCOME_ABORT || o == SMUX_OUTCOME_LOCAL ||
		    smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
			if (rc < 0) {
				*err = e;
				err->e.attempts = 1;
			}
			smux__view_put(v);
			return rc;
		}
		/* failed: what is left in order (stale replicas passed over) */
		if (call->op == SMUX__OP_GET && call->sink->written > 0 &&
		    smux_sink_rewind(call->sink) != 0) {
			*err = e;
			smux__view_put(v);
			return -err->e.sys_errno;
		}
	}
	if (n <= 1) {
		smux__view_put(v);
		return smux__exec_walk(mux, ctx, call, true, NULL, span, err);
	}
	pthread_mutex_init(&race.lock, NULL);
	smux__group_init(&g);
	for (unsigned i = 0; i < n; i++) {
		calls[i] = *call;
		calls[i].backend = ms[i]->backend;
		calls[i].info = &infos[i];
		if (call->op == SMUX__OP_GET) {
			racers[i].race = &race;
			racers[i].idx = (int)i;
			racers[i].refused = false;
			smux_sink_cb(&sinks[i], race_write, race_rewind,
				     &racers[i]);
			calls[i].sink = &sinks[i];
		}
		jobs[i] = NULL;
		spans[i] = NULL;
		if (!smux__member_enter(ms[i]))
			continue; /* drained since chosen: not a racer */
		spans[i] = smux__attempt_span(mux, span, ms[i], i);
		calls[i].span = spans[i] ? spans[i] : span;
		t0[i] = smux_now_ns();
		jobs[i] = smux__bulkhead_start(ms[i]->bh, ctx, mux->timeout_ms,
					       &calls[i], &g);
		if (jobs[i]) {
			left++;
			continue;
		}
		/* never started: a failed racer, not one to wait for */
		smux_error_set(&last, SMUX_E_NO_MEMORY, ms[i]->name,
			       "cannot start job");
		atomic_fetch_sub(&ms[i]->health.in_flight, 1);
		smux__attempt_done(mux, ctx, ms[i], probes[i], t0[i], &last,
				   spans[i]);
		all_timeouts = false;
		failed++;
	}
	while (left && winner < 0) {
		int64_t until = INT64_MAX;

		for (unsigned i = 0; i < n && winner < 0; i++) {
			struct smux_error e;
			bool lost;
			long r;

			if (!jobs[i])
				continue;
			if (!smux__job_done(jobs[i]) &&
			    smux_now_ns() < smux__job_deadline(jobs[i]) &&
			    smux_ctx_state(ctx) == SMUX_CANCEL_NONE) {
				if (smux__job_deadline(jobs[i]) < until)
					until = smux__job_deadline(jobs[i]);
				continue;
			}
			r = smux__job_finish(jobs[i], &e);
			jobs[i] = NULL;
			left--;
			atomic_fetch_sub(&ms[i]->health.in_flight, 1);
			pthread_mutex_lock(&race.lock);
			lost = call->op == SMUX__OP_GET && racers[i].refused;
			pthread_mutex_unlock(&race.lock);
			if (r < 0 && lost) {
				/* stopped by the sink's owner: not its
				 * failure (it may still serve the read) */
				if (probes[i])
					smux__health_probe_cancel(
						&ms[i]->health);
				smux_span_end(mux->tracer, spans[i]);
				refused++;
				continue;
			}
			enum smux_outcome o = smux__attempt_done(
				mux, ctx, ms[i], probes[i], t0[i],
				r < 0 ? &e : NULL, spans[i]);
			if (r >= 0) {
				winner = (int)i;
				rc = r;
				break;
			}
			failed++;
			/* the owner broke mid-stream: a racer still
			 * running may take the sink over from byte 0 */
			if (call->op == SMUX__OP_GET &&
			    o != SMUX_OUTCOME_ABORT && o != SMUX_OUTCOME_LOCAL)
				disowned |= race_disown(&race, (int)i);
			/* the caller gave up, or the caller's sink failed
			 * (the other racers would fail the same way) */
			if (o == SMUX_OUTCOME_ABORT ||
			    o == SMUX_OUTCOME_LOCAL) {
				*err = e;
				rc = -err->e.sys_errno;
				winner = -2;
				break;
			}
			if (o == SMUX_OUTCOME_SEMANTIC && !have_semantic) {
				semantic = e;
				have_semantic = true;
			}
			if (o != SMUX_OUTCOME_TIMEOUT &&
			    o != SMUX_OUTCOME_SEMANTIC)
				all_timeouts = false;
			if (o != SMUX_OUTCOME_SEMANTIC)
				last = e;
		}
		if (winner == -1 && left) {
			int64_t cap = smux_now_ns() + 5 * 1000000LL;

			/* wake at the next deadline, and now and then to
			 * notice the caller's cancellation */
			seen = smux__group_wait(&g, seen,
						until < cap ? until : cap);
		}
	}
	/* stop the racers still running */
	for (unsigned i = 0; i < n; i++) {
		if (!jobs[i])
			continue;
		smux__job_abandon(jobs[i], SMUX_CANCEL_ABORT);
		atomic_fetch_sub(&ms[i]->health.in_flight, 1);
		if (probes[i])
			smux__health_probe_cancel(&ms[i]->health);
		smux_span_end(mux->tracer, spans[i]);
	}
	smux__group_release(&g);
	pthread_mutex_destroy(&race.lock);
	if (winner >= 0) {
		if (call->info)
			*call->info = infos[winner];
	} else if (winner == -1 && disowned && refused > 0 &&
		   smux_ctx_state(ctx) == SMUX_CANCEL_NONE) {
		/* the sink's owner failed after the others had been
		 * stopped: they are healthy, read from them in order (the
		 * one that failed is down now; stale replicas passed over) */
		smux__view_put(v);
		return smux__exec_walk(mux, ctx, call, true, NULL, span, err);
	} else if (winner == -1) {
		if (call->op == SMUX__OP_GET && call->sink->written > 0 &&
		    smux_sink_rewind(call->sink) != 0) {
			*err = last;
			rc = -err->e.sys_errno;
		} else if (have_semantic) {
			/* e.g. not found on every replica that answered */
			*err = semantic;
			err->e.attempts = failed;
			rc = -err->e.sys_errno;
		} else {
			rc = smux__exhausted(mux, failed, all_timeouts, &last,
					     err);
		}
	}
	smux__view_put(v);
	return rc;
}

/* ---- fan-out writes ---- */

bool smux__caller_failed(const struct smux_ctx *ctx, const struct smux_error *e)
{
	enum smux_outcome o = smux_classify(&e->e);

	if (o == SMUX_OUTCOME_LOCAL)
		return true;
	return o == SMUX_OUTCOME_ABORT &&
	       smux_ctx_state(ctx) != SMUX_CANCEL_NONE;
}

bool smux__member_stale(struct smux_mux *mux, struct mux_member *m,
			const char *key)
{
	/* mirror, shield: a replica a call it was given up on may still
	 * change holds unknown content (mux_zombie.c) */
	if ((mux->mode == SMUX_MODE_MIRROR || mux->mode == SMUX_MODE_SHIELD) &&
	    smux__member_zombie(mux, m, key))
		return true;
	if (!key || smux__hints_pending(mux->hints, m->name) == 0)
		return false;
	/* a member rejoining the mux missed every key (mux_rejoin.c) */
	return smux__hints_has(mux->hints, m->name, key) ||
	       smux__hints_has(mux->hints, m->name, SMUX__REJOIN_KEY);
}

static void record_partial(struct smux_mux *mux, struct mux_member **m,
			   const bool *ok, const struct smux_error *errs,
			   unsigned n)
{
	struct smux_event ev = {.topic = SMUX_EV_FANOUT_PARTIAL};

	snprintf(ev.mode, sizeof(ev.mode), "%s", smux_mode_name(mux->mode));
	for (unsigned i = 0; i < n; i++) {
		if (ok[i] || ev.n_failed >= SMUX_EVENT_MAX_FAILED)
			continue;
		snprintf(ev.failed[ev.n_failed], sizeof(ev.failed[0]), "%s",
			 m[i]->name);
		ev.causes[ev.n_failed++] = errs[i].e;
	}
	atomic_fetch_add(&mux->total_fanout_partials, 1);
	emit(mux, &ev);
}

_Atomic(smux__fanout_hook_fn) smux__fanout_hook_hinting;

/* Records a hint for every member that missed the write; 0 or the first
 * journal failure. */
static int record_hints(struct smux_mux *mux, const char *key,
			enum smux__hint_kind kind, struct mux_member **m,
			const bool *ok, unsigned n, struct smux_error *err)
{
	for (unsigned i = 0; i < n && kind != SMUX__HINT_NONE; i++) {
		struct smux_event ev = {.topic = SMUX_EV_HINT_RECORDED};
		int rc;

		if (ok[i])
			continue;
		rc = smux__hints_add(mux->hints, m[i]->name, key, kind, NULL,
				     err);
		if (rc)
			return rc;
		snprintf(ev.name, sizeof(ev.name), "%s", m[i]->name);
		snprintf(ev.key, sizeof(ev.key), "%s", key);
		emit(mux, &ev);
	}
	return 0;
}

static void hint_draining(struct smux_mux *mux, const char *key,
			  enum smux__hint_kind kind, struct mux_member **m,
			  unsigned n);

bool smux__shield_origin(struct smux_mux *mux, struct mux_member *const *m,
			 unsigned n)
{
	struct mux_view *v;
	bool origin;

	if (mux->mode != SMUX_MODE_SHIELD || n == 0)
		return false;
	v = smux__view_get(mux);
	origin = v->n > 0 && v->m[0] == m[0];
	smux__view_put(v);
	return origin;
}

void smux__shield_rollback_hints(struct smux_mux *mux, const char *key,
				 enum smux__hint_kind kind,
				 struct mux_member **m, const bool *ok,
				 unsigned n)
{
	bool keep[SMUX__FAN_MAX];

	if (kind == SMUX__HINT_NONE || n == 0 || n > SMUX__FAN_MAX)
		return;
	if (smux__member_stale(mux, m[0], key)) {
		/* the origin missed the key's latest write itself: it is no
		 * source to roll back to (with the mirrors hinted too, no
		 * replica could replay). The mirrors that took this write
		 * hold a version as new as any; those that missed it (the
		 * origin too) get hints, as after any write - when some
		 * mirror took it (else nothing changed anywhere); so do the
		 * members it was not sent to (a mirror draining: it kept an
		 * older version with no hint, test_mux_shield_drain) */
		bool any = false;

		for (unsigned i = 1; i < n; i++)
			any |= ok[i];
		if (any) {
			record_hints(mux, key, kind, m, ok, n, NULL);
			hint_draining(mux, key, kind, m, n);
		}
		return;
	}
	/* record_hints hints the members whose flag is false: the mirrors
	 * that took the write (the origin, which did not, is the source) */
	keep[0] = true;
	for (unsigned i = 1; i < n; i++)
		keep[i] = !ok[i];
	record_hints(mux, key, SMUX__HINT_PUT, m, keep, n, NULL);
	/* and the members it was not sent to (draining; added since: a
	 * rejoining member's resync may have copied a mirror's state
	 * before that mirror's hint showed - test_mux_shield_drain) */
	hint_draining(mux, key, SMUX__HINT_PUT, m, n);
}

/*
 * Draining members take no writes; once a write reached some replica,
 * every member of the view it was not sent to (not among @m) gets a hint,
 * so it is repaired before it serves the key again: one draining when the
 * write started - draining still, or undrained since (it missed the write
 * all the same) - or one added since (a removed one's hints are kept for
 * when its name is added back).
 */
static void hint_draining(struct smux_mux *mux, const char *key,
			  enum smux__hint_kind kind, struct mux_member **m,
			  unsigned n)
{
	struct mux_view *v;

	if (kind == SMUX__HINT_NONE)
		return;
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *d = v->m[i];
		struct smux_event ev = {.topic = SMUX_EV_HINT_RECORDED};
		bool in = false;

		for (unsigned j = 0; j < n && !in; j++)
			in = m[j] == d;
		if (in ||
		    smux__hints_add(mux->hints, d->name, key, kind, NULL, NULL))
			continue;
		snprintf(ev.name, sizeof(ev.name), "%s", d->name);
		snprintf(ev.key, sizeof(ev.key), "%s", key);
		emit(mux, &ev);
	}
	smux__view_put(v);
}

/* smux__fanout_policy, @origin_failed: the shield origin was among @m
 * and failed (decided once by the caller, who acts on it too) */
static int fanout_policy(struct smux_mux *mux, const char *key,
			 enum smux__hint_kind kind, struct mux_member **m,
			 const bool *ok, const struct smux_error *errs,
			 unsigned n, bool origin_failed, struct smux_error *err)
{
	unsigned n_ok = 0, first_fail = n, first_semantic = n, n_full = 0;
	smux__fanout_hook_fn hinting;
	int rc;

	for (unsigned i = 0; i < n; i++) {
		if (ok[i]) {
			n_ok++;
			continue;
		}
		if (first_fail == n)
			first_fail = i;
		if (errs[i].e.code == SMUX_E_NO_SPACE)
			n_full++;
		if (first_semantic == n &&
		    smux_classify(&errs[i].e) == SMUX_OUTCOME_SEMANTIC)
			first_semantic = i;
	}
	if (n_ok > 0 && smux__fanout_hook_acked)
		smux__fanout_hook_acked(mux, key);
	if (origin_failed) {
		/* the origin must take every write: fail with its error.
		 * The mirrors that took it now hold what the origin does
		 * not (and the caller was told it failed): each gets a
		 * hint, so it is not read, and its replay copies the
		 * origin's version back (deletes the key if the origin has
		 * none) */
		smux__shield_rollback_hints(mux, key, kind, m, ok, n);
		*err = errs[0];
		err->has_cause = true;
		err->cause = errs[0].e;
		return -err->e.sys_errno;
	}
	if (mux->mode == SMUX_MODE_STICKY && first_semantic < n) {
		/* a sticky delete goes to every shard to find the key; a
		 * shard's final answer (NOT_EMPTY: the directory has
		 * children there) is the answer, not a missed write that a
		 * hint could replay */
		*err = errs[first_semantic];
		return -err->e.sys_errno;
	}
	if (n_ok > 0 && !smux__fan_any_in_view(mux, m, ok, n)) {
		/* every replica that took it was removed meanwhile: the
		 * write lives on no member of the mux */
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "the replicas that took the write of %s "
				      "were removed meanwhile",
				      key);
	}
	if (n_ok > 0)
		hint_draining(mux, key, kind, m, n);
	if (n_ok == 0) {
		if (first_semantic < n) {
			*err = errs[first_semantic];
			return -err->e.sys_errno;
		}
		if (first_fail == n)
			return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
					      mux->base.name,
					      "no backend is available");
		*err = errs[first_fail];
		/* every replica full: the storage is, as a local disk's
		 * ENOSPC says (the replicas stay up and readable) */
		if (n_full == n)
			return -err->e.sys_errno;
		return smux_error_wrap(
			err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			"the write failed on all %u backends", n);
	}
	if (n_ok == n)
		return 0;
	hinting = atomic_load(&smux__fanout_hook_hinting);
	if (hinting)
		hinting(mux, key);
	/* acknowledged or not, the members that missed it get a hint first:
	 * some replicas hold the new content now */
	rc = record_hints(mux, key, kind, m, ok, n, err);
	if (rc)
		return rc;
	/* every replica that took it removed while the hints were recorded:
	 * smux_mux_remove notes the keys a leaving replica holds the only
	 * latest copy of once it is out of the view (mux_departed.c), this
	 * looks at the view once the hints are in, so one of the two sees
	 * the other (the write went unnoted and was acknowledged) */
	if (!smux__fan_any_in_view(mux, m, ok, n))
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "the replicas that took the write of %s "
				      "were removed meanwhile",
				      key);
	record_partial(mux, m, ok, errs, n);
	if (mux->mode == SMUX_MODE_MIRROR && n_ok < mux->write_quorum) {
		*err = errs[first_fail];
		return smux_error_wrap(err, SMUX_E_WRITE_QUORUM_FAILED,
				       mux->base.name,
				       "%u of %u replicas took the write; "
				       "write_quorum is %u",
				       n_ok, n, mux->write_quorum);
	}
	if (mux->throw_on_fanout_partial) {
		*err = errs[first_fail];
		return smux_error_wrap(
			err, SMUX_E_WRITE_FANOUT_PARTIAL, mux->base.name,
			"%u of %u backends missed the write", n - n_ok, n);
	}
	return 0;
}

int smux__fanout_policy(struct smux_mux *mux, const char *key,
			enum smux__hint_kind kind, struct mux_member **m,
			const bool *ok, const struct smux_error *errs,
			unsigned n, struct smux_error *err)
{
	bool origin_failed = n > 0 && !ok[0] && smux__shield_origin(mux, m, n);

	return fanout_policy(mux, key, kind, m, ok, errs, n, origin_failed,
			     err);
}

long smux__exec_fanout(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux__call *call, enum smux__hint_kind kind,
		       struct smux_span *span, struct smux_error *err)
{
	/* the key a write leaves behind: a copy's, rename's or link's
	 * destination */
	const char *key =
		(call->op == SMUX__OP_COPY || call->op == SMUX__OP_RENAME ||
		 call->op == SMUX__OP_LINK)
			? call->key2
			: call->key;
	struct mux_view *v = smux__view_get(mux);
	struct smux__fan *f = malloc(sizeof(*f)); /* set as it is used */
	struct smux_info infos[SMUX__FAN_MAX];
	const struct smux_put_opts *uo = call->put_opts;
	struct smux_put_opts po;
	int info_from = -1;
	bool origin_failed;
	unsigned n;
	long rc;

	if (!f) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	f->mux = mux;
	f->spans = true;
	f->start = NULL; /* on each member's bulkhead */
	f->start_arg = NULL;
	f->wkey = NULL;
	if (call->op == SMUX__OP_PUT)
		uo = smux__uniform_mtime(&po, call->put_opts);
	/* not on a replica that missed the source (or, for an edit, the
	 * key): it keeps its hint, and the destination gets one */
	n = smux__fan_eligible(f, v, call, true, SMUX__FAN_MAX);
	smux__write_fence(mux, f->m, n, key,
			  call->op == SMUX__OP_RENAME ? call->key : NULL);
	for (unsigned i = 0; i < n; i++) {
		f->call[i] = *call;
		f->call[i].put_opts = uo;
		f->call[i].info = &infos[i];
	}
	/* no replica took it: one coming back (under the background
	 * thread's probe) is waited for */
	smux__fan_run_probed(f, ctx, span);
	for (unsigned i = 0; i < n && info_from < 0; i++)
		if (f->ok[i])
			info_from = (int)i;
	/* every replica that took it removed meanwhile (while the call of
	 * a hung one was waited for): the write lives on no member of the
	 * mux and is refused, before it supersedes or records any hint. A
	 * rename's hints told every replica left, and the one added back
	 * in the place of its taker, that they missed a delete of the
	 * source that happened nowhere in the view: all of them stale for
	 * the key, no replay could run (the storm's mirror run with a
	 * rename given up on one replica); and the taker's name, added back,
	 * counted as holding the destination's latest write (mux_fresh.c),
	 * which no other replica was told of */
	if (info_from >= 0 && !smux__fan_any_in_view(mux, f->m, f->ok, n)) {
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "the replicas that took the write of %s "
				    "were removed meanwhile",
				    key);
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		/* only a call that leaves the key's whole state supersedes
		 * the replica's hint (not a sync, setattr or xattr edit) */
		if (f->ok[i] && smux__fan_renews(call, true))
			smux__replica_wrote(mux, f->m[i], key);
	}
	/* still fenced while the hints are recorded (below): a replay or
	 * resync section of these pairs sees the write with its hints, or
	 * not at all (a resync must not copy from a replica that missed it
	 * onto one that took it before that replica's hint shows) */
	/* an abort by the caller, or a failure of the caller's own source,
	 * is no replica's failure */
	for (unsigned i = 0; i < n; i++) {
		if (!f->ok[i] && f->go[i] &&
		    smux__caller_failed(ctx, &f->err[i])) {
			/* not acknowledged, but the replicas that took it
			 * hold the new content: the others get hints */
			if (info_from >= 0)
				record_hints(mux, key, kind, f->m, f->ok, n,
					     NULL);
			*err = f->err[i];
			rc = -err->e.sys_errno;
			goto out;
		}
	}
	/* shield: the origin failed it (not a mirror first in line while
	 * the origin drains: smux__shield_origin) */
	origin_failed = n > 0 && !f->ok[0] && smux__shield_origin(mux, f->m, n);
	/* shield, origin failed: a mirror that renamed lost the source the
	 * origin still has (the policy hints the destination). What the
	 * source took is a delete: when the mirrors keep it (the origin is
	 * no source, smux__shield_rollback_hints) the others missed a
	 * delete - a put hint there left a member rejoining without the key
	 * stale too, no replica to copy from (test_mux_shield_drain) */
	if (call->op == SMUX__OP_RENAME && origin_failed)
		smux__shield_rollback_hints(mux, call->key, SMUX__HINT_DEL,
					    f->m, f->ok, n);
	/* a replica that missed a rename still holds the source: besides the
	 * destination's hint (the policy's), it gets one to delete it -
	 * unless the shield origin failed it: then the rename did not
	 * happen, and holding the source is right (the mirrors that took it
	 * were rolled back above) */
	if (call->op == SMUX__OP_RENAME && info_from >= 0 && !origin_failed) {
		rc = record_hints(mux, call->key, SMUX__HINT_DEL, f->m, f->ok,
				  n, err);
		if (rc)
			goto out;
		/* and so does one it was not sent to (draining, or added
		 * since): the policy hints only the destination there */
		hint_draining(mux, call->key, SMUX__HINT_DEL, f->m, n);
	}
	rc = fanout_policy(mux, key, kind, f->m, f->ok, f->err, n,
			   origin_failed, err);
	if (rc == 0 && call->info && info_from >= 0)
		*call->info = infos[info_from];
out:
	smux__write_unfence(mux, f->m, n, key,
			    call->op == SMUX__OP_RENAME ? call->key : NULL);
	free(f);
	smux__view_put(v);
	return rc;
}
