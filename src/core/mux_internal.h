/* SPDX-License-Identifier: MIT */
/*
 * mux_internal.h (internal) - the structures the mux's files share:
 * mux.c (lifecycle, operations table, mutation, stats), mux_select.c
 * (which member next: the six modes' selection), mux_exec.c (running
 * attempts: sequential fall-through, race, fan-out, hints), mux_list.c
 * (listings that merge: the union, failover's hint overlay),
 * mux_failover.c (failover's hints for the members a write passed over),
 * mux_writer.c (writers through the mux: fan-out and the shared parts),
 * mux_writer_single.c (single-target writers and their spool, which lets
 * an open writer move to another member), mux_reader.c (readers through
 * the mux), mux_repair.c (hint replay and the background thread),
 * mux_sticky.c (sticky-by-key: routing, handoff hints and their replay),
 * mux_sticky_slot.c (the slot a shard removed from sticky-by-key leaves),
 * mux_fence.c (user writes and replays of one (replica, key) never
 * overlap), mux_zombie.c (abandoned member calls that may still land),
 * mux_departed.c (keys whose latest write left with a removed replica),
 * mux_fresh.c (keys a rejoining member took the latest write of),
 * mux_notes.c (the lists of those two, journaled with the hints).
 *
 * Concurrency model. Members are refcounted. The member list is an
 * immutable, refcounted `struct mux_view` replaced wholesale on add/remove
 * (copy on write); the selection data derived from it and from health (the
 * up set and the weighted alias table) is an immutable refcounted
 * `struct mux_sel` rebuilt off to the side and swapped on every health
 * transition, weight change or membership change. Readers take a
 * reference under `view_lock` (read-locked for a pointer copy and an
 * atomic increment) and never hold a lock across a member call.
 */
#ifndef SMUX_CORE_MUX_INTERNAL_H
#define SMUX_CORE_MUX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/bulkhead.h"
#include "core/health.h"
#include "core/hints.h"
#include "core/linkbook.h"
#include "core/stats.h"
#include "smux/mux.h"

/* Buckets of the replay fence (mux_fence.c): a power of two. */
#define SMUX__FENCE_BUCKETS 64
/* names of files of several names a mux remembers for replays */
#define SMUX__LINK_MEMO 64
/* the most names of one file a replay compares (mux_repair.c) */
#define SMUX__GROUP_MAX 16
/* the most hard links a mux's link book keeps (linkbook.h): about
 * 200 bytes each in memory */
#define SMUX__LINKBOOK_CAP 65536

struct mux_member {
	atomic_int refs;
	struct smux_backend *backend; /* one reference */
	const char *name;	      /* backend->name */
	unsigned index;		      /* position when added (stable id) */
	_Atomic double weight;	      /* written under mux->mutate_lock */
	atomic_bool has_weight;	      /* written under mux->mutate_lock */
	struct smux__health health;
	struct smux__stats stats;
	struct smux__bulkhead *bh;
	/* the configuration error of this member last reported
	 * (backend.misconfigured, mux_exec.c): a hash of the key to fix
	 * (0: none yet) and when (the mux's clock, ms) */
	atomic_uint misconf;
	_Atomic int64_t misconf_ms;
	/* how often it came back up: a hint of it whose replay failed
	 * before its latest recovery is due again at once (mux_repair.c) */
	atomic_uint recoveries;
};

struct mux_view {
	atomic_int refs;
	unsigned n;
	struct mux_member **m; /* n members, each holding a reference */
};

/* Selection snapshot: derived from a view and the health of its members. */
struct mux_sel {
	atomic_int refs;
	struct mux_view *view; /* holds a reference */
	unsigned n_up;
	unsigned *up; /* indices into view->m of members that are up */
	/* weighted: Walker alias table over the up members with weight > 0 */
	unsigned n_alias;
	double *prob;	     /* n_alias */
	unsigned *alias;     /* n_alias, indices into `up` */
	double total_weight; /* 0 when no up member has weight */
	/* earliest cooldown end among down members (INT64_MAX: none) */
	int64_t next_probe_ms;
};

/* One note of mux_fresh.c or mux_departed.c (mux_notes.c); its fields
 * are protected by its list's lock. */
struct mux_note {
	char *replica;
	char *key;
	enum smux__hint_kind kind; /* departed: the write that left */
	uint64_t hint;		   /* departed: the hint @kind was taken from */
	uint64_t note;		   /* its journal note (0: none) */
	bool busy;		   /* being journaled: its journaler owns it */
	bool dead; /* dropped while busy: its journaler ends it */
	struct mux_note *next;
};

/* A change (rename, delete, link) a dead daemon left under way (mux_change.c);
 * protected by the mux's change_lock. */
struct mux_change {
	uint64_t note;	/* its journal note */
	char *key, *to; /* to: a rename's or link's new name; NULL: delete */
	bool link;
	bool in_place; /* a put, setattr or xattr, or an older note beside a
			* newer one of its keys: its keys reconciled */
	bool told;     /* its failure was told (an event) */
	struct mux_change *next;
};

/* A list of notes of one type, journaled with the hints (mux_notes.c). */
struct mux_notes {
	enum smux__note_type type;
	pthread_mutex_t lock;
	struct mux_note *head; /* protected by lock */
	atomic_uint n;	       /* entries: a lock-free "none" */
};

struct smux_mux {
	struct smux_backend base; /* first: a mux is a backend */
	enum smux_mode mode;
	int64_t timeout_ms; /* <= 0: no bulkhead deadline */
	struct smux__health_cfg health_cfg;
	int64_t healthcheck_interval_ms;
	unsigned write_quorum;
	bool throw_on_fanout_partial;
	unsigned max_inflight;
	const struct smux_clock *clock;
	const struct smux_rng *rng;
	struct smux_events *events;
	const struct smux_tracer *tracer;

	pthread_rwlock_t view_lock;
	struct mux_view *view;	     /* protected by view_lock */
	struct mux_sel *sel;	     /* protected by view_lock */
	pthread_mutex_t mutate_lock; /* serialises add/remove/weight/drain */
	/* serialises building + installing selection snapshots (reselect,
	 * view_install), so the newest health always wins; taken after
	 * mutate_lock, before view_lock and member health locks */
	pthread_mutex_t sel_lock;
	unsigned next_index; /* protected by mutate_lock */

	atomic_uint_fast64_t rr_counter;
	atomic_uint_fast64_t rng_state; /* internal xorshift when no rng */
	atomic_uint_fast64_t total_calls;
	atomic_uint_fast64_t total_failovers;
	atomic_uint_fast64_t total_fanout_partials;

