/* SPDX-License-Identifier: MIT */
/*
 * mux_repair.c - hinted handoff replay and the mux's background thread
 * (active health checks on an interval, replay of pending hints once
 * their replica is up again).
 *
 * Replaying a hint: a missed put is copied from a replica that has the
 * key and no pending hint of its own for it (through a temporary file, so
 * memory stays bounded) - in failover, from the first member in order
 * without one, the member that took the latest write; a missed delete is
 * repeated. A hint whose replica is no longer a member is kept (for
 * when the name is added back) and not replayed meanwhile. A
 * replay checks, right before it writes, that its hint is still pending:
 * a write that reached the replica meanwhile is newer than the copy. Two
 * repairs (the background thread's and smux_mux_repair's) never replay
 * one (replica, key) at once: an older copy could otherwise land after a
 * newer one, and a user write of the pair never lands between a replay's
 * check and its write (mux_fence.c). A repair replays up to
 * REPAIR_PARALLEL hints at once. A copy carries the object's user.
 * extended attributes too when both members keep them (SMUX_CAP_XATTR): a
 * replica that missed a setxattr or removexattr is hinted like any write,
 * and its replay makes its attributes those of the source.
 *
 * A replay that fails is tried again by the background repair after a
 * wait that doubles at each failure (smux__hints_failed), and a hint
 * that failed before is never the probe of a down replica. Its transient
 * failures do not take a member down by themselves: a member may refuse
 * one key at every try (a name its server cannot store) and serve every
 * other, so after a failed replay each member whose call failed is asked
 * for a health check, which decides (replay_judge). Timeouts count as
 * they always do.
 *
 * A write intent (mux_intent.c) still pending once its writer is gone is
 * reconciled: every member is asked for the key, the newest copy (latest
 * mtime, then the larger; a directory: the first) of a member without a
 * hint pending for it (one with a hint missed an acknowledged write) is
 * copied onto the members whose bytes differ, its mode, owner and
 * extended attributes set where only they differ (mux_meta.c), and an
 * event (storage-mux.reconciled) names the key. A put, setattr or xattr
 * change a dead daemon left half made is reconciled so (mux_change.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* smux__member_call_source's member, on this thread */
static __thread const struct mux_member *call_source;

void smux__member_call_source(const struct mux_member *m)
{
	call_source = m;
}

/* One call on @m through its bulkhead, with bookkeeping (@probe: this
 * call is the health probe of a down @m). */
long smux__member_call(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct mux_member *m, struct smux__call *call,
		       bool probe, struct smux_error *err)
{
	int64_t t0 = smux_now_ns();
	long rc;

	call->backend = m->backend;
	if (m == call_source) {
		atomic_fetch_add(&m->health.in_flight, 1);
	} else if (!smux__member_enter(m)) {
		if (probe)
			smux__health_probe_cancel(&m->health);
		return smux_error_set(err, SMUX_E_BACKEND_DRAINING, m->name,
				      NULL);
	}
	rc = smux__bulkhead_run(m->bh, ctx, mux->timeout_ms, call, err);
	atomic_fetch_sub(&m->health.in_flight, 1);
	smux__attempt_done(mux, ctx, m, probe, t0, rc < 0 ? err : NULL, NULL);
	return rc;
}

/*
 * A replay's check, inside its fence section (mux_fence.c): @dst's hint
 * for @key is still pending (else a write reached it: nothing to do).
 */
static bool still_pending(struct smux_mux *mux, struct mux_member *dst,
			  const char *key)
{
	bool pending = smux__hints_has(mux->hints, dst->name, key);
	smux__replay_check_fn hook = atomic_load(&smux__replay_check_hook);

	if (pending && hook)
		hook(mux, dst->name, key);
	return pending;
}

/*
 * A replay's read of @key from its source @src: a section of (@src, @key)
 * of its own (mux_fence.c), so it never reads what a fan-out write left
 * on @src before that write recorded its hints - a version the write may
 * roll back (a shield origin failed it) -, and only while @src has no
 * hint for @key (else ALL_BACKENDS_DOWN, @src's probe given back).
 */
static long source_get(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct mux_member *src, bool src_probe, const char *key,
		       struct smux__call *get, struct smux_error *err)
{
	long rc;

	smux__replay_fence_enter(mux, src, key);
	if (smux__member_stale(mux, src, key)) {
		if (src_probe)
			smux__health_probe_cancel(&src->health);
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, src->name,
				    "missed the latest write of %s", key);
	} else {
		rc = smux__member_call(mux, ctx, src, get, src_probe, err);
	}
	smux__replay_fence_exit(mux, src, key);
	return rc;
}

/* ---- files of several names ---- */

/*
 * A replay knows one key. A file of several names whose names a replica
 * all missed (cp -a or rsync -H of a tree while it was drained) got a
 * file of its own per name there: the replay of each name now looks for
 * a name of the same file (by @src's file id) that a replay put on @dst
 * and links it, after checking that it is still that file on both. Such
 * replays run one at a time (mux->link_lock, which also guards the
 * memo).
 */

/* Whether @info is a file (or a symlink: ln s s2 links the symlink
 * itself) of several names, known by its file id. */
static bool several_names(const struct smux_info *info)
{
	return (S_ISREG(info->mode) || S_ISLNK(info->mode)) &&
	       info->nlink > 1 && info->file_id;
}

void smux__link_memo_free(struct smux_mux *mux)
{
	for (unsigned i = 0; i < SMUX__LINK_MEMO; i++) {
		free(mux->link_memo[i].key);
		mux->link_memo[i].key = NULL;
	}
}

/* A replay put @key on @dst, a file of several names on @src (@info);
 * caller holds link_lock. */
static void link_memo_note(struct smux_mux *mux, const struct mux_member *src,
			   const struct mux_member *dst,
			   const struct smux_info *info, const char *key)
{
	struct smux__link_memo *e;
	char *k = strdup(key);

	if (!k)
		return; /* a copy instead of a link, later */
	e = &mux->link_memo[mux->link_memo_next++ % SMUX__LINK_MEMO];
	free(e->key);
	*e = (struct smux__link_memo){
		.key = k, .src = src, .dst = dst, .file_id = info->file_id};
}

void smux__link_memo_missed(struct smux_mux *mux, const struct smux_ctx *ctx,
			    const char *from, const char *to)
{
	struct mux_view *v = smux__view_get(mux);

	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *dst = v->m[i];

		if (!smux__hints_has(mux->hints, dst->name, to) ||
		    smux__member_stale(mux, dst, from) ||
		    !(smux_backend_caps(dst->backend) & SMUX_CAP_HARDLINK))
			continue;
		/* the file's number on each replica a replay may copy from */
		for (unsigned j = 0; j < v->n; j++) {
			struct mux_member *src = v->m[j];
			struct smux_info info = {0};
			struct smux__call head = {.op = SMUX__OP_HEAD,
						  .key = from,
						  .info = &info};
			struct smux_error e;

			if (src == dst ||
			    smux__health_status(&src->health) !=
				    SMUX_STATUS_UP ||
			    smux__member_stale(mux, src, from) ||
			    smux__member_stale(mux, src, to) ||
			    smux__member_call(mux, ctx, src, &head, false,
					      &e) != 0 ||
			    !several_names(&info))
				continue;
			pthread_mutex_lock(&mux->link_lock);
			link_memo_note(mux, src, dst, &info, from);
			pthread_mutex_unlock(&mux->link_lock);
		}
	}
	smux__view_put(v);
}

/* The next name (from *@at on) on @dst remembered for @src's file @info
 * (not @key), into @out; caller holds link_lock. */
static bool link_memo_find(struct smux_mux *mux, const struct mux_member *src,
			   const struct mux_member *dst,
			   const struct smux_info *info, const char *key,
			   unsigned *at, char *out, size_t cap)
{
	for (unsigned i = *at; i < SMUX__LINK_MEMO; i++) {
		const struct smux__link_memo *e = &mux->link_memo[i];

		if (e->key && e->src == src && e->dst == dst &&
		    e->file_id == info->file_id && strcmp(e->key, key) != 0 &&
		    snprintf(out, cap, "%s", e->key) < (int)cap) {
			*at = i + 1;
			return true;
		}
	}
	return false;
}

/*
 * Whether @src's file of @key is still the one a replay read (@got: its
 * size, times, names and identity then): 0, or -1 with @err
 * (PRECONDITION_FAILED when it changed: the hint stays for the next
 * pass, which reads it again). A write through another name of a file
 * of several names supersedes no hint of @key, so the replay's check of
 * its hint misses it. An append changes the size; a same-size overwrite
 * the times, where the filesystem stamps a change after a stat with a
 * later time (Linux 6.13+ multigrain timestamps: ext4, xfs, btrfs,
 * tmpfs) - with coarse ones one within the same tick goes unseen.
 */
static int src_unchanged(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_member *src, const char *key,
			 const struct smux_info *got, struct smux_error *err)
{
	struct smux_info now = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &now};

	if (smux__member_call(mux, ctx, src, &head, false, err) != 0)
		return -1;
	if (now.size == got->size && now.mtime_ns == got->mtime_ns &&
	    now.ctime_ns == got->ctime_ns && now.nlink == got->nlink &&
	    now.file_id == got->file_id)
		return 0;
	smux_error_set(err, SMUX_E_PRECONDITION_FAILED, mux->base.name,
		       "%s changed on %s during its replay: replayed again",
		       key, src->name);
	return -1;
}

/*
 * @dst's file of @other (@di: one name, no writer) missed
 * writes made through @key, a name of the same file on @src, while @dst
 * missed the link (ln a b, then echo >> b): it gets the bytes the replay
 * read (@fd, @len; @info: mode and mtime), in place. 0, or -1 with @err.
 */
static int link_refresh(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_member *dst, const char *other,
			const struct smux_info *info, int fd, uint64_t len,
			struct smux_error *err)
{
	struct smux_put_opts po = {0};
	struct smux_source source;
	struct smux__call put = {
		.op = SMUX__OP_PUT,
		.key = other,
		.src = &source,
		.put_opts = &po,
	};

	smux_put_opts_keep(&po, info);
	po.flags |= SMUX_PUT_INPLACE;
	smux_source_fd(&source, fd, 0, len);
	return smux__member_call(mux, ctx, dst, &put, false, err) == 0 ? 0 : -1;
}

/* The mode and owner of @src's file (@info) on @dst's file @key just
 * linked to a name whose file had @di's: a chmod or chown through the new
 * name that @dst missed with the link (s43-t5: ln f g; chmod 600 g). Best
 * effort: the replay stands, a failure leaves the old mode. */
static void link_meta(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *dst, const char *key,
		      const struct smux_info *di, const struct smux_info *info)
{
	struct smux_setattr attr = {.uid = SMUX_ID_NONE, .gid = SMUX_ID_NONE};
	struct smux__call set = {
		.op = SMUX__OP_SETATTR, .key = key, .setattr = &attr};
	struct smux_error e;

	if ((di->mode & 07777) != (info->mode & 07777)) {
		attr.flags |= SMUX_SET_MODE;
		attr.mode = info->mode & 07777;
	}
	if (info->has_owner && di->has_owner &&
	    (di->uid != info->uid || di->gid != info->gid)) {
		attr.flags |= SMUX_SET_OWNER;
		attr.uid = info->uid;
		attr.gid = info->gid;
	}
	if (attr.flags)
		(void)smux__member_call(mux, ctx, dst, &set, false, &e);
}

/* @key's directory as a prefix ("a/b/" of "a/b/c", "" at the root). */
static void key_dir(const char *key, char *out, size_t cap)
{
	const char *slash = strrchr(key, '/');

	snprintf(out, cap, "%.*s", slash ? (int)(slash - key + 1) : 0, key);
}

