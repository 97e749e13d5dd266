/* SPDX-License-Identifier: MIT */
/*
 * mux_sticky.c - sticky-by-key as a filesystem needs it (DESIGN section
 * 3): placement, handoff while a shard is out, and the replay that moves
 * a key home.
 *
 * Placement. A key's home is fnv1a(key) % n over every member of the view,
 * up or not (the seed's placement while all are up); an outage never moves
 * it. Every walk over the shards for a key goes home, home + 1, ... mod n
 * (the cursor, mux_select.c).
 *
 * Handoff. A put goes home; while home is down or fails transiently it
 * falls through to the next shard in that order, and before the write is
 * acknowledged home gets a durable hint of the write's kind and every
 * shard passed over between home and the one that took it a delete hint
 * (smux__sticky_missed). Hence the rule the rest relies on: for a key, the
 * first shard from home on without a pending hint for it - its holder -
 * has its latest version, and every other shard with a hint holds an older
 * copy or none. A delete goes to every shard (a handoff copy goes too);
 * one that misses it gets a delete hint (smux__fanout_policy).
 *
 * Reads (and setattr, xattrs, sync) go to the holder only
 * (smux__sticky_route). The holder down or failing is UNAVAILABLE (EIO),
 * not "not found": another shard has at most an older copy, and a program
 * told ENOENT would create a second version that the recovered shard
 * contradicts. Home answering "not found" looks on the other shards for
 * keys placed before these rules (by the seed's `% healthy`); a head of a
 * directory (on every shard that holds a key under it) is answered by any
 * shard.
 *
 * Supersede. A write that reaches a shard makes that shard's hint for the
 * key moot: it now has the latest version. A write that reaches home while
 * home still waits for a handoff's replay therefore ends that hint (reads
 * go home at once); the handoff copy left on the holder is then
 * unreachable (no read asks a shard after an unhinted home for a key it
 * has) and gets a delete hint, so the replay removes it.
 *
 * Replay (smux__sticky_replay, from mux_repair.c's dispatch): home's put
 * hint copies the key from the holder to home, ends the hint, then
 * deletes the holder's copy (a delete hint for it when that fails); a
 * delete hint - home's, or a copy off home - deletes. Writes of a key and
 * the replay of its hints hold the key's gate (one at a time per key), so
 * the check "hint still pending" and the copy are one step for writers:
 * a replay never lands on top of a newer write, and a newer write never
 * lands between a replay's copy and its end.
 *
 * A shard removed at run time leaves its slot (mux_sticky_slot.c): n and
 * every home stay, the shard is out of service as a drained one, and the
 * same name added back fills the slot. A shard of a new name changes n
 * and so most homes; a key then lives off its new home until it is
 * written again, found by the lookup of keys placed before these rules.
 * A writer that starts from such a key opens where it lives
 * (smux__sticky_placed), and its commit hints home, whose replay moves the
 * key there. No rebalancing of the others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mux_internal.h"

static void emit(struct smux_mux *mux, struct smux_event *ev)
{
	snprintf(ev->mux, sizeof(ev->mux), "%s", mux->base.name);
	smux_events_emit(mux->events, ev);
}

unsigned smux__sticky_home(const struct mux_view *v, const char *key)
{
	if (!key || v->n == 0)
		return 0;
	return smux_fnv1a(key, strlen(key)) % v->n;
}

void (*smux__sticky_hook_replay_copied)(const char *key);
void (*smux__sticky_hook_gate_wait)(const char *key);
void (*smux__sticky_hook_acked)(const char *key);

/* ---- the key gate ---- */

/* Caller holds sticky_lock. */
static bool gate_held(struct smux_mux *mux, const char *key)
{
	for (struct mux_sticky_gate *g = mux->sticky_gates; g; g = g->next)
		if (strcmp(g->key, key) == 0)
			return true;
	return false;
}

void smux__sticky_gate_enter(struct smux_mux *mux, struct mux_sticky_gate *g,
			     const char *key)
{
	g->key = key ? key : "";
	pthread_mutex_lock(&mux->sticky_lock);
	while (gate_held(mux, g->key)) {
		if (smux__sticky_hook_gate_wait)
			smux__sticky_hook_gate_wait(g->key);
		pthread_cond_wait(&mux->sticky_cond, &mux->sticky_lock);
	}
	g->next = mux->sticky_gates;
	mux->sticky_gates = g;
	pthread_mutex_unlock(&mux->sticky_lock);
}

