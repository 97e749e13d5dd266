/* SPDX-License-Identifier: MIT */
/*
 * inopin.c - one inode number per kernel node for as long as the kernel
 * knows the node: the st_ino a file of a tree with hard links shows is its
 * identity on the member that answered (smux_info.file_id, fnode.c's
 * SMUXFS_INO_FILE_ID), and the replicas of a mirror each have their own.
 * A drain, an outage or a read routed to another replica changed the
 * number under a program's feet: tar, which compares the placeholder it
 * made for a symlink with what it finds at the end of the archive, left
 * an empty file of mode 0000 instead of the link (s41-t1).
 *
 * The channel hook (fnode.c) passes every reply that carries a node's
 * attributes through here: the first file-id number reported for a node
 * is kept, and later replies for that node report it again. The kernel
 * counts the entries it was given for a node (LOOKUP, CREATE, MKNOD,
 * MKDIR, SYMLINK, LINK, READDIRPLUS) and gives them back with FORGET; so
 * does this table, and a node forgotten is dropped. A node looked up
 * again later gets the number then reported (as a remount would). Only
 * where the tree has replicas (a mux of several members): with one copy
 * of each file a number that changes is another file. A rename
 * through the mount drops the pins of the file renamed
 * (smuxfs_inopin_drop): where it was made by a copy (sticky-by-key across
 * shards) the new name is another file, which must not show the number
 * of the one its other names still are.
 *
 * Locks: inopins.lock, a leaf lock.
 */
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"

static unsigned bucket_of(uint64_t nodeid)
{
	return (unsigned)((nodeid * UINT64_C(0x9e3779b97f4a7c15)) >> 40) %
	       SMUXFS_INOPIN_BUCKETS;
}

/* Unlinks @p from its inode number's bucket. Caller holds the lock. */
static void unlink_ino(struct smuxfs_inopins *t, struct smuxfs_inopin *p)
{
	struct smuxfs_inopin **pp = &t->by_ino[bucket_of(p->ino)];

	while (*pp && *pp != p)
		pp = &(*pp)->inext;
	if (*pp)
		*pp = p->inext;
}

void smuxfs_inopin_init(struct smuxfs *fs)
{
	memset(&fs->inopins, 0, sizeof(fs->inopins));
	pthread_mutex_init(&fs->inopins.lock, NULL);
}

void smuxfs_inopin_release(struct smuxfs *fs)
{
	struct smuxfs_inopins *t = &fs->inopins;

	for (unsigned b = 0; b < SMUXFS_INOPIN_BUCKETS; b++) {
		struct smuxfs_inopin *p, *next;

		for (p = t->buckets[b]; p; p = next) {
			next = p->next;
			free(p);
		}
		t->buckets[b] = NULL;
	}
	pthread_mutex_destroy(&t->lock);
}

/* The pin of @nodeid, or NULL. Caller holds the lock. */
static struct smuxfs_inopin *find(struct smuxfs_inopins *t, uint64_t nodeid)
{
	struct smuxfs_inopin *p = t->buckets[bucket_of(nodeid)];

	while (p && p->nodeid != nodeid)
		p = p->next;
	return p;
}

uint64_t smuxfs_inopin_reply(struct smuxfs *fs, uint64_t nodeid, uint64_t ino,
			     bool entry)
{
	struct smuxfs_inopins *t = &fs->inopins;
	struct smuxfs_inopin *p;

	/* a kernel node's own id is stable: nothing to keep for it; nor
	 * where one copy holds each file (one backend, a mux of one
	 * member): its number changes only when the file behind the name
	 * does (replaced behind the mount), and a kept one would then name
	 * two files alike - tar -c made one a hard link of the other */
	if (!nodeid || !(ino & SMUXFS_INO_FILE_ID) ||
	    (smux_backend_caps(fs->root) & SMUX_CAP_ONE_COPY))
		return ino;
	pthread_mutex_lock(&t->lock);
	p = find(t, nodeid);
	if (!p && entry) {
		p = calloc(1, sizeof(*p));
		if (p) { /* else unpinned: the number as reported */
			unsigned b = bucket_of(nodeid);

			p->nodeid = nodeid;
			p->ino = ino;
			p->next = t->buckets[b];
			t->buckets[b] = p;
			b = bucket_of(ino);
			p->inext = t->by_ino[b];
			t->by_ino[b] = p;
		}
	}
	if (p) {
		if (entry)
			p->nlookup++;
		ino = p->ino;
	}
	pthread_mutex_unlock(&t->lock);
	return ino;
}

void smuxfs_inopin_forget(struct smuxfs *fs, uint64_t nodeid, uint64_t nlookup)
{
	struct smuxfs_inopins *t = &fs->inopins;
	struct smuxfs_inopin **pp, *p;

	pthread_mutex_lock(&t->lock);
	for (pp = &t->buckets[bucket_of(nodeid)]; (p = *pp); pp = &p->next) {
		if (p->nodeid != nodeid)
			continue;
		if (p->nlookup > nlookup) {
			p->nlookup -= nlookup;
		} else {
			*pp = p->next;
			unlink_ino(t, p);
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&t->lock);
}

void smuxfs_inopin_drop(struct smuxfs *fs, uint64_t file_id)
{
	struct smuxfs_inopins *t = &fs->inopins;
	uint64_t ino = file_id | SMUXFS_INO_FILE_ID;
	struct smuxfs_inopin **pp, *p;

	if (!file_id)
		return;
	pthread_mutex_lock(&t->lock);
	pp = &t->by_ino[bucket_of(ino)];
	while ((p = *pp)) {
		struct smuxfs_inopin **np;

		if (p->ino != ino) {
			pp = &p->inext;
			continue;
		}
		*pp = p->inext;
		for (np = &t->buckets[bucket_of(p->nodeid)]; *np != p;
		     np = &(*np)->next)
			;
		*np = p->next;
		free(p);
	}
	pthread_mutex_unlock(&t->lock);
}
