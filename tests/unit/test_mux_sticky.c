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
#include <sched.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mux_internal.h"
#include "mux_helpers.h"
#include "smux/file.h"

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

/* Moves the injected clock past every cooldown, and runs the health
 * checks the background thread runs then (reads never probe). */
static void shards_later(struct shards *s)
{
	mh_clock_set(&s->clk, atomic_load(&s->clk.now_ms) + 60000);
	smux_mux_check_health(s->mux);
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
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
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
	unsigned pending = 1, during;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */

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
	/* the handoffs left hints for the shard that is out */
	during = smux_mux_pending_hints(s.mux);
	/* the shard is back (its cooldown over, a health check saw it) */
	mh_fail(s.f[1], false);
	shards_later(&s);
	assert_int_equal(mismatches(s.mux, keys, want, KEYS, "recovered"), 0);
	assert_true(during > 0);
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
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
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
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */

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

static int count_cb(void *arg, const struct smux_list_entry *e)
{
	(void)e;
	(*(unsigned *)arg)++;
	return 0;
}

/* Entries of a listing of @prefix through @mux. */
static unsigned listed(struct smux_backend *mux, const char *prefix)
{
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned n = 0;

	smux_ctx_init(&ctx);
	MH_OK(smux_backend_list(mux, &ctx, prefix, NULL, count_cb, &n, &err),
	      &err);
	return n;
}

/*
 * The union listing before the replay: keys deleted while their shard was
 * out are not listed once it is back (its entries are behind: it has a
 * delete hint for them), a key handed off is listed once.
 */
static void test_list_before_replay(void **state)
{
	struct smux_faulty_opts no_del = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_DEL,
	};
	struct smux_error err;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	for (int i = 0; i < 10; i++) {
		key_on(key, sizeof(key), "ls", 1, i);
		MH_OK(mh_put(s.mux, key, "x", &err), &err);
	}
	assert_int_equal(listed(s.mux, "ls/"), 10);
	mh_fail(s.f[1], true);
	for (int i = 0; i < 5; i++) {
		key_on(key, sizeof(key), "ls", 1, i);
		MH_OK(smux_backend_del(s.mux, &ctx, key, &err), &err);
	}
	key_on(key, sizeof(key), "ls", 1, 5);
	MH_OK(mh_put(s.mux, key, "handed off", &err), &err);
	/* back, but its replay held back (deletes refused for now) */
	smux_faulty_set(s.f[1], &no_del);
	shards_later(&s);
	assert_int_equal(listed(s.mux, "ls/"), 5);
	mh_fail(s.f[1], false);
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
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
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

/*
 * A writer that starts from the object (no TRUNC) while the key's shard is
 * out is unavailable: opened on another shard it would start from nothing,
 * and its commit would replace the object with the edit alone. A writer
 * with TRUNC is handed off like a put.
 */
static void test_edit_while_home_down(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32], fresh[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(key, sizeof(key), "edit", 2, 0);
	key_on(fresh, sizeof(fresh), "edit", 2, 1);
	MH_OK(mh_put(s.mux, key, "hello world", &err), &err);
	mh_fail(s.f[2], true);
	/* EIO: the shard's own error, or ALL_BACKENDS_DOWN once it is
	 * marked down */
	for (int round = 0; round < 2; round++)
		assert_int_equal(
			smux_backend_writer_open(s.mux, &ctx, key, 0, &w, &err),
			-EIO);
	assert_null(w);
	MH_LACKS(s.mem[0], key);
	MH_LACKS(s.mem[1], key);
	MH_OK(smux_backend_writer_open(s.mux, &ctx, fresh, SMUX_WRITER_TRUNC,
				       &w, &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "new", 3, 0, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(s.mem[0], fresh, "new");
	mh_fail(s.f[2], false);
	shards_later(&s);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "hello world");
	MH_HOLDS(s.mem[2], fresh, "new");
	MH_LACKS(s.mem[0], fresh);
	shards_release(&s);
}

/*
 * Hard links: only on the shard both names hash to, and only while that
 * shard holds the source's latest write; otherwise EXDEV (two names on
 * two shards would be two files). A source written while its home was
 * down lives on a handoff shard until the replay moves it: a link then
 * is EXDEV too (the replay would copy the source and leave the link
 * behind). Memory shards keep no hard links: once home holds the source,
 * the link reaches it and is refused there (NOT_SUPPORTED, not EXDEV).
 */
static void test_link_shards(void **state)
{
	static struct shards s; /* outlives a failed test */
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	char src[32], same[32], other[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(src, sizeof(src), "ln", 2, 0);
	key_on(same, sizeof(same), "ln", 2, 1);
	key_on(other, sizeof(other), "ln", 1, 0);
	mh_fail(s.f[2], true);
	MH_OK(mh_put(s.mux, src, "v1", &err), &err);
	mh_fail(s.f[2], false);
	MH_HOLDS(s.mem[0], src, "v1"); /* the handoff shard */
	assert_int_equal(smux_backend_link(s.mux, &ctx, src, other, &err),
			 -EXDEV);
	assert_int_equal(err.e.sys_errno, EXDEV);
	assert_int_equal(smux_backend_link(s.mux, &ctx, src, same, &err),
			 -EXDEV);
	for (int i = 0; i < N; i++) {
		MH_LACKS(s.mem[i], same);
		MH_LACKS(s.mem[i], other);
	}
	shards_later(&s);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mem[2], src, "v1");
	assert_true(smux_backend_link(s.mux, &ctx, src, same, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_NOT_SUPPORTED);
	assert_int_not_equal(err.e.sys_errno, EXDEV);
	assert_int_equal(smux_backend_link(s.mux, &ctx, src, other, &err),
			 -EXDEV);
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
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
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
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];

	(void)state;
	shards_init(&s);
	/* The repair is the test's own. One pass leaves a hint for the next
	 * here (checked: pending 1, then 0); the background thread, woken by
	 * the first hint, usually made that pass before the assert, and once
	 * under TSan in make check did not (pending 1). */
	smux__mux_bg_stop(smux__mux_of(s.mux));
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
	for (int pass = 0; pass < 3 && pending; pass++)
		shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "v2");
	MH_HOLDS(s.mem[0], key, "v2");
	MH_LACKS(s.mem[1], key);
	MH_LACKS(s.mem[2], key);
	shards_release(&s);
}

/* ---- a write racing the replay ---- */

static struct {
	struct smux_backend *mux;
	const char *key;
	atomic_bool armed;
	sem_t step; /* the racing put finished, or waits for the gate */
	pthread_t th;
} race;

static void *race_put(void *arg)
{
	struct smux_error err;

	(void)arg;
	MH_OK(mh_put(race.mux, race.key, "newer", &err), &err);
	sem_post(&race.step);
	return NULL;
}

static void race_gate_wait(const char *key)
{
	if (strcmp(key, race.key) == 0)
		sem_post(&race.step);
}

/* In the replay's window (holder's copy read, home not written yet): a
 * user put of the key starts, and the replay goes on once that put is
 * done or waits for the key. */
static void race_replay_copied(const char *key)
{
	bool armed = true;

	if (strcmp(key, race.key) != 0 ||
	    !atomic_compare_exchange_strong(&race.armed, &armed, false))
		return;
	assert_int_equal(pthread_create(&race.th, NULL, race_put, NULL), 0);
	while (sem_wait(&race.step) != 0)
		;
}

/*
 * A put of a key lands while the replay of its handoff is between reading
 * the handoff copy and writing home: the put is newer and must win. The
 * put waits for the key's gate until the replay has moved the key home,
 * then writes home; the replay never writes its older copy on top.
 */
static void test_put_during_replay(void **state)
{
	struct smux_error err;
	unsigned pending = 1;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];

	(void)state;
	shards_init(&s);
	key_on(key, sizeof(key), "race", 2, 0);
	MH_OK(mh_put(s.mux, key, "v1", &err), &err);
	mh_fail(s.f[2], true);
	MH_OK(mh_put(s.mux, key, "handed off", &err), &err);
	race.mux = s.mux;
	race.key = key;
	assert_int_equal(sem_init(&race.step, 0, 0), 0);
	atomic_store(&race.armed, true);
	smux__sticky_hook_gate_wait = race_gate_wait;
	smux__sticky_hook_replay_copied = race_replay_copied;
	mh_fail(s.f[2], false);
	shards_later(&s);
	shards_repair(&s, &pending);
	assert_false(atomic_load(&race.armed)); /* the window was hit */
	pthread_join(race.th, NULL);
	smux__sticky_hook_replay_copied = NULL;
	smux__sticky_hook_gate_wait = NULL;
	sem_destroy(&race.step);
	assert_int_equal(smux_mux_pending_hints(s.mux), 0);
	MH_HOLDS(s.mux, key, "newer");
	MH_HOLDS(s.mem[2], key, "newer");
	MH_LACKS(s.mem[0], key);
	MH_LACKS(s.mem[1], key);
	shards_release(&s);
}

