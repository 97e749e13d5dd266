/* SPDX-License-Identifier: MIT */
/*
 * mux_failover.c - "nothing acknowledged is lost" in failover mode
 * (DESIGN section 3).
 *
 * A failover write goes to the first member, in order, that takes it. When
 * that is not the first member, the members ahead of it were down,
 * draining or failing, and they missed the write: each gets a durable hint
 * before the write is acknowledged. Hence the rule the rest relies on: for
 * a key, the first member in order without a pending hint holds its
 * newest version. Every operation on a key - read or write, writers too -
 * passes over members with a hint for it (the walk in mux_exec.c), so
 * until the hint is replayed the replay is the only writer of that key on
 * that member and never lands on top of a newer write; listings are
 * corrected by the hints of the member that answered (mux_list.c); replay
 * copies from that first member (mux_repair.c).
 *
 * Owns no state: the hints live in the journal (hints.c), the members in
 * the mux's view.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

static void emit(struct smux_mux *mux, struct smux_event *ev)
{
	snprintf(ev->mux, sizeof(ev->mux), "%s", mux->base.name);
	smux_events_emit(mux->events, ev);
}

void (*smux__failover_hinted_hook)(struct smux_mux *mux, const char *replica,
				   const char *key);

/* Hints for @key (@kind) on the first @n members of @v, recorded at once. */
static int hinted_ahead(struct smux_mux *mux, struct mux_view *v, unsigned n,
			const char *key, enum smux__hint_kind kind,
			struct smux_error *err)
{
	const char *small[8], **names = small;
	int rc;

	if (n == 0)
		return 0;
	if (n > sizeof(small) / sizeof(small[0])) {
		names = calloc(n, sizeof(*names));
		if (!names)
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      mux->base.name, NULL);
	}
	for (unsigned i = 0; i < n; i++)
		names[i] = v->m[i]->name;
	rc = smux__hints_add_batch(mux->hints, names, n, key, kind, err);
	if (names != small)
		free(names);
	return rc;
}

int smux__failover_missed(struct smux_mux *mux, struct mux_member *acked,
			  const char *key, enum smux__hint_kind kind,
			  struct smux_error *err)
{
	struct mux_view *v;
	unsigned pos = 0, added = 0;
	int rc = 0;

	if (kind == SMUX__HINT_NONE)
		return 0;
	if (smux__fanout_hook_acked)
		smux__fanout_hook_acked(mux, key);
	smux__replica_wrote(mux, acked, key);
	v = smux__view_get(mux);
	while (pos < v->n && v->m[pos] != acked)
		pos++;
	/* not in the view: removed while it took the write, which then
	 * lives on no member of the mux: not acknowledged (the members
	 * still in keep the previous version, which is what the caller
	 * is told they have) */
	if (pos == v->n) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "%s took the write of %s but was removed "
				      "meanwhile",
				      acked->name, key);
	}
	/* every member ahead at once: with some hints visible and others
	 * not, the first member without a hint would not hold the newest
	 * version, and a replay would copy an older one (hints_batch.c) */
	rc = hinted_ahead(mux, v, pos, key, kind, err);
	if (rc == 0)
		added = pos;
	/* removed while the hints were recorded: smux_mux_remove checks the
	 * hints once the member is out of the view (and puts it back when
	 * it holds the only copy of a write), this checks the view once the
	 * hints are in, so one of the two sees the other */
	if (rc == 0 && pos && !smux__member_in_view(mux, acked))
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "%s took the write of %s but was removed "
				    "meanwhile",
				    acked->name, key);
	for (unsigned i = 0; i < added; i++) {
		struct smux_event ev = {.topic = SMUX_EV_HINT_RECORDED};

		snprintf(ev.name, sizeof(ev.name), "%s", v->m[i]->name);
		snprintf(ev.key, sizeof(ev.key), "%s", key);
		emit(mux, &ev);
		if (smux__failover_hinted_hook)
			smux__failover_hinted_hook(mux, v->m[i]->name, key);
	}
	smux__view_put(v);
	return rc;
}

bool smux__failover_sole_holder(struct smux_mux *mux, struct mux_view *old,
				const char *name, char *key, size_t len)
{
	struct smux__hint *list = NULL;
	int n = smux__hints_list(mux->hints, NULL, &list);
	bool sole = false;

	/* out of memory (n < 0): the remove goes ahead, as before */
	for (int i = 0; i < n && !sole; i++) {
		struct mux_member *holder;
		bool ahead = false;

		if (list[i].kind != SMUX__HINT_PUT ||
		    strcmp(list[i].key, SMUX__REJOIN_KEY) == 0)
			continue;
		holder = smux__failover_source(mux, old, NULL, list[i].key);
		if (!holder || strcmp(holder->name, name) != 0)
			continue;
		/* the hinted member is one of this view, ahead of the holder */
		for (unsigned j = 0; j < old->n && old->m[j] != holder; j++)
			if (strcmp(old->m[j]->name, list[i].replica) == 0)
				ahead = true;
		if (ahead) {
			sole = true;
			snprintf(key, len, "%s", list[i].key);
		}
	}
	if (n > 0)
		smux__hints_free_list(list, n);
	return sole;
}

bool smux__failover_holds(struct smux_mux *mux, struct mux_member *m,
			  const char *key)
{
	struct mux_view *v = smux__view_get(mux);
	bool holds = smux__failover_source(mux, v, NULL, key) == m;

	smux__view_put(v);
	return holds;
}

/* Operations whose result depends on the key's current content or
 * existence (not a whole new content, not a delete). */
static bool builds_on_object(const struct smux__call *call)
{
	switch (call->op) {
	case SMUX__OP_COPY:
	case SMUX__OP_RENAME:
	case SMUX__OP_LINK:
	case SMUX__OP_SETATTR:
	case SMUX__OP_SETXATTR:
	case SMUX__OP_REMOVEXATTR:
		return true;
	default:
		return false;
	}
}

long smux__failover_write(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct smux__call *call, enum smux__hint_kind kind,
			  struct smux_span *span, struct smux_error *err)
{
	bool two_keys = call->op == SMUX__OP_COPY ||
			call->op == SMUX__OP_RENAME ||
			call->op == SMUX__OP_LINK;
	struct mux_member *acked = NULL;
	long rc;
	int hrc;

	/* Standbys are not replicas: a member behind the holder may keep
	 * any older version of the key. A rename, copy or attribute change
	 * made there would carry that old version back over the holder's
	 * newer one at the replay; it runs on the holder or not at all. */
	if (builds_on_object(call))
		rc = smux__exec_walk_holder(mux, ctx, call, &acked, span, err);
	else
		rc = smux__exec_walk(mux, ctx, call, true, &acked, span, err);
	if (rc < 0 || !acked)
		return rc;
	/* the key the write leaves behind first: a crash between the two
	 * hints of a rename then leaves the source behind on the member
	 * that missed it, never the destination missing */
	hrc = smux__failover_missed(
		mux, acked, two_keys ? call->key2 : call->key, kind, err);
	if (hrc == 0 && call->op == SMUX__OP_RENAME)
		hrc = smux__failover_missed(mux, acked, call->key,
					    SMUX__HINT_DEL, err);
	smux__member_put(acked);
	return hrc ? hrc : rc;
}

struct mux_member *smux__failover_source(struct smux_mux *mux,
					 struct mux_view *v,
					 struct mux_member *dst,
					 const char *key)
{
	for (unsigned i = 0; i < v->n; i++)
		if (v->m[i] != dst && !smux__member_stale(mux, v->m[i], key))
			return v->m[i];
	return NULL;
}
