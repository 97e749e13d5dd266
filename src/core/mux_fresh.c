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
 * resync leaves the key alone. In memory only: after a restart the
 * resync falls back to what the hints say. Cleared when the member is
 * added (a new rejoin) and once its resync is over.
 */
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

struct mux_fresh {
	char *replica;
	char *key;
	struct mux_fresh *next;
};

static struct mux_fresh *find(struct smux_mux *mux, const char *replica,
			      const char *key)
{
	for (struct mux_fresh *e = mux->fresh; e; e = e->next)
		if (strcmp(e->key, key) == 0 &&
		    strcmp(e->replica, replica) == 0)
			return e;
	return NULL;
}

void smux__fresh_mark(struct smux_mux *mux, const char *replica,
		      const char *key)
{
	struct mux_fresh *e;

	pthread_mutex_lock(&mux->fresh_lock);
	if (!find(mux, replica, key)) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->replica = strdup(replica);
			e->key = strdup(key);
		}
		if (e && e->replica && e->key) {
			e->next = mux->fresh;
			mux->fresh = e;
		} else if (e) {
			/* out of memory: not noted, the resync falls back
			 * to the hints (as after a restart) */
			free(e->replica);
			free(e->key);
			free(e);
		}
	}
	pthread_mutex_unlock(&mux->fresh_lock);
}

bool smux__fresh_has(struct smux_mux *mux, const char *replica, const char *key)
{
	bool has;

	pthread_mutex_lock(&mux->fresh_lock);
	has = mux->fresh && find(mux, replica, key);
	pthread_mutex_unlock(&mux->fresh_lock);
	return has;
}

void smux__fresh_clear(struct smux_mux *mux, const char *replica)
{
	struct mux_fresh **pp, *e;

	pthread_mutex_lock(&mux->fresh_lock);
	for (pp = &mux->fresh; (e = *pp);) {
		if (replica && strcmp(e->replica, replica) != 0) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		free(e->replica);
		free(e->key);
		free(e);
	}
	pthread_mutex_unlock(&mux->fresh_lock);
}
