/* SPDX-License-Identifier: MIT */
/*
 * mux_writer_single.c - the mux writer of the single-target modes
 * (failover, round-robin, weighted, sticky-by-key): one member's writer,
 * moved to another member when that one fails (DESIGN section 6: close()
 * and fsync() return 0 once the mode's write policy is met; a failing
 * member must not fail the program while another could take the file).
 *
 * The writer opens on the member a put of the key would go to, falling
 * through on transient errors; in failover, on the first member with the
 * key's latest version, and a commit hints the members ahead of the one
 * that took it (smux__failover_missed) before it is acknowledged.
 *
 * When the mux has another member, the writer keeps the pending content
 * in a spool too: an unlinked temp file (smux_tmpfile: $TMPDIR, which
 * smuxfs points at cache_dir/staging), changed after each pwrite,
 * truncate and fallocate (its zeros and size) a member took, so it never
 * holds a change that failed. When a member writer call fails
 * transiently (smux_classify: transient or
 * timeout; a semantic error such as NO_SPACE or a permission is the
 * call's answer), the writer moves: that member's writer is closed
 * without waiting for it (a hung one closes once its stuck call returns),
 * a writer (TRUNC) is opened on the next member in the mode's order that
 * takes one (failover: passing over members that missed the key's latest
 * write), the spool is copied into it in chunks (holes skipped) and the
 * call runs there. Reads of the pending content come from the spool and
 * never wait on a member.
 *
 * A writer opened without TRUNC starts as a copy of the object, and only
 * its member may have that version (a failover standby holds an older
 * one, or none). Its spool is filled lazily: at the first pwrite or
 * truncate it reads the member writer back (pread through the bulkhead,
 * in chunks; of a truncate only what survives), so an open that never
 * writes copies nothing. Until then the writer cannot move, and one on an
 * object over SPOOL_BASE_MAX (64 MiB) never can. A writer that
 * cannot be read back, or whose spool cannot be written (the cache disk
 * is full), goes on without a spool, as a mux of one member does.
 *
 * Memory stays bounded: the spool is on disk, and every copy goes through
 * one SMUX_IO_CHUNK buffer, one bulkhead call per chunk, each bounded by
 * backend_timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/mux_probe_wait.h"
#include "core/mux_writer.h"

static void emit(struct smux_mux *mux, struct smux_event *ev)
{
	snprintf(ev->mux, sizeof(ev->mux), "%s", mux->base.name);
	smux_events_emit(mux->events, ev);
}

/* ---- the spool ---- */

static void spool_drop(struct smux__mux_writer *mw)
{
	if (mw->spool >= 0)
		close(mw->spool);
	mw->spool = -1;
	mw->spool_state = SMUX__SPOOL_NONE;
	mw->spool_size = 0;
}

/* pwrite(2) of all @len bytes; 0 or -errno. */
static int spool_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* pread(2) of up to @len bytes, short only at the end; bytes or -errno. */
static long spool_pread(int fd, void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n =
			pread(fd, p + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long)done;
}

long (*smux__callerr_spool_pread_hook)(int fd, void *buf, size_t len,
				       uint64_t off);

/* A writer opened without TRUNC on an object larger than this keeps no
 * spool (it cannot move): the lazy fill would copy the whole object at
 * the first change, which an append to a large log must not pay. */
#define SPOOL_BASE_MAX ((uint64_t)64 << 20)

/* Whether a single-target writer keeps a spool: only when another member
 * could take the writer over. */
static bool spool_wanted(struct smux_mux *mux)
{
	struct mux_view *v = smux__view_get(mux);
	unsigned n = 0;

	for (unsigned i = 0; i < v->n; i++)
		if (smux__health_status(&v->m[i]->health) !=
		    SMUX_STATUS_DRAINING)
			n++;
	smux__view_put(v);
	return n >= 2;
}

/* Sets up the spool of a writer just opened (its size known). Without a
 * temp file the writer simply cannot move. */