void smux__sticky_gate_leave(struct smux_mux *mux, struct mux_sticky_gate *g)
{
	struct mux_sticky_gate **pp;

	pthread_mutex_lock(&mux->sticky_lock);
	for (pp = &mux->sticky_gates; *pp != g; pp = &(*pp)->next)
		;
	*pp = g->next;
	pthread_cond_broadcast(&mux->sticky_cond);
	pthread_mutex_unlock(&mux->sticky_lock);
}

/* ---- one call ---- */

/* The first shard of @v from home + @from on (in order, mod n) without a
 * pending hint for @key; -1 when there is none. With @from 0: the holder
 * of @key, the shard with its latest version. */
static int holder_from(struct smux_mux *mux, struct mux_view *v, unsigned home,
		       unsigned from, const char *key)
{
	for (unsigned k = from; k < v->n; k++) {
		unsigned i = (home + k) % v->n;

		if (!smux__member_stale(mux, v->m[i], key))
			return (int)i;
	}
	return -1;
}

static bool view_has(const struct mux_view *v, const struct mux_member *m)
{
	for (unsigned i = 0; i < v->n; i++)
		if (v->m[i] == m)
			return true;
	return false;
}

/* @m, or the member of @v of its name when @m left the view: removed
 * (its slot, mux_sticky_slot.c) or removed and added back since it took
 * a write. It holds what @m took. */
static struct mux_member *in_view(const struct mux_view *v,
				  struct mux_member *m)
{
	if (view_has(v, m))
		return m;
	for (unsigned i = 0; i < v->n; i++)
		if (strcmp(v->m[i]->name, m->name) == 0)
			return v->m[i];
	return m;
}

bool smux__sticky_holds(struct smux_mux *mux, struct mux_member *m,
			const char *key)
{
	struct mux_view *v = smux__view_get(mux);
	int h = v->n ? holder_from(mux, v, smux__sticky_home(v, key), 0, key)
		     : -1;
	bool yes = h >= 0 && v->m[h] == m;

	smux__view_put(v);
	return yes;
}

/* The caller gave up or ran out of time, or its own sink or source
 * failed (LOCAL): its error, as it is, no shard's. */
static bool callers_end(const struct smux_ctx *ctx, enum smux_outcome o)
{
	return o == SMUX_OUTCOME_ABORT || o == SMUX_OUTCOME_LOCAL ||
	       (o == SMUX_OUTCOME_TIMEOUT &&
		smux_ctx_state(ctx) != SMUX_CANCEL_NONE);
}

/* ---- routing ---- */

/*
 * Asks the shards after @home (not those with a hint for the key, nor
 * those down) for @call's key, first answer wins: keys placed before the
 * handoff rules, or (@dirs_only) a directory, which is on every shard that
 * holds a key under it. *@found tells whether one answered (the call's
 * result, or without @dirs_only a final error other than "not found", is
 * returned); else 0, or the caller's abort as its error.
 */
static long find_off_home_at(struct smux_mux *mux, const struct smux_ctx *ctx,
			     struct mux_view *v, unsigned home,
			     struct smux__call *call, bool dirs_only,
			     struct smux_span *span, bool *found, int *at,
			     bool *missed, struct smux_error *err)
{
	*found = false;
	*at = -1;
	*missed = false;
	for (unsigned k = 1; k < v->n; k++) {
		struct mux_member *m = v->m[(home + k) % v->n];
		enum smux_outcome o;
		struct smux_error e;
		bool probe = false;
		long rc;

		/* requests never probe: the background thread does */
		if (smux__member_stale(mux, m, call->key))
			continue;
		if (!smux__health_is_up(&m->health)) {
			*missed = true; /* it may hold the key */
			continue;
		}
		rc = smux__attempt(mux, ctx, call, m, probe, k, span, &o, &e);
		if (rc < 0 && o != SMUX_OUTCOME_SEMANTIC)
			*missed = true;
		if (rc >= 0 && (!dirs_only || smux_key_is_dir(call->key) ||
				(call->info && S_ISDIR(call->info->mode)))) {
			*found = true;
			*at = (int)((home + k) % v->n);
			return rc;
		}
		if (rc < 0 && callers_end(ctx, o)) {
			*err = e;
			return rc;
		}
		/* a shard's final answer other than "not found" (IS_DIRECTORY
		 * for a get of a directory) is the answer */
		if (rc < 0 && !dirs_only && o == SMUX_OUTCOME_SEMANTIC &&
		    e.e.code != SMUX_E_KEY_NOT_FOUND) {
			*found = true;
			*err = e;
			return rc;
		}
		/* a get that delivered part of an object starts over */
		if (call->op == SMUX__OP_GET && call->sink->written > 0 &&
		    smux_sink_rewind(call->sink) != 0) {
			*err = e;
			return rc < 0 ? rc : -EIO;
		}
	}
	return 0;
}

