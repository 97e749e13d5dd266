/* SPDX-License-Identifier: MIT */
/*
 * mux_fanout.c - the one fan-out primitive: "call these members in
 * parallel", with drain and staleness honoured in one place (issue 9).
 *
 * Who takes a fan-out (smux__fan_eligible): a member that is draining
 * takes nothing (the policy hints it); a member with a pending hint for a
 * key (smux__member_stale: it missed that key's latest write) takes no
 * call that would build new content of a key from its old copy - a copy,
 * rename or link from a key it missed, a setattr or xattr change or an
 * in-place (non-truncating) writer of a key it missed. Such a member is
 * left out like a failed one: it gets (keeps) a hint, and the replay
 * copies the latest version onto it. A call that leaves the whole state
 * of its destination key (put, delete, copy, rename, link, a truncating
 * writer) may go to a stale member, and only its success there supersedes
 * the hint (smux__fan_renews).
 *
 * Running (smux__fan_run): every call of a fan-out enters its member with
 * the drain check (smux__member_enter: counted in flight, or refused when
 * the member started draining since it was chosen), starts on the
 * member's bulkhead (or on a replica writer's lock, for the writers of
 * mux_writer.c), then is finished in order, with one bookkeeping
 * (smux__attempt_done) per call. So a drain that saw no call in flight is
 * never followed by a fan-out call on that member, writers included.
 */
#include <stdio.h>
#include <string.h>

#include "core/mux_internal.h"
#include "core/mux_probe_wait.h"

/* The key @call reads its new content from, when it is not the key it
 * writes (or edits) in place; NULL for a call that brings the whole new
 * content itself. */
static const char *built_from(const struct smux__call *call, bool whole)
{
	switch (call->op) {
	/* the source's version on the member (copy, rename, link), or the
	 * member's own copy, edited (setattr, xattrs) */
	case SMUX__OP_COPY:
	case SMUX__OP_RENAME:
	case SMUX__OP_LINK:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
		return call->key;
	case SMUX__OP_WRITER_OPEN:
		return whole ? NULL : call->key;
	default:
		return NULL;
	}
}

const char *smux__fan_built_from(const struct smux__call *call)
{
	return built_from(call, false);
}

bool smux__fan_renews(const struct smux__call *call, bool whole)
{
	switch (call->op) {
	case SMUX__OP_PUT:
	case SMUX__OP_DEL:
	case SMUX__OP_COPY:
	case SMUX__OP_RENAME:
	case SMUX__OP_LINK:
		return true;
	case SMUX__OP_W_COMMIT:
		return whole;
	default:
		return false;
	}
}

bool smux__fan_stale(struct smux_mux *mux, struct mux_member *m,
		     const struct smux__call *call, bool whole,
		     struct smux_error *why)
{
	const char *from = built_from(call, whole);

	if (!from || !smux__member_stale(mux, m, from))
		return false;
	if (why)
		smux_error_set(why, SMUX_E_ALL_BACKENDS_DOWN, m->name,
			       "missed the latest write of %s (replayed "
			       "first)",
			       from);
	return true;
}

/*
 * True when @call would change a key of @m on which a call the mux gave
 * up on may still land (mux_zombie.c): the older zombie could land on top
 * of it, and the member would have taken a write it then loses. Such a
 * member is left out like a stale one (it gets a hint); @why says so.
 */
static bool fan_zombie(struct smux_mux *mux, struct mux_member *m,
		       const struct smux__call *call, struct smux_error *why)
{
	const char *k1 = call->key, *k2 = NULL;

	switch (call->op) {
	case SMUX__OP_COPY:
	case SMUX__OP_LINK:
		k1 = call->key2;
		break;
	case SMUX__OP_RENAME:
	case SMUX__OP_EXCHANGE:
		k2 = call->key2;
		break;
	case SMUX__OP_PUT:
	case SMUX__OP_DEL:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
	case SMUX__OP_WRITER_OPEN:
		break;
	default:
		return false;
	}
	if (smux__member_zombie(mux, m, k1))
		k2 = k1;
	else if (!smux__member_zombie(mux, m, k2))
		return false;
	smux_error_set(why, SMUX_E_ALL_BACKENDS_DOWN, m->name,
		       "a call on %s given up on may still land there", k2);
	return true;
}

