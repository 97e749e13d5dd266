/* SPDX-License-Identifier: MIT */
/*
 * bulkhead.h (internal) - runs member calls with a deadline and bounded
 * concurrency (seed section 5, DESIGN section 4).
 *
 * Each mux member has one bulkhead: a FIFO queue and a pool of at most
 * `max_inflight` worker threads, started on demand and retired when idle.
 * A call is a job: the caller starts it and waits for it. At the job's
 * deadline (or when the caller's context is cancelled) the caller stops
 * waiting and gets BACKEND_TIMEOUT (or BACKEND_ABORTED) at once, even when
 * the worker is blocked in a system call; the job's cancel token fires so a
 * well-behaved backend stops early, and whatever the job produces later is
 * dropped.
 *
 * Memory safety of abandoned jobs: the worker never touches the caller's
 * memory after the caller stopped waiting. Keys are copied into the job;
 * the caller's sink, source and list callback are reached only through
 * proxies that forward under the job's lock while the caller still waits
 * and fail with -ECANCELED afterwards; outputs (info, statfs, writer,
 * reader, bytes read, error) land in the job and are copied out by
 * smux__job_finish(). The worker's context holds the job's own token and
 * deadline, never the caller's tokens.
 *
 * Calls on the caller's thread: a member whose backend has
 * SMUX_CAP_INLINE (a file backend on a local disk file system) runs the
 * short calls (metadata, a writer's or reader's page-cache reads and
 * writes of up to 64 KiB; not a stream, copy, sync, commit, fallocate
 * or probe) on the
 * caller's thread inside smux__bulkhead_start, which returns the job
 * done: two thread hand-offs fewer (an untar through the mount spent
 * more CPU handing calls over than in them). Only while nothing is
 * queued, no call of the member has been running for 200 ms (a worker's
 * or another caller's: the member may be stuck, and a stuck call on the
 * caller's thread would hold its request past every deadline), and the
 * writer's lock is free; else the call goes to a worker as any other.
 * A directory on a network or FUSE file system never has the
 * capability: there a call can hang for good.
 *
 * Lock order: job lock, then whatever the caller's sink/callback takes.
 * No bulkhead lock is held while a backend operation runs; a call on the
 * caller's thread only try-locks its writer's lock under the bulkhead's
 * (never waits for it there).
 */
#ifndef SMUX_CORE_BULKHEAD_H
#define SMUX_CORE_BULKHEAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "smux/backend.h"

enum smux__op {
	SMUX__OP_GET,
	SMUX__OP_PUT,
	SMUX__OP_DEL,
	SMUX__OP_HEAD,
	SMUX__OP_LIST,
	SMUX__OP_COPY,
	SMUX__OP_RENAME,
	SMUX__OP_SETATTR,
	SMUX__OP_SYNC,
	SMUX__OP_HEALTHCHECK,
	SMUX__OP_STATFS,
	SMUX__OP_WRITER_OPEN,
	SMUX__OP_W_PWRITE,
	SMUX__OP_W_PREAD,
	SMUX__OP_W_TRUNCATE,
	SMUX__OP_W_FALLOCATE,
	SMUX__OP_W_COMMIT,
	SMUX__OP_W_CLOSE,
	SMUX__OP_READER_OPEN,
	SMUX__OP_R_PREAD,
	SMUX__OP_LINK,
	SMUX__OP_GETXATTR,
	SMUX__OP_SETXATTR,
	SMUX__OP_LISTXATTR,
	SMUX__OP_REMOVEXATTR,
	SMUX__OP_EXCHANGE,
};

/*
 * What to run: one dispatch wrapper of smux/backend.h and its arguments.
 * Lives on the caller's stack; smux__bulkhead_start() copies what the
 * worker needs. Unused fields stay zero.
 */
