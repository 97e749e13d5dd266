/* SPDX-License-Identifier: MIT */
/*
 * attrcache.c - the attributes of files (and symlinks, FIFOs: every
 * object that is not a directory) the daemon headed, kept for
 * attr_timeout on object stores, so that the lookups that follow a
 * listing (`ls -l` with the kernel's entries expired, `cat` of each
 * listed file: LOOKUP, then open) cost no request (issue 10, item 4).
 * A listing fills it with HEADs sent in parallel (listattr.c), or with
 * its own entries where the backend knew their attributes (the s3 and
 * swift attribute cache, core/attrstore.c; ops_dir.c); every lookup of
 * a file puts what its HEAD answered.
 *
 * Exact for this mount: every change made through it moves, once it is
 * done, the generation of the key it changed (smuxfs_etag_forget: a
 * commit, unlink, link, mkdir, symlink, mknod, setattr, each name of a
 * rename; smuxfs_dircache_changed) or, for a change of many keys at once
 * (a rename: a directory's files move with it; a failed commit or
 * setattr, which may have reached a member; any change where files have
 * several names), the generation of all. An entry is given only while
 * its key's generation is the one read before its HEAD was sent, so a
 * HEAD that overlapped a change never serves. Keys of one slot share a
 * generation (a change forgets its neighbours too: safe). Files open
 * through the mount never get here (smuxfs_lookup answers them from their
 * ofile first).
 *
 * What another client changes is seen at most attr_timeout late (size,
 * mode, owner, mtime, existence, and the version a clean open pins: its
 * reads then find the version changed and re-pin, ops_io.c): the same
 * bound the kernel's own attribute cache has. attr_timeout = 0 turns it
 * off; a mount with a local directory anywhere in its tree does not use
 * it (its listings carry the attributes, and its readers keep the file
 * open: a file open for reading still reads after its name is removed,
 * which a version pinned from here would not).
 *
 * Direct-mapped and bounded (SMUXFS_ATTRCACHE_SLOTS): a collision
 * forgets the older entry.
 */
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "smux/ctx.h"
#include "smux/mux.h"

struct smuxfs_attrcache {
	pthread_mutex_t lock; /* protects slots[] */
	atomic_ulong gen;     /* moved by a change of many keys (a rename) */
	atomic_ulong epoch;   /* moved by every change, before its gen */
	/* moved by a change of a key of the slot: both only grow, so their
	 * sum is unchanged exactly when neither moved */
	atomic_ulong sgen[SMUXFS_ATTRCACHE_SLOTS];
	struct {
		char *key; /* owned; NULL = empty slot */
		struct smux_info info;
		int64_t at_ns;	   /* CLOCK_MONOTONIC when its head began */
		unsigned long gen; /* gen when its head began */
	} slots[SMUXFS_ATTRCACHE_SLOTS];
};

static unsigned slot_of(const char *key)
{
	return smux_fnv1a(key, strlen(key)) % SMUXFS_ATTRCACHE_SLOTS;
}

/* attr_timeout in ns; 0 when the cache is off. */
static int64_t ttl_ns(struct smuxfs *fs)
{
	double t;

	if (!fs->attrcache || fs->real_dirs || fs->has_file || !fs->opts)
		return 0;
	t = fs->opts->attr_timeout;
	if (!(t > 0))
		return 0;
	if (t > 3600)
		t = 3600;
	return (int64_t)(t * 1e9);
}

bool smuxfs_attrcache_on(struct smuxfs *fs)
{
	return ttl_ns(fs) != 0;
}

void smuxfs_attrcache_init(struct smuxfs *fs)
{
	struct smuxfs_attrcache *c = calloc(1, sizeof(*c));

	/* without memory there is no cache: every lookup heads */
	fs->attrcache = c;
	if (!c)
		return;
	pthread_mutex_init(&c->lock, NULL);
	atomic_init(&c->gen, 0);
	atomic_init(&c->epoch, 0);
	for (unsigned i = 0; i < SMUXFS_ATTRCACHE_SLOTS; i++)
		atomic_init(&c->sgen[i], 0);
}

void smuxfs_attrcache_release(struct smuxfs *fs)
{
	struct smuxfs_attrcache *c = fs->attrcache;

	smuxfs_listattr_release();
	smuxfs_relist_release();
	if (!c)
		return;
	for (unsigned i = 0; i < SMUXFS_ATTRCACHE_SLOTS; i++)
		free(c->slots[i].key);
	pthread_mutex_destroy(&c->lock);
	free(c);
	fs->attrcache = NULL;
}

