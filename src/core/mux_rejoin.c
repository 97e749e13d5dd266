/* SPDX-License-Identifier: MIT */
/*
 * mux_rejoin.c - a member added at run time to a mux that replicates
 * (shield, mirror, failover) holds whatever it held before: nothing (a
 * new member), or the versions it had when it was removed - and a write
 * made while it was out left it no hint. So smux_mux_add journals a
 * rejoin hint for it (key SMUX__REJOIN_KEY, which no real key can be):
 * until that hint is replayed the member counts as stale for every key
 * (smux__member_stale): it serves no read, builds nothing from its old
 * copies, and takes only writes of a key's whole state (which it then
 * holds). Its per-key hints (kept while it was out) stay pending too.
 *
 * The replay (smux__rejoin_replay, from the repair) is a full resync from
 * the first other member that is up and not rejoining itself: every key
 * there is copied unless the member holds the same version (size and
 * mtime: replicas written through the mux agree on both) or has a
 * pending hint of its own for it (that hint's replay does it; a key the
 * source itself missed the latest write of gets such a hint first, so
 * the source's old version is never copied); every key
 * the member holds that the source does not hold (asked again, right
 * before the delete) is deleted, with the directories above it that this
 * leaves empty and the source lacks. The deletes go first, deepest
 * first: a name may be a directory on one side and a file on the other.
 * A write that reaches the member meanwhile wins over the copy (the copy
 * first checks that the member's version is still the one its listing
 * gave); the last window between that check and the copy's put is the one
 * every replay has (issue 9 item 3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mux_internal.h"

/* The keys (not prefixes) of one listing, in its (sorted) order. */
struct keyset {
	char **key;
	struct smux_info *info;
	size_t n, cap;
	bool oom;
};

static int collect(void *arg, const struct smux_list_entry *e)
{
	struct keyset *ks = arg;

	if (e->is_prefix)
		return 0;
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? 2 * ks->cap : 256;
		char **k = realloc(ks->key, cap * sizeof(*k));
		struct smux_info *in;

		if (k)
			ks->key = k;
		in = k ? realloc(ks->info, cap * sizeof(*in)) : NULL;
		if (!in) {
			ks->oom = true;
			return 1;
		}
		ks->info = in;
		ks->cap = cap;
	}
	ks->key[ks->n] = strdup(e->key);
	if (!ks->key[ks->n]) {
		ks->oom = true;
		return 1;
	}
	ks->info[ks->n++] = e->info;
	return 0;
}

static void keyset_free(struct keyset *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		free(ks->key[i]);
	free(ks->key);
	free(ks->info);
}

static long list_all(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct mux_member *m, struct keyset *ks,
		     struct smux_error *err)
{
	struct smux__call call = {
		.op = SMUX__OP_LIST,
		.key = "",
		.list_fn = collect,
		.list_arg = ks,
	};
	long rc = smux__member_call(mux, ctx, m, &call, false, err);

	if (rc == 0 && ks->oom)
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				    "resync of %s: listing too large", m->name);
	return rc;
}

/* True when @dst's version of @key now is not the one its listing gave
 * (@had; NULL: it had none): a write reached it meanwhile. */
static bool changed(const struct smux_info *had, int head_rc,
		    const struct smux_info *now)
{
	if (!had)
		return head_rc == 0;
	return head_rc != 0 || now->size != had->size ||
	       now->mtime_ns != had->mtime_ns;
}

void (*smux__rejoin_hook_copy)(struct smux_mux *mux, const char *key);
void (*smux__rejoin_hook_check)(struct smux_mux *mux, const char *key);

/*
 * True when a member of @v other than @dst has @key's latest write (no
 * hint for it): a replay of a hint of @dst's copies from there. When none
 * has, the latest write of @key that a member of @v took is @dst's if
 * @dst holds the key without a hint of its own: every other member missed
 * it, and a later write that reached one of them would have superseded
 * its hint (one removed while it held the only latest copy, added back).
 */
