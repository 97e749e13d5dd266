/* SPDX-License-Identifier: MIT */
/*
 * mux_zombie.c - member calls the mux gave up on that may still land
 * (issue 9, "zombie writes").
 *
 * A member call that hangs past its deadline is abandoned by its bulkhead:
 * the caller is answered, the worker thread stays in the call. When the
 * hang ignores cancellation (a thread stuck in a system call, a request
 * already on the wire) the call can still complete later - a put, delete,
 * rename, setattr, a writer's pwrite or commit lands on the member after
 * the mux answered, recorded a hint for that member, and maybe after the
 * repair replayed the hint or a newer write reached the member. The
 * replica would then hold old content with no hint left.
 *
 * So every member's bulkhead reports such calls here
 * (smux__bulkhead_set_zombie_hooks): from the moment the caller stops
 * waiting for a mutating call until the worker is over with it, the
 * (member, key) pair - both keys of a rename - is registered, and:
 *  - no mutating call of the mux goes to that member for that key (the
 *    sequential walk and single-target writers pass over it, as over a
 *    pending hint: failover and sticky-by-key write elsewhere and hint it;
 *    a fan-out leaves it out and hints it, mux_fanout.c);
 *  - in mirror and shield the member counts as stale for that key
 *    (smux__member_stale: reads and the fan-out's eligibility skip it);
 *  - the repair and the rejoin resync leave that pair alone (the next
 *    pass gets it);
 *  - when the zombie ends, the pair gets a hint again if it no longer has
 *    one (its content is unknown now), so the repair makes it identical
 *    with the newest copy - unless the member is the holder of the key
 *    (failover, sticky-by-key: the first member without a hint has the
 *    latest version; the zombie's content, from a write that was not
 *    acknowledged, is the key's now) or, in mirror and shield, no other
 *    member could give the key and some wait for a copy of it (they copy
 *    from this one).
 *
 * Round-robin and weighted (smux__zombie_shared): the members are paths to
 * ONE store, so a zombie on one member changes the key for all of them. A
 * zombie of a key there blocks the key on every member (not only its
 * own), and a mutating call of the key first waits for the key's zombies
 * to end (smux__zombie_wait, bounded by the call's deadline or
 * backend_timeout): a write acknowledged while an older abandoned write
 * of the key may still land would be replaced by it. When the wait runs
 * out the call is refused (nothing was sent; the key is writable again
 * once the abandoned call returns or its worker gives it up).
 *
 * The registry is a short list (empty in the normal case): the read path
 * checks an atomic count first and takes the read lock only while a
 * zombie runs. The registry outlives the mux while a zombie still runs
 * (members' bulkheads hold references): a zombie that ends after the mux
 * is gone records nothing (the hint its caller recorded is in the
 * journal).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/mux_internal.h"

/* One (member, key) pair with zombies running; in the registry's list. */
struct zombie {
	char *replica;
	char *key;
	unsigned n; /* zombies of this pair running */
	/* of them, ones that may have made the object there (not edits of
	 * one that was: smux__zombie_hooks) */
	unsigned makes;
	struct zombie *next;
};

struct smux__zombies {
	atomic_int refs;     /* the mux, each bulkhead, each running zombie */
	atomic_uint running; /* sum of n over the list (lock-free check) */
	pthread_rwlock_t lock;
	struct zombie *list; /* protected by lock */
	/* serialises the ends (the hint decisions) and the detach */
	pthread_mutex_t end_lock;
	struct smux_mux *mux; /* protected by end_lock; NULL once detached */
	/* smux__zombie_wait: a waiter checks and sleeps under wait_lock, an
	 * end broadcasts wait_cond under it after its delist */
	pthread_mutex_t wait_lock;
	pthread_cond_t wait_cond; /* CLOCK_MONOTONIC */
};

/* What begin hands the bulkhead: one zombie call. */
struct zombie_ticket {
	struct smux__zombies *z; /* a reference */
	char *replica;
	char *key[2]; /* key[1] may be NULL */
};

_Atomic(smux__zombie_fn) smux__zombie_hook_handoff;
_Atomic(smux__zombie_fn) smux__zombie_hook_end;
void (*smux__zombie_hook_wait)(struct smux_mux *mux, const char *key);
void (*smux__zombie_hook_begin)(const char *replica, const char *key);
void (*smux__zombie_hook_rehint)(struct smux_mux *mux, const char *replica,
				 const char *key);

