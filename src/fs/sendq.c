/* SPDX-License-Identifier: MIT */
/*
 * sendq.c - a bounded queue drained by one sending thread (see sendq.h),
 * shared by webhook.c and otlp.c.
 *
 * Owns: the ring of queued items (conf.max slots), the batch being sent,
 * the thread, the counts.
 * Locks: q->lock guards the ring, stop and the counts; send and free_item
 * run without it, so a producer's push waits only for the ring update.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "fs/sendq.h"

struct smuxfs_sendq {
	struct smuxfs_sendq_conf conf;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	void **ring;
	void **items; /* the batch being sent (the thread's only) */
	unsigned head, count;
	bool stop;
	pthread_t thread;
	struct smuxfs_sendq_counts counts;
};

/* Waits (lock held) until a batch is full, stop, or flush_ms passed. */
static void wait_flush(struct smuxfs_sendq *q)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += q->conf.flush_ms / 1000;
	until.tv_nsec += (long)(q->conf.flush_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	while (!q->stop && q->count < q->conf.batch &&
	       pthread_cond_timedwait(&q->cond, &q->lock, &until) == 0)
		;
}

static void *sendq_main(void *arg)
{
	struct smuxfs_sendq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		unsigned n;
		bool ok;

		if (!q->stop && q->conf.flush_ms && q->count &&
		    q->count < q->conf.batch)
			wait_flush(q); /* a batch fills up, or time is up */
		if (!q->count) {
			if (q->stop)
				break;
			pthread_cond_wait(&q->cond, &q->lock);
			continue;
		}
		n = q->count < q->conf.batch ? q->count : q->conf.batch;
		for (unsigned i = 0; i < n; i++) {
			q->items[i] = q->ring[q->head];
			q->head = (q->head + 1) % q->conf.max;
		}
		q->count -= n;
		pthread_mutex_unlock(&q->lock);
		ok = q->conf.send(q->conf.arg, q->items, n);
		for (unsigned i = 0; i < n; i++)
			q->conf.free_item(q->items[i]);
		pthread_mutex_lock(&q->lock);
		if (ok) {
			q->counts.sent += n;
		} else {
			q->counts.failed += n;
			q->counts.failed_sends++;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int smuxfs_sendq_start(const struct smuxfs_sendq_conf *conf,
		       struct smuxfs_sendq **out)
{
	struct smuxfs_sendq *q;
	pthread_condattr_t ca;

	*out = NULL;
	if (!conf->max || !conf->batch || !conf->send || !conf->free_item)
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->conf = *conf;
	q->ring = calloc(conf->max, sizeof(*q->ring));
	q->items = calloc(conf->batch, sizeof(*q->items));
	if (!q->ring || !q->items) {
		free(q->ring);
		free(q->items);
		free(q);
		return -ENOMEM;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&q->thread, NULL, sendq_main, q) != 0) {
		pthread_cond_destroy(&q->cond);
		pthread_mutex_destroy(&q->lock);
		free(q->ring);
		free(q->items);
		free(q);
		return -EAGAIN;
	}
	*out = q;
	return 0;
}

bool smuxfs_sendq_push(struct smuxfs_sendq *q, void *item)
{
	pthread_mutex_lock(&q->lock);
	if (q->stop || q->count >= q->conf.max) {
		q->counts.dropped++;
		pthread_mutex_unlock(&q->lock);
		q->conf.free_item(item);
		return false;
	}
	q->ring[(q->head + q->count) % q->conf.max] = item;
	q->count++;
	if (!q->conf.flush_ms || q->count == 1 || q->count >= q->conf.batch)
		pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return true;
}

void smuxfs_sendq_counts(struct smuxfs_sendq *q,
			 struct smuxfs_sendq_counts *out)
{
	pthread_mutex_lock(&q->lock);
	*out = q->counts;
	pthread_mutex_unlock(&q->lock);
}

void smuxfs_sendq_stop(struct smuxfs_sendq *q, struct smuxfs_sendq_counts *out)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true; /* what is queued still goes out */
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	if (out)
		*out = q->counts;
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->lock);
	free(q->ring);
	free(q->items);
	free(q);
}