static bool peer_has_latest(struct smux_mux *mux, struct mux_view *v,
			    struct mux_member *dst, const char *key)
{
	/* the latest write left with another replica, removed while it
	 * held the only copy (mux_departed.c): @dst's is not it */
	if (smux__departed_with(mux, key, dst->name, NULL) ==
	    SMUX__DEPARTED_OTHER)
		return true;
	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *m = v->m[i];

		if (m == dst)
			continue;
		if (!smux__member_stale(mux, m, key))
			return true;
		/* rejoining, and it took the key's latest write since it
		 * was added (mux_fresh.c) */
		if (smux__rejoining(mux, m) &&
		    !smux__hints_has(mux->hints, m->name, key) &&
		    smux__fresh_has(mux, m->name, key))
			return true;
		/* stale only while a call given up on may still land there
		 * (no hint: it missed no write): it holds the latest
		 * acknowledged write, or a newer one - @dst's copy is not
		 * the latest (taken for it, an old copy was kept without a
		 * hint and served reads: the storm's shield stale read) */
		if (smux__member_zombie(mux, m, key) &&
		    !smux__hints_has(mux->hints, m->name, key) &&
		    !smux__rejoining(mux, m))
			return true;
	}
	return false;
}

/*
 * The kind of hint @dst gets for @key when a peer has its latest write: a
 * delete hint when that write is a delete that left with a removed
 * replica (mux_departed.c; as a put hint it kept that replica, back and
 * without the key, from keeping the absence: peers_missed_delete), else a
 * put hint (a delete hint's replay converges on a peer's state too).
 */
static enum smux__hint_kind missed_kind(struct smux_mux *mux,
					struct mux_member *dst, const char *key)
{
	enum smux__hint_kind kind;

	if (smux__departed_with(mux, key, dst->name, &kind) !=
	    SMUX__DEPARTED_OTHER)
		return SMUX__HINT_PUT;
	return kind;
}

/*
 * True when every member of @v other than @dst missed a delete of @key
 * (a pending delete hint each): the delete was taken by a member out of
 * the view then - @dst, rejoining without the key - so @dst's absence is
 * the key's latest state, which their replays copy (mirror, shield: a
 * delete hint converges on a peer's state). With a hint of its own @dst
 * would be stale too, and no replay could run. A peer's zombie changes
 * nothing: whatever an older call lands there, its delete hint stays
 * and is replayed once the call is over (the zombie made @dst stale too,
 * and the repair never converged: test_resync_keeps_delete_peer_zombie).
 */
static bool peers_missed_delete(struct smux_mux *mux, struct mux_view *v,
				struct mux_member *dst, const char *key)
{
	bool all = v->n > 1;

	for (unsigned i = 0; i < v->n && all; i++) {
		struct smux__hint *list = NULL;
		bool del = false;
		int n;

		if (v->m[i] == dst)
			continue;
		if (!smux__hints_has(mux->hints, v->m[i]->name, key))
			return false;
		n = smux__hints_list(mux->hints, v->m[i]->name, &list);
		for (int j = 0; j < n; j++)
			if (strcmp(list[j].key, key) == 0)
				del = list[j].kind == SMUX__HINT_DEL;
		smux__hints_free_list(list, n);
		all = del;
	}
	return all;
}

/*
 * Inside the fence of (@dst, @key): 0 when the resync may decide @key on
 * @dst from @src; 1 when it must leave it: @dst has a hint of its own for
 * it (its replay's), or @src missed the key's latest write (its hint may
 * be recorded after hint_source_stale ran; the write fenced @dst until
 * then, so it shows now): @dst may hold a newer version than @src and gets
 * a hint, whose replay copies from a replica with the latest one - unless
 * no other member has it and @dst holds the key (@dst_holds): then @dst's
 * is the latest (peer_has_latest), kept without a hint, and the others'
 * replays copy it (with a hint every replica was stale for the key, and
 * no replay could run). Likewise when @dst lacks the key and every other
 * member missed a delete of it (peers_missed_delete). Or the journal's
 * error.
 */
