/* SPDX-License-Identifier: MIT */
/*
 * mux_change.c - one-call changes every replica makes: a rename, a
 * delete, a hard link, or a change of a key where it is (a put, copy,
 * setattr, setxattr or removexattr; a staged writer's commit; an in-place
 * writer's create) fanned out by a mirror or shield (issue 8, "lose
 * nothing").
 *
 * Such a change is one call per replica. A daemon killed between two of
 * them left the replicas different for good: a file renamed on one and
 * still under its old name on the other, a deleted file back on one -
 * nothing in the journal said a change was under way (a replica that
 * fails one records a hint, but a dead daemon records nothing).
 *
 * So before the calls, the change is noted in the hint journal (a note
 * of type SMUX__NOTE_CHANGE: the key, the kind - PUT for a rename or a
 * link with its new name, DEL for a delete), and the note ends once
 * every call returned (the replicas that failed hold hints by then). Both records
 * are written, not synced: a rename asks no disk flush of a local
 * filesystem unless the program asks for durability (issue 8 item 6),
 * and a write(2) already outlives a killed daemon; after a power loss
 * the renames themselves may be lost too. A note that is not ended (its
 * end lost) costs a look at the next start, nothing else.
 *
 * Notes standing when the mux opens were left by a dead daemon (the
 * newest per key; an older one of its keys is reconciled after it, see
 * smux__changes_load). They are
 * rolled forward as the mux opens, before anyone uses it (a user write
 * made first would be undone by them). A member is asked whether the
 * change shows there (the key gone; a link: its new name a link of the
 * key's file) when it is up and could take the call live (not a rename
 * or link from a source it missed: smux__fan_stale). If it shows on one
 * of them (shield: on the origin, which takes every write or none goes
 * anywhere), every asked member where it does not gets the call, and a
 * member where it does has its hint for the key the change leaves
 * superseded, as a live call would; the others, and a member whose call
 * fails, get the hints a live fan-out leaves a replica that missed it.
 * If it shows nowhere (shield: not on the origin), a member that was not
 * asked, or where it shows, gets put hints for what the change touches,
 * whose replays make it what the others hold. Either way the replicas
 * agree, as if the program's call had returned - which it never did. An
 * event (storage-mux.reconciled) names the key, a replica the change
 * happened on (name) and the replicas completed or hinted (updated).
 *
 * A change in place (kind INTENT) has no sign to look for: a chmod, a
 * put of the same size or a setfattr may have landed on any of the
 * replicas. Its note becomes a write intent of the key (reconcile_later),
 * and the repair reconciles it as one an in-place writer left: the newest
 * copy, or where the bytes agree the first replica's mode, owner and
 * extended attributes, made every replica's (mux_repair.c, mux_meta.c).
 *
 * A note waits only when no member (shield: the origin) can say, a user
 * writer holds one of its keys, or the journal failed; the repair then
 * tries it first at every pass (its failure told once), and no hint of
 * its keys is replayed meanwhile (smux__change_waits).
 *
 * A journal written with change notes does not open in a build from
 * before them ("missing or bad \"note\"", with its file and line), nor
 * one with a change in place in a build from before those ("missing or
 * bad \"kind\""): refused, never read as a rename or delete.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

static void emit(struct smux_mux *mux, struct smux_event *ev)
{
	snprintf(ev->mux, sizeof(ev->mux), "%s", mux->base.name);
	smux_events_emit(mux->events, ev);
}

/* Notes @n when the mux fans its writes out to several members. */
static int note_begin(struct smux_mux *mux, struct smux__note *n, uint64_t *id,
		      struct smux_error *err)
{
	struct mux_view *v;
	unsigned members;

	*id = 0;
	if (mux->mode != SMUX_MODE_MIRROR && mux->mode != SMUX_MODE_SHIELD)
		return 0;
	v = smux__view_get(mux);
	members = v->n;
	smux__view_put(v);
	if (members < 2)
		return 0; /* one call: nothing to leave between two */
	/* a journal that fails (its disk full) leaves the change without
	 * its note, not refused: an rm must free space there too */
	if (smux__hints_note_lazy(mux->hints, n, err) == 0)
		*id = n->id;
	return 0;
}

