/* SPDX-License-Identifier: MIT */
/*
 * test_lose_nothing.c - the randomized lose-nothing test (issue 9).
 *
 * For each mode, a mux over three members (file backends in temporary
 * directories and memory backends, each behind a faulty backend) takes a
 * storm: worker threads put, append through a writer, edit in place
 * through a writer, rename, delete and read keys of a small key space
 * (so operations meet the mux's own replays), while a chaos thread flaps
 * members (transient errors, connection timeouts, hangs past the mux's
 * deadline, hangs that ignore cancellation), drains and undrains a
 * member, removes one and adds it back, fills $TMPDIR (a small tmpfs
 * this test mounts in its own mount namespace) for a while, and runs
 * repairs. Round-robin and weighted are "read pools of identical
 * replicas" (DESIGN section 3): their members are three faulty paths to
 * one store, so a write through one is meant to be seen through all.
 *
 * A model (lose_nothing_model.h) keeps, per key, the set of contents the
 * key may hold: one after an acknowledged operation (rc 0), old and new
 * after one whose outcome is unknown (an error after it may have reached
 * a replica). Operations
 * on one key are serialized by the harness (a lock per key), so the model
 * is exact; different keys run concurrently. Reads during the storm are
 * checked against the model (except in failover, whose standbys are not
 * replicas: a read served by a standby while the primary is down may be
 * old by design). After the storm every fault is stopped, the drained
 * member undrained, the removed one added back, and smux_mux_repair runs
 * until no hint is pending; then every key read through the mux must be
 * one of the model's contents, the listing must agree, and in mirror and
 * shield every replica (read directly) must hold the same content.
 *
 * Each run prints its mode, seed, operation and fault counts and
 * mismatches; a mismatch names the seed, key, expected, got and replica.
 * The environment replays or extends it:
 *   SMUX_LOSE_NOTHING_SEED=N      run seed N only (default: seeds 1 and 2)
 *   SMUX_LOSE_NOTHING_SECONDS=S   storm length per run (default 1)
 *   SMUX_LOSE_NOTHING_MODE=m,...  only these modes (e.g. "mirror")
 *   SMUX_LOSE_NOTHING_CHAOS=list  chaos actions, of flap,drain,remove,
 *                                 enospc,repair (default: all), or
 *                                 flaps of some kinds only: down,flaky,
 *                                 timeout,hang,stuck; "none": no chaos
 *   SMUX_LOSE_NOTHING_SOAK=S      keep running new seeds (from the clock,
 *                                 printed) for S seconds in all, shared
 *                                 by the modes
 *   SMUX_LOSE_NOTHING_JOURNAL=memory  hints in memory (no state_dir)
 *   SMUX_LOSE_NOTHING_MEMBERS=disk    file members on the disk, not on a
 *                                 tmpfs of their own
 * Threads and the scheduler still vary between runs of one seed: a seed
 * fixes each thread's operations and each member's fault stream.
 *
 * A failing run prints, for each key involved, the history of its hints
 * (+hint/-hint, with kind and id) and of the zombies of its calls, each
 * with the stack that made it as offsets in the binary: resolve them with
 * `addr2line -f -e build/tests/test_lose_nothing OFFSET...`.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/mux_internal.h"
#include "lose_nothing_model.h"
#include "mux_helpers.h"
#include "smux/file.h"

#define LN_KEYS	       8
#define LN_WORKERS     6
#define LN_MEMBERS     3
#define LN_TMPFS_BYTES (4u << 20)

enum ln_chaos {
	LN_CHAOS_FLAP = 1,
	LN_CHAOS_DRAIN = 2,
	LN_CHAOS_REMOVE = 4,
	LN_CHAOS_ENOSPC = 8,
	LN_CHAOS_REPAIR = 16,
	/* the kinds of faults a flap gives (all with LN_CHAOS_FLAP) */
	LN_CHAOS_DOWN = 32,	/* every call fails transiently */
	LN_CHAOS_FLAKY = 64,	/* 30% of calls fail transiently */
	LN_CHAOS_TIMEOUT = 128, /* half the calls: connection timeout */
	LN_CHAOS_HANG = 256,	/* hangs past the deadline */
	LN_CHAOS_STUCK = 512,	/* hangs ignoring cancellation */
	LN_CHAOS_KINDS = 992,
	LN_CHAOS_ALL = 1023,
};

/* What the whole process shares: its directories and tmpfs mounts. */
static char ln_base[1024];	/* temporary directories live here */
static char ln_tmpfs[1100];	/* the tmpfs, "" when none */
static char ln_members[1040];	/* file members' roots live here */
static char ln_fill[1200];	/* the file that fills it */
static const char *ln_no_tmpfs; /* why there is no tmpfs, or NULL */

struct ln_run {
	enum smux_mode mode;
	uint64_t seed;
	int64_t storm_ms;
	unsigned chaos;
	bool shared;		    /* round-robin, weighted: one store */
	bool strict_storm;	    /* reads during the storm checked */
	int64_t timeout_ms;	    /* the mux's backend_timeout_ms */
	char dir[1200];		    /* the file members' roots */
	char state[1200];	    /* the hint journal's directory */
	struct smux_backend *store; /* shared store or NULL */
	struct smux_backend *inner[LN_MEMBERS];
	struct smux_backend *f[LN_MEMBERS]; /* the members (faulty) */
	struct smux_backend *mux;
	struct ln_key keys[LN_KEYS];
	atomic_bool stop;
	/* counters (atomics: every thread adds) */
	atomic_ulong ops, acked, unknown, refused, reads, read_errors,
		stale_tolerated, wild_skips;
	atomic_uint flaps, drains, removes, enospc, repairs, chaos_errors;
	atomic_uint bad_keys; /* bit i: key i read wrong during the storm */
	/* failed operations (reads included) by error code, and by the code
	 * of their cause (ALL_BACKENDS_DOWN: the last member's error) */
	atomic_ulong codes[SMUX_CODE_COUNT], causes[SMUX_CODE_COUNT];
	pthread_mutex_t report_lock;
	unsigned storm_mismatch; /* protected by report_lock */
	unsigned final_mismatch; /* single-threaded after the storm */
	unsigned replica_mismatch;
	unsigned list_mismatch;
	unsigned printed; /* protected by report_lock */
};

struct ln_worker {
	struct ln_run *r;
	unsigned id;
	uint64_t rng;
};

/* ---- small helpers ---- */

static uint64_t ln_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned ln_below(uint64_t *s, unsigned n)
{
	return (unsigned)(ln_next(s) % n);
}

static bool ln_sanitized(void)
{
	const char *v = getenv("SMUX_TEST_VARIANT");

	return v && strcmp(v, "normal") != 0;
}

static void ln_ctx(struct smux_ctx *ctx, int64_t ms)
{
	smux_ctx_init(ctx);
	if (ms > 0)
		ctx->deadline_ns = smux_now_ns() + ms * MS_NS;
}

/* Counts a failed operation by its error code and cause. */
static void ln_failed(struct ln_run *r, const struct smux_error *err)
{
	if ((unsigned)err->e.code < SMUX_CODE_COUNT)
		atomic_fetch_add(&r->codes[err->e.code], 1);
	if (err->has_cause && (unsigned)err->cause.code < SMUX_CODE_COUNT)
		atomic_fetch_add(&r->causes[err->cause.code], 1);
}

