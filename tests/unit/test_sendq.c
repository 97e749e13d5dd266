/* SPDX-License-Identifier: MIT */
/*
 * test_sendq.c - the exporters' bounded queue (src/fs/sendq.c):
 *   - while the sender is busy, pushes fill the queue up to its bound and
 *     the next one is dropped at once (freed, counted), never waiting;
 *     stop sends what is queued; every item is freed exactly once;
 *   - items go out in batches of at most `batch`, in push order, and stop
 *     sends a partial batch;
 *   - a send that fails counts its items as failed, not sent.
 * Synchronisation: the test's send waits on a gate the test opens, and
 * the test waits (bounded) for the sender to be inside send.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/sendq.h"

#define MAX_CALLS 16

struct probe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open;
	bool fail;
	unsigned in_send; /* calls that entered send */
	unsigned calls, sizes[MAX_CALLS];
	int order[64];
	unsigned n_order;
	unsigned freed;
};

static struct probe P;

static int setup(void **state)
{
	(void)state;
	memset(&P, 0, sizeof(P));
	pthread_mutex_init(&P.lock, NULL);
	pthread_cond_init(&P.cond, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pthread_cond_destroy(&P.cond);
	pthread_mutex_destroy(&P.lock);
	return 0;
}

static bool probe_send(void *arg, void **items, unsigned n)
{
	bool ok;

	(void)arg;
	pthread_mutex_lock(&P.lock);
	P.in_send++;
	pthread_cond_broadcast(&P.cond);
	while (!P.gate_open)
		pthread_cond_wait(&P.cond, &P.lock);
	if (P.calls < MAX_CALLS)
		P.sizes[P.calls] = n;
	P.calls++;
	for (unsigned i = 0; i < n && P.n_order < 64; i++)
		P.order[P.n_order++] = *(int *)items[i];
	ok = !P.fail;
	pthread_mutex_unlock(&P.lock);
	return ok;
}

static void probe_free(void *item)
{
	pthread_mutex_lock(&P.lock);
	P.freed++;
	pthread_mutex_unlock(&P.lock);
	free(item);
}

static void *item(int v)
{
	int *p = malloc(sizeof(*p));

	assert_non_null(p);
	*p = v;
	return p;
}

/* Waits (at most 10 s: a bound, not a timing assumption) until @n calls
 * have entered send. */
static void wait_in_send(unsigned n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&P.lock);
	while (P.in_send < n &&
	       pthread_cond_timedwait(&P.cond, &P.lock, &until) == 0)
		;
	assert_true(P.in_send >= n);
	pthread_mutex_unlock(&P.lock);
}

static void open_gate(void)
{
	pthread_mutex_lock(&P.lock);
	P.gate_open = true;
	pthread_cond_broadcast(&P.cond);
	pthread_mutex_unlock(&P.lock);
}

static void test_bounded_drop(void **state)
{
	struct smuxfs_sendq_conf c = {.max = 4,
				      .batch = 1,
				      .send = probe_send,
				      .free_item = probe_free};
	struct smuxfs_sendq_counts n;
	struct smuxfs_sendq *q;

	(void)state;
	assert_int_equal(smuxfs_sendq_start(&c, &q), 0);
	assert_true(smuxfs_sendq_push(q, item(0)));
	wait_in_send(1); /* item 0 is out of the queue, held in send */
	for (int i = 1; i <= 4; i++)
		assert_true(smuxfs_sendq_push(q, item(i)));
	assert_false(smuxfs_sendq_push(q, item(5))); /* full */
	smuxfs_sendq_counts(q, &n);
	assert_int_equal(n.dropped, 1);
	assert_int_equal(n.sent, 0);
	assert_int_equal(P.freed, 1); /* the dropped one, at once */
	open_gate();
	smuxfs_sendq_stop(q, &n);
	assert_int_equal(n.sent, 5);
	assert_int_equal(n.dropped, 1);
	assert_int_equal(n.failed, 0);
	assert_int_equal(P.freed, 6);
	assert_int_equal(P.n_order, 5);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(P.order[i], (int)i);
}

static void test_batches(void **state)
{
	struct smuxfs_sendq_conf c = {.max = 16,
				      .batch = 3,
				      .flush_ms =
					      600000, /* never by time here */
				      .send = probe_send,
				      .free_item = probe_free};
	struct smuxfs_sendq_counts n;
	struct smuxfs_sendq *q;

	(void)state;
	open_gate();
	assert_int_equal(smuxfs_sendq_start(&c, &q), 0);
	for (int i = 0; i < 4; i++)
		assert_true(smuxfs_sendq_push(q, item(i)));
	wait_in_send(1); /* a full batch goes without waiting for time */
	smuxfs_sendq_stop(q, &n); /* the partial batch goes at stop */
	assert_int_equal(n.sent, 4);
	assert_int_equal(P.calls, 2);
	assert_int_equal(P.sizes[0], 3);
	assert_int_equal(P.sizes[1], 1);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(P.order[i], (int)i);
	assert_int_equal(P.freed, 4);
}

static void test_failed_send(void **state)
{
	struct smuxfs_sendq_conf c = {.max = 8,
				      .batch = 2,
				      .send = probe_send,
				      .free_item = probe_free};
	struct smuxfs_sendq_counts n;
	struct smuxfs_sendq *q;

	(void)state;
	P.fail = true;
	assert_int_equal(smuxfs_sendq_start(&c, &q), 0);
	assert_true(smuxfs_sendq_push(q, item(1)));
	wait_in_send(1);
	assert_true(smuxfs_sendq_push(q, item(2)));
	assert_true(smuxfs_sendq_push(q, item(3)));
	open_gate();
	smuxfs_sendq_stop(q, &n);
	assert_int_equal(n.sent, 0);
	assert_int_equal(n.failed, 3);
	assert_int_equal(n.failed_sends, 2); /* [1], then [2 3] */
	assert_int_equal(P.freed, 3);
}

static void test_bad_conf(void **state)
{
	struct smuxfs_sendq_conf c = {.max = 0,
				      .batch = 1,
				      .send = probe_send,
				      .free_item = probe_free};
	struct smuxfs_sendq *q;

	(void)state;
	assert_int_equal(smuxfs_sendq_start(&c, &q), -EINVAL);
	assert_null(q);
	smuxfs_sendq_stop(NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bounded_drop, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_send, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_conf, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