	struct smux__hints *hints;
	/* the hard links made through the mux, for replays (linkbook.h) */
	struct smux__linkbook *book;
	/* the (replica, key) pairs being replayed now, one replay per pair
	 * at a time (mux_repair.c) */
	pthread_mutex_t replay_lock;
	struct mux_replay *replaying; /* protected by replay_lock */
	/* the last names replays put on a replica for files of several
	 * names on their source (member pointers compared, never followed;
	 * checked again before use): the next name of such a file becomes a
	 * link of it there (mux_repair.c); under link_lock */
	struct smux__link_memo {
		char *key;
		const struct mux_member *src, *dst;
		uint64_t file_id;
	} link_memo[SMUX__LINK_MEMO];
	unsigned link_memo_next; /* under link_lock */
	/* one replay of such a file at a time: two names of it replayed by
	 * two workers at once would each put a file of its own; and the
	 * memo above */
	pthread_mutex_t link_lock;
	/* user writes and replays of one (replica, key) never overlap
	 * (mux_fence.c); counts per bucket of (member, key) */
	pthread_mutex_t fence_lock;
	pthread_cond_t fence_cond;
	unsigned fence_writers[SMUX__FENCE_BUCKETS]; /* under fence_lock */
	unsigned fence_replays[SMUX__FENCE_BUCKETS]; /* under fence_lock */
	/* changes a dead daemon left under way (mux_change.c) */
	pthread_mutex_t change_lock;
	struct mux_change *changes_left; /* protected by change_lock */
	atomic_uint nchanges_left;	 /* a lock-free "none" */
	/* keys with an open in-place fan-out writer (mux_intent.c) */
	pthread_mutex_t intent_lock;
	struct mux_busy *busy; /* protected by intent_lock */
	/* sticky-by-key: keys a write or a replay is changing now, one at a
	 * time per key (mux_sticky.c) */
	pthread_mutex_t sticky_lock;
	pthread_cond_t sticky_cond;
	struct mux_sticky_gate *sticky_gates; /* protected by sticky_lock */

	/* member calls abandoned while they may still land (mux_zombie.c) */
	struct smux__zombies *zombies;

	/* keys rejoining members took the latest write of (mux_fresh.c) */
	struct mux_notes fresh;
	/* keys whose latest write left with a removed replica
	 * (mux_departed.c) */
	struct mux_notes departed;

	/* background thread: active health checks and hint replay */
	pthread_t bg_thread;
	bool bg_running;
	pthread_mutex_t bg_lock;
	pthread_cond_t bg_cond; /* CLOCK_MONOTONIC */
	bool bg_stop;		/* protected by bg_lock */
	bool bg_kick;		/* protected by bg_lock: replay hints now */
	/* in every call of the background thread; fired by
	 * smux__mux_bg_stop so a stop never waits for a hung member or a
	 * whole replay pass (mux_repair.c) */
	struct smux_cancel bg_cancel;
};

/* mux.c */
struct smux_mux *smux__mux_of(struct smux_backend *b);
int64_t smux__mux_now(struct smux_mux *mux);
struct mux_view *smux__view_get(struct smux_mux *mux);
void smux__view_put(struct mux_view *v);
struct mux_sel *smux__sel_get(struct smux_mux *mux);
void smux__sel_put(struct mux_sel *s);
/* Rebuilds the selection snapshot from the current view and health. */
void smux__mux_reselect(struct smux_mux *mux);
void smux__member_put(struct mux_member *m);
struct mux_member *smux__member_get(struct mux_member *m);
/* Wakes the background thread to replay hints. */
void smux__mux_kick(struct smux_mux *mux);
/*
 * For mux_reader.c: the entry and exit of every mux operation (depth
 * check, call count, the operation's span, a child context one level
 * deeper; the error stamped with the mux's name), and the routing of a
 * read (get, head, reader open) in the mux's mode.
 */
int smux__mux_op_enter(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux_ctx *child, const char *op, const char *key,
		       const char *policy, struct smux_span **span,
		       struct smux_error *err);
long smux__mux_op_leave(struct smux_mux *mux, struct smux_span *span, long rc,
			struct smux_error *err);
long smux__mux_route_read(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct smux__call *call, const char *op,
			  struct smux_error *err);

/* mux_select.c */
int smux__sel_build(struct mux_sel *s, struct mux_view *v, int64_t now_ms);
void smux__sel_free_arrays(struct mux_sel *s);
/* Walker alias draw: an index into s->up, or -1 when no weight. */
int smux__sel_weighted(const struct mux_sel *s, uint32_t r1, uint32_t r2);
uint32_t smux__mux_random(struct smux_mux *mux);

/*
 * An attempt cursor: yields the members one operation should try, in the
 * mode's order, each already acquired from health (probe recorded).
 */
struct mux_cursor {
	struct smux_mux *mux;
	struct mux_sel *sel; /* reference */
	const char *key;
	unsigned tried;		/* attempts yielded so far */
	unsigned pos;		/* mode-specific position */
	uint64_t start;		/* round-robin start */
	uint64_t *seen;		/* view->n bits: already yielded */
	uint64_t seen_small[4]; /* enough for 256 members */
	bool by_order;		/* failover/shield: walk the view in order */
	/* by_order: members passed over because health refused them (down,
	 * or probed by another caller), the first SMUX__CURSOR_REFUSED */
	unsigned refused[8];
	unsigned n_refused;
};
#define SMUX__CURSOR_REFUSED 8

void smux__cursor_init(struct mux_cursor *c, struct smux_mux *mux,
		       const char *key, bool by_order);
/* Passes over the members whose backends are in @avoid (n entries), as
 * if they had been tried already. */
void smux__cursor_avoid(struct mux_cursor *c, struct smux_backend *const *avoid,
			unsigned n);
/* Next member to try (a reference; *probe tells whether it is a probe),
 * or NULL when there is none left. */
struct mux_member *smux__cursor_next(struct mux_cursor *c, bool *probe);
void smux__cursor_release(struct mux_cursor *c);

/* mux_exec.c */

/*
 * Outcome bookkeeping of one finished attempt on @m: stats, health,
 * events; returns the classification. @ctx (may be NULL) is the context the
 * attempt ran under: a BACKEND_TIMEOUT once it has expired or been
 * cancelled is the caller's deadline, not the member's failure, and counts
 * like an abort (no health penalty).
 */
enum smux_outcome
smux__attempt_done(struct smux_mux *mux, const struct smux_ctx *ctx,
		   struct mux_member *m, bool probe, int64_t started_ns,
		   const struct smux_error *err, struct smux_span *span);
struct smux_span *smux__attempt_span(struct smux_mux *mux,
				     struct smux_span *parent,
				     struct mux_member *m, unsigned index);

/*
 * One call of @call on @m through its bulkhead, with bookkeeping (@probe:
 * it is @m's health probe; @index and @span: its attempt span); *@o tells
 * the outcome. A member that started draining since it was chosen is not
 * called: BACKEND_DRAINING (transient, seed section 4: re-select), with no
 * stats or health, and its probe given back.
 */
long smux__attempt(struct smux_mux *mux, const struct smux_ctx *ctx,
		   struct smux__call *call, struct mux_member *m, bool probe,
		   unsigned index, struct smux_span *span, enum smux_outcome *o,
		   struct smux_error *e);
