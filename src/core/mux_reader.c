/* SPDX-License-Identifier: MIT */
/*
 * mux_reader.c - readers through the mux: one version of one object,
 * pinned to one member (smux/backend.h "readers"; DESIGN section 6).
 *
 * Open. The member is chosen exactly as a get of the key is routed in the
 * mux's mode, by the same code (smux__mux_route_read with a READER_OPEN
 * call), so health, stats, events, tracing, deadlines, drain and hints
 * behave as for a get: failover and shield walk the members in order and
 * fall through on transient errors (failover passes over members with a
 * pending hint for the key); round-robin and weighted take the selection;
 * sticky-by-key the key's shard, then the other shards before "not
 * found". Mirror runs its read race once, at open: reader_open races on
 * the up replicas without a pending hint for the key, the first to open
 * wins and the others are closed. (Picking the replica with the lowest
 * latency instead would need no second open, but the latency samples are
 * those of a mixed load, and the race is what a get does.) What is pinned
 * is the member's own reader when its kind has one; otherwise a "get
 * reader" of this file: the member's head pins the version, and every
 * read is a ranged get if_match that etag. So a mux always offers a
 * reader, and every read of it goes to one member.
 *
 * Reads. Each pread is one call on the pinned member through its
 * bulkhead (deadline, max_inflight), counted like a get: one call of the
 * mux, one hit (or error, or timeout) and one latency sample of the
 * member, its health updated. When it fails transiently (an error, a
 * timeout, the member draining) or the member is no longer up, the
 * reader opens the key again, routed as at open, and requires the same
 * version (mux_version.c: the etag on the member the version was opened
 * on, size and mtime on any other, whatever its kind): another version
 * is PRECONDITION_FAILED, never a read stitched from two versions. Semantic
 * errors and the caller's own abort or deadline are returned as they
 * are.
 *
 * Threads. pread runs on several threads at once; close runs alone. The
 * pinned member reader (`struct pin`) is refcounted: the mux reader holds
 * one reference while it is current, every pread one while it uses it,
 * every bulkhead job one until the worker is done with it. A re-open
 * swaps it under mux_reader.lock, while preads on the old one finish
 * safely, and a job abandoned at its deadline keeps it alive until its
 * worker returns. One re-open at a time: the others wait for it and use
 * what it installed. No lock is held across a member call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mux_internal.h"
#include "core/mux_version.h"

/* ---- the get reader: a member without a reader of its own ---- */

struct get_reader {
	struct smux_reader base; /* first; base.backend: the member */
	/* a reader the member opened on another backend (reached through
	 * this one so that base.backend names the member), or NULL: ranged
	 * gets pinned to base.info.etag */
	struct smux_reader *inner;
	char *key;
};

static long get_reader_pread(struct smux_reader *r, const struct smux_ctx *ctx,
			     void *buf, size_t len, uint64_t off,
			     struct smux_error *err)
{
	struct get_reader *gr = (struct get_reader *)r;
	struct smux_get_opts opts = {
		.offset = off,
		.length = len,
		.if_match = r->info.etag[0] ? r->info.etag : NULL,
	};
	struct smux_sink sink;
	int rc;

	if (gr->inner)
		return smux_reader_pread(gr->inner, ctx, buf, len, off, err);
	if (len == 0)
		return 0;
	smux_sink_buf(&sink, buf, len);
	rc = smux_backend_get(r->backend, ctx, gr->key, &opts, &sink, NULL,
			      err);
	if (rc == 0)
		return (long)sink.written;
	if (err->e.code == SMUX_E_KEY_NOT_FOUND)
		return smux_error_wrap(
			err, SMUX_E_PRECONDITION_FAILED, r->backend->name,
			"read \"%s\": the version opened is gone", gr->key);
	return rc;
}

static void get_reader_close(struct smux_reader *r)
{
	struct get_reader *gr = (struct get_reader *)r;

	smux_reader_close(gr->inner);
	free(gr->key);
	smux_reader_release(r);
	free(gr);
}

static const struct smux_reader_ops get_reader_ops = {
	.pread = get_reader_pread,
	.close = get_reader_close,
};

/*
 * The READER_OPEN of a member (on its bulkhead worker): its own reader, or
 * a get reader pinned by its head when its kind has none. Either way the
 * reader's backend is @b, which names the member that answered.
 */
static int member_open(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, struct smux_reader **out,
		       struct smux_error *err)
{
	struct smux_reader *inner = NULL;
	struct get_reader *gr;
	struct smux_info info;
	int rc;

