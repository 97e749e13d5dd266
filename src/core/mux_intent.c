/* SPDX-License-Identifier: MIT */
/*
 * mux_intent.c - write intents of in-place fan-out writers (DESIGN
 * section 6, "Writes"; the md-raid write-intent bitmap idea).
 *
 * A fan-out writer that writes in place (SMUX_WRITER_INPLACE: every
 * replica's file is changed directly, no staging copy) may leave replicas
 * different if the daemon dies between two replicas' writes. So before a
 * change the key's intent is journaled (a hint of kind SMUX__HINT_INTENT
 * for replica SMUX__INTENT_ALL, fdatasync'ed), and it stays pending while
 * any writer of the key has changes not yet committed under the write
 * policy. A repair (mux_repair.c) reconciles an intent whose writers are
 * gone with changes left uncommitted - or that a dead daemon left in the
 * journal: the replicas' versions are compared and the newest copy is
 * copied onto the others, with an event naming the key.
 *
 * Like md's bitmap, an intent is cleared lazily: once every writer of the
 * key committed, it lingers INTENT_LINGER_MS before its (unsynced) done
 * record is written, so an append loop reopening the same file pays one
 * journal fdatasync, not one per open. A crash meanwhile costs a
 * comparison of replicas that agree.
 *
 * Locks: mux->intent_lock protects the key table; the journal is written
 * under it only by smux__intent_begin (a small append the writer must wait
 * for anyway); never a backend call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

/* How long a clean intent lingers before it is ended. */
#define INTENT_LINGER_MS 2000

/* One key with open in-place writers or a journaled intent. */
struct mux_busy {
	char *key;
	unsigned refs;	  /* open writers */
	unsigned ndirty;  /* writers with uncommitted changes, or
				writers that left without a commit */
	uint64_t intent;  /* journal id, 0 = none */
	int64_t clean_ns; /* when ndirty last fell to 0 */
	/* times the key's name went to another object (a rename over it, a
	 * delete) while held: a writer that holds an older one writes a
	 * file without that name (smux__intent_replaced) */
	uint64_t gen;
	/* renames over the key and deletes of it in flight while held
	 * (smux__intent_replacing): its name may be going to another file */
	unsigned replacing;
	struct mux_busy *next;
};

/* Caller holds intent_lock. */
static struct mux_busy *busy_find(struct smux_mux *mux, const char *key)
{
	struct mux_busy *b;

	for (b = mux->busy; b; b = b->next)
		if (strcmp(b->key, key) == 0)
			return b;
	return NULL;
}

/* Caller holds intent_lock. */
static void busy_free(struct smux_mux *mux, struct mux_busy *b)
{
	struct mux_busy **pp;

	for (pp = &mux->busy; *pp != b; pp = &(*pp)->next)
		;
	*pp = b->next;
	free(b->key);
	free(b);
}

int smux__intent_hold(struct smux_mux *mux, const char *key, uint64_t *gen,
		      struct smux_error *err)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (b)
			b->key = strdup(key);
		if (!b || !b->key) {
			free(b);
			pthread_mutex_unlock(&mux->intent_lock);
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      mux->base.name, NULL);
		}
		b->next = mux->busy;
		mux->busy = b;
	}
	b->refs++;
	*gen = b->gen;
	pthread_mutex_unlock(&mux->intent_lock);
	return 0;
}

/* Caller holds intent_lock. A writer holding @key at @gen writes a file
 * the name no longer has. */
static bool detached(struct mux_busy *b, uint64_t gen)
{
	return b && b->gen != gen;
}

void smux__intent_unhold(struct smux_mux *mux, const char *key, uint64_t gen,
			 bool dirty)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (detached(b, gen))
		dirty = false; /* its changes are not the key's */
	if (b) {
		b->refs--;
		/* a writer that leaves dirty keeps ndirty up: reconcile */
		if (!b->refs && !b->ndirty && !b->intent && !b->replacing)
			busy_free(mux, b);
	}
	pthread_mutex_unlock(&mux->intent_lock);
	if (dirty) /* replicas maybe different: reconcile now */
		smux__mux_kick(mux);
}

