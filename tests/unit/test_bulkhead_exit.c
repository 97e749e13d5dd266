/* SPDX-License-Identifier: MIT */
/*
 * test_bulkhead_exit.c - the process exits while a bulkhead's orphan (a
 * worker left inside a member call by smux__bulkhead_free) is ending
 * (core/bulkhead_orphans.c).
 *
 * CI's ASan lane once failed at an unmount: a health probe's worker, hung
 * on a server that never answers, came back just as the daemon exited and
 * was running its thread-local destructors (OpenSSL's per-thread error
 * state from curl); LeakSanitizer reported that state. Here the member's
 * call sets a thread-local value whose destructor is slow, like OpenSSL's,
 * and each case runs in a forked child that returns from main at the
 * worst moment. The child's exit must wait for an orphan that is already
 * ending (its destructor completes), and an orphan that comes back from its
 * call after the exit began must not start ending at all.
 *
 * Not in TSAN_TESTS: ThreadSanitizer refuses threads in a child forked
 * from a threaded process.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/bulkhead.h"
#include "support/fork_child.h"

/* What the child reports on this pipe, one byte each. */
#define SAW_DTOR_DONE 'D' /* a destructor completed */
#define SAW_NO_DTOR   'P' /* the orphan did not start ending (parked) */
#define SAW_DTOR_RAN  'X' /* the orphan ended after the exit began */

static int report_fd = -1;
static int gate[2]; /* the member's call blocks reading gate[0] */
static pthread_key_t tls_key;
static atomic_int in_dtor;

/* Writes @c to the parent, or exits with @status. */
static void report(char c, int status)
{
	if (write(report_fd, &c, 1) != 1)
		_exit(status);
}

/* Slow, like OpenSSL's release of its per-thread error state. */
static void tls_destructor(void *value)
{
	atomic_store(&in_dtor, 1);
	usleep(300 * 1000);
	free(value);
	report(SAW_DTOR_DONE, 90);
}

/* The member's only call: blocks until the gate opens, then leaves a
 * thread-local value behind, as curl over OpenSSL does. */
static int gated_head(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_info *info,
		      struct smux_error *err)
{
	char c;

	while (read(gate[0], &c, 1) < 0 && errno == EINTR)
		;
	pthread_setspecific(tls_key, malloc(904));
	return smux_error_set(err, SMUX_E_KEY_NOT_FOUND, b->name, "no %s", key);
}

static void gated_destroy(struct smux_backend *b)
{
	smux_backend_release(b);
	free(b);
}

static const struct smux_backend_ops gated_ops = {
	.kind = "gated",
	.head = gated_head,
	.destroy = gated_destroy,
};

/* In the child: a member call times out and its bulkhead is freed, which
 * leaves the worker blocked in the call: an orphan. */
static void make_orphan(void)
{
	struct smux_backend *b = calloc(1, sizeof(*b));
	struct smux__bulkhead *bh = smux__bulkhead_new("gated", 1);
	struct smux_info info;
	struct smux__call c = {.op = SMUX__OP_HEAD, .key = "k", .info = &info};

	if (!b || !bh || smux_backend_init(b, &gated_ops, "gated"))
		_exit(91);
	c.backend = b;
	if (smux__bulkhead_run(bh, NULL, 50, &c, NULL) !=
	    -smux_code_errno(SMUX_E_BACKEND_TIMEOUT))
		_exit(92);
	smux__bulkhead_free(bh);
	smux_backend_unref(b); /* the orphan's job holds the last one */
}

static void open_gate(void)
{
	if (write(gate[1], "x", 1) != 1)
		_exit(93);
}

/* Runs @child in a forked child (its report pipe, the gate and the
 * thread-local key made first) and returns what it reported. */
static void (*case_child)(void);

static void child_main(int fd)
{
	report_fd = fd;
	if (pipe(gate) || pthread_key_create(&tls_key, tls_destructor))
		_exit(94);
	case_child(); /* returns from main through exit() */
}

static void run_child(void (*child)(void), char *got, size_t cap)
{
	case_child = child;
	fc_run_child(child_main, got, cap);
}

/* The orphan comes back and is in its destructor when the process exits:
 * the exit waits for it. */
static void child_exits_while_ending(void)
{
	make_orphan();
	open_gate();
	while (!atomic_load(&in_dtor))
		usleep(1000);
	exit(0);
}

static void test_exit_waits_for_ending_orphan(void **state)
{
	char got[8];

	run_child(child_exits_while_ending, got, sizeof(got));
	assert_string_equal(got, "D");
}

/* An exit handler registered before the orphan exists, so it runs after
 * the library's (atexit runs them in reverse): the exit has begun; the
 * orphan comes back from its call now and must park, not end. */
static void late_return_at_exit(void)
{
	open_gate();
	usleep(400 * 1000); /* longer than the destructor takes */
	report(atomic_load(&in_dtor) ? SAW_DTOR_RAN : SAW_NO_DTOR, 96);
}

static void child_exits_while_stuck(void)
{
	atexit(late_return_at_exit);
	make_orphan();
	exit(0);
}

static void test_late_orphan_parks_at_exit(void **state)
{
	char got[8];

	run_child(child_exits_while_stuck, got, sizeof(got));
	assert_string_equal(got, "P");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_waits_for_ending_orphan),
		cmocka_unit_test(test_late_orphan_parks_at_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