/* Prints the failed operations by error code. */
static void ln_print_codes(struct ln_run *r)
{
	char line[2048];
	size_t off = 0;

	line[0] = '\0';
	for (unsigned c = 1; c < SMUX_CODE_COUNT; c++) {
		unsigned long n = atomic_load(&r->codes[c]);
		unsigned long m = atomic_load(&r->causes[c]);
		int w;

		if (!n && !m)
			continue;
		w = snprintf(line + off, sizeof(line) - off, " %s=%lu/%lu",
			     smux_code_name((enum smux_code)c), n, m);
		if (w < 0 || (size_t)w >= sizeof(line) - off)
			break;
		off += (size_t)w;
	}
	print_message("  errors (code=as error/as cause):%s\n", line);
}

/* ---- reports ---- */

static void ln_report(struct ln_run *r, unsigned *counter, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ln_report(struct ln_run *r, unsigned *counter, const char *fmt, ...)
{
	char msg[800]; /* cmocka prints at most about 1 KiB a line */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&r->report_lock);
	(*counter)++;
	if (r->printed++ < 40)
		print_message("  MISMATCH mode=%s seed=%llu %s\n",
			      smux_mode_name(r->mode),
			      (unsigned long long)r->seed, msg);
	pthread_mutex_unlock(&r->report_lock);
}

/*
 * Checks one read (@rc, @got) of @k against the model: a content it may
 * hold, or KEY_NOT_FOUND when it may be absent. Other errors say nothing
 * (an unavailable key is not a lost one). Returns false on a mismatch,
 * reported against @counter with @where naming the reader.
 */
static bool ln_check_read(struct ln_run *r, struct ln_key *k, int rc,
			  const struct smux_error *err, const char *got,
			  size_t len, const char *where, unsigned *counter)
{
	char exp[1024], g[96], e[2 * SMUX_ERROR_MSG_MAX + 256];
	bool ok;

	if (k->wild) {
		atomic_fetch_add(&r->wild_skips, 1);
		return true;
	}
	if (rc == 0)
		ok = ln_key_has(k, got, len);
	else if (err->e.code == SMUX_E_KEY_NOT_FOUND)
		ok = ln_key_may_absent(k);
	else
		return true;
	if (ok)
		return true;
	if (!counter) {
		atomic_fetch_add(&r->stale_tolerated, 1);
		return true;
	}
	/* its hint history is printed after the run */
	atomic_fetch_or(&r->bad_keys, 1u << (k - r->keys));
	ln_expect(k, exp, sizeof(exp));
	ln_report(r, counter, "key %s via %s: got %s, expected %s", k->name,
		  where,
		  rc == 0 ? ln_show(got, len, g, sizeof(g))
			  : smux_error_format(err, e, sizeof(e)),
		  exp);
	return false;
}

/* ---- the workers ---- */

/* A new content: a tag naming seed, thread and operation, then filler of
 * a random length. Heap. */
static char *ln_content(struct ln_worker *w, unsigned long n, char op,
			size_t *len)
{
	size_t fill = ln_below(&w->rng, 4) == 0 ? ln_below(&w->rng, 64 * 1024)
						: ln_below(&w->rng, 2048);
	char tag[64];
	int t = snprintf(tag, sizeof(tag), "%c.s%llu.t%u.n%lu;", op,
			 (unsigned long long)w->r->seed, w->id, n);
	char *s = malloc((size_t)t + fill + 1);

	assert_non_null(s);
	memcpy(s, tag, (size_t)t);
	for (size_t i = 0; i < fill; i++)
		s[t + i] = (char)('a' + (n + i * 7) % 26);
	s[t + fill] = '\0';
	*len = (size_t)t + fill;
	return s;
}

/* A worker's operation on @key and its outcome, in the trace a failing
 * run prints (kind -7): "@op t<worker>.n<n> rc=<rc>". */
static void ln_trace_op(const char *key, char op, const struct ln_worker *w,
			unsigned long n, int rc);

static void ln_put(struct ln_worker *w, struct ln_key *k, unsigned long n)
{
	struct ln_run *r = w->r;
	bool by_writer = ln_below(&w->rng, 3) == 0;
	struct smux_put_opts po = {0};
	struct smux_writer *wr = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len;
	char *s = ln_content(w, n, by_writer ? 'W' : 'P', &len);
	int rc;

	ln_ctx(&ctx, 0);
	if (!by_writer) {
		rc = smux_backend_put_buf(r->mux, &ctx, k->name, s, len, &err);
	} else {
		/* an overwrite through a truncating writer */
		rc = smux_backend_writer_open(r->mux, &ctx, k->name,
					      SMUX_WRITER_TRUNC, &wr, &err);
		if (rc == 0)
			rc = smux_writer_pwrite(wr, &ctx, s, len, 0, &err);
		if (rc == 0)
			rc = smux_writer_commit(wr, &ctx, &po, NULL, &err);
		smux_writer_close(wr);
	}
	ln_trace_op(k->name, by_writer ? 'W' : 'P', w, n, rc);
	if (rc == 0) {
		atomic_fetch_add(&r->acked, 1);
		ln_key_set(k, s, len);
	} else {
		atomic_fetch_add(&r->unknown, 1);
		ln_failed(r, &err);
		ln_key_add(k, s, len);
	}
	free(s);
}

/* An append or an edit in place (a few bytes at offset 0) through a
 * writer opened on the object. */
static void ln_write(struct ln_worker *w, struct ln_key *k, unsigned long n,
		     bool append)
{
	struct ln_run *r = w->r;
	struct smux_put_opts po = {0};
	struct smux_writer *wr = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	char data[64];
	size_t dlen;
	int rc;

	if (append)
		dlen = (size_t)snprintf(data, sizeof(data), "+a.t%u.n%lu;",
					w->id, n);
	else
		dlen = (size_t)snprintf(data, sizeof(data), "E%u.%05lu", w->id,
					n % 100000);
	ln_ctx(&ctx, 0);
	rc = smux_backend_writer_open(r->mux, &ctx, k->name, 0, &wr, &err);
	if (rc == 0)
		rc = smux_writer_pwrite(wr, &ctx, data, dlen,
					append ? SMUX_OFF_APPEND : 0, &err);
	if (rc == 0)
		rc = smux_writer_commit(wr, &ctx, &po, NULL, &err);
	smux_writer_close(wr);
	ln_trace_op(k->name, append ? 'A' : 'E', w, n, rc);
	if (rc == 0) {
		atomic_fetch_add(&r->acked, 1);
	} else {
		atomic_fetch_add(&r->unknown, 1);
		ln_failed(r, &err);
	}
	ln_key_write(k, data, dlen, append, rc == 0);
}

static void ln_del(struct ln_worker *w, struct ln_key *k)
{
	struct ln_run *r = w->r;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	ln_ctx(&ctx, 0);
	rc = smux_backend_del(r->mux, &ctx, k->name, &err);
	ln_trace_op(k->name, 'D', w, 0, rc);
	if (rc == 0) {
		atomic_fetch_add(&r->acked, 1);
		ln_key_set(k, NULL, 0);
	} else if (err.e.code == SMUX_E_KEY_NOT_FOUND) {
		/* an answer: the key was absent (a read of it) */
		atomic_fetch_add(&r->refused, 1);
		ln_check_read(r, k, rc, &err, NULL, 0, "delete",
			      r->strict_storm ? &r->storm_mismatch : NULL);
	} else {
		atomic_fetch_add(&r->unknown, 1);
		ln_failed(r, &err);
		ln_key_add(k, NULL, 0);
	}
}

static void ln_rename(struct ln_worker *w, struct ln_key *src,
		      struct ln_key *dst)
{
	struct ln_run *r = w->r;
	struct smux_error err;
	struct smux_ctx ctx;
	char exp[1024];
	int rc;

