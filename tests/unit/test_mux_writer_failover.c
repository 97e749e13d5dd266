// SPDX-License-Identifier: MIT
/*
 * test_mux_writer_failover.c - a member failing or hanging while a file is
 * open for writing through the mux (DESIGN section 6, "close() and fsync()
 * return 0 only after the mode's write policy is satisfied"; section 3,
 * "nothing acknowledged is lost").
 *
 * Single-target modes (failover, round-robin, weighted, sticky-by-key):
 * the mux writer keeps a spool of the pending content; when its member's
 * writer fails transiently (errors, or a hang past backend_timeout) the
 * writer moves to the next member, which gets the spool, and the caller's
 * pwrite/truncate/commit succeed; a failover commit hints the members
 * ahead of the one that took it, and the replay makes the primary
 * identical. A semantic error still fails the call. Fan-out (mirror): a
 * replica failing or hanging mid-write drops out and gets a hint; the
 * write goes on. Memory backends behind faulty wrappers; an injected
 * clock holds cooldowns still.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mux_helpers.h"

#define CHUNK ((size_t)700 * 1024) /* three make more than one spool chunk */

struct env {
	struct smux_backend *mem[3], *f[3], *mux;
	unsigned n;
	struct mh_clock clk;
	struct mh_events *ev;
	struct smux_ctx ctx;
	char dir[64];
	char journal[128];
};

static void env_init(struct env *t, enum smux_mode mode, unsigned n,
		     int64_t timeout_ms)
{
	struct smux_mux_opts o = {
		.mode = mode,
		.cooldown_ms = 100,
		.backend_timeout_ms = timeout_ms,
	};
	const double weights[3] = {1, 1, 1};
	char name[32];

	memset(t, 0, sizeof(*t));
	t->n = n;
	mh_clock_init(&t->clk, 10000);
	t->ev = mh_events_new();
	smux_ctx_init(&t->ctx);
	snprintf(t->dir, sizeof(t->dir), "/tmp/smux-mwf-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->journal, sizeof(t->journal), "%s/wm.hints", t->dir);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "mem%u", i);
		t->mem[i] = mh_memory(name);
		snprintf(name, sizeof(name), "f%u", i);
		t->f[i] = mh_faulty(name, t->mem[i], NULL);
	}
	o.clock = &t->clk.clock;
	o.events = t->ev->bus;
	o.state_dir = t->dir;
	t->mux = mh_mux("wm", &o, t->f,
			mode == SMUX_MODE_WEIGHTED ? weights : NULL, n);
}

static void env_release(struct env *t)
{
	smux_backend_unref(t->mux);
	for (unsigned i = 0; i < t->n; i++) {
		smux_backend_unref(t->f[i]);
		smux_backend_unref(t->mem[i]);
	}
	mh_events_free(t->ev);
	mh_rm_rf(t->dir);
}

/* Past every cooldown; health checks bring the members that answer up. */
static void env_back(struct env *t)
{
	mh_clock_set(&t->clk, atomic_load(&t->clk.now_ms) + 60000);
	smux_mux_check_health(t->mux);
}

/* Repairs until no hint is pending. A call given up on that still runs on
 * a member (its hang just released, the closes queued behind it) holds
 * its key's replay back until it ends (mux_zombie.c): bounded polls. */
static void env_repair(struct env *t)
{
	struct smux_error err;
	unsigned pending = 1;

	for (int i = 0; i < 1000 && pending; i++) {
		if (i)
			usleep(10000);
		MH_OK(smux_mux_repair(t->mux, &t->ctx, NULL, &pending, &err),
		      &err);
	}
	assert_int_equal(pending, 0);
}

static void faults_off(struct smux_backend *fb)
{
	struct smux_faulty_opts o = {0};

	smux_faulty_set(fb, &o);
}

/* Every call of @fb fails transiently (writer operations only when
 * @writer_only). */
