/* SPDX-License-Identifier: MIT */
/*
 * hints_internal.h (internal) - what the two halves of the hint journal
 * share: hints.c (the in-memory index of pending hints and the API of
 * core/hints.h) and hints_journal.c (the file: records, loading, group
 * commit of appends, compaction).
 *
 * Locks. `lock` (a rwlock, writers preferred) guards the index: has,
 * pending and list read-lock it; add, done and supersede write-lock it
 * only to queue their records and, after the sync, to apply their change.
 * `jlock` guards the journal's queue; no lock is held across write(2),
 * fdatasync(2) or the building of a compacted file. Lock order: lock,
 * then jlock.
 *
 * Group commit. A change builds its records under `lock`, queues them in
 * the open batch (h->open) and waits, without a lock, until that batch is
 * written and synced: the first waiter that finds no leader becomes the
 * leader, takes the open batch, writes it with one write(2) and one
 * fdatasync(2), and wakes the batch's waiters; records queued meanwhile go
 * to the next batch. Each caller then applies its own change to the index
 * (memory changes only after its record is durable; a failed batch changes
 * nothing). Changes of one (replica, key) queued concurrently are applied
 * as loading applies them: the later hint wins.
 */
#ifndef SMUX_CORE_HINTS_INTERNAL_H
#define SMUX_CORE_HINTS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/hints.h"

#define HINTS_TMP_SUFFIX ".hints.tmp"

struct hint_entry;

/* A standing note (core/hints.h); its strings are its own. */
struct note_entry {
	struct smux__note n;
	struct note_entry *prev, *next; /* h->notes, id order */
};

/* A replica that has (or had) pending hints; lives until close. */
struct hint_replica {
	char *name;
	unsigned pending;
	struct hint_entry *head, *tail; /* its pending hints, id order */
	struct hint_replica *next;	/* h->replicas */
};

struct hint_entry {
	uint64_t id;
	enum smux__hint_kind kind;
	int64_t at_ms;
	char *key;
	struct hint_replica *rep;
	uint64_t rk_hash;
	unsigned failures;		/* smux__hints_failed: in memory only */
	int64_t retry_at_ms;		/* likewise */
	unsigned fail_gen;		/* likewise */
	struct hint_entry *prev, *next; /* all pending, id order */
	struct hint_entry *rprev, *rnext; /* pending of rep, id order */
	struct hint_entry *id_chain;	  /* h->by_id bucket */
	struct hint_entry *rk_chain;	  /* h->by_rk bucket */
};

/* A growable byte buffer for records. */
struct jbuf {
	char *p;
	size_t len, cap;
};

/* Records written with one write(2) (and one fdatasync when any of its
 * records asks for it); shared by its waiters, freed by the last. */
struct hints_batch {
	struct jbuf buf;
	unsigned long lines, ndone;
	bool sync;
	bool done;	   /* written (or failed): rc and what are set */
	int rc;		   /* 0 or -errno */
	const char *what;  /* the failed step ("write", "fdatasync", ...) */
	const char *wpath; /* and the file it failed on */
	unsigned refs;	   /* its waiters */
};

/* One change waiting for its records to be durable: on its caller's
 * stack, in h->inflight from queueing until applied or failed. */
struct hints_op {
	const struct jbuf *rec;
	unsigned long lines, ndone;
	struct hints_batch *batch;
	struct hints_op *prev, *next;
};

struct smux__hints {
	/* Immutable after open; NULL in memory. */
	char *path;
	char *tmp_path;
	char *dir;

	/* The index: protected by lock. */
	pthread_rwlock_t lock;
	uint64_t next_id;
	unsigned npending;
	struct hint_entry *head, *tail;
	struct hint_replica *replicas;
	struct hint_entry **by_id, **by_rk;
	size_t nbuckets;	   /* of both tables; a power of two */
	struct hints_op *inflight; /* queued, not yet applied or failed */
	struct note_entry *notes, *notes_tail; /* standing notes, id order */
	unsigned nnotes;
	/* smux__hints_on_pending: set once before use, then read-only */
	void (*wake)(void *arg);
	void *wake_arg;

	/* The journal: protected by jlock. The fd, size, trunc_pending and
	 * dir_dirty belong to the leader while `syncing`. */
	pthread_mutex_t jlock;
	pthread_cond_t jcond;
	int fd;		     /* the journal, O_APPEND, flocked; -1 in memory */
	off_t size;	     /* bytes of well-formed records in the file */
	bool trunc_pending;  /* a failed append left bytes past size */
	bool dir_dirty;	     /* a compaction's rename awaits a dir fsync */
	unsigned long lines; /* records in the file */
	unsigned long done_lines; /* done records in the file */
	/* records of batches written without a sync (change notes and
	 * their ends, a write intent's end) since the last compaction */
	unsigned long lazy_lines;
	struct hints_batch *open; /* takes new records; NULL: none yet */
	bool syncing;		  /* a leader writes a batch (or swaps) */
	/* compaction (hints_journal.c) */
	bool compacting;	 /* its thread runs */
	bool compactor_joinable; /* a finished one waits for its join */
	pthread_t compactor;
	bool capturing;	     /* queued records also go to capture */
	bool capture_failed; /* out of memory: this compaction fails */
	struct jbuf capture;
	unsigned long cap_lines, cap_done;
};