static long leave_key(struct smux_mux *mux, struct mux_view *v,
		      struct mux_member *src, struct mux_member *dst,
		      const char *key, bool dst_holds, struct smux_error *err)
{
	long rc;

	if (smux__hints_has(mux->hints, dst->name, key))
		return 1;
	/* @dst took the key's latest write since it was added */
	if (smux__fresh_has(mux, dst->name, key))
		return 1;
	if (!smux__member_stale(mux, src, key))
		return 0;
	if (dst_holds && !peer_has_latest(mux, v, dst, key))
		return 1;
	if (!dst_holds && peers_missed_delete(mux, v, dst, key))
		return 1;
	rc = smux__hints_add(mux->hints, dst->name, key,
			     missed_kind(mux, dst, key), NULL, err);
	return rc ? rc : 1;
}

/* Copies @key from @src to @dst (a directory marker is recreated empty)
 * unless a write reached @dst since its listing gave @had (NULL: none);
 * an mtime says nothing about that (a program may set any). The check,
 * the get and the put are one fence section of (@dst, @key): a user
 * write of the key that includes @dst lands before it (and is seen) or
 * after it (on top of the copy), never between the check and the put. */
static long copy_key(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct mux_view *v, struct mux_member *src,
		     struct mux_member *dst, const char *key,
		     const struct smux_info *had, struct smux_error *err)
{
	struct smux_get_opts all = {.length = SMUX_LEN_ALL};
	bool marker = smux_key_is_dir(key);
	struct smux_info info = {0}, now = {0};
	struct smux_put_opts po = {0};
	struct smux_source source;
	struct smux_sink sink;
	struct smux__call get = {
		.op = marker ? SMUX__OP_HEAD : SMUX__OP_GET,
		.key = key,
		.get_opts = marker ? NULL : &all,
		.sink = marker ? NULL : &sink,
		.info = &info,
	};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &now};
	struct smux__call put = {
		.op = SMUX__OP_PUT,
		.key = key,
		.src = &source,
		.put_opts = &po,
	};
	struct smux_error e;
	long rc;
	int fd;

	fd = smux_tmpfile(mux->base.name, "resync", err);
	if (fd < 0)
		return fd;
	smux_sink_fd(&sink, fd, 0);
	smux__replay_fence_enter(mux, dst, key);
	rc = smux__replay_blocked(mux, key, err);
	if (rc == 0)
		rc = leave_key(mux, v, src, dst, key, had != NULL, err);
	if (rc == 0 && smux__rejoin_hook_check)
		smux__rejoin_hook_check(mux, key);
	if (rc == 0) {
		int hrc =
			(int)smux__member_call(mux, ctx, dst, &head, false, &e);

		/* no answer (@dst draining since the listing, down, ...) is
		 * no news of a write: the resync fails, its hint stays (it
		 * took that for "changed", skipped the copy and ended with
		 * @dst still holding its old version, no hint left) */
		if (hrc < 0 && e.e.code != SMUX_E_KEY_NOT_FOUND) {
			*err = e;
			rc = hrc;
		} else if (changed(had, hrc, &now)) {
			/* a newer write reached @dst meanwhile: nothing to
			 * copy */
			rc = 1;
		}
	}
	if (rc == 0) {
		/* a section of (@src, @key) too: no fan-out write is between
		 * its calls and its hints on @src (leave_key again: one that
		 * just ended may have hinted @src) */
		smux__replay_fence_enter(mux, src, key);
		rc = leave_key(mux, v, src, dst, key, had != NULL, err);
		if (rc == 0)
			rc = smux__member_call(mux, ctx, src, &get, false, err);
		smux__replay_fence_exit(mux, src, key);
	}
	/* deleted meanwhile (the delete reached @dst too) */
	if (rc < 0 && err->e.code == SMUX_E_KEY_NOT_FOUND)
		rc = 1;
	if (rc == 0) {
		if (smux__rejoin_hook_copy)
			smux__rejoin_hook_copy(mux, key);
		smux_put_opts_keep(&po, &info);
		smux_source_fd(&source, fd, 0, marker ? 0 : sink.written);
		rc = smux__member_call(mux, ctx, dst, &put, false, err);
	}
	smux__replay_fence_exit(mux, dst, key);
	close(fd);
	return rc > 0 ? 0 : rc;
}

