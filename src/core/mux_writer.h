/* SPDX-License-Identifier: MIT */
/*
 * mux_writer.h (internal) - what the two halves of the mux writer share:
 * mux_writer.c (the replica writers, fan-out for shield and mirror, the
 * operations table, open and close) and mux_writer_single.c (the single
 * target of failover, round-robin, weighted and sticky-by-key: its spool,
 * and moving it to another member when its member fails).
 *
 * A mux writer is used by one thread at a time (smux/backend.h), so its
 * own fields need no lock; each replica writer's lock is held by the
 * bulkhead worker around every call on it.
 */
#ifndef SMUX_CORE_MUX_WRITER_H
#define SMUX_CORE_MUX_WRITER_H

#include "core/mux_internal.h"

#define SMUX__WRITER_MAX 64

/* One replica's writer. Refcounted: the mux writer holds one reference
 * and every job on it one more, dropped by the worker when it is done
 * with the job (bulkhead `done`), so an abandoned call may still hold
 * `lock` after the mux writer is gone and nothing leaks. */
struct smux__mw_sub {
	atomic_int refs;
	pthread_mutex_t lock;
	struct smux_writer *w; /* NULL when it never opened */
	bool failed;
	/* opened after the writer, on a replica that was draining then
	 * (join_late): its file is a copy the writer made */
	bool late;
	struct smux_error err; /* why it failed */
};

enum smux__spool_state {
	SMUX__SPOOL_NONE, /* no spool: the writer cannot move */
	SMUX__SPOOL_LAZY, /* opened without TRUNC, not filled yet */
	SMUX__SPOOL_FULL, /* holds the whole pending content */
};

struct smux__mux_writer {
	struct smux_writer base; /* first */
	struct smux_mux *mux;
	bool fanout; /* shield/mirror: every replica, policy at commit */
	unsigned n;  /* replicas; the single target: 0 or 1 */
	struct mux_member *m[SMUX__WRITER_MAX]; /* references */
	struct smux__mw_sub *s[SMUX__WRITER_MAX];
	uint64_t size; /* pending size, as the caller made it */
	/* fan-out in place (SMUX_WRITER_INPLACE): the key is held and its
	 * write intent journaled before a change (mux_intent.c); dirty:
	 * changes not yet committed under the write policy */
	bool inplace;
	bool dirty;
	unsigned n_late;     /* late[] */
	uint64_t intent_gen; /* of its hold (smux__intent_hold) */
	/* fan-out in place: the replicas left out of the open because they
	 * were draining (references; NULL once joined; n_late of them), and
	 * the open's flags: one undrained later joins the writer
	 * (join_late) */
	struct mux_member *late[SMUX__WRITER_MAX];
	unsigned flags;
	/* fan-out: the writer makes the whole content (opened truncating or
	 * truncated to 0), not an edit of each replica's old copy */
	bool whole;
	/* fan-out: a replica of the mux was left out of the open (draining,
	 * down, stale, or its open failed); it gets the key from the
	 * commit's hint */
	bool left_out;
	/* opened SMUX_WRITER_INPLACE (fan-out or not): the member writers
	 * change the object itself */
	bool object;
	/* sticky-by-key in place: the key is held (smux__intent_hold)
	 * while the writer is open, so no replay moves or deletes the file
	 * it writes (smux__sticky_replay) */
	bool sticky_held;
	/* the single target's file is written behind the writer (its
	 * descriptor given for kernel passthrough, mw_passthrough_fd) */
	bool behind;
	/* the single target only: */
	struct smux_error lost; /* why n == 0 */
	int spool;		/* -1 when none */
	enum smux__spool_state spool_state;
	uint64_t spool_size;
};

/* ---- mux_writer.c ---- */

static inline bool smux__mw_live(const struct smux__mux_writer *mw, unsigned i)
{
	return i < mw->n && mw->s[i]->w && !mw->s[i]->failed;
}

/* The pending size of a writer just opened on replica @i (the worker may
 * still hold its lock for a moment). */
static inline uint64_t smux__mw_sub_size(struct smux__mux_writer *mw,
					 unsigned i)
{
	uint64_t size;

	pthread_mutex_lock(&mw->s[i]->lock);
	size = smux_writer_size(mw->s[i]->w);
	pthread_mutex_unlock(&mw->s[i]->lock);
	return size;
}

/* Passes on the directory's group (smux_writer.dir_group) the writer
 * just opened on replica @i says, if it says it. Replicas agree on their
 * directories as on their files. */
