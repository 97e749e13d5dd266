/* SPDX-License-Identifier: MIT */
/*
 * eventlog.c - .smux/events: the mux tree's recent events as JSON lines
 * (issue 11 item 2), readable as a growing file.
 *
 * Owns: a ring of the last EVLOG_LINES events, each rendered once (the
 * event's JSON, smux_event_to_json, with "seq": 1, 2, ... added), and the
 * poll handles of readers waiting for the next one. The file is the
 * stream of every line since the mount: a line's bytes sit at the same
 * offset for every reader, and the file's size is the stream's length so
 * far, so `tail -f` (which reads its last lines near the end, then reads
 * again whenever the size grew) and `cat` see it as a log file. Lines older
 * than the ring are gone: a reader asking for them gets the stream from the
 * oldest line kept, and from then on its offsets are shifted by what it
 * skipped (so `cat` from 0 reads the ring, then follows). poll(2) says
 * POLLIN once a line past the reader's last read exists; the thread that
 * adds a line takes the waiting readers' poll handles under the lock and
 * notifies them after releasing it.
 *
 * Locks: evlog->lock protects the ring, the totals, the waiters list and
 * every stream handle's shift, pos and poll handle. Taken on the event
 * bus's dispatcher thread (never an I/O path) and by readers of the file.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/fs.h"

#define EVLOG_LINES 1024
/* poll handles taken off the waiters list per batch (each reader holds
 * at most one; batches repeat until none is left) */
#define EVLOG_NOTIFY_MAX 64

struct evlog_line {
	uint64_t seq;
	uint64_t off; /* where the line starts in the stream */
	size_t len;   /* with its newline */
	char *text;
};

struct smuxfs_eventlog {
	pthread_mutex_t lock;
	struct evlog_line ring[EVLOG_LINES];
	unsigned head;		   /* index of the oldest line */
	unsigned count;		   /* lines in the ring */
	uint64_t seq;		   /* last seq given */
	uint64_t total;		   /* bytes in the stream so far */
	struct smuxfs_fh *waiters; /* handles with a poll handle */
	int sub;		   /* the bus subscription id */
	struct smux_events *bus;
};

/* @j with "seq" as one JSON line (newline included), or NULL. */
static char *evlog_render(json_t *j, uint64_t seq, size_t *len)
{
	char *out = NULL;

	if (j &&
	    json_object_set_new(j, "seq", json_integer((json_int_t)seq)) == 0)
		out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (out) {
		size_t n = strlen(out);
		char *t = realloc(out, n + 2);

		if (!t) {
			free(out);
			return NULL;
		}
		t[n++] = '\n';
		t[n] = '\0';
		out = t;
		*len = n;
	}
	return out;
}

void (*smuxfs__evlog_notify_hook)(struct fuse_pollhandle *ph);

bool smuxfs__eventlog_locked(struct smuxfs *fs)
{
	if (pthread_mutex_trylock(&fs->evlog->lock) != 0)
		return true;
	pthread_mutex_unlock(&fs->evlog->lock);
	return false;
}

/* Takes every waiting reader's poll handle off the waiters list (lock
 * held) into @phs (at most @max) and returns how many: evlog_notify sends
 * them after the lock is released. */
static unsigned evlog_take_waiters(struct smuxfs_eventlog *el,
				   struct fuse_pollhandle **phs, unsigned max)
{
	unsigned n = 0;

	while (el->waiters && n < max) {
		struct smuxfs_fh *fh = el->waiters;

		el->waiters = fh->ev_next;
		phs[n++] = fh->ev_ph;
		fh->ev_ph = NULL;
		fh->ev_waiting = false;
		fh->ev_next = NULL;
	}
	return n;
}

/* Notifies (and frees) poll handles taken off the list, lock not held: a
 * notification writes to /dev/fuse, and the ring's readers and the bus's
 * dispatcher must not wait behind it. */
static void evlog_notify(struct fuse_pollhandle **phs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (smuxfs__evlog_notify_hook) {
			smuxfs__evlog_notify_hook(phs[i]);
		} else {
			fuse_notify_poll(phs[i]);
			fuse_pollhandle_destroy(phs[i]);
		}
	}
}

/* Appends @j (with its "seq") to the ring and wakes the readers. */
static void evlog_append(struct smuxfs_eventlog *el, json_t *j)
{
	struct fuse_pollhandle *phs[EVLOG_NOTIFY_MAX];
	struct evlog_line *l;
	size_t len = 0;
	unsigned n;
	char *text;

	pthread_mutex_lock(&el->lock);
	text = evlog_render(j, el->seq + 1, &len);
	if (!text) {
		pthread_mutex_unlock(&el->lock);
		return; /* out of memory: this event is not kept */
	}
	if (el->count == EVLOG_LINES) {
		free(el->ring[el->head].text);
		el->head = (el->head + 1) % EVLOG_LINES;
		el->count--;
	}
	l = &el->ring[(el->head + el->count) % EVLOG_LINES];
	l->seq = ++el->seq;
	l->off = el->total;
	l->len = len;
	l->text = text;
	el->count++;
	el->total += len;
	/* every waiter, a batch at a time; one that polls meanwhile sees
	 * the new line and does not wait */
	for (;;) {
		n = evlog_take_waiters(el, phs, EVLOG_NOTIFY_MAX);
		pthread_mutex_unlock(&el->lock);
		if (!n)
			break;
		evlog_notify(phs, n);
		pthread_mutex_lock(&el->lock);
	}
}