/*
 * The directories above @key on @dst that a drop left empty and @src does
 * not hold go too, deepest first, up to the first that holds something
 * (NOT_EMPTY) or that @src holds (its other keys' copies fill it): else a
 * directory deleted while @dst was out came back, empty, on @dst, and a
 * file of @src whose name @dst held as a directory (an exchange whose
 * undo failed) could not be copied. Each is a fence section of (@dst,
 * "dir/"), as a user's rmdir. Best effort: what stays is only an empty
 * directory.
 */
static void prune_parents(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct mux_member *src, struct mux_member *dst,
			  const char *key)
{
	char dir[SMUX_KEY_MAX + 2];
	struct smux_error e;
	struct smux_info info;
	size_t n = strlen(key);
	char *slash;

	if (n >= sizeof(dir))
		return;
	memcpy(dir, key, n + 1);
	if (n && dir[n - 1] == '/')
		dir[n - 1] = '\0';
	while ((slash = strrchr(dir, '/')) != NULL) {
		struct smux__call head = {
			.op = SMUX__OP_HEAD, .key = dir, .info = &info};
		struct smux__call del = {.op = SMUX__OP_DEL, .key = dir};
		long rc;

		slash[1] = '\0'; /* "a/b/" */
		smux__replay_fence_enter(mux, dst, dir);
		smux__replay_fence_enter(mux, src, dir);
		rc = smux__member_call(mux, ctx, src, &head, false, &e);
		smux__replay_fence_exit(mux, src, dir);
		if (rc < 0 && e.e.code == SMUX_E_KEY_NOT_FOUND)
			rc = smux__member_call(mux, ctx, dst, &del, false, &e);
		else
			rc = 1; /* @src holds it, or no answer */
		smux__replay_fence_exit(mux, dst, dir);
		if (rc)
			return;
		*slash = '\0';
	}
}

/* Deletes @key from @dst unless @src holds it now (created meanwhile);
 * one fence section of (@dst, @key), as copy_key. */
static long drop_key(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct mux_view *v, struct mux_member *src,
		     struct mux_member *dst, const char *key,
		     struct smux_error *err)
{
	struct smux_info info;
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	struct smux__call del = {.op = SMUX__OP_DEL, .key = key};
	bool dropped = false;
	long rc;

	smux__replay_fence_enter(mux, dst, key);
	smux__replay_fence_enter(mux, src, key);
	rc = smux__replay_blocked(mux, key, err);
	if (rc == 0)
		rc = leave_key(mux, v, src, dst, key, true, err);
	if (rc == 0)
		rc = smux__member_call(mux, ctx, src, &head, false, err);
	smux__replay_fence_exit(mux, src, key);
	/* @src holds a directory of that name, or a file where the key's
	 * directory would be: it does not hold the key */
	if ((rc == 0 && !smux_key_is_dir(key) && S_ISDIR(info.mode)) ||
	    (rc < 0 && err->e.code == SMUX_E_NOT_DIRECTORY)) {
		rc = smux_error_set(err, SMUX_E_KEY_NOT_FOUND, src->name,
				    "\"%s\": another type", key);
	}
	if (rc <= 0) {
		if (rc == 0)
			rc = 1; /* @src holds it */
		else if (err->e.code == SMUX_E_KEY_NOT_FOUND)
			rc = smux__member_call(mux, ctx, dst, &del, false, err);
		if (rc < 0 && (err->e.code == SMUX_E_KEY_NOT_FOUND ||
			       err->e.code == SMUX_E_NOT_EMPTY))
			rc = 0; /* gone already; a directory with children
				 * stays */
		else if (rc == 0)
			dropped = true;
	}
	smux__replay_fence_exit(mux, dst, key);
	if (dropped)
		prune_parents(mux, ctx, src, dst, key);
	return rc > 0 ? 0 : rc;
}