/* The names in @prefix (a directory, no deeper) of the file @id. */
struct group_names {
	uint64_t id;
	char *names[SMUX__GROUP_MAX];
	unsigned n;
	bool over; /* more than SMUX__GROUP_MAX */
	bool oom;
};

/* Frees @g's names (every slot: those not taken are NULL). */
static void group_free(struct group_names *g)
{
	for (unsigned i = 0; i < SMUX__GROUP_MAX; i++) {
		free(g->names[i]);
		g->names[i] = NULL;
	}
	g->n = 0;
}

static int group_collect(void *arg, const struct smux_list_entry *e)
{
	struct group_names *g = arg;

	if (e->is_prefix || e->info.file_id != g->id)
		return 0;
	if (g->n == SMUX__GROUP_MAX) {
		g->over = true;
		return 1;
	}
	g->names[g->n] = strdup(e->key);
	if (!g->names[g->n]) {
		g->oom = true;
		return 1;
	}
	g->n++;
	return 0;
}

/* Lists @g's names on @m: 0, or -1 when the listing failed (@err). */
static int group_list(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *m, const char *prefix,
		      struct group_names *g, struct smux_error *err)
{
	struct smux__call list = {.op = SMUX__OP_LIST,
				  .key = prefix,
				  .key2 = "/",
				  .list_fn = group_collect,
				  .list_arg = g};
	if (smux__member_call(mux, ctx, m, &list, false, err) != 0)
		return -1;
	if (g->oom) {
		smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name, NULL);
		return -1;
	}
	return 0;
}

/* Whether @name is in the directory @prefix ("a/b/"; "" the root), not
 * below it: a listing of @prefix shows it. */
static bool in_dir(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(name, prefix, n) == 0 && !strchr(name + n, '/');
}

/* Adds @name to @g when it is @g's file on @m: 0 (also when not), or -1
 * with @err when @m failed for a while (down, timed out). An answer that
 * says what the name is there (not found, a symlink or a file in the
 * way, refused) makes it no name of @g: a stale name of the book must
 * not hold a replay up for good. */
static int group_add_if(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_member *m, const char *name,
			struct group_names *g, struct smux_error *err)
{
	struct smux_info info = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = name, .info = &info};
	char *copy;

	if (smux__member_call(mux, ctx, m, &head, false, err) != 0)
		return smux_code_class(err->e.code) == SMUX_CLASS_SEMANTIC ? 0
									   : -1;
	if (!(S_ISREG(info.mode) || S_ISLNK(info.mode)) ||
	    info.file_id != g->id)
		return 0;
	if (g->n >= SMUX__GROUP_MAX) {
		g->over = true;
		return 0;
	}
	copy = strdup(name);
	if (!copy)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	g->names[g->n++] = copy;
	return 0;
}

/*
 * The names outside @key's directory (@prefix) of @src's file (@gs) and
 * of @dst's (@gd), as the link book gives them (links made through the
 * mux: ln d/a e/b, cp -al, a local git clone), each checked on both,
 * added in the book's order: 0, or -1 with @err.
 */
static int group_book(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *src, struct mux_member *dst,
		      const char *key, const char *prefix,
		      struct group_names *gs, struct group_names *gd,
		      struct smux_error *err)
{
	char *names[SMUX__GROUP_MAX];
	unsigned n =
		smux__linkbook_group(mux->book, key, names, SMUX__GROUP_MAX);
	int rc = 0;

	for (unsigned i = 0; i < n; i++) {
		if (rc == 0 && !in_dir(names[i], prefix))
			rc = group_add_if(mux, ctx, src, names[i], gs, err);
		if (rc == 0 && !in_dir(names[i], prefix))
			rc = group_add_if(mux, ctx, dst, names[i], gd, err);
		free(names[i]);
	}
	return rc;
}

/* Whether @name, another name than @key, is one @dst's own replay sets
 * right later: @dst has a hint for it (a delete, a rename away, a link or
 * a write it missed). Its group on @dst now says nothing of @key's. */
static bool replayed_later(struct smux_mux *mux, const struct mux_member *dst,
			   const char *key, const char *name)
{
	return strcmp(name, key) != 0 &&
	       smux__hints_has(mux->hints, dst->name, name);
}

/* Whether every name of @a is in @b, but those replayed_later on @dst. */
static bool names_in(struct smux_mux *mux, const struct mux_member *dst,
		     const char *key, const struct group_names *a,
		     const struct group_names *b)
{
	for (unsigned i = 0; i < a->n; i++) {
		bool found = false;

		for (unsigned j = 0; j < b->n && !found; j++)
			found = strcmp(a->names[i], b->names[j]) == 0;
		if (!found && !replayed_later(mux, dst, key, a->names[i]))
			return false;
	}
	return true;
}

void smux__link_hints_carry(struct smux_mux *mux, const struct smux_ctx *ctx,
			    const char *key)
{
	struct group_names g = {0};
	struct smux_info info = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	struct mux_member *src = NULL;
	const char *missed[SMUX__GROUP_MAX];
	char prefix[SMUX_KEY_MAX + 1];
	char *book[SMUX__GROUP_MAX];
	enum smux__hint_kind kind;
	struct mux_view *v;
	struct smux_error e;
	unsigned nm = 0, nb;

	if (smux_key_is_dir(key) ||
	    smux__hints_pending_replicas(mux->hints) == 0)
		return;
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *m = v->m[i];

		/* hard links only where every member makes them */
		if (!(smux_backend_caps(m->backend) & SMUX_CAP_HARDLINK))
			goto out;
		if (smux__hints_kind(mux->hints, m->name, key, &kind)) {
			if (kind == SMUX__HINT_PUT && nm < SMUX__GROUP_MAX)
				missed[nm++] = m->name;
		} else if (!src &&
			   smux__health_status(&m->health) == SMUX_STATUS_UP) {
			src = m;
		}
	}
	if (nm == 0 || !src ||
	    smux__member_call(mux, ctx, src, &head, false, &e) != 0 ||
	    !several_names(&info))
		goto out;
	/* the file's other names: its directory's, the book's elsewhere */
	g.id = info.file_id;
	key_dir(key, prefix, sizeof(prefix));
	if (group_list(mux, ctx, src, prefix, &g, &e) != 0)
		goto out;
	nb = smux__linkbook_group(mux->book, key, book, SMUX__GROUP_MAX);
	for (unsigned i = 0; i < nb; i++) {
		if (!in_dir(book[i], prefix))
			(void)group_add_if(mux, ctx, src, book[i], &g, &e);
		free(book[i]);
	}
	for (unsigned i = 0; i < g.n; i++) {
		if (strcmp(g.names[i], key) == 0)
			continue;
		/* one the replica has a hint for already (a write through
		 * it, its delete) keeps that one */
		for (unsigned r = 0; r < nm; r++)
			if (!smux__hints_kind(mux->hints, missed[r], g.names[i],
					      &kind))
				(void)smux__hints_add(mux->hints, missed[r],
						      g.names[i],
						      SMUX__HINT_PUT, NULL, &e);
	}
out:
	group_free(&g);
	smux__view_put(v);
}

/* Leaves the fences same_group or names_within entered on @dst for the
 * names @held. */
static void fence_names_exit(struct smux_mux *mux, struct mux_member *dst,
			     struct group_names *held)
{
	for (unsigned i = 0; i < held->n; i++) {
		smux__replay_fence_exit(mux, dst, held->names[i]);
		free(held->names[i]);
	}
	held->n = 0;
}

/*
 * Whether every name of @dst's file @di of @other is a name of @src's
 * file (@info) there too, all of them found (@other's directory listed,
 * the book's names): 1, and @held gets those but @other, fenced on @dst
 * until fence_names_exit; 0 when not (or more than SMUX__GROUP_MAX); -1
 * with @err when a call failed. A file whose names @dst all has for
 * @src's file, and some more @src has (ln d/a d/c while @dst was out):
 * @src's bytes written into it reach only names that show them there.
 */
static int names_within(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_member *src, struct mux_member *dst,
			const char *other, const struct smux_info *info,
			const struct smux_info *di, struct group_names *held,
			struct smux_error *err)
{
	struct group_names gs = {.id = info->file_id}, gd = {.id = di->file_id};
	char prefix[SMUX_KEY_MAX + 1];
	int within;

	if (di->nlink > SMUX__GROUP_MAX)
		return 0;
	key_dir(other, prefix, sizeof(prefix));
	within = group_list(mux, ctx, src, prefix, &gs, err);
	if (within == 0)
		within = group_list(mux, ctx, dst, prefix, &gd, err);
	if (within == 0)
		within = group_book(mux, ctx, src, dst, other, prefix, &gs, &gd,
				    err);
	if (within == 0)
		within = !gs.over && !gd.over && gd.n == di->nlink;
	/* a name @dst has a hint for is left out: its replay deletes it,
	 * moves it or makes it another file there (ln f f2; rm f while @dst
	 * was out: f is still a name of the file on @dst; s48-t3) */
	if (within == 1 && !names_in(mux, dst, other, &gd, &gs))
		within = 0;
	for (unsigned i = 0; i < gd.n; i++) {
		if (within == 1 && strcmp(gd.names[i], other) != 0 &&
		    held->n < SMUX__GROUP_MAX) {
			smux__replay_fence_enter(mux, dst, gd.names[i]);
			held->names[held->n++] = gd.names[i];
			gd.names[i] = NULL;
		}
	}
	group_free(&gs);
	group_free(&gd);
	return within;
}

/*
 * Makes @key, a file of its own on @dst, a name of @other's file there (@oi:
 * @dst's; @src made it one: ln -f g f while @dst was out): @key deleted,
 * then linked. 0;
 * -1 when @key is no plain file or symlink there, or is @other's file
 * already (a group same_group could not compare: more names than
 * SMUX__GROUP_MAX, some not found; the replay puts it, as before); -2
 * with @err when a call failed - @key may then be gone from @dst: its
 * hint stays, and its next replay finds it absent.
 */
static int relink(struct smux_mux *mux, const struct smux_ctx *ctx,
		  struct mux_member *dst, const char *other,
		  const struct smux_info *oi, const char *key,
		  struct smux_error *err)
{
	struct smux_info di = {0};
	struct smux__call head = {.op = SMUX__OP_HEAD, .key = key, .info = &di};
	struct smux__call del = {.op = SMUX__OP_DEL, .key = key};
	struct smux__call link = {
		.op = SMUX__OP_LINK, .key = other, .key2 = key};

	if (smux__member_call(mux, ctx, dst, &head, false, err) != 0)
		return -2;
	if ((!S_ISREG(di.mode) && !S_ISLNK(di.mode)) ||
	    (oi->file_id && oi->file_id == di.file_id))
		return -1;
	if (smux__member_call(mux, ctx, dst, &del, false, err) != 0 ||
	    smux__member_call(mux, ctx, dst, &link, false, err) != 0)
		return -2;
	return 0;
}

/* How far link_other may take @dst's file of a name for @src's. */
enum link_trust {
	LINK_MEMO,   /* a name a replay put or a link the mux made now */
	LINK_BOOK,   /* a name of the link book: refreshed when @dst missed
			writes of it */
	LINK_LISTED, /* a name a listing of @src found: only when @dst
			missed nothing of it */
};

/*
 * link_replay's try of @other, a name of @key's file on @src (@info):
 * 0 once @key is linked to it on @dst (with @replace, over @key's own
 * file there: relink); -2 with @err when @dst failed or the refresh must
 * wait for a writer of @other; -1 when @other is not that file there
 * (the next name is tried).
 */
