/* SPDX-License-Identifier: MIT */
/*
 * hints.c - the hinted-handoff journal of one mux (core/hints.h): the
 * in-memory index of pending hints and the API; the file is
 * hints_journal.c (hints_internal.h has the locking and group commit).
 *
 * Owns: the in-memory set of pending hints. Never calls a backend and
 * never replays a hint: the mux does, then reports back with
 * smux__hints_done() or smux__hints_supersede().
 *
 * Pending hints live in a list in id order (and in one list per replica),
 * and in two hash tables: by id (done) and by (replica, key) (add,
 * supersede, has). There is at most one pending hint per (replica, key).
 *
 * A change (add, done, supersede) builds its records and queues them
 * under the write lock, waits for its batch to be durable holding no lock,
 * then applies itself under the write lock again: reads (has, pending,
 * list) only ever wait for those short critical sections, never for I/O.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hints_internal.h"

#define HINTS_BUCKETS0 64

static int no_memory(struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_NO_MEMORY, NULL,
			      "hint journal: out of memory");
}

/* ---- hashing and the in-memory set ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static uint64_t rk_hash(const struct hint_replica *rep, const char *key)
{
	uint64_t x = 0xcbf29ce484222325ULL;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		x ^= *p;
		x *= 0x100000001b3ULL;
	}
	return mix64(x ^ (uint64_t)(uintptr_t)rep);
}

static size_t id_slot(const struct smux__hints *h, uint64_t id)
{
	return (size_t)(mix64(id) & (h->nbuckets - 1));
}

static size_t rk_slot(const struct smux__hints *h, uint64_t hash)
{
	return (size_t)(hash & (h->nbuckets - 1));
}

static void hash_insert(struct smux__hints *h, struct hint_entry *e)
{
	size_t i = id_slot(h, e->id);
	size_t j = rk_slot(h, e->rk_hash);

	e->id_chain = h->by_id[i];
	h->by_id[i] = e;
	e->rk_chain = h->by_rk[j];
	h->by_rk[j] = e;
}

/* Rebuilds both tables with @n buckets from the pending list. */
static int table_resize(struct smux__hints *h, size_t n)
{
	struct hint_entry **by_id = calloc(n, sizeof(struct hint_entry *));
	struct hint_entry **by_rk = calloc(n, sizeof(struct hint_entry *));

	if (!by_id || !by_rk) {
		free(by_id);
		free(by_rk);
		return -ENOMEM;
	}
	free(h->by_id);
	free(h->by_rk);
	h->by_id = by_id;
	h->by_rk = by_rk;
	h->nbuckets = n;
	for (struct hint_entry *e = h->head; e; e = e->next)
		hash_insert(h, e);
	return 0;
}

struct hint_entry *hx_find_id(const struct smux__hints *h, uint64_t id)
{
	struct hint_entry *e = h->by_id[id_slot(h, id)];

	while (e && e->id != id)
		e = e->id_chain;
	return e;
}

struct hint_replica *hx_find_replica(const struct smux__hints *h,
				     const char *name)
{
	struct hint_replica *r = h->replicas;

	while (r && strcmp(r->name, name) != 0)
		r = r->next;
	return r;
}

struct hint_replica *hx_get_replica(struct smux__hints *h, const char *name)
{
	struct hint_replica *r = hx_find_replica(h, name);

	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->name = strdup(name);
	if (!r->name) {
		free(r);
		return NULL;
	}
	r->next = h->replicas;
	h->replicas = r;
	return r;
}

