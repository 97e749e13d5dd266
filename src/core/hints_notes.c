/* SPDX-License-Identifier: MIT */
/*
 * hints_notes.c - the notes of the hint journal (core/hints.h): facts the
 * mux keeps with the hints, as durable as they are (mux_fresh.c,
 * mux_departed.c). The mux kept them in memory only, and after a restart
 * its resyncs fell back to what the hints say: an acknowledged write was
 * rolled back, an acknowledged delete came back (issue 9,
 * test_mux_notes_restart).
 *
 * Owns: the in-memory list of standing notes (id order) and the API.
 * What a note means is the mux's; this file only keeps it: a change
 * queues its records in the journal's group commit (hints_internal.h),
 * waits for them to be durable holding no lock, and then applies itself
 * to the list under the write lock, as a hint does. The journal
 * (hints_journal.c) writes the records, loads them at open and keeps the
 * standing notes through a compaction.
 *
 * Notes are few (the keys written while a replica rejoins, the keys that
 * left with a removed one) and looked up by id only when they end: a
 * list is enough.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/hints_internal.h"

static int no_memory(struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
			      "hint journal: out of memory");
}

/* ---- the list ---- */

struct note_entry *hn_find(const struct smux__hints *h, uint64_t id)
{
	/* the newest first: a note ends soon after it was taken */
	for (struct note_entry *e = h->notes_tail; e; e = e->prev)
		if (e->n.id == id)
			return e;
	return NULL;
}

struct note_entry *hn_new(const struct smux__note *n)
{
	struct note_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->n = *n;
	e->n.replica = strdup(n->replica);
	e->n.key = strdup(n->key);
	e->n.to = n->to ? strdup(n->to) : NULL;
	if (!e->n.replica || !e->n.key || (n->to && !e->n.to)) {
		hn_free(e);
		return NULL;
	}
	return e;
}

void hn_free(struct note_entry *e)
{
	if (e) {
		free(e->n.replica);
		free(e->n.key);
		free(e->n.to);
		free(e);
	}
}

void hn_link(struct smux__hints *h, struct note_entry *e)
{
	struct note_entry *p = h->notes_tail;

	while (p && p->n.id > e->n.id)
		p = p->prev;
	e->prev = p;
	e->next = p ? p->next : h->notes;
	if (e->next)
		e->next->prev = e;
	else
		h->notes_tail = e;
	if (p)
		p->next = e;
	else
		h->notes = e;
	h->nnotes++;
}

void hn_unlink(struct smux__hints *h, struct note_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		h->notes = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		h->notes_tail = e->prev;
	h->nnotes--;
	hn_free(e);
}