static int link_other(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *src, struct mux_member *dst,
		      const char *key, const char *other, enum link_trust trust,
		      bool replace, const struct smux_info *info, int fd,
		      uint64_t len, bool *probe, struct smux_error *err)
{
	struct group_names held = {0}; /* @dst's other names, fenced */
	struct smux_info si = {0}, di = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = other, .info = &si};
	struct smux__call link = {
		.op = SMUX__OP_LINK, .key = other, .key2 = key};
	struct smux_error e;
	long rc;

	if (smux__member_call(mux, ctx, src, &head, false, &e) ||
	    si.file_id != info->file_id)
		return -1;
	/* a name found by a listing of @src (LINK_LISTED), not a link the
	 * mux made: @dst's file of it is that file only when @dst missed
	 * nothing of the name (else it may be an older, unrelated file of
	 * the same size and mtime: an empty one, one tar kept the time of);
	 * one of the book (LINK_BOOK): as it is, likewise, but refreshed
	 * with @src's bytes it is (below) */
	bool missed = trust != LINK_MEMO &&
		      smux__hints_has(mux->hints, dst->name, other);

	if (trust == LINK_LISTED && missed)
		return -1;
	head.info = &di;
	rc = smux__member_call(mux, ctx, dst, &head, *probe, &e);
	*probe = false; /* the head reported @dst's probe */
	if (rc && e.e.code != SMUX_E_KEY_NOT_FOUND) {
		*err = e; /* @dst failing: no copy either */
		return -2;
	}
	if (rc || (di.mode & S_IFMT) != (info->mode & S_IFMT))
		return -1;
	/* another version there - or a name of the book @dst has a hint
	 * for (a write through it it missed too: these bytes are @src's
	 * file now) -: refreshed when @other is its only name there (no
	 * other name takes bytes it does not hold on @src; s43-t5: a group
	 * of three split) */
	bool behind = missed || di.size != info->size ||
		      di.mtime_ns != info->mtime_ns;
	/* ... or when its names there are all names of @src's file (some
	 * it missed: ln d/a d/c while it was out, then an append through
	 * d/c - a copy left d/a and e/b there without it, s48-t1) */
	bool bytes = S_ISREG(info->mode); /* a symlink's never change */
	int within = bytes && behind && info->nlink >= 2 && di.nlink > 1
			     ? names_within(mux, ctx, src, dst, other, info,
					    &di, &held, &e)
			     : 0;
	bool refresh = bytes && behind && info->nlink >= 2 &&
		       (di.nlink == 1 || within == 1);

	if (within < 0) {
		*err = e; /* @dst or @src failing: no copy either */
		return -2;
	}
	/* ... but not under an open writer of @other or of its names there
	 * (an append through it right after the undrain): the replay waits
	 * for its close, and its hint stays; a copy now split the names for
	 * good, @other on @dst without the writes through @key (s43-t5).
	 * Nor over a write through them: one from the check on waits (the
	 * fences), one since the replay's read changed @src's file
	 * (src_unchanged) */
	if (refresh) {
		smux__replay_fence_enter(mux, dst, other);
		rc = smux__replay_blocked(mux, other, err) ? -2 : 0;
		for (unsigned i = 0; i < held.n && !rc; i++)
			if (smux__replay_blocked(mux, held.names[i], err))
				rc = -2;
		if (!rc && src_unchanged(mux, ctx, src, key, info, err))
			rc = -2;
		if (!rc)
			rc = link_refresh(mux, ctx, dst, other, info, fd, len,
					  &e);
		smux__replay_fence_exit(mux, dst, other);
		fence_names_exit(mux, dst, &held);
		if (rc)
			return (int)rc;
	} else if (behind) {
		fence_names_exit(mux, dst, &held);
		return -1;
	}
	if (smux__member_call(mux, ctx, dst, &link, false, &e) != 0) {
		if (!replace || e.e.code != SMUX_E_ALREADY_EXISTS)
			return -1;
		rc = relink(mux, ctx, dst, other, &di, key, err);
		if (rc)
			return (int)rc;
	}
	link_meta(mux, ctx, dst, key, &di, info);
	return 0;
}

/*
 * Makes @key, missing on @dst (@replace: a file of another group there),
 * a link of another name of its file there:
 * a name linked through the mux or put by a replay (remembered:
 * link_memo_*), else one of the file's names in @key's directory on @src
 * (a listing: the memo is gone after a restart, and a rename of a name
 * @dst had a hint for made the new name a copy there; s43-t3) - when
 * that name is still the file on @src (@info: @src's file, read by the
 * replay into @fd, @len bytes) and @dst's holds its version (size and
 * mtime, as the replay put them), or is that file of one name that
 * missed the writes made through @key (link_refresh). Every name is
 * tried (ln a b; mv a c while @dst was out: a is gone, b is the name).
 * 0 once linked; -2 with @err when @dst failed (*@probe: the first call
 * on @dst reports its probe) or the refresh must wait for a writer of a
 * name; else -1, and the replay copies.
 */
static int link_replay(struct smux_mux *mux, const struct smux_ctx *ctx,
		       struct mux_member *src, struct mux_member *dst,
		       const char *key, bool replace,
		       const struct smux_info *info, int fd, uint64_t len,
		       bool *probe, struct smux_error *err)
{
	char other[SMUX_KEY_MAX + 1], prefix[SMUX_KEY_MAX + 1];
	struct group_names g = {.id = info->file_id};
	struct smux_error e;
	unsigned at = 0;
	int rc = -1;

	if (!(smux_backend_caps(dst->backend) & SMUX_CAP_HARDLINK))
		return -1;
	while (rc == -1 && link_memo_find(mux, src, dst, info, key, &at, other,
					  sizeof(other)))
		rc = link_other(mux, ctx, src, dst, key, other, LINK_MEMO,
				replace, info, fd, len, probe, err);
	if (rc != -1)
		return rc;
	/* names the book knows (in any directory) */
	g.n = smux__linkbook_group(mux->book, key, g.names, SMUX__GROUP_MAX);
	for (unsigned i = 0; i < g.n; i++) {
		if (rc == -1)
			rc = link_other(mux, ctx, src, dst, key, g.names[i],
					LINK_BOOK, replace, info, fd, len,
					probe, err);
		free(g.names[i]);
	}
	g.n = 0;
	if (rc != -1)
		return rc;
	key_dir(key, prefix, sizeof(prefix));
	if (group_list(mux, ctx, src, prefix, &g, &e) == 0)
		for (unsigned i = 0; i < g.n && rc == -1; i++)
			if (strcmp(g.names[i], key) != 0)
				rc = link_other(mux, ctx, src, dst, key,
						g.names[i], LINK_LISTED,
						replace, info, fd, len, probe,
						err);
	for (unsigned i = 0; i < g.n; i++)
		free(g.names[i]);
	return rc;
}

/*
 * Whether @key's file on @dst has the names its file on @src has (@info),
 * in @key's directory and the book's elsewhere, but those @dst has a hint
 * for, and no writer holds one: 1, and a replay may then write @src's
 * bytes into @dst's file, whose other names show them as @src's do; 0
 * when not (another group - ln -f g f made f a name of g's file there - is
 * replaced: its other names would take bytes they do not hold on @src; so
 * is one of more than SMUX__GROUP_MAX names or names not all found;
 * *@absent: @dst has no @key); -1 with @err when a call
 * failed or a writer holds one of the names (the replay fails and its
 * hint stays: a copy would split a group it could not check). @dst's
 * other names it compared are fenced (mux_fence.c) until
 * fence_names_exit(@held), whatever it returns, as the replay's @key is:
 * no write through one lands under the replay's bytes. *@probe: its first
 * call on @dst reports @dst's probe (then cleared).
 */
static int same_group(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *src, struct mux_member *dst,
		      const char *key, const struct smux_info *info,
		      bool *probe, bool *absent, struct group_names *held,
		      struct smux_error *err)
{
	struct group_names gs = {.id = info->file_id}, gd = {0};
	struct smux_info di = {0};
	struct smux__call head = {.op = SMUX__OP_HEAD, .key = key, .info = &di};
	char prefix[SMUX_KEY_MAX + 1];
	int same, rc;

	*absent = false;
	/* the first call on @dst reports its probe (*@probe), before any
	 * fence: a user write may wait, fenced, for that probe */
	rc = smux__member_call(mux, ctx, dst, &head, *probe, err);
	*probe = false;
	if (rc != 0) {
		*absent = err->e.code == SMUX_E_KEY_NOT_FOUND;
		return *absent ? 0 : -1;
	}
	if (info->nlink > SMUX__GROUP_MAX || di.nlink > SMUX__GROUP_MAX)
		return 0;
	if ((di.mode & S_IFMT) != (info->mode & S_IFMT) || !di.file_id)
		return 0;
	key_dir(key, prefix, sizeof(prefix));
	gd.id = di.file_id;
	same = group_list(mux, ctx, src, prefix, &gs, err);
	if (same == 0)
		same = group_list(mux, ctx, dst, prefix, &gd, err);
	/* names in other directories: the ones the book knows */
	if (same == 0 && (gs.n < info->nlink || gd.n < di.nlink))
		same = group_book(mux, ctx, src, dst, key, prefix, &gs, &gd,
				  err);
	if (same == 0)
		same = !gs.over && !gd.over && gs.n == info->nlink &&
		       gd.n == di.nlink;
	/* the same names, but those @dst has a hint for: their own replays
	 * set them right after this one (ln f f2; ln f f3; echo t > f2;
	 * rm f while @dst was out: f is still a name of @dst's file, and a
	 * file of its own put for f2 left f3 there with the old bytes and
	 * no hint; s48-t3) */
	if (same == 1)
		same = names_in(mux, dst, key, &gs, &gd) &&
		       names_in(mux, dst, key, &gd, &gs);
	/* no write through another name from here to the replay's end: a
	 * writer waits, as one of @key does */
	for (unsigned i = 0; i < gs.n && same == 1; i++) {
		if (strcmp(gs.names[i], key) != 0 &&
		    held->n < SMUX__GROUP_MAX) {
			smux__replay_fence_enter(mux, dst, gs.names[i]);
			held->names[held->n++] = gs.names[i];
			gs.names[i] = NULL;
		}
	}
	/* a writer that opened a name since the replay's check (or holds
	 * another name): the replay waits for its close - a file of its own
	 * would split @dst's names for good */
	for (unsigned i = 0; i < gd.n && same == 1; i++)
		if (smux__replay_blocked(mux, gd.names[i], err))
			same = -1;
	group_free(&gs);
	group_free(&gd);
	return same;
}

/*
 * Whether @src's failure @err on @key (a read, or a replay's delete)
 * says that @src has no such key of that type: a name under a
 * non-directory (NOT_DIRECTORY, or a
 * symlink in the way of a file backend, which never follows one: asked
 * again by the type of each ancestor), or a directory marker whose name
 * is not a directory. A directory named by a plain key (IS_DIRECTORY) is
 * not absent: replay() takes it as the directory.
 */
static bool not_there(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_member *src, const char *key,
		      const struct smux_error *err)
{
	char up[SMUX_KEY_MAX + 1];

	if (err->e.code == SMUX_E_NOT_DIRECTORY)
		return true;
	if (err->e.code != SMUX_E_PERMISSION_DENIED ||
	    snprintf(up, sizeof(up), "%s", key) >= (int)sizeof(up))
		return false;
	for (char *s = strchr(up, '/'); s; s = strchr(s + 1, '/')) {
		struct smux_info info = {0};
		struct smux__call head = {
			.op = SMUX__OP_HEAD, .key = up, .info = &info};
		struct smux_error e;

		*s = '\0';
		if (smux__member_call(mux, ctx, src, &head, false, &e) == 0 &&
		    !S_ISDIR(info.mode))
			return true;
		*s = '/';
	}
	return false;
}

