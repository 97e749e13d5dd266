/* SPDX-License-Identifier: MIT */
/*
 * backends/file.c - the file backend: a local directory as a backend.
 *
 * Owns: the instance (the root directory fd) and get/put/del/head/copy/
 * rename/link/setattr/healthcheck/statfs. Symlinks, FIFOs and sockets
 * are in file_special.c. Containment helpers live in file_path.c, temp files
 * and copying in file_tmp.c, listing in file_list.c, the writer in
 * file_writer.c (file_internal.h ties them together).
 *
 * Never touches anything outside the root: every path goes through
 * smux__file_open() (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV); operations taking a dirfd and a
 * name first open the parent that way and then act on one component
 * without following it. A symlink inside the root is never followed: it is
 * refused with PERMISSION_DENIED and never listed. Mount points beneath
 * the root are not crossed (RESOLVE_NO_XDEV). The configured root path
 * itself is opened with open(2), so it may be a symlink the operator chose.
 *
 * Threads: the instance is immutable after smux_file_new(); every operation
 * may run concurrently. Atomic replacement comes from rename(2).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backends/file_internal.h"

static const struct smux_backend_ops fileb_ops;

struct smux__file *smux__file_from(struct smux_backend *b)
{
	if (!b || b->ops != &fileb_ops)
		return NULL;
	return (struct smux__file *)b;
}

static int fileb_not_file(struct smux_backend *b, struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b ? b->name : NULL,
			      "not a file backend");
}

static int fileb_fill(const struct smux__file *fb, const struct smux_ctx *ctx,
		      const struct smux_source *src, int fd, const char *key,
		      struct smux_error *err)
{
	uint64_t pos = 0, len = src ? src->length : 0;
	size_t cap = len < SMUX_IO_CHUNK ? (size_t)len : SMUX_IO_CHUNK;
	unsigned char *buf;
	int rc = 0;

	if (!len)
		return 0;
	if (src->kind == SMUX_SOURCE_FD)
		return smux__file_copy_fd(fb, ctx, src->u.fd.fd,
					  src->u.fd.offset, fd, 0, len, key,
					  err);
	buf = malloc(cap);
	if (!buf)
		return smux__file_fail(fb, err, ENOMEM, "put", key);
	while (pos < len) {
		long n;

		rc = smux__file_check_ctx(fb, ctx, err);
		if (rc)
			break;
		n = smux_source_read(src, pos, buf,
				     len - pos < cap ? (size_t)(len - pos)
						     : cap);
		if (n < 0) {
			rc = smux__file_fail(fb, err, (int)-n, "read source of",
					     key);
			break;
		}
		if (n == 0) {
			rc = smux_error_set(
				err, SMUX_E_IO, fb->base.name,
				"put \"%s\": source ended at %" PRIu64
				" of %" PRIu64 " bytes",
				key, pos, len);
			break;
		}
		rc = smux__file_pwrite_all(fd, buf, (size_t)n, pos);
		if (rc) {
			rc = smux__file_fail(fb, err, -rc, "write", key);
			break;
		}
		pos += (uint64_t)n;
	}
	free(buf);
	return rc;
}

/* ---- operations ---- */

/* The end of a put made in @fd itself (a directory marker, an in-place
 * repair): the mode and mtime asked, an fsync when @sync, its info. */
static int put_finish(const struct smux__file *fb, int fd,
		      const struct smux_put_opts *opts, bool sync,
		      const char *key, struct smux_info *info,
		      struct smux_error *err)
{
	struct stat st;
	int rc;

	if (smux__file_put_has_mode(opts) &&
	    fchmod(fd, (mode_t)(opts->mode & 07777)) < 0)
		return smux__file_fail(fb, err, errno, "chmod", key);
	if (smux_put_has_mtime(opts)) {
		rc = smux__file_set_mtime(fd, opts->mtime_ns);
		if (rc)
			return smux__file_fail(fb, err, -rc, "set mtime of",
					       key);
	}
	if (sync && fsync(fd) < 0)
		return smux__file_fail(fb, err, errno, "fsync", key);
	if (info) {
		if (fstat(fd, &st) < 0)
			return smux__file_fail(fb, err, errno, "stat", key);
		smux__file_fill_info(&st, info);
	}
	return 0;
}

static int fileb_put_dir(const struct smux__file *fb, const char *path,
			 const char *key, const struct smux_source *src,
			 const struct smux_put_opts *opts,
			 struct smux_info *info, struct smux_error *err)
{
	int fd, rc = 0;

	if (src && src->length)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      fb->base.name,
				      "directory marker \"%s\" takes no "
				      "content",
				      key);
	/* a marker is mkdir(2): durable when a program asks (sync) */
	rc = smux__file_mkdirs(fb, path, false, &fd, "put", key, err);
	if (rc)
		return rc;
	if (opts && (opts->flags & SMUX_PUT_OWNER)) {
		rc = smux__file_set_owner(fd, opts->uid, opts->gid);
		if (rc)
			rc = smux__file_fail(fb, err, -rc, "chown", key);
	}
	if (!rc)
		rc = put_finish(fb, fd, opts, false, key, info, err);
	close(fd);
	return rc;
}

/*
 * SMUX_PUT_INPLACE on a file with other names (@old): the content is
 * written into that file (its inode, and so every name of it, kept), cut
 * to the source's length, then given the mode and mtime asked and made
 * durable. Not atomic: the caller (a repair) marked the replica stale.
 */
static int fileb_put_inplace(struct smux__file *fb, const struct smux_ctx *ctx,
			     int dirfd, const char *name, const char *key,
			     const struct smux_source *src,
			     const struct smux_put_opts *opts,
			     const struct stat *old, struct smux_info *info,
			     struct smux_error *err)
{
	uint64_t len = src ? src->length : 0;
	struct stat st;
	int fd, rc;

