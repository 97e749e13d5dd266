/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the FUSE operations table of smuxfs and what every operation
 * shares: init (FUSE configuration and connection tuning), path -> key
 * mapping, libsmux error -> errno mapping, the lookup of what a key is,
 * and struct stat filling.
 *
 * The operations themselves live in ops_meta.c (names, attributes,
 * directories) and ops_io.c (open files and their content). The open-file
 * table is ofile.c's, the .smux/ directory smuxdir.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "fs/fs.h"
#include "smux/mux.h"

#define MIB (1 << 20)

struct smuxfs *smuxfs_get(void)
{
	return fuse_get_context()->private_data;
}

void smuxfs_ctx(struct smux_ctx *ctx)
{
	/* No deadline of our own: a mux root bounds every member call with
	 * its backend_timeout (bulkhead), so no request waits past it. */
	smux_ctx_init(ctx);
}

int smuxfs_path_key(struct smuxfs *fs, const char *path, char *key, size_t cap)
{
	const char *p = path, *seg;
	size_t len, plen = fs->prefix_len;

	if (!path || path[0] != '/')
		return -EINVAL;
	while (*p == '/')
		p++;
	for (seg = p; *seg;) {
		const char *end = strchr(seg, '/');
		size_t n = end ? (size_t)(end - seg) : strlen(seg);

		if (n > SMUX_KEY_SEGMENT_MAX)
			return -ENAMETOOLONG;
		seg += n;
		while (*seg == '/')
			seg++;
	}
	len = strlen(p);
	while (len && p[len - 1] == '/')
		len--;
	if (!len) {
		/* the root: the prefix without its trailing '/' */
		if (plen)
			plen--;
		if (plen >= cap)
			return -ENAMETOOLONG;
		memcpy(key, fs->prefix, plen);
		key[plen] = '\0';
		return 0;
	}
	if (plen + len >= cap || plen + len > SMUX_KEY_MAX - 1)
		return -ENAMETOOLONG;
	memcpy(key, fs->prefix, plen);
	memcpy(key + plen, p, len);
	key[plen + len] = '\0';
	return 0;
}

int smuxfs_dir_prefix(const char *key, char *out, size_t cap)
{
	size_t len = strlen(key);

	if (len + 2 > cap)
		return -ENAMETOOLONG;
	memcpy(out, key, len);
	if (len)
		out[len++] = '/';
	out[len] = '\0';
	return 0;
}

int smuxfs_errno(const struct smux_error *err, const char *op, const char *key)
{
	int e = err->e.sys_errno > 0 ? err->e.sys_errno : EIO;
	int level;
	char msg[512];

	/* a backend in trouble is worth a warning; a request that is
	 * simply wrong (not found, not empty, ...) only a debug line */
	if (smux_error_class(&err->e) == SMUX_CLASS_TRANSIENT)
		level = LOG_WARNING;
	else
		level = LOG_DEBUG;
	if (smux_log_enabled(level))
		smux_log(level, "%s %s: %s", op, key ? key : "",
			 smux_error_format(err, msg, sizeof(msg)));
	return -e;
}

int smuxfs_lookup(struct smuxfs *fs, const char *key, bool is_root,
		  bool *is_dir, struct smux_info *info)
{
	char dkey[SMUX_KEY_MAX + 2];
	struct smuxfs_ofile_attr a;
	struct smuxfs_ofile *of;
	struct smux_info local;
	struct smux_error err;
	struct smux_ctx ctx;
	int rc;

	if (!info)
		info = &local;
	memset(info, 0, sizeof(*info));
	*is_dir = false;
	if (is_root) {
		*is_dir = true;
		info->mode = S_IFDIR | atomic_load(&fs->root_mode);
		info->mtime_ns = atomic_load(&fs->root_mtime_ns);
		return 0;
	}
	of = smuxfs_ofile_find(fs, key);
	if (of) {
		rc = smuxfs_ofile_attr(of, &a);
		smuxfs_ofile_release(fs, of);
		if (rc == 0) {
			info->size = a.size;
			info->mode = S_IFREG | a.mode;
			info->mtime_ns = a.mtime_ns;
			return 0;
		}
	}
	smuxfs_ctx(&ctx);
	rc = smux_backend_head(fs->root, &ctx, key, info, &err);
	if (rc == 0) {
		*is_dir = S_ISDIR(info->mode);
		return 0;
	}
	if (err.e.code != SMUX_E_KEY_NOT_FOUND)
		return smuxfs_errno(&err, "head", key);
	if (fs->real_dirs)
		return -ENOENT; /* a directory would have answered the head */
	/* a directory marker, or a directory implied by keys under it */
	rc = smuxfs_dir_prefix(key, dkey, sizeof(dkey));
	if (rc)
		return rc;
	rc = smux_backend_head(fs->root, &ctx, dkey, info, &err);
	if (rc == 0) {
		*is_dir = true;
		info->mode = S_IFDIR | (info->mode & 07777);
		return 0;
	}
	if (err.e.code == SMUX_E_KEY_NOT_FOUND)
		return -ENOENT;
	return smuxfs_errno(&err, "head", dkey);
}