struct hint_entry *hx_find_rk(const struct smux__hints *h,
			      const struct hint_replica *rep, const char *key)
{
	uint64_t hash;
	struct hint_entry *e;

	if (!rep)
		return NULL;
	hash = rk_hash(rep, key);
	for (e = h->by_rk[rk_slot(h, hash)]; e; e = e->rk_chain)
		if (e->rk_hash == hash && e->rep == rep &&
		    strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

struct hint_entry *hx_entry_new(struct hint_replica *rep, const char *key,
				uint64_t id, enum smux__hint_kind kind,
				int64_t at_ms)
{
	struct hint_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->key = strdup(key);
	if (!e->key) {
		free(e);
		return NULL;
	}
	e->id = id;
	e->kind = kind;
	e->at_ms = at_ms;
	e->rep = rep;
	e->rk_hash = rk_hash(rep, key);
	return e;
}

void hx_entry_free(struct hint_entry *e)
{
	if (e) {
		free(e->key);
		free(e);
	}
}

/*
 * Adds @e to the pending set, keeping id order (appends at the tail in
 * practice: ids only grow). Cannot fail: a table that cannot grow stays
 * as it is, only slower.
 */
void (*smux__hints_hook_change)(bool pending, const char *replica,
				const char *key, int kind, uint64_t id);

void hx_entry_link(struct smux__hints *h, struct hint_entry *e)
{
	struct hint_replica *r = e->rep;
	struct hint_entry *p = h->tail;

	if (smux__hints_hook_change)
		smux__hints_hook_change(true, r->name, e->key, (int)e->kind,
					e->id);

	while (p && p->id > e->id)
		p = p->prev;
	e->prev = p;
	e->next = p ? p->next : h->head;
	if (e->next)
		e->next->prev = e;
	else
		h->tail = e;
	if (p)
		p->next = e;
	else
		h->head = e;

	p = r->tail;
	while (p && p->id > e->id)
		p = p->rprev;
	e->rprev = p;
	e->rnext = p ? p->rnext : r->head;
	if (e->rnext)
		e->rnext->rprev = e;
	else
		r->tail = e;
	if (p)
		p->rnext = e;
	else
		r->head = e;

	h->npending++;
	r->pending++;
	if (h->npending > h->nbuckets && table_resize(h, h->nbuckets * 2) == 0)
		return; /* the rehash inserted e */
	hash_insert(h, e);
}

/* Removes @e from the pending set and frees it. */
void hx_entry_unlink(struct smux__hints *h, struct hint_entry *e)
{
	struct hint_replica *r = e->rep;
	struct hint_entry **pp;

	if (smux__hints_hook_change)
		smux__hints_hook_change(false, r->name, e->key, (int)e->kind,
					e->id);

	if (e->prev)
		e->prev->next = e->next;
	else
		h->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		h->tail = e->prev;
	if (e->rprev)
		e->rprev->rnext = e->rnext;
	else
		r->head = e->rnext;
	if (e->rnext)
		e->rnext->rprev = e->rprev;
	else
		r->tail = e->rprev;

	for (pp = &h->by_id[id_slot(h, e->id)]; *pp != e; pp = &(*pp)->id_chain)
		;
	*pp = e->id_chain;
	for (pp = &h->by_rk[rk_slot(h, e->rk_hash)]; *pp != e;
	     pp = &(*pp)->rk_chain)
		;
	*pp = e->rk_chain;

	h->npending--;
	r->pending--;
	hx_entry_free(e);
}

/* Copies @e into @d (strings duplicated). 0 or -ENOMEM. */
static int hx_copy(struct smux__hint *d, const struct hint_entry *e)
{
	d->id = e->id;
	d->kind = e->kind;
	d->at_ms = e->at_ms;
	d->failures = e->failures;
	d->retry_at_ms = e->retry_at_ms;
	d->fail_gen = e->fail_gen;
	d->replica = strdup(e->rep->name);
	d->key = strdup(e->key);
	return d->replica && d->key ? 0 : -ENOMEM;
}

int hx_snapshot(const struct smux__hints *h, const struct hint_replica *r,
		struct smux__hint **out)
{
	unsigned n = r ? r->pending : h->npending;
	struct hint_entry *e = r ? r->head : h->head;
	struct smux__hint *list;
	int i = 0;

	*out = NULL;
	if (n == 0)
		return 0;
	if (n > INT_MAX) /* a count an int cannot return */
		return -ENOMEM;
	list = calloc(n, sizeof(*list));
	if (!list)
		return -ENOMEM;
	for (; e; e = r ? e->rnext : e->next, i++) {
		if (hx_copy(&list[i], e)) {
			smux__hints_free_list(list, i + 1);
			return -ENOMEM;
		}
	}
	*out = list;
	return i;
}

/* A mux name is a plain file name: [A-Za-z0-9._-]+, not starting '.'. */
static int check_name(const char *name, struct smux_error *err)
{
	size_t len = name ? strlen(name) : 0;
	bool ok = len > 0 && name[0] != '.' &&
		  len + sizeof(HINTS_TMP_SUFFIX) - 1 <= NAME_MAX;

	for (size_t i = 0; ok && i < len; i++) {
		char c = name[i];

		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		     (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
	}
	if (ok)
		return 0;
	return smux_error_set(err, SMUX_E_INVALID_OPTIONS, NULL,
			      "mux name \"%.64s\" cannot name a hint journal "
			      "(use [A-Za-z0-9._-], not starting with '.')",
			      name ? name : "");
}

int smux__hints_open(const char *state_dir, const char *mux_name,
		     struct smux__hints **out, struct smux_error *err)
{
	pthread_rwlockattr_t attr;
	struct smux__hints *h;
	int rc;

	if (!out)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: no result pointer");
	*out = NULL;
	rc = check_name(mux_name, err);
	if (rc)
		return rc;
	h = calloc(1, sizeof(*h));
	if (!h)
		return no_memory(err);
	h->fd = -1;
	h->next_id = 1;
	/* writers first: a stream of reads (has, on every I/O) must not
	 * keep an add waiting */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&h->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc != 0) {
		free(h);
		return no_memory(err);
	}
	if (pthread_mutex_init(&h->jlock, NULL) != 0) {
		pthread_rwlock_destroy(&h->lock);
		free(h);
		return no_memory(err);
	}
	if (pthread_cond_init(&h->jcond, NULL) != 0) {
		pthread_mutex_destroy(&h->jlock);
		pthread_rwlock_destroy(&h->lock);
		free(h);
		return no_memory(err);
	}
	if (table_resize(h, HINTS_BUCKETS0) != 0) {
		rc = no_memory(err);
		goto out_close;
	}
	if (state_dir) {
		rc = hj_open(h, state_dir, mux_name, err);
		if (rc)
			goto out_close;
		hj_maybe_compact(h, true);
	}
	*out = h;
	return 0;

out_close:
	smux__hints_close(h);
	return rc;
}

void smux__hints_on_pending(struct smux__hints *h, void (*fn)(void *arg),
			    void *arg)
{
	if (!h)
		return;
	h->wake = fn;
	h->wake_arg = arg;
}

void smux__hints_close(struct smux__hints *h)
{
	struct hint_entry *e, *enext;
	struct hint_replica *r, *rnext;

	if (!h)
		return;
	hj_close(h);
	for (e = h->head; e; e = enext) {
		enext = e->next;
		hx_entry_free(e);
	}
	while (h->notes)
		hn_unlink(h, h->notes);
	for (r = h->replicas; r; r = rnext) {
		rnext = r->next;
		free(r->name);
		free(r);
	}
	free(h->by_id);
	free(h->by_rk);
	free(h->path);
	free(h->tmp_path);
	free(h->dir);
	pthread_cond_destroy(&h->jcond);
	pthread_mutex_destroy(&h->jlock);
	pthread_rwlock_destroy(&h->lock);
	free(h);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int check_args(const struct smux__hints *h, const char *replica,
		      const char *key, struct smux_error *err)
{
	if (!h || !replica || !*replica || !key || !*key)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: missing %s",
				      !h		      ? "journal"
				      : !replica || !*replica ? "replica"
							      : "key");
	return 0;
}

int smux__hints_add(struct smux__hints *h, const char *replica, const char *key,
		    enum smux__hint_kind kind, uint64_t *id,
		    struct smux_error *err)
{
	struct hints_op op = {0};
	struct hint_entry *e, *old;
	struct hint_replica *rep;
	struct jbuf b = {0};
	bool wake = false;
	int rc;

	rc = check_args(h, replica, key, err);
	if (rc)
		return rc;
	if (kind != SMUX__HINT_PUT && kind != SMUX__HINT_DEL &&
	    kind != SMUX__HINT_INTENT)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
				      "hint journal: bad kind %d", (int)kind);

	pthread_rwlock_wrlock(&h->lock);
	rep = hx_get_replica(h, replica);
	e = rep ? hx_entry_new(rep, key, h->next_id, kind, now_ms()) : NULL;
	if (!e) {
		pthread_rwlock_unlock(&h->lock);
		return no_memory(err);
	}
	/* Never reused, even when the append fails: its record may still
	 * reach the disk. */
	h->next_id++;
	old = hx_find_rk(h, rep, key);
	/* The new hint first: a crash inside the append may lose the done
	 * record (both hints then pending), never the new hint alone. */
	op.rec = &b;
	op.lines = old ? 2 : 1;
	op.ndone = old ? 1 : 0;
	if (hj_add_hint(&b, e) != 0 || (old && hj_add_done(&b, old->id) != 0) ||
	    hj_queue(h, &op, true) != 0) {
		pthread_rwlock_unlock(&h->lock);
		hx_entry_free(e);
		free(b.p);
		return no_memory(err);
	}
	pthread_rwlock_unlock(&h->lock);

	rc = hj_wait(h, &op, err);

	pthread_rwlock_wrlock(&h->lock);
	hj_retire(h, &op);
	if (rc) {
		hx_entry_free(e);
	} else {
		if (id)
			*id = e->id;
		/* as loading does: of two hints of one (replica, key)
		 * queued at once, the later one wins */
		old = hx_find_rk(h, rep, key);
		if (old && old->id > e->id) {
			hx_entry_free(e);
		} else {
			if (old)
				hx_entry_unlink(h, old);
			wake = h->npending == 0;
			hx_entry_link(h, e);
		}
	}
	pthread_rwlock_unlock(&h->lock);
	free(b.p);
	if (wake && h->wake)
		h->wake(h->wake_arg);
	if (rc == 0)
		hj_maybe_compact(h, false);
	return rc;
}

/* Records that hint @id is done (fdatasync'ed when @sync) and drops it;
 * caller holds h->lock (write) and releases it. */
static int mark_done_unlock(struct smux__hints *h, uint64_t id, bool sync,
			    struct smux_error *err)
{
	struct hint_entry *e;
	struct jbuf b = {0};
	int rc;

	if (hj_add_done(&b, id) != 0)
		rc = no_memory(err);
	else
		rc = hj_commit(h, &b, 1, 1, sync, err);
	e = rc == 0 ? hx_find_id(h, id) : NULL;
	if (e)
		hx_entry_unlink(h, e);
	pthread_rwlock_unlock(&h->lock);
	free(b.p);
	if (rc == 0)
		hj_maybe_compact(h, false);
	return rc;
}

static int done_id(struct smux__hints *h, uint64_t id, bool sync,
		   struct smux_error *err)
{
	if (!h)
		return check_args(h, NULL, NULL, err);
	pthread_rwlock_wrlock(&h->lock);
	if (!hx_find_id(h, id)) {
		pthread_rwlock_unlock(&h->lock);
		return 0;
	}
	return mark_done_unlock(h, id, sync, err);
}

int smux__hints_done(struct smux__hints *h, uint64_t id, struct smux_error *err)
{
	return done_id(h, id, true, err);
}

int smux__hints_done_lazy(struct smux__hints *h, uint64_t id,
			  struct smux_error *err)
{
	return done_id(h, id, false, err);
}

int smux__hints_supersede(struct smux__hints *h, const char *replica,
			  const char *key, struct smux_error *err)
{
	struct hint_entry *e;
	int rc;

	rc = check_args(h, replica, key, err);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&h->lock);
	e = hx_find_rk(h, hx_find_replica(h, replica), key);
	if (!e) {
		pthread_rwlock_unlock(&h->lock);
		return 0;
	}
	return mark_done_unlock(h, e->id, true, err);
}

