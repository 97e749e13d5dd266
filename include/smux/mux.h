/* SPDX-License-Identifier: MIT */
/*
 * smux/mux.h - the multiplexer: a backend made of backends.
 *
 * A mux exposes the ordinary operations table (smux/backend.h), so it can
 * be a member of another mux. It routes every operation by its mode (seed
 * section 3, DESIGN section 3), classifies failures (smux_classify), keeps
 * per-member health with cooldowns and probes, runs every member call in a
 * bulkhead (deadline + bounded concurrency), keeps stats, emits events,
 * opens trace spans, records hints for replicas that missed a write (in
 * shield and mirror the replicas a fan-out missed, in failover the members
 * ahead of the one that took it), and can be changed while it runs (add,
 * remove, set_weight, drain).
 *
 * Threads: every function here may be called from any thread, concurrently
 * with operations; none holds a lock across a member call.
 */
#ifndef SMUX_MUX_H
#define SMUX_MUX_H

#include <stdbool.h>
#include <stdint.h>

#include "smux/backend.h"
#include "smux/events.h"
#include "smux/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

enum smux_mode {
	SMUX_MODE_FAILOVER,
	SMUX_MODE_ROUND_ROBIN,
	SMUX_MODE_WEIGHTED,
	SMUX_MODE_STICKY,
	SMUX_MODE_SHIELD,
	SMUX_MODE_MIRROR,
	SMUX_MODE_COUNT
};

/* "failover", "round-robin", "weighted", "sticky-by-key", "shield",
 * "mirror". */
const char *smux_mode_name(enum smux_mode m);
/* Parses a mode name; 0 or -EINVAL. */
int smux_mode_parse(const char *s, enum smux_mode *out);

/*
 * Classification (seed section 4) of one failed attempt, as the trace
 * outcome names it. Pure function of the error.
 */
enum smux_outcome {
	SMUX_OUTCOME_OK,
	SMUX_OUTCOME_TRANSIENT,
	SMUX_OUTCOME_SEMANTIC,
	SMUX_OUTCOME_ABORT,
	SMUX_OUTCOME_TIMEOUT, /* transient, but counted as a timeout */
	SMUX_OUTCOME_LOCAL,   /* the caller's sink or source failed: stop,
				 no health penalty (SMUX_CLASS_LOCAL) */
};
enum smux_outcome smux_classify(const struct smux_error_info *e);
/* "ok", "transient", "semantic", "abort", "timeout", "local". */
const char *smux_outcome_name(enum smux_outcome o);

/* 32-bit FNV-1a of @len bytes (the sticky-by-key hash). */
uint32_t smux_fnv1a(const void *data, size_t len);

/* Injected time for health (milliseconds, any epoch). NULL: real time. */
struct smux_clock {
	int64_t (*now_ms)(void *arg);
	void *arg;
};

/* Injected randomness for weighted selection. NULL: a per-mux xorshift
 * seeded from getrandom(). Must be thread-safe. */
struct smux_rng {
	uint32_t (*next)(void *arg);
	void *arg;
};

/* A member of a mux. */
struct smux_mux_member {
	struct smux_backend *backend; /* the mux takes its own reference */
	bool has_weight;
	double weight; /* >= 0 and finite; needed by weighted mode */
};

#define SMUX_DEFAULT_BACKEND_TIMEOUT_MS 30000
#define SMUX_DEFAULT_COOLDOWN_MS	1000
#define SMUX_DEFAULT_MAX_COOLDOWN_MS	60000
#define SMUX_DEFAULT_MAX_INFLIGHT	64

struct smux_mux_opts {
	enum smux_mode mode;
	int64_t backend_timeout_ms;	 /* 0 = default (30 s); < 0 = none */
	int64_t cooldown_ms;		 /* 0 = default (1 s) */
	int64_t max_cooldown_ms;	 /* 0 = default (60 s) */
	int64_t healthcheck_interval_ms; /* 0 = no active health checks */
	unsigned write_quorum;		 /* mirror; 0 = default (1) */
	bool throw_on_fanout_partial;	 /* shield/mirror */
	unsigned max_inflight;		 /* per member; 0 = default */
	/* Directory for the hint journal (created if missing). NULL: hints
	 * are kept in memory only and lost on restart. */
	const char *state_dir;
	const struct smux_clock *clock;	  /* borrowed; NULL = real */
	const struct smux_rng *rng;	  /* borrowed; NULL = internal */
	struct smux_events *events;	  /* borrowed; NULL = no events */
	const struct smux_tracer *tracer; /* borrowed; NULL = no-op */
};

