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
 * key answers with another identity and that is the same file on another
 * replica, the key keeps showing its number. "The same file": the
 * identity shown is still the key's on a member that can be asked, or
 * the first member asked cannot be (out, behind on the key: in a drain,
 * the one that gave the number) - smux_mux_key_has_id; then the key is
 * checked against that identity again at its next stat, so a file
 * replaced behind the mount meanwhile is told apart once that member
 * answers. An open file shows its name's number (ofile.c), which a
 * truncating open starts again (it may replace the file everywhere).
 *
 * A kept number is another identity's: the replica that gave it may free
 * it and give it to another file (ext4 reuses inodes; a replay replaced
 * the copy there). A key that shows its own identity therefore takes
 * the number from a key that keeps it (kept[]), which starts again:
 * two files never show one number for longer than the kernel caches
 * the other's attributes.
 *
 * A file of several names (hard links) must show one number under each,
 * also under a name first looked up after the move: its new identity
 * becomes an alias of the number shown (alias[]), looked up for files of
 * several names only (fill_stat, smuxfs_ino_learn). A file of one name
 * needs none, and so takes no number of a file whose freed inode its
 * replica reused (ext4 does). A delete drops the key's entry and the
 * aliases it made; a rename moves the entry (over a name: that one's is
 * dropped); a directory's rename forgets every key's entry (they are
 * keyed by path). So a file made at a name since starts with its own
 * number and asks no member.
 *
 * Three direct-mapped tables of INOMAP_SLOTS entries each, made at the
 * first use (a tree of one copy, or without hard links, never makes
 * them), under one mutex; a stat whose answer is the key's last costs a
 * lookup, and fill_stat takes the lock only once an alias was made. A
 * collision loses an entry: that file's number may change as it did
 * before. One mount per daemon: the tables are the process's.
 *
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"

#define INOMAP_SLOTS 32768 /* a power of two, per table */

struct last_slot {
	uint64_t hash;	/* the key's (0: empty) */
	uint64_t id;	/* the identity its last stat answered */
	uint64_t shown; /* what it showed */
	uint64_t alias; /* an identity it made an alias of shown (0: none) */
};

struct alias_slot {
	uint64_t id;	/* a replica's identity of a file (0: empty) */
	uint64_t shown; /* the number that file shows */
};

/* A key that shows a number another identity than its own answers for:
 * the number, and who keeps it (the key's hash). */
struct kept_slot {
	uint64_t shown; /* 0: empty */
	uint64_t hash;
};

static struct last_slot *last;
static struct alias_slot *alias;
static struct kept_slot *kept;
static atomic_bool ready;      /* the tables exist */
static atomic_bool have_alias; /* an alias was made: fill_stat looks */
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

/* The slot of an identity: they are mixed already (file_path.c);
 * Fibonacci hashing spreads those a backend numbers in sequence. */
static size_t id_slot(uint64_t id)
{
	return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 49) &
	       (INOMAP_SLOTS - 1);
}

static struct alias_slot *alias_of(uint64_t id)
{
	return &alias[id_slot(id)];
}

static struct kept_slot *kept_of(uint64_t shown)
{
	return &kept[id_slot(shown)];
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
	if (!kept)
		kept = calloc(INOMAP_SLOTS, sizeof(*kept));
	if (last && alias && kept)
		atomic_store_explicit(&ready, true, memory_order_release);
	pthread_mutex_unlock(&inomap_lock);
	return last && alias && kept;
}

/* Drops the alias of @id when it gives @shown. Caller holds the lock. */
static void alias_drop(uint64_t id, uint64_t shown)
{
	struct alias_slot *a = alias_of(id);

	if (id && a->id == id && a->shown == shown)
		*a = (struct alias_slot){0};
}

/* Sets @id's alias to @shown (none when equal). Caller holds the lock. */
static void alias_set(uint64_t id, uint64_t shown)
{
	if (shown != id) {
		*alias_of(id) = (struct alias_slot){id, shown};
		atomic_store_explicit(&have_alias, true, memory_order_relaxed);
	}
}

/* Forgets @l's key, and the aliases it made: its file may be gone, and a
 * replica may give a freed inode's identity to another file (ext4).
 * Caller holds the lock. */
static void last_drop(struct last_slot *l)
{
	alias_drop(l->alias, l->shown);
	alias_drop(l->id, l->shown);
	*l = (struct last_slot){0};
}

/*
 * The key of hash @h shows @shown, answered with the identity @id (the
 * lock held). Keeping another identity's number (@shown != @id), it
 * notes so. Showing its own identity, it takes the number from a key
 * that keeps it for another identity of its own: the replica that gave
 * that key its number freed the identity and gave it to this file (ext4
 * reuses inodes; a replay replaced that key's copy there, s48-t2), and
 * two files showed one number. That key starts again (its next stat).
 */
static void kept_note(uint64_t h, uint64_t id, uint64_t shown)
{
	struct kept_slot *k = kept_of(shown);
	struct last_slot *o;

	if (shown != id) {
		*k = (struct kept_slot){shown, h};
		return;
	}
	if (k->shown != shown || k->hash == h)
		return;
	o = last_of(k->hash);
	if (o->hash == k->hash && o->shown == shown && o->id != id)
		last_drop(o);
	*k = (struct kept_slot){0};
}

