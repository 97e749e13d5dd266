/* SPDX-License-Identifier: MIT */
/*
 * mux.c - the mux as a backend: lifecycle, the operations table and which
 * execution strategy each mode uses per operation, runtime mutation (add,
 * remove, set_weight, drain), and the stats snapshot.
 *
 * Owns the member list (views) and the selection snapshots. Running the
 * attempts is mux_exec.c's; choosing members is mux_select.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/mux_internal.h"

static const struct smux_backend_ops mux_ops;

struct smux_mux *smux__mux_of(struct smux_backend *b)
{
	if (!b || b->ops != &mux_ops)
		return NULL;
	return (struct smux_mux *)b;
}

bool smux_is_mux(const struct smux_backend *b)
{
	return b && b->ops == &mux_ops;
}

int64_t smux__mux_now(struct smux_mux *mux)
{
	struct timespec ts;

	if (mux->clock && mux->clock->now_ms)
		return mux->clock->now_ms(mux->clock->arg);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- members, views, selection snapshots ---- */

struct mux_member *smux__member_get(struct mux_member *m)
{
	atomic_fetch_add(&m->refs, 1);
	return m;
}

void smux__member_put(struct mux_member *m)
{
	if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
		return;
	smux__bulkhead_free(m->bh);
	smux__stats_release(&m->stats);
	smux__health_release(&m->health);
	smux_backend_unref(m->backend);
	free(m);
}

static struct mux_member *member_new(struct smux_mux *mux,
				     const struct smux_mux_member *spec)
{
	struct mux_member *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->bh = smux__bulkhead_new(spec->backend->name, mux->max_inflight);
	if (!m->bh) {
		free(m);
		return NULL;
	}
	smux__zombies_track(mux, m);
	atomic_init(&m->refs, 1);
	m->backend = smux_backend_ref(spec->backend);
	m->name = m->backend->name;
	atomic_init(&m->has_weight, spec->has_weight);
	atomic_init(&m->weight, spec->has_weight ? spec->weight : 1.0);
	m->index = mux->next_index++;
	smux__health_init(&m->health, smux__mux_now(mux));
	smux__stats_init(&m->stats, smux_fnv1a(m->name, strlen(m->name)) |
					    ((uint64_t)m->index << 32));
	return m;
}

static struct mux_view *view_new(unsigned n)
{
	struct mux_view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->m = calloc(n ? n : 1, sizeof(struct mux_member *));
	if (!v->m) {
		free(v);
		return NULL;
	}
	atomic_init(&v->refs, 1);
	v->n = n;
	return v;
}

void smux__view_put(struct mux_view *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	for (unsigned i = 0; i < v->n; i++)
		smux__member_put(v->m[i]);
	free(v->m);
	free(v);
}

struct mux_view *smux__view_get(struct smux_mux *mux)
{
	struct mux_view *v;

	pthread_rwlock_rdlock(&mux->view_lock);
	v = mux->view;
	atomic_fetch_add(&v->refs, 1);
	pthread_rwlock_unlock(&mux->view_lock);
	return v;
}

void smux__sel_put(struct mux_sel *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	smux__view_put(s->view);
	smux__sel_free_arrays(s);
	free(s);
}

struct mux_sel *smux__sel_get(struct smux_mux *mux)
{
	struct mux_sel *s;

	pthread_rwlock_rdlock(&mux->view_lock);
	s = mux->sel;
	atomic_fetch_add(&s->refs, 1);
	pthread_rwlock_unlock(&mux->view_lock);
	return s;
}

/* Builds a snapshot for @v (which it references). NULL on ENOMEM. */
static struct mux_sel *sel_new(struct smux_mux *mux, struct mux_view *v)
{
	struct mux_sel *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	atomic_init(&s->refs, 1);
	atomic_fetch_add(&v->refs, 1);
	if (smux__sel_build(s, v, smux__mux_now(mux)) != 0) {
		smux__sel_put(s);
		return NULL;
	}
	return s;
}

void smux__mux_reselect(struct smux_mux *mux)
{
	struct mux_view *v;
	struct mux_sel *s, *old = NULL;

	/* built and installed in turn: a snapshot built from older health
	 * never replaces a newer one */
	pthread_mutex_lock(&mux->sel_lock);
	v = smux__view_get(mux);
	s = sel_new(mux, v);
	smux__view_put(v);
	if (s) {
		pthread_rwlock_wrlock(&mux->view_lock);
		if (mux->view == s->view) {
			old = mux->sel;
			mux->sel = s;
			s = NULL;
		}
		pthread_rwlock_unlock(&mux->view_lock);
	} /* else keep the old snapshot; health still guards use */
	pthread_mutex_unlock(&mux->sel_lock);
	smux__sel_put(old);
	if (s) /* the view changed meanwhile; its changer reselects */
		smux__sel_put(s);
}

/* Installs @v (consumes the caller's reference) and a new snapshot. */
static int view_install(struct smux_mux *mux, struct mux_view *v)
{
	struct mux_sel *s, *old_sel;
	struct mux_view *old_view;

	pthread_mutex_lock(&mux->sel_lock);
	s = sel_new(mux, v);
	if (!s) {
		pthread_mutex_unlock(&mux->sel_lock);
		smux__view_put(v);
		return -ENOMEM;
	}
	pthread_rwlock_wrlock(&mux->view_lock);
	old_view = mux->view;
	old_sel = mux->sel;
	mux->view = v;
	mux->sel = s;
	pthread_rwlock_unlock(&mux->view_lock);
	pthread_mutex_unlock(&mux->sel_lock);
	smux__sel_put(old_sel);
	smux__view_put(old_view);
	return 0;
}

/* ---- construction ---- */

static int check_weight(const struct smux_mux_member *m, const char *mux_name,
			struct smux_error *err)
{
	if (m->has_weight && (!isfinite(m->weight) || m->weight < 0))
		return smux_error_set(err, SMUX_E_INVALID_WEIGHT, mux_name,
				      "backend \"%s\": weight %g must be a "
				      "finite number >= 0",
				      m->backend->name, m->weight);
	return 0;
}

/* True when @needle is @hay or a mux somewhere below it. */
static bool contains(struct smux_backend *hay, struct smux_backend *needle)
{
	struct smux_mux *mux = smux__mux_of(hay);
	struct mux_view *v;
	bool found = false;

	if (hay == needle)
		return true;
	if (!mux)
		return false;
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n && !found; i++)
		found = contains(v->m[i]->backend, needle);
	smux__view_put(v);
	return found;
}

static int check_member(struct smux_mux *mux, const struct smux_mux_member *m,
			struct smux_error *err)
{
	const char *name = mux->base.name;
	int rc;

	if (!m->backend)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "member without a backend");
	rc = check_weight(m, name, err);
	if (rc)
		return rc;
	if (mux->mode == SMUX_MODE_WEIGHTED && !m->has_weight)
		return smux_error_set(err, SMUX_E_WEIGHTED_REQUIRES_WEIGHTS,
				      name, "backend \"%s\" has no weight",
				      m->backend->name);
	if (m->backend->depth + 1 > SMUX_MAX_DEPTH)
		return smux_error_set(err, SMUX_E_RECURSION_DEPTH_EXCEEDED,
				      name,
				      "backend \"%s\" nests %u muxes deep; "
				      "the limit is %d",
				      m->backend->name, m->backend->depth + 1,
				      SMUX_MAX_DEPTH);
	if (contains(m->backend, &mux->base))
		return smux_error_set(err, SMUX_E_RECURSION_DEPTH_EXCEEDED,
				      name,
				      "backend \"%s\" contains this mux "
				      "(a cycle)",
				      m->backend->name);
	return 0;
}

static int name_taken(struct mux_view *v, const char *name)
{
	for (unsigned i = 0; i < v->n; i++)
		if (strcmp(v->m[i]->name, name) == 0)
			return 1;
	return 0;
}

static void mux_free(struct smux_mux *mux)
{
	smux__mux_bg_stop(mux);
	/* zombies that end from now on record nothing */
	smux__zombies_detach(mux);
	smux__sel_put(mux->sel);
	smux__view_put(mux->view);
	smux__intent_free_all(mux); /* ends clean intents in the journal */
	smux__hints_close(mux->hints);
	pthread_rwlock_destroy(&mux->view_lock);
	pthread_mutex_destroy(&mux->mutate_lock);
	pthread_mutex_destroy(&mux->sel_lock);
	pthread_mutex_destroy(&mux->bg_lock);
	smux__link_memo_free(mux);
	smux__linkbook_close(mux->book);
	pthread_mutex_destroy(&mux->link_lock);
	pthread_mutex_destroy(&mux->replay_lock);
	pthread_mutex_destroy(&mux->fence_lock);
	pthread_cond_destroy(&mux->fence_cond);
	pthread_mutex_destroy(&mux->intent_lock);
	smux__changes_free(mux); /* their notes stay in the journal */
	pthread_mutex_destroy(&mux->change_lock);
	/* the notes stay in the journal for the next open */
	smux__notes_destroy(&mux->fresh);
	smux__notes_destroy(&mux->departed);
	pthread_mutex_destroy(&mux->sticky_lock);
	pthread_cond_destroy(&mux->sticky_cond);
	pthread_cond_destroy(&mux->bg_cond);
	smux_backend_release(&mux->base);
	free(mux);
}

static void mux_destroy(struct smux_backend *b)
{
	mux_free(smux__mux_of(b));
}

static int64_t or_default(int64_t v, int64_t def)
{
	return v == 0 ? def : v;
}

/* smux__hints_on_pending: the first hint wakes the background repair */
static void kick_cb(void *arg)
{
	smux__mux_kick(arg);
}

/* The mux's link book (linkbook.h), next to its hint journal. One it
 * could not read whole, or cannot write, is reported as an event naming
 * the file (and line): the mux runs on, its replays knowing less. */
