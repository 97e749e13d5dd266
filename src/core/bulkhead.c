/* SPDX-License-Identifier: MIT */
/*
 * bulkhead.c - member calls with a deadline and bounded concurrency
 * (core/bulkhead.h; seed section 5, DESIGN section 4).
 *
 * Owns: each bulkhead's FIFO queue and its detached worker threads, and
 * each job's private copies of what a call needs (keys, options, write
 * buffer, read buffer, outputs). A worker reaches the caller's memory only
 * through the job's proxies (sink, source, list callback), under the job's
 * lock and only while the job is not abandoned; the caller's context is
 * read by the caller alone.
 *
 * Lifetimes: a bulkhead is referenced by its owner, by each worker thread
 * and by each job; a job by its caller (until finish or abandon) and by the
 * worker side (until it ran, or until abandon takes it off the queue).
 * Whoever drops the last reference frees, so nobody ever waits for a stuck
 * backend.
 *
 * Worker threads are joinable and each has a record on bh->threads. One
 * that retires when idle marks its record exited and is joined by the next
 * smux__bulkhead_start or by smux__bulkhead_free. smux__bulkhead_free joins
 * every worker that is not inside a member call: idle ones exit at once,
 * so at unmount no worker is still ending (releasing its thread-local
 * state, e.g. OpenSSL's per-thread error state from curl) when the process
 * exits. A worker inside a member call (an abandoned job stuck past its
 * deadline, or one that has not returned yet) cannot be joined without
 * waiting for the backend: free orphans it instead (bulkhead_orphans.c), it
 * finishes the call in the background, drops its result, frees its own
 * record, and the last reference frees the bulkhead - the DESIGN's
 * abandoned job.
 *
 * Lock order: job->lock, then the caller's sink/callback and group->lock.
 * bh->lock is never held together with a job lock, and no lock of this
 * file is held while a backend operation runs (a writer's writer_lock is
 * the caller's and is held around the writer call on purpose).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bulkhead.h"
#include "smux/mux.h"

#define NS_PER_MS  1000000LL
#define NS_PER_SEC 1000000000LL
/* An idle worker retires after this long without a job. */
#define BH_IDLE_NS (2 * NS_PER_SEC)
/* How often a waiting caller looks at its context's tokens. */
#define BH_POLL_NS (5 * NS_PER_MS)
/*
 * Hand-off without sleeping: a worker that finished a job watches the
 * queue (one worker at a time: the others sleep at once), and a caller
 * watches its job, for this long before blocking on a condition variable.
 * Waking a sleeping thread costs tens of microseconds on these virtual
 * machines; a member call on a local backend often takes less. Bounded,
 * so an idle mux burns no CPU.
 */
#define BH_SPIN_NS (50 * 1000LL)
/*
 * Calls on the caller's thread (bulkhead.h, smux__bulkhead_start): not
 * while a call of the member has been running this long - the member
 * may be stuck, and a stuck call on the caller's thread would hold the
 * request it serves past every deadline.
 */
#define BH_INLINE_STUCK_NS (200 * NS_PER_MS)
/*
 * Reads and writes of more than this go to a worker all the same: a
 * hand-off costs little beside the copy, and a mirror's replicas then
 * copy in parallel (a 512 MiB dd onto a mirror of two tmpfs directories:
 * 750 ms with 1 MiB writes on the caller's thread, one replica after the
 * other, 640 ms through the workers).
 */
#define BH_INLINE_MAX_BYTES ((size_t)64 * 1024)

/* Lets another runnable thread have the CPU while we watch: with more
 * spinning workers than cores (a round-robin over several members), a
 * plain pause loop would starve the very worker that has the job. */
static inline void cpu_relax(void)
{
	sched_yield();
}

/* One worker thread. Fields protected by its bulkhead's lock. */
struct bh_thread {
	struct smux__bulkhead *bh;   /* immutable */
	pthread_t tid;		     /* immutable once started */
	struct bh_thread *next;	     /* on bh->threads until joined/detached */
	bool busy;		     /* running a member call (job_run) */
	int64_t run_ns;		     /* when it took its current job */
	bool exited;		     /* worker_main is returning: join it */
	bool detached;		     /* off the list; the thread frees this */
	struct smux__orphan *orphan; /* set with detached; NULL: detached */
};

struct smux__bulkhead {
	pthread_mutex_t lock;
	pthread_cond_t cond;	   /* CLOCK_MONOTONIC; job queued or closing */
	pthread_cond_t changed;	   /* a worker went busy or exited */
	struct bh_thread *threads; /* protected by lock: not yet joined */
	char *name;		   /* immutable */
	unsigned max_inflight;	   /* immutable */
	struct smux__job *head;	   /* protected by lock: FIFO of queued jobs */
	struct smux__job *tail;	   /* protected by lock */
	unsigned queued;	   /* protected by lock */
	atomic_uint queued_hint;   /* copy of queued for lock-free spinning */
	unsigned running;	   /* protected by lock */
	unsigned workers;	   /* protected by lock: worker threads alive */
	unsigned idle;		   /* protected by lock: workers waiting */
	unsigned refs;		   /* protected by lock: owner, workers, jobs */
	bool closing;		   /* protected by lock: owner freed it */
	/* protected by lock: a worker is watching the queue without
	 * sleeping (at most one does: two idle workers spinning side by
	 * side only hand the CPU to each other) */
	bool spinning;
	/* protected by lock: the calls running on their callers' threads
	 * (struct bh_inline, on those threads' stacks) */
	struct bh_inline *inlined;
	/* set before the first job, read-only afterwards */
	const struct smux__zombie_hooks *zhooks;
	void *zarg;
};

struct smux__job {
	/* Set by smux__bulkhead_start, read-only afterwards. */
	struct smux__bulkhead *bh;    /* holds a bulkhead reference */
	struct smux_backend *backend; /* holds a reference; may be NULL */
	enum smux__op op;
	char *key;  /* owned copy */
	char *key2; /* owned copy */
	char *if_match;
	struct smux_get_opts get_opts;
	struct smux_put_opts put_opts;
	unsigned char sha256[32]; /* put_opts.sha256 points here */
	struct smux_setattr setattr;
	bool has_get_opts, has_put_opts, want_info;
	bool streaming; /* GET to a sink, PUT from a source */
	unsigned flags;
	struct smux_writer *writer;   /* W_*: the caller's writer */
	pthread_mutex_t *writer_lock; /* W_*: the caller's lock, or NULL */
	struct smux_reader *reader;   /* R_PREAD: the caller's reader */
	int (*open_reader)(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, struct smux_reader **out,
			   struct smux_error *err); /* READER_OPEN */
	void (*on_done)(void *arg); /* call->done: see struct smux__call */
	void *on_done_arg;
	void *buf; /* W_PWRITE copy, W_PREAD/R_PREAD landing */
	size_t len;
	uint64_t off;
	struct smux__group *group;  /* touched only while not abandoned */
	int64_t start_ns;	    /* queued at */
	int64_t budget_ns;	    /* the member's per-call budget (0: none) */
	int64_t caller_deadline_ns; /* the caller's ctx (INT64_MAX: none) */
	struct smux_ctx wctx; /* the worker's: job token + caller deadline */