static long find_off_home(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct mux_view *v, unsigned home,
			  struct smux__call *call, bool dirs_only,
			  struct smux_span *span, bool *found,
			  struct smux_error *err)
{
	bool missed;
	int at;

	return find_off_home_at(mux, ctx, v, home, call, dirs_only, span, found,
				&at, &missed, err);
}

/*
 * The shard a writer that starts from @key's object opens on (under the
 * key's gate): the holder, when it is a handoff shard or holds the key;
 * else (home answers "not found") the shard off home that holds it - a key
 * placed before the shard list grew, which lives where it was written
 * until it is written again (a writer opened on the new, empty home
 * started from nothing: `>>` kept only the appended bytes, a truncate
 * zeros). Its commit then hints home, whose replay moves the key there
 * (smux__sticky_missed). *@out: a reference (smux__member_put), or NULL
 * when no shard holds the latest version. Unavailable when home could not
 * say, or said "not found" while a shard that may hold the key could not
 * be asked: opened on home, the writer would start from nothing.
 */
int smux__sticky_placed(struct smux_mux *mux, const struct smux_ctx *ctx,
			const char *key, struct mux_member **out,
			struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *m = NULL;
	struct smux_info info;
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	enum smux_outcome o;
	struct smux_error e;
	bool found, missed;
	unsigned home;
	int h, at, rc = 0;
	long r;

	if (v->n == 0)
		goto out;
	home = smux__sticky_home(v, key);
	h = holder_from(mux, v, home, 0, key);
	if (h < 0)
		goto out;
	m = v->m[h];
	if ((unsigned)h != home || !smux__health_is_up(&m->health))
		goto out;
	r = smux__attempt(mux, ctx, &head, m, false, 0, NULL, &o, &e);
	if (r >= 0)
		goto out;
	if (o != SMUX_OUTCOME_SEMANTIC) {
		*err = e;
		rc = smux_error_wrap(
			err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			"%s, the home of %s, did not answer", m->name, key);
		m = NULL;
		goto out;
	}
	if (e.e.code != SMUX_E_KEY_NOT_FOUND)
		goto out; /* the open on home answers the same */
	head = (struct smux__call){
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	r = find_off_home_at(mux, ctx, v, home, &head, false, NULL, &found, &at,
			     &missed, &e);
	if (r >= 0 && found && at >= 0) {
		m = v->m[at];
	} else if (r < 0 || missed) {
		*err = e;
		rc = r < 0 ? (int)r
			   : smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
					    mux->base.name,
					    "%s: a shard that may hold it is "
					    "out",
					    key);
		m = NULL;
	}
out:
	*out = m ? smux__member_get(m) : NULL;
	smux__view_put(v);
	return rc;
}

/* One routing of @call to the holder of its key (smux__sticky_route). */
static long route_once(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct mux_view *v, struct smux__call *call,
		       struct smux_span *span, int *holder,
		       struct smux_error *err)
{
	struct smux__call orig = *call;
	enum smux_outcome o = SMUX_OUTCOME_TRANSIENT;
	struct mux_member *m;
	struct smux_error e;
	bool probe = false, found;
	unsigned home;
	long rc, r2;
	int h;

	home = smux__sticky_home(v, call->key);
	h = holder_from(mux, v, home, 0, call->key);
	*holder = h;
	if (h < 0) {
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "no shard with the latest write of %s is "
				    "available",
				    call->key);
		goto out;
	}
	m = v->m[h];
	/* requests never probe a down shard: the background thread does
	 * once its cooldown is over (probes off the I/O path) */
	if (!smux__health_is_up(&m->health)) {
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, m->name,
				    "%s, the shard holding %s, is down",
				    m->name, call->key);
		goto dirs;
	}
	rc = smux__attempt(mux, ctx, call, m, probe, 0, span, &o, &e);
	if (rc >= 0)
		goto out;
	if (o == SMUX_OUTCOME_SEMANTIC || callers_end(ctx, o)) {
		*err = e;
		err->e.attempts = 1;
		/* home has no such key: one placed before the handoff rules
		 * may be on another shard */
		if (o == SMUX_OUTCOME_SEMANTIC && (unsigned)h == home &&
		    e.e.code == SMUX_E_KEY_NOT_FOUND) {
			*call = orig;
			r2 = find_off_home(mux, ctx, v, home, call, false, span,
					   &found, &e);
			if (found || r2 < 0) {
				rc = r2;
				if (r2 < 0)
					*err = e;
			}
		}
		goto out;
	}
	/* unavailable, not absent: no other shard has this version */
	*err = e;
	rc = smux_error_wrap(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			     "%s, the shard holding %s, is unavailable",
			     m->name, call->key);
	err->e.attempts = 1;