	fd = smux__file_open(dirfd, name, O_WRONLY | O_NOCTTY | O_NOFOLLOW, 0);
	if (fd < 0)
		return smux__file_fail(fb, err, -fd, "put", key);
	if (fstat(fd, &st) < 0 || st.st_ino != old->st_ino ||
	    st.st_dev != old->st_dev) {
		close(fd); /* replaced meanwhile: not the file looked at */
		return smux__file_fail(fb, err, EAGAIN, "put", key);
	}
	rc = fileb_fill(fb, ctx, src, fd, key, err);
	if (!rc && ftruncate(fd, (off_t)len) < 0)
		rc = smux__file_fail(fb, err, errno, "truncate", key);
	if (!rc) {
		rc = smux__file_put_owner(fd, opts, old);
		if (rc)
			rc = smux__file_fail(fb, err, -rc, "chown", key);
	}
	if (!rc)
		rc = put_finish(fb, fd, opts, !fb->no_fsync, key, info, err);
	close(fd);
	return rc;
}

static int fileb_put(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_source *src,
		     const struct smux_put_opts *opts, struct smux_info *info,
		     struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	struct smux__file_tmp t = {.fd = -1};
	char path[SMUX_KEY_MAX + 1];
	const char *name;
	bool is_dir, exists;
	struct stat old;
	int dirfd, rc;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	if (is_dir)
		return fileb_put_dir(fb, path, key, src, opts, info, err);
	rc = smux__file_open_parent(fb, path, O_RDONLY, SMUX__FILE_CREATE_SYNC,
				    &dirfd, &name, "put", key, err);
	if (rc)
		return rc;
	if (opts && smux__file_is_special(opts->mode)) {
		rc = smux__file_check_replace(fb, dirfd, name, key, &exists,
					      err);
		if (!rc)
			rc = smux__file_put_special_src(fb, dirfd, name, key,
							src, opts, info, err);
		goto out_close_dir;
	}
	rc = smux__file_check_replace(fb, dirfd, name, key, &exists, err);
	if (rc)
		goto out_close_dir;
	/* the owner a replaced object had is kept (put_owner) */
	if (exists && fstatat(dirfd, name, &old, AT_SYMLINK_NOFOLLOW) < 0)
		exists = false;
	if (exists && opts && (opts->flags & SMUX_PUT_INPLACE) &&
	    S_ISREG(old.st_mode) && old.st_nlink > 1) {
		rc = fileb_put_inplace(fb, ctx, dirfd, name, key, src, opts,
				       &old, info, err);
		goto out_close_dir;
	}
	rc = smux__file_tmp_create(fb, dirfd, &t, key, err);
	if (rc)
		goto out_close_dir;
	rc = fileb_fill(fb, ctx, src, t.fd, key, err);
	if (!rc) {
		/* the owner before the mode: a chown clears setuid */
		rc = smux__file_put_owner(t.fd, opts, exists ? &old : NULL);
		if (rc)
			rc = smux__file_fail(fb, err, -rc, "chown", key);
	}
	if (!rc)
		rc = smux__file_tmp_seal(
			fb, &t,
			smux__file_put_has_mode(opts) ? opts->mode
						      : SMUX__FILE_DEFAULT_MODE,
			smux_put_has_mtime(opts) ? opts->mtime_ns
						 : SMUX__FILE_MTIME_NOW,
			!fb->no_fsync, key, err);
	if (!rc)
		rc = smux__file_tmp_publish(fb, &t, name, !fb->no_fsync, key,
					    info, err);
	smux__file_tmp_discard(&t);
out_close_dir:
	close(dirfd);
	return rc;
}

/* Opens @path read-only: the shared start of get, copy and setattr. A
 * directory is IS_DIRECTORY unless @allow_dir, anything else not regular
 * is refused, a missing file (or a path through a file) is KEY_NOT_FOUND,
 * and so is a file named by a marker key (@is_dir). */
int smux__file_open_object(const struct smux__file *fb, const char *path,
			   bool is_dir, bool allow_dir, const char *op,
			   const char *key, struct stat *st,
			   struct smux_error *err)
{
	int fd, e = 0, rc;

	fd = smux__file_open(fb->root_fd, path,
			     O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0);
	if (fd < 0) {
		e = fd == -ENOTDIR ? ENOENT : -fd;
	} else if (fstat(fd, st) < 0) {
		e = errno ? errno : EIO;
	} else if (S_ISDIR(st->st_mode)) {
		e = allow_dir ? 0 : EISDIR;
	} else if (is_dir) {
		e = ENOENT;
	} else if (!S_ISREG(st->st_mode)) {
		e = -1; /* a fifo, socket, device: refused */
	}
	if (!e)
		return fd;
	if (fd >= 0)
		close(fd);
	if (e < 0)
		rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				    fb->base.name,
				    "%s \"%s\": not a regular file", op, key);
	else
		rc = smux__file_fail(fb, err, e, op, key);
	return rc < 0 ? rc : -EIO; /* never a valid fd */
}

/*
 * get of a symlink (its target), a FIFO or a socket (nothing), looked at
 * without following it, after the open refused it with @refused.
 */
