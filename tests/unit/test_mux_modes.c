// SPDX-License-Identifier: MIT
/*
 * test_mux_modes.c - routing of the six modes (seed section 3, DESIGN
 * section 3) through src/core/mux*.c: failover fall-through and its error
 * (attempts, cause), no fall-through on semantic errors, round-robin
 * rotation, weighted frequencies (real and injected randomness, weight 0),
 * sticky-by-key FNV-1a mapping and its union listing, the mirror's
 * de-duplicated union listing, nesting limits, the stats tree and its JSON,
 * and the trace spans.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "mux_helpers.h"
#include "smux/file.h"
#include "smux/linkobj.h"

/* Three faulty wrappers f0..f2 over three memory backends mem0..mem2. */
struct trio {
	struct smux_backend *mem[3];
	struct smux_backend *f[3];
};

static void trio_init(struct trio *t, bool shared)
{
	char name[32];

	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		t->mem[i] = (shared && i) ? smux_backend_ref(t->mem[0])
					  : mh_memory(name);
		snprintf(name, sizeof(name), "f%d", i);
		t->f[i] = mh_faulty(name, t->mem[i], NULL);
	}
}

static void trio_release(struct trio *t)
{
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(t->f[i]);
		smux_backend_unref(t->mem[i]);
	}
}

static struct smux_mux_stats *stats_of(struct smux_backend *mux)
{
	struct smux_mux_stats *s = smux_mux_stats(mux);

	assert_non_null(s);
	return s;
}

/* ---- failover ---- */

static void test_failover_fallthrough(void **state)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_FAILOVER,
		.cooldown_ms = 600000,
	};
	struct mh_events *ev = mh_events_new();
	struct smux_mux_stats *st;
	struct smux_event last;
	struct smux_backend *mux;
	struct smux_error err;
	struct trio t;
	char *got;
	int rc;

	(void)state;
	trio_init(&t, false);
	o.events = ev->bus;
	MH_OK(mh_put(t.mem[1], "k", "from-1", &err), &err);
	mh_fail(t.f[0], true);
	mux = mh_mux("fo", &o, t.f, NULL, 3);

	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "from-1");
	free(got);
	assert_int_equal(smux_faulty_calls(t.f[0]), 1);
	assert_int_equal(smux_faulty_calls(t.f[1]), 1);
	assert_int_equal(smux_faulty_calls(t.f[2]), 0);
	assert_int_equal(mh_events_count(ev, SMUX_EV_FAILOVER), 1);
	assert_true(mh_events_last(ev, SMUX_EV_FAILOVER, &last));
	assert_string_equal(last.from, "f0");
	assert_string_equal(last.to, "f1");
	assert_int_equal(last.attempt_index, 1);
	assert_int_equal(last.cause.code, SMUX_E_IO);
	assert_int_equal(mh_events_count(ev, SMUX_EV_BACKEND_DOWN), 1);
	st = stats_of(mux);
	assert_int_equal(st->total_calls, 1);
	assert_int_equal(st->total_failovers, 1);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_DOWN);
	assert_int_equal(st->backends[0].errors, 1);
	assert_int_equal(st->backends[1].hits, 1);
	smux_mux_stats_free(st);

	/* f0 is down (cooldown): the next get goes straight to f1 */
	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	free(got);
	assert_int_equal(smux_faulty_calls(t.f[0]), 1);
	assert_int_equal(smux_faulty_calls(t.f[1]), 2);

	smux_backend_unref(mux);
	trio_release(&t);
	mh_events_free(ev);
}

/* Two transient failures, then a semantic answer: 3 attempts, and the
 * semantic error (not wrapped) is what the caller sees. */
