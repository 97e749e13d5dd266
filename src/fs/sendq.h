/* SPDX-License-Identifier: MIT */
/*
 * sendq.h - a bounded queue and the one thread that sends what it holds
 * (sendq.c), for the daemon's exporters that must never block file I/O or
 * the event bus: event_webhook (webhook.c) and OTLP spans (otlp.c).
 *
 * A producer's push never waits: when the queue is full (or stopping) the
 * item is freed and counted as dropped. The thread takes up to `batch`
 * items at a time and hands them to `send`; what `send` could not deliver
 * is counted, never retried (a receiver that is down must not build a
 * backlog). Stop sends what is queued, then joins the thread.
 */
#ifndef SMUXFS_SENDQ_H
#define SMUXFS_SENDQ_H

#include <stdbool.h>
#include <stdint.h>

struct smuxfs_sendq;

struct smuxfs_sendq_conf {
	unsigned max;	/* items that may wait (> 0) */
	unsigned batch; /* items per send call (> 0) */
	/* 0: send as soon as an item waits; else wait until `batch` items
	 * wait or flush_ms passed since the last send */
	unsigned flush_ms;
	/* On the queue's thread: delivers @n items (their order of push);
	 * true when the receiver took them. The items stay the queue's. */
	bool (*send)(void *arg, void **items, unsigned n);
	void (*free_item)(void *item);
	void *arg;
};

struct smuxfs_sendq_counts {
	uint64_t sent;	  /* items delivered */
	uint64_t dropped; /* items refused by push: queue full or stopping */
	uint64_t failed;  /* items send could not deliver */
	uint64_t failed_sends;
};

/* Starts the thread: 0 and *@out, or -EINVAL (a zero max/batch, no
 * send), -ENOMEM, -EAGAIN. */
int smuxfs_sendq_start(const struct smuxfs_sendq_conf *conf,
		       struct smuxfs_sendq **out);
/* Queues @item (taken in every case): false when it was dropped. Never
 * blocks beyond the queue's mutex; safe from any thread. */
bool smuxfs_sendq_push(struct smuxfs_sendq *q, void *item);
/* The counts so far. */
void smuxfs_sendq_counts(struct smuxfs_sendq *q,
			 struct smuxfs_sendq_counts *out);
/* Sends what is queued, stops the thread and frees @q; @out (may be
 * NULL) gets the final counts. NULL is a no-op. */
void smuxfs_sendq_stop(struct smuxfs_sendq *q, struct smuxfs_sendq_counts *out);

#endif
