/* SPDX-License-Identifier: MIT */
/*
 * smux/ctx.h - the call context every backend operation receives.
 *
 * The C form of the seed's composite AbortSignal: a call is cancelled when
 * any of its cancel tokens fires (caller abort, mux drain, bulkhead timeout)
 * or when its deadline passes. A context also carries the parent trace span
 * and the nesting depth of muxes above the call.
 *
 * Owns: cancel tokens and the arithmetic of deadlines. Never blocks except
 * in smux_ctx_sleep(), which is meant for backends that wait.
 */
#ifndef SMUX_CTX_H
#define SMUX_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "smux/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a token fired; the first reason given sticks. */
enum smux_cancel_reason {
	SMUX_CANCEL_NONE = 0,
	SMUX_CANCEL_ABORT,   /* the caller gave up */
	SMUX_CANCEL_TIMEOUT, /* a deadline passed (bulkhead) */
	SMUX_CANCEL_DRAIN,   /* the backend is being drained */
};

/*
 * A cancel token. Any thread may fire it; any number of contexts may point
 * at it. Initialise with smux_cancel_init(), release with
 * smux_cancel_release() once no context refers to it any more.
 */
struct smux_cancel {
	atomic_int reason; /* enum smux_cancel_reason; NONE until fired */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast when fired; protected by lock */
};

void smux_cancel_init(struct smux_cancel *c);
void smux_cancel_release(struct smux_cancel *c);
/* Fires the token (idempotent; the first reason wins) and wakes sleepers. */
void smux_cancel_fire(struct smux_cancel *c, enum smux_cancel_reason why);
/* The reason the token fired, or SMUX_CANCEL_NONE. */
enum smux_cancel_reason smux_cancel_reason(const struct smux_cancel *c);

#define SMUX_CTX_MAX_CANCEL 4
#define SMUX_MAX_DEPTH	    8

struct smux_span; /* trace.h; opaque here */

/*
 * A local copy of one object's content that the caller holds (the smuxfs
 * daemon's staging file or read cache), offered to a backend without a
 * server-side copy: bunny's rename uploads it again instead of getting
 * the object first. A hint only: a backend uses it after checking that it
 * is the stored version's content (bunny: its SHA-256 against the stored
 * Checksum), else it reads the object as without one. Refcounted, because
 * a member call can outlive its caller (a bulkhead's abandoned call):
 * whoever keeps a context beyond the call takes a reference.
 */
struct smux_local_copy;

/* A copy of @key's content: @size bytes of @fd (taken: closed by the last
 * unref). NULL when out of memory (@fd closed then). */
struct smux_local_copy *smux_local_copy_new(const char *key, int fd,
					    uint64_t size);
struct smux_local_copy *smux_local_copy_ref(struct smux_local_copy *lc);
/* Drops a reference; the last closes the fd. NULL is a no-op. */
void smux_local_copy_unref(struct smux_local_copy *lc);
/* The fd (borrowed: valid while the reference is) and *@size when @lc
 * (may be NULL) is a copy of @key; -1 otherwise. */
int smux_local_copy_fd(const struct smux_local_copy *lc, const char *key,
		       uint64_t *size);

/*
 * A call context. Plain value, cheap to copy; a callee that needs more
 * (a tighter deadline, one more token) derives a child copy with
 * smux_ctx_derive() instead of changing its argument. Pointers inside are
 * borrowed: tokens and span must outlive every context that names them.
 */
struct smux_ctx {
	int64_t deadline_ns; /* CLOCK_MONOTONIC ns; 0 = no deadline */
	struct smux_cancel *cancel[SMUX_CTX_MAX_CANCEL]; /* NULL-padded */
	struct smux_span *parent_span; /* NULL = no tracing parent */
	unsigned depth;		       /* muxes above this call */
	/* a local copy of the call's object (NULL: none), borrowed like the
	 * tokens; see struct smux_local_copy */
	struct smux_local_copy *local;
};

/* A context with no deadline, no token, depth 0. */
void smux_ctx_init(struct smux_ctx *ctx);

/*
 * Copies @parent into @child, then tightens the deadline to
 * min(parent deadline, now + @timeout_ns) when @timeout_ns > 0 and adds
 * @extra (may be NULL) to the tokens. Returns 0, or -EOVERFLOW when the
 * context already holds SMUX_CTX_MAX_CANCEL tokens.
 */
int smux_ctx_derive(struct smux_ctx *child, const struct smux_ctx *parent,
		    int64_t timeout_ns, struct smux_cancel *extra);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t smux_now_ns(void);

/*
 * CLOCK_REALTIME in nanoseconds, strictly increasing within the process:
 * the mtime backends give an object stored without an explicit one, so
 * that (size, mtime) — the etag of the memory and file backends — names
 * exactly one version. Thread-safe.
 */
int64_t smux_unique_wall_ns(void);

/*
 * The reason the call should stop now: a fired token's reason, or
 * SMUX_CANCEL_TIMEOUT when the deadline has passed; SMUX_CANCEL_NONE when
 * the call may go on. Cheap (atomics and one clock read); backends call it
 * between chunks of I/O.
 */
enum smux_cancel_reason smux_ctx_state(const struct smux_ctx *ctx);

/*
 * 0 when the call may go on; otherwise fills @err with BACKEND_ABORTED or
 * BACKEND_TIMEOUT naming @backend and returns its -errno.
 */
int smux_ctx_check(const struct smux_ctx *ctx, const char *backend,
		   struct smux_error *err);

/* Nanoseconds left before the deadline (INT64_MAX without one, 0 if past). */
int64_t smux_ctx_remaining_ns(const struct smux_ctx *ctx);

/*
 * Sleeps @ns nanoseconds or until the context is cancelled or its
 * deadline passes, whichever comes first. Returns 0 after a full sleep,
 * else like smux_ctx_check().
 */
int smux_ctx_sleep(const struct smux_ctx *ctx, int64_t ns, const char *backend,
		   struct smux_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_CTX_H */