	ln_ctx(&ctx, 0);
	rc = smux_backend_rename(r->mux, &ctx, src->name, dst->name, &err);
	ln_trace_op(src->name, 'r', w, 0, rc); /* renamed away */
	ln_trace_op(dst->name, 'R', w, 0, rc); /* renamed onto */
	if (rc == 0) {
		atomic_fetch_add(&r->acked, 1);
		if (src->wild) {
			ln_key_clear(dst);
			dst->wild = true;
		} else if (!ln_key_may_present(src)) {
			ln_expect(src, exp, sizeof(exp));
			ln_report(r, &r->storm_mismatch,
				  "rename %s -> %s succeeded, but %s should "
				  "be %s",
				  src->name, dst->name, src->name, exp);
			ln_key_clear(dst);
			dst->wild = true;
		} else {
			ln_key_clear(dst);
			for (unsigned i = 0; i < src->n; i++)
				if (src->v[i].s)
					ln_key_add(dst, src->v[i].s,
						   src->v[i].len);
		}
		ln_key_set(src, NULL, 0);
	} else if (err.e.code == SMUX_E_KEY_NOT_FOUND) {
		atomic_fetch_add(&r->refused, 1);
		ln_check_read(r, src, rc, &err, NULL, 0, "rename",
			      r->strict_storm ? &r->storm_mismatch : NULL);
	} else {
		atomic_fetch_add(&r->unknown, 1);
		ln_failed(r, &err);
		if (src->wild) {
			ln_key_clear(dst);
			dst->wild = true;
		} else {
			for (unsigned i = 0; i < src->n; i++)
				if (src->v[i].s)
					ln_key_add(dst, src->v[i].s,
						   src->v[i].len);
		}
		ln_key_add(src, NULL, 0);
	}
}

/*
 * Reads a whole object through a reader of the mux (reader_open, then
 * preads of 4 KiB until a short one): the path a FUSE READ takes, where a
 * replica failing mid-stream is replaced by another. Heap buffer like
 * smux_backend_get_all.
 */
static int ln_read_reader(struct ln_run *r, const struct smux_ctx *ctx,
			  const char *key, unsigned char **out, size_t *len,
			  struct smux_error *err)
{
	struct smux_reader *rd = NULL;
	unsigned char *buf = NULL;
	size_t cap = 0, n = 0;
	int rc;

