// SPDX-License-Identifier: MIT
/*
 * swift_absent.c - the swift backend's memory of what it last saw of a
 * key: absent (a HEAD answered 404, its own DELETE) or a plain object,
 * not a large-object manifest (its own plain PUT, a HEAD without
 * X-Static-Large-Object or X-Object-Manifest, a listing entry that is a
 * version it knows: swift_list.c). A hint of which request to send first.
 *
 * Absent: a put of the key goes out with "If-None-Match: *" and without
 * the HEAD that looks for a replaced large object's segments: Swift
 * refuses it (412) when the key exists after all, and the put then does
 * the HEAD and the plain PUT. So that hint saves a request when right and
 * costs one when wrong, never correctness.
 *
 * Plain: a put or a DELETE of the key skips that HEAD (a plain object
 * has no segments). Swift has no condition that says "not a manifest",
 * so this hint is trusted: when another client made the key a large
 * object since the note (at most SWIFT_ABSENT_NS ago), the put or DELETE
 * replaces or removes its manifest and leaves its segments behind, in
 * the segments container, unread by anyone. That is the worst case, and
 * it is the one a HEAD then DELETE has too (another client can write
 * between the two); the note only widens that window from a round trip
 * to seconds, for a name two clients change at once, whose outcome is
 * last-writer-wins anyway. Only storage is lost, never data: what the
 * segments held was replaced or deleted through the mount on purpose.
 *
 * A fixed table of SWIFT_ABSENT_SLOTS slots indexed by the key's FNV-1a
 * hash (a colliding key takes the slot: a lost hint), under its own mutex.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/swift_internal.h"
#include "smux/ctx.h"
#include "smux/mux.h"

int swift__absent_init(struct swiftb *s)
{
	pthread_mutex_init(&s->absent_mu, NULL);
	s->absent = calloc(SWIFT_ABSENT_SLOTS, sizeof(*s->absent));
	return s->absent ? 0 : -1;
}

void swift__absent_free(struct swiftb *s)
{
	free(s->absent);
	s->absent = NULL;
	pthread_mutex_destroy(&s->absent_mu);
}

static uint64_t key_hash(const char *key)
{
	uint64_t h = smux_fnv1a(key, strlen(key));

	return h ? h : 1; /* 0 marks an empty slot */
}

/* Notes @key in @state (@set), or drops its note when it is in @state. */
static void known_note(struct swiftb *s, const char *key,
		       enum swift_known state, bool set)
{
	uint64_t h = key_hash(key);
	struct swift_absent *a;

	if (!s->absent)
		return;
	a = &s->absent[h % SWIFT_ABSENT_SLOTS];
	pthread_mutex_lock(&s->absent_mu);
	if (set) {
		a->hash = h;
		a->state = state;
		a->at_ns = smux_now_ns();
	} else if (a->hash == h && a->state == state) {
		a->hash = 0;
	}
	pthread_mutex_unlock(&s->absent_mu);
}

/* Whether @key was noted in @state within SWIFT_ABSENT_NS. */
static bool known_seen(struct swiftb *s, const char *key,
		       enum swift_known state)
{
	uint64_t h = key_hash(key);
	struct swift_absent *a;
	bool seen;

	if (!s->absent)
		return false;
	a = &s->absent[h % SWIFT_ABSENT_SLOTS];
	pthread_mutex_lock(&s->absent_mu);
	seen = a->hash == h && a->state == state &&
	       smux_now_ns() - a->at_ns < SWIFT_ABSENT_NS;
	pthread_mutex_unlock(&s->absent_mu);
	return seen;
}

void swift__absent_note(struct swiftb *s, const char *key, bool absent)
{
	/* present: an absent note goes, a plain one stands (whoever saw
	 * the key present said nothing of what it is) */
	known_note(s, key, SWIFT_KNOWN_ABSENT, absent);
}

bool swift__absent_seen(struct swiftb *s, const char *key)
{
	return known_seen(s, key, SWIFT_KNOWN_ABSENT);
}

void swift__plain_note(struct swiftb *s, const char *key, bool plain)
{
	known_note(s, key, SWIFT_KNOWN_PLAIN, plain);
}

bool swift__plain_seen(struct swiftb *s, const char *key)
{
	return known_seen(s, key, SWIFT_KNOWN_PLAIN);
}
