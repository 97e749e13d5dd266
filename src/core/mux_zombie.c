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

#include "core/mux_internal.h"

/* One (member, key) pair with zombies running; in the registry's list. */
struct zombie {
	char *replica;
	char *key;
	unsigned n; /* zombies of this pair running */
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
};

/* What begin hands the bulkhead: one zombie call. */
struct zombie_ticket {
	struct smux__zombies *z; /* a reference */
	char *replica;
	char *key[2]; /* key[1] may be NULL */
};

void (*smux__zombie_hook_end)(struct smux_mux *mux, const char *replica,
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
	free(z);
}

int smux__zombies_init(struct smux_mux *mux)
{
	struct smux__zombies *z = calloc(1, sizeof(*z));

	if (!z)
		return -1;
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

/* Counts one zombie of (@replica, @key); false on ENOMEM. */
static bool enlist(struct smux__zombies *z, const char *replica,
		   const char *key)
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

static void ticket_free(struct zombie_ticket *t)
{
	free(t->replica);
	free(t->key[0]);
	free(t->key[1]);
	free(t);
}

static void *zombie_begin(void *arg, const char *member, const char *key,
			  const char *key2)
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
	if (!enlist(z, t->replica, t->key[0]))
		goto out_free;
	if (t->key[1] && !enlist(z, t->replica, t->key[1])) {
		delist(z, t->replica, t->key[0]);
		goto out_free;
	}
	atomic_fetch_add(&z->refs, 1);
	t->z = z;
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
	yes = find(z, m->name, key) != NULL;
	pthread_rwlock_unlock(&z->lock);
	return yes;
}

/* True when @m waits for a copy of @key from another replica: a pending
 * put hint (or rejoin), or a zombie of its own. */
static bool wants_source(struct smux_mux *mux, struct mux_member *m,
			 const char *key)
{
	struct smux__hint *list = NULL;
	int n;
	bool yes = smux__member_zombie(mux, m, key) ||
		   smux__hints_has(mux->hints, m->name, SMUX__REJOIN_KEY);

	if (yes || !smux__hints_has(mux->hints, m->name, key))
		return yes;
	n = smux__hints_list(mux->hints, m->name, &list);
	for (int i = 0; i < n && !yes; i++)
		yes = list[i].kind == SMUX__HINT_PUT &&
		      strcmp(list[i].key, key) == 0;
	smux__hints_free_list(list, n);
	return yes || n < 0;
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

/*
 * Whether @m (of @v), whose zombie for @key just ended and which has no
 * hint for it, needs one: it holds content nobody acknowledged, possibly
 * older than what the others have. See the file's comment for when not.
 */
static bool needs_hint(struct smux_mux *mux, struct mux_view *v,
		       struct mux_member *m, const char *key,
		       enum smux__hint_kind *kind)
{
	*kind = SMUX__HINT_PUT;
	switch (mux->mode) {
	case SMUX_MODE_FAILOVER:
		/* the first member without a hint holds the latest version */
		return !smux__failover_holds(mux, m, key);
	case SMUX_MODE_STICKY:
		/* not the holder: home has a hint (else home would be the
		 * holder), so @m is off home and its copy goes */
		*kind = SMUX__HINT_DEL;
		return !smux__sticky_holds(mux, m, key);
	case SMUX_MODE_MIRROR:
	case SMUX_MODE_SHIELD:
		return replica_needs_hint(mux, v, m, key);
	default:
		/* round-robin, weighted: no replicas, no hints */
		return false;
	}
}

/* The last zombie of (@replica, @key) ended (end_lock held, mux alive). */
static void rehint(struct smux_mux *mux, const char *replica, const char *key)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *m = NULL;
	enum smux__hint_kind kind;

	for (unsigned i = 0; i < v->n && !m; i++)
		if (strcmp(v->m[i]->name, replica) == 0)
			m = v->m[i];
	/* a removed member's hints wait for its name to be added back; one
	 * added back later is resynced whole (mux_rejoin.c) */
	if (m && !smux__hints_has(mux->hints, replica, key) &&
	    needs_hint(mux, v, m, key, &kind) &&
	    smux__hints_add(mux->hints, replica, key, kind, NULL, NULL) == 0) {
		struct smux_event ev = {.topic = SMUX_EV_HINT_RECORDED};

		snprintf(ev.mux, sizeof(ev.mux), "%s", mux->base.name);
		snprintf(ev.name, sizeof(ev.name), "%s", replica);
		snprintf(ev.key, sizeof(ev.key), "%s", key);
		smux_events_emit(mux->events, &ev);
		smux__mux_kick(mux);
	}
	smux__view_put(v);
}

static void zombie_end(void *token, bool ran)
{
	struct zombie_ticket *t = token;
	struct smux__zombies *z = t->z;

	pthread_mutex_lock(&z->end_lock);
	for (unsigned k = 0; k < 2 && t->key[k]; k++) {
		/* another zombie of the pair still running decides */
		if (delist(z, t->replica, t->key[k]) && ran && z->mux)
			rehint(z->mux, t->replica, t->key[k]);
		if (z->mux && smux__zombie_hook_end)
			smux__zombie_hook_end(z->mux, t->replica, t->key[k]);
	}
	pthread_mutex_unlock(&z->end_lock);
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