	*out = NULL;
	*len = 0;
	rc = smux_backend_reader_open(r->mux, ctx, key, &rd, err);
	if (rc)
		return rc;
	for (;;) {
		long got;

		if (cap - n < 4096) {
			unsigned char *nb = realloc(buf, cap + 65536 + 1);

			assert_non_null(nb);
			buf = nb;
			cap += 65536;
		}
		got = smux_reader_pread(rd, ctx, buf + n, 4096, n, err);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		n += (size_t)got;
		if (got < 4096)
			break;
	}
	smux_reader_close(rd);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static void ln_read(struct ln_worker *w, struct ln_key *k)
{
	bool by_reader = ln_below(&w->rng, 3) == 0;
	struct ln_run *r = w->r;
	unsigned char *buf = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len = 0;
	int rc;

	ln_ctx(&ctx, 0);
	if (by_reader) {
		/* PRECONDITION_FAILED (the version went away) says nothing,
		 * like any error but KEY_NOT_FOUND */
		rc = ln_read_reader(r, &ctx, k->name, &buf, &len, &err);
	} else {
		rc = smux_backend_get_all(r->mux, &ctx, k->name, &buf, &len,
					  &err);
	}
	atomic_fetch_add(&r->reads, 1);
	if (rc && err.e.code != SMUX_E_KEY_NOT_FOUND) {
		atomic_fetch_add(&r->read_errors, 1);
		ln_failed(r, &err);
	}
	ln_check_read(r, k, rc, &err, (const char *)buf, len,
		      by_reader ? "mux reader" : "mux read",
		      r->strict_storm ? &r->storm_mismatch : NULL);
	free(buf);
}

static void *ln_worker_main(void *arg)
{
	struct ln_worker *w = arg;
	struct ln_run *r = w->r;
	unsigned long n = 0;

	while (!atomic_load(&r->stop)) {
		unsigned op = ln_below(&w->rng, 100);
		unsigned a = ln_below(&w->rng, LN_KEYS);
		struct ln_key *k = &r->keys[a];

		n++;
		atomic_fetch_add(&r->ops, 1);
		if (op >= 90) {
			/* rename: both keys locked, in index order */
			unsigned b = (a + 1 + ln_below(&w->rng, LN_KEYS - 1)) %
				     LN_KEYS;
			struct ln_key *lo = &r->keys[a < b ? a : b];
			struct ln_key *hi = &r->keys[a < b ? b : a];

			pthread_mutex_lock(&lo->lock);
			pthread_mutex_lock(&hi->lock);
			ln_rename(w, k, &r->keys[b]);
			pthread_mutex_unlock(&hi->lock);
			pthread_mutex_unlock(&lo->lock);
			continue;
		}
		pthread_mutex_lock(&k->lock);
		if (op < 25)
			ln_put(w, k, n);
		else if (op < 40)
			ln_write(w, k, n, true);
		else if (op < 52)
			ln_write(w, k, n, false);
		else if (op < 62)
			ln_del(w, k);
		else
			ln_read(w, k);
		pthread_mutex_unlock(&k->lock);
	}
	return NULL;
}

/* ---- the chaos thread ---- */

struct ln_chaos_state {
	int drained; /* member index or -1 */
	int removed; /* member index or -1 */
	int fill_fd; /* the tmpfs filler, -1 when not full */
	int flapped; /* the member with faults or -1 */
};

/* Whether member @i may be removed in this mode: never the shield's
 * origin; in failover and sticky-by-key only the last member, so adding
 * it back restores the order (and the placement). */
static bool ln_removable(const struct ln_run *r, int i)
{
	switch (r->mode) {
	case SMUX_MODE_SHIELD:
		return i != 0;
	case SMUX_MODE_FAILOVER:
	case SMUX_MODE_STICKY:
		return i == LN_MEMBERS - 1;
	default:
		return true;
	}
}

/*
 * Gives one member faults for a while. One member at a time has faults
 * and it is never the one out of service (drained or removed), so one of
 * the three stays healthy: the storm measures lost writes, not a mux with
 * every member down (only a full $TMPDIR can still do that: issue 9
 * item 5).
 */
static void ln_flap(struct ln_run *r, struct ln_chaos_state *cs, uint64_t *rng)
{
	struct smux_faulty_opts none = {0};
	unsigned i = ln_below(rng, LN_MEMBERS);
	struct smux_faulty_opts o = {
		.seed = ln_next(rng),
		.for_ms = 30 + ln_below(rng, 300),
	};

	unsigned kind;

	do /* one of the kinds asked for */
		kind = ln_below(rng, 5);
	while (!(r->chaos & (LN_CHAOS_DOWN << kind)));
	switch (kind) {
	case 0:
		o.error_rate = 1.0; /* down */
		break;
	case 1:
		o.error_rate = 0.3; /* flaky */
		break;
	case 2:
		o.timeout_rate = 0.5;
		break;
	case 3:
		o.hang_rate = 0.3; /* past the deadline, cancel honoured */
		break;
	default:
		/* stuck in a system call: the bulkhead abandons the call */
		o.hang_rate = 0.2;
		o.hang_ignores_cancel = true;
		/* and then lands: a zombie write (part Z). In round-robin and
		 * weighted, whose members are three paths to ONE store, the
		 * mux holds every write of the key until the zombie is over
		 * (mux_zombie.c, smux__zombie_wait), so it never lands on
		 * top of a newer acknowledged write */
		o.hang_lands = true;
		o.hang_ms = 3 * r->timeout_ms; /* ends after the deadline */
		break;
	}
	if ((int)i == cs->drained || (int)i == cs->removed)
		return;
	if (cs->flapped >= 0)
		smux_faulty_set(r->f[cs->flapped], &none);
	smux_faulty_set(r->f[i], &o);
	cs->flapped = (int)i;
	atomic_fetch_add(&r->flaps, 1);
}

/* A chaos action on a member, in the trace a failing run prints. */
enum ln_trace_chaos {
	LN_TRACE_REMOVE = -3,
	LN_TRACE_ADD = -4,
	LN_TRACE_DRAIN = -5,
	LN_TRACE_UNDRAIN = -6,
};
static void ln_trace_chaos(enum ln_trace_chaos what, const char *replica);

static void ln_drain(struct ln_run *r, struct ln_chaos_state *cs, uint64_t *rng)
{
	struct smux_error err;
	struct smux_ctx ctx;
	int i;

	if (cs->drained >= 0) {
		if (smux_mux_undrain(r->mux, r->f[cs->drained]->name, &err))
			atomic_fetch_add(&r->chaos_errors, 1);
		ln_trace_chaos(LN_TRACE_UNDRAIN, r->f[cs->drained]->name);
		cs->drained = -1;
		return;
	}
	i = (int)ln_below(rng, LN_MEMBERS);
	if (cs->removed >= 0 || i == cs->flapped)
		return; /* one member out of service at a time */
	ln_ctx(&ctx, 500);
	ln_trace_chaos(LN_TRACE_DRAIN, r->f[i]->name);
	/* an aborted drain leaves the member draining: undrained later */
	if (smux_mux_drain(r->mux, r->f[i]->name, &ctx, &err))
		atomic_fetch_add(&r->chaos_errors, 1);
	cs->drained = i;
	atomic_fetch_add(&r->drains, 1);
}

static void ln_add_back(struct ln_run *r, int i)
{
	static const double weights[LN_MEMBERS] = {1, 2, 3};
	struct smux_mux_member m = {
		.backend = r->f[i],
		.has_weight = r->mode == SMUX_MODE_WEIGHTED,
		.weight = weights[i],
	};
	struct smux_error err;

	MH_OK(smux_mux_add(r->mux, &m, &err), &err);
	ln_trace_chaos(LN_TRACE_ADD, r->f[i]->name);
}

static void ln_remove(struct ln_run *r, struct ln_chaos_state *cs,
		      uint64_t *rng)
{
	struct smux_error err;
	struct smux_ctx ctx;
	int i;

	if (cs->removed >= 0) {
		ln_add_back(r, cs->removed);
		cs->removed = -1;
		return;
	}
	i = (int)ln_below(rng, LN_MEMBERS);
	if (cs->drained >= 0 || i == cs->flapped || !ln_removable(r, i))
		return;
	ln_ctx(&ctx, 1000);
	ln_trace_chaos(LN_TRACE_REMOVE, r->f[i]->name);
	if (smux_mux_remove(r->mux, r->f[i]->name, &ctx, &err) == 0) {
		cs->removed = i;
		atomic_fetch_add(&r->removes, 1);
	} else {
		/* the wait was cut short: the member stays draining */
		atomic_fetch_add(&r->chaos_errors, 1);
		MH_OK(smux_mux_undrain(r->mux, r->f[i]->name, &err), &err);
	}
}

/* Fills the tmpfs behind $TMPDIR, or gives the space back. */
static void ln_space(struct ln_run *r, struct ln_chaos_state *cs)
{
	static const char chunk[64 * 1024];

	if (!ln_tmpfs[0])
		return;
	if (cs->fill_fd >= 0) {
		close(cs->fill_fd);
		unlink(ln_fill);
		cs->fill_fd = -1;
		return;
	}
	cs->fill_fd =
		open(ln_fill, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(cs->fill_fd >= 0);
	for (;;) {
		ssize_t n = write(cs->fill_fd, chunk, sizeof(chunk));

		if (n < 0 && errno == ENOSPC)
			break;
		assert_true(n > 0);
	}
	atomic_fetch_add(&r->enospc, 1);
}

static void ln_chaos_repair(struct ln_run *r)
{
	struct smux_error err;
	struct smux_ctx ctx;

	ln_ctx(&ctx, 300);
	smux_mux_repair(r->mux, &ctx, NULL, NULL, &err);
	atomic_fetch_add(&r->repairs, 1);
}

/* Stops every member's faults (hangs in progress end at their window). */
static void ln_heal(struct ln_run *r, struct ln_chaos_state *cs)
{
	struct smux_faulty_opts none = {0};

	for (int i = 0; i < LN_MEMBERS; i++)
		smux_faulty_set(r->f[i], &none);
	cs->flapped = -1;
}

/* Undoes every chaos action still in force. */
static void ln_calm(struct ln_run *r, struct ln_chaos_state *cs)
{
	struct smux_faulty_opts none = {0};
	struct smux_error err;

	for (int i = 0; i < LN_MEMBERS; i++) {
		smux_faulty_set(r->f[i], &none);
		smux_faulty_release_hangs(r->f[i]);
	}
	if (cs->drained >= 0) {
		MH_OK(smux_mux_undrain(r->mux, r->f[cs->drained]->name, &err),
		      &err);
		ln_trace_chaos(LN_TRACE_UNDRAIN, r->f[cs->drained]->name);
	}
	cs->drained = -1;
	if (cs->removed >= 0)
		ln_add_back(r, cs->removed);
	cs->removed = -1;
	if (cs->fill_fd >= 0)
		ln_space(r, cs);
}

static void *ln_chaos_main(void *arg)
{
	struct ln_run *r = arg;
	struct ln_chaos_state cs = {
		.drained = -1, .removed = -1, .fill_fd = -1};
	uint64_t rng = r->seed * 0x2545f4914f6cdd1dULL + 77;

	while (!atomic_load(&r->stop)) {
		unsigned a = ln_below(&rng, 100);
		struct timespec pause = {
			.tv_nsec = (long)(10 + ln_below(&rng, 40)) * MS_NS,
		};

		/* the pace of the chaos, not a synchronisation */
		nanosleep(&pause, NULL);
		if (a < 45 && (r->chaos & LN_CHAOS_FLAP))
			ln_flap(r, &cs, &rng);
		else if (a < 55 && (r->chaos & LN_CHAOS_FLAP))
			ln_heal(r, &cs);
		else if (a < 70 && (r->chaos & LN_CHAOS_DRAIN))
			ln_drain(r, &cs, &rng);
		else if (a < 80 && (r->chaos & LN_CHAOS_REMOVE))
			ln_remove(r, &cs, &rng);
		else if (a < 90 && (r->chaos & LN_CHAOS_ENOSPC))
			ln_space(r, &cs);
		else if (r->chaos & LN_CHAOS_REPAIR)
			ln_chaos_repair(r);
	}
	ln_calm(r, &cs);
	return NULL;
}

/* ---- after the storm ---- */

/* Whether every member is up again (a member marked down by the storm
 * comes back at its next health check): the final reads measure what was
 * kept, not a cooldown. */
static bool ln_all_up(struct ln_run *r)
{
	struct smux_mux_stats *st = smux_mux_stats(r->mux);
	bool up = st != NULL;

	for (unsigned i = 0; st && i < st->n_backends; i++)
		up = up && st->backends[i].status == SMUX_STATUS_UP;
	smux_mux_stats_free(st);
	return up;
}

/* True when no member call is queued or running on any member's bulkhead
 * (the storm's abandoned calls, released at its end, are over): a final
 * read queued behind them could time out in its queue on a loaded
 * machine and mark its member down. */
static bool ln_idle(struct ln_run *r)
{
	struct smux_mux *mux = smux__mux_of(r->mux);
	struct mux_view *v = smux__view_get(mux);
	bool idle = true;

	for (unsigned i = 0; i < v->n && idle; i++)
		idle = smux__bulkhead_busy(v->m[i]->bh) == 0;
	smux__view_put(v);
	return idle;
}

/* Repairs until no hint or intent is pending, every member is up and no
 * member call runs; false when it does not get there within a bound
 * (reported). */
static bool ln_settle(struct ln_run *r, unsigned *rounds, unsigned *pending)
{
	int64_t end = smux_now_ns() + 20000 * MS_NS;
	unsigned replayed = 0, left = 0;

	*rounds = 0;
	do {
		struct smux_error err;
		struct smux_ctx ctx;
		struct timespec pause = {.tv_nsec = 20 * MS_NS};

		ln_ctx(&ctx, 5000);
		smux_mux_check_health(r->mux);
		smux_mux_repair(r->mux, &ctx, &replayed, &left, &err);
		(*rounds)++;
		*pending = smux_mux_pending_hints(r->mux) +
			   smux_mux_pending_intents(r->mux);
		if (*pending == 0 && ln_all_up(r) && ln_idle(r))
			return true;
		/* a member still cooling down after its last failure:
		 * wait for its probe */
		nanosleep(&pause, NULL);
	} while (smux_now_ns() < end);
	return false;
}

/* The last hint changes (smux__hints_hook_change) with the stack that
 * made them: printed for a key the repair left stuck. */
#define LN_TRACE    32768
#define LN_TRACE_BT 16
struct ln_trace {
	int64_t at_ns;
	bool pending;
	int kind;
	uint64_t id;
	char replica[24], key[16];
	int nbt;
	void *bt[LN_TRACE_BT];
};
static struct ln_trace ln_traces[LN_TRACE];
static unsigned long ln_ntraces; /* protected by ln_trace_lock */
static pthread_mutex_t ln_trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void ln_trace_hint(bool pending, const char *replica, const char *key,
			  int kind, uint64_t id)
{
	struct ln_trace t = {.at_ns = smux_now_ns(),
			     .pending = pending,
			     .kind = kind,
			     .id = id};

	snprintf(t.replica, sizeof(t.replica), "%s", replica);
	snprintf(t.key, sizeof(t.key), "%s", key);
	t.nbt = backtrace(t.bt, LN_TRACE_BT);
	pthread_mutex_lock(&ln_trace_lock);
	ln_traces[ln_ntraces++ % LN_TRACE] = t;
	pthread_mutex_unlock(&ln_trace_lock);
}

/* A zombie of (@replica, @key) ended (kind -1 in the trace). */
static void ln_trace_zombie(struct smux_mux *mux, const char *replica,
			    const char *key)
{
	(void)mux;
	ln_trace_hint(false, replica, key, -1, 0);
}

/* A zombie of (@replica, @key) begins (kind -2 in the trace). */
static void ln_trace_zombie_begin(const char *replica, const char *key)
{
	ln_trace_hint(true, replica, key, -2, 0);
}

static void ln_trace_op(const char *key, char op, const struct ln_worker *w,
			unsigned long n, int rc)
{
	char what[24];

	snprintf(what, sizeof(what), "%c t%u.n%lu rc=%d", op, w->id, n, rc);
	ln_trace_hint(false, what, key, -7, 0);
}

/* A drain, undrain, remove or add of @replica (key "*" in the trace). */
static void ln_trace_chaos(enum ln_trace_chaos what, const char *replica)
{
	ln_trace_hint(false, replica, "*", (int)what, 0);
}

static const char *ln_trace_what(const struct ln_trace *t)
{
	switch (t->kind) {
	case -2:
		return "zombie-begin";
	case -1:
		return "zombie-end";
	case LN_TRACE_REMOVE:
		return "chaos-remove";
	case LN_TRACE_ADD:
		return "chaos-add";
	case LN_TRACE_DRAIN:
		return "chaos-drain";
	case LN_TRACE_UNDRAIN:
		return "chaos-undrain";
	case -7:
		return "op";
	default:
		return t->pending ? "+hint" : "-hint";
	}
}

/* The trace of @key, with the rejoin hints (key "/") and the chaos
 * actions on members (key "*") between its events. */
static void ln_trace_dump(const char *key)
{
	unsigned long from;

	pthread_mutex_lock(&ln_trace_lock);
	from = ln_ntraces > LN_TRACE ? ln_ntraces - LN_TRACE : 0;
	for (unsigned long i = from; i < ln_ntraces; i++) {
		struct ln_trace *t = &ln_traces[i % LN_TRACE];

		if (strcmp(t->key, key) != 0 && strcmp(t->key, "/") != 0 &&
		    strcmp(t->key, "*") != 0)
			continue;
		fprintf(stderr, "  trace %s: %lld %s %s %s kind=%d id=%llu at",
			key, (long long)(t->at_ns / 1000), t->replica, t->key,
			ln_trace_what(t), t->kind, (unsigned long long)t->id);
		/* offsets in the binary: addr2line -f -e BINARY OFFSET */
		for (int j = 2; j < t->nbt; j++) {
			Dl_info di;

			if (dladdr(t->bt[j], &di) && di.dli_fbase)
				fprintf(stderr, " 0x%lx",
					(unsigned long)((char *)t->bt[j] -
							(char *)di.dli_fbase) -
						1);
		}
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&ln_trace_lock);
}

/* After a repair that did not converge: every pending hint (member, key,
 * kind) and every (member, key) with a zombie call still running, so the
 * report names the stuck pair. */
static void ln_dump_pending(struct ln_run *r)
{
	struct smux_mux *mux = smux__mux_of(r->mux);
	struct mux_view *v = smux__view_get(mux);
	struct smux__hint *list = NULL;
	int n = smux__hints_list(mux->hints, NULL, &list);
	bool dumped[LN_KEYS] = {false};

	/* every replica's hints (a removed member's too) and the intents */
	for (int j = 0; j < n; j++) {
		fprintf(stderr, "  pending: %s hint %s kind=%d\n",
			list[j].replica, list[j].key, (int)list[j].kind);
		for (unsigned k = 0; k < LN_KEYS; k++)
			if (!dumped[k] &&
			    strcmp(list[j].key, r->keys[k].name) == 0) {
				dumped[k] = true;
				ln_trace_dump(r->keys[k].name);
			}
	}
	smux__hints_free_list(list, n);
	for (unsigned i = 0; i < v->n; i++)
		for (unsigned k = 0; k < LN_KEYS; k++)
			if (smux__member_zombie(mux, v->m[i], r->keys[k].name))
				fprintf(stderr, "  pending: %s zombie %s\n",
					v->m[i]->name, r->keys[k].name);
	fprintf(stderr, "  members:");
	for (unsigned i = 0; i < v->n; i++)
		fprintf(stderr, " %s", v->m[i]->name);
	fputc('\n', stderr);
	/* a zombie that never ends: is its call still hanging in the
	 * faulty backend, or over there and stuck in the mux? */
	for (int i = 0; i < LN_MEMBERS; i++)
		fprintf(stderr, "  faulty %s: hanging=%u calls=%lu\n",
			r->f[i]->name, smux_faulty_hanging(r->f[i]),
			smux_faulty_calls(r->f[i]));
	smux__view_put(v);
}

static void ln_final_read(struct ln_run *r, struct ln_key *k)
{
	unsigned char *buf = NULL;
	struct smux_error err;
	struct smux_ctx ctx;
	size_t len = 0;
	int rc;

	ln_ctx(&ctx, 0);
	rc = smux_backend_get_all(r->mux, &ctx, k->name, &buf, &len, &err);
	if (rc && err.e.code != SMUX_E_KEY_NOT_FOUND) {
		char e[2 * SMUX_ERROR_MSG_MAX + 256];

		ln_report(r, &r->final_mismatch,
			  "key %s via mux read after repair: %s", k->name,
			  smux_error_format(&err, e, sizeof(e)));
	} else {
		ln_check_read(r, k, rc, &err, (const char *)buf, len,
			      "mux read after repair", &r->final_mismatch);
	}
	free(buf);
}

/* Mirror and shield: every replica, read directly, holds the same. */
static void ln_replicas(struct ln_run *r, struct ln_key *k)
{
	unsigned char *buf[LN_MEMBERS] = {0};
	size_t len[LN_MEMBERS] = {0};
	bool absent[LN_MEMBERS];
	char e[2 * SMUX_ERROR_MSG_MAX + 256], a[96], b[96];

	for (int i = 0; i < LN_MEMBERS; i++) {
		struct smux_error err;
		struct smux_ctx ctx;
		int rc;

		ln_ctx(&ctx, 0);
		rc = smux_backend_get_all(r->f[i], &ctx, k->name, &buf[i],
					  &len[i], &err);
		absent[i] = rc != 0;
		if (rc && err.e.code != SMUX_E_KEY_NOT_FOUND)
			ln_report(r, &r->replica_mismatch,
				  "key %s on replica %s: %s", k->name,
				  r->f[i]->name,
				  smux_error_format(&err, e, sizeof(e)));
		else
			ln_check_read(r, k, rc, &err, (const char *)buf[i],
				      len[i], r->f[i]->name,
				      &r->replica_mismatch);
	}
	for (int i = 1; i < LN_MEMBERS; i++) {
		if (ln_same(absent[0] ? NULL : (char *)buf[0], len[0],
			    absent[i] ? NULL : (char *)buf[i], len[i]))
			continue;
		ln_report(r, &r->replica_mismatch,
			  "key %s: replica %s holds %s, replica %s holds %s",
			  k->name, r->f[0]->name,
			  ln_show(absent[0] ? NULL : (char *)buf[0], len[0], a,
				  sizeof(a)),
			  r->f[i]->name,
			  ln_show(absent[i] ? NULL : (char *)buf[i], len[i], b,
				  sizeof(b)));
	}
	for (int i = 0; i < LN_MEMBERS; i++)
		free(buf[i]);
}

struct ln_listing {
	bool seen[LN_KEYS];
};

static int ln_list_cb(void *arg, const struct smux_list_entry *e)
{
	struct ln_listing *l = arg;
	unsigned i;

	if (!e->is_prefix && sscanf(e->key, "k%u", &i) == 1 && i < LN_KEYS)
		l->seen[i] = true;
	return 0;
}

/* The listing through the mux agrees with the model: no deleted key
 * listed, no acknowledged key missing. */
static void ln_listing(struct ln_run *r)
{
	struct ln_listing l = {{0}};
	struct smux_error err;
	struct smux_ctx ctx;

	ln_ctx(&ctx, 0);
	MH_OK(smux_backend_list(r->mux, &ctx, "", NULL, ln_list_cb, &l, &err),
	      &err);
	for (unsigned i = 0; i < LN_KEYS; i++) {
		struct ln_key *k = &r->keys[i];
		char exp[1024];

		if (k->wild ||
		    (l.seen[i] ? ln_key_may_present(k) : ln_key_may_absent(k)))
			continue;
		ln_expect(k, exp, sizeof(exp));
		ln_report(r, &r->list_mismatch,
			  "key %s %s in the mux listing, expected %s", k->name,
			  l.seen[i] ? "listed" : "missing", exp);
	}
}

/* ---- one run ---- */

static void ln_setup(struct ln_run *r)
{
	static const double weights[LN_MEMBERS] = {1, 2, 3};
	struct smux_mux_opts o = {
		.mode = r->mode,
		.backend_timeout_ms = r->timeout_ms,
		.cooldown_ms = 20,
		.max_cooldown_ms = 200,
		.healthcheck_interval_ms = 100,
	};
	char path[PATH_MAX + 32], name[32];
	const char *journal;
	struct smux_error err;

	snprintf(r->dir, sizeof(r->dir), "%s/%s-%llu", ln_members,
		 smux_mode_name(r->mode), (unsigned long long)r->seed);
	assert_int_equal(mkdir(r->dir, 0700), 0);
	snprintf(r->state, sizeof(r->state), "%s/%s-%llu.state", ln_base,
		 smux_mode_name(r->mode), (unsigned long long)r->seed);
	snprintf(path, sizeof(path), "%s", r->state);
	/* the hint journal on disk, as smuxfs keeps it; "memory": hints in
	 * memory only (tells journal stalls from the rest) */
	journal = getenv("SMUX_LOSE_NOTHING_JOURNAL");
	if (!journal || strcmp(journal, "memory") != 0)
		o.state_dir = path;
	for (int i = 0; i < LN_MEMBERS + 1; i++) {
		/* kinds alternate, starting with the seed's parity; the
		 * shared store of round-robin and weighted is slot 0 */
		bool file = (r->seed + (uint64_t)i) % 2 == 0;
		struct smux_backend **slot = i == 0 && r->shared ? &r->store
					     : i < LN_MEMBERS	 ? &r->inner[i]
								 : NULL;
		char root[PATH_MAX + 32];

		if (!slot || (r->shared && i > 0))
			break;
		snprintf(name, sizeof(name), "%s%d", file ? "file" : "mem", i);
		if (file) {
			struct smux_file_opts fo = {.path = root,
						    .no_fsync = true};

			snprintf(root, sizeof(root), "%s/%s", r->dir, name);
			assert_int_equal(mkdir(root, 0700), 0);
			MH_OK(smux_file_new(name, &fo, slot, &err), &err);
		} else {
			MH_OK(smux_memory_new(name, slot, &err), &err);
		}
	}
	for (int i = 0; i < LN_MEMBERS; i++) {
		if (r->shared)
			r->inner[i] = smux_backend_ref(r->store);
		snprintf(name, sizeof(name), "m%d-%s", i, r->inner[i]->name);
		r->f[i] = mh_faulty(name, r->inner[i], NULL);
	}
	r->mux = mh_mux(smux_mode_name(r->mode), &o, r->f,
			r->mode == SMUX_MODE_WEIGHTED ? weights : NULL,
			LN_MEMBERS);
	for (unsigned i = 0; i < LN_KEYS; i++) {
		pthread_mutex_init(&r->keys[i].lock, NULL);
		snprintf(r->keys[i].name, sizeof(r->keys[i].name), "k%u", i);
		ln_key_set(&r->keys[i], NULL, 0);
	}
	pthread_mutex_init(&r->report_lock, NULL);
}

static void ln_teardown(struct ln_run *r)
{
	smux__hints_hook_change = NULL;
	smux__zombie_hook_end = NULL;
	smux__zombie_hook_begin = NULL;
	smux_backend_unref(r->mux);
	for (int i = 0; i < LN_MEMBERS; i++) {
		smux_backend_unref(r->f[i]);
		smux_backend_unref(r->inner[i]);
	}
	smux_backend_unref(r->store);
	for (unsigned i = 0; i < LN_KEYS; i++) {
		ln_key_clear(&r->keys[i]);
		pthread_mutex_destroy(&r->keys[i].lock);
	}
	pthread_mutex_destroy(&r->report_lock);
	mh_rm_rf(r->dir);
	mh_rm_rf(r->state);
}

/* One storm and its checks; returns the mismatches found. */
static unsigned ln_run_one(enum smux_mode mode, uint64_t seed, int64_t storm_ms,
			   unsigned chaos)
{
	struct ln_run *r = calloc(1, sizeof(*r));
	struct ln_worker wk[LN_WORKERS];
	pthread_t th[LN_WORKERS + 1];
	struct timespec storm;
	unsigned rounds = 0, pending = 0, bad;
	bool settled;

	assert_non_null(r);
	r->mode = mode;
	r->seed = seed;
	r->storm_ms = storm_ms;
	r->chaos = chaos;
	r->shared = mode == SMUX_MODE_ROUND_ROBIN || mode == SMUX_MODE_WEIGHTED;
	r->strict_storm = mode != SMUX_MODE_FAILOVER;
	r->timeout_ms = ln_sanitized() ? 400 : 150;
	atomic_init(&r->stop, false);
	atomic_init(&r->bad_keys, 0);
	ln_setup(r);
	pthread_mutex_lock(&ln_trace_lock);
	ln_ntraces = 0;
	pthread_mutex_unlock(&ln_trace_lock);
	smux__hints_hook_change = ln_trace_hint;
	smux__zombie_hook_end = ln_trace_zombie;
	smux__zombie_hook_begin = ln_trace_zombie_begin;

	for (unsigned i = 0; i < LN_WORKERS; i++) {
		wk[i].r = r;
		wk[i].id = i;
		wk[i].rng = seed * 0x9e3779b97f4a7c15ULL + i * 1000003ULL +
			    (uint64_t)mode;
		assert_int_equal(
			pthread_create(&th[i], NULL, ln_worker_main, &wk[i]),
			0);
	}
	assert_int_equal(
		pthread_create(&th[LN_WORKERS], NULL, ln_chaos_main, r), 0);
	/* the storm lasts a time, not an event: sleeping is the point */
	storm.tv_sec = storm_ms / 1000;
	storm.tv_nsec = (long)(storm_ms % 1000) * MS_NS;
	nanosleep(&storm, NULL);
	atomic_store(&r->stop, true);
	for (unsigned i = 0; i < LN_WORKERS + 1; i++)
		pthread_join(th[i], NULL);

	settled = ln_settle(r, &rounds, &pending);
	if (!settled)
		ln_report(r, &r->final_mismatch,
			  "repair did not converge: %u hints/intents pending "
			  "after %u rounds (or a member stayed down)",
			  pending, rounds);
	if (!settled)
		ln_dump_pending(r);
	for (unsigned i = 0; i < LN_KEYS; i++) {
		unsigned before = r->final_mismatch + r->replica_mismatch;

		ln_final_read(r, &r->keys[i]);
		if (mode == SMUX_MODE_MIRROR || mode == SMUX_MODE_SHIELD)
			ln_replicas(r, &r->keys[i]);
		/* the key's hint history (a stuck key's is printed above) */
		if ((settled &&
		     r->final_mismatch + r->replica_mismatch > before) ||
		    (atomic_load(&r->bad_keys) & (1u << i)))
			ln_trace_dump(r->keys[i].name);
	}
	ln_listing(r);

	bad = r->storm_mismatch + r->final_mismatch + r->replica_mismatch +
	      r->list_mismatch;
	print_message(
		"lose-nothing mode=%s seed=%llu storm=%lldms ops=%lu "
		"acked=%lu unknown=%lu refused=%lu reads=%lu read_errors=%lu "
		"| faults flaps=%u drains=%u removes=%u enospc=%u repairs=%u "
		"chaos_errors=%u | repair rounds=%u | unchecked stale=%lu "
		"wild=%lu | mismatches storm=%u final=%u replicas=%u list=%u "
		"%s\n",
		smux_mode_name(mode), (unsigned long long)seed,
		(long long)storm_ms, atomic_load(&r->ops),
		atomic_load(&r->acked), atomic_load(&r->unknown),
		atomic_load(&r->refused), atomic_load(&r->reads),
		atomic_load(&r->read_errors), atomic_load(&r->flaps),
		atomic_load(&r->drains), atomic_load(&r->removes),
		atomic_load(&r->enospc), atomic_load(&r->repairs),
		atomic_load(&r->chaos_errors), rounds,
		atomic_load(&r->stale_tolerated), atomic_load(&r->wild_skips),
		r->storm_mismatch, r->final_mismatch, r->replica_mismatch,
		r->list_mismatch, bad ? "FAIL" : "ok");
	ln_print_codes(r);
	ln_teardown(r);
	free(r);
	return bad;
}

/* ---- the configuration from the environment ---- */

static double ln_env_num(const char *name, double dflt)
{
	const char *v = getenv(name);
	char *end;
	double d;

	if (!v || !v[0])
		return dflt;
	d = strtod(v, &end);
	if (*end || d < 0) {
		print_error("%s=%s: not a number\n", name, v);
		fail();
	}
	return d;
}

static unsigned ln_env_chaos(void)
{
	static const char *const names[] = {
		"flap", "drain", "remove",  "enospc", "repair",
		"down", "flaky", "timeout", "hang",   "stuck"};
	const char *v = getenv("SMUX_LOSE_NOTHING_CHAOS");
	unsigned chaos = 0;

	if (!v || !v[0])
		return LN_CHAOS_ALL;
	for (unsigned i = 0; i < 10; i++)
		if (strstr(v, names[i]))
			chaos |= 1u << i;
	/* "flap": every kind of fault; a kind alone: flaps of that kind */
	if (chaos & LN_CHAOS_FLAP)
		chaos |= LN_CHAOS_KINDS;
	if (chaos & LN_CHAOS_KINDS)
		chaos |= LN_CHAOS_FLAP;
	return chaos;
}

/* True when @name is one of the comma-separated modes of @list. */
static bool ln_mode_listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (strncmp(p, name, len) == 0 && (p[len] == ',' || !p[len]))
			return true;
	}
	return false;
}