static int fileb_get_special(const struct smux__file *fb, const char *path,
			     const char *key, const struct smux_get_opts *opts,
			     struct smux_sink *sink, struct smux_info *info,
			     int refused, struct smux_error *err)
{
	char target[PATH_MAX];
	struct smux_info local;
	struct smux_error mine;
	uint64_t off, want, size;
	struct stat st;
	int rc;

	rc = smux__file_find_special(fb, path, key, "get", &st, target, &mine);
	if (rc == 0)
		return refused; /* not special: the open's answer stands */
	if (rc < 0) {
		if (err)
			*err = mine;
		return rc;
	}
	smux_error_clear(err);
	smux__file_fill_info(&st, &local);
	local.size = (uint64_t)st.st_size;
	if (info)
		*info = local;
	if (opts && opts->if_match && opts->if_match[0] &&
	    strcmp(opts->if_match, local.etag) != 0)
		return smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				      fb->base.name,
				      "get \"%s\": version changed (etag %s, "
				      "wanted %s)",
				      key, local.etag, opts->if_match);
	size = local.size;
	off = opts ? opts->offset : 0;
	want = opts ? opts->length : SMUX_LEN_ALL;
	if (off >= size || !want)
		return 0;
	if (want > size - off)
		want = size - off;
	rc = smux_sink_write(sink, target + off, (size_t)want);
	if (rc)
		return smux__file_fail(fb, err, -rc, "get: sink refused", key);
	return 0;
}

static int fileb_get(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, const struct smux_get_opts *opts,
		     struct smux_sink *sink, struct smux_info *info,
		     struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1];
	struct smux_info local;
	uint64_t off, want, size;
	unsigned char *buf = NULL;
	struct stat st;
	bool is_dir;
	size_t cap;
	int fd, rc;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	fd = smux__file_open_object(fb, path, is_dir, false, "get", key, &st,
				    err);
	if (fd < 0 && fd != -ENOENT && fd != -EISDIR && !is_dir)
		return fileb_get_special(fb, path, key, opts, sink, info, fd,
					 err);
	if (fd < 0)
		return fd;
	smux__file_fill_info(&st, &local);
	if (info)
		*info = local;
	if (opts && opts->if_match && opts->if_match[0] &&
	    strcmp(opts->if_match, local.etag) != 0) {
		rc = smux_error_set(err, SMUX_E_PRECONDITION_FAILED,
				    fb->base.name,
				    "get \"%s\": version changed (etag %s, "
				    "wanted %s)",
				    key, local.etag, opts->if_match);
		goto out_close;
	}
	size = local.size;
	off = opts ? opts->offset : 0;
	want = opts ? opts->length : SMUX_LEN_ALL;
	if (off >= size || !want)
		goto out_close;
	if (want > size - off)
		want = size - off;
	cap = want < SMUX_IO_CHUNK ? (size_t)want : SMUX_IO_CHUNK;
	buf = malloc(cap);
	if (!buf) {
		rc = smux__file_fail(fb, err, ENOMEM, "get", key);
		goto out_close;
	}
	while (want) {
		ssize_t n;

		rc = smux__file_check_ctx(fb, ctx, err);
		if (rc)
			break;
		n = pread(fd, buf, want < cap ? (size_t)want : cap, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = smux__file_fail(fb, err, errno, "read", key);
			break;
		}
		if (n == 0) {
			rc = smux_error_set(err, SMUX_E_IO, fb->base.name,
					    "get \"%s\": file shrank while "
					    "being read",
					    key);
			break;
		}
		rc = smux_sink_write(sink, buf, (size_t)n);
		if (rc) {
			rc = smux__file_fail(fb, err, -rc, "get: sink refused",
					     key);
			break;
		}
		off += (uint64_t)n;
		want -= (uint64_t)n;
	}
	free(buf);
out_close:
	close(fd);
	return rc;
}

/*
 * head("a") where "a" is a directory answers with S_IFDIR info (size 0)
 * rather than KEY_NOT_FOUND, so the filesystem layer can stat a directory
 * whichever way it spells the key; head("a/") answers only for a
 * directory.
 */
static int fileb_head(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_info *info,
		      struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1];
	const char *name;
	struct stat st;
	bool is_dir;
	int dirfd, rc;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	rc = smux__file_open_parent(fb, path, O_PATH, false, &dirfd, &name,
				    "head", key, err);
	if (rc == -ENOTDIR)
		return smux__file_fail(fb, err, ENOENT, "head", key);
	if (rc)
		return rc;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = smux__file_fail(fb, err, errno, "head", key);
	else if (is_dir && !S_ISDIR(st.st_mode))
		rc = smux__file_fail(fb, err, ENOENT, "head", key);
	else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) &&
		 !smux__file_is_special(st.st_mode))
		rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				    fb->base.name,
				    "head \"%s\": not a regular file, "
				    "symlink, FIFO or socket",
				    key);
	else
		smux__file_fill_info(&st, info);
	close(dirfd);
	return rc;
}

static int fileb_del(struct smux_backend *b, const struct smux_ctx *ctx,
		     const char *key, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1];
	const char *name;
	struct stat st;
	bool is_dir;
	int dirfd, rc;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	rc = smux__file_open_parent(fb, path, O_RDONLY, false, &dirfd, &name,
				    "delete", key, err);
	if (rc == -ENOENT || rc == -ENOTDIR) {
		smux_error_clear(err);
		return 0; /* already absent */
	}
	if (rc)
		return rc;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			rc = smux__file_fail(fb, err, errno, "delete", key);
		goto out_close;
	}
	if ((bool)S_ISDIR(st.st_mode) != is_dir) {
		/* "a/" of a file "a" names no marker: nothing to remove. */
		if (!is_dir)
			rc = smux_error_set(
				err, SMUX_E_IS_DIRECTORY, fb->base.name,
				"delete \"%s\": is a directory", key);
		else if (!S_ISREG(st.st_mode))
			goto refuse; /* "a/" of a symlink names nothing */
		goto out_close;
	}
	/* a symlink is removed itself, never what it points to */
	if (!is_dir && !S_ISREG(st.st_mode) &&
	    !smux__file_is_special(st.st_mode))
		goto refuse;
	rc = unlinkat(dirfd, name, is_dir ? AT_REMOVEDIR : 0);
	smux__file_ns_changed(fb);
	if (rc < 0) {
		int e = errno;

		rc = 0;
		if (e == ENOENT)
			goto out_close;
		if (e == EEXIST)
			e = ENOTEMPTY;
		rc = smux__file_fail(fb, err, e, "delete", key);
		goto out_close;
	}
	/* No directory fsync: a delete is as durable as the local
	 * filesystem makes an unlink (as mergerfs and plain rm do); data
	 * writes (put, durable commits, rename) are the ones synced. */
	goto out_close;
