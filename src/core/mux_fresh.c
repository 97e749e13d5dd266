/* SPDX-License-Identifier: MIT */
/*
 * mux_fresh.c - the keys a rejoining member took the latest write of.
 *
 * A member added back to a mux that replicates is stale for every key
 * until its resync (mux_rejoin.c), yet it takes writes of a key's whole
 * state meanwhile, and then holds that key's latest version. Nothing
 * else records it: its per-key hint is superseded (or there was none),
 * and its rejoin hint still says "stale". When two members rejoin at
 * once, the other's resync took its own old copy for the latest - an
 * acknowledged delete came back (test_mux_rejoin_fence). So every write
 * a rejoining member takes is noted here (smux__replica_wrote), and the
 * resyncs ask: such a member holds the key's latest version, and its own
 * resync leaves the key alone. Cleared when the member is added (a new
 * rejoin) and once its resync is over.
 *
 * Journaled with the hints (mux_notes.c): a note is durable before
 * smux__fresh_mark returns, so before the write it notes is acknowledged,
 * and is loaded again at open. Kept in memory only, the notes were gone
 * after a restart: a member rejoining beside one that had taken a write
 * alone kept its own old copy, and the other's resync then copied it over
 * that write (test_mux_notes_restart).
 */
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

/* Under the list's lock; @durable: only an entry whose note is
 * journaled (not busy). */
static struct mux_note *find(struct smux_mux *mux, const char *replica,
			     const char *key, bool durable)
{
	for (struct mux_note *e = mux->fresh.head; e; e = e->next)
		if (strcmp(e->key, key) == 0 &&
		    strcmp(e->replica, replica) == 0 && !(durable && e->busy))
			return e;
	return NULL;
}

void smux__fresh_mark(struct smux_mux *mux, const char *replica,
		      const char *key)
{
	struct mux_note *e = NULL;

	pthread_mutex_lock(&mux->fresh.lock);
	/* one still being journaled does not do: this write must not be
	 * acknowledged before a note of it is durable (two notes of one key
	 * are harmless: both end with the rejoin). Out of memory: not noted,
	 * the resync falls back to the hints. */
	if (!find(mux, replica, key, true))
		e = smux__notes_add(&mux->fresh, replica, key);
	pthread_mutex_unlock(&mux->fresh.lock);
	if (e)
		smux__notes_journal(mux, &mux->fresh, e, 0);
}

bool smux__fresh_has(struct smux_mux *mux, const char *replica, const char *key)
{
	bool has;

	if (atomic_load(&mux->fresh.n) == 0)
		return false;
	pthread_mutex_lock(&mux->fresh.lock);
	has = find(mux, replica, key, false) != NULL;
	pthread_mutex_unlock(&mux->fresh.lock);
	return has;
}

static bool of_replica(const struct mux_note *e, const void *replica)
{
	return !replica || strcmp(e->replica, replica) == 0;
}

void smux__fresh_clear(struct smux_mux *mux, const char *replica)
{
	smux__notes_drop(mux, &mux->fresh, of_replica, replica);
}

/* A note of a member still rejoining (its rejoin may have ended before
 * the note's end reached the disk), and the only one of its key. */
static bool keep(struct smux_mux *mux, const struct mux_note *e)
{
	return smux__hints_has(mux->hints, e->replica, SMUX__REJOIN_KEY) &&
	       !find(mux, e->replica, e->key, false);
}

int smux__fresh_load(struct smux_mux *mux)
{
	return smux__notes_load(mux, &mux->fresh, keep);
}
