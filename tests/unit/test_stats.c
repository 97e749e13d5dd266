/* SPDX-License-Identifier: MIT */
/*
 * test_stats.c - per-member stats (core/stats.h): counters by outcome, the
 * Algorithm R reservoir (bounded, uniform), nearest-rank percentiles,
 * concurrent recording, and the stats tree of mux.h as JSON.
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/stats.h"

/* Newton's square root: the build links no libm. */
static double root2(double x)
{
	double r = x > 1 ? x : 1;

	for (int i = 0; i < 200; i++)
		r = (r + x / r) / 2;
	return r;
}

static void assert_close(double got, double want, double eps)
{
	if (!(fabs(got - want) <= eps))
		fail_msg("got %.9g, want %.9g (+/- %g)", got, want, eps);
}

static void test_counters(void **state)
{
	struct smux__stats s;
	struct smux_backend_stats out;
	int i;

	(void)state;
	smux__stats_init(&s, 1);
	for (i = 0; i < 3; i++)
		smux__stats_record(&s, SMUX_OUTCOME_OK, SMUX_OK, 1);
	for (i = 0; i < 2; i++)
		smux__stats_record(&s, SMUX_OUTCOME_SEMANTIC,
				   SMUX_E_KEY_NOT_FOUND, 1);
	smux__stats_record(&s, SMUX_OUTCOME_SEMANTIC, SMUX_E_INVALID_KEY, 1);
	for (i = 0; i < 4; i++)
		smux__stats_record(&s, SMUX_OUTCOME_TIMEOUT,
				   SMUX_E_BACKEND_TIMEOUT, 1);
	for (i = 0; i < 5; i++)
		smux__stats_record(&s, SMUX_OUTCOME_TRANSIENT,
				   SMUX_E_CONNECTION, 1);
	smux__stats_record(&s, SMUX_OUTCOME_ABORT, SMUX_E_BACKEND_ABORTED,
			   12.345);

	memset(&out, 0xff, sizeof(out));
	smux__stats_read(&s, &out);
	assert_int_equal(out.hits, 3);
	assert_int_equal(out.misses, 2);
	assert_int_equal(out.errors, 1 + 4 + 5 + 1);
	assert_int_equal(out.timeouts, 4);
	assert_close(out.last_latency_ms, 12.345, 1e-3);
	assert_int_equal(s.seen, 16);

	/* Bad latencies are kept as 0, never as NaN or negative. */
	smux__stats_record(&s, SMUX_OUTCOME_OK, SMUX_OK, NAN);
	smux__stats_read(&s, &out);
	assert_close(out.last_latency_ms, 0, 0);
	smux__stats_record(&s, SMUX_OUTCOME_OK, SMUX_OK, -5);
	smux__stats_read(&s, &out);
	assert_close(out.last_latency_ms, 0, 0);
	assert_close(s.sample[16], 0, 0);
	assert_close(s.sample[17], 0, 0);
	smux__stats_release(&s);
}

static void test_empty(void **state)
{
	struct smux__stats s;
	struct smux_backend_stats out;

	(void)state;
	smux__stats_init(&s, 0);
	memset(&out, 0xff, sizeof(out));
	smux__stats_read(&s, &out);
	assert_int_equal(out.hits, 0);
	assert_int_equal(out.errors, 0);
	assert_close(out.last_latency_ms, 0, 0);
	assert_close(out.p50_latency_ms, 0, 0);
	assert_close(out.p99_latency_ms, 0, 0);
	smux__stats_release(&s);
}