static void book_open(struct smux_mux *mux, const char *state_dir,
		      const char *name)
{
	struct smux_event ev = {.topic = SMUX_EV_BACKEND_MISCONFIGURED,
				.has_cause = true};
	char why[sizeof(ev.cause.message)];

	mux->book = smux__linkbook_open(state_dir, name, SMUX__LINKBOOK_CAP,
					why, sizeof(why));
	if (!mux->book || !why[0])
		return;
	snprintf(ev.mux, sizeof(ev.mux), "%s", name);
	snprintf(ev.name, sizeof(ev.name), "%s", name);
	snprintf(ev.option, sizeof(ev.option), "state_dir");
	ev.cause.code = SMUX_E_LOCAL_IO; /* a file of the daemon's own */
	snprintf(ev.cause.message, sizeof(ev.cause.message), "%s", why);
	smux_events_emit(mux->events, &ev);
}

int smux_mux_new(const char *name, const struct smux_mux_opts *opts,
		 const struct smux_mux_member *members, unsigned n,
		 struct smux_backend **out, struct smux_error *err)
{
	struct smux_mux_opts none = {0};
	struct smux_mux *mux;
	struct mux_view *v;
	pthread_condattr_t ca;
	uint64_t seed = 0;
	int rc;

	*out = NULL;
	smux_error_clear(err);
	if (!opts)
		opts = &none;
	if (!name || !name[0])
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
				      "a mux needs a name");
	if ((unsigned)opts->mode >= SMUX_MODE_COUNT)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "unknown mode %d", (int)opts->mode);
	if (opts->mode == SMUX_MODE_SHIELD && n == 0)
		return smux_error_set(err, SMUX_E_MIRROR_ORIGIN_REQUIRED, name,
				      "shield mode needs an origin (the "
				      "first backend)");
	if (opts->cooldown_ms < 0 || opts->max_cooldown_ms < 0 ||
	    opts->healthcheck_interval_ms < 0)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "durations must not be negative");
	if (opts->mode == SMUX_MODE_MIRROR && opts->write_quorum > n)
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "write_quorum %u exceeds the %u backends",
				      opts->write_quorum, n);

	mux = calloc(1, sizeof(*mux));
	if (!mux)
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	if (smux_backend_init(&mux->base, &mux_ops, name) != 0) {
		free(mux);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	mux->mode = opts->mode;
	mux->timeout_ms = or_default(opts->backend_timeout_ms,
				     SMUX_DEFAULT_BACKEND_TIMEOUT_MS);
	mux->health_cfg.cooldown_ms =
		or_default(opts->cooldown_ms, SMUX_DEFAULT_COOLDOWN_MS);
	mux->health_cfg.max_cooldown_ms =
		or_default(opts->max_cooldown_ms, SMUX_DEFAULT_MAX_COOLDOWN_MS);
	mux->healthcheck_interval_ms = opts->healthcheck_interval_ms;
	mux->write_quorum = opts->write_quorum ? opts->write_quorum : 1;
	mux->throw_on_fanout_partial = opts->throw_on_fanout_partial;
	mux->max_inflight = opts->max_inflight ? opts->max_inflight
					       : SMUX_DEFAULT_MAX_INFLIGHT;
	mux->clock = opts->clock;
	mux->rng = opts->rng;
	mux->events = opts->events;
	mux->tracer = opts->tracer;
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed) || seed == 0)
		seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)mux;
	atomic_init(&mux->rng_state, seed);
	pthread_rwlock_init(&mux->view_lock, NULL);
	pthread_mutex_init(&mux->mutate_lock, NULL);
	pthread_mutex_init(&mux->sel_lock, NULL);
	pthread_mutex_init(&mux->bg_lock, NULL);
	pthread_mutex_init(&mux->replay_lock, NULL);
	pthread_mutex_init(&mux->link_lock, NULL);
	pthread_mutex_init(&mux->fence_lock, NULL);
	pthread_cond_init(&mux->fence_cond, NULL);
	pthread_mutex_init(&mux->intent_lock, NULL);
	pthread_mutex_init(&mux->change_lock, NULL);
	smux__notes_init(&mux->fresh, SMUX__NOTE_FRESH);
	smux__notes_init(&mux->departed, SMUX__NOTE_DEPARTED);
	pthread_mutex_init(&mux->sticky_lock, NULL);
	pthread_cond_init(&mux->sticky_cond, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mux->bg_cond, &ca);
	pthread_condattr_destroy(&ca);

	if (smux__zombies_init(mux)) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_free;
	}
	/* an empty view first, so helpers that read it work during setup */
	mux->view = view_new(0);
	mux->sel = mux->view ? sel_new(mux, mux->view) : NULL;
	if (!mux->view || !mux->sel) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_free;
	}
	v = view_new(n);
	if (!v) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_free;
	}
	v->n = 0;
	for (unsigned i = 0; i < n; i++) {
		rc = check_member(mux, &members[i], err);
		if (rc == 0 && name_taken(v, members[i].backend->name))
			rc = smux_error_set(err, SMUX_E_BACKEND_NAME_CONFLICT,
					    name,
					    "two backends are named \"%s\"",
					    members[i].backend->name);
		if (rc == 0 && !(v->m[v->n] = member_new(mux, &members[i])))
			rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		if (rc) {
			smux__view_put(v);
			goto out_free;
		}
		if (members[i].backend->depth + 1 > mux->base.depth)
			mux->base.depth = members[i].backend->depth + 1;
		v->n++;
	}
	if (mux->base.depth == 0)
		mux->base.depth = 1;
	rc = view_install(mux, v);
	if (rc) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
		goto out_free;
	}
	rc = smux__hints_open(opts->state_dir, name, &mux->hints, err);
	if (rc)
		goto out_free;
	book_open(mux, opts->state_dir, name);
	/* the background repair sleeps long while nothing is pending */
	smux__hints_on_pending(mux->hints, kick_cb, mux);
	/* what the resyncs must know beside the hints (mux_notes.c) */
	if (smux__fresh_load(mux) != 0 || smux__departed_load(mux) != 0 ||
	    smux__changes_load(mux) != 0) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name,
				    "cannot load the notes of %s",
				    smux__hints_path(mux->hints));
		goto out_free;
	}
	/* a dead daemon's renames, deletes and links are completed before
	 * anyone uses the mux: a write made first would be undone by them */
	if (atomic_load(&mux->nchanges_left)) {
		struct smux_error cerr;
		struct smux_ctx cctx;

		smux_ctx_init(&cctx);
		(void)smux__changes_recover(mux, &cctx, &cerr);
	}
	rc = smux__mux_bg_start(mux);
	if (rc) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, name,
				    "cannot start the background thread");
		goto out_free;
	}
	*out = &mux->base;
	return 0;
out_free:
	mux_free(mux);
	return rc;
}

/* ---- runtime mutation (seed section 8) ---- */

static void emit(struct smux_mux *mux, struct smux_event *ev)
{
	snprintf(ev->mux, sizeof(ev->mux), "%s", mux->base.name);
	smux_events_emit(mux->events, ev);
}

/* The index of the empty slot named @name in @v (a sticky shard removed
 * at run time, mux_sticky_slot.c), or -1. */
static int sticky_slot_of(struct mux_view *v, const char *name)
{
	for (unsigned i = 0; i < v->n; i++)
		if (smux__sticky_slot_empty(v->m[i]) &&
		    strcmp(v->m[i]->name, name) == 0)
			return (int)i;
	return -1;
}

/* The slot a sticky shard @m leaves when it is removed: a member of its
 * name, draining for good (mux_sticky_slot.c); NULL when out of memory. */
static struct mux_member *sticky_slot_new(struct smux_mux *mux,
					  struct mux_member *m)
{
	struct smux_mux_member spec = {
		.backend = smux__sticky_slot_backend(m->backend),
	};
	struct mux_member *slot;

	if (!spec.backend)
		return NULL;
	slot = member_new(mux, &spec);
	smux_backend_unref(spec.backend);
	if (slot) {
		smux__health_drain(&slot->health, smux__mux_now(mux));
		smux__health_drained(&slot->health);
	}
	return slot;
}

int smux_mux_add(struct smux_backend *b, const struct smux_mux_member *spec,
		 struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_event ev = {.topic = SMUX_EV_BACKEND_ADDED};
	struct mux_view *old, *v;
	unsigned at;
	int rc, slot;

	smux_error_clear(err);
	if (!mux)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "not a mux");
	pthread_mutex_lock(&mux->mutate_lock);
	rc = check_member(mux, spec, err);
	if (rc)
		goto out_unlock;
	old = smux__view_get(mux);
	slot = sticky_slot_of(old, spec->backend->name);
	if (slot < 0 && name_taken(old, spec->backend->name)) {
		smux__view_put(old);
		rc = smux_error_set(err, SMUX_E_BACKEND_NAME_CONFLICT, b->name,
				    "a backend named \"%s\" exists",
				    spec->backend->name);
		goto out_unlock;
	}
	/* a sticky shard added back fills the slot it left: same position,
	 * so every home comes back (mux_sticky_slot.c) */
	at = slot >= 0 ? (unsigned)slot : old->n;
	v = view_new(slot >= 0 ? old->n : old->n + 1);
	if (!v || !(v->m[at] = member_new(mux, spec))) {
		if (v)
			v->n = 0;
		smux__view_put(v);
		smux__view_put(old);
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
		goto out_unlock;
	}
	for (unsigned i = 0; i < old->n; i++)
		if (i != at)
			v->m[i] = smux__member_get(old->m[i]);
	smux__view_put(old);
	if (spec->backend->depth + 1 > b->depth)
		b->depth = spec->backend->depth + 1;
	/* a mux that replicates: the member missed what was written before
	 * (all of it, or what was written while it was out) and is stale
	 * for every key until its resync (mux_rejoin.c); journaled before
	 * it is in the view */
	if (v->n > 1 &&
	    (mux->mode == SMUX_MODE_MIRROR || mux->mode == SMUX_MODE_SHIELD ||
	     mux->mode == SMUX_MODE_FAILOVER)) {
		/* a new rejoin: what it took in an earlier one is old */
		smux__fresh_clear(mux, spec->backend->name);
		rc = smux__hints_add(mux->hints, spec->backend->name,
				     SMUX__REJOIN_KEY, SMUX__HINT_PUT, NULL,
				     err);
		if (rc) {
			smux__view_put(v);
			goto out_unlock;
		}
	}
	rc = view_install(mux, v);
	if (rc) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
		goto out_unlock;
	}
	snprintf(ev.name, sizeof(ev.name), "%s", spec->backend->name);
	ev.has_weight = spec->has_weight;
	ev.weight = spec->weight;
	emit(mux, &ev);
	smux__mux_kick(mux);