/* ---- threads while a shard flaps ---- */

#define THREADS	   4
#define PER_THREAD 24
#define ROUNDS	   40

struct writer_arg {
	struct shards *s;
	int id;
	char keys[PER_THREAD][32];
	char want[PER_THREAD][32]; /* "" when deleted */
	unsigned wrong;		   /* reads of another version, or ENOENT */
	unsigned unavailable;	   /* reads while the holder was out */
};

static atomic_int writers_done;

/* A read right after the thread's own write of @key: the content it
 * wrote (or "not found" after its delete), or unavailable while the
 * shard holding it is out - never another version. */
static void check_read(struct writer_arg *a, unsigned k)
{
	struct smux_error err;
	int rc;
	char *got = mh_get(a->s->mux, a->keys[k], &rc, &err);

	if (got) {
		if (strcmp(got, a->want[k]) != 0)
			a->wrong++;
		free(got);
	} else if (rc == -ENOENT) {
		if (a->want[k][0])
			a->wrong++;
	} else if (err.e.code == SMUX_E_ALL_BACKENDS_DOWN) {
		a->unavailable++;
	} else {
		a->wrong++;
	}
}

static void *writer_main(void *arg)
{
	struct writer_arg *a = arg;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	for (int r = 0; r < ROUNDS; r++) {
		for (unsigned k = 0; k < PER_THREAD; k++) {
			if ((r + k) % 5 == 4) {
				MH_OK(smux_backend_del(a->s->mux, &ctx,
						       a->keys[k], &err),
				      &err);
				a->want[k][0] = '\0';
			} else {
				snprintf(a->want[k], sizeof(a->want[k]),
					 "t%d-k%u-r%d", a->id, k, r);
				MH_OK(mh_put(a->s->mux, a->keys[k], a->want[k],
					     &err),
				      &err);
			}
			check_read(a, k);
		}
	}
	atomic_fetch_add(&writers_done, 1);
	return NULL;
}

/*
 * Writers of their own keys (put, overwrite, delete, each read back at
 * once) while one shard flaps and repairs run: no read ever returns
 * another version, or "not found" for a key that exists; after the storm
 * and a repair every key reads its last acknowledged state and lives on
 * its home only. Also run under ThreadSanitizer.
 */
