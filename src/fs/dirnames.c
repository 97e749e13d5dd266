/* SPDX-License-Identifier: MIT */
/*
 * dirnames.c - the complete lists of names of directories the daemon
 * knows, on object stores (no real directories), so that a lookup of a
 * name that is not there costs no request (issue 10, the untar row: on
 * S3 such a lookup is a HEAD of "a" and of "a/", both 404, and a listing
 * of "a/"; tar -x sends one before each create).
 *
 * A directory's names are known when the daemon made it (mkdir through
 * the mount succeeded: no names) or read its whole listing (ops_dir.c's
 * snapshot, with the files open and not committed yet). What is kept is
 * a superset of the names there are, as far as this mount can tell: a
 * name in the set is looked up as before (it may be gone); only a name
 * outside it is answered "no such name" with no request.
 *
 * Kept a superset through the mount's own changes: every change that can
 * make a name (a create, a commit, mkdir, symlink, mknod, link, the
 * target of a rename: smuxfs_etag_forget and the operations call
 * smuxfs_dirnames_add once the change is done, failed or not) adds it to
 * its directory's set and moves that directory's generation, so a listing
 * that began before the change (and may lack the name) is not installed;
 * a removal that succeeded (unlink, rmdir, the source of a rename) takes
 * its name out (the kernel holds the directory locked across an
 * operation on a name, so no create of the same name runs meanwhile); a
 * directory removed or renamed forgets the sets of its whole tree and
 * moves the epoch (a listing of it in flight is not installed).
 *
 * Only from a whole tree: a mux root's listing is the union of the
 * members that answered (a sticky-by-key shard that is down holds keys
 * no other member lists; a member catching up on hints may lack keys),
 * so a listing or mkdir counts only when every member of the tree is up
 * with no hint pending when it begins and when it is installed, with no
 * member's state changed in between (root_sig: a status change moves
 * its lastTransitionAt). Otherwise lookups ask as before: a stopped
 * shard's key is its error, never "no such file" (test_dirnames_outage).
 *
 * What another client changes is seen at most dir_cache_timeout after
 * the listing (or mkdir) began: a set older than that is dropped and the
 * name asked of the backends again. dir_cache_timeout = 0 turns this
 * off; a mount with a local directory anywhere in its tree (fs->has_file,
 * fs->real_dirs: a failover or shield mux of file backends has no real
 * directories but local ones) never uses it: a lookup there is a stat
 * that also sees what other processes changed at once.
 *
 * Bounded: at most SMUXFS_DIRNAMES_DIRS directories and
 * SMUXFS_DIRNAMES_NAMES names in all; past either the oldest set is
 * forgotten (a forgotten set only costs requests, never a wrong answer).
 *
 * Threads: one lock (c->lock) protects the table, every set in it and
 * the counts; the generations are atomics read without it at the start
 * of a listing and compared under it at the install. No call goes to a
 * backend with the lock held.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "smux/ctx.h"
#include "smux/mux.h"

#define DN_BUCKETS 1024 /* directories by key (chains) */
#define DN_GENS	   256	/* generations by directory key (shared) */
/* a generation no install takes: the tree's listing may be partial */
#define DN_GEN_NONE ULONG_MAX

struct dn_name {
	struct dn_name *next;
	char name[];
};

struct dn_dir {
	struct dn_dir *hnext;	      /* chain of its bucket */
	struct dn_dir *older, *newer; /* install order */
	char *key;		      /* owned */
	int64_t at_ns; /* CLOCK_MONOTONIC when its listing began */
	struct dn_name **b;
	size_t nb, n; /* buckets (a power of two), names */
};

struct smuxfs_dirnames {
	pthread_mutex_t lock; /* protects everything below but the gens */
	atomic_ulong epoch;   /* moved when directories are forgotten */
	/* moved by a name added to a directory of the slot: both only
	 * grow, so their sum is unchanged exactly when neither moved */
	atomic_ulong sgen[DN_GENS];
	struct dn_dir *bucket[DN_BUCKETS];
	struct dn_dir *oldest, *newest;
	size_t dirs, names;	    /* kept now */
	size_t max_dirs, max_names; /* bounds */
};

static uint32_t hash_n(const char *s, size_t n)
{
	return smux_fnv1a(s, n);
}

