/* SPDX-License-Identifier: MIT */
/*
 * mux_writer.c - writers through the mux (DESIGN section 6): the replica
 * writers, fan-out, the operations table, open and close.
 *
 * Fan-out (shield, mirror): a mux writer opens one writer per replica and
 * fans every write, truncate and fallocate out to them in parallel;
 * commit follows the mode's write policy (smux__fanout_policy) and records
 * hints for the replicas that missed it. A replica whose writer fails (or
 * times out) drops out of the writer and gets a hint at commit; reads of
 * the pending content come from the first replica still in, and one that
 * fails there drops out too. When no replica's writer opens, one that is
 * coming back (under the background thread's probe) is waited for.
 *
 * Single target (failover, round-robin, weighted, sticky-by-key): one
 * member's writer, moved to another member when that one fails
 * (mux_writer_single.c).
 *
 * When a member has no writer the mux reports NOT_SUPPORTED and the caller
 * stages the content and puts it, which the mux routes as a put.
 *
 * Every replica writer call runs on its member's bulkhead, under a lock
 * the worker holds around it, so an abandoned call never overlaps the
 * next and reaches only the job's own copies of the caller's buffers
 * (bulkhead.h). The size is the mux writer's own: asking a member could
 * wait on a call stuck holding that lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_writer.h"

static const struct smux_writer_ops mux_writer_ops;

static struct smux__mux_writer *mw_of(struct smux_writer *w)
{
	return w->ops == &mux_writer_ops ? (struct smux__mux_writer *)w : NULL;
}

void smux__mw_sub_put(void *arg)
{
	struct smux__mw_sub *s = arg;

	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The job holds a reference on the sub until the worker is done with it. */
struct smux__job *smux__mw_sub_start(struct smux__mux_writer *mw, unsigned i,
				     const struct smux_ctx *ctx,
				     struct smux__call *c)
{
	struct smux__mw_sub *s = mw->s[i];
	struct smux__job *job;

	c->writer_lock = &s->lock;
	c->done = smux__mw_sub_put;
	c->done_arg = s;
	atomic_fetch_add(&s->refs, 1);
	job = smux__bulkhead_start(mw->m[i]->bh, ctx, mw->mux->timeout_ms, c,
				   NULL);
	if (!job) /* never the last reference: the writer holds one */
		atomic_fetch_sub(&s->refs, 1);
	return job;
}

long smux__mw_sub_run(struct smux__mux_writer *mw, unsigned i,
		      const struct smux_ctx *ctx, struct smux__call *c,
		      struct smux_error *err)
{
	struct smux__job *job = smux__mw_sub_start(mw, i, ctx, c);

	if (!job)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mw->m[i]->name,
				      "cannot start job");
	return smux__job_finish(job, err);
}

/*
 * Drops replica @i: its writer is closed by a job nobody waits for (queued
 * behind a stuck call, it runs once that call returns), then the writer's
 * references go. The caller compacts mw->m/s.
 */
void smux__mw_sub_retire(struct smux__mux_writer *mw, unsigned i)
{
	struct smux__mw_sub *s = mw->s[i];
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	if (s->w) {
		struct smux__call c = {
			.op = SMUX__OP_W_CLOSE,
			.backend = mw->m[i]->backend,
			.writer = s->w,
		};
		struct smux__job *job = smux__mw_sub_start(mw, i, &ctx, &c);

		if (job) {
			smux__job_abandon(job, SMUX_CANCEL_ABORT);
		} else { /* no memory for a job: close it here */
			pthread_mutex_lock(&s->lock);
			smux_writer_close(s->w);
			pthread_mutex_unlock(&s->lock);
		}
		s->w = NULL;
	}
	smux__mw_sub_put(s);
	smux__member_put(mw->m[i]);
}

int smux__mw_add_sub(struct smux__mux_writer *mw, struct mux_member *m)
{
	struct smux__mw_sub *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->lock, NULL);
	mw->m[mw->n] = smux__member_get(m);
	mw->s[mw->n] = s;
	mw->n++;
	return 0;
}

/* The bulkhead start of replica @i's job (smux__fan.start). */
static struct smux__job *fan_start(void *arg, unsigned i,
				   const struct smux_ctx *ctx,
				   struct smux__call *c)
{
	struct smux__mux_writer *mw = arg;

	c->writer = mw->s[i]->w; /* WRITER_OPEN: NULL, set by the call */
	return smux__mw_sub_start(mw, i, ctx, c);
}

/* A fan-out over the replicas of @mw (none to call yet); NULL when there
 * is no memory. Not zeroed: smux__fan_run sets what it reads. */
static struct smux__fan *fan_new(struct smux__mux_writer *mw)
{
	struct smux__fan *f = malloc(sizeof(*f));

	if (!f)
		return NULL;
	f->mux = mw->mux;
	f->n = mw->n;
	f->spans = false;
	f->start = fan_start;
	f->start_arg = mw;
	f->wkey = mw->base.key;
	for (unsigned i = 0; i < mw->n; i++) {
		f->m[i] = mw->m[i];
		f->go[i] = false;
		f->probe[i] = false;
	}
	return f;
}

int smux__mw_open_subs(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		       const char *key, unsigned flags, const bool *acquired,
		       const bool *probes, const bool *cooled,
		       struct smux_error *err)
{
	struct smux__fan *f = fan_new(mw);
	int rc = 0;

	if (!f)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mw->mux->base.name,
				      NULL);
	for (unsigned i = 0; i < mw->n; i++) {
		f->cooled[i] = cooled && cooled[i];
		f->call[i] = (struct smux__call){
			.op = SMUX__OP_WRITER_OPEN,
			.key = key,
			.flags = flags,
			.writer_out = &mw->s[i]->w,
		};
		if (!acquired[i] && mw->s[i]->w && !mw->s[i]->failed)
			continue; /* opened already (fanout_open's origin) */
		if (!acquired[i]) {
			/* left out: down, or (fanout_open) stale */
			if (!mw->s[i]->failed)
				smux_error_set(&mw->s[i]->err,
					       SMUX_E_ALL_BACKENDS_DOWN,
					       mw->m[i]->name,
					       "backend is down (cooldown)");
			mw->s[i]->failed = true;
			continue;
		}
		f->go[i] = true;
		f->probe[i] = probes[i];
	}
	/* none opened: a replica coming back (@cooled: under the background
	 * thread's probe) is waited for and opened alone */
	smux__fan_run_probed(f, ctx, NULL);
	for (unsigned i = 0; i < mw->n; i++) {
		if (f->ok[i] && !acquired[i]) { /* back from its probe */
			mw->s[i]->failed = false;
			memset(&mw->s[i]->err, 0, sizeof(mw->s[i]->err));
		}
		if (!f->go[i] || f->ok[i])
			continue;
		mw->s[i]->failed = true;
		mw->s[i]->err = f->err[i];
		/* not supported, or the caller's own failure (the daemon
		 * out of descriptors): no replica's fault, the open fails */
		if ((f->err[i].e.code == SMUX_E_NOT_SUPPORTED ||
		     smux__caller_failed(ctx, &f->err[i])) &&
		    rc == 0) {
			*err = f->err[i];
			rc = -err->e.sys_errno;
		}
	}
	free(f);
	return rc;
}

