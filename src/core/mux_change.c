/* SPDX-License-Identifier: MIT */
/*
 * mux_change.c - one-call changes every replica makes: a rename, a
 * delete or a hard link fanned out by a mirror or shield (issue 8, "lose
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
 * link with its new name, DEL for a delete), and the note ends once every call
 * returned (the replicas that failed hold hints by then). Both records
 * are written, not synced: a rename asks no disk flush of a local
 * filesystem unless the program asks for durability (issue 8 item 6),
 * and a write(2) already outlives a killed daemon; after a power loss
 * the renames themselves may be lost too. A note that is not ended (its
 * end lost) costs a look at the next start, nothing else.
 *
 * Notes standing when the mux opens were left by a dead daemon. They are
 * rolled forward as the mux opens, before anyone uses it (a user write
 * made first would be undone by them): each member that is up and missed
 * no write of either key (fresh) is asked for the key (a link: its new
 * name). If a fresh member no longer has the key (has the link's name),
 * the change happened there, and every fresh member where it did not
 * gets the same call (rename to the new name, delete, link); otherwise
 * it happened nowhere. A member that is not fresh -
 * down, stale, its HEAD or call failed - gets hints for both keys: their
 * replays copy each key from a fresh replica (or delete it where none
 * has it), so it ends as they are, whatever the change did there. Either
 * way the replicas agree, as if the program's call had returned - which
 * it never did. An event (storage-mux.reconciled) names the key, a
 * replica the change happened on (name) and the replicas completed or
 * hinted (updated). Only with no fresh member at all does a note stay,
 * for the background repair to try again (its failure told once).
 *
 * A journal written with change notes does not open in a build from
 * before them ("missing or bad \"note\"", with its file and line).
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

int smux__change_begin(struct smux_mux *mux, const struct smux__call *call,
		       uint64_t *id, struct smux_error *err)
{
	struct smux__note n = {.type = SMUX__NOTE_CHANGE,
			       .replica = SMUX__INTENT_ALL,
			       .key = (char *)call->key};
	struct mux_view *v;
	unsigned members;

	*id = 0;
	if (mux->mode != SMUX_MODE_MIRROR && mux->mode != SMUX_MODE_SHIELD)
		return 0;
	if (call->op == SMUX__OP_RENAME || call->op == SMUX__OP_LINK) {
		n.kind = SMUX__HINT_PUT;
		n.to = (char *)call->key2;
		n.link = call->op == SMUX__OP_LINK;
	} else if (call->op == SMUX__OP_DEL) {
		n.kind = SMUX__HINT_DEL;
	} else {
		return 0;
	}
	v = smux__view_get(mux);
	members = v->n;
	smux__view_put(v);
	if (members < 2)
		return 0; /* one call: nothing to leave between two */
	/* a journal that fails (its disk full) leaves the change without
	 * its note, not refused: an rm must free space there too */
	if (smux__hints_note_lazy(mux->hints, &n, err) == 0)
		*id = n.id;
	return 0;
}

void smux__change_end(struct smux_mux *mux, uint64_t id)
{
	/* lost: the next start finds the replicas agreeing */
	if (id)
		(void)smux__hints_note_end_lazy(mux->hints, &id, 1, NULL);
}