	/* Caller side only (finish/abandon); the worker never reads these. */
	struct smux_ctx caller_ctx; /* a copy; its tokens outlive the wait */
	struct smux_info *info_out;
	struct smux_statfs *statfs_out;
	struct smux_writer **writer_out;
	struct smux_reader **reader_out;
	void *rbuf_out;
	long *nread_out;

	/* Caller memory reached by the proxies, under lock, until abandoned. */
	struct smux_sink *caller_sink;
	const struct smux_source *caller_src;
	smux_list_fn list_fn;
	void *list_arg;

	/* Worker side only. */
	struct smux_sink psink;	   /* proxy of caller_sink */
	struct smux_source psrc;   /* proxy of caller_src */
	struct smux_info info;	   /* published by done */
	struct smux_statfs statfs; /* published by done */

	struct smux_cancel token; /* fired by abandon; any thread */
	pthread_mutex_t lock;
	pthread_cond_t cond;   /* CLOCK_MONOTONIC; broadcast on done */
	int64_t run_ns;	       /* protected by lock: a worker started it
				(0: still queued) */
	int64_t progress_ns;   /* protected by lock: the sink or source last
				moved bytes (0: never) */
	bool abandoned;	       /* protected by lock */
	bool done;	       /* protected by lock */
	atomic_bool done_hint; /* set with done, for lock-free spinning */
	long rc;	       /* protected by lock */
	struct smux_error err; /* protected by lock */
	struct smux_writer *new_writer; /* protected by lock: WRITER_OPEN */
	struct smux_reader *new_reader; /* protected by lock: READER_OPEN */
	void *zombie; /* protected by lock: the zombie hooks' token */

	struct smux__job *prev, *next; /* protected by bh->lock */
	bool in_queue;		       /* protected by bh->lock */

	atomic_int refs; /* caller + worker side */
};

/* A call running on its caller's thread (on that thread's stack). */
struct bh_inline {
	int64_t start_ns;
	struct bh_inline *next; /* protected by bh->lock */
};

/* ---- time and condition variables ---- */

static void cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

/* Waits on @cond until CLOCK_MONOTONIC reaches @until_ns (INT64_MAX: no
 * limit). Returns 0 or ETIMEDOUT. */
static int cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *lock,
			   int64_t until_ns)
{
	struct timespec ts;

	if (until_ns == INT64_MAX)
		return pthread_cond_wait(cond, lock);
	if (until_ns < 0)
		until_ns = 0;
	ts.tv_sec = (time_t)(until_ns / NS_PER_SEC);
	ts.tv_nsec = (long)(until_ns % NS_PER_SEC);
	return pthread_cond_timedwait(cond, lock, &ts);
}

/* ---- groups ---- */

void smux__group_init(struct smux__group *g)
{
	pthread_mutex_init(&g->lock, NULL);
	cond_init_monotonic(&g->cond);
	g->completed = 0;
}