/*
 * Creates a mux named @name over @n members (in order: for shield the
 * first is the origin). Errors: INVALID_OPTIONS, WEIGHTED_REQUIRES_WEIGHTS,
 * INVALID_WEIGHT, BACKEND_NAME_CONFLICT (two members with one name),
 * MIRROR_ORIGIN_REQUIRED (shield without members),
 * RECURSION_DEPTH_EXCEEDED (a member nests deeper than SMUX_MAX_DEPTH or
 * the mux would contain itself), HINT_JOURNAL_FAILED.
 * On success *@out holds one reference (smux_backend_unref frees).
 */
int smux_mux_new(const char *name, const struct smux_mux_opts *opts,
		 const struct smux_mux_member *members, unsigned n,
		 struct smux_backend **out, struct smux_error *err);

/* True when @b is a mux. */
bool smux_is_mux(const struct smux_backend *b);

/* The member named @name (a new reference: smux_backend_unref), or NULL
 * when @mux is no mux or has no such member. */
struct smux_backend *smux_mux_member(struct smux_backend *mux,
				     const char *name);

/* Appends a member (event backend.added). */
int smux_mux_add(struct smux_backend *mux, const struct smux_mux_member *m,
		 struct smux_error *err);
/*
 * Drains then removes a member (events drain.started, drain.completed,
 * backend.removed). @ctx may abort the wait (BACKEND_ABORTED; the member
 * then stays draining).
 */
int smux_mux_remove(struct smux_backend *mux, const char *name,
		    const struct smux_ctx *ctx, struct smux_error *err);
/* Changes a weight (event weight.changed); INVALID_WEIGHT,
 * BACKEND_NOT_FOUND. */
int smux_mux_set_weight(struct smux_backend *mux, const char *name,
			double weight, struct smux_error *err);
/*
 * Marks a member draining: new requests skip it at once; waits until its
 * in-flight count reaches 0 (events drain.started, drain.completed). The
 * member stays listed as "draining" and is never selected again until
 * smux_mux_undrain() or removal. @ctx may abort the wait.
 */
int smux_mux_drain(struct smux_backend *mux, const char *name,
		   const struct smux_ctx *ctx, struct smux_error *err);
/*
 * Whether @id (smux_info.file_id, compared under @mask) is @key's
 * identity on a member of the mux (nested muxes asked in turn): 1 when a
 * member's head says so, 0 when every member was asked and none did, -1
 * when a member that could not be asked (draining, down, behind on the
 * key, a failed head) may hold it. Members are asked in order until one
 * answers other than 0.
 */
int smux_mux_key_has_id(struct smux_backend *mux, const struct smux_ctx *ctx,
			const char *key, uint64_t id, uint64_t mask);
/* Puts a drained member back in service (status up). */
int smux_mux_undrain(struct smux_backend *mux, const char *name,
		     struct smux_error *err);

/*
 * Replays every pending hint whose replica is up now, or down with its
 * cooldown over (the replay probes it): copies the object from a replica
 * that has it - in failover, from the first member without a hint for the
 * key, the one that took its latest write - or deletes it. A hint the
 * background thread is replaying at that moment is waited for (@ctx may
 * end the wait), then replayed here if still pending. *@replayed (may be
 * NULL) gets the number replayed here, *@pending the hints left (write
 * intents: smux_mux_pending_intents). Write intents whose writers are gone
 * are reconciled or ended too.
 */
int smux_mux_repair(struct smux_backend *mux, const struct smux_ctx *ctx,
		    unsigned *replayed, unsigned *pending,
		    struct smux_error *err);
