/* SPDX-License-Identifier: MIT */
/*
 * backends/file_mounts.c - whether another file system is mounted below a
 * file backend's root (file_internal.h).
 *
 * Owns: the backend's view of /proc/self/mountinfo. A file backend on a
 * local disk runs its short calls on the caller's thread
 * (SMUX_CAP_INLINE), which is safe only while every path below its root
 * stays on that disk: a FUSE or NFS file system mounted under it (a
 * mount point inside the backend's directory) would take a lookup of
 * that name, and a hung one would hold the request past every deadline
 * (s45-t3). The table is read at open and again when the kernel says it
 * changed (poll(2) on mountinfo reports POLLPRI after a mount or an
 * unmount in this namespace), at most every 100 ms, from the caller that
 * asks; the answer in between is the last one read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/file_internal.h"

#define MOUNTS_RECHECK_NS (100 * 1000000LL)

/* A mount point field of mountinfo, its \ooo escapes undone in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* Reads mountinfo again from its start; whether a mount point lies below
 * @root. A table that cannot be read counts as one that has some. */
static bool scan(int fd, const char *root)
{
	size_t rlen = strlen(root), cap = 0;
	char *line = NULL;
	bool below = false;
	FILE *f;
	int dup_fd;

	if (lseek(fd, 0, SEEK_SET) != 0 || (dup_fd = dup(fd)) < 0)
		return true;
	f = fdopen(dup_fd, "r");
	if (!f) {
		close(dup_fd);
		return true;
	}
	while (!below && getline(&line, &cap, f) > 0) {
		char *save = NULL, *mp = strtok_r(line, " ", &save);

		/* id parent major:minor root MOUNT-POINT ... */
		for (int i = 0; mp && i < 4; i++)
			mp = strtok_r(NULL, " ", &save);
		if (!mp)
			continue;
		unescape(mp);
		below = strncmp(mp, root, rlen) == 0 &&
			(mp[rlen] == '/' || (rlen == 1 && mp[1]));
	}
	/* read to the end: the change is acknowledged (poll quiet again) */
	while (getline(&line, &cap, f) > 0)
		;
	free(line);
	fclose(f);
	return below;
}

int smux__file_mounts_open(struct smux__file *fb)
{
	struct smux__file_mounts *m = &fb->mounts;
	char link[64], path[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fb->root_fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return -errno;
	path[n] = '\0';
	m->root = strdup(path);
	if (!m->root)
		return -ENOMEM;
	m->fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (m->fd < 0)
		return -errno;
	atomic_store(&m->below, scan(m->fd, m->root));
	atomic_store(&m->checked_ns, smux_now_ns());
	return 0;
}

bool smux__file_mounts_below(struct smux__file *fb)
{
	struct smux__file_mounts *m = &fb->mounts;
	int64_t now = smux_now_ns();

	if (m->fd < 0)
		return true;
	if (now - atomic_load(&m->checked_ns) > MOUNTS_RECHECK_NS &&
	    pthread_mutex_trylock(&m->lock) == 0) {
		struct pollfd p = {.fd = m->fd, .events = POLLPRI};

		if (poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR)))
			atomic_store(&m->below, scan(m->fd, m->root));
		atomic_store(&m->checked_ns, now);
		pthread_mutex_unlock(&m->lock);
	}
	return atomic_load(&m->below);
}

void smux__file_mounts_close(struct smux__file *fb)
{
	struct smux__file_mounts *m = &fb->mounts;

	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	free(m->root);
	m->root = NULL;
	pthread_mutex_destroy(&m->lock);
}
