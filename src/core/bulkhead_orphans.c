/* SPDX-License-Identifier: MIT */
/*
 * bulkhead_orphans.c - worker threads left inside a member call when their
 * bulkhead was freed (core/bulkhead.h), and how the process ends with them.
 *
 * Owns: the process-wide list of orphans and each orphan's record.
 *
 * smux__bulkhead_free never waits for a backend: a worker stuck in a call
 * is left to finish it in the background. Such a worker used to be
 * detached, and nobody knew when it was gone. If the process exited while
 * one was ending - running its thread-local destructors, e.g. OpenSSL's
 * per-thread error state from curl - LeakSanitizer saw that state half
 * freed and reported it (CI, test_s3_faults hung under ASan: 904 bytes,
 * OpenSSL's ERR_STATE, at the unmount of a mount whose health probe was
 * hung on a server that never answers).
 *
 * So orphans stay joinable, on this list. An orphan that finishes marks its
 * record done and returns; the next adopt or bulkhead_new joins it. At
 * exit, an atexit handler ends the list: it joins every orphan already on
 * its way out (prompt: none of them waits for a backend any more), and any
 * orphan that comes back from its call later parks until the process is
 * gone instead of ending. Either way no thread is ending while the process
 * exits, and what a parked or stuck orphan holds stays reachable from its
 * stack.
 *
 * Lock order: a bulkhead's lock, then orphans_lock. No join and no backend
 * call under orphans_lock.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/bulkhead.h"

struct smux__orphan {
	pthread_t tid;		   /* immutable */
	bool done;		   /* protected by orphans_lock */
	struct smux__orphan *next; /* protected by orphans_lock */
};

static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;
/* never signalled: an orphan that finished after the end waits on it */
static pthread_cond_t orphans_park = PTHREAD_COND_INITIALIZER;
static struct smux__orphan *orphans; /* protected by orphans_lock */
static bool orphans_ended;	     /* protected by orphans_lock */
static pid_t orphans_pid;	     /* protected by orphans_lock */
static pthread_once_t orphans_once = PTHREAD_ONCE_INIT;

/* Takes the done orphans off the list. orphans_lock held. */
static struct smux__orphan *take_done(void)
{
	struct smux__orphan **pp = &orphans, *out = NULL;

	while (*pp) {
		struct smux__orphan *o = *pp;

		if (o->done) {
			*pp = o->next;
			o->next = out;
			out = o;
		} else {
			pp = &o->next;
		}
	}
	return out;
}

/* Joins and frees @list: threads past their last call. */
static void join_all(struct smux__orphan *list)
{
	while (list) {
		struct smux__orphan *o = list;

		list = o->next;
		pthread_join(o->tid, NULL);
		free(o);
	}
}

static void orphans_at_exit(void)
{
	struct smux__orphan *done;

	pthread_mutex_lock(&orphans_lock);
	if (orphans_pid != getpid()) {
		/* a forked child: the orphans are the parent's threads */
		pthread_mutex_unlock(&orphans_lock);
		return;
	}
	orphans_ended = true;
	done = take_done();
	pthread_mutex_unlock(&orphans_lock);
	join_all(done);
}

static void register_at_exit(void)
{
	atexit(orphans_at_exit);
}

struct smux__orphan *smux__orphan_adopt(pthread_t tid)
{
	struct smux__orphan *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->tid = tid;
	pthread_once(&orphans_once, register_at_exit);
	pthread_mutex_lock(&orphans_lock);
	orphans_pid = getpid();
	o->next = orphans;
	orphans = o;
	pthread_mutex_unlock(&orphans_lock);
	return o;
}

void smux__orphan_leave(struct smux__orphan *o)
{
	pthread_mutex_lock(&orphans_lock);
	while (orphans_ended)
		pthread_cond_wait(&orphans_park, &orphans_lock);
	o->done = true;
	pthread_mutex_unlock(&orphans_lock);
}

void smux__orphans_reap(void)
{
	struct smux__orphan *done;

	pthread_mutex_lock(&orphans_lock);
	done = orphans_ended ? NULL : take_done();
	pthread_mutex_unlock(&orphans_lock);
	join_all(done);
}