out_unlock:
	pthread_mutex_unlock(&mux->mutate_lock);
	return rc;
}

/* Finds @name in the current view (a reference) or fails. */
static struct mux_member *find_member(struct smux_mux *mux, const char *name,
				      struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *m = NULL;

	for (unsigned i = 0; i < v->n && !m; i++)
		if (strcmp(v->m[i]->name, name ? name : "") == 0 &&
		    !smux__sticky_slot_empty(v->m[i]))
			m = smux__member_get(v->m[i]);
	smux__view_put(v);
	if (!m)
		smux_error_set(err, SMUX_E_BACKEND_NOT_FOUND, mux->base.name,
			       "no backend named \"%s\"", name ? name : "");
	return m;
}

struct smux_backend *smux_mux_member(struct smux_backend *b, const char *name)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_backend *found = NULL;
	struct mux_view *v;

	if (!mux || !name)
		return NULL;
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n && !found; i++)
		if (strcmp(v->m[i]->name, name) == 0 &&
		    !smux__sticky_slot_empty(v->m[i]))
			found = smux_backend_ref(v->m[i]->backend);
	smux__view_put(v);
	return found;
}

/* True when @mux keeps a member that serves once the one called @name
 * is gone: another one (a removed shard's empty slot is none), weighing
 * more than 0 in a weighted mux. Caller holds mutate_lock. */
static bool others_left(struct smux_mux *mux, const char *name)
{
	struct mux_view *v = smux__view_get(mux);
	bool any = false;

	for (unsigned i = 0; i < v->n && !any; i++)
		any = strcmp(v->m[i]->name, name) != 0 &&
		      !smux__sticky_slot_empty(v->m[i]) &&
		      (mux->mode != SMUX_MODE_WEIGHTED ||
		       atomic_load(&v->m[i]->weight) > 0);
	smux__view_put(v);
	return any;
}

int smux_mux_set_weight(struct smux_backend *b, const char *name, double weight,
			struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_event ev = {.topic = SMUX_EV_WEIGHT_CHANGED};
	struct mux_member *m;

	smux_error_clear(err);
	if (!mux)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "not a mux");
	if (!isfinite(weight) || weight < 0)
		return smux_error_set(err, SMUX_E_INVALID_WEIGHT, b->name,
				      "backend \"%s\": weight %g must be a "
				      "finite number >= 0",
				      name ? name : "", weight);
	pthread_mutex_lock(&mux->mutate_lock);
	m = find_member(mux, name, err);
	if (!m) {
		pthread_mutex_unlock(&mux->mutate_lock);
		return -smux_code_errno(SMUX_E_BACKEND_NOT_FOUND);
	}
	if (mux->mode == SMUX_MODE_WEIGHTED && weight == 0 &&
	    !others_left(mux, m->name)) {
		pthread_mutex_unlock(&mux->mutate_lock);
		smux__member_put(m);
		return smux_error_set(err, SMUX_E_INVALID_WEIGHT, b->name,
				      "backend \"%s\": weight 0 would leave no "
				      "member a weight above 0 (a weighted mux "
				      "would draw none)",
				      name);
	}
	ev.weight_from = atomic_load(&m->weight);
	ev.weight_to = weight;
	atomic_store(&m->weight, weight);
	atomic_store(&m->has_weight, true);
	smux__mux_reselect(mux);
	pthread_mutex_unlock(&mux->mutate_lock);
	snprintf(ev.name, sizeof(ev.name), "%s", m->name);
	emit(mux, &ev);
	smux__member_put(m);
	return 0;
}

/* Waits until @m has no request in flight, or @ctx is cancelled. */
static int wait_idle(struct smux_mux *mux, struct mux_member *m,
		     const struct smux_ctx *ctx, struct smux_error *err)
{
	while (atomic_load(&m->health.in_flight) > 0) {
		int rc =
			smux_ctx_sleep(ctx, 2 * 1000000LL, mux->base.name, err);

		if (rc)
			return rc;
	}
	return 0;
}

/* The most a drain spends replaying the other members' hints first. */
#define DRAIN_REPAIR_NS (30 * 1000000000LL)

int smux_mux_drain(struct smux_backend *b, const char *name,
		   const struct smux_ctx *ctx, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_event ev = {.topic = SMUX_EV_DRAIN_STARTED};
	struct mux_member *m;
	int64_t started;
	int rc;

	smux_error_clear(err);
	if (!mux)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "not a mux");
	m = find_member(mux, name, err);
	if (!m)
		return -smux_code_errno(SMUX_E_BACKEND_NOT_FOUND);
	/* the members that stay are made current first, where a replay can
	 * run (a key a writer holds waits for its close): a rolling drain
	 * (drain a, undrain a, drain b) took b out while a still missed
	 * what was written during its own drain, and every open of those
	 * files failed (EIO) until b was back (s44-t1). Best effort: the
	 * drain goes on whatever is left pending */
	if (smux__hints_pending_replicas(mux->hints) > 0) {
		struct smux_error e;
		struct smux_ctx rc_ctx;

		/* bounded: the drain's own wait keeps the rest of @ctx */
		if (smux_ctx_derive(&rc_ctx, ctx, DRAIN_REPAIR_NS, NULL) == 0)
			(void)smux__mux_repair_up(mux, &rc_ctx, m->name, &e);
	}
	started = smux__mux_now(mux);
	smux__health_drain(&m->health, started);
	/* pairs with smux__member_enter: a call either sees "draining" or
	 * is counted in in_flight below */
	atomic_thread_fence(memory_order_seq_cst);
	smux__mux_reselect(mux);
	snprintf(ev.name, sizeof(ev.name), "%s", m->name);
	ev.in_flight = atomic_load(&m->health.in_flight);
	emit(mux, &ev);
	rc = wait_idle(mux, m, ctx, err);
	if (rc == 0) {
		smux__health_drained(&m->health);
		ev.topic = SMUX_EV_DRAIN_COMPLETED;
		ev.drained_duration_ms = smux__mux_now(mux) - started;
		emit(mux, &ev);
	}
	smux__member_put(m);
	return rc;
}

int smux_mux_undrain(struct smux_backend *b, const char *name,
		     struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct mux_member *m;

	smux_error_clear(err);
	if (!mux)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "not a mux");
	m = find_member(mux, name, err);
	if (!m)
		return -smux_code_errno(SMUX_E_BACKEND_NOT_FOUND);
	smux__health_undrain(&m->health, smux__mux_now(mux));
	smux__mux_reselect(mux);
	smux__member_put(m);
	smux__mux_kick(mux);
	return 0;
}

_Atomic(smux__fanout_hook_fn) smux__remove_hook_out;

static int last_member(struct smux_backend *b, const char *name,
		       struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
			      "remove %s: the last member of its mux that "
			      "serves (add another first)",
			      name);
}

/*
 * Failover: the member left alone by a removal with a rejoin hint (added
 * beside the one removed now: a reload that switched a failover's member)
 * has nothing to resync from, ever (mux_rejoin.c): its rejoin is over at
 * once, not at the background repair's next pass. Until then it was stale
 * for every key, and writes right after the reload failed (EIO).
 */
static void rejoin_alone_done(struct smux_mux *mux, struct mux_view *v)
{
	struct smux_error e;

	if (mux->mode != SMUX_MODE_FAILOVER || v->n != 1 ||
	    !smux__hints_has(mux->hints, v->m[0]->name, SMUX__REJOIN_KEY))
		return;
	/* a journal that fails leaves it to the background repair */
	(void)smux__hints_supersede(mux->hints, v->m[0]->name, SMUX__REJOIN_KEY,
				    &e);
}

