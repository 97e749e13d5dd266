// SPDX-License-Identifier: MIT
/*
 * test_mux_threads.c - one mux of each mode driven from several threads at
 * once: 4 workers with mixed get/put/delete/list, a mutator adding,
 * draining, re-weighting and removing a member, and a chaos thread making
 * one member flap while it reads stats, runs health checks and repairs.
 * Meant for ThreadSanitizer and AddressSanitizer as much as for itself:
 * it asserts that every answer is one the mux may give and that nothing
 * read back was torn or came from another key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <unistd.h>

#include "mux_helpers.h"

#define WORKERS 4
#define KEYS	24

struct run {
	enum smux_mode mode;
	struct smux_backend *store; /* shared (round-robin, weighted) */
	struct smux_backend *mem[3], *f[3], *extra_mem, *mux;
	struct mh_events *ev;
	atomic_bool stop;
	atomic_uint bad;       /* unexpected answers */
	atomic_ulong ops;      /* operations done */
	atomic_ulong ok_reads; /* successful gets */
	int64_t budget_ns;
};

struct worker {
	struct run *r;
	unsigned id;
	uint64_t rnd;
};

static uint32_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 16);
}

/* Answers the mux may give while members flap and change. */
static bool allowed(enum smux_code c)
{
	switch (c) {
	case SMUX_E_KEY_NOT_FOUND:
	case SMUX_E_ALL_BACKENDS_DOWN:
	case SMUX_E_IO: /* shield: the origin's own error */
	case SMUX_E_WRITE_QUORUM_FAILED:
	case SMUX_E_WRITE_FANOUT_PARTIAL:
	case SMUX_E_BACKEND_TIMEOUT:
		return true;
	default:
		return false;
	}
}

static void note_bad(struct run *r, const char *what,
		     const struct smux_error *err)
{
	char buf[2 * SMUX_ERROR_MSG_MAX + 256];

	if (atomic_fetch_add(&r->bad, 1) < 5)
		print_error("%s: %s: %s\n", smux_mode_name(r->mode), what,
			    smux_error_format(err, buf, sizeof(buf)));
}

static int count_cb(void *arg, const struct smux_list_entry *e)
{
	unsigned *n = arg;

	(*n)++;
	return strncmp(e->key, "t/", 2) != 0; /* stop on a foreign key */
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	struct smux_error err;
	struct smux_ctx ctx;
	char key[32], val[64];

	smux_ctx_init(&ctx);
	for (unsigned n = 0; !atomic_load(&r->stop); n++) {
		uint32_t x = next_rand(&w->rnd);
		unsigned op = x % 10, k = (x >> 8) % KEYS, seen = 0;
		size_t klen;
		char *got;
		int rc;

		snprintf(key, sizeof(key), "t/k%02u", k);
		klen = strlen(key);
		if (op < 4) {
			snprintf(val, sizeof(val), "%s:%u:%u", key, w->id, n);
			rc = mh_put(r->mux, key, val, &err);
			if (rc && !allowed(err.e.code))
				note_bad(r, "put", &err);
		} else if (op < 8) {
			got = mh_get(r->mux, key, &rc, &err);
			if (rc && !allowed(err.e.code))
				note_bad(r, "get", &err);
			if (!rc) {
				atomic_fetch_add(&r->ok_reads, 1);
				if (strncmp(got, key, klen) != 0 ||
				    got[klen] != ':') {
					print_error("get %s: \"%s\"\n", key,
						    got);
					atomic_fetch_add(&r->bad, 1);
				}
			}
			free(got);
		} else if (op < 9) {
			rc = smux_backend_del(r->mux, &ctx, key, &err);
			if (rc && !allowed(err.e.code))
				note_bad(r, "delete", &err);
		} else {
			rc = smux_backend_list(r->mux, &ctx, "t/", NULL,
					       count_cb, &seen, &err);
			if (rc && !allowed(err.e.code))
				note_bad(r, "list", &err);
			if (!rc && seen > KEYS) {
				print_error("list: %u keys\n", seen);
				atomic_fetch_add(&r->bad, 1);
			}
		}
		atomic_fetch_add(&r->ops, 1);
	}
	return NULL;
}