static void spool_start(struct smux__mux_writer *mw, unsigned flags)
{
	struct smux_error e;

	mw->spool = -1;
	mw->spool_state = SMUX__SPOOL_NONE;
	mw->spool_size = 0;
	if (mw->fanout || !spool_wanted(mw->mux))
		return;
	/* an append to a large object would copy all of it first; an
	 * in-place open of an existing file would copy it at every open
	 * (an append loop): neither keeps a spool. An empty one (a create,
	 * exclusive or not) costs nothing to spool, and can then move like
	 * a truncating one. */
	if (!(flags & SMUX_WRITER_TRUNC) &&
	    (mw->size > SPOOL_BASE_MAX ||
	     ((flags & SMUX_WRITER_INPLACE) && mw->size > 0)))
		return;
	/* a file of several names in place: the writers of its other
	 * names change it too, which a copy would not see (as after
	 * smux__mw_single_shared) */
	if ((flags & SMUX_WRITER_INPLACE) && mw->base.has_info &&
	    mw->base.info.nlink > 1)
		return;
	mw->spool = smux_tmpfile(mw->mux->base.name, "writer spool", &e);
	if (mw->spool < 0) {
		mw->spool = -1;
		return;
	}
	mw->spool_state = (flags & SMUX_WRITER_TRUNC) || mw->size == 0
				  ? SMUX__SPOOL_FULL
				  : SMUX__SPOOL_LAZY;
}

/*
 * One member call of a spool transfer on the single target, for its
 * bookkeeping: counted in flight, outcome recorded once per transfer by
 * the caller. Marks the sub failed on error.
 */
static long xfer_call(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		      struct smux__call *c, struct smux_error *err)
{
	long r;

	c->backend = mw->m[0]->backend;
	c->writer = mw->s[0]->w;
	if (smux__member_enter(mw->m[0])) {
		r = smux__mw_sub_run(mw, 0, ctx, c, err);
		atomic_fetch_sub(&mw->m[0]->health.in_flight, 1);
	} else { /* draining: the writer moves (or fails), never waits */
		r = smux_error_set(err, SMUX_E_BACKEND_DRAINING, mw->m[0]->name,
				   NULL);
	}
	if (r < 0) {
		mw->s[0]->failed = true;
		mw->s[0]->err = *err;
	}
	return r;
}

/*
 * Fills a lazy spool with bytes [0, min(size, @upto)) read back from the
 * member writer. Complete (@upto >= size): SMUX__SPOOL_FULL. Otherwise the spool
 * holds just those bytes (spool_size), for a truncate to @upto. A writer
 * that cannot be read back, or a spool that cannot be written, drops the
 * spool and returns 0: the operation goes on without one. A member that
 * fails (transiently) fails the operation: it cannot move yet.
 */
static int spool_fill(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		      uint64_t upto, struct smux_error *err)
{
	uint64_t end = upto < mw->size ? upto : mw->size, pos = 0;
	int64_t t0 = smux_now_ns();
	unsigned char *buf;
	struct smux_error e;
	long r = 0;

	if (!smux__mw_live(mw, 0)) {
		*err = mw->n ? mw->s[0]->err : mw->lost;
		return -err->e.sys_errno;
	}
	buf = malloc(SMUX_IO_CHUNK);
	if (!buf || ftruncate(mw->spool, 0) < 0) {
		free(buf);
		spool_drop(mw);
		return 0;
	}
	mw->spool_size = 0;
	while (pos < end) {
		size_t want = end - pos < SMUX_IO_CHUNK ? (size_t)(end - pos)
							: SMUX_IO_CHUNK;
		long nread = 0;
		struct smux__call c = {
			.op = SMUX__OP_W_PREAD,
			.rbuf = buf,
			.len = want,
			.off = pos,
			.nread = &nread,
		};

		r = xfer_call(mw, ctx, &c, &e);
		if (r < 0)
			break;
		if (r == 0 || spool_pwrite(mw->spool, buf, (size_t)r, pos)) {
			r = 0; /* shorter than its size, or a local failure */
			spool_drop(mw);
			break;
		}
		pos += (uint64_t)r;
	}
	free(buf);
	if (r < 0) {
		enum smux_outcome o = smux__attempt_done(mw->mux, ctx, mw->m[0],
							 false, t0, &e, NULL);

		spool_drop(mw);
		if (o == SMUX_OUTCOME_SEMANTIC) { /* e.g. no read back */
			mw->s[0]->failed = false;
			return 0;
		}
		*err = e;
		return (int)r;
	}
	if (pos)
		smux__attempt_done(mw->mux, ctx, mw->m[0], false, t0, NULL,
				   NULL);
	if (mw->spool_state == SMUX__SPOOL_NONE)
		return 0;
	mw->spool_size = pos;
	if (end == mw->size)
		mw->spool_state = SMUX__SPOOL_FULL;
	return 0;
}

