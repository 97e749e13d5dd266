// SPDX-License-Identifier: MIT
/*
 * test_mux_reader.c - readers through the mux (src/core/mux_reader.c):
 * in every mode, over memory members (read with pinned gets) and over file
 * members (their own readers), the reader reads what was written and every
 * read goes to the one member the open was routed to; round-robin rotates
 * opens, sticky-by-key finds a key off its shard, failover falls through,
 * a stale replica (pending hint) is never chosen; a member failing, hanging
 * or draining in the middle of a read hands the read to another replica
 * with identical bytes, and a replica with another version answers
 * PRECONDITION_FAILED, also between members of different kinds (their
 * own version tokens; size and mtime identify the version across them);
 * reads count in stats like gets; nested muxes; four
 * threads reading while members flap.
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
#include "smux/file.h"

#define N	   3
#define SAME_MTIME 1700000000123456789LL

/* Three members: memory or file leaves, optionally behind faulty
 * wrappers (then read with pinned gets: faulty has no reader). */
struct set {
	struct smux_backend *leaf[N];
	struct smux_backend *m[N]; /* the members: faulty or the leaves */
	struct smux_backend *mux;
	struct mh_events *ev;
	struct mh_clock clk;
	char dir[N][64]; /* file leaves' roots */
	bool file, wrap;
	enum smux_mode mode;
};

struct set_opts {
	bool file;
	bool wrap;
	int64_t timeout_ms;
	int64_t cooldown_ms;
	bool clock; /* the injected clock (else the real one) */
	int64_t (*now_ms)(void *arg); /* with clock: its reading (NULL:
					 mh_clock_now) */
};

static void set_init(struct set *s, enum smux_mode mode,
		     const struct set_opts *so)
{
	static const double weights[N] = {1, 1, 1};
	struct smux_mux_opts o = {
		.mode = mode,
		.backend_timeout_ms = so->timeout_ms,
		.cooldown_ms = so->cooldown_ms ? so->cooldown_ms : 600000,
	};
	char name[32];

	memset(s, 0, sizeof(*s));
	s->file = so->file;
	s->wrap = so->wrap;
	s->mode = mode;
	s->ev = mh_events_new();
	o.events = s->ev->bus;
	if (so->clock) {
		mh_clock_init(&s->clk, 10000);
		if (so->now_ms)
			s->clk.clock.now_ms = so->now_ms;
		o.clock = &s->clk.clock;
	}
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "leaf%d", i);
		if (s->file) {
			struct smux_file_opts fo = {.no_fsync = true};
			struct smux_error err;

			snprintf(s->dir[i], sizeof(s->dir[i]),
				 "/tmp/smux-mr-XXXXXX");
			assert_non_null(mkdtemp(s->dir[i]));
			fo.path = s->dir[i];
			MH_OK(smux_file_new(name, &fo, &s->leaf[i], &err),
			      &err);
		} else {
			s->leaf[i] = mh_memory(name);
		}
		snprintf(name, sizeof(name), "m%d", i);
		s->m[i] = s->wrap ? mh_faulty(name, s->leaf[i], NULL)
				  : smux_backend_ref(s->leaf[i]);
	}
	s->mux = mh_mux("mux", &o, s->m,
			mode == SMUX_MODE_WEIGHTED ? weights : NULL, N);
}

static void set_release(struct set *s)
{
	smux_backend_unref(s->mux);
	for (int i = 0; i < N; i++) {
		smux_backend_unref(s->m[i]);
		smux_backend_unref(s->leaf[i]);
		if (s->dir[i][0])
			mh_rm_rf(s->dir[i]);
	}
	mh_events_free(s->ev);
}

/* Deterministic bytes of object @seed. */
static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *p = malloc(len ? len : 1);
	uint32_t x = seed * 2654435761u + 1;

	assert_non_null(p);
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
	return p;
}

static void put_on(struct smux_backend *b, const char *key,
		   const unsigned char *buf, size_t len, int64_t mtime)
{
	struct smux_put_opts po = {.mtime_ns = mtime};
	struct smux_source src;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	smux_source_buf(&src, buf, len);
	MH_OK(smux_backend_put(b, &ctx, key, &src, &po, NULL, &err), &err);
}

/* Stores @key where reads of the mode find it: through the mux for the
 * modes that fan out or shard, else on every member with one mtime (the
 * same version everywhere, as a fan-out writes it). */
static void set_put(struct set *s, const char *key, const unsigned char *buf,
		    size_t len)
{
	if (s->mode == SMUX_MODE_MIRROR || s->mode == SMUX_MODE_SHIELD ||
	    s->mode == SMUX_MODE_STICKY) {
		put_on(s->mux, key, buf, len, 0);
		return;
	}
	for (int i = 0; i < N; i++)
		put_on(s->leaf[i], key, buf, len, SAME_MTIME);
}

/* Calls member @i answered so far: the faulty wrapper's count, or the
 * mux's stats of the member. */
static uint64_t calls_of(struct set *s, int i)
{
	struct smux_mux_stats *st;
	uint64_t n;

	if (s->wrap)
		return smux_faulty_calls(s->m[i]);
	st = smux_mux_stats(s->mux);
	assert_non_null(st);
	n = st->backends[i].hits + st->backends[i].misses +
	    st->backends[i].errors;
	smux_mux_stats_free(st);
	return n;
}

static void snap(struct set *s, uint64_t *c)
{
	for (int i = 0; i < N; i++)
		c[i] = calls_of(s, i);
}

/* The one member whose calls grew since @before (by *@by); fails when
 * none or several did. */
static int grew(struct set *s, const uint64_t *before, uint64_t *by)
{
	int who = -1;

	for (int i = 0; i < N; i++) {
		uint64_t now = calls_of(s, i);

		if (now == before[i])
			continue;
		if (who >= 0)
			fail_msg("members %d and %d both served reads", who, i);
		who = i;
		if (by)
			*by = now - before[i];
	}
	if (who < 0) {
		fail_msg("no member served the reads");
		return 0; /* not reached: fail_msg ends the test */
	}
	return who;
}

static struct smux_reader *ropen(struct smux_backend *b, const char *key)
{
	struct smux_reader *r = NULL;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	MH_OK(smux_backend_reader_open(b, &ctx, key, &r, &err), &err);
	assert_non_null(r);
	return r;
}

static long rpread(struct smux_reader *r, void *buf, size_t len, uint64_t off,
		   struct smux_error *err)
{
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	return smux_reader_pread(r, &ctx, buf, len, off, err);
}

/* Reads [from, to) of @r in @chunk pieces and compares with @want;
 * returns the number of preads. */