unsigned long smuxfs_attrcache_gen(struct smuxfs *fs, const char *key)
{
	struct smuxfs_attrcache *c = fs->attrcache;

	return c ? atomic_load(&c->gen) + atomic_load(&c->sgen[slot_of(key)])
		 : 0;
}

unsigned long smuxfs_attrcache_epoch(struct smuxfs *fs)
{
	return fs->attrcache ? atomic_load(&fs->attrcache->epoch) : 0;
}

void smuxfs_attrcache_changed(struct smuxfs *fs)
{
	if (!fs->attrcache)
		return;
	atomic_fetch_add(&fs->attrcache->epoch, 1);
	atomic_fetch_add(&fs->attrcache->gen, 1);
}

void smuxfs_attrcache_forget(struct smuxfs *fs, const char *key)
{
	struct smuxfs_attrcache *c = fs->attrcache;

	if (!c)
		return;
	atomic_fetch_add(&c->epoch, 1);
	/* every name of a file of several names changes with it */
	if (!key || (smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK))
		atomic_fetch_add(&c->gen, 1);
	else
		atomic_fetch_add(&c->sgen[slot_of(key)], 1);
}

bool smuxfs_attrcache_get(struct smuxfs *fs, const char *key,
			  struct smux_info *info)
{
	struct smuxfs_attrcache *c = fs->attrcache;
	int64_t ttl = ttl_ns(fs), age;
	unsigned i;
	bool hit = false;

	if (!ttl)
		return false;
	i = slot_of(key);
	pthread_mutex_lock(&c->lock);
	if (c->slots[i].key && strcmp(c->slots[i].key, key) == 0 &&
	    c->slots[i].gen == smuxfs_attrcache_gen(fs, key)) {
		age = smux_now_ns() - c->slots[i].at_ns;
		hit = age >= 0 && age < ttl;
		if (hit)
			*info = c->slots[i].info;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void smuxfs_attrcache_put(struct smuxfs *fs, const char *key,
			  const struct smux_info *info, unsigned long gen,
			  int64_t started_ns)
{
	struct smuxfs_attrcache *c = fs->attrcache;
	unsigned i;
	char *copy;

	if (!ttl_ns(fs) || S_ISDIR(info->mode) ||
	    gen != smuxfs_attrcache_gen(fs, key))
		return;
	copy = strdup(key);
	if (!copy)
		return;
	i = slot_of(key);
	pthread_mutex_lock(&c->lock);
	free(c->slots[i].key);
	c->slots[i].key = copy;
	c->slots[i].info = *info;
	c->slots[i].at_ns = started_ns;
	c->slots[i].gen = gen;
	pthread_mutex_unlock(&c->lock);
}

void smuxfs_attrcache_put_listed(struct smuxfs *fs, const char *key,
				 const struct smux_info *info,
				 unsigned long epoch, int64_t started_ns)
{
	/* the key's gen is read before the epoch is checked again: a
	 * change moves the epoch before the gens, so an unchanged epoch
	 * says the gen read is the one of before the listing */
	unsigned long gen = smuxfs_attrcache_gen(fs, key);

	if (smuxfs_attrcache_epoch(fs) == epoch)
		smuxfs_attrcache_put(fs, key, info, gen, started_ns);
}

/*
 * Whether every get of the root for one key goes to one member while that
 * member is up (failover, shield, sticky-by-key over plain backends): a
 * version pinned by its etag then reads where it was seen. Round-robin,
 * weighted and mirror spread the gets over members whose etags for the
 * same content may differ (a multipart upload, another server kind).
 */
static bool gets_stay(struct smuxfs *fs)
{
	struct smux_mux_stats *st;
	bool ok;

	if (!smux_is_mux(fs->root))
		return true;
	st = smux_mux_stats(fs->root);
	if (!st)
		return false;
	ok = st->mode == SMUX_MODE_FAILOVER || st->mode == SMUX_MODE_SHIELD ||
	     st->mode == SMUX_MODE_STICKY;
	for (unsigned i = 0; ok && i < st->n_backends; i++) {
		struct smux_backend *m =
			smux_mux_member(fs->root, st->backends[i].name);

		ok = m && !smux_is_mux(m);
		smux_backend_unref(m);
	}
	smux_mux_stats_free(st);
	return ok;
}

bool smuxfs_attrcache_pin(struct smuxfs *fs, const char *key,
			  struct smux_info *info)
{
	if (!smuxfs_attrcache_get(fs, key, info) || !info->etag[0] ||
	    !S_ISREG(info->mode ? info->mode : S_IFREG))
		return false;
	return gets_stay(fs);
}

bool smuxfs_attrcache_pins(struct smuxfs *fs)
{
	return smuxfs_attrcache_on(fs) && gets_stay(fs);
}
