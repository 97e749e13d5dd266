/* SPDX-License-Identifier: MIT */
/*
 * backends/file_writer.c - the file backend's writer (DESIGN section 6).
 *
 * A writer holds one fd, `fd`, with the pending content, in one of two
 * states:
 *
 *  - pending: `fd` is a private temp file ".smux-tmp.*" beside the target
 *    (named `tmp.name`). Writes, truncates and fallocates go to it.
 *  - clean: `fd` is an inode that has been visible under the key: the
 *    object as it was at open (opened without SMUX_WRITER_TRUNC), or what
 *    the last commit published. Reads go to it; nothing writes to it.
 *
 * Commit of a pending writer seals the temp file (mode, mtime; fsync when
 * opts->durable), renames it over the key (then fsyncs the directory when
 * durable): readers see the old or the new content, never a mix. The fd
 * now refers to the published inode, so the writer turns clean. The next
 * pwrite/truncate first makes a fresh temp file as a copy of it
 * (copy_file_range, a reflink where the filesystem can), because writing
 * into the published inode would show half-done writes to readers. The
 * same lazy copy serves open without TRUNC: opening a large file to append
 * costs nothing until the first write, and a writer that never writes
 * never copies.
 *
 * Commit of a clean writer publishes nothing new unless the key no longer
 * names our inode (someone replaced it meanwhile): then our content is
 * copied and published, as the pending content is defined to be. Otherwise
 * only opts->mode/mtime are applied in place (and, when durable, the
 * inode and its directory are fsynced: an earlier commit may not have).
 *
 * close() unlinks an uncommitted temp file; the target is untouched.
 * A writer is used by one thread at a time (backend.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/file_internal.h"

struct fileb_writer {
	struct smux_writer base;   /* first: downcast by fileb_writer_from */
	struct smux__file *fb;	   /* base.backend holds the reference */
	int dirfd;		   /* the target's parent directory */
	const char *name;	   /* last component, inside base.key */
	struct smux__file_tmp tmp; /* pending when tmp.name[0] */
	int fd;			   /* the pending content (see above) */
	uint32_t mode;		   /* permission bits kept without opts */
	uint64_t size;
};

static const struct smux_writer_ops fileb_writer_ops;

static struct fileb_writer *fileb_writer_from(struct smux_writer *w)
{
	if (!w || w->ops != &fileb_writer_ops)
		return NULL;
	return (struct fileb_writer *)w;
}

static bool fileb_writer_pending(const struct fileb_writer *fw)
{
	return fw->tmp.name[0] != '\0';
}

/* A clean writer gets a private copy of its content to write into. */
static int fileb_writer_fork(struct fileb_writer *fw,
			     const struct smux_ctx *ctx, struct smux_error *err)
{
	struct smux__file_tmp t = {.fd = -1};
	int rc;

	rc = smux__file_tmp_create(fw->fb, fw->dirfd, &t, fw->base.key, err);
	if (rc)
		return rc;
	rc = smux__file_copy_fd(fw->fb, ctx, fw->fd, 0, t.fd, 0, fw->size,
				fw->base.key, err);
	if (rc) {
		smux__file_tmp_discard(&t);
		return rc;
	}
	close(fw->fd);
	fw->tmp = t;
	fw->fd = t.fd;
	return 0;
}

static int fileb_writer_bad(struct smux_error *err)
{
	return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, NULL,
			      "not a file backend writer");
}

static int fileb_writer_pwrite(struct smux_writer *w,
			       const struct smux_ctx *ctx, const void *buf,
			       size_t len, uint64_t off, struct smux_error *err)
{
	struct fileb_writer *fw = fileb_writer_from(w);
	int rc;

	if (!fw)
		return fileb_writer_bad(err);
	if (off > (uint64_t)INT64_MAX || len > INT64_MAX - off)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, fw->fb->base.name,
			"write to \"%s\": offset out of range", w->key);
	if (!len)
		return 0;
	rc = smux__file_check_ctx(fw->fb, ctx, err);
	if (!rc && !fileb_writer_pending(fw))
		rc = fileb_writer_fork(fw, ctx, err);
	if (rc)
		return rc;
	rc = smux__file_pwrite_all(fw->fd, buf, len, off);
	if (rc)
		return smux__file_fail(fw->fb, err, -rc, "write", w->key);
	if (off + len > fw->size)
		fw->size = off + len;
	return 0;
}