static void zombies_put(struct smux__zombies *z)
{
	if (!z || atomic_fetch_sub(&z->refs, 1) != 1)
		return;
	while (z->list) {
		struct zombie *e = z->list;

		z->list = e->next;
		free(e->replica);
		free(e->key);
		free(e);
	}
	pthread_rwlock_destroy(&z->lock);
	pthread_mutex_destroy(&z->end_lock);
	pthread_mutex_destroy(&z->wait_lock);
	pthread_cond_destroy(&z->wait_cond);
	free(z);
}

int smux__zombies_init(struct smux_mux *mux)
{
	struct smux__zombies *z = calloc(1, sizeof(*z));
	pthread_condattr_t ca;

	if (!z)
		return -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&z->wait_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&z->wait_lock, NULL);
	atomic_init(&z->refs, 1);
	atomic_init(&z->running, 0);
	pthread_rwlock_init(&z->lock, NULL);
	pthread_mutex_init(&z->end_lock, NULL);
	z->mux = mux;
	mux->zombies = z;
	return 0;
}

void smux__zombies_detach(struct smux_mux *mux)
{
	struct smux__zombies *z = mux->zombies;

	if (!z)
		return;
	pthread_mutex_lock(&z->end_lock);
	z->mux = NULL;
	pthread_mutex_unlock(&z->end_lock);
	mux->zombies = NULL;
	zombies_put(z);
}

/* Caller holds z->lock (read or write). */
static struct zombie *find(struct smux__zombies *z, const char *replica,
			   const char *key)
{
	for (struct zombie *e = z->list; e; e = e->next)
		if (strcmp(e->key, key) == 0 &&
		    strcmp(e->replica, replica) == 0)
			return e;
	return NULL;
}

/* Caller holds z->lock: a zombie of @key on any member. */
static bool find_key(struct smux__zombies *z, const char *key)
{
	for (struct zombie *e = z->list; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return true;
	return false;
}

bool smux__zombie_shared(const struct smux_mux *mux)
{
	return mux->mode == SMUX_MODE_ROUND_ROBIN ||
	       mux->mode == SMUX_MODE_WEIGHTED;
}

/* Counts one zombie of (@replica, @key) (@makes: one that may make the
 * object there); false on ENOMEM. */
static bool enlist(struct smux__zombies *z, const char *replica,
		   const char *key, bool makes)
{
	struct zombie *e;
	bool ok = true;

	pthread_rwlock_wrlock(&z->lock);
	e = find(z, replica, key);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->replica = strdup(replica);
			e->key = strdup(key);
		}
		if (!e || !e->replica || !e->key) {
			if (e) {
				free(e->replica);
				free(e->key);
				free(e);
			}
			ok = false;
			goto out;
		}
		e->next = z->list;
		z->list = e;
	}
	e->n++;
	e->makes += makes;
	atomic_fetch_add(&z->running, 1);
out:
	pthread_rwlock_unlock(&z->lock);
	return ok;
}

/* Ends one zombie of (@replica, @key); true when it was the pair's last. */
static bool delist(struct smux__zombies *z, const char *replica,
		   const char *key)
{
	struct zombie **pp, *e;
	bool last = false;

	pthread_rwlock_wrlock(&z->lock);
	for (pp = &z->list; (e = *pp); pp = &e->next) {
		if (strcmp(e->key, key) != 0 ||
		    strcmp(e->replica, replica) != 0)
			continue;
		atomic_fetch_sub(&z->running, 1);
		if (--e->n == 0) {
			*pp = e->next;
			free(e->replica);
			free(e->key);
			free(e);
			last = true;
		}
		break;
	}
	pthread_rwlock_unlock(&z->lock);
	return last;
}

/* True when the zombie of (@replica, @key) about to end is the pair's
 * last one running; *@made: one of the pair's may have made the object
 * there. */