	rc = smux_backend_reader_open(b, ctx, key, &inner, err);
	if (rc == 0 && inner->backend == b) {
		*out = inner;
		return 0;
	}
	if (rc == 0) {
		info = inner->info;
	} else {
		if (err->e.code != SMUX_E_NOT_SUPPORTED)
			return rc;
		rc = smux_backend_head(b, ctx, key, &info, err);
		if (rc)
			return rc;
		if (S_ISDIR(info.mode))
			return smux_error_set(err, SMUX_E_IS_DIRECTORY, b->name,
					      "\"%s\" is a directory", key);
	}
	gr = calloc(1, sizeof(*gr));
	if (!gr || !(gr->key = strdup(key))) {
		free(gr);
		smux_reader_close(inner);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	smux_reader_init(&gr->base, &get_reader_ops, b);
	gr->base.info = info;
	gr->inner = inner;
	*out = &gr->base;
	return 0;
}

/* ---- pins: one member's reader ---- */

struct pin {
	atomic_int refs;
	struct mux_member *m;  /* a reference */
	struct smux_reader *r; /* r->backend == m->backend; closed with the
				  last reference */
};

static struct pin *pin_ref(struct pin *p)
{
	atomic_fetch_add(&p->refs, 1);
	return p;
}

/* Drops a reference (also the bulkhead's `done` of a read job). */
static void pin_put(void *arg)
{
	struct pin *p = arg;

	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	smux_reader_close(p->r);
	smux__member_put(p->m);
	free(p);
}

/* The member of @mux's current view whose backend is @b (a reference),
 * or NULL when it was removed meanwhile. */
static struct mux_member *member_of(struct smux_mux *mux,
				    struct smux_backend *b)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *m = NULL;

	for (unsigned i = 0; i < v->n && !m; i++)
		if (v->m[i]->backend == b)
			m = smux__member_get(v->m[i]);
	smux__view_put(v);
	return m;
}

/* How often an open is routed again because the member that answered
 * left the mux before it could be pinned. */
#define OPEN_TRIES 3

/* Opens @key routed as a get of it (@op names the span) and pins the
 * member that answered: a new pin, or NULL with @err filled. */
static struct pin *pin_open(struct smux_mux *mux, const struct smux_ctx *ctx,
			    const char *key, const char *op,
			    struct smux_backend *const *avoid, unsigned n_avoid,
			    struct smux_error *err)
{
	for (int tries = 0; tries < OPEN_TRIES; tries++) {
		struct smux_reader *r = NULL;
		struct smux__call call = {
			.op = SMUX__OP_READER_OPEN,
			.key = key,
			.open_reader = member_open,
			.reader_out = &r,
			.avoid = avoid,
			.n_avoid = n_avoid,
		};
		struct mux_member *m;
		struct pin *p;

		if (smux__mux_route_read(mux, ctx, &call, op, err) < 0)
			return NULL;
		if (!r) {
			smux_error_set(err, SMUX_E_UNKNOWN, mux->base.name,
				       "open \"%s\": no reader", key);
			return NULL;
		}
		m = member_of(mux, r->backend);
		if (!m) { /* removed since it answered: route again */
			smux_reader_close(r);
			continue;
		}
		p = calloc(1, sizeof(*p));
		if (!p) {
			smux_reader_close(r);
			smux__member_put(m);
			smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				       NULL);
			return NULL;
		}
		atomic_init(&p->refs, 1);
		p->m = m;
		p->r = r;
		return p;
	}
	smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
		       "open \"%s\": the backends changed while it was opened",
		       key);
	return NULL;
}

/*
 * One read on @p's member through its bulkhead, with the bookkeeping of
 * every member call (mux_exec.c's attempt): stats, health, events, the
 * attempt span. A member that started draining is not called
 * (BACKEND_DRAINING, transient, nothing counted). Bytes read or a
 * negative errno; *@o is the outcome.
 */
static long pin_pread(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct pin *p, void *buf, size_t len, uint64_t off,
		      unsigned index, struct smux_span *span,
		      enum smux_outcome *o, struct smux_error *e)
{
	struct smux__call call = {
		.op = SMUX__OP_R_PREAD,
		.backend = p->m->backend,
		.reader = p->r,
		.rbuf = buf,
		.len = len,
		.off = off,
		.done = pin_put,
		.done_arg = p,
	};
	struct smux__job *job;
	struct smux_span *as;
	int64_t t0;
	long rc;