/* The bus subscriber: the event's JSON (smux_event_to_json) in the ring. */
static void evlog_add(void *arg, const struct smux_event *ev)
{
	char *text = smux_event_to_json(ev);
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;

	free(text);
	if (j)
		evlog_append(arg, j);
	json_decref(j);
}

void smuxfs_eventlog_note(struct smuxfs *fs, json_t *j)
{
	struct timespec now;

	if (!fs->evlog || !j)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	json_object_set_new(j, "at",
			    json_integer((json_int_t)now.tv_sec * 1000 +
					 now.tv_nsec / 1000000));
	evlog_append(fs->evlog, j);
}

int smuxfs_eventlog_start(struct smuxfs *fs)
{
	struct smuxfs_eventlog *el;
	int id;

	if (!fs->events)
		return 0;
	el = calloc(1, sizeof(*el));
	if (!el)
		return -ENOMEM;
	pthread_mutex_init(&el->lock, NULL);
	el->bus = fs->events;
	id = smux_events_subscribe(fs->events, evlog_add, el);
	if (id < 0) {
		pthread_mutex_destroy(&el->lock);
		free(el);
		return id;
	}
	el->sub = id;
	fs->evlog = el;
	return 0;
}

void smuxfs_eventlog_stop(struct smuxfs *fs)
{
	struct smuxfs_eventlog *el = fs->evlog;

	if (!el)
		return;
	smux_events_unsubscribe(el->bus, el->sub);
	for (unsigned i = 0; i < el->count; i++)
		free(el->ring[(el->head + i) % EVLOG_LINES].text);
	pthread_mutex_destroy(&el->lock);
	free(el);
	fs->evlog = NULL;
}

uint64_t smuxfs_eventlog_size(struct smuxfs *fs)
{
	struct smuxfs_eventlog *el = fs->evlog;
	uint64_t n;

	if (!el)
		return 0;
	pthread_mutex_lock(&el->lock);
	n = el->total;
	pthread_mutex_unlock(&el->lock);
	return n;
}

/* The first line of the ring that ends past @off (lock held); el->count
 * when none does. Lines are in stream order, so a binary search. */
static unsigned evlog_find(const struct smuxfs_eventlog *el, uint64_t off)
{
	unsigned lo = 0, hi = el->count;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct evlog_line *l =
			&el->ring[(el->head + mid) % EVLOG_LINES];

		if (l->off + l->len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

long smuxfs_eventlog_read(struct smuxfs *fs, struct smuxfs_fh *fh, char *buf,
			  size_t size, uint64_t off)
{
	struct smuxfs_eventlog *el = fs->evlog;
	size_t done = 0;
	uint64_t at;
	unsigned i;

	if (!el)
		return 0;
	pthread_mutex_lock(&el->lock);
	at = off + fh->ev_shift;
	if (el->count && at < el->ring[el->head].off) {
		/* gone from the ring: read on from the oldest line kept */
		fh->ev_shift += el->ring[el->head].off - at;
		at = el->ring[el->head].off;
	}
	for (i = evlog_find(el, at); i < el->count && done < size; i++) {
		const struct evlog_line *l =
			&el->ring[(el->head + i) % EVLOG_LINES];
		size_t skip = at > l->off ? (size_t)(at - l->off) : 0;
		size_t n = l->len - skip;

		if (n > size - done)
			n = size - done;
		memcpy(buf + done, l->text + skip, n);
		done += n;
		at += n;
	}
	fh->ev_pos = at;
	pthread_mutex_unlock(&el->lock);
	return (long)done;
}

unsigned smuxfs_eventlog_poll(struct smuxfs *fs, struct smuxfs_fh *fh,
			      struct fuse_pollhandle *ph)
{
	struct smuxfs_eventlog *el = fs->evlog;
	unsigned revents = 0;

	if (!el) {
		if (ph)
			fuse_pollhandle_destroy(ph);
		return 0;
	}
	pthread_mutex_lock(&el->lock);
	if (el->total > fh->ev_pos)
		revents = POLLIN | POLLRDNORM;
	if (ph && revents) {
		fuse_pollhandle_destroy(ph); /* ready now: nothing to notify */
	} else if (ph) {
		/* the newest poll handle of a reader replaces its older one */
		if (fh->ev_ph)
			fuse_pollhandle_destroy(fh->ev_ph);
		fh->ev_ph = ph;
		if (!fh->ev_waiting) {
			fh->ev_next = el->waiters;
			el->waiters = fh;
			fh->ev_waiting = true;
		}
	}
	pthread_mutex_unlock(&el->lock);
	return revents;
}

void smuxfs_eventlog_close(struct smuxfs *fs, struct smuxfs_fh *fh)
{
	struct smuxfs_eventlog *el = fs->evlog;
	struct smuxfs_fh **p;

	if (!el || !fh->ev_stream)
		return;
	pthread_mutex_lock(&el->lock);
	if (fh->ev_waiting) {
		for (p = &el->waiters; *p; p = &(*p)->ev_next) {
			if (*p == fh) {
				*p = fh->ev_next;
				break;
			}
		}
		fh->ev_waiting = false;
	}
	if (fh->ev_ph)
		fuse_pollhandle_destroy(fh->ev_ph);
	fh->ev_ph = NULL;
	pthread_mutex_unlock(&el->lock);
}