/*
 * A copy of @key from @src, whose mode for it is made up (@info: a WebDAV
 * server that keeps no properties shows 0644), to @dst, which keeps modes
 * and owners: @po gets the mode and owner @dst has for it, when it has it
 * as a file or a directory. The replay of a write to a 0600 file made
 * while only @src was up stored 0644 on @dst, a private file made
 * world-readable for good (s49-t1). 0 (a key @dst lacks gets @src's); -1
 * with @err when @dst could not say (the replay fails, its hint stays).
 */
static int keep_own_meta(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_member *dst, const char *key,
			 const struct smux_info *info, struct smux_put_opts *po,
			 struct smux_error *err)
{
	struct smux_info di = {0};
	struct smux__call head = {.op = SMUX__OP_HEAD, .key = key, .info = &di};
	uint32_t type = po->mode & S_IFMT;

	if (!info->mode_default ||
	    !(smux_backend_caps(dst->backend) & SMUX_CAP_OWNER) ||
	    (type && type != S_IFREG && type != S_IFDIR))
		return 0;
	if (smux__member_call(mux, ctx, dst, &head, false, err) != 0)
		return err->e.code == SMUX_E_KEY_NOT_FOUND ? 0 : -1;
	if ((di.mode & S_IFMT) != (type ? type : S_IFREG) || !di.mode)
		return 0;
	po->mode = (po->mode & S_IFMT) | (di.mode & 07777);
	po->flags |= SMUX_PUT_MODE;
	if (di.has_owner && geteuid() == 0) {
		po->uid = di.uid;
		po->gid = di.gid;
		po->flags |= SMUX_PUT_OWNER;
	}
	return 0;
}

/*
 * Copies @key from @src to @dst through a temporary file (a directory
 * marker is looked up with head and recreated empty); @src_probe: the get
 * is @src's health probe. With @hinted, only while @dst's hint for @key is
 * pending; without (a reconcile), only while no writer holds the key.
 * Returns 0 - also when that condition went away meanwhile (a later write
 * reached @dst, and this older copy must not land on top of it) -,
 * -ENOENT when @src answered "not found", else an error; *@got tells
 * whether @src delivered the object (a later failure is then @dst's).
 * *@probe is cleared once a call reached @dst (it then reported @dst's
 * probe).
 */
static long copy_if(struct smux_mux *mux, const struct smux_ctx *ctx,
		    struct mux_member *src, bool src_probe,
		    struct mux_member *dst, const char *key, bool hinted,
		    bool *probe, bool *got, bool *put_done,
		    struct smux_error *err)
{
	struct smux_get_opts all = {.length = SMUX_LEN_ALL};
	bool marker = smux_key_is_dir(key), probe_dst = *probe;
	struct smux_info info = {0};
	struct smux_put_opts po = {0};
	struct smux_source source;
	struct smux_sink sink;
	bool linked = false;
	struct group_names held = {0}; /* @dst's names same_group fenced */
	struct smux__call get = {
		.op = marker ? SMUX__OP_HEAD : SMUX__OP_GET,
		.key = key,
		.get_opts = marker ? NULL : &all,
		.sink = marker ? NULL : &sink,
		.info = &info,
	};
	struct smux__call put = {
		.op = SMUX__OP_PUT,
		.key = key,
		.src = &source,
		.put_opts = &po,
	};
	long rc;
	int fd;

	*got = false;
	if (put_done)
		*put_done = false;
	fd = smux_tmpfile(mux->base.name, "repair", err);
	if (fd < 0) {
		if (src_probe)
			smux__health_probe_cancel(&src->health);
		return fd;
	}
	smux_sink_fd(&sink, fd, 0);
	if (hinted)
		rc = source_get(mux, ctx, src, src_probe, key, &get, err);
	else
		rc = smux__member_call(mux, ctx, src, &get, src_probe, err);
	*got = rc == 0;
	if (rc == 0 && !hinted && smux__reconcile_hook_copied)
		smux__reconcile_hook_copied(mux, key);
	/* a name of a file of several names at a time (link_replay), taken
	 * before the fence: one waiting holds no fence of its own */
	linked = *got && hinted && several_names(&info);
	if (linked)
		pthread_mutex_lock(&mux->link_lock);
	/* the check and the write: no user write of (dst, key) between */
	if (rc == 0 && hinted) {
		smux__replay_fence_enter(mux, dst, key);
		rc = smux__replay_blocked(mux, key, err);
	}
	if (rc == 0 && (hinted ? still_pending(mux, dst, key)
			       : !smux__intent_busy(mux, key))) {
		/* a replica that missed a symlink gets a symlink; one that
		 * missed a hard link gets a link of a name of the file a
		 * replay put there (link_replay), else a copy; owner, mode
		 * and mtime are kept */
		smux_put_opts_keep(&po, &info);
		if (keep_own_meta(mux, ctx, dst, key, &info, &po, err) != 0) {
			rc = err->e.sys_errno ? -err->e.sys_errno : -EIO;
			goto out_fence; /* the hint stays */
		}
		/* a reconcile repairs content: a hard-linked file keeps its
		 * names (SMUX_PUT_INPLACE; the replica is marked stale). So
		 * does a replay into a file of the same names as the
		 * source's: a new file renamed over the key split @dst's
		 * group, and its other names kept the old bytes (an append
		 * through one name while @dst was drained; s37-t1). Any
		 * other gets a file of its own */
		bool absent = false;
		int group = linked ? same_group(mux, ctx, src, dst, key, &info,
						&probe_dst, &absent, &held, err)
				   : 0;

		/* a write through another name between the replay's read
		 * and the fences is on @dst already (s46 CI: the older bytes
		 * went over an append through f right after the undrain) */
		if (group >= 0 && linked &&
		    src_unchanged(mux, ctx, src, key, &info, err) != 0)
			group = -1;
		if (group < 0) {
			rc = -err->e.sys_errno; /* the hint stays */
			if (rc == 0)
				rc = -EIO;
			goto out_fence;
		}
		if (!hinted || group == 1)
			po.flags |= SMUX_PUT_INPLACE;
		smux_source_fd(&source, fd, 0, marker ? 0 : sink.written);
		*probe = false; /* the put reports to dst's health */
		/* a name @dst lacks is linked to the file's other names
		 * there; so is one @dst holds as another file (ln -f g f
		 * while it was out: a file of its own split f from g there) */
		bool relinked = linked && !absent && group == 0;
		int linked_rc = absent || relinked
					? link_replay(mux, ctx, src, dst, key,
						      relinked, &info, fd,
						      marker ? 0 : sink.written,
						      &probe_dst, err)
					: -1;

		if (linked_rc == 0)
			goto out_fence; /* its other name has the xattrs */
		if (linked_rc == -2) {	/* @dst failed, or a writer is open:
					  the hint stays */
			rc = err->e.sys_errno ? -err->e.sys_errno : -EIO;
			goto out_fence;
		}
		rc = smux__member_call(mux, ctx, dst, &put, probe_dst, err);
		if (rc == 0 && linked)
			link_memo_note(mux, src, dst, &info, key);
		if (rc == 0 && !S_ISLNK(info.mode) && !S_ISFIFO(info.mode) &&
		    !S_ISSOCK(info.mode))
			rc = smux__meta_copy_xattrs(mux, ctx, src, dst, key,
						    err);
		if (rc == 0 && put_done)
			*put_done = true;
		/* @dst's "not found" (a WebDAV server's 404 to a put into a
		 * collection it lacks) says nothing of the key: -ENOENT is
		 * @src's answer that the key is gone, which the replay
		 * takes to delete it on @dst and end the hint (s44-t2:
		 * files missing on the replica, their hints done) */
		if (rc == -ENOENT)
			rc = -EIO;
	} else if (rc < 0 && (err->e.code == SMUX_E_KEY_NOT_FOUND ||
			      (!*got && not_there(mux, ctx, src, key, err)))) {
		rc = -ENOENT;
	}
out_fence:
	fence_names_exit(mux, dst, &held);
	if (*got && hinted)
		smux__replay_fence_exit(mux, dst, key);
	if (linked)
		pthread_mutex_unlock(&mux->link_lock);
	close(fd);
	return rc;
}

/* copy_if of a hint's replay. */
static long copy_one(struct smux_mux *mux, const struct smux_ctx *ctx,
		     struct mux_member *src, bool src_probe,
		     struct mux_member *dst, const char *key, bool *probe,
		     bool *got, struct smux_error *err)
{
	return copy_if(mux, ctx, src, src_probe, dst, key, true, probe, got,
		       NULL, err);
}

/*
 * Copies @key to @dst from the first other up member that has it. Returns
 * 0; -ENOENT when every replica asked answered "not found" (the key is
 * gone); else an error (no replica to copy from is no reason to delete).
 * *@probe as copy_one(); *@dir: a member answered that the (plain) key is
 * a directory there; *@asked (may be NULL): a member was asked and did
 * not refuse as draining.
 */
static long copy_from_peer(struct smux_mux *mux, const struct smux_ctx *ctx,
			   struct mux_view *v, struct mux_member *dst,
			   const char *key, bool *probe, bool *dir, bool *asked,
			   struct smux_error *err)
{
	bool not_found = false, failed = false;
	long rc;

	rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			    "no replica to copy %s from", key);
	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *src = v->m[i];
		bool got;

		if (src == dst ||
		    smux__health_status(&src->health) != SMUX_STATUS_UP ||
		    smux__member_stale(mux, src, key))
			continue;
		rc = copy_one(mux, ctx, src, false, dst, key, probe, &got, err);
		if (asked && (got || err->e.code != SMUX_E_BACKEND_DRAINING))
			*asked = true;
		if (got)
			return rc;
		if (rc < 0 && err->e.code == SMUX_E_IS_DIRECTORY &&
		    !smux_key_is_dir(key))
			*dir = true;
		if (rc == -ENOENT)
			not_found = true;
		else
			failed = true; /* a peer that may have it failed */
	}
	if (not_found && !failed)
		return -ENOENT;
	if (rc == -ENOENT) /* only "gone" means gone: keep the hint */
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "no replica could provide %s", key);
	return rc;
}

long smux__replay_marker(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *dst,
			 const char *key, bool *probe, struct smux_error *err)
{
	bool dir = false;
	long rc = copy_from_peer(mux, ctx, v, dst, key, probe, &dir, NULL, err);

	return rc == -ENOENT ? 0 : rc; /* on no other shard: @dst keeps it */
}

_Atomic(smux__fanout_hook_fn) smux__failover_hook_source;

/*
 * The member holding the latest version of @key for a replay to @dst (a
 * reference), NULL when none does. Looked for in the mux's current view,
 * under mutate_lock: smux_mux_remove installs a view without its member
 * before it checks that the member holds no write's only copy, and puts
 * it back when it does - in that view no member holds the write, and a
 * replay that took its hint for moot let the remove through with the
 * only copy. @dst no longer a member (the pass is older than a remove or
 * an add): -EAGAIN, the hint waits for the next pass.
 */
static int failover_holder(struct smux_mux *mux, struct mux_member *dst,
			   const char *key, struct mux_member **src)
{
	smux__fanout_hook_fn hook = atomic_load(&smux__failover_hook_source);
	struct mux_view *v;
	bool member = false;

	if (hook)
		hook(mux, key);
	pthread_mutex_lock(&mux->mutate_lock);
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n && !member; i++)
		member = v->m[i] == dst;
	*src = member ? smux__failover_source(mux, v, dst, key) : NULL;
	if (*src)
		smux__member_get(*src);
	smux__view_put(v);
	pthread_mutex_unlock(&mux->mutate_lock);
	return member ? 0 : -EAGAIN;
}

/*
 * Failover: copies @key to @dst from the member with its latest version
 * (failover_holder; a down one whose cooldown is over is probed by the
 * copy). Returns as copy_one(); 0 when every other member missed the
 * write too (the version left with a removed member - a remove is
 * refused while the member holds a write's only copy, so that write was
 * never acknowledged: nothing newer than what @dst has is left, and its
 * hint is moot).
 */