/* The member whose calls this thread's smux__member_call counts in
 * flight without refusing them while it drains (NULL: none): the source
 * of a writer's rejoin copy, whose file it reads (mux_writer.c). */
void smux__member_call_source(const struct mux_member *m);
/* smux__attempt without span or outcome, for the repair's calls. */
long smux__member_call(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct mux_member *m, struct smux__call *call,
		       bool probe, struct smux_error *err);
/* True when a transient failure of @m (not a probe's) happened inside a
 * replay of @mux's on this thread: its health is judged after the replay
 * by a health check of @m (mux_repair.c), not by the key's failure. */
bool smux__replay_judges(struct smux_mux *mux, struct mux_member *m);

/* mux_meta.c: whether two replicas of a key are the same */

/* Whether @a and @b hold the same @size bytes of @key (*@same; read from
 * both, chunk by chunk: the same version token is not the same bytes). 0
 * or the failure. */
long smux__meta_same_bytes(struct smux_mux *mux, const struct smux_ctx *ctx,
			   struct mux_member *a, struct mux_member *b,
			   const char *key, uint64_t size, bool *same,
			   struct smux_error *err);
/*
 * Makes the user. extended attributes of @key on @dst those of @src (after
 * a copy: the new object has none, a directory may keep old ones). Nothing
 * to do unless both members keep them. 0 or the first failure.
 */
long smux__meta_copy_xattrs(struct smux_mux *mux, const struct smux_ctx *ctx,
			    struct mux_member *src, struct mux_member *dst,
			    const char *key, struct smux_error *err);
/*
 * @dst's copy of @key (HEAD @di) made @src's (@si) in what the same bytes
 * leave open: mode, owner and user. extended attributes (a chmod, chown
 * or setfattr killed between the replicas). *@fixed: something differed
 * and was set. 0 or the first failure.
 */
long smux__meta_fix(struct smux_mux *mux, const struct smux_ctx *ctx,
		    struct mux_member *src, struct mux_member *dst,
		    const char *key, const struct smux_info *si,
		    const struct smux_info *di, bool *fixed,
		    struct smux_error *err);

/*
 * Counts a call on @m in flight (the caller decrements health.in_flight
 * when it is over), unless @m started draining since it was chosen: then
 * nothing is counted and it returns false (do not call @m). With the
 * fence in smux_mux_drain, a drain that saw in_flight 0 is never followed
 * by a call that entered before it.
 */
bool smux__member_enter(struct mux_member *m);

/*
 * The put options of a fan-out: @opts, or a copy in @po with one mtime
 * (smux_unique_wall_ns) when @opts has none, so that every replica stores
 * the same mtime and reports the same version token (size + mtime).
 */
const struct smux_put_opts *
smux__uniform_mtime(struct smux_put_opts *po, const struct smux_put_opts *opts);

/* Runs @call (backend set per member) through the members in the mode's
 * order, falling through on transient errors. */
long smux__exec_sequential(struct smux_mux *mux, const struct smux_ctx *ctx,
			   struct smux__call *call, bool by_order,
			   struct smux_span *span, struct smux_error *err);
/*
 * smux__exec_sequential in member order, except that with @skip_stale a
 * member with a pending hint for a key of @call (its key; also key2 for a
 * copy or rename) is passed over (its probe, if it was one, given back);
 * when only such members were left the call fails with ALL_BACKENDS_DOWN.
 * On success *@acked (when not NULL) holds a reference to the member that
 * succeeded (smux__member_put), else NULL.
 */
long smux__exec_walk(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct smux__call *call, bool skip_stale,
		     struct mux_member **acked, struct smux_span *span,
		     struct smux_error *err);
/* smux__exec_walk with skip_stale, on the holder of the call's key alone
 * (smux__failover_holds): ALL_BACKENDS_DOWN when it is not available. */
long smux__exec_walk_holder(struct smux_mux *mux, const struct smux_ctx *ctx,
			    struct smux__call *call, struct mux_member **acked,
			    struct smux_span *span, struct smux_error *err);
/* Fills @err for an operation whose @attempts (0: none could be made) all
 * failed, the last with @last: ALL_BACKENDS_DOWN wrapping it, or @last
 * itself when every attempt timed out. Returns the negative errno. */
long smux__exhausted(struct smux_mux *mux, unsigned attempts, bool all_timeouts,
		     const struct smux_error *last, struct smux_error *err);
/* Mirror reads: race every up member, first success wins. */
long smux__exec_race(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct smux__call *call, struct smux_span *span,
		     struct smux_error *err);
/* Shield/mirror writes: every target in parallel, then the write policy
 * and hints. @kind says what a hint records. */
long smux__exec_fanout(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux__call *call, enum smux__hint_kind kind,
		       struct smux_span *span, struct smux_error *err);

/*
 * Applies the write policy of @mux to the outcome of a fan-out over
 * @n members (ok[i], errs[i]) and records hints for those that missed it
 * (also the members in @skipped, which were down). Returns 0 when the
 * write is acknowledged.
 */
int smux__fanout_policy(struct smux_mux *mux, const char *key,
			enum smux__hint_kind kind, struct mux_member **m,
			const bool *ok, const struct smux_error *errs,
			unsigned n, struct smux_error *err);

/*
 * True when the failed attempt @e is the caller's and no replica's: its
 * own sink or source failed (LOCAL), or it gave up (an abort once @ctx is
 * cancelled). A fan-out then stops with @e, unacknowledged and without
 * counting against anyone's health.
 */
bool smux__caller_failed(const struct smux_ctx *ctx,
			 const struct smux_error *e);

/*
 * Shield, the origin (@m[0]) failed a write that mirrors took: each of
 * those mirrors gets a hint for @key (unless @kind is SMUX__HINT_NONE), so
 * it is not read and its replay copies the origin's version back.
 */
void smux__shield_rollback_hints(struct smux_mux *mux, const char *key,
				 enum smux__hint_kind kind,
				 struct mux_member **m, const bool *ok,
				 unsigned n);

/*
 * Shield: true when @m[0] of a fan-out over @m (@n members) is the origin,
 * the first member of the view. A draining origin is left out of a
 * fan-out (smux__fan_eligible): the first member is then a mirror, whose
 * failure is a mirror's (it gets a hint), and the origin gets the hint of
 * a draining member. False in the other modes.
 */
bool smux__shield_origin(struct smux_mux *mux, struct mux_member *const *m,
			 unsigned n);

/* True when @m missed a write of @key that is not replayed yet. */
bool smux__member_stale(struct smux_mux *mux, struct mux_member *m,
			const char *key);

/* mux_fanout.c: the one fan-out primitive (see the file's comment) */

#define SMUX__FAN_MAX 64

/* One fan-out: the caller fills mux, n, m[], go[], probe[] (or lets
 * smux__fan_eligible do it) and call[] (the backend is set per member),
 * runs it, then reads ok[], rc[], err[]. */
