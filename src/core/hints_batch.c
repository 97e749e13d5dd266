/* SPDX-License-Identifier: MIT */
/*
 * hints_batch.c - the hints of one write, recorded at once (hints.h,
 * smux__hints_add_batch).
 *
 * A failover write that lands behind several members hints each of them
 * (mux_failover.c). Recorded one by one, the hints became visible one by
 * one, and in between the rule the replay relies on - the first member
 * without a hint for the key holds its newest version - was false: with
 * the first member's hint visible and the second's not yet, a replay of
 * the first member's hint copied the second member's older version and
 * ended the hint, and the second member's hint, recorded next, was
 * replayed from the first: the acknowledged write was lost on both (the
 * failover soak found it). Here the records of every replica go to the
 * journal in one append (one fdatasync) and into the index under one
 * write lock, so a reader sees all of them or none.
 */
#include <stdlib.h>
#include <time.h>

#include "core/hints_internal.h"

static int64_t batch_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int smux__hints_add_batch(struct smux__hints *h, const char *const *replicas,
			  unsigned n, const char *key,
			  enum smux__hint_kind kind, struct smux_error *err)
{
	struct hints_op op = {0};
	struct hint_entry **e;
	struct jbuf b = {0};
	int64_t now = batch_now_ms();
	unsigned made = 0;
	bool wake = false;
	int rc = 0;

	if (n == 0)
		return 0;
	if (!h || !key || !*key ||
	    (kind != SMUX__HINT_PUT && kind != SMUX__HINT_DEL))
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: bad batch");
	for (unsigned i = 0; i < n; i++)
		if (!replicas[i] || !*replicas[i])
			return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
					      NULL,
					      "hint journal: missing replica");
	e = calloc(n, sizeof(struct hint_entry *)); /* n pointers */
	if (!e)
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
				      "hint journal: out of memory");

	pthread_rwlock_wrlock(&h->lock);
	op.rec = &b;
	for (; made < n; made++) {
		struct hint_replica *rep = hx_get_replica(h, replicas[made]);
		struct hint_entry *old;

		e[made] = rep ? hx_entry_new(rep, key, h->next_id, kind, now)
			      : NULL;
		if (!e[made])
			break;
		/* never reused, even when the append fails (hints.c) */
		h->next_id++;
		old = hx_find_rk(h, rep, key);
		/* each new hint before the done record of the one it
		 * replaces, as smux__hints_add */
		if (hj_add_hint(&b, e[made]) != 0 ||
		    (old && hj_add_done(&b, old->id) != 0)) {
			made++;
			rc = -1;
			break;
		}
		op.lines += old ? 2 : 1;
		op.ndone += old ? 1 : 0;
	}
	if (made < n || rc || hj_queue(h, &op, true) != 0) {
		pthread_rwlock_unlock(&h->lock);
		for (unsigned i = 0; i < made; i++)
			hx_entry_free(e[i]);
		free(e);
		free(b.p);
		return smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
				      "hint journal: out of memory");
	}
	pthread_rwlock_unlock(&h->lock);

	rc = hj_wait(h, &op, err);

	/* all of them at once: one write lock */
	pthread_rwlock_wrlock(&h->lock);
	hj_retire(h, &op);
	for (unsigned i = 0; i < n; i++) {
		struct hint_entry *old;

		if (rc) {
			hx_entry_free(e[i]);
			continue;
		}
		/* as loading does: of two hints of one (replica, key)
		 * queued at once, the later one wins */
		old = hx_find_rk(h, hx_find_replica(h, replicas[i]), key);
		if (old && old->id > e[i]->id) {
			hx_entry_free(e[i]);
			continue;
		}
		if (old)
			hx_entry_unlink(h, old);
		wake |= h->npending == 0; /* see smux__hints_on_pending */
		hx_entry_link(h, e[i]);
	}
	pthread_rwlock_unlock(&h->lock);
	free(e);
	free(b.p);
	if (wake && h->wake)
		h->wake(h->wake_arg);
	if (rc == 0)
		hj_maybe_compact(h, false);
	return rc;
}