int smux__change_begin(struct smux_mux *mux, const struct smux__call *call,
		       uint64_t *id, struct smux_error *err)
{
	struct smux__note n = {.type = SMUX__NOTE_CHANGE,
			       .replica = SMUX__INTENT_ALL,
			       .key = (char *)call->key};

	*id = 0;
	switch (call->op) {
	case SMUX__OP_RENAME:
	case SMUX__OP_LINK:
		n.kind = SMUX__HINT_PUT;
		n.to = (char *)call->key2;
		n.link = call->op == SMUX__OP_LINK;
		break;
	case SMUX__OP_DEL:
		n.kind = SMUX__HINT_DEL;
		break;
	case SMUX__OP_COPY: /* the copy's destination changes */
		n.key = (char *)call->key2;
		n.kind = SMUX__HINT_INTENT;
		break;
	case SMUX__OP_PUT:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
		n.kind = SMUX__HINT_INTENT;
		break;
	default:
		return 0; /* a sync changes nothing */
	}
	return note_begin(mux, &n, id, err);
}

int smux__change_begin_key(struct smux_mux *mux, const char *key, uint64_t *id,
			   struct smux_error *err)
{
	struct smux__note n = {.type = SMUX__NOTE_CHANGE,
			       .replica = SMUX__INTENT_ALL,
			       .key = (char *)key,
			       .kind = SMUX__HINT_INTENT};

	return note_begin(mux, &n, id, err);
}

void smux__change_end(struct smux_mux *mux, uint64_t id)
{
	/* lost: the next start finds the replicas agreeing */
	if (id)
		(void)smux__hints_note_end_lazy(mux->hints, &id, 1, NULL);
}

/* True when @a and @b name a key in common. */
static bool overlap(const char *a_key, const char *a_to, const char *b_key,
		    const char *b_to)
{
	return strcmp(a_key, b_key) == 0 ||
	       (b_to && strcmp(a_key, b_to) == 0) ||
	       (a_to && (strcmp(a_to, b_key) == 0 ||
			 (b_to && strcmp(a_to, b_to) == 0)));
}

int smux__changes_load(struct smux_mux *mux)
{
	struct smux__note *list = NULL;
	int n = smux__hints_notes(mux->hints, &list);
	struct mux_change **tail = &mux->changes_left;
	int rc = 0;

	if (n < 0)
		return n;
	/*
	 * Newest first. An older note of one of a newer one's keys is either
	 * one whose end was lost (its write failed: the change was made
	 * everywhere, and rolling it forward now would undo the later
	 * change) or a change in flight beside the newer one (a staged
	 * commit of f and a rename over f): it is not rolled forward but its
	 * keys are reconciled after the newer change, which makes replicas
	 * that agree stay as they are and ones that differ agree
	 * (test_older_overlapping_change_reconciled).
	 */
	for (int i = n - 1; i >= 0 && rc == 0; i--) {
		struct mux_change *c, *k;

		if (list[i].type != SMUX__NOTE_CHANGE)
			continue;
		for (k = mux->changes_left; k; k = k->next)
			if (overlap(list[i].key, list[i].to, k->key, k->to))
				break;
		c = calloc(1, sizeof(*c));
		if (!c) {
			rc = -ENOMEM;
			break;
		}
		c->note = list[i].id;
		c->key = list[i].key;
		c->to = list[i].to;
		c->link = list[i].link;
		c->in_place = k || list[i].kind == SMUX__HINT_INTENT;
		list[i].key = NULL; /* taken */
		list[i].to = NULL;
		*tail = c;
		tail = &c->next;
		atomic_fetch_add(&mux->nchanges_left, 1);
	}
	smux__hints_free_notes(list, n);
	return rc;
}

bool smux__change_waits(struct smux_mux *mux, const char *key)
{
	bool waits = false;

	if (atomic_load(&mux->nchanges_left) == 0)
		return false;
	/* held while a roll-forward calls members: it may still wait */
	if (pthread_mutex_trylock(&mux->change_lock) != 0)
		return true;
	for (struct mux_change *c = mux->changes_left; c && !waits; c = c->next)
		waits = overlap(key, NULL, c->key, c->to);
	pthread_mutex_unlock(&mux->change_lock);
	return waits;
}

static void change_free(struct mux_change *c)
{
	free(c->key);
	free(c->to);
	free(c);
}

