/* SPDX-License-Identifier: MIT */
/*
 * backends/file_tmp.c - temp files and byte copying for the file backend
 * (file_internal.h).
 *
 * Owns: the work folder "<root>/.smuxfs-tmp" (made, locked and swept at
 * open); creating ".smux-tmp.<random>" files in it, sealing them (mode,
 * mtime, fsync), publishing them with renameat(2) into the target's
 * directory and discarding them; copy_file_range with its read/write
 * fallback, and fallocate(2) of a writer's file. A temp file is always created with O_EXCL in the work folder,
 * opened with smux__file_open() beneath the root.
 *
 * Crash leftovers: a daemon killed mid-write leaves its temp files in the
 * work folder only, never beside a user's files (where they would block
 * rmdir of a directory that looks empty). The next open of the backend
 * removes them, unless another live process has the folder open: each
 * instance holds a shared flock(2) on the folder for its lifetime, and the
 * sweep runs only under an exclusive one, so one daemon's start never
 * deletes another running daemon's pending temp files. A lock dies with
 * its process, so a kill -9 never keeps a sweep away.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/file_internal.h"

void smux__file_tmp_name(char *name)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[8];
	ssize_t n;
	size_t i;

	do {
		n = getrandom(r, sizeof(r), 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(r)) {
		/* No entropy: still unique enough with O_EXCL retries. */
		uint64_t x = (uint64_t)smux_now_ns() ^ (uintptr_t)name ^
			     ((uint64_t)gettid() << 32);

		memcpy(r, &x, sizeof(r));
	}
	memcpy(name, SMUX__FILE_TMP_PREFIX, SMUX__FILE_TMP_PREFIX_LEN);
	for (i = 0; i < sizeof(r); i++) {
		name[SMUX__FILE_TMP_PREFIX_LEN + 2 * i] = hex[r[i] >> 4];
		name[SMUX__FILE_TMP_PREFIX_LEN + 2 * i + 1] = hex[r[i] & 15];
	}
	name[SMUX__FILE_TMP_PREFIX_LEN + 2 * sizeof(r)] = '\0';
}

int smux__file_tmp_create(const struct smux__file *fb, int dirfd,
			  struct smux__file_tmp *t, const char *key,
			  struct smux_error *err)
{
	int tries, fd = -EEXIST;

	t->workfd = fb->work_fd;
	t->dirfd = dirfd;
	if (fb->work_fd < 0) {
		t->fd = -1;
		t->name[0] = '\0';
		return smux_error_set(
			err, SMUX_E_PERMISSION_DENIED, fb->base.name,
			"create temp file for \"%s\": no work "
			"folder " SMUX__FILE_WORK_DIR " at the root (%s)",
			key, strerrordesc_np(fb->work_errno));
	}
	for (tries = 0; tries < 8 && fd == -EEXIST; tries++) {
		smux__file_tmp_name(t->name);
		fd = smux__file_open(fb->work_fd, t->name,
				     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW,
				     0600);
	}
	t->fd = fd;
	if (fd < 0) {
		t->name[0] = '\0';
		return smux__file_fail(fb, err, -fd, "create temp file for",
				       key);
	}
	return 0;
}

void smux__file_timespec(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
	if (ts->tv_nsec < 0) {
		ts->tv_sec--;
		ts->tv_nsec += 1000000000;
	}
}

int smux__file_set_mtime(int fd, int64_t mtime_ns)
{
	struct timespec ts[2];

	ts[0].tv_sec = 0;
	ts[0].tv_nsec = UTIME_OMIT; /* atime stays */
	smux__file_timespec(mtime_ns, &ts[1]);
	return futimens(fd, ts) < 0 ? -errno : 0;
}

