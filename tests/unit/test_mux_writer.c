// SPDX-License-Identifier: MIT
/*
 * test_mux_writer.c - writers through the mux (DESIGN section 6): a mirror
 * fans every pwrite and the commit out to all replica writers; a replica
 * that fails drops out and gets a hint at commit, which repair replays; a
 * shield writer fails with its origin; a failover writer falls through to
 * the next member when the first cannot open one, and the first gets a
 * hint at commit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "mux_helpers.h"

struct wenv {
	struct smux_backend *mem[3], *f[3], *mux;
	struct mh_clock clk;
	struct smux_ctx ctx;
};

static void wenv_init(struct wenv *w, enum smux_mode mode)
{
	struct smux_mux_opts o = {.mode = mode, .cooldown_ms = 100};
	char name[32];

	mh_clock_init(&w->clk, 0);
	o.clock = &w->clk.clock;
	smux_ctx_init(&w->ctx);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "mem%d", i);
		w->mem[i] = mh_memory(name);
		snprintf(name, sizeof(name), "r%d", i);
		w->f[i] = mh_faulty(name, w->mem[i], NULL);
	}
	w->mux = mh_mux("wm", &o, w->f, NULL, 3);
}

static void wenv_release(struct wenv *w)
{
	smux_backend_unref(w->mux);
	for (int i = 0; i < 3; i++) {
		smux_backend_unref(w->f[i]);
		smux_backend_unref(w->mem[i]);
	}
}

/* Makes r@i fail its writer operations only. */
static void writer_fails(struct smux_backend *fb, bool failing)
{
	struct smux_faulty_opts o = {
		.error_rate = failing ? 1.0 : 0.0,
		.ops = 1u << SMUX_FAULTY_WRITER,
	};

	smux_faulty_set(fb, &o);
}

static void test_mirror_writer(void **state)
{
	struct smux_writer *wr = NULL;
	struct smux_error err;
	struct smux_info info;
	unsigned pending;
	char buf[32];
	struct wenv w;

	(void)state;
	wenv_init(&w, SMUX_MODE_MIRROR);
	MH_OK(smux_backend_writer_open(w.mux, &w.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	assert_non_null(wr);
	MH_OK(smux_writer_pwrite(wr, &w.ctx, "hello", 5, 0, &err), &err);
	for (int i = 0; i < 3; i++)
		MH_LACKS(w.mem[i], "doc"); /* nothing before commit */
	MH_OK(smux_writer_commit(wr, &w.ctx, NULL, &info, &err), &err);
	assert_int_equal(info.size, 5);
	for (int i = 0; i < 3; i++)
		MH_HOLDS(w.mem[i], "doc", "hello");
	assert_int_equal(smux_writer_size(wr), 5);
	assert_int_equal(smux_writer_pread(wr, buf, sizeof(buf), 0, &err), 5);
	assert_memory_equal(buf, "hello", 5);

	/* r2's writer fails: it drops out, the others go on */
	writer_fails(w.f[2], true);
	MH_OK(smux_writer_pwrite(wr, &w.ctx, " world", 6, 5, &err), &err);
	MH_OK(smux_writer_commit(wr, &w.ctx, NULL, &info, &err), &err);
	assert_int_equal(info.size, 11);
	MH_HOLDS(w.mem[0], "doc", "hello world");
	MH_HOLDS(w.mem[1], "doc", "hello world");
	MH_HOLDS(w.mem[2], "doc", "hello");
	assert_int_equal(smux_mux_pending_hints(w.mux), 1);
	smux_writer_close(wr);

	writer_fails(w.f[2], false);
	mh_clock_set(&w.clk, 60000);
	MH_OK(smux_mux_repair(w.mux, &w.ctx, NULL, &pending, &err), &err);
	assert_int_equal(pending, 0);
	MH_HOLDS(w.mem[2], "doc", "hello world");
	wenv_release(&w);
}

static void test_shield_writer_origin(void **state)
{
	struct smux_writer *wr = NULL;
	struct smux_error err;
	struct wenv w;

	(void)state;
	wenv_init(&w, SMUX_MODE_SHIELD);
	MH_OK(smux_backend_writer_open(w.mux, &w.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	writer_fails(w.f[0], true);
	assert_true(smux_writer_pwrite(wr, &w.ctx, "x", 1, 0, &err) < 0);
	assert_int_equal(err.e.code, SMUX_E_IO);
	smux_writer_close(wr);
	for (int i = 0; i < 3; i++)
		MH_LACKS(w.mem[i], "doc");

	/* an origin that cannot open a writer fails the open */
	wr = NULL;
	assert_true(smux_backend_writer_open(w.mux, &w.ctx, "doc2", 0, &wr,
					     &err) < 0);
	assert_null(wr);
	wenv_release(&w);
}

static void test_failover_writer(void **state)
{
	struct smux_writer *wr = NULL;
	struct smux_error err;
	unsigned pending;
	struct wenv w;

	(void)state;
	wenv_init(&w, SMUX_MODE_FAILOVER);
	writer_fails(w.f[0], true);
	MH_OK(smux_backend_writer_open(w.mux, &w.ctx, "doc", SMUX_WRITER_TRUNC,
				       &wr, &err),
	      &err);
	MH_OK(smux_writer_pwrite(wr, &w.ctx, "one", 3, 0, &err), &err);
	MH_OK(smux_writer_commit(wr, &w.ctx, NULL, NULL, &err), &err);
	smux_writer_close(wr);
	MH_LACKS(w.mem[0], "doc");
	MH_HOLDS(w.mem[1], "doc", "one");
	MH_LACKS(w.mem[2], "doc");
	/* r0, ahead of r1, missed it: a hint, replayed once r0 is back */
	assert_int_equal(smux_mux_pending_hints(w.mux), 1);
	writer_fails(w.f[0], false);
	mh_clock_set(&w.clk, 60000);
	MH_OK(smux_mux_repair(w.mux, &w.ctx, NULL, &pending, &err), &err);
	assert_int_equal(pending, 0);
	MH_HOLDS(w.mem[0], "doc", "one");
	MH_LACKS(w.mem[2], "doc"); /* a standby behind: not a replica */
	wenv_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mirror_writer),
		cmocka_unit_test(test_shield_writer_origin),
		cmocka_unit_test(test_failover_writer),
	};

	return cmocka_run_group_tests_name("mux writers", tests, NULL, NULL);
}
