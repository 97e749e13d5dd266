/* SPDX-License-Identifier: MIT */
/*
 * stats.h (internal) - the counters and latency reservoir of one mux member
 * (seed section 7).
 *
 * Owns: counters (atomics) and a 256-slot reservoir (Vitter's Algorithm R,
 * under its own lock) from which p50/p99 are computed. Never looks at
 * health or events.
 */
#ifndef SMUX_CORE_STATS_H
#define SMUX_CORE_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "smux/mux.h"

#define SMUX__RESERVOIR 256

struct smux__stats {
	atomic_uint_fast64_t hits, misses, errors, timeouts;
	atomic_uint_fast64_t last_latency_us;
	pthread_mutex_t lock;
	/* protected by lock: */
	uint64_t seen;			/* samples offered so far */
	uint64_t rng;			/* xorshift64 state for Algorithm R */
	double sample[SMUX__RESERVOIR]; /* latencies in ms */
};

void smux__stats_init(struct smux__stats *s, uint64_t seed);
void smux__stats_release(struct smux__stats *s);

/*
 * Records one call: the outcome decides the counter (ok -> hits;
 * semantic KEY_NOT_FOUND -> misses; timeout -> timeouts and errors;
 * anything else -> errors); the latency goes to last_latency and the
 * reservoir. @code is the error code (SMUX_OK on success).
 */
void smux__stats_record(struct smux__stats *s, enum smux_outcome o,
			enum smux_code code, double latency_ms);

/*
 * Fills the counter and latency fields of @out (hits, misses, errors,
 * timeouts, last/p50/p99 latency). Percentiles use nearest rank over the
 * current reservoir; 0 when empty.
 */
void smux__stats_read(struct smux__stats *s, struct smux_backend_stats *out);

/* Nearest-rank percentile @p (0..100) of @n values (sorted in place). */
double smux__percentile(double *v, unsigned n, double p);

#endif /* SMUX_CORE_STATS_H */
