/* SPDX-License-Identifier: MIT */
/*
 * backends/file_inplace.c - the file backend's in-place writer
 * (SMUX_WRITER_INPLACE, DESIGN section 6 "Writes").
 *
 * The writer opens the file under the key itself, as a local program
 * would: every pwrite, truncate and fallocate lands in the object at once, readers of
 * the file see it as on any local filesystem, and an append costs the
 * appended bytes. Nothing is staged and nothing is renamed, so there is
 * nothing to roll back: close() keeps what was written. Commit applies the
 * mode, owner and mtime the caller chose (replicas of a mux agree on the
 * version) and, when durable, fsyncs the file (and its directory when this
 * writer created the file, so the new name survives a crash too). The
 * open also says which group the directory gives new objects (a
 * set-group-ID directory's own: smux_writer.dir_group).
 *
 * A crash between the first write and the commit leaves the file as far
 * as it got; the caller journals a write intent before the first write
 * and reconciles replicas at the next mount (src/core/intents.c).
 *
 * O_APPEND writes (SMUX_OFF_APPEND) are pwritev2 with RWF_APPEND, so each
 * lands at the end of the file as it is then, even when another program
 * appends behind our back.
 *
 * Containment: the file is opened with smux__file_open beneath its parent
 * directory (no symlink is ever followed, file_internal.h). A writer is
 * used by one thread at a time (backend.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backends/file_internal.h"

struct fileb_inplace {
	struct smux_writer base; /* first: downcast by inplace_from */
	struct smux__file *fb;	 /* base.backend holds the reference */
	int dirfd;		 /* the parent directory */
	int fd;			 /* the file, O_RDWR */
	bool created;		 /* this writer created the name */
	char *name;		 /* its name in dirfd, while created */
	bool dir_synced;	 /* the new name is durable */
};

static const struct smux_writer_ops inplace_ops;

static struct fileb_inplace *inplace_from(struct smux_writer *w)
{
	if (!w || w->ops != &inplace_ops)
		return NULL;
	return (struct fileb_inplace *)w;
}

static int inplace_bad(struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
			      "not a file backend in-place writer");
}

/* An O_APPEND write: RWF_APPEND (Linux 4.16) on the descriptor we hold,
 * so each piece lands at the end of the file as it is then (the offset is
 * ignored and the descriptor's position stays: every other write here is
 * a pwrite). */
static int inplace_append(struct fileb_inplace *iw, const void *buf, size_t len,
			  struct smux_error *err)
{
	const unsigned char *p = buf;