static void test_failover_attempts(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mux;
	struct smux_error err;
	struct trio t;
	int rc;

	(void)state;
	trio_init(&t, false);
	mh_fail(t.f[0], true);
	mh_fail(t.f[1], true);
	mux = mh_mux("fo", &o, t.f, NULL, 3);
	assert_null(mh_get(mux, "absent", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(err.e.attempts, 3);
	assert_string_equal(err.e.backend, "fo");
	assert_true(err.has_cause);
	assert_int_equal(err.cause.code, SMUX_E_KEY_NOT_FOUND);
	smux_backend_unref(mux);
	trio_release(&t);
}

static void test_all_backends_down(void **state)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_FAILOVER,
		.cooldown_ms = 600000,
	};
	struct smux_backend *mux;
	struct smux_error err;
	struct trio t;
	int rc;

	(void)state;
	trio_init(&t, false);
	for (int i = 0; i < 3; i++)
		mh_fail(t.f[i], true);
	mux = mh_mux("fo", &o, t.f, NULL, 3);
	assert_null(mh_get(mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	assert_int_equal(err.e.attempts, 3);
	assert_string_equal(err.e.backend, "fo");
	assert_true(err.has_cause);
	assert_int_equal(err.cause.code, SMUX_E_IO);
	assert_string_equal(err.cause.backend, "f2"); /* the last one */
	for (int i = 0; i < 3; i++)
		assert_int_equal(smux_faulty_calls(t.f[i]), 1);

	/* every member in its cooldown now: no member is called (the
	 * dispatch wrapper reports a failed call as at least 1 attempt) */
	assert_null(mh_get(mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	assert_false(err.has_cause);
	for (int i = 0; i < 3; i++)
		assert_int_equal(smux_faulty_calls(t.f[i]), 1);
	smux_backend_unref(mux);
	trio_release(&t);
}

static void test_semantic_no_fallthrough(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_mux_stats *st;
	struct smux_backend *mux;
	struct smux_error err;
	struct trio t;
	int rc;

	(void)state;
	trio_init(&t, false);
	MH_OK(mh_put(t.mem[1], "k", "only-on-1", &err), &err);
	mux = mh_mux("fo", &o, t.f, NULL, 3);
	assert_null(mh_get(mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(err.e.attempts, 1);
	assert_int_equal(err.e.sys_errno, ENOENT);
	assert_int_equal(smux_faulty_calls(t.f[0]), 1);
	assert_int_equal(smux_faulty_calls(t.f[1]), 0);
	assert_int_equal(smux_faulty_calls(t.f[2]), 0);
	st = stats_of(mux);
	assert_int_equal(st->backends[0].misses, 1);
	assert_int_equal(st->backends[0].status, SMUX_STATUS_UP);
	assert_int_equal(st->total_failovers, 0);
	smux_mux_stats_free(st);
	smux_backend_unref(mux);
	trio_release(&t);
}

/* ---- round-robin ---- */

static void test_round_robin(void **state)
{
	/* a long cooldown: no probe of the failing member during the test */
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_ROUND_ROBIN,
		.cooldown_ms = 600000,
	};
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct trio t;

	(void)state;
	smux_ctx_init(&ctx);
	trio_init(&t, true);
	MH_OK(mh_put(t.mem[0], "k", "v", &err), &err);
	mux = mh_mux("rr", &o, t.f, NULL, 3);
	for (int i = 0; i < 300; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	for (int i = 0; i < 3; i++)
		assert_int_equal(smux_faulty_calls(t.f[i]), 100);

	/* a failing member falls through once, then is skipped */
	mh_fail(t.f[1], true);
	for (int i = 0; i < 300; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_int_equal(smux_faulty_calls(t.f[1]), 101);
	assert_int_equal(smux_faulty_calls(t.f[0]) + smux_faulty_calls(t.f[2]),
			 500);
	assert_in_range(smux_faulty_calls(t.f[0]), 240, 260);
	smux_backend_unref(mux);
	trio_release(&t);
}

/* ---- weighted ---- */

static void test_weighted_frequencies(void **state)
{
	static const double w[3] = {1, 2, 7};
	struct smux_mux_opts o = {.mode = SMUX_MODE_WEIGHTED};
	const int draws = 20000;
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct trio t;

	(void)state;
	smux_ctx_init(&ctx);
	trio_init(&t, true);
	MH_OK(mh_put(t.mem[0], "k", "v", &err), &err);
	mux = mh_mux("w", &o, t.f, w, 3);
	for (int i = 0; i < draws; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	for (int i = 0; i < 3; i++) {
		double p = w[i] / 10.0, mean = draws * p;
		double sigma = sqrt(draws * p * (1 - p));
		double got = (double)smux_faulty_calls(t.f[i]);

		print_message(
			"  weight %g: %.0f of %d (expected %.0f +- %.0f)\n",
			w[i], got, draws, mean, 5 * sigma);
		assert_true(fabs(got - mean) <= 5 * sigma);
	}
	smux_backend_unref(mux);
	trio_release(&t);
}

/*
 * An injected generator that walks a grid: for each of 3 alias slots, 100
 * evenly spaced coins. Draws come in pairs (slot, coin).
 */
struct grid_rng {
	atomic_uint n; /* draws so far */
};

static uint32_t grid_next(void *arg)
{
	struct grid_rng *g = arg;
	unsigned n = atomic_fetch_add(&g->n, 1), pair = n / 2;

	if (n % 2 == 0) /* the slot: (r1 * 3) >> 32 == pair / 100 % 3 */
		return (uint32_t)((((uint64_t)(pair / 100 % 3)) << 32) / 3 + 1);
	return (uint32_t)(((uint64_t)(pair % 100) << 32) / 100);
}

static void test_weighted_injected_rng(void **state)
{
	static const double w[3] = {1, 1, 2};
	struct grid_rng g;
	struct smux_rng rng = {.next = grid_next, .arg = &g};
	struct smux_mux_opts o = {.mode = SMUX_MODE_WEIGHTED, .rng = &rng};
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct trio t;

	(void)state;
	atomic_init(&g.n, 0);
	smux_ctx_init(&ctx);
	trio_init(&t, true);
	MH_OK(mh_put(t.mem[0], "k", "v", &err), &err);
	mux = mh_mux("w", &o, t.f, w, 3);
	/*
	 * Walker's table for 1:1:2 (scaled 0.75, 0.75, 1.5): slots 0 and 1
	 * keep their member with probability 0.75 and alias member 2, slot 2
	 * is member 2. The grid gives exactly 75, 75 and 150.
	 */
	for (int i = 0; i < 300; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_int_equal(atomic_load(&g.n), 600);
	assert_int_equal(smux_faulty_calls(t.f[0]), 75);
	assert_int_equal(smux_faulty_calls(t.f[1]), 75);
	assert_int_equal(smux_faulty_calls(t.f[2]), 150);
	smux_backend_unref(mux);
	trio_release(&t);
}

static void test_weight_zero(void **state)
{
	static const double w[3] = {0, 1, 1}, none[3] = {0, 0, 0};
	struct smux_mux_opts o = {.mode = SMUX_MODE_WEIGHTED};
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct trio t;

	(void)state;
	smux_ctx_init(&ctx);
	trio_init(&t, true);
	MH_OK(mh_put(t.mem[0], "k", "v", &err), &err);
	mux = mh_mux("w", &o, t.f, w, 3);
	for (int i = 0; i < 3000; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_int_equal(smux_faulty_calls(t.f[0]), 0);
	assert_in_range(smux_faulty_calls(t.f[1]), 1300, 1700);
	smux_backend_unref(mux);

	/* nothing to draw from: no backend is available */
	mux = mh_mux("w0", &o, t.f, none, 3);
	MH_ERR(smux_backend_head(mux, &ctx, "k", &info, &err), &err,
	       SMUX_E_ALL_BACKENDS_DOWN);
	smux_backend_unref(mux);
	trio_release(&t);
}

/* An injected generator that always draws 0: slot 0, coin 0 (slot 0
 * keeps its member whenever it has a weight). */
static uint32_t zero_next(void *arg)
{
	(void)arg;
	return 0;
}

/*
 * Issue 9, item 6: the re-rolls of a weighted selection kept landing on
 * the member that had just failed, and the operation answered
 * ALL_BACKENDS_DOWN although the other member, up and weighted, was never
 * tried. Every draw here lands on f0 (which fails): f1 must still serve.
 */
static void test_weighted_rerolls_reach_healthy(void **state)
{
	static const double w[2] = {1, 1};
	struct smux_rng rng = {.next = zero_next, .arg = NULL};
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_WEIGHTED,
		.rng = &rng,
		.cooldown_ms = 600000,
	};
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct trio t;

	(void)state;
	smux_ctx_init(&ctx);
	trio_init(&t, true);
	MH_OK(mh_put(t.mem[0], "k", "v", &err), &err);
	mh_fail(t.f[0], true);
	mux = mh_mux("w", &o, t.f, w, 2);
	MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_int_equal(smux_faulty_calls(t.f[0]), 1);
	assert_int_equal(smux_faulty_calls(t.f[1]), 1);
	/* f0 is down now: the table holds f1 alone */
	MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_int_equal(smux_faulty_calls(t.f[0]), 1);
	assert_int_equal(smux_faulty_calls(t.f[1]), 2);
	smux_backend_unref(mux);
	trio_release(&t);
}

/* ---- sticky-by-key ---- */

static void test_fnv1a_vectors(void **state)
{
	(void)state;
	assert_int_equal(smux_fnv1a("", 0), 0x811c9dc5u);
	assert_int_equal(smux_fnv1a("a", 1), 0xe40c292cu);
	assert_int_equal(smux_fnv1a("foobar", 6), 0xbf9cf968u);
}

/* Calls on the members of @t so far. */
static void calls_of(const struct trio *t, unsigned long *c)
{
	for (int i = 0; i < 3; i++)
		c[i] = smux_faulty_calls(t->f[i]);
}

static void test_sticky_mapping(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_STICKY};
	unsigned per_shard[3] = {0};
	struct smux_backend *mux;
	struct smux_error err;
	struct trio t;
	char key[32], *got;
	int rc;

	(void)state;
	trio_init(&t, false);
	mux = mh_mux("st", &o, t.f, NULL, 3);
	for (int i = 0; i < 60; i++) {
		unsigned shard;

		snprintf(key, sizeof(key), "dir/key-%d", i);
		shard = smux_fnv1a(key, strlen(key)) % 3;
		per_shard[shard]++;
		MH_OK(mh_put(mux, key, key, &err), &err);
		for (unsigned s = 0; s < 3; s++) {
			if (s == shard)
				MH_HOLDS(t.mem[s], key, key);
			else
				MH_LACKS(t.mem[s], key);
		}
	}
	for (int s = 0; s < 3; s++)
		assert_true(per_shard[s] > 0);
	/* stable: every get goes to the key's shard, and only there */
	for (int i = 0; i < 60; i++) {
		unsigned long before[3], after[3];
		unsigned shard;

		snprintf(key, sizeof(key), "dir/key-%d", i);
		shard = smux_fnv1a(key, strlen(key)) % 3;
		calls_of(&t, before);
		got = mh_get(mux, key, &rc, &err);
		MH_OK(rc, &err);
		assert_string_equal(got, key);
		free(got);
		calls_of(&t, after);
		for (unsigned s = 0; s < 3; s++)
			assert_int_equal(after[s] - before[s], s == shard);
	}

	/* with f1 down a key keeps its home, fnv1a(key) % 3 over every
	 * member; one whose home is f1 is handed off to the next shard, f2,
	 * with a hint for f1 (mux_sticky.c) */
	mh_fail(t.f[1], true);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "down/key-%d", i);
		MH_OK(mh_put(mux, key, key, &err), &err);
	}
	mh_fail(t.f[1], false);
	for (int i = 0; i < 40; i++) {
		unsigned shard;

		snprintf(key, sizeof(key), "down/key-%d", i);
		shard = smux_fnv1a(key, strlen(key)) % 3;
		if (shard == 1)
			shard = 2;
		for (unsigned s = 0; s < 3; s++) {
			if (s == shard)
				MH_HOLDS(t.mem[s], key, key);
			else
				MH_LACKS(t.mem[s], key);
		}
	}
	smux_backend_unref(mux);
	trio_release(&t);
}

struct keys {
	unsigned n;
	char k[64][32];
	bool pfx[64];
};

static int keys_cb(void *arg, const struct smux_list_entry *e)
{
	struct keys *k = arg;

	if (k->n >= 64)
		return 1;
	snprintf(k->k[k->n], sizeof(k->k[0]), "%s", e->key);
	k->pfx[k->n++] = e->is_prefix;
	return 0;
}

static void list_all(struct smux_backend *b, const char *prefix,
		     const char *delim, struct keys *out)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	memset(out, 0, sizeof(*out));
	MH_OK(smux_backend_list(b, &ctx, prefix, delim, keys_cb, out, &err),
	      &err);
}

/* Calls each member's faulty wrapper has seen since @before. */
static void calls_since(struct trio *t, const unsigned long *before,
			unsigned long *d)
{
	for (int i = 0; i < 3; i++)
		d[i] = smux_faulty_calls(t->f[i]) - before[i];
}

/* Three file backends under @base (mkdtemp'd), each in a faulty
 * wrapper that counts calls: file backends answer sync of a missing key
 * with KEY_NOT_FOUND (a backend without ops->sync answers 0 for any). */
static void trio_init_files(struct trio *t, char *base)
{
	struct smux_file_opts fo = {.no_fsync = true};
	char name[32], dir[64];
	struct smux_error err;

	assert_non_null(mkdtemp(base));
	for (int i = 0; i < 3; i++) {
		snprintf(dir, sizeof(dir), "%s/%d", base, i);
		assert_int_equal(mkdir(dir, 0700), 0);
		fo.path = dir;
		snprintf(name, sizeof(name), "file%d", i);
		MH_OK(smux_file_new(name, &fo, &t->mem[i], &err), &err);
		snprintf(name, sizeof(name), "f%d", i);
		t->f[i] = mh_faulty(name, t->mem[i], NULL);
	}
}

/*
 * sync goes where the key is, as setattr does: every replica of a mirror
 * or shield, only the primary of a failover, the holding shard of a
 * sticky-by-key mux, its home while every shard is up (every shard for
 * the root, which is on all of them).
 */
static void test_sync_routing(void **state)
{
	static const enum smux_mode modes[] = {
		SMUX_MODE_MIRROR, SMUX_MODE_SHIELD, SMUX_MODE_FAILOVER,
		SMUX_MODE_STICKY};
	unsigned long before[3], d[3];
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_ctx ctx;
	struct trio t;

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct smux_mux_opts o = {.mode = modes[m]};
		char base[] = "/tmp/smux-test-sync.XXXXXX";
		const char *key = "dir/synced";
		unsigned holder = smux_fnv1a(key, strlen(key)) % 3;

		trio_init_files(&t, base);
		mux = mh_mux("sy", &o, t.f, NULL, 3);
		MH_OK(mh_put(mux, key, "x", &err), &err);
		for (int i = 0; i < 3; i++)
			before[i] = smux_faulty_calls(t.f[i]);
		MH_OK(smux_backend_sync(mux, &ctx, key, &err), &err);
		calls_since(&t, before, d);
		switch (modes[m]) {
		case SMUX_MODE_MIRROR:
		case SMUX_MODE_SHIELD:
			for (int i = 0; i < 3; i++)
				assert_int_equal(d[i], 1);
			break;
		case SMUX_MODE_FAILOVER:
			assert_true(d[0] >= 1);
			assert_int_equal(d[1] + d[2], 0);
			break;
		default:
			/* only the key's home shard */
			for (unsigned i = 0; i < 3; i++)
				assert_int_equal(d[i], i == holder ? 1 : 0);
			break;
		}
		/* the root and a directory marker are valid keys */
		for (int i = 0; i < 3; i++)
			before[i] = smux_faulty_calls(t.f[i]);
		MH_OK(smux_backend_sync(mux, &ctx, "", &err), &err);
		calls_since(&t, before, d);
		if (modes[m] != SMUX_MODE_FAILOVER)
			for (int i = 0; i < 3; i++)
				assert_int_equal(d[i], 1);
		MH_OK(smux_backend_sync(mux, &ctx, "dir/", &err), &err);
		MH_ERR(smux_backend_sync(mux, &ctx, "/abs", &err), &err,
		       SMUX_E_INVALID_KEY);
		if (modes[m] != SMUX_MODE_STICKY)
			MH_ERR(smux_backend_sync(mux, &ctx, "nope", &err), &err,
			       SMUX_E_KEY_NOT_FOUND);
		smux_backend_unref(mux);
		trio_release(&t);
		mh_rm_rf(base);
	}
}

static void test_sticky_list_union(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_STICKY};
	unsigned on[3] = {0};
	struct smux_backend *mux;
	struct smux_error err;
	struct keys k;
	struct trio t;
	char key[32];

	(void)state;
	trio_init(&t, false);
	mux = mh_mux("st", &o, t.f, NULL, 3);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "u/%02d", i);
		MH_OK(mh_put(mux, key, "x", &err), &err);
		on[smux_fnv1a(key, strlen(key)) % 3]++;
	}
	for (int s = 0; s < 3; s++)
		assert_true(on[s] > 0 && on[s] < 20); /* really sharded */
	list_all(mux, "u/", NULL, &k);
	assert_int_equal(k.n, 20);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "u/%02d", i);
		assert_string_equal(k.k[i], key);
	}
	/* with a delimiter, "u/" is one prefix though every shard has it */
	list_all(mux, "", "/", &k);
	assert_int_equal(k.n, 1);
	assert_string_equal(k.k[0], "u/");
	assert_true(k.pfx[0]);
	smux_backend_unref(mux);
	trio_release(&t);
}