struct smux__fan {
	struct smux_mux *mux;
	unsigned n;
	struct mux_member *m[SMUX__FAN_MAX]; /* borrowed from the caller */
	struct smux__call call[SMUX__FAN_MAX];
	bool go[SMUX__FAN_MAX];	   /* in: call it (else err[] says why) */
	bool probe[SMUX__FAN_MAX]; /* in: the call is its health probe */
	/* smux__fan_eligible: passed over by its health (down), for
	 * smux__fan_probed */
	bool cooled[SMUX__FAN_MAX];
	bool spans;			      /* one attempt span per call */
	bool ok[SMUX__FAN_MAX];		      /* out */
	long rc[SMUX__FAN_MAX];		      /* out: the call's result */
	struct smux_error err[SMUX__FAN_MAX]; /* out: why not ok */
	/* starts the job of member @i (NULL: on its bulkhead; the writers:
	 * on the replica writer's lock) */
	struct smux__job *(*start)(void *arg, unsigned i,
				   const struct smux_ctx *ctx,
				   struct smux__call *c);
	void *start_arg;
	/* a writer's fan-out: its key (NULL: the calls name their keys).
	 * smux__fan_run calls no member on which an abandoned change of the
	 * key may still land (mux_zombie.c) */
	const char *wkey;
	/* private to smux__fan_run */
	struct smux__job *job[SMUX__FAN_MAX];
	struct smux_span *span[SMUX__FAN_MAX];
	int64_t t0[SMUX__FAN_MAX];
	bool entered[SMUX__FAN_MAX];
};

/*
 * True when @m must not take @call of a fan-out because it would build
 * new content from a key @m missed the latest write of (a copy, rename or
 * link source; the key of a setattr, an xattr change or a writer that is
 * not @whole, i.e. not truncating); @why (may be NULL) then says so.
 */
bool smux__fan_stale(struct smux_mux *mux, struct mux_member *m,
		     const struct smux__call *call, bool whole,
		     struct smux_error *why);
/* True when @call's success on a member leaves the whole state of the key
 * it writes there (a hint of the member for that key is superseded);
 * W_COMMIT only for a @whole writer. */
bool smux__fan_renews(const struct smux__call *call, bool whole);
/*
 * Fills f->m/go/probe/err with the members of @v a fan-out of @call goes
 * to (at most @max): draining ones are left out; a stale one
 * (smux__fan_stale) is listed but not called; the others are acquired
 * from health (the shield origin always). Returns f->n.
 */
unsigned smux__fan_eligible(struct smux__fan *f, struct mux_view *v,
			    const struct smux__call *call, bool whole,
			    unsigned max);
/* Runs f->call[i] on every member with go[i] in parallel: entered with
 * the drain check (a member draining since it was chosen gets
 * BACKEND_DRAINING and no call), started, finished, bookkept. */
void smux__fan_run(struct smux__fan *f, const struct smux_ctx *ctx,
		   struct smux_span *span);
/*
 * A fan-out (of smux__fan_eligible) with no member left to call, or
 * whose calls all failed, none by its caller (smux__fan_run ran): a
 * member passed over because another caller (the background thread) was
 * probing it is waited for until that probe ends (smux__probe_wait), as
 * a failover walk does - a write failing with ALL_BACKENDS_DOWN just as
 * a replica came back is an EIO a program did not need. True with that
 * one member's go[] (and probe[]) set; the others' go[] are left as they
 * were. Not in shield mode (the origin is always called, and decides).
 */
bool smux__fan_probed(struct smux__fan *f, const struct smux_ctx *ctx,
		      unsigned *which);
/* smux__fan_run, then, when no call succeeded, smux__fan_probed's
 * member alone (the others' results kept). */
void smux__fan_run_probed(struct smux__fan *f, const struct smux_ctx *ctx,
			  struct smux_span *span);
/* Whether @m is a member of @mux now (not removed since). */
bool smux__member_in_view(struct smux_mux *mux, const struct mux_member *m);
/* True when some @m[i] with ok[i] is in the current view (a write that
 * reached only members removed since lives on no member). */
bool smux__fan_any_in_view(struct smux_mux *mux, struct mux_member **m,
			   const bool *ok, unsigned n);
/* Test hook (NULL in production): called once a write was taken by some
 * member, before the mux checks that member is still in the view and
 * records hints (smux__failover_missed, smux__fanout_policy); a test
 * removes a member there. */
extern void (*smux__fanout_hook_acked)(struct smux_mux *mux, const char *key);
/* Test hook (NULL in production), atomic: a fan-out write some member took
 * and that is still in the view is about to record the hints of the
 * members that missed it; a test removes a member there. */
typedef void (*smux__fanout_hook_fn)(struct smux_mux *mux, const char *key);
extern _Atomic(smux__fanout_hook_fn) smux__fanout_hook_hinting;

/* Test hook (NULL in production): a union or failover listing has its
 * members' listings and is about to merge them with the hints. */
extern void (*smux__list_hook_listed)(struct smux_mux *mux);
/* Test hook (NULL in production): a union listing took its snapshot of
 * the pending hints and no member has listed yet. */
extern void (*smux__list_hook_snapped)(struct smux_mux *mux);

/* Test hook (NULL in production): a reconcile read the newest copy of
 * @key and is about to write it to a replica that differs. */
extern void (*smux__reconcile_hook_copied)(struct smux_mux *mux,
					   const char *key);

/* mux_repair.c: frees what replays remembered of linked files (at the
 * mux's end). */
void smux__link_memo_free(struct smux_mux *mux);
/* mux_repair.c: before @key (a file's name) is deleted or replaced by a
 * rename: a replica with a pending put hint for @key (it missed a write
 * through it) gets one for each other name of the file there, found on a
 * member up that has the key's latest write - the write it missed is
 * replayed through those names once @key's hint is its delete or another
 * file's (ln b x/a; echo >> b; rm b while a replica was drained: its x/a
 * never got the append; s49). Best effort: a failure records nothing. */
void smux__link_hints_carry(struct smux_mux *mux, const struct smux_ctx *ctx,
			    const char *key);
/* mux_repair.c: after a link of @from to @to through the mux, for each
 * replica that missed it (a hint for @to) and has @from as the others do:
 * remembers @from as the name of the file there, so that the replay of
 * @to links it instead of making a copy (whose name then kept old bytes
 * when the file was written through the other; s43-t1). Best effort: a
 * restart forgets, and the replay copies. */
void smux__link_memo_missed(struct smux_mux *mux, const struct smux_ctx *ctx,
			    const char *from, const char *to);

/* mux_rejoin.c: a member added at run time to a mux that replicates */

/* The key of a rejoin hint: the member missed every key (not a valid
 * key, so no object has it). */
#define SMUX__REJOIN_KEY "/"
/* True while @m has a pending rejoin hint (stale for every key). */
bool smux__rejoining(struct smux_mux *mux, struct mux_member *m);
/* The replay of @dst's rejoin hint: a full resync from the first other
 * member of @v that is up and not rejoining. 0 once @dst holds what it
 * holds (or @dst stopped rejoining meanwhile). */