static void ln_mode(enum smux_mode mode)
{
	const char *only = getenv("SMUX_LOSE_NOTHING_MODE");
	double soak = ln_env_num("SMUX_LOSE_NOTHING_SOAK", 0);
	int64_t storm_ms =
		(int64_t)(ln_env_num("SMUX_LOSE_NOTHING_SECONDS", 1) * 1000);
	unsigned chaos = ln_env_chaos(), bad = 0, runs = 0;

	if (only && only[0] && !ln_mode_listed(only, smux_mode_name(mode))) {
		skip();
		return;
	}
	if (getenv("SMUX_LOSE_NOTHING_SEED")) {
		uint64_t seed =
			(uint64_t)ln_env_num("SMUX_LOSE_NOTHING_SEED", 1);

		bad += ln_run_one(mode, seed, storm_ms, chaos);
		runs++;
	} else if (soak > 0) {
		/* the soak's time is shared by the modes that run */
		unsigned modes = 0;

		for (unsigned m = 0; m < SMUX_MODE_COUNT; m++)
			modes += !only || !only[0] ||
				 ln_mode_listed(only, smux_mode_name(m));
		int64_t end =
			smux_now_ns() + (int64_t)(soak * 1000 / modes) * MS_NS;
		uint64_t seed = (uint64_t)time(NULL) * 1000 + (uint64_t)mode;

		do {
			bad += ln_run_one(mode, seed, storm_ms, chaos);
			seed += SMUX_MODE_COUNT;
			runs++;
		} while (smux_now_ns() < end);
	} else {
		for (uint64_t seed = 1; seed <= 2; seed++, runs++)
			bad += ln_run_one(mode, seed, storm_ms, chaos);
	}
	if (bad) {
		print_error("%s: %u mismatches in %u runs (replay one with "
			    "SMUX_LOSE_NOTHING_MODE=%s "
			    "SMUX_LOSE_NOTHING_SEED=<seed>)\n",
			    smux_mode_name(mode), bad, runs,
			    smux_mode_name(mode));
		fail();
	}
}

