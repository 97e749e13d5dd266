// SPDX-License-Identifier: MIT
/*
 * test_mux_mutate.c - runtime mutation (seed section 8): drain waits for
 * in-flight calls and new requests skip the draining member, undrain,
 * remove, add (and its name conflicts; a replica that keeps fewer file
 * types than its peers), set_weight (its checks, event and effect); a
 * symlink refused where a member keeps none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <unistd.h>

#include "core/mux_internal.h"
#include "mux_helpers.h"

struct slow_get {
	struct smux_backend *mux;
	int rc;
	int64_t done_ns;
	char *got;
};

static void *slow_get_main(void *arg)
{
	struct slow_get *g = arg;
	struct smux_error err;

	g->got = mh_get(g->mux, "k", &g->rc, &err);
	g->done_ns = smux_now_ns();
	return NULL;
}

static unsigned in_flight(struct smux_backend *mux, unsigned i)
{
	struct smux_mux_stats *s = smux_mux_stats(mux);
	unsigned n;

	assert_non_null(s);
	n = s->backends[i].in_flight_count;
	smux_mux_stats_free(s);
	return n;
}

static enum smux_status status_of(struct smux_backend *mux, unsigned i)
{
	struct smux_mux_stats *s = smux_mux_stats(mux);
	enum smux_status st;

	assert_non_null(s);
	st = s->backends[i].status;
	smux_mux_stats_free(s);
	return st;
}

static void test_drain_waits_for_in_flight(void **state)
{
	struct smux_faulty_opts slow = {.latency_ms = 300};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2];
	struct mh_events *ev = mh_events_new();
	struct smux_event started, completed;
	struct slow_get g = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	int64_t t0, drained_ns;
	unsigned long calls;
	pthread_t th;
	int rc;

	(void)state;
	o.events = ev->bus;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	f[0] = mh_faulty("slow", mem, &slow);
	f[1] = mh_faulty("other", mem, NULL);
	g.mux = mh_mux("dr", &o, f, NULL, 2);
	t0 = smux_now_ns();
	assert_int_equal(pthread_create(&th, NULL, slow_get_main, &g), 0);
	for (int i = 0; i < 2000 && in_flight(g.mux, 0) == 0; i++)
		usleep(1000);
	assert_int_equal(in_flight(g.mux, 0), 1);

	smux_ctx_init(&ctx);
	MH_OK(smux_mux_drain(g.mux, "slow", &ctx, &err), &err);
	drained_ns = smux_now_ns();
	/* the get took its 300 ms on the member before drain returned */
	assert_true(drained_ns - t0 >= 280 * MS_NS);
	assert_int_equal(in_flight(g.mux, 0), 0);
	pthread_join(th, NULL);
	MH_OK(g.rc, NULL);
	assert_string_equal(g.got, "v");
	free(g.got);
	assert_true(g.done_ns - t0 >= 280 * MS_NS);

	assert_true(mh_events_last(ev, SMUX_EV_DRAIN_STARTED, &started));
	assert_string_equal(started.name, "slow");
	assert_int_equal(started.in_flight, 1);
	assert_true(mh_events_last(ev, SMUX_EV_DRAIN_COMPLETED, &completed));
	assert_string_equal(completed.name, "slow");
	assert_true(completed.drained_duration_ms >= 200);

	/* new requests skip it; it stays listed as draining */
	assert_int_equal(status_of(g.mux, 0), SMUX_STATUS_DRAINING);
	calls = smux_faulty_calls(f[0]);
	for (int i = 0; i < 10; i++) {
		free(mh_get(g.mux, "k", &rc, &err));
		MH_OK(rc, &err);
		MH_OK(mh_put(g.mux, "k2", "x", &err), &err);
	}
	assert_int_equal(smux_faulty_calls(f[0]), calls);
	assert_int_equal(smux_faulty_calls(f[1]), 20);
	/* it missed the puts of k2: one hint, replayed once it is back */
	assert_int_equal(smux_mux_pending_hints(g.mux), 1);

	/* undrain puts it back first in line */
	MH_OK(smux_mux_undrain(g.mux, "slow", &err), &err);
	assert_int_equal(status_of(g.mux, 0), SMUX_STATUS_UP);
	for (int i = 0; i < 5000 && smux_mux_pending_hints(g.mux); i++)
		usleep(1000);
	assert_int_equal(smux_mux_pending_hints(g.mux), 0);
	calls = smux_faulty_calls(f[0]);
	free(mh_get(g.mux, "k", &rc, &err));
	MH_OK(rc, &err);
	assert_int_equal(smux_faulty_calls(f[0]), calls + 1);
	MH_ERR(smux_mux_drain(g.mux, "nobody", &ctx, &err), &err,
	       SMUX_E_BACKEND_NOT_FOUND);

	smux_backend_unref(g.mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	smux_backend_unref(mem);
	mh_events_free(ev);
}