/* ---- mirror listing ---- */

static void test_mirror_list_union(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	static const char *const want[] = {"m/a", "m/b", "m/only-1",
					   "m/only-2"};
	struct smux_backend *mux;
	struct smux_error err;
	struct keys k;
	struct trio t;

	(void)state;
	trio_init(&t, false);
	mux = mh_mux("mi", &o, t.f, NULL, 3);
	MH_OK(mh_put(mux, "m/a", "a", &err), &err);
	MH_OK(mh_put(mux, "m/b", "b", &err), &err);
	for (int i = 0; i < 3; i++)
		MH_HOLDS(t.mem[i], "m/a", "a");
	/* replicas that disagree: the union hides nothing */
	MH_OK(mh_put(t.mem[1], "m/only-1", "1", &err), &err);
	MH_OK(mh_put(t.mem[2], "m/only-2", "2", &err), &err);
	list_all(mux, "m/", NULL, &k);
	assert_int_equal(k.n, 4);
	for (int i = 0; i < 4; i++)
		assert_string_equal(k.k[i], want[i]);
	smux_backend_unref(mux);
	trio_release(&t);
}

/* ---- nesting ---- */

static void test_nesting_depth(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *chain[9] = {NULL}, *leaf = mh_memory("leaf"),
			    *bad = NULL;
	struct smux_mux_member m = {0};
	struct smux_error err;
	char name[32];
	char *got;
	int rc;

	(void)state;
	/* chain[i] has depth i + 1; depth 8 is the limit */
	for (int i = 0; i < 8; i++) {
		m.backend = i ? chain[i - 1] : leaf;
		snprintf(name, sizeof(name), "level%d", i + 1);
		MH_OK(smux_mux_new(name, &o, &m, 1, &chain[i], &err), &err);
		assert_int_equal(chain[i]->depth, i + 1);
	}
	m.backend = chain[7];
	rc = smux_mux_new("level9", &o, &m, 1, &bad, &err);
	MH_ERR(rc, &err, SMUX_E_RECURSION_DEPTH_EXCEEDED);
	assert_null(bad);

	/* the deepest legal chain works end to end */
	MH_OK(mh_put(chain[7], "deep", "down", &err), &err);
	MH_HOLDS(leaf, "deep", "down");
	got = mh_get(chain[7], "deep", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "down");
	free(got);
	for (int i = 8; i-- > 0;)
		smux_backend_unref(chain[i]);
	smux_backend_unref(leaf);
}