	if (!smux__member_enter(p->m)) {
		*o = SMUX_OUTCOME_TRANSIENT;
		return smux_error_set(e, SMUX_E_BACKEND_DRAINING, p->m->name,
				      NULL);
	}
	as = smux__attempt_span(mux, span, p->m, index);
	call.span = as ? as : span;
	pin_ref(p); /* the job's, dropped by its worker (done) */
	t0 = smux_now_ns();
	job = smux__bulkhead_start(p->m->bh, ctx, mux->timeout_ms, &call, NULL);
	if (job) {
		rc = smux__job_finish(job, e);
	} else {
		atomic_fetch_sub(&p->refs, 1); /* never the last: ours */
		rc = smux_error_set(e, SMUX_E_NO_MEMORY, p->m->name,
				    "cannot start job");
	}
	atomic_fetch_sub(&p->m->health.in_flight, 1);
	*o = smux__attempt_done(mux, ctx, p->m, false, t0, rc < 0 ? e : NULL,
				as);
	return rc;
}

/* ---- the mux reader ---- */

struct mux_reader {
	struct smux_reader base; /* first; base.backend: the mux (a
				    reference); base.info: the version */
	struct smux_mux *mux;
	char *key;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a re-open ended */
	struct pin *cur;     /* protected by lock; never NULL */
	/* the member base.info was seen on (a reference): its etag is
	 * compared on it only (mux_version.c) */
	struct mux_member *origin;
	bool reopening; /* protected by lock */
	/* protected by lock: written in place through the caller since the
	 * open (mr_rebase): a re-open requires @now, seen on a member not
	 * known, instead of base.info on origin */
	bool rebased;
	struct smux_info now;
	unsigned rebase_gen; /* protected by lock: rebases so far */
	/* protected by lock: the pin whose file mr_rebase found behind what
	 * the key is now (not a reference: only compared with cur) */
	const struct pin *behind;
};

static const struct smux_reader_ops mux_reader_ops;

static struct mux_reader *mr_of(struct smux_reader *r)
{
	return r->ops == &mux_reader_ops ? (struct mux_reader *)r : NULL;
}

/* The current pin (a reference). */
static struct pin *mr_current(struct mux_reader *mr)
{
	struct pin *p;

	pthread_mutex_lock(&mr->lock);
	p = pin_ref(mr->cur);
	pthread_mutex_unlock(&mr->lock);
	return p;
}

static void emit_failover(struct smux_mux *mux, struct mux_member *from,
			  struct mux_member *to, const struct smux_error *why,
			  unsigned index)
{
	struct smux_event ev = {.topic = SMUX_EV_FAILOVER};

	snprintf(ev.mux, sizeof(ev.mux), "%s", mux->base.name);
	snprintf(ev.from, sizeof(ev.from), "%s", from->name);
	snprintf(ev.to, sizeof(ev.to), "%s", to->name);
	ev.attempt_index = index;
	ev.has_cause = true;
	ev.cause = why->e;
	atomic_fetch_add(&mux->total_failovers, 1);
	smux_events_emit(mux->events, &ev);
}

/*
 * @failed (the caller holds a reference) could not serve a read (@why):
 * unless another thread replaced it already, opens the key again, routed
 * as at open, and installs the new pin when it holds the version opened.
 * Threads that fail meanwhile wait for this re-open and use its result.
 * 0 (read from the current pin), or the error for the read.
 */