void smux__group_release(struct smux__group *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

unsigned smux__group_wait(struct smux__group *g, unsigned seen,
			  int64_t until_ns)
{
	unsigned completed;

	pthread_mutex_lock(&g->lock);
	while (g->completed == seen && smux_now_ns() < until_ns) {
		if (cond_wait_until(&g->cond, &g->lock, until_ns) == ETIMEDOUT)
			break;
	}
	completed = g->completed;
	pthread_mutex_unlock(&g->lock);
	return completed;
}

/* ---- bulkhead lifetime ---- */

struct smux__bulkhead *smux__bulkhead_new(const char *name,
					  unsigned max_inflight)
{
	struct smux__bulkhead *bh = calloc(1, sizeof(*bh));

	if (!bh)
		return NULL;
	bh->name = strdup(name ? name : "");
	if (!bh->name) {
		free(bh);
		return NULL;
	}
	bh->max_inflight =
		max_inflight ? max_inflight : SMUX_DEFAULT_MAX_INFLIGHT;
	bh->refs = 1;
	smux__orphans_reap(); /* orphans of earlier bulkheads that left */
	pthread_mutex_init(&bh->lock, NULL);
	cond_init_monotonic(&bh->cond);
	pthread_cond_init(&bh->changed, NULL);
	return bh;
}

void smux__bulkhead_set_zombie_hooks(struct smux__bulkhead *bh,
				     const struct smux__zombie_hooks *hooks,
				     void *arg)
{
	bh->zhooks = hooks;
	bh->zarg = arg;
}

static void bh_destroy(struct smux__bulkhead *bh)
{
	if (bh->zhooks && bh->zhooks->release)
		bh->zhooks->release(bh->zarg);
	pthread_cond_destroy(&bh->changed);
	pthread_cond_destroy(&bh->cond);
	pthread_mutex_destroy(&bh->lock);
	free(bh->name);
	free(bh);
}

/* Drops one reference; the last one frees. bh->lock not held. */
static void bh_put(struct smux__bulkhead *bh)
{
	bool last;

	pthread_mutex_lock(&bh->lock);
	last = --bh->refs == 0;
	pthread_mutex_unlock(&bh->lock);
	if (last)
		bh_destroy(bh);
}

/* Joins and frees the records of @list (taken off bh->threads; bh->lock
 * not held: the threads are past their last use of it). */
static void threads_join(struct bh_thread *list)
{
	while (list) {
		struct bh_thread *t = list;

		list = t->next;
		pthread_join(t->tid, NULL);
		free(t);
	}
}

/* Takes the exited workers off bh->threads and returns them, to be
 * joined once bh->lock is released. bh->lock held. */
static struct bh_thread *threads_take_exited(struct smux__bulkhead *bh)
{
	struct bh_thread **pp = &bh->threads, *out = NULL;

	while (*pp) {
		struct bh_thread *t = *pp;

		if (t->exited) {
			*pp = t->next;
			t->next = out;
			out = t;
		} else {
			pp = &t->next;
		}
	}
	return out;
}

void smux__bulkhead_free(struct smux__bulkhead *bh)
{
	struct bh_thread *done = NULL;

	if (!bh)
		return;
	pthread_mutex_lock(&bh->lock);
	bh->closing = true;
	/* Idle workers exit; busy ones drain the queue first. */
	pthread_cond_broadcast(&bh->cond);
	for (;;) {
		struct bh_thread **pp = &bh->threads;
		bool waiting = false;

		while (*pp) {
			struct bh_thread *t = *pp;

			if (t->exited) {
				*pp = t->next;
				t->next = done;
				done = t;
			} else if (t->busy ||
				   pthread_equal(t->tid, pthread_self())) {
				/* in a member call (maybe stuck past its
				 * deadline), or ourselves: never wait for a
				 * backend; the thread frees its record */
				*pp = t->next;
				t->detached = true;
				t->orphan = smux__orphan_adopt(t->tid);
				if (!t->orphan)
					pthread_detach(t->tid);
			} else {
				waiting = true; /* idle: exiting now */
				pp = &t->next;
			}
		}
		if (!waiting)
			break;
		pthread_cond_wait(&bh->changed, &bh->lock);
	}
	pthread_mutex_unlock(&bh->lock);
	threads_join(done);
	bh_put(bh);
	smux__orphans_reap();
}

unsigned smux__bulkhead_busy(struct smux__bulkhead *bh)
{
	unsigned n;

	pthread_mutex_lock(&bh->lock);
	n = bh->queued + bh->running;
	pthread_mutex_unlock(&bh->lock);
	return n;
}

/* ---- the queue (bh->lock held) ---- */

static void queue_push(struct smux__bulkhead *bh, struct smux__job *job)
{
	job->prev = bh->tail;
	job->next = NULL;
	if (bh->tail)
		bh->tail->next = job;
	else
		bh->head = job;
	bh->tail = job;
	job->in_queue = true;
	bh->queued++;
	atomic_store_explicit(&bh->queued_hint, bh->queued,
			      memory_order_release);
}

static void queue_unlink(struct smux__bulkhead *bh, struct smux__job *job)
{
	if (job->prev)
		job->prev->next = job->next;
	else
		bh->head = job->next;
	if (job->next)
		job->next->prev = job->prev;
	else
		bh->tail = job->prev;
	job->prev = job->next = NULL;
	job->in_queue = false;
	bh->queued--;
	atomic_store_explicit(&bh->queued_hint, bh->queued,
			      memory_order_relaxed);
}

/* ---- jobs ---- */

static void job_free(struct smux__job *job)
{
	smux_cancel_release(&job->token);
	pthread_cond_destroy(&job->cond);
	pthread_mutex_destroy(&job->lock);
	free(job->key);
	free(job->key2);
	free(job->if_match);
	free(job->buf);
	smux_local_copy_unref(job->wctx.local);
	smux_backend_unref(job->backend);
	if (job->bh)
		bh_put(job->bh);
	free(job);
}

/* Drops @n references; the last one frees. */
static void job_put_n(struct smux__job *job, int n)
{
	if (atomic_fetch_sub(&job->refs, n) == n)
		job_free(job);
}

static void job_put(struct smux__job *job)
{
	job_put_n(job, 1);
}

/* The proxies: forward to the caller while it waits, refuse afterwards. */

static int proxy_sink_write(void *arg, const void *data, size_t len)
{
	struct smux__job *job = arg;
	int rc = -ECANCELED;

	pthread_mutex_lock(&job->lock);
	if (!job->abandoned)
		rc = smux_sink_write(job->caller_sink, data, len);
	if (rc == 0 && len > 0)
		job->progress_ns = smux_now_ns();
	pthread_mutex_unlock(&job->lock);
	return rc;
}

static int proxy_sink_rewind(void *arg)
{
	struct smux__job *job = arg;
	int rc = -ECANCELED;

	pthread_mutex_lock(&job->lock);
	if (!job->abandoned)
		rc = smux_sink_rewind(job->caller_sink);
	pthread_mutex_unlock(&job->lock);
	return rc;
}

static long proxy_source_read(void *arg, uint64_t pos, void *dst, size_t len)
{
	struct smux__job *job = arg;
	long n = -ECANCELED;

	pthread_mutex_lock(&job->lock);
	if (!job->abandoned)
		n = smux_source_read(job->caller_src, pos, dst, len);
	if (n > 0)
		job->progress_ns = smux_now_ns();
	pthread_mutex_unlock(&job->lock);
	return n;
}

static int proxy_list(void *arg, const struct smux_list_entry *e)
{
	struct smux__job *job = arg;
	int rc = 1; /* stop */

	pthread_mutex_lock(&job->lock);
	if (!job->abandoned)
		rc = job->list_fn(job->list_arg, e);
	pthread_mutex_unlock(&job->lock);
	return rc;
}

static int dup_str(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -ENOMEM;
}

/* @t + @ns, saturated (INT64_MAX stays INT64_MAX). */
static int64_t add_sat(int64_t t, int64_t ns)
{
	return ns > INT64_MAX - t ? INT64_MAX : t + ns;
}

/* Why a caller stops waiting for a job that is not done (job_stop). */
enum job_stop_kind {
	JOB_WAIT,    /* not yet */
	JOB_CALLER,  /* the caller's own deadline passed */
	JOB_QUEUED,  /* never started within the budget: our own queue */
	JOB_BUDGET,  /* started, no answer within the budget */
	JOB_STALLED, /* a stream that moved no byte within the budget */
};

/*
 * The deadline a waiting caller applies to @job now (job->lock held), and
 * the kind of stop it means (deadlines, DESIGN section 4):
 *  - the caller's ctx deadline, always;
 *  - queued (no worker started it yet): the budget counted from when it
 *    was queued, so a hung member whose workers are all stuck cannot hang
 *    a caller without a deadline; that stop is ours, not the member's;
 *  - started: the budget counted from the start; a stream (a GET into a
 *    sink, a PUT from a source) restarts it each time bytes move, so a
 *    large object on a slow member finishes while a stalled one fails
 *    one budget after its last byte.
 */
static int64_t job_deadline_locked(const struct smux__job *job,
				   enum job_stop_kind *kind)
{
	int64_t d = INT64_MAX, from = job->run_ns;
	enum job_stop_kind k = JOB_BUDGET;

	if (!job->run_ns) {
		from = job->start_ns;
		k = JOB_QUEUED;
	} else if (job->streaming && job->progress_ns > from) {
		from = job->progress_ns;
		k = JOB_STALLED;
	}
	if (job->budget_ns > 0)
		d = add_sat(from, job->budget_ns);
	if (job->caller_deadline_ns <= d) {
		d = job->caller_deadline_ns;
		k = JOB_CALLER;
	}
	if (kind)
		*kind = k;
	return d;
}

/* Copies what the worker needs out of @call. 0 or -ENOMEM. */
static int job_fill(struct smux__job *job, const struct smux_ctx *ctx,
		    int64_t timeout_ms, const struct smux__call *call)
{
	const struct smux_get_opts *go = call->get_opts;
	const struct smux_put_opts *po = call->put_opts;

	job->op = call->op;
	if (dup_str(&job->key, call->key) || dup_str(&job->key2, call->key2))
		return -ENOMEM;
	if (go) {
		job->get_opts = *go;
		job->has_get_opts = true;
		if (dup_str(&job->if_match, go->if_match))
			return -ENOMEM;
		job->get_opts.if_match = job->if_match;
	}
	if (po) {
		job->put_opts = *po;
		job->has_put_opts = true;
		/* the job may outlive its caller (abandoned at the deadline) */
		if (po->sha256) {
			memcpy(job->sha256, po->sha256, sizeof(job->sha256));
			job->put_opts.sha256 = job->sha256;
		}
	}
	if (call->setattr)
		job->setattr = *call->setattr;
	job->want_info = call->info != NULL;
	job->flags = call->flags;
	job->writer = call->writer;
	job->writer_lock = call->writer_lock;
	job->reader = call->reader;
	job->open_reader = call->open_reader ? call->open_reader
					     : smux_backend_reader_open;
	job->on_done = call->done;
	job->on_done_arg = call->done_arg;
	job->len = call->len;
	job->off = call->off;
	if (call->op == SMUX__OP_W_PWRITE || call->op == SMUX__OP_W_PREAD ||
	    call->op == SMUX__OP_R_PREAD || call->op == SMUX__OP_GETXATTR ||
	    call->op == SMUX__OP_SETXATTR || call->op == SMUX__OP_LISTXATTR) {
		job->buf = malloc(call->len ? call->len : 1);
		if (!job->buf)
			return -ENOMEM;
		if ((call->op == SMUX__OP_W_PWRITE ||
		     call->op == SMUX__OP_SETXATTR) &&
		    call->len)
			memcpy(job->buf, call->wbuf, call->len);
	}

	job->info_out = call->info;
	job->statfs_out = call->statfs;
	job->writer_out = call->writer_out;
	job->reader_out = call->reader_out;
	job->rbuf_out = call->rbuf;
	job->nread_out = call->nread;

	job->caller_sink = call->sink;
	if (call->sink) {
		smux_sink_cb(&job->psink, proxy_sink_write,
			     smux_sink_can_rewind(call->sink)
				     ? proxy_sink_rewind
				     : NULL,
			     job);
		job->psink.written = call->sink->written;
	}
	job->caller_src = call->src;
	if (call->src)
		smux_source_cb(&job->psrc, proxy_source_read, job,
			       call->src->length);
	job->list_fn = call->list_fn;
	job->list_arg = call->list_arg;

	if (call->backend)
		job->backend = smux_backend_ref(call->backend);
	else if (call->writer && call->writer->backend)
		job->backend = smux_backend_ref(call->writer->backend);

	job->start_ns = smux_now_ns();
	job->budget_ns = timeout_ms > 0 && timeout_ms < INT64_MAX / NS_PER_MS
				 ? timeout_ms * NS_PER_MS
				 : 0;
	job->caller_deadline_ns =
		ctx && ctx->deadline_ns ? ctx->deadline_ns : INT64_MAX;
	job->streaming = (call->op == SMUX__OP_GET && call->sink) ||
			 (call->op == SMUX__OP_PUT && call->src);
	if (ctx)
		job->caller_ctx = *ctx;
	else
		smux_ctx_init(&job->caller_ctx);
	/*
	 * Never the caller's tokens: they may live on the caller's stack.
	 * The worker sees the caller's deadline only: the budget moves (it
	 * starts when a worker starts the call, and a stream's restarts
	 * with each byte moved), so the waiting caller applies it and fires
	 * the job's token when it runs out.
	 */
	smux_ctx_init(&job->wctx);
	job->wctx.deadline_ns = job->caller_deadline_ns == INT64_MAX
					? 0
					: job->caller_deadline_ns;
	job->wctx.cancel[0] = &job->token;
	job->wctx.parent_span = call->span;
	job->wctx.depth = ctx ? ctx->depth : 0;
	/* the local copy is counted: an abandoned call may still read it */
	if (ctx && ctx->local)
		job->wctx.local = smux_local_copy_ref(ctx->local);
	return 0;
}

static struct smux__job *job_new(void)
{
	struct smux__job *job = calloc(1, sizeof(*job));

	if (!job)
		return NULL;
	smux_cancel_init(&job->token);
	pthread_mutex_init(&job->lock, NULL);
	cond_init_monotonic(&job->cond);
	atomic_init(&job->refs, 2);
	return job;
}

static bool op_is_writer(enum smux__op op)
{
	return op >= SMUX__OP_W_PWRITE && op <= SMUX__OP_W_CLOSE;
}

/* GETXATTR/LISTXATTR into the job's buffer; the length (>= 0) or a
 * negative errno. */
static long job_xattr_read(struct smux__job *job, struct smux_error *err)
{
	size_t n = 0;
	int rc;

	if (job->op == SMUX__OP_GETXATTR)
		rc = smux_backend_getxattr(job->backend, &job->wctx, job->key,
					   job->key2, job->buf, job->len, &n,
					   err);
	else
		rc = smux_backend_listxattr(job->backend, &job->wctx, job->key,
					    job->buf, job->len, &n, err);
	return rc ? rc : (long)n;
}

/* Runs the operation through its dispatch wrapper (worker thread). */
static long job_call(struct smux__job *job, struct smux_writer **opened,
		     struct smux_reader **ropened, struct smux_error *err)
{
	struct smux_backend *b = job->backend;
	const struct smux_ctx *ctx = &job->wctx;
	const char *name = job->bh->name;
	struct smux_writer *w = job->writer;

	if (!b && !op_is_writer(job->op))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name,
				      "bulkhead call without a backend");
	if (!w && op_is_writer(job->op) && job->op != SMUX__OP_W_CLOSE)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name,
				      "writer call without a writer");
	if (!job->reader && job->op == SMUX__OP_R_PREAD)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name,
				      "reader call without a reader");
	switch (job->op) {
	case SMUX__OP_GET:
		return smux_backend_get(
			b, ctx, job->key,
			job->has_get_opts ? &job->get_opts : NULL,
			job->caller_sink ? &job->psink : NULL,
			job->want_info ? &job->info : NULL, err);
	case SMUX__OP_PUT:
		return smux_backend_put(
			b, ctx, job->key, job->caller_src ? &job->psrc : NULL,
			job->has_put_opts ? &job->put_opts : NULL,
			job->want_info ? &job->info : NULL, err);
	case SMUX__OP_DEL:
		return smux_backend_del(b, ctx, job->key, err);
	case SMUX__OP_HEAD:
		return smux_backend_head(b, ctx, job->key,
					 job->want_info ? &job->info : NULL,
					 err);
	case SMUX__OP_LIST:
		return smux_backend_list(b, ctx, job->key, job->key2,
					 job->list_fn ? proxy_list : NULL, job,
					 err);
	case SMUX__OP_COPY:
		return smux_backend_copy(b, ctx, job->key, job->key2, err);
	case SMUX__OP_RENAME:
		return smux_backend_rename(b, ctx, job->key, job->key2, err);
	case SMUX__OP_EXCHANGE:
		return smux_backend_exchange(b, ctx, job->key, job->key2, err);
	case SMUX__OP_LINK:
		return smux_backend_link(b, ctx, job->key, job->key2, err);
	case SMUX__OP_SETATTR:
		return smux_backend_setattr(b, ctx, job->key, &job->setattr,
					    err);
	case SMUX__OP_SYNC:
		return smux_backend_sync(b, ctx, job->key, err);
	case SMUX__OP_HEALTHCHECK:
		return smux_backend_healthcheck(b, ctx, err);
	case SMUX__OP_STATFS:
		return smux_backend_statfs(b, ctx, &job->statfs, err);
	case SMUX__OP_WRITER_OPEN:
		return smux_backend_writer_open(b, ctx, job->key, job->flags,
						opened, err);
	case SMUX__OP_W_PWRITE:
		return smux_writer_pwrite(w, ctx, job->buf, job->len, job->off,
					  err);
	case SMUX__OP_W_PREAD:
		return smux_writer_pread(w, job->buf, job->len, job->off, err);
	case SMUX__OP_W_TRUNCATE:
		return smux_writer_truncate(w, ctx, job->off, err);
	case SMUX__OP_W_FALLOCATE:
		return smux_writer_fallocate(w, ctx, (int)job->flags, job->off,
					     job->len, err);
	case SMUX__OP_W_COMMIT:
		return smux_writer_commit(
			w, ctx, job->has_put_opts ? &job->put_opts : NULL,
			job->want_info ? &job->info : NULL, err);
	case SMUX__OP_W_CLOSE:
		smux_writer_close(w);
		return 0;
	case SMUX__OP_READER_OPEN:
		return job->open_reader(b, ctx, job->key, ropened, err);
	case SMUX__OP_R_PREAD:
		return smux_reader_pread(job->reader, ctx, job->buf, job->len,
					 job->off, err);
	case SMUX__OP_GETXATTR:
	case SMUX__OP_LISTXATTR:
		return job_xattr_read(job, err);
	case SMUX__OP_SETXATTR:
		return smux_backend_setxattr(b, ctx, job->key, job->key2,
					     job->buf, job->len,
					     (int)job->flags, err);
	case SMUX__OP_REMOVEXATTR:
		return smux_backend_removexattr(b, ctx, job->key, job->key2,
						err);
	}
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, name,
			      "unknown bulkhead operation %d", (int)job->op);
}