/* The model's own rules (a model too strict fails good muxes, one too
 * lax passes bad ones). */
static void test_model(void **state)
{
	struct ln_key k = {.n = 0};
	char v[16];

	(void)state;
	ln_key_set(&k, "ab", 2);
	ln_key_write(&k, "X", 1, true, true); /* acknowledged append */
	assert_int_equal(k.n, 1);
	assert_true(ln_key_has(&k, "abX", 3));
	assert_false(ln_key_has(&k, "ab", 2));
	ln_key_write(&k, "Y", 1, true, false); /* unknown append */
	assert_int_equal(k.n, 2);
	assert_true(ln_key_has(&k, "abX", 3) && ln_key_has(&k, "abXY", 4));
	ln_key_write(&k, "12", 2, false, true); /* edit at 0 of both */
	assert_int_equal(k.n, 2);
	assert_true(ln_key_has(&k, "12X", 3) && ln_key_has(&k, "12XY", 4));
	assert_false(ln_key_has(&k, "12", 2)); /* the length counts */
	assert_false(ln_key_may_absent(&k));

	ln_key_set(&k, NULL, 0); /* deleted */
	assert_true(ln_key_may_absent(&k) && !ln_key_may_present(&k));
	ln_key_write(&k, "EDIT", 4, false, true); /* a writer starts empty */
	assert_int_equal(k.n, 1);
	assert_true(ln_key_has(&k, "EDIT", 4));
	ln_key_add(&k, NULL, 0); /* an unknown delete */
	assert_true(ln_key_may_absent(&k) && ln_key_may_present(&k));

	for (int i = 0; i < LN_POSS_MAX + 1; i++) {
		snprintf(v, sizeof(v), "v%d", i);
		ln_key_add(&k, v, strlen(v));
	}
	assert_true(k.wild); /* too many: anything goes */
	assert_true(ln_key_has(&k, "zz", 2));
	ln_key_write(&k, "W", 1, true, true);
	assert_true(k.wild); /* until a put or a delete */
	ln_key_set(&k, "p", 1);
	assert_false(k.wild);
	assert_false(ln_key_has(&k, "zz", 2));
	ln_key_clear(&k);
}

