/* SPDX-License-Identifier: MIT */
/*
 * mux_list.c - the listings that are more than one member's listing
 * passed through: the de-duplicated union of sticky-by-key and mirror
 * (every up member listed in parallel, k-way merged), and failover's
 * listing while hints are pending (the answering member's listing
 * corrected by the hints it has not replayed yet).
 *
 * Both hold the listings they merge in memory (keys and infos); a plain
 * failover listing without pending hints streams, as a single member's
 * listing does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mux_internal.h"

#define LIST_MAX 64

void (*smux__list_hook_listed)(struct smux_mux *mux);
void (*smux__list_hook_snapped)(struct smux_mux *mux);

struct entry {
	char *key;
	bool is_prefix;
	struct smux_info info;
};

struct entries {
	struct entry *e;
	size_t n, cap;
	bool oom;
};

/* Appends @len bytes of @key; false (and es->oom) when out of memory. */
static bool entries_add(struct entries *es, const char *key, size_t len,
			bool is_prefix, const struct smux_info *info)
{
	if (es->n == es->cap) {
		size_t cap = es->cap ? es->cap * 2 : 64;
		struct entry *p = realloc(es->e, cap * sizeof(*p));

		if (!p) {
			es->oom = true;
			return false;
		}
		es->e = p;
		es->cap = cap;
	}
	es->e[es->n].key = strndup(key, len);
	if (!es->e[es->n].key) {
		es->oom = true;
		return false;
	}
	es->e[es->n].is_prefix = is_prefix;
	if (info)
		es->e[es->n].info = *info;
	else
		memset(&es->e[es->n].info, 0, sizeof(es->e[es->n].info));
	es->n++;
	return true;
}

static int collect(void *arg, const struct smux_list_entry *le)
{
	return !entries_add(arg, le->key, strlen(le->key), le->is_prefix,
			    &le->info);
}

static void entries_free(struct entries *es)
{
	for (size_t i = 0; i < es->n; i++)
		free(es->e[i].key);
	free(es->e);
	memset(es, 0, sizeof(*es));
}

/*
 * The hints pending when a listing started, sorted by key then replica.
 * A member that listed a key before a replay brought it up to date listed
 * the old state (a copy deleted since, an old size), though the replay may
 * be done - its hint gone - by the time the listings are merged: the
 * merge asks this snapshot as well as the hints of now.
 */
struct hint_snap {
	struct smux__hint *h;
	int n;
};

static int cmp_hint(const void *a, const void *b)
{
	const struct smux__hint *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : strcmp(x->replica, y->replica);
}

/* 0, or -1 when out of memory. */
static int snap_take(struct smux_mux *mux, struct hint_snap *s)
{
	s->h = NULL;
	s->n = 0;
	if (smux__hints_pending_replicas(mux->hints) == 0)
		return 0;
	s->n = smux__hints_list(mux->hints, NULL, &s->h);
	if (s->n < 0) {
		s->n = 0;
		return -1;
	}
	/* the last hint may be done since the count was read: none listed,
	 * and no array to sort (qsort's first argument must not be NULL) */
	if (s->n > 1)
		qsort(s->h, (size_t)s->n, sizeof(*s->h), cmp_hint);
	return 0;
}

static const struct smux__hint *snap_find(const struct hint_snap *s,
					  const char *replica, const char *key)
{
	struct smux__hint probe = {.replica = (char *)replica,
				   .key = (char *)key};

	return s->n ? bsearch(&probe, s->h, (size_t)s->n, sizeof(*s->h),
			      cmp_hint)
		    : NULL;
}

static void snap_free(struct hint_snap *s)
{
	smux__hints_free_list(s->h, s->n);
	s->h = NULL;
	s->n = 0;
}

/* Who listed what, when equal keys must pick the member that is not
 * behind: a member with a pending hint for a key (when the listing
 * started, or when the listings are merged) has an older version (or
 * none), so its info (size, mtime) must not win. */