/* Fisher-Yates with a local generator, so order never matters. */
static void shuffle(double *v, unsigned n, uint64_t seed)
{
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j;
		double t;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (unsigned)((seed >> 33) % (i + 1));
		t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static double pct(const double *src, unsigned n, double p)
{
	double v[256];

	memcpy(v, src, n * sizeof(v[0]));
	shuffle(v, n, (uint64_t)(p * 1000) + n);
	return smux__percentile(v, n, p);
}

static void test_percentile(void **state)
{
	double v[100];

	(void)state;
	for (int i = 0; i < 100; i++)
		v[i] = i + 1;
	assert_close(pct(v, 100, 50), 50, 0);
	assert_close(pct(v, 100, 99), 99, 0);
	assert_close(pct(v, 100, 25), 25, 0);
	assert_close(pct(v, 100, 99.5), 100, 0);
	assert_close(pct(v, 100, 100), 100, 0);
	assert_close(pct(v, 100, 1), 1, 0);
	assert_close(pct(v, 100, 0), 1, 0);
	/* 1..10: p50 is rank 5, p90 rank 9, p99 rank ceil(9.9) = 10. */
	assert_close(pct(v, 10, 50), 5, 0);
	assert_close(pct(v, 10, 90), 9, 0);
	assert_close(pct(v, 10, 99), 10, 0);
	assert_close(pct(v, 10, 51), 6, 0);
	/* One value is every percentile; none is 0. */
	assert_close(pct(v + 41, 1, 50), 42, 0);
	assert_close(pct(v + 41, 1, 99), 42, 0);
	assert_close(smux__percentile(v, 0, 50), 0, 0);
	/* A skewed distribution: 90 fast calls, 10 slow ones. */
	for (int i = 0; i < 100; i++)
		v[i] = i < 90 ? 2.0 : 500.0;
	assert_close(pct(v, 100, 50), 2, 0);
	assert_close(pct(v, 100, 90), 2, 0);
	assert_close(pct(v, 100, 91), 500, 0);
	assert_close(pct(v, 100, 99), 500, 0);
}

static void test_read_percentiles(void **state)
{
	struct smux__stats s;
	struct smux_backend_stats out;
	double v[100];

	(void)state;
	for (int i = 0; i < 100; i++)
		v[i] = i + 1;
	shuffle(v, 100, 7);
	smux__stats_init(&s, 3);
	for (int i = 0; i < 100; i++)
		smux__stats_record(&s, SMUX_OUTCOME_OK, SMUX_OK, v[i]);
	smux__stats_read(&s, &out);
	assert_close(out.p50_latency_ms, 50, 0);
	assert_close(out.p99_latency_ms, 99, 0);
	assert_close(out.last_latency_ms, v[99], 1e-3);
	/* Reading sorts a copy: the reservoir keeps arrival order. */
	assert_memory_equal(s.sample, v, sizeof(v));
	smux__stats_release(&s);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void test_reservoir_bounded(void **state)
{
	struct smux__stats s;
	struct smux_backend_stats out;
	double v[SMUX__RESERVOIR];
	unsigned early = 0;

	(void)state;
	smux__stats_init(&s, 42);
	for (int i = 0; i < 100000; i++)
		smux__stats_record(&s, SMUX_OUTCOME_OK, SMUX_OK, i);
	assert_int_equal(s.seen, 100000);
	assert_int_equal(atomic_load(&s.hits), 100000);

	/* 256 distinct values that were all fed in. */
	memcpy(v, s.sample, sizeof(v));
	qsort(v, SMUX__RESERVOIR, sizeof(v[0]), cmp_dbl);
	for (unsigned i = 0; i < SMUX__RESERVOIR; i++) {
		assert_true(v[i] >= 0 && v[i] < 100000);
		assert_close(v[i], (double)(int64_t)v[i], 0);
		if (i > 0)
			assert_true(v[i] > v[i - 1]);
		if (v[i] < SMUX__RESERVOIR)
			early++;
	}
	/* Each of the first 256 survives with p = 256/100000. */
	assert_true(early <= 8);

	/* Percentiles come from the reservoir, not from the last samples. */
	smux__stats_read(&s, &out);
	assert_close(out.last_latency_ms, 99999, 1e-3);
	assert_close(out.p50_latency_ms, 50000, 10000);
	assert_true(out.p99_latency_ms > 90000);
	smux__stats_release(&s);
}

/*
 * Algorithm R keeps every sample with the same probability. Feed 0..N-1 in
 * order: the reservoir is a uniform sample without replacement, whose mean
 * has sigma = sqrt((N^2 - 1) / 12 / n * (N - n) / (N - 1)).
 */
#define UNI_N	  10000
#define UNI_SEEDS 200

static void test_uniformity(void **state)
{
	const double n = SMUX__RESERVOIR, N = UNI_N;
	const double sigma =
		root2((N * N - 1) / 12 / n * (N - n) / (N - 1)); /* ~178 */
	unsigned decile[10] = {0};
	double chi2 = 0, expect, grand = 0;
	struct smux__stats *s = malloc(sizeof(*s));

	(void)state;
	assert_non_null(s);
	for (uint64_t seed = 1; seed <= UNI_SEEDS; seed++) {
		double mean = 0;

		smux__stats_init(s, seed);
		for (int i = 0; i < UNI_N; i++)
			smux__stats_record(s, SMUX_OUTCOME_OK, SMUX_OK, i);
		for (unsigned i = 0; i < SMUX__RESERVOIR; i++) {
			mean += s->sample[i];
			decile[(unsigned)s->sample[i] / (UNI_N / 10)]++;
		}
		mean /= n;
		if (fabs(mean - (N - 1) / 2) > 5 * sigma)
			fail_msg("seed %llu: reservoir mean %.1f, want "
				 "%.1f +/- %.1f",
				 (unsigned long long)seed, mean, (N - 1) / 2,
				 5 * sigma);
		grand += mean;
		smux__stats_release(s);
	}
	/* The mean of 200 means is 14x tighter. */
	grand /= UNI_SEEDS;
	assert_close(grand, (N - 1) / 2, 5 * sigma / root2(UNI_SEEDS));

	/* Every tenth of the stream is equally represented (chi-square,
	 * 9 degrees of freedom; 42.6 is p = 1e-6). */
	expect = UNI_SEEDS * n / 10;
	for (int i = 0; i < 10; i++)
		chi2 += (decile[i] - expect) * (decile[i] - expect) / expect;
	if (chi2 > 42.6)
		fail_msg("chi-square %.1f over deciles", chi2);
	free(s);
}

/* Each member has its own stream: two seeds keep different samples. */
static void test_seeded(void **state)
{
	struct smux__stats a, b, c;

	(void)state;
	smux__stats_init(&a, 1);
	smux__stats_init(&b, 2);
	smux__stats_init(&c, 1);
	for (int i = 0; i < 5000; i++) {
		smux__stats_record(&a, SMUX_OUTCOME_OK, SMUX_OK, i);
		smux__stats_record(&b, SMUX_OUTCOME_OK, SMUX_OK, i);
		smux__stats_record(&c, SMUX_OUTCOME_OK, SMUX_OK, i);
	}
	assert_memory_not_equal(a.sample, b.sample, sizeof(a.sample));
	assert_memory_equal(a.sample, c.sample, sizeof(a.sample));
	smux__stats_release(&a);
	smux__stats_release(&b);
	smux__stats_release(&c);
}

/* ---- concurrency ---- */

#define REC_THREADS 4
#define REC_PER	    25000

static void *recorder(void *arg)
{
	struct smux__stats *s = arg;

	for (int i = 0; i < REC_PER; i++) {
		switch (i % 5) {
		case 0:
		case 1:
			smux__stats_record(s, SMUX_OUTCOME_OK, SMUX_OK, i);
			break;
		case 2:
			smux__stats_record(s, SMUX_OUTCOME_SEMANTIC,
					   SMUX_E_KEY_NOT_FOUND, i);
			break;
		case 3:
			smux__stats_record(s, SMUX_OUTCOME_TIMEOUT,
					   SMUX_E_BACKEND_TIMEOUT, i);
			break;
		default:
			smux__stats_record(s, SMUX_OUTCOME_TRANSIENT, SMUX_E_IO,
					   i);
			break;
		}
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct smux__stats *s = arg;
	struct smux_backend_stats out;

	for (int i = 0; i < 200; i++) {
		smux__stats_read(s, &out);
		assert_true(out.p50_latency_ms <= out.p99_latency_ms);
	}
	return NULL;
}

static void test_concurrent_record(void **state)
{
	struct smux__stats s;
	struct smux_backend_stats out;
	pthread_t t[REC_THREADS + 1];
	const uint64_t total = (uint64_t)REC_THREADS * REC_PER;

	(void)state;
	smux__stats_init(&s, 9);
	for (int i = 0; i < REC_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, recorder, &s), 0);
	assert_int_equal(pthread_create(&t[REC_THREADS], NULL, reader, &s), 0);
	for (int i = 0; i <= REC_THREADS; i++)
		pthread_join(t[i], NULL);
	smux__stats_read(&s, &out);
	assert_int_equal(out.hits, total * 2 / 5);
	assert_int_equal(out.misses, total / 5);
	assert_int_equal(out.timeouts, total / 5);
	assert_int_equal(out.errors, total * 2 / 5);
	assert_int_equal(s.seen, total);
	for (unsigned i = 0; i < SMUX__RESERVOIR; i++)
		assert_true(s.sample[i] >= 0 && s.sample[i] < REC_PER);
	smux__stats_release(&s);
}

/* ---- the stats tree and its JSON ---- */

static struct smux_mux_stats *new_tree(void)
{
	struct smux_mux_stats *root = calloc(1, sizeof(*root));
	struct smux_mux_stats *child = calloc(1, sizeof(*child));
	struct smux_backend_stats *b;

	assert_non_null(root);
	assert_non_null(child);
	snprintf(child->name, sizeof(child->name), "%s", "edge");
	child->mode = SMUX_MODE_ROUND_ROBIN;
	child->total_calls = 7;
	child->n_backends = 1;
	child->backends = calloc(1, sizeof(*child->backends));
	assert_non_null(child->backends);
	snprintf(child->backends[0].name, SMUX_ERROR_NAME_MAX, "%s", "edge-a");
	child->backends[0].status = SMUX_STATUS_DRAINING;
	child->backends[0].hits = 5;

	snprintf(root->name, sizeof(root->name), "%s", "root");
	root->mode = SMUX_MODE_WEIGHTED;
	root->total_calls = 1000;
	root->total_failovers = 12;
	root->total_fanout_partials = 3;
	root->pending_hints = 4;
	root->n_backends = 2;
	root->backends = calloc(2, sizeof(*root->backends));
	assert_non_null(root->backends);
	b = &root->backends[0];
	snprintf(b->name, sizeof(b->name), "%s", "disk");
	b->status = SMUX_STATUS_DOWN;
	b->hits = 900;
	b->misses = 40;
	b->errors = 60;
	b->timeouts = 9;
	b->last_latency_ms = 1.5;
	b->p50_latency_ms = 2.25;
	b->p99_latency_ms = 80.125;
	b->consecutive_failures = 3;
	b->last_transition_at = 1700000000123LL;
	b->in_flight_count = 2;
	b->has_weight = true;
	b->weight = 3;
	b = &root->backends[1];
	snprintf(b->name, sizeof(b->name), "%s", "edge");
	b->status = SMUX_STATUS_UP;
	b->hits = 7;
	b->child = child;
	return root;
}

static const char *const mux_keys[] = {
	"name",
	"mode",
	"totalCalls",
	"totalFailovers",
	"totalFanoutPartials",
	"pendingHints",
	"backends",
};
static const char *const backend_keys[] = {
	"name",
	"status",
	"hits",
	"misses",
	"errors",
	"timeouts",
	"lastLatencyMs",
	"p50LatencyMs",
	"p99LatencyMs",
	"consecutiveFailures",
	"lastTransitionAt",
	"inFlightCount",
	"weight",
	"mux",
};

/* @o has exactly keys[0..n) in that order, plus the optional ones given. */
static void assert_keys(json_t *o, const char *const *keys, size_t n,
			bool weight, bool mux)
{
	void *it = json_object_iter(o);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(keys[i], "weight") == 0 && !weight)
			continue;
		if (strcmp(keys[i], "mux") == 0 && !mux)
			continue;
		assert_non_null(it);
		assert_string_equal(json_object_iter_key(it), keys[i]);
		it = json_object_iter_next(o, it);
	}
	assert_null(it);
}