static void test_flapping_shard_threads(void **state)
{
	static struct writer_arg args[THREADS];
	unsigned flaps = 0, unavailable = 0;
	pthread_t th[THREADS];
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	atomic_store(&writers_done, 0);
	for (int t = 0; t < THREADS; t++) {
		memset(&args[t], 0, sizeof(args[t]));
		args[t].s = &s;
		args[t].id = t;
		for (unsigned k = 0; k < PER_THREAD; k++)
			snprintf(args[t].keys[k], sizeof(args[t].keys[k]),
				 "th%d/k%u", t, k);
		assert_int_equal(
			pthread_create(&th[t], NULL, writer_main, &args[t]), 0);
	}
	/* flap until the writers are done */
	for (int f = 0; atomic_load(&writers_done) < THREADS; f++) {
		unsigned left;

		mh_fail(s.f[1], f % 2 == 0);
		shards_later(&s);
		smux_mux_repair(s.mux, &ctx, NULL, &left, &err);
		flaps++;
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	mh_fail(s.f[1], false);
	shards_later(&s);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	for (int t = 0; t < THREADS; t++)
		unavailable += args[t].unavailable;
	print_message("%d operations, %u flaps, %u reads unavailable\n",
		      THREADS * PER_THREAD * ROUNDS, flaps, unavailable);
	for (int t = 0; t < THREADS; t++) {
		assert_int_equal(args[t].wrong, 0);
		for (unsigned k = 0; k < PER_THREAD; k++) {
			const char *key = args[t].keys[k];

			if (!args[t].want[k][0]) {
				MH_LACKS(s.mux, key);
				for (unsigned m = 0; m < N; m++)
					MH_LACKS(s.mem[m], key);
				continue;
			}
			MH_HOLDS(s.mux, key, args[t].want[k]);
			for (unsigned m = 0; m < N; m++)
				if (m == home_of(key))
					MH_HOLDS(s.mem[m], key,
						 args[t].want[k]);
				else
					MH_LACKS(s.mem[m], key);
		}
	}
	shards_release(&s);
}

/* ---- remove and add back (the storm's membership chaos) ---- */

/* The @i-th key of @set whose home is @h3 over three shards and @h2 over
 * two (the placement a mux that forgot a removed shard would use). */
static void key_on2(char *key, size_t size, const char *set, unsigned h3,
		    unsigned h2, int i)
{
	for (int j = 0, found = 0;; j++) {
		unsigned long long f;

		snprintf(key, size, "%s/key-%d", set, j);
		f = smux_fnv1a(key, strlen(key));
		if (f % 3 == h3 && f % 2 == h2 && found++ == i)
			return;
	}
}

static void shard_remove(struct shards *s, unsigned i)
{
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	MH_OK(smux_mux_remove(s->mux, s->f[i]->name, &ctx, &err), &err);
}

static void shard_add(struct shards *s, unsigned i)
{
	struct smux_mux_member m = {.backend = s->f[i]};
	struct smux_error err;

	MH_OK(smux_mux_add(s->mux, &m, &err), &err);
}

/*
 * A removed shard is out of service, not forgotten: its keys are
 * unavailable (EIO), never "not found" (a program told ENOENT creates a
 * second version), and no key changes home (n stays): a key placed on
 * another shard still reads from there.
 */
static void test_removed_shard_unavailable(void **state)
{
	struct smux_mux_stats *st;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char gone[32], moved[32];
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(gone, sizeof(gone), "rm", 2, 0);
	key_on2(moved, sizeof(moved), "rm", 0, 1, 0);
	MH_OK(mh_put(s.mux, gone, "on s2", &err), &err);
	MH_OK(mh_put(s.mux, moved, "on s0", &err), &err);
	shard_remove(&s, 2);
	/* no member any more (its slot is not one) */
	assert_null(smux_mux_member(s.mux, "s2"));
	st = smux_mux_stats(s.mux);
	assert_non_null(st);
	assert_int_equal(st->n_backends, 2);
	smux_mux_stats_free(st);
	MH_ERR(smux_mux_drain(s.mux, "s2", &ctx, &err), &err,
	       SMUX_E_BACKEND_NOT_FOUND);
	assert_null(mh_get(s.mux, gone, &rc, &err));
	assert_unavailable(rc, &err);
	assert_unavailable(smux_backend_head(s.mux, &ctx, gone, &info, &err),
			   &err);
	MH_HOLDS(s.mux, moved, "on s0");
	shard_add(&s, 2);
	st = smux_mux_stats(s.mux);
	assert_non_null(st);
	assert_int_equal(st->n_backends, 3);
	assert_string_equal(st->backends[2].name, "s2");
	smux_mux_stats_free(st);
	MH_HOLDS(s.mux, gone, "on s2");
	MH_HOLDS(s.mux, moved, "on s0");
	shards_release(&s);
}

/*
 * Writes while a shard is removed are handed off as while it is down
 * (a hint under its name, replayed once it is a member again): after it
 * is added back, every key reads its last acknowledged version - the
 * keys homed on it, and the keys another placement over the shards left
 * would have moved - before and after the repair.
 */
static void test_remove_add_back_keeps_latest(void **state)
{
	enum { K = 6 };
	static const unsigned h3[K] = {2, 2, 0, 1, 0, 1};
	static const unsigned h2[K] = {0, 1, 1, 0, 0, 1};
	char keys[K][32], want[K][32];
	struct smux_error err;
	unsigned pending = 1;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */

	(void)state;
	shards_init(&s);
	for (int k = 0; k < K; k++) {
		key_on2(keys[k], sizeof(keys[k]), "back", h3[k], h2[k], 0);
		MH_OK(mh_put(s.mux, keys[k], "v1", &err), &err);
	}
	shard_remove(&s, 2);
	for (int k = 0; k < K; k++) {
		snprintf(want[k], sizeof(want[k]), "v2-%d", k);
		MH_OK(mh_put(s.mux, keys[k], want[k], &err), &err);
	}
	assert_int_equal(mismatches(s.mux, keys, want, K, "removed"), 0);
	shard_add(&s, 2);
	assert_int_equal(mismatches(s.mux, keys, want, K, "added back"), 0);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	assert_int_equal(mismatches(s.mux, keys, want, K, "repaired"), 0);
	for (int k = 0; k < K; k++)
		MH_HOLDS(s.mem[h3[k]], keys[k], want[k]);
	shards_release(&s);
}

/*
 * A key deleted (acknowledged) while its shard is removed stays deleted
 * once the shard is back with its old copy: not read, not listed.
 */
static void test_delete_while_removed(void **state)
{
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(key, sizeof(key), "del", 2, 0);
	MH_OK(mh_put(s.mux, key, "old", &err), &err);
	shard_remove(&s, 2);
	MH_OK(smux_backend_del(s.mux, &ctx, key, &err), &err);
	shard_add(&s, 2);
	assert_null(mh_get(s.mux, key, &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(listed(s.mux, "del/"), 0);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	assert_null(mh_get(s.mux, key, &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(listed(s.mux, "del/"), 0);
	MH_LACKS(s.mem[2], key);
	shards_release(&s);
}

/*
 * An in-place edit (a writer without TRUNC) while another shard is
 * removed starts from the object where it is, never from nothing on a
 * shard that does not hold it; and one of a key whose shard is removed is
 * unavailable.
 */
static void test_edit_while_removed(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32], gone[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on2(key, sizeof(key), "ed", 0, 1, 0);
	key_on(gone, sizeof(gone), "ed", 2, 0);
	MH_OK(mh_put(s.mux, key, "hello world", &err), &err);
	MH_OK(mh_put(s.mux, gone, "out", &err), &err);
	shard_remove(&s, 2);
	MH_OK(smux_backend_writer_open(s.mux, &ctx, key, 0, &w, &err), &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "HE", 2, 0, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	w = NULL;
	MH_HOLDS(s.mux, key, "HEllo world");
	assert_int_equal(
		smux_backend_writer_open(s.mux, &ctx, gone, 0, &w, &err), -EIO);
	assert_null(w);
	shard_add(&s, 2);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "HEllo world");
	MH_HOLDS(s.mux, gone, "out");
	shards_release(&s);
}

/* ---- membership changes at the exact moment a write was taken ---- */

static struct shards *race_s; /* the shards the hooks act on */
static int race_add = -1;     /* shard the fan-out hook adds back, once */
static int race_remove = -1;  /* shard the sticky hook removes, once */

static void add_on_fanout_ack(struct smux_mux *mux, const char *key)
{
	int i = race_add;

	(void)mux;
	(void)key;
	if (i < 0)
		return;
	race_add = -1;
	shard_add(race_s, (unsigned)i);
}

static void remove_on_sticky_ack(const char *key)
{
	int i = race_remove;

	(void)key;
	if (i < 0)
		return;
	race_remove = -1;
	shard_remove(race_s, (unsigned)i);
}

/*
 * A delete while a shard is removed leaves it out of the fan-out; the
 * shard is added back after the other shards took the delete and before
 * the mux recorded who missed it. It missed it all the same: a delete
 * hint, so its old copy is never read and the replay removes it.
 */
static void test_delete_meets_add_back(void **state)
{
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(key, sizeof(key), "dma", 2, 0);
	MH_OK(mh_put(s.mux, key, "old", &err), &err);
	shard_remove(&s, 2);
	race_s = &s;
	race_add = 2;
	smux__fanout_hook_acked = add_on_fanout_ack;
	MH_OK(smux_backend_del(s.mux, &ctx, key, &err), &err);
	smux__fanout_hook_acked = NULL;
	assert_int_equal(race_add, -1); /* the hook ran */
	assert_null(mh_get(s.mux, key, &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(listed(s.mux, "dma/"), 0);
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	assert_null(mh_get(s.mux, key, &rc, &err));
	MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
	MH_LACKS(s.mem[2], key);
	shards_release(&s);
}

/* The repair of @race_s, run after the shards listed and before the
 * listings were merged. */
static void repair_after_listing(struct smux_mux *mux)
{
	unsigned pending = 1;

	(void)mux;
	smux__list_hook_listed = NULL;
	mh_fail(race_s->f[2], false); /* deletes taken again */
	shards_repair(race_s, &pending);
	assert_int_equal(pending, 0);
}

/*
 * A delete a shard missed is replayed while a listing is under way: the
 * shard listed its old copy before the replay, the merge runs after it
 * (the delete hint done). The key is not listed: the merge goes by the
 * hints pending when the listing started.
 */
static void test_list_meets_replay(void **state)
{
	struct smux_faulty_opts no_del = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_DEL,
	};
	struct smux_error err;
	struct smux_ctx ctx;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(key, sizeof(key), "lmr", 2, 0);
	MH_OK(mh_put(s.mux, key, "old", &err), &err);
	mh_fail(s.f[2], true);
	MH_OK(smux_backend_del(s.mux, &ctx, key, &err), &err);
	/* back, but its replay held back (deletes refused for now) */
	smux_faulty_set(s.f[2], &no_del);
	shards_later(&s);
	MH_HOLDS(s.mem[2], key, "old");
	race_s = &s;
	smux__list_hook_listed = repair_after_listing;
	assert_int_equal(listed(s.mux, "lmr/"), 0);
	assert_null(smux__list_hook_listed); /* the repair ran */
	MH_LACKS(s.mem[2], key);
	shards_release(&s);
}

/* Sum of the sizes of the entries a listing delivers, and their count. */
struct sized {
	unsigned n;
	uint64_t bytes;
};

static int sized_cb(void *arg, const struct smux_list_entry *e)
{
	struct sized *z = arg;

	z->n++;
	z->bytes += e->info.size;
	return 0;
}

static struct sized listed_sized(struct smux_backend *mux, const char *prefix)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct sized z = {0, 0};

	smux_ctx_init(&ctx);
	MH_OK(smux_backend_list(mux, &ctx, prefix, NULL, sized_cb, &z, &err),
	      &err);
	return z;
}

/* The repair of @race_s, run once the listing took its snapshot of the
 * pending hints and before any shard listed. */
static void repair_before_listing(struct smux_mux *mux)
{
	unsigned pending = 1;

	(void)mux;
	smux__list_hook_snapped = NULL;
	shards_repair(race_s, &pending);
	assert_int_equal(pending, 0);
}

/*
 * Handoffs replayed while a listing is under way, after it took its
 * snapshot of the pending hints: home lists the keys it now holds (an
 * overwrite, a key written while it was out), the shard that held them
 * no longer does. Both keys are listed, with the sizes written last: a
 * put hint that was pending says home may be behind, not that the key is
 * gone (CI's flake of test_list_before_replay: 4 keys listed of 5).
 */
static void test_list_handoff_meets_replay(void **state)
{
	struct smux_error err;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[2][32];
	struct sized z;

	(void)state;
	shards_init(&s);
	key_on(key[0], sizeof(key[0]), "lhr", 2, 0);
	key_on(key[1], sizeof(key[1]), "lhr", 2, 1);
	MH_OK(mh_put(s.mux, key[0], "old", &err), &err);
	mh_fail(s.f[2], true);
	MH_OK(mh_put(s.mux, key[0], "newer", &err), &err);
	MH_OK(mh_put(s.mux, key[1], "fresh!", &err), &err);
	mh_fail(s.f[2], false);
	shards_later(&s);
	race_s = &s;
	smux__list_hook_snapped = repair_before_listing;
	z = listed_sized(s.mux, "lhr/");
	assert_null(smux__list_hook_snapped); /* the repair ran */
	assert_int_equal(z.n, 2);
	assert_int_equal(z.bytes, strlen("newer") + strlen("fresh!"));
	MH_HOLDS(s.mem[2], key[0], "newer");
	MH_HOLDS(s.mem[2], key[1], "fresh!");
	shards_release(&s);
}

/* The replay of @race_s run while the shard that took a handoff hangs in
 * its listing and home has listed: the key moves home behind both
 * listings. */
struct behind_both {
	struct shards *s;
	unsigned holder, home;
	int rc;
};

static void *replay_between_listings(void *arg)
{
	struct behind_both *b = arg;
	struct smux_faulty_opts none = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;

	smux_ctx_init(&ctx);
	while (smux_faulty_hanging(b->s->f[b->holder]) == 0)
		usleep(1000);
	usleep(50000); /* home's listing is back (memory: microseconds) */
	smux_faulty_set(b->s->f[b->home], &none); /* puts taken again */
	b->rc = smux_mux_repair(b->s->mux, &ctx, NULL, &pending, &err);
	if (b->rc == 0 && pending != 0)
		b->rc = -EAGAIN;
	smux_faulty_release_hangs(b->s->f[b->holder]);
	return NULL;
}

/*
 * A key written while home was out, moved home between home's listing and
 * the listing of the shard that held it: neither lists it. The listing
 * still shows it (it asks the mux for the keys of the put hints pending
 * when it started that no shard listed).
 */
static void test_list_misses_moved_key(void **state)
{
	struct smux_faulty_opts hang_list = {
		.hang_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_LIST,
	};
	struct smux_faulty_opts no_put = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	struct smux_error err;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	struct behind_both b = {&s, N, 2, -1};
	char key[32];
	pthread_t th;
	struct sized z;

	(void)state;
	shards_init(&s);
	key_on(key, sizeof(key), "lmk", 2, 0);
	mh_fail(s.f[2], true);
	MH_OK(mh_put(s.mux, key, "moved", &err), &err);
	for (unsigned i = 0; i < N; i++) {
		struct smux_info info;
		struct smux_ctx ctx;

		smux_ctx_init(&ctx);
		if (i != 2 &&
		    smux_backend_head(s.mem[i], &ctx, key, &info, &err) == 0)
			b.holder = i;
	}
	assert_true(b.holder < N);
	/* back, but its replay held back (puts refused for now) */
	smux_faulty_set(s.f[2], &no_put);
	shards_later(&s);
	smux_faulty_set(s.f[b.holder], &hang_list);
	assert_int_equal(pthread_create(&th, NULL, replay_between_listings, &b),
			 0);
	z = listed_sized(s.mux, "lmk/");
	pthread_join(th, NULL);
	assert_int_equal(b.rc, 0);
	assert_int_equal(z.n, 1);
	assert_int_equal(z.bytes, strlen("moved"));
	MH_HOLDS(s.mem[2], key, "moved");
	mh_fail(s.f[b.holder], false);
	shards_release(&s);
}

/*
 * Home takes a put (superseding its hint for an earlier handoff) and is
 * removed before the mux records the handoff bookkeeping: the latest
 * version is on the removed shard, not on the shard holding the handoff
 * copy. While it is out the key is unavailable (not the handoff's older
 * version); once it is back it reads the put, and the replay removes the
 * handoff copy rather than carry it home over the put.
 */
static void test_put_meets_remove(void **state)
{
	struct smux_error err;
	unsigned pending = 1;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];
	int rc;

	(void)state;
	shards_init(&s);
	key_on(key, sizeof(key), "pmr", 2, 0);
	MH_OK(mh_put(s.mux, key, "v1", &err), &err);
	mh_fail(s.f[2], true);
	MH_OK(mh_put(s.mux, key, "v2", &err), &err);
	MH_HOLDS(s.mem[0], key, "v2");
	mh_fail(s.f[2], false);
	shards_later(&s);
	race_s = &s;
	race_remove = 2;
	smux__sticky_hook_acked = remove_on_sticky_ack;
	MH_OK(mh_put(s.mux, key, "v3", &err), &err);
	smux__sticky_hook_acked = NULL;
	assert_int_equal(race_remove, -1); /* the hook ran */
	MH_HOLDS(s.mem[2], key, "v3");
	assert_null(mh_get(s.mux, key, &rc, &err));
	assert_unavailable(rc, &err);
	shard_add(&s, 2);
	MH_HOLDS(s.mux, key, "v3");
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "v3");
	MH_HOLDS(s.mem[2], key, "v3");
	MH_LACKS(s.mem[0], key);
	shards_release(&s);
}

/* ---- an in-place writer opens while the replay moves its key ---- */

static atomic_bool open_race_waited; /* a replay waited for the gate */
static struct shards *open_race_s;
static const char *open_race_key;
static struct smux_writer *open_race_w;
static int open_race_rc;

static void open_race_gate_wait(const char *key)
{
	if (strcmp(key, open_race_key) == 0)
		atomic_store(&open_race_waited, true);
}

static void *open_race_open(void *arg)
{
	struct smux_error err;
	struct smux_ctx ctx;

	(void)arg;
	smux_ctx_init(&ctx);
	open_race_rc = smux_backend_writer_open(
		open_race_s->mux, &ctx, open_race_key, 0, &open_race_w, &err);
	return NULL;
}

static void *open_race_repair(void *arg)
{
	unsigned pending;

	(void)arg;
	shards_repair(open_race_s, &pending);
	return NULL;
}

/*
 * An in-place writer (no TRUNC) opens on the shard holding a handed-off
 * key; its open call is on its way (hung in the shard's writer open) when
 * the replay moves the key home and deletes that copy. The open and the
 * replay are one step each for the key: the writer starts from the
 * object, never from nothing on a shard that no longer has it (which
 * would leave only the edit).
 */
static void test_edit_open_meets_replay(void **state)
{
	struct smux_faulty_opts hang = {
		.hang_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct smux_faulty_opts none = {0};
	struct smux_error err;
	unsigned pending = 1;
	struct smux_ctx ctx;
	pthread_t opener, repairer;
	static struct shards
		s; /* outlives a failed test: its mux keeps the clock */
	char key[32];

	(void)state;
	smux_ctx_init(&ctx);
	shards_init(&s);
	key_on(key, sizeof(key), "eor", 0, 0);
	mh_fail(s.f[0], true);
	MH_OK(mh_put(s.mux, key, "hello world", &err), &err);
	MH_HOLDS(s.mem[1], key, "hello world");
	open_race_s = &s;
	open_race_key = key;
	open_race_w = NULL;
	atomic_store(&open_race_waited, false);
	smux__sticky_hook_gate_wait = open_race_gate_wait;
	smux_faulty_set(s.f[1], &hang);
	assert_int_equal(pthread_create(&opener, NULL, open_race_open, NULL),
			 0);
	while (smux_faulty_hanging(s.f[1]) == 0)
		sched_yield();
	/* home is back: a replay (this one, or the background thread's)
	 * moves the key, or waits for the opener to be done */
	mh_fail(s.f[0], false);
	shards_later(&s);
	assert_int_equal(
		pthread_create(&repairer, NULL, open_race_repair, NULL), 0);
	while (!atomic_load(&open_race_waited) &&
	       smux_mux_pending_hints(s.mux) > 0)
		sched_yield();
	smux_faulty_release_hangs(s.f[1]);
	pthread_join(opener, NULL);
	smux_faulty_set(s.f[1], &none);
	MH_OK(open_race_rc, &err);
	MH_OK(smux_writer_pwrite(open_race_w, &ctx, "HE", 2, 0, &err), &err);
	MH_OK(smux_writer_commit(open_race_w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(open_race_w);
	pthread_join(repairer, NULL);
	smux__sticky_hook_gate_wait = NULL;
	MH_HOLDS(s.mux, key, "HEllo world");
	shards_repair(&s, &pending);
	assert_int_equal(pending, 0);
	MH_HOLDS(s.mux, key, "HEllo world");
	MH_HOLDS(s.mem[0], key, "HEllo world");
	shards_release(&s);
}

/* The size a listing of @prefix through @mux gives @key (-1: none). */
struct size_of {
	const char *key;
	long long size;
};

static int size_of_cb(void *arg, const struct smux_list_entry *e)
{
	struct size_of *so = arg;

	if (!e->is_prefix && strcmp(e->key, so->key) == 0)
		so->size = (long long)e->info.size;
	return 0;
}

/*
 * A key placed before the shard list grew, then written again (an
 * overwrite goes home and leaves the older copy where it was): a listing
 * gives the entry of the shard reads go to, home, not the older copy a
 * shard earlier in member order holds (ls -l showed the old size, and the
 * kernel then read the file short: outside tester s38-t3, after an add
 * of a shard over s3 and WebDAV shards).
 */
static void test_list_prefers_holder(void **state)
{
	struct size_of so = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct shards s;
	char key[32];

	(void)state;
	shards_init(&s);
	smux_ctx_init(&ctx);
	key_on(key, sizeof(key), "g", 2, 0);
	/* the older copy on s0 (placed when its home was s0) */
	MH_OK(mh_put(s.mem[0], key, "older and longer", &err), &err);
	MH_OK(mh_put(s.mux, key, "new", &err), &err);
	MH_HOLDS(s.mem[2], key, "new");
	MH_HOLDS(s.mux, key, "new");
	so.key = key;
	so.size = -1;
	MH_OK(smux_backend_list(s.mux, &ctx, "g/", NULL, size_of_cb, &so, &err),
	      &err);
	assert_int_equal(so.size, 3);
	shards_release(&s);
}

/*
 * A directory removed while a shard is out: that shard may hold entries
 * under it that no listing showed (rm -rf removed what it saw, and the
 * directory came back with the rest once the shard did: outside tester
 * s38-t3). Refused as not empty (not as a failing mux: one this mux is a
 * member of would take it down), nothing removed and nothing hinted. A
 * shard removed at run time does not hold removals up for good.
 */
static void test_rmdir_with_shard_out(void **state)
{
	struct smux_error err;
	struct smux_ctx ctx;
	struct shards s;
	char key[32];

	(void)state;
	shards_init(&s);
	smux_ctx_init(&ctx);
	key_on(key, sizeof(key), "d", 1, 0);
	MH_OK(mh_put(s.mux, key, "v", &err), &err);
	MH_OK(smux_mux_drain(s.mux, "s1", &ctx, &err), &err);
	MH_ERR(smux_backend_del(s.mux, &ctx, "d/", &err), &err,
	       SMUX_E_NOT_EMPTY);
	assert_int_equal(smux_mux_pending_hints(s.mux), 0);
	MH_HOLDS(s.mem[1], key, "v");
	MH_OK(smux_mux_undrain(s.mux, "s1", &err), &err);
	MH_HOLDS(s.mux, key, "v");
	/* s1 removed: its slot does not refuse a fresh directory's removal */
	MH_OK(smux_mux_remove(s.mux, "s1", &ctx, &err), &err);
	MH_OK(smux_backend_del(s.mux, &ctx, "fresh/", &err), &err);
	shards_release(&s);
}

/* The mode of "d/" on shard @i. */
static unsigned marker_mode(struct shards *s, int i)
{
	struct smux_info info = {0};
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	MH_OK(smux_backend_head(s->mem[i], &ctx, "d/", &info, &err), &err);
	return info.mode & 07777;
}

/*
 * A directory is on every shard; a chmod of it while a shard is out
 * (drained: home, then another) reaches that shard by its replay, and
 * reads of the directory meanwhile show the new mode. Before, the shard
 * out got no hint: after the undrain stat showed the old mode again, for
 * good (s42-t3: chmod 711 + touch of a directory acknowledged, lost).
 */
static void test_dir_change_shard_out(void **state)
{
	struct smux_setattr attr = {.flags = SMUX_SET_MODE};
	struct smux_info info = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending, out;
	char name[8];
	struct shards s;

	(void)state;
	shards_init(&s);
	smux_ctx_init(&ctx);
	MH_OK(mh_put(s.mux, "d/", "", &err), &err);
	for (int i = 0; i < N; i++) /* on every shard */
		assert_int_equal(marker_mode(&s, i), 0755);
	for (unsigned k = 0; k < 2; k++) {
		out = (home_of("d/") + k) % N;
		snprintf(name, sizeof(name), "s%u", out);
		attr.mode = 0700 - 0100 * k;
		MH_OK(smux_mux_drain(s.mux, name, &ctx, &err), &err);
		MH_OK(smux_backend_setattr(s.mux, &ctx, "d/", &attr, &err),
		      &err);
		assert_int_equal(smux_mux_pending_hints(s.mux), 1);
		MH_OK(smux_backend_head(s.mux, &ctx, "d/", &info, &err), &err);
		assert_int_equal(info.mode & 07777, attr.mode);
		MH_OK(smux_mux_undrain(s.mux, name, &err), &err);
		MH_OK(smux_backend_head(s.mux, &ctx, "d/", &info, &err), &err);
		assert_int_equal(info.mode & 07777, attr.mode);
		shards_later(&s);
		shards_repair(&s, &pending);
		assert_int_equal(pending, 0);
		for (int i = 0; i < N; i++)
			assert_int_equal(marker_mode(&s, i), attr.mode);
	}
	shards_release(&s);
}

/* Three file shards s0..s2 behind faulty wrappers, under @base (a
 * directory made here), with a journal: directories are real there, and
 * a put under d/ makes d on its shard. */
struct fshards {
	char base[40], dir[N][64], state[64];
	struct smux_backend *fb[N], *f[N], *mux;
	struct mh_clock clk;
};

static void fshards_init(struct fshards *s)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_STICKY, .cooldown_ms = 100};
	char name[16], base[sizeof(s->base)] = "/tmp/smux-stf-XXXXXX";
	struct smux_error err;

	memset(s, 0, sizeof(*s));
	assert_non_null(mkdtemp(base));
	memcpy(s->base, base, sizeof(base));
	snprintf(s->state, sizeof(s->state), "%s/state", base);
	assert_int_equal(mkdir(s->state, 0755), 0);
	mh_clock_init(&s->clk, 10000);
	o.clock = &s->clk.clock;
	o.state_dir = s->state;
	for (int i = 0; i < N; i++) {
		struct smux_file_opts fo = {.path = s->dir[i],
					    .no_fsync = true};

		snprintf(s->dir[i], sizeof(s->dir[i]), "%s/s%d", base, i);
		assert_int_equal(mkdir(s->dir[i], 0755), 0);
		snprintf(name, sizeof(name), "file%d", i);
		MH_OK(smux_file_new(name, &fo, &s->fb[i], &err), &err);
		snprintf(name, sizeof(name), "s%d", i);
		s->f[i] = mh_faulty(name, s->fb[i], NULL);
	}
	s->mux = mh_mux("stf", &o, s->f, NULL, N);
}

static void fshards_release(struct fshards *s)
{
	smux_backend_unref(s->mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(s->f[i]);
		smux_backend_unref(s->fb[i]);
	}
	mh_rm_rf(s->base);
}

/* The mode of directory d on shard @i, -1 when it has none. */
static int fshard_mode(struct fshards *s, int i)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/d", s->dir[i]);
	return stat(path, &st) ? -1 : (int)(st.st_mode & 07777);
}

static void fshard_drain(struct fshards *s, unsigned i, bool drain)
{
	struct smux_error err;
	struct smux_ctx ctx;
	char name[8];

	smux_ctx_init(&ctx);
	snprintf(name, sizeof(name), "s%u", i);
	if (drain)
		MH_OK(smux_mux_drain(s->mux, name, &ctx, &err), &err);
	else
		MH_OK(smux_mux_undrain(s->mux, name, &err), &err);
}

/*
 * (s43 review) A chmod of d while one shard lacks d (it was out at the
 * mkdir) and another is drained; then a file put whose home is the first
 * makes d there with a mode of its own. The drained one's replay copied
 * the marker from the first shard in view order - that one, whose mode
 * the chmod never reached: the acknowledged mode was left on one shard.
 * Now the shard without d gets a hint too, and is no source.
 */
static void test_dir_change_shard_without_dir(void **state)
{
	struct smux_setattr attr = {.flags = SMUX_SET_MODE, .mode = 0700};
	unsigned lacks = 0, out = 2, pending;
	struct smux_error err;
	struct smux_ctx ctx;
	struct fshards s;
	char key[32];

	(void)state;
	fshards_init(&s);
	smux_ctx_init(&ctx);
	fshard_drain(&s, lacks, true);
	MH_OK(mh_put(s.mux, "d/", "", &err), &err);
	fshard_drain(&s, lacks, false);
	assert_int_equal(fshard_mode(&s, lacks), -1);
	fshard_drain(&s, out, true);
	MH_OK(smux_backend_setattr(s.mux, &ctx, "d/", &attr, &err), &err);
	for (int j = 0;; j++) { /* a file whose home lacks d */
		snprintf(key, sizeof(key), "d/f%d", j);
		if (home_of(key) == lacks)
			break;
	}
	MH_OK(mh_put(s.mux, key, "x", &err), &err);
	fshard_drain(&s, out, false);
	mh_clock_set(&s.clk, 200000);
	smux_mux_check_health(s.mux);
	MH_OK(smux_mux_repair(s.mux, &ctx, NULL, &pending, &err), &err);
	assert_int_equal(pending, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(fshard_mode(&s, i), 0700);
	fshards_release(&s);
}

/*
 * (s43 review) A lookup heads the directory's name "d", not its marker
 * "d/" the chmod went to: the shard undrained, its hint for "d/" not yet
 * replayed, answered with the mode from before the chmod.
 */
static void test_dir_head_name_shard_behind(void **state)
{
	struct smux_setattr attr = {.flags = SMUX_SET_MODE, .mode = 0700};
	struct smux_info info = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	struct fshards s;
	unsigned pending;

	(void)state;
	fshards_init(&s);
	smux_ctx_init(&ctx);
	smux_mux_hold_repairs(true); /* no replay before the heads */
	MH_OK(mh_put(s.mux, "d/", "", &err), &err);
	for (unsigned k = 0; k < N; k++) { /* every shard out in turn */
		attr.mode = 0700 - 0010 * k;
		fshard_drain(&s, k, true);
		MH_OK(smux_backend_setattr(s.mux, &ctx, "d/", &attr, &err),
		      &err);
		fshard_drain(&s, k, false);
		assert_int_equal(smux_mux_pending_hints(s.mux), 1);
		MH_OK(smux_backend_head(s.mux, &ctx, "d", &info, &err), &err);
		assert_true(S_ISDIR(info.mode));
		assert_int_equal(info.mode & 07777, attr.mode);
		smux_mux_hold_repairs(false);
		mh_clock_set(&s.clk, 100000 * (int64_t)(k + 2));
		MH_OK(smux_mux_repair(s.mux, &ctx, NULL, &pending, &err), &err);
		assert_int_equal(pending, 0);
		smux_mux_hold_repairs(true);
	}
	smux_mux_hold_repairs(false);
	fshards_release(&s);
}

/*
 * A key placed before the shard list grew lives off its home; a program
 * keeps it open in place and commits twice (an fsync, then the close).
 * The first commit hints home, but no replay moves the key while the
 * writer is open: the move deleted the copy the writer's descriptor was
 * on, the second write went to a file no name reached, and the next
 * replay found nothing to move (the fsync'd second write lost; a
 * reviewer's scenario).
 */
static void test_no_move_under_open_writer(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_STICKY, .cooldown_ms = 100};
	struct smux_file_opts fo = {.no_fsync = true};
	struct smux_backend *fb[N], *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct mh_clock clk;
	char base[64], dir[96], name[16], key[32];
	unsigned home, off;

	(void)state;
	smux_ctx_init(&ctx);
	mh_clock_init(&clk, 10000);
	o.clock = &clk.clock;
	o.events = ev->bus;
	snprintf(base, sizeof(base), "/tmp/smux-sticky-w-XXXXXX");
	assert_non_null(mkdtemp(base));
	for (int i = 0; i < N; i++) {
		snprintf(dir, sizeof(dir), "%s/s%d", base, i);
		assert_int_equal(mkdir(dir, 0755), 0);
		fo.path = dir;
		snprintf(name, sizeof(name), "s%d", i);
		MH_OK(smux_file_new(name, &fo, &fb[i], &err), &err);
	}
	mux = mh_mux("st", &o, fb, NULL, N);
	smux__mux_bg_stop(smux__mux_of(mux));
	key_on(key, sizeof(key), "w", 0, 0);
	home = 0;
	off = 1; /* placed on s1 when s1 was its home */
	MH_OK(mh_put(fb[off], key, "0123456789", &err), &err);
	MH_HOLDS(mux, key, "0123456789");
	MH_OK(smux_backend_writer_open(mux, &ctx, key, SMUX_WRITER_INPLACE, &w,
				       &err),
	      &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "A", 1, 0, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	assert_true(smux_mux_pending_hints(mux) >= 1);
	/* the repair while the writer is open leaves the key where it is,
	 * quietly: a log held open for days made a failed hint.replayed
	 * event at every pass (about one a second) */
	assert_true(mh_repair(mux, &clk, 3) >= 1);
	MH_HOLDS(fb[off], key, "A123456789");
	assert_int_equal(mh_events_count(ev, SMUX_EV_HINT_REPLAYED), 0);
	MH_OK(smux_writer_pwrite(w, &ctx, "B", 1, 1, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	assert_int_equal(mh_repair(mux, &clk, 5), 0);
	MH_HOLDS(mux, key, "AB23456789");
	MH_HOLDS(fb[home], key, "AB23456789");
	MH_LACKS(fb[off], key);
	smux_backend_unref(mux);
	for (int i = 0; i < N; i++)
		smux_backend_unref(fb[i]);
	mh_rm_rf(base);
	mh_events_free(ev);
}

/*
 * A key living off home (placed before the shard list grew) while the
 * shard holding it fails: a writer that starts from the content is
 * refused as unavailable. Opened on home, it started from nothing, and
 * its commit made home's empty-based version the key's (a reviewer's
 * scenario; the fault the same as a shard gone down since the lookup).
 */
static void test_placed_shard_out_unavailable(void **state)
{
	struct smux_writer *w = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	struct shards s;
	char key[32];

	(void)state;
	shards_init(&s);
	smux_ctx_init(&ctx);
	key_on(key, sizeof(key), "p", 0, 0);
	MH_OK(mh_put(s.mem[1], key, "old", &err), &err);
	MH_HOLDS(s.mux, key, "old");
	mh_fail(s.f[1], true);
	MH_ERR(smux_backend_writer_open(s.mux, &ctx, key, 0, &w, &err), &err,
	       SMUX_E_ALL_BACKENDS_DOWN);
	assert_null(w);
	MH_LACKS(s.mem[0], key);
	mh_fail(s.f[1], false);
	shards_later(&s);
	MH_OK(smux_backend_writer_open(s.mux, &ctx, key, 0, &w, &err), &err);
	MH_OK(smux_writer_pwrite(w, &ctx, "n", 1, 3, &err), &err);
	MH_OK(smux_writer_commit(w, &ctx, NULL, NULL, &err), &err);
	smux_writer_close(w);
	MH_HOLDS(s.mux, key, "oldn");
	shards_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_all_up),
		cmocka_unit_test(test_overwrite_during_outage),
		cmocka_unit_test(test_rm_then_rename_after_recovery),
		cmocka_unit_test(test_rm_then_put_before_replay),
		cmocka_unit_test(test_list_before_replay),
		cmocka_unit_test(test_home_down_unavailable),
		cmocka_unit_test(test_edit_while_home_down),
		cmocka_unit_test(test_link_shards),
		cmocka_unit_test(test_home_write_supersedes_handoff),
		cmocka_unit_test(test_two_shards_out),
		cmocka_unit_test(test_put_during_replay),
		cmocka_unit_test(test_flapping_shard_threads),
		cmocka_unit_test(test_removed_shard_unavailable),
		cmocka_unit_test(test_remove_add_back_keeps_latest),
		cmocka_unit_test(test_delete_while_removed),
		cmocka_unit_test(test_edit_while_removed),
		cmocka_unit_test(test_delete_meets_add_back),
		cmocka_unit_test(test_list_meets_replay),
		cmocka_unit_test(test_list_handoff_meets_replay),
		cmocka_unit_test(test_list_misses_moved_key),
		cmocka_unit_test(test_put_meets_remove),
		cmocka_unit_test(test_edit_open_meets_replay),
		cmocka_unit_test(test_list_prefers_holder),
		cmocka_unit_test(test_rmdir_with_shard_out),
		cmocka_unit_test(test_dir_change_shard_out),
		cmocka_unit_test(test_dir_change_shard_without_dir),
		cmocka_unit_test(test_dir_head_name_shard_behind),
		cmocka_unit_test(test_no_move_under_open_writer),
		cmocka_unit_test(test_placed_shard_out_unavailable),
	};

	return cmocka_run_group_tests_name("mux sticky", tests, NULL, NULL);
}
