/* SPDX-License-Identifier: MIT */
/*
 * hints.h (internal) - the hinted-handoff journal of one mux (DESIGN
 * section 3).
 *
 * A hint says "replica R missed the write (put or delete) of key K". The
 * mux records it before it acknowledges the write that R missed, and
 * removes it once R has the key again (replayed, or superseded by a later
 * write that reached R).
 *
 * On disk: <state_dir>/<mux name>.hints, an append-only file of JSON lines
 * (jansson), each appended with write + fdatasync before
 * smux__hints_add() returns:
 *   {"op":"hint","id":7,"replica":"b","key":"a/b.txt","kind":"put","at":ms}
 *   {"op":"done","id":7}
 * and the notes the mux keeps with them (below: "note" records, ended by
 * a done record of their id). Loading replays the file: hints without a
 * done record are pending. A torn last line (a crash mid-append) is
 * ignored; any other malformed line is an error naming the file and line
 * (the file is left as it is). When done records outnumber pending hints
 * and standing notes (and there are over 64 lines) the file is rewritten
 * compactly
 * (temp file, fsync, rename, fsync of the directory) by a thread of its
 * own, while adds and reads go on.
 *
 * Without a state directory the journal lives in memory only.
 * Thread-safe, and no lock is held across file I/O (hints_internal.h):
 * concurrent changes share one write + fdatasync (group commit), each
 * returning once the sync that covers its record is done; reads (has,
 * pending, list) take a read lock. Never a backend call.
 */
#ifndef SMUX_CORE_HINTS_H
#define SMUX_CORE_HINTS_H

#include <stdbool.h>
#include <stdint.h>

#include "smux/error.h"

enum smux__hint_kind {
	SMUX__HINT_PUT,
	SMUX__HINT_DEL,
	/* A write intent (replica SMUX__INTENT_ALL): an in-place writer is
	 * about to change the key on every replica; until its commit the
	 * replicas may differ, and a crash leaves them to be reconciled. */
	SMUX__HINT_INTENT,
	/* never journaled: what a write routed with it leaves a member that
	 * missed it (a sync: the writes it would make durable carry their
	 * own hints). The mux records nothing for it. */
	SMUX__HINT_NONE,
};

/* The replica name of write intents (no backend can be named so). */
#define SMUX__INTENT_ALL "*"

struct smux__hint {
	uint64_t id;
	enum smux__hint_kind kind;
	int64_t at_ms;
	char *replica;
	char *key;
	/* In memory only (a restart tries every hint at once): the replays
	 * of this hint that failed, and the time (the caller's clock) before
	 * which the background repair leaves it (smux__hints_failed). */
	unsigned failures;
	int64_t retry_at_ms;
	unsigned fail_gen; /* the caller's generation at the last failure */
};

struct smux__hints;

/*
 * Opens (creating directory and file if needed) the journal of mux
 * @mux_name under @state_dir (NULL: memory only) and loads pending hints.
 * The mux name must be a plain file name: other names are refused with
 * INVALID_OPTIONS. Errors name the file (and line) and the reason
 * (HINT_JOURNAL_FAILED).
 */
int smux__hints_open(const char *state_dir, const char *mux_name,
		     struct smux__hints **out, struct smux_error *err);
void smux__hints_close(struct smux__hints *h);

/*
 * Calls @fn(@arg) whenever a hint enters an empty pending set (after the
 * add, outside the hints' locks): the mux's background repair sleeps long
 * while nothing is pending and must wake for the first hint. Decided
 * under the index lock, so of a replay emptying the set and a write
 * adding to it at the same moment the add always sees which came first
 * (a check of "nothing pending" made before the add could not: the
 * repair emptied the set and slept, the add woke no one). Set before the
 * mux's threads start.
 */
void smux__hints_on_pending(struct smux__hints *h, void (*fn)(void *arg),
			    void *arg);

/*
 * Records that @replica missed @kind of @key, durably (fdatasync) before
 * returning 0. A pending hint for the same replica and key is replaced
 * (its done record is written in the same append). Returns the new id in
 * *@id (may be NULL).
 */
int smux__hints_add(struct smux__hints *h, const char *replica, const char *key,
		    enum smux__hint_kind kind, uint64_t *id,
		    struct smux_error *err);

/*
 * smux__hints_add for @n replicas (@kind PUT or DEL) of one @key at once
 * (hints_batch.c): one append, one fdatasync, and every new hint enters
 * the index under one write lock, so a reader sees all of them or none.
 */
int smux__hints_add_batch(struct smux__hints *h, const char *const *replicas,
			  unsigned n, const char *key,
			  enum smux__hint_kind kind, struct smux_error *err);

/* Marks hint @id done (replayed). Unknown ids are ignored. */
int smux__hints_done(struct smux__hints *h, uint64_t id,
		     struct smux_error *err);

/* As smux__hints_done without the fdatasync: for records whose loss
 * costs only needless work after a crash (a write intent's end). */
int smux__hints_done_lazy(struct smux__hints *h, uint64_t id,
			  struct smux_error *err);

/* Marks done every pending hint of @replica for @key (a later write of
 * the key reached the replica). */
int smux__hints_supersede(struct smux__hints *h, const char *replica,
			  const char *key, struct smux_error *err);