static void test_cycle_via_add(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *leaf = mh_memory("leaf"), *child, *parent;
	struct smux_mux_member m = {0};
	struct smux_error err;

	(void)state;
	child = mh_mux("child", &o, &leaf, NULL, 1);
	parent = mh_mux("parent", &o, &child, NULL, 1);
	m.backend = parent;
	MH_ERR(smux_mux_add(child, &m, &err), &err,
	       SMUX_E_RECURSION_DEPTH_EXCEEDED);
	m.backend = child; /* a mux into itself */
	MH_ERR(smux_mux_add(child, &m, &err), &err,
	       SMUX_E_RECURSION_DEPTH_EXCEEDED);
	MH_OK(mh_put(parent, "still", "works", &err), &err);
	MH_HOLDS(leaf, "still", "works");
	smux_backend_unref(parent);
	smux_backend_unref(child);
	smux_backend_unref(leaf);
}

/* ---- stats ---- */

static json_t *jget(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!v)
		print_error("missing field \"%s\"\n", k);
	assert_non_null(v);
	return v;
}

static void test_stats_nested(void **state)
{
	static const char *const fields[] = {"name",
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
					     "inFlightCount"};
	struct smux_mux_opts fo = {.mode = SMUX_MODE_FAILOVER};
	struct smux_mux_opts ro = {.mode = SMUX_MODE_ROUND_ROBIN};
	struct smux_backend *store = mh_memory("store"), *leaf[4], *inner[2];
	struct smux_backend *top;
	struct smux_mux_stats *st;
	struct smux_error err;
	json_error_t jerr;
	json_t *root, *bs;
	char *js, name[32];
	int rc;

	(void)state;
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "leaf%d", i);
		leaf[i] = mh_faulty(name, store, NULL);
	}
	inner[0] = mh_mux("in-a", &fo, leaf, NULL, 2);
	inner[1] = mh_mux("in-b", &fo, leaf + 2, NULL, 2);
	top = mh_mux("top", &ro, inner, NULL, 2);
	MH_OK(mh_put(store, "k", "v", &err), &err);
	for (int i = 0; i < 10; i++)
		free(mh_get(top, "k", &rc, &err));
	free(mh_get(top, "absent", &rc, &err));

	st = stats_of(top);
	assert_string_equal(st->name, "top");
	assert_int_equal(st->mode, SMUX_MODE_ROUND_ROBIN);
	assert_int_equal(st->total_calls, 11);
	assert_int_equal(st->n_backends, 2);
	assert_int_equal(st->backends[0].hits + st->backends[1].hits, 10);
	assert_int_equal(st->backends[0].misses + st->backends[1].misses, 1);
	for (int i = 0; i < 2; i++) {
		assert_non_null(st->backends[i].child);
		assert_int_equal(st->backends[i].child->mode,
				 SMUX_MODE_FAILOVER);
		assert_int_equal(st->backends[i].child->n_backends, 2);
		assert_int_equal(st->backends[i].child->total_calls,
				 st->backends[i].hits + st->backends[i].misses);
		assert_true(st->backends[i].p99_latency_ms >=
			    st->backends[i].p50_latency_ms);
	}
	js = smux_mux_stats_json(st, false);
	assert_non_null(js);
	root = json_loads(js, 0, &jerr);
	assert_non_null(root);
	assert_string_equal(json_string_value(jget(root, "name")), "top");
	assert_string_equal(json_string_value(jget(root, "mode")),
			    "round-robin");
	assert_int_equal(json_integer_value(jget(root, "totalCalls")), 11);
	jget(root, "totalFailovers");
	jget(root, "totalFanoutPartials");
	jget(root, "pendingHints");
	bs = jget(root, "backends");
	assert_int_equal(json_array_size(bs), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *b = json_array_get(bs, i), *child, *cb;

		for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
			jget(b, fields[f]);
		child = jget(b, "mux");
		assert_string_equal(json_string_value(jget(child, "mode")),
				    "failover");
		cb = jget(child, "backends");
		assert_int_equal(json_array_size(cb), 2);
		for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
			jget(json_array_get(cb, 0), fields[f]);
		assert_null(json_object_get(json_array_get(cb, 0), "mux"));
	}
	json_decref(root);
	free(js);
	smux_mux_stats_free(st);
	smux_backend_unref(top);
	for (int i = 0; i < 2; i++)
		smux_backend_unref(inner[i]);
	for (int i = 0; i < 4; i++)
		smux_backend_unref(leaf[i]);
	smux_backend_unref(store);
}