struct smux__call {
	enum smux__op op;
	struct smux_backend *backend; /* the job holds a reference */
	const char *key;  /* GET..COPY, SETATTR, SYNC, WRITER_OPEN, LIST
			    prefix */
	const char *key2; /* COPY/RENAME/LINK destination, EXCHANGE's other
			     name, LIST delimiter, *XATTR name */
	const struct smux_setattr *setattr;   /* SETATTR (copied) */
	const struct smux_get_opts *get_opts; /* GET (copied) */
	const struct smux_put_opts *put_opts; /* PUT, W_COMMIT (copied) */
	struct smux_sink *sink;		      /* GET: reached via proxy */
	const struct smux_source *src;	      /* PUT: reached via proxy */
	smux_list_fn list_fn;		      /* LIST: called via proxy */
	void *list_arg;
	struct smux_info *info;	    /* GET, PUT, HEAD, W_COMMIT: out */
	struct smux_statfs *statfs; /* STATFS: out */
	unsigned flags; /* WRITER_OPEN, SETXATTR, W_FALLOCATE (mode) */
	struct smux_writer **writer_out; /* WRITER_OPEN: out */
	struct smux_writer *writer;	 /* W_*: the writer */
	pthread_mutex_t *writer_lock;	 /* W_*: held by the worker around the
					 writer call (serialises a writer's
					 ops, abandoned or not); it must
					 live until @done is called */
	/* Called once the job is over for the worker (ran, or was dropped
	 * from the queue), after writer_lock is released; possibly after the
	 * caller stopped waiting. Releases what writer_lock lives in. */
	void (*done)(void *arg);
	void *done_arg;
	const void *wbuf; /* W_PWRITE, SETXATTR: copied into the job */
	void *rbuf;	  /* W_PREAD, R_PREAD, GET/LISTXATTR: filled via
			     the job */
	size_t len;	  /* W_PWRITE, W_PREAD, R_PREAD, *XATTR (buffer or
			     value size; 0: GET/LISTXATTR ask the length),
			     W_FALLOCATE */
	uint64_t off;	  /* W_PWRITE, W_PREAD, R_PREAD, W_TRUNCATE,
			     W_FALLOCATE */
	long *nread;	  /* W_PREAD, R_PREAD, GET/LISTXATTR: out (the
			     value's or list's length) */
	/* READER_OPEN: opens a reader of @key on @backend
	 * (smux_backend_reader_open when NULL); the reader lands in
	 * *reader_out on success only (a reader opened after the caller
	 * stopped waiting is closed by the bulkhead) */
	int (*open_reader)(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, struct smux_reader **out,
			   struct smux_error *err);
	struct smux_reader **reader_out;
	/* R_PREAD: the reader; it must live until @done is called */
	struct smux_reader *reader;
	struct smux_span *span; /* parent span for the worker ctx */
	/* A mux's routing of reads (READER_OPEN): members (by backend) that
	 * already failed this operation, passed over while another is left
	 * (mux_reader.c's re-open). Not used by the bulkhead. */
	struct smux_backend *const *avoid;
	unsigned n_avoid;
};

struct smux__bulkhead;
struct smux__job;

/*
 * A completion group: jobs started with a group broadcast on it when they
 * finish, so a caller can wait for the first (race) or all (fan-out) of
 * several jobs. Lives on the caller's stack; every job started with it
 * must be finished or abandoned before smux__group_release().
 */
struct smux__group {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	unsigned completed;  /* protected by lock */
};

void smux__group_init(struct smux__group *g);
void smux__group_release(struct smux__group *g);
/*
 * Waits until g->completed differs from @seen or CLOCK_MONOTONIC reaches
 * @until_ns. Returns the current completed count.
 */
unsigned smux__group_wait(struct smux__group *g, unsigned seen,
			  int64_t until_ns);

/* A bulkhead for member @name (copied) with at most @max_inflight calls
 * running at once (0: SMUX_DEFAULT_MAX_INFLIGHT). NULL on ENOMEM. */
struct smux__bulkhead *smux__bulkhead_new(const char *name,
					  unsigned max_inflight);
/*
 * Stops accepting jobs, tells idle workers to exit and joins them (and any
 * that retired earlier), so none is still ending when it returns. Workers
 * inside a member call (stuck past a deadline, or not yet returned) are
 * orphaned instead: they finish in the background, drop their result, and
 * the last one frees the bulkhead. Never blocks on a backend.
 */
void smux__bulkhead_free(struct smux__bulkhead *bh);

/* Jobs queued or running (for tests and stats). */
unsigned smux__bulkhead_busy(struct smux__bulkhead *bh);