/* The chunk a rejoin copies at a time (rejoin_copy). */
#define REJOIN_CHUNK ((size_t)1 << 20)

/*
 * Copies the pending content of live replica @j over replica @i's file
 * (its writer still open on it): truncated to @j's size, then read from
 * @j and written to @i chunk by chunk. 0 or the first failure.
 */
static int rejoin_copy(struct smux__mux_writer *mw, unsigned i, unsigned j,
		       const struct smux_ctx *ctx, struct smux_error *err)
{
	uint64_t size = smux__mw_sub_size(mw, j), off = 0;
	struct smux__call cut = {
		.op = SMUX__OP_W_TRUNCATE,
		.backend = mw->m[i]->backend,
		.writer = mw->s[i]->w,
		.off = size,
	};
	unsigned char *buf = malloc(REJOIN_CHUNK);
	long rc;

	if (!buf)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mw->m[i]->name,
				      NULL);
	rc = smux__mw_sub_run(mw, i, ctx, &cut, err);
	while (rc >= 0 && off < size) {
		long nread = 0;
		struct smux__call rd = {
			.op = SMUX__OP_W_PREAD,
			.backend = mw->m[j]->backend,
			.writer = mw->s[j]->w,
			.rbuf = buf,
			.len = size - off < REJOIN_CHUNK ? (size_t)(size - off)
							 : REJOIN_CHUNK,
			.off = off,
			.nread = &nread,
		};
		struct smux__call wr = {
			.op = SMUX__OP_W_PWRITE,
			.backend = mw->m[i]->backend,
			.writer = mw->s[i]->w,
			.wbuf = buf,
		};

		rc = smux__mw_sub_run(mw, j, ctx, &rd, err);
		if (rc < 0)
			break;
		if (nread <= 0) { /* cut behind our back: @i is cut there too */
			cut.off = off;
			rc = smux__mw_sub_run(mw, i, ctx, &cut, err);
			break;
		}
		wr.len = (size_t)nread;
		wr.off = off;
		rc = smux__mw_sub_run(mw, i, ctx, &wr, err);
		off += (uint64_t)nread;
	}
	free(buf);
	return rc < 0 ? (int)rc : 0;
}

/* The rejoin copy's calls on replica @i and source @j are over. */
static void rejoin_leave(struct smux__mux_writer *mw, unsigned i, unsigned j)
{
	atomic_fetch_sub(&mw->m[i]->health.in_flight, 1);
	atomic_fetch_sub(&mw->m[j]->health.in_flight, 1);
}

/*
 * After the rejoin copy of replica @i from @j, which misses nothing of the
 * key: what the copy of the bytes leaves out - mode, owner, user.
 * extended attributes (a chmod or setfattr @i missed while drained) -
 * made @j's too, so @i holds the key's latest state as @j does. 0 or the
 * first failure.
 */
static long rejoin_meta(struct smux__mux_writer *mw, unsigned i, unsigned j,
			const struct smux_ctx *ctx, struct smux_error *err)
{
	struct smux_info si, di;
	struct smux__call hs = {
		.op = SMUX__OP_HEAD, .key = mw->base.key, .info = &si};
	struct smux__call hd = {
		.op = SMUX__OP_HEAD, .key = mw->base.key, .info = &di};
	bool fixed;
	long rc;

	/* the source's calls counted, not refused, as the copy's reads: a
	 * source drained since is the only whole copy (a rolling drain with
	 * no write between a's undrain and b's drain: refused, the meta
	 * left the rejoined replica hinted, and once b missed the next
	 * write the key had no replica to read it from, s46 review) */
	smux__member_call_source(mw->m[j]);
	rc = smux__member_call(mw->mux, ctx, mw->m[j], &hs, false, err);
	if (rc == 0)
		rc = smux__member_call(mw->mux, ctx, mw->m[i], &hd, false, err);
	if (rc == 0)
		rc = smux__meta_fix(mw->mux, ctx, mw->m[j], mw->m[i],
				    mw->base.key, &si, &di, &fixed, err);
	smux__member_call_source(NULL);
	return rc;
}

/*
 * Whether @key names, on live replica @j, the file @j's writer writes: a
 * rename over the name or of it, or an unlink (through the mount, or
 * another mount), left the name to another file or none. The writer's
 * own stat against a head of the key there, counted on @j but not
 * refused while it drains (its copy's reads are not either). 1: it does;
 * 0: it names another file or none; -1: cannot tell now (a call holds
 * the writer, a head failed, a rename or delete of the name in flight).
 */
static int names_its_file(struct smux__mux_writer *mw, unsigned j,
			  const struct smux_ctx *ctx)
{
	struct smux_info wi, hi;
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = mw->base.key, .info = &hi};
	struct smux_error e;
	int rc;

	if (pthread_mutex_trylock(&mw->s[j]->lock) != 0)
		return -1;
	rc = smux_writer_stat(mw->s[j]->w, &wi);
	pthread_mutex_unlock(&mw->s[j]->lock);
	if (rc || !wi.file_id)
		return -1;
	if (smux__intent_unsettled(mw->mux, mw->base.key, mw->intent_gen))
		return smux__intent_detached(mw->mux, mw->base.key,
					     mw->intent_gen)
			       ? 0
			       : -1;
	smux__member_call_source(mw->m[j]);
	rc = (int)smux__member_call(mw->mux, ctx, mw->m[j], &head, false, &e);
	smux__member_call_source(NULL);
	if (rc < 0)
		return e.e.code == SMUX_E_KEY_NOT_FOUND ? 0 : -1;
	if (hi.file_id != wi.file_id)
		return 0;
	/* the name may have gone meanwhile: only a settled one is its */
	return smux__intent_unsettled(mw->mux, mw->base.key, mw->intent_gen)
		       ? -1
		       : 1;
}

/* A rejoin's hint events for @m: recorded, or replayed (@e: why not) */
static void hint_event(struct smux__mux_writer *mw, struct mux_member *m,
		       enum smux_topic topic, const struct smux_error *e)
{
	struct smux_event ev = {.topic = topic};

	snprintf(ev.mux, sizeof(ev.mux), "%s", mw->mux->base.name);
	snprintf(ev.name, sizeof(ev.name), "%s", m->name);
	snprintf(ev.key, sizeof(ev.key), "%s", mw->base.key);
	if (e) {
		ev.has_cause = true;
		ev.cause = e->e;
	}
	smux_events_emit(mw->mux->events, &ev);
}