long smux__rejoin_replay(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *dst,
			 struct smux_error *err);
/* A rejoin hint of @m was replayed and is done: forgets what @m took
 * while it rejoined (mux_fresh.c) and, when @m is in the view, what left
 * with it (mux_departed.c). */
void smux__rejoin_over(struct smux_mux *mux, struct mux_member *m);
/* Test hook (NULL in production), atomic (repair workers read it): the
 * resync of @replica is over and its rejoin hint is not done yet. */
typedef void (*smux__rejoin_fn)(struct smux_mux *mux, const char *replica);
extern _Atomic(smux__rejoin_fn) smux__rejoin_hook_resynced;
/* Test hook (NULL in production): a resync's copy of @key, inside its
 * fence section, between its get from the source and its put. */
extern void (*smux__rejoin_hook_copy)(struct smux_mux *mux, const char *key);
/* Test hook (NULL in production): a resync's copy of @key, inside its
 * fence section, before it asks the member whether a write reached it
 * since its listing. */
extern void (*smux__rejoin_hook_check)(struct smux_mux *mux, const char *key);

/* mux_notes.c: the lists of mux_fresh.c and mux_departed.c */

void smux__notes_init(struct mux_notes *l, enum smux__note_type type);
/* Frees the list at the mux's end; its notes stay in the journal. */
void smux__notes_destroy(struct mux_notes *l);
/* A new entry of @replica and @key (kind PUT), busy, linked first; NULL
 * when out of memory. Caller holds @l->lock and, once it set the entry's
 * fields, journals it (smux__notes_journal). */
struct mux_note *smux__notes_add(struct mux_notes *l, const char *replica,
				 const char *key);
/* Journals @e (busy; @replaces: the journal note it replaces, 0: none),
 * durably before returning; then @e is no longer busy - or, dropped
 * meanwhile, ended and freed. Caller holds no lock. */
void smux__notes_journal(struct smux_mux *mux, struct mux_notes *l,
			 struct mux_note *e, uint64_t replaces);
/* Test hook (NULL in production): a note of @key in @l is durable and
 * still busy (its journaler holds no lock). */
extern void (*smux__notes_hook_journaled)(struct smux_mux *mux,
					  struct mux_notes *l, const char *key);
typedef bool (*smux__note_match)(const struct mux_note *e, const void *arg);
/* Unlinks the entries @match(e, @arg) takes and ends their notes (a busy
 * one's journaler ends it). Caller holds no lock. */
void smux__notes_drop(struct smux_mux *mux, struct mux_notes *l,
		      smux__note_match match, const void *arg);
/* At open: links an entry for each journal note of @l's type that
 * @keep(mux, e) takes (newest first, under @l->lock: it may look at the
 * list) and ends the others. 0 or -ENOMEM. */
typedef bool (*smux__note_keep)(struct smux_mux *mux, const struct mux_note *e);
int smux__notes_load(struct smux_mux *mux, struct mux_notes *l,
		     smux__note_keep keep);

/* mux_fresh.c: keys a rejoining member took the latest write of */

/* A rejoining @replica took a write of @key's whole state. */
void smux__fresh_mark(struct smux_mux *mux, const char *replica,
		      const char *key);
/* True when @replica took a write of @key since it was added. */
bool smux__fresh_has(struct smux_mux *mux, const char *replica,
		     const char *key);
/* Forgets @replica's keys (NULL: every replica's), in the journal too. */
void smux__fresh_clear(struct smux_mux *mux, const char *replica);
/* At open: the notes of the journal (those of members still rejoining).
 * 0 or -ENOMEM. */
int smux__fresh_load(struct smux_mux *mux);

/* mux_departed.c: keys whose latest write left with a removed replica */

/* Mirror, shield: @name, a member of @old, is out of the view now; notes
 * each key it held the only latest state of (every other member of @old
 * missed that write, a put or a delete, or is rejoining without it). */
void smux__departed_note(struct smux_mux *mux, struct mux_view *old,
			 const char *name);
enum smux__departed {
	SMUX__DEPARTED_NONE,  /* no note for the key */
	SMUX__DEPARTED_SELF,  /* its latest write left with the one asking */
	SMUX__DEPARTED_OTHER, /* with another replica, out of the view */
};
/* Where the latest write of @key is, as seen by the replica @name; that
 * write's kind (PUT or DEL) in *@kind (may be NULL; PUT without a note). */
enum smux__departed smux__departed_with(struct smux_mux *mux, const char *key,
					const char *name,
					enum smux__hint_kind *kind);
/* A write of @key reached a member: it is the key's latest now. */
void smux__departed_forget_key(struct smux_mux *mux, const char *key);
/* @replica's resync is over: its notes end (in the journal too). */
void smux__departed_forget(struct smux_mux *mux, const char *replica);
/* At open: the notes of the journal. 0 or -ENOMEM. */
int smux__departed_load(struct smux_mux *mux);

/* mux_list.c */

/* Lists of sticky/mirror: the de-duplicated union over every up member. */
long smux__exec_list_union(struct smux_mux *mux, const struct smux_ctx *ctx,
			   const char *prefix, const char *delimiter,
			   smux_list_fn fn, void *arg, struct smux_span *span,
			   struct smux_error *err);
/*
 * Lists of failover and shield: the first member that answers, as the
 * walk finds it;
 * while hints are pending, that member's listing is corrected by its own
 * hints (keys it missed are added with the info of the member that has
 * them, keys deleted while it was out are left out).
 */
long smux__exec_list_failover(struct smux_mux *mux, const struct smux_ctx *ctx,
			      struct smux__call *call, struct smux_span *span,
			      struct smux_error *err);

/* mux_failover.c */

/*
 * Failover writes (put, delete, copy, rename, setattr): the walk in member
 * order, passing over members that missed the latest write of a key the
 * call works on (until its hint is replayed, the replay is the only writer
 * of that key on that member), then, before the write is acknowledged, a
 * hint for every member ahead of the one that took it
 * (smux__failover_missed).
 */
long smux__failover_write(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct smux__call *call, enum smux__hint_kind kind,
			  struct smux_span *span, struct smux_error *err);
/*
 * @acked took a write of @key (@kind): its own hint for @key, if any, is
 * superseded, and every member ahead of it in the current view gets a
 * durable hint (event hint.recorded). 0, or the journal's failure (the
 * write must then not be acknowledged).
 */
int smux__failover_missed(struct smux_mux *mux, struct mux_member *acked,
			  const char *key, enum smux__hint_kind kind,
			  struct smux_error *err);
/*
 * Whether @name, a member of @old, is the holder of a key that a member of
 * @old ahead of it missed the latest write of (a put hint pending): its
 * removal would take away the only copy of an acknowledged write. Fills
 * @key (of @len bytes) with the first such key.
 */
bool smux__failover_sole_holder(struct smux_mux *mux, struct mux_view *old,
				const char *name, char *key, size_t len);