int smux__file_set_owner(int fd, uint32_t uid, uint32_t gid)
{
	uid_t u = uid == SMUX_ID_NONE ? (uid_t)-1 : (uid_t)uid;
	gid_t g = gid == SMUX_ID_NONE ? (gid_t)-1 : (gid_t)gid;

	if (u == (uid_t)-1 && g == (gid_t)-1)
		return 0;
	return fchownat(fd, "", u, g, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

int smux__file_fsetattr(int fd, const struct smux_setattr *a)
{
	struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
				 {.tv_nsec = UTIME_OMIT}};
	int rc;

	/* the owner first: a chown clears set-id bits the mode then gives */
	if (a->flags & SMUX_SET_OWNER) {
		rc = smux__file_set_owner(fd, a->uid, a->gid);
		if (rc)
			return rc;
	}
	if ((a->flags & SMUX_SET_MODE) &&
	    fchmod(fd, (mode_t)(a->mode & 07777)) < 0)
		return -errno;
	if (a->flags & SMUX_SET_ATIME)
		smux__file_timespec(a->atime_ns, &ts[0]);
	if (a->flags & SMUX_SET_MTIME)
		smux__file_timespec(a->mtime_ns, &ts[1]);
	if ((a->flags & (SMUX_SET_ATIME | SMUX_SET_MTIME)) &&
	    futimens(fd, ts) < 0)
		return -errno;
	return 0;
}

int smux__file_put_owner(int fd, const struct smux_put_opts *opts,
			 const struct stat *keep)
{
	struct stat st;
	int rc;

	if (opts && (opts->flags & SMUX_PUT_OWNER))
		return smux__file_set_owner(fd, opts->uid, opts->gid);
	if (!keep || fstat(fd, &st) < 0 ||
	    (st.st_uid == keep->st_uid && st.st_gid == keep->st_gid))
		return 0;
	rc = smux__file_set_owner(fd, (uint32_t)keep->st_uid,
				  (uint32_t)keep->st_gid);
	return rc == -EPERM ? 0 : rc;
}

int smux__file_tmp_seal(const struct smux__file *fb, struct smux__file_tmp *t,
			uint32_t mode, int64_t mtime_ns, bool sync,
			const char *key, struct smux_error *err)
{
	if (fchmod(t->fd, (mode_t)(mode & 07777)) < 0)
		return smux__file_fail(fb, err, errno, "chmod", key);
	{
		/* always an explicit, unique mtime: it is half the etag */
		int rc = smux__file_set_mtime(t->fd,
					      mtime_ns != SMUX__FILE_MTIME_NOW
						      ? mtime_ns
						      : smux_unique_wall_ns());

		if (rc)
			return smux__file_fail(fb, err, -rc, "set mtime of",
					       key);
	}
	if (sync && fsync(t->fd) < 0)
		return smux__file_fail(fb, err, errno, "fsync", key);
	return 0;
}

int smux__file_tmp_publish(const struct smux__file *fb,
			   struct smux__file_tmp *t, const char *name,
			   bool sync, const char *key, struct smux_info *info,
			   struct smux_error *err)
{
	struct stat st;

	int r = renameat(t->workfd, t->name, t->dirfd, name);

	smux__file_ns_changed(fb);
	if (r < 0)
		return smux__file_fail(fb, err, errno, "rename into", key);
	t->name[0] = '\0';
	if (sync && smux__file_sync_dir(fb, t->dirfd) < 0)
		return smux__file_fail(fb, err, errno, "fsync directory of",
				       key);
	if (info) {
		if (fstat(t->fd, &st) < 0)
			return smux__file_fail(fb, err, errno, "stat", key);
		smux__file_fill_info(&st, info);
	}
	return 0;
}

void smux__file_tmp_discard(struct smux__file_tmp *t)
{
	if (t->name[0])
		unlinkat(t->workfd, t->name, 0);
	t->name[0] = '\0';
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

/* ---- the work folder ---- */

/* One pass over the work folder @fd removing what it lists; the count. */
static unsigned fileb_work_sweep_pass(int fd)
{
	unsigned n = 0;
	struct dirent *de;
	DIR *d;
	int dup;

	dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0)
		return 0;
	d = fdopendir(dup);
	if (!d) {
		close(dup);
		return 0;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0 ||
		    (errno == EISDIR &&
		     unlinkat(fd, de->d_name, AT_REMOVEDIR) == 0))
			n++;
	}
	closedir(d);
	return n;
}

/* Removes every entry of the work folder @fd (leftovers of a run that
 * died; an empty directory someone made there goes too). readdir may miss
 * entries while the directory shrinks, so passes repeat while one finds
 * something. */
static unsigned fileb_work_sweep(int fd)
{
	unsigned n = 0, pass, i;

	for (i = 0; i < 4; i++) {
		pass = fileb_work_sweep_pass(fd);
		n += pass;
		if (!pass)
			break;
	}
	return n;
}

