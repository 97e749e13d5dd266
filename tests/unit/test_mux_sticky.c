// SPDX-License-Identifier: MIT
/*
 * test_mux_sticky.c - sticky-by-key as a filesystem needs it (DESIGN
 * section 3, mux_sticky.c): placement fnv1a(key) % n over every member;
 * handoff to the next shard with a durable hint for home while home is
 * out, reads of the latest version, before and after a remount and the
 * replay that moves keys home; a delete while home is out followed by a
 * rename onto the key after recovery (the queued delete must not remove
 * the new key); a key whose home is out is unavailable, not absent; a
 * write that reaches home supersedes a pending handoff and its copy goes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mux_helpers.h"

#define N 3

/* Three memory shards behind faulty wrappers s0..s2, a clock, a journal
 * directory. */
struct shards {
	struct smux_backend *mem[N], *f[N], *mux;
	struct mh_clock clk;
	char dir[64];
};

static void shards_mux(struct shards *s)
{
	struct smux_mux_opts o = {
		.mode = SMUX_MODE_STICKY,
		.cooldown_ms = 100,
		.clock = &s->clk.clock,
		.state_dir = s->dir,
	};

	s->mux = mh_mux("st", &o, s->f, NULL, N);
}

static void shards_init(struct shards *s)
{
	char name[32];

	memset(s, 0, sizeof(*s));
	mh_clock_init(&s->clk, 10000);
	snprintf(s->dir, sizeof(s->dir), "/tmp/smux-sticky-XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		s->mem[i] = mh_memory(name);
		snprintf(name, sizeof(name), "s%d", i);
		s->f[i] = mh_faulty(name, s->mem[i], NULL);
	}
	shards_mux(s);
}

/* A new mux over the same shards and journal (a remount). */
static void shards_remount(struct shards *s)
{
	smux_backend_unref(s->mux);
	shards_mux(s);
}

static void shards_release(struct shards *s)
{
	smux_backend_unref(s->mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(s->f[i]);
		smux_backend_unref(s->mem[i]);
	}
	mh_rm_rf(s->dir);
}

/* Moves the injected clock past every cooldown. */
static void shards_later(struct shards *s)
{
	mh_clock_set(&s->clk, atomic_load(&s->clk.now_ms) + 60000);
}

static void shards_repair(struct shards *s, unsigned *pending)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	MH_OK(smux_mux_repair(s->mux, &ctx, NULL, pending, &err), &err);
}

static unsigned home_of(const char *key)
{
	return smux_fnv1a(key, strlen(key)) % N;
}

/* The @i-th key (of a set named @set) whose home is @shard. */
static void key_on(char *key, size_t size, const char *set, unsigned shard,
		   int i)
{
	for (int j = 0, found = 0;; j++) {
		snprintf(key, size, "%s/key-%d", set, j);
		if (home_of(key) == shard && found++ == i)
			return;
	}
}

/* Keys of @n whose read through @mux is not @want[i] (printed). */
static unsigned mismatches(struct smux_backend *mux, char keys[][32],
			   char want[][32], unsigned n, const char *when)
{
	unsigned bad = 0;

	for (unsigned i = 0; i < n; i++) {
		struct smux_error err;
		int rc;
		char *got = mh_get(mux, keys[i], &rc, &err);

		if (!got || strcmp(got, want[i]) != 0)
			bad++;
		free(got);
	}
	if (bad)
		print_message("%s: %u of %u keys read back another version\n",
			      when, bad, n);
	return bad;
}

/* ---- (d) placement ---- */

/* While every shard is up a key lives on fnv1a(key) % n, and only there
 * (the seed's placement), and reads ask only that shard. */
static void test_placement_all_up(void **state)
{
	struct smux_error err;
	struct shards s;
	char key[32];

	(void)state;
	shards_init(&s);
	for (int i = 0; i < 90; i++) {
		unsigned long before[N];

		snprintf(key, sizeof(key), "p/%d", i);
		MH_OK(mh_put(s.mux, key, key, &err), &err);
		for (int k = 0; k < N; k++)
			before[k] = smux_faulty_calls(s.f[k]);
		MH_HOLDS(s.mux, key, key);
		for (unsigned k = 0; k < N; k++) {
			if (k == home_of(key))
				MH_HOLDS(s.mem[k], key, key);
			else
				MH_LACKS(s.mem[k], key);
			assert_int_equal(smux_faulty_calls(s.f[k]) - before[k],
					 k == home_of(key) ? 1 : 0);
		}
	}
	assert_int_equal(smux_mux_pending_hints(s.mux), 0);
	shards_release(&s);
}

/* ---- (a) overwrites while a shard fails ---- */

#define KEYS 300

/*
 * One shard fails transiently for a window while 300 keys are overwritten
 * (twice for half of them): every write is acknowledged, and every key
 * reads back its last acknowledged content - right after the shard
 * recovers, through a new mux over the same shards and journal, after the
 * replay, and then each key lives on its home only.
 */
