/* SPDX-License-Identifier: MIT */
/*
 * mux_writer.c - writers through the mux (DESIGN section 6).
 *
 * In shield and mirror a mux writer opens one writer per replica and fans
 * every write and truncate out to them in parallel; commit follows the
 * mode's write policy (smux__fanout_policy) and records hints for the
 * replicas that missed it. In the other modes it is the selected member's
 * writer, still run through that member's bulkhead; in failover the writer
 * opens on the first member with the key's latest version, and a commit
 * records hints for the members ahead of the one that took it
 * (smux__failover_missed). When a member has no
 * writer the mux reports NOT_SUPPORTED and the caller stages the content
 * and puts it, which fans out as a put.
 *
 * A replica whose writer fails (or times out) drops out of the writer; it
 * gets a hint at commit. Each replica writer has a lock the bulkhead holds
 * around every call on it, so an abandoned call never overlaps the next.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

#define WRITER_MAX 64

/* One replica's writer. Refcounted: the mux writer holds one reference
 * and every job on it one more, dropped by the worker when it is done
 * with the job (bulkhead `done`), so an abandoned call may still hold
 * `lock` after the mux writer is gone and nothing leaks. */
struct sub {
	atomic_int refs;
	pthread_mutex_t lock;
	struct smux_writer *w; /* NULL when it never opened */
	bool failed;
	struct smux_error err; /* why it failed */
};

struct mux_writer {
	struct smux_writer base; /* first */
	struct smux_mux *mux;
	unsigned n;
	struct mux_member *m[WRITER_MAX]; /* references */
	struct sub *s[WRITER_MAX];
	bool fanout; /* shield/mirror: policy at commit */
};

static const struct smux_writer_ops mux_writer_ops;

static struct mux_writer *mw_of(struct smux_writer *w)
{
	return w->ops == &mux_writer_ops ? (struct mux_writer *)w : NULL;
}

static void sub_put(void *arg)
{
	struct sub *s = arg;

	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Starts @c on replica @i; the job holds a reference on the sub until the
 * worker is done with it. NULL when the job could not start. */
static struct smux__job *sub_start(struct mux_writer *mw, unsigned i,
				   const struct smux_ctx *ctx,
				   struct smux__call *c)
{
	struct sub *s = mw->s[i];
	struct smux__job *job;

	c->writer_lock = &s->lock;
	c->done = sub_put;
	c->done_arg = s;
	atomic_fetch_add(&s->refs, 1);
	job = smux__bulkhead_start(mw->m[i]->bh, ctx, mw->mux->timeout_ms, c,
				   NULL);
	if (!job) /* never the last reference: the writer holds one */
		atomic_fetch_sub(&s->refs, 1);
	return job;
}

/* sub_start + smux__job_finish. */
static long sub_run(struct mux_writer *mw, unsigned i,
		    const struct smux_ctx *ctx, struct smux__call *c,
		    struct smux_error *err)
{
	struct smux__job *job = sub_start(mw, i, ctx, c);

	if (!job)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mw->m[i]->name,
				      "cannot start job");
	return smux__job_finish(job, err);
}

static bool live(const struct mux_writer *mw, unsigned i)
{
	return mw->s[i]->w && !mw->s[i]->failed;
}

/*
 * Runs @proto on every live replica writer in parallel; replicas that fail
 * drop out. Returns 0 while the write policy can still be met (shield: the
 * origin is live; others: any replica is live), else the failure.
 */