static bool pair_last(struct smux__zombies *z, const char *replica,
		      const char *key, bool *made)
{
	struct zombie *e;
	bool last = false;

	*made = false;
	pthread_rwlock_rdlock(&z->lock);
	for (e = z->list; e; e = e->next)
		if (strcmp(e->key, key) == 0 &&
		    strcmp(e->replica, replica) == 0) {
			last = e->n == 1;
			*made = e->makes > 0;
			break;
		}
	pthread_rwlock_unlock(&z->lock);
	return last;
}

static void ticket_free(struct zombie_ticket *t)
{
	free(t->replica);
	free(t->key[0]);
	free(t->key[1]);
	free(t);
}

static void *zombie_begin(void *arg, const char *member, const char *key,
			  const char *key2, bool edit)
{
	struct smux__zombies *z = arg;
	struct zombie_ticket *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->replica = strdup(member);
	t->key[0] = strdup(key);
	t->key[1] = key2 ? strdup(key2) : NULL;
	if (!t->replica || !t->key[0] || (key2 && !t->key[1]))
		goto out_free;
	if (!enlist(z, t->replica, t->key[0], !edit))
		goto out_free;
	if (t->key[1] && !enlist(z, t->replica, t->key[1], !edit)) {
		delist(z, t->replica, t->key[0]);
		goto out_free;
	}
	atomic_fetch_add(&z->refs, 1);
	t->z = z;
	if (smux__zombie_hook_begin) {
		smux__zombie_hook_begin(t->replica, t->key[0]);
		if (t->key[1])
			smux__zombie_hook_begin(t->replica, t->key[1]);
	}
	return t;
out_free:
	ticket_free(t);
	return NULL;
}

bool smux__member_zombie(struct smux_mux *mux, struct mux_member *m,
			 const char *key)
{
	struct smux__zombies *z = mux->zombies;
	bool yes;

	if (!key || !z || atomic_load(&z->running) == 0)
		return false;
	pthread_rwlock_rdlock(&z->lock);
	/* one store behind every member: a zombie on any of them */
	yes = smux__zombie_shared(mux) ? find_key(z, key)
				       : find(z, m->name, key) != NULL;
	pthread_rwlock_unlock(&z->lock);
	return yes;
}

/* A zombie of @key or @key2 (may be NULL) on any member. */
static bool keys_zombie(struct smux__zombies *z, const char *key,
			const char *key2)
{
	bool yes;

	if (atomic_load(&z->running) == 0)
		return false;
	pthread_rwlock_rdlock(&z->lock);
	yes = (key && find_key(z, key)) || (key2 && find_key(z, key2));
	pthread_rwlock_unlock(&z->lock);
	return yes;
}

/* How long a mutating call waits for zombies of its keys: its own
 * deadline, else the mux's backend_timeout (the longest a member call may
 * take before it is given up on). */
static int64_t wait_budget_ns(struct smux_mux *mux, const struct smux_ctx *ctx)
{
	int64_t left = smux_ctx_remaining_ns(ctx);

	if (left != INT64_MAX)
		return left;
	return mux->timeout_ms > 0 ? mux->timeout_ms * 1000000 : 0;
}

int smux__zombie_wait(struct smux_mux *mux, const struct smux_ctx *ctx,
		      const char *key, const char *key2, struct smux_error *err)
{
	struct smux__zombies *z = mux->zombies;
	int64_t end;
	bool hooked = false;
	int rc = 0;

	if (!z || !smux__zombie_shared(mux) || !keys_zombie(z, key, key2))
		return 0;
	end = smux_now_ns() + wait_budget_ns(mux, ctx);
	pthread_mutex_lock(&z->wait_lock);
	while (keys_zombie(z, key, key2)) {
		int64_t now = smux_now_ns(), slice;
		struct timespec ts;

		if (now >= end || smux_ctx_state(ctx) != SMUX_CANCEL_NONE) {
			rc = -1;
			break;
		}
		if (!hooked && smux__zombie_hook_wait) {
			smux__zombie_hook_wait(mux, key);
			hooked = true;
		}
		/* wakes for the ends; in slices so that a cancellation of
		 * the caller is seen (nothing signals it here) */
		slice = end - now < 50000000 ? end - now : 50000000;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (ts.tv_nsec + slice) / 1000000000;
		ts.tv_nsec = (ts.tv_nsec + slice) % 1000000000;
		pthread_cond_timedwait(&z->wait_cond, &z->wait_lock, &ts);
	}
	pthread_mutex_unlock(&z->wait_lock);
	if (rc == 0)
		return 0;
	if (smux_ctx_check(ctx, mux->base.name, err) != 0)
		return -err->e.sys_errno;
	return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			      "an abandoned write of %s may still land; not "
			      "written",
			      key2 ? key2 : key);
}

