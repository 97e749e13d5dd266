/* SPDX-License-Identifier: MIT */
/*
 * listattr.c - the attributes of a listing's entries, asked in parallel.
 *
 * An S3 or Swift listing gives names, sizes and times but not the mode,
 * owner, stored mtime or the symlink marker (they are in each object's
 * metadata), so each entry costs a lookup (a HEAD) that the kernel used
 * to send one after the other, one LOOKUP per name of `ls -l`. Here the
 * daemon looks the entries up itself while it answers the READDIRPLUS,
 * SMUXFS_LISTATTR_PARALLEL at a time, through smuxfs_lookup (the mux
 * root: its deadlines, failover and health hold as for any lookup), so
 * the reply carries the attributes and the kernel sends no LOOKUP for
 * them while its entry timeout lasts; what the lookups found stays in
 * attrcache.c (files) and dircache.c (directories) for attr_timeout, so
 * the lookups that follow (an expired entry, the open of `cat`) cost no
 * request either.
 *
 * Bounded: at most SMUXFS_LISTATTR_MAX entries of one listing are asked
 * (the rest go without attributes: the kernel looks them up as before);
 * the first failure other than "no such key" (a member down, a deadline)
 * stops the rest, so a listing waits for at most one round of failed
 * lookups, not one per entry.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "smux/ctx.h"

struct listattr_run {
	struct smuxfs *fs;
	struct smuxfs_listattr_item *items;
	size_t n;
	atomic_size_t next; /* the next item to take */
	atomic_bool stop;   /* a failure: the rest are left to the kernel */
};

static void *worker(void *arg)
{
	struct listattr_run *r = arg;
	size_t i;

	while (!atomic_load(&r->stop) &&
	       (i = atomic_fetch_add(&r->next, 1)) < r->n) {
		struct smuxfs_listattr_item *it = &r->items[i];
		int rc;

		rc = it->is_dir ? smuxfs_lookup_dir(r->fs, it->key, &it->is_dir,
						    &it->info)
				: smuxfs_lookup(r->fs, it->key, false,
						&it->is_dir, &it->info);
		it->ok = rc == 0;
		if (rc && rc != -ENOENT)
			atomic_store(&r->stop, true);
	}
	return NULL;
}

void smuxfs_listattr_fetch(struct smuxfs *fs,
			   struct smuxfs_listattr_item *items, size_t n)
{
	struct listattr_run r = {.fs = fs, .items = items, .n = n};
	pthread_t tid[SMUXFS_LISTATTR_PARALLEL];
	size_t k = 0, want;

	for (size_t i = 0; i < n; i++)
		items[i].ok = false;
	atomic_init(&r.next, 0);
	atomic_init(&r.stop, false);
	want = n < SMUXFS_LISTATTR_PARALLEL ? n : SMUXFS_LISTATTR_PARALLEL;
	/* this thread is one of the workers; a thread that cannot start
	 * leaves its share to the others */
	while (k + 1 < want && pthread_create(&tid[k], NULL, worker, &r) == 0)
		k++;
	worker(&r);
	for (size_t i = 0; i < k; i++)
		pthread_join(tid[i], NULL);
}

/*
 * Listings waiting for their first lookup. A listing of a directory whose
 * entries lack attributes is noted here (its entries' keys); the first
 * lookup of a name in that directory (the first `lstat` of `ls -l`, the
 * first open of `cat`, rm's first unlink) takes the note and asks every
 * entry's attributes in parallel, so the lookups of the others that
 * follow find them in attrcache.c / dircache.c. A listing nobody looks
 * into (`find -name`, a plain `ls`) costs no HEAD. A note is used once,
 * and only within attr_timeout of its listing.
 */
struct listed {
	char *prefix; /* the directory's key prefix (owned; NULL: free) */
	struct smuxfs_listattr_item *items;
	size_t n;
	int64_t at_ns;
};

static pthread_mutex_t listed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct listed listed[SMUXFS_LISTED_SLOTS];
static unsigned listed_next; /* the slot the next note takes */

static void items_free(struct smuxfs_listattr_item *it, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(it[i].key);
	free(it);
}

static bool listed_has(const struct listed *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->items[i].key, key) == 0)
			return true;
	return false;
}

void smuxfs_listattr_note(struct smuxfs *fs, const char *prefix,
			  struct smuxfs_listattr_item *items, size_t n)
{
	struct listed old = {0};
	char *p = strdup(prefix);
	unsigned i;

	(void)fs;
	if (!p) {
		items_free(items, n);
		return;
	}
	pthread_mutex_lock(&listed_lock);
	/* a newer listing of the same directory replaces its note */
	for (i = 0; i < SMUXFS_LISTED_SLOTS; i++)
		if (listed[i].prefix && strcmp(listed[i].prefix, prefix) == 0)
			break;
	if (i == SMUXFS_LISTED_SLOTS)
		i = listed_next++ % SMUXFS_LISTED_SLOTS;
	old = listed[i];
	listed[i] = (struct listed){
		.prefix = p, .items = items, .n = n, .at_ns = smux_now_ns()};
	pthread_mutex_unlock(&listed_lock);
	free(old.prefix);
	items_free(old.items, old.n);
}

bool smuxfs_listattr_prefetch(struct smuxfs *fs, const char *key)
{
	const char *slash = strrchr(key, '/');
	size_t plen = slash ? (size_t)(slash - key) + 1 : 0;
	int64_t ttl = 0, age;
	struct listed got = {0};

	if (fs->opts && fs->opts->attr_timeout > 0)
		ttl = (int64_t)(fs->opts->attr_timeout * 1e9);
	pthread_mutex_lock(&listed_lock);
	for (unsigned i = 0; i < SMUXFS_LISTED_SLOTS; i++) {
		struct listed *l = &listed[i];

		if (!l->prefix || strlen(l->prefix) != plen ||
		    strncmp(l->prefix, key, plen) != 0)
			continue;
		/* a name the listing did not show (a create's lookup)
		 * leaves the note for the listed ones */
		if (!listed_has(l, key))
			break;
		age = smux_now_ns() - l->at_ns;
		if (age >= 0 && age < ttl)
			got = *l; /* taken: one lookup asks for all */
		else
			items_free(l->items, l->n);
		if (!got.prefix)
			free(l->prefix);
		*l = (struct listed){0};
		break;
	}
	pthread_mutex_unlock(&listed_lock);
	if (!got.prefix)
		return false;
	smuxfs_listattr_fetch(fs, got.items, got.n);
	free(got.prefix);
	items_free(got.items, got.n);
	return true;
}

void smuxfs_listattr_release(void)
{
	pthread_mutex_lock(&listed_lock);
	for (unsigned i = 0; i < SMUXFS_LISTED_SLOTS; i++) {
		free(listed[i].prefix);
		items_free(listed[i].items, listed[i].n);
		listed[i] = (struct listed){0};
	}
	pthread_mutex_unlock(&listed_lock);
}