/* Hints not yet replayed (write intents not counted). */
unsigned smux_mux_pending_hints(struct smux_backend *mux);
/* Write intents not yet ended or reconciled (in-place fan-out writers
 * with uncommitted changes, lingering clean ones, or a dead daemon's). */
unsigned smux_mux_pending_intents(struct smux_backend *mux);

/*
 * Holds (@hold true) or lets go the background repairs of every mux of
 * the process: while held, no background thread replays a hint or
 * reconciles a write intent (health checks and probes go on). smuxfs
 * holds them from before the tree is built until it has completed the
 * directory renames a crash interrupted (rename_journal.c): a reconcile
 * of a write intent under the old name, racing that move, copied the
 * file back under the old name onto the replica that had moved it.
 */
void smux_mux_hold_repairs(bool hold);

/*
 * Whether a listing of @prefix through @b shows every key under it now:
 * 0, or ALL_BACKENDS_DOWN naming a member that is out (down, in its
 * cooldown, draining) and may hold keys under @prefix that no other
 * member lists - in failover one ahead of the first member up (the
 * members after it hold only what it missed, which its hints list), in
 * sticky-by-key any shard (also for a directory made while it was out:
 * an older one of that name may be there, with keys a removal through
 * the mount did not see; s43-t5). A failover or sticky-by-key member
 * that is a mux is asked in turn. Replicas (mirror, shield) and
 * gateways of one store (round-robin, weighted) list whole from any
 * member up, and a backend that is no mux always does. A directory moved key by key is moved only when its
 * listing is whole: else the keys of the member out stay under the old
 * name, and come back there with it.
 */
int smux_mux_list_whole(struct smux_backend *b, const char *prefix,
			struct smux_error *err);

/* Runs the active health checks once now (what the interval timer does). */
void smux_mux_check_health(struct smux_backend *mux);

enum smux_status {
	SMUX_STATUS_UP,
	SMUX_STATUS_DOWN,
	SMUX_STATUS_DRAINING,
};
/* "up", "down", "draining". */
const char *smux_status_name(enum smux_status s);

/* Seed section 7, BackendStats. Latencies in milliseconds. */
struct smux_backend_stats {
	char name[SMUX_ERROR_NAME_MAX];
	enum smux_status status;
	uint64_t hits;	   /* successful calls */
	uint64_t misses;   /* KEY_NOT_FOUND answers */
	uint64_t errors;   /* other failures, timeouts included */
	uint64_t timeouts; /* BACKEND_TIMEOUT */
	double last_latency_ms;
	double p50_latency_ms;
	double p99_latency_ms;
	unsigned consecutive_failures;
	int64_t last_transition_at; /* clock ms */
	unsigned in_flight_count;
	bool has_weight;
	double weight;
	struct smux_mux_stats *child; /* the member's own stats if a mux */
};

/* Seed section 7, MuxStats. */
struct smux_mux_stats {
	char name[SMUX_ERROR_NAME_MAX];
	enum smux_mode mode;
	uint64_t total_calls;
	uint64_t total_failovers;
	uint64_t total_fanout_partials;
	unsigned pending_hints;
	unsigned n_backends;
	struct smux_backend_stats *backends;
};

/* A snapshot of the whole tree under @mux; free with smux_mux_stats_free.
 * NULL on allocation failure. */
struct smux_mux_stats *smux_mux_stats(struct smux_backend *mux);
void smux_mux_stats_free(struct smux_mux_stats *s);
/*
 * The snapshot as JSON (jansson), field names as the seed spells them:
 * {"name","mode","totalCalls","totalFailovers","totalFanoutPartials",
 *  "pendingHints","backends":[{"name","status","hits","misses","errors",
 *  "timeouts","lastLatencyMs","p50LatencyMs","p99LatencyMs",
 *  "consecutiveFailures","lastTransitionAt","inFlightCount"[,"weight"]
 *  [,"mux":{...}]}]}. Caller frees with free(); NULL on failure.
 */
char *smux_mux_stats_json(const struct smux_mux_stats *s, bool pretty);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_MUX_H */