int smux__intent_begin(struct smux_mux *mux, const char *key, uint64_t gen,
		       bool *dirty, struct smux_error *err)
{
	struct mux_busy *b;
	int rc = 0;

	if (*dirty)
		return 0;
	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key); /* held by the caller: never NULL */
	if (detached(b, gen)) {
		/* its changes reach no file of the key (but on a replica
		 * that missed the rename or delete, hinted for it) */
		pthread_mutex_unlock(&mux->intent_lock);
		return 0;
	}
	if (b && !b->intent)
		rc = smux__hints_add(mux->hints, SMUX__INTENT_ALL, key,
				     SMUX__HINT_INTENT, &b->intent, err);
	if (b && rc == 0) {
		b->ndirty++;
		*dirty = true;
	}
	pthread_mutex_unlock(&mux->intent_lock);
	return rc;
}

void smux__intent_end(struct smux_mux *mux, const char *key, uint64_t gen,
		      bool *dirty)
{
	struct mux_busy *b;

	if (!*dirty)
		return;
	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (!detached(b, gen) && b && b->ndirty && --b->ndirty == 0)
		b->clean_ns = smux_now_ns();
	pthread_mutex_unlock(&mux->intent_lock);
	*dirty = false;
}

enum smux__intent_state smux__intent_state(struct smux_mux *mux,
					   const char *key, uint64_t id)
{
	enum smux__intent_state st = SMUX__INTENT_RECONCILE;
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (b && b->intent != id)
		b = NULL; /* an older record of the key: compare */
	/* held by a writer, or clean and lingering: busy */
	if (b &&
	    (b->refs || (!b->ndirty && smux_now_ns() - b->clean_ns <
					       INTENT_LINGER_MS * 1000000LL)))
		st = SMUX__INTENT_BUSY;
	else if (b && !b->ndirty)
		st = SMUX__INTENT_CLEAN;
	pthread_mutex_unlock(&mux->intent_lock);
	return st;
}

void smux__intent_forget(struct smux_mux *mux, const char *key, uint64_t id)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (b && b->intent == id && !b->refs && !b->replacing) {
		busy_free(mux, b);
	} else if (b && b->intent == id) {
		b->intent = 0; /* writers came back: journal anew */
		b->ndirty = 0;
	}
	pthread_mutex_unlock(&mux->intent_lock);
}

void smux__intent_replaced(struct smux_mux *mux, const char *key)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (b && b->refs) {
		b->gen++;
		/* what its writers left uncommitted is no longer the key's
		 * content: nothing of the key to reconcile (the replicas that
		 * took the change hold the new object, the others a hint) */
		if (b->ndirty) {
			b->ndirty = 0;
			b->clean_ns = smux_now_ns();
		}
	}
	pthread_mutex_unlock(&mux->intent_lock);
}

bool smux__intent_replacing(struct smux_mux *mux, const char *key)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	if (b && b->refs)
		b->replacing++;
	else
		b = NULL;
	pthread_mutex_unlock(&mux->intent_lock);
	return b != NULL;
}

void smux__intent_replacing_end(struct smux_mux *mux, const char *key)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key); /* kept while replacing */
	if (b && b->replacing && --b->replacing == 0 && !b->refs &&
	    !b->ndirty && !b->intent)
		busy_free(mux, b);
	pthread_mutex_unlock(&mux->intent_lock);
}

bool smux__intent_unsettled(struct smux_mux *mux, const char *key, uint64_t gen)
{
	struct mux_busy *b;
	bool u;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	u = detached(b, gen) || (b && b->replacing);
	pthread_mutex_unlock(&mux->intent_lock);
	return u;
}

bool smux__intent_detached(struct smux_mux *mux, const char *key, uint64_t gen)
{
	bool d;

	pthread_mutex_lock(&mux->intent_lock);
	d = detached(busy_find(mux, key), gen);
	pthread_mutex_unlock(&mux->intent_lock);
	return d;
}

bool smux__intent_busy(struct smux_mux *mux, const char *key)
{
	struct mux_busy *b;
	bool busy;

	pthread_mutex_lock(&mux->intent_lock);
	b = busy_find(mux, key);
	busy = b && b->refs;
	pthread_mutex_unlock(&mux->intent_lock);
	return busy;
}

void smux__intent_free_all(struct smux_mux *mux)
{
	while (mux->busy) {
		struct mux_busy *b = mux->busy;

		/* a clean intent needs no comparison at the next start */
		if (b->intent && !b->ndirty)
			(void)smux__hints_done_lazy(mux->hints, b->intent,
						    NULL);
		mux->busy = b->next;
		free(b->key);
		free(b);
	}
}