static void test_overwrite_during_outage(void **state)
{
	static char keys[KEYS][32], want[KEYS][32];
	struct smux_error err;
	unsigned pending = 1;
	struct shards s;

	(void)state;
	shards_init(&s);
	for (unsigned i = 0; i < KEYS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "d/f%u", i);
		snprintf(want[i], sizeof(want[i]), "v1-%u", i);
		MH_OK(mh_put(s.mux, keys[i], want[i], &err), &err);
	}
	mh_fail(s.f[1], true);
	for (int round = 2; round <= 3; round++) {
		for (unsigned i = 0; i < KEYS; i++) {
			if (round == 3 && i % 2)
				continue;
			snprintf(want[i], sizeof(want[i]), "v%d-%u", round, i);
			MH_OK(mh_put(s.mux, keys[i], want[i], &err), &err);
		}
	}
	assert_int_equal(mismatches(s.mux, keys, want, KEYS, "outage"), 0);
	/* the shard is back (and its cooldown over: the next call probes) */
	mh_fail(s.f[1], false);
	shards_later(&s);
	assert_int_equal(mismatches(s.mux, keys, want, KEYS, "recovered"), 0);
	/* the handoffs left hints for the shard that was out */
	assert_true(smux_mux_pending_hints(s.mux) > 0);
	shards_remount(&s);
	shards_later(&s);
	assert_int_equal(mismatches(s.mux, keys, want, KEYS, "remount"), 0);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	assert_int_equal(mismatches(s.mux, keys, want, KEYS, "repaired"), 0);
	/* moved home, handoff copies gone */
	for (unsigned i = 0; i < KEYS; i++)
		for (unsigned k = 0; k < N; k++)
			if (k == home_of(keys[i]))
				MH_HOLDS(s.mem[k], keys[i], want[i]);
			else
				MH_LACKS(s.mem[k], keys[i]);
	shards_remount(&s);
	assert_int_equal(mismatches(s.mux, keys, want, KEYS, "remount 2"), 0);
	shards_release(&s);
}

/* ---- (b) delete while out, rename onto the key after recovery ---- */

#define RENAMED 60

/*
 * Keys deleted while their shard is down (a delete hint for it), then
 * `mv tmp key` after it recovered, then the replay: every renamed key
 * exists with its new content (the queued delete is superseded by the
 * rename's write), and the temporary names are gone.
 */
static void test_rm_then_rename_after_recovery(void **state)
{
	static char keys[RENAMED][32], want[RENAMED][32];
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	struct shards s;
	char tmp[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	for (int i = 0; i < RENAMED; i++) {
		key_on(keys[i], sizeof(keys[i]), "mv", 1, i);
		MH_OK(mh_put(s.mux, keys[i], "old", &err), &err);
	}
	mh_fail(s.f[1], true);
	for (int i = 0; i < RENAMED; i++)
		MH_OK(smux_backend_del(s.mux, &ctx, keys[i], &err), &err);
	assert_int_equal(smux_mux_pending_hints(s.mux), RENAMED);
	mh_fail(s.f[1], false);
	shards_later(&s);
	for (int i = 0; i < RENAMED; i++) {
		snprintf(tmp, sizeof(tmp), "tmp-%d", i);
		snprintf(want[i], sizeof(want[i]), "new-%d", i);
		MH_OK(mh_put(s.mux, tmp, want[i], &err), &err);
		MH_OK(smux_backend_rename(s.mux, &ctx, tmp, keys[i], &err),
		      &err);
	}
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	assert_int_equal(mismatches(s.mux, keys, want, RENAMED, "renamed"), 0);
	for (int i = 0; i < RENAMED; i++) {
		snprintf(tmp, sizeof(tmp), "tmp-%d", i);
		MH_LACKS(s.mux, tmp);
		MH_HOLDS(s.mem[1], keys[i], want[i]);
	}
	shards_release(&s);
}

/*
 * The same with a plain put after recovery, the replay held back until
 * it is done: the recovered shard refuses deletes for a while (a semantic
 * error: it stays up, the replay of the delete hints fails and waits), so
 * the put surely comes first. The put supersedes the delete hint.
 */
static void test_rm_then_put_before_replay(void **state)
{
	static char keys[RENAMED][32], want[RENAMED][32];
	struct smux_faulty_opts no_del = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_DEL,
	};
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	struct shards s;

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	for (int i = 0; i < RENAMED; i++) {
		key_on(keys[i], sizeof(keys[i]), "put", 1, i);
		MH_OK(mh_put(s.mux, keys[i], "old", &err), &err);
	}
	mh_fail(s.f[1], true);
	for (int i = 0; i < RENAMED; i++)
		MH_OK(smux_backend_del(s.mux, &ctx, keys[i], &err), &err);
	smux_faulty_set(s.f[1], &no_del);
	shards_later(&s);
	for (int i = 0; i < RENAMED; i++) {
		snprintf(want[i], sizeof(want[i]), "new-%d", i);
		MH_OK(mh_put(s.mux, keys[i], want[i], &err), &err);
	}
	mh_fail(s.f[1], false);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	assert_int_equal(mismatches(s.mux, keys, want, RENAMED, "put"), 0);
	for (int i = 0; i < RENAMED; i++)
		MH_HOLDS(s.mem[1], keys[i], want[i]);
	shards_release(&s);
}