static unsigned read_range(struct smux_reader *r, const unsigned char *want,
			   size_t from, size_t to, size_t chunk)
{
	unsigned char *buf = malloc(chunk);
	struct smux_error err;
	unsigned n = 0;

	assert_non_null(buf);
	for (size_t off = from; off < to; off += chunk) {
		size_t len = to - off < chunk ? to - off : chunk;
		long got = rpread(r, buf, len, off, &err);

		if (got < 0)
			MH_OK(got, &err);
		assert_int_equal(got, len);
		assert_memory_equal(buf, want + off, len);
		n++;
	}
	free(buf);
	return n;
}

/* ---- every mode reads what was written, from one member ---- */

static const enum smux_mode all_modes[] = {
	SMUX_MODE_FAILOVER, SMUX_MODE_ROUND_ROBIN, SMUX_MODE_WEIGHTED,
	SMUX_MODE_STICKY,   SMUX_MODE_SHIELD,	   SMUX_MODE_MIRROR,
};

static void modes(bool file, bool wrap)
{
	enum { LEN = 100000 };
	unsigned char *want = pattern(LEN, 7), tail[16];

	for (size_t k = 0; k < sizeof(all_modes) / sizeof(all_modes[0]); k++) {
		struct set_opts so = {.file = file, .wrap = wrap};
		uint64_t before[N], by = 0;
		struct smux_reader *r;
		struct smux_error err;
		struct set s;
		unsigned n;
		int who;

		set_init(&s, all_modes[k], &so);
		set_put(&s, "dir/obj", want, LEN);
		r = ropen(s.mux, "dir/obj");
		assert_int_equal(r->info.size, LEN);
		assert_true(r->info.etag[0] != '\0');
		snap(&s, before);
		n = read_range(r, want, 0, LEN, 7777);
		/* past the end: nothing; across it: the rest */
		assert_int_equal(rpread(r, tail, sizeof(tail), LEN + 5, &err),
				 0);
		assert_int_equal(rpread(r, tail, sizeof(tail), LEN - 3, &err),
				 3);
		assert_memory_equal(tail, want + LEN - 3, 3);
		who = grew(&s, before, &by);
		assert_int_equal(by, n + 2); /* one member call per read */
		if (all_modes[k] == SMUX_MODE_FAILOVER ||
		    all_modes[k] == SMUX_MODE_SHIELD)
			assert_int_equal(who, 0); /* the first in order */
		smux_reader_close(r);

		/* a missing key, a directory */
		{
			struct smux_reader *none = NULL;
			struct smux_ctx ctx;
			int rc;

			smux_ctx_init(&ctx);
			rc = smux_backend_reader_open(s.mux, &ctx, "dir/none",
						      &none, &err);
			MH_ERR(rc, &err, SMUX_E_KEY_NOT_FOUND);
			assert_null(none);
			assert_string_equal(err.e.backend, "mux");
			if (all_modes[k] != SMUX_MODE_STICKY) {
				/* (sticky: "dir" hashes to some shard) */
				rc = smux_backend_reader_open(
					s.mux, &ctx, "dir", &none, &err);
				MH_ERR(rc, &err, SMUX_E_IS_DIRECTORY);
			}
		}
		set_release(&s);
	}
	free(want);
}

static void test_modes_memory(void **state)
{
	(void)state;
	modes(false, true);
}

static void test_modes_file(void **state)
{
	(void)state;
	modes(true, false); /* the file backend's own readers */
}

static void test_modes_file_gets(void **state)
{
	(void)state;
	modes(true, true); /* file behind faulty: pinned gets */
}

/* Round-robin: each open takes the next member; each reader stays on
 * its own. */
static void test_round_robin_rotates(void **state)
{
	struct set_opts so = {.wrap = true};
	unsigned char *want = pattern(5000, 3);
	struct smux_reader *r[N];
	bool seen[N] = {false};
	struct set s;

	(void)state;
	set_init(&s, SMUX_MODE_ROUND_ROBIN, &so);
	set_put(&s, "k", want, 5000);
	for (int i = 0; i < N; i++)
		r[i] = ropen(s.mux, "k");
	for (int i = 0; i < N; i++) {
		uint64_t before[N];
		int who;

		snap(&s, before);
		read_range(r[i], want, 0, 5000, 1000);
		who = grew(&s, before, NULL);
		assert_false(seen[who]);
		seen[who] = true;
		smux_reader_close(r[i]);
	}
	set_release(&s);
	free(want);
}

/* Sticky-by-key: a key written off its shard (its shard was down) is
 * found on the other shards, and read there. */
static void test_sticky_off_shard(void **state)
{
	struct set_opts so = {.wrap = true};
	unsigned char *want = pattern(3000, 5);
	uint64_t before[N];
	struct smux_reader *r;
	struct set s;
	int shard, who;

	(void)state;
	set_init(&s, SMUX_MODE_STICKY, &so);
	/* find the key's shard: a put through the mux lands there */
	put_on(s.mux, "probe-key", want, 10, 0);
	shard = -1;
	for (int i = 0; i < N; i++) {
		struct smux_info info;
		struct smux_error err;
		struct smux_ctx ctx;

		smux_ctx_init(&ctx);
		if (smux_backend_head(s.leaf[i], &ctx, "probe-key", &info,
				      &err) == 0)
			shard = i;
	}
	assert_true(shard >= 0);
	put_on(s.leaf[(shard + 1) % N], "probe-key", want, 3000, 0);
	smux_backend_del(s.leaf[shard], &(struct smux_ctx){0}, "probe-key",
			 NULL);
	r = ropen(s.mux, "probe-key");
	snap(&s, before);
	read_range(r, want, 0, 3000, 512);
	who = grew(&s, before, NULL);
	assert_int_equal(who, (shard + 1) % N);
	smux_reader_close(r);
	set_release(&s);
	free(want);
}

/* Failover: the open falls through a failing member; reads stay on the
 * member that answered. */
static void test_failover_falls_through(void **state)
{
	struct set_opts so = {.wrap = true};
	unsigned char *want = pattern(4096, 9);
	uint64_t before[N], by;
	struct smux_reader *r;
	struct set s;

	(void)state;
	set_init(&s, SMUX_MODE_FAILOVER, &so);
	set_put(&s, "k", want, 4096);
	mh_fail(s.m[0], true);
	r = ropen(s.mux, "k");
	assert_int_equal(mh_events_count(s.ev, SMUX_EV_FAILOVER), 1);
	snap(&s, before);
	read_range(r, want, 0, 4096, 100);
	assert_int_equal(grew(&s, before, &by), 1);
	assert_int_equal(by, 41);
	smux_reader_close(r);
	set_release(&s);
	free(want);
}