int smux_mux_remove(struct smux_backend *b, const char *name,
		    const struct smux_ctx *ctx, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_event ev = {.topic = SMUX_EV_BACKEND_REMOVED};
	smux__fanout_hook_fn hook;
	struct mux_view *old, *v;
	bool left;
	int rc;

	if (!mux || !name)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      b ? b->name : NULL, "not a mux member");
	/* a mux of no member answers nothing (every file EIO), and what the
	 * last one holds would be out of reach: add another first (asked
	 * again below: a remove of the other one may have run meanwhile) */
	pthread_mutex_lock(&mux->mutate_lock);
	left = others_left(mux, name);
	pthread_mutex_unlock(&mux->mutate_lock);
	if (!left)
		return last_member(b, name, err);
	rc = smux_mux_drain(b, name, ctx, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&mux->mutate_lock);
	if (!others_left(mux, name)) {
		pthread_mutex_unlock(&mux->mutate_lock);
		smux_mux_undrain(b, name, err);
		return last_member(b, name, err);
	}
	old = smux__view_get(mux);
	v = view_new(old->n);
	if (!v) {
		smux__view_put(old);
		pthread_mutex_unlock(&mux->mutate_lock);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	v->n = 0;
	for (unsigned i = 0; i < old->n; i++) {
		if (strcmp(old->m[i]->name, name) != 0 ||
		    smux__sticky_slot_empty(old->m[i]))
			v->m[v->n++] = smux__member_get(old->m[i]);
		/* sticky-by-key: the shard leaves its slot (placement and
		 * its hints stay, mux_sticky_slot.c) */
		else if (mux->mode == SMUX_MODE_STICKY &&
			 !(v->m[v->n++] = sticky_slot_new(mux, old->m[i])))
			v->n--;
	}
	left = v->n < old->n && mux->mode == SMUX_MODE_STICKY;
	if (left) { /* no memory for the slot */
		smux__view_put(v);
		smux__view_put(old);
		pthread_mutex_unlock(&mux->mutate_lock);
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	}
	rc = view_install(mux, v);
	hook = atomic_load(&smux__remove_hook_out);
	if (rc == 0 && hook)
		hook(mux, name);
	/* failover: never take away the only copy of an acknowledged write
	 * (checked once the member is out of the view, so that a write it
	 * took either shows its hints here or is refused: mux_failover.c) */
	if (rc == 0 && mux->mode == SMUX_MODE_FAILOVER &&
	    smux__failover_sole_holder(mux, old, name, ev.key,
				       sizeof(ev.key))) {
		rc = view_install(mux, old); /* back, with our reference */
		pthread_mutex_unlock(&mux->mutate_lock);
		if (rc)
			return smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
					      NULL);
		/* back in service: the replay copies the write from it */
		smux_mux_undrain(b, name, err);
		return smux_error_set(err, SMUX_E_NOT_EMPTY, b->name,
				      "remove %s: it holds the only copy of "
				      "the latest write of %s (a member ahead "
				      "of it missed it); kept in service "
				      "until a repair copied it",
				      name, ev.key);
	}
	/* mirror, shield: the keys it held the only latest copy of are
	 * noted (checked once it is out of the view, as failover's), so a
	 * member rejoining meanwhile does not take its own old copy for
	 * the latest (mux_departed.c) */
	if (rc == 0)
		smux__departed_note(mux, old, name);
	if (rc == 0)
		rejoin_alone_done(mux, v);
	smux__view_put(old);
	pthread_mutex_unlock(&mux->mutate_lock);
	if (rc)
		return smux_error_set(err, SMUX_E_NO_MEMORY, b->name, NULL);
	ev.key[0] = '\0';
	snprintf(ev.name, sizeof(ev.name), "%s", name);
	emit(mux, &ev);
	return 0;
}

unsigned smux_mux_pending_intents(struct smux_backend *b)
{
	struct smux_mux *mux = smux__mux_of(b);

	return mux ? smux__hints_pending(mux->hints, SMUX__INTENT_ALL) : 0;
}

unsigned smux_mux_pending_hints(struct smux_backend *b)
{
	struct smux_mux *mux = smux__mux_of(b);

	return mux ? smux__hints_pending_replicas(mux->hints) : 0;
}

int smux_mux_repair(struct smux_backend *b, const struct smux_ctx *ctx,
		    unsigned *replayed, unsigned *pending,
		    struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);

	smux_error_clear(err);
	if (!mux)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "not a mux");
	return smux__mux_repair(mux, ctx, true, replayed, pending, err);
}

/* ---- stats snapshot (seed section 7) ---- */

struct smux_mux_stats *smux_mux_stats(struct smux_backend *b)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_mux_stats *s;
	struct mux_view *v;

	if (!mux)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	v = smux__view_get(mux);
	s->backends = calloc(v->n ? v->n : 1, sizeof(*s->backends));
	if (!s->backends) {
		smux__view_put(v);
		free(s);
		return NULL;
	}
	snprintf(s->name, sizeof(s->name), "%s", b->name);
	s->mode = mux->mode;
	s->total_calls = atomic_load(&mux->total_calls);
	s->total_failovers = atomic_load(&mux->total_failovers);
	s->total_fanout_partials = atomic_load(&mux->total_fanout_partials);
	s->pending_hints = smux__hints_pending_replicas(mux->hints);
	s->n_backends = 0;
	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *m = v->m[i];
		struct smux_backend_stats *bs;

		/* the slot a removed sticky shard left is no member */
		if (smux__sticky_slot_empty(m))
			continue;
		bs = &s->backends[s->n_backends++];
		snprintf(bs->name, sizeof(bs->name), "%s", m->name);
		smux__stats_read(&m->stats, bs);
		smux__health_read(&m->health, &bs->status,
				  &bs->consecutive_failures,
				  &bs->last_transition_at);
		bs->in_flight_count = atomic_load(&m->health.in_flight);
		bs->has_weight = atomic_load(&m->has_weight);
		bs->weight = atomic_load(&m->weight);
		if (smux_is_mux(m->backend))
			bs->child = smux_mux_stats(m->backend);
	}
	smux__view_put(v);
	return s;
}

/* ---- the operations table ---- */

/*
 * Entry of every operation: depth check (a cycle made at runtime or a
 * nesting too deep stops here), the call count, the operation span, and a
 * child context one level deeper.
 */
static int op_enter(struct smux_mux *mux, const struct smux_ctx *ctx,
		    struct smux_ctx *child, const char *op, const char *key,
		    const char *policy, struct smux_span **span,
		    struct smux_error *err)
{
	char name[48];

	*span = NULL;
	if (ctx->depth >= SMUX_MAX_DEPTH)
		return smux_error_set(
			err, SMUX_E_RECURSION_DEPTH_EXCEEDED, mux->base.name,
			"call nested more than %d muxes deep", SMUX_MAX_DEPTH);
	atomic_fetch_add(&mux->total_calls, 1);
	*child = *ctx;
	child->depth = ctx->depth + 1;
	if (mux->tracer) {
		snprintf(name, sizeof(name), "storage-mux.%s", op);
		*span = smux_span_start(mux->tracer, name, ctx->parent_span);
		smux_span_str(mux->tracer, *span, "mux.mode",
			      smux_mode_name(mux->mode));
		if (key)
			smux_span_str(mux->tracer, *span, "mux.key", key);
		smux_span_str(mux->tracer, *span, "mux.policy", policy);
		child->parent_span = *span;
	}
	return 0;
}

/*
 * A failure leaves the mux naming the mux (the caller called it; the
 * conformance suite checks it): a member's error keeps its code, errno,
 * message and attempts, and becomes the cause, so the member that answered
 * is still named.
 */
static void stamp_error(struct smux_mux *mux, struct smux_error *err)
{
	if (strcmp(err->e.backend, mux->base.name) == 0)
		return;
	err->cause = err->e;
	err->has_cause = true;
	snprintf(err->e.backend, sizeof(err->e.backend), "%s", mux->base.name);
}

static long op_leave(struct smux_mux *mux, struct smux_span *span, long rc,
		     struct smux_error *err)
{
	if (rc < 0)
		stamp_error(mux, err);
	if (span) {
		smux_span_str(mux->tracer, span, "mux.outcome",
			      smux_outcome_name(rc < 0 ? smux_classify(&err->e)
						       : SMUX_OUTCOME_OK));
		smux_span_end(mux->tracer, span);
	}
	return rc;
}

static bool fans_out_writes(const struct smux_mux *mux)
{
	return mux->mode == SMUX_MODE_SHIELD || mux->mode == SMUX_MODE_MIRROR;
}

/* Reads: get and head share this routing. */
static long route_read(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux__call *call, const char *op,
		       struct smux_error *err)
{
	enum smux_mode route = mux->mode;
	struct smux_span *span = NULL;
	struct smux_ctx child;
	long rc;

	/* A mirror's attributes come from the first replica in order with
	 * the latest write, as failover's: each replica has its own ctime,
	 * atime and inode, and two stats of one file must not flip between
	 * replicas (tar: "file changed as we read it"). Content races. */
	if (route == SMUX_MODE_MIRROR && call->op == SMUX__OP_HEAD)
		route = SMUX_MODE_FAILOVER;
	switch (route) {
	case SMUX_MODE_MIRROR:
		rc = op_enter(mux, ctx, &child, op, call->key, "race", &span,
			      err);
		if (rc == 0)
			rc = smux__exec_race(mux, &child, call, span, err);
		break;
	case SMUX_MODE_FAILOVER:
	case SMUX_MODE_SHIELD:
		/* in order; a member that missed the key's latest write is
		 * not asked (failover: the one that took it has the newest
		 * version; shield: a replica never serves an old version) */
		rc = op_enter(mux, ctx, &child, op, call->key, "sequential",
			      &span, err);
		if (rc == 0)
			rc = smux__exec_walk(mux, &child, call, true, NULL,
					     span, err);
		break;
	case SMUX_MODE_STICKY:
		/* the shard with the key's latest version, or unavailable */
		rc = op_enter(mux, ctx, &child, op, call->key, "selected",
			      &span, err);
		if (rc == 0)
			rc = smux__sticky_route(mux, &child, call, span, err);
		break;
	default:
		rc = op_enter(mux, ctx, &child, op, call->key, "selected",
			      &span, err);
		if (rc == 0)
			rc = smux__exec_sequential(mux, &child, call, false,
						   span, err);
		break;
	}
	return op_leave(mux, span, rc, err);
}

static int mux_get(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_get_opts *opts,
		   struct smux_sink *sink, struct smux_info *info,
		   struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_GET,
		.key = key,
		.get_opts = opts,
		.sink = sink,
		.info = info,
	};

	return (int)route_read(smux__mux_of(b), ctx, &call, "get", err);
}

static int mux_head(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_info *info,
		    struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_HEAD,
		.key = key,
		.info = info,
	};

	return (int)route_read(smux__mux_of(b), ctx, &call, "head", err);
}