static void faults_errors(struct smux_backend *fb, bool writer_only)
{
	struct smux_faulty_opts o = {
		.error_rate = 1.0,
		.ops = writer_only ? 1u << SMUX_FAULTY_WRITER : 0,
	};

	smux_faulty_set(fb, &o);
}

/* Every call of @fb hangs, deaf to cancellation (a backend stuck in a
 * system call), until released - or HANG_MS, so that a call that waits
 * for the hang fails its test (still_hung) rather than hang it. */
#define HANG_MS 30000
/* The backend_timeout of the tests with a hung member: a healthy memory
 * member's call must fit in it on a loaded machine under ASan (200 ms
 * did not, at load 40). */
#define HUNG_TIMEOUT_MS 1500
static void faults_hang(struct smux_backend *fb)
{
	struct smux_faulty_opts o = {
		.hang_rate = 1.0,
		.hang_ms = HANG_MS,
		.hang_ignores_cancel = true,
	};

	smux_faulty_set(fb, &o);
}

/* The call that just returned did not wait for @fb's hang: it still
 * hangs. (No wall-clock bound: the machine may be loaded.) */
static void still_hung(struct smux_backend *fb)
{
	assert_true(smux_faulty_hanging(fb) >= 1);
}

/* Waits (bounded) until the hang released on @fb is over. */
static void wait_not_hanging(struct smux_backend *fb)
{
	for (int i = 0; i < 5000 && smux_faulty_hanging(fb); i++)
		usleep(1000);
	assert_int_equal(smux_faulty_hanging(fb), 0);
}

/* ---- the expected content ---- */

struct model {
	unsigned char *b;
	size_t len, cap;
};

static void model_reserve(struct model *m, size_t len)
{
	if (len <= m->cap)
		return;
	m->b = realloc(m->b, len);
	assert_non_null(m->b);
	memset(m->b + m->cap, 0, len - m->cap);
	m->cap = len;
}

static void model_truncate(struct model *m, size_t len)
{
	model_reserve(m, len);
	if (len > m->len)
		memset(m->b + m->len, 0, len - m->len);
	m->len = len;
}

/* @len bytes of pattern @seed into a new heap buffer (free()). */
static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *b = malloc(len ? len : 1);

	assert_non_null(b);
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)((i * 131 + (size_t)seed * 17 +
					i / 4099) &
				       0xff);
	return b;
}

/* Writes @len bytes of pattern @seed at @off through @w and into @m. */
static void put_chunk(struct smux_writer *w, const struct smux_ctx *ctx,
		      struct model *m, size_t len, uint64_t off, unsigned seed)
{
	unsigned char *b = pattern(len, seed);
	struct smux_error err;

	MH_OK(smux_writer_pwrite(w, ctx, b, len, off, &err), &err);
	if (off + len > m->len)
		model_truncate(m, off + len);
	memcpy(m->b + off, b, len);
	free(b);
}

static void trunc_to(struct smux_writer *w, const struct smux_ctx *ctx,
		     struct model *m, size_t len)
{
	struct smux_error err;

	MH_OK(smux_writer_truncate(w, ctx, len, &err), &err);
	model_truncate(m, len);
}

/* Asserts @b holds @key with exactly the content of @m. */
static void holds(struct smux_backend *b, const char *key,
		  const struct model *m)
{
	unsigned char *buf = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len = 0;

	smux_ctx_init(&ctx);
	MH_OK(smux_backend_get_all(b, &ctx, key, &buf, &len, &err), &err);
	assert_int_equal(len, m->len);
	assert_memory_equal(buf, m->b, len);
	free(buf);
}

/* Asserts the pending content of @w reads back as @m. */
static void reads_back(struct smux_writer *w, const struct model *m)
{
	unsigned char *buf = malloc(m->len + 10);
	struct smux_error err;
	long n;

	assert_non_null(buf);
	assert_int_equal(smux_writer_size(w), m->len);
	n = smux_writer_pread(w, buf, m->len + 10, 0, &err);
	assert_int_equal(n, (long)m->len);
	assert_memory_equal(buf, m->b, m->len);
	free(buf);
}