dirs:
	/* a directory is on every shard that holds a key under it, with
	 * its attributes (smux__sticky_change_dir) */
	if (call->op == SMUX__OP_HEAD ||
	    (smux_key_is_dir(call->key) && (call->op == SMUX__OP_GETXATTR ||
					    call->op == SMUX__OP_LISTXATTR))) {
		*call = orig;
		r2 = find_off_home(mux, ctx, v, home, call, true, span, &found,
				   &e);
		if (found || r2 < 0) {
			rc = r2;
			if (r2 < 0)
				*err = e;
		}
	}
out:
	return rc;
}

/*
 * A head of directory @call->key (a name, as a lookup asks) answered with
 * @call->info: when a shard missed a change of the directory (a put hint
 * for its marker: chmod, touch, xattrs), the shard that answered may be
 * that one, its attributes old until the replay (s43 review: the shard
 * undrained showed the mode from before the chmod). The marker's holder,
 * the first shard from its home without that hint, answers instead.
 */
static void dir_head_behind(struct smux_mux *mux, const struct smux_ctx *ctx,
			    struct mux_view *v, const struct smux__call *call,
			    struct smux_span *span)
{
	char marker[SMUX_KEY_MAX + 2];
	struct smux_info info = {0};
	struct smux__call mc = *call;
	enum smux__hint_kind kind;
	struct smux_error e;
	bool behind = false;
	int h;

	if (smux_key_is_dir(call->key) ||
	    smux__hints_pending_replicas(mux->hints) == 0 ||
	    snprintf(marker, sizeof(marker), "%s/", call->key) >=
		    (int)sizeof(marker))
		return;
	for (unsigned i = 0; i < v->n && !behind; i++)
		behind = smux__hints_kind(mux->hints, v->m[i]->name, marker,
					  &kind) &&
			 kind == SMUX__HINT_PUT;
	if (!behind)
		return;
	mc.key = marker;
	mc.info = &info;
	if (route_once(mux, ctx, v, &mc, span, &h, &e) >= 0 &&
	    S_ISDIR(info.mode))
		*call->info = info;
}

long smux__sticky_route(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct smux__call *call, struct smux_span *span,
			struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	bool changes = call->op == SMUX__OP_SETATTR ||
		       call->op == SMUX__OP_SETXATTR ||
		       call->op == SMUX__OP_REMOVEXATTR;
	struct smux__call orig = *call;
	struct mux_sticky_gate g;
	int h, again;
	long rc;

	if (v->n == 0) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "no backend is available");
	}
	/* a change of the object is a write of the key: not while its
	 * replay copies it */
	if (changes)
		smux__sticky_gate_enter(mux, &g, call->key);
	rc = route_once(mux, ctx, v, call, span, &h, err);
	/* a replay moved the key home while this read was on its way to
	 * the handoff shard, which no longer has it: ask where it is now */
	for (int i = 0;
	     i < 2 && rc < 0 && h >= 0 && err->e.code == SMUX_E_KEY_NOT_FOUND;
	     i++) {
		again = holder_from(mux, v, smux__sticky_home(v, call->key), 0,
				    call->key);
		if (again == h)
			break;
		*call = orig;
		rc = route_once(mux, ctx, v, call, span, &h, err);
	}
	if (changes)
		smux__sticky_gate_leave(mux, &g);
	if (rc >= 0 && orig.op == SMUX__OP_HEAD && orig.info &&
	    S_ISDIR(orig.info->mode))
		dir_head_behind(mux, ctx, v, &orig, span);
	smux__view_put(v);
	return rc;
}

/* NOT_SUPPORTED with errno EXDEV for a link across two shards. */
static long cross_shard(struct smux_mux *mux, const struct smux__call *call,
			const char *why, struct smux_error *err)
{
	smux_error_set(err, SMUX_E_NOT_SUPPORTED, mux->base.name,
		       "link \"%s\" to \"%s\": %s (sticky-by-key)", call->key,
		       call->key2, why);
	err->e.sys_errno = EXDEV;
	return -EXDEV;
}

