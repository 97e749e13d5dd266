// SPDX-License-Identifier: MIT
/*
 * bunny_seen.c - the bunny backend's memory of the files its listings
 * showed with a Checksum (Length, LastChanged, Checksum), so that a
 * whole-object get of one needs no DESCRIBE first (bunny_get.c): the GET
 * is hashed as it passes, and its bytes are taken only when their SHA-256
 * is the noted Checksum and their count the noted Length; any other
 * answer (another version, a directory, an error) is rewound and the get
 * starts again with the DESCRIBE. So a note is a hint, never a fact: a
 * stale one costs the GET it sent. What a note cannot tell is a change of
 * LastChanged alone (the same bytes uploaded again by another client):
 * such a get reports the listed mtime, as the listing did.
 *
 * The notes are core/keynotes.h's (BUNNY_SEEN_SLOTS slots by key hash, a
 * colliding key takes the slot: a lost hint), good for BUNNY_SEEN_NS. The
 * backend's own put, delete and rename drop the notes of the keys they
 * change.
 */
#include <string.h>

#include "backends/bunny_internal.h"

/* A note: what the listing said of one file. */
struct bunny_seen {
	uint64_t length;
	int64_t mtime_ns;
	char checksum[65];
};

int smux__bunny_seen_init(struct bunnyb *z)
{
	z->seen = smux__keynotes_new(BUNNY_SEEN_SLOTS,
				     sizeof(struct bunny_seen), BUNNY_SEEN_NS);
	return z->seen ? 0 : -1;
}

void smux__bunny_seen_free(struct bunnyb *z)
{
	smux__keynotes_free(z->seen);
	z->seen = NULL;
}

void smux__bunny_seen_note(struct bunnyb *z, const char *key,
			   const struct smux__bunny_obj *o)
{
	struct bunny_seen n;

	if (!o || o->is_dir || strlen(o->checksum) != 64) {
		smux__keynotes_put(z->seen, key, NULL, NULL);
		return;
	}
	memset(&n, 0, sizeof(n));
	n.length = o->length;
	n.mtime_ns = o->mtime_ns;
	memcpy(n.checksum, o->checksum, sizeof(n.checksum));
	smux__keynotes_put(z->seen, key, &n, NULL);
}

bool smux__bunny_seen_get(struct bunnyb *z, const char *key,
			  struct smux__bunny_obj *o)
{
	struct bunny_seen n;

	if (!smux__keynotes_get(z->seen, key, &n))
		return false;
	memset(o, 0, sizeof(*o));
	o->length = n.length;
	o->mtime_ns = n.mtime_ns;
	memcpy(o->checksum, n.checksum, sizeof(o->checksum));
	return true;
}