/* What running a job yields, from job_execute to job_complete. */
struct job_result {
	long rc;
	struct smux_error err;
	struct smux_writer *opened;
	struct smux_reader *ropened;
	bool called; /* the backend was called */
};

/* Runs the member call of @job, its writer_lock (if any) held by the
 * caller: the budget starts now, time in the queue is ours, not the
 * member's (a caller sleeping on the queue deadline re-reads it). */
static void job_execute(struct smux__job *job, struct job_result *r)
{
	*r = (struct job_result){0};
	smux_error_clear(&r->err);
	pthread_mutex_lock(&job->lock);
	job->run_ns = smux_now_ns();
	pthread_cond_broadcast(&job->cond);
	pthread_mutex_unlock(&job->lock);
	/*
	 * A job abandoned before it ran does not run, W_CLOSE excepted (it
	 * must not leak the writer). Checked under writer_lock: the caller
	 * closes a writer only after its earlier jobs finished or were
	 * abandoned, so a pwrite that lost the race for the lock against the
	 * close sees its token fired here and never touches the writer.
	 */
	if (job->op != SMUX__OP_W_CLOSE)
		r->rc = smux_ctx_check(&job->wctx, job->bh->name, &r->err);
	r->called = r->rc == 0;
	if (r->rc == 0)
		r->rc = job_call(job, &r->opened, &r->ropened, &r->err);
}