/* True when the hint journal mentions @key for @replica. */
static bool journal_has(const struct env *t, const char *replica,
			const char *key)
{
	char line[1024], r[64], k[300];
	bool found = false;
	FILE *f = fopen(t->journal, "r");

	if (!f)
		return false;
	snprintf(r, sizeof(r), "\"%s\"", replica);
	snprintf(k, sizeof(k), "\"%s\"", key);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, r) && strstr(line, k);
	fclose(f);
	return found;
}

/* ---- failover ---- */

/*
 * The primary starts failing every call between open and commit: the
 * writer moves to the standby, and everything written - before and after -
 * is there; the primary's hint is journaled before commit returns, and the
 * replay makes it identical.
 */
/*
 * An exclusive in-place create (cp's O_EXCL through smuxfs) starts from
 * nothing: its spool is complete from the start, so when the primary
 * fails mid-write the writer moves like a truncating one (it failed the
 * write: test_failover-midrun-failover, now and then).
 */
static void test_failover_excl_create_moves(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	struct env t;
	int rc;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, 0);
	rc = smux_backend_writer_open(t.mux, &t.ctx, "new",
				      SMUX_WRITER_INPLACE | SMUX_WRITER_EXCL,
				      &wr, &err);
	MH_OK(rc, &err);
	put_chunk(wr, &t.ctx, &m, CHUNK, 0, 0);
	faults_errors(t.f[0], false);
	put_chunk(wr, &t.ctx, &m, CHUNK, CHUNK, 1);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	smux_writer_close(wr);
	holds(t.mem[1], "new", &m);
	free(m.b);
	env_release(&t);
}

static void test_failover_errors_mid_write(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	struct smux_event ev;
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, 0);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "d/doc",
				       SMUX_WRITER_TRUNC, &wr, &err),
	      &err);
	for (unsigned i = 0; i < 3; i++)
		put_chunk(wr, &t.ctx, &m, CHUNK, (uint64_t)i * CHUNK, i);

	faults_errors(t.f[0], false);
	put_chunk(wr, &t.ctx, &m, CHUNK, 3 * CHUNK, 3);
	assert_true(mh_events_last(t.ev, SMUX_EV_FAILOVER, &ev));
	assert_string_equal(ev.from, "f0");
	assert_string_equal(ev.to, "f1");
	assert_string_equal(ev.key, "d/doc");
	trunc_to(wr, &t.ctx, &m, 2 * CHUNK + 1000);
	put_chunk(wr, &t.ctx, &m, 333, 2 * CHUNK + 5000, 4); /* a hole */
	reads_back(wr, &m);
	MH_LACKS(t.mem[1], "d/doc"); /* nothing visible before commit */

	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	/* acknowledged: the primary's hint is durable already */
	assert_int_equal(smux_mux_pending_hints(t.mux), 1);
	assert_true(journal_has(&t, "f0", "d/doc"));
	holds(t.mem[1], "d/doc", &m);
	MH_LACKS(t.mem[0], "d/doc");
	holds(t.mux, "d/doc", &m); /* reads pass over the primary */
	reads_back(wr, &m);
	smux_writer_close(wr);

	faults_off(t.f[0]);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[0], "d/doc", &m);
	holds(t.mem[1], "d/doc", &m);
	free(m.b);
	env_release(&t);
}

/*
 * The primary hangs (longer than backend_timeout, deaf to cancellation)
 * after an earlier commit: each call returns within its bound, the writer
 * moves, the abandoned calls never touch the caller's buffers (ASan: they
 * are freed at once), and the standby then the primary end up with
 * everything.
 */