static json_int_t int_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		fail_msg("\"%s\" is not an integer", k);
	return json_integer_value(v);
}

static double real_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_real(v))
		fail_msg("\"%s\" is not a real", k);
	return json_real_value(v);
}

static const char *str_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_string(v))
		fail_msg("\"%s\" is not a string", k);
	return json_string_value(v);
}

static void check_tree_json(const char *text)
{
	json_error_t jerr;
	json_t *root = json_loads(text, 0, &jerr);
	json_t *arr, *b, *child, *cb;

	if (!root)
		fail_msg("bad JSON: %s: %s", jerr.text, text);
	assert_keys(root, mux_keys, 7, false, false);
	assert_string_equal(str_of(root, "name"), "root");
	assert_string_equal(str_of(root, "mode"), "weighted");
	assert_int_equal(int_of(root, "totalCalls"), 1000);
	assert_int_equal(int_of(root, "totalFailovers"), 12);
	assert_int_equal(int_of(root, "totalFanoutPartials"), 3);
	assert_int_equal(int_of(root, "pendingHints"), 4);
	arr = json_object_get(root, "backends");
	assert_true(json_is_array(arr));
	assert_int_equal(json_array_size(arr), 2);

	b = json_array_get(arr, 0);
	assert_keys(b, backend_keys, 14, true, false);
	assert_string_equal(str_of(b, "name"), "disk");
	assert_string_equal(str_of(b, "status"), "down");
	assert_int_equal(int_of(b, "hits"), 900);
	assert_int_equal(int_of(b, "misses"), 40);
	assert_int_equal(int_of(b, "errors"), 60);
	assert_int_equal(int_of(b, "timeouts"), 9);
	assert_close(real_of(b, "lastLatencyMs"), 1.5, 0);
	assert_close(real_of(b, "p50LatencyMs"), 2.25, 0);
	assert_close(real_of(b, "p99LatencyMs"), 80.125, 0);
	assert_int_equal(int_of(b, "consecutiveFailures"), 3);
	assert_int_equal(int_of(b, "lastTransitionAt"), 1700000000123LL);
	assert_int_equal(int_of(b, "inFlightCount"), 2);
	assert_close(real_of(b, "weight"), 3, 0);

	b = json_array_get(arr, 1);
	assert_keys(b, backend_keys, 14, false, true);
	assert_string_equal(str_of(b, "name"), "edge");
	assert_string_equal(str_of(b, "status"), "up");
	assert_int_equal(int_of(b, "hits"), 7);
	assert_close(real_of(b, "p99LatencyMs"), 0, 0);
	assert_null(json_object_get(b, "weight"));

	child = json_object_get(b, "mux");
	assert_true(json_is_object(child));
	assert_keys(child, mux_keys, 7, false, false);
	assert_string_equal(str_of(child, "name"), "edge");
	assert_string_equal(str_of(child, "mode"), "round-robin");
	assert_int_equal(int_of(child, "totalCalls"), 7);
	assert_int_equal(json_array_size(json_object_get(child, "backends")),
			 1);
	cb = json_array_get(json_object_get(child, "backends"), 0);
	assert_keys(cb, backend_keys, 14, false, false);
	assert_string_equal(str_of(cb, "name"), "edge-a");
	assert_string_equal(str_of(cb, "status"), "draining");
	assert_int_equal(int_of(cb, "hits"), 5);
	json_decref(root);
}

