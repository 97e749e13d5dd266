/* SPDX-License-Identifier: MIT */
/*
 * ops_xattr.c - FUSE extended attribute operations: getxattr, setxattr,
 * listxattr and removexattr on the key of a path (the root backend's
 * smux_backend_*xattr, which keep the user. namespace only).
 *
 * Registered only with [mount] xattr on (or auto over a root that has
 * SMUX_CAP_XATTR): otherwise libfuse answers ENOSYS and the kernel stops
 * asking for the rest of the mount. The mount root (no key) and .smux/
 * answer ENOTSUP. A file open for writing whose content is not committed
 * yet is committed before a set or remove, so the attribute lands on the
 * object the name will hold (cp -a sets them before its close). Never
 * touches open-file content otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs/fs.h"

/* The key of @path in @key; ENOTSUP for the root and .smux/. */
static int xattr_key(struct smuxfs *fs, const char *path, char *key, size_t cap)
{
	int rc;

	if (!path)
		return -ENOENT; /* an unlinked open file: no name left */
	if (smuxdir_owns(path) || strcmp(path, "/") == 0)
		return -ENOTSUP;
	rc = smuxfs_path_key(fs, path, key, cap);
	if (rc == 0 && !key[0])
		rc = -ENOTSUP; /* the root under a prefix */
	return rc;
}

/* True when a not yet committed file is open under @key (it may not exist
 * in the backend yet). */
static bool pending(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);

	if (!of)
		return false;
	smuxfs_ofile_release(fs, of);
	return true;
}

/* Commits a dirty open file of @key before a change of its attributes. */
static int commit_pending(struct smuxfs *fs, const char *key)
{
	struct smuxfs_ofile *of = smuxfs_ofile_find(fs, key);
	int rc;

	if (!of)
		return 0;
	rc = smuxfs_ofile_commit(fs, of, false);
	smuxfs_ofile_release(fs, of);
	return rc;
}

/* Whether @key names a directory of a tree of real directories (file
 * backends), whose marker key is then in @dkey. */
static bool real_dir(struct smuxfs *fs, const char *key, char *dkey, size_t cap)
{
	struct smux_info info;
	bool is_dir = false;

	return fs->real_dirs &&
	       smuxfs_lookup(fs, key, false, &is_dir, &info) == 0 && is_dir &&
	       smuxfs_dir_prefix(key, dkey, cap) == 0;
}

/*
 * Whether a read of @key's attributes that failed (@err) is asked again
 * of the directory marker @dkey: on a store without real directories a
 * directory is its "a/" marker; on real ones the name's shard may be out
 * (sticky-by-key), while any shard answers for the marker (a change of a
 * directory went to every one: xattr_change).
 */
static bool try_dir(struct smuxfs *fs, const char *key,
		    const struct smux_error *err, char *dkey, size_t cap)
{
	if (fs->real_dirs)
		return err->e.code == SMUX_E_ALL_BACKENDS_DOWN &&
		       real_dir(fs, key, dkey, cap);
	return err->e.code == SMUX_E_KEY_NOT_FOUND &&
	       smuxfs_dir_prefix(key, dkey, cap) == 0;
}

int smuxfs_getxattr(const char *path, const char *name, char *value,
		    size_t size)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2], dkey[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_ctx ctx;
	size_t n = 0;
	int rc;

	rc = xattr_key(fs, path, key, sizeof(key));
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	rc = smux_backend_getxattr(fs->root, &ctx, key, name, value, size, &n,
				   &err);
	if (rc && try_dir(fs, key, &err, dkey, sizeof(dkey)))
		rc = smux_backend_getxattr(fs->root, &ctx, dkey, name, value,
					   size, &n, &err);
	if (rc && err.e.code == SMUX_E_KEY_NOT_FOUND && pending(fs, key))
		return -ENODATA; /* created, not committed: none yet */
	if (rc)
		return smuxfs_errno(&err, "getxattr", key);
	return n > INT32_MAX ? -E2BIG : (int)n;
}

int smuxfs_listxattr(const char *path, char *list, size_t size)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2], dkey[SMUX_KEY_MAX + 2];
	struct smux_error err;
	struct smux_ctx ctx;
	size_t n = 0;
	int rc;

	rc = xattr_key(fs, path, key, sizeof(key));
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	rc = smux_backend_listxattr(fs->root, &ctx, key, list, size, &n, &err);
	if (rc && try_dir(fs, key, &err, dkey, sizeof(dkey)))
		rc = smux_backend_listxattr(fs->root, &ctx, dkey, list, size,
					    &n, &err);
	if (rc && err.e.code == SMUX_E_KEY_NOT_FOUND && pending(fs, key))
		return 0;
	if (rc)
		return smuxfs_errno(&err, "listxattr", key);
	return n > INT32_MAX ? -E2BIG : (int)n;
}

/* setxattr, or removexattr when @remove: the same checks, the same
 * fallback to a directory's marker key. */
static int xattr_change(const char *path, const char *name, const char *value,
			size_t size, int flags, bool remove)
{
	struct smuxfs *fs = smuxfs_get();
	char key[SMUX_KEY_MAX + 2], dkey[SMUX_KEY_MAX + 2];
	const char *op = remove ? "removexattr" : "setxattr";
	struct smux_error err;
	struct smux_ctx ctx;
	const char *k;
	int rc;

	rc = xattr_key(fs, path, key, sizeof(key));
	if (!rc && fs->ro)
		rc = -EROFS;
	if (!rc)
		rc = commit_pending(fs, key);
	if (rc)
		return rc;
	smuxfs_ctx(&ctx);
	/* a directory's change goes to its marker: in sticky-by-key to
	 * every shard, with hints for those out (s42-t3: an xattr of a
	 * directory was on one shard, EIO while it was drained) */
	k = !pending(fs, key) && real_dir(fs, key, dkey, sizeof(dkey))
		    ? dkey
		    : key; /* (a file open: no lookup; cp -a, rsync -X) */
	for (;; k = dkey) {
		rc = remove ? smux_backend_removexattr(fs->root, &ctx, k, name,
						       &err)
			    : smux_backend_setxattr(fs->root, &ctx, k, name,
						    value, size, flags, &err);
		if (!rc || k == dkey ||
		    !try_dir(fs, key, &err, dkey, sizeof(dkey)))
			break;
	}
	return rc ? smuxfs_errno(&err, op, key) : 0;
}

int smuxfs_setxattr(const char *path, const char *name, const char *value,
		    size_t size, int flags)
{
	return xattr_change(path, name, value, size, flags, false);
}

int smuxfs_removexattr(const char *path, const char *name)
{
	return xattr_change(path, name, NULL, 0, 0, true);
}