/*
 * The keys @src missed the latest write of (its pending hints) are not
 * copied from it: @dst gets a hint of its own for each (so the merge walk
 * leaves them to those hints, whose replay copies from a replica that has
 * the key). Keys @src missed that neither listing shows are covered too.
 */
static long hint_source_stale(struct smux_mux *mux, struct mux_view *v,
			      struct mux_member *src, struct mux_member *dst,
			      struct smux_error *err)
{
	struct smux__hint *list = NULL;
	int n = smux__hints_list(mux->hints, src->name, &list);
	long rc = 0;

	if (n < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	for (int i = 0; i < n && rc == 0; i++) {
		const char *key = list[i].key;

		if (list[i].kind == SMUX__HINT_INTENT ||
		    strcmp(key, SMUX__REJOIN_KEY) == 0)
			continue;
		/*
		 * From the look at the peers to the hint, no user write of
		 * the key on @dst (mux_fence.c): a write that reached @dst
		 * and missed the peers records their hints after its calls.
		 * Looked at in between, a peer not hinted yet "has the
		 * latest", and @dst - the only replica holding it - got a
		 * hint too: every replica stale for the key, none to copy
		 * it from (the storm's mirror run that never converged).
		 * (No other member has the latest: the walk decides, by
		 * whether @dst holds the key, leave_key.)
		 */
		smux__replay_fence_enter(mux, dst, key);
		if (!smux__hints_has(mux->hints, dst->name, key) &&
		    !smux__fresh_has(mux, dst->name, key) &&
		    peer_has_latest(mux, v, dst, key))
			rc = smux__hints_add(mux->hints, dst->name, key,
					     missed_kind(mux, dst, key), NULL,
					     err);
		smux__replay_fence_exit(mux, dst, key);
	}
	smux__hints_free_list(list, n);
	return rc;
}

/* A key of the resync's merge walk: its place in the source's listing
 * and in the member's (-1: not there). */
struct step {
	long want, have;
};

struct plan {
	struct step *step;
	size_t n;
};

/* The keys the resync changes on the member, in key order: those only the
 * source holds (copied), only the member holds (dropped), or both in
 * other versions (size and mtime; copied). */
static long plan_walk(struct smux_mux *mux, const struct keyset *want,
		      const struct keyset *have, struct plan *p,
		      struct smux_error *err)
{
	size_t i = 0, j = 0;

	p->step = calloc(want->n + have->n + 1, sizeof(*p->step));
	if (!p->step)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	while (i < want->n || j < have->n) {
		int c = i == want->n   ? 1
			: j == have->n ? -1
				       : strcmp(want->key[i], have->key[j]);

		if (c != 0 || want->info[i].size != have->info[j].size ||
		    want->info[i].mtime_ns != have->info[j].mtime_ns)
			p->step[p->n++] = (struct step){
				.want = c <= 0 ? (long)i : -1,
				.have = c >= 0 ? (long)j : -1,
			};
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	return 0;
}

/* Carries out one step of the plan on @dst. Returns 1 when the resync is
 * over (@dst no longer rejoining). */
static long resync_step(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_view *v, struct mux_member *src,
			struct mux_member *dst, const struct keyset *want,
			const struct keyset *have, const struct step *st,
			struct smux_error *err)
{
	const char *key =
		st->want >= 0 ? want->key[st->want] : have->key[st->have];
	long rc = smux_ctx_check(ctx, mux->base.name, err);

	if (rc)
		return rc;
	if (!smux__rejoining(mux, dst))
		return 1;
	/* a key with a hint of its own is its own replay's; one a call
	 * given up on may still change is hinted when that call ends
	 * (mux_zombie.c) */
	if (smux__hints_has(mux->hints, dst->name, key) ||
	    smux__member_zombie(mux, dst, key) ||
	    smux__fresh_has(mux, dst->name, key))
		return 0;
	if (st->want < 0)
		return drop_key(mux, ctx, v, src, dst, key, err);
	return copy_key(mux, ctx, v, src, dst, key,
			st->have < 0 ? NULL : &have->info[st->have], err);
}

bool smux__rejoining(struct smux_mux *mux, struct mux_member *m)
{
	return smux__hints_pending(mux->hints, m->name) > 0 &&
	       smux__hints_has(mux->hints, m->name, SMUX__REJOIN_KEY);
}

long smux__rejoin_replay(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *dst,
			 struct smux_error *err)
{
	struct keyset have = {0}, want = {0};
	struct mux_member *src = NULL;
	struct plan plan = {0};
	bool peers = false;
	long rc;