static long copy_failover(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct mux_member *dst, const char *key, bool *probe,
			  struct smux_error *err)
{
	struct mux_member *src;
	bool src_probe = false, got;
	long rc;

	if (failover_holder(mux, dst, key, &src))
		return smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				      mux->base.name,
				      "replay of %s to %s: no longer a member",
				      key, dst->name);
	if (!src)
		return 0;
	if (!smux__health_acquire(&src->health, smux__mux_now(mux), &src_probe))
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "%s, which has the latest %s, is not "
				    "available",
				    src->name, key);
	else
		rc = copy_one(mux, ctx, src, src_probe, dst, key, probe, &got,
			      err);
	smux__member_put(src);
	return rc;
}

/*
 * Shield, mirror: a missed delete is replayed as a missed put is - the
 * key's state on the replicas without a hint for it, copied, or deleted
 * when none of them has it. A member that was removed kept its hints, but
 * writes made while it was out left it none: its delete hint may be older
 * than a put of the key since, which repeating the delete would undo.
 */
static bool replicas_converge(const struct smux_mux *mux)
{
	return mux->mode == SMUX_MODE_MIRROR || mux->mode == SMUX_MODE_SHIELD;
}

/*
 * A plain key that names a directory on the replicas that have its latest
 * state (a directory's setfattr is noted by its plain key; a file or FIFO
 * replaced by a directory): @m's non-directory of that name goes, and the
 * directory is replayed as its marker (made; mode, owner, mtime and
 * extended attributes copied) under a hint of its own, done once it is.
 * Read as a file, the key failed with IS_DIRECTORY at every pass (s37-t1).
 */
static long replay_as_dir(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct mux_view *v, struct mux_member *m,
			  const char *key, bool *probe, struct smux_error *err)
{
	char marker[SMUX_KEY_MAX + 2];
	struct smux_info info = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	struct smux__call del = {.op = SMUX__OP_DEL, .key = key};
	struct smux_error e;
	bool dir = false, pending;
	uint64_t id = 0;
	long rc;

	if (snprintf(marker, sizeof(marker), "%s/", key) >= (int)sizeof(marker))
		return smux_error_set(err, SMUX_E_KEY_TOO_LONG, mux->base.name,
				      "%s/", key);
	smux__replay_fence_enter(mux, m, key);
	rc = smux__replay_blocked(mux, key, err);
	/* not pending: a later write reached @m meanwhile */
	pending = rc == 0 && still_pending(mux, m, key);
	if (pending) {
		long r = smux__member_call(mux, ctx, m, &head, *probe, &e);

		*probe = false; /* the head reported to @m's health */
		if (r == 0 && !S_ISDIR(info.mode))
			rc = smux__member_call(mux, ctx, m, &del, false, err);
		else if (r != 0 && e.e.code != SMUX_E_KEY_NOT_FOUND) {
			*err = e; /* no telling what is in the way: later */
			rc = r;
		}
	}
	smux__replay_fence_exit(mux, m, key);
	if (rc || !pending)
		return rc;
	rc = smux__hints_add(mux->hints, m->name, marker, SMUX__HINT_PUT, &id,
			     err);
	if (rc == 0)
		rc = copy_from_peer(mux, ctx, v, m, marker, probe, &dir, NULL,
				    err);
	if (rc == 0)
		(void)smux__hints_done(mux->hints, id, NULL);
	return rc;
}

/*
 * After a replay of @key on @dst (mirror, shield; a replica of real
 * directories): the directory holding @key gets the mtime it has on a
 * replica with its latest state - the put, link or delete just made
 * moved it to now on @dst, after the replay of the directory's own
 * change may have set it (s43-t1: cp -a or rsync -a while a replica was
 * drained; its directories then showed the replay's time there). Best
 * effort: a failure leaves the time, never the replay, wrong.
 */
static void parent_mtime(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_view *v, struct mux_member *dst,
			 const char *key)
{
	size_t len = strlen(key);
	char parent[SMUX_KEY_MAX + 2];
	struct smux_setattr attr = {.flags = SMUX_SET_MTIME};
	struct smux__call set = {
		.op = SMUX__OP_SETATTR, .key = parent, .setattr = &attr};
	struct smux_error e;

	if ((mux->mode != SMUX_MODE_MIRROR && mux->mode != SMUX_MODE_SHIELD) ||
	    !(smux_backend_caps(dst->backend) & SMUX_CAP_HARDLINK))
		return;
	if (len && key[len - 1] == '/') /* a marker: its directory's */
		len--;
	while (len && key[len - 1] != '/')
		len--;
	/* (also while the directory's own replay is pending: that one may
	 * set its time before this put lands in it, s43-t3) */
	if (!len || (size_t)snprintf(parent, sizeof(parent), "%.*s", (int)len,
				     key) != len)
		return; /* the root */
	for (unsigned i = 0; i < v->n; i++) {
		struct mux_member *src = v->m[i];
		struct smux_info info = {0};
		struct smux__call head = {
			.op = SMUX__OP_HEAD, .key = parent, .info = &info};

		if (src == dst ||
		    smux__health_status(&src->health) != SMUX_STATUS_UP ||
		    smux__member_stale(mux, src, parent) ||
		    smux__member_call(mux, ctx, src, &head, false, &e) != 0)
			continue;
		if (!info.has_times && !info.mtime_ns)
			return; /* a time it does not know */
		attr.mtime_ns = info.mtime_ns;
		(void)smux__member_call(mux, ctx, dst, &set, false, &e);
		return;
	}
}

/*
 * Replays one hint; 0 when the replica has the key's state again (or a
 * later write reached it meanwhile). With @probe, @m is down and this
 * replay is its health probe: the first call on @m reports the outcome;
 * when no call reaches @m the probe is given back. @dels: a missed delete
 * is done without another replica's word (struct repair_run).
 */
/* Whether @key is a file of several names on @m (a file backend): its
 * replayed delete waits for link_lock (replay()). Only those: deletes
 * of the others replay in parallel (rm -r of a tree while @m was out). */
static bool several_names_on(struct smux_mux *mux, const struct smux_ctx *ctx,
			     struct mux_member *m, const char *key)
{
	struct smux_info info = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD, .key = key, .info = &info};
	struct smux_error e;

	return (smux_backend_caps(m->backend) & SMUX_CAP_HARDLINK) &&
	       !smux_key_is_dir(key) &&
	       smux__member_call(mux, ctx, m, &head, false, &e) == 0 &&
	       several_names(&info);
}

static long replay(struct smux_mux *mux, const struct smux_ctx *ctx,
		   struct mux_view *v, struct mux_member *m,
		   const struct smux__hint *h, bool probe, bool dels,
		   struct smux_error *err)
{
	struct smux__call del = {.op = SMUX__OP_DEL, .key = h->key};
	bool left = probe, dir = false, asked = false;
	long rc = 0;

	if (strcmp(h->key, SMUX__REJOIN_KEY) == 0) { /* mux_rejoin.c */
		if (probe)
			smux__health_probe_cancel(&m->health);
		return smux__rejoin_replay(mux, ctx, v, m, err);
	}
	if (h->kind == SMUX__HINT_PUT && mux->mode == SMUX_MODE_FAILOVER)
		rc = copy_failover(mux, ctx, m, h->key, &left, err);
	else if (h->kind == SMUX__HINT_PUT || replicas_converge(mux))
		rc = copy_from_peer(mux, ctx, v, m, h->key, &left, &dir, &asked,
				    err);
	if (rc < 0 && rc != -ENOENT && dir)
		rc = replay_as_dir(mux, ctx, v, m, h->key, &left, err);
	/* no other replica to confirm a missed delete (each drained, down
	 * or behind on the key): the removal of a directory above it that
	 * waits for it takes the hint as the listing does (mux_list.c: a
	 * name only replicas with a delete hint list is not there) - the
	 * name is gone for the user. A replica that answered otherwise
	 * (holds the key, failed) is heard: the hint stays */
	else if (rc < 0 && rc != -ENOENT && dels && !asked &&
		 h->kind == SMUX__HINT_DEL)
		rc = -ENOENT;
	/* a missed delete, or a key deleted everywhere since (converge on
	 * that) - unless a later write reached the replica meanwhile */
	if ((h->kind == SMUX__HINT_DEL && !replicas_converge(mux)) ||
	    rc == -ENOENT) {
		/* not while a replay of another name of a file of several
		 * names compares the names there (same_group, names_within):
		 * its head counted this one, its listing did not, and it put
		 * a file of its own, whose other names kept old bytes (the
		 * delete and a write of ln f f2; rm f; echo t > f2 replayed
		 * at once; s49) */
		bool links = several_names_on(mux, ctx, m, h->key);

		if (links)
			pthread_mutex_lock(&mux->link_lock);
		smux__replay_fence_enter(mux, m, h->key);
		rc = smux__replay_blocked(mux, h->key, err);
		if (rc == 0 && still_pending(mux, m, h->key)) {
			rc = smux__member_call(mux, ctx, m, &del, left, err);
			left = false;
			/* under a name that is no directory there (a symlink
			 * an earlier replay put: mkdir d; ... rm -r d; ln -s
			 * t d while @m was out), the key is not there: the
			 * delete failed at every try, its hint for good */
			if (rc < 0 && not_there(mux, ctx, m, h->key, err))
				rc = 0;
			/* failover: a directory removed while this member
			 * was out, which holds names there that the listing
			 * (the standby's) never showed: what the program saw
			 * is gone, the rest stays, and so does the directory
			 * with it. Its hint ends: retried, it failed at every
			 * pass, and the directory showed but did not list
			 * (s43-t5) */
			if (rc < 0 && err->e.code == SMUX_E_NOT_EMPTY &&
			    mux->mode == SMUX_MODE_FAILOVER &&
			    smux_key_is_dir(h->key))
				rc = 0;
		}
		smux__replay_fence_exit(mux, m, h->key);
		if (links)
			pthread_mutex_unlock(&mux->link_lock);
	}
	if (left)
		smux__health_probe_cancel(&m->health);
	if (rc == 0)
		parent_mtime(mux, ctx, v, m, h->key);
	return rc;
}

/* A (replica, key) pair one repair is replaying; on that repair's stack,
 * in mux->replaying while it replays. */
struct mux_replay {
	const char *replica, *key; /* borrowed from that repair's hint list */
	struct mux_replay *next;
};

/* True when a repair is replaying (@replica, @key); caller holds
 * replay_lock. */
static bool replaying(struct smux_mux *mux, const char *replica,
		      const char *key)
{
	for (struct mux_replay *r = mux->replaying; r; r = r->next)
		if (strcmp(r->replica, replica) == 0 &&
		    strcmp(r->key, key) == 0)
			return true;
	return false;
}

/* Claims (@replica, @key) with @r (both borrowed while claimed); false
 * when another repair is replaying it. */
static bool replay_claim(struct smux_mux *mux, struct mux_replay *r,
			 const char *replica, const char *key)
{
	bool ok;

	pthread_mutex_lock(&mux->replay_lock);
	ok = !replaying(mux, replica, key);
	if (ok) {
		r->replica = replica;
		r->key = key;
		r->next = mux->replaying;
		mux->replaying = r;
	}
	pthread_mutex_unlock(&mux->replay_lock);
	return ok;
}

static void replay_release(struct smux_mux *mux, struct mux_replay *r)
{
	struct mux_replay **pp;

	pthread_mutex_lock(&mux->replay_lock);
	for (pp = &mux->replaying; *pp != r; pp = &(*pp)->next)
		;
	*pp = r->next;
	pthread_mutex_unlock(&mux->replay_lock);
}

