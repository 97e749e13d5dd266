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
 * again later gets the number then reported (as a remount would).
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

	/* a kernel node's own id is stable: nothing to keep for it */
	if (!nodeid || !(ino & SMUXFS_INO_FILE_ID))
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
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&t->lock);
}
