/* SPDX-License-Identifier: MIT */
/*
 * inomap.c - one st_ino per file, whichever replica answers.
 *
 * Where the tree keeps copies of a file and has hard links, a file's
 * st_ino is its identity on the replica that answered (fill_stat). A
 * drain or an outage moves the answering replica, and the number of an
 * unchanged file changed with it: git's local clone died "hardlink
 * different from source" (its lstat of the object before the link and
 * the one of the new name after it were answered by two replicas), and
 * tar -x left symlinks as the empty placeholder files it makes first (it
 * swaps a placeholder for its link only while the placeholder's number
 * is unchanged).
 *
 * So the number a key last showed is kept (last[]). When a stat of the
 * key answers with another identity, and that is the same file on
 * another replica - the identity shown is still the key's on a member
 * that can be asked, or no member can say otherwise, the one that gave
 * it being out (smux_mux_key_has_id) -, the new identity becomes an
 * alias of the number shown (alias[]), and every answer that names it
 * shows that number: the file's other names (hard links), listings and
 * open files (smuxfs_ino_alias, in fill_stat). A file replaced behind
 * the mount (every member that can be asked holds another one there)
 * shows its own number, as before. A name deleted or renamed through the
 * mount drops or moves its entry (smuxfs_ino_moved), so a file made
 * there next starts with its own number and asks no member.
 *
 * Two direct-mapped tables of INOMAP_SLOTS entries each, made at the
 * first use (a tree of one copy, or without hard links, never makes
 * them), under one mutex; a stat whose answer is the key's last costs a
 * lookup. A collision loses an entry: that file's number may change as
 * it did before. One mount per daemon: the tables are the process's.
 *
 * Limit: an alias outlives the replica file it names. A replica whose
 * file system gives the freed inode to a new file (ext4 does) makes that
 * file show the aliased number too, while the first file shows it from
 * another replica (a replay that replaced the copy); only after the
 * answering replica moved, and until the entry is overwritten.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fs/fs.h"

#define INOMAP_SLOTS 32768 /* a power of two, per table */

struct last_slot {
	uint64_t hash;	/* the key's (0: empty) */
	uint64_t id;	/* the identity its last stat answered */
	uint64_t shown; /* what it showed */
};

struct alias_slot {
	uint64_t id;	/* a replica's identity of a file (0: empty) */
	uint64_t shown; /* the number that file shows */
};

static struct last_slot *last;
static struct alias_slot *alias;
static atomic_bool ready; /* the tables exist */
static pthread_mutex_t inomap_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a of @key, never 0 */
static uint64_t key_hash(const char *key)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * UINT64_C(0x100000001b3);
	return h ? h : 1;
}

static struct last_slot *last_of(uint64_t hash)
{
	return &last[hash & (INOMAP_SLOTS - 1)];
}

static struct alias_slot *alias_of(uint64_t id)
{
	/* identities are mixed already (file_path.c); Fibonacci hashing
	 * spreads those a backend numbers in sequence */
	return &alias[(id * UINT64_C(0x9E3779B97F4A7C15)) >> 49 &
		      (INOMAP_SLOTS - 1)];
}

/* Whether the tree shows file identities (fill_stat) and keeps copies. */
static bool wanted(struct smuxfs *fs)
{
	return smuxfs_pin_ino(fs) &&
	       (smux_backend_caps(fs->root) & SMUX_CAP_HARDLINK);
}

/* Makes the tables: true when they exist. */
static bool tables(void)
{
	if (atomic_load_explicit(&ready, memory_order_acquire))
		return true;
	pthread_mutex_lock(&inomap_lock);
	if (!last)
		last = calloc(INOMAP_SLOTS, sizeof(*last));
	if (!alias)
		alias = calloc(INOMAP_SLOTS, sizeof(*alias));
	if (last && alias)
		atomic_store_explicit(&ready, true, memory_order_release);
	pthread_mutex_unlock(&inomap_lock);
	return last && alias;
}

uint64_t smuxfs_ino_alias(uint64_t id)
{
	struct alias_slot *a;
	uint64_t shown = id;

	id &= ~SMUXFS_INO_FILE_ID;
	if (!id || !atomic_load_explicit(&ready, memory_order_acquire))
		return shown;
	pthread_mutex_lock(&inomap_lock);
	a = alias_of(id);
	if (a->id == id)
		shown = a->shown;
	pthread_mutex_unlock(&inomap_lock);
	return shown;
}

uint64_t smuxfs_ino_learn(struct smuxfs *fs, const char *key, uint64_t id)
{
	uint64_t h, was_id = 0, was_shown = 0, shown = 0;
	struct alias_slot *a;
	struct last_slot *l;

	id &= ~SMUXFS_INO_FILE_ID;
	if (!id || !wanted(fs) || !tables())
		return id;
	h = key_hash(key);
	pthread_mutex_lock(&inomap_lock);
	l = last_of(h);
	/* the answer the key gave last, or the number it showed (the
	 * replica that gave it answers again) */
	if (l->hash == h && (l->id == id || l->shown == id)) {
		shown = l->shown;
		if (l->id != id)
			l->id = id;
		pthread_mutex_unlock(&inomap_lock);
		return shown;
	}
	if (l->hash == h) {
		was_id = l->id;
		was_shown = l->shown;
	}
	a = alias_of(id);
	if (a->id == id)
		shown = a->shown;
	pthread_mutex_unlock(&inomap_lock);
	/* another identity than the key showed: the same file on another
	 * replica, or another file (asks the members, at most once per
	 * file and move of the answering replica) */
	if (!shown && was_id) {
		struct smux_ctx ctx;

		smuxfs_ctx(&ctx);
		if (smux_mux_key_has_id(fs->root, &ctx, key, was_id,
					~SMUXFS_INO_FILE_ID) != 0)
			shown = was_shown;
	}
	if (!shown)
		shown = id;
	pthread_mutex_lock(&inomap_lock);
	if (shown != id) {
		a = alias_of(id);
		*a = (struct alias_slot){id, shown};
	}
	*last_of(h) = (struct last_slot){h, id, shown};
	pthread_mutex_unlock(&inomap_lock);
	return shown;
}

void smuxfs_ino_shows(struct smuxfs *fs, const char *key, uint64_t id,
		      uint64_t shown)
{
	uint64_t h;

	id &= ~SMUXFS_INO_FILE_ID;
	shown &= ~SMUXFS_INO_FILE_ID;
	if (!id || !shown || !wanted(fs) || !tables())
		return;
	h = key_hash(key);
	pthread_mutex_lock(&inomap_lock);
	if (shown != id)
		*alias_of(id) = (struct alias_slot){id, shown};
	*last_of(h) = (struct last_slot){h, id, shown};
	pthread_mutex_unlock(&inomap_lock);
}

void smuxfs_ino_moved(const char *from, const char *to)
{
	uint64_t hf, ht;
	struct last_slot *l, keep = {0};

	if (!atomic_load_explicit(&ready, memory_order_acquire))
		return;
	hf = key_hash(from);
	ht = to ? key_hash(to) : 0;
	pthread_mutex_lock(&inomap_lock);
	l = last_of(hf);
	if (l->hash == hf) {
		keep = *l;
		*l = (struct last_slot){0};
	}
	if (to) {
		l = last_of(ht);
		/* what @to showed was another file's */
		if (keep.hash)
			*l = (struct last_slot){ht, keep.id, keep.shown};
		else if (l->hash == ht)
			*l = (struct last_slot){0};
	}
	pthread_mutex_unlock(&inomap_lock);
}
