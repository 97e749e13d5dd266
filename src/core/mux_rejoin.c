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
 * before the delete) is deleted. A write that reaches the member meanwhile
 * wins over the copy (the copy first checks that the member's version is
 * still the one its listing gave); the last window between that check and
 * the copy's put is the one every replay has (issue 9 item 3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
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
	for (unsigned i = 0; i < v->n; i++)
		if (v->m[i] != dst && !smux__member_stale(mux, v->m[i], key))
			return true;
	return false;
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
 * no replay could run). Or the journal's error.
 */
static long leave_key(struct smux_mux *mux, struct mux_view *v,
		      struct mux_member *src, struct mux_member *dst,
		      const char *key, bool dst_holds, struct smux_error *err)
{
	long rc;

	if (smux__hints_has(mux->hints, dst->name, key))
		return 1;
	if (!smux__member_stale(mux, src, key))
		return 0;
	if (dst_holds && !peer_has_latest(mux, v, dst, key))
		return 1;
	rc = smux__hints_add(mux->hints, dst->name, key, SMUX__HINT_PUT, NULL,
			     err);
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
	/* a newer write reached @dst meanwhile: nothing to copy */
	if (rc == 0 &&
	    changed(had,
		    (int)smux__member_call(mux, ctx, dst, &head, false, &e),
		    &now))
		rc = 1;
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
	long rc;

	smux__replay_fence_enter(mux, dst, key);
	smux__replay_fence_enter(mux, src, key);
	rc = smux__replay_blocked(mux, key, err);
	if (rc == 0)
		rc = leave_key(mux, v, src, dst, key, true, err);
	if (rc == 0)
		rc = smux__member_call(mux, ctx, src, &head, false, err);
	smux__replay_fence_exit(mux, src, key);
	if (rc <= 0) {
		if (rc == 0)
			rc = 1; /* @src holds it */
		else if (err->e.code == SMUX_E_KEY_NOT_FOUND)
			rc = smux__member_call(mux, ctx, dst, &del, false, err);
		if (rc < 0 && (err->e.code == SMUX_E_KEY_NOT_FOUND ||
			       err->e.code == SMUX_E_NOT_EMPTY))
			rc = 0; /* gone already; a directory with children
				 * stays */
	}
	smux__replay_fence_exit(mux, dst, key);
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

		/* (no other member has the latest: the walk decides, by
		 * whether @dst holds the key, leave_key) */
		if (list[i].kind == SMUX__HINT_INTENT ||
		    strcmp(key, SMUX__REJOIN_KEY) == 0 ||
		    smux__hints_has(mux->hints, dst->name, key) ||
		    !peer_has_latest(mux, v, dst, key))
			continue;
		rc = smux__hints_add(mux->hints, dst->name, key, SMUX__HINT_PUT,
				     NULL, err);
	}
	smux__hints_free_list(list, n);
	return rc;
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
	size_t i = 0, j = 0;
	long rc;

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
	/* both listings are in byte-wise key order: one merge walk */
	while (rc == 0 && (i < want.n || j < have.n)) {
		int c = i == want.n   ? 1
			: j == have.n ? -1
				      : strcmp(want.key[i], have.key[j]);
		const char *key = c <= 0 ? want.key[i] : have.key[j];

		rc = smux_ctx_check(ctx, mux->base.name, err);
		if (rc)
			break;
		if (!smux__rejoining(mux, dst))
			break; /* removed, or resynced by another repair */
		/* a key with a hint of its own is its own replay's; one a
		 * call given up on may still change is hinted when that
		 * call ends (mux_zombie.c) */
		if (!smux__hints_has(mux->hints, dst->name, key) &&
		    !smux__member_zombie(mux, dst, key)) {
			if (c > 0)
				rc = drop_key(mux, ctx, v, src, dst, key, err);
			else if (c < 0)
				rc = copy_key(mux, ctx, v, src, dst, key, NULL,
					      err);
			else if (want.info[i].size != have.info[j].size ||
				 want.info[i].mtime_ns != have.info[j].mtime_ns)
				rc = copy_key(mux, ctx, v, src, dst, key,
					      &have.info[j], err);
		}
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	keyset_free(&want);
	keyset_free(&have);
	return rc;
}