static long mr_reopen(struct mux_reader *mr, const struct smux_ctx *ctx,
		      struct pin *failed, const struct smux_error *why,
		      unsigned index, struct smux_backend *const *avoid,
		      unsigned n_avoid, struct smux_error *err)
{
	struct smux_mux *mux = mr->mux;
	struct pin *fresh = NULL, *old = NULL;
	struct smux_info want;
	unsigned gen;
	bool rebased;
	long rc;

	pthread_mutex_lock(&mr->lock);
	while (mr->reopening)
		pthread_cond_wait(&mr->cond, &mr->lock);
	if (mr->cur != failed) {
		pthread_mutex_unlock(&mr->lock);
		return 0;
	}
	mr->reopening = true;
	rebased = mr->rebased;
	if (rebased)
		want = mr->now;
	gen = mr->rebase_gen;
	pthread_mutex_unlock(&mr->lock);

	/* first among the members this read has not seen fail: one that
	 * failed may be back from its cooldown by now, and fail again */
	fresh = pin_open(mux, ctx, mr->key, "reader_reopen", avoid, n_avoid,
			 err);
	if (!fresh && n_avoid && smux_classify(&err->e) != SMUX_OUTCOME_ABORT)
		fresh = pin_open(mux, ctx, mr->key, "reader_reopen", NULL, 0,
				 err);
	rc = fresh ? 0 : -err->e.sys_errno;
	/* (to the second where a member keeps no more: smux__version_current;
	 * a write through the caller re-pins its readers before this could
	 * stitch it, and one behind it within the second is what that
	 * member's own token cannot tell either) */
	if (fresh &&
	    !(rebased ? smux__version_current(NULL, &want, fresh->m->backend,
					      &fresh->r->info)
		      : smux__version_current(mr->origin->backend,
					      &mr->base.info, fresh->m->backend,
					      &fresh->r->info))) {
		rc = smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				    mux->base.name,
				    "read \"%s\": backend \"%s\" holds another "
				    "version (etag \"%s\", opened \"%s\")",
				    mr->key, fresh->m->name,
				    fresh->r->info.etag, mr->base.info.etag);
		pin_put(fresh);
		fresh = NULL;
	} else if (rc < 0 && err->e.code == SMUX_E_KEY_NOT_FOUND) {
		/* no other member has the key: the version opened is out of
		 * reach, not deleted */
		*err = *why;
		rc = smux_error_wrap(
			err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			"read \"%s\": no other backend holds it", mr->key);
	}

	pthread_mutex_lock(&mr->lock);
	/* rebased meanwhile (a write through the caller landed): what the
	 * file is now decides, or the read fails and is asked again */
	if (fresh && mr->rebase_gen != gen &&
	    !smux__version_current(NULL, &mr->now, fresh->m->backend,
				   &fresh->r->info)) {
		rc = smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				    mux->base.name,
				    "read \"%s\": written while it moved to "
				    "backend \"%s\"",
				    mr->key, fresh->m->name);
		old = fresh;
		fresh = NULL;
	}
	if (fresh) {
		old = mr->cur;
		mr->cur = fresh;
		mr->behind = NULL;
	}
	mr->reopening = false;
	pthread_cond_broadcast(&mr->cond);
	pthread_mutex_unlock(&mr->lock);
	if (fresh && fresh->m != failed->m)
		emit_failover(mux, failed->m, fresh->m, why, index);
	pin_put(old);
	return rc;
}

/* A read gives up once every member failed it, or after this many
 * times the re-opens it makes when they do (members that keep failing
 * and coming back). */
#define READ_REOPEN_ROUNDS 4
#define READ_FAILED_MAX	   32

static bool backend_in(struct smux_backend *const *bs, unsigned n,
		       const struct smux_backend *b)
{
	for (unsigned i = 0; i < n; i++)
		if (bs[i] == b)
			return true;
	return false;
}

/* Members of the mux now: how many re-opens one read may make. */
static unsigned members_now(struct smux_mux *mux)
{
	struct mux_view *v = smux__view_get(mux);
	unsigned n = v->n;

	smux__view_put(v);
	return n;
}