	while (len) {
		struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
		ssize_t n = pwritev2(iw->fd, &iov, 1, 0, RWF_APPEND);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return smux__file_fail(iw->fb, err, errno, "append to",
					       iw->base.key);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int inplace_pwrite(struct smux_writer *w, const struct smux_ctx *ctx,
			  const void *buf, size_t len, uint64_t off,
			  struct smux_error *err)
{
	struct fileb_inplace *iw = inplace_from(w);
	int rc;

	if (!iw)
		return inplace_bad(err);
	if (!len)
		return 0;
	rc = smux__file_check_ctx(iw->fb, ctx, err);
	if (rc)
		return rc;
	if (off == SMUX_OFF_APPEND)
		return inplace_append(iw, buf, len, err);
	if (off > (uint64_t)INT64_MAX || len > INT64_MAX - off)
		return smux__file_fail(iw->fb, err, EFBIG, "write to", w->key);
	rc = smux__file_pwrite_all(iw->fd, buf, len, off);
	if (rc)
		return smux__file_fail(iw->fb, err, -rc, "write", w->key);
	return 0;
}

static long inplace_pread(struct smux_writer *w, void *buf, size_t len,
			  uint64_t off, struct smux_error *err)
{
	struct fileb_inplace *iw = inplace_from(w);
	unsigned char *p = buf;
	size_t done = 0;

	if (!iw)
		return inplace_bad(err);
	if (len > LONG_MAX)
		len = LONG_MAX;
	if (off > (uint64_t)INT64_MAX)
		return 0;
	while (done < len) {
		ssize_t n = pread(iw->fd, p + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return smux__file_fail(iw->fb, err, errno, "read",
					       w->key);
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long)done;
}

static int inplace_truncate(struct smux_writer *w, const struct smux_ctx *ctx,
			    uint64_t size, struct smux_error *err)
{
	struct fileb_inplace *iw = inplace_from(w);

	if (!iw)
		return inplace_bad(err);
	if (size > (uint64_t)INT64_MAX)
		return smux__file_fail(iw->fb, err, EFBIG, "truncate", w->key);
	if (ftruncate(iw->fd, (off_t)size) < 0)
		return smux__file_fail(iw->fb, err, errno, "truncate", w->key);
	return 0;
}

static int inplace_fallocate(struct smux_writer *w, const struct smux_ctx *ctx,
			     int mode, uint64_t off, uint64_t len,
			     struct smux_error *err)
{
	struct fileb_inplace *iw = inplace_from(w);
	int rc;

	if (!iw)
		return inplace_bad(err);
	rc = smux__file_check_ctx(iw->fb, ctx, err);
	if (rc)
		return rc;
	return smux__file_fallocate(iw->fb, iw->fd, mode, off, len, w->key,
				    err);
}

/* The file's size now: it is the object, and others may write it too. */
static uint64_t inplace_size(struct smux_writer *w)
{
	struct fileb_inplace *iw = inplace_from(w);
	struct stat st;

	if (!iw || fstat(iw->fd, &st) < 0)
		return 0;
	return (uint64_t)st.st_size;
}

static int inplace_commit(struct smux_writer *w, const struct smux_ctx *ctx,
			  const struct smux_put_opts *opts,
			  struct smux_info *info, struct smux_error *err)
{
	struct fileb_inplace *iw = inplace_from(w);
	bool sync, set_mode;
	struct stat st;
	int rc;

	if (!iw)
		return inplace_bad(err);
	rc = smux__file_check_ctx(iw->fb, ctx, err);
	if (rc)
		return rc;
	sync = opts && opts->durable && !iw->fb->no_fsync;
	set_mode = opts && (opts->mode || (opts->flags & SMUX_PUT_MODE));
	if (opts && (opts->flags & SMUX_PUT_OWNER) &&
	    fchown(iw->fd, opts->uid == SMUX_ID_NONE ? (uid_t)-1 : opts->uid,
		   opts->gid == SMUX_ID_NONE ? (gid_t)-1 : opts->gid) < 0)
		return smux__file_fail(iw->fb, err, errno, "chown", w->key);
	/* after chown, which may clear set-id bits */
	if (set_mode && fchmod(iw->fd, (mode_t)(opts->mode & 07777)) < 0)
		return smux__file_fail(iw->fb, err, errno, "chmod", w->key);
	if (smux_put_has_mtime(opts)) {
		rc = smux__file_set_mtime(iw->fd, opts->mtime_ns);
		if (rc)
			return smux__file_fail(iw->fb, err, -rc, "set mtime of",
					       w->key);
	}
	if (sync && fdatasync(iw->fd) < 0)
		return smux__file_fail(iw->fb, err, errno, "fsync", w->key);
	if (sync && iw->created && !iw->dir_synced) {
		if (smux__file_sync_dir(iw->fb, iw->dirfd) < 0)
			return smux__file_fail(iw->fb, err, errno,
					       "fsync directory of", w->key);
		iw->dir_synced = true;
	}
	if (info) {
		if (fstat(iw->fd, &st) < 0)
			return smux__file_fail(iw->fb, err, errno, "stat",
					       w->key);
		smux__file_fill_info(&st, info);
	}
	return 0;
}

static int inplace_stat(struct smux_writer *w, struct smux_info *info)
{
	struct fileb_inplace *iw = inplace_from(w);
	struct stat st;

	if (!iw)
		return -EBADF;
	if (fstat(iw->fd, &st) < 0)
		return -errno;
	smux__file_fill_info(&st, info);
	return 0;
}

static int inplace_setattr(struct smux_writer *w, const struct smux_setattr *a)
{
	struct fileb_inplace *iw = inplace_from(w);

	return iw ? smux__file_fsetattr(iw->fd, a) : -EBADF;
}

/* Its descriptor: the file itself, which the kernel may write directly
 * as pwrite would (sizes and times are always the file's, fstat). */
static int inplace_passthrough_fd(struct smux_writer *w)
{
	struct fileb_inplace *iw = inplace_from(w);

	return iw ? iw->fd : -1;
}

/* The open failed as a whole (smux_writer.unmade): the name this writer
 * created goes, unless it holds another file by now (replaced meanwhile:
 * not ours to remove). */
static void inplace_unmake(struct fileb_inplace *iw)
{
	struct stat mine, now;

	if (fstat(iw->fd, &mine) < 0 ||
	    fstatat(iw->dirfd, iw->name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    mine.st_dev != now.st_dev || mine.st_ino != now.st_ino)
		return;
	if (unlinkat(iw->dirfd, iw->name, 0) == 0)
		smux__file_ns_changed(iw->fb);
}

static void inplace_close(struct smux_writer *w)
{
	struct fileb_inplace *iw = inplace_from(w);

	if (!iw)
		return;
	if (iw->base.unmade && iw->created && iw->name)
		inplace_unmake(iw);
	if (iw->fd >= 0)
		close(iw->fd);
	if (iw->dirfd >= 0)
		close(iw->dirfd);
	smux_writer_release(&iw->base);
	free(iw->name);
	free(iw);
}

static const struct smux_writer_ops inplace_ops = {
	.pwrite = inplace_pwrite,
	.pread = inplace_pread,
	.truncate = inplace_truncate,
	.fallocate = inplace_fallocate,
	.size = inplace_size,
	.commit = inplace_commit,
	.close = inplace_close,
	.stat = inplace_stat,
	.setattr = inplace_setattr,
	.passthrough_fd = inplace_passthrough_fd,
};

/* Opens the file @name of @iw->dirfd: created when absent (0600 until
 * the commit gives it its mode: never readable by others meanwhile)
 * unless SMUX_WRITER_EXISTING, refused when it is not a regular file. */
static int inplace_start(struct fileb_inplace *iw, const char *name,
			 unsigned flags, struct smux_error *err)
{
	const char *key = iw->base.key;
	int oflags = O_RDWR | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK;
	struct stat st;
	int fd;

	if (flags & SMUX_WRITER_EXCL) {
		fd = smux__file_open(iw->dirfd, name, oflags | O_CREAT | O_EXCL,
				     0600);
		smux__file_ns_changed(iw->fb);
		if (fd >= 0)
			iw->created = true;
	} else {
		/* open first: creating only what is absent tells us whether
		 * this writer made the name (its directory needs a sync) */
		fd = smux__file_open(iw->dirfd, name, oflags, 0);
		if (fd == -ENOENT && !(flags & SMUX_WRITER_EXISTING)) {
			fd = smux__file_open(iw->dirfd, name,
					     oflags | O_CREAT | O_EXCL, 0600);
			smux__file_ns_changed(iw->fb);
			if (fd >= 0)
				iw->created = true;
			else if (fd == -EEXIST) /* appeared meanwhile */
				fd = smux__file_open(iw->dirfd, name, oflags,
						     0);
		}
	}
	if (fd == -EEXIST)
		return smux_error_set(err, SMUX_E_ALREADY_EXISTS,
				      iw->fb->base.name, "\"%s\" exists", key);
	if (fd == -ELOOP || fd == -ENXIO || fd == -EXDEV)
		return smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				      iw->fb->base.name,
				      "\"%s\" is not a regular file (symlinks "
				      "are never followed)",
				      key);
	if (fd < 0)
		return smux__file_fail(iw->fb, err, -fd, "open", key);
	iw->fd = fd;
	if (iw->created && !(iw->name = strdup(name))) {
		/* cannot be undone then: refused before anything is written */
		(void)unlinkat(iw->dirfd, name, 0);
		iw->created = false;
		return smux__file_fail(iw->fb, err, ENOMEM, "open", key);
	}
	if (fstat(fd, &st) < 0)
		return smux__file_fail(iw->fb, err, errno, "stat", key);
	if (S_ISDIR(st.st_mode))
		return smux_error_set(err, SMUX_E_IS_DIRECTORY,
				      iw->fb->base.name,
				      "\"%s\" is a directory", key);
	if (!S_ISREG(st.st_mode))
		return smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				      iw->fb->base.name,
				      "\"%s\" is not a regular file", key);
	/* back to blocking I/O (O_NONBLOCK only kept a FIFO from hanging
	 * the open) */
	if (fcntl(fd, F_SETFL, O_RDWR) < 0)
		return smux__file_fail(iw->fb, err, errno, "open", key);
	/* an empty file too: O_TRUNC moves mtime and ctime whatever the
	 * size was, as open(2) on ext4 does (make's `: > stamp`) */
	if ((flags & SMUX_WRITER_TRUNC) && ftruncate(fd, 0) < 0)
		return smux__file_fail(iw->fb, err, errno, "truncate", key);
	/* what a head would say now (a cut file: empty, its times moved) */
	if ((flags & SMUX_WRITER_TRUNC) && fstat(fd, &st) < 0)
		return smux__file_fail(iw->fb, err, errno, "stat", key);
	smux__file_fill_info(&st, &iw->base.info);
	iw->base.has_info = true;
	iw->base.found = !iw->created;
	/* the group the directory gives new objects: a creator's owner
	 * needs it, and asking here costs no call of its own */
	if (fstat(iw->dirfd, &st) < 0)
		return smux__file_fail(iw->fb, err, errno, "stat directory of",
				       key);
	iw->base.dir_group =
		(st.st_mode & S_ISGID) ? (uint32_t)st.st_gid : SMUX_ID_NONE;
	iw->base.has_dir_group = true;
	return 0;
}

int smux__file_inplace_open(struct smux__file *fb, const char *key,
			    const char *path, unsigned flags,
			    struct smux_writer **out, struct smux_error *err)
{
	struct fileb_inplace *iw = calloc(1, sizeof(*iw));
	const char *name;
	int rc;

	if (!iw)
		return smux__file_fail(fb, err, ENOMEM, "open writer for", key);
	iw->fb = fb;
	iw->fd = -1;
	iw->dirfd = -1;
	rc = smux_writer_init(&iw->base, &inplace_ops, &fb->base, key);
	if (rc) {
		free(iw);
		return smux__file_fail(fb, err, ENOMEM, "open writer for", key);
	}
	iw->base.appends = true;
	rc = smux__file_open_parent(fb, path, O_RDONLY,
				    !(flags & SMUX_WRITER_EXISTING), &iw->dirfd,
				    &name, "open writer for", key, err);
	if (!rc)
		rc = inplace_start(iw, name, flags, err);
	if (rc) {
		/* a name it made for an open that fails goes with it */
		iw->base.unmade = true;
		inplace_close(&iw->base);
		return rc;
	}
	*out = &iw->base;
	return 0;
}