/* Publishes what job_execute yielded to the caller (or drops it when the
 * caller stopped waiting) and lets the job go. */
static void job_complete(struct smux__job *job, struct job_result *r)
{
	struct smux_writer *orphan = NULL;
	struct smux_reader *rorphan = NULL;
	void *zombie;

	pthread_mutex_lock(&job->lock);
	job->rc = r->rc;
	job->err = r->err;
	if (job->abandoned) {
		orphan = r->opened; /* nobody will take them */
		rorphan = r->ropened;
	} else {
		job->new_writer = r->opened;
		job->new_reader = r->ropened;
	}
	job->done = true;
	atomic_store_explicit(&job->done_hint, true, memory_order_release);
	pthread_cond_broadcast(&job->cond);
	/*
	 * The group lives on the caller's stack: touch it only while the
	 * caller still waits, and under job->lock so an abandon cannot
	 * return in between.
	 */
	if (!job->abandoned && job->group) {
		pthread_mutex_lock(&job->group->lock);
		job->group->completed++;
		pthread_cond_broadcast(&job->group->cond);
		pthread_mutex_unlock(&job->group->lock);
	}
	zombie = job->zombie; /* abandoned while it ran: over now */
	job->zombie = NULL;
	pthread_mutex_unlock(&job->lock);
	smux_writer_close(orphan);
	smux_reader_close(rorphan);
	if (zombie)
		job->bh->zhooks->end(zombie, r->called);
	if (job->on_done)
		job->on_done(job->on_done_arg);
	job_put(job);
}

/* Runs @job (counted in bh->running) on worker @self and publishes its
 * outcome; drops the worker's reference. */
static void job_run(struct smux__job *job, struct bh_thread *self)
{
	struct job_result r;

	if (job->writer_lock)
		pthread_mutex_lock(job->writer_lock);
	job_execute(job, &r);
	if (job->writer_lock)
		pthread_mutex_unlock(job->writer_lock);

	/* No longer busy once the caller can see the result: the member
	 * call is over, so a free from here on joins this worker (what is
	 * left to do here never waits for a backend) */
	pthread_mutex_lock(&job->bh->lock);
	job->bh->running--;
	self->busy = false;
	pthread_cond_broadcast(&job->bh->changed);
	pthread_mutex_unlock(&job->bh->lock);
	job_complete(job, &r);
}

/* ---- workers ---- */

static void worker_set_name(const struct smux__bulkhead *bh)
{
	char name[16];

	snprintf(name, sizeof(name), "smux:%s", bh->name);
	pthread_setname_np(pthread_self(), name);
}