/* While @leaping, a clock that leaps an hour at every reading: every
 * cooldown is over by the next look (a machine that stalls between any
 * two steps). Installed before the mux starts its background thread. */
static atomic_bool leaping;

static int64_t leaping_now(void *arg)
{
	struct mh_clock *c = arg;

	if (!atomic_load(&leaping))
		return atomic_load(&c->now_ms);
	return atomic_fetch_add(&c->now_ms, 3600000) + 3600000;
}

/*
 * Failover, the first two members failing every read (their opens work),
 * each back from its cooldown by the time the read re-opens: the read is
 * served by the third, never given up while a member it did not try is
 * left (it re-opened on the first member again and again: test_threads_
 * failover's flake under load, "all 4 attempts failed").
 */
static void test_failover_reopen_skips_failed(void **state)
{
	struct smux_faulty_opts bad_reads = {
		.error_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_GET,
	};
	struct set_opts so = {
		.wrap = true, .clock = true, .now_ms = leaping_now};
	unsigned char *want = pattern(4096, 13);
	struct smux_reader *r;
	struct set s;

	(void)state;
	set_init(&s, SMUX_MODE_FAILOVER, &so);
	set_put(&s, "k", want, 4096);
	r = ropen(s.mux, "k");
	smux_faulty_set(s.m[0], &bad_reads);
	smux_faulty_set(s.m[1], &bad_reads);
	atomic_store(&leaping, true);
	read_range(r, want, 0, 4096, 4096);
	smux_reader_close(r);
	atomic_store(&leaping, false);
	set_release(&s);
	free(want);
}

/* ---- a member failing in the middle of a read ---- */

static void midread_error(enum smux_mode mode, bool file)
{
	enum { LEN = 64 * 1024, CHUNK = 4096 };
	struct set_opts so = {.file = file, .wrap = true};
	unsigned char *want = pattern(LEN, 11);
	uint64_t before[N] = {0}, after[N] = {0};
	struct smux_mux_stats *st;
	struct smux_reader *r;
	struct smux_event ev;
	struct set s;
	int first, second;

	set_init(&s, mode, &so);
	set_put(&s, "k", want, LEN);
	r = ropen(s.mux, "k");
	snap(&s, before);
	read_range(r, want, 0, LEN / 2, CHUNK);
	first = grew(&s, before, NULL);
	/* the pinned member fails from now on: the rest of the read goes to
	 * another replica, byte for byte the same version */
	mh_fail(s.m[first], true);
	snap(&s, before);
	read_range(r, want, LEN / 2, LEN / 2 + CHUNK, CHUNK);
	snap(&s, after);
	assert_int_equal(after[first] - before[first], 1); /* the failure */
	/* every read after it on one other member (the re-open may have
	 * asked several) */
	read_range(r, want, LEN / 2 + CHUNK, LEN, CHUNK);
	second = grew(&s, after, NULL);
	assert_int_not_equal(second, first);
	assert_true(mh_events_last(s.ev, SMUX_EV_FAILOVER, &ev));
	assert_string_equal(ev.from, s.m[first]->name);
	assert_string_equal(ev.to, s.m[second]->name);
	assert_int_equal(ev.cause.code, SMUX_E_IO);
	st = smux_mux_stats(s.mux);
	assert_int_equal(st->backends[first].status, SMUX_STATUS_DOWN);
	assert_int_equal(st->backends[first].errors, 1);
	assert_int_equal(st->total_failovers, 1);
	smux_mux_stats_free(st);
	smux_reader_close(r);
	set_release(&s);
	free(want);
}

static void test_midread_error_mirror(void **state)
{
	(void)state;
	midread_error(SMUX_MODE_MIRROR, false);
	midread_error(SMUX_MODE_MIRROR, true);
}

static void test_midread_error_failover(void **state)
{
	(void)state;
	midread_error(SMUX_MODE_FAILOVER, false);
	midread_error(SMUX_MODE_ROUND_ROBIN, true);
	midread_error(SMUX_MODE_SHIELD, false);
}

/* A pinned member that hangs (stuck in a system call): the read times out
 * at the member's deadline and goes on elsewhere; the reader can be
 * closed while the stuck call still holds the member's reader. */
static void test_midread_hang(void **state)
{
	struct set_opts so = {.wrap = true, .timeout_ms = 100};
	unsigned char *want = pattern(8192, 13);
	struct smux_faulty_opts hang = {
		.hang_rate = 1,
		.hang_ignores_cancel = true,
	};
	uint64_t before[N];
	struct smux_reader *r;
	struct set s;
	int64_t t0;
	int first;

	(void)state;
	set_init(&s, SMUX_MODE_MIRROR, &so);
	set_put(&s, "k", want, 8192);
	r = ropen(s.mux, "k");
	snap(&s, before);
	read_range(r, want, 0, 4096, 1024);
	first = grew(&s, before, NULL);
	smux_faulty_set(s.m[first], &hang);
	t0 = smux_now_ns();
	read_range(r, want, 4096, 8192, 1024);
	assert_true(smux_now_ns() - t0 >= 90 * MS_NS);
	assert_true(smux_now_ns() - t0 < 5000 * MS_NS);
	assert_int_equal(smux_faulty_hanging(s.m[first]), 1);
	smux_reader_close(r);
	/* the stuck call ends after the reader is gone */
	smux_faulty_release_hangs(s.m[first]);
	while (smux_faulty_hanging(s.m[first]))
		usleep(1000);
	set_release(&s);
	free(want);
}

/* Draining the pinned member: the next read goes elsewhere (the file
 * backend's own readers). */
static void test_midread_drain(void **state)
{
	struct set_opts so = {.file = true};
	unsigned char *want = pattern(50000, 17);
	uint64_t before[N] = {0}, after[N] = {0};
	struct smux_reader *r;
	struct smux_error err;
	struct smux_ctx ctx;
	struct set s;
	int first;

	(void)state;
	set_init(&s, SMUX_MODE_MIRROR, &so);
	set_put(&s, "k", want, 50000);
	r = ropen(s.mux, "k");
	snap(&s, before);
	read_range(r, want, 0, 25000, 5000);
	first = grew(&s, before, NULL);
	smux_ctx_init(&ctx);
	MH_OK(smux_mux_drain(s.mux, s.m[first]->name, &ctx, &err), &err);
	snap(&s, before);
	read_range(r, want, 25000, 50000, 5000);
	snap(&s, after);
	assert_int_equal(after[first], before[first]);
	smux_reader_close(r);
	set_release(&s);
	free(want);
}