/* Writes: put, delete and copy share this routing. */
static long route_write(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct smux__call *call, enum smux__hint_kind kind,
			const char *op, struct smux_error *err)
{
	bool fanout = fans_out_writes(mux) ||
		      (mux->mode == SMUX_MODE_STICKY && kind == SMUX__HINT_DEL);
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	rc = op_enter(mux, ctx, &child, op, call->key,
		      fanout ? "fanout" : "selected", &span, err);
	if (rc)
		return rc;
	if (mux->mode == SMUX_MODE_STICKY) {
		rc = smux__sticky_write(mux, &child, call, kind, span, err);
	} else if (fanout) {
		/* a rename, delete, link, put, copy, setattr or xattr
		 * change noted until every replica's call returned (a crash
		 * between two is rolled forward or reconciled) */
		uint64_t change;
		const char *from = smux__fan_built_from(call);

		/* a replica behind on what the change builds on is made
		 * current first, where it can be */
		if (from)
			smux__catch_up(mux, &child, from);
		(void)smux__change_begin(mux, call, &change, err);
		rc = smux__exec_fanout(mux, &child, call, kind, span, err);
		smux__change_end(mux, change);
	} else if (mux->mode == SMUX_MODE_FAILOVER) {
		rc = smux__failover_write(mux, &child, call, kind, span, err);
	} else {
		rc = smux__exec_sequential(mux, &child, call, false, span, err);
	}
	return op_leave(mux, span, rc, err);
}

static unsigned mux_caps(struct smux_backend *b);

static int mux_put(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, const struct smux_source *src,
		   const struct smux_put_opts *opts, struct smux_info *info,
		   struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_PUT,
		.key = key,
		.src = src,
		.put_opts = opts,
		.info = info,
	};
	unsigned need = opts ? smux_caps_for_mode(opts->mode) : 0;

	/* a member that cannot keep it would miss it for good (its hint
	 * never replayable): refused on all, as one backend refuses it */
	if (need && !(mux_caps(b) & need))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, b->name,
				      "put \"%s\": a member keeps no %s", key,
				      smux_caps_kept_name(need));
	return (int)route_write(smux__mux_of(b), ctx, &call, SMUX__HINT_PUT,
				"put", err);
}

/* dotnames_unseen's listing: any entry under prefix? */
struct dot_probe {
	const char *prefix;
	bool found;
};

/* Stops a listing at its first entry under @arg's prefix whose name
 * starts with '.' (what a listing hiding dot names left out). Other names
 * were in the listing the program saw, or are a failover standby's older
 * copies: a directory renamed key by key on the first member, or emptied
 * there by rm -r, is not refused for them (s42-t1: `mv dir1 ren1` on a
 * failover of WebDAV and s3 failed with ENOTEMPTY, s3 holding dir1/file). */
static int dot_entry(void *arg, const struct smux_list_entry *le)
{
	struct dot_probe *p = arg;
	size_t n = strlen(p->prefix);

	if (strncmp(le->key, p->prefix, n) != 0 || le->key[n] != '.')
		return 0;
	p->found = true;
	return 1;
}

/*
 * 0 unless @key is a directory whose listing may have lacked its dot
 * names: the listing a program saw came only from members whose listings
 * hide names starting with '.' (nginx's WebDAV) - in mirror every member
 * up (the union), in shield and failover the first one up - while a
 * member up past them keeps such names. rm -r then removed what it saw,
 * and the removal of the directory left a .hidden on that member, where
 * the directory came back with it. That member is asked whether the
 * directory holds a dot name (a listing, stopped at the first one):
 * NOT_EMPTY when it does, and nothing is removed. With no such member up
 * the removal goes on (refusing it would fail every rm -r on a mirror
 * [s3, webdav] while S3 is out): a .hidden on a member that was out comes
 * back with its directory (docs/operations.md).
 */
static long dotnames_unseen(struct smux_mux *mux, const struct smux_ctx *ctx,
			    const char *key, struct smux_error *err)
{
	struct dot_probe probe = {.prefix = key};
	bool seen = false, first = true;
	struct smux__call call = {
		.op = SMUX__OP_LIST,
		.key = key,
		.key2 = "/",
		.list_fn = dot_entry,
		.list_arg = &probe,
	};
	struct mux_member *ask = NULL;
	enum smux_outcome o;
	struct mux_view *v;
	long rc = 0;

	if (!smux_key_is_dir(key) ||
	    (mux->mode != SMUX_MODE_MIRROR && mux->mode != SMUX_MODE_SHIELD &&
	     mux->mode != SMUX_MODE_FAILOVER))
		return 0;
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n; i++) {
		bool dots = smux_backend_caps(v->m[i]->backend) &
			    SMUX_CAP_LISTS_DOTNAMES;

		if (!smux__health_is_up(&v->m[i]->health))
			continue;
		if (dots && !ask)
			ask = v->m[i];
		if (mux->mode == SMUX_MODE_MIRROR || first)
			seen = seen || dots;
		first = false;
	}
	if (!seen && ask) {
		rc = smux__attempt(mux, ctx, &call, ask, false, 0, NULL, &o,
				   err);
		if (rc < 0 && err->e.code == SMUX_E_KEY_NOT_FOUND)
			rc = 0;
		if (rc == 0 && probe.found)
			rc = smux_error_set(
				err, SMUX_E_NOT_EMPTY, mux->base.name,
				"remove %s: %s holds names under it that "
				"the listing left out",
				key, ask->name);
	}
	smux__view_put(v);
	return rc;
}

static int mux_del(struct smux_backend *b, const struct smux_ctx *ctx,
		   const char *key, struct smux_error *err)
{
	struct smux__call call = {.op = SMUX__OP_DEL, .key = key};
	struct smux_mux *mux = smux__mux_of(b);
	long rc = dotnames_unseen(mux, ctx, key, err);
	bool held;

	if (rc)
		return (int)rc;
	held = smux__intent_replacing(mux, key);
	smux__link_hints_carry(mux, ctx, key);
	rc = route_write(mux, ctx, &call, SMUX__HINT_DEL, "delete", err);
	/* a directory every replica asked refused as not empty: one may
	 * hold names under it whose deletes it missed (they were hinted
	 * while it was drained, and their replays wait: a rolling drain
	 * under rm -r, s46-t4) - those first, then once more (mirror and
	 * shield: smux__catch_up_under) */
	if (rc < 0 && err->e.code == SMUX_E_NOT_EMPTY && smux_key_is_dir(key) &&
	    smux__catch_up_under(mux, ctx, key))
		rc = route_write(mux, ctx, &call, SMUX__HINT_DEL, "delete",
				 err);
	if (rc == 0) /* an open in-place writer's file has no name now */
		smux__intent_replaced(mux, key);
	if (rc == 0 && !smux_key_is_dir(key))
		smux__linkbook_forget(mux->book, key);
	if (held)
		smux__intent_replacing_end(mux, key);
	return (int)rc;
}

/*
 * Many deletes (SMUX_CAP_DEL_MANY: every member is a server): each key is
 * one delete in the mode's write pattern, as mux_del makes it (replicas,
 * hints for the ones that miss it, a sticky key's home), run
 * SMUX_DEL_MANY_PARALLEL at a time. Not gathered into the members' own
 * del_many: what a member missed is recorded key by key.
 */
#define SMUX_DEL_MANY_PARALLEL 8

struct del_many_job {
	struct smux_backend *b;
	const struct smux_ctx *ctx;
	const char *const *keys;
	int *rcs;
	size_t n;
	atomic_size_t next;
	pthread_mutex_t lock; /* first, err */
	int first;
	struct smux_error *err;
};

static void *del_many_worker(void *arg)
{
	struct del_many_job *j = arg;
	size_t i;

	while ((i = atomic_fetch_add(&j->next, 1)) < j->n) {
		struct smux_error one;
		int rc = mux_del(j->b, j->ctx, j->keys[i], &one);

		j->rcs[i] = rc;
		if (!rc)
			continue;
		pthread_mutex_lock(&j->lock);
		if (!j->first) {
			j->first = rc;
			*j->err = one;
		}
		pthread_mutex_unlock(&j->lock);
	}
	return NULL;
}

/*
 * A failover mux of one member (what a root that is a single backend is
 * wrapped in) gives its member the batch in one call: there is no replica
 * to record hints for and no order to fall through. The call is counted
 * and judged as any of the member's (stats, health), with the mux's
 * deadline, and waited for to its end (no abandoned call left to land
 * later). A key an abandoned call may still change is deleted alone,
 * after it (mux_del). Returns 1 when the batch does not go this way.
 */
static int del_many_one(struct smux_mux *mux, const struct smux_ctx *ctx,
			const char *const *keys, size_t n, int *rcs,
			struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *m = v->n == 1 ? smux__member_get(v->m[0]) : NULL;
	const char **batch = NULL;
	size_t *where = NULL, nb = 0;
	struct smux_span *span = NULL;
	struct smux_ctx child, call;
	int rc = 1, *brcs = NULL;
	int64_t t0;

	smux__view_put(v);
	if (!m || mux->mode != SMUX_MODE_FAILOVER ||
	    !(smux_backend_caps(m->backend) & SMUX_CAP_DEL_MANY))
		goto out;
	batch = malloc(n * sizeof(*batch));
	where = malloc(n * sizeof(*where));
	brcs = malloc(n * sizeof(*brcs));
	if (!batch || !where || !brcs)
		goto out; /* one by one, then */
	for (size_t i = 0; i < n; i++) {
		rcs[i] = 1; /* not done yet */
		if (smux__member_zombie(mux, m, keys[i]))
			continue;
		where[nb] = i;
		batch[nb++] = keys[i];
	}
	if (!nb || !smux__member_enter(m))
		goto out;
	rc = op_enter(mux, ctx, &child, "delete_many", batch[0], "selected",
		      &span, err);
	if (rc == 0 &&
	    smux_ctx_derive(&call, &child,
			    mux->timeout_ms > 0 ? mux->timeout_ms * 1000000 : 0,
			    NULL) != 0)
		rc = smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				    mux->base.name, "too many cancel tokens");
	if (rc == 0) {
		t0 = smux_now_ns();
		rc = smux_backend_del_many(m->backend, &call, batch, nb, brcs,
					   err);
		smux__attempt_done(mux, &child, m, false, t0, rc ? err : NULL,
				   NULL);
		for (size_t j = 0; j < nb; j++)
			rcs[where[j]] = brcs[j];
	}
	atomic_fetch_sub(&m->health.in_flight, 1);
	rc = (int)op_leave(mux, span, rc, err);