/* ---- tracing ---- */

static void test_tracing(void **state)
{
	struct mh_tracer *tr = calloc(1, sizeof(*tr));
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_span *op = NULL, *att[2] = {NULL, NULL};
	struct smux_backend *mux;
	struct smux_error err;
	struct trio t;
	unsigned n_att = 0;
	const char *s;
	int64_t num = -1;
	int rc;

	(void)state;
	assert_non_null(tr);
	mh_tracer_init(tr);
	o.tracer = &tr->t;
	trio_init(&t, false);
	MH_OK(mh_put(t.mem[1], "k", "v", &err), &err);
	mh_fail(t.f[0], true);
	mux = mh_mux("tr", &o, t.f, NULL, 3);
	free(mh_get(mux, "k", &rc, &err));
	MH_OK(rc, &err);

	for (unsigned i = 0; i < tr->n; i++) {
		struct smux_span *sp = &tr->spans[i];

		assert_true(sp->ended);
		if (strcmp(sp->name, "storage-mux.get") == 0) {
			assert_null(op);
			op = sp;
		} else if (strcmp(sp->name, "storage-mux.attempt") == 0) {
			assert_true(n_att < 2);
			att[n_att++] = sp;
		}
	}
	assert_non_null(op);
	if (!op)
		return; /* not reached: cmocka's asserts do not return */
	assert_null(op->parent);
	assert_string_equal(mh_span_get(op, "mux.mode", NULL), "failover");
	assert_string_equal(mh_span_get(op, "mux.key", NULL), "k");
	assert_non_null(mh_span_get(op, "mux.policy", NULL));
	assert_string_equal(mh_span_get(op, "mux.outcome", NULL), "ok");
	assert_int_equal(n_att, 2);
	for (unsigned i = 0; i < n_att; i++) {
		assert_ptr_equal(att[i]->parent, op);
		s = mh_span_get(att[i], "mux.backend.name", NULL);
		assert_non_null(s);
		assert_string_equal(s, i ? "f1" : "f0");
		assert_non_null(mh_span_get(att[i], "mux.attempt.index", &num));
		assert_int_equal(num, i);
		assert_string_equal(mh_span_get(att[i], "mux.mode", NULL),
				    "failover");
		assert_string_equal(mh_span_get(att[i], "mux.outcome", NULL),
				    i ? "ok" : "transient");
		assert_non_null(mh_span_get(att[i], "mux.latency.ms", &num));
		assert_true(num >= 0 && num < 10000);
	}
	smux_backend_unref(mux);
	trio_release(&t);
	pthread_mutex_destroy(&tr->lock);
	free(tr);
}

