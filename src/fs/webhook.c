/* SPDX-License-Identifier: MIT */
/*
 * webhook.c - `[mount] event_webhook = URL`: every event of the mux tree
 * POSTed as one JSON object (the line .smux/events shows, without seq) to
 * URL (issue 11 item 2).
 *
 * Owns: a bounded queue of rendered events and the thread that sends them.
 * The event bus's subscriber only renders and queues (never a network call
 * on the bus's dispatcher, which also feeds .smux/events and the log);
 * when WEBHOOK_QUEUE_MAX events wait, a new one is dropped and counted.
 * The thread POSTs one event per request under a short timeout; an event
 * the receiver refuses or cannot take is dropped and counted, not retried
 * (a receiver that is down must not build a backlog). The counts are
 * logged at unmount.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs/fs.h"

#define WEBHOOK_QUEUE_MAX 1024
#define WEBHOOK_TIMEOUT_S 5L

struct webhook_item {
	char *json;
	struct webhook_item *next;
};

struct smuxfs_webhook {
	char *url;
	struct smux_events *bus;
	int sub;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct webhook_item *head, *tail;
	unsigned queued;
	bool stop;
	pthread_t thread;
	uint64_t sent, dropped, failed;
};

static void webhook_add(void *arg, const struct smux_event *ev)
{
	struct smuxfs_webhook *w = arg;
	struct webhook_item *it;
	char *json = smux_event_to_json(ev);

	if (!json)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->queued >= WEBHOOK_QUEUE_MAX || w->stop ||
	    !(it = calloc(1, sizeof(*it)))) {
		w->dropped++;
		pthread_mutex_unlock(&w->lock);
		free(json);
		return;
	}
	it->json = json;
	if (w->tail)
		w->tail->next = it;
	else
		w->head = it;
	w->tail = it;
	w->queued++;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* POSTs one event; true when the receiver took it (2xx). */
static bool webhook_post(CURL *c, const char *url, const char *json)
{
	struct curl_slist *hdr =
		curl_slist_append(NULL, "Content-Type: application/json");
	long status = 0;

	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, WEBHOOK_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 2L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdr);
	return status >= 200 && status < 300;
}

static void *webhook_main(void *arg)
{
	struct smuxfs_webhook *w = arg;
	CURL *c = curl_easy_init(); /* one connection, kept alive */

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct webhook_item *it;
		bool ok;

		while (!w->head && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		it = w->head;
		if (!it)
			break; /* stopping, nothing left */
		w->head = it->next;
		if (!w->head)
			w->tail = NULL;
		w->queued--;
		pthread_mutex_unlock(&w->lock);
		ok = c && webhook_post(c, w->url, it->json);
		free(it->json);
		free(it);
		pthread_mutex_lock(&w->lock);
		if (ok)
			w->sent++;
		else
			w->failed++;
	}
	pthread_mutex_unlock(&w->lock);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

int smuxfs_webhook_start(struct smuxfs *fs, const char *url)
{
	struct smuxfs_webhook *w;
	int id;

	if (!url || !fs->events)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w || !(w->url = strdup(url))) {
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (pthread_create(&w->thread, NULL, webhook_main, w) != 0) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w->url);
		free(w);
		return -EAGAIN;
	}
	w->bus = fs->events;
	fs->webhook = w;
	id = smux_events_subscribe(fs->events, webhook_add, w);
	if (id < 0) {
		smuxfs_webhook_stop(fs);
		return id;
	}
	w->sub = id;
	return 0;
}

void smuxfs_webhook_stop(struct smuxfs *fs)
{
	struct smuxfs_webhook *w = fs->webhook;

	if (!w)
		return;
	if (w->sub > 0)
		smux_events_unsubscribe(w->bus, w->sub);
	pthread_mutex_lock(&w->lock);
	w->stop = true; /* what is queued still goes out */
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	if (w->dropped || w->failed)
		smux_log(LOG_WARNING,
			 "event_webhook: %llu event(s) sent, %llu dropped "
			 "(queue full), %llu refused or not delivered",
			 (unsigned long long)w->sent,
			 (unsigned long long)w->dropped,
			 (unsigned long long)w->failed);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w->url);
	free(w);
	fs->webhook = NULL;
}