/* dir_cache_timeout in ns; 0 when off. */
static int64_t ttl_ns(struct smuxfs *fs)
{
	double t;

	if (!fs->dirnames || fs->real_dirs || fs->has_file || !fs->opts)
		return 0;
	t = fs->opts->dir_cache_timeout;
	if (!(t > 0))
		return 0;
	if (t > 86400.0 * 365)
		t = 86400.0 * 365;
	return (int64_t)(t * 1e9);
}

/* The directory part of @key (its length) and its last name (*@name). */
static size_t split(const char *key, const char **name)
{
	const char *slash = strrchr(key, '/');

	*name = slash ? slash + 1 : key;
	return slash ? (size_t)(slash - key) : 0;
}

void smuxfs_dirnames_init(struct smuxfs *fs)
{
	struct smuxfs_dirnames *c = calloc(1, sizeof(*c));

	/* without memory nothing is known: every lookup asks */
	fs->dirnames = c;
	if (!c)
		return;
	pthread_mutex_init(&c->lock, NULL);
	atomic_init(&c->epoch, 0);
	for (unsigned i = 0; i < DN_GENS; i++)
		atomic_init(&c->sgen[i], 0);
	c->max_dirs = SMUXFS_DIRNAMES_DIRS;
	c->max_names = SMUXFS_DIRNAMES_NAMES;
}