static long mr_pread(struct smux_reader *r, const struct smux_ctx *ctx,
		     void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct mux_reader *mr = mr_of(r);
	struct smux_mux *mux = mr->mux;
	struct smux_error last = {0}, e;
	struct smux_span *span = NULL;
	struct smux_ctx child, rctx;
	unsigned attempts = 0, reopens = 0, budget = 0, nfailed = 0;
	struct smux_backend *failed[READ_FAILED_MAX];
	bool all_timeouts = true;
	long rc;

	rc = smux__mux_op_enter(mux, ctx, &child, "read", mr->key, "reader",
				&span, err);
	if (rc)
		return rc;
	/* a re-open is a mux operation of its own, under this one's span */
	rctx = *ctx;
	rctx.parent_span = child.parent_span;
	for (;;) {
		struct pin *p = mr_current(mr);
		enum smux_outcome o;
		bool behind;

		pthread_mutex_lock(&mr->lock);
		behind = mr->behind == p;
		pthread_mutex_unlock(&mr->lock);
		if (behind) {
			/* its file is not what the key is now (mr_rebase):
			 * read where the key is */
			smux_error_set(&e, SMUX_E_PRECONDITION_FAILED,
				       p->m->name,
				       "its file of \"%s\" was replaced or "
				       "missed a write",
				       mr->key);
			if (attempts == 0)
				last = e;
		} else if (smux__health_is_up(&p->m->health)) {
			rc = pin_pread(mux, &child, p, buf, len, off, attempts,
				       span, &o, &e);
			if (rc >= 0) {
				pin_put(p);
				break;
			}
			if (e.e.code != SMUX_E_BACKEND_DRAINING)
				attempts++;
			if (o == SMUX_OUTCOME_SEMANTIC ||
			    o == SMUX_OUTCOME_ABORT ||
			    smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
				/* the answer, or the caller's own end */
				*err = e;
				err->e.attempts = attempts;
				pin_put(p);
				break;
			}
			if (o != SMUX_OUTCOME_TIMEOUT)
				all_timeouts = false;
			last = e;
		} else {
			/* down or draining since it was pinned: a get would
			 * go elsewhere now, and so does this read */
			smux_error_set(&e, SMUX_E_ALL_BACKENDS_DOWN, p->m->name,
				       "backend is %s",
				       smux__health_status(&p->m->health) ==
						       SMUX_STATUS_DRAINING
					       ? "draining"
					       : "down");
			if (attempts == 0)
				last = e;
		}
		if (reopens == 0)
			budget = members_now(mux) + 1;
		if (!backend_in(failed, nfailed, p->m->backend) &&
		    nfailed < READ_FAILED_MAX)
			failed[nfailed++] = p->m->backend;
		/* members + 1 re-opens, and more until every member failed
		 * this read (a re-open passes over the members that did
		 * while another is left; once none is, it routes as an open
		 * does, and a member that failed may be back), up to
		 * READ_REOPEN_ROUNDS times that */
		if ((reopens >= budget && nfailed + 1 >= budget) ||
		    reopens >= READ_REOPEN_ROUNDS * budget) {
			rc = smux__exhausted(mux, attempts, all_timeouts, &last,
					     err);
			pin_put(p);
			break;
		}
		reopens++;
		rc = mr_reopen(mr, &rctx, p, &e, attempts, failed, nfailed,
			       err);
		pin_put(p);
		if (rc < 0)
			break;
	}
	return smux__mux_op_leave(mux, span, rc, err);
}

static void mr_close(struct smux_reader *r)
{
	struct mux_reader *mr = mr_of(r);

	pin_put(mr->cur);
	smux__member_put(mr->origin);
	pthread_cond_destroy(&mr->cond);
	pthread_mutex_destroy(&mr->lock);
	free(mr->key);
	smux_reader_release(r);
	free(mr);
}

/* The member reader serving now says (a live one: the object as it is). */
static int mr_stat(struct smux_reader *r, struct smux_info *info)
{
	struct mux_reader *mr = mr_of(r);
	struct pin *p = mr_current(mr);
	int rc = smux_reader_stat(p->r, info);

	pin_put(p);
	return rc;
}

/* A reader reads one replica: only a tree of one copy has no other to
 * keep alike (mirror, failover: -ENOTSUP). */
static int mr_setattr(struct smux_reader *r, const struct smux_setattr *a)
{
	struct mux_reader *mr = mr_of(r);
	struct pin *p;
	int rc;

	if (!(smux_backend_caps(r->backend) & SMUX_CAP_ONE_COPY))
		return -ENOTSUP;
	p = mr_current(mr);
	rc = smux_reader_setattr(p->r, a);
	pin_put(p);
	return rc;
}

/*
 * A live reader's file was written in place through the caller: a move
 * to another replica looks for @info from now on (by size and mtime: the
 * member that answered the head is not known), and so does the pinned
 * member's own reader when it is a mux's. A pinned file that is not the
 * key's any more (a replay replaced the replica's copy: no name left) or
 * whose replica missed a write of the key (its hint pending: drained,
 * not yet replayed) is left at the next read for a member that holds
 * the key as it is: a reader opened before a drain of its replica, an
 * append while it was drained, its undrain and replay, read the old copy
 * it held and took its end for the file's (tail -f missed the lines).
 */
static void mr_rebase(struct smux_reader *r, const struct smux_info *info)
{
	struct mux_reader *mr = mr_of(r);
	struct smux_info st;
	struct pin *p;
	bool behind;

	if (!r->live)
		return;
	pthread_mutex_lock(&mr->lock);
	mr->rebased = true;
	mr->now = *info;
	mr->rebase_gen++;
	pthread_mutex_unlock(&mr->lock);
	p = mr_current(mr);
	smux_reader_rebase(p->r, info);
	/* not by size against @info: another replica may have answered
	 * the head with a write this one has not taken yet (fan-out runs
	 * in parallel), and the move found a newer size again (ESTALE) */
	behind = smux__member_stale(mr->mux, p->m, mr->key) ||
		 (p->r->live && smux_reader_stat(p->r, &st) == 0 &&
		  st.has_times && st.nlink == 0);
	pthread_mutex_lock(&mr->lock);
	if (mr->cur == p)
		mr->behind = behind ? p : NULL;
	pthread_mutex_unlock(&mr->lock);
	pin_put(p);
}

