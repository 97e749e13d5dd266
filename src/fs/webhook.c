/* SPDX-License-Identifier: MIT */
/*
 * webhook.c - `[mount] event_webhook = URL`: every event of the mux tree
 * POSTed as one JSON object (the line .smux/events shows, without seq) to
 * URL (issue 11 item 2).
 *
 * Owns: the URL, the bus subscription and the sending thread's curl
 * handle; the bounded queue and the thread are a sendq (sendq.c). The
 * event bus's subscriber only renders and queues (never a network call
 * on the bus's dispatcher, which also feeds .smux/events and the log);
 * when WEBHOOK_QUEUE_MAX events wait, a new one is dropped and counted.
 * The thread POSTs one event per request under a short timeout; an event
 * the receiver refuses or cannot take is dropped and counted, not retried
 * (a receiver that is down must not build a backlog). The counts are
 * logged at unmount.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs/fs.h"
#include "fs/sendq.h"

#define WEBHOOK_QUEUE_MAX 1024
#define WEBHOOK_TIMEOUT_S 5L

struct smuxfs_webhook {
	char *url;
	struct smux_events *bus;
	int sub;
	struct smuxfs_sendq *q;
	CURL *curl; /* the sending thread's, kept alive between events */
};

/* The bus subscriber: renders and queues, never sends. */
static void webhook_add(void *arg, const struct smux_event *ev)
{
	struct smuxfs_webhook *w = arg;
	char *json = smux_event_to_json(ev);

	if (json)
		smuxfs_sendq_push(w->q, json);
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

/* sendq's send, on its thread: one event per request (batch 1). */
static bool webhook_send(void *arg, void **items, unsigned n)
{
	struct smuxfs_webhook *w = arg;
	bool ok = true;

	if (!w->curl)
		w->curl = curl_easy_init();
	for (unsigned i = 0; i < n; i++)
		ok = w->curl && webhook_post(w->curl, w->url, items[i]) && ok;
	return ok;
}

int smuxfs_webhook_start(struct smuxfs *fs, const char *url)
{
	struct smuxfs_sendq_conf qc = {.max = WEBHOOK_QUEUE_MAX,
				       .batch = 1,
				       .send = webhook_send,
				       .free_item = free};
	struct smuxfs_webhook *w;
	int id, rc;

	if (!url || !fs->events)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w || !(w->url = strdup(url))) {
		free(w);
		return -ENOMEM;
	}
	qc.arg = w;
	rc = smuxfs_sendq_start(&qc, &w->q);
	if (rc) {
		free(w->url);
		free(w);
		return rc;
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
	struct smuxfs_sendq_counts n;

	if (!w)
		return;
	if (w->sub > 0)
		smux_events_unsubscribe(w->bus, w->sub);
	smuxfs_sendq_stop(w->q, &n); /* what is queued still goes out */
	if (n.dropped || n.failed)
		smux_log(LOG_WARNING,
			 "event_webhook: %llu event(s) sent, %llu dropped "
			 "(queue full), %llu refused or not delivered",
			 (unsigned long long)n.sent,
			 (unsigned long long)n.dropped,
			 (unsigned long long)n.failed);
	if (w->curl)
		curl_easy_cleanup(w->curl);
	free(w->url);
	free(w);
	fs->webhook = NULL;
}
