/* SPDX-License-Identifier: MIT */
/*
 * mux_notes.c - the lists of notes the mux keeps beside its hints
 * (mux_fresh.c: keys a rejoining member took the latest write of;
 * mux_departed.c: keys whose latest write left with a removed replica),
 * and their journaling (core/hints.h, smux__hints_note).
 *
 * Owns: the entries and their life; what a note means, when one is taken
 * and when it ends, is its module's. Kept in memory only, the notes were
 * gone after a restart and the resyncs fell back to what the hints say:
 * an acknowledged write rolled back (test_mux_notes_restart). Now each
 * is journaled with the hints, durably before the call that took it
 * returns (so before the write it notes is acknowledged), ends there when
 * it is dropped, and is loaded at open.
 *
 * No lock is held across the journal's I/O: an entry is changed and
 * linked under the list's lock as busy, then journaled; a drop meanwhile
 * unlinks it and marks it dead, and its journaler ends and frees it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

void smux__notes_init(struct mux_notes *l, enum smux__note_type type)
{
	memset(l, 0, sizeof(*l));
	l->type = type;
	pthread_mutex_init(&l->lock, NULL);
	atomic_init(&l->n, 0);
}

static void entry_free(struct mux_note *e)
{
	free(e->replica);
	free(e->key);
	free(e);
}

void smux__notes_destroy(struct mux_notes *l)
{
	struct mux_note *e, *next;

	/* no journaler is left at destroy; the journal's notes stay */
	for (e = l->head; e; e = next) {
		next = e->next;
		entry_free(e);
	}
	l->head = NULL;
	pthread_mutex_destroy(&l->lock);
}

struct mux_note *smux__notes_add(struct mux_notes *l, const char *replica,
				 const char *key)
{
	struct mux_note *e = calloc(1, sizeof(*e));

	if (e) {
		e->replica = strdup(replica);
		e->key = strdup(key);
	}
	if (!e || !e->replica || !e->key) {
		if (e)
			entry_free(e);
		return NULL;
	}
	e->kind = SMUX__HINT_PUT;
	e->busy = true;
	e->next = l->head;
	l->head = e;
	atomic_fetch_add(&l->n, 1);
	return e;
}

/* Unlinks @e (under lock): a busy one is its journaler's to end and
 * free; else its note in *@note and @e freed. */
static void unlink_entry(struct mux_notes *l, struct mux_note **pp,
			 uint64_t *note)
{
	struct mux_note *e = *pp;

	*pp = e->next;
	atomic_fetch_sub(&l->n, 1);
	*note = 0;
	if (e->busy) {
		e->dead = true;
		return;
	}
	*note = e->note;
	entry_free(e);
}

void (*smux__notes_hook_journaled)(struct smux_mux *mux, struct mux_notes *l,
				   const char *key);

void smux__notes_journal(struct smux_mux *mux, struct mux_notes *l,
			 struct mux_note *e, uint64_t replaces)
{
	struct smux__note n = {.type = l->type,
			       .kind = e->kind,
			       .hint = e->hint,
			       .replica = e->replica,
			       .key = e->key};
	bool dead;

	/* a journal that fails fails the hints of the write too; the note
	 * stays in memory (as before notes were journaled) */
	if (smux__hints_note(mux->hints, &n, replaces, NULL) != 0)
		n.id = 0;
	if (smux__notes_hook_journaled)
		smux__notes_hook_journaled(mux, l, e->key);
	pthread_mutex_lock(&l->lock);
	e->busy = false;
	e->note = n.id;
	dead = e->dead;
	pthread_mutex_unlock(&l->lock);
	if (dead) {
		smux__hints_note_end(mux->hints, &n.id, 1, NULL);
		entry_free(e);
	}
}

void smux__notes_drop(struct smux_mux *mux, struct mux_notes *l,
		      smux__note_match match, const void *arg)
{
	struct mux_note **pp, *e;
	uint64_t *ids, one;
	unsigned n = 0;

	if (atomic_load(&l->n) == 0)
		return;
	pthread_mutex_lock(&l->lock);
	ids = calloc(atomic_load(&l->n) + 1, sizeof(*ids));
	for (pp = &l->head; (e = *pp);) {
		if (!match(e, arg)) {
			pp = &e->next;
			continue;
		}
		unlink_entry(l, pp, &one);
		if (ids && one) {
			ids[n++] = one;
		} else if (one) {
			/* out of memory: one at a time (a note left
			 * standing counts again after a restart) */
			pthread_mutex_unlock(&l->lock);
			smux__hints_note_end(mux->hints, &one, 1, NULL);
			pthread_mutex_lock(&l->lock);
			pp = &l->head;
		}
	}
	pthread_mutex_unlock(&l->lock);
	smux__hints_note_end(mux->hints, ids, n, NULL);
	free(ids);
}

int smux__notes_load(struct smux_mux *mux, struct mux_notes *l,
		     smux__note_keep keep)
{
	struct smux__note *list = NULL;
	uint64_t *stale;
	unsigned nstale = 0;
	int n = smux__hints_notes(mux->hints, &list);
	int rc = 0;

	if (n <= 0)
		return n;
	stale = calloc((size_t)n, sizeof(*stale));
	if (!stale) {
		smux__hints_free_notes(list, n);
		return -ENOMEM;
	}
	pthread_mutex_lock(&l->lock);
	/* newest first: of two notes @keep takes for one, the newer */
	for (int i = n - 1; i >= 0 && rc == 0; i--) {
		struct mux_note probe = {.replica = list[i].replica,
					 .key = list[i].key,
					 .kind = list[i].kind,
					 .hint = list[i].hint,
					 .note = list[i].id};
		struct mux_note *e;

		if (list[i].type != l->type)
			continue;
		if (!keep(mux, &probe)) {
			stale[nstale++] = list[i].id;
			continue;
		}
		e = smux__notes_add(l, list[i].replica, list[i].key);
		if (!e) {
			rc = -ENOMEM;
			break;
		}
		e->kind = list[i].kind;
		e->hint = list[i].hint;
		e->note = list[i].id;
		e->busy = false;
	}
	pthread_mutex_unlock(&l->lock);
	smux__hints_free_notes(list, n);
	/* the notes no longer true (their end did not reach the disk) */
	if (rc == 0)
		smux__hints_note_end(mux->hints, stale, nstale, NULL);
	free(stale);
	return rc;
}