long smux__sticky_link(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct smux__call *call, struct smux_span *span,
		       struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	enum smux_outcome o;
	struct mux_sticky_gate g;
	struct smux_error e;
	unsigned home;
	long rc;
	int h;

	if (v->n == 0) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "no backend is available");
	}
	home = smux__sticky_home(v, call->key);
	if (smux__sticky_home(v, call->key2) != home) {
		rc = cross_shard(mux, call, "the two names live on two shards",
				 err);
		goto out;
	}
	/* a write of the new name: not while a replay copies it */
	smux__sticky_gate_enter(mux, &g, call->key2);
	h = holder_from(mux, v, home, 0, call->key);
	if (h < 0 || (unsigned)h != home) {
		rc = h < 0 ? smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
					    mux->base.name,
					    "no shard with the latest write "
					    "of %s is available",
					    call->key)
			   : cross_shard(mux, call,
					 "the source is held away from its "
					 "shard until a replay moves it",
					 err);
	} else if (!smux__health_is_up(&v->m[h]->health)) {
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    v->m[h]->name,
				    "%s, the shard holding %s, is down",
				    v->m[h]->name, call->key);
	} else {
		rc = smux__attempt(mux, ctx, call, v->m[h], false, 0, span, &o,
				   &e);
		if (rc < 0)
			*err = e;
	}
	smux__sticky_gate_leave(mux, &g);
out:
	smux__view_put(v);
	return rc;
}

/*
 * A rename of @call->key to @call->key2 whose names both hash to one
 * shard, which holds the source and is up, with no hint pending anywhere
 * in the mux (so neither name has a copy or a claim elsewhere): one rename
 * on that shard - atomic, and the file keeps its inode, its other names,
 * its extended attributes and its holes, as on a local disk. Returns 1
 * when it does not apply (the caller copies through the mux), else 0 or
 * the failure. Both names' gates are held (in name order, as nothing else
 * takes two) so no write or replay of either comes in between.
 */
long smux__sticky_rename(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct smux__call *call, struct smux_span *span,
			 struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_sticky_gate g1, g2;
	bool first = strcmp(call->key, call->key2) < 0;
	enum smux_outcome o;
	struct smux_error e;
	unsigned home;
	long rc = 1;

	if (v->n == 0 || strcmp(call->key, call->key2) == 0 ||
	    smux_mux_pending_hints(&mux->base) ||
	    (home = smux__sticky_home(v, call->key)) !=
		    smux__sticky_home(v, call->key2) ||
	    !smux__health_is_up(&v->m[home]->health)) {
		smux__view_put(v);
		return 1;
	}
	smux__sticky_gate_enter(mux, &g1, first ? call->key : call->key2);
	smux__sticky_gate_enter(mux, &g2, first ? call->key2 : call->key);
	if (!smux_mux_pending_hints(&mux->base) &&
	    smux__health_is_up(&v->m[home]->health)) {
		rc = smux__attempt(mux, ctx, call, v->m[home], false, 0, span,
				   &o, &e);
		/* not there: placed before these rules, or gone; the copy
		 * through the mux looks on every shard */
		if (rc < 0 && e.e.code == SMUX_E_KEY_NOT_FOUND)
			rc = 1;
		else if (rc < 0)
			*err = e;
	}
	smux__sticky_gate_leave(mux, &g2);
	smux__sticky_gate_leave(mux, &g1);
	smux__view_put(v);
	return rc;
}

/* ---- writes ---- */

/* Journals that @m missed @kind of @key (event hint.recorded). */
static int hint(struct smux_mux *mux, struct mux_member *m, const char *key,
		enum smux__hint_kind kind, struct smux_error *err)
{
	struct smux_event ev = {.topic = SMUX_EV_HINT_RECORDED};
	int rc = smux__hints_add(mux->hints, m->name, key, kind, NULL, err);

	if (rc)
		return rc;
	snprintf(ev.name, sizeof(ev.name), "%s", m->name);
	snprintf(ev.key, sizeof(ev.key), "%s", key);
	emit(mux, &ev);
	return 0;
}

int smux__sticky_missed(struct smux_mux *mux, struct mux_member *acked,
			const char *key, enum smux__hint_kind kind,
			struct smux_error *err)
{
	bool was_stale;
	struct mux_view *v;
	unsigned home;
	int rc = 0;