static void test_failover(void **state)
{
	(void)state;
	ln_mode(SMUX_MODE_FAILOVER);
}

static void test_round_robin(void **state)
{
	(void)state;
	ln_mode(SMUX_MODE_ROUND_ROBIN);
}

static void test_weighted(void **state)
{
	(void)state;
	ln_mode(SMUX_MODE_WEIGHTED);
}

static void test_sticky(void **state)
{
	(void)state;
	ln_mode(SMUX_MODE_STICKY);
}

static void test_shield(void **state)
{
	(void)state;
	ln_mode(SMUX_MODE_SHIELD);
}

static void test_mirror(void **state)
{
	(void)state;
	ln_mode(SMUX_MODE_MIRROR);
}

/*
 * The file members' roots on a tmpfs of their own: a rename or unlink on
 * a shared disk can take longer than the mux's deadline (ext4 flushes a
 * file renamed over another), which would add timeouts nobody injected.
 * SMUX_LOSE_NOTHING_MEMBERS=disk keeps them on the disk.
 */
static void ln_members_tmpfs(void)
{
	const char *where = getenv("SMUX_LOSE_NOTHING_MEMBERS");
	char dir[sizeof(ln_members)];

	if (where && strcmp(where, "disk") == 0)
		return;
	snprintf(dir, sizeof(dir), "%s/members", ln_base);
	if (mkdir(dir, 0700) < 0 || mount("smux-ln-members", dir, "tmpfs", 0,
					  "size=256m,mode=0700") < 0)
		return;
	snprintf(ln_members, sizeof(ln_members), "%s", dir);
}