static void test_failover_hang_mid_write(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0}, v1 = {0};
	struct smux_error err;
	unsigned char *b;
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, HUNG_TIMEOUT_MS);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	for (unsigned i = 0; i < 3; i++)
		put_chunk(wr, &t.ctx, &m, CHUNK, (uint64_t)i * CHUNK, i);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	holds(t.mem[0], "doc", &m);
	model_truncate(&v1, m.len);
	memcpy(v1.b, m.b, m.len);

	faults_hang(t.f[0]);
	b = pattern(CHUNK, 7);
	MH_OK(smux_writer_pwrite(wr, &t.ctx, b, CHUNK, CHUNK / 2, &err), &err);
	still_hung(t.f[0]); /* the timeout, not the hang */
	model_reserve(&m, CHUNK / 2 + CHUNK);
	memcpy(m.b + CHUNK / 2, b, CHUNK);
	memset(b, 0xee, CHUNK); /* the stuck call must have its own copy */
	free(b);
	assert_int_equal(smux_faulty_hanging(t.f[0]), 1);
	reads_back(wr, &m); /* the spool: no member asked */
	trunc_to(wr, &t.ctx, &m, 4 * CHUNK);
	put_chunk(wr, &t.ctx, &m, 10, 4 * CHUNK - 5, 8);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	still_hung(t.f[0]);
	assert_int_equal(smux_mux_pending_hints(t.mux), 1);
	assert_true(journal_has(&t, "f0", "doc"));
	holds(t.mem[1], "doc", &m);
	holds(t.mem[0], "doc", &v1); /* the hung primary kept the old one */
	smux_writer_close(wr);
	still_hung(t.f[0]); /* never waits on the hang */

	smux_faulty_release_hangs(t.f[0]);
	wait_not_hanging(t.f[0]);
	faults_off(t.f[0]);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[0], "doc", &m);
	free(m.b);
	free(v1.b);
	env_release(&t);
}

/*
 * A writer opened without TRUNC starts from the primary's version (the
 * standby has an older one): the spool is filled from the member at the
 * first change, so a move keeps the primary's content, not the standby's.
 * A truncate copies only what survives it.
 */
static void test_failover_without_trunc(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	char buf[64];
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, 0);
	MH_OK(mh_put(t.mem[0], "a", "0123456789abcdef", &err), &err);
	MH_OK(mh_put(t.mem[1], "a", "old", &err), &err);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "a", 0, &wr, &err), &err);
	assert_int_equal(smux_writer_size(wr), 16);
	assert_int_equal(smux_writer_pread(wr, buf, sizeof(buf), 0, &err), 16);
	assert_memory_equal(buf, "0123456789abcdef", 16);
	model_truncate(&m, 16);
	memcpy(m.b, "0123456789abcdef", 16);
	put_chunk(wr, &t.ctx, &m, 5, 16, 1); /* append: the spool fills */
	faults_errors(t.f[0], false);
	put_chunk(wr, &t.ctx, &m, 3, 2, 2);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	smux_writer_close(wr);
	holds(t.mem[1], "a", &m);
	assert_true(journal_has(&t, "f0", "a"));
	faults_off(t.f[0]);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[0], "a", &m);

	/* a cut first: only what survives is read back */
	MH_OK(mh_put(t.mem[0], "b", "abcdefghij", &err), &err);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "b", 0, &wr, &err), &err);
	m.len = 0;
	model_truncate(&m, 10);
	memcpy(m.b, "abcdefghij", 10);
	trunc_to(wr, &t.ctx, &m, 4);
	faults_errors(t.f[0], true);
	put_chunk(wr, &t.ctx, &m, 1, 6, 3);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	smux_writer_close(wr);
	holds(t.mem[1], "b", &m);
	faults_off(t.f[0]);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[0], "b", &m);

	/* the known limit: before the first change nothing but the member
	 * has the content, so a member failing then cannot be left */
	MH_OK(mh_put(t.mem[0], "c", "xyz", &err), &err);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "c", 0, &wr, &err), &err);
	faults_errors(t.f[0], true);
	assert_true(smux_writer_pwrite(wr, &t.ctx, "Q", 1, 0, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_IO);
	smux_writer_close(wr);
	MH_LACKS(t.mem[1], "c");
	free(m.b);
	env_release(&t);
}

/* A semantic error (here a permission) fails the call: no move, no hint;
 * the writer goes on on its member. */