/* A drain whose caller gives up: BACKEND_ABORTED, the member stays
 * draining (and skipped) until the in-flight call ends. */
static void test_drain_aborted(void **state)
{
	struct smux_faulty_opts slow = {.latency_ms = 300};
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f[2];
	struct slow_get g = {0};
	struct smux_cancel token;
	struct smux_error err;
	struct smux_ctx ctx;
	pthread_t th;

	(void)state;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	f[0] = mh_faulty("slow", mem, &slow);
	f[1] = mh_faulty("other", mem, NULL);
	g.mux = mh_mux("dr", &o, f, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, slow_get_main, &g), 0);
	for (int i = 0; i < 2000 && in_flight(g.mux, 0) == 0; i++)
		usleep(1000);
	smux_cancel_init(&token);
	smux_cancel_fire(&token, SMUX_CANCEL_ABORT);
	smux_ctx_init(&ctx);
	ctx.cancel[0] = &token;
	MH_ERR(smux_mux_drain(g.mux, "slow", &ctx, &err), &err,
	       SMUX_E_BACKEND_ABORTED);
	assert_int_equal(status_of(g.mux, 0), SMUX_STATUS_DRAINING);
	pthread_join(th, NULL);
	MH_OK(g.rc, NULL);
	free(g.got);
	smux_cancel_release(&token);
	smux_backend_unref(g.mux);
	smux_backend_unref(f[0]);
	smux_backend_unref(f[1]);
	smux_backend_unref(mem);
}

static void test_remove(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_backend *m[3], *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_mux_stats *st;
	struct smux_event last;
	struct smux_error err;
	struct smux_ctx ctx;
	char name[32];

	(void)state;
	o.events = ev->bus;
	smux_ctx_init(&ctx);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		m[i] = mh_memory(name);
	}
	mux = mh_mux("rm", &o, m, NULL, 3);
	MH_OK(smux_mux_remove(mux, "m1", &ctx, &err), &err);
	assert_int_equal(mh_events_count(ev, SMUX_EV_DRAIN_STARTED), 1);
	assert_int_equal(mh_events_count(ev, SMUX_EV_DRAIN_COMPLETED), 1);
	assert_true(mh_events_last(ev, SMUX_EV_BACKEND_REMOVED, &last));
	assert_string_equal(last.name, "m1");
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_int_equal(st->n_backends, 2);
	assert_string_equal(st->backends[0].name, "m0");
	assert_string_equal(st->backends[1].name, "m2");
	smux_mux_stats_free(st);
	/* writes no longer reach it, and it got no hint either */
	MH_OK(mh_put(mux, "after", "x", &err), &err);
	MH_HOLDS(m[0], "after", "x");
	MH_HOLDS(m[2], "after", "x");
	MH_LACKS(m[1], "after");
	assert_int_equal(smux_mux_pending_hints(mux), 0);
	MH_ERR(smux_mux_remove(mux, "m1", &ctx, &err), &err,
	       SMUX_E_BACKEND_NOT_FOUND);
	/* the last member stays: a mux of none answers nothing (every
	 * file EIO), and what it held would be out of reach */
	MH_OK(smux_mux_remove(mux, "m0", &ctx, &err), &err);
	MH_ERR(smux_mux_remove(mux, "m2", &ctx, &err), &err,
	       SMUX_E_INVALID_ARGUMENT);
	MH_HOLDS(mux, "after", "x");
	/* the mux dropped its reference: ours is the last one */
	assert_int_equal(atomic_load(&m[1]->refs), 1);
	smux_backend_unref(mux);
	for (int i = 0; i < 3; i++)
		smux_backend_unref(m[i]);
	mh_events_free(ev);
}

