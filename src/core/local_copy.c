// SPDX-License-Identifier: MIT
/*
 * local_copy.c - struct smux_local_copy (smux/ctx.h): one object's content
 * held locally by the caller, offered to a backend through the call's
 * context; refcounted, so an abandoned member call keeps its fd open.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smux/ctx.h"

struct smux_local_copy {
	atomic_uint refs;
	int fd;
	uint64_t size;
	char key[]; /* NUL-terminated */
};

struct smux_local_copy *smux_local_copy_new(const char *key, int fd,
					    uint64_t size)
{
	size_t kl = strlen(key);
	struct smux_local_copy *lc = malloc(sizeof(*lc) + kl + 1);

	if (!lc) {
		close(fd);
		return NULL;
	}
	atomic_init(&lc->refs, 1);
	lc->fd = fd;
	lc->size = size;
	memcpy(lc->key, key, kl + 1);
	return lc;
}

struct smux_local_copy *smux_local_copy_ref(struct smux_local_copy *lc)
{
	if (lc)
		atomic_fetch_add(&lc->refs, 1);
	return lc;
}

void smux_local_copy_unref(struct smux_local_copy *lc)
{
	if (!lc || atomic_fetch_sub(&lc->refs, 1) != 1)
		return;
	close(lc->fd);
	free(lc);
}

int smux_local_copy_fd(const struct smux_local_copy *lc, const char *key,
		       uint64_t *size)
{
	if (!lc || strcmp(lc->key, key) != 0)
		return -1;
	*size = lc->size;
	return lc->fd;
}