/* Waits until no repair replays (@replica, @key); 0 or @ctx's error. */
static int replay_wait(struct smux_mux *mux, const struct smux_ctx *ctx,
		       const char *replica, const char *key,
		       struct smux_error *err)
{
	for (;;) {
		bool busy;
		int rc;

		pthread_mutex_lock(&mux->replay_lock);
		busy = replaying(mux, replica, key);
		pthread_mutex_unlock(&mux->replay_lock);
		if (!busy)
			return 0;
		rc = smux_ctx_sleep(ctx, 2 * 1000000LL, mux->base.name, err);
		if (rc)
			return rc;
	}
}

/*
 * Reconciles the replicas of @key after an interrupted in-place write
 * (@ev: fills name and failed[] with the source and the members it was
 * copied to). 0 once they agree (or the key is gone everywhere); an error
 * while a member is not up or a call failed (the intent stays pending).
 */
static long reconcile(struct smux_mux *mux, const struct smux_ctx *ctx,
		      struct mux_view *v, const char *key,
		      struct smux_event *ev, struct smux_error *err)
{
	struct smux_info *info = calloc(v->n ? v->n : 1, sizeof(*info));
	bool *have = calloc(v->n ? v->n : 1, sizeof(*have));
	bool *stale = calloc(v->n ? v->n : 1, sizeof(*stale));
	bool marker = smux_key_is_dir(key), as_dir = false;
	int src = -1;
	long rc = 0;

	if (!info || !have || !stale) {
		free(stale);
		free(info);
		free(have);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	/*
	 * From the first look to the last copy, no user write or delete of
	 * the key on any replica (mux_fence.c): one that came between the
	 * read of the newest copy and its write to another replica would be
	 * undone there - a deleted key back on one replica.
	 */
	for (unsigned i = 0; i < v->n; i++)
		smux__replay_fence_enter(mux, v->m[i], key);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		struct smux__call head = {
			.op = SMUX__OP_HEAD, .key = key, .info = &info[i]};

		if (smux__health_status(&v->m[i]->health) != SMUX_STATUS_UP) {
			rc = smux_error_set(
				err, SMUX_E_ALL_BACKENDS_DOWN, v->m[i]->name,
				"reconcile %s: replica not up", key);
			break;
		}
		rc = smux__member_call(mux, ctx, v->m[i], &head, false, err);
		have[i] = rc == 0;
		if (rc < 0 && err->e.code == SMUX_E_KEY_NOT_FOUND)
			rc = 0;
		/* a replica with a hint pending for the key missed an
		 * acknowledged write: its copy may look newest (a write
		 * stuck on it landed after the mux gave up on it) */
		stale[i] = smux__member_stale(mux, v->m[i], key);
		/* a directory's mtime is its entries', no version of it */
		if (have[i] && (src < 0 || (stale[src] && !stale[i]) ||
				(stale[src] == stale[i] && !marker &&
				 (info[i].mtime_ns > info[src].mtime_ns ||
				  (info[i].mtime_ns == info[src].mtime_ns &&
				   info[i].size > info[src].size)))))
			src = (int)i;
	}
	/* A replica without a hint holds every acknowledged write of the
	 * key: when none of them has it, its latest state is "deleted" (an
	 * rm or mv the hinted replicas missed, their hints' replay takes
	 * it there), and a hinted replica's old copy is no source. Copied
	 * back, every file rm had removed came back after a crash (s40-t3).
	 * Only when every replica is hinted does the newest of them do. */
	for (unsigned i = 0; rc == 0 && src >= 0 && stale[src] && i < v->n; i++)
		if (!stale[i])
			src = -1;
	/* shield: every acknowledged write is the origin's; a copy newer
	 * than it holds a change the origin refused, never acknowledged
	 * (s43-t4: an O_TRUNC open the origin refused truncated the copies,
	 * and their empty file was reconciled over the origin's) */
	if (rc == 0 && mux->mode == SMUX_MODE_SHIELD && v->n && !stale[0])
		src = have[0] ? 0 : -1;
	/* a plain key naming a directory (a setxattr of "d" reaches the
	 * directory so): reconciled as the directory, "d/" - a GET of it
	 * fails, and the intent would never end */
	as_dir = rc == 0 && src >= 0 && !marker && S_ISDIR(info[src].mode);
	if (rc || src < 0 || as_dir)
		goto out;
	snprintf(ev->name, sizeof(ev->name), "%s", v->m[src]->name);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		bool probe = false, got, same = marker, put = false, missed;
		bool fixed = false;
		struct mux_replay claim;
		uint64_t id = 0;

		if ((int)i == src)
			continue;
		/* the same version token is not the same bytes: compared;
		 * the same bytes may differ in mode, owner, xattrs */
		if (have[i] && !marker && info[i].size == info[src].size &&
		    strcmp(info[i].etag, info[src].etag) == 0)
			rc = smux__meta_same_bytes(mux, ctx, v->m[src], v->m[i],
						   key, info[src].size, &same,
						   err);
		/* not under a writer's feet (as copy_if): the intent stays
		 * for a later pass - ended now, the difference would stay */
		if (rc == 0 && have[i] && same)
			rc = smux__replay_blocked(mux, key, err);
		if (rc == 0 && have[i] && same)
			rc = smux__meta_fix(mux, ctx, v->m[src], v->m[i], key,
					    &info[src], &info[i], &fixed, err);
		if (rc == 0 && fixed && ev->n_failed < SMUX_EVENT_MAX_FAILED)
			snprintf(ev->failed[ev->n_failed++],
				 sizeof(ev->failed[0]), "%s", v->m[i]->name);
		if (rc || (have[i] && same))
			continue;
		/* stale while its copy is partial (an in-place copy of a
		 * hard-linked file is no atomic replace): a crash meanwhile
		 * never takes it as the source. A hint it had for the key
		 * already (an acknowledged write it missed) stays as it is,
		 * for the repair's replay; ours is done only once the copy
		 * was made (a writer that opened the key meanwhile skips it) */
		/* and the pair is claimed, as a replay claims it: another
		 * repair's replay of that hint meanwhile (the background
		 * thread's) made a new file of its copy, and a hard link was
		 * split (test_stale_hint_not_replayed_meanwhile); one that
		 * replays a hint the replica had is waited for */
		while (!replay_claim(mux, &claim, v->m[i]->name, key) &&
		       (rc = replay_wait(mux, ctx, v->m[i]->name, key, err)) ==
			       0)
			;
		if (rc)
			break;
		missed = smux__hints_has(mux->hints, v->m[i]->name, key);
		if (!missed)
			rc = smux__hints_add(mux->hints, v->m[i]->name, key,
					     SMUX__HINT_PUT, &id, err);
		if (rc == 0)
			rc = copy_if(mux, ctx, v->m[src], false, v->m[i], key,
				     false, &probe, &got, &put, err);
		if (rc == 0 && put && !missed)
			(void)smux__hints_done(mux->hints, id, NULL);
		replay_release(mux, &claim);
		if (rc == 0 && ev->n_failed < SMUX_EVENT_MAX_FAILED)
			snprintf(ev->failed[ev->n_failed++],
				 sizeof(ev->failed[0]), "%s", v->m[i]->name);
	}
out:
	for (unsigned i = 0; i < v->n; i++)
		smux__replay_fence_exit(mux, v->m[i], key);
	free(info);
	free(have);
	free(stale);
	if (as_dir) {
		size_t n = strlen(key);
		char *dkey = malloc(n + 2);

		if (!dkey)
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      mux->base.name, NULL);
		snprintf(dkey, n + 2, "%s/", key);
		rc = reconcile(mux, ctx, v, dkey, ev, err);
		free(dkey);
	}
	return rc;
}

void (*smux__reconcile_hook_copied)(struct smux_mux *mux, const char *key);

/*
 * smux__health_acquire for a replay on @m. A down member whose cooldown is
 * over may be being probed right now (by the background thread): with
 * @wait, the repair waits for that probe to end (@ctx may end the wait)
 * and looks again, instead of leaving the hint pending.
 */
static bool replica_acquire(struct smux_mux *mux, const struct smux_ctx *ctx,
			    struct mux_member *m, bool wait, bool *probe)
{
	for (;;) {
		int64_t now = smux__mux_now(mux);
		bool probing;

		if (smux__health_acquire(&m->health, now, probe))
			return true;
		pthread_mutex_lock(&m->health.lock);
		probing = m->health.status == SMUX_STATUS_DOWN &&
			  m->health.probing;
		pthread_mutex_unlock(&m->health.lock);
		if (!wait || !probing ||
		    smux_ctx_sleep(ctx, 2 * 1000000LL, mux->base.name, NULL))
			return false;
	}
}

/* How many hints one repair replays at once (each through its member's
 * bulkhead; one replay per (replica, key) all the same). */
#define REPAIR_PARALLEL 8

/* One repair pass: its hints, shared by its workers. */
struct repair_run {
	struct smux_mux *mux;
	const struct smux_ctx *ctx;
	struct mux_view *v;
	struct smux__hint *list;
	bool wait;
	/* a directory's removal waits (smux__catch_up_under): a replica's
	 * missed delete is done also when no other replica can confirm it */
	bool dels;
	const int *todo; /* indices into list */
	int ntodo;
	bool *refused; /* [i]: the replica was not up (no probe left) */
	atomic_int next;
	atomic_uint done;
	atomic_bool stop;
	pthread_mutex_t err_lock;
	int rc; /* under err_lock: the first failure, then stop */
	struct smux_error err;
};

/* Write intent @h, as a repair sees it: reconciled once its writer is
 * gone. 0, or @ctx's error while it waited for another repair. */
/*
 * Claims the replay of @h for this repair. When another repair is at it,
 * the background thread leaves it (it comes back later); a caller waits
 * for that replay, then claims what is left (it may have started before
 * the latest write). 1: claimed; 0: nothing to do; or the wait's error.
 */
static int claim_or_wait(struct smux_mux *mux, struct repair_run *run,
			 const struct smux__hint *h, struct mux_replay *claim,
			 struct smux_error *err)
{
	int rc;

	if (replay_claim(mux, claim, h->replica, h->key))
		return 1;
	if (!run->wait)
		return 0;
	rc = replay_wait(mux, run->ctx, h->replica, h->key, err);
	if (rc)
		return rc;
	return smux__hints_has(mux->hints, h->replica, h->key) &&
	       replay_claim(mux, claim, h->replica, h->key);
}

static int repair_intent(struct repair_run *run, const struct smux__hint *h,
			 struct smux_error *err)
{
	struct smux_mux *mux = run->mux;
	struct smux_event ev = {.topic = SMUX_EV_RECONCILED};
	enum smux__intent_state st;
	struct mux_replay claim;
	struct smux_error e = {0};
	int rc;

	/* another repair at it: as for a hint, a caller waits for it and
	 * then looks again */
	rc = claim_or_wait(mux, run, h, &claim, err);
	if (rc <= 0)
		return rc;
	/* a writer still at it, or a clean one lingering */
	st = smux__intent_state(mux, h->key, h->id);
	if (st == SMUX__INTENT_BUSY) {
		replay_release(mux, &claim);
		return 0;
	}
	if (st == SMUX__INTENT_CLEAN) {
		smux__hints_done_lazy(mux->hints, h->id, NULL);
		smux__intent_forget(mux, h->key, h->id);
		replay_release(mux, &claim);
		return 0;
	}
	snprintf(ev.key, sizeof(ev.key), "%s", h->key);
	if (reconcile(mux, run->ctx, run->v, h->key, &ev, &e) == 0) {
		if (smux__hints_done(mux->hints, h->id, NULL) == 0)
			atomic_fetch_add(&run->done, 1);
		smux__intent_forget(mux, h->key, h->id);
	} else {
		ev.has_cause = true;
		ev.cause = e.e;
	}
	/* always: the key was being written when its writer died, and
	 * operators want to know which it was. Before the claim goes: a
	 * repair that waited for it (claim_or_wait) finds the event emitted
	 * when it returns (test_uncommitted_reconciled under ASan in CI: the
	 * background thread reconciled, the test's repair returned, and the
	 * event was not there yet) */
	emit(mux, &ev);
	replay_release(mux, &claim);
	return 0;
}