/* ---- never two versions ---- */

static void test_other_version(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 21), *v2 = pattern(LEN, 22);
	struct set_opts so = {.wrap = true};
	unsigned char buf[1000];
	uint64_t before[N];
	struct smux_reader *r;
	struct smux_error err;
	struct set s;
	long n;
	int first;

	(void)state;
	/* failover: m0 holds v1, the others another version */
	set_init(&s, SMUX_MODE_FAILOVER, &so);
	put_on(s.leaf[0], "k", v1, LEN, SAME_MTIME);
	put_on(s.leaf[1], "k", v2, LEN, SAME_MTIME + 1);
	put_on(s.leaf[2], "k", v2, LEN, SAME_MTIME + 1);
	r = ropen(s.mux, "k");
	read_range(r, v1, 0, 5000, 1000);
	mh_fail(s.m[0], true);
	n = rpread(r, buf, sizeof(buf), 5000, &err);
	MH_ERR(n, &err, SMUX_E_PRECONDITION_FAILED);
	assert_string_equal(err.e.backend, "mux");
	/* m0 back: the version opened is there again */
	mh_fail(s.m[0], false);
	smux_reader_close(r);
	set_release(&s);

	/* mirror: the replica not pinned gets another version behind the
	 * mux's back */
	set_init(&s, SMUX_MODE_MIRROR, &so);
	set_put(&s, "k", v1, LEN);
	r = ropen(s.mux, "k");
	snap(&s, before);
	read_range(r, v1, 0, 5000, 1000);
	first = grew(&s, before, NULL);
	for (int i = 0; i < N; i++)
		if (i != first)
			put_on(s.leaf[i], "k", v2, LEN, 0);
	mh_fail(s.m[first], true);
	n = rpread(r, buf, sizeof(buf), 5000, &err);
	MH_ERR(n, &err, SMUX_E_PRECONDITION_FAILED);
	smux_reader_close(r);
	set_release(&s);

	/* the version opened deleted from the pinned member: gone */
	set_init(&s, SMUX_MODE_FAILOVER, &so);
	set_put(&s, "k", v1, LEN);
	r = ropen(s.mux, "k");
	smux_backend_del(s.leaf[0], &(struct smux_ctx){0}, "k", NULL);
	n = rpread(r, buf, sizeof(buf), 0, &err);
	MH_ERR(n, &err, SMUX_E_PRECONDITION_FAILED);
	smux_reader_close(r);
	set_release(&s);
	free(v1);
	free(v2);
}

/* ---- members of different kinds: tokens of their own ---- */

/*
 * An object-store-like member over a memory backend: its etag is a token
 * of its own (as S3's MD5 or an HTTP server's ETag), never the size-mtime
 * of file and memory members; the size and mtime it reports are those
 * stored (the mux's). Gets pinned to its token are served atomically by
 * pinning the inner get to the inner token the head saw.
 */
struct objstore {
	struct smux_backend base; /* first */
	struct smux_backend *inner;
};

static struct smux_backend *os_inner(struct smux_backend *b)
{
	return ((struct objstore *)b)->inner;
}

/* The member's token for the inner version @info names: FNV-1a of the
 * member's name and the inner etag. */
static void os_token(struct smux_backend *b, struct smux_info *info)
{
	const char *parts[2] = {b->name, info->etag};
	uint64_t h = 1469598103934665603ULL;

	for (int i = 0; i < 2; i++)
		for (const char *c = parts[i]; *c; c++)
			h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	snprintf(info->etag, sizeof(info->etag), "\"%016llx\"",
		 (unsigned long long)h);
}

static int os_head(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, struct smux_info *info,
		   struct smux_error *err)
{
	int rc = smux_backend_head(os_inner(b), ctx, key, info, err);

	if (rc == 0)
		os_token(b, info);
	return rc;
}

static int os_get(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *key, const struct smux_get_opts *opts,
		  struct smux_sink *sink, struct smux_info *info,
		  struct smux_error *err)
{
	struct smux_get_opts o = {.length = SMUX_LEN_ALL};
	struct smux_info now;
	char inner_etag[sizeof(now.etag)];
	int rc;

	if (opts)
		o = *opts;
	if (o.if_match && o.if_match[0]) {
		rc = smux_backend_head(os_inner(b), ctx, key, &now, err);
		if (rc)
			return rc;
		memcpy(inner_etag, now.etag, sizeof(inner_etag));
		os_token(b, &now);
		if (strcmp(now.etag, o.if_match) != 0)
			return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
					      b->name, "etag %s, wanted %s",
					      now.etag, o.if_match);
		o.if_match = inner_etag;
	}
	rc = smux_backend_get(os_inner(b), ctx, key, &o, sink, info, err);
	if (rc == 0 && info)
		os_token(b, info);
	return rc;
}

static int os_put(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *key, const struct smux_source *src,
		  const struct smux_put_opts *opts, struct smux_info *info,
		  struct smux_error *err)
{
	int rc = smux_backend_put(os_inner(b), ctx, key, src, opts, info, err);

	if (rc == 0 && info)
		os_token(b, info);
	return rc;
}

static int os_del(struct smux_backend *b, const struct smux_ctx *ctx,
		  const char *key, struct smux_error *err)
{
	return smux_backend_del(os_inner(b), ctx, key, err);
}

static int os_list(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *prefix, const char *delimiter, smux_list_fn fn,
		   void *arg, struct smux_error *err)
{
	return smux_backend_list(os_inner(b), ctx, prefix, delimiter, fn, arg,
				 err);
}

static void os_destroy(struct smux_backend *b)
{
	smux_backend_unref(os_inner(b));
	smux_backend_release(b);
	free(b);
}

static const struct smux_backend_ops objstore_ops = {
	.kind = "objstore",
	.get = os_get,
	.put = os_put,
	.del = os_del,
	.head = os_head,
	.list = os_list,
	.destroy = os_destroy,
};

static struct smux_backend *objstore_new(const char *name,
					 struct smux_backend *inner)
{
	struct objstore *os = calloc(1, sizeof(*os));

	assert_non_null(os);
	assert_int_equal(smux_backend_init(&os->base, &objstore_ops, name), 0);
	os->inner = smux_backend_ref(inner);
	return &os->base;
}

/* Two members of different kinds: a file backend (m0) and an object
 * store (m1), each behind a faulty wrapper. */
struct kinds {
	char dir[64];
	struct smux_backend *file, *store; /* the leaves */
	struct smux_backend *m[2];
	struct smux_backend *mux;
	struct mh_events *ev;
};