/*
 * Copies the spool into the single target's new writer (opened TRUNC):
 * the data extents in chunks, then the size. 0, or the member's failure
 * (the sub is marked failed).
 */
static int spool_copy(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		      struct smux_error *err)
{
	uint64_t end = mw->spool_size, pos = 0, reached = 0;
	int64_t t0 = smux_now_ns();
	unsigned char *buf = malloc(SMUX_IO_CHUNK);
	unsigned calls = 0;
	long r = 0;

	if (!buf) {
		r = smux_error_set(err, SMUX_E_NO_MEMORY, mw->mux->base.name,
				   "writer spool copy buffer");
		goto out;
	}
	while (pos < end) {
		off_t data = lseek(mw->spool, (off_t)pos, SEEK_DATA);
		off_t hole;

		if (data < 0 && errno == ENXIO)
			break; /* a hole up to the end */
		if (data < 0)
			data = (off_t)pos; /* no SEEK_DATA here: copy it all */
		hole = lseek(mw->spool, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		for (pos = (uint64_t)data; pos < (uint64_t)hole;) {
			size_t want = (uint64_t)hole - pos < SMUX_IO_CHUNK
					      ? (size_t)((uint64_t)hole - pos)
					      : SMUX_IO_CHUNK;
			long n = smux__callerr_spool_pread_hook
					 ? smux__callerr_spool_pread_hook(
						   mw->spool, buf, want, pos)
					 : spool_pread(mw->spool, buf, want,
						       pos);
			struct smux__call c = {.op = SMUX__OP_W_PWRITE};

			if (n <= 0) {
				int e = n < 0 ? (int)-n : EIO;

				smux_error_from_errno(err, e,
						      mw->mux->base.name,
						      "read writer spool");
				/* our own disk failed, not a member: the
				 * next member would fail the same way */
				r = smux_error_make_local(err, e);
				goto out;
			}
			c.wbuf = buf;
			c.len = (size_t)n;
			c.off = pos;
			calls++;
			r = xfer_call(mw, ctx, &c, err);
			if (r < 0)
				goto out;
			pos += (uint64_t)n;
			reached = pos;
		}
	}
	if (reached < end) {
		struct smux__call c = {.op = SMUX__OP_W_TRUNCATE, .off = end};

		calls++;
		r = xfer_call(mw, ctx, &c, err);
	}
out:
	free(buf);
	if (r < 0 && !mw->s[0]->failed) { /* a local failure, not its */
		mw->s[0]->failed = true;
		mw->s[0]->err = *err;
		return (int)r;
	}
	if (calls)
		smux__attempt_done(mw->mux, ctx, mw->m[0], false, t0,
				   r < 0 ? err : NULL, NULL);
	return (int)r;
}

/*
 * What a pwrite or truncate does to the spool: applied once a member took
 * the change, so the spool never holds a change that failed. (Applying it
 * while the member works on it overlaps the two copies, but measured no
 * faster on two busy cores, and a failed write would linger in it.)
 */
struct spool_change {
	bool done;
	bool truncate;
	bool falloc;
	int mode;	 /* falloc: its fallocate(2) mode */
	const void *buf; /* pwrite */
	size_t len;	 /* pwrite; falloc: the range's length */
	uint64_t off;	 /* pwrite, falloc: offset; truncate: size */
};

/*
 * A fallocate a member took, as the spool's content: zeros where it
 * punched or zeroed (a hole: the spool needs no space for them), the size
 * where it extended. The allocation itself is the member's. 0 or -1.
 */
static int spool_falloc(struct smux__mux_writer *mw,
			const struct spool_change *ch)
{
	uint64_t end = ch->off + ch->len;

	if ((ch->mode & (SMUX_FALLOC_PUNCH_HOLE | SMUX_FALLOC_ZERO_RANGE)) &&
	    ch->off < mw->spool_size &&
	    fallocate(mw->spool, SMUX_FALLOC_PUNCH_HOLE | SMUX_FALLOC_KEEP_SIZE,
		      (off_t)ch->off, (off_t)ch->len) < 0)
		return -1;
	if (smux_falloc_extends(ch->mode) && end > mw->spool_size) {
		if (ftruncate(mw->spool, (off_t)end) < 0)
			return -1;
		mw->spool_size = end;
	}
	return 0;
}

/* A spool that cannot be written is dropped: the writer goes on without. */
static void spool_apply(struct smux__mux_writer *mw, struct spool_change *ch)
{
	if (!ch || ch->done)
		return;
	ch->done = true;
	if (mw->spool_state == SMUX__SPOOL_NONE)
		return;
	if (ch->falloc) {
		if (spool_falloc(mw, ch))
			spool_drop(mw);
	} else if (ch->truncate) {
		if (ftruncate(mw->spool, (off_t)ch->off) < 0)
			spool_drop(mw);
		else
			mw->spool_size = ch->off;
	} else if (spool_pwrite(mw->spool, ch->buf, ch->len, ch->off)) {
		spool_drop(mw);
	} else if (ch->len && ch->off + ch->len > mw->spool_size) {
		mw->spool_size = ch->off + ch->len;
	}
}

/* ---- placing and moving the writer ---- */

/* One call of @proto on the single target's member writer (bookkeeping
 * included; the sub is marked failed on error). */
static long single_call(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
			const struct smux__call *proto, struct smux_error *err)
{
	struct smux__call c = *proto;
	int64_t t0 = smux_now_ns();
	struct smux__job *job;
	long r;

	c.backend = mw->m[0]->backend;
	c.writer = mw->s[0]->w;
	if (!smux__member_enter(mw->m[0])) {
		/* draining since the writer opened: it takes no more of it
		 * (the writer moves, or the call fails), so a drain never
		 * waits for an open writer and a removed member never takes
		 * a write alone */
		r = smux_error_set(err, SMUX_E_BACKEND_DRAINING, mw->m[0]->name,
				   NULL);
		mw->s[0]->failed = true;
		mw->s[0]->err = *err;
		return r;
	}
	job = smux__mw_sub_start(mw, 0, ctx, &c);
	if (job)
		r = smux__job_finish(job, err);
	else
		r = smux_error_set(err, SMUX_E_NO_MEMORY, mw->m[0]->name,
				   "cannot start job");
	atomic_fetch_sub(&mw->m[0]->health.in_flight, 1);
	smux__attempt_done(mw->mux, ctx, mw->m[0], false, t0,
			   r < 0 ? err : NULL, NULL);
	if (r < 0) {
		mw->s[0]->failed = true;
		mw->s[0]->err = *err;
	}
	return r;
}

/* The attempts of one operation: members that failed it are not tried
 * again by it. */
struct tries {
	unsigned n;
	unsigned idx[SMUX__WRITER_MAX]; /* mux_member.index */
	bool all_timeouts;
	struct smux_error last;
	char last_name[SMUX_ERROR_NAME_MAX];
};

static bool tries_has(const struct tries *t, const struct mux_member *m)
{
	for (unsigned i = 0; i < t->n && i < SMUX__WRITER_MAX; i++)
		if (t->idx[i] == m->index)
			return true;
	return false;
}

static void tries_add(struct tries *t, const struct mux_member *m,
		      const struct smux_error *e)
{
	if (t->n < SMUX__WRITER_MAX)
		t->idx[t->n] = m->index;
	t->n++;
	if (smux_classify(&e->e) != SMUX_OUTCOME_TIMEOUT)
		t->all_timeouts = false;
	t->last = *e;
	snprintf(t->last_name, sizeof(t->last_name), "%s", m->name);
}

/*
 * Opens the single target's writer on the next member, in the mode's
 * order, that takes it: not one in @t, not (failover) one that missed the
 * key's latest write. With @from_spool the new writer gets the spool's
 * content. A transient failure falls through to the next member (added
 * to @t); anything else is the answer. Returns 0 with mw->n == 1, or the
 * error with mw->n == 0: NOT_SUPPORTED as is (the caller stages), 1 when
 * no member was left (@t tells what failed).
 */
static int single_place(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
			unsigned flags, bool from_spool, struct tries *t,
			struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	bool failover = mux->mode == SMUX_MODE_FAILOVER;
	/* failover and sticky-by-key: not on a member behind on the key */
	bool skip_stale = failover || mux->mode == SMUX_MODE_STICKY;
	/* sticky-by-key and failover: a writer that starts from the object
	 * starts on the member that holds its newest version, or not at all
	 * (another would start from an older copy or from nothing, and the
	 * replay would carry that over the newer one); an exclusive create
	 * starts a new object and may go anywhere. Not a create of a name
	 * the caller saw absent: absent on the members up says nothing of
	 * the first one out (s43-t5: touch of a file only it held made an
	 * empty one on the standby, replayed over its data) */
	bool holder_only = (mux->mode == SMUX_MODE_STICKY || failover) &&
			   !from_spool &&
			   !(flags & (SMUX_WRITER_TRUNC | SMUX_WRITER_EXCL));
	struct mux_member *placed = NULL;
	struct mux_member *m;
	struct mux_cursor c;
	bool probe = false;
	int rc = 1;

	/* sticky-by-key: the shard that holds the object, which may be
	 * off its home (a name the caller saw absent needs no look) */
	if (holder_only && !failover && !(flags & SMUX_WRITER_CREATE)) {
		int prc = smux__sticky_placed(mux, ctx, mw->base.key, &placed,
					      err);

		if (prc)
			return prc;
	}
	smux__cursor_init(&c, mux, mw->base.key, failover);
	/* once no member is left, one being probed is waited for */
	while (t->n < SMUX__WRITER_MAX &&
	       ((m = smux__cursor_next(&c, &probe)) ||
		(m = smux__cursor_probed(&c, ctx, &probe)))) {
		bool yes = true;
		enum smux_outcome o;

		/* not on a member that missed the key's latest write: a
		 * writer that starts from the object would start from an
		 * old version, and a commit could race the replay of that
		 * write */
		if (tries_has(t, m) ||
		    (skip_stale && smux__member_stale(mux, m, mw->base.key)) ||
		    smux__member_zombie(mux, m, mw->base.key) ||
		    (holder_only &&
		     !(failover ? smux__failover_holds(mux, m, mw->base.key)
		       : placed ? m == placed
				: smux__sticky_holds(mux, m, mw->base.key)))) {
			if (probe)
				smux__health_probe_cancel(&m->health);
			smux__member_put(m);
			continue;
		}
		if (smux__mw_add_sub(mw, m)) {
			smux__member_put(m);
			rc = smux_error_set(err, SMUX_E_NO_MEMORY,
					    mux->base.name, NULL);
			break;
		}
		smux__member_put(m);
		rc = smux__mw_open_subs(mw, ctx, mw->base.key, flags, &yes,
					&probe, NULL, err);
		if (rc == 0 && smux__mw_live(mw, 0) && from_spool)
			spool_copy(mw, ctx, err);
		if (rc == 0 && smux__mw_live(mw, 0))
			break;
		if (rc && !from_spool)
			break; /* NOT_SUPPORTED: the caller stages */
		rc = 1;
		o = smux_classify(&mw->s[0]->err.e);
		tries_add(t, mw->m[0], &mw->s[0]->err);
		/* a member without writers cannot take one over */
		if (o != SMUX_OUTCOME_TRANSIENT && o != SMUX_OUTCOME_TIMEOUT &&
		    mw->s[0]->err.e.code != SMUX_E_NOT_SUPPORTED) {
			*err = mw->s[0]->err;
			rc = -err->e.sys_errno;
		}
		/* a stuck open keeps its own reference on the sub */
		smux__mw_sub_retire(mw, 0);
		mw->n = 0;
		if (rc < 0 || smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
			break;
	}
	smux__cursor_release(&c);
	if (placed)
		smux__member_put(placed);
	if (rc < 0 && mw->n) {
		smux__mw_sub_retire(mw, 0);
		mw->n = 0;
	}
	return rc;
}

/*
 * Runs @proto (W_PWRITE, W_TRUNCATE, W_FALLOCATE or W_COMMIT) on the
 * single target's writer, then applies @ch (may be NULL) to the spool. When it fails
 * transiently and the writer may move (@movable: the spool holds the
 * content the call applies to), moves the writer to the next member and
 * runs it there, until a member takes it or none is left. A writer left
 * without a member (an earlier call found none, or was aborted) moves
 * first. A semantic error is the call's answer; the writer stays where it
 * is.
 */
static long single_op(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		      const struct smux__call *proto, bool movable,
		      struct spool_change *ch, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	struct tries t = {.all_timeouts = true};
	char from[SMUX_ERROR_NAME_MAX];
	struct smux_error e;
	long r;
	int rc;

	for (;;) {
		if (smux__mw_live(mw, 0)) {
			enum smux_outcome o;

			r = single_call(mw, ctx, proto, &e);
			if (r >= 0) {
				spool_apply(mw, ch);
				return r;
			}
			o = smux_classify(&e.e);
			if (o == SMUX_OUTCOME_SEMANTIC) {
				mw->s[0]->failed = false;
				/* the member may hold part of the change
				 * (a short write): read it back before the
				 * next change */
				if (ch && mw->spool_state != SMUX__SPOOL_NONE) {
					mw->spool_state = SMUX__SPOOL_LAZY;
					mw->spool_size = 0;
				}
				*err = e;
				return r;
			}
			tries_add(&t, mw->m[0], &e);
			if (!movable || mw->spool_state == SMUX__SPOOL_NONE ||
			    (o != SMUX_OUTCOME_TRANSIENT &&
			     o != SMUX_OUTCOME_TIMEOUT) ||
			    smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
				*err = e;
				return r;
			}
		} else if (!movable || mw->spool_state == SMUX__SPOOL_NONE ||
			   smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
			*err = mw->n ? mw->s[0]->err : mw->lost;
			return -err->e.sys_errno;
		}
		snprintf(from, sizeof(from), "%s",
			 mw->n ? mw->m[0]->name : t.last_name);
		if (mw->n) {
			smux__mw_sub_retire(mw, 0);
			mw->n = 0;
		}
		rc = single_place(mw, ctx, SMUX_WRITER_TRUNC, true, &t, err);
		if (rc) {
			if (rc > 0)
				smux__exhausted(mux, t.n, t.all_timeouts,
						&t.last, err);
			mw->lost = *err;
			return -err->e.sys_errno;
		}
		if (t.n) {
			struct smux_event ev = {.topic = SMUX_EV_FAILOVER};

			snprintf(ev.from, sizeof(ev.from), "%s", from);
			snprintf(ev.to, sizeof(ev.to), "%s", mw->m[0]->name);
			snprintf(ev.key, sizeof(ev.key), "%s", mw->base.key);
			ev.attempt_index = t.n;
			ev.has_cause = true;
			ev.cause = t.last.e;
			emit(mux, &ev);
			atomic_fetch_add(&mux->total_failovers, 1);
		}
	}
}

/* ---- operations ---- */

int smux__mw_single_open(struct smux__mux_writer *mw,
			 const struct smux_ctx *ctx, unsigned flags,
			 struct smux_error *err)
{
	struct tries t = {.all_timeouts = true};
	/* sticky-by-key: a writer that starts from the object opens on its
	 * holder under the key's gate, so the replay does not move the key
	 * (and delete that copy) between the choice and the open: the
	 * writer would start from nothing there */
	bool gate = mw->mux->mode == SMUX_MODE_STICKY &&
		    !(flags & (SMUX_WRITER_TRUNC | SMUX_WRITER_EXCL));
	struct mux_sticky_gate g;
	int rc;

	/* round-robin, weighted: not while an abandoned write of the key
	 * may still land on the shared store (mux_zombie.c) */
	rc = smux__zombie_wait(mw->mux, ctx, mw->base.key, NULL, err);
	if (rc)
		return rc;
	if (gate)
		smux__sticky_gate_enter(mw->mux, &g, mw->base.key);
	rc = single_place(mw, ctx, flags, false, &t, err);
	if (gate)
		smux__sticky_gate_leave(mw->mux, &g);
	if (rc > 0) {
		if (t.n)
			*err = t.last;
		else
			smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				       mw->mux->base.name,
				       "no backend is available");
		rc = -err->e.sys_errno;
	}
	if (rc)
		return rc;
	mw->size = smux__mw_sub_size(mw, 0);
	/* one target: its writer's view of the object is the mux's (read
	 * here, after the open job finished; the member writer never
	 * changes it) */
	if (mw->s[0]->w && mw->s[0]->w->has_info) {
		mw->base.info = mw->s[0]->w->info;
		mw->base.has_info = true;
	}
	if (mw->s[0]->w)
		mw->base.found = mw->s[0]->w->found;
	smux__mw_dir_group(mw, 0);
	spool_start(mw, flags);
	return 0;
}

/* A change (pwrite, fallocate) of the whole content: a lazy spool is
 * filled first, and a full one lets the writer move. */
static int single_change(struct smux__mux_writer *mw,
			 const struct smux_ctx *ctx, const struct smux__call *c,
			 struct spool_change *ch, struct smux_error *err)
{
	bool spooled;
	int rc;

	if (mw->spool_state == SMUX__SPOOL_LAZY) {
		rc = spool_fill(mw, ctx, UINT64_MAX, err);
		if (rc)
			return rc;
	}
	spooled = mw->spool_state == SMUX__SPOOL_FULL;
	return (int)single_op(mw, ctx, c, spooled, spooled ? ch : NULL, err);
}

int smux__mw_single_pwrite(struct smux__mux_writer *mw,
			   const struct smux_ctx *ctx, const void *buf,
			   size_t len, uint64_t off, struct smux_error *err)
{
	struct smux__call c = {
		.op = SMUX__OP_W_PWRITE,
		.wbuf = buf,
		.len = len,
		.off = off,
	};
	struct spool_change ch = {.buf = buf, .len = len, .off = off};

	/* where an O_APPEND write lands is the member's to say (others may
	 * append behind us): the spool cannot follow, the writer stays */
	if (off == SMUX_OFF_APPEND)
		spool_drop(mw);
	return single_change(mw, ctx, &c, &ch, err);
}

int smux__mw_single_truncate(struct smux__mux_writer *mw,
			     const struct smux_ctx *ctx, uint64_t size,
			     struct smux_error *err)
{
	struct smux__call c = {.op = SMUX__OP_W_TRUNCATE, .off = size};
	struct spool_change ch = {.truncate = true, .off = size};
	bool ahead = false; /* the spool holds the content after the cut */
	bool spooled;
	int rc;

	if (mw->spool_state == SMUX__SPOOL_LAZY) {
		/* only what survives the cut */
		rc = spool_fill(mw, ctx, size, err);
		if (rc)
			return rc;
		ahead = mw->spool_state == SMUX__SPOOL_LAZY;
	}
	spooled = ahead || mw->spool_state == SMUX__SPOOL_FULL;
	rc = (int)single_op(mw, ctx, &c, spooled, spooled ? &ch : NULL, err);
	if (rc == 0 && mw->spool_state != SMUX__SPOOL_NONE)
		mw->spool_state = SMUX__SPOOL_FULL;
	else if (rc && ahead && mw->spool_state == SMUX__SPOOL_LAZY)
		mw->spool_size = 0; /* filled again at the next change */
	return rc;
}

int smux__mw_single_fallocate(struct smux__mux_writer *mw,
			      const struct smux_ctx *ctx, int mode,
			      uint64_t off, uint64_t len,
			      struct smux_error *err)
{
	struct smux__call c = {
		.op = SMUX__OP_W_FALLOCATE,
		.flags = (unsigned)mode,
		.off = off,
		.len = (size_t)len,
	};
	struct spool_change ch = {
		.falloc = true,
		.mode = mode,
		.len = (size_t)len,
		.off = off,
	};

	/* the spool follows the content (zeros, size) */
	return single_change(mw, ctx, &c, &ch, err);
}

long smux__mw_single_pread(struct smux__mux_writer *mw, void *buf, size_t len,
			   uint64_t off, struct smux_error *err)
{
	long n;

	if (mw->spool_state != SMUX__SPOOL_FULL)
		return smux__mw_pread_member(mw, buf, len, off, err);
	n = spool_pread(mw->spool, buf, len, off);
	if (n < 0)
		return smux_error_from_errno(err, (int)-n, mw->mux->base.name,
					     "read writer spool");
	return n;
}

int smux__mw_single_commit(struct smux__mux_writer *mw,
			   const struct smux_ctx *ctx,
			   const struct smux_put_opts *opts,
			   struct smux_info *info, struct smux_error *err)
{
	struct smux_mux *mux = mw->mux;
	const char *key = mw->base.key;
	struct smux_info got = {0};
	struct smux__call c = {
		.op = SMUX__OP_W_COMMIT,
		.put_opts = opts,
		.info = &got,
	};
	bool sticky = mux->mode == SMUX_MODE_STICKY;
	struct mux_sticky_gate g;
	long rc;

	/* sticky-by-key: the commit and its hints are one write of the key
	 * for the replay (mux_sticky.c) */
	/* round-robin, weighted: an abandoned write of the key (another
	 * caller's, or this writer's own) may still land on the shared
	 * store after this commit (mux_zombie.c) */
	rc = smux__zombie_wait(mux, ctx, key, NULL, err);
	if (rc)
		return (int)rc;
	if (sticky)
		smux__sticky_gate_enter(mux, &g, key);
	rc = single_op(mw, ctx, &c, mw->spool_state == SMUX__SPOOL_FULL, NULL,
		       err);
	if (rc < 0)
		goto out;
	if (mux->mode == SMUX_MODE_FAILOVER)
		/* the members ahead of the one that took it missed it */
		rc = smux__failover_missed(mux, mw->m[0], key, SMUX__HINT_PUT,
					   err);
	else if (sticky)
		/* home missed it when another shard took it (handoff) */
		rc = smux__sticky_missed(mux, mw->m[0], key, SMUX__HINT_PUT,
					 err);
	else
		smux__replica_wrote(mux, mw->m[0], key);
	if (rc == 0 && info)
		*info = got;
out:
	if (sticky)
		smux__sticky_gate_leave(mux, &g);
	return (int)rc;
}

void smux__mw_single_shared(struct smux__mux_writer *mw)
{
	spool_drop(mw);
}

void smux__mw_single_release(struct smux__mux_writer *mw)
{
	if (mw->spool >= 0)
		close(mw->spool);
	mw->spool = -1;
}
