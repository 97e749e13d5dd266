/* SPDX-License-Identifier: MIT */
/*
 * told.c - the inode number the kernel holds for a node: what the last
 * reply with the node's attributes said (GETATTR, SETATTR, LOOKUP,
 * CREATE, READDIRPLUS), while the kernel may still answer stat(2) and
 * fstat(2) from it (its attribute validity).
 *
 * Why: where the tree keeps copies of a file, its st_ino is the identity
 * of the replica that answered (fill_stat), and an open file keeps the
 * number it shows first for as long as it is open (smuxfs_pin_ino). A
 * file opened right after that replica was drained took the other
 * replica's number, while the kernel still held the drained one's from
 * a stat made a moment before: fstat at the open said one number, the
 * next stat of the path (the cache expired) the other, and sqlite took
 * its database for moved ("attempt to write a readonly database" at
 * every insert, s45-t3). The open now keeps the number the kernel holds.
 *
 * A direct-mapped table of TOLD_SLOTS entries by node id, under one lock
 * (a few stores per reply, next to the reply's own write(2)); an entry a
 * collision overwrote only makes an open take the number the replica
 * gives, as before. One mount per daemon: the table is the process's.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "fs/fs.h"

#define TOLD_SLOTS 8192 /* a power of two */

/* A told number outlives the kernel's copy by this much: the kernel
 * starts its validity when it takes the reply, after our write(2). An
 * entry kept longer costs nothing: it is still the last number the
 * kernel was given for the node. */
#define TOLD_MARGIN_NS 1000000000LL

static struct {
	uint64_t nodeid;
	int64_t noted_ns; /* smux_now_ns() it was noted (its reply sent) */
	uint64_t ino;	  /* as told: SMUXFS_INO_FILE_ID set, or 0: none */
	int64_t until_ns; /* smux_now_ns() the kernel's copy expires */
} told[TOLD_SLOTS];
static pthread_mutex_t told_lock = PTHREAD_MUTEX_INITIALIZER;
/* a number with SMUXFS_INO_FILE_ID was noted once: until then (a tree
 * without hard links never shows one) a reply costs no lock */
static atomic_bool told_used;

static unsigned slot_of(uint64_t nodeid)
{
	/* Fibonacci hashing: node ids are sequential */
	return (unsigned)((nodeid * UINT64_C(0x9E3779B97F4A7C15)) >> 51) &
	       (TOLD_SLOTS - 1);
}

void smuxfs_told_note(uint64_t nodeid, int64_t asked_ns, uint64_t ino,
		      uint64_t valid_s, uint32_t valid_ns)
{
	unsigned i = slot_of(nodeid);
	int64_t now, until;

	if (!nodeid)
		return;
	if (ino & SMUXFS_INO_FILE_ID)
		atomic_store_explicit(&told_used, true, memory_order_relaxed);
	else if (!atomic_load_explicit(&told_used, memory_order_relaxed))
		return;
	now = smux_now_ns();
	/* a validity beyond a day is "for good" here */
	until = valid_s > 86400 ? INT64_MAX
				: now + (int64_t)valid_s * 1000000000LL +
					  (int64_t)valid_ns + TOLD_MARGIN_NS;
	pthread_mutex_lock(&told_lock);
	/* the kernel drops a reply to a request sent before the node's
	 * attributes last changed (its attr_version check): one asked
	 * before the reply noted last was sent is not what it holds */
	if (told[i].nodeid == nodeid && asked_ns < told[i].noted_ns) {
		pthread_mutex_unlock(&told_lock);
		return;
	}
	if (ino & SMUXFS_INO_FILE_ID) {
		told[i].nodeid = nodeid;
		told[i].noted_ns = now;
		told[i].ino = ino;
		told[i].until_ns = until;
	} else if (told[i].nodeid == nodeid) {
		told[i].noted_ns = now;
		told[i].ino = 0; /* the node's own id now */
	}
	pthread_mutex_unlock(&told_lock);
}

uint64_t smuxfs_told_id(uint64_t nodeid)
{
	unsigned i = slot_of(nodeid);
	uint64_t id = 0;

	if (!nodeid)
		return 0;
	pthread_mutex_lock(&told_lock);
	if (told[i].nodeid == nodeid && told[i].ino &&
	    told[i].until_ns > smux_now_ns())
		id = told[i].ino & ~SMUXFS_INO_FILE_ID;
	pthread_mutex_unlock(&told_lock);
	return id;
}