static void test_add(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *mem = mh_memory("mem"), *f, *extra, *dup, *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_mux_member m = {0};
	struct smux_event last;
	struct smux_error err;
	struct smux_ctx ctx;
	unsigned pending = 1;
	char *got;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	o.events = ev->bus;
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	f = mh_faulty("first", mem, NULL);
	mh_fail(f, true);
	mux = mh_mux("add", &o, &f, NULL, 1);
	assert_null(mh_get(mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);

	extra = mh_faulty("second", mem, NULL);
	m.backend = extra;
	m.has_weight = true;
	m.weight = 2.5;
	MH_OK(smux_mux_add(mux, &m, &err), &err);
	assert_true(mh_events_last(ev, SMUX_EV_BACKEND_ADDED, &last));
	assert_string_equal(last.name, "second");
	assert_true(last.has_weight);
	assert_true(last.weight == 2.5);
	/* a member added to a mux that replicates is stale for every key
	 * until its resync from a peer (mux_rejoin.c): with its only peer
	 * down it serves nothing it may not hold */
	assert_null(mh_get(mux, "k", &rc, &err));
	MH_ERR(rc, &err, SMUX_E_ALL_BACKENDS_DOWN);
	assert_int_equal(smux_mux_pending_hints(mux), 1);
	/* its peer back (a background replay that failed just before may
	 * mark it down once more: again, a bounded number of times) */
	mh_fail(f, false);
	for (int round = 0; round < 20 && pending; round++) {
		smux_mux_check_health(mux);
		MH_OK(smux_mux_repair(mux, &ctx, NULL, &pending, &err), &err);
	}
	assert_int_equal(pending, 0);
	mh_fail(f, true);
	got = mh_get(mux, "k", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "v");
	free(got);

	/* a second backend of the same name is refused */
	dup = mh_memory("second");
	m.backend = dup;
	MH_ERR(smux_mux_add(mux, &m, &err), &err, SMUX_E_BACKEND_NAME_CONFLICT);
	m.has_weight = true;
	m.weight = -1;
	m.backend = mh_memory("third");
	MH_ERR(smux_mux_add(mux, &m, &err), &err, SMUX_E_INVALID_WEIGHT);
	smux_backend_unref(m.backend);
	assert_int_equal(mh_events_count(ev, SMUX_EV_BACKEND_ADDED), 1);
	smux_backend_unref(dup);
	smux_backend_unref(mux);
	smux_backend_unref(extra);
	smux_backend_unref(f);
	smux_backend_unref(mem);
	mh_events_free(ev);
}

/* A put of a symlink or a FIFO: 0, or the error's code. */
static int put_special(struct smux_backend *b, const char *key, uint32_t mode,
		       struct smux_error *err)
{
	struct smux_put_opts po = {.mode = mode};
	struct smux_source src;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	/* a symlink's body is its target; a FIFO has none */
	smux_source_buf(&src, "target", S_ISLNK(mode) ? 6 : 0);
	return smux_backend_put(b, &ctx, key, &src, &po, NULL, err);
}

/* A faulty wrapper of @inner that hides @caps_off. */
static struct smux_backend *
without(const char *name, struct smux_backend *inner, unsigned caps_off)
{
	struct smux_faulty_opts fo = {.caps_off = caps_off};

	return mh_faulty(name, inner, &fo);
}

/* True when @r has a failed hint.replayed event of @replica whose cause
 * is NOT_SUPPORTED and names @what. */
static bool replay_failed(struct mh_events *r, const char *replica,
			  const char *what)
{
	bool found = false;

	smux_events_flush(r->bus);
	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < r->n && !found; i++)
		found = r->ev[i].topic == SMUX_EV_HINT_REPLAYED &&
			r->ev[i].has_cause &&
			r->ev[i].cause.code == SMUX_E_NOT_SUPPORTED &&
			strcmp(r->ev[i].name, replica) == 0 &&
			strstr(r->ev[i].cause.message, what);
	pthread_mutex_unlock(&r->lock);
	return found;
}

/* True when @b holds @key as a file of type @type. */
static bool holds_type(struct smux_backend *b, const char *key, unsigned type)
{
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	return smux_backend_head(b, &ctx, key, &info, &err) == 0 &&
	       (info.mode & S_IFMT) == type;
}

/*
 * A replica that keeps no symlinks or FIFOs (WebDAV, say) added to a
 * mirror, failover or shield whose tree holds some cannot become whole:
 * its resync stops at the first one, with a failed hint.replayed event
 * naming it, and the replica stays out of reads (stale for every key: it
 * answers for none, so no name reads as absent through it) while the
 * members that keep them serve them. The mux keeps no new ones from then
 * on. (docs/operations.md: remove it, or use rclone_links on WebDAV.)
 */