refuse:
	rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED, fb->base.name,
			    "delete \"%s\": not a regular file, symlink, "
			    "FIFO or socket",
			    key);
out_close:
	close(dirfd);
	return rc;
}

/* copy of a marker onto a marker: the source directory must exist. */
static int fileb_copy_dir(const struct smux__file *fb, const char *src_path,
			  const char *src, const char *dst_path,
			  const char *dst, struct smux_error *err)
{
	int fd;

	fd = smux__file_open(fb->root_fd, src_path, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return smux__file_fail(fb, err, fd == -ENOTDIR ? ENOENT : -fd,
				       "copy from", src);
	close(fd);
	return fileb_put_dir(fb, dst_path, dst, NULL, NULL, NULL, err);
}

/* copy of a symlink (a symlink with the same target), FIFO or socket, with
 * its mode and mtime, after the open refused it with @refused. */
static int fileb_copy_special(const struct smux__file *fb, const char *src_path,
			      const char *src, const char *dst_path,
			      const char *dst, int refused,
			      struct smux_error *err)
{
	char target[PATH_MAX];
	struct smux_error mine;
	const char *name;
	struct stat st;
	bool exists;
	int dirfd, rc;

	rc = smux__file_find_special(fb, src_path, src, "copy from", &st,
				     target, &mine);
	if (rc == 0)
		return refused;
	if (rc < 0) {
		if (err)
			*err = mine;
		return rc;
	}
	smux_error_clear(err);
	rc = smux__file_open_parent(fb, dst_path, O_RDONLY, true, &dirfd, &name,
				    "copy to", dst, err);
	if (rc)
		return rc;
	rc = smux__file_check_replace(fb, dirfd, name, dst, &exists, err);
	if (!rc)
		rc = smux__file_put_special(
			fb, dirfd, name, dst, st.st_mode, target,
			smux_time_ns(st.st_mtim.tv_sec, st.st_mtim.tv_nsec),
			geteuid() == 0 ? st.st_uid : SMUX_ID_NONE,
			geteuid() == 0 ? st.st_gid : SMUX_ID_NONE, NULL, err);
	close(dirfd);
	return rc;
}

static int fileb_copy(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char src_path[SMUX_KEY_MAX + 1], dst_path[SMUX_KEY_MAX + 1];
	struct smux__file_tmp t = {.fd = -1};
	bool src_dir, dst_dir, exists;
	const char *name;
	int64_t mtime_ns;
	int in, dirfd, rc;
	struct stat st;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, src, SMUX_KEY_ALLOW_DIR, src_path,
				 &src_dir, err);
	if (!rc)
		rc = smux__file_key_path(fb, dst, SMUX_KEY_ALLOW_DIR, dst_path,
					 &dst_dir, err);
	if (rc)
		return rc;
	if (src_dir && dst_dir)
		return fileb_copy_dir(fb, src_path, src, dst_path, dst, err);
	if (dst_dir)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      fb->base.name,
				      "copy \"%s\" to \"%s\": an object cannot "
				      "become a directory marker",
				      src, dst);
	in = smux__file_open_object(fb, src_path, src_dir, false, "copy from",
				    src, &st, err);
	if (in < 0 && in != -ENOENT && in != -EISDIR && !src_dir)
		return fileb_copy_special(fb, src_path, src, dst_path, dst, in,
					  err);
	if (in < 0)
		return in;
	rc = smux__file_open_parent(fb, dst_path, O_RDONLY,
				    SMUX__FILE_CREATE_SYNC, &dirfd, &name,
				    "copy to", dst, err);
	if (rc)
		goto out_close_in;
	rc = smux__file_check_replace(fb, dirfd, name, dst, &exists, err);
	if (!rc)
		rc = smux__file_tmp_create(fb, dirfd, &t, dst, err);
	if (!rc)
		rc = smux__file_copy_fd(fb, ctx, in, 0, t.fd, 0,
					(uint64_t)st.st_size, dst, err);
	/* Keep owner (where the daemon may), mode and mtime, as mv and S3
	 * CopyObject do. */
	mtime_ns = smux_time_ns(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (!rc) {
		rc = smux__file_put_owner(t.fd, NULL, &st);
		if (rc)
			rc = smux__file_fail(fb, err, -rc, "chown", dst);
	}
	if (!rc)
		rc = smux__file_tmp_seal(fb, &t, st.st_mode & 07777, mtime_ns,
					 !fb->no_fsync, dst, err);
	if (!rc)
		rc = smux__file_tmp_publish(fb, &t, name, !fb->no_fsync, dst,
					    NULL, err);
	smux__file_tmp_discard(&t);
	close(dirfd);
out_close_in:
	close(in);
	return rc;
}

/*
 * A directory "a/" renamed to "b/" with one rename(2) (SMUX_CAP_DIR_RENAME):
 * atomic, O(1), the tree keeps its inodes. "b/" may be absent (its parents
 * are created) or an empty directory (replaced); a non-empty one is
 * NOT_EMPTY, a file NOT_DIRECTORY, a move into itself INVALID_ARGUMENT.
 */