/*
 * Replica @m (the writer's late[@k]), draining when the writer opened and
 * up again, joins it with a copy of live replica @src's file, which
 * misses nothing of the key: hinted for the key first (no read goes to it
 * from here until the copy is whole), a writer of its own opened on the
 * key (creating the file: one made while it was drained), the content
 * copied, then mode, owner and xattrs, and the key checked again to name
 * the writer's file; then the hint ends (every hint it had for the key,
 * which the copy supersedes) and every write goes to it. A failure
 * leaves it out until the close, hinted (the repair brings the key's
 * file). The caller holds @src in flight.
 */
static void join_one(struct smux__mux_writer *mw, unsigned k, unsigned src,
		     const struct smux_ctx *ctx)
{
	struct smux_mux *mux = mw->mux;
	struct mux_member *m = mw->late[k];
	struct smux__call open = {
		.op = SMUX__OP_WRITER_OPEN,
		.backend = m->backend,
		.key = mw->base.key,
		.flags = (mw->flags &
			  ~(unsigned)(SMUX_WRITER_TRUNC | SMUX_WRITER_EXCL |
				      SMUX_WRITER_EXISTING)) |
			 SMUX_WRITER_INPLACE | SMUX_WRITER_CREATE,
	};
	struct smux__mw_sub *s;
	struct smux_error e;
	uint64_t id = 0;
	bool missed;
	unsigned i;
	long rc;

	if (!smux__member_enter(m))
		return; /* draining again */
	missed = smux__hints_has(mux->hints, m->name, mw->base.key);
	smux_error_clear(&e);
	if (smux__hints_add(mux->hints, m->name, mw->base.key, SMUX__HINT_PUT,
			    &id, &e) ||
	    smux__mw_add_sub(mw, m)) {
		/* the journal or memory failed: it stays out for good, and
		 * gets its hint at the commit (one recorded here stands) */
		atomic_fetch_sub(&m->health.in_flight, 1);
		mw->late[k] = NULL;
		smux__member_put(m);
		return;
	}
	hint_event(mw, m, SMUX_EV_HINT_RECORDED, NULL);
	mw->late[k] = NULL;
	smux__member_put(m); /* the sub holds one */
	i = mw->n - 1;
	s = mw->s[i];
	s->late = true; /* until it is in: kept out of the commit's count */
	s->failed = true;
	open.writer_out = &s->w;
	rc = smux__mw_sub_run(mw, i, ctx, &open, &e);
	/* a file the replica had already, and with other names there (hard
	 * links made before its drain): a copy into it would change those
	 * names on that replica alone; left to the repair */
	if (rc == 0 && missed && smux__mw_sub_nlink(mw, i) != 1)
		rc = smux_error_set(&e, SMUX_E_NOT_SUPPORTED, m->name,
				    "%s has other names there", mw->base.key);
	if (rc == 0)
		rc = rejoin_copy(mw, i, src, ctx, &e);
	if (rc == 0)
		rc = rejoin_meta(mw, i, src, ctx, &e);
	if (rc == 0 && names_its_file(mw, src, ctx) != 1)
		rc = smux_error_set(&e, SMUX_E_KEY_NOT_FOUND, m->name,
				    "%s went to another file while it joined",
				    mw->base.key);
	atomic_fetch_sub(&m->health.in_flight, 1);
	if (rc < 0) {
		s->err = e; /* out until its close */
		hint_event(mw, m, SMUX_EV_HINT_REPLAYED, &e);
		return;
	}
	s->failed = false;
	s->late = false;
	smux_error_clear(&s->err);
	if (missed) /* every hint it had for the key ends, ours too */
		smux__replica_wrote(mux, m, mw->base.key);
	else
		(void)smux__hints_done(mux->hints, id, NULL);
	hint_event(mw, m, SMUX_EV_HINT_REPLAYED, NULL);
}

/*
 * The replicas that were draining when the writer opened, and that are up
 * and in the mux again, join it (join_one) from live replica @src, which
 * misses nothing of the key. Without it a file created (or opened) while
 * one replica was drained had the other one only, and a rolling drain
 * (undrain it, drain the other) left the open file with no replica:
 * git's index.lock and sqlite's journal failed their writes and close
 * with EIO (s45-t4). A file whose name went to another file or none is
 * not joined (names_its_file): the key is not its, and the replica gets
 * what the key holds from its hint.
 */
static void join_late(struct smux__mux_writer *mw, unsigned src,
		      const struct smux_ctx *ctx)
{
	int named = -2; /* not asked yet */

	for (unsigned k = 0; k < mw->n_late && mw->n < SMUX__WRITER_MAX; k++) {
		struct mux_member *m = mw->late[k];

		if (!m || !smux__health_is_up(&m->health) ||
		    !smux__member_in_view(mw->mux, m))
			continue;
		/* the source's calls are counted, not refused: the only
		 * whole copy may be draining since (a rolling drain) */
		atomic_fetch_add(&mw->m[src]->health.in_flight, 1);
		if (named == -2)
			named = names_its_file(mw, src, ctx);
		if (named == 1) {
			join_one(mw, k, src, ctx);
		} else if (named == 0) {
			/* for good: it gets the key's file from its hint */
			mw->late[k] = NULL;
			smux__member_put(m);
		} /* else asked again at the next call */
		atomic_fetch_sub(&mw->m[src]->health.in_flight, 1);
	}
}

/* The first live replica but @skip with no hint for the key (it holds
 * every write of it), or -1. */
static int whole_source(struct smux__mux_writer *mw, unsigned skip)
{
	for (unsigned j = 0; j < mw->n; j++)
		if (j != skip && smux__mw_live(mw, j) &&
		    !smux__member_stale(mw->mux, mw->m[j], mw->base.key))
			return (int)j;
	return -1;
}

/*
 * Fan-out in place: a replica this writer dropped because it was being
 * drained, and that is up and serving again, takes the writer back: its
 * file is made a copy of a live replica's (its writer is still open on
 * it) and the writer's calls go to it again. Without this a rolling drain
 * (drain a, undrain a, drain b) left a file held open with no replica at
 * b's drain, and every write failed until it was reopened. The replica is
 * hinted for the key while its copy is partial (a crash meanwhile
 * reconciles it from a complete one: mux_repair.c never takes a hinted
 * replica as the source) and the hint is done once the copy is whole.
 * A replica whose copy fails stays out, as it was. The copy's calls count
 * in flight on both replicas, as a user's call: a drain of either waits
 * for them (it found neither busy, and the copy went on writing the
 * replica it had drained); a replica draining again is not taken back.
 *
 * The source is a live replica that misses nothing of the key where there
 * is one. The hints the rejoined replica had for the key (the writes it
 * missed while drained) then end too, once its mode, owner and xattrs are
 * the source's: it holds the key's latest state. Left for the repair,
 * they made a rolling drain of three replicas (s41-t1) end with every
 * replica hinted for a log held open - none had its latest write, so
 * reads of it failed and no replay could ever run.
 */