/* A name one member can never hold (rclone_links keeps NAME.rclonelink
 * for its links) is refused by a mirror, a failover and a shield before
 * any member stores it: no replica holds what another cannot, and no
 * hint is left that could never replay. A rename or copy onto it, and a
 * writer for it, are refused the same way; the other names go through. */
static void test_key_refused_by_a_member(void **state)
{
	static const enum smux_mode modes[] = {
		SMUX_MODE_MIRROR, SMUX_MODE_FAILOVER, SMUX_MODE_SHIELD};
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct smux_mux_opts o = {.mode = modes[i]};
		struct smux_backend *plain = mh_memory("plain");
		struct smux_backend *inner = mh_memory("dav"), *links = NULL;
		struct smux_backend *bs[2];
		struct smux_backend *mux;
		struct smux_writer *w = NULL;

		MH_OK(smux_linkobj_new(inner, &links, &err), &err);
		bs[0] = plain;
		bs[1] = links;
		mux = mh_mux("m", &o, bs, NULL, 2);
		MH_ERR(mh_put(mux, "d/x.rclonelink", "data", &err), &err,
		       SMUX_E_INVALID_KEY);
		MH_LACKS(plain, "d/x.rclonelink");
		MH_LACKS(inner, "d/x.rclonelink");
		assert_int_equal(smux_mux_pending_hints(mux), 0);
		MH_ERR(smux_backend_writer_open(mux, &ctx, "y.rclonelink",
						SMUX_WRITER_TRUNC, &w, &err),
		       &err, SMUX_E_INVALID_KEY);
		assert_null(w);
		MH_OK(mh_put(mux, "d/ok", "data", &err), &err);
		MH_ERR(smux_backend_rename(mux, &ctx, "d/ok", "d/z.rclonelink",
					   &err),
		       &err, SMUX_E_INVALID_KEY);
		MH_ERR(smux_backend_copy(mux, &ctx, "d/ok", "d/z.rclonelink",
					 &err),
		       &err, SMUX_E_INVALID_KEY);
		MH_LACKS(plain, "d/z.rclonelink");
		MH_HOLDS(plain, "d/ok", "data");
		assert_int_equal(smux_mux_pending_hints(mux), 0);
		smux_backend_unref(mux);
		smux_backend_unref(links);
		smux_backend_unref(inner);
		smux_backend_unref(plain);
	}
}