static void *worker_main(void *arg)
{
	struct bh_thread *self = arg;
	struct smux__bulkhead *bh = self->bh;
	struct smux__job *job;
	struct smux__orphan *orphan = NULL;
	bool last, detached;

	worker_set_name(bh);
	pthread_mutex_lock(&bh->lock);
	for (;;) {
		int64_t idle_until = smux_now_ns() + BH_IDLE_NS;

		if (!bh->head && !bh->closing && !bh->spinning) {
			/* watch the queue a moment before sleeping (one
			 * worker at a time; the others sleep at once) */
			int64_t spin_until = smux_now_ns() + BH_SPIN_NS;

			bh->idle++; /* a spinning worker is an idle one */
			bh->spinning = true;
			pthread_mutex_unlock(&bh->lock);
			while (atomic_load_explicit(&bh->queued_hint,
						    memory_order_acquire) ==
				       0 &&
			       smux_now_ns() < spin_until)
				cpu_relax();
			pthread_mutex_lock(&bh->lock);
			bh->spinning = false;
			bh->idle--;
		}
		while (!bh->head && !bh->closing) {
			int rc;

			bh->idle++;
			rc = cond_wait_until(&bh->cond, &bh->lock, idle_until);
			bh->idle--;
			if (rc == ETIMEDOUT)
				break;
		}
		job = bh->head;
		if (!job)
			break; /* idle too long, or closing with nothing left */
		queue_unlink(bh, job);
		bh->running++;
		self->busy = true;
		self->run_ns = smux_now_ns();
		pthread_cond_broadcast(&bh->changed);
		pthread_mutex_unlock(&bh->lock);

		job_run(job, self); /* takes running and busy back */

		pthread_mutex_lock(&bh->lock);
	}
	bh->workers--;
	self->exited = true;
	detached = self->detached;
	if (detached)
		orphan = self->orphan;
	pthread_cond_broadcast(&bh->changed);
	last = --bh->refs == 0;
	pthread_mutex_unlock(&bh->lock);
	if (detached)
		free(self); /* off the list: nobody else sees it */
	if (last)
		bh_destroy(bh);
	if (orphan)
		smux__orphan_leave(
			orphan); /* parks if the process is exiting */
	return NULL;
}

/* Starts one joinable worker (on bh->threads) with asynchronous signals
 * blocked (the daemon's main thread handles those). bh->lock held. 0 or
 * -errno. */