void smux__changes_free(struct smux_mux *mux)
{
	while (mux->changes_left) {
		struct mux_change *c = mux->changes_left;

		mux->changes_left = c->next;
		change_free(c);
	}
	atomic_store(&mux->nchanges_left, 0);
}

/* The call @c makes on a member. */
static struct smux__call change_call(const struct mux_change *c)
{
	struct smux__call call = {.op = c->link ? SMUX__OP_LINK
					: c->to ? SMUX__OP_RENAME
						: SMUX__OP_DEL,
				  .key = c->key,
				  .key2 = c->to};

	return call;
}

/* Hints @m for a key (a failed add: the first failure is kept). */
static void hint(struct smux_mux *mux, struct mux_member *m, const char *key,
		 enum smux__hint_kind kind, long *rc, struct smux_error *err)
{
	struct smux_error e;

	if (smux__hints_add(mux->hints, m->name, key, kind, NULL, &e) != 0 &&
	    *rc == 0) {
		*err = e;
		*rc = -e.e.sys_errno;
	}
}

/*
 * @m is not called, or its call failed. When the change @happened, it
 * gets the hints a live fan-out leaves a replica that missed it (a
 * rename: delete the source, put the new name; a delete: delete; a link:
 * put the new name). When it happened nowhere (or, in shield, not on
 * the origin) it may have made it all the same: put hints for what the
 * change touches make it what the others hold (a replay finding a key
 * on no fresh replica deletes it).
 */
static void hint_left_out(struct smux_mux *mux, struct mux_member *m,
			  const struct mux_change *c, bool happened, long *rc,
			  struct smux_error *err)
{
	if (!c->link)
		hint(mux, m, c->key, happened ? SMUX__HINT_DEL : SMUX__HINT_PUT,
		     rc, err);
	if (c->to)
		hint(mux, m, c->to, SMUX__HINT_PUT, rc, err);
}

/*
 * Whether the change @c shows on @m: 1 (the key gone; a link: its new
 * name a link of the key's file), 0 (not), or -1 (unknown: a call
 * failed).
 */
static int change_shows(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_member *m, const struct mux_change *c)
{
	struct smux_info ki = {0}, ti = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = c->key, .info = &ki};
	struct smux_error e;
	long rc = smux__member_call(mux, ctx, m, &head, false, &e);

	if (rc < 0)
		return e.e.code == SMUX_E_KEY_NOT_FOUND ? !c->link : -1;
	if (!c->link)
		return 0;
	head.key = c->to;
	head.info = &ti;
	rc = smux__member_call(mux, ctx, m, &head, false, &e);
	if (rc < 0)
		return e.e.code == SMUX_E_KEY_NOT_FOUND ? 0 : -1;
	/* a name that was there before is no sign of the link */
	return ki.file_id != 0 && ki.file_id == ti.file_id;
}

/*
 * Rolls @c forward on the members of @v (see the file's comment), fenced
 * against user writes of its keys. A member is asked only when it is up
 * and could take the call live (smux__fan_stale: a rename or link not
 * from a source it missed); the others, and one whose call fails, get
 * hints (hint_left_out). Shield: the origin alone says whether the change
 * happened, as it takes every write or none goes anywhere. 0 once that is
 * done; an error when no member (shield: the origin) can say, a user
 * writer holds a key or the journal failed (the note stays).
 */
static long roll_forward(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, const struct mux_change *c,
			 struct smux_event *ev, struct smux_error *err)
{
	const char *wrote = c->to ? c->to : c->key; /* the key it leaves */
	bool shield = mux->mode == SMUX_MODE_SHIELD;
	struct smux__call call = change_call(c);
	int shows[SMUX__FAN_MAX];
	bool happened = false, any = false;
	long rc = 0;