unsigned smux__hints_pending(struct smux__hints *h, const char *replica)
{
	struct hint_replica *r;
	unsigned n;

	if (!h)
		return 0;
	pthread_rwlock_rdlock(&h->lock);
	if (replica) {
		r = hx_find_replica(h, replica);
		n = r ? r->pending : 0;
	} else {
		n = h->npending;
	}
	pthread_rwlock_unlock(&h->lock);
	return n;
}

int smux__hints_list(struct smux__hints *h, const char *replica,
		     struct smux__hint **out)
{
	struct hint_replica *r = NULL;
	int rc = 0;

	*out = NULL;
	if (!h)
		return 0;
	pthread_rwlock_rdlock(&h->lock);
	if (replica)
		r = hx_find_replica(h, replica);
	if (!replica || r)
		rc = hx_snapshot(h, r, out);
	pthread_rwlock_unlock(&h->lock);
	return rc;
}

int smux__hints_list_key(struct smux__hints *h, const char *key,
			 struct smux__hint **out)
{
	struct smux__hint *list = NULL;
	unsigned nrep = 0;
	int n = 0;

	*out = NULL;
	if (!h || !key)
		return 0;
	pthread_rwlock_rdlock(&h->lock);
	for (const struct hint_replica *r = h->replicas; r; r = r->next)
		nrep++;
	if (nrep)
		list = calloc(nrep, sizeof(*list));
	for (const struct hint_replica *r = h->replicas; list && r;
	     r = r->next) {
		const struct hint_entry *e = hx_find_rk(h, r, key);

		if (e && hx_copy(&list[n++], e)) {
			smux__hints_free_list(list, n);
			list = NULL;
		}
	}
	pthread_rwlock_unlock(&h->lock);
	if (nrep && !list)
		return -ENOMEM;
	/* oldest first, as smux__hints_list: insertion sort of a few */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && list[j].id < list[j - 1].id; j--) {
			struct smux__hint t = list[j];

			list[j] = list[j - 1];
			list[j - 1] = t;
		}
	if (n == 0) {
		free(list);
		list = NULL;
	}
	*out = list;
	return n;
}

