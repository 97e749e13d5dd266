/* SPDX-License-Identifier: MIT */
/*
 * dircache.c - the attributes of directories the daemon looked up, kept
 * for attr_timeout on object stores (no real directories), so that the
 * lookups of a path's directories (each a HEAD of "a" answered 404, then
 * the marker "a/" or a listing) and the parent lookup of every create do
 * not go to the backends again and again (issue 10, item 4).
 *
 * Exact for this mount: every change made through it that can change a
 * directory's attributes or existence (mkdir, rmdir, unlink: the last key
 * of an implied directory, rename, a directory's setattr) calls
 * smuxfs_dircache_changed once the change is done: it drops the entries
 * of the key, of its descendants (a directory renamed or removed) and,
 * for a removal, of its ancestors (implied directories it may have
 * emptied), and moves the
 * generation, so a lookup that began before the change (and may have seen
 * the old state) does not put what it found. What another
 * client changes is seen at most attr_timeout late: the kernel's own
 * attribute cache has the same bound. attr_timeout = 0 turns it off; a
 * mount with real directories (file backends) does not use it.
 *
 * Direct-mapped and bounded: a collision forgets the older entry.
 */
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "smux/ctx.h"
#include "smux/mux.h"

static unsigned slot_of(const char *key)
{
	return smux_fnv1a(key, strlen(key)) % SMUXFS_DIRCACHE_SLOTS;
}

/* attr_timeout in ns; 0 when the cache is off. */
static int64_t ttl_ns(struct smuxfs *fs)
{
	double t;

	if (fs->real_dirs || !fs->opts)
		return 0;
	t = fs->opts->attr_timeout;
	if (!(t > 0))
		return 0;
	if (t > 3600)
		t = 3600;
	return (int64_t)(t * 1e9);
}

void smuxfs_dircache_init(struct smuxfs *fs)
{
	memset(&fs->dircache, 0, sizeof(fs->dircache));
	pthread_mutex_init(&fs->dircache.lock, NULL);
	atomic_init(&fs->dircache.gen, 0);
}

void smuxfs_dircache_release(struct smuxfs *fs)
{
	for (unsigned i = 0; i < SMUXFS_DIRCACHE_SLOTS; i++)
		free(fs->dircache.slots[i].key);
	pthread_mutex_destroy(&fs->dircache.lock);
}

unsigned long smuxfs_dircache_gen(struct smuxfs *fs)
{
	return atomic_load(&fs->dircache.gen);
}

/* Whether the entry @e is @key, below it ("key/..."), or with @up above
 * it (@key is "e/..."). */
static bool related(const char *e, const char *key, bool up)
{
	size_t ne = strlen(e), nk = strlen(key), n = ne < nk ? ne : nk;

	if (strncmp(e, key, n) != 0)
		return false;
	if (ne == nk)
		return true;
	if (ne > nk)
		return e[n] == '/';
	return up && key[n] == '/';
}

void smuxfs_dircache_changed(struct smuxfs *fs, const char *key, bool up)
{
	struct smuxfs_dircache *c = &fs->dircache;

	atomic_fetch_add(&c->gen, 1);
	smuxfs_attrcache_forget(fs, key); /* after a rename too: attrcache.c */
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < SMUXFS_DIRCACHE_SLOTS; i++) {
		if (c->slots[i].key &&
		    (!key || related(c->slots[i].key, key, up))) {
			free(c->slots[i].key);
			c->slots[i].key = NULL;
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void smuxfs_dircache_parent_changed(struct smuxfs *fs, const char *key)
{
	struct smuxfs_dircache *c = &fs->dircache;
	const char *slash = strrchr(key, '/');
	size_t n = slash ? (size_t)(slash - key) : 0;
	/* direct-mapped: the directory can only be in its own slot */
	unsigned i = smux_fnv1a(key, n) % SMUXFS_DIRCACHE_SLOTS;

	if (!n || !fs->dir_mtimes)
		return; /* in the root: its attributes are not kept here; an
			   object store's directories do not move */
	atomic_fetch_add(&c->gen, 1);
	pthread_mutex_lock(&c->lock);
	if (c->slots[i].key && strlen(c->slots[i].key) == n &&
	    strncmp(c->slots[i].key, key, n) == 0) {
		free(c->slots[i].key);
		c->slots[i].key = NULL;
	}
	pthread_mutex_unlock(&c->lock);
}

bool smuxfs_dircache_get(struct smuxfs *fs, const char *key,
			 struct smux_info *info)
{
	struct smuxfs_dircache *c = &fs->dircache;
	int64_t ttl = ttl_ns(fs), age;
	unsigned i = slot_of(key);
	bool hit = false;

	if (!ttl)
		return false;
	pthread_mutex_lock(&c->lock);
	if (c->slots[i].key && strcmp(c->slots[i].key, key) == 0) {
		age = smux_now_ns() - c->slots[i].at_ns;
		hit = age >= 0 && age < ttl;
		if (hit)
			*info = c->slots[i].info;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void smuxfs_dircache_put(struct smuxfs *fs, const char *key,
			 const struct smux_info *info, unsigned long gen,
			 int64_t started_ns)
{
	struct smuxfs_dircache *c = &fs->dircache;
	unsigned i = slot_of(key);
	char *copy;

	if (!ttl_ns(fs) || gen != atomic_load(&c->gen))
		return;
	copy = strdup(key);
	if (!copy)
		return;
	pthread_mutex_lock(&c->lock);
	free(c->slots[i].key);
	c->slots[i].key = copy;
	c->slots[i].info = *info;
	c->slots[i].at_ns = started_ns;
	c->slots[i].gen = gen;
	pthread_mutex_unlock(&c->lock);
}

int64_t smuxfs_dircache_now(void)
{
	return smux_now_ns();
}