static void rejoin_drained(struct smux__mux_writer *mw,
			   const struct smux_ctx *ctx)
{
	struct smux_mux *mux = mw->mux;
	int src = -1, clean = -1;
	bool nameless;

	if (!mw->fanout || !mw->inplace)
		return;
	/* its file lost the name (a rename over it, an unlink): the copy
	 * goes to the replica's own file as ever (its other names, hard
	 * links, show the writes there too: s42-t3), but the replica's
	 * hints for the name stay - they bring the file that has the name
	 * now, or its delete (s42-t2: ended, a file renamed over the name
	 * was lost) */
	nameless = smux__intent_detached(mux, mw->base.key, mw->intent_gen);
	for (unsigned j = 0; j < mw->n && src < 0; j++)
		if (smux__mw_live(mw, j))
			src = (int)j;
	if (src < 0)
		return;
	if (!nameless && mw->n_late) {
		clean = whole_source(mw, mw->n);
		if (clean >= 0)
			join_late(mw, (unsigned)clean, ctx);
		clean = -1;
	}
	for (unsigned i = 0; i < mw->n; i++) {
		struct smux__mw_sub *s = mw->s[i];
		struct smux_error e;
		uint64_t id = 0;
		bool missed;
		int rc;

		/* a late one whose join failed stays out until its close
		 * (its own checks were join_one's) */
		if (!s->w || !s->failed || s->late ||
		    s->err.e.code != SMUX_E_BACKEND_DRAINING ||
		    !smux__health_is_up(&mw->m[i]->health))
			continue;
		if (!smux__member_enter(mw->m[i]))
			continue; /* draining again */
		if (clean < 0) {  /* once a rejoin is due: a whole source */
			clean = whole_source(mw, i);
			if (clean >= 0)
				src = clean;
		}
		/* no live replica holds every write of the key: a copy of
		 * one that missed a write is no whole copy (taken in, the
		 * replica and its source were both behind on the key, and
		 * the next write the source missed left it no replica to be
		 * read from, s46-t3) - the name's file is not the writer's
		 * any more when it lost the name, so any will do then */
		if (clean < 0 && !nameless) {
			atomic_fetch_sub(&mw->m[i]->health.in_flight, 1);
			continue;
		}
		/* the source's reads are counted, not refused: they read
		 * the writer's own file, and a source drained since this
		 * writer opened is the only whole copy (a rolling drain:
		 * b undrained, a drained, then the first call) */
		atomic_fetch_add(&mw->m[src]->health.in_flight, 1);
		/* a hint it had for the key already (another change it
		 * missed while drained: a chmod, an xattr) is left to the
		 * repair, which copies the whole object */
		missed = smux__hints_has(mux->hints, mw->m[i]->name,
					 mw->base.key);
		smux_error_clear(&e);
		if (smux__hints_add(mux->hints, mw->m[i]->name, mw->base.key,
				    SMUX__HINT_PUT, &id, &e)) {
			s->err = e; /* not journaled: out until its close */
			rejoin_leave(mw, i, (unsigned)src);
			continue;
		}
		/* recorded, then replayed by the copy (or left to the
		 * mux's repair when the copy fails): as a hint's events */
		hint_event(mw, mw->m[i], SMUX_EV_HINT_RECORDED, NULL);
		rc = rejoin_copy(mw, i, (unsigned)src, ctx, &e);
		rejoin_leave(mw, i, (unsigned)src);
		if (rc) {
			/* its error names the replica that failed: the
			 * source's read leaves the source in (its writes may
			 * still go), as the replica's own write would */
			hint_event(mw, mw->m[i], SMUX_EV_HINT_REPLAYED, &e);
			s->err = e; /* tried once: out until its close */
			continue;
		}
		s->failed = false;
		smux_error_clear(&s->err);
		if (missed && clean >= 0 && !nameless &&
		    rejoin_meta(mw, i, (unsigned)src, ctx, &e) == 0) {
			/* every hint it had for the key ends, ours too */
			smux__replica_wrote(mux, mw->m[i], mw->base.key);
			hint_event(mw, mw->m[i], SMUX_EV_HINT_REPLAYED, NULL);
			continue;
		}
		if (missed && !nameless) {
			/* still behind on the key (its mode or xattrs not
			 * the source's: drained again meanwhile): out until
			 * its close, as a replica taking writes with a hint
			 * pending was, with the other's next miss, the key
			 * hinted on every replica - unreadable for good
			 * (s46-t3) */
			s->failed = true;
			s->err = e;
			continue;
		}
		if (missed)
			continue;
		(void)smux__hints_done(mux->hints, id, NULL);
		hint_event(mw, mw->m[i], SMUX_EV_HINT_REPLAYED, NULL);
	}
}

/* Reads back from the first live replica writer; a replica that fails
 * transiently drops out (fan-out: it gets a hint at commit). */
long smux__mw_pread_member(struct smux__mux_writer *mw, void *buf, size_t len,
			   uint64_t off, struct smux_error *err)
{
	struct smux_ctx ctx;
	bool any = false;

	smux_ctx_init(&ctx);
	rejoin_drained(mw, &ctx);
	for (unsigned i = 0; i < mw->n; i++) {
		long nread = 0, r;
		int64_t t0 = smux_now_ns();
		struct smux__call c = {
			.op = SMUX__OP_W_PREAD,
			.backend = mw->m[i]->backend,
			.writer = mw->s[i]->w,
			.rbuf = buf,
			.len = len,
			.off = off,
			.nread = &nread,
		};
		enum smux_outcome o;

		if (!smux__mw_live(mw, i))
			continue;
		any = true;
		if (smux__member_enter(mw->m[i])) {
			r = smux__mw_sub_run(mw, i, &ctx, &c, err);
			atomic_fetch_sub(&mw->m[i]->health.in_flight, 1);
			if (r >= 0)
				return nread;
			o = smux__attempt_done(mw->mux, &ctx, mw->m[i], false,
					       t0, err, NULL);
		} else { /* draining: it drops out like a failed replica */
			r = smux_error_set(err, SMUX_E_BACKEND_DRAINING,
					   mw->m[i]->name, NULL);
			o = SMUX_OUTCOME_TRANSIENT;
		}
		if (!mw->fanout ||
		    (o != SMUX_OUTCOME_TRANSIENT && o != SMUX_OUTCOME_TIMEOUT))
			return r;
		mw->s[i]->failed = true;
		mw->s[i]->err = *err;
		if (i == 0 && smux__shield_origin(mw->mux, mw->m, mw->n))
			return r; /* the origin must take every write */
	}
	if (any)
		return -err->e.sys_errno;
	if (!mw->fanout && mw->n == 0) {
		*err = mw->lost;
		return -err->e.sys_errno;
	}
	return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mw->mux->base.name,
			      "no replica writer is left");
}

/*
 * Runs @proto on every live replica writer in parallel; replicas that fail
 * drop out. Returns 0 while the write policy can still be met (shield: the
 * origin is live; others: any replica is live), else the failure.
 */
/*
 * Every replica that ran the call refused it as the caller's error (a
 * pwrite or truncate past the largest file size: EFBIG, an invalid
 * argument): nothing changed anywhere, so no replica writer is dropped -
 * the descriptor writes on, as on a local file - and the error is the
 * call's. (Dropping them made the next write fail with EIO and close
 * report the refused pwrite.) When only some refused, the others took
 * the write: the refusers missed it and are dropped as usual. Fills @err.
 */