static inline void smux__mw_dir_group(struct smux__mux_writer *mw, unsigned i)
{
	const struct smux_writer *w;

	if (!smux__mw_live(mw, i))
		return;
	pthread_mutex_lock(&mw->s[i]->lock);
	w = mw->s[i]->w;
	mw->base.has_dir_group = w->has_dir_group;
	mw->base.dir_group = w->dir_group;
	pthread_mutex_unlock(&mw->s[i]->lock);
}

/* The link count of the file of a writer just opened on replica @i (the
 * worker may still hold its lock for a moment), from its stat; 0 when it
 * cannot tell. */
static inline uint32_t smux__mw_sub_nlink(struct smux__mux_writer *mw,
					  unsigned i)
{
	struct smux_info info;
	int rc;

	pthread_mutex_lock(&mw->s[i]->lock);
	rc = smux_writer_stat(mw->s[i]->w, &info);
	pthread_mutex_unlock(&mw->s[i]->lock);
	return rc == 0 ? info.nlink : 0;
}

/* Drops a reference on a sub (the bulkhead `done` callback). */
void smux__mw_sub_put(void *arg);
/* Starts @c on replica @i (writer, lock and done filled in); NULL when
 * the job could not start. */
struct smux__job *smux__mw_sub_start(struct smux__mux_writer *mw, unsigned i,
				     const struct smux_ctx *ctx,
				     struct smux__call *c);
/* smux__mw_sub_start + smux__job_finish. */
long smux__mw_sub_run(struct smux__mux_writer *mw, unsigned i,
		      const struct smux_ctx *ctx, struct smux__call *c,
		      struct smux_error *err);
/* Adds @m as replica mw->n (takes a reference). 0 or -ENOMEM. */
int smux__mw_add_sub(struct smux__mux_writer *mw, struct mux_member *m);
/* Drops replica @i: its writer is closed by a job nobody waits for. The
 * caller compacts mw->m/s. */
void smux__mw_sub_retire(struct smux__mux_writer *mw, unsigned i);
/* Opens the replica writers of @mw in parallel (those with acquired[i]);
 * when none opens, one whose probe the background thread runs (cooled[i];
 * @cooled may be NULL) is waited for and opened. NOT_SUPPORTED from any
 * is returned as is, other failures mark the sub failed. */
int smux__mw_open_subs(struct smux__mux_writer *mw, const struct smux_ctx *ctx,
		       const char *key, unsigned flags, const bool *acquired,
		       const bool *probes, const bool *cooled,
		       struct smux_error *err);
/* Reads the pending content back from the first live replica writer. */
long smux__mw_pread_member(struct smux__mux_writer *mw, void *buf, size_t len,
			   uint64_t off, struct smux_error *err);

/* ---- mux_writer_single.c ---- */

/* Opens the single target's writer (falling through on transient errors)
 * and, when the mux has another member, its spool. */
int smux__mw_single_open(struct smux__mux_writer *mw,
			 const struct smux_ctx *ctx, unsigned flags,
			 struct smux_error *err);
int smux__mw_single_pwrite(struct smux__mux_writer *mw,
			   const struct smux_ctx *ctx, const void *buf,
			   size_t len, uint64_t off, struct smux_error *err);
int smux__mw_single_truncate(struct smux__mux_writer *mw,
			     const struct smux_ctx *ctx, uint64_t size,
			     struct smux_error *err);
int smux__mw_single_fallocate(struct smux__mux_writer *mw,
			      const struct smux_ctx *ctx, int mode,
			      uint64_t off, uint64_t len,
			      struct smux_error *err);
long smux__mw_single_pread(struct smux__mux_writer *mw, void *buf, size_t len,
			   uint64_t off, struct smux_error *err);
int smux__mw_single_commit(struct smux__mux_writer *mw,
			   const struct smux_ctx *ctx,
			   const struct smux_put_opts *opts,
			   struct smux_info *info, struct smux_error *err);
/* Closes the spool (the writers are mux_writer.c's). */
void smux__mw_single_release(struct smux__mux_writer *mw);
/* The object has several names (smux_writer_ops.shared): the spool is
 * dropped, reads and a move no longer rely on it. */
void smux__mw_single_shared(struct smux__mux_writer *mw);
/* Test hook (caller-local errors): when set, the spool's copy into a new
 * member writer reads the spool through it (bytes or -errno), so a test
 * can fail that local read. NULL in production. */
extern long (*smux__callerr_spool_pread_hook)(int fd, void *buf, size_t len,
					      uint64_t off);

#endif /* SMUX_CORE_MUX_WRITER_H */
