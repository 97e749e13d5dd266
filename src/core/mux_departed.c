/* SPDX-License-Identifier: MIT */
/*
 * mux_departed.c - keys whose latest write left the mux with a removed
 * replica (mirror, shield).
 *
 * A replica that took a write its peers missed is the only one holding
 * the key's latest version; its peers have hints for the key. Removing it
 * is allowed (an operator takes a member out; test_mux_fanout removes such
 * members on purpose), but then no member of the view holds that version,
 * and a member rejoining meanwhile could not tell: its resync found every
 * peer stale for the key, inferred that its own old copy was the latest
 * (mux_rejoin.c peer_has_latest: right only when it is the member that
 * left with the write) and kept it without a hint. Reads served that old
 * copy, the peers' hints were replayed from it, and when the holder came
 * back its resync copied the old version over the only latest one (issue
 * 9: the storm's "two rejoins with only copy" and "sole holder removed
 * while another rejoins").
 *
 * So smux_mux_remove notes here, for each key the leaving replica holds
 * the only latest copy of, the replica's name. While the note stands, a
 * rejoining member other than that replica counts a peer as holding the
 * latest write (it gets a hint: it serves no read of the key, and its
 * replay waits for a source); the replica itself, added back, keeps its
 * copy, and the others' hints are replayed from it. The key is
 * unavailable (not stale) until then. A note ends when a write of the key
 * reaches a member (smux__replica_wrote: that write is the latest now)
 * and when its replica's resync is over.
 *
 * Journaled with the hints (mux_notes.c): a note is durable before
 * smux_mux_remove returns, and is loaded again at open. Kept in memory
 * only, the notes were gone after a restart, and the resyncs fell back to
 * what the hints say - r2's old copy served and copied over the write r1
 * left with (test_mux_notes_restart).
 */
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

/* Under the list's lock. */
static struct mux_note *find(struct smux_mux *mux, const char *key)
{
	for (struct mux_note *e = mux->departed.head; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

/* Notes that the latest write of @key left with @replica: its kind is
 * that of the newest hint of the key (@kind of hint @id; a peer's older
 * hint of the same removal changes nothing). Replaces a note of the key
 * from an earlier removal (in the journal: the new note and the end of
 * the old one are one append). Out of memory: not noted (as before
 * notes were journaled). Caller holds mutate_lock: no other note is
 * being journaled. */
static void note(struct smux_mux *mux, const char *replica, const char *key,
		 enum smux__hint_kind kind, uint64_t id)
{
	struct mux_notes *l = &mux->departed;
	struct mux_note *e, **pp;
	uint64_t replaces = 0;

	pthread_mutex_lock(&l->lock);
	e = find(mux, key);
	if (e && strcmp(e->replica, replica) == 0 && id <= e->hint) {
		pthread_mutex_unlock(&l->lock);
		return;
	}
	e = smux__notes_add(l, replica, key);
	if (e) {
		e->kind = kind;
		e->hint = id;
		/* the note it replaces (linked after it) */
		for (pp = &e->next; *pp && strcmp((*pp)->key, key) != 0;
		     pp = &(*pp)->next)
			;
		if (*pp && !(*pp)->busy) {
			struct mux_note *old = *pp;

			*pp = old->next;
			atomic_fetch_sub(&l->n, 1);
			replaces = old->note;
			free(old->replica);
			free(old->key);
			free(old);
		}
	}
	pthread_mutex_unlock(&l->lock);
	if (e)
		smux__notes_journal(mux, l, e, replaces);
}

/* True when @m holds the latest write of @key as far as the hints tell:
 * no hint of its own for it, and not rejoining (unless it took a write of
 * the key since it was added). */
static bool holds_latest(struct smux_mux *mux, struct mux_member *m,
			 const char *key)
{
	if (smux__hints_has(mux->hints, m->name, key))
		return false;
	return !smux__rejoining(mux, m) || smux__fresh_has(mux, m->name, key);
}

/* Whether every member of @old but @gone missed the latest write of @key
 * (a hint each, or rejoining without it) while @gone holds it. */
static bool sole_holder(struct smux_mux *mux, struct mux_view *old,
			struct mux_member *gone, const char *key)
{
	if (!holds_latest(mux, gone, key))
		return false;
	for (unsigned j = 0; j < old->n; j++)
		if (old->m[j] != gone && holds_latest(mux, old->m[j], key))
			return false;
	return true;
}

void smux__departed_note(struct smux_mux *mux, struct mux_view *old,
			 const char *name)
{
	struct smux__hint *list = NULL;
	struct mux_member *gone = NULL;
	int n;

	if (mux->mode != SMUX_MODE_MIRROR && mux->mode != SMUX_MODE_SHIELD)
		return;
	for (unsigned i = 0; i < old->n && !gone; i++)
		if (strcmp(old->m[i]->name, name) == 0)
			gone = old->m[i];
	if (!gone || old->n < 2)
		return;
	n = smux__hints_list(mux->hints, NULL, &list);
	/* out of memory (n < 0): nothing noted, as before */
	for (int i = 0; i < n; i++) {
		if ((list[i].kind != SMUX__HINT_PUT &&
		     list[i].kind != SMUX__HINT_DEL) ||
		    strcmp(list[i].key, SMUX__REJOIN_KEY) == 0)
			continue;
		if (sole_holder(mux, old, gone, list[i].key))
			note(mux, name, list[i].key, list[i].kind, list[i].id);
	}
	if (n > 0)
		smux__hints_free_list(list, n);
}

enum smux__departed smux__departed_with(struct smux_mux *mux, const char *key,
					const char *name,
					enum smux__hint_kind *kind)
{
	enum smux__departed d = SMUX__DEPARTED_NONE;
	struct mux_note *e;

	if (kind)
		*kind = SMUX__HINT_PUT;
	if (atomic_load(&mux->departed.n) == 0)
		return d;
	pthread_mutex_lock(&mux->departed.lock);
	e = find(mux, key);
	if (e) {
		d = strcmp(e->replica, name) == 0 ? SMUX__DEPARTED_SELF
						  : SMUX__DEPARTED_OTHER;
		if (kind)
			*kind = e->kind;
	}
	pthread_mutex_unlock(&mux->departed.lock);
	return d;
}

static bool of_key(const struct mux_note *e, const void *key)
{
	return strcmp(e->key, key) == 0;
}

static bool of_replica(const struct mux_note *e, const void *replica)
{
	return strcmp(e->replica, replica) == 0;
}

void smux__departed_forget_key(struct smux_mux *mux, const char *key)
{
	if (key)
		smux__notes_drop(mux, &mux->departed, of_key, key);
}

void smux__departed_forget(struct smux_mux *mux, const char *replica)
{
	if (replica)
		smux__notes_drop(mux, &mux->departed, of_replica, replica);
}

/* One note per key: the newest (a crash inside a replacing append may
 * leave the replaced note standing too). */
static bool keep(struct smux_mux *mux, const struct mux_note *e)
{
	return !find(mux, e->key);
}

int smux__departed_load(struct smux_mux *mux)
{
	return smux__notes_load(mux, &mux->departed, keep);
}