struct merge_src {
	bool hinted; /* false: first member wins */
	const struct hint_snap *start, *now;
	struct mux_member **ms;
	unsigned n_members; /* lists past them (the fill) are never behind */
	/* a key only members with a pending delete hint for it list is not
	 * there: mirror (the replicas without one took the delete); sticky-
	 * by-key with every shard listed (its holder has none) */
	bool drop_deleted;
	/* sticky-by-key: the view the members are in (NULL otherwise) */
	struct mux_view *sticky;
};

/* The hint that makes member @i behind for @key (the latest), or NULL. */
static const struct smux__hint *behind(const struct merge_src *src, unsigned i,
				       const char *key)
{
	const struct smux__hint *h;

	if (i >= src->n_members)
		return NULL;
	h = snap_find(src->now, src->ms[i]->name, key);
	return h ? h : snap_find(src->start, src->ms[i]->name, key);
}

/* Sticky-by-key: the place of member @i in the order the shards are asked
 * for @key (home first, then home + 1, ...: reads, smux__sticky_route). */
static unsigned sticky_rank(const struct merge_src *src, unsigned i,
			    const char *key)
{
	const struct mux_view *v = src->sticky;
	unsigned home = smux__sticky_home(v, key);

	for (unsigned k = 0; k < v->n; k++)
		if (v->m[k] == src->ms[i])
			return (k + v->n - home) % v->n;
	return v->n;
}

/*
 * Sticky-by-key: of the members listing @key at their current place
 * (@pos), not behind for it, the one reads ask first: the holder, or the
 * first shard off home that holds it. Another may hold an older copy (a
 * key placed before the shard list grew, then overwritten home): its
 * size won when it came first in member order (ls -l showed the old
 * size, and the kernel read the file short). -1 when none.
 */
static int sticky_pick(struct entries *es, const bool *ok, const size_t *pos,
		       unsigned n, const struct merge_src *src, const char *key)
{
	unsigned best_rank = UINT32_MAX;
	int best = -1;

	for (unsigned i = 0; i < n && i < src->n_members; i++) {
		unsigned r;

		if (!ok[i] || pos[i] >= es[i].n ||
		    strcmp(es[i].e[pos[i]].key, key) != 0 ||
		    behind(src, i, key))
			continue;
		r = sticky_rank(src, i, key);
		if (r < best_rank) {
			best_rank = r;
			best = (int)i;
		}
	}
	return best;
}

/* The smallest current key of the sorted member lists, each member's copy
 * of it passed over (NULL at the end). */
static struct entry *merge_next(struct entries *es, const bool *ok, size_t *pos,
				unsigned n, const struct merge_src *src)
{
	const struct smux__hint *h = NULL;
	struct entry *e;
	unsigned listers;
	int best, c;

again:
	best = -1;
	listers = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!ok[i] || pos[i] >= es[i].n)
			continue;
		c = best < 0 ? -1
			     : strcmp(es[i].e[pos[i]].key,
				      es[best].e[pos[best]].key);
		if (c < 0) {
			best = (int)i;
			listers = 1;
		} else if (c == 0) {
			listers++;
		}
	}
	if (best < 0)
		return NULL;
	e = &es[best].e[pos[best]];
	if (src && src->sticky && !e->is_prefix && listers > 1) {
		int pick = sticky_pick(es, ok, pos, n, src, e->key);

		/* not behind: the hint check below keeps it */
		if (pick >= 0) {
			best = pick;
			e = &es[best].e[pos[best]];
		}
	}
	/* (a directory's prefix: behind for it is a hint for its marker) */
	if (src && src->hinted &&
	    (h = behind(src, (unsigned)best, e->key)) != NULL) {
		for (unsigned i = (unsigned)best + 1; i < n; i++)
			if (ok[i] && pos[i] < es[i].n &&
			    strcmp(es[i].e[pos[i]].key, e->key) == 0 &&
			    !behind(src, i, e->key)) {
				e = &es[i].e[pos[i]];
				h = NULL;
				break;
			}
	}
	for (unsigned i = 0; i < n; i++)
		if (ok[i] && pos[i] < es[i].n &&
		    strcmp(es[i].e[pos[i]].key, e->key) == 0)
			pos[i]++;
	/* deleted while those members were out; a missed put says only
	 * that the member may have an older version, and the key is there */
	if (h && src->drop_deleted && h->kind == SMUX__HINT_DEL)
		goto again;
	return e;
}