	if (kind == SMUX__HINT_NONE)
		return 0;
	v = smux__view_get(mux);
	if (v->n == 0)
		goto out;
	home = smux__sticky_home(v, key);
	acked = in_view(v, acked);
	was_stale = smux__member_stale(mux, acked, key);
	if (v->m[home] == acked && was_stale) {
		/* a handoff superseded: the copy on the shard that held the
		 * key is unreachable now (reads go home), and the replay of
		 * a delete hint removes it */
		int h = holder_from(mux, v, home, 1, key);

		smux__hints_supersede(mux->hints, acked->name, key, NULL);
		if (h >= 0)
			rc = hint(mux, v->m[h], key, SMUX__HINT_DEL, err);
		goto out;
	}
	if (was_stale)
		smux__hints_supersede(mux->hints, acked->name, key, NULL);
	if (v->m[home] == acked)
		goto out;
	/* home missed the write; the shards passed over after it hold an
	 * older copy or none: off home, that is a delete */
	for (unsigned k = 0; k < v->n; k++) {
		struct mux_member *m = v->m[(home + k) % v->n];

		if (m == acked)
			break;
		rc = hint(mux, m, key, k == 0 ? kind : SMUX__HINT_DEL, err);
		if (rc)
			break;
		/* removed while it took the write: only home is known to
		 * have missed it */
		if (k == 0 && !view_has(v, acked))
			break;
	}
out:
	smux__view_put(v);
	return rc;
}

/*
 * 0 when every shard is up (a shard removed at run time, its slot, aside);
 * else NOT_EMPTY. A directory is on every shard that holds a key under
 * it, and a listing leaves out what a shard that is out holds: removing
 * the directory then (rm -rf removed what it listed) acknowledged it with
 * a delete hint for that shard, and the directory came back with the rest
 * once the shard did. NOT_EMPTY, not unavailable: the mux is not failing
 * (a mux this one is a member of would take it down), the directory may
 * hold entries nobody saw. A removed shard does not hold the removal up:
 * it may be out for good (what it holds under the directory comes back
 * with it).
 */
static long all_shards_in(struct smux_mux *mux, const char *dir,
			  struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	long rc = 0;

	for (unsigned i = 0; i < v->n && rc == 0; i++)
		if (!smux__sticky_slot_empty(v->m[i]) &&
		    !smux__health_is_up(&v->m[i]->health))
			rc = smux_error_set(err, SMUX_E_NOT_EMPTY,
					    mux->base.name,
					    "remove %s: shard %s is out, and "
					    "may hold entries under it",
					    dir, v->m[i]->name);
	smux__view_put(v);
	return rc;
}

/*
 * A directory made through the mount (its marker put where the walk put
 * it, @acked) is made on every other shard that is up too, as far as it
 * takes it (its later changes go to every shard too, with hints:
 * smux__sticky_change_dir): a lookup of it is answered by any shard, so
 * while the shard holding the files under it is out the directory still
 * shows. Found absent then, a file of its name was created over it
 * (s41-t2: `echo > d14` succeeded, and after the shard came back
 * d14/inside, an acknowledged write, answered "Not a directory"). Best
 * effort, no hint:
 * a shard without the marker holds nothing under it (or its keys imply
 * the directory), and a removal goes to every shard.
 */
void smux__sticky_spread_dir(struct smux_mux *mux, const struct smux_ctx *ctx,
			     const struct smux__call *call,
			     const struct mux_member *acked,
			     struct smux_span *span)
{
	struct mux_view *v = smux__view_get(mux);

	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *m = v->m[i];
		struct smux__call c = *call;
		enum smux_outcome o;
		struct smux_error e;

		if (m == acked || smux__sticky_slot_empty(m) ||
		    !smux__health_is_up(&m->health) ||
		    smux__member_stale(mux, m, call->key))
			continue;
		c.info = NULL;
		(void)smux__attempt(mux, ctx, &c, m, false, i, span, &o, &e);
	}
	smux__view_put(v);
}

