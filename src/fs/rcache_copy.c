// SPDX-License-Identifier: MIT
/*
 * rcache_copy.c - a cached object's whole content as a local copy for a
 * backend without a server-side copy (smux_ctx.local, smux/ctx.h): the
 * bunny backend's rename uploads it again instead of reading the object.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "fs/rcache_internal.h"
#include "smux/mux.h"

int smuxfs_rcache_open_copy(struct smuxfs_rcache *rc, const char *key,
			    uint64_t *size)
{
	struct rentry *e;
	int fd = -ENOENT;

	if (!rc)
		return -ENOENT;
	pthread_mutex_lock(&rc->lock);
	/* the chain holds the newest entry first: a stale version found
	 * instead of a newer one only costs its verification */
	for (e = rc->buckets[smux_fnv1a(key, strlen(key)) % RC_BUCKETS]; e;
	     e = e->hnext) {
		if (strcmp(e->key, key) != 0 || !e->in_table || e->segment ||
		    e->state != RE_READY || !e->has_file ||
		    e->present != e->nchunks)
			continue;
		/* the one openat under the lock: the file cannot go between
		 * the check and the open */
		fd = openat(rc->dirfd, e->name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		*size = e->size;
		break;
	}
	pthread_mutex_unlock(&rc->lock);
	return fd;
}