/*
 * Whether @key still holds the version opened, for a reader to read on
 * after a change through the mount: the key is headed where a head is
 * routed now (mirror, failover, shield: in order, past members with a
 * pending hint for it - failover: the member that takes the writes, which
 * a standby the reader reads never sees; the other modes: opened as a get
 * is routed), and compared with what the member serving the reader opened -
 * by its own token when the same member answers, else by size and mtime
 * (smux__version_current). A head of the mux compared with the token
 * pinned could only match when the same member answered: a reader of a
 * failover of a local directory and WebDAV, opened on WebDAV while the
 * directory was out, got ESTALE once it was back (test_mixed_readers).
 * A key gone or out of reach cannot tell (the caller reads on).
 */
static int mr_current_version(struct smux_reader *r, const struct smux_ctx *ctx,
			      const char *key, struct smux_error *err)
{
	struct mux_reader *mr = mr_of(r);
	struct smux_mux *mux = mr->mux;
	struct mux_member *at = NULL;
	struct pin *p, *fresh = NULL;
	struct smux_info now;
	int rc;

	if (mux->mode == SMUX_MODE_MIRROR || mux->mode == SMUX_MODE_FAILOVER ||
	    mux->mode == SMUX_MODE_SHIELD) {
		/* one head, where a head is routed (in order, past members
		 * with a pending hint): not a race of opens */
		struct smux__call call = {
			.op = SMUX__OP_HEAD, .key = key, .info = &now};
		struct smux_span *span = NULL;
		struct smux_ctx child;

		rc = smux__mux_op_enter(mux, ctx, &child, "reader_current", key,
					"sequential", &span, err);
		if (rc == 0)
			rc = (int)smux__exec_walk(mux, &child, &call, true, &at,
						  span, err);
		rc = (int)smux__mux_op_leave(mux, span, rc, err);
	} else {
		fresh = pin_open(mux, ctx, key, "reader_current", NULL, 0, err);
		rc = fresh ? 0 : -err->e.sys_errno;
		if (fresh) {
			at = smux__member_get(fresh->m);
			now = fresh->r->info;
		}
	}
	pin_put(fresh);
	if (rc < 0 || !at) {
		smux__member_put(at);
		return rc < 0 ? rc
			      : smux_error_set(
					err, SMUX_E_UNKNOWN, mux->base.name,
					"\"%s\": no member answered", key);
	}
	p = mr_current(mr);
	if (!smux__version_current(p->m->backend, &p->r->info, at->backend,
				   &now))
		rc = smux_error_set(
			err, SMUX_E_PRECONDITION_FAILED, mux->base.name,
			"\"%s\": backend \"%s\" holds another "
			"version (etag \"%s\", opened \"%s\" on "
			"\"%s\")",
			key, at->name, now.etag, p->r->info.etag, p->m->name);
	pin_put(p);
	smux__member_put(at);
	return rc;
}

static const struct smux_reader_ops mux_reader_ops = {
	.pread = mr_pread,
	.close = mr_close,
	.stat = mr_stat,
	.setattr = mr_setattr,
	.current = mr_current_version,
	.rebase = mr_rebase,
};

int smux__mux_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, struct smux_reader **out,
			  struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct mux_reader *mr;
	struct pin *p;

	*out = NULL;
	p = pin_open(mux, ctx, key, "reader_open", NULL, 0, err);
	if (!p)
		return -err->e.sys_errno;
	mr = calloc(1, sizeof(*mr));
	if (!mr || !(mr->key = strdup(key))) {
		free(mr);
		pin_put(p);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	smux_reader_init(&mr->base, &mux_reader_ops, b);
	mr->base.info = p->r->info;
	mr->base.live = p->r->live;
	mr->mux = mux;
	mr->cur = p;
	mr->origin = smux__member_get(p->m);
	pthread_mutex_init(&mr->lock, NULL);
	pthread_cond_init(&mr->cond, NULL);
	*out = &mr->base;
	return 0;
}
