/* SPDX-License-Identifier: MIT */
/*
 * backends/file_xattr.c - extended attributes (user.*) in the file backend
 * (file_internal.h).
 *
 * Owns: reading, listing, setting and removing the user. attributes of an
 * object or directory. The key is opened O_PATH | O_NOFOLLOW beneath the
 * root (smux__file_open), and the attribute calls name that descriptor's
 * /proc/self/fd link, which is exactly that inode: a symlink on the path
 * is never followed, and a symlink, FIFO or socket key has no user.*
 * attribute (Linux refuses them there): its list is empty, a read is
 * NO_ATTR (ENODATA), a set or remove NOT_SUPPORTED. Listing filters out every
 * other namespace (trusted., security., system.), so a copy through the
 * mount never meets what it could not set back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backends/file_internal.h"

/* Opens @key O_PATH without following it into *@fd and fills @proc with
 * its /proc/self/fd link; a symlink or special file is NOT_SUPPORTED. */
static int xattr_open(struct smux__file *fb, const char *key, const char *op,
		      int *fd, char *proc, size_t proc_len,
		      struct smux_error *err)
{
	char path[SMUX_KEY_MAX + 1];
	struct stat st;
	bool is_dir;
	int rc;

	*fd = -1;
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	rc = smux__file_open(fb->root_fd, path, O_PATH | O_NOFOLLOW, 0);
	if (rc < 0)
		return smux__file_fail(fb, err, rc == -ENOTDIR ? ENOENT : -rc,
				       op, key);
	if (fstat(rc, &st) < 0) {
		int e = errno;

		close(rc);
		return smux__file_fail(fb, err, e, op, key);
	}
	if (is_dir && !S_ISDIR(st.st_mode)) {
		close(rc);
		return smux__file_fail(fb, err, ENOENT, op, key);
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		close(rc);
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, fb->base.name,
				      "%s \"%s\": a symlink or special file "
				      "has no user. attributes",
				      op, key);
	}
	*fd = rc;
	snprintf(proc, proc_len, "/proc/self/fd/%d", rc);
	return 0;
}

int smux__file_getxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, void *buf,
			size_t size, size_t *out_len, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char proc[64];
	ssize_t n;
	int fd, rc;

	if (!fb)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "not a file backend");
	rc = smux__file_check_ctx(fb, ctx, err);
	if (!rc)
		rc = xattr_open(fb, key, "getxattr", &fd, proc, sizeof(proc),
				err);
	/* a symlink or special file has no user. attribute: ENODATA, as
	 * Linux answers a read of one there */
	if (rc && err->e.code == SMUX_E_NOT_SUPPORTED)
		return smux_error_set(err, SMUX_E_NO_ATTR, fb->base.name,
				      "getxattr \"%s\": a symlink or special "
				      "file has no user. attributes",
				      key);
	if (rc)
		return rc;
	n = getxattr(proc, name, size ? buf : NULL, size);
	if (n < 0)
		rc = smux__file_fail(fb, err, errno, "getxattr", key);
	else
		*out_len = (size_t)n;
	close(fd);
	return rc;
}

/* Keeps the user. names of the @n bytes of @names in place; returns the
 * bytes kept. */
static size_t keep_user_names(char *names, size_t n)
{
	size_t in = 0, out = 0;

	while (in < n) {
		size_t len = strnlen(names + in, n - in);

		if (len > 5 && strncmp(names + in, "user.", 5) == 0) {
			memmove(names + out, names + in, len);
			out += len;
			names[out++] = '\0';
		}
		in += len + 1;
	}
	return out;
}

int smux__file_listxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, char *buf, size_t size,
			 size_t *out_len, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char proc[64], *all = NULL;
	ssize_t n;
	size_t kept;
	int fd, rc;

	if (!fb)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "not a file backend");
	rc = smux__file_check_ctx(fb, ctx, err);
	if (!rc)
		rc = xattr_open(fb, key, "listxattr", &fd, proc, sizeof(proc),
				err);
	/* a symlink or special file: no user. names, an empty list (as
	 * ext4's listxattr, which getfattr -R -h walks) */
	if (rc && err->e.code == SMUX_E_NOT_SUPPORTED) {
		smux_error_clear(err);
		*out_len = 0;
		return 0;
	}
	if (rc)
		return rc;
	/* every namespace comes back; keep user. only (a list that grew
	 * between the two calls is ERANGE, as listxattr(2) would say) */
	n = listxattr(proc, NULL, 0);
	if (n < 0) {
		rc = smux__file_fail(fb, err, errno, "listxattr", key);
		goto out_close;
	}
	all = malloc((size_t)n + 1);
	if (!all) {
		rc = smux__file_fail(fb, err, ENOMEM, "listxattr", key);
		goto out_close;
	}
	n = n ? listxattr(proc, all, (size_t)n) : 0;
	if (n < 0) {
		rc = smux__file_fail(fb, err, errno, "listxattr", key);
		goto out_close;
	}
	kept = keep_user_names(all, (size_t)n);
	if (size && kept > size) {
		rc = smux__file_fail(fb, err, ERANGE, "listxattr", key);
		goto out_close;
	}
	if (size)
		memcpy(buf, all, kept);
	*out_len = kept;
out_close:
	free(all);
	close(fd);
	return rc;
}

/* setxattr, or removexattr when @value is NULL (metadata: no fsync, as
 * setattr; ops->sync makes it durable). */
static int xattr_change(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, const void *value,
			size_t size, int flags, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	const char *op = value ? "setxattr" : "removexattr";
	char proc[64];
	int fd, rc;

	if (!fb)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "not a file backend");
	rc = smux__file_check_ctx(fb, ctx, err);
	if (!rc)
		rc = xattr_open(fb, key, op, &fd, proc, sizeof(proc), err);
	if (rc)
		return rc;
	if ((value ? setxattr(proc, name, value, size, flags)
		   : removexattr(proc, name)) < 0) {
		int e = errno;

		/*
		 * ENOSPC/EDQUOT of a setxattr is "this attribute does not
		 * fit" (ext4 keeps a file's attributes in its inode and one
		 * block): the request's error, like E2BIG, not a full
		 * backend to take out of service (stress-ng's xattr
		 * stressor took both replicas of a mirror down, and every
		 * call failed with EIO for the cooldown). errno is kept.
		 */
		if (value && (e == ENOSPC || e == EDQUOT)) {
			char why[64];

			smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				       "%s \"%s\" %s: the attribute does not "
				       "fit (%s)",
				       op, key, name,
				       strerror_r(e, why, sizeof(why)));
			if (err)
				err->e.sys_errno = e;
			rc = -e;
		} else {
			rc = smux__file_fail(fb, err, e, op, key);
		}
	}
	close(fd);
	return rc;
}

int smux__file_setxattr(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *key, const char *name, const void *value,
			size_t size, int flags, struct smux_error *err)
{
	/* an empty value is a value: never the remove */
	return xattr_change(b, ctx, key, name, value ? value : "", size, flags,
			    err);
}

int smux__file_removexattr(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, const char *name,
			   struct smux_error *err)
{
	return xattr_change(b, ctx, key, name, NULL, 0, 0, err);
}