/*
 * Shield: the origin takes every write or none goes anywhere. An origin
 * left out as stale (it missed the latest write of the key the call
 * builds on, e.g. a late write landed there: mux_zombie.c) would fail the
 * write, and the mirrors that took it would get hints to copy the
 * origin's version back - every replica then waits for another to give
 * it the key, for good. So the mirrors are not called either.
 */
static void shield_origin_or_none(struct smux__fan *f, struct mux_view *v)
{
	if (f->mux->mode != SMUX_MODE_SHIELD || f->n == 0 || v->n == 0 ||
	    f->m[0] != v->m[0] || f->go[0])
		return;
	for (unsigned k = 1; k < f->n; k++) {
		if (!f->go[k])
			continue;
		if (f->probe[k])
			smux__health_probe_cancel(&f->m[k]->health);
		f->go[k] = false;
		f->probe[k] = false;
		f->err[k] = f->err[0];
	}
}

unsigned smux__fan_eligible(struct smux__fan *f, struct mux_view *v,
			    const struct smux__call *call, bool whole,
			    unsigned max)
{
	struct smux_mux *mux = f->mux;
	int64_t now = smux__mux_now(mux);

	f->n = 0;
	for (unsigned i = 0; i < v->n && f->n < max; i++) {
		struct mux_member *m = v->m[i];
		unsigned k = f->n;

		if (smux__health_status(&m->health) == SMUX_STATUS_DRAINING)
			continue; /* out of service (hinted by the policy) */
		f->m[k] = m;
		f->ok[k] = false;
		f->probe[k] = false;
		f->go[k] = false;
		f->cooled[k] = false;
		f->n++;
		if (smux__fan_stale(mux, m, call, whole, &f->err[k]) ||
		    fan_zombie(mux, m, call, &f->err[k]))
			continue;
		f->go[k] = smux__health_acquire(&m->health, now, &f->probe[k]);
		/* the shield origin takes every write, down or not */
		if (!f->go[k] && mux->mode == SMUX_MODE_SHIELD && i == 0)
			f->go[k] = true;
		if (!f->go[k]) {
			f->cooled[k] = true;
			smux_error_set(&f->err[k], SMUX_E_ALL_BACKENDS_DOWN,
				       m->name, "backend is down (cooldown)");
		}
	}
	shield_origin_or_none(f, v);
	return f->n;
}

/*
 * Right before member @i is called (after the caller's write fence): an
 * abandoned change of a key the call writes may have begun on it since
 * the members were chosen - a replay's put or delete given up on while
 * this write waited at the fence, or while this writer was open. The
 * call would land first and the zombie on top of it (its content, or the
 * key gone, with the write acknowledged). So the member is not called; it
 * misses the write like a failed one (and gets a hint).
 */
static bool fan_zombie_now(struct smux__fan *f, unsigned i,
			   const struct smux__call *c)
{
	if (!f->wkey)
		return fan_zombie(f->mux, f->m[i], c, &f->err[i]);
	switch (c->op) {
	case SMUX__OP_W_PWRITE:
	case SMUX__OP_W_TRUNCATE:
	case SMUX__OP_W_FALLOCATE:
	case SMUX__OP_W_COMMIT:
		break;
	default:
		return false;
	}
	if (!smux__member_zombie(f->mux, f->m[i], f->wkey))
		return false;
	smux_error_set(&f->err[i], SMUX_E_ALL_BACKENDS_DOWN, f->m[i]->name,
		       "a call on %s given up on may still land there",
		       f->wkey);
	return true;
}

void smux__fan_run(struct smux__fan *f, const struct smux_ctx *ctx,
		   struct smux_span *span)
{
	struct smux_mux *mux = f->mux;