/* The rclone_links wrapper over objects another client left: a link
 * object hidden by a regular object of its name, one whose link name is
 * itself reserved, a ".rclonelink" with no name before the suffix, and
 * prefixes that cut into the suffix. Listings are in order, a name
 * listed once and never by a reserved name; a rename of a regular object
 * and a put over a link leave no link object to come back. */
static void test_linkobj_hostile_names(void **state)
{
	struct smux_backend *inner = mh_memory("dav"), *l = NULL;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct keys k;

	(void)state;
	smux_ctx_init(&ctx);
	MH_OK(smux_linkobj_new(inner, &l, &err), &err);
	MH_OK(mh_put(inner, "d/a", "A", &err), &err);
	MH_OK(mh_put(inner, "d/a.rclonelink", "ta", &err), &err);
	MH_OK(mh_put(inner, "d/a-b", "AB", &err), &err);
	MH_OK(mh_put(inner, "d/l.rclonelink", "tl", &err), &err);
	MH_OK(mh_put(inner, "d/x.rclonelink.rclonelink", "tx", &err), &err);
	MH_OK(mh_put(inner, "d/.rclonelink", "dot", &err), &err);

	list_all(l, "d/", "/", &k);
	assert_int_equal(k.n, 4);
	assert_string_equal(k.k[0], "d/.rclonelink");
	assert_string_equal(k.k[1], "d/a");
	assert_string_equal(k.k[2], "d/a-b");
	assert_string_equal(k.k[3], "d/l");
	list_all(l, "d/a.r", NULL, &k);
	assert_int_equal(k.n, 0);
	list_all(l, "d/l", NULL, &k);
	assert_int_equal(k.n, 1);
	assert_string_equal(k.k[0], "d/l");

	MH_OK(smux_backend_head(l, &ctx, "d/a", &info, &err), &err);
	assert_int_not_equal(info.mode & S_IFMT, S_IFLNK);
	MH_HOLDS(l, "d/a", "A");
	MH_OK(smux_backend_head(l, &ctx, "d/l", &info, &err), &err);
	assert_int_equal(info.mode & S_IFMT, S_IFLNK);
	MH_HOLDS(l, "d/l", "tl");
	MH_HOLDS(l, "d/.rclonelink", "dot");
	MH_ERR(smux_backend_head(l, &ctx, "d/x.rclonelink", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);

	/* the regular a moves; the link its name hid does not come back */
	MH_OK(smux_backend_rename(l, &ctx, "d/a", "d/b", &err), &err);
	MH_ERR(smux_backend_head(l, &ctx, "d/a", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	MH_LACKS(inner, "d/a.rclonelink");
	MH_HOLDS(l, "d/b", "A");
	/* a regular object put over the link l replaces it */
	MH_OK(mh_put(l, "d/l", "plain", &err), &err);
	MH_LACKS(inner, "d/l.rclonelink");
	MH_OK(smux_backend_head(l, &ctx, "d/l", &info, &err), &err);
	assert_int_not_equal(info.mode & S_IFMT, S_IFLNK);
	MH_OK(smux_backend_del(l, &ctx, "d/l", &err), &err);
	MH_ERR(smux_backend_head(l, &ctx, "d/l", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	smux_backend_unref(l);
	smux_backend_unref(inner);
}

/* A sticky shard that cannot hold a name still refuses it once removed
 * (its slot keeps the removed shard's answer): else the write is handed
 * off with a hint for it that can never replay once it is added back. */
static void test_key_refused_by_a_removed_shard(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_STICKY};
	struct smux_backend *plain = mh_memory("plain");
	struct smux_backend *inner = mh_memory("dav"), *links = NULL;
	struct smux_backend *bs[2];
	struct smux_backend *mux;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	MH_OK(smux_linkobj_new(inner, &links, &err), &err);
	bs[0] = plain;
	bs[1] = links;
	mux = mh_mux("m", &o, bs, NULL, 2);
	MH_OK(smux_mux_remove(mux, "dav", &ctx, &err), &err);
	for (int i = 0; i < 8; i++) {
		char key[32];

		snprintf(key, sizeof(key), "k%d.rclonelink", i);
		MH_ERR(mh_put(mux, key, "data", &err), &err,
		       SMUX_E_INVALID_KEY);
		MH_LACKS(plain, key);
	}
	assert_int_equal(smux_mux_pending_hints(mux), 0);
	smux_backend_unref(mux);
	smux_backend_unref(links);
	smux_backend_unref(inner);
	smux_backend_unref(plain);
}

/* A put or rename that happened is not failed by the clean-up of a link
 * object after it: with the inner backend's deletes failing, the regular
 * object is stored or moved and the call answers 0. */
static void test_linkobj_cleanup_never_fails_a_write(void **state)
{
	struct smux_faulty_opts no_del = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_DEL,
	};
	struct smux_backend *inner = mh_memory("dav"), *f, *l = NULL;
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	f = mh_faulty("dav", inner, NULL);
	MH_OK(smux_linkobj_new(f, &l, &err), &err);
	MH_OK(mh_put(inner, "a.rclonelink", "t", &err), &err);
	smux_faulty_set(f, &no_del);
	MH_OK(mh_put(l, "a", "plain", &err), &err);
	MH_HOLDS(l, "a", "plain");
	MH_OK(smux_backend_rename(l, &ctx, "a", "b", &err), &err);
	MH_HOLDS(l, "b", "plain");
	smux_backend_unref(l);
	smux_backend_unref(f);
	smux_backend_unref(inner);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failover_fallthrough),
		cmocka_unit_test(test_failover_attempts),
		cmocka_unit_test(test_all_backends_down),
		cmocka_unit_test(test_semantic_no_fallthrough),
		cmocka_unit_test(test_round_robin),
		cmocka_unit_test(test_weighted_frequencies),
		cmocka_unit_test(test_weighted_injected_rng),
		cmocka_unit_test(test_weight_zero),
		cmocka_unit_test(test_weighted_rerolls_reach_healthy),
		cmocka_unit_test(test_fnv1a_vectors),
		cmocka_unit_test(test_sticky_mapping),
		cmocka_unit_test(test_sync_routing),
		cmocka_unit_test(test_sticky_list_union),
		cmocka_unit_test(test_mirror_list_union),
		cmocka_unit_test(test_nesting_depth),
		cmocka_unit_test(test_cycle_via_add),
		cmocka_unit_test(test_stats_nested),
		cmocka_unit_test(test_tracing),
		cmocka_unit_test(test_key_refused_by_a_member),
		cmocka_unit_test(test_linkobj_hostile_names),
		cmocka_unit_test(test_key_refused_by_a_removed_shard),
		cmocka_unit_test(test_linkobj_cleanup_never_fails_a_write),
	};

	return cmocka_run_group_tests_name("mux modes", tests, NULL, NULL);
}
