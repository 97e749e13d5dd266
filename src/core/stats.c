/* SPDX-License-Identifier: MIT */
/*
 * stats.c - per-member counters and latency percentiles (seed section 7,
 * DESIGN section 4), and the stats snapshot tree of mux.h as data and JSON.
 *
 * Owns: struct smux__stats (atomic counters plus a 256-slot reservoir of
 * latencies kept with Vitter's Algorithm R under its own lock),
 * smux__percentile(), smux_mux_stats_free() and smux_mux_stats_json().
 * Never looks at health, events or the mux's member list: the mux builds
 * the snapshot; this file only fills counters and renders it.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"

/* splitmix64: spreads a small or zero seed over the whole state. */
static uint64_t mix_seed(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x ? x : 0x2545f4914f6cdd1dULL; /* xorshift64 needs nonzero */
}

/* Marsaglia's xorshift64. Caller holds s->lock. */
static uint64_t xorshift64(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

void smux__stats_init(struct smux__stats *s, uint64_t seed)
{
	atomic_init(&s->hits, 0);
	atomic_init(&s->misses, 0);
	atomic_init(&s->errors, 0);
	atomic_init(&s->timeouts, 0);
	atomic_init(&s->last_latency_us, 0);
	pthread_mutex_init(&s->lock, NULL);
	s->seen = 0;
	s->rng = mix_seed(seed);
	memset(s->sample, 0, sizeof(s->sample));
}

void smux__stats_release(struct smux__stats *s)
{
	pthread_mutex_destroy(&s->lock);
}

void smux__stats_record(struct smux__stats *s, enum smux_outcome o,
			enum smux_code code, double latency_ms)
{
	uint64_t j;

	if (o == SMUX_OUTCOME_OK) {
		atomic_fetch_add(&s->hits, 1);
	} else if (o == SMUX_OUTCOME_LOCAL) {
		/* the caller's sink or source failed: not the member's */
	} else if (o == SMUX_OUTCOME_SEMANTIC && code == SMUX_E_KEY_NOT_FOUND) {
		atomic_fetch_add(&s->misses, 1);
	} else {
		if (o == SMUX_OUTCOME_TIMEOUT)
			atomic_fetch_add(&s->timeouts, 1);
		atomic_fetch_add(&s->errors, 1);
	}

	/* A clock step backwards or a bad value must not poison p50/p99. */
	if (!isfinite(latency_ms) || latency_ms < 0)
		latency_ms = 0;
	if (latency_ms >= (double)(UINT64_MAX / 1000))
		atomic_store(&s->last_latency_us, UINT64_MAX);
	else
		atomic_store(&s->last_latency_us,
			     (uint64_t)(latency_ms * 1000.0 + 0.5));

	/*
	 * Algorithm R: the first 256 samples fill the reservoir; sample
	 * number k (1-based, k > 256) replaces a uniformly chosen slot with
	 * probability 256/k. The modulo bias of a 64-bit draw is below
	 * k/2^64, far under anything a test or a user could see.
	 */
	pthread_mutex_lock(&s->lock);
	s->seen++;
	if (s->seen <= SMUX__RESERVOIR) {
		s->sample[s->seen - 1] = latency_ms;
	} else {
		j = xorshift64(&s->rng) % s->seen;
		if (j < SMUX__RESERVOIR)
			s->sample[j] = latency_ms;
	}
	pthread_mutex_unlock(&s->lock);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double smux__percentile(double *v, unsigned n, double p)
{
	double want;
	unsigned rank;

	if (!v || n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	if (!(p > 0)) /* also NaN */
		return v[0];
	if (p >= 100)
		return v[n - 1];
	/* Nearest rank: the smallest rank r with r >= p/100 * n. */
	want = p * (double)n / 100.0;
	rank = (unsigned)want;
	if ((double)rank < want)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

void smux__stats_read(struct smux__stats *s, struct smux_backend_stats *out)
{
	double v[SMUX__RESERVOIR];
	unsigned n;

	out->hits = atomic_load(&s->hits);
	out->misses = atomic_load(&s->misses);
	out->errors = atomic_load(&s->errors);
	out->timeouts = atomic_load(&s->timeouts);
	out->last_latency_ms =
		(double)atomic_load(&s->last_latency_us) / 1000.0;

	pthread_mutex_lock(&s->lock);
	n = s->seen < SMUX__RESERVOIR ? (unsigned)s->seen : SMUX__RESERVOIR;
	memcpy(v, s->sample, n * sizeof(v[0]));
	pthread_mutex_unlock(&s->lock);

	/* Sorting happens on the copy, outside the lock. */
	out->p50_latency_ms = smux__percentile(v, n, 50);
	out->p99_latency_ms = smux__percentile(v, n, 99);
}

/*
 * The snapshot tree: @s, s->backends and every backend's child were
 * allocated with malloc/calloc by smux_mux_stats() (mux.c).
 */
void smux_mux_stats_free(struct smux_mux_stats *s)
{
	if (!s)
		return;
	if (s->backends) {
		for (unsigned i = 0; i < s->n_backends; i++)
			smux_mux_stats_free(s->backends[i].child);
		free(s->backends);
	}
	free(s);
}

/* ---- JSON ---- */

/* json_object_set_new() also fails (and frees nothing) on a NULL value. */
static int put(json_t *obj, const char *key, json_t *val)
{
	return json_object_set_new(obj, key, val);
}

static json_t *json_u64(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX
						    : (json_int_t)v);
}

/* Latencies are finite by construction; a non-finite one renders as 0
 * rather than making the whole snapshot fail. */
static json_t *json_ms(double v)
{
	return json_real(isfinite(v) ? v : 0.0);
}

/* A fixed-size name field, even one that lost its terminator. */
static json_t *json_name(const char *name, size_t size)
{
	return json_stringn(name, strnlen(name, size));
}

static json_t *mux_to_json(const struct smux_mux_stats *s);

static json_t *backend_to_json(const struct smux_backend_stats *b)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= put(o, "name", json_name(b->name, sizeof(b->name)));
	rc |= put(o, "status", json_string(smux_status_name(b->status)));
	rc |= put(o, "hits", json_u64(b->hits));
	rc |= put(o, "misses", json_u64(b->misses));
	rc |= put(o, "errors", json_u64(b->errors));
	rc |= put(o, "timeouts", json_u64(b->timeouts));
	rc |= put(o, "lastLatencyMs", json_ms(b->last_latency_ms));
	rc |= put(o, "p50LatencyMs", json_ms(b->p50_latency_ms));
	rc |= put(o, "p99LatencyMs", json_ms(b->p99_latency_ms));
	rc |= put(o, "consecutiveFailures",
		  json_integer((json_int_t)b->consecutive_failures));
	rc |= put(o, "lastTransitionAt",
		  json_integer((json_int_t)b->last_transition_at));
	rc |= put(o, "inFlightCount",
		  json_integer((json_int_t)b->in_flight_count));
	if (b->has_weight)
		rc |= put(o, "weight", json_ms(b->weight));
	if (b->child)
		rc |= put(o, "mux", mux_to_json(b->child));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *mux_to_json(const struct smux_mux_stats *s)
{
	json_t *o = json_object();
	json_t *arr = json_array();
	int rc = 0;

	if (!o || !arr)
		goto out_free;
	rc |= put(o, "name", json_name(s->name, sizeof(s->name)));
	rc |= put(o, "mode", json_string(smux_mode_name(s->mode)));
	rc |= put(o, "totalCalls", json_u64(s->total_calls));
	rc |= put(o, "totalFailovers", json_u64(s->total_failovers));
	rc |= put(o, "totalFanoutPartials", json_u64(s->total_fanout_partials));
	rc |= put(o, "pendingHints",
		  json_integer((json_int_t)s->pending_hints));
	for (unsigned i = 0; i < s->n_backends && s->backends; i++)
		rc |= json_array_append_new(arr,
					    backend_to_json(&s->backends[i]));
	rc |= put(o, "backends", arr);
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;

out_free:
	json_decref(arr);
	json_decref(o);
	return NULL;
}

char *smux_mux_stats_json(const struct smux_mux_stats *s, bool pretty)
{
	size_t flags = JSON_PRESERVE_ORDER;
	json_t *root;
	char *out;

	if (!s)
		return NULL;
	root = mux_to_json(s);
	if (!root)
		return NULL;
	flags |= pretty ? JSON_INDENT(2) : JSON_COMPACT;
	out = json_dumps(root, flags);
	json_decref(root);
	return out;
}
