/* SPDX-License-Identifier: MIT */
/*
 * relist.c - a lookup answered by listing its directory again, where a
 * listing gives complete attributes (an s3 or swift backend whose
 * attribute cache knew every file of it: core/attrstore.c).
 *
 * The attributes a listing gave are kept for attr_timeout (attrcache.c),
 * as a HEAD's are. A program that lists a tree first and opens its files
 * later (`find -exec cat {} +`, a backup tool) comes after that: each
 * open's lookup was a HEAD, 2000 of them for 2000 files. Here a
 * directory whose last listing had files complete (at most
 * SMUXFS_RELIST_MAX: one page) is noted with their names; the first
 * lookup (or clean open: ops_io.c) of one of them that misses attrcache.c
 * lists it again - one request, as fresh as a HEAD - and every file of it
 * goes to attrcache.c, so the lookups of its neighbours that follow within
 * attr_timeout cost nothing. A name the
 * new listing does not give complete (changed by another client, gone,
 * new) is then asked with a HEAD as before (which refreshes the
 * backend's cache); a directory whose listing has no complete file, or
 * too many, loses its note.
 *
 * Only a name the last listing showed (as a complete file) is looked up
 * this way: a new name (a create's lookup) is asked with a HEAD as before.
 *
 * One listing at a time per directory: the lookups that miss meanwhile
 * wait for it (the lookups of `cat` come in parallel), and a lookup that
 * finds its name missing from a listing that ended after it began does
 * not list again. Bounded: SMUXFS_RELIST_SLOTS directories, the oldest
 * note replaced. Lock: relist_lock, never held across the listing.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "smux/ctx.h"

struct relist_slot {
	char *prefix; /* owned; NULL: free */
	char **names; /* its files' names, sorted, owned */
	size_t n;
	bool busy;	 /* a listing of it is under way */
	int64_t done_ns; /* when its last listing ended */
};

static pthread_mutex_t relist_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t relist_cond = PTHREAD_COND_INITIALIZER;
static struct relist_slot slots[SMUXFS_RELIST_SLOTS];
static unsigned relist_next; /* the slot the next note takes */

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

static void slot_clear(struct relist_slot *s)
{
	free(s->prefix);
	names_free(s->names, s->n);
	*s = (struct relist_slot){0};
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A sorted copy of @names (@n, at least 1); NULL without memory. */
static char **names_copy(const char *const *names, size_t n)
{
	char **c = calloc(n, sizeof(*c));

	for (size_t i = 0; c && i < n; i++) {
		c[i] = strdup(names[i]);
		if (!c[i]) {
			names_free(c, i);
			return NULL;
		}
	}
	if (c)
		qsort(c, n, sizeof(*c), name_cmp);
	return c;
}

static bool slot_has(const struct relist_slot *s, const char *name)
{
	return bsearch(&name, s->names, s->n, sizeof(*s->names), name_cmp);
}

/* The slot of @prefix (@plen bytes); relist_lock held. */
static struct relist_slot *find(const char *prefix, size_t plen)
{
	for (unsigned i = 0; i < SMUXFS_RELIST_SLOTS; i++)
		if (slots[i].prefix && strlen(slots[i].prefix) == plen &&
		    memcmp(slots[i].prefix, prefix, plen) == 0)
			return &slots[i];
	return NULL;
}

void smuxfs_relist_note(const char *prefix, const char *const *names, size_t n)
{
	struct relist_slot *s;
	char *p = NULL, **c = NULL;

	if (n && (!(p = strdup(prefix)) || !(c = names_copy(names, n)))) {
		free(p);
		p = NULL;
		n = 0; /* without memory: as not complete */
	}
	pthread_mutex_lock(&relist_lock);
	s = find(prefix, strlen(prefix));
	if (!s && n) {
		s = &slots[relist_next++ % SMUXFS_RELIST_SLOTS];
		if (s->busy)
			s = NULL; /* in use: the note is left out */
	}
	if (s && !s->busy) {
		/* the newest listing says it; no complete file: no more */
		slot_clear(s);
		if (n) {
			s->prefix = p; /* taken */
			s->names = c;
			s->n = n;
			p = NULL;
			c = NULL;
		}
	}
	pthread_mutex_unlock(&relist_lock);
	free(p);
	names_free(c, c ? n : 0);
}

struct relister {
	struct smuxfs *fs;
	const char *prefix;
	size_t plen;
	unsigned long epoch;
	int64_t t0;
	bool complete; /* every file of it came complete */
	char **names;  /* the files' names (owned), n of cap */
	size_t n, cap;
};

static int relist_entry(void *arg, const struct smux_list_entry *e)
{
	struct relister *r = arg;
	size_t len = strlen(e->key);

	if (e->is_prefix || len <= r->plen || e->key[len - 1] == '/' ||
	    strncmp(e->key, r->prefix, r->plen) != 0 || S_ISDIR(e->info.mode))
		return 0;
	if (!(e->info.mode & S_IFMT))
		return 0; /* not known here: its lookup heads */
	if (smuxfs_delq_has(r->fs, e->key))
		return 0; /* unlinked, its delete queued (delq.c) */
	if (r->n == SMUXFS_RELIST_MAX) {
		r->complete = false;
		return 1; /* too large: the directory loses its note */
	}
	smuxfs_attrcache_put_listed(r->fs, e->key, &e->info, r->epoch, r->t0);
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 64;
		char **g = realloc(r->names, cap * sizeof(*g));

		if (!g) {
			r->complete = false;
			return 1;
		}
		r->names = g;
		r->cap = cap;
	}
	r->names[r->n] = strdup(e->key + r->plen);
	if (!r->names[r->n]) {
		r->complete = false;
		return 1;
	}
	r->n++;
	return 0;
}