/* Adds, re-weights, drains, undrains and removes "extra" in a loop. */
static void *mutator_main(void *arg)
{
	struct run *r = arg;
	uint64_t rnd = 0x5eed;

	while (!atomic_load(&r->stop)) {
		struct smux_mux_member m = {
			.backend = r->extra_mem,
			.has_weight = true,
			.weight = 1,
		};
		struct smux_error err;
		struct smux_ctx ctx;
		int rc;

		smux_ctx_init(&ctx);
		ctx.deadline_ns = smux_now_ns() + 200 * MS_NS;
		rc = smux_mux_add(r->mux, &m, &err);
		if (rc && err.e.code != SMUX_E_BACKEND_NAME_CONFLICT)
			note_bad(r, "add", &err);
		rc = smux_mux_set_weight(r->mux, "extra",
					 (double)(next_rand(&rnd) % 4), &err);
		if (rc && err.e.code != SMUX_E_BACKEND_NOT_FOUND)
			note_bad(r, "set_weight", &err);
		if (r->mode == SMUX_MODE_WEIGHTED) {
			rc = smux_mux_set_weight(r->mux, "f0",
						 1 + next_rand(&rnd) % 3, &err);
			if (rc)
				note_bad(r, "set_weight f0", &err);
		}
		usleep(1000);
		rc = smux_mux_drain(r->mux, "extra", &ctx, &err);
		if (rc && err.e.code != SMUX_E_BACKEND_TIMEOUT)
			note_bad(r, "drain", &err);
		rc = smux_mux_undrain(r->mux, "extra", &err);
		if (rc)
			note_bad(r, "undrain", &err);
		usleep(1000);
		rc = smux_mux_remove(r->mux, "extra", &ctx, &err);
		if (rc && err.e.code != SMUX_E_BACKEND_TIMEOUT)
			note_bad(r, "remove", &err);
	}
	return NULL;
}

/* Makes f1 flap; reads stats, checks health, repairs meanwhile. */
static void *chaos_main(void *arg)
{
	struct run *r = arg;

	for (unsigned n = 0; !atomic_load(&r->stop); n++) {
		struct smux_faulty_opts o = {.error_rate = (n % 3) * 0.5};
		struct smux_mux_stats *st;
		struct smux_error err;
		struct smux_ctx ctx;
		char *js;

		smux_faulty_set(r->f[1], &o);
		usleep(2000);
		st = smux_mux_stats(r->mux);
		if (!st) {
			atomic_fetch_add(&r->bad, 1);
			continue;
		}
		js = smux_mux_stats_json(st, n % 2);
		if (!js)
			atomic_fetch_add(&r->bad, 1);
		free(js);
		smux_mux_stats_free(st);
		if (n % 4 == 0)
			smux_mux_check_health(r->mux);
		if (n % 5 == 0) {
			smux_ctx_init(&ctx);
			ctx.deadline_ns = smux_now_ns() + 200 * MS_NS;
			smux_mux_repair(r->mux, &ctx, NULL, NULL, &err);
		}
	}
	smux_faulty_set(r->f[1], &(struct smux_faulty_opts){0});
	return NULL;
}

/* Members with a call in flight. */
static unsigned busy_members(struct smux_backend *mux)
{
	struct smux_mux_stats *st = smux_mux_stats(mux);
	unsigned busy = 0;

	assert_non_null(st);
	for (unsigned i = 0; i < st->n_backends; i++)
		busy += st->backends[i].in_flight_count > 0;
	smux_mux_stats_free(st);
	return busy;
}

