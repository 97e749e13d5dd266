// SPDX-License-Identifier: MIT
/*
 * swift_absent.c - the swift backend's memory of keys it saw absent (a
 * HEAD answered 404, its own DELETE): a hint of which put to send first.
 * A put of a key seen absent goes out with "If-None-Match: *" and without
 * the HEAD that looks for a replaced large object's segments: Swift
 * refuses it (412) when the key exists after all, and the put then does
 * the HEAD and the plain PUT. So the hint saves a request when right and
 * costs one when wrong, never correctness.
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

void swift__absent_note(struct swiftb *s, const char *key, bool absent)
{
	uint64_t h = key_hash(key);
	struct swift_absent *a;

	if (!s->absent)
		return;
	a = &s->absent[h % SWIFT_ABSENT_SLOTS];
	pthread_mutex_lock(&s->absent_mu);
	if (absent) {
		a->hash = h;
		a->at_ns = smux_now_ns();
	} else if (a->hash == h) {
		a->hash = 0;
	}
	pthread_mutex_unlock(&s->absent_mu);
}

bool swift__absent_seen(struct swiftb *s, const char *key)
{
	uint64_t h = key_hash(key);
	struct swift_absent *a;
	bool seen;

	if (!s->absent)
		return false;
	a = &s->absent[h % SWIFT_ABSENT_SLOTS];
	pthread_mutex_lock(&s->absent_mu);
	seen = a->hash == h && smux_now_ns() - a->at_ns < SWIFT_ABSENT_NS;
	pthread_mutex_unlock(&s->absent_mu);
	return seen;
}