	/* failover: no other member at all (the one it was added beside
	 * removed since: a reload that switched a failover's member,
	 * whose standbys are kept in sync by other means): nothing to
	 * resync from, ever; what @dst holds is the mux's content from now
	 * on. A mirror or shield keeps such a member stale (its keys
	 * unavailable, never absent) until a peer is back. */
	for (unsigned k = 0; k < v->n; k++)
		if (v->m[k] != dst && !smux__sticky_slot_empty(v->m[k]))
			peers = true;
	if (!peers && mux->mode == SMUX_MODE_FAILOVER)
		return 0;
	for (unsigned k = 0; k < v->n && !src; k++)
		if (v->m[k] != dst &&
		    smux__health_status(&v->m[k]->health) == SMUX_STATUS_UP &&
		    !smux__rejoining(mux, v->m[k]))
			src = v->m[k];
	if (!src)
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "no member to resync %s from", dst->name);
	rc = hint_source_stale(mux, v, src, dst, err);
	if (rc == 0)
		rc = list_all(mux, ctx, src, &want, err);
	if (rc == 0)
		rc = list_all(mux, ctx, dst, &have, err);
	/* both listings are in byte-wise key order: one merge walk plans,
	 * then the drops go (deepest first) before the copies: @dst may
	 * hold a directory where @src holds a file of that name (its
	 * entries go, then its marker) or a file where @src's keys need a
	 * directory (an exchange whose undo failed on @dst) */
	if (rc == 0)
		rc = plan_walk(mux, &want, &have, &plan, err);
	for (size_t k = plan.n; rc == 0 && k-- > 0;)
		if (plan.step[k].want < 0)
			rc = resync_step(mux, ctx, v, src, dst, &want, &have,
					 &plan.step[k], err);
	for (size_t k = 0; rc == 0 && k < plan.n; k++)
		if (plan.step[k].want >= 0)
			rc = resync_step(mux, ctx, v, src, dst, &want, &have,
					 &plan.step[k], err);
	if (rc > 0)
		rc = 0; /* @dst removed, or resynced by another repair */
	free(plan.step);
	keyset_free(&want);
	keyset_free(&have);
	if (rc == 0) {
		smux__rejoin_fn hook = atomic_load(&smux__rejoin_hook_resynced);

		if (hook)
			hook(mux, dst->name);
	}
	/* what it took meanwhile (mux_fresh.c) is forgotten once its rejoin
	 * hint is done (smux__rejoin_over), not here: until then it still
	 * counts as rejoining, and another member's resync, asking whether
	 * it holds a key's latest write, found it rejoining and without the
	 * note - and kept its own old copy without a hint (the storm's
	 * mirror runs with two members rejoining at once) */
	return rc;
}

_Atomic(smux__rejoin_fn) smux__rejoin_hook_resynced;

void smux__rejoin_over(struct smux_mux *mux, struct mux_member *m)
{
	struct mux_view *now;
	bool in = false;

	/* removed and added back since: a new rejoin, with notes of its own */
	if (smux__rejoining(mux, m))
		return;
	/* resynced: what it took meanwhile is no longer needed (a write
	 * from its resync to here was noted, harmlessly) */
	smux__fresh_clear(mux, m->name);
	now = smux__view_get(mux);
	for (unsigned k = 0; k < now->n && !in; k++)
		in = now->m[k] == m;
	smux__view_put(now);
	/* what left with it is back in the view (kept, or hinted) - unless
	 * it was removed again meanwhile, still holding it */
	if (in)
		smux__departed_forget(mux, m->name);
}