static void test_add_member_keeping_fewer_types(void **state)
{
	static const enum smux_mode modes[] = {
		SMUX_MODE_MIRROR, SMUX_MODE_FAILOVER, SMUX_MODE_SHIELD};

	(void)state;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct smux_mux_opts o = {.mode = modes[i]};
		struct smux_backend *a = mh_memory("a"), *dm = mh_memory("dm");
		struct smux_backend *dav =
			without("dav", dm, SMUX_CAP_SYMLINK | SMUX_CAP_FIFO);
		struct mh_events *ev = mh_events_new();
		struct smux_mux_member m = {.backend = dav};
		struct smux_backend *mux;
		struct smux_error err;
		struct mh_clock clk;

		mh_clock_init(&clk, 10000);
		o.clock = &clk.clock;
		o.events = ev->bus;
		mux = mh_mux("types", &o, &a, NULL, 1);
		smux__mux_bg_stop(smux__mux_of(mux));
		MH_OK(mh_put(mux, "d/k", "v", &err), &err);
		MH_OK(put_special(mux, "d/ln", S_IFLNK | 0777, &err), &err);

		MH_OK(smux_mux_add(mux, &m, &err), &err);
		assert_int_equal(mh_repair(mux, &clk, 5), 1);
		assert_true(replay_failed(ev, "dav", "\"d/ln\""));
		assert_false(holds_type(dm, "d/ln", S_IFLNK));
		/* served by a, never "not found" through dav */
		assert_true(holds_type(mux, "d/ln", S_IFLNK));
		assert_true(holds_type(mux, "d/k", S_IFREG));
		MH_HOLDS(mux, "d/k", "v");
		assert_false(smux_backend_caps(mux) & SMUX_CAP_SYMLINK);
		MH_ERR(put_special(mux, "ln2", S_IFLNK | 0777, &err), &err,
		       SMUX_E_NOT_SUPPORTED);

		smux_backend_unref(mux);
		smux_backend_unref(dav);
		smux_backend_unref(dm);
		smux_backend_unref(a);
		mh_events_free(ev);
	}
}

/* A delete of @key through @b: 0, or the error's code. */
static int del_key(struct smux_backend *b, const char *key,
		   struct smux_error *err)
{
	struct smux_ctx ctx;

	smux_ctx_init(&ctx);
	return smux_backend_del(b, &ctx, key, err);
}

/*
 * A mirror (or shield) of a member whose listings show dot names and one
 * whose do not (nginx's WebDAV), the first out: no member up can say
 * whether the directory holds dot names, and its removal goes on as
 * before (availability; the limit is in docs/operations.md).
 */
static void test_rmdir_dotnames_unseen(void **state)
{
	static const enum smux_mode modes[] = {SMUX_MODE_MIRROR,
					       SMUX_MODE_SHIELD};

	(void)state;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct smux_mux_opts o = {.mode = modes[i]};
		struct smux_backend *s3 = mh_memory("s3"),
				    *dm = mh_memory("dm");
		struct smux_backend *ms[2] = {
			s3, without("dav", dm, SMUX_CAP_LISTS_DOTNAMES)};
		struct smux_backend *mux = mh_mux("dots", &o, ms, NULL, 2);
		struct smux_error err;
		struct smux_ctx ctx;

		smux_ctx_init(&ctx);
		MH_OK(mh_put(mux, "d/", "", &err), &err);
		MH_OK(mh_put(mux, "d/.hidden", "secret", &err), &err);
		MH_OK(smux_mux_drain(mux, "s3", &ctx, &err), &err);
		/* no member that shows dot names is up: it goes on (a
		 * refusal would fail every rm -r while S3 is out) */
		MH_OK(del_key(mux, "d/", &err), &err);
		MH_HOLDS(s3, "d/.hidden", "secret");
		MH_OK(smux_mux_undrain(mux, "s3", &err), &err);
		MH_OK(del_key(mux, "d/.hidden", &err), &err);
		MH_LACKS(s3, "d/.hidden");
		smux_backend_unref(mux);
		smux_backend_unref(ms[1]);
		smux_backend_unref(dm);
		smux_backend_unref(s3);
	}
}