static void test_failover_semantic_error(void **state)
{
	struct smux_faulty_opts sem = {
		.semantic_rate = 1.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	struct smux_event ev;
	struct env t;
	int rc;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, 0);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	put_chunk(wr, &t.ctx, &m, CHUNK, 0, 1);
	smux_faulty_set(t.f[0], &sem);
	rc = smux_writer_pwrite(wr, &t.ctx, "zz", 2, 0, &err);
	MH_ERR(rc, &err, SMUX_E_PERMISSION_DENIED);
	rc = smux_writer_commit(wr, &t.ctx, NULL, NULL, &err);
	MH_ERR(rc, &err, SMUX_E_PERMISSION_DENIED);
	assert_false(mh_events_last(t.ev, SMUX_EV_FAILOVER, &ev));
	faults_off(t.f[0]);
	put_chunk(wr, &t.ctx, &m, 4, CHUNK, 2);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	reads_back(wr, &m);
	smux_writer_close(wr);
	holds(t.mem[0], "doc", &m);
	MH_LACKS(t.mem[1], "doc");
	assert_int_equal(smux_mux_pending_hints(t.mux), 0);
	free(m.b);
	env_release(&t);
}

/*
 * Every member fails: the call fails. Once a member is back, the next call
 * moves the writer there with everything written before.
 */
static void test_failover_none_left_then_back(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	unsigned char *b;
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, 0);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	put_chunk(wr, &t.ctx, &m, CHUNK, 0, 1);
	faults_errors(t.f[0], false);
	faults_errors(t.f[1], false);
	b = pattern(100, 2);
	assert_true(smux_writer_pwrite(wr, &t.ctx, b, 100, CHUNK, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_ALL_BACKENDS_DOWN);
	free(b);
	reads_back(wr, &m); /* the failed write is not in */
	assert_true(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err) < 0);

	faults_off(t.f[1]);
	env_back(&t);
	put_chunk(wr, &t.ctx, &m, 100, CHUNK, 2);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	smux_writer_close(wr);
	holds(t.mem[1], "doc", &m);
	assert_int_equal(smux_mux_pending_hints(t.mux), 1);
	faults_off(t.f[0]);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[0], "doc", &m);
	free(m.b);
	env_release(&t);
}

/* ---- the other single-target modes ---- */

/* Round-robin, weighted, sticky-by-key: the writer's member (found by
 * its first commit) fails; the writer moves to another member, which gets
 * everything. Round-robin and weighted keep no hints (a put falling
 * through does not either); sticky-by-key hints home (a handoff). */
static void test_other_modes_move(void **state)
{
	const enum smux_mode modes[] = {
		SMUX_MODE_ROUND_ROBIN,
		SMUX_MODE_WEIGHTED,
		SMUX_MODE_STICKY,
	};

	(void)state;
	for (unsigned k = 0; k < 3; k++) {
		struct smux_writer *wr = NULL;
		struct model m = {0}, v1 = {0};
		struct smux_error err;
		struct smux_info info;
		int owner = -1, now = -1;
		struct env t;

		env_init(&t, modes[k], 3, 0);
		MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "key",
					       SMUX_WRITER_TRUNC, &wr, &err),
		      &err);
		put_chunk(wr, &t.ctx, &m, CHUNK, 0, 1);
		MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
		for (int i = 0; i < 3; i++) {
			if (smux_backend_head(t.mem[i], &t.ctx, "key", &info,
					      &err) == 0) {
				assert_int_equal(owner, -1);
				owner = i;
			}
		}
		assert_true(owner >= 0);
		model_truncate(&v1, m.len);
		memcpy(v1.b, m.b, m.len);

		faults_errors(t.f[owner], false);
		put_chunk(wr, &t.ctx, &m, CHUNK, CHUNK, 2);
		trunc_to(wr, &t.ctx, &m, CHUNK + 77);
		MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
		smux_writer_close(wr);
		for (int i = 0; i < 3; i++) {
			if (i == owner)
				continue;
			if (smux_backend_head(t.mem[i], &t.ctx, "key", &info,
					      &err) == 0) {
				assert_int_equal(now, -1);
				now = i;
			}
		}
		assert_true(now >= 0);
		holds(t.mem[now], "key", &m);
		holds(t.mem[owner], "key", &v1);
		/* sticky-by-key: a handoff, with a hint for home (the
		 * owner of the first commit) */
		assert_int_equal(smux_mux_pending_hints(t.mux),
				 modes[k] == SMUX_MODE_STICKY ? 1 : 0);
		free(m.b);
		free(v1.b);
		env_release(&t);
	}
}