/* ---- (c) unavailable is not absent ---- */

static void assert_unavailable(int rc, const struct smux_error *err)
{
	MH_ERR(rc, err, SMUX_E_ALL_BACKENDS_DOWN);
	assert_int_equal(rc, -EIO);
}

/*
 * Home down and the key never handed off: get, head and reader open
 * answer unavailable (EIO), never "not found" - while home fails, and once
 * it is marked down - for a key it holds and for one nobody has. A key
 * handed off meanwhile reads from the shard that took it.
 */
static void test_home_down_unavailable(void **state)
{
	struct smux_reader *r = NULL;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	struct shards s;
	char key[32], none[32], moved[32];
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(key, sizeof(key), "u", 2, 0);
	key_on(none, sizeof(none), "u", 2, 1);
	key_on(moved, sizeof(moved), "u", 2, 2);
	MH_OK(mh_put(s.mux, key, "here", &err), &err);
	mh_fail(s.f[2], true);
	for (int round = 0; round < 4; round++) {
		assert_null(mh_get(s.mux, key, &rc, &err));
		assert_unavailable(rc, &err);
		assert_unavailable(
			smux_backend_head(s.mux, &ctx, key, &info, &err), &err);
		assert_unavailable(
			smux_backend_head(s.mux, &ctx, none, &info, &err),
			&err);
		assert_unavailable(
			smux_backend_reader_open(s.mux, &ctx, key, &r, &err),
			&err);
	}
	/* written while home is out: on the next shard, readable there */
	MH_OK(mh_put(s.mux, moved, "handed off", &err), &err);
	MH_HOLDS(s.mem[0], moved, "handed off");
	MH_HOLDS(s.mux, moved, "handed off");
	/* home back: the key it holds, and "not found" is an answer again */
	mh_fail(s.f[2], false);
	shards_later(&s);
	MH_HOLDS(s.mux, key, "here");
	MH_HOLDS(s.mux, moved, "handed off");
	MH_ERR(smux_backend_head(s.mux, &ctx, none, &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	shards_release(&s);
}

/* ---- supersede ---- */

/*
 * A write that reaches home while home still has a pending hint for the
 * key (a handoff not replayed yet) supersedes it: reads go home at once,
 * the handoff copy gets a delete hint, and the replay removes it without
 * touching home's newer version.
 */
static void test_home_write_supersedes_handoff(void **state)
{
	struct smux_error err;
	unsigned pending = 1;
	struct shards s;
	char key[32];

	(void)state;
	shards_init(&s);
	key_on(key, sizeof(key), "sup", 0, 0);
	MH_OK(mh_put(s.mux, key, "v1", &err), &err);
	mh_fail(s.f[0], true);
	MH_OK(mh_put(s.mux, key, "v2", &err), &err);
	MH_HOLDS(s.mem[1], key, "v2");
	MH_HOLDS(s.mem[0], key, "v1");
	mh_fail(s.f[0], false);
	shards_later(&s);
	MH_OK(mh_put(s.mux, key, "v3", &err), &err);
	MH_HOLDS(s.mem[0], key, "v3");
	MH_HOLDS(s.mux, key, "v3");
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "v3");
	MH_HOLDS(s.mem[0], key, "v3");
	MH_LACKS(s.mem[1], key);
	MH_LACKS(s.mem[2], key);
	shards_release(&s);
}

/*
 * Two shards out in turn: home, then the shard that took the first
 * handoff. The latest version is on the shard after them; the one that
 * holds an older handoff copy is passed over (a delete hint) until the
 * replay, which moves the latest version home and removes both copies.
 */
static void test_two_shards_out(void **state)
{
	struct smux_error err;
	unsigned pending = 1;
	struct shards s;
	char key[32];

	(void)state;
	shards_init(&s);
	key_on(key, sizeof(key), "two", 0, 0);
	mh_fail(s.f[0], true);
	MH_OK(mh_put(s.mux, key, "v1", &err), &err);
	MH_HOLDS(s.mem[1], key, "v1");
	mh_fail(s.f[1], true);
	MH_OK(mh_put(s.mux, key, "v2", &err), &err);
	MH_HOLDS(s.mem[2], key, "v2");
	mh_fail(s.f[1], false);
	shards_later(&s);
	MH_HOLDS(s.mux, key, "v2");
	mh_fail(s.f[0], false);
	shards_later(&s);
	MH_HOLDS(s.mux, key, "v2");
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "v2");
	MH_HOLDS(s.mem[0], key, "v2");
	MH_LACKS(s.mem[1], key);
	MH_LACKS(s.mem[2], key);
	shards_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_all_up),
		cmocka_unit_test(test_overwrite_during_outage),
		cmocka_unit_test(test_rm_then_rename_after_recovery),
		cmocka_unit_test(test_rm_then_put_before_replay),
		cmocka_unit_test(test_home_down_unavailable),
		cmocka_unit_test(test_home_write_supersedes_handoff),
		cmocka_unit_test(test_two_shards_out),
	};

	return cmocka_run_group_tests_name("mux sticky", tests, NULL, NULL);
}