	for (unsigned i = 0; i < f->n; i++) {
		struct smux__call *c = &f->call[i];

		f->job[i] = NULL;
		f->span[i] = NULL;
		f->entered[i] = false;
		if (!f->go[i])
			continue;
		if (fan_zombie_now(f, i, c)) {
			if (f->probe[i])
				smux__health_probe_cancel(&f->m[i]->health);
			continue;
		}
		c->backend = f->m[i]->backend;
		if (!smux__member_enter(f->m[i])) {
			/* drained since it was chosen: it misses this call */
			if (f->probe[i])
				smux__health_probe_cancel(&f->m[i]->health);
			smux_error_set(&f->err[i], SMUX_E_BACKEND_DRAINING,
				       f->m[i]->name, NULL);
			continue;
		}
		f->entered[i] = true;
		if (f->spans) {
			f->span[i] = smux__attempt_span(mux, span, f->m[i], i);
			c->span = f->span[i] ? f->span[i] : span;
		}
		f->t0[i] = smux_now_ns();
		f->job[i] = f->start ? f->start(f->start_arg, i, ctx, c)
				     : smux__bulkhead_start(f->m[i]->bh, ctx,
							    mux->timeout_ms, c,
							    NULL);
	}
	for (unsigned i = 0; i < f->n; i++) {
		long r;

		f->ok[i] = false;
		if (!f->entered[i]) {
			f->rc[i] = -1;
			continue;
		}
		if (f->job[i])
			r = smux__job_finish(f->job[i], &f->err[i]);
		else
			r = smux_error_set(&f->err[i], SMUX_E_NO_MEMORY,
					   f->m[i]->name, "cannot start job");
		atomic_fetch_sub(&f->m[i]->health.in_flight, 1);
		smux__attempt_done(mux, ctx, f->m[i], f->probe[i], f->t0[i],
				   r < 0 ? &f->err[i] : NULL, f->span[i]);
		f->rc[i] = r;
		f->ok[i] = r >= 0;
	}
}

bool smux__fan_probed(struct smux__fan *f, const struct smux_ctx *ctx,
		      unsigned *which)
{
	if (f->mux->mode == SMUX_MODE_SHIELD)
		return false;
	for (unsigned i = 0; i < f->n; i++) {
		if (f->ok[i])
			return false;
		/* the caller's own failure is no replica's: it stops */
		if (f->go[i] && smux__caller_failed(ctx, &f->err[i]))
			return false;
	}
	for (unsigned i = 0; i < f->n; i++) {
		bool probe = false;

		if (!f->cooled[i])
			continue;
		f->cooled[i] = false; /* waited for once */
		if (!smux__probe_wait(f->mux, ctx, f->m[i], &probe))
			continue;
		f->go[i] = true;
		f->probe[i] = probe;
		*which = i;
		return true;
	}
	return false;
}

void smux__fan_run_probed(struct smux__fan *f, const struct smux_ctx *ctx,
			  struct smux_span *span)
{
	bool ran[SMUX__FAN_MAX] = {false};
	long rc[SMUX__FAN_MAX] = {0};
	unsigned k;

	smux__fan_run(f, ctx, span);
	if (!smux__fan_probed(f, ctx, &k))
		return;
	/* k alone: the calls made keep their results (ok[] all false) */
	for (unsigned i = 0; i < f->n; i++) {
		ran[i] = f->go[i] && i != k;
		rc[i] = f->rc[i];
		f->go[i] = i == k;
	}
	smux__fan_run(f, ctx, span);
	for (unsigned i = 0; i < f->n; i++) {
		if (i == k)
			continue;
		f->go[i] = ran[i];
		f->rc[i] = rc[i];
	}
}

void (*smux__fanout_hook_acked)(struct smux_mux *mux, const char *key);

bool smux__member_in_view(struct smux_mux *mux, const struct mux_member *m)
{
	struct mux_view *v = smux__view_get(mux);
	unsigned i = 0;
	bool in;

	while (i < v->n && v->m[i] != m)
		i++;
	in = i < v->n;
	smux__view_put(v);
	return in;
}

bool smux__fan_any_in_view(struct smux_mux *mux, struct mux_member **m,
			   const bool *ok, unsigned n)
{
	struct mux_view *v = smux__view_get(mux);
	bool in = false;

	for (unsigned i = 0; i < n && !in; i++)
		for (unsigned j = 0; ok[i] && j < v->n && !in; j++)
			in = v->m[j] == m[i];
	smux__view_put(v);
	return in;
}