static bool fan_refused(const struct smux__fan *f, unsigned n,
			struct smux_error *err)
{
	int first = -1;

	for (unsigned i = 0; i < n; i++) {
		if (!f->go[i])
			continue;
		if (f->ok[i] ||
		    smux_classify(&f->err[i].e) != SMUX_OUTCOME_SEMANTIC)
			return false;
		if (first < 0)
			first = (int)i;
	}
	if (first < 0)
		return false;
	*err = f->err[first];
	return true;
}

static long fan(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		const struct smux__call *proto, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	struct smux__fan *f;
	long result = 0;
	int first_fail = -1;

	rejoin_drained(mw, ctx); /* first: it may add replicas */
	f = fan_new(mw);
	if (!f)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	for (unsigned i = 0; i < mw->n; i++) {
		f->go[i] = smux__mw_live(mw, i);
		if (f->go[i])
			f->call[i] = *proto;
	}
	/* a replica draining since the writer opened takes no more of it:
	 * it drops out (BACKEND_DRAINING) and gets a hint at commit */
	smux__fan_run(f, ctx, NULL);
	if (fan_refused(f, mw->n, err)) {
		free(f);
		return -err->e.sys_errno;
	}
	for (unsigned i = 0; i < mw->n; i++) {
		if (!f->go[i])
			continue;
		if (!f->ok[i]) {
			mw->s[i]->failed = true;
			mw->s[i]->err = f->err[i];
			if (first_fail < 0)
				first_fail = (int)i;
		} else if (result == 0) {
			result = f->rc[i]; /* bytes, for a read */
		}
	}
	free(f);
	/* shield: the origin decides (a mirror first in line while the
	 * origin drains is a mirror: smux__shield_origin) */
	if (mw->fanout && smux__shield_origin(mux, mw->m, mw->n)) {
		if (!smux__mw_live(mw, 0)) {
			*err = mw->s[0]->err;
			return -err->e.sys_errno;
		}
		return result;
	}
	for (unsigned i = 0; i < mw->n; i++)
		if (smux__mw_live(mw, i))
			return result;
	if (first_fail >= 0) {
		*err = mw->s[first_fail]->err;
		return -err->e.sys_errno;
	}
	return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			      "no replica writer is left");
}

static int fanout_commit(struct smux__mux_writer *mw,
			 const struct smux_ctx *ctx,
			 const struct smux_put_opts *opts,
			 struct smux_info *info, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	const char *key = mw->base.key;
	struct smux_info infos[SMUX__WRITER_MAX];
	struct smux__fan *f;
	struct smux__call commit = {.op = SMUX__OP_W_COMMIT};
	struct smux_put_opts po;
	uint64_t change = 0;
	int info_from = -1;
	unsigned n = 0;
	bool nameless;
	long rc;

	/* a replica back from its drain takes the writer back before the
	 * commit too: a file written whole while it was drained, and closed
	 * after its undrain and the other's drain (git's index.lock), had
	 * no replica to commit on (s46-t1) */
	rejoin_drained(mw, ctx);
	f = fan_new(mw);
	if (!f)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	/* one mtime: the replicas agree on the version */
	opts = smux__uniform_mtime(&po, opts);
	/* a staged writer's commits land one per replica: noted until all
	 * returned (a crash between two is reconciled: mux_change.c); an
	 * in-place writer has its write intent */
	if (!mw->inplace)
		(void)smux__change_begin_key(mux, key, &change, err);
	smux__write_fence(mux, mw->m, mw->n, key, NULL); /* mux_fence.c */
	/* a file that lost the name commits nothing of the key: the hints
	 * that bring the key's new object stay */
	nameless =
		mw->inplace && smux__intent_detached(mux, key, mw->intent_gen);
	for (unsigned i = 0; i < mw->n; i++) {
		f->go[i] = smux__mw_live(mw, i);
		if (!f->go[i]) {
			f->err[i] = mw->s[i]->err;
			continue;
		}
		f->call[i] = (struct smux__call){
			.op = SMUX__OP_W_COMMIT,
			.put_opts = opts,
			.info = &infos[i],
		};
	}
	smux__fan_run(f, ctx, NULL);
	for (unsigned i = 0; i < mw->n; i++) {
		if (!f->go[i])
			continue;
		if (!f->ok[i]) {
			mw->s[i]->failed = true;
			mw->s[i]->err = f->err[i];
		} else if (info_from < 0) {
			info_from = (int)i;
		}
		/* a replica that missed a write of the key while this
		 * writer was open keeps its hint unless the writer made the
		 * whole content (truncating): an edit of its old copy is
		 * not the latest version */
		if (f->ok[i] && smux__fan_renews(&commit, mw->whole) &&
		    !nameless)
			smux__replica_wrote(mux, mw->m[i], key);
	}
	/* a replica whose late join failed is counted as one still
	 * drained would be: not at all (hinted by the policy as one not
	 * among the writer's), so an undrain never fails a close that
	 * the drained replica would have let through (write_quorum,
	 * throw_on_fanout_partial) */
	for (unsigned i = 0; i < mw->n; i++) {
		if (mw->s[i]->late)
			continue;
		f->m[n] = mw->m[i];
		f->ok[n] = f->ok[i];
		f->err[n] = f->err[i];
		n++;
	}
	/* unfenced once the hints are recorded (as smux__exec_fanout) */
	rc = smux__fanout_policy(mux, key, SMUX__HINT_PUT, f->m, f->ok, f->err,
				 n, err);
	smux__write_unfence(mux, mw->m, mw->n, key, NULL);
	smux__change_end(mux, change);
	free(f);
	/* the replicas that missed it have hints: the intent is over */
	if (rc == 0)
		smux__intent_end(mux, key, mw->intent_gen, &mw->dirty);
	if (rc == 0 && info && info_from >= 0)
		*info = infos[info_from];
	return (int)rc;
}

/*
 * Shield: an open that changes the object by itself (truncating, or
 * creating it) opens on the origin first, alone, and on the copies only
 * once the origin took it - else the copies were truncated (or made)
 * while the origin refused, and a reconcile carried that change, never
 * acknowledged, over the origin (s43-t4: "before" gone from every
 * replica after a refused `echo new > existing`). The origin's slot in
 * @acquired and @probes is cleared once it is open (smux__mw_open_subs
 * then leaves it); every copy's is the open's to come. 0, or the
 * origin's failure with no copy opened.
 */