/* The active health check of @m, counted as any call (a failure of it,
 * whatever its class, is transient: HEALTHCHECK_FAILED). */
static void health_check(struct smux_mux *mux, const struct smux_ctx *ctx,
			 struct mux_member *m)
{
	struct smux__call call = {.op = SMUX__OP_HEALTHCHECK};
	struct smux_error e;
	int64_t t0 = smux_now_ns();
	long rc;

	if (!smux__member_enter(m))
		return; /* draining: out of service */
	call.backend = m->backend;
	rc = smux__bulkhead_run(m->bh, ctx, mux->timeout_ms, &call, &e);
	atomic_fetch_sub(&m->health.in_flight, 1);
	if (rc < 0 && smux_classify(&e.e) != SMUX_OUTCOME_ABORT)
		smux_error_wrap(&e, SMUX_E_HEALTHCHECK_FAILED, m->name,
				"health check failed");
	smux__attempt_done(mux, ctx, m, false, t0, rc < 0 ? &e : NULL, NULL);
}

/* The members of @mux whose transient failures this thread's replay
 * left to judge (smux__replay_judges); a replay runs on one thread. A
 * member beyond the few kept here, or one of a mux below (its own calls
 * inside the replay's), counts its failure as any call does. */
#define JUDGE_MAX 4
static __thread struct {
	struct smux_mux *mux; /* replaying now; NULL: none */
	unsigned n;
	struct mux_member *m[JUDGE_MAX];
} judged;

bool smux__replay_judges(struct smux_mux *mux, struct mux_member *m)
{
	if (judged.mux != mux)
		return false;
	for (unsigned i = 0; i < judged.n; i++)
		if (judged.m[i] == m)
			return true;
	if (judged.n == JUDGE_MAX)
		return false;
	judged.m[judged.n++] = m;
	return true;
}

/* After a replay: a health check of each member whose call failed in it
 * (counted as any call: a member that fails it goes down; one that
 * answers refused the key alone, and stays up). Returns how many. */