static void dir_free(struct dn_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nb; i++) {
		struct dn_name *e = d->b[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(d->b);
	free(d->key);
	free(d);
}

/* Takes @d out of the table and frees it. Caller holds c->lock. */
static void dir_drop(struct smuxfs_dirnames *c, struct dn_dir *d)
{
	struct dn_dir **pp =
		&c->bucket[hash_n(d->key, strlen(d->key)) % DN_BUCKETS];

	while (*pp != d)
		pp = &(*pp)->hnext;
	*pp = d->hnext;
	if (d->older)
		d->older->newer = d->newer;
	if (d->newer)
		d->newer->older = d->older;
	if (c->oldest == d)
		c->oldest = d->newer;
	if (c->newest == d)
		c->newest = d->older;
	c->dirs--;
	c->names -= d->n;
	dir_free(d);
}

void smuxfs_dirnames_release(struct smuxfs *fs)
{
	struct smuxfs_dirnames *c = fs->dirnames;

	if (!c)
		return;
	while (c->oldest)
		dir_drop(c, c->oldest);
	pthread_mutex_destroy(&c->lock);
	free(c);
	fs->dirnames = NULL;
}

/* The fresh set of the directory @key (@n bytes), or NULL; drops it when
 * it is too old. Caller holds c->lock. */
static struct dn_dir *dir_find(struct smuxfs_dirnames *c, const char *key,
			       size_t n, int64_t ttl)
{
	struct dn_dir *d = c->bucket[hash_n(key, n) % DN_BUCKETS];
	int64_t age;

	for (; d; d = d->hnext)
		if (strlen(d->key) == n && memcmp(d->key, key, n) == 0)
			break;
	if (!d)
		return NULL;
	age = smux_now_ns() - d->at_ns;
	if (age >= 0 && age < ttl)
		return d;
	dir_drop(c, d);
	return NULL;
}

static struct dn_name **name_slot(struct dn_dir *d, const char *name)
{
	struct dn_name **pp = &d->b[hash_n(name, strlen(name)) & (d->nb - 1)];

	while (*pp && strcmp((*pp)->name, name) != 0)
		pp = &(*pp)->next;
	return pp;
}

/* Adds @name to @d: 1 added, 0 there already, -ENOMEM. */
static int name_add(struct dn_dir *d, const char *name)
{
	size_t len = strlen(name);
	struct dn_name **pp, *e;

	if (d->n + 1 > d->nb) {
		size_t nb = d->nb ? 2 * d->nb : 16;
		struct dn_name **b = calloc(nb, sizeof(struct dn_name *));

		if (!b)
			return -ENOMEM;
		for (size_t i = 0; i < d->nb; i++) {
			struct dn_name *next;

			for (e = d->b[i]; e; e = next) {
				size_t j = hash_n(e->name, strlen(e->name)) &
					   (nb - 1);

				next = e->next;
				e->next = b[j];
				b[j] = e;
			}
		}
		free(d->b);
		d->b = b;
		d->nb = nb;
	}
	pp = name_slot(d, name);
	if (*pp)
		return 0;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	memcpy(e->name, name, len + 1);
	e->next = NULL;
	*pp = e;
	d->n++;
	return 1;
}

/* Forgets the oldest sets while over a bound. Caller holds c->lock. */
static void trim(struct smuxfs_dirnames *c)
{
	while (c->oldest && (c->dirs > c->max_dirs || c->names > c->max_names))
		dir_drop(c, c->oldest);
}

/*
 * Folds the state of every member of the tree under @s into *@sig (a
 * member's status and last transition, pending hints); false when some
 * member is not up or some hint waits: the tree's listing may then lack
 * keys (a sticky shard that is down holds keys no other member lists).
 */
static bool tree_whole(const struct smux_mux_stats *s, unsigned long *sig)
{
	bool whole = s->pending_hints == 0;

	*sig = *sig * 31 + s->pending_hints;
	for (unsigned i = 0; i < s->n_backends; i++) {
		const struct smux_backend_stats *b = &s->backends[i];

		*sig = *sig * 31 + (unsigned long)b->status;
		*sig = *sig * 31 + (unsigned long)b->last_transition_at;
		if (b->status != SMUX_STATUS_UP)
			whole = false;
		if (b->child && !tree_whole(b->child, sig))
			whole = false;
	}
	return whole;
}

/* The root's signature for a generation (0 for a single backend), or
 * DN_GEN_NONE when its listings may be partial now (tree_whole). */
static unsigned long root_sig(struct smuxfs *fs)
{
	struct smux_mux_stats *s;
	unsigned long sig = 0;
	bool whole;

	if (!smux_is_mux(fs->root))
		return 0;
	s = smux_mux_stats(fs->root);
	if (!s)
		return DN_GEN_NONE;
	whole = tree_whole(s, &sig);
	smux_mux_stats_free(s);
	return whole ? sig % DN_GEN_NONE : DN_GEN_NONE;
}

/* The generation without the root's state. */
static unsigned long gen_of(struct smuxfs_dirnames *c, const char *dir)
{
	return atomic_load(&c->epoch) +
	       atomic_load(&c->sgen[hash_n(dir, strlen(dir)) % DN_GENS]);
}

unsigned long smuxfs_dirnames_gen(struct smuxfs *fs, const char *dir)
{
	struct smuxfs_dirnames *c = fs->dirnames;
	unsigned long sig;

	if (!c)
		return 0;
	sig = root_sig(fs);
	if (sig == DN_GEN_NONE)
		return DN_GEN_NONE;
	return (gen_of(c, dir) + sig) % DN_GEN_NONE;
}

int64_t smuxfs_dirnames_now(void)
{
	return smux_now_ns();
}

void smuxfs_dirnames_install(struct smuxfs *fs, const char *dir,
			     const char *const *names, size_t n,
			     unsigned long gen, int64_t started_ns)
{
	struct smuxfs_dirnames *c = fs->dirnames;
	int64_t ttl = ttl_ns(fs);
	struct dn_dir *d, *old, **head;
	size_t klen = strlen(dir);
	unsigned long sig;

	if (!ttl || gen == DN_GEN_NONE)
		return;
	/* the tree as whole as when the listing began, with no member's
	 * state changed meanwhile (asked before the lock: it takes the
	 * mux's) */
	sig = root_sig(fs);
	if (sig == DN_GEN_NONE)
		return;
	/* built before the lock: a listing may have thousands of names */
	d = calloc(1, sizeof(*d));
	if (!d)
		return;
	d->key = strdup(dir);
	d->at_ns = started_ns;
	if (!d->key)
		goto out_free;
	for (size_t i = 0; i < n; i++)
		if (name_add(d, names[i]) < 0)
			goto out_free;
	pthread_mutex_lock(&c->lock);
	if ((gen_of(c, dir) + sig) % DN_GEN_NONE != gen ||
	    d->n > c->max_names) {
		/* a name was made meanwhile (the listing may lack it), or
		 * more names than all sets may hold */
		pthread_mutex_unlock(&c->lock);
		goto out_free;
	}
	old = dir_find(c, dir, klen, ttl);
	if (old)
		dir_drop(c, old);
	head = &c->bucket[hash_n(dir, klen) % DN_BUCKETS];
	d->hnext = *head;
	*head = d;
	d->older = c->newest;
	if (c->newest)
		c->newest->newer = d;
	else
		c->oldest = d;
	c->newest = d;
	c->dirs++;
	c->names += d->n;
	trim(c);
	pthread_mutex_unlock(&c->lock);
	return;
out_free:
	dir_free(d);
}

/* What name_op does with @key's name in its directory's set. */
enum dn_op {
	DN_ADD, /* made: moves the directory's generation, joins the set */
	DN_DEL, /* removed: leaves the set */
	DN_HAS, /* asked: true when the set is known and lacks it */
};

static bool name_op(struct smuxfs *fs, const char *key, enum dn_op op)
{
	struct smuxfs_dirnames *c = fs->dirnames;
	int64_t ttl = ttl_ns(fs);
	const char *name;
	size_t n = split(key, &name);
	struct dn_name **pp, *e;
	struct dn_dir *d;
	bool absent = false;
	int rc;

	if (!ttl || !name[0])
		return false;
	pthread_mutex_lock(&c->lock);
	if (op == DN_ADD)
		atomic_fetch_add(&c->sgen[hash_n(key, n) % DN_GENS], 1);
	d = dir_find(c, key, n, ttl);
	if (!d)
		goto out_unlock;
	switch (op) {
	case DN_ADD:
		rc = name_add(d, name);
		if (rc < 0)
			dir_drop(c, d); /* unknown is always safe */
		else
			c->names += (size_t)rc;
		trim(c);
		break;
	case DN_DEL:
		pp = d->nb ? name_slot(d, name) : NULL;
		e = pp ? *pp : NULL;
		if (e) {
			*pp = e->next;
			free(e);
			d->n--;
			c->names--;
		}
		break;
	case DN_HAS:
		absent = !d->nb || !*name_slot(d, name);
		break;
	}
out_unlock:
	pthread_mutex_unlock(&c->lock);
	return absent;
}

void smuxfs_dirnames_add(struct smuxfs *fs, const char *key)
{
	name_op(fs, key, DN_ADD);
}

void smuxfs_dirnames_del(struct smuxfs *fs, const char *key)
{
	name_op(fs, key, DN_DEL);
}

bool smuxfs_dirnames_absent(struct smuxfs *fs, const char *key)
{
	const char *slash = strrchr(key, '/');
	const char *name = slash ? slash + 1 : key;

	/* a dot name a listing lacks may be there all the same where a
	 * member's listings hide them (nginx WebDAV): it is asked */
	if (name[0] == '.' &&
	    !(smux_backend_caps(fs->root) & SMUX_CAP_LISTS_DOTNAMES))
		return false;
	/* a name with a control character is asked too: a server may
	 * refuse it (lighttpd answers 400 to a tab), and the lookup's
	 * error then fails the create at its open - known absent, the
	 * create succeeded and only its close, which a shell's `>` does
	 * not check, failed (s44-t2) */
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return name_op(fs, key, DN_HAS);
}

void smuxfs_dirnames_forget(struct smuxfs *fs, const char *dir)
{
	struct smuxfs_dirnames *c = fs->dirnames;
	size_t n = dir ? strlen(dir) : 0;
	struct dn_dir *d, *newer;

	if (!c)
		return;
	atomic_fetch_add(&c->epoch, 1);
	pthread_mutex_lock(&c->lock);
	for (d = c->oldest; d; d = newer) {
		newer = d->newer;
		/* @dir and every directory under it ("" is the root) */
		if (!dir || !n ||
		    (strncmp(d->key, dir, n) == 0 &&
		     (d->key[n] == '\0' || d->key[n] == '/')))
			dir_drop(c, d);
	}
	pthread_mutex_unlock(&c->lock);
}

void smuxfs__dirnames_bounds(struct smuxfs *fs, size_t dirs, size_t names)
{
	struct smuxfs_dirnames *c = fs->dirnames;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->max_dirs = dirs;
	c->max_names = names;
	trim(c);
	pthread_mutex_unlock(&c->lock);
}