int hn_snapshot(const struct smux__hints *h, struct smux__note **out)
{
	struct smux__note *list;
	int i = 0;

	*out = NULL;
	if (h->nnotes == 0)
		return 0;
	if (h->nnotes > INT_MAX)
		return -ENOMEM;
	list = calloc(h->nnotes, sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (struct note_entry *e = h->notes; e; e = e->next, i++) {
		list[i] = e->n;
		list[i].replica = strdup(e->n.replica);
		list[i].key = strdup(e->n.key);
		list[i].to = e->n.to ? strdup(e->n.to) : NULL;
		if (!list[i].replica || !list[i].key ||
		    (e->n.to && !list[i].to)) {
			smux__hints_free_notes(list, i + 1);
			return -ENOMEM;
		}
	}
	*out = list;
	return i;
}

/* ---- the API ---- */

bool hn_valid(const struct smux__note *n)
{
	if (!n || !n->replica || !*n->replica || !n->key || !*n->key)
		return false;
	switch (n->type) {
	case SMUX__NOTE_FRESH:
	case SMUX__NOTE_DEPARTED:
		return !n->to && !n->link &&
		       (n->kind == SMUX__HINT_PUT || n->kind == SMUX__HINT_DEL);
	case SMUX__NOTE_CHANGE:
		if (strcmp(n->replica, SMUX__INTENT_ALL) != 0)
			return false;
		/* a rename or link (its new name), a delete, or a change in
		 * place (INTENT) */
		if (n->kind == SMUX__HINT_PUT)
			return n->to && *n->to;
		return (n->kind == SMUX__HINT_DEL ||
			n->kind == SMUX__HINT_INTENT) &&
		       !n->to && !n->link;
	}
	return false;
}

static int note_add(struct smux__hints *h, struct smux__note *note,
		    uint64_t replaces, bool sync, struct smux_error *err)
{
	struct note_entry *e, *old;
	struct jbuf b = {0};
	int rc;

	if (!h || !hn_valid(note))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: bad note");
	pthread_rwlock_wrlock(&h->lock);
	e = hn_new(note);
	if (!e) {
		pthread_rwlock_unlock(&h->lock);
		return no_memory(err);
	}
	/* never reused, even when the append fails (as a hint's) */
	e->n.id = h->next_id++;
	old = replaces ? hn_find(h, replaces) : NULL;
	/* the new note first: a crash inside the append may lose the done
	 * record (both notes then stand), never the new note alone */
	if (hj_add_note(&b, &e->n) != 0 ||
	    (old && hj_add_done(&b, replaces) != 0)) {
		rc = no_memory(err);
	} else {
		rc = hj_commit(h, &b, old ? 2 : 1, old ? 1 : 0, sync, err);
	}
	if (rc == 0) {
		note->id = e->n.id;
		old = replaces ? hn_find(h, replaces) : NULL;
		if (old)
			hn_unlink(h, old);
		hn_link(h, e);
	} else {
		hn_free(e);
	}
	pthread_rwlock_unlock(&h->lock);
	free(b.p);
	if (rc == 0)
		hj_maybe_compact(h, false);
	return rc;
}

int smux__hints_note(struct smux__hints *h, struct smux__note *note,
		     uint64_t replaces, struct smux_error *err)
{
	return note_add(h, note, replaces, true, err);
}

int smux__hints_note_lazy(struct smux__hints *h, struct smux__note *note,
			  struct smux_error *err)
{
	return note_add(h, note, 0, false, err);
}

static int note_end(struct smux__hints *h, const uint64_t *ids, unsigned n,
		    bool sync, struct smux_error *err)
{
	unsigned long lines = 0;
	struct note_entry *e;
	struct jbuf b = {0};
	int rc = 0;

	if (!h || n == 0)
		return 0;
	pthread_rwlock_wrlock(&h->lock);
	for (unsigned i = 0; i < n && rc == 0; i++) {
		if (ids[i] == 0 || !hn_find(h, ids[i]))
			continue;
		if (hj_add_done(&b, ids[i]) != 0)
			rc = no_memory(err);
		lines++;
	}
	if (rc == 0 && lines > 0)
		rc = hj_commit(h, &b, lines, lines, sync, err);
	for (unsigned i = 0; i < n && rc == 0 && lines > 0; i++) {
		e = ids[i] ? hn_find(h, ids[i]) : NULL;
		if (e)
			hn_unlink(h, e);
	}
	pthread_rwlock_unlock(&h->lock);
	free(b.p);
	if (rc == 0 && lines > 0)
		hj_maybe_compact(h, false);
	return rc;
}

int smux__hints_note_end(struct smux__hints *h, const uint64_t *ids, unsigned n,
			 struct smux_error *err)
{
	return note_end(h, ids, n, true, err);
}

int smux__hints_note_end_lazy(struct smux__hints *h, const uint64_t *ids,
			      unsigned n, struct smux_error *err)
{
	return note_end(h, ids, n, false, err);
}

int smux__hints_notes(struct smux__hints *h, struct smux__note **out)
{
	int rc;

	*out = NULL;
	if (!h)
		return 0;
	pthread_rwlock_rdlock(&h->lock);
	rc = hn_snapshot(h, out);
	pthread_rwlock_unlock(&h->lock);
	return rc;
}

void smux__hints_free_notes(struct smux__note *list, int n)
{
	if (!list)
		return;
	for (int i = 0; i < n; i++) {
		free(list[i].replica);
		free(list[i].key);
		free(list[i].to);
	}
	free(list);
}