/* Hands @e to the caller's callback; its answer (non-zero: stop). */
static int deliver(smux_list_fn fn, void *arg, const struct entry *e)
{
	struct smux_list_entry le = {
		.key = e->key,
		.is_prefix = e->is_prefix,
		.info = e->info,
	};

	return fn(arg, &le);
}

/*
 * Delivers the k-way merge of @n sorted lists (those with ok[i]); equal
 * keys are delivered once, the first list's entry. Stops when @fn asks.
 */
static void merge_deliver(struct entries *es, const bool *ok, unsigned n,
			  const struct merge_src *src, const char *delimiter,
			  smux_list_fn fn, void *arg)
{
	size_t pos[LIST_MAX + 1] = {0};
	struct entry *pending = NULL;

	for (;;) {
		struct entry *e = merge_next(es, ok, pos, n, src);

		if (pending) {
			/* without a delimiter a marker is listed for an empty
			 * directory only: empty on one member, it may hold
			 * keys on another (they sort right after it) */
			if (!(e && strncmp(e->key, pending->key,
					   strlen(pending->key)) == 0) &&
			    deliver(fn, arg, pending))
				break;
			pending = NULL;
		}
		if (!e)
			break;
		if (!delimiter && !e->is_prefix && e->key[0] &&
		    e->key[strlen(e->key) - 1] == '/') {
			pending = e;
			continue;
		}
		if (deliver(fn, arg, e))
			break;
	}
}

/* ---- union listing (sticky-by-key, mirror) ---- */

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->key,
		      ((const struct entry *)b)->key);
}

/* Sorts @es by key and drops repeated keys (the first stays). */
static void entries_sort_unique(struct entries *es)
{
	size_t n = 0;

	if (es->n < 2)
		return;
	qsort(es->e, es->n, sizeof(*es->e), cmp_entry);
	for (size_t i = 1; i < es->n; i++) {
		if (strcmp(es->e[i].key, es->e[n].key) == 0) {
			free(es->e[i].key);
			continue;
		}
		es->e[++n] = es->e[i];
	}
	es->n = n + 1;
}

/* Whether a listing that answered (sorted) has @key. */
static bool listed_by(const struct entries *es, const bool *ok, unsigned n,
		      const char *key)
{
	struct entry probe = {.key = (char *)key};

	for (unsigned i = 0; i < n; i++)
		if (ok[i] && es[i].n &&
		    bsearch(&probe, es[i].e, es[i].n, sizeof(*es[i].e),
			    cmp_entry))
			return true;
	return false;
}

/*
 * Sticky-by-key, every shard listed: the keys of the put hints pending
 * when the listing started that no shard listed, into @fill. A replay
 * that moved such a key home between home's listing and the listing of
 * the shard that held it hid it from both; the mux tells where it is now
 * (a head). A key nobody can tell about now is listed without info rather
 * than seem lost; one deleted since is not listed. 0, or the caller's
 * abort.
 */
static long fill_moved(struct smux_mux *mux, const struct smux_ctx *ctx,
		       const struct hint_snap *start, const char *prefix,
		       const char *delimiter, const struct entries *es,
		       const bool *ok, unsigned n, struct entries *fill,
		       struct smux_error *err)
{
	size_t plen = strlen(prefix), dlen = delimiter ? strlen(delimiter) : 0;