/* Test hook (NULL in production): called by smux__failover_missed for
 * each member hinted, once its hint is recorded. */
extern void (*smux__failover_hinted_hook)(struct smux_mux *mux,
					  const char *replica, const char *key);
/* Test hook (NULL in production): a sequential walk is about to ask the
 * next member after one failed (the call's first key). */
extern _Atomic(smux__fanout_hook_fn) smux__walk_hook_next;
/* Test hook (NULL in production): smux_mux_remove took member @name out
 * of the view and is about to check that it holds no write's only copy
 * (mutate_lock held; the view may yet be put back). */
extern _Atomic(smux__fanout_hook_fn) smux__remove_hook_out;
/* Test hook (NULL in production): a failover replay of @key is about to
 * look for the member holding its latest version (under mutate_lock). */
extern _Atomic(smux__fanout_hook_fn) smux__failover_hook_source;
/* True when @m is the first member in the view without a pending hint
 * for @key: the one with its newest version (failover's holder). */
bool smux__failover_holds(struct smux_mux *mux, struct mux_member *m,
			  const char *key);
/*
 * Where failover replays a missed put of @key to @dst from: the first
 * member of @v, other than @dst, without a pending hint for @key (the one
 * that took the latest write). NULL when every other member missed it too
 * (the version left with a removed member; there is nothing to copy). Not
 * a reference: @v holds one.
 */
struct mux_member *smux__failover_source(struct smux_mux *mux,
					 struct mux_view *v,
					 struct mux_member *dst,
					 const char *key);

/* mux_writer.c */
int smux__mux_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, unsigned flags,
			  struct smux_writer **out, struct smux_error *err);

/* mux_reader.c: reader_open of a mux (one member's version, pinned). */
int smux__mux_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *key, struct smux_reader **out,
			  struct smux_error *err);

/* mux_change.c: renames, deletes, links and changes in place every
 * replica makes */

/* Before @call fans out (a rename, delete, link, put, copy, setattr,
 * setxattr or removexattr on a mirror or shield of several members): its
 * note, written before it returns (not synced); *@id 0 when it needs none
 * or the journal could not take it (the call goes ahead without). Always
 * 0. */
int smux__change_begin(struct smux_mux *mux, const struct smux__call *call,
		       uint64_t *id, struct smux_error *err);
/* smux__change_begin of a change of @key where it is that is not one
 * call (a staged writer's commit, an in-place writer's create). */
int smux__change_begin_key(struct smux_mux *mux, const char *key, uint64_t *id,
			   struct smux_error *err);
/* Every member's call of change @id returned: its note ends. */
void smux__change_end(struct smux_mux *mux, uint64_t id);
/* At open: the changes the journal holds (a dead daemon's). 0 or
 * -ENOMEM. */
int smux__changes_load(struct smux_mux *mux);
void smux__changes_free(struct smux_mux *mux);
/* Rolls the changes left forward (at open, and first in every repair
 * while one waits). 0, or @ctx's error. */
int smux__changes_recover(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct smux_error *err);
/* True while a change left waits (no replica could tell whether it
 * happened) on @key: no hint or intent of the key is replayed, which
 * would build on a state the change may yet undo. */
bool smux__change_waits(struct smux_mux *mux, const char *key);

/* mux_sticky.c: @call (a directory's marker put) made on every shard up
 * but @acked that takes it, best effort: a lookup of a directory is
 * answered by any shard. */
void smux__sticky_spread_dir(struct smux_mux *mux, const struct smux_ctx *ctx,
			     const struct smux__call *call,
			     const struct mux_member *acked,
			     struct smux_span *span);

/* mux_intent.c: write intents of in-place fan-out writers */

/* @key has an open in-place writer (refcounted): its intent is not
 * reconciled meanwhile. *@gen: the hold's generation, which the writer
 * passes back. 0 or NO_MEMORY. */
int smux__intent_hold(struct smux_mux *mux, const char *key, uint64_t *gen,
		      struct smux_error *err);
/* Ends a hold; @dirty: the writer leaves changes it never committed (the
 * repair is woken to reconcile them). */
void smux__intent_unhold(struct smux_mux *mux, const char *key, uint64_t gen,
			 bool dirty);
/* The name @key went to another object (a rename over it, a delete, that
 * the mux acknowledged): the writers holding it write a file without
 * that name, their uncommitted changes are nothing of the key to
 * reconcile, and their later changes begin no intent (s42-t2: a writer
 * open across a drain made the file renamed over its name the "newest
 * copy" of its own bytes, on every replica). */
void smux__intent_replaced(struct smux_mux *mux, const char *key);
/* A rename over @key or a delete of it begins (before any member is
 * called): true when it counts against a writer's hold of the key, and
 * smux__intent_replacing_end must follow. */
bool smux__intent_replacing(struct smux_mux *mux, const char *key);
void smux__intent_replacing_end(struct smux_mux *mux, const char *key);
/* smux__intent_detached, or a rename over @key or a delete of it in
 * flight: the name may be another file's by now on some member. */
bool smux__intent_unsettled(struct smux_mux *mux, const char *key,
			    uint64_t gen);
/* Whether a writer holding @key at @gen writes a file without the name. */
bool smux__intent_detached(struct smux_mux *mux, const char *key, uint64_t gen);
/* True while a writer holds @key. */
bool smux__intent_busy(struct smux_mux *mux, const char *key);
/* Before a writer's change: unless *@dirty, makes sure the key's intent
 * is journaled (durable before it returns) and marks the writer dirty.
 * The caller holds @key. 0 or the journal's failure. */
int smux__intent_begin(struct smux_mux *mux, const char *key, uint64_t gen,
		       bool *dirty, struct smux_error *err);
/* After a commit that met the write policy: the writer is clean again
 * (the intent lingers, then ends: mux_intent.c). */
void smux__intent_end(struct smux_mux *mux, const char *key, uint64_t gen,
		      bool *dirty);

enum smux__intent_state {
	SMUX__INTENT_BUSY,	/* writers at it, or a clean one lingering */
	SMUX__INTENT_CLEAN,	/* every writer committed: just end it */
	SMUX__INTENT_RECONCILE, /* left dirty, or from a dead daemon */
};
/* What the repair does with the pending intent @id of @key. */
enum smux__intent_state smux__intent_state(struct smux_mux *mux,
					   const char *key, uint64_t id);
/* The intent @id of @key was ended or reconciled by the repair. */
void smux__intent_forget(struct smux_mux *mux, const char *key, uint64_t id);
/* Frees the key table (mux destroy), ending clean intents. */
void smux__intent_free_all(struct smux_mux *mux);

/* mux_fence.c: user writes and hint replays of one (replica, key) */

