/* SPDX-License-Identifier: MIT */
/*
 * mux_intent.c - write intents of in-place fan-out writers (DESIGN
 * section 6, "Writes"; the md-raid write-intent bitmap idea).
 *
 * A fan-out writer that writes in place (SMUX_WRITER_INPLACE: every
 * replica's file is changed directly, no staging copy) may leave replicas
 * different if the daemon dies between two replicas' writes. So before its
 * first change the writer journals an intent for the key (a hint of kind
 * SMUX__HINT_INTENT for replica SMUX__INTENT_ALL, fdatasync'ed), and a
 * commit that met the write policy ends it (a lazy done record: losing it
 * costs one needless comparison). An intent still pending - the daemon
 * died, or the writer was closed without a commit - is reconciled by the
 * repair (mux_repair.c): the replicas' versions are compared and the
 * newest copy is copied onto the others, with an event naming the key.
 *
 * While a writer of the key is open the key is busy: the repair leaves its
 * intent alone (it would copy a file that is still being written).
 *
 * Locks: mux->intent_lock protects the busy list; never held across I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

struct mux_busy {
	char *key;
	unsigned refs;
	struct mux_busy *next;
};

int smux__intent_hold(struct smux_mux *mux, const char *key,
		      struct smux_error *err)
{
	struct mux_busy *b;

	pthread_mutex_lock(&mux->intent_lock);
	for (b = mux->busy; b; b = b->next)
		if (strcmp(b->key, key) == 0)
			break;
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
	pthread_mutex_unlock(&mux->intent_lock);
	return 0;
}

void smux__intent_unhold(struct smux_mux *mux, const char *key, bool pending)
{
	struct mux_busy **pp, *b;

	pthread_mutex_lock(&mux->intent_lock);
	for (pp = &mux->busy; (b = *pp); pp = &b->next) {
		if (strcmp(b->key, key) != 0)
			continue;
		if (--b->refs == 0) {
			*pp = b->next;
			free(b->key);
			free(b);
		}
		break;
	}
	pthread_mutex_unlock(&mux->intent_lock);
	if (pending) /* a writer left replicas maybe different: now */
		smux__mux_kick(mux);
}

bool smux__intent_busy(struct smux_mux *mux, const char *key)
{
	struct mux_busy *b;
	bool busy = false;

	pthread_mutex_lock(&mux->intent_lock);
	for (b = mux->busy; b && !busy; b = b->next)
		busy = strcmp(b->key, key) == 0;
	pthread_mutex_unlock(&mux->intent_lock);
	return busy;
}

int smux__intent_begin(struct smux_mux *mux, const char *key, uint64_t *id,
		       struct smux_error *err)
{
	if (*id)
		return 0;
	return smux__hints_add(mux->hints, SMUX__INTENT_ALL, key,
			       SMUX__HINT_INTENT, id, err);
}

void smux__intent_end(struct smux_mux *mux, uint64_t *id)
{
	if (!*id)
		return;
	/* a failure leaves the intent pending: a needless comparison */
	(void)smux__hints_done_lazy(mux->hints, *id, NULL);
	*id = 0;
}

void smux__intent_free_all(struct smux_mux *mux)
{
	while (mux->busy) {
		struct mux_busy *b = mux->busy;

		mux->busy = b->next;
		free(b->key);
		free(b);
	}
}