	for (int i = 0; i < start->n; i++) {
		const struct smux__hint *h = &start->h[i];
		const char *rest = h->key + plen, *d;
		struct smux_info info;
		struct smux_error e;
		bool seen;
		char *key;
		int rc;

		if (h->kind != SMUX__HINT_PUT ||
		    strncmp(h->key, prefix, plen) != 0 || !*rest ||
		    strcmp(h->key, SMUX__REJOIN_KEY) == 0)
			continue;
		d = dlen ? strstr(rest, delimiter) : NULL;
		key = strndup(h->key,
			      d ? (size_t)(d - h->key) + dlen : strlen(h->key));
		if (!key)
			return smux_error_set(err, SMUX_E_NO_MEMORY,
					      mux->base.name, NULL);
		seen = listed_by(es, ok, n, key) ||
		       (fill->n && strcmp(fill->e[fill->n - 1].key, key) == 0);
		if (seen) {
			free(key);
			continue;
		}
		rc = smux_backend_head(&mux->base, ctx, h->key, &info, &e);
		if (rc < 0 && smux_classify(&e.e) == SMUX_OUTCOME_ABORT) {
			free(key);
			*err = e;
			return rc;
		}
		if (rc < 0 && e.e.code == SMUX_E_KEY_NOT_FOUND) {
			free(key);
			continue;
		}
		entries_add(fill, key, strlen(key), d != NULL,
			    rc < 0 || d ? NULL : &info);
		free(key);
	}
	if (fill->oom)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	entries_sort_unique(fill);
	return 0;
}

/*
 * Delivers the union of the @n listings @es of members @ms of view @v
 * (those with ok[i]); es[n] is free for the fill. Equal keys: the first
 * member's entry, in member order (sticky-by-key: in the order reads ask
 * the shards for the key, sticky_pick), unless it is behind for the key
 * (a pending hint, when the listing started @start or now). Sticky-by-key
 * with every shard listed (@all): keys only behind shards with a delete
 * hint list are not there, and keys of put hints no shard listed are
 * asked for.
 */
static long merge_union(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct mux_view *v, struct mux_member **ms,
			struct entries *es, bool *ok, unsigned n, bool all,
			const struct hint_snap *start, const char *prefix,
			const char *delimiter, smux_list_fn fn, void *arg,
			struct smux_error *err)
{
	struct hint_snap now = {NULL, 0};
	struct merge_src src = {
		.start = start,
		.now = &now,
		.ms = ms,
		.n_members = n,
		/* mirror: a delete reached the replicas without a hint,
		 * whether or not they all listed */
		.drop_deleted = mux->mode == SMUX_MODE_MIRROR ||
				(all && mux->mode == SMUX_MODE_STICKY),
		.sticky = mux->mode == SMUX_MODE_STICKY ? v : NULL,
	};
	unsigned nl = n;
	long rc = 0;

	src.hinted = start->n || smux__hints_pending_replicas(mux->hints) > 0;
	if (src.hinted && snap_take(mux, &now))
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	/* (sticky-by-key only: a mirror replica's missed put does not move
	 * the key, the replicas that took it list it) */
	if (src.sticky && src.drop_deleted && start->n) {
		rc = fill_moved(mux, ctx, start, prefix ? prefix : "",
				delimiter && *delimiter ? delimiter : NULL, es,
				ok, n, &es[n], err);
		ok[n] = true;
		nl = n + 1;
	}
	if (rc == 0)
		merge_deliver(es, ok, nl, &src, delimiter, fn, arg);
	snap_free(&now);
	return rc;
}