/*
 * Queues @call with a per-call budget of @timeout_ms (<= 0: none). The
 * job's deadline is the caller's ctx deadline, and besides:
 *  - while queued behind max_inflight, the budget counted from now; a
 *    job that never started fails with a BACKEND_TIMEOUT that
 *    smux__bulkhead_unstarted() recognises (our own queue, not the
 *    member's fault: the mux charges nothing to its health);
 *  - once a worker starts it, the budget counted from the start; for a
 *    stream (GET into a sink, PUT from a source) counted from the last
 *    time the sink or source moved bytes, so a long transfer that keeps
 *    moving finishes and a stalled one fails one budget after its last
 *    byte ("the stream moved no byte for N ms").
 * @g (may be NULL) is notified when the job completes. Returns the job,
 * or NULL on ENOMEM.
 */
struct smux__job *smux__bulkhead_start(struct smux__bulkhead *bh,
				       const struct smux_ctx *ctx,
				       int64_t timeout_ms,
				       const struct smux__call *call,
				       struct smux__group *g);

/* True once the worker finished (finish then returns without waiting). */
bool smux__job_done(struct smux__job *job);
/* The job's deadline as of now (CLOCK_MONOTONIC ns; INT64_MAX when
 * none). It moves: when a worker starts the job, and as a stream moves
 * bytes; a caller waiting on a group reads it again after each wake-up. */
int64_t smux__job_deadline(struct smux__job *job);
/* True for the error of a job that stopped while still queued behind the
 * bulkhead's own max_inflight (the member never saw the call). */
bool smux__bulkhead_unstarted(const struct smux_error *err);

/*
 * Waits for the job (until it is done, its deadline passes, or the
 * caller's @ctx given at start is cancelled), copies its outputs into the
 * caller's pointers from the call, fills @err, and releases the job.
 * Returns the operation's result: 0 (or bytes read for W_PREAD and
 * R_PREAD), or a negative errno; BACKEND_TIMEOUT / BACKEND_ABORTED when
 * it stopped waiting (the job is then abandoned).
 */
long smux__job_finish(struct smux__job *job, struct smux_error *err);

/* Stops waiting for @job: fires its token with @why, drops its results
 * and releases it. The worker still runs it (or skips it if queued and
 * the backend checks its context). */
void smux__job_abandon(struct smux__job *job, enum smux_cancel_reason why);

/*
 * Zombie tracking (mux_zombie.c). A mutating call (put, delete, copy,
 * rename, link, setattr, xattr changes, a writer's open, pwrite, truncate
 * and commit) whose caller stopped waiting while a worker may still run
 * it can land on the member later: a zombie. With hooks set, the bulkhead
 * calls @begin(arg, member, key, key2) from smux__job_abandon for such a
 * job - the keys it changes: @key2 NULL or a rename's destination -,
 * under the job's lock (no I/O, no backend call there); a non-NULL result
 * is the token @end(token, ran) gets once the worker is over with the job
 * (after its call returned, before call->done; @ran: the backend was
 * called), or at once when the job never runs (@ran false). @release(arg)
 * when the bulkhead is freed.
 */
struct smux__zombie_hooks {
	/* @edit: the call changes an object that was there (a setattr, an
	 * xattr change, a writer's call when the writer found the object),
	 * not one it may have made (a put, a copy, a rename's target) */
	void *(*begin)(void *arg, const char *member, const char *key,
		       const char *key2, bool edit);
	void (*end)(void *token, bool ran);
	void (*release)(void *arg);
};

/* Sets the zombie hooks of @bh (@hooks static; @arg released with @bh).
 * Before the first job only. */
void smux__bulkhead_set_zombie_hooks(struct smux__bulkhead *bh,
				     const struct smux__zombie_hooks *hooks,
				     void *arg);

/* smux__bulkhead_start + smux__job_finish. */
long smux__bulkhead_run(struct smux__bulkhead *bh, const struct smux_ctx *ctx,
			int64_t timeout_ms, const struct smux__call *call,
			struct smux_error *err);

/*
 * Orphans (bulkhead_orphans.c): a worker left inside a member call by
 * smux__bulkhead_free stays joinable on a process-wide list, so the
 * process never exits while one is ending (its thread-local destructors
 * half run). Adopt returns NULL on ENOMEM (the caller detaches the thread
 * instead); leave is the orphan's last step before it returns, and parks
 * for good once the process is exiting; reap joins the orphans that left.
 */
struct smux__orphan;
struct smux__orphan *smux__orphan_adopt(pthread_t tid);
void smux__orphan_leave(struct smux__orphan *o);
void smux__orphans_reap(void);

#endif /* SMUX_CORE_BULKHEAD_H */