static int shield_origin_first(struct smux__mux_writer *mw,
			       const struct smux_ctx *ctx, const char *key,
			       unsigned flags, bool *acquired, bool *probes,
			       const bool *cooled, struct smux_error *err)
{
	bool only[SMUX__WRITER_MAX] = {0}, oprobe[SMUX__WRITER_MAX] = {0};
	int rc;

	if (!(flags & (SMUX_WRITER_TRUNC | SMUX_WRITER_CREATE)) || mw->n < 2 ||
	    !acquired[0] || !smux__shield_origin(mw->mux, mw->m, mw->n))
		return 0;
	only[0] = true;
	oprobe[0] = probes[0];
	rc = smux__mw_open_subs(mw, ctx, key, flags, only, oprobe, cooled, err);
	/* the copies, not asked yet, are not failed ones */
	for (unsigned i = 1; i < mw->n; i++)
		if (acquired[i]) {
			mw->s[i]->failed = false;
			memset(&mw->s[i]->err, 0, sizeof(mw->s[i]->err));
		}
	if (rc != 0 || !smux__mw_live(mw, 0)) {
		/* refused: the copies' probes given back, none opened */
		for (unsigned i = 1; i < mw->n; i++)
			if (acquired[i] && probes[i])
				smux__health_probe_cancel(&mw->m[i]->health);
		if (rc == 0) {
			*err = mw->s[0]->err;
			rc = -err->e.sys_errno;
		}
		return rc;
	}
	acquired[0] = false;
	probes[0] = false;
	return rc;
}

/* The members of @v that smux__fan_eligible passed over in @f (draining):
 * each may join the writer once it is back (join_late). */
static void note_late(struct smux__mux_writer *mw, const struct mux_view *v,
		      const struct smux__fan *f)
{
	for (unsigned i = 0; i < v->n && mw->n_late < SMUX__WRITER_MAX; i++) {
		bool in = false;

		for (unsigned k = 0; k < f->n && !in; k++)
			in = f->m[k] == v->m[i];
		if (!in)
			mw->late[mw->n_late++] = smux__member_get(v->m[i]);
	}
}

/*
 * Shield/mirror: a writer on every replica that is not draining, except
 * that a writer that starts from the object (not truncating) is not
 * opened on a replica that missed the key's latest write: it would build
 * the new content from that replica's old copy. That replica is left out
 * like a failed one and keeps (gets) its hint at commit.
 */
static int fanout_open(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		       const char *key, unsigned flags, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	struct smux__call open = {.op = SMUX__OP_WRITER_OPEN, .key = key};
	bool acquired[SMUX__WRITER_MAX] = {0}, probes[SMUX__WRITER_MAX] = {0},
	     cooled[SMUX__WRITER_MAX] = {0};
	struct mux_view *v = smux__view_get(mux);
	struct smux__fan *f = malloc(sizeof(*f));
	int rc;

	if (!f) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	mw->whole = (flags & SMUX_WRITER_TRUNC) != 0;
	f->mux = mux;
	smux__fan_eligible(f, v, &open, mw->whole, SMUX__WRITER_MAX);
	mw->left_out = f->n < v->n; /* draining */
	if (mw->inplace)
		note_late(mw, v, f);
	{
		/* no replica to open on: one coming back (under the
		 * background thread's probe) is waited for */
		bool none = true;
		unsigned k;

		for (unsigned i = 0; i < f->n && none; i++)
			none = !f->go[i];
		if (none)
			(void)smux__fan_probed(f, ctx, &k);
	}
	for (unsigned i = 0; i < f->n; i++) {
		acquired[i] = f->go[i];
		probes[i] = f->probe[i];
		cooled[i] = f->cooled[i];
		if (smux__mw_add_sub(mw, f->m[i])) {
			for (unsigned j = i; j < f->n; j++)
				if (f->probe[j])
					smux__health_probe_cancel(
						&f->m[j]->health);
			free(f);
			smux__view_put(v);
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      mux->base.name, NULL);
		}
		if (!f->go[i]) { /* stale or down: why, for the commit */
			mw->s[i]->failed = true;
			mw->s[i]->err = f->err[i];
		}
	}
	free(f);
	smux__view_put(v);
	rc = shield_origin_first(mw, ctx, key, flags, acquired, probes, cooled,
				 err);
	if (rc == 0)
		rc = smux__mw_open_subs(mw, ctx, key, flags, acquired, probes,
					cooled, err);
	if (rc)
		return rc;
	if (smux__shield_origin(mux, mw->m, mw->n) && !smux__mw_live(mw, 0)) {
		*err = mw->s[0]->err;
		return -err->e.sys_errno;
	}
	/* found: by every replica that opened (one that made it is
	 * given the creator's mode and owner at the commit) */
	mw->base.found = false;
	for (unsigned i = 0; i < mw->n; i++) {
		if (!smux__mw_live(mw, i)) {
			mw->left_out = true;
			continue;
		}
		mw->base.found = mw->s[i]->w && mw->s[i]->w->found;
		if (!mw->base.found)
			break;
	}
	for (unsigned i = 0; i < mw->n; i++) {
		if (smux__mw_live(mw, i)) {
			mw->size = smux__mw_sub_size(mw, i);
			smux__mw_dir_group(mw, i);
			return 0;
		}
	}
	return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			      "no replica writer could be opened");
}

/* ---- operations ---- */

/*
 * Runs a change (W_PWRITE, W_TRUNCATE, W_FALLOCATE) of the pending
 * content: its write intent journaled first (in place), then fanned out
 * to every replica or run on the single target.
 */
static long mw_change(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		      const struct smux__call *c, struct smux_error *err)
{
	long rc = 0;

	if (mw->inplace)
		rc = smux__intent_begin(mw->mux, mw->base.key, mw->intent_gen,
					&mw->dirty, err);
	if (rc)
		return rc;
	if (mw->fanout)
		return fan(mw, ctx, c, err);
	switch (c->op) {
	case SMUX__OP_W_PWRITE:
		return smux__mw_single_pwrite(mw, ctx, c->wbuf, c->len, c->off,
					      err);
	case SMUX__OP_W_TRUNCATE:
		return smux__mw_single_truncate(mw, ctx, c->off, err);
	default:
		return smux__mw_single_fallocate(mw, ctx, (int)c->flags, c->off,
						 c->len, err);
	}
}

static int mw_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
		     const void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct smux__mux_writer *mw = mw_of(w);
	struct smux__call c = {
		.op = SMUX__OP_W_PWRITE,
		.wbuf = buf,
		.len = len,
		.off = off,
	};
	long rc = mw_change(mw, ctx, &c, err);

	if (rc == 0 && off == SMUX_OFF_APPEND)
		mw->size += len; /* at least: others may append too */
	else if (rc == 0 && len && off + len > mw->size)
		mw->size = off + len;
	return (int)rc;
}

static int mw_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
		       uint64_t size, struct smux_error *err)
{
	struct smux__mux_writer *mw = mw_of(w);
	struct smux__call c = {.op = SMUX__OP_W_TRUNCATE, .off = size};
	long rc = mw_change(mw, ctx, &c, err);

	if (rc == 0)
		mw->size = size;
	if (rc == 0 && size == 0)
		mw->whole = true; /* what follows is all the writer's */
	return (int)rc;
}

