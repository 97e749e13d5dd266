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
 * Plain: a put or a DELETE of the key skips that HEAD (a plain object has
 * no segments), and a del_many sends it in a bulk delete. Swift has no
 * condition that says "not a manifest", so this hint is trusted: when
 * another client made the key a large object since the note (at most
 * SWIFT_ABSENT_NS ago), the put or DELETE replaces or removes its manifest
 * and leaves its segments behind, in the segments container, unread by
 * anyone. That is the worst case, and it is the one a HEAD then DELETE has
 * too (another client can write between the two); the note only widens
 * that window from a round trip to seconds, for a name two clients change
 * at once, whose outcome is last-writer-wins anyway. Only storage is lost,
 * never data: what the segments held was replaced or deleted through the
 * mount on purpose.
 *
 * The notes are core/keynotes.h's (SWIFT_ABSENT_SLOTS slots by key hash,
 * a colliding key takes the slot: a lost hint), an enum swift_known each.
 */
#include "backends/swift_internal.h"

int swift__absent_init(struct swiftb *s)
{
	s->known = smux__keynotes_new(
		SWIFT_ABSENT_SLOTS, sizeof(enum swift_known), SWIFT_ABSENT_NS);
	return s->known ? 0 : -1;
}

void swift__absent_free(struct swiftb *s)
{
	smux__keynotes_free(s->known);
	s->known = NULL;
}

/* Notes @key in @state (@set), or drops its note when it is in @state. */
static void known_note(struct swiftb *s, const char *key,
		       enum swift_known state, bool set)
{
	smux__keynotes_put(s->known, key, set ? &state : NULL, &state);
}

/* Whether @key was noted in @state within SWIFT_ABSENT_NS. */
static bool known_seen(struct swiftb *s, const char *key,
		       enum swift_known state)
{
	enum swift_known got;

	return smux__keynotes_get(s->known, key, &got) && got == state;
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
