/* SPDX-License-Identifier: MIT */
/*
 * smux/faulty.h - a fault-injection backend that wraps any backend.
 *
 * Each call (after an optional added latency) may, with the given rates
 * and a deterministic seed, hang, or fail with an error of a given class,
 * before reaching the wrapped backend. Tests use it to prove failover,
 * timeouts and recovery; a configuration can use it for chaos testing.
 * The faults can be changed while it runs, and can be limited to a window
 * of time so that a backend starts healthy, fails, then recovers.
 */
#ifndef SMUX_FAULTY_H
#define SMUX_FAULTY_H

#include "smux/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct smux_faulty_opts {
	int64_t latency_ms; /* added to every call */
	double hang_rate;   /* 0..1: calls that hang */
	/* A hang lasts hang_ms (0: until smux_faulty_release_hangs). When
	 * hang_ignores_cancel is false the hang ends early if the call's
	 * context is cancelled (a well-behaved backend); when true it
	 * models a backend stuck in a system call. */
	int64_t hang_ms;
	bool hang_ignores_cancel;
	/* With hang_ignores_cancel: a call that changes the backend (put,
	 * delete, copy, rename, link, setattr, xattr changes, a writer's
	 * pwrite, truncate and commit) goes on to the wrapped backend once
	 * its hang ends even when its context was cancelled or its deadline
	 * passed meanwhile: a request already on the wire, landing after
	 * the caller gave up (a zombie write). A put then reads its whole
	 * source before it may hang. */
	bool hang_lands;
	double error_rate;    /* 0..1: calls failing transiently (IO) */
	double semantic_rate; /* 0..1: calls failing semantically */
	double timeout_rate;  /* 0..1: calls failing with a connection
				  timeout (ETIMEDOUT, transient) */
	uint64_t seed;	      /* 0: seed 1 */
	/* Which operations are affected (bit (1 << enum smux_faulty_op));
	 * 0 means all. */
	unsigned ops;
	/*
	 * The fault window, on the monotonic clock: faults (latency, hangs,
	 * every error kind) apply only from after_ms after these options
	 * took effect (smux_faulty_new or smux_faulty_set) for for_ms
	 * (0: no end). Both 0 (the default): always. Outside the window
	 * every call goes straight to the wrapped backend and takes no draw
	 * of the random stream. A latency or hang in progress when the
	 * window closes ends then, and the call goes on to the wrapped
	 * backend.
	 */
	int64_t after_ms;
	int64_t for_ms;
	/*
	 * GET only. get_fault_after > 0: a GET's fault (hang or error)
	 * strikes after the call delivered that many bytes to its sink
	 * instead of before the call: a stream that breaks or stalls
	 * midway. A hang that ends lets the rest through. stream_chunk > 0:
	 * the object is delivered in pieces of that many bytes, each after
	 * stream_chunk_ms (a slow stream that keeps moving; the wait ends
	 * early when the call's context stops). Both within the window.
	 */
	uint64_t get_fault_after;
	uint64_t stream_chunk;
	int64_t stream_chunk_ms;
	/* Capabilities (enum smux_caps) hidden from what the wrapped
	 * backend has, always (not only inside the window): a member that
	 * keeps no symlinks, say, whose put of one is refused
	 * (NOT_SUPPORTED) as such a backend refuses it. */
	unsigned caps_off;
	/* Non-empty: faults strike only calls that name this key (a get,
	 * head, put or delete of it, a copy, rename or link from it, an
	 * attribute call on it, a writer's open); every other call goes
	 * straight through. A server that refuses one object and serves
	 * the rest. */
	char only_key[128];
};

enum smux_faulty_op {
	SMUX_FAULTY_GET,
	SMUX_FAULTY_PUT,
	SMUX_FAULTY_DEL,
	SMUX_FAULTY_HEAD,
	SMUX_FAULTY_LIST,
	SMUX_FAULTY_COPY,
	SMUX_FAULTY_HEALTHCHECK,
	SMUX_FAULTY_STATFS,
	SMUX_FAULTY_WRITER, /* writer_open and every writer operation */
};

/* Wraps @inner (the faulty backend takes its own reference). Returns 0,
 * or -EINVAL (SMUX_E_INVALID_OPTIONS) for a rate outside [0, 1], rates
 * adding up to more than 1, or a negative time. */
int smux_faulty_new(const char *name, struct smux_backend *inner,
		    const struct smux_faulty_opts *opts,
		    struct smux_backend **out, struct smux_error *err);
/* Replaces the faults (atomic with respect to new calls) and restarts
 * the random stream and the fault window. Out-of-range values are
 * clamped, not refused. */
void smux_faulty_set(struct smux_backend *b,
		     const struct smux_faulty_opts *opts);
/* Ends every hang in progress (and makes later hangs return at once
 * until smux_faulty_set is called again). */
void smux_faulty_release_hangs(struct smux_backend *b);
/* Calls that have entered a hang and not left it yet. */
unsigned smux_faulty_hanging(struct smux_backend *b);
/* Calls seen so far (all operations). */
unsigned long smux_faulty_calls(struct smux_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* SMUX_FAULTY_H */
