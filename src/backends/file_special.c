/* SPDX-License-Identifier: MIT */
/*
 * backends/file_special.c - symlinks, FIFOs and sockets in the file
 * backend (file_internal.h).
 *
 * Owns: storing a special object (symlinkat or mknodat under a temp name,
 * then renameat over the key, so a replacement is atomic), reading one
 * back (a symlink's content is its target, read with readlinkat; a FIFO or
 * socket is empty), copying one, and changing its times, owner and mode.
 *
 * Never follows a symlink: every call names one component of a directory
 * fd that came from smux__file_open() and passes AT_SYMLINK_NOFOLLOW (or
 * is a call that never follows: readlinkat, renameat, unlinkat). A link
 * climbing out of the root ("../../etc") is stored and read back as its
 * target text; only the kernel, in the mount's namespace, resolves it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/file_internal.h"

bool smux__file_is_special(uint32_t mode)
{
	return S_ISLNK(mode) || S_ISFIFO(mode) || S_ISSOCK(mode);
}

static void fileb_ts(struct timespec *ts, int64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
	if (ts->tv_nsec < 0) {
		ts->tv_sec--;
		ts->tv_nsec += 1000000000;
	}
}

/* Reads a symlink target from @src into @buf (PATH_MAX bytes, NUL
 * terminated): not empty, no NUL byte, shorter than PATH_MAX. */
static int fileb_read_target(const struct smux__file *fb,
			     const struct smux_source *src, char *buf,
			     const char *key, struct smux_error *err)
{
	uint64_t len = src ? src->length : 0, pos = 0;

	if (len == 0 || len >= PATH_MAX)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, fb->base.name,
			"symlink \"%s\": a target of %llu bytes "
			"(1 to %d allowed)",
			key, (unsigned long long)len, PATH_MAX - 1);
	while (pos < len) {
		long n = smux_source_read(src, pos, buf + pos,
					  (size_t)(len - pos));

		if (n < 0)
			return smux__file_fail(fb, err, (int)-n,
					       "read source of", key);
		if (n == 0)
			return smux_error_set(err, SMUX_E_IO, fb->base.name,
					      "symlink \"%s\": source ended "
					      "early",
					      key);
		pos += (uint64_t)n;
	}
	buf[len] = '\0';
	if (strlen(buf) != len)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, fb->base.name,
			"symlink \"%s\": target holds a NUL byte", key);
	return 0;
}

/* Creates the special object under a fresh temp name @t->name in the
 * work folder (where a crash's leftovers are swept, file_tmp.c). */
static int fileb_make_tmp(const struct smux__file *fb, int dirfd,
			  struct smux__file_tmp *t, uint32_t mode,
			  const char *target, const char *key,
			  struct smux_error *err)
{
	int tries, e = EEXIST;

	t->dirfd = dirfd;
	t->workfd = fb->work_fd;
	t->fd = -1;
	t->name[0] = '\0';
	if (fb->work_fd < 0)
		return smux__file_fail(fb, err, fb->work_errno, "create", key);
	for (tries = 0; tries < 8 && e == EEXIST; tries++) {
		int r;

		smux__file_tmp_name(t->name);
		if (S_ISLNK(mode))
			r = symlinkat(target, fb->work_fd, t->name);
		else
			r = mknodat(fb->work_fd, t->name,
				    (mode & S_IFMT) | 0600, 0);
		e = r < 0 ? errno : 0;
	}
	if (e) {
		t->name[0] = '\0';
		return smux__file_fail(fb, err, e, "create", key);
	}
	return 0;
}

/* Mode (not of a symlink: Linux keeps none), owner and times of the entry
 * @name of @dirfd, never following it. */
