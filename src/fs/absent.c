/* SPDX-License-Identifier: MIT */
/*
 * absent.c - names the daemon has just found absent on the backends, so
 * that the mkdir, symlink, mknod or rename the kernel sends right after
 * its LOOKUP (answered "no such name") does not ask the backends again:
 * on an object store that question costs a HEAD of "a", a HEAD of "a/"
 * and a listing (issue 10, item 4).
 *
 * A note is taken only while nothing changed through the mount since it
 * was made (fs->mutations: every create, commit, delete, rename, link,
 * mkdir and attribute change moves it) and for at most
 * SMUXFS_ABSENT_WINDOW_NS; the kernel holds the parent directory locked
 * from its LOOKUP to the MKDIR, so on this mount nothing else can make
 * the name in between. What another client makes in that window is not
 * seen (S3 has no atomic create-if-absent either: a check is always a
 * window); the window bounds it.
 *
 * Mounts with real directories (file backends) take notes too: there a
 * lookup is one HEAD, and the mkdir's own check (as a symlink's, mknod's
 * or rename's) was a second one for each directory tar or mkdir -p makes
 * (issue 8). A local process that makes
 * the name behind the mount within the window meets a mkdir that finds
 * the directory there (a marker put is mkdir -p) instead of EEXIST; the
 * check it replaces had a window too (between its HEAD and the put).
 *
 * Direct-mapped and bounded: a collision forgets the older note; a note
 * is used once.
 */
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "smux/ctx.h"
#include "smux/mux.h"

static unsigned slot_of(const char *key)
{
	return smux_fnv1a(key, strlen(key)) % SMUXFS_ABSENT_SLOTS;
}

void smuxfs_absent_init(struct smuxfs *fs)
{
	memset(&fs->absent, 0, sizeof(fs->absent));
	pthread_mutex_init(&fs->absent.lock, NULL);
}

void smuxfs_absent_release(struct smuxfs *fs)
{
	for (unsigned i = 0; i < SMUXFS_ABSENT_SLOTS; i++)
		free(fs->absent.slots[i].key);
	pthread_mutex_destroy(&fs->absent.lock);
}

void smuxfs_absent_note(struct smuxfs *fs, const char *key)
{
	struct smuxfs_absent *a = &fs->absent;
	unsigned i = slot_of(key);
	char *copy = strdup(key);

	if (!copy)
		return; /* no note: the next check asks the backends */
	pthread_mutex_lock(&a->lock);
	free(a->slots[i].key);
	a->slots[i].key = copy;
	a->slots[i].at_ns = smux_now_ns();
	a->slots[i].gen = atomic_load(&fs->mutations);
	pthread_mutex_unlock(&a->lock);
}

bool smuxfs_absent_take(struct smuxfs *fs, const char *key)
{
	struct smuxfs_absent *a = &fs->absent;
	unsigned i = slot_of(key);
	bool fresh = false;
	char *old = NULL;

	pthread_mutex_lock(&a->lock);
	if (a->slots[i].key && strcmp(a->slots[i].key, key) == 0) {
		int64_t age = smux_now_ns() - a->slots[i].at_ns;

		fresh = age >= 0 && age <= SMUXFS_ABSENT_WINDOW_NS &&
			a->slots[i].gen == atomic_load(&fs->mutations);
		old = a->slots[i].key;
		a->slots[i].key = NULL;
	}
	pthread_mutex_unlock(&a->lock);
	free(old);
	return fresh;
}