/*
 * A replay checks that its hint is still pending, then writes; a user
 * write that lands on the replica in between would be overwritten by the
 * older copy, its hint gone. So a user write fences the keys it writes on
 * its members for as long as it writes them: smux__write_fence() waits
 * while a replay of (member, @key) is between its check and its write
 * (and its xattrs), and keeps new ones from starting that section until
 * smux__write_unfence(); a replay's section waits until no write of its
 * pair is fenced. Fence before the members' calls start, report each
 * success with smux__replica_wrote() (its hint is superseded), unfence
 * after. @key2 (may be NULL): a second key the write changes (a rename's
 * source). (Buckets of (member, key) pairs: unrelated pairs of one bucket
 * only wait for each other a moment.)
 */
void smux__write_fence(struct smux_mux *mux, struct mux_member *const *ms,
		       unsigned n, const char *key, const char *key2);
void smux__write_unfence(struct smux_mux *mux, struct mux_member *const *ms,
			 unsigned n, const char *key, const char *key2);
/* A user write of @key reached @m: a pending hint of @m for @key is
 * superseded (the replica has the latest write). What every write path
 * calls instead of smux__hints_supersede. */
void smux__replica_wrote(struct smux_mux *mux, struct mux_member *m,
			 const char *key);
/* A replay's section (mux_repair.c): from its "hint still pending" check
 * to the end of its write. */
/*
 * In-place writers and replays (mux_fence.c): an in-place fan-out writer
 * changes a replica's file directly from its first write to its commit,
 * so no replay may replace or delete that file meanwhile. The writer's
 * open holds the key (smux__intent_hold) and then waits until no replay
 * of the key is in its section (smux__fence_wait_replays); a replay, in
 * its section, refuses to write while the key is held
 * (smux__replay_blocked: PRECONDITION_FAILED, the hint stays for the next
 * pass). Either the replay entered first and the writer waits for it, or
 * the replay sees the writer and leaves the key alone.
 */
int smux__replay_blocked(struct smux_mux *mux, const char *key,
			 struct smux_error *err);
void smux__fence_wait_replays(struct smux_mux *mux, const char *key);
void smux__replay_fence_enter(struct smux_mux *mux, struct mux_member *m,
			      const char *key);
void smux__replay_fence_exit(struct smux_mux *mux, struct mux_member *m,
			     const char *key);
/* Test hooks (NULL in production): a replay inside its section, right
 * after its check, before its write; a user write about to wait at the
 * fence for a replay. */
typedef void (*smux__replay_check_fn)(struct smux_mux *mux, const char *replica,
				      const char *key);
typedef void (*smux__fence_wait_fn)(struct smux_mux *mux, const char *key);
extern _Atomic(smux__replay_check_fn) smux__replay_check_hook;
extern _Atomic(smux__fence_wait_fn) smux__fence_wait_hook;
/* Test hook (NULL in production): a replay (or resync) about to wait at
 * the fence for user writes of its pair (fence_lock not held). */
extern _Atomic(smux__fence_wait_fn) smux__replay_wait_hook;

/* mux_sticky.c: sticky-by-key (DESIGN section 3) */

/* One key held by a sticky write or replay; on the holder's stack. */
struct mux_sticky_gate {
	const char *key; /* borrowed from the holder */
	struct mux_sticky_gate *next;
};

/* The home shard of @key: index fnv1a(key) % n into @v (0 for NULL or an
 * empty view). */
unsigned smux__sticky_home(const struct mux_view *v, const char *key);
/*
 * Holds @key (@g on the caller's stack) until smux__sticky_gate_leave:
 * waits while another write or replay holds it. Serialises the writes of
 * one key with the replay of its hints, so a replay never lands on top
 * of a newer write. Never hold two at once.
 */
void smux__sticky_gate_enter(struct smux_mux *mux, struct mux_sticky_gate *g,
			     const char *key);
void smux__sticky_gate_leave(struct smux_mux *mux, struct mux_sticky_gate *g);
/* True when @m holds the latest version of @key: the first shard from
 * its home on without a pending hint for it. */
bool smux__sticky_holds(struct smux_mux *mux, struct mux_member *m,
			const char *key);
/* The shard a writer that starts from @key's object opens on: the holder,
 * or, when home lacks the key, the shard off home that holds it (a key
 * placed before the shard list grew). *@out: a reference, or NULL when no
 * shard holds the latest version. Asks home (and the others) with a head;
 * unavailable when one that may hold the key could not be asked. */
int smux__sticky_placed(struct smux_mux *mux, const struct smux_ctx *ctx,
			const char *key, struct mux_member **out,
			struct smux_error *err);
/* mux_repair.c: the replay of a put hint of a directory marker @key on
 * @dst, in sticky-by-key: the marker (mode, owner, times, xattrs) copied
 * from the first other shard up that has it, without a hint for it; 0
 * when no shard has it (@dst keeps its own). *@probe as a replay's. */
long smux__replay_marker(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *dst,
			 const char *key, bool *probe, struct smux_error *err);
/*
 * mux_sticky.c: a change of a directory (@call: a setattr or xattr change
 * of its marker key), which is on every shard: made on every shard up
 * that has it, and a put hint for every other one (out, behind on the
 * marker, failing, or without the directory; none for one that refuses
 * the change), whose replay copies the marker from a shard that took it
 * (smux__replay_marker). 0 once a shard took it; else the first shard's
 * error, and no hint.
 */
long smux__sticky_change_dir(struct smux_mux *mux, const struct smux_ctx *ctx,
			     struct smux__call *call, struct smux_span *span,
			     struct smux_error *err);
/*
 * Reads (get, head, reader open, xattr reads) and in-place changes
 * (setattr, xattr writes, sync) of a key: on the shard that holds its
 * latest version - its home, or while home has a pending hint for it the
 * first shard after home without one. That shard down or failing is
 * UNAVAILABLE (ALL_BACKENDS_DOWN, EIO), never "not found"; home answering
 * "not found" looks on the other shards (keys placed before the handoff
 * rules) before KEY_NOT_FOUND.
 */
long smux__sticky_route(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct smux__call *call, struct smux_span *span,
			struct smux_error *err);
/* A rename in sticky-by-key within one shard, in one call there (see
 * mux_sticky.c); 1 when it does not apply: the caller copies. */
long smux__sticky_rename(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct smux__call *call, struct smux_span *span,
			 struct smux_error *err);
/*
 * A hard link (@call: SMUX__OP_LINK, key -> key2) in sticky-by-key: on the
 * shard both names hash to, when that shard holds the source's latest
 * write (not a handoff copy a replay will move). Otherwise the two names
 * would be two files on two shards: NOT_SUPPORTED with errno EXDEV, as a
 * link across two filesystems (mergerfs answers the same across
 * branches).
 */
long smux__sticky_link(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux__call *call, struct smux_span *span,
		       struct smux_error *err);
/*
 * The slot a shard removed from a sticky-by-key mux leaves in the view
 * (mux_sticky_slot.c): a backend of the removed one's name (capabilities
 * and key_max kept) that answers every call "out of service"; NULL when
 * out of memory. smux__sticky_slot_empty: @m is such a slot.
 */
