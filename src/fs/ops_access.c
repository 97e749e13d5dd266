/* SPDX-License-Identifier: MIT */
/*
 * ops_access.c - access(2), faccessat(2) and chdir(2)'s check on a mount
 * without default_permissions.
 *
 * With default_permissions (allow_other implies it) the kernel decides
 * every access itself from the attributes and never asks. Without it the
 * kernel sends ACCESS, and a filesystem that does not answer is taken to
 * allow everything: access(X_OK) of a 0640 file said yes to root, where a
 * local filesystem wants an execute bit (stress-ng's access stressor;
 * `test -x`, which(1) and shells ask this way).
 *
 * Answered here as the kernel's generic_permission decides, from what
 * getattr shows (so uid=, gid= and umask= count): root may read and write
 * anything and execute what has an execute bit or is a directory; others
 * get the owner's, the group's (primary or supplementary) or the others'
 * bits.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"

/* Most supplementary groups of the caller looked at. */
#define ACCESS_GROUPS_MAX 64

bool smuxfs_caller_in_group(const struct fuse_context *c, gid_t gid)
{
	gid_t groups[ACCESS_GROUPS_MAX];
	int n;

	if (c->gid == gid)
		return true;
	n = fuse_getgroups(ACCESS_GROUPS_MAX, groups);
	if (n > ACCESS_GROUPS_MAX)
		n = ACCESS_GROUPS_MAX;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

int smuxfs_access(const char *path, int mask)
{
	const struct fuse_context *c = fuse_get_context();
	struct stat st;
	mode_t bits;
	int rc;

	rc = smuxfs_getattr(path, &st, NULL);
	if (rc != 0 || mask == F_OK)
		return rc;
	if (c->uid == 0) {
		if ((mask & X_OK) && !S_ISDIR(st.st_mode) &&
		    !(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
			return -EACCES;
		return 0;
	}
	if (st.st_uid == c->uid)
		bits = (st.st_mode >> 6) & 7;
	else if (smuxfs_caller_in_group(c, st.st_gid))
		bits = (st.st_mode >> 3) & 7;
	else
		bits = st.st_mode & 7;
	return (mask & (R_OK | W_OK | X_OK) & ~(int)bits) ? -EACCES : 0;
}