static void kinds_init(struct kinds *k, enum smux_mode mode)
{
	struct smux_file_opts fo = {.no_fsync = true};
	struct smux_mux_opts o = {.mode = mode, .cooldown_ms = 600000};
	struct smux_backend *mem = mh_memory("mem");
	struct smux_error err;

	memset(k, 0, sizeof(*k));
	snprintf(k->dir, sizeof(k->dir), "/tmp/smux-mr-XXXXXX");
	assert_non_null(mkdtemp(k->dir));
	fo.path = k->dir;
	MH_OK(smux_file_new("origin", &fo, &k->file, &err), &err);
	k->store = objstore_new("s3", mem);
	smux_backend_unref(mem);
	k->m[0] = mh_faulty("m0", k->file, NULL);
	k->m[1] = mh_faulty("m1", k->store, NULL);
	k->ev = mh_events_new();
	o.events = k->ev->bus;
	k->mux = mh_mux("mux", &o, k->m, NULL, 2);
}

static void kinds_release(struct kinds *k)
{
	smux_backend_unref(k->mux);
	for (int i = 0; i < 2; i++)
		smux_backend_unref(k->m[i]);
	smux_backend_unref(k->file);
	smux_backend_unref(k->store);
	mh_rm_rf(k->dir);
	mh_events_free(k->ev);
}

/* Reads half of @r (@want), fails the member that served it and reads the
 * rest: from the other member, byte for byte. */
static void kinds_failover_midread(struct kinds *k, struct smux_reader *r,
				   const unsigned char *want, size_t len)
{
	unsigned long before[2], mid[2];
	struct smux_event ev;
	int first;

	for (int i = 0; i < 2; i++)
		before[i] = smux_faulty_calls(k->m[i]);
	read_range(r, want, 0, len / 2, 1000);
	for (int i = 0; i < 2; i++)
		mid[i] = smux_faulty_calls(k->m[i]);
	first = mid[0] != before[0] ? 0 : 1;
	assert_int_equal(mid[1 - first], before[1 - first]);
	mh_fail(k->m[first], true);
	read_range(r, want, len / 2, len, 1000);
	assert_true(smux_faulty_calls(k->m[1 - first]) > mid[1 - first]);
	assert_true(mh_events_last(k->ev, SMUX_EV_FAILOVER, &ev));
	assert_string_equal(ev.from, k->m[first]->name);
	assert_string_equal(ev.to, k->m[1 - first]->name);
}

/*
 * A failover between members of different kinds holding the same version
 * is not a version change (issue 9): the object store's token is not the
 * file's, but size and mtime (one per write, kept by every copy) are the
 * same. Failover over a file origin and an object store holding the same
 * write; a mirror written through the mux (one mtime on both replicas),
 * whichever replica the open pinned.
 */
static void test_kinds_same_version(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 31);
	struct smux_reader *r;
	struct kinds k;

	(void)state;
	kinds_init(&k, SMUX_MODE_FAILOVER);
	put_on(k.file, "k", v1, LEN, SAME_MTIME);
	put_on(k.store, "k", v1, LEN, SAME_MTIME);
	r = ropen(k.mux, "k");
	kinds_failover_midread(&k, r, v1, LEN);
	smux_reader_close(r);
	kinds_release(&k);

	kinds_init(&k, SMUX_MODE_MIRROR);
	put_on(k.mux, "k", v1, LEN, 0);
	r = ropen(k.mux, "k");
	kinds_failover_midread(&k, r, v1, LEN);
	smux_reader_close(r);
	kinds_release(&k);
	free(v1);
}

/* ...and a member of another kind holding another version (a newer write
 * of the same size, a replica that missed one) is still one: ESTALE
 * (PRECONDITION_FAILED), never a read stitched from two versions. */
static void test_kinds_other_version(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 33), *v2 = pattern(LEN, 34);
	unsigned char buf[1000];
	struct smux_reader *r;
	struct smux_error err;
	struct kinds k;
	long n;

	(void)state;
	for (int newer = 0; newer < 2; newer++) {
		kinds_init(&k, SMUX_MODE_FAILOVER);
		/* newer: the store took a later write of the same size;
		 * else it missed the write the origin holds */
		put_on(k.file, "k", v1, LEN, SAME_MTIME);
		put_on(k.store, "k", v2, LEN,
		       newer ? SAME_MTIME + 1 : SAME_MTIME - 1);
		r = ropen(k.mux, "k");
		read_range(r, v1, 0, LEN / 2, 1000);
		mh_fail(k.m[0], true);
		n = rpread(r, buf, sizeof(buf), LEN / 2, &err);
		MH_ERR(n, &err, SMUX_E_PRECONDITION_FAILED);
		assert_int_equal(-n, ESTALE);
		smux_reader_close(r);
		kinds_release(&k);
	}
	free(v1);
	free(v2);
}

/*
 * A get pinned to a member's token (if_match) walks on past members whose
 * answer is "not that version": a token is one member's own, another's
 * refusal says nothing of the version. Failover over a file (m0) and an
 * object store (m1) holding one version: a get pinned to m1's token (the
 * version opened while m0 was out) is served by m1, m0 back and first in
 * order; a token neither holds is still PRECONDITION_FAILED.
 */
static void test_kinds_pinned_get(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 37), buf[100];
	struct smux_get_opts o = {.offset = 0, .length = sizeof(buf)};
	struct smux_info t;
	struct smux_error err;
	struct smux_sink sink;
	struct smux_ctx ctx;
	struct kinds k;

	(void)state;
	smux_ctx_init(&ctx);
	kinds_init(&k, SMUX_MODE_FAILOVER);
	put_on(k.file, "k", v1, LEN, SAME_MTIME);
	put_on(k.store, "k", v1, LEN, SAME_MTIME);
	MH_OK(smux_backend_head(k.m[1], &ctx, "k", &t, &err), &err);
	o.if_match = t.etag;
	smux_sink_buf(&sink, buf, sizeof(buf));
	MH_OK(smux_backend_get(k.mux, &ctx, "k", &o, &sink, NULL, &err), &err);
	assert_int_equal(sink.written, sizeof(buf));
	assert_memory_equal(buf, v1, sizeof(buf));
	o.if_match = "\"nobody's\"";
	smux_sink_buf(&sink, buf, sizeof(buf));
	MH_ERR(smux_backend_get(k.mux, &ctx, "k", &o, &sink, NULL, &err), &err,
	       SMUX_E_PRECONDITION_FAILED);
	assert_int_equal(sink.written, 0);
	/* a version m0 replaced since, a key m1 never had: the version is
	 * gone (PRECONDITION_FAILED), not the key (s42-t3: ENOENT for a
	 * file open, replaced meanwhile) */
	put_on(k.file, "k2", v1, LEN, SAME_MTIME);
	MH_OK(smux_backend_head(k.m[0], &ctx, "k2", &t, &err), &err);
	put_on(k.file, "k2", v1, LEN, SAME_MTIME + 1);
	o.if_match = t.etag;
	smux_sink_buf(&sink, buf, sizeof(buf));
	MH_ERR(smux_backend_get(k.mux, &ctx, "k2", &o, &sink, NULL, &err), &err,
	       SMUX_E_PRECONDITION_FAILED);
	kinds_release(&k);
	free(v1);
}