long smux__exec_list_union(struct smux_mux *mux, const struct smux_ctx *ctx,
			   const char *prefix, const char *delimiter,
			   smux_list_fn fn, void *arg, struct smux_span *span,
			   struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *ms[LIST_MAX];
	struct entries es[LIST_MAX + 1] = {{0}}; /* the members', the fill */
	struct smux__call calls[LIST_MAX];
	struct smux__job *jobs[LIST_MAX];
	struct smux_span *spans[LIST_MAX];
	struct smux_error errs[LIST_MAX], last = {0};
	int64_t t0[LIST_MAX];
	bool probes[LIST_MAX], ok[LIST_MAX + 1];
	unsigned n = 0, n_ok = 0;
	int64_t now = smux__mux_now(mux);
	bool all_timeouts = true;
	struct hint_snap snap;
	long rc = 0;

	if (snap_take(mux, &snap)) {
		smux__view_put(v);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	if (smux__list_hook_snapped)
		smux__list_hook_snapped(mux);
	for (unsigned i = 0; i < v->n && n < LIST_MAX; i++) {
		/* a member rejoining the mux may list what was deleted while
		 * it was out (mux_rejoin.c) */
		if (smux__rejoining(mux, v->m[i]))
			continue;
		if (!smux__health_acquire(&v->m[i]->health, now, &probes[n]))
			continue;
		if (!smux__member_enter(v->m[i]))
			continue; /* drained since: its probe went with it */
		ms[n] = v->m[i];
		calls[n] = (struct smux__call){
			.op = SMUX__OP_LIST,
			.backend = ms[n]->backend,
			.key = prefix,
			.key2 = delimiter,
			.list_fn = collect,
			.list_arg = &es[n],
		};
		spans[n] = smux__attempt_span(mux, span, ms[n], n);
		calls[n].span = spans[n] ? spans[n] : span;
		t0[n] = smux_now_ns();
		jobs[n] = smux__bulkhead_start(ms[n]->bh, ctx, mux->timeout_ms,
					       &calls[n], NULL);
		n++;
	}
	for (unsigned i = 0; i < n; i++) {
		enum smux_outcome o;
		long r;

		if (jobs[i])
			r = smux__job_finish(jobs[i], &errs[i]);
		else
			r = smux_error_set(&errs[i], SMUX_E_NO_MEMORY,
					   ms[i]->name, "cannot start job");
		if (r == 0 && es[i].oom)
			r = smux_error_set(&errs[i], SMUX_E_NO_MEMORY,
					   ms[i]->name, "listing too large");
		atomic_fetch_sub(&ms[i]->health.in_flight, 1);
		o = smux__attempt_done(mux, ctx, ms[i], probes[i], t0[i],
				       r < 0 ? &errs[i] : NULL, spans[i]);
		ok[i] = r == 0;
		if (ok[i]) {
			n_ok++;
		} else {
			last = errs[i];
			if (o != SMUX_OUTCOME_TIMEOUT)
				all_timeouts = false;
		}
	}
	if (n_ok == 0) {
		rc = smux__exhausted(mux, n, all_timeouts, &last, err);
		goto out;
	}
	if (smux__list_hook_listed)
		smux__list_hook_listed(mux);
	rc = merge_union(mux, ctx, v, ms, es, ok, n, n_ok == v->n, &snap,
			 prefix, delimiter, fn, arg, err);
out:
	for (unsigned i = 0; i <= n; i++) /* the members', the fill */
		entries_free(&es[i]);
	snap_free(&snap);
	smux__view_put(v);
	return rc;
}

/* ---- failover listing while hints are pending ---- */

/* What the hints of the member that answered change in its listing. */
struct overlay {
	struct entries add;  /* keys it lacks or has an old version of */
	struct entries gone; /* keys deleted while it was out */
};

/*
 * The listing entry for @key, a missed put: the info of the version the
 * member missed, from the first member that has it (a head through the
 * walk that passes over members with a hint for @key). A key that member
 * no longer has is gone; a key no member can tell about now is still
 * listed, without info, so that it does not seem lost. 0, or the caller's
 * abort.
 */
static long overlay_put(struct smux_mux *mux, const struct smux_ctx *ctx,
			struct overlay *ov, const char *key,
			struct smux_span *span, struct smux_error *err)
{
	struct smux_info info = {0};
	struct smux__call head = {
		.op = SMUX__OP_HEAD,
		.key = key,
		.info = &info,
	};
	struct smux_error e;
	long rc;

	rc = smux__exec_walk(mux, ctx, &head, true, NULL, span, &e);
	if (rc < 0 && smux_classify(&e.e) == SMUX_OUTCOME_ABORT) {
		*err = e;
		return rc;
	}
	if (rc < 0 && e.e.code == SMUX_E_KEY_NOT_FOUND)
		entries_add(&ov->gone, key, strlen(key), false, NULL);
	else
		entries_add(&ov->add, key, strlen(key), false,
			    rc < 0 ? NULL : &info);
	return 0;
}

/*
 * Builds the overlay of member @m for a listing of @prefix (folded at
 * @delimiter when not NULL) from its pending hints. A missed put adds its
 * key (or the common prefix it folds into); a missed delete removes its key
 * (a folded one is left as it is: the member's other keys under that
 * prefix may still be there), a directory's marker its common prefix.
 */
static long overlay_build(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct mux_member *m, const struct hint_snap *snap,
			  const char *prefix, const char *delimiter,
			  struct overlay *ov, struct smux_span *span,
			  struct smux_error *err)
{
	size_t plen = strlen(prefix), dlen = delimiter ? strlen(delimiter) : 0;
	struct smux__hint *hints = NULL, *all;
	int n = smux__hints_list(mux->hints, m->name, &hints), nall;
	long rc = 0;

	if (n < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	/* the member's hints of now, then those done since the listing
	 * started (its listing may predate their replay) */
	nall = n + snap->n;
	all = calloc(nall ? (size_t)nall : 1, sizeof(*all));
	if (!all) {
		smux__hints_free_list(hints, n);
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	}
	nall = 0;
	for (int i = 0; i < n; i++)
		all[nall++] = hints[i];
	for (int i = 0; i < snap->n; i++)
		if (strcmp(snap->h[i].replica, m->name) == 0 &&
		    !smux__hints_has(mux->hints, m->name, snap->h[i].key))
			all[nall++] = snap->h[i];
	for (int i = 0; i < nall && rc == 0; i++) {
		const struct smux__hint *h = &all[i];
		const char *key = h->key, *rest = key + plen, *d;

		if (strncmp(key, prefix, plen) != 0 || !*rest ||
		    strcmp(key, SMUX__REJOIN_KEY) == 0)
			continue; /* elsewhere, or the listed directory */
		d = dlen ? strstr(rest, delimiter) : NULL;
		if (d && h->kind == SMUX__HINT_DEL && !d[dlen]) {
			/* a directory's marker: removed (its names were
			 * before it: each has its own delete hint), the
			 * directory goes with it (s47-t1: a shield's origin
			 * listed a directory rm -r had removed while it was
			 * drained, and rmdir of the one above found it not
			 * empty) */
			entries_add(&ov->gone, key, strlen(key), true, NULL);
		} else if (d) {
			if (h->kind == SMUX__HINT_PUT)
				entries_add(&ov->add, key,
					    (size_t)(d - key) + dlen, true,
					    NULL);
		} else if (h->kind == SMUX__HINT_DEL) {
			entries_add(&ov->gone, key, strlen(key), false, NULL);
		} else {
			rc = overlay_put(mux, ctx, ov, key, span, err);
		}
	}
	free(all); /* the strings are the lists' */
	smux__hints_free_list(hints, n);
	if (rc == 0 && (ov->add.oom || ov->gone.oom))
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				    NULL);
	entries_sort_unique(&ov->add);
	entries_sort_unique(&ov->gone);
	return rc;
}

/* Drops from @es (sorted) the keys in @gone (sorted); a common prefix
 * only for a gone prefix (a removed directory's). */
static void entries_remove(struct entries *es, const struct entries *gone)
{
	size_t n = 0, g = 0;

	for (size_t i = 0; i < es->n; i++) {
		int c = 1;

		while (g < gone->n &&
		       (c = strcmp(gone->e[g].key, es->e[i].key)) < 0)
			g++;
		if (g < gone->n && c == 0 &&
		    (!es->e[i].is_prefix || gone->e[g].is_prefix)) {
			free(es->e[i].key);
			continue;
		}
		es->e[n++] = es->e[i];
	}
	es->n = n;
}

long smux__exec_list_failover(struct smux_mux *mux, const struct smux_ctx *ctx,
			      struct smux__call *call, struct smux_span *span,
			      struct smux_error *err)
{
	const char *delim = call->key2 && call->key2[0] ? call->key2 : NULL;
	struct entries lists[2] = {{0}, {0}}; /* overlay additions, listing */
	struct overlay ov = {{0}, {0}};
	struct smux__call lc = *call;
	struct mux_member *m = NULL;
	const bool ok[2] = {true, true};
	struct hint_snap snap;
	long rc;

	/* the common case streams: no member missed anything */
	if (smux__hints_pending_replicas(mux->hints) == 0)
		return smux__exec_walk(mux, ctx, call, false, NULL, span, err);
	if (snap_take(mux, &snap))
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	lc.list_fn = collect;
	lc.list_arg = &lists[1];
	rc = smux__exec_walk(mux, ctx, &lc, false, &m, span, err);
	if (rc == 0 && lists[1].oom)
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				    "listing too large");
	/* a member rejoining the mux (mux_rejoin.c) may list what was
	 * deleted while it was out: no answer rather than that one */
	if (rc == 0 && m && smux__rejoining(mux, m))
		rc = smux_error_set(
			err, SMUX_E_ALL_BACKENDS_DOWN, mux->base.name,
			"only %s, not resynced yet, answered", m->name);
	if (rc == 0 && smux__list_hook_listed)
		smux__list_hook_listed(mux);
	if (rc == 0 && m &&
	    (snap.n || smux__hints_pending(mux->hints, m->name) > 0))
		rc = overlay_build(mux, ctx, m, &snap,
				   call->key ? call->key : "", delim, &ov, span,
				   err);
	if (rc == 0) {
		entries_remove(&lists[1], &ov.gone);
		lists[0] = ov.add; /* first: its info wins on equal keys */
		ov.add = (struct entries){0};
		merge_deliver(lists, ok, 2, NULL, delim, call->list_fn,
			      call->list_arg);
	}
	smux__member_put(m);
	entries_free(&lists[0]);
	entries_free(&lists[1]);
	entries_free(&ov.add);
	entries_free(&ov.gone);
	snap_free(&snap);
	return rc;
}

/* ---- whether a listing is whole ---- */

int smux_mux_list_whole(struct smux_backend *b, const char *prefix,
			struct smux_error *err)
{
	struct smux_mux *mux;
	struct mux_view *v;
	int rc = 0;

	if (!smux_is_mux(b))
		return 0;
	mux = smux__mux_of(b);
	if (mux->mode != SMUX_MODE_FAILOVER && mux->mode != SMUX_MODE_STICKY)
		return 0;
	v = smux__view_get(mux);
	for (unsigned i = 0; i < v->n && rc == 0; i++) {
		struct mux_member *m = v->m[i];

		if (mux->mode == SMUX_MODE_STICKY && smux__sticky_slot_empty(m))
			continue;
		if (smux__health_status(&m->health) == SMUX_STATUS_UP) {
			rc = smux_mux_list_whole(m->backend, prefix, err);
			if (mux->mode == SMUX_MODE_FAILOVER)
				break; /* it answers the listing */
			continue;
		}
		rc = smux_error_set(err, SMUX_E_ALL_BACKENDS_DOWN,
				    mux->base.name,
				    "%s is out and may hold keys under \"%s\" "
				    "that no other member lists",
				    m->name, prefix);
	}
	smux__view_put(v);
	return rc;
}