int smux__file_work_open(struct smux__file *fb, struct smux_error *err)
{
	int fd, e;

	fb->work_fd = -1;
	fb->swept = 0;
	if (fb->read_only) {
		fb->work_errno = EROFS;
		return 0;
	}
	if (mkdirat(fb->root_fd, SMUX__FILE_WORK_DIR, 0700) < 0 &&
	    errno != EEXIST) {
		e = errno;
		if (e == EROFS || e == EACCES || e == EPERM) {
			/* Readable all the same; writes say why not. */
			fb->work_errno = e;
			return 0;
		}
		return smux__file_fail(fb, err, e, "create work folder",
				       SMUX__FILE_WORK_DIR);
	}
	fd = smux__file_open(fb->root_fd, SMUX__FILE_WORK_DIR,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (fd < 0)
		return smux__file_fail(fb, err, -fd, "open work folder",
				       SMUX__FILE_WORK_DIR);
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		fb->swept = fileb_work_sweep(fd);
		/* Not atomic, and need not be: nothing of ours is in the
		 * folder yet for another opener's sweep to remove. */
		if (flock(fd, LOCK_SH) < 0)
			goto out_fail;
	} else if (errno != EWOULDBLOCK || flock(fd, LOCK_SH) < 0) {
		goto out_fail;
	}
	fb->work_fd = fd;
	return 0;

out_fail:
	e = errno;
	close(fd);
	return smux__file_fail(fb, err, e, "lock work folder",
			       SMUX__FILE_WORK_DIR);
}

/* ---- byte moving ---- */

int smux__file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int smux__file_fallocate(const struct smux__file *fb, int fd, int mode,
			 uint64_t off, uint64_t len, const char *key,
			 struct smux_error *err)
{
	char why[64];
	int e;

	while (fallocate(fd, mode, (off_t)off, (off_t)len) < 0) {
		e = errno;
		if (e == EINTR)
			continue;
		if (e != EOPNOTSUPP && e != ENOSPC && e != EDQUOT &&
		    e != EFBIG && e != EINVAL)
			return smux__file_fail(fb, err, e, "fallocate", key);
		smux_error_set(err,
			       e == EOPNOTSUPP ? SMUX_E_NOT_SUPPORTED
					       : SMUX_E_INVALID_ARGUMENT,
			       fb->base.name,
			       "fallocate \"%s\" (mode %#x): refused by the "
			       "local filesystem (%s)",
			       key, (unsigned)mode,
			       strerror_r(e, why, sizeof(why)));
		if (err)
			err->e.sys_errno = e;
		return -e;
	}
	return 0;
}

/* copy_file_range errors that mean "not here, use read/write". */
static bool fileb_cfr_unsupported(int e)
{
	return e == EXDEV || e == EINVAL || e == ENOSYS || e == EOPNOTSUPP ||
	       e == EBADF || e == ETXTBSY || e == EPERM;
}

static int fileb_copy_slow(const struct smux__file *fb,
			   const struct smux_ctx *ctx, int in, uint64_t in_off,
			   int out, uint64_t out_off, uint64_t len,
			   const char *key, struct smux_error *err)
{
	size_t cap = len < SMUX_IO_CHUNK ? (size_t)len : SMUX_IO_CHUNK;
	unsigned char *buf;
	int rc = 0;

	buf = malloc(cap ? cap : 1);
	if (!buf)
		return smux__file_fail(fb, err, ENOMEM, "copy", key);
	while (len) {
		size_t want = len < cap ? (size_t)len : cap;
		ssize_t n;

		rc = smux__file_check_ctx(fb, ctx, err);
		if (rc)
			break;
		n = pread(in, buf, want, (off_t)in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = smux__file_fail(fb, err, errno, "read source of",
					     key);
			break;
		}
		if (n == 0) {
			rc = smux_error_set(
				err, SMUX_E_IO, fb->base.name,
				"copy to \"%s\": source ended early", key);
			break;
		}
		rc = smux__file_pwrite_all(out, buf, (size_t)n, out_off);
		if (rc) {
			rc = smux__file_fail(fb, err, -rc, "write", key);
			break;
		}
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	free(buf);
	return rc;
}

int smux__file_copy_fd(const struct smux__file *fb, const struct smux_ctx *ctx,
		       int in, uint64_t in_off, int out, uint64_t out_off,
		       uint64_t len, const char *key, struct smux_error *err)
{
	/* Big steps: the kernel may reflink; still check ctx between. */
	const uint64_t step = 16 * (uint64_t)SMUX_IO_CHUNK;
	int rc;

	while (len) {
		loff_t ioff = (loff_t)in_off, ooff = (loff_t)out_off;
		ssize_t n;

		rc = smux__file_check_ctx(fb, ctx, err);
		if (rc)
			return rc;
		n = copy_file_range(in, &ioff, out, &ooff,
				    (size_t)(len < step ? len : step), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && fileb_cfr_unsupported(errno))
			return fileb_copy_slow(fb, ctx, in, in_off, out,
					       out_off, len, key, err);
		if (n < 0)
			return smux__file_fail(fb, err, errno, "copy to", key);
		if (n == 0)
			return smux_error_set(err, SMUX_E_IO, fb->base.name,
					      "copy to \"%s\": source ended "
					      "early",
					      key);
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Streams @src into @fd from offset 0. */