int smux__changes_load(struct smux_mux *mux)
{
	struct smux__note *list = NULL;
	int n = smux__hints_notes(mux->hints, &list);
	int rc = 0;

	if (n < 0)
		return n;
	for (int i = n - 1; i >= 0 && rc == 0; i--) {
		struct mux_change *c;

		if (list[i].type != SMUX__NOTE_CHANGE)
			continue;
		c = calloc(1, sizeof(*c));
		if (!c) {
			rc = -ENOMEM;
			break;
		}
		c->note = list[i].id;
		c->kind = list[i].kind;
		c->key = list[i].key;
		c->to = list[i].to;
		c->link = list[i].link;
		list[i].key = NULL; /* taken */
		list[i].to = NULL;
		c->next = mux->changes_left;
		mux->changes_left = c;
		atomic_fetch_add(&mux->nchanges_left, 1);
	}
	smux__hints_free_notes(list, n);
	return rc;
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

/* True when @m missed the latest write of a key @c names (a hint
 * pending): its state is no sign of what the change did. */
static bool change_stale(struct smux_mux *mux, struct mux_member *m,
			 const struct mux_change *c)
{
	return smux__member_stale(mux, m, c->key) ||
	       (c->to && smux__member_stale(mux, m, c->to));
}

/* @m is not called (its state unknown, stale, or its call failed): hints
 * make it copy both keys from a fresh replica - a replay finding the key
 * on none deletes it - so it ends as they are, whatever the change did
 * there. 0 or the journal's failure. */
static long hint_left_out(struct smux_mux *mux, struct mux_member *m,
			  const struct mux_change *c, struct smux_error *err)
{
	long rc = smux__hints_add(mux->hints, m->name, c->key, SMUX__HINT_PUT,
				  NULL, err);

	if (rc == 0 && c->to)
		rc = smux__hints_add(mux->hints, m->name, c->to, SMUX__HINT_PUT,
				     NULL, err);
	return rc;
}

/*
 * Rolls @c forward on the members of @v (see the file's comment), fenced
 * against user writes of its keys. A member is asked only when it is up
 * and missed no write of either key (fresh); the others, and a fresh one
 * whose call fails, get hints (hint_left_out). 0 once that is done; an
 * error when no member is fresh, a user writer holds a key or the
 * journal failed (the note stays for the next pass).
 */
static long roll_forward(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, const struct mux_change *c,
			 struct smux_event *ev, struct smux_error *err)
{
	bool done[SMUX__FAN_MAX] = {false}, fresh[SMUX__FAN_MAX] = {false};
	/* a link shows in its new name, a rename or delete in the key */
	const char *look = c->link ? c->to : c->key;
	bool happened = false, any = false;
	long rc = 0;

	if (v->n > SMUX__FAN_MAX)
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, mux->base.name,
				      "too many members");
	for (unsigned i = 0; i < v->n; i++) {
		smux__replay_fence_enter(mux, v->m[i], c->key);
		if (c->to)
			smux__replay_fence_enter(mux, v->m[i], c->to);
	}
	rc = smux__replay_blocked(mux, c->key, err);
	if (rc == 0 && c->to)
		rc = smux__replay_blocked(mux, c->to, err);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		struct smux_info info;
		struct smux__call head = {
			.op = SMUX__OP_HEAD, .key = look, .info = &info};
		struct smux_error e;
		long hrc;

		if (smux__health_status(&v->m[i]->health) != SMUX_STATUS_UP ||
		    change_stale(mux, v->m[i], c))
			continue;
		hrc = smux__member_call(mux, ctx, v->m[i], &head, false, &e);
		if (hrc < 0 && e.e.code != SMUX_E_KEY_NOT_FOUND)
			continue; /* unknown: left out */
		fresh[i] = true;
		any = true;
		/* the key gone from a fresh replica, or the link's name
		 * there: the change happened there */
		done[i] = c->link ? hrc == 0 : hrc != 0;
		if (done[i] && !happened) {
			happened = true;
			snprintf(ev->name, sizeof(ev->name), "%s",
				 v->m[i]->name);
		}
	}
	if (rc == 0 && !any)
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "complete the change of %s: no replica "
				    "up to date",
				    c->key);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		struct smux__call call = {.op = c->link ? SMUX__OP_LINK
						: c->to ? SMUX__OP_RENAME
							: SMUX__OP_DEL,
					  .key = c->key,
					  .key2 = c->to};
		struct smux_error e;

		if (fresh[i] && (!happened || done[i]))
			continue; /* as the others are */
		if (fresh[i] && smux__member_call(mux, ctx, v->m[i], &call,
						  false, &e) == 0) {
			if (c->to)
				smux__replica_wrote(mux, v->m[i], c->to);
		} else {
			rc = hint_left_out(mux, v->m[i], c, err);
		}
		if (rc == 0 && ev->n_failed < SMUX_EVENT_MAX_FAILED)
			snprintf(ev->failed[ev->n_failed++],
				 sizeof(ev->failed[0]), "%s", v->m[i]->name);
	}
	for (unsigned i = 0; i < v->n; i++) {
		if (c->to)
			smux__replay_fence_exit(mux, v->m[i], c->to);
		smux__replay_fence_exit(mux, v->m[i], c->key);
	}
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
		if (roll_forward(mux, ctx, v, c, &ev, &e) != 0) {
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