static int fileb_rename_dir(const struct smux__file *fb, const char *src,
			    const char *dst, struct smux_error *err)
{
	char src_path[SMUX_KEY_MAX + 1], dst_path[SMUX_KEY_MAX + 1];
	const char *src_name, *dst_name;
	bool src_dir = false, dst_dir = false;
	int sfd, dfd = -1, rc;
	struct stat st;

	rc = smux__file_key_path(fb, src, SMUX_KEY_ALLOW_DIR, src_path,
				 &src_dir, err);
	if (!rc)
		rc = smux__file_key_path(fb, dst, SMUX_KEY_ALLOW_DIR, dst_path,
					 &dst_dir, err);
	if (rc)
		return rc;
	if (!src_dir || !dst_dir)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      fb->base.name,
				      "rename \"%s\" to \"%s\": a directory "
				      "renames onto a directory key",
				      src, dst);
	rc = smux__file_open_parent(fb, src_path, O_RDONLY, false, &sfd,
				    &src_name, "rename", src, err);
	if (rc == -ENOTDIR)
		return smux__file_fail(fb, err, ENOENT, "rename", src);
	if (rc)
		return rc;
	if (fstatat(sfd, src_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = smux__file_fail(fb, err, errno, "rename", src);
	else if (!S_ISDIR(st.st_mode))
		rc = smux__file_fail(fb, err, ENOENT, "rename", src);
	if (!rc)
		rc = smux__file_open_parent(fb, dst_path, O_RDONLY, true, &dfd,
					    &dst_name, "rename to", dst, err);
	if (!rc && renameat(sfd, src_name, dfd, dst_name) < 0)
		rc = smux__file_fail(fb, err,
				     errno == EEXIST ? ENOTEMPTY : errno,
				     "rename", src);
	smux__file_ns_changed(fb);
	/* as an object rename: durable when a program asks (sync) */
	if (dfd >= 0)
		close(dfd);
	close(sfd);
	return rc;
}

/*
 * rename(2) beneath the root: atomic, and the object keeps its inode, mode
 * and mtime; durable once the key (or its directories) is synced. The
 * source is a regular file or a special object (a symlink moves as a
 * symlink); the target may be absent, a regular file or a special object
 * (replaced itself, never followed), never a directory.
 */
static int fileb_rename(struct smux_backend *b, const struct smux_ctx *ctx,
			const char *src, const char *dst,
			struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char src_path[SMUX_KEY_MAX + 1], dst_path[SMUX_KEY_MAX + 1];
	const char *src_name, *dst_name;
	int src_dir, dst_dir = -1, rc;
	bool is_dir, exists;
	struct stat st;

	if (!fb)
		return fileb_not_file(b, err);
	if (smux_key_is_dir(src) || smux_key_is_dir(dst))
		return fileb_rename_dir(fb, src, dst, err);
	rc = smux__file_key_path(fb, src, SMUX_KEY_OBJECT, src_path, &is_dir,
				 err);
	if (!rc)
		rc = smux__file_key_path(fb, dst, SMUX_KEY_OBJECT, dst_path,
					 &is_dir, err);
	if (rc)
		return rc;
	rc = smux__file_open_parent(fb, src_path, O_RDONLY, false, &src_dir,
				    &src_name, "rename", src, err);
	if (rc == -ENOTDIR)
		return smux__file_fail(fb, err, ENOENT, "rename", src);
	if (rc)
		return rc;
	if (fstatat(src_dir, src_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = smux__file_fail(fb, err, errno, "rename", src);
	else if (S_ISDIR(st.st_mode))
		rc = smux__file_fail(fb, err, EISDIR, "rename", src);
	else if (!S_ISREG(st.st_mode) && !smux__file_is_special(st.st_mode))
		rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				    fb->base.name,
				    "rename \"%s\": not a regular file, "
				    "symlink, FIFO or socket",
				    src);
	if (!rc)
		rc = smux__file_open_parent(fb, dst_path, O_RDONLY, true,
					    &dst_dir, &dst_name, "rename to",
					    dst, err);
	if (!rc)
		rc = smux__file_check_replace(fb, dst_dir, dst_name, dst,
					      &exists, err);
	/* No directory fsync: durable when a program asks (sync of the
	 * key or of the directories), as rename(2) is. */
	if (!rc && renameat(src_dir, src_name, dst_dir, dst_name) < 0)
		rc = smux__file_fail(fb, err, errno, "rename", src);
	smux__file_ns_changed(fb);
	if (dst_dir >= 0)
		close(dst_dir);
	close(src_dir);
	return rc;
}

/*
 * renameat2(RENAME_EXCHANGE) of two names beneath the root
 * (SMUX_CAP_EXCHANGE): atomic, each side keeps its inode (a directory its
 * tree). When only one name holds something, it moves to the other alone
 * (RENAME_NOREPLACE, the other's parents created): what the other name
 * held lives on another member of a mux. Not durable until a program
 * asks (ops->sync), as rename(2).
 */
static int fileb_exchange(struct smux_backend *b, const struct smux_ctx *ctx,
			  const char *a, const char *bname,
			  struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char apath[SMUX_KEY_MAX + 1], bpath[SMUX_KEY_MAX + 1];
	const char *aname, *bn;
	int adir = -1, bdir = -1, rc;
	bool is_dir, ahas, bhas;
	struct stat st;

	(void)ctx;
	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, a, SMUX_KEY_OBJECT, apath, &is_dir, err);
	if (!rc)
		rc = smux__file_key_path(fb, bname, SMUX_KEY_OBJECT, bpath,
					 &is_dir, err);
	if (rc)
		return rc;
	rc = smux__file_open_parent(fb, apath, O_RDONLY, false, &adir, &aname,
				    "exchange", a, err);
	ahas = rc == 0 && fstatat(adir, aname, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (rc && rc != -ENOENT && rc != -ENOTDIR)
		return rc;
	rc = smux__file_open_parent(fb, bpath, O_RDONLY,
				    ahas ? SMUX__FILE_CREATE : false, &bdir,
				    &bn, "exchange", bname, err);
	bhas = rc == 0 && fstatat(bdir, bn, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (rc && rc != -ENOENT && rc != -ENOTDIR)
		goto out;
	if (!ahas && !bhas)
		rc = smux__file_fail(fb, err, ENOENT, "exchange", a);
	else if (ahas && bhas)
		rc = renameat2(adir, aname, bdir, bn, RENAME_EXCHANGE) < 0
			     ? smux__file_fail(fb, err, errno, "exchange", a)
			     : 0;
	else if (ahas)
		rc = renameat2(adir, aname, bdir, bn, RENAME_NOREPLACE) < 0
			     ? smux__file_fail(fb, err, errno, "exchange", a)
			     : 0;
	else {
		/* only @bname holds something: @a's parents made now */
		if (adir >= 0)
			close(adir);
		adir = -1;
		rc = smux__file_open_parent(fb, apath, O_RDONLY,
					    SMUX__FILE_CREATE, &adir, &aname,
					    "exchange", a, err);
		if (!rc &&
		    renameat2(bdir, bn, adir, aname, RENAME_NOREPLACE) < 0)
			rc = smux__file_fail(fb, err, errno, "exchange", bname);
	}
	smux__file_ns_changed(fb);
out:
	if (bdir >= 0)
		close(bdir);
	if (adir >= 0)
		close(adir);
	return rc;
}

/*
 * chmod/chown/utimens in place: no content is rewritten. A marker key or a
 * plain key naming a directory changes the directory. The object is opened
 * O_PATH (never followed), so a file the daemon may not read (mode 0000)
 * still takes attributes; mode and times go through the descriptor's
 * /proc/self/fd link, which names exactly that inode. The owner is set
 * first: the kernel clears setuid/setgid when it changes.
 */
static int fileb_setattr(struct smux_backend *b, const struct smux_ctx *ctx,
			 const char *key, const struct smux_setattr *attr,
			 struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1], proc[64];
	struct timespec ts[2];
	struct stat st;
	bool is_dir;
	int fd, rc;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	fd = smux__file_open(fb->root_fd, path, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0)
		return smux__file_fail(fb, err, fd == -ENOTDIR ? ENOENT : -fd,
				       "setattr", key);
	if (fstat(fd, &st) < 0) {
		rc = smux__file_fail(fb, err, errno, "setattr", key);
		goto out_close;
	}
	if (is_dir && !S_ISDIR(st.st_mode)) {
		rc = smux__file_fail(fb, err, ENOENT, "setattr", key);
		goto out_close;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		/* a symlink, FIFO or socket: never opened, never followed */
		struct smux_error mine;

		rc = smux__file_setattr_special(fb, path, key, attr, &mine);
		if (rc < 0 && err)
			*err = mine;
		else if (rc == 0)
			rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED,
					    fb->base.name,
					    "setattr \"%s\": not a regular "
					    "file",
					    key);
		else
			rc = 0;
		goto out_close;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (attr->flags & SMUX_SET_OWNER) {
		rc = smux__file_set_owner(fd, attr->uid, attr->gid);
		if (rc)
			rc = smux__file_fail(fb, err, -rc, "chown", key);
	}
	if (!rc && (attr->flags & SMUX_SET_MODE) &&
	    chmod(proc, (mode_t)(attr->mode & 07777)) < 0)
		rc = smux__file_fail(fb, err, errno, "chmod", key);
	if (!rc && (attr->flags & (SMUX_SET_MTIME | SMUX_SET_ATIME))) {
		ts[0].tv_sec = ts[1].tv_sec = 0;
		ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
		if (attr->flags & SMUX_SET_ATIME)
			smux__file_timespec(attr->atime_ns, &ts[0]);
		if (attr->flags & SMUX_SET_MTIME)
			smux__file_timespec(attr->mtime_ns, &ts[1]);
		if (utimensat(AT_FDCWD, proc, ts, 0) < 0)
			rc = smux__file_fail(fb, err, errno, "set times of",
					     key);
	}
	/* attributes are metadata: no fsync (see the delete above) */
out_close:
	close(fd);
	return rc;
}

/*
 * fsync(2) where a program asked for durability: an object and its
 * directory (so a rename or create is durable too), or a directory ("a/",
 * "" for the root) itself, which makes its entries durable. A plain key
 * naming a directory is synced with its parent, like an object.
 */
static int fileb_sync(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *key, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1];
	const char *name;
	bool is_dir;
	int fd, dirfd = -1, rc;
	struct stat st;

	if (!fb)
		return fileb_not_file(b, err);
	if (!key[0]) {
		path[0] = '\0';
		is_dir = true;
	} else {
		rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path,
					 &is_dir, err);
		if (rc)
			return rc;
	}
	if (is_dir) {
		fd = smux__file_open(fb->root_fd, path,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
		if (fd < 0)
			return smux__file_fail(fb, err,
					       fd == -ENOTDIR ? ENOENT : -fd,
					       "sync", key);
	} else {
		rc = smux__file_open_parent(fb, path, O_RDONLY, false, &dirfd,
					    &name, "sync", key, err);
		if (rc == -ENOTDIR)
			return smux__file_fail(fb, err, ENOENT, "sync", key);
		if (rc)
			return rc;
		fd = smux__file_open_object(fb, path, false, true, "sync", key,
					    &st, err);
		if (fd < 0) {
			close(dirfd);
			return fd;
		}
	}
	rc = 0;
	if (!fb->no_fsync &&
	    (is_dir ? smux__file_sync_dir(fb, fd) < 0
		    : fsync(fd) < 0 || (dirfd >= 0 &&
					smux__file_sync_dir(fb, dirfd) < 0)))
		rc = smux__file_fail(fb, err, errno, "sync", key);
	close(fd);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

static int fileb_healthcheck(struct smux_backend *b, const struct smux_ctx *ctx,
			     struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	struct stat st;

	if (!fb)
		return fileb_not_file(b, err);
	if (fstat(fb->root_fd, &st) < 0)
		return smux__file_fail(fb, err, errno, "healthcheck", "");
	if (!S_ISDIR(st.st_mode) || st.st_nlink == 0)
		return smux_error_set(err, SMUX_E_IO, fb->base.name,
				      "healthcheck: root directory was "
				      "removed");
	if (faccessat(fb->root_fd, ".", R_OK | X_OK, AT_EACCESS) < 0)
		return smux__file_fail(fb, err, errno, "healthcheck", "");
	return 0;
}

static int fileb_statfs(struct smux_backend *b, const struct smux_ctx *ctx,
			struct smux_statfs *out, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	struct statvfs sv;
	struct stat st;

	if (!fb)
		return fileb_not_file(b, err);
	if (fstatvfs(fb->root_fd, &sv) < 0)
		return smux__file_fail(fb, err, errno, "statfs", "");
	out->total_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
	out->free_bytes = (uint64_t)sv.f_bfree * sv.f_frsize;
	out->avail_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	out->has_avail = true;
	out->total_files = sv.f_files;
	out->free_files = sv.f_favail;
	/* 2 + subdirectories where the filesystem counts them (not btrfs:
	 * 1), less the work folder (file_tmp.c) */
	if (fstat(fb->root_fd, &st) == 0 && st.st_nlink >= 2) {
		uint64_t own = fb->work_fd >= 0 ? 1 : 0;
		uint64_t dirs = (uint64_t)st.st_nlink - 2;

		out->has_root_dirs = true;
		out->root_dirs = dirs > own ? dirs - own : 0;
	}
	if (fstat(fb->root_fd, &st) == 0) {
		out->has_fsid = true;
		out->fsid = (uint64_t)st.st_dev;
	}
	return 0;
}

/*
 * link(2) beneath the root: @dst becomes another name of @src's inode
 * (linkat without AT_SYMLINK_FOLLOW: a symlink is linked itself, never
 * followed), creating @dst's parent directories as put does. EXISTS when
 * @dst exists; a directory cannot be linked.
 */
static int fileb_link(struct smux_backend *b, const struct smux_ctx *ctx,
		      const char *src, const char *dst, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char src_path[SMUX_KEY_MAX + 1], dst_path[SMUX_KEY_MAX + 1];
	const char *src_name, *dst_name;
	int src_dir, dst_dir = -1, rc;
	struct stat st;
	bool is_dir;

	if (!fb)
		return fileb_not_file(b, err);
	rc = smux__file_key_path(fb, src, SMUX_KEY_OBJECT, src_path, &is_dir,
				 err);
	if (!rc)
		rc = smux__file_key_path(fb, dst, SMUX_KEY_OBJECT, dst_path,
					 &is_dir, err);
	if (rc)
		return rc;
	rc = smux__file_open_parent(fb, src_path, O_RDONLY, false, &src_dir,
				    &src_name, "link", src, err);
	if (rc == -ENOTDIR)
		return smux__file_fail(fb, err, ENOENT, "link", src);
	if (rc)
		return rc;
	if (fstatat(src_dir, src_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = smux__file_fail(fb, err, errno, "link", src);
	else if (S_ISDIR(st.st_mode))
		rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				    fb->base.name,
				    "link \"%s\": a directory cannot be "
				    "linked",
				    src);
	else if (!S_ISREG(st.st_mode) && !smux__file_is_special(st.st_mode))
		rc = smux_error_set(err, SMUX_E_PERMISSION_DENIED,
				    fb->base.name,
				    "link \"%s\": not a regular file, "
				    "symlink, FIFO or socket",
				    src);
	if (!rc)
		rc = smux__file_open_parent(fb, dst_path, O_RDONLY, true,
					    &dst_dir, &dst_name, "link to", dst,
					    err);
	if (!rc && linkat(src_dir, src_name, dst_dir, dst_name, 0) < 0)
		rc = smux__file_fail(fb, err, errno, "link to", dst);
	smux__file_ns_changed(fb);
	if (!rc && !fb->no_fsync && smux__file_sync_dir(fb, dst_dir) < 0)
		rc = smux__file_fail(fb, err, errno, "fsync directory of", dst);
	if (dst_dir >= 0)
		close(dst_dir);
	close(src_dir);
	return rc;
}

/* What a local directory can do beyond objects; each bit is the
 * capability of one feature, added with it. */
static unsigned fileb_caps(struct smux_backend *b)
{
	unsigned caps =
		SMUX_CAP_INPLACE | SMUX_CAP_HARDLINK | SMUX_CAP_DIR_RENAME |
		SMUX_CAP_OWNER | SMUX_CAP_XATTR | SMUX_CAP_DIR_GROUP |
		SMUX_CAP_OPEN_EXISTING | SMUX_CAP_ONE_COPY | SMUX_CAP_EXCHANGE |
		SMUX_CAP_LISTS_DOTNAMES | SMUX_CAP_SYMLINK | SMUX_CAP_FIFO;

	/* not while another file system is mounted below the root: a
	 * lookup of its mount point would go there (s45-t3) */
	if (smux__file_from(b)->local_disk &&
	    !smux__file_mounts_below(smux__file_from(b)))
		caps |= SMUX_CAP_INLINE;
	return caps;
}

/*
 * Whether the directory @fd is on a local disk file system, whose calls
 * take the kernel's own I/O time and nothing else: its short calls may
 * run on the caller's thread (SMUX_CAP_INLINE). A network or FUSE file
 * system (NFS, SMB, Ceph, sshfs, another smuxfs), or an overlay over
 * one, can hang a call for good: those always go through the bulkhead's
 * workers with their deadline.
 */
static bool on_local_disk(int fd)
{
	static const unsigned long local[] = {
		EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, BTRFS_SUPER_MAGIC,
		TMPFS_MAGIC,	  RAMFS_MAGIC,	   F2FS_SUPER_MAGIC,
		0x2fc12fc1UL, /* ZFS */
	};
	struct statfs sf;

	if (fstatfs(fd, &sf) != 0)
		return false;
	for (size_t i = 0; i < sizeof(local) / sizeof(*local); i++)
		if ((unsigned long)sf.f_type == local[i])
			return true;
	return false;
}

static void fileb_destroy(struct smux_backend *b)
{
	struct smux__file *fb = smux__file_from(b);

	if (!fb)
		return;
	if (fb->work_fd >= 0)
		close(fb->work_fd); /* drops its flock */
	smux__file_mounts_close(fb);
	close(fb->root_fd);
	pthread_mutex_destroy(&fb->dsync_lock);
	smux_backend_release(&fb->base);
	free(fb);
}

/* ---- directory fsyncs ---- */

/* The bookkeeping of @cfb (file_internal.h), writable. */
static struct smux__file *dsync_of(const struct smux__file *cfb)
{
	return (struct smux__file *)cfb;
}

void smux__file_ns_changed(const struct smux__file *cfb)
{
	atomic_fetch_add_explicit(&dsync_of(cfb)->ns_gen, 1,
				  memory_order_release);
}

int smux__file_sync_dir(const struct smux__file *cfb, int dirfd)
{
	struct smux__file *fb = dsync_of(cfb);
	uint64_t gen;
	struct stat st;
	bool skip;

	if (fstat(dirfd, &st) < 0)
		return -1;
	/* read before the fsync: a change that lands during it bumps the
	 * generation after this value, so it is never taken as synced */
	gen = atomic_load_explicit(&fb->ns_gen, memory_order_acquire);
	pthread_mutex_lock(&fb->dsync_lock);
	skip = fb->dsync_valid && fb->dsync_gen == gen &&
	       fb->dsync_dev == st.st_dev && fb->dsync_ino == st.st_ino;
	pthread_mutex_unlock(&fb->dsync_lock);
	if (skip)
		return 0;
	if (fsync(dirfd) < 0)
		return -1;
	atomic_fetch_add_explicit(&fb->dir_fsyncs, 1, memory_order_relaxed);
	pthread_mutex_lock(&fb->dsync_lock);
	fb->dsync_valid = true;
	fb->dsync_gen = gen;
	fb->dsync_dev = st.st_dev;
	fb->dsync_ino = st.st_ino;
	pthread_mutex_unlock(&fb->dsync_lock);
	return 0;
}

uint64_t smux__file_dir_fsyncs(struct smux_backend *b)
{
	struct smux__file *fb = smux__file_from(b);

	return fb ? atomic_load(&fb->dir_fsyncs) : 0;
}

static const struct smux_backend_ops fileb_ops = {
	.kind = "file",
	.get = fileb_get,
	.put = fileb_put,
	.del = fileb_del,
	.head = fileb_head,
	.list = smux__file_list,
	.copy = fileb_copy,
	.rename = fileb_rename,
	.exchange = fileb_exchange,
	.setattr = fileb_setattr,
	.sync = fileb_sync,
	.healthcheck = fileb_healthcheck,
	.statfs = fileb_statfs,
	.writer_open = smux__file_writer_open,
	.reader_open = smux__file_reader_open,
	.caps = fileb_caps,
	.link = fileb_link,
	.getxattr = smux__file_getxattr,
	.setxattr = smux__file_setxattr,
	.listxattr = smux__file_listxattr,
	.removexattr = smux__file_removexattr,
	.destroy = fileb_destroy,
};

int smux_file_new(const char *name, const struct smux_file_opts *opts,
		  struct smux_backend **out, struct smux_error *err)
{
	struct smux__file *fb;
	struct stat st;
	int fd, probe, rc;

	*out = NULL;
	if (!opts || !opts->path || !opts->path[0])
		return smux_error_set(err, SMUX_E_INVALID_OPTIONS, name,
				      "file backend: no root path given");
	fd = open(opts->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		char what[SMUX_ERROR_MSG_MAX];

		rc = errno;
		snprintf(what, sizeof(what), "file backend root \"%s\"",
			 opts->path);
		if (fd >= 0)
			close(fd);
		return smux_error_from_errno(err, rc, name, what);
	}
	/* openat2 appeared in Linux 5.6; without it nothing is contained. */
	probe = smux__file_open(fd, "", O_PATH | O_DIRECTORY, 0);
	if (probe < 0) {
		close(fd);
		return smux_error_set(err, SMUX_E_NOT_SUPPORTED, name,
				      "file backend root \"%s\": openat2 "
				      "failed (%s); Linux >= 5.6 is needed",
				      opts->path, strerrordesc_np(-probe));
	}
	close(probe);
	fb = calloc(1, sizeof(*fb));
	if (!fb) {
		close(fd);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	rc = smux_backend_init(&fb->base, &fileb_ops, name);
	if (rc) {
		free(fb);
		close(fd);
		return smux_error_set(err, SMUX_E_NO_MEMORY, name, NULL);
	}
	pthread_mutex_init(&fb->dsync_lock, NULL);
	fb->root_fd = fd;
	fb->no_fsync = opts->no_fsync;
	fb->read_only = opts->read_only;
	fb->local_disk = on_local_disk(fd) && !getenv("SMUX_FILE_NO_INLINE");
	fb->mounts.fd = -1;
	pthread_mutex_init(&fb->mounts.lock, NULL);
	if (fb->local_disk && smux__file_mounts_open(fb) != 0)
		fb->local_disk = false; /* unknown: the workers, as ever */
	rc = smux__file_work_open(fb, err);
	if (rc) {
		fb->work_fd = -1;
		fileb_destroy(&fb->base);
		return rc;
	}
	*out = &fb->base;
	return 0;
}

unsigned smux_file_swept(struct smux_backend *b)
{
	struct smux__file *fb = smux__file_from(b);

	return fb ? fb->swept : 0;
}