long smux__sticky_change_dir(struct smux_mux *mux, const struct smux_ctx *ctx,
			     struct smux__call *call, struct smux_span *span,
			     struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	bool *behind = calloc(v->n ? v->n : 1, sizeof(*behind));
	bool answered = false;
	struct mux_sticky_gate g;
	unsigned home, took = 0;
	struct smux_error e;
	long rc;

	if (!behind) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	smux__sticky_gate_enter(mux, &g, call->key);
	home = v->n ? smux__sticky_home(v, call->key) : 0;
	rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			    "no shard is available for %s", call->key);
	for (unsigned k = 0; k < v->n; k++) {
		unsigned i = (home + k) % v->n;
		struct mux_member *m = v->m[i];
		struct smux__call c = *call;
		enum smux_outcome o = SMUX_OUTCOME_TRANSIENT;
		long r;

		if (smux__sticky_slot_empty(m))
			continue;
		if (smux__health_is_up(&m->health) &&
		    !smux__member_stale(mux, m, call->key)) {
			r = smux__attempt(mux, ctx, &c, m, false, k, span, &o,
					  &e);
			if (r >= 0) {
				took++;
				continue;
			}
			if (!answered) { /* the answer when none takes it */
				*err = e;
				rc = r;
				answered = true;
			}
			/* a shard that refuses it (no user xattrs there, a
			 * value too large) refuses its replay too: no hint
			 * that never ends. One without the directory gets
			 * one: a file put under it later makes it there
			 * with a mode of its own, which must not be the
			 * source of a replay (s43 review) */
			if (o == SMUX_OUTCOME_SEMANTIC &&
			    e.e.code != SMUX_E_KEY_NOT_FOUND)
				continue;
		}
		behind[i] = true; /* out, behind, failing, or without it */
	}
	if (took) {
		rc = 0;
		for (unsigned i = 0; i < v->n && rc == 0; i++)
			if (behind[i])
				rc = hint(mux, v->m[i], call->key,
					  SMUX__HINT_PUT, err);
	}
	smux__sticky_gate_leave(mux, &g);
	free(behind);
	smux__view_put(v);
	return rc;
}

long smux__sticky_write(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct smux__call *call, enum smux__hint_kind kind,
			struct smux_span *span, struct smux_error *err)
{
	struct mux_member *acked = NULL;
	struct mux_sticky_gate g;
	long rc;
	int hrc;

	smux__sticky_gate_enter(mux, &g, call->key);
	rc = kind == SMUX__HINT_DEL && smux_key_is_dir(call->key)
		     ? all_shards_in(mux, call->key, err)
		     : 0;
	if (rc < 0) {
		/* nothing removed */
	} else if (kind == SMUX__HINT_DEL) {
		/* every shard (a handoff copy goes too); one that misses it
		 * gets a delete hint, and one that takes it is no longer
		 * behind (smux__exec_fanout) */
		rc = smux__exec_fanout(mux, ctx, call, kind, span, err);
	} else {
		/* home, else the next shard that takes it (a hint for home
		 * first): the cursor walks from home in order */
		rc = smux__exec_walk(mux, ctx, call, false, &acked, span, err);
		if (rc >= 0 && acked && smux__sticky_hook_acked)
			smux__sticky_hook_acked(call->key);
		if (rc >= 0 && acked) {
			hrc = smux__sticky_missed(mux, acked, call->key, kind,
						  err);
			if (hrc)
				rc = hrc;
		}
		if (rc >= 0 && acked && call->op == SMUX__OP_PUT &&
		    smux_key_is_dir(call->key))
			smux__sticky_spread_dir(mux, ctx, call, acked, span);
		smux__member_put(acked);
	}
	smux__sticky_gate_leave(mux, &g);
	return rc;
}

/* ---- replay ---- */

/* A delete of @key on @m (@probe: the call is @m's health probe). */
static long del_on(struct smux_mux *mux, const struct smux_ctx *ctx,
		   struct mux_member *m, const char *key, bool probe,
		   struct smux_error *err)
{
	struct smux__call del = {.op = SMUX__OP_DEL, .key = key};
	enum smux_outcome o;

	return smux__attempt(mux, ctx, &del, m, probe, 0, NULL, &o, err);
}

/*
 * Home's put hint @h: copies the key from its holder (the first shard
 * after home without a hint for it) to home, through a temporary file (a
 * directory marker is looked up with head and recreated empty), keeping
 * type, owner, mode and mtime (not extended attributes); ends home's
 * hints for the key; then deletes the holder's copy, or gives the holder a delete hint when
 * that fails. 0 also when there is nothing newer to copy (no holder, or
 * the holder has no copy: the version left with a removed shard; home
 * keeps what it has). *@probe as smux__sticky_replay's; the caller holds
 * the key's gate.
 */