static void run_mode(enum smux_mode mode, int64_t budget_ms)
{
	static const double w[3] = {1, 2, 3};
	bool shared =
		mode == SMUX_MODE_ROUND_ROBIN || mode == SMUX_MODE_WEIGHTED;
	struct smux_mux_opts o = {
		.mode = mode,
		.cooldown_ms = 5,
		.max_cooldown_ms = 20,
		.backend_timeout_ms = 5000,
	};
	struct worker wk[WORKERS];
	pthread_t th[WORKERS + 2];
	struct smux_mux_stats *st;
	struct run *r = calloc(1, sizeof(*r));
	bool idle = false;
	char name[32];

	assert_non_null(r);
	r->mode = mode;
	r->ev = mh_events_new();
	o.events = r->ev->bus;
	atomic_init(&r->stop, false);
	if (shared)
		r->store = mh_memory("store");
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		r->mem[i] =
			shared ? smux_backend_ref(r->store) : mh_memory(name);
		snprintf(name, sizeof(name), "f%d", i);
		r->f[i] = mh_faulty(name, r->mem[i], NULL);
	}
	r->extra_mem = shared ? mh_faulty("extra", r->store, NULL)
			      : mh_memory("extra");
	r->mux = mh_mux(smux_mode_name(mode), &o, r->f,
			mode == SMUX_MODE_WEIGHTED ? w : NULL, 3);

	for (unsigned i = 0; i < WORKERS; i++) {
		wk[i].r = r;
		wk[i].id = i;
		wk[i].rnd = 0x9e3779b97f4a7c15ULL * (i + 1) + mode;
		assert_int_equal(
			pthread_create(&th[i], NULL, worker_main, &wk[i]), 0);
	}
	assert_int_equal(pthread_create(&th[WORKERS], NULL, mutator_main, r),
			 0);
	assert_int_equal(pthread_create(&th[WORKERS + 1], NULL, chaos_main, r),
			 0);
	usleep((useconds_t)budget_ms * 1000);
	atomic_store(&r->stop, true);
	for (unsigned i = 0; i < WORKERS + 2; i++)
		pthread_join(th[i], NULL);

	/* every call left the members (the mux's own thread may start a
	 * hint replay at any time: wait until one look finds them idle) */
	for (int i = 0; i < 5000 && !idle; i++) {
		idle = busy_members(r->mux) == 0;
		if (!idle)
			usleep(1000);
	}
	assert_true(idle);
	st = smux_mux_stats(r->mux);
	assert_non_null(st);
	print_message("  %-13s %6lu ops, %6lu good reads, %llu calls, %llu "
		      "failovers, %llu partial, %u hints, %u members\n",
		      smux_mode_name(mode), atomic_load(&r->ops),
		      atomic_load(&r->ok_reads),
		      (unsigned long long)st->total_calls,
		      (unsigned long long)st->total_failovers,
		      (unsigned long long)st->total_fanout_partials,
		      st->pending_hints, st->n_backends);
	smux_mux_stats_free(st);
	assert_int_equal(atomic_load(&r->bad), 0);
	assert_true(atomic_load(&r->ops) > 50);
	assert_true(atomic_load(&r->ok_reads) > 0);

	smux_backend_unref(r->mux);
	smux_backend_unref(r->extra_mem);
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(r->f[i]);
		smux_backend_unref(r->mem[i]);
	}
	smux_backend_unref(r->store);
	mh_events_free(r->ev);
	free(r);
}

static int64_t budget(void)
{
	const char *v = getenv("SMUX_TEST_VARIANT");

	/* sanitizers slow every call down; give them the same op count */
	return v && strcmp(v, "normal") != 0 ? 1500 : 500;
}

static void test_failover(void **state)
{
	(void)state;
	run_mode(SMUX_MODE_FAILOVER, budget());
}

static void test_round_robin(void **state)
{
	(void)state;
	run_mode(SMUX_MODE_ROUND_ROBIN, budget());
}

static void test_weighted(void **state)
{
	(void)state;
	run_mode(SMUX_MODE_WEIGHTED, budget());
}

static void test_sticky(void **state)
{
	(void)state;
	run_mode(SMUX_MODE_STICKY, budget());
}

static void test_shield(void **state)
{
	(void)state;
	run_mode(SMUX_MODE_SHIELD, budget());
}

static void test_mirror(void **state)
{
	(void)state;
	run_mode(SMUX_MODE_MIRROR, budget());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failover),
		cmocka_unit_test(test_round_robin),
		cmocka_unit_test(test_weighted),
		cmocka_unit_test(test_sticky),
		cmocka_unit_test(test_shield),
		cmocka_unit_test(test_mirror),
	};

	return cmocka_run_group_tests_name("mux threads", tests, NULL, NULL);
}