/* ---- hints: a replica that missed the key's latest write ---- */

/* Puts on the member fail with a semantic error: it misses writes (and
 * every replay of them) but stays up. */
static const struct smux_faulty_opts puts_refused = {
	.semantic_rate = 1,
	.ops = 1u << SMUX_FAULTY_PUT,
};

/*
 * smux_reader_current asks the member the reader reads, by that member's
 * own token. A mirror of a file (m0) and an object store (m1); the reader
 * opened on each in turn (the other drained at the open, then back, so a
 * head of the mux is answered by m0, first in order): the version is
 * current. A write through the mux makes it another; so does a write its
 * member missed (the member's token unchanged, a hint kept for it).
 */
static void test_kinds_current(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 35), *v2 = pattern(LEN, 36);
	struct smux_reader *r;
	struct smux_error err;
	struct smux_ctx ctx;
	struct kinds k;

	(void)state;
	smux_ctx_init(&ctx);
	for (int on = 0; on < 2; on++) {
		kinds_init(&k, SMUX_MODE_MIRROR);
		put_on(k.mux, "k", v1, LEN, 0);
		for (int missed = 0; missed < 2; missed++) {
			MH_OK(smux_mux_drain(k.mux, k.m[1 - on]->name, &ctx,
					     &err),
			      &err);
			r = ropen(k.mux, "k");
			MH_OK(smux_mux_undrain(k.mux, k.m[1 - on]->name, &err),
			      &err);
			read_range(r, missed ? v2 : v1, 0, 1000, 1000);
			if (on == 1) {
				struct smux_info h;

				/* a head of the mux: m0's token, not the one
				 * opened (the check before this one) */
				MH_OK(smux_backend_head(k.mux, &ctx, "k", &h,
							&err),
				      &err);
				assert_string_not_equal(h.etag, r->info.etag);
			}
			MH_OK(smux_reader_current(r, &ctx, "k", &err), &err);
			if (missed)
				smux_faulty_set(k.m[on], &puts_refused);
			put_on(k.mux, "k", missed ? v1 : v2, LEN, 0);
			MH_ERR(smux_reader_current(r, &ctx, "k", &err), &err,
			       SMUX_E_PRECONDITION_FAILED);
			smux_reader_close(r);
		}
		kinds_release(&k);
	}
	free(v1);
	free(v2);
}

/*
 * ...and in failover, where a write goes to the first member only: a
 * reader opened on the standby (m1, m0 drained at the open) reads on once
 * m0 is back holding the same version (the same size and mtime), and
 * its version is another once a write through the mux landed on m0 (the
 * standby never sees it, nor a hint: its own token says nothing).
 */
static void test_kinds_current_standby(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 38), *v2 = pattern(LEN, 39);
	struct smux_reader *r;
	struct smux_error err;
	struct smux_ctx ctx;
	struct kinds k;

	(void)state;
	smux_ctx_init(&ctx);
	kinds_init(&k, SMUX_MODE_FAILOVER);
	put_on(k.file, "k", v1, LEN, SAME_MTIME);
	put_on(k.store, "k", v1, LEN, SAME_MTIME);
	MH_OK(smux_mux_drain(k.mux, k.m[0]->name, &ctx, &err), &err);
	r = ropen(k.mux, "k");
	MH_OK(smux_mux_undrain(k.mux, k.m[0]->name, &err), &err);
	read_range(r, v1, 0, 1000, 1000);
	MH_OK(smux_reader_current(r, &ctx, "k", &err), &err);
	put_on(k.mux, "k", v2, LEN, 0);
	{ /* the write went to m0 only */
		unsigned char *got;
		size_t len;

		MH_OK(smux_backend_get_all(k.store, &ctx, "k", &got, &len,
					   &err),
		      &err);
		assert_int_equal(len, LEN);
		assert_memory_equal(got, v1, LEN);
		free(got);
	}
	MH_ERR(smux_reader_current(r, &ctx, "k", &err), &err,
	       SMUX_E_PRECONDITION_FAILED);
	smux_reader_close(r);
	kinds_release(&k);
	free(v1);
	free(v2);
}

/*
 * A reader opened on the store of a mirror [file, store] whose file member
 * is no wrapper (its own reader is live: the file as it is): the store
 * fails mid-read and the reader goes on, on the file's live reader. A
 * write through the mux since is still another version: a live reader's
 * token is compared as any other.
 */
static void test_current_live_pin(void **state)
{
	enum { LEN = 20000 };
	unsigned char *v1 = pattern(LEN, 40), *v2 = pattern(LEN, 41);
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR,
				  .cooldown_ms = 600000};
	struct smux_backend *members[2], *mux;
	struct smux_reader *r;
	struct smux_error err;
	struct smux_ctx ctx;
	struct kinds k;

	(void)state;
	smux_ctx_init(&ctx);
	kinds_init(&k, SMUX_MODE_MIRROR);
	members[0] = k.file;
	members[1] = k.m[1];
	mux = mh_mux("mux2", &o, members, NULL, 2);
	put_on(mux, "k", v1, LEN, 0);
	MH_OK(smux_mux_drain(mux, "origin", &ctx, &err), &err);
	r = ropen(mux, "k");
	MH_OK(smux_mux_undrain(mux, "origin", &err), &err);
	assert_false(r->live);
	read_range(r, v1, 0, 1000, 1000);
	mh_fail(k.m[1], true);
	read_range(r, v1, 1000, 2000, 1000); /* on the file now */
	MH_OK(smux_reader_current(r, &ctx, "k", &err), &err);
	put_on(mux, "k", v2, LEN, 0);
	MH_ERR(smux_reader_current(r, &ctx, "k", &err), &err,
	       SMUX_E_PRECONDITION_FAILED);
	smux_reader_close(r);
	smux_backend_unref(mux);
	kinds_release(&k);
	free(v1);
	free(v2);
}