static int fileb_apply(const struct smux__file *fb, int dirfd, const char *name,
		       bool is_link, const char *key,
		       const struct smux_setattr *a, struct smux_error *err)
{
	struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
				 {.tv_nsec = UTIME_OMIT}};

	/* the owner first: a chown clears set-id bits the mode then gives */
	if ((a->flags & SMUX_SET_OWNER) &&
	    fchownat(dirfd, name, a->uid, a->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return smux__file_fail(fb, err, errno, "chown", key);
	if ((a->flags & SMUX_SET_MODE) && !is_link &&
	    fchmodat(dirfd, name, (mode_t)(a->mode & 07777),
		     AT_SYMLINK_NOFOLLOW) < 0)
		return smux__file_fail(fb, err, errno, "chmod", key);
	if (a->flags & SMUX_SET_ATIME)
		fileb_ts(&ts[0], a->atime_ns);
	if (a->flags & SMUX_SET_MTIME)
		fileb_ts(&ts[1], a->mtime_ns);
	if ((a->flags & (SMUX_SET_ATIME | SMUX_SET_MTIME)) &&
	    utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return smux__file_fail(fb, err, errno, "set times of", key);
	return 0;
}

int smux__file_put_special(const struct smux__file *fb, int dirfd,
			   const char *name, const char *key, uint32_t mode,
			   const char *target, int64_t mtime_ns, uint32_t uid,
			   uint32_t gid, struct smux_info *info,
			   struct smux_error *err)
{
	struct smux__file_tmp t = {.fd = -1};
	struct smux_setattr a = {
		.flags = SMUX_SET_MTIME,
		.mode = mode & 07777,
		/* always an explicit, unique mtime: it is half the etag */
		.mtime_ns = mtime_ns != SMUX__FILE_MTIME_NOW
				    ? mtime_ns
				    : smux_unique_wall_ns(),
	};
	struct stat st;
	int rc;

	if (!S_ISLNK(mode))
		a.flags |= SMUX_SET_MODE;
	if (uid != SMUX_ID_NONE || gid != SMUX_ID_NONE) {
		a.flags |= SMUX_SET_OWNER;
		a.uid = uid;
		a.gid = gid;
	}
	rc = fileb_make_tmp(fb, dirfd, &t, mode, target, key, err);
	if (rc)
		return rc;
	rc = fileb_apply(fb, fb->work_fd, t.name, S_ISLNK(mode), key, &a, err);
	if (!rc && renameat(fb->work_fd, t.name, dirfd, name) < 0)
		rc = smux__file_fail(fb, err, errno, "rename into", key);
	smux__file_ns_changed(fb);
	if (!rc)
		t.name[0] = '\0';
	if (!rc && !fb->no_fsync && smux__file_sync_dir(fb, dirfd) < 0)
		rc = smux__file_fail(fb, err, errno, "fsync directory of", key);
	if (!rc && info) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = smux__file_fail(fb, err, errno, "stat", key);
		else
			smux__file_fill_info(&st, info);
	}
	smux__file_tmp_discard(&t);
	return rc;
}

int smux__file_put_special_src(const struct smux__file *fb, int dirfd,
			       const char *name, const char *key,
			       const struct smux_source *src,
			       const struct smux_put_opts *opts,
			       struct smux_info *info, struct smux_error *err)
{
	char target[PATH_MAX];
	uint32_t mode = opts->mode;
	int rc;

	if (S_ISLNK(mode)) {
		rc = fileb_read_target(fb, src, target, key, err);
		if (rc)
			return rc;
	} else if (src && src->length) {
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      fb->base.name,
				      "\"%s\": a FIFO or socket takes no "
				      "content",
				      key);
	} else if (!(mode & 07777) && !(opts->flags & SMUX_PUT_MODE)) {
		mode |= SMUX__FILE_DEFAULT_MODE;
	}
	return smux__file_put_special(
		fb, dirfd, name, key, mode, target,
		smux_put_has_mtime(opts) ? opts->mtime_ns
					 : SMUX__FILE_MTIME_NOW,
		(opts->flags & SMUX_PUT_OWNER) ? opts->uid : SMUX_ID_NONE,
		(opts->flags & SMUX_PUT_OWNER) ? opts->gid : SMUX_ID_NONE, info,
		err);
}

int smux__file_find_special(const struct smux__file *fb, const char *path,
			    const char *key, const char *op, struct stat *st,
			    char *target, struct smux_error *err)
{
	const char *name;
	int dirfd, rc;
	ssize_t n;

	rc = smux__file_open_parent(fb, path, O_PATH, false, &dirfd, &name, op,
				    key, err);
	if (rc)
		return rc == -ENOTDIR
			       ? smux__file_fail(fb, err, ENOENT, op, key)
			       : rc;
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = smux__file_fail(fb, err, errno, op, key);
	} else if (!smux__file_is_special(st->st_mode)) {
		rc = 0;
	} else if (S_ISLNK(st->st_mode)) {
		n = readlinkat(dirfd, name, target, PATH_MAX - 1);
		if (n < 0) {
			rc = smux__file_fail(fb, err, errno, op, key);
		} else {
			target[n] = '\0';
			/* the size of what get returns, whatever lstat said */
			st->st_size = (off_t)n;
			rc = 1;
		}
	} else {
		target[0] = '\0';
		st->st_size = 0;
		rc = 1;
	}
	close(dirfd);
	return rc;
}

int smux__file_setattr_special(const struct smux__file *fb, const char *path,
			       const char *key, const struct smux_setattr *a,
			       struct smux_error *err)
{
	const char *name;
	struct stat st;
	int dirfd, rc;

	rc = smux__file_open_parent(fb, path, O_PATH, false, &dirfd, &name,
				    "setattr", key, err);
	if (rc)
		return rc == -ENOTDIR ? smux__file_fail(fb, err, ENOENT,
							"setattr", key)
				      : rc;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = smux__file_fail(fb, err, errno, "setattr", key);
	} else if (!smux__file_is_special(st.st_mode)) {
		rc = 0; /* the caller's refusal stands */
	} else if (S_ISLNK(st.st_mode) && (a->flags & SMUX_SET_MODE)) {
		rc = smux_error_set(err, SMUX_E_NOT_SUPPORTED, fb->base.name,
				    "chmod \"%s\": a symlink has no mode of "
				    "its own",
				    key);
	} else {
		rc = fileb_apply(fb, dirfd, name, S_ISLNK(st.st_mode), key, a,
				 err);
		rc = rc ? rc : 1;
	}
	close(dirfd);
	return rc;
}