static long fan(struct mux_writer *mw, const struct smux_ctx *ctx,
		const struct smux__call *proto, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	struct smux__call calls[WRITER_MAX];
	struct smux__job *jobs[WRITER_MAX] = {0};
	int64_t t0[WRITER_MAX] = {0};
	long result = 0;
	int first_fail = -1;

	for (unsigned i = 0; i < mw->n; i++) {
		if (!live(mw, i))
			continue;
		calls[i] = *proto;
		calls[i].backend = mw->m[i]->backend;
		calls[i].writer = mw->s[i]->w;
		atomic_fetch_add(&mw->m[i]->health.in_flight, 1);
		t0[i] = smux_now_ns();
		jobs[i] = sub_start(mw, i, ctx, &calls[i]);
	}
	for (unsigned i = 0; i < mw->n; i++) {
		struct smux_error e;
		long r;

		if (!live(mw, i))
			continue;
		if (jobs[i])
			r = smux__job_finish(jobs[i], &e);
		else
			r = smux_error_set(&e, SMUX_E_NO_MEMORY, mw->m[i]->name,
					   "cannot start job");
		atomic_fetch_sub(&mw->m[i]->health.in_flight, 1);
		smux__attempt_done(mux, ctx, mw->m[i], false, t0[i],
				   r < 0 ? &e : NULL, NULL);
		if (r < 0) {
			mw->s[i]->failed = true;
			mw->s[i]->err = e;
			if (first_fail < 0)
				first_fail = (int)i;
		} else if (result == 0) {
			result = r; /* bytes, for a read */
		}
	}
	if (mw->fanout && mux->mode == SMUX_MODE_SHIELD) {
		if (!live(mw, 0)) {
			*err = mw->s[0]->err;
			return -err->e.sys_errno;
		}
		return result;
	}
	for (unsigned i = 0; i < mw->n; i++)
		if (live(mw, i))
			return result;
	if (first_fail >= 0) {
		*err = mw->s[first_fail]->err;
		return -err->e.sys_errno;
	}
	return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			      "no replica writer is left");
}

static int mw_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
		     const void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct smux__call c = {
		.op = SMUX__OP_W_PWRITE,
		.wbuf = buf,
		.len = len,
		.off = off,
	};

	return (int)fan(mw_of(w), ctx, &c, err);
}

static int mw_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
		       uint64_t size, struct smux_error *err)
{
	struct smux__call c = {.op = SMUX__OP_W_TRUNCATE, .off = size};

	return (int)fan(mw_of(w), ctx, &c, err);
}

static long mw_pread(struct smux_writer *w, void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct mux_writer *mw = mw_of(w);
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	for (unsigned i = 0; i < mw->n; i++) {
		long nread = 0, r;
		struct smux__call c = {
			.op = SMUX__OP_W_PREAD,
			.backend = mw->m[i]->backend,
			.writer = mw->s[i]->w,
			.rbuf = buf,
			.len = len,
			.off = off,
			.nread = &nread,
		};

		if (!live(mw, i))
			continue;
		r = sub_run(mw, i, &ctx, &c, err);
		return r < 0 ? r : nread;
	}
	return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mw->mux->base.name,
			      "no replica writer is left");
}

static uint64_t mw_size(struct smux_writer *w)
{
	struct mux_writer *mw = mw_of(w);
	uint64_t size = 0;

	for (unsigned i = 0; i < mw->n; i++) {
		if (!live(mw, i))
			continue;
		pthread_mutex_lock(&mw->s[i]->lock);
		size = smux_writer_size(mw->s[i]->w);
		pthread_mutex_unlock(&mw->s[i]->lock);
		break;
	}
	return size;
}

static int mw_commit(struct smux_writer *w, const struct smux_ctx *ctx,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct mux_writer *mw = mw_of(w);
	struct smux_mux *mux = mw->mux;
	struct smux_info infos[WRITER_MAX];
	struct smux_error errs[WRITER_MAX];
	bool ok[WRITER_MAX];
	struct smux__call calls[WRITER_MAX];
	struct smux__job *jobs[WRITER_MAX] = {0};
	int64_t t0[WRITER_MAX] = {0};
	struct smux_put_opts po;
	int info_from = -1;
	long rc;

	if (mw->fanout) /* one mtime: the replicas agree on the version */
		opts = smux__uniform_mtime(&po, opts);
	for (unsigned i = 0; i < mw->n; i++) {
		ok[i] = false;
		if (!live(mw, i)) {
			errs[i] = mw->s[i]->err;
			continue;
		}
		calls[i] = (struct smux__call){
			.op = SMUX__OP_W_COMMIT,
			.backend = mw->m[i]->backend,
			.writer = mw->s[i]->w,
			.put_opts = opts,
			.info = &infos[i],
		};
		atomic_fetch_add(&mw->m[i]->health.in_flight, 1);
		t0[i] = smux_now_ns();
		jobs[i] = sub_start(mw, i, ctx, &calls[i]);
	}
	for (unsigned i = 0; i < mw->n; i++) {
		long r;

		if (!live(mw, i))
			continue;
		if (jobs[i])
			r = smux__job_finish(jobs[i], &errs[i]);
		else
			r = smux_error_set(&errs[i], SMUX_E_NO_MEMORY,
					   mw->m[i]->name, "cannot start job");
		atomic_fetch_sub(&mw->m[i]->health.in_flight, 1);
		smux__attempt_done(mux, ctx, mw->m[i], false, t0[i],
				   r < 0 ? &errs[i] : NULL, NULL);
		ok[i] = r >= 0;
		if (!ok[i]) {
			mw->s[i]->failed = true;
			mw->s[i]->err = errs[i];
		} else if (info_from < 0) {
			info_from = (int)i;
		}
		if (ok[i] && smux__member_stale(mux, mw->m[i], w->key))
			smux__hints_supersede(mux->hints, mw->m[i]->name,
					      w->key, NULL);
	}
	if (mw->fanout) {
		rc = smux__fanout_policy(mux, w->key, SMUX__HINT_PUT, mw->m, ok,
					 errs, mw->n, err);
	} else if (info_from < 0) {
		*err = errs[0];
		rc = -err->e.sys_errno;
	} else if (mux->mode == SMUX_MODE_FAILOVER) {
		/* the members ahead of the one that took it missed it */
		rc = smux__failover_missed(mux, mw->m[info_from], w->key,
					   SMUX__HINT_PUT, err);
	} else {
		rc = 0;
	}
	if (rc == 0 && info && info_from >= 0)
		*info = infos[info_from];
	return (int)rc;
}