static long fileb_writer_pread(struct smux_writer *w, void *buf, size_t len,
			       uint64_t off, struct smux_error *err)
{
	struct fileb_writer *fw = fileb_writer_from(w);
	unsigned char *p = buf;
	size_t done = 0;

	if (!fw)
		return fileb_writer_bad(err);
	if (len > LONG_MAX)
		len = LONG_MAX;
	while (done < len && off + done < fw->size) {
		ssize_t n = pread(fw->fd, p + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return smux__file_fail(fw->fb, err, errno, "read back",
					       w->key);
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long)done;
}

static int fileb_writer_truncate(struct smux_writer *w,
				 const struct smux_ctx *ctx, uint64_t size,
				 struct smux_error *err)
{
	struct fileb_writer *fw = fileb_writer_from(w);
	int rc;

	if (!fw)
		return fileb_writer_bad(err);
	if (size > (uint64_t)INT64_MAX)
		return smux_error_set(
			err, SMUX_E_INVALID_ARGUMENT, fw->fb->base.name,
			"truncate \"%s\": size out of range", w->key);
	if (!fileb_writer_pending(fw)) {
		uint64_t keep = fw->size;

		/* Copy only what survives the cut. */
		if (size < keep)
			fw->size = size;
		rc = fileb_writer_fork(fw, ctx, err);
		fw->size = keep;
		if (rc)
			return rc;
	}
	if (ftruncate(fw->fd, (off_t)size) < 0)
		return smux__file_fail(fw->fb, err, errno, "truncate", w->key);
	fw->size = size;
	return 0;
}

/* Into the private copy (forked first, as for a write); the pending size
 * follows an allocation that extends the file. */
static int fileb_writer_fallocate(struct smux_writer *w,
				  const struct smux_ctx *ctx, int mode,
				  uint64_t off, uint64_t len,
				  struct smux_error *err)
{
	struct fileb_writer *fw = fileb_writer_from(w);
	int rc;

	if (!fw)
		return fileb_writer_bad(err);
	rc = smux__file_check_ctx(fw->fb, ctx, err);
	if (!rc && !fileb_writer_pending(fw))
		rc = fileb_writer_fork(fw, ctx, err);
	if (!rc)
		rc = smux__file_fallocate(fw->fb, fw->fd, mode, off, len,
					  w->key, err);
	if (!rc && smux_falloc_extends(mode) && off + len > fw->size)
		fw->size = off + len;
	return rc;
}

static uint64_t fileb_writer_size(struct smux_writer *w)
{
	struct fileb_writer *fw = fileb_writer_from(w);

	return fw ? fw->size : 0;
}

/* True when the key still names the inode behind fw->fd. */
static int fileb_writer_in_place(struct fileb_writer *fw, bool *same,
				 struct smux_error *err)
{
	struct stat mine, there;
	bool exists;
	int rc;

	*same = false;
	if (fstat(fw->fd, &mine) < 0)
		return smux__file_fail(fw->fb, err, errno, "stat",
				       fw->base.key);
	rc = smux__file_check_target(fw->fb, fw->dirfd, fw->name, fw->base.key,
				     &there, &exists, err);
	if (rc)
		return rc;
	*same = exists && there.st_dev == mine.st_dev &&
		there.st_ino == mine.st_ino;
	return 0;
}

/* Applies opts to the published inode of a clean writer; a durable
 * commit also syncs it and its directory (an earlier commit may not
 * have). */
static int fileb_writer_touch(struct fileb_writer *fw,
			      const struct smux_put_opts *opts, bool sync,
			      struct smux_info *info, struct smux_error *err)
{
	const char *key = fw->base.key;
	struct stat st;

	if (opts && (opts->flags & SMUX_PUT_OWNER)) {
		int rc = smux__file_set_owner(fw->fd, opts->uid, opts->gid);

		if (rc)
			return smux__file_fail(fw->fb, err, -rc, "chown", key);
	}
	if (smux__file_put_has_mode(opts)) {
		if (fchmod(fw->fd, (mode_t)(opts->mode & 07777)) < 0)
			return smux__file_fail(fw->fb, err, errno, "chmod",
					       key);
		fw->mode = opts->mode & 07777;
	}
	if (smux_put_has_mtime(opts)) {
		int rc = smux__file_set_mtime(fw->fd, opts->mtime_ns);

		if (rc)
			return smux__file_fail(fw->fb, err, -rc, "set mtime of",
					       key);
	}
	if (sync && fsync(fw->fd) < 0)
		return smux__file_fail(fw->fb, err, errno, "fsync", key);
	if (sync && smux__file_sync_dir(fw->fb, fw->dirfd) < 0)
		return smux__file_fail(fw->fb, err, errno, "fsync directory of",
				       key);
	if (info) {
		if (fstat(fw->fd, &st) < 0)
			return smux__file_fail(fw->fb, err, errno, "stat", key);
		smux__file_fill_info(&st, info);
	}
	return 0;
}

static int fileb_writer_commit(struct smux_writer *w,
			       const struct smux_ctx *ctx,
			       const struct smux_put_opts *opts,
			       struct smux_info *info, struct smux_error *err)
{
	struct fileb_writer *fw = fileb_writer_from(w);
	struct stat there;
	uint32_t mode;
	bool same, sync;
	int rc;

	if (!fw)
		return fileb_writer_bad(err);
	/* Visible always; durable only when asked (backend.h). */
	sync = opts && opts->durable && !fw->fb->no_fsync;
	rc = smux__file_check_ctx(fw->fb, ctx, err);
	if (rc)
		return rc;
	if (!fileb_writer_pending(fw)) {
		rc = fileb_writer_in_place(fw, &same, err);
		if (rc)
			return rc;
		if (same)
			return fileb_writer_touch(fw, opts, sync, info, err);
		rc = fileb_writer_fork(fw, ctx, err);
		if (rc)
			return rc;
	}
	mode = smux__file_put_has_mode(opts) ? opts->mode & 07777 : fw->mode;
	/* the owner of the object replaced now (a chown since the open
	 * stays), before the mode: a chown clears setuid */
	rc = smux__file_put_owner(fw->tmp.fd, opts,
				  fstatat(fw->dirfd, fw->name, &there,
					  AT_SYMLINK_NOFOLLOW) == 0 &&
						  S_ISREG(there.st_mode)
					  ? &there
					  : NULL);
	if (rc)
		return smux__file_fail(fw->fb, err, -rc, "chown", w->key);
	rc = smux__file_tmp_seal(fw->fb, &fw->tmp, mode,
				 smux_put_has_mtime(opts)
					 ? opts->mtime_ns
					 : SMUX__FILE_MTIME_NOW,
				 sync, w->key, err);
	if (!rc)
		rc = smux__file_tmp_publish(fw->fb, &fw->tmp, fw->name, sync,
					    w->key, info, err);
	if (!rc)
		fw->mode = mode;
	return rc;
}

static void fileb_writer_close(struct smux_writer *w)
{
	struct fileb_writer *fw = fileb_writer_from(w);

	if (!fw)
		return;
	if (fileb_writer_pending(fw))
		smux__file_tmp_discard(&fw->tmp);
	else if (fw->fd >= 0)
		close(fw->fd);
	close(fw->dirfd);
	smux_writer_release(&fw->base);
	free(fw);
}

static const struct smux_writer_ops fileb_writer_ops = {
	.pwrite = fileb_writer_pwrite,
	.pread = fileb_writer_pread,
	.truncate = fileb_writer_truncate,
	.fallocate = fileb_writer_fallocate,
	.size = fileb_writer_size,
	.commit = fileb_writer_commit,
	.close = fileb_writer_close,
};

/* Sets up fw->fd: the current object (clean) or a new temp (pending). */
static int fileb_writer_start(struct fileb_writer *fw, unsigned flags,
			      struct smux_error *err)
{
	const char *key = fw->base.key;
	struct stat st;
	bool exists;
	int fd, rc;

	rc = smux__file_check_target(fw->fb, fw->dirfd, fw->name, key, &st,
				     &exists, err);
	if (rc)
		return rc;
	fw->mode = exists ? st.st_mode & 07777 : SMUX__FILE_DEFAULT_MODE;
	if (exists && !(flags & SMUX_WRITER_TRUNC)) {
		fd = smux__file_open(
			fw->dirfd, fw->name,
			O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0);
		if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
			close(fd);
			fd = -EAGAIN; /* replaced meanwhile */
		}
		if (fd >= 0) {
			fw->fd = fd;
			fw->size = (uint64_t)st.st_size;
			fw->mode = st.st_mode & 07777;
			return 0;
		}
		if (fd != -ENOENT)
			return smux__file_fail(fw->fb, err, -fd, "open", key);
	}
	rc = smux__file_tmp_create(fw->fb, fw->dirfd, &fw->tmp, key, err);
	if (rc)
		return rc;
	fw->fd = fw->tmp.fd;
	fw->size = 0;
	return 0;
}