/* True when @m waits for a copy of @key from another replica: a pending
 * hint of it - a put's or a delete's: in mirror and shield a missed
 * delete replays from the replicas' state too (mux_repair.c,
 * replicas_converge) -, a rejoin, or a zombie of its own. */
static bool wants_source(struct smux_mux *mux, struct mux_member *m,
			 const char *key)
{
	return smux__member_zombie(mux, m, key) ||
	       smux__hints_has(mux->hints, m->name, SMUX__REJOIN_KEY) ||
	       smux__hints_has(mux->hints, m->name, key);
}

/*
 * Mirror, shield: @m gets a hint unless no other replica could give it
 * the key (every other one is stale for it) and some of them wait for a
 * copy of it: then @m, whose content is the zombie's write (whose outcome
 * its caller was told is unknown), is the copy they will get (a shield
 * origin whose failed write the mirrors are hinted to roll back).
 */
static bool replica_needs_hint(struct smux_mux *mux, struct mux_view *v,
			       struct mux_member *m, const char *key)
{
	bool others_wait = false;

	for (unsigned i = 0; i < v->n; i++) {
		if (v->m[i] == m)
			continue;
		if (!smux__member_stale(mux, v->m[i], key))
			return true;
		others_wait |= wants_source(mux, v->m[i], key);
	}
	return !others_wait;
}

/* True when a member of @v other than @m has a pending delete hint for
 * @key: the key's latest write was a delete (a later one it took would
 * have superseded the hint, one it missed replaced it). */
static bool peer_missed_delete(struct smux_mux *mux, struct mux_view *v,
			       struct mux_member *m, const char *key)
{
	bool del = false;

	for (unsigned i = 0; i < v->n && !del; i++) {
		struct smux__hint *list = NULL;
		int n;

		if (v->m[i] == m ||
		    !smux__hints_has(mux->hints, v->m[i]->name, key))
			continue;
		n = smux__hints_list(mux->hints, v->m[i]->name, &list);
		for (int j = 0; j < n; j++)
			if (strcmp(list[j].key, key) == 0)
				del = list[j].kind == SMUX__HINT_DEL;
		if (n > 0)
			smux__hints_free_list(list, n);
	}
	return del;
}

/*
 * Whether @m (of @v), whose zombie for @key just ended and which has no
 * hint for it, needs one: it holds content nobody acknowledged, possibly
 * older than what the others have. See the file's comment for when not.
 */
static bool needs_hint(struct smux_mux *mux, struct mux_view *v,
		       struct mux_member *m, const char *key, bool made,
		       enum smux__hint_kind *kind)
{
	*kind = SMUX__HINT_PUT;
	switch (mux->mode) {
	case SMUX_MODE_FAILOVER:
		/* the first member without a hint holds the latest version */
		return !smux__failover_holds(mux, m, key);
	case SMUX_MODE_STICKY:
		/* not the holder: @m is off home, with an older copy or
		 * one nobody acknowledged (a put that failed everywhere),
		 * which goes - unless home is the holder (no hint) and
		 * every zombie was an edit of the object @m held: a key
		 * placed before the shard list grew, live where it is
		 * (smux__sticky_placed), kept as the holder's is (its
		 * delete hint deleted the key's only copy after a chmod
		 * that timed out there) */
		*kind = SMUX__HINT_DEL;
		return v->n && !smux__sticky_holds(mux, m, key) &&
		       (made ||
			!smux__sticky_holds(
				mux, v->m[smux__sticky_home(v, key)], key));
	case SMUX_MODE_MIRROR:
	case SMUX_MODE_SHIELD:
		/* the hint converges @m on its peers' state either way; its
		 * kind says what the key's latest write was: a delete when
		 * a peer missed one (a put hint here kept a member rejoining
		 * without the key from keeping that absence, every replica
		 * stale: test_mux_zombie_handoff) */
		if (peer_missed_delete(mux, v, m, key))
			*kind = SMUX__HINT_DEL;
		return replica_needs_hint(mux, v, m, key);
	default:
		/* round-robin, weighted: no replicas, no hints */
		return false;
	}
}