static void mw_close(struct smux_writer *w)
{
	struct mux_writer *mw = mw_of(w);
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	for (unsigned i = 0; i < mw->n; i++) {
		struct sub *s = mw->s[i];
		struct smux__call c = {
			.op = SMUX__OP_W_CLOSE,
			.backend = mw->m[i]->backend,
			.writer = s->w,
		};
		struct smux_error e;

		/* a close that times out still runs, after the stuck call,
		 * and its job keeps the sub alive until then */
		if (s->w)
			sub_run(mw, i, &ctx, &c, &e);
		sub_put(s);
	}
	for (unsigned i = 0; i < mw->n; i++)
		smux__member_put(mw->m[i]);
	smux_writer_release(&mw->base);
	free(mw);
}

static const struct smux_writer_ops mux_writer_ops = {
	.pwrite = mw_pwrite,
	.pread = mw_pread,
	.truncate = mw_truncate,
	.size = mw_size,
	.commit = mw_commit,
	.close = mw_close,
};

/* Adds @m as a replica of @mw (takes a reference). */
static int add_sub(struct mux_writer *mw, struct mux_member *m)
{
	struct sub *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	mw->m[mw->n] = smux__member_get(m);
	mw->s[mw->n] = s;
	mw->n++;
	return 0;
}

/* Opens the replica writers in parallel. NOT_SUPPORTED from any replica
 * is returned as is (the caller stages instead). */
static int open_subs(struct mux_writer *mw, const struct smux_ctx *ctx,
		     const char *key, unsigned flags, const bool *acquired,
		     const bool *probes, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	struct smux__call calls[WRITER_MAX];
	struct smux__job *jobs[WRITER_MAX] = {0};
	int64_t t0[WRITER_MAX] = {0};
	int rc = 0;

	for (unsigned i = 0; i < mw->n; i++) {
		if (!acquired[i]) {
			mw->s[i]->failed = true;
			smux_error_set(&mw->s[i]->err, SMUX_E_ALL_BACKENDS_DOWN,
				       mw->m[i]->name,
				       "backend is down (cooldown)");
			continue;
		}
		calls[i] = (struct smux__call){
			.op = SMUX__OP_WRITER_OPEN,
			.backend = mw->m[i]->backend,
			.key = key,
			.flags = flags,
			.writer_out = &mw->s[i]->w,
		};
		atomic_fetch_add(&mw->m[i]->health.in_flight, 1);
		t0[i] = smux_now_ns();
		jobs[i] = sub_start(mw, i, ctx, &calls[i]);
	}
	for (unsigned i = 0; i < mw->n; i++) {
		struct smux_error e;
		long r;

		if (!acquired[i])
			continue;
		if (jobs[i])
			r = smux__job_finish(jobs[i], &e);
		else
			r = smux_error_set(&e, SMUX_E_NO_MEMORY, mw->m[i]->name,
					   "cannot start job");
		atomic_fetch_sub(&mw->m[i]->health.in_flight, 1);
		smux__attempt_done(mux, ctx, mw->m[i], probes[i], t0[i],
				   r < 0 ? &e : NULL, NULL);
		if (r < 0) {
			mw->s[i]->failed = true;
			mw->s[i]->err = e;
			if (e.e.code == SMUX_E_NOT_SUPPORTED && rc == 0) {
				*err = e;
				rc = -err->e.sys_errno;
			}
		}
	}
	return rc;
}