out:
	free(batch);
	free(where);
	free(brcs);
	if (m)
		smux__member_put(m);
	return rc;
}

static int mux_del_many(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *const *keys, size_t n, int *rcs,
			struct smux_error *err)
{
	struct del_many_job j = {
		.b = b,
		.ctx = ctx,
		.keys = keys,
		.rcs = rcs,
		.n = n,
		.err = err,
	};
	pthread_t t[SMUX_DEL_MANY_PARALLEL - 1];
	size_t started = 0;
	int rc;

	rc = del_many_one(smux__mux_of(b), ctx, keys, n, rcs, err);
	if (rc != 1) {
		for (size_t i = 0; i < n; i++)
			if (rcs[i] == 0) /* as mux_del */
				smux__intent_replaced(smux__mux_of(b), keys[i]);
		/* what the batch left: keys an abandoned call may change */
		for (size_t i = 0; i < n; i++) {
			struct smux_error one;

			if (rcs[i] != 1)
				continue;
			rcs[i] = mux_del(b, ctx, keys[i], &one);
			if (rcs[i] && !rc) {
				rc = rcs[i];
				*err = one;
			}
		}
		return rc;
	}
	atomic_init(&j.next, 0);
	pthread_mutex_init(&j.lock, NULL);
	while (started < SMUX_DEL_MANY_PARALLEL - 1 && started + 1 < n &&
	       pthread_create(&t[started], NULL, del_many_worker, &j) == 0)
		started++;
	del_many_worker(&j); /* this thread too: none started is no failure */
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_destroy(&j.lock);
	return j.first;
}

/* The user. extended attributes of @src given to @dst (a copy through the
 * mux: the put made a new object without them; rsync -aX on sticky-by-key
 * kept none, s41-t2). Nothing where the tree keeps none. */
static int copy_xattrs(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *src, const char *dst, struct smux_error *err)
{
	char *names = NULL, *value = NULL;
	size_t n_names = 0, n;
	int rc = 0;

	if (!(mux_caps(b) & SMUX_CAP_XATTR))
		return 0;
	names = malloc(SMUX_XATTR_SIZE_MAX);
	value = malloc(SMUX_XATTR_SIZE_MAX);
	if (!names || !value) {
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, b->name,
				    "copy of %s: xattr buffers", src);
		goto out;
	}
	rc = smux_backend_listxattr(b, ctx, src, names, SMUX_XATTR_SIZE_MAX,
				    &n_names, err);
	for (size_t at = 0; rc == 0 && at < n_names;
	     at += strlen(names + at) + 1) {
		rc = smux_backend_getxattr(b, ctx, src, names + at, value,
					   SMUX_XATTR_SIZE_MAX, &n, err);
		if (rc < 0 && err->e.code == SMUX_E_NO_ATTR) {
			rc = 0; /* removed meanwhile */
			continue;
		}
		if (rc == 0)
			rc = smux_backend_setxattr(b, ctx, dst, names + at,
						   value, n, 0, err);
	}
out:
	free(value);
	free(names);
	return rc;
}

/* Copy through the mux itself (get into a temporary file, then put): for
 * sticky-by-key, where source and destination may live on two shards. */
static int copy_through(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err)
{
	struct smux_get_opts all = {.length = SMUX_LEN_ALL};
	struct smux_source source;
	struct smux_put_opts po = {0};
	struct smux_info info;
	struct smux_sink sink;
	int fd, rc;

	fd = smux_tmpfile(b->name, "copy", err);
	if (fd < 0)
		return fd;
	smux_sink_fd(&sink, fd, 0);
	rc = mux_get(b, ctx, src, &all, &sink, &info, err);
	if (rc == 0) {
		/* a copy keeps the type (a symlink stays one), owner,
		 * mode and mtime */
		smux_put_opts_keep(&po, &info);
		smux_source_fd(&source, fd, 0, sink.written);
		rc = mux_put(b, ctx, dst, &source, &po, NULL, err);
	}
	close(fd);
	if (rc == 0 && !S_ISLNK(info.mode) && !S_ISFIFO(info.mode) &&
	    !S_ISSOCK(info.mode))
		rc = copy_xattrs(b, ctx, src, dst, err);
	return rc;
}

static int mux_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {.op = SMUX__OP_COPY, .key = src, .key2 = dst};

	if (mux->mode == SMUX_MODE_STICKY)
		return copy_through(b, ctx, src, dst, err);
	return (int)route_write(mux, ctx, &call, SMUX__HINT_PUT, "copy", err);
}

/*
 * A replica that made a call of mux_every_member and could not undo it
 * holds another tree than the others: stale for every key until a full
 * resync from another member (a rejoin hint, mux_rejoin.c), which puts
 * both names, and everything under them, back as the others hold them.
 * Members that hold different keys (round-robin, weighted) have no copy
 * to resync from: theirs stays as the undo left it.
 */
static void undo_failed(struct smux_mux *mux, struct mux_member *m)
{
	struct smux_error err;

	if (mux->mode != SMUX_MODE_MIRROR && mux->mode != SMUX_MODE_SHIELD &&
	    mux->mode != SMUX_MODE_FAILOVER)
		return;
	/* a journal that fails too leaves nothing more to do here */
	(void)smux__hints_add(mux->hints, m->name, SMUX__REJOIN_KEY,
			      SMUX__HINT_PUT, NULL, &err);
}

/*
 * @call on every member at once, all or nothing (a directory rename in
 * one call per member, an exchange): with a member down or draining, or
 * a hint pending (a replica that missed a key would get it back under
 * the old name), it is NOT_SUPPORTED and the caller does without; a
 * member failing after others succeeded is undone on those (@undo, the
 * same call with its keys the other way). A member without either key
 * has nothing to do. @cap: what every member must be able to do; @what
 * names the call in errors ("rename of directory", "exchange").
 */
static long mux_every_member(struct smux_mux *mux, const struct smux_ctx *ctx,
			     const struct smux__call *call,
			     const struct smux__call *undo, unsigned cap,
			     const char *what, struct smux_error *err)
{
	struct smux__fan *f;
	struct mux_view *v;
	bool found = false, undone = true;
	enum smux_outcome o = SMUX_OUTCOME_OK;
	long rc = 0;

	if (mux->mode == SMUX_MODE_STICKY || !(mux_caps(&mux->base) & cap))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, mux->base.name,
				      "%s \"%s\" in one call", what, call->key);
	if (smux_mux_pending_hints(&mux->base))
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, mux->base.name,
				      "%s \"%s\": hints pending", what,
				      call->key);
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n; i++)
		if (smux__health_status(&v->m[i]->health) != SMUX_STATUS_UP)
			rc = smux_error_set(err, SMUX_E_NOT_SUPPORTED,
					    v->m[i]->name,
					    "%s \"%s\": a member is not up",
					    what, call->key);
	f = (rc || v->n > SMUX__FAN_MAX) ? NULL : malloc(sizeof(*f));
	if (!f) {
		if (!rc)
			rc = smux_error_set(
				err, SMUX_E_NOT_SUPPORTED, mux->base.name,
				"%s \"%s\": not in one call", what, call->key);
		smux__view_put(v);
		return rc;
	}
	/* every member at once (the fan-out primitive: a member draining
	 * since is not called, and that fails the call) */
	f->mux = mux;
	f->n = v->n;
	f->spans = false;
	f->start = NULL;
	f->start_arg = NULL;
	f->wkey = NULL;
	for (unsigned i = 0; i < v->n; i++) {
		f->m[i] = v->m[i];
		f->go[i] = true;
		f->probe[i] = false;
		f->call[i] = *call;
	}
	smux__fan_run(f, ctx, NULL);
	for (unsigned i = 0; i < f->n; i++) {
		if (f->ok[i])
			found = true;
		else if (f->err[i].e.code != SMUX_E_KEY_NOT_FOUND && !rc) {
			/* nothing of it on a member is no failure */
			*err = f->err[i];
			rc = -err->e.sys_errno;
			o = smux_classify(&err->e);
		}
	}
	if (rc < 0) {
		/* all or nothing: undo where it was done */
		for (unsigned i = 0; i < f->n; i++) {
			f->go[i] = f->ok[i];
			f->call[i] = *undo;
		}
		smux__fan_run(f, ctx, NULL);
		for (unsigned i = 0; i < f->n; i++)
			if (f->go[i] && !f->ok[i]) {
				undo_failed(mux, f->m[i]);
				undone = false;
			}
		/* a member failing or hung (not refusing), the others as
		 * they were: the caller does without the one call, as with
		 * a member down - key by key, the failing one hinted. Its
		 * error was the first directory mv's answer while a mirror's
		 * or shield's copy started failing (s41-t2) */
		if (undone && (o == SMUX_OUTCOME_TRANSIENT ||
			       o == SMUX_OUTCOME_TIMEOUT)) {
			struct smux_error_info cause = err->e;

			rc = smux_error_set(
				err, SMUX_E_NOT_SUPPORTED, mux->base.name,
				"%s \"%s\": a member failed", what, call->key);
			err->cause = cause;
			err->has_cause = true;
		}
	} else if (!found) {
		rc = smux_error_set(err, SMUX_E_KEY_NOT_FOUND, mux->base.name,
				    "%s: no \"%s\"", what, call->key);
	}
	free(f);
	smux__view_put(v);
	return rc;
}

