/* SPDX-License-Identifier: MIT */
/*
 * mux_fence.c - user writes and hint replays of one (replica, key) never
 * overlap (mux_internal.h).
 *
 * A replay (mux_repair.c) checks that its hint is still pending and then
 * puts (or deletes) the key on the replica. A user write that reached the
 * replica between the two would be overwritten by the older copy, and its
 * supersede would have removed the hint that could repair it. The fence
 * closes that window: a replay's section (check, write, xattrs) and a user
 * write's calls on the member (up to its smux__replica_wrote) exclude each
 * other per (member, key). A write that lands first supersedes the hint
 * before the replay checks; a write that comes later waits and lands on
 * top of the replay's copy.
 *
 * Pairs hash into SMUX__FENCE_BUCKETS buckets, each with a count of fenced
 * writers and of replays in their section, under fence_lock. A writer
 * fences all its members' buckets at once, and only when none has a
 * replay: a writer never holds one bucket while it waits for another, and
 * a replay holds its bucket (those of the other names of a file of
 * several names too, entered one after another: mux_repair.c
 * same_group) and waits only for writers, which wait for nothing while
 * they hold buckets - no cycle. (Nothing but a health probe: a write
 * that failed everywhere waits, fenced, for a probe under way, bounded
 * by the backend timeout; a replay that is its member's probe reports
 * it before it fences another name.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/mux_internal.h"

_Atomic(smux__replay_check_fn) smux__replay_check_hook;
_Atomic(smux__fence_wait_fn) smux__fence_wait_hook;
_Atomic(smux__fence_wait_fn) smux__replay_wait_hook;

static unsigned bucket(const struct mux_member *m, const char *key)
{
	uint64_t x = 0xcbf29ce484222325ULL ^ m->index;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		x ^= *p;
		x *= 0x100000001b3ULL;
	}
	x ^= x >> 29;
	return (unsigned)(x & (SMUX__FENCE_BUCKETS - 1));
}

/* Whether a replay is in the section of a bucket of @ms x {@key, @key2};
 * caller holds fence_lock. */
static bool replay_in(const struct smux_mux *mux, struct mux_member *const *ms,
		      unsigned n, const char *key, const char *key2)
{
	for (unsigned i = 0; i < n; i++)
		if (mux->fence_replays[bucket(ms[i], key)] ||
		    (key2 && mux->fence_replays[bucket(ms[i], key2)]))
			return true;
	return false;
}

/* Adds @d to the writer count of every bucket of @ms x {@key, @key2};
 * caller holds fence_lock. */
static void count_writers(struct smux_mux *mux, struct mux_member *const *ms,
			  unsigned n, const char *key, const char *key2, int d)
{
	for (unsigned i = 0; i < n; i++) {
		mux->fence_writers[bucket(ms[i], key)] += (unsigned)d;
		if (key2)
			mux->fence_writers[bucket(ms[i], key2)] += (unsigned)d;
	}
}

void smux__write_fence(struct smux_mux *mux, struct mux_member *const *ms,
		       unsigned n, const char *key, const char *key2)
{
	bool hooked = false;

	if (!key)
		return;
	pthread_mutex_lock(&mux->fence_lock);
	while (replay_in(mux, ms, n, key, key2)) {
		smux__fence_wait_fn hook = atomic_load(&smux__fence_wait_hook);

		if (hook && !hooked) {
			hooked = true;
			pthread_mutex_unlock(&mux->fence_lock);
			hook(mux, key);
			pthread_mutex_lock(&mux->fence_lock);
			continue;
		}
		pthread_cond_wait(&mux->fence_cond, &mux->fence_lock);
	}
	count_writers(mux, ms, n, key, key2, 1);
	pthread_mutex_unlock(&mux->fence_lock);
}

void smux__write_unfence(struct smux_mux *mux, struct mux_member *const *ms,
			 unsigned n, const char *key, const char *key2)
{
	if (!key)
		return;
	pthread_mutex_lock(&mux->fence_lock);
	count_writers(mux, ms, n, key, key2, -1);
	pthread_cond_broadcast(&mux->fence_cond);
	pthread_mutex_unlock(&mux->fence_lock);
}

void smux__replica_wrote(struct smux_mux *mux, struct mux_member *m,
			 const char *key)
{
	if (smux__member_stale(mux, m, key))
		smux__hints_supersede(mux->hints, m->name, key, NULL);
	/* a rejoining member holds this key's latest version now */
	if (smux__rejoining(mux, m))
		smux__fresh_mark(mux, m->name, key);
	/* a member holds a newer write than the one that left with a
	 * removed replica (mux_departed.c) */
	smux__departed_forget_key(mux, key);
}

void smux__replay_fence_enter(struct smux_mux *mux, struct mux_member *m,
			      const char *key)
{
	unsigned b = bucket(m, key);

	smux__fence_wait_fn hook = atomic_load(&smux__replay_wait_hook);

	pthread_mutex_lock(&mux->fence_lock);
	/* counted first: writers that come now wait for this replay */
	mux->fence_replays[b]++;
	if (hook && mux->fence_writers[b] > 0) {
		pthread_mutex_unlock(&mux->fence_lock);
		hook(mux, key);
		pthread_mutex_lock(&mux->fence_lock);
	}
	while (mux->fence_writers[b] > 0)
		pthread_cond_wait(&mux->fence_cond, &mux->fence_lock);
	pthread_mutex_unlock(&mux->fence_lock);
}

int smux__replay_blocked(struct smux_mux *mux, const char *key,
			 struct smux_error *err)
{
	if (!smux__intent_busy(mux, key))
		return 0;
	return smux_error_set(err, SMUX_E_PRECONDITION_FAILED, mux->base.name,
			      "an in-place writer of \"%s\" is open: "
			      "replayed once it is closed",
			      key);
}

void smux__fence_wait_replays(struct smux_mux *mux, const char *key)
{
	struct mux_view *v = smux__view_get(mux);
	bool busy;

	pthread_mutex_lock(&mux->fence_lock);
	do {
		busy = false;
		for (unsigned i = 0; i < v->n && !busy; i++)
			busy = mux->fence_replays[bucket(v->m[i], key)] > 0;
		if (busy)
			pthread_cond_wait(&mux->fence_cond, &mux->fence_lock);
	} while (busy);
	pthread_mutex_unlock(&mux->fence_lock);
	smux__view_put(v);
}

void smux__replay_fence_exit(struct smux_mux *mux, struct mux_member *m,
			     const char *key)
{
	pthread_mutex_lock(&mux->fence_lock);
	mux->fence_replays[bucket(m, key)]--;
	pthread_cond_broadcast(&mux->fence_cond);
	pthread_mutex_unlock(&mux->fence_lock);
}