/* ---- mirror ---- */

/* A replica hangs mid-write: the write goes on with the others (each
 * call bounded), commit succeeds, the hung replica gets a hint, and the
 * replay makes it identical. */
static void test_mirror_replica_hangs(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_MIRROR, 3, HUNG_TIMEOUT_MS);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	put_chunk(wr, &t.ctx, &m, CHUNK, 0, 1);
	faults_hang(t.f[2]);
	put_chunk(wr, &t.ctx, &m, CHUNK, CHUNK, 2);
	still_hung(t.f[2]);
	trunc_to(wr, &t.ctx, &m, CHUNK + 10);
	reads_back(wr, &m);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	assert_int_equal(smux_mux_pending_hints(t.mux), 1);
	assert_true(journal_has(&t, "f2", "doc"));
	holds(t.mem[0], "doc", &m);
	holds(t.mem[1], "doc", &m);
	MH_LACKS(t.mem[2], "doc");
	smux_writer_close(wr);
	still_hung(t.f[2]);

	smux_faulty_release_hangs(t.f[2]);
	wait_not_hanging(t.f[2]);
	faults_off(t.f[2]);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[2], "doc", &m);
	free(m.b);
	env_release(&t);
}

/* The replica that reads come from fails: the read goes to the next one,
 * and the failed replica gets a hint at commit. */
static void test_mirror_read_back_falls_through(void **state)
{
	struct smux_writer *wr = NULL;
	struct model m = {0};
	struct smux_error err;
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_MIRROR, 3, 0);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	put_chunk(wr, &t.ctx, &m, 1000, 0, 1);
	faults_errors(t.f[0], true);
	reads_back(wr, &m);
	faults_off(t.f[0]);
	put_chunk(wr, &t.ctx, &m, 10, 1000, 2);
	MH_OK(smux_writer_commit(wr, &t.ctx, NULL, NULL, &err), &err);
	smux_writer_close(wr);
	assert_int_equal(smux_mux_pending_hints(t.mux), 1);
	MH_LACKS(t.mem[0], "doc");
	holds(t.mem[1], "doc", &m);
	holds(t.mem[2], "doc", &m);
	env_back(&t);
	env_repair(&t);
	holds(t.mem[0], "doc", &m);
	free(m.b);
	env_release(&t);
}

/* ---- no spool: a mux of one ---- */

/* With nowhere to move, a hang fails the call at the timeout; the size
 * and the close never wait on the hung member. */