/*
 * A directory "a/" renamed to "b/" in one call per member
 * (SMUX_CAP_DIR_RENAME): every member holding the directory renames it in
 * its own tree, atomically there; all or nothing (mux_every_member). Where
 * it cannot, NOT_SUPPORTED, and the caller moves key by key, with hints.
 */
static long mux_rename_dir(struct smux_mux *mux, const struct smux_ctx *ctx,
			   const char *src, const char *dst,
			   struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_RENAME,
		.key = src,
		.key2 = dst,
	};
	struct smux__call undo = {
		.op = SMUX__OP_RENAME,
		.key = dst,
		.key2 = src,
	};

	return mux_every_member(mux, ctx, &call, &undo, SMUX_CAP_DIR_RENAME,
				"rename of directory", err);
}

/*
 * Exchange (SMUX_CAP_EXCHANGE): every member swaps the two names in its
 * own tree, atomically there; all or nothing (mux_every_member). Not
 * where a member is not up or a hint is pending: the program is told
 * EINVAL (no exchange), as by a filesystem without it, and nothing moved.
 */
static int mux_exchange(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *a, const char *bname,
			struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {
		.op = SMUX__OP_EXCHANGE,
		.key = a,
		.key2 = bname,
	};
	struct smux_span *span;
	struct smux_ctx child;
	bool held_a, held_b;
	long rc;

	/* both names go to another file (mux_writer.c join_late) */
	held_a = smux__intent_replacing(mux, a);
	held_b = smux__intent_replacing(mux, bname);
	rc = op_enter(mux, ctx, &child, "exchange", a, "all", &span, err);
	if (rc == 0)
		rc = mux_every_member(mux, &child, &call, &call,
				      SMUX_CAP_EXCHANGE, "exchange", err);
	rc = op_leave(mux, span, rc, err);
	if (held_b)
		smux__intent_replacing_end(mux, bname);
	if (held_a)
		smux__intent_replacing_end(mux, a);
	return (int)rc;
}

/* mux_rename of a file, with its names counted as replacing */
static int rename_file(struct smux_backend *b, struct smux_mux *mux,
		       const struct smux_ctx *ctx, struct smux__call *call,
		       const char *src, const char *dst, struct smux_error *err)
{
	struct smux_span *span;
	struct smux_ctx child;
	long lrc;
	int rc;

	if (mux->mode == SMUX_MODE_STICKY) {
		/* within one shard: one rename there (s41-t2: a copy split
		 * the file's hard links, dropped its xattrs, filled its
		 * holes); across two: a copy, then the delete */
		lrc = op_enter(mux, ctx, &child, "rename", dst, "selected",
			       &span, err);
		if (lrc == 0)
			lrc = smux__sticky_rename(mux, &child, call, span, err);
		if (lrc != 1)
			return (int)op_leave(mux, span, lrc, err);
		(void)op_leave(mux, span, 0, err);
		rc = copy_through(b, ctx, src, dst, err);
		rc = rc ? rc : mux_del(b, ctx, src, err);
	} else {
		rc = (int)route_write(mux, ctx, call, SMUX__HINT_PUT, "rename",
				      err);
	}
	/* an open in-place writer of @dst writes a file without the name
	 * now (one of @src follows its file: the caller reopens it) */
	if (rc == 0)
		smux__intent_replaced(mux, dst);
	return rc;
}

/*
 * Rename: the members rename in the mode's write pattern (every replica in
 * shield and mirror, with hints for the ones that miss it; in failover the
 * first member with the latest versions of both keys, and hints - put the
 * destination, delete the source - for the members ahead of it);
 * sticky-by-key moves the object through the mux, since the two keys may
 * live on two shards.
 */
static int mux_rename(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {
		.op = SMUX__OP_RENAME,
		.key = src,
		.key2 = dst,
	};
	struct smux_span *span;
	struct smux_ctx child;
	bool held_src, held_dst;
	long lrc;
	int rc;

	if (smux_key_is_dir(src)) {
		lrc = op_enter(mux, ctx, &child, "rename", src, "all", &span,
			       err);
		if (lrc == 0)
			lrc = mux_rename_dir(mux, &child, src, dst, err);
		if (lrc == 0)
			smux__linkbook_rename(mux->book, src, dst);
		return (int)op_leave(mux, span, lrc, err);
	}
	/* both names may go to another file on a member from here: an
	 * open writer of either does not take a replica in meanwhile
	 * (mux_writer.c join_late) */
	held_src = smux__intent_replacing(mux, src);
	held_dst = smux__intent_replacing(mux, dst);
	smux__link_hints_carry(mux, ctx, dst); /* a name it replaces */
	rc = rename_file(b, mux, ctx, &call, src, dst, err);
	if (rc == 0)
		smux__linkbook_rename(mux->book, src, dst);
	if (held_dst)
		smux__intent_replacing_end(mux, dst);
	if (held_src)
		smux__intent_replacing_end(mux, src);
	return rc;
}

/*
 * Hard link: routed like rename (every replica in shield and mirror, each
 * linking in its own tree, with a hint to put the destination for a
 * replica that misses it - the replay then makes a copy, not a link; the
 * selected member in failover, round-robin and weighted). Sticky-by-key:
 * on the shard both names hash to, else EXDEV (smux__sticky_link).
 */
static int mux_link(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *src, const char *dst, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {
		.op = SMUX__OP_LINK,
		.key = src,
		.key2 = dst,
	};
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	if (mux->mode != SMUX_MODE_STICKY) {
		rc = route_write(mux, ctx, &call, SMUX__HINT_PUT, "link", err);
		/* the names of its file a replay compares or links
		 * (mux_repair.c), and a replica that missed it links at the
		 * replay, not copies */
		if (rc >= 0)
			smux__linkbook_link(mux->book, src, dst);
		if (rc >= 0 && smux__hints_pending_replicas(mux->hints) > 0)
			smux__link_memo_missed(mux, ctx, src, dst);
		return (int)rc;
	}
	rc = op_enter(mux, ctx, &child, "link", dst, "selected", &span, err);
	if (rc == 0)
		rc = smux__sticky_link(mux, &child, &call, span, err);
	return (int)op_leave(mux, span, rc, err);
}

/* Attributes change where the object is: every replica in shield and
 * mirror; the shard that holds the key in sticky-by-key; in failover the
 * first member with the key's latest version. */
static int mux_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
		       const char *key, const struct smux_setattr *attr,
		       struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {
		.op = SMUX__OP_SETATTR,
		.key = key,
		.setattr = attr,
	};
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	if (mux->mode != SMUX_MODE_STICKY)
		return (int)route_write(mux, ctx, &call, SMUX__HINT_PUT,
					"setattr", err);
	rc = op_enter(mux, ctx, &child, "setattr", key, "selected", &span, err);
	if (rc == 0 && smux_key_is_dir(key)) /* on every shard */
		rc = smux__sticky_change_dir(mux, &child, &call, span, err);
	else if (rc == 0)
		rc = smux__sticky_route(mux, &child, &call, span, err);
	return (int)op_leave(mux, span, rc, err);
}

/*
 * Durability goes where the key is, as attributes do (mux_setattr): every
 * replica in shield and mirror; in failover the first member with the
 * key's latest version; in sticky-by-key the shard that holds the key,
 * and every shard for the root (it is on all of them). The write policy
 * (quorum, fanout-partial) applies, but a member that missed a sync gets
 * no hint: the writes a sync makes durable carry their own, and their
 * replay is a durable put.
 */
static int mux_sync(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *key, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {.op = SMUX__OP_SYNC, .key = key};
	bool root = key[0] == '\0';
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	if (mux->mode != SMUX_MODE_STICKY)
		return (int)route_write(mux, ctx, &call, SMUX__HINT_NONE,
					"sync", err);
	rc = op_enter(mux, ctx, &child, "sync", key,
		      root ? "fanout" : "selected", &span, err);
	if (rc == 0 && root)
		rc = smux__exec_fanout(mux, &child, &call, SMUX__HINT_NONE,
				       span, err);
	else if (rc == 0)
		rc = smux__sticky_route(mux, &child, &call, span, err);
	return (int)op_leave(mux, span, rc, err);
}

/* ---- extended attributes ---- */

/* getxattr/listxattr are reads, routed like head; *@out_len takes the
 * length the member that answered gave. */
static int mux_xattr_read(struct smux_backend *b, const struct smux_ctx *ctx,
			  enum smux__op op, const char *key, const char *name,
			  void *buf, size_t size, size_t *out_len,
			  struct smux_error *err)
{
	long n = 0;
	struct smux__call call = {
		.op = op,
		.key = key,
		.key2 = name,
		.rbuf = buf,
		.len = size,
		.nread = &n,
	};
	long rc = route_read(smux__mux_of(b), ctx, &call,
			     op == SMUX__OP_GETXATTR ? "getxattr" : "listxattr",
			     err);

	if (rc < 0)
		return (int)rc;
	*out_len = (size_t)rc;
	return 0;
}

static int mux_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, void *buf,
			size_t size, size_t *out_len, struct smux_error *err)
{
	return mux_xattr_read(b, ctx, SMUX__OP_GETXATTR, key, name, buf, size,
			      out_len, err);
}

static int mux_listxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, char *buf, size_t size,
			 size_t *out_len, struct smux_error *err)
{
	return mux_xattr_read(b, ctx, SMUX__OP_LISTXATTR, key, NULL, buf, size,
			      out_len, err);
}