/*
 * The same with a third member that lists dot names and is up: in shield
 * the listing came from the first member up (the WebDAV one) all the
 * same, so the third is asked whether the directory holds anything: the
 * removal is refused while it holds the .hidden, and done once it is gone.
 * With every member up, the first (s3) gave the listing: no question.
 */
static void test_rmdir_dotnames_asked(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_SHIELD};
	struct smux_backend *s3 = mh_memory("s3"), *dm = mh_memory("dm");
	struct smux_backend *f = mh_memory("f");
	struct smux_backend *ms[3] = {
		s3, without("dav", dm, SMUX_CAP_LISTS_DOTNAMES), f};
	struct smux_backend *mux = mh_mux("dots3", &o, ms, NULL, 3);
	struct smux_error err;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	MH_OK(mh_put(mux, "d/", "", &err), &err);
	MH_OK(mh_put(mux, "d/.hidden", "secret", &err), &err);
	MH_OK(mh_put(mux, "e/", "", &err), &err);
	MH_OK(smux_mux_drain(mux, "s3", &ctx, &err), &err);
	MH_ERR(del_key(mux, "d/", &err), &err, SMUX_E_NOT_EMPTY);
	MH_HOLDS(f, "d/.hidden", "secret");
	MH_OK(del_key(mux, "d/.hidden", &err), &err);
	MH_OK(del_key(mux, "d/", &err), &err);
	MH_LACKS(f, "d/");
	MH_OK(smux_mux_undrain(mux, "s3", &err), &err);
	MH_OK(del_key(mux, "e/", &err), &err);
	smux_backend_unref(mux);
	smux_backend_unref(ms[1]);
	smux_backend_unref(f);
	smux_backend_unref(dm);
	smux_backend_unref(s3);
}

/* A mux with a member that keeps no symlinks refuses a symlink on every
 * member (one backend refuses it the same way): nothing stored, no hint
 * that no replay could end. A FIFO, which it keeps, goes to both. */