int smux__file_writer_open(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, unsigned flags,
			   struct smux_writer **out, struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1];
	struct fileb_writer *fw;
	const char *name;
	bool is_dir;
	int rc;

	*out = NULL;
	if (!fb)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT,
				      b ? b->name : NULL, "not a file backend");
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	if (is_dir)
		return smux_error_set(err, SMUX_E_IS_DIRECTORY, fb->base.name,
				      "cannot write to directory marker "
				      "\"%s\"",
				      key);
	if (flags & SMUX_WRITER_INPLACE)
		return smux__file_inplace_open(fb, key, path, flags, out, err);
	fw = calloc(1, sizeof(*fw));
	if (!fw)
		return smux__file_fail(fb, err, ENOMEM, "open writer for", key);
	fw->fb = fb;
	fw->fd = -1;
	fw->tmp.fd = -1;
	rc = smux_writer_init(&fw->base, &fileb_writer_ops, b, key);
	if (rc) {
		free(fw);
		return smux__file_fail(fb, err, ENOMEM, "open writer for", key);
	}
	rc = smux__file_open_parent(fb, path, O_RDONLY, true, &fw->dirfd, &name,
				    "open writer for", key, err);
	if (rc)
		goto out_release;
	/* The name as it sits inside our own copy of the key. */
	fw->name = fw->base.key + (name - path);
	rc = fileb_writer_start(fw, flags, err);
	if (rc)
		goto out_close_dir;
	*out = &fw->base;
	return 0;

out_close_dir:
	close(fw->dirfd);
out_release:
	smux_writer_release(&fw->base);
	free(fw);
	return rc;
}