/*
 * The last zombie of (@replica, @key) ended (end_lock held, mux alive).
 * @v: the caller's view of the mux, put only after end_lock is let go:
 * it may be the last reference to a member removed meanwhile, whose
 * bulkhead is then freed, which waits for that bulkhead's other workers
 * to be over - one of them may be waiting for end_lock to end its own
 * zombie (the storm's shield run: both stuck, repair never converged).
 */
static void rehint(struct smux_mux *mux, struct mux_view *v,
		   const char *replica, const char *key, bool made)
{
	struct mux_member *m = NULL;
	enum smux__hint_kind kind;

	if (smux__zombie_hook_rehint)
		smux__zombie_hook_rehint(mux, replica, key);
	for (unsigned i = 0; i < v->n && !m; i++)
		if (strcmp(v->m[i]->name, replica) == 0)
			m = v->m[i];
	/* a removed member's hints wait for its name to be added back; one
	 * added back later is resynced whole (mux_rejoin.c) */
	if (m && !smux__hints_has(mux->hints, replica, key) &&
	    needs_hint(mux, v, m, key, made, &kind) &&
	    smux__hints_add(mux->hints, replica, key, kind, NULL, NULL) == 0) {
		struct smux_event ev = {.topic = SMUX_EV_HINT_RECORDED};

		snprintf(ev.mux, sizeof(ev.mux), "%s", mux->base.name);
		snprintf(ev.name, sizeof(ev.name), "%s", replica);
		snprintf(ev.key, sizeof(ev.key), "%s", key);
		smux_events_emit(mux->events, &ev);
	}
}

static void zombie_end(void *token, bool ran)
{
	struct zombie_ticket *t = token;
	struct smux__zombies *z = t->z;
	struct mux_view *v = NULL; /* put after end_lock: see rehint */
	smux__zombie_fn hook;

	pthread_mutex_lock(&z->end_lock);
	for (unsigned k = 0; k < 2 && t->key[k]; k++) {
		/*
		 * The hint first, then the zombie forgotten: the member is
		 * stale for the key (smux__member_stale) at every moment. In
		 * the other order a write that looked in between took the
		 * member as up to date - an in-place writer built on the
		 * copy the zombie left, the hint came after it opened, and
		 * its commit (not a whole write) left that hint: every
		 * replica stale, the repair never converged (the storm's
		 * shield run). Another zombie of the pair still running
		 * decides (a new one beginning meanwhile finds the hint).
		 */
		bool made;

		if (pair_last(z, t->replica, t->key[k], &made) && ran &&
		    z->mux) {
			if (!v)
				v = smux__view_get(z->mux);
			rehint(z->mux, v, t->replica, t->key[k], made);
		}
		hook = atomic_load(&smux__zombie_hook_handoff);
		if (z->mux && hook)
			hook(z->mux, t->replica, t->key[k]);
		delist(z, t->replica, t->key[k]);
		hook = atomic_load(&smux__zombie_hook_end);
		if (z->mux && hook)
			hook(z->mux, t->replica, t->key[k]);
	}
	pthread_mutex_unlock(&z->end_lock);
	if (v)
		smux__view_put(v);
	/* writers of the keys waiting for this end (smux__zombie_wait) */
	pthread_mutex_lock(&z->wait_lock);
	pthread_cond_broadcast(&z->wait_cond);
	pthread_mutex_unlock(&z->wait_lock);
	ticket_free(t);
	zombies_put(z);
}

static void zombie_release(void *arg)
{
	zombies_put(arg);
}

static const struct smux__zombie_hooks zombie_hooks = {
	.begin = zombie_begin,
	.end = zombie_end,
	.release = zombie_release,
};

void smux__zombies_track(struct smux_mux *mux, struct mux_member *m)
{
	struct smux__zombies *z = mux->zombies;

	if (!z)
		return;
	atomic_fetch_add(&z->refs, 1);
	smux__bulkhead_set_zombie_hooks(m->bh, &zombie_hooks, z);
}