static void test_hints_mirror(void **state)
{
	struct set_opts so = {.wrap = true};
	unsigned char *v0 = pattern(6000, 31), *v1 = pattern(6000, 32);
	struct smux_mux_stats *st;
	struct set s;

	(void)state;
	set_init(&s, SMUX_MODE_MIRROR, &so);
	set_put(&s, "k", v0, 6000);
	/* m2 misses the write of v1 but stays up, and answers fastest */
	smux_faulty_set(s.m[2], &puts_refused);
	set_put(&s, "k", v1, 6000);
	assert_true(smux_mux_pending_hints(s.mux) > 0);
	for (int i = 0; i < 2; i++)
		smux_faulty_set(s.m[i],
				&(struct smux_faulty_opts){.latency_ms = 5});
	st = smux_mux_stats(s.mux);
	assert_int_equal(st->backends[2].status, SMUX_STATUS_UP);
	smux_mux_stats_free(st);
	/* (the replays running meanwhile call members too: the content
	 * tells which replica a reader reads, m2 holds v0) */
	for (int i = 0; i < 10; i++) {
		struct smux_reader *r = ropen(s.mux, "k");

		read_range(r, v1, 0, 6000, 2000);
		smux_reader_close(r);
	}
	assert_true(smux_mux_pending_hints(s.mux) > 0);
	set_release(&s);
	free(v0);
	free(v1);
}

static void test_hints_failover(void **state)
{
	struct set_opts so = {.wrap = true, .cooldown_ms = 100, .clock = true};
	struct smux_faulty_opts puts_fail = {
		.error_rate = 1,
		.ops = 1u << SMUX_FAULTY_PUT,
	};
	unsigned char *v0 = pattern(6000, 41), *v1 = pattern(6000, 42);
	struct smux_reader *r;
	struct set s;

	(void)state;
	set_init(&s, SMUX_MODE_FAILOVER, &so);
	set_put(&s, "k", v0, 6000);
	/* m0 fails the write of v1: it lands on m1, m0 gets a hint; then m0
	 * answers again, first in order, but cannot be repaired */
	smux_faulty_set(s.m[0], &puts_fail);
	put_on(s.mux, "k", v1, 6000, 0);
	assert_true(smux_mux_pending_hints(s.mux) > 0);
	smux_faulty_set(s.m[0], &puts_refused);
	mh_clock_set(&s.clk, 10000 + 60000); /* past m0's cooldown */
	r = ropen(s.mux, "k");		     /* m0 holds v0 */
	read_range(r, v1, 0, 6000, 1500);
	smux_reader_close(r);
	assert_true(smux_mux_pending_hints(s.mux) > 0);
	set_release(&s);
	free(v0);
	free(v1);
}

/* ---- stats, nesting ---- */

/* A read counts like a get: one call of the mux, one hit and one latency
 * sample of the member. */
static void test_stats(void **state)
{
	struct set_opts so = {.file = true};
	unsigned char *want = pattern(10000, 51);
	struct smux_mux_stats *st;
	struct smux_reader *r;
	struct set s;
	unsigned n;

	(void)state;
	set_init(&s, SMUX_MODE_FAILOVER, &so);
	set_put(&s, "k", want, 10000);
	r = ropen(s.mux, "k");
	n = read_range(r, want, 0, 10000, 1000);
	st = smux_mux_stats(s.mux);
	assert_int_equal(st->total_calls, 1 + n);
	assert_int_equal(st->backends[0].hits, 1 + n);
	assert_int_equal(st->backends[1].hits, 0);
	assert_true(st->backends[0].p50_latency_ms >= 0);
	smux_mux_stats_free(st);
	smux_reader_close(r);
	set_release(&s);
	free(want);
}

/* mirror(failover(a, b), c): the outer reader pins one member, the inner
 * one pins a leaf; a failing leaf is handled inside. */
/*
 * A mirror's attributes come from one replica at a time, not from
 * whichever answered first: each replica has its own ctime (and atime,
 * inode), and a program that compares two stats of one file (tar's "file
 * changed as we read it") must not see them flip between replicas. Two
 * file replicas, the first slow for one head, the second for the next.
 */
static void test_mirror_head_stable(void **state)
{
	struct smux_file_opts fo = {.no_fsync = true};
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_faulty_opts slow = {
		.latency_ms = 50,
		.ops = 1u << SMUX_FAULTY_HEAD,
	};
	struct smux_faulty_opts none = {0};
	struct smux_backend *inner[2], *f[2], *mux;
	struct smux_info a, b;
	struct smux_error err;
	struct smux_ctx ctx;
	char base[] = "/tmp/smux-mhead-XXXXXX", dir[64];

	(void)state;
	smux_ctx_init(&ctx);
	assert_non_null(mkdtemp(base));
	for (int i = 0; i < 2; i++) {
		snprintf(dir, sizeof(dir), "%s/r%d", base, i);
		assert_int_equal(mkdir(dir, 0755), 0);
		fo.path = dir;
		MH_OK(smux_file_new(i ? "file1" : "file0", &fo, &inner[i],
				    &err),
		      &err);
		f[i] = mh_faulty(i ? "r1" : "r0", inner[i], NULL);
	}
	mux = mh_mux("mh", &o, f, NULL, 2);
	MH_OK(mh_put(mux, "k", "content", &err), &err);
	/* the replicas' own ctimes differ (as when written one tick apart:
	 * the kernel's ctime is coarse) */
	usleep(20 * 1000);
	snprintf(dir, sizeof(dir), "%s/r1/k", base);
	assert_int_equal(chmod(dir, 0640), 0);
	assert_int_equal(chmod(dir, 0644), 0);
	MH_OK(smux_backend_head(inner[0], &ctx, "k", &a, &err), &err);
	MH_OK(smux_backend_head(inner[1], &ctx, "k", &b, &err), &err);
	assert_true(a.ctime_ns != b.ctime_ns);

	smux_faulty_set(f[0], &slow);
	MH_OK(smux_backend_head(mux, &ctx, "k", &a, &err), &err);
	smux_faulty_set(f[0], &none);
	smux_faulty_set(f[1], &slow);
	MH_OK(smux_backend_head(mux, &ctx, "k", &b, &err), &err);
	smux_faulty_set(f[1], &none);
	assert_int_equal(a.ctime_ns, b.ctime_ns);
	assert_int_equal(a.mtime_ns, b.mtime_ns);
	assert_int_equal(a.size, b.size);

	smux_backend_unref(mux);
	for (int i = 0; i < 2; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(inner[i]);
	}
	mh_rm_rf(base);
}