/* ---- the index (hints.c); caller holds lock (read for find_*) ---- */

struct hint_entry *hx_find_id(const struct smux__hints *h, uint64_t id);
struct hint_replica *hx_find_replica(const struct smux__hints *h,
				     const char *name);
struct hint_replica *hx_get_replica(struct smux__hints *h, const char *name);
struct hint_entry *hx_find_rk(const struct smux__hints *h,
			      const struct hint_replica *rep, const char *key);
struct hint_entry *hx_entry_new(struct hint_replica *rep, const char *key,
				uint64_t id, enum smux__hint_kind kind,
				int64_t at_ms);
void hx_entry_free(struct hint_entry *e);
void hx_entry_link(struct smux__hints *h, struct hint_entry *e);
void hx_entry_unlink(struct smux__hints *h, struct hint_entry *e);
/* Copies the pending hints of @r (NULL: all), oldest first, as
 * smux__hints_list; caller holds lock (read). */
int hx_snapshot(const struct smux__hints *h, const struct hint_replica *r,
		struct smux__hint **out);

/* ---- the notes (hints_notes.c); caller holds lock (read for find) ---- */

struct note_entry *hn_find(const struct smux__hints *h, uint64_t id);
/* A copy of @n (its strings duplicated), not linked yet; NULL: no
 * memory. */
struct note_entry *hn_new(const struct smux__note *n);
void hn_free(struct note_entry *e);
/* Links @e in id order. */
void hn_link(struct smux__hints *h, struct note_entry *e);
/* Unlinks and frees @e. */
void hn_unlink(struct smux__hints *h, struct note_entry *e);
/* Copies the standing notes, as smux__hints_notes. */
int hn_snapshot(const struct smux__hints *h, struct smux__note **out);

/* ---- the journal (hints_journal.c) ---- */

int hj_add_hint(struct jbuf *b, const struct hint_entry *e);
int hj_add_done(struct jbuf *b, uint64_t id);
int hj_add_note(struct jbuf *b, const struct smux__note *n);
/* Whether @n is a note hints.h describes (hints_notes.c): a change is a
 * rename or link (PUT, with its new name) or a delete (DEL, none) of
 * replica SMUX__INTENT_ALL; the others have no new name. */
bool hn_valid(const struct smux__note *n);

/* Opens, locks and loads the file of @h (its dir, path and tmp_path are
 * set from @state_dir and @mux_name). */
int hj_open(struct smux__hints *h, const char *state_dir, const char *mux_name,
	    struct smux_error *err);
/* Waits until no compaction runs (tests: the file is as compact as it
 * gets). */
void hj_quiesce(struct smux__hints *h);
/* Waits for a running compaction, closes the file. */
void hj_close(struct smux__hints *h);

/*
 * Queues @op's records (@op->rec: @op->lines records, @op->ndone of them
 * done records) in the open batch; @sync: the batch needs an fdatasync.
 * Caller holds lock (write).
 */
int hj_queue(struct smux__hints *h, struct hints_op *op, bool sync);
/* Waits, holding no lock, until @op's batch is written; 0 or the error
 * naming the file. Then the caller applies (or drops) its change and
 * calls hj_retire under lock (write). */
int hj_wait(struct smux__hints *h, struct hints_op *op, struct smux_error *err);
void hj_retire(struct smux__hints *h, struct hints_op *op);
/* hj_queue (@sync: with an fdatasync), hj_wait and hj_retire of the
 * records in @b (@lines, @ndone of them done records): caller holds lock
 * (write), released during the wait and held again on return, so the
 * caller applies its change (on 0) and unlocks. 0 or the error. */
int hj_commit(struct smux__hints *h, const struct jbuf *b, unsigned long lines,
	      unsigned long ndone, bool sync, struct smux_error *err);
/* Starts a compaction in the background when it is due (hints.h);
 * @now: compacts in the caller (at open). */
void hj_maybe_compact(struct smux__hints *h, bool now);

/*
 * Test hook (NULL in production): called by a compaction after it took
 * its snapshot of the pending hints and before it writes the new file,
 * holding no lock. Tests hold it there to show that adds, dones and reads
 * go on meanwhile.
 */
extern void (*smux__hints_compact_hook)(struct smux__hints *h);

#endif /* SMUX_CORE_HINTS_INTERNAL_H */
