/* SPDX-License-Identifier: MIT */
/*
 * file_reader.c - the file backend's reader: the object's file, opened
 * once (openat2 beneath the root, as every path of this backend) and read
 * with pread, so a READ through the mount costs no path walk.
 *
 * The fd pins the inode and reads it as a local program would: a file
 * written in place (by the mount's in-place writers or by anyone on the
 * backend directory) shows its new bytes, a file that grows is read to
 * its new end (tail -f), and a file replaced by rename or unlinked keeps
 * serving the inode opened. The reader is "live" (backend.h): callers do
 * not pin its version.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/file_internal.h"

struct file_reader {
	struct smux_reader base; /* first */
	int fd;
	char *key; /* for messages */
	struct stat st;
};

static long file_reader_pread(struct smux_reader *r, const struct smux_ctx *ctx,
			      void *buf, size_t len, uint64_t off,
			      struct smux_error *err)
{
	struct file_reader *fr = (struct file_reader *)r;
	const struct smux__file *fb = smux__file_from(r->backend);
	size_t got = 0;
	int rc;

	rc = smux__file_check_ctx(fb, ctx, err);
	if (rc)
		return rc;
	if (off > (uint64_t)INT64_MAX)
		return 0;
	while (got < len) {
		ssize_t n = pread(fr->fd, (char *)buf + got, len - got,
				  (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return smux__file_fail(fb, err, errno, "read", fr->key);
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (long)got;
}

static void file_reader_close(struct smux_reader *r)
{
	struct file_reader *fr = (struct file_reader *)r;

	close(fr->fd);
	free(fr->key);
	smux_reader_release(r);
	free(fr);
}

/* The file opened as it is now: an open descriptor follows its inode
 * through writes, truncation, chmod and the loss of its name. */
static int file_reader_stat(struct smux_reader *r, struct smux_info *info)
{
	struct file_reader *fr = (struct file_reader *)r;
	struct stat st;

	if (fstat(fr->fd, &st) < 0)
		return -errno;
	smux__file_fill_info(&st, info);
	return 0;
}

static int file_reader_setattr(struct smux_reader *r,
			       const struct smux_setattr *a)
{
	return smux__file_fsetattr(((struct file_reader *)r)->fd, a);
}

static const struct smux_reader_ops file_reader_ops = {
	.pread = file_reader_pread,
	.close = file_reader_close,
	.stat = file_reader_stat,
	.setattr = file_reader_setattr,
};

int smux__file_reader_open(struct smux_backend *b, const struct smux_ctx *ctx,
			   const char *key, struct smux_reader **out,
			   struct smux_error *err)
{
	struct smux__file *fb = smux__file_from(b);
	char path[SMUX_KEY_MAX + 1];
	struct file_reader *fr;
	bool is_dir;
	int fd, rc;

	(void)ctx;
	if (!fb)
		return smux_error_set(err, SMUX_E_INVALID_ARGUMENT, b->name,
				      "not a file backend");
	rc = smux__file_key_path(fb, key, SMUX_KEY_ALLOW_DIR, path, &is_dir,
				 err);
	if (rc)
		return rc;
	fr = calloc(1, sizeof(*fr));
	if (!fr || !(fr->key = strdup(key))) {
		free(fr);
		return smux__file_fail(fb, err, ENOMEM, "open", key);
	}
	fd = smux__file_open_object(fb, path, is_dir, false, "open", key,
				    &fr->st, err);
	if (fd < 0) {
		free(fr->key);
		free(fr);
		return fd;
	}
	fr->fd = fd;
	smux_reader_init(&fr->base, &file_reader_ops, b);
	smux__file_fill_info(&fr->st, &fr->base.info);
	fr->base.live = true;
	*out = &fr->base;
	return 0;
}