static int worker_spawn(struct smux__bulkhead *bh)
{
	static const int sync_signals[] = {SIGSEGV, SIGBUS,  SIGFPE,
					   SIGILL,  SIGTRAP, SIGABRT};
	struct bh_thread *t = calloc(1, sizeof(*t));
	pthread_attr_t attr;
	sigset_t mask, old;
	int rc;

	if (!t)
		return -ENOMEM;
	t->bh = bh;
	sigfillset(&mask);
	for (size_t i = 0; i < sizeof(sync_signals) / sizeof(*sync_signals);
	     i++)
		sigdelset(&mask, sync_signals[i]);
	rc = pthread_attr_init(&attr);
	if (rc) {
		free(t);
		return -rc;
	}
	pthread_sigmask(SIG_SETMASK, &mask, &old);
	bh->workers++;
	bh->refs++;
	rc = pthread_create(&t->tid, &attr, worker_main, t);
	if (rc) {
		bh->workers--;
		bh->refs--;
		free(t);
	} else {
		t->next = bh->threads;
		bh->threads = t;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -rc;
}

/* ---- calls on the caller's thread ---- */

/* The calls that run on the caller's thread: metadata, and reads and
 * writes of up to 64 KiB through a writer or reader (a page-cache copy).
 * Not a stream (GET, PUT) or a COPY (a whole file's I/O in one call), a
 * sync or a commit (an fsync: a mirror's replicas flush in parallel on
 * workers, and a replica whose flush outlasts backend_timeout is left
 * out and hinted instead of holding the caller; tried in session 45:
 * sqlite's 1000 inserts 1.94 -> 1.80 s on one copy, reverted for
 * those), a fallocate, a statfs or a health check (the probe must answer
 * within its deadline whatever the member does). */
static bool op_inlines(enum smux__op op, size_t len)
{
	switch (op) {
	case SMUX__OP_W_PWRITE:
	case SMUX__OP_W_PREAD:
	case SMUX__OP_R_PREAD:
		return len <= BH_INLINE_MAX_BYTES;
	case SMUX__OP_HEAD:
	case SMUX__OP_DEL:
	case SMUX__OP_LIST:
	case SMUX__OP_RENAME:
	case SMUX__OP_SETATTR:
	case SMUX__OP_WRITER_OPEN:
	case SMUX__OP_W_TRUNCATE:
	case SMUX__OP_W_CLOSE:
	case SMUX__OP_READER_OPEN:
	case SMUX__OP_LINK:
	case SMUX__OP_GETXATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_LISTXATTR:
	case SMUX__OP_REMOVEXATTR:
	case SMUX__OP_EXCHANGE:
		return true;
	default:
		return false;
	}
}

/* Whether a call of @bh's member has been running for longer than
 * BH_INLINE_STUCK_NS, on a worker or on a caller's thread. bh->lock
 * held. */
static bool bh_stuck_locked(const struct smux__bulkhead *bh, int64_t now)
{
	for (const struct bh_thread *t = bh->threads; t; t = t->next)
		if (t->busy && now - t->run_ns > BH_INLINE_STUCK_NS)
			return true;
	for (const struct bh_inline *r = bh->inlined; r; r = r->next)
		if (now - r->start_ns > BH_INLINE_STUCK_NS)
			return true;
	return false;
}

/*
 * Whether @job runs on the caller's thread: nothing queued before it
 * (it would overtake), no call of the member stuck, and its writer (if
 * any) not in another call (its worker may be stuck there: we never wait
 * for it here). On true, @rec is on bh->inlined, counted as running, and
 * the writer's lock is held. bh->lock held.
 */
static bool inline_begin(struct smux__bulkhead *bh, struct smux__job *job,
			 struct bh_inline *rec)
{
	int64_t now;

	if (bh->head)
		return false;
	now = smux_now_ns();
	if (bh_stuck_locked(bh, now))
		return false;
	if (job->writer_lock && pthread_mutex_trylock(job->writer_lock) != 0)
		return false;
	rec->start_ns = now;
	rec->next = bh->inlined;
	bh->inlined = rec;
	bh->running++;
	return true;
}

/* Runs @job, which inline_begin admitted, on this thread. */
static void inline_run(struct smux__bulkhead *bh, struct smux__job *job,
		       struct bh_inline *rec)
{
	struct bh_inline **pp;
	struct job_result r;

	job_execute(job, &r);
	if (job->writer_lock)
		pthread_mutex_unlock(job->writer_lock);
	pthread_mutex_lock(&bh->lock);
	for (pp = &bh->inlined; *pp != rec; pp = &(*pp)->next)
		;
	*pp = rec->next;
	bh->running--;
	pthread_cond_broadcast(&bh->changed);
	pthread_mutex_unlock(&bh->lock);
	job_complete(job, &r);
}

/* ---- the caller's side ---- */

struct smux__job *smux__bulkhead_start(struct smux__bulkhead *bh,
				       const struct smux_ctx *ctx,
				       int64_t timeout_ms,
				       const struct smux__call *call,
				       struct smux__group *g)
{
	struct smux__job *job = job_new();
	struct bh_thread *retired;
	struct bh_inline rec;
	bool may_inline;

	if (!job)
		return NULL;
	if (job_fill(job, ctx, timeout_ms, call))
		goto out_free;
	job->group = g;
	/* not once the caller gave up (a queued job then ends at once) */
	may_inline = op_inlines(call->op, call->len) && !job->streaming &&
		     call->backend &&
		     (smux_backend_caps(call->backend) & SMUX_CAP_INLINE) &&
		     (!ctx || smux_ctx_state(ctx) == SMUX_CANCEL_NONE);

	pthread_mutex_lock(&bh->lock);
	/* workers that retired when idle: joined outside the lock below */
	retired = threads_take_exited(bh);
	if (bh->closing)
		goto out_unlock;
	job->bh = bh;
	bh->refs++;
	if (may_inline && inline_begin(bh, job, &rec)) {
		pthread_mutex_unlock(&bh->lock);
		threads_join(retired);
		inline_run(bh, job, &rec); /* done: finish returns at once */
		return job;
	}
	queue_push(bh, job);
	if (bh->queued > bh->idle && bh->workers < bh->max_inflight &&
	    worker_spawn(bh) && bh->workers == 0) {
		/* No thread will ever run it: fail like ENOMEM. */
		queue_unlink(bh, job);
		bh->refs--;
		job->bh = NULL;
		goto out_unlock;
	}
	/* Wakes a sleeping worker even while one spins: a spinner that
	 * yielded its CPU under load may run again only after every other
	 * runnable task had its turn, a woken one is scheduled at once;
	 * whichever comes second finds nothing and goes back. */
	pthread_mutex_unlock(&bh->lock);
	/* After the unlock: a spinning worker that saw the job then takes
	 * the lock at once, instead of sleeping on it while this thread is
	 * in the futex call, and waking 10-20 us later (measured here: the
	 * average wait of a write job fell from 18 to 9 us, sqlite's 1000
	 * inserts from 1.76 to 1.45 s). The job's reference keeps @bh. */
	pthread_cond_signal(&bh->cond);
	threads_join(retired);
	return job;

out_unlock:
	pthread_mutex_unlock(&bh->lock);
	threads_join(retired);
out_free:
	job_free(job);
	return NULL;
}

bool smux__job_done(struct smux__job *job)
{
	bool done;

	pthread_mutex_lock(&job->lock);
	done = job->done;
	pthread_mutex_unlock(&job->lock);
	return done;
}

int64_t smux__job_deadline(struct smux__job *job)
{
	int64_t d;

	pthread_mutex_lock(&job->lock);
	d = job_deadline_locked(job, NULL);
	pthread_mutex_unlock(&job->lock);
	return d;
}

/* Takes @job off its queue if no worker picked it yet (bh->lock). */
static bool job_dequeue(struct smux__job *job)
{
	struct smux__bulkhead *bh = job->bh;
	bool removed = false;

	pthread_mutex_lock(&bh->lock);
	if (job->in_queue) {
		queue_unlink(bh, job);
		removed = true;
	}
	pthread_mutex_unlock(&bh->lock);
	return removed;
}

/*
 * The keys a mutating @job changes on its member (zombie tracking): *@k2
 * only for a rename (its destination) or an exchange (the other name).
 * False for a call that changes nothing.
 */
static bool job_changes(const struct smux__job *job, const char **k1,
			const char **k2)
{
	*k2 = NULL;
	switch (job->op) {
	case SMUX__OP_PUT:
	case SMUX__OP_DEL:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
	case SMUX__OP_WRITER_OPEN:
		*k1 = job->key;
		break;
	case SMUX__OP_COPY:
	case SMUX__OP_LINK:
		*k1 = job->key2;
		break;
	case SMUX__OP_RENAME:
	case SMUX__OP_EXCHANGE:
		*k1 = job->key;
		*k2 = job->key2;
		break;
	case SMUX__OP_W_PWRITE:
	case SMUX__OP_W_TRUNCATE:
	case SMUX__OP_W_FALLOCATE:
	case SMUX__OP_W_COMMIT:
		/* the caller's writer lives until the job is over */
		*k1 = job->writer ? job->writer->key : NULL;
		break;
	default:
		return false;
	}
	return *k1 != NULL;
}

/* True when @job changes an object that was there: a setattr or an
 * xattr change, or a writer's call when the writer found its object (an
 * edit), not a call that may have made it. */
static bool job_edits(const struct smux__job *job)
{
	switch (job->op) {
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
		return true;
	case SMUX__OP_W_PWRITE:
	case SMUX__OP_W_TRUNCATE:
	case SMUX__OP_W_FALLOCATE:
	case SMUX__OP_W_COMMIT:
		return job->writer && job->writer->found;
	default:
		return false;
	}
}

void smux__job_abandon(struct smux__job *job, enum smux_cancel_reason why)
{
	struct smux_writer *orphan = NULL;
	struct smux_reader *rorphan = NULL;
	const char *k1, *k2;
	void *zombie = NULL;

	pthread_mutex_lock(&job->lock);
	job->abandoned = true;
	/* a change the worker may still make: a zombie until it is over */
	if (!job->done && job->bh->zhooks && job_changes(job, &k1, &k2))
		job->zombie = job->bh->zhooks->begin(
			job->bh->zarg, job->bh->name, k1, k2, job_edits(job));
	/* A writer or reader opened before we gave up is ours to close. */
	orphan = job->new_writer;
	job->new_writer = NULL;
	rorphan = job->new_reader;
	job->new_reader = NULL;
	pthread_mutex_unlock(&job->lock);
	smux_cancel_fire(&job->token, why);
	smux_writer_close(orphan);
	smux_reader_close(rorphan);
	/* A queued job need not wait for a worker (a hung backend would
	 * otherwise pile them up); W_CLOSE still runs to free the writer. */
	if (job->op != SMUX__OP_W_CLOSE && job_dequeue(job)) {
		/* it will never run: over for the worker */
		pthread_mutex_lock(&job->lock);
		zombie = job->zombie;
		job->zombie = NULL;
		pthread_mutex_unlock(&job->lock);
		if (zombie)
			job->bh->zhooks->end(zombie, false);
		if (job->on_done)
			job->on_done(job->on_done_arg);
		job_put_n(job, 2); /* ours and the worker's */
	} else {
		job_put(job);
	}
}

/* Copies a done job's outputs to the caller's pointers (job->lock held). */
static void job_copy_out(struct smux__job *job)
{
	long rc = job->rc;

	switch (job->op) {
	case SMUX__OP_GET:
	case SMUX__OP_PUT:
	case SMUX__OP_HEAD:
	case SMUX__OP_W_COMMIT:
		if (rc == 0 && job->info_out)
			*job->info_out = job->info;
		break;
	case SMUX__OP_STATFS:
		if (rc == 0 && job->statfs_out)
			*job->statfs_out = job->statfs;
		break;
	case SMUX__OP_WRITER_OPEN:
		if (job->writer_out) {
			*job->writer_out = job->new_writer;
			job->new_writer = NULL;
		}
		break;
	case SMUX__OP_READER_OPEN:
		if (rc == 0 && job->reader_out) {
			*job->reader_out = job->new_reader;
			job->new_reader = NULL;
		}
		break;
	case SMUX__OP_W_PREAD:
	case SMUX__OP_R_PREAD:
		if (rc > 0 && job->rbuf_out)
			memcpy(job->rbuf_out, job->buf, (size_t)rc);
		if (job->nread_out)
			*job->nread_out = rc;
		break;
	case SMUX__OP_GETXATTR:
	case SMUX__OP_LISTXATTR:
		/* a length query (len 0) copies nothing */
		if (rc > 0 && job->rbuf_out && (size_t)rc <= job->len)
			memcpy(job->rbuf_out, job->buf, (size_t)rc);
		if (job->nread_out)
			*job->nread_out = rc;
		break;
	default:
		break;
	}
}

/* The error of a caller that stopped waiting for @why (@kind: which
 * deadline, when it was one). */
static long stop_error(struct smux__job *job, enum smux_cancel_reason why,
		       enum job_stop_kind kind, struct smux_error *err)
{
	const char *name = job->bh->name;
	long long ms = (long long)(job->budget_ns / NS_PER_MS);
	long rc;

	switch (kind) {
	case JOB_BUDGET:
		return smux_error_set(err, SMUX_E_BACKEND_TIMEOUT, name,
				      "no answer within %lld ms", ms);
	case JOB_STALLED:
		return smux_error_set(err, SMUX_E_BACKEND_TIMEOUT, name,
				      "the stream moved no byte for %lld ms",
				      ms);
	case JOB_QUEUED:
		/* a timeout for the caller, marked as never started: no
		 * member's fault (smux__bulkhead_unstarted) */
		rc = smux_error_set(err, SMUX_E_BACKEND_TIMEOUT, name,
				    "queued %lld ms behind max_inflight %u "
				    "calls; never started",
				    ms, job->bh->max_inflight);
		if (err) {
			err->has_cause = true;
			err->cause.code = SMUX_E_BACKEND_ABORTED;
			err->cause.sys_errno =
				smux_code_errno(SMUX_E_BACKEND_ABORTED);
			snprintf(err->cause.backend, sizeof(err->cause.backend),
				 "%s", name);
			snprintf(err->cause.message, sizeof(err->cause.message),
				 "withdrawn from the queue");
		}
		return rc;
	case JOB_CALLER:
		return smux_error_set(err, SMUX_E_BACKEND_TIMEOUT, name,
				      "the caller's deadline passed");
	case JOB_WAIT:
		break;
	}
	switch (why) {
	case SMUX_CANCEL_TIMEOUT:
		return smux_error_set(err, SMUX_E_BACKEND_TIMEOUT, name,
				      "the caller's deadline passed");
	case SMUX_CANCEL_DRAIN:
		return smux_error_set(err, SMUX_E_BACKEND_DRAINING, name,
				      "cancelled: backend is draining");
	case SMUX_CANCEL_ABORT:
	default:
		return smux_error_set(err, SMUX_E_BACKEND_ABORTED, name,
				      "cancelled by the caller");
	}
}

static bool ctx_has_token(const struct smux_ctx *ctx)
{
	return ctx->cancel[0] != NULL;
}

bool smux__bulkhead_unstarted(const struct smux_error *err)
{
	return err && err->e.code == SMUX_E_BACKEND_TIMEOUT && err->has_cause &&
	       err->cause.code == SMUX_E_BACKEND_ABORTED;
}

long smux__job_finish(struct smux__job *job, struct smux_error *err)
{
	enum smux_cancel_reason why = SMUX_CANCEL_NONE;
	enum job_stop_kind kind = JOB_WAIT;
	struct smux_writer *orphan;
	struct smux_reader *rorphan;
	long rc;
	int64_t spin_until = smux_now_ns() + BH_SPIN_NS;

	/* most local calls finish within the spin: no sleep, no wake-up */
	while (!atomic_load_explicit(&job->done_hint, memory_order_acquire) &&
	       smux_now_ns() < spin_until)
		cpu_relax();
	pthread_mutex_lock(&job->lock);
	while (!job->done) {
		enum job_stop_kind k;
		int64_t now = smux_now_ns(),
			until = job_deadline_locked(job, &k);

		if (now >= until) {
			kind = k;
			why = SMUX_CANCEL_TIMEOUT;
			break;
		}
		why = smux_ctx_state(&job->caller_ctx);
		if (why != SMUX_CANCEL_NONE)
			break;
		if (ctx_has_token(&job->caller_ctx) && until - now > BH_POLL_NS)
			until = now + BH_POLL_NS;
		cond_wait_until(&job->cond, &job->lock, until);
	}
	if (job->done) {
		job_copy_out(job);
		rc = job->rc;
		if (err)
			*err = job->err;
		orphan = job->new_writer; /* opened, but no writer_out */
		job->new_writer = NULL;
		rorphan = job->new_reader; /* likewise */
		job->new_reader = NULL;
		pthread_mutex_unlock(&job->lock);
		smux_writer_close(orphan);
		smux_reader_close(rorphan);
		job_put(job);
		return rc;
	}
	pthread_mutex_unlock(&job->lock);

	rc = stop_error(job, why, kind, err);
	if (job->writer_out)
		*job->writer_out = NULL;
	if (job->nread_out)
		*job->nread_out = rc;
	smux__job_abandon(job, why);
	return rc;
}

long smux__bulkhead_run(struct smux__bulkhead *bh, const struct smux_ctx *ctx,
			int64_t timeout_ms, const struct smux__call *call,
			struct smux_error *err)
{
	struct smux__job *job =
		smux__bulkhead_start(bh, ctx, timeout_ms, call, NULL);

	if (!job)
		return smux_error_set(err, SMUX_E_NO_MEMORY, bh->name,
				      "cannot queue a call");
	return smux__job_finish(job, err);
}