static long move_home(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_view *v, unsigned home,
		      const struct smux__hint *h, bool *probe,
		      struct smux_error *err)
{
	struct smux_get_opts all = {.length = SMUX_LEN_ALL};
	bool marker = smux_key_is_dir(h->key), src_probe = false;
	struct mux_member *dst = v->m[home], *src;
	struct smux_info info = {0};
	struct smux_put_opts po = {0};
	struct smux_source source;
	struct smux_sink sink;
	struct smux__call get = {
		.op = marker ? SMUX__OP_HEAD : SMUX__OP_GET,
		.key = h->key,
		.get_opts = marker ? NULL : &all,
		.sink = marker ? NULL : &sink,
		.info = &info,
	};
	struct smux__call put = {
		.op = SMUX__OP_PUT,
		.key = h->key,
		.src = &source,
		.put_opts = &po,
	};
	struct smux_error e;
	enum smux_outcome o;
	int hs = holder_from(mux, v, home, 1, h->key);
	long rc;
	int fd;

	if (hs < 0)
		return 0;
	src = v->m[hs];
	if (!smux__health_acquire(&src->health, smux__mux_now(mux), &src_probe))
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "%s, which has the latest %s, is not "
				      "available",
				      src->name, h->key);
	fd = smux_tmpfile(mux->base.name, "repair", err);
	if (fd < 0) {
		if (src_probe)
			smux__health_probe_cancel(&src->health);
		return fd;
	}
	smux_sink_fd(&sink, fd, 0);
	rc = smux__attempt(mux, ctx, &get, src, src_probe, 0, NULL, &o, err);
	if (rc < 0) {
		if (err->e.code == SMUX_E_KEY_NOT_FOUND)
			rc = 0; /* nothing newer than what home has */
		goto out_close;
	}
	if (smux__sticky_hook_replay_copied)
		smux__sticky_hook_replay_copied(h->key);
	smux_put_opts_keep(&po, &info);
	smux_source_fd(&source, fd, 0, marker ? 0 : sink.written);
	rc = smux__attempt(mux, ctx, &put, dst, *probe, 0, NULL, &o, err);
	*probe = false; /* the put reported to home's health */
	if (rc < 0)
		goto out_close;
	/* home has it: reads go there from now on, then the handoff copy
	 * goes (a crash in between leaves an unreachable copy) */
	/* every pending hint of home for the key, not only @h: one that
	 * replaced it before the gate was taken is as old as the copy */
	rc = smux__hints_supersede(mux->hints, dst->name, h->key, err);
	if (rc)
		goto out_close;
	if (del_on(mux, ctx, src, h->key, false, &e) < 0)
		hint(mux, src, h->key, SMUX__HINT_DEL, NULL);
out_close:
	close(fd);
	return rc;
}

long smux__sticky_replay(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *m,
			 const struct smux__hint *h, bool probe,
			 struct smux_error *err)
{
	struct mux_sticky_gate g;
	unsigned home = smux__sticky_home(v, h->key);
	bool left = probe;
	long rc = 0;

	smux__sticky_gate_enter(mux, &g, h->key);
	/* a write that reached @m meanwhile has the latest version */
	if (!smux__hints_has(mux->hints, m->name, h->key))
		goto out;
	/* a writer open in place on a copy (the holder's, or one off
	 * home): a move home or a delete of that copy would leave its later
	 * writes in a file no name reaches, and its commit's hint would then
	 * find nothing to move (fsync'd writes lost). Once it is closed */
	if (smux__intent_busy(mux, h->key)) {
		rc = smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				    mux->base.name,
				    "a writer of \"%s\" is open: replayed "
				    "once it is closed",
				    h->key);
		goto out;
	}
	if (smux_key_is_dir(h->key) && h->kind == SMUX__HINT_PUT) {
		/* a directory is on every shard: its marker's mode, times
		 * and xattrs from a shard that has them */
		rc = smux__replay_marker(mux, ctx, v, m, h->key, &left, err);
	} else if (v->n && v->m[home] == m && h->kind == SMUX__HINT_PUT) {
		rc = move_home(mux, ctx, v, home, h, &left, err);
	} else if (v->n && v->m[home] != m &&
		   smux__member_stale(mux, v->m[home], h->key)) {
		/* a shard passed over after home keeps its hint until the
		 * key is home again: without it, it would come before the
		 * holder in the handoff order and answer for the key */
		rc = smux_error_set(
			err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			"%s waits for %s to be moved home", m->name, h->key);
	} else {
		/* a delete home missed; off home, a copy older than the
		 * holder's (or a put hint recorded before the view changed
		 * the key's home): either way it goes */
		rc = del_on(mux, ctx, m, h->key, left, err);
		left = false;
	}
out:
	smux__sticky_gate_leave(mux, &g);
	if (left)
		smux__health_probe_cancel(&m->health);
	return rc < 0 ? rc : 0;
}