/* The size follows an allocation that extends the file. */
static int mw_fallocate(struct smux_writer *w, const struct smux_ctx *ctx,
			int mode, uint64_t off, uint64_t len,
			struct smux_error *err)
{
	struct smux__mux_writer *mw = mw_of(w);
	struct smux__call c = {
		.op = SMUX__OP_W_FALLOCATE,
		.flags = (unsigned)mode,
		.off = off,
		.len = (size_t)len,
	};
	long rc = mw_change(mw, ctx, &c, err);

	if (rc == 0 && smux_falloc_extends(mode) && off + len > mw->size)
		mw->size = off + len;
	return (int)rc;
}

static long mw_pread(struct smux_writer *w, void *buf, size_t len, uint64_t off,
		     struct smux_error *err)
{
	struct smux__mux_writer *mw = mw_of(w);

	if (mw->fanout)
		return smux__mw_pread_member(mw, buf, len, off, err);
	return smux__mw_single_pread(mw, buf, len, off, err);
}

static uint64_t mw_size(struct smux_writer *w)
{
	struct smux__mux_writer *mw = mw_of(w);
	struct smux__mw_sub *s;

	/* never waits on a member: one may be stuck holding its writer.
	 * Written behind our back (passthrough): the member's size, when
	 * no call holds its writer. */
	if (mw->behind && smux__mw_live(mw, 0)) {
		s = mw->s[0];
		if (pthread_mutex_trylock(&s->lock) == 0) {
			mw->size = smux_writer_size(s->w);
			pthread_mutex_unlock(&s->lock);
		}
	}
	return mw->size;
}

static int mw_commit(struct smux_writer *w, const struct smux_ctx *ctx,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct smux__mux_writer *mw = mw_of(w);

	if (mw->fanout)
		return fanout_commit(mw, ctx, opts, info, err);
	return smux__mw_single_commit(mw, ctx, opts, info, err);
}

/*
 * At a close(2) (smux_writer_ops.settle, after the close's commit): a
 * replica that can take the writer back (late, or dropped at its drain,
 * up again) joins it as at a call (rejoin_drained), and its copy is made
 * durable there with the source's mode and mtime (a durable commit on it
 * alone). A close(2) with nothing to commit (every write fsync'd:
 * sqlite's journal) joined none: the replica stayed hinted for the key,
 * and once the other was drained the key had no replica to read it from
 * - the journal's next open failed EIO until the writer's own close,
 * which the kernel sends later, unwaited for (s47, a drain storm under
 * sqlite). No call when none can join.
 */
static void rejoin_at_close(struct smux__mux_writer *mw,
			    const struct smux_ctx *ctx)
{
	bool out[SMUX__WRITER_MAX], due = false;
	struct smux_put_opts po = {0};
	struct smux_info info;
	unsigned n0 = mw->n;
	int from;

	if (!mw->fanout || !mw->inplace)
		return;
	for (unsigned k = 0; k < mw->n_late; k++)
		due |= mw->late[k] != NULL;
	for (unsigned i = 0; i < n0; i++) {
		out[i] = !smux__mw_live(mw, i);
		due |= out[i] && mw->s[i]->w &&
		       mw->s[i]->err.e.code == SMUX_E_BACKEND_DRAINING;
	}
	if (!due)
		return;
	/* the copies' source, as rejoin_drained picks it: its mode and
	 * mtime (not known, a busy writer: the copy is only synced) */
	from = whole_source(mw, mw->n);
	if (from >= 0 && pthread_mutex_trylock(&mw->s[from]->lock) == 0) {
		int rc = smux_writer_stat(mw->s[from]->w, &info);

		pthread_mutex_unlock(&mw->s[from]->lock);
		if (rc == 0)
			smux_put_opts_keep(&po, &info);
	}
	po.durable = true;
	rejoin_drained(mw, ctx);
	for (unsigned i = 0; i < mw->n; i++) {
		struct mux_member *m = mw->m[i];
		struct smux_info got;
		struct smux__call c = {
			.op = SMUX__OP_W_COMMIT,
			.backend = m->backend,
			.writer = mw->s[i]->w,
			.put_opts = &po,
			.info = &got,
		};
		struct smux_error e;
		long rc;

		if ((i < n0 && !out[i]) || !smux__mw_live(mw, i))
			continue; /* not one that joined now */
		if (!smux__member_enter(m))
			continue; /* draining again: its next commit */
		rc = smux__mw_sub_run(mw, i, ctx, &c, &e);
		atomic_fetch_sub(&m->health.in_flight, 1);
		if (rc < 0) {
			/* the join ended its hint: one again, for the
			 * repair (its copy may not be on its disk) */
			mw->s[i]->failed = true;
			mw->s[i]->err = e;
			if (smux__hints_add(mw->mux->hints, m->name,
					    mw->base.key, SMUX__HINT_PUT, NULL,
					    &e) == 0)
				hint_event(mw, m, SMUX_EV_HINT_RECORDED, NULL);
		}
	}
}

static void mw_settle(struct smux_writer *w, const struct smux_ctx *ctx)
{
	rejoin_at_close(mw_of(w), ctx);
}

static void mw_close(struct smux_writer *w)
{
	struct smux__mux_writer *mw = mw_of(w);
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	for (unsigned i = 0; i < mw->n; i++) {
		struct smux__mw_sub *s = mw->s[i];
		struct smux__call c = {
			.op = SMUX__OP_W_CLOSE,
			.backend = mw->m[i]->backend,
			.writer = s->w,
		};
		struct smux_error e;

		if (!smux__mw_live(mw, i)) {
			/* failed, maybe stuck: nobody waits for its close */
			smux__mw_sub_retire(mw, i);
			continue;
		}
		/* set before its job is queued (the queue orders it) */
		if (w->unmade && s->w)
			s->w->unmade = true;
		/* a close that times out still runs, after the stuck call,
		 * and its job keeps the sub alive until then */
		smux__mw_sub_run(mw, i, &ctx, &c, &e);
		smux__mw_sub_put(s);
		smux__member_put(mw->m[i]);
	}
	for (unsigned k = 0; k < mw->n_late; k++)
		if (mw->late[k])
			smux__member_put(mw->late[k]);
	if (!mw->fanout)
		smux__mw_single_release(mw);
	if (mw->inplace)
		smux__intent_unhold(mw->mux, w->key, mw->intent_gen, mw->dirty);
	if (mw->sticky_held) {
		smux__intent_unhold(mw->mux, w->key, mw->intent_gen, false);
		/* a replay it held back */
		if (smux__hints_pending_replicas(mw->mux->hints) > 0)
			smux__mux_kick(mw->mux);
	}
	smux_writer_release(&mw->base);
	free(mw);
}

/* The file as it is now on the first live replica (its writer's stat;
 * writes in place land on every replica before they return), when no
 * call holds that writer: a stuck member must not stall an fstat. */