	if (v->n > SMUX__FAN_MAX || v->n == 0)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, mux->base.name,
				      "%u members", v->n);
	for (unsigned i = 0; i < v->n; i++)
		shows[i] = -1;
	for (unsigned i = 0; i < v->n; i++) {
		smux__replay_fence_enter(mux, v->m[i], c->key);
		if (c->to)
			smux__replay_fence_enter(mux, v->m[i], c->to);
	}
	rc = smux__replay_blocked(mux, c->key, err);
	if (rc == 0 && c->to)
		rc = smux__replay_blocked(mux, c->to, err);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		if (smux__health_status(&v->m[i]->health) != SMUX_STATUS_UP ||
		    smux__fan_stale(mux, v->m[i], &call, true, NULL))
			continue; /* left out: hinted */
		shows[i] = change_shows(mux, ctx, v->m[i], c);
		any |= shows[i] >= 0;
		if (shows[i] == 1 && !happened && (!shield || i == 0)) {
			happened = true;
			snprintf(ev->name, sizeof(ev->name), "%s",
				 v->m[i]->name);
		}
	}
	if (rc == 0 && (shield ? shows[0] < 0 : !any))
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    shield ? v->m[0]->name : mux->base.name,
				    "complete the change of %s: no replica "
				    "can tell whether it happened",
				    c->key);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		struct mux_member *m = v->m[i];
		struct smux_error e;

		/* as the others are; a replica where it happened, as a live
		 * call would, supersedes its hint for the key it leaves */
		if (shows[i] == (happened ? 1 : 0)) {
			if (happened)
				smux__replica_wrote(mux, m, wrote);
			continue;
		}
		if (happened && shows[i] == 0 &&
		    smux__member_call(mux, ctx, m, &call, false, &e) == 0)
			smux__replica_wrote(mux, m, wrote);
		else
			hint_left_out(mux, m, c, happened, &rc, err);
		if (rc == 0 && ev->n_failed < SMUX_EVENT_MAX_FAILED)
			snprintf(ev->failed[ev->n_failed++],
				 sizeof(ev->failed[0]), "%s", m->name);
	}
	for (unsigned i = 0; i < v->n; i++) {
		if (c->to)
			smux__replay_fence_exit(mux, v->m[i], c->to);
		smux__replay_fence_exit(mux, v->m[i], c->key);
	}
	return rc;
}

/*
 * A change in place (a put, setattr or xattr) left some replicas with it
 * and others without, with nothing to tell which is the change: its key
 * gets a write intent, which the repair reconciles as one an in-place
 * writer left (the newest copy, then its mode, owner and extended
 * attributes, onto the others; mux_repair.c). Either outcome is right -
 * the call never returned -, as long as the replicas agree. 0, or the
 * journal's error.
 */
static long reconcile_later(struct smux_mux *mux, const struct mux_change *c,
			    struct smux_error *err)
{
	/* a writer holding the key has its own intent; the note waits
	 * (only after a journal failure at open can one be open by now) */
	long rc = smux__replay_blocked(mux, c->key, err);

	if (rc == 0 && c->to)
		rc = smux__replay_blocked(mux, c->to, err);
	if (rc == 0)
		rc = smux__hints_add(mux->hints, SMUX__INTENT_ALL, c->key,
				     SMUX__HINT_INTENT, NULL, err);
	/* an older rename or link beside a newer change: both its names */
	if (rc == 0 && c->to)
		rc = smux__hints_add(mux->hints, SMUX__INTENT_ALL, c->to,
				     SMUX__HINT_INTENT, NULL, err);
	return rc;
}

int smux__changes_recover(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct smux_error *err)
{
	struct mux_change **pp = &mux->changes_left;
	struct mux_view *v;
	int rc = 0;

	if (atomic_load(&mux->nchanges_left) == 0)
		return 0;
	pthread_mutex_lock(&mux->change_lock);
	v = smux__view_get(mux);
	while (*pp && rc == 0) {
		struct mux_change *c = *pp;
		struct smux_event ev = {.topic = SMUX_EV_RECONCILED};
		struct smux_error e = {0};

		snprintf(ev.key, sizeof(ev.key), "%s", c->key);
		if (c->in_place ? reconcile_later(mux, c, &e)
				: roll_forward(mux, ctx, v, c, &ev, &e)) {
			ev.has_cause = true;
			ev.cause = e.e;
			if (!c->told) /* once, not at every pass */
				emit(mux, &ev);
			c->told = true;
			rc = smux_ctx_check(ctx, mux->base.name, err);
			pp = &c->next; /* the next pass tries again */
			continue;
		}
		if (ev.n_failed)
			emit(mux, &ev);
		/* the replicas agree: a lost end costs only a look */
		(void)smux__hints_note_end(mux->hints, &c->note, 1, NULL);
		*pp = c->next;
		atomic_fetch_sub(&mux->nchanges_left, 1);
		change_free(c);
	}
	smux__view_put(v);
	pthread_mutex_unlock(&mux->change_lock);
	return rc;
}