static void test_json(void **state)
{
	struct smux_mux_stats *tree = new_tree();
	char *compact, *pretty;

	(void)state;
	compact = smux_mux_stats_json(tree, false);
	pretty = smux_mux_stats_json(tree, true);
	assert_non_null(compact);
	assert_non_null(pretty);
	check_tree_json(compact);
	check_tree_json(pretty);
	assert_null(strchr(compact, '\n'));
	assert_null(strchr(compact, ' '));
	assert_true(strncmp(compact, "{\"name\":\"root\",\"mode\":", 22) == 0);
	assert_true(strncmp(pretty, "{\n  \"name\": \"root\",\n  \"mode\"",
			    28) == 0);
	assert_non_null(strstr(pretty, "\n      \"name\": \"disk\""));
	free(compact);
	free(pretty);
	smux_mux_stats_free(tree);
}

/* Empty mux, a counter beyond INT64_MAX, a name without terminator. */
static void test_json_edges(void **state)
{
	struct smux_mux_stats *s = calloc(1, sizeof(*s));
	json_t *root;
	char *text;

	(void)state;
	assert_non_null(s);
	memset(s->name, 'x', sizeof(s->name));
	s->total_calls = UINT64_MAX;
	text = smux_mux_stats_json(s, false);
	assert_non_null(text);
	root = json_loads(text, 0, NULL);
	assert_non_null(root);
	assert_int_equal(strlen(str_of(root, "name")), SMUX_ERROR_NAME_MAX);
	assert_int_equal(int_of(root, "totalCalls"), INT64_MAX);
	assert_int_equal(json_array_size(json_object_get(root, "backends")), 0);
	json_decref(root);
	free(text);
	smux_mux_stats_free(s);
	smux_mux_stats_free(NULL);
	assert_null(smux_mux_stats_json(NULL, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_percentile),
		cmocka_unit_test(test_read_percentiles),
		cmocka_unit_test(test_reservoir_bounded),
		cmocka_unit_test(test_uniformity),
		cmocka_unit_test(test_seeded),
		cmocka_unit_test(test_concurrent_record),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_json_edges),
	};

	return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