void smux__hints_free_list(struct smux__hint *list, int n)
{
	if (!list)
		return;
	for (int i = 0; i < n; i++) {
		free(list[i].replica);
		free(list[i].key);
	}
	free(list);
}

const char *smux__hints_path(struct smux__hints *h)
{
	return h && h->path ? h->path : "";
}

/* The wait after a hint's first failed replay, and the longest. */
#define HINT_RETRY_FIRST_MS 1000
#define HINT_RETRY_MAX_MS   (INT64_C(5) * 60 * 1000)

void smux__hints_failed(struct smux__hints *h, uint64_t id, int64_t now_ms,
			unsigned gen)
{
	struct hint_entry *e;
	int64_t wait = HINT_RETRY_FIRST_MS;

	if (!h)
		return;
	pthread_rwlock_wrlock(&h->lock);
	e = hx_find_id(h, id);
	if (e) {
		if (e->failures < UINT_MAX)
			e->failures++;
		for (unsigned i = 1;
		     i < e->failures && wait < HINT_RETRY_MAX_MS; i++)
			wait *= 2;
		if (wait > HINT_RETRY_MAX_MS)
			wait = HINT_RETRY_MAX_MS;
		e->retry_at_ms = now_ms + wait;
		e->fail_gen = gen;
	}
	pthread_rwlock_unlock(&h->lock);
}

bool smux__hints_kind(struct smux__hints *h, const char *replica,
		      const char *key, enum smux__hint_kind *kind)
{
	const struct hint_entry *e;

	if (!h || !replica || !key)
		return false;
	pthread_rwlock_rdlock(&h->lock);
	e = hx_find_rk(h, hx_find_replica(h, replica), key);
	if (e)
		*kind = e->kind;
	pthread_rwlock_unlock(&h->lock);
	return e != NULL;
}

bool smux__hints_has(struct smux__hints *h, const char *replica,
		     const char *key)
{
	bool has;

	if (!h || !replica || !key)
		return false;
	pthread_rwlock_rdlock(&h->lock);
	has = hx_find_rk(h, hx_find_replica(h, replica), key) != NULL;
	pthread_rwlock_unlock(&h->lock);
	return has;
}