/*
 * setxattr/removexattr change the object where it is, as setattr does
 * (every replica in shield and mirror; the shard that holds the key in
 * sticky-by-key; in failover the first member with the key's latest
 * version). A replica that misses one gets a put hint: the replay copies
 * the object from a replica that has it, content, mode, owner and times,
 * but not its extended attributes (a copy carries none); until a later
 * setxattr reaches it, that replica answers without them.
 */
static int mux_xattr_write(struct smux_backend *b, const struct smux_ctx *ctx,
			   struct smux__call *call, const char *op,
			   struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	if (mux->mode != SMUX_MODE_STICKY)
		return (int)route_write(mux, ctx, call, SMUX__HINT_PUT, op,
					err);
	rc = op_enter(mux, ctx, &child, op, call->key, "selected", &span, err);
	if (rc == 0 && smux_key_is_dir(call->key)) /* as mux_setattr */
		rc = smux__sticky_change_dir(mux, &child, call, span, err);
	else if (rc == 0)
		rc = smux__sticky_route(mux, &child, call, span, err);
	return (int)op_leave(mux, span, rc, err);
}

static int mux_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, const void *value,
			size_t size, int flags, struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_SETXATTR,
		.key = key,
		.key2 = name,
		.wbuf = value,
		.len = size,
		.flags = (unsigned)flags,
	};

	return mux_xattr_write(b, ctx, &call, "setxattr", err);
}

static int mux_removexattr(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, const char *name,
			   struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_REMOVEXATTR,
		.key = key,
		.key2 = name,
	};

	return mux_xattr_write(b, ctx, &call, "removexattr", err);
}

static int mux_list(struct smux_backend *b, const struct smux_ctx *ctx,
		    const char *prefix, const char *delimiter, smux_list_fn fn,
		    void *arg, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {
		.op = SMUX__OP_LIST,
		.key = prefix,
		.key2 = delimiter,
		.list_fn = fn,
		.list_arg = arg,
	};
	bool by_order = mux->mode == SMUX_MODE_FAILOVER ||
			mux->mode == SMUX_MODE_SHIELD;
	bool un =
		mux->mode == SMUX_MODE_STICKY || mux->mode == SMUX_MODE_MIRROR;
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	rc = op_enter(mux, ctx, &child, "list", prefix,
		      un ? "union" : "selected", &span, err);
	if (rc)
		return (int)rc;
	if (un)
		rc = smux__exec_list_union(mux, &child, prefix, delimiter, fn,
					   arg, span, err);
	else if (mux->mode == SMUX_MODE_FAILOVER ||
		 mux->mode == SMUX_MODE_SHIELD)
		/* the first member up answers, corrected by its pending
		 * hints: a shield's origin just undrained listed 2 to 14 of
		 * the 100 files made while it was out (s45-t4) */
		rc = smux__exec_list_failover(mux, &child, &call, span, err);
	else
		rc = smux__exec_sequential(mux, &child, &call, by_order, span,
					   err);
	return (int)op_leave(mux, span, rc, err);
}

static int mux_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			   struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {.op = SMUX__OP_HEALTHCHECK};
	struct smux_span *span;
	struct smux_ctx child;
	long rc;

	rc = op_enter(mux, ctx, &child, "healthcheck", NULL, "sequential",
		      &span, err);
	if (rc == 0)
		rc = smux__exec_sequential(mux, &child, &call, true, span, err);
	return (int)op_leave(mux, span, rc, err);
}

/*
 * The space of a mux that spreads keys over its members (sticky-by-key,
 * round-robin, weighted): what every member that is up holds, summed, a
 * filesystem two members share counted once (as mergerfs sums its
 * branches). df on a sticky mount of three shards showed the first
 * shard's alone (s41-t2). 0 when one member answered, else its error.
 */
static long statfs_sum(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux_statfs *out, struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	uint64_t seen[SMUX__FAN_MAX];
	unsigned n_seen = 0, got = 0;
	long rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
				 "no backend is available");

	memset(out, 0, sizeof(*out));
	out->has_avail = true;
	for (unsigned i = 0; i < v->n; i++) {
		struct smux_statfs one = {0};
		struct smux__call call = {.op = SMUX__OP_STATFS,
					  .statfs = &one};
		struct smux_error e;
		bool dup = false;

		if (!smux__health_is_up(&v->m[i]->health) ||
		    smux__member_call(mux, ctx, v->m[i], &call, false, &e) < 0)
			continue;
		for (unsigned k = 0; one.has_fsid && k < n_seen; k++)
			dup = dup || seen[k] == one.fsid;
		if (dup)
			continue;
		if (one.has_fsid && n_seen < SMUX__FAN_MAX)
			seen[n_seen++] = one.fsid;
		out->total_bytes += one.total_bytes;
		out->free_bytes += one.free_bytes;
		out->avail_bytes +=
			one.has_avail ? one.avail_bytes : one.free_bytes;
		out->total_files += one.total_files;
		out->free_files += one.free_files;
		got++;
	}
	smux__view_put(v);
	if (got) {
		smux_error_clear(err);
		rc = 0;
	}
	return rc;
}

static int mux_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
		      struct smux_statfs *out, struct smux_error *err)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux__call call = {.op = SMUX__OP_STATFS, .statfs = out};
	struct smux_span *span;
	struct smux_ctx child;
	bool spread = mux->mode == SMUX_MODE_STICKY ||
		      mux->mode == SMUX_MODE_ROUND_ROBIN ||
		      mux->mode == SMUX_MODE_WEIGHTED;
	long rc;

	rc = op_enter(mux, ctx, &child, "statfs", NULL,
		      spread ? "all" : "sequential", &span, err);
	if (rc == 0 && spread)
		rc = statfs_sum(mux, &child, out, err);
	else if (rc == 0)
		rc = smux__exec_sequential(mux, &child, &call, true, span, err);
	/* shards hold different directories: one's count is not the tree's */
	if (rc == 0 && mux->mode == SMUX_MODE_STICKY)
		out->has_root_dirs = false;
	return (int)op_leave(mux, span, rc, err);
}

/* A mux can what every current member can (an empty mux: nothing). */
static unsigned mux_caps(struct smux_backend *b)
{
	struct mux_view *v = smux__view_get(smux__mux_of(b));
	unsigned caps = v->n ? ~0U : 0;

	for (size_t i = 0; i < v->n; i++)
		caps &= smux_backend_caps(v->m[i]->backend);
	/* two members: a commit records hints and applies the write
	 * policy, which the caller must hear at close */
	if (v->n != 1)
		caps &= ~(unsigned)SMUX_CAP_ONE_COPY;
	smux__view_put(v);
	/* a mux's call may wait for probes and retries: never run on a
	 * parent's caller thread (backend.h) */
	caps &= ~(unsigned)SMUX_CAP_INLINE;
	/* two shards: "a" and "a/" may route to different members (hard
	 * links stay: on the shard both names hash to, mux_link) */
	if (smux__mux_of(b)->mode == SMUX_MODE_STICKY)
		caps &= ~(unsigned)(SMUX_CAP_DIR_RENAME | SMUX_CAP_HEAD_DIR |
				    SMUX_CAP_EXCHANGE);
	/* a writer of several targets, or of one a head would not ask
	 * (round-robin, weighted, a sticky handoff), cannot stand for the
	 * head of an open */
	if (smux__mux_of(b)->mode != SMUX_MODE_FAILOVER)
		caps &= ~(unsigned)SMUX_CAP_OPEN_EXISTING;
	return caps;
}

/* A mux takes the keys every current member takes. */
static size_t mux_key_max(struct smux_backend *b)
{
	struct mux_view *v = smux__view_get(smux__mux_of(b));
	size_t n = SMUX_KEY_MAX;

	for (size_t i = 0; i < v->n; i++) {
		size_t m = smux_backend_key_max(v->m[i]->backend);

		if (m < n)
			n = m;
	}
	smux__view_put(v);
	return n;
}

/* What any member can never hold, the mux refuses (a mirror would store
 * it on the others and keep a hint that never replays). */
static bool mux_key_refused(struct smux_backend *b, const char *key)
{
	struct mux_view *v = smux__view_get(smux__mux_of(b));
	bool refused = false;

	for (size_t i = 0; i < v->n && !refused; i++)
		refused = smux_backend_key_refused(v->m[i]->backend, key);
	smux__view_put(v);
	return refused;
}

/* ---- for mux_reader.c ---- */

int smux__mux_op_enter(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux_ctx *child, const char *op, const char *key,
		       const char *policy, struct smux_span **span,
		       struct smux_error *err)
{
	return op_enter(mux, ctx, child, op, key, policy, span, err);
}

long smux__mux_op_leave(struct smux_mux *mux, struct smux_span *span, long rc,
			struct smux_error *err)
{
	return op_leave(mux, span, rc, err);
}

long smux__mux_route_read(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct smux__call *call, const char *op,
			  struct smux_error *err)
{
	return route_read(mux, ctx, call, op, err);
}

static const struct smux_backend_ops mux_ops = {
	.kind = "mux",
	.get = mux_get,
	.put = mux_put,
	.del = mux_del,
	.del_many = mux_del_many,
	.head = mux_head,
	.list = mux_list,
	.copy = mux_copy,
	.rename = mux_rename,
	.exchange = mux_exchange,
	.setattr = mux_setattr,
	.sync = mux_sync,
	.healthcheck = mux_healthcheck,
	.statfs = mux_statfs,
	.writer_open = smux__mux_writer_open,
	.reader_open = smux__mux_reader_open,
	.caps = mux_caps,
	.link = mux_link,
	.key_max = mux_key_max,
	.key_refused = mux_key_refused,
	.getxattr = mux_getxattr,
	.setxattr = mux_setxattr,
	.listxattr = mux_listxattr,
	.removexattr = mux_removexattr,
	.destroy = mux_destroy,
};