static unsigned replay_judge(struct smux_mux *mux, const struct smux_ctx *ctx)
{
	unsigned n = judged.n;
	struct mux_member *m[JUDGE_MAX];

	for (unsigned i = 0; i < n; i++)
		m[i] = judged.m[i];
	judged.mux = NULL;
	judged.n = 0;
	for (unsigned i = 0; i < n; i++) {
		if (smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
			break; /* stopping */
		health_check(mux, ctx, m[i]);
	}
	return n;
}

/* The member of @v that @h is for, or NULL (no longer a member). */
static struct mux_member *hint_member(const struct mux_view *v,
				      const struct smux__hint *h)
{
	for (unsigned j = 0; j < v->n; j++)
		if (strcmp(v->m[j]->name, h->replica) == 0)
			return v->m[j];
	return NULL;
}

/* Replays list[@i] of @run. 0, or @ctx's error. */
static int repair_one(struct repair_run *run, int i, struct smux_error *err)
{
	struct smux_mux *mux = run->mux;
	const struct smux__hint *h = &run->list[i];
	struct smux_event ev = {.topic = SMUX_EV_HINT_REPLAYED};
	struct mux_member *m;
	struct smux_error e = {0};
	struct mux_replay claim;
	bool probe = false;
	int rc;

	rc = smux_ctx_check(run->ctx, mux->base.name, err);
	if (rc)
		return rc;
	/* a change that waits may yet undo what a replay would build on
	 * (mux_change.c): after it */
	if (smux__change_waits(mux, h->key))
		return 0;
	if (h->kind == SMUX__HINT_INTENT)
		return repair_intent(run, h, err);
	m = hint_member(run->v, h);
	/* no longer a member: its hints are kept, so that the same name
	 * added back is repaired before it serves those keys (they are
	 * replayed once it is a member again) */
	if (!m)
		return 0;
	rc = claim_or_wait(mux, run, h, &claim, err);
	if (rc <= 0)
		return rc;
	/* a call given up on may still land there: after it, the next pass
	 * (its end keeps or records the hint: mux_zombie.c) */
	if (smux__member_zombie(mux, m, h->key)) {
		replay_release(mux, &claim);
		return 0;
	}
	/* sticky-by-key: a writer open in place on the key holds it until
	 * its close, which kicks the repair (smux__sticky_replay checks it
	 * again under the key's gate); passed over quietly, not failed at
	 * every pass while a log stays open */
	if (mux->mode == SMUX_MODE_STICKY && smux__intent_busy(mux, h->key)) {
		replay_release(mux, &claim);
		return 0;
	}
	/* an up replica, or a down one whose cooldown is over (the replay
	 * probes it: a recovered replica needs no traffic of its own to be
	 * repaired) */
	if (!replica_acquire(mux, run->ctx, m, run->wait, &probe)) {
		run->refused[i] = true;
		replay_release(mux, &claim);
		return 0;
	}
	/* a hint that failed before may fail for its key alone: the
	 * background repair leaves the probe of a down replica to a hint
	 * that has not, or to the health check */
	if (probe && h->failures && !run->wait) {
		smux__health_probe_cancel(&m->health);
		run->refused[i] = true;
		replay_release(mux, &claim);
		return 0;
	}
	snprintf(ev.name, sizeof(ev.name), "%s", m->name);
	snprintf(ev.key, sizeof(ev.key), "%s", h->key);
	judged.mux = mux;
	if ((mux->mode == SMUX_MODE_STICKY
		     ? smux__sticky_replay(mux, run->ctx, run->v, m, h, probe,
					   &e)
		     : replay(mux, run->ctx, run->v, m, h, probe, run->dels,
			      &e)) == 0) {
		replay_judge(mux, run->ctx); /* a peer that failed it */
		if (smux__hints_done(mux->hints, h->id, NULL) == 0) {
			atomic_fetch_add(&run->done, 1);
			/* a rejoin hint: the member's resync is over */
			if (strcmp(h->key, SMUX__REJOIN_KEY) == 0)
				smux__rejoin_over(mux, m);
		}
	} else {
		/* a member's refusal waits longer at each try; a replay that
		 * had to wait (a writer open on the key, no replica to copy
		 * from, a key not moved home yet: the mux's own errors, no
		 * member call failed; a replica draining, the hint's or the
		 * source) is tried again at the next pass */
		if (replay_judge(mux, run->ctx) ||
		    (strcmp(e.e.backend, mux->base.name) != 0 &&
		     e.e.code != SMUX_E_BACKEND_DRAINING))
			smux__hints_failed(mux->hints, h->id,
					   smux__mux_now(mux),
					   atomic_load(&m->recoveries));
		ev.has_cause = true;
		ev.cause = e.e;
	}
	emit(mux, &ev); /* before the claim goes, as repair_intent */
	replay_release(mux, &claim); /* once the hint is done */
	return 0;
}

/* a repair's replays run on this thread (repair_pass: the caller's and
 * its workers): a drain from within one (a hook, a remove) must not
 * wait for the replays it claimed itself (smux__mux_repair_up) */
static __thread unsigned repairing;

static void *repair_worker(void *arg)
{
	struct repair_run *run = arg;
	struct smux_error e;
	int k;

	repairing++;
	while (!atomic_load(&run->stop) &&
	       (k = atomic_fetch_add(&run->next, 1)) < run->ntodo) {
		int rc = repair_one(run, run->todo[k], &e);

		if (rc) {
			pthread_mutex_lock(&run->err_lock);
			if (!run->rc) {
				run->rc = rc;
				run->err = e;
			}
			pthread_mutex_unlock(&run->err_lock);
			atomic_store(&run->stop, true);
		}
	}
	repairing--;
	return NULL;
}

/* Runs the @run->ntodo hints of @run on up to REPAIR_PARALLEL threads
 * (the caller's one of them). */
static void repair_pass(struct repair_run *run)
{
	pthread_t th[REPAIR_PARALLEL - 1];
	unsigned nth = 0;

	atomic_store(&run->next, 0);
	while (nth + 1 < REPAIR_PARALLEL && (int)nth + 1 < run->ntodo &&
	       pthread_create(&th[nth], NULL, repair_worker, run) == 0)
		nth++;
	repair_worker(run);
	for (unsigned t = 0; t < nth; t++)
		pthread_join(th[t], NULL);
}

/* Whether the background repair replays @h now: never failed, its wait
 * over, or its replica came back up since its last failure. */
static bool hint_due(struct smux_mux *mux, const struct mux_view *v,
		     const struct smux__hint *h)
{
	struct mux_member *m;

	if (!h->failures || h->retry_at_ms <= smux__mux_now(mux))
		return true;
	m = hint_member(v, h);
	return m && atomic_load(&m->recoveries) != h->fail_gen;
}

/* Whether @h's replica is up now (in @v). */
static bool hint_replica_up(const struct mux_view *v,
			    const struct smux__hint *h)
{
	struct mux_member *m = hint_member(v, h);

	return m && smux__health_status(&m->health) == SMUX_STATUS_UP;
}

/* How a repair of up replicas picks its hints (@how of hint_todo and
 * repair_hints): also those waiting after a failed try (REPAIR_FORCE);
 * the delete hints under the directory @key (REPAIR_UNDER, with FORCE:
 * smux__catch_up_under). */
#define REPAIR_FORCE 1u
#define REPAIR_UNDER 2u

/* Whether a repair replays @h: every due hint, all of them when asked
 * (@wait); with @up_only only due hints (@how) whose replica is up, of
 * @key (when not NULL), not of replica @skip (when not NULL). */
static bool hint_todo(struct smux_mux *mux, const struct mux_view *v,
		      const struct smux__hint *h, bool wait, bool up_only,
		      const char *key, unsigned how, const char *skip)
{
	bool under = how & REPAIR_UNDER;

	if (!up_only)
		return wait || hint_due(mux, v, h);
	/* REPAIR_UNDER: the missed deletes under the directory @key, which
	 * a removal waits for */
	if (key && (under ? h->kind != SMUX__HINT_DEL ||
				    strncmp(h->key, key, strlen(key)) != 0
			  : strcmp(h->key, key) != 0))
		return false;
	return (!skip || strcmp(h->replica, skip) != 0) &&
	       hint_replica_up(v, h) &&
	       ((how & REPAIR_FORCE) || hint_due(mux, v, h));
}

/* smux__mux_repair; with @up_only only the due hints (@how: REPAIR_*)
 * whose replica is up (and not @skip, when not NULL), with @key (not
 * NULL) only that key's of those (REPAIR_UNDER: the delete hints under
 * it), and no recovery of a dead daemon's changes. */
static int repair_hints(struct smux_mux *mux, const struct smux_ctx *ctx,
			bool wait, bool up_only, const char *key, unsigned how,
			const char *skip, unsigned *replayed, unsigned *pending,
			struct smux_error *err)
{
	struct repair_run run = {.mux = mux,
				 .ctx = ctx,
				 .wait = wait,
				 .dels = (how & REPAIR_UNDER) != 0};
	int *todo = NULL;
	int n, rc = 0;

	if (replayed)
		*replayed = 0;
	/* a dead daemon's renames, deletes and links first (those that
	 * waited at open): completing one may hint a replica */
	rc = key ? 0 : smux__changes_recover(mux, ctx, err);
	if (rc)
		return rc;
	/* one key's (a catch-up before an open): its hints only, not a
	 * copy of a backlog of thousands at every open of the file */
	n = key && !(how & REPAIR_UNDER)
		    ? smux__hints_list_key(mux->hints, key, &run.list)
		    : smux__hints_list(mux->hints, NULL, &run.list);
	if (n < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	todo = calloc(n ? (size_t)n : 1, sizeof(*todo));
	run.refused = calloc(n ? (size_t)n : 1, sizeof(*run.refused));
	if (!todo || !run.refused) {
		free(todo);
		free(run.refused);
		smux__hints_free_list(run.list, n);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	pthread_mutex_init(&run.err_lock, NULL);
	run.v = smux__view_get(mux);
	/* the background repair leaves a hint whose replay failed until its
	 * wait is over (smux__hints_failed) or its replica came back since;
	 * a repair asked for tries all */
	run.ntodo = 0;
	for (int i = 0; i < n; i++)
		if (hint_todo(mux, run.v, &run.list[i], wait, up_only, key, how,
			      skip))
			todo[run.ntodo++] = i;
	run.todo = todo;
	repair_pass(&run);
	/* hints refused while their replica's probe (another of this pass)
	 * was under way: again, now that it is over, if it came back */
	if (!run.rc) {
		int again = 0;

		for (int i = 0; i < n; i++) {
			struct mux_member *m = hint_member(run.v, &run.list[i]);

			if (run.refused[i] && m &&
			    smux__health_status(&m->health) == SMUX_STATUS_UP)
				todo[again++] = i;
		}
		run.ntodo = again;
		if (again)
			repair_pass(&run);
	}
	rc = run.rc;
	if (rc && err)
		*err = run.err;
	smux__view_put(run.v);
	pthread_mutex_destroy(&run.err_lock);
	smux__hints_free_list(run.list, n);
	free(todo);
	free(run.refused);
	if (replayed)
		*replayed = atomic_load(&run.done);
	/* a change not completed yet counts as a pending hint would */
	if (pending)
		*pending = smux__hints_pending_replicas(mux->hints) +
			   atomic_load(&mux->nchanges_left);
	return rc;
}

int smux__mux_repair(struct smux_mux *mux, const struct smux_ctx *ctx,
		     bool wait, unsigned *replayed, unsigned *pending,
		     struct smux_error *err)
{
	return repair_hints(mux, ctx, wait, false, NULL, 0, NULL, replayed,
			    pending, err);
}

/*
 * Before an in-place writer of @key opens on the replicas, or a change
 * that builds on its object (setattr, xattrs, rename, copy, link) fans
 * out: a replica that is up but behind on the key (its hint pending: it
 * was drained or down when the key changed) gets the key's due replay
 * now, waiting for one under way, unless a writer holds the key (the
 * replay then waits for its close, as ever). Without it:
 *  - a writer left that replica out, and a program that reopens the file
 *    all the time (`echo >> log` in a loop) never gave the repair a
 *    moment without a writer; at a rolling drain's next step (drain b)
 *    every append failed (s44-t1);
 *  - a shield's chmod right after the origin's undrain failed (EIO)
 *    while the origin's replay of the file was still to come (s44-t4).
 * Best effort: a replay that fails leaves the replica out as before, and
 * its hint waits as ever before it is tried again (a full replica is not
 * copied to at every open).
 */
void smux__catch_up(struct smux_mux *mux, const struct smux_ctx *ctx,
		    const char *key)
{
	struct mux_view *v;
	struct smux_error e;
	bool behind = false;

	/* not below another mux: its call's deadline would cut the copy,
	 * and the next open would start it again */
	if (ctx->depth > 1 || smux__hints_pending_replicas(mux->hints) == 0)
		return;
	/* the cheap look first: one index lookup per member */
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n && !behind; i++)
		behind = smux__health_status(&v->m[i]->health) ==
				 SMUX_STATUS_UP &&
			 smux__hints_has(mux->hints, v->m[i]->name, key);
	smux__view_put(v);
	if (behind && !smux__intent_busy(mux, key))
		(void)repair_hints(mux, ctx, true, true, key, 0, NULL, NULL,
				   NULL, &e);
}

bool smux__catch_up_under(struct smux_mux *mux, const struct smux_ctx *ctx,
			  const char *prefix)
{
	unsigned replayed = 0, total = 0;
	struct smux_error e;

	/* @ctx is the caller's own: not below another mux (its call's
	 * deadline would cut the replays) */
	if (ctx->depth > 0 || !replicas_converge(mux) ||
	    smux__hints_pending_replicas(mux->hints) == 0)
		return false;
	/* a directory's delete fails until those of its names are in (they
	 * run in parallel): one round per level, while one replays
	 * something */
	for (int round = 0; round < SMUX__CATCH_UP_ROUNDS; round++) {
		int rc = repair_hints(mux, ctx, true, true, prefix,
				      REPAIR_UNDER | REPAIR_FORCE, NULL,
				      &replayed, NULL, &e);

		total += replayed;
		if (rc != 0 || replayed == 0)
			break;
	}
	return total > 0;
}

int smux__mux_repair_up(struct smux_mux *mux, const struct smux_ctx *ctx,
			const char *skip, struct smux_error *err)
{
	/* a replay another repair runs is waited for: the background
	 * thread kicked by an undrain may be copying from the member about
	 * to drain, and an undrain followed at once by the other's drain
	 * left that replay refused (BACKEND_DRAINING) and the file
	 * unreadable until the undrain (s46-t1). Not from within a repair
	 * (a hook, a remove): it would wait for its own claims */
	return repair_hints(mux, ctx, repairing == 0, true, NULL, REPAIR_FORCE,
			    skip, NULL, NULL, err);
}

/* The active health checks of every member in service, under @ctx. */
static void check_health(struct smux_mux *mux, const struct smux_ctx *ctx)
{
	struct mux_view *v;

	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n; i++) {
		health_check(mux, ctx, v->m[i]);
		if (smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
			break; /* stopping */
	}
	smux__view_put(v);
}

void smux_mux_check_health(struct smux_backend *b)
{
	struct smux_mux *mux = smux__mux_of(b);
	struct smux_ctx ctx;

	if (!mux)
		return;
	smux_ctx_init(&ctx);
	check_health(mux, &ctx);
}

/*
 * Probes, with its health check, every down member whose cooldown is
 * over (the background thread's job: round-robin, weighted and sticky
 * requests never probe). Returns the members probed.
 */
static unsigned probe_due(struct smux_mux *mux, const struct smux_ctx *ctx)
{
	struct mux_sel *s = smux__sel_get(mux);
	int64_t now = smux__mux_now(mux);
	unsigned probed = 0;

	for (unsigned i = 0; i < s->view->n && now >= s->next_probe_ms; i++) {
		struct mux_member *m = s->view->m[i];
		struct smux__call call = {.op = SMUX__OP_HEALTHCHECK};
		struct smux_error e;
		bool probe = false;

		if (smux_ctx_state(ctx) != SMUX_CANCEL_NONE)
			break; /* stopping */
		if (smux__health_status(&m->health) != SMUX_STATUS_DOWN ||
		    !smux__health_acquire(&m->health, now, &probe))
			continue;
		if (!probe) /* came back up meanwhile */
			continue;
		smux__member_call(mux, ctx, m, &call, true, &e);
		probed++;
	}
	smux__sel_put(s);
	return probed;
}

void smux__mux_kick(struct smux_mux *mux)
{
	pthread_mutex_lock(&mux->bg_lock);
	mux->bg_kick = true;
	pthread_cond_broadcast(&mux->bg_cond);
	pthread_mutex_unlock(&mux->bg_lock);
}

/* How soon the background thread looks again at a probe it could not
 * make (another thread is probing that member). */
#define BG_OVERDUE_MS 20

/* How long the background thread sleeps between rounds. */
static int64_t bg_period_ms(struct smux_mux *mux)
{
	int64_t p = 60000;

	struct mux_sel *s;

	if (mux->healthcheck_interval_ms > 0 &&
	    mux->healthcheck_interval_ms < p)
		p = mux->healthcheck_interval_ms;
	/*
	 * Wake when the first down member's cooldown ends (its probe). A
	 * cooldown already over here means the round could not probe it
	 * (a request of failover or shield is probing it): look again a
	 * little later rather than spin.
	 */
	s = smux__sel_get(mux);
	if (s->next_probe_ms != INT64_MAX) {
		int64_t left = s->next_probe_ms - smux__mux_now(mux);

		if (left < p)
			p = left > 0 ? left : BG_OVERDUE_MS;
	}
	smux__sel_put(s);
	/* retry pending hints now and then even without a recovery */
	if ((smux__hints_pending(mux->hints, NULL) ||
	     atomic_load(&mux->nchanges_left)) &&
	    p > 1000)
		p = 1000;
	return p;
}

/* smux_mux_hold_repairs */
static atomic_bool repairs_held;

void smux_mux_hold_repairs(bool hold)
{
	atomic_store(&repairs_held, hold);
}

static void *bg_main(void *arg)
{
	struct smux_mux *mux = arg;
	int64_t next_check = smux_now_ns();
	struct smux_ctx ctx;

	/* every call of this thread can be cancelled by a stop */
	smux_ctx_init(&ctx);
	ctx.cancel[0] = &mux->bg_cancel;
	pthread_mutex_lock(&mux->bg_lock);
	while (!mux->bg_stop) {
		int64_t now = smux_now_ns(), until;
		struct timespec ts;

		mux->bg_kick = false;
		pthread_mutex_unlock(&mux->bg_lock);
		if (mux->healthcheck_interval_ms > 0 && now >= next_check) {
			check_health(mux, &ctx);
			next_check =
				now + mux->healthcheck_interval_ms * 1000000LL;
		}
		/* down members due a probe: here, never on a user request */
		probe_due(mux, &ctx);
		if (!atomic_load(&repairs_held) &&
		    (smux__hints_pending(mux->hints, NULL) ||
		     atomic_load(&mux->nchanges_left)))
			smux__mux_repair(mux, &ctx, false, NULL, NULL, NULL);
		until = smux_now_ns() + bg_period_ms(mux) * 1000000LL;
		ts.tv_sec = until / 1000000000LL;
		ts.tv_nsec = until % 1000000000LL;
		pthread_mutex_lock(&mux->bg_lock);
		while (!mux->bg_stop && !mux->bg_kick &&
		       pthread_cond_timedwait(&mux->bg_cond, &mux->bg_lock,
					      &ts) == 0)
			;
	}
	pthread_mutex_unlock(&mux->bg_lock);
	return NULL;
}

atomic_bool smux__mux_bg_held;

int smux__mux_bg_start(struct smux_mux *mux)
{
	if (atomic_load(&smux__mux_bg_held))
		return 0; /* bg_running stays false: a stop is a no-op */
	smux_cancel_init(&mux->bg_cancel);
	if (pthread_create(&mux->bg_thread, NULL, bg_main, mux) != 0) {
		smux_cancel_release(&mux->bg_cancel);
		return -EAGAIN;
	}
	mux->bg_running = true;
	return 0;
}

/*
 * Bounded: the stop fires the thread's token, so a member call it is
 * waiting for is abandoned at once (the bulkhead polls the token; a member
 * hung in a system call finishes on its own worker, result dropped) and a
 * replay pass ends at the next hint.
 */
void smux__mux_bg_stop(struct smux_mux *mux)
{
	if (!mux->bg_running)
		return;
	pthread_mutex_lock(&mux->bg_lock);
	mux->bg_stop = true;
	pthread_cond_broadcast(&mux->bg_cond);
	pthread_mutex_unlock(&mux->bg_lock);
	smux_cancel_fire(&mux->bg_cancel, SMUX_CANCEL_ABORT);
	pthread_join(mux->bg_thread, NULL);
	smux_cancel_release(&mux->bg_cancel);
	mux->bg_running = false;
}