void smuxfs_fill_stat(struct smuxfs *fs, struct stat *st, bool is_dir,
		      const struct smux_info *info)
{
	uint32_t perm = info ? info->mode & 07777 : 0;
	int64_t t = info && info->mtime_ns ? info->mtime_ns : fs->mount_ns;

	memset(st, 0, sizeof(*st));
	if (!perm)
		perm = is_dir ? 0755 : 0644;
	if (fs->umask)
		perm &= ~(uint32_t)fs->umask;
	st->st_mode = (is_dir ? S_IFDIR : S_IFREG) | perm;
	st->st_nlink = is_dir ? 2 : 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = is_dir || !info ? 0 : (off_t)info->size;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_blksize = MIB;
	st->st_mtim.tv_sec = t / 1000000000;
	st->st_mtim.tv_nsec = t % 1000000000;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

void smuxfs_raise_readahead(struct smuxfs *fs)
{
	FILE *f;

	if (!fs->readahead_path[0] || atomic_load(&fs->readahead_done) ||
	    atomic_exchange(&fs->readahead_done, true))
		return;
	f = fopen(fs->readahead_path, "we");
	if (!f) {
		smux_log(LOG_DEBUG, "read-ahead: cannot open %s: %s",
			 fs->readahead_path, strerror(errno));
		return;
	}
	fputs("8192\n", f);
	if (fclose(f) != 0)
		smux_log(LOG_DEBUG, "read-ahead: cannot write %s: %s",
			 fs->readahead_path, strerror(errno));
	else
		smux_log(LOG_DEBUG, "read-ahead set to 8 MiB (%s)",
			 fs->readahead_path);
}

static void *smuxfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	struct smuxfs *fs = fuse_get_context()->private_data;

	cfg->attr_timeout = fs->opts->attr_timeout;
	cfg->entry_timeout = fs->opts->entry_timeout;
	cfg->negative_timeout = fs->opts->negative_timeout;
	cfg->hard_remove = 1;
	cfg->nullpath_ok = 1;
	cfg->use_ino = 0;
	/* 1 MiB requests; read-ahead can only be lowered here (main.c
	 * raises the mount's bdi read-ahead instead). Async reads stay on. */
	conn->max_write = MIB;
	conn->max_readahead = MIB;
	smux_log(LOG_INFO, "mounted (max_write %u, kernel protocol %u.%u)",
		 conn->max_write, conn->proto_major, conn->proto_minor);
	return fs;
}

static void smuxfs_destroy(void *private_data)
{
	(void)private_data;
	smux_log(LOG_INFO, "unmounting");
}

const struct fuse_operations smuxfs_ops = {
	.getattr = smuxfs_getattr,
	.mknod = smuxfs_mknod,
	.mkdir = smuxfs_mkdir,
	.unlink = smuxfs_unlink,
	.rmdir = smuxfs_rmdir,
	.symlink = smuxfs_symlink,
	.rename = smuxfs_rename,
	.link = smuxfs_link,
	.chmod = smuxfs_chmod,
	.chown = smuxfs_chown,
	.truncate = smuxfs_truncate,
	.open = smuxfs_open,
	.read = smuxfs_read,
	.write = smuxfs_write,
	.statfs = smuxfs_statfs,
	.flush = smuxfs_flush,
	.release = smuxfs_release,
	.fsync = smuxfs_fsync,
	.opendir = smuxfs_opendir,
	.readdir = smuxfs_readdir,
	.releasedir = smuxfs_releasedir,
	.fsyncdir = smuxfs_fsyncdir,
	.init = smuxfs_init,
	.destroy = smuxfs_destroy,
	.create = smuxfs_create,
	.utimens = smuxfs_utimens,
};