static int mw_stat(struct smux_writer *w, struct smux_info *info)
{
	struct smux__mux_writer *mw = mw_of(w);

	for (unsigned i = 0; i < mw->n; i++) {
		struct smux__mw_sub *s = mw->s[i];
		int rc;

		if (!smux__mw_live(mw, i))
			continue;
		if (pthread_mutex_trylock(&s->lock) != 0)
			return -EBUSY;
		rc = smux_writer_stat(s->w, info);
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	return -ENOTSUP;
}

/* Applies @a on every live replica, when no call holds its writer (a
 * stuck member must not stall the caller): -EBUSY when one does, the
 * first error otherwise. */
static int mw_setattr(struct smux_writer *w, const struct smux_setattr *a)
{
	struct smux__mux_writer *mw = mw_of(w);
	int rc = -ENOTSUP;

	for (unsigned i = 0; i < mw->n; i++) {
		struct smux__mw_sub *s = mw->s[i];
		int r;

		if (!smux__mw_live(mw, i))
			continue;
		if (pthread_mutex_trylock(&s->lock) != 0) {
			rc = -EBUSY;
			continue;
		}
		r = smux_writer_setattr(s->w, a);
		pthread_mutex_unlock(&s->lock);
		if (rc == -ENOTSUP || (rc == 0 && r))
			rc = r;
	}
	return rc;
}

/* The single target's spool is a copy another name's writer would not
 * change; each live member writer is told too (a nested mux keeps its
 * own). A failed one's stuck call may hold its lock: it is passed by. A
 * writer not in place changes a copy of its own, which no other name's
 * writer touches: nothing changes. */
static void mw_shared(struct smux_writer *w)
{
	struct smux__mux_writer *mw = mw_of(w);

	if (!mw->object)
		return;
	if (!mw->fanout)
		smux__mw_single_shared(mw);
	for (unsigned i = 0; i < mw->n; i++) {
		if (!smux__mw_live(mw, i))
			continue;
		pthread_mutex_lock(&mw->s[i]->lock);
		smux_writer_shared(mw->s[i]->w);
		pthread_mutex_unlock(&mw->s[i]->lock);
	}
}

/*
 * The single target's descriptor for kernel passthrough, when its writer
 * can never move (no spool: nothing to copy to another member, so every
 * write would go to this member's file as it is anyway) and no call holds
 * it. From then on the pending size is the member's (mw_size asks it).
 */
static int mw_passthrough_fd(struct smux_writer *w)
{
	struct smux__mux_writer *mw = mw_of(w);
	struct smux__mw_sub *s;
	int fd;

	if (mw->fanout || mw->n != 1 || mw->spool >= 0 || !mw->object ||
	    !smux__mw_live(mw, 0))
		return -1;
	s = mw->s[0];
	if (pthread_mutex_trylock(&s->lock) != 0)
		return -1;
	fd = smux_writer_passthrough_fd(s->w);
	pthread_mutex_unlock(&s->lock);
	if (fd >= 0)
		mw->behind = true;
	return fd;
}

static const struct smux_writer_ops mux_writer_ops = {
	.pwrite = mw_pwrite,
	.pread = mw_pread,
	.truncate = mw_truncate,
	.fallocate = mw_fallocate,
	.size = mw_size,
	.commit = mw_commit,
	.close = mw_close,
	.stat = mw_stat,
	.setattr = mw_setattr,
	.shared = mw_shared,
	.passthrough_fd = mw_passthrough_fd,
	.settle = mw_settle,
};

int smux__mux_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, unsigned flags,
			  struct smux_writer **out, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__mux_writer *mw = calloc(1, sizeof(*mw));
	struct smux_ctx child = *ctx;
	uint64_t change = 0;
	int rc;

	*out = NULL;
	if (!mw)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	mw->spool = -1;
	if (ctx->depth >= SMUX_MAX_DEPTH) {
		free(mw);
		return smux_error_set(err, SMUX_E_RECURSION_DEPTH_EXCEEDED,
				      b->name, "nested too deep");
	}
	child.depth = ctx->depth + 1;
	mw->mux = mux;
	mw->object = flags & SMUX_WRITER_INPLACE;
	mw->flags = flags;
	mw->fanout =
		mux->mode == SMUX_MODE_SHIELD || mux->mode == SMUX_MODE_MIRROR;
	rc = smux_writer_init(&mw->base, &mux_writer_ops, b, key);
	if (rc) {
		free(mw);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	mw->base.appends = true; /* each member writer appends its way */
	atomic_fetch_add(&mux->total_calls, 1);
	if (mw->fanout && (flags & SMUX_WRITER_INPLACE) &&
	    !(flags & SMUX_WRITER_TRUNC))
		smux__catch_up(mux, &child, key);
	if (mw->fanout && (flags & SMUX_WRITER_INPLACE)) {
		rc = smux__intent_hold(mux, key, &mw->intent_gen, err);
		if (rc)
			goto out_close;
		mw->inplace = true;
		/* no replay replaces the files this writer changes in place
		 * (mux_fence.c): one under way ends first */
		smux__fence_wait_replays(mux, key);
		/* a truncating open changes every replica already */
		if (flags & SMUX_WRITER_TRUNC)
			rc = smux__intent_begin(mux, key, mw->intent_gen,
						&mw->dirty, err);
		if (rc)
			goto out_close;
	}
	/* an in-place create makes the file replica by replica: noted
	 * until every replica's open returned (a daemon killed between two
	 * left an empty file on one for good; the note is reconciled:
	 * mux_change.c, test_meta_crash.sh). Not synced, as a rename's: a
	 * create asks no disk flush. An open of an existing file notes
	 * nothing; a truncating one has its write intent already */
	if (mw->inplace && (flags & SMUX_WRITER_CREATE) &&
	    !(flags & SMUX_WRITER_TRUNC))
		(void)smux__change_begin_key(mux, key, &change, err);
	if (mux->mode == SMUX_MODE_STICKY && (flags & SMUX_WRITER_INPLACE)) {
		/* before the open places the writer (under the key's gate):
		 * a replay after it finds the key held */
		rc = smux__intent_hold(mux, key, &mw->intent_gen, err);
		if (rc)
			goto out_close;
		mw->sticky_held = true;
	}
	if (mw->fanout)
		rc = fanout_open(mw, &child, key, flags, err);
	else
		rc = smux__mw_single_open(mw, &child, flags, err);
	/* a replica left out of a create gets the file only from the
	 * commit's hint: until then the key has its write intent, which a
	 * crash (or a close without a commit) leaves to the repair - the
	 * note ended here would leave the file on some replicas for good
	 * (test_mux_change test_create_left_out_held) */
	if (rc == 0 && change && mw->left_out &&
	    smux__intent_begin(mux, key, mw->intent_gen, &mw->dirty, NULL) != 0)
		change = 0; /* the journal failed: the note stays instead */
	if (rc)
		goto out_close;
	smux__change_end(mux, change);
	*out = &mw->base;
	return 0;
out_close:
	/* what the replicas that opened created goes: the open failed */
	mw->base.unmade = true;
	mw_close(&mw->base);
	/* a crash in that cleanup leaves the note to the next start */
	smux__change_end(mux, change);
	return rc;
}