/*
 * Sets up the temporary directories and, as root, a tmpfs of
 * LN_TMPFS_BYTES in a private mount namespace (gone with the process) as
 * $TMPDIR, so the chaos thread can fill it: a real ENOSPC for the mux's
 * spools, copies and replays. Before any thread starts.
 */
/*
 * The private namespace starts as a copy of every mount, FUSE mounts of
 * other processes too: a copy keeps such a filesystem's connection alive
 * after its owner unmounts it in the first namespace, and its daemon waits
 * (for as long as this storm runs) for a FUSE_DESTROY that never comes.
 * Detach them here; with private propagation nothing leaves this namespace.
 */
static void ln_detach_fuse_mounts(void)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;

	if (!f)
		return;
	while ((m = getmntent(f)))
		if (strncmp(m->mnt_type, "fuse", 4) == 0)
			(void)umount2(m->mnt_dir, MNT_DETACH);
	endmntent(f);
}

static void ln_global_setup(void)
{
	char opts[64];

	snprintf(ln_base, sizeof(ln_base), "%s/smux-lose-nothing.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(ln_base)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(ln_members, sizeof(ln_members), "%s", ln_base);
	snprintf(ln_tmpfs, sizeof(ln_tmpfs), "%s/tmpfs", ln_base);
	snprintf(ln_fill, sizeof(ln_fill), "%s/fill", ln_tmpfs);
	snprintf(opts, sizeof(opts), "size=%u,mode=0700", LN_TMPFS_BYTES);
	if (mkdir(ln_tmpfs, 0700) < 0)
		ln_no_tmpfs = "mkdir";
	else if (unshare(CLONE_NEWNS) < 0)
		ln_no_tmpfs = "unshare(CLONE_NEWNS) (not root?)";
	else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		ln_no_tmpfs = "mount --make-rprivate /";
	if (!ln_no_tmpfs) {
		ln_detach_fuse_mounts();
		if (mount("smux-ln", ln_tmpfs, "tmpfs", 0, opts) < 0)
			ln_no_tmpfs = "mount tmpfs";
	}
	if (ln_no_tmpfs) {
		print_message("lose-nothing: no ENOSPC chaos: %s: %s\n",
			      ln_no_tmpfs, strerror(errno));
		ln_tmpfs[0] = '\0';
		return;
	}
	setenv("TMPDIR", ln_tmpfs, 1);
	ln_members_tmpfs();
	print_message("lose-nothing: $TMPDIR is a %u KiB tmpfs at %s; file "
		      "members under %s; hint journals under %s\n",
		      LN_TMPFS_BYTES >> 10, ln_tmpfs, ln_members, ln_base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_failover),
		cmocka_unit_test(test_round_robin),
		cmocka_unit_test(test_weighted),
		cmocka_unit_test(test_sticky),
		cmocka_unit_test(test_shield),
		cmocka_unit_test(test_mirror),
	};
	int rc;

	ln_global_setup();
	rc = cmocka_run_group_tests_name("lose nothing", tests, NULL, NULL);
	if (strcmp(ln_members, ln_base) != 0)
		umount2(ln_members, MNT_DETACH);
	if (ln_tmpfs[0])
		umount2(ln_tmpfs, MNT_DETACH);
	mh_rm_rf(ln_base);
	return rc;
}