static void test_nested(void **state)
{
	enum { LEN = 30000 };
	unsigned char *want = pattern(LEN, 61);
	struct smux_mux_opts fo = {.mode = SMUX_MODE_FAILOVER,
				   .cooldown_ms = 600000};
	struct smux_mux_opts mo = {.mode = SMUX_MODE_MIRROR,
				   .cooldown_ms = 600000};
	struct smux_backend *mem[3], *f[3], *inner, *outer, *top[2];
	struct smux_reader *r;
	char name[16];

	(void)state;
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		mem[i] = mh_memory(name);
		snprintf(name, sizeof(name), "f%d", i);
		f[i] = mh_faulty(name, mem[i], NULL);
	}
	inner = mh_mux("inner", &fo, f, NULL, 2);
	top[0] = inner;
	top[1] = f[2];
	outer = mh_mux("outer", &mo, top, NULL, 2);
	put_on(outer, "k", want, LEN, 0);
	r = ropen(outer, "k");
	read_range(r, want, 0, LEN / 3, 1000);
	mh_fail(f[0], true); /* inside the failover, or not pinned */
	read_range(r, want, LEN / 3, 2 * LEN / 3, 1000);
	mh_fail(f[1], true); /* now the failover mux has nothing left */
	read_range(r, want, 2 * LEN / 3, LEN, 1000);
	smux_reader_close(r);
	smux_backend_unref(outer);
	smux_backend_unref(inner);
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(f[i]);
		smux_backend_unref(mem[i]);
	}
	free(want);
}

/* ---- four threads, flapping members ---- */

enum { TLEN = 256 * 1024, TREADS = 4 };

struct flap {
	struct set *s;
	struct smux_reader *r;
	const unsigned char *want;
	atomic_bool stop;
	atomic_uint bad;
	atomic_uint reads;
	unsigned seed;
	unsigned budget;
	int first; /* the member pinned first */
};

static void *reader_main(void *arg)
{
	struct flap *fl = arg;
	unsigned char buf[8192];
	unsigned x = __atomic_add_fetch(&fl->seed, 7919, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < fl->budget; i++) {
		struct smux_error err;
		size_t off, len;
		long n;

		x = x * 1103515245u + 12345u;
		off = (x >> 8) % TLEN;
		len = 1 + (x >> 3) % sizeof(buf);
		n = rpread(fl->r, buf, len, off, &err);
		if (n < 0 ||
		    (size_t)n != (len < TLEN - off ? len : TLEN - off) ||
		    memcmp(buf, fl->want + off, (size_t)n) != 0) {
			char msg[2 * SMUX_ERROR_MSG_MAX + 256];

			print_error("read %zu@%zu: %ld %s\n", len, off, n,
				    n < 0 ? smux_error_format(&err, msg,
							      sizeof(msg))
					  : "");
			atomic_fetch_add(&fl->bad, 1);
		}
		atomic_fetch_add(&fl->reads, 1);
	}
	return NULL;
}

static void *flapper_main(void *arg)
{
	struct flap *fl = arg;
	unsigned i = 0;

	while (!atomic_load(&fl->stop)) {
		/* the member pinned first and the next one take turns
		 * failing; the third never fails (with all three flapping,
		 * their growing cooldowns would soon leave none up, for a
		 * get as for a read) */
		int m = (fl->first + (int)(i % 2)) % N;

		mh_fail(fl->s->m[m], true);
		usleep(2000);
		mh_fail(fl->s->m[m], false);
		usleep(1000);
		i++;
	}
	return NULL;
}

static void flapping(enum smux_mode mode)
{
	struct set_opts so = {.wrap = true, .cooldown_ms = 1};
	const char *v = getenv("SMUX_TEST_VARIANT");
	unsigned char *want = pattern(TLEN, 71);
	pthread_t readers[TREADS], flapper;
	struct flap fl = {.want = want, .seed = 1};
	uint64_t before[N];
	struct set s;

	set_init(&s, mode, &so);
	set_put(&s, "k", want, TLEN);
	fl.s = &s;
	fl.budget = (v && strcmp(v, "normal") != 0) ? 400 : 2000;
	fl.r = ropen(s.mux, "k");
	snap(&s, before);
	read_range(fl.r, want, 0, 4096, 4096);
	fl.first = grew(&s, before, NULL);
	atomic_init(&fl.stop, false);
	atomic_init(&fl.bad, 0);
	atomic_init(&fl.reads, 0);
	assert_int_equal(pthread_create(&flapper, NULL, flapper_main, &fl), 0);
	for (int i = 0; i < TREADS; i++)
		assert_int_equal(
			pthread_create(&readers[i], NULL, reader_main, &fl), 0);
	for (int i = 0; i < TREADS; i++)
		pthread_join(readers[i], NULL);
	atomic_store(&fl.stop, true);
	pthread_join(flapper, NULL);
	assert_int_equal(atomic_load(&fl.reads), TREADS * fl.budget);
	assert_int_equal(atomic_load(&fl.bad), 0);
	print_message("  %u reads, %u re-opens on another member\n",
		      atomic_load(&fl.reads),
		      mh_events_count(s.ev, SMUX_EV_FAILOVER));
	assert_true(mh_events_count(s.ev, SMUX_EV_FAILOVER) > 0);
	smux_reader_close(fl.r);
	set_release(&s);
	free(want);
}

static void test_threads_mirror(void **state)
{
	(void)state;
	flapping(SMUX_MODE_MIRROR);
}

static void test_threads_failover(void **state)
{
	(void)state;
	flapping(SMUX_MODE_FAILOVER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes_memory),
		cmocka_unit_test(test_modes_file),
		cmocka_unit_test(test_modes_file_gets),
		cmocka_unit_test(test_round_robin_rotates),
		cmocka_unit_test(test_sticky_off_shard),
		cmocka_unit_test(test_failover_falls_through),
		cmocka_unit_test(test_failover_reopen_skips_failed),
		cmocka_unit_test(test_midread_error_mirror),
		cmocka_unit_test(test_midread_error_failover),
		cmocka_unit_test(test_midread_hang),
		cmocka_unit_test(test_midread_drain),
		cmocka_unit_test(test_other_version),
		cmocka_unit_test(test_kinds_same_version),
		cmocka_unit_test(test_kinds_other_version),
		cmocka_unit_test(test_kinds_current),
		cmocka_unit_test(test_kinds_current_standby),
		cmocka_unit_test(test_current_live_pin),
		cmocka_unit_test(test_kinds_pinned_get),
		cmocka_unit_test(test_hints_mirror),
		cmocka_unit_test(test_hints_failover),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_mirror_head_stable),
		cmocka_unit_test(test_nested),
		cmocka_unit_test(test_threads_mirror),
		cmocka_unit_test(test_threads_failover),
	};

	return cmocka_run_group_tests_name("mux reader", tests, NULL, NULL);
}
