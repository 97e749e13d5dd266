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

/* The smallest current key of the sorted member lists, each member's copy
 * of it passed over (NULL at the end). */
/* Who listed what, when equal keys must pick the member that is not
 * behind: a member with a pending hint for a key has an older version
 * (or none), so its info (size, mtime) must not win. */
struct merge_src {
	struct smux__hints *hints; /* NULL: first member wins */
	struct mux_member **ms;
	/* sticky-by-key, every shard listed: a key only shards with a
	 * pending hint for it list is not there (its holder has none) */
	bool drop_hinted;
};

static struct entry *merge_next(struct entries *es, const bool *ok, size_t *pos,
				unsigned n, const struct merge_src *src)
{
	struct entry *e;
	int best;
	bool behind;

again:
	best = -1;
	behind = false;

	for (unsigned i = 0; i < n; i++) {
		if (!ok[i] || pos[i] >= es[i].n)
			continue;
		if (best < 0 ||
		    strcmp(es[i].e[pos[i]].key, es[best].e[pos[best]].key) < 0)
			best = (int)i;
	}
	if (best < 0)
		return NULL;
	e = &es[best].e[pos[best]];
	if (src && src->hints && !e->is_prefix &&
	    smux__hints_has(src->hints, src->ms[best]->name, e->key)) {
		behind = true;
		for (unsigned i = (unsigned)best + 1; i < n; i++)
			if (ok[i] && pos[i] < es[i].n &&
			    strcmp(es[i].e[pos[i]].key, e->key) == 0 &&
			    !smux__hints_has(src->hints, src->ms[i]->name,
					     e->key)) {
				e = &es[i].e[pos[i]];
				behind = false;
				break;
			}
	}
	for (unsigned i = 0; i < n; i++)
		if (ok[i] && pos[i] < es[i].n &&
		    strcmp(es[i].e[pos[i]].key, e->key) == 0)
			pos[i]++;
	if (behind && src->drop_hinted)
		goto again; /* deleted while those shards were out */
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
	size_t pos[LIST_MAX] = {0};
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

long smux__exec_list_union(struct smux_mux *mux, const struct smux_ctx *ctx,
			   const char *prefix, const char *delimiter,
			   smux_list_fn fn, void *arg, struct smux_span *span,
			   struct smux_error *err)
{
	struct mux_view *v = smux__view_get(mux);
	struct mux_member *ms[LIST_MAX];
	struct entries es[LIST_MAX];
	struct smux__call calls[LIST_MAX];
	struct smux__job *jobs[LIST_MAX];
	struct smux_span *spans[LIST_MAX];
	struct smux_error errs[LIST_MAX], last = {0};
	int64_t t0[LIST_MAX];
	bool probes[LIST_MAX], ok[LIST_MAX];
	unsigned n = 0, n_ok = 0;
	int64_t now = smux__mux_now(mux);
	bool all_timeouts = true;
	long rc = 0;

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
		memset(&es[n], 0, sizeof(es[n]));
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
	/* equal keys: the first member's entry, in member order, unless it
	 * has a pending hint for the key */
	{
		struct merge_src src = {NULL, ms, false};

		if (smux__hints_pending_replicas(mux->hints) > 0)
			src.hints = mux->hints;
		src.drop_hinted = mux->mode == SMUX_MODE_STICKY && n_ok == v->n;
		merge_deliver(es, ok, n, &src, delimiter, fn, arg);
	}
out:
	for (unsigned i = 0; i < n; i++)
		entries_free(&es[i]);
	smux__view_put(v);
	return rc;
}

/* ---- failover listing while hints are pending ---- */

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
 * prefix may still be there).
 */
static long overlay_build(struct smux_mux *mux, const struct smux_ctx *ctx,
			  struct mux_member *m, const char *prefix,
			  const char *delimiter, struct overlay *ov,
			  struct smux_span *span, struct smux_error *err)
{
	size_t plen = strlen(prefix), dlen = delimiter ? strlen(delimiter) : 0;
	struct smux__hint *hints = NULL;
	int n = smux__hints_list(mux->hints, m->name, &hints);
	long rc = 0;

	if (n < 0)
		return smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				      NULL);
	for (int i = 0; i < n && rc == 0; i++) {
		const char *key = hints[i].key, *rest = key + plen, *d;

		if (strncmp(key, prefix, plen) != 0 || !*rest ||
		    strcmp(key, SMUX__REJOIN_KEY) == 0)
			continue; /* elsewhere, or the listed directory */
		d = dlen ? strstr(rest, delimiter) : NULL;
		if (d) {
			if (hints[i].kind == SMUX__HINT_PUT)
				entries_add(&ov->add, key,
					    (size_t)(d - key) + dlen, true,
					    NULL);
		} else if (hints[i].kind == SMUX__HINT_DEL) {
			entries_add(&ov->gone, key, strlen(key), false, NULL);
		} else {
			rc = overlay_put(mux, ctx, ov, key, span, err);
		}
	}
	smux__hints_free_list(hints, n);
	if (rc == 0 && (ov->add.oom || ov->gone.oom))
		rc = smux_error_set(err, SMUX_E_NO_MEMORY, mux->base.name,
				    NULL);
	entries_sort_unique(&ov->add);
	entries_sort_unique(&ov->gone);
	return rc;
}

/* Drops from @es (sorted) the keys in @gone (sorted). */
static void entries_remove(struct entries *es, const struct entries *gone)
{
	size_t n = 0, g = 0;

	for (size_t i = 0; i < es->n; i++) {
		int c = 1;

		while (g < gone->n &&
		       (c = strcmp(gone->e[g].key, es->e[i].key)) < 0)
			g++;
		if (g < gone->n && c == 0 && !es->e[i].is_prefix) {
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
	long rc;

	/* the common case streams: no member missed anything */
	if (smux__hints_pending_replicas(mux->hints) == 0)
		return smux__exec_walk(mux, ctx, call, false, NULL, span, err);
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
	if (rc == 0 && m && smux__hints_pending(mux->hints, m->name) > 0)
		rc = overlay_build(mux, ctx, m, call->key ? call->key : "",
				   delim, &ov, span, err);
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
	return rc;
}