bool smuxfs_relist(struct smuxfs *fs, const char *key)
{
	const char *slash = strrchr(key, '/');
	size_t plen = slash ? (size_t)(slash - key) + 1 : 0;
	struct relister r = {.fs = fs, .plen = plen, .complete = true};
	struct relist_slot *s;
	struct smux_error err;
	struct smux_ctx ctx;
	int64_t began = smux_now_ns();
	char *prefix;
	int rc;

	if (!smuxfs_attrcache_on(fs))
		return false; /* nothing it lists would be kept */
	pthread_mutex_lock(&relist_lock);
	s = find(key, plen);
	while (s && s->busy) {
		pthread_cond_wait(&relist_cond, &relist_lock);
		s = find(key, plen);
	}
	/* not a file it showed; or listed since this lookup began: that
	 * answer stands */
	if (!s || !slot_has(s, key + plen) || s->done_ns >= began ||
	    !(prefix = strdup(s->prefix))) {
		bool listed = s && s->done_ns >= began;

		pthread_mutex_unlock(&relist_lock);
		return listed;
	}
	s->busy = true;
	pthread_mutex_unlock(&relist_lock);

	r.prefix = prefix;
	r.epoch = smuxfs_attrcache_epoch(fs);
	r.t0 = smuxfs_dircache_now();
	smuxfs_ctx(&ctx);
	rc = smux_backend_list(fs->root, &ctx, prefix, "/", relist_entry, &r,
			       &err);

	if (r.complete && r.n)
		qsort(r.names, r.n, sizeof(*r.names), name_cmp);
	pthread_mutex_lock(&relist_lock);
	s = find(prefix, plen);
	if (s) {
		s->busy = false;
		s->done_ns = smux_now_ns();
		names_free(s->names, s->n);
		s->names = NULL;
		s->n = 0;
		if (rc || !r.complete || !r.n) {
			slot_clear(s);
		} else {
			s->names = r.names; /* taken */
			s->n = r.n;
			r.names = NULL;
		}
	}
	pthread_cond_broadcast(&relist_cond);
	pthread_mutex_unlock(&relist_lock);
	names_free(r.names, r.n);
	free(prefix);
	return rc == 0;
}

void smuxfs_relist_release(void)
{
	pthread_mutex_lock(&relist_lock);
	for (unsigned i = 0; i < SMUXFS_RELIST_SLOTS; i++) {
		if (!slots[i].busy)
			slot_clear(&slots[i]);
	}
	pthread_mutex_unlock(&relist_lock);
}