static void test_put_refused_where_a_member_keeps_none(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_MIRROR};
	struct smux_backend *a = mh_memory("a"), *bm = mh_memory("bm");
	struct smux_backend *ms[2] = {a, without("b", bm, SMUX_CAP_SYMLINK)};
	struct smux_backend *mux = mh_mux("refuse", &o, ms, NULL, 2);
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;

	(void)state;
	smux_ctx_init(&ctx);
	assert_false(smux_backend_caps(mux) & SMUX_CAP_SYMLINK);
	MH_ERR(put_special(mux, "ln", S_IFLNK | 0777, &err), &err,
	       SMUX_E_NOT_SUPPORTED);
	assert_non_null(strstr(err.e.message, "keeps no symlinks"));
	MH_ERR(smux_backend_head(a, &ctx, "ln", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	MH_ERR(smux_backend_head(bm, &ctx, "ln", &info, &err), &err,
	       SMUX_E_KEY_NOT_FOUND);
	assert_int_equal(smux_mux_pending_hints(mux), 0);
	MH_OK(put_special(mux, "fifo", S_IFIFO | 0644, &err), &err);
	MH_OK(smux_backend_head(a, &ctx, "fifo", &info, &err), &err);
	assert_int_equal(info.mode & S_IFMT, S_IFIFO);
	MH_OK(smux_backend_head(bm, &ctx, "fifo", &info, &err), &err);
	assert_int_equal(info.mode & S_IFMT, S_IFIFO);
	smux_backend_unref(mux);
	smux_backend_unref(ms[1]);
	smux_backend_unref(bm);
	smux_backend_unref(a);
}

/* A failover's member switched (added beside the old one while that one
 * could not resync it, the old one removed): the new one has nothing to
 * resync from, ever, and serves at once - writes right after a reload
 * that switched a failover's member failed (EIO: stale for every key)
 * until the background repair's next pass (test_linger, 2 runs in 4). */
static void test_switch_failover_member(void **state)
{
	struct smux_mux_opts o = {.mode = SMUX_MODE_FAILOVER};
	struct smux_backend *old = mh_memory("old"), *f, *nw, *mux;
	struct smux_mux_member m = {0};
	struct smux_error err;
	struct smux_ctx ctx;
	char *got;
	int rc;

	(void)state;
	smux_ctx_init(&ctx);
	f = mh_faulty("a", old, NULL);
	mux = mh_mux("sw", &o, &f, NULL, 1);
	MH_OK(mh_put(mux, "k", "v", &err), &err);
	mh_fail(f, true); /* no resync of the new one from it */
	nw = mh_memory("r");
	m.backend = nw;
	MH_OK(smux_mux_add(mux, &m, &err), &err);
	MH_OK(smux_mux_remove(mux, "a", &ctx, &err), &err);
	/* at once: no repair pass in between */
	MH_OK(mh_put(mux, "new", "w", &err), &err);
	got = mh_get(mux, "new", &rc, &err);
	MH_OK(rc, &err);
	assert_string_equal(got, "w");
	free(got);
	assert_int_equal(smux_mux_pending_hints(mux), 0);
	smux_backend_unref(mux);
	smux_backend_unref(nw);
	smux_backend_unref(f);
	smux_backend_unref(old);
}

static void test_set_weight(void **state)
{
	static const double w[3] = {1, 1, 1};
	struct smux_mux_opts o = {.mode = SMUX_MODE_WEIGHTED};
	struct smux_backend *mem = mh_memory("mem"), *f[3], *mux;
	struct mh_events *ev = mh_events_new();
	struct smux_mux_stats *st;
	struct smux_event last;
	struct smux_error err;
	struct smux_info info;
	struct smux_ctx ctx;
	unsigned long before;
	char name[32];

	(void)state;
	o.events = ev->bus;
	smux_ctx_init(&ctx);
	MH_OK(mh_put(mem, "k", "v", &err), &err);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		f[i] = mh_faulty(name, mem, NULL);
	}
	mux = mh_mux("sw", &o, f, w, 3);
	MH_ERR(smux_mux_set_weight(mux, "w0", -1, &err), &err,
	       SMUX_E_INVALID_WEIGHT);
	MH_ERR(smux_mux_set_weight(mux, "w0", NAN, &err), &err,
	       SMUX_E_INVALID_WEIGHT);
	MH_ERR(smux_mux_set_weight(mux, "w0", INFINITY, &err), &err,
	       SMUX_E_INVALID_WEIGHT);
	MH_ERR(smux_mux_set_weight(mux, "nobody", 1, &err), &err,
	       SMUX_E_BACKEND_NOT_FOUND);
	assert_int_equal(mh_events_count(ev, SMUX_EV_WEIGHT_CHANGED), 0);

	MH_OK(smux_mux_set_weight(mux, "w0", 0, &err), &err);
	assert_true(mh_events_last(ev, SMUX_EV_WEIGHT_CHANGED, &last));
	assert_string_equal(last.name, "w0");
	assert_true(last.weight_from == 1);
	assert_true(last.weight_to == 0);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_true(st->backends[0].has_weight);
	assert_true(st->backends[0].weight == 0);
	smux_mux_stats_free(st);
	before = smux_faulty_calls(f[0]);
	for (int i = 0; i < 1000; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_int_equal(smux_faulty_calls(f[0]), before);
	/* never every weight 0: a weighted mux would draw no member (every
	 * call EIO), what the config file refuses too */
	MH_OK(smux_mux_set_weight(mux, "w1", 0, &err), &err);
	MH_ERR(smux_mux_set_weight(mux, "w2", 0, &err), &err,
	       SMUX_E_INVALID_WEIGHT);
	st = smux_mux_stats(mux);
	assert_non_null(st);
	assert_true(st->backends[2].weight == 1);
	smux_mux_stats_free(st);
	MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	MH_OK(smux_mux_set_weight(mux, "w1", 1, &err), &err);

	/* and back: it is drawn again */
	MH_OK(smux_mux_set_weight(mux, "w0", 8, &err), &err);
	for (int i = 0; i < 1000; i++)
		MH_OK(smux_backend_head(mux, &ctx, "k", &info, &err), &err);
	assert_in_range(smux_faulty_calls(f[0]) - before, 700, 900);
	smux_backend_unref(mux);
	for (int i = 0; i < 3; i++)
		smux_backend_unref(f[i]);
	smux_backend_unref(mem);
	mh_events_free(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drain_waits_for_in_flight),
		cmocka_unit_test(test_drain_aborted),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_add_member_keeping_fewer_types),
		cmocka_unit_test(test_put_refused_where_a_member_keeps_none),
		cmocka_unit_test(test_rmdir_dotnames_unseen),
		cmocka_unit_test(test_rmdir_dotnames_asked),
		cmocka_unit_test(test_switch_failover_member),
		cmocka_unit_test(test_set_weight),
	};

	return cmocka_run_group_tests_name("mux mutation", tests, NULL, NULL);
}