static void test_alone_never_waits(void **state)
{
	struct smux_writer *wr = NULL;
	struct smux_error err;
	struct env t;
	int rc;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 1, HUNG_TIMEOUT_MS);
	MH_OK(smux_backend_writer_open(t.mux, &t.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	MH_OK(smux_writer_pwrite(wr, &t.ctx, "hello", 5, 0, &err), &err);
	faults_hang(t.f[0]);
	rc = smux_writer_pwrite(wr, &t.ctx, "x", 1, 5, &err);
	MH_ERR(rc, &err, SMUX_E_BACKEND_TIMEOUT);
	still_hung(t.f[0]);
	assert_int_equal(smux_writer_size(wr), 5);
	smux_writer_close(wr);
	still_hung(t.f[0]);
	smux_faulty_release_hangs(t.f[0]);
	wait_not_hanging(t.f[0]);
	MH_LACKS(t.mem[0], "doc");
	env_release(&t);
}

/* ---- concurrency ---- */

#define THREADS	    4
#define T_CHUNKS    12
#define T_CHUNK_LEN ((size_t)64 * 1024)

struct worker {
	struct env *t;
	pthread_barrier_t *bar;
	struct model m;
	char key[16];
	unsigned seed;
	int rc;
};

static void *writer_thread(void *arg)
{
	struct worker *wk = arg;
	struct smux_writer *wr = NULL;
	struct smux_error err;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	wk->rc = smux_backend_writer_open(wk->t->mux, &ctx, wk->key,
					  SMUX_WRITER_TRUNC, &wr, &err);
	for (unsigned i = 0; i < T_CHUNKS; i++) {
		uint64_t off = (uint64_t)i * T_CHUNK_LEN;
		unsigned char *b;

		if (i == T_CHUNKS / 2) { /* the primary fails meanwhile */
			pthread_barrier_wait(wk->bar);
			pthread_barrier_wait(wk->bar);
		}
		if (wk->rc)
			continue;
		b = pattern(T_CHUNK_LEN, wk->seed + i);
		wk->rc =
			smux_writer_pwrite(wr, &ctx, b, T_CHUNK_LEN, off, &err);
		if (wk->rc == 0) {
			model_truncate(&wk->m, off + T_CHUNK_LEN);
			memcpy(wk->m.b + off, b, T_CHUNK_LEN);
		}
		free(b);
	}
	if (wk->rc == 0)
		wk->rc = smux_writer_commit(wr, &ctx, NULL, NULL, &err);
	smux_writer_close(wr);
	return NULL;
}

/* Several files open at once when the primary starts failing: every
 * writer moves, every commit succeeds, nothing is lost. */
static void test_concurrent_writers_move(void **state)
{
	struct worker wk[THREADS];
	pthread_t th[THREADS];
	pthread_barrier_t bar;
	struct env t;

	(void)state;
	env_init(&t, SMUX_MODE_FAILOVER, 2, 0);
	pthread_barrier_init(&bar, NULL, THREADS + 1);
	for (unsigned i = 0; i < THREADS; i++) {
		memset(&wk[i], 0, sizeof(wk[i]));
		wk[i].t = &t;
		wk[i].bar = &bar;
		wk[i].seed = 10 * i;
		snprintf(wk[i].key, sizeof(wk[i].key), "k%u", i);
		assert_int_equal(
			pthread_create(&th[i], NULL, writer_thread, &wk[i]), 0);
	}
	pthread_barrier_wait(&bar);
	faults_errors(t.f[0], false);
	pthread_barrier_wait(&bar);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (unsigned i = 0; i < THREADS; i++) {
		assert_int_equal(wk[i].rc, 0);
		holds(t.mem[1], wk[i].key, &wk[i].m);
		holds(t.mux, wk[i].key, &wk[i].m);
	}
	assert_int_equal(smux_mux_pending_hints(t.mux), THREADS);
	faults_off(t.f[0]);
	env_back(&t);
	env_repair(&t);
	for (unsigned i = 0; i < THREADS; i++) {
		holds(t.mem[0], wk[i].key, &wk[i].m);
		free(wk[i].m.b);
	}
	env_release(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failover_errors_mid_write),
		cmocka_unit_test(test_failover_excl_create_moves),
		cmocka_unit_test(test_failover_hang_mid_write),
		cmocka_unit_test(test_failover_without_trunc),
		cmocka_unit_test(test_failover_semantic_error),
		cmocka_unit_test(test_failover_none_left_then_back),
		cmocka_unit_test(test_other_modes_move),
		cmocka_unit_test(test_mirror_replica_hangs),
		cmocka_unit_test(test_mirror_read_back_falls_through),
		cmocka_unit_test(test_alone_never_waits),
		cmocka_unit_test(test_concurrent_writers_move),
	};

	return cmocka_run_group_tests_name("mux writer failover", tests, NULL,
					   NULL);
}