/*
 * Records that a replay of hint @id failed at @now_ms: the background
 * repair leaves it for 1 s after its first failure, doubled at each
 * failure after that up to 5 min, so that a key one replica refuses at
 * every try (a name its server cannot store) is not retried every second
 * forever. A later write of the key replaces the hint, and the new one
 * starts afresh. @gen is kept with it (fail_gen): the mux's count of its
 * replica's recoveries, which makes it due again once the replica came
 * back since. Unknown ids are ignored.
 */
void smux__hints_failed(struct smux__hints *h, uint64_t id, int64_t now_ms,
			unsigned gen);

/* True when @replica has a pending hint for @key, its kind in *@kind. */
bool smux__hints_kind(struct smux__hints *h, const char *replica,
		      const char *key, enum smux__hint_kind *kind);
/* True when @replica has a pending hint for @key (reads avoid a replica
 * that missed the latest write of a key). */
bool smux__hints_has(struct smux__hints *h, const char *replica,
		     const char *key);

/* Number of pending hints (all replicas, or one when @replica != NULL);
 * with NULL, write intents are counted too. */
unsigned smux__hints_pending(struct smux__hints *h, const char *replica);
/* Pending hints of replicas, write intents left out (what operators and
 * the routing care about). */
static inline unsigned smux__hints_pending_replicas(struct smux__hints *h)
{
	return smux__hints_pending(h, NULL) -
	       smux__hints_pending(h, SMUX__INTENT_ALL);
}

/*
 * Copies the pending hints of @replica (NULL: all) into a new array the
 * caller frees with smux__hints_free_list(). Oldest first. Returns the
 * count, or -ENOMEM.
 */
int smux__hints_list(struct smux__hints *h, const char *replica,
		     struct smux__hint **out);
/* The same for the pending hints of @key, one per replica at most: a
 * look up in the index per replica, whatever the backlog. */
int smux__hints_list_key(struct smux__hints *h, const char *key,
			 struct smux__hint **out);
void smux__hints_free_list(struct smux__hint *list, int n);

/*
 * Notes: facts the mux keeps with the hints, as durable as they are
 * (mux_fresh.c: a rejoining replica took the latest write of a key;
 * mux_departed.c: a key's only latest copy left with a removed replica).
 * A note has an id from the hints' sequence and stands until it is ended;
 * the journal holds
 *   {"op":"note","id":9,"note":"fresh","replica":"b","key":"k",
 *    "kind":"put","hint":0}
 * and a done record ({"op":"done","id":9}) ends it; a change note
 * (mux_change.c) has "note":"change", replica "*" and, for a rename or
 * a link ("link":true), the new name in "to"; a change in place has
 * "kind":"intent". A journal written before notes existed has none and
 * loads as before.
 */
enum smux__note_type {
	SMUX__NOTE_FRESH,
	SMUX__NOTE_DEPARTED,
	/* a one-call change every replica makes (mux_change.c): a rename
	 * or, with link, a hard link (kind PUT, key -> to), a delete (kind
	 * DEL), or a change of the key where it is - a put, setattr or
	 * xattr (kind INTENT: "kind":"intent"); replica SMUX__INTENT_ALL.
	 * One a dead daemon left is rolled forward */
	SMUX__NOTE_CHANGE,
};

struct smux__note {
	uint64_t id;
	enum smux__note_type type;
	enum smux__hint_kind
		kind;  /* departed: the write that left (PUT, DEL) */
	uint64_t hint; /* departed: the hint @kind was taken from */
	char *replica;
	char *key;
	char *to;  /* change: a rename's or link's new name (NULL: none) */
	bool link; /* change: a hard link of key as @to (kind PUT) */
};

/*
 * Records @note (type, kind, hint, replica, key; its id is set in
 * @note->id) durably (fdatasync) before returning 0, and ends the note
 * @replaces (0: none) in the same append. The strings stay the caller's.
 * It waits for the disk: call it holding no lock.
 */
int smux__hints_note(struct smux__hints *h, struct smux__note *note,
		     uint64_t replaces, struct smux_error *err);
/* As smux__hints_note (nothing replaced) without the fdatasync: written
 * (to the page cache: a killed daemon leaves it) before returning 0. For
 * a note that must outlive the daemon, not the machine. */
int smux__hints_note_lazy(struct smux__hints *h, struct smux__note *note,
			  struct smux_error *err);

/* Ends the notes @ids[0..@n) durably, in one append; ids of no standing
 * note (0 among them) are ignored. */
int smux__hints_note_end(struct smux__hints *h, const uint64_t *ids, unsigned n,
			 struct smux_error *err);
/* As smux__hints_note_end without the fdatasync. */
int smux__hints_note_end_lazy(struct smux__hints *h, const uint64_t *ids,
			      unsigned n, struct smux_error *err);

/* Copies the standing notes into a new array (oldest first) the caller
 * frees with smux__hints_free_notes(). Returns the count, or -ENOMEM. */
int smux__hints_notes(struct smux__hints *h, struct smux__note **out);
void smux__hints_free_notes(struct smux__note *list, int n);

/* Test hook (NULL in production): a hint became pending (@pending) or
 * stopped being pending (done, superseded), under the hints' lock - the
 * storm's diagnostics of a repair that does not converge. */
extern void (*smux__hints_hook_change)(bool pending, const char *replica,
				       const char *key, int kind, uint64_t id);

/* The journal path ("" when in memory). */
const char *smux__hints_path(struct smux__hints *h);

#endif /* SMUX_CORE_HINTS_H */