int smux__mux_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, unsigned flags,
			  struct smux_writer **out, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct mux_writer *mw = calloc(1, sizeof(*mw));
	bool acquired[WRITER_MAX] = {0}, probes[WRITER_MAX] = {0};
	struct smux_ctx child = *ctx;
	int64_t now = smux__mux_now(mux);
	int rc;

	*out = NULL;
	if (!mw)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	if (ctx->depth >= SMUX_MAX_DEPTH) {
		free(mw);
		return smux_error_set(err, SMUX_E_RECURSION_DEPTH_EXCEEDED,
				      b->name, "nested too deep");
	}
	child.depth = ctx->depth + 1;
	mw->mux = mux;
	mw->fanout =
		mux->mode == SMUX_MODE_SHIELD || mux->mode == SMUX_MODE_MIRROR;
	rc = smux_writer_init(&mw->base, &mux_writer_ops, b, key);
	if (rc) {
		free(mw);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	atomic_fetch_add(&mux->total_calls, 1);
	if (mw->fanout) {
		struct mux_view *v = smux__view_get(mux);

		for (unsigned i = 0; i < v->n && mw->n < WRITER_MAX; i++) {
			struct mux_member *m = v->m[i];

			if (smux__health_status(&m->health) ==
			    SMUX_STATUS_DRAINING)
				continue;
			acquired[mw->n] = smux__health_acquire(&m->health, now,
							       &probes[mw->n]);
			if (!acquired[mw->n] && mux->mode == SMUX_MODE_SHIELD &&
			    i == 0)
				acquired[mw->n] = true; /* the origin */
			if (add_sub(mw, m)) {
				smux__view_put(v);
				rc = smux_error_set(err, SMUX_E_NO_MEMORY,
						    b->name, NULL);
				goto out_close;
			}
		}
		smux__view_put(v);
		rc = open_subs(mw, &child, key, flags, acquired, probes, err);
		if (rc)
			goto out_close;
		if (mux->mode == SMUX_MODE_SHIELD && mw->n && !live(mw, 0)) {
			*err = mw->s[0]->err;
			rc = -err->e.sys_errno;
			goto out_close;
		}
	} else {
		/* the selected member, falling through on transient errors */
		struct mux_cursor c;
		struct mux_member *m;
		bool probe = false;

		smux__cursor_init(&c, mux, key,
				  mux->mode == SMUX_MODE_FAILOVER);
		while ((m = smux__cursor_next(&c, &probe))) {
			bool yes = true;

			/* not on a member that missed the key's latest write:
			 * a writer that starts from the object would start
			 * from an old version, and a commit could race the
			 * replay of that write */
			if (mux->mode == SMUX_MODE_FAILOVER &&
			    smux__member_stale(mux, m, key)) {
				if (probe)
					smux__health_probe_cancel(&m->health);
				smux__member_put(m);
				continue;
			}
			mw->n = 0;
			if (add_sub(mw, m)) {
				smux__member_put(m);
				break;
			}
			smux__member_put(m);
			rc = open_subs(mw, &child, key, flags, &yes, &probe,
				       err);
			if (rc || live(mw, 0))
				break;
			enum smux_outcome o = smux_classify(&mw->s[0]->err.e);

			if (o != SMUX_OUTCOME_TRANSIENT &&
			    o != SMUX_OUTCOME_TIMEOUT)
				break;
			/* try the next member (a stuck open keeps its own
			 * reference on the sub) */
			sub_put(mw->s[0]);
			smux__member_put(mw->m[0]);
			mw->n = 0;
		}
		smux__cursor_release(&c);
		if (rc)
			goto out_close;
		if (mw->n == 0 || !live(mw, 0)) {
			if (mw->n)
				*err = mw->s[0]->err;
			else
				smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
					       b->name,
					       "no backend is available");
			rc = -err->e.sys_errno;
			goto out_close;
		}
	}
	for (unsigned i = 0; i < mw->n; i++)
		if (live(mw, i)) {
			*out = &mw->base;
			return 0;
		}
	rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, b->name,
			    "no replica writer could be opened");
out_close:
	mw_close(&mw->base);
	return rc;
}