struct smux_backend *smux__sticky_slot_backend(struct smux_backend *removed);
bool smux__sticky_slot_empty(const struct mux_member *m);
/* Put and delete of a key (@kind PUT or DEL) with the handoff rules. */
long smux__sticky_write(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct smux__call *call, enum smux__hint_kind kind,
			struct smux_span *span, struct smux_error *err);
/*
 * @acked took a write (@kind) of @key: its own hint for @key is
 * superseded; when it is not home, home gets a durable @kind hint and the
 * shards between home and it a delete hint; when it is home and that
 * superseded a handoff, the shard holding the handoff copy gets a delete
 * hint. 0, or the journal's failure (then not acknowledged). The caller
 * holds the key's gate.
 */
int smux__sticky_missed(struct smux_mux *mux, struct mux_member *acked,
			const char *key, enum smux__hint_kind kind,
			struct smux_error *err);
/*
 * Test hooks, NULL in production: called by a replay holding @key's gate
 * between its read of the holder's copy and its write home; and by a
 * write or replay about to wait for @key's gate (sticky_lock held: the
 * hook must only signal).
 */
extern void (*smux__sticky_hook_replay_copied)(const char *key);
extern void (*smux__sticky_hook_gate_wait)(const char *key);
/* Test hook, NULL in production: a sticky put or delete took the write
 * of @key (gate held), before the mux records who missed it. */
extern void (*smux__sticky_hook_acked)(const char *key);
/* Replays hint @h of member @m (sticky's half of the replay dispatch in
 * mux_repair.c; @probe as there). */
long smux__sticky_replay(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *m,
			 const struct smux__hint *h, bool probe,
			 struct smux_error *err);

/* mux_zombie.c: abandoned member calls that may still land */

/* Creates mux->zombies (before the first member). 0 or -1 (ENOMEM). */
int smux__zombies_init(struct smux_mux *mux);
/* mux destroy, before the hints close: zombies that end later record
 * nothing. */
void smux__zombies_detach(struct smux_mux *mux);
/* Reports @m's abandoned mutating calls to the registry (member_new). */
void smux__zombies_track(struct smux_mux *mux, struct mux_member *m);
/* True while an abandoned call that changes @key may still land on @m.
 * Lock-free when none runs. */
bool smux__member_zombie(struct smux_mux *mux, struct mux_member *m,
			 const char *key);
/* A zombie test hook: (@replica, @key) of @mux. */
typedef void (*smux__zombie_fn)(struct smux_mux *mux, const char *replica,
				const char *key);
/* Test hooks (NULL in production), atomic: a test sets or clears them while
 * abandoned calls of an earlier step still end on worker threads. _end: a
 * zombie of (@replica, @key) ended and its hint (if any) is recorded;
 * _handoff: it is ending, its hint (if any) recorded, the zombie not yet
 * forgotten. */
extern _Atomic(smux__zombie_fn) smux__zombie_hook_end;
extern _Atomic(smux__zombie_fn) smux__zombie_hook_handoff;
/* Round-robin, weighted: the members are paths to one store, so a zombie
 * on one member is a zombie of the key on all of them. */
bool smux__zombie_shared(const struct smux_mux *mux);
/* Round-robin, weighted: before a call that changes @key (and @key2, may
 * be NULL), waits until no abandoned call of those keys may still land on
 * the store, bounded by @ctx's deadline or else backend_timeout. 0, or
 * ALL_BACKENDS_DOWN (or @ctx's error) when one still runs: the call must
 * not be sent. 0 at once in the other modes. */
int smux__zombie_wait(struct smux_mux *mux, const struct smux_ctx *ctx,
		      const char *key, const char *key2,
		      struct smux_error *err);
/* Test hook (NULL in production): a zombie of (@replica, @key) begins
 * (in the thread that gave the call up). */
extern void (*smux__zombie_hook_begin)(const char *replica, const char *key);
/* Test hook (NULL in production): the last zombie of (@replica, @key)
 * ended and the mux decides whether the pair needs a hint again (in the
 * worker that ran the call, with the zombies' end lock and a view of the
 * mux held). */
extern void (*smux__zombie_hook_rehint)(struct smux_mux *mux,
					const char *replica, const char *key);
/* Test hook (NULL in production): smux__zombie_wait starts to wait for a
 * zombie of @key (called once per wait, under the wait's lock). */
extern void (*smux__zombie_hook_wait)(struct smux_mux *mux, const char *key);

/* mux_repair.c */

/*
 * Replays the pending hints whose replica is up (or due a probe). A hint
 * another repair is replaying right now is left to it; with @wait this
 * repair waits for that replay to end (@ctx may end the wait) and replays
 * the hint itself if it is still pending.
 */
int smux__mux_repair(struct smux_mux *mux, const struct smux_ctx *ctx,
		     bool wait, unsigned *replayed, unsigned *pending,
		     struct smux_error *err);
/* Replays @key's due hints for the replicas that are up but behind on
 * it, before an in-place writer of it opens or a change of it fans out
 * (mux_repair.c); best effort. */
void smux__catch_up(struct smux_mux *mux, const struct smux_ctx *ctx,
		    const char *key);
/* Mirror, shield: replays the delete hints under the directory @prefix
 * ("a/") of the replicas that are up, also those waiting after a failed
 * try, in rounds (at most SMUX__CATCH_UP_ROUNDS: one per level of
 * directories) while one replays something: before the removal of a
 * directory that the replicas refused (NOT_EMPTY) is tried again - one
 * still held names whose deletes it missed (mux.c mux_del). A delete no
 * other replica can confirm (drained, down) is done: the listing shows
 * no such name already. @ctx: the caller's own (not a child's). Whether
 * any hint was replayed. */
#define SMUX__CATCH_UP_ROUNDS 8
bool smux__catch_up_under(struct smux_mux *mux, const struct smux_ctx *ctx,
			  const char *prefix);
/* The key a fanned-out @call builds on (its object's content or
 * existence), or NULL (mux_fanout.c). */
const char *smux__fan_built_from(const struct smux__call *call);
/* Replays the hints of every replica up but @skip (may be NULL), also
 * those waiting after a failed try, after the replays under way (unless
 * on a repair's thread): a drain's first step (the members staying in
 * service are made current where they can be, while @skip can still be
 * their source). 0 unless @ctx ended or memory ran out. */
int smux__mux_repair_up(struct smux_mux *mux, const struct smux_ctx *ctx,
			const char *skip, struct smux_error *err);
int smux__mux_bg_start(struct smux_mux *mux);
void smux__mux_bg_stop(struct smux_mux *mux);
/*
 * Test hook (false in production): a mux opened while it is set starts
 * without its background thread. For tests that run every repair
 * themselves on a mux reopened with hints pending: a thread started and
 * then stopped may already have replayed them (and ended notes) between
 * the open and the stop.
 */
extern atomic_bool smux__mux_bg_held;

#endif /* SMUX_CORE_MUX_INTERNAL_H */