uint64_t smuxfs_ino_alias(uint64_t id, uint32_t nlink)
{
	struct alias_slot *a;
	uint64_t shown = id;

	id &= ~SMUXFS_INO_FILE_ID;
	if (!id || nlink < 2 ||
	    !atomic_load_explicit(&have_alias, memory_order_relaxed))
		return shown;
	pthread_mutex_lock(&inomap_lock);
	a = alias_of(id);
	if (a->id == id)
		shown = a->shown;
	pthread_mutex_unlock(&inomap_lock);
	return shown;
}

uint64_t smuxfs_ino_learn(struct smuxfs *fs, const char *key, uint64_t id,
			  uint32_t nlink)
{
	uint64_t h, shown = 0;
	struct last_slot was = {0}, *l;
	struct alias_slot *a;
	int same = 1;

	id &= ~SMUXFS_INO_FILE_ID;
	if (!id || !wanted(fs) || !tables())
		return id;
	h = key_hash(key);
	pthread_mutex_lock(&inomap_lock);
	l = last_of(h);
	/* the answer the key gave last, or the number it showed (the
	 * replica that gave it answers again) */
	if (l->hash == h && (l->id == id || l->shown == id)) {
		l->id = id;
		shown = l->shown;
		kept_note(h, id, shown);
		pthread_mutex_unlock(&inomap_lock);
		return shown;
	}
	if (l->hash == h)
		was = *l;
	/* another name of a file of several names showed its number */
	a = alias_of(id);
	if (nlink > 1 && a->id == id)
		shown = a->shown;
	pthread_mutex_unlock(&inomap_lock);
	/* another identity than the key showed: the same file on another
	 * replica, or another file (asks the members: once per file and
	 * move of the answering replica, none while the one that gave the
	 * number is out, as in a drain) */
	if (!shown && was.hash) {
		struct smux_ctx ctx;

		smuxfs_ctx(&ctx);
		same = smux_mux_key_has_id(fs->root, &ctx, key, was.id,
					   ~SMUXFS_INO_FILE_ID);
		if (same != 0)
			shown = was.shown;
	}
	if (!shown)
		shown = id;
	pthread_mutex_lock(&inomap_lock);
	l = last_of(h);
	/* not over a change of the key made meanwhile (a delete, a rename,
	 * an open file's number): the next stat learns again; over another
	 * key's entry, which the slot gives up. The same file as far as no
	 * member could say otherwise (-1: the one that gave the number is
	 * out) keeps the identity it is checked by: a file replaced behind
	 * the mount meanwhile is told apart once that member answers again
	 * (s48-t2) */
	if (was.hash ? l->hash == was.hash && l->id == was.id &&
			       l->shown == was.shown
		     : l->hash != h) {
		*l = (struct last_slot){h, same < 0 ? was.id : id, shown,
					was.alias};
		if (nlink > 1 && shown != id) {
			alias_set(id, shown);
			l->alias = id;
		}
		kept_note(h, id, shown);
	}
	pthread_mutex_unlock(&inomap_lock);
	return shown;
}

void smuxfs_ino_shows(struct smuxfs *fs, const char *key, uint64_t id,
		      uint64_t shown, uint32_t nlink)
{
	struct last_slot *l;
	uint64_t h;

	id &= ~SMUXFS_INO_FILE_ID;
	shown &= ~SMUXFS_INO_FILE_ID;
	if (!id || !shown || !wanted(fs) || !tables())
		return;
	h = key_hash(key);
	pthread_mutex_lock(&inomap_lock);
	l = last_of(h);
	*l = (struct last_slot){h, id, shown, l->hash == h ? l->alias : 0};
	if (nlink > 1 && shown != id) {
		alias_set(id, shown);
		l->alias = id;
	}
	kept_note(h, id, shown);
	pthread_mutex_unlock(&inomap_lock);
}

void smuxfs_ino_moved(const char *from, const char *to)
{
	struct last_slot *l, keep = {0};
	uint64_t hf, ht;

	if (!atomic_load_explicit(&ready, memory_order_acquire))
		return;
	hf = key_hash(from);
	ht = to ? key_hash(to) : 0;
	pthread_mutex_lock(&inomap_lock);
	l = last_of(hf);
	if (l->hash == hf) {
		keep = *l;
		if (to)
			*l = (struct last_slot){0}; /* the file goes on */
		else
			last_drop(l);
	}
	if (to) {
		l = last_of(ht);
		if (l->hash == ht) /* @to's file is gone: replaced */
			last_drop(l);
		if (keep.hash)
			*l = (struct last_slot){ht, keep.id, keep.shown,
						keep.alias};
	}
	pthread_mutex_unlock(&inomap_lock);
}

void smuxfs_ino_dir_moved(void)
{
	if (!atomic_load_explicit(&ready, memory_order_acquire))
		return;
	/* every key under it changed: the numbers the keys showed are
	 * forgotten (a directory rename is rare; a file under the old
	 * name made later must not take a moved file's number) */
	pthread_mutex_lock(&inomap_lock);
	memset(last, 0, INOMAP_SLOTS * sizeof(*last));
	pthread_mutex_unlock(&inomap_lock);
}
